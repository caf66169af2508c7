/** @file
 * libtfm differentiable ops.
 *
 * Every op takes the tape that owns its result and returns a new tape-owned
 * tensor, or NULL with tfm_last_error() set. An op given a NULL input returns
 * NULL and keeps the error that made that input NULL, so a chain of ops can
 * be checked once at its end. Axes may be negative (counted from the end).
 * Inputs are float32 unless said otherwise. Ops never change their inputs
 * and never take ownership of them; inputs may be caller-owned, owned by
 * this tape or (as constants) by another tape, or parameters.
 *
 * Errors: TFM_ERR_NULL (a NULL tape), TFM_ERR_SHAPE and TFM_ERR_DTYPE
 * (inputs that do not fit), TFM_ERR_RANGE (ids, targets), TFM_ERR_STATE
 * (a stale tape-owned input, see tape.h), TFM_ERR_NOMEM.
 *
 * Threads: one thread at a time per tape; kernels may run on libtfm's own
 * threads (tfm_set_num_threads()) and BLAS's, invisibly to the caller. */
#ifndef TFM_OPS_H
#define TFM_OPS_H

#include "tape.h"

#ifdef __cplusplus
extern "C" {
#endif

/* --- linear algebra -------------------------------------------------------- */
/** op(a) @ op(b), op = transpose of the last two axes when its flag is set.
 * a is [..., M, K], b is [..., K, N] (before the flags); the leading axes are
 * equal, or one side is 2-D and is shared by the whole batch (x @ W^T).
 * Always computed with cblas_sgemm. Result [..., M, N]. */
TFM_API tfm_tensor *tfm_matmul(tfm_tape *tape, const tfm_tensor *a,
                               const tfm_tensor *b, int32_t transpose_a,
                               int32_t transpose_b);

/** x @ weight^T + bias (torch.nn.functional.linear), in one GEMM: x is
 * [..., in], weight [out, in], bias [out] or NULL. Result [..., out]. */
TFM_API tfm_tensor *tfm_linear(tfm_tape *tape, const tfm_tensor *x,
                               const tfm_tensor *weight, const tfm_tensor *bias);
/** relu(tfm_linear(...)), keeping one tensor instead of three. */
TFM_API tfm_tensor *tfm_linear_relu(tfm_tape *tape, const tfm_tensor *x,
                                    const tfm_tensor *weight,
                                    const tfm_tensor *bias);
/** tfm_dropout(tfm_linear_relu(...), p, training, rng) as one op: the same
 * mask from the same rng, one tensor kept instead of four. */
TFM_API tfm_tensor *tfm_linear_relu_dropout(tfm_tape *tape, const tfm_tensor *x,
                                            const tfm_tensor *weight,
                                            const tfm_tensor *bias, float p,
                                            int32_t training, tfm_rng *rng);

/* --- elementwise ------------------------------------------------------------ */
/** NumPy broadcasting: shapes are aligned on the right and each pair of sizes
 * is equal or one of them is 1 (a bias [N] adds to [..., N]). */
TFM_API tfm_tensor *tfm_add(tfm_tape *tape, const tfm_tensor *a,
                            const tfm_tensor *b);
/** a - b, broadcasting as tfm_add(). */
TFM_API tfm_tensor *tfm_sub(tfm_tape *tape, const tfm_tensor *a,
                            const tfm_tensor *b);
/** a * b elementwise, broadcasting as tfm_add(). */
TFM_API tfm_tensor *tfm_mul(tfm_tape *tape, const tfm_tensor *a,
                            const tfm_tensor *b);
/** x * factor. */
TFM_API tfm_tensor *tfm_scale(tfm_tape *tape, const tfm_tensor *x,
                              float factor);
/** x where mask == 0, value where mask != 0 (PyTorch's masked_fill). mask is
 * int32 and broadcasts to x. */
TFM_API tfm_tensor *tfm_masked_fill(tfm_tape *tape, const tfm_tensor *x,
                                    const tfm_tensor *mask, float value);

/* --- activations ------------------------------------------------------------ */
/** max(x, 0). */
TFM_API tfm_tensor *tfm_relu(tfm_tape *tape, const tfm_tensor *x);
/** Exact GELU, x * Phi(x) with erf, as torch.nn.functional.gelu. */
TFM_API tfm_tensor *tfm_gelu(tfm_tape *tape, const tfm_tensor *x);
/** GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
 * as torch.nn.functional.gelu(x, approximate="tanh"). */
TFM_API tfm_tensor *tfm_gelu_tanh(tfm_tape *tape, const tfm_tensor *x);
/** x * sigmoid(x), as torch.nn.functional.silu. */
TFM_API tfm_tensor *tfm_silu(tfm_tape *tape, const tfm_tensor *x);
/** tanh(x). */
TFM_API tfm_tensor *tfm_tanh(tfm_tape *tape, const tfm_tensor *x);

/* --- shape ------------------------------------------------------------------ */
/** Same values in a new shape; one axis may be -1 (inferred). Float32 or
 * int32. The result shares x's values, so x must outlive it. */
TFM_API tfm_tensor *tfm_reshape(tfm_tape *tape, const tfm_tensor *x,
                                int32_t ndim, const int64_t *shape);
/** Swaps two axes (a contiguous copy). */
TFM_API tfm_tensor *tfm_transpose(tfm_tape *tape, const tfm_tensor *x,
                                  int32_t axis0, int32_t axis1);
/** [B, T, H*D] -> [B, H, T, D]: heads must divide the last axis. */
TFM_API tfm_tensor *tfm_split_heads(tfm_tape *tape, const tfm_tensor *x,
                                    int32_t heads);
/** [B, H, T, D] -> [B, T, H*D], the inverse of tfm_split_heads(). */
TFM_API tfm_tensor *tfm_merge_heads(tfm_tape *tape, const tfm_tensor *x);
/** Joins count tensors along axis; all other sizes must be equal. */
TFM_API tfm_tensor *tfm_concat(tfm_tape *tape, const tfm_tensor *const *xs,
                               int32_t count, int32_t axis);

/* --- normalisation, softmax ---------------------------------------------------- */
/** Softmax over the last axis. mask may be NULL; an int32 mask is a keep-mask
 * (0 drops the position: its output is exactly 0); a float32 mask is added
 * to x (0 or -inf, as torch.nn.Transformer's masks). The mask broadcasts to
 * x. A row with no position left (every one dropped, or -inf) is all zeros
 * in both forms, and passes no gradient back: the tutorials'
 * masked_fill(mask == 0, -1e9) would make it uniform, PyTorch's -inf NaN.
 * A row holding NaN or +inf gives NaN across the row (as PyTorch), in
 * log_softmax too; NaN passes through every other op. */
TFM_API tfm_tensor *tfm_softmax(tfm_tape *tape, const tfm_tensor *x,
                                const tfm_tensor *mask);
/** log(softmax(x)) over the last axis, computed stably (no mask). */
TFM_API tfm_tensor *tfm_log_softmax(tfm_tape *tape, const tfm_tensor *x);
/** Layer norm over the last axis; weight and bias are [N] or NULL. */
TFM_API tfm_tensor *tfm_layer_norm(tfm_tape *tape, const tfm_tensor *x,
                                   const tfm_tensor *weight,
                                   const tfm_tensor *bias, float eps);
/** RMS norm over the last axis, x / sqrt(mean(x^2) + eps) * weight, as
 * T5's T5LayerNorm (no mean, no bias); weight is [N] or NULL. */
TFM_API tfm_tensor *tfm_rms_norm(tfm_tape *tape, const tfm_tensor *x,
                                 const tfm_tensor *weight, float eps);
/** Inverted dropout: in training, zeroes each value with probability p and
 * scales the rest by 1/(1-p); otherwise (or p == 0) the identity. The mask
 * comes from a counter-based generator seeded from rng, so backward
 * regenerates it instead of storing it. */
TFM_API tfm_tensor *tfm_dropout(tfm_tape *tape, const tfm_tensor *x, float p,
                                int32_t training, tfm_rng *rng);

/* --- lookup, reductions, loss ----------------------------------------------- */
/** table [V, D], ids int32 of 1 to 3 axes -> [ids..., D]; an id outside
 * [0, V) is TFM_ERR_RANGE. */
TFM_API tfm_tensor *tfm_embedding(tfm_tape *tape, const tfm_tensor *table,
                                  const tfm_tensor *ids);
/** The sum of all elements, as a [1] tensor. */
TFM_API tfm_tensor *tfm_sum(tfm_tape *tape, const tfm_tensor *x);
/** The mean of all elements, as a [1] tensor. */
TFM_API tfm_tensor *tfm_mean(tfm_tape *tape, const tfm_tensor *x);
/** Cross-entropy of logits [..., C] (2 to 4 axes; the class axis is the last,
 * unlike PyTorch's axis 1) against int32 targets [...], as
 * torch.nn.functional.cross_entropy: targets equal to ignore_index are not
 * counted, label_smoothing in [0, 1) mixes in the uniform distribution, and
 * the result is the mean over the counted targets (0 when none is counted),
 * as a [1] tensor. A target outside [0, C) that is not ignore_index is
 * TFM_ERR_RANGE. */
TFM_API tfm_tensor *tfm_cross_entropy(tfm_tape *tape, const tfm_tensor *logits,
                                      const tfm_tensor *targets,
                                      int32_t ignore_index,
                                      float label_smoothing);

/** How a loss over many targets is reduced: one of the TFM_REDUCTION_ values. */
typedef int32_t tfm_reduction;
/** The reductions, as PyTorch's reduction='mean' and 'sum'. */
enum {
    TFM_REDUCTION_MEAN = 0, /**< over the counted targets (0 when none) */
    TFM_REDUCTION_SUM = 1   /**< over the counted targets */
};
/** tfm_cross_entropy with the reduction chosen, and the number of targets
 * counted (not ignore_index) into *counted when counted is not NULL. The
 * sums of batches of different sizes add up, with their counts, to the
 * exact mean over all of them (validation: sum of sums / sum of counts).
 * A reduction that is neither is TFM_ERR_ARG. */
TFM_API tfm_tensor *tfm_cross_entropy_reduced(tfm_tape *tape, const tfm_tensor *logits,
                                              const tfm_tensor *targets,
                                              int32_t ignore_index, float label_smoothing,
                                              tfm_reduction reduction, int64_t *counted);

#ifdef __cplusplus
}
#endif

#endif
