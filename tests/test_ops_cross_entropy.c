/* cross_entropy: torch.nn.functional.cross_entropy(reduction='mean' and
 * 'sum') with ignore_index and label_smoothing, over the last axis. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

enum { IGNORE = -100 };

/* The loss, and (when grad is non-NULL) d loss / d logits, in double. */
static double ref_cross_entropy(const float *x, const int32_t *t, int rows, int classes,
                                int32_t ignore, double eps, double *grad)
{
    double total = 0.0;
    int count = 0;
    for (int r = 0; r < rows; r++)
        count += t[r] != ignore;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + r * classes;
        double max = xr[0], sum_exp = 0.0, smooth = 0.0;
        for (int c = 1; c < classes; c++)
            max = fmax(max, xr[c]);
        for (int c = 0; c < classes; c++)
            sum_exp += exp(xr[c] - max);
        double lse = max + log(sum_exp);
        for (int c = 0; c < classes; c++)
            smooth += (lse - xr[c]) / classes;
        if (t[r] != ignore)
            total += (1.0 - eps) * (lse - xr[t[r]]) + eps * smooth;
        for (int c = 0; grad && c < classes; c++)
            grad[r * classes + c] = t[r] == ignore ? 0.0 :
                (exp(xr[c] - lse) - (1.0 - eps) * (c == t[r]) - eps / classes) / count;
    }
    return count ? total / count : 0.0;
}

static float loss_of(tfm_tape *tape, const tfm_tensor *logits, const tfm_tensor *targets,
                     int32_t ignore, float eps)
{
    float v = NAN;
    tfm_tensor *loss = tfm_cross_entropy(tape, logits, targets, ignore, eps);
    ck_assert_msg(loss != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tensor_ndim(loss), 1);
    ck_assert_int_eq(tfm_tensor_dim(loss, 0), 1);
    ck_assert_int_eq(tfm_tensor_item(loss, &v), TFM_OK);
    return v;
}

/* F.cross_entropy(torch.tensor([[1., 2., 3.]]), torch.tensor([2])) and the
 * same with label_smoothing=0.1; shifting the logits by 1000 must not
 * overflow. */
START_TEST(pytorch_values)
{
    tfm_tensor *x = tfm_tensor_from_f32(2, (const int64_t[]){1, 3}, (const float[]){1, 2, 3});
    tfm_tensor *big = tfm_tensor_from_f32(2, (const int64_t[]){1, 3},
                                          (const float[]){1001, 1002, 1003});
    tfm_tensor *t = tfm_tensor_from_i32(1, (const int64_t[]){1}, (const int32_t[]){2});
    tfm_tape *tape = tfm_tape_create();
    ck_assert_double_eq_tol(loss_of(tape, x, t, IGNORE, 0.0f), 0.40760596, 1e-6);
    ck_assert_double_eq_tol(loss_of(tape, x, t, IGNORE, 0.1f), 0.50760596, 1e-6);
    ck_assert_double_eq_tol(loss_of(tape, big, t, IGNORE, 0.0f), 0.40760596, 1e-4);
    ck_assert_double_eq_tol(loss_of(tape, big, t, IGNORE, 0.1f), 0.50760596, 1e-4);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(big);
    tfm_tensor_free(t);
}
END_TEST

/* Loss and every gradient element against the double reference, for 2-D
 * and 3-D logits, with and without smoothing and ignored targets. */
