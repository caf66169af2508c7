/* Encoder and decoder layers and their stacks, as torch.nn.TransformerEncoder
 * (Layer) and TransformerDecoder(Layer) with batch_first=True. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/options.h"
#include "nn/layer.h"
#include "ops/layer_norm.h"
#include "ops/linear.h"

#define MAX_LAYERS 65536

void tfm_block_options_init_sized(tfm_block_options *o, uint32_t struct_size)
{
    tfm_block_options d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.d_model = 512;
    d.heads = 8;
    d.d_ff = 2048;
    d.dropout = 0.1f;
    d.activation = TFM_ACTIVATION_RELU;
    d.norm_first = 0;
    d.layer_norm_eps = 1e-5f;
    d.bias = 1;
    d.fused_qkv = 1;
    d.trainable_scale = 0;
    d.scale_init = 0.0f; /* sqrt(d_model), as tutorial 003 */
    d.feed_forward_bias = 1;
    tfm__init_options(o, struct_size, &d, sizeof d);
}

/* The caller's options, checked before any parameter is added so a bad
 * option leaves the store untouched. */
static int read_options(const char *op, const tfm_block_options *given, tfm_block_options *o)
{
    tfm_block_options_init(o);
    if (tfm__read_options(op, "tfm_block_options_init", given, o, sizeof *o,
                          offsetof(tfm_block_options, d_model) + sizeof o->d_model) < 0)
        return -1;
    if (tfm__check_attention_options(op, o->d_model, o->heads, o->head_dim, o->dropout,
                                     o->trainable_scale, o->scale_init) < 0)
        return -1;
    if (o->d_ff < 1) {
        tfm__fail(TFM_ERR_ARG, "%s: d_ff %lld is not positive", op, (long long)o->d_ff);
        return -1;
    }
    if (tfm__check_activation(op, o->activation) < 0)
        return -1;
    if (!(o->layer_norm_eps >= 0.0f) || !isfinite(o->layer_norm_eps)) {
        tfm__fail(TFM_ERR_ARG, "%s: layer_norm_eps %g must be finite and not negative", op,
                  (double)o->layer_norm_eps);
        return -1;
    }
    return 0;
}

static tfm_layer *make_attention(const char *op, tfm_params *params, const char *name,
                                 const char *suffix, const tfm_block_options *o, tfm_rng *rng)
{
    char full[TFM_NAME_MAX];
    if (tfm__layer_name(op, full, name, suffix) < 0)
        return NULL;
    tfm_attention_options a;
    tfm_attention_options_init(&a);
    a.d_model = o->d_model;
    a.heads = o->heads;
    a.bias = o->bias;
    a.fused_qkv = o->fused_qkv;
    a.dropout = o->dropout;
    a.trainable_scale = o->trainable_scale;
    a.scale_init = o->scale_init;
    a.unscaled = o->unscaled_attention;
    a.head_dim = o->head_dim;
    return tfm_attention_create(params, full, &a, rng);
}

static tfm_layer *make_norm(const char *op, tfm_params *params, const char *name,
                            const char *suffix, const tfm_block_options *o)
{
    char full[TFM_NAME_MAX];
    if (tfm__layer_name(op, full, name, suffix) < 0)
        return NULL;
    return o->rms_norm ? tfm_rms_norm_create(params, full, o->d_model, o->layer_norm_eps)
                       : tfm_layer_norm_create(params, full, o->d_model, o->layer_norm_eps);
}

/* An encoder layer, or a decoder layer when cross is set. Parameters are
 * added in the order of PyTorch's state_dict: self_attn, (multihead_attn,)
 * linear1, linear2, norm1, norm2(, norm3). */
