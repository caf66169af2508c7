/* What decoding's rooms share: the decoding's state, the caches' layout,
 * the groups of sources, and the calls from one room into another.
 *   decode.c            the run and its options; groups of sources on threads
 *   cache.c             the tiled caches, and the tiles a beam's hypotheses share
 *   attention_kernel.c  attention over the caches, four query heads at a time
 *   step.c              one step of the decoder: cached, or the whole prefix again
 *   weights.c           the float32 weights packed for the products, which
 *                       several decodings may share
 *   logits.c            what a step's logits go through before a token is chosen
 *   constraints.c       phrases a decoding must write (placeholders, glossaries)
 *   greedy.c            greedy decoding and sampling: a row per source
 *   sample.c            sampling's draw (temperature, top-k, top-p)
 *   beam.c              beam search
 * The file comment of decode.c tells how decoding works. */
#ifndef TFM_DECODE_DECODE_H
#define TFM_DECODE_DECODE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/gemm_packed.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "core/vectors.h"
#include "decode/constraints.h"
#include "ops/linear.h"
#include "tfm/decode.h"

/* Scores are computed for tiles of this many positions; the key caches
 * hold whole tiles, so that a tile never reads past its head's keys. */
#define BLOCK 16
/* attend's query heads at a time */
#define QUERIES 4

/* A decoder layer's products, as weights.c packs them: the
 * self-attention's queries, keys and values (one product), its output,
 * the cross-attention's queries and output, the feed-forward's in a step;
 * the cross-attention's keys and values of the memory (one product), once
 * per source. */
enum {
    DECODE_SELF_QKV, DECODE_SELF_OUT, DECODE_CROSS_Q, DECODE_CROSS_OUT, DECODE_FF_IN,
    DECODE_FF_UP, DECODE_FF_OUT, DECODE_CROSS_KV, DECODE_PRODUCTS
};
/* An encoder layer's linear layers at most: queries, keys and values
 * (fused: one), output, the feed-forward's two or three. */
#define ENCODE_LINEARS 7

/* A model's float32 weights packed for decoding (weights.c): built once,
 * read by any number of decodings at once, none of which writes it. */
typedef struct tfm__decode_weights tfm__decode_weights;
struct tfm__decode_weights {
    const tfm_model *model;
    uint32_t quantized;    /* the model's quantized flags when packed */
    int bf16;              /* packed in bfloat16: the matmul precision when packed */
    /* each decoder layer's products and the generator's; products NULL
     * when not packed (a decoding's own without caches). An unpacked
     * one's panels are NULL (int8, or no linear_up) */
    tfm__packed (*products)[DECODE_PRODUCTS], generator;
    /* the encoder's float32 linear layers' weights packed with their
     * biases [n_encoder], which a decoding's tape lists (tfm__tape_set_packed) */
    tfm__packed_linear *encoder;
    int64_t n_encoder;
    float *floats;         /* every product's panels and biases */
    int64_t n_floats;
};

/* The model's weights packed as they are now, the encoder's and the
 * decoder's (and the generator's); NULL with the error set. They must
 * outlive every decoding that reads them, and the model must not change
 * (train, load, quantize) while they are read. */
tfm__decode_weights *tfm__decode_weights_pack(const tfm_model *model);
void tfm__decode_weights_free(tfm__decode_weights *w);
/* The bytes w holds: its packed floats and its tables. */
size_t tfm__decode_weights_bytes(const tfm__decode_weights *w);
/* TFM_OK when options would make a decoding of model, else the error
 * tfm_decoding_create would give, under op's name (TFM_ERR_ARG): for a
 * caller that sizes its own buffers by them before decoding. */
tfm_status tfm__decode_options_check(const char *op, const tfm_model *model,
                                     const tfm_decode_options *options);
/* A decoding as tfm_decoding_create's, which reads `shared` (made from
 * this model, and outliving the decoding) and packs nothing itself; NULL
 * with the error set, op (the public call) first in its message. Any
 * number of such decodings may run at once on their threads. */
tfm_decoding *tfm__decoding_create_shared(const char *op, tfm_model *model,
                                          const tfm_decode_options *options, int64_t max_batch,
                                          int64_t max_src_len, const tfm__decode_weights *shared);

