/* Tensors, random numbers, versions and status names. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include <tfm/tfm.h>

/* The header's macros, the loaded library's calls and meson's project
 * version (TFM_PROJECT_VERSION, from tests/meson.build) agree. */
START_TEST(version_matches_headers)
{
    unsigned major, minor, patch;
    ck_assert_int_eq(sscanf(TFM_PROJECT_VERSION, "%u.%u.%u", &major, &minor, &patch), 3);
    ck_assert_uint_eq(TFM_VERSION_MAJOR, major);
    ck_assert_uint_eq(TFM_VERSION_MINOR, minor);
    ck_assert_uint_eq(TFM_VERSION_PATCH, patch);
    ck_assert_uint_eq(TFM_VERSION_NUMBER, major * 10000 + minor * 100 + patch);
    ck_assert_uint_eq(tfm_version_number(), TFM_VERSION_NUMBER);
    ck_assert_str_eq(tfm_version_string(), TFM_PROJECT_VERSION);
}
END_TEST

START_TEST(status_names)
{
    ck_assert_str_eq(tfm_status_name(TFM_OK), "TFM_OK");
    ck_assert_str_eq(tfm_status_name(TFM_ERR_SHAPE), "TFM_ERR_SHAPE");
    ck_assert_str_eq(tfm_status_name(TFM_ERR_NUMERIC), "TFM_ERR_NUMERIC");
    ck_assert_str_eq(tfm_status_name(99), "TFM_UNKNOWN_STATUS");
    ck_assert_str_eq(tfm_status_name(-1), "TFM_UNKNOWN_STATUS");
}
END_TEST

START_TEST(create_and_query)
{
    const int64_t shape[3] = {2, 3, 4};
    tfm_tensor *z = tfm_tensor_zeros(TFM_F32, 3, shape);
    tfm_tensor *o = tfm_tensor_ones(3, shape);
    tfm_tensor *f = tfm_tensor_full(3, shape, -1.5f);
    tfm_tensor *i = tfm_tensor_zeros(TFM_I32, 2, shape);
    ck_assert_int_eq(tfm_tensor_ndim(z), 3);
    ck_assert_int_eq(tfm_tensor_numel(z), 24);
    ck_assert_int_eq(tfm_tensor_dim(z, -1), 4);
    ck_assert_int_eq(tfm_tensor_dim(z, 0), 2);
    ck_assert_int_eq(tfm_tensor_dtype(i), TFM_I32);
    int64_t got[TFM_MAX_DIMS];
    ck_assert_int_eq(tfm_tensor_shape(o, got), TFM_OK);
    ck_assert_int_eq(got[1], 3);
    const float *zv = tfm_tensor_data_f32(z), *ov = tfm_tensor_data_f32(o),
                *fv = tfm_tensor_data_f32(f);
    for (int k = 0; k < 24; k++) {
        ck_assert_float_eq(zv[k], 0.0f);
        ck_assert_float_eq(ov[k], 1.0f);
        ck_assert_float_eq(fv[k], -1.5f);
    }
    ck_assert_ptr_null(tfm_tensor_data_f32(i));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    ck_assert_ptr_nonnull(tfm_tensor_data_i32(i));
    tfm_tensor_free(z);
    tfm_tensor_free(o);
    tfm_tensor_free(f);
    tfm_tensor_free(i);
}
END_TEST

START_TEST(copy_in_and_out)
{
    const float values[6] = {1, 2, 3, 4, 5, 6};
    const int32_t ids[4] = {7, -1, 0, 42};
    tfm_tensor *t = tfm_tensor_from_f32(2, (const int64_t[]){3, 2}, values);
    tfm_tensor *u = tfm_tensor_from_i32(1, (const int64_t[]){4}, ids);
    float back[6];
    int32_t ids_back[4];
    ck_assert_int_eq(tfm_tensor_read_f32(t, back, 6), TFM_OK);
    ck_assert_mem_eq(back, values, sizeof values);
    ck_assert_int_eq(tfm_tensor_read_i32(u, ids_back, 4), TFM_OK);
    ck_assert_mem_eq(ids_back, ids, sizeof ids);
    const float update[6] = {6, 5, 4, 3, 2, 1};
    ck_assert_int_eq(tfm_tensor_write_f32(t, update, 6), TFM_OK);
    ck_assert_int_eq(tfm_tensor_read_f32(t, back, 6), TFM_OK);
    ck_assert_mem_eq(back, update, sizeof update);
    /* a count that differs from numel is refused, not truncated */
    ck_assert_int_eq(tfm_tensor_read_f32(t, back, 5), TFM_ERR_SHAPE);
    ck_assert_int_eq(tfm_tensor_write_i32(u, ids, 3), TFM_ERR_SHAPE);
    ck_assert_int_eq(tfm_tensor_read_i32(t, ids_back, 6), TFM_ERR_DTYPE);
    float item;
    ck_assert_int_eq(tfm_tensor_item(t, &item), TFM_ERR_SHAPE);
    tfm_tensor *scalar = tfm_tensor_full(1, (const int64_t[]){1}, 2.5f);
    ck_assert_int_eq(tfm_tensor_item(scalar, &item), TFM_OK);
    ck_assert_float_eq(item, 2.5f);
    tfm_tensor_free(scalar);
    tfm_tensor_free(t);
    tfm_tensor_free(u);
}
END_TEST

