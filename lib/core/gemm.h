/* libtfm's matrix products: cblas_sgemm, split among libtfm's own threads
 * when it has several. Each piece then runs on a single-threaded BLAS
 * (tfm_set_num_threads sets OpenBLAS's or BLIS's count to one meanwhile),
 * so one pool of threads owns the cores: no second pool waking, spinning
 * or allocating its job lists per call. */
#ifndef TFM_CORE_GEMM_H
#define TFM_CORE_GEMM_H

#include <stdint.h>

/* C = alpha op(A) op(B) + beta C, row-major, C [m, n], op(A) [m, k],
 * op(B) [k, n]; transpose_a / transpose_b: 0 or 1. The sizes and leading
 * dimensions fit in int (callers check). With TFM_MATMUL_BFLOAT16 set,
 * a product with every side at least 32 runs on core/gemm_bf16.h's
 * kernel instead. */
void tfm__sgemm(int transpose_a, int transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                int64_t ldc);

/* C = alpha op(A) op(B) + bias, the bias [n] added to every row of C (NULL:
 * none), as tfm__sgemm otherwise: a linear layer's product. The bfloat16
 * kernel adds it as it writes C, where copying it into C first would be
 * one more pass over C. */
void tfm__sgemm_bias(int transpose_a, int transpose_b, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                     const float *bias, float *c, int64_t ldc);

/* Called by tfm_set_num_threads: with more than one libtfm thread, the
 * BLAS runs on one (its count as found is restored at one libtfm thread).
 * A BLAS other than OpenBLAS or BLIS is left alone. */
void tfm__blas_follow_threads(int libtfm_threads);

/* The BLAS's own thread count now, or 0 if libtfm cannot tell. */
int tfm__blas_threads(void);

#endif
