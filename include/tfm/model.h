/** @file
 * libtfm's ready-made encoder-decoder transformer: token embeddings,
 * positions, torch.nn.Transformer's encoder and decoder, and the output
 * projection ("generator"), configured by options that cover nn.Transformer
 * and the tutorials. Parameter names are nn.Transformer's state_dict names
 * (encoder.layers.0.self_attn.in_proj_weight, …) plus src_embedding.weight,
 * tgt_embedding.weight (only src_embedding.weight when shared),
 * src_positions.weight / tgt_positions.weight (learned positions),
 * src_scale / tgt_scale (trainable embedding scale),
 * src_embedding_norm.* / tgt_embedding_norm.* (embedding_norm) and
 * generator.weight (unless tie_generator) / generator.bias (a published
 * model's final_logits_bias).
 *
 * Ownership: a model is caller-owned (tfm_model_create(), tfm_model_load();
 * free with tfm_model_free()) and owns its parameters, layers and dropout
 * stream. Forwards return tape-owned tensors, as ops do (ops.h).
 *
 * Errors: calls returning a status return it; those returning a pointer
 * return NULL and a size -1, with the status and message (common.h). A
 * failed call leaves the model as it was, and a failed save leaves the file
 * that was at the path as it was.
 *
 * Threads: one thread at a time per model when training (dropout draws
 * from the model's stream). In evaluation mode (tfm_model_set_training(m,
 * 0)) the forwards only read the model, and several threads may run them
 * at once, each with its own tape; tfm_model_set_training() itself must not
 * run while any other call uses the model.
 *
 * The forwards' masks are nn.Transformer.forward's, each of its declared
 * kind and either NULL (forms in nn.h: int32 keep-masks are the opposite of
 * PyTorch's boolean masks):
 * - src_mask [S, S], tgt_mask [T, T], memory_mask [T, S]: attention masks,
 *   2-D as given or 4-D with each axis 1 or [B, heads, query, key]'s;
 * - src_key_padding_mask [B, S], tgt_key_padding_mask [B, T],
 *   memory_key_padding_mask [B, S]: which keys of each row are attended.
 *
 * A mask and the key-padding mask of one attention must share a form. */
#ifndef TFM_MODEL_H
#define TFM_MODEL_H

#include "nn.h"
#include "text.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An encoder-decoder transformer with its embeddings and generator;
 * opaque. */
typedef struct tfm_model tfm_model;

/** How positions are encoded: one of the TFM_POSITIONS_ values. */
typedef int32_t tfm_positions;
/** The position encodings. */
enum {
    TFM_POSITIONS_SINUSOIDAL = 0, /**< fixed sin/cos, no parameters */
    TFM_POSITIONS_LEARNED = 1,    /**< a trained [max_len, d_model] table per side */
    /** fixed, sines then cosines (TFM_SINUSOIDS_HALVES in nn.h: Marian's) */
    TFM_POSITIONS_SINUSOIDAL_HALVES = 2,
    /** fixed, fairseq's (TFM_SINUSOIDS_HALVES_FAIRSEQ: M2M100's, NLLB's) */
    TFM_POSITIONS_SINUSOIDAL_FAIRSEQ = 3,
    /** no absolute positions (T5's, whose relative_attention_buckets
     * place the tokens instead) */
    TFM_POSITIONS_NONE = 4
};

/** What multiplies the token embeddings: one of the TFM_EMBEDDING_SCALE_
 * values. */
typedef int32_t tfm_embedding_scale;
/** The embedding scales. */
enum {
    TFM_EMBEDDING_SCALE_NONE = 0,      /**< embeddings as they are */
    TFM_EMBEDDING_SCALE_SQRT_D = 1,    /**< times sqrt(d_model), fixed */
    TFM_EMBEDDING_SCALE_TRAINABLE = 2  /**< times a [1] parameter, from sqrt(d_model) */
};

/** A model's description. Fill with tfm_model_options_init(), set the
 * vocabularies and lengths, change what else differs. The library reads
 * only the fields of the size the caller compiled with. The fields from
 * d_model to scale_init are every encoder and decoder layer's, as
 * tfm_block_options (nn.h) says; they are here rather than in a nested
 * struct so that neither struct's growth can move the other's fields. */
