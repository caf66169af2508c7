/* Shape ops: reshape (a view), transpose, split/merge of attention heads
 * (all three one axis swap over a four-axis layout) and concat. Each forward
 * is followed by its backward. */
#include <stdio.h>
#include <string.h>

#include "autograd/tape.h"
#include "tfm/ops.h"
#include "core/error.h"

/* --- reshape ------------------------------------------------------------------ */

static void reshape_backward(tfm_node *node)
{
    float *gx = tfm__grad_of(node->in[0]);
    const float *g = node->out->grad;
    for (int64_t i = 0; i < node->out->numel; i++)
        gx[i] += g[i];
}

tfm_tensor *tfm_reshape(tfm_tape *tape, const tfm_tensor *x, int32_t ndim,
                        const int64_t *shape)
{
    const char *op = "tfm_reshape";
    if (tfm__check_tensor(op, "x", x) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    if (!shape) {
        tfm__fail(TFM_ERR_NULL, "%s: shape is NULL", op);
        return NULL;
    }
    if (ndim < 1 || ndim > TFM_MAX_DIMS) {
        tfm__fail(TFM_ERR_ARG, "%s: ndim %d is outside 1..%d", op, (int)ndim, TFM_MAX_DIMS);
        return NULL;
    }
    int64_t dims[TFM_MAX_DIMS], known = 1;
    int32_t inferred = -1, fits = 1;
    for (int32_t i = 0; i < ndim; i++) {
        dims[i] = shape[i];
        if (shape[i] == -1) {
            if (inferred >= 0) {
                tfm__fail(TFM_ERR_ARG, "%s: axes %d and %d are both -1; only one can be "
                          "inferred", op, (int)inferred, (int)i);
                return NULL;
            }
            inferred = i;
        } else if (shape[i] < 1) {
            tfm__fail(TFM_ERR_SHAPE, "%s: size %lld of axis %d is neither positive nor -1",
                      op, (long long)shape[i], (int)i);
            return NULL;
        } else if (fits && shape[i] <= x->numel / known) {
            known *= shape[i];
        } else {
            fits = 0; /* more elements than x has; stops known overflowing */
        }
    }
    if (fits && inferred >= 0 && x->numel % known == 0) {
        dims[inferred] = x->numel / known;
        known = x->numel;
    }
    if (!fits || known != x->numel) {
        char xs[64], ws[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: x %s has %lld elements, which do not fit shape %s",
                  op, tfm__shape_str(x, xs, sizeof xs), (long long)x->numel,
                  tfm__dims_str(shape, ndim, ws, sizeof ws));
        return NULL;
    }
    tfm_tensor *out = tfm__new_view(tape, op, x, ndim, dims);
    if (!out)
        return NULL;
    tfm_node *node;
    if (tfm__record(tape, op, out, reshape_backward, 1, (const tfm_tensor *[]){x}, &node) < 0)
        return NULL;
    return out;
}

/* --- axis swaps: transpose, split_heads, merge_heads -------------------------- */

/* dst (+)= src with axes a0 < a1 of its four-axis shape swapped; the
 * innermost loop runs along dst so writes stay contiguous. */
static void swap_axes(const float *src, const int64_t *shape, int a0, int a1, float *dst,
                      int accumulate)
{
    int64_t dims[4], stride[4];
    stride[3] = 1;
    for (int d = 2; d >= 0; d--)
        stride[d] = stride[d + 1] * shape[d + 1];
    memcpy(dims, shape, sizeof dims);
    dims[a0] = shape[a1];
    dims[a1] = shape[a0];
    int64_t s = stride[a0];
    stride[a0] = stride[a1];
    stride[a1] = s;
    for (int64_t i0 = 0; i0 < dims[0]; i0++)
        for (int64_t i1 = 0; i1 < dims[1]; i1++)
            for (int64_t i2 = 0; i2 < dims[2]; i2++) {
                const float *row = src + i0 * stride[0] + i1 * stride[1] + i2 * stride[2];
                if (accumulate)
                    for (int64_t i3 = 0; i3 < dims[3]; i3++)
                        dst[i3] += row[i3 * stride[3]];
                else
                    for (int64_t i3 = 0; i3 < dims[3]; i3++)
                        dst[i3] = row[i3 * stride[3]];
                dst += dims[3];
            }
}

/* A swap is its own inverse: the same axes of the output's layout give x's.
 * ints[0..3] hold that layout, ints[4] and ints[5] the axes. */
static void swap_backward(tfm_node *node)
{
    swap_axes(node->out->grad, node->ints, (int)node->ints[4], (int)node->ints[5],
              tfm__grad_of(node->in[0]), 1);
}

/* x's values laid out as layout (four axes), copied into a new out_shape
 * tensor with axes a0 < a1 swapped. */
static tfm_tensor *swap_op(const char *op, tfm_tape *tape, const tfm_tensor *x,
                           const int64_t *layout, int a0, int a1, int32_t out_ndim,
                           const int64_t *out_shape)
{
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, out_ndim, out_shape);
    if (!out)
        return NULL;
    swap_axes(tfm__f32(x), layout, a0, a1, tfm__f32(out), 0);
    tfm_node *node;
    if (tfm__record(tape, op, out, swap_backward, 1, (const tfm_tensor *[]){x}, &node) < 0)
        return NULL;
    if (node) {
        memcpy(node->ints, layout, 4 * sizeof layout[0]);
        node->ints[a0] = layout[a1];
        node->ints[a1] = layout[a0];
        node->ints[4] = a0;
        node->ints[5] = a1;
    }
    return out;
}

