/* libtfm parameter store: named float32 tensors that require grad, whose
 * values live in one contiguous block and whose gradients live in another,
 * so optimizers, clipping and checkpoints work on flat arrays. */
#ifndef TFM_PARAMS_H
#define TFM_PARAMS_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfm_params tfm_params;

TFM_API tfm_params *tfm_params_create(void);
/* Frees the store and every parameter tensor in it. */
TFM_API void tfm_params_free(tfm_params *params);

/* Adds a zero-filled parameter that requires grad. Names are unique, 1 to
 * 255 bytes. The tensor belongs to the store (tfm_tensor_free on it is a
 * no-op). Adding may move the blocks: take data or grad pointers after the
 * last add. */
TFM_API tfm_tensor *tfm_params_add(tfm_params *params, const char *name,
                                   int32_t ndim, const int64_t *shape);

TFM_API int64_t tfm_params_count(const tfm_params *params);  /* tensors */
TFM_API int64_t tfm_params_numel(const tfm_params *params);  /* scalars */
TFM_API tfm_tensor *tfm_params_at(const tfm_params *params, int64_t index);
TFM_API const char *tfm_params_name(const tfm_params *params, int64_t index);
/* NULL with TFM_ERR_ARG when no parameter has that name. */
TFM_API tfm_tensor *tfm_params_find(const tfm_params *params, const char *name);

/* The contiguous blocks, numel floats each, parameters in the order added. */
TFM_API float *tfm_params_values(tfm_params *params);
TFM_API float *tfm_params_grads(tfm_params *params);
TFM_API tfm_status tfm_params_zero_grad(tfm_params *params);

/* Rescales all gradients so their global L2 norm is at most max_norm, as
 * torch.nn.utils.clip_grad_norm_ (max_norm INFINITY only measures); the
 * norm before clipping goes to *norm_out when it is not NULL. A non-finite
 * norm is TFM_ERR_NUMERIC and leaves the gradients unchanged. */
TFM_API tfm_status tfm_params_clip_grad_norm(tfm_params *params,
                                             float max_norm, float *norm_out);

#ifdef __cplusplus
}
#endif

#endif
