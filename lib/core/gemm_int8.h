/* int8 products for decoding: y = x W^T + bias with W [out, in] (a linear
 * layer's weight, PyTorch's layout) quantized once to int8 per output
 * channel, and each row of x quantized to int8 as the product reads it.
 * Sums are exact int32, so every code path gives the same bits:
 *
 *   W:  scale_j = max_k |W[j][k]| / 127,  q_jk = round(W[j][k] / scale_j)
 *   x:  scale_i = max_k |x[i][k]| / 127,  p_ik = round(x[i][k] / scale_i)
 *   y[i][j] = fmaf((float)(sum_k p_ik q_jk) * scale_j, scale_i, bias_j)
 *
 * both symmetric (values in [-127, 127], zero maps to zero, an all-zero
 * row has scale 0), rounded to nearest even. W's scale comes first: a
 * weight's sum times its scale stays near its row's size whatever x's, so
 * y overflows or underflows only where its own size does. The paths (worst first):
 * portable C; AVX2 (VPMADDUBSW on |p| and q with p's sign, whose pairs
 * cannot saturate at 127 x 127 x 2); AVX-VNNI and AVX512-VNNI (VPDPBUSD,
 * unsigned x signed bytes: p + 128 times q, less 128 sum_k q_jk kept per
 * channel). */
#ifndef TFM_CORE_GEMM_INT8_H
#define TFM_CORE_GEMM_INT8_H

#include <stdint.h>

#include "tfm/common.h"

struct tfm_tensor;

/* The most inputs a weight may have: any sum of that many products of two
 * values in [-127, 127] fits in int32 (127^2 x 2^17 < 2^31). */
#define TFM__INT8_MAX_IN 131072

/* A quantized weight, packed for the kernel (gemm_int8.c describes the
 * order). Arrays over channels are padded with zeros to whole panels of
 * 16 channels. */
typedef struct tfm__int8_weight {
    int64_t out, in;
    int8_t *packed;
    float *scales;       /* channel j's values are its int8 values times scales[j] */
    int32_t *shift_sums; /* 128 sum_k q_jk: what p + 128 adds to channel j's sums */
    float *bias;         /* or NULL */
} tfm__int8_weight;

/* Quantizes weight [out, in] (and copies bias [out], which may be NULL)
 * into *result. TFM_ERR_ARG / TFM_ERR_SIZE for sizes outside
 * [1, ...] / [1, TFM__INT8_MAX_IN] inputs, TFM_ERR_NUMERIC for a NaN or
 * Inf in weight, TFM_ERR_NOMEM; messages start with `op`. */
tfm_status tfm__int8_quantize(const char *op, int64_t out, int64_t in, const float *weight,
                              const float *bias, tfm__int8_weight **result);

/* A weight from its int8 values [out, in] and scales [out], as
 * tfm__int8_values gives them (a file's): values of -128 are
 * TFM_ERR_ARG, as are negative scales, non-finite ones TFM_ERR_NUMERIC;
 * otherwise as tfm__int8_quantize. */
tfm_status tfm__int8_from_values(const char *op, int64_t out, int64_t in, const int8_t *values,
                                 const float *scales, const float *bias,
                                 tfm__int8_weight **result);

/* The weight's int8 values [out, in] and scales [out]. */
void tfm__int8_values(const tfm__int8_weight *w, int8_t *values, float *scales);

/* The weight as float32 [out, in]: each value times its channel's scale. */
void tfm__int8_dequantize(const tfm__int8_weight *w, float *weight);

void tfm__int8_free(tfm__int8_weight *w);

/* y [m, out] = x [m, in] W^T + bias, both row-major, x contiguous and
 * y's rows ldy >= out floats apart (a part of a wider output), on
 * the path tfm__int8_path_chosen names, its output channels split among at
 * most `workers` of libtfm's threads, the calling thread alone below 2
 * (the bits do not depend on their number). A row of x holding a NaN or an Inf gives a row of NaN. The
 * quantized rows go to the calling thread's buffer (core/thread_buffer.h):
 * TFM_ERR_NOMEM when it cannot grow, nothing written. */
