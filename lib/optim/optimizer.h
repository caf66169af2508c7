/* What a training state (lib/model/training.c) saves and restores of an
 * optimizer, shared with tfm_optimizer_save and tfm_optimizer_load. */
#ifndef TFM_OPTIM_OPTIMIZER_H
#define TFM_OPTIM_OPTIMIZER_H

#include "core/tensor.h"
#include "io/safetensors.h"
#include "tfm/optim.h"

/* Tensor headers over the optimizer's own memory, named prefix + "kind",
 * "step", "numel", "lr", "weight_decay", "m", "v" or "momentum"; valid while
 * the optimizer and the record are. */
#define TFM__OPTIMIZER_TENSORS 7
typedef struct tfm__optimizer_record {
    int count;
    int32_t kind, step[2], numel[2];
    float lr;
    tfm_tensor headers[TFM__OPTIMIZER_TENSORS];
    const tfm_tensor *tensors[TFM__OPTIMIZER_TENSORS];
    char name_text[TFM__OPTIMIZER_TENSORS][64];
    const char *names[TFM__OPTIMIZER_TENSORS];
} tfm__optimizer_record;

void tfm__optimizer_describe(const tfm_optimizer *optimizer, const char *prefix,
                           tfm__optimizer_record *record);

/* A state read and checked against an optimizer, not yet applied. */
typedef struct tfm__optimizer_loaded {
    int64_t steps;
    float lr;
    tfm_tensor *weight_decay;
    tfm_tensor *blocks[2];
} tfm__optimizer_loaded;

/* Reads the state under prefix; ctx ("op: \"path\"") starts each message.
 * On error nothing is held. */
tfm_status tfm__optimizer_read(const char *ctx, const tfm_optimizer *optimizer,
                               const tfm_safetensors *file, const char *prefix,
                               tfm__optimizer_loaded *loaded);
/* Applies a state tfm__optimizer_read accepted, and frees it. */
void tfm__optimizer_restore(tfm_optimizer *optimizer, tfm__optimizer_loaded *loaded);
void tfm__optimizer_loaded_free(tfm__optimizer_loaded *loaded);

tfm_params *tfm__optimizer_params(const tfm_optimizer *optimizer);

#endif
