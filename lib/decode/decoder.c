/* Decoding a tfm_model: greedy, sampling (temperature, top-k, top-p) and
 * beam search over a batch of sources.
 *
 * The sources are encoded once on a private no-grad tape. With use_cache
 * the decoder then runs one token per step outside the tape, straight on
 * the layers' parameters: each decoder layer appends the newest position's
 * self-attention key and value to its caches and attends over the
 * cross-attention keys and values computed once per source. The caches
 * are kept in tiles of BLOCK positions, one per layer and head: the keys
 * [d_k][BLOCK], transposed, then the values [BLOCK][d_k]. A query's scores
 * then vectorise over the positions and its context over d_k, both
 * accumulating in registers. Without the caches, every step runs
 * tfm_model_decode over the whole prefix (the reference the cached path is
 * tested against). Rows are sources (greedy, sampling) or a source's beam
 * hypotheses; only the rows still decoding are computed, so finished
 * sequences cost nothing.
 *
 * A row's self-attention tiles are listed in its tile table. A source's
 * rows own its tiles; a greedy row has its own. A beam hypothesis takes
 * its parent's table, sharing its tiles (counted by tile_refs), and a
 * shared tile is copied only when a hypothesis writes into it: siblings
 * differ in their last positions only, so a step copies at most a tile
 * per hypothesis, and the siblings read one prefix, from L1 or L2.
 *
 * A batch is decoded in groups of sources whose caches fit in a core's
 * share of the caches (see sources_per_group), each group all its steps on
 * one thread, the threads taking the next group as they finish: a step's
 * products are too small to share among threads, and a whole batch's
 * caches, read at every step, would come from memory. The groups depend
 * on the batch and the model only, so the thread count never changes a
 * result. Sampling draws from one generator in the order of the rows, and
 * the reference path shares one tape: both run the batch as one group,
 * whose rows' attention runs on libtfm's threads. The attention kernel
 * takes four query heads at a time: a row's heads, or a source's beam
 * hypotheses for one head, which read the same tiles. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/fastmath.h"
#include "core/options.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/vectors.h"
#include "ops/layer_norm.h"
#include "model/model.h"
#include "nn/layer.h"
#include "tfm/decode.h"

#define INV_SQRT2 0.70710678118654752440f
/* Scores are computed for tiles of this many positions; the key caches
 * hold whole tiles, so that a tile never reads past its head's keys. */
#define BLOCK 16
/* attend's query heads at a time */
#define QUERIES 4
/* A group's caches stay within about this many bytes (a core's L2 and its
 * share of L3 on most x86 CPUs), counting a beam's hypotheses as sharing
 * all but a tile, but it keeps at least GROUP_MIN_ROWS rows, below which
 * its products would run mostly on their edges. */
#define GROUP_CACHE_BYTES (4 << 20)
#define GROUP_MIN_ROWS 16
/* A batch makes at least this many groups if it can, so that the threads
 * that take them in turn end together, whatever their count. */
#define MIN_GROUPS 16

struct tfm_decoding {
    tfm_model *model;
    tfm_decode_options o;
    int64_t max_batch, max_src_len, max_len; /* max_len: options.max_length */
    int64_t beam;          /* rows per source: beam_size for beam search, else 1 */
    int64_t d, heads, dk, d_ff, vocab;
    int64_t rows;          /* max_batch * beam */
    int64_t self_tiled, cross_tiled; /* max_len, max_src_len rounded up to BLOCK */
    int64_t group_sources; /* the sources whose caches fit GROUP_CACHE_BYTES */
    int grouped;           /* 0: the batch is one group (sampling, the reference path) */
    int32_t layers;
    tfm_tape *tape;        /* encoding, and the reference path's steps */
    tfm_rng *rng;
    struct tfm_rng rng_seeded; /* the rng as seeded, restored at each run */
    int32_t *training;     /* the model's layers' flags, kept across a run */
    int64_t n_layers;

    /* one step over n rows: residual stream, normed input, sublayer output,
     * projections [n, 3D], attention context, feed-forward hidden, logits
     * (each group has its rows' part, see group_of), and per thread,
     * QUERIES queries' attention weights [weights_stride] */
    float *x, *h, *y, *qkv, *ctx, *ff, *logits, *weights;
    int64_t weights_stride;
    /* caches (use_cache): self-attention tiles [layers][heads][tiles],
     * cross-attention tiles [layers][batch][heads][cross_tiled / BLOCK],
     * and the cross projections of the memory [batch * S, 2D] before their
     * split into heads; each row's tiles [rows][self_tiled / BLOCK] and
     * each tile's count of rows using it */
    float *self_cache, *cross_cache, *kv;
    int64_t tiles;         /* rows * self_tiled / BLOCK */
    int32_t *tile_table, *tile_refs;
    int32_t *keep;         /* [batch][cross_tiled]: 0 for a padded source key */
    /* reference path: the memory [batch][S][D], and the step's inputs */
    float *memory, *memory_rows;
    int32_t *src, *src_rows, *prefix;

    /* search state: each row's tokens [rows][max_len + 1], log probability,
     * the rows decoding this step, and sampling's scratch [vocab] */
    int32_t *hist, *active, *order;
    double *sum;
    float *probs;
    /* beam search: live and finished hypotheses per source; per source,
     * this step's best candidates [beam], the finished hypotheses
     * [beam][max_len + 1] and the scratch to reorder its rows */
    int32_t *live, *done, *cand_parent, *cand_token, *fin_tokens, *fin_length, *rank;
    int32_t *table_tmp;    /* [rows][self_tiled / BLOCK] */
    double *cand_score, *fin_score;
    int32_t *hist_tmp;
    double *sum_tmp;
};

void tfm_decode_options_init_sized(tfm_decode_options *o, uint32_t struct_size)
{
    tfm_decode_options d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.strategy = TFM_DECODE_GREEDY;
    d.max_length = 100;
    d.bos_id = 1;
    d.eos_id = 2;
    d.src_pad_id = -1;
    d.temperature = 1.0f;
    d.top_k = 0;
    d.top_p = 1.0f;
    d.seed = 0;
    d.beam_size = 4;
    d.length_penalty = 1.0f;
    d.n_best = 1;
    d.use_cache = 1;
    tfm__init_options(o, struct_size, &d, sizeof d);
}

/* The caller's options over the defaults, as far as the caller's struct
 * goes, checked against the model. 0 or -1 with the error set. */
static int read_options(const char *op, const tfm_model *m, const tfm_decode_options *given,
                        tfm_decode_options *o)
{
    tfm_decode_options_init(o);
    if (tfm__read_options(op, "tfm_decode_options_init", given, o, sizeof *o,
                          offsetof(tfm_decode_options, strategy)) < 0)
        return -1;
    o->use_cache = o->use_cache != 0;
    const tfm_model_options *mo = &m->options;
    const char *bad = NULL;
    if (o->strategy != TFM_DECODE_GREEDY && o->strategy != TFM_DECODE_SAMPLE &&
        o->strategy != TFM_DECODE_BEAM)
        bad = "strategy is not TFM_DECODE_GREEDY, _SAMPLE or _BEAM";
    else if (o->max_length < 1 || o->max_length > mo->max_tgt_len - 1)
        bad = "max_length must be from 1 to the model's max_tgt_len - 1";
    else if (o->bos_id < 0 || o->bos_id >= mo->tgt_vocab)
        bad = "bos_id must be a target token id";
    else if (o->eos_id < -1 || o->eos_id >= mo->tgt_vocab)
        bad = "eos_id must be a target token id or -1";
    else if (o->src_pad_id < -1 || o->src_pad_id >= mo->src_vocab)
        bad = "src_pad_id must be a source token id or -1";
    else if (!(o->temperature > 0.0f) || !isfinite(o->temperature))
        bad = "temperature must be positive and finite";
    else if (o->top_k < 0)
        bad = "top_k must be 0 (all tokens) or positive";
    else if (!(o->top_p > 0.0f && o->top_p <= 1.0f))
        bad = "top_p must be in (0, 1]";
    else if (o->beam_size < 1 || o->beam_size > 65536)
        bad = "beam_size must be from 1 to 65536";
    else if (!isfinite(o->length_penalty))
        bad = "length_penalty must be finite";
    else if (o->n_best < 1 || o->n_best > o->beam_size)
        bad = "n_best must be from 1 to beam_size";
    if (bad) {
        tfm__fail(TFM_ERR_ARG, "%s: %s (strategy %d, max_length %d with max_tgt_len %lld, "
                  "bos_id %d, eos_id %d, src_pad_id %d, vocabularies %lld/%lld, "
                  "temperature %g, top_k %d, top_p %g, beam_size %d, length_penalty %g, "
                  "n_best %d)", op, bad, (int)o->strategy, (int)o->max_length,
                  (long long)mo->max_tgt_len, (int)o->bos_id, (int)o->eos_id,
                  (int)o->src_pad_id, (long long)mo->src_vocab, (long long)mo->tgt_vocab,
                  (double)o->temperature, (int)o->top_k, (double)o->top_p,
                  (int)o->beam_size, (double)o->length_penalty, (int)o->n_best);
        return -1;
    }
    return 0;
}

