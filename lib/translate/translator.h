/* The translator's record, shared by its two ways in: tfm_translate on the
 * caller's thread (translator.c) and requests through the scheduler
 * (scheduler.c). Both resolve a translation's options into settings,
 * encode each text into a job, and decode jobs that share settings with
 * tfm__translator_run. */
#ifndef TFM_TRANSLATE_TRANSLATOR_H
#define TFM_TRANSLATE_TRANSLATOR_H

#include <pthread.h>
#include <stdatomic.h>

#include "model/model.h"
#include "tfm/translate.h"
#include "translate/placeholders.h"

/* What decodes together: a translation's decoding options, complete (the
 * arrays they point to owned here), and its source template (its source
 * language) and whether its texts carry a forced prefix. Jobs batch
 * together only when their settings are equal. */
typedef struct tfm__settings {
    tfm_decode_options decode;
    int32_t *arrays; /* suppress_ids, eos_ids, bad_words, bad_word_lengths */
    char adapter[64]; /* decode.adapter's name: the model's copy goes with its adapter */
    tfm__text_template text;
    int32_t prefixed;
    /* the translation's glossary (NULL: none), owned; not compared: it
     * constrains each job, not the batch */
    struct tfm__glossary *glossary;
    /* the translation's literal spans (NULL: none), owned like glossary */
    char **literals;
    int32_t n_literals;
} tfm__settings;

/* One hypothesis of a result. */
typedef struct tfm__hypothesis {
    char *text;
    int32_t *ids;
    int64_t n_ids;
    float score;
    float *alignment; /* [rows, columns], or NULL */
    int64_t rows, columns;
    int32_t *unplaced; /* the glossary terms it lacks, or NULL */
    int32_t n_unplaced;
} tfm__hypothesis;

struct tfm_translation {
    int64_t count;
    int32_t n_best, alignments;
    tfm__hypothesis *hypotheses; /* count * n_best */
    int64_t *tokens;    /* each text's source ids, as decoded */
    int32_t *truncated; /* whether it was cut to the model's sources */
};

/* Why a job's tokens were stopped by the decoding's callback (FAILED: its
 * streamed text could not be made; the request holds the error). */
enum { TFM__RUNNING = 0, TFM__STOP_CANCELLED, TFM__STOP_TIMEOUT, TFM__STOP_CALLER,
       TFM__STOP_FAILED };

/* One text to decode: its source ids, its forced prefix (or none), and
 * where its result goes. */
typedef struct tfm__job {
    int32_t *ids;
    int64_t n_ids;
    int32_t *prefix;
    int64_t n_prefix;
    tfm_translation *out;
    int64_t index;
    struct tfm_request *request; /* NULL on tfm_translate's way */
    int32_t stopped;             /* TFM__STOP_ */
    /* its placeholders (a model with their pieces; NULL without), which
     * constrain its decoding and are restored in its text */
    struct tfm__masked *masked;
} tfm__job;

/* A decoding for one set of settings, reused between runs. Its callback's
 * user is the slot, which holds the run's jobs in the rows' order. */
typedef struct tfm__slot {
    const struct tfm_translator *translator;
    tfm__settings settings;
    tfm_decoding *decoding;
    tfm__job *const *rows;
    struct tfm__slot *next;
} tfm__slot;

struct tfm_translator {
    tfm_model *model;
    int owns_model;
    struct tfm__decode_weights *weights; /* packed once, read by every decoding */
    tfm_translator_options options;
    tfm_decode_options defaults;
    int32_t *never; /* the ids that are never text, which the defaults suppress */
    tfm__text_template text;
    /* what placeholders need of the tokenizers, when both hold the pieces
     * (and options.keep_placeholders); NULL: no placeholders */
    tfm__placeholder_vocab *placeholders;
    pthread_mutex_t lock; /* the idle slots, the queue and the workers */
    tfm__slot *idle;
    int32_t n_idle;
    /* the scheduler (scheduler.c) */
    pthread_cond_t work;
    struct tfm_request *queue_head, *queue_tail;
    int32_t queued, started, stopping;
    int32_t n_workers, busy; /* the workers made, and those decoding */
    struct tfm__worker *workers;
};
typedef struct tfm__worker tfm__worker;

/* The settings of a translation with options (NULL: the defaults); its
 * target prefix's ids into *prefix (malloc'd, NULL for none), *n_prefix.
 * TFM_ERR_ARG (named), TFM_ERR_STATE (a language on a model without
 * them), TFM_ERR_NOMEM. */
tfm_status tfm__settings_resolve(const char *op, const tfm_translator *t,
                                 const tfm_translate_options *options, tfm__settings *s,
                                 int32_t **prefix, int64_t *n_prefix);
void tfm__settings_free(tfm__settings *s);
/* Whether two settings decode alike: every option, the arrays by value. */
int tfm__settings_equal(const tfm__settings *x, const tfm__settings *y);

/* A result of n texts for settings s, every hypothesis empty. */
tfm_translation *tfm__translation_create(const char *op, int64_t n, const tfm__settings *s);

/* Encodes text into job (cut to the model's sources), its result
 * entry index of out; a blank text gets no ids and its empty result. */
tfm_status tfm__job_encode(const char *op, const tfm_translator *t, const tfm__settings *s,
                           const char *text, tfm__job *job);

/* Decodes jobs[0, n), which share settings s and have ids, in runs of at
 * most max_batch sources and max_batch_tokens padded tokens, in the
 * order given (sort them by length first), into their results; op (the
 * public call) first in messages. */
tfm_status tfm__translator_run(const char *op, tfm_translator *t, const tfm__settings *s,
                               tfm__job *const *jobs, int64_t n);

/* Sorts jobs[0, n) by their source's length, ties in the order given. */
void tfm__jobs_sort(tfm__job **jobs, int64_t n);

/* A request's part of the decoding callback (scheduler.c): its tokens as
 * they come; non-zero stops them, with job->stopped set. */
int tfm__request_token(tfm__job *job, const struct tfm_translator *t, const tfm__settings *s,
                       int32_t token, int64_t position);

/* Stops the scheduler: cancels what waits, joins the workers. */
void tfm__scheduler_stop(tfm_translator *t);

/* Seconds on the monotonic clock. */
double tfm__now(void);

#endif
