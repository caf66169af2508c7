/* The parameter store: names, lookup, contiguous value and gradient blocks,
 * gradient zeroing and clipping, and how its tensors behave with the tape. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include <tfm/tfm.h>

#define ck_assert_error(status, text)                                          \
    do {                                                                       \
        ck_assert_int_eq(tfm_last_status(), (status));                         \
        ck_assert_msg(strstr(tfm_last_error(), (text)) != NULL,                \
                      "\"%s\" not in \"%s\"", (text), tfm_last_error());       \
        tfm_clear_error();                                                     \
    } while (0)

/* Every tensor's data and grad are its slice of the blocks, in order. */
static void check_blocks(tfm_params *params)
{
    float *values = tfm_params_values(params), *grads = tfm_params_grads(params);
    int64_t offset = 0;
    for (int64_t i = 0; i < tfm_params_count(params); i++) {
        tfm_tensor *t = tfm_params_at(params, i);
        ck_assert_ptr_eq(tfm_tensor_data_f32(t), values + offset);
        ck_assert_ptr_eq(tfm_tensor_grad_f32(t), grads + offset);
        offset += tfm_tensor_numel(t);
    }
    ck_assert_int_eq(offset, tfm_params_numel(params));
}

START_TEST(add_and_look_up)
{
    tfm_params *params = tfm_params_create();
    ck_assert_ptr_nonnull(params);
    ck_assert_int_eq(tfm_params_count(params), 0);
    ck_assert_int_eq(tfm_params_numel(params), 0);
    tfm_tensor *a = tfm_params_add(params, "encoder.weight", 2, (const int64_t[]){2, 3});
    tfm_tensor *b = tfm_params_add(params, "encoder.bias", 1, (const int64_t[]){4});
    tfm_tensor *c = tfm_params_add(params, "c", 4, (const int64_t[]){1, 2, 2, 1});
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(tfm_params_count(params), 3);
    ck_assert_int_eq(tfm_params_numel(params), 6 + 4 + 4);
    ck_assert_ptr_eq(tfm_params_at(params, 0), a);
    ck_assert_ptr_eq(tfm_params_at(params, 1), b);
    ck_assert_ptr_eq(tfm_params_at(params, 2), c);
    ck_assert_str_eq(tfm_params_name(params, 0), "encoder.weight");
    ck_assert_str_eq(tfm_params_name(params, 1), "encoder.bias");
    ck_assert_str_eq(tfm_params_name(params, 2), "c");
    ck_assert_ptr_eq(tfm_params_find(params, "encoder.bias"), b);
    ck_assert_ptr_eq(tfm_params_find(params, "c"), c);
    int64_t shape[4];
    ck_assert_int_eq(tfm_tensor_ndim(c), 4);
    tfm_tensor_shape(c, shape);
    ck_assert(shape[0] == 1 && shape[1] == 2 && shape[2] == 2 && shape[3] == 1);
    /* zero-filled float32 leaves with zeroed gradients */
    for (int64_t i = 0; i < 3; i++) {
        tfm_tensor *t = tfm_params_at(params, i);
        ck_assert_int_eq(tfm_tensor_dtype(t), TFM_F32);
        ck_assert_int_eq(tfm_tensor_requires_grad(t), 1);
    }
    for (int64_t i = 0; i < tfm_params_numel(params); i++) {
        ck_assert_float_eq(tfm_params_values(params)[i], 0.0f);
        ck_assert_float_eq(tfm_params_grads(params)[i], 0.0f);
    }
    check_blocks(params);

    tfm_clear_error();
    ck_assert_ptr_null(tfm_params_find(params, "encoder"));
    ck_assert_error(TFM_ERR_ARG, "encoder");
    ck_assert_ptr_null(tfm_params_at(params, 3));
    ck_assert_error(TFM_ERR_RANGE, "index 3 is outside [0, 3)");
    ck_assert_ptr_null(tfm_params_at(params, -1));
    ck_assert_error(TFM_ERR_RANGE, "tfm_params_at: index -1");
    ck_assert_ptr_null(tfm_params_name(params, 3));
    ck_assert_error(TFM_ERR_RANGE, "tfm_params_name: index 3");
    tfm_params_free(params);
}
END_TEST

