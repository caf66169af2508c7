/* The pointwise activations shared by the ops, the feed-forward layers and
 * the step-by-step decoder, so all three compute the same bits. */
#ifndef TFM_OPS_ACTIVATION_H
#define TFM_OPS_ACTIVATION_H

#include "tfm/nn.h"
#include "tfm/ops.h"

/* tanh's kind, past the tfm_activation values (it is an op, not a
 * feed-forward activation). */
#define TFM__ACTIVATION_TANH 100

/* out[i] = activation(x[i]) for n floats (out may be x). */
void tfm__activation_rows(int32_t kind, const float *x, int64_t n, float *out);

/* The activation of x on the tape, for op (the public call). */
tfm_tensor *tfm__activation(tfm_tape *tape, const char *op, int32_t kind, const tfm_tensor *x);

#endif
