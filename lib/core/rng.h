/* Random numbers: a seeded xoshiro256** stream behind tfm_rng, and a
 * counter-based hash for values that must be regenerated, not stored
 * (dropout masks). */
#ifndef TFM_CORE_RNG_H
#define TFM_CORE_RNG_H

#include <stdint.h>

#include "tfm/tensor.h"

struct tfm_rng {
    uint64_t state[4];
    int has_spare_normal;
    float spare_normal;
};

/* A uniform float in [0, 1) that depends only on (key, counter). */
static inline float tfm__counter_uniform(uint64_t key, uint64_t counter)
{
    uint64_t z = key ^ (counter * 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (1.0f / 16777216.0f);
}

#endif
