/* libtfm against PyTorch 1.13 on the same weights and inputs: each layer,
 * both encoder-decoder models (nn.Transformer's and tutorial 003's) and one
 * Adam / AdamW step. The references are safetensors files written once by
 * tests/fixtures/generate.py; this test needs neither Python nor torch.
 * Outputs must agree within 1e-5 and gradients within 1e-4, absolute or
 * relative. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <tfm/tfm.h>

#include "check_main.h"

#define OUT_TOL 1e-5
#define GRAD_TOL 1e-4
#define STEP_TOL 1e-6

enum { MSG = 768, KEY = 320, MAX_OWNED = 16 };

/* --- comparison ------------------------------------------------------------------ */
/* |got - want| <= tol or <= tol * |want|; non-finite values match only
 * themselves (a -inf mask entry, say), and NaN matches nothing. */
static int close_enough(double got, double want, double tol)
{
    if (!isfinite(got) || !isfinite(want))
        return got == want;
    double err = fabs(got - want);
    return err <= tol || err <= tol * fabs(want);
}

/* 0 when every value is close; otherwise 1 and, in msg, how many are off,
 * the worst one as [i, j, ...] with both values, and the largest error. */
static int compare_values(const char *what, const float *got, const float *want, int32_t ndim,
                          const int64_t *shape, double tol, char *msg)
{
    int64_t n = 1;
    for (int32_t d = 0; d < ndim; d++)
        n *= shape[d];
    int64_t bad = 0, worst = 0;
    double max_err = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (close_enough(got[i], want[i], tol))
            continue;
        double err = isfinite(got[i]) && isfinite(want[i]) ? fabs((double)got[i] - want[i])
                                                           : INFINITY;
        if (bad++ == 0 || err > max_err) {
            max_err = err;
            worst = i;
        }
    }
    if (bad == 0)
        return 0;
    char index[96] = "";
    int len = 0;
    for (int32_t d = 0; d < ndim; d++) {
        int64_t stride = 1;
        for (int32_t e = d + 1; e < ndim; e++)
            stride *= shape[e];
        len += snprintf(index + len, sizeof index - (size_t)len, "%s%lld", d ? ", " : "",
                        (long long)(worst / stride % shape[d]));
    }
    snprintf(msg, MSG,
             "%s: %lld of %lld values off (tol %g abs or rel); worst at [%s]: libtfm %.9g, "
             "PyTorch %.9g, max |error| %.3g",
             what, (long long)bad, (long long)n, tol, index, got[worst], want[worst], max_err);
    return 1;
}

/* 0 when the shapes are equal; otherwise 1 and both shapes in msg. */
static int compare_shapes(const char *what, const tfm_tensor *got, const tfm_tensor *want,
                          char *msg)
{
    int64_t a[TFM_MAX_DIMS], b[TFM_MAX_DIMS];
    int32_t na = tfm_tensor_ndim(got), nb = tfm_tensor_ndim(want);
    tfm_tensor_shape(got, a);
    tfm_tensor_shape(want, b);
    int same = na == nb;
    for (int32_t d = 0; same && d < na; d++)
        same = a[d] == b[d];
    if (same)
        return 0;
    char sa[64] = "", sb[64] = "";
    for (int32_t d = 0; d < na; d++)
        snprintf(sa + strlen(sa), sizeof sa - strlen(sa), "%s%lld", d ? ", " : "", (long long)a[d]);
    for (int32_t d = 0; d < nb; d++)
        snprintf(sb + strlen(sb), sizeof sb - strlen(sb), "%s%lld", d ? ", " : "", (long long)b[d]);
    snprintf(msg, MSG, "%s: libtfm shape [%s], PyTorch shape [%s]", what, sa, sb);
    return 1;
}

/* --- a fixture and what a test builds from it --------------------------------------- */
typedef struct ctx {
    tfm_safetensors *file;
    tfm_params *params;     /* the layer tests' store; a model's is borrowed */
    int owns_params;
    tfm_tape *tape;
    tfm_rng *rng;
    tfm_tensor *owned[MAX_OWNED];
    int n_owned;
} ctx;

static void ctx_open(ctx *c, const char *fixture, int own_params)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.safetensors", TFM_FIXTURES, fixture);
    memset(c, 0, sizeof *c);
    c->file = tfm_safetensors_open(path);
    ck_assert_msg(c->file, "%s: %s (run /usr/bin/python3 tests/fixtures/generate.py)", path,
                  tfm_last_error());
    c->owns_params = own_params;
    c->params = own_params ? tfm_params_create() : NULL;
    c->tape = tfm_tape_create();
    c->rng = tfm_rng_create(7);
    ck_assert(c->tape && c->rng && (!own_params || c->params));
}

