/* Sinusoidal and learned positions; causal, padding and combined masks. */
#include <check.h>
#include <math.h>
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

/* The tutorials' PositionalEncoding, in double: div_term = exp(2i * -ln(1e4)/d). */
static double reference_pe(int64_t pos, int64_t j, int64_t d)
{
    double div = exp((double)(j / 2 * 2) * (-log(10000.0) / (double)d));
    return j % 2 ? cos((double)pos * div) : sin((double)pos * div);
}

/* The whole table, read through a forward of zeros [1, max_len, d]. */
static void read_table(const tfm_layer *layer, int64_t max_len, int64_t d, float *out)
{
    tfm_tensor *zeros = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){1, max_len, d});
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_positions_forward(tape, layer, zeros, 0);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(tfm_tensor_read_f32(y, out, max_len * d), TFM_OK);
    tfm_tape_free(tape);
    tfm_tensor_free(zeros);
}

START_TEST(sinusoidal_values)
{
    enum { L = 50, D = 6 };
    tfm_layer *pe = tfm_sinusoidal_positions_create(L, D);
    ck_assert_ptr_nonnull(pe);
    ck_assert_str_eq(tfm_layer_kind(pe), "positions");
    float table[L * D];
    read_table(pe, L, D, table);
    /* hand-written values first, then the formula everywhere */
    ck_assert_double_eq_tol(table[0 * D + 0], 0.0, 1e-7);
    ck_assert_double_eq_tol(table[0 * D + 1], 1.0, 1e-7);
    ck_assert_double_eq_tol(table[1 * D + 0], sin(1.0), 1e-7);
    ck_assert_double_eq_tol(table[1 * D + 1], cos(1.0), 1e-7);
    ck_assert_double_eq_tol(table[3 * D + 2], sin(3.0 / pow(10000.0, 2.0 / D)), 1e-7);
    ck_assert_double_eq_tol(table[3 * D + 3], cos(3.0 / pow(10000.0, 2.0 / D)), 1e-7);
    ck_assert_double_eq_tol(table[49 * D + 5], cos(49.0 / pow(10000.0, 4.0 / D)), 1e-7);
    for (int64_t pos = 0; pos < L; pos++)
        for (int64_t j = 0; j < D; j++)
            ck_assert_double_eq_tol(table[pos * D + j], reference_pe(pos, j, D), 1e-6);
    tfm_layer_free(pe);
}
END_TEST

/* An odd width keeps the pairing and ends on a sine column. */
START_TEST(sinusoidal_odd_width)
{
    enum { L = 20, D = 5 };
    tfm_layer *pe = tfm_sinusoidal_positions_create(L, D);
    ck_assert_ptr_nonnull(pe);
    float table[L * D];
    read_table(pe, L, D, table);
    ck_assert_double_eq_tol(table[7 * D + 4], sin(7.0 / pow(10000.0, 4.0 / D)), 1e-7);
    for (int64_t pos = 0; pos < L; pos++)
        for (int64_t j = 0; j < D; j++)
            ck_assert_double_eq_tol(table[pos * D + j], reference_pe(pos, j, D), 1e-6);
    tfm_layer_free(pe);
}
END_TEST

/* Marian's layout, against values its MarianSinusoidalPositionalEmbedding
 * gave (transformers, PyTorch 1.13) for 50 positions of width 7, then
 * its formula in double everywhere. */
START_TEST(sinusoidal_halves_values)
{
    enum { L = 50, D = 7 };
    tfm_layer *pe = tfm_sinusoidal_positions_create_with_layout(L, D, TFM_SINUSOIDS_HALVES);
    ck_assert_ptr_nonnull(pe);
    float table[L * D];
    read_table(pe, L, D, table);
    ck_assert_float_eq(table[1 * D + 0], 0.8414709568023682f);
    ck_assert_float_eq(table[3 * D + 2], 0.015537798404693604f);
    ck_assert_float_eq(table[49 * D + 3], 0.01826419308781624f);
    ck_assert_float_eq(table[49 * D + 6], 0.9679667353630066f);
    ck_assert_float_eq(table[7 * D + 5], 0.8757640719413757f);
    for (int64_t pos = 0; pos < L; pos++)
        for (int64_t j = 0; j < D; j++) {
            int64_t sines = (D + 1) / 2, i = j < sines ? j : j - sines;
            double angle = (double)pos / pow(10000.0, 2.0 * (double)i / D);
            ck_assert_double_eq_tol(table[pos * D + j], j < sines ? sin(angle) : cos(angle),
                                    1e-7);
        }
    tfm_layer_free(pe);
}
END_TEST

