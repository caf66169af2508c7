/** @file
 * libtfm's translator: text in, text out, in one call, from any number of
 * threads. A tfm_translator is opened from a model file (tfm_model_save,
 * tfm-translate) or a published folder (tfm_model_from_pretrained), in
 * float32 or int8, or made over a caller's tfm_model. It owns what turns
 * text into text: the tokenizers, the ids around a source, the languages
 * and the decoding defaults (tfm_translator_decode_options: the same in C,
 * Python and tfm-translate).
 *
 * tfm_translate() translates n texts at once: each is tokenized, cut to
 * the model's longest source as transformers truncates (the result says
 * so), the texts are sorted by length and decoded in batches of at most
 * max_batch_tokens source tokens, and the results come back in the input
 * order. tfm_translator_submit() queues one text with its own options and
 * returns at once; the translator's scheduler threads gather pending
 * requests into batches (by tokens and a maximum wait) and finish each
 * through a callback or tfm_request_wait(), with per-token streaming,
 * cancelling and deadlines. A translation never depends on what it was
 * batched with, on padding or on the number of threads: bit for bit, the
 * same text with the same options gives the same ids and scores alone or
 * in any batch.
 *
 * Threads: every call on one translator may run from any number of
 * threads at once (one copy of the weights, float32 or int8). A
 * translator made over a caller's model reads that model: it must
 * outlive the translator, and must not be trained, loaded into or
 * quantized while the translator lives.
 *
 * Errors: a status and message (common.h); a translator's scheduler
 * reports a request's failure in the request (tfm_request_result). The
 * library never prints, exits or aborts. */
#ifndef TFM_TRANSLATE_H
#define TFM_TRANSLATE_H

#include "decode.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A model with its text and decoding defaults, for translating; opaque. */
typedef struct tfm_translator tfm_translator;
/** The results of one tfm_translate() call or one request; opaque. */
typedef struct tfm_translation tfm_translation;
/** One text queued by tfm_translator_submit(); opaque. */
typedef struct tfm_request tfm_request;

/** How a translator is opened. Fill with tfm_translator_options_init(),
 * then change fields; the library reads only the fields of the size the
 * caller compiled with. */
typedef struct tfm_translator_options {
    uint32_t struct_size; /**< set by tfm_translator_options_init */
    /** 1: the model's layers and output projection in int8
     * (tfm_model_quantize with TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR;
     * a model file already quantized is int8 whatever this says). 0
     * (default): as the file or model is. */
    int32_t int8;
    /** A multilingual model's languages, by their codes as its tokenizer
     * spells them (tfm_model_set_languages); NULL (default): the model's. */
    const char *source_language;
    const char *target_language; /**< see source_language */
    /** Source tokens in one decoding run, padding included (sources of
     * similar lengths go together): 1 to 2^24, default 4,096. */
    int64_t max_batch_tokens;
    /** Sources in one decoding run: 1 to 4,096, default 64. */
    int32_t max_batch;
    /** The scheduler's threads, each decoding one batch at a time
     * (started at the first tfm_translator_submit), on its share of
     * libtfm's threads (tfm_set_num_threads; at least one each); what is
     * ready to decode is spread over the idle ones. 0 (default): as many
     * as libtfm's threads then, each on one, which serves many callers
     * fastest (several small batches at once keep every core busy, where
     * one batch's tail leaves some idle); 1 to 64: that many. */
    int32_t workers;
    /** How long the scheduler waits for a batch to fill before decoding
     * what it has, in milliseconds: 0 to 60,000, default 5. */
    int32_t max_wait_ms;
    /** Requests submitted and not yet taken by a worker, at most: past it
     * tfm_translator_submit() fails with TFM_ERR_BUSY. 1 to 2^20,
     * default 1,024. */
    int32_t queue_capacity;
    /** 1 (default): on a model whose tokenizers hold the placeholder
     * pieces (tfm_placeholder; tfm-translate --train makes them), each
     * text's spans that must pass unchanged (printf directives, Python and
     * shell fields, tags, entities) become placeholders, the decoding writes
     * each exactly as often as the source holds it (unnumbered printf
     * directives in their order; every decoding path), and the
     * translation's text (and a request's stream) has the spans back. 0:
     * the text as it is, unconstrained. Without the pieces: no effect. */
    int32_t keep_placeholders;
} tfm_translator_options;

