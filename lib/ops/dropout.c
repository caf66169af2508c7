/* Inverted dropout. The mask is a pure function of a per-call key and the
 * element index, so backward regenerates it instead of storing it. */
#include "autograd/tape.h"
#include "tfm/ops.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/rng.h"

/* The identity (eval mode, p == 0) passes the gradient through. */
static TFM__KERNEL(identity_backward, (tfm_node *node), (node))
{
    float *gx = tfm__grad_of(node->in[0]);
    const float *g = node->out->grad;
    for (int64_t i = 0; i < node->out->numel; i++)
        gx[i] += g[i];
}

/* y = x, or y += x when accumulating, where the mask keeps an element
 * (scaled by 1/(1-p)), else 0. */
static TFM__KERNEL(masked, (const float *x, float *y, int64_t n, uint64_t key, uint32_t first,
                            float p, float scale, int accumulate),
                   (x, y, n, key, first, p, scale, accumulate))
{
    uint32_t threshold = tfm__counter_threshold(p);
    if (accumulate)
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            y[i] += tfm__dropped(key, first + (uint32_t)i, threshold, x[i], scale);
    else
#pragma omp simd
        for (int64_t i = 0; i < n; i++)
            y[i] = tfm__dropped(key, first + (uint32_t)i, threshold, x[i], scale);
}

/* ints: the mask's key and first counter; floats: p, the scale 1/(1-p). */
static void dropout_backward(tfm_node *node)
{
    masked(node->out->grad, tfm__grad_of(node->in[0]), node->out->numel,
           (uint64_t)node->ints[0], (uint32_t)node->ints[1], node->floats[0], node->floats[1], 1);
}

tfm_tensor *tfm_dropout(tfm_tape *tape, const tfm_tensor *x, float p, int32_t training,
                        tfm_rng *rng)
{
    const char *op = "tfm_dropout";
    if (tfm__check_input(op, "x", x, TFM_F32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    if (!(p >= 0.0f && p < 1.0f)) {
        tfm__fail(TFM_ERR_ARG, "%s: p %g is outside [0, 1)", op, (double)p);
        return NULL;
    }
    tfm_node *node;
    if (!training || p == 0.0f) {
        tfm_tensor *out = tfm__new_view(tape, op, x, x->ndim, x->shape);
        if (!out || tfm__record(tape, op, out, identity_backward, 1,
                                (const tfm_tensor *[]){x}, &node) < 0)
            return NULL;
        return out;
    }
    if (!rng) {
        tfm__fail(TFM_ERR_NULL, "%s: rng is NULL (needed in training with p > 0)", op);
        return NULL;
    }
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, x->ndim, x->shape);
    if (!out)
        return NULL;
    tfm__mask_key mask = tfm__rng_mask_key(rng, x->numel);
    float scale = 1.0f / (1.0f - p);
    masked(tfm__f32(x), tfm__f32(out), x->numel, mask.key, mask.first, p, scale, 0);
    if (tfm__record(tape, op, out, dropout_backward, 1, (const tfm_tensor *[]){x}, &node) < 0)
        return NULL;
    if (node) {
        node->ints[0] = (int64_t)mask.key;
        node->ints[1] = mask.first;
        node->floats[0] = p;
        node->floats[1] = scale;
    }
    return out;
}
