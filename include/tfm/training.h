/** @file
 * libtfm training states: everything a training run needs to go on
 * exactly where it stopped, in one file and one call each way. The file
 * is a model file (model.h: parameters and options, so tfm_model_load
 * reads it) plus the optimizer's state (step count, so the schedule's
 * position, base learning rate, weight decays, moments) under "tfm."
 * tensor names, the model's dropout stream and the caller's own random
 * streams (the data order, say) as "tfm." metadata, and the caller's own
 * metadata pairs.
 *
 * Resuming is exact: N steps, tfm_training_save, a new process that makes
 * the same model and optimizer (tfm_model_load and tfm_optimizer_create
 * with the same options), tfm_training_load, N more steps: the same bits
 * as 2N steps without a stop.
 *
 * Errors and threads: as for the model and the optimizer (model.h,
 * optim.h): one thread at a time for the model, optimizer and streams
 * given; a failed save leaves the previous file, a failed load changes
 * nothing. */
#ifndef TFM_TRAINING_H
#define TFM_TRAINING_H

#include "model.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/** optimizer must be over tfm_model_params(model), or over the adapter
 * in use (adapters.h: tfm_model_adapter_params of
 * tfm_model_adapter_in_use), whose parameters the file then also holds
 * (the base, frozen, is written but not read back; the model may be
 * quantized). rngs: rng_count streams of the caller's (may be 0 and NULL), restored in the same order. The
 * metadata pairs are the caller's (keys starting with "tfm." are
 * libtfm's: TFM_ERR_ARG). Written atomically (io.h). */
TFM_API tfm_status tfm_training_save(const char *path, const tfm_model *model,
                                     const tfm_optimizer *optimizer,
                                     int32_t rng_count, const tfm_rng *const *rngs,
                                     int64_t metadata_count,
                                     const char *const *keys,
                                     const char *const *values);

/** Restores the parameters, the optimizer's state, the model's dropout
 * stream and the caller's streams from a tfm_training_save file. Checked
 * whole first: the model's options must equal the file's (TFM_ERR_ARG
 * naming the first that differs), the optimizer's kind and size must fit,
 * rng_count must equal the file's; on any error nothing changes. The
 * caller's metadata reads back with tfm_safetensors_metadata_get. */
TFM_API tfm_status tfm_training_load(const char *path, tfm_model *model,
                                     tfm_optimizer *optimizer, int32_t rng_count,
                                     tfm_rng *const *rngs);

#ifdef __cplusplus
}
#endif

#endif