START_TEST(random_tensors_are_seeded)
{
    const int64_t shape[1] = {20000};
    tfm_rng *r1 = tfm_rng_create(42), *r2 = tfm_rng_create(42), *r3 = tfm_rng_create(43);
    tfm_tensor *a = tfm_tensor_normal(1, shape, 1.0f, 2.0f, r1);
    tfm_tensor *b = tfm_tensor_normal(1, shape, 1.0f, 2.0f, r2);
    tfm_tensor *c = tfm_tensor_normal(1, shape, 1.0f, 2.0f, r3);
    const float *av = tfm_tensor_data_f32(a), *bv = tfm_tensor_data_f32(b),
                *cv = tfm_tensor_data_f32(c);
    ck_assert_mem_eq(av, bv, sizeof(float) * 20000);
    ck_assert(memcmp(av, cv, sizeof(float) * 20000) != 0);
    double sum = 0, sq = 0;
    for (int i = 0; i < 20000; i++) {
        sum += av[i];
        sq += (double)av[i] * av[i];
    }
    double mean = sum / 20000, var = sq / 20000 - mean * mean;
    ck_assert_double_eq_tol(mean, 1.0, 0.05);
    ck_assert_double_eq_tol(sqrt(var), 2.0, 0.05);

    tfm_tensor *u = tfm_tensor_uniform(1, shape, -3.0f, 5.0f, r1);
    const float *uv = tfm_tensor_data_f32(u);
    double usum = 0;
    for (int i = 0; i < 20000; i++) {
        ck_assert(uv[i] >= -3.0f && uv[i] < 5.0f);
        usum += uv[i];
    }
    ck_assert_double_eq_tol(usum / 20000, 1.0, 0.05);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
    tfm_tensor_free(c);
    tfm_tensor_free(u);
    tfm_rng_free(r1);
    tfm_rng_free(r2);
    tfm_rng_free(r3);
}
END_TEST

START_TEST(requires_grad_only_for_float_leaves)
{
    tfm_tensor *f = tfm_tensor_ones(1, (const int64_t[]){3});
    tfm_tensor *i = tfm_tensor_zeros(TFM_I32, 1, (const int64_t[]){3});
    float g[3];
    ck_assert_int_eq(tfm_tensor_read_grad(f, g, 3), TFM_ERR_STATE);
    ck_assert_int_eq(tfm_tensor_set_requires_grad(f, 1), TFM_OK);
    ck_assert_int_eq(tfm_tensor_requires_grad(f), 1);
    ck_assert_int_eq(tfm_tensor_read_grad(f, g, 3), TFM_OK);
    ck_assert_float_eq(g[0], 0.0f);
    ck_assert_int_eq(tfm_tensor_set_requires_grad(i, 1), TFM_ERR_DTYPE);

    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_scale(tape, f, 2.0f);
    ck_assert_int_eq(tfm_tensor_requires_grad(y), 1);
    ck_assert_int_eq(tfm_tensor_set_requires_grad(y, 1), TFM_ERR_STATE);
    tfm_tensor_free(y); /* tape-owned: a harmless no-op */
    tfm_tape_free(tape);
    tfm_tensor_free(f);
    tfm_tensor_free(i);
}
END_TEST

static Suite *tensor_suite(void)
{
    Suite *s = suite_create("tensor");
    TCase *tc = tcase_create("tensor");
    tcase_add_test(tc, version_matches_headers);
    tcase_add_test(tc, status_names);
    tcase_add_test(tc, create_and_query);
    tcase_add_test(tc, copy_in_and_out);
    tcase_add_test(tc, random_tensors_are_seeded);
    tcase_add_test(tc, requires_grad_only_for_float_leaves);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(tensor_suite)
