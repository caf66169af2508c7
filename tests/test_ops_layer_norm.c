/* layer_norm: values with and without weight and bias, gradients of x,
 * weight and bias, argument errors. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

enum { ROWS = 6, N = 8 };

/* (x - mean) / sqrt(biased var + eps) * w + b in double; w, b may be NULL. */
static void ref_layer_norm(const float *x, const float *w, const float *b, double eps,
                           int rows, int n, double *y)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        double mean = 0.0, var = 0.0;
        for (int j = 0; j < n; j++)
            mean += xr[j];
        mean /= n;
        for (int j = 0; j < n; j++)
            var += (xr[j] - mean) * (xr[j] - mean);
        var /= n;
        for (int j = 0; j < n; j++)
            y[r * n + j] = (xr[j] - mean) / sqrt(var + eps) * (w ? w[j] : 1.0) +
                           (b ? b[j] : 0.0);
    }
}

START_TEST(values)
{
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 3, N}, 1);
    tfm_tensor *w = gc_random(1, (const int64_t[]){N}, 2);
    tfm_tensor *b = gc_random(1, (const int64_t[]){N}, 3);
    float *xv = tfm_tensor_data_f32(x);
    for (int i = 0; i < ROWS * N; i++)
        xv[i] = 5.0f + 3.0f * xv[i]; /* off-centre and wide: mean and var matter */
    tfm_tape *tape = tfm_tape_create();
    for (int mode = 0; mode < 4; mode++) {
        tfm_tensor *tw = mode & 1 ? w : NULL, *tb = mode & 2 ? b : NULL;
        tfm_tensor *y = tfm_layer_norm(tape, x, tw, tb, 1e-5f);
        ck_assert_ptr_nonnull(y);
        ck_assert_int_eq(tfm_tensor_ndim(y), 3);
        ck_assert_int_eq(tfm_tensor_dim(y, 1), 3);
        ck_assert_int_eq(tfm_tensor_dim(y, 2), N);
        double ref[ROWS * N];
        ref_layer_norm(xv, tw ? tfm_tensor_data_f32(tw) : NULL,
                       tb ? tfm_tensor_data_f32(tb) : NULL, 1e-5, ROWS, N, ref);
        const float *yv = tfm_tensor_data_f32(y);
        for (int i = 0; i < ROWS * N; i++)
            ck_assert_double_eq_tol(yv[i], ref[i], 1e-5);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(w);
    tfm_tensor_free(b);
}
END_TEST

/* A constant row has variance 0: eps alone sets the scale, giving the bias. */
START_TEST(constant_row_and_eps)
{
    const float v[8] = {2, 2, 2, 2, 1, 2, 3, 4};
    const float bias[4] = {0.5f, -1, 0, 3};
    tfm_tensor *x = tfm_tensor_from_f32(2, (const int64_t[]){2, 4}, v);
    tfm_tensor *b = tfm_tensor_from_f32(1, (const int64_t[]){4}, bias);
    tfm_tape *tape = tfm_tape_create();
    const float *y = tfm_tensor_data_f32(tfm_layer_norm(tape, x, NULL, b, 0.1f));
    for (int j = 0; j < 4; j++)
        ck_assert_float_eq(y[j], bias[j]);
    /* second row: mean 2.5, var 1.25 */
    for (int j = 0; j < 4; j++)
        ck_assert_double_eq_tol(y[4 + j], (v[4 + j] - 2.5) / sqrt(1.25 + 0.1) + bias[j], 1e-6);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(b);
}
END_TEST

static tfm_tensor *build_layer_norm(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    int mode = *(int *)ctx;
    return tfm_layer_norm(tape, in[0], mode & 1 ? in[1] : NULL, mode & 2 ? in[2] : NULL,
                          1e-5f);
}

/* Every combination of weight/bias present, and of which inputs want grads
 * (x alone, the parameters alone, all). */
START_TEST(gradients)
{
    for (int mode = 0; mode < 4; mode++)
        for (int wants = 1; wants <= 3; wants++) {
            tfm_tensor *in[3] = {gc_random(3, (const int64_t[]){2, 3, N}, 10 + mode),
                                 gc_random(1, (const int64_t[]){N}, 20 + mode),
                                 gc_random(1, (const int64_t[]){N}, 30 + mode)};
            /* without parameters x must want a gradient */
            tfm_tensor_set_requires_grad(in[0], (wants & 1) || mode == 0);
            tfm_tensor_set_requires_grad(in[1], (mode & 1) && (wants & 2));
            tfm_tensor_set_requires_grad(in[2], (mode & 2) && (wants & 2));
            ck_assert_gradcheck(build_layer_norm, &mode, in, 3);
            for (int k = 0; k < 3; k++)
                tfm_tensor_free(in[k]);
        }
}
END_TEST

/* Rows of small spread make rstd large and the backward terms sharp. */
START_TEST(gradient_narrow_rows)
{
    int mode = 3;
    tfm_tensor *in[3] = {gc_random(2, (const int64_t[]){4, N}, 40),
                         gc_random(1, (const int64_t[]){N}, 41),
                         gc_random(1, (const int64_t[]){N}, 42)};
    float *xv = tfm_tensor_data_f32(in[0]);
    for (int i = 0; i < 4 * N; i++)
        xv[i] = 1.0f + 0.5f * xv[i];
    for (int k = 0; k < 3; k++)
        tfm_tensor_set_requires_grad(in[k], 1);
    ck_assert_gradcheck(build_layer_norm, &mode, in, 3);
    for (int k = 0; k < 3; k++)
        tfm_tensor_free(in[k]);
}
END_TEST