START_TEST(bad_names_and_shapes)
{
    tfm_params *params = tfm_params_create();
    ck_assert_ptr_nonnull(tfm_params_add(params, "w", 1, (const int64_t[]){3}));
    tfm_clear_error();
    ck_assert_ptr_null(tfm_params_add(params, "w", 1, (const int64_t[]){3}));
    ck_assert_error(TFM_ERR_ARG, "a parameter named \"w\" exists already");
    ck_assert_ptr_null(tfm_params_add(params, "w", 2, (const int64_t[]){5, 5}));
    ck_assert_error(TFM_ERR_ARG, "exists already");
    ck_assert_ptr_null(tfm_params_add(params, "", 1, (const int64_t[]){3}));
    ck_assert_error(TFM_ERR_ARG, "1 to 255 bytes");
    char name[257];
    memset(name, 'x', 256);
    name[256] = '\0';
    ck_assert_ptr_null(tfm_params_add(params, name, 1, (const int64_t[]){3}));
    ck_assert_error(TFM_ERR_ARG, "1 to 255 bytes");
    name[255] = '\0';
    tfm_tensor *longest = tfm_params_add(params, name, 1, (const int64_t[]){3});
    ck_assert_ptr_nonnull(longest);
    ck_assert_str_eq(tfm_params_name(params, 1), name);
    ck_assert_ptr_null(tfm_params_add(params, NULL, 1, (const int64_t[]){3}));
    ck_assert_error(TFM_ERR_NULL, "tfm_params_add: name is NULL");
    ck_assert_ptr_null(tfm_params_add(params, "s", 1, NULL));
    ck_assert_error(TFM_ERR_NULL, "shape is NULL");
    ck_assert_ptr_null(tfm_params_add(params, "s", 0, (const int64_t[]){3}));
    ck_assert_error(TFM_ERR_ARG, "ndim 0");
    ck_assert_ptr_null(tfm_params_add(params, "s", 5, (const int64_t[]){1, 1, 1, 1, 1}));
    ck_assert_error(TFM_ERR_ARG, "ndim 5");
    ck_assert_ptr_null(tfm_params_add(params, "s", 2, (const int64_t[]){3, 0}));
    ck_assert_error(TFM_ERR_SHAPE, "not positive");
    ck_assert_ptr_null(tfm_params_add(params, "s", 2, (const int64_t[]){1 << 30, 1 << 30}));
    ck_assert_error(TFM_ERR_SIZE, "absurdly large");
    /* nothing was added by the failures */
    ck_assert_int_eq(tfm_params_count(params), 2);
    ck_assert_int_eq(tfm_params_numel(params), 6);
    check_blocks(params);

    ck_assert_ptr_null(tfm_params_add(NULL, "s", 1, (const int64_t[]){3}));
    ck_assert_error(TFM_ERR_NULL, "tfm_params_add: params is NULL");
    ck_assert_int_eq(tfm_params_count(NULL), -1);
    ck_assert_error(TFM_ERR_NULL, "tfm_params_count");
    ck_assert_int_eq(tfm_params_numel(NULL), -1);
    ck_assert_error(TFM_ERR_NULL, "tfm_params_numel");
    ck_assert_ptr_null(tfm_params_at(NULL, 0));
    ck_assert_error(TFM_ERR_NULL, "tfm_params_at: params is NULL");
    ck_assert_ptr_null(tfm_params_name(NULL, 0));
    ck_assert_error(TFM_ERR_NULL, "tfm_params_name: params is NULL");
    ck_assert_ptr_null(tfm_params_find(NULL, "w"));
    ck_assert_error(TFM_ERR_NULL, "tfm_params_find: params is NULL");
    ck_assert_ptr_null(tfm_params_find(params, NULL));
    ck_assert_error(TFM_ERR_NULL, "tfm_params_find: name is NULL");
    ck_assert_ptr_null(tfm_params_values(NULL));
    ck_assert_error(TFM_ERR_NULL, "tfm_params_values");
    ck_assert_ptr_null(tfm_params_grads(NULL));
    ck_assert_error(TFM_ERR_NULL, "tfm_params_grads");
    ck_assert_int_eq(tfm_params_zero_grad(NULL), TFM_ERR_NULL);
    ck_assert_error(TFM_ERR_NULL, "tfm_params_zero_grad");
    ck_assert_int_eq(tfm_params_clip_grad_norm(NULL, 1.0f, NULL), TFM_ERR_NULL);
    ck_assert_error(TFM_ERR_NULL, "tfm_params_clip_grad_norm");
    tfm_params_free(NULL);
    tfm_params_free(params);
}
END_TEST

/* Many adds grow (and move) the blocks: the tensors follow, and the values and
 * gradients written before a move survive it. */
