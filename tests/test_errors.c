/* Bad input across the API: a clear status and message, no crash, no leak
 * (the sanitizer and valgrind runs of this suite check the last part). */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "check_main.h"
#include <tfm/tfm.h>

#define ck_assert_error(status, fragment)                                      \
    do {                                                                       \
        ck_assert_int_eq(tfm_last_status(), (status));                         \
        ck_assert_msg(strstr(tfm_last_error(), (fragment)) != NULL,            \
                      "message \"%s\" lacks \"%s\"", tfm_last_error(),         \
                      (fragment));                                             \
    } while (0)

START_TEST(null_handles)
{
    tfm_clear_error();
    ck_assert_str_eq(tfm_last_error(), "");
    ck_assert_int_eq(tfm_tape_backward(NULL, NULL), TFM_ERR_NULL);
    ck_assert_error(TFM_ERR_NULL, "tape is NULL");
    ck_assert_int_eq(tfm_tape_reset(NULL), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tape_set_recording(NULL, 1), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tensor_numel(NULL), -1);
    ck_assert_int_eq(tfm_tensor_ndim(NULL), 0);
    ck_assert_int_eq(tfm_tensor_dim(NULL, 0), -1);
    ck_assert_int_eq(tfm_tensor_shape(NULL, NULL), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tensor_read_f32(NULL, NULL, 0), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tensor_set_requires_grad(NULL, 1), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tensor_zero_grad(NULL), TFM_ERR_NULL);
    ck_assert_ptr_null(tfm_tensor_grad_f32(NULL));
    ck_assert_ptr_null(tfm_tensor_from_f32(1, (const int64_t[]){2}, NULL));
    ck_assert_error(TFM_ERR_NULL, "values is NULL");
    ck_assert_ptr_null(tfm_tensor_normal(1, (const int64_t[]){2}, 0, 1, NULL));
    ck_assert_error(TFM_ERR_NULL, "rng is NULL");
    tfm_tensor_free(NULL);
    tfm_tape_free(NULL);
    tfm_rng_free(NULL);
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_matmul(NULL, NULL, NULL, 0, 0));
    tfm_clear_error();
    tfm_tensor *x = tfm_tensor_ones(1, (const int64_t[]){2});
    ck_assert_ptr_null(tfm_relu(NULL, x));
    ck_assert_error(TFM_ERR_NULL, "tape is NULL");
    tfm_tensor_free(x);
    tfm_tape_free(tape);
}
END_TEST

START_TEST(absurd_and_invalid_shapes)
{
    ck_assert_ptr_null(tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){INT64_MAX, 4}));
    ck_assert_error(TFM_ERR_SIZE, "absurdly large");
    ck_assert_ptr_null(tfm_tensor_zeros(TFM_F32, 4,
                                        (const int64_t[]){1 << 20, 1 << 20, 1 << 20, 1 << 20}));
    ck_assert_error(TFM_ERR_SIZE, "absurdly large");
    ck_assert_ptr_null(tfm_tensor_zeros(TFM_F32, 5, (const int64_t[]){1, 1, 1, 1, 1}));
    ck_assert_error(TFM_ERR_ARG, "ndim 5");
    ck_assert_ptr_null(tfm_tensor_zeros(TFM_F32, 0, (const int64_t[]){1}));
    ck_assert_error(TFM_ERR_ARG, "ndim 0");
    ck_assert_ptr_null(tfm_tensor_ones(2, (const int64_t[]){3, -2}));
    ck_assert_error(TFM_ERR_SHAPE, "not positive");
    ck_assert_ptr_null(tfm_tensor_zeros(7, 1, (const int64_t[]){3}));
    ck_assert_error(TFM_ERR_DTYPE, "unknown dtype");
    tfm_rng *rng = tfm_rng_create(1);
    ck_assert_ptr_null(tfm_tensor_uniform(1, (const int64_t[]){3}, 2.0f, 1.0f, rng));
    ck_assert_error(TFM_ERR_ARG, "bounds [2, 1] must be finite and ordered");
    tfm_rng_free(rng);
    tfm_tensor *t = tfm_tensor_ones(2, (const int64_t[]){2, 3});
    ck_assert_int_eq(tfm_tensor_dim(t, 2), -1);
    ck_assert_error(TFM_ERR_ARG, "axis 2");
    ck_assert_int_eq(tfm_tensor_dim(t, -3), -1);
    tfm_tensor_free(t);
}
END_TEST

