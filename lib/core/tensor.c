#include "core/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"

int64_t tfm__checked_numel(const char *op, int32_t ndim, const int64_t *shape)
{
    if (!shape) {
        tfm__fail(TFM_ERR_NULL, "%s: shape is NULL", op);
        return -1;
    }
    if (ndim < 1 || ndim > TFM_MAX_DIMS) {
        tfm__fail(TFM_ERR_ARG, "%s: ndim %d is outside 1..%d", op, (int)ndim,
                  TFM_MAX_DIMS);
        return -1;
    }
    int64_t numel = 1;
    for (int32_t i = 0; i < ndim; i++) {
        if (shape[i] < 1) {
            tfm__fail(TFM_ERR_SHAPE, "%s: size %lld of axis %d is not positive",
                      op, (long long)shape[i], (int)i);
            return -1;
        }
        if (shape[i] > TFM_MAX_TENSOR_BYTES / 4 / numel) {
            tfm__fail(TFM_ERR_SIZE,
                      "%s: shape is absurdly large (over %lld bytes)", op,
                      (long long)TFM_MAX_TENSOR_BYTES);
            return -1;
        }
        numel *= shape[i];
    }
    return numel;
}

void tfm__tensor_init(tfm_tensor *t, tfm_dtype dtype, int32_t ndim,
                      const int64_t *shape, int64_t numel, tfm_storage storage)
{
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int32_t i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->numel = numel;
    t->storage = storage;
}

int32_t tfm__axis(const char *op, const tfm_tensor *t, int32_t axis)
{
    int32_t a = axis < 0 ? axis + t->ndim : axis;
    if (a < 0 || a >= t->ndim) {
        tfm__fail(TFM_ERR_ARG, "%s: axis %d is out of range for %d dimensions",
                  op, (int)axis, (int)t->ndim);
        return -1;
    }
    return a;
}

const char *tfm__dims_str(const int64_t *values, int32_t n, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? "," : "[",
                                (long long)values[i]);
    if (len < size)
        snprintf(buf + len, size - len, "]");
    return buf;
}

const char *tfm__shape_str(const tfm_tensor *t, char *buf, size_t size)
{
    return tfm__dims_str(t->shape, t->ndim, buf, size);
}

const char *tfm__index_str(const tfm_tensor *t, int64_t flat, char *buf, size_t size)
{
    int64_t index[TFM_MAX_DIMS];
    for (int32_t d = t->ndim - 1; d >= 0; d--) {
        index[d] = flat % t->shape[d];
        flat /= t->shape[d];
    }
    return tfm__dims_str(index, t->ndim, buf, size);
}

int tfm__check_tensor(const char *op, const char *what, const tfm_tensor *t)
{
    if (!t) {
        tfm__fail_null_input(op, what);
        return -1;
    }
    if (tfm__is_stale(t)) {
        tfm__fail(TFM_ERR_STATE, "%s: %s was made on a tape before its last tfm_tape_reset, "
                  "which ended it; make it after the reset, or keep a copy made before "
                  "with tfm_tensor_clone", op, what);
        return -1;
    }
    return 0;
}

int tfm__check_input(const char *op, const char *what, const tfm_tensor *t,
                     tfm_dtype dtype)
{
    if (tfm__check_tensor(op, what, t) < 0)
        return -1;
    if (t->dtype != dtype) {
        tfm__fail(TFM_ERR_DTYPE, "%s: %s must be %s", op, what,
                  dtype == TFM_F32 ? "float32" : "int32");
        return -1;
    }
    return 0;
}

/* --- caller-owned tensors ---------------------------------------------------- */