typedef struct tfm_model_options {
    uint32_t struct_size;        /**< set by tfm_model_options_init */
    int64_t src_vocab;           /**< source token ids are in [0, src_vocab) */
    int64_t tgt_vocab;           /**< target token ids and logits: [0, tgt_vocab) */
    int64_t max_src_len;         /**< longest source (positions) */
    int64_t max_tgt_len;         /**< longest target (positions) */
    int32_t share_embeddings;    /**< one table for source and target (same vocab) */
    tfm_positions positions;     /**< sinusoidal or learned */
    tfm_embedding_scale embedding_scale; /**< what multiplies the embeddings */
    int32_t encoder_layers;      /**< 0 to 4,096 */
    /** 0 to 4,096; with none the target embeddings go through decoder.norm
     * (final_norm) to the generator, and memory is not read. */
    int32_t decoder_layers;
    int32_t final_norm;          /**< encoder.norm and decoder.norm, as nn.Transformer */
    int64_t d_model;             /**< model width */
    int32_t heads;               /**< attention heads; must divide d_model unless head_dim is set */
    int64_t d_ff;                /**< feed-forward width */
    float dropout;               /**< in [0, 1) */
    tfm_activation activation;   /**< the feed-forward's */
    int32_t norm_first;          /**< 0: post-norm, 1: pre-norm */
    float layer_norm_eps;        /**< added to the variance in every layer norm */
    int32_t bias;                /**< attention biases */
    int32_t fused_qkv;           /**< see tfm_attention_options */
    int32_t trainable_scale;     /**< see tfm_attention_options */
    float scale_init;            /**< see tfm_attention_options */
    uint64_t seed;               /**< initialisation and dropout */
    /** Dropout after embeddings + positions, in [0, 1); -1 (the default,
     * or any value in [-1, 0)) means dropout. Tutorials 000/001 have none
     * there: 0. */
    float embedding_dropout;
    /** The special tokens, kept with the model so that decoding and data
     * preparation need not be told them again (tfm_decode_options_from_model
     * in decode.h); -1 (the default) means not set. bos_id and eos_id are
     * target ids: -1 or in [0, tgt_vocab). */
    int32_t bos_id;
    int32_t eos_id;               /**< the end of a sequence; see bos_id */
    /** Padding, in sources and targets alike: -1 or in [0, src_vocab) and
     * [0, tgt_vocab). */
    int32_t pad_id;
    /** 1: the generator's weight is the target embedding table (the shared
     * one when share_embeddings), as translation models tie them: no
     * generator.weight parameter, and the table's gradient takes both
     * uses; the table starts at N(0, 1/d_model) (fairseq's tied tables)
     * rather than nn.Embedding's N(0, 1), whose logits would start with a
     * standard deviation of sqrt(d_model). 0 (default): a generator.weight
     * of its own. */
    int32_t tie_generator;
    /** Rows of each position table before position 0: position t reads
     * row position_offset + t, and the tables have max_len +
     * position_offset rows (BART's learned tables: 2; M2M100's sinusoidal
     * ones: its padding id + 1). 0 (default) to 2^31. */
    int64_t position_offset;
    /** 1: a layer norm after embeddings + positions, before the dropout
     * (src_embedding_norm.*, tgt_embedding_norm.*: BART's
     * layernorm_embedding). 0 (default): none. */
    int32_t embedding_norm;
    /** The feed-forward linears' biases: 1 (default) or 0 (T5's). */
    int32_t feed_forward_bias;
    /** 1: every norm (layers', stacks', embeddings') an RMS norm without
     * bias (T5's); 0 (default): layer norms. */
    int32_t rms_norm;
    /** 1: gated feed-forwards (tfm_block_options' gated_feed_forward: T5
     * v1.1's gated GELU); 0 (default): plain ones. */
    int32_t gated_feed_forward;
    /** Attention scores without 1/sqrt(d_k) (tfm_block_options'
     * unscaled_attention: T5's). 0 (default) or 1. */
    int32_t unscaled_attention;
    /** T5's bucketed relative position bias: 0 (default) for none, or the
     * buckets (4 to 65,536) of the tables encoder.relative_attention_bias
     * and decoder.relative_attention_bias [buckets, heads]. Each stack's
     * table, read at the bucket of key position minus query position
     * (both signs in the encoder, only the past in the decoder), is added
     * to the scores of every self-attention of that stack. */
    int32_t relative_attention_buckets;
    /** The distance whose bucket and beyond are the last one, the buckets
     * between exact distances and it growing logarithmically (T5's
     * relative_attention_max_distance); more than relative_attention_buckets
     * / 2 when they are set. 0 (default) when they are not. */
    int32_t relative_attention_max_distance;
    /** 1: the decoder's output is multiplied by d_model^-0.5 before the
     * generator (original T5's tied output); 0 (default): as it is. */
    int32_t generator_rescale;
    /** Each attention head's width d_k (tfm_block_options' head_dim): 0
     * (default) for d_model / heads; otherwise 1 to 2^31, every
     * attention then projecting d_model to heads * head_dim and back (T5's
     * d_kv, whose published small models have 6 heads of 64 in d_model
     * 512). Files written without it read as 0. */
    int64_t head_dim;
} tfm_model_options;

