/* The translator: a model with its text and decoding defaults; texts in,
 * texts out (tfm_translate), sorted by length and decoded in batches by
 * tokens, each text's result the same whatever it is batched with. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tfm/adapters.h"
#include "core/error.h"
#include "decode/decode.h"
#include "translate/text.h"
#include "translate/translator.h"

#define IDLE_SLOTS_MAX 8

double tfm__now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* Whether the caller's struct, of options->struct_size bytes, has field. */
#define HAS(type, options, field)                                                  \
    ((options)->struct_size >= offsetof(type, field) + sizeof(options)->field)

void tfm_translator_options_init_sized(tfm_translator_options *o, uint32_t struct_size)
{
    if (!o || struct_size < sizeof o->struct_size)
        return;
    tfm_translator_options d = {
        .struct_size = struct_size, .max_batch_tokens = 4096, .max_batch = 64,
        .workers = 0, .max_wait_ms = 5, .queue_capacity = 1024, .keep_placeholders = 1};
    memcpy(o, &d, struct_size < sizeof d ? struct_size : sizeof d);
    o->struct_size = struct_size;
}

void tfm_translate_options_init_sized(tfm_translate_options *o, uint32_t struct_size)
{
    if (!o || struct_size < sizeof o->struct_size)
        return;
    tfm_translate_options d = {.struct_size = struct_size};
    memcpy(o, &d, struct_size < sizeof d ? struct_size : sizeof d);
    o->struct_size = struct_size;
}

/* The caller's options as this library's struct (missing fields at their
 * defaults), checked. */
static tfm_status translator_options(const char *op, const tfm_translator_options *given,
                                     tfm_translator_options *o)
{
    tfm_translator_options_init(o);
    if (given) {
        if (given->struct_size < offsetof(tfm_translator_options, int8))
            return tfm__fail(TFM_ERR_ARG, "%s: options.struct_size %u is too small; call "
                             "tfm_translator_options_init first", op,
                             (unsigned)given->struct_size);
        memcpy(o, given, given->struct_size < sizeof *o ? given->struct_size : sizeof *o);
        o->struct_size = sizeof *o;
    }
    const char *bad = o->int8 != 0 && o->int8 != 1                               ? "int8"
                      : o->max_batch_tokens < 1 || o->max_batch_tokens > 1 << 24 ? "max_batch_tokens"
                      : o->max_batch < 1 || o->max_batch > 4096                  ? "max_batch"
                      : o->workers < 0 || o->workers > 64                        ? "workers"
                      : o->max_wait_ms < 0 || o->max_wait_ms > 60000             ? "max_wait_ms"
                      : o->queue_capacity < 1 || o->queue_capacity > 1 << 20     ? "queue_capacity"
                      : o->keep_placeholders != 0 && o->keep_placeholders != 1   ? "keep_placeholders"
                                                                                 : NULL;
    if (bad)
        return tfm__fail(TFM_ERR_ARG, "%s: options.%s is out of range (int8 0 or 1, "
                         "max_batch_tokens 1..2^24, max_batch 1..4096, workers 0..64, "
                         "max_wait_ms 0..60000, queue_capacity 1..2^20, keep_placeholders 0 or 1)", op, bad);
    return TFM_OK;
}

/* The ids that are never text: the start token, padding, and the ids past
 * the target tokenizer's pieces (a model may have more ids than its
 * tokenizer); a published model says its own (bad_words_ids). */
static tfm_status suppress_non_text(const char *op, tfm_translator *t)
{
    tfm_model *m = t->model;
    int64_t vocab = m->options.tgt_vocab;
    int64_t pieces = tfm_tokenizer_vocab_size(tfm_model_tokenizer(m, 1));
    int64_t n = 0, capacity = 2 + (vocab > pieces ? vocab - pieces : 0);
    if (!(t->never = malloc((size_t)capacity * sizeof *t->never)))
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld suppressed ids", op,
                         (long long)capacity);
    if (m->options.bos_id >= 0)
        t->never[n++] = m->options.bos_id;
    if (m->options.pad_id >= 0 && m->options.pad_id != m->options.bos_id)
        t->never[n++] = m->options.pad_id;
    for (int64_t id = pieces; id < vocab; id++)
        t->never[n++] = (int32_t)id;
    t->defaults.suppress_ids = t->never;
    t->defaults.n_suppress_ids = (int32_t)n;
    return TFM_OK;
}

/* The decoding defaults: the model's own (published ones from its folder),
 * within its target positions; a model trained here decodes with beam 4
 * and room for twice its source, and never chooses what is not text. */
static tfm_status make_defaults(const char *op, tfm_translator *t)
{
    tfm_decode_options *d = &t->defaults;
    tfm_decode_options_init(d);
    tfm_status s = tfm_decode_options_from_model(t->model, d);
    if (s != TFM_OK)
        return s;
    if (!t->model->generation) {
        d->strategy = TFM_DECODE_BEAM;
        d->beam_size = 4;
        d->max_length = (int32_t)(t->model->options.max_tgt_len - 1);
        /* targets run about as long as their sources: room for twice that */
        d->max_length_a = 2.0f;
        d->max_length_b = 10;
        s = suppress_non_text(op, t);
    }
    return s;
}

