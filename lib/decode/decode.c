/* Decoding a tfm_model: greedy, sampling (temperature, top-k, top-p) and
 * beam search over a batch of sources. This room holds the run and its
 * options, the decoding's buffers, and the groups of sources on threads;
 * decode.h lists the others.
 *
 * The sources are encoded once on a private no-grad tape in evaluation
 * (whatever the layers' training flags), the encoder's weights packed
 * (weights.c). A run reads the model without writing into it, so that
 * several threads decode one model at once, each with its decoding. With use_cache
 * the decoder then runs one token per step outside the tape, straight on
 * the layers' parameters, over tiled caches of keys and values (cache.c,
 * step.c, attention_kernel.c). Without the caches, every step runs
 * tfm_model_decode over the whole prefix (the reference the cached path is
 * tested against). Rows are sources (greedy, sampling) or a source's beam
 * hypotheses; only the rows still decoding are computed, so finished
 * sequences cost nothing.
 *
 * A batch is decoded in groups of sources whose caches fit in a core's
 * share of the caches (see sources_per_group), each group all its steps on
 * one thread, the threads taking the next group as they finish: a step's
 * products are too small to share among threads, and a whole batch's
 * caches, read at every step, would come from memory. The groups depend
 * on the batch and the model only, so the thread count never changes a
 * result. Sampling draws from one generator in the order of the rows, and
 * the reference path shares one tape: both run the batch as one group,
 * whose rows' attention runs on libtfm's threads. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/options.h"
#include "core/parallel.h"
#include "decode/decode.h"
#include "model/model.h"
#include "nn/layer.h"

/* A group's caches stay within about this many bytes (a core's L2 and its
 * share of L3 on most x86 CPUs), counting a beam's hypotheses as sharing
 * all but a tile, but it keeps at least GROUP_MIN_ROWS rows, below which
 * its products would run mostly on their edges. */
#define GROUP_CACHE_BYTES (4 << 20)
#define GROUP_MIN_ROWS 16
/* A group's step reads the decoder's weights once: when they are larger
 * than the caches (from memory, then), it keeps at least WIDE_GROUP_ROWS
 * rows, which read them a quarter as often (002's beam 4, when OpenBLAS
 * also packed them per product: a quarter less CPU time), but the batch
 * still makes two groups (one group runs its products split among the
 * threads, which costs more than it saves). */
#define WIDE_GROUP_ROWS 64
/* A batch makes at least this many groups if it can, so that the threads
 * that take them in turn end together, whatever their count. */
#define MIN_GROUPS 16

/* Sources encoded at once: as many as keep the tape within about
 * ENCODE_BYTES. The tape keeps every activation of an encoding until it is
 * reset, some ENCODED_ROWS rows of d_model floats per token and layer: a
 * whole batch's encoding (64 sources of 100 tokens at d_model 512, 6
 * layers: 1.5 GB) took more memory than all the caches, and its pages, new
 * at each run, a third of a run's time at 000/001's size. Fewer tokens
 * would cost a sync of the threads per operation per slice. */
#define ENCODE_BYTES (128 << 20)
#define ENCODED_ROWS 20

static int64_t tokens_per_encoding(const tfm_decoding *d)
{
    double per_token = (double)ENCODED_ROWS * (double)d->d * sizeof(float) *
                       (double)(d->model->options.encoder_layers + 1);
    return (int64_t)(ENCODE_BYTES / per_token);
}

/* The cached path encodes each source alone, cut to its own keys: a
 * source's encoding (the softmax's vector and tail lanes, the attention's
 * products) would otherwise depend on the padding its batch gives it, and
 * so its translation on what it was batched with. The recomputed path,
 * the reference, encodes slices of sources as the tape allows. */
static int64_t sources_per_encoding(const tfm_decoding *d, int64_t S)
{
    int64_t n = tokens_per_encoding(d) / S;
    return n < 1 ? 1 : n < d->max_batch ? n : d->max_batch;
}

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
    d.repetition_penalty = 1.0f;
    d.max_length_a = 0.0f;
    d.max_length_b = INT32_MAX;
    d.forced_bos_id = -1;
    d.patience = 1.0f;
    d.forced_eos_id = -1;
    tfm__init_options(o, struct_size, &d, sizeof d);
}

/* An array option's ids [n] must be target token ids; NULL only when n is 0.
 * 0 or -1 with the error set. */
static int check_ids(const char *op, const char *name, const int32_t *ids, int32_t n,
                     int64_t vocab)
{
    if (n < 0 || (n > 0 && !ids)) {
        tfm__fail(TFM_ERR_ARG, "%s: n_%s is %d; it must be 0, or positive with %s not NULL",
                  op, name, (int)n, name);
        return -1;
    }
    for (int32_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab) {
            tfm__fail(TFM_ERR_ARG, "%s: %s[%d] is %d; it must be a target token id (below "
                      "%lld)", op, name, (int)i, (int)ids[i], (long long)vocab);
            return -1;
        }
    return 0;
}

/* The bad words' tokens, all sequences together. */
static int64_t bad_word_tokens(const tfm_decode_options *o)
{
    int64_t total = 0;
    for (int32_t i = 0; i < o->n_bad_words; i++)
        total += o->bad_word_lengths[i];
    return total;
}

/* The bad words: n_bad_words lengths >= 1, their tokens target ids. 0 or
 * -1 with the error set. */
