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

/* --- tensors kept past their tape's reset ------------------------------------------ */

/* The last call refused a stale tensor with a message naming it. */
static void assert_stale(const char *call)
{
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_STATE);
    ck_assert_msg(strstr(tfm_last_error(), call) && strstr(tfm_last_error(), "tfm_tape_reset"),
                  "'%s' does not name %s and the reset", tfm_last_error(), call);
    tfm_clear_error();
}

/* The scenario: a mask made once before the training loop on the
 * training tape and used at every step after tfm_tape_reset, once the tape
 * has allocated again: new headers, then new values, where the mask's
 * header was (a silent misread, then a crash in the softmax kernel, before
 * the headers had a pool of their own). */
START_TEST(a_mask_made_before_the_loop_is_refused_after_reset)
{
    tfm_tensor *w = tfm_tensor_full(2, (const int64_t[]){8, 8}, 0.5f);
    tfm_tensor *big = tfm_tensor_full(2, (const int64_t[]){64, 64}, 0.5f);
    tfm_tensor_set_requires_grad(w, 1);
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_nonnull(tfm_scale(tape, w, 1.0f)); /* the mask is not the tape's first */
    tfm_tensor *mask = tfm_mask_causal(tape, 8, TFM_I32);
    ck_assert_ptr_nonnull(tfm_softmax(tape, w, mask));
    for (int step = 0; step < 4; step++) {
        ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
        /* even steps: a new header where the mask's was; odd: new values */
        if (step % 2)
            ck_assert_ptr_nonnull(tfm_scale(tape, big, 3.0f));
        tfm_tensor *h = tfm_scale(tape, tfm_mul(tape, w, w), 3.0f);
        ck_assert_ptr_null(tfm_softmax(tape, h, mask));
        assert_stale("tfm_softmax");
        ck_assert_int_eq(tfm_tensor_read_i32(mask, (int32_t[64]){0}, 64), TFM_ERR_STATE);
        assert_stale("tfm_tensor_read_i32");
        ck_assert_int_eq(tfm_tensor_numel(mask), -1);
        assert_stale("tfm_tensor_numel");
        /* the same mask made after the reset works */
        ck_assert_ptr_nonnull(tfm_softmax(tape, h, tfm_mask_causal(tape, 8, TFM_I32)));
    }
    tfm_tensor_free(mask); /* a no-op on a tape's tensor, stale or not */
    tfm_tape_free(tape);
    tfm_tensor_free(w);
    tfm_tensor_free(big);
}
END_TEST

/* Backward from a loss of the previous step ran the new step's records (or
 * none) and said TFM_OK. */
