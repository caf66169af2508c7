/* The autograd tape: backward, accumulation, no-grad mode, reset. */
#include <check.h>
#include <string.h>

#include "check_main.h"
#include <tfm/tfm.h>

/* loss = sum((x * w + b)^2) with x, w, b given: checks every gradient path. */
START_TEST(backward_reaches_every_leaf)
{
    const float xs[3] = {1, 2, 3};
    tfm_tensor *x = tfm_tensor_from_f32(1, (const int64_t[]){3}, xs);
    tfm_tensor *w = tfm_tensor_full(1, (const int64_t[]){1}, 2.0f);
    tfm_tensor *b = tfm_tensor_full(1, (const int64_t[]){1}, -1.0f);
    tfm_tensor_set_requires_grad(w, 1);
    tfm_tensor_set_requires_grad(b, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_add(tape, tfm_mul(tape, x, w), b);
    tfm_tensor *loss = tfm_sum(tape, tfm_mul(tape, y, y));
    ck_assert_ptr_nonnull(loss);
    ck_assert_int_eq(tfm_tape_node_count(tape), 4);
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
    /* y = 1, 3, 5: dL/dw = sum 2 y x = 2 + 12 + 30, dL/db = sum 2 y = 18 */
    float gw, gb;
    ck_assert_int_eq(tfm_tensor_read_grad(w, &gw, 1), TFM_OK);
    ck_assert_int_eq(tfm_tensor_read_grad(b, &gb, 1), TFM_OK);
    ck_assert_float_eq_tol(gw, 44.0f, 1e-5f);
    ck_assert_float_eq_tol(gb, 18.0f, 1e-5f);
    /* x does not require grad and received none */
    float gx[3];
    ck_assert_int_eq(tfm_tensor_read_grad(x, gx, 3), TFM_ERR_STATE);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(w);
    tfm_tensor_free(b);
}
END_TEST

START_TEST(gradients_accumulate_until_zeroed)
{
    tfm_tensor *w = tfm_tensor_full(1, (const int64_t[]){2}, 3.0f);
    tfm_tensor_set_requires_grad(w, 1);
    tfm_tape *tape = tfm_tape_create();
    for (int step = 0; step < 2; step++) {
        ck_assert_int_eq(tfm_tape_backward(tape, tfm_sum(tape, tfm_scale(tape, w, 5.0f))),
                         TFM_OK);
        ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
    }
    float g[2];
    tfm_tensor_read_grad(w, g, 2);
    ck_assert_float_eq(g[0], 10.0f);
    tfm_tensor_zero_grad(w);
    tfm_tensor_read_grad(w, g, 2);
    ck_assert_float_eq(g[1], 0.0f);
    tfm_tape_free(tape);
    tfm_tensor_free(w);
}
END_TEST

START_TEST(a_tensor_used_twice_gets_both_terms)
{
    tfm_tensor *x = tfm_tensor_full(1, (const int64_t[]){1}, 3.0f);
    tfm_tensor_set_requires_grad(x, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *x2 = tfm_mul(tape, x, x);
    tfm_tensor *loss = tfm_add(tape, tfm_mul(tape, x2, x), x2); /* x^3 + x^2 */
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
    float g;
    tfm_tensor_read_grad(x, &g, 1);
    ck_assert_float_eq_tol(g, 27.0f + 6.0f, 1e-5f);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

START_TEST(no_grad_mode_records_nothing)
{
    tfm_tensor *w = tfm_tensor_ones(1, (const int64_t[]){4});
    tfm_tensor_set_requires_grad(w, 1);
    tfm_tape *tape = tfm_tape_create();
    ck_assert_int_eq(tfm_tape_set_recording(tape, 0), TFM_OK);
    ck_assert_int_eq(tfm_tape_is_recording(tape), 0);
    tfm_tensor *loss = tfm_sum(tape, tfm_scale(tape, w, 2.0f));
    float value;
    ck_assert_int_eq(tfm_tensor_item(loss, &value), TFM_OK);
    ck_assert_float_eq(value, 8.0f);
    ck_assert_int_eq(tfm_tape_node_count(tape), 0);
    ck_assert_int_eq(tfm_tensor_requires_grad(loss), 0);
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "requires grad"));
    tfm_tape_free(tape);
    tfm_tensor_free(w);
}
END_TEST

START_TEST(backward_once_per_step)
{
    tfm_tensor *w = tfm_tensor_ones(1, (const int64_t[]){1});
    tfm_tensor_set_requires_grad(w, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *loss = tfm_scale(tape, w, 2.0f);
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "reset"));
    tfm_tape_free(tape);
    tfm_tensor_free(w);
}
END_TEST