tfm_status tfm_translator_decode_options(const tfm_translator *t, tfm_decode_options *options)
{
    const char *op = "tfm_translator_decode_options";
    if (!t || !options)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, t ? "options" : "translator");
    if (options->struct_size < sizeof *options)
        return tfm__fail(TFM_ERR_ARG, "%s: options.struct_size %u is smaller than this "
                         "library's %u: the defaults need every field", op,
                         (unsigned)options->struct_size, (unsigned)sizeof *options);
    *options = t->defaults;
    return TFM_OK;
}

static tfm_translator *translator_make(const char *op, tfm_model *model, int owns,
                                       const tfm_translator_options *o)
{
    tfm_translator *t = calloc(1, sizeof *t);
    if (!t) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return NULL;
    }
    t->model = model;
    t->owns_model = owns;
    t->options = *o;
    t->text = model->text;
    pthread_mutex_init(&t->lock, NULL);
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC); /* the scheduler's waits */
    pthread_cond_init(&t->work, &monotonic);
    pthread_condattr_destroy(&monotonic);
    if (!tfm_model_tokenizer(model, 0)) {
        tfm__fail(TFM_ERR_STATE, "%s: the model holds no tokenizer: it was not saved with its "
                  "tokenizers (tfm_model_set_tokenizers, tfm-translate), or its folder lacks "
                  "the tokenizer files", op);
    } else if (make_defaults(op, t) == TFM_OK &&
               (!o->keep_placeholders ||
                tfm__placeholder_vocab_make(op, tfm_model_tokenizer(model, 0),
                                            tfm_model_tokenizer(model, 1),
                                            &t->placeholders) == TFM_OK) &&
               (t->weights = tfm__decode_weights_pack(model))) {
        return t;
    }
    t->owns_model = 0; /* the caller frees what it gave */
    tfm_translator_free(t);
    return NULL;
}

/* The id of a language code, for side 0 (source) or 1 (target), or -1
 * with the error. */
static int32_t language(const char *op, const tfm_translator *t, int side, const char *code)
{
    int has = side ? t->text.target_language >= 0 : t->text.language >= 0;
    if (!has) {
        tfm__fail(TFM_ERR_STATE, "%s: the model's %s carry no language code (not an "
                  "mBART-50, M2M100 or NLLB model)", op, side ? "targets" : "sources");
        return -1;
    }
    return tfm__text_language_id(op, tfm_model_tokenizer(t->model, side), side ? "target" : "source",
                                 code);
}

/* The translator's languages (NULL: the model's), in its template and
 * its decoding defaults' forced first token. */
static tfm_status set_languages(const char *op, tfm_translator *t, const char *source,
                                const char *target)
{
    int32_t source_id = source ? language(op, t, 0, source) : 0;
    int32_t target_id = source_id >= 0 && target ? language(op, t, 1, target) : 0;
    if (source_id < 0 || target_id < 0)
        return tfm_last_status();
    if (source)
        t->text.ids[t->text.language] = source_id;
    if (target)
        t->text.target_language = t->defaults.forced_bos_id = target_id;
    return TFM_OK;
}

tfm_translator *tfm_translator_open(const char *path, const tfm_translator_options *options)
{
    const char *op = "tfm_translator_open";
    if (!path) {
        tfm__fail(TFM_ERR_NULL, "%s: path is NULL", op);
        return NULL;
    }
    tfm_translator_options o;
    if (translator_options(op, options, &o) != TFM_OK)
        return NULL;
    uint64_t mark = tfm__error_mark();
    struct stat about;
    int folder = stat(path, &about) == 0 && S_ISDIR(about.st_mode);
    tfm_model *m = folder ? tfm_model_from_pretrained(path) : tfm_model_load(path);
    tfm_status s = m ? TFM_OK : tfm_last_status();
    if (s == TFM_OK && o.int8 && !tfm_model_quantized(m))
        s = tfm_model_quantize(m, TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR);
    if (s == TFM_OK)
        tfm_model_set_training(m, 0);
    if (s != TFM_OK) {
        tfm_model_free(m);
        tfm__fail_within(op, mark);
        return NULL;
    }
    tfm_translator *t = translator_make(op, m, 1, &o);
    if (!t) {
        tfm_model_free(m);
        return NULL;
    }
    if (set_languages(op, t, o.source_language, o.target_language) != TFM_OK) {
        tfm_translator_free(t);
        return NULL;
    }
    return t;
}

tfm_translator *tfm_translator_create(tfm_model *model, const tfm_translator_options *options)
{
    const char *op = "tfm_translator_create";
    if (!model) {
        tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
        return NULL;
    }
    tfm_translator_options o;
    if (translator_options(op, options, &o) != TFM_OK)
        return NULL;
    if (o.int8 || o.source_language || o.target_language) {
        tfm__fail(TFM_ERR_ARG, "%s: options.%s applies to a model the translator opens; "
                  "quantize the model or choose its languages before", op,
                  o.int8 ? "int8" : "source_language/target_language");
        return NULL;
    }
    return translator_make(op, model, 0, &o);
}

