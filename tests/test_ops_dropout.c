/* dropout: drop rate, exact scaling, eval identity, reproducible masks,
 * gradients through the regenerated mask, argument errors. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

/* Every value is either dropped (0) or x * 1/(1-p) exactly; the share
 * dropped is p within 7 standard deviations. */
START_TEST(drop_rate_and_scaling)
{
    const float rates[3] = {0.1f, 0.3f, 0.75f};
    const int64_t n = 200000;
    tfm_tensor *x = gc_random(2, (const int64_t[]){400, 500}, 1);
    const float *xv = tfm_tensor_data_f32(x);
    tfm_rng *rng = tfm_rng_create(2);
    tfm_tape *tape = tfm_tape_create();
    for (int k = 0; k < 3; k++) {
        float p = rates[k], scale = 1.0f / (1.0f - p);
        tfm_tensor *y = tfm_dropout(tape, x, p, 1, rng);
        ck_assert_ptr_nonnull(y);
        ck_assert_int_eq(tfm_tensor_dim(y, 0), 400);
        ck_assert_int_eq(tfm_tensor_dim(y, 1), 500);
        const float *yv = tfm_tensor_data_f32(y);
        int64_t dropped = 0;
        for (int64_t i = 0; i < n; i++) {
            if (yv[i] == 0.0f)
                dropped++;
            else
                ck_assert_float_eq(yv[i], xv[i] * scale);
        }
        double share = (double)dropped / (double)n;
        double sigma = sqrt(p * (1.0 - p) / (double)n);
        ck_assert_msg(fabs(share - p) < 7.0 * sigma, "p %g: dropped %g", (double)p, share);
    }
    tfm_tape_free(tape);
    tfm_rng_free(rng);
    tfm_tensor_free(x);
}
END_TEST

