/* embedding: gather of table rows by int32 ids, scatter-add backward. */
#include <check.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

enum { V = 5, D = 3 };

/* Row r of the table holds 10 r + d, so a value names its row and column. */
static tfm_tensor *numbered_table(void)
{
    float v[V * D];
    for (int r = 0; r < V; r++)
        for (int d = 0; d < D; d++)
            v[r * D + d] = (float)(10 * r + d);
    return tfm_tensor_from_f32(2, (const int64_t[]){V, D}, v);
}

START_TEST(values_and_shapes)
{
    static const int32_t idv[12] = {4, 0, 2, 2, 1, 3, 0, 4, 3, 1, 1, 2};
    static const struct { int32_t ndim; int64_t shape[3]; } cases[] = {
        {1, {12}}, {2, {3, 4}}, {3, {2, 3, 2}},
    };
    tfm_tensor *table = numbered_table();
    tfm_tape *tape = tfm_tape_create();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tfm_tensor *ids = tfm_tensor_from_i32(cases[c].ndim, cases[c].shape, idv);
        tfm_tensor *y = tfm_embedding(tape, table, ids);
        ck_assert_ptr_nonnull(y);
        ck_assert_int_eq(tfm_tensor_ndim(y), cases[c].ndim + 1);
        for (int32_t a = 0; a < cases[c].ndim; a++)
            ck_assert_int_eq(tfm_tensor_dim(y, a), cases[c].shape[a]);
        ck_assert_int_eq(tfm_tensor_dim(y, -1), D);
        const float *yv = tfm_tensor_data_f32(y);
        for (int i = 0; i < 12; i++)
            for (int d = 0; d < D; d++)
                ck_assert_float_eq(yv[i * D + d], (float)(10 * idv[i] + d));
        tfm_tensor_free(ids);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(table);
}
END_TEST

/* Row 0 is looked up three times: its gradient is the sum of the three
 * output rows' gradients; rows never looked up get none. */
