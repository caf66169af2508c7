/* Linear layers' op: y = x W^T + b, optionally through ReLU and dropout, as
 * one GEMM into rows pre-filled with the bias. Fusing the bias, the
 * activation and the dropout saves three passes over the output and three
 * tape tensors of its size per feed-forward layer: the backward needs only
 * y, positive exactly where the pre-activation was positive and kept. */
#include <cblas.h>
#include <limits.h>
#include <string.h>

#include "autograd/tape.h"
#include "tfm/ops.h"
#include "core/error.h"
#include "core/rng.h"

/* node->ints: rows, in, out, relu; floats[0]: the dropout's 1 / (1 - p). */
static void linear_backward(tfm_node *node)
{
    const tfm_tensor *x = node->in[0], *w = node->in[1], *b = node->in[2];
    int rows = (int)node->ints[0], in = (int)node->ints[1], out = (int)node->ints[2];
    float *g = node->out->grad; /* this op's own; nothing reads it after us */
    if (node->ints[3]) {
        const float *y = tfm__f32(node->out);
        float scale = node->floats[0];
        for (int64_t i = 0; i < node->out->numel; i++)
            g[i] = y[i] > 0.0f ? g[i] * scale : 0.0f;
    }
    float *gx = tfm__grad_of(x), *gw = tfm__grad_of(w), *gb = b ? tfm__grad_of(b) : NULL;
    if (gx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, in, out, 1.0f, g, out,
                    tfm__f32(w), in, 1.0f, gx, in);
    if (gw)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, rows, 1.0f, g, out,
                    tfm__f32(x), in, 1.0f, gw, in);
    if (gb)
        for (int64_t r = 0; r < rows; r++) {
            const float *gr = g + r * out;
#pragma omp simd
            for (int j = 0; j < out; j++)
                gb[j] += gr[j];
        }
}

/* relu: apply ReLU, then dropout with probability p (0: none) from rng. */
static tfm_tensor *linear(const char *op, tfm_tape *tape, const tfm_tensor *x,
                          const tfm_tensor *w, const tfm_tensor *b, int relu, float p,
                          tfm_rng *rng)
{
    if (tfm__check_input(op, "x", x, TFM_F32) < 0 ||
        tfm__check_input(op, "weight", w, TFM_F32) < 0 ||
        (b && tfm__check_input(op, "bias", b, TFM_F32) < 0) || tfm__check_tape(op, tape) < 0)
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
    if (p > 0.0f && !rng) {
        tfm__fail(TFM_ERR_NULL, "%s: rng is NULL (needed in training with p > 0)", op);
        return NULL;
    }
    int64_t out_features = w->shape[0], rows = in ? x->numel / in : 0;
    if (rows > INT_MAX || in > INT_MAX || out_features > INT_MAX) {
        tfm__fail(TFM_ERR_SIZE, "%s: x %s exceeds the BLAS int range", op,
                  tfm__shape_str(x, xs, sizeof xs));
        return NULL;
    }
    int64_t shape[TFM_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = out_features;
    tfm_tensor *y = tfm__new_output(tape, op, TFM_F32, x->ndim, shape);
    if (!y)
        return NULL;
    float *yv = tfm__f32(y);
    if (b)
        for (int64_t r = 0; r < rows; r++)
            memcpy(yv + r * out_features, tfm__f32(b), (size_t)out_features * sizeof(float));
    if (rows && out_features)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)out_features,
                    (int)in, 1.0f, tfm__f32(x), (int)in, tfm__f32(w), (int)in, b ? 1.0f : 0.0f,
                    yv, (int)out_features);
    float scale = 1.0f;
    if (relu && p > 0.0f) {
        /* the mask tfm_dropout would draw from the same rng */
        uint64_t key = tfm_rng_next_u64(rng);
        uint32_t threshold = tfm__counter_threshold(p);
        scale = 1.0f / (1.0f - p);
        for (int64_t i = 0; i < y->numel; i++)
            yv[i] = yv[i] > 0.0f && tfm__counter_bits(key, (uint32_t)i) >= threshold
                        ? yv[i] * scale
                        : 0.0f;
    } else if (relu) {
        for (int64_t i = 0; i < y->numel; i++)
            yv[i] = yv[i] > 0.0f ? yv[i] : 0.0f;
    }
    tfm_node *node;
    if (tfm__record(tape, op, y, linear_backward, 3, (const tfm_tensor *[]){x, w, b}, &node) < 0)
        return NULL;
    if (node) {
        node->ints[0] = rows;
        node->ints[1] = in;
        node->ints[2] = out_features;
        node->ints[3] = relu;
        node->floats[0] = scale;
    }
    return y;
}

tfm_tensor *tfm_linear(tfm_tape *tape, const tfm_tensor *x, const tfm_tensor *weight,
                       const tfm_tensor *bias)
{
    return linear("tfm_linear", tape, x, weight, bias, 0, 0.0f, NULL);
}

tfm_tensor *tfm_linear_relu(tfm_tape *tape, const tfm_tensor *x, const tfm_tensor *weight,
                            const tfm_tensor *bias)
{
    return linear("tfm_linear_relu", tape, x, weight, bias, 1, 0.0f, NULL);
}

tfm_tensor *tfm_linear_relu_dropout(tfm_tape *tape, const tfm_tensor *x,
                                    const tfm_tensor *weight, const tfm_tensor *bias, float p,
                                    int32_t training, tfm_rng *rng)
{
    return linear("tfm_linear_relu_dropout", tape, x, weight, bias, 1, training ? p : 0.0f,
                  rng);
}
