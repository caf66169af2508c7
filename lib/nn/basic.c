/* The basic layers: linear, embedding, layer norm, dropout, feed-forward. */
#include <math.h>

#include "core/error.h"
#include "nn/layer.h"
#include "ops/activation.h"

/* --- linear ------------------------------------------------------------------ */

/* A linear layer of weight (its own new parameter when NULL) and, with bias,
 * a new bias, initialised as nn.Linear. */
static tfm_layer *linear_create(const char *op, tfm_params *params, const char *name,
                                int64_t in_features, int64_t out_features, tfm_tensor *weight,
                                int32_t bias, tfm_rng *rng)
{
    if (!params || !name || !rng) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, !params ? "params" : !name ? "name" : "rng");
        return NULL;
    }
    int64_t mark = tfm_params_count(params);
    tfm_layer *layer = tfm__layer_new(op, TFM_LAYER_LINEAR, 0);
    if (!layer)
        return NULL;
    /* nn.Linear: kaiming_uniform(a = sqrt 5) comes to U(-1/sqrt(in), 1/sqrt(in)) */
    float bound = in_features > 0 ? 1.0f / sqrtf((float)in_features) : 0.0f;
    int own_weight = weight == NULL;
    layer->weight = own_weight ? tfm__layer_param(op, params, name, "weight", 2,
                                                  (const int64_t[]){out_features, in_features})
                               : weight;
    if (layer->weight && bias)
        layer->bias = tfm__layer_param(op, params, name, "bias", 1,
                                       (const int64_t[]){out_features});
    if (!layer->weight || (bias && !layer->bias) ||
        (own_weight && tfm_init_uniform(layer->weight, -bound, bound, rng) != TFM_OK) ||
        (bias && tfm_init_uniform(layer->bias, -bound, bound, rng) != TFM_OK)) {
        return tfm__layer_abandon(layer, params, mark);
    }
    layer->d_model = out_features;
    return layer;
}

tfm_layer *tfm_linear_create(tfm_params *params, const char *name, int64_t in_features,
                             int64_t out_features, int32_t bias, tfm_rng *rng)
{
    return linear_create("tfm_linear_create", params, name, in_features, out_features, NULL,
                         bias, rng);
}

tfm_layer *tfm__linear_tied(const char *op, tfm_params *params, const char *name,
                            tfm_tensor *weight, int32_t bias, tfm_rng *rng)
{
    return linear_create(op, params, name, weight->shape[1], weight->shape[0], weight, bias,
                         rng);
}

tfm_tensor *tfm_linear_forward(tfm_tape *tape, const tfm_layer *linear, const tfm_tensor *x)
{
    const char *op = "tfm_linear_forward";
    uint64_t mark = tfm__error_mark();
    if (tfm__check_layer(op, linear, TFM_LAYER_LINEAR) < 0 || tfm__check_tensor(op, "x", x) < 0)
        return NULL;
    return tfm__result_within(op, mark, tfm_linear(tape, x, linear->weight, linear->bias));
}

/* --- embedding --------------------------------------------------------------- */

tfm_layer *tfm_embedding_create(tfm_params *params, const char *name, int64_t vocab,
                                int64_t dim, tfm_rng *rng)
{
    const char *op = "tfm_embedding_create";
    if (!params || !name || !rng) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, !params ? "params" : !name ? "name" : "rng");
        return NULL;
    }
    int64_t mark = tfm_params_count(params);
    tfm_layer *layer = tfm__layer_new(op, TFM_LAYER_EMBEDDING, 0);
    if (!layer)
        return NULL;
    layer->weight = tfm__layer_param(op, params, name, "weight", 2, (const int64_t[]){vocab, dim});
    if (!layer->weight || tfm_init_normal(layer->weight, 0.0f, 1.0f, rng) != TFM_OK) {
        return tfm__layer_abandon(layer, params, mark);
    }
    layer->d_model = dim;
    return layer;
}