static void ctx_close(ctx *c)
{
    for (int i = 0; i < c->n_owned; i++)
        tfm_tensor_free(c->owned[i]);
    if (c->owns_params)
        tfm_params_free(c->params);
    tfm_tape_free(c->tape);
    tfm_rng_free(c->rng);
    tfm_safetensors_close(c->file);
}

/* A tensor of the fixture, freed by ctx_close. */
static tfm_tensor *ctx_get(ctx *c, const char *key)
{
    tfm_tensor *t = tfm_safetensors_get(c->file, key);
    ck_assert_msg(t, "the fixture has no %s: %s", key, tfm_last_error());
    ck_assert(c->n_owned < MAX_OWNED);
    c->owned[c->n_owned++] = t;
    return t;
}

/* A float input whose gradient the test compares. */
static tfm_tensor *ctx_input(ctx *c, const char *key)
{
    tfm_tensor *t = ctx_get(c, key);
    ck_assert_int_eq(tfm_tensor_set_requires_grad(t, 1), TFM_OK);
    return t;
}

/* Copies every param.NAME of the file into the store's NAME. 0 when each
 * store parameter got a value of its shape and each param.* of the file was
 * used; otherwise 1 and the first mismatch in msg, with nothing promised
 * about the store. */
static int load_params(tfm_params *params, const tfm_safetensors *file, char *msg)
{
    char key[KEY];
    for (int64_t i = 0; i < tfm_params_count(params); i++) {
        const char *name = tfm_params_name(params, i);
        tfm_tensor *param = tfm_params_at(params, i);
        snprintf(key, sizeof key, "param.%s", name);
        tfm_tensor *value = tfm_safetensors_get(file, key);
        if (!value) {
            snprintf(msg, MSG, "libtfm parameter %s has no %s in the fixture", name, key);
            return 1;
        }
        int bad = compare_shapes(key, param, value, msg) ||
                  tfm_tensor_write_f32(param, tfm_tensor_data_f32(value),
                                       tfm_tensor_numel(value)) != TFM_OK;
        tfm_tensor_free(value);
        if (bad)
            return 1;
    }
    for (int64_t i = 0; i < tfm_safetensors_count(file); i++) {
        const char *key_i = tfm_safetensors_name(file, i);
        if (strncmp(key_i, "param.", 6) == 0 && !tfm_params_find(params, key_i + 6)) {
            tfm_clear_error();
            snprintf(msg, MSG, "the fixture's %s matches no libtfm parameter", key_i);
            return 1;
        }
    }
    return 0;
}

static void ctx_load(ctx *c)
{
    char msg[MSG];
    ck_assert_msg(tfm_params_count(c->params) > 0, "the store is empty: %s", tfm_last_error());
    ck_assert_msg(!load_params(c->params, c->file, msg), "%s", msg);
}

/* got (values, or its gradient) against the fixture's key. */
static void expect(ctx *c, tfm_tensor *got, int grad, const char *key, double tol)
{
    char msg[MSG];
    ck_assert_msg(got, "no tensor for %s: %s", key, tfm_last_error());
    tfm_tensor *want = tfm_safetensors_get(c->file, key);
    ck_assert_msg(want, "the fixture has no %s: %s", key, tfm_last_error());
    const float *values = grad ? tfm_tensor_grad_f32(got) : tfm_tensor_data_f32(got);
    ck_assert_msg(values, "%s: libtfm has no %s: %s", key, grad ? "gradient" : "values",
                  tfm_last_error());
    int64_t shape[TFM_MAX_DIMS];
    tfm_tensor_shape(want, shape);
    int bad = compare_shapes(key, got, want, msg) ||
              compare_values(key, values, tfm_tensor_data_f32(want), tfm_tensor_ndim(want),
                             shape, tol, msg);
    tfm_tensor_free(want);
    ck_assert_msg(!bad, "%s", msg);
}

/* Every parameter's gradient (or value, under another prefix) against the
 * fixture's PREFIX.NAME. */
static void expect_params(ctx *c, const char *prefix, int grad, double tol)
{
    char key[KEY];
    for (int64_t i = 0; i < tfm_params_count(c->params); i++) {
        snprintf(key, sizeof key, "%s.%s", prefix, tfm_params_name(c->params, i));
        expect(c, tfm_params_at(c->params, i), grad, key, tol);
    }
}

/* (out * seed.NAME).sum().backward(), as the generator did. */
static void backward_seeded(ctx *c, tfm_tensor *out, const char *seed_key)
{
    tfm_tensor *seed = ctx_get(c, seed_key);
    ck_assert_msg(tfm_tape_backward_with_grad(c->tape, out, tfm_tensor_data_f32(seed),
                                              tfm_tensor_numel(seed)) == TFM_OK,
                  "backward: %s", tfm_last_error());
}

