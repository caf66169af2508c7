/* int8 products (core/gemm_int8.h). W is packed once, when it is
 * quantized, in panels of 16 output channels: a panel's group g (inputs
 * 4g .. 4g + 3) is 64 bytes, channel c's four values side by side at 4c,
 * the operand a VPDPBUSD multiplies by four bytes of x broadcast to every
 * lane. Panels and groups past W's edges hold zeros. The rows of x are
 * quantized into the calling thread's buffer, each padded to whole groups.
 * A tile of rows x panels keeps its int32 sums in registers over the whole
 * of `in`: decoding has few rows, so W streams through once per tile of
 * rows, a quarter of float32's bytes. Threads split the channels in whole
 * tiles' width, and every sum is exact, so neither the threads nor the
 * path change a bit of y. */
#include "core/gemm_int8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/tensor.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/thread_buffer.h"

#if defined(__x86_64__) &&                                                                 \
    ((defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && __GNUC__ >= 11))
#define HAVE_X86_PATHS 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define HAVE_X86_PATHS 0
#endif

#define PANEL 16 /* channels per panel */
#define GROUP 4  /* inputs per group */
#define GROUP_BYTES (PANEL * GROUP)
#define SHIFT 0x80 /* p + 128 as a byte: p with its top bit flipped */

static int64_t groups_of(int64_t in)
{
    return (in + GROUP - 1) / GROUP;
}

static int64_t panels_of(int64_t out)
{
    return (out + PANEL - 1) / PANEL;
}

/* Where W's value (j, k) lies in the packed weight. */
static size_t packed_index(int64_t groups, int64_t j, int64_t k)
{
    return (size_t)(((j / PANEL) * groups + k / GROUP) * GROUP_BYTES + (j % PANEL) * GROUP +
                    k % GROUP);
}

/* --- quantizing rows of x ------------------------------------------------ */

/* How a row of x is quantized: p = round((x * pre) * inv), its scale, from
 * the largest of its |values| as bits (which, as unsigned integers, order
 * as the values do, NaN above Inf). A row whose largest is under 2^-64 is
 * taken 2^64 times first (exactly), where 127 / largest would overflow. A
 * row holding NaN or Inf gets all p = 0 and a NaN scale: a row of NaN. */
typedef struct row_scale {
    float pre, inv, scale;
    int finite;
} row_scale;

static row_scale row_scale_of(uint32_t largest_bits)
{
    row_scale s = {1.0f, 0.0f, NAN, largest_bits < 0x7f800000u};
    if (!s.finite)
        return s;
    float largest;
    memcpy(&largest, &largest_bits, sizeof largest);
    s.scale = largest / 127.0f;
    if (largest_bits == 0)
        return s; /* inv 0: every p is 0 */
    if (largest < 0x1p-64f)
        s.pre = 0x1p64f;
    s.inv = 127.0f / (largest * s.pre);
    return s;
}

/* Each path's row quantizer writes `padded` bytes (whole groups, zeros
 * past `in`) and the row's scale. */
typedef void (*quantize_row_fn)(const float *x, int64_t in, uint8_t *p, int64_t padded,
                                float *scale);

/* p as signed bytes. lrintf rounds to nearest even, as CVTPS2DQ does. */
static void quantize_row_portable(const float *x, int64_t in, uint8_t *p, int64_t padded,
                                  float *scale)
{
    uint32_t largest = 0;
    for (int64_t k = 0; k < in; k++) {
        uint32_t bits;
        memcpy(&bits, x + k, sizeof bits);
        bits &= 0x7fffffffu;
        largest = bits > largest ? bits : largest;
    }
    row_scale s = row_scale_of(largest);
    memset(p, 0, (size_t)padded);
    if (s.finite)
        for (int64_t k = 0; k < in; k++)
            p[k] = (uint8_t)(int8_t)lrintf((x[k] * s.pre) * s.inv);
    *scale = s.scale;
}

/* --- the product ---------------------------------------------------------- */

typedef struct product product;

/* y's rows [row, row + rows) and panels [panel, panel + panels), at most
 * a path's tile. */
typedef void (*tile_fn)(const product *p, int64_t row, int rows, int64_t panel, int panels);

typedef struct path_kernels {
    quantize_row_fn quantize_row;
    tile_fn tile;
    int tile_rows, tile_panels;
} path_kernels;

struct product {
    const tfm__int8_weight *w;
    const path_kernels *path;
    int64_t m, groups, panel_bytes;
    const float *rows;   /* x */
    uint8_t *x;          /* its quantized rows, x_stride bytes apart */
    int64_t x_stride;
    float *x_scales;
    float *y;
    int64_t ldy; /* y's row stride */
};

