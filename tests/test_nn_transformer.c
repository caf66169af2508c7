/* Encoder and decoder layers and stacks: nn.Transformer's parameter names
 * and shapes, outputs against a double-precision reference (post-norm and
 * pre-norm, relu and gelu, fused and separate attention, masks), gradient
 * checks through the layers and a stack, training vs eval, error paths. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "gradcheck.h"

enum { B = 2, T = 3, S = 4, D = 4, H = 2, DK = D / H, F = 8 };
#define EPS 1e-5f
enum { ALL_RECOMPUTED = TFM_RECOMPUTE_ATTENTION_WEIGHTS | TFM_RECOMPUTE_FEED_FORWARD_HIDDEN |
                        TFM_RECOMPUTE_NORM_OUTPUTS | TFM_RECOMPUTE_ATTENTION_CONTEXT };

/* --- helpers -------------------------------------------------------------------- */

typedef struct variant {
    int norm_first;
    tfm_activation activation;
    int fused;      /* separate projections come with a trainable scale */
} variant;

static tfm_block_options block_options(variant v, float dropout)
{
    tfm_block_options o;
    tfm_block_options_init(&o);
    o.d_model = D;
    o.heads = H;
    o.d_ff = F;
    o.dropout = dropout;
    o.activation = v.activation;
    o.norm_first = v.norm_first;
    o.layer_norm_eps = EPS;
    o.fused_qkv = v.fused;
    o.trainable_scale = !v.fused;
    o.scale_init = 1.7f;
    return o;
}

/* Every parameter N(0, 0.5^2), layer norm weights 1 + N(0, 0.1^2), scales kept. */
static void randomize(tfm_params *p, uint64_t seed)
{
    tfm_rng *rng = tfm_rng_create(seed);
    for (int64_t i = 0; i < tfm_params_count(p); i++) {
        const char *name = tfm_params_name(p, i);
        if (strstr(name, "scale"))
            continue;
        int norm_weight = strstr(name, "norm") && strstr(name, "weight");
        tfm_tensor *t = tfm_params_at(p, i);
        float *v = tfm_tensor_data_f32(t);
        for (int64_t j = 0; j < tfm_tensor_numel(t); j++)
            v[j] = norm_weight ? 1.0f + 0.1f * tfm_rng_normal(rng) : 0.5f * tfm_rng_normal(rng);
    }
    tfm_rng_free(rng);
}

static const float *param(tfm_params *p, const char *prefix, const char *suffix)
{
    char name[256];
    int n = snprintf(name, sizeof name, "%s.%s", prefix, suffix);
    ck_assert_int_lt(n, (int)sizeof name);
    tfm_tensor *t = tfm_params_find(p, name);
    ck_assert_msg(t != NULL, "no parameter %s", name);
    return tfm_tensor_data_f32(t);
}

static void assert_close(const float *got, const double *want, int n, const char *what)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 2e-5 + 2e-4 * fabs(want[i]),
                      "%s[%d]: %.7g vs %.7g", what, i, (double)got[i], want[i]);
}

static void assert_error(tfm_status status, const char *fragment)
{
    ck_assert_msg(tfm_last_status() == status, "status %s, wanted %s: %s",
                  tfm_status_name(tfm_last_status()), tfm_status_name(status), tfm_last_error());
    ck_assert_msg(strstr(tfm_last_error(), fragment) != NULL, "\"%s\" lacks \"%s\"",
                  tfm_last_error(), fragment);
}

/* --- double reference ------------------------------------------------------------ */

/* y[n, out] = x[n, in] W^T + b (b may be NULL). */
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

static void ref_layer_norm(tfm_params *p, const char *prefix, const char *name, const double *x,
                           int n, double *y)
{
    char full[256];
    snprintf(full, sizeof full, "%s%s%s", prefix, prefix[0] ? "." : "", name);
    const float *w = param(p, full, "weight"), *b = param(p, full, "bias");
    for (int r = 0; r < n; r++) {
        double mean = 0.0, var = 0.0;
        for (int i = 0; i < D; i++)
            mean += x[r * D + i] / D;
        for (int i = 0; i < D; i++)
            var += (x[r * D + i] - mean) * (x[r * D + i] - mean) / D;
        for (int i = 0; i < D; i++)
            y[r * D + i] = (x[r * D + i] - mean) / sqrt(var + EPS) * w[i] + b[i];
    }
}

/* Keep-mask [B, 1, 1, len] or [len_q, len] (int32) lookup; NULL keeps all. */
static int keep_at(const tfm_tensor *mask, int b, int t, int j)
{
    if (!mask)
        return 1;
    const int32_t *m = tfm_tensor_data_i32((tfm_tensor *)mask);
    int64_t last = tfm_tensor_dim(mask, -1);
    return tfm_tensor_ndim(mask) == 4 ? m[b * last + j] : m[t * last + j];
}

/* Attention NAME over memory [B, len, D] from x [B, lq, D]. */
static void ref_attention(tfm_params *p, const char *name, variant v, const double *x, int lq,
                          const double *mem, int len, const tfm_tensor *mask, double *out)
{
    const float *w[4], *bs[4];
    if (v.fused) {
        const float *in_w = param(p, name, "in_proj_weight"), *in_b = param(p, name, "in_proj_bias");
        for (int i = 0; i < 3; i++) {
            w[i] = in_w + i * D * D;
            bs[i] = in_b + i * D;
        }
    } else {
        static const char *const names[3][2] = {{"q_proj.weight", "q_proj.bias"},
                                                {"k_proj.weight", "k_proj.bias"},
                                                {"v_proj.weight", "v_proj.bias"}};
        for (int i = 0; i < 3; i++) {
            w[i] = param(p, name, names[i][0]);
            bs[i] = param(p, name, names[i][1]);
        }
    }
    w[3] = param(p, name, "out_proj.weight");
    bs[3] = param(p, name, "out_proj.bias");
    double divisor = v.fused ? sqrt((double)DK) : param(p, name, "scale")[0];
    double q[B * S * D], k[B * S * D], val[B * S * D], ctx[B * S * D];
    ref_linear(x, B * lq, D, D, w[0], bs[0], q);
    ref_linear(mem, B * len, D, D, w[1], bs[1], k);
    ref_linear(mem, B * len, D, D, w[2], bs[2], val);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < lq; t++) {
                double s[S], max = -INFINITY, sum = 0.0;
                for (int j = 0; j < len; j++) {
                    double dot = 0.0;
                    for (int e = 0; e < DK; e++)
                        dot += q[(b * lq + t) * D + h * DK + e] * k[(b * len + j) * D + h * DK + e];
                    s[j] = keep_at(mask, b, t, j) ? dot / divisor : -1e9;
                    max = s[j] > max ? s[j] : max;
                }
                for (int j = 0; j < len; j++) {
                    s[j] = exp(s[j] - max);
                    sum += s[j];
                }
                for (int e = 0; e < DK; e++) {
                    double acc = 0.0;
                    for (int j = 0; j < len; j++)
                        acc += s[j] / sum * val[(b * len + j) * D + h * DK + e];
                    ctx[(b * lq + t) * D + h * DK + e] = acc;
                }
            }
    ref_linear(ctx, B * lq, D, D, w[3], bs[3], out);
}