static tfm_block_options block_options(int32_t norm_first)
{
    tfm_block_options o;
    tfm_block_options_init(&o);
    o.d_model = 16;
    o.heads = 2;
    o.d_ff = 32;
    o.dropout = 0.0f;
    o.activation = TFM_ACTIVATION_RELU;
    o.norm_first = norm_first;
    o.layer_norm_eps = 1e-5f;
    return o;
}

static tfm_layer *fused_attention(ctx *c)
{
    tfm_attention_options o;
    tfm_attention_options_init(&o);
    o.d_model = 16;
    o.heads = 2;
    o.bias = 1;
    o.fused_qkv = 1;
    o.dropout = 0.0f;
    tfm_layer *attention = tfm_attention_create(c->params, "", &o, c->rng);
    ck_assert_msg(attention, "tfm_attention_create: %s", tfm_last_error());
    return attention;
}

/* --- the checks themselves can fail --------------------------------------------------- */
START_TEST(comparison_reports_the_worst_value)
{
    char msg[MSG] = "";
    const int64_t shape[2] = {2, 3};
    const float want[6] = {1.0f, -2.0f, 1000.0f, 0.0f, -INFINITY, 5.0f};
    float got[6];
    memcpy(got, want, sizeof got);
    got[2] = 1000.009f; /* relative error 9e-6: within 1e-5 */
    got[3] = 9e-6f;     /* absolute error 9e-6: within 1e-5 */
    ck_assert_int_eq(compare_values("t", got, want, 2, shape, OUT_TOL, msg), 0);
    got[1] = -2.0001f;
    got[5] = 5.001f;
    ck_assert_int_eq(compare_values("t", got, want, 2, shape, OUT_TOL, msg), 1);
    ck_assert_msg(strstr(msg, "t: 2 of 6 values off") && strstr(msg, "worst at [1, 2]") &&
                      strstr(msg, "PyTorch 5"),
                  "%s", msg);
    memcpy(got, want, sizeof got);
    got[4] = 0.0f; /* a -inf that went finite */
    ck_assert_int_eq(compare_values("t", got, want, 2, shape, OUT_TOL, msg), 1);
    ck_assert_msg(strstr(msg, "worst at [1, 1]"), "%s", msg);
    got[4] = NAN;
    ck_assert_int_eq(compare_values("t", got, want, 2, shape, OUT_TOL, msg), 1);
}
END_TEST

START_TEST(naming_mismatches_fail_loudly)
{
    char msg[MSG] = "";
    ctx c;
    ctx_open(&c, "linear", 1);
    /* A prefix the fixture does not use: the store's names are missing. */
    tfm_layer *named = tfm_linear_create(c.params, "proj", 16, 8, 1, c.rng);
    ck_assert_int_eq(load_params(c.params, c.file, msg), 1);
    ck_assert_msg(strstr(msg, "proj.weight has no param.proj.weight"), "%s", msg);
    tfm_layer_free(named);
    tfm_params_free(c.params);
    /* No bias: the fixture's param.bias would go unused. */
    c.params = tfm_params_create();
    tfm_layer *no_bias = tfm_linear_create(c.params, "", 16, 8, 0, c.rng);
    ck_assert_int_eq(load_params(c.params, c.file, msg), 1);
    ck_assert_msg(strstr(msg, "param.bias matches no libtfm parameter"), "%s", msg);
    tfm_layer_free(no_bias);
    tfm_params_free(c.params);
    /* The wrong shape. */
    c.params = tfm_params_create();
    tfm_layer *wide = tfm_linear_create(c.params, "", 16, 9, 1, c.rng);
    ck_assert_int_eq(load_params(c.params, c.file, msg), 1);
    ck_assert_msg(strstr(msg, "param.weight: libtfm shape [9, 16], PyTorch shape [8, 16]"), "%s",
                  msg);
    tfm_layer_free(wide);
    ctx_close(&c);
}
END_TEST

START_TEST(a_wrong_weight_shows)
{
    char msg[MSG] = "";
    ctx c;
    ctx_open(&c, "linear", 1);
    tfm_layer *linear = tfm_linear_create(c.params, "", 16, 8, 1, c.rng);
    ctx_load(&c);
    tfm_tensor_data_f32(tfm_params_find(c.params, "weight"))[5] += 0.1f; /* weight[0, 5] */
    tfm_tensor *out = tfm_linear_forward(c.tape, linear, ctx_get(&c, "input.x"));
    tfm_tensor *want = ctx_get(&c, "output.out");
    ck_assert_int_eq(compare_values("output.out", tfm_tensor_data_f32(out),
                                    tfm_tensor_data_f32(want), 3, (const int64_t[]){2, 3, 8},
                                    OUT_TOL, msg),
                     1);
    ck_assert_msg(strstr(msg, "6 of 48 values off"), "%s", msg); /* column 0 of all 6 rows */
    tfm_layer_free(linear);
    ctx_close(&c);
}
END_TEST

