/* The record behind tfm_model, for the decoders that run its layers step
 * by step. */
#ifndef TFM_MODEL_MODEL_H
#define TFM_MODEL_MODEL_H

#include "tfm/decode.h"
#include "tfm/model.h"

/* A published model's decoding defaults (generation_config.json), in
 * tfm_decode_options' terms; tfm_decode_options_from_model copies them. */
typedef struct tfm__generation {
    tfm_decode_strategy strategy;
    int32_t max_length, min_length;   /* -1: not given */
    int32_t beam_size, top_k, no_repeat_ngram_size, forced_bos_id;
    float length_penalty, repetition_penalty, temperature, top_p;
    int32_t *bad_words, *bad_word_lengths; /* owned */
    int32_t n_bad_words;
    int32_t *eos_ids;                 /* owned: the end tokens past eos_id */
    int32_t n_eos_ids;
} tfm__generation;

/* Frees a generation record and what it owns; NULL is a no-op. */
void tfm__generation_free(tfm__generation *g);

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
    tfm__generation *generation;    /* NULL unless published with defaults; not saved */
    tfm_tokenizer *tokenizers[2];   /* source, target (NULL: the source's); saved with it */
};

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

#endif
