/* Multi-head attention: torch.nn.MultiheadAttention's fused Q/K/V layout, or
 * separate projections as tutorial 003, with a fixed 1/sqrt(d_k) or a
 * trainable scale. Internal pieces live here: the head split of a column
 * block of a projection (fusing the fused bias and the fixed scale into the
 * copy the split makes anyway), the division by the trainable scale, and a
 * zero-copy view of rows of in_proj_weight for cross-attention. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/options.h"
#include "nn/layer.h"

/* The output projection is always child 0; q/k/v exist when not fused. */

void tfm_attention_options_init(tfm_attention_options *o)
{
    if (!o)
        return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->d_model = 512;
    o->heads = 8;
    o->bias = 1;
    o->fused_qkv = 1;
    o->dropout = 0.0f;
    o->trainable_scale = 0;
    o->scale_init = 0.0f; /* sqrt(d_model), as tutorial 003 */
}

/* The caller's options over the defaults; every field is in the first layout. */
static int read_options(const char *op, const tfm_attention_options *given,
                        tfm_attention_options *o)
{
    tfm_attention_options_init(o);
    if (tfm__read_options(op, "tfm_attention_options_init", given, o, sizeof *o,
                          offsetof(tfm_attention_options, d_model) + sizeof o->d_model) < 0)
        return -1;
    if (tfm__check_attention_options(op, o->d_model, o->heads, o->dropout, o->trainable_scale,
                                     o->scale_init) < 0)
        return -1;
    return 0;
}

/* A linear child NAME.suffix [D, D]; zero_bias as MultiheadAttention's out_proj. */
static tfm_layer *projection(const char *op, tfm_params *params, const char *name,
                             const char *suffix, const tfm_attention_options *o,
                             int zero_bias, tfm_rng *rng)
{
    char full[TFM_NAME_MAX];
    if (tfm__layer_name(op, full, name, suffix) < 0)
        return NULL;
    tfm_layer *linear = tfm_linear_create(params, full, o->d_model, o->d_model, o->bias, rng);
    if (linear && linear->bias && zero_bias)
        memset(linear->bias->data, 0, (size_t)linear->bias->numel * sizeof(float));
    return linear;
}

/* Parameters are added in the order of PyTorch's state_dict: the module's
 * own (in_proj_weight, in_proj_bias, scale) before its children's. */
tfm_layer *tfm_attention_create(tfm_params *params, const char *name,
                                const tfm_attention_options *options, tfm_rng *rng)
{
    const char *op = "tfm_attention_create";
    if (!params || !name || !rng) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, !params ? "params" : !name ? "name" : "rng");
        return NULL;
    }
    tfm_attention_options o;
    if (read_options(op, options, &o) < 0)
        return NULL;
    int fused = o.fused_qkv != 0;
    tfm_layer *layer = tfm__layer_new(op, TFM_LAYER_ATTENTION, fused ? 1 : TFM__ATT_CHILDREN);
    if (!layer)
        return NULL;
    layer->d_model = o.d_model;
    layer->heads = o.heads;
    layer->fused = fused;
    layer->dropout = o.dropout;
    layer->rng = rng;
    int64_t d = o.d_model;
    int ok = 1;
    if (fused) {
        /* xavier on the whole [3D, D] matrix, as MultiheadAttention resets it */
        ok = (layer->weight = tfm__layer_param(op, params, name, "in_proj_weight", 2,
                                               (const int64_t[]){3 * d, d})) &&
             tfm_init_xavier_uniform(layer->weight, 1.0f, rng) == TFM_OK &&
             (!o.bias || (layer->bias = tfm__layer_param(op, params, name, "in_proj_bias", 1,
                                                         (const int64_t[]){3 * d})));
    }
    if (ok && o.trainable_scale) {
        ok = (layer->scale = tfm__layer_param(op, params, name, "scale", 1,
                                              (const int64_t[]){1})) != NULL;
        if (ok)
            tfm__f32(layer->scale)[0] = o.scale_init > 0.0f ? o.scale_init : sqrtf((float)d);
    }
    tfm_layer **c = layer->children;
    if (ok && !fused)
        ok = (c[TFM__ATT_Q] = projection(op, params, name, "q_proj", &o, 0, rng)) &&
             (c[TFM__ATT_K] = projection(op, params, name, "k_proj", &o, 0, rng)) &&
             (c[TFM__ATT_V] = projection(op, params, name, "v_proj", &o, 0, rng));
    if (ok)
        ok = (c[TFM__ATT_OUT] = projection(op, params, name, "out_proj", &o, fused, rng)) != NULL;
    if (!ok) {
        tfm_layer_free(layer);
        return NULL;
    }
    return layer;
}

/* --- internal op: heads of a column block, with bias and scale --------------- */

