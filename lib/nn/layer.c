/* What every layer shares: creation, names, checks, free, training mode. */
#include "nn/layer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/params.h"

/* The widest attention: heads * head_dim, as the widest d_model a model
 * file takes. */
#define MAX_INNER_WIDTH ((int64_t)1 << 31)

static const char *const kind_names[] = {
    [TFM_LAYER_LINEAR] = "linear",
    [TFM_LAYER_EMBEDDING] = "embedding",
    [TFM_LAYER_LAYER_NORM] = "layer_norm",
    [TFM_LAYER_DROPOUT] = "dropout",
    [TFM_LAYER_FEED_FORWARD] = "feed_forward",
    [TFM_LAYER_ATTENTION] = "attention",
    [TFM_LAYER_ENCODER_LAYER] = "encoder_layer",
    [TFM_LAYER_DECODER_LAYER] = "decoder_layer",
    [TFM_LAYER_ENCODER] = "encoder",
    [TFM_LAYER_DECODER] = "decoder",
    [TFM_LAYER_POSITIONS] = "positions",
};

tfm_layer *tfm__layer_new(const char *op, tfm__layer_kind kind, int32_t n_children)
{
    tfm_layer *layer = calloc(1, sizeof *layer);
    tfm_layer **children = n_children ? calloc((size_t)n_children, sizeof *children) : NULL;
    if (!layer || (n_children && !children)) {
        free(layer);
        free(children);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return NULL;
    }
    layer->kind = kind;
    layer->training = 1;
    layer->n_children = n_children;
    layer->children = children;
    return layer;
}

int tfm__layer_name(const char *op, char *out, const char *prefix, const char *suffix)
{
    int n = prefix && prefix[0] ? snprintf(out, TFM_NAME_MAX, "%s.%s", prefix, suffix)
                                : snprintf(out, TFM_NAME_MAX, "%s", suffix);
    if (n < 0 || n >= TFM_NAME_MAX) {
        tfm__fail(TFM_ERR_ARG, "%s: the name \"%s.%s\" is too long", op, prefix, suffix);
        return -1;
    }
    return 0;
}

int tfm__check_layer(const char *op, const tfm_layer *layer, tfm__layer_kind kind)
{
    if (!layer) {
        tfm__fail(TFM_ERR_NULL, "%s: layer is NULL", op);
        return -1;
    }
    if (layer->kind != kind) {
        tfm__fail(TFM_ERR_ARG, "%s: expected a layer of kind %s, got kind %s", op,
                  kind_names[kind], kind_names[layer->kind]);
        return -1;
    }
    return 0;
}

tfm_tensor *tfm__layer_param(const char *op, tfm_params *params, const char *prefix,
                             const char *suffix, int32_t ndim, const int64_t *shape)
{
    char name[TFM_NAME_MAX];
    uint64_t mark = tfm__error_mark();
    if (tfm__layer_name(op, name, prefix, suffix) < 0 || tfm__checked_numel(op, ndim, shape) < 0)
        return NULL;
    return tfm__result_within(op, mark, tfm_params_add(params, name, ndim, shape));
}

int tfm__check_sequence(const char *op, const char *what, const tfm_tensor *t, int64_t d_model)
{
    if (tfm__check_input(op, what, t, TFM_F32) < 0)
        return -1;
    if (t->ndim != 3 || t->shape[2] != d_model) {
        char ts[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: %s %s must be [B, length, %lld] (d_model)", op, what,
                  tfm__shape_str(t, ts, sizeof ts), (long long)d_model);
        return -1;
    }
    return 0;
}

tfm_tensor *tfm__dropout_if_active(tfm_tape *tape, const tfm_layer *dropout, tfm_tensor *x)
{
    return tfm__layer_trains(tape, dropout) && dropout->dropout > 0.0f
               ? tfm_dropout_forward(tape, dropout, x)
               : x;
}

