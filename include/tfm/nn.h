/** @file
 * libtfm layers. Every layer is a tfm_layer handle: created into a parameter
 * store under a name prefix (the parameter names are PyTorch's, so weights
 * move both ways), run with its kind's forward call, freed with
 * tfm_layer_free (its parameters stay in the store). Layers start in
 * training mode, as PyTorch modules do; dropout is active only then, drawing
 * from the tfm_rng given at creation, which must outlive the layer.
 * Initialisation follows PyTorch's defaults, from the rng given.
 *
 * Ownership: a create call returns a caller-owned layer, or NULL with the
 * status and message (TFM_ERR_NULL, TFM_ERR_ARG for a size or option out
 * of range or a name already in the store, TFM_ERR_NOMEM);
 * a failed create leaves the store as it was. A layer refers to its store
 * and rng without owning them: both must outlive it. A forward returns a
 * tensor owned by the tape, or NULL with the status, as an op (ops.h);
 * given a layer of another kind it is TFM_ERR_ARG.
 *
 * Threads: a forward draws from the layer's rng (dropout) when training,
 * so a layer, its store and its rng are used by one thread at a time; in
 * evaluation mode forwards only read the layer and its store, and several
 * threads may run them at once, each on its own tape.
 *
 * Masks have one of two forms, chosen by form or by their dtype:
 * - TFM_I32, a keep-mask: nonzero = attend, 0 = ignore (the tutorials'
 *   masked_fill(mask == 0, -1e9)). This is the OPPOSITE of PyTorch's
 *   boolean masks (nn.MultiheadAttention, nn.Transformer), where True =
 *   ignore: convert those with tfm_mask_from_torch_bool().
 * - TFM_F32, an additive mask: 0 = attend, -inf = ignore, added to the
 *   scores; PyTorch's float masks mean the same and pass unchanged.
 *
 * A query whose keys are all ignored (a source of padding only; a left-
 * padded target under the causal mask) attends to nothing, in both forms
 * and wherever attention runs (layers, the model, decoding): its weights
 * are 0, so its context is 0 and the attention's output there is the
 * output projection's bias, and no gradient passes through those weights.
 * PyTorch gives NaN for such a query, and the tutorials' masked_fill(mask
 * == 0, -1e9) uniform weights over the ignored keys; zeros keep a padded
 * batch's training step free of NaN and make each row's result independent
 * of its padding.
 *
 * The mask constructors return tape-owned masks (valid until
 * tfm_tape_reset()), or with tape NULL caller-owned ones (free with
 * tfm_tensor_free()), which a training loop can make once and use at every
 * step. */
#ifndef TFM_NN_H
#define TFM_NN_H

#include "ops.h"
#include "params.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A layer of any kind (tfm_layer_kind() says which); opaque. */
typedef struct tfm_layer tfm_layer;

/** The feed-forward activation: one of the TFM_ACTIVATION_ values. */
typedef int32_t tfm_activation;
/** The activations. */
enum {
    TFM_ACTIVATION_RELU = 0, /**< max(x, 0), PyTorch's default */
    TFM_ACTIVATION_GELU = 1, /**< exact GELU (erf), as F.gelu */
    TFM_ACTIVATION_SILU = 2, /**< x * sigmoid(x), as F.silu (Marian's "swish") */
    /** GELU's tanh approximation, as F.gelu(approximate="tanh") (Hugging
     * Face's "gelu_new", T5 v1.1's gated-gelu) */
    TFM_ACTIVATION_GELU_TANH = 3
};

/** Frees the layer and its sublayers; NULL is a no-op. Its parameters stay
 * in the store, which owns them. */
TFM_API void tfm_layer_free(tfm_layer *layer);
/** Training (1) or evaluation (0) mode for the layer and its sublayers. */
TFM_API tfm_status tfm_layer_set_training(tfm_layer *layer, int32_t training);

/** What the backward may recompute rather than keep on the tape: flags
 * for tfm_layer_set_recompute() and tfm_model_set_recompute(). */
