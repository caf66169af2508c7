/* relu, gelu (exact erf form), silu, gelu's tanh form and tanh. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

enum { ACT_RELU, ACT_GELU, ACT_SILU, ACT_GELU_TANH, ACT_TANH };

static tfm_tensor *apply(int kind, tfm_tape *tape, const tfm_tensor *x)
{
    switch (kind) {
    case ACT_RELU: return tfm_relu(tape, x);
    case ACT_GELU: return tfm_gelu(tape, x);
    case ACT_SILU: return tfm_silu(tape, x);
    case ACT_GELU_TANH: return tfm_gelu_tanh(tape, x);
    default: return tfm_tanh(tape, x);
    }
}

static tfm_tensor *build_activation(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    return apply(*(int *)ctx, tape, in[0]);
}

/* Independent double-precision references: value and derivative. */
static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double gelu_tanh_u(double x) { return sqrt(2.0 / acos(-1.0)) * (x + 0.044715 * x * x * x); }

static double ref_value(int kind, double x)
{
    switch (kind) {
    case ACT_RELU: return x > 0.0 ? x : 0.0;
    case ACT_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case ACT_SILU: return x * sigmoid(x);
    case ACT_GELU_TANH: return 0.5 * x * (1.0 + tanh(gelu_tanh_u(x)));
    default: return tanh(x);
    }
}

static double ref_derivative(int kind, double x)
{
    switch (kind) {
    case ACT_RELU: return x > 0.0 ? 1.0 : 0.0;
    case ACT_GELU:
        return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * acos(-1.0));
    case ACT_SILU: return sigmoid(x) * (1.0 + x * (1.0 - sigmoid(x)));
    case ACT_GELU_TANH: {
        /* by differences of the double reference: an independent route */
        double h = 1e-5;
        return (ref_value(kind, x + h) - ref_value(kind, x - h)) / (2 * h);
    }
    default: return 1.0 - tanh(x) * tanh(x);
    }
}

static const float probe[] = {-6.0f, -3.0f, -1.5f, -1.0f, -0.4f, -1e-3f, 0.0f,
                              1e-3f, 0.25f, 0.7f, 1.0f,  2.0f,  3.5f,  8.0f};
enum { N_PROBE = sizeof probe / sizeof probe[0] };

