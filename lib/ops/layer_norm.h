/* The layer-norm kernel, shared by the op and the step-by-step decoder. */
#ifndef TFM_OPS_LAYER_NORM_H
#define TFM_OPS_LAYER_NORM_H

#include <stdint.h>

#include "tfm/ops.h"

/* y = (x - mean) / sqrt(var + eps) * w + b over each of rows rows of n
 * values (w, b may be NULL; rms: the mean taken as 0, RMS norm); the means
 * and 1/std go to mean and rstd when they are not NULL. */
void tfm__layer_norm_rows(const float *x, int64_t rows, int64_t n, const float *w,
                          const float *b, float eps, int rms, float *y, float *mean,
                          float *rstd);

/* tfm_layer_norm (rms: tfm_rms_norm) whose output, when recorded, is not kept but computed
 * again in the backward (TFM_RECOMPUTE_NORM_OUTPUTS): for an output read by
 * nothing past the next such one in the forward (tfm__new_recomputed). */
tfm_tensor *tfm__layer_norm_recomputed(tfm_tape *tape, const char *op, const tfm_tensor *x,
                                       const tfm_tensor *weight, const tfm_tensor *bias,
                                       float eps, int rms);

#endif