void tfm_translator_free(tfm_translator *t)
{
    if (!t)
        return;
    tfm__scheduler_stop(t);
    for (tfm__slot *slot = t->idle, *next; slot; slot = next) {
        next = slot->next;
        tfm_decoding_free(slot->decoding);
        tfm__settings_free(&slot->settings);
        free(slot);
    }
    pthread_cond_destroy(&t->work);
    pthread_mutex_destroy(&t->lock);
    tfm__decode_weights_free(t->weights);
    if (t->owns_model)
        tfm_model_free(t->model);
    free(t->never);
    tfm__placeholder_vocab_free(t->placeholders);
    free(t);
}

const tfm_model *tfm_translator_model(const tfm_translator *t)
{
    if (!t)
        tfm__fail(TFM_ERR_NULL, "tfm_translator_model: translator is NULL");
    return t ? t->model : NULL;
}

/* --- settings ------------------------------------------------------------------------- */

void tfm__settings_free(tfm__settings *s)
{
    free(s->arrays);
    s->arrays = NULL;
    tfm__glossary_free(s->glossary);
    s->glossary = NULL;
    for (int32_t i = 0; s->literals && i < s->n_literals; i++)
        free(s->literals[i]);
    free(s->literals);
    s->literals = NULL;
    s->n_literals = 0;
}

/* The options' literal spans copied into s. */
static tfm_status own_literals(const char *op, const tfm_translate_options *o, tfm__settings *s)
{
    if (o->n_literals < 0 || (o->n_literals > 0 && !o->literals))
        return tfm__fail(o->n_literals < 0 ? TFM_ERR_ARG : TFM_ERR_NULL,
                         "%s: options.literals is %s with n_literals %d", op,
                         o->literals ? "given" : "NULL", (int)o->n_literals);
    for (int32_t i = 0; i < o->n_literals; i++)
        if (!o->literals[i] || !o->literals[i][0])
            return tfm__fail(o->literals[i] ? TFM_ERR_ARG : TFM_ERR_NULL,
                             "%s: options.literals[%d] is %s", op, (int)i,
                             o->literals[i] ? "empty" : "NULL");
    if (o->n_literals == 0)
        return TFM_OK;
    if (!(s->literals = calloc((size_t)o->n_literals, sizeof *s->literals)))
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the literals", op);
    for (; s->n_literals < o->n_literals; s->n_literals++)
        if (!(s->literals[s->n_literals] = strdup(o->literals[s->n_literals])))
            return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the literals", op);
    return TFM_OK;
}

/* The arrays s->decode points to, copied into s->arrays and pointed to
 * there, and the adapter's name into s->adapter, so the settings outlive
 * the caller's options and an idle decoding's the adapter's removal. */
static tfm_status own_arrays(const char *op, tfm__settings *s)
{
    tfm_decode_options *d = &s->decode;
    s->arrays = NULL;
    if (d->adapter) {
        snprintf(s->adapter, sizeof s->adapter, "%s", d->adapter);
        d->adapter = s->adapter;
    }
    /* counts out of range are the decoding's to name; nothing is kept */
    if (d->n_suppress_ids < 0 || d->n_eos_ids < 0 || d->n_bad_words < 0) {
        d->suppress_ids = d->eos_ids = d->bad_words = d->bad_word_lengths = NULL;
        return TFM_OK;
    }
    int64_t bad = 0;
    for (int32_t i = 0; d->bad_word_lengths && i < d->n_bad_words; i++)
        bad += d->bad_word_lengths[i] > 0 ? d->bad_word_lengths[i] : 0;
    int64_t n = (int64_t)d->n_suppress_ids + d->n_eos_ids + bad + d->n_bad_words;
    if (n == 0)
        return TFM_OK;
    if (!(s->arrays = malloc((size_t)n * sizeof *s->arrays)))
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the decoding's ids", op);
    int32_t *at = s->arrays;
    const int32_t *from[] = {d->suppress_ids, d->eos_ids, d->bad_words, d->bad_word_lengths};
    int64_t counts[] = {d->n_suppress_ids, d->n_eos_ids, bad, d->n_bad_words};
    const int32_t **to[] = {&d->suppress_ids, &d->eos_ids, &d->bad_words, &d->bad_word_lengths};
    for (int k = 0; k < 4; k++) {
        if (counts[k] > 0 && from[k])
            memcpy(at, from[k], (size_t)counts[k] * sizeof *at);
        *to[k] = counts[k] > 0 && from[k] ? at : NULL;
        at += counts[k];
    }
    return TFM_OK;
}