START_TEST(values_match_double_references)
{
    tfm_tensor *x = tfm_tensor_from_f32(1, (const int64_t[]){N_PROBE}, probe);
    tfm_tape *tape = tfm_tape_create();
    for (int kind = ACT_RELU; kind <= ACT_TANH; kind++) {
        tfm_tensor *y = apply(kind, tape, x);
        ck_assert_ptr_nonnull(y);
        const float *yv = tfm_tensor_data_f32(y);
        for (int i = 0; i < N_PROBE; i++) {
            double want = ref_value(kind, probe[i]);
            ck_assert_msg(fabs(yv[i] - want) <= 1e-6 * (1.0 + fabs(want)),
                          "kind %d at %g: %.9g, want %.9g", kind, (double)probe[i],
                          (double)yv[i], want);
        }
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

/* torch.nn.functional.gelu(torch.tensor([1., -1.], dtype=torch.float64)) */
START_TEST(gelu_known_values)
{
    tfm_tensor *x = tfm_tensor_from_f32(1, (const int64_t[]){2}, (const float[]){1.0f, -1.0f});
    tfm_tape *tape = tfm_tape_create();
    const float *y = tfm_tensor_data_f32(tfm_gelu(tape, x));
    ck_assert_double_eq_tol(y[0], 0.8413447460685429, 1e-6);
    ck_assert_double_eq_tol(y[1], -0.15865525393145707, 1e-6);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

/* torch.nn.functional.silu and gelu(approximate="tanh") of [1, -1, 3] in
 * float64 (PyTorch 1.13). */
START_TEST(silu_and_gelu_tanh_known_values)
{
    static const double silu[3] = {0.7310585786300049, -0.2689414213699951, 2.8577223804672998};
    static const double gelu_tanh[3] = {0.8411919906082768, -0.15880800939172324,
                                        2.996362607918227};
    tfm_tensor *x = tfm_tensor_from_f32(1, (const int64_t[]){3}, (const float[]){1, -1, 3});
    tfm_tape *tape = tfm_tape_create();
    const float *s = tfm_tensor_data_f32(tfm_silu(tape, x));
    const float *g = tfm_tensor_data_f32(tfm_gelu_tanh(tape, x));
    for (int i = 0; i < 3; i++) {
        ck_assert_double_eq_tol(s[i], silu[i], 1e-6);
        ck_assert_double_eq_tol(g[i], gelu_tanh[i], 1e-6);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

/* Backward seeded with ones gives the derivative itself, checked much more
 * tightly than the finite-difference gradcheck can. */
START_TEST(derivatives_match_double_references)
{
    static const float ones[N_PROBE] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    for (int kind = ACT_RELU; kind <= ACT_TANH; kind++) {
        tfm_tensor *x = tfm_tensor_from_f32(1, (const int64_t[]){N_PROBE}, probe);
        tfm_tensor_set_requires_grad(x, 1);
        tfm_tape *tape = tfm_tape_create();
        tfm_tensor *y = apply(kind, tape, x);
        ck_assert_int_eq(tfm_tape_backward_with_grad(tape, y, ones, N_PROBE), TFM_OK);
        const float *g = tfm_tensor_grad_f32(x);
        for (int i = 0; i < N_PROBE; i++) {
            if (kind == ACT_RELU && probe[i] == 0.0f)
                continue; /* the kink: any subgradient will do */
            double want = ref_derivative(kind, probe[i]);
            ck_assert_msg(fabs(g[i] - want) <= 1e-6 * (1.0 + fabs(want)),
                          "kind %d at %g: %.9g, want %.9g", kind, (double)probe[i],
                          (double)g[i], want);
        }
        tfm_tape_free(tape);
        tfm_tensor_free(x);
    }
}
END_TEST

START_TEST(gradients)
{
    const int64_t shape[3] = {2, 3, 5};
    for (int kind = ACT_RELU; kind <= ACT_TANH; kind++) {
        tfm_tensor *x = gc_random(3, shape, 40 + kind);
        float *xv = tfm_tensor_data_f32(x);
        for (int64_t i = 0; i < tfm_tensor_numel(x); i++) {
            if (kind == ACT_RELU) /* keep the +-h stencil off the kink */
                xv[i] += xv[i] >= 0.0f ? 0.1f : -0.1f;
            else
                xv[i] *= 2.0f; /* reach into the tails */
        }
        tfm_tensor_set_requires_grad(x, 1);
        ck_assert_gradcheck(build_activation, &kind, &x, 1);
        tfm_tensor_free(x);
    }
}
END_TEST

START_TEST(shape_is_kept)
{
    const int64_t shape[4] = {2, 1, 3, 2};
    tfm_tensor *x = gc_random(4, shape, 3);
    tfm_tape *tape = tfm_tape_create();
    for (int kind = ACT_RELU; kind <= ACT_TANH; kind++) {
        int64_t got[TFM_MAX_DIMS];
        tfm_tensor *y = apply(kind, tape, x);
        ck_assert_int_eq(tfm_tensor_ndim(y), 4);
        ck_assert_int_eq(tfm_tensor_shape(y, got), TFM_OK);
        ck_assert_mem_eq(got, shape, sizeof shape);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
}
END_TEST

START_TEST(errors)
{
    static const char *const names[] = {"tfm_relu", "tfm_gelu", "tfm_silu", "tfm_gelu_tanh",
                                        "tfm_tanh"};
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){3});
    tfm_tensor *ids = tfm_tensor_zeros(TFM_I32, 1, (const int64_t[]){3});
    tfm_tape *tape = tfm_tape_create();
    for (int kind = ACT_RELU; kind <= ACT_TANH; kind++) {
        tfm_clear_error();
        ck_assert_ptr_null(apply(kind, tape, NULL));
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), names[kind]));
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "x is NULL"));

        ck_assert_ptr_null(apply(kind, NULL, x));
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tape is NULL"));

        ck_assert_ptr_null(apply(kind, tape, ids));
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "float32"));

        /* a NULL that came from a failed op keeps that op's error */
        ck_assert_ptr_null(apply(kind, tape, apply(kind, tape, ids)));
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(ids);
}
END_TEST

static Suite *activation_suite(void)
{
    Suite *s = suite_create("ops_activation");
    TCase *tc = tcase_create("activation");
    tcase_add_test(tc, values_match_double_references);
    tcase_add_test(tc, gelu_known_values);
    tcase_add_test(tc, silu_and_gelu_tanh_known_values);
    tcase_add_test(tc, derivatives_match_double_references);
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, shape_is_kept);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(activation_suite)