tfm_tensor *tfm_embedding_forward(tfm_tape *tape, const tfm_layer *embedding,
                                  const tfm_tensor *ids)
{
    const char *op = "tfm_embedding_forward";
    uint64_t mark = tfm__error_mark();
    if (tfm__check_layer(op, embedding, TFM_LAYER_EMBEDDING) < 0 || tfm__check_tensor(op, "ids", ids) < 0)
        return NULL;
    return tfm__result_within(op, mark, tfm_embedding(tape, embedding->weight, ids));
}

/* --- layer norm ---------------------------------------------------------------- */

/* A layer norm, or (rms) an RMS norm without bias; weight starts at ones. */
static tfm_layer *make_norm(const char *op, tfm_params *params, const char *name, int64_t dim,
                            float eps, int rms)
{
    if (!params || !name) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, params ? "name" : "params");
        return NULL;
    }
    if (!(eps >= 0.0f) || !isfinite(eps)) {
        tfm__fail(TFM_ERR_ARG, "%s: eps %g must be finite and not negative", op, (double)eps);
        return NULL;
    }
    int64_t mark = tfm_params_count(params);
    tfm_layer *layer = tfm__layer_new(op, TFM_LAYER_LAYER_NORM, 0);
    if (!layer)
        return NULL;
    layer->weight = tfm__layer_param(op, params, name, "weight", 1, (const int64_t[]){dim});
    if (layer->weight && !rms)
        layer->bias = tfm__layer_param(op, params, name, "bias", 1, (const int64_t[]){dim});
    if (!layer->weight || (!rms && !layer->bias))
        return tfm__layer_abandon(layer, params, mark);
    float *w = tfm__f32(layer->weight);
    for (int64_t i = 0; i < dim; i++)
        w[i] = 1.0f;
    layer->eps = eps;
    layer->d_model = dim;
    layer->rms = rms;
    return layer;
}

tfm_layer *tfm_layer_norm_create(tfm_params *params, const char *name, int64_t dim, float eps)
{
    return make_norm("tfm_layer_norm_create", params, name, dim, eps, 0);
}

tfm_layer *tfm_rms_norm_create(tfm_params *params, const char *name, int64_t dim, float eps)
{
    return make_norm("tfm_rms_norm_create", params, name, dim, eps, 1);
}

tfm_tensor *tfm_layer_norm_forward(tfm_tape *tape, const tfm_layer *norm, const tfm_tensor *x)
{
    const char *op = "tfm_layer_norm_forward";
    uint64_t mark = tfm__error_mark();
    if (tfm__check_layer(op, norm, TFM_LAYER_LAYER_NORM) < 0 || tfm__check_tensor(op, "x", x) < 0)
        return NULL;
    return tfm__result_within(op, mark,
                              norm->rms ? tfm_rms_norm(tape, x, norm->weight, norm->eps)
                                        : tfm_layer_norm(tape, x, norm->weight, norm->bias,
                                                         norm->eps));
}

/* --- dropout ------------------------------------------------------------------- */

tfm_layer *tfm_dropout_create(float p, tfm_rng *rng)
{
    const char *op = "tfm_dropout_create";
    if (!(p >= 0.0f && p < 1.0f)) {
        tfm__fail(TFM_ERR_ARG, "%s: p %g is outside [0, 1)", op, (double)p);
        return NULL;
    }
    if (p > 0.0f && !rng) {
        tfm__fail(TFM_ERR_NULL, "%s: rng is NULL", op);
        return NULL;
    }
    tfm_layer *layer = tfm__layer_new(op, TFM_LAYER_DROPOUT, 0);
    if (layer) {
        layer->dropout = p;
        layer->rng = rng;
    }
    return layer;
}

tfm_tensor *tfm_dropout_forward(tfm_tape *tape, const tfm_layer *dropout, const tfm_tensor *x)
{
    const char *op = "tfm_dropout_forward";
    uint64_t mark = tfm__error_mark();
    if (tfm__check_layer(op, dropout, TFM_LAYER_DROPOUT) < 0 || tfm__check_tensor(op, "x", x) < 0)
        return NULL;
    return tfm__result_within(op, mark, tfm_dropout(tape, x, dropout->dropout,
                                                    tfm__layer_trains(tape, dropout),
                                                    dropout->rng));
}

