/** @file
 * libtfm decoding: greedy, temperature sampling with top-k and nucleus
 * (top-p) filtering, and beam search, over a tfm_model, for a batch of
 * sources at once. Decoding is incremental: the decoder's self-attention
 * keys and values are cached and the cross-attention keys and values are
 * computed once per source, so n tokens cost n decoder steps. A tfm_decoding
 * holds every buffer for its maximum batch and lengths, so decoding
 * allocates nothing after creation. The model is run without dropout and
 * without recording gradients, whatever its layers' training flags.
 *
 * Threads: a run only reads its model, so several threads may decode one
 * model at once, each with its own decoding (a decoding runs one call at
 * a time), float32 or int8; not while the model trains, loads, is
 * quantized or is changed otherwise. A decoding packs the model's weights
 * for its products at the start of each run (the memory of one copy of
 * the float32 weights per decoding), so a model changed between runs
 * decodes with its new weights.
 *
 * Ownership: a decoding is caller-owned (tfm_decoding_free()) and refers
 * to its model without owning it; the output buffers are the caller's, and
 * nothing the run writes is kept by the library. Errors: a status and
 * message (common.h); a run refused for its arguments or buffer sizes
 * writes nothing into the buffers. */
#ifndef TFM_DECODE_H
#define TFM_DECODE_H

#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A decoder run's buffers and caches for a model; opaque. */
typedef struct tfm_decoding tfm_decoding;

/** How tokens are chosen: one of the TFM_DECODE_ values. */
typedef int32_t tfm_decode_strategy;
/** The strategies. */
enum {
    TFM_DECODE_GREEDY = 0, /**< the most likely token at each step */
    TFM_DECODE_SAMPLE = 1, /**< drawn, with temperature, top-k and top-p */
    TFM_DECODE_BEAM = 2    /**< beam search */
};

/** Which beam search: one of the TFM_BEAM_RULES_ values. */
typedef int32_t tfm_beam_rules;
/** The beam searches. */
enum {
    /** CTranslate2's: the best min(beam_size, finished hypotheses still
     * awaited) continuations each step; those ending in an end token
     * finish, the others live on; a source stops at round(beam_size *
     * patience) finished; lengths count the tokens generated. */
    TFM_BEAM_RULES_CTRANSLATE2 = 0,
    /** Hugging Face transformers' beam_search (BeamSearchScorer): the best
     * 2 * beam_size continuations each step, in rank order an end token
     * within the first beam_size finishes a hypothesis, the others refill
     * beam_size live ones; at most round(beam_size * patience) finished
     * hypotheses are kept (a better one replaces the worst); a source stops
     * as early_stopping says, and at its length limit its live hypotheses
     * join the finished ones; a hypothesis' length counts bos_id and not
     * its end token; ties go to the later finished. */
    TFM_BEAM_RULES_TRANSFORMERS = 1
};

/** When a TFM_BEAM_RULES_TRANSFORMERS search stops (transformers'
 * early_stopping), once it has its finished hypotheses: */
enum {
    /** when the best live score / (its length ** length_penalty) cannot
     * beat the worst finished (early_stopping false) */
    TFM_EARLY_STOPPING_HEURISTIC = 0,
    TFM_EARLY_STOPPING_TRUE = 1, /**< at once (early_stopping true) */
    /** as HEURISTIC but with the length limit in place of the live
     * length when length_penalty > 0 (early_stopping "never") */
    TFM_EARLY_STOPPING_NEVER = 2
};

/** What the caches' keys and values are kept in: one of the TFM_CACHE_
 * values. */
typedef int32_t tfm_cache_precision;
/** The caches' precisions. */
enum {
    /** bfloat16 when the model is quantized (tfm_model_quantize; as
     * tfm_decoding_create finds it) and its products run in int8 on this
     * CPU, else float32 */
    TFM_CACHE_AUTO = 0,
    TFM_CACHE_FLOAT32 = 1, /**< float32: as the recomputed path computes them */
    /** bfloat16: each key and value rounded to nearest even (8
     * significant bits, float32's range) as it is cached, half the bytes
     * to read; on CPUs with AVX512_BF16 the attention multiplies them in
     * bfloat16 pairs, its queries and weights rounded too (see
     * tfm_decode_options.cache_precision) */
    TFM_CACHE_BFLOAT16 = 2
};

