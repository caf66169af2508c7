/* matmul: every transpose flag combination in 2-D, 3-D, 4-D and with a 2-D
 * side shared by a batch, against a double-precision reference, gradients
 * of both inputs, and the errors. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

enum { M = 3, K = 4, N = 2 };

/* Batch axes of a and b (0 axes: that side is 2-D). */
static const struct { int32_t na; int64_t a[2]; int32_t nb; int64_t b[2]; } batches[] = {
    {0, {0}, 0, {0}},       {1, {2}, 1, {2}},       {2, {2, 3}, 2, {2, 3}},
    {1, {3}, 0, {0}},       {2, {2, 2}, 0, {0}},    {0, {0}, 1, {3}},
    {0, {0}, 2, {2, 2}},
};
enum { N_BATCHES = sizeof batches / sizeof batches[0] };

typedef struct flags { int32_t ta, tb; } flags;

/* batch axes then the stored (pre-transpose) matrix */
static int32_t stored_shape(int32_t nbatch, const int64_t *lead, int64_t rows,
                            int64_t cols, int transpose, int64_t *shape)
{
    for (int32_t i = 0; i < nbatch; i++)
        shape[i] = lead[i];
    shape[nbatch] = transpose ? cols : rows;
    shape[nbatch + 1] = transpose ? rows : cols;
    return nbatch + 2;
}

static tfm_tensor *build_matmul(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    const flags *f = ctx;
    return tfm_matmul(tape, in[0], in[1], f->ta, f->tb);
}

static tfm_tensor *make_input(int c, int side, int transpose, uint64_t seed)
{
    int64_t shape[4];
    int32_t ndim = side == 0
        ? stored_shape(batches[c].na, batches[c].a, M, K, transpose, shape)
        : stored_shape(batches[c].nb, batches[c].b, K, N, transpose, shape);
    return gc_random(ndim, shape, seed);
}

START_TEST(values_match_reference)
{
    for (int c = 0; c < N_BATCHES; c++)
        for (int t = 0; t < 4; t++) {
            int ta = t & 1, tb = t >> 1;
            tfm_tensor *a = make_input(c, 0, ta, 10 + (uint64_t)c);
            tfm_tensor *b = make_input(c, 1, tb, 50 + (uint64_t)c);
            tfm_tape *tape = tfm_tape_create();
            tfm_tensor *out = tfm_matmul(tape, a, b, ta, tb);
            ck_assert_msg(out != NULL, "case %d flags %d: %s", c, t, tfm_last_error());
            /* the batched side gives the leading axes */
            int32_t nlead = batches[c].na ? batches[c].na : batches[c].nb;
            const int64_t *lead = batches[c].na ? batches[c].a : batches[c].b;
            ck_assert_int_eq(tfm_tensor_ndim(out), nlead + 2);
            int64_t batch = 1;
            for (int32_t i = 0; i < nlead; i++) {
                ck_assert_int_eq(tfm_tensor_dim(out, i), lead[i]);
                batch *= lead[i];
            }
            ck_assert_int_eq(tfm_tensor_dim(out, -2), M);
            ck_assert_int_eq(tfm_tensor_dim(out, -1), N);
            const float *av = tfm_tensor_data_f32(a), *bv = tfm_tensor_data_f32(b);
            const float *o = tfm_tensor_data_f32(out);
            for (int64_t i = 0; i < batch; i++) {
                const float *ai = av + (batches[c].na ? i * M * K : 0);
                const float *bi = bv + (batches[c].nb ? i * K * N : 0);
                for (int r = 0; r < M; r++)
                    for (int col = 0; col < N; col++) {
                        double want = 0.0;
                        for (int j = 0; j < K; j++)
                            want += (double)(ta ? ai[j * M + r] : ai[r * K + j]) *
                                    (double)(tb ? bi[col * K + j] : bi[j * N + col]);
                        double got = o[(i * M + r) * N + col];
                        ck_assert_msg(fabs(got - want) <= 1e-5 + 1e-5 * fabs(want),
                                      "case %d flags %d batch %lld [%d,%d]: %g vs %g", c, t,
                                      (long long)i, r, col, got, want);
                    }
            }
            tfm_tape_free(tape);
            tfm_tensor_free(a);
            tfm_tensor_free(b);
        }
}
END_TEST

START_TEST(gradients_of_both_inputs)
{
    for (int c = 0; c < N_BATCHES; c++)
        for (int t = 0; t < 4; t++) {
            flags f = {t & 1, t >> 1};
            tfm_tensor *in[2] = {make_input(c, 0, f.ta, 20 + (uint64_t)c),
                                 make_input(c, 1, f.tb, 70 + (uint64_t)c)};
            tfm_tensor_set_requires_grad(in[0], 1);
            tfm_tensor_set_requires_grad(in[1], 1);
            ck_assert_gradcheck(build_matmul, &f, in, 2);
            tfm_tensor_free(in[0]);
            tfm_tensor_free(in[1]);
        }
}
END_TEST

/* One input without a gradient: backward must skip it and still give the
 * other's. */
START_TEST(gradient_of_one_input)
{
    flags f = {0, 1};
    for (int side = 0; side < 2; side++) {
        tfm_tensor *in[2] = {make_input(4, 0, f.ta, 5), make_input(4, 1, f.tb, 6)};
        tfm_tensor_set_requires_grad(in[side], 1);
        ck_assert_gradcheck(build_matmul, &f, in, 2);
        tfm_tensor_free(in[0]);
        tfm_tensor_free(in[1]);
    }
}
END_TEST