static tfm_layer *make_block(const char *op, int cross, tfm_params *params, const char *name,
                             const tfm_block_options *options, tfm_rng *rng)
{
    if (!params || !name || !rng) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, !params ? "params" : !name ? "name" : "rng");
        return NULL;
    }
    tfm_block_options o;
    if (read_options(op, options, &o) < 0)
        return NULL;
    int64_t mark = tfm_params_count(params);
    uint64_t error_mark = tfm__error_mark();
    tfm_layer *layer = tfm__layer_new(op, cross ? TFM_LAYER_DECODER_LAYER : TFM_LAYER_ENCODER_LAYER,
                                      cross ? TFM__BLK_DECODER_CHILDREN : TFM__BLK_ENCODER_CHILDREN);
    if (!layer)
        return NULL;
    layer->d_model = o.d_model;
    layer->heads = o.heads;
    layer->norm_first = o.norm_first != 0;
    tfm_layer **c = layer->children;
    int ok = (c[TFM__BLK_SELF_ATTN] = make_attention(op, params, name, "self_attn", &o, rng)) &&
             (!cross || (c[TFM__BLK_CROSS_ATTN] = make_attention(op, params, name, "multihead_attn",
                                                            &o, rng))) &&
             (c[TFM__BLK_FF] = tfm__feed_forward_make(op, params, name, o.d_model, o.d_ff,
                                                      o.activation, o.dropout,
                                                      o.feed_forward_bias,
                                                      o.gated_feed_forward, rng)) &&
             (c[TFM__BLK_NORM1] = make_norm(op, params, name, "norm1", &o)) &&
             (c[TFM__BLK_NORM2] = make_norm(op, params, name, "norm2", &o)) &&
             (!cross || (c[TFM__BLK_NORM3] = make_norm(op, params, name, "norm3", &o))) &&
             (c[TFM__BLK_DROP1] = tfm_dropout_create(o.dropout, rng)) &&
             (c[TFM__BLK_DROP2] = tfm_dropout_create(o.dropout, rng)) &&
             (!cross || (c[TFM__BLK_DROP3] = tfm_dropout_create(o.dropout, rng)));
    if (!ok) {
        tfm__fail_within(op, error_mark);
        return tfm__layer_abandon(layer, params, mark);
    }
    return layer;
}

tfm_layer *tfm_encoder_layer_create(tfm_params *params, const char *name,
                                    const tfm_block_options *options, tfm_rng *rng)
{
    return make_block("tfm_encoder_layer_create", 0, params, name, options, rng);
}

tfm_layer *tfm_decoder_layer_create(tfm_params *params, const char *name,
                                    const tfm_block_options *options, tfm_rng *rng)
{
    return make_block("tfm_decoder_layer_create", 1, params, name, options, rng);
}

/* --- layer forwards ------------------------------------------------------------ */

/* norm(x); internal: read by nothing past the stack's next norm, so that
 * with TFM_RECOMPUTE_NORM_OUTPUTS the backward may compute it again. */
static tfm_tensor *norm_output(tfm_tape *tape, const char *op, const tfm_layer *norm,
                               const tfm_tensor *x, int internal)
{
    if (internal && (norm->recompute & TFM_RECOMPUTE_NORM_OUTPUTS))
        return tfm__layer_norm_recomputed(tape, op, x, norm->weight, norm->bias, norm->eps,
                                          norm->rms);
    return tfm_layer_norm_forward(tape, norm, x);
}

/* One residual sublayer around attention (memory NULL: self-attention) or,
 * when attn is NULL, the feed-forward:
 * post-norm norm(x + dropout(f(x))), pre-norm x + dropout(f(norm(x))).
 * mask is the merged one (tfm__attention_mask); op is the public call;
 * output_internal: the result is read only up to the stack's next norm;
 * weights_out (NULL: none) receives the attention's weights. */