tfm_tensor *tfm__heap_tensor(const char *op, tfm_dtype dtype, int32_t ndim,
                               const int64_t *shape)
{
    if (dtype != TFM_F32 && dtype != TFM_I32) {
        tfm__fail(TFM_ERR_DTYPE, "%s: unknown dtype %d", op, (int)dtype);
        return NULL;
    }
    int64_t numel = tfm__checked_numel(op, ndim, shape);
    if (numel < 0)
        return NULL;
    tfm_tensor *t = malloc(sizeof *t);
    void *data = calloc((size_t)numel, tfm__dtype_size(dtype));
    if (!t || !data) {
        free(t);
        free(data);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld elements", op,
                  (long long)numel);
        return NULL;
    }
    tfm__tensor_init(t, dtype, ndim, shape, numel, TFM_STORAGE_HEAP);
    t->data = data;
    return t;
}

tfm_tensor *tfm_tensor_zeros(tfm_dtype dtype, int32_t ndim, const int64_t *shape)
{
    return tfm__heap_tensor("tfm_tensor_zeros", dtype, ndim, shape);
}

static tfm_tensor *filled(const char *op, int32_t ndim, const int64_t *shape, float value)
{
    tfm_tensor *t = tfm__heap_tensor(op, TFM_F32, ndim, shape);
    if (t)
        for (int64_t i = 0; i < t->numel; i++)
            tfm__f32(t)[i] = value;
    return t;
}

tfm_tensor *tfm_tensor_full(int32_t ndim, const int64_t *shape, float value)
{
    return filled("tfm_tensor_full", ndim, shape, value);
}

tfm_tensor *tfm_tensor_ones(int32_t ndim, const int64_t *shape)
{
    return filled("tfm_tensor_ones", ndim, shape, 1.0f);
}

tfm_tensor *tfm_tensor_from_f32(int32_t ndim, const int64_t *shape,
                                const float *values)
{
    if (!values) {
        tfm__fail(TFM_ERR_NULL, "tfm_tensor_from_f32: values is NULL");
        return NULL;
    }
    tfm_tensor *t = tfm__heap_tensor("tfm_tensor_from_f32", TFM_F32, ndim, shape);
    if (t)
        memcpy(t->data, values, (size_t)t->numel * sizeof(float));
    return t;
}

tfm_tensor *tfm_tensor_from_i32(int32_t ndim, const int64_t *shape,
                                const int32_t *values)
{
    if (!values) {
        tfm__fail(TFM_ERR_NULL, "tfm_tensor_from_i32: values is NULL");
        return NULL;
    }
    tfm_tensor *t = tfm__heap_tensor("tfm_tensor_from_i32", TFM_I32, ndim, shape);
    if (t)
        memcpy(t->data, values, (size_t)t->numel * sizeof(int32_t));
    return t;
}

tfm_tensor *tfm_tensor_uniform(int32_t ndim, const int64_t *shape, float low,
                               float high, tfm_rng *rng)
{
    if (!rng) {
        tfm__fail(TFM_ERR_NULL, "tfm_tensor_uniform: rng is NULL");
        return NULL;
    }
    if (tfm__check_uniform_bounds("tfm_tensor_uniform", low, high) != TFM_OK)
        return NULL;
    tfm_tensor *t = tfm__heap_tensor("tfm_tensor_uniform", TFM_F32, ndim, shape);
    if (t)
        for (int64_t i = 0; i < t->numel; i++)
            tfm__f32(t)[i] = low + (high - low) * tfm_rng_uniform(rng);
    return t;
}

tfm_tensor *tfm_tensor_normal(int32_t ndim, const int64_t *shape, float mean,
                              float std, tfm_rng *rng)
{
    if (!rng) {
        tfm__fail(TFM_ERR_NULL, "tfm_tensor_normal: rng is NULL");
        return NULL;
    }
    if (tfm__check_normal_params("tfm_tensor_normal", mean, std) != TFM_OK)
        return NULL;
    tfm_tensor *t = tfm__heap_tensor("tfm_tensor_normal", TFM_F32, ndim, shape);
    if (t)
        for (int64_t i = 0; i < t->numel; i++)
            tfm__f32(t)[i] = mean + std * tfm_rng_normal(rng);
    return t;
}

