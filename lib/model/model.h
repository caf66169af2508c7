/* The record behind tfm_model, for the decoders that run its layers step
 * by step. */
#ifndef TFM_MODEL_MODEL_H
#define TFM_MODEL_MODEL_H

#include "tfm/model.h"

/* A published model's decoding defaults (translate/generation.h); not
 * saved with the model. */
struct tfm__generation;

/* The ids a model puts around every source text, and the languages of a
 * multilingual one (text.c); saved with its tokenizers. */
#define TFM__TEMPLATE_MAX 4
typedef struct tfm__text_template {
    int32_t ids[TFM__TEMPLATE_MAX]; /* the prefix's, then the suffix's */
    int32_t n_prefix, n_ids;
    int32_t language;        /* where in ids the source language's code is, or -1 */
    int32_t target_language; /* the target language's code (decoding's forced
                              * first token), or -1 */
    int32_t strip;           /* drop spaces around decoded text (SentencePiece families) */
    int32_t clean_up;        /* transformers' clean_up_tokenization_spaces */
    int32_t leading_code;    /* a leading ">>xx<<" is one token (MarianTokenizer) */
} tfm__text_template;
#define TFM__NO_TEXT_TEMPLATE ((tfm__text_template){.language = -1, .target_language = -1})

struct tfm_model {
    tfm_model_options options;
    tfm_block_options block;        /* every layer's, from the options */
    tfm_params *params;
    tfm_rng *rng;                   /* initialisation, then dropout */
    tfm_layer *src_embedding, *tgt_embedding; /* the same layer when shared */
    tfm_layer *src_positions, *tgt_positions;
    tfm_layer *src_embedding_norm, *tgt_embedding_norm; /* NULL without embedding_norm */
    tfm_tensor *src_scale, *tgt_scale;        /* trainable embedding scales */
    tfm_layer *dropout;
    tfm_layer *encoder, *decoder, *generator;
    /* relative_attention_buckets' tables [buckets, heads] (store-owned), or NULL */
    tfm_tensor *src_relative_bias, *tgt_relative_bias;
    struct tfm__generation *generation; /* NULL unless published; not saved */
    /* a published folder's family and files, for tfm_model_save_pretrained
     * (model/families.h); NULL unless published; not saved */
    struct tfm__published *published;
    tfm_tokenizer *tokenizers[2];   /* source, target (NULL: the source's); saved with it */
    tfm__text_template text;        /* around the tokenizers' ids; saved with them */
    /* tfm_model_quantize: what it turned to int8 (TFM_QUANTIZE_*, 0 for
     * none), and the n_int8 weights the quantized tensors point into */
    uint32_t quantized;
    struct tfm__int8_weight **int8;
    int64_t n_int8;
    /* low-rank adapters over the weights (adapters.c), and the one the
     * model's forwards apply (NULL: none) */
    struct tfm__adapter **adapters;
    int32_t n_adapters;
    struct tfm__adapter *in_use;
};

/* A linear weight tfm_model_quantize turns to int8: the weight, its bias
 * (or NULL), its parameter name, and its parts (a fused attention's 3). */
typedef struct tfm__quantizable {
    tfm_tensor *weight;
    const tfm_tensor *bias;
    const char *name;
    int32_t parts;
} tfm__quantizable;

/* The weights `what` (TFM_QUANTIZE_*) quantizes into list (NULL: counted
 * only), in the order of the model's layers; their count. */
int64_t tfm__model_quantizable(const tfm_model *m, uint32_t what, tfm__quantizable *list);

/* Quantizes the weights `what` names, from their float32 values (values
 * NULL) or from the int8 values and per-channel scales given for each
 * (values[i], scales[i] of list entry i: a file's), which then also
 * become the float32 parameters' values (tfm__int8_replaces_float's). All
 * or nothing; the model is then in evaluation mode for good. */