/** nn.Transformer's defaults (512, 8 heads, 6 + 6 layers, 2048, dropout 0.1,
 * relu, post-norm, final norms), sinusoidal positions, no embedding scale,
 * no special tokens (-1), vocabularies and lengths that must still be set. */
TFM_API void tfm_model_options_init_sized(tfm_model_options *options,
                                          uint32_t struct_size);
/** The defaults, for a struct of the size this program was compiled with. */
#define tfm_model_options_init(options)                                       \
    tfm_model_options_init_sized((options), (uint32_t)sizeof *(options))
/** A new model, initialised as PyTorch initialises nn.Transformer and the
 * tutorials' embeddings and generator, from options->seed. Caller-owned:
 * free with tfm_model_free(). NULL with TFM_ERR_NULL, TFM_ERR_ARG (an
 * option out of range: the message names it), TFM_ERR_SIZE (a model of
 * absurd size) or TFM_ERR_NOMEM.
 *
 * The options are checked against the bounds model files are read with,
 * so that every model made can be saved and loaded back: vocabularies,
 * lengths, d_model and d_ff 1 to 2^31; flags 0 or 1; enumerations among
 * their values; float options finite and either 0 or normal (no
 * subnormals), layer_norm_eps in [0, 1], scale_init in [0, 1e30];
 * sinusoidal tables of at most 2^28 values, and no larger than the
 * model's parameters unless under 2^22 values (TFM_ERR_SIZE). */
TFM_API tfm_model *tfm_model_create(const tfm_model_options *options);
/** Frees the model with its parameters and layers; NULL is a no-op. An
 * optimizer or decoding made for it must not be used after (freeing them
 * is still safe). */
TFM_API void tfm_model_free(tfm_model *model);

/** The model's parameter store. The model owns it: it lives until
 * tfm_model_free, and the caller must neither free it nor add to it
 * (an optimizer or a load may use it freely). */
TFM_API tfm_params *tfm_model_params(tfm_model *model);
/** The number of scalars in the model's parameters; -1 for a NULL model. */
TFM_API int64_t tfm_model_parameter_count(const tfm_model *model);
/** Training (1: dropout on, as after create) or evaluation (0) mode for
 * every layer. */
TFM_API tfm_status tfm_model_set_training(tfm_model *model, int32_t training);
/** What every layer's backward recomputes rather than keeps
 * (TFM_RECOMPUTE_* in nn.h): memory for time. Not saved with the model. */
TFM_API tfm_status tfm_model_set_recompute(tfm_model *model, uint32_t what);
/** Data-parallel training: this process runs slice index of count equal
 * slices of every batch (along the batch axis), and the model's dropout
 * masks become that slice's part of the whole batch's masks
 * (tfm_rng_set_shard() on the model's stream). (0, 1), the default, is the
 * whole batch; count is at most TFM_MAX_SHARDS. Not saved with the model. */
TFM_API tfm_status tfm_model_set_shard(tfm_model *model, int64_t index, int64_t count);

/** The options the model was made with, into the caller's struct as far as
 * its struct_size goes (call tfm_model_options_init on it first). */
TFM_API tfm_status tfm_model_get_options(const tfm_model *model,
                                         tfm_model_options *options);
