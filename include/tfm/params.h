/** @file
 * libtfm parameter store: named float32 tensors that require grad, whose
 * values live in one contiguous block and whose gradients live in another,
 * so optimizers, clipping and checkpoints work on flat arrays.
 *
 * The store owns its tensors, names and blocks: they live until
 * tfm_params_free(). Errors are reported as in tensor.h (NULL or -1 and the
 * status). Threads: one thread at a time per store; the layers and model
 * that hold a store follow the same rule. */
#ifndef TFM_PARAMS_H
#define TFM_PARAMS_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A set of named parameters; opaque. */
typedef struct tfm_params tfm_params;

/** An empty store. Caller-owned: free with tfm_params_free(). NULL with
 * TFM_ERR_NOMEM when out of memory. */
TFM_API tfm_params *tfm_params_create(void);
/** Frees the store and every parameter tensor in it. */
TFM_API void tfm_params_free(tfm_params *params);

/** Adds a zero-filled parameter that requires grad. Names are unique, 1 to
 * 255 bytes. The tensor belongs to the store (tfm_tensor_free on it is a
 * no-op). Adding may move the blocks: take data or grad pointers after the
 * last add. */
TFM_API tfm_tensor *tfm_params_add(tfm_params *params, const char *name,
                                   int32_t ndim, const int64_t *shape);

TFM_API int64_t tfm_params_count(const tfm_params *params);  /**< tensors */
TFM_API int64_t tfm_params_numel(const tfm_params *params);  /**< scalars */
/** The index-th parameter (0-based, in the order added), owned by the
 * store; NULL with TFM_ERR_RANGE for an index outside 0..count-1. */
TFM_API tfm_tensor *tfm_params_at(const tfm_params *params, int64_t index);
/** The index-th parameter's name, owned by the store; NULL with
 * TFM_ERR_RANGE for an index outside 0..count-1. */
TFM_API const char *tfm_params_name(const tfm_params *params, int64_t index);
/** NULL with TFM_ERR_ARG when no parameter has that name. */
TFM_API tfm_tensor *tfm_params_find(const tfm_params *params, const char *name);

/** The contiguous blocks, numel floats each, parameters in the order added. */
TFM_API float *tfm_params_values(tfm_params *params);
/** The gradients' block, laid out as tfm_params_values(). */
TFM_API float *tfm_params_grads(tfm_params *params);
/** Sets every parameter's gradient to zero (one memset of the block). */
TFM_API tfm_status tfm_params_zero_grad(tfm_params *params);

/** Rescales all gradients so their global L2 norm is at most max_norm, as
 * torch.nn.utils.clip_grad_norm_ (max_norm INFINITY only measures); the
 * norm before clipping goes to *norm_out when it is not NULL. A non-finite
 * norm is TFM_ERR_NUMERIC and leaves the gradients unchanged. */
TFM_API tfm_status tfm_params_clip_grad_norm(tfm_params *params,
                                             float max_norm, float *norm_out);

#ifdef __cplusplus
}
#endif

#endif
