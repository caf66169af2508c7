/* T5's bucketed relative position bias: each stack's table [buckets,
 * heads], read at the bucket of (key position - query position), is added
 * to the scores of every self-attention of the stack. */
#ifndef TFM_NN_RELATIVE_BIAS_H
#define TFM_NN_RELATIVE_BIAS_H

#include "core/tensor.h"
#include "tfm/tape.h"

/* The bucket of a key relative positions from its query (key - query):
 * T5Attention._relative_position_bucket's. Exact distances below half the
 * buckets (of each sign's half when bidirectional), then logarithmic ones
 * up to max_distance and the last bucket beyond; causal buckets take only
 * the past, the future sharing bucket 0. */
int32_t tfm__relative_bucket(int64_t relative, int bidirectional, int32_t buckets,
                             int32_t max_distance);

/* The bias [1, heads, T, S] of queries 0..T-1 over keys 0..S-1 from table
 * [buckets, heads], recorded (the table gets its gradient); NULL with the
 * error set. */
tfm_tensor *tfm__relative_bias(tfm_tape *tape, const char *op, const tfm_tensor *table,
                               int64_t T, int64_t S, int bidirectional, int32_t max_distance);

/* The causal bias of query t over keys 0..t, head h's at out[h * stride +
 * j]: the decoding step's row of tfm__relative_bias. */
void tfm__relative_bias_row(const tfm_tensor *table, int64_t t, int32_t max_distance, float *out,
                            int64_t stride);

#endif
