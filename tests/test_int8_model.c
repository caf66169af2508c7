/* A model quantized to int8 (tfm_model_quantize): a small model trained
 * here to copy its source, in both attention layouts (fused q/k/v and
 * separate), decoded greedy, by sampling and by beam search on the cached
 * and recomputed paths against its float32 self; its logits within a
 * stated tolerance of float32's; bfloat16 caches against float32 ones, on
 * the float32 and the int8 model; saved, loaded and decoded again token for
 * token; a tied generator's int8 copy; decoding's products in bfloat16
 * (tfm_set_matmul_precision) against float32's; the choice between the
 * int8 and float32 kernels per product; and the refusals: flags,
 * training, a second quantization, damaged files. It links the library's
 * objects to set that choice (core/gemm_int8.h): every other test here
 * makes every product int8, the kernel it checks, whatever the CPU. */
#define _GNU_SOURCE /* memmem */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "core/gemm_int8.h"
#include "core/tensor.h"
#include <tfm/tfm.h>

enum { BOS = 1, EOS = 2, FIRST = 3, VOCAB = 16, LEN = 6, BATCH = 16, MAXT = LEN + 2 };

static void expect_error(tfm_status status, const char *part)
{
    ck_assert_msg(tfm_last_status() == status, "status %d, not %d: %s", (int)tfm_last_status(),
                  (int)status, tfm_last_error());
    ck_assert_msg(strstr(tfm_last_error(), part) != NULL, "\"%s\" lacks \"%s\"",
                  tfm_last_error(), part);
}

/* Sources of LEN tokens in [FIRST, VOCAB) from the stream. */
static tfm_tensor *sources(tfm_rng *rng, int64_t batch)
{
    int32_t ids[64 * LEN];
    for (int64_t i = 0; i < batch * LEN; i++)
        ids[i] = FIRST + (int32_t)(tfm_rng_next_u64(rng) % (VOCAB - FIRST));
    return tfm_tensor_from_i32(2, (const int64_t[]){batch, LEN}, ids);
}

/* A model trained for a few hundred steps to copy its source (bos, the
 * source, eos): decisions that depend on the source, with margins as a
 * trained model has them. fused: the nn.Transformer layout; wide: heads
 * of WIDE_HEAD (an inner width of 48 in d_model 32, as T5's d_kv). */
enum { HEADS = 4, WIDE_HEAD = 12 };
static tfm_model *train_copy_model(int fused, int wide, int tied)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = o.tgt_vocab = VOCAB;
    o.max_src_len = LEN;
    o.max_tgt_len = MAXT;
    o.encoder_layers = o.decoder_layers = 2;
    o.d_model = 32;
    o.heads = HEADS;
    o.head_dim = wide ? WIDE_HEAD : 0;
    o.d_ff = 64;
    o.dropout = 0.0f;
    o.fused_qkv = fused;
    o.share_embeddings = o.tie_generator = tied;
    o.positions = TFM_POSITIONS_LEARNED;
    o.bos_id = BOS;
    o.eos_id = EOS;
    o.seed = 5;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    tfm_optimizer_options oo;
    tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAM);
    oo.lr = 3e-3f;
    tfm_optimizer *opt = tfm_optimizer_create(tfm_model_params(m), &oo);
    tfm_rng *rng = tfm_rng_create(9);
    tfm_tape *tape = tfm_tape_create();
    for (int step = 0; step < 300; step++) {
        tfm_tensor *src = sources(rng, BATCH);
        const int32_t *s = tfm_tensor_data_i32(src);
        int32_t in[BATCH * (LEN + 1)], next[BATCH * (LEN + 1)];
        for (int b = 0; b < BATCH; b++)
            for (int t = 0; t <= LEN; t++) {
                in[b * (LEN + 1) + t] = t ? s[b * LEN + t - 1] : BOS;
                next[b * (LEN + 1) + t] = t < LEN ? s[b * LEN + t] : EOS;
            }
        tfm_tensor *tgt_in = tfm_tensor_from_i32(2, (const int64_t[]){BATCH, LEN + 1}, in);
        tfm_tensor *tgt_out = tfm_tensor_from_i32(2, (const int64_t[]){BATCH, LEN + 1}, next);
        tfm_tensor *logits = tfm_model_forward(tape, m, src, tgt_in, NULL,
                                               tfm_mask_causal(tape, LEN + 1, TFM_F32), NULL,
                                               NULL, NULL, NULL);
        tfm_tensor *loss = tfm_cross_entropy(tape, logits, tgt_out, -100, 0.0f);
        ck_assert_msg(loss != NULL, "%s", tfm_last_error());
        ck_assert_int_eq(tfm_optimizer_zero_grad(opt), TFM_OK);
        ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
        ck_assert_int_eq(tfm_optimizer_step(opt), TFM_OK);
        ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
        tfm_tensor_free(src);
        tfm_tensor_free(tgt_in);
        tfm_tensor_free(tgt_out);
    }
    tfm_tape_free(tape);
    tfm_rng_free(rng);
    tfm_optimizer_free(opt);
    ck_assert_int_eq(tfm_model_set_training(m, 0), TFM_OK);
    return m;
}

/* The copy models' configurations (fused, wide, tied), each trained once by
 * the test case's unchecked fixture (in Check's parent process, before it
 * forks: the sanitizer run would otherwise train 20 models) into files
 * that every test loads its own copies from. */
static const int trained[][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0}, {1, 0, 1}};
enum { TRAINED = sizeof trained / sizeof trained[0] };
static char trained_folder[64];

static const char *trained_path(int fused, int wide, int tied)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/copy_%d%d%d.safetensors", trained_folder, fused, wide, tied);
    return path;
}