/* fairseq's layout (M2M100's get_embedding, PyTorch 1.13, float32), then
 * its formula in double within float32's rounding of the angles. */
START_TEST(sinusoidal_fairseq_values)
{
    enum { L = 50, D = 7, HALF = D / 2 };
    tfm_layer *pe =
        tfm_sinusoidal_positions_create_with_layout(L, D, TFM_SINUSOIDS_HALVES_FAIRSEQ);
    ck_assert_ptr_nonnull(pe);
    float table[L * D];
    read_table(pe, L, D, table);
    ck_assert_double_eq_tol(table[1 * D + 0], 0.8414709568023682, 1e-7);
    ck_assert_double_eq_tol(table[3 * D + 2], 0.0002999999560415745, 1e-7);
    ck_assert_double_eq_tol(table[49 * D + 3], 0.3005925416946411, 1e-7);
    ck_assert_double_eq_tol(table[49 * D + 1], 0.4706258773803711, 1e-7);
    ck_assert_double_eq_tol(table[7 * D + 5], 0.9999997615814209, 1e-7);
    for (int64_t pos = 0; pos < L; pos++) {
        for (int64_t i = 0; i < HALF; i++) {
            double angle = (double)pos * exp(-(double)i * log(10000.0) / (HALF - 1));
            ck_assert_double_eq_tol(table[pos * D + i], sin(angle), 1e-5);
            ck_assert_double_eq_tol(table[pos * D + HALF + i], cos(angle), 1e-5);
        }
        ck_assert_float_eq(table[pos * D + D - 1], 0.0f);
    }
    ck_assert_ptr_null(tfm_sinusoidal_positions_create_with_layout(L, D, 3));
    ck_assert_error(TFM_ERR_ARG, "tfm_sinusoidal_positions_create_with_layout: unknown layout 3");
    tfm_layer_free(pe);
}
END_TEST

/* x + P[offset + t] for every batch row; positions past the window unused. */
START_TEST(offset_adds_the_right_rows)
{
    enum { L = 16, D = 8, B = 2, T = 3 };
    tfm_layer *pe = tfm_sinusoidal_positions_create(L, D);
    tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, D}, 3);
    const float *xv = tfm_tensor_data_f32(x);
    tfm_tape *tape = tfm_tape_create();
    const int64_t offsets[] = {0, 5, L - T};
    for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
        tfm_tensor *y = tfm_positions_forward(tape, pe, x, offsets[k]);
        ck_assert_ptr_nonnull(y);
        int64_t shape[4];
        ck_assert_int_eq(tfm_tensor_ndim(y), 3);
        tfm_tensor_shape(y, shape);
        ck_assert(shape[0] == B && shape[1] == T && shape[2] == D);
        const float *yv = tfm_tensor_data_f32(y);
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t j = 0; j < D; j++) {
                    int64_t i = (b * T + t) * D + j;
                    ck_assert_double_eq_tol(yv[i], xv[i] + reference_pe(offsets[k] + t, j, D),
                                            1e-5);
                }
    }
    /* a fixed table is not a parameter: nothing to record for x without grad */
    ck_assert_int_eq(tfm_tape_node_count(tape), 0);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_layer_free(pe);
}
END_TEST

typedef struct { const tfm_layer *layer; int64_t offset; } pos_ctx;

static tfm_tensor *build_positions(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    const pos_ctx *c = ctx;
    /* squared so the gradient depends on the values, not just on the wiring */
    tfm_tensor *y = tfm_positions_forward(tape, c->layer, in[0], c->offset);
    return tfm_mul(tape, y, y);
}

START_TEST(sinusoidal_gradient)
{
    tfm_layer *pe = tfm_sinusoidal_positions_create(10, 4);
    tfm_tensor *x = gc_random(3, (const int64_t[]){2, 3, 4}, 5);
    tfm_tensor_set_requires_grad(x, 1);
    pos_ctx ctx = {pe, 4};
    ck_assert_gradcheck(build_positions, &ctx, &x, 1);
    tfm_tensor_free(x);
    tfm_layer_free(pe);
}
END_TEST