/* Sums row by row, channel by channel, down the packed panel. */
static void tile_portable(const product *p, int64_t row, int rows, int64_t panel, int panels)
{
    const tfm__int8_weight *w = p->w;
    int64_t last = (panel + panels) * PANEL < w->out ? (panel + panels) * PANEL : w->out;
    for (int64_t i = row; i < row + rows; i++) {
        const int8_t *x = (const int8_t *)(p->x + i * p->x_stride);
        for (int64_t j = panel * PANEL; j < last; j++) {
            const int8_t *q = w->packed + packed_index(p->groups, j, 0);
            int32_t sum = 0;
            for (int64_t g = 0; g < p->groups; g++)
                for (int b = 0; b < GROUP; b++)
                    sum += x[g * GROUP + b] * q[g * GROUP_BYTES + b];
            p->y[i * p->ldy + j] = fmaf((float)sum * w->scales[j], p->x_scales[i],
                                        w->bias ? w->bias[j] : -0.0f);
        }
    }
}

#if HAVE_X86_PATHS
/* The x86 paths' functions end in __avx2, __avx_vnni or __avx512_vnni for
 * tests/check_isa.py; each runs only once tfm__int8_path_runs said so. */
#define AVX2_TARGET __attribute__((target("avx2,fma")))
#define AVX_VNNI_TARGET __attribute__((target("avx2,fma,avxvnni")))
#define AVX512_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* Four bytes of a quantized row, in every lane. */
static inline int32_t four_bytes(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* The tile's rows as compile-time constants, so that its sums stay in
 * registers: kernel(p, row, R, panel, panels) for R = rows, at most `most`
 * (a path's tile_rows, up to 6). */
#define ROWS_UP_TO(r, most) ((r) < (most) ? (r) : (most))
#define BY_ROWS(kernel, most, p, row, rows, panel, panels)                                 \
    switch (rows) {                                                                        \
    case 1: kernel(p, row, 1, panel, panels); break;                                       \
    case 2: kernel(p, row, ROWS_UP_TO(2, most), panel, panels); break;                     \
    case 3: kernel(p, row, ROWS_UP_TO(3, most), panel, panels); break;                     \
    case 4: kernel(p, row, ROWS_UP_TO(4, most), panel, panels); break;                     \
    case 5: kernel(p, row, ROWS_UP_TO(5, most), panel, panels); break;                     \
    default: kernel(p, row, most, panel, panels); break;                                   \
    }

/* --- AVX2 and AVX-VNNI: 256 bits, a panel as two halves of 8 channels --- */

#define YMM_ROWS 4

/* The first n of 8 lanes, as a mask vector. */
AVX2_TARGET ALWAYS_INLINE __m256i lanes8__avx2(int64_t n)
{
    int32_t count = (int32_t)(n > 8 ? 8 : n < 0 ? 0 : n);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* quantize_row_portable, 8 floats at a time; the bytes xor'ed with flip
 * (SHIFT: p + 128 for VPDPBUSD). */
AVX2_TARGET ALWAYS_INLINE void quantize_flipped__avx2(const float *x, int64_t in, uint8_t *p,
                                                      int64_t padded, float *scale, int flip)
{
    const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
    __m256i largest = _mm256_setzero_si256();
    for (int64_t k = 0; k < in; k += 8) {
        __m256i bits = _mm256_maskload_epi32((const int *)(x + k), lanes8__avx2(in - k));
        largest = _mm256_max_epu32(largest, _mm256_and_si256(bits, magnitude));
    }
    __m128i half = _mm_max_epu32(_mm256_castsi256_si128(largest),
                                 _mm256_extracti128_si256(largest, 1));
    half = _mm_max_epu32(half, _mm_shuffle_epi32(half, 0x4e));
    half = _mm_max_epu32(half, _mm_shuffle_epi32(half, 0xb1));
    row_scale s = row_scale_of((uint32_t)_mm_cvtsi128_si32(half));
    *scale = s.scale;
    if (!s.finite) {
        memset(p, flip, (size_t)padded);
        return;
    }
    __m256 pre = _mm256_set1_ps(s.pre), inv = _mm256_set1_ps(s.inv);
    const __m128i flips = _mm_set1_epi8((char)flip);
    for (int64_t k = 0; k < padded; k += 8) {
        __m256 v = _mm256_maskload_ps(x + k, lanes8__avx2(in - k));
        __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_mul_ps(v, pre), inv));
        __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        __m128i bytes = _mm_xor_si128(_mm_packs_epi16(words, words), flips);
        if (padded - k >= 8) {
            _mm_storel_epi64((__m128i *)(p + k), bytes);
        } else { /* the last group */
            int32_t last = _mm_cvtsi128_si32(bytes);
            memcpy(p + k, &last, GROUP);
        }
    }
}

AVX2_TARGET static void quantize_row__avx2(const float *x, int64_t in, uint8_t *p, int64_t padded,
                                           float *scale)
{
    quantize_flipped__avx2(x, in, p, padded, scale, 0);
}

AVX2_TARGET static void quantize_row_shifted__avx2(const float *x, int64_t in, uint8_t *p,
                                                   int64_t padded, float *scale)
{
    quantize_flipped__avx2(x, in, p, padded, scale, SHIFT);
}

/* y = fmaf((sum - shift) * W's scale, x's scale, bias) for the tile's
 * rows and one panel; without the shift when `shifted` is 0. */
AVX2_TARGET ALWAYS_INLINE void finish_ymm__avx2(const product *p, __m256i sums[YMM_ROWS][2],
                                                int64_t row, int rows, int64_t panel, int shifted)
{
    const tfm__int8_weight *w = p->w;
    for (int h = 0; h < 2; h++) {
        int64_t j = panel * PANEL + 8 * h;
        __m256i store = lanes8__avx2(w->out - j);
        __m256 w_scale = _mm256_load_ps(w->scales + j);
        __m256i shift = shifted ? _mm256_load_si256((const __m256i *)(w->shift_sums + j))
                                : _mm256_setzero_si256();
        /* without a bias, -0 leaves every product's bits as they are */
        __m256 bias = w->bias ? _mm256_load_ps(w->bias + j) : _mm256_set1_ps(-0.0f);
        for (int r = 0; r < rows; r++) {
            __m256 sum = _mm256_cvtepi32_ps(_mm256_sub_epi32(sums[r][h], shift));
            __m256 y = _mm256_fmadd_ps(_mm256_mul_ps(sum, w_scale),
                                       _mm256_set1_ps(p->x_scales[row + r]), bias);
            _mm256_maskstore_ps(p->y + (row + r) * p->ldy + j, store, y);
        }
    }
}

/* A group's products added to a half panel's sums (x: a row's four bytes
 * in every lane). AVX2: p x q as VPMADDUBSW takes it, |p| (unsigned)
 * times q with p's sign, so that a pair's sum stays within int16
 * (2 x 127 x 127), then VPMADDWD with ones sums pairs of pairs into
 * int32. */
AVX2_TARGET ALWAYS_INLINE __m256i add_products__avx2(__m256i sums, __m256i x, __m256i w)
{
    __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(x), _mm256_sign_epi8(w, x));
    return _mm256_add_epi32(sums, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

/* AVX-VNNI: (p + 128) x q, four at a time. */
AVX_VNNI_TARGET ALWAYS_INLINE __m256i add_products__avx_vnni(__m256i sums, __m256i x, __m256i w)
{
    return _mm256_dpbusd_avx_epi32(sums, x, w);
}

/* A 256-bit path's tile (rows x one panel) with its add_products; its
 * sums less the shift where x is p + 128 (`shifted`). */
#define YMM_TILE(path, TARGET, shifted)                                                    \
    TARGET ALWAYS_INLINE void tile_of__##path(const product *p, int64_t row, int rows,      \
                                              int64_t panel, int panels)                   \
    {                                                                                      \
        (void)panels; /* one */                                                            \
        const int8_t *w = p->w->packed + panel * p->panel_bytes;                           \
        __m256i sums[YMM_ROWS][2];                                                         \
        _Pragma("GCC unroll 4") for (int r = 0; r < YMM_ROWS; r++)                         \
            sums[r][0] = sums[r][1] = _mm256_setzero_si256();                              \
        for (int64_t g = 0; g < p->groups; g++) {                                          \
            __m256i w0 = _mm256_load_si256((const __m256i *)(w + g * GROUP_BYTES));        \
            __m256i w1 = _mm256_load_si256((const __m256i *)(w + g * GROUP_BYTES + 32));   \
            _Pragma("GCC unroll 4") for (int r = 0; r < rows; r++) {                       \
                const uint8_t *four = p->x + (row + r) * p->x_stride + g * GROUP;          \
                __m256i x = _mm256_set1_epi32(four_bytes(four));                           \
                sums[r][0] = add_products__##path(sums[r][0], x, w0);                      \
                sums[r][1] = add_products__##path(sums[r][1], x, w1);                      \
            }                                                                              \
        }                                                                                  \
        finish_ymm__avx2(p, sums, row, rows, panel, shifted);                              \
    }                                                                                      \
    TARGET static void tile__##path(const product *p, int64_t row, int rows, int64_t panel, \
                                    int panels)                                            \
    {                                                                                      \
        BY_ROWS(tile_of__##path, YMM_ROWS, p, row, rows, panel, panels)                    \
    }

YMM_TILE(avx2, AVX2_TARGET, 0)
YMM_TILE(avx_vnni, AVX_VNNI_TARGET, 1)

/* --- AVX512-VNNI: a panel per register, tiles of 4 rows x 4 panels ------- */

/* 4 rows, not 6: GCC 12 did not keep 6 x 4 sums, 4 weights and x's
 * broadcast in the 32 registers, storing sums to the stack at every group
 * (int8 greedy at tutorial 002's size took 1.28x as long). */
#define ZMM_ROWS 4
#define ZMM_PANELS 4

/* The first n of 16 lanes. */
static inline __mmask16 lanes16(int64_t n)
{
    return (__mmask16)(n >= 16 ? 0xffff : n > 0 ? (1u << n) - 1 : 0);
}

/* quantize_row_portable, 16 floats at a time, as p + 128. */
AVX512_VNNI_TARGET static void quantize_row__avx512_vnni(const float *x, int64_t in, uint8_t *p,
                                                         int64_t padded, float *scale)
{
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff);
    __m512i largest = _mm512_setzero_si512();
    for (int64_t k = 0; k < in; k += 16)
        largest = _mm512_max_epu32(
            largest, _mm512_and_si512(_mm512_maskz_loadu_epi32(lanes16(in - k), x + k), magnitude));
    row_scale s = row_scale_of(_mm512_reduce_max_epu32(largest));
    *scale = s.scale;
    if (!s.finite) {
        memset(p, SHIFT, (size_t)padded);
        return;
    }
    __m512 pre = _mm512_set1_ps(s.pre), inv = _mm512_set1_ps(s.inv);
    for (int64_t k = 0; k < padded; k += 16) {
        __m512 v = _mm512_maskz_loadu_ps(lanes16(in - k), x + k);
        __m128i q = _mm512_cvtsepi32_epi8(
            _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_mul_ps(v, pre), inv)));
        _mm_mask_storeu_epi8(p + k, lanes16(padded - k),
                             _mm_xor_si128(q, _mm_set1_epi8((char)SHIFT)));
    }
}

