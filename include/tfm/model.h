/* libtfm's ready-made encoder-decoder transformer: token embeddings,
 * positions, torch.nn.Transformer's encoder and decoder, and the output
 * projection ("generator"), configured by options that cover nn.Transformer
 * and the tutorials. Parameter names are nn.Transformer's state_dict names
 * (encoder.layers.0.self_attn.in_proj_weight, …) plus src_embedding.weight,
 * tgt_embedding.weight (only src_embedding.weight when shared),
 * src_positions.weight / tgt_positions.weight (learned positions),
 * src_scale / tgt_scale (trainable embedding scale) and generator.weight /
 * generator.bias. */
#ifndef TFM_MODEL_H
#define TFM_MODEL_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfm_model tfm_model;

typedef int32_t tfm_positions;
enum { TFM_POSITIONS_SINUSOIDAL = 0, TFM_POSITIONS_LEARNED = 1 };

typedef int32_t tfm_embedding_scale;
enum {
    TFM_EMBEDDING_SCALE_NONE = 0,      /* embeddings as they are */
    TFM_EMBEDDING_SCALE_SQRT_D = 1,    /* times sqrt(d_model), fixed */
    TFM_EMBEDDING_SCALE_TRAINABLE = 2  /* times a [1] parameter, from sqrt(d_model) */
};

typedef struct tfm_model_options {
    uint32_t struct_size;        /* set by tfm_model_options_init */
    int64_t src_vocab;
    int64_t tgt_vocab;
    int64_t max_src_len;
    int64_t max_tgt_len;
    int32_t share_embeddings;    /* one table for source and target (same vocab) */
    tfm_positions positions;
    tfm_embedding_scale embedding_scale;
    int32_t encoder_layers;
    int32_t decoder_layers;
    int32_t final_norm;          /* encoder.norm and decoder.norm, as nn.Transformer */
    /* Every encoder and decoder layer, as tfm_block_options (nn.h) says;
     * the fields are here rather than a nested struct so that neither
     * struct's growth can move the other's fields. */
    int64_t d_model;
    int32_t heads;
    int64_t d_ff;
    float dropout;
    tfm_activation activation;
    int32_t norm_first;
    float layer_norm_eps;
    int32_t bias;
    int32_t fused_qkv;
    int32_t trainable_scale;
    float scale_init;
    uint64_t seed;               /* initialisation and dropout */
    /* Dropout after embeddings + positions; negative (the default) means
     * dropout. Tutorials 000/001 have none there: 0. */
    float embedding_dropout;
} tfm_model_options;

/* nn.Transformer's defaults (512, 8 heads, 6 + 6 layers, 2048, dropout 0.1,
 * relu, post-norm, final norms), sinusoidal positions, no embedding scale,
 * vocabularies and lengths that must still be set. */
TFM_API void tfm_model_options_init_sized(tfm_model_options *options,
                                          uint32_t struct_size);
/* The defaults, for a struct of the size this program was compiled with. */
#define tfm_model_options_init(options)                                       \
    tfm_model_options_init_sized((options), (uint32_t)sizeof *(options))
TFM_API tfm_model *tfm_model_create(const tfm_model_options *options);
TFM_API void tfm_model_free(tfm_model *model);

/* The model's parameter store. The model owns it: it lives until
 * tfm_model_free, and the caller must neither free it nor add to it
 * (an optimizer or a load may use it freely). */
TFM_API tfm_params *tfm_model_params(tfm_model *model);
TFM_API int64_t tfm_model_parameter_count(const tfm_model *model);
TFM_API tfm_status tfm_model_set_training(tfm_model *model, int32_t training);

/* The options the model was made with, into the caller's struct as far as
 * its struct_size goes (call tfm_model_options_init on it first). */
TFM_API tfm_status tfm_model_get_options(const tfm_model *model,
                                         tfm_model_options *options);