static void train_all(void)
{
    snprintf(trained_folder, sizeof trained_folder, "/tmp/tfm_int8_models_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(trained_folder));
    for (int c = 0; c < TRAINED; c++) {
        tfm_model *m = train_copy_model(trained[c][0], trained[c][1], trained[c][2]);
        ck_assert_int_eq(tfm_model_save(m, trained_path(trained[c][0], trained[c][1],
                                                        trained[c][2])), TFM_OK);
        tfm_model_free(m);
    }
}

static void remove_all(void)
{
    for (int c = 0; c < TRAINED; c++)
        remove(trained_path(trained[c][0], trained[c][1], trained[c][2]));
    rmdir(trained_folder);
}

static tfm_model *copy_model_tied(int fused, int wide, int tied)
{
    tfm_model *m = tfm_model_load(trained_path(fused, wide, tied));
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_set_training(m, 0), TFM_OK);
    return m;
}

static tfm_model *copy_model(int fused, int wide)
{
    return copy_model_tied(fused, wide, 0);
}

/* copy_model's, with its layers and generator quantized when int8. */
static tfm_model *copy_model_int8(int fused, int wide, int int8)
{
    tfm_model *m = copy_model(fused, wide);
    if (int8)
        ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR),
                         TFM_OK);
    return m;
}

typedef struct decoded {
    int32_t tokens[64 * 4 * MAXT], lengths[64 * 4];
    float scores[64 * 4];
    float logits[64 * (MAXT - 1) * VOCAB]; /* greedy and sampling */
} decoded;

static void decode(tfm_model *m, tfm_decode_strategy strategy, int use_cache,
                   tfm_cache_precision cache_precision, const tfm_tensor *src, decoded *r)
{
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    ck_assert_int_eq(tfm_decode_options_from_model(m, &o), TFM_OK);
    o.strategy = strategy;
    o.max_length = MAXT - 1; /* rows of MAXT tokens, bos first */
    o.use_cache = use_cache;
    o.cache_precision = cache_precision;
    o.beam_size = 3;
    o.temperature = 0.7f;
    o.seed = 3;
    memset(r, 0, sizeof *r);
    tfm_decoding *d = tfm_decoding_create(m, &o, tfm_tensor_dim(src, 0), LEN);
    ck_assert_msg(d != NULL, "%s", tfm_last_error());
    ck_assert_msg(tfm_decoding_run(d, src, r->tokens, (int64_t)(sizeof r->tokens / 4), r->lengths,
                                   (int64_t)(sizeof r->lengths / 4), r->scores,
                                   (int64_t)(sizeof r->scores / 4),
                                   strategy == TFM_DECODE_BEAM ? NULL : r->logits,
                                   (int64_t)(sizeof r->logits / 4), NULL, 0) == TFM_OK,
                  "%s", tfm_last_error());
    tfm_decoding_free(d);
}

/* The share of tokens (up to the longer output) that a and b agree on. */
static double agreement(const decoded *a, const decoded *b, int64_t n)
{
    int64_t same = 0, total = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t len = a->lengths[i] > b->lengths[i] ? a->lengths[i] : b->lengths[i];
        for (int32_t t = 0; t < len; t++)
            same += a->tokens[i * MAXT + t] == b->tokens[i * MAXT + t];
        total += len;
    }
    return (double)same / (double)total;
}

static int same_tokens(const decoded *a, const decoded *b, int64_t n)
{
    return memcmp(a->lengths, b->lengths, (size_t)n * 4) == 0 &&
           memcmp(a->tokens, b->tokens, (size_t)(n * MAXT) * 4) == 0;
}

/* The squared distance between greedy's logits and teacher-forced ones
 * [64, LEN + 1, VOCAB], over the sources greedy copied (at least half). */
static double distance(const decoded *r, const float *forced, const tfm_tensor *src)
{
    double total = 0.0;
    int copied = 0;
    for (int64_t b = 0; b < 64; b++) {
        const int32_t *row = r->tokens + b * MAXT;
        int ok = r->lengths[b] == LEN + 2 && row[LEN + 1] == EOS &&
                 !memcmp(row + 1, tfm_tensor_data_i32((tfm_tensor *)src) + b * LEN, LEN * 4);
        copied += ok;
        for (int64_t i = 0; ok && i < (LEN + 1) * VOCAB; i++) {
            double d = (double)r->logits[b * (MAXT - 1) * VOCAB + i] -
                       forced[b * (LEN + 1) * VOCAB + i];
            total += d * d;
        }
    }
    ck_assert_int_ge(copied, 32);
    return total;
}

/* The teacher-forced logits [n, LEN + 1, VOCAB] of the sources' copies. */
static float *forced_logits(tfm_model *m, tfm_tensor *src)
{
    int64_t n = tfm_tensor_dim(src, 0);
    int32_t in[64 * (LEN + 1)];
    const int32_t *s = tfm_tensor_data_i32(src);
    for (int64_t b = 0; b < n; b++)
        for (int t = 0; t <= LEN; t++)
            in[b * (LEN + 1) + t] = t ? s[b * LEN + t - 1] : BOS;
    tfm_tensor *tgt = tfm_tensor_from_i32(2, (const int64_t[]){n, LEN + 1}, in);
    tfm_tape *tape = tfm_tape_create();
    tfm_tape_set_recording(tape, 0);
    tfm_tensor *logits = tfm_model_forward(tape, m, src, tgt, NULL,
                                           tfm_mask_causal(tape, LEN + 1, TFM_F32), NULL, NULL,
                                           NULL, NULL);
    ck_assert_msg(logits != NULL, "%s", tfm_last_error());
    size_t bytes = (size_t)tfm_tensor_numel(logits) * sizeof(float);
    float *copy = malloc(bytes);
    memcpy(copy, tfm_tensor_data_f32(logits), bytes);
    tfm_tape_free(tape);
    tfm_tensor_free(tgt);
    return copy;
}

