/* exp for float kernels that the compiler can vectorise (libm's expf is a
 * call per element, with an errno path on underflow). Cephes' expf: round
 * x / ln 2 to n, reduce r = x - n ln 2 in two parts, a degree-6 polynomial
 * for e^r, and 2^n through the exponent bits. Within 2 ulp of expf up to
 * 88.37; inputs below -87.3 (including -inf) give exactly 0, above 88.37
 * (including +inf) +inf (softmax and log-sum-exp subtract the maximum
 * first, so callers pass x <= 0), NaN gives NaN. Defined for every input:
 * NaN is clamped like a large value before the conversion to int. */
#ifndef TFM_CORE_FASTMATH_H
#define TFM_CORE_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/cpu.h"

TFM__INLINE float tfm__expf(float x)
{
    /* NaN fails x < 88.7f: the clamp makes it 88.7 */
    const float clamped = x < 88.7f ? (x > -87.3f ? x : -87.3f) : 88.7f;
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
    union { int32_t bits; float value; } scale;
    scale.bits = ((int32_t)n + 127) << 23;
    return x != x ? x : x < -87.3f ? 0.0f : p * scale.value;
}

/* y[j] = exp(x[j] - shift) for a row, returning the sum of y. Whole blocks
 * of 16 run as vectors; the tail too, as the row's last 16 with the lanes
 * before it left as they are (a row of 91 took as long as the 5 blocks
 * before it, through scalar copies), and a row shorter than 16 as one
 * block padded. x may be y. Inlined always: left out of line, it ran the
 * baseline in every kernel. */
TFM__INLINE float tfm__exp_row(const float *x, float shift, float *y, int64_t n)
{
    enum { BLOCK = 16 };
    float sum = 0.0f, out[BLOCK];
    int64_t body = n - n % BLOCK;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < body; j++) {
        y[j] = tfm__expf(x[j] - shift);
        sum += y[j];
    }
    if (body == n)
        return sum;
    if (n < BLOCK) {
        float in[BLOCK];
        for (int j = 0; j < BLOCK; j++)
            in[j] = j < n ? x[j] - shift : -INFINITY;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < BLOCK; j++) {
            out[j] = tfm__expf(in[j]);
            sum += out[j];
        }
        memcpy(y, out, (size_t)n * sizeof *y);
        return sum;
    }
    /* the last block overlaps the body's, whose lanes (already y, when x
     * is y) stay out of the sum */
    const float *xt = x + n - BLOCK;
    float *yt = y + n - BLOCK;
    const int64_t first = BLOCK - (n - body);
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < BLOCK; j++) {
        const float e = tfm__expf(j >= first ? xt[j] - shift : -INFINITY);
        out[j] = j >= first ? e : yt[j];
        sum += e;
    }
    memcpy(yt, out, sizeof out);
    return sum;
}

#endif
