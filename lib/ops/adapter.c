/* The adapted linear's kernels, forward and backward side by side (see
 * ops/adapter.h): u = dropout(x) A^T, y += scale u B^T; the backward
 * gu = scale g B, dB += scale g^T u, dA += gu^T dropout(x) and
 * dx += dropout'(gu A). */
#include "ops/adapter.h"

#include <cblas.h>

#include "core/error.h"
#include "core/gemm.h"
#include "core/rng.h"
#include "core/thread_buffer.h"

int tfm__adapter_find(const tfm__adapter_set *set, const float *rows_data, int64_t rows,
                      int64_t in, const tfm__adapted **found, int64_t *columns)
{
    int n = 0;
    for (int64_t i = 0; set && i < set->count && n < TFM__ADAPTED_PER_PRODUCT; i++) {
        const tfm__adapted *e = &set->entries[i];
        const float *base = tfm__f32(e->weight);
        if (e->weight->shape[1] != in || rows_data < base ||
            rows_data >= base + e->weight->numel)
            continue;
        int64_t first_row = (rows_data - base) / in; /* of the weight, in the product */
        if (e->first >= first_row && e->first + e->rows <= first_row + rows) {
            found[n] = e;
            columns[n++] = e->first - first_row;
        }
    }
    return n;
}

/* out[i, column + j] += scale * (B A x_i)_j row by row, A x_i on the stack:
 * when the thread's buffer cannot be had. */
static void add_row_by_row(const tfm__adapted *e, int64_t r, float scale, int64_t in,
                           const float *x, int64_t n, float *out, int64_t ldc)
{
    const float *a = tfm__f32(e->a), *b = tfm__f32(e->b);
    float u[TFM__ADAPTER_MAX_RANK];
    for (int64_t i = 0; i < n; i++) {
        const float *xi = x + i * in;
        for (int64_t j = 0; j < r; j++) {
            float sum = 0.0f;
            for (int64_t c = 0; c < in; c++)
                sum += a[j * in + c] * xi[c];
            u[j] = scale * sum;
        }
        float *yi = out + i * ldc;
        for (int64_t o = 0; o < e->rows; o++) {
            float sum = 0.0f;
            for (int64_t j = 0; j < r; j++)
                sum += b[o * r + j] * u[j];
            yi[o] += sum;
        }
    }
}

void tfm__adapter_add_rows(const tfm__adapter_set *set, const float *rows_data, int64_t rows,
                           int64_t in, const float *x, int64_t n, float *out, int64_t ldc)
{
    const tfm__adapted *found[TFM__ADAPTED_PER_PRODUCT];
    int64_t columns[TFM__ADAPTED_PER_PRODUCT];
    int count = tfm__adapter_find(set, rows_data, rows, in, found, columns);
    int r = set->rank;
    /* cblas itself, not tfm__sgemm: its bfloat16 kernel would pack into
     * the same thread buffer */
    float *u = count ? tfm__thread_buffer((size_t)(n * r) * sizeof(float)) : NULL;
    for (int k = 0; k < count; k++) {
        const tfm__adapted *e = found[k];
        if (!u) {
            add_row_by_row(e, r, set->scale, in, x, n, out + columns[k], ldc);
            continue;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, r, (int)in, 1.0f, x,
                    (int)in, tfm__f32(e->a), (int)in, 0.0f, u, r);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)e->rows, r,
                    set->scale, u, r, tfm__f32(e->b), r, 1.0f, out + columns[k], (int)ldc);
    }
}