tfm_status tfm__settings_resolve(const char *op, const tfm_translator *t,
                                 const tfm_translate_options *given, tfm__settings *s,
                                 int32_t **prefix, int64_t *n_prefix)
{
    *s = (tfm__settings){.decode = t->defaults, .text = t->text};
    *prefix = NULL;
    *n_prefix = 0;
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    if (given) {
        if (given->struct_size < offsetof(tfm_translate_options, decode))
            return tfm__fail(TFM_ERR_ARG, "%s: options.struct_size %u is too small; call "
                             "tfm_translate_options_init first", op, (unsigned)given->struct_size);
        memcpy(&o, given, given->struct_size < sizeof o ? given->struct_size : sizeof o);
    }
    if (o.decode) {
        if (o.decode->struct_size < offsetof(tfm_decode_options, length_penalty))
            return tfm__fail(TFM_ERR_ARG, "%s: options.decode's struct_size %u is too small; "
                             "fill it with tfm_translator_decode_options", op,
                             (unsigned)o.decode->struct_size);
        size_t size = o.decode->struct_size < sizeof s->decode ? o.decode->struct_size
                                                               : sizeof s->decode;
        memcpy(&s->decode, o.decode, size);
        s->decode.struct_size = sizeof s->decode;
        if (s->decode.callback)
            return tfm__fail(TFM_ERR_ARG, "%s: options.decode's callback is the translator's; "
                             "use options.on_token", op);
    }
    if (o.source_language) {
        int32_t id = language(op, t, 0, o.source_language);
        if (id < 0)
            return tfm_last_status();
        s->text.ids[s->text.language] = id;
    }
    if (o.target_language) {
        int32_t id = language(op, t, 1, o.target_language);
        if (id < 0)
            return tfm_last_status();
        s->text.target_language = id;
        s->decode.forced_bos_id = id;
    }
    if (o.adapter)
        s->decode.adapter = o.adapter;
    /* one of the model's (own_arrays copies the name) */
    if (s->decode.adapter) {
        int32_t i = 0, n = tfm_model_adapter_count(t->model);
        while (i < n && strcmp(tfm_model_adapter_name(t->model, i), s->decode.adapter) != 0)
            i++;
        if (i == n)
            return tfm__fail(TFM_ERR_ARG, "%s: the model has no adapter named \"%s\"", op,
                             s->decode.adapter);
    }
    /* checked now: the results, the stream and the prefix are sized by them */
    tfm_status checked = tfm__decode_options_check(op, t->model, &s->decode);
    if (checked != TFM_OK)
        return checked;
    if (o.target_prefix && o.target_prefix[0]) {
        const tfm_tokenizer *tok = tfm_model_tokenizer(t->model, 1);
        uint64_t mark = tfm__error_mark();
        int64_t count = 0, length = (int64_t)strlen(o.target_prefix);
        tfm_status st = tfm_tokenizer_encode(tok, o.target_prefix, length, NULL, 0, &count);
        if (st == TFM_ERR_SIZE && count > s->decode.max_length)
            return tfm__fail(TFM_ERR_ARG, "%s: options.target_prefix takes %lld tokens, more "
                             "than max_length %d", op, (long long)count,
                             (int)s->decode.max_length);
        if (st == TFM_ERR_SIZE && !(*prefix = malloc((size_t)count * sizeof **prefix)))
            return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        if (st == TFM_ERR_SIZE)
            st = tfm_tokenizer_encode(tok, o.target_prefix, length, *prefix, count, &count);
        if (st != TFM_OK) {
            free(*prefix);
            *prefix = NULL;
            tfm__fail_within(op, mark);
            return st;
        }
        *n_prefix = count;
        s->prefixed = count > 0;
    }
    s->decode.callback = NULL;
    s->decode.callback_user = NULL;
    tfm_status st = tfm__glossary_make(op, tfm_model_tokenizer(t->model, 1), o.glossary,
                                       o.n_glossary, &s->glossary);
    if (st == TFM_OK)
        st = own_literals(op, &o, s);
    if (st == TFM_OK)
        st = own_arrays(op, s);
    if (st != TFM_OK) {
        free(*prefix);
        *prefix = NULL;
    }
    return st;
}

static int same_ids(const int32_t *a, const int32_t *b, int64_t n)
{
    return n <= 0 || (a && b && memcmp(a, b, (size_t)n * sizeof *a) == 0);
}

int tfm__settings_equal(const tfm__settings *x, const tfm__settings *y)
{
    const tfm_decode_options *a = &x->decode, *b = &y->decode;
    int64_t bad = 0;
    for (int32_t i = 0; a->bad_word_lengths && i < a->n_bad_words; i++)
        bad += a->bad_word_lengths[i];
    return a->strategy == b->strategy && a->max_length == b->max_length &&
           a->bos_id == b->bos_id && a->eos_id == b->eos_id && a->src_pad_id == b->src_pad_id &&
           a->temperature == b->temperature && a->top_k == b->top_k && a->top_p == b->top_p &&
           a->seed == b->seed && a->beam_size == b->beam_size &&
           a->length_penalty == b->length_penalty && a->n_best == b->n_best &&
           a->use_cache == b->use_cache && a->min_length == b->min_length &&
           a->repetition_penalty == b->repetition_penalty &&
           a->no_repeat_ngram_size == b->no_repeat_ngram_size &&
           a->n_suppress_ids == b->n_suppress_ids &&
           same_ids(a->suppress_ids, b->suppress_ids, a->n_suppress_ids) &&
           a->n_eos_ids == b->n_eos_ids && same_ids(a->eos_ids, b->eos_ids, a->n_eos_ids) &&
           a->max_length_a == b->max_length_a && a->max_length_b == b->max_length_b &&
           a->forced_bos_id == b->forced_bos_id && a->patience == b->patience &&
           a->n_bad_words == b->n_bad_words &&
           same_ids(a->bad_word_lengths, b->bad_word_lengths, a->n_bad_words) &&
           same_ids(a->bad_words, b->bad_words, bad) &&
           a->return_attention == b->return_attention && a->forced_eos_id == b->forced_eos_id &&
           a->beam_rules == b->beam_rules && a->early_stopping == b->early_stopping &&
           a->renormalize_logits == b->renormalize_logits &&
           a->cache_precision == b->cache_precision &&
           (a->adapter == b->adapter ||
            (a->adapter && b->adapter && strcmp(a->adapter, b->adapter) == 0)) &&
           memcmp(&x->text, &y->text, sizeof x->text) == 0 && x->prefixed == y->prefixed;
}

