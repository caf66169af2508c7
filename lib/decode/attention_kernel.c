/* Attention over the caches (cache.c's tiles). The kernel takes four query
 * heads at a time: a row's heads, or a source's beam hypotheses for one
 * head, which read the same tiles. A query's scores vectorise over the
 * positions and its context over d_k (sixteen at a time; at d_k 8, two
 * positions' values at once), both accumulating in registers. It
 * reads float32 tiles, or bfloat16 ones widened to float32 as they load
 * (half the bytes from memory, the same float32 arithmetic). A step's rows
 * feed it, split among libtfm's threads when their group may. When a
 * step's caches outgrow the last-level cache, each set of queries runs
 * once the next is known, and prefetches its tiles. */
#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "core/fastmath.h"
#include "core/gemm_bf16.h"
#include "core/parallel.h"
#include "core/vectors.h"
#include "decode/decode.h"

/* A query head for attend: its query [d_k] over the tiles listed in table
 * (NULL: the tiles one after another), the keys it may attend to (keep,
 * whole tiles of them; NULL: all), where its context [d_k] goes, its
 * weights [len] (NULL: nowhere; the alignments), and what its scores get
 * added (bias, whole tiles; NULL: nothing). */
typedef struct query {
    const float *q;
    const void *tiles;
    const int32_t *table, *keep;
    float *context, *weights;
    const float *bias;
} query;

/* The tile of position j0, tiles being `size` bytes each. */
static const void *tile_of(const query *query, int64_t j0, size_t size)
{
    return (const char *)query->tiles +
           (size_t)(query->table ? query->table[j0 / BLOCK] : j0 / BLOCK) * size;
}

/* A tile's 16, 8 or 1 elements from element i, as float32 (bf16: bfloat16
 * ones; a constant in each of attend's copies). */
TFM__INLINE vec16 cached16(const void *tile, int64_t i, int bf16)
{
    return bf16 ? load16_bf16((const uint16_t *)tile + i) : load16((const float *)tile + i);
}

TFM__INLINE vec8 cached8(const void *tile, int64_t i, int bf16)
{
    return bf16 ? load8_bf16((const uint16_t *)tile + i) : load8((const float *)tile + i);
}