struct tfm_decoding {
    tfm_model *model;
    tfm_decode_options o;
    int64_t max_batch, max_src_len, max_len; /* max_len: options.max_length */
    int64_t beam;          /* rows per source: beam_size for beam search, else 1 */
    int64_t d, heads, dk, d_ff, vocab;
    int64_t inner;         /* the attention's width, heads * dk (not always d) */
    /* the feed-forward's floats per row: d_ff, or when gated 2 d_ff (the
     * activated hidden, then linear_up's) */
    int64_t ff_row;
    int64_t rows;          /* max_batch * beam */
    int64_t self_tiled, cross_tiled; /* max_len, max_src_len rounded up to BLOCK */
    int64_t group_sources; /* the sources whose caches fit GROUP_CACHE_BYTES */
    int64_t min_rows;      /* a group's fewest rows, as its weights want (decode.c) */
    int grouped;           /* 0: the batch is one group (sampling, the reference path) */
    int bf16_cache;        /* the caches hold bfloat16 (options' cache_precision) */
    int attend_in_pairs;   /* and attention multiplies them in bfloat16 pairs
                              (tfm__decode_attend_in_pairs) */
    int32_t layers;
    tfm_tape *tape;        /* encoding, and the reference path's steps */
    /* the cached path's other encoding threads' tapes, [0] unused (tape):
     * made at the first run that encodes on that many threads */
    tfm_tape *encode_tapes[TFM__MAX_THREADS];
    /* the options' adapter by name (o.adapter points here), looked up at
     * each run into adapter (NULL: none) */
    char adapter_name[64];
    const struct tfm__adapter_set *adapter;
    tfm_rng *rng;
    struct tfm_rng rng_seeded; /* the rng as seeded, restored at each run */
    const char *running;   /* the public call running it, for messages; NULL when idle:
                              a callback may not run it again */

    /* one step over n rows: residual stream, normed input, sublayer output,
     * projections [n, 3 inner], attention context [n, inner], feed-forward
     * hidden, logits
     * (each group has its rows' part, see group_of), and per thread,
     * QUERIES queries' attention weights [weights_stride] */
    float *x, *h, *y, *qkv, *ctx, *ff, *logits, *weights;
    int64_t weights_stride;
    /* per thread, a group's step's relative position bias (group's
     * position_bias); NULL without relative_attention_buckets */
    float *position_bias;
    /* caches (use_cache): self-attention tiles [layers][heads][tiles],
     * cross-attention tiles [layers][batch][heads][cross_tiled / BLOCK]
     * (float32, or bfloat16 with bf16_cache: see cache_element),
     * and the cross projections of one encoding's memory [sources * S,
     * 2 inner]
     * before their split into heads; each row's tiles [rows][self_tiled /
     * BLOCK] and each tile's count of rows using it */
    void *self_cache, *cross_cache;
    void *self_block, *cross_block; /* their allocations, which they start 64-byte aligned in */
    float *kv;
    /* the packed weights the run reads (their decoder's with use_cache):
     * shared ones, or own_weights, packed again at each run */
    const tfm__decode_weights *weights_packed;
    tfm__decode_weights *own_weights;
    int64_t tiles;         /* rows * self_tiled / BLOCK */
    int32_t *tile_table, *tile_refs;
    int32_t *keep;         /* [batch][cross_tiled]: 0 for a padded source key */
    /* [batch]: the source positions each source's rows attend to, up to its
     * last that is not src_pad_id (the run's S without padding); and the
     * ids of an encoding's slice of sources cut to its longest */
    int32_t *source_len, *slice_ids;
    /* reference path: the memory [batch][S][D], and the step's inputs */
    float *memory, *memory_rows;
    int32_t *src, *src_rows, *prefix;

    /* search state: each row's tokens [rows][max_len + 1], log probability,
     * the rows decoding this step, and sampling's scratch [vocab] */
    int32_t *hist, *active, *order;
    double *sum;
    float *probs;
    /* beam search: live and finished hypotheses per source; per source,
     * this step's best candidates [2 * beam], the finished hypotheses
     * [beam][max_len + 1] and the scratch to reorder its rows */
    int32_t *live, *done, *cand_parent, *cand_token, *fin_tokens, *fin_length, *rank;
    int32_t *table_tmp;    /* [rows][self_tiled / BLOCK] */
    double *cand_score, *fin_score;
    int32_t *hist_tmp;
    double *sum_tmp;