static const char *temp_path(const char *name)
{
    static char path[2][256];
    static int which;
    which ^= 1;
    snprintf(path[which], sizeof path[which], "/tmp/tfm_int8_%d_%s", (int)getpid(), name);
    return path[which];
}

static long file_size(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return (long)st.st_size;
}

/* A loaded model saved again makes a file of the same size as the one it
 * was loaded from (its own name: temp_path's two names may be in use). */
static void assert_saves_again_alike(const tfm_model *loaded, const char *path)
{
    char again[300];
    snprintf(again, sizeof again, "%s.again", path);
    ck_assert_int_eq(tfm_model_save(loaded, again), TFM_OK);
    ck_assert_int_eq(file_size(again), file_size(path));
    unlink(again);
}

/* int8 against float32: the forward's logits within 5% of float32's size
 * (relative L2 error over all positions; measured 1-3%) but not equal to
 * them (the int8 kernel ran), and the decoded tokens agreeing on at least
 * 95% of their positions in every strategy and on both paths (the int8
 * model's cached path with its default bfloat16 caches); the cached
 * and recomputed paths of the int8 model agree with each other. The
 * cached path's logits are the int8 model's: exactly with float32 caches;
 * with bfloat16 ones moved by the rounding too, but less than int8 moves
 * them from float32's (measured 37-49% of that squared distance). */
START_TEST(int8_decodes_as_float32_does)
{
    int fused = _i % 2, wide = _i / 2;
    tfm_model *f32 = copy_model(fused, wide), *int8 = copy_model(fused, wide);
    ck_assert_int_eq(tfm_model_quantized(int8), 0);
    ck_assert_int_eq(tfm_model_quantize(int8, TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR),
                     TFM_OK);
    ck_assert_int_eq(tfm_model_quantized(int8), TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR);
    tfm_rng *rng = tfm_rng_create(21);
    tfm_tensor *src = sources(rng, 64);
    float *a = forced_logits(f32, src), *b = forced_logits(int8, src);
    double error = 0.0, size = 0.0;
    int64_t count = 64 * (LEN + 1) * VOCAB;
    for (int64_t i = 0; i < count; i++) {
        error += ((double)b[i] - a[i]) * ((double)b[i] - a[i]);
        size += (double)a[i] * a[i];
    }
    double relative = sqrt(error / size);
    fprintf(stderr, "test_int8_model (%s%s): logits' relative error %.4f\n",
            fused ? "fused" : "separate", wide ? ", wide heads" : "", relative);
    ck_assert_msg(relative > 0.0 && relative < 0.05, "relative error %g", relative);
    static const tfm_decode_strategy strategies[] = {TFM_DECODE_GREEDY, TFM_DECODE_SAMPLE,
                                                     TFM_DECODE_BEAM};
    decoded *x = malloc(sizeof *x), *y = malloc(sizeof *y), *z = malloc(sizeof *z);
    for (int s = 0; s < 3; s++)
        for (int cache = 0; cache <= 1; cache++) {
            decode(f32, strategies[s], cache, TFM_CACHE_AUTO, src, x);
            decode(int8, strategies[s], cache, TFM_CACHE_AUTO, src, y);
            double agree = agreement(x, y, 64);
            ck_assert_msg(agree >= 0.95, "strategy %d, cache %d: %.3f of the tokens agree",
                          (int)strategies[s], cache, agree);
            /* the decoder's logits are the int8 model's, not float32's */
            if (strategies[s] == TFM_DECODE_GREEDY) {
                decode(int8, strategies[s], cache, TFM_CACHE_FLOAT32, src, z);
                ck_assert_msg(distance(z, b, src) < 0.01 * distance(z, a, src),
                              "cache %d: int8 decoding's logits are not int8's", cache);
                double rounded = distance(y, b, src);
                ck_assert_msg(!cache || (rounded > 0.0 && rounded < 0.75 * distance(y, a, src)),
                              "bfloat16 caches moved the int8 logits by %g, int8 %g", rounded,
                              distance(y, a, src));
            }
            if (cache) {
                decode(int8, strategies[s], 0, TFM_CACHE_AUTO, src, z);
                ck_assert_msg(agreement(y, z, 64) >= 0.99, "strategy %d: cached and "
                              "recomputed int8 part", (int)strategies[s]);
            }
        }
    free(x);
    free(y);
    free(z);
    free(a);
    free(b);
    tfm_tensor_free(src);
    tfm_rng_free(rng);
    tfm_model_free(f32);
    tfm_model_free(int8);
}
END_TEST

/* Saved and loaded: the same flags, the same logits bit for bit, the same
 * tokens in every strategy; the file about a quarter of the float32 one's
 * layers. With every product int8, and with none (a CPU where int8 does
 * not pay: the weights' float32 values, which a load makes from the int8
 * ones). */
