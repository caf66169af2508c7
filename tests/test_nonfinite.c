/* NaN and Inf anywhere: the exp kernel is defined for every float, the ops
 * pass NaN on as documented (design.md, "Non-finite values"), training and
 * decoding refuse it with TFM_ERR_NUMERIC, loading refuses it when asked
 * (check_finite, whatever the file's float dtype),
 * and the random fillers refuse infinite bounds. Run under UBSan, the
 * kernels' float-to-int conversions are checked too. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check_main.h"
#include "core/fastmath.h"
#include "reliability.h"

/* --- the exp kernel -------------------------------------------------------------- */

static int32_t ulps_apart(float a, float b)
{
    int32_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    return x > y ? x - y : y - x;
}

START_TEST(exp_is_defined_for_every_float)
{
    /* volatile: the compiler must not fold the special values away */
    volatile float nan_in = NAN, neg_nan = -NAN, inf = INFINITY;
    ck_assert(isnan(tfm__expf(nan_in)));
    ck_assert(isnan(tfm__expf(neg_nan)));
    ck_assert(tfm__expf(inf) == INFINITY);
    ck_assert(tfm__expf(-inf) == 0.0f);
    ck_assert(tfm__expf(3e38f) == INFINITY);
    ck_assert(tfm__expf(-3e38f) == 0.0f);
    ck_assert(tfm__expf(88.5f) == INFINITY);
    ck_assert(tfm__expf(-88.0f) == 0.0f);
    /* a sweep: within 2 ulp of expf from -87 (normal results) to the
     * documented 88.37 */
    for (float x = -87.0f; x < 88.37f; x += 0.0137f)
        ck_assert_msg(ulps_apart(tfm__expf(x), expf(x)) <= 2, "exp(%g): %g vs %g", (double)x,
                      (double)tfm__expf(x), (double)expf(x));
}
END_TEST

START_TEST(exp_row_passes_nan_and_inf_through)
{
    float x[40], y[40];
    for (int64_t n = 1; n <= 40; n++) {
        for (int64_t j = 0; j < n; j++)
            x[j] = (float)j * 0.5f;
        x[n - 1] = NAN;             /* in the padded tail or a vector block */
        x[0] = n > 1 ? -INFINITY : x[0];
        float sum = tfm__exp_row(x, 1.0f, y, n);
        ck_assert(isnan(sum));
        ck_assert(isnan(y[n - 1]));
        if (n > 1)
            ck_assert(y[0] == 0.0f);
        for (int64_t j = 1; j < n - 1; j++)
            ck_assert(y[j] == tfm__expf(x[j] - 1.0f));
        /* an infinite shift: inf - inf is NaN, finite - inf is -inf */
        x[n - 1] = INFINITY;
        tfm__exp_row(x, INFINITY, y, n);
        ck_assert(isnan(y[n - 1]));
        if (n > 1)
            ck_assert(y[n - 2] == 0.0f);
    }
}
END_TEST

/* --- ops on non-finite inputs ------------------------------------------------------ */

static tfm_tensor *row(const float *values, int64_t n)
{
    tfm_tensor *t = tfm_tensor_from_f32(2, (const int64_t[]){1, n}, values);
    ck_assert_ptr_nonnull(t);
    return t;
}

static void read_row(tfm_tensor *t, float *out, int64_t n)
{
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(tfm_tensor_read_f32(t, out, n), TFM_OK);
}

