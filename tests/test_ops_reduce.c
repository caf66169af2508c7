/* sum and mean of all elements. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

static tfm_tensor *build_sum(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    (void)ctx;
    return tfm_sum(tape, in[0]);
}

static tfm_tensor *build_mean(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    (void)ctx;
    return tfm_mean(tape, in[0]);
}

START_TEST(values_and_shape)
{
    const float v[6] = {1.5f, -2.0f, 3.25f, 4.0f, -0.75f, 6.0f};
    tfm_tensor *x = tfm_tensor_from_f32(2, (const int64_t[]){2, 3}, v);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *s = tfm_sum(tape, x), *m = tfm_mean(tape, x);
    ck_assert_int_eq(tfm_tensor_ndim(s), 1);
    ck_assert_int_eq(tfm_tensor_dim(s, 0), 1);
    ck_assert_int_eq(tfm_tensor_ndim(m), 1);
    ck_assert_int_eq(tfm_tensor_dim(m, 0), 1);
    float sv, mv;
    ck_assert_int_eq(tfm_tensor_item(s, &sv), TFM_OK);
    ck_assert_int_eq(tfm_tensor_item(m, &mv), TFM_OK);
    ck_assert_float_eq(sv, 12.0f);
    ck_assert_float_eq(mv, 2.0f);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

/* Every element gets the seed (sum) or seed / n (mean), added to what the
 * gradient already holds. */
START_TEST(gradient_values_accumulate)
{
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 2, 5}, 11);
    tfm_tensor_set_requires_grad(x, 1);
    for (int round = 1; round <= 2; round++) {
        tfm_tape *tape = tfm_tape_create();
        tfm_tensor *s = tfm_sum(tape, x);
        tfm_tensor *m = tfm_mean(tape, x);
        tfm_tensor *both = tfm_add(tape, tfm_scale(tape, s, 3.0f), m);
        ck_assert_int_eq(tfm_tape_backward(tape, both), TFM_OK);
        const float *g = tfm_tensor_grad_f32(x);
        for (int i = 0; i < 20; i++)
            ck_assert_float_eq_tol(g[i], round * (3.0f + 1.0f / 20.0f), 1e-6f);
        tfm_tape_free(tape);
    }
    tfm_tensor_free(x);
}
END_TEST

START_TEST(gradients)
{
    tfm_tensor *x = gc_random(4, (const int64_t[]){2, 3, 2, 4}, 5);
    tfm_tensor_set_requires_grad(x, 1);
    ck_assert_gradcheck(build_sum, NULL, &x, 1);
    ck_assert_gradcheck(build_mean, NULL, &x, 1);
    tfm_tensor_free(x);
}
END_TEST

/* 4M copies of 0.1f: a float accumulator drifts by percents; the exact
 * answer, computed here in double, is within float rounding. */
START_TEST(large_sum_is_accurate)
{
    const int64_t n = (int64_t)1 << 22;
    tfm_tensor *x = tfm_tensor_full(1, &n, 0.1f);
    tfm_tape *tape = tfm_tape_create();
    float s, m;
    ck_assert_int_eq(tfm_tensor_item(tfm_sum(tape, x), &s), TFM_OK);
    ck_assert_int_eq(tfm_tensor_item(tfm_mean(tape, x), &m), TFM_OK);
    double want = (double)n * (double)0.1f;
    ck_assert_msg(fabs(s - want) <= 1e-7 * want, "sum %.9g, want %.9g", (double)s, want);
    ck_assert_msg(fabs(m - (double)0.1f) <= 1e-7 * 0.1, "mean %.9g", (double)m);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

START_TEST(errors)
{
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){3});
    tfm_tensor *ids = tfm_tensor_zeros(TFM_I32, 1, (const int64_t[]){3});
    tfm_tape *tape = tfm_tape_create();

    tfm_clear_error();
    ck_assert_ptr_null(tfm_sum(tape, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_sum: x is NULL"));
    tfm_clear_error();
    ck_assert_ptr_null(tfm_mean(tape, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_mean: x is NULL"));

    ck_assert_ptr_null(tfm_sum(NULL, x));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tape is NULL"));

    ck_assert_ptr_null(tfm_mean(tape, ids));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_mean: x must be float32"));

    /* the NULL from a failed op keeps its cause */
    ck_assert_ptr_null(tfm_sum(tape, tfm_sum(tape, ids)));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_sum: x must be float32"));

    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(ids);
}
END_TEST

static Suite *reduce_suite(void)
{
    Suite *s = suite_create("ops_reduce");
    TCase *tc = tcase_create("reduce");
    tcase_add_test(tc, values_and_shape);
    tcase_add_test(tc, gradient_values_accumulate);
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, large_sum_is_accurate);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(reduce_suite)
