/* Multi-head attention: torch.nn.MultiheadAttention's fused Q/K/V layout, or
 * separate projections as tutorial 003, with a fixed 1/sqrt(d_k) or a
 * trainable scale. The projections are tfm_linear ops (cross-attention's
 * use zero-copy row views of in_proj_weight and in_proj_bias); the rest is
 * the fused core in ops/attention.c, which reads the heads in place. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/options.h"
#include "nn/layer.h"
#include "ops/attention.h"

/* The output projection is always child 0; q/k/v exist when not fused. */

void tfm_attention_options_init_sized(tfm_attention_options *o, uint32_t struct_size)
{
    tfm_attention_options d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.d_model = 512;
    d.heads = 8;
    d.bias = 1;
    d.fused_qkv = 1;
    d.dropout = 0.0f;
    d.trainable_scale = 0;
    d.scale_init = 0.0f; /* sqrt(d_model), as tutorial 003 */
    tfm__init_options(o, struct_size, &d, sizeof d);
}

/* The caller's options over the defaults; every field is in the first layout. */
static int read_options(const char *op, const tfm_attention_options *given,
                        tfm_attention_options *o)
{
    tfm_attention_options_init(o);
    if (tfm__read_options(op, "tfm_attention_options_init", given, o, sizeof *o,
                          offsetof(tfm_attention_options, d_model) + sizeof o->d_model) < 0)
        return -1;
    if (tfm__check_attention_options(op, o->d_model, o->heads, o->head_dim, o->dropout,
                                     o->trainable_scale, o->scale_init) < 0)
        return -1;
    if (o->unscaled && o->trainable_scale) {
        tfm__fail(TFM_ERR_ARG, "%s: unscaled attention has no trainable_scale", op);
        return -1;
    }
    return 0;
}

/* A linear child NAME.suffix [out, in]; zero_bias as MultiheadAttention's out_proj. */
static tfm_layer *projection(const char *op, tfm_params *params, const char *name,
                             const char *suffix, int64_t in, int64_t out, int32_t bias,
                             int zero_bias, tfm_rng *rng)
{
    char full[TFM_NAME_MAX];
    if (tfm__layer_name(op, full, name, suffix) < 0)
        return NULL;
    tfm_layer *linear = tfm_linear_create(params, full, in, out, bias, rng);
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
    int64_t mark = tfm_params_count(params);
    uint64_t error_mark = tfm__error_mark();
    tfm_layer *layer = tfm__layer_new(op, TFM_LAYER_ATTENTION, fused ? 1 : TFM__ATT_CHILDREN);
    if (!layer)
        return NULL;
    layer->d_model = o.d_model;
    layer->heads = o.heads;
    layer->head_dim = tfm__head_dim(o.d_model, o.heads, o.head_dim);
    layer->fused = fused;
    layer->unscaled = o.unscaled != 0;
    layer->dropout = o.dropout;
    layer->rng = rng;
    int64_t d = o.d_model, inner = o.heads * layer->head_dim;
    int ok = 1;
    if (fused) {
        /* xavier on the whole [3 inner, D] matrix, as MultiheadAttention resets it */
        ok = (layer->weight = tfm__layer_param(op, params, name, "in_proj_weight", 2,
                                               (const int64_t[]){3 * inner, d})) &&
             tfm_init_xavier_uniform(layer->weight, 1.0f, rng) == TFM_OK &&
             (!o.bias || (layer->bias = tfm__layer_param(op, params, name, "in_proj_bias", 1,
                                                         (const int64_t[]){3 * inner})));
    }
    if (ok && o.trainable_scale) {
        ok = (layer->scale = tfm__layer_param(op, params, name, "scale", 1,
                                              (const int64_t[]){1})) != NULL;
        if (ok)
            tfm__f32(layer->scale)[0] = o.scale_init > 0.0f ? o.scale_init : sqrtf((float)d);
    }
    tfm_layer **c = layer->children;
    if (ok && !fused)
        ok = (c[TFM__ATT_Q] = projection(op, params, name, "q_proj", d, inner, o.bias, 0, rng)) &&
             (c[TFM__ATT_K] = projection(op, params, name, "k_proj", d, inner, o.bias, 0, rng)) &&
             (c[TFM__ATT_V] = projection(op, params, name, "v_proj", d, inner, o.bias, 0, rng));
    if (ok)
        ok = (c[TFM__ATT_OUT] = projection(op, params, name, "out_proj", inner, d, o.bias, fused,
                                           rng)) != NULL;
    if (!ok) {
        tfm__fail_within(op, error_mark);
        return tfm__layer_abandon(layer, params, mark);
    }
    return layer;
}

/* Rows [row0, row0 + rows) of a parameter matrix or vector, sharing its
 * values and its gradient: an op taking it adds (+=) its gradient straight
 * into the parameter's rows, so the slice needs no copy and no record. */
