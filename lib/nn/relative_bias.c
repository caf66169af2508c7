/* T5's bucketed relative position bias (relative_bias.h). */
#include "nn/relative_bias.h"

#include <math.h>

#include "autograd/tape.h"
#include "core/error.h"
#include "tfm/ops.h"

int32_t tfm__relative_bucket(int64_t relative, int bidirectional, int32_t buckets,
                             int32_t max_distance)
{
    int32_t first = 0;
    int64_t distance;
    if (bidirectional) {
        buckets /= 2; /* the later keys take the upper half */
        first = relative > 0 ? buckets : 0;
        distance = relative < 0 ? -relative : relative;
    } else {
        distance = relative < 0 ? -relative : 0;
    }
    int32_t max_exact = buckets / 2;
    if (distance < max_exact)
        return first + (int32_t)distance;
    /* in float32, as the reference computes it, so that a distance on a
     * bucket's edge falls where it does there */
    float steps = logf((float)distance / (float)max_exact) /
                  (float)log((double)max_distance / max_exact) * (float)(buckets - max_exact);
    int64_t bucket = max_exact + (int64_t)steps;
    return first + (int32_t)(bucket < buckets - 1 ? bucket : buckets - 1);
}

tfm_tensor *tfm__relative_bias(tfm_tape *tape, const char *op, const tfm_tensor *table,
                               int64_t T, int64_t S, int bidirectional, int32_t max_distance)
{
    int32_t buckets = (int32_t)table->shape[0];
    int64_t heads = table->shape[1];
    tfm_tensor *ids = tfm__new_constant(tape, op, TFM_I32, 2, (const int64_t[]){1, T * S});
    if (!ids)
        return NULL;
    int32_t *id = tfm__i32(ids);
    for (int64_t i = 0; i < T; i++)
        for (int64_t j = 0; j < S; j++)
            id[i * S + j] = tfm__relative_bucket(j - i, bidirectional, buckets, max_distance);
    /* [1, T*S, heads] -> [1, heads, T*S] -> [1, heads, T, S] */
    tfm_tensor *bias = tfm_transpose(tape, tfm_embedding(tape, table, ids), 1, 2);
    return tfm_reshape(tape, bias, 4, (const int64_t[]){1, heads, T, S});
}

void tfm__relative_bias_row(const tfm_tensor *table, int64_t t, int32_t max_distance, float *out,
                            int64_t stride)
{
    int32_t buckets = (int32_t)table->shape[0];
    int64_t heads = table->shape[1];
    const float *rows = tfm__f32(table);
    for (int64_t j = 0; j <= t; j++) {
        const float *row = rows + tfm__relative_bucket(j - t, 0, buckets, max_distance) * heads;
        for (int64_t h = 0; h < heads; h++)
            out[h * stride + j] = row[h];
    }
}