static int check_bad_words(const char *op, const tfm_decode_options *o, int64_t vocab)
{
    if (o->n_bad_words < 0 || (o->n_bad_words > 0 && (!o->bad_words || !o->bad_word_lengths))) {
        tfm__fail(TFM_ERR_ARG, "%s: n_bad_words is %d; it must be 0, or positive with "
                  "bad_words and bad_word_lengths not NULL", op, (int)o->n_bad_words);
        return -1;
    }
    for (int32_t i = 0; i < o->n_bad_words; i++) {
        if (o->bad_word_lengths[i] < 1) {
            tfm__fail(TFM_ERR_ARG, "%s: bad_word_lengths[%d] is %d; it must be positive", op,
                      (int)i, (int)o->bad_word_lengths[i]);
            return -1;
        }
    }
    for (int64_t i = 0; i < bad_word_tokens(o); i++)
        if (o->bad_words[i] < 0 || o->bad_words[i] >= vocab) {
            tfm__fail(TFM_ERR_ARG, "%s: bad_words[%lld] is %d; it must be a target token id "
                      "(below %lld)", op, (long long)i, (int)o->bad_words[i], (long long)vocab);
            return -1;
        }
    return 0;
}

/* The logits processors' options. 0 or -1 with the error set. */
static int check_processors(const char *op, const tfm_model_options *mo,
                            const tfm_decode_options *o)
{
    if (o->min_length < 0 || o->min_length > o->max_length) {
        tfm__fail(TFM_ERR_ARG, "%s: min_length %d must be from 0 to max_length %d", op,
                  (int)o->min_length, (int)o->max_length);
        return -1;
    }
    if (!(o->repetition_penalty > 0.0f) || !isfinite(o->repetition_penalty)) {
        tfm__fail(TFM_ERR_ARG, "%s: repetition_penalty %g must be positive and finite", op,
                  (double)o->repetition_penalty);
        return -1;
    }
    if (o->no_repeat_ngram_size < 0) {
        tfm__fail(TFM_ERR_ARG, "%s: no_repeat_ngram_size %d must be 0 (none) or positive", op,
                  (int)o->no_repeat_ngram_size);
        return -1;
    }
    if (!(o->max_length_a >= 0.0f) || !isfinite(o->max_length_a) || o->max_length_b < 1) {
        tfm__fail(TFM_ERR_ARG, "%s: max_length_a %g must be finite and >= 0 and max_length_b "
                  "%d >= 1", op, (double)o->max_length_a, (int)o->max_length_b);
        return -1;
    }
    if (o->forced_bos_id < -1 || o->forced_bos_id >= mo->tgt_vocab) {
        tfm__fail(TFM_ERR_ARG, "%s: forced_bos_id %d must be a target token id or -1", op,
                  (int)o->forced_bos_id);
        return -1;
    }
    if (o->forced_eos_id < -1 || o->forced_eos_id >= mo->tgt_vocab) {
        tfm__fail(TFM_ERR_ARG, "%s: forced_eos_id %d must be a target token id or -1", op,
                  (int)o->forced_eos_id);
        return -1;
    }
    if ((o->beam_rules != TFM_BEAM_RULES_CTRANSLATE2 &&
         o->beam_rules != TFM_BEAM_RULES_TRANSFORMERS) ||
        o->early_stopping < TFM_EARLY_STOPPING_HEURISTIC ||
        o->early_stopping > TFM_EARLY_STOPPING_NEVER) {
        tfm__fail(TFM_ERR_ARG, "%s: beam_rules %d must be a TFM_BEAM_RULES_ value and "
                  "early_stopping %d a TFM_EARLY_STOPPING_ one", op, (int)o->beam_rules,
                  (int)o->early_stopping);
        return -1;
    }
    if (o->renormalize_logits != 0 && o->renormalize_logits != 1) {
        tfm__fail(TFM_ERR_ARG, "%s: renormalize_logits %d must be 0 or 1", op,
                  (int)o->renormalize_logits);
        return -1;
    }
    if (!(o->patience >= 0.01f && o->patience <= 64.0f)) {
        tfm__fail(TFM_ERR_ARG, "%s: patience %g must be from 0.01 to 64", op,
                  (double)o->patience);
        return -1;
    }
    return check_ids(op, "suppress_ids", o->suppress_ids, o->n_suppress_ids, mo->tgt_vocab) ||
                   check_ids(op, "eos_ids", o->eos_ids, o->n_eos_ids, mo->tgt_vocab) ||
                   check_bad_words(op, o, mo->tgt_vocab)
               ? -1
               : 0;
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
    else if (o->return_attention != 0 && o->return_attention != 1)
        bad = "return_attention must be 0 or 1";
    else if (o->return_attention && mo->decoder_layers < 1)
        bad = "return_attention needs a decoder layer";
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
    if (o->adapter && !tfm__model_adapter(op, m, o->adapter))
        return -1;
    if (o->cache_precision < TFM_CACHE_AUTO || o->cache_precision > TFM_CACHE_BFLOAT16) {
        tfm__fail(TFM_ERR_ARG, "%s: cache_precision %d must be TFM_CACHE_AUTO, _FLOAT32 or "
                  "_BFLOAT16", op, (int)o->cache_precision);
        return -1;
    }
    return check_processors(op, mo, o);
}

tfm_status tfm__decode_options_check(const char *op, const tfm_model *model,
                                     const tfm_decode_options *options)
{
    tfm_decode_options o;
    return read_options(op, model, options, &o) < 0 ? tfm_last_status() : TFM_OK;
}

/* --- creation ------------------------------------------------------------------- */

/* The decoding's own copies of the options' token lists, and its end
 * tokens: eos_id (unless -1), then eos_ids. */
