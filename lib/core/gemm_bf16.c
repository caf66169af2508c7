/* bfloat16 products (core/gemm_bf16.h), blocked as GotoBLAS/BLIS block
 * theirs: op(B) is packed whole, once per product and shared by the
 * threads, into panels of NR columns; each thread packs its rows of op(A)
 * a block of MC x KC at a time (into panels of MR rows, or only converted
 * when its k runs along its rows), and a micro-kernel keeps an MR x NR
 * tile of C in 24 registers while it runs down MR rows of A and one B
 * panel. A packed element is a pair of bfloat16 (two consecutive k) in 32
 * bits, the operand VDPBF16PS multiplies. */
#include "core/gemm_bf16.h"

#include <string.h>

#include "core/parallel.h"
#include "core/thread_buffer.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_BF16_KERNEL 1
#include <immintrin.h>
#else
#define HAVE_BF16_KERNEL 0
#endif

#define MR 12          /* rows of a C tile */
#define NV 2           /* its columns: NV vectors of 16 floats, MR x NV accumulators */
#define NR (16 * NV)
#define KC 256         /* k per block: a B panel is KC/2 x NR pairs, 16 KB, in L1 */
#define MC (12 * MR)   /* rows per A block: 72 KB, in L2 */
#define PIECE_ROWS MR  /* threads split C's rows in whole tiles */
#define A_BLOCK_WORDS (MC * KC / 2)
#define PREFETCH_PAIRS 4 /* how far ahead interleaved packing asks for its rows */

#if HAVE_BF16_KERNEL
/* Only for CPUs with AVX512_BF16, checked before any product: the names
 * end in __avx512_bf16 for tests/check_isa.py. */
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

/* The pairs of k a packed panel holds for k values (an odd last one is
 * paired with a zero). */
static int64_t pairs_of(int64_t k)
{
    return (k + 1) / 2;
}

/* The first n of 16 lanes (none for n <= 0, all for n >= 16). */
static inline __mmask16 first_lanes(int64_t n)
{
    return (__mmask16)(n >= 16 ? 0xffff : n > 0 ? (1u << n) - 1 : 0);
}

/* The next 16 pairs of a row whose k runs along it, `left` floats of it
 * still to take (past them: zeros), rounded to bfloat16 to nearest even:
 * word p holds the row's floats 2p (low half) and 2p + 1. */