/* training == 0, and p == 0 in training, return x unchanged and need no rng. */
START_TEST(identity_modes)
{
    tfm_tensor *x = gc_random(2, (const int64_t[]){3, 5}, 3);
    const float *xv = tfm_tensor_data_f32(x);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *ys[2] = {tfm_dropout(tape, x, 0.5f, 0, NULL), tfm_dropout(tape, x, 0.0f, 1, NULL)};
    for (int k = 0; k < 2; k++) {
        ck_assert_ptr_nonnull(ys[k]);
        ck_assert_int_eq(tfm_tensor_ndim(ys[k]), 2);
        ck_assert_int_eq(tfm_tensor_dim(ys[k], 1), 5);
        const float *yv = tfm_tensor_data_f32(ys[k]);
        for (int i = 0; i < 15; i++)
            ck_assert_float_eq(yv[i], xv[i]);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

static void dropout_values(tfm_tensor *x, tfm_rng *rng, int calls, float *dst)
{
    tfm_tape *tape = tfm_tape_create();
    int64_t n = tfm_tensor_numel(x);
    for (int c = 0; c < calls; c++)
        tfm_tensor_read_f32(tfm_dropout(tape, x, 0.5f, 1, rng), dst + c * n, n);
    tfm_tape_free(tape);
}

START_TEST(masks_follow_the_seed)
{
    enum { N = 256 };
    tfm_tensor *x = tfm_tensor_ones(1, (const int64_t[]){N});
    float a[2 * N], b[2 * N], c[N];
    tfm_rng *r1 = tfm_rng_create(7), *r2 = tfm_rng_create(7), *r3 = tfm_rng_create(8);
    dropout_values(x, r1, 2, a);
    dropout_values(x, r2, 2, b);
    dropout_values(x, r3, 1, c);
    ck_assert_mem_eq(a, b, sizeof a);                  /* same seed, same masks */
    ck_assert_int_ne(memcmp(a, a + N, N * sizeof *a), 0); /* next call, new mask */
    ck_assert_int_ne(memcmp(a, c, N * sizeof *a), 0);     /* other seed, new mask */
    tfm_rng_free(r1);
    tfm_rng_free(r2);
    tfm_rng_free(r3);
    tfm_tensor_free(x);
}
END_TEST

typedef struct dropout_ctx {
    float p;
    int32_t training;
    uint64_t seed;
} dropout_ctx;

/* A fresh rng from the same seed per call: every evaluation sees one mask. */
static tfm_tensor *build_dropout(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    const dropout_ctx *c = ctx;
    tfm_rng *rng = tfm_rng_create(c->seed);
    tfm_tensor *y = tfm_dropout(tape, in[0], c->p, c->training, rng);
    tfm_rng_free(rng);
    return y;
}

START_TEST(gradients)
{
    const dropout_ctx cases[3] = {{0.4f, 1, 11}, {0.4f, 0, 11}, {0.0f, 1, 11}};
    for (int k = 0; k < 3; k++) {
        tfm_tensor *x = gc_random(3, (const int64_t[]){2, 3, 8}, 5 + k);
        tfm_tensor_set_requires_grad(x, 1);
        ck_assert_gradcheck(build_dropout, (void *)&cases[k], &x, 1);
        tfm_tensor_free(x);
    }
}
END_TEST

/* The regenerated mask in backward is the forward's: the gradient is the
 * scale exactly where a value was kept and 0 where it was dropped. */
START_TEST(backward_zeroes_dropped)
{
    enum { N = 1000 };
    tfm_tensor *x = tfm_tensor_ones(1, (const int64_t[]){N});
    tfm_tensor_set_requires_grad(x, 1);
    tfm_rng *rng = tfm_rng_create(9);
    tfm_tape *tape = tfm_tape_create();
    float p = 0.25f, scale = 1.0f / (1.0f - p);
    tfm_tensor *y = tfm_dropout(tape, x, p, 1, rng);
    float seed[N];
    for (int i = 0; i < N; i++)
        seed[i] = (float)(i % 7) - 3.0f;
    ck_assert_int_eq(tfm_tape_backward_with_grad(tape, y, seed, N), TFM_OK);
    const float *yv = tfm_tensor_data_f32(y), *g = tfm_tensor_grad_f32(x);
    int dropped = 0;
    for (int i = 0; i < N; i++) {
        dropped += yv[i] == 0.0f;
        ck_assert_float_eq(g[i], yv[i] == 0.0f ? 0.0f : seed[i] * scale);
    }
    ck_assert_int_gt(dropped, 0);
    tfm_tape_free(tape);
    tfm_rng_free(rng);
    tfm_tensor_free(x);
}
END_TEST

START_TEST(errors)
{
    tfm_tensor *x = tfm_tensor_ones(2, (const int64_t[]){2, 4});
    tfm_tensor *xi = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){2, 4});
    tfm_rng *rng = tfm_rng_create(1);
    tfm_tape *tape = tfm_tape_create();

    tfm_clear_error();
    ck_assert_ptr_null(tfm_dropout(tape, NULL, 0.1f, 1, rng));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_dropout"));
    ck_assert_ptr_null(tfm_dropout(NULL, x, 0.1f, 1, rng));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tape"));
    ck_assert_ptr_null(tfm_dropout(tape, xi, 0.1f, 1, rng));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    ck_assert_ptr_null(tfm_dropout(tape, x, 0.1f, 1, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "rng"));

    const float bad_p[4] = {-0.1f, 1.0f, 1.5f, NAN};
    for (int i = 0; i < 4; i++)
        for (int32_t training = 0; training <= 1; training++) {
            ck_assert_ptr_null(tfm_dropout(tape, x, bad_p[i], training, rng));
            ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
            ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[0, 1)"));
        }

    tfm_tape_free(tape);
    tfm_rng_free(rng);
    tfm_tensor_free(x);
    tfm_tensor_free(xi);
}
END_TEST

static Suite *dropout_suite(void)
{
    Suite *s = suite_create("ops_dropout");
    TCase *tc = tcase_create("dropout");
    tcase_add_test(tc, drop_rate_and_scaling);
    tcase_add_test(tc, identity_modes);
    tcase_add_test(tc, masks_follow_the_seed);
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, backward_zeroes_dropped);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(dropout_suite)