static void copy_ids(int32_t *to, const int32_t *from, int64_t n)
{
    if (n > 0) /* from may be NULL then */
        memcpy(to, from, (size_t)n * sizeof *to);
}

static void keep_token_lists(tfm_decoding *d, const tfm_decode_options *o)
{
    copy_ids(d->suppress_ids, o->suppress_ids, o->n_suppress_ids);
    copy_ids(d->eos_ids, o->eos_ids, o->n_eos_ids);
    copy_ids(d->bad_words, o->bad_words, bad_word_tokens(o));
    copy_ids(d->bad_word_lengths, o->bad_word_lengths, o->n_bad_words);
    d->o.suppress_ids = d->suppress_ids;
    d->o.eos_ids = d->eos_ids;
    d->o.bad_words = d->bad_words;
    d->o.bad_word_lengths = d->bad_word_lengths;
    if (o->eos_id >= 0)
        d->ends[d->n_ends++] = o->eos_id;
    for (int32_t i = 0; i < o->n_eos_ids; i++)
        d->ends[d->n_ends++] = o->eos_ids[i];
    for (int64_t i = 0; i < d->n_ends; i++)
        d->is_end[d->ends[i]] = 1;
}

/* A zeroed buffer of count elements; NULL with the error set. */
static void *buffer(const char *op, double count, size_t elem)
{
    void *p = calloc(count >= 1.0 ? (size_t)count : 1, elem);
    if (!p)
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %.0f elements", op, count);
    return p;
}

/* A cache of count elements zeroed in a calloc'd block (unused pages stay
 * unmapped), starting on a cache line: a tile's rows of 16 floats are then
 * whole lines, where calloc's 16-byte alignment split every 64-byte load
 * of a key row in two. */
static void *cache_buffer(const char *op, double count, size_t elem, void **block)
{
    if (!(*block = buffer(op, count + (double)(64 / elem), elem)))
        return NULL;
    return (void *)(((uintptr_t)*block + 63) & ~(uintptr_t)63);
}

#define BUFFER(field, count) ((d->field = buffer(op, (double)(count), sizeof *d->field)) != NULL)

/* A decoding over the shared packed weights, or (shared NULL) its own,
 * packed at each run. */
