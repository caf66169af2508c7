/* reshape, transpose, split_heads, merge_heads, concat: values against
 * index-computed references, gradients, and the errors. */
#include <check.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

static void assert_shape(const tfm_tensor *t, int32_t ndim, const int64_t *shape)
{
    ck_assert_int_eq(tfm_tensor_ndim(t), ndim);
    for (int32_t i = 0; i < ndim; i++)
        ck_assert_int_eq(tfm_tensor_dim(t, i), shape[i]);
}

static void assert_error(tfm_status status, const char *substring)
{
    ck_assert_int_eq(tfm_last_status(), status);
    ck_assert_msg(strstr(tfm_last_error(), substring) != NULL, "'%s' lacks '%s'",
                  tfm_last_error(), substring);
}

/* --- reshape ------------------------------------------------------------------ */

START_TEST(reshape_is_a_view_with_inferred_axis)
{
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 3, 4}, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_reshape(tape, x, 2, (const int64_t[]){-1, 6});
    assert_shape(y, 2, (const int64_t[]){4, 6});
    ck_assert_ptr_eq(tfm_tensor_data_f32(y), tfm_tensor_data_f32(x));
    tfm_tensor *z = tfm_reshape(tape, y, 4, (const int64_t[]){1, 24, 1, 1});
    assert_shape(z, 4, (const int64_t[]){1, 24, 1, 1});
    tfm_tensor *w = tfm_reshape(tape, x, 1, (const int64_t[]){-1});
    assert_shape(w, 1, (const int64_t[]){24});
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

static tfm_tensor *build_reshape(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    (void)ctx;
    return tfm_reshape(tape, in[0], 3, (const int64_t[]){4, -1, 2});
}

START_TEST(reshape_gradient)
{
    tfm_tensor *x = gc_random(2, (const int64_t[]){3, 8}, 2);
    tfm_tensor_set_requires_grad(x, 1);
    ck_assert_gradcheck(build_reshape, NULL, &x, 1);
    tfm_tensor_free(x);
}
END_TEST

START_TEST(reshape_errors)
{
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){2, 3});
    tfm_tensor *ids = tfm_tensor_zeros(TFM_I32, 1, (const int64_t[]){6});
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_reshape(tape, x, 2, (const int64_t[]){-1, -1}));
    assert_error(TFM_ERR_ARG, "-1");
    ck_assert_ptr_null(tfm_reshape(tape, x, 2, (const int64_t[]){4, 2}));
    assert_error(TFM_ERR_SHAPE, "[2,3]");
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[4,2]"));
    ck_assert_ptr_null(tfm_reshape(tape, x, 2, (const int64_t[]){4, -1}));
    assert_error(TFM_ERR_SHAPE, "[4,-1]");
    /* sizes whose product would overflow int64 are a mismatch, not a wrap */
    ck_assert_ptr_null(tfm_reshape(tape, x, 3, (const int64_t[]){1LL << 40, 1LL << 40, -1}));
    assert_error(TFM_ERR_SHAPE, "6 elements");
    ck_assert_ptr_null(tfm_reshape(tape, x, 2, (const int64_t[]){0, 6}));
    assert_error(TFM_ERR_SHAPE, "axis 0");
    ck_assert_ptr_null(tfm_reshape(tape, x, 0, (const int64_t[]){6}));
    assert_error(TFM_ERR_ARG, "ndim");
    ck_assert_ptr_null(tfm_reshape(tape, x, 5, (const int64_t[]){1, 1, 1, 1, 6}));
    assert_error(TFM_ERR_ARG, "ndim");
    ck_assert_ptr_null(tfm_reshape(tape, x, 1, NULL));
    assert_error(TFM_ERR_NULL, "shape");
    /* int32 ids and targets reshape too */
    tfm_tensor *flat_ids = tfm_reshape(tape, ids, 2, (const int64_t[]){3, 2});
    ck_assert_ptr_nonnull(flat_ids);
    ck_assert_int_eq(tfm_tensor_dtype(flat_ids), TFM_I32);
    tfm_clear_error();
    ck_assert_ptr_null(tfm_reshape(tape, NULL, 1, (const int64_t[]){6}));
    assert_error(TFM_ERR_NULL, "x is NULL");
    ck_assert_ptr_null(tfm_reshape(NULL, x, 1, (const int64_t[]){6}));
    assert_error(TFM_ERR_NULL, "tape");
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(ids);
}
END_TEST

/* --- transpose ---------------------------------------------------------------- */

