/* exp for float kernels that the compiler can vectorise (libm's expf is a
 * call per element, with an errno path on underflow). Cephes' expf: round
 * x / ln 2 to n, reduce r = x - n ln 2 in two parts, a degree-6 polynomial
 * for e^r, and 2^n through the exponent bits. Within 2 ulp of expf; inputs
 * below -87.3 (including -inf) give exactly 0, above 88.7 the largest
 * float (softmax and log-sum-exp subtract the maximum first). */
#ifndef TFM_CORE_FASTMATH_H
#define TFM_CORE_FASTMATH_H

#include <stdint.h>
#include <string.h>

static inline float tfm__expf(float x)
{
    const float clamped = x > 88.7f ? 88.7f : x < -87.3f ? -87.3f : x;
    const float n = __builtin_floorf(clamped * 1.44269504088896341f + 0.5f);
    float r = clamped - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -87.3f ? 0.0f : p * scale;
}

#endif
