/* Pointwise activations: relu, gelu (exact, with erf) and tanh. One forward
 * and one backward serve all three; the kind is switched on outside the
 * loops so each loop stays a plain pass over contiguous floats. */
#include <math.h>

#include "autograd/tape.h"
#include "core/fastmath.h"
#include "tfm/ops.h"

enum act_kind { ACT_RELU, ACT_GELU, ACT_TANH };

#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f

/* relu and gelu differentiate at x; tanh from its output, 1 - y^2, which
 * saves recomputing tanh. gelu' = Phi(x) + x * phi(x). */
static void activation_backward(tfm_node *node)
{
    const float *x = tfm__f32(node->in[0]), *y = tfm__f32(node->out);
    const float *g = node->out->grad;
    float *gx = tfm__grad_of(node->in[0]);
    int64_t n = node->out->numel;
    switch (node->ints[0]) {
    case ACT_RELU:
        for (int64_t i = 0; i < n; i++)
            gx[i] += x[i] > 0.0f ? g[i] : 0.0f;
        break;
    case ACT_GELU:
        for (int64_t i = 0; i < n; i++) {
            float cdf = 0.5f * (1.0f + erff(x[i] * INV_SQRT2));
            float pdf = INV_SQRT_2PI * tfm__expf(-0.5f * x[i] * x[i]);
            gx[i] += g[i] * (cdf + x[i] * pdf);
        }
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            gx[i] += g[i] * (1.0f - y[i] * y[i]);
        break;
    }
}

static tfm_tensor *activation(const char *op, int kind, tfm_tape *tape, const tfm_tensor *x)
{
    tfm_tensor *out = tfm__new_like(tape, op, x);
    if (!out)
        return NULL;
    const float *xv = tfm__f32(x);
    float *o = tfm__f32(out);
    switch (kind) {
    case ACT_RELU:
        for (int64_t i = 0; i < x->numel; i++)
            o[i] = xv[i] <= 0.0f ? 0.0f : xv[i]; /* NaN passes on, as in PyTorch */
        break;
    case ACT_GELU:
        for (int64_t i = 0; i < x->numel; i++)
            o[i] = 0.5f * xv[i] * (1.0f + erff(xv[i] * INV_SQRT2));
        break;
    default:
        for (int64_t i = 0; i < x->numel; i++)
            o[i] = tanhf(xv[i]);
        break;
    }
    tfm_node *node;
    if (tfm__record(tape, op, out, activation_backward, 1, (const tfm_tensor *[]){x}, &node) < 0)
        return NULL;
    if (node)
        node->ints[0] = kind;
    return out;
}

tfm_tensor *tfm_relu(tfm_tape *tape, const tfm_tensor *x)
{
    return activation("tfm_relu", ACT_RELU, tape, x);
}

tfm_tensor *tfm_gelu(tfm_tape *tape, const tfm_tensor *x)
{
    return activation("tfm_gelu", ACT_GELU, tape, x);
}

tfm_tensor *tfm_tanh(tfm_tape *tape, const tfm_tensor *x)
{
    return activation("tfm_tanh", ACT_TANH, tape, x);
}