START_TEST(transpose_every_axis_pair)
{
    const int64_t shape[4] = {2, 3, 4, 5};
    tfm_tensor *x = gc_random(4, shape, 3);
    const float *xv = tfm_tensor_data_f32(x);
    tfm_tape *tape = tfm_tape_create();
    for (int32_t p = 0; p < 4; p++)
        for (int32_t q = 0; q < 4; q++) {
            /* negative axes for half of the pairs */
            tfm_tensor *y = tfm_transpose(tape, x, q % 2 ? p - 4 : p, q);
            ck_assert_msg(y != NULL, "%s", tfm_last_error());
            int64_t ys[4];
            memcpy(ys, shape, sizeof ys);
            ys[p] = shape[q];
            ys[q] = shape[p];
            assert_shape(y, 4, ys);
            const float *yv = tfm_tensor_data_f32(y);
            int64_t i = 0, idx[4];
            for (idx[0] = 0; idx[0] < ys[0]; idx[0]++)
                for (idx[1] = 0; idx[1] < ys[1]; idx[1]++)
                    for (idx[2] = 0; idx[2] < ys[2]; idx[2]++)
                        for (idx[3] = 0; idx[3] < ys[3]; idx[3]++, i++) {
                            int64_t src[4];
                            memcpy(src, idx, sizeof src);
                            src[p] = idx[q];
                            src[q] = idx[p];
                            int64_t at = ((src[0] * 3 + src[1]) * 4 + src[2]) * 5 + src[3];
                            ck_assert_float_eq(yv[i], xv[at]);
                        }
        }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

START_TEST(transpose_2d_values)
{
    tfm_tensor *x = tfm_tensor_from_f32(2, (const int64_t[]){2, 3},
                                        (const float[]){1, 2, 3, 4, 5, 6});
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_transpose(tape, x, 0, 1);
    assert_shape(y, 2, (const int64_t[]){3, 2});
    const float want[6] = {1, 4, 2, 5, 3, 6};
    ck_assert_mem_eq(tfm_tensor_data_f32(y), want, sizeof want);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

static tfm_tensor *build_transpose(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    const int32_t *axes = ctx;
    return tfm_transpose(tape, in[0], axes[0], axes[1]);
}

START_TEST(transpose_gradients)
{
    static const struct { int32_t ndim; int64_t shape[4]; int32_t axes[2]; } cases[] = {
        {4, {2, 3, 4, 2}, {0, 1}}, {4, {2, 3, 4, 2}, {0, 3}}, {4, {2, 3, 4, 2}, {1, 2}},
        {4, {2, 3, 4, 2}, {-1, -2}}, {4, {2, 3, 4, 2}, {3, 1}}, {4, {2, 3, 4, 2}, {2, 0}},
        {3, {2, 3, 4}, {0, 2}}, {2, {3, 5}, {1, 0}}, {2, {3, 5}, {1, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tfm_tensor *x = gc_random(cases[c].ndim, cases[c].shape, 10 + c);
        tfm_tensor_set_requires_grad(x, 1);
        ck_assert_gradcheck(build_transpose, (void *)cases[c].axes, &x, 1);
        tfm_tensor_free(x);
    }
}
END_TEST

START_TEST(transpose_errors)
{
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){2, 3, 4});
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_transpose(tape, x, 0, 3));
    assert_error(TFM_ERR_ARG, "axis 3");
    ck_assert_ptr_null(tfm_transpose(tape, x, -4, 1));
    assert_error(TFM_ERR_ARG, "axis -4");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_transpose(tape, NULL, 0, 1));
    assert_error(TFM_ERR_NULL, "x is NULL");
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

/* --- split_heads, merge_heads ---------------------------------------------------- */

START_TEST(split_and_merge_heads_values)
{
    enum { B = 2, T = 3, H = 2, D = 4 };
    tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, H * D}, 4);
    const float *xv = tfm_tensor_data_f32(x);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *split = tfm_split_heads(tape, x, H);
    assert_shape(split, 4, (const int64_t[]){B, H, T, D});
    const float *sv = tfm_tensor_data_f32(split);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < D; d++)
                    ck_assert_float_eq(sv[((b * H + h) * T + t) * D + d],
                                       xv[(b * T + t) * H * D + h * D + d]);
    tfm_tensor *merged = tfm_merge_heads(tape, split);
    assert_shape(merged, 3, (const int64_t[]){B, T, H * D});
    ck_assert_mem_eq(tfm_tensor_data_f32(merged), xv, sizeof(float) * B * T * H * D);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

static tfm_tensor *build_split(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    return tfm_split_heads(tape, in[0], *(const int32_t *)ctx);
}

static tfm_tensor *build_merge(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    (void)ctx;
    return tfm_merge_heads(tape, in[0]);
}