START_TEST(learned_parameters)
{
    enum { L = 64, D = 32 };
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(7);
    tfm_layer *pos = tfm_learned_positions_create(params, "decoder.pos", L, D, rng);
    ck_assert_ptr_nonnull(pos);
    ck_assert_str_eq(tfm_layer_kind(pos), "positions");
    ck_assert_int_eq(tfm_params_count(params), 1);
    ck_assert_str_eq(tfm_params_name(params, 0), "decoder.pos.weight");
    tfm_tensor *w = tfm_params_find(params, "decoder.pos.weight");
    ck_assert_ptr_nonnull(w);
    int64_t shape[4];
    tfm_tensor_shape(w, shape);
    ck_assert_int_eq(tfm_tensor_ndim(w), 2);
    ck_assert(shape[0] == L && shape[1] == D);
    const float *v = tfm_tensor_data_f32(w);
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < L * D; i++) {
        sum += v[i];
        sq += (double)v[i] * v[i];
    }
    double mean = sum / (L * D), std = sqrt(sq / (L * D) - mean * mean);
    ck_assert_double_lt(fabs(mean), 0.1);
    ck_assert_double_lt(fabs(std - 1.0), 0.1);
    /* the forward reads the parameter's current values */
    float table[L * D];
    read_table(pos, L, D, table);
    ck_assert_mem_eq(table, v, sizeof table);
    tfm_layer_free(pos);
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

START_TEST(learned_gradient)
{
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(11);
    tfm_layer *pos = tfm_learned_positions_create(params, "pos", 7, 3, rng);
    tfm_tensor *in[2] = {gc_random(3, (const int64_t[]){2, 4, 3}, 13),
                         tfm_params_find(params, "pos.weight")};
    tfm_tensor_set_requires_grad(in[0], 1);
    pos_ctx ctx = {pos, 2};
    ck_assert_gradcheck(build_positions, &ctx, in, 2);
    /* only x */
    tfm_tensor_set_requires_grad(in[1], 0);
    ck_assert_gradcheck(build_positions, &ctx, in, 2);
    tfm_tensor_set_requires_grad(in[1], 1);
    /* only the table */
    tfm_tensor_set_requires_grad(in[0], 0);
    ck_assert_gradcheck(build_positions, &ctx, in, 2);
    tfm_tensor_free(in[0]);
    tfm_layer_free(pos);
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

/* Sum of two outputs, from offsets 3 and 2: table rows 2..4 get B, 2B and B,
 * the others nothing; x, used twice, gets 2 everywhere (gradients add). */
START_TEST(learned_gradient_rows)
{
    enum { L = 6, D = 2, B = 3, T = 2 };
    const float expected_rows[L] = {0, 0, B, 2 * B, B, 0};
    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(1);
    tfm_layer *pos = tfm_learned_positions_create(params, "pos", L, D, rng);
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){B, T, D});
    tfm_tensor_set_requires_grad(x, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *loss = tfm_add(tape, tfm_sum(tape, tfm_positions_forward(tape, pos, x, 3)),
                               tfm_sum(tape, tfm_positions_forward(tape, pos, x, 2)));
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
    const float *gw = tfm_params_grads(params);
    for (int r = 0; r < L; r++)
        for (int j = 0; j < D; j++)
            ck_assert_float_eq(gw[r * D + j], expected_rows[r]);
    float gx[B * T * D];
    ck_assert_int_eq(tfm_tensor_read_grad(x, gx, B * T * D), TFM_OK);
    for (int i = 0; i < B * T * D; i++)
        ck_assert_float_eq(gx[i], 2.0f);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_layer_free(pos);
    tfm_rng_free(rng);
    tfm_params_free(params);
}
END_TEST