START_TEST(saved_and_loaded_decodes_the_same)
{
    int fused = _i % 2, wide = _i / 2 % 2;
    if (_i >= 4)
        tfm__int8_set_pays_from(INT64_MAX);
    tfm_model *m = copy_model(fused, wide);
    const char *f32_path = temp_path("f32.safetensors"), *path = temp_path("int8.safetensors");
    ck_assert_int_eq(tfm_model_save(m, f32_path), TFM_OK);
    ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS), TFM_OK);
    ck_assert_int_eq(tfm_model_save(m, path), TFM_OK);
    /* the layers' weights: 4 projections of 32 x inner per attention, two
     * feed-forward matrices of 32 x 64, over 2 encoder and 2 decoder
     * layers; each of their 4 bytes becomes 1, plus a scale per row */
    long inner = wide ? HEADS * WIDE_HEAD : 32;
    long layer_weights = 2 * (4 * 32 * inner + 2 * 32 * 64) + 2 * (8 * 32 * inner + 2 * 32 * 64);
    long saved = file_size(f32_path) - file_size(path);
    ck_assert_msg(saved > 0.9 * 3 * layer_weights && saved < 3 * layer_weights,
                  "saved %ld bytes of %ld", saved, 4 * layer_weights);
    tfm_model *loaded = tfm_model_load(path);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_quantized(loaded), TFM_QUANTIZE_LAYERS);
    /* a loaded quantized model is for inference only */
    ck_assert_int_eq(tfm_model_set_training(loaded, 1), TFM_ERR_STATE);
    tfm_rng *rng = tfm_rng_create(22);
    tfm_tensor *src = sources(rng, 32);
    float *a = forced_logits(m, src), *b = forced_logits(loaded, src);
    ck_assert_int_eq(memcmp(a, b, sizeof(float) * 32 * (LEN + 1) * VOCAB), 0);
    decoded *x = malloc(sizeof *x), *y = malloc(sizeof *y);
    static const tfm_decode_strategy strategies[] = {TFM_DECODE_GREEDY, TFM_DECODE_SAMPLE,
                                                     TFM_DECODE_BEAM};
    for (int s = 0; s < 3; s++) {
        decode(m, strategies[s], 1, TFM_CACHE_AUTO, src, x);
        decode(loaded, strategies[s], 1, TFM_CACHE_AUTO, src, y);
        ck_assert_msg(same_tokens(x, y, 32), "strategy %d", (int)strategies[s]);
    }
    assert_saves_again_alike(loaded, path);
    unlink(path);
    unlink(f32_path);
    free(x);
    free(y);
    free(a);
    free(b);
    tfm_tensor_free(src);
    tfm_rng_free(rng);
    tfm_model_free(loaded);
    tfm_model_free(m);
}
END_TEST

/* The relative L2 distance of x's greedy logits from y's, over all steps
 * (both zero after a sequence has ended). */
static double logits_distance(const decoded *x, const decoded *y, int64_t n)
{
    double error = 0.0, size = 0.0;
    for (int64_t i = 0; i < n * (MAXT - 1) * VOCAB; i++) {
        error += ((double)x->logits[i] - y->logits[i]) * ((double)x->logits[i] - y->logits[i]);
        size += (double)y->logits[i] * y->logits[i];
    }
    return sqrt(error / size);
}

/* bfloat16 caches against float32 caches on the trained model, float32
 * and int8: with its margins, the same tokens in every strategy; greedy's
 * logits different (the keys and values were rounded) but within 2% of
 * float32 caches' (relative L2; each key and value moves by at most 2^-9
 * of itself: measured 0.08% for the float32 model, 0.64% for the int8
 * one, whose activations' int8 rounding turns small changes into steps of
 * 1/127 of a row's largest), and beam's scores within 2% of 1 + their
 * size. */
START_TEST(bf16_caches_decode_as_float32_caches)
{
    int int8 = _i;
    tfm_model *m = copy_model_int8(1, 0, int8);
    tfm_rng *rng = tfm_rng_create(23);
    tfm_tensor *src = sources(rng, 64);
    static const tfm_decode_strategy strategies[] = {TFM_DECODE_GREEDY, TFM_DECODE_SAMPLE,
                                                     TFM_DECODE_BEAM};
    decoded *x = malloc(sizeof *x), *y = malloc(sizeof *y);
    for (int s = 0; s < 3; s++) {
        decode(m, strategies[s], 1, TFM_CACHE_FLOAT32, src, x);
        decode(m, strategies[s], 1, TFM_CACHE_BFLOAT16, src, y);
        ck_assert_msg(same_tokens(x, y, 64), "%s, strategy %d", int8 ? "int8" : "float32",
                      (int)strategies[s]);
        int64_t rows = strategies[s] == TFM_DECODE_BEAM ? 64 * 3 : 64;
        for (int64_t r = 0; strategies[s] == TFM_DECODE_BEAM && r < rows; r++)
            ck_assert_msg(fabsf(x->scores[r] - y->scores[r]) <=
                              0.02f * (1.0f + fabsf(x->scores[r])),
                          "hypothesis %lld: score %g, float32 caches' %g", (long long)r,
                          (double)y->scores[r], (double)x->scores[r]);
        if (strategies[s] == TFM_DECODE_GREEDY) {
            double moved = logits_distance(y, x, 64);
            ck_assert_msg(moved > 0.0 && moved < 0.02, "%s: logits moved by %g",
                          int8 ? "int8" : "float32", moved);
        }
    }
    free(x);
    free(y);
    tfm_tensor_free(src);
    tfm_rng_free(rng);
    tfm_model_free(m);
}
END_TEST

