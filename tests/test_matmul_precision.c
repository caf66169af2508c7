/* tfm_set_matmul_precision: the setting and its errors everywhere; on CPUs
 * with AVX512_BF16, the bfloat16 products in every transpose and with
 * ragged tails against a double-precision sum of the rounded inputs, the
 * thread count changing no bit, small products left in float32, NaN
 * passed on, a linear layer's bias added once as the product writes, its
 * gradients near float32's, and a regression learning as it does in
 * float32. Where the CPU lacks AVX512_BF16 the
 * product tests say so and check the refusal instead. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

/* The float rounded to bfloat16 (to nearest even), as a float. */
static double rounded(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Whether bfloat16 products run here; if not, the refusal is checked. */
static int bf16_here(void)
{
    tfm_status s = tfm_set_matmul_precision(TFM_MATMUL_BFLOAT16);
    if (s == TFM_OK)
        return 1;
    ck_assert_int_eq(s, TFM_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "bfloat16 products"));
    ck_assert_int_eq(tfm_get_matmul_precision(), TFM_MATMUL_FLOAT32);
    fprintf(stderr, "test_matmul_precision: %s: product tests not run\n", tfm_last_error());
    return 0;
}

static void back_to_float32(void)
{
    ck_assert_int_eq(tfm_set_matmul_precision(TFM_MATMUL_FLOAT32), TFM_OK);
}

/* tfm_matmul's output values at the precision set now. */
static float *product(const tfm_tensor *a, const tfm_tensor *b, int ta, int tb, int64_t count)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *c = tfm_matmul(tape, a, b, ta, tb);
    ck_assert_msg(c != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tensor_numel(c), count);
    float *out = malloc((size_t)count * sizeof *out);
    ck_assert_int_eq(tfm_tensor_read_f32(c, out, count), TFM_OK);
    tfm_tape_free(tape);
    return out;
}

START_TEST(setting_and_errors)
{
    ck_assert_int_eq(tfm_get_matmul_precision(), TFM_MATMUL_FLOAT32);
    ck_assert_int_eq(tfm_set_matmul_precision((tfm_matmul_precision)7), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_set_matmul_precision: 7"));
    ck_assert_int_eq(tfm_get_matmul_precision(), TFM_MATMUL_FLOAT32);
    if (bf16_here()) {
        ck_assert_int_eq(tfm_get_matmul_precision(), TFM_MATMUL_BFLOAT16);
        ck_assert_int_eq(tfm_set_matmul_precision((tfm_matmul_precision)-1), TFM_ERR_ARG);
        ck_assert_int_eq(tfm_get_matmul_precision(), TFM_MATMUL_BFLOAT16);
        back_to_float32();
        ck_assert_int_eq(tfm_get_matmul_precision(), TFM_MATMUL_FLOAT32);
    }
}
END_TEST

/* Sizes that leave partial tiles (12 x 32), partial k blocks (256), a
 * partial row block (144) and an odd k; every transpose. Each element is
 * within float32 rounding of the exact sum of the rounded inputs'
 * products, and not float32's result. */
START_TEST(products_match_the_rounded_inputs)
{
    if (!bf16_here())
        return;
    static const int64_t sizes[][3] = {{33, 65, 35}, {100, 70, 300}, {37, 129, 513},
                                       {64, 32, 32}, {157, 47, 77}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int t = 0; t < 4; t++) {
            int ta = t & 1, tb = t >> 1;
            int64_t m = sizes[s][0], n = sizes[s][1], k = sizes[s][2];
            tfm_tensor *a = gc_random(2, ta ? (int64_t[]){k, m} : (int64_t[]){m, k}, 3 + s);
            tfm_tensor *b = gc_random(2, tb ? (int64_t[]){n, k} : (int64_t[]){k, n}, 9 + s);
            const float *av = tfm_tensor_data_f32(a), *bv = tfm_tensor_data_f32(b);
            ck_assert_int_eq(tfm_set_matmul_precision(TFM_MATMUL_BFLOAT16), TFM_OK);
            float *got = product(a, b, ta, tb, m * n);
            back_to_float32();
            float *single = product(a, b, ta, tb, m * n);
            int64_t differ = 0;
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double sum = 0.0, size = 0.0;
                    for (int64_t e = 0; e < k; e++) {
                        double x = rounded(av[ta ? e * m + i : i * k + e]);
                        double y = rounded(bv[tb ? j * k + e : e * n + j]);
                        sum += x * y;
                        size += fabs(x * y);
                    }
                    float c = got[i * n + j];
                    ck_assert_msg(fabs(c - sum) <= 1e-6 * size + 1e-30,
                                  "%lldx%lldx%lld ta %d tb %d: C[%lld][%lld] = %.9g, exact %.9g",
                                  (long long)m, (long long)n, (long long)k, ta, tb, (long long)i,
                                  (long long)j, (double)c, sum);
                    ck_assert_msg(fabs(c - single[i * n + j]) <= 1e-2 * size,
                                  "float32 gave %.9g, bfloat16 %.9g",
                                  (double)single[i * n + j], (double)c);
                    differ += c != single[i * n + j];
                }
            ck_assert_msg(differ > m * n / 2, "only %lld of %lld differ from float32's",
                          (long long)differ, (long long)(m * n));
            free(got);
            free(single);
            tfm_tensor_free(a);
            tfm_tensor_free(b);
        }
}
END_TEST

