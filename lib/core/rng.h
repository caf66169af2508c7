/* Random numbers: a seeded xoshiro256** stream behind tfm_rng, and a
 * counter-based hash for values that must be regenerated, not stored
 * (dropout masks). */
#ifndef TFM_CORE_RNG_H
#define TFM_CORE_RNG_H

#include <stddef.h>
#include <stdint.h>

#include "tfm/tensor.h"

#include "core/cpu.h"

struct tfm_rng {
    uint64_t state[4];
    int has_spare_normal;
    float spare_normal;
    int64_t shard_index;   /* tfm_rng_set_shard: this process's slice of */
    int64_t shard_count;   /* the batch, for dropout masks; (0, 1): whole */
};

/* The whole state as text ("s0 s1 s2 s3 spare-flag spare-bits" in hex,
 * 78 characters), for training states, and back: 0, or -1 for text that
 * is not one (the state is then unchanged). */
#define TFM__RNG_TEXT 80
void tfm__rng_format(const tfm_rng *rng, char *out, size_t size);
int tfm__rng_parse(const char *text, tfm_rng *rng);

/* 32 random bits that depend only on (key, counter): two rounds of
 * murmur3's finaliser. 32-bit multiplies keep loops over counters
 * vectorised; counters repeat every 2^32 elements of one tensor. */
TFM__INLINE uint32_t tfm__counter_bits(uint64_t key, uint32_t counter)
{
    uint32_t h = (counter ^ (uint32_t)(key >> 32)) * 0x9E3779B9u ^ (uint32_t)key;
    for (int round = 0; round < 2; round++) {
        h ^= h >> 16;
        h *= 0x85EBCA6Bu;
        h ^= h >> 13;
        h *= 0xC2B2AE35u;
        h ^= h >> 16;
    }
    return h;
}

/* A dropout mask: its key, and the counter of its first element, which is
 * not 0 when the process holds slice shard_index of shard_count equal
 * slices of the whole batch's tensor (so the slices' masks together are
 * the mask of the whole). Counters wrap at 2^32, as tfm__counter_bits'. */
typedef struct tfm__mask_key {
    uint64_t key;
    uint32_t first;
} tfm__mask_key;

/* Draws the mask of a tensor of numel elements (this process's slice):
 * shard_index < TFM_MAX_SHARDS = 2^16 and numel < 2^38, so the product
 * fits. */
static inline tfm__mask_key tfm__rng_mask_key(tfm_rng *rng, int64_t numel)
{
    return (tfm__mask_key){tfm_rng_next_u64(rng), (uint32_t)(rng->shard_index * numel)};
}

/* The threshold below which tfm__counter_bits has probability p. */
static inline uint32_t tfm__counter_threshold(float p)
{
    double t = (double)p * 4294967296.0;
    return t >= 4294967295.0 ? 4294967295u : (uint32_t)t;
}

/* Dropout of one element: x * keep_scale where the mask (key, threshold
 * from tfm__counter_threshold) keeps the element at counter, else 0.
 * Inlined into loops that stay vectorised. */
TFM__INLINE float tfm__dropped(uint64_t key, uint32_t counter, uint32_t threshold, float x,
                              float keep_scale)
{
    return tfm__counter_bits(key, counter) >= threshold ? x * keep_scale : 0.0f;
}

/* The parameters of the tensor fillers' distributions, checked alike by
 * tfm_tensor_uniform/normal and tfm_init_uniform/normal: TFM_OK, or
 * TFM_ERR_ARG naming op. */
tfm_status tfm__check_uniform_bounds(const char *op, float low, float high);
tfm_status tfm__check_normal_params(const char *op, float mean, float std);

#endif