/* --- the model's layers' training flags --------------------------------------- */

/* Visits the layer tree depth first: counts (flags NULL), saves or restores. */
static int64_t walk_flags(tfm_layer *layer, int32_t *flags, int64_t i, int save)
{
    if (!layer)
        return i;
    if (flags && save)
        flags[i] = layer->training;
    else if (flags)
        layer->training = flags[i];
    i++;
    for (int32_t c = 0; c < layer->n_children; c++)
        i = walk_flags(layer->children[c], flags, i, save);
    return i;
}

static int64_t model_flags(tfm_model *m, int32_t *flags, int save)
{
    tfm_layer *roots[] = {m->src_embedding, m->tgt_embedding, m->src_positions,
                          m->tgt_positions, m->dropout,       m->encoder,
                          m->decoder,       m->generator};
    int64_t i = 0;
    for (size_t r = 0; r < sizeof roots / sizeof roots[0]; r++)
        i = walk_flags(roots[r], flags, i, save);
    return i;
}

/* --- creation ------------------------------------------------------------------- */

/* A zeroed buffer of count elements; NULL with the error set. */
static void *buffer(const char *op, double count, size_t elem)
{
    void *p = calloc(count >= 1.0 ? (size_t)count : 1, elem);
    if (!p)
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %.0f elements", op, count);
    return p;
}

#define BUFFER(field, count) ((d->field = buffer(op, (double)(count), sizeof *d->field)) != NULL)

tfm_decoding *tfm_decoding_create(tfm_model *model, const tfm_decode_options *options,
                                  int64_t max_batch, int64_t max_src_len)
{
    const char *op = "tfm_decoding_create";
    uint64_t mark = tfm__error_mark();
    if (!model || !options) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, model ? "options" : "model");
        return NULL;
    }
    tfm_decode_options o;
    if (read_options(op, model, options, &o) < 0)
        return NULL;
    if (max_batch < 1 || max_src_len < 1 || max_src_len > model->options.max_src_len) {
        tfm__fail(TFM_ERR_ARG, "%s: max_batch %lld must be positive and max_src_len %lld "
                  "from 1 to the model's %lld", op, (long long)max_batch,
                  (long long)max_src_len, (long long)model->options.max_src_len);
        return NULL;
    }
    int64_t beam = o.strategy == TFM_DECODE_BEAM ? o.beam_size : 1;
    if (max_batch > INT32_MAX / beam || max_batch > INT32_MAX / max_src_len) {
        tfm__fail(TFM_ERR_SIZE, "%s: max_batch %lld is too large for beam %lld and "
                  "max_src_len %lld", op, (long long)max_batch, (long long)beam,
                  (long long)max_src_len);
        return NULL;
    }
    tfm_decoding *d = calloc(1, sizeof *d);
    if (!d) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return NULL;
    }
    const tfm_block_options *b = &model->block;
    d->model = model;
    d->o = o;
    d->max_batch = max_batch;
    d->max_src_len = max_src_len;
    d->max_len = o.max_length;
    d->beam = beam;
    d->d = b->d_model;
    d->heads = b->heads;
    d->dk = b->d_model / b->heads;
    d->d_ff = b->d_ff;
    d->vocab = model->options.tgt_vocab;
    d->layers = model->options.decoder_layers;
    d->rows = max_batch * beam;
    d->self_tiled = (d->max_len + BLOCK - 1) / BLOCK * BLOCK;
    d->cross_tiled = (max_src_len + BLOCK - 1) / BLOCK * BLOCK;
    d->tiles = d->rows * d->self_tiled / BLOCK;
    d->weights_stride = QUERIES * (d->self_tiled > d->cross_tiled ? d->self_tiled : d->cross_tiled);
    d->n_layers = model_flags(model, NULL, 0);

    double rows = (double)max_batch * (double)beam, D = (double)d->d, T = (double)d->max_len;
    double S = (double)max_src_len, L = (double)d->layers, V = (double)d->vocab;
    double Tp = (double)d->self_tiled, Sp = (double)d->cross_tiled;
    double memory = (double)max_batch * S * D, self_cache = L * rows * 2 * D * Tp;
    double cross_cache = L * (double)max_batch * 2 * D * Sp;
    /* the largest buffers, in floats: activations, tokens, caches or memory */
    double floats = rows * (6 * D + (double)d->d_ff + V + 2 * (T + 1)) +
                    (o.use_cache ? self_cache + cross_cache + 2 * memory : memory + rows * S * D);
    if (floats * sizeof(float) > (double)TFM_MAX_TENSOR_BYTES) {
        tfm__fail(TFM_ERR_SIZE, "%s: the decoding would need %.3g bytes, too large; lower "
                  "max_batch (%lld), max_src_len (%lld), max_length or beam_size", op,
                  floats * sizeof(float), (long long)max_batch, (long long)max_src_len);
        tfm_decoding_free(d);
        return NULL;
    }
    int ok = (d->tape = tfm_tape_create()) && tfm_tape_set_recording(d->tape, 0) == TFM_OK &&
             (d->rng = tfm_rng_create(o.seed)) && BUFFER(training, d->n_layers) &&
             BUFFER(x, rows * D) && BUFFER(h, rows * D) && BUFFER(y, rows * D) &&
             BUFFER(qkv, rows * 3 * D) && BUFFER(ctx, rows * D) &&
             BUFFER(ff, rows * (double)d->d_ff) && BUFFER(logits, rows * V) &&
             BUFFER(hist, rows * (T + 1)) && BUFFER(active, rows) && BUFFER(sum, rows) &&
             BUFFER(order, V) && BUFFER(probs, V);
    if (ok && o.use_cache)
        ok = BUFFER(self_cache, self_cache) && BUFFER(cross_cache, cross_cache) &&
             BUFFER(kv, 2 * memory) && BUFFER(keep, (double)max_batch * Sp) &&
             BUFFER(tile_table, rows * Tp / BLOCK) && BUFFER(tile_refs, rows * Tp / BLOCK) &&
             BUFFER(weights, (double)d->weights_stride * TFM__MAX_THREADS);
    else if (ok)
        ok = BUFFER(memory, memory) && BUFFER(memory_rows, rows * S * D) &&
             BUFFER(src, (double)max_batch * S) && BUFFER(src_rows, rows * S) &&
             BUFFER(prefix, rows * T);
    if (ok && o.strategy == TFM_DECODE_BEAM)
        ok = BUFFER(live, max_batch) && BUFFER(done, max_batch) &&
             BUFFER(cand_parent, rows) && BUFFER(cand_token, rows) &&
             BUFFER(cand_score, rows) && BUFFER(rank, rows) &&
             BUFFER(fin_tokens, rows * (T + 1)) && BUFFER(fin_length, rows) &&
             BUFFER(fin_score, rows) && BUFFER(hist_tmp, rows * (T + 1)) &&
             BUFFER(sum_tmp, rows) && BUFFER(table_tmp, rows * Tp / BLOCK);
    if (!ok) {
        tfm__fail_within(op, mark);
        tfm_decoding_free(d);
        return NULL;
    }
    d->rng_seeded = *d->rng;
    d->grouped = o.use_cache && o.strategy != TFM_DECODE_SAMPLE;
    double per_source = L * 2 * D * (Tp + (double)(beam - 1) * BLOCK + Sp) * sizeof(float);
    /* without decoder layers nothing is cached: the whole batch fits */
    d->group_sources = per_source > 0.0 ? (int64_t)(GROUP_CACHE_BYTES / per_source) : max_batch;
    return d;
}

