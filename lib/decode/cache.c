/* The tiled caches. Each decoder layer's self-attention keys and values
 * are kept in tiles of BLOCK positions per head: the keys [d_k][BLOCK],
 * transposed, then the values [BLOCK][d_k]; a row's tiles are listed in
 * its tile table. The cross-attention's are computed once per source.
 * Tiles hold float32, or bfloat16 (cache_precision), which attend widens.
 * A beam hypothesis takes its parent's table, sharing its tiles (counted
 * by tile_refs), and a shared tile is copied only when a hypothesis writes
 * into it: siblings differ in their last positions only, so a step copies
 * at most a tile per hypothesis, and the siblings read one prefix, from L1
 * or L2. */
#include <string.h>

#include "core/cpu.h"
#include "core/gemm.h"
#include "decode/decode.h"
#include "model/model.h"
#include "nn/layer.h"

/* Layer l's cross-attention keys and values of n rows of memory, side by
 * side in kv [n, 2 inner]: packed at the run's start (float32), else
 * int8 products; then the decoding's adapter's terms. */
static void cross_projections(const tfm_decoding *d, int32_t l, const float *memory, int64_t n,
                              float *kv)
{
    int64_t I = d->inner;
    const tfm_layer *att = d->model->decoder->children[l]->children[TFM__BLK_CROSS_ATTN];
    int packed = tfm__decode_packed_product(&d->weights_packed->products[l][DECODE_CROSS_KV],
                                            memory, n, kv, 2 * I);
    if (!packed)
        tfm__decode_projections(att, 1, 2, memory, n, kv, I);
    tfm__decode_adapt_projections(d, att, 1, 2, memory, n, kv, I);
}

/* The keys transposed BLOCK positions at a time (decode.h): a position at
 * a time, each of a key's d_k elements went to its own place BLOCK apart
 * (a sixth of the encoding's time at d 256 outside its products). */
TFM__KERNEL(tfm__decode_put_tile,
            (const tfm_decoding *d, void *tile, int64_t count, const float *key,
             const float *value, int64_t stride),
            (d, tile, count, key, value, stride))
{
    int64_t dk = d->dk;
    if (count < BLOCK || !d->bf16_cache) {
        for (int64_t i = 0; i < count; i++)
            put_position(d, tile, i, key + i * stride, value + i * stride);
        return;
    }
    uint16_t *t = tile;
    for (int64_t e = 0; e < dk; e++)
#pragma omp simd
        for (int64_t i = 0; i < BLOCK; i++)
            t[e * BLOCK + i] = tfm__bf16_round(key[i * stride + e]);
    for (int64_t i = 0; i < BLOCK; i++)
#pragma omp simd
        for (int64_t e = 0; e < dk; e++)
            t[(BLOCK + i) * dk + e] = tfm__bf16_round(value[i * stride + e]);
}

/* Each decoder layer's cross-attention keys and values of the memory
 * [n, S, D] of sources first.. ([n * S, 2 inner] in kv), split into heads
 * once for the whole run. */
void tfm__decode_cache_memory(tfm_decoding *d, const float *memory, int64_t first, int64_t n,
                              int64_t S, float *kv)
{
    int64_t B = n;
    int64_t I = d->inner, H = d->heads, dk = d->dk;
    for (int32_t l = 0; l < d->layers; l++) {
        cross_projections(d, l, memory, B * S, kv);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++) {
                void *tiles = cross_tiles(d, l, first + b, h);
                for (int64_t s = 0; s < S; s += BLOCK) {
                    const float *k = kv + (b * S + s) * 2 * I + h * dk;
                    tfm__decode_put_tile(d, tile_at(d, tiles, s / BLOCK),
                                         S - s < BLOCK ? S - s : BLOCK, k, k + I, 2 * I);
                }
            }
    }
}

/* A tile of source b's that no row uses, now used once. A source owns
 * beam * self_tiled / BLOCK tiles, as many as its hypotheses would use if
 * they shared none, so one is always free (see reorder_tiles). */
int32_t tfm__decode_new_tile(tfm_decoding *d, int64_t b)
{
    int64_t owned = d->beam * row_tiles(d), i = b * owned;
    while (i < (b + 1) * owned - 1 && d->tile_refs[i] > 0)
        i++;
    d->tile_refs[i] = 1;
    return (int32_t)i;
}

/* Tile `to` takes tile `from`'s first n positions. */
static void copy_tile(tfm_decoding *d, int32_t from, int32_t to, int64_t n)
{
    size_t used = (size_t)((BLOCK + n) * d->dk) * cache_element(d); /* the keys, n values */
    for (int32_t l = 0; l < d->layers; l++)
        for (int64_t h = 0; h < d->heads; h++) {
            void *tiles = self_tiles(d, l, h);
            memcpy(tile_at(d, tiles, to), tile_at(d, tiles, from), used);
        }
}

/* Source b's new hypotheses j < n_new (rows from b * beam), children of
 * its `live` rows at step t, take their parents' tile tables (the tiles of
 * positions 0..t), then a tile of their own for position t + 1: a new one
 * when t + 1 begins a tile, else their parent's last, copied if another
 * child uses it too. Every hypothesis then has its own tile of position
 * t + 1 and shares the others, so the source's rows never use more tiles
 * than it owns. */
void tfm__decode_reorder_tiles(tfm_decoding *d, const int32_t *parent, int64_t b, int64_t live,
                               int64_t n_new, int64_t t)
{
    int64_t per_row = row_tiles(d), used = t / BLOCK + 1, next = (t + 1) / BLOCK;
    int32_t *table = tile_table_of(d, b * d->beam);
    int32_t *tmp = d->table_tmp + b * d->beam * per_row, *refs = d->tile_refs;
    for (int64_t j = 0; j < n_new; j++) {
        memcpy(tmp + j * per_row, table + parent[j] * per_row, (size_t)used * sizeof *tmp);
        for (int64_t i = 0; i < used; i++)
            refs[tmp[j * per_row + i]]++;
    }
    for (int64_t r = 0; r < live; r++)
        for (int64_t i = 0; i < used; i++)
            refs[table[r * per_row + i]]--;
    memcpy(table, tmp, (size_t)(n_new * per_row) * sizeof *table);
    if (t + 1 >= d->max_len)
        return;
    for (int64_t j = 0; j < n_new; j++) {
        int32_t *tile = table + j * per_row + next;
        if (next == used) {
            *tile = tfm__decode_new_tile(d, b);
        } else if (refs[*tile] > 1) {
            int32_t own = tfm__decode_new_tile(d, b);
            copy_tile(d, *tile, own, (t + 1) % BLOCK);
            refs[*tile]--;
            *tile = own;
        }
    }
}