    /* the logits processors (logits.c): the end tokens (eos_id, then
     * eos_ids), each token's flag of being one [vocab], and the copies of
     * the options' arrays (o's pointers point to them); with a processor
     * on (processing), greedy decoding and sampling process a copy of the
     * logits [rows][vocab] and keep the model's own for the scores */
    int32_t *ends, *suppress_ids, *eos_ids, *bad_words, *bad_word_lengths;
    int64_t n_ends;
    /* per source of the run: its longest output (max_length_a, _b) [batch],
     * and its forced prefix [batch][max_len] (-1 after it) */
    int32_t *limit, *forced;
    /* BEAM: the finished hypotheses a source waits for (patience) */
    int64_t finish_count;
    uint8_t *is_end;
    int processing;
    float *processed;
    /* per source of the next runs, its constraints (constraints.h; NULL:
     * none), as tfm__decoding_constrain set them */
    const tfm__constraints *const *constraints;

    /* alignments (return_attention; NULL without): a step's cross-attention
     * weights of the last decoder layer per row and head [rows][heads]
     * [max_src_len]; per row, each step's averaged over the heads
     * [rows][max_len][max_src_len] (beam: with their reordering's scratch,
     * and the finished hypotheses' [batch * finish_count][max_len]
     * [max_src_len]); the last run's per returned hypothesis: where they
     * are and how many rows (result_count 0: no run has succeeded) */
    float *head_weights, *alignments, *alignments_tmp, *fin_alignments;
    const float **result;
    int32_t *result_rows;
    int64_t result_count, result_S;
};

/* A group of sources [first, first + count) decoded on one thread: its
 * rows' part of the step buffers, and that thread's attention scratch. */
typedef struct group {
    int64_t first, count;
    float *x, *h, *y, *qkv, *ctx, *ff, *logits, *weights, *processed;
    /* relative_attention_buckets: the step's bias over the keys of each
     * head [heads][self_tiled]; NULL without */
    float *position_bias;
    int32_t *active;
    int split;        /* its rows' attention may run on libtfm's threads */
    int64_t bad_step; /* the first step whose logits were not finite, or -1 */
} group;

/* t: a tensor header over data the decoding owns (no copy). */
static inline void tensor_over(tfm_tensor *t, tfm_dtype dtype, int32_t ndim, const int64_t *shape,
                               void *data)
{
    int64_t numel = 1;
    for (int32_t i = 0; i < ndim; i++)
        numel *= shape[i];
    tfm__tensor_init(t, dtype, ndim, shape, numel, TFM_STORAGE_HEAP);
    t->data = data;
}

/* A parameter's values, or NULL for none (a layer without bias). */
static inline const float *values(const tfm_tensor *t)
{
    return t ? tfm__f32(t) : NULL;
}

/* The runs of d from now on constrain source b of their batch by
 * per_source[b] (NULL: not), until called again (per_source NULL: no
 * constraints). per_source must hold an entry for each source of a run
 * and outlive it. */
void tfm__decoding_constrain(tfm_decoding *d, const tfm__constraints *const *per_source);

/* --- the caches' layout (cache.c has the rest) ---------------------------------- */

/* The bytes of a cached key or value element: float32, or bfloat16. */
static inline size_t cache_element(const tfm_decoding *d)
{
    return d->bf16_cache ? sizeof(uint16_t) : sizeof(float);
}

/* A tile's bytes: BLOCK positions' keys [d_k][BLOCK], then their values
 * [BLOCK][d_k]. */
static inline size_t tile_bytes(const tfm_decoding *d)
{
    return (size_t)(2 * BLOCK * d->dk) * cache_element(d);
}

/* Tile i of tiles, which are one after another. */
static inline void *tile_at(const tfm_decoding *d, void *tiles, int64_t i)
{
    return (char *)tiles + (size_t)i * tile_bytes(d);
}

/* Layer l's self-attention tiles of head h, which rows' tile tables index. */
static inline void *self_tiles(const tfm_decoding *d, int32_t l, int64_t h)
{
    return tile_at(d, d->self_cache, ((int64_t)l * d->heads + h) * d->tiles);
}