/* Both parts of attention_self's mask change the output, so the fixture
 * would catch either one ignored. */
START_TEST(both_masks_matter)
{
    char msg[MSG] = "";
    ctx c;
    ctx_open(&c, "attention_self", 1);
    tfm_layer *attention = fused_attention(&c);
    ctx_load(&c);
    tfm_tensor *x = ctx_get(&c, "input.x"), *want = ctx_get(&c, "output.out");
    const int64_t shape[3] = {2, 4, 16};
    tfm_tensor *masks[2] = {NULL, tfm_mask_causal(c.tape, 4, TFM_F32)};
    for (int i = 0; i < 2; i++) {
        tfm_tensor *out = tfm_attention_forward(c.tape, attention, x, x, masks[i], NULL, NULL);
        ck_assert_msg(out, "%s", tfm_last_error());
        ck_assert_int_eq(compare_values("output.out", tfm_tensor_data_f32(out),
                                        tfm_tensor_data_f32(want), 3, shape, OUT_TOL, msg),
                         1);
    }
    tfm_layer_free(attention);
    ctx_close(&c);
}
END_TEST

/* --- layers ------------------------------------------------------------------------- */
START_TEST(linear_agrees)
{
    ctx c;
    ctx_open(&c, "linear", 1);
    tfm_layer *linear = tfm_linear_create(c.params, "", 16, 8, 1, c.rng);
    ctx_load(&c);
    tfm_tensor *x = ctx_input(&c, "input.x");
    tfm_tensor *out = tfm_linear_forward(c.tape, linear, x);
    expect(&c, out, 0, "output.out", OUT_TOL);
    backward_seeded(&c, out, "seed.out");
    expect_params(&c, "grad.param", 1, GRAD_TOL);
    expect(&c, x, 1, "grad.input.x", GRAD_TOL);
    tfm_layer_free(linear);
    ctx_close(&c);
}
END_TEST

START_TEST(layer_norm_agrees)
{
    ctx c;
    ctx_open(&c, "layer_norm", 1);
    tfm_layer *norm = tfm_layer_norm_create(c.params, "", 16, 1e-5f);
    ctx_load(&c);
    tfm_tensor *x = ctx_input(&c, "input.x");
    tfm_tensor *out = tfm_layer_norm_forward(c.tape, norm, x);
    expect(&c, out, 0, "output.out", OUT_TOL);
    backward_seeded(&c, out, "seed.out");
    expect_params(&c, "grad.param", 1, GRAD_TOL);
    expect(&c, x, 1, "grad.input.x", GRAD_TOL);
    tfm_layer_free(norm);
    ctx_close(&c);
}
END_TEST

START_TEST(embedding_agrees)
{
    ctx c;
    ctx_open(&c, "embedding", 1);
    tfm_layer *embedding = tfm_embedding_create(c.params, "", 11, 16, c.rng);
    ctx_load(&c);
    tfm_tensor *out = tfm_embedding_forward(c.tape, embedding, ctx_get(&c, "input.ids"));
    expect(&c, out, 0, "output.out", OUT_TOL);
    backward_seeded(&c, out, "seed.out"); /* id 4 three times: its row sums three seeds */
    expect_params(&c, "grad.param", 1, GRAD_TOL);
    tfm_layer_free(embedding);
    ctx_close(&c);
}
END_TEST


/* nn.MultiheadAttention's attn_mask (causal) and key_padding_mask, as the
 * one additive mask libtfm takes. */
START_TEST(attention_self_agrees)
{
    ctx c;
    ctx_open(&c, "attention_self", 1);
    tfm_layer *attention = fused_attention(&c);
    ctx_load(&c);
    tfm_tensor *x = ctx_input(&c, "input.x"), *weights = NULL;
    tfm_tensor *out = tfm_attention_forward(c.tape, attention, x, x,
                                            ctx_get(&c, "mask.combined"), NULL, &weights);
    expect(&c, out, 0, "output.out", OUT_TOL);
    expect(&c, weights, 0, "output.weights", OUT_TOL);
    backward_seeded(&c, out, "seed.out");
    expect_params(&c, "grad.param", 1, GRAD_TOL);
    expect(&c, x, 1, "grad.input.x", GRAD_TOL);
    tfm_layer_free(attention);
    ctx_close(&c);
}
END_TEST