START_TEST(blocks_stay_contiguous)
{
    enum { N = 300 };
    tfm_params *params = tfm_params_create();
    tfm_tensor *tensors[N];
    const float *first_values = NULL;
    int moved = 0;
    for (int i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "layers.%d.weight", i);
        int64_t rows = 1 + i % 7, cols = 1 + (i * 13) % 29;
        if (i == N / 2)
            cols = 5000; /* one add larger than the doubling */
        tensors[i] = tfm_params_add(params, name, 2, (const int64_t[]){rows, cols});
        ck_assert_ptr_nonnull(tensors[i]);
        float *v = tfm_tensor_data_f32(tensors[i]), *g = tfm_tensor_grad_f32(tensors[i]);
        for (int64_t j = 0; j < rows * cols; j++) {
            v[j] = (float)i + (float)j * 1e-3f;
            g[j] = -(float)i;
        }
        if (!first_values)
            first_values = tfm_params_values(params);
        moved |= tfm_params_values(params) != first_values;
        check_blocks(params);
    }
    ck_assert_msg(moved, "the blocks never grew past their first allocation");
    ck_assert_int_eq(tfm_params_count(params), N);
    for (int i = 0; i < N; i++) {
        ck_assert_ptr_eq(tfm_params_at(params, i), tensors[i]);
        const float *v = tfm_tensor_data_f32(tensors[i]), *g = tfm_tensor_grad_f32(tensors[i]);
        for (int64_t j = 0; j < tfm_tensor_numel(tensors[i]); j++) {
            ck_assert_float_eq(v[j], (float)i + (float)j * 1e-3f);
            ck_assert_float_eq(g[j], -(float)i);
        }
        char name[32];
        snprintf(name, sizeof name, "layers.%d.weight", i);
        ck_assert_ptr_eq(tfm_params_find(params, name), tensors[i]);
    }
    tfm_params_free(params);
}
END_TEST

static void fill_grads(tfm_params *params, const float *values)
{
    memcpy(tfm_params_grads(params), values, (size_t)tfm_params_numel(params) * sizeof(float));
}

START_TEST(zero_grad)
{
    tfm_params *params = tfm_params_create();
    ck_assert_int_eq(tfm_params_zero_grad(params), TFM_OK); /* empty */
    tfm_params_add(params, "a", 1, (const int64_t[]){3});
    tfm_params_add(params, "b", 2, (const int64_t[]){2, 2});
    const float g[7] = {1, -2, 3, 4, 5, -6, 7};
    fill_grads(params, g);
    ck_assert_int_eq(tfm_params_zero_grad(params), TFM_OK);
    for (int i = 0; i < 7; i++)
        ck_assert_float_eq(tfm_params_grads(params)[i], 0.0f);
    /* values untouched */
    tfm_tensor_data_f32(tfm_params_at(params, 1))[0] = 9.0f;
    ck_assert_int_eq(tfm_params_zero_grad(params), TFM_OK);
    ck_assert_float_eq(tfm_params_values(params)[3], 9.0f);
    tfm_params_free(params);
}
END_TEST

static double reference_norm(const float *g, int n)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)g[i] * g[i];
    return sqrt(sum);
}

START_TEST(clip_grad_norm)
{
    enum { N = 9 };
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "a", 2, (const int64_t[]){2, 3});
    tfm_params_add(params, "b", 1, (const int64_t[]){3});
    const float g[N] = {0.5f, -1.25f, 3.0f, 0.0f, 2.0f, -0.75f, 1.5f, -4.0f, 0.125f};
    const double norm = reference_norm(g, N); /* about 5.83 */
    const float *grads = tfm_params_grads(params);
    float got;

    /* below max_norm: reported, unchanged */
    fill_grads(params, g);
    ck_assert_int_eq(tfm_params_clip_grad_norm(params, 10.0f, &got), TFM_OK);
    ck_assert_double_eq_tol(got, norm, 1e-6 * norm);
    ck_assert_mem_eq(grads, g, sizeof g);

    /* above: scaled by max_norm / (norm + 1e-6), as torch */
    fill_grads(params, g);
    ck_assert_int_eq(tfm_params_clip_grad_norm(params, 2.0f, &got), TFM_OK);
    ck_assert_double_eq_tol(got, norm, 1e-6 * norm);
    double factor = 2.0 / (norm + 1e-6);
    for (int i = 0; i < N; i++)
        ck_assert_double_eq_tol(grads[i], g[i] * factor, 1e-6);
    ck_assert_double_eq_tol(reference_norm(grads, N), 2.0, 1e-5);

    /* the norm output is optional */
    fill_grads(params, g);
    ck_assert_int_eq(tfm_params_clip_grad_norm(params, 1.0f, NULL), TFM_OK);
    ck_assert_double_eq_tol(reference_norm(grads, N), 1.0, 1e-5);

    /* a tiny max_norm: factor 1e-3 / (norm + 1e-6) */
    fill_grads(params, g);
    ck_assert_int_eq(tfm_params_clip_grad_norm(params, 1e-3f, &got), TFM_OK);
    for (int i = 0; i < N; i++)
        ck_assert_double_eq_tol(grads[i], g[i] * (1e-3 / (norm + 1e-6)), 1e-9);

    /* a norm near torch's 1e-6 shows it: 1e-6 / (2e-6 + 1e-6) = 1/3, not 1/2 */
    const float tiny[N] = {1.2e-6f, -1.6e-6f, 0, 0, 0, 0, 0, 0, 0};
    fill_grads(params, tiny);
    ck_assert_int_eq(tfm_params_clip_grad_norm(params, 1e-6f, &got), TFM_OK);
    ck_assert_double_eq_tol(got, 2e-6, 1e-12);
    ck_assert_double_eq_tol(grads[0], 0.4e-6, 1e-12);
    ck_assert_double_eq_tol(grads[1], -1.6e-6 / 3.0, 1e-12);

    /* all zero: norm 0, nothing to do */
    ck_assert_int_eq(tfm_params_zero_grad(params), TFM_OK);
    ck_assert_int_eq(tfm_params_clip_grad_norm(params, 1.0f, &got), TFM_OK);
    ck_assert_float_eq(got, 0.0f);
    tfm_params_free(params);
}
END_TEST

