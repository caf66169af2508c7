/* The core of multi-head attention as one op, for the attention layer:
 * softmax(Q K^T * alpha + mask), dropout, times V, heads merged, reading
 * the heads straight out of the projections' outputs. */
#ifndef TFM_OPS_ATTENTION_H
#define TFM_OPS_ATTENTION_H

#include "autograd/tape.h"

/* Heads of one side: head h is columns [col + h*dk, col + (h+1)*dk) of a
 * projection's output x [B, L, width]. */
typedef struct tfm_heads {
    const tfm_tensor *x;
    int64_t col;
} tfm_heads;

typedef struct tfm_attention_core {
    int64_t d_model;          /* heads * d_k: the context's width */
    int32_t heads;
    float factor;             /* multiplies the scores: 1 / sqrt(d_k), or 1 */
    const tfm_tensor *scale;  /* [1] trainable: the scores are divided by it; or NULL */
    const tfm_tensor *mask;   /* NULL, int32 keep or float32 additive */
    float dropout;            /* on the weights; 0 when not training */
    tfm_rng *rng;
    int recompute_weights;    /* the backward recomputes the weights */
    /* a recorded context is not kept but computed again in the backward:
     * for a context read only by the output projection */
    int recompute_context;
} tfm_attention_core;

/* q, k, v -> context [B, T, heads * d_k], keys and values of length S.
 * The weights [B, heads, T, S] (before dropout) go to *weights when it is
 * not NULL, and are kept for the backward unless recompute_weights. NULL with the error set on failure; op names the caller. */
tfm_tensor *tfm__attention(tfm_tape *tape, const char *op, tfm_heads q, tfm_heads k,
                           tfm_heads v, const tfm_attention_core *core, tfm_tensor **weights);

#endif