void tfm_decoding_free(tfm_decoding *d)
{
    if (!d)
        return;
    tfm_tape_free(d->tape);
    tfm_rng_free(d->rng);
    void *buffers[] = {d->training, d->x, d->h, d->y, d->qkv, d->ctx, d->ff, d->logits,
                       d->weights, d->self_cache, d->cross_cache, d->kv, d->tile_table,
                       d->tile_refs, d->keep, d->memory, d->memory_rows, d->src, d->src_rows,
                       d->prefix, d->hist, d->active, d->order, d->sum, d->probs, d->live,
                       d->done, d->cand_parent, d->cand_token, d->fin_tokens, d->fin_length,
                       d->rank, d->cand_score, d->fin_score, d->hist_tmp, d->sum_tmp,
                       d->table_tmp};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        free(buffers[i]);
    free(d);
}

/* --- the cached step: the decoder run on its parameters, one position ------------ */

static const float *values(const tfm_tensor *t) { return t ? tfm__f32(t) : NULL; }

/* out[i, 0:out_f] (row stride ldc) = in[i] W^T + b for n rows, W [out_f, in_f]. */
static void project(const float *in, int64_t n, int64_t in_f, const float *w, const float *b,
                    int64_t out_f, float *out, int64_t ldc)
{
    tfm__sgemm_bias(0, 1, n, out_f, in_f, 1.0f, in, in_f, w, in_f, b, out, ldc);
}

static void linear(const tfm_layer *linear, const float *in, int64_t n, float *out, int64_t ldc)
{
    project(in, n, linear->weight->shape[1], tfm__f32(linear->weight), values(linear->bias),
            linear->weight->shape[0], out, ldc);
}

static void layer_norm(const tfm_layer *norm, const float *x, int64_t n, int64_t dim, float *out)
{
    tfm__layer_norm_rows(x, n, dim, tfm__f32(norm->weight), tfm__f32(norm->bias), norm->eps,
                         out, NULL, NULL);
}

/* The factor the queries are multiplied by: 1/sqrt(d_k) or 1/scale. */
static float query_factor(const tfm_decoding *d, const tfm_layer *att)
{
    return att->scale ? 1.0f / tfm__f32(att->scale)[0] : 1.0f / sqrtf((float)d->dk);
}

/* A tile's floats: BLOCK positions' keys [d_k][BLOCK], then their values
 * [BLOCK][d_k]. */
static int64_t tile_floats(const tfm_decoding *d)
{
    return 2 * BLOCK * d->dk;
}

/* Layer l's self-attention tiles of head h, which rows' tile tables index. */
static float *self_tiles(const tfm_decoding *d, int32_t l, int64_t h)
{
    return d->self_cache +
           ((size_t)l * (size_t)d->heads + (size_t)h) * (size_t)(d->tiles * tile_floats(d));
}

/* Layer l's cross-attention tiles of source b's head h, one after another. */
static float *cross_tiles(const tfm_decoding *d, int32_t l, int64_t b, int64_t h)
{
    return d->cross_cache +
           (((size_t)l * (size_t)d->max_batch + (size_t)b) * (size_t)d->heads + (size_t)h) *
               (size_t)(d->cross_tiled / BLOCK * tile_floats(d));
}

/* The tiles a row lists, and where its list is. */
static int64_t row_tiles(const tfm_decoding *d)
{
    return d->self_tiled / BLOCK;
}

static int32_t *tile_table_of(const tfm_decoding *d, int64_t row)
{
    return d->tile_table + row * row_tiles(d);
}

/* Position j's key and value [d_k] into the tile that holds it. */
static void put_position(float *tile, int64_t j, const float *key, const float *value,
                         int64_t dk)
{
    for (int64_t e = 0; e < dk; e++)
        tile[e * BLOCK + j % BLOCK] = key[e];
    memcpy(tile + (BLOCK + j % BLOCK) * dk, value, (size_t)dk * sizeof *value);
}

/* A query head for attend: its query [d_k] over the tiles listed in table
 * (NULL: the tiles one after another), the keys it may attend to (keep,
 * whole tiles of them; NULL: all), and where its context [d_k] goes. */
typedef struct query {
    const float *q, *tiles;
    const int32_t *table, *keep;
    float *context;
} query;

static const float *tile_of(const query *query, int64_t j0, int64_t size)
{
    return query->tiles + (query->table ? query->table[j0 / BLOCK] : j0 / BLOCK) * size;
}

/* The queries read the same tile (a source's beam hypotheses, one head) */
static int one_tile(const float *const *tiles)
{
    int same = 1;
    for (int i = 1; i < QUERIES; i++)
        same &= tiles[i] == tiles[0];
    return same;
}

/* QUERIES query heads over len positions each; p [QUERIES][len rounded up
 * to BLOCK] is scratch. The queries' independent sums keep the core's
 * multiply-adds busy, where one query's would wait on each other. Scores
 * accumulate in registers a tile at a time (the lanes past len read what
 * the tile holds and are dropped); their maximum and sum are kept per lane
 * and reduced once. The context accumulates eight of its d_k at a time,
 * over two interleaved halves of each tile's positions. */