static tfm_decoding *create(const char *op, tfm_model *model, const tfm_decode_options *options,
                            int64_t max_batch, int64_t max_src_len,
                            const tfm__decode_weights *shared)
{
    uint64_t mark = tfm__error_mark();
    if (!model || !options) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, model ? "options" : "model");
        return NULL;
    }
    if (shared && (shared->model != model || !shared->products)) {
        tfm__fail(TFM_ERR_ARG, "%s: the shared weights were not packed from this model by "
                  "tfm__decode_weights_pack", op);
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
    if (o.adapter) {
        snprintf(d->adapter_name, sizeof d->adapter_name, "%s", o.adapter);
        d->o.adapter = d->adapter_name;
    }
    d->max_batch = max_batch;
    d->max_src_len = max_src_len;
    d->max_len = o.max_length;
    d->beam = beam;
    d->bf16_cache = o.use_cache && (o.cache_precision == TFM_CACHE_BFLOAT16 ||
                                    (o.cache_precision == TFM_CACHE_AUTO &&
                                     tfm__model_int8_pays(model)));
    d->d = b->d_model;
    d->heads = b->heads;
    d->dk = tfm__head_dim(b->d_model, b->heads, b->head_dim);
    d->attend_in_pairs = d->bf16_cache && tfm__decode_attend_in_pairs(d->dk);
    d->inner = d->heads * d->dk;
    d->d_ff = b->d_ff;
    d->ff_row = b->gated_feed_forward ? 2 * b->d_ff : b->d_ff;
    d->vocab = model->options.tgt_vocab;
    d->layers = model->options.decoder_layers;
    d->rows = max_batch * beam;
    d->self_tiled = (d->max_len + BLOCK - 1) / BLOCK * BLOCK;
    d->cross_tiled = (max_src_len + BLOCK - 1) / BLOCK * BLOCK;
    d->tiles = d->rows * d->self_tiled / BLOCK;
    d->weights_stride = QUERIES * (d->self_tiled > d->cross_tiled ? d->self_tiled : d->cross_tiled);
    long finish_count = lround((double)beam * (double)o.patience);
    d->finish_count = finish_count > 1 ? finish_count : 1;

    double rows = (double)max_batch * (double)beam, D = (double)d->d, T = (double)d->max_len;
    double I = (double)d->inner;
    double S = (double)max_src_len, L = (double)d->layers, V = (double)d->vocab;
    double Tp = (double)d->self_tiled, Sp = (double)d->cross_tiled;
    double memory = (double)max_batch * S * D, self_cache = L * rows * 2 * I * Tp;
    /* a cached element's share of a float's bytes (bfloat16: half) */
    double cache_share = (double)cache_element(d) / sizeof(float);
    /* the cross projections of one encoding's sources (see encode) */
    double encoded = fmin(fmax((double)tokens_per_encoding(d), S), (double)max_batch * S) * I;
    double cross_cache = L * (double)max_batch * 2 * I * Sp;
    /* the largest buffers, in floats: activations, tokens, caches or memory */
    double finished = (double)max_batch * (double)d->finish_count; /* beam's hypotheses */
    double alignments = o.return_attention
                            ? rows * (double)d->heads * S + (2 * rows + finished) * T * S
                            : 0.0;
    double floats = rows * (3 * D + 4 * I + (double)d->ff_row + V + 2 * (T + 1)) + finished * (T + 3) +
                    alignments +
                    (o.use_cache ? (self_cache + cross_cache) * cache_share + 2 * encoded
                                 : memory + rows * S * D);
    if (floats * sizeof(float) > (double)TFM_MAX_TENSOR_BYTES) {
        tfm__fail(TFM_ERR_SIZE, "%s: the decoding would need %.3g bytes, too large; lower "
                  "max_batch (%lld), max_src_len (%lld), max_length or beam_size", op,
                  floats * sizeof(float), (long long)max_batch, (long long)max_src_len);
        tfm_decoding_free(d);
        return NULL;
    }
    d->weights_packed = shared;
    int ok = (d->tape = tfm_tape_create()) && tfm_tape_set_recording(d->tape, 0) == TFM_OK &&
             (d->rng = tfm_rng_create(o.seed)) &&
             (shared || (d->weights_packed = d->own_weights =
                             tfm__decode_weights_make(model, o.use_cache, op))) &&
             BUFFER(x, rows * D) && BUFFER(h, rows * D) && BUFFER(y, rows * D) &&
             BUFFER(qkv, rows * 3 * I) && BUFFER(ctx, rows * I) &&
             BUFFER(ff, rows * (double)d->ff_row) && BUFFER(logits, rows * V) &&
             BUFFER(hist, rows * (T + 1)) && BUFFER(active, rows) && BUFFER(sum, rows) &&
             BUFFER(order, V) && BUFFER(probs, V) && BUFFER(ends, o.n_eos_ids + 1) &&
             BUFFER(is_end, V) && BUFFER(suppress_ids, o.n_suppress_ids) &&
             BUFFER(eos_ids, o.n_eos_ids) && BUFFER(bad_words, bad_word_tokens(&o)) &&
             BUFFER(bad_word_lengths, o.n_bad_words) && BUFFER(limit, max_batch) &&
             BUFFER(forced, (double)max_batch * T);
    if (ok && o.strategy != TFM_DECODE_BEAM)
        ok = BUFFER(processed, V * TFM__MAX_THREADS);
    if (ok && o.use_cache)
        ok = (d->self_cache = cache_buffer(op, self_cache, cache_element(d), &d->self_block)) &&
             (d->cross_cache = cache_buffer(op, cross_cache, cache_element(d),
                                            &d->cross_block)) &&
             BUFFER(kv, 2 * encoded) && BUFFER(keep, (double)max_batch * Sp) &&
             BUFFER(source_len, max_batch) && BUFFER(slice_ids, encoded / I) &&
             BUFFER(tile_table, rows * Tp / BLOCK) && BUFFER(tile_refs, rows * Tp / BLOCK) &&
             BUFFER(weights, (double)d->weights_stride * TFM__MAX_THREADS) &&
             (!model->tgt_relative_bias ||
              BUFFER(position_bias, (double)d->heads * Tp * TFM__MAX_THREADS));
    else if (ok)
        ok = BUFFER(memory, memory) && BUFFER(memory_rows, rows * S * D) &&
             BUFFER(src, (double)max_batch * S) && BUFFER(src_rows, rows * S) &&
             BUFFER(prefix, rows * T);
    if (ok && o.return_attention) {
        double alignments = rows * T * S, hypotheses = (double)max_batch * o.n_best;
        ok = BUFFER(head_weights, rows * (double)d->heads * S) &&
             BUFFER(alignments, alignments) && BUFFER(result, hypotheses) &&
             BUFFER(result_rows, hypotheses);
        if (ok && o.strategy == TFM_DECODE_BEAM)
            ok = BUFFER(alignments_tmp, alignments) &&
                 BUFFER(fin_alignments, finished * T * S);
    }
    if (ok && o.strategy == TFM_DECODE_BEAM)
        ok = BUFFER(live, max_batch) && BUFFER(done, max_batch) &&
             BUFFER(cand_parent, 2 * rows) && BUFFER(cand_token, 2 * rows) &&
             BUFFER(cand_score, 2 * rows) && BUFFER(rank, finished) &&
             BUFFER(fin_tokens, finished * (T + 1)) &&
             BUFFER(fin_length, finished) && BUFFER(fin_score, finished) &&
             BUFFER(hist_tmp, rows * (T + 1)) &&
             BUFFER(sum_tmp, rows) && BUFFER(table_tmp, rows * Tp / BLOCK);
    if (!ok) {
        tfm__fail_within(op, mark);
        tfm_decoding_free(d);
        return NULL;
    }
    tfm__tape_set_evaluation(d->tape, 1);
    d->rng_seeded = *d->rng;
    keep_token_lists(d, &o);
    d->grouped = o.use_cache && o.strategy != TFM_DECODE_SAMPLE;
    /* the decoder's */
    double weights = L * (8 * D * I + D * (double)(d->d_ff + d->ff_row)) + V * D;
    d->min_rows = weights * sizeof(float) > GROUP_CACHE_BYTES ? WIDE_GROUP_ROWS : GROUP_MIN_ROWS;
    double per_source = L * 2 * I * (Tp + (double)(beam - 1) * BLOCK + Sp) *
                        (double)cache_element(d);
    /* without decoder layers nothing is cached: the whole batch fits */
    d->group_sources = per_source > 0.0 ? (int64_t)(GROUP_CACHE_BYTES / per_source) : max_batch;
    return d;
}

tfm_decoding *tfm_decoding_create(tfm_model *model, const tfm_decode_options *options,
                                  int64_t max_batch, int64_t max_src_len)
{
    return create("tfm_decoding_create", model, options, max_batch, max_src_len, NULL);
}

