/* The record behind tfm_model, for the decoders that run its layers step
 * by step. */
#ifndef TFM_MODEL_MODEL_H
#define TFM_MODEL_MODEL_H

#include "tfm/model.h"

struct tfm_model {
    tfm_model_options options;
    tfm_block_options block;        /* every layer's, from the options */
    tfm_params *params;
    tfm_rng *rng;                   /* initialisation, then dropout */
    tfm_layer *src_embedding, *tgt_embedding; /* the same layer when shared */
    tfm_layer *src_positions, *tgt_positions;
    tfm_tensor *src_scale, *tgt_scale;        /* trainable embedding scales */
    tfm_layer *dropout;
    tfm_layer *encoder, *decoder, *generator;
    tfm_tokenizer *tokenizers[2];   /* source, target (NULL: the source's); saved with it */
};

/* tfm_model_create for op, with at most max_params parameter values (0:
 * any number), so a model described by a file cannot allocate more than
 * the file holds. */
tfm_model *tfm__model_create(const char *op, const tfm_model_options *options,
                             int64_t max_params);

/* tfm_model_decode, the last decoder layer's cross-attention weights [B,
 * heads, T, S] (tape-owned) into cross_weights: decoding's alignments. */
tfm_tensor *tfm__model_decode_attending(tfm_tape *tape, tfm_model *model, const tfm_tensor *tgt,
                                        const tfm_tensor *memory, const tfm_tensor *tgt_mask,
                                        const tfm_tensor *memory_mask,
                                        tfm_tensor **cross_weights);

#endif