int tfm__adapter_begin(tfm_tape *tape, const char *op, const float *rows_data, int64_t w_rows,
                       const float *x, int64_t rows, int64_t in, tfm__adapter_run **out)
{
    *out = NULL;
    const tfm__adapter_set *set = tape->adapter;
    const tfm__adapted *found[TFM__ADAPTED_PER_PRODUCT];
    int64_t columns[TFM__ADAPTED_PER_PRODUCT];
    int count = tfm__adapter_find(set, rows_data, w_rows, in, found, columns);
    if (!count)
        return 0;
    float p = set->training && !tfm__tape_evaluating(tape) ? set->dropout : 0.0f;
    size_t ur = (size_t)(rows * set->rank) * sizeof(float);
    tfm__adapter_run *run = tfm__scratch(tape, op, sizeof *run);
    if (!run)
        return -1;
    *run = (tfm__adapter_run){.count = count, .scale = set->scale};
    for (int k = 0; k < count; k++) {
        run->entries[k] = found[k];
        run->columns[k] = columns[k];
        if (!(run->u[k] = tfm__scratch(tape, op, ur)) ||
            (tape->recording && !(run->gu[k] = tfm__scratch(tape, op, ur))))
            return -1;
    }
    if (p > 0.0f) {
        if (!(run->xd = tfm__scratch(tape, op, (size_t)(rows * in) * sizeof(float))))
            return -1;
        tfm__mask_key mask = tfm__rng_mask_key(set->rng, rows * in);
        run->key = mask.key;
        run->first = mask.first;
        run->threshold = tfm__counter_threshold(p);
        run->keep_scale = 1.0f / (1.0f - p);
        for (int64_t i = 0; i < rows * in; i++)
            run->xd[i] = tfm__dropped(run->key, run->first + (uint32_t)i, run->threshold, x[i],
                                      run->keep_scale);
    }
    *out = run;
    return 0;
}

void tfm__adapter_forward(const tfm__adapter_run *run, const float *x, float *y, int64_t rows,
                          int64_t in, int64_t out)
{
    const float *xd = run->xd ? run->xd : x;
    for (int k = 0; k < run->count; k++) {
        const tfm__adapted *e = run->entries[k];
        int64_t r = e->a->shape[0];
        tfm__sgemm(0, 1, rows, r, in, 1.0f, xd, in, tfm__f32(e->a), in, 0.0f, run->u[k], r);
        tfm__sgemm(0, 1, rows, e->rows, r, run->scale, run->u[k], r, tfm__f32(e->b), r, 1.0f,
                   y + run->columns[k], out);
    }
}

void tfm__adapter_backward(const tfm__adapter_run *run, const float *x, const float *g,
                           float *gx, int64_t rows, int64_t in, int64_t out)
{
    float *xd = run->xd;
    for (int k = 0; k < run->count; k++) {
        const tfm__adapted *e = run->entries[k];
        int64_t r = e->a->shape[0];
        const float *gk = g + run->columns[k];
        float *ga = tfm__grad_of(e->a), *gb = tfm__grad_of(e->b), *gu = run->gu[k];
        if (gb)
            tfm__sgemm(1, 0, e->rows, r, rows, run->scale, gk, out, run->u[k], r, 1.0f, gb, r);
        tfm__sgemm(0, 0, rows, r, e->rows, run->scale, gk, out, tfm__f32(e->b), r, 0.0f, gu, r);
        if (ga)
            tfm__sgemm(1, 0, r, in, rows, 1.0f, gu, r, xd ? xd : x, in, 1.0f, ga, in);
    }
    if (!gx)
        return;
    /* dx: through dropout when there is one, its buffer no longer needed */
    float *sum = xd ? xd : gx;
    for (int k = 0; k < run->count; k++) {
        const tfm__adapted *e = run->entries[k];
        int64_t r = e->a->shape[0];
        tfm__sgemm(0, 0, rows, in, r, 1.0f, run->gu[k], r, tfm__f32(e->a), in,
                   xd && k == 0 ? 0.0f : 1.0f, sum, in);
    }
    if (xd)
        for (int64_t i = 0; i < rows * in; i++)
            gx[i] += tfm__dropped(run->key, run->first + (uint32_t)i, run->threshold, xd[i],
                                  run->keep_scale);
}
