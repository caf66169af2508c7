/* Softmax (with an optional keep-mask or additive mask) and log-softmax over
 * the last axis. Each forward is followed by its backward. */
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "tfm/ops.h"
#include "core/broadcast.h"
#include "core/error.h"
#include "core/fastmath.h"

/* What masked_fill(mask == 0, -1e9) writes into the scores. */
#define KEEP_MASK_FILL (-1e9f)

/* The broadcast of mask (operand b) onto x, which must keep x's shape. */
static int mask_broadcast(const char *op, const tfm_tensor *x, const tfm_tensor *mask,
                          tfm_broadcast *bc)
{
    if (tfm__broadcast(op, x, mask, bc) < 0)
        return -1;
    if (bc->ndim != x->ndim || memcmp(tfm__broadcast_shape(bc), x->shape,
                                      (size_t)x->ndim * sizeof x->shape[0]) != 0) {
        char xs[64], ms[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: mask %s does not broadcast to x %s", op,
                  tfm__shape_str(mask, ms, sizeof ms), tfm__shape_str(x, xs, sizeof xs));
        return -1;
    }
    return 0;
}

/* Offset of the mask row that row r of x reads; within the row the mask
 * advances by bc->stride_b[3] (0 or 1). */
static int64_t mask_row(const tfm_broadcast *bc, int64_t r)
{
    int64_t d2 = r % bc->shape[2];
    int64_t d1 = (r / bc->shape[2]) % bc->shape[1];
    int64_t d0 = r / (bc->shape[2] * bc->shape[1]);
    return d0 * bc->stride_b[0] + d1 * bc->stride_b[1] + d2 * bc->stride_b[2];
}

/* y = softmax(s); s may alias y. A row with nothing left (all -inf) is zeros
 * rather than NaN. */
static void softmax_row(const float *s, float *y, int64_t n)
{
    float max = s[0];
#pragma omp simd reduction(max : max)
    for (int64_t j = 1; j < n; j++)
        max = s[j] > max ? s[j] : max;
    if (max == -INFINITY) {
        memset(y, 0, (size_t)n * sizeof *y);
        return;
    }
    float inv = 1.0f / tfm__exp_row(s, max, y, n);
#pragma omp simd
    for (int64_t j = 0; j < n; j++)
        y[j] *= inv;
}

/* dx = y * (g - sum(g * y)) per row. A keep-mask replaced the dropped scores
 * by a constant, so they get no gradient even in a fully dropped (uniform)
 * row; an additive mask gets the same gradient as x. */
static void softmax_backward(tfm_node *node)
{
    const tfm_tensor *mask = node->n_in > 1 ? node->in[1] : NULL;
    const tfm_broadcast *bc = node->saved[0];
    const float *y = tfm__f32(node->out), *g = node->out->grad;
    float *gx = tfm__grad_of(node->in[0]);
    float *gm = mask ? tfm__grad_of(mask) : NULL; /* never for an int32 mask */
    const int32_t *keep = mask && mask->dtype == TFM_I32 ? tfm__i32(mask) : NULL;
    int64_t n = node->out->shape[node->out->ndim - 1], rows = node->out->numel / n;
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * n, *gr = g + r * n;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < n; j++)
            dot += gr[j] * yr[j];
        if (gx && keep) {
            const int32_t *m = keep + mask_row(bc, r);
            int64_t step = bc->stride_b[3];
#pragma omp simd
            for (int64_t j = 0; j < n; j++)
                gx[r * n + j] += m[j * step] ? yr[j] * (gr[j] - dot) : 0.0f;
        } else if (gx) {
#pragma omp simd
            for (int64_t j = 0; j < n; j++)
                gx[r * n + j] += yr[j] * (gr[j] - dot);
        }
        if (gm) {
            float *gmr = gm + mask_row(bc, r);
            int64_t step = bc->stride_b[3];
            for (int64_t j = 0; j < n; j++)
                gmr[j * step] += yr[j] * (gr[j] - dot);
        }
    }
}

tfm_tensor *tfm_softmax(tfm_tape *tape, const tfm_tensor *x, const tfm_tensor *mask)
{
    const char *op = "tfm_softmax";
    if (tfm__check_input(op, "x", x, TFM_F32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    tfm_broadcast bc;
    if (mask && mask_broadcast(op, x, mask, &bc) < 0)
        return NULL;
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, x->ndim, x->shape);
    if (!out)
        return NULL;
    const float *xv = tfm__f32(x);
    float *y = tfm__f32(out);
    int64_t n = x->shape[x->ndim - 1], rows = x->numel / n;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = xv + r * n;
        float *yr = y + r * n;
        if (!mask) {
            softmax_row(xr, yr, n);
            continue;
        }
        /* the masked scores go into y, then softmax in place */
        int64_t off = mask_row(&bc, r), step = bc.stride_b[3];
        if (mask->dtype == TFM_I32) {
            const int32_t *m = tfm__i32(mask) + off;
#pragma omp simd
            for (int64_t j = 0; j < n; j++)
                yr[j] = m[j * step] ? xr[j] : KEEP_MASK_FILL;
        } else {
            const float *m = tfm__f32(mask) + off;
#pragma omp simd
            for (int64_t j = 0; j < n; j++)
                yr[j] = xr[j] + m[j * step];
        }
        softmax_row(yr, yr, n);
    }
    tfm_node *node;
    if (tfm__record(tape, op, out, softmax_backward, mask ? 2 : 1,
                    (const tfm_tensor *[]){x, mask}, &node) < 0)
        return NULL;
    if (node && mask) {
        tfm_broadcast *saved = tfm__scratch(tape, op, sizeof bc);
        if (!saved)
            return NULL;
        *saved = bc;
        node->saved[0] = saved;
    }
    return out;
}

/* --- log_softmax ------------------------------------------------------------- */

/* dx = g - softmax(x) * sum(g) per row, with softmax(x) = exp(y). */
static void log_softmax_backward(tfm_node *node)
{
    const float *y = tfm__f32(node->out), *g = node->out->grad;
    float *gx = tfm__grad_of(node->in[0]);
    int64_t n = node->out->shape[node->out->ndim - 1], rows = node->out->numel / n;
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * n, *gr = g + r * n;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = 0; j < n; j++)
            sum += gr[j];
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            gx[r * n + j] += gr[j] - tfm__expf(yr[j]) * sum;
    }
}

tfm_tensor *tfm_log_softmax(tfm_tape *tape, const tfm_tensor *x)
{
    const char *op = "tfm_log_softmax";
    tfm_tensor *out = tfm__new_like(tape, op, x);
    if (!out)
        return NULL;
    const float *xv = tfm__f32(x);
    float *y = tfm__f32(out);
    int64_t n = x->shape[x->ndim - 1], rows = x->numel / n;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = xv + r * n;
        float *yr = y + r * n;
        float max = xr[0];
#pragma omp simd reduction(max : max)
        for (int64_t j = 1; j < n; j++)
            max = xr[j] > max ? xr[j] : max;
        /* yr holds exp(x - max) until it is overwritten below */
        float log_sum = logf(tfm__exp_row(xr, max, yr, n));
        /* (x - max) first: x - (max + log(sum)) rounds at the scale of x */
        for (int64_t j = 0; j < n; j++)
            yr[j] = (xr[j] - max) - log_sum;
    }
    tfm_node *node;
    if (tfm__record(tape, op, out, log_softmax_backward, 1, (const tfm_tensor *[]){x},
                    &node) < 0)
        return NULL;
    return out;
}