AVX512_VNNI_TARGET ALWAYS_INLINE void tile_of__avx512_vnni(const product *p, int64_t row, int rows,
                                                           int64_t panel, int panels)
{
    const tfm__int8_weight *w = p->w;
    const int8_t *q = w->packed + panel * p->panel_bytes;
    __m512i sums[ZMM_ROWS][ZMM_PANELS];
#pragma GCC unroll 6
    for (int r = 0; r < ZMM_ROWS; r++)
#pragma GCC unroll 4
        for (int v = 0; v < ZMM_PANELS; v++)
            sums[r][v] = _mm512_setzero_si512();
    /* walking pointers: the addresses of every row and panel would take
     * more general registers than there are */
    const uint8_t *x = p->x + row * p->x_stride, *x_end = x + p->groups * GROUP;
    for (; x < x_end; x += GROUP, q += GROUP_BYTES) {
        __m512i wv[ZMM_PANELS];
#pragma GCC unroll 4
        for (int v = 0; v < panels; v++)
            wv[v] = _mm512_load_si512(q + v * p->panel_bytes);
#pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            __m512i xr = _mm512_set1_epi32(four_bytes(x + r * p->x_stride));
#pragma GCC unroll 4
            for (int v = 0; v < panels; v++)
                sums[r][v] = _mm512_dpbusd_epi32(sums[r][v], xr, wv[v]);
        }
    }
    /* unrolled as the loop above, so that sums stay in registers */
