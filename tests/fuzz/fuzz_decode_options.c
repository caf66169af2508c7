/* tfm_decoding_create and tfm_decoding_run(_with_prefix) with every
 * decoding option taken from the input, on a tiny model in float32 or in
 * int8: the strategy (greedy, sampling, beam), lengths, special ids,
 * temperature, top-k, top-p, beams, length penalty, n-best, the caches,
 * min_length, repetition penalty, no-repeat n-grams, suppressed tokens,
 * further end tokens, max_length_a/b, forced first and last tokens,
 * patience, bad words, a callback that stops a source, alignments, beam
 * rules and early stopping, renormalised logits, the caches' precision;
 * then a batch of 1 to 3 sources, a forced prefix and 1 or 2 threads.
 * Most values fall in range, some one past it. A run that succeeds writes
 * bos_id, then tokens of the target vocabulary, then -1s, as
 * tfm_decoding_buffer_sizes says, gives the same output when run again,
 * and has alignments when asked. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

enum { SRC_VOCAB = 10, V = 12, MAX_SRC = 6, MAX_TGT = 9 };

static tfm_model *model(int int8)
{
    static tfm_model *models[2];
    if (!models[int8]) {
        tfm_model_options o;
        tfm_model_options_init(&o);
        o.src_vocab = SRC_VOCAB;
        o.tgt_vocab = V;
        o.max_src_len = MAX_SRC;
        o.max_tgt_len = MAX_TGT;
        o.encoder_layers = o.decoder_layers = 1;
        o.d_model = 8;
        o.heads = 2;
        o.d_ff = 16;
        o.seed = 11;
        models[int8] = tfm_model_create(&o);
        if (!models[int8] || tfm_model_set_training(models[int8], 0) != TFM_OK ||
            (int8 && tfm_model_quantize(models[int8], TFM_QUANTIZE_LAYERS |
                                                          TFM_QUANTIZE_GENERATOR) != TFM_OK))
            abort();
    }
    return models[int8];
}

/* Stops a source at a token (the user's); read only, as the threads may
 * call it at once. */
static int stop_at(void *user, int64_t source, int32_t token, int64_t position)
{
    (void)source;
    (void)position;
    return token == *(const int32_t *)user;
}

typedef struct {
    int32_t *tokens, *lengths;
    float *scores, *logits, *probs;
} outputs;