static TFM__KERNEL(attend, (const query *restrict queries, int64_t len, int64_t dk,
                            float *restrict p),
                   (queries, len, dk, p))
{
    const int64_t size = 2 * BLOCK * dk, stride = (len + BLOCK - 1) / BLOCK * BLOCK;
    float lane_max[QUERIES][BLOCK];
    for (int i = 0; i < QUERIES; i++)
        for (int j = 0; j < BLOCK; j++)
            lane_max[i][j] = -INFINITY;
    for (int64_t j0 = 0; j0 < len; j0 += BLOCK) {
        const int64_t n = len - j0;
        const float *kt[QUERIES];
        vec16 acc[QUERIES];
#pragma GCC unroll 4
        for (int i = 0; i < QUERIES; i++) {
            kt[i] = tile_of(&queries[i], j0, size);
            acc[i] = (vec16){0};
        }
        if (one_tile(kt)) /* each key loaded once, for every query */
            for (int64_t e = 0; e < dk; e++) {
                const vec16 k = load16(kt[0] + e * BLOCK);
#pragma GCC unroll 4
                for (int i = 0; i < QUERIES; i++)
                    acc[i] += queries[i].q[e] * k;
            }
        else
            for (int64_t e = 0; e < dk; e++)
#pragma GCC unroll 4
                for (int i = 0; i < QUERIES; i++)
                    acc[i] += queries[i].q[e] * load16(kt[i] + e * BLOCK);
        for (int i = 0; i < QUERIES; i++) {
            /* through an aligned copy: reading back a store across a cache
             * line (p's) would wait for it to reach the cache */
            float score[BLOCK] __attribute__((aligned(64))), *pi = p + i * stride + j0;
            const int32_t *keep = queries[i].keep;
            store16(score, acc[i]);
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
    }
    int64_t e0 = 0;
    for (; e0 + 8 <= dk; e0 += 8) {
        vec8 a[QUERIES], b[QUERIES];
#pragma GCC unroll 4
        for (int i = 0; i < QUERIES; i++)
            a[i] = b[i] = (vec8){0};
        for (int64_t j0 = 0; j0 < len; j0 += BLOCK) {
            const int64_t n = len - j0 < BLOCK ? len - j0 : BLOCK;
            const float *v[QUERIES];
#pragma GCC unroll 4
            for (int i = 0; i < QUERIES; i++)
                v[i] = tile_of(&queries[i], j0, size) + BLOCK * dk + e0;
            int64_t j = 0;
            if (one_tile(v))
                for (; j + 2 <= n; j += 2) {
                    const vec8 va = load8(v[0] + j * dk), vb = load8(v[0] + (j + 1) * dk);
#pragma GCC unroll 4
                    for (int i = 0; i < QUERIES; i++) {
                        const float *pj = p + i * stride + j0 + j;
                        a[i] += pj[0] * va;
                        b[i] += pj[1] * vb;
                    }
                }
            else
                for (; j + 2 <= n; j += 2)
#pragma GCC unroll 4
                    for (int i = 0; i < QUERIES; i++) {
                        const float *pj = p + i * stride + j0 + j, *vj = v[i] + j * dk;
                        a[i] += pj[0] * load8(vj);
                        b[i] += pj[1] * load8(vj + dk);
                    }
            if (j < n)
#pragma GCC unroll 4
                for (int i = 0; i < QUERIES; i++)
                    a[i] += p[i * stride + j0 + j] * load8(v[i] + j * dk);
        }
#pragma GCC unroll 4
        for (int i = 0; i < QUERIES; i++)
            store8(queries[i].context + e0, (a[i] + b[i]) * inv[i]);
    }
    for (; e0 < dk; e0++) /* d_k not a multiple of 8 */
        for (int i = 0; i < QUERIES; i++) {
            float sum = 0.0f;
            for (int64_t j = 0; j < len; j++)
                sum += p[i * stride + j] *
                       tile_of(&queries[i], j, size)[(BLOCK + j % BLOCK) * dk + e0];
            queries[i].context[e0] = sum * inv[i];
        }
}

/* Collects query heads for attend, QUERIES at a time. */
typedef struct query_batch {
    query queries[QUERIES];
    int count;
    int64_t len, dk;
    float *p;
} query_batch;

static void attend_batch(query_batch *batch)
{
    /* a batch short of QUERIES repeats its last query: the same context,
     * written again */
    for (int i = batch->count; i < QUERIES; i++)
        batch->queries[i] = batch->queries[batch->count - 1];
    attend(batch->queries, batch->len, batch->dk, batch->p);
    batch->count = 0;
}

static void add_query(query_batch *batch, query query)
{
    batch->queries[batch->count++] = query;
    if (batch->count == QUERIES)
        attend_batch(batch);
}

static void finish_batch(query_batch *batch)
{
    if (batch->count > 0)
        attend_batch(batch);
}

/* A group of sources [first, first + count) decoded on one thread: its
 * rows' part of the step buffers, and that thread's attention scratch. */
typedef struct group {
    int64_t first, count;
    float *x, *h, *y, *qkv, *ctx, *ff, *logits, *weights;
    int32_t *active;
    int split;        /* its rows' attention may run on libtfm's threads */
    int64_t bad_step; /* the first step whose logits were not finite, or -1 */
} group;

static group group_of(const tfm_decoding *d, int64_t first, int64_t count, int worker,
                      int split)
{
    int64_t row = first * d->beam, D = d->d;
    return (group){first, count, d->x + row * D, d->h + row * D, d->y + row * D,
                   d->qkv + row * 3 * D, d->ctx + row * D, d->ff + row * d->d_ff,
                   d->logits + row * d->vocab,
                   d->weights ? d->weights + worker * d->weights_stride : NULL, /* no cache */
                   d->active + row, split, -1};
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
} attend_job;

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
    int64_t D = d->d, H = d->heads, dk = d->dk, t = j->t;
    for (int64_t i = begin; i < end; i++) {
        float *row = j->g->qkv + i * 3 * D; /* its queries, keys, values */
        const int32_t *table = tile_table_of(d, j->rows[i]);
        for (int64_t e = 0; e < D; e++)
            row[e] *= j->factor;
        for (int64_t h = 0; h < H; h++)
            put_position(self_tiles(d, j->l, h) + table[t / BLOCK] * tile_floats(d), t,
                         row + D + h * dk, row + 2 * D + h * dk, dk);
    }
    query_batch batch = {.len = t + 1, .dk = dk, .p = j->g->weights + worker * d->weights_stride};
    for (int64_t first = begin, last; first < end; first = last) {
        last = next_source(j, first, end);
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = first; i < last; i++)
                add_query(&batch, (query){j->g->qkv + i * 3 * D + h * dk, self_tiles(d, j->l, h),
                                          tile_table_of(d, j->rows[i]), NULL,
                                          j->g->ctx + i * D + h * dk});
    }
    finish_batch(&batch);
}

static void cross_attend_rows(void *ctx, int64_t begin, int64_t end, int worker)
{
    const attend_job *j = ctx;
    tfm_decoding *d = j->d;
    int64_t D = d->d, H = d->heads, dk = d->dk;
    for (int64_t e = 0; e < (end - begin) * D; e++)
        j->g->qkv[begin * D + e] *= j->factor;
    query_batch batch = {.len = j->S, .dk = dk, .p = j->g->weights + worker * d->weights_stride};
    for (int64_t first = begin, last; first < end; first = last) {
        last = next_source(j, first, end);
        int64_t b = j->rows[first] / d->beam;
        const int32_t *keep = d->o.src_pad_id >= 0 ? d->keep + b * d->cross_tiled : NULL;
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = first; i < last; i++)
                add_query(&batch, (query){j->g->qkv + i * D + h * dk, cross_tiles(d, j->l, b, h),
                                          NULL, keep, j->g->ctx + i * D + h * dk});
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

static void self_attention(tfm_decoding *d, const group *g, int32_t l, const tfm_layer *att,
                           const float *in, int64_t n, const int32_t *rows, int64_t t, float *out)
{
    int64_t D = d->d;
    tfm_layer *const *c = att->children;
    if (att->fused) {
        project(in, n, D, tfm__f32(att->weight), values(att->bias), 3 * D, g->qkv, 3 * D);
    } else {
        linear(c[TFM__ATT_Q], in, n, g->qkv, 3 * D);
        linear(c[TFM__ATT_K], in, n, g->qkv + D, 3 * D);
        linear(c[TFM__ATT_V], in, n, g->qkv + 2 * D, 3 * D);
    }
    attend_job j = {d, g, l, rows, t, 0, query_factor(d, att)};
    attend_rows(&j, n, n * (t + 1) * D, self_attend_rows);
    linear(c[TFM__ATT_OUT], g->ctx, n, out, D);
}

static void cross_attention(tfm_decoding *d, const group *g, int32_t l, const tfm_layer *att,
                            const float *in, int64_t n, const int32_t *rows, int64_t S, float *out)
{
    int64_t D = d->d;
    if (att->fused)
        project(in, n, D, tfm__f32(att->weight), values(att->bias), D, g->qkv, D);
    else
        linear(att->children[TFM__ATT_Q], in, n, g->qkv, D);
    attend_job j = {d, g, l, rows, 0, S, query_factor(d, att)};
    attend_rows(&j, n, n * S * D, cross_attend_rows);
    linear(att->children[TFM__ATT_OUT], g->ctx, n, out, D);
}

static void feed_forward(tfm_decoding *d, const group *g, const tfm_layer *ff, const float *in,
                         int64_t n, float *out)
{
    int64_t width = d->d_ff;
    linear(ff->children[TFM__FF_LINEAR1], in, n, g->ff, width);
    float *hv = g->ff;
    if (ff->activation == TFM_ACTIVATION_GELU) {
        for (int64_t i = 0; i < n * width; i++)
            hv[i] = 0.5f * hv[i] * (1.0f + erff(hv[i] * INV_SQRT2));
    } else {
        for (int64_t i = 0; i < n * width; i++)
            hv[i] = hv[i] <= 0.0f ? 0.0f : hv[i]; /* NaN passes on */
    }
    linear(ff->children[TFM__FF_LINEAR2], hv, n, out, d->d);
}

static void add_into(float *x, const float *y, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        x[i] += y[i];
}

/* One residual sublayer on the stream x: pre-norm x += f(norm(x)),
 * post-norm x = norm(x + f(x)). kind: 0 self-, 1 cross-attention, 2 FF. */
static void sublayer(tfm_decoding *d, const group *g, int32_t l, const tfm_layer *block,
                     int kind, int64_t n, const int32_t *rows, int64_t t, int64_t S)
{
    static const int child[3] = {TFM__BLK_SELF_ATTN, TFM__BLK_CROSS_ATTN, TFM__BLK_FF};
    static const int norm_of[3] = {TFM__BLK_NORM1, TFM__BLK_NORM2, TFM__BLK_NORM3};
    const tfm_layer *f = block->children[child[kind]], *norm = block->children[norm_of[kind]];
    int64_t D = d->d;
    const float *in = g->x;
    if (block->norm_first) {
        layer_norm(norm, g->x, n, D, g->h);
        in = g->h;
    }
    if (kind == 0)
        self_attention(d, g, l, f, in, n, rows, t, g->y);
    else if (kind == 1)
        cross_attention(d, g, l, f, in, n, rows, S, g->y);
    else
        feed_forward(d, g, f, in, n, g->y);
    if (block->norm_first) {
        add_into(g->x, g->y, n * D);
    } else {
        add_into(g->y, g->x, n * D);
        layer_norm(norm, g->y, n, D, g->x);
    }
}

/* Logits [n, vocab] of position t for the group's rows listed, whose input
 * tokens are their hist[t]. */
static void cached_step(tfm_decoding *d, const group *g, int64_t n, const int32_t *rows,
                        int64_t t, int64_t S)
{
    const tfm_model *m = d->model;
    int64_t D = d->d, T1 = d->max_len + 1;
    const tfm_layer *positions = m->tgt_positions;
    const float *table = tfm__f32(m->tgt_embedding->weight);
    const float *pos = tfm__f32(positions->weight ? positions->weight : positions->table) + t * D;
    float scale = m->options.embedding_scale == TFM_EMBEDDING_SCALE_SQRT_D ? sqrtf((float)D)
                  : m->tgt_scale ? tfm__f32(m->tgt_scale)[0] : 1.0f;
    int scaled = m->options.embedding_scale != TFM_EMBEDDING_SCALE_NONE;
    for (int64_t i = 0; i < n; i++) {
        const float *e = table + (int64_t)d->hist[rows[i] * T1 + t] * D;
        float *x = g->x + i * D;
        for (int64_t j = 0; j < D; j++)
            x[j] = (scaled ? e[j] * scale : e[j]) + pos[j];
    }
    const tfm_layer *decoder = m->decoder;
    for (int32_t l = 0; l < d->layers; l++)
        for (int kind = 0; kind < 3; kind++)
            sublayer(d, g, l, decoder->children[l], kind, n, rows, t, S);
    const tfm_layer *final_norm = decoder->children[decoder->n_children - 1];
    const float *out = g->x;
    if (final_norm) {
        layer_norm(final_norm, g->x, n, D, g->h);
        out = g->h;
    }
    linear(m->generator, out, n, g->logits, d->vocab);
}

/* Each decoder layer's cross-attention keys and values of the memory
 * [B, S, D], split into heads once for the whole run. */
static void cache_memory(tfm_decoding *d, const float *memory, int64_t B, int64_t S)
{
    int64_t D = d->d, H = d->heads, dk = d->dk;
    for (int32_t l = 0; l < d->layers; l++) {
        const tfm_layer *att = d->model->decoder->children[l]->children[TFM__BLK_CROSS_ATTN];
        if (att->fused) {
            const float *bias = values(att->bias);
            project(memory, B * S, D, tfm__f32(att->weight) + D * D, bias ? bias + D : NULL,
                    2 * D, d->kv, 2 * D);
        } else {
            linear(att->children[TFM__ATT_K], memory, B * S, d->kv, 2 * D);
            linear(att->children[TFM__ATT_V], memory, B * S, d->kv + D, 2 * D);
        }
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++) {
                float *tiles = cross_tiles(d, l, b, h);
                for (int64_t s = 0; s < S; s++) {
                    const float *k = d->kv + (b * S + s) * 2 * D + h * dk;
                    put_position(tiles + s / BLOCK * tile_floats(d), s, k, k + D, dk);
                }
            }
    }
}