START_TEST(positions_errors)
{
    tfm_layer *pe = tfm_sinusoidal_positions_create(8, 4);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){2, 3, 4});
    tfm_clear_error();

    ck_assert_ptr_null(tfm_positions_forward(tape, pe, x, 6));
    ck_assert_error(TFM_ERR_RANGE, "offset 6 with 3 positions");
    ck_assert_ptr_null(tfm_positions_forward(tape, pe, x, -1));
    ck_assert_error(TFM_ERR_RANGE, "tfm_positions_forward");
    ck_assert_ptr_null(tfm_positions_forward(tape, pe, x, INT64_MAX));
    ck_assert_error(TFM_ERR_RANGE, "max_len");
    ck_assert_ptr_nonnull(tfm_positions_forward(tape, pe, x, 5));

    tfm_tensor *long_x = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){1, 9, 4});
    ck_assert_ptr_null(tfm_positions_forward(tape, pe, long_x, 0));
    ck_assert_error(TFM_ERR_RANGE, "8");
    tfm_tensor_free(long_x);

    tfm_tensor *wide = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){2, 3, 5});
    ck_assert_ptr_null(tfm_positions_forward(tape, pe, wide, 0));
    ck_assert_error(TFM_ERR_SHAPE, "[2,3,5]");
    tfm_tensor_free(wide);
    tfm_tensor *flat = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){3, 4});
    ck_assert_ptr_null(tfm_positions_forward(tape, pe, flat, 0));
    ck_assert_error(TFM_ERR_SHAPE, "must be [B, T, 4]");
    tfm_tensor_free(flat);
    tfm_tensor *ints = tfm_tensor_zeros(TFM_I32, 3, (const int64_t[]){2, 3, 4});
    ck_assert_ptr_null(tfm_positions_forward(tape, pe, ints, 0));
    ck_assert_error(TFM_ERR_DTYPE, "float32");
    tfm_tensor_free(ints);

    ck_assert_ptr_null(tfm_positions_forward(tape, pe, NULL, 0));
    ck_assert_error(TFM_ERR_NULL, "x is NULL");
    ck_assert_ptr_null(tfm_positions_forward(NULL, pe, x, 0));
    ck_assert_error(TFM_ERR_NULL, "tape is NULL");
    ck_assert_ptr_null(tfm_positions_forward(tape, NULL, x, 0));
    ck_assert_error(TFM_ERR_NULL, "layer is NULL");
    tfm_layer *drop = tfm_dropout_create(0.0f, NULL);
    ck_assert_ptr_null(tfm_positions_forward(tape, drop, x, 0));
    ck_assert_error(TFM_ERR_ARG, "expected a layer of kind positions, got kind dropout");
    tfm_layer_free(drop);

    ck_assert_ptr_null(tfm_sinusoidal_positions_create(0, 4));
    ck_assert_error(TFM_ERR_ARG, "max_len 0");
    ck_assert_ptr_null(tfm_sinusoidal_positions_create(4, -2));
    ck_assert_error(TFM_ERR_ARG, "d_model -2");
    ck_assert_ptr_null(tfm_sinusoidal_positions_create(INT64_MAX / 2, 1 << 20));
    ck_assert_error(TFM_ERR_SIZE, "tfm_sinusoidal_positions_create");

    tfm_params *params = tfm_params_create();
    tfm_rng *rng = tfm_rng_create(3);
    ck_assert_ptr_null(tfm_learned_positions_create(NULL, "p", 4, 4, rng));
    ck_assert_error(TFM_ERR_NULL, "params is NULL");
    ck_assert_ptr_null(tfm_learned_positions_create(params, NULL, 4, 4, rng));
    ck_assert_error(TFM_ERR_NULL, "name is NULL");
    ck_assert_ptr_null(tfm_learned_positions_create(params, "p", 4, 4, NULL));
    ck_assert_error(TFM_ERR_NULL, "rng is NULL");
    ck_assert_ptr_null(tfm_learned_positions_create(params, "p", 0, 4, rng));
    ck_assert_error(TFM_ERR_ARG, "max_len 0");
    char name[300];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    ck_assert_ptr_null(tfm_learned_positions_create(params, name, 4, 4, rng));
    ck_assert_error(TFM_ERR_ARG, "too long");
    tfm_layer *ok = tfm_learned_positions_create(params, "p", 4, 4, rng);
    ck_assert_ptr_nonnull(ok);
    ck_assert_ptr_null(tfm_learned_positions_create(params, "p", 4, 4, rng));
    ck_assert_error(TFM_ERR_ARG, "exists already");
    ck_assert_int_eq(tfm_params_count(params), 1);
    tfm_layer_free(ok);
    tfm_rng_free(rng);
    tfm_params_free(params);

    tfm_tensor_free(x);
    tfm_tape_free(tape);
    tfm_layer_free(pe);
}
END_TEST