START_TEST(split_and_merge_heads_gradients)
{
    const int32_t heads = 3;
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 4, 6}, 5);
    tfm_tensor_set_requires_grad(x, 1);
    ck_assert_gradcheck(build_split, (void *)&heads, &x, 1);
    tfm_tensor *y = gc_random(4, (const int64_t[]){2, 3, 4, 2}, 6);
    tfm_tensor_set_requires_grad(y, 1);
    ck_assert_gradcheck(build_merge, NULL, &y, 1);
    tfm_tensor_free(x);
    tfm_tensor_free(y);
}
END_TEST

START_TEST(split_and_merge_heads_errors)
{
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){2, 3, 8});
    tfm_tensor *flat = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){3, 8});
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_split_heads(tape, x, 3));
    assert_error(TFM_ERR_SHAPE, "[2,3,8]");
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "3 heads"));
    ck_assert_ptr_null(tfm_split_heads(tape, x, 0));
    assert_error(TFM_ERR_ARG, "heads 0");
    ck_assert_ptr_null(tfm_split_heads(tape, flat, 2));
    assert_error(TFM_ERR_SHAPE, "[3,8]");
    ck_assert_ptr_null(tfm_merge_heads(tape, x));
    assert_error(TFM_ERR_SHAPE, "[2,3,8]");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_merge_heads(tape, NULL));
    assert_error(TFM_ERR_NULL, "x is NULL");
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(flat);
}
END_TEST

/* --- concat ------------------------------------------------------------------- */

/* Three [2, s, 3] inputs with s = 1, 2, 3 joined on any axis. */
static tfm_tensor *concat_input(int32_t axis, int j, uint64_t seed)
{
    int64_t shape[3] = {2, 2, 3};
    shape[axis] = j + 1;
    return gc_random(3, shape, seed);
}

START_TEST(concat_values)
{
    for (int32_t axis = 0; axis < 3; axis++) {
        tfm_tensor *xs[3];
        for (int j = 0; j < 3; j++)
            xs[j] = concat_input(axis, j, 20 + (uint64_t)j);
        tfm_tape *tape = tfm_tape_create();
        tfm_tensor *y = tfm_concat(tape, (const tfm_tensor *const *)xs, 3, axis - 3);
        ck_assert_msg(y != NULL, "%s", tfm_last_error());
        int64_t ys[3] = {2, 2, 3};
        ys[axis] = 6;
        assert_shape(y, 3, ys);
        const float *yv = tfm_tensor_data_f32(y);
        int64_t i = 0, idx[3];
        for (idx[0] = 0; idx[0] < ys[0]; idx[0]++)
            for (idx[1] = 0; idx[1] < ys[1]; idx[1]++)
                for (idx[2] = 0; idx[2] < ys[2]; idx[2]++, i++) {
                    /* input j covers positions j(j+1)/2 .. of the axis */
                    int64_t at[3] = {idx[0], idx[1], idx[2]}, j = 0;
                    while (at[axis] >= j + 1) {
                        at[axis] -= j + 1;
                        j++;
                    }
                    int64_t xsh[3] = {2, 2, 3};
                    xsh[axis] = j + 1;
                    const float *xv = tfm_tensor_data_f32(xs[j]);
                    ck_assert_float_eq(yv[i], xv[(at[0] * xsh[1] + at[1]) * xsh[2] + at[2]]);
                }
        tfm_tape_free(tape);
        for (int j = 0; j < 3; j++)
            tfm_tensor_free(xs[j]);
    }
}
END_TEST

static tfm_tensor *build_concat(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    return tfm_concat(tape, (const tfm_tensor *const *)in, 3, *(const int32_t *)ctx);
}

/* Every input at once, then each alone (the others skipped in backward). */
START_TEST(concat_gradients)
{
    for (int32_t axis = 0; axis < 3; axis++)
        for (int only = -1; only < 3; only++) {
            tfm_tensor *xs[3];
            for (int j = 0; j < 3; j++) {
                xs[j] = concat_input(axis, j, 30 + (uint64_t)j);
                tfm_tensor_set_requires_grad(xs[j], only < 0 || only == j);
            }
            ck_assert_gradcheck(build_concat, &axis, xs, 3);
            for (int j = 0; j < 3; j++)
                tfm_tensor_free(xs[j]);
        }
}
END_TEST