START_TEST(repeated_ids_accumulate)
{
    static const int32_t idv[4] = {0, 2, 0, 0};
    static const float seed[4 * D] = {1, 2, 3, 10, 20, 30, 100, 200, 300, 1000, 2000, 3000};
    static const float want[V * D] = {1101, 2202, 3303, 0, 0, 0, 10, 20, 30, 0, 0, 0, 0, 0, 0};
    tfm_tensor *table = numbered_table();
    tfm_tensor *ids = tfm_tensor_from_i32(1, (const int64_t[]){4}, idv);
    tfm_tensor_set_requires_grad(table, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_embedding(tape, table, ids);
    ck_assert_int_eq(tfm_tape_backward_with_grad(tape, y, seed, 4 * D), TFM_OK);
    const float *g = tfm_tensor_grad_f32(table);
    for (int i = 0; i < V * D; i++)
        ck_assert_float_eq(g[i], want[i]);
    tfm_tape_free(tape);
    tfm_tensor_free(ids);
    tfm_tensor_free(table);
}
END_TEST

/* Backward scatters by the ids as they were at forward time, even if the
 * caller refills the ids tensor (with out-of-range values) in between. */
START_TEST(backward_uses_forward_ids)
{
    static const int32_t idv[2] = {1, 3};
    static const float seed[2 * D] = {1, 1, 1, 2, 2, 2};
    tfm_tensor *table = numbered_table();
    tfm_tensor *ids = tfm_tensor_from_i32(1, (const int64_t[]){2}, idv);
    tfm_tensor_set_requires_grad(table, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_embedding(tape, table, ids);
    tfm_tensor_data_i32(ids)[0] = 1000000;
    tfm_tensor_data_i32(ids)[1] = -7;
    ck_assert_int_eq(tfm_tape_backward_with_grad(tape, y, seed, 2 * D), TFM_OK);
    const float *g = tfm_tensor_grad_f32(table);
    for (int d = 0; d < D; d++) {
        ck_assert_float_eq(g[1 * D + d], 1.0f);
        ck_assert_float_eq(g[3 * D + d], 2.0f);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(ids);
    tfm_tensor_free(table);
}
END_TEST

static tfm_tensor *build_embedding(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    return tfm_embedding(tape, in[0], (const tfm_tensor *)ctx);
}

START_TEST(table_gradient)
{
    static const int32_t idv[6] = {3, 0, 3, 4, 0, 3};
    tfm_tensor *ids = tfm_tensor_from_i32(2, (const int64_t[]){2, 3}, idv);
    tfm_tensor *table = gc_random(2, (const int64_t[]){V, 4}, 21);
    tfm_tensor_set_requires_grad(table, 1);
    ck_assert_gradcheck(build_embedding, ids, &table, 1);
    tfm_tensor_free(table);
    tfm_tensor_free(ids);
}
END_TEST

/* A bad id anywhere fails the whole lookup, naming the id and where it is,
 * before anything is recorded. */
START_TEST(ids_out_of_range)
{
    static const struct { int32_t bad; const char *where; } cases[] = {
        {-1, "ids[1,2] = -1"}, {V, "ids[1,2] = 5"}, {1 << 30, "ids[1,2] = 1073741824"},
    };
    tfm_tensor *table = numbered_table();
    tfm_tensor_set_requires_grad(table, 1);
    tfm_tape *tape = tfm_tape_create();
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int32_t idv[6] = {0, 1, 2, 3, 4, 0};
        idv[5] = cases[c].bad;
        tfm_tensor *ids = tfm_tensor_from_i32(2, (const int64_t[]){2, 3}, idv);
        ck_assert_ptr_null(tfm_embedding(tape, table, ids));
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_RANGE);
        ck_assert_msg(strstr(tfm_last_error(), cases[c].where) != NULL, "%s", tfm_last_error());
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[0, 5)"));
        ck_assert_int_eq(tfm_tape_node_count(tape), 0);
        tfm_tensor_free(ids);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(table);
}
END_TEST

START_TEST(errors)
{
    tfm_tensor *table = numbered_table();
    tfm_tensor *table3 = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){2, V, D});
    tfm_tensor *table1 = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){V});
    tfm_tensor *itable = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){V, D});
    tfm_tensor *ids = tfm_tensor_zeros(TFM_I32, 1, (const int64_t[]){2});
    tfm_tensor *fids = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){2});
    tfm_tensor *ids4 = tfm_tensor_zeros(TFM_I32, 4, (const int64_t[]){1, 2, 1, 2});
    tfm_tape *tape = tfm_tape_create();

    tfm_clear_error();
    ck_assert_ptr_null(tfm_embedding(tape, NULL, ids));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_embedding: table is NULL"));
    tfm_clear_error();
    ck_assert_ptr_null(tfm_embedding(tape, table, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_embedding: ids is NULL"));
    ck_assert_ptr_null(tfm_embedding(NULL, table, ids));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tape is NULL"));

    ck_assert_ptr_null(tfm_embedding(tape, table, fids));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "ids must be int32"));
    ck_assert_ptr_null(tfm_embedding(tape, itable, ids));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "table must be float32"));

    ck_assert_ptr_null(tfm_embedding(tape, table3, ids));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "table [2,5,3] must be 2-D"));
    ck_assert_ptr_null(tfm_embedding(tape, table1, ids));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "table [5]"));

    /* the result would be 5-D */
    ck_assert_ptr_null(tfm_embedding(tape, table, ids4));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "ids [1,2,1,2]"));

    tfm_tape_free(tape);
    tfm_tensor_free(table);
    tfm_tensor_free(table3);
    tfm_tensor_free(table1);
    tfm_tensor_free(itable);
    tfm_tensor_free(ids);
    tfm_tensor_free(fids);
    tfm_tensor_free(ids4);
}
END_TEST

static Suite *embedding_suite(void)
{
    Suite *s = suite_create("ops_embedding");
    TCase *tc = tcase_create("embedding");
    tcase_add_test(tc, values_and_shapes);
    tcase_add_test(tc, repeated_ids_accumulate);
    tcase_add_test(tc, backward_uses_forward_ids);
    tcase_add_test(tc, table_gradient);
    tcase_add_test(tc, ids_out_of_range);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(embedding_suite)
