/* Pointwise activations: relu, gelu (exact, with erf), gelu with tanh
 * (Hugging Face's "gelu_new"), silu (Marian's "swish") and tanh. One
 * forward and one backward serve them all; the kind is switched on outside
 * the loops so each loop stays a plain pass over contiguous floats. */
#include <math.h>

#include "autograd/tape.h"
#include "core/fastmath.h"
#include "ops/activation.h"

/* tanh is no feed-forward activation: it follows the tfm_activation values */
enum { ACT_TANH = TFM__ACTIVATION_TANH };

#define INV_SQRT2 0.70710678118654752440f
#define INV_SQRT_2PI 0.39894228040143267794f
#define SQRT_2_OVER_PI 0.79788456080286535588f
#define GELU_TANH_CUBIC 0.044715f

static float sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

/* The tanh in gelu_tanh, at x: tanh(sqrt(2/pi) (x + 0.044715 x^3)). */
static float gelu_tanh_inner(float x)
{
    return tanhf(SQRT_2_OVER_PI * (x + GELU_TANH_CUBIC * x * x * x));
}

void tfm__activation_rows(int32_t kind, const float *x, int64_t n, float *out)
{
    switch (kind) {
    case TFM_ACTIVATION_RELU:
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] <= 0.0f ? 0.0f : x[i]; /* NaN passes on, as in PyTorch */
        break;
    case TFM_ACTIVATION_GELU:
        for (int64_t i = 0; i < n; i++)
            out[i] = 0.5f * x[i] * (1.0f + erff(x[i] * INV_SQRT2));
        break;
    case TFM_ACTIVATION_SILU:
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] * sigmoid(x[i]);
        break;
    case TFM_ACTIVATION_GELU_TANH:
        for (int64_t i = 0; i < n; i++)
            out[i] = 0.5f * x[i] * (1.0f + gelu_tanh_inner(x[i]));
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            out[i] = tanhf(x[i]);
        break;
    }
}

/* relu, gelu, silu and gelu_tanh differentiate at x; tanh from its output,
 * 1 - y^2, which saves recomputing tanh. gelu' = Phi(x) + x phi(x);
 * silu' = s (1 + x (1 - s)); gelu_tanh' = (1 + t) / 2 + x (1 - t^2) u' / 2
 * with t = tanh(u), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2). */
static void activation_backward(tfm_node *node)
{
    const float *x = tfm__f32(node->in[0]), *y = tfm__f32(node->out);
    const float *g = node->out->grad;
    float *gx = tfm__grad_of(node->in[0]);
    int64_t n = node->out->numel;
    switch (node->ints[0]) {
    case TFM_ACTIVATION_RELU:
        for (int64_t i = 0; i < n; i++)
            gx[i] += x[i] > 0.0f ? g[i] : 0.0f;
        break;
    case TFM_ACTIVATION_GELU:
        for (int64_t i = 0; i < n; i++) {
            float cdf = 0.5f * (1.0f + erff(x[i] * INV_SQRT2));
            float pdf = INV_SQRT_2PI * tfm__expf(-0.5f * x[i] * x[i]);
            gx[i] += g[i] * (cdf + x[i] * pdf);
        }
        break;
    case TFM_ACTIVATION_SILU:
        for (int64_t i = 0; i < n; i++) {
            float s = sigmoid(x[i]);
            gx[i] += g[i] * s * (1.0f + x[i] * (1.0f - s));
        }
        break;
    case TFM_ACTIVATION_GELU_TANH:
        for (int64_t i = 0; i < n; i++) {
            float t = gelu_tanh_inner(x[i]);
            float du = SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_TANH_CUBIC * x[i] * x[i]);
            gx[i] += g[i] * (0.5f * (1.0f + t) + 0.5f * x[i] * (1.0f - t * t) * du);
        }
        break;
    default:
        for (int64_t i = 0; i < n; i++)
            gx[i] += g[i] * (1.0f - y[i] * y[i]);
        break;
    }
}

tfm_tensor *tfm__activation(tfm_tape *tape, const char *op, int32_t kind, const tfm_tensor *x)
{
    tfm_tensor *out = tfm__new_like(tape, op, x);
    if (!out)
        return NULL;
    tfm__activation_rows(kind, tfm__f32(x), x->numel, tfm__f32(out));
    tfm_node *node;
    if (tfm__record(tape, op, out, activation_backward, 1, (const tfm_tensor *[]){x}, &node) < 0)
        return NULL;
    if (node)
        node->ints[0] = kind;
    return out;
}

tfm_tensor *tfm_relu(tfm_tape *tape, const tfm_tensor *x)
{
    return tfm__activation(tape, "tfm_relu", TFM_ACTIVATION_RELU, x);
}

tfm_tensor *tfm_gelu(tfm_tape *tape, const tfm_tensor *x)
{
    return tfm__activation(tape, "tfm_gelu", TFM_ACTIVATION_GELU, x);
}

tfm_tensor *tfm_gelu_tanh(tfm_tape *tape, const tfm_tensor *x)
{
    return tfm__activation(tape, "tfm_gelu_tanh", TFM_ACTIVATION_GELU_TANH, x);
}

tfm_tensor *tfm_silu(tfm_tape *tape, const tfm_tensor *x)
{
    return tfm__activation(tape, "tfm_silu", TFM_ACTIVATION_SILU, x);
}

tfm_tensor *tfm_tanh(tfm_tape *tape, const tfm_tensor *x)
{
    return tfm__activation(tape, "tfm_tanh", ACT_TANH, x);
}