START_TEST(attention_cross_agrees)
{
    ctx c;
    ctx_open(&c, "attention_cross", 1);
    tfm_layer *attention = fused_attention(&c);
    ctx_load(&c);
    tfm_tensor *query = ctx_input(&c, "input.query"), *memory = ctx_input(&c, "input.memory");
    tfm_tensor *weights = NULL;
    tfm_tensor *out = tfm_attention_forward(c.tape, attention, query, memory,
                                            ctx_get(&c, "mask.memory"), NULL, &weights);
    expect(&c, out, 0, "output.out", OUT_TOL);
    expect(&c, weights, 0, "output.weights", OUT_TOL);
    backward_seeded(&c, out, "seed.out");
    expect_params(&c, "grad.param", 1, GRAD_TOL);
    expect(&c, query, 1, "grad.input.query", GRAD_TOL);
    expect(&c, memory, 1, "grad.input.memory", GRAD_TOL);
    tfm_layer_free(attention);
    ctx_close(&c);
}
END_TEST

/* A fixture's PyTorch bool mask (stored as int32, 1 = ignore) in libtfm's
 * form, through the conversion a caller from PyTorch would use. */
static tfm_tensor *torch_bool_mask(ctx *c, const char *key, tfm_dtype form)
{
    tfm_tensor *t = ctx_get(c, key);
    uint8_t masked_out[64];
    int64_t shape[TFM_MAX_DIMS], n = tfm_tensor_numel(t);
    ck_assert(n <= (int64_t)sizeof masked_out);
    tfm_tensor_shape(t, shape);
    for (int64_t i = 0; i < n; i++)
        masked_out[i] = tfm_tensor_data_i32(t)[i] != 0;
    tfm_tensor *mask = tfm_mask_from_torch_bool(c->tape, masked_out, tfm_tensor_ndim(t), shape,
                                                form);
    ck_assert_msg(mask, "tfm_mask_from_torch_bool: %s", tfm_last_error());
    return mask;
}

/* B == S == T: the [B, S] key_padding_mask has the shape of a [T, S]
 * attn_mask. Given as key padding it is read as key padding (with the
 * causal attn_mask), given as the attention mask it is read as [T, S], as
 * PyTorch reads each; in both of libtfm's forms. */
START_TEST(attention_key_padding_agrees)
{
    ctx c;
    ctx_open(&c, "attention_key_padding", 1);
    tfm_layer *attention = fused_attention(&c);
    ctx_load(&c);
    /* the two readings differ, or this test would prove nothing */
    tfm_tensor *padded = ctx_get(&c, "output.out"), *as_attn = ctx_get(&c, "output.pad_as_attn_mask");
    double differ = 0.0;
    for (int64_t i = 0; i < tfm_tensor_numel(padded); i++)
        differ = fmax(differ, fabs(tfm_tensor_data_f32(padded)[i] - tfm_tensor_data_f32(as_attn)[i]));
    ck_assert_msg(differ > 0.1, "the fixture's two readings differ by only %g", differ);
    tfm_tensor *x = ctx_input(&c, "input.x");
    const tfm_dtype forms[2] = {TFM_F32, TFM_I32};
    for (int f = 0; f < 2; f++) {
        tfm_tensor *causal = torch_bool_mask(&c, "mask.torch_causal", forms[f]);
        tfm_tensor *padding = torch_bool_mask(&c, "mask.torch_key_padding", forms[f]);
        tfm_tensor *weights = NULL;
        tfm_tensor *out = tfm_attention_forward(c.tape, attention, x, x, causal, padding, &weights);
        expect(&c, out, 0, "output.out", OUT_TOL);
        expect(&c, weights, 0, "output.weights", OUT_TOL);
        expect(&c, tfm_attention_forward(c.tape, attention, x, x, padding, NULL, NULL), 0,
               "output.pad_as_attn_mask", OUT_TOL);
        if (f == 0) {
            backward_seeded(&c, out, "seed.out");
            expect_params(&c, "grad.param", 1, GRAD_TOL);
            expect(&c, x, 1, "grad.input.x", GRAD_TOL);
        }
        ck_assert_int_eq(tfm_tape_reset(c.tape), TFM_OK);
    }
    tfm_layer_free(attention);
    ctx_close(&c);
}
END_TEST

static void check_encoder_layer(const char *fixture, int32_t norm_first)
{
    ctx c;
    ctx_open(&c, fixture, 1);
    tfm_block_options o = block_options(norm_first);
    tfm_layer *layer = tfm_encoder_layer_create(c.params, "", &o, c.rng);
    ck_assert_msg(layer, "tfm_encoder_layer_create: %s", tfm_last_error());
    ctx_load(&c);
    tfm_tensor *x = ctx_input(&c, "input.x");
    tfm_tensor *out = tfm_encoder_layer_forward(c.tape, layer, x, ctx_get(&c, "mask.src"), NULL);
    expect(&c, out, 0, "output.out", OUT_TOL);
    backward_seeded(&c, out, "seed.out");
    expect_params(&c, "grad.param", 1, GRAD_TOL);
    expect(&c, x, 1, "grad.input.x", GRAD_TOL);
    tfm_layer_free(layer);
    ctx_close(&c);
}

