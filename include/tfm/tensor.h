/** @file
 * libtfm tensors: float32 or int32, 1 to 4 dimensions, row-major, contiguous.
 *
 * Tensors created here are owned by the caller and freed with
 * tfm_tensor_free(). Tensors returned by ops (ops.h) belong to the tape that
 * made them and live until tfm_tape_reset() or tfm_tape_free(); calling
 * tfm_tensor_free() on them is a harmless no-op. Every call given a
 * tape-owned tensor after the reset that ended it refuses it with
 * TFM_ERR_STATE (the guarantee is in tape.h); tfm_tensor_clone() keeps a
 * copy past the reset. Tensors that belong to a parameter set (params.h)
 * live as long as it.
 *
 * Errors: calls returning a pointer return NULL, and calls returning a
 * number the value documented as its error value, after recording the
 * status and message (common.h); a failed call changes no tensor.
 *
 * Threads: a tensor or rng may be read from several threads at once but
 * written (values, gradient, draws) from one thread at a time. */
#ifndef TFM_TENSOR_H
#define TFM_TENSOR_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The most dimensions a tensor has. */
#define TFM_MAX_DIMS 4

/** A tensor: its shape, element type, values and, for a leaf that requires
 * one, its gradient. Opaque. */
typedef struct tfm_tensor tfm_tensor;
/** A seeded stream of random numbers (xoshiro-style); opaque. */
typedef struct tfm_rng tfm_rng;

/** A tensor's element type: TFM_F32 or TFM_I32 (-1 is returned on error). */
typedef int32_t tfm_dtype;
/** The element types. */
enum {
    TFM_F32 = 0, /**< float32 values (activations, parameters, gradients) */
    TFM_I32 = 1  /**< int32 values (token ids, targets) */
};

/* --- random numbers: explicit, seeded, one stream per handle ------------- */
/** A new stream; the same seed gives the same numbers on every machine.
 * Caller-owned: free with tfm_rng_free(). NULL when out of memory. */
TFM_API tfm_rng *tfm_rng_create(uint64_t seed);
/** Frees a stream; NULL is a no-op. Layers created with it must not run
 * after. */
TFM_API void tfm_rng_free(tfm_rng *rng);
/** Restarts the stream as tfm_rng_create(seed) began it; layers holding the
 * rng (dropout) then repeat their draws. */
TFM_API tfm_status tfm_rng_seed(tfm_rng *rng, uint64_t seed);
/** Data-parallel dropout: count processes each run one of count equal
 * slices of a batch (along its first axis; this one runs slice index), and
 * dropout masks drawn from rng are then the slice's part of the mask one
 * process would draw for the whole batch, so that the processes together
 * train as one would (distributed.h). Every dropped tensor must have the
 * batch as its first axis, as the layers' and the model's do. (0, 1), the
 * default, is the whole batch. count is at most TFM_MAX_SHARDS (65,536);
 * count outside [1, TFM_MAX_SHARDS] or index outside [0, count) is
 * TFM_ERR_ARG.
 * Not part of the state that tfm_training_save keeps. */
TFM_API tfm_status tfm_rng_set_shard(tfm_rng *rng, int64_t index, int64_t count);
/** The most slices tfm_rng_set_shard() and tfm_model_set_shard() divide a
 * batch into. */
#define TFM_MAX_SHARDS 65536
/** Makes dst continue exactly as src would from here (its whole state,
 * its slice included). */
TFM_API tfm_status tfm_rng_copy(tfm_rng *dst, const tfm_rng *src);
/** The next 64 random bits; 0 with TFM_ERR_NULL on a NULL rng. */
TFM_API uint64_t tfm_rng_next_u64(tfm_rng *rng);
TFM_API float tfm_rng_uniform(tfm_rng *rng);   /**< A draw from [0, 1); 0 on NULL. */
TFM_API float tfm_rng_normal(tfm_rng *rng);    /**< A draw from N(0, 1); 0 on NULL. */

/* --- creation ------------------------------------------------------------- */
/** A caller-owned tensor of ndim (1 to TFM_MAX_DIMS) sizes read from shape,
 * every value 0. Every creation call returns NULL with TFM_ERR_NULL for a
 * NULL shape or buffer, TFM_ERR_ARG for an ndim outside 1..TFM_MAX_DIMS,
 * TFM_ERR_SHAPE for a size below 1, TFM_ERR_SIZE for a tensor of absurd
 * size, TFM_ERR_NOMEM when out of memory. Free with tfm_tensor_free(). */
TFM_API tfm_tensor *tfm_tensor_zeros(tfm_dtype dtype, int32_t ndim,
                                     const int64_t *shape);
/** A caller-owned float32 tensor with every value set to value. */
TFM_API tfm_tensor *tfm_tensor_full(int32_t ndim, const int64_t *shape,
                                    float value);
/** A caller-owned float32 tensor of ones. */
TFM_API tfm_tensor *tfm_tensor_ones(int32_t ndim, const int64_t *shape);
/** A caller-owned float32 tensor holding a copy of numel(shape) values
 * from the caller's buffer (which the call does not keep). */