/** How many options tfm_model_option() describes. */
TFM_API int32_t tfm_model_option_count(void);
/** The index-th option of the model (0 to tfm_model_option_count() - 1)
 * as a model file writes it: *name is its field's name (a static string),
 * value receives its text (numbers in full precision, enumerations by
 * name: "learned", "gelu"). For logging a configuration, or comparing two
 * models' (distributed.h). TFM_ERR_RANGE past the last, TFM_ERR_SIZE when
 * value_size bytes cannot hold the text (96 always can). */
TFM_API tfm_status tfm_model_option(const tfm_model *model, int32_t index, const char **name,
                                    char *value, int64_t value_size);
/** The source vocabulary, to size a caller's buffers; -1 for a NULL model
 * (as every size getter here). */
TFM_API int64_t tfm_model_src_vocab(const tfm_model *model);
/** The target vocabulary (the logits' last axis). */
TFM_API int64_t tfm_model_tgt_vocab(const tfm_model *model);
/** The longest source the model takes. */
TFM_API int64_t tfm_model_max_src_len(const tfm_model *model);
/** The longest target the model takes. */
TFM_API int64_t tfm_model_max_tgt_len(const tfm_model *model);
/** The model width. */
TFM_API int64_t tfm_model_d_model(const tfm_model *model);
/** The beginning-of-sequence id the model was made with; -1 when not set
 * (options bos_id) or for a NULL model (then with TFM_ERR_NULL). */
TFM_API int32_t tfm_model_bos_id(const tfm_model *model);
/** The end-of-sequence id; -1 when not set, as tfm_model_bos_id(). */
TFM_API int32_t tfm_model_eos_id(const tfm_model *model);
/** The padding id; -1 when not set, as tfm_model_bos_id(). */
TFM_API int32_t tfm_model_pad_id(const tfm_model *model);

/* --- int8 inference ------------------------------------------------------------ */
/** What tfm_model_quantize() turns to int8: TFM_QUANTIZE_ flags. */
typedef uint32_t tfm_quantize;
/** The parts of a model that can be quantized. */
enum {
    /** Every linear of the encoder and decoder layers: the attention
     * projections (q, k, v and out) and the feed-forward's two. */
    TFM_QUANTIZE_LAYERS = 1,
    /** Also the output projection (the generator). A tied generator
     * (tie_generator) gets an int8 copy of the embedding table for its
     * products; the embedding lookups keep the float32 table, which its
     * file keeps too. */
    TFM_QUANTIZE_GENERATOR = 2
};
/** Quantizes the model for inference: each weight `what` names becomes
 * int8 per output channel (symmetric scales, max |w| / 127), each row of
 * its input is quantized on the fly, and the products sum in int32
 * (AVX512-VNNI, AVX-VNNI, AVX2 or portable C, chosen at run time: the
 * same bits on each). Embeddings, positions, norms, softmax and biases
 * stay float32. The forwards (in evaluation mode) and decoding
 * (decode.h) then multiply each quantized weight in int8 where that is
 * the faster on this CPU, else by its float32 values: every weight on a
 * CPU with VNNI, on AVX2 alone the larger ones (from 2^15 multiply-adds
 * per row, 2^17 beside AVX-512), and none without AVX2, where an int8
 * model decodes as float32 does with those values; tfm_model_save() writes
 * the int8 values and scales (about a quarter of the layers' bytes) and
 * tfm_model_load() gives the quantized model back. The parameter store
 * keeps float32 values (each quantized weight's int8 values times their
 * scales, here as after a load; a tied generator's table the originals)
 * for tfm_params_* readers and for the products the CPU runs faster in
 * float32 than in int8.
 *
 * The model goes to evaluation mode for good: tfm_model_set_training(m,
 * 1), tfm_training_save(), tfm_training_load() and tfm_params_load() into
 * its parameters (which would leave the int8 weights behind) are then
 * TFM_ERR_STATE.
 * TFM_ERR_ARG for flags other than TFM_QUANTIZE_* or without
 * TFM_QUANTIZE_LAYERS;
 * TFM_ERR_STATE for a model already quantized; TFM_ERR_NUMERIC for a NaN or
 * Inf weight, TFM_ERR_SIZE for a weight of more than 131,072 inputs,
 * TFM_ERR_NOMEM. On error the model is as it was. */
