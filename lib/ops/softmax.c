/* Softmax (with an optional keep-mask or additive mask) and log-softmax over
 * the last axis. Each forward is followed by its backward. */
#include <math.h>
#include <string.h>

#include "ops/softmax.h"

#include "autograd/tape.h"
#include "tfm/ops.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/fastmath.h"
#include "core/vectors.h"

int tfm__mask_broadcast(const char *op, const tfm_tensor *x, const tfm_tensor *mask,
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

/* The largest of s [n], 16 at a time (the tail as the last 16, which
 * overlap the blocks before it). */
TFM__INLINE float row_max(const float *s, int64_t n)
{
    if (n < 16) {
        float max = s[0];
        for (int64_t j = 1; j < n; j++)
            max = s[j] > max ? s[j] : max;
        return max;
    }
    vec16 max = load16(s);
    for (int64_t j = 16; j + 16 <= n; j += 16)
        max = max_lanes(max, load16(s + j));
    return max16(n % 16 ? max_lanes(max, load16(s + n - 16)) : max);
}

/* A row with nothing left (all -inf) is zeros rather than NaN: a query
 * whose keys are all masked attends to nothing. */
TFM__INLINE void softmax_row(const float *s, float *y, int64_t n)
{
    float max = row_max(s, n);
    if (max == -INFINITY) {
        memset(y, 0, (size_t)n * sizeof *y);
        return;
    }
    float inv = 1.0f / tfm__exp_row(s, max, y, n);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
        store16(y + j, load16(y + j) * inv);
    for (; j < n; j++)
        y[j] *= inv;
}

TFM__KERNEL(tfm__softmax_row, (const float *x, float *y, int64_t n, const tfm_tensor *mask,
                                const tfm_broadcast *bc, int64_t r),
            (x, y, n, mask, bc, r))
{
    if (mask) {
        /* the masked scores go into y, then softmax in place; a keep-mask's
         * dropped score is -inf, as an additive mask's, so both forms give
         * the same weights, zeros in a row with no key kept */
        int64_t off = tfm__mask_row(bc, r), step = bc->stride_b[3];
        if (mask->dtype == TFM_I32) {
            const int32_t *m = tfm__i32(mask) + off;
#pragma omp simd
            for (int64_t j = 0; j < n; j++)
                y[j] = m[j * step] ? x[j] : -INFINITY;
        } else {
            const float *m = tfm__f32(mask) + off;
#pragma omp simd
            for (int64_t j = 0; j < n; j++)
                y[j] = x[j] + m[j * step];
        }
        x = y;
    }
    softmax_row(x, y, n);
}

/* Masked positions, and every position of a row with no key kept, have
 * y = 0: they get no gradient, in either mask form. */
TFM__KERNEL(tfm__softmax_grad_row, (const float *y, const float *g, int64_t n, float *dx,
                                     int accumulate),
            (y, g, n, dx, accumulate))
{
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < n; j++)
        dot += g[j] * y[j];
    if (accumulate) {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            dx[j] += y[j] * (g[j] - dot);
    } else {
#pragma omp simd
        for (int64_t j = 0; j < n; j++)
            dx[j] = y[j] * (g[j] - dot);
    }
}

/* dx = y * (g - sum(g * y)) per row; a float32 mask that requires grad
 * gets the same as x. */