/** A run's tokens as they are chosen (the options' callback): source's
 * token at `position` of its output (1 is the first after bos_id), called
 * in order of positions for each source. Greedy decoding and sampling call
 * it at each step with each source's new token (a forced one too), beam
 * search when a source's search has ended, with each token of its best
 * hypothesis. Grouped sources decode on libtfm's threads, so calls for
 * different sources may come at once from different threads. Non-zero
 * stops that source: greedy and sampling end its output at this token,
 * beam search makes no more calls for it. The callback may not run the
 * decoding that calls it (TFM_ERR_STATE); other decodings it may. */
typedef int (*tfm_decode_callback)(void *user, int64_t source, int32_t token,
                                   int64_t position);

/** A decoding's options. Fill with tfm_decode_options_init(), then change
 * fields; the library reads only the fields of the size the caller
 * compiled with. */
typedef struct tfm_decode_options {
    uint32_t struct_size;         /**< set by tfm_decode_options_init */
    tfm_decode_strategy strategy; /**< greedy, sample or beam */
    int32_t max_length;           /**< tokens generated after bos_id */
    int32_t bos_id;               /**< the first decoder input */
    int32_t eos_id;               /**< ends a sequence; -1: none, run max_length */
    /** masks these source keys (a source of padding only: nothing to
     * attend to, see nn.h); -1: no padding */
    int32_t src_pad_id;
    /** SAMPLE: logits / temperature, then the top_k most likely (0: all),
     * then the smallest set whose probability reaches top_p (1: all). */
    float temperature;
    int32_t top_k;                /**< SAMPLE: keep the k most likely; 0: all */
    float top_p;                  /**< SAMPLE: nucleus mass in (0, 1]; 1: all */
    uint64_t seed;                /**< SAMPLE: the same seed gives the same tokens */
    /** BEAM: beam_size hypotheses per source, ranked by sum of log
     * probabilities / length^length_penalty; n_best <= beam_size returned. */
    int32_t beam_size;
    float length_penalty;         /**< BEAM: the length's exponent in the ranking */
    int32_t n_best;               /**< BEAM: hypotheses returned per source */
    /** 0 recomputes the whole prefix at every step (the tutorials' way),
     * for reference and testing; 1 (default) uses the caches. */
    int32_t use_cache;

    /* The logits processors, as Hugging Face's generate applies them
     * (logits.c): on the logits before greedy's argmax and before
     * sampling's temperature, top-k and top-p; on the log probabilities
     * (log_softmax of the logits) in beam search, whose scores then add up
     * the processed values. In this order: repetition_penalty,
     * no_repeat_ngram_size, min_length, suppress_ids; renormalize_logits
     * after them all. "The tokens so far" are the hypothesis' decoder
     * inputs: bos_id, then the tokens generated.
     * A token a processor bans (-inf) is never chosen; a beam candidate
     * banned is not kept, and a sequence whose every token is banned ends
     * before that step (greedy, sampling: bos_id and the tokens before). */

    /** End tokens cannot be chosen while fewer than min_length tokens have
     * been generated after bos_id (Hugging Face's min_new_tokens; its
     * min_length counts bos_id too); 0 (default) to max_length. */
    int32_t min_length;
    /** The tokens so far (bos_id included) are penalised once each: a
     * logit (beam: log probability) above 0 divided by it, below 0
     * multiplied by it. Positive; 1 (default): none. */
    float repetition_penalty;
    /** A token that would repeat an n-gram of this size already among the
     * tokens so far (bos_id included) is banned; 0 (default): none. */
    int32_t no_repeat_ngram_size;
    /** n_suppress_ids target token ids never chosen. Read by
     * tfm_decoding_create only (the decoding keeps a copy); NULL with 0. */
    const int32_t *suppress_ids;
    int32_t n_suppress_ids; /**< the count of suppress_ids */
    /** n_eos_ids more end tokens beside eos_id: a sequence ends at any of
     * them (Hugging Face's list of eos_token_id). Read by
     * tfm_decoding_create only (copied); NULL with 0. */
    const int32_t *eos_ids;
    int32_t n_eos_ids;      /**< the count of eos_ids */

    /** A source of n tokens (not counting src_pad_id's) gets at most
     * floor(max_length_a * n) + max_length_b tokens, and never more than
     * max_length (fairseq's and CTranslate2's max_len_a and max_len_b).
     * max_length_a >= 0 (default 0); max_length_b >= 1, default INT32_MAX:
     * max_length alone. */
    float max_length_a;
    int32_t max_length_b;   /**< see max_length_a */
    /** The first token generated, forced (Hugging Face's
     * ForcedBOSTokenLogitsProcessor, as multilingual models need for the
     * target language): every other token banned at the first step, the
     * forced one's value 0 (beam: log probability 0). Applied after
     * min_length, before suppress_ids; -1 (default): none. */
    int32_t forced_bos_id;
    /** BEAM: a source's search stops when round(beam_size * patience)
     * hypotheses (at least 1) have finished; until then beam_size live
     * hypotheses continue (CTranslate2's patience). 1 (default): stop at
     * beam_size finished; from 0.01 to 64. */
    float patience;
    /** Token sequences that must not be generated (Hugging Face's
     * bad_words_ids, NoBadWordsLogitsProcessor): n_bad_words sequences,
     * bad_word_lengths[i] tokens each (>= 1), one after another in
     * bad_words. The last token of one is banned where the tokens so far
     * end with its others (a sequence of one token: always). Applied after
     * no_repeat_ngram_size. Read by tfm_decoding_create only (copied);
     * NULL with 0. */
    const int32_t *bad_words;
    const int32_t *bad_word_lengths; /**< each sequence's token count */
    int32_t n_bad_words;    /**< the count of sequences */
    /** Called with each source's tokens as they are chosen (see
     * tfm_decode_callback), with callback_user; NULL (default): none. */
    tfm_decode_callback callback;
    void *callback_user;    /**< passed to callback as it is */
    /** 1: each run keeps, per returned hypothesis, the cross-attention
     * weights of its chosen tokens (alignments; tfm_decoding_attention
     * reads them): the last decoder layer's, averaged over its heads
     * (CTranslate2's return_attention over its default alignment layer,
     * with all heads). 0 (default): none kept, nothing allocated. */
    int32_t return_attention;
    /** The token forced as the last a source may generate (at its length
     * limit, max_length or max_length_a/_b's, less one: Hugging Face's
     * ForcedEOSTokenLogitsProcessor), every other banned, its value 0
     * (beam: log probability 0). Applied after forced_bos_id; -1 (default):
     * none. */
    int32_t forced_eos_id;
    /** BEAM: whose beam search (TFM_BEAM_RULES_; default CTRANSLATE2). */
    tfm_beam_rules beam_rules;
    /** BEAM with TFM_BEAM_RULES_TRANSFORMERS: when it stops
     * (TFM_EARLY_STOPPING_; default HEURISTIC). */
    int32_t early_stopping;
    /** BEAM: 1 renormalises each step's processed log probabilities of a
     * hypothesis (a log_softmax over the tokens left; Hugging Face's
     * renormalize_logits, LogitNormalization after every processor), so
     * the mass of the tokens a processor banned goes to the others and
     * the scores add up log probabilities again; a step whose every token
     * is banned stays banned. Greedy decoding and sampling ignore it:
     * their tokens would be the same (argmax and softmax do not see a
     * shift), and their scores are the unprocessed model's. 0 (default)
     * or 1. */
    int32_t renormalize_logits;
    /** With use_cache: what the caches of the decoder's self- and
     * cross-attention keys and values hold (TFM_CACHE_; default AUTO:
     * bfloat16 for a quantized model whose products run in int8 (on a
     * CPU with AVX2, at its size), which no longer hide the time the
     * attention spends reading its caches, else float32;
     * CTranslate2's int8_bfloat16 makes the same trade). With bfloat16
     * each key and value is rounded to nearest even as it is cached (8
     * significant bits, 7 stored: a relative error of at most 2^-9;
     * infinities and NaNs stay non-finite); queries, scores, the softmax
     * and the weighted sums stay float32, except on a CPU with
     * AVX512_BF16 (at x86-64-v4) for heads of 8 or a multiple of 16
     * columns, where the attention multiplies in bfloat16 pairs
     * (VDPBF16PS, float32 sums) and so also rounds each query and each
     * softmax weight to bfloat16 as it multiplies (the logits move by
     * about 1e-3, relative). The caches take half the bytes, so a group
     * of sources decoded on one thread holds twice as many.
     * The recomputed path (use_cache 0) has no caches and ignores it. */
    tfm_cache_precision cache_precision;
    /** The model's adapter (adapters.h) the decoding applies, by name;
     * NULL (default): none, whichever the model's forwards use. Looked up
     * at every run: TFM_ERR_ARG when the model has none by that name. */
    const char *adapter;
} tfm_decode_options;