enum {
    TFM_RECOMPUTE_NOTHING = 0,
    /** Attention weights [B, heads, T, S]: the backward runs Q K^T and the
     * softmax again per head (about 1.1x tutorial 003's step time; saves
     * B heads T S floats per attention layer). Weights a caller asks for
     * (weights_out) are kept regardless. */
    TFM_RECOMPUTE_ATTENTION_WEIGHTS = 1,
    /** The hidden layer [rows, d_ff] of the encoder and decoder layers'
     * ReLU feed-forwards: the backward runs the first linear again (about
     * 1.04x tutorial 002's step); all layers share one block of the
     * largest. GELU feed-forwards keep theirs. */
    TFM_RECOMPUTE_FEED_FORWARD_HIDDEN = 2,
    /** The outputs [rows, d_model] of the layer norms inside encoder and
     * decoder stacks: the backward normalises the kept input again (a few
     * percent of tutorial 002's step); all share one block. A layer's or
     * stack's own result (what a *_forward call returns) is kept. */
    TFM_RECOMPUTE_NORM_OUTPUTS = 4,
    /** The attention layers' context [B, T, heads * head_dim] before the output
     * projection: the backward runs the attention (Q K^T, softmax,
     * dropout, times V) again before the projection's; all share one
     * block. */
    TFM_RECOMPUTE_ATTENTION_CONTEXT = 8
};
/** Sets what the layer and its sublayers recompute (TFM_RECOMPUTE_*
 * flags; nothing, the default, keeps everything). Results and gradients
 * are the same bits either way. Unknown flags are TFM_ERR_ARG and change
 * nothing. Like tfm_layer_set_training, not while a forward runs. */
TFM_API tfm_status tfm_layer_set_recompute(tfm_layer *layer, uint32_t what);
/** "linear", "attention", …: what the layer is. */
TFM_API const char *tfm_layer_kind(const tfm_layer *layer);

/* --- basic layers ------------------------------------------------------------ */
/** y = x W^T + b; NAME.weight [out, in] and NAME.bias [out] (bias optional),
 * both U(-1/sqrt(in), 1/sqrt(in)) as nn.Linear. */
TFM_API tfm_layer *tfm_linear_create(tfm_params *params, const char *name,
                                     int64_t in_features, int64_t out_features,
                                     int32_t bias, tfm_rng *rng);
/** x [..., in] -> [..., out]. */
TFM_API tfm_tensor *tfm_linear_forward(tfm_tape *tape, const tfm_layer *linear,
                                       const tfm_tensor *x);

/** NAME.weight [vocab, dim] ~ N(0, 1), as nn.Embedding. */
TFM_API tfm_layer *tfm_embedding_create(tfm_params *params, const char *name,
                                        int64_t vocab, int64_t dim,
                                        tfm_rng *rng);
/** int32 ids [...] -> [..., dim]; an id outside [0, vocab) is
 * TFM_ERR_RANGE. */
TFM_API tfm_tensor *tfm_embedding_forward(tfm_tape *tape,
                                          const tfm_layer *embedding,
                                          const tfm_tensor *ids);

/** NAME.weight (ones) and NAME.bias (zeros) [dim]. */
TFM_API tfm_layer *tfm_layer_norm_create(tfm_params *params, const char *name,
                                         int64_t dim, float eps);
/** NAME.weight (ones) [dim]: an RMS norm (T5's T5LayerNorm), no bias;
 * its forward is tfm_layer_norm_forward's. */
TFM_API tfm_layer *tfm_rms_norm_create(tfm_params *params, const char *name, int64_t dim,
                                       float eps);
/** Normalises x [..., dim] over its last axis (tfm_rms_norm for an RMS
 * norm). */
TFM_API tfm_tensor *tfm_layer_norm_forward(tfm_tape *tape,
                                           const tfm_layer *norm,
                                           const tfm_tensor *x);

/** Dropout with probability p in [0, 1), drawing from rng (which may be
 * NULL only when p is 0); no parameters. */