static void softmax_backward(tfm_node *node)
{
    const tfm_tensor *mask = node->n_in > 1 ? node->in[1] : NULL;
    const tfm_broadcast *bc = node->saved[0];
    const float *y = tfm__f32(node->out), *g = node->out->grad;
    float *gx = tfm__grad_of(node->in[0]);
    float *gm = mask ? tfm__grad_of(mask) : NULL; /* never for an int32 mask */
    int64_t n = node->out->shape[node->out->ndim - 1], rows = node->out->numel / n;
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * n, *gr = g + r * n;
        if (gx)
            tfm__softmax_grad_row(yr, gr, n, gx + r * n, 1);
        if (gm) {
            float dot = 0.0f;
            for (int64_t j = 0; j < n; j++)
                dot += gr[j] * yr[j];
            float *gmr = gm + tfm__mask_row(bc, r);
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
    if (mask && (tfm__check_tensor(op, "mask", mask) < 0 ||
                 tfm__mask_broadcast(op, x, mask, &bc) < 0))
        return NULL;
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, x->ndim, x->shape);
    if (!out)
        return NULL;
    const float *xv = tfm__f32(x);
    float *y = tfm__f32(out);
    int64_t n = x->shape[x->ndim - 1], rows = x->numel / n;
    for (int64_t r = 0; r < rows; r++)
        tfm__softmax_row(xv + r * n, y + r * n, n, mask, &bc, r);
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

/* The value `max = x[j] > max ? x[j] : max` from max = x[0] ends at (a
 * NaN first stays, later ones are passed over), n >= 1, in independent
 * lanes: each compare had waited on the one before, 3/5 of a
 * vocabulary's log-sum-exp. Lanes may find another of two equal zeros
 * of the largest, the same value. */
TFM__INLINE float largest_of(const float *restrict x, int64_t n)
{
    enum { LANES = 64 };
    float lanes[LANES], max = x[0];
    int64_t j = 1;
    if (n > LANES) {
        for (int l = 0; l < LANES; l++)
            lanes[l] = x[0];
        for (; j + LANES <= n; j += LANES)
#pragma omp simd
            for (int l = 0; l < LANES; l++)
                lanes[l] = x[j + l] > lanes[l] ? x[j + l] : lanes[l];
        for (int l = 0; l < LANES; l++)
            max = lanes[l] > max ? lanes[l] : max;
    }
    for (; j < n; j++)
        max = x[j] > max ? x[j] : max;
    return max;
}

/* A row's log-sum-exp (and sum) at the CPU's best level: tfm__expf in
 * vectors, where libm's expf is a call an element (a vocabulary's worth a
 * token: an eighth of greedy decoding, a sixth of a translation model's
 * training step). Float sums of 1,024 terms, each exp at most 1, added in
 * double. */
static TFM__KERNEL(log_sum_exp_row,
                   (const float *restrict x, int64_t n, double *restrict lse,
                    double *restrict sum),
                   (x, n, lse, sum))
{
    float max = largest_of(x, n);
    enum { CHUNK = 1024 };
    double total = 0.0, plain = 0.0;
    for (int64_t start = 0; start < n; start += CHUNK) {
        int64_t end = n - start < CHUNK ? n : start + CHUNK;
        float part = 0.0f, part_x = 0.0f;
#pragma omp simd reduction(+ : part, part_x)
        for (int64_t j = start; j < end; j++) {
            part += tfm__expf(x[j] - max);
            part_x += x[j];
        }
        total += part;
        plain += part_x;
    }
    *lse = (double)max + log(total);
    if (sum)
        *sum = plain;
}

double tfm__log_sum_exp(const float *x, int64_t n, double *sum)
{
    double lse;
    log_sum_exp_row(x, n, &lse, sum);
    return lse;
}

static TFM__KERNEL(subtract_row, (float *x, int64_t n, double value), (x, n, value))
{
#pragma omp simd
    for (int64_t j = 0; j < n; j++)
        x[j] = (float)(x[j] - value);
}

double tfm__log_normalise(float *x, int64_t n)
{
    double lse = tfm__log_sum_exp(x, n, NULL);
    if (isfinite(lse))
        subtract_row(x, n, lse);
    return lse;
}

static TFM__KERNEL(argmax_row, (const float *restrict x, int64_t n, int64_t *restrict best),
                   (x, n, best))
{
    float max = largest_of(x, n);
    int64_t j = 0;
    while (j < n && !(x[j] == max))
        j++;
    *best = j < n ? j : 0; /* a NaN first: none equals it */
}

int64_t tfm__argmax(const float *x, int64_t n)
{
    int64_t best;
    argmax_row(x, n, &best);
    return best;
}

/* dx = g - softmax(x) * sum(g) per row, with softmax(x) = exp(y). */
static TFM__KERNEL(log_softmax_grad_rows,
                   (const float *y, const float *g, float *gx, int64_t rows, int64_t n),
                   (y, g, gx, rows, n))
{
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

static void log_softmax_backward(tfm_node *node)
{
    int64_t n = node->out->shape[node->out->ndim - 1];
    log_softmax_grad_rows(tfm__f32(node->out), node->out->grad, tfm__grad_of(node->in[0]),
                          node->out->numel / n, n);
}

static TFM__KERNEL(log_softmax_rows, (const float *x, float *y, int64_t rows, int64_t n),
                   (x, y, rows, n))
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
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
}

tfm_tensor *tfm_log_softmax(tfm_tape *tape, const tfm_tensor *x)
{
    const char *op = "tfm_log_softmax";
    tfm_tensor *out = tfm__new_like(tape, op, x);
    if (!out)
        return NULL;
    int64_t n = x->shape[x->ndim - 1];
    log_softmax_rows(tfm__f32(x), tfm__f32(out), x->numel / n, n);
    tfm_node *node;
    if (tfm__record(tape, op, out, log_softmax_backward, 1, (const tfm_tensor *[]){x},
                    &node) < 0)
        return NULL;
    return out;
}