void tfm_tensor_free(tfm_tensor *t)
{
    if (!t || t->storage == TFM_STORAGE_TAPE || t->storage == TFM_STORAGE_PARAM)
        return;
    free(t->data);
    free(t->grad);
    free(t);
}

/* --- shape ----------------------------------------------------------------- */

/* The tensor handle of an accessor: NULL is reported as such even after a
 * failed chain, since the accessor is the call the caller made. */
static int check_handle(const char *op, const tfm_tensor *t)
{
    if (!t) {
        tfm__fail(TFM_ERR_NULL, "%s: tensor is NULL", op);
        return -1;
    }
    return tfm__check_tensor(op, "tensor", t);
}

tfm_dtype tfm_tensor_dtype(const tfm_tensor *t)
{
    return check_handle("tfm_tensor_dtype", t) < 0 ? -1 : t->dtype;
}

int32_t tfm_tensor_ndim(const tfm_tensor *t)
{
    return check_handle("tfm_tensor_ndim", t) < 0 ? 0 : t->ndim;
}

int64_t tfm_tensor_dim(const tfm_tensor *t, int32_t axis)
{
    if (check_handle("tfm_tensor_dim", t) < 0)
        return -1;
    int32_t a = tfm__axis("tfm_tensor_dim", t, axis);
    return a < 0 ? -1 : t->shape[a];
}

int64_t tfm_tensor_numel(const tfm_tensor *t)
{
    return check_handle("tfm_tensor_numel", t) < 0 ? -1 : t->numel;
}

tfm_status tfm_tensor_shape(const tfm_tensor *t, int64_t *shape_out)
{
    if (check_handle("tfm_tensor_shape", t) < 0)
        return tfm_last_status();
    if (!shape_out)
        return tfm__fail(TFM_ERR_NULL, "tfm_tensor_shape: shape_out is NULL");
    for (int32_t i = 0; i < t->ndim; i++)
        shape_out[i] = t->shape[i];
    return TFM_OK;
}

/* --- values ---------------------------------------------------------------- */

static tfm_status check_copy(const char *op, const tfm_tensor *t, const void *buf,
                             int64_t count, tfm_dtype dtype)
{
    if (check_handle(op, t) < 0)
        return tfm_last_status();
    if (!buf)
        return tfm__fail(TFM_ERR_NULL, "%s: buffer is NULL", op);
    if (t->dtype != dtype)
        return tfm__fail(TFM_ERR_DTYPE, "%s: tensor holds %s values", op,
                         t->dtype == TFM_F32 ? "float32" : "int32");
    if (count != t->numel)
        return tfm__fail(TFM_ERR_SHAPE, "%s: count %lld differs from the %lld elements",
                         op, (long long)count, (long long)t->numel);
    return TFM_OK;
}

/* Copies between a tensor and a caller's buffer once check_copy agrees. */
static tfm_status copy_values(const char *op, const tfm_tensor *t, void *buffer,
                              int64_t count, tfm_dtype dtype, int into_tensor)
{
    tfm_status s = check_copy(op, t, buffer, count, dtype);
    if (s != TFM_OK)
        return s;
    size_t bytes = (size_t)count * tfm__dtype_size(dtype);
    if (into_tensor)
        memcpy(t->data, buffer, bytes);
    else
        memcpy(buffer, t->data, bytes);
    return TFM_OK;
}

tfm_status tfm_tensor_read_f32(const tfm_tensor *t, float *dst, int64_t count)
{
    return copy_values("tfm_tensor_read_f32", t, dst, count, TFM_F32, 0);
}

tfm_status tfm_tensor_write_f32(tfm_tensor *t, const float *src, int64_t count)
{
    return copy_values("tfm_tensor_write_f32", t, (void *)src, count, TFM_F32, 1);
}

tfm_status tfm_tensor_read_i32(const tfm_tensor *t, int32_t *dst, int64_t count)
{
    return copy_values("tfm_tensor_read_i32", t, dst, count, TFM_I32, 0);
}

