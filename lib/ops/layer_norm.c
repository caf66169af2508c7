/* Layer norm over the last axis with optional weight and bias, as
 * torch.nn.functional.layer_norm (biased variance), and RMS norm, the same
 * with the mean taken as 0 (T5's T5LayerNorm). Backward uses the mean
 * and 1/std saved per row by the forward. */
#include <math.h>

#include "autograd/tape.h"
#include "ops/layer_norm.h"
#include "tfm/ops.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/parallel.h"

/* node->in is x, then weight and bias when given (ints[0], ints[1] say
 * which); saved[0] and saved[1] are the per-row mean and rstd. */
typedef struct rows_job {
    const float *x, *w, *b, *g, *mean_in, *rstd_in;
    float *y, *mean, *rstd, *gx;
    int64_t n;
    float eps;
    int rms;     /* the mean is 0: RMS norm */
} rows_job;

/* dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)) for rows [begin, end);
 * RMS norm's mean is no function of x, so its mean(g*w) term is 0. */
static TFM__KERNEL(input_grad_rows, (void *ctx, int64_t begin, int64_t end, int worker),
                   (ctx, begin, end, worker))
{
    (void)worker;
    const rows_job *j = ctx;
    int64_t n = j->n;
    for (int64_t r = begin; r < end; r++) {
        const float *xr = j->x + r * n, *gr = j->g + r * n, *w = j->w;
        float mu = j->mean_in[r], rs = j->rstd_in[r], sum_gw = 0.0f, sum_gw_xhat = 0.0f;
#pragma omp simd reduction(+ : sum_gw, sum_gw_xhat)
        for (int64_t i = 0; i < n; i++) {
            float gwi = w ? gr[i] * w[i] : gr[i];
            sum_gw += gwi;
            sum_gw_xhat += gwi * (xr[i] - mu) * rs;
        }
        float a = j->rms ? 0.0f : sum_gw / (float)n, b = sum_gw_xhat / (float)n;
        float *gxr = j->gx + r * n;
#pragma omp simd
        for (int64_t i = 0; i < n; i++) {
            float gwi = w ? gr[i] * w[i] : gr[i];
            gxr[i] += rs * (gwi - a - (xr[i] - mu) * rs * b);
        }
    }
}

/* The parameters' gradients sum over rows: on this thread. */
static TFM__KERNEL(param_grads, (const rows_job *j, int64_t rows, float *gw, float *gb),
                   (j, rows, gw, gb))
{
    int64_t n = j->n;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = j->x + r * n, *gr = j->g + r * n;
        float mu = j->mean_in[r], rs = j->rstd_in[r];
        if (gw)
#pragma omp simd
            for (int64_t i = 0; i < n; i++)
                gw[i] += gr[i] * (xr[i] - mu) * rs;
        if (gb)
#pragma omp simd
            for (int64_t i = 0; i < n; i++)
                gb[i] += gr[i];
    }
}

static void layer_norm_backward(tfm_node *node)
{
    const tfm_tensor *x = node->in[0];
    const tfm_tensor *weight = node->ints[0] ? node->in[1] : NULL;
    const tfm_tensor *bias = node->ints[1] ? node->in[1 + node->ints[0]] : NULL;
    const float *mean = node->saved[0], *rstd = node->saved[1];
    const float *xv = tfm__f32(x), *g = node->out->grad;
    float *gw = weight ? tfm__grad_of(weight) : NULL;
    float *gb = bias ? tfm__grad_of(bias) : NULL;
    int64_t n = x->shape[x->ndim - 1], rows = x->numel / n;
    rows_job j = {.x = xv, .w = weight ? tfm__f32(weight) : NULL, .g = g, .mean_in = mean,
                  .rstd_in = rstd, .gx = tfm__grad_of(x), .n = n, .rms = node->ints[2]};
    if (gw || gb)
        param_grads(&j, rows, gw, gb);
    if (j.gx)
        tfm__parallel_for(rows, tfm__workers_for(x->numel), input_grad_rows, &j);
}

static int check_param(const char *op, const char *what, const tfm_tensor *p,
                       const tfm_tensor *x)
{
    if (tfm__check_input(op, what, p, TFM_F32) < 0)
        return -1;
    int64_t n = x->shape[x->ndim - 1];
    if (p->ndim != 1 || p->shape[0] != n) {
        char ps[64], xs[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: %s %s must be [%lld] for x %s", op, what,
                  tfm__shape_str(p, ps, sizeof ps), (long long)n,
                  tfm__shape_str(x, xs, sizeof xs));
        return -1;
    }
    return 0;
}