TFM_API tfm_status tfm_model_quantize(tfm_model *model, tfm_quantize what);
/** What tfm_model_quantize() (or the file tfm_model_load() read) made
 * int8: TFM_QUANTIZE_ flags, 0 for a float32 model or a NULL one (then
 * with TFM_ERR_NULL). */
TFM_API tfm_quantize tfm_model_quantized(const tfm_model *model);

/* --- fine-tuning: parts left as they are ------------------------------------ */
/** Parts of a model that tfm_model_freeze() keeps out of training:
 * TFM_MODEL_PART_ flags. */
typedef uint32_t tfm_model_parts;
/** The parts, by their parameters' names (every parameter is in one). */
enum {
    /** The token embeddings (src_embedding, tgt_embedding: a tied output
     * projection's weight too), learned positions, embedding scales and
     * norms. */
    TFM_MODEL_PART_EMBEDDINGS = 1,
    TFM_MODEL_PART_ENCODER = 2, /**< the encoder's layers, final norm and position bias */
    TFM_MODEL_PART_DECODER = 4, /**< the decoder's, as the encoder's */
    /** The output projection ("generator"): its bias, and its weight when
     * not tied to the target embedding. */
    TFM_MODEL_PART_OUTPUT = 8
};
/** Freezes exactly the parts named (0: none, the whole model trains):
 * their parameters stop requiring grad, so the tape computes no gradient
 * for them (and none for what only they feed) and an optimizer's step
 * leaves them as they are, weight decay included; the other parameters
 * require grad again. A training choice, not saved with the model.
 * Using an adapter (adapters.h) freezes the whole base, and stopping
 * makes it all trainable again. TFM_ERR_NULL; TFM_ERR_ARG for other
 * flags; TFM_ERR_STATE for a quantized model (it does not train) or one
 * with an adapter in use; nothing changes on error. */
TFM_API tfm_status tfm_model_freeze(tfm_model *model, tfm_model_parts parts);
/** The parts tfm_model_freeze() froze (a part counts when every one of
 * its parameters is frozen); 0 for none or a NULL model (then with
 * TFM_ERR_NULL). */
TFM_API tfm_model_parts tfm_model_frozen(const tfm_model *model);
/** Reads parts named in text, comma-separated ("embeddings,encoder";
 * "embeddings", "encoder", "decoder", "output"; "" for none) into *parts.
 * TFM_ERR_NULL; TFM_ERR_ARG naming a word that is not a part. */
TFM_API tfm_status tfm_model_parts_parse(const char *text, tfm_model_parts *parts);

/* --- files that carry their model --------------------------------------------- */
/** Writes the parameters (by name, as tfm_params_save()) and the options
 * as safetensors "__metadata__": string values under "tfm." keys
 * ("tfm.format_version", "tfm.d_model", "tfm.heads", "tfm.positions" =
 * "learned", …), so tfm_model_load() rebuilds the model from the file
 * alone. The file is a plain safetensors file: PyTorch's safetensors
 * loader reads its tensors, and tfm_params_load() reads it into a model
 * made with the same options. Writing is atomic (see io.h). */
TFM_API tfm_status tfm_model_save(const tfm_model *model, const char *path);
/** The same with the caller's own metadata_count string pairs (a
 * vocabulary, a tokenizer, a recipe), read back with
 * tfm_safetensors_metadata_get; keys starting with "tfm." are libtfm's
 * (TFM_ERR_ARG). */
TFM_API tfm_status tfm_model_save_with_metadata(const tfm_model *model,
                                                const char *path,
                                                int64_t metadata_count,
                                                const char *const *keys,
                                                const char *const *values);
/** A new model, caller-owned, from a file tfm_model_save or
 * tfm_training_save wrote: every option read and range-checked (a missing
 * key, a value of the wrong type or out of range, or a description the
 * file's tensors do not fit is TFM_ERR_FORMAT with the key named; a model
 * larger than the values the file holds is refused before it is
 * allocated), then the parameters loaded strictly. Training state in the
 * file is ignored. The model starts in training mode with its dropout
 * stream as tfm_model_create seeds it; a quantized model's file
 * (tfm_model_quantize) gives the quantized model, in evaluation mode. */