START_TEST(encoder_layer_agrees)
{
    check_encoder_layer("encoder_layer", 0);
}
END_TEST

START_TEST(encoder_layer_prenorm_agrees)
{
    check_encoder_layer("encoder_layer_prenorm", 1);
}
END_TEST

/* The fixture's decoder layer (d_model 16), its parameters loaded. */
static tfm_layer *decoder_layer_open(ctx *c, const char *fixture)
{
    ctx_open(c, fixture, 1);
    tfm_block_options o = block_options(0);
    tfm_layer *layer = tfm_decoder_layer_create(c->params, "", &o, c->rng);
    ck_assert_msg(layer, "tfm_decoder_layer_create: %s", tfm_last_error());
    ctx_load(c);
    return layer;
}

START_TEST(decoder_layer_agrees)
{
    ctx c;
    tfm_layer *layer = decoder_layer_open(&c, "decoder_layer");
    tfm_tensor *tgt = ctx_input(&c, "input.tgt"), *memory = ctx_input(&c, "input.memory");
    tfm_tensor *out = tfm_decoder_layer_forward(c.tape, layer, tgt, memory,
                                                ctx_get(&c, "mask.tgt"),
                                                ctx_get(&c, "mask.memory"), NULL, NULL);
    expect(&c, out, 0, "output.out", OUT_TOL);
    backward_seeded(&c, out, "seed.out");
    expect_params(&c, "grad.param", 1, GRAD_TOL);
    expect(&c, tgt, 1, "grad.input.tgt", GRAD_TOL);
    expect(&c, memory, 1, "grad.input.memory", GRAD_TOL);
    tfm_layer_free(layer);
    ctx_close(&c);
}
END_TEST

/* --- queries with no key to attend to --------------------------------------------- */
/* The fixtures are PyTorch's layers with one change (generate.py's twins):
 * a query whose keys are all masked gets weights 0, where PyTorch gives
 * NaN. PyTorch's bool masks, converted to each of libtfm's forms, must
 * give the twin's values and gradients, and the same bits as each other. */
enum { NO_KEYS_MAX = 128 };

typedef struct no_keys_run {
    float out[NO_KEYS_MAX], grad[NO_KEYS_MAX]; /* the output, the first input's gradient */
} no_keys_run;

/* After the forward out of inputs[0..n): the fixture's output, its
 * gradients through the seeded backward, and a copy of both into run. */
static void expect_no_keys(ctx *c, tfm_tensor *out, tfm_tensor *const *inputs,
                           const char *const *grad_keys, int n, no_keys_run *run)
{
    expect(c, out, 0, "output.out", OUT_TOL);
    backward_seeded(c, out, "seed.out");
    expect_params(c, "grad.param", 1, GRAD_TOL);
    for (int i = 0; i < n; i++)
        expect(c, inputs[i], 1, grad_keys[i], GRAD_TOL);
    ck_assert(tfm_tensor_numel(out) <= NO_KEYS_MAX);
    ck_assert_int_eq(tfm_tensor_read_f32(out, run->out, tfm_tensor_numel(out)), TFM_OK);
    ck_assert_int_eq(tfm_tensor_read_grad(inputs[0], run->grad, tfm_tensor_numel(inputs[0])),
                     TFM_OK);
    ck_assert_int_eq(tfm_tape_reset(c->tape), TFM_OK);
    ck_assert_int_eq(tfm_params_zero_grad(c->params), TFM_OK);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(tfm_tensor_zero_grad(inputs[i]), TFM_OK);
}

static const tfm_dtype mask_forms[2] = {TFM_I32, TFM_F32};

/* PyTorch's test_transformerencoderlayer (d_model 4, cos weights, input
 * [20, 30, 40, 50]) with src_key_padding_mask [[True]]: its second batch
 * row, 2.212938 ... where the keep form gave 2.258704 (uniform attention)
 * and PyTorch NaN; the first row is the same input unmasked. */
START_TEST(encoder_layer_with_no_keys_agrees)
{
    ctx c;
    ctx_open(&c, "encoder_layer_no_keys", 1);
    tfm_block_options o = block_options(0);
    o.d_model = 4;
    o.d_ff = 16;
    tfm_layer *layer = tfm_encoder_layer_create(c.params, "", &o, c.rng);
    ck_assert_msg(layer, "tfm_encoder_layer_create: %s", tfm_last_error());
    ctx_load(&c);
    tfm_tensor *x = ctx_input(&c, "input.x");
    static const char *const grad_keys[1] = {"grad.input.x"};
    no_keys_run runs[2];
    memset(runs, 0, sizeof runs);
    for (int f = 0; f < 2; f++) {
        tfm_tensor *padding = torch_bool_mask(&c, "mask.torch_key_padding", mask_forms[f]);
        tfm_tensor *out = tfm_encoder_layer_forward(c.tape, layer, x, NULL, padding);
        expect_no_keys(&c, out, &x, grad_keys, 1, &runs[f]);
    }
    ck_assert_mem_eq(&runs[0], &runs[1], sizeof runs[0]);
    ck_assert_float_eq_tol(runs[0].out[4], 2.212938f, 1e-6f);
    tfm_layer_free(layer);
    ctx_close(&c);
}
END_TEST