START_TEST(softmax_rows_with_nan_or_inf)
{
    tfm_tape *tape = tfm_tape_create();
    float y[5];
    const float cases[][5] = {
        {1, 2, NAN, 3, 4},            /* NaN: the whole row is NaN */
        {1, 2, INFINITY, 3, 4},       /* +Inf: inf - inf, NaN again (as PyTorch) */
        {NAN, 2, 3, 4, 5},            /* NaN first, where the maximum starts */
    };
    for (size_t c = 0; c < 3; c++) {
        tfm_tensor *x = row(cases[c], 5);
        read_row(tfm_softmax(tape, x, NULL), y, 5);
        for (int j = 0; j < 5; j++)
            ck_assert_msg(isnan(y[j]), "case %zu: y[%d] = %g", c, j, (double)y[j]);
        read_row(tfm_log_softmax(tape, x), y, 5);
        for (int j = 0; j < 5; j++)
            ck_assert_msg(isnan(y[j]), "case %zu: log y[%d] = %g", c, j, (double)y[j]);
        tfm_tensor_free(x);
    }
    /* -Inf is probability 0; a row of -Inf gives zeros (softmax), NaN (log) */
    tfm_tensor *x = row((const float[]){0, -INFINITY, 0, -INFINITY, 0}, 5);
    read_row(tfm_softmax(tape, x, NULL), y, 5);
    for (int j = 0; j < 5; j++)
        ck_assert_float_eq_tol(y[j], j % 2 ? 0.0f : 1.0f / 3.0f, 1e-7f);
    tfm_tensor_free(x);
    x = row((const float[]){-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY}, 5);
    read_row(tfm_softmax(tape, x, NULL), y, 5);
    for (int j = 0; j < 5; j++)
        ck_assert(y[j] == 0.0f);
    read_row(tfm_log_softmax(tape, x), y, 5);
    for (int j = 0; j < 5; j++)
        ck_assert(isnan(y[j]));
    tfm_tensor_free(x);
    tfm_tape_free(tape);
}
END_TEST

START_TEST(losses_and_activations_pass_nan_on)
{
    tfm_tape *tape = tfm_tape_create();
    const float bad[4] = {NAN, INFINITY, -INFINITY, 1.0f};
    tfm_tensor *x = row(bad, 4);
    tfm_tensor_set_requires_grad(x, 1);
    tfm_tensor *targets = tfm_tensor_from_i32(1, (const int64_t[]){1}, (const int32_t[]){3});
    float loss, y[4], g[4];
    ck_assert_int_eq(tfm_tensor_item(tfm_cross_entropy(tape, x, targets, -100, 0.1f), &loss),
                     TFM_OK);
    ck_assert(isnan(loss));
    /* backward runs and hands the NaN on; the optimizer is where it stops */
    tfm_tensor *l = tfm_cross_entropy(tape, x, targets, -100, 0.0f);
    ck_assert_int_eq(tfm_tape_backward(tape, l), TFM_OK);
    ck_assert_int_eq(tfm_tensor_read_grad(x, g, 4), TFM_OK);
    ck_assert(isnan(g[3]));
    read_row(tfm_gelu(tape, x), y, 4);
    ck_assert(isnan(y[0]));
    ck_assert(y[1] == INFINITY);
    read_row(tfm_relu(tape, x), y, 4);
    ck_assert(isnan(y[0]) && y[1] == INFINITY && y[2] == 0.0f);
    ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
    ck_assert_int_eq(tfm_tensor_zero_grad(x), TFM_OK);
    ck_assert_int_eq(tfm_tape_backward(tape, tfm_sum(tape, tfm_gelu(tape, x))), TFM_OK);
    ck_assert_int_eq(tfm_tensor_read_grad(x, g, 4), TFM_OK);
    ck_assert(isnan(g[0]));
    tfm_tensor_free(x);
    tfm_tensor_free(targets);
    tfm_tape_free(tape);
}
END_TEST

/* --- a model whose checkpoint holds NaN or Inf ------------------------------------ */

/* tfm_params_load_with the finiteness check. */
static tfm_status load_finite(tfm_params *p, const char *path)
{
    tfm_load_options o;
    tfm_load_options_init(&o);
    o.check_finite = 1;
    return tfm_params_load_with(p, path, &o, NULL);
}

enum { VOCAB = 11, MAXLEN = 8, BATCH = 2 };