static void ref_feed_forward(tfm_params *p, const char *prefix, variant v, const double *x,
                             int n, double *y)
{
    char l1[256], l2[256];
    snprintf(l1, sizeof l1, "%s.linear1", prefix);
    snprintf(l2, sizeof l2, "%s.linear2", prefix);
    double hidden[B * S * F];
    ref_linear(x, n, D, F, param(p, l1, "weight"), param(p, l1, "bias"), hidden);
    for (int i = 0; i < n * F; i++) {
        double a = hidden[i];
        hidden[i] = v.activation == TFM_ACTIVATION_GELU ? 0.5 * a * (1.0 + erf(a / sqrt(2.0)))
                                                        : (a > 0.0 ? a : 0.0);
    }
    ref_linear(hidden, n, F, D, param(p, l2, "weight"), param(p, l2, "bias"), y);
}

/* One residual sublayer: which 0 self-attention, 1 cross-attention, 2 FFN. */
static void ref_sublayer(tfm_params *p, const char *prefix, variant v, int which,
                         const char *norm, double *x, int lq, const double *mem, int len,
                         const tfm_tensor *mask)
{
    double in[B * S * D], y[B * S * D];
    int n = B * lq * D;
    if (v.norm_first)
        ref_layer_norm(p, prefix, norm, x, B * lq, in);
    else
        memcpy(in, x, (size_t)n * sizeof *x);
    char name[256];
    snprintf(name, sizeof name, "%s.%s", prefix, which == 0 ? "self_attn" : "multihead_attn");
    if (which == 2)
        ref_feed_forward(p, prefix, v, in, B * lq, y);
    else
        ref_attention(p, name, v, in, lq, which == 0 ? in : mem, which == 0 ? lq : len, mask, y);
    for (int i = 0; i < n; i++)
        y[i] += x[i];
    if (v.norm_first)
        memcpy(x, y, (size_t)n * sizeof *x);
    else
        ref_layer_norm(p, prefix, norm, y, B * lq, x);
}

static void ref_encoder_layer(tfm_params *p, const char *prefix, variant v, double *x,
                              const tfm_tensor *mask)
{
    ref_sublayer(p, prefix, v, 0, "norm1", x, T, NULL, 0, mask);
    ref_sublayer(p, prefix, v, 2, "norm2", x, T, NULL, 0, NULL);
}

static void ref_decoder_layer(tfm_params *p, const char *prefix, variant v, double *x,
                              const double *mem, const tfm_tensor *self_mask,
                              const tfm_tensor *mem_mask)
{
    ref_sublayer(p, prefix, v, 0, "norm1", x, T, NULL, 0, self_mask);
    ref_sublayer(p, prefix, v, 1, "norm2", x, T, mem, S, mem_mask);
    ref_sublayer(p, prefix, v, 2, "norm3", x, T, NULL, 0, NULL);
}

static void to_double(const tfm_tensor *t, double *out)
{
    const float *v = tfm_tensor_data_f32((tfm_tensor *)t);
    for (int64_t i = 0; i < tfm_tensor_numel(t); i++)
        out[i] = v[i];
}

static tfm_tensor *causal_mask(void)
{
    int32_t m[T * T];
    for (int t = 0; t < T; t++)
        for (int j = 0; j < T; j++)
            m[t * T + j] = j <= t;
    return tfm_tensor_from_i32(2, (const int64_t[]){T, T}, m);
}

static tfm_tensor *padding_mask(void)
{
    const int32_t m[B * S] = {1, 1, 1, 1, 1, 1, 0, 0};
    return tfm_tensor_from_i32(4, (const int64_t[]){B, 1, 1, S}, m);
}

static const variant variants[] = {
    {0, TFM_ACTIVATION_RELU, 1}, {1, TFM_ACTIVATION_RELU, 1},
    {0, TFM_ACTIVATION_GELU, 0}, {1, TFM_ACTIVATION_GELU, 0},
};
#define N_VARIANTS (int)(sizeof variants / sizeof variants[0])

/* --- options and names --------------------------------------------------------------- */

START_TEST(options_defaults)
{
    tfm_block_options o;
    memset(&o, 0xff, sizeof o);
    tfm_block_options_init(&o);
    ck_assert_uint_eq(o.struct_size, sizeof o);
    ck_assert_int_eq(o.d_model, 512);
    ck_assert_int_eq(o.heads, 8);
    ck_assert_int_eq(o.d_ff, 2048);
    ck_assert_float_eq_tol(o.dropout, 0.1f, 1e-7f);
    ck_assert_int_eq(o.activation, TFM_ACTIVATION_RELU);
    ck_assert_int_eq(o.norm_first, 0);
    ck_assert_float_eq_tol(o.layer_norm_eps, 1e-5f, 1e-12f);
    ck_assert_int_eq(o.bias, 1);
    ck_assert_int_eq(o.fused_qkv, 1);
    ck_assert_int_eq(o.trainable_scale, 0);
    tfm_block_options_init_sized(NULL, sizeof(tfm_block_options));
}
END_TEST

typedef struct expected { const char *name; int32_t ndim; int64_t shape[2]; } expected;

/* nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).state_dict(), in order. */
static const expected encoder_layer_names[] = {
    {"self_attn.in_proj_weight", 2, {24, 8}}, {"self_attn.in_proj_bias", 1, {24}},
    {"self_attn.out_proj.weight", 2, {8, 8}}, {"self_attn.out_proj.bias", 1, {8}},
    {"linear1.weight", 2, {16, 8}},           {"linear1.bias", 1, {16}},
    {"linear2.weight", 2, {8, 16}},           {"linear2.bias", 1, {8}},
    {"norm1.weight", 1, {8}},                 {"norm1.bias", 1, {8}},
    {"norm2.weight", 1, {8}},                 {"norm2.bias", 1, {8}},
};