TFM__INLINE float cached1(const void *tile, int64_t i, int bf16)
{
    if (!bf16)
        return ((const float *)tile)[i];
    uint32_t bits = (uint32_t)((const uint16_t *)tile)[i] << 16;
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

/* The queries read the same tile (a source's beam hypotheses, one head) */
static int one_tile(const void *const *tiles)
{
    int same = 1;
    for (int i = 1; i < QUERIES; i++)
        same &= tiles[i] == tiles[0];
    return same;
}

/* The tiles the next set of queries will read, walked a few cache lines
 * at a time (into L2) while this set computes: when a step's caches come
 * from memory, a set's own loads would otherwise wait for them with its
 * arithmetic idle. Each distinct tile is fetched once. */
typedef struct prefetcher {
    const query *queries; /* NULL: nothing left */
    const char *tile;     /* the tile being fetched, from byte `at` */
    int64_t len, j0;
    size_t size, at;
    int i;
} prefetcher;

static void start_prefetch(prefetcher *f, const query *queries, int64_t len, size_t size)
{
    *f = (prefetcher){queries, NULL, len, 0, size, 0, 0};
    if (queries && len > 0)
        f->tile = tile_of(queries, 0, size);
    else
        f->queries = NULL;
}

TFM__INLINE void prefetch_lines(prefetcher *f, int lines)
{
    for (; f->queries && lines > 0; lines--) {
        __builtin_prefetch(f->tile + f->at, 0, 2);
        if ((f->at += 64) < f->size)
            continue;
        /* the next query whose tile differs, else the next tile */
        const char *done = f->tile;
        f->at = 0;
        while (++f->i < QUERIES && (f->tile = tile_of(&f->queries[f->i], f->j0, f->size)) == done)
            ;
        if (f->i < QUERIES)
            continue;
        f->i = 0;
        if ((f->j0 += BLOCK) >= f->len)
            f->queries = NULL;
        else
            f->tile = tile_of(f->queries, f->j0, f->size);
    }
}

/* The queries' context e0 .. e0 + W - 1, W = 16 or 8 (vecW) of d_k: each
 * element sums its weighted values over the even positions of each tile
 * (a) and the odd ones (b), in order, so that a width gives every element
 * the same sum (16 reads a value's cache line once; 8 its half). */
#define CONTEXT_CHUNK(W)                                                                     \
    do {                                                                                     \
        vec##W a[QUERIES], b[QUERIES];                                                       \
        _Pragma("GCC unroll 4") for (int i = 0; i < QUERIES; i++) a[i] = b[i] = (vec##W){0}; \
        for (int64_t j0 = 0; j0 < len; j0 += BLOCK) {                                        \
            const int64_t n = len - j0 < BLOCK ? len - j0 : BLOCK;                           \
            const void *v[QUERIES]; /* their values from element `at` */                     \
            const int64_t at = BLOCK * dk + e0;                                              \
            _Pragma("GCC unroll 4") for (int i = 0; i < QUERIES; i++) v[i] =                 \
                tile_of(&queries[i], j0, size);                                              \
            int64_t j = 0;                                                                   \
            if (one_tile(v))                                                                 \
                for (; j + 2 <= n; j += 2) {                                                 \
                    const vec##W va = cached##W(v[0], at + j * dk, bf16),                    \
                                 vb = cached##W(v[0], at + (j + 1) * dk, bf16);              \
                    _Pragma("GCC unroll 4") for (int i = 0; i < QUERIES; i++)                \
                    {                                                                        \
                        const float *pj = p + i * stride + j0 + j;                           \
                        a[i] += pj[0] * va;                                                  \
                        b[i] += pj[1] * vb;                                                  \
                    }                                                                        \
                }                                                                            \
            else                                                                             \
                for (; j + 2 <= n; j += 2)                                                   \
                    _Pragma("GCC unroll 4") for (int i = 0; i < QUERIES; i++)                \
                    {                                                                        \
                        const float *pj = p + i * stride + j0 + j;                           \
                        a[i] += pj[0] * cached##W(v[i], at + j * dk, bf16);                  \
                        b[i] += pj[1] * cached##W(v[i], at + (j + 1) * dk, bf16);            \
                    }                                                                        \
            if (j < n)                                                                       \
                _Pragma("GCC unroll 4") for (int i = 0; i < QUERIES; i++) a[i] +=            \
                    p[i * stride + j0 + j] * cached##W(v[i], at + j * dk, bf16);             \
        }                                                                                    \
        _Pragma("GCC unroll 4") for (int i = 0; i < QUERIES; i++)                            \
            store##W(queries[i].context + e0, (a[i] + b[i]) * inv[i]);                       \
    } while (0)

/* Weights w of positions 2k, 2k + 1 over the lower and upper 8 lanes */
#define PAIR_WEIGHTS(w, k)                                                                   \
    __builtin_shufflevector(w, w, 2 * (k), 2 * (k), 2 * (k), 2 * (k), 2 * (k), 2 * (k),      \
                            2 * (k), 2 * (k), 2 * (k) + 1, 2 * (k) + 1, 2 * (k) + 1,         \
                            2 * (k) + 1, 2 * (k) + 1, 2 * (k) + 1, 2 * (k) + 1, 2 * (k) + 1)

/* The context at d_k 8, where a tile's two positions' values are one
 * vector of 16: its lower half sums the even positions and its upper the
 * odd ones, as CONTEXT_CHUNK(8)'s a and b (the same sums, half the
 * multiply-adds and loads). A whole tile's weights come from one vector. */
TFM__INLINE void context_pairs(const query *restrict queries, int64_t len,
                               const float *restrict p, int64_t stride, const float *inv,
                               size_t size, const int bf16)
{
    vec16 ab[QUERIES];
    for (int i = 0; i < QUERIES; i++)
        ab[i] = (vec16){0};
    for (int64_t j0 = 0; j0 < len; j0 += BLOCK) {
        const int64_t n = len - j0 < BLOCK ? len - j0 : BLOCK, at = BLOCK * 8;
        const void *v[QUERIES];
#pragma GCC unroll 4
        for (int i = 0; i < QUERIES; i++)
            v[i] = tile_of(&queries[i], j0, size);
        if (n == BLOCK) {
#pragma GCC unroll 4
            for (int i = 0; i < QUERIES; i++) {
                const vec16 w = load16(p + i * stride + j0);
#define PAIR(k) ab[i] += PAIR_WEIGHTS(w, k) * cached16(v[i], at + 16 * (k), bf16)
                PAIR(0); PAIR(1); PAIR(2); PAIR(3); PAIR(4); PAIR(5); PAIR(6); PAIR(7);
#undef PAIR
            }
            continue;
        }
        int64_t j = 0;
        for (; j + 2 <= n; j += 2)
#pragma GCC unroll 4
            for (int i = 0; i < QUERIES; i++) {
                const float *pj = p + i * stride + j0 + j;
                const vec8 lo = (vec8){0} + pj[0], hi = (vec8){0} + pj[1];
                ab[i] += __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
                                                 12, 13, 14, 15) *
                         cached16(v[i], at + j * 8, bf16);
            }
        if (j < n) /* the last position, into the lower half alone */
#pragma GCC unroll 4
            for (int i = 0; i < QUERIES; i++) {
                const vec8 value = cached8(v[i], at + j * 8, bf16), none = {0};
                ab[i] += p[i * stride + j0 + j] *
                         __builtin_shufflevector(value, none, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                                 11, 12, 13, 14, 15);
            }
    }
    for (int i = 0; i < QUERIES; i++) {
        const vec8 lo = __builtin_shufflevector(ab[i], ab[i], 0, 1, 2, 3, 4, 5, 6, 7),
                   hi = __builtin_shufflevector(ab[i], ab[i], 8, 9, 10, 11, 12, 13, 14, 15);
        store8(queries[i].context, (lo + hi) * inv[i]);
    }
}

/* --- bfloat16 pair dot products (AVX512_BF16) ------------------------------------- */

/* On CPUs with AVX512_BF16, attention over bfloat16 tiles multiplies in
 * pairs with VDPBF16PS (two bfloat16 products a lane, float32 sums): the
 * queries and the weights are rounded to bfloat16 as the keys and values
 * were, and no widening is left (scores 1.8x, the context 1.6-2.2x faster
 * a tile). attend_tiles' copy for it is attend__avx512_bf16, which alone
 * may inline these. */
#if TFM__CPU_DISPATCH
#include <immintrin.h>
#define DOT_TARGET __attribute__((target("arch=x86-64-v4,avx512bf16")))
/* the widest d_k a query's pairs are kept for */
#define DOT_PAIRS 128

/* Two rows of 16 bfloat16 (one vector, the first row in its lower half) as
 * 16 pairs: lane l holds (row0[l], row1[l]). */
DOT_TARGET static inline __m512i rows_paired__avx512_bf16(__m512i rows)
{
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                           24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17,
                                           1, 16, 0);
    return _mm512_permutexvar_epi16(order, rows);
}