static tfm_tensor *sublayer(tfm_tape *tape, const char *op, const tfm_layer *block,
                            const tfm_layer *attn, const tfm_layer *norm,
                            const tfm_layer *dropout, const tfm_tensor *x,
                            const tfm_tensor *memory, const tfm_tensor *mask,
                            int output_internal, tfm_tensor **weights_out)
{
    const tfm_tensor *in = block->norm_first ? norm_output(tape, op, norm, x, 1) : x;
    const tfm_layer *ff = block->children[TFM__BLK_FF];
    if (!attn && (ff->recompute & TFM_RECOMPUTE_FEED_FORWARD_HIDDEN) &&
        ff->activation == TFM_ACTIVATION_RELU && !ff->children[TFM__FF_LINEAR_UP]) {
        if (!in)
            return NULL;
        tfm_layer *const *c = ff->children;
        const tfm_layer *first = c[TFM__FF_LINEAR1], *second = c[TFM__FF_LINEAR2];
        const tfm_layer *inner = c[TFM__FF_DROPOUT];
        tfm__linear_params a = {first->weight, first->bias, inner->dropout,
                                tfm__layer_trains(tape, inner), inner->rng};
        tfm__linear_params b = {second->weight, second->bias, dropout->dropout,
                                tfm__layer_trains(tape, dropout), dropout->rng};
        tfm_tensor *sum = tfm__feed_forward_residual(tape, op, in, &a, &b, x);
        return block->norm_first || !sum ? sum : norm_output(tape, op, norm, sum, output_internal);
    }
    tfm_tensor *h = attn ? tfm__attention_context(tape, op, attn, in, memory ? memory : in, mask,
                                                  weights_out)
                         : tfm__feed_forward_hidden(tape, ff, in);
    if (!h)
        return NULL;
    /* the sublayer's last linear, its dropout and the residual: one op */
    const tfm_layer *last = attn ? attn->children[TFM__ATT_OUT] : ff->children[TFM__FF_LINEAR2];
    tfm_tensor *sum = tfm__linear_residual(tape, op, h, last->weight, last->bias,
                                           tfm__layer_trains(tape, dropout) ? dropout->dropout : 0.0f,
                                           dropout->rng, x);
    return block->norm_first || !sum ? sum : norm_output(tape, op, norm, sum, output_internal);
}

/* output_internal: the layer's output is read only by the next layer of
 * its stack or the stack's final norm. */
static tfm_tensor *encoder_layer(tfm_tape *tape, const char *op, const tfm_layer *layer,
                                 const tfm_tensor *x, const tfm_tensor *mask, int output_internal)
{
    uint64_t mark = tfm__error_mark();
    tfm_layer *const *c = layer->children;
    tfm_tensor *h = sublayer(tape, op, layer, c[TFM__BLK_SELF_ATTN], c[TFM__BLK_NORM1],
                             c[TFM__BLK_DROP1], x, NULL, mask, 1, NULL);
    h = h ? sublayer(tape, op, layer, NULL, c[TFM__BLK_NORM2], c[TFM__BLK_DROP2], h, NULL, NULL,
                     output_internal, NULL)
          : NULL;
    return tfm__result_within(op, mark, h);
}

static tfm_tensor *decoder_layer(tfm_tape *tape, const char *op, const tfm_layer *layer,
                                 const tfm_tensor *x, const tfm_tensor *memory,
                                 const tfm_tensor *self_mask, const tfm_tensor *memory_mask,
                                 int output_internal, tfm_tensor **cross_weights)
{
    uint64_t mark = tfm__error_mark();
    tfm_layer *const *c = layer->children;
    tfm_tensor *h = sublayer(tape, op, layer, c[TFM__BLK_SELF_ATTN], c[TFM__BLK_NORM1],
                             c[TFM__BLK_DROP1], x, NULL, self_mask, 1, NULL);
    h = h ? sublayer(tape, op, layer, c[TFM__BLK_CROSS_ATTN], c[TFM__BLK_NORM2],
                     c[TFM__BLK_DROP2], h, memory, memory_mask, 1, cross_weights)
          : NULL;
    h = h ? sublayer(tape, op, layer, NULL, c[TFM__BLK_NORM3], c[TFM__BLK_DROP3], h, NULL, NULL,
                     output_internal, NULL)
          : NULL;
    return tfm__result_within(op, mark, h);
}

/* x [B, T, D] (and memory [B, S, D]) checked for a layer or stack of
 * d_model with heads, and the masks merged once for all its layers. */
static int prepare(tfm_tape *tape, const char *op, const tfm_layer *layer, const tfm_tensor *x,
                   const tfm_tensor *memory, const tfm__masks *self_masks,
                   const tfm__masks *memory_masks, const tfm_tensor **self_mask,
                   const tfm_tensor **memory_mask)
{
    if (tfm__check_sequence(op, "x", x, layer->d_model) < 0 ||
        (memory_masks && tfm__check_sequence(op, "memory", memory, layer->d_model) < 0) ||
        tfm__check_tape(op, tape) < 0)
        return -1;
    int64_t B = x->shape[0], T = x->shape[1];
    if (memory_masks && memory->shape[0] != B) {
        char xs[64], ms[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: x %s and memory %s have different batch sizes", op,
                  tfm__shape_str(x, xs, sizeof xs), tfm__shape_str(memory, ms, sizeof ms));
        return -1;
    }
    if (tfm__attention_mask(tape, op, self_masks, (const int64_t[]){B, layer->heads, T, T},
                            self_mask) < 0)
        return -1;
    return memory_masks ? tfm__attention_mask(tape, op, memory_masks,
                                              (const int64_t[]){B, layer->heads, T,
                                                                memory->shape[1]},
                                              memory_mask)
                        : 0;
}

