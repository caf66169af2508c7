/* The user's guide, part 4: threads. libtfm's kernels use their own
 * threads (tfm_set_num_threads) and BLAS's (OPENBLAS_NUM_THREADS); a
 * program's own threads may share one model for inference: in evaluation
 * mode the forwards only read it, so each thread runs them on its own tape.
 * Errors are per thread. Exits 0 when every thread's logits equal the
 * single-threaded ones bit for bit and each thread saw only its own error.
 *
 *   cc threads.c $(pkg-config --cflags --libs tfm) -pthread -o threads
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/tfm.h>

enum { WORKERS = 4, B = 2, S = 7, T = 5, VOCAB = 20 };

typedef struct job {
    tfm_model *model; /* shared, read only */
    int32_t src[B * S], tgt[B * T];
    float logits[B * T * VOCAB];
    int ok, own_error_only;
} job;

/* One evaluation forward on a tape of the calling thread's own. */
static int forward(tfm_model *model, const int32_t *src_ids, const int32_t *tgt_ids, float *out)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){B, S}, src_ids);
    tfm_tensor *tgt = tfm_tensor_from_i32(2, (const int64_t[]){B, T}, tgt_ids);
    int ok = 0;
    if (tape && tfm_tape_set_recording(tape, 0) == TFM_OK) { /* no gradients needed */
        tfm_tensor *causal = tfm_mask_causal(tape, T, TFM_F32);
        tfm_tensor *logits = tfm_model_forward(tape, model, src, tgt, NULL, causal, NULL, NULL,
                                               NULL, NULL);
        ok = logits && tfm_tensor_read_f32(logits, out, B * T * VOCAB) == TFM_OK;
    }
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_tape_free(tape);
    return ok;
}

static void *worker(void *argument)
{
    job *j = argument;
    j->ok = forward(j->model, j->src, j->tgt, j->logits);
    /* A failure here is this thread's alone: the others do not see it. */
    tfm_clear_error();
    j->own_error_only = tfm_tensor_zeros(TFM_F32, 0, NULL) == NULL &&
                        tfm_last_status() == TFM_ERR_NULL;
    return NULL;
}

int main(void)
{
    if (tfm_set_num_threads(2) != TFM_OK) /* libtfm's kernels: two threads */
        return EXIT_FAILURE;
    tfm_model_options options;
    tfm_model_options_init(&options);
    options.src_vocab = VOCAB;
    options.tgt_vocab = VOCAB;
    options.max_src_len = S;
    options.max_tgt_len = T;
    options.d_model = 32;
    options.heads = 4;
    options.d_ff = 64;
    options.encoder_layers = 2;
    options.decoder_layers = 2;
    tfm_model *model = tfm_model_create(&options);
    /* Evaluation mode before the threads start; not while they run. */
    if (!model || tfm_model_set_training(model, 0) != TFM_OK) {
        fprintf(stderr, "threads: %s\n", tfm_last_error());
        tfm_model_free(model);
        return EXIT_FAILURE;
    }
    job jobs[WORKERS];
    tfm_rng *rng = tfm_rng_create(3);
    for (int w = 0; w < WORKERS; w++) {
        jobs[w].model = model;
        for (int i = 0; i < B * S; i++)
            jobs[w].src[i] = (int32_t)(tfm_rng_next_u64(rng) % VOCAB);
        for (int i = 0; i < B * T; i++)
            jobs[w].tgt[i] = (int32_t)(tfm_rng_next_u64(rng) % VOCAB);
    }
    tfm_rng_free(rng);

    pthread_t threads[WORKERS];
    int started = 0;
    while (started < WORKERS &&
           pthread_create(&threads[started], NULL, worker, &jobs[started]) == 0)
        started++;
    for (int w = 0; w < started; w++)
        pthread_join(threads[w], NULL);

    int agree = started == WORKERS;
    for (int w = 0; agree && w < WORKERS; w++) {
        float alone[B * T * VOCAB];
        agree = jobs[w].ok && jobs[w].own_error_only &&
                forward(model, jobs[w].src, jobs[w].tgt, alone) &&
                memcmp(alone, jobs[w].logits, sizeof alone) == 0;
    }
    printf("%d threads shared one model: logits %s the single-threaded ones; "
           "libtfm's kernels used %d threads\n",
           started, agree ? "equal" : "DIFFER from", (int)tfm_get_num_threads());
    tfm_model_free(model);
    return agree ? EXIT_SUCCESS : EXIT_FAILURE;
}