/* One tile's scores of the queries (acc, float32), from their bfloat16
 * pairs qp[i][e / 2] = (q[e], q[e + 1]): each pair of key rows once. */
DOT_TARGET static inline void tile_scores__avx512_bf16(const void *const *kt,
                                                       uint32_t (*qp)[DOT_PAIRS],
                                                       int64_t dk, int one, vec16 *acc)
{
    __m512 a[QUERIES];
    for (int i = 0; i < QUERIES; i++)
        a[i] = (__m512)acc[i];
    if (one)
        for (int64_t e = 0; e < dk; e += 2) {
            const __m512bh k = (__m512bh)rows_paired__avx512_bf16(
                _mm512_loadu_si512((const uint16_t *)kt[0] + e * BLOCK));
#pragma GCC unroll 4
            for (int i = 0; i < QUERIES; i++)
                a[i] = _mm512_dpbf16_ps(a[i], k, (__m512bh)_mm512_set1_epi32((int)qp[i][e / 2]));
        }
    else
        for (int64_t e = 0; e < dk; e += 2)
#pragma GCC unroll 4
            for (int i = 0; i < QUERIES; i++)
                a[i] = _mm512_dpbf16_ps(
                    a[i],
                    (__m512bh)rows_paired__avx512_bf16(
                        _mm512_loadu_si512((const uint16_t *)kt[i] + e * BLOCK)),
                    (__m512bh)_mm512_set1_epi32((int)qp[i][e / 2]));
    for (int i = 0; i < QUERIES; i++)
        acc[i] = (vec16)a[i];
}

/* p [len] (whole tiles) as exp(p - shift), 0 past len, summed lane by lane
 * into sums [16]. The weights are rounded to bfloat16 next, so exp need
 * not be float32's to the last bit: 2^(x log2 e) as 2^n 2^f, |f| <= 1/2,
 * 2^f by its Taylor polynomial of degree 5 (within 5e-6 of exp over
 * [-87, 0], where tfm__expf is within 2 ulp), 2^n by VSCALEFPS; exactly 0
 * below -87.3 (and for -inf, a masked key), NaN for NaN. */