/* nn.TransformerDecoderLayer(8, 2, 16, batch_first=True).state_dict(), in order. */
static const expected decoder_layer_names[] = {
    {"self_attn.in_proj_weight", 2, {24, 8}},      {"self_attn.in_proj_bias", 1, {24}},
    {"self_attn.out_proj.weight", 2, {8, 8}},      {"self_attn.out_proj.bias", 1, {8}},
    {"multihead_attn.in_proj_weight", 2, {24, 8}}, {"multihead_attn.in_proj_bias", 1, {24}},
    {"multihead_attn.out_proj.weight", 2, {8, 8}}, {"multihead_attn.out_proj.bias", 1, {8}},
    {"linear1.weight", 2, {16, 8}},                {"linear1.bias", 1, {16}},
    {"linear2.weight", 2, {8, 16}},                {"linear2.bias", 1, {8}},
    {"norm1.weight", 1, {8}},                      {"norm1.bias", 1, {8}},
    {"norm2.weight", 1, {8}},                      {"norm2.bias", 1, {8}},
    {"norm3.weight", 1, {8}},                      {"norm3.bias", 1, {8}},
};

/* Parameters from index *at on are prefix + want[i], in order. */
static void expect_names(tfm_params *p, int64_t *at, const char *prefix, const expected *want,
                         int n)
{
    for (int i = 0; i < n; i++, (*at)++) {
        char name[256];
        snprintf(name, sizeof name, "%s%s", prefix, want[i].name);
        ck_assert_int_lt(*at, tfm_params_count(p));
        ck_assert_str_eq(tfm_params_name(p, *at), name);
        tfm_tensor *t = tfm_params_at(p, *at);
        ck_assert_int_eq(tfm_tensor_ndim(t), want[i].ndim);
        for (int32_t d = 0; d < want[i].ndim; d++)
            ck_assert_int_eq(tfm_tensor_dim(t, d), want[i].shape[d]);
    }
}

static const expected final_norm_names[] = {{"norm.weight", 1, {8}}, {"norm.bias", 1, {8}}};

/* The layers, and nn.Transformer(8, 2, 2, 2, 16, batch_first=True)'s encoder
 * and decoder: encoder.layers.0.…, encoder.layers.1.…, encoder.norm.… */
START_TEST(parameter_names_and_shapes)
{
    tfm_rng *rng = tfm_rng_create(1);
    tfm_params *p = tfm_params_create();
    tfm_block_options o;
    tfm_block_options_init(&o);
    o.d_model = 8;
    o.heads = 2;
    o.d_ff = 16;
    tfm_layer *enc_layer = tfm_encoder_layer_create(p, "el", &o, rng);
    tfm_layer *dec_layer = tfm_decoder_layer_create(p, "dl", &o, rng);
    tfm_layer *encoder = tfm_encoder_create(p, "encoder", 2, &o, 1, rng);
    tfm_layer *decoder = tfm_decoder_create(p, "decoder", 2, &o, 1, rng);
    tfm_layer *bare = tfm_encoder_create(p, "bare", 1, &o, 0, rng);
    ck_assert_ptr_nonnull(enc_layer);
    ck_assert_ptr_nonnull(dec_layer);
    ck_assert_ptr_nonnull(encoder);
    ck_assert_ptr_nonnull(decoder);
    ck_assert_ptr_nonnull(bare);
    ck_assert_str_eq(tfm_layer_kind(enc_layer), "encoder_layer");
    ck_assert_str_eq(tfm_layer_kind(dec_layer), "decoder_layer");
    ck_assert_str_eq(tfm_layer_kind(encoder), "encoder");
    ck_assert_str_eq(tfm_layer_kind(decoder), "decoder");
    int64_t at = 0;
    expect_names(p, &at, "el.", encoder_layer_names, 12);
    expect_names(p, &at, "dl.", decoder_layer_names, 18);
    expect_names(p, &at, "encoder.layers.0.", encoder_layer_names, 12);
    expect_names(p, &at, "encoder.layers.1.", encoder_layer_names, 12);
    expect_names(p, &at, "encoder.", final_norm_names, 2);
    expect_names(p, &at, "decoder.layers.0.", decoder_layer_names, 18);
    expect_names(p, &at, "decoder.layers.1.", decoder_layer_names, 18);
    expect_names(p, &at, "decoder.", final_norm_names, 2);
    expect_names(p, &at, "bare.layers.0.", encoder_layer_names, 12);
    ck_assert_int_eq(at, tfm_params_count(p));
    /* per-layer defaults: MultiheadAttention's zero biases, LayerNorm's ones */
    for (int i = 0; i < 24; i++)
        ck_assert_float_eq(param(p, "el", "self_attn.in_proj_bias")[i], 0.0f);
    for (int i = 0; i < 8; i++) {
        ck_assert_float_eq(param(p, "dl", "multihead_attn.out_proj.bias")[i], 0.0f);
        ck_assert_float_eq(param(p, "encoder", "norm.weight")[i], 1.0f);
        ck_assert_float_eq(param(p, "encoder", "norm.bias")[i], 0.0f);
    }
    tfm_layer_free(enc_layer);
    tfm_layer_free(dec_layer);
    tfm_layer_free(encoder);
    tfm_layer_free(decoder);
    tfm_layer_free(bare);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

/* Separate projections and a trainable scale inside a layer. */
START_TEST(names_with_separate_projections)
{
    static const expected want[] = {
        {"self_attn.scale", 1, {1}},
        {"self_attn.q_proj.weight", 2, {4, 4}}, {"self_attn.q_proj.bias", 1, {4}},
        {"self_attn.k_proj.weight", 2, {4, 4}}, {"self_attn.k_proj.bias", 1, {4}},
        {"self_attn.v_proj.weight", 2, {4, 4}}, {"self_attn.v_proj.bias", 1, {4}},
        {"self_attn.out_proj.weight", 2, {4, 4}}, {"self_attn.out_proj.bias", 1, {4}},
        {"linear1.weight", 2, {8, 4}}, {"linear1.bias", 1, {8}},
        {"linear2.weight", 2, {4, 8}}, {"linear2.bias", 1, {4}},
        {"norm1.weight", 1, {4}}, {"norm1.bias", 1, {4}},
        {"norm2.weight", 1, {4}}, {"norm2.bias", 1, {4}},
    };
    tfm_rng *rng = tfm_rng_create(2);
    tfm_params *p = tfm_params_create();
    tfm_block_options o = block_options(variants[2], 0.0f);
    tfm_layer *layer = tfm_encoder_layer_create(p, "e", &o, rng);
    ck_assert_ptr_nonnull(layer);
    int64_t at = 0;
    expect_names(p, &at, "e.", want, (int)(sizeof want / sizeof want[0]));
    ck_assert_int_eq(at, tfm_params_count(p));
    ck_assert_float_eq(param(p, "e", "self_attn.scale")[0], 1.7f);
    tfm_layer_free(layer);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

/* --- values ----------------------------------------------------------------------- */

/* Eval mode with dropout 0.1 configured: no dropout, exact reference. */
START_TEST(layer_values_against_reference)
{
    tfm_rng *rng = tfm_rng_create(3);
    tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, D}, 10);
    tfm_tensor *memory = gc_random(3, (const int64_t[]){B, S, D}, 11);
    tfm_tensor *causal = causal_mask(), *padding = padding_mask();
    tfm_tape *tape = tfm_tape_create();
    for (int vi = 0; vi < N_VARIANTS; vi++)
        for (int masked = 0; masked <= 1; masked++) {
            variant v = variants[vi];
            tfm_params *p = tfm_params_create();
            tfm_block_options o = block_options(v, 0.1f);
            tfm_layer *enc = tfm_encoder_layer_create(p, "enc", &o, rng);
            tfm_layer *dec = tfm_decoder_layer_create(p, "dec", &o, rng);
            ck_assert_ptr_nonnull(enc);
            ck_assert_ptr_nonnull(dec);
            randomize(p, 50 + (uint64_t)vi);
            tfm_layer_set_training(enc, 0);
            tfm_layer_set_training(dec, 0);
            const tfm_tensor *self_mask = masked ? causal : NULL, *mem_mask = masked ? padding : NULL;
            tfm_tensor *ye = tfm_encoder_layer_forward(tape, enc, x, self_mask, NULL);
            tfm_tensor *yd = tfm_decoder_layer_forward(tape, dec, x, memory, self_mask, mem_mask, NULL, NULL);
            ck_assert_msg(ye && yd, "%s", tfm_last_error());
            ck_assert_int_eq(tfm_tensor_ndim(ye), 3);
            ck_assert_int_eq(tfm_tensor_dim(yd, 1), T);
            double we[B * T * D], wd[B * T * D], mem[B * S * D];
            to_double(x, we);
            to_double(x, wd);
            to_double(memory, mem);
            ref_encoder_layer(p, "enc", v, we, self_mask);
            ref_decoder_layer(p, "dec", v, wd, mem, self_mask, mem_mask);
            char what[64];
            snprintf(what, sizeof what, "variant %d masked %d encoder", vi, masked);
            assert_close(tfm_tensor_data_f32(ye), we, B * T * D, what);
            snprintf(what, sizeof what, "variant %d masked %d decoder", vi, masked);
            assert_close(tfm_tensor_data_f32(yd), wd, B * T * D, what);
            tfm_tape_reset(tape);
            tfm_layer_free(enc);
            tfm_layer_free(dec);
            tfm_params_free(p);
        }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(memory);
    tfm_tensor_free(causal);
    tfm_tensor_free(padding);
    tfm_rng_free(rng);
}
END_TEST