/** Greedy, max_length 100, bos 1, eos 2, no source padding, temperature 1,
 * top_k 0, top_p 1, seed 0, beam_size 4, length_penalty 1, n_best 1, cache;
 * no processors: min_length 0, repetition_penalty 1, no_repeat_ngram_size
 * 0, no suppressed tokens, no end tokens beside eos_id; max_length_a 0,
 * max_length_b INT32_MAX, forced_bos_id -1, patience 1; no bad words, no
 * callback; no attention kept; forced_eos_id -1, CTranslate2's beam
 * search (early_stopping HEURISTIC, read only by transformers'); no
 * renormalize_logits; cache_precision AUTO. */
TFM_API void tfm_decode_options_init_sized(tfm_decode_options *options,
                                           uint32_t struct_size);
/** The defaults, for a struct of the size this program was compiled with. */
#define tfm_decode_options_init(options)                                      \
    tfm_decode_options_init_sized((options), (uint32_t)sizeof *(options))
/** Sets options' bos_id, eos_id and src_pad_id to the model's special
 * tokens (tfm_model_options' bos_id, eos_id, pad_id) where the model has
 * them set, leaving each the model lacks and every other field as it was:
 * call after tfm_decode_options_init, so a padded batch decodes as the same
 * sources unpadded without the caller repeating the ids; and lowers
 * max_length to the model's max_tgt_len - 1 when it is more (the default
 * 100 fits any model then). A model from
 * tfm_model_from_pretrained also sets its published decoding defaults
 * (generation_config.json, or config.json where it keeps them):
 * strategy (beam when num_beams > 1, sample with do_sample), max_length
 * (transformers' less the start token, at most the positions the model
 * has), beam_size, length_penalty, temperature, top_k, top_p and, as far
 * as the caller's struct reaches, min_length, repetition_penalty,
 * no_repeat_ngram_size, the further eos ids, forced_bos_id, bad words
 * (pointing into the model: valid while it lives), forced_eos_id, and
 * transformers' beam search (TFM_BEAM_RULES_TRANSFORMERS) with its
 * early_stopping, and renormalize_logits. TFM_ERR_NULL, or
 * TFM_ERR_ARG for an options struct too short to hold them. */