DOT_TARGET static inline void exp_weights__avx512_bf16(float *p, int64_t len, float shift,
                                                       float *sums)
{
    const __m512 lowest = _mm512_set1_ps(-87.3f), index = _mm512_set_ps(
                                                      15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4,
                                                      3, 2, 1, 0);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j0 = 0; j0 < len; j0 += BLOCK) {
        const __m512 x = _mm512_sub_ps(_mm512_loadu_ps(p + j0), _mm512_set1_ps(shift));
        /* max(lowest, x): x itself when it is NaN */
        const __m512 t = _mm512_mul_ps(_mm512_max_ps(lowest, x), _mm512_set1_ps(1.44269504f));
        const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        const __m512 f = _mm512_sub_ps(t, n);
        __m512 y = _mm512_set1_ps(1.3333558e-3f);
        y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(9.6181291e-3f));
        y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(5.5504109e-2f));
        y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(2.4022651e-1f));
        y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(6.9314718e-1f));
        y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(1.0f));
        const __mmask16 kept =
            _mm512_cmp_ps_mask(index, _mm512_set1_ps((float)(len - j0)), _CMP_LT_OQ) &
            ~_mm512_cmp_ps_mask(x, lowest, _CMP_LT_OQ);
        y = _mm512_maskz_scalef_ps(kept, y, n);
        _mm512_storeu_ps(p + j0, y);
        sum = _mm512_add_ps(sum, y);
    }
    _mm512_storeu_ps(sums, sum);
}

/* A tile's 16 weights p as 8 bfloat16 pairs (p[2m], p[2m + 1]). */
DOT_TARGET static inline __m256i weight_pairs__avx512_bf16(const float *p)
{
    return (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(p));
}

/* The context at d_k 8 (context_pairs' sums in pairs): four positions'
 * values are one vector, paired so that lanes 0-7 sum positions j, j + 1
 * and lanes 8-15 positions j + 2, j + 3 of each element; the positions
 * past len are zeros (their weights are, and their values may be
 * anything). */
DOT_TARGET static inline void context_pairs__avx512_bf16(const query *restrict queries,
                                                         int64_t len, const float *restrict p,
                                                         int64_t stride, const float *inv,
                                                         size_t size)
{
    /* word 2l: position 2 (l >= 8), element l % 8; word 2l + 1: the next position */
    const __m512i order = _mm512_set_epi16(31, 23, 30, 22, 29, 21, 28, 20, 27, 19, 26, 18, 25,
                                           17, 24, 16, 15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10,
                                           2, 9, 1, 8, 0);
    const __m512i position = _mm512_set_epi16(3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 1,
                                              0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0);
    /* lanes 0-7 take a block's first pair of weights, lanes 8-15 its second */
    const __m512i pair_of_lane = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    __m512 ab[QUERIES];
    for (int i = 0; i < QUERIES; i++)
        ab[i] = _mm512_setzero_ps();
    for (int64_t j0 = 0; j0 < len; j0 += BLOCK) {
        const int64_t n = len - j0 < BLOCK ? len - j0 : BLOCK;
#pragma GCC unroll 4
        for (int i = 0; i < QUERIES; i++) {
            const uint16_t *v = (const uint16_t *)tile_of(&queries[i], j0, size) + BLOCK * 8;
            const __m512i w =
                _mm512_castsi256_si512(weight_pairs__avx512_bf16(p + i * stride + j0));
            for (int64_t b = 0; 4 * b < n; b++) {
                const __mmask32 kept =
                    _mm512_cmplt_epi16_mask(position, _mm512_set1_epi16((short)(n - 4 * b)));
                const __m512i values =
                    _mm512_maskz_permutexvar_epi16(kept, order, _mm512_loadu_si512(v + 32 * b));
                const __m512i weights = _mm512_permutexvar_epi32(
                    _mm512_add_epi32(pair_of_lane, _mm512_set1_epi32(2 * (int)b)), w);
                ab[i] = _mm512_dpbf16_ps(ab[i], (__m512bh)values, (__m512bh)weights);
            }
        }
    }
    for (int i = 0; i < QUERIES; i++) {
        const __m256 lo = _mm512_castps512_ps256(ab[i]),
                     hi = _mm512_extractf32x8_ps(ab[i], 1);
        _mm256_storeu_ps(queries[i].context, _mm256_mul_ps(_mm256_add_ps(lo, hi),
                                                           _mm256_set1_ps(inv[i])));
    }
}

/* The context 16 elements at a time (d_k a multiple of 16): each pair of
 * positions' 16 values paired as the keys' rows are; an odd last
 * position's partner is zeros. */
