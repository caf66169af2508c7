/* Products on few rows against a weight packed once: y = x W^T + bias for
 * x [n, in] with n small (a decoding step's 1 to a few hundred rows) and
 * W [out, in] a linear layer's weight (PyTorch's layout). A BLAS packs W
 * into its kernel's layout at every call, which a step's few rows do not
 * amortise (22% of a decoding at tutorial 002's size); here the caller
 * packs it once into panels of TFM__PANEL output columns, each panel its
 * in rows of TFM__PANEL floats one after another (the columns past out
 * zero), which the kernel reads straight through while it multiplies a
 * tile of x's rows held in registers. Each y[i][j] is the sum over k in
 * order of x[i][k] W[j][k], multiply-added, starting from bias[j]. */
#ifndef TFM_CORE_GEMM_PACKED_H
#define TFM_CORE_GEMM_PACKED_H

#include <stdint.h>

#define TFM__PANEL 16

typedef struct tfm__packed {
    int64_t out, in;
    float *panels; /* [panels of out][in][TFM__PANEL] */
    float *bias;   /* [out rounded up to TFM__PANEL], zeros where none */
} tfm__packed;

/* The floats a packed [out, in] weight takes, panels and bias. */
int64_t tfm__packed_floats(int64_t out, int64_t in);

/* p's [out, in] weight over floats [tfm__packed_floats(out, in)],
 * uninitialised: tfm__pack_columns fills it. */
void tfm__packed_init(tfm__packed *p, int64_t out, int64_t in, float *floats);

/* Output columns [first, first + count) of p: the rows of w [count, in]
 * and their bias [count] (NULL: zeros). Several calls build one product
 * of several layers' weights (the queries', keys' and values'). */
void tfm__pack_columns(tfm__packed *p, int64_t first, const float *w, int64_t count,
                       const float *bias);

/* y [n, out] (row stride ldy) = x [n, p->in] (contiguous rows) times p's
 * weight transposed plus its bias; the column panels are split among
 * libtfm's threads when the product is large enough to pay for them. */
void tfm__packed_product(const tfm__packed *p, const float *x, int64_t n, float *y,
                         int64_t ldy);

#endif