static tfm_model *small_model(void)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = VOCAB;
    o.tgt_vocab = VOCAB;
    o.max_src_len = MAXLEN;
    o.max_tgt_len = MAXLEN;
    o.encoder_layers = 1;
    o.decoder_layers = 1;
    o.d_model = 16;
    o.heads = 2;
    o.d_ff = 32;
    o.dropout = 0.0f;
    o.activation = TFM_ACTIVATION_GELU;
    o.seed = 5;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    return m;
}

static const int32_t src_ids[BATCH * 6] = {3, 4, 5, 6, 7, 8, 5, 6, 2, 9, 4, 3};
static const int32_t tgt_ids[BATCH * 5] = {1, 4, 5, 6, 7, 1, 6, 2, 9, 4};
static const int32_t out_ids[BATCH * 5] = {4, 5, 6, 7, 2, 6, 2, 9, 4, 2};

/* One training step: TFM_ERR_NUMERIC from the optimizer when the loss is
 * not finite; *loss is the loss. */
static tfm_status train_step(tfm_model *m, float *loss)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){BATCH, 6}, src_ids);
    tfm_tensor *tgt = tfm_tensor_from_i32(2, (const int64_t[]){BATCH, 5}, tgt_ids);
    tfm_tensor *out = tfm_tensor_from_i32(2, (const int64_t[]){BATCH, 5}, out_ids);
    tfm_optimizer_options oo;
    tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAM);
    tfm_optimizer *opt = tfm_optimizer_create(tfm_model_params(m), &oo);
    tfm_tensor *logits = tfm_model_forward(tape, m, src, tgt, NULL,
                                           tfm_mask_causal(tape, 5, TFM_F32), NULL, NULL,
                                           NULL, NULL);
    tfm_tensor *l = tfm_cross_entropy(tape, logits, out, -100, 0.1f);
    ck_assert_int_eq(tfm_tensor_item(l, loss), TFM_OK);
    ck_assert_int_eq(tfm_tape_backward(tape, l), TFM_OK);
    tfm_status s = tfm_optimizer_step(opt);
    tfm_optimizer_free(opt);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_tensor_free(out);
    tfm_tape_free(tape);
    return s;
}

static tfm_status decode(tfm_model *m, tfm_decode_strategy strategy,
                         tfm_cache_precision cache_precision)
{
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    o.strategy = strategy;
    o.cache_precision = cache_precision;
    o.max_length = MAXLEN - 2;
    tfm_decoding *d = tfm_decoding_create(m, &o, BATCH, 6);
    ck_assert_ptr_nonnull(d);
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){BATCH, 6}, src_ids);
    int32_t tokens[BATCH * 4 * MAXLEN], lengths[BATCH * 4];
    tfm_status s = tfm_decoding_run(d, src, tokens, BATCH * 4 * MAXLEN, lengths, BATCH * 4,
                                    NULL, 0, NULL, 0, NULL, 0);
    tfm_tensor_free(src);
    tfm_decoding_free(d);
    return s;
}