tfm_tensor *tfm_encoder_layer_forward(tfm_tape *tape, const tfm_layer *layer,
                                      const tfm_tensor *x, const tfm_tensor *mask,
                                      const tfm_tensor *key_padding_mask)
{
    const char *op = "tfm_encoder_layer_forward";
    const tfm__masks masks = {mask, key_padding_mask, "mask", "key_padding_mask"};
    const tfm_tensor *merged;
    if (tfm__check_layer(op, layer, TFM_LAYER_ENCODER_LAYER) < 0 ||
        prepare(tape, op, layer, x, NULL, &masks, NULL, &merged, NULL) < 0)
        return NULL;
    return encoder_layer(tape, op, layer, x, merged, 0);
}

tfm_tensor *tfm_decoder_layer_forward(tfm_tape *tape, const tfm_layer *layer,
                                      const tfm_tensor *x, const tfm_tensor *memory,
                                      const tfm_tensor *self_mask,
                                      const tfm_tensor *memory_mask,
                                      const tfm_tensor *self_key_padding_mask,
                                      const tfm_tensor *memory_key_padding_mask)
{
    const char *op = "tfm_decoder_layer_forward";
    const tfm__masks self = {self_mask, self_key_padding_mask, "self_mask",
                             "self_key_padding_mask"};
    const tfm__masks cross = {memory_mask, memory_key_padding_mask, "memory_mask",
                              "memory_key_padding_mask"};
    const tfm_tensor *self_merged, *memory_merged;
    if (tfm__check_layer(op, layer, TFM_LAYER_DECODER_LAYER) < 0 ||
        prepare(tape, op, layer, x, memory, &self, &cross, &self_merged, &memory_merged) < 0)
        return NULL;
    return decoder_layer(tape, op, layer, x, memory, self_merged, memory_merged, 0, NULL);
}

/* --- stacks ------------------------------------------------------------------- */

/* children[0 … num_layers-1] are the layers, children[num_layers] the final
 * norm or NULL. */
static tfm_layer *make_stack(const char *op, int decoder, tfm_params *params, const char *name,
                             int32_t num_layers, const tfm_block_options *options,
                             int32_t final_norm, tfm_rng *rng)
{
    if (!params || !name || !rng) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, !params ? "params" : !name ? "name" : "rng");
        return NULL;
    }
    if (num_layers < 0 || num_layers > MAX_LAYERS) {
        tfm__fail(TFM_ERR_ARG, "%s: num_layers %d is outside 0..%d", op, (int)num_layers,
                  MAX_LAYERS);
        return NULL;
    }
    tfm_block_options o;
    if (read_options(op, options, &o) < 0)
        return NULL;
    int64_t mark = tfm_params_count(params);
    uint64_t error_mark = tfm__error_mark();
    tfm_layer *stack = tfm__layer_new(op, decoder ? TFM_LAYER_DECODER : TFM_LAYER_ENCODER,
                                      num_layers + 1);
    if (!stack)
        return NULL;
    stack->d_model = o.d_model;
    stack->heads = o.heads;
    int ok = 1;
    for (int32_t i = 0; ok && i < num_layers; i++) {
        char suffix[32], full[TFM_NAME_MAX];
        snprintf(suffix, sizeof suffix, "layers.%d", (int)i);
        ok = tfm__layer_name(op, full, name, suffix) == 0 &&
             (stack->children[i] = make_block(decoder ? "tfm_decoder_layer_create"
                                                      : "tfm_encoder_layer_create",
                                              decoder, params, full, &o, rng));
    }
    if (ok && final_norm)
        ok = (stack->children[num_layers] = make_norm(op, params, name, "norm", &o)) != NULL;
    if (!ok) {
        tfm__fail_within(op, error_mark);
        return tfm__layer_abandon(stack, params, mark);
    }
    return stack;
}

tfm_layer *tfm_encoder_create(tfm_params *params, const char *name, int32_t num_layers,
                              const tfm_block_options *options, int32_t final_norm,
                              tfm_rng *rng)
{
    return make_stack("tfm_encoder_create", 0, params, name, num_layers, options, final_norm,
                      rng);
}

