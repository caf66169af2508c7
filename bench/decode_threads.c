/* The memory of program threads decoding one model at once, each with its
 * own decoding: over one shared packing of the weights
 * (tfm__decode_weights, lib/decode/decode.h) or each packing its own (as
 * tfm_decoding_create's do). Prints the model's float32 bytes, the packed
 * weights' bytes, the resident set before the decodings and the peak
 * (VmHWM) after them; run with 1 thread, then with N, to compare N
 * threads' peak against the weights plus N times one decoding's share:
 *   tfm-bench-decode-threads THREADS shared|own
 * A transformer-base-sized model (d_model 512, 6 + 6 layers, d_ff 2048,
 * vocabularies of 8,000), 16 sources of 32 tokens, beam 4, 48 steps. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode.h"
#include <tfm/tfm.h>

enum { BATCH = 16, SRC = 32, STEPS = 48, VOCAB = 8000 };

/* A line of /proc/self/status in MB ("VmRSS", "VmHWM"), or -1. */
static double status_mb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1.0;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            kb = atof(line + n + 1);
    if (f)
        fclose(f);
    return kb < 0 ? -1.0 : kb / 1024.0;
}

typedef struct job {
    tfm_model *model;
    const tfm__decode_weights *shared; /* NULL: the decoding packs its own */
    const tfm_tensor *src;
    tfm_status status;
} job;

static void *decode(void *arg)
{
    job *j = arg;
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    o.strategy = TFM_DECODE_BEAM;
    o.beam_size = 4;
    o.max_length = STEPS;
    o.eos_id = -1; /* every hypothesis runs every step */
    tfm_decoding *d = j->shared ? tfm__decoding_create_shared("tfm-bench-decode-threads", j->model, &o, BATCH, SRC, j->shared)
                                : tfm_decoding_create(j->model, &o, BATCH, SRC);
    int32_t *tokens = malloc(sizeof *tokens * BATCH * (STEPS + 1));
    int32_t lengths[BATCH];
    j->status = d && tokens ? tfm_decoding_run(d, j->src, tokens, BATCH * (STEPS + 1), lengths,
                                               BATCH, NULL, 0, NULL, 0, NULL, 0)
                            : TFM_ERR_NOMEM;
    free(tokens);
    tfm_decoding_free(d);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 0, shared = argc > 2 && !strcmp(argv[2], "shared");
    if (threads < 1 || threads > 64 || argc != 3 || (!shared && strcmp(argv[2], "own"))) {
        fprintf(stderr, "usage: %s THREADS shared|own\n", argv[0]);
        return 2;
    }
    tfm_model_options mo;
    tfm_model_options_init(&mo);
    mo.src_vocab = mo.tgt_vocab = VOCAB;
    mo.max_src_len = SRC;
    mo.max_tgt_len = STEPS + 1;
    mo.encoder_layers = mo.decoder_layers = 6;
    mo.d_model = 512;
    mo.heads = 8;
    mo.d_ff = 2048;
    tfm_model *m = tfm_model_create(&mo);
    double with_model = status_mb("VmRSS");
    int32_t ids[BATCH * SRC];
    for (int i = 0; i < BATCH * SRC; i++)
        ids[i] = 3 + (i * 37) % (VOCAB - 3);
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){BATCH, SRC}, ids);
    tfm__decode_weights *w = m && shared ? tfm__decode_weights_pack(m) : NULL;
    if (!m || !src || (shared && !w)) {
        fprintf(stderr, "%s\n", tfm_last_error());
        return 1;
    }
    tfm_model_set_training(m, 0);
    double before = status_mb("VmRSS");
    job jobs[64];
    pthread_t ids_of[64];
    for (int t = 0; t < threads; t++) {
        jobs[t] = (job){m, w, src, TFM_OK};
        if (pthread_create(&ids_of[t], NULL, decode, &jobs[t]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    int failed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ids_of[t], NULL);
        failed |= jobs[t].status != TFM_OK;
    }
    if (failed) {
        fprintf(stderr, "a decoding failed\n");
        return 1;
    }
    printf("threads %d, %s weights: model %.1f MB (resident %.1f MB), packed %.1f MB, "
           "resident before the decodings %.1f MB, peak %.1f MB\n", threads,
           shared ? "shared" : "own",
           (double)tfm_params_numel(tfm_model_params(m)) * 4 / (1 << 20), with_model,
           (double)tfm__decode_weights_bytes(w) / (1 << 20), before, status_mb("VmHWM"));
    tfm__decode_weights_free(w);
    tfm_tensor_free(src);
    tfm_model_free(m);
    return 0;
}
