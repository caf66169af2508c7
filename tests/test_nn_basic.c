/* The basic layers (linear, embedding, layer norm, dropout, feed-forward),
 * what all layers share (kind, training mode, wrong-kind checks, names) and
 * the tensor initialisers. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

#define ck_assert_error(status, text)                                          \
    do {                                                                       \
        ck_assert_int_eq(tfm_last_status(), (status));                         \
        ck_assert_msg(strstr(tfm_last_error(), (text)) != NULL,                \
                      "\"%s\" not in \"%s\"", (text), tfm_last_error());       \
        tfm_clear_error();                                                     \
    } while (0)

static void check_shape(const tfm_tensor *t, int32_t ndim, const int64_t *expected)
{
    int64_t shape[4];
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(tfm_tensor_ndim(t), ndim);
    ck_assert_int_eq(tfm_tensor_shape(t, shape), TFM_OK);
    for (int32_t i = 0; i < ndim; i++)
        ck_assert_int_eq(shape[i], expected[i]);
}

/* Every value in [-bound, bound], and the extremes close to it (so a smaller
 * bound fails too), mean near 0. */
static void check_uniform(const float *v, int64_t n, double bound)
{
    double max = 0.0, sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        ck_assert_msg(fabs(v[i]) <= bound, "value %g outside +-%g", (double)v[i], bound);
        if (fabs(v[i]) > max)
            max = fabs(v[i]);
        sum += v[i];
    }
    ck_assert_msg(max > 0.9 * bound, "largest |value| %g for bound %g", max, bound);
    ck_assert_double_lt(fabs(sum / (double)n), 0.15 * bound);
}

static void check_standard_normal(const float *v, int64_t n)
{
    double sum = 0.0, sq = 0.0;
    for (int64_t i = 0; i < n; i++) {
        sum += v[i];
        sq += (double)v[i] * v[i];
    }
    double mean = sum / (double)n, std = sqrt(sq / (double)n - mean * mean);
    ck_assert_double_lt(fabs(mean), 0.05);
    ck_assert_double_lt(fabs(std - 1.0), 0.05);
}

/* y[n, o] = sum_i x[n, i] W[o, i] + b[o], in double. */
static void reference_linear(const float *x, const float *w, const float *b, int64_t rows,
                             int64_t in, int64_t out, double *y)
{
    for (int64_t n = 0; n < rows; n++)
        for (int64_t o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int64_t i = 0; i < in; i++)
                acc += (double)x[n * in + i] * w[o * in + i];
            y[n * out + o] = acc;
        }
}

/* --- linear ------------------------------------------------------------------ */