START_TEST(a_loss_from_before_the_reset_is_refused)
{
    tfm_tensor *w = tfm_tensor_ones(1, (const int64_t[]){1});
    tfm_tensor_set_requires_grad(w, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *old_loss = tfm_sum(tape, tfm_scale(tape, w, 2.0f));
    ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
    tfm_tensor *loss = tfm_sum(tape, tfm_scale(tape, w, 5.0f));
    ck_assert_int_eq(tfm_tape_backward(tape, old_loss), TFM_ERR_STATE);
    assert_stale("tfm_tape_backward");
    ck_assert_int_eq(tfm_tape_backward_with_grad(tape, old_loss, (const float[]){1}, 1),
                     TFM_ERR_STATE);
    assert_stale("tfm_tape_backward_with_grad");
    float g;
    ck_assert_int_eq(tfm_tensor_read_grad(w, &g, 1), TFM_OK);
    ck_assert_float_eq(g, 0.0f); /* nothing ran */
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
    tfm_tensor_read_grad(w, &g, 1);
    ck_assert_float_eq(g, 5.0f);
    tfm_tape_free(tape);
    tfm_tensor_free(w);
}
END_TEST

/* The documented guarantee: refused within 16 resets, whatever the steps in
 * between made (few tensors, or many more than the step that made it). */
START_TEST(stale_tensors_are_refused_for_16_resets)
{
    tfm_tensor *x = tfm_tensor_ones(1, (const int64_t[]){4});
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *stale[3];
    for (int i = 0; i < 3; i++)
        stale[i] = tfm_scale(tape, x, (float)i);
    static const int made[4] = {1, 3, 700, 40};
    for (int reset = 1; reset <= 16; reset++) {
        ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
        for (int k = 0; k < made[reset % 4]; k++)
            ck_assert_ptr_nonnull(tfm_scale(tape, x, 1.0f));
        for (int i = 0; i < 3; i++) {
            ck_assert_ptr_null(tfm_add(tape, stale[i], x));
            assert_stale("tfm_add");
            ck_assert_ptr_null(tfm_tensor_data_f32(stale[i]));
            assert_stale("tfm_tensor_data_f32");
            int64_t shape[TFM_MAX_DIMS];
            ck_assert_int_eq(tfm_tensor_shape(stale[i], shape), TFM_ERR_STATE);
            assert_stale("tfm_tensor_shape");
        }
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

/* A tensor of another tape is a constant: fine unless its gradient would
 * have to cross tapes. */
START_TEST(tensors_of_another_tape)
{
    tfm_tensor *x = tfm_tensor_ones(1, (const int64_t[]){3});
    tfm_tensor *w = tfm_tensor_full(1, (const int64_t[]){3}, 2.0f);
    tfm_tensor_set_requires_grad(w, 1);
    tfm_tape *a = tfm_tape_create(), *b = tfm_tape_create();
    tfm_tensor *constant = tfm_scale(a, x, 3.0f);
    tfm_tensor *loss = tfm_sum(b, tfm_mul(b, constant, w));
    ck_assert_msg(loss != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tape_backward(b, loss), TFM_OK);
    float g[3];
    tfm_tensor_read_grad(w, g, 3);
    ck_assert_float_eq(g[2], 3.0f);

    tfm_tensor *recorded = tfm_scale(a, w, 3.0f); /* its gradient flows back on tape a */
    tfm_clear_error();
    ck_assert_ptr_null(tfm_mul(b, recorded, x));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_mul: an input that requires grad "
                                                   "belongs to another tape"));
    tfm_tape_set_recording(b, 0); /* no gradient wanted: a constant again */
    ck_assert_ptr_nonnull(tfm_mul(b, recorded, x));
    tfm_tape_set_recording(b, 1);

    ck_assert_int_eq(tfm_tape_reset(b), TFM_OK);
    ck_assert_int_eq(tfm_tape_backward(b, tfm_sum(a, recorded)), TFM_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_tape_backward: the loss belongs to "
                                                   "another tape"));
    ck_assert_int_eq(tfm_tape_backward_with_grad(b, w, (const float[]){1, 1, 1}, 3),
                     TFM_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "is not an op's result"));
    /* tape a's reset ends its tensors for tape b too */
    ck_assert_int_eq(tfm_tape_reset(a), TFM_OK);
    ck_assert_ptr_null(tfm_mul(b, constant, x));
    assert_stale("tfm_mul");
    tfm_tape_free(a);
    tfm_tape_free(b);
    tfm_tensor_free(x);
    tfm_tensor_free(w);
}
END_TEST

START_TEST(clone_keeps_a_result_past_the_reset)
{
    const float xs[3] = {1, -2, 4};
    tfm_tensor *x = tfm_tensor_from_f32(1, (const int64_t[]){3}, xs);
    tfm_tensor_set_requires_grad(x, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_scale(tape, x, 2.0f);
    tfm_tensor *kept = tfm_tensor_clone(y);
    tfm_tensor *ids = tfm_tensor_clone(tfm_mask_causal(tape, 2, TFM_I32));
    ck_assert_msg(kept && ids, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tensor_requires_grad(y), 1);
    ck_assert_int_eq(tfm_tensor_requires_grad(kept), 0);
    ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
    for (int k = 0; k < 10; k++) /* new values where y's were */
        tfm_scale(tape, x, 100.0f);
    float v[3];
    ck_assert_int_eq(tfm_tensor_read_f32(kept, v, 3), TFM_OK);
    for (int i = 0; i < 3; i++)
        ck_assert_float_eq(v[i], 2.0f * xs[i]);
    ck_assert_int_eq(tfm_tensor_read_grad(kept, v, 3), TFM_ERR_STATE);
    int32_t m[4];
    ck_assert_int_eq(tfm_tensor_read_i32(ids, m, 4), TFM_OK);
    ck_assert(m[0] == 1 && m[1] == 0 && m[2] == 1 && m[3] == 1);
    /* a clone is the caller's leaf: it may require grad and be used anywhere */
    ck_assert_int_eq(tfm_tensor_set_requires_grad(kept, 1), TFM_OK);
    ck_assert_ptr_nonnull(tfm_mul(tape, kept, x));
    tfm_clear_error();
    ck_assert_ptr_null(tfm_tensor_clone(y));
    assert_stale("tfm_tensor_clone");
    ck_assert_ptr_null(tfm_tensor_clone(NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    tfm_tensor_free(kept);
    tfm_tensor_free(ids);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
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
    tcase_add_test(tc, a_mask_made_before_the_loop_is_refused_after_reset);
    tcase_add_test(tc, a_loss_from_before_the_reset_is_refused);
    tcase_add_test(tc, stale_tensors_are_refused_for_16_resets);
    tcase_add_test(tc, tensors_of_another_tape);
    tcase_add_test(tc, clone_keeps_a_result_past_the_reset);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(tape_suite)