/* Two layers then the final norm; zero layers is the norm alone, or x. */
START_TEST(stack_values_against_reference)
{
    tfm_rng *rng = tfm_rng_create(4);
    tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, D}, 12);
    tfm_tensor *memory = gc_random(3, (const int64_t[]){B, S, D}, 13);
    tfm_tensor *causal = causal_mask(), *padding = padding_mask();
    tfm_tape *tape = tfm_tape_create();
    for (int vi = 0; vi < 2; vi++) {
        variant v = variants[vi];
        tfm_params *p = tfm_params_create();
        tfm_block_options o = block_options(v, 0.0f);
        tfm_layer *enc = tfm_encoder_create(p, "encoder", 2, &o, 1, rng);
        tfm_layer *dec = tfm_decoder_create(p, "decoder", 2, &o, 1, rng);
        tfm_layer *enc0 = tfm_encoder_create(p, "enc0", 0, &o, 1, rng);
        tfm_layer *dec0 = tfm_decoder_create(p, "dec0", 0, &o, 0, rng);
        ck_assert(enc && dec && enc0 && dec0);
        randomize(p, 60 + (uint64_t)vi);
        tfm_tensor *ye = tfm_encoder_forward(tape, enc, x, causal, NULL);
        tfm_tensor *yd = tfm_decoder_forward(tape, dec, x, memory, causal, padding, NULL, NULL);
        tfm_tensor *ye0 = tfm_encoder_forward(tape, enc0, x, NULL, NULL);
        tfm_tensor *yd0 = tfm_decoder_forward(tape, dec0, x, memory, NULL, NULL, NULL, NULL);
        ck_assert_msg(ye && yd && ye0 && yd0, "%s", tfm_last_error());
        double xe[B * T * D], xd[B * T * D], mem[B * S * D], norm[B * T * D];
        to_double(x, xe);
        to_double(x, xd);
        to_double(memory, mem);
        ref_encoder_layer(p, "encoder.layers.0", v, xe, causal);
        ref_encoder_layer(p, "encoder.layers.1", v, xe, causal);
        ref_layer_norm(p, "encoder", "norm", xe, B * T, norm);
        assert_close(tfm_tensor_data_f32(ye), norm, B * T * D, "encoder stack");
        ref_decoder_layer(p, "decoder.layers.0", v, xd, mem, causal, padding);
        ref_decoder_layer(p, "decoder.layers.1", v, xd, mem, causal, padding);
        ref_layer_norm(p, "decoder", "norm", xd, B * T, norm);
        assert_close(tfm_tensor_data_f32(yd), norm, B * T * D, "decoder stack");
        to_double(x, xe);
        ref_layer_norm(p, "enc0", "norm", xe, B * T, norm);
        assert_close(tfm_tensor_data_f32(ye0), norm, B * T * D, "no layers, norm");
        assert_close(tfm_tensor_data_f32(yd0), xe, B * T * D, "no layers, no norm");
        ck_assert_ptr_ne(yd0, x); /* a tape-owned view, not the caller's tensor */
        tfm_tape_reset(tape);
        tfm_layer_free(enc);
        tfm_layer_free(dec);
        tfm_layer_free(enc0);
        tfm_layer_free(dec0);
        tfm_params_free(p);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(memory);
    tfm_tensor_free(causal);
    tfm_tensor_free(padding);
    tfm_rng_free(rng);
}
END_TEST

/* --- gradients ------------------------------------------------------------------ */

typedef struct grad_ctx {
    tfm_layer *layer;
    int kind;                   /* 0 encoder layer, 1 decoder layer, 2 encoder, 3 decoder */
    const tfm_tensor *self_mask, *mem_mask;
    tfm_rng *dropout_rng;       /* restarted per evaluation: the same dropout each time */
} grad_ctx;

static tfm_tensor *build_block(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    const grad_ctx *g = ctx;
    if (g->dropout_rng)
        tfm_rng_seed(g->dropout_rng, 5);
    switch (g->kind) {
    case 0: return tfm_encoder_layer_forward(tape, g->layer, in[0], g->self_mask, NULL);
    case 1: return tfm_decoder_layer_forward(tape, g->layer, in[0], in[1], g->self_mask,
                                             g->mem_mask, NULL, NULL);
    case 2: return tfm_encoder_forward(tape, g->layer, in[0], g->self_mask, NULL);
    default: return tfm_decoder_forward(tape, g->layer, in[0], in[1], g->self_mask, g->mem_mask, NULL, NULL);
    }
}