DOT_TARGET static inline void context_chunks__avx512_bf16(const query *restrict queries,
                                                          int64_t len, int64_t dk,
                                                          const float *restrict p,
                                                          int64_t stride, const float *inv,
                                                          size_t size)
{
    for (int64_t e0 = 0; e0 < dk; e0 += 16) {
        __m512 a[QUERIES];
        for (int i = 0; i < QUERIES; i++)
            a[i] = _mm512_setzero_ps();
        for (int64_t j0 = 0; j0 < len; j0 += BLOCK) {
            const int64_t n = len - j0 < BLOCK ? len - j0 : BLOCK;
            uint32_t w[QUERIES][BLOCK / 2];
            const uint16_t *v[QUERIES];
#pragma GCC unroll 4
            for (int i = 0; i < QUERIES; i++) {
                _mm256_storeu_si256((__m256i *)w[i],
                                    weight_pairs__avx512_bf16(p + i * stride + j0));
                v[i] = (const uint16_t *)tile_of(&queries[i], j0, size) + BLOCK * dk + e0;
            }
            for (int64_t j = 0; j < n; j += 2) {
                const int both = j + 1 < n;
#pragma GCC unroll 4
                for (int i = 0; i < QUERIES; i++) {
                    const __m256i first = _mm256_loadu_si256((const __m256i *)(v[i] + j * dk)),
                                  second = both ? _mm256_loadu_si256(
                                                      (const __m256i *)(v[i] + (j + 1) * dk))
                                                : _mm256_setzero_si256();
                    const __m512i pair = rows_paired__avx512_bf16(
                        _mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1));
                    a[i] = _mm512_dpbf16_ps(a[i], (__m512bh)pair,
                                            (__m512bh)_mm512_set1_epi32((int)w[i][j / 2]));
                }
            }
        }
        for (int i = 0; i < QUERIES; i++)
            _mm512_storeu_ps(queries[i].context + e0, _mm512_mul_ps(a[i], _mm512_set1_ps(inv[i])));
    }
}
#endif

/* QUERIES query heads over len positions each; p [QUERIES][len rounded up
 * to BLOCK] is scratch. The queries' independent sums keep the core's
 * multiply-adds busy, where one query's would wait on each other. Scores
 * accumulate in registers a tile at a time (the lanes past len read what
 * the tile holds and are dropped); their maximum and sum are kept per lane
 * and reduced once. The context accumulates eight of its d_k at a time,
 * over two interleaved halves of each tile's positions. bf16: the tiles
 * hold bfloat16 (1, widened; 2, in pairs, attend__avx512_bf16's), a
 * constant, so that each element type has its own loops. */