/* --- feed-forward -------------------------------------------------------------- */

tfm_layer *tfm_feed_forward_create(tfm_params *params, const char *name, int64_t d_model,
                                   int64_t d_ff, tfm_activation activation, float dropout,
                                   tfm_rng *rng)
{
    return tfm__feed_forward_make("tfm_feed_forward_create", params, name, d_model, d_ff,
                                  activation, dropout, 1, 0, rng);
}

tfm_layer *tfm__feed_forward_make(const char *op, tfm_params *params, const char *name,
                                  int64_t d_model, int64_t d_ff, tfm_activation activation,
                                  float dropout, int32_t bias, int32_t gated, tfm_rng *rng)
{
    if (tfm__check_activation(op, activation) < 0)
        return NULL;
    char name1[TFM_NAME_MAX], name2[TFM_NAME_MAX], name_up[TFM_NAME_MAX];
    if (!params || !name || !rng) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, !params ? "params" : !name ? "name" : "rng");
        return NULL;
    }
    if (tfm__layer_name(op, name1, name, "linear1") < 0 ||
        tfm__layer_name(op, name2, name, "linear2") < 0 ||
        tfm__layer_name(op, name_up, name, "linear_up") < 0)
        return NULL;
    int64_t mark = tfm_params_count(params);
    uint64_t error_mark = tfm__error_mark();
    tfm_layer *layer = tfm__layer_new(op, TFM_LAYER_FEED_FORWARD, TFM__FF_CHILDREN);
    if (!layer)
        return NULL;
    layer->activation = activation;
    layer->d_model = d_model;
    tfm_layer **c = layer->children;
    if (!(c[TFM__FF_LINEAR1] = tfm_linear_create(params, name1, d_model, d_ff, bias, rng)) ||
        !(c[TFM__FF_LINEAR2] = tfm_linear_create(params, name2, d_ff, d_model, bias, rng)) ||
        !(c[TFM__FF_DROPOUT] = tfm_dropout_create(dropout, rng)) ||
        (gated && !(c[TFM__FF_LINEAR_UP] = tfm_linear_create(params, name_up, d_model, d_ff,
                                                             bias, rng)))) {
        tfm__fail_within(op, error_mark);
        return tfm__layer_abandon(layer, params, mark);
    }
    return layer;
}

tfm_tensor *tfm__feed_forward_hidden(tfm_tape *tape, const tfm_layer *ff, const tfm_tensor *x)
{
    if (tfm__check_layer("tfm_feed_forward_forward", ff, TFM_LAYER_FEED_FORWARD) < 0)
        return NULL;
    tfm_layer *const *c = ff->children;
    const tfm_layer *first = c[TFM__FF_LINEAR1], *dropout = c[TFM__FF_DROPOUT];
    const tfm_layer *up = c[TFM__FF_LINEAR_UP];
    if (up || ff->activation != TFM_ACTIVATION_RELU) {
        tfm_tensor *h = tfm__activation(tape, "tfm_feed_forward_forward", ff->activation,
                                        tfm_linear_forward(tape, first, x));
        if (up)
            h = tfm_mul(tape, h, tfm_linear_forward(tape, up, x));
        return tfm__dropout_if_active(tape, dropout, h);
    }
    return tfm_linear_relu_dropout(tape, x, first->weight, first->bias, dropout->dropout,
                                   tfm__layer_trains(tape, dropout), dropout->rng);
}

tfm_tensor *tfm_feed_forward_forward(tfm_tape *tape, const tfm_layer *ff, const tfm_tensor *x)
{
    uint64_t mark = tfm__error_mark();
    if (tfm__check_tensor("tfm_feed_forward_forward", "x", x) < 0)
        return NULL;
    tfm_tensor *h = tfm__feed_forward_hidden(tape, ff, x);
    return tfm__result_within("tfm_feed_forward_forward", mark,
                              h ? tfm_linear_forward(tape, ff->children[TFM__FF_LINEAR2], h)
                                : NULL);
}