tfm_decoding *tfm__decoding_create_shared(const char *op, tfm_model *model,
                                          const tfm_decode_options *options, int64_t max_batch,
                                          int64_t max_src_len, const tfm__decode_weights *shared)
{
    if (!shared) {
        tfm__fail(TFM_ERR_NULL, "%s: the shared weights are NULL", op);
        return NULL;
    }
    return create(op, model, options, max_batch, max_src_len, shared);
}

void tfm_decoding_free(tfm_decoding *d)
{
    if (!d)
        return;
    tfm_tape_free(d->tape);
    for (int i = 1; i < TFM__MAX_THREADS; i++)
        tfm_tape_free(d->encode_tapes[i]);
    tfm_rng_free(d->rng);
    tfm__decode_weights_free(d->own_weights);
    void *buffers[] = {d->x, d->h, d->y, d->qkv, d->ctx, d->ff, d->logits, d->weights,
                       d->self_block, d->cross_block, d->kv, d->tile_table, d->tile_refs, d->keep,
                       d->source_len, d->slice_ids, d->memory, d->memory_rows, d->src, d->src_rows,
                       d->prefix, d->hist, d->active, d->order, d->sum, d->probs, d->live, d->done,
                       d->cand_parent, d->cand_token, d->fin_tokens, d->fin_length, d->rank,
                       d->cand_score, d->fin_score, d->hist_tmp, d->sum_tmp, d->table_tmp, d->ends,
                       d->suppress_ids, d->eos_ids, d->is_end, d->processed, d->limit, d->forced,
                       d->bad_words, d->bad_word_lengths, d->head_weights, d->alignments,
                       d->alignments_tmp, d->fin_alignments, (void *)d->result, d->result_rows,
                       d->position_bias};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++)
        free(buffers[i]);
    free(d);
}

/* The trainable attention scales must be usable, as tfm_attention_forward
 * requires. 0 or -1 with the error set. */
static int check_scales(const char *op, const tfm_decoding *d)
{
    for (int32_t l = 0; l < d->layers; l++) {
        const tfm_layer *block = d->model->decoder->children[l];
        const tfm_layer *atts[2] = {block->children[TFM__BLK_SELF_ATTN],
                                    block->children[TFM__BLK_CROSS_ATTN]};
        for (int a = 0; a < 2; a++) {
            float s = atts[a]->scale ? tfm__f32(atts[a]->scale)[0] : 1.0f;
            if (!(s != 0.0f) || !isfinite(s)) {
                tfm__fail(TFM_ERR_NUMERIC, "%s: decoder layer %d's %s scale "
                          "is %g; it must be finite and nonzero", op, (int)l,
                          a ? "cross-attention" : "self-attention", (double)s);
                return -1;
            }
        }
    }
    return 0;
}

static tfm_status not_finite(const char *op, int64_t t)
{
    return tfm__fail(TFM_ERR_NUMERIC, "%s: the model's logits at step %lld are not finite", op,
                     (long long)t);
}

/* --- groups ---------------------------------------------------------------------------- */

static group group_of(const tfm_decoding *d, int64_t first, int64_t count, int worker,
                      int split)
{
    int64_t row = first * d->beam, D = d->d, I = d->inner;
    return (group){first, count, d->x + row * D, d->h + row * D, d->y + row * D,
                   d->qkv + row * 3 * I, d->ctx + row * I, d->ff + row * d->ff_row,
                   d->logits + row * d->vocab,
                   d->weights ? d->weights + worker * d->weights_stride : NULL, /* no cache */
                   d->processed ? d->processed + worker * d->vocab : NULL,
                   d->position_bias ? d->position_bias + worker * d->heads * d->self_tiled : NULL,
                   d->active + row, split, -1};
}

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
 * few enough to make MIN_GROUPS groups, and never fewer than min_rows'
 * worth (GROUP_MIN_ROWS; WIDE_GROUP_ROWS with large weights, as long as
 * that leaves two groups). */
static int64_t sources_per_group(const tfm_decoding *d, int64_t B)
{
    if (!d->grouped)
        return B;
    int64_t even = (B + MIN_GROUPS - 1) / MIN_GROUPS, half = (B + 1) / 2;
    int64_t wide = (d->min_rows + d->beam - 1) / d->beam;
    wide = wide < half ? wide : half;
    int64_t fewest = (GROUP_MIN_ROWS + d->beam - 1) / d->beam;
    fewest = wide > fewest ? wide : fewest;
    int64_t n = even < d->group_sources ? even : d->group_sources;
    return n > fewest ? n : fewest;
}