START_TEST(a_checkpoint_with_nan_or_inf)
{
    char folder[64];
    scratch_folder(folder, "nonfinite");
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", folder);
    const float poison[3] = {NAN, INFINITY, -INFINITY};
    const char *where[3] = {"encoder.layers.0.linear1.weight",
                            "decoder.layers.0.self_attn.in_proj_weight", "generator.weight"};
    for (int c = 0; c < 3; c++) {
        tfm_model *saved = small_model(), *m = small_model();
        float *w = tfm_tensor_data_f32(tfm_params_find(tfm_model_params(saved), where[c]));
        w[7] = poison[c];
        ck_assert_int_eq(tfm_params_save(tfm_model_params(saved), path), TFM_OK);

        /* asked to, the load refuses it and changes nothing */
        tfm_params *p = tfm_model_params(m);
        float before = tfm_params_values(p)[0];
        tfm_clear_error();
        ck_assert_int_eq(load_finite(p, path), TFM_ERR_NUMERIC);
        char text[400];
        snprintf(text, sizeof text, "tfm_params_load_with: \"%s\": tensor \"%s\" holds a NaN "
                 "or Inf at [0,7]", path, where[c]);
        expect_error(TFM_ERR_NUMERIC, text);
        ck_assert(tfm_params_values(p)[0] == before);

        /* loaded as stored, it trains to NaN, refused by the optimizer ... */
        ck_assert_int_eq(tfm_params_load(p, path), TFM_OK);
        float loss = 0.0f;
        ck_assert_int_eq(train_step(m, &loss), TFM_ERR_NUMERIC);
        ck_assert_msg(!isfinite(loss), "case %d: loss %g", c, (double)loss);
        /* ... and decodes to TFM_ERR_NUMERIC, never undefined behaviour,
         * bfloat16 caches keeping the keys' and values' NaN or Inf */
        const tfm_decode_strategy strategies[3] = {TFM_DECODE_GREEDY, TFM_DECODE_SAMPLE,
                                                   TFM_DECODE_BEAM};
        for (int s = 0; s < 3; s++)
            for (int bf16 = 0; bf16 < 2; bf16++) {
                tfm_clear_error();
                ck_assert_int_eq(decode(m, strategies[s], bf16 ? TFM_CACHE_BFLOAT16
                                                              : TFM_CACHE_FLOAT32),
                                 TFM_ERR_NUMERIC);
                expect_error(TFM_ERR_NUMERIC, "not finite");
            }
        tfm_model_free(saved);
        tfm_model_free(m);
    }
    remove_folder(folder);
}
END_TEST

START_TEST(load_checks_every_float_dtype)
{
    char folder[64];
    scratch_folder(folder, "nonfinite");
    char path[128];
    snprintf(path, sizeof path, "%s/raw.safetensors", folder);
    /* F16 0x7c00 is +Inf, BF16 0xff80 -Inf, F64 1e300 overflows float32 */
    static const struct {
        const char *header;
        unsigned char data[8];
        const char *message;
    } cases[] = {
        {"{\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}",
         {0, 0x3c, 0, 0x7c, 0, 0, 0, 0}, "tensor \"b\" holds a NaN or Inf at [1]"},
        {"{\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}",
         {0, 0, 0, 0, 0, 0, 0x80, 0xff}, "tensor \"b\" holds a NaN or Inf at [3]"},
        {"{\"b\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}",
         {0x9c, 0x75, 0x00, 0x88, 0x3c, 0xe4, 0x37, 0x7e}, "tensor \"b\" holds a NaN or Inf at [0]"},
    };
    tfm_params *p = tfm_params_create();
    for (size_t c = 0; c < 3; c++) {
        tfm_params_free(p);
        p = tfm_params_create();
        tfm_params_add(p, "b", 1, (const int64_t[]){c == 2 ? 1 : 4});
        size_t len = strlen(cases[c].header);
        FILE *f = fopen(path, "wb");
        unsigned char prefix[8] = {(unsigned char)len};
        fwrite(prefix, 1, 8, f);
        fwrite(cases[c].header, 1, len, f);
        fwrite(cases[c].data, 1, 8, f);
        fclose(f);
        tfm_clear_error();
        ck_assert_int_eq(load_finite(p, path), TFM_ERR_NUMERIC);
        expect_error(TFM_ERR_NUMERIC, cases[c].message);
        ck_assert(tfm_params_values(p)[0] == 0.0f);
        ck_assert_int_eq(tfm_params_load(p, path), TFM_OK);
        ck_assert(!isfinite(tfm_params_values(p)[c == 2 ? 0 : c == 0 ? 1 : 3]));
    }
    tfm_params_free(p);
    remove_folder(folder);
}
END_TEST