tfm_status tfm_tensor_write_i32(tfm_tensor *t, const int32_t *src, int64_t count)
{
    return copy_values("tfm_tensor_write_i32", t, (void *)src, count, TFM_I32, 1);
}

tfm_status tfm_tensor_item(const tfm_tensor *t, float *value)
{
    float scratch;
    tfm_status s = check_copy("tfm_tensor_item", t, value ? value : &scratch, 1, TFM_F32);
    if (s == TFM_OK && !value)
        s = tfm__fail(TFM_ERR_NULL, "tfm_tensor_item: value is NULL");
    if (s == TFM_OK)
        *value = tfm__f32(t)[0];
    return s;
}

float *tfm_tensor_data_f32(tfm_tensor *t)
{
    if (check_handle("tfm_tensor_data_f32", t) < 0 || tfm__check_input("tfm_tensor_data_f32", "tensor", t, TFM_F32) < 0)
        return NULL;
    return tfm__f32(t);
}

int32_t *tfm_tensor_data_i32(tfm_tensor *t)
{
    if (check_handle("tfm_tensor_data_i32", t) < 0 || tfm__check_input("tfm_tensor_data_i32", "tensor", t, TFM_I32) < 0)
        return NULL;
    return tfm__i32(t);
}

tfm_tensor *tfm_tensor_clone(const tfm_tensor *t)
{
    const char *op = "tfm_tensor_clone";
    if (check_handle(op, t) < 0)
        return NULL;
    tfm_tensor *copy = tfm__heap_tensor(op, t->dtype, t->ndim, t->shape);
    if (copy)
        memcpy(copy->data, t->data, (size_t)t->numel * tfm__dtype_size(t->dtype));
    return copy;
}

/* --- gradients --------------------------------------------------------------- */

tfm_status tfm_tensor_set_requires_grad(tfm_tensor *t, int32_t requires_grad)
{
    const char *op = "tfm_tensor_set_requires_grad";
    if (check_handle(op, t) < 0)
        return tfm_last_status();
    if (t->storage == TFM_STORAGE_TAPE)
        return tfm__fail(TFM_ERR_STATE,
                         "%s: op results get gradients from the tape; only "
                         "caller-owned tensors are leaves", op);
    if (requires_grad && t->dtype != TFM_F32)
        return tfm__fail(TFM_ERR_DTYPE, "%s: only float32 tensors have gradients", op);
    if (requires_grad && !t->grad) {
        /* parameters have theirs in the store's block already */
        t->grad = calloc((size_t)t->numel, sizeof(float));
        if (!t->grad)
            return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    }
    t->requires_grad = requires_grad ? 1 : 0;
    return TFM_OK;
}

int32_t tfm_tensor_requires_grad(const tfm_tensor *t)
{
    if (tfm__check_tensor("tfm_tensor_requires_grad", "tensor", t) < 0)
        return 0;
    return t->requires_grad;
}

tfm_status tfm_tensor_read_grad(const tfm_tensor *t, float *dst, int64_t count)
{
    const char *op = "tfm_tensor_read_grad";
    tfm_status s = check_copy(op, t, dst, count, TFM_F32);
    if (s != TFM_OK)
        return s;
    if (!t->grad)
        return tfm__fail(TFM_ERR_STATE, "%s: the tensor has no gradient", op);
    memcpy(dst, t->grad, (size_t)count * sizeof(float));
    return TFM_OK;
}

float *tfm_tensor_grad_f32(tfm_tensor *t)
{
    if (check_handle("tfm_tensor_grad_f32", t) < 0)
        return NULL;
    if (!t->grad)
        tfm__fail(TFM_ERR_STATE, "tfm_tensor_grad_f32: the tensor has no gradient");
    return t->grad;
}

tfm_status tfm_tensor_zero_grad(tfm_tensor *t)
{
    if (check_handle("tfm_tensor_zero_grad", t) < 0)
        return tfm_last_status();
    if (t->grad)
        memset(t->grad, 0, (size_t)t->numel * sizeof(float));
    return TFM_OK;
}