START_TEST(backward_needs_a_scalar_or_a_seed)
{
    tfm_tensor *w = tfm_tensor_ones(1, (const int64_t[]){3});
    tfm_tensor_set_requires_grad(w, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_scale(tape, w, 2.0f);
    ck_assert_int_eq(tfm_tape_backward(tape, y), TFM_ERR_SHAPE);
    const float seed[3] = {1, 10, 100};
    ck_assert_int_eq(tfm_tape_backward_with_grad(tape, y, seed, 2), TFM_ERR_SHAPE);
    ck_assert_int_eq(tfm_tape_backward_with_grad(tape, y, seed, 3), TFM_OK);
    float g[3];
    tfm_tensor_read_grad(w, g, 3);
    ck_assert_float_eq(g[0], 2.0f);
    ck_assert_float_eq(g[2], 200.0f);
    tfm_tape_free(tape);
    tfm_tensor_free(w);
}
END_TEST

START_TEST(reset_keeps_the_memory)
{
    tfm_tensor *w = tfm_tensor_ones(2, (const int64_t[]){64, 64});
    tfm_tensor_set_requires_grad(w, 1);
    tfm_tape *tape = tfm_tape_create();
    int64_t bytes_after_first = 0;
    for (int step = 0; step < 5; step++) {
        tfm_tensor *y = w;
        for (int k = 0; k < 300; k++) /* 300 * 16 KiB: more than one chunk */
            y = tfm_scale(tape, y, 1.0f);
        ck_assert_int_eq(tfm_tape_backward(tape, tfm_sum(tape, y)), TFM_OK);
        tfm_tape_reset(tape);
        if (step == 0)
            bytes_after_first = tfm_tape_arena_bytes(tape);
        else
            ck_assert_int_eq(tfm_tape_arena_bytes(tape), bytes_after_first);
        ck_assert_int_eq(tfm_tape_node_count(tape), 0);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(w);
}
END_TEST

/* y = 3x + 2 by plain gradient descent through the tape. */
START_TEST(fits_a_line)
{
    float xs[32], ys[32];
    for (int i = 0; i < 32; i++) {
        xs[i] = -1.0f + 2.0f * (float)i / 31.0f;
        ys[i] = 3.0f * xs[i] + 2.0f;
    }
    tfm_tensor *x = tfm_tensor_from_f32(1, (const int64_t[]){32}, xs);
    tfm_tensor *y = tfm_tensor_from_f32(1, (const int64_t[]){32}, ys);
    tfm_tensor *w = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){1});
    tfm_tensor *b = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){1});
    tfm_tensor_set_requires_grad(w, 1);
    tfm_tensor_set_requires_grad(b, 1);
    tfm_tape *tape = tfm_tape_create();
    float loss_value = 0;
    for (int step = 0; step < 300; step++) {
        tfm_tensor *err = tfm_sub(tape, tfm_add(tape, tfm_mul(tape, x, w), b), y);
        tfm_tensor *loss = tfm_mean(tape, tfm_mul(tape, err, err));
        ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
        tfm_tensor_item(loss, &loss_value);
        tfm_tensor_data_f32(w)[0] -= 0.1f * tfm_tensor_grad_f32(w)[0];
        tfm_tensor_data_f32(b)[0] -= 0.1f * tfm_tensor_grad_f32(b)[0];
        tfm_tensor_zero_grad(w);
        tfm_tensor_zero_grad(b);
        tfm_tape_reset(tape);
    }
    ck_assert_float_eq_tol(tfm_tensor_data_f32(w)[0], 3.0f, 1e-3f);
    ck_assert_float_eq_tol(tfm_tensor_data_f32(b)[0], 2.0f, 1e-3f);
    ck_assert_float_lt(loss_value, 1e-6f);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(y);
    tfm_tensor_free(w);
    tfm_tensor_free(b);
}
END_TEST

static Suite *tape_suite(void)
{
    Suite *s = suite_create("tape");
    TCase *tc = tcase_create("tape");
    tcase_add_test(tc, backward_reaches_every_leaf);
    tcase_add_test(tc, gradients_accumulate_until_zeroed);
    tcase_add_test(tc, a_tensor_used_twice_gets_both_terms);
    tcase_add_test(tc, no_grad_mode_records_nothing);
    tcase_add_test(tc, backward_once_per_step);
    tcase_add_test(tc, backward_needs_a_scalar_or_a_seed);
    tcase_add_test(tc, reset_keeps_the_memory);
    tcase_add_test(tc, fits_a_line);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(tape_suite)
