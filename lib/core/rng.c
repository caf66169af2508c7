#include "core/rng.h"

#include <inttypes.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

tfm_rng *tfm_rng_create(uint64_t seed)
{
    tfm_rng *rng = calloc(1, sizeof *rng);
    if (!rng) {
        tfm__fail(TFM_ERR_NOMEM, "tfm_rng_create: out of memory");
        return NULL;
    }
    rng->shard_count = 1;
    tfm_rng_seed(rng, seed);
    return rng;
}

tfm_status tfm_rng_seed(tfm_rng *rng, uint64_t seed)
{
    if (!rng)
        return tfm__fail(TFM_ERR_NULL, "tfm_rng_seed: rng is NULL");
    for (int i = 0; i < 4; i++)
        rng->state[i] = splitmix64(&seed);
    rng->has_spare_normal = 0;
    return TFM_OK;
}

void tfm_rng_free(tfm_rng *rng) { free(rng); }

tfm_status tfm_rng_set_shard(tfm_rng *rng, int64_t index, int64_t count)
{
    if (!rng)
        return tfm__fail(TFM_ERR_NULL, "tfm_rng_set_shard: rng is NULL");
    if (count < 1 || count > TFM_MAX_SHARDS || index < 0 || index >= count)
        return tfm__fail(TFM_ERR_ARG, "tfm_rng_set_shard: slice %lld of %lld is not one of "
                         "1 to %d slices", (long long)index, (long long)count, TFM_MAX_SHARDS);
    rng->shard_index = index;
    rng->shard_count = count;
    return TFM_OK;
}

tfm_status tfm_rng_copy(tfm_rng *dst, const tfm_rng *src)
{
    if (!dst || !src)
        return tfm__fail(TFM_ERR_NULL, "tfm_rng_copy: %s is NULL", dst ? "src" : "dst");
    *dst = *src;
    return TFM_OK;
}

void tfm__rng_format(const tfm_rng *rng, char *out, size_t size)
{
    uint32_t spare;
    memcpy(&spare, &rng->spare_normal, sizeof spare);
    snprintf(out, size, "%016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %d %08" PRIx32,
             rng->state[0], rng->state[1], rng->state[2], rng->state[3],
             rng->has_spare_normal ? 1 : 0, spare);
}

int tfm__rng_parse(const char *text, tfm_rng *rng)
{
    tfm_rng parsed;
    uint32_t spare;
    int has_spare, consumed = 0;
    if (strlen(text) != 4 * 17 + 2 + 8 ||
        sscanf(text, "%16" SCNx64 " %16" SCNx64 " %16" SCNx64 " %16" SCNx64 " %1d %8" SCNx32 "%n",
               &parsed.state[0], &parsed.state[1], &parsed.state[2], &parsed.state[3],
               &has_spare, &spare, &consumed) != 6 ||
        consumed != (int)strlen(text) || (has_spare != 0 && has_spare != 1))
        return -1;
    /* xoshiro's all-zero state is a fixed point: no seed produces it */
    if (!(parsed.state[0] | parsed.state[1] | parsed.state[2] | parsed.state[3]))
        return -1;
    parsed.has_spare_normal = has_spare;
    memcpy(&parsed.spare_normal, &spare, sizeof spare);
    if (!isfinite(parsed.spare_normal))
        return -1;
    /* the slice is this process's, not the stream's state */
    parsed.shard_index = rng->shard_index;
    parsed.shard_count = rng->shard_count;
    *rng = parsed;
    return 0;
}

uint64_t tfm_rng_next_u64(tfm_rng *rng)
{
    if (!rng) {
        tfm__fail(TFM_ERR_NULL, "tfm_rng_next_u64: rng is NULL");
        return 0;
    }
    uint64_t *s = rng->state;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float tfm_rng_uniform(tfm_rng *rng)
{
    if (!rng) {
        tfm__fail(TFM_ERR_NULL, "tfm_rng_uniform: rng is NULL");
        return 0.0f;
    }
    return (float)(tfm_rng_next_u64(rng) >> 40) * (1.0f / 16777216.0f);
}

float tfm_rng_normal(tfm_rng *rng)
{
    if (!rng) {
        tfm__fail(TFM_ERR_NULL, "tfm_rng_normal: rng is NULL");
        return 0.0f;
    }
    if (rng->has_spare_normal) {
        rng->has_spare_normal = 0;
        return rng->spare_normal;
    }
    /* Box-Muller in double; u1 in (0, 1] keeps log finite. */
    double u1 = ((double)(tfm_rng_next_u64(rng) >> 11) + 1.0) * (1.0 / 9007199254740992.0);
    double u2 = (double)(tfm_rng_next_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
    double radius = sqrt(-2.0 * log(u1));
    double angle = 6.283185307179586 * u2;
    rng->spare_normal = (float)(radius * sin(angle));
    rng->has_spare_normal = 1;
    return (float)(radius * cos(angle));
}

tfm_status tfm__check_uniform_bounds(const char *op, float low, float high)
{
    if (!(low <= high) || !isfinite(low) || !isfinite(high))
        return tfm__fail(TFM_ERR_ARG, "%s: bounds [%g, %g] must be finite and ordered", op,
                         (double)low, (double)high);
    /* draws are low + (high - low) * u in float */
    if (!isfinite(high - low))
        return tfm__fail(TFM_ERR_ARG, "%s: bounds [%g, %g] are wider than the largest float "
                         "(%g): draws would be infinite", op, (double)low, (double)high,
                         (double)FLT_MAX);
    return TFM_OK;
}

tfm_status tfm__check_normal_params(const char *op, float mean, float std)
{
    if (!(std >= 0.0f) || !isfinite(std) || !isfinite(mean))
        return tfm__fail(TFM_ERR_ARG, "%s: mean %g and std %g must be finite, std not negative",
                         op, (double)mean, (double)std);
    return TFM_OK;
}