/* --- masks -------------------------------------------------------------------- */

static void check_shape(const tfm_tensor *t, int32_t ndim, const int64_t *expected)
{
    int64_t shape[4];
    ck_assert_int_eq(tfm_tensor_ndim(t), ndim);
    ck_assert_int_eq(tfm_tensor_shape(t, shape), TFM_OK);
    for (int32_t i = 0; i < ndim; i++)
        ck_assert_int_eq(shape[i], expected[i]);
}

START_TEST(causal_masks)
{
    enum { T = 5 };
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *keep = tfm_mask_causal(tape, T, TFM_I32);
    tfm_tensor *add = tfm_mask_causal(tape, T, TFM_F32);
    ck_assert_ptr_nonnull(keep);
    ck_assert_ptr_nonnull(add);
    ck_assert_int_eq(tfm_tensor_dtype(keep), TFM_I32);
    ck_assert_int_eq(tfm_tensor_dtype(add), TFM_F32);
    check_shape(keep, 2, (const int64_t[]){T, T});
    check_shape(add, 2, (const int64_t[]){T, T});
    const int32_t *k = tfm_tensor_data_i32(keep);
    const float *a = tfm_tensor_data_f32(add);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            ck_assert_int_eq(k[i * T + j], j <= i ? 1 : 0);
            if (j <= i)
                ck_assert(a[i * T + j] == 0.0f && !signbit(a[i * T + j]));
            else
                ck_assert(isinf(a[i * T + j]) && a[i * T + j] < 0.0f);
        }
    ck_assert_int_eq(tfm_tensor_requires_grad(keep), 0);
    ck_assert_int_eq(tfm_tensor_requires_grad(add), 0);
    ck_assert_int_eq(tfm_tape_node_count(tape), 0);
    tfm_tensor *one = tfm_mask_causal(tape, 1, TFM_I32);
    ck_assert_int_eq(tfm_tensor_data_i32(one)[0], 1);
    tfm_tape_free(tape);
}
END_TEST

START_TEST(padding_masks)
{
    const int32_t ids[2 * 4] = {5, 7, 0, 0, 3, 0, 9, 0};
    tfm_tensor *t = tfm_tensor_from_i32(2, (const int64_t[]){2, 4}, ids);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *keep = tfm_mask_padding(tape, t, 0, TFM_I32);
    tfm_tensor *add = tfm_mask_padding(tape, t, 0, TFM_F32);
    tfm_tensor *keep9 = tfm_mask_padding(tape, t, 9, TFM_I32);
    check_shape(keep, 4, (const int64_t[]){2, 1, 1, 4});
    check_shape(add, 4, (const int64_t[]){2, 1, 1, 4});
    const int32_t *k = tfm_tensor_data_i32(keep), *k9 = tfm_tensor_data_i32(keep9);
    const float *a = tfm_tensor_data_f32(add);
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(k[i], ids[i] != 0);
        ck_assert_int_eq(k9[i], ids[i] != 9);
        ck_assert(ids[i] != 0 ? a[i] == 0.0f : isinf(a[i]) && a[i] < 0.0f);
    }
    ck_assert_int_eq(tfm_tape_node_count(tape), 0);
    tfm_tape_free(tape);
    tfm_tensor_free(t);
}
END_TEST

enum { CB = 2, CT = 4, CPAD = 0 };
static const int32_t combine_ids[CB * CT] = {4, 2, 6, 0, 8, 0, 0, 0};

/* causal [T, T] with padding [B, 1, 1, T] -> [B, 1, T, T]: kept where j <= i
 * and key j is not padding. */
static int combined_keeps(int64_t b, int64_t i, int64_t j)
{
    return j <= i && combine_ids[b * CT + j] != CPAD;
}

