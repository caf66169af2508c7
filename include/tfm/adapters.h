/** @file
 * libtfm low-rank adapters (LoRA, as PEFT's): small matrices A [rank, in]
 * and B [out, rank] beside chosen linear weights W of a model's encoder
 * and decoder layers, so that each adapted product is
 *
 *     y = x W^T + b + (alpha / rank) * dropout(x) A^T B^T
 *
 * A model holds any number of named adapters over its one copy of the
 * weights. tfm_model_use_adapter picks the one the model's forward calls
 * (tfm_model_forward, _encode, _decode) apply; a decoding or a translation
 * names its own (tfm_decode_options.adapter, tfm_translate_options.adapter),
 * so concurrent requests may use different adapters of one model. Only an
 * adapter's parameters train: create the optimizer over
 * tfm_model_adapter_params(). The base may be float32 or int8-quantized
 * (tfm_model_quantize).
 *
 * Files are PEFT's: a folder with adapter_config.json and
 * adapter_model.safetensors, whose tensors are named
 * base_model.model.\<module\>.lora_A.weight / .lora_B.weight after the
 * module paths of the published family's transformers class (a model from
 * tfm_model_from_pretrained), or after libtfm's own parameter names.
 *
 * Errors: as in model.h. Threads: adding, loading, merging, removing and
 * choosing adapters change the model: not while another thread uses it. */
#ifndef TFM_ADAPTERS_H
#define TFM_ADAPTERS_H

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Which linears an adapter adapts (tfm_adapter_options.targets). */
typedef uint32_t tfm_adapter_targets;
#define TFM_ADAPT_SELF_Q ((tfm_adapter_targets)1u << 0)    /**< self-attention's queries */
#define TFM_ADAPT_SELF_K ((tfm_adapter_targets)1u << 1)    /**< keys */
#define TFM_ADAPT_SELF_V ((tfm_adapter_targets)1u << 2)    /**< values */
#define TFM_ADAPT_SELF_O ((tfm_adapter_targets)1u << 3)    /**< output projection */
#define TFM_ADAPT_CROSS_Q ((tfm_adapter_targets)1u << 4)   /**< cross-attention's (decoder) */
#define TFM_ADAPT_CROSS_K ((tfm_adapter_targets)1u << 5)   /**< cross-attention's keys */
#define TFM_ADAPT_CROSS_V ((tfm_adapter_targets)1u << 6)   /**< cross-attention's values */
#define TFM_ADAPT_CROSS_O ((tfm_adapter_targets)1u << 7)   /**< cross-attention's output */
#define TFM_ADAPT_FF_IN ((tfm_adapter_targets)1u << 8)     /**< linear1 (fc1, wi, wi_0) */
#define TFM_ADAPT_FF_OUT ((tfm_adapter_targets)1u << 9)    /**< linear2 (fc2, wo) */
#define TFM_ADAPT_Q (TFM_ADAPT_SELF_Q | TFM_ADAPT_CROSS_Q) /**< both attentions' */
#define TFM_ADAPT_K (TFM_ADAPT_SELF_K | TFM_ADAPT_CROSS_K) /**< both attentions' keys */
#define TFM_ADAPT_V (TFM_ADAPT_SELF_V | TFM_ADAPT_CROSS_V) /**< both attentions' values */
#define TFM_ADAPT_O (TFM_ADAPT_SELF_O | TFM_ADAPT_CROSS_O) /**< both attentions' outputs */

/** An adapter's shape: fill with tfm_adapter_options_init(), then set
 * what differs (the struct may grow at its end; struct_size says which
 * fields a caller knows). */
typedef struct tfm_adapter_options {
    uint32_t struct_size;       /**< set by tfm_adapter_options_init */
    int32_t rank;               /**< r, 1 to 512; default 8 */
    float alpha;                /**< lora_alpha: the terms are scaled by alpha / rank; default 8 */
    float dropout;              /**< lora_dropout on the adapter's input, in [0, 1); default 0 */
    tfm_adapter_targets targets; /**< TFM_ADAPT_*; default TFM_ADAPT_Q | TFM_ADAPT_V */
    /** The layers adapted (PEFT's layers_to_transform: index l picks
     * encoder layer l and decoder layer l), n_layers of them; 0 and NULL
     * (default): every layer. Copied. */
    int32_t n_layers;
    const int32_t *layers; /**< the n_layers layer indices, or NULL */
} tfm_adapter_options;