TFM_API tfm_layer *tfm_dropout_create(float p, tfm_rng *rng);
/** tfm_dropout() in training mode, the identity in evaluation mode. */
TFM_API tfm_tensor *tfm_dropout_forward(tfm_tape *tape,
                                        const tfm_layer *dropout,
                                        const tfm_tensor *x);

/** linear2(dropout(activation(linear1(x)))), registering NAME.linear1.* and
 * NAME.linear2.* (the names nn.TransformerEncoderLayer gives them). */
TFM_API tfm_layer *tfm_feed_forward_create(tfm_params *params,
                                           const char *name, int64_t d_model,
                                           int64_t d_ff,
                                           tfm_activation activation,
                                           float dropout, tfm_rng *rng);
/** x [..., d_model] -> [..., d_model]. */
TFM_API tfm_tensor *tfm_feed_forward_forward(tfm_tape *tape,
                                             const tfm_layer *feed_forward,
                                             const tfm_tensor *x);

/* --- attention ---------------------------------------------------------------- */
/** Multi-head attention's options. Fill with tfm_attention_options_init(),
 * then change fields: the library reads only the fields of the size the
 * caller compiled with, so fields added later keep their defaults. */
typedef struct tfm_attention_options {
    uint32_t struct_size;   /**< set by tfm_attention_options_init */
    int64_t d_model;        /**< model width (input and output) */
    int32_t heads;          /**< must divide d_model unless head_dim is set */
    int32_t bias;           /**< Q/K/V and output projection biases */
    /** 1: NAME.in_proj_weight [3D, D] and NAME.in_proj_bias as
     * nn.MultiheadAttention (self-attention is then one GEMM);
     * 0: separate NAME.q_proj, NAME.k_proj, NAME.v_proj linears.
     * The output projection is NAME.out_proj either way. */
    int32_t fused_qkv;
    float dropout;          /**< on the attention weights, as nn.MultiheadAttention */
    /** 0: scores / sqrt(d_k). Otherwise scores / NAME.scale, a trainable [1]
     * parameter initialised to scale_init, or to sqrt(d_model) (tutorial
     * 003's choice) when scale_init is 0. */
    int32_t trainable_scale;
    float scale_init;       /**< see trainable_scale */
    /** 1: scores Q K^T as they are, neither divided by sqrt(d_k) nor by a
     * scale (T5's, whose initialisation folds the factor into Q); 0
     * (default): as trainable_scale says */
    int32_t unscaled;
    /** Each head's width d_k: 0 (default) for d_model / heads, or any
     * width from 1, the projections then mapping d_model to heads *
     * head_dim (Q, K, V [heads * head_dim, d_model]) and back (out_proj
     * [d_model, heads * head_dim]), as T5's d_kv; heads * head_dim at
     * most 2^31. */
    int64_t head_dim;
} tfm_attention_options;

/** Defaults: d_model 512, 8 heads, bias, fused, dropout 0, fixed scale
 * (scale_init 0). */
TFM_API void tfm_attention_options_init_sized(tfm_attention_options *options,
                                              uint32_t struct_size);
/** The defaults, for a struct of the size this program was compiled with. */
#define tfm_attention_options_init(options)                                    \
    tfm_attention_options_init_sized((options), (uint32_t)sizeof *(options))
/** Fused: in_proj_weight xavier-uniform, out_proj.weight nn.Linear's
 * default, biases 0, as nn.MultiheadAttention. Separate: nn.Linear's
 * defaults for every projection, as tutorial 003's linears. */
TFM_API tfm_layer *tfm_attention_create(tfm_params *params, const char *name,
                                        const tfm_attention_options *options,
                                        tfm_rng *rng);