#pragma GCC unroll 4
    for (int v = 0; v < panels; v++) {
        int64_t j = (panel + v) * PANEL;
        __mmask16 store = lanes16(w->out - j);
        __m512 w_scale = _mm512_load_ps(w->scales + j);
        __m512i shift = _mm512_load_si512(w->shift_sums + j);
        __m512 bias = w->bias ? _mm512_load_ps(w->bias + j) : _mm512_set1_ps(-0.0f);
#pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            __m512 sum = _mm512_cvtepi32_ps(_mm512_sub_epi32(sums[r][v], shift));
            __m512 y = _mm512_fmadd_ps(_mm512_mul_ps(sum, w_scale),
                                       _mm512_set1_ps(p->x_scales[row + r]), bias);
            _mm512_mask_storeu_ps(p->y + (row + r) * p->ldy + j, store, y);
        }
    }
}

/* Whole tiles of 4 panels, then the rest one panel at a time. */
AVX512_VNNI_TARGET static void tile__avx512_vnni(const product *p, int64_t row, int rows,
                                                 int64_t panel, int panels)
{
    if (panels == ZMM_PANELS) {
        BY_ROWS(tile_of__avx512_vnni, ZMM_ROWS, p, row, rows, panel, ZMM_PANELS)
        return;
    }
    for (int v = 0; v < panels; v++)
        BY_ROWS(tile_of__avx512_vnni, ZMM_ROWS, p, row, rows, panel + v, 1)
}
#endif