tfm_status tfm__int8_linear(const char *op, const tfm__int8_weight *w, int64_t m,
                            const float *x, float *y, int64_t ldy, int workers);

/* The workers tfm__int8_tensor_product gives m rows of w: one per 2^20
 * multiply-adds (the pool runs at most as many as it has). */
int tfm__int8_workers(const tfm__int8_weight *w, int64_t m);

/* y [m, count] (rows ldy apart) = x [m, in] W[first .. first + count)^T + b
 * for a weight tensor quantized in parts (core/tensor.h), first and count
 * whole parts, x quantized once for all of them, on the calling thread
 * and as many of libtfm's as the product is worth. 0, or -1 when int8
 * does not pay for the weight (tfm__int8_tensor_pays) or the kernel's
 * buffer cannot grow: then nothing is written and no error is set, and
 * the caller multiplies by the float32 weight instead. */
int tfm__int8_tensor_product(const struct tfm_tensor *w, int64_t first, int64_t count, int64_t m,
                             const float *x, float *y, int64_t ldy);

/* y [m, sum of their outs] (rows ldy apart) = x [m, in] times n <= 3
 * weight tensors of one part each (separate queries, keys and values),
 * their columns side by side, x quantized once for all of them. 0, or -1
 * as tfm__int8_tensor_product when int8 does not pay for one of them,
 * they differ in `in`, or one is in parts: nothing is written then. */
int tfm__int8_tensors_product(const struct tfm_tensor *const *w, int n, int64_t m,
                              const float *x, float *y, int64_t ldy);

/* Whether this CPU multiplies a weight [out, in] faster on the int8 path
 * chosen than on decoding's packed float32 kernel (core/gemm_packed.h) at
 * the rows decoding gives it, by a rule measured per path: int8 models
 * take the faster kernel product by product. A rule by W's shape alone,
 * never by a product's rows, so that a row's values never depend on what
 * else shares its product. */
int tfm__int8_pays(int64_t out, int64_t in);

/* tfm__int8_pays for a tensor's int8 parts; 0 for a float32 tensor. */
int tfm__int8_tensor_pays(const struct tfm_tensor *w);

/* For tests and benchmarks, process-wide: int8 pays from `multiply_adds`
 * (out x in) per row on any path, 0 making every product int8 and
 * INT64_MAX none; a negative value returns to the rule measured per path
 * (the default). A decoding reads it when it packs its weights. */
void tfm__int8_set_pays_from(int64_t multiply_adds);

/* The code paths, worst first. */
typedef enum tfm__int8_path {
    TFM__INT8_PORTABLE,
    TFM__INT8_AVX2,
    TFM__INT8_AVX_VNNI,
    TFM__INT8_AVX512_VNNI,
    TFM__INT8_PATHS
} tfm__int8_path;

/* Whether this build and CPU run the path, at the level TFM_CPU allows
 * (core/cpu.h: AVX2 and AVX-VNNI from x86-64-v3, AVX512-VNNI from v4). */
int tfm__int8_path_runs(tfm__int8_path path);

/* The best path that runs, which tfm__int8_linear takes. */
tfm__int8_path tfm__int8_path_chosen(void);

/* "portable", "avx2", "avx-vnni", "avx512-vnni". */
const char *tfm__int8_path_name(tfm__int8_path path);

/* The rule tfm__int8_pays applies on the path (which must run), against
 * the float32 kernel at the level core/cpu.h chose. */
int tfm__int8_pays_on(tfm__int8_path path, int64_t out, int64_t in);

/* tfm__int8_linear on the given path, which must run (for tests and
 * benchmarks). */
tfm_status tfm__int8_linear_on(tfm__int8_path path, const char *op, const tfm__int8_weight *w,
                               int64_t m, const float *x, float *y, int64_t ldy, int workers);

#endif