/* Layer l's cross-attention tiles of source b's head h, one after another. */
static inline void *cross_tiles(const tfm_decoding *d, int32_t l, int64_t b, int64_t h)
{
    return tile_at(d, d->cross_cache,
                   (((int64_t)l * d->max_batch + b) * d->heads + h) * (d->cross_tiled / BLOCK));
}

/* The tiles a row lists, and where its list is. */
static inline int64_t row_tiles(const tfm_decoding *d)
{
    return d->self_tiled / BLOCK;
}

static inline int32_t *tile_table_of(const tfm_decoding *d, int64_t row)
{
    return d->tile_table + row * row_tiles(d);
}

/* Position j's key and value [d_k] into the tile that holds it, rounded
 * to bfloat16 in a bfloat16 cache. */
static inline void put_position(const tfm_decoding *d, void *tile, int64_t j, const float *key,
                                const float *value)
{
    int64_t dk = d->dk, at = j % BLOCK;
    if (d->bf16_cache) {
        uint16_t *t = tile;
        for (int64_t e = 0; e < dk; e++) {
            t[e * BLOCK + at] = tfm__bf16_round(key[e]);
            t[(BLOCK + at) * dk + e] = tfm__bf16_round(value[e]);
        }
    } else {
        float *t = tile;
        for (int64_t e = 0; e < dk; e++)
            t[e * BLOCK + at] = key[e];
        memcpy(t + (BLOCK + at) * dk, value, (size_t)dk * sizeof *value);
    }
}

/* Row r's weights of head h in a step [max_src_len], and its alignments
 * [max_len][max_src_len] (return_attention). */
static inline float *head_weights_of(const tfm_decoding *d, int64_t r, int64_t h)
{
    return d->head_weights + (r * d->heads + h) * d->max_src_len;
}

static inline float *alignments_of(const tfm_decoding *d, float *all, int64_t r)
{
    return all + r * d->max_len * d->max_src_len;
}

/* --- calls between the rooms ------------------------------------------------------ */

/* step.c: out[i, 0:out_f] (row stride ldc) = in[i] W^T + b for n rows,
 * W [out_f, in_f] in float32; every product of decoding goes through
 * tfm__decode_product: rows [first, first + count) of weight w (and of
 * bias b, or NULL) for n rows, in int8 when the model is quantized (whole
 * parts of w then: core/tensor.h), else in float32; the same through a
 * linear layer */
void tfm__decode_project(const float *in, int64_t n, int64_t in_f, const float *w,
                         const float *b, int64_t out_f, float *out, int64_t ldc);
void tfm__decode_product(const tfm_tensor *w, const tfm_tensor *b, int64_t first,
                         int64_t count, const float *in, int64_t n, float *out, int64_t ldc);
void tfm__decode_linear(const tfm_layer *linear, const float *in, int64_t n, float *out,
                        int64_t ldc);
/* step.c, when the products are not packed (int8 weights): an attention's
 * projections first .. first + count - 1 (0 queries, 1 keys, 2 values) of
 * in's n rows, side by side in out [n, count * I] (I: the heads' inner
 * width), from a fused weight's rows or its linear layers */
void tfm__decode_projections(const tfm_layer *att, int first, int count, const float *in,
                             int64_t n, float *out, int64_t I);
/* weights.c: a decoding's own tables for the model's packed weights,
 * the decoder's too when `decoder` (NULL with the error set, op naming
 * the call); their weights packed as they are now (op names the run in
 * an error) */
tfm__decode_weights *tfm__decode_weights_make(const tfm_model *model, int decoder,
                                              const char *op);
tfm_status tfm__decode_weights_repack(tfm__decode_weights *w, const char *op);
/* step.c and cache.c: out (row stride ldc) = in [n, p->in] times p's
 * weights and bias, when the run packed them (weights.c); 0 when it did
 * not (int8 weights), or when a bfloat16 product's buffer cannot grow:
 * the caller multiplies by the layer's own weights */
int tfm__decode_packed_product(const tfm__packed *p, const float *in, int64_t n, float *out,
                               int64_t ldc);