BF16_TARGET static inline __m512i row_pairs__avx512_bf16(const float *row, int64_t left)
{
    __m512 lo = _mm512_maskz_loadu_ps(first_lanes(left), row);
    __m512 hi = _mm512_maskz_loadu_ps(first_lanes(left - 16), row + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* Row i of w becomes column i (32-bit elements): two rounds of unpacking
 * within 128-bit lanes, two of shuffling the lanes. */
BF16_TARGET static inline void transpose_16x16__avx512_bf16(__m512i w[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(w[i], w[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(w[i], w[i + 1]);
    }
    /* u[4g + j], lane L: element 4L + j of rows 4g .. 4g + 3 */
    for (int g = 0; g < 16; g += 4) {
        u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
        u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
        u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
        u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    for (int j = 0; j < 4; j++) {
        __m512i low_a = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44);
        __m512i low_b = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
        __m512i high_a = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xee);
        __m512i high_b = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xee);
        w[j] = _mm512_shuffle_i32x4(low_a, low_b, 0x88);
        w[4 + j] = _mm512_shuffle_i32x4(low_a, low_b, 0xdd);
        w[8 + j] = _mm512_shuffle_i32x4(high_a, high_b, 0x88);
        w[12 + j] = _mm512_shuffle_i32x4(high_a, high_b, 0xdd);
    }
}

/* Packs `panels` panels of `width` lanes each (rows of op(A), or columns
 * of op(B)), of which `valid` lanes exist in all, over k in [k0, k0 + kc):
 * panel q's dst[q * panel_words + p * width + lane] holds k0 + 2p (low
 * half) and k0 + 2p + 1 of that lane, rounded to bfloat16 to nearest even.
 * Elements past k or past the valid lanes are zeros. The source holds
 * lane r's k-th element at src[r * ld + k] when k runs along its rows
 * (along_rows), else at src[k * ld + r]. */
BF16_TARGET static void pack_panels__avx512_bf16(uint32_t *dst, int width, int64_t panel_words,
                                                 int64_t panels, int64_t valid, const float *src,
                                                 int64_t ld, int along_rows, int64_t k0,
                                                 int64_t kc)
{
    int64_t pairs = pairs_of(kc);
    if (along_rows) { /* a lane's pairs lie side by side: 16 lanes x 16 pairs, transposed */
        for (int64_t q = 0; q < panels; q++) {
            uint32_t *panel = dst + q * panel_words;
            int64_t first_lane = q * width;
            for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
                int64_t left = kc - 2 * p0; /* floats of each lane still to pack */
                int n = (int)(pairs - p0 < 16 ? pairs - p0 : 16);
                for (int r0 = 0; r0 < width; r0 += 16) {
                    __m512i words[16];
                    for (int r = 0; r < 16; r++) {
                        words[r] = _mm512_setzero_si512();
                        int64_t lane = first_lane + r0 + r;
                        if (r0 + r < width && lane < valid)
                            words[r] = row_pairs__avx512_bf16(src + lane * ld + k0 + 2 * p0, left);
                    }
                    transpose_16x16__avx512_bf16(words);
                    for (int i = 0; i < n; i++)
                        _mm512_mask_storeu_epi32(panel + (p0 + i) * width + r0,
                                                 first_lanes(width - r0), words[i]);
                }
            }
        }
        return;
    }
    /* a pair's two halves lie in two rows of the source, read front to back
     * across all the panels: interleaved */
    const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10,
                                                25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3,
                                                18, 2, 17, 1, 16, 0);
    for (int64_t p = 0; p < pairs; p++) {
        const float *lo = src + (k0 + 2 * p) * ld;
        int has_hi = 2 * p + 1 < kc;
        for (int64_t q = 0; q < panels; q++) {
            for (int r0 = 0; r0 < width; r0 += 16) {
                int64_t lane = q * width + r0;
                __mmask16 store = first_lanes(width - r0), load = first_lanes(valid - lane) & store;
                if (2 * p + 2 * PREFETCH_PAIRS + 1 < kc) { /* rows far apart: ask ahead */
                    const float *ahead = lo + 2 * PREFETCH_PAIRS * ld + lane;
                    _mm_prefetch((const char *)ahead, _MM_HINT_T0);
                    _mm_prefetch((const char *)(ahead + ld), _MM_HINT_T0);
                }
                __m512 l = _mm512_maskz_loadu_ps(load, lo + lane);
                __m512 h = has_hi ? _mm512_maskz_loadu_ps(load, lo + ld + lane)
                                  : _mm512_setzero_ps();
                __m512i words = _mm512_permutexvar_epi16(interleave,
                                                         (__m512i)_mm512_cvtne2ps_pbh(h, l));
                _mm512_mask_storeu_epi32(dst + q * panel_words + p * width + r0, store, words);
            }
        }
    }
}

/* Rows [0, rows) of a block of op(A) whose k runs along the source's
 * rows, over k in [k0, k0 + kc): dst[r * stride + p] holds row r's pair p,
 * as pack_panels rounds it; rows past `valid` are zeros. Rows need no
 * transposing: the micro-kernel broadcasts each element from where it
 * lies. */
BF16_TARGET static void convert_rows__avx512_bf16(uint32_t *dst, int64_t stride, int64_t rows,
                                                  int64_t valid, const float *src, int64_t ld,
                                                  int64_t k0, int64_t kc)
{
    int64_t pairs = pairs_of(kc);
    for (int64_t r = 0; r < rows; r++) {
        uint32_t *out = dst + r * stride;
        if (r >= valid) {
            memset(out, 0, (size_t)pairs * sizeof *out);
            continue;
        }
        const float *row = src + r * ld + k0;
        for (int64_t j = 0; j < kc; j += 32)
            _mm512_mask_storeu_epi32(out + j / 2, first_lanes(pairs - j / 2),
                                     row_pairs__avx512_bf16(row + j, kc - j));
    }
}

