/* The linear op's fused residual form, for the transformer layers. */
#ifndef TFM_OPS_LINEAR_H
#define TFM_OPS_LINEAR_H

#include "autograd/tape.h"

/* residual + dropout(x W^T + b, p from rng; p = 0: none), keeping only the
 * sum on the tape. op names the caller in errors. */
tfm_tensor *tfm__linear_residual(tfm_tape *tape, const char *op, const tfm_tensor *x,
                                 const tfm_tensor *weight, const tfm_tensor *bias, float p,
                                 tfm_rng *rng, const tfm_tensor *residual);

#endif
