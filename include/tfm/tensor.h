/* libtfm tensors: float32 or int32, 1 to 4 dimensions, row-major, contiguous.
 *
 * Tensors created here are owned by the caller and freed with
 * tfm_tensor_free(). Tensors returned by ops (ops.h) belong to the tape that
 * made them and live until tfm_tape_reset() or tfm_tape_free(); calling
 * tfm_tensor_free() on them is a harmless no-op. Every call given a
 * tape-owned tensor after the reset that ended it refuses it with
 * TFM_ERR_STATE (the guarantee is in tape.h); tfm_tensor_clone() keeps a
 * copy past the reset. */
#ifndef TFM_TENSOR_H
#define TFM_TENSOR_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TFM_MAX_DIMS 4

typedef struct tfm_tensor tfm_tensor;
typedef struct tfm_rng tfm_rng;

typedef int32_t tfm_dtype;
enum { TFM_F32 = 0, TFM_I32 = 1 };

/* --- random numbers: explicit, seeded, one stream per handle ------------- */
TFM_API tfm_rng *tfm_rng_create(uint64_t seed);
TFM_API void tfm_rng_free(tfm_rng *rng);
/* Restarts the stream as tfm_rng_create(seed) began it; layers holding the
 * rng (dropout) then repeat their draws. */
TFM_API tfm_status tfm_rng_seed(tfm_rng *rng, uint64_t seed);
/* Makes dst continue exactly as src would from here (its whole state). */
TFM_API tfm_status tfm_rng_copy(tfm_rng *dst, const tfm_rng *src);
TFM_API uint64_t tfm_rng_next_u64(tfm_rng *rng);
TFM_API float tfm_rng_uniform(tfm_rng *rng);   /* [0, 1) */
TFM_API float tfm_rng_normal(tfm_rng *rng);    /* N(0, 1) */

/* --- creation ------------------------------------------------------------- */
TFM_API tfm_tensor *tfm_tensor_zeros(tfm_dtype dtype, int32_t ndim,
                                     const int64_t *shape);
TFM_API tfm_tensor *tfm_tensor_full(int32_t ndim, const int64_t *shape,
                                    float value);
TFM_API tfm_tensor *tfm_tensor_ones(int32_t ndim, const int64_t *shape);
/* Copies numel(shape) values from the caller's buffer. */
TFM_API tfm_tensor *tfm_tensor_from_f32(int32_t ndim, const int64_t *shape,
                                        const float *values);
TFM_API tfm_tensor *tfm_tensor_from_i32(int32_t ndim, const int64_t *shape,
                                        const int32_t *values);
/* U(low, high) and N(mean, std^2) draws; the bounds, mean and std must be
 * finite, low <= high and std >= 0 (else TFM_ERR_ARG), as tfm_init_uniform
 * and tfm_init_normal require. */
TFM_API tfm_tensor *tfm_tensor_uniform(int32_t ndim, const int64_t *shape,
                                       float low, float high, tfm_rng *rng);
TFM_API tfm_tensor *tfm_tensor_normal(int32_t ndim, const int64_t *shape,
                                      float mean, float std, tfm_rng *rng);
/* A caller-owned copy of any tensor's values (same dtype and shape; no
 * gradient, requires_grad 0), to keep a tape-owned result past
 * tfm_tape_reset. Free it with tfm_tensor_free. */
TFM_API tfm_tensor *tfm_tensor_clone(const tfm_tensor *tensor);
TFM_API void tfm_tensor_free(tfm_tensor *tensor);

/* --- shape ---------------------------------------------------------------- */
TFM_API tfm_dtype tfm_tensor_dtype(const tfm_tensor *tensor);
TFM_API int32_t tfm_tensor_ndim(const tfm_tensor *tensor);   /* 0 on NULL */
/* Size of one axis; negative axes count from the end. -1 on error. */
TFM_API int64_t tfm_tensor_dim(const tfm_tensor *tensor, int32_t axis);
TFM_API int64_t tfm_tensor_numel(const tfm_tensor *tensor);  /* -1 on NULL */
/* Writes ndim values to shape_out (room for TFM_MAX_DIMS is always enough). */
TFM_API tfm_status tfm_tensor_shape(const tfm_tensor *tensor,
                                    int64_t *shape_out);

/* --- values --------------------------------------------------------------- */
/* count must equal numel: a mismatch is TFM_ERR_SHAPE, not a partial copy. */
TFM_API tfm_status tfm_tensor_read_f32(const tfm_tensor *tensor, float *dst,
                                       int64_t count);
TFM_API tfm_status tfm_tensor_write_f32(tfm_tensor *tensor, const float *src,
                                        int64_t count);
TFM_API tfm_status tfm_tensor_read_i32(const tfm_tensor *tensor, int32_t *dst,
                                       int64_t count);
TFM_API tfm_status tfm_tensor_write_i32(tfm_tensor *tensor,
                                        const int32_t *src, int64_t count);
/* The value of a one-element float32 tensor (a loss, say). */
TFM_API tfm_status tfm_tensor_item(const tfm_tensor *tensor, float *value);
/* Direct access to the storage, valid as long as the tensor; NULL with
 * TFM_ERR_DTYPE when the tensor holds the other type. */
TFM_API float *tfm_tensor_data_f32(tfm_tensor *tensor);
TFM_API int32_t *tfm_tensor_data_i32(tfm_tensor *tensor);

/* --- gradients ------------------------------------------------------------ */
/* Marks a caller-owned float32 tensor as a leaf whose gradient the tape
 * accumulates. The gradient buffer is allocated here, zeroed, once. */
TFM_API tfm_status tfm_tensor_set_requires_grad(tfm_tensor *tensor,
                                                int32_t requires_grad);
TFM_API int32_t tfm_tensor_requires_grad(const tfm_tensor *tensor); /* 0 on NULL */
/* TFM_ERR_STATE when the tensor has no gradient (yet). */
TFM_API tfm_status tfm_tensor_read_grad(const tfm_tensor *tensor, float *dst,
                                        int64_t count);
TFM_API float *tfm_tensor_grad_f32(tfm_tensor *tensor);
TFM_API tfm_status tfm_tensor_zero_grad(tfm_tensor *tensor);

#ifdef __cplusplus
}
#endif

#endif
