/* add, sub, mul (with broadcasting), scale, masked_fill. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

enum { OP_ADD, OP_SUB, OP_MUL };

static tfm_tensor *build_binary(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    switch (*(int *)ctx) {
    case OP_ADD: return tfm_add(tape, in[0], in[1]);
    case OP_SUB: return tfm_sub(tape, in[0], in[1]);
    default: return tfm_mul(tape, in[0], in[1]);
    }
}

/* Every op against every broadcasting pattern: equal shapes, bias suffix,
 * size-1 axes on both sides, and a [1] scalar. */
START_TEST(binary_gradients)
{
    static const struct { int32_t na; int64_t a[4]; int32_t nb; int64_t b[4]; } cases[] = {
        {2, {3, 4}, 2, {3, 4}},
        {3, {2, 3, 4}, 1, {4}},
        {3, {2, 1, 4}, 2, {3, 1}},
        {1, {1}, 2, {2, 3}},
        {4, {2, 1, 3, 1}, 4, {1, 2, 1, 2}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int kind = OP_ADD; kind <= OP_MUL; kind++) {
            tfm_tensor *in[2] = {gc_random(cases[c].na, cases[c].a, 1 + c),
                                 gc_random(cases[c].nb, cases[c].b, 100 + c)};
            tfm_tensor_set_requires_grad(in[0], 1);
            tfm_tensor_set_requires_grad(in[1], 1);
            ck_assert_gradcheck(build_binary, &kind, in, 2);
            tfm_tensor_free(in[0]);
            tfm_tensor_free(in[1]);
        }
}
END_TEST

START_TEST(broadcast_values_and_shape)
{
    const float a[6] = {1, 2, 3, 4, 5, 6};
    const float bias[3] = {10, 20, 30};
    tfm_tensor *ta = tfm_tensor_from_f32(2, (const int64_t[]){2, 3}, a);
    tfm_tensor *tb = tfm_tensor_from_f32(1, (const int64_t[]){3}, bias);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *sum = tfm_add(tape, ta, tb);
    tfm_tensor *diff = tfm_sub(tape, tb, ta);
    ck_assert_int_eq(tfm_tensor_ndim(sum), 2);
    ck_assert_int_eq(tfm_tensor_dim(sum, 0), 2);
    ck_assert_int_eq(tfm_tensor_dim(sum, 1), 3);
    const float *s = tfm_tensor_data_f32(sum), *d = tfm_tensor_data_f32(diff);
    for (int i = 0; i < 6; i++) {
        ck_assert_float_eq(s[i], a[i] + bias[i % 3]);
        ck_assert_float_eq(d[i], bias[i % 3] - a[i]);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(ta);
    tfm_tensor_free(tb);
}
END_TEST

START_TEST(shapes_that_do_not_broadcast)
{
    tfm_tensor *a = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){2, 3});
    tfm_tensor *b = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){2});
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_mul(tape, a, b));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[2,3]"));
    tfm_tape_free(tape);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
}
END_TEST

static tfm_tensor *build_scale(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    (void)ctx;
    return tfm_scale(tape, in[0], -2.5f);
}

START_TEST(scale_gradient)
{
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 3, 4}, 7);
    tfm_tensor_set_requires_grad(x, 1);
    ck_assert_gradcheck(build_scale, NULL, &x, 1);
    tfm_tensor_free(x);
}
END_TEST

static tfm_tensor *build_masked_fill(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    return tfm_masked_fill(tape, in[0], (const tfm_tensor *)ctx, -1e9f);
}

START_TEST(masked_fill_values_and_gradient)
{
    const int32_t keep_out[3] = {0, 1, 0};
    tfm_tensor *mask = tfm_tensor_from_i32(2, (const int64_t[]){1, 3}, keep_out);
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 2, 3}, 9);
    tfm_tensor_set_requires_grad(x, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_masked_fill(tape, x, mask, -1e9f);
    const float *xv = tfm_tensor_data_f32(x), *yv = tfm_tensor_data_f32(y);
    for (int i = 0; i < 12; i++)
        ck_assert_float_eq(yv[i], keep_out[i % 3] ? -1e9f : xv[i]);
    tfm_tape_free(tape);
    ck_assert_gradcheck(build_masked_fill, mask, &x, 1);
    tfm_tensor_free(x);
    tfm_tensor_free(mask);
}
END_TEST

static Suite *elementwise_suite(void)
{
    Suite *s = suite_create("ops_elementwise");
    TCase *tc = tcase_create("elementwise");
    tcase_add_test(tc, binary_gradients);
    tcase_add_test(tc, broadcast_values_and_shape);
    tcase_add_test(tc, shapes_that_do_not_broadcast);
    tcase_add_test(tc, scale_gradient);
    tcase_add_test(tc, masked_fill_values_and_gradient);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(elementwise_suite)
