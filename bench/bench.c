/* tfm-bench: times a full training step (forward, loss, backward, Adam
 * step) or greedy or beam decoding at one tutorial's configuration, with
 * the data already in memory, and prints one JSON line for bench/run.py:
 *
 *   median and min ms of the timed steps (decode: the whole run, and
 *     tokens_per_s: the sources' max_length tokens each over its time);
 *   gemm_gflop: the FLOPs of the step's cblas_sgemm calls, recorded by
 *     interposing cblas_sgemm during one step;
 *   sgemm_ms: the time cblas_sgemm alone takes for those calls, timed here
 *     on the same shapes with the BLAS's own threads, so libtfm's step can
 *     be read as a fraction of the BLAS rate (the recorded step runs on
 *     one libtfm thread, whose products are whole: with more, libtfm
 *     splits them and sets the BLAS to one thread);
 *   peak RSS, and malloc-family calls per steady-state step (all callers,
 *     and libtfm's own).
 *
 * Threads: libtfm's own from --threads, OpenBLAS's from OPENBLAS_NUM_THREADS
 * (bench/run.py sets both to the same count). */
#define _GNU_SOURCE
#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <tfm/tfm.h>

#include "alloc_counter.h"

typedef struct bench_config {
    const char *name;
    int64_t src_vocab, tgt_vocab, src_len, tgt_len, batch;
    int64_t d_model, heads, layers, d_ff;
    float dropout, lr, beta2, eps;
    int tutorial_003; /* learned positions, trainable scale, separate q/k/v */
    int share_embeddings, final_norm;
    int32_t pad; /* masked in the source and target, ignored by the loss; -1: none */
    int translation; /* the README's translation model: pre-norm, tied, scaled by sqrt(d) */
} bench_config;

/* Lengths are the decoder's input (the target minus its last token). */
static const bench_config configs[] = {
    {"003", 37, 30, 22, 84, 32, 64, 8, 2, 128, 0.1f, 2e-4f, 0.999f, 1e-8f, 1, 0, 0, 0, 0},
    {"avg", 13, 13, 91, 9, 32, 256, 4, 3, 128, 0.1f, 1e-3f, 0.999f, 1e-8f, 0, 1, 1, -1, 0},
    {"002", 5000, 5000, 100, 99, 64, 512, 8, 6, 2048, 0.1f, 1e-4f, 0.98f, 1e-9f, 0, 0, 0, 0, 0},
    /* the README's translation model's shape (8,000 pieces, d 256, 3 + 3
     * layers); sentences of 32 pieces translated into 48 */
    {"translation", 8000, 8000, 32, 48, 64, 256, 4, 3, 1024, 0.1f, 7e-4f, 0.98f, 1e-9f, 0, 1, 1, -1, 1},
};

/* --- cblas_sgemm, recorded ------------------------------------------------------ */

typedef struct gemm_shape {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float beta;
    long calls;
} gemm_shape;

#define MAX_SHAPES 512
static gemm_shape shapes[MAX_SHAPES];
static int shape_count, recording, shapes_overflowed;

typedef void (*sgemm_fn)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE,
                         const enum CBLAS_TRANSPOSE, const int, const int, const int,
                         const float, const float *, const int, const float *, const int,
                         const float, float *, const int);
static sgemm_fn real_sgemm;

static void record_shape(const gemm_shape *s)
{
    for (int i = 0; i < shape_count; i++) {
        gemm_shape *t = &shapes[i];
        if (t->ta == s->ta && t->tb == s->tb && t->m == s->m && t->n == s->n && t->k == s->k &&
            t->lda == s->lda && t->ldb == s->ldb && t->ldc == s->ldc && t->beta == s->beta) {
            t->calls++;
            return;
        }
    }
    if (shape_count == MAX_SHAPES) {
        shapes_overflowed = 1;
        return;
    }
    shapes[shape_count] = *s;
    shapes[shape_count++].calls = 1;
}

