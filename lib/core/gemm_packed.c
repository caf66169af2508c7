#include "core/gemm_packed.h"

#include <string.h>

#include "core/cpu.h"
#include "core/parallel.h"
#include "core/thread_buffer.h"
#include "core/vectors.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_BF16_KERNEL 1
#include <immintrin.h>
#else
#define HAVE_BF16_KERNEL 0
#endif

/* A product below this many multiply-adds per thread (~0.1 ms on one
 * core) is not worth waking a thread for (core/gemm.c's measure). */
#define MIN_MNK_PER_WORKER (1 << 21)

static int64_t panels_of(int64_t out)
{
    return (out + TFM__PANEL - 1) / TFM__PANEL;
}

static int64_t pairs_of(int64_t in)
{
    return (in + 1) / 2;
}

void tfm__pack_columns(tfm__packed *p, int64_t first, const float *w, int64_t count,
                       const float *bias)
{
    int64_t in = p->in;
    if (p->bf16) {
        int64_t pairs = pairs_of(in);
        for (int64_t c = 0; c < count; c++) {
            int64_t j = first + c;
            uint32_t *to = (uint32_t *)p->panels + j / TFM__PANEL * pairs * TFM__PANEL +
                           j % TFM__PANEL;
            const float *from = w + c * in;
            for (int64_t k = 0; k < pairs; k++)
                to[k * TFM__PANEL] =
                    tfm__bf16_round(from[2 * k]) |
                    (uint32_t)(2 * k + 1 < in ? tfm__bf16_round(from[2 * k + 1]) : 0) << 16;
            p->bias[j] = bias ? bias[c] : 0.0f;
        }
        return;
    }
    for (int64_t c = 0; c < count; c++) {
        int64_t j = first + c;
        float *to = p->panels + j / TFM__PANEL * in * TFM__PANEL + j % TFM__PANEL;
        const float *from = w + c * in;
        for (int64_t k = 0; k < in; k++)
            to[k * TFM__PANEL] = from[k];
        p->bias[j] = bias ? bias[c] : 0.0f;
    }
}

int64_t tfm__packed_floats(int64_t out, int64_t in, int bf16)
{
    return panels_of(out) * TFM__PANEL * ((bf16 ? pairs_of(in) : in) + 1);
}

void tfm__packed_init(tfm__packed *p, int64_t out, int64_t in, int bf16, float *floats)
{
    int64_t panels = panels_of(out), padded = panels * TFM__PANEL;
    int64_t words = bf16 ? pairs_of(in) : in; /* a column's */
    *p = (tfm__packed){out, in, floats, floats + padded * words, bf16};
    /* the last panel's columns past out: zeros, which its sums drop */
    float *last = p->panels + (panels - 1) * words * TFM__PANEL;
    for (int64_t k = 0; out < padded && k < words; k++)
        memset(last + k * TFM__PANEL + out % TFM__PANEL, 0,
               (size_t)(padded - out) * sizeof(float));
    memset(p->bias + out, 0, (size_t)(padded - out) * sizeof(float));
}

/* Rows [i, i + R) of x times panels [j, j + C): R rows of C * 16
 * columns of sums in registers, as vectors of W floats (vecW, which the
 * level's registers hold: GCC spills a vec16 through the stack below
 * AVX-512), each step of k one load of each vector of weights and one
 * broadcast of each row's x[k]. Rows past n repeat row n - 1 (the rows'
 * tail), whose sums are dropped; so are the columns past out. */