TFM_API tfm_tensor *tfm_tensor_from_f32(int32_t ndim, const int64_t *shape,
                                        const float *values);
/** A caller-owned int32 tensor holding a copy of numel(shape) values. */
TFM_API tfm_tensor *tfm_tensor_from_i32(int32_t ndim, const int64_t *shape,
                                        const int32_t *values);
/** U(low, high) and N(mean, std^2) draws; the bounds, mean and std must be
 * finite, low <= high, high - low finite in float and std >= 0 (else
 * TFM_ERR_ARG), as tfm_init_uniform and tfm_init_normal require. */
TFM_API tfm_tensor *tfm_tensor_uniform(int32_t ndim, const int64_t *shape,
                                       float low, float high, tfm_rng *rng);
/** A caller-owned float32 tensor of N(mean, std^2) draws from rng. */
TFM_API tfm_tensor *tfm_tensor_normal(int32_t ndim, const int64_t *shape,
                                      float mean, float std, tfm_rng *rng);
/** A caller-owned copy of any tensor's values (same dtype and shape; no
 * gradient, requires_grad 0), to keep a tape-owned result past
 * tfm_tape_reset. Free it with tfm_tensor_free. */
TFM_API tfm_tensor *tfm_tensor_clone(const tfm_tensor *tensor);
/** Frees a caller-owned tensor and its gradient. NULL, and tensors owned
 * by a tape or a parameter set, are left alone (a no-op). */
TFM_API void tfm_tensor_free(tfm_tensor *tensor);

/* --- shape ---------------------------------------------------------------- */
/** TFM_F32 or TFM_I32; -1 on NULL or a tensor whose tape was reset. */
TFM_API tfm_dtype tfm_tensor_dtype(const tfm_tensor *tensor);
TFM_API int32_t tfm_tensor_ndim(const tfm_tensor *tensor);   /**< 0 on NULL */
/** Size of one axis; negative axes count from the end. -1 on error. */
TFM_API int64_t tfm_tensor_dim(const tfm_tensor *tensor, int32_t axis);
TFM_API int64_t tfm_tensor_numel(const tfm_tensor *tensor);  /**< -1 on NULL */
/** Writes ndim values to shape_out (room for TFM_MAX_DIMS is always enough). */
TFM_API tfm_status tfm_tensor_shape(const tfm_tensor *tensor,
                                    int64_t *shape_out);

/* --- values --------------------------------------------------------------- */
/** count must equal numel: a mismatch is TFM_ERR_SHAPE, not a partial copy. */
TFM_API tfm_status tfm_tensor_read_f32(const tfm_tensor *tensor, float *dst,
                                       int64_t count);
/** Overwrites all count (= numel) float32 values from src. */
TFM_API tfm_status tfm_tensor_write_f32(tfm_tensor *tensor, const float *src,
                                        int64_t count);
/** Copies all count (= numel) int32 values to dst. */
TFM_API tfm_status tfm_tensor_read_i32(const tfm_tensor *tensor, int32_t *dst,
                                       int64_t count);
/** Overwrites all count (= numel) int32 values from src. */
TFM_API tfm_status tfm_tensor_write_i32(tfm_tensor *tensor,
                                        const int32_t *src, int64_t count);
/** The value of a one-element float32 tensor (a loss, say). */
TFM_API tfm_status tfm_tensor_item(const tfm_tensor *tensor, float *value);
/** Direct access to the storage, valid as long as the tensor; NULL with
 * TFM_ERR_DTYPE when the tensor holds the other type. */
TFM_API float *tfm_tensor_data_f32(tfm_tensor *tensor);
/** Direct access to an int32 tensor's storage, as tfm_tensor_data_f32(). */
TFM_API int32_t *tfm_tensor_data_i32(tfm_tensor *tensor);

/* --- gradients ------------------------------------------------------------ */
/** Marks a caller-owned float32 tensor as a leaf whose gradient the tape
 * accumulates. The gradient buffer is allocated here, zeroed, once. */
TFM_API tfm_status tfm_tensor_set_requires_grad(tfm_tensor *tensor,
                                                int32_t requires_grad);
TFM_API int32_t tfm_tensor_requires_grad(const tfm_tensor *tensor); /**< 0 on NULL */
/** TFM_ERR_STATE when the tensor has no gradient (yet). */
TFM_API tfm_status tfm_tensor_read_grad(const tfm_tensor *tensor, float *dst,
                                        int64_t count);
/** Direct access to the gradient (numel floats), valid as long as the
 * tensor; NULL with TFM_ERR_STATE when it has none. */
TFM_API float *tfm_tensor_grad_f32(tfm_tensor *tensor);
/** Sets the gradient to zero; a tensor without one is left as it is. */
TFM_API tfm_status tfm_tensor_zero_grad(tfm_tensor *tensor);

#ifdef __cplusplus
}
#endif

#endif
