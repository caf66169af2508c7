/* Multi-head attention: parameter names, shapes and initialisation as
 * nn.MultiheadAttention (fused) or tutorial 003 (separate), outputs and
 * weights against a double-precision reference (fused and separate, fixed
 * and trainable scale, self and cross, keep and additive masks), gradient
 * checks of every input and parameter, dropout in training and eval, and
 * every error path. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

enum { B = 2, T = 3, S = 4, D = 4, H = 2, DK = D / H };
/* Heads wider than D / H (head_dim, T5's d_kv): an inner width of 6 for D 4. */
enum { WIDE_DK = 3, MAX_INNER = H * WIDE_DK };

/* --- helpers -------------------------------------------------------------------- */

static tfm_layer *make_attention(tfm_params *p, const char *name, int fused, int trainable,
                                 int bias, float dropout, tfm_rng *rng)
{
    tfm_attention_options o;
    tfm_attention_options_init(&o);
    o.d_model = D;
    o.heads = H;
    o.fused_qkv = fused;
    o.trainable_scale = trainable;
    o.scale_init = 1.7f;
    o.bias = bias;
    o.dropout = dropout;
    tfm_layer *layer = tfm_attention_create(p, name, &o, rng);
    ck_assert_msg(layer != NULL, "%s", tfm_last_error());
    return layer;
}

/* Every parameter N(0, 0.5^2) (so zero-initialised biases are exercised),
 * except a trainable scale, which stays at its 1.7. */
static void randomize(tfm_params *p, uint64_t seed)
{
    tfm_rng *rng = tfm_rng_create(seed);
    for (int64_t i = 0; i < tfm_params_count(p); i++) {
        if (strstr(tfm_params_name(p, i), "scale"))
            continue;
        tfm_tensor *t = tfm_params_at(p, i);
        float *v = tfm_tensor_data_f32(t);
        for (int64_t j = 0; j < tfm_tensor_numel(t); j++)
            v[j] = 0.5f * tfm_rng_normal(rng);
    }
    tfm_rng_free(rng);
}

static const float *param(tfm_params *p, const char *prefix, const char *suffix)
{
    char name[256];
    snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    tfm_tensor *t = tfm_params_find(p, name);
    ck_assert_msg(t != NULL, "no parameter %s", name);
    return tfm_tensor_data_f32(t);
}

/* The mask value that scores[b, h, t, s] reads, broadcasting from the right. */
static double mask_at(const tfm_tensor *mask, int b, int h, int t, int s, int *keep)
{
    int64_t shape[4];
    int32_t nd = tfm_tensor_ndim(mask);
    tfm_tensor_shape(mask, shape);
    const int coord[4] = {b, h, t, s};
    int64_t idx = 0;
    for (int32_t i = 0; i < nd; i++)
        idx = idx * shape[i] + (shape[i] == 1 ? 0 : coord[4 - nd + i]);
    if (tfm_tensor_dtype(mask) == TFM_I32) {
        *keep = tfm_tensor_data_i32((tfm_tensor *)mask)[idx] != 0;
        return 0.0;
    }
    *keep = 1;
    return tfm_tensor_data_f32((tfm_tensor *)mask)[idx];
}

/* y[n, out] = x[n, in] W^T + b in double (b may be NULL). */
static void ref_linear(const double *x, int n, int in, int out, const float *w, const float *b,
                       double *y)
{
    for (int r = 0; r < n; r++)
        for (int o = 0; o < out; o++) {
            double acc = b ? b[o] : 0.0;
            for (int i = 0; i < in; i++)
                acc += x[r * in + i] * w[o * in + i];
            y[r * out + o] = acc;
        }
}

/* The attention of layer NAME in p with heads of dk, in double: out [B, T,
 * D], weights [B, H, T, len]. query [B, T, D], memory [B, len, D]. */
static void ref_attention(tfm_params *p, const char *name, int fused, int trainable, int bias,
                          int dk, const float *query, const float *memory, int len,
                          const tfm_tensor *mask, double *out, double *weights)
{
    const int inner = H * dk;
    const float *w[4], *bs[4] = {NULL, NULL, NULL, NULL};
    if (fused) {
        const float *in_w = param(p, name, "in_proj_weight");
        const float *in_b = bias ? param(p, name, "in_proj_bias") : NULL;
        for (int i = 0; i < 3; i++) {
            w[i] = in_w + i * inner * D;
            bs[i] = in_b ? in_b + i * inner : NULL;
        }
    } else {
        static const char *const names[3][2] = {{"q_proj.weight", "q_proj.bias"},
                                                {"k_proj.weight", "k_proj.bias"},
                                                {"v_proj.weight", "v_proj.bias"}};
        for (int i = 0; i < 3; i++) {
            w[i] = param(p, name, names[i][0]);
            bs[i] = bias ? param(p, name, names[i][1]) : NULL;
        }
    }
    w[3] = param(p, name, "out_proj.weight");
    bs[3] = bias ? param(p, name, "out_proj.bias") : NULL;
    double divisor = trainable ? param(p, name, "scale")[0] : sqrt((double)dk);

    double xq[B * T * D], xm[B * S * D], q[B * T * MAX_INNER], k[B * S * MAX_INNER],
        v[B * S * MAX_INNER], ctx[B * T * MAX_INNER];
    for (int i = 0; i < B * T * D; i++)
        xq[i] = query[i];
    for (int i = 0; i < B * len * D; i++)
        xm[i] = memory[i];
    ref_linear(xq, B * T, D, inner, w[0], bs[0], q);
    ref_linear(xm, B * len, D, inner, w[1], bs[1], k);
    ref_linear(xm, B * len, D, inner, w[2], bs[2], v);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                double s[S], max = -INFINITY, sum = 0.0;
                for (int j = 0; j < len; j++) {
                    double dot = 0.0;
                    for (int e = 0; e < dk; e++)
                        dot += q[(b * T + t) * inner + h * dk + e] *
                               k[(b * len + j) * inner + h * dk + e];
                    s[j] = dot / divisor;
                    if (mask) {
                        int keep;
                        double add = mask_at(mask, b, h, t, j, &keep);
                        s[j] = keep ? s[j] + add : -INFINITY;
                    }
                    max = s[j] > max ? s[j] : max;
                }
                double *wr = weights + ((b * H + h) * T + t) * len;
                for (int j = 0; j < len; j++) {
                    wr[j] = max == -INFINITY ? 0.0 : exp(s[j] - max);
                    sum += wr[j];
                }
                for (int j = 0; j < len; j++)
                    wr[j] = sum > 0.0 ? wr[j] / sum : 0.0;
                for (int e = 0; e < dk; e++) {
                    double acc = 0.0;
                    for (int j = 0; j < len; j++)
                        acc += wr[j] * v[(b * len + j) * inner + h * dk + e];
                    ctx[(b * T + t) * inner + h * dk + e] = acc;
                }
            }
    ref_linear(ctx, B * T, inner, D, w[3], bs[3], out);
}

static void assert_close(const float *got, const double *want, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 1e-5 + 1e-4 * fabs(want[i]),
                      "%s[%d]: %.7g vs %.7g", what, i, (double)got[i], want[i]);
}

static void assert_error(tfm_status status, const char *fragment)
{
    ck_assert_msg(tfm_last_status() == status, "status %s, wanted %s: %s",
                  tfm_status_name(tfm_last_status()), tfm_status_name(status), tfm_last_error());
    ck_assert_msg(strstr(tfm_last_error(), fragment) != NULL, "\"%s\" lacks \"%s\"",
                  tfm_last_error(), fragment);
}

/* The masks every value test runs with, for a key length len. */
enum { MASK_NONE, MASK_PADDING, MASK_CAUSAL, MASK_ADDITIVE, MASK_FULL, MASK_KINDS };

