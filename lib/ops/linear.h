/* The linear op's fused residual form, for the transformer layers. */
#ifndef TFM_OPS_LINEAR_H
#define TFM_OPS_LINEAR_H

#include "autograd/tape.h"
#include "core/gemm_packed.h"

/* A weight packed with a bias for the linear ops' products, which a
 * decoding's tape lists for its encoder's weights (tfm__tape_set_packed):
 * a BLAS packs the weight at every call. The ops on that tape read it
 * instead of the weight for products with that bias (NULL: none) only. */
typedef struct tfm__packed_linear {
    const tfm_tensor *weight;
    tfm__packed product;
    const float *bias;
} tfm__packed_linear;

/* residual + dropout(x W^T + b, p from rng; p = 0: none), keeping only the
 * sum on the tape. op names the caller in errors. */
tfm_tensor *tfm__linear_residual(tfm_tape *tape, const char *op, const tfm_tensor *x,
                                 const tfm_tensor *weight, const tfm_tensor *bias, float p,
                                 tfm_rng *rng, const tfm_tensor *residual);

/* One linear of a fused pair: weight, bias (or NULL), and the dropout
 * after it (p, applied when training, drawn from rng). */
typedef struct tfm__linear_params {
    const tfm_tensor *weight, *bias;
    float p;
    int training;
    tfm_rng *rng;
} tfm__linear_params;

/* residual + dropout2(dropout1(relu(x W1^T + b1)) W2^T + b2), the ReLU
 * feed-forward sublayer, with its hidden layer in the tape's recompute
 * block instead of the arena: the backward computes it again (one more
 * x W1^T) before the second linear's. The same bits as
 * tfm_linear_relu_dropout and tfm__linear_residual apart. */
tfm_tensor *tfm__feed_forward_residual(tfm_tape *tape, const char *op, const tfm_tensor *x,
                                       const tfm__linear_params *first,
                                       const tfm__linear_params *second,
                                       const tfm_tensor *residual);

#endif