/* --- results ---------------------------------------------------------------------------- */

tfm_translation *tfm__translation_create(const char *op, int64_t n, const tfm__settings *s)
{
    int32_t n_best = s->decode.strategy == TFM_DECODE_BEAM ? s->decode.n_best : 1;
    tfm_translation *r = calloc(1, sizeof *r);
    if (r) {
        r->count = n;
        r->n_best = n_best;
        r->alignments = s->decode.return_attention;
        r->hypotheses = calloc((size_t)(n * n_best > 0 ? n * n_best : 1), sizeof *r->hypotheses);
        r->tokens = calloc((size_t)(n > 0 ? n : 1), sizeof *r->tokens);
        r->truncated = calloc((size_t)(n > 0 ? n : 1), sizeof *r->truncated);
    }
    if (!r || !r->hypotheses || !r->tokens || !r->truncated) {
        tfm_translation_free(r);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the results of %lld texts", op,
                  (long long)n);
        return NULL;
    }
    for (int64_t i = 0; i < n * n_best; i++)
        r->hypotheses[i].score = -INFINITY;
    return r;
}

void tfm_translation_free(tfm_translation *r)
{
    if (!r)
        return;
    for (int64_t i = 0; r->hypotheses && i < r->count * r->n_best; i++) {
        free(r->hypotheses[i].text);
        free(r->hypotheses[i].ids);
        free(r->hypotheses[i].alignment);
        free(r->hypotheses[i].unplaced);
    }
    free(r->hypotheses);
    free(r->tokens);
    free(r->truncated);
    free(r);
}

/* Hypothesis h of text i, or NULL with the error. */
static const tfm__hypothesis *hypothesis(const char *op, const tfm_translation *r, int64_t i,
                                         int32_t h)
{
    if (!r) {
        tfm__fail(TFM_ERR_NULL, "%s: translation is NULL", op);
        return NULL;
    }
    if (i < 0 || i >= r->count || h < 0 || h >= r->n_best) {
        tfm__fail(TFM_ERR_RANGE, "%s: text %lld, hypothesis %d is outside the translation's "
                  "%lld texts of %d", op, (long long)i, (int)h, (long long)r->count,
                  (int)r->n_best);
        return NULL;
    }
    return &r->hypotheses[i * r->n_best + h];
}

int64_t tfm_translation_count(const tfm_translation *r)
{
    if (!r)
        tfm__fail(TFM_ERR_NULL, "tfm_translation_count: translation is NULL");
    return r ? r->count : -1;
}

int32_t tfm_translation_n_best(const tfm_translation *r)
{
    if (!r)
        tfm__fail(TFM_ERR_NULL, "tfm_translation_n_best: translation is NULL");
    return r ? r->n_best : -1;
}

const char *tfm_translation_text(const tfm_translation *r, int64_t i, int32_t h)
{
    const tfm__hypothesis *x = hypothesis("tfm_translation_text", r, i, h);
    return x ? (x->text ? x->text : "") : NULL;
}

const int32_t *tfm_translation_ids(const tfm_translation *r, int64_t i, int32_t h,
                                   int64_t *count)
{
    const tfm__hypothesis *x = hypothesis("tfm_translation_ids", r, i, h);
    if (count)
        *count = x ? x->n_ids : 0;
    static const int32_t none[1] = {-1};
    return x ? (x->ids ? x->ids : none) : NULL;
}

float tfm_translation_score(const tfm_translation *r, int64_t i, int32_t h)
{
    const tfm__hypothesis *x = hypothesis("tfm_translation_score", r, i, h);
    return x ? x->score : NAN;
}

tfm_status tfm_translation_unplaced(const tfm_translation *r, int64_t i, int32_t h,
                                    const int32_t **terms, int32_t *count)
{
    const tfm__hypothesis *x = hypothesis("tfm_translation_unplaced", r, i, h);
    if (!x)
        return tfm_last_status();
    if (!terms || !count)
        return tfm__fail(TFM_ERR_NULL, "tfm_translation_unplaced: %s is NULL",
                         terms ? "count" : "terms");
    *terms = x->n_unplaced ? x->unplaced : NULL;
    *count = x->n_unplaced;
    return TFM_OK;
}