TFM_API tfm_status tfm_decode_options_from_model(const tfm_model *model,
                                                 tfm_decode_options *options);

/** Decoding for up to max_batch sources of up to max_src_len tokens. The
 * model must outlive it. max_length must not exceed the model's
 * max_tgt_len - 1. Caller-owned: free with tfm_decoding_free(). NULL with
 * TFM_ERR_NULL, TFM_ERR_ARG (an option out of range, named) or
 * TFM_ERR_NOMEM. */
TFM_API tfm_decoding *tfm_decoding_create(tfm_model *model,
                                        const tfm_decode_options *options,
                                        int64_t max_batch, int64_t max_src_len);
/** Frees the decoding and its buffers (not the model); NULL is a no-op. */
TFM_API void tfm_decoding_free(tfm_decoding *decoding);

/** Decodes src [B, S] (int32), B <= max_batch. Each buffer comes with its
 * size in elements, which must be at least what this batch needs
 * (tfm_decoding_buffer_sizes gives the counts; TFM_ERR_SIZE, naming the
 * count needed, when one is smaller); larger buffers are fine. For each
 * source b and hypothesis h < n_best (1 unless beam search), writes:
 *   tokens[(b * n_best + h) * (max_length + 1) + i]: bos_id, then the
 *     generated tokens (eos_id included when produced), then -1 up to
 *     max_length + 1 entries;
 *   lengths[b * n_best + h]: the tokens before the -1s;
 *   scores[b * n_best + h]: the sum of the chosen tokens' log
 *     probabilities under the model (temperature 1, unfiltered, before
 *     the logits processors); beam: of the processed log probabilities
 *     (as Hugging Face's beam scores; renormalised with
 *     renormalize_logits), divided by length^length_penalty;
 *     may be NULL.
 * When beam search finds fewer distinct hypotheses than n_best, the rest
 * are all -1 with length 0 and score -inf.
 * Greedy and sampling only (TFM_ERR_ARG with beam search), each may be
 * NULL, [B, max_length, tgt_vocab], zeros after a sequence has ended:
 *   logits: the model's logits at each step;
 *   probs: the distribution the token was drawn from (after the logits
 *     processors, then temperature, top-k and top-p). */
