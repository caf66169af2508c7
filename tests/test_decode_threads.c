/* One model decoded by 8 program threads at once, each with its own
 * decodings: greedy (with and without caches, bfloat16 caches), beam
 * search with n-best and alignments, sampling with seeds, forced
 * prefixes; float32 and int8 models, float32 ones with bfloat16 products
 * too (TFM_MATMUL_BFLOAT16, where the CPU has them), decodings that pack
 * their own weights and decodings over one shared packing
 * (decode/decode.h's tfm__decode_weights). Every result is the single-threaded run's, bit
 * for bit, and the model is as it was (its layers still training, so a
 * run that switched them off for itself would let another thread's run
 * drop out). Meant for ThreadSanitizer too (scripts/test.sh). */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "decode/decode.h"
#include "model/model.h"
#include "nn/layer.h"
#include <tfm/tfm.h>

enum {
    THREADS = 8, ROUNDS = 2, BATCH = 20, SRC_LEN = 10, MAX_LEN = 14, VOCAB = 29, PAD = 0,
    BOS = 1, EOS = 2, PREFIX = 3, JOBS = 8, BEAM = 4
};

/* What a job's run writes; alignments [hypotheses][MAX_LEN][SRC_LEN]. */
enum { HYPOTHESES = BATCH * BEAM, TOKENS = HYPOTHESES * (MAX_LEN + 1) };
typedef struct result {
    int32_t tokens[TOKENS], lengths[HYPOTHESES];
    float scores[HYPOTHESES], logits[BATCH * MAX_LEN * VOCAB];
    float alignments[HYPOTHESES * MAX_LEN * SRC_LEN];
    tfm_status status;
} result;

/* Job j's options: every strategy, with and without the caches, n-best,
 * alignments, processors and bfloat16 caches. */
static void job_options(int job, tfm_decode_options *o)
{
    tfm_decode_options_init(o);
    o->max_length = MAX_LEN;
    o->bos_id = BOS;
    o->eos_id = EOS;
    o->src_pad_id = PAD;
    switch (job) {
    case 0: /* greedy */
        break;
    case 1: /* beam, n-best and alignments */
        o->strategy = TFM_DECODE_BEAM;
        o->beam_size = BEAM;
        o->n_best = 2;
        o->return_attention = 1;
        break;
    case 2: /* sampling, seeded */
        o->strategy = TFM_DECODE_SAMPLE;
        o->seed = 7;
        o->top_k = 5;
        o->temperature = 0.8f;
        break;
    case 3: /* greedy with a prefix (run_with_prefix) */
        o->repetition_penalty = 1.3f;
        break;
    case 4: /* beam with a prefix */
        o->strategy = TFM_DECODE_BEAM;
        o->beam_size = BEAM;
        o->n_best = BEAM;
        o->length_penalty = 0.6f;
        break;
    case 5: /* the reference path: tfm_model_decode on the decoding's tape */
        o->use_cache = 0;
        o->return_attention = 1;
        break;
    case 6: /* sampling, nucleus, another seed */
        o->strategy = TFM_DECODE_SAMPLE;
        o->seed = 12345;
        o->top_p = 0.9f;
        o->no_repeat_ngram_size = 2;
        break;
    default: /* greedy over bfloat16 caches, with alignments */
        o->cache_precision = TFM_CACHE_BFLOAT16;
        o->return_attention = 1;
        break;
    }
}

static int job_has_prefix(int job)
{
    return job == 3 || job == 4;
}

/* A model of the kind (0: post-norm, fused, sinusoids; 1: T5's pre-norm,
 * RMS, gated feed-forward and relative position bias), trained mode,
 * dropout on; int8 when asked. */
static tfm_model *make_model(int kind, int int8)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = o.tgt_vocab = VOCAB;
    o.max_src_len = SRC_LEN;
    o.max_tgt_len = MAX_LEN + 1;
    o.encoder_layers = o.decoder_layers = 2;
    o.d_model = 32;
    o.heads = 4;
    o.d_ff = 48;
    o.dropout = 0.2f;
    o.seed = 5 + (uint64_t)kind;
    if (kind == 1) {
        o.norm_first = 1;
        o.rms_norm = 1;
        o.bias = 0;
        o.feed_forward_bias = 0;
        o.fused_qkv = 0;
        o.positions = TFM_POSITIONS_NONE;
        o.gated_feed_forward = 1;
        o.activation = TFM_ACTIVATION_GELU_TANH;
        o.relative_attention_buckets = 8;
        o.relative_attention_max_distance = 10;
    }
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    /* eos likely enough that hypotheses end at different steps */
    tfm_tensor *bias = tfm_params_find(tfm_model_params(m), "generator.bias");
    if (bias)
        tfm_tensor_data_f32(bias)[EOS] += 1.5f;
    if (int8)
        ck_assert_msg(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR) ==
                          TFM_OK, "%s", tfm_last_error());
    return m;
}