/* Large gradients whose float squares would overflow still give a finite norm. */
START_TEST(clip_grad_norm_large_values)
{
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "a", 1, (const int64_t[]){2});
    const float g[2] = {3e20f, -4e20f};
    fill_grads(params, g);
    float got;
    ck_assert_int_eq(tfm_params_clip_grad_norm(params, 1.0f, &got), TFM_OK);
    ck_assert_double_eq_tol(got, 5e20, 1e14);
    ck_assert_double_eq_tol(tfm_params_grads(params)[0], 0.6, 1e-6);
    ck_assert_double_eq_tol(tfm_params_grads(params)[1], -0.8, 1e-6);
    tfm_params_free(params);
}
END_TEST

START_TEST(clip_grad_norm_errors)
{
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "a", 1, (const int64_t[]){4});
    const float bad[3][4] = {{1.0f, NAN, 2.0f, 3.0f},
                             {1.0f, 2.0f, INFINITY, 3.0f},
                             {-INFINITY, 0.0f, 0.0f, 0.0f}};
    for (int c = 0; c < 3; c++) {
        fill_grads(params, bad[c]);
        tfm_clear_error();
        ck_assert_int_eq(tfm_params_clip_grad_norm(params, 1.0f, NULL), TFM_ERR_NUMERIC);
        ck_assert_error(TFM_ERR_NUMERIC, "tfm_params_clip_grad_norm: the gradient norm is "
                                         "not finite");
        /* unchanged, bit for bit (NaN included) */
        ck_assert_mem_eq(tfm_params_grads(params), bad[c], sizeof bad[c]);
    }
    const float g[4] = {1, 2, 3, 4};
    fill_grads(params, g);
    const float bad_max[3] = {0.0f, -1.0f, NAN};
    for (int c = 0; c < 3; c++) {
        ck_assert_int_eq(tfm_params_clip_grad_norm(params, bad_max[c], NULL), TFM_ERR_ARG);
        ck_assert_error(TFM_ERR_ARG, "max_norm");
        ck_assert_mem_eq(tfm_params_grads(params), g, sizeof g);
    }
    /* an infinite limit only measures */
    float norm = 0.0f;
    ck_assert_int_eq(tfm_params_clip_grad_norm(params, INFINITY, &norm), TFM_OK);
    ck_assert_float_eq_tol(norm, sqrtf(30.0f), 1e-6f);
    ck_assert_mem_eq(tfm_params_grads(params), g, sizeof g);
    tfm_params_free(params);
}
END_TEST

/* A parameter belongs to the store: freeing it alone does nothing (valgrind
 * would see a double free or a use after free otherwise). */
START_TEST(tensor_free_is_a_no_op)
{
    tfm_params *params = tfm_params_create();
    tfm_tensor *a = tfm_params_add(params, "a", 1, (const int64_t[]){3});
    tfm_tensor_data_f32(a)[1] = 4.0f;
    tfm_tensor_free(a);
    ck_assert_ptr_eq(tfm_params_at(params, 0), a);
    ck_assert_float_eq(tfm_tensor_data_f32(a)[1], 4.0f);
    ck_assert_ptr_nonnull(tfm_params_add(params, "b", 1, (const int64_t[]){3}));
    check_blocks(params);
    tfm_params_free(params);
}
END_TEST