TFM_API tfm_model *tfm_model_load(const char *path);

/** Gives the model its tokenizers, as copies: source turns the encoder's
 * text into ids, target the decoder's ids into text (NULL: source does
 * both, as for a shared vocabulary). They travel with the model:
 * tfm_model_save() and tfm_training_save() write them into the file
 * (metadata "tfm.tokenizer" and "tfm.target_tokenizer", base64 of
 * tfm_tokenizer_save_bytes()) and tfm_model_load() reads them back, so one
 * file is enough to translate text. source and target NULL remove them.
 * TFM_ERR_NULL for a NULL model or a target without a source; TFM_ERR_ARG
 * for a tokenizer with more ids than the vocabulary it feeds (src_vocab,
 * tgt_vocab); nothing changes on error. */
TFM_API tfm_status tfm_model_set_tokenizers(tfm_model *model, const tfm_tokenizer *source,
                                            const tfm_tokenizer *target);
/** The model's tokenizer of its source text (target 0) or target text
 * (target 1: the source's when it has no target one); NULL when it has
 * none or model is NULL (no error is recorded). The model owns it: valid
 * until the model is freed or given other tokenizers. */
TFM_API const tfm_tokenizer *tfm_model_tokenizer(const tfm_model *model, int32_t target);

/** Encodes source text (UTF-8, text[0, length)) into the ids the encoder
 * takes: the source tokenizer's ids between the ids the model's family
 * puts around every source. tfm_model_from_pretrained() sets them as
 * transformers' tokenizers add them: BART `<s>` text `</s>`; Marian and
 * T5 text `</s>`; mBART-50, M2M100 and NLLB [the source language's code]
 * text `</s>` (mBART-cc25's MBartTokenizer and NLLB's legacy_behaviour:
 * text `</s>` [code]). Models made
 * here have none unless given by tfm_model_set_source_template(). As
 * tfm_tokenizer_encode(): *count becomes the number of ids, written only
 * when capacity holds them all, else TFM_ERR_SIZE (ids may be NULL with
 * capacity 0 to ask). TFM_ERR_NULL, TFM_ERR_ARG as there; TFM_ERR_STATE
 * for a model without tokenizers. */
TFM_API tfm_status tfm_model_encode_text(const tfm_model *model, const char *text,
                                         int64_t length, int32_t *ids, int64_t capacity,
                                         int64_t *count);
/** tfm_model_encode_text() cut to capacity ids as transformers'
 * truncation=True with max_length=capacity does: when the text's ids and
 * those put around them do not fit, the text's ids end early and the ids
 * around them stay (BART's `<s>` and `</s>`, a language code). *count
 * becomes the ids written, *cut (NULL: not asked) 1 when the text was
 * cut. Only as much of the text is encoded as those ids need
 * (tfm_tokenizer_encode_truncated()), so a line of any length costs
 * memory and time by capacity. TFM_ERR_SIZE when capacity cannot hold
 * the ids put around a text; otherwise errors as tfm_model_encode_text(). */
TFM_API tfm_status tfm_model_encode_text_truncated(const tfm_model *model, const char *text,
                                                   int64_t length, int32_t *ids,
                                                   int64_t capacity, int64_t *count,
                                                   int32_t *cut);
/** Decodes ids the decoder produced (the decoder start token included or
 * not) into text with the target tokenizer, as transformers' decode with
 * skip_special_tokens: the tokenizer's special ids (unknown, beginning, end,
 * padding), the ids around sources and the target language's code give
 * nothing; an id past the tokenizer's pieces but inside the model's
 * vocabulary (a vocabulary padded past its tokenizer) reads as the unknown
 * piece. Published models whose tokenizer cleans up spaces
 * (clean_up_tokenization_spaces, transformers' default) then lose the
 * space before . , ! ? n't 's 'm 've 're. Text and *length as
 * tfm_tokenizer_decode() (TFM_ERR_SIZE when capacity < *length + 1);
 * TFM_ERR_RANGE for an id outside the model's target vocabulary;
 * TFM_ERR_STATE for a model without tokenizers. */
TFM_API tfm_status tfm_model_decode_text(const tfm_model *model, const int32_t *ids,
                                         int64_t count, char *text, int64_t capacity,
                                         int64_t *length);
