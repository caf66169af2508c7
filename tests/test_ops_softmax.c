/* softmax (no mask, int32 keep-mask, float32 additive mask, broadcast masks)
 * and log_softmax. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

/* Softmax of one row in double; a row that is all -inf gives zeros. */
static void ref_softmax(const double *s, double *y, int n)
{
    double max = -INFINITY, sum = 0.0;
    for (int j = 0; j < n; j++)
        max = s[j] > max ? s[j] : max;
    for (int j = 0; j < n; j++) {
        y[j] = max == -INFINITY ? 0.0 : exp(s[j] - max);
        sum += y[j];
    }
    for (int j = 0; j < n; j++)
        y[j] = sum > 0.0 ? y[j] / sum : 0.0;
}

/* got [rows, n] against the double softmax of scores row by row. */
static void check_rows(const float *got, const double *scores, int rows, int n, double tol)
{
    for (int r = 0; r < rows; r++) {
        double y[128];
        ck_assert_int_le(n, 128);
        ref_softmax(scores + r * n, y, n);
        for (int j = 0; j < n; j++)
            ck_assert_msg(fabs(got[r * n + j] - y[j]) <= tol, "row %d col %d: %g vs %g", r, j,
                          (double)got[r * n + j], y[j]);
    }
}

START_TEST(values_without_mask)
{
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 3, 7}, 1);
    float *xv = tfm_tensor_data_f32(x);
    double s[42];
    for (int i = 0; i < 42; i++) {
        xv[i] *= 3.0f; /* sharper rows than N(0, 1) */
        s[i] = xv[i];
    }
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_softmax(tape, x, NULL);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(tfm_tensor_ndim(y), 3);
    ck_assert_int_eq(tfm_tensor_dim(y, 0), 2);
    ck_assert_int_eq(tfm_tensor_dim(y, 1), 3);
    ck_assert_int_eq(tfm_tensor_dim(y, 2), 7);
    check_rows(tfm_tensor_data_f32(y), s, 6, 7, 1e-6);
    const float *ly = tfm_tensor_data_f32(tfm_log_softmax(tape, x));
    for (int r = 0; r < 6; r++) {
        double ref[7];
        ref_softmax(s + r * 7, ref, 7);
        for (int j = 0; j < 7; j++)
            ck_assert_double_eq_tol(ly[r * 7 + j], log(ref[j]), 1e-5);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

START_TEST(huge_values_stay_finite)
{
    const float v[6] = {1000, 1001, 999, -1000, -1001, -999};
    tfm_tensor *x = tfm_tensor_from_f32(2, (const int64_t[]){2, 3}, v);
    tfm_tape *tape = tfm_tape_create();
    const float *y = tfm_tensor_data_f32(tfm_softmax(tape, x, NULL));
    const float *ly = tfm_tensor_data_f32(tfm_log_softmax(tape, x));
    const double shifted[6] = {0, 1, -1, 0, -1, 1};
    check_rows(y, shifted, 2, 3, 1e-6);
    for (int r = 0; r < 2; r++) {
        double ref[3];
        ref_softmax(shifted + 3 * r, ref, 3);
        for (int j = 0; j < 3; j++) {
            ck_assert(isfinite(y[3 * r + j]) && isfinite(ly[3 * r + j]));
            ck_assert_double_eq_tol(ly[3 * r + j], log(ref[j]), 1e-6);
        }
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

/* Rows of every length to 100 (whole blocks of 16, a tail that overlaps
 * the block before it, shorter than a block): softmax and log-softmax
 * against double, with a keep-mask dropping every third key (a row with
 * none kept: zeros); the largest far above the rest, last; a NaN in the
 * first block, the last whole block or the tail making the whole row NaN. */
START_TEST(rows_of_every_length)
{
    enum { LONGEST = 100 };
    tfm_tensor *x = gc_random(1, (const int64_t[]){LONGEST}, 7);
    const float *xv = tfm_tensor_data_f32(x);
    float v[LONGEST];
    int32_t keep[LONGEST];
    double s[LONGEST], kept[LONGEST], ref[LONGEST];
    for (int n = 1; n <= LONGEST; n++) {
        for (int j = 0; j < n; j++) {
            v[j] = 3.0f * xv[j];
            s[j] = v[j];
            keep[j] = n > 1 && j % 3 != 1;
            kept[j] = keep[j] ? s[j] : -INFINITY;
        }
        tfm_tensor *row = tfm_tensor_from_f32(1, (const int64_t[]){n}, v);
        tfm_tensor *mask = tfm_tensor_from_i32(1, (const int64_t[]){n}, keep);
        tfm_tape *tape = tfm_tape_create();
        check_rows(tfm_tensor_data_f32(tfm_softmax(tape, row, NULL)), s, 1, n, 1e-6);
        check_rows(tfm_tensor_data_f32(tfm_softmax(tape, row, mask)), kept, 1, n, 1e-6);
        const float *ly = tfm_tensor_data_f32(tfm_log_softmax(tape, row));
        ref_softmax(s, ref, n);
        for (int j = 0; j < n; j++)
            ck_assert_msg(fabs(ly[j] - log(ref[j])) <= 1e-5, "n %d, %d: %g, not %g", n, j,
                          (double)ly[j], log(ref[j]));
        /* the largest far above the rest, where the maximum must find it */
        float *data = tfm_tensor_data_f32(row);
        data[n - 1] = 200.0f;
        const float *top = tfm_tensor_data_f32(tfm_softmax(tape, row, NULL));
        ck_assert_msg(fabsf(top[n - 1] - 1.0f) <= 1e-6f, "n %d: %g", n, (double)top[n - 1]);
        data[n - 1] = v[n - 1];
        const int at[3] = {0, n / 16 * 16 - 1, n - 1};
        for (int a = 0; a < 3; a++) {
            if (at[a] < 0)
                continue;
            data[at[a]] = NAN;
            const float *y = tfm_tensor_data_f32(tfm_softmax(tape, row, NULL));
            for (int j = 0; j < n; j++)
                ck_assert_msg(isnan(y[j]), "n %d, NaN at %d: y[%d] = %g", n, at[a], j,
                              (double)y[j]);
            data[at[a]] = v[at[a]];
        }
        tfm_tape_free(tape);
        tfm_tensor_free(row);
        tfm_tensor_free(mask);
    }
    tfm_tensor_free(x);
}
END_TEST

/* Rows: partly dropped, fully dropped (zeros, as an additive mask's all
 * -inf row), all kept. */
START_TEST(keep_mask_values)
{
    const float v[12] = {0.5f, -1.0f, 2.0f, 0.25f, 3.0f, 1.0f, -2.0f, 0.0f, 1.0f, 2.0f, 3.0f, 4.0f};
    const int32_t keep[12] = {1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1};
    tfm_tensor *x = tfm_tensor_from_f32(2, (const int64_t[]){3, 4}, v);
    tfm_tensor *m = tfm_tensor_from_i32(2, (const int64_t[]){3, 4}, keep);
    tfm_tape *tape = tfm_tape_create();
    const float *y = tfm_tensor_data_f32(tfm_softmax(tape, x, m));
    double s[12];
    for (int i = 0; i < 12; i++)
        s[i] = keep[i] ? v[i] : -INFINITY;
    check_rows(y, s, 3, 4, 1e-6);
    ck_assert_float_eq(y[1], 0.0f);
    for (int j = 4; j < 8; j++)
        ck_assert_float_eq(y[j], 0.0f);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(m);
}
END_TEST

/* Rows: -inf in places, all -inf (zeros, not NaN), finite offsets. */
START_TEST(additive_mask_values)
{
    const float v[9] = {0.5f, -1.0f, 2.0f, 3.0f, 1.0f, -2.0f, 1.0f, 2.0f, 3.0f};
    const float add[9] = {0, -INFINITY, 0, -INFINITY, -INFINITY, -INFINITY, 0.5f, -1.0f, 0};
    tfm_tensor *x = tfm_tensor_from_f32(2, (const int64_t[]){3, 3}, v);
    tfm_tensor *m = tfm_tensor_from_f32(2, (const int64_t[]){3, 3}, add);
    tfm_tape *tape = tfm_tape_create();
    const float *y = tfm_tensor_data_f32(tfm_softmax(tape, x, m));
    double s[9];
    for (int i = 0; i < 9; i++)
        s[i] = (double)v[i] + (double)add[i];
    check_rows(y, s, 3, 3, 1e-6);
    ck_assert_float_eq(y[1], 0.0f);
    for (int j = 3; j < 6; j++)
        ck_assert_float_eq(y[j], 0.0f);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(m);
}
END_TEST

enum { B = 2, H = 2, T = 3, S = 4 };

/* A [T,S] causal mask (int and float) and a [B,1,1,S] padding mask onto
 * [B,H,T,S] scores, against the mask indexed by hand. */
START_TEST(broadcast_masks)
{
    int32_t causal[T * S], pad[B * S];
    float causal_add[T * S];
    for (int t = 0; t < T; t++)
        for (int s = 0; s < S; s++) {
            causal[t * S + s] = s <= t;
            causal_add[t * S + s] = s <= t ? 0.0f : -INFINITY;
        }
    for (int b = 0; b < B; b++)
        for (int s = 0; s < S; s++)
            pad[b * S + s] = s < S - b; /* batch 1 pads its last position */
    tfm_tensor *x = gc_random(4, (const int64_t[]){B, H, T, S}, 3);
    tfm_tensor *mc = tfm_tensor_from_i32(2, (const int64_t[]){T, S}, causal);
    tfm_tensor *mf = tfm_tensor_from_f32(2, (const int64_t[]){T, S}, causal_add);
    tfm_tensor *mp = tfm_tensor_from_i32(4, (const int64_t[]){B, 1, 1, S}, pad);
    tfm_tape *tape = tfm_tape_create();
    const float *yc = tfm_tensor_data_f32(tfm_softmax(tape, x, mc));
    const float *yf = tfm_tensor_data_f32(tfm_softmax(tape, x, mf));
    tfm_tensor *outp = tfm_softmax(tape, x, mp);
    ck_assert_int_eq(tfm_tensor_ndim(outp), 4);
    const float *yp = tfm_tensor_data_f32(outp);
    const float *xv = tfm_tensor_data_f32(x);
    double sc[B * H * T * S], sp[B * H * T * S];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int s = 0; s < S; s++) {
                    int i = ((b * H + h) * T + t) * S + s;
                    sc[i] = causal[t * S + s] ? xv[i] : -INFINITY;
                    sp[i] = pad[b * S + s] ? xv[i] : -INFINITY;
                }
    check_rows(yc, sc, B * H * T, S, 1e-6);
    check_rows(yf, sc, B * H * T, S, 1e-6);
    check_rows(yp, sp, B * H * T, S, 1e-6);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(mc);
    tfm_tensor_free(mf);
    tfm_tensor_free(mp);
}
END_TEST

static tfm_tensor *build_softmax(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    (void)ctx;
    return tfm_softmax(tape, in[0], in[1]);
}

static tfm_tensor *build_softmax_ctx_mask(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    return tfm_softmax(tape, in[0], (const tfm_tensor *)ctx);
}

static tfm_tensor *build_log_softmax(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    (void)ctx;
    return tfm_log_softmax(tape, in[0]);
}

START_TEST(gradient_without_mask)
{
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 3, 5}, 4);
    tfm_tensor_set_requires_grad(x, 1);
    ck_assert_gradcheck(build_softmax_ctx_mask, NULL, &x, 1);
    ck_assert_gradcheck(build_log_softmax, NULL, &x, 1);
    tfm_tensor_free(x);
}
END_TEST