static tfm_tensor *make_mask(int kind, int len)
{
    switch (kind) {
    case MASK_PADDING: { /* [B, 1, 1, len]: the second sequence's last key is padding */
        int32_t m[B * S];
        for (int b = 0; b < B; b++)
            for (int j = 0; j < len; j++)
                m[b * len + j] = !(b == 1 && j == len - 1);
        return tfm_tensor_from_i32(4, (const int64_t[]){B, 1, 1, len}, m);
    }
    case MASK_CAUSAL: { /* [T, len] keep-mask, j <= t */
        int32_t m[T * S];
        for (int t = 0; t < T; t++)
            for (int j = 0; j < len; j++)
                m[t * len + j] = j <= t;
        return tfm_tensor_from_i32(2, (const int64_t[]){T, len}, m);
    }
    case MASK_ADDITIVE: { /* [1, 1, T, len]: -inf above the diagonal, a finite bias below */
        float m[T * S];
        for (int t = 0; t < T; t++)
            for (int j = 0; j < len; j++)
                m[t * len + j] = j > t ? -INFINITY : 0.25f * (float)(t - j);
        return tfm_tensor_from_f32(4, (const int64_t[]){1, 1, T, len}, m);
    }
    case MASK_FULL: { /* [B, H, T, len] keep-mask that differs per head */
        int32_t m[B * H * T * S];
        for (int i = 0; i < B * H * T * len; i++)
            m[i] = (i * 7 + i / len) % 3 != 0 || i % len == 0;
        return tfm_tensor_from_i32(4, (const int64_t[]){B, H, T, len}, m);
    }
    default:
        return NULL;
    }
}

/* --- options, names, initialisation ---------------------------------------------- */

START_TEST(options_defaults)
{
    tfm_attention_options o;
    memset(&o, 0xff, sizeof o);
    tfm_attention_options_init(&o);
    ck_assert_uint_eq(o.struct_size, sizeof o);
    ck_assert_int_eq(o.d_model, 512);
    ck_assert_int_eq(o.heads, 8);
    ck_assert_int_eq(o.bias, 1);
    ck_assert_int_eq(o.fused_qkv, 1);
    ck_assert_float_eq(o.dropout, 0.0f);
    ck_assert_int_eq(o.trainable_scale, 0);
    ck_assert_float_eq(o.scale_init, 0.0f); /* sqrt(d_model) */
    ck_assert_int_eq(o.head_dim, 0);        /* d_model / heads */
    tfm_attention_options_init_sized(NULL, sizeof(tfm_attention_options)); /* harmless */
}
END_TEST

typedef struct expected { const char *name; int32_t ndim; int64_t shape[2]; } expected;

static void expect_params(tfm_params *p, const expected *want, int n)
{
    ck_assert_int_eq(tfm_params_count(p), n);
    for (int i = 0; i < n; i++) {
        ck_assert_str_eq(tfm_params_name(p, i), want[i].name);
        tfm_tensor *t = tfm_params_at(p, i);
        ck_assert_int_eq(tfm_tensor_ndim(t), want[i].ndim);
        for (int32_t d = 0; d < want[i].ndim; d++)
            ck_assert_int_eq(tfm_tensor_dim(t, d), want[i].shape[d]);
        ck_assert(tfm_tensor_requires_grad(t));
    }
}

/* nn.MultiheadAttention(4, 2).state_dict() and tutorial 003's names (with
 * q_proj/k_proj/v_proj/out_proj for linear_Q/K/V/O), in state_dict order. */
START_TEST(parameter_names_and_shapes)
{
    static const expected fused[] = {
        {"attn.in_proj_weight", 2, {12, 4}}, {"attn.in_proj_bias", 1, {12}},
        {"attn.out_proj.weight", 2, {4, 4}}, {"attn.out_proj.bias", 1, {4}}};
    static const expected fused_scale[] = {
        {"attn.in_proj_weight", 2, {12, 4}}, {"attn.in_proj_bias", 1, {12}},
        {"attn.scale", 1, {1}},
        {"attn.out_proj.weight", 2, {4, 4}}, {"attn.out_proj.bias", 1, {4}}};
    static const expected fused_no_bias[] = {
        {"attn.in_proj_weight", 2, {12, 4}}, {"attn.out_proj.weight", 2, {4, 4}}};
    static const expected separate_scale[] = {
        {"attn.scale", 1, {1}},
        {"attn.q_proj.weight", 2, {4, 4}}, {"attn.q_proj.bias", 1, {4}},
        {"attn.k_proj.weight", 2, {4, 4}}, {"attn.k_proj.bias", 1, {4}},
        {"attn.v_proj.weight", 2, {4, 4}}, {"attn.v_proj.bias", 1, {4}},
        {"attn.out_proj.weight", 2, {4, 4}}, {"attn.out_proj.bias", 1, {4}}};
    static const expected separate_no_bias[] = {
        {"attn.q_proj.weight", 2, {4, 4}}, {"attn.k_proj.weight", 2, {4, 4}},
        {"attn.v_proj.weight", 2, {4, 4}}, {"attn.out_proj.weight", 2, {4, 4}}};
    static const struct { int fused, trainable, bias; const expected *want; int n; } cases[] = {
        {1, 0, 1, fused, 4}, {1, 1, 1, fused_scale, 5}, {1, 0, 0, fused_no_bias, 2},
        {0, 1, 1, separate_scale, 9}, {0, 0, 0, separate_no_bias, 4}};
    tfm_rng *rng = tfm_rng_create(1);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tfm_params *p = tfm_params_create();
        tfm_layer *layer = make_attention(p, "attn", cases[c].fused, cases[c].trainable,
                                          cases[c].bias, 0.0f, rng);
        ck_assert_str_eq(tfm_layer_kind(layer), "attention");
        expect_params(p, cases[c].want, cases[c].n);
        tfm_layer_free(layer);
        tfm_params_free(p);
    }
    tfm_rng_free(rng);
}
END_TEST

/* Largest |value| of a parameter. */
static float max_abs(tfm_params *p, const char *name)
{
    tfm_tensor *t = tfm_params_find(p, name);
    const float *v = tfm_tensor_data_f32(t);
    float m = 0.0f;
    for (int64_t i = 0; i < tfm_tensor_numel(t); i++)
        m = fabsf(v[i]) > m ? fabsf(v[i]) : m;
    return m;
}

/* xavier_uniform on [3D, D]: bound sqrt(6 / (D + 3D)); out_proj.weight as
 * nn.Linear: 1/sqrt(D); MultiheadAttention's biases 0; a separate q_proj is
 * an nn.Linear with its uniform bias. Width 64 so the draws fill the ranges. */