START_TEST(refusals)
{
    tfm_model *m = copy_model(1, 0);
    ck_assert_int_eq(tfm_model_quantize(NULL, TFM_QUANTIZE_LAYERS), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_model_quantized(NULL), 0);
    expect_error(TFM_ERR_NULL, "tfm_model_quantized: model is NULL");
    ck_assert_int_eq(tfm_model_quantize(m, 0), TFM_ERR_ARG);
    expect_error(TFM_ERR_ARG, "tfm_model_quantize: what 0x0");
    ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_GENERATOR), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_model_quantize(m, 4 | TFM_QUANTIZE_LAYERS), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_model_quantized(m), 0);
    /* training is refused, training states too */
    tfm_optimizer_options oo;
    tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAM);
    tfm_optimizer *opt = tfm_optimizer_create(tfm_model_params(m), &oo);
    ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS), TFM_OK);
    ck_assert_int_eq(tfm_model_set_training(m, 1), TFM_ERR_STATE);
    expect_error(TFM_ERR_STATE, "tfm_model_set_training: the model is quantized to int8");
    ck_assert_int_eq(tfm_model_set_training(m, 0), TFM_OK);
    const char *path = temp_path("state.safetensors");
    ck_assert_int_eq(tfm_training_save(path, m, opt, 0, NULL, 0, NULL, NULL), TFM_ERR_STATE);
    expect_error(TFM_ERR_STATE, "tfm_training_save: the model is quantized");
    ck_assert_int_eq(tfm_training_load(path, m, opt, 0, NULL), TFM_ERR_STATE);
    ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS), TFM_ERR_STATE);
    expect_error(TFM_ERR_STATE, "quantized already");
    /* new float32 values would leave the int8 weights behind */
    const char *params_path = temp_path("params.safetensors");
    ck_assert_int_eq(tfm_params_save(tfm_model_params(m), params_path), TFM_OK);
    ck_assert_int_eq(tfm_params_load(tfm_model_params(m), params_path), TFM_ERR_STATE);
    expect_error(TFM_ERR_STATE, "tfm_params_load: the parameters are a quantized model's");
    unlink(params_path);
    tfm_optimizer_free(opt);
    tfm_model_free(m);

    /* a weight that is not finite cannot be quantized; the model stays float32 */
    m = copy_model(0, 0);
    tfm_tensor *w = tfm_params_find(tfm_model_params(m), "decoder.layers.1.linear2.weight");
    tfm_tensor_data_f32(w)[5] = NAN;
    ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS), TFM_ERR_NUMERIC);
    ck_assert_int_eq(tfm_model_quantized(m), 0);
    ck_assert_int_eq(tfm_model_set_training(m, 1), TFM_OK);
    tfm_model_free(m);
}
END_TEST

/* Copies src to dst with the bytes at offset replaced. */
/* A file's bytes (*size of them), and bytes written as a file. */
static char *file_bytes(const char *path, long *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    char *bytes = malloc((size_t)*size);
    fseek(f, 0, SEEK_SET);
    ck_assert_int_eq(fread(bytes, 1, (size_t)*size, f), *size);
    fclose(f);
    return bytes;
}

static void write_bytes(const char *path, const char *bytes, long size)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fwrite(bytes, 1, (size_t)size, f), size);
    fclose(f);
}

static void patched(const char *src, const char *dst, long offset, const void *bytes, size_t n)
{
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    ck_assert_ptr_nonnull(in);
    ck_assert_ptr_nonnull(out);
    int c;
    for (long at = 0; (c = fgetc(in)) != EOF; at++)
        fputc(at >= offset && at < offset + (long)n ? ((const unsigned char *)bytes)[at - offset]
                                                     : c,
              out);
    fclose(in);
    fclose(out);
}

/* Where tensor name's data begins in the file. */
static long data_offset(const char *path, const char *name)
{
    FILE *f = fopen(path, "rb");
    unsigned char prefix[8];
    ck_assert_int_eq(fread(prefix, 1, 8, f), 8);
    long header = 0;
    for (int i = 7; i >= 0; i--)
        header = header * 256 + prefix[i];
    char *text = calloc(1, (size_t)header + 1);
    ck_assert_int_eq(fread(text, 1, (size_t)header, f), header);
    fclose(f);
    char key[300];
    snprintf(key, sizeof key, "\"%s\"", name);
    const char *at = strstr(text, key);
    ck_assert_ptr_nonnull(at);
    at = strstr(at, "\"data_offsets\":[");
    long begin = strtol(at + 16, NULL, 10);
    free(text);
    return 8 + header + begin;
}

/* A quantized model's file with damaged int8 weights is TFM_ERR_FORMAT,
 * naming what is wrong. */
START_TEST(damaged_files_are_refused)
{
    tfm_model *m = copy_model(1, 0);
    ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS), TFM_OK);
    const char *good = temp_path("good.safetensors"), *bad = temp_path("bad.safetensors");
    ck_assert_int_eq(tfm_model_save(m, good), TFM_OK);
    const char *values = "tfm.int8.decoder.layers.1.linear1.weight";
    const char *scales = "tfm.int8_scales.encoder.layers.0.self_attn.in_proj_weight";
    int8_t minus128 = -128;
    patched(good, bad, data_offset(good, values) + 7, &minus128, 1);
    ck_assert_ptr_null(tfm_model_load(bad));
    expect_error(TFM_ERR_FORMAT, "its int8 weights are not usable");
    float negative = -1.0f, nan = NAN;
    patched(good, bad, data_offset(good, scales) + 4 * 40, &negative, 4);
    ck_assert_ptr_null(tfm_model_load(bad));
    expect_error(TFM_ERR_FORMAT, "its int8 weights are not usable");
    patched(good, bad, data_offset(good, scales), &nan, 4);
    ck_assert_ptr_null(tfm_model_load(bad));
    expect_error(TFM_ERR_FORMAT, "its int8 weights are not usable");
    /* a name changed: the weight's values are missing */
    char renamed[64] = "tfm.int8.decoder.layers.1.linear1.weighs";
    long size;
    char *bytes = file_bytes(good, &size);
    char *at = memmem(bytes, (size_t)size, values, strlen(values));
    ck_assert_ptr_nonnull(at);
    memcpy(at, renamed, strlen(renamed));
    write_bytes(bad, bytes, size);
    ck_assert_ptr_null(tfm_model_load(bad));
    expect_error(TFM_ERR_FORMAT, "tensor \"tfm.int8.decoder.layers.1.linear1.weight\" is missing");
    /* a scales' dtype changed: F32 -> I32 */
    memcpy(at, values, strlen(values));
    char *entry = memmem(bytes, (size_t)size, scales, strlen(scales));
    ck_assert_ptr_nonnull(entry);
    char *dtype = strstr(entry, "\"F32\"");
    ck_assert_ptr_nonnull(dtype);
    memcpy(dtype + 1, "I32", 3);
    write_bytes(bad, bytes, size);
    ck_assert_ptr_null(tfm_model_load(bad));
    expect_error(TFM_ERR_FORMAT, "is I32, not a float [96]");
    /* a format 1 reader's view: the file says which format it is */
    char *version = memmem(bytes, (size_t)size, "\"tfm.format_version\":\"2\"", 24);
    ck_assert_ptr_nonnull(version);
    memcpy(dtype + 1, "F32", 3);
    version[22] = '1';
    write_bytes(bad, bytes, size);
    ck_assert_ptr_null(tfm_model_load(bad));
    expect_error(TFM_ERR_FORMAT, "tfm.int8 is \"layers\" in format 1");
    free(bytes);
    unlink(good);
    unlink(bad);
    tfm_model_free(m);
}
END_TEST