typedef struct product {
    int64_t m, n, k;
    float alpha, beta;
    const float *a, *b;
    int64_t lda, ldb;
    int a_along_rows, b_along_rows; /* k runs along the source's rows */
    float *c;
    int64_t ldc;
    const float *bias; /* added to each row of C, or NULL */
    uint32_t *packed_b; /* pairs(k) x panels, each panel's pairs together */
    uint32_t *packed_a; /* A_BLOCK_WORDS per worker */
} product;

/* Panels [begin, end) of op(B), each over the whole of k. */
static void pack_b_panels(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const product *p = ctx;
    int64_t j0 = begin * NR, words = pairs_of(p->k) * NR;
    const float *src = p->b_along_rows ? p->b + j0 * p->ldb : p->b + j0;
    pack_panels__avx512_bf16(p->packed_b + begin * words, NR, words, end - begin, p->n - j0, src,
                             p->ldb, p->b_along_rows, 0, p->k);
}

/* C tile [rows, cols] (at most MR x NR) = alpha * A x B panel over
 * `pairs` pairs, plus beta * C (C unread when beta is 0), plus the bias
 * row's `cols` values unless it is NULL; row r's pair p of A is
 * a[p * a_pair + r * a_row]. */
BF16_TARGET static inline __attribute__((always_inline)) void
tile_product__avx512_bf16(int64_t pairs, const uint32_t *a, int64_t a_row, int64_t a_pair,
                          const uint32_t *b, float *c, int64_t ldc, int rows, int cols,
                          float alpha, float beta, const float *bias)
{
    __m512 acc[MR][NV];
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            acc[r][v] = _mm512_setzero_ps();
    for (int64_t p = 0; p < pairs; p++) {
        /* C's rows lie far apart, out of cache for a large C: asked for one
         * per pair, they arrive while the loop runs */
        if (p < rows) {
            _mm_prefetch((const char *)(c + p * ldc), _MM_HINT_T0);
            _mm_prefetch((const char *)(c + p * ldc + cols - 1), _MM_HINT_T0);
        }
        __m512bh bv[NV];
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++)
            bv[v] = (__m512bh)_mm512_loadu_si512(b + p * NR + 16 * v);
#pragma GCC unroll 16
        for (int r = 0; r < MR; r++) {
            __m512bh ar = (__m512bh)_mm512_set1_epi32((int)a[p * a_pair + r * a_row]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++)
                acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, bv[v]);
        }
    }
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int v = 0; v < NV; v++) {
        __mmask16 mask = first_lanes(cols - 16 * v);
        /* without a bias, -0 leaves every product's bits as they are, +0's sign too */
        __m512 add = bias ? _mm512_maskz_loadu_ps(mask, bias + 16 * v) : _mm512_set1_ps(-0.0f);
        for (int r = 0; r < rows; r++) {
            float *cr = c + r * ldc + 16 * v;
            __m512 y = _mm512_fmadd_ps(va, acc[r][v], add);
            if (beta != 0.0f)
                y = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mask, cr), y);
            _mm512_mask_storeu_ps(cr, mask, y);
        }
    }
}

/* The tile's A as a panel of MR rows, pair by pair (pack_panels). */
BF16_TARGET static void micro_kernel_panel__avx512_bf16(int64_t pairs, const uint32_t *a,
                                                        const uint32_t *b, float *c, int64_t ldc,
                                                        int rows, int cols, float alpha,
                                                        float beta, const float *bias)
{
    tile_product__avx512_bf16(pairs, a, 1, MR, b, c, ldc, rows, cols, alpha, beta, bias);
}

/* The tile's A as rows of KC / 2 pairs each (convert_rows). */
BF16_TARGET static void micro_kernel_rows__avx512_bf16(int64_t pairs, const uint32_t *a,
                                                       const uint32_t *b, float *c, int64_t ldc,
                                                       int rows, int cols, float alpha,
                                                       float beta, const float *bias)
{
    tile_product__avx512_bf16(pairs, a, KC / 2, 1, b, c, ldc, rows, cols, alpha, beta, bias);
}