static TFM__KERNEL(normalise_rows, (void *ctx, int64_t begin, int64_t end, int worker),
                   (ctx, begin, end, worker))
{
    (void)worker;
    const rows_job *j = ctx;
    int64_t n = j->n;
    const float *w = j->w, *b = j->b;
    for (int64_t r = begin; r < end; r++) {
        const float *xr = j->x + r * n;
        float *yr = j->y + r * n;
        /* two passes: sum((x - mu)^2) does not cancel as E[x^2] - mu^2 does */
        float sum = 0.0f;
        if (!j->rms)
#pragma omp simd reduction(+ : sum)
            for (int64_t i = 0; i < n; i++)
                sum += xr[i];
        float mu = sum / (float)n, sq = 0.0f;
#pragma omp simd reduction(+ : sq)
        for (int64_t i = 0; i < n; i++)
            sq += (xr[i] - mu) * (xr[i] - mu);
        float rs = 1.0f / sqrtf(sq / (float)n + j->eps);
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            yr[i] = (xr[i] - mu) * rs * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
        if (j->mean) {
            j->mean[r] = mu;
            j->rstd[r] = rs;
        }
    }
}

void tfm__layer_norm_rows(const float *x, int64_t rows, int64_t n, const float *w,
                          const float *b, float eps, int rms, float *y, float *mean,
                          float *rstd)
{
    rows_job j = {.x = x, .w = w, .b = b, .y = y, .mean = mean, .rstd = rstd, .n = n,
                  .eps = eps, .rms = rms};
    tfm__parallel_for(rows, tfm__workers_for(rows * n), normalise_rows, &j);
}

/* The output not kept (TFM_RECOMPUTE_NORM_OUTPUTS), computed again from the
 * input as in the forward; the same bits, as a row's values do not depend
 * on the split among threads. */
static void recompute_output(tfm_node *node)
{
    const tfm_tensor *x = node->in[0];
    const tfm_tensor *weight = node->ints[0] ? node->in[1] : NULL;
    const tfm_tensor *bias = node->ints[1] ? node->in[1 + node->ints[0]] : NULL;
    int64_t n = x->shape[x->ndim - 1];
    tfm__layer_norm_rows(tfm__f32(x), x->numel / n, n, weight ? tfm__f32(weight) : NULL,
                         bias ? tfm__f32(bias) : NULL, node->floats[0], node->ints[2],
                         tfm__f32(node->out), NULL, NULL);
}

static tfm_tensor *layer_norm(const char *op, tfm_tape *tape, const tfm_tensor *x,
                              const tfm_tensor *weight, const tfm_tensor *bias, float eps,
                              int rms, int recomputed)
{
    if (tfm__check_input(op, "x", x, TFM_F32) < 0 || tfm__check_tape(op, tape) < 0 ||
        (weight && check_param(op, "weight", weight, x) < 0) ||
        (bias && check_param(op, "bias", bias, x) < 0))
        return NULL;
    if (!isfinite(eps) || eps < 0.0f) {
        tfm__fail(TFM_ERR_ARG, "%s: eps %g must be finite and >= 0", op, (double)eps);
        return NULL;
    }
    const tfm_tensor *in[3] = {x};
    int32_t n_in = 1;
    if (weight)
        in[n_in++] = weight;
    if (bias)
        in[n_in++] = bias;
    int64_t n = x->shape[x->ndim - 1], rows = x->numel / n;
    tfm_tensor *out =
        recomputed ? tfm__new_recomputed(tape, op, TFM__RECOMPUTED_NORM, n_in, in, x->ndim, x->shape)
                   : tfm__new_output(tape, op, TFM_F32, x->ndim, x->shape);
    if (!out)
        return NULL;
    float *mean = NULL, *rstd = NULL;
    if (tfm__wants_grad(tape, n_in, in)) {
        mean = tfm__scratch(tape, op, 2 * (size_t)rows * sizeof *mean);
        if (!mean)
            return NULL;
        rstd = mean + rows;
    }
    const float *xv = tfm__f32(x);
    const float *w = weight ? tfm__f32(weight) : NULL, *b = bias ? tfm__f32(bias) : NULL;
    float *y = tfm__f32(out);
    tfm__layer_norm_rows(xv, rows, n, w, b, eps, rms, y, mean, rstd);
    tfm_node *node;
    if (tfm__record(tape, op, out, layer_norm_backward, n_in, in, &node) < 0)
        return NULL;
    if (node) {
        node->ints[0] = weight != NULL;
        node->ints[1] = bias != NULL;
        node->ints[2] = rms;
        node->saved[0] = mean;
        node->saved[1] = rstd;
        node->floats[0] = eps;
        if (out->recomputed)
            node->recompute = recompute_output;
    }
    return out;
}

tfm_tensor *tfm_layer_norm(tfm_tape *tape, const tfm_tensor *x, const tfm_tensor *weight,
                           const tfm_tensor *bias, float eps)
{
    return layer_norm("tfm_layer_norm", tape, x, weight, bias, eps, 0, 0);
}

tfm_tensor *tfm_rms_norm(tfm_tape *tape, const tfm_tensor *x, const tfm_tensor *weight,
                         float eps)
{
    return layer_norm("tfm_rms_norm", tape, x, weight, NULL, eps, 1, 0);
}

tfm_tensor *tfm__layer_norm_recomputed(tfm_tape *tape, const char *op, const tfm_tensor *x,
                                       const tfm_tensor *weight, const tfm_tensor *bias,
                                       float eps, int rms)
{
    return layer_norm(op, tape, x, weight, bias, eps, rms, 1);
}