/* A copy of src at dst with the first `from` in it made `to` (as long). */
static void renamed_in_file(const char *src, const char *dst, const char *from, const char *to)
{
    long size;
    char *bytes = file_bytes(src, &size);
    char *at = memmem(bytes, (size_t)size, from, strlen(from));
    ck_assert_ptr_nonnull(at);
    ck_assert_uint_eq(strlen(to), strlen(from));
    memcpy(at, to, strlen(to));
    write_bytes(dst, bytes, size);
    free(bytes);
}

/* A tied generator quantized: its products take an int8 copy of the
 * embedding table (the logits move from the layers-only model's, within
 * int8's error of float32's, and decode as float32's do), while the
 * lookups keep the float32 table, which the file keeps beside the copy:
 * loaded, the table is the original to the bit and the logits are the
 * saved model's. */
START_TEST(tied_generator_quantized)
{
    tfm_model *f32 = copy_model_tied(1, 0, 1), *layers = copy_model_tied(1, 0, 1);
    tfm_model *both = copy_model_tied(1, 0, 1);
    const char *table_name = "src_embedding.weight"; /* shared */
    tfm_tensor *table = tfm_params_find(tfm_model_params(both), table_name);
    ck_assert_msg(table != NULL, "no %s", table_name);
    size_t table_bytes = (size_t)tfm_tensor_numel(table) * sizeof(float);
    float *original = malloc(table_bytes);
    memcpy(original, tfm_tensor_data_f32(table), table_bytes);
    ck_assert_int_eq(tfm_model_quantize(layers, TFM_QUANTIZE_LAYERS), TFM_OK);
    ck_assert_int_eq(tfm_model_quantize(both, TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR),
                     TFM_OK);
    ck_assert_int_eq(memcmp(tfm_tensor_data_f32(table), original, table_bytes), 0);
    tfm_rng *rng = tfm_rng_create(23);
    tfm_tensor *src = sources(rng, 64);
    int64_t count = 64 * (LEN + 1) * VOCAB;
    float *a = forced_logits(f32, src), *b = forced_logits(layers, src);
    float *c = forced_logits(both, src);
    double moved = 0.0, error = 0.0, size = 0.0;
    for (int64_t i = 0; i < count; i++) {
        moved += fabs((double)c[i] - b[i]);
        error += ((double)c[i] - a[i]) * ((double)c[i] - a[i]);
        size += (double)a[i] * a[i];
    }
    ck_assert_msg(moved > 0.0, "the generator's products did not change");
    ck_assert_msg(sqrt(error / size) < 0.05, "relative error %g", sqrt(error / size));
    decoded *x = malloc(sizeof *x), *y = malloc(sizeof *y);
    decode(f32, TFM_DECODE_GREEDY, 1, TFM_CACHE_FLOAT32, src, x);
    decode(both, TFM_DECODE_GREEDY, 1, TFM_CACHE_FLOAT32, src, y);
    ck_assert_msg(agreement(x, y, 64) >= 0.95, "%.3f of the tokens agree", agreement(x, y, 64));
    /* decoding with the float32 generator would put its logits as far
     * from c as from b (a ratio near 1); the cached path's own rounding
     * leaves 5e-10 of b's distance at x86-64-v4 and 0.017 at the baseline
     * and x86-64-v3 in a release build, where its activations' int8
     * rounding flips where the forward's does not */
    ck_assert_msg(distance(y, c, src) < 0.1 * distance(y, b, src),
                  "decoding's logits are not the int8 generator's: %g, the float32 one's %g",
                  distance(y, c, src), distance(y, b, src));

    const char *path = temp_path("tied.safetensors");
    ck_assert_int_eq(tfm_model_save(both, path), TFM_OK);
    tfm_model *loaded = tfm_model_load(path);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_quantized(loaded), TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR);
    ck_assert_int_eq(memcmp(tfm_tensor_data_f32(tfm_params_find(tfm_model_params(loaded),
                                                                 table_name)),
                            original, table_bytes), 0);
    float *d = forced_logits(loaded, src);
    ck_assert_int_eq(memcmp(c, d, (size_t)count * sizeof(float)), 0);
    decode(loaded, TFM_DECODE_BEAM, 1, TFM_CACHE_AUTO, src, x);
    decode(both, TFM_DECODE_BEAM, 1, TFM_CACHE_AUTO, src, y);
    ck_assert(same_tokens(x, y, 64));
    assert_saves_again_alike(loaded, path);
    /* the table's float32 values are not the int8 copy's to stand for */
    const char *bad = temp_path("tied_bad.safetensors");
    renamed_in_file(path, bad, "\"src_embedding.weight\"", "\"tfm.embedding.weight\"");
    ck_assert_ptr_null(tfm_model_load(bad));
    expect_error(TFM_ERR_FORMAT, "\"src_embedding.weight\" is missing");
    unlink(bad);
    unlink(path);
    free(x);
    free(y);
    free(a);
    free(b);
    free(c);
    free(d);
    free(original);
    tfm_tensor_free(src);
    tfm_rng_free(rng);
    tfm_model_free(loaded);
    tfm_model_free(f32);
    tfm_model_free(layers);
    tfm_model_free(both);
}
END_TEST