/** query [B, T, D] attends over memory [B, S, D] (pass query again for
 * self-attention), as nn.MultiheadAttention(q, k, v, attn_mask,
 * key_padding_mask). Two masks, each of its own kind and either NULL (see
 * "masks" below for the forms):
 *   mask: the attention mask, [T, S] (as PyTorch's 2-D attn_mask), or 4-D
 *     with each axis 1 or the scores' [B, heads, T, S];
 *   key_padding_mask: [B, S], which keys of each batch row are attended.
 * A mask's kind is never guessed from its shape: a [B, S] tensor given as
 * mask is refused unless B == T, and is then read as [T, S]. When both are
 * given they must be in the same form and are combined (a per-call mask of
 * [B, 1 or heads, T, S] on the tape). When weights_out is not NULL it
 * receives the attention weights [B, heads, T, S] (tape-owned, before
 * dropout; differentiable, as PyTorch's, at the cost of one copy of them
 * when a gradient is wanted). */
TFM_API tfm_tensor *tfm_attention_forward(tfm_tape *tape,
                                          const tfm_layer *attention,
                                          const tfm_tensor *query,
                                          const tfm_tensor *memory,
                                          const tfm_tensor *mask,
                                          const tfm_tensor *key_padding_mask,
                                          tfm_tensor **weights_out);

/* --- encoder and decoder ------------------------------------------------------ */
/** An encoder or decoder layer's options (and a stack's, for each of its
 * layers). Fill with tfm_block_options_init(), then change fields. */
typedef struct tfm_block_options {
    uint32_t struct_size;   /**< set by tfm_block_options_init */
    int64_t d_model;        /**< model width */
    int32_t heads;          /**< attention heads; must divide d_model unless head_dim is set */
    int64_t d_ff;           /**< feed-forward width */
    float dropout;          /**< in [0, 1): attention weights, sublayer outputs, feed-forward */
    tfm_activation activation; /**< the feed-forward's */
    int32_t norm_first;     /**< 0: post-norm (all the tutorials), 1: pre-norm */
    float layer_norm_eps;   /**< added to the variance in every layer norm */
    /** attention biases (the feed-forward's: feed_forward_bias) */
    int32_t bias;
    int32_t fused_qkv;      /**< see tfm_attention_options */
    int32_t trainable_scale; /**< see tfm_attention_options */
    float scale_init;       /**< see tfm_attention_options */
    /** the feed-forward linears' biases: 1 (default, as PyTorch 1.13's
     * layers) or 0 (T5's) */
    int32_t feed_forward_bias;
    /** 1: every norm an RMS norm (tfm_rms_norm_create: T5's), 0 (default):
     * layer norms */
    int32_t rms_norm;
    /** 1: a gated feed-forward, linear2(act(linear1(x)) * linear_up(x)),
     * with NAME.linear_up [d_ff, d_model] (T5 v1.1's wi_0, wi_1, wo;
     * LLaMA's gate, up and down projections); 0 (default):
     * linear2(act(linear1(x))) */
    int32_t gated_feed_forward;
    /** every attention's tfm_attention_options unscaled (T5's) */
    int32_t unscaled_attention;
    /** every attention's tfm_attention_options head_dim: 0 (default) for
     * d_model / heads */
    int64_t head_dim;
} tfm_block_options;

/** Defaults: torch.nn.TransformerEncoderLayer's (512, 8 heads, 2048, dropout
 * 0.1, relu, post-norm, eps 1e-5, biases, fused Q/K/V, fixed scale). */
TFM_API void tfm_block_options_init_sized(tfm_block_options *options,
                                          uint32_t struct_size);
/** The defaults, for a struct of the size this program was compiled with. */
#define tfm_block_options_init(options)                                        \
    tfm_block_options_init_sized((options), (uint32_t)sizeof *(options))

/** NAME.self_attn, NAME.linear1, NAME.linear2, NAME.norm1, NAME.norm2.
 * The forwards take masks as tfm_attention_forward, PyTorch's src_mask /
 * src_key_padding_mask, tgt_mask / tgt_key_padding_mask (self_*) and
 * memory_mask / memory_key_padding_mask; a stack combines them once for all
 * its layers. */
TFM_API tfm_layer *tfm_encoder_layer_create(tfm_params *params,
                                            const char *name,
                                            const tfm_block_options *options,
                                            tfm_rng *rng);