/* The trainable attention scales must be usable, as tfm_attention_forward
 * requires. 0 or -1 with the error set. */
static int check_scales(const tfm_decoding *d)
{
    for (int32_t l = 0; l < d->layers; l++) {
        const tfm_layer *block = d->model->decoder->children[l];
        const tfm_layer *atts[2] = {block->children[TFM__BLK_SELF_ATTN],
                                    block->children[TFM__BLK_CROSS_ATTN]};
        for (int a = 0; a < 2; a++) {
            float s = atts[a]->scale ? tfm__f32(atts[a]->scale)[0] : 1.0f;
            if (!(s != 0.0f) || !isfinite(s)) {
                tfm__fail(TFM_ERR_NUMERIC, "tfm_decoding_run: decoder layer %d's %s scale "
                          "is %g; it must be finite and nonzero", (int)l,
                          a ? "cross-attention" : "self-attention", (double)s);
                return -1;
            }
        }
    }
    return 0;
}

/* --- the reference step: the whole prefix through tfm_model_decode ------------- */

static void header(tfm_tensor *t, tfm_dtype dtype, int32_t ndim, const int64_t *shape, void *data)
{
    int64_t numel = 1;
    for (int32_t i = 0; i < ndim; i++)
        numel *= shape[i];
    tfm__tensor_init(t, dtype, ndim, shape, numel, TFM_STORAGE_HEAP);
    t->data = data;
}

static tfm_status recomputed_step(tfm_decoding *d, const group *g, int64_t n,
                                  const int32_t *rows, int64_t t, int64_t S)
{
    int64_t D = d->d, T1 = d->max_len + 1, len = t + 1, V = d->vocab;
    for (int64_t i = 0; i < n; i++) {
        int64_t b = rows[i] / d->beam;
        memcpy(d->prefix + i * len, d->hist + rows[i] * T1, (size_t)len * sizeof(int32_t));
        memcpy(d->memory_rows + i * S * D, d->memory + b * S * D, (size_t)(S * D) * sizeof(float));
        memcpy(d->src_rows + i * S, d->src + b * S, (size_t)S * sizeof(int32_t));
    }
    tfm_tensor prefix, memory, src;
    header(&prefix, TFM_I32, 2, (const int64_t[]){n, len}, d->prefix);
    header(&memory, TFM_F32, 3, (const int64_t[]){n, S, D}, d->memory_rows);
    header(&src, TFM_I32, 2, (const int64_t[]){n, S}, d->src_rows);
    tfm_tape *tape = d->tape;
    tfm_tape_reset(tape);
    tfm_tensor *memory_mask = NULL;
    if (d->o.src_pad_id >= 0 &&
        !(memory_mask = tfm_mask_padding(tape, &src, d->o.src_pad_id, TFM_I32)))
        return tfm_last_status();
    tfm_tensor *logits = tfm_model_decode(tape, d->model, &prefix, &memory,
                                          tfm_mask_causal(tape, len, TFM_I32), memory_mask, NULL,
                                          NULL);
    if (!logits)
        return tfm_last_status();
    for (int64_t i = 0; i < n; i++)
        memcpy(g->logits + i * V, tfm__f32(logits) + (i * len + t) * V, (size_t)V * sizeof(float));
    return TFM_OK;
}

/* The logits of the group's n rows listed in g->active at step t. */
static tfm_status step(tfm_decoding *d, const group *g, int64_t n, int64_t t, int64_t S)
{
    if (d->o.use_cache) {
        cached_step(d, g, n, g->active, t, S);
        return TFM_OK;
    }
    return recomputed_step(d, g, n, g->active, t, S);
}

/* --- choosing tokens -------------------------------------------------------------- */

/* log(sum(exp(logits))); NaN or infinite when the logits are not usable. */
static double log_sum_exp(const float *logits, int64_t V)
{
    float max = logits[0];
    for (int64_t v = 1; v < V; v++)
        max = logits[v] > max ? logits[v] : max;
    double total = 0.0;
    for (int64_t v = 0; v < V; v++)
        total += expf(logits[v] - max);
    return (double)max + log(total);
}

static tfm_status not_finite(int64_t t)
{
    return tfm__fail(TFM_ERR_NUMERIC, "tfm_decoding_run: the model's logits at step %lld are "
                     "not finite", (long long)t);
}