/** Writes the defaults into options; use the macro. */
TFM_API void tfm_adapter_options_init_sized(tfm_adapter_options *options,
                                            uint32_t struct_size);
/** tfm_adapter_options_init_sized() with the caller's struct size. */
#define tfm_adapter_options_init(options)                                     \
    tfm_adapter_options_init_sized((options), (uint32_t)sizeof *(options))

/** Adds an adapter named name (1 to 63 bytes, unique in the model)
 * initialised as PEFT does: A uniform in +-1/sqrt(in) (kaiming-uniform
 * with a = sqrt(5)) from the model's random stream, B zeros, so the model
 * computes what it did. options NULL: the defaults. TFM_ERR_ARG for a
 * rank, alpha, dropout, target or layer out of range, or targets naming
 * no linear of the model (cross-attention without decoder layers). */
TFM_API tfm_status tfm_model_add_adapter(tfm_model *model, const char *name,
                                         const tfm_adapter_options *options);
/** Removes the adapter (and stops using it). TFM_ERR_ARG when the model
 * has none by that name. */
TFM_API tfm_status tfm_model_remove_adapter(tfm_model *model, const char *name);
/** How many adapters the model holds (0, with TFM_ERR_NULL, for a NULL model). */
TFM_API int32_t tfm_model_adapter_count(const tfm_model *model);
/** The index-th adapter's name (0 to count - 1, in the order added), owned
 * by the model until the adapter is removed; NULL with TFM_ERR_RANGE outside. */
TFM_API const char *tfm_model_adapter_name(const tfm_model *model, int32_t index);
/** The adapter's options (rank, alpha, dropout, targets, layers as given;
 * layers points into the model). */
TFM_API tfm_status tfm_model_adapter_options(const tfm_model *model, const char *name,
                                             tfm_adapter_options *options);

/** The adapter the model's forward calls apply from now on; NULL: none.
 * With an adapter in use, a quantized model may be set to training (only
 * the adapter's parameters can then train). */
TFM_API tfm_status tfm_model_use_adapter(tfm_model *model, const char *name);
/** The adapter in use, or NULL. */
TFM_API const char *tfm_model_adapter_in_use(const tfm_model *model);

/** The adapter's parameters (each A then B, named as in its file), owned
 * by the model: what an optimizer over the adapter alone is created over. */
TFM_API tfm_params *tfm_model_adapter_params(tfm_model *model, const char *name);

/** Writes folder/adapter_config.json and folder/adapter_model.safetensors
 * as PEFT's save_pretrained does (the folder is created if missing; each
 * file atomically; over an earlier adapter the old config goes first and
 * the new one comes last, so a failed save never leaves new weights beside
 * an old config). base_model_name_or_path is written as given (NULL:
 * null). */
TFM_API tfm_status tfm_model_save_adapter(const tfm_model *model, const char *name,
                                          const char *folder,
                                          const char *base_model_name_or_path);
/** Adds an adapter named name from a PEFT LoRA folder for this model: its
 * config's r, lora_alpha (use_rslora: alpha / sqrt(r)), lora_dropout,
 * target_modules (a list of module names or suffixes, as PEFT matches
 * them; PEFT's string form, a regular expression, is refused) and layers_to_transform; every tensor of the file must be one of
 * the adapter's, of its shape. TFM_ERR_FORMAT naming the key or tensor
 * for what libtfm cannot apply as PEFT would (bias other than "none",
 * fan_in_fan_out, DoRA, rank or alpha patterns, modules_to_save, a
 * target module the model lacks); nothing added on any error. */
TFM_API tfm_status tfm_model_load_adapter(tfm_model *model, const char *name,
                                          const char *folder);

/** Adds the adapter into the weights it adapts (W += alpha / rank * B A,
 * PEFT's merge_and_unload) and removes it. TFM_ERR_STATE for a quantized
 * model (its int8 weights would not follow). */
TFM_API tfm_status tfm_model_merge_adapter(tfm_model *model, const char *name);

#ifdef __cplusplus
}
#endif

#endif