START_TEST(thread_count_changes_no_bit)
{
    if (!bf16_here())
        return;
    enum { M = 301, N = 157, K = 389 };
    tfm_tensor *a = gc_random(2, (int64_t[]){M, K}, 1);
    tfm_tensor *b = gc_random(2, (int64_t[]){N, K}, 2);
    float *one = NULL;
    for (int threads = 1; threads <= 3; threads++) {
        ck_assert_int_eq(tfm_set_num_threads(threads), TFM_OK);
        float *c = product(a, b, 0, 1, M * N);
        if (!one) {
            one = c;
            continue;
        }
        ck_assert_msg(memcmp(one, c, sizeof(float) * M * N) == 0, "%d threads", threads);
        free(c);
    }
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
    back_to_float32();
    free(one);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
}
END_TEST

/* Under 32 rows: float32's bits exactly. */
START_TEST(small_products_stay_float32)
{
    if (!bf16_here())
        return;
    tfm_tensor *a = gc_random(2, (int64_t[]){31, 200}, 4);
    tfm_tensor *b = gc_random(2, (int64_t[]){200, 90}, 5);
    float *got = product(a, b, 0, 0, 31 * 90);
    back_to_float32();
    float *single = product(a, b, 0, 0, 31 * 90);
    ck_assert(memcmp(got, single, sizeof(float) * 31 * 90) == 0);
    free(got);
    free(single);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
}
END_TEST

/* A NaN in a row of A makes that row of C NaN, and only that row. */
START_TEST(nan_passes_on)
{
    if (!bf16_here())
        return;
    enum { M = 40, N = 48, K = 64 };
    tfm_tensor *a = gc_random(2, (int64_t[]){M, K}, 6);
    tfm_tensor *b = gc_random(2, (int64_t[]){K, N}, 7);
    tfm_tensor_data_f32(a)[5 * K + 17] = NAN;
    float *c = product(a, b, 0, 0, M * N);
    back_to_float32();
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++)
            ck_assert_msg(isnan(c[i * N + j]) == (i == 5), "C[%lld][%lld] = %g", (long long)i,
                          (long long)j, (double)c[i * N + j]);
    free(c);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
}
END_TEST

/* tfm_linear's output, whose product adds the bias as it writes: each
 * element is the exact sum of the rounded inputs' products plus the bias,
 * added once whatever the k blocks (300 > 256) and the threads, with
 * partial tiles on every side. In float32 the BLAS path copies the bias in
 * first: the same sum there, within float32's rounding. */