static tfm_tensor *sources(void)
{
    int32_t ids[BATCH * SRC_LEN];
    for (int b = 0; b < BATCH; b++) {
        int len = 3 + b % (SRC_LEN - 2);
        for (int s = 0; s < SRC_LEN; s++)
            ids[b * SRC_LEN + s] = s < len ? 3 + (b * 7 + s * 5) % (VOCAB - 3) : PAD;
    }
    return tfm_tensor_from_i32(2, (const int64_t[]){BATCH, SRC_LEN}, ids);
}

/* Each source's forced prefix: 1 to 3 tokens, then -1s. */
static tfm_tensor *prefixes(void)
{
    int32_t ids[BATCH * PREFIX];
    for (int b = 0; b < BATCH; b++)
        for (int t = 0; t < PREFIX; t++)
            ids[b * PREFIX + t] = t <= b % PREFIX ? 3 + (b + t * 11) % (VOCAB - 3) : -1;
    return tfm_tensor_from_i32(2, (const int64_t[]){BATCH, PREFIX}, ids);
}

/* The decoding for a job: its own weights, or the shared ones. */
static tfm_decoding *job_decoding(tfm_model *m, int job, const tfm__decode_weights *shared)
{
    tfm_decode_options o;
    job_options(job, &o);
    return shared ? tfm__decoding_create_shared("test", m, &o, BATCH, SRC_LEN, shared)
                  : tfm_decoding_create(m, &o, BATCH, SRC_LEN);
}

/* Runs the job's decoding into r (zeroed first); r->status says how. */
static void run_job(tfm_decoding *d, int job, const tfm_tensor *src, const tfm_tensor *prefix,
                    result *r)
{
    memset(r, 0, sizeof *r);
    tfm_decode_options o;
    job_options(job, &o);
    float *logits = o.strategy == TFM_DECODE_BEAM ? NULL : r->logits;
    int64_t logits_count = logits ? BATCH * MAX_LEN * VOCAB : 0;
    r->status = tfm_decoding_run_with_prefix(d, src, job_has_prefix(job) ? prefix : NULL,
                                             r->tokens, TOKENS, r->lengths, HYPOTHESES,
                                             r->scores, HYPOTHESES, logits, logits_count,
                                             NULL, 0);
    if (r->status != TFM_OK || !o.return_attention)
        return;
    int64_t hypotheses = BATCH * (o.strategy == TFM_DECODE_BEAM ? o.n_best : 1);
    for (int64_t h = 0; h < hypotheses && r->status == TFM_OK; h++)
        r->status = tfm_decoding_attention(d, h, r->alignments + h * MAX_LEN * SRC_LEN,
                                           MAX_LEN * SRC_LEN, NULL, NULL);
}

typedef struct worker {
    int index;
    tfm_model *model;
    const tfm__decode_weights *shared;
    const tfm_tensor *src, *prefix;
    const result *expected; /* [JOBS] */
    int mismatches;         /* results not the single-threaded run's */
    tfm_status status;
    char error[256];
} worker;

/* A thread's decodings, one per job, its own weights or the shared ones
 * on alternate threads; ROUNDS rounds of every job, each thread starting
 * at its own job, so that different jobs run at once. */
static void *decode_jobs(void *arg)
{
    worker *w = arg;
    tfm_decoding *decodings[JOBS] = {0};
    result *r = malloc(sizeof *r);
    w->status = r ? TFM_OK : TFM_ERR_NOMEM;
    for (int j = 0; j < JOBS && w->status == TFM_OK; j++)
        if (!(decodings[j] = job_decoding(w->model, j, w->index % 2 ? w->shared : NULL)))
            w->status = tfm_last_status();
    for (int i = 0; i < ROUNDS * JOBS && w->status == TFM_OK; i++) {
        int job = (w->index + i) % JOBS;
        run_job(decodings[job], job, w->src, w->prefix, r);
        w->status = r->status;
        w->mismatches += w->status == TFM_OK &&
                         memcmp(r, &w->expected[job], sizeof *r) != 0;
    }
    if (w->status != TFM_OK)
        snprintf(w->error, sizeof w->error, "%s", tfm_last_error());
    for (int j = 0; j < JOBS; j++)
        tfm_decoding_free(decodings[j]);
    free(r);
    return NULL;
}

/* Whether every layer of the model still trains (a quantized model's
 * never do). */
static int32_t layers_training(const tfm_model *m)
{
    return m->encoder->training && m->decoder->training && m->dropout->training &&
           m->encoder->children[0]->children[TFM__BLK_DROP1]->training;
}