START_TEST(combine_broadcasts)
{
    tfm_tensor *ids = tfm_tensor_from_i32(2, (const int64_t[]){CB, CT}, combine_ids);
    tfm_tape *tape = tfm_tape_create();
    for (int form = TFM_F32; form <= TFM_I32; form++) {
        tfm_tensor *causal = tfm_mask_causal(tape, CT, form);
        tfm_tensor *pad = tfm_mask_padding(tape, ids, CPAD, form);
        /* either order gives the same */
        tfm_tensor *ab = tfm_mask_combine(tape, causal, pad);
        tfm_tensor *ba = tfm_mask_combine(tape, pad, causal);
        ck_assert_ptr_nonnull(ab);
        ck_assert_ptr_nonnull(ba);
        ck_assert_int_eq(tfm_tensor_dtype(ab), form);
        check_shape(ab, 4, (const int64_t[]){CB, 1, CT, CT});
        check_shape(ba, 4, (const int64_t[]){CB, 1, CT, CT});
        for (int which = 0; which < 2; which++) {
            tfm_tensor *m = which ? ba : ab;
            for (int64_t b = 0; b < CB; b++)
                for (int64_t i = 0; i < CT; i++)
                    for (int64_t j = 0; j < CT; j++) {
                        int64_t at = (b * CT + i) * CT + j;
                        int keeps = combined_keeps(b, i, j);
                        if (form == TFM_I32) {
                            ck_assert_int_eq(tfm_tensor_data_i32(m)[at], keeps);
                        } else {
                            float v = tfm_tensor_data_f32(m)[at];
                            ck_assert(keeps ? v == 0.0f : isinf(v) && v < 0.0f);
                        }
                    }
        }
    }
    ck_assert_int_eq(tfm_tape_node_count(tape), 0);
    tfm_tape_free(tape);
    tfm_tensor_free(ids);
}
END_TEST

