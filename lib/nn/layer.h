/* The record behind every tfm_layer handle, and what layer files share. */
#ifndef TFM_NN_LAYER_H
#define TFM_NN_LAYER_H

#include <stddef.h>

#include "autograd/tape.h"
#include "core/tensor.h"
#include "tfm/nn.h"

typedef enum tfm__layer_kind {
    TFM_LAYER_LINEAR,
    TFM_LAYER_EMBEDDING,
    TFM_LAYER_LAYER_NORM,
    TFM_LAYER_DROPOUT,
    TFM_LAYER_FEED_FORWARD,
    TFM_LAYER_ATTENTION,
    TFM_LAYER_ENCODER_LAYER,
    TFM_LAYER_DECODER_LAYER,
    TFM_LAYER_ENCODER,
    TFM_LAYER_DECODER,
    TFM_LAYER_POSITIONS
} tfm__layer_kind;

struct tfm_layer {
    tfm__layer_kind kind;
    int32_t training;
    uint32_t recompute;           /* TFM_RECOMPUTE_* flags */
    tfm_rng *rng;                 /* dropout draws from it; not owned */
    tfm_tensor *weight, *bias;    /* the layer's own parameters (store-owned) */
    tfm_tensor *scale;            /* a trainable scale, where the layer has one */
    tfm_tensor *table;            /* a fixed table the layer owns (positions) */
    float dropout;
    float eps;
    tfm_activation activation;
    int32_t heads;
    int64_t head_dim;             /* attention's d_k (heads * head_dim: its inner width) */
    int32_t norm_first;
    int32_t fused;
    int32_t rms;                  /* a norm without mean or bias (RMS norm) */
    int32_t unscaled;             /* attention scores not divided by sqrt(d_k) */
    int64_t d_model;
    int32_t n_children;
    tfm_layer **children;         /* sublayers, owned; meaning fixed per kind */
};

/* Where a layer's sublayers sit in children[]: the layers' own files build
 * them in this order and the step-by-step decoder walks them. */
enum { TFM__ATT_OUT, TFM__ATT_Q, TFM__ATT_K, TFM__ATT_V, TFM__ATT_CHILDREN }; /* q/k/v when not fused */
/* linear_up exists in gated feed-forwards only */
enum { TFM__FF_LINEAR1, TFM__FF_LINEAR2, TFM__FF_DROPOUT, TFM__FF_LINEAR_UP, TFM__FF_CHILDREN };
enum {
    TFM__BLK_SELF_ATTN, TFM__BLK_FF, TFM__BLK_NORM1, TFM__BLK_NORM2, TFM__BLK_DROP1,
    TFM__BLK_DROP2, TFM__BLK_ENCODER_CHILDREN,
    TFM__BLK_CROSS_ATTN = TFM__BLK_ENCODER_CHILDREN, TFM__BLK_NORM3, TFM__BLK_DROP3,
    TFM__BLK_DECODER_CHILDREN /* decoder layers */
};

/* A zeroed layer of the kind with room for n_children; NULL with the error
 * set. Free it with tfm_layer_free on any later error. */
tfm_layer *tfm__layer_new(const char *op, tfm__layer_kind kind, int32_t n_children);

/* "prefix.suffix" (or suffix alone for an empty prefix) into a 256-byte
 * buffer; 0, or -1 with TFM_ERR_ARG when it does not fit. */
#define TFM_NAME_MAX 256
int tfm__layer_name(const char *op, char *out, const char *prefix, const char *suffix);

/* Checks the layer handle passed to a forward call; 0 or -1 with the error set. */
int tfm__check_layer(const char *op, const tfm_layer *layer, tfm__layer_kind kind);

/* Sets what the layers (NULL ones skipped) and their sublayers recompute;
 * TFM_ERR_ARG with the error set, and nothing changed, for flags other
 * than TFM_RECOMPUTE_*. */
tfm_status tfm__set_recompute(const char *op, tfm_layer *const *layers, int n, uint32_t what);

/* The attention options that attention and encoder/decoder layers share:
 * heads dividing d_model unless head_dim (>= 0) is set, an inner width
 * heads * head_dim of at most 2^31, dropout in [0, 1), a usable
 * scale_init. 0 or -1 with TFM_ERR_ARG set. */
int tfm__check_attention_options(const char *op, int64_t d_model, int32_t heads,
                                 int64_t head_dim, float dropout, int32_t trainable_scale,
                                 float scale_init);

/* Each head's width: head_dim as the options give it, 0 meaning d_model /
 * heads. */
static inline int64_t tfm__head_dim(int64_t d_model, int32_t heads, int64_t head_dim)
{
    return head_dim ? head_dim : d_model / heads;
}