/** The defaults above. */
TFM_API void tfm_translator_options_init_sized(tfm_translator_options *options,
                                               uint32_t struct_size);
/** The defaults, for a struct of the size this program was compiled with. */
#define tfm_translator_options_init(options)                                  \
    tfm_translator_options_init_sized((options), (uint32_t)sizeof *(options))

/** A translator from a model file or a published model's folder (a path
 * that is a directory), with options (NULL: the defaults). Caller-owned:
 * free with tfm_translator_free(). NULL with TFM_ERR_NULL, the loader's
 * errors (TFM_ERR_IO, TFM_ERR_FORMAT, ...), TFM_ERR_STATE for a model
 * without tokenizers, TFM_ERR_ARG for an option out of range or an
 * unknown language (named), TFM_ERR_NOMEM. */
TFM_API tfm_translator *tfm_translator_open(const char *path,
                                            const tfm_translator_options *options);
/** A translator over model, which must hold its tokenizers
 * (tfm_model_set_tokenizers) and outlive the translator, unchanged while
 * it lives; options' int8 and languages are refused here (quantize and
 * choose the languages on the model first). Errors as
 * tfm_translator_open(). */
TFM_API tfm_translator *tfm_translator_create(tfm_model *model,
                                              const tfm_translator_options *options);
/** Stops the scheduler (requests not yet decoded fail with
 * TFM_ERR_CANCELLED, those being decoded are finished), then frees the
 * translator (and the model it opened, not one it was made over). Its
 * requests may be freed before or after (their results stay readable),
 * not while it runs: a request that has not finished must not be
 * cancelled or freed from another thread during this call, and the call
 * must not come from the translator's own callbacks (on_token, on_done).
 * NULL is a no-op. */
TFM_API void tfm_translator_free(tfm_translator *translator);

/** The translator's model (owned by it, or the one it was made over). */
TFM_API const tfm_model *tfm_translator_model(const tfm_translator *translator);

/** The decoding options a translation uses when given none: the model's
 * special tokens and published defaults (tfm_decode_options_from_model),
 * max_length at most the model's max_tgt_len - 1, and the ids that are
 * never text suppressed (the start token, padding, ids past the target
 * tokenizer's pieces). A model trained here without published defaults
 * decodes with beam 4 and at most twice its source's length plus 10
 * tokens (max_length_a 2, max_length_b 10). Fill with
 * tfm_decode_options_init() first; pointer fields point into the
 * translator (valid while it lives). TFM_ERR_NULL, TFM_ERR_ARG for a
 * struct too short. */
TFM_API tfm_status tfm_translator_decode_options(const tfm_translator *translator,
                                                 tfm_decode_options *options);

/** A token of a request's translation as it is chosen (greedy decoding
 * and sampling: at each step; beam search: when the search has ended):
 * text is the translation so far (length bytes, NUL-terminated, valid
 * during the call). Non-zero stops the translation there. Called on a
 * scheduler thread. */
typedef int (*tfm_translate_token_fn)(void *user, int32_t token, const char *text,
                                      int64_t length);
/** A request has finished (done, failed, cancelled or past its deadline):
 * called once, on a scheduler thread, before tfm_request_wait() returns
 * for it. It may read the request (tfm_request_result; tfm_request_wait
 * returns at once) and free it, and submit others; it must not free the
 * translator. */
typedef void (*tfm_request_done_fn)(void *user, tfm_request *request);

/** A translation's options. Fill with tfm_translate_options_init(), then
 * change fields; the library reads only the fields of the size the caller
 * compiled with. */