/* Decoding with TFM_MATMUL_BFLOAT16 (its products on weights packed in
 * bfloat16) on the trained models: with their margins, the same tokens as
 * float32 in every strategy; greedy's logits different (it ran in
 * bfloat16) but within 3% of float32's (relative L2: measured 0.32-0.39%);
 * float32 again gives float32's bits. An int8 model's products stay int8:
 * its logits are the bits it gives under float32. Refused where the CPU
 * has no AVX512_BF16. */
START_TEST(bf16_products_decode_as_float32)
{
    int fused = _i & 1, wide = _i >> 1 & 1, int8 = _i >> 2;
    if (tfm_set_matmul_precision(TFM_MATMUL_BFLOAT16) != TFM_OK) {
        expect_error(TFM_ERR_STATE, "bfloat16 products");
        ck_assert_int_eq(tfm_get_matmul_precision(), TFM_MATMUL_FLOAT32);
        return;
    }
    ck_assert_int_eq(tfm_set_matmul_precision(TFM_MATMUL_FLOAT32), TFM_OK);
    tfm_model *m = copy_model_int8(fused, wide, int8);
    tfm_rng *rng = tfm_rng_create(29);
    tfm_tensor *src = sources(rng, 64);
    static const tfm_decode_strategy strategies[] = {TFM_DECODE_GREEDY, TFM_DECODE_SAMPLE,
                                                     TFM_DECODE_BEAM};
    decoded *x = malloc(sizeof *x), *y = malloc(sizeof *y), *z = malloc(sizeof *z);
    for (int s = 0; s < 3; s++) {
        decode(m, strategies[s], 1, TFM_CACHE_AUTO, src, x);
        ck_assert_int_eq(tfm_set_matmul_precision(TFM_MATMUL_BFLOAT16), TFM_OK);
        decode(m, strategies[s], 1, TFM_CACHE_AUTO, src, y);
        ck_assert_int_eq(tfm_set_matmul_precision(TFM_MATMUL_FLOAT32), TFM_OK);
        decode(m, strategies[s], 1, TFM_CACHE_AUTO, src, z);
        ck_assert_msg(same_tokens(x, y, 64), "case %d, strategy %d", _i, (int)strategies[s]);
        ck_assert_msg(memcmp(x, z, sizeof *x) == 0, "case %d, strategy %d: float32 again "
                      "differs", _i, (int)strategies[s]);
        if (strategies[s] == TFM_DECODE_GREEDY) {
            double moved = logits_distance(y, x, 64);
            if (int8)
                ck_assert_msg(memcmp(x, y, sizeof *x) == 0, "case %d: an int8 model's "
                              "logits moved by %g", _i, moved);
            else
                ck_assert_msg(moved > 0.0 && moved < 0.03, "case %d: logits moved by %g", _i,
                              moved);
        }
    }
    free(x);
    free(y);
    free(z);
    tfm_tensor_free(src);
    tfm_rng_free(rng);
    tfm_model_free(m);
}
END_TEST

/* The int8 model's weights that pay in int8 (tfm__int8_pays), of those
 * quantized. */
static int64_t weights_paying(tfm_model *m, int64_t *quantized)
{
    int64_t pays = 0;
    *quantized = 0;
    for (int64_t i = 0; i < tfm_params_count(tfm_model_params(m)); i++) {
        const tfm_tensor *w = tfm_params_at(tfm_model_params(m), i);
        *quantized += w->int8 != NULL;
        pays += tfm__int8_tensor_pays(w);
    }
    return pays;
}

/* copy_model's float32 model with the int8 model's float32 values: its
 * quantized weights' int8 values times their scales. */
static tfm_model *float32_twin(tfm_model *int8, int fused, int wide)
{
    tfm_model *m = copy_model(fused, wide);
    tfm_params *to = tfm_model_params(m), *from = tfm_model_params(int8);
    ck_assert_int_eq(tfm_params_numel(to), tfm_params_numel(from));
    memcpy(tfm_params_values(to), tfm_params_values(from),
           (size_t)tfm_params_numel(to) * sizeof(float));
    return m;
}

/* The products' kernels chosen per product (tfm__int8_pays), on the
 * cached and recomputed paths, every strategy, float32 caches: with none
 * int8, the quantized model decodes bit for bit as float32 does with its
 * weights (the int8 values times their scales: tokens, scores, logits),
 * its caches float32 by default too; with every
 * one, as the int8 kernels do, its
 * logits not float32's; with some (the feed-forward's and a fused
 * attention's in-projection), tokens agreeing with both on 95% of their
 * positions and greedy's logits neither's, the cached and recomputed
 * paths agreeing; with the rule this CPU gets, as its choices make it:
 * the int8 kernels' bits where every weight pays in int8 (any CPU with
 * VNNI), float32's where none does, else as with some. */