tfm_status tfm_translation_source_tokens(const tfm_translation *r, int64_t i, int64_t *tokens,
                                         int32_t *truncated)
{
    if (!hypothesis("tfm_translation_source_tokens", r, i, 0))
        return tfm_last_status();
    if (tokens)
        *tokens = r->tokens[i];
    if (truncated)
        *truncated = r->truncated[i];
    return TFM_OK;
}

const float *tfm_translation_alignment(const tfm_translation *r, int64_t i, int32_t h,
                                       int64_t *target_length, int64_t *source_length)
{
    const char *op = "tfm_translation_alignment";
    const tfm__hypothesis *x = hypothesis(op, r, i, h);
    if (x && !r->alignments) {
        tfm__fail(TFM_ERR_STATE, "%s: the translation's decoding options did not ask for "
                  "alignments (return_attention)", op);
        x = NULL;
    }
    if (target_length)
        *target_length = x ? x->rows : 0;
    if (source_length)
        *source_length = x ? x->columns : 0;
    static const float none[1] = {0.0f};
    return x ? (x->alignment ? x->alignment : none) : NULL;
}

/* --- decoding jobs ------------------------------------------------------------------------ */

static int blank(const char *text)
{
    while (*text == ' ' || *text == '\t' || *text == '\r' || *text == '\n')
        text++;
    return *text == '\0';
}

tfm_status tfm__job_encode(const char *op, const tfm_translator *t, const tfm__settings *s,
                           const char *text, tfm__job *job)
{
    job->ids = NULL;
    job->n_ids = 0;
    job->masked = NULL;
    if (blank(text)) { /* its translation is empty, as sure as can be */
        job->out->hypotheses[job->index * job->out->n_best].score = 0.0f;
        return TFM_OK;
    }
    tfm_status st = tfm__masked_make(op, text, (int64_t)strlen(text), t->placeholders,
                                     (const char *const *)s->literals, s->n_literals,
                                     s->glossary, &job->masked);
    if (st == TFM_OK && job->masked && job->masked->text)
        text = job->masked->text;
    if (st == TFM_OK)
        st = tfm__text_encode(op, t->model, &s->text, text, (int64_t)strlen(text),
                              t->model->options.max_src_len, &job->ids, &job->n_ids,
                              &job->out->truncated[job->index]);
    if (st == TFM_OK && job->masked)
        tfm__masked_count(job->masked, job->ids, job->n_ids);
    if (st == TFM_OK && job->n_ids <= s->text.n_ids) {
        /* only the template's ids: whitespace the tokenizer reads as nothing */
        free(job->ids);
        job->ids = NULL;
        job->n_ids = 0;
        job->out->hypotheses[job->index * job->out->n_best].score = 0.0f;
    }
    job->out->tokens[job->index] = job->n_ids;
    return st;
}

static int by_length(const void *a, const void *b)
{
    const tfm__job *x = *(tfm__job *const *)a, *y = *(tfm__job *const *)b;
    if (x->n_ids != y->n_ids)
        return x->n_ids < y->n_ids ? -1 : 1;
    return (x > y) - (x < y); /* jobs sit in one array, in the order given */
}

void tfm__jobs_sort(tfm__job **jobs, int64_t n)
{
    qsort(jobs, (size_t)n, sizeof *jobs, by_length);
}

/* The decoding's callback: the run's row `source` is a job; a request's
 * tokens go to the scheduler (cancel, deadline, streaming). */
static int on_token(void *user, int64_t source, int32_t token, int64_t position)
{
    tfm__slot *slot = user;
    tfm__job *job = slot->rows[source];
    return job->request ? tfm__request_token(job, slot->translator, &slot->settings, token,
                                             position)
                        : 0;
}

/* An idle decoding for settings s, or a new one. */
static tfm__slot *take_slot(const char *op, tfm_translator *t, const tfm__settings *s)
{
    pthread_mutex_lock(&t->lock);
    tfm__slot **link = &t->idle, *slot = NULL;
    for (; *link; link = &(*link)->next)
        if (tfm__settings_equal(&(*link)->settings, s)) {
            slot = *link;
            *link = slot->next;
            t->n_idle--;
            break;
        }
    pthread_mutex_unlock(&t->lock);
    if (slot)
        return slot;
    if (!(slot = calloc(1, sizeof *slot))) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return NULL;
    }
    slot->translator = t;
    slot->settings = *s;
    slot->settings.glossary = NULL; /* the translation's, not the slot's */
    slot->settings.literals = NULL;
    slot->settings.n_literals = 0;
    uint64_t mark = tfm__error_mark();
    if (own_arrays(op, &slot->settings) == TFM_OK) {
        tfm_decode_options o = slot->settings.decode;
        o.callback = on_token;
        o.callback_user = slot;
        slot->decoding = tfm__decoding_create_shared(op, t->model, &o, t->options.max_batch,
                                                     t->model->options.max_src_len, t->weights);
        if (slot->decoding)
            return slot;
        tfm__fail_within(op, mark);
    }
    tfm__settings_free(&slot->settings);
    free(slot);
    return NULL;
}