/** x [B, S, D] -> [B, S, D], masks as PyTorch's src_mask and
 * src_key_padding_mask (either may be NULL). */
TFM_API tfm_tensor *tfm_encoder_layer_forward(tfm_tape *tape,
                                              const tfm_layer *layer,
                                              const tfm_tensor *x,
                                              const tfm_tensor *mask,
                                              const tfm_tensor *key_padding_mask);

/** NAME.self_attn, NAME.multihead_attn, NAME.linear1, NAME.linear2,
 * NAME.norm1, NAME.norm2, NAME.norm3. */
TFM_API tfm_layer *tfm_decoder_layer_create(tfm_params *params,
                                            const char *name,
                                            const tfm_block_options *options,
                                            tfm_rng *rng);
/** x [B, T, D] attending to itself and to memory [B, S, D] -> [B, T, D];
 * each mask may be NULL. */
TFM_API tfm_tensor *tfm_decoder_layer_forward(
    tfm_tape *tape, const tfm_layer *layer, const tfm_tensor *x,
    const tfm_tensor *memory, const tfm_tensor *self_mask,
    const tfm_tensor *memory_mask, const tfm_tensor *self_key_padding_mask,
    const tfm_tensor *memory_key_padding_mask);

/** Stacks of num_layers layers (NAME.layers.0 …) with an optional final
 * layer norm (NAME.norm), as torch.nn.TransformerEncoder/Decoder. */
TFM_API tfm_layer *tfm_encoder_create(tfm_params *params, const char *name,
                                      int32_t num_layers,
                                      const tfm_block_options *options,
                                      int32_t final_norm, tfm_rng *rng);
/** Runs the stack's layers (then its final norm) on x [B, S, D]. */
TFM_API tfm_tensor *tfm_encoder_forward(tfm_tape *tape,
                                        const tfm_layer *encoder,
                                        const tfm_tensor *x,
                                        const tfm_tensor *mask,
                                        const tfm_tensor *key_padding_mask);
/** The decoder stack, as tfm_encoder_create() with decoder layers. */
TFM_API tfm_layer *tfm_decoder_create(tfm_params *params, const char *name,
                                      int32_t num_layers,
                                      const tfm_block_options *options,
                                      int32_t final_norm, tfm_rng *rng);
/** Runs the stack's layers (then its final norm) on x [B, T, D] against
 * memory [B, S, D]. */
TFM_API tfm_tensor *tfm_decoder_forward(
    tfm_tape *tape, const tfm_layer *decoder, const tfm_tensor *x,
    const tfm_tensor *memory, const tfm_tensor *self_mask,
    const tfm_tensor *memory_mask, const tfm_tensor *self_key_padding_mask,
    const tfm_tensor *memory_key_padding_mask);

/* --- positions ------------------------------------------------------------------ */
/** PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(…), fixed,
 * for positions below max_len; no parameters. */
TFM_API tfm_layer *tfm_sinusoidal_positions_create(int64_t max_len,
                                                   int64_t d_model);
/** How a sinusoidal table lays out its sines and cosines: one of the
 * TFM_SINUSOIDS_ values. */
typedef int32_t tfm_sinusoid_layout;
/** The sinusoidal layouts. */
enum {
    /** columns 2i, 2i+1: sin, cos of pos / 10000^(2i/d) (the tutorials') */
    TFM_SINUSOIDS_INTERLEAVED = 0,
    /** the first ceil(d/2) columns sin(pos / 10000^(2i/d)), the rest the
     * cosines (Marian's) */
    TFM_SINUSOIDS_HALVES = 1,
    /** the first floor(d/2) columns sin(pos * exp(-i ln(10000) / (d/2 - 1))),
     * then the cosines, then a zero column when d is odd (fairseq's:
     * M2M100, NLLB), in float32 as fairseq computes it */
    TFM_SINUSOIDS_HALVES_FAIRSEQ = 2
};
/** A fixed table of positions 0 to max_len - 1 in the layout given; no
 * parameters. TFM_ERR_ARG for an unknown layout. */