static const path_kernels kernels[TFM__INT8_PATHS] = {
    [TFM__INT8_PORTABLE] = {quantize_row_portable, tile_portable, 1, 1},
#if HAVE_X86_PATHS
    [TFM__INT8_AVX2] = {quantize_row__avx2, tile__avx2, YMM_ROWS, 1},
    [TFM__INT8_AVX_VNNI] = {quantize_row_shifted__avx2, tile__avx_vnni, YMM_ROWS, 1},
    [TFM__INT8_AVX512_VNNI] = {quantize_row__avx512_vnni, tile__avx512_vnni, ZMM_ROWS,
                               ZMM_PANELS},
#endif
};

/* Rows [first, last) of x quantized. */
static void quantize_rows(const product *p, int64_t first, int64_t last)
{
    for (int64_t i = first; i < last; i++)
        p->path->quantize_row(p->rows + i * p->w->in, p->w->in, p->x + i * p->x_stride,
                              p->groups * GROUP, p->x_scales + i);
}

/* Tiles of the rows [first, last), panels [panel, panel + panels). */
static void multiply_tiles(const product *p, int64_t first, int64_t last, int64_t panel,
                           int panels)
{
    const path_kernels *k = p->path;
    for (int64_t row = first; row < last; row += k->tile_rows)
        k->tile(p, row, (int)(last - row < k->tile_rows ? last - row : k->tile_rows), panel,
                panels);
}

/* A tile's width of channels from `panel`: tile_panels or the rest. */
static int width_from(const product *p, int64_t panel)
{
    int64_t panels = panels_of(p->w->out), most = p->path->tile_panels;
    return (int)(panels - panel < most ? panels - panel : most);
}

/* Blocks [begin, end) of a tile's width of channels, all rows. */
static void multiply_blocks(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const product *p = ctx;
    for (int64_t b = begin; b < end; b++) {
        int64_t panel = b * p->path->tile_panels;
        multiply_tiles(p, 0, p->m, panel, width_from(p, panel));
    }
}

/* Products of one x by the consecutive parts of a weight (the fused
 * queries, keys and values), their y columns side by side: x is quantized
 * once for all of them. */
#define MAX_PARTS 3
typedef struct parts_product {
    product part[MAX_PARTS];
    int parts;
} parts_product;

/* Blocks [begin, end) of a tile's height of rows, every part's channels:
 * each worker quantizes its own rows, so no thread waits on another's. */
static void multiply_row_blocks(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const parts_product *pp = ctx;
    const product *shared = &pp->part[0]; /* the parts share x, its rows and their path */
    int64_t first = begin * shared->path->tile_rows, last = end * shared->path->tile_rows;
    last = last < shared->m ? last : shared->m;
    quantize_rows(shared, first, last);
    for (int i = 0; i < pp->parts; i++) {
        const product *p = &pp->part[i];
        for (int64_t panel = 0; panel < panels_of(p->w->out); panel += p->path->tile_panels)
            multiply_tiles(p, first, last, panel, width_from(p, panel));
    }
}

/* Threads split the rows where every thread can keep W in its own L2
 * cache (a quarter of a Zen 4's) and each gets at least two tiles of rows:
 * the encoder's and the cross-attention caches' products, whose rows'
 * quantization would otherwise run on the calling thread alone while the
 * others wait. Otherwise they split the channels, each streaming its part
 * of W once per tile of rows. */
#define ROW_SPLIT_BYTES (256 << 10)

/* The products of x by parts [0, parts) (each as wide as `in`), part i's
 * y `columns[i]` floats from y's start, on the path; -1 when the buffer
 * cannot grow (no error set). */
static int multiply_parts(tfm__int8_path path, const tfm__int8_weight *const *w, int parts,
                          const int64_t *columns, int64_t m, const float *x, float *y,
                          int64_t ldy, int workers)
{
    if (m == 0)
        return 0;
    const path_kernels *k = &kernels[path];
    int64_t groups = groups_of(w[0]->in), padded = groups * GROUP;
    /* rows 64 bytes apart, after their scales */
    int64_t stride = (padded + 63) / 64 * 64, scales_bytes = (m * 4 + 63) / 64 * 64;
    uint8_t *buffer = tfm__thread_buffer((size_t)(scales_bytes + m * stride));
    if (!buffer)
        return -1;
    parts_product pp = {.parts = parts};
    int64_t weight_bytes = 0;
    for (int i = 0; i < parts; i++) {
        pp.part[i] = (product){w[i], k, m, groups, groups * GROUP_BYTES, x,
                               buffer + scales_bytes, stride, (float *)buffer, y + columns[i],
                               ldy};
        weight_bytes += panels_of(w[i]->out) * pp.part[i].panel_bytes;
    }
    workers = workers > 1 ? workers : 1;
    int64_t row_blocks = (m + k->tile_rows - 1) / k->tile_rows;
    if (workers > 1 && row_blocks >= 2 * workers && weight_bytes <= ROW_SPLIT_BYTES) {
        tfm__parallel_for(row_blocks, workers, multiply_row_blocks, &pp);
        return 0;
    }
    quantize_rows(&pp.part[0], 0, m);
    for (int i = 0; i < parts; i++) {
        int64_t panels = panels_of(w[i]->out);
        tfm__parallel_for((panels + k->tile_panels - 1) / k->tile_panels, workers,
                          multiply_blocks, &pp.part[i]);
    }
    return 0;
}