/* out[b, h, t, :] = factor * (x[b, t, col + h*dk : col + (h+1)*dk]
 *                             + bias[bias_off + h*dk : …]),
 * x [B, T, W], out [B, heads, T, dk]. ints: col, bias_off; floats: factor. */
static void heads_backward(tfm_node *node)
{
    const tfm_tensor *x = node->in[0], *bias = node->in[1];
    float *gx = tfm__grad_of(x), *gb = bias ? tfm__grad_of(bias) : NULL;
    const float *g = node->out->grad;
    int64_t batch = node->out->shape[0], heads = node->out->shape[1];
    int64_t len = node->out->shape[2], dk = node->out->shape[3], width = x->shape[2];
    int64_t col = node->ints[0], bias_off = node->ints[1];
    float factor = node->floats[0];
    for (int64_t b = 0; b < batch; b++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t t = 0; t < len; t++, g += dk) {
                if (gx) {
                    float *dst = gx + (b * len + t) * width + col + h * dk;
                    for (int64_t j = 0; j < dk; j++)
                        dst[j] += factor * g[j];
                }
                if (gb) {
                    float *dst = gb + bias_off + h * dk;
                    for (int64_t j = 0; j < dk; j++)
                        dst[j] += factor * g[j];
                }
            }
}

static tfm_tensor *heads_of(tfm_tape *tape, const tfm_tensor *x, int64_t col,
                            const tfm_tensor *bias, int64_t bias_off, int32_t heads,
                            int64_t d_model, float factor)
{
    const char *op = "tfm_attention_forward";
    if (!x) {
        tfm__fail_null_input(op, "a projection");
        return NULL;
    }
    int64_t batch = x->shape[0], len = x->shape[1], width = x->shape[2], dk = d_model / heads;
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, 4,
                                      (const int64_t[]){batch, heads, len, dk});
    if (!out)
        return NULL;
    const float *xv = tfm__f32(x), *bv = bias ? tfm__f32(bias) + bias_off : NULL;
    float *o = tfm__f32(out);
    for (int64_t b = 0; b < batch; b++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t t = 0; t < len; t++, o += dk) {
                const float *src = xv + (b * len + t) * width + col + h * dk;
                if (bv) {
                    const float *bh = bv + h * dk;
                    for (int64_t j = 0; j < dk; j++)
                        o[j] = factor * (src[j] + bh[j]);
                } else {
                    for (int64_t j = 0; j < dk; j++)
                        o[j] = factor * src[j];
                }
            }
    tfm_node *node;
    if (tfm__record(tape, op, out, heads_backward, 2, (const tfm_tensor *[]){x, bias},
                    &node) < 0)
        return NULL;
    if (node) {
        node->ints[0] = col;
        node->ints[1] = bias_off;
        node->floats[0] = factor;
    }
    return out;
}

/* --- internal op: division by the trainable scale -------------------------- */

/* y = x / s: dx = g / s, ds = -sum(g * y) / s. floats[0] holds 1/s as used. */
static void divide_backward(tfm_node *node)
{
    const tfm_tensor *x = node->in[0], *s = node->in[1];
    float *gx = tfm__grad_of(x), *gs = tfm__grad_of(s);
    const float *g = node->out->grad, *y = tfm__f32(node->out);
    float inv = node->floats[0];
    int64_t n = node->out->numel;
    if (gx)
        for (int64_t i = 0; i < n; i++)
            gx[i] += g[i] * inv;
    if (gs) {
        double dot = 0.0;
        for (int64_t i = 0; i < n; i++)
            dot += (double)g[i] * (double)y[i];
        gs[0] -= (float)(dot * inv);
    }
}

static tfm_tensor *divide_by_scale(tfm_tape *tape, const tfm_tensor *x, const tfm_tensor *s)
{
    const char *op = "tfm_attention_forward";
    if (!x) {
        tfm__fail_null_input(op, "the queries");
        return NULL;
    }
    float scale = tfm__f32(s)[0];
    if (!(scale != 0.0f) || !isfinite(scale)) {
        tfm__fail(TFM_ERR_NUMERIC, "%s: the trainable scale is %g; it must be finite and "
                  "nonzero", op, (double)scale);
        return NULL;
    }
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, x->ndim, x->shape);
    if (!out)
        return NULL;
    float inv = 1.0f / scale;
    const float *xv = tfm__f32(x);
    float *o = tfm__f32(out);
    for (int64_t i = 0; i < x->numel; i++)
        o[i] = xv[i] * inv;
    tfm_node *node;
    if (tfm__record(tape, op, out, divide_backward, 2, (const tfm_tensor *[]){x, s}, &node) < 0)
        return NULL;
    if (node)
        node->floats[0] = inv;
    return out;
}

/* Rows [row0, row0 + rows) of a parameter matrix, sharing its values and its
 * gradient: an op taking it adds (+=) its gradient straight into the
 * parameter's rows, so the slice needs no copy and no record of its own. */