/* libtfm.so's calls bind to this definition, exported by the executable. */
void cblas_sgemm(const enum CBLAS_ORDER order, const enum CBLAS_TRANSPOSE ta,
                 const enum CBLAS_TRANSPOSE tb, const int m, const int n, const int k,
                 const float alpha, const float *a, const int lda, const float *b,
                 const int ldb, const float beta, float *c, const int ldc)
{
    if (recording && order == CblasRowMajor)
        record_shape(&(gemm_shape){ta == CblasTrans, tb == CblasTrans, m, n, k, lda, ldb, ldc,
                                   beta, 0});
    real_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static double gemm_gflop(void)
{
    double flop = 0.0;
    for (int i = 0; i < shape_count; i++)
        flop += 2.0 * shapes[i].m * shapes[i].n * shapes[i].k * (double)shapes[i].calls;
    return flop * 1e-9;
}

/* Each recorded shape timed on its own buffers, the minimum over repeats of
 * at least 20 ms, times its calls in a step. */
static double sgemm_ms(void)
{
    double total = 0.0;
    for (int i = 0; i < shape_count; i++) {
        const gemm_shape *s = &shapes[i];
        size_t a_size = (size_t)(s->ta ? s->k : s->m) * (size_t)s->lda;
        size_t b_size = (size_t)(s->tb ? s->n : s->k) * (size_t)s->ldb;
        size_t c_size = (size_t)s->m * (size_t)s->ldc;
        float *a = malloc(a_size * sizeof *a), *b = malloc(b_size * sizeof *b),
              *c = calloc(c_size, sizeof *c);
        if (!a || !b || !c) {
            free(a);
            free(b);
            free(c);
            return NAN;
        }
        for (size_t j = 0; j < a_size; j++)
            a[j] = (float)(j % 7) * 0.1f;
        for (size_t j = 0; j < b_size; j++)
            b[j] = (float)(j % 5) * 0.1f;
        double best = INFINITY;
        for (int repeat = 0; repeat < 3; repeat++) {
            long calls = 0;
            double start = now_ms(), elapsed;
            do {
                real_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans,
                           s->tb ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1.0f, a, s->lda,
                           b, s->ldb, s->beta, c, s->ldc);
                calls++;
                elapsed = now_ms() - start;
            } while (elapsed < 20.0 || calls < 2);
            if (elapsed / (double)calls < best)
                best = elapsed / (double)calls;
        }
        total += best * (double)s->calls;
        free(a);
        free(b);
        free(c);
    }
    return total;
}

/* --- the model and its data ------------------------------------------------------- */

/* What --precision int8 quantizes: the layers and the generator, as
 * quantize_dynamic quantizes every nn.Linear of the PyTorch twin
 * (docs/performance.md has what the generator's int8 costs in accuracy). */
#define INT8_PARTS (TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR)

static tfm_model *build_model(const bench_config *c)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = c->src_vocab;
    o.tgt_vocab = c->tgt_vocab;
    o.max_src_len = c->src_len;
    o.max_tgt_len = c->tgt_len + 1;
    o.share_embeddings = c->share_embeddings;
    o.encoder_layers = o.decoder_layers = (int32_t)c->layers;
    o.final_norm = c->final_norm;
    o.d_model = c->d_model;
    o.heads = (int32_t)c->heads;
    o.d_ff = c->d_ff;
    o.dropout = c->dropout;
    if (c->tutorial_003) {
        o.positions = TFM_POSITIONS_LEARNED;
        o.embedding_scale = TFM_EMBEDDING_SCALE_TRAINABLE;
        o.fused_qkv = 0;
        o.trainable_scale = 1;
        o.scale_init = sqrtf((float)c->d_model);
    }
    if (c->translation) {
        o.norm_first = 1;
        o.tie_generator = 1;
        o.embedding_scale = TFM_EMBEDDING_SCALE_SQRT_D;
    } else if (c->share_embeddings) {
        o.embedding_dropout = 0.0f; /* tutorials 000/001 */
    }
    return tfm_model_create(&o);
}