/* Nonzero keep values count as keep; additive values add, whatever they are. */
START_TEST(combine_values)
{
    const int32_t ka[3] = {2, 0, -1}, kb[2 * 3] = {1, 1, 1, 0, 5, 1};
    const float fa[3] = {0.5f, -1.0f, 0.0f}, fb[2] = {-2.0f, 3.0f};
    tfm_tensor *a = tfm_tensor_from_i32(1, (const int64_t[]){3}, ka);
    tfm_tensor *b = tfm_tensor_from_i32(2, (const int64_t[]){2, 3}, kb);
    tfm_tensor *c = tfm_tensor_from_f32(2, (const int64_t[]){1, 3}, fa);
    tfm_tensor *d = tfm_tensor_from_f32(2, (const int64_t[]){2, 1}, fb);
    tfm_tensor_set_requires_grad(c, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *k = tfm_mask_combine(tape, a, b);
    check_shape(k, 2, (const int64_t[]){2, 3});
    const int32_t kexp[6] = {1, 0, 1, 0, 0, 1};
    ck_assert_mem_eq(tfm_tensor_data_i32(k), kexp, sizeof kexp);
    tfm_tensor *f = tfm_mask_combine(tape, c, d);
    check_shape(f, 2, (const int64_t[]){2, 3});
    const float *fv = tfm_tensor_data_f32(f);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            ck_assert_float_eq(fv[i * 3 + j], fa[j] + fb[i]);
    /* never recorded, even from a tensor that requires grad */
    ck_assert_int_eq(tfm_tensor_requires_grad(f), 0);
    ck_assert_int_eq(tfm_tape_node_count(tape), 0);
    tfm_tape_free(tape);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
    tfm_tensor_free(c);
    tfm_tensor_free(d);
}
END_TEST

/* Softmax of scores [B, H, T, T] with the combined mask: dropped positions are
 * exactly 0, the kept ones the softmax over the kept scores (double). Both
 * forms agree; no row is fully dropped (key 0 is never padding). */
START_TEST(masks_in_softmax)
{
    enum { H = 3 };
    tfm_tensor *ids = tfm_tensor_from_i32(2, (const int64_t[]){CB, CT}, combine_ids);
    tfm_tensor *scores = gc_random(4, (const int64_t[]){CB, H, CT, CT}, 21);
    const float *s = tfm_tensor_data_f32(scores);
    tfm_tape *tape = tfm_tape_create();
    for (int form = TFM_F32; form <= TFM_I32; form++) {
        tfm_tensor *mask = tfm_mask_combine(tape, tfm_mask_causal(tape, CT, form),
                                            tfm_mask_padding(tape, ids, CPAD, form));
        tfm_tensor *p = tfm_softmax(tape, scores, mask);
        ck_assert_ptr_nonnull(p);
        const float *pv = tfm_tensor_data_f32(p);
        for (int64_t b = 0; b < CB; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < CT; i++) {
                    int64_t row = ((b * H + h) * CT + i) * CT;
                    double max = -INFINITY, sum = 0.0;
                    for (int64_t j = 0; j < CT; j++)
                        if (combined_keeps(b, i, j) && s[row + j] > max)
                            max = s[row + j];
                    for (int64_t j = 0; j < CT; j++)
                        if (combined_keeps(b, i, j))
                            sum += exp(s[row + j] - max);
                    for (int64_t j = 0; j < CT; j++) {
                        if (combined_keeps(b, i, j))
                            ck_assert_double_eq_tol(pv[row + j], exp(s[row + j] - max) / sum,
                                                    1e-6);
                        else
                            ck_assert_float_eq(pv[row + j], 0.0f);
                    }
                }
    }
    tfm_tape_free(tape);
    tfm_tensor_free(scores);
    tfm_tensor_free(ids);
}
END_TEST

/* Made once without a tape, a mask is the caller's and serves every step. */
START_TEST(masks_without_a_tape_are_the_callers)
{
    const int32_t ids[2 * 3] = {5, 0, 0, 3, 4, 0};
    tfm_tensor *id_tensor = tfm_tensor_from_i32(2, (const int64_t[]){2, 3}, ids);
    tfm_tensor *causal = tfm_mask_causal(NULL, 3, TFM_I32);
    tfm_tensor *padding = tfm_mask_padding(NULL, id_tensor, 0, TFM_I32);
    tfm_tensor *both = tfm_mask_combine(NULL, padding, causal);
    ck_assert_msg(causal && padding && both, "%s", tfm_last_error());
    check_shape(both, 4, (const int64_t[]){2, 1, 3, 3});
    tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 4, (const int64_t[]){2, 1, 3, 3});
    tfm_tape *tape = tfm_tape_create();
    for (int step = 0; step < 3; step++) {
        tfm_tensor *y = tfm_softmax(tape, x, both);
        ck_assert_msg(y != NULL, "%s", tfm_last_error());
        const float *p = tfm_tensor_data_f32(y);
        /* batch 1, query 2 keeps keys 0 and 1 (key 2 is padding) */
        ck_assert_float_eq_tol(p[9 + 6 + 0], 0.5f, 1e-6f);
        ck_assert_float_eq_tol(p[9 + 6 + 2], 0.0f, 1e-6f);
        ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(both);
    tfm_tensor_free(padding);
    tfm_tensor_free(causal);
    tfm_tensor_free(id_tensor);
}
END_TEST

/* PyTorch's bool masks say True = ignore: the opposite of a keep-mask. */
START_TEST(torch_bool_masks_flip_polarity)
{
    const uint8_t masked_out[2 * 3] = {0, 0, 1, 0, 1, 1};
    const int64_t shape[2] = {2, 3};
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *keep = tfm_mask_from_torch_bool(tape, masked_out, 2, shape, TFM_I32);
    tfm_tensor *add = tfm_mask_from_torch_bool(NULL, masked_out, 2, shape, TFM_F32);
    ck_assert_msg(keep && add, "%s", tfm_last_error());
    check_shape(keep, 2, shape);
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(tfm_tensor_data_i32(keep)[i], !masked_out[i]);
        float a = tfm_tensor_data_f32(add)[i];
        ck_assert(masked_out[i] ? isinf(a) && a < 0.0f : a == 0.0f);
    }
    tfm_clear_error();
    ck_assert_ptr_null(tfm_mask_from_torch_bool(tape, NULL, 2, shape, TFM_I32));
    ck_assert_error(TFM_ERR_NULL, "tfm_mask_from_torch_bool: masked_out is NULL");
    ck_assert_ptr_null(tfm_mask_from_torch_bool(tape, masked_out, 5, shape, TFM_I32));
    ck_assert_error(TFM_ERR_ARG, "ndim 5");
    ck_assert_ptr_null(tfm_mask_from_torch_bool(tape, masked_out, 2, shape, 9));
    ck_assert_error(TFM_ERR_ARG, "form 9");
    tfm_tensor_free(add);
    tfm_tape_free(tape);
}
END_TEST