START_TEST(values_and_gradient_match_reference)
{
    static const int32_t tv[6] = {3, IGNORE, 0, 6, 2, IGNORE};
    static const float eps[3] = {0.0f, 0.1f, 0.5f};
    static const struct { int32_t ndim; int64_t shape[3]; } cases[] = {
        {2, {6, 7}}, {3, {2, 3, 7}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int e = 0; e < 3; e++) {
            tfm_tensor *x = gc_random(cases[c].ndim, cases[c].shape, 60 + c);
            tfm_tensor *t = tfm_tensor_from_i32(cases[c].ndim - 1, cases[c].shape, tv);
            tfm_tensor_set_requires_grad(x, 1);
            const float *xv = tfm_tensor_data_f32(x);
            double want_grad[6 * 7];
            double want = ref_cross_entropy(xv, tv, 6, 7, IGNORE, eps[e], want_grad);
            tfm_tape *tape = tfm_tape_create();
            tfm_tensor *loss = tfm_cross_entropy(tape, x, t, IGNORE, eps[e]);
            float got;
            ck_assert_int_eq(tfm_tensor_item(loss, &got), TFM_OK);
            ck_assert_msg(fabs(got - want) <= 1e-6 * (1.0 + fabs(want)),
                          "case %zu eps %g: %.9g, want %.9g", c, (double)eps[e],
                          (double)got, want);
            ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
            const float *g = tfm_tensor_grad_f32(x);
            for (int i = 0; i < 6 * 7; i++)
                ck_assert_msg(fabs(g[i] - want_grad[i]) <= 1e-6,
                              "case %zu eps %g grad %d: %.9g, want %.9g", c,
                              (double)eps[e], i, (double)g[i], want_grad[i]);
            tfm_tape_free(tape);
            tfm_tensor_free(x);
            tfm_tensor_free(t);
        }
}
END_TEST

/* An ignored row changes neither the sum nor the count: the loss equals the
 * one over the other rows alone. Here ignore_index is a real class (0), as
 * a padding id would be. */
START_TEST(ignored_rows_are_not_counted)
{
    static const int32_t tv[4] = {0, 2, 0, 4};
    tfm_tensor *x = gc_random(2, (const int64_t[]){4, 5}, 8);
    const float *xv = tfm_tensor_data_f32(x);
    float kept[10];
    memcpy(kept, xv + 5, 5 * sizeof(float));
    memcpy(kept + 5, xv + 15, 5 * sizeof(float));
    tfm_tensor *xk = tfm_tensor_from_f32(2, (const int64_t[]){2, 5}, kept);
    tfm_tensor *t = tfm_tensor_from_i32(1, (const int64_t[]){4}, tv);
    tfm_tensor *tk = tfm_tensor_from_i32(1, (const int64_t[]){2}, (const int32_t[]){2, 4});
    tfm_tape *tape = tfm_tape_create();
    for (int e = 0; e < 2; e++) {
        float eps = e ? 0.3f : 0.0f;
        ck_assert_float_eq_tol(loss_of(tape, x, t, 0, eps), loss_of(tape, xk, tk, IGNORE, eps),
                               1e-6f);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(xk);
    tfm_tensor_free(t);
    tfm_tensor_free(tk);
}
END_TEST

/* Nothing counted: the loss is 0 (not 0/0) and backward gives zeros. */
START_TEST(all_rows_ignored)
{
    static const int32_t tv[3] = {IGNORE, IGNORE, IGNORE};
    tfm_tensor *x = gc_random(2, (const int64_t[]){3, 4}, 9);
    tfm_tensor *t = tfm_tensor_from_i32(1, (const int64_t[]){3}, tv);
    tfm_tensor_set_requires_grad(x, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *loss = tfm_cross_entropy(tape, x, t, IGNORE, 0.2f);
    float v;
    ck_assert_int_eq(tfm_tensor_item(loss, &v), TFM_OK);
    ck_assert_float_eq(v, 0.0f);
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
    const float *g = tfm_tensor_grad_f32(x);
    for (int i = 0; i < 12; i++)
        ck_assert_float_eq(g[i], 0.0f);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(t);
}
END_TEST

typedef struct ce_case {
    tfm_tensor *targets;
    int32_t ignore;
    float eps;
    tfm_reduction reduction;
} ce_case;

static tfm_tensor *build_cross_entropy(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    const ce_case *c = ctx;
    if (c->reduction == TFM_REDUCTION_MEAN)
        return tfm_cross_entropy(tape, in[0], c->targets, c->ignore, c->eps);
    int64_t counted = -1;
    tfm_tensor *loss = tfm_cross_entropy_reduced(tape, in[0], c->targets, c->ignore, c->eps,
                                                 c->reduction, &counted);
    ck_assert_int_gt(counted, 0);
    return loss;
}

START_TEST(gradients)
{
    static const int32_t plain[4] = {1, 4, 0, 2};
    static const int32_t with_ignored[6] = {3, IGNORE, 0, 1, IGNORE, 2};
    static const struct {
        int32_t ndim; int64_t shape[3]; const int32_t *targets; float eps;
    } cases[] = {
        {2, {4, 5}, plain, 0.0f},
        {2, {4, 5}, plain, 0.25f},
        {2, {6, 4}, with_ignored, 0.0f},
        {3, {2, 3, 4}, with_ignored, 0.1f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tfm_tensor *x = gc_random(cases[c].ndim, cases[c].shape, 70 + c);
        ce_case ctx = {tfm_tensor_from_i32(cases[c].ndim - 1, cases[c].shape, cases[c].targets),
                       IGNORE, cases[c].eps, TFM_REDUCTION_MEAN};
        tfm_tensor_set_requires_grad(x, 1);
        ck_assert_gradcheck(build_cross_entropy, &ctx, &x, 1);
        ctx.reduction = TFM_REDUCTION_SUM;
        ck_assert_gradcheck(build_cross_entropy, &ctx, &x, 1);
        tfm_tensor_free(ctx.targets);
        tfm_tensor_free(x);
    }
}
END_TEST

/* Batches of different sizes and padding: their sums and counts give the
 * exact mean over all of them, where averaging their means would weight
 * each batch alike; the sum's gradient is the mean's times the count. */
START_TEST(sums_and_counts_make_the_exact_mean)
{
    enum { C = 6 };
    static const int32_t targets[12] = {1, 4, IGNORE, 0, 2, 5, IGNORE, IGNORE, 3, 1, 0, 2};
    static const int64_t firsts[3] = {0, 2, 7}, rows[3] = {2, 5, 5};
    float x[12 * C];
    for (int i = 0; i < 12 * C; i++)
        x[i] = sinf(0.7f * (float)i) * 3.0f;
    tfm_tape *tape = tfm_tape_create();
    double sum = 0.0, mean_of_means = 0.0;
    int64_t total = 0;
    for (int b = 0; b < 3; b++) {
        tfm_tensor *logits = tfm_tensor_from_f32(2, (const int64_t[]){rows[b], C},
                                                 x + firsts[b] * C);
        tfm_tensor *t = tfm_tensor_from_i32(1, &rows[b], targets + firsts[b]);
        int64_t counted = -1, counted_mean = -1;
        float batch_sum, batch_mean;
        tfm_tensor_item(tfm_cross_entropy_reduced(tape, logits, t, IGNORE, 0.1f,
                                                  TFM_REDUCTION_SUM, &counted), &batch_sum);
        tfm_tensor_item(tfm_cross_entropy_reduced(tape, logits, t, IGNORE, 0.1f,
                                                  TFM_REDUCTION_MEAN, &counted_mean),
                        &batch_mean);
        ck_assert_int_eq(counted, counted_mean);
        ck_assert_float_eq_tol(batch_sum, batch_mean * (float)counted, 1e-5f * batch_sum);
        sum += batch_sum;
        total += counted;
        mean_of_means += batch_mean / 3.0;
        tfm_tensor_free(logits);
        tfm_tensor_free(t);
    }
    ck_assert_int_eq(total, 9);
    double exact = ref_cross_entropy(x, targets, 12, C, IGNORE, 0.1, NULL);
    ck_assert_double_eq_tol(sum / (double)total, exact, 1e-6 * exact);
    ck_assert(fabs(mean_of_means - exact) > 1e-3); /* what the means would have said */
    /* NULL counted is fine; a reduction that is neither is refused */
    tfm_tensor *logits = tfm_tensor_from_f32(2, (const int64_t[]){2, C}, x);
    tfm_tensor *t = tfm_tensor_from_i32(1, (const int64_t[]){2}, targets);
    ck_assert_ptr_nonnull(tfm_cross_entropy_reduced(tape, logits, t, IGNORE, 0.0f,
                                                    TFM_REDUCTION_SUM, NULL));
    ck_assert_ptr_null(tfm_cross_entropy_reduced(tape, logits, t, IGNORE, 0.0f, 2, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_cross_entropy_reduced: reduction 2"));
    tfm_tensor_free(logits);
    tfm_tensor_free(t);
    tfm_tape_free(tape);
}
END_TEST

/* Backward uses the targets as they were at forward time. */
START_TEST(backward_uses_forward_targets)
{
    tfm_tensor *x = gc_random(2, (const int64_t[]){2, 3}, 12);
    tfm_tensor *t = tfm_tensor_from_i32(1, (const int64_t[]){2}, (const int32_t[]){2, 0});
    tfm_tensor_set_requires_grad(x, 1);
    double want_grad[6];
    ref_cross_entropy(tfm_tensor_data_f32(x), (const int32_t[]){2, 0}, 2, 3, IGNORE, 0.0,
                      want_grad);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *loss = tfm_cross_entropy(tape, x, t, IGNORE, 0.0f);
    tfm_tensor_data_i32(t)[0] = 999;
    tfm_tensor_data_i32(t)[1] = IGNORE;
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
    const float *g = tfm_tensor_grad_f32(x);
    for (int i = 0; i < 6; i++)
        ck_assert_double_eq_tol(g[i], want_grad[i], 1e-6);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(t);
}
END_TEST

START_TEST(bad_targets_and_smoothing)
{
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){2, 2, 5});
    tfm_tape *tape = tfm_tape_create();
    static const struct { int32_t bad; const char *where; } cases[] = {
        {5, "targets[1,0] = 5 is outside [0, 5)"},
        {-1, "targets[1,0] = -1 is outside [0, 5)"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int32_t tv[4] = {0, IGNORE, cases[c].bad, 4};
        tfm_tensor *t = tfm_tensor_from_i32(2, (const int64_t[]){2, 2}, tv);
        ck_assert_ptr_null(tfm_cross_entropy(tape, x, t, IGNORE, 0.0f));
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_RANGE);
        ck_assert_msg(strstr(tfm_last_error(), cases[c].where) != NULL, "%s", tfm_last_error());
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "ignore_index -100"));
        tfm_tensor_free(t);
    }
    tfm_tensor *t = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){2, 2});
    static const float bad_eps[3] = {-0.1f, 1.0f, NAN};
    for (int e = 0; e < 3; e++) {
        ck_assert_ptr_null(tfm_cross_entropy(tape, x, t, IGNORE, bad_eps[e]));
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "label_smoothing"));
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[0, 1)"));
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(t);
}
END_TEST

