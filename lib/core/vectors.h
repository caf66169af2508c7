/* Vectors of 4, 8 and 16 floats as GCC's and Clang's vector extensions: the
 * compiler keeps them in registers and lowers them to the instruction set
 * each TFM__KERNEL copy is built for (two YMM or four XMM registers for a
 * vector of 16 below AVX-512). Loads and stores go through memcpy, which
 * allows any alignment. */
#ifndef TFM_CORE_VECTORS_H
#define TFM_CORE_VECTORS_H

#include <stdint.h>
#include <string.h>

#include "core/cpu.h"

typedef float vec4 __attribute__((vector_size(16)));
typedef float vec8 __attribute__((vector_size(32)));
typedef float vec16 __attribute__((vector_size(64)));
typedef int32_t vec16i __attribute__((vector_size(64)));
/* The baseline copies warn that passing these by value would change the
 * ABI; the helpers are always inlined, so no call passes one. */
#pragma GCC diagnostic ignored "-Wpsabi"

/* loadN(p) and storeN(p, v) for vecN */
#define TFM__VECTOR_LOAD_STORE(n)                                                           \
    TFM__INLINE vec##n load##n(const float *p)                                              \
    {                                                                                       \
        vec##n v;                                                                           \
        memcpy(&v, p, sizeof v);                                                            \
        return v;                                                                           \
    }                                                                                       \
    TFM__INLINE void store##n(float *p, vec##n v)                                           \
    {                                                                                       \
        memcpy(p, &v, sizeof v);                                                            \
    }
TFM__VECTOR_LOAD_STORE(4)
TFM__VECTOR_LOAD_STORE(8)
TFM__VECTOR_LOAD_STORE(16)

/* bfloat16, a float32's upper half (its sign, exponent and 7 bits of
 * mantissa): loadN_bf16 widens N of them back to float32 exactly, each
 * under a zero half by one interleave (GCC splits a converted 16 lanes'
 * widening into four shuffles and a shift: 1.6x the time on Zen 4). */
typedef uint16_t vec8h __attribute__((vector_size(16)));
typedef uint16_t vec16h __attribute__((vector_size(32)));
typedef uint16_t vec32h __attribute__((vector_size(64)));
TFM__INLINE vec8 load8_bf16(const uint16_t *p)
{
    vec8h h, zero = {0};
    memcpy(&h, p, sizeof h);
    return (vec8)__builtin_shufflevector(zero, h, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14,
                                         7, 15);
}
TFM__INLINE vec16 load16_bf16(const uint16_t *p)
{
    vec16h h, zero = {0};
    memcpy(&h, p, sizeof h);
    return (vec16)__builtin_shufflevector(zero, h, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6,
                                          22, 7, 23, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29,
                                          14, 30, 15, 31);
}

/* x rounded to bfloat16, to nearest even (a finite x past bfloat16's
 * largest becomes an infinity, as IEEE rounding has it); a NaN stays a
 * NaN, which the rounding's carry could turn into an infinity. */
static inline uint16_t tfm__bf16_round(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(bits >> 16 | 0x40u); /* quiet */
    return (uint16_t)((bits + 0x7fffu + (bits >> 16 & 1u)) >> 16);
}

/* Lane by lane, a where mask is set (all ones), else b. */
TFM__INLINE vec16 select16(vec16i mask, vec16 a, vec16 b)
{
    return (vec16)(((vec16i)a & mask) | ((vec16i)b & ~mask));
}

/* Lane by lane, the larger of a and b. */
TFM__INLINE vec16 max_lanes(vec16 a, vec16 b)
{
    return select16(a > b, a, b);
}

/* v with the halves of each run of 2w lanes swapped */
#define TFM__SWAP8(v) __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)
#define TFM__SWAP4(v) __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11)
#define TFM__SWAP2(v) __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13)
#define TFM__SWAP1(v) __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14)

/* The largest and the sum of the 16 lanes, in halving steps. */
TFM__INLINE float max16(vec16 v)
{
    v = max_lanes(v, TFM__SWAP8(v));
    v = max_lanes(v, TFM__SWAP4(v));
    v = max_lanes(v, TFM__SWAP2(v));
    return max_lanes(v, TFM__SWAP1(v))[0];
}

TFM__INLINE float sum16(vec16 v)
{
    v += TFM__SWAP8(v);
    v += TFM__SWAP4(v);
    v += TFM__SWAP2(v);
    return (v + TFM__SWAP1(v))[0];
}

#endif