/* The rows of a block of mc the tile at r0 covers. */
static int tile_rows(int64_t mc, int64_t r0)
{
    return (int)(mc - r0 < MR ? mc - r0 : MR);
}

/* Rows [begin, end) of C, in whole tiles; each worker packs its A blocks
 * into its own part of packed_a. */
static void multiply_rows(void *ctx, int64_t begin, int64_t end, int worker)
{
    const product *p = ctx;
    uint32_t *packed_a = p->packed_a + (size_t)worker * A_BLOCK_WORDS;
    int64_t first = begin * PIECE_ROWS, last = end * PIECE_ROWS;
    if (last > p->m)
        last = p->m;
    int64_t all_pairs = pairs_of(p->k);
    void (*kernel)(int64_t, const uint32_t *, const uint32_t *, float *, int64_t, int, int, float,
                   float, const float *) = p->a_along_rows ? micro_kernel_rows__avx512_bf16
                                                           : micro_kernel_panel__avx512_bf16;
    for (int64_t k0 = 0; k0 < p->k; k0 += KC) {
        int64_t kc = p->k - k0 < KC ? p->k - k0 : KC, pairs = pairs_of(kc);
        float beta = k0 == 0 ? p->beta : 1.0f;
        const float *bias = k0 == 0 ? p->bias : NULL;
        for (int64_t i0 = first; i0 < last; i0 += MC) {
            int64_t mc = last - i0 < MC ? last - i0 : MC;
            int64_t tiles = (mc + MR - 1) / MR;
            if (p->a_along_rows)
                convert_rows__avx512_bf16(packed_a, KC / 2, tiles * MR, mc, p->a + i0 * p->lda,
                                          p->lda, k0, kc);
            else
                pack_panels__avx512_bf16(packed_a, MR, MR * (KC / 2), tiles, mc, p->a + i0,
                                         p->lda, 0, k0, kc);
            for (int64_t j0 = 0; j0 < p->n; j0 += NR) {
                const uint32_t *b = p->packed_b + (j0 / NR) * all_pairs * NR + (k0 / 2) * NR;
                int cols = (int)(p->n - j0 < NR ? p->n - j0 : NR);
                for (int64_t r0 = 0; r0 < mc; r0 += MR)
                    kernel(pairs, packed_a + r0 * (KC / 2), b, p->c + (i0 + r0) * p->ldc + j0,
                           p->ldc, tile_rows(mc, r0), cols, p->alpha, beta,
                           bias ? bias + j0 : NULL);
            }
        }
    }
}
#endif

int tfm__cpu_has_bf16(void)
{
#if HAVE_BF16_KERNEL
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

int tfm__sgemm_bf16(int transpose_a, int transpose_b, int64_t m, int64_t n, int64_t k,
                    float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                    float beta, const float *bias, float *c, int64_t ldc, int workers)
{
#if HAVE_BF16_KERNEL
    int64_t panels = (n + NR - 1) / NR;
    size_t a_words = (size_t)workers * A_BLOCK_WORDS;
    /* the packed operands in the calling thread's buffer: its workers' A
     * blocks, then the shared op(B) */
    uint32_t *packed = tfm__thread_buffer(
        (a_words + (size_t)(panels * pairs_of(k) * NR)) * sizeof(uint32_t));
    if (!packed)
        return -1;
    product p = {m, n, k, alpha, beta, a, b, lda, ldb, !transpose_a, transpose_b, c, ldc,
                 bias, packed + a_words, packed};
    tfm__parallel_for(panels, workers, pack_b_panels, &p);
    tfm__parallel_for((m + PIECE_ROWS - 1) / PIECE_ROWS, workers, multiply_rows, &p);
    return 0;
#else
    (void)transpose_a, (void)transpose_b, (void)m, (void)n, (void)k, (void)alpha, (void)a,
        (void)lda, (void)b, (void)ldb, (void)beta, (void)bias, (void)c, (void)ldc, (void)workers;
    return -1;
#endif
}