START_TEST(int8_products_where_faster)
{
    int fused = _i % 2, wide = _i / 2;
    tfm_model *int8 = copy_model_int8(fused, wide, 1), *f32 = float32_twin(int8, fused, wide);
    tfm_rng *rng = tfm_rng_create(31);
    tfm_tensor *src = sources(rng, 64);
    int64_t quantized, pays = weights_paying(int8, &quantized), some;
    tfm__int8_set_pays_from(32 * 64); /* d_model x d_ff: the smaller weights float32 */
    some = weights_paying(int8, &quantized);
    tfm__int8_set_pays_from(-1);
    fprintf(stderr, "test_int8_model (%s%s): %lld of %lld int8 weights pay on the %s path\n",
            fused ? "fused" : "separate", wide ? ", wide heads" : "", (long long)pays,
            (long long)quantized, tfm__int8_path_name(tfm__int8_path_chosen()));
    ck_assert(quantized > 0 && some > 0 && some < quantized);
    static const tfm_decode_strategy strategies[] = {TFM_DECODE_GREEDY, TFM_DECODE_SAMPLE,
                                                     TFM_DECODE_BEAM};
    decoded *as_f32 = malloc(sizeof *as_f32), *none = malloc(sizeof *none),
            *all = malloc(sizeof *all), *mixed[2] = {malloc(sizeof *all), malloc(sizeof *all)},
            *chosen = malloc(sizeof *chosen);
    for (int s = 0; s < 3; s++)
        for (int cache = 0; cache <= 1; cache++) {
            int greedy = strategies[s] == TFM_DECODE_GREEDY;
            decode(f32, strategies[s], cache, TFM_CACHE_FLOAT32, src, as_f32);
            tfm__int8_set_pays_from(INT64_MAX);
            decode(int8, strategies[s], cache, TFM_CACHE_AUTO, src, none);
            tfm__int8_set_pays_from(0);
            decode(int8, strategies[s], cache, TFM_CACHE_FLOAT32, src, all);
            tfm__int8_set_pays_from(32 * 64);
            decode(int8, strategies[s], cache, TFM_CACHE_FLOAT32, src, mixed[cache]);
            tfm__int8_set_pays_from(-1);
            decode(int8, strategies[s], cache, TFM_CACHE_FLOAT32, src, chosen);
            ck_assert_msg(memcmp(none, as_f32, sizeof *none) == 0, "strategy %d, cache %d: "
                          "no int8 product, yet not float32's bits", (int)strategies[s], cache);
            ck_assert_msg(!greedy || logits_distance(all, as_f32, 64) > 0.0,
                          "cache %d: every product int8, yet float32's logits", cache);
            ck_assert_msg(agreement(mixed[cache], all, 64) >= 0.95 &&
                              agreement(mixed[cache], as_f32, 64) >= 0.95,
                          "strategy %d, cache %d, some int8: %.3f, %.3f of the tokens agree",
                          (int)strategies[s], cache, agreement(mixed[cache], all, 64),
                          agreement(mixed[cache], as_f32, 64));
            ck_assert_msg(!greedy || (logits_distance(mixed[cache], all, 64) > 0.0 &&
                                      logits_distance(mixed[cache], as_f32, 64) > 0.0),
                          "cache %d: some int8, yet all or none's logits", cache);
            if (cache)
                ck_assert_msg(agreement(mixed[0], mixed[1], 64) >= 0.99, "strategy %d: some "
                              "int8, cached and recomputed part", (int)strategies[s]);
            const decoded *expected = pays == quantized ? all : pays == 0 ? as_f32 : NULL;
            if (expected)
                ck_assert_msg(memcmp(chosen, expected, sizeof *chosen) == 0,
                              "strategy %d, cache %d: not the bits of %s", (int)strategies[s],
                              cache, pays ? "the int8 kernels" : "float32");
            else
                ck_assert_msg(agreement(chosen, all, 64) >= 0.95 &&
                                  agreement(chosen, as_f32, 64) >= 0.95,
                              "strategy %d, cache %d: %.3f, %.3f of the tokens agree",
                              (int)strategies[s], cache, agreement(chosen, all, 64),
                              agreement(chosen, as_f32, 64));
        }
    free(as_f32);
    free(none);
    free(all);
    free(mixed[0]);
    free(mixed[1]);
    free(chosen);
    tfm_tensor_free(src);
    tfm_rng_free(rng);
    tfm_model_free(f32);
    tfm_model_free(int8);
}
END_TEST

static void every_product_int8(void)
{
    tfm__int8_set_pays_from(0);
}

/* back to the CPU's rule: with CK_FORK=no the process runs on into the
 * next case */
static void the_rule_measured(void)
{
    tfm__int8_set_pays_from(-1);
}

static Suite *int8_model_suite(void)
{
    Suite *s = suite_create("int8_model");
    TCase *tc = tcase_create("int8 model");
    tcase_set_timeout(tc, 240);
    tcase_add_unchecked_fixture(tc, train_all, remove_all);
    tcase_add_checked_fixture(tc, every_product_int8, the_rule_measured);
    tcase_add_loop_test(tc, int8_decodes_as_float32_does, 0, 4);
    tcase_add_loop_test(tc, saved_and_loaded_decodes_the_same, 0, 8);
    tcase_add_test(tc, tied_generator_quantized);
    tcase_add_loop_test(tc, bf16_caches_decode_as_float32_caches, 0, 2);
    tcase_add_loop_test(tc, bf16_products_decode_as_float32, 0, 8);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, damaged_files_are_refused);
    suite_add_tcase(s, tc);
    /* meson runs this case alone again at TFM_CPU=x86-64-v3, where an
     * AVX-512 CPU without AVX-VNNI takes the AVX2 int8 path */
    TCase *choice = tcase_create("per product");
    tcase_set_timeout(choice, 240);
    tcase_add_unchecked_fixture(choice, train_all, remove_all);
    tcase_add_loop_test(choice, int8_products_where_faster, 0, 4);
    suite_add_tcase(s, choice);
    return s;
}

TFM_CHECK_MAIN(int8_model_suite)