/* A long tensor: the check converts it a block at a time. */
START_TEST(load_check_finds_the_last_value_of_a_long_tensor)
{
    char folder[64];
    scratch_folder(folder, "nonfinite");
    char path[128];
    snprintf(path, sizeof path, "%s/long.safetensors", folder);
    tfm_params *p = tfm_params_create();
    tfm_tensor *t = tfm_params_add(p, "long", 2, (const int64_t[]){3, 5000});
    float *v = tfm_tensor_data_f32(t);
    for (int i = 0; i < 15000; i++)
        v[i] = (float)i;
    ck_assert_int_eq(tfm_params_save(p, path), TFM_OK);
    ck_assert_int_eq(load_finite(p, path), TFM_OK);
    v[14999] = NAN;
    ck_assert_int_eq(tfm_params_save(p, path), TFM_OK);
    v[14999] = 1.0f;
    ck_assert_int_eq(load_finite(p, path), TFM_ERR_NUMERIC);
    expect_error(TFM_ERR_NUMERIC, "tensor \"long\" holds a NaN or Inf at [2,4999]");
    ck_assert(v[14999] == 1.0f);
    tfm_params_free(p);
    remove_folder(folder);
}
END_TEST

/* --- the random fillers ------------------------------------------------------------ */

START_TEST(fillers_refuse_infinite_parameters)
{
    tfm_rng *rng = tfm_rng_create(3);
    const int64_t shape[1] = {4};
    tfm_tensor *t = tfm_tensor_zeros(TFM_F32, 1, shape);
    const float bounds[][2] = {{-INFINITY, INFINITY}, {0.0f, INFINITY}, {-INFINITY, 0.0f},
                               {NAN, 1.0f}, {0.0f, NAN}, {2.0f, 1.0f}};
    for (size_t c = 0; c < sizeof bounds / sizeof bounds[0]; c++) {
        tfm_clear_error();
        ck_assert_ptr_null(tfm_tensor_uniform(1, shape, bounds[c][0], bounds[c][1], rng));
        expect_error(TFM_ERR_ARG, "tfm_tensor_uniform: bounds");
        expect_error(TFM_ERR_ARG, "must be finite and ordered");
        tfm_clear_error();
        ck_assert_int_eq(tfm_init_uniform(t, bounds[c][0], bounds[c][1], rng), TFM_ERR_ARG);
        expect_error(TFM_ERR_ARG, "tfm_init_uniform: bounds");
    }
    const float normal[][2] = {{INFINITY, 1.0f}, {0.0f, INFINITY}, {NAN, 1.0f}, {0.0f, -1.0f}};
    for (size_t c = 0; c < sizeof normal / sizeof normal[0]; c++) {
        tfm_clear_error();
        ck_assert_ptr_null(tfm_tensor_normal(1, shape, normal[c][0], normal[c][1], rng));
        expect_error(TFM_ERR_ARG, "tfm_tensor_normal: mean");
        tfm_clear_error();
        ck_assert_int_eq(tfm_init_normal(t, normal[c][0], normal[c][1], rng), TFM_ERR_ARG);
        expect_error(TFM_ERR_ARG, "tfm_init_normal: mean");
    }
    tfm_tensor *u = tfm_tensor_uniform(1, shape, -3.0f, 3.0f, rng);
    ck_assert_ptr_nonnull(u);
    for (int i = 0; i < 4; i++)
        ck_assert(fabsf(tfm_tensor_data_f32(u)[i]) <= 3.0f);
    tfm_tensor_free(u);
    tfm_tensor_free(t);
    tfm_rng_free(rng);
}
END_TEST

static Suite *nonfinite_suite(void)
{
    Suite *s = suite_create("nonfinite");
    TCase *tc = tcase_create("nonfinite");
    tcase_add_test(tc, exp_is_defined_for_every_float);
    tcase_add_test(tc, exp_row_passes_nan_and_inf_through);
    tcase_add_test(tc, softmax_rows_with_nan_or_inf);
    tcase_add_test(tc, losses_and_activations_pass_nan_on);
    tcase_add_test(tc, a_checkpoint_with_nan_or_inf);
    tcase_add_test(tc, load_checks_every_float_dtype);
    tcase_add_test(tc, load_check_finds_the_last_value_of_a_long_tensor);
    tcase_add_test(tc, fillers_refuse_infinite_parameters);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(nonfinite_suite)
