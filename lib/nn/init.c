/* In-place initialisation of float32 tensors, as torch.nn.init does it. */
#include <math.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "tfm/nn.h"

static int check_target(const char *op, tfm_tensor *t, tfm_rng *rng)
{
    if (!t || !rng) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, t ? "rng" : "tensor");
        return -1;
    }
    return tfm__check_input(op, "the tensor", t, TFM_F32);
}

tfm_status tfm_init_uniform(tfm_tensor *t, float low, float high, tfm_rng *rng)
{
    const char *op = "tfm_init_uniform";
    if (check_target(op, t, rng) < 0)
        return tfm_last_status();
    if (tfm__check_uniform_bounds(op, low, high) != TFM_OK)
        return TFM_ERR_ARG;
    float *v = tfm__f32(t);
    for (int64_t i = 0; i < t->numel; i++)
        v[i] = low + (high - low) * tfm_rng_uniform(rng);
    return TFM_OK;
}

tfm_status tfm_init_normal(tfm_tensor *t, float mean, float std, tfm_rng *rng)
{
    const char *op = "tfm_init_normal";
    if (check_target(op, t, rng) < 0)
        return tfm_last_status();
    if (tfm__check_normal_params(op, mean, std) != TFM_OK)
        return TFM_ERR_ARG;
    float *v = tfm__f32(t);
    for (int64_t i = 0; i < t->numel; i++)
        v[i] = mean + std * tfm_rng_normal(rng);
    return TFM_OK;
}

tfm_status tfm_init_xavier_uniform(tfm_tensor *t, float gain, tfm_rng *rng)
{
    const char *op = "tfm_init_xavier_uniform";
    if (check_target(op, t, rng) < 0)
        return tfm_last_status();
    if (!isfinite(gain))
        return tfm__fail(TFM_ERR_ARG, "%s: gain %g is not finite", op, (double)gain);
    if (t->ndim < 2)
        return tfm__fail(TFM_ERR_SHAPE, "%s: fans need at least 2 axes", op);
    int64_t receptive = t->numel / (t->shape[0] * t->shape[1]);
    double fan_in = (double)(t->shape[1] * receptive), fan_out = (double)(t->shape[0] * receptive);
    float bound = gain * (float)sqrt(6.0 / (fan_in + fan_out));
    return tfm_init_uniform(t, -bound, bound, rng);
}