static int multiply(tfm__int8_path path, const tfm__int8_weight *w, int64_t m, const float *x,
                    float *y, int64_t ldy, int workers)
{
    const int64_t columns[1] = {0};
    return multiply_parts(path, &w, 1, columns, m, x, y, ldy, workers);
}

tfm_status tfm__int8_linear_on(tfm__int8_path path, const char *op, const tfm__int8_weight *w,
                               int64_t m, const float *x, float *y, int64_t ldy, int workers)
{
    if (multiply(path, w, m, x, y, ldy, workers) < 0)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld quantized rows of %lld", op,
                         (long long)m, (long long)w->in);
    return TFM_OK;
}

tfm_status tfm__int8_linear(const char *op, const tfm__int8_weight *w, int64_t m,
                            const float *x, float *y, int64_t ldy, int workers)
{
    return tfm__int8_linear_on(tfm__int8_path_chosen(), op, w, m, x, y, ldy, workers);
}

int tfm__int8_workers(const tfm__int8_weight *w, int64_t m)
{
    /* a worker for each 2^20 multiply-adds, some 5 us of a thread's time:
     * the encoder's feed-forward products at d 256 are worth two */
    int64_t workers = m * w->out * w->in >> 20;
    return workers < 1 ? 1 : workers > TFM__MAX_THREADS ? TFM__MAX_THREADS : (int)workers;
}

int tfm__int8_tensor_product(const tfm_tensor *w, int64_t first, int64_t count, int64_t m,
                             const float *x, float *y, int64_t ldy)
{
    if (!tfm__int8_tensor_pays(w))
        return -1;
    /* at most MAX_PARTS parts: a weight is quantized whole or as a fused
     * attention's q, k and v (model/quantize.c) */
    int64_t rows = w->shape[0] / w->int8_parts, part = first / rows, n = count / rows;
    int64_t columns[MAX_PARTS];
    if (n == 0)
        return 0;
    if (n > MAX_PARTS)
        return -1;
    for (int64_t i = 0; i < n; i++)
        columns[i] = i * rows;
    const tfm__int8_weight *const *parts = (const tfm__int8_weight *const *)w->int8 + part;
    return multiply_parts(tfm__int8_path_chosen(), parts, (int)n, columns, m, x, y, ldy,
                          tfm__int8_workers(parts[0], n * m));
}

int tfm__int8_tensors_product(const tfm_tensor *const *w, int n, int64_t m, const float *x,
                              float *y, int64_t ldy)
{
    const tfm__int8_weight *parts[MAX_PARTS];
    int64_t columns[MAX_PARTS], out = 0;
    if (n < 1 || n > MAX_PARTS)
        return -1;
    for (int i = 0; i < n; i++) {
        if (w[i]->int8_parts != 1 || w[i]->shape[1] != w[0]->shape[1] ||
            !tfm__int8_tensor_pays(w[i]))
            return -1;
        parts[i] = w[i]->int8[0];
        columns[i] = out;
        out += w[i]->shape[0];
    }
    return multiply_parts(tfm__int8_path_chosen(), parts, n, columns, m, x, y, ldy,
                          tfm__int8_workers(parts[0], n * m));
}

/* --- choosing a path ------------------------------------------------------ */

int tfm__int8_path_runs(tfm__int8_path path)
{
    if (path == TFM__INT8_PORTABLE)
        return 1;
#if HAVE_X86_PATHS
#if TFM__CPU_DISPATCH
    int level = tfm__cpu_level();
#else
    int level = TFM__CPU_X86_64_V4; /* a -Dnative build: whatever the CPU has */
#endif
    __builtin_cpu_init();
    int avx2 = level >= TFM__CPU_X86_64_V3 && __builtin_cpu_supports("avx2") &&
               __builtin_cpu_supports("fma");
    switch (path) {
    case TFM__INT8_AVX2:
        return avx2;
    case TFM__INT8_AVX_VNNI: { /* CPUID.(7, 1):EAX bit 4, which Clang 14's builtin cannot name */
        unsigned a, b, c, d;
        return avx2 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
    }
    case TFM__INT8_AVX512_VNNI:
        return level >= TFM__CPU_X86_64_V4 && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512vnni");
    default:
        break;
    }
#endif
    return 0;
}