typedef struct tfm_translate_options {
    uint32_t struct_size; /**< set by tfm_translate_options_init */
    /** The decoding (strategy, beam size, lengths, n_best, sampling seed,
     * return_attention for alignments, ...), from
     * tfm_translator_decode_options() and changed; its callback must be
     * NULL (use on_token). NULL (default): the translator's defaults. */
    const tfm_decode_options *decode;
    /** A multilingual model's languages for this translation; NULL
     * (default): the translator's. */
    const char *source_language;
    const char *target_language; /**< see source_language */
    /** Text every translation starts with, forced
     * (tfm_decoding_run_with_prefix), NULL (default): none. */
    const char *target_prefix;
    /** tfm_translator_submit only: the request fails with TFM_ERR_TIMEOUT
     * when not finished this many milliseconds after its submission (a
     * batch being decoded stops the request's tokens); 0 (default): no
     * deadline. */
    int64_t deadline_ms;
    /** tfm_translator_submit only: called with each token as it comes
     * (see tfm_translate_token_fn), with user; NULL (default): none. */
    tfm_translate_token_fn on_token;
    /** tfm_translator_submit only: called when the request has finished,
     * with user; NULL (default): none (wait with tfm_request_wait). */
    tfm_request_done_fn on_done;
    void *user; /**< passed to on_token and on_done as it is */
    /** The model's adapter (adapters.h) this translation applies, by name;
     * NULL (default): options.decode's, else none. Requests with
     * different adapters are decoded apart, over the one model. */
    const char *adapter;
    /** A glossary: n_glossary terms, glossary[2 i] a source term and
     * glossary[2 i + 1] the target text its translation must hold
     * (UTF-8, not empty; read during the call, copied by submit). Where a
     * text holds a source term (its bytes, ASCII letters in either case,
     * not inside a word: no letter, digit or non-ASCII character just
     * before or after it), the decoding writes the target term's tokens
     * (as the target tokenizer encodes it alone: a word of its own) at
     * least once: once it starts them it is forced through, and the end
     * waits for them, forced in when the remaining length needs it (every
     * decoding path). The first 240 terms a text holds count. A term the
     * decoding could not place (too long for max_length) is named by
     * tfm_translation_unplaced(). NULL with 0 (default): none. */
    const char *const *glossary;
    int32_t n_glossary; /**< the count of glossary's terms (pairs) */
    /** More spans that pass through a translation unchanged, beside the
     * placeholder rules' (see tfm_translator_options.keep_placeholders;
     * no effect without): n_literals strings (not empty), found where a
     * text spells them exactly, the longest first, before the rules (read
     * during the call, copied by submit). NULL with 0 (default): none. */
    const char *const *literals;
    int32_t n_literals; /**< the count of literals */
} tfm_translate_options;

/** The defaults above. */
TFM_API void tfm_translate_options_init_sized(tfm_translate_options *options,
                                              uint32_t struct_size);
/** The defaults, for a struct of the size this program was compiled with. */
#define tfm_translate_options_init(options)                                   \
    tfm_translate_options_init_sized((options), (uint32_t)sizeof *(options))

/** Translates texts[0, n) (UTF-8, NUL-terminated) with options (NULL: the
 * defaults) on the calling thread, into *out (caller-owned: free with
 * tfm_translation_free()). A blank text (whitespace only, as the
 * tokenizer reads it) gives an empty translation (score 0).
 * TFM_ERR_NULL, TFM_ERR_ARG (options out of range, named; on_token or
 * on_done or deadline_ms set), TFM_ERR_SIZE (n beyond 2^31), decoding's
 * errors, TFM_ERR_NOMEM; *out is NULL on error. */
TFM_API tfm_status tfm_translate(tfm_translator *translator, const char *const *texts,
                                 int64_t n, const tfm_translate_options *options,
                                 tfm_translation **out);

/** The texts a result holds (1 for a request's). */
TFM_API int64_t tfm_translation_count(const tfm_translation *translation);
/** The hypotheses each text has (the decoding's n_best, 1 unless beam
 * search). */
TFM_API int32_t tfm_translation_n_best(const tfm_translation *translation);
/** Text i's hypothesis h (0: the best) as text, NUL-terminated, owned by
 * the translation; NULL with TFM_ERR_NULL or TFM_ERR_RANGE. A hypothesis
 * beam search did not find is "". */
TFM_API const char *tfm_translation_text(const tfm_translation *translation, int64_t i,
                                         int32_t h);
/** Its target ids as decoding wrote them (the start token, the tokens
 * generated, the end token when produced), *count of them; NULL with the
 * error as tfm_translation_text(). */
TFM_API const int32_t *tfm_translation_ids(const tfm_translation *translation, int64_t i,
                                           int32_t h, int64_t *count);
/** Its score (tfm_decoding_run's scores); NaN with the error as
 * tfm_translation_text(). */
TFM_API float tfm_translation_score(const tfm_translation *translation, int64_t i, int32_t h);
/** Text i's source tokens as decoded (the ids around it included: at most
 * the model's max_src_len) into *tokens, and into *truncated 1 when the
 * text was cut to fit them (only as much of a long text is read as its
 * kept tokens need), else 0; either may be NULL. TFM_ERR_NULL,
 * TFM_ERR_RANGE. */