START_TEST(shape_mismatch)
{
    tfm_tensor *a = tfm_tensor_ones(2, (const int64_t[]){2, 3});
    tfm_tensor *b = tfm_tensor_ones(2, (const int64_t[]){4, 5});
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_matmul(tape, a, b, 0, 0));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[2,3]"));
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[4,5]"));
    ck_assert_ptr_null(tfm_add(tape, a, b));
    ck_assert_error(TFM_ERR_SHAPE, "do not broadcast");
    tfm_tape_free(tape);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
}
END_TEST

START_TEST(token_id_out_of_range)
{
    tfm_tensor *table = tfm_tensor_ones(2, (const int64_t[]){5, 4});
    const int32_t ids[3] = {1, 5, 2};
    tfm_tensor *tokens = tfm_tensor_from_i32(1, (const int64_t[]){3}, ids);
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_embedding(tape, table, tokens));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "5"));
    const int32_t targets[1] = {-3};
    tfm_tensor *target = tfm_tensor_from_i32(1, (const int64_t[]){1}, targets);
    tfm_tensor *logits = tfm_tensor_ones(2, (const int64_t[]){1, 4});
    ck_assert_ptr_null(tfm_cross_entropy(tape, logits, target, -100, 0.0f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_RANGE);
    tfm_tape_free(tape);
    tfm_tensor_free(table);
    tfm_tensor_free(tokens);
    tfm_tensor_free(target);
    tfm_tensor_free(logits);
}
END_TEST

START_TEST(wrong_dtype)
{
    tfm_tensor *ids = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){2, 2});
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_relu(tape, ids));
    ck_assert_error(TFM_ERR_DTYPE, "float32");
    ck_assert_ptr_null(tfm_embedding(tape, ids, ids));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    tfm_tape_free(tape);
    tfm_tensor_free(ids);
}
END_TEST

/* A chain with a failure in the middle: every later op returns NULL and the
 * message still names the first cause. */
START_TEST(a_failed_chain_keeps_the_first_cause)
{
    tfm_tensor *a = tfm_tensor_ones(2, (const int64_t[]){2, 3});
    tfm_tensor *w = tfm_tensor_ones(2, (const int64_t[]){4, 3});
    tfm_tape *tape = tfm_tape_create();
    tfm_clear_error();
    tfm_tensor *h = tfm_matmul(tape, a, w, 0, 0); /* should have been transpose_b */
    tfm_tensor *y = tfm_relu(tape, h);
    tfm_tensor *loss = tfm_mean(tape, tfm_tanh(tape, y));
    ck_assert_ptr_null(loss);
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_matmul"));
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_ERR_NULL);
    /* without a pending error, a NULL input is itself the error */
    tfm_clear_error();
    ck_assert_ptr_null(tfm_relu(tape, NULL));
    ck_assert_error(TFM_ERR_NULL, "tfm_relu");
    tfm_tape_free(tape);
    tfm_tensor_free(a);
    tfm_tensor_free(w);
}
END_TEST

static Suite *errors_suite(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, null_handles);
    tcase_add_test(tc, absurd_and_invalid_shapes);
    tcase_add_test(tc, shape_mismatch);
    tcase_add_test(tc, token_id_out_of_range);
    tcase_add_test(tc, wrong_dtype);
    tcase_add_test(tc, a_failed_chain_keeps_the_first_cause);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(errors_suite)