#define TFM__PACKED_TILE(W)                                                                    \
    TFM__INLINE void tile##W(const float *restrict x, int64_t n, int64_t in,                   \
                             int64_t i, const float *restrict panels,                          \
                             const float *restrict bias, int64_t out, int64_t j,               \
                             float *restrict y, int64_t ldy, const int R, const int C)         \
    {                                                                                          \
        const int V = C * TFM__PANEL / W; /* vectors across the tile */                        \
        const float *row[4], *w[4];                                                            \
        vec##W acc[4][4];                                                                      \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                    \
            row[r] = x + (i + r < n ? i + r : n - 1) * in;                                     \
        _Pragma("GCC unroll 4") for (int v = 0; v < V; v++)                                    \
        {                                                                                      \
            int64_t panel = j + v * W / TFM__PANEL, lane = v * W % TFM__PANEL;                 \
            w[v] = panels + panel * in * TFM__PANEL + lane;                                    \
            vec##W b = load##W(bias + panel * TFM__PANEL + lane);                              \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++) acc[r][v] = b;                 \
        }                                                                                      \
        for (int64_t k = 0; k < in; k++) {                                                     \
            vec##W wk[4];                                                                      \
            _Pragma("GCC unroll 4") for (int v = 0; v < V; v++)                                \
                wk[v] = load##W(w[v] + k * TFM__PANEL);                                        \
            _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                \
            {                                                                                  \
                float xk = row[r][k];                                                          \
                _Pragma("GCC unroll 4") for (int v = 0; v < V; v++) acc[r][v] += xk * wk[v];   \
            }                                                                                  \
        }                                                                                      \
        _Pragma("GCC unroll 4") for (int r = 0; r < R; r++)                                    \
        {                                                                                      \
            if (i + r >= n)                                                                    \
                break;                                                                         \
            _Pragma("GCC unroll 4") for (int v = 0; v < V; v++)                                \
            {                                                                                  \
                int64_t column = j * TFM__PANEL + v * W, width = out - column;                 \
                float *to = y + (i + r) * ldy + column;                                        \
                if (width >= W) {                                                              \
                    store##W(to, acc[r][v]);                                                   \
                } else if (width > 0) {                                                        \
                    float lanes[W];                                                            \
                    store##W(lanes, acc[r][v]);                                                \
                    memcpy(to, lanes, (size_t)width * sizeof(float));                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }
TFM__PACKED_TILE(16)
TFM__PACKED_TILE(8)
TFM__PACKED_TILE(4)

/* x's rows a block at a time: as many as keep it within ROW_BLOCK_BYTES
 * (in the core's L2 beside the panels): a beam's wide groups at a wide
 * in; a step's few rows are one block. */
#define ROW_BLOCK_BYTES (256 << 10)

/* Panels [first, last) for all n rows, C panels at a time (the last one
 * alone when C does not divide them), each block's panels read once per
 * tile of R rows while they stay in the core's caches. */
#define TFM__PANEL_BLOCKS(W)                                                                   \
    TFM__INLINE void panel_blocks##W(const float *restrict x, int64_t n,                       \
                                     int64_t in, const float *restrict panels,                 \
                                     const float *restrict bias, int64_t out, int64_t first,   \
                                     int64_t last, float *restrict y, int64_t ldy, const int R, \
                                     const int C)                                              \
    {                                                                                          \
        int64_t rows = ROW_BLOCK_BYTES / (int64_t)sizeof(float) / (in > 0 ? in : 1) / R * R;   \
        rows = rows > R ? rows : R;                                                            \
        for (int64_t i0 = 0; i0 < n; i0 += rows) {                                             \
            const float *xb = x + i0 * in;                                                     \
            float *yb = y + i0 * ldy;                                                          \
            int64_t nb = n - i0 < rows ? n - i0 : rows, j = first;                             \
            for (; j + C <= last; j += C)                                                      \
                for (int64_t i = 0; i < nb; i += R)                                            \
                    tile##W(xb, nb, in, i, panels, bias, out, j, yb, ldy, R, C);               \
            for (; j < last; j++)                                                              \
                for (int64_t i = 0; i < nb; i += R)                                            \
                    tile##W(xb, nb, in, i, panels, bias, out, j, yb, ldy, R, 1);               \
        }                                                                                      \
    }
TFM__PANEL_BLOCKS(16)
TFM__PANEL_BLOCKS(8)
TFM__PANEL_BLOCKS(4)

/* Tiles as large as the level's registers hold: 4 rows x 32 columns in
 * 8 of AVX-512's 32 registers, 4 x 16 in 8 of AVX2's 16, 2 x 16 in 8 of
 * SSE2's 16. */
static TFM__KERNEL(packed_panels,
                   (const float *restrict x, int64_t n, int64_t in,
                    const float *restrict panels, const float *restrict bias, int64_t out,
                    int64_t first, int64_t last, float *restrict y, int64_t ldy, int level),
                   (x, n, in, panels, bias, out, first, last, y, ldy, level))
{
    if (level == TFM__CPU_X86_64_V4)
        panel_blocks16(x, n, in, panels, bias, out, first, last, y, ldy, 4, 2);
    else if (level == TFM__CPU_X86_64_V3)
        panel_blocks8(x, n, in, panels, bias, out, first, last, y, ldy, 4, 1);
    else
        panel_blocks4(x, n, in, panels, bias, out, first, last, y, ldy, 2, 1);
}

/* The level whose tiles packed_panels runs. */
static int kernel_level(void)
{
#if TFM__CPU_DISPATCH
    return tfm__cpu_level();
#elif defined(__AVX512F__)
    return TFM__CPU_X86_64_V4;
#elif defined(__AVX2__) && defined(__FMA__)
    return TFM__CPU_X86_64_V3;
#else
    return TFM__CPU_BASELINE;
#endif
}

#if HAVE_BF16_KERNEL
/* Only for CPUs with AVX512_BF16, which packing in bfloat16 requires: the
 * names end in __avx512_bf16 for tests/check_isa.py. */
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

/* The first n of 16 lanes (none for n <= 0, all for n >= 16). */
static inline __mmask16 first_lanes(int64_t n)
{
    return (__mmask16)(n >= 16 ? 0xffff : n > 0 ? (1u << n) - 1 : 0);
}

/* Rows [0, n) of x [n, in] as pairs of bfloat16 [n, (in + 1) / 2], each
 * float rounded to nearest even (a last odd one paired with a zero). */
BF16_TARGET static void round_rows__avx512_bf16(const float *x, int64_t n, int64_t in,
                                                uint32_t *to)
{
    int64_t pairs = pairs_of(in);
    for (int64_t i = 0; i < n; i++)
        for (int64_t k = 0; k < in; k += 32) {
            const float *row = x + i * in + k;
            __m512 lo = _mm512_maskz_loadu_ps(first_lanes(in - k), row);
            __m512 hi = _mm512_maskz_loadu_ps(first_lanes(in - k - 16), row + 16);
            _mm512_mask_storeu_epi32(to + i * pairs + k / 2, first_lanes(pairs - k / 2),
                                     (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
        }
}

/* Rows [i, i + R) of the rounded x times panels [j, j + C), as tile##W's:
 * rows past n repeat row n - 1, columns past out are dropped. */
BF16_TARGET static inline __attribute__((always_inline)) void
tile_bf16__avx512_bf16(const uint32_t *x, int64_t n, int64_t pairs, int64_t i,
                       const uint32_t *panels, const float *bias, int64_t out, int64_t j,
                       float *y, int64_t ldy, const int R, const int C)
{
    const uint32_t *row[8], *w[4];
    __m512 acc[8][4];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        row[r] = x + (i + r < n ? i + r : n - 1) * pairs;
#pragma GCC unroll 4
    for (int v = 0; v < C; v++) {
        w[v] = panels + (j + v) * pairs * TFM__PANEL;
        __m512 b = _mm512_loadu_ps(bias + (j + v) * TFM__PANEL);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            acc[r][v] = b;
    }
    for (int64_t k = 0; k < pairs; k++) {
        __m512bh wk[4];
#pragma GCC unroll 4
        for (int v = 0; v < C; v++)
            wk[v] = (__m512bh)_mm512_loadu_si512(w[v] + k * TFM__PANEL);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512bh xk = (__m512bh)_mm512_set1_epi32((int)row[r][k]);
#pragma GCC unroll 4
            for (int v = 0; v < C; v++)
                acc[r][v] = _mm512_dpbf16_ps(acc[r][v], xk, wk[v]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        if (i + r >= n)
            continue;
#pragma GCC unroll 4
        for (int v = 0; v < C; v++) {
            int64_t column = (j + v) * TFM__PANEL;
            _mm512_mask_storeu_ps(y + (i + r) * ldy + column, first_lanes(out - column),
                                  acc[r][v]);
        }
    }
}

/* Rows [i, i + R) times panels [j, j + count), count at most 4: C
 * panels a tile, the last alone when C does not divide them. */
BF16_TARGET static inline __attribute__((always_inline)) void
row_tiles_bf16__avx512_bf16(const uint32_t *x, int64_t n, int64_t pairs, int64_t i,
                            const uint32_t *panels, const float *bias, int64_t out, int64_t j,
                            int64_t count, float *y, int64_t ldy, const int R, const int C)
{
    int64_t v = 0;
    for (; v + C <= count; v += C)
        tile_bf16__avx512_bf16(x, n, pairs, i, panels, bias, out, j + v, y, ldy, R, C);
    for (; v < count; v++)
        tile_bf16__avx512_bf16(x, n, pairs, i, panels, bias, out, j + v, y, ldy, R, 1);
}

/* Panels [first, last) for the n rounded rows, 4 panels at a time while
 * they stay in the core's caches: tiles of 8 rows x 2 panels (16 of the
 * 32 registers), and a step's last few rows (or its only ones) in tiles
 * of 4, 2 or 1 rows x 4 panels, so that no tile multiplies rows it drops
 * but for the tail of 3, 5, 6 or 7. */
BF16_TARGET static void panels_bf16__avx512_bf16(const uint32_t *x, int64_t n, int64_t pairs,
                                                 const uint32_t *panels, const float *bias,
                                                 int64_t out, int64_t first, int64_t last,
                                                 float *y, int64_t ldy)
{
    for (int64_t j = first; j < last; j += 4) {
        int64_t count = last - j < 4 ? last - j : 4, i = 0;
        for (; i + 8 <= n; i += 8)
            row_tiles_bf16__avx512_bf16(x, n, pairs, i, panels, bias, out, j, count, y, ldy, 8,
                                        2);
        for (; i < n;) {
            int64_t left = n - i;
            if (left >= 4) {
                row_tiles_bf16__avx512_bf16(x, n, pairs, i, panels, bias, out, j, count, y,
                                            ldy, 4, 4);
                i += 4;
            } else if (left >= 2) {
                row_tiles_bf16__avx512_bf16(x, n, pairs, i, panels, bias, out, j, count, y,
                                            ldy, 2, 4);
                i += 2;
            } else {
                row_tiles_bf16__avx512_bf16(x, n, pairs, i, panels, bias, out, j, count, y,
                                            ldy, 1, 4);
                i += 1;
            }
        }
    }
}
#endif

typedef struct product_job {
    const tfm__packed *p;
    const float *x;
    const uint32_t *pairs; /* bf16: x's rows rounded, [n][(in + 1) / 2] */
    int64_t n, ldy;
    float *y;
    int level;
} product_job;

static void product_panels(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const product_job *j = ctx;
    const tfm__packed *p = j->p;
#if HAVE_BF16_KERNEL
    if (p->bf16) {
        panels_bf16__avx512_bf16(j->pairs, j->n, pairs_of(p->in), (const uint32_t *)p->panels,
                                 p->bias, p->out, begin, end, j->y, j->ldy);
        return;
    }
#endif
    packed_panels(j->x, j->n, p->in, p->panels, p->bias, p->out, begin, end, j->y,
                  j->ldy, j->level);
}

/* The job's product, its panels split among libtfm's threads when it is
 * large enough to pay for them. */
static void multiply(product_job *job)
{
    const tfm__packed *p = job->p;
    int64_t n = job->n;
    int64_t panels = panels_of(p->out);
    double mnk = (double)n * (double)p->out * (double)p->in;
    int workers = tfm__threads();
    if (workers > 1 && mnk < (double)MIN_MNK_PER_WORKER * workers)
        workers = (int)(mnk / MIN_MNK_PER_WORKER);
    if (workers > 1)
        tfm__parallel_for(panels, workers, product_panels, job);
    else
        product_panels(job, 0, panels, 0);
}

int tfm__packed_product(const tfm__packed *p, const float *x, int64_t n, float *y, int64_t ldy)
{
    if (n < 1 || p->out < 1)
        return 0;
    product_job job = {p, x, NULL, n, ldy, y, kernel_level()};
#if HAVE_BF16_KERNEL
    if (p->bf16) {
        uint32_t *rounded = tfm__thread_buffer((size_t)(n * pairs_of(p->in)) * sizeof *rounded);
        if (!rounded)
            return -1;
        round_rows__avx512_bf16(x, n, p->in, rounded);
        job.pairs = rounded;
    }
#endif
    multiply(&job);
    return 0;
}