enum { TRAIN_NO_DROPOUT, EVAL, TRAIN_DROPOUT };

static void check_gradients(int kind, variant v, int mode, uint64_t seed)
{
    tfm_rng *rng = tfm_rng_create(seed);
    tfm_params *p = tfm_params_create();
    int eval = mode == EVAL;
    tfm_block_options o = block_options(v, mode == TRAIN_NO_DROPOUT ? 0.0f : 0.2f);
    tfm_layer *layer = kind == 0   ? tfm_encoder_layer_create(p, "l", &o, rng)
                       : kind == 1 ? tfm_decoder_layer_create(p, "l", &o, rng)
                       : kind == 2 ? tfm_encoder_create(p, "l", 2, &o, 1, rng)
                                   : tfm_decoder_create(p, "l", 2, &o, 1, rng);
    ck_assert_ptr_nonnull(layer);
    if (eval)
        tfm_layer_set_training(layer, 0);
    randomize(p, seed + 1);
    tfm_tensor *causal = causal_mask(), *padding = padding_mask();
    grad_ctx g = {layer, kind, causal, padding, mode == TRAIN_DROPOUT ? rng : NULL};
    tfm_tensor *in[64] = {gc_random(3, (const int64_t[]){B, T, D}, seed + 2),
                          gc_random(3, (const int64_t[]){B, S, D}, seed + 3)};
    tfm_tensor_set_requires_grad(in[0], 1);
    tfm_tensor_set_requires_grad(in[1], 1);
    int n = 2;
    for (int64_t i = 0; i < tfm_params_count(p); i++)
        in[n++] = tfm_params_at(p, i);
    ck_assert_gradcheck(build_block, &g, in, n);
    tfm_tensor_free(in[0]);
    tfm_tensor_free(in[1]);
    tfm_tensor_free(causal);
    tfm_tensor_free(padding);
    tfm_layer_free(layer);
    tfm_params_free(p);
    tfm_rng_free(rng);
}

/* Finite differences in float32 need a smooth function: a ReLU kink within
 * the step of some hidden unit breaks them, so these run with GELU (ReLU is
 * checked against the double reference below). */
static const variant smooth_variants[] = {
    {0, TFM_ACTIVATION_GELU, 1}, {1, TFM_ACTIVATION_GELU, 1},
    {0, TFM_ACTIVATION_GELU, 0}, {1, TFM_ACTIVATION_GELU, 0},
};

START_TEST(encoder_layer_gradients)
{
    for (int vi = 0; vi < 4; vi++)
        check_gradients(0, smooth_variants[vi], vi % 2, 100 + 10 * (uint64_t)vi);
}
END_TEST

START_TEST(decoder_layer_gradients)
{
    for (int vi = 0; vi < 4; vi++)
        check_gradients(1, smooth_variants[vi], (vi + 1) % 2, 200 + 10 * (uint64_t)vi);
}
END_TEST

/* Dropout in training: the fused linear + dropout + residual's backward. */
START_TEST(layer_gradients_with_dropout)
{
    check_gradients(0, smooth_variants[0], TRAIN_DROPOUT, 400);
    check_gradients(1, smooth_variants[1], TRAIN_DROPOUT, 410);
}
END_TEST

START_TEST(stack_gradients)
{
    check_gradients(2, smooth_variants[1], 1, 300);
    check_gradients(3, smooth_variants[2], 0, 310);
}
END_TEST

/* sum(R * layer(x, memory)) in double through the reference. */
static double ref_projected(tfm_params *p, int decoder, variant v, const double *x,
                            const double *mem, const tfm_tensor *causal,
                            const tfm_tensor *padding, const double *r)
{
    double y[B * T * D], sum = 0.0;
    memcpy(y, x, sizeof y);
    if (decoder)
        ref_decoder_layer(p, "l", v, y, mem, causal, padding);
    else
        ref_encoder_layer(p, "l", v, y, causal);
    for (int i = 0; i < B * T * D; i++)
        sum += r[i] * y[i];
    return sum;
}

/* The gradients of x and memory for every variant (ReLU included) against
 * central differences of the double reference, whose step can be tiny;
 * with the attention weights and feed-forward hidden layers kept and
 * recomputed in the backward. */
START_TEST(input_gradients_against_reference)
{
    tfm_tensor *causal = causal_mask(), *padding = padding_mask();
    for (int vi = 0; vi < N_VARIANTS; vi++)
        for (int run = 0; run < 4; run++) {
            int decoder = run & 1;
            uint32_t recompute = run >> 1 ? ALL_RECOMPUTED : TFM_RECOMPUTE_NOTHING;
            variant v = variants[vi];
            tfm_rng *rng = tfm_rng_create(400 + (uint64_t)vi);
            tfm_params *p = tfm_params_create();
            tfm_block_options o = block_options(v, 0.0f);
            tfm_layer *layer = decoder ? tfm_decoder_layer_create(p, "l", &o, rng)
                                       : tfm_encoder_layer_create(p, "l", &o, rng);
            ck_assert_ptr_nonnull(layer);
            ck_assert_int_eq(tfm_layer_set_recompute(layer, recompute), TFM_OK);
            randomize(p, 410 + (uint64_t)vi);
            tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, D}, 420 + (uint64_t)vi);
            tfm_tensor *memory = gc_random(3, (const int64_t[]){B, S, D}, 430 + (uint64_t)vi);
            tfm_tensor_set_requires_grad(x, 1);
            tfm_tensor_set_requires_grad(memory, 1);
            float r[B * T * D];
            double rd[B * T * D], xd[B * T * D], md[B * S * D];
            for (int i = 0; i < B * T * D; i++)
                rd[i] = r[i] = (float)((i * 37 % 11) - 5) / 5.0f;
            tfm_tape *tape = tfm_tape_create();
            tfm_tensor *y = decoder ? tfm_decoder_layer_forward(tape, layer, x, memory, causal,
                                                                padding, NULL, NULL)
                                    : tfm_encoder_layer_forward(tape, layer, x, causal, NULL);
            ck_assert_int_eq(tfm_tape_backward_with_grad(tape, y, r, B * T * D), TFM_OK);
            to_double(x, xd);
            to_double(memory, md);
            const double h = 1e-6;
            for (int which = 0; which <= decoder; which++) {
                double *in = which ? md : xd;
                const float *g = tfm_tensor_grad_f32(which ? memory : x);
                for (int i = 0; i < (which ? B * S * D : B * T * D); i++) {
                    double saved = in[i], f[2];
                    for (int side = 0; side < 2; side++) {
                        in[i] = saved + (side ? -h : h);
                        f[side] = ref_projected(p, decoder, v, xd, md, causal, padding, rd);
                    }
                    in[i] = saved;
                    double want = (f[0] - f[1]) / (2 * h);
                    ck_assert_msg(fabs(g[i] - want) <= 1e-4 + 1e-4 * fabs(want),
                                  "variant %d decoder %d recompute %u input %d [%d]: %g vs %g",
                                  vi, decoder, (unsigned)recompute, which, i, (double)g[i],
                                  want);
                }
            }
            tfm_tape_free(tape);
            tfm_tensor_free(x);
            tfm_tensor_free(memory);
            tfm_layer_free(layer);
            tfm_params_free(p);
            tfm_rng_free(rng);
        }
    tfm_tensor_free(causal);
    tfm_tensor_free(padding);
}
END_TEST