TFM__INLINE void attend_tiles(const query *restrict queries, int64_t len, int64_t dk,
                              const query *next, int64_t next_len, float *restrict p,
                              const int bf16, const int ahead)
{
    const size_t size = (size_t)(2 * BLOCK * dk) * (bf16 ? sizeof(uint16_t) : sizeof(float));
    const int64_t stride = (len + BLOCK - 1) / BLOCK * BLOCK;
    /* the next set's lines, spread over this one's score loop */
    prefetcher fetcher;
    start_prefetch(&fetcher, ahead ? next : NULL, next_len, size);
    const int64_t tiles = stride / BLOCK, next_tiles = (next_len + BLOCK - 1) / BLOCK;
    const int64_t steps = tiles * dk; /* 0 for a source all padding */
    const int per_step =
        steps ? (int)((next_tiles * QUERIES * (int64_t)(size / 64) + steps - 1) / steps) : 0;
    float lane_max[QUERIES][BLOCK];
    for (int i = 0; i < QUERIES; i++)
        for (int j = 0; j < BLOCK; j++)
            lane_max[i][j] = -INFINITY;
#if TFM__CPU_DISPATCH
    uint32_t qp[QUERIES][DOT_PAIRS]; /* bf16 2: the queries' bfloat16 pairs */
    if (bf16 == 2)
        for (int i = 0; i < QUERIES; i++)
            for (int64_t e = 0; e < dk; e += 2)
                qp[i][e / 2] = tfm__bf16_round(queries[i].q[e]) |
                               (uint32_t)tfm__bf16_round(queries[i].q[e + 1]) << 16;
#endif
    for (int64_t j0 = 0; j0 < len; j0 += BLOCK) {
        const int64_t n = len - j0;
        const void *kt[QUERIES];
        vec16 acc[QUERIES];
#pragma GCC unroll 4
        for (int i = 0; i < QUERIES; i++) {
            kt[i] = tile_of(&queries[i], j0, size);
            acc[i] = (vec16){0};
        }
#if TFM__CPU_DISPATCH
        if (bf16 == 2) {
            if (ahead)
                prefetch_lines(&fetcher, per_step * (int)dk);
            tile_scores__avx512_bf16(kt, qp, dk, one_tile(kt), acc);
        } else
#endif
        if (one_tile(kt)) /* each key loaded once, for every query */
            for (int64_t e = 0; e < dk; e++) {
                if (ahead)
                    prefetch_lines(&fetcher, per_step);
                const vec16 k = cached16(kt[0], e * BLOCK, bf16);
#pragma GCC unroll 4
                for (int i = 0; i < QUERIES; i++)
                    acc[i] += queries[i].q[e] * k;
            }
        else
            for (int64_t e = 0; e < dk; e++) {
                if (ahead)
                    prefetch_lines(&fetcher, per_step);
#pragma GCC unroll 4
                for (int i = 0; i < QUERIES; i++)
                    acc[i] += queries[i].q[e] * cached16(kt[i], e * BLOCK, bf16);
            }
        for (int i = 0; i < QUERIES; i++) {
            /* through an aligned copy: reading back a store across a cache
             * line (p's) would wait for it to reach the cache */
            float score[BLOCK] __attribute__((aligned(64))), *pi = p + i * stride + j0;
            const int32_t *keep = queries[i].keep;
            store16(score, acc[i]);
            if (queries[i].bias)
#pragma omp simd
                for (int j = 0; j < BLOCK; j++)
                    score[j] += queries[i].bias[j0 + j];
            if (keep)
#pragma omp simd
                for (int j = 0; j < BLOCK; j++)
                    score[j] = keep[j0 + j] ? score[j] : -INFINITY;
#pragma omp simd
            for (int j = 0; j < BLOCK; j++) {
                pi[j] = score[j];
                lane_max[i][j] = j < n && score[j] > lane_max[i][j] ? score[j] : lane_max[i][j];
            }
        }
    }
    float inv[QUERIES];
    for (int i = 0; i < QUERIES; i++) {
        /* a query with no key kept (a source all padding) attends to
         * nothing, as tfm_softmax's masks: weights 0 rather than NaN */
        const float max = max16(load16(lane_max[i])), shift = max == -INFINITY ? 0.0f : max;
        float *pi = p + i * stride, sums[BLOCK] = {0.0f};
#if TFM__CPU_DISPATCH
        if (bf16 == 2)
            exp_weights__avx512_bf16(pi, len, shift, sums);
        else
#endif
            for (int64_t j0 = 0; j0 < len; j0 += BLOCK) {
                const int64_t n = len - j0;
#pragma omp simd
                for (int j = 0; j < BLOCK; j++) {
                    const float y = j < n ? tfm__expf(pi[j0 + j] - shift) : 0.0f;
                    pi[j0 + j] = y;
                    sums[j] += y;
                }
            }
        inv[i] = max == -INFINITY ? 0.0f : 1.0f / sum16(load16(sums));
        if (queries[i].weights)
            for (int64_t j = 0; j < len; j++)
                queries[i].weights[j] = pi[j] * inv[i];
    }
#if TFM__CPU_DISPATCH
    if (bf16 == 2) {
        if (dk == 8)
            context_pairs__avx512_bf16(queries, len, p, stride, inv, size);
        else
            context_chunks__avx512_bf16(queries, len, dk, p, stride, inv, size);
        return;
    }
#endif
    if (dk == 8) {
        context_pairs(queries, len, p, stride, inv, size, bf16);
        return;
    }
    int64_t e0 = 0;
    for (; e0 + 16 <= dk; e0 += 16)
        CONTEXT_CHUNK(16);
    for (; e0 + 8 <= dk; e0 += 8)
        CONTEXT_CHUNK(8);
    for (; e0 < dk; e0++) /* d_k not a multiple of 8 */
        for (int i = 0; i < QUERIES; i++) {
            float sum = 0.0f;
            for (int64_t j = 0; j < len; j++)
                sum += p[i * stride + j] *
                       cached1(tile_of(&queries[i], j, size), (BLOCK + j % BLOCK) * dk + e0, bf16);
            queries[i].context[e0] = sum * inv[i];
        }
}

static TFM__KERNEL(attend, (const query *restrict queries, int64_t len, int64_t dk,
                            const query *next, int64_t next_len, int bf16, float *restrict p),
                   (queries, len, dk, next, next_len, bf16, p))
{
    /* a copy per element type, and without the prefetcher's state where
     * nothing is fetched ahead (the registers the score loop needs) */
    if (bf16 && next)
        attend_tiles(queries, len, dk, next, next_len, p, 1, 1);
    else if (bf16)
        attend_tiles(queries, len, dk, NULL, 0, p, 1, 0);
    else if (next)
        attend_tiles(queries, len, dk, next, next_len, p, 0, 1);
    else
        attend_tiles(queries, len, dk, NULL, 0, p, 0, 0);
}