START_TEST(linear_adds_its_bias_once)
{
    static const int64_t sizes[][3] = {{100, 47, 300}, {33, 65, 35}, {157, 96, 64}};
    for (int precision = 0; precision < 2; precision++) {
        if (precision == 1 && !bf16_here())
            return;
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int threads = 1; threads <= 2; threads++) {
                int64_t rows = sizes[s][0], out = sizes[s][1], in = sizes[s][2];
                tfm_tensor *x = gc_random(2, (int64_t[]){rows, in}, 21 + s);
                tfm_tensor *w = gc_random(2, (int64_t[]){out, in}, 24 + s);
                tfm_tensor *bias = gc_random(1, (int64_t[]){out}, 27 + s);
                const float *xv = tfm_tensor_data_f32(x), *wv = tfm_tensor_data_f32(w),
                            *bv = tfm_tensor_data_f32(bias);
                ck_assert_int_eq(tfm_set_num_threads(threads), TFM_OK);
                ck_assert_int_eq(tfm_set_matmul_precision(precision ? TFM_MATMUL_BFLOAT16
                                                                    : TFM_MATMUL_FLOAT32),
                                 TFM_OK);
                tfm_tape *tape = tfm_tape_create();
                tfm_tensor *y = tfm_linear(tape, x, w, bias);
                ck_assert_msg(y != NULL, "%s", tfm_last_error());
                const float *yv = tfm_tensor_data_f32(y);
                for (int64_t i = 0; i < rows; i++)
                    for (int64_t j = 0; j < out; j++) {
                        double sum = bv[j], size = fabs(bv[j]);
                        for (int64_t e = 0; e < in; e++) {
                            double a = xv[i * in + e], b = wv[j * in + e];
                            if (precision)
                                a = rounded((float)a), b = rounded((float)b);
                            sum += a * b;
                            size += fabs(a * b);
                        }
                        ck_assert_msg(fabs(yv[i * out + j] - sum) <= 1e-6 * size + 1e-30,
                                      "%s %lldx%lldx%lld, %d threads: y[%lld][%lld] = %.9g, "
                                      "exact %.9g", precision ? "bfloat16" : "float32",
                                      (long long)rows, (long long)out, (long long)in, threads,
                                      (long long)i, (long long)j, (double)yv[i * out + j], sum);
                    }
                tfm_tape_free(tape);
                tfm_tensor_free(x);
                tfm_tensor_free(w);
                tfm_tensor_free(bias);
            }
    }
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
    back_to_float32();
}
END_TEST

/* x, weight and bias's gradients through tfm_linear, at the precision set. */
static void linear_gradients(tfm_tensor *x, tfm_tensor *w, tfm_tensor *bias, float *out,
                             int64_t counts[3])
{
    tfm_tensor *params[3] = {x, w, bias};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(tfm_tensor_zero_grad(params[i]), TFM_OK);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_linear(tape, x, w, bias);
    tfm_tensor *loss = tfm_mean(tape, tfm_mul(tape, y, y));
    ck_assert_msg(loss != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(tfm_tensor_read_grad(params[i], out, counts[i]), TFM_OK);
        out += counts[i];
    }
    tfm_tape_free(tape);
}

/* Every gradient within 1% of the largest float32 one of its tensor. */
START_TEST(linear_gradients_near_float32)
{
    if (!bf16_here())
        return;
    enum { ROWS = 96, IN = 64, OUT = 80 };
    tfm_tensor *x = gc_random(2, (int64_t[]){ROWS, IN}, 11);
    tfm_tensor *w = gc_random(2, (int64_t[]){OUT, IN}, 12);
    tfm_tensor *bias = gc_random(1, (int64_t[]){OUT}, 13);
    tfm_tensor *params[3] = {x, w, bias};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(tfm_tensor_set_requires_grad(params[i], 1), TFM_OK);
    int64_t counts[3] = {ROWS * IN, OUT * IN, OUT};
    static float half[ROWS * IN + OUT * IN + OUT], single[ROWS * IN + OUT * IN + OUT];
    linear_gradients(x, w, bias, half, counts);
    back_to_float32();
    linear_gradients(x, w, bias, single, counts);
    int64_t at = 0;
    for (int i = 0; i < 3; i++) {
        double largest = 0.0, worst = 0.0;
        for (int64_t j = at; j < at + counts[i]; j++) {
            largest = fmax(largest, fabs(single[j]));
            worst = fmax(worst, fabs((double)half[j] - single[j]));
        }
        ck_assert_msg(worst <= 1e-2 * largest, "gradient %d: off by %g of %g", i, worst,
                      largest);
        at += counts[i];
    }
    for (int i = 0; i < 3; i++)
        tfm_tensor_free(params[i]);
}
END_TEST