START_TEST(errors)
{
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){3, 4});
    tfm_tensor *x1 = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){4});
    tfm_tensor *ix = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){3, 4});
    tfm_tensor *t = tfm_tensor_zeros(TFM_I32, 1, (const int64_t[]){3});
    tfm_tensor *t_short = tfm_tensor_zeros(TFM_I32, 1, (const int64_t[]){2});
    tfm_tensor *t_2d = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){3, 4});
    tfm_tensor *ft = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){3});
    tfm_tape *tape = tfm_tape_create();

    tfm_clear_error();
    ck_assert_ptr_null(tfm_cross_entropy(tape, NULL, t, IGNORE, 0.0f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_cross_entropy: logits is NULL"));
    tfm_clear_error();
    ck_assert_ptr_null(tfm_cross_entropy(tape, x, NULL, IGNORE, 0.0f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "targets is NULL"));
    ck_assert_ptr_null(tfm_cross_entropy(NULL, x, t, IGNORE, 0.0f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tape is NULL"));

    ck_assert_ptr_null(tfm_cross_entropy(tape, ix, t, IGNORE, 0.0f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "logits must be float32"));
    ck_assert_ptr_null(tfm_cross_entropy(tape, x, ft, IGNORE, 0.0f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "targets must be int32"));

    ck_assert_ptr_null(tfm_cross_entropy(tape, x, t_short, IGNORE, 0.0f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "logits [3,4] and targets [2]"));
    ck_assert_ptr_null(tfm_cross_entropy(tape, x, t_2d, IGNORE, 0.0f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "targets [3,4]"));
    /* no row axis: a single row is [1, C] */
    ck_assert_ptr_null(tfm_cross_entropy(tape, x1, t, IGNORE, 0.0f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "logits [4]"));

    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(x1);
    tfm_tensor_free(ix);
    tfm_tensor_free(t);
    tfm_tensor_free(t_short);
    tfm_tensor_free(t_2d);
    tfm_tensor_free(ft);
}
END_TEST

static Suite *cross_entropy_suite(void)
{
    Suite *s = suite_create("ops_cross_entropy");
    TCase *tc = tcase_create("cross_entropy");
    tcase_add_test(tc, pytorch_values);
    tcase_add_test(tc, values_and_gradient_match_reference);
    tcase_add_test(tc, ignored_rows_are_not_counted);
    tcase_add_test(tc, all_rows_ignored);
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, sums_and_counts_make_the_exact_mean);
    tcase_add_test(tc, backward_uses_forward_targets);
    tcase_add_test(tc, bad_targets_and_smoothing);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(cross_entropy_suite)