/* Random tokens in [1, vocab): no padding, as every twin's data. */
static tfm_tensor *random_tokens(int64_t rows, int64_t cols, int64_t vocab, tfm_rng *rng)
{
    tfm_tensor *t = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){rows, cols});
    if (!t)
        return NULL;
    int32_t *v = tfm_tensor_data_i32(t);
    for (int64_t i = 0; i < rows * cols; i++)
        v[i] = 1 + (int32_t)(tfm_rng_next_u64(rng) % (uint64_t)(vocab - 1));
    return t;
}

typedef struct batch {
    tfm_tensor *src, *tgt_in, *labels;
} batch;

/* One random batch of the configuration's sizes; 0, or -1 (b partly made:
 * free it all the same). */
static int make_batch(const bench_config *c, tfm_rng *rng, batch *b)
{
    b->src = random_tokens(c->batch, c->src_len, c->src_vocab, rng);
    b->tgt_in = random_tokens(c->batch, c->tgt_len, c->tgt_vocab, rng);
    b->labels = random_tokens(c->batch, c->tgt_len, c->tgt_vocab, rng);
    return b->src && b->tgt_in && b->labels ? 0 : -1;
}

static void free_batch(batch *b)
{
    tfm_tensor_free(b->src);
    tfm_tensor_free(b->tgt_in);
    tfm_tensor_free(b->labels);
}

/* The tutorial's Adam over the model's parameters. */
static tfm_optimizer *make_adam(const bench_config *c, tfm_model *model)
{
    tfm_optimizer_options oo;
    tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAM);
    oo.lr = c->lr;
    oo.beta2 = c->beta2;
    oo.eps = c->eps;
    return tfm_optimizer_create(tfm_model_params(model), &oo);
}

/* What a training job holds: the model (as the rng's seed 7 makes it),
 * its Adam, a tape and one random batch. */
typedef struct trainer {
    tfm_rng *rng;
    tfm_model *model;
    tfm_tape *tape;
    tfm_optimizer *adam;
    batch b;
} trainer;

static void trainer_close(trainer *t)
{
    free_batch(&t->b);
    tfm_optimizer_free(t->adam);
    tfm_tape_free(t->tape);
    tfm_model_free(t->model);
    tfm_rng_free(t->rng);
}

/* 0, or -1 (close it all the same). */
static int trainer_open(trainer *t, const bench_config *c, uint32_t recompute)
{
    *t = (trainer){0};
    t->rng = tfm_rng_create(7);
    t->model = build_model(c);
    t->tape = tfm_tape_create();
    t->adam = t->model ? make_adam(c, t->model) : NULL;
    return t->rng && t->model && t->tape && t->adam &&
                   tfm_model_set_recompute(t->model, recompute) == TFM_OK &&
                   make_batch(c, t->rng, &t->b) == 0
               ? 0
               : -1;
}

/* The batch's mean cross-entropy, on the tape. */
static tfm_tensor *batch_loss(tfm_tape *tape, tfm_model *model, const bench_config *c,
                              const batch *b)
{
    tfm_tensor *src_mask = NULL, *tgt_mask = tfm_mask_causal(tape, c->tgt_len, TFM_I32);
    if (c->pad >= 0 && c->tutorial_003) {
        src_mask = tfm_mask_padding(tape, b->src, c->pad, TFM_I32);
        tgt_mask = tfm_mask_combine(tape, tfm_mask_padding(tape, b->tgt_in, c->pad, TFM_I32),
                                    tgt_mask);
    }
    tfm_tensor *logits =
        tfm_model_forward(tape, model, b->src, b->tgt_in, src_mask, tgt_mask, src_mask, NULL, NULL, NULL);
    return tfm_cross_entropy(tape, logits, b->labels, c->pad, 0.0f);
}