/* Includes a fully dropped row: zeros, and no gradient reaches x. */
START_TEST(gradient_keep_mask)
{
    int32_t keep[T * S] = {1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 1};
    tfm_tensor *mask = tfm_tensor_from_i32(2, (const int64_t[]){T, S}, keep);
    tfm_tensor *x = gc_random(4, (const int64_t[]){B, H, T, S}, 5);
    tfm_tensor_set_requires_grad(x, 1);
    ck_assert_gradcheck(build_softmax_ctx_mask, mask, &x, 1);
    tfm_tensor_free(x);
    tfm_tensor_free(mask);
}
END_TEST

START_TEST(keep_mask_blocks_gradient)
{
    const int32_t keep[8] = {1, 0, 1, 1, 0, 0, 0, 0};
    tfm_tensor *mask = tfm_tensor_from_i32(2, (const int64_t[]){2, 4}, keep);
    tfm_tensor *x = gc_random(2, (const int64_t[]){2, 4}, 6);
    tfm_tensor_set_requires_grad(x, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_softmax(tape, x, mask);
    const float seed[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ck_assert_int_eq(tfm_tape_backward_with_grad(tape, y, seed, 8), TFM_OK);
    const float *g = tfm_tensor_grad_f32(x);
    for (int i = 0; i < 8; i++)
        if (!keep[i])
            ck_assert_float_eq(g[i], 0.0f);
    ck_assert_float_ne(g[0], 0.0f);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(mask);
}
END_TEST

/* A row with nothing kept: the keep-mask and the additive mask of the same
 * positions give the same bits forward and backward, zeros on that row
 * and no gradient (not NaN) through it. */
START_TEST(forms_agree_on_a_row_with_nothing_kept)
{
    const int32_t keep[8] = {1, 0, 1, 1, 0, 0, 0, 0};
    float add[8];
    for (int i = 0; i < 8; i++)
        add[i] = keep[i] ? 0.0f : -INFINITY;
    tfm_tensor *masks[2] = {tfm_tensor_from_i32(2, (const int64_t[]){2, 4}, keep),
                            tfm_tensor_from_f32(2, (const int64_t[]){2, 4}, add)};
    float y[2][8], g[2][8];
    const float seed[8] = {1, -2, 3, 4, 5, 6, -7, 8};
    for (int f = 0; f < 2; f++) {
        tfm_tensor *x = gc_random(2, (const int64_t[]){2, 4}, 6);
        tfm_tensor_set_requires_grad(x, 1);
        tfm_tape *tape = tfm_tape_create();
        tfm_tensor *out = tfm_softmax(tape, x, masks[f]);
        ck_assert_int_eq(tfm_tensor_read_f32(out, y[f], 8), TFM_OK);
        ck_assert_int_eq(tfm_tape_backward_with_grad(tape, out, seed, 8), TFM_OK);
        memcpy(g[f], tfm_tensor_grad_f32(x), sizeof g[f]);
        tfm_tape_free(tape);
        tfm_tensor_free(x);
    }
    ck_assert_mem_eq(y[0], y[1], sizeof y[0]);
    ck_assert_mem_eq(g[0], g[1], sizeof g[0]);
    for (int j = 4; j < 8; j++) {
        ck_assert_float_eq(y[0][j], 0.0f);
        ck_assert_float_eq(g[0][j], 0.0f);
    }
    ck_assert_float_ne(g[0][0], 0.0f);
    tfm_tensor_free(masks[0]);
    tfm_tensor_free(masks[1]);
}
END_TEST

/* -inf entries and an all -inf row, with the mask constant. */
START_TEST(gradient_additive_mask)
{
    float add[T * S] = {0, -INFINITY, 0, 0, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                        0, 0, -INFINITY, 0};
    tfm_tensor *mask = tfm_tensor_from_f32(2, (const int64_t[]){T, S}, add);
    tfm_tensor *x = gc_random(4, (const int64_t[]){B, H, T, S}, 7);
    tfm_tensor_set_requires_grad(x, 1);
    ck_assert_gradcheck(build_softmax_ctx_mask, mask, &x, 1);
    tfm_tensor_free(x);
    tfm_tensor_free(mask);
}
END_TEST

/* A finite additive mask that requires grad gets the gradient summed over
 * the axes it is broadcast along. */
START_TEST(gradient_additive_mask_input)
{
    static const struct { int32_t nd; int64_t shape[4]; } masks[] = {
        {4, {B, H, T, S}}, {2, {T, S}}, {4, {B, 1, 1, S}}, {4, {1, H, T, 1}},
    };
    for (size_t c = 0; c < sizeof masks / sizeof masks[0]; c++) {
        tfm_tensor *in[2] = {gc_random(4, (const int64_t[]){B, H, T, S}, 8 + c),
                             gc_random(masks[c].nd, masks[c].shape, 20 + c)};
        tfm_tensor_set_requires_grad(in[0], 1);
        tfm_tensor_set_requires_grad(in[1], 1);
        ck_assert_gradcheck(build_softmax, NULL, in, 2);
        tfm_tensor_set_requires_grad(in[0], 0);
        ck_assert_gradcheck(build_softmax, NULL, in, 2);
        tfm_tensor_free(in[0]);
        tfm_tensor_free(in[1]);
    }
}
END_TEST

START_TEST(errors)
{
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){2, 4});
    tfm_tensor *xi = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){2, 4});
    tfm_tensor *bad = tfm_tensor_zeros(TFM_I32, 1, (const int64_t[]){3});
    tfm_tensor *wide = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){3, 2, 4});
    tfm_tensor *tall = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){2, 1});
    tfm_tape *tape = tfm_tape_create();

    tfm_clear_error();
    ck_assert_ptr_null(tfm_softmax(tape, NULL, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_softmax"));
    ck_assert_ptr_null(tfm_softmax(NULL, x, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tape"));
    ck_assert_ptr_null(tfm_softmax(tape, xi, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    ck_assert_ptr_null(tfm_softmax(tape, x, bad));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[3]"));
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[2,4]"));
    /* broadcasts with x, but to a bigger shape than x */
    ck_assert_ptr_null(tfm_softmax(tape, x, wide));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[3,2,4]"));
    ck_assert_ptr_nonnull(tfm_softmax(tape, x, tall)); /* [2,1] broadcasts */

    tfm_clear_error();
    ck_assert_ptr_null(tfm_log_softmax(tape, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_null(tfm_log_softmax(NULL, x));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_null(tfm_log_softmax(tape, xi));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_log_softmax"));

    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(xi);
    tfm_tensor_free(bad);
    tfm_tensor_free(wide);
    tfm_tensor_free(tall);
}
END_TEST

static Suite *softmax_suite(void)
{
    Suite *s = suite_create("ops_softmax");
    TCase *tc = tcase_create("softmax");
    tcase_add_test(tc, values_without_mask);
    tcase_add_test(tc, huge_values_stay_finite);
    tcase_add_test(tc, rows_of_every_length);
    tcase_add_test(tc, keep_mask_values);
    tcase_add_test(tc, additive_mask_values);
    tcase_add_test(tc, forms_agree_on_a_row_with_nothing_kept);
    tcase_add_test(tc, broadcast_masks);
    tcase_add_test(tc, gradient_without_mask);
    tcase_add_test(tc, gradient_keep_mask);
    tcase_add_test(tc, keep_mask_blocks_gradient);
    tcase_add_test(tc, gradient_additive_mask);
    tcase_add_test(tc, gradient_additive_mask_input);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(softmax_suite)