START_TEST(errors)
{
    tfm_tensor *x = tfm_tensor_ones(2, (const int64_t[]){2, 4});
    tfm_tensor *xi = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){2, 4});
    tfm_tensor *w = tfm_tensor_ones(1, (const int64_t[]){4});
    tfm_tensor *w5 = tfm_tensor_ones(1, (const int64_t[]){5});
    tfm_tensor *w2d = tfm_tensor_ones(2, (const int64_t[]){1, 4});
    tfm_tensor *wi = tfm_tensor_zeros(TFM_I32, 1, (const int64_t[]){4});
    tfm_tape *tape = tfm_tape_create();

    tfm_clear_error();
    ck_assert_ptr_null(tfm_layer_norm(tape, NULL, w, w, 1e-5f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_layer_norm"));
    ck_assert_ptr_null(tfm_layer_norm(NULL, x, w, w, 1e-5f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tape"));
    ck_assert_ptr_null(tfm_layer_norm(tape, xi, NULL, NULL, 1e-5f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    ck_assert_ptr_null(tfm_layer_norm(tape, x, wi, NULL, 1e-5f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "weight"));

    ck_assert_ptr_null(tfm_layer_norm(tape, x, w5, NULL, 1e-5f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "weight [5]"));
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[2,4]"));
    ck_assert_ptr_null(tfm_layer_norm(tape, x, w, w5, 1e-5f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "bias [5]"));
    ck_assert_ptr_null(tfm_layer_norm(tape, x, w2d, NULL, 1e-5f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[1,4]"));

    const float bad_eps[3] = {-1e-5f, NAN, INFINITY};
    for (int i = 0; i < 3; i++) {
        ck_assert_ptr_null(tfm_layer_norm(tape, x, w, w, bad_eps[i]));
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "eps"));
    }
    ck_assert_ptr_nonnull(tfm_layer_norm(tape, x, w, w, 0.0f));

    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(xi);
    tfm_tensor_free(w);
    tfm_tensor_free(w5);
    tfm_tensor_free(w2d);
    tfm_tensor_free(wi);
}
END_TEST

/* --- RMS norm: no mean, no bias ---------------------------------------------- */

static tfm_tensor *build_rms_norm(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    return tfm_rms_norm(tape, in[0], *(int *)ctx ? in[1] : NULL, 1e-6f);
}

/* x / sqrt(mean(x^2) + eps) * w in double, rows whose mean is far from 0
 * (a layer norm would give other values), with and without the weight. */
START_TEST(rms_values)
{
    tfm_tensor *x = gc_random(2, (const int64_t[]){3, N}, 50);
    tfm_tensor *w = gc_random(1, (const int64_t[]){N}, 51);
    float *xv = tfm_tensor_data_f32(x);
    for (int i = 0; i < 3 * N; i++)
        xv[i] += 2.0f;
    const float *wv = tfm_tensor_data_f32(w);
    tfm_tape *tape = tfm_tape_create();
    for (int with_weight = 0; with_weight < 2; with_weight++) {
        const float *y = tfm_tensor_data_f32(tfm_rms_norm(tape, x, with_weight ? w : NULL, 1e-6f));
        for (int r = 0; r < 3; r++) {
            double sq = 0;
            for (int i = 0; i < N; i++)
                sq += (double)xv[r * N + i] * xv[r * N + i] / N;
            for (int i = 0; i < N; i++) {
                double want = xv[r * N + i] / sqrt(sq + 1e-6) * (with_weight ? wv[i] : 1.0);
                ck_assert_double_eq_tol(y[r * N + i], want, 1e-5);
            }
        }
    }
    ck_assert_ptr_null(tfm_rms_norm(tape, x, x, 1e-6f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_rms_norm"));
    tfm_clear_error();
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(w);
}
END_TEST

START_TEST(rms_gradients)
{
    for (int with_weight = 0; with_weight < 2; with_weight++) {
        tfm_tensor *in[2] = {gc_random(3, (const int64_t[]){2, 3, N}, 60 + with_weight),
                             gc_random(1, (const int64_t[]){N}, 62)};
        float *xv = tfm_tensor_data_f32(in[0]);
        for (int i = 0; i < 6 * N; i++)
            xv[i] += 0.5f; /* a mean that a wrong mean term would show */
        tfm_tensor_set_requires_grad(in[0], 1);
        tfm_tensor_set_requires_grad(in[1], with_weight);
        ck_assert_gradcheck(build_rms_norm, &with_weight, in, 2);
        tfm_tensor_free(in[0]);
        tfm_tensor_free(in[1]);
    }
}
END_TEST

static Suite *layer_norm_suite(void)
{
    Suite *s = suite_create("ops_layer_norm");
    TCase *tc = tcase_create("layer_norm");
    tcase_add_test(tc, values);
    tcase_add_test(tc, constant_row_and_eps);
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, gradient_narrow_rows);
    tcase_add_test(tc, errors);
    tcase_add_test(tc, rms_values);
    tcase_add_test(tc, rms_gradients);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(layer_norm_suite)