#if TFM__CPU_DISPATCH
DOT_TARGET static void attend__avx512_bf16(const query *restrict queries, int64_t len,
                                           int64_t dk, const query *next, int64_t next_len,
                                           float *restrict p)
{
    if (next)
        attend_tiles(queries, len, dk, next, next_len, p, 2, 1);
    else
        attend_tiles(queries, len, dk, NULL, 0, p, 2, 0);
}
#endif

int tfm__decode_pairs_allowed = 1;

int tfm__decode_attend_in_pairs(int64_t dk)
{
#if TFM__CPU_DISPATCH
    return tfm__decode_pairs_allowed && (dk == 8 || (dk % 16 == 0 && dk <= 2 * DOT_PAIRS)) &&
           tfm__cpu_level() == TFM__CPU_X86_64_V4 && tfm__cpu_has_bf16();
#else
    (void)dk;
    return 0;
#endif
}

/* Collects query heads for attend, QUERIES at a time. Prefetching, it runs
 * each full set once the next is full too, so that the kernel fetches the
 * next's tiles while it computes. */
typedef struct query_set {
    query queries[QUERIES];
    int64_t len;
} query_set;

typedef struct query_batch {
    query_set filling, ready; /* filling.len: the length of the set being filled */
    int count, has_ready, prefetching;
    int64_t dk;
    int bf16; /* the tiles hold bfloat16: 1, or 2 multiplied in pairs */
    float *p;
} query_batch;

/* A set's attention, by the batch's kind of tile */
static void attend_set(const query_batch *batch, const query_set *set, const query_set *next)
{
#if TFM__CPU_DISPATCH
    if (batch->bf16 == 2) {
        attend__avx512_bf16(set->queries, set->len, batch->dk, next ? next->queries : NULL,
                            next ? next->len : 0, batch->p);
        return;
    }
#endif
    attend(set->queries, set->len, batch->dk, next ? next->queries : NULL,
           next ? next->len : 0, batch->bf16, batch->p);
}

static void run_ready(query_batch *batch, const query_set *next)
{
    if (batch->has_ready)
        attend_set(batch, &batch->ready, next);
    batch->has_ready = 0;
}

/* The set being filled is complete (a set short of QUERIES repeats its
 * last query: the same context, written again): it runs now, in place,
 * or once the next is complete too. */
static void complete_set(query_batch *batch)
{
    if (batch->count == 0)
        return;
    for (int i = batch->count; i < QUERIES; i++)
        batch->filling.queries[i] = batch->filling.queries[batch->count - 1];
    batch->count = 0;
    if (!batch->prefetching) {
        attend_set(batch, &batch->filling, NULL);
        return;
    }
    run_ready(batch, &batch->filling);
    batch->ready = batch->filling;
    batch->has_ready = 1;
}

static void add_query(query_batch *batch, query query)
{
    batch->filling.queries[batch->count++] = query;
    if (batch->count == QUERIES)
        complete_set(batch);
}

static void finish_batch(query_batch *batch)
{
    complete_set(batch);
    run_ready(batch, NULL);
}

/* The attention of one step's rows [begin, end) in one layer, after the
 * projections into g->qkv: self-attention over positions 0..t, or
 * cross-attention over the source's S positions. */
typedef struct attend_job {
    tfm_decoding *d;
    const group *g;
    int32_t l;
    const int32_t *rows;
    int64_t t, S;
    float factor;
    int prefetching; /* see streamed */
} attend_job;

/* query_batch's bf16 for d's tiles */
static int tiles_kind(const tfm_decoding *d)
{
    return d->bf16_cache ? 1 + d->attend_in_pairs : 0;
}

/* The end of the rows from `first` (before end) of first's source. A
 * source's hypotheses attend one head at a time, the kernel's queries
 * reading the same tiles. */
static int64_t next_source(const attend_job *j, int64_t first, int64_t end)
{
    int64_t source = j->rows[first] / j->d->beam, last = first + 1;
    while (last < end && j->rows[last] / j->d->beam == source)
        last++;
    return last;
}

/* The newest position's key and value join the row's cache at position t;
 * its query attends over positions 0..t. */