static tfm_tensor *build_gram(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    (void)ctx;
    return tfm_matmul(tape, in[0], in[0], 0, 1);
}

/* x @ x^T: both backward terms land in the same buffer and must add up. */
START_TEST(same_tensor_on_both_sides)
{
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 3, 4}, 3);
    tfm_tensor_set_requires_grad(x, 1);
    ck_assert_gradcheck(build_gram, NULL, &x, 1);
    tfm_tensor_free(x);
}
END_TEST

/* Nonzero flags other than 1 mean "transpose" too. */
START_TEST(any_nonzero_flag_transposes)
{
    tfm_tensor *a = gc_random(2, (const int64_t[]){4, 3}, 1);
    tfm_tensor *b = gc_random(2, (const int64_t[]){4, 2}, 2);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *one = tfm_matmul(tape, a, b, 1, 0);
    tfm_tensor *seven = tfm_matmul(tape, a, b, 7, 0);
    ck_assert_ptr_nonnull(seven);
    ck_assert_mem_eq(tfm_tensor_data_f32(one), tfm_tensor_data_f32(seven), 6 * sizeof(float));
    tfm_tape_free(tape);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
}
END_TEST

static void expect_error(const tfm_tensor *a, const tfm_tensor *b, int32_t ta, int32_t tb,
                         tfm_status status, const char *const *substrings, int n)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_clear_error();
    ck_assert_ptr_null(tfm_matmul(tape, a, b, ta, tb));
    ck_assert_int_eq(tfm_last_status(), status);
    for (int i = 0; i < n; i++)
        ck_assert_msg(strstr(tfm_last_error(), substrings[i]) != NULL,
                      "'%s' lacks '%s'", tfm_last_error(), substrings[i]);
    tfm_tape_free(tape);
}

START_TEST(errors)
{
    tfm_tensor *a23 = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){2, 3});
    tfm_tensor *b45 = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){4, 5});
    tfm_tensor *a234 = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){2, 3, 4});
    tfm_tensor *b345 = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){3, 4, 5});
    tfm_tensor *b2245 = tfm_tensor_zeros(TFM_F32, 4, (const int64_t[]){2, 2, 4, 5});
    tfm_tensor *v3 = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){3});
    tfm_tensor *i34 = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){3, 4});

    expect_error(a23, b45, 0, 0, TFM_ERR_SHAPE,
                 (const char *[]){"tfm_matmul", "inner", "[2,3]", "[4,5]"}, 4);
    /* transposing b makes the sizes 3 and 5: still a mismatch, now flagged */
    expect_error(a23, b45, 0, 1, TFM_ERR_SHAPE, (const char *[]){"[4,5] (transposed)"}, 1);
    expect_error(a234, b345, 0, 0, TFM_ERR_SHAPE,
                 (const char *[]){"batch", "[2,3,4]", "[3,4,5]"}, 3);
    /* [2] against [2,2]: equal leading sizes, different batch ranks */
    tfm_tensor *a2234 = tfm_tensor_zeros(TFM_F32, 4, (const int64_t[]){2, 2, 3, 4});
    tfm_tensor *b245 = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){2, 4, 5});
    expect_error(a2234, b245, 0, 0, TFM_ERR_SHAPE, (const char *[]){"batch"}, 1);
    expect_error(b2245, a234, 0, 0, TFM_ERR_SHAPE, (const char *[]){"inner"}, 1);
    expect_error(v3, a234, 0, 0, TFM_ERR_SHAPE, (const char *[]){"2 to 4", "[3]"}, 2);
    expect_error(a234, v3, 0, 0, TFM_ERR_SHAPE, (const char *[]){"2 to 4"}, 1);
    expect_error(i34, b45, 0, 0, TFM_ERR_DTYPE, (const char *[]){"a", "float32"}, 2);
    expect_error(a23, i34, 0, 0, TFM_ERR_DTYPE, (const char *[]){"b", "float32"}, 2);
    expect_error(NULL, b45, 0, 0, TFM_ERR_NULL, (const char *[]){"a is NULL"}, 1);
    expect_error(a23, NULL, 0, 0, TFM_ERR_NULL, (const char *[]){"b is NULL"}, 1);

    tfm_clear_error();
    ck_assert_ptr_null(tfm_matmul(NULL, a234, b45, 0, 0));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tape"));

    /* a NULL input keeps the error that produced it */
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_matmul(tape, tfm_matmul(tape, a23, b45, 0, 0), b45, 0, 0));
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "inner"));
    tfm_tape_free(tape);

    tfm_tensor *all[] = {a23, b45, a234, b345, b2245, v3, i34, a2234, b245};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tfm_tensor_free(all[i]);
}
END_TEST

static Suite *matmul_suite(void)
{
    Suite *s = suite_create("ops_matmul");
    TCase *tc = tcase_create("matmul");
    tcase_add_test(tc, values_match_reference);
    tcase_add_test(tc, gradients_of_both_inputs);
    tcase_add_test(tc, gradient_of_one_input);
    tcase_add_test(tc, same_tensor_on_both_sides);
    tcase_add_test(tc, any_nonzero_flag_transposes);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(matmul_suite)