/* y = x W* learned from scratch with Adam: the final loss, relative to the
 * first, at the precision set. */
static double regression(void)
{
    enum { ROWS = 128, IN = 64, OUT = 48, STEPS = 300 };
    tfm_tensor *x = gc_random(2, (int64_t[]){ROWS, IN}, 21);
    tfm_tensor *truth = gc_random(2, (int64_t[]){OUT, IN}, 22);
    tfm_params *params = tfm_params_create();
    tfm_tensor *w = tfm_params_add(params, "w", 2, (int64_t[]){OUT, IN});
    ck_assert_ptr_nonnull(w);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_linear(tape, x, truth, NULL);
    ck_assert_ptr_nonnull(y);
    tfm_tensor *target = tfm_tensor_clone(y);
    tfm_tape_reset(tape);
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAM);
    o.lr = 0.05f;
    tfm_optimizer *adam = tfm_optimizer_create(params, &o);
    ck_assert_msg(adam != NULL, "%s", tfm_last_error());
    float first = 0.0f, last = 0.0f;
    for (int step = 0; step < STEPS; step++) {
        tfm_tensor *err = tfm_sub(tape, tfm_linear(tape, x, w, NULL), target);
        tfm_tensor *loss = tfm_mean(tape, tfm_mul(tape, err, err));
        ck_assert_msg(loss != NULL, "%s", tfm_last_error());
        ck_assert_int_eq(tfm_tensor_item(loss, step ? &last : &first), TFM_OK);
        ck_assert_int_eq(tfm_optimizer_zero_grad(adam), TFM_OK);
        ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
        ck_assert_int_eq(tfm_optimizer_step(adam), TFM_OK);
        tfm_tape_reset(tape);
    }
    tfm_optimizer_free(adam);
    tfm_tape_free(tape);
    tfm_tensor_free(target);
    tfm_params_free(params);
    tfm_tensor_free(truth);
    tfm_tensor_free(x);
    return (double)last / first;
}

/* Both fall by over 1000x; bfloat16 stops within 10x of float32, where
 * its rounding of x and W (2^-9) bounds the fit. */
START_TEST(regression_learns_as_in_float32)
{
    if (!bf16_here())
        return;
    double half = regression();
    back_to_float32();
    double single = regression();
    ck_assert_msg(single < 1e-3 && half < 1e-3, "loss fell to %g (float32) and %g (bfloat16)",
                  single, half);
    fprintf(stderr, "regression: loss fell to %.3g of its start (float32), %.3g (bfloat16)\n",
            single, half);
}
END_TEST

static Suite *matmul_precision_suite(void)
{
    Suite *s = suite_create("matmul_precision");
    TCase *tc = tcase_create("bfloat16");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, setting_and_errors);
    tcase_add_test(tc, products_match_the_rounded_inputs);
    tcase_add_test(tc, thread_count_changes_no_bit);
    tcase_add_test(tc, small_products_stay_float32);
    tcase_add_test(tc, nan_passes_on);
    tcase_add_test(tc, linear_adds_its_bias_once);
    tcase_add_test(tc, linear_gradients_near_float32);
    tcase_add_test(tc, regression_learns_as_in_float32);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(matmul_precision_suite)
