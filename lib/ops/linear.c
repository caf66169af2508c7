/* Linear layers' op: y = x W^T + b as one GEMM that adds the bias, fused
 * with what follows a linear layer in a transformer:
 *   PLAIN     y;
 *   RELU      dropout(relu(y)), the feed-forward's hidden layer: the
 *             backward needs only the output, positive exactly where the
 *             pre-activation was positive and kept;
 *   RESIDUAL  residual + dropout(y), a sublayer's last linear and its
 *             residual connection: the backward regenerates the mask from
 *             its counter-based hash.
 * Each keeps one tape tensor where the ops apart would keep up to four. */
#include "ops/linear.h"

#include "ops/adapter.h"

#include <limits.h>
#include <string.h>

#include "tfm/ops.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/gemm_int8.h"
#include "core/parallel.h"
#include "core/rng.h"

enum { PLAIN, RELU, RESIDUAL };

/* The elementwise parts, split among libtfm's threads by element. */
typedef struct elementwise_job {
    int mode;
    float p, keep_scale;
    tfm__mask_key mask;
    float *y;               /* forward: the output, holding the GEMM's result */
    const float *bias;      /* forward: added to every row of the product, or NULL */
    int64_t out;            /* forward: y's row length */
    const float *residual;  /* forward */
    float *g;               /* backward: the output's gradient, made dL/dy */
    float *g_residual;      /* backward: the residual's gradient, or NULL */
} elementwise_job;

static TFM__KERNEL(finish_output, (void *ctx, int64_t begin, int64_t end, int worker),
                   (ctx, begin, end, worker))
{
    (void)worker;
    /* The job's fields in locals: read through j, a store to y could
     * change them, and the hash's loops would stay scalar. */
    const elementwise_job *j = ctx;
    float *y = j->y, keep_scale = j->keep_scale;
    const float *residual = j->residual;
    uint32_t threshold = tfm__counter_threshold(j->p), first = j->mask.first;
    uint64_t key = j->mask.key;
    /* relu as !(y <= 0): NaN fails the test and passes on, as in PyTorch */
    if (j->mode == RELU && j->p > 0.0f)
#pragma omp simd
        for (int64_t i = begin; i < end; i++)
            y[i] = !(y[i] <= 0.0f) ? tfm__dropped(key, first + (uint32_t)i, threshold, y[i],
                                                  keep_scale)
                                   : 0.0f;
    else if (j->mode == RELU)
        for (int64_t i = begin; i < end; i++)
            y[i] = y[i] <= 0.0f ? 0.0f : y[i];
    else if (j->mode == RESIDUAL && j->p > 0.0f)
#pragma omp simd
        for (int64_t i = begin; i < end; i++)
            y[i] = residual[i] + tfm__dropped(key, first + (uint32_t)i, threshold, y[i],
                                              keep_scale);
    else if (j->mode == RESIDUAL)
        for (int64_t i = begin; i < end; i++)
            y[i] += residual[i];
}

static TFM__KERNEL(gradient_of_product, (void *ctx, int64_t begin, int64_t end, int worker),
                   (ctx, begin, end, worker))
{
    (void)worker;
    const elementwise_job *j = ctx; /* its fields in locals, as finish_output's */
    float *g = j->g, *g_residual = j->g_residual, keep_scale = j->keep_scale;
    if (j->mode == RESIDUAL) {
        if (g_residual)
            for (int64_t i = begin; i < end; i++)
                g_residual[i] += g[i];
        if (j->p > 0.0f) {
            uint32_t threshold = tfm__counter_threshold(j->p), first = j->mask.first;
            uint64_t key = j->mask.key;
#pragma omp simd
            for (int64_t i = begin; i < end; i++)
                g[i] = tfm__dropped(key, first + (uint32_t)i, threshold, g[i], keep_scale);
        }
    } else if (j->mode == RELU) {
        const float *y = j->y;
        for (int64_t i = begin; i < end; i++)
            g[i] = y[i] > 0.0f ? g[i] * keep_scale : 0.0f;
    }
}

/* gb += the sum of g's rows. */
static TFM__KERNEL(bias_grad, (const float *g, int64_t rows, int64_t out, float *gb),
                   (g, rows, out, gb))
{
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = g + r * out;
#pragma omp simd
        for (int64_t i = 0; i < out; i++)
            gb[i] += gr[i];
    }
}

/* The tape's packed copy of weight w with this bias (a decoding's
 * encoder's), or NULL. A few dozen entries at most: one per encoder
 * linear layer. */
static const tfm__packed_linear *packed_of(const tfm_tape *tape, const tfm_tensor *w,
                                           const float *bias)
{
    for (int64_t i = 0; i < tape->n_packed; i++)
        if (tape->packed[i].weight == w)
            return tape->packed[i].bias == bias ? &tape->packed[i] : NULL;
    return NULL;
}

/* j->y [rows, j->out] = the op's output for x [rows, in], weight w: its
 * packed copy (NULL: none), its int8 parts when the model was quantized
 * (tfm_model_quantize), else (or when the bfloat16 or int8 kernel's buffer
 * cannot be had) its float32 values; the adapter's terms (NULL: none) added
 * before the activation or residual. */