/* One training step through an encoder stack (final norm) into a decoder
 * stack (none) and a lone decoder layer, dropout on: the output read after
 * the backward and every gradient. frozen: every
 * parameter but the feed-forwards' second linears, and the input, want no
 * gradient (so no record keeps the hidden layer's input). */
typedef struct step_result {
    float out[B * T * D], x_grad[B * T * D], grads[8192];
} step_result;

static void stacks_step(variant v, uint32_t recompute, int frozen, step_result *r)
{
    tfm_rng *rng = tfm_rng_create(77);
    tfm_params *p = tfm_params_create();
    tfm_block_options o = block_options(v, 0.2f);
    tfm_layer *enc = tfm_encoder_create(p, "enc", 2, &o, 1, rng);
    tfm_layer *dec = tfm_decoder_create(p, "dec", 2, &o, 0, rng);
    tfm_layer *last = tfm_decoder_layer_create(p, "last", &o, rng);
    ck_assert(enc && dec && last);
    randomize(p, 78);
    ck_assert_int_le(tfm_params_numel(p), 8192);
    for (int64_t i = 0; frozen && i < tfm_params_count(p); i++)
        if (!strstr(tfm_params_name(p, i), "linear2"))
            tfm_tensor_set_requires_grad(tfm_params_at(p, i), 0);
    tfm_layer *layers[] = {enc, dec, last};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(tfm_layer_set_recompute(layers[i], recompute), TFM_OK);
    tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, D}, 79);
    tfm_tensor_set_requires_grad(x, !frozen);
    tfm_tensor *causal = causal_mask(), *padding = padding_mask();
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *memory = tfm_encoder_forward(tape, enc, x, NULL, NULL);
    tfm_tensor *h = memory ? tfm_decoder_forward(tape, dec, x, memory, causal, NULL, NULL, NULL)
                           : NULL;
    tfm_tensor *y = h ? tfm_decoder_layer_forward(tape, last, h, memory, causal, NULL, NULL, NULL)
                      : NULL;
    ck_assert_msg(y != NULL, "%s", tfm_last_error());
    float seed[B * T * D];
    for (int i = 0; i < B * T * D; i++)
        seed[i] = (float)((i * 37 % 11) - 5) / 5.0f;
    ck_assert_int_eq(tfm_tape_backward_with_grad(tape, y, seed, B * T * D), TFM_OK);
    ck_assert_int_eq(tfm_tensor_read_f32(y, r->out, B * T * D), TFM_OK);
    memset(r->x_grad, 0, sizeof r->x_grad);
    if (!frozen)
        memcpy(r->x_grad, tfm_tensor_grad_f32(x), sizeof r->x_grad);
    memset(r->grads, 0, sizeof r->grads);
    memcpy(r->grads, tfm_params_grads(p), (size_t)tfm_params_numel(p) * sizeof(float));
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(causal);
    tfm_tensor_free(padding);
    for (int i = 0; i < 3; i++)
        tfm_layer_free(layers[i]);
    tfm_params_free(p);
    tfm_rng_free(rng);
}

/* Whatever is recomputed, the same bits: outputs handed out stay kept, a
 * norm's output is rebuilt where a later record reads it, and a hidden
 * layer whose record is not kept is kept. (What it saves: bench/.) */
START_TEST(recomputed_values_give_the_same_bits)
{
    static step_result kept, recomputed;
    for (int vi = 0; vi < N_VARIANTS; vi++)
        for (int frozen = 0; frozen < 2; frozen++) {
            stacks_step(variants[vi], TFM_RECOMPUTE_NOTHING, frozen, &kept);
            const uint32_t flags[] = {TFM_RECOMPUTE_NORM_OUTPUTS, TFM_RECOMPUTE_ATTENTION_CONTEXT,
                                      TFM_RECOMPUTE_FEED_FORWARD_HIDDEN, ALL_RECOMPUTED};
            for (int f = 0; f < 4; f++) {
                stacks_step(variants[vi], flags[f], frozen, &recomputed);
                ck_assert_msg(memcmp(&kept, &recomputed, sizeof kept) == 0,
                              "variant %d, frozen %d, flags %u", vi, frozen, (unsigned)flags[f]);
            }
        }
}
END_TEST

/* --- training and eval -------------------------------------------------------------- */

START_TEST(dropout_in_training_only)
{
    tfm_rng *rng = tfm_rng_create(5);
    tfm_params *p = tfm_params_create();
    tfm_block_options o = block_options(variants[0], 0.3f);
    tfm_layer *enc = tfm_encoder_create(p, "encoder", 2, &o, 1, rng);
    tfm_layer *dec = tfm_decoder_layer_create(p, "dec", &o, rng);
    ck_assert(enc && dec);
    randomize(p, 6);
    tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, D}, 14);
    tfm_tensor *memory = gc_random(3, (const int64_t[]){B, S, D}, 15);
    tfm_tape *tape = tfm_tape_create();
    enum { N = B * T * D };
    float e[4][N], d[4][N];
    for (int i = 0; i < 4; i++) {
        if (i == 2) {
            ck_assert_int_eq(tfm_layer_set_training(enc, 0), TFM_OK);
            ck_assert_int_eq(tfm_layer_set_training(dec, 0), TFM_OK);
        }
        tfm_tensor *ye = tfm_encoder_forward(tape, enc, x, NULL, NULL);
        tfm_tensor *yd = tfm_decoder_layer_forward(tape, dec, x, memory, NULL, NULL, NULL, NULL);
        ck_assert_int_eq(tfm_tensor_read_f32(ye, e[i], N), TFM_OK);
        ck_assert_int_eq(tfm_tensor_read_f32(yd, d[i], N), TFM_OK);
    }
    ck_assert(memcmp(e[0], e[1], sizeof e[0]) != 0);
    ck_assert(memcmp(d[0], d[1], sizeof d[0]) != 0);
    ck_assert(memcmp(e[0], e[2], sizeof e[0]) != 0);
    ck_assert_mem_eq(e[2], e[3], sizeof e[2]);
    ck_assert_mem_eq(d[2], d[3], sizeof d[2]);
    /* eval mode reached every sublayer: the output is the reference's */
    double want[N], mem[B * S * D], norm[N];
    to_double(x, want);
    ref_encoder_layer(p, "encoder.layers.0", variants[0], want, NULL);
    ref_encoder_layer(p, "encoder.layers.1", variants[0], want, NULL);
    ref_layer_norm(p, "encoder", "norm", want, B * T, norm);
    assert_close(e[2], norm, N, "eval encoder");
    to_double(x, want);
    to_double(memory, mem);
    ref_decoder_layer(p, "dec", variants[0], want, mem, NULL, NULL);
    assert_close(d[2], want, N, "eval decoder");
    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(memory);
    tfm_layer_free(enc);
    tfm_layer_free(dec);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