static void self_attend_rows(void *ctx, int64_t begin, int64_t end, int worker)
{
    const attend_job *j = ctx;
    tfm_decoding *d = j->d;
    int64_t I = d->inner, H = d->heads, dk = d->dk, t = j->t;
    for (int64_t i = begin; i < end; i++) {
        float *row = j->g->qkv + i * 3 * I; /* its queries, keys, values */
        const int32_t *table = tile_table_of(d, j->rows[i]);
        for (int64_t e = 0; e < I; e++)
            row[e] *= j->factor;
        for (int64_t h = 0; h < H; h++)
            put_position(d, tile_at(d, self_tiles(d, j->l, h), table[t / BLOCK]), t,
                         row + I + h * dk, row + 2 * I + h * dk);
    }
    query_batch batch = {.filling.len = t + 1, .dk = dk, .bf16 = tiles_kind(d),
                         .prefetching = j->prefetching,
                         .p = j->g->weights + worker * d->weights_stride};
    const float *bias = j->g->position_bias;
    for (int64_t first = begin, last; first < end; first = last) {
        last = next_source(j, first, end);
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = first; i < last; i++)
                add_query(&batch, (query){j->g->qkv + i * 3 * I + h * dk, self_tiles(d, j->l, h),
                                          tile_table_of(d, j->rows[i]), NULL,
                                          j->g->ctx + i * I + h * dk, NULL,
                                          bias ? bias + h * d->self_tiled : NULL});
    }
    finish_batch(&batch);
}

static void cross_attend_rows(void *ctx, int64_t begin, int64_t end, int worker)
{
    const attend_job *j = ctx;
    tfm_decoding *d = j->d;
    int64_t I = d->inner, H = d->heads, dk = d->dk;
    for (int64_t e = 0; e < (end - begin) * I; e++)
        j->g->qkv[begin * I + e] *= j->factor;
    query_batch batch = {.dk = dk, .bf16 = tiles_kind(d), .prefetching = j->prefetching,
                         .p = j->g->weights + worker * d->weights_stride};
    for (int64_t first = begin, last; first < end; first = last) {
        last = next_source(j, first, end);
        int64_t b = j->rows[first] / d->beam, len = d->source_len[b];
        const int32_t *keep = d->o.src_pad_id >= 0 ? d->keep + b * d->cross_tiled : NULL;
        int aligning = d->head_weights && j->l == d->layers - 1;
        /* a source attends up to its last key that is not padding: the
         * batch's queries share a length */
        if (batch.filling.len != len)
            complete_set(&batch);
        batch.filling.len = len;
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = first; i < last; i++) {
                float *weights = aligning ? head_weights_of(d, j->rows[i], h) : NULL;
                if (weights) /* the padding past len: weight 0 */
                    memset(weights + len, 0, (size_t)(j->S - len) * sizeof *weights);
                add_query(&batch, (query){j->g->qkv + i * I + h * dk, cross_tiles(d, j->l, b, h),
                                          NULL, keep, j->g->ctx + i * I + h * dk, weights,
                                          NULL});
            }
    }
    finish_batch(&batch);
}

/* Runs a step's attention over its n rows, split among libtfm's threads
 * when the group may and the work is worth it. */
static void attend_rows(const attend_job *j, int64_t n, int64_t floats, tfm__range_fn rows)
{
    if (j->g->split)
        tfm__parallel_for(n, tfm__workers_for(floats), rows, (void *)j);
    else
        rows((void *)j, 0, n, 0);
}

double tfm__decode_streamed_bytes = 32.0 * 1024 * 1024;

/* Whether a step's attention of one kind (self or cross) reads more tiles
 * than stay cached between steps, in all its layers: `sets` of `len`
 * positions each. Then the tiles come from memory and fetching a set's
 * ahead pays (002's beam 4: 4% faster); below, the caches stay in the
 * last-level cache and the prefetches cost more than they save (003:
 * 4% slower). */
static int streamed(const tfm_decoding *d, int64_t sets, int64_t len)
{
    double tiles = (double)sets * (double)((len + BLOCK - 1) / BLOCK) * (double)d->heads;
    return tiles * (double)d->layers * (double)tile_bytes(d) > tfm__decode_streamed_bytes;
}

void tfm__decode_self_attend(tfm_decoding *d, const group *g, int32_t l, const int32_t *rows,
                             int64_t n, int64_t t, float factor)
{
    attend_job j = {d, g, l, rows, t, 0, factor, streamed(d, n, t + 1)};
    attend_rows(&j, n, n * (t + 1) * d->inner, self_attend_rows);
}

void tfm__decode_cross_attend(tfm_decoding *d, const group *g, int32_t l, const int32_t *rows,
                              int64_t n, int64_t S, float factor)
{
    /* a source's hypotheses share its tiles */
    attend_job j = {d, g, l, rows, 0, S, factor, streamed(d, (n + d->beam - 1) / d->beam, S)};
    attend_rows(&j, n, n * S * d->inner, cross_attend_rows);
}
