/* linear, linear_relu and linear_relu_dropout: values against a
 * double-precision reference with and without bias, the dropout's mask
 * against tfm_dropout's, gradients of x, weight and bias, and the errors. */
#include <check.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

enum { ROWS_A = 2, ROWS_B = 3, IN = 4, OUT = 5 };

typedef struct variant { int relu, bias; } variant;

static tfm_tensor *apply(tfm_tape *tape, const variant *v, const tfm_tensor *x,
                         const tfm_tensor *w, const tfm_tensor *b)
{
    return v->relu ? tfm_linear_relu(tape, x, w, v->bias ? b : NULL)
                   : tfm_linear(tape, x, w, v->bias ? b : NULL);
}

static tfm_tensor *build(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    return apply(tape, ctx, in[0], in[1], in[2]);
}

START_TEST(values_match_reference)
{
    tfm_tensor *x = gc_random(3, (const int64_t[]){ROWS_A, ROWS_B, IN}, 1);
    tfm_tensor *w = gc_random(2, (const int64_t[]){OUT, IN}, 2);
    tfm_tensor *b = gc_random(1, (const int64_t[]){OUT}, 3);
    const float *xv = tfm_tensor_data_f32(x), *wv = tfm_tensor_data_f32(w),
                *bv = tfm_tensor_data_f32(b);
    for (int k = 0; k < 4; k++) {
        variant v = {k & 1, k >> 1};
        tfm_tape *tape = tfm_tape_create();
        tfm_tensor *y = apply(tape, &v, x, w, b);
        ck_assert_msg(y != NULL, "%s", tfm_last_error());
        ck_assert_int_eq(tfm_tensor_ndim(y), 3);
        ck_assert_int_eq(tfm_tensor_dim(y, 2), OUT);
        const float *yv = tfm_tensor_data_f32(y);
        for (int r = 0; r < ROWS_A * ROWS_B; r++)
            for (int o = 0; o < OUT; o++) {
                double want = v.bias ? bv[o] : 0.0;
                for (int i = 0; i < IN; i++)
                    want += (double)xv[r * IN + i] * wv[o * IN + i];
                if (v.relu && want < 0.0)
                    want = 0.0;
                ck_assert_double_eq_tol(yv[r * OUT + o], want, 1e-5);
            }
        tfm_tape_free(tape);
    }
    tfm_tensor_free(x);
    tfm_tensor_free(w);
    tfm_tensor_free(b);
}
END_TEST

START_TEST(gradients_of_every_input)
{
    for (int k = 0; k < 4; k++) {
        variant v = {k & 1, k >> 1};
        tfm_tensor *in[3] = {gc_random(3, (const int64_t[]){ROWS_A, ROWS_B, IN}, 4),
                             gc_random(2, (const int64_t[]){OUT, IN}, 5),
                             gc_random(1, (const int64_t[]){OUT}, 6)};
        for (int i = 0; i < (v.bias ? 3 : 2); i++)
            tfm_tensor_set_requires_grad(in[i], 1);
        ck_assert_gradcheck(build, &v, in, 3);
        for (int i = 0; i < 3; i++)
            tfm_tensor_free(in[i]);
    }
}
END_TEST

/* A fresh rng of a fixed seed per build: every evaluation drops the same. */
static tfm_tensor *build_dropout(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    (void)ctx;
    tfm_rng *rng = tfm_rng_create(42);
    tfm_tensor *y = tfm_linear_relu_dropout(tape, in[0], in[1], in[2], 0.4f, 1, rng);
    tfm_rng_free(rng);
    return y;
}