/* Token a ranks before b: a larger logit, then the smaller id. */
static int before(const float *l, int32_t a, int32_t b)
{
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static void sift_down(int32_t *heap, int64_t n, int64_t i, const float *l)
{
    for (;;) {
        int64_t best = i, c = 2 * i + 1;
        if (c < n && before(l, heap[c], heap[best]))
            best = c;
        if (c + 1 < n && before(l, heap[c + 1], heap[best]))
            best = c + 1;
        if (best == i)
            return;
        int32_t tmp = heap[i];
        heap[i] = heap[best];
        heap[best] = tmp;
        i = best;
    }
}

/* The most likely token left in the heap heap[0..*n), moved to heap[*n - 1]:
 * the k-th token popped ends at heap[V - k]. */
static int32_t pop(int32_t *heap, int64_t *n, const float *l)
{
    int32_t top = heap[0];
    heap[0] = heap[*n - 1];
    heap[*n - 1] = top;
    (*n)--;
    sift_down(heap, *n, 0, l);
    return top;
}

/* Writes the distribution to draw from into p [V] (softmax of logits /
 * temperature, cut to the top_k most likely, then to the smallest set of
 * most likely tokens reaching top_p, renormalised) and draws from it. */
static int32_t sample(tfm_decoding *d, const float *logits, float *p)
{
    int64_t V = d->vocab, k = d->o.top_k > 0 && d->o.top_k < V ? d->o.top_k : V;
    float max = logits[0];
    for (int64_t v = 1; v < V; v++)
        max = logits[v] > max ? logits[v] : max;
    /* dividing (not multiplying by 1/T) keeps a tiny temperature finite */
    for (int64_t v = 0; v < V; v++)
        p[v] = expf((logits[v] - max) / d->o.temperature);
    double total = 0.0;
    int64_t kept = V;
    if (k < V || d->o.top_p < 1.0f) {
        int32_t *heap = d->order;
        int64_t n = V;
        for (int64_t v = 0; v < V; v++)
            heap[v] = (int32_t)v;
        for (int64_t i = V / 2 - 1; i >= 0; i--)
            sift_down(heap, V, i, logits);
        if (k < V) {
            for (kept = 0; kept < k; kept++)
                total += p[pop(heap, &n, logits)];
        } else {
            for (int64_t v = 0; v < V; v++)
                total += p[v];
        }
        if (d->o.top_p < 1.0f) {
            double target = (double)d->o.top_p * total, reached = 0.0;
            int64_t m = 0;
            while (m < kept && reached < target) {
                int32_t token = m < V - n ? heap[V - 1 - m] : pop(heap, &n, logits);
                reached += p[token];
                m++;
            }
            kept = m;
            total = reached;
        }
        /* heap[0 .. V - kept) holds every token not kept */
        for (int64_t j = 0; j < V - kept; j++)
            p[heap[j]] = 0.0f;
    } else {
        for (int64_t v = 0; v < V; v++)
            total += p[v];
    }
    for (int64_t v = 0; v < V; v++)
        p[v] = (float)(p[v] / total);
    double u = tfm_rng_uniform(d->rng), reached = 0.0;
    int32_t last = 0;
    for (int64_t v = 0; v < V; v++) {
        if (p[v] <= 0.0f)
            continue;
        reached += p[v];
        last = (int32_t)v;
        if (u < reached)
            return last;
    }
    return last; /* u beyond the rounded total */
}

static int32_t argmax(const float *l, int64_t V)
{
    int32_t best = 0;
    for (int64_t v = 1; v < V; v++)
        if (l[v] > l[best])
            best = (int32_t)v;
    return best;
}

/* --- greedy and sampling ------------------------------------------------------------- */

/* The group's sources, one row each. */
static tfm_status search_one(tfm_decoding *d, group *g, int64_t S, int32_t *lengths,
                             float *out_logits, float *out_probs)
{
    int64_t V = d->vocab, T = d->max_len, T1 = T + 1;
    int64_t n = g->count;
    for (int64_t i = 0; i < n; i++) {
        int64_t b = g->first + i;
        if (d->o.use_cache) /* a row's own tiles */
            for (int64_t j = 0; j < row_tiles(d); j++)
                tile_table_of(d, b)[j] = (int32_t)(b * row_tiles(d) + j);
        g->active[i] = (int32_t)b;
        d->hist[b * T1] = d->o.bos_id;
        d->sum[b] = 0.0;
        lengths[b] = 1;
    }
    for (int64_t t = 0; t < T && n > 0; t++) {
        tfm_status status = step(d, g, n, t, S);
        if (status != TFM_OK)
            return status;
        int64_t still = 0;
        for (int64_t i = 0; i < n; i++) {
            int32_t r = g->active[i];
            const float *l = g->logits + i * V;
            double lse = log_sum_exp(l, V);
            if (!isfinite(lse)) {
                g->bad_step = t;
                return TFM_ERR_NUMERIC;
            }
            if (out_logits)
                memcpy(out_logits + (r * T + t) * V, l, (size_t)V * sizeof *l);
            float *p = out_probs ? out_probs + (r * T + t) * V : d->probs;
            int32_t token;
            if (d->o.strategy == TFM_DECODE_SAMPLE) {
                token = sample(d, l, p);
            } else {
                token = argmax(l, V);
                if (out_probs)
                    for (int64_t v = 0; v < V; v++)
                        p[v] = (float)exp(l[v] - lse);
            }
            d->sum[r] += l[token] - lse;
            d->hist[r * T1 + t + 1] = token;
            lengths[r] = (int32_t)(t + 2);
            if (token != d->o.eos_id)
                g->active[still++] = r;
        }
        n = still;
    }
    return TFM_OK;
}

/* --- beam search ---------------------------------------------------------------------- */

/* The raw score of a hypothesis of `generated` tokens, length-normalised. */
static double normalised(const tfm_decoding *d, double score, int64_t generated)
{
    return score / pow((double)generated, (double)d->o.length_penalty);
}

/* Moves row `from`'s hypothesis (its first `len` tokens) to source b's
 * finished ones. */
static void finish(tfm_decoding *d, int64_t b, const int32_t *tokens, int64_t len, double score)
{
    int64_t T1 = d->max_len + 1, f = b * d->beam + d->done[b]++;
    int32_t *out = d->fin_tokens + f * T1;
    memcpy(out, tokens, (size_t)len * sizeof *out);
    for (int64_t i = len; i < T1; i++)
        out[i] = -1;
    d->fin_length[f] = (int32_t)len;
    d->fin_score[f] = normalised(d, score, len - 1);
}

/* One source's best candidates of a step, kept sorted [beam]. */
typedef struct candidates {
    double *score;
    int32_t *parent, *token;
} candidates;

static candidates candidates_of(const tfm_decoding *d, int64_t b)
{
    int64_t at = b * d->beam;
    return (candidates){d->cand_score + at, d->cand_parent + at, d->cand_token + at};
}

/* Inserts a candidate into the best `width` of the step; an equal score
 * ranks after the earlier candidates. */
static void consider(const candidates *c, int64_t *count, int64_t width, double score,
                     int32_t parent, int32_t token)
{
    if (*count == width && !(score > c->score[width - 1]))
        return;
    int64_t pos = *count < width ? (*count)++ : width - 1;
    for (; pos > 0 && score > c->score[pos - 1]; pos--) {
        c->score[pos] = c->score[pos - 1];
        c->parent[pos] = c->parent[pos - 1];
        c->token[pos] = c->token[pos - 1];
    }
    c->score[pos] = score;
    c->parent[pos] = parent;
    c->token[pos] = token;
}

/* A tile of source b's that no row uses, now used once. A source owns
 * beam * self_tiled / BLOCK tiles, as many as its hypotheses would use if
 * they shared none, so one is always free (see reorder_tiles). */
static int32_t new_tile(tfm_decoding *d, int64_t b)
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
    int64_t size = tile_floats(d), used = (BLOCK + n) * d->dk; /* the keys, n values */
    for (int32_t l = 0; l < d->layers; l++)
        for (int64_t h = 0; h < d->heads; h++) {
            float *tiles = self_tiles(d, l, h);
            memcpy(tiles + to * size, tiles + from * size, (size_t)used * sizeof(float));
        }
}

/* Source b's new hypotheses j < n_new (rows from b * beam), children of
 * its `live` rows at step t, take their parents' tile tables (the tiles of
 * positions 0..t), then a tile of their own for position t + 1: a new one
 * when t + 1 begins a tile, else their parent's last, copied if another
 * child uses it too. Every hypothesis then has its own tile of position
 * t + 1 and shares the others, so the source's rows never use more tiles
 * than it owns. */
static void reorder_tiles(tfm_decoding *d, const candidates *c, int64_t b, int64_t live,
                          int64_t n_new, int64_t t)
{
    int64_t per_row = row_tiles(d), used = t / BLOCK + 1, next = (t + 1) / BLOCK;
    int32_t *table = tile_table_of(d, b * d->beam);
    int32_t *tmp = d->table_tmp + b * d->beam * per_row, *refs = d->tile_refs;
    for (int64_t j = 0; j < n_new; j++) {
        memcpy(tmp + j * per_row, table + c->parent[j] * per_row, (size_t)used * sizeof *tmp);
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
            *tile = new_tile(d, b);
        } else if (refs[*tile] > 1) {
            int32_t own = new_tile(d, b);
            copy_tile(d, *tile, own, (t + 1) % BLOCK);
            refs[*tile]--;
            *tile = own;
        }
    }
}