/* The sizes a caller needs for its buffers; -1 for a NULL model. */
TFM_API int64_t tfm_model_src_vocab(const tfm_model *model);
TFM_API int64_t tfm_model_tgt_vocab(const tfm_model *model);
TFM_API int64_t tfm_model_max_src_len(const tfm_model *model);
TFM_API int64_t tfm_model_max_tgt_len(const tfm_model *model);
TFM_API int64_t tfm_model_d_model(const tfm_model *model);

/* --- files that carry their model ---------------------------------------------
 * tfm_model_save writes the parameters (by name, as tfm_params_save) and
 * the options as safetensors "__metadata__": string values under "tfm."
 * keys ("tfm.format_version", "tfm.d_model", "tfm.heads", "tfm.positions"
 * = "learned", …), so tfm_model_load rebuilds the model from the file
 * alone. The file is a plain safetensors file: PyTorch's safetensors
 * loader reads its tensors, and tfm_params_load reads it into a model made
 * with the same options. Writing is atomic (see io.h). */
TFM_API tfm_status tfm_model_save(const tfm_model *model, const char *path);
/* The same with the caller's own metadata_count string pairs (a
 * vocabulary, a tokenizer, a recipe), read back with
 * tfm_safetensors_metadata_get; keys starting with "tfm." are libtfm's
 * (TFM_ERR_ARG). */
TFM_API tfm_status tfm_model_save_with_metadata(const tfm_model *model,
                                                const char *path,
                                                int64_t metadata_count,
                                                const char *const *keys,
                                                const char *const *values);
/* A new model, caller-owned, from a file tfm_model_save or
 * tfm_training_save wrote: every option read and range-checked (a missing
 * key, a value of the wrong type or out of range, or a description the
 * file's tensors do not fit is TFM_ERR_FORMAT with the key named; a model
 * larger than the values the file holds is refused before it is
 * allocated), then the parameters loaded strictly. Training state in the
 * file is ignored. The model starts in training mode with its dropout
 * stream as tfm_model_create seeds it. */
TFM_API tfm_model *tfm_model_load(const char *path);

/* The masks are nn.Transformer.forward's, each of its declared kind and
 * either NULL (forms in nn.h: int32 keep-masks are the opposite of
 * PyTorch's boolean masks):
 *   src_mask [S, S], tgt_mask [T, T], memory_mask [T, S]: attention masks,
 *     2-D as given or 4-D with each axis 1 or [B, heads, query, key]'s;
 *   src_key_padding_mask [B, S], tgt_key_padding_mask [B, T],
 *     memory_key_padding_mask [B, S]: which keys of each row are attended.
 * A mask and the key-padding mask of one attention must share a form. */
/* src [B, S] int32 -> memory [B, S, D]. */
TFM_API tfm_tensor *tfm_model_encode(tfm_tape *tape, tfm_model *model,
                                     const tfm_tensor *src,
                                     const tfm_tensor *src_mask,
                                     const tfm_tensor *src_key_padding_mask);
/* tgt [B, T] int32 and memory -> logits [B, T, tgt_vocab]. */
TFM_API tfm_tensor *tfm_model_decode(
    tfm_tape *tape, tfm_model *model, const tfm_tensor *tgt,
    const tfm_tensor *memory, const tfm_tensor *tgt_mask,
    const tfm_tensor *memory_mask, const tfm_tensor *tgt_key_padding_mask,
    const tfm_tensor *memory_key_padding_mask);
/* encode then decode, with nn.Transformer.forward's arguments in order. */
TFM_API tfm_tensor *tfm_model_forward(
    tfm_tape *tape, tfm_model *model, const tfm_tensor *src,
    const tfm_tensor *tgt, const tfm_tensor *src_mask,
    const tfm_tensor *tgt_mask, const tfm_tensor *memory_mask,
    const tfm_tensor *src_key_padding_mask,
    const tfm_tensor *tgt_key_padding_mask,
    const tfm_tensor *memory_key_padding_mask);

#ifdef __cplusplus
}
#endif

#endif