/* --- errors --------------------------------------------------------------------------- */

typedef tfm_layer *(*create_fn)(tfm_params *, const char *, const tfm_block_options *,
                                tfm_rng *);

static tfm_layer *create_encoder2(tfm_params *p, const char *name, const tfm_block_options *o,
                                  tfm_rng *rng)
{
    return tfm_encoder_create(p, name, 2, o, 1, rng);
}

static tfm_layer *create_decoder2(tfm_params *p, const char *name, const tfm_block_options *o,
                                  tfm_rng *rng)
{
    return tfm_decoder_create(p, name, 2, o, 1, rng);
}

/* Each creator rejects each bad option before adding any parameter. */
START_TEST(create_errors)
{
    static const create_fn creators[] = {tfm_encoder_layer_create, tfm_decoder_layer_create,
                                         create_encoder2, create_decoder2};
    static const char *const names[] = {"tfm_encoder_layer_create", "tfm_decoder_layer_create",
                                        "tfm_encoder_create", "tfm_decoder_create"};
    tfm_rng *rng = tfm_rng_create(7);
    tfm_params *p = tfm_params_create();
    tfm_block_options good = block_options(variants[0], 0.1f);
    for (int c = 0; c < 4; c++) {
        tfm_clear_error();
        ck_assert_ptr_null(creators[c](NULL, "x", &good, rng));
        assert_error(TFM_ERR_NULL, "params");
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), names[c]));
        ck_assert_ptr_null(creators[c](p, NULL, &good, rng));
        assert_error(TFM_ERR_NULL, "name");
        ck_assert_ptr_null(creators[c](p, "x", &good, NULL));
        assert_error(TFM_ERR_NULL, "rng");
        ck_assert_ptr_null(creators[c](p, "x", NULL, rng));
        assert_error(TFM_ERR_NULL, "options");
        tfm_block_options o = good;
        o.struct_size = 4;
        ck_assert_ptr_null(creators[c](p, "x", &o, rng));
        assert_error(TFM_ERR_ARG, "struct_size");
        o = good;
        o.heads = 3;
        ck_assert_ptr_null(creators[c](p, "x", &o, rng));
        assert_error(TFM_ERR_ARG, "3 heads must be positive and divide d_model 4");
        o = good;
        o.d_model = -4;
        ck_assert_ptr_null(creators[c](p, "x", &o, rng));
        assert_error(TFM_ERR_ARG, "d_model -4");
        o = good;
        o.d_ff = 0;
        ck_assert_ptr_null(creators[c](p, "x", &o, rng));
        assert_error(TFM_ERR_ARG, "d_ff 0");
        o = good;
        o.dropout = -0.5f;
        ck_assert_ptr_null(creators[c](p, "x", &o, rng));
        assert_error(TFM_ERR_ARG, "dropout -0.5");
        o = good;
        o.activation = 7;
        ck_assert_ptr_null(creators[c](p, "x", &o, rng));
        assert_error(TFM_ERR_ARG, "activation 7");
        o = good;
        o.layer_norm_eps = -1.0f;
        ck_assert_ptr_null(creators[c](p, "x", &o, rng));
        assert_error(TFM_ERR_ARG, "layer_norm_eps");
        o = good;
        o.trainable_scale = 1;
        o.scale_init = INFINITY;
        ck_assert_ptr_null(creators[c](p, "x", &o, rng));
        assert_error(TFM_ERR_ARG, "scale_init");
        ck_assert_int_eq(tfm_params_count(p), 0);
    }
    /* bias 0 drops the attention biases only, as PyTorch 1.13 has it */
    tfm_params *unbiased = tfm_params_create();
    tfm_block_options no_bias = good;
    no_bias.bias = 0;
    tfm_layer *layer = tfm_encoder_layer_create(unbiased, "e", &no_bias, rng);
    ck_assert_ptr_nonnull(layer);
    tfm_clear_error();
    ck_assert_ptr_null(tfm_params_find(unbiased, "e.self_attn.in_proj_bias"));
    ck_assert_ptr_nonnull(tfm_params_find(unbiased, "e.linear1.bias"));
    tfm_layer_free(layer);
    tfm_params_free(unbiased);
    ck_assert_ptr_null(tfm_encoder_create(p, "x", -1, &good, 1, rng));
    assert_error(TFM_ERR_ARG, "num_layers -1");
    ck_assert_ptr_null(tfm_decoder_create(p, "x", 70000, &good, 1, rng));
    assert_error(TFM_ERR_ARG, "num_layers 70000");
    /* a clash half-way through a stack frees what was built (valgrind) */
    tfm_layer *taken = tfm_layer_norm_create(p, "s.layers.1.norm2", D, EPS);
    ck_assert_ptr_null(tfm_encoder_create(p, "s", 2, &good, 1, rng));
    assert_error(TFM_ERR_ARG, "s.layers.1.norm2");
    tfm_layer *taken_norm = tfm_layer_norm_create(p, "t.norm", D, EPS);
    ck_assert_ptr_null(tfm_decoder_create(p, "t", 1, &good, 1, rng));
    assert_error(TFM_ERR_ARG, "t.norm.weight");
    tfm_layer_free(taken);
    tfm_layer_free(taken_norm);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

