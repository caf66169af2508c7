/* Low-rank adapters (LoRA) on linear weights: the adapted product
 *   y = x W^T + b + scale * dropout(x) A^T B^T
 * for the rows of W an adapter covers. model/adapters.c makes the sets;
 * the linear op (ops/linear.c) applies the one its tape carries, forward
 * and backward, and the cached decoding step applies its decoding's. */
#ifndef TFM_OPS_ADAPTER_H
#define TFM_OPS_ADAPTER_H

#include "autograd/tape.h"

/* The most entries one product meets: a fused attention's q, k and v. */
#define TFM__ADAPTED_PER_PRODUCT 3
/* The largest rank: the decoding step keeps a row's A x on its stack. */
#define TFM__ADAPTER_MAX_RANK 512

/* One adapted weight: rows [first, first + rows) of weight (a parameter)
 * gain scale * B A x, with A [rank, in] and B [rows, rank]. */
typedef struct tfm__adapted {
    const tfm_tensor *weight;
    int64_t first, rows;
    tfm_tensor *a, *b;
} tfm__adapted;

/* An adapter: its entries, scale (alpha / rank), and the dropout on its
 * input (p from rng, while training is set and the tape is not a
 * decoding's). */
typedef struct tfm__adapter_set {
    int64_t count;
    tfm__adapted *entries;
    int32_t rank;
    float scale, dropout;
    int32_t training;
    tfm_rng *rng;
} tfm__adapter_set;

/* The entries of set that cover rows of the product whose weight values
 * are rows_data [rows, in] (a weight or a view of its rows), at most
 * TFM__ADAPTED_PER_PRODUCT, into found, with their first output column
 * in columns; their count. */
int tfm__adapter_find(const tfm__adapter_set *set, const float *rows_data, int64_t rows,
                      int64_t in, const tfm__adapted **found, int64_t *columns);

/* Evaluation: out[i, column + j] (row stride ldc) += scale * (B A x_i)_j
 * for the n rows of x [n, in] and each entry of set over the product of
 * rows_data (see tfm__adapter_find). No allocation, no dropout. */
void tfm__adapter_add_rows(const tfm__adapter_set *set, const float *rows_data,
                           int64_t rows, int64_t in, const float *x, int64_t n, float *out,
                           int64_t ldc);

/* The linear op's part for one product of x [rows, in] into y [rows, out]
 * (the GEMM's result, before the op's activation or residual), kept on
 * the tape for the backward. */
typedef struct tfm__adapter_run {
    int32_t count;
    const tfm__adapted *entries[TFM__ADAPTED_PER_PRODUCT];
    int64_t columns[TFM__ADAPTED_PER_PRODUCT];
    float *u[TFM__ADAPTED_PER_PRODUCT];  /* dropout(x) A^T [rows, rank] */
    float *gu[TFM__ADAPTED_PER_PRODUCT]; /* the backward's, made in the forward */
    float *xd;                           /* dropout(x) [rows, in]; NULL at p = 0 */
    float scale, keep_scale;
    uint64_t key;                        /* the dropout mask's, as tfm_dropout's */
    uint32_t first, threshold;
} tfm__adapter_run;

/* The run of the tape's adapter (tfm__tape_set_adapter) over a product of
 * x [rows, in] with weight values rows_data [w_rows, in] into *run, or
 * NULL when none of its entries covers them; dropout(x) drawn now when
 * the adapter trains on this tape. 0, or -1 with the error set (out of
 * tape memory). */
int tfm__adapter_begin(tfm_tape *tape, const char *op, const float *rows_data, int64_t w_rows,
                       const float *x, int64_t rows, int64_t in, tfm__adapter_run **run);
/* y [rows, out] += the run's terms. */
void tfm__adapter_forward(const tfm__adapter_run *run, const float *x, float *y, int64_t rows,
                          int64_t in, int64_t out);
/* From g = dL/dy [rows, out]: A's and B's gradients, and x's into gx (NULL:
 * none wanted). Allocates nothing. */
void tfm__adapter_backward(const tfm__adapter_run *run, const float *x, const float *g,
                           float *gx, int64_t rows, int64_t in, int64_t out);

#endif