static tfm_tensor *rows_of(tfm_tape *tape, const tfm_tensor *w, int64_t row0, int64_t rows)
{
    int64_t cols = w->shape[1], offset = row0 * cols;
    tfm_tensor *t = tfm__new_view(tape, "tfm_attention_forward", w, 2,
                                  (const int64_t[]){rows, cols});
    if (!t)
        return NULL;
    t->data = tfm__f32(w) + offset;
    if (tape->recording && w->requires_grad && w->grad) {
        t->requires_grad = 1;
        t->grad = w->grad + offset;
    }
    return t;
}

/* --- forward ------------------------------------------------------------------ */

/* The mask must broadcast to the scores [B, heads, T, S] without growing them. */
static int check_mask(const char *op, const tfm_tensor *mask, const int64_t *scores)
{
    int ok = 1;
    for (int32_t i = 1; ok && i <= mask->ndim; i++) {
        int64_t m = mask->shape[mask->ndim - i];
        ok = m == 1 || m == scores[4 - i];
    }
    if (!ok) {
        char ms[64], ss[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: mask %s does not broadcast to the attention scores "
                  "%s [B, heads, T, S]", op, tfm__shape_str(mask, ms, sizeof ms),
                  tfm__dims_str(scores, 4, ss, sizeof ss));
        return -1;
    }
    return 0;
}

tfm_tensor *tfm_attention_forward(tfm_tape *tape, const tfm_layer *att, const tfm_tensor *query,
                                  const tfm_tensor *memory, const tfm_tensor *mask,
                                  tfm_tensor **weights_out)
{
    const char *op = "tfm_attention_forward";
    if (weights_out)
        *weights_out = NULL;
    if (tfm__check_layer(op, att, TFM_LAYER_ATTENTION) < 0 ||
        tfm__check_sequence(op, "query", query, att->d_model) < 0 ||
        tfm__check_sequence(op, "memory", memory, att->d_model) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    int64_t d = att->d_model;
    int32_t h = att->heads;
    int64_t scores_shape[4] = {query->shape[0], h, query->shape[1], memory->shape[1]};
    if (memory->shape[0] != query->shape[0]) {
        char qs[64], ms[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: query %s and memory %s have different batch sizes", op,
                  tfm__shape_str(query, qs, sizeof qs), tfm__shape_str(memory, ms, sizeof ms));
        return NULL;
    }
    if (mask && check_mask(op, mask, scores_shape) < 0)
        return NULL;

    /* A fixed scale is folded into the copy that splits the queries' heads. */
    float factor = att->scale ? 1.0f : 1.0f / sqrtf((float)(d / h));
    tfm_layer *const *c = att->children;
    tfm_tensor *q, *k, *v;
    if (att->fused && query == memory) {
        /* self-attention: one GEMM for Q, K and V */
        tfm_tensor *qkv = tfm_matmul(tape, query, att->weight, 0, 1);
        q = heads_of(tape, qkv, 0, att->bias, 0, h, d, factor);
        k = heads_of(tape, qkv, d, att->bias, d, h, d, 1.0f);
        v = heads_of(tape, qkv, 2 * d, att->bias, 2 * d, h, d, 1.0f);
    } else if (att->fused) {
        /* cross-attention: Q from the first D rows, K and V from the other 2D */
        tfm_tensor *ql = tfm_matmul(tape, query, rows_of(tape, att->weight, 0, d), 0, 1);
        tfm_tensor *kv = tfm_matmul(tape, memory, rows_of(tape, att->weight, d, 2 * d), 0, 1);
        q = heads_of(tape, ql, 0, att->bias, 0, h, d, factor);
        k = heads_of(tape, kv, 0, att->bias, d, h, d, 1.0f);
        v = heads_of(tape, kv, d, att->bias, 2 * d, h, d, 1.0f);
    } else {
        q = heads_of(tape, tfm_linear_forward(tape, c[TFM__ATT_Q], query), 0, NULL, 0, h, d, factor);
        k = tfm_split_heads(tape, tfm_linear_forward(tape, c[TFM__ATT_K], memory), h);
        v = tfm_split_heads(tape, tfm_linear_forward(tape, c[TFM__ATT_V], memory), h);
    }
    /* (Q / s) K^T equals Q K^T / s and divides the smaller tensor */
    if (att->scale)
        q = divide_by_scale(tape, q, att->scale);
    tfm_tensor *weights = tfm_softmax(tape, tfm_matmul(tape, q, k, 0, 1), mask);
    tfm_tensor *dropped = weights;
    if (att->training && att->dropout > 0.0f)
        dropped = tfm_dropout(tape, weights, att->dropout, 1, att->rng);
    tfm_tensor *context = tfm_merge_heads(tape, tfm_matmul(tape, dropped, v, 0, 0));
    tfm_tensor *out = tfm_linear_forward(tape, c[TFM__ATT_OUT], context);
    if (out && weights_out)
        *weights_out = weights;
    return out;
}