START_TEST(linear_parameters)
{
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(1);
    tfm_layer *lin = tfm_linear_create(params, "enc.proj", 25, 64, 1, rng);
    ck_assert_ptr_nonnull(lin);
    ck_assert_str_eq(tfm_layer_kind(lin), "linear");
    ck_assert_int_eq(tfm_params_count(params), 2);
    ck_assert_str_eq(tfm_params_name(params, 0), "enc.proj.weight");
    ck_assert_str_eq(tfm_params_name(params, 1), "enc.proj.bias");
    tfm_tensor *w = tfm_params_find(params, "enc.proj.weight");
    tfm_tensor *b = tfm_params_find(params, "enc.proj.bias");
    check_shape(w, 2, (const int64_t[]){64, 25});
    check_shape(b, 1, (const int64_t[]){64});
    ck_assert_int_eq(tfm_tensor_requires_grad(w), 1);
    check_uniform(tfm_tensor_data_f32(w), 64 * 25, 1.0 / 5.0);
    check_uniform(tfm_tensor_data_f32(b), 64, 1.0 / 5.0);

    tfm_layer *nob = tfm_linear_create(params, "head", 9, 300, 0, rng);
    ck_assert_ptr_nonnull(nob);
    ck_assert_int_eq(tfm_params_count(params), 3);
    ck_assert_ptr_null(tfm_params_find(params, "head.bias"));
    check_uniform(tfm_tensor_data_f32(tfm_params_find(params, "head.weight")), 300 * 9,
                  1.0 / 3.0);
    /* an empty prefix gives the bare names */
    tfm_layer *bare = tfm_linear_create(params, "", 2, 2, 1, rng);
    ck_assert_ptr_nonnull(tfm_params_find(params, "weight"));
    ck_assert_ptr_nonnull(tfm_params_find(params, "bias"));
    tfm_layer_free(bare);
    tfm_layer_free(nob);
    tfm_layer_free(lin);
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

START_TEST(linear_forward_values)
{
    enum { IN = 5, OUT = 3 };
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(2);
    tfm_layer *lin = tfm_linear_create(params, "l", IN, OUT, 1, rng);
    tfm_layer *nob = tfm_linear_create(params, "n", IN, OUT, 0, rng);
    const float *w = tfm_tensor_data_f32(tfm_params_find(params, "l.weight"));
    const float *b = tfm_tensor_data_f32(tfm_params_find(params, "l.bias"));
    const float *wn = tfm_tensor_data_f32(tfm_params_find(params, "n.weight"));
    tfm_tensor *x3 = gc_random(3, (const int64_t[]){2, 4, IN}, 3);
    tfm_tensor *x2 = gc_random(2, (const int64_t[]){6, IN}, 4);
    tfm_tape *tape = tfm_tape_create();
    double ref[8 * OUT];

    tfm_tensor *y = tfm_linear_forward(tape, lin, x3);
    check_shape(y, 3, (const int64_t[]){2, 4, OUT});
    reference_linear(tfm_tensor_data_f32(x3), w, b, 8, IN, OUT, ref);
    for (int i = 0; i < 8 * OUT; i++)
        ck_assert_double_eq_tol(tfm_tensor_data_f32(y)[i], ref[i], 1e-5);

    y = tfm_linear_forward(tape, lin, x2);
    check_shape(y, 2, (const int64_t[]){6, OUT});
    reference_linear(tfm_tensor_data_f32(x2), w, b, 6, IN, OUT, ref);
    for (int i = 0; i < 6 * OUT; i++)
        ck_assert_double_eq_tol(tfm_tensor_data_f32(y)[i], ref[i], 1e-5);

    y = tfm_linear_forward(tape, nob, x3);
    check_shape(y, 3, (const int64_t[]){2, 4, OUT});
    reference_linear(tfm_tensor_data_f32(x3), wn, NULL, 8, IN, OUT, ref);
    for (int i = 0; i < 8 * OUT; i++)
        ck_assert_double_eq_tol(tfm_tensor_data_f32(y)[i], ref[i], 1e-5);

    tfm_tape_free(tape);
    tfm_tensor_free(x3);
    tfm_tensor_free(x2);
    tfm_layer_free(lin);
    tfm_layer_free(nob);
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

static tfm_tensor *build_linear(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    return tfm_linear_forward(tape, ctx, in[0]);
}

START_TEST(linear_gradients)
{
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(5);
    tfm_layer *lin = tfm_linear_create(params, "l", 4, 3, 1, rng);
    tfm_layer *nob = tfm_linear_create(params, "n", 4, 3, 0, rng);
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 3, 4}, 6);
    tfm_tensor_set_requires_grad(x, 1);
    tfm_tensor *in[3] = {x, tfm_params_find(params, "l.weight"),
                         tfm_params_find(params, "l.bias")};
    ck_assert_gradcheck(build_linear, lin, in, 3);
    tfm_tensor *in_nob[2] = {x, tfm_params_find(params, "n.weight")};
    ck_assert_gradcheck(build_linear, nob, in_nob, 2);
    tfm_tensor_free(x);
    tfm_layer_free(lin);
    tfm_layer_free(nob);
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

START_TEST(linear_errors)
{
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(7);
    tfm_clear_error();
    ck_assert_ptr_null(tfm_linear_create(NULL, "l", 2, 2, 1, rng));
    ck_assert_error(TFM_ERR_NULL, "tfm_linear_create: params is NULL");
    ck_assert_ptr_null(tfm_linear_create(params, NULL, 2, 2, 1, rng));
    ck_assert_error(TFM_ERR_NULL, "tfm_linear_create: name is NULL");
    ck_assert_ptr_null(tfm_linear_create(params, "l", 2, 2, 1, NULL));
    ck_assert_error(TFM_ERR_NULL, "tfm_linear_create: rng is NULL");
    ck_assert_ptr_null(tfm_linear_create(params, "l", 0, 2, 1, rng));
    ck_assert_error(TFM_ERR_SHAPE, "not positive");
    ck_assert_ptr_null(tfm_linear_create(params, "l", 2, -1, 1, rng));
    ck_assert_error(TFM_ERR_SHAPE, "not positive");
    char name[260];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    ck_assert_ptr_null(tfm_linear_create(params, name, 2, 2, 1, rng));
    ck_assert_error(TFM_ERR_ARG, "too long");
    ck_assert_int_eq(tfm_params_count(params), 0);

    tfm_layer *lin = tfm_linear_create(params, "l", 4, 3, 1, rng);
    ck_assert_ptr_null(tfm_linear_create(params, "l", 4, 3, 1, rng));
    ck_assert_error(TFM_ERR_ARG, "\"l.weight\" exists already");
    /* a bias that cannot be added: the layer is freed (valgrind checks) */
    ck_assert_ptr_nonnull(tfm_params_add(params, "m.bias", 1, (const int64_t[]){3}));
    ck_assert_ptr_null(tfm_linear_create(params, "m", 4, 3, 1, rng));
    ck_assert_error(TFM_ERR_ARG, "\"m.bias\" exists already");

    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){2, 5});
    ck_assert_ptr_null(tfm_linear_forward(tape, lin, x));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    tfm_clear_error();
    ck_assert_ptr_null(tfm_linear_forward(tape, NULL, x));
    ck_assert_error(TFM_ERR_NULL, "tfm_linear_forward: layer is NULL");
    ck_assert_ptr_null(tfm_linear_forward(tape, lin, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    tfm_clear_error();
    ck_assert_ptr_null(tfm_linear_forward(NULL, lin, x));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    tfm_clear_error();
    tfm_tensor_free(x);
    tfm_tape_free(tape);
    tfm_layer_free(lin);
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

/* --- embedding ----------------------------------------------------------------- */

START_TEST(embedding_layer)
{
    enum { V = 100, D = 40 };
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(8);
    tfm_layer *emb = tfm_embedding_create(params, "src_embed", V, D, rng);
    ck_assert_ptr_nonnull(emb);
    ck_assert_str_eq(tfm_layer_kind(emb), "embedding");
    ck_assert_int_eq(tfm_params_count(params), 1);
    tfm_tensor *w = tfm_params_find(params, "src_embed.weight");
    check_shape(w, 2, (const int64_t[]){V, D});
    const float *wv = tfm_tensor_data_f32(w);
    check_standard_normal(wv, V * D);

    const int32_t ids[6] = {0, 99, 5, 5, 42, 1};
    tfm_tensor *t = tfm_tensor_from_i32(2, (const int64_t[]){2, 3}, ids);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_embedding_forward(tape, emb, t);
    check_shape(y, 3, (const int64_t[]){2, 3, D});
    for (int i = 0; i < 6; i++)
        ck_assert_mem_eq(tfm_tensor_data_f32(y) + i * D, wv + ids[i] * D, D * sizeof(float));
    /* the rows used get the gradient: 5 twice */
    ck_assert_int_eq(tfm_tape_backward(tape, tfm_sum(tape, y)), TFM_OK);
    const float *g = tfm_tensor_grad_f32(w);
    ck_assert_float_eq(g[5 * D], 2.0f);
    ck_assert_float_eq(g[99 * D + D - 1], 1.0f);
    ck_assert_float_eq(g[2 * D], 0.0f);
    tfm_tape_reset(tape);

    const int32_t bad[2] = {3, 100};
    tfm_tensor *tb = tfm_tensor_from_i32(1, (const int64_t[]){2}, bad);
    ck_assert_ptr_null(tfm_embedding_forward(tape, emb, tb));
    ck_assert_error(TFM_ERR_RANGE, "100");
    ck_assert_ptr_null(tfm_embedding_create(params, "e", 10, 4, NULL));
    ck_assert_error(TFM_ERR_NULL, "tfm_embedding_create: rng is NULL");
    ck_assert_ptr_null(tfm_embedding_create(NULL, "e", 10, 4, rng));
    ck_assert_error(TFM_ERR_NULL, "tfm_embedding_create: params is NULL");
    ck_assert_ptr_null(tfm_embedding_create(params, "src_embed", 10, 4, rng));
    ck_assert_error(TFM_ERR_ARG, "exists already");
    ck_assert_ptr_null(tfm_embedding_create(params, "e", 0, 4, rng));
    ck_assert_error(TFM_ERR_SHAPE, "not positive");

    tfm_tensor_free(tb);
    tfm_tensor_free(t);
    tfm_tape_free(tape);
    tfm_layer_free(emb);
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

/* --- layer norm ---------------------------------------------------------------- */

START_TEST(layer_norm_layer)
{
    enum { N = 6, D = 7 };
    const float eps = 1e-5f;
    tfm_params *params = tfm_params_create();
    tfm_layer *norm = tfm_layer_norm_create(params, "enc.norm1", D, eps);
    ck_assert_ptr_nonnull(norm);
    ck_assert_str_eq(tfm_layer_kind(norm), "layer_norm");
    ck_assert_int_eq(tfm_params_count(params), 2);
    tfm_tensor *w = tfm_params_find(params, "enc.norm1.weight");
    tfm_tensor *b = tfm_params_find(params, "enc.norm1.bias");
    check_shape(w, 1, (const int64_t[]){D});
    check_shape(b, 1, (const int64_t[]){D});
    for (int i = 0; i < D; i++) {
        ck_assert_float_eq(tfm_tensor_data_f32(w)[i], 1.0f);
        ck_assert_float_eq(tfm_tensor_data_f32(b)[i], 0.0f);
    }
    /* with trained-looking weights, against the double formula */
    tfm_rng *rng = tfm_rng_create(9);
    ck_assert_int_eq(tfm_init_normal(w, 1.0f, 0.5f, rng), TFM_OK);
    ck_assert_int_eq(tfm_init_normal(b, 0.0f, 0.5f, rng), TFM_OK);
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 3, D}, 10);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_layer_norm_forward(tape, norm, x);
    check_shape(y, 3, (const int64_t[]){2, 3, D});
    const float *xv = tfm_tensor_data_f32(x), *yv = tfm_tensor_data_f32(y);
    const float *wv = tfm_tensor_data_f32(w), *bv = tfm_tensor_data_f32(b);
    for (int r = 0; r < N; r++) {
        double mean = 0.0, var = 0.0;
        for (int j = 0; j < D; j++)
            mean += xv[r * D + j];
        mean /= D;
        for (int j = 0; j < D; j++)
            var += (xv[r * D + j] - mean) * (xv[r * D + j] - mean);
        var /= D;
        for (int j = 0; j < D; j++)
            ck_assert_double_eq_tol(yv[r * D + j],
                                    (xv[r * D + j] - mean) / sqrt(var + eps) * wv[j] + bv[j],
                                    1e-5);
    }
    tfm_tape_free(tape);

    ck_assert_ptr_null(tfm_layer_norm_create(params, "n2", D, -1.0f));
    ck_assert_error(TFM_ERR_ARG, "eps -1");
    ck_assert_ptr_null(tfm_layer_norm_create(params, "n2", D, NAN));
    ck_assert_error(TFM_ERR_ARG, "tfm_layer_norm_create: eps");
    ck_assert_ptr_null(tfm_layer_norm_create(params, "n2", D, INFINITY));
    ck_assert_error(TFM_ERR_ARG, "tfm_layer_norm_create: eps");
    ck_assert_ptr_null(tfm_layer_norm_create(NULL, "n2", D, eps));
    ck_assert_error(TFM_ERR_NULL, "params is NULL");
    ck_assert_ptr_null(tfm_layer_norm_create(params, NULL, D, eps));
    ck_assert_error(TFM_ERR_NULL, "name is NULL");
    ck_assert_ptr_null(tfm_layer_norm_create(params, "enc.norm1", D, eps));
    ck_assert_error(TFM_ERR_ARG, "exists already");
    ck_assert_ptr_null(tfm_layer_norm_create(params, "n3", 0, eps));
    ck_assert_error(TFM_ERR_SHAPE, "not positive");
    ck_assert_int_eq(tfm_params_count(params), 2);

    tfm_tensor_free(x);
    tfm_rng_free(rng);
    tfm_layer_free(norm);
    tfm_params_free(params);
}
END_TEST

static tfm_tensor *build_layer_norm(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    return tfm_layer_norm_forward(tape, ctx, in[0]);
}

START_TEST(layer_norm_gradients)
{
    tfm_params *params = tfm_params_create();
    tfm_layer *norm = tfm_layer_norm_create(params, "n", 5, 1e-5f);
    tfm_rng *rng = tfm_rng_create(11);
    tfm_tensor *in[3] = {gc_random(2, (const int64_t[]){3, 5}, 12),
                         tfm_params_find(params, "n.weight"), tfm_params_find(params, "n.bias")};
    tfm_init_normal(in[1], 1.0f, 0.3f, rng);
    tfm_tensor_set_requires_grad(in[0], 1);
    ck_assert_gradcheck(build_layer_norm, norm, in, 3);
    tfm_tensor_free(in[0]);
    tfm_rng_free(rng);
    tfm_layer_free(norm);
    tfm_params_free(params);
}
END_TEST

/* --- dropout ---------------------------------------------------------------- */

START_TEST(dropout_layer)
{
    enum { N = 4000 };
    tfm_rng *rng = tfm_rng_create(13);
    tfm_layer *drop = tfm_dropout_create(0.5f, rng);
    ck_assert_ptr_nonnull(drop);
    ck_assert_str_eq(tfm_layer_kind(drop), "dropout");
    tfm_tensor *x = tfm_tensor_ones(1, (const int64_t[]){N});
    tfm_tape *tape = tfm_tape_create();
    /* layers start in training mode */
    const float *y = tfm_tensor_data_f32(tfm_dropout_forward(tape, drop, x));
    int zeros = 0;
    for (int i = 0; i < N; i++) {
        ck_assert(y[i] == 0.0f || y[i] == 2.0f);
        zeros += y[i] == 0.0f;
    }
    ck_assert_int_gt(zeros, N * 45 / 100);
    ck_assert_int_lt(zeros, N * 55 / 100);
    ck_assert_int_eq(tfm_layer_set_training(drop, 0), TFM_OK);
    y = tfm_tensor_data_f32(tfm_dropout_forward(tape, drop, x));
    for (int i = 0; i < N; i++)
        ck_assert_float_eq(y[i], 1.0f);
    ck_assert_int_eq(tfm_layer_set_training(drop, 7), TFM_OK); /* any nonzero trains */
    y = tfm_tensor_data_f32(tfm_dropout_forward(tape, drop, x));
    zeros = 0;
    for (int i = 0; i < N; i++)
        zeros += y[i] == 0.0f;
    ck_assert_int_gt(zeros, 0);

    /* p == 0 needs no rng and is the identity even in training */
    tfm_layer *none = tfm_dropout_create(0.0f, NULL);
    ck_assert_ptr_nonnull(none);
    y = tfm_tensor_data_f32(tfm_dropout_forward(tape, none, x));
    for (int i = 0; i < N; i++)
        ck_assert_float_eq(y[i], 1.0f);

    tfm_clear_error();
    ck_assert_ptr_null(tfm_dropout_create(1.0f, rng));
    ck_assert_error(TFM_ERR_ARG, "p 1 is outside [0, 1)");
    ck_assert_ptr_null(tfm_dropout_create(-0.1f, rng));
    ck_assert_error(TFM_ERR_ARG, "outside [0, 1)");
    ck_assert_ptr_null(tfm_dropout_create(NAN, rng));
    ck_assert_error(TFM_ERR_ARG, "outside [0, 1)");
    ck_assert_ptr_null(tfm_dropout_create(0.1f, NULL));
    ck_assert_error(TFM_ERR_NULL, "tfm_dropout_create: rng is NULL");
    ck_assert_ptr_null(tfm_dropout_forward(tape, NULL, x));
    ck_assert_error(TFM_ERR_NULL, "layer is NULL");

    tfm_layer_free(none);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_layer_free(drop);
    tfm_rng_free(rng);
}
END_TEST

/* --- feed-forward ----------------------------------------------------------------- */

/* Every feed-forward activation, in double. */
static double reference_activation(tfm_activation act, double v)
{
    switch (act) {
    case TFM_ACTIVATION_GELU: return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    case TFM_ACTIVATION_SILU: return v / (1.0 + exp(-v));
    case TFM_ACTIVATION_GELU_TANH:
        return 0.5 * v * (1.0 + tanh(sqrt(2.0 / acos(-1.0)) * (v + 0.044715 * v * v * v)));
    default: return v > 0.0 ? v : 0.0;
    }
}
enum { ACTIVATIONS = TFM_ACTIVATION_GELU_TANH + 1 };

/* linear2(act(linear1(x))) in double. */
static void reference_feed_forward(tfm_params *params, const char *name, const float *x,
                                   int64_t rows, int64_t d, int64_t d_ff, tfm_activation act,
                                   double *y)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s.linear1.weight", name);
    const float *w1 = tfm_tensor_data_f32(tfm_params_find(params, buf));
    snprintf(buf, sizeof buf, "%s.linear1.bias", name);
    const float *b1 = tfm_tensor_data_f32(tfm_params_find(params, buf));
    snprintf(buf, sizeof buf, "%s.linear2.weight", name);
    const float *w2 = tfm_tensor_data_f32(tfm_params_find(params, buf));
    snprintf(buf, sizeof buf, "%s.linear2.bias", name);
    const float *b2 = tfm_tensor_data_f32(tfm_params_find(params, buf));
    for (int64_t n = 0; n < rows; n++)
        for (int64_t o = 0; o < d; o++) {
            double acc = b2[o];
            for (int64_t h = 0; h < d_ff; h++) {
                double pre = b1[h];
                for (int64_t i = 0; i < d; i++)
                    pre += (double)x[n * d + i] * w1[h * d + i];
                acc += reference_activation(act, pre) * w2[o * d_ff + h];
            }
            y[n * d + o] = acc;
        }
}