tfm_status tfm__model_quantize(const char *op, tfm_model *m, uint32_t what,
                               const int8_t *const *values, const float *const *scales);

/* A quantized model's file (quantize.c has the format): what was
 * quantized as "tfm.int8" writes it ("layers", "layers,generator"; NULL
 * for other flags); the tensors that stand for the quantized weights
 * (tensors[i] named names[i]), made from the model's int8 weights; and the
 * weights read back from a file into a model made from its description
 * (ctx starts messages: TFM_ERR_FORMAT for missing or misshapen tensors
 * and unusable values). */
typedef struct tfm__int8_tensors {
    int64_t count;
    const char **names;
    const tfm_tensor **tensors;
    tfm_tensor *headers;
    char *text;
    void *values;
} tfm__int8_tensors;
const char *tfm__int8_what_name(uint32_t what);
tfm_status tfm__int8_tensors_make(const char *op, const tfm_model *m, tfm__int8_tensors *t);
void tfm__int8_tensors_free(tfm__int8_tensors *t);
struct tfm_safetensors;
tfm_status tfm__int8_read(const char *op, const char *ctx, tfm_model *m, uint32_t what,
                          const struct tfm_safetensors *file);

/* Whether w's int8 values stand for its float32 ones (a file holds only
 * them, a load makes the float32 values from them): a quantized weight,
 * but not a tied generator's table, whose float32 values the embedding
 * looks up (the file holds both, a load takes them as they are). */
int tfm__int8_replaces_float(const tfm_model *m, const tfm_tensor *w);

/* Whether any of the quantized model's int8 weights multiplies in int8 on
 * this CPU (core/gemm_int8.h: tfm__int8_pays); 0 for a float32 model. */
int tfm__model_int8_pays(const tfm_model *m);

/* Frees the int8 weights (the model's tensors must not be used after). */
void tfm__model_free_int8(tfm_model *m);

/* TFM_ERR_STATE "op: the model is quantized (...)" when it is; else TFM_OK. */
tfm_status tfm__model_refuse_quantized(const char *op, const tfm_model *m);

/* tfm_model_create for op, with at most max_params parameter values (0:
 * any number), so a model described by a file cannot allocate more than
 * the file holds. */
tfm_model *tfm__model_create(const char *op, const tfm_model_options *options,
                             int64_t max_params);

/* What generator_rescale multiplies the decoder's output by: d_model^-0.5. */
float tfm__generator_rescale(const tfm_model *model);

/* tfm_model_decode, the last decoder layer's cross-attention weights [B,
 * heads, T, S] (tape-owned) into cross_weights: decoding's alignments. */
tfm_tensor *tfm__model_decode_attending(tfm_tape *tape, tfm_model *model, const tfm_tensor *tgt,
                                        const tfm_tensor *memory, const tfm_tensor *tgt_mask,
                                        const tfm_tensor *memory_mask,
                                        tfm_tensor **cross_weights);

/* The adapter set named name (adapters.c), NULL with TFM_ERR_ARG naming op
 * when the model has none by that name. */
struct tfm__adapter_set;
const struct tfm__adapter_set *tfm__model_adapter(const char *op, const tfm_model *m,
                                                 const char *name);
/* The adapter the model's forwards apply, NULL for none. */
const struct tfm__adapter_set *tfm__model_adapter_in_use(const tfm_model *m);
void tfm__model_free_adapters(tfm_model *m);
/* The parameters of the adapter in use, or NULL. */
tfm_params *tfm__model_adapter_params_in_use(const tfm_model *m);
/* The module path of a published model's linear, named ours in libtfm
 * ("decoder.layers.0.multihead_attn.q_proj"), in its family's
 * transformers class ("model.decoder.layers.0.encoder_attn.q_proj"), into
 * out; -1 when the model is not published or has no such module. */
int tfm__published_module(const tfm_model *m, const char *ours, char *out, size_t size);
#endif