static void give_slot(tfm_translator *t, tfm__slot *slot)
{
    slot->rows = NULL;
    pthread_mutex_lock(&t->lock);
    slot->next = t->idle;
    t->idle = slot;
    tfm__slot *oldest = NULL;
    if (++t->n_idle > IDLE_SLOTS_MAX) {
        tfm__slot **link = &t->idle;
        while ((*link)->next)
            link = &(*link)->next;
        oldest = *link;
        *link = NULL;
        t->n_idle--;
    }
    pthread_mutex_unlock(&t->lock);
    if (oldest) {
        tfm_decoding_free(oldest->decoding);
        tfm__settings_free(&oldest->settings);
        free(oldest);
    }
}

/* A run's buffers, sized for the decoding's largest batch. */
typedef struct run_buffers {
    int32_t *tokens, *lengths;
    float *scores;
    int64_t tokens_count, lengths_count;
} run_buffers;

/* The results of one run's rows: text, ids, score and alignments. */
static tfm_status keep_results(const char *op, const tfm_translator *t, tfm__slot *slot,
                               tfm__job *const *rows, int64_t n, const run_buffers *b)
{
    const tfm__settings *s = &slot->settings;
    int32_t n_best = rows[0]->out->n_best;
    int64_t T1 = s->decode.max_length + 1;
    for (int64_t r = 0; r < n; r++) {
        for (int32_t h = 0; h < n_best; h++) {
            int64_t k = r * n_best + h, length = b->lengths[k];
            tfm__hypothesis *x = &rows[r]->out->hypotheses[rows[r]->index * n_best + h];
            x->score = b->scores[k];
            x->n_ids = length;
            if (length > 0 && !(x->ids = malloc((size_t)length * sizeof *x->ids)))
                return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
            if (length > 0)
                memcpy(x->ids, b->tokens + k * T1, (size_t)length * sizeof *x->ids);
            int64_t bytes = 0;
            tfm_status st = tfm__text_decode(op, t->model, &s->text, x->ids, length, &x->text,
                                             &bytes);
            const tfm__masked *masked = rows[r]->masked;
            if (st == TFM_OK && masked)
                st = tfm__masked_restore(op, masked, &x->text, &bytes);
            if (st == TFM_OK && masked && masked->n_terms) { /* a hypothesis not found: none */
                if (!(x->unplaced = malloc((size_t)masked->n_terms * sizeof *x->unplaced)))
                    return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
                x->n_unplaced = tfm__masked_unplaced(masked, length > 0 ? x->ids + 1 : NULL,
                                                     length > 0 ? length - 1 : 0, x->unplaced);
            }
            if (st != TFM_OK)
                return st;
            if (!s->decode.return_attention || length == 0)
                continue;
            int64_t width = 0, own = rows[r]->n_ids;
            tfm_decoding_attention(slot->decoding, k, NULL, 0, &x->rows, &width);
            if (!(x->alignment = malloc((size_t)(x->rows * width + 1) * sizeof(float))))
                return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for alignments", op);
            st = tfm_decoding_attention(slot->decoding, k, x->alignment, x->rows * width, NULL,
                                        NULL);
            if (st != TFM_OK)
                return st;
            /* the text's own source positions, not the run's padding */
            for (int64_t i = 1; i < x->rows; i++)
                memmove(x->alignment + i * own, x->alignment + i * width,
                        (size_t)own * sizeof(float));
            x->columns = own;
        }
    }
    return TFM_OK;
}

/* Decodes rows[0, n) as one batch, padded to the longest. */
static tfm_status run_rows(const char *op, tfm_translator *t, tfm__slot *slot,
                           tfm__job *const *rows, int64_t n, run_buffers *b)
{
    const tfm__settings *s = &slot->settings;
    int64_t width = 1, prefix_width = 0;
    for (int64_t r = 0; r < n; r++) {
        width = rows[r]->n_ids > width ? rows[r]->n_ids : width;
        prefix_width = rows[r]->n_prefix > prefix_width ? rows[r]->n_prefix : prefix_width;
    }
    int32_t pad = s->decode.src_pad_id >= 0 ? s->decode.src_pad_id : 0;
    uint64_t mark = tfm__error_mark();
    tfm_tensor *src = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){n, width});
    tfm_tensor *prefix = s->prefixed ? tfm_tensor_zeros(TFM_I32, 2,
                                                         (const int64_t[]){n, prefix_width})
                                     : NULL;
    tfm_status st = src && (prefix || !s->prefixed) ? TFM_OK : tfm_last_status();
    for (int64_t r = 0; st == TFM_OK && r < n; r++) {
        int32_t *cells = tfm_tensor_data_i32(src) + r * width;
        for (int64_t k = 0; k < width; k++)
            cells[k] = k < rows[r]->n_ids ? rows[r]->ids[k] : pad;
        for (int64_t k = 0; prefix && k < prefix_width; k++)
            tfm_tensor_data_i32(prefix)[r * prefix_width + k] =
                k < rows[r]->n_prefix ? rows[r]->prefix[k] : -1;
    }
    /* the rows' placeholders and glossary terms */
    const tfm__constraints **constraints = NULL;
    int constrained = 0;
    for (int64_t r = 0; r < n; r++)
        constrained |= rows[r]->masked != NULL;
    if (st == TFM_OK && constrained && !(constraints = malloc((size_t)n * sizeof *constraints)))
        st = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    for (int64_t r = 0; constraints && r < n; r++)
        constraints[r] = rows[r]->masked ? &rows[r]->masked->constraints : NULL;
    if (st == TFM_OK) {
        slot->rows = rows;
        tfm__decoding_constrain(slot->decoding, constraints);
        st = tfm_decoding_run_with_prefix(slot->decoding, src, prefix, b->tokens, b->tokens_count,
                                          b->lengths, b->lengths_count, b->scores,
                                          b->lengths_count, NULL, 0, NULL, 0);
        tfm__decoding_constrain(slot->decoding, NULL);
    }
    free(constraints);
    tfm_tensor_free(src);
    tfm_tensor_free(prefix);
    if (st != TFM_OK)
        tfm__fail_within(op, mark);
    return st == TFM_OK ? keep_results(op, t, slot, rows, n, b) : st;
}