tfm_tensor *tfm_transpose(tfm_tape *tape, const tfm_tensor *x, int32_t axis0,
                          int32_t axis1)
{
    const char *op = "tfm_transpose";
    if (tfm__check_input(op, "x", x, TFM_F32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    int32_t a0 = tfm__axis(op, x, axis0), a1;
    if (a0 < 0 || (a1 = tfm__axis(op, x, axis1)) < 0)
        return NULL;
    if (a0 > a1) {
        int32_t t = a0;
        a0 = a1;
        a1 = t;
    }
    int64_t layout[4] = {1, 1, 1, 1}, shape[TFM_MAX_DIMS];
    int32_t pad = 4 - x->ndim;
    memcpy(layout + pad, x->shape, (size_t)x->ndim * sizeof x->shape[0]);
    memcpy(shape, x->shape, sizeof shape);
    shape[a0] = x->shape[a1];
    shape[a1] = x->shape[a0];
    return swap_op(op, tape, x, layout, a0 + pad, a1 + pad, x->ndim, shape);
}

tfm_tensor *tfm_split_heads(tfm_tape *tape, const tfm_tensor *x, int32_t heads)
{
    const char *op = "tfm_split_heads";
    if (tfm__check_input(op, "x", x, TFM_F32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    char xs[64];
    if (x->ndim != 3) {
        tfm__fail(TFM_ERR_SHAPE, "%s: x %s must be [B, T, H*D]", op,
                  tfm__shape_str(x, xs, sizeof xs));
        return NULL;
    }
    if (heads < 1) {
        tfm__fail(TFM_ERR_ARG, "%s: heads %d is not positive", op, (int)heads);
        return NULL;
    }
    if (x->shape[2] % heads != 0) {
        tfm__fail(TFM_ERR_SHAPE, "%s: %d heads do not divide the last axis of x %s", op,
                  (int)heads, tfm__shape_str(x, xs, sizeof xs));
        return NULL;
    }
    const int64_t *s = x->shape;
    int64_t layout[4] = {s[0], s[1], heads, s[2] / heads};
    int64_t shape[4] = {s[0], heads, s[1], s[2] / heads};
    return swap_op(op, tape, x, layout, 1, 2, 4, shape);
}

tfm_tensor *tfm_merge_heads(tfm_tape *tape, const tfm_tensor *x)
{
    const char *op = "tfm_merge_heads";
    if (tfm__check_input(op, "x", x, TFM_F32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    if (x->ndim != 4) {
        char xs[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: x %s must be [B, H, T, D]", op,
                  tfm__shape_str(x, xs, sizeof xs));
        return NULL;
    }
    const int64_t *s = x->shape;
    int64_t shape[3] = {s[0], s[2], s[1] * s[3]};
    return swap_op(op, tape, x, s, 1, 2, 3, shape);
}

/* --- concat ------------------------------------------------------------------- */

/* Each input's gradient is its slice of every outer row. ints[0] is the
 * number of rows: the product of the sizes before the axis. */
static void concat_backward(tfm_node *node)
{
    int64_t rows = node->ints[0], width = node->out->numel / rows, offset = 0;
    const float *g = node->out->grad;
    for (int32_t j = 0; j < node->n_in; j++) {
        int64_t chunk = node->in[j]->numel / rows;
        float *gx = tfm__grad_of(node->in[j]);
        for (int64_t r = 0; gx && r < rows; r++) {
            const float *src = g + r * width + offset;
            float *dst = gx + r * chunk;
            for (int64_t i = 0; i < chunk; i++)
                dst[i] += src[i];
        }
        offset += chunk;
    }
}

tfm_tensor *tfm_concat(tfm_tape *tape, const tfm_tensor *const *xs, int32_t count,
                       int32_t axis)
{
    const char *op = "tfm_concat";
    if (!xs) {
        tfm__fail(TFM_ERR_NULL, "%s: xs is NULL", op);
        return NULL;
    }
    if (count < 1) {
        tfm__fail(TFM_ERR_ARG, "%s: count %d is not positive", op, (int)count);
        return NULL;
    }
    for (int32_t j = 0; j < count; j++) {
        char what[32];
        snprintf(what, sizeof what, "xs[%d]", (int)j);
        if (tfm__check_input(op, what, xs[j], TFM_F32) < 0)
            return NULL;
    }
    if (tfm__check_tape(op, tape) < 0)
        return NULL;
    const tfm_tensor *first = xs[0];
    int32_t ax = tfm__axis(op, first, axis);
    if (ax < 0)
        return NULL;
    int64_t total = 0;
    for (int32_t j = 0; j < count; j++) {
        const tfm_tensor *x = xs[j];
        int same = x->ndim == first->ndim;
        for (int32_t d = 0; same && d < x->ndim; d++)
            same = d == ax || x->shape[d] == first->shape[d];
        if (!same) {
            char s0[64], sj[64];
            tfm__fail(TFM_ERR_SHAPE, "%s: xs[%d] %s does not match xs[0] %s outside axis %d",
                      op, (int)j, tfm__shape_str(x, sj, sizeof sj),
                      tfm__shape_str(first, s0, sizeof s0), (int)ax);
            return NULL;
        }
        total += x->shape[ax];
        if (total > TFM_MAX_TENSOR_BYTES) {
            tfm__fail(TFM_ERR_SIZE, "%s: the joined axis is absurdly large", op);
            return NULL;
        }
    }
    int64_t shape[TFM_MAX_DIMS], rows = 1;
    memcpy(shape, first->shape, sizeof shape);
    shape[ax] = total;
    for (int32_t d = 0; d < ax; d++)
        rows *= shape[d];
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, first->ndim, shape);
    if (!out)
        return NULL;
    float *o = tfm__f32(out);
    int64_t width = out->numel / rows, offset = 0;
    for (int32_t j = 0; j < count; j++) {
        int64_t chunk = xs[j]->numel / rows;
        for (int64_t r = 0; r < rows; r++)
            memcpy(o + r * width + offset, tfm__f32(xs[j]) + r * chunk,
                   (size_t)chunk * sizeof(float));
        offset += chunk;
    }
    tfm_node *node;
    if (tfm__record(tape, op, out, concat_backward, count, xs, &node) < 0)
        return NULL;
    if (node)
        node->ints[0] = rows;
    return out;
}