static tfm_status search(group *g, const decode_run *run)
{
    if (run->d->o.strategy == TFM_DECODE_BEAM)
        return tfm__decode_search_beam(run->d, g, run->S, run->tokens, run->lengths, run->scores);
    return tfm__decode_search_one(run->d, g, run->S, run->lengths, run->logits, run->probs);
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
    return bad >= 0 ? not_finite(run->d->running, bad) : TFM_OK;
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
static tfm_status check_room(const char *op, const char *what, const void *buffer,
                             int64_t count, int64_t needed, const char *formula)
{
    if (buffer && count < needed)
        return tfm__fail(TFM_ERR_SIZE, "%s: %s holds %lld elements; this batch needs %lld "
                         "(%s; tfm_decoding_buffer_sizes tells)", op, what,
                         (long long)count, (long long)needed, formula);
    return TFM_OK;
}

static tfm_status check_run(const char *op, const tfm_decoding *d, const tfm_tensor *src,
                            const int32_t *tokens,
                            int64_t tokens_count, const int32_t *lengths, int64_t lengths_count,
                            const float *scores, int64_t scores_count, const float *logits,
                            int64_t logits_count, const float *probs, int64_t probs_count)
{
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
    if ((status = check_room(op, "tokens", tokens, tokens_count, n.tokens, tokens_formula)) ||
        (status = check_room(op, "lengths", lengths, lengths_count, n.lengths, per_hypothesis)) ||
        (status = check_room(op, "scores", scores, scores_count, n.lengths, per_hypothesis)) ||
        (status = check_room(op, "logits", logits, logits_count, n.logits,
                             "batch * max_length * tgt_vocab")) ||
        (status = check_room(op, "probs", probs, probs_count, n.logits,
                             "batch * max_length * tgt_vocab")))
        return status;
    const int32_t *ids = tfm__i32(src);
    for (int64_t i = 0; i < src->numel; i++)
        if (ids[i] < 0 || ids[i] >= d->model->options.src_vocab)
            return tfm__fail(TFM_ERR_RANGE, "%s: src%s is %d, outside the source vocabulary "
                             "of %lld", op, tfm__index_str(src, i, s, sizeof s), (int)ids[i],
                             (long long)d->model->options.src_vocab);
    if (check_scales(op, d) < 0)
        return tfm_last_status();
    return TFM_OK;
}

/* The sources' ids [n, S] cut to their longest source_len (at least 1)
 * into slice_ids: trailing padding is masked, so the encoder's outputs at
 * the other positions are the same without it (sorted batches of short
 * lines padded to their longest take a fraction of the work). */
static const int32_t *cut_slice(const tfm_decoding *d, int32_t *slice_ids, const int32_t *ids,
                                int64_t first, int64_t n, int64_t S, int64_t *cut)
{
    int64_t longest = 1;
    for (int64_t b = first; b < first + n; b++)
        longest = d->source_len[b] > longest ? d->source_len[b] : longest;
    *cut = longest;
    if (longest == S)
        return ids + first * S;
    for (int64_t b = 0; b < n; b++)
        memcpy(slice_ids + b * longest, ids + (first + b) * S,
               (size_t)longest * sizeof *ids);
    return slice_ids;
}

/* Encodes sources [first, first + n) of ids [B, S] on tape and keeps what
 * the steps read: the cross-attention keys and values (cached: through kv
 * and slice_ids, the thread's parts of d->kv and d->slice_ids) or the
 * memory (recomputed). */
static tfm_status encode_slice(tfm_decoding *d, tfm_tape *tape, const int32_t *ids,
                               int64_t first, int64_t n, int64_t S, float *kv,
                               int32_t *slice_ids)
{
    int64_t cut = S;
    const int32_t *slice_of = d->o.use_cache ? cut_slice(d, slice_ids, ids, first, n, S, &cut)
                                             : ids + first * S;
    tfm_tensor slice;
    tensor_over(&slice, TFM_I32, 2, (const int64_t[]){n, cut}, (void *)slice_of);
    tfm_tape_reset(tape);
    tfm_tensor *mask = NULL;
    if (d->o.src_pad_id >= 0 && !(mask = tfm_mask_padding(tape, &slice, d->o.src_pad_id, TFM_I32)))
        return tfm_last_status();
    tfm_tensor *memory = tfm_model_encode(tape, d->model, &slice, mask, NULL);
    if (!memory)
        return tfm_last_status();
    if (d->o.use_cache)
        tfm__decode_cache_memory(d, tfm__f32(memory), first, n, cut, kv);
    else
        memcpy(d->memory + first * S * d->d, tfm__f32(memory),
               (size_t)memory->numel * sizeof(float));
    return TFM_OK;
}

/* The cached path's sources encoded a source per thread at a time: each
 * source's operations are too small to share among the threads (91
 * tokens at d 256: most ran on one thread while the others waited), and
 * every operation inside runs its shares in turn, as the threads would
 * have, so nothing depends on the thread count. Thread i encodes sources
 * i, i + threads, ... on its own tape, with its own part of d->kv and
 * d->slice_ids. */
typedef struct encode_job {
    tfm_decoding *d;
    const int32_t *ids;
    int64_t B, S, threads;
    int failed;         /* set by the first thread that fails, which fills these */
    tfm_status status;
    char message[512];
} encode_job;

/* Parts [begin, end) of the job: one a worker, unless the pool ran with
 * fewer (tfm_set_num_threads from another thread meanwhile), when a
 * worker takes several in turn. */
static void encode_sources(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    encode_job *j = ctx;
    tfm_decoding *d = j->d;
    int64_t S = j->S;
    for (int64_t i = begin; i < end; i++) {
        tfm_tape *tape = i ? d->encode_tapes[i] : d->tape;
        float *kv = d->kv + i * S * 2 * d->inner;
        int32_t *slice_ids = d->slice_ids + i * S;
        for (int64_t b = i; b < j->B && !__atomic_load_n(&j->failed, __ATOMIC_RELAXED);
             b += j->threads) {
            tfm_status status = encode_slice(d, tape, j->ids, b, 1, S, kv, slice_ids);
            if (status != TFM_OK && !__atomic_exchange_n(&j->failed, 1, __ATOMIC_RELAXED)) {
                j->status = status;
                snprintf(j->message, sizeof j->message, "%s", tfm_last_error());
            }
        }
        tfm_tape_reset(tape);
    }
}

/* The threads the cached path encodes B sources of S tokens on: as many as
 * the run's, d->kv's parts and the sources allow, and whose tapes can be
 * had (a tape that cannot leaves the encoding to fewer). */
static int64_t encoding_threads(tfm_decoding *d, int64_t B, int64_t S)
{
    int64_t parts = (int64_t)(fmin(fmax((double)tokens_per_encoding(d), (double)d->max_src_len),
                                   (double)d->max_batch * (double)d->max_src_len) / (double)S);
    int64_t threads = tfm__threads();
    threads = threads < parts ? threads : parts;
    threads = threads < B ? threads : B;
    for (int64_t i = 1; i < threads; i++) {
        tfm_tape *tape = d->encode_tapes[i];
        if (!tape) {
            tape = tfm_tape_create();
            if (!tape || tfm_tape_set_recording(tape, 0) != TFM_OK) {
                tfm_tape_free(tape);
                return i;
            }
            tfm__tape_set_evaluation(tape, 1);
            d->encode_tapes[i] = tape;
        }
        tfm__tape_set_packed(tape, d->weights_packed->encoder, d->weights_packed->n_encoder);
        tfm__tape_set_adapter(tape, d->adapter);
    }
    return threads > 1 ? threads : 1;
}

/* Encodes src's sources, the encoder's weights packed: the cached path a
 * source per thread at a time, the reference path slices of them as the
 * tape allows. */
static tfm_status encode_slices(tfm_decoding *d, const tfm_tensor *src)
{
    int64_t B = src->shape[0], S = src->shape[1];
    const int32_t *ids = tfm__i32(src);
    if (!d->o.use_cache) {
        int64_t per = sources_per_encoding(d, S);
        for (int64_t first = 0; first < B; first += per) {
            tfm_status status = encode_slice(d, d->tape, ids, first,
                                             B - first < per ? B - first : per, S, NULL, NULL);
            if (status != TFM_OK)
                return status;
        }
        return TFM_OK;
    }
    encode_job job = {d, ids, B, S, encoding_threads(d, B, S), 0, TFM_OK, ""};
    tfm__parallel_for(job.threads, (int)job.threads, encode_sources, &job);
    /* the message on the calling thread, whichever thread failed */
    return job.failed ? tfm__fail(job.status, "%s", job.message) : TFM_OK;
}

/* Which source positions the cached steps attend to: each source's keys
 * that are not src_pad_id (keep), up to its last one (source_len). */
static void mark_sources(tfm_decoding *d, const int32_t *ids, int64_t B, int64_t S)
{
    for (int64_t b = 0; b < B; b++) {
        int64_t len = 0;
        for (int64_t s = 0; s < S; s++) {
            int kept = ids[b * S + s] != d->o.src_pad_id;
            d->keep[b * d->cross_tiled + s] = kept;
            len = kept ? s + 1 : len;
        }
        d->source_len[b] = (int32_t)len;
    }
}

/* Encodes src, a slice of sources at a time, and keeps what the steps
 * read, and which source positions they attend to. */
static tfm_status encode(tfm_decoding *d, const tfm_tensor *src)
{
    const int32_t *ids = tfm__i32(src);
    if (d->o.use_cache)
        mark_sources(d, ids, src->shape[0], src->shape[1]);
    else
        memcpy(d->src, ids, (size_t)src->numel * sizeof *ids);
    return encode_slices(d, src);
}

/* A forced prefix [B, P]: target ids, then -1s. */
static tfm_status check_prefix(const char *op, const tfm_decoding *d, const tfm_tensor *src,
                               const tfm_tensor *prefix)
{
    char s[64];
    if (tfm__check_input(op, "prefix", prefix, TFM_I32) < 0)
        return tfm_last_status();
    if (prefix->ndim != 2 || prefix->shape[0] != src->shape[0] ||
        prefix->shape[1] > d->max_len)
        return tfm__fail(TFM_ERR_SHAPE, "%s: prefix %s must be [batch %lld, at most "
                         "max_length %lld]", op, tfm__shape_str(prefix, s, sizeof s),
                         (long long)src->shape[0], (long long)d->max_len);
    const int32_t *ids = tfm__i32(prefix);
    int64_t P = prefix->shape[1];
    for (int64_t i = 0; i < prefix->numel; i++) {
        int after_padding = i % P > 0 && ids[i - 1] == -1 && ids[i] != -1;
        if (ids[i] < -1 || ids[i] >= d->vocab || after_padding)
            return tfm__fail(TFM_ERR_RANGE, "%s: prefix%s is %d; it must be a target token "
                             "id (below %lld)%s", op, tfm__index_str(prefix, i, s, sizeof s),
                             (int)ids[i], (long long)d->vocab,
                             after_padding ? ", not after a -1" : " or -1");
    }
    return TFM_OK;
}

/* Each source's longest output and its forced prefix, for this run. */
static void per_source(tfm_decoding *d, const tfm_tensor *src, const tfm_tensor *prefix)
{
    int64_t B = src->shape[0], S = src->shape[1], T = d->max_len;
    const int32_t *ids = tfm__i32(src);
    for (int64_t b = 0; b < B; b++) {
        int64_t n = 0;
        for (int64_t s = 0; s < S; s++)
            n += ids[b * S + s] != d->o.src_pad_id;
        double own = floor((double)d->o.max_length_a * (double)n) + (double)d->o.max_length_b;
        d->limit[b] = own < (double)T ? (int32_t)own : (int32_t)T;
    }
    int64_t P = prefix ? prefix->shape[1] : 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            d->forced[b * T + t] = t < P ? tfm__i32(prefix)[b * P + t] : -1;
    d->processing = tfm__decode_processing(d) || prefix || d->constraints;
}

void tfm__decoding_constrain(tfm_decoding *d, const tfm__constraints *const *per_source)
{
    d->constraints = per_source;
}

/* The packed weights as the model's are now (a decoding's own), or the
 * shared ones checked against the model; listed on the tape for the
 * encoding. */
static tfm_status pack_weights(const char *op, tfm_decoding *d)
{
    const tfm__decode_weights *w = d->weights_packed;
    if (d->own_weights) {
        tfm_status status = tfm__decode_weights_repack(d->own_weights, op);
        if (status != TFM_OK)
            return status;
    } else if (w->quantized != d->model->quantized) {
        return tfm__fail(TFM_ERR_STATE, "%s: the model was quantized after its shared weights "
                         "were packed; pack them again", op);
    }
    tfm__tape_set_packed(d->tape, w->encoder, w->n_encoder);
    return TFM_OK;
}

/* Both public runs; op names the one called, in every message. */
static tfm_status run_call(const char *op, tfm_decoding *d, const tfm_tensor *src,
                           const tfm_tensor *prefix, int32_t *tokens, int64_t tokens_count,
                           int32_t *lengths, int64_t lengths_count, float *scores,
                           int64_t scores_count, float *logits, int64_t logits_count,
                           float *probs, int64_t probs_count)
{
    uint64_t mark = tfm__error_mark();
    tfm_status status = check_run(op, d, src, tokens, tokens_count, lengths, lengths_count,
                                  scores, scores_count, logits, logits_count, probs,
                                  probs_count);
    if (status == TFM_OK && prefix)
        status = check_prefix(op, d, src, prefix);
    if (status == TFM_OK && d->running)
        /* a callback's run would overwrite the caches and state this run is using */
        status = tfm__fail(TFM_ERR_STATE, "%s: the decoding is already running (called from "
                           "its own callback); use another decoding", op);
    if (status != TFM_OK)
        return status;
    /* the adapter by name: it may have been removed or replaced since */
    d->adapter = d->o.adapter ? tfm__model_adapter(op, d->model, d->o.adapter) : NULL;
    if (d->o.adapter && !d->adapter)
        return tfm_last_status();
    tfm__tape_set_adapter(d->tape, d->adapter);
    d->running = op;
    d->result_count = 0;
    per_source(d, src, prefix);
    int64_t B = src->shape[0], S = src->shape[1], T1 = d->max_len + 1;
    size_t outputs = (size_t)(B * d->max_len * d->vocab) * sizeof(float);
    if (logits)
        memset(logits, 0, outputs);
    if (probs)
        memset(probs, 0, outputs);
    *d->rng = d->rng_seeded;
    status = pack_weights(op, d);
    if (status == TFM_OK)
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
            if (d->alignments) {
                d->result[b] = alignments_of(d, d->alignments, b);
                d->result_rows[b] = lengths[b] - 1;
            }
        }
    }
    if (status == TFM_OK && d->alignments) {
        d->result_count = sizes_for(d, B).lengths;
        d->result_S = S;
    }
    tfm_tape_reset(d->tape);
    d->running = NULL;
    if (status != TFM_OK)
        tfm__fail_within(op, mark);
    return status;
}

