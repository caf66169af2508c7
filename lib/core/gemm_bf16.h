/* Matrix products on bfloat16 inputs with float32 accumulation, for CPUs
 * with AVX512_BF16 (tfm_set_matmul_precision): both operands are rounded
 * to bfloat16 (to nearest even) as they are packed, and each pair of
 * products is added into float32 sums by one VDPBF16PS, twice the
 * multiply-adds of a float32 FMA per instruction. */
#ifndef TFM_CORE_GEMM_BF16_H
#define TFM_CORE_GEMM_BF16_H

#include <stdint.h>

/* Whether the CPU has AVX512_BF16 (and the build the kernel). */
int tfm__cpu_has_bf16(void);

/* C = alpha op(A) op(B) + beta C + bias, row-major, as tfm__sgemm_bias's
 * arguments, split among at most `workers` of libtfm's threads; a result's
 * bits do not depend on their number. Returns 0, or -1 with nothing
 * written when its packing buffers cannot be allocated. */
int tfm__sgemm_bf16(int transpose_a, int transpose_b, int64_t m, int64_t n, int64_t k,
                    float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                    float beta, const float *bias, float *c, int64_t ldc, int workers);

#endif