TFM_API tfm_layer *tfm_sinusoidal_positions_create_with_layout(int64_t max_len,
                                                               int64_t d_model,
                                                               tfm_sinusoid_layout layout);
/** NAME.weight [max_len, d_model] ~ N(0, 1), as an nn.Embedding of positions. */
TFM_API tfm_layer *tfm_learned_positions_create(tfm_params *params,
                                                const char *name,
                                                int64_t max_len,
                                                int64_t d_model, tfm_rng *rng);
/** x [B, T, D] + P[offset : offset + T] (offset > 0 when decoding step by
 * step); past max_len is TFM_ERR_RANGE. */
TFM_API tfm_tensor *tfm_positions_forward(tfm_tape *tape,
                                          const tfm_layer *positions,
                                          const tfm_tensor *x, int64_t offset);

/* --- masks (never require grad; their forms are in the file's notes) -------- */
/** The square subsequent mask [T, T]: 1 on and below the diagonal (keep
 * form) or 0 there and -inf above (additive form), as
 * nn.Transformer.generate_square_subsequent_mask. An attention mask. */
TFM_API tfm_tensor *tfm_mask_causal(tfm_tape *tape, int64_t length,
                                    tfm_dtype form);
/** From ids [B, S]: [B, 1, 1, S], dropping the keys == pad_id, as the
 * tutorials build it: a 4-D attention mask (pass it as a mask, or combine
 * it with a causal one). A negative pad_id (a tokenizer without a padding
 * piece gives -1) is TFM_ERR_ARG. */
TFM_API tfm_tensor *tfm_mask_padding(tfm_tape *tape, const tfm_tensor *ids,
                                     int32_t pad_id, tfm_dtype form);
/** A key-padding mask [B, S] = [rows, width] from each row's length:
 * position s of row b is kept (1, or 0 in the additive form) when
 * s < lengths[b] and dropped (0, or -inf) past it; for ids padded after
 * their lengths, the values tfm_mask_padding gives (as [B, 1, 1, S]).
 * Pass it as a key_padding_mask. TFM_ERR_RANGE for a length outside
 * 0..width; a row of length 0 attends to nothing (see tfm_softmax). */
TFM_API tfm_tensor *tfm_mask_from_lengths(tfm_tape *tape, const int64_t *lengths,
                                          int64_t rows, int64_t width, tfm_dtype form);
/** A PyTorch boolean mask (True = ignore), as bytes (numpy's bool) of the
 * given shape, in libtfm's form of the same shape: for example a
 * key_padding_mask [B, S] becomes a key-padding mask with 0 (keep form) or
 * -inf (additive form) where PyTorch had True. Both forms give the same
 * results. One difference from PyTorch: a query whose keys are all True
 * gets attention weights 0 (see the file's notes), where PyTorch gives
 * NaN. */
TFM_API tfm_tensor *tfm_mask_from_torch_bool(tfm_tape *tape,
                                             const uint8_t *masked_out,
                                             int32_t ndim, const int64_t *shape,
                                             tfm_dtype form);
/** Both masks at once, broadcast: keep-masks AND, additive masks add. */
TFM_API tfm_tensor *tfm_mask_combine(tfm_tape *tape, const tfm_tensor *a,
                                     const tfm_tensor *b);

/* --- initialisation of any float32 tensor, in place ----------------------------- */
/** U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)), fans as PyTorch computes
 * them (2-D [out, in]; more axes multiply the receptive field into both). */
TFM_API tfm_status tfm_init_xavier_uniform(tfm_tensor *tensor, float gain,
                                           tfm_rng *rng);
/** Bounds, mean and std as tfm_tensor_uniform and tfm_tensor_normal check them. */
TFM_API tfm_status tfm_init_uniform(tfm_tensor *tensor, float low, float high,
                                    tfm_rng *rng);
/** N(mean, std^2) draws over the whole tensor. */
TFM_API tfm_status tfm_init_normal(tfm_tensor *tensor, float mean, float std,
                                   tfm_rng *rng);

#ifdef __cplusplus
}
#endif

#endif