/* Source b's live rows take the hypotheses of their parents (tiles and
 * tokens 0..t), then the new tokens at t + 1. */
static void reorder(tfm_decoding *d, const candidates *c, int64_t b, int64_t n_new, int64_t t)
{
    int64_t K = d->beam, T1 = d->max_len + 1, base = b * K;
    int32_t *hist_tmp = d->hist_tmp + base * T1;
    double *sum_tmp = d->sum_tmp + base;
    for (int64_t j = 0; j < n_new; j++) {
        memcpy(hist_tmp + j * T1, d->hist + (base + c->parent[j]) * T1,
               (size_t)(t + 1) * sizeof(int32_t));
        hist_tmp[j * T1 + t + 1] = c->token[j];
        sum_tmp[j] = c->score[j];
    }
    for (int64_t j = 0; j < n_new; j++) {
        memcpy(d->hist + (base + j) * T1, hist_tmp + j * T1, (size_t)(t + 2) * sizeof(int32_t));
        d->sum[base + j] = sum_tmp[j];
    }
    if (d->o.use_cache)
        reorder_tiles(d, c, b, d->live[b], n_new, t);
}

/* One step of source b, whose live rows' log probabilities start at logp:
 * the best (beam - finished) continuations; those ending in eos finish. */
static void advance(tfm_decoding *d, int64_t b, const float *logp, int64_t t)
{
    int64_t K = d->beam, V = d->vocab, T1 = d->max_len + 1, width = K - d->done[b];
    int64_t count = 0;
    candidates c = candidates_of(d, b);
    for (int32_t j = 0; j < d->live[b]; j++) {
        double base = d->sum[b * K + j];
        for (int64_t v = 0; v < V; v++)
            consider(&c, &count, width, base + logp[j * V + v], j, (int32_t)v);
    }
    int64_t n_new = 0;
    for (int64_t i = 0; i < count; i++) {
        if (c.token[i] == d->o.eos_id) {
            int32_t *tokens = d->hist + (b * K + c.parent[i]) * T1;
            tokens[t + 1] = d->o.eos_id; /* past the parent's tokens, rewritten if kept */
            finish(d, b, tokens, t + 2, c.score[i]);
        } else {
            c.score[n_new] = c.score[i];
            c.parent[n_new] = c.parent[i];
            c.token[n_new] = c.token[i];
            n_new++;
        }
    }
    reorder(d, &c, b, n_new, t);
    d->live[b] = (int32_t)n_new;
}

/* The group's sources, a row per live hypothesis. */
static tfm_status search_beam(tfm_decoding *d, group *g, int64_t S, int32_t *tokens,
                              int32_t *lengths, float *scores)
{
    int64_t K = d->beam, V = d->vocab, T = d->max_len, T1 = T + 1, N = d->o.n_best;
    int64_t first = g->first, last = g->first + g->count;
    int64_t owned = K * row_tiles(d);
    for (int64_t b = first; b < last; b++) {
        if (d->o.use_cache) { /* one hypothesis, writing position 0 */
            memset(d->tile_refs + b * owned, 0, (size_t)owned * sizeof *d->tile_refs);
            tile_table_of(d, b * K)[0] = new_tile(d, b);
        }
        d->live[b] = 1;
        d->done[b] = 0;
        d->hist[b * K * T1] = d->o.bos_id;
        d->sum[b * K] = 0.0;
    }
    for (int64_t t = 0; t < T; t++) {
        int64_t n = 0;
        for (int64_t b = first; b < last; b++)
            for (int32_t j = 0; j < d->live[b]; j++)
                g->active[n++] = (int32_t)(b * K + j);
        if (n == 0)
            break;
        tfm_status status = step(d, g, n, t, S);
        if (status != TFM_OK)
            return status;
        for (int64_t i = 0; i < n; i++) {
            float *l = g->logits + i * V;
            double lse = log_sum_exp(l, V);
            if (!isfinite(lse)) {
                g->bad_step = t;
                return TFM_ERR_NUMERIC;
            }
            for (int64_t v = 0; v < V; v++)
                l[v] = (float)(l[v] - lse);
        }
        const float *logp = g->logits;
        for (int64_t b = first; b < last; b++) {
            int32_t live = d->live[b];
            if (live > 0)
                advance(d, b, logp, t);
            logp += live * V;
        }
    }
    for (int64_t b = first; b < last; b++) {
        /* hypotheses still live at max_length end there */
        for (int32_t j = 0; j < d->live[b]; j++)
            finish(d, b, d->hist + (b * K + j) * T1, T1, d->sum[b * K + j]);
        /* best first; an equal score keeps the order of finishing */
        int32_t found = d->done[b];
        const double *score = d->fin_score + b * K;
        int32_t *rank = d->rank + b * K;
        for (int32_t i = 0; i < found; i++) {
            int32_t pos = i;
            for (; pos > 0 && score[i] > score[rank[pos - 1]]; pos--)
                rank[pos] = rank[pos - 1];
            rank[pos] = i;
        }
        for (int64_t h = 0; h < N; h++) {
            int64_t out = b * N + h, f = b * K + (h < found ? rank[h] : 0);
            if (h < found) {
                memcpy(tokens + out * T1, d->fin_tokens + f * T1, (size_t)T1 * sizeof *tokens);
                lengths[out] = d->fin_length[f];
            } else { /* fewer distinct sequences exist than n_best */
                for (int64_t i = 0; i < T1; i++)
                    tokens[out * T1 + i] = -1;
                lengths[out] = 0;
            }
            if (scores)
                scores[out] = h < found ? (float)d->fin_score[f] : -INFINITY;
        }
    }
    return TFM_OK;
}

/* --- groups ---------------------------------------------------------------------------- */

/* A run's groups, which the threads take in turn. */
typedef struct decode_run {
    tfm_decoding *d;
    int64_t batch, S;
    int32_t *tokens, *lengths;
    float *scores, *logits, *probs;
    int64_t per_group, groups, next; /* next: the next group to take */
    /* per worker, the first step with logits not finite in its groups, or -1 */
    int64_t bad_step[TFM__MAX_THREADS];
} decode_run;

/* Sources per group for a batch of B: as many as fit (group_sources), but
 * few enough to make MIN_GROUPS groups, and never fewer than
 * GROUP_MIN_ROWS rows' worth. */
static int64_t sources_per_group(const tfm_decoding *d, int64_t B)
{
    if (!d->grouped)
        return B;
    int64_t even = (B + MIN_GROUPS - 1) / MIN_GROUPS;
    int64_t fewest = (GROUP_MIN_ROWS + d->beam - 1) / d->beam;
    int64_t n = even < d->group_sources ? even : d->group_sources;
    return n > fewest ? n : fewest;
}

static tfm_status search(group *g, const decode_run *run)
{
    if (run->d->o.strategy == TFM_DECODE_BEAM)
        return search_beam(run->d, g, run->S, run->tokens, run->lengths, run->scores);
    return search_one(run->d, g, run->S, run->lengths, run->logits, run->probs);
}

static void search_some_groups(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)begin, (void)end;
    decode_run *run = ctx;
    int64_t per_group = run->per_group, *bad = &run->bad_step[worker];
    for (int64_t i; (i = __atomic_fetch_add(&run->next, 1, __ATOMIC_RELAXED)) < run->groups;) {
        int64_t first = i * per_group;
        group g = group_of(run->d, first, first + per_group < run->batch ? per_group
                                                                         : run->batch - first,
                           worker, 0);
        /* in a group of cached steps only logits can fail */
        if (search(&g, run) != TFM_OK && (*bad < 0 || g.bad_step < *bad))
            *bad = g.bad_step;
    }
}

/* Decodes the batch: a lone group on the calling thread, its attention on
 * libtfm's threads; groups on the threads, one thread each. */
static tfm_status search_groups(decode_run *run)
{
    int64_t bad = -1;
    if (run->groups == 1) {
        group g = group_of(run->d, 0, run->batch, 0, 1);
        tfm_status status = search(&g, run);
        if (status != TFM_OK && g.bad_step < 0)
            return status; /* the reference path's own error */
        bad = g.bad_step;
    } else {
        /* every share's, set here: a tfm_set_num_threads meanwhile may run fewer */
        int threads = tfm__threads();
        for (int w = 0; w < threads; w++)
            run->bad_step[w] = -1;
        tfm__parallel_for(threads, threads, search_some_groups, run);
        for (int w = 0; w < threads; w++)
            if (run->bad_step[w] >= 0 && (bad < 0 || run->bad_step[w] < bad))
                bad = run->bad_step[w];
    }
    return bad >= 0 ? not_finite(bad) : TFM_OK;
}