tfm_status tfm_decoding_run(tfm_decoding *d, const tfm_tensor *src, int32_t *tokens,
                            int64_t tokens_count, int32_t *lengths, int64_t lengths_count,
                            float *scores, int64_t scores_count, float *logits,
                            int64_t logits_count, float *probs, int64_t probs_count)
{
    return run_call("tfm_decoding_run", d, src, NULL, tokens, tokens_count, lengths,
                    lengths_count, scores, scores_count, logits, logits_count, probs,
                    probs_count);
}

tfm_status tfm_decoding_run_with_prefix(tfm_decoding *d, const tfm_tensor *src,
                                        const tfm_tensor *prefix, int32_t *tokens,
                                        int64_t tokens_count, int32_t *lengths,
                                        int64_t lengths_count, float *scores,
                                        int64_t scores_count, float *logits,
                                        int64_t logits_count, float *probs,
                                        int64_t probs_count)
{
    return run_call("tfm_decoding_run_with_prefix", d, src, prefix, tokens, tokens_count,
                    lengths, lengths_count, scores, scores_count, logits, logits_count, probs,
                    probs_count);
}

tfm_status tfm_decoding_attention(const tfm_decoding *d, int64_t hypothesis, float *out,
                                  int64_t count, int64_t *target_length, int64_t *source_length)
{
    const char *op = "tfm_decoding_attention";
    if (!d)
        return tfm__fail(TFM_ERR_NULL, "%s: decoding is NULL", op);
    if (!d->alignments || d->result_count == 0)
        return tfm__fail(TFM_ERR_STATE, "%s: %s", op,
                         !d->alignments ? "the decoding was created without return_attention"
                                        : "no run of the decoding has succeeded yet");
    if (hypothesis < 0 || hypothesis >= d->result_count)
        return tfm__fail(TFM_ERR_ARG, "%s: hypothesis %lld is outside the last run's 0..%lld",
                         op, (long long)hypothesis, (long long)d->result_count - 1);
    int64_t rows = d->result_rows[hypothesis], S = d->result_S;
    if (out && count < rows * S)
        return tfm__fail(TFM_ERR_SIZE, "%s: out holds %lld elements; hypothesis %lld's "
                         "alignments need %lld (%lld tokens x %lld source positions)", op,
                         (long long)count, (long long)hypothesis, (long long)(rows * S),
                         (long long)rows, (long long)S);
    for (int64_t i = 0; out && i < rows; i++)
        memcpy(out + i * S, d->result[hypothesis] + i * d->max_src_len, (size_t)S * sizeof *out);
    if (target_length)
        *target_length = rows;
    if (source_length)
        *source_length = S;
    return TFM_OK;
}