static void compute_output(const elementwise_job *j, const float *x, const tfm_tensor *w,
                           const tfm__packed_linear *packed, const tfm__adapter_run *adapter,
                           int64_t rows, int64_t in)
{
    int64_t n = rows * j->out;
    int done = packed && tfm__packed_product(&packed->product, x, rows, j->y, j->out) == 0;
    if (!done && (!w->int8 || tfm__int8_tensor_product(w, 0, j->out, rows, x, j->y, j->out) < 0))
        tfm__sgemm_bias(0, 1, rows, j->out, in, 1.0f, x, in, tfm__f32(w), in, j->bias, j->y,
                        j->out);
    if (adapter)
        tfm__adapter_forward(adapter, x, j->y, rows, in, j->out);
    if (j->mode != PLAIN)
        tfm__parallel_for(n, tfm__workers_for(n), finish_output, (void *)j);
}

/* The output not kept (a feed-forward's hidden layer), computed again as in
 * the forward. */
static void recompute_output(tfm_node *hidden)
{
    const tfm_tensor *b = hidden->in[2];
    elementwise_job j = {
        .mode = (int)hidden->ints[3], .p = hidden->floats[0], .keep_scale = hidden->floats[1],
        .mask = {(uint64_t)hidden->ints[4], (uint32_t)hidden->ints[5]},
        .y = tfm__f32(hidden->out), .bias = b ? tfm__f32(b) : NULL, .out = hidden->ints[2],
    };
    compute_output(&j, tfm__f32(hidden->in[0]), hidden->in[1], NULL, NULL, hidden->ints[0],
                   hidden->ints[1]);
}

/* node->in: x, weight, bias, residual, then each adapter entry's A and B.
 * ints: rows, in, out, mode, the dropout mask's key and first counter;
 * floats: p, 1 / (1 - p); saved[0]: the adapter's run, or NULL. */
static void linear_backward(tfm_node *node)
{
    const tfm_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
    int rows = (int)node->ints[0], in = (int)node->ints[1], out = (int)node->ints[2];
    int64_t n = node->out->numel;
    /* the output's gradient is this op's own: rewritten in place as dL/dy */
    elementwise_job j = {
        .mode = (int)node->ints[3], .p = node->floats[0], .keep_scale = node->floats[1],
        .mask = {(uint64_t)node->ints[4], (uint32_t)node->ints[5]},
        .y = tfm__f32(node->out), .g = node->out->grad,
        .g_residual = node->in[3] ? tfm__grad_of(node->in[3]) : NULL,
    };
    if (j.mode != PLAIN)
        tfm__parallel_for(n, tfm__workers_for(n), gradient_of_product, &j);
    const float *g = j.g;
    float *gx = tfm__grad_of(x), *gw = tfm__grad_of(w), *gb = b ? tfm__grad_of(b) : NULL;
    if (node->saved[0])
        tfm__adapter_backward(node->saved[0], tfm__f32(x), g, gx, rows, in, out);
    if (gx)
        tfm__sgemm(0, 0, rows, in, out, 1.0f, g, out, tfm__f32(w), in, 1.0f, gx, in);
    if (gw)
        tfm__sgemm(1, 0, out, in, rows, 1.0f, g, out, tfm__f32(x), in, 1.0f, gw, in);
    if (gb)
        bias_grad(g, rows, out, gb);
}

/* Dropout with probability p from rng follows the activation in training;
 * p is checked either way, as tfm_dropout checks it. recomputed: a
 * recorded output is not kept but computed again in the backward (a
 * feed-forward's hidden layer, read only by the next linear). */