/* The decoding's adapter's terms (none without one) added to a product
 * already in out (row stride ldc): an attention's projections first ..
 * first + count - 1 (0 queries, 1 keys, 2 values, side by side, each I
 * wide) of in's n rows, or a linear's. */
void tfm__decode_adapt_projections(const tfm_decoding *d, const tfm_layer *att, int first,
                                   int count, const float *in, int64_t n, float *out,
                                   int64_t I);
void tfm__decode_adapt_linear(const tfm_decoding *d, const tfm_layer *linear, const float *in,
                              int64_t n, float *out, int64_t ldc);
/* cache.c: each decoder layer's cross-attention keys and values of the
 * memory [n, S, D] of sources first..first + n - 1 (through kv, [n * S, 2
 * inner], a part of d->kv); a free tile of source
 * b's; source b's new hypotheses' tile tables from their parents' (beam.c's
 * reorder) */
void tfm__decode_cache_memory(tfm_decoding *d, const float *memory, int64_t first, int64_t n,
                              int64_t S, float *kv);
/* cache.c: a tile's first `count` positions, whose keys and values are
 * rows `stride` floats apart from key and value, as put_position puts
 * them one by one. */
void tfm__decode_put_tile(const tfm_decoding *d, void *tile, int64_t count, const float *key,
                          const float *value, int64_t stride);
int32_t tfm__decode_new_tile(tfm_decoding *d, int64_t b);
void tfm__decode_reorder_tiles(tfm_decoding *d, const int32_t *parent, int64_t b, int64_t live,
                               int64_t n_new, int64_t t);
/* attention_kernel.c: layer l's self-attention of the step's n rows (after
 * their projections into g->qkv) over positions 0..t, or cross-attention
 * over the source's S positions; factor multiplies the queries */
/* Whether attention over bfloat16 caches multiplies in bfloat16 pairs
 * (VDPBF16PS: queries and weights rounded to bfloat16, float32 sums) at
 * this d_k: on CPUs with AVX512_BF16 at x86-64-v4 (TFM_CPU lowers it), d_k
 * 8 or a multiple of 16 up to 256. */
int tfm__decode_attend_in_pairs(int64_t dk);
/* 0: never in pairs (tests compare the two ways) */
extern int tfm__decode_pairs_allowed;
void tfm__decode_self_attend(tfm_decoding *d, const group *g, int32_t l, const int32_t *rows,
                             int64_t n, int64_t t, float factor);
void tfm__decode_cross_attend(tfm_decoding *d, const group *g, int32_t l, const int32_t *rows,
                              int64_t n, int64_t S, float factor);
/* The bytes of tiles a step's attention of one kind reads, in all its
 * layers, above which the kernel prefetches (about a last-level cache;
 * tests lower it to run that path on small models) */
extern double tfm__decode_streamed_bytes;
/* step.c: the logits of the group's n rows listed in g->active at step t */
tfm_status tfm__decode_step(tfm_decoding *d, const group *g, int64_t n, int64_t t, int64_t S);
/* logits.c: the processors applied to one row's scores [V] (logits, or
 * beam search's log probabilities) of a source, whose tokens so far are
 * so_far[0..len) (bos_id first); whether any processor is on (a forced
 * prefix aside, which greedy.c asks the run for) */
void tfm__decode_process(const tfm_decoding *d, float *scores, const int32_t *so_far,
                         int64_t len, int64_t source);
int tfm__decode_processing(const tfm_decoding *d);
/* sample.c: the distribution to draw from into p [V], and the token drawn */
int32_t tfm__decode_sample(tfm_decoding *d, const float *logits, float *p);
/* greedy.c and beam.c: the group's sources decoded */
tfm_status tfm__decode_search_one(tfm_decoding *d, group *g, int64_t S, int32_t *lengths,
                                  float *out_logits, float *out_probs);
tfm_status tfm__decode_search_beam(tfm_decoding *d, group *g, int64_t S, int32_t *tokens,
                                   int32_t *lengths, float *scores);
/* beam.c: the first v in [from, n) whose score base + logp[v] (in
 * double) might beat `worst`, or n; none before it does. */
int64_t tfm__beam_next_rival(const float *logp, int64_t from, int64_t n, double base,
                             double worst);

#endif