static int path_chosen = -1; /* until first asked */

tfm__int8_path tfm__int8_path_chosen(void)
{
    int path = __atomic_load_n(&path_chosen, __ATOMIC_RELAXED);
    if (path < 0) { /* threads racing here store the same value */
        path = TFM__INT8_PATHS - 1;
        while (!tfm__int8_path_runs((tfm__int8_path)path))
            path--;
        __atomic_store_n(&path_chosen, path, __ATOMIC_RELAXED);
    }
    return (tfm__int8_path)path;
}

const char *tfm__int8_path_name(tfm__int8_path path)
{
    static const char *const names[] = {"portable", "avx2", "avx-vnni", "avx512-vnni"};
    return names[path];
}

/* --- whether int8 pays ---------------------------------------------------- */

/* The multiply-adds per row (out x in) from which the AVX2 int8 path
 * beats the packed float32 kernel on AVX2 and on AVX-512 (measured:
 * docs/performance.md, "int8 where it pays") */
#define AVX2_PAYS_FROM (1 << 15)
#define AVX2_PAYS_FROM_AVX512 (1 << 17)

/* The level decoding's packed float32 kernel runs at (core/cpu.h). */
static int float_kernel_level(void)
{
#if TFM__CPU_DISPATCH
    return tfm__cpu_level();
#elif defined(__AVX512F__)
    return TFM__CPU_X86_64_V4;
#elif defined(__AVX2__)
    return TFM__CPU_X86_64_V3;
#else
    return TFM__CPU_BASELINE;
#endif
}

static int64_t pays_from_set = -1; /* the rule below */

void tfm__int8_set_pays_from(int64_t multiply_adds)
{
    __atomic_store_n(&pays_from_set, multiply_adds < 0 ? -1 : multiply_adds, __ATOMIC_RELAXED);
}

int tfm__int8_pays_on(tfm__int8_path path, int64_t out, int64_t in)
{
    /* VPDPBUSD wins at every shape; the AVX2 path from a size; the
     * portable path nowhere (a fifth to a half of the float32 kernel's
     * speed: its int32 sums do not vectorise as well as fused
     * multiply-adds) */
    switch (path) {
    case TFM__INT8_AVX512_VNNI:
    case TFM__INT8_AVX_VNNI:
        return 1;
    case TFM__INT8_AVX2:
        return out * in >= (float_kernel_level() >= TFM__CPU_X86_64_V4 ? AVX2_PAYS_FROM_AVX512
                                                                        : AVX2_PAYS_FROM);
    default:
        return 0;
    }
}

int tfm__int8_pays(int64_t out, int64_t in)
{
    int64_t from = __atomic_load_n(&pays_from_set, __ATOMIC_RELAXED);
    return from >= 0 ? out * in >= from : tfm__int8_pays_on(tfm__int8_path_chosen(), out, in);
}

int tfm__int8_tensor_pays(const tfm_tensor *w)
{
    return w->int8 && tfm__int8_pays(w->int8[0]->out, w->int8[0]->in);
}

/* --- weights -------------------------------------------------------------- */

void tfm__int8_free(tfm__int8_weight *w)
{
    if (w) {
        free(w->packed);
        free(w->scales);
        free(w->shift_sums);
        free(w->bias);
        free(w);
    }
}

static void *zeroed(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes) != 0)
        return NULL;
    return memset(p, 0, bytes);
}

/* An all-zero weight of these sizes with a copy of bias, or NULL. */
static tfm_status new_weight(const char *op, int64_t out, int64_t in, const float *bias,
                             tfm__int8_weight **result)
{
    *result = NULL;
    if (out < 1 || in < 1)
        return tfm__fail(TFM_ERR_ARG, "%s: a weight of %lld x %lld has no values", op,
                         (long long)out, (long long)in);
    if (in > TFM__INT8_MAX_IN || panels_of(out) > INT64_MAX / 2 / (groups_of(in) * GROUP_BYTES))
        return tfm__fail(TFM_ERR_SIZE, "%s: a weight of %lld x %lld is too large for int8 "
                         "products (at most %d inputs)", op, (long long)out, (long long)in,
                         TFM__INT8_MAX_IN);
    size_t channels = (size_t)(panels_of(out) * PANEL);
    tfm__int8_weight *w = calloc(1, sizeof *w);
    if (w) {
        w->out = out;
        w->in = in;
        w->packed = zeroed((size_t)(panels_of(out) * groups_of(in) * GROUP_BYTES));
        w->scales = zeroed(channels * sizeof *w->scales);
        w->shift_sums = zeroed(channels * sizeof *w->shift_sums);
        w->bias = bias ? zeroed(channels * sizeof *w->bias) : NULL;
    }
    if (!w || !w->packed || !w->scales || !w->shift_sums || (bias && !w->bias)) {
        tfm__int8_free(w);
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for an int8 weight of %lld x %lld",
                         op, (long long)out, (long long)in);
    }
    if (bias)
        memcpy(w->bias, bias, (size_t)out * sizeof *bias);
    *result = w;
    return TFM_OK;
}