START_TEST(initialisation)
{
    tfm_rng *rng = tfm_rng_create(2);
    tfm_params *p = tfm_params_create();
    tfm_attention_options o;
    tfm_attention_options_init(&o);
    o.d_model = 64;
    o.heads = 4;
    o.trainable_scale = 1;
    o.scale_init = 8.0f;
    tfm_layer *fused = tfm_attention_create(p, "f", &o, rng);
    o.fused_qkv = 0;
    tfm_layer *separate = tfm_attention_create(p, "s", &o, rng);
    ck_assert_ptr_nonnull(fused);
    ck_assert_ptr_nonnull(separate);
    float xavier = sqrtf(6.0f / (64 + 3 * 64)), linear = 1.0f / 8.0f;
    ck_assert_float_le(max_abs(p, "f.in_proj_weight"), xavier);
    ck_assert_float_gt(max_abs(p, "f.in_proj_weight"), 0.95f * xavier);
    ck_assert_float_eq(max_abs(p, "f.in_proj_bias"), 0.0f);
    ck_assert_float_le(max_abs(p, "f.out_proj.weight"), linear);
    ck_assert_float_gt(max_abs(p, "f.out_proj.weight"), 0.9f * linear);
    ck_assert_float_eq(max_abs(p, "f.out_proj.bias"), 0.0f);
    ck_assert_float_eq(param(p, "f", "scale")[0], 8.0f);
    ck_assert_float_le(max_abs(p, "s.q_proj.weight"), linear);
    ck_assert_float_gt(max_abs(p, "s.q_proj.weight"), 0.9f * linear);
    ck_assert_float_le(max_abs(p, "s.q_proj.bias"), linear);
    ck_assert_float_gt(max_abs(p, "s.q_proj.bias"), 0.0f);
    tfm_layer_free(fused);
    tfm_layer_free(separate);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

/* --- values ----------------------------------------------------------------------- */

/* The layer's output [B, T, D] and weights [B, H, T, len] for query over
 * mem (len keys) against ref_attention's; layout is {fused, trainable,
 * bias, d_k} as the layer was made. Resets the tape. */
static void expect_reference(tfm_tape *tape, tfm_params *p, const tfm_layer *layer,
                             const int layout[4], const tfm_tensor *query, const tfm_tensor *mem,
                             int len, const tfm_tensor *mask, const char *what)
{
    tfm_tensor *weights = NULL;
    tfm_tensor *out = tfm_attention_forward(tape, layer, query, mem, mask, NULL, &weights);
    ck_assert_msg(out != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tensor_ndim(out), 3);
    ck_assert_int_eq(tfm_tensor_dim(out, 0), B);
    ck_assert_int_eq(tfm_tensor_dim(out, 1), T);
    ck_assert_int_eq(tfm_tensor_dim(out, 2), D);
    ck_assert_int_eq(tfm_tensor_ndim(weights), 4);
    ck_assert_int_eq(tfm_tensor_dim(weights, 1), H);
    ck_assert_int_eq(tfm_tensor_dim(weights, 3), len);
    double want[B * T * D], want_w[B * H * T * S];
    ref_attention(p, "a", layout[0], layout[1], layout[2], layout[3],
                  tfm_tensor_data_f32((tfm_tensor *)query), tfm_tensor_data_f32((tfm_tensor *)mem),
                  len, mask, want, want_w);
    assert_close(tfm_tensor_data_f32(out), want, B * T * D, what);
    assert_close(tfm_tensor_data_f32(weights), want_w, B * H * T * len, what);
    tfm_tape_reset(tape);
}

/* Every layout x scale x self/cross x mask against the double reference. */
START_TEST(values_against_reference)
{
    tfm_rng *rng = tfm_rng_create(3);
    tfm_tensor *query = gc_random(3, (const int64_t[]){B, T, D}, 10);
    tfm_tensor *memory = gc_random(3, (const int64_t[]){B, S, D}, 11);
    tfm_tape *tape = tfm_tape_create();
    for (int fused = 0; fused <= 1; fused++)
        for (int trainable = 0; trainable <= 1; trainable++)
            for (int bias = 0; bias <= 1; bias++)
                for (int cross = 0; cross <= 1; cross++)
                    for (int kind = MASK_NONE; kind < MASK_KINDS; kind++) {
                        tfm_params *p = tfm_params_create();
                        tfm_layer *layer = make_attention(p, "a", fused, trainable, bias, 0.0f,
                                                          rng);
                        randomize(p, 100 + (uint64_t)kind);
                        int len = cross ? S : T;
                        const tfm_tensor *mem = cross ? memory : query;
                        tfm_tensor *mask = make_mask(kind, len);
                        char what[96];
                        snprintf(what, sizeof what, "fused %d scale %d bias %d cross %d mask %d",
                                 fused, trainable, bias, cross, kind);
                        expect_reference(tape, p, layer, (int[]){fused, trainable, bias, DK},
                                         query, mem, len, mask, what);
                        tfm_tensor_free(mask);
                        tfm_layer_free(layer);
                        tfm_params_free(p);
                    }
    tfm_tape_free(tape);
    tfm_tensor_free(query);
    tfm_tensor_free(memory);
    tfm_rng_free(rng);
}
END_TEST

/* Rows of the weights sum to 1, masked keys get exactly 0, and a row whose
 * keys are all dropped is zeros, in both forms. */
START_TEST(weights_respect_masks)
{
    tfm_rng *rng = tfm_rng_create(4);
    tfm_params *p = tfm_params_create();
    tfm_layer *layer = make_attention(p, "a", 1, 0, 1, 0.0f, rng);
    randomize(p, 5);
    tfm_tensor *query = gc_random(3, (const int64_t[]){B, T, D}, 12);
    tfm_tensor *memory = gc_random(3, (const int64_t[]){B, S, D}, 13);
    tfm_tape *tape = tfm_tape_create();
    for (int kind = MASK_PADDING; kind < MASK_KINDS; kind++) {
        tfm_tensor *mask = make_mask(kind, S);
        tfm_tensor *weights;
        ck_assert_ptr_nonnull(tfm_attention_forward(tape, layer, query, memory, mask, NULL, &weights));
        const float *w = tfm_tensor_data_f32(weights);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    double sum = 0.0;
                    for (int j = 0; j < S; j++) {
                        int keep;
                        mask_at(mask, b, h, t, j, &keep);
                        float wj = w[((b * H + h) * T + t) * S + j];
                        if (!keep || (kind == MASK_ADDITIVE && j > t))
                            ck_assert_float_eq(wj, 0.0f);
                        else
                            ck_assert_float_gt(wj, 0.0f);
                        sum += wj;
                    }
                    ck_assert_double_eq_tol(sum, 1.0, 1e-6);
                }
        tfm_tensor_free(mask);
    }
    /* second batch row fully dropped: zeros in both forms, the same bits */
    int32_t keep[B * S] = {1, 1, 0, 1, 0, 0, 0, 0};
    float add[B * S] = {0, 0, -INFINITY, 0, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    tfm_tensor *km = tfm_tensor_from_i32(4, (const int64_t[]){B, 1, 1, S}, keep);
    tfm_tensor *am = tfm_tensor_from_f32(4, (const int64_t[]){B, 1, 1, S}, add);
    tfm_tensor *wk, *wa;
    ck_assert_ptr_nonnull(tfm_attention_forward(tape, layer, query, memory, km, NULL, &wk));
    ck_assert_ptr_nonnull(tfm_attention_forward(tape, layer, query, memory, am, NULL, &wa));
    ck_assert_mem_eq(tfm_tensor_data_f32(wk), tfm_tensor_data_f32(wa),
                     B * H * T * S * sizeof(float));
    for (int i = H * T * S; i < B * H * T * S; i++)
        ck_assert_float_eq(tfm_tensor_data_f32(wk)[i], 0.0f);
    tfm_tensor_free(km);
    tfm_tensor_free(am);
    tfm_tape_free(tape);
    tfm_tensor_free(query);
    tfm_tensor_free(memory);
    tfm_layer_free(layer);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

/* Self-attention with fused weights is one GEMM for Q, K and V: one record
 * fewer than cross-attention's two; no record requires grad with recording
 * off. */
START_TEST(fused_self_attention_is_one_product)
{
    tfm_rng *rng = tfm_rng_create(6);
    tfm_params *p = tfm_params_create();
    tfm_layer *layer = make_attention(p, "a", 1, 0, 1, 0.0f, rng);
    tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, D}, 14);
    tfm_tensor *y = gc_random(3, (const int64_t[]){B, T, D}, 15);
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_nonnull(tfm_attention_forward(tape, layer, x, x, NULL, NULL, NULL));
    int64_t self_nodes = tfm_tape_node_count(tape);
    tfm_tape_reset(tape);
    ck_assert_ptr_nonnull(tfm_attention_forward(tape, layer, x, y, NULL, NULL, NULL));
    ck_assert_int_eq(tfm_tape_node_count(tape), self_nodes + 1);
    tfm_tape_reset(tape);
    tfm_tape_set_recording(tape, 0);
    tfm_tensor *out = tfm_attention_forward(tape, layer, x, y, NULL, NULL, NULL);
    ck_assert_ptr_nonnull(out);
    ck_assert_int_eq(tfm_tensor_requires_grad(out), 0);
    ck_assert_int_eq(tfm_tape_node_count(tape), 0);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(y);
    tfm_layer_free(layer);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

/* --- gradients ----------------------------------------------------------------- */

typedef struct grad_ctx {
    tfm_layer *layer;
    const tfm_tensor *mask;
    int cross;      /* in[1] is the memory */
    int both;       /* self- plus cross-attention of the same layer, summed */
    const tfm_tensor *key_padding; /* with mask, for the one attention (not both) */
} grad_ctx;

static tfm_tensor *build_attention(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    const grad_ctx *g = ctx;
    if (g->both)
        return tfm_add(tape, tfm_attention_forward(tape, g->layer, in[0], in[0], g->mask, NULL, NULL),
                       tfm_attention_forward(tape, g->layer, in[0], in[1], NULL, NULL, NULL));
    return tfm_attention_forward(tape, g->layer, in[0], g->cross ? in[1] : in[0], g->mask,
                                 g->key_padding, NULL);
}

/* in = query, memory (both made to require grad), then every parameter of
 * p; returns their count. */
static int checked_inputs(tfm_tensor **in, tfm_tensor *query, tfm_tensor *memory, tfm_params *p)
{
    int n = 0;
    in[n++] = query;
    in[n++] = memory;
    tfm_tensor_set_requires_grad(query, 1);
    tfm_tensor_set_requires_grad(memory, 1);
    for (int64_t i = 0; i < tfm_params_count(p); i++)
        in[n++] = tfm_params_at(p, i);
    return n;
}

/* query, memory and every parameter (scale included), for each layout. */
START_TEST(gradients)
{
    tfm_rng *rng = tfm_rng_create(7);
    tfm_tensor *query = gc_random(3, (const int64_t[]){B, T, D}, 16);
    tfm_tensor *memory = gc_random(3, (const int64_t[]){B, S, D}, 17);
    for (int fused = 0; fused <= 1; fused++)
        for (int trainable = 0; trainable <= 1; trainable++)
            for (int mode = 0; mode < 3; mode++) { /* self, cross, both */
                tfm_params *p = tfm_params_create();
                grad_ctx g = {make_attention(p, "a", fused, trainable, 1, 0.0f, rng), NULL,
                              mode == 1, mode == 2, NULL};
                randomize(p, 200 + (uint64_t)mode);
                tfm_tensor *mask = make_mask(mode == 1 ? MASK_PADDING : MASK_CAUSAL,
                                             mode == 1 ? S : T);
                g.mask = mask;
                tfm_tensor *in[16];
                ck_assert_gradcheck(build_attention, &g, in, checked_inputs(in, query, memory, p));
                tfm_tensor_free(mask);
                tfm_layer_free(g.layer);
                tfm_params_free(p);
            }
    tfm_tensor_free(query);
    tfm_tensor_free(memory);
    tfm_rng_free(rng);
}
END_TEST

/* Heads of 8 and 16 columns take the attention core's own loops instead of
 * the BLAS (lib/ops/attention.c): self- and cross-attention with a mask
 * and a trainable scale, 3 queries against 4, 11 and 37 keys (rows of keys
 * shorter than a vector, of a vector and a tail, of four vectors and a
 * tail). */
/* Kept and recomputed weights (TFM_RECOMPUTE_ATTENTION_WEIGHTS) alike. */
START_TEST(gradients_of_narrow_heads)
{
    tfm_rng *rng = tfm_rng_create(12);
    for (int dk = 8; dk <= 16; dk += 8)
        for (int k = 0; k < 6; k++) {
            uint32_t recompute = k >= 3 ? TFM_RECOMPUTE_ATTENTION_WEIGHTS : 0;
            int64_t d = 2 * dk, keys = (int64_t[]){S, 11, 37}[k % 3];
            tfm_params *p = tfm_params_create();
            tfm_attention_options o;
            tfm_attention_options_init(&o);
            o.d_model = d;
            o.heads = 2;
            o.trainable_scale = 1;
            o.scale_init = 1.7f;
            grad_ctx g = {tfm_attention_create(p, "a", &o, rng), NULL, 0, 1, NULL};
            ck_assert_msg(g.layer != NULL, "%s", tfm_last_error());
            ck_assert_int_eq(tfm_layer_set_recompute(g.layer, recompute), TFM_OK);
            randomize(p, 300 + (uint64_t)dk);
            /* the scores' spread as at D = 4: the steps stay small against
             * the softmax's curvature */
            for (int64_t i = 0; i < tfm_params_count(p); i++) {
                tfm_tensor *t = tfm_params_at(p, i);
                for (int64_t j = 0; j < tfm_tensor_numel(t); j++)
                    tfm_tensor_data_f32(t)[j] *= sqrtf((float)D / (float)d);
            }
            g.mask = make_mask(MASK_CAUSAL, T);
            tfm_tensor *in[16];
            int n = checked_inputs(in, gc_random(3, (const int64_t[]){B, T, d}, 31),
                                   gc_random(3, (const int64_t[]){B, keys, d}, 32), p);
            gc_options go = gc_default_options(); /* 1e-2 is too coarse at 37 keys */
            go.step = 2e-3;
            char report[512];
            ck_assert_msg(gradcheck(build_attention, &g, in, n, go, report, sizeof report), "%s",
                          report);
            tfm_tensor_free(in[0]);
            tfm_tensor_free(in[1]);
            tfm_tensor_free((tfm_tensor *)g.mask);
            tfm_layer_free(g.layer);
            tfm_params_free(p);
        }
    tfm_rng_free(rng);
}
END_TEST

/* Heads of head_dim 3 in D 4 (T5's d_kv: an inner width of 6, not D): the
 * projections [6, 4] in, [4, 6] out (fused: in_proj_weight [18, 4]); the
 * values of both layouts, self- and cross-attention, against the double
 * reference; and every gradient (query, memory, parameters) against
 * finite differences. */
START_TEST(inner_width_other_than_d_model)
{
    static const expected fused_names[] = {
        {"a.in_proj_weight", 2, {3 * MAX_INNER, D}}, {"a.in_proj_bias", 1, {3 * MAX_INNER}},
        {"a.out_proj.weight", 2, {D, MAX_INNER}}, {"a.out_proj.bias", 1, {D}}};
    static const expected separate_names[] = {
        {"a.q_proj.weight", 2, {MAX_INNER, D}}, {"a.q_proj.bias", 1, {MAX_INNER}},
        {"a.k_proj.weight", 2, {MAX_INNER, D}}, {"a.k_proj.bias", 1, {MAX_INNER}},
        {"a.v_proj.weight", 2, {MAX_INNER, D}}, {"a.v_proj.bias", 1, {MAX_INNER}},
        {"a.out_proj.weight", 2, {D, MAX_INNER}}, {"a.out_proj.bias", 1, {D}}};
    tfm_rng *rng = tfm_rng_create(21);
    tfm_tensor *query = gc_random(3, (const int64_t[]){B, T, D}, 22);
    tfm_tensor *memory = gc_random(3, (const int64_t[]){B, S, D}, 23);
    tfm_tape *tape = tfm_tape_create();
    for (int fused = 0; fused <= 1; fused++) {
        tfm_params *p = tfm_params_create();
        tfm_attention_options o;
        tfm_attention_options_init(&o);
        o.d_model = D;
        o.heads = H;
        o.head_dim = WIDE_DK;
        o.fused_qkv = fused;
        grad_ctx g = {tfm_attention_create(p, "a", &o, rng), NULL, 0, 1, NULL};
        ck_assert_msg(g.layer != NULL, "%s", tfm_last_error());
        expect_params(p, fused ? fused_names : separate_names, fused ? 4 : 8);
        randomize(p, 400 + (uint64_t)fused);
        for (int cross = 0; cross <= 1; cross++) {
            int len = cross ? S : T;
            const tfm_tensor *mem = cross ? memory : query;
            tfm_tensor *mask = make_mask(cross ? MASK_PADDING : MASK_CAUSAL, len);
            char what[64];
            snprintf(what, sizeof what, "head_dim %d fused %d cross %d", WIDE_DK, fused, cross);
            expect_reference(tape, p, g.layer, (int[]){fused, 0, 1, WIDE_DK}, query, mem, len,
                             mask, what);
            tfm_tensor_free(mask);
        }
        g.mask = make_mask(MASK_CAUSAL, T); /* self- plus cross-attention */
        tfm_tensor *in[16];
        ck_assert_gradcheck(build_attention, &g, in, checked_inputs(in, query, memory, p));
        tfm_tensor_free((tfm_tensor *)g.mask);
        tfm_layer_free(g.layer);
        tfm_params_free(p);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(query);
    tfm_tensor_free(memory);
    tfm_rng_free(rng);
}
END_TEST

/* Queries with no key to attend to, from PyTorch's bool masks in both
 * forms: cross-attention where the second batch row's keys are all
 * padding, and self-attention under a causal mask where its first key is
 * padding (left padding: its first query has no key). Such a query's
 * context is 0, so its output is the output projection's bias; both forms
 * give the same bits, and the gradients (weights kept or recomputed) pass
 * the finite-difference check. */
START_TEST(queries_with_no_key)
{
    tfm_rng *rng = tfm_rng_create(13);
    tfm_params *p = tfm_params_create();
    tfm_layer *layer = make_attention(p, "a", 1, 0, 1, 0.0f, rng);
    randomize(p, 14);
    const float *bias = param(p, "a", "out_proj.bias");
    tfm_tensor *in[8];
    int n = checked_inputs(in, gc_random(3, (const int64_t[]){B, T, D}, 33),
                           gc_random(3, (const int64_t[]){B, S, D}, 34), p);
    static const uint8_t memory_padding[B * S] = {0, 0, 0, 1, 1, 1, 1, 1};
    static const uint8_t self_padding[B * T] = {0, 0, 0, 1, 0, 0};
    uint8_t causal[T * T];
    for (int t = 0; t < T; t++)
        for (int j = 0; j < T; j++)
            causal[t * T + j] = j > t; /* PyTorch's True: masked */
    tfm_tape *tape = tfm_tape_create();
    for (int cross = 0; cross <= 1; cross++) {
        float out[2][B * T * D];
        for (int f = 0; f < 2; f++) {
            tfm_dtype form = f ? TFM_F32 : TFM_I32;
            int64_t keys = cross ? S : T;
            grad_ctx g = {layer,
                          cross ? NULL : tfm_mask_from_torch_bool(NULL, causal, 2,
                                                                  (const int64_t[]){T, T}, form),
                          cross, 0,
                          tfm_mask_from_torch_bool(NULL, cross ? memory_padding : self_padding,
                                                   2, (const int64_t[]){B, keys}, form)};
            ck_assert_ptr_nonnull(g.key_padding);
            ck_assert_int_eq(tfm_tensor_read_f32(build_attention(tape, in, &g), out[f],
                                                 B * T * D), TFM_OK);
            for (uint32_t recompute = 0; recompute <= TFM_RECOMPUTE_ATTENTION_WEIGHTS;
                 recompute += TFM_RECOMPUTE_ATTENTION_WEIGHTS) {
                ck_assert_int_eq(tfm_layer_set_recompute(layer, recompute), TFM_OK);
                ck_assert_gradcheck(build_attention, &g, in, n);
            }
            ck_assert_int_eq(tfm_layer_set_recompute(layer, 0), TFM_OK);
            tfm_tensor_free((tfm_tensor *)g.mask);
            tfm_tensor_free((tfm_tensor *)g.key_padding);
            ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
        }
        ck_assert_mem_eq(out[0], out[1], sizeof out[0]);
        /* the queries with no key: all of row 1's in cross-attention, its
         * first in self-attention */
        for (int t = 0; t < (cross ? T : 1); t++)
            for (int e = 0; e < D; e++)
                ck_assert_float_eq_tol(out[0][(T + t) * D + e], bias[e], 1e-6f);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(in[0]);
    tfm_tensor_free(in[1]);
    tfm_layer_free(layer);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

/* An additive mask that requires grad gets the scores' gradient. */
static tfm_tensor *build_with_mask(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    return tfm_attention_forward(tape, ctx, in[0], in[1], in[2], NULL, NULL);
}

START_TEST(gradient_of_additive_mask)
{
    tfm_rng *rng = tfm_rng_create(8);
    tfm_params *p = tfm_params_create();
    tfm_layer *layer = make_attention(p, "a", 1, 0, 1, 0.0f, rng);
    randomize(p, 9);
    tfm_tensor *in[3] = {gc_random(3, (const int64_t[]){B, T, D}, 18),
                         gc_random(3, (const int64_t[]){B, S, D}, 19),
                         gc_random(4, (const int64_t[]){1, H, T, S}, 20)};
    for (int i = 0; i < 3; i++)
        tfm_tensor_set_requires_grad(in[i], 1);
    ck_assert_gradcheck(build_with_mask, layer, in, 3);
    for (int i = 0; i < 3; i++)
        tfm_tensor_free(in[i]);
    tfm_layer_free(layer);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

/* The weights handed out are differentiable: a loss on them alone, and on
 * them and the context together, reaches the inputs, the parameters (the
 * trainable scale included) and an additive mask. */
typedef struct weights_ctx {
    tfm_layer *layer;
    int with_context;
} weights_ctx;

static tfm_tensor *build_weights(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    const weights_ctx *w = ctx;
    tfm_tensor *weights = NULL;
    tfm_tensor *context = tfm_attention_forward(tape, w->layer, in[0], in[1], in[2], NULL, &weights);
    if (!context)
        return NULL;
    tfm_tensor *flat_weights = tfm_reshape(tape, weights, 1, (const int64_t[]){-1});
    if (!w->with_context)
        return flat_weights;
    const tfm_tensor *parts[] = {tfm_reshape(tape, context, 1, (const int64_t[]){-1}),
                                 flat_weights};
    return tfm_concat(tape, parts, 2, 0);
}

START_TEST(gradients_through_the_weights)
{
    tfm_rng *rng = tfm_rng_create(10);
    for (int trainable = 0; trainable <= 1; trainable++)
        for (int with_context = 0; with_context <= 1; with_context++) {
            tfm_params *p = tfm_params_create();
            weights_ctx w = {make_attention(p, "a", 1, trainable, 1, 0.0f, rng), with_context};
            randomize(p, 11);
            tfm_tensor *in[16] = {gc_random(3, (const int64_t[]){B, T, D}, 28),
                                  gc_random(3, (const int64_t[]){B, S, D}, 29),
                                  gc_random(4, (const int64_t[]){1, H, T, S}, 30)};
            int n = 3;
            for (int i = 0; i < n; i++)
                tfm_tensor_set_requires_grad(in[i], 1);
            for (int64_t i = 0; i < tfm_params_count(p); i++)
                in[n++] = tfm_params_at(p, i);
            ck_assert_gradcheck(build_weights, &w, in, n);
            for (int i = 0; i < 3; i++)
                tfm_tensor_free(in[i]);
            tfm_layer_free(w.layer);
            tfm_params_free(p);
        }
    tfm_rng_free(rng);
}
END_TEST

/* --- training and eval -------------------------------------------------------------- */

/* The layer's rng restarts for every evaluation, so each drops the same. */
typedef struct dropout_ctx {
    tfm_layer *layer;
    tfm_rng *rng;
    const tfm_tensor *mask;
} dropout_ctx;

static tfm_tensor *build_with_dropout(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    const dropout_ctx *d = ctx;
    tfm_rng_seed(d->rng, 77);
    return tfm_attention_forward(tape, d->layer, in[0], in[1], d->mask, NULL, NULL);
}

START_TEST(gradients_with_dropout)
{
    for (int trainable = 0; trainable <= 1; trainable++) {
        tfm_rng *rng = tfm_rng_create(24);
        tfm_params *p = tfm_params_create();
        dropout_ctx d = {make_attention(p, "a", 1 - trainable, trainable, 1, 0.3f, rng), rng,
                         NULL};
        randomize(p, 25);
        tfm_tensor *mask = make_mask(MASK_PADDING, S);
        d.mask = mask;
        tfm_tensor *in[16] = {gc_random(3, (const int64_t[]){B, T, D}, 26),
                              gc_random(3, (const int64_t[]){B, S, D}, 27)};
        int n = 2;
        for (int i = 0; i < 2; i++)
            tfm_tensor_set_requires_grad(in[i], 1);
        for (int64_t i = 0; i < tfm_params_count(p); i++)
            in[n++] = tfm_params_at(p, i);
        ck_assert_gradcheck(build_with_dropout, &d, in, n);
        tfm_tensor_free(in[0]);
        tfm_tensor_free(in[1]);
        tfm_tensor_free(mask);
        tfm_layer_free(d.layer);
        tfm_params_free(p);
        tfm_rng_free(rng);
    }
}
END_TEST

START_TEST(dropout_in_training_only)
{
    tfm_rng *rng = tfm_rng_create(21);
    tfm_params *p = tfm_params_create();
    tfm_layer *layer = make_attention(p, "a", 1, 0, 1, 0.5f, rng);
    randomize(p, 22);
    tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, D}, 23);
    tfm_tape *tape = tfm_tape_create();
    enum { N = B * T * D };
    float train1[N], train2[N], eval1[N], eval2[N];
    tfm_tensor *w;
    ck_assert_int_eq(tfm_tensor_read_f32(tfm_attention_forward(tape, layer, x, x, NULL, NULL, &w),
                                         train1, N), TFM_OK);
    /* weights_out is before dropout: rows still sum to 1 */
    for (int r = 0; r < B * H * T; r++) {
        double sum = 0.0;
        for (int j = 0; j < T; j++)
            sum += tfm_tensor_data_f32(w)[r * T + j];
        ck_assert_double_eq_tol(sum, 1.0, 1e-6);
    }
    ck_assert_int_eq(tfm_tensor_read_f32(tfm_attention_forward(tape, layer, x, x, NULL, NULL, NULL),
                                         train2, N), TFM_OK);
    ck_assert_int_eq(tfm_layer_set_training(layer, 0), TFM_OK);
    ck_assert_int_eq(tfm_tensor_read_f32(tfm_attention_forward(tape, layer, x, x, NULL, NULL, NULL),
                                         eval1, N), TFM_OK);
    ck_assert_int_eq(tfm_tensor_read_f32(tfm_attention_forward(tape, layer, x, x, NULL, NULL, NULL),
                                         eval2, N), TFM_OK);
    ck_assert_mem_eq(eval1, eval2, sizeof eval1);
    ck_assert(memcmp(train1, train2, sizeof train1) != 0);
    ck_assert(memcmp(train1, eval1, sizeof train1) != 0);
    double want[N], want_w[B * H * T * S];
    ref_attention(p, "a", 1, 0, 1, DK, tfm_tensor_data_f32(x), tfm_tensor_data_f32(x), T, NULL, want,
                  want_w);
    assert_close(eval1, want, N, "eval");
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_layer_free(layer);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

/* --- libtfm's threads -------------------------------------------------------------- */

/* Outputs and gradients with the heads split among threads, for one layout. */
static void run_with_threads(int32_t threads, int trainable, uint32_t recompute, float *out,
                             float *grads, int64_t grads_count)
{
    ck_assert_int_eq(tfm_set_num_threads(threads), TFM_OK);
    ck_assert_int_eq(tfm_get_num_threads(), threads);
    tfm_rng *rng = tfm_rng_create(31);
    tfm_params *p = tfm_params_create();
    tfm_layer *layer = make_attention(p, "a", !trainable, trainable, 1, 0.25f, rng);
    ck_assert_int_eq(tfm_layer_set_recompute(layer, recompute), TFM_OK);
    randomize(p, 32);
    tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, D}, 33);
    tfm_tensor *memory = gc_random(3, (const int64_t[]){B, S, D}, 34);
    tfm_tensor *mask = make_mask(MASK_PADDING, S);
    tfm_tensor_set_requires_grad(x, 1);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_attention_forward(tape, layer, x, memory, mask, NULL, NULL);
    ck_assert_msg(y != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tensor_read_f32(y, out, B * T * D), TFM_OK);
    ck_assert_int_eq(tfm_tape_backward(tape, tfm_sum(tape, y)), TFM_OK);
    int64_t at = 0;
    ck_assert_int_eq(tfm_tensor_read_grad(x, grads, B * T * D), TFM_OK);
    at += B * T * D;
    for (int64_t i = 0; i < tfm_params_count(p); i++) {
        tfm_tensor *t = tfm_params_at(p, i);
        ck_assert_int_le(at + tfm_tensor_numel(t), grads_count);
        ck_assert_int_eq(tfm_tensor_read_grad(t, grads + at, tfm_tensor_numel(t)), TFM_OK);
        at += tfm_tensor_numel(t);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(memory);
    tfm_tensor_free(mask);
    tfm_layer_free(layer);
    tfm_params_free(p);
    tfm_rng_free(rng);
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
}

/* Heads too large for one BLAS call on one thread (70 x 66 x 64 > 2^18)
 * are cut into blocks; the result must be the ops apart's. */
enum { LT = 70, LS = 66, LD = 128, LH = 2 };

static tfm_tensor *project(tfm_tape *tape, tfm_params *p, const char *name, tfm_tensor *x)
{
    char w[64], b[64];
    snprintf(w, sizeof w, "%s.weight", name);
    snprintf(b, sizeof b, "%s.bias", name);
    return tfm_linear(tape, x, tfm_params_find(p, w), tfm_params_find(p, b));
}

static tfm_tensor *attention_apart(tfm_tape *tape, tfm_params *p, tfm_tensor *x,
                                   tfm_tensor *memory, tfm_tensor *mask)
{
    tfm_tensor *q = tfm_split_heads(tape, project(tape, p, "a.q_proj", x), LH);
    tfm_tensor *k = tfm_split_heads(tape, project(tape, p, "a.k_proj", memory), LH);
    tfm_tensor *v = tfm_split_heads(tape, project(tape, p, "a.v_proj", memory), LH);
    tfm_tensor *scores = tfm_scale(tape, tfm_matmul(tape, q, k, 0, 1), 1.0f / sqrtf(LD / LH));
    tfm_tensor *context = tfm_matmul(tape, tfm_softmax(tape, scores, mask), v, 0, 0);
    return project(tape, p, "a.out_proj", tfm_merge_heads(tape, context));
}

/* The output and every gradient, for a loss weighting the output by r. */
static void large_run(int fused_core, int32_t threads, tfm_params *p, tfm_layer *layer,
                      tfm_tensor *x, tfm_tensor *memory, tfm_tensor *mask, const float *r,
                      float *out, float *grads)
{
    ck_assert_int_eq(tfm_set_num_threads(threads), TFM_OK);
    tfm_tensor_zero_grad(x);
    tfm_tensor_zero_grad(memory);
    memset(tfm_params_grads(p), 0, (size_t)tfm_params_numel(p) * sizeof(float));
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = fused_core ? tfm_attention_forward(tape, layer, x, memory, mask, NULL, NULL)
                               : attention_apart(tape, p, x, memory, mask);
    ck_assert_msg(y != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tensor_read_f32(y, out, LT * LD), TFM_OK);
    ck_assert_int_eq(tfm_tape_backward_with_grad(tape, y, r, LT * LD), TFM_OK);
    ck_assert_int_eq(tfm_tensor_read_grad(x, grads, LT * LD), TFM_OK);
    ck_assert_int_eq(tfm_tensor_read_grad(memory, grads + LT * LD, LS * LD), TFM_OK);
    memcpy(grads + (LT + LS) * LD, tfm_params_grads(p),
           (size_t)tfm_params_numel(p) * sizeof(float));
    tfm_tape_free(tape);
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
}

START_TEST(large_heads_match_the_ops_apart)
{
    tfm_rng *rng = tfm_rng_create(41);
    tfm_params *p = tfm_params_create();
    tfm_attention_options o;
    tfm_attention_options_init(&o);
    o.d_model = LD;
    o.heads = LH;
    o.fused_qkv = 0;
    tfm_layer *layer = tfm_attention_create(p, "a", &o, rng);
    ck_assert_ptr_nonnull(layer);
    randomize(p, 42);
    /* scores of order 1: blocks differ from one call only by rounding */
    for (int64_t i = 0; i < tfm_params_numel(p); i++)
        tfm_params_values(p)[i] *= 0.2f;
    tfm_tensor *x = gc_random(3, (const int64_t[]){1, LT, LD}, 43);
    tfm_tensor *memory = gc_random(3, (const int64_t[]){1, LS, LD}, 44);
    tfm_tensor_set_requires_grad(x, 1);
    tfm_tensor_set_requires_grad(memory, 1);
    int32_t keep[LS];
    for (int j = 0; j < LS; j++)
        keep[j] = j < LS - 5;
    tfm_tensor *mask = tfm_tensor_from_i32(4, (const int64_t[]){1, 1, 1, LS}, keep);
    tfm_tensor *rt = gc_random(1, (const int64_t[]){LT * LD}, 45);
    int64_t n = (LT + LS) * LD + tfm_params_numel(p);
    float *want = malloc((size_t)(LT * LD + n) * sizeof(float));
    float *got = malloc((size_t)(LT * LD + n) * sizeof(float));
    large_run(0, 1, p, layer, x, memory, mask, tfm_tensor_data_f32(rt), want, want + LT * LD);
    for (int32_t threads = 1; threads <= 2; threads++) {
        large_run(1, threads, p, layer, x, memory, mask, tfm_tensor_data_f32(rt), got,
                  got + LT * LD);
        for (int64_t i = 0; i < LT * LD + n; i++)
            ck_assert_msg(fabsf(got[i] - want[i]) <= 1e-4f + 1e-4f * fabsf(want[i]),
                          "threads %d, value %lld: %g, apart %g", (int)threads, (long long)i,
                          (double)got[i], (double)want[i]);
    }
    free(want);
    free(got);
    tfm_tensor_free(rt);
    tfm_tensor_free(mask);
    tfm_tensor_free(x);
    tfm_tensor_free(memory);
    tfm_layer_free(layer);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

START_TEST(threads_give_the_same_results)
{
    enum { GRADS = 512 };
    for (int trainable = 0; trainable <= 1; trainable++) {
        float out1[B * T * D], out3[B * T * D], grads1[GRADS] = {0}, grads3[GRADS] = {0};
        run_with_threads(1, trainable, 0, out1, grads1, GRADS);
        run_with_threads(3, trainable, 0, out3, grads3, GRADS);
        ck_assert_mem_eq(out1, out3, sizeof out1);
        /* heads are computed alike; only the scale's sum is split */
        for (int i = 0; i < GRADS; i++)
            ck_assert_float_eq_tol(grads1[i], grads3[i], 1e-6f);
        /* recomputed weights or context (with dropout, a padding mask and,
         * trainable, the scale's gradient): the kept ones' bits */
        const uint32_t recompute[] = {TFM_RECOMPUTE_ATTENTION_WEIGHTS,
                                      TFM_RECOMPUTE_ATTENTION_CONTEXT,
                                      TFM_RECOMPUTE_ATTENTION_WEIGHTS |
                                          TFM_RECOMPUTE_ATTENTION_CONTEXT};
        for (int run = 0; run < 6; run++) {
            int32_t threads = run % 2 ? 3 : 1;
            float out_r[B * T * D], grads_r[GRADS] = {0};
            run_with_threads(threads, trainable, recompute[run / 2], out_r, grads_r, GRADS);
            ck_assert_mem_eq(out_r, threads == 1 ? out1 : out3, sizeof out_r);
            ck_assert_mem_eq(grads_r, threads == 1 ? grads1 : grads3, sizeof grads_r);
        }
    }
    ck_assert_int_eq(tfm_set_num_threads(0), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_set_num_threads(65), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_get_num_threads(), 1);
}
END_TEST

/* --- errors --------------------------------------------------------------------------- */

START_TEST(recompute_flags)
{
    tfm_rng *rng = tfm_rng_create(30);
    tfm_params *p = tfm_params_create();
    tfm_layer *layer = make_attention(p, "a", 1, 0, 1, 0.0f, rng);
    ck_assert_int_eq(tfm_layer_set_recompute(NULL, 0), TFM_ERR_NULL);
    assert_error(TFM_ERR_NULL, "layer");
    ck_assert_int_eq(tfm_layer_set_recompute(layer, TFM_RECOMPUTE_ATTENTION_WEIGHTS | 16),
                     TFM_ERR_ARG);
    assert_error(TFM_ERR_ARG, "TFM_RECOMPUTE_");
    ck_assert_int_eq(tfm_layer_set_recompute(layer, TFM_RECOMPUTE_NOTHING), TFM_OK);
    ck_assert_int_eq(tfm_layer_set_recompute(layer, TFM_RECOMPUTE_ATTENTION_WEIGHTS), TFM_OK);
    /* weights asked for are still handed out */
    tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, D}, 23), *w = NULL;
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_nonnull(tfm_attention_forward(tape, layer, x, x, NULL, NULL, &w));
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(tfm_tensor_numel(w), B * H * T * T);
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_layer_free(layer);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

START_TEST(create_errors)
{
    tfm_rng *rng = tfm_rng_create(30);
    tfm_params *p = tfm_params_create();
    tfm_attention_options o;
    tfm_attention_options_init(&o);
    o.d_model = D;
    o.heads = H;
    tfm_clear_error();
    ck_assert_ptr_null(tfm_attention_create(NULL, "a", &o, rng));
    assert_error(TFM_ERR_NULL, "params");
    ck_assert_ptr_null(tfm_attention_create(p, NULL, &o, rng));
    assert_error(TFM_ERR_NULL, "name");
    ck_assert_ptr_null(tfm_attention_create(p, "a", &o, NULL));
    assert_error(TFM_ERR_NULL, "rng");
    ck_assert_ptr_null(tfm_attention_create(p, "a", NULL, rng));
    assert_error(TFM_ERR_NULL, "options");
    tfm_attention_options bad = o;
    bad.struct_size = 8;
    ck_assert_ptr_null(tfm_attention_create(p, "a", &bad, rng));
    assert_error(TFM_ERR_ARG, "struct_size");
    bad = o;
    bad.heads = 3;
    ck_assert_ptr_null(tfm_attention_create(p, "a", &bad, rng));
    assert_error(TFM_ERR_ARG, "3 heads");
    bad.heads = 0;
    ck_assert_ptr_null(tfm_attention_create(p, "a", &bad, rng));
    assert_error(TFM_ERR_ARG, "divide d_model 4");
    bad = o;
    bad.d_model = 0;
    ck_assert_ptr_null(tfm_attention_create(p, "a", &bad, rng));
    assert_error(TFM_ERR_ARG, "d_model 0");
    bad = o;
    bad.dropout = 1.0f;
    ck_assert_ptr_null(tfm_attention_create(p, "a", &bad, rng));
    assert_error(TFM_ERR_ARG, "dropout 1");
    bad.dropout = NAN;
    ck_assert_ptr_null(tfm_attention_create(p, "a", &bad, rng));
    assert_error(TFM_ERR_ARG, "dropout");
    bad = o;
    bad.trainable_scale = 1;
    bad.scale_init = -1.0f;
    ck_assert_ptr_null(tfm_attention_create(p, "a", &bad, rng));
    assert_error(TFM_ERR_ARG, "scale_init -1");
    /* nothing was added by the failures above */
    ck_assert_int_eq(tfm_params_count(p), 0);
    char long_name[300];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    ck_assert_ptr_null(tfm_attention_create(p, long_name, &o, rng));
    ck_assert_int_ne(tfm_last_status(), TFM_OK);
    /* a name taken already, for each layout (the failure frees the half-built layer) */
    tfm_layer *first = tfm_attention_create(p, "a", &o, rng);
    ck_assert_ptr_nonnull(first);
    ck_assert_ptr_null(tfm_attention_create(p, "a", &o, rng));
    assert_error(TFM_ERR_ARG, "exists already");
    o.fused_qkv = 0;
    tfm_layer *sep = tfm_attention_create(p, "s", &o, rng);
    ck_assert_ptr_nonnull(sep);
    ck_assert_ptr_null(tfm_attention_create(p, "s", &o, rng));
    assert_error(TFM_ERR_ARG, "s.q_proj.weight");
    tfm_layer_free(first);
    tfm_layer_free(sep);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

START_TEST(forward_errors)
{
    tfm_rng *rng = tfm_rng_create(31);
    tfm_params *p = tfm_params_create();
    tfm_layer *layer = make_attention(p, "a", 1, 1, 1, 0.0f, rng);
    tfm_layer *linear = tfm_linear_create(p, "lin", D, D, 1, rng);
    tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, D}, 32);
    tfm_tensor *m = gc_random(3, (const int64_t[]){B, S, D}, 33);
    tfm_tensor *wide = gc_random(3, (const int64_t[]){B, T, D + 2}, 34);
    tfm_tensor *flat = gc_random(2, (const int64_t[]){T, D}, 35);
    tfm_tensor *other_batch = gc_random(3, (const int64_t[]){B + 1, S, D}, 36);
    tfm_tensor *ids = tfm_tensor_zeros(TFM_I32, 3, (const int64_t[]){B, T, D});
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *w = (tfm_tensor *)1; /* must come back NULL on failure */

    tfm_clear_error();
    ck_assert_ptr_null(tfm_attention_forward(NULL, layer, x, m, NULL, NULL, &w));
    assert_error(TFM_ERR_NULL, "tape");
    ck_assert_ptr_null(w);
    ck_assert_ptr_null(tfm_attention_forward(tape, NULL, x, m, NULL, NULL, NULL));
    assert_error(TFM_ERR_NULL, "layer");
    ck_assert_ptr_null(tfm_attention_forward(tape, linear, x, m, NULL, NULL, NULL));
    assert_error(TFM_ERR_ARG, "got kind linear");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_attention_forward(tape, layer, NULL, m, NULL, NULL, NULL));
    assert_error(TFM_ERR_NULL, "query is NULL");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_attention_forward(tape, layer, x, NULL, NULL, NULL, NULL));
    assert_error(TFM_ERR_NULL, "memory is NULL");
    /* a failed op upstream keeps its own message */
    ck_assert_ptr_null(tfm_attention_forward(tape, layer, tfm_add(tape, x, m), m, NULL, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "tfm_add");
    ck_assert_ptr_null(tfm_attention_forward(tape, layer, ids, m, NULL, NULL, NULL));
    assert_error(TFM_ERR_DTYPE, "query must be float32");
    ck_assert_ptr_null(tfm_attention_forward(tape, layer, wide, m, NULL, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "query [2,3,6] must be [B, length, 4]");
    ck_assert_ptr_null(tfm_attention_forward(tape, layer, x, wide, NULL, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "memory [2,3,6]");
    ck_assert_ptr_null(tfm_attention_forward(tape, layer, flat, flat, NULL, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "query [3,4]");
    ck_assert_ptr_null(tfm_attention_forward(tape, layer, x, other_batch, NULL, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "different batch sizes");

    /* masks that are not [T, S] nor 4-D broadcasting to [B, H, T, S] = [2,2,3,4] */
    static const struct { int32_t nd; int64_t shape[4]; } bad[] = {
        {2, {T + 1, S}}, {2, {T, S + 1}}, {4, {B, H + 1, T, S}}, {4, {B + 1, 1, 1, S}},
        {3, {H, T, 2}}, {1, {S - 1}}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tfm_tensor *mask = tfm_tensor_zeros(TFM_I32, bad[i].nd, bad[i].shape);
        w = (tfm_tensor *)1;
        ck_assert_ptr_null(tfm_attention_forward(tape, layer, x, m, mask, NULL, &w));
        assert_error(TFM_ERR_SHAPE, "is not an attention mask for scores [2,2,3,4]");
        ck_assert_ptr_null(w);
        tfm_tensor_free(mask);
    }
    /* a trainable scale driven to 0 */
    tfm_tensor *scale = tfm_params_find(p, "a.scale");
    tfm_tensor_data_f32(scale)[0] = 0.0f;
    ck_assert_ptr_null(tfm_attention_forward(tape, layer, x, m, NULL, NULL, NULL));
    assert_error(TFM_ERR_NUMERIC, "scale is 0");
    tfm_tensor_data_f32(scale)[0] = 2.0f;
    ck_assert_ptr_nonnull(tfm_attention_forward(tape, layer, x, m, NULL, NULL, NULL));

    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(m);
    tfm_tensor_free(wide);
    tfm_tensor_free(flat);
    tfm_tensor_free(other_batch);
    tfm_tensor_free(ids);
    tfm_layer_free(layer);
    tfm_layer_free(linear);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

static Suite *attention_suite(void)
{
    Suite *s = suite_create("nn_attention");
    TCase *tc = tcase_create("attention");
    tcase_add_test(tc, options_defaults);
    tcase_add_test(tc, parameter_names_and_shapes);
    tcase_add_test(tc, initialisation);
    tcase_add_test(tc, values_against_reference);
    tcase_add_test(tc, weights_respect_masks);
    tcase_add_test(tc, gradients_through_the_weights);
    tcase_add_test(tc, fused_self_attention_is_one_product);
    tcase_add_test(tc, gradients);
    tcase_add_test(tc, gradients_of_narrow_heads);
    tcase_add_test(tc, inner_width_other_than_d_model);
    tcase_add_test(tc, queries_with_no_key);
    tcase_add_test(tc, gradient_of_additive_mask);
    tcase_add_test(tc, dropout_in_training_only);
    tcase_add_test(tc, gradients_with_dropout);
    tcase_add_test(tc, threads_give_the_same_results);
    tcase_add_test(tc, large_heads_match_the_ops_apart);
    tcase_add_test(tc, recompute_flags);
    tcase_add_test(tc, create_errors);
    tcase_add_test(tc, forward_errors);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(attention_suite)