/* A decoder layer whose second batch row has a source of padding only and
 * a target padded on the left (under the causal mask its first query has
 * no key): each mask given as PyTorch's. */
START_TEST(decoder_layer_with_no_keys_agrees)
{
    ctx c;
    tfm_layer *layer = decoder_layer_open(&c, "decoder_layer_no_keys");
    tfm_tensor *inputs[2] = {ctx_input(&c, "input.tgt"), ctx_input(&c, "input.memory")};
    static const char *const grad_keys[2] = {"grad.input.tgt", "grad.input.memory"};
    no_keys_run runs[2];
    memset(runs, 0, sizeof runs);
    for (int f = 0; f < 2; f++) {
        tfm_tensor *causal = torch_bool_mask(&c, "mask.torch_causal", mask_forms[f]);
        tfm_tensor *tgt_padding = torch_bool_mask(&c, "mask.torch_tgt_key_padding", mask_forms[f]);
        tfm_tensor *memory_padding = torch_bool_mask(&c, "mask.torch_memory_key_padding",
                                                     mask_forms[f]);
        tfm_tensor *out = tfm_decoder_layer_forward(c.tape, layer, inputs[0], inputs[1], causal,
                                                    NULL, tgt_padding, memory_padding);
        expect_no_keys(&c, out, inputs, grad_keys, 2, &runs[f]);
    }
    ck_assert_mem_eq(&runs[0], &runs[1], sizeof runs[0]);
    tfm_layer_free(layer);
    ctx_close(&c);
}
END_TEST

/* --- models --------------------------------------------------------------------------- */
/* model: nn.Transformer's encoder and decoder with sinusoidal positions and
 * embeddings times sqrt(d); model_taylor: tutorial 003's learned positions,
 * trainable scales, separate Q/K/V and no final norms. */
static tfm_model *model_open(ctx *c, const char *fixture, int taylor)
{
    ctx_open(c, fixture, 0);
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = 13;
    o.tgt_vocab = 11;
    o.max_src_len = 6;
    o.max_tgt_len = 5;
    o.encoder_layers = 2;
    o.decoder_layers = 2;
    o.d_model = 16; /* the layers as block_options(0) */
    o.heads = 2;
    o.d_ff = 32;
    o.dropout = 0.0f;
    o.seed = 11;
    if (taylor) {
        o.positions = TFM_POSITIONS_LEARNED;
        o.embedding_scale = TFM_EMBEDDING_SCALE_TRAINABLE;
        o.final_norm = 0;
        o.fused_qkv = 0;
        o.trainable_scale = 1;
        o.scale_init = 4.0f;
    } else {
        o.positions = TFM_POSITIONS_SINUSOIDAL;
        o.embedding_scale = TFM_EMBEDDING_SCALE_SQRT_D;
        o.final_norm = 1;
    }
    tfm_model *model = tfm_model_create(&o);
    ck_assert_msg(model, "tfm_model_create: %s", tfm_last_error());
    c->params = tfm_model_params(model);
    ctx_load(c);
    return model;
}

/* Logits and loss against the fixture, then backward from the loss. The
 * source padding goes in as 4-D attention masks [B, 1, 1, S], as the
 * fixture has it, or as the [B, S] key-padding masks PyTorch was given. */
static void model_forward_backward(ctx *c, tfm_model *model, int key_padding)
{
    tfm_tensor *mask_src = ctx_get(c, "mask.src"), *src = ctx_get(c, "input.src");
    tfm_tensor *padding = NULL;
    if (key_padding) {
        int64_t B = tfm_tensor_dim(src, 0), S = tfm_tensor_dim(src, 1);
        padding = tfm_tensor_from_i32(2, (const int64_t[]){B, S}, tfm_tensor_data_i32(mask_src));
        ck_assert(c->n_owned < MAX_OWNED);
        c->owned[c->n_owned++] = padding;
        mask_src = NULL;
    }
    tfm_tensor *logits = tfm_model_forward(c->tape, model, src, ctx_get(c, "input.tgt"), mask_src,
                                           ctx_get(c, "mask.tgt"), mask_src, padding, NULL,
                                           padding);
    expect(c, logits, 0, "output.logits", OUT_TOL);
    tfm_tensor *loss = tfm_cross_entropy(c->tape, logits, ctx_get(c, "input.targets"), 0, 0.1f);
    expect(c, loss, 0, "output.loss", OUT_TOL);
    ck_assert_msg(tfm_tape_backward(c->tape, loss) == TFM_OK, "backward: %s", tfm_last_error());
}