/* --- run ------------------------------------------------------------------------------ */

/* What a run over batch sources writes: per hypothesis, per source and step. */
typedef struct sizes {
    int64_t tokens, lengths, logits;
} sizes;

static sizes sizes_for(const tfm_decoding *d, int64_t batch)
{
    int64_t hypotheses = batch * (d->o.strategy == TFM_DECODE_BEAM ? d->o.n_best : 1);
    return (sizes){
        .tokens = hypotheses * (d->max_len + 1),
        .lengths = hypotheses,
        .logits = d->o.strategy == TFM_DECODE_BEAM ? 0 : batch * d->max_len * d->vocab,
    };
}

tfm_status tfm_decoding_buffer_sizes(const tfm_decoding *d, int64_t batch, int64_t *tokens,
                                     int64_t *lengths, int64_t *scores, int64_t *logits)
{
    const char *op = "tfm_decoding_buffer_sizes";
    if (!d)
        return tfm__fail(TFM_ERR_NULL, "%s: decoding is NULL", op);
    if (batch < 1 || batch > d->max_batch)
        return tfm__fail(TFM_ERR_ARG, "%s: batch %lld is outside the decoding's 1..%lld", op,
                         (long long)batch, (long long)d->max_batch);
    sizes n = sizes_for(d, batch);
    if (tokens)
        *tokens = n.tokens;
    if (lengths)
        *lengths = n.lengths;
    if (scores)
        *scores = n.lengths;
    if (logits)
        *logits = n.logits;
    return TFM_OK;
}

/* A buffer given (count elements) must hold what the run writes into it. */
static tfm_status check_room(const char *what, const void *buffer, int64_t count,
                             int64_t needed, const char *formula)
{
    if (buffer && count < needed)
        return tfm__fail(TFM_ERR_SIZE, "tfm_decoding_run: %s holds %lld elements; this batch "
                         "needs %lld (%s; tfm_decoding_buffer_sizes tells)", what,
                         (long long)count, (long long)needed, formula);
    return TFM_OK;
}

static tfm_status check_run(const tfm_decoding *d, const tfm_tensor *src, const int32_t *tokens,
                            int64_t tokens_count, const int32_t *lengths, int64_t lengths_count,
                            const float *scores, int64_t scores_count, const float *logits,
                            int64_t logits_count, const float *probs, int64_t probs_count)
{
    const char *op = "tfm_decoding_run";
    if (!d || !tokens || !lengths)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                         !d ? "decoding" : !tokens ? "tokens" : "lengths");
    if (tfm__check_input(op, "src", src, TFM_I32) < 0)
        return tfm_last_status();
    char s[64];
    if (src->ndim != 2)
        return tfm__fail(TFM_ERR_SHAPE, "%s: src %s must be [batch, length]", op,
                         tfm__shape_str(src, s, sizeof s));
    if (src->shape[0] > d->max_batch || src->shape[1] > d->max_src_len)
        return tfm__fail(TFM_ERR_SHAPE, "%s: src %s exceeds the decoding's max_batch %lld "
                         "or max_src_len %lld", op, tfm__shape_str(src, s, sizeof s),
                         (long long)d->max_batch, (long long)d->max_src_len);
    if (d->o.strategy == TFM_DECODE_BEAM && (logits || probs))
        return tfm__fail(TFM_ERR_ARG, "%s: logits and probs are for greedy decoding and "
                         "sampling; pass NULL with beam search", op);
    sizes n = sizes_for(d, src->shape[0]);
    const char *per_hypothesis = d->o.strategy == TFM_DECODE_BEAM ? "batch * n_best" : "batch";
    char tokens_formula[64];
    snprintf(tokens_formula, sizeof tokens_formula, "%s * (max_length + 1)", per_hypothesis);
    tfm_status status;
    if ((status = check_room("tokens", tokens, tokens_count, n.tokens, tokens_formula)) ||
        (status = check_room("lengths", lengths, lengths_count, n.lengths, per_hypothesis)) ||
        (status = check_room("scores", scores, scores_count, n.lengths, per_hypothesis)) ||
        (status = check_room("logits", logits, logits_count, n.logits,
                             "batch * max_length * tgt_vocab")) ||
        (status = check_room("probs", probs, probs_count, n.logits,
                             "batch * max_length * tgt_vocab")))
        return status;
    const int32_t *ids = tfm__i32(src);
    for (int64_t i = 0; i < src->numel; i++)
        if (ids[i] < 0 || ids[i] >= d->model->options.src_vocab)
            return tfm__fail(TFM_ERR_RANGE, "%s: src%s is %d, outside the source vocabulary "
                             "of %lld", op, tfm__index_str(src, i, s, sizeof s), (int)ids[i],
                             (long long)d->model->options.src_vocab);
    if (check_scales(d) < 0)
        return tfm_last_status();
    return TFM_OK;
}

/* Encodes src and keeps what the steps read: the cross-attention keys and
 * values (cached) or the memory (recomputed). */
static tfm_status encode(tfm_decoding *d, const tfm_tensor *src)
{
    int64_t B = src->shape[0], S = src->shape[1];
    tfm_tape *tape = d->tape;
    tfm_tape_reset(tape);
    tfm_tensor *mask = NULL;
    if (d->o.src_pad_id >= 0 &&
        !(mask = tfm_mask_padding(tape, src, d->o.src_pad_id, TFM_I32)))
        return tfm_last_status();
    tfm_tensor *memory = tfm_model_encode(tape, d->model, src, mask, NULL);
    if (!memory)
        return tfm_last_status();
    const int32_t *ids = tfm__i32(src);
    if (d->o.use_cache) {
        cache_memory(d, tfm__f32(memory), B, S);
        for (int64_t b = 0; b < B; b++)
            for (int64_t s = 0; s < S; s++)
                d->keep[b * d->cross_tiled + s] = ids[b * S + s] != d->o.src_pad_id;
    } else {
        memcpy(d->memory, tfm__f32(memory), (size_t)memory->numel * sizeof(float));
        memcpy(d->src, ids, (size_t)src->numel * sizeof *ids);
    }
    return TFM_OK;
}

tfm_status tfm_decoding_run(tfm_decoding *d, const tfm_tensor *src, int32_t *tokens,
                            int64_t tokens_count, int32_t *lengths, int64_t lengths_count,
                            float *scores, int64_t scores_count, float *logits,
                            int64_t logits_count, float *probs, int64_t probs_count)
{
    uint64_t mark = tfm__error_mark();
    tfm_status status = check_run(d, src, tokens, tokens_count, lengths, lengths_count, scores,
                                  scores_count, logits, logits_count, probs, probs_count);
    if (status != TFM_OK)
        return status;
    int64_t B = src->shape[0], S = src->shape[1], T1 = d->max_len + 1;
    size_t outputs = (size_t)(B * d->max_len * d->vocab) * sizeof(float);
    if (logits)
        memset(logits, 0, outputs);
    if (probs)
        memset(probs, 0, outputs);
    *d->rng = d->rng_seeded;
    model_flags(d->model, d->training, 1);
    tfm_model_set_training(d->model, 0);
    status = encode(d, src);
    if (status == TFM_OK) {
        int64_t per_group = sources_per_group(d, B);
        decode_run run = {d, B, S, tokens, lengths, scores, logits, probs, per_group,
                          (B + per_group - 1) / per_group, 0, {0}};
        status = search_groups(&run);
    }
    if (status == TFM_OK && d->o.strategy != TFM_DECODE_BEAM) {
        for (int64_t b = 0; b < B; b++) {
            for (int64_t i = 0; i < T1; i++)
                tokens[b * T1 + i] = i < lengths[b] ? d->hist[b * T1 + i] : -1;
            if (scores)
                scores[b] = (float)d->sum[b];
        }
    }
    model_flags(d->model, d->training, 0);
    tfm_tape_reset(d->tape);
    if (status != TFM_OK)
        tfm__fail_within("tfm_decoding_run", mark);
    return status;
}