/* _i: model kind (bit 0), int8 (bit 1), bfloat16 products (bit 2). */
START_TEST(eight_threads_decode_one_model_as_one_thread_does)
{
    int kind = _i & 1, int8 = (_i >> 1) & 1, bf16 = _i >> 2;
    if (bf16 && tfm_set_matmul_precision(TFM_MATMUL_BFLOAT16) != TFM_OK)
        return; /* no AVX512_BF16 here: refused (test_int8_model.c) */
    ck_assert_int_eq(tfm_set_num_threads(2), TFM_OK); /* a pool the threads contend for */
    tfm_model *m = make_model(kind, int8);
    tfm_tensor *src = sources(), *prefix = prefixes();
    result *expected = malloc(JOBS * sizeof *expected);
    ck_assert_ptr_nonnull(expected);
    for (int j = 0; j < JOBS; j++) {
        tfm_decoding *d = job_decoding(m, j, NULL);
        ck_assert_msg(d != NULL, "%s", tfm_last_error());
        run_job(d, j, src, prefix, &expected[j]);
        ck_assert_msg(expected[j].status == TFM_OK, "job %d: %s", j, tfm_last_error());
        tfm_decoding_free(d);
    }
    tfm__decode_weights *shared = tfm__decode_weights_pack(m);
    ck_assert_msg(shared != NULL, "%s", tfm_last_error());
    ck_assert_uint_gt(tfm__decode_weights_bytes(shared), 0);
    ck_assert_int_eq(shared->bf16, bf16);
    worker workers[THREADS];
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++) {
        workers[t] = (worker){t, m, shared, src, prefix, expected, 0, TFM_OK, ""};
        ck_assert_int_eq(pthread_create(&threads[t], NULL, decode_jobs, &workers[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        ck_assert_int_eq(pthread_join(threads[t], NULL), 0);
    for (int t = 0; t < THREADS; t++) {
        ck_assert_msg(workers[t].status == TFM_OK, "thread %d: %s", t, workers[t].error);
        ck_assert_msg(workers[t].mismatches == 0, "thread %d (%s weights): %d of %d results "
                      "differ from the single-threaded run's", t,
                      t % 2 ? "shared" : "its own", workers[t].mismatches, ROUNDS * JOBS);
    }
    ck_assert_int_eq(layers_training(m), !int8);
    tfm__decode_weights_free(shared);
    free(expected);
    tfm_tensor_free(src);
    tfm_tensor_free(prefix);
    tfm_model_free(m);
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
    ck_assert_int_eq(tfm_set_matmul_precision(TFM_MATMUL_FLOAT32), TFM_OK);
}
END_TEST

/* Shared weights belong to the model they were packed from, as it was:
 * another model's are refused at creation, and a model quantized after
 * its weights were packed at the run (a decoding of its own repacks). */
START_TEST(shared_weights_are_their_models)
{
    tfm_model *m = make_model(0, 0), *other = make_model(1, 0);
    tfm_decode_options o;
    job_options(0, &o);
    tfm__decode_weights *shared = tfm__decode_weights_pack(m);
    ck_assert_ptr_nonnull(shared);
    ck_assert_ptr_null(tfm__decoding_create_shared("test", other, &o, BATCH, SRC_LEN, shared));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    ck_assert_ptr_null(tfm__decoding_create_shared("test", m, &o, BATCH, SRC_LEN, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_null(tfm__decode_weights_pack(NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    tfm_decoding *d = tfm__decoding_create_shared("test", m, &o, BATCH, SRC_LEN, shared);
    ck_assert_msg(d != NULL, "%s", tfm_last_error());
    tfm_tensor *src = sources();
    result *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    run_job(d, 0, src, NULL, r);
    ck_assert_msg(r->status == TFM_OK, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS), TFM_OK);
    run_job(d, 0, src, NULL, r);
    ck_assert_int_eq(r->status, TFM_ERR_STATE);
    ck_assert_msg(strstr(tfm_last_error(), "tfm_decoding_run_with_prefix: the model was "
                         "quantized after its shared weights were packed"),
                  "%s", tfm_last_error());
    tfm_decoding_free(d);
    tfm__decode_weights_free(shared);
    free(r);
    tfm_tensor_free(src);
    tfm_model_free(m);
    tfm_model_free(other);
}
END_TEST

static Suite *decode_threads_suite(void)
{
    Suite *s = suite_create("decode_threads");
    TCase *tc = tcase_create("threads");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, eight_threads_decode_one_model_as_one_thread_does, 0, 6);
    tcase_add_test(tc, shared_weights_are_their_models);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(decode_threads_suite)