START_TEST(dropout_is_tfm_dropout_fused)
{
    tfm_tensor *x = gc_random(2, (const int64_t[]){40, IN}, 7);
    tfm_tensor *w = gc_random(2, (const int64_t[]){OUT, IN}, 8);
    tfm_tensor *b = gc_random(1, (const int64_t[]){OUT}, 9);
    tfm_tape *tape = tfm_tape_create();
    tfm_rng *r1 = tfm_rng_create(5), *r2 = tfm_rng_create(5);
    tfm_tensor *fused = tfm_linear_relu_dropout(tape, x, w, b, 0.3f, 1, r1);
    tfm_tensor *apart = tfm_dropout(tape, tfm_linear_relu(tape, x, w, b), 0.3f, 1, r2);
    ck_assert_msg(fused && apart, "%s", tfm_last_error());
    const float *f = tfm_tensor_data_f32(fused), *a = tfm_tensor_data_f32(apart);
    int dropped = 0;
    for (int i = 0; i < 40 * OUT; i++) {
        ck_assert_float_eq_tol(f[i], a[i], 1e-6f);
        dropped += a[i] == 0.0f;
    }
    ck_assert_int_gt(dropped, 0);
    /* not training: no dropout, and no rng needed */
    tfm_tensor *eval = tfm_linear_relu_dropout(tape, x, w, b, 0.3f, 0, NULL);
    tfm_tensor *plain = tfm_linear_relu(tape, x, w, b);
    ck_assert_mem_eq(tfm_tensor_data_f32(eval), tfm_tensor_data_f32(plain),
                     40 * OUT * sizeof(float));
    tfm_rng_free(r1);
    tfm_rng_free(r2);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(w);
    tfm_tensor_free(b);
}
END_TEST

START_TEST(dropout_gradients)
{
    tfm_tensor *in[3] = {gc_random(2, (const int64_t[]){6, IN}, 10),
                         gc_random(2, (const int64_t[]){OUT, IN}, 11),
                         gc_random(1, (const int64_t[]){OUT}, 12)};
    for (int i = 0; i < 3; i++)
        tfm_tensor_set_requires_grad(in[i], 1);
    ck_assert_gradcheck(build_dropout, NULL, in, 3);
    for (int i = 0; i < 3; i++)
        tfm_tensor_free(in[i]);
}
END_TEST

static void expect_error(tfm_tape *tape, const tfm_tensor *x, const tfm_tensor *w,
                         const tfm_tensor *b, tfm_status status, const char *needle)
{
    tfm_clear_error();
    ck_assert_ptr_null(tfm_linear(tape, x, w, b));
    ck_assert_int_eq(tfm_last_status(), status);
    ck_assert_msg(strstr(tfm_last_error(), needle) != NULL, "'%s' lacks '%s'",
                  tfm_last_error(), needle);
}

START_TEST(errors)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){3, IN});
    tfm_tensor *w = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){OUT, IN});
    tfm_tensor *w_wrong = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){OUT, IN + 1});
    tfm_tensor *b = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){OUT});
    tfm_tensor *b_wrong = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){OUT + 1});
    tfm_tensor *ids = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){3, IN});
    expect_error(tape, x, w_wrong, b, TFM_ERR_SHAPE, "[5,5]");
    expect_error(tape, x, w, b_wrong, TFM_ERR_SHAPE, "bias [6]");
    expect_error(tape, ids, w, b, TFM_ERR_DTYPE, "x");
    expect_error(tape, NULL, w, b, TFM_ERR_NULL, "x");
    expect_error(tape, x, NULL, b, TFM_ERR_NULL, "weight");
    expect_error(NULL, x, w, b, TFM_ERR_NULL, "tape");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_linear_relu(tape, x, w, b_wrong));
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_linear_relu"));
    tfm_clear_error();
    ck_assert_ptr_null(tfm_linear_relu_dropout(tape, x, w, b, 1.0f, 1, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    tfm_clear_error();
    ck_assert_ptr_null(tfm_linear_relu_dropout(tape, x, w, b, 0.5f, 1, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "rng"));
    /* outside training p is still checked, as tfm_dropout checks it, and no
     * rng is needed */
    tfm_clear_error();
    ck_assert_ptr_null(tfm_linear_relu_dropout(tape, x, w, b, 1.5f, 0, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(tfm_linear_relu_dropout(tape, x, w, b, 0.5f, 0, NULL));
    tfm_tensor *all[] = {x, w, w_wrong, b, b_wrong, ids};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tfm_tensor_free(all[i]);
    tfm_tape_free(tape);
}
END_TEST

static Suite *linear_suite(void)
{
    Suite *s = suite_create("ops_linear");
    TCase *tc = tcase_create("linear");
    tcase_add_test(tc, values_match_reference);
    tcase_add_test(tc, gradients_of_every_input);
    tcase_add_test(tc, dropout_is_tfm_dropout_fused);
    tcase_add_test(tc, dropout_gradients);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(linear_suite)