START_TEST(forward_errors)
{
    tfm_rng *rng = tfm_rng_create(8);
    tfm_params *p = tfm_params_create();
    tfm_block_options o = block_options(variants[1], 0.0f);
    tfm_layer *enc_layer = tfm_encoder_layer_create(p, "el", &o, rng);
    tfm_layer *dec_layer = tfm_decoder_layer_create(p, "dl", &o, rng);
    tfm_layer *enc = tfm_encoder_create(p, "e", 1, &o, 1, rng);
    tfm_layer *dec = tfm_decoder_create(p, "d", 1, &o, 1, rng);
    tfm_tensor *x = gc_random(3, (const int64_t[]){B, T, D}, 20);
    tfm_tensor *m = gc_random(3, (const int64_t[]){B, S, D}, 21);
    tfm_tensor *wide = gc_random(3, (const int64_t[]){B, T, D + 1}, 22);
    tfm_tensor *other_batch = gc_random(3, (const int64_t[]){B + 1, S, D}, 23);
    tfm_tensor *bad_mask = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){T + 1, T});
    tfm_tape *tape = tfm_tape_create();

    tfm_clear_error();
    ck_assert_ptr_null(tfm_encoder_layer_forward(NULL, enc_layer, x, NULL, NULL));
    assert_error(TFM_ERR_NULL, "tape");
    ck_assert_ptr_null(tfm_decoder_layer_forward(NULL, dec_layer, x, m, NULL, NULL, NULL, NULL));
    assert_error(TFM_ERR_NULL, "tape");
    ck_assert_ptr_null(tfm_encoder_forward(NULL, enc, x, NULL, NULL));
    assert_error(TFM_ERR_NULL, "tape");
    ck_assert_ptr_null(tfm_decoder_forward(NULL, dec, x, m, NULL, NULL, NULL, NULL));
    assert_error(TFM_ERR_NULL, "tape");
    ck_assert_ptr_null(tfm_encoder_layer_forward(tape, NULL, x, NULL, NULL));
    assert_error(TFM_ERR_NULL, "layer is NULL");
    ck_assert_ptr_null(tfm_decoder_forward(tape, NULL, x, m, NULL, NULL, NULL, NULL));
    assert_error(TFM_ERR_NULL, "layer is NULL");

    /* the wrong kind of layer */
    ck_assert_ptr_null(tfm_encoder_layer_forward(tape, dec_layer, x, NULL, NULL));
    assert_error(TFM_ERR_ARG, "got kind decoder_layer");
    ck_assert_ptr_null(tfm_decoder_layer_forward(tape, enc_layer, x, m, NULL, NULL, NULL, NULL));
    assert_error(TFM_ERR_ARG, "got kind encoder_layer");
    ck_assert_ptr_null(tfm_encoder_forward(tape, enc_layer, x, NULL, NULL));
    assert_error(TFM_ERR_ARG, "tfm_encoder_forward");
    ck_assert_ptr_null(tfm_decoder_forward(tape, enc, x, m, NULL, NULL, NULL, NULL));
    assert_error(TFM_ERR_ARG, "tfm_decoder_forward");
    tfm_layer *linear = tfm_linear_create(p, "lin", D, D, 1, rng);
    ck_assert_ptr_null(tfm_attention_forward(tape, enc_layer, x, x, NULL, NULL, NULL));
    assert_error(TFM_ERR_ARG, "got kind encoder_layer");
    ck_assert_ptr_null(tfm_encoder_layer_forward(tape, linear, x, NULL, NULL));
    assert_error(TFM_ERR_ARG, "got kind linear");

    /* NULL inputs: reported when nothing is pending, kept when something is */
    tfm_clear_error();
    ck_assert_ptr_null(tfm_encoder_layer_forward(tape, enc_layer, NULL, NULL, NULL));
    assert_error(TFM_ERR_NULL, "x is NULL");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_decoder_layer_forward(tape, dec_layer, x, NULL, NULL, NULL, NULL, NULL));
    assert_error(TFM_ERR_NULL, "memory is NULL");
    ck_assert_ptr_null(tfm_encoder_forward(tape, enc, tfm_add(tape, x, m), NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "tfm_add");

    /* widths and batch sizes */
    ck_assert_ptr_null(tfm_encoder_layer_forward(tape, enc_layer, wide, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "x [2,3,5] must be [B, length, 4]");
    ck_assert_ptr_null(tfm_encoder_forward(tape, enc, wide, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "tfm_encoder_forward: x [2,3,5]");
    ck_assert_ptr_null(tfm_decoder_layer_forward(tape, dec_layer, x, wide, NULL, NULL, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "memory [2,3,5]");
    ck_assert_ptr_null(tfm_decoder_forward(tape, dec, wide, m, NULL, NULL, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "x [2,3,5]");
    ck_assert_ptr_null(tfm_decoder_layer_forward(tape, dec_layer, x, other_batch, NULL, NULL, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "different batch sizes");
    ck_assert_ptr_null(tfm_decoder_forward(tape, dec, x, other_batch, NULL, NULL, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "different batch sizes");

    /* masks that are not attention masks for the scores */
    ck_assert_ptr_null(tfm_encoder_layer_forward(tape, enc_layer, x, bad_mask, NULL));
    assert_error(TFM_ERR_SHAPE, "mask [4,3] is not an attention mask");
    ck_assert_ptr_null(tfm_encoder_forward(tape, enc, x, bad_mask, NULL));
    assert_error(TFM_ERR_SHAPE, "mask [4,3] is not an attention mask");
    ck_assert_ptr_null(tfm_decoder_layer_forward(tape, dec_layer, x, m, bad_mask, NULL, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "mask [4,3] is not an attention mask");
    ck_assert_ptr_null(tfm_decoder_forward(tape, dec, x, m, NULL, bad_mask, NULL, NULL));
    assert_error(TFM_ERR_SHAPE, "mask [4,3] is not an attention mask");

    tfm_tape_free(tape);
    tfm_tensor_free(x);
    tfm_tensor_free(m);
    tfm_tensor_free(wide);
    tfm_tensor_free(other_batch);
    tfm_tensor_free(bad_mask);
    tfm_layer_free(enc_layer);
    tfm_layer_free(dec_layer);
    tfm_layer_free(enc);
    tfm_layer_free(dec);
    tfm_layer_free(linear);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

static Suite *transformer_suite(void)
{
    Suite *s = suite_create("nn_transformer");
    TCase *tc = tcase_create("transformer");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, options_defaults);
    tcase_add_test(tc, parameter_names_and_shapes);
    tcase_add_test(tc, names_with_separate_projections);
    tcase_add_test(tc, layer_values_against_reference);
    tcase_add_test(tc, stack_values_against_reference);
    tcase_add_test(tc, encoder_layer_gradients);
    tcase_add_test(tc, decoder_layer_gradients);
    tcase_add_test(tc, layer_gradients_with_dropout);
    tcase_add_test(tc, stack_gradients);
    tcase_add_test(tc, input_gradients_against_reference);
    tcase_add_test(tc, recomputed_values_give_the_same_bits);
    tcase_add_test(tc, dropout_in_training_only);
    tcase_add_test(tc, create_errors);
    tcase_add_test(tc, forward_errors);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(transformer_suite)
