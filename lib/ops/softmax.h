/* Softmax's row kernels, shared with the fused attention op. */
#ifndef TFM_OPS_SOFTMAX_H
#define TFM_OPS_SOFTMAX_H

#include "core/broadcast.h"

/* The broadcast of mask (operand b) onto x, which must keep x's shape;
 * 0, or -1 with TFM_ERR_SHAPE set. */
int tfm__mask_broadcast(const char *op, const tfm_tensor *x, const tfm_tensor *mask,
                        tfm_broadcast *bc);
/* Offset of the mask row that row r of x reads; within the row the mask
 * advances by bc->stride_b[3] (0 or 1). Inline: the kernels call it. */
static inline int64_t tfm__mask_row(const tfm_broadcast *bc, int64_t r)
{
    int64_t d2 = r % bc->shape[2];
    int64_t d1 = (r / bc->shape[2]) % bc->shape[1];
    int64_t d0 = r / (bc->shape[2] * bc->shape[1]);
    return d0 * bc->stride_b[0] + d1 * bc->stride_b[1] + d2 * bc->stride_b[2];
}
/* y = softmax(x masked) for row r of x (n values); x may alias y. mask may
 * be NULL; otherwise int32 keep or float32 additive, as tfm_softmax: a
 * masked position's y is 0, and a row with nothing kept is all zeros. */
void tfm__softmax_row(const float *x, float *y, int64_t n, const tfm_tensor *mask,
                      const tfm_broadcast *bc, int64_t r);
/* dx (+)= the gradient of a row's input (masked or not) from its output y
 * and output gradient g; dx may alias g when not accumulating. */
void tfm__softmax_grad_row(const float *y, const float *g, int64_t n, float *dx, int accumulate);
/* log(sum(exp(x[0, n)))), n >= 1, and into *sum (when not NULL) the sum
 * of x, which label smoothing needs beside it; NaN or infinite when x is
 * not usable. */
double tfm__log_sum_exp(const float *x, int64_t n, double *sum);
/* x[0, n) as log probabilities, x - log_sum_exp(x) rounded from double,
 * unless log_sum_exp(x) is not finite (x is then left as it is); that
 * log_sum_exp is returned. */
double tfm__log_normalise(float *x, int64_t n);
/* The first j of x[0, n) whose value is the largest, n >= 1, as the loop
 * `if (x[j] > x[best]) best = j` finds it (0 when x[0] is NaN, later NaNs
 * passed over). */
int64_t tfm__argmax(const float *x, int64_t n);

#endif