tfm_layer *tfm_decoder_create(tfm_params *params, const char *name, int32_t num_layers,
                              const tfm_block_options *options, int32_t final_norm,
                              tfm_rng *rng)
{
    return make_stack("tfm_decoder_create", 1, params, name, num_layers, options, final_norm,
                      rng);
}

/* The final norm over the last layer's output h (x itself when there are no
 * layers), or a view of x when there are neither: results are tape-owned. */
static tfm_tensor *finish_stack(tfm_tape *tape, const tfm_layer *stack, const tfm_tensor *x,
                                tfm_tensor *h)
{
    const tfm_layer *norm = stack->children[stack->n_children - 1];
    if (norm)
        return tfm_layer_norm_forward(tape, norm, h ? h : x);
    return h ? h : tfm_reshape(tape, x, x->ndim, x->shape);
}

/* Whether layer i's output is read only inside the stack: by the next
 * layer or the final norm. */
static int output_internal(const tfm_layer *stack, int32_t i)
{
    return i + 2 < stack->n_children || stack->children[stack->n_children - 1] != NULL;
}

tfm_tensor *tfm__encoder_run(tfm_tape *tape, const char *op, const tfm_layer *encoder,
                             const tfm_tensor *x, const tfm__masks *masks)
{
    uint64_t mark = tfm__error_mark();
    const tfm_tensor *mask;
    if (tfm__check_layer(op, encoder, TFM_LAYER_ENCODER) < 0 ||
        prepare(tape, op, encoder, x, NULL, masks, NULL, &mask, NULL) < 0)
        return NULL;
    tfm_tensor *h = NULL;
    for (int32_t i = 0; i < encoder->n_children - 1; i++)
        if (!(h = encoder_layer(tape, op, encoder->children[i], i ? h : x, mask,
                                output_internal(encoder, i))))
            return NULL;
    return tfm__result_within(op, mark, finish_stack(tape, encoder, x, h));
}

tfm_tensor *tfm__decoder_run(tfm_tape *tape, const char *op, const tfm_layer *decoder,
                             const tfm_tensor *x, const tfm_tensor *memory,
                             const tfm__masks *self_masks, const tfm__masks *memory_masks,
                             tfm_tensor **last_cross_weights)
{
    uint64_t mark = tfm__error_mark();
    const tfm_tensor *self_mask, *memory_mask;
    if (tfm__check_layer(op, decoder, TFM_LAYER_DECODER) < 0 ||
        prepare(tape, op, decoder, x, memory, self_masks, memory_masks, &self_mask,
                &memory_mask) < 0)
        return NULL;
    tfm_tensor *h = NULL;
    int32_t last = decoder->n_children - 2;
    for (int32_t i = 0; i <= last; i++)
        if (!(h = decoder_layer(tape, op, decoder->children[i], i ? h : x, memory, self_mask,
                                memory_mask, output_internal(decoder, i),
                                i == last ? last_cross_weights : NULL)))
            return NULL;
    return tfm__result_within(op, mark, finish_stack(tape, decoder, x, h));
}

tfm_tensor *tfm_encoder_forward(tfm_tape *tape, const tfm_layer *encoder, const tfm_tensor *x,
                                const tfm_tensor *mask, const tfm_tensor *key_padding_mask)
{
    return tfm__encoder_run(tape, "tfm_encoder_forward", encoder, x,
                            &(const tfm__masks){mask, key_padding_mask, "mask",
                                                "key_padding_mask"});
}

tfm_tensor *tfm_decoder_forward(tfm_tape *tape, const tfm_layer *decoder, const tfm_tensor *x,
                                const tfm_tensor *memory, const tfm_tensor *self_mask,
                                const tfm_tensor *memory_mask,
                                const tfm_tensor *self_key_padding_mask,
                                const tfm_tensor *memory_key_padding_mask)
{
    return tfm__decoder_run(tape, "tfm_decoder_forward", decoder, x, memory,
                            &(const tfm__masks){self_mask, self_key_padding_mask, "self_mask",
                                                "self_key_padding_mask"},
                            &(const tfm__masks){memory_mask, memory_key_padding_mask,
                                                "memory_mask", "memory_key_padding_mask"},
                            NULL);
}