/* Checks a feed-forward activation is one of TFM_ACTIVATION_*; 0 or -1
 * with TFM_ERR_ARG set. */
int tfm__check_activation(const char *op, tfm_activation activation);

/* tfm_feed_forward_create for op, its linears with biases or (bias 0)
 * without; gated: with NAME.linear_up (tfm_block_options' gated_feed_forward). */
tfm_layer *tfm__feed_forward_make(const char *op, tfm_params *params, const char *name,
                                  int64_t d_model, int64_t d_ff, tfm_activation activation,
                                  float dropout, int32_t bias, int32_t gated, tfm_rng *rng);

/* A linear layer whose weight is weight [out, in], a parameter of another
 * layer (a tied output projection: both add into its one gradient), with
 * its own bias when asked; NULL with the error set. */
tfm_layer *tfm__linear_tied(const char *op, tfm_params *params, const char *name,
                            tfm_tensor *weight, int32_t bias, tfm_rng *rng);

/* Frees a layer whose creation failed and removes the parameters added to
 * the store since it held mark of them; returns NULL for the caller. */
tfm_layer *tfm__layer_abandon(tfm_layer *layer, tfm_params *params, int64_t mark);

/* Checks a float32 [B, length, d_model] sequence; 0 or -1 with the error set. */
int tfm__check_sequence(const char *op, const char *what, const tfm_tensor *t, int64_t d_model);

/* Whether a layer's forward on the tape trains (its dropout on): the layer
 * trains and the tape is not a decoding's (tfm__tape_set_evaluation).
 * Every forward decides by this, never by the flag alone. */
static inline int tfm__layer_trains(const tfm_tape *tape, const tfm_layer *layer)
{
    return layer->training && !tfm__tape_evaluating(tape);
}

/* A dropout layer's forward, skipped (x itself) in eval mode or at p = 0 so
 * that it costs no record; for use inside layers, whose callers never free
 * what a forward returns. */
tfm_tensor *tfm__dropout_if_active(tfm_tape *tape, const tfm_layer *dropout, tfm_tensor *x);

/* The one mask attention reads for scores [B, heads, T, S], from an
 * attention mask (2-D [T, S], or 4-D with each axis 1 or the scores') and a
 * key-padding mask [B, S], either NULL, each in either form: the mask as it
 * is, the key padding as a [B, 1, 1, S] view, or both merged on the tape.
 * Errors name op and the arguments. *out is NULL when both masks are; 0,
 * or -1 with the error set. */
typedef struct tfm__masks {
    const tfm_tensor *mask, *key_padding;   /* as the caller gave them */
    const char *mask_name, *padding_name;   /* the arguments' names */
} tfm__masks;
int tfm__attention_mask(tfm_tape *tape, const char *op, const tfm__masks *given,
                        const int64_t *scores, const tfm_tensor **out);

/* A mask in the additive form: a float32 one as it is, an int32 keep-mask
 * as 0 where kept and -inf where not (a constant on the tape); NULL with
 * the error set. */
const tfm_tensor *tfm__mask_additive(tfm_tape *tape, const char *op, const tfm_tensor *mask);

/* The encoder and decoder stacks' forwards for op, the public call; the
 * decoder's last layer's cross-attention weights [B, heads, T, S] go to
 * last_cross_weights unless it is NULL (decoding's alignments). */
tfm_tensor *tfm__encoder_run(tfm_tape *tape, const char *op, const tfm_layer *encoder,
                             const tfm_tensor *x, const tfm__masks *masks);
tfm_tensor *tfm__decoder_run(tfm_tape *tape, const char *op, const tfm_layer *decoder,
                             const tfm_tensor *x, const tfm_tensor *memory,
                             const tfm__masks *self_masks, const tfm__masks *memory_masks,
                             tfm_tensor **last_cross_weights);

/* The sublayers without their last linear (out_proj, linear2), which the
 * transformer layers fuse with dropout and the residual connection. mask
 * comes from tfm__attention_mask; op is the public call. */
tfm_tensor *tfm__attention_context(tfm_tape *tape, const char *op, const tfm_layer *att,
                                   const tfm_tensor *query, const tfm_tensor *memory,
                                   const tfm_tensor *mask, tfm_tensor **weights_out);
tfm_tensor *tfm__feed_forward_hidden(tfm_tape *tape, const tfm_layer *ff, const tfm_tensor *x);

/* Adds a parameter named prefix.suffix; NULL with the error set (in op's
 * name). */
tfm_tensor *tfm__layer_param(const char *op, tfm_params *params, const char *prefix,
                             const char *suffix, int32_t ndim, const int64_t *shape);

#endif