START_TEST(concat_of_one)
{
    tfm_tensor *x = gc_random(2, (const int64_t[]){2, 3}, 8);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_concat(tape, (const tfm_tensor *const[]){x}, 1, 1);
    assert_shape(y, 2, (const int64_t[]){2, 3});
    ck_assert_mem_eq(tfm_tensor_data_f32(y), tfm_tensor_data_f32(x), 6 * sizeof(float));
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

START_TEST(concat_errors)
{
    tfm_tensor *a = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){2, 3});
    tfm_tensor *b = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){4, 3});
    tfm_tensor *c = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){2, 3, 1});
    tfm_tensor *ids = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){2, 3});
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_nonnull(tfm_concat(tape, (const tfm_tensor *const[]){a, b}, 2, 0));
    ck_assert_ptr_null(tfm_concat(tape, (const tfm_tensor *const[]){a, b}, 2, 1));
    assert_error(TFM_ERR_SHAPE, "xs[1] [4,3]");
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[2,3]"));
    ck_assert_ptr_null(tfm_concat(tape, (const tfm_tensor *const[]){a, c}, 2, 0));
    assert_error(TFM_ERR_SHAPE, "[2,3,1]");
    ck_assert_ptr_null(tfm_concat(tape, (const tfm_tensor *const[]){a, b}, 2, 2));
    assert_error(TFM_ERR_ARG, "axis 2");
    ck_assert_ptr_null(tfm_concat(tape, (const tfm_tensor *const[]){a}, 0, 0));
    assert_error(TFM_ERR_ARG, "count 0");
    ck_assert_ptr_null(tfm_concat(tape, (const tfm_tensor *const[]){a, ids}, 2, 0));
    assert_error(TFM_ERR_DTYPE, "xs[1]");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_concat(tape, (const tfm_tensor *const[]){a, NULL, b}, 3, 0));
    assert_error(TFM_ERR_NULL, "xs[1] is NULL");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_concat(tape, NULL, 2, 0));
    assert_error(TFM_ERR_NULL, "xs is NULL");
    ck_assert_ptr_null(tfm_concat(NULL, (const tfm_tensor *const[]){a, b}, 2, 0));
    assert_error(TFM_ERR_NULL, "tape");
    tfm_tape_free(tape);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
    tfm_tensor_free(c);
    tfm_tensor_free(ids);
}
END_TEST

/* --- accumulation ----------------------------------------------------------- */

enum { TWICE_RESHAPE, TWICE_TRANSPOSE, TWICE_SPLIT, TWICE_MERGE, TWICE_CONCAT };

/* Two uses of one input: each backward must add to its gradient, not set it. */
static tfm_tensor *build_twice(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    const tfm_tensor *x = in[0];
    switch (*(const int *)ctx) {
    case TWICE_RESHAPE:
        return tfm_add(tape, tfm_reshape(tape, x, 1, (const int64_t[]){-1}),
                       tfm_reshape(tape, x, 2, (const int64_t[]){1, -1}));
    case TWICE_TRANSPOSE:
        return tfm_add(tape, tfm_transpose(tape, x, 0, 2), tfm_transpose(tape, x, 2, 0));
    case TWICE_SPLIT:
        return tfm_add(tape, tfm_split_heads(tape, x, 2), tfm_split_heads(tape, x, 2));
    case TWICE_MERGE:
        return tfm_add(tape, tfm_merge_heads(tape, x), tfm_merge_heads(tape, x));
    default:
        return tfm_concat(tape, (const tfm_tensor *const[]){x, x}, 2, 1);
    }
}

START_TEST(gradients_accumulate)
{
    for (int kind = TWICE_RESHAPE; kind <= TWICE_CONCAT; kind++) {
        tfm_tensor *x = kind == TWICE_MERGE ? gc_random(4, (const int64_t[]){2, 2, 3, 2}, 40)
                                            : gc_random(3, (const int64_t[]){2, 3, 4}, 41);
        tfm_tensor_set_requires_grad(x, 1);
        ck_assert_gradcheck(build_twice, &kind, &x, 1);
        tfm_tensor_free(x);
    }
}
END_TEST

static Suite *shape_suite(void)
{
    Suite *s = suite_create("ops_shape");
    TCase *tc = tcase_create("shape");
    tcase_add_test(tc, reshape_is_a_view_with_inferred_axis);
    tcase_add_test(tc, reshape_gradient);
    tcase_add_test(tc, reshape_errors);
    tcase_add_test(tc, transpose_every_axis_pair);
    tcase_add_test(tc, transpose_2d_values);
    tcase_add_test(tc, transpose_gradients);
    tcase_add_test(tc, transpose_errors);
    tcase_add_test(tc, split_and_merge_heads_values);
    tcase_add_test(tc, split_and_merge_heads_gradients);
    tcase_add_test(tc, split_and_merge_heads_errors);
    tcase_add_test(tc, concat_values);
    tcase_add_test(tc, concat_gradients);
    tcase_add_test(tc, concat_of_one);
    tcase_add_test(tc, concat_errors);
    tcase_add_test(tc, gradients_accumulate);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(shape_suite)