static void check_model(const char *fixture, int taylor, int key_padding)
{
    ctx c;
    tfm_model *model = model_open(&c, fixture, taylor);
    model_forward_backward(&c, model, key_padding);
    expect_params(&c, "grad.param", 1, GRAD_TOL);
    tfm_model_free(model);
    ctx_close(&c);
}

START_TEST(model_agrees)
{
    check_model("model", 0, 0);
}
END_TEST

/* The same with src_key_padding_mask and memory_key_padding_mask, as
 * nn.Transformer was called. */
START_TEST(model_agrees_with_key_padding_masks)
{
    check_model("model", 0, 1);
}
END_TEST

START_TEST(model_taylor_agrees)
{
    check_model("model_taylor", 1, 0);
}
END_TEST

/* One step from the fixture's parameters and PyTorch's own gradients, so the
 * optimizer is compared alone: some gradients are pure rounding noise (the
 * key bias's, which softmax cancels), and Adam's first step turns any
 * gradient well above eps into +-lr, sign and all. */
static void check_step(const char *prefix, tfm_optimizer_options *o)
{
    ctx c;
    char key[KEY];
    tfm_model *model = model_open(&c, "model", 0);
    for (int64_t i = 0; i < tfm_params_count(c.params); i++) {
        tfm_tensor *param = tfm_params_at(c.params, i);
        snprintf(key, sizeof key, "grad.param.%s", tfm_params_name(c.params, i));
        tfm_tensor *grad = tfm_safetensors_get(c.file, key);
        ck_assert_msg(grad, "the fixture has no %s: %s", key, tfm_last_error());
        ck_assert_int_eq(tfm_tensor_numel(grad), tfm_tensor_numel(param));
        memcpy(tfm_tensor_grad_f32(param), tfm_tensor_data_f32(grad),
               (size_t)tfm_tensor_numel(grad) * sizeof(float));
        tfm_tensor_free(grad);
    }
    tfm_optimizer *optimizer = tfm_optimizer_create(c.params, o);
    ck_assert_msg(optimizer, "tfm_optimizer_create: %s", tfm_last_error());
    ck_assert_msg(tfm_optimizer_step(optimizer) == TFM_OK, "step: %s", tfm_last_error());
    expect_params(&c, prefix, 0, STEP_TOL);
    tfm_optimizer_free(optimizer);
    tfm_model_free(model);
    ctx_close(&c);
}

START_TEST(adam_step_agrees)
{
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAM);
    o.lr = 1e-3f;
    o.beta1 = 0.9f;
    o.beta2 = 0.98f;
    o.eps = 1e-9f;
    o.weight_decay = 0.0f;
    check_step("adam.param", &o);
}
END_TEST

START_TEST(adamw_step_agrees)
{
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAMW);
    o.lr = 1e-3f;
    o.beta1 = 0.9f;
    o.beta2 = 0.999f;
    o.eps = 1e-8f;
    o.weight_decay = 0.01f;
    check_step("adamw.param", &o);
}
END_TEST

static Suite *torch_agreement_suite(void)
{
    Suite *s = suite_create("torch_agreement");
    TCase *checks = tcase_create("checks");
    tcase_add_test(checks, comparison_reports_the_worst_value);
    tcase_add_test(checks, naming_mismatches_fail_loudly);
    tcase_add_test(checks, a_wrong_weight_shows);
    tcase_add_test(checks, both_masks_matter);
    suite_add_tcase(s, checks);
    TCase *layers = tcase_create("layers");
    tcase_add_test(layers, linear_agrees);
    tcase_add_test(layers, layer_norm_agrees);
    tcase_add_test(layers, embedding_agrees);
    tcase_add_test(layers, attention_self_agrees);
    tcase_add_test(layers, attention_cross_agrees);
    tcase_add_test(layers, attention_key_padding_agrees);
    tcase_add_test(layers, encoder_layer_agrees);
    tcase_add_test(layers, encoder_layer_prenorm_agrees);
    tcase_add_test(layers, decoder_layer_agrees);
    tcase_add_test(layers, encoder_layer_with_no_keys_agrees);
    tcase_add_test(layers, decoder_layer_with_no_keys_agrees);
    suite_add_tcase(s, layers);
    TCase *models = tcase_create("models");
    tcase_add_test(models, model_agrees);
    tcase_add_test(models, model_agrees_with_key_padding_masks);
    tcase_add_test(models, model_taylor_agrees);
    tcase_add_test(models, adam_step_agrees);
    tcase_add_test(models, adamw_step_agrees);
    suite_add_tcase(s, models);
    return s;
}

TFM_CHECK_MAIN(torch_agreement_suite)