/* The shift sums, once the values are packed. */
static void sum_channels(tfm__int8_weight *w)
{
    int64_t groups = groups_of(w->in);
    for (int64_t j = 0; j < w->out; j++) {
        const int8_t *q = w->packed + packed_index(groups, j, 0);
        int32_t sum = 0;
        for (int64_t g = 0; g < groups; g++)
            for (int b = 0; b < GROUP; b++)
                sum += q[g * GROUP_BYTES + b];
        w->shift_sums[j] = 128 * sum;
    }
}

tfm_status tfm__int8_quantize(const char *op, int64_t out, int64_t in, const float *weight,
                              const float *bias, tfm__int8_weight **result)
{
    *result = NULL;
    tfm__int8_weight *w;
    tfm_status status = new_weight(op, out, in, bias, &w);
    if (status != TFM_OK)
        return status;
    int64_t groups = groups_of(in);
    for (int64_t j = 0; j < out; j++) {
        const float *row = weight + j * in;
        float largest = 0.0f;
        for (int64_t k = 0; k < in; k++) {
            if (!isfinite(row[k])) {
                tfm__int8_free(w);
                return tfm__fail(TFM_ERR_NUMERIC, "%s: weight[%lld][%lld] is %g", op,
                                 (long long)j, (long long)k, (double)row[k]);
            }
            largest = fabsf(row[k]) > largest ? fabsf(row[k]) : largest;
        }
        w->scales[j] = largest / 127.0f;
        if (largest > 0.0f) /* in double, |w| / largest is exact enough to round once */
            for (int64_t k = 0; k < in; k++)
                w->packed[packed_index(groups, j, k)] =
                    (int8_t)nearbyint((double)row[k] * 127.0 / (double)largest);
    }
    sum_channels(w);
    *result = w;
    return TFM_OK;
}

tfm_status tfm__int8_from_values(const char *op, int64_t out, int64_t in, const int8_t *values,
                                 const float *scales, const float *bias,
                                 tfm__int8_weight **result)
{
    *result = NULL;
    tfm__int8_weight *w;
    tfm_status status = new_weight(op, out, in, bias, &w);
    if (status != TFM_OK)
        return status;
    int64_t groups = groups_of(in);
    for (int64_t j = 0; j < out && status == TFM_OK; j++) {
        if (!isfinite(scales[j]))
            status = tfm__fail(TFM_ERR_NUMERIC, "%s: int8 scale %lld is %g", op, (long long)j,
                               (double)scales[j]);
        else if (scales[j] < 0.0f)
            status = tfm__fail(TFM_ERR_ARG, "%s: int8 scale %lld is negative (%g)", op,
                               (long long)j, (double)scales[j]);
        w->scales[j] = scales[j];
        for (int64_t k = 0; k < in && status == TFM_OK; k++) {
            if (values[j * in + k] == INT8_MIN)
                status = tfm__fail(TFM_ERR_ARG, "%s: int8 value [%lld][%lld] is -128, outside "
                                   "the symmetric [-127, 127]", op, (long long)j, (long long)k);
            w->packed[packed_index(groups, j, k)] = values[j * in + k];
        }
    }
    if (status != TFM_OK) {
        tfm__int8_free(w);
        return status;
    }
    sum_channels(w);
    *result = w;
    return TFM_OK;
}

void tfm__int8_values(const tfm__int8_weight *w, int8_t *values, float *scales)
{
    int64_t groups = groups_of(w->in);
    for (int64_t j = 0; j < w->out; j++) {
        scales[j] = w->scales[j];
        for (int64_t k = 0; k < w->in; k++)
            values[j * w->in + k] = w->packed[packed_index(groups, j, k)];
    }
}

void tfm__int8_dequantize(const tfm__int8_weight *w, float *weight)
{
    int64_t groups = groups_of(w->in);
    for (int64_t j = 0; j < w->out; j++)
        for (int64_t k = 0; k < w->in; k++)
            weight[j * w->in + k] = (float)w->packed[packed_index(groups, j, k)] * w->scales[j];
}
