/* Products on few rows against a weight packed once: y = x W^T + bias for
 * x [n, in] with n small (a decoding step's 1 to a few hundred rows) and
 * W [out, in] a linear layer's weight (PyTorch's layout). A BLAS packs W
 * into its kernel's layout at every call, which a step's few rows do not
 * amortise (22% of a decoding at tutorial 002's size); here the caller
 * packs it once into panels of TFM__PANEL output columns, each panel its
 * in rows of TFM__PANEL floats one after another (the columns past out
 * zero), which the kernel reads straight through while it multiplies a
 * tile of x's rows held in registers. Each y[i][j] is the sum over k in
 * order of x[i][k] W[j][k], multiply-added, starting from bias[j].
 *
 * Packed in bfloat16 (tfm_set_matmul_precision's TFM_MATMUL_BFLOAT16, for
 * CPUs with AVX512_BF16), a panel holds pairs of inputs instead: word p of
 * a column is its weights 2p (low half) and 2p + 1 rounded to bfloat16 to
 * nearest even (half the bytes to read); each row of x is rounded so as it
 * is multiplied, and VDPBF16PS adds each pair's two products into float32
 * sums, pair after pair from bias[j]. */
#ifndef TFM_CORE_GEMM_PACKED_H
#define TFM_CORE_GEMM_PACKED_H

#include <stdint.h>

#define TFM__PANEL 16

typedef struct tfm__packed {
    int64_t out, in;
    /* [panels of out][in][TFM__PANEL] floats; bf16: [panels of out]
     * [(in + 1) / 2][TFM__PANEL] pairs of bfloat16 in 32-bit words */
    float *panels;
    float *bias;   /* [out rounded up to TFM__PANEL], zeros where none */
    int bf16;
} tfm__packed;

/* The floats (32-bit words) a packed [out, in] weight takes, panels and
 * bias, in float32 or (bf16) bfloat16. */
int64_t tfm__packed_floats(int64_t out, int64_t in, int bf16);

/* p's [out, in] weight over floats [tfm__packed_floats(out, in, bf16)],
 * uninitialised: tfm__pack_columns fills it. bf16 only where
 * tfm__cpu_has_bf16() (core/gemm_bf16.h). */
void tfm__packed_init(tfm__packed *p, int64_t out, int64_t in, int bf16, float *floats);

/* Output columns [first, first + count) of p: the rows of w [count, in]
 * and their bias [count] (NULL: zeros). Several calls build one product
 * of several layers' weights (the queries', keys' and values'). */
void tfm__pack_columns(tfm__packed *p, int64_t first, const float *w, int64_t count,
                       const float *bias);

/* y [n, out] (row stride ldy) = x [n, p->in] (contiguous rows) times p's
 * weight transposed plus its bias; the column panels are split among
 * libtfm's threads when the product is large enough to pay for them (the
 * bits do not depend on their number). 0; or, in bfloat16, -1 when the
 * calling thread's buffer (core/thread_buffer.h) cannot grow to hold x's
 * rounded rows: then nothing is written and no error is set, and the
 * caller multiplies by the float32 weight instead. */
int tfm__packed_product(const tfm__packed *p, const float *x, int64_t n, float *y,
                        int64_t ldy);

#endif
