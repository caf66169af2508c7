#include "core/gemm_packed.h"

#include <string.h>

#include "core/cpu.h"
#include "core/parallel.h"
#include "core/vectors.h"

/* A product below this many multiply-adds per thread (~0.1 ms on one
 * core) is not worth waking a thread for (core/gemm.c's measure). */
#define MIN_MNK_PER_WORKER (1 << 21)

static int64_t panels_of(int64_t out)
{
    return (out + TFM__PANEL - 1) / TFM__PANEL;
}

void tfm__pack_columns(tfm__packed *p, int64_t first, const float *w, int64_t count,
                       const float *bias)
{
    int64_t in = p->in;
    for (int64_t c = 0; c < count; c++) {
        int64_t j = first + c;
        float *to = p->panels + j / TFM__PANEL * in * TFM__PANEL + j % TFM__PANEL;
        const float *from = w + c * in;
        for (int64_t k = 0; k < in; k++)
            to[k * TFM__PANEL] = from[k];
        p->bias[j] = bias ? bias[c] : 0.0f;
    }
}

int64_t tfm__packed_floats(int64_t out, int64_t in)
{
    return panels_of(out) * TFM__PANEL * (in + 1);
}

void tfm__packed_init(tfm__packed *p, int64_t out, int64_t in, float *floats)
{
    int64_t panels = panels_of(out), padded = panels * TFM__PANEL;
    *p = (tfm__packed){out, in, floats, floats + padded * in};
    /* the last panel's columns past out: zeros, which its sums drop */
    float *last = p->panels + (panels - 1) * in * TFM__PANEL;
    for (int64_t k = 0; out < padded && k < in; k++)
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

typedef struct product_job {
    const tfm__packed *p;
    const float *x;
    int64_t n, ldy;
    float *y;
    int level;
} product_job;

static void product_panels(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const product_job *j = ctx;
    const tfm__packed *p = j->p;
    packed_panels(j->x, j->n, p->in, p->panels, p->bias, p->out, begin, end, j->y,
                  j->ldy, j->level);
}

void tfm__packed_product(const tfm__packed *p, const float *x, int64_t n, float *y,
                         int64_t ldy)
{
    if (n < 1 || p->out < 1)
        return;
    product_job job = {p, x, n, ldy, y, kernel_level()};
    int64_t panels = panels_of(p->out);
    double mnk = (double)n * (double)p->out * (double)p->in;
    int workers = tfm__threads();
    if (workers > 1 && mnk < (double)MIN_MNK_PER_WORKER * workers)
        workers = (int)(mnk / MIN_MNK_PER_WORKER);
    if (workers > 1)
        tfm__parallel_for(panels, workers, product_panels, &job);
    else
        product_panels(&job, 0, panels, 0);
}