static tfm_status run(tfm_decoding *d, const tfm_tensor *src, const tfm_tensor *prefix,
                      int64_t *sizes, int with_probs, outputs *out)
{
    int64_t n_logits = with_probs ? sizes[3] : 0;
    return tfm_decoding_run_with_prefix(d, src, prefix, out->tokens, sizes[0], out->lengths,
                                        sizes[1], out->scores, sizes[2],
                                        n_logits ? out->logits : NULL, n_logits,
                                        n_logits ? out->probs : NULL, n_logits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bytes in = {data, size};
    tfm_model *m = model((int)fuzz_take(&in, 1) & 1);
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    o.strategy = (int32_t)fuzz_range(&in, 0, 3);
    o.max_length = (int32_t)fuzz_range(&in, 0, MAX_TGT);
    o.bos_id = (int32_t)fuzz_range(&in, -1, V);
    o.eos_id = (int32_t)fuzz_range(&in, -2, V);
    o.src_pad_id = (int32_t)fuzz_range(&in, -2, SRC_VOCAB);
    o.temperature = (float)fuzz_take(&in, 1) / 32.0f;
    o.top_k = (int32_t)fuzz_range(&in, -1, V + 1);
    o.top_p = (float)fuzz_take(&in, 1) / 200.0f;
    o.seed = fuzz_take(&in, 1);
    o.beam_size = (int32_t)fuzz_range(&in, 0, 5);
    o.length_penalty = ((float)fuzz_take(&in, 1) - 64.0f) / 32.0f;
    o.n_best = (int32_t)fuzz_range(&in, 0, 5);
    o.use_cache = (int32_t)fuzz_range(&in, 0, 1);
    o.min_length = (int32_t)fuzz_range(&in, -1, MAX_TGT);
    o.repetition_penalty = (float)fuzz_take(&in, 1) / 64.0f;
    o.no_repeat_ngram_size = (int32_t)fuzz_range(&in, -1, 4);
    int32_t suppress[4], eos_ids[3], bad_words[9], bad_lengths[3];
    o.n_suppress_ids = (int32_t)fuzz_range(&in, 0, 4);
    for (int i = 0; i < o.n_suppress_ids; i++)
        suppress[i] = (int32_t)fuzz_range(&in, -1, V);
    o.suppress_ids = o.n_suppress_ids ? suppress : NULL;
    o.n_eos_ids = (int32_t)fuzz_range(&in, 0, 3);
    for (int i = 0; i < o.n_eos_ids; i++)
        eos_ids[i] = (int32_t)fuzz_range(&in, -1, V);
    o.eos_ids = o.n_eos_ids ? eos_ids : NULL;
    o.max_length_a = ((float)fuzz_take(&in, 1) - 8.0f) / 64.0f;
    int64_t b = fuzz_range(&in, 0, 10);
    o.max_length_b = b == 10 ? INT32_MAX : (int32_t)b;
    o.forced_bos_id = (int32_t)fuzz_range(&in, -2, V);
    o.patience = (float)fuzz_take(&in, 1) / 16.0f;
    o.n_bad_words = (int32_t)fuzz_range(&in, 0, 3);
    for (int i = 0, at = 0; i < o.n_bad_words; i++) {
        bad_lengths[i] = (int32_t)fuzz_range(&in, 0, 3);
        for (int k = 0; k < bad_lengths[i]; k++)
            bad_words[at++] = (int32_t)fuzz_range(&in, -1, V);
    }
    o.bad_words = o.n_bad_words ? bad_words : NULL;
    o.bad_word_lengths = o.n_bad_words ? bad_lengths : NULL;
    int32_t stop = (int32_t)fuzz_range(&in, -1, V);
    o.callback = stop >= 0 ? stop_at : NULL;
    o.callback_user = &stop;
    o.return_attention = (int32_t)fuzz_range(&in, 0, 1);
    o.forced_eos_id = (int32_t)fuzz_range(&in, -2, V);
    o.beam_rules = (int32_t)fuzz_range(&in, 0, 2);
    o.early_stopping = (int32_t)fuzz_range(&in, 0, 3);
    o.renormalize_logits = (int32_t)fuzz_range(&in, 0, 1);
    o.cache_precision = (int32_t)fuzz_range(&in, 0, 3);
    int64_t batch = fuzz_range(&in, 1, 3), length = fuzz_range(&in, 1, MAX_SRC);
    int with_probs = (int)fuzz_take(&in, 1) & 1;
    int64_t prefix_length = fuzz_range(&in, 0, 3);
    int32_t src_ids[3 * MAX_SRC], prefix_ids[3 * 3];
    for (int64_t i = 0; i < batch * length; i++) {
        int64_t id = fuzz_range(&in, 0, 4 * SRC_VOCAB);
        src_ids[i] = (int32_t)(id < 4 * SRC_VOCAB ? id % SRC_VOCAB : SRC_VOCAB); /* rarely out */
    }
    for (int64_t i = 0; i < batch * prefix_length; i++)
        prefix_ids[i] = (int32_t)fuzz_range(&in, -1, V - 1);
    /* groups of sources on libtfm's threads, or all on this one */
    FUZZ_ASSERT(tfm_set_num_threads((int32_t)fuzz_range(&in, 1, 2)) == TFM_OK);

    tfm_decoding *d = tfm_decoding_create(m, &o, 3, MAX_SRC);
    if (!d) {
        FUZZ_ASSERT(tfm_last_status() == TFM_ERR_ARG);
        return 0;
    }
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){batch, length}, src_ids);
    tfm_tensor *prefix = prefix_length ? tfm_tensor_from_i32(2, (const int64_t[]){batch,
                                                             prefix_length}, prefix_ids)
                                       : NULL;
    int64_t sizes[4];
    FUZZ_ASSERT(tfm_decoding_buffer_sizes(d, batch, &sizes[0], &sizes[1], &sizes[2],
                                          &sizes[3]) == TFM_OK);
    outputs out[2];
    for (int k = 0; k < 2; k++) {
        out[k].tokens = calloc((size_t)sizes[0], sizeof(int32_t));
        out[k].lengths = calloc((size_t)sizes[1], sizeof(int32_t));
        out[k].scores = calloc((size_t)sizes[2], sizeof(float));
        out[k].logits = calloc((size_t)sizes[3] + 1, sizeof(float));
        out[k].probs = calloc((size_t)sizes[3] + 1, sizeof(float));
    }
    tfm_status s = run(d, src, prefix, sizes, with_probs, &out[0]);
    FUZZ_ASSERT(s == TFM_OK || s == TFM_ERR_RANGE || s == TFM_ERR_SHAPE || s == TFM_ERR_NUMERIC);
    if (s == TFM_OK) {
        int64_t width = o.max_length + 1, hypotheses = sizes[1];
        for (int64_t h = 0; h < hypotheses; h++) {
            const int32_t *t = out[0].tokens + h * width;
            int32_t n = out[0].lengths[h];
            FUZZ_ASSERT(n >= 0 && n <= width && (n > 0 || o.strategy == TFM_DECODE_BEAM));
            FUZZ_ASSERT(n == 0 || t[0] == o.bos_id);
            for (int64_t i = 1; i < n; i++)
                FUZZ_ASSERT(t[i] >= 0 && t[i] < V);
            for (int64_t i = n; i < width; i++)
                FUZZ_ASSERT(t[i] == -1);
            if (o.return_attention) {
                int64_t rows = -1, columns = -1;
                FUZZ_ASSERT(tfm_decoding_attention(d, h, NULL, 0, &rows, &columns) == TFM_OK);
                FUZZ_ASSERT(rows == (n > 0 ? n - 1 : 0) && columns == length);
                float *weights = malloc((size_t)(rows * columns + 1) * sizeof *weights);
                FUZZ_ASSERT(tfm_decoding_attention(d, h, weights, rows * columns, NULL, NULL) ==
                            TFM_OK);
                free(weights);
            }
        }
        /* the same run again gives the same output */
        FUZZ_ASSERT(run(d, src, prefix, sizes, with_probs, &out[1]) == TFM_OK);
        FUZZ_ASSERT(memcmp(out[0].tokens, out[1].tokens, (size_t)sizes[0] * sizeof(int32_t)) == 0 &&
                    memcmp(out[0].lengths, out[1].lengths, (size_t)sizes[1] * sizeof(int32_t)) ==
                        0 &&
                    memcmp(out[0].scores, out[1].scores, (size_t)sizes[2] * sizeof(float)) == 0);
    }
    for (int k = 0; k < 2; k++) {
        free(out[k].tokens);
        free(out[k].lengths);
        free(out[k].scores);
        free(out[k].logits);
        free(out[k].probs);
    }
    tfm_tensor_free(prefix);
    tfm_tensor_free(src);
    tfm_decoding_free(d);
    return 0;
}