START_TEST(feed_forward_parameters)
{
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(14);
    tfm_layer *ff = tfm_feed_forward_create(params, "layers.0", 8, 32, TFM_ACTIVATION_RELU,
                                            0.1f, rng);
    ck_assert_ptr_nonnull(ff);
    ck_assert_str_eq(tfm_layer_kind(ff), "feed_forward");
    ck_assert_int_eq(tfm_params_count(params), 4);
    static const char *const names[4] = {"layers.0.linear1.weight", "layers.0.linear1.bias",
                                         "layers.0.linear2.weight", "layers.0.linear2.bias"};
    static const int64_t shapes[4][2] = {{32, 8}, {32, 0}, {8, 32}, {8, 0}};
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(tfm_params_name(params, i), names[i]);
        tfm_tensor *t = tfm_params_at(params, i);
        check_shape(t, shapes[i][1] ? 2 : 1, shapes[i]);
        /* nn.Linear's bound, from each linear's own fan-in */
        check_uniform(tfm_tensor_data_f32(t), tfm_tensor_numel(t),
                      1.0 / sqrt(i < 2 ? 8.0 : 32.0));
    }
    tfm_layer_free(ff);
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

START_TEST(feed_forward_values)
{
    enum { D = 6, DFF = 10, ROWS = 8 };
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(15);
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 4, D}, 16);
    const float *xv = tfm_tensor_data_f32(x);
    tfm_tape *tape = tfm_tape_create();
    double ref[ROWS * D];
    for (tfm_activation act = 0; act < ACTIVATIONS; act++) {
        char name[8];
        snprintf(name, sizeof name, "f%d", (int)act);
        tfm_layer *ff = tfm_feed_forward_create(params, name, D, DFF, act, 0.3f, rng);
        reference_feed_forward(params, name, xv, ROWS, D, DFF, act, ref);
        /* training: dropout (p 0.3) between the linears changes the result */
        tfm_tensor *y = tfm_feed_forward_forward(tape, ff, x);
        check_shape(y, 3, (const int64_t[]){2, 4, D});
        int differs = 0;
        for (int i = 0; i < ROWS * D; i++)
            differs += fabs(tfm_tensor_data_f32(y)[i] - ref[i]) > 1e-4;
        ck_assert_int_gt(differs, 0);
        /* evaluation reaches the dropout sublayer */
        ck_assert_int_eq(tfm_layer_set_training(ff, 0), TFM_OK);
        y = tfm_feed_forward_forward(tape, ff, x);
        for (int i = 0; i < ROWS * D; i++)
            ck_assert_msg(fabs(tfm_tensor_data_f32(y)[i] - ref[i]) <= 1e-5,
                          "activation %d, value %d: %g, want %g", (int)act, i,
                          (double)tfm_tensor_data_f32(y)[i], ref[i]);
        tfm_layer_free(ff);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

static tfm_tensor *build_feed_forward(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    return tfm_feed_forward_forward(tape, ctx, in[0]);
}

START_TEST(feed_forward_gradients)
{
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(17);
    for (tfm_activation g = 0; g < ACTIVATIONS; g++) {
        char name[8];
        snprintf(name, sizeof name, "f%d", (int)g);
        tfm_layer *ff = tfm_feed_forward_create(params, name, 4, 6, g, 0.5f, rng);
        tfm_layer_set_training(ff, 0);
        int64_t first = tfm_params_count(params) - 4;
        tfm_tensor *in[5] = {gc_random(3, (const int64_t[]){2, 3, 4}, 18 + g),
                             tfm_params_at(params, first), tfm_params_at(params, first + 1),
                             tfm_params_at(params, first + 2), tfm_params_at(params, first + 3)};
        tfm_tensor_set_requires_grad(in[0], 1);
        ck_assert_gradcheck(build_feed_forward, ff, in, 5);
        tfm_tensor_free(in[0]);
        tfm_layer_free(ff);
    }
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

START_TEST(feed_forward_errors)
{
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(19);
    tfm_clear_error();
    ck_assert_ptr_null(tfm_feed_forward_create(params, "f", 4, 8, 4, 0.1f, rng));
    ck_assert_error(TFM_ERR_ARG, "unknown activation 4");
    ck_assert_ptr_null(tfm_feed_forward_create(params, NULL, 4, 8, 0, 0.1f, rng));
    ck_assert_error(TFM_ERR_NULL, "name is NULL");
    ck_assert_ptr_null(tfm_feed_forward_create(NULL, "f", 4, 8, 0, 0.1f, rng));
    ck_assert_error(TFM_ERR_NULL, "params is NULL");
    ck_assert_ptr_null(tfm_feed_forward_create(params, "f", 4, 8, 0, 0.1f, NULL));
    ck_assert_error(TFM_ERR_NULL, "rng is NULL");
    /* 250 bytes fit a parameter name, not with ".linear1.weight" */
    char name[251];
    memset(name, 'f', 250);
    name[250] = '\0';
    ck_assert_ptr_null(tfm_feed_forward_create(params, name, 4, 8, 0, 0.1f, rng));
    ck_assert_error(TFM_ERR_ARG, "too long");
    /* 245 bytes fit NAME.linear1, not NAME.linear1.weight: fails inside */
    name[245] = '\0';
    ck_assert_ptr_null(tfm_feed_forward_create(params, name, 4, 8, 0, 0.1f, rng));
    ck_assert_error(TFM_ERR_ARG, "too long");
    /* a bad dropout comes after both linears: the layer is still freed */
    ck_assert_ptr_null(tfm_feed_forward_create(params, "f", 4, 8, 0, 1.5f, rng));
    ck_assert_error(TFM_ERR_ARG, "p 1.5");
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

/* --- what all layers share ----------------------------------------------------- */

START_TEST(wrong_kind_and_null_layers)
{
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(20);
    tfm_layer *lin = tfm_linear_create(params, "lin", 4, 4, 1, rng);
    tfm_layer *emb = tfm_embedding_create(params, "emb", 10, 4, rng);
    tfm_layer *norm = tfm_layer_norm_create(params, "norm", 4, 1e-5f);
    tfm_layer *drop = tfm_dropout_create(0.1f, rng);
    tfm_layer *ff = tfm_feed_forward_create(params, "ff", 4, 8, 0, 0.1f, rng);
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){2, 4});
    tfm_tensor *ids = tfm_tensor_zeros(TFM_I32, 1, (const int64_t[]){2});
    tfm_tape *tape = tfm_tape_create();
    tfm_clear_error();

    ck_assert_ptr_null(tfm_linear_forward(tape, emb, x));
    ck_assert_error(TFM_ERR_ARG, "expected a layer of kind linear, got kind embedding");
    ck_assert_ptr_null(tfm_embedding_forward(tape, lin, ids));
    ck_assert_error(TFM_ERR_ARG, "expected a layer of kind embedding, got kind linear");
    ck_assert_ptr_null(tfm_layer_norm_forward(tape, drop, x));
    ck_assert_error(TFM_ERR_ARG, "expected a layer of kind layer_norm, got kind dropout");
    ck_assert_ptr_null(tfm_dropout_forward(tape, ff, x));
    ck_assert_error(TFM_ERR_ARG, "expected a layer of kind dropout, got kind feed_forward");
    ck_assert_ptr_null(tfm_feed_forward_forward(tape, norm, x));
    ck_assert_error(TFM_ERR_ARG, "expected a layer of kind feed_forward, got kind layer_norm");
    /* a feed-forward is not a linear even though it holds two */
    ck_assert_ptr_null(tfm_linear_forward(tape, ff, x));
    ck_assert_error(TFM_ERR_ARG, "tfm_linear_forward");

    ck_assert_ptr_null(tfm_embedding_forward(tape, NULL, ids));
    ck_assert_error(TFM_ERR_NULL, "tfm_embedding_forward: layer is NULL");
    ck_assert_ptr_null(tfm_layer_norm_forward(tape, NULL, x));
    ck_assert_error(TFM_ERR_NULL, "tfm_layer_norm_forward: layer is NULL");
    ck_assert_ptr_null(tfm_feed_forward_forward(tape, NULL, x));
    ck_assert_error(TFM_ERR_NULL, "tfm_feed_forward_forward: layer is NULL");
    ck_assert_ptr_null(tfm_layer_kind(NULL));
    ck_assert_error(TFM_ERR_NULL, "tfm_layer_kind: layer is NULL");
    ck_assert_int_eq(tfm_layer_set_training(NULL, 0), TFM_ERR_NULL);
    ck_assert_error(TFM_ERR_NULL, "tfm_layer_set_training: layer is NULL");
    tfm_layer_free(NULL);

    /* the forwards work on their own kind, and recording off records nothing */
    tfm_tape_set_recording(tape, 0);
    ck_assert_ptr_nonnull(tfm_feed_forward_forward(tape, ff, x));
    ck_assert_ptr_nonnull(tfm_layer_norm_forward(tape, norm, x));
    ck_assert_ptr_nonnull(tfm_embedding_forward(tape, emb, ids));
    ck_assert_int_eq(tfm_tape_node_count(tape), 0);

    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(ids);
    tfm_layer_free(lin);
    tfm_layer_free(emb);
    tfm_layer_free(norm);
    tfm_layer_free(drop);
    tfm_layer_free(ff);
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

/* --- initialisers ------------------------------------------------------------------ */

START_TEST(xavier_uniform_fans)
{
    static const struct { int32_t ndim; int64_t shape[4]; double fan_in, fan_out; float gain; }
    cases[] = {
        {2, {30, 20}, 20, 30, 1.0f},
        {2, {1, 500}, 500, 1, 1.0f},
        {2, {64, 16}, 16, 64, 2.0f},
        /* more axes multiply the receptive field into both fans */
        {3, {4, 6, 5}, 6 * 5, 4 * 5, 1.0f},
        {4, {3, 2, 4, 5}, 2 * 20, 3 * 20, 0.5f},
    };
    tfm_rng *rng = tfm_rng_create(21);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tfm_tensor *t = tfm_tensor_zeros(TFM_F32, cases[c].ndim, cases[c].shape);
        ck_assert_int_eq(tfm_init_xavier_uniform(t, cases[c].gain, rng), TFM_OK);
        double bound = cases[c].gain * sqrt(6.0 / (cases[c].fan_in + cases[c].fan_out));
        check_uniform(tfm_tensor_data_f32(t), tfm_tensor_numel(t), bound * (1.0 + 1e-6));
        tfm_tensor_free(t);
    }
    tfm_rng_free(rng);
}
END_TEST

START_TEST(init_values_and_errors)
{
    tfm_rng *rng = tfm_rng_create(22);
    tfm_tensor *t = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){50, 80});
    const float *v = tfm_tensor_data_f32(t);
    ck_assert_int_eq(tfm_init_uniform(t, 2.0f, 5.0f, rng), TFM_OK);
    double sum = 0.0;
    for (int i = 0; i < 4000; i++) {
        ck_assert(v[i] >= 2.0f && v[i] <= 5.0f);
        sum += v[i];
    }
    ck_assert_double_eq_tol(sum / 4000, 3.5, 0.05);
    ck_assert_int_eq(tfm_init_uniform(t, 1.5f, 1.5f, rng), TFM_OK);
    ck_assert_float_eq(v[17], 1.5f);
    ck_assert_int_eq(tfm_init_normal(t, 0.0f, 1.0f, rng), TFM_OK);
    check_standard_normal(v, 4000);
    ck_assert_int_eq(tfm_init_normal(t, 3.0f, 0.0f, rng), TFM_OK);
    ck_assert_float_eq(v[5], 3.0f);

    tfm_clear_error();
    ck_assert_int_eq(tfm_init_uniform(t, 1.0f, 0.0f, rng), TFM_ERR_ARG);
    ck_assert_error(TFM_ERR_ARG, "bounds [1, 0]");
    ck_assert_int_eq(tfm_init_normal(t, 0.0f, -1.0f, rng), TFM_ERR_ARG);
    ck_assert_error(TFM_ERR_ARG, "std -1 must be finite");
    ck_assert_int_eq(tfm_init_xavier_uniform(NULL, 1.0f, rng), TFM_ERR_NULL);
    ck_assert_error(TFM_ERR_NULL, "tfm_init_xavier_uniform: tensor is NULL");
    ck_assert_int_eq(tfm_init_xavier_uniform(t, 1.0f, NULL), TFM_ERR_NULL);
    ck_assert_error(TFM_ERR_NULL, "rng is NULL");
    tfm_tensor *ints = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){2, 2});
    ck_assert_int_eq(tfm_init_normal(ints, 0.0f, 1.0f, rng), TFM_ERR_DTYPE);
    ck_assert_error(TFM_ERR_DTYPE, "float32");
    tfm_tensor *vec = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){5});
    ck_assert_int_eq(tfm_init_xavier_uniform(vec, 1.0f, rng), TFM_ERR_SHAPE);
    ck_assert_error(TFM_ERR_SHAPE, "at least 2 axes");
    tfm_tensor_free(vec);
    tfm_tensor_free(ints);
    tfm_tensor_free(t);
    tfm_rng_free(rng);
}
END_TEST

static Suite *nn_basic_suite(void)
{
    Suite *s = suite_create("nn_basic");
    TCase *layers = tcase_create("layers");
    tcase_add_test(layers, linear_parameters);
    tcase_add_test(layers, linear_forward_values);
    tcase_add_test(layers, linear_gradients);
    tcase_add_test(layers, linear_errors);
    tcase_add_test(layers, embedding_layer);
    tcase_add_test(layers, layer_norm_layer);
    tcase_add_test(layers, layer_norm_gradients);
    tcase_add_test(layers, dropout_layer);
    tcase_add_test(layers, feed_forward_parameters);
    tcase_add_test(layers, feed_forward_values);
    tcase_add_test(layers, feed_forward_gradients);
    tcase_add_test(layers, feed_forward_errors);
    tcase_add_test(layers, wrong_kind_and_null_layers);
    suite_add_tcase(s, layers);
    TCase *init = tcase_create("init");
    tcase_add_test(init, xavier_uniform_fans);
    tcase_add_test(init, init_values_and_errors);
    suite_add_tcase(s, init);
    return s;
}

TFM_CHECK_MAIN(nn_basic_suite)