static tfm_tensor *linear(const char *op, tfm_tape *tape, const tfm_tensor *x,
                          const tfm_tensor *w, const tfm_tensor *b, int mode, float p,
                          int training, tfm_rng *rng, const tfm_tensor *residual,
                          int recomputed)
{
    if (tfm__check_input(op, "x", x, TFM_F32) < 0 ||
        tfm__check_input(op, "weight", w, TFM_F32) < 0 ||
        (b && tfm__check_input(op, "bias", b, TFM_F32) < 0) ||
        (mode == RESIDUAL && tfm__check_input(op, "residual", residual, TFM_F32) < 0) ||
        tfm__check_tape(op, tape) < 0)
        return NULL;
    char xs[64], ws[64], bs[64];
    int64_t in = x->shape[x->ndim - 1];
    if (w->ndim != 2 || w->shape[1] != in || (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))) {
        tfm__fail(TFM_ERR_SHAPE, "%s: x %s, weight %s and bias %s do not fit x [..., in], "
                  "weight [out, in], bias [out]", op, tfm__shape_str(x, xs, sizeof xs),
                  tfm__shape_str(w, ws, sizeof ws), b ? tfm__shape_str(b, bs, sizeof bs) : "none");
        return NULL;
    }
    if (!(p >= 0.0f && p < 1.0f)) {
        tfm__fail(TFM_ERR_ARG, "%s: p %g is outside [0, 1)", op, (double)p);
        return NULL;
    }
    if (!training)
        p = 0.0f;
    if (p > 0.0f && !rng) {
        tfm__fail(TFM_ERR_NULL, "%s: rng is NULL (needed in training with p > 0)", op);
        return NULL;
    }
    int64_t out_features = w->shape[0], rows = x->numel / in;
    if (rows > INT_MAX || in > INT_MAX || out_features > INT_MAX) {
        tfm__fail(TFM_ERR_SIZE, "%s: x %s exceeds the BLAS int range", op,
                  tfm__shape_str(x, xs, sizeof xs));
        return NULL;
    }
    int64_t shape[TFM_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = out_features;
    if (mode == RESIDUAL && (residual->ndim != x->ndim ||
                             memcmp(residual->shape, shape, (size_t)x->ndim * sizeof *shape))) {
        tfm__fail(TFM_ERR_SHAPE, "%s: residual %s is not the output's shape", op,
                  tfm__shape_str(residual, xs, sizeof xs));
        return NULL;
    }
    tfm__adapter_run *adapter = NULL;
    if (tape->adapter && tfm__adapter_begin(tape, op, tfm__f32(w), out_features, tfm__f32(x),
                                            rows, in, &adapter) < 0)
        return NULL;
    const tfm_tensor *inputs[4 + 2 * TFM__ADAPTED_PER_PRODUCT] = {
        x, w, b, mode == RESIDUAL ? residual : NULL};
    int32_t n_in = 4;
    for (int k = 0; adapter && k < adapter->count; k++) {
        inputs[n_in++] = adapter->entries[k]->a;
        inputs[n_in++] = adapter->entries[k]->b;
    }
    if (adapter) /* its terms precede the activation: the hidden layer is kept */
        recomputed = 0;
    tfm_tensor *y =
        recomputed ? tfm__new_recomputed(tape, op, TFM__RECOMPUTED_HIDDEN, 4, inputs, x->ndim, shape)
                   : tfm__new_output(tape, op, TFM_F32, x->ndim, shape);
    if (!y)
        return NULL;
    /* the mask tfm_dropout would draw from the same rng */
    elementwise_job j = {
        .mode = mode, .p = p, .keep_scale = 1.0f / (1.0f - p),
        .mask = p > 0.0f ? tfm__rng_mask_key(rng, rows * out_features) : (tfm__mask_key){0, 0},
        .y = tfm__f32(y), .bias = b ? tfm__f32(b) : NULL,
        .out = out_features, .residual = residual ? tfm__f32(residual) : NULL,
    };
    compute_output(&j, tfm__f32(x), w, packed_of(tape, w, j.bias), adapter, rows, in);
    tfm_node *node;
    if (tfm__record(tape, op, y, linear_backward, n_in, inputs, &node) < 0)
        return NULL;
    if (node) {
        node->saved[0] = adapter;
        const int64_t ints[6] = {rows, in, out_features, mode, (int64_t)j.mask.key,
                                 j.mask.first};
        for (int i = 0; i < 6; i++)
            node->ints[i] = ints[i];
        node->floats[0] = p;
        node->floats[1] = j.keep_scale;
        if (y->recomputed)
            node->recompute = recompute_output;
    }
    return y;
}

tfm_tensor *tfm_linear(tfm_tape *tape, const tfm_tensor *x, const tfm_tensor *weight,
                       const tfm_tensor *bias)
{
    return linear("tfm_linear", tape, x, weight, bias, PLAIN, 0.0f, 0, NULL, NULL, 0);
}

tfm_tensor *tfm_linear_relu(tfm_tape *tape, const tfm_tensor *x, const tfm_tensor *weight,
                            const tfm_tensor *bias)
{
    return linear("tfm_linear_relu", tape, x, weight, bias, RELU, 0.0f, 0, NULL, NULL, 0);
}

tfm_tensor *tfm_linear_relu_dropout(tfm_tape *tape, const tfm_tensor *x,
                                    const tfm_tensor *weight, const tfm_tensor *bias, float p,
                                    int32_t training, tfm_rng *rng)
{
    return linear("tfm_linear_relu_dropout", tape, x, weight, bias, RELU, p, training, rng, NULL,
                  0);
}

tfm_tensor *tfm__linear_residual(tfm_tape *tape, const char *op, const tfm_tensor *x,
                                 const tfm_tensor *weight, const tfm_tensor *bias, float p,
                                 tfm_rng *rng, const tfm_tensor *residual)
{
    return linear(op, tape, x, weight, bias, RESIDUAL, p, 1, rng, residual, 0);
}

tfm_tensor *tfm__feed_forward_residual(tfm_tape *tape, const char *op, const tfm_tensor *x,
                                       const tfm__linear_params *first,
                                       const tfm__linear_params *second,
                                       const tfm_tensor *residual)
{
    tfm_tensor *hidden = linear(op, tape, x, first->weight, first->bias, RELU, first->p,
                                first->training, first->rng, NULL, 1);
    return hidden ? linear(op, tape, hidden, second->weight, second->bias, RESIDUAL, second->p,
                           second->training, second->rng, residual, 0)
                  : NULL;
}