TFM_API tfm_status tfm_decoding_run(tfm_decoding *decoding, const tfm_tensor *src,
                                    int32_t *tokens, int64_t tokens_count,
                                    int32_t *lengths, int64_t lengths_count,
                                    float *scores, int64_t scores_count,
                                    float *logits, int64_t logits_count,
                                    float *probs, int64_t probs_count);

/** tfm_decoding_run with a forced target prefix per source: prefix
 * [B, P] int32 (B as src's), row b the first tokens source b generates
 * after bos_id, then -1s to pad it (a row of -1s forces nothing). A prefix
 * token is forced as Hugging Face's ForceTokensLogitsProcessor does
 * (after every other processor: every other token banned, the forced
 * one's value 0), so it is in tokens and counts towards the lengths,
 * min_length and the scores like a chosen token; an end token in it ends
 * the sequence there. P may not exceed max_length; NULL prefix: none.
 * TFM_ERR_SHAPE for a prefix not [B, P], TFM_ERR_RANGE for a token outside
 * the target vocabulary or a token after a -1, as well as
 * tfm_decoding_run's errors. */
TFM_API tfm_status tfm_decoding_run_with_prefix(
    tfm_decoding *decoding, const tfm_tensor *src, const tfm_tensor *prefix, int32_t *tokens,
    int64_t tokens_count, int32_t *lengths, int64_t lengths_count, float *scores,
    int64_t scores_count, float *logits, int64_t logits_count, float *probs,
    int64_t probs_count);

/** The element counts tfm_decoding_run needs for a batch of `batch` sources
 * (1 <= batch <= max_batch): tokens batch * n_best * (max_length + 1);
 * lengths and scores batch * n_best; logits and probs batch * max_length *
 * tgt_vocab (0 with beam search, which writes none). Any out pointer may
 * be NULL. */
TFM_API tfm_status tfm_decoding_buffer_sizes(const tfm_decoding *decoding,
                                             int64_t batch, int64_t *tokens,
                                             int64_t *lengths, int64_t *scores,
                                             int64_t *logits);

/** The alignments of the last run of a decoding created with
 * return_attention: hypothesis `hypothesis` (as the run's lengths index
 * it: b * n_best + h, b for greedy decoding and sampling) gets
 * target_length = its length - 1 rows (one per token generated, forced
 * ones too: row i for the token at position i + 1 of its tokens) of
 * source_length = the run's S weights, the cross-attention of the last
 * decoder layer, averaged over its heads, with which the decoder chose
 * that token (padded source keys 0). Writes them into out [target_length,
 * source_length] when out is not NULL (count elements, at least that,
 * else TFM_ERR_SIZE); either length pointer may be NULL. A hypothesis
 * beam search did not find (length 0) has none. TFM_ERR_STATE without
 * return_attention or before a run has succeeded, TFM_ERR_ARG for a
 * hypothesis outside the last run's. */
TFM_API tfm_status tfm_decoding_attention(const tfm_decoding *decoding, int64_t hypothesis,
                                          float *out, int64_t count, int64_t *target_length,
                                          int64_t *source_length);

#ifdef __cplusplus
}
#endif

#endif
