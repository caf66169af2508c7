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
    tfm_layer *src_embedding_norm, *tgt_embedding_norm; /* NULL without embedding_norm */
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

#endif