static tfm_status train_step(tfm_tape *tape, tfm_model *model, tfm_optimizer *adam,
                             const bench_config *c, const batch *b)
{
    tfm_tensor *loss = batch_loss(tape, model, c, b);
    tfm_status s = loss ? tfm_tape_backward(tape, loss) : tfm_last_status();
    if (s == TFM_OK)
        s = tfm_optimizer_step(adam);
    if (s == TFM_OK)
        s = tfm_optimizer_zero_grad(adam);
    tfm_tape_reset(tape);
    return s;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct result {
    double median_ms, min_ms;
    long allocs, libtfm_allocs; /* over the timed part */
    int steps;
    double tape_mb; /* the tape's arena after the steps */
} result;

static int bench_train(const bench_config *c, int steps, int warmup, uint32_t recompute,
                       result *r)
{
    trainer t;
    double *times = calloc((size_t)steps, sizeof *times);
    int ok = trainer_open(&t, c, recompute) == 0 && times;
    tfm_tape *tape = t.tape;
    tfm_model *model = t.model;
    tfm_optimizer *adam = t.adam;
    const batch b = t.b;
    /* An extra first step shows the GEMMs, whole: every product through
     * cblas_sgemm, on one thread. It warms up nothing of the timed
     * configuration (its threads, its precision's buffers): `warmup` more
     * steps do. */
    int threads = tfm_get_num_threads();
    tfm_matmul_precision precision = tfm_get_matmul_precision();
    if (ok) {
        recording = 1;
        tfm_set_num_threads(1);
        tfm_set_matmul_precision(TFM_MATMUL_FLOAT32);
        ok = train_step(tape, model, adam, c, &b) == TFM_OK;
        tfm_set_num_threads(threads);
        tfm_set_matmul_precision(precision);
        recording = 0;
    }
    for (int i = 0; ok && i < warmup; i++)
        ok = train_step(tape, model, adam, c, &b) == TFM_OK;
    long allocs = alloc_counter_total(), libtfm_allocs = alloc_counter_libtfm();
    for (int i = 0; ok && i < steps; i++) {
        double start = now_ms();
        ok = train_step(tape, model, adam, c, &b) == TFM_OK;
        times[i] = now_ms() - start;
    }
    r->allocs = alloc_counter_total() - allocs;
    r->libtfm_allocs = alloc_counter_libtfm() - libtfm_allocs;
    if (ok) {
        qsort(times, (size_t)steps, sizeof *times, compare_doubles);
        r->median_ms = steps % 2 ? times[steps / 2]
                                 : 0.5 * (times[steps / 2 - 1] + times[steps / 2]);
        r->min_ms = times[0];
        r->steps = steps;
        r->tape_mb = (double)tfm_tape_arena_bytes(tape) / (1 << 20);
    } else {
        fprintf(stderr, "tfm-bench: %s\n", tfm_last_error());
    }
    free(times);
    trainer_close(&t);
    return ok ? 0 : -1;
}

/* The batch's mean loss in evaluation mode; NaN on error. */
static double eval_loss(tfm_tape *tape, tfm_model *model, const bench_config *c, const batch *b)
{
    tfm_model_set_training(model, 0);
    tfm_tape_set_recording(tape, 0);
    tfm_tensor *loss = batch_loss(tape, model, c, b);
    float value = NAN;
    if (!loss || tfm_tensor_item(loss, &value) != TFM_OK)
        fprintf(stderr, "tfm-bench: %s\n", tfm_last_error());
    tfm_tape_reset(tape);
    tfm_tape_set_recording(tape, 1);
    return value;
}

/* What int8 costs a trained model: `steps` steps on one fixed batch of
 * random tokens (tutorial 002's training, one step per epoch), then that
 * batch's loss in evaluation mode in float32, with the layers quantized,
 * and with the generator too. The model goes through a file (path) so
 * that each quantization starts from the same float32 weights. */
static int bench_int8_loss(const bench_config *c, int steps, const char *path)
{
    trainer t;
    int ok = trainer_open(&t, c, 0) == 0;
    for (int i = 0; ok && i < steps; i++)
        ok = train_step(t.tape, t.model, t.adam, c, &t.b) == TFM_OK;
    double losses[3] = {NAN, NAN, NAN};
    if (ok) {
        losses[0] = eval_loss(t.tape, t.model, c, &t.b);
        ok = tfm_model_save(t.model, path) == TFM_OK;
    }
    const tfm_quantize parts[2] = {TFM_QUANTIZE_LAYERS, TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR};
    for (int q = 0; ok && q < 2; q++) {
        tfm_model *quantized = tfm_model_load(path);
        ok = quantized && tfm_model_quantize(quantized, parts[q]) == TFM_OK;
        if (ok)
            losses[1 + q] = eval_loss(t.tape, quantized, c, &t.b);
        tfm_model_free(quantized);
    }
    if (ok)
        printf("{\"impl\":\"libtfm\",\"config\":\"%s\",\"what\":\"int8-loss\",\"steps\":%d,"
               "\"loss_float32\":%.6f,\"loss_int8_layers\":%.6f,\"loss_int8_all\":%.6f,"
               "\"int8_layers_relative\":%.5f,\"int8_all_relative\":%.5f}\n",
               c->name, steps, losses[0], losses[1], losses[2], losses[1] / losses[0] - 1.0,
               losses[2] / losses[0] - 1.0);
    else
        fprintf(stderr, "tfm-bench: %s\n", tfm_last_error());
    trainer_close(&t);
    return ok ? 0 : -1;
}

/* Greedy (beam 1) or beam decoding of `sources` random sources, `per_call`
 * at a time, always generating the full tgt_len tokens (no <eos>), as the
 * PyTorch twin. */
static int bench_decode(const bench_config *c, int64_t sources, int64_t per_call, int32_t beam,
                        int int8, tfm_cache_precision cache, result *r)
{
    tfm_rng *rng = tfm_rng_create(11);
    tfm_model *model = build_model(c);
    if (model && int8 && tfm_model_quantize(model, INT8_PARTS) != TFM_OK) {
        fprintf(stderr, "tfm-bench: %s\n", tfm_last_error());
        tfm_model_free(model);
        model = NULL;
    }
    tfm_tensor *all = rng ? random_tokens(sources, c->src_len, c->src_vocab, rng) : NULL;
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    o.max_length = (int32_t)c->tgt_len;
    o.bos_id = 1;
    o.eos_id = -1;
    o.src_pad_id = c->pad;
    o.cache_precision = cache;
    if (beam > 1) {
        o.strategy = TFM_DECODE_BEAM;
        o.beam_size = beam;
    }
    tfm_decoding *decoding = model ? tfm_decoding_create(model, &o, per_call, c->src_len) : NULL;
    int32_t *tokens = malloc((size_t)(per_call * (c->tgt_len + 1)) * sizeof *tokens);
    int32_t *lengths = malloc((size_t)per_call * sizeof *lengths);
    tfm_tensor *chunk = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){per_call, c->src_len});
    int ok = all && decoding && tokens && lengths && chunk;
    /* warm-up: one call, so that first-touch costs are not timed */
    if (ok) {
        memcpy(tfm_tensor_data_i32(chunk), tfm_tensor_data_i32(all),
               (size_t)(per_call * c->src_len) * sizeof(int32_t));
        ok = tfm_decoding_run(decoding, chunk, tokens, per_call * (c->tgt_len + 1), lengths,
                              per_call, NULL, 0, NULL, 0, NULL, 0) == TFM_OK;
    }
    /* the sources, per call, made before the clock starts */
    int64_t calls = (sources + per_call - 1) / per_call;
    tfm_tensor **chunks = calloc((size_t)calls, sizeof *chunks);
    ok = ok && chunks;
    for (int64_t i = 0; ok && i < calls; i++) {
        int64_t first = i * per_call, n = sources - first < per_call ? sources - first : per_call;
        chunks[i] = tfm_tensor_from_i32(2, (const int64_t[]){n, c->src_len},
                                        tfm_tensor_data_i32(all) + first * c->src_len);
        ok = chunks[i] != NULL;
    }
    long allocs = alloc_counter_total(), libtfm_allocs = alloc_counter_libtfm();
    double start = now_ms();
    for (int64_t i = 0; ok && i < calls; i++)
        ok = tfm_decoding_run(decoding, chunks[i], tokens, per_call * (c->tgt_len + 1), lengths,
                              per_call, NULL, 0, NULL, 0, NULL, 0) == TFM_OK;
    r->median_ms = r->min_ms = now_ms() - start;
    r->steps = 1;
    r->allocs = alloc_counter_total() - allocs;
    r->libtfm_allocs = alloc_counter_libtfm() - libtfm_allocs;
    if (!ok)
        fprintf(stderr, "tfm-bench: %s\n", tfm_last_error());
    for (int64_t i = 0; chunks && i < calls; i++)
        tfm_tensor_free(chunks[i]);
    free(chunks);
    tfm_tensor_free(chunk);
    free(tokens);
    free(lengths);
    tfm_decoding_free(decoding);
    tfm_tensor_free(all);
    tfm_model_free(model);
    tfm_rng_free(rng);
    return ok ? 0 : -1;
}