START_TEST(mask_errors)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_clear_error();
    ck_assert_ptr_null(tfm_mask_causal(tape, 0, TFM_I32));
    ck_assert_error(TFM_ERR_ARG, "length 0");
    ck_assert_ptr_null(tfm_mask_causal(tape, 3, 7));
    ck_assert_error(TFM_ERR_ARG, "form 7");

    tfm_tensor *ids = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){2, 3});
    tfm_tensor *fids = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){2, 3});
    tfm_tensor *ids3 = tfm_tensor_zeros(TFM_I32, 3, (const int64_t[]){2, 3, 1});
    ck_assert_ptr_null(tfm_mask_padding(tape, fids, 0, TFM_I32));
    ck_assert_error(TFM_ERR_DTYPE, "ids must be int32");
    ck_assert_ptr_null(tfm_mask_padding(tape, ids3, 0, TFM_I32));
    ck_assert_error(TFM_ERR_SHAPE, "[2,3,1]");
    ck_assert_ptr_null(tfm_mask_padding(tape, ids, 0, -1));
    ck_assert_error(TFM_ERR_ARG, "form -1");
    ck_assert_ptr_null(tfm_mask_padding(tape, NULL, 0, TFM_I32));
    ck_assert_error(TFM_ERR_NULL, "ids is NULL");
    /* a tokenizer without a padding piece says -1: a mask keeping every key */
    ck_assert_ptr_null(tfm_mask_padding(tape, ids, -1, TFM_I32));
    ck_assert_error(TFM_ERR_ARG, "tfm_mask_padding: pad_id -1 is not an id");

    tfm_tensor *keep = tfm_mask_causal(tape, 3, TFM_I32);
    tfm_tensor *add = tfm_mask_causal(tape, 3, TFM_F32);
    tfm_tensor *keep4 = tfm_mask_causal(tape, 4, TFM_I32);
    ck_assert_ptr_null(tfm_mask_combine(tape, keep, add));
    ck_assert_error(TFM_ERR_DTYPE, "int32 keep-mask and b is a float32 additive");
    ck_assert_ptr_null(tfm_mask_combine(tape, keep, keep4));
    ck_assert_error(TFM_ERR_SHAPE, "tfm_mask_combine");
    ck_assert_ptr_null(tfm_mask_combine(tape, NULL, keep));
    ck_assert_error(TFM_ERR_NULL, "a is NULL");
    ck_assert_ptr_null(tfm_mask_combine(tape, keep, NULL));
    ck_assert_error(TFM_ERR_NULL, "b is NULL");
    /* a chain keeps the first cause */
    ck_assert_ptr_null(tfm_mask_combine(tape, tfm_mask_causal(tape, -3, TFM_I32), keep));
    ck_assert_error(TFM_ERR_ARG, "length -3");

    tfm_tensor_free(ids);
    tfm_tensor_free(fids);
    tfm_tensor_free(ids3);
    tfm_tape_free(tape);
}
END_TEST

static Suite *positions_masks_suite(void)
{
    Suite *s = suite_create("nn_positions_masks");
    TCase *pos = tcase_create("positions");
    tcase_add_test(pos, sinusoidal_values);
    tcase_add_test(pos, sinusoidal_odd_width);
    tcase_add_test(pos, sinusoidal_halves_values);
    tcase_add_test(pos, sinusoidal_fairseq_values);
    tcase_add_test(pos, offset_adds_the_right_rows);
    tcase_add_test(pos, sinusoidal_gradient);
    tcase_add_test(pos, learned_parameters);
    tcase_add_test(pos, learned_gradient);
    tcase_add_test(pos, learned_gradient_rows);
    tcase_add_test(pos, positions_errors);
    suite_add_tcase(s, pos);
    TCase *masks = tcase_create("masks");
    tcase_add_test(masks, causal_masks);
    tcase_add_test(masks, padding_masks);
    tcase_add_test(masks, combine_broadcasts);
    tcase_add_test(masks, combine_values);
    tcase_add_test(masks, masks_in_softmax);
    tcase_add_test(masks, mask_errors);
    tcase_add_test(masks, masks_without_a_tape_are_the_callers);
    tcase_add_test(masks, torch_bool_masks_flip_polarity);
    suite_add_tcase(s, masks);
    return s;
}

TFM_CHECK_MAIN(positions_masks_suite)