int tfm__check_activation(const char *op, tfm_activation activation)
{
    if (activation < TFM_ACTIVATION_RELU || activation > TFM_ACTIVATION_GELU_TANH) {
        tfm__fail(TFM_ERR_ARG, "%s: unknown activation %d", op, (int)activation);
        return -1;
    }
    return 0;
}

int tfm__check_attention_options(const char *op, int64_t d_model, int32_t heads,
                                 int64_t head_dim, float dropout, int32_t trainable_scale,
                                 float scale_init)
{
    if (d_model < 1 || heads < 1 || (head_dim == 0 && d_model % heads != 0)) {
        tfm__fail(TFM_ERR_ARG, "%s: %d heads must be positive and divide d_model %lld", op,
                  (int)heads, (long long)d_model);
        return -1;
    }
    if (head_dim < 0 || head_dim > MAX_INNER_WIDTH / heads) {
        tfm__fail(TFM_ERR_ARG, "%s: head_dim %lld must be 0 (d_model / heads) or positive, "
                  "with %d heads of it at most %lld wide", op, (long long)head_dim,
                  (int)heads, (long long)MAX_INNER_WIDTH);
        return -1;
    }
    if (!(dropout >= 0.0f && dropout < 1.0f)) {
        tfm__fail(TFM_ERR_ARG, "%s: dropout %g is outside [0, 1)", op, (double)dropout);
        return -1;
    }
    if (trainable_scale && !(scale_init >= 0.0f && isfinite(scale_init))) {
        tfm__fail(TFM_ERR_ARG, "%s: scale_init %g must be finite, 0 or positive", op,
                  (double)scale_init);
        return -1;
    }
    return 0;
}

tfm_layer *tfm__layer_abandon(tfm_layer *layer, tfm_params *params, int64_t mark)
{
    tfm_layer_free(layer);
    if (params)
        tfm__params_truncate(params, mark);
    return NULL;
}

void tfm_layer_free(tfm_layer *layer)
{
    if (!layer)
        return;
    for (int32_t i = 0; i < layer->n_children; i++)
        tfm_layer_free(layer->children[i]);
    free(layer->children);
    tfm_tensor_free(layer->table);
    free(layer);
}

tfm_status tfm_layer_set_training(tfm_layer *layer, int32_t training)
{
    if (!layer)
        return tfm__fail(TFM_ERR_NULL, "tfm_layer_set_training: layer is NULL");
    layer->training = training ? 1 : 0;
    for (int32_t i = 0; i < layer->n_children; i++)
        if (layer->children[i])
            tfm_layer_set_training(layer->children[i], training);
    return TFM_OK;
}

static void set_recompute(tfm_layer *layer, uint32_t what)
{
    layer->recompute = what;
    for (int32_t i = 0; i < layer->n_children; i++)
        if (layer->children[i])
            set_recompute(layer->children[i], what);
}

tfm_status tfm__set_recompute(const char *op, tfm_layer *const *layers, int n, uint32_t what)
{
    if (what & ~(uint32_t)(TFM_RECOMPUTE_ATTENTION_WEIGHTS | TFM_RECOMPUTE_FEED_FORWARD_HIDDEN |
                           TFM_RECOMPUTE_NORM_OUTPUTS | TFM_RECOMPUTE_ATTENTION_CONTEXT))
        return tfm__fail(TFM_ERR_ARG, "%s: what %#x has flags other than TFM_RECOMPUTE_*", op,
                         (unsigned)what);
    for (int i = 0; i < n; i++)
        if (layers[i])
            set_recompute(layers[i], what);
    return TFM_OK;
}

tfm_status tfm_layer_set_recompute(tfm_layer *layer, uint32_t what)
{
    if (!layer)
        return tfm__fail(TFM_ERR_NULL, "tfm_layer_set_recompute: layer is NULL");
    return tfm__set_recompute("tfm_layer_set_recompute", &layer, 1, what);
}

const char *tfm_layer_kind(const tfm_layer *layer)
{
    if (!layer) {
        tfm__fail(TFM_ERR_NULL, "tfm_layer_kind: layer is NULL");
        return NULL;
    }
    return kind_names[layer->kind];
}