tfm_status tfm__translator_run(const char *op, tfm_translator *t, const tfm__settings *s,
                               tfm__job *const *jobs, int64_t n)
{
    if (n == 0)
        return TFM_OK;
    tfm__slot *slot = take_slot(op, t, s);
    if (!slot)
        return tfm_last_status();
    run_buffers b = {0};
    int64_t max_batch = t->options.max_batch;
    tfm_status st = tfm_decoding_buffer_sizes(slot->decoding, max_batch, &b.tokens_count,
                                              &b.lengths_count, NULL, NULL);
    if (st == TFM_OK) {
        b.tokens = malloc((size_t)b.tokens_count * sizeof *b.tokens);
        b.lengths = malloc((size_t)b.lengths_count * sizeof *b.lengths);
        b.scores = malloc((size_t)b.lengths_count * sizeof *b.scores);
        if (!b.tokens || !b.lengths || !b.scores)
            st = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for a run of %lld sources", op,
                           (long long)max_batch);
    }
    /* runs of similar lengths: a run ends where one more source would pass
     * max_batch or max_batch_tokens, padded to the run's longest; sampling
     * draws from one stream per run, so each sampled text runs alone */
    int sampled = s->decode.strategy == TFM_DECODE_SAMPLE;
    for (int64_t first = 0; st == TFM_OK && first < n;) {
        int64_t count = 1;
        while (first + count < n && count < max_batch && !sampled &&
               (count + 1) * jobs[first + count]->n_ids <= t->options.max_batch_tokens)
            count++;
        st = run_rows(op, t, slot, jobs + first, count, &b);
        first += count;
    }
    free(b.tokens);
    free(b.lengths);
    free(b.scores);
    give_slot(t, slot);
    return st;
}

tfm_status tfm_translate(tfm_translator *t, const char *const *texts, int64_t n,
                         const tfm_translate_options *options, tfm_translation **out)
{
    const char *op = "tfm_translate";
    if (out)
        *out = NULL;
    if (!t || !texts || !out)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                         !t ? "translator" : !texts ? "texts" : "out");
    if (n < 0 || n > INT32_MAX)
        return tfm__fail(n < 0 ? TFM_ERR_ARG : TFM_ERR_SIZE, "%s: n %lld is outside 0..2^31",
                         op, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (!texts[i])
            return tfm__fail(TFM_ERR_NULL, "%s: texts[%lld] is NULL", op, (long long)i);
    if (options && options->struct_size >= offsetof(tfm_translate_options, user) &&
        (options->deadline_ms || options->on_token || options->on_done))
        return tfm__fail(TFM_ERR_ARG, "%s: options.deadline_ms, on_token and on_done are "
                         "for tfm_translator_submit", op);
    tfm__settings s;
    int32_t *prefix = NULL;
    int64_t n_prefix = 0;
    tfm_status st = tfm__settings_resolve(op, t, options, &s, &prefix, &n_prefix);
    tfm_translation *r = st == TFM_OK ? tfm__translation_create(op, n, &s) : NULL;
    tfm__job *jobs = r ? calloc((size_t)(n > 0 ? n : 1), sizeof *jobs) : NULL;
    tfm__job **order = jobs ? calloc((size_t)(n > 0 ? n : 1), sizeof *order) : NULL;
    if (st == TFM_OK && !order)
        st = r ? tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld texts", op, (long long)n)
               : tfm_last_status();
    int64_t m = 0;
    for (int64_t i = 0; st == TFM_OK && i < n; i++) {
        jobs[i] = (tfm__job){.out = r, .index = i, .prefix = prefix, .n_prefix = n_prefix};
        st = tfm__job_encode(op, t, &s, texts[i], &jobs[i]);
        if (jobs[i].n_ids > 0)
            order[m++] = &jobs[i];
    }
    if (st == TFM_OK) {
        tfm__jobs_sort(order, m);
        st = tfm__translator_run(op, t, &s, order, m);
    }
    for (int64_t i = 0; jobs && i < n; i++) {
        free(jobs[i].ids);
        tfm__masked_free(jobs[i].masked);
    }
    free(jobs);
    free(order);
    free(prefix);
    tfm__settings_free(&s);
    if (st != TFM_OK) {
        tfm_translation_free(r);
        return st;
    }
    *out = r;
    return TFM_OK;
}