static void usage(const char *program)
{
    fprintf(stderr,
            "usage: %s --config 003|avg|002|translation --what train|decode [--steps N] [--warmup N] "
            "[--sources N] [--decode-batch N] [--beam N] [--batch N] [--threads N] [--sgemm 0|1] "
            "[--recompute FLAGS] [--precision float32|bfloat16|int8]\n"
            "       [--cache auto|float32|bfloat16] (decode: the key/value caches' precision)\n"
            "       %s --config 003|avg|002 --what int8-loss [--steps N] [--threads N]\n",
            program, program);
}

int main(int argc, char **argv)
{
    const char *config_name = "003", *what = "train";
    long steps = 10, warmup = 3, sources = 750, decode_batch = 250, batch = 0, time_sgemm = 1;
    long threads = 1, beam = 1, recompute = 0;
    const char *precision = "float32", *cache = "auto";
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (!strcmp(flag, "--config"))
            config_name = value;
        else if (!strcmp(flag, "--what"))
            what = value;
        else if (!strcmp(flag, "--steps"))
            steps = strtol(value, NULL, 10);
        else if (!strcmp(flag, "--warmup"))
            warmup = strtol(value, NULL, 10);
        else if (!strcmp(flag, "--sources"))
            sources = strtol(value, NULL, 10);
        else if (!strcmp(flag, "--threads")) /* libtfm's own; BLAS's come from its variables */
            threads = strtol(value, NULL, 10);
        else if (!strcmp(flag, "--sgemm")) /* 0: skip timing BLAS alone (for profiles) */
            time_sgemm = strtol(value, NULL, 10);
        else if (!strcmp(flag, "--batch"))
            batch = strtol(value, NULL, 10);
        else if (!strcmp(flag, "--beam"))
            beam = strtol(value, NULL, 10);
        else if (!strcmp(flag, "--recompute")) /* TFM_RECOMPUTE_* flags: 1, the weights */
            recompute = strtol(value, NULL, 10);
        else if (!strcmp(flag, "--precision"))
            precision = value;
        else if (!strcmp(flag, "--cache")) /* decoding's key/value caches */
            cache = value;
        else if (!strcmp(flag, "--decode-batch"))
            decode_batch = strtol(value, NULL, 10);
        else {
            usage(argv[0]);
            return 2;
        }
    }
    bench_config chosen, *c = NULL;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++)
        if (!strcmp(configs[i].name, config_name)) {
            chosen = configs[i];
            c = &chosen;
        }
    if (c && batch > 0) /* a smaller batch, e.g. to look at memory quickly */
        c->batch = batch;
    if (c && !strcmp(what, "decode")) /* decoding reports its sources per call */
        c->batch = decode_batch < sources ? decode_batch : sources;
    int train = !strcmp(what, "train"), int8_loss = !strcmp(what, "int8-loss");
    if (!c || (!train && !int8_loss && strcmp(what, "decode")) || steps < 1 || steps > 100000 || warmup < 1 ||
        sources < 1 || decode_batch < 1 || beam < 1 || beam > 64 || (argc - 1) % 2) {
        usage(argv[0]);
        return 2;
    }
    *(void **)&real_sgemm = dlsym(RTLD_NEXT, "cblas_sgemm"); /* POSIX's way */
    int bf16 = !strcmp(precision, "bfloat16"), int8 = !strcmp(precision, "int8");
    static const char *const caches[] = {[TFM_CACHE_AUTO] = "auto",
                                         [TFM_CACHE_FLOAT32] = "float32",
                                         [TFM_CACHE_BFLOAT16] = "bfloat16"};
    tfm_cache_precision cache_precision = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(cache, caches[i]))
            cache_precision = i;
    /* int8 is for decoding: a quantized model does not train */
    if ((!bf16 && !int8 && strcmp(precision, "float32")) || (int8 && strcmp(what, "decode")) ||
        cache_precision < 0) {
        usage(argv[0]);
        return 2;
    }
    if (tfm_set_num_threads((int32_t)threads) != TFM_OK ||
        (bf16 && tfm_set_matmul_precision(TFM_MATMUL_BFLOAT16) != TFM_OK)) {
        fprintf(stderr, "tfm-bench: %s\n", tfm_last_error());
        return 2;
    }
    if (!real_sgemm || alloc_counter_init() < 0) {
        fprintf(stderr, "tfm-bench: cblas_sgemm or libtfm.so not found\n");
        return 1;
    }
    if (int8_loss) {
        char path[64];
        snprintf(path, sizeof path, "/tmp/tfm-bench-int8-loss-%d.safetensors", (int)getpid());
        int failed = bench_int8_loss(c, (int)steps, path);
        unlink(path);
        return failed ? 1 : 0;
    }
    result r = {0};
    int failed = train ? bench_train(c, (int)steps, (int)warmup, (uint32_t)recompute, &r)
                       : bench_decode(c, sources, decode_batch < sources ? decode_batch : sources,
                                      (int32_t)beam, int8, cache_precision, &r);
    if (failed)
        return 1;
    struct rusage usage_now;
    getrusage(RUSAGE_SELF, &usage_now);
    printf("{\"impl\":\"libtfm\",\"config\":\"%s\",\"what\":\"%s\",\"batch\":%lld,"
           "\"tfm_threads\":%ld,\"steps\":%d,\"median_ms\":%.3f,\"min_ms\":%.3f,\"peak_rss_mb\":%.1f,"
           "\"allocs_per_step\":%.1f,\"libtfm_allocs_per_step\":%.1f,\"cpu_path\":\"%s\","
           "\"precision\":\"%s\"",
           c->name, what, (long long)c->batch, threads, r.steps, r.median_ms, r.min_ms,
           (double)usage_now.ru_maxrss / 1024.0, (double)r.allocs / r.steps,
           (double)r.libtfm_allocs / r.steps, tfm_cpu_path(), precision);
    if (train) {
        printf(",\"tape_mb\":%.1f,\"gemm_gflop\":%.4f,\"gemm_shapes\":%d,\"recompute\":%ld",
               r.tape_mb, gemm_gflop(), shape_count, recompute);
        /* the BLAS on its own threads (OPENBLAS_NUM_THREADS) */
        if (time_sgemm && tfm_set_num_threads(1) == TFM_OK)
            printf(",\"sgemm_ms\":%.3f", sgemm_ms());
        if (shapes_overflowed)
            printf(",\"shapes_overflowed\":true");
    } else {
        printf(",\"sources\":%ld,\"beam\":%ld,\"max_length\":%lld,\"tokens_per_s\":%.1f,"
               "\"cache\":\"%s\"", sources, beam, (long long)c->tgt_len,
               (double)(sources * c->tgt_len) / (r.median_ms / 1e3), cache);
    }
    printf("}\n");
    return 0;
}