/** Sets the ids put around every source text by tfm_model_encode_text():
 * prefix[0, n_prefix) before it and suffix[0, n_suffix) after, at most 4
 * in all (NULL with a count of 0 for none), ids of the source vocabulary.
 * A multilingual model's source language code is then gone: set a
 * language again with tfm_model_set_languages(). Saved with the
 * tokenizers. TFM_ERR_NULL, TFM_ERR_ARG (counts), TFM_ERR_RANGE (ids);
 * nothing changes on error. */
TFM_API tfm_status tfm_model_set_source_template(tfm_model *model, const int32_t *prefix,
                                                 int32_t n_prefix, const int32_t *suffix,
                                                 int32_t n_suffix);
/** Chooses a multilingual model's languages by their codes as its
 * tokenizer spells them ("en_XX" for mBART-50, "eng_Latn" for NLLB,
 * "__en__" or "en" for M2M100): the source code goes where the model's
 * sources carry it (tfm_model_encode_text), and the target code becomes
 * decoding's forced first token (tfm_decode_options_from_model's
 * forced_bos_id), as transformers' src_lang, tgt_lang and
 * forced_bos_token_id. tfm_model_from_pretrained() starts from
 * tokenizer_config.json's src_lang and tgt_lang. NULL leaves that side as
 * it is. Saved with the tokenizers. TFM_ERR_NULL; TFM_ERR_STATE for a
 * model whose sources carry no language (source given) or without
 * tokenizers; TFM_ERR_ARG for a code the tokenizer does not have or a
 * special token such as `</s>` (the message names it); nothing changes on
 * error. */
TFM_API tfm_status tfm_model_set_languages(tfm_model *model, const char *source,
                                           const char *target);

/* --- forwards (masks: see the file's notes) ----------------------------------- */
/** src [B, S] int32 -> memory [B, S, D]. */
TFM_API tfm_tensor *tfm_model_encode(tfm_tape *tape, tfm_model *model,
                                     const tfm_tensor *src,
                                     const tfm_tensor *src_mask,
                                     const tfm_tensor *src_key_padding_mask);
/** tgt [B, T] int32 and memory -> logits [B, T, tgt_vocab]. */
TFM_API tfm_tensor *tfm_model_decode(
    tfm_tape *tape, tfm_model *model, const tfm_tensor *tgt,
    const tfm_tensor *memory, const tfm_tensor *tgt_mask,
    const tfm_tensor *memory_mask, const tfm_tensor *tgt_key_padding_mask,
    const tfm_tensor *memory_key_padding_mask);
/** encode then decode, with nn.Transformer.forward's arguments in order. */
TFM_API tfm_tensor *tfm_model_forward(
    tfm_tape *tape, tfm_model *model, const tfm_tensor *src,
    const tfm_tensor *tgt, const tfm_tensor *src_mask,
    const tfm_tensor *tgt_mask, const tfm_tensor *memory_mask,
    const tfm_tensor *src_key_padding_mask,
    const tfm_tensor *tgt_key_padding_mask,
    const tfm_tensor *memory_key_padding_mask);

