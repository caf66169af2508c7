/* The tensor record behind the opaque tfm_tensor handle. */
#ifndef TFM_CORE_TENSOR_H
#define TFM_CORE_TENSOR_H

#include <stddef.h>

#include "tfm/tensor.h"

typedef enum tfm_storage {
    TFM_STORAGE_HEAP,  /* caller-owned: struct, values and gradient on the heap */
    TFM_STORAGE_TAPE,  /* made by an op: everything in the tape's arena */
    TFM_STORAGE_PARAM  /* owned by a tfm_params store, values in its block */
} tfm_storage;

struct tfm_tensor {
    void *data;               /* float or int32_t, per dtype */
    float *grad;              /* NULL until a gradient exists */
    int64_t shape[TFM_MAX_DIMS];
    int64_t numel;
    int32_t ndim;
    tfm_dtype dtype;
    tfm_storage storage;
    int32_t requires_grad;
    int32_t grad_recycled;    /* grad came from the tape and returns to it */
    struct tfm_node *producer; /* the op record that made it, if recorded */
    int32_t recomputed;       /* 1 + the tape's recompute block (kind) holding the values */
    /* Tape-owned: the tape's reset counter and its value when the header was
     * made; the tensor is live while they agree. NULL when not tape-owned. */
    const uint64_t *tape_generation;
    uint64_t generation;
    /* A linear layer's weight [out, in] that tfm_model_quantize turned to
     * int8: its rows as int8_parts weights of out / int8_parts rows each (a
     * fused attention's q, k and v, which products take apart), their
     * biases the layer's. Products read these instead of data (core/gemm_int8.h:
     * tfm__int8_tensor_product). NULL when float32; owned by the model. */
    struct tfm__int8_weight *const *int8;
    int32_t int8_parts;
};

/* A tape-owned tensor whose tape has been reset since it was made. */
static inline int tfm__is_stale(const tfm_tensor *t)
{
    return t->tape_generation && *t->tape_generation != t->generation;
}

static inline float *tfm__f32(const tfm_tensor *t) { return (float *)t->data; }
static inline int32_t *tfm__i32(const tfm_tensor *t) { return (int32_t *)t->data; }
/* int8 values: never a tensor of the public API, only the int8 weights a
 * quantized model's file holds (model/quantize.c), for its writer. */
#define TFM__I8 ((tfm_dtype)2)

static inline size_t tfm__dtype_size(tfm_dtype dtype)
{
    return dtype == TFM__I8 ? 1 : dtype == TFM_I32 ? sizeof(int32_t) : sizeof(float);
}

/* Validates ndim and shape and returns the element count, or -1 with the
 * error set (op names the caller in the message). Sizes whose bytes would
 * exceed TFM_MAX_TENSOR_BYTES are absurd. */
#define TFM_MAX_TENSOR_BYTES ((int64_t)1 << 40)
int64_t tfm__checked_numel(const char *op, int32_t ndim, const int64_t *shape);

/* Fills a header (no storage) for the given shape, already validated. */
void tfm__tensor_init(tfm_tensor *t, tfm_dtype dtype, int32_t ndim,
                      const int64_t *shape, int64_t numel, tfm_storage storage);

/* Normalises a possibly negative axis; -1 with the error set if invalid. */
int32_t tfm__axis(const char *op, const tfm_tensor *t, int32_t axis);

/* "[2,3,4]" into buf, for error messages: n values, or a tensor's shape. */
const char *tfm__dims_str(const int64_t *values, int32_t n, char *buf, size_t size);
const char *tfm__shape_str(const tfm_tensor *t, char *buf, size_t size);
/* "[1,2]": the multi-index of a flat element position, for error messages. */
const char *tfm__index_str(const tfm_tensor *t, int64_t flat, char *buf, size_t size);

/* Checks a tensor argument is non-NULL and live (not made before its tape's
 * last reset); 0, or -1 with the error set. Every call that reads a tensor
 * handle checks it first. */
int tfm__check_tensor(const char *op, const char *what, const tfm_tensor *t);
/* The same, and of the given dtype. */
int tfm__check_input(const char *op, const char *what, const tfm_tensor *t,
                     tfm_dtype dtype);

/* A caller-owned tensor of zeros; NULL with the error set (in op's name). */
tfm_tensor *tfm__heap_tensor(const char *op, tfm_dtype dtype, int32_t ndim,
                             const int64_t *shape);

#endif