static tfm_tensor *rows_of(tfm_tape *tape, const char *op, const tfm_tensor *w, int64_t row0,
                           int64_t rows)
{
    if (!w)
        return NULL;
    int64_t cols = w->ndim == 2 ? w->shape[1] : 1, offset = row0 * cols;
    tfm_tensor *t = tfm__new_view(tape, op, w, w->ndim,
                                  (const int64_t[]){rows, cols});
    if (!t)
        return NULL;
    t->data = tfm__f32(w) + offset;
    int64_t part_rows = w->int8 ? w->shape[0] / w->int8_parts : 0;
    if (part_rows && row0 % part_rows == 0 && rows % part_rows == 0) { /* its int8 parts */
        t->int8 = w->int8 + row0 / part_rows;
        t->int8_parts = (int32_t)(rows / part_rows);
    }
    if (tape->recording && w->requires_grad && w->grad) {
        t->requires_grad = 1;
        t->grad = w->grad + offset;
    }
    return t;
}

/* --- forward ------------------------------------------------------------------ */

tfm_tensor *tfm__attention_context(tfm_tape *tape, const char *op, const tfm_layer *att,
                                   const tfm_tensor *query, const tfm_tensor *memory,
                                   const tfm_tensor *mask, tfm_tensor **weights_out)
{
    uint64_t mark = tfm__error_mark();
    int32_t h = att->heads;
    int64_t d = h * att->head_dim; /* the heads' width */
    tfm_attention_core core = {
        .d_model = d,
        .heads = h,
        .factor = att->scale || att->unscaled ? 1.0f : 1.0f / sqrtf((float)att->head_dim),
        .scale = att->scale,
        .mask = mask,
        .dropout = tfm__layer_trains(tape, att) ? att->dropout : 0.0f,
        .rng = att->rng,
        .recompute_weights = (att->recompute & TFM_RECOMPUTE_ATTENTION_WEIGHTS) != 0,
        .recompute_context = (att->recompute & TFM_RECOMPUTE_ATTENTION_CONTEXT) != 0,
    };
    tfm_layer *const *c = att->children;
    tfm_heads q, k, v;
    if (att->fused && query == memory) {
        /* self-attention: one GEMM for Q, K and V */
        tfm_tensor *qkv = tfm_linear(tape, query, att->weight, att->bias);
        q = (tfm_heads){qkv, 0};
        k = (tfm_heads){qkv, d};
        v = (tfm_heads){qkv, 2 * d};
    } else if (att->fused) {
        /* cross-attention: Q from the first d rows, K and V from the other 2d */
        tfm_tensor *w_q = rows_of(tape, op, att->weight, 0, d);
        tfm_tensor *b_q = rows_of(tape, op, att->bias, 0, d);
        tfm_tensor *w_kv = rows_of(tape, op, att->weight, d, 2 * d);
        tfm_tensor *b_kv = rows_of(tape, op, att->bias, d, 2 * d);
        if (!w_q || !w_kv || (att->bias && (!b_q || !b_kv)))
            return NULL; /* out of tape memory for the views */
        tfm_tensor *kv = tfm_linear(tape, memory, w_kv, b_kv);
        q = (tfm_heads){tfm_linear(tape, query, w_q, b_q), 0};
        k = (tfm_heads){kv, 0};
        v = (tfm_heads){kv, d};
    } else {
        q = (tfm_heads){tfm_linear_forward(tape, c[TFM__ATT_Q], query), 0};
        k = (tfm_heads){tfm_linear_forward(tape, c[TFM__ATT_K], memory), 0};
        v = (tfm_heads){tfm_linear_forward(tape, c[TFM__ATT_V], memory), 0};
    }
    return tfm__result_within(op, mark, tfm__attention(tape, op, q, k, v, &core, weights_out));
}

tfm_tensor *tfm_attention_forward(tfm_tape *tape, const tfm_layer *att, const tfm_tensor *query,
                                  const tfm_tensor *memory, const tfm_tensor *mask,
                                  const tfm_tensor *key_padding_mask, tfm_tensor **weights_out)
{
    const char *op = "tfm_attention_forward";
    uint64_t mark = tfm__error_mark();
    if (weights_out)
        *weights_out = NULL;
    if (tfm__check_layer(op, att, TFM_LAYER_ATTENTION) < 0 ||
        tfm__check_sequence(op, "query", query, att->d_model) < 0 ||
        tfm__check_sequence(op, "memory", memory, att->d_model) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    if (memory->shape[0] != query->shape[0]) {
        char qs[64], ms[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: query %s and memory %s have different batch sizes", op,
                  tfm__shape_str(query, qs, sizeof qs), tfm__shape_str(memory, ms, sizeof ms));
        return NULL;
    }
    const int64_t scores[4] = {query->shape[0], att->heads, query->shape[1], memory->shape[1]};
    const tfm_tensor *merged;
    const tfm__masks given = {mask, key_padding_mask, "mask", "key_padding_mask"};
    if (tfm__attention_mask(tape, op, &given, scores, &merged) < 0)
        return NULL;
    tfm_tensor *context = tfm__attention_context(tape, op, att, query, memory, merged, weights_out);
    if (!context)
        return NULL;
    tfm_tensor *out = tfm_linear_forward(tape, att->children[TFM__ATT_OUT], context);
    if (!out && weights_out)
        *weights_out = NULL;
    return tfm__result_within(op, mark, out);
}