TFM_API tfm_status tfm_translation_source_tokens(const tfm_translation *translation, int64_t i,
                                                 int64_t *tokens, int32_t *truncated);
/** Its alignments, when the decoding options asked for them
 * (return_attention): [target_length, source_length] floats owned by the
 * translation, as tfm_decoding_attention() gives them over the text's own
 * source_length tokens (tfm_translation_source_tokens); NULL with
 * TFM_ERR_STATE when not asked, or the errors above. */
TFM_API const float *tfm_translation_alignment(const tfm_translation *translation, int64_t i,
                                               int32_t h, int64_t *target_length,
                                               int64_t *source_length);
/** The glossary terms (their indices in tfm_translate_options.glossary)
 * text i's hypothesis h holds in its source but could not place, into
 * *terms (owned by the translation; NULL when none) and *count.
 * TFM_ERR_NULL, TFM_ERR_RANGE. */
TFM_API tfm_status tfm_translation_unplaced(const tfm_translation *translation, int64_t i,
                                            int32_t h, const int32_t **terms, int32_t *count);
/** Frees a result of tfm_translate(); NULL is a no-op (a request's result
 * is the request's: tfm_request_free()). */
TFM_API void tfm_translation_free(tfm_translation *translation);

/** Queues text (NUL-terminated) with options (NULL: the defaults) for the
 * translator's scheduler, and returns at once with the request
 * (caller-owned: free with tfm_request_free()). NULL with TFM_ERR_BUSY
 * when queue_capacity requests are waiting (try again later), or as
 * tfm_translate() refuses its arguments. */
TFM_API tfm_request *tfm_translator_submit(tfm_translator *translator, const char *text,
                                           const tfm_translate_options *options);
/** Waits until the request has finished; its status (as
 * tfm_request_result). */
TFM_API tfm_status tfm_request_wait(tfm_request *request);
/** 1 when the request has finished, 0 while it waits or decodes. */
TFM_API int32_t tfm_request_done(const tfm_request *request);
/** A finished request's status and, when TFM_OK, its result into *result
 * (owned by the request; may be NULL): TFM_ERR_CANCELLED,
 * TFM_ERR_TIMEOUT, or the decoding's error, whose message
 * tfm_request_error() keeps. TFM_ERR_STATE while it has not finished. */
TFM_API tfm_status tfm_request_result(const tfm_request *request,
                                      const tfm_translation **result);
/** A finished request's error message ("" when it succeeded). */
TFM_API const char *tfm_request_error(const tfm_request *request);
/** Asks the request to stop: one not yet decoding fails at once with
 * TFM_ERR_CANCELLED; one being decoded stops its tokens and then fails so.
 * A finished request is left as it is. */
TFM_API void tfm_request_cancel(tfm_request *request);
/** Frees the request: one that has not finished is cancelled, and
 * released by the scheduler once it has (its on_done still called).
 * NULL is a no-op. */
TFM_API void tfm_request_free(tfm_request *request);

/** Placeholders: the spans of a message that must pass through a
 * translation unchanged (printf directives as gettext's c-format reads
 * them, Python's %(name)s and {name} fields, shell $VAR and ${VAR},
 * XML/HTML tags and entities) become placeholder pieces, "\uFF5F1\uFF60"
 * to "\uFF5F16\uFF60" in the order the spans come, which a model trained
 * with them (tfm-translate --train) learns to place. */
#define TFM_PLACEHOLDERS 16

/** Placeholder index's text (index 0 to TFM_PLACEHOLDERS - 1), static;
 * NULL outside. */
TFM_API const char *tfm_placeholder(int32_t index);

/** A training pair with its placeholders: when source and target hold
 * the same spans (as many of each text, at most TFM_PLACEHOLDERS, at
 * least one), source's spans become placeholders 1, 2, ... in their order
 * and target's the number of the source span it matches (the k-th span
 * of a text the k-th of that text in source), into source_out and
 * target_out, and *count their number; else the pair's text unchanged
 * and *count 0. Each out holds at least 4 * strlen(its text) + 1 bytes.
 * TFM_ERR_NULL, TFM_ERR_NOMEM. */
TFM_API tfm_status tfm_placeholders_pair(const char *source, const char *target,
                                         char *source_out, char *target_out, int32_t *count);

#ifdef __cplusplus
}
#endif

#endif
