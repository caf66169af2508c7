/* The gradient checker itself must catch a wrong sign and a missing term,
 * or every gradient test built on it proves nothing. */
#include <check.h>

#include "check_main.h"
#include "gradcheck.h"

/* d/dx of sum R * (x*x + 3x) is R * (2x + 3); the broken variants below are
 * what a sign slip or a forgotten term in a backward would produce. */
static void derivatives(double *right, double *sign_flipped, double *missing_term,
                        double *numeric, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double x = -1.0 + 0.37 * (double)i, r = 0.5 + 0.1 * (double)i;
        right[i] = r * (2 * x + 3);
        sign_flipped[i] = i == 4 ? -right[i] : right[i];
        missing_term[i] = r * 2 * x;
        numeric[i] = right[i] * (1.0 + 1e-4); /* finite differences are not exact */
    }
}

START_TEST(compare_catches_broken_gradients)
{
    double right[8], flipped[8], missing[8], numeric[8];
    size_t worst;
    derivatives(right, flipped, missing, numeric, 8);
    gc_options o = gc_default_options();
    ck_assert(gc_compare(right, numeric, 8, o, &worst));
    ck_assert(!gc_compare(flipped, numeric, 8, o, &worst));
    ck_assert_uint_eq(worst, 4);
    ck_assert(!gc_compare(missing, numeric, 8, o, &worst));
    const double nan_grad[1] = {0.0 / 0.0}, zero[1] = {0};
    ck_assert(!gc_compare(nan_grad, zero, 1, o, &worst));
}
END_TEST

/* End to end: a composite whose backward is right passes; asking the checker
 * about the wrong function (x*x*x against a build of x*x) fails. */
static tfm_tensor *square(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    (void)ctx;
    return tfm_mul(tape, in[0], in[0]);
}

static tfm_tensor *square_but_cube_when_recording(tfm_tape *tape, tfm_tensor *const *in,
                                                  void *ctx)
{
    (void)ctx;
    tfm_tensor *sq = tfm_mul(tape, in[0], in[0]);
    return tfm_tape_is_recording(tape) ? tfm_mul(tape, sq, in[0]) : sq;
}

START_TEST(gradcheck_end_to_end)
{
    tfm_tensor *x = gc_random(2, (const int64_t[]){3, 4}, 5);
    tfm_tensor_set_requires_grad(x, 1);
    ck_assert_gradcheck(square, NULL, &x, 1);
    char report[256];
    ck_assert(!gradcheck(square_but_cube_when_recording, NULL, &x, 1,
                         gc_default_options(), report, sizeof report));
    tfm_tensor_free(x);
}
END_TEST

static Suite *gradcheck_suite(void)
{
    Suite *s = suite_create("gradcheck");
    TCase *tc = tcase_create("gradcheck");
    tcase_add_test(tc, compare_catches_broken_gradients);
    tcase_add_test(tc, gradcheck_end_to_end);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(gradcheck_suite)