/* loss = sum(w * x) + sum(v): the gradients land in the grad block and
 * accumulate over steps until zeroed. */
START_TEST(tape_gradients_accumulate_in_the_block)
{
    tfm_params *params = tfm_params_create();
    tfm_tensor *w = tfm_params_add(params, "w", 1, (const int64_t[]){3});
    tfm_tensor *v = tfm_params_add(params, "v", 2, (const int64_t[]){1, 2});
    const float xs[3] = {2.0f, -1.0f, 0.5f};
    tfm_tensor *x = tfm_tensor_from_f32(1, (const int64_t[]){3}, xs);
    tfm_tape *tape = tfm_tape_create();
    const float *grads = tfm_params_grads(params);
    for (int step = 1; step <= 3; step++) {
        tfm_tensor *loss = tfm_add(tape, tfm_sum(tape, tfm_mul(tape, w, x)), tfm_sum(tape, v));
        ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
        for (int i = 0; i < 3; i++)
            ck_assert_float_eq(grads[i], (float)step * xs[i]);
        ck_assert_float_eq(grads[3], (float)step);
        ck_assert_float_eq(grads[4], (float)step);
        tfm_tape_reset(tape);
    }
    ck_assert_int_eq(tfm_params_zero_grad(params), TFM_OK);
    tfm_tensor *loss = tfm_sum(tape, tfm_mul(tape, w, x));
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
    for (int i = 0; i < 3; i++)
        ck_assert_float_eq(grads[i], xs[i]);
    ck_assert_float_eq(grads[3], 0.0f);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_params_free(params);
}
END_TEST

/* Freezing a parameter: no record, no gradient; unfreezing reuses its slice. */
START_TEST(set_requires_grad_on_a_parameter)
{
    tfm_params *params = tfm_params_create();
    tfm_tensor *w = tfm_params_add(params, "w", 1, (const int64_t[]){2});
    tfm_tensor *v = tfm_params_add(params, "v", 1, (const int64_t[]){2});
    tfm_tensor_data_f32(w)[0] = 3.0f;
    tfm_tensor_data_f32(w)[1] = 5.0f;
    ck_assert_int_eq(tfm_tensor_set_requires_grad(w, 0), TFM_OK);
    ck_assert_int_eq(tfm_tensor_requires_grad(w), 0);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *frozen = tfm_sum(tape, w);
    ck_assert_int_eq(tfm_tape_node_count(tape), 0);
    ck_assert_int_eq(tfm_tensor_requires_grad(frozen), 0);
    ck_assert_int_eq(tfm_tape_backward(tape, frozen), TFM_ERR_STATE);
    tfm_clear_error();
    tfm_tape_reset(tape);
    /* only v gets a gradient */
    tfm_tensor *loss = tfm_sum(tape, tfm_mul(tape, w, v));
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
    const float *grads = tfm_params_grads(params);
    ck_assert_float_eq(grads[0], 0.0f);
    ck_assert_float_eq(grads[1], 0.0f);
    ck_assert_float_eq(grads[2], 3.0f);
    ck_assert_float_eq(grads[3], 5.0f);
    tfm_tape_reset(tape);
    ck_assert_int_eq(tfm_tensor_set_requires_grad(w, 1), TFM_OK);
    ck_assert_int_eq(tfm_tensor_requires_grad(w), 1);
    check_blocks(params);
    loss = tfm_sum(tape, w);
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
    ck_assert_float_eq(grads[0], 1.0f);
    ck_assert_float_eq(grads[1], 1.0f);
    tfm_tape_free(tape);
    tfm_params_free(params);
}
END_TEST

static Suite *params_suite(void)
{
    Suite *s = suite_create("params");
    TCase *tc = tcase_create("params");
    tcase_add_test(tc, add_and_look_up);
    tcase_add_test(tc, bad_names_and_shapes);
    tcase_add_test(tc, blocks_stay_contiguous);
    tcase_add_test(tc, zero_grad);
    tcase_add_test(tc, clip_grad_norm);
    tcase_add_test(tc, clip_grad_norm_large_values);
    tcase_add_test(tc, clip_grad_norm_errors);
    tcase_add_test(tc, tensor_free_is_a_no_op);
    tcase_add_test(tc, tape_gradients_accumulate_in_the_block);
    tcase_add_test(tc, set_requires_grad_on_a_parameter);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(params_suite)