/* --- published models ------------------------------------------------------------ */
/** A new model, caller-owned, from a folder as Hugging Face transformers
 * saves an encoder-decoder (save_pretrained with safetensors): config.json
 * and model.safetensors, or model.safetensors.index.json and the shards
 * it names. Families: model_type "marian", "bart", "mbart", "m2m_100"
 * (which NLLB uses) and "t5" (original T5 and v1.1/Flan-T5, d_kv
 * becoming head_dim when num_heads * d_kv is not d_model); activation_function (T5:
 * feed_forward_proj "ACT" or "gated-ACT") relu, gelu, silu/swish, gelu_new
 * or gelu_pytorch_tanh. The options follow the family (norms, positions,
 * offsets) and the config (sizes, scale_embedding, tie_word_embeddings);
 * bos_id is decoder_start_token_id, the first decoder input. Every
 * parameter is read from its published tensor (float32, float16 or
 * bfloat16, read as float32), and every tensor must be one libtfm reads or
 * derives (sinusoidal tables, tied copies). generation_config.json (or
 * config.json's same keys) gives the decoding defaults that
 * tfm_decode_options_from_model() (decode.h) then sets, forced_eos_token_id,
 * early_stopping and renormalize_logits with transformers' beam rules
 * included; they are not saved with the model. The tokenizer files, when
 * the folder has them, become the model's tokenizers (tfm_model_tokenizer()):
 * Marian's source.spm and target.spm numbered by vocab.json, BART's
 * vocab.json and merges.txt, T5's spiece.model with tokenizer_config.json's
 * extra_ids sentinels (100 by default; `<extra_id_0>` the last id, control
 * tokens), and mBART's and M2M100's
 * sentencepiece.bpe.model numbered as tokenizer_config.json's
 * tokenizer_class does (else config.json's, else MBartTokenizer for mbart,
 * M2M100Tokenizer for m2m_100): MBartTokenizer, MBart50Tokenizer and
 * NllbTokenizer give fairseq's ids (`<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, each
 * later piece its id + 1, then the 25, 52 or 202 language codes such as
 * "en_XX" or "eng_Latn", then `<mask>`); M2M100Tokenizer (which needs
 * vocab.json) gives vocab.json's ids, then "__en__"-style codes
 * (language_codes "m2m100" or "wmt21"), then num_madeup_words ids that
 * decode as `<unk>`. The codes and `<mask>` are control tokens:
 * tfm_tokenizer_piece_to_id() finds them, encoding never gives them and
 * decoding drops them. The ids the family puts around a source and the
 * languages (tokenizer_config.json's src_lang and tgt_lang) are set for
 * tfm_model_encode_text(). The model starts in evaluation mode. NULL with
 * TFM_ERR_NULL, TFM_ERR_IO (a file missing or
 * unreadable), TFM_ERR_FORMAT (a family, option, value or tensor libtfm
 * does not support or that contradicts the config: the message names it,
 * a tokenizer_class too), TFM_ERR_ARG (a tokenizer larger than the
 * model's vocabulary), TFM_ERR_SIZE or TFM_ERR_NOMEM. */
TFM_API tfm_model *tfm_model_from_pretrained(const char *folder);

/** Saves a model tfm_model_from_pretrained() loaded (and perhaps trained
 * since) back in its family's layout, as transformers' save_pretrained()
 * writes it, so transformers, PEFT, CTranslate2's converters and the hub
 * read it unchanged: config.json and generation_config.json as they were
 * read (the architecture and decoding defaults do not change after
 * loading), the parameters under their published names in
 * model.safetensors (tied copies such as lm_head left out, as
 * transformers leaves them; a published file's computed sinusoidal
 * tables are computed again by every reader), and the tokenizer files as
 * loaded. Past max_shard_bytes of tensors (0: transformers' 5 GB) the
 * tensors go in shards model-0000N-of-0000M.safetensors named by
 * model.safetensors.index.json. Loading the folder again gives the same
 * model bit for bit.
 *
 * Each file is saved atomically. A new folder appears whole or not at
 * all (written beside it, then renamed); in an existing folder config.json
 * is removed first and written last, so a failed save leaves a folder
 * that tfm_model_from_pretrained() refuses rather than a mixture, and the
 * other layout's tensor files (a single file where shards now go, or old
 * shards) are removed. Adapters (adapters.h) are not saved: the base
 * weights are; tfm_model_save_adapter() writes an adapter's own folder,
 * tfm_model_merge_adapter() puts it in the weights. TFM_ERR_NULL,
 * TFM_ERR_ARG (max_shard_bytes < 0, an empty or too long path),
 * TFM_ERR_STATE (a model not loaded from a published folder, one whose
 * forwards apply an adapter (tfm_model_use_adapter: the folder would not
 * compute what it computes), a quantized one, tokenizers replaced since
 * loading, an m2m_100 model whose generator bias is no longer zero: none
 * of them can be written in the family's layout), TFM_ERR_IO,
 * TFM_ERR_NOMEM, TFM_ERR_SYNC (the folder is written and in place, but
 * syncing its parent failed). Saved with tfm_model_save() and loaded
 * again, a model no longer knows its family. */
TFM_API tfm_status tfm_model_save_pretrained(const tfm_model *model, const char *folder,
                                             int64_t max_shard_bytes);

#ifdef __cplusplus
}
#endif

#endif
