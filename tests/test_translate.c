/* The translator (translate.h): texts in, texts out, on published folders
 * (tests/marian, tests/m2m100) and on a model made here with its
 * tokenizer; a text's result the same bit for bit alone or batched with
 * any others, in one call or through the scheduler from many threads; the
 * requests' cancel, deadline, busy queue and streaming; the errors. */
#include <check.h>
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_main.h"
#include "tfm/tfm.h"

#define MARIAN TFM_TESTS_DIR "/marian"
#define M2M100 TFM_TESTS_DIR "/m2m100"

static const char *const texts[] = {
    "Hello world.",
    "Cannot open the file %s",
    "",
    "This is a longer sentence about the files and the folders of a user.",
    "Save",
    "The operation was cancelled by the user because the disk is full.",
    "   ",
    "Print the version number and exit",
    "Could not read the configuration",
    "A",
    "Delete %d files?",
    "The server closed the connection unexpectedly while the request was sent",
};
#define N_TEXTS ((int64_t)(sizeof texts / sizeof texts[0]))

/* One translation's hypothesis: its ids, score and text. */
typedef struct hypothesis {
    int32_t ids[512];
    int64_t n_ids;
    float score;
    char text[4096];
} hypothesis;

static void keep(const tfm_translation *r, int64_t i, int32_t h, hypothesis *out)
{
    const int32_t *ids = tfm_translation_ids(r, i, h, &out->n_ids);
    ck_assert_ptr_nonnull(ids);
    ck_assert_int_le(out->n_ids, 512);
    memcpy(out->ids, ids, (size_t)out->n_ids * sizeof *ids);
    out->score = tfm_translation_score(r, i, h);
    snprintf(out->text, sizeof out->text, "%s", tfm_translation_text(r, i, h));
}

/* Bit for bit: the same ids, the same score's bits, the same text. */
static void assert_same(const hypothesis *a, const hypothesis *b, const char *what)
{
    ck_assert_msg(a->n_ids == b->n_ids &&
                      memcmp(a->ids, b->ids, (size_t)a->n_ids * sizeof *a->ids) == 0,
                  "%s: ids differ (%lld vs %lld ids)", what, (long long)a->n_ids,
                  (long long)b->n_ids);
    ck_assert_msg(memcmp(&a->score, &b->score, sizeof a->score) == 0,
                  "%s: scores differ (%.9g vs %.9g)", what, (double)a->score, (double)b->score);
    ck_assert_str_eq(a->text, b->text);
}

static tfm_translator *open_or_fail(const char *path, const tfm_translator_options *o)
{
    tfm_translator *t = tfm_translator_open(path, o);
    ck_assert_msg(t != NULL, "%s", tfm_last_error());
    return t;
}

/* Text i translated alone with options, hypothesis h. */
static void alone(tfm_translator *t, int64_t i, const tfm_translate_options *o, int32_t h,
                  hypothesis *out)
{
    tfm_translation *r = NULL;
    ck_assert_msg(tfm_translate(t, &texts[i], 1, o, &r) == TFM_OK, "%s", tfm_last_error());
    keep(r, 0, h, out);
    tfm_translation_free(r);
}

/* The decoding kinds the tests mix: the defaults (Marian's: beam 4),
 * greedy, beam 2 with 2 hypotheses, a forced target prefix, sampling. */
enum { DEFAULTS, GREEDY, BEAM_2_BEST, PREFIXED, SAMPLED, KINDS };

typedef struct mixed_options {
    tfm_decode_options decode;
    tfm_translate_options translate;
} mixed_options;

static void options_of(tfm_translator *t, int kind, mixed_options *m)
{
    tfm_translate_options_init(&m->translate);
    tfm_decode_options_init(&m->decode);
    ck_assert_int_eq(tfm_translator_decode_options(t, &m->decode), TFM_OK);
    if (kind == DEFAULTS)
        return;
    m->translate.decode = &m->decode;
    if (kind == GREEDY || kind == PREFIXED) {
        m->decode.strategy = TFM_DECODE_GREEDY;
    } else if (kind == BEAM_2_BEST) {
        m->decode.strategy = TFM_DECODE_BEAM;
        m->decode.beam_size = 2;
        m->decode.n_best = 2;
    } else {
        m->decode.strategy = TFM_DECODE_SAMPLE;
        m->decode.seed = 7;
        m->decode.top_k = 5;
    }
    if (kind == PREFIXED)
        m->translate.target_prefix = "le";
}

START_TEST(a_text_is_the_same_alone_or_in_any_batch)
{
    tfm_translator_options to;
    tfm_translator_options_init(&to);
    int64_t budgets[] = {4096, 40, 12};
    for (int b = 0; b < 3; b++) {
        to.max_batch_tokens = budgets[b];
        to.max_batch = b == 2 ? 3 : 64;
        tfm_translator *t = open_or_fail(MARIAN, &to);
        for (int kind = DEFAULTS; kind < KINDS; kind++) {
            if (kind == SAMPLED)
                continue; /* sampling's draws are per run: its requests decode alone */
            mixed_options m;
            options_of(t, kind, &m);
            tfm_translation *all = NULL;
            ck_assert_msg(tfm_translate(t, texts, N_TEXTS, &m.translate, &all) == TFM_OK, "%s",
                          tfm_last_error());
            ck_assert_int_eq(tfm_translation_count(all), N_TEXTS);
            int32_t n_best = tfm_translation_n_best(all);
            ck_assert_int_eq(n_best, kind == BEAM_2_BEST ? 2 : 1);
            for (int64_t i = 0; i < N_TEXTS; i++)
                for (int32_t h = 0; h < n_best; h++) {
                    hypothesis batched, single;
                    keep(all, i, h, &batched);
                    alone(t, i, &m.translate, h, &single);
                    char what[96];
                    snprintf(what, sizeof what, "budget %lld, kind %d, text %lld, hyp %d",
                             (long long)budgets[b], kind, (long long)i, (int)h);
                    assert_same(&batched, &single, what);
                }
            tfm_translation_free(all);
        }
        tfm_translator_free(t);
    }
}
END_TEST

START_TEST(blank_texts_give_empty_translations)
{
    tfm_translator *t = open_or_fail(MARIAN, NULL);
    tfm_translation *r = NULL;
    ck_assert_int_eq(tfm_translate(t, texts, N_TEXTS, NULL, &r), TFM_OK);
    for (int64_t i = 0; i < N_TEXTS; i++) {
        int is_blank = strspn(texts[i], " ") == strlen(texts[i]);
        int64_t count = -1;
        tfm_translation_ids(r, i, 0, &count);
        ck_assert_int_eq(count == 0, is_blank);
        if (is_blank) {
            ck_assert_str_eq(tfm_translation_text(r, i, 0), "");
            ck_assert_float_eq(tfm_translation_score(r, i, 0), 0.0f);
        }
    }
    tfm_translation_free(r);
    ck_assert_int_eq(tfm_translate(t, texts, 0, NULL, &r), TFM_OK);
    ck_assert_int_eq(tfm_translation_count(r), 0);
    tfm_translation_free(r);
    tfm_translator_free(t);
}
END_TEST

/* Whitespace the tokenizer reads as nothing (vertical tab, form feed,
 * no-break and ideographic spaces) is as blank as " ": an empty
 * translation, not the model's output for its end token alone. */
START_TEST(texts_the_tokenizer_reads_as_nothing_are_blank)
{
    tfm_translator *t = open_or_fail(MARIAN, NULL);
    const char *blank[] = {"\v\f", "\xc2\xa0\xc2\xa0", " \xe3\x80\x80 "};
    tfm_translation *r = NULL;
    ck_assert_int_eq(tfm_translate(t, blank, 3, NULL, &r), TFM_OK);
    for (int64_t i = 0; i < 3; i++) {
        int64_t count = -1;
        tfm_translation_ids(r, i, 0, &count);
        ck_assert_msg(count == 0, "text %lld gives \"%s\"", (long long)i,
                      tfm_translation_text(r, i, 0));
        ck_assert_float_eq(tfm_translation_score(r, i, 0), 0.0f);
    }
    tfm_translation_free(r);
    tfm_request *q = tfm_translator_submit(t, blank[1], NULL);
    ck_assert_int_eq(tfm_request_wait(q), TFM_OK);
    const tfm_translation *mine = NULL;
    ck_assert_int_eq(tfm_request_result(q, &mine), TFM_OK);
    ck_assert_str_eq(tfm_translation_text(mine, 0, 0), "");
    tfm_request_free(q);
    tfm_translator_free(t);
}
END_TEST

START_TEST(defaults_are_the_models_own)
{
    tfm_translator *t = open_or_fail(MARIAN, NULL);
    tfm_model *model = tfm_model_from_pretrained(MARIAN);
    ck_assert_ptr_nonnull(model);
    tfm_decode_options mine, published;
    tfm_decode_options_init(&mine);
    tfm_decode_options_init(&published);
    ck_assert_int_eq(tfm_translator_decode_options(t, &mine), TFM_OK);
    ck_assert_int_eq(tfm_decode_options_from_model(model, &published), TFM_OK);
    ck_assert_int_eq(mine.strategy, published.strategy);
    ck_assert_int_eq(mine.beam_size, published.beam_size);
    ck_assert_int_le(mine.max_length, tfm_model_max_tgt_len(model) - 1);
    ck_assert_int_eq(mine.max_length, published.max_length < tfm_model_max_tgt_len(model) - 1
                                          ? published.max_length
                                          : tfm_model_max_tgt_len(model) - 1);
    /* options NULL and the defaults given decode alike */
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.decode = &mine;
    hypothesis a, b;
    alone(t, 3, NULL, 0, &a);
    alone(t, 3, &o, 0, &b);
    assert_same(&a, &b, "defaults");
    /* a translator over the caller's model gives what the folder's gives */
    tfm_translator *over = tfm_translator_create(model, NULL);
    ck_assert_msg(over != NULL, "%s", tfm_last_error());
    alone(over, 3, NULL, 0, &b);
    assert_same(&a, &b, "over a model");
    ck_assert_ptr_eq(tfm_translator_model(over), model);
    tfm_translator_free(over);
    tfm_model_free(model);
    tfm_translator_free(t);
}
END_TEST

START_TEST(long_sources_are_cut_and_say_so)
{
    tfm_translator *t = open_or_fail(MARIAN, NULL);
    int64_t max_src = tfm_model_max_src_len(tfm_translator_model(t));
    size_t size = (size_t)max_src * 12 + 1;
    char *text = malloc(size);
    ck_assert_ptr_nonnull(text);
    text[0] = '\0';
    while (strlen(text) + 12 < size)
        strcat(text, "the files ");
    const char *one[] = {text};
    tfm_translation *r = NULL;
    ck_assert_msg(tfm_translate(t, one, 1, NULL, &r) == TFM_OK, "%s", tfm_last_error());
    int64_t tokens = 0;
    int32_t truncated = 0;
    ck_assert_int_eq(tfm_translation_source_tokens(r, 0, &tokens, &truncated), TFM_OK);
    ck_assert_int_eq(truncated, 1);
    ck_assert_int_eq(tokens, max_src);
    tfm_translation_free(r);
    /* a short one is not cut */
    ck_assert_int_eq(tfm_translate(t, texts, 1, NULL, &r), TFM_OK);
    ck_assert_int_eq(tfm_translation_source_tokens(r, 0, &tokens, &truncated), TFM_OK);
    ck_assert_int_eq(truncated, 0);
    ck_assert_int_lt(tokens, max_src);
    tfm_translation_free(r);
    free(text);
    tfm_translator_free(t);
}
END_TEST

START_TEST(languages_per_translation)
{
    tfm_translator *t = open_or_fail(M2M100, NULL);
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.target_language = "de";
    tfm_translation *r = NULL;
    ck_assert_msg(tfm_translate(t, texts, 2, &o, &r) == TFM_OK, "%s", tfm_last_error());
    tfm_model *model = tfm_model_from_pretrained(M2M100);
    int32_t de = tfm_tokenizer_piece_to_id(tfm_model_tokenizer(model, 1), "__de__", 6);
    ck_assert_int_ge(de, 0);
    int64_t count = 0;
    const int32_t *ids = tfm_translation_ids(r, 0, 0, &count);
    ck_assert_int_ge(count, 2);
    ck_assert_int_eq(ids[1], de); /* the forced first token */
    tfm_translation_free(r);
    /* the same as a translator opened for that language */
    tfm_translator_options to;
    tfm_translator_options_init(&to);
    to.target_language = "de";
    tfm_translator *de_translator = open_or_fail(M2M100, &to);
    hypothesis a, b;
    alone(t, 1, &o, 0, &a);
    alone(de_translator, 1, NULL, 0, &b);
    assert_same(&a, &b, "target language");
    o.target_language = "xx";
    ck_assert_int_eq(tfm_translate(t, texts, 1, &o, &r), TFM_ERR_ARG);
    ck_assert_ptr_null(r);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "xx"));
    tfm_translator_free(de_translator);
    tfm_model_free(model);
    tfm_translator_free(t);
    /* a model without languages refuses one */
    t = open_or_fail(MARIAN, NULL);
    o.target_language = "de";
    ck_assert_int_eq(tfm_translate(t, texts, 1, &o, &r), TFM_ERR_STATE);
    tfm_translator_free(t);
}
END_TEST

START_TEST(alignments_on_request)
{
    tfm_translator *t = open_or_fail(MARIAN, NULL);
    tfm_decode_options d;
    tfm_decode_options_init(&d);
    tfm_translator_decode_options(t, &d);
    d.return_attention = 1;
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.decode = &d;
    tfm_translation *r = NULL;
    ck_assert_int_eq(tfm_translate(t, texts, 2, &o, &r), TFM_OK);
    int64_t rows = 0, columns = 0, ids = 0;
    const float *a = tfm_translation_alignment(r, 1, 0, &rows, &columns);
    tfm_translation_ids(r, 1, 0, &ids);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(rows, ids - 1);
    int64_t tokens = 0;
    tfm_translation_source_tokens(r, 1, &tokens, NULL);
    ck_assert_int_eq(columns, tokens);
    for (int64_t i = 0; i < rows; i++) {
        double sum = 0.0;
        for (int64_t j = 0; j < columns; j++)
            sum += a[i * columns + j];
        ck_assert_double_eq_tol(sum, 1.0, 1e-4);
    }
    /* the text's own, whatever it is batched with */
    const char *pair[] = {texts[1], texts[3]};
    tfm_translation *alone = NULL, *batched = NULL;
    ck_assert_int_eq(tfm_translate(t, pair, 1, &o, &alone), TFM_OK);
    ck_assert_int_eq(tfm_translate(t, pair, 2, &o, &batched), TFM_OK);
    int64_t rows_alone = 0, columns_alone = 0;
    const float *x = tfm_translation_alignment(alone, 0, 0, &rows_alone, &columns_alone);
    const float *y = tfm_translation_alignment(batched, 0, 0, &rows, &columns);
    ck_assert_int_eq(rows, rows_alone);
    ck_assert_int_eq(columns, columns_alone);
    ck_assert_mem_eq(x, y, (size_t)(rows * columns) * sizeof *x);
    tfm_translation_free(alone);
    tfm_translation_free(batched);
    tfm_translation_free(r);
    ck_assert_int_eq(tfm_translate(t, texts, 1, NULL, &r), TFM_OK);
    ck_assert_ptr_null(tfm_translation_alignment(r, 0, 0, NULL, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_STATE);
    tfm_translation_free(r);
    tfm_translator_free(t);
}
END_TEST

/* --- many threads, one translator -------------------------------------------------- */

#define THREADS 8
#define PER_THREAD 24

typedef struct caller {
    tfm_translator *t;
    int id, submit; /* submit: through the scheduler, else tfm_translate */
    hypothesis *got;   /* PER_THREAD */
    int64_t *text, *kind;
    int failures;
} caller;

static void *call(void *arg)
{
    caller *c = arg;
    uint32_t state = 2654435761u * (uint32_t)(c->id + 1);
    for (int k = 0; k < PER_THREAD; k++) {
        state = state * 1664525u + 1013904223u;
        c->text[k] = (state >> 8) % N_TEXTS;
        c->kind[k] = (state >> 20) % KINDS;
        mixed_options m;
        options_of(c->t, (int)c->kind[k], &m);
        const tfm_translation *r = NULL;
        tfm_translation *own = NULL;
        tfm_request *q = NULL;
        if (c->submit) {
            q = tfm_translator_submit(c->t, texts[c->text[k]], &m.translate);
            if (!q || tfm_request_wait(q) != TFM_OK || tfm_request_result(q, &r) != TFM_OK)
                c->failures++;
        } else if (tfm_translate(c->t, &texts[c->text[k]], 1, &m.translate, &own) == TFM_OK) {
            r = own;
        } else {
            c->failures++;
        }
        if (r)
            keep(r, 0, 0, &c->got[k]);
        tfm_request_free(q);
        tfm_translation_free(own);
    }
    return NULL;
}

/* THREADS callers at once, on one translator (int8: quantized), each
 * text and kind checked against the text translated alone. */
static void many_callers(int int8, int submit, int workers)
{
    tfm_translator_options to;
    tfm_translator_options_init(&to);
    to.int8 = int8;
    to.workers = workers;
    to.max_wait_ms = 2;
    tfm_translator *t = open_or_fail(MARIAN, &to);
    caller callers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        callers[i] = (caller){.t = t, .id = i, .submit = submit};
        callers[i].got = calloc(PER_THREAD, sizeof *callers[i].got);
        callers[i].text = calloc(PER_THREAD, sizeof *callers[i].text);
        callers[i].kind = calloc(PER_THREAD, sizeof *callers[i].kind);
        ck_assert_int_eq(pthread_create(&threads[i], NULL, call, &callers[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < THREADS; i++) {
        ck_assert_int_eq(callers[i].failures, 0);
        for (int k = 0; k < PER_THREAD; k++) {
            mixed_options m;
            options_of(t, (int)callers[i].kind[k], &m);
            hypothesis single;
            alone(t, callers[i].text[k], &m.translate, 0, &single);
            char what[96];
            snprintf(what, sizeof what, "thread %d, call %d (text %lld, kind %lld)", i, k,
                     (long long)callers[i].text[k], (long long)callers[i].kind[k]);
            assert_same(&callers[i].got[k], &single, what);
        }
        free(callers[i].got);
        free(callers[i].text);
        free(callers[i].kind);
    }
    tfm_translator_free(t);
}

START_TEST(threads_translate_at_once)
{
    many_callers(0, 0, 1);
}
END_TEST

START_TEST(threads_submit_at_once)
{
    many_callers(0, 1, 2);
}
END_TEST

START_TEST(threads_submit_at_once_int8)
{
    many_callers(1, 1, 1);
}
END_TEST

/* --- requests --------------------------------------------------------------------------- */

typedef struct done_count {
    pthread_mutex_t lock;
    int calls;
    tfm_status last;
} done_count;

static void count_done(void *user, tfm_request *q)
{
    done_count *d = user;
    pthread_mutex_lock(&d->lock);
    d->calls++;
    d->last = tfm_request_result(q, NULL);
    pthread_mutex_unlock(&d->lock);
}

/* A translator whose batches wait long for company: requests stay queued. */
static tfm_translator *patient(int32_t capacity)
{
    tfm_translator_options to;
    tfm_translator_options_init(&to);
    to.max_wait_ms = 60000;
    to.queue_capacity = capacity;
    return open_or_fail(MARIAN, &to);
}

START_TEST(a_request_waiting_is_cancelled_at_once)
{
    tfm_translator *t = patient(16);
    done_count d = {PTHREAD_MUTEX_INITIALIZER, 0, TFM_OK};
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.on_done = count_done;
    o.user = &d;
    tfm_request *q = tfm_translator_submit(t, texts[0], &o);
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(tfm_request_done(q), 0);
    ck_assert_int_eq(tfm_request_result(q, NULL), TFM_ERR_STATE);
    tfm_request_cancel(q);
    ck_assert_int_eq(tfm_request_wait(q), TFM_ERR_CANCELLED);
    ck_assert_int_eq(tfm_request_done(q), 1);
    ck_assert_int_eq(d.calls, 1);
    ck_assert_int_eq(d.last, TFM_ERR_CANCELLED);
    ck_assert_ptr_nonnull(strstr(tfm_request_error(q), "cancelled"));
    const tfm_translation *r = (const tfm_translation *)1;
    ck_assert_int_eq(tfm_request_result(q, &r), TFM_ERR_CANCELLED);
    ck_assert_ptr_null(r);
    tfm_request_cancel(q); /* finished: nothing changes */
    ck_assert_int_eq(d.calls, 1);
    tfm_request_free(q);
    /* freed while it waits: cancelled, its callback still called */
    q = tfm_translator_submit(t, texts[1], &o);
    tfm_request_free(q);
    ck_assert_int_eq(d.calls, 2);
    /* freeing the translator cancels what waits; the request stays readable */
    q = tfm_translator_submit(t, texts[1], &o);
    tfm_translator_free(t);
    ck_assert_int_eq(tfm_request_wait(q), TFM_ERR_CANCELLED);
    ck_assert_int_eq(d.calls, 3);
    tfm_request_free(q);
}
END_TEST

/* Stops a request's tokens through its caller's cancel, from on_token. */
typedef struct stopper {
    tfm_request *request;
    pthread_mutex_t known; /* held until request is set */
    int tokens;
    char last[4096];
    int cancel_at, stop_at;
} stopper;

static int on_token(void *user, int32_t token, const char *text, int64_t length)
{
    stopper *s = user;
    (void)token;
    ck_assert_int_eq((int64_t)strlen(text), length);
    snprintf(s->last, sizeof s->last, "%s", text);
    s->tokens++;
    if (s->tokens == s->cancel_at) {
        pthread_mutex_lock(&s->known);
        tfm_request_cancel(s->request);
        pthread_mutex_unlock(&s->known);
    }
    return s->tokens == s->stop_at;
}

START_TEST(a_request_being_decoded_stops_when_cancelled)
{
    tfm_translator_options to;
    tfm_translator_options_init(&to);
    to.max_wait_ms = 0;
    tfm_translator *t = open_or_fail(MARIAN, &to);
    mixed_options m;
    options_of(t, GREEDY, &m);
    stopper s = {.cancel_at = 3, .known = PTHREAD_MUTEX_INITIALIZER};
    m.translate.on_token = on_token;
    m.translate.user = &s;
    /* a worker may decode it before submit returns: on_token waits for it */
    pthread_mutex_lock(&s.known);
    s.request = tfm_translator_submit(t, texts[3], &m.translate);
    pthread_mutex_unlock(&s.known);
    ck_assert_ptr_nonnull(s.request);
    ck_assert_int_eq(tfm_request_wait(s.request), TFM_ERR_CANCELLED);
    ck_assert_int_eq(s.tokens, 3);
    tfm_request_free(s.request);
    tfm_translator_free(t);
}
END_TEST

START_TEST(streaming_gives_the_text_so_far)
{
    tfm_translator *t = open_or_fail(MARIAN, NULL);
    mixed_options m;
    options_of(t, GREEDY, &m);
    hypothesis whole;
    alone(t, 3, &m.translate, 0, &whole);
    stopper s = {0};
    m.translate.on_token = on_token;
    m.translate.user = &s;
    tfm_request *q = tfm_translator_submit(t, texts[3], &m.translate);
    ck_assert_int_eq(tfm_request_wait(q), TFM_OK);
    const tfm_translation *r = NULL;
    ck_assert_int_eq(tfm_request_result(q, &r), TFM_OK);
    hypothesis streamed;
    keep(r, 0, 0, &streamed);
    assert_same(&streamed, &whole, "streamed");
    ck_assert_int_eq(s.tokens, whole.n_ids - 1);
    ck_assert_str_eq(s.last, whole.text);
    tfm_request_free(q);
    /* a non-zero return ends the translation there, successfully */
    s = (stopper){.stop_at = 2};
    q = tfm_translator_submit(t, texts[3], &m.translate);
    ck_assert_int_eq(tfm_request_wait(q), TFM_OK);
    tfm_request_result(q, &r);
    int64_t count = 0;
    tfm_translation_ids(r, 0, 0, &count);
    ck_assert_int_eq(count, 3); /* the start token and two */
    ck_assert_int_eq(s.tokens, 2);
    tfm_request_free(q);
    tfm_translator_free(t);
}
END_TEST

START_TEST(a_request_past_its_deadline_fails)
{
    tfm_translator_options to;
    tfm_translator_options_init(&to);
    to.max_wait_ms = 300; /* longer than the deadline: it expires waiting */
    tfm_translator *t = open_or_fail(MARIAN, &to);
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.deadline_ms = 20;
    tfm_request *q = tfm_translator_submit(t, texts[0], &o);
    ck_assert_int_eq(tfm_request_wait(q), TFM_ERR_TIMEOUT);
    ck_assert_ptr_nonnull(strstr(tfm_request_error(q), "deadline"));
    tfm_request_free(q);
    /* one with time enough succeeds */
    o.deadline_ms = 60000;
    q = tfm_translator_submit(t, texts[0], &o);
    ck_assert_int_eq(tfm_request_wait(q), TFM_OK);
    tfm_request_free(q);
    o.deadline_ms = -1;
    ck_assert_ptr_null(tfm_translator_submit(t, texts[0], &o));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    tfm_translator_free(t);
}
END_TEST

START_TEST(a_full_queue_is_busy)
{
    tfm_translator *t = patient(3);
    tfm_request *q[3];
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_nonnull(q[i] = tfm_translator_submit(t, texts[i], NULL));
    ck_assert_ptr_null(tfm_translator_submit(t, texts[0], NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_BUSY);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "try again"));
    tfm_request_cancel(q[0]); /* room again */
    tfm_request *again = tfm_translator_submit(t, texts[0], NULL);
    ck_assert_ptr_nonnull(again);
    for (int i = 0; i < 3; i++)
        tfm_request_free(q[i]);
    tfm_request_free(again);
    tfm_translator_free(t);
}
END_TEST

/* on_done waits for its own request (it has finished): at once, with its
 * status, not forever. */
static void wait_in_on_done(void *user, tfm_request *q)
{
    *(tfm_status *)user = tfm_request_wait(q);
}

START_TEST(on_done_may_wait_for_its_request)
{
    tfm_translator *t = open_or_fail(MARIAN, NULL);
    tfm_status in_on_done = TFM_ERR_STATE;
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.on_done = wait_in_on_done;
    o.user = &in_on_done;
    tfm_request *q = tfm_translator_submit(t, texts[0], &o);
    ck_assert_ptr_nonnull(q);
    for (int i = 0; i < 2000 && !tfm_request_done(q); i++)
        nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
    ck_assert_msg(tfm_request_done(q), "on_done's wait hangs");
    ck_assert_int_eq(in_on_done, TFM_OK);
    tfm_request_free(q);
    tfm_translator_free(t);
}
END_TEST

/* --- a model made here ------------------------------------------------------------------ */

START_TEST(a_model_made_here_decodes_with_beam_4_and_no_non_text)
{
    const char *lines[] = {"the cat sat on the mat", "le chat est sur le tapis",
                           "a dog is in the garden", "un chien est dans le jardin"};
    tfm_bpe_train_options bo;
    tfm_bpe_train_options_init(&bo);
    bo.vocab_size = 40;
    bo.pad_piece = 1;
    tfm_tokenizer *tok = NULL;
    ck_assert_msg(tfm_tokenizer_train_bpe(lines, NULL, 4, &bo, &tok) == TFM_OK, "%s",
                  tfm_last_error());
    tfm_model_options mo;
    tfm_model_options_init(&mo);
    mo.src_vocab = mo.tgt_vocab = 64; /* more ids than the tokenizer's pieces */
    mo.max_src_len = mo.max_tgt_len = 32;
    mo.d_model = 16, mo.heads = 2, mo.d_ff = 32, mo.encoder_layers = mo.decoder_layers = 1;
    mo.share_embeddings = 1;
    mo.bos_id = tfm_tokenizer_special_id(tok, TFM_TOKEN_BOS);
    mo.eos_id = tfm_tokenizer_special_id(tok, TFM_TOKEN_EOS);
    mo.pad_id = tfm_tokenizer_special_id(tok, TFM_TOKEN_PAD);
    tfm_model *model = tfm_model_create(&mo);
    ck_assert_msg(model != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_set_tokenizers(model, tok, NULL), TFM_OK);
    tfm_model_set_training(model, 0);
    /* the model's own options fit its target positions: the default 100 is
     * lowered to its 31 */
    tfm_decode_options own;
    tfm_decode_options_init(&own);
    ck_assert_int_eq(tfm_decode_options_from_model(model, &own), TFM_OK);
    ck_assert_int_eq(own.max_length, 31);
    tfm_decoding *fits = tfm_decoding_create(model, &own, 1, 32);
    ck_assert_msg(fits != NULL, "%s", tfm_last_error());
    tfm_decoding_free(fits);
    tfm_translator *t = tfm_translator_create(model, NULL);
    ck_assert_msg(t != NULL, "%s", tfm_last_error());
    tfm_decode_options d;
    tfm_decode_options_init(&d);
    ck_assert_int_eq(tfm_translator_decode_options(t, &d), TFM_OK);
    ck_assert_int_eq(d.strategy, TFM_DECODE_BEAM);
    ck_assert_int_eq(d.beam_size, 4);
    ck_assert_int_eq(d.max_length, 31);
    tfm_translation *r = NULL;
    ck_assert_msg(tfm_translate(t, lines, 4, NULL, &r) == TFM_OK, "%s", tfm_last_error());
    int32_t pieces = tfm_tokenizer_vocab_size(tok);
    for (int64_t i = 0; i < 4; i++) {
        int64_t count = 0;
        const int32_t *ids = tfm_translation_ids(r, i, 0, &count);
        for (int64_t k = 1; k < count; k++) {
            ck_assert_int_lt(ids[k], pieces);
            ck_assert_int_ne(ids[k], mo.bos_id);
        }
        /* room for twice the source and 10 */
        int64_t source = 0;
        tfm_translation_source_tokens(r, i, &source, NULL);
        ck_assert_int_le(count - 1, 2 * source + 10);
    }
    tfm_translation_free(r);
    tfm_translator_free(t);
    tfm_model_free(model);
    tfm_tokenizer_free(tok);
}
END_TEST

/* --- placeholders ----------------------------------------------------------------------- */

/* Messages and the spans each must keep: printf directives in their
 * order, the others as many times each. */
static const char *const messages[][5] = {
    {"Computing size for %s", "%s"},
    {"File \"%s\" was renamed to \"%s\".", "%s", "%s"},
    {"%d of %d files copied (%-10.3lf%%)", "%d", "%d", "%-10.3lf", "%%"},
    {"Deleted %(count)d files from {dir} in $HOME", "%(count)d", "{dir}", "$HOME"},
    {"Click <b>Save</b> &amp; wait %zu seconds", "<b>", "</b>", "&amp;", "%zu"},
    {"%2$s is owned by %1$s", "%2$s", "%1$s"},
};
enum { N_MESSAGES = sizeof messages / sizeof *messages };

/* The spans of text among want[0, n) as text holds them, left to right
 * (the longest first at a position), into got. */
static int64_t spans_in(const char *text, const char *const *want, int64_t n, const char **got)
{
    int64_t count = 0;
    for (const char *at = text; *at;) {
        const char *best = NULL;
        for (int64_t k = 0; k < n; k++)
            if (strncmp(at, want[k], strlen(want[k])) == 0 &&
                (!best || strlen(want[k]) > strlen(best)))
                best = want[k];
        if (best && count < 16)
            got[count++] = best;
        at += best ? strlen(best) : 1;
    }
    return count;
}

/* text keeps message m's spans: each as often, the unnumbered printf
 * directives in order, no placeholder left. */
static void assert_spans_kept(int64_t m, const char *text, const char *what)
{
    const char *const *want = messages[m] + 1;
    int64_t n = 0;
    while (n < 4 && want[n])
        n++;
    const char *got[16];
    int64_t count = spans_in(text, want, n, got);
    ck_assert_msg(!strstr(text, "\xef\xbd\x9f"), "%s: a placeholder left in \"%s\"", what, text);
    ck_assert_msg(count == n, "%s: \"%s\" has %lld spans of \"%s\"'s %lld", what, text,
                  (long long)count, messages[m][0], (long long)n);
    int64_t percents[2] = {0, 0};
    for (int side = 0; side < 2; side++)
        for (const char *c = side ? text : messages[m][0]; *c; c++)
            percents[side] += *c == '%';
    ck_assert_msg(percents[0] == percents[1], "%s: \"%s\" has %lld '%%' of \"%s\"'s %lld",
                  what, text, (long long)percents[1], messages[m][0], (long long)percents[0]);
    int ordered = m != 3 && m != 5;
    for (int64_t k = 0; k < n; k++) {
        int64_t times = 0, wanted = 0;
        for (int64_t j = 0; j < n; j++) {
            times += got[j] == want[k] || strcmp(got[j], want[k]) == 0;
            wanted += strcmp(want[j], want[k]) == 0;
        }
        ck_assert_msg(times == wanted, "%s: \"%s\" has \"%s\" %lld times", what, text, want[k],
                      (long long)times);
    }
    /* the unnumbered directives ("%%" is a percent sign, free to move) */
    const char *seq_got[16], *seq_want[16];
    int64_t g = 0, w = 0;
    for (int64_t k = 0; ordered && k < n; k++) {
        if (got[k][0] == '%' && strcmp(got[k], "%%") != 0)
            seq_got[g++] = got[k];
        if (want[k][0] == '%' && strcmp(want[k], "%%") != 0)
            seq_want[w++] = want[k];
    }
    for (int64_t k = 0; k < w; k++)
        ck_assert_msg(g == w && strcmp(seq_got[k], seq_want[k]) == 0,
                      "%s: \"%s\" reorders \"%s\"", what, text, messages[m][0]);
}

/* A model whose vocabulary holds the placeholder pieces, its text none of
 * the spans' characters but '%': any span in a translation is a
 * placeholder the decoding placed, and a '%' of its own is banned. */
static tfm_model *placeholder_model(tfm_tokenizer **tok)
{
    const char *lines[] = {"the file was 50% renamed and copied", "le fichier a ete renomme",
                           "computing size for files in seconds", "calcul de la taille",
                           "click save and wait is owned by", "cliquez enregistrer attendez"};
    const char *symbols[TFM_PLACEHOLDERS];
    for (int32_t i = 0; i < TFM_PLACEHOLDERS; i++)
        symbols[i] = tfm_placeholder(i);
    ck_assert_ptr_null(tfm_placeholder(TFM_PLACEHOLDERS));
    tfm_bpe_train_options bo;
    tfm_bpe_train_options_init(&bo);
    bo.vocab_size = 90;
    bo.pad_piece = 1;
    bo.character_coverage = 1.0;
    bo.user_symbols = symbols;
    bo.n_user_symbols = TFM_PLACEHOLDERS;
    ck_assert_msg(tfm_tokenizer_train_bpe(lines, NULL, 6, &bo, tok) == TFM_OK, "%s",
                  tfm_last_error());
    tfm_model_options mo;
    tfm_model_options_init(&mo);
    mo.src_vocab = mo.tgt_vocab = tfm_tokenizer_vocab_size(*tok);
    mo.max_src_len = mo.max_tgt_len = 64;
    mo.d_model = 16, mo.heads = 2, mo.d_ff = 32, mo.encoder_layers = mo.decoder_layers = 1;
    mo.share_embeddings = 1;
    mo.bos_id = tfm_tokenizer_special_id(*tok, TFM_TOKEN_BOS);
    mo.eos_id = tfm_tokenizer_special_id(*tok, TFM_TOKEN_EOS);
    mo.pad_id = tfm_tokenizer_special_id(*tok, TFM_TOKEN_PAD);
    tfm_model *model = tfm_model_create(&mo);
    ck_assert_msg(model != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_set_tokenizers(model, *tok, NULL), TFM_OK);
    tfm_model_set_training(model, 0);
    return model;
}

static int no_placeholder_streamed(void *user, int32_t token, const char *text, int64_t length)
{
    (void)token;
    ck_assert_int_eq((int64_t)strlen(text), length);
    ck_assert_msg(!strstr(text, "\xef\xbd\x9f"), "streamed a placeholder: \"%s\"", text);
    ++*(int *)user;
    return 0;
}

START_TEST(placeholders_are_kept_in_every_decoding)
{
    tfm_tokenizer *tok = NULL;
    tfm_model *model = placeholder_model(&tok);
    const char *texts_in[N_MESSAGES];
    for (int64_t m = 0; m < N_MESSAGES; m++)
        texts_in[m] = messages[m][0];
    for (int int8 = 0; int8 < 2; int8++) {
        if (int8)
            ck_assert_int_eq(tfm_model_quantize(model, TFM_QUANTIZE_LAYERS |
                                                           TFM_QUANTIZE_GENERATOR),
                             TFM_OK);
        tfm_translator *t = tfm_translator_create(model, NULL);
        ck_assert_msg(t != NULL, "%s", tfm_last_error());
        for (int path = 0; path < 6; path++) {
            tfm_decode_options d;
            tfm_decode_options_init(&d);
            ck_assert_int_eq(tfm_translator_decode_options(t, &d), TFM_OK);
            d.strategy = path < 2 ? TFM_DECODE_GREEDY
                         : path < 5 ? TFM_DECODE_SAMPLE : TFM_DECODE_BEAM;
            d.use_cache = path != 1;
            d.temperature = 1.5f;
            d.top_k = path == 3 ? 10 : 0;
            d.top_p = path == 4 ? 0.8f : 1.0f;
            d.seed = 11;
            tfm_translate_options o;
            tfm_translate_options_init(&o);
            o.decode = &d;
            tfm_translation *r = NULL;
            ck_assert_msg(tfm_translate(t, texts_in, N_MESSAGES, &o, &r) == TFM_OK, "%s",
                          tfm_last_error());
            for (int64_t m = 0; m < N_MESSAGES; m++) {
                char what[64];
                snprintf(what, sizeof what, "%s, path %d", int8 ? "int8" : "float32", path);
                for (int32_t h = 0; h < tfm_translation_n_best(r); h++)
                    assert_spans_kept(m, tfm_translation_text(r, m, h), what);
                /* through the scheduler, streamed */
                int streamed = 0;
                o.on_token = no_placeholder_streamed;
                o.user = &streamed;
                tfm_request *q = tfm_translator_submit(t, texts_in[m], &o);
                o.on_token = NULL;
                o.user = NULL;
                ck_assert_msg(q != NULL, "%s", tfm_last_error());
                ck_assert_int_eq(tfm_request_wait(q), TFM_OK);
                const tfm_translation *one = NULL;
                ck_assert_int_eq(tfm_request_result(q, &one), TFM_OK);
                assert_spans_kept(m, tfm_translation_text(one, 0, 0), what);
                ck_assert_int_gt(streamed, 0);
                if (d.strategy != TFM_DECODE_SAMPLE)
                    ck_assert_str_eq(tfm_translation_text(one, 0, 0),
                                     tfm_translation_text(r, m, 0));
                tfm_request_free(q);
            }
            tfm_translation_free(r);
        }
        tfm_translator_free(t);
    }
    tfm_model_free(model);
    tfm_tokenizer_free(tok);
}
END_TEST

/* Accelerator marks outside spans and at the start of a word. */
static int accelerators(const char *text, char mark)
{
    int n = 0;
    for (const char *c = text; *c; c++)
        n += *c == mark && isalnum((unsigned char)c[1]) &&
             (c == text || !isalnum((unsigned char)c[-1]));
    return n;
}

/* A source's one accelerator mark (GTK's '_', Qt's '&') is one in its
 * translation, as msgfmt --check-accelerators requires, in every
 * strategy; "core_pattern" holds none, so nothing is added. */
START_TEST(accelerator_marks_are_kept)
{
    tfm_tokenizer *tok = NULL;
    tfm_model *model = placeholder_model(&tok);
    tfm_translator *t = tfm_translator_create(model, NULL);
    ck_assert_msg(t != NULL, "%s", tfm_last_error());
    const char *texts[] = {"_Save the file", "&Open %s", "click _save and wait",
                           "core_pattern is owned by"};
    const char marks[] = {'_', '&', '_', '_'};
    const int wanted[] = {1, 1, 1, 0};
    tfm_decode_options d;
    tfm_decode_options_init(&d);
    ck_assert_int_eq(tfm_translator_decode_options(t, &d), TFM_OK);
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.decode = &d;
    for (int path = 0; path < 3; path++) {
        d.strategy = path == 0 ? TFM_DECODE_GREEDY
                     : path == 1 ? TFM_DECODE_BEAM : TFM_DECODE_SAMPLE;
        tfm_translation *r = NULL;
        ck_assert_msg(tfm_translate(t, texts, 4, &o, &r) == TFM_OK, "%s", tfm_last_error());
        for (int i = 0; i < 4; i++) {
            const char *text = tfm_translation_text(r, i, 0);
            ck_assert_msg(wanted[i] ? accelerators(text, marks[i]) == 1 : !strchr(text, '_') ||
                                                                             accelerators(text, '_') <= 1,
                          "path %d: \"%s\" -> \"%s\"", path, texts[i], text);
        }
        tfm_translation_free(r);
    }
    tfm_translator_free(t);
    tfm_model_free(model);
    tfm_tokenizer_free(tok);
}
END_TEST

/* The caller's literals pass through as the rules' spans do, in every
 * strategy; bad ones are refused. */
START_TEST(caller_literals_are_kept)
{
    tfm_tokenizer *tok = NULL;
    tfm_model *model = placeholder_model(&tok);
    tfm_translator *t = tfm_translator_create(model, NULL);
    ck_assert_msg(t != NULL, "%s", tfm_last_error());
    const char *const literals[] = {"GNOME", "@@V@@"};
    const char *one[] = {"Welcome to GNOME @@V@@ with %s"};
    tfm_decode_options d;
    tfm_decode_options_init(&d);
    ck_assert_int_eq(tfm_translator_decode_options(t, &d), TFM_OK);
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.decode = &d;
    o.literals = literals;
    o.n_literals = 2;
    for (int path = 0; path < 3; path++) {
        d.strategy = path == 0 ? TFM_DECODE_GREEDY
                     : path == 1 ? TFM_DECODE_BEAM : TFM_DECODE_SAMPLE;
        tfm_translation *r = NULL;
        ck_assert_msg(tfm_translate(t, one, 1, &o, &r) == TFM_OK, "%s", tfm_last_error());
        const char *text = tfm_translation_text(r, 0, 0);
        const char *at = strstr(text, "GNOME");
        ck_assert_msg(at && !strstr(at + 1, "GNOME") && strstr(text, "@@V@@") &&
                          strstr(text, "%s"),
                      "path %d: \"%s\"", path, text);
        tfm_translation_free(r);
    }
    const char *const empty[] = {""};
    o.literals = empty;
    o.n_literals = 1;
    tfm_translation *r = NULL;
    ck_assert_int_eq(tfm_translate(t, one, 1, &o, &r), TFM_ERR_ARG);
    o.literals = NULL;
    ck_assert_int_eq(tfm_translate(t, one, 1, &o, &r), TFM_ERR_NULL);
    tfm_translator_free(t);
    tfm_model_free(model);
    tfm_tokenizer_free(tok);
}
END_TEST

/* A training pair's spans become the same placeholders on both sides when
 * they match, and the pair stays as it is when they do not. */
START_TEST(training_pairs_get_placeholders)
{
    char a[256], b[256];
    int32_t count = -1;
    ck_assert_int_eq(tfm_placeholders_pair("File \"%s\" was renamed to \"%s\".",
                                           "Le fichier \xc2\xab %s \xc2\xbb renomm\xc3\xa9 en "
                                           "\xc2\xab %s \xc2\xbb.",
                                           a, b, &count),
                     TFM_OK);
    ck_assert_int_eq(count, 2);
    ck_assert_str_eq(a, "File \"\xef\xbd\x9f" "1\xef\xbd\xa0\" was renamed to \"\xef\xbd\x9f"
                        "2\xef\xbd\xa0\".");
    ck_assert_ptr_nonnull(strstr(b, "\xc2\xab \xef\xbd\x9f" "1\xef\xbd\xa0 \xc2\xbb"));
    ck_assert_ptr_nonnull(strstr(b, "\xc2\xab \xef\xbd\x9f" "2\xef\xbd\xa0 \xc2\xbb."));
    /* numbered directives move: the target's keep their source's numbers */
    ck_assert_int_eq(tfm_placeholders_pair("<b>%1$s</b> owns %2$s", "%2$s : <b>%1$s</b>", a, b,
                                           &count),
                     TFM_OK);
    ck_assert_int_eq(count, 4);
    ck_assert_str_eq(b, "\xef\xbd\x9f" "4\xef\xbd\xa0 : \xef\xbd\x9f" "1\xef\xbd\xa0\xef\xbd\x9f"
                        "2\xef\xbd\xa0\xef\xbd\x9f" "3\xef\xbd\xa0");
    /* a span missing on one side: the pair as it is */
    ck_assert_int_eq(tfm_placeholders_pair("Computing size for %s", "Calcul de la taille",
                                           a, b, &count),
                     TFM_OK);
    ck_assert_int_eq(count, 0);
    ck_assert_str_eq(a, "Computing size for %s");
    ck_assert_str_eq(b, "Calcul de la taille");
    ck_assert_int_eq(tfm_placeholders_pair(NULL, "x", a, b, &count), TFM_ERR_NULL);
}
END_TEST

/* A glossary's target term is in the translation when its source term is
 * in the text (any case, a whole word), in every decoding path and
 * through submit; a term too long for max_length is reported; a term
 * the text lacks changes nothing; bad terms are refused. */
START_TEST(glossary_terms_are_placed)
{
    tfm_translator *t = open_or_fail(MARIAN, NULL);
    const char *const glossary[] = {"FILE", "Datei", "folder", "Verzeichnis"};
    const char *one[] = {"Cannot open the file"};
    tfm_decode_options d;
    tfm_decode_options_init(&d);
    ck_assert_int_eq(tfm_translator_decode_options(t, &d), TFM_OK);
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.decode = &d;
    o.glossary = glossary;
    o.n_glossary = 2;
    for (int path = 0; path < 4; path++) {
        d.strategy = path == 0 ? TFM_DECODE_GREEDY
                     : path == 1 ? TFM_DECODE_BEAM : TFM_DECODE_SAMPLE;
        d.use_cache = path != 3;
        d.beam_size = 4;
        d.seed = 5;
        tfm_translation *r = NULL;
        ck_assert_msg(tfm_translate(t, one, 1, &o, &r) == TFM_OK, "%s", tfm_last_error());
        const char *text = tfm_translation_text(r, 0, 0);
        ck_assert_msg(strstr(text, "Datei") != NULL, "path %d: \"%s\"", path, text);
        ck_assert_msg(strstr(text, "Verzeichnis") == NULL, "path %d: \"%s\"", path, text);
        const int32_t *terms = NULL;
        int32_t count = -1;
        ck_assert_int_eq(tfm_translation_unplaced(r, 0, 0, &terms, &count), TFM_OK);
        ck_assert_int_eq(count, 0);
        ck_assert_ptr_null(terms);
        tfm_translation_free(r);
    }
    /* through the scheduler, the glossary copied at submit */
    char *term = strdup("Datei"), *word = strdup("file");
    const char *mine[] = {word, term};
    o.glossary = mine;
    o.n_glossary = 1;
    d.strategy = TFM_DECODE_GREEDY;
    tfm_request *q = tfm_translator_submit(t, one[0], &o);
    ck_assert_msg(q != NULL, "%s", tfm_last_error());
    free(term);
    free(word);
    ck_assert_int_eq(tfm_request_wait(q), TFM_OK);
    const tfm_translation *got = NULL;
    ck_assert_int_eq(tfm_request_result(q, &got), TFM_OK);
    ck_assert_ptr_nonnull(strstr(tfm_translation_text(got, 0, 0), "Datei"));
    tfm_request_free(q);
    /* too long for max_length 1: reported */
    o.glossary = glossary;
    o.n_glossary = 2;
    const char *both[] = {"the folder and the file"};
    d.max_length = 1;
    tfm_translation *r = NULL;
    ck_assert_msg(tfm_translate(t, both, 1, &o, &r) == TFM_OK, "%s", tfm_last_error());
    const int32_t *terms = NULL;
    int32_t count = 0;
    ck_assert_int_eq(tfm_translation_unplaced(r, 0, 0, &terms, &count), TFM_OK);
    ck_assert_int_ge(count, 1);
    ck_assert_int_eq(terms[count - 1], 1); /* Verzeichnis: more than one token */
    ck_assert_int_eq(tfm_translation_unplaced(r, 1, 0, &terms, &count), TFM_ERR_RANGE);
    ck_assert_int_eq(tfm_translation_unplaced(r, 0, 0, NULL, &count), TFM_ERR_NULL);
    tfm_translation_free(r);
    /* a term the text lacks, or a word that only holds it: as without */
    ck_assert_int_eq(tfm_translator_decode_options(t, &d), TFM_OK);
    const char *other[] = {"the files are profiled"};
    hypothesis a, b;
    o.glossary = NULL;
    o.n_glossary = 0;
    ck_assert_int_eq(tfm_translate(t, other, 1, &o, &r), TFM_OK);
    keep(r, 0, 0, &a);
    tfm_translation_free(r);
    o.glossary = glossary;
    o.n_glossary = 2;
    ck_assert_int_eq(tfm_translate(t, other, 1, &o, &r), TFM_OK);
    keep(r, 0, 0, &b);
    tfm_translation_free(r);
    assert_same(&a, &b, "a glossary that does not apply");
    /* refused */
    const char *const empty[] = {"file", ""};
    o.glossary = empty;
    o.n_glossary = 1;
    ck_assert_int_eq(tfm_translate(t, one, 1, &o, &r), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "glossary"));
    o.glossary = NULL;
    ck_assert_int_eq(tfm_translate(t, one, 1, &o, &r), TFM_ERR_NULL);
    tfm_translator_free(t);
}
END_TEST

/* --- errors ------------------------------------------------------------------------------ */

START_TEST(errors_are_named)
{
    tfm_translation *r = (tfm_translation *)1;
    ck_assert_ptr_null(tfm_translator_open(NULL, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_null(tfm_translator_open("/nonexistent/model.safetensors", NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_IO);
    ck_assert_ptr_null(tfm_translator_create(NULL, NULL));
    tfm_translator_options to;
    tfm_translator_options_init(&to);
    to.max_batch = 0;
    ck_assert_ptr_null(tfm_translator_open(MARIAN, &to));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "max_batch"));
    tfm_translator_options_init(&to);
    to.target_language = "fr";
    ck_assert_ptr_null(tfm_translator_open(MARIAN, &to));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_STATE);
    tfm_translator *t = open_or_fail(MARIAN, NULL);
    ck_assert_int_eq(tfm_translate(NULL, texts, 1, NULL, &r), TFM_ERR_NULL);
    ck_assert_ptr_null(r);
    ck_assert_int_eq(tfm_translate(t, NULL, 1, NULL, &r), TFM_ERR_NULL);
    const char *with_null[] = {"a", NULL};
    ck_assert_int_eq(tfm_translate(t, with_null, 2, NULL, &r), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "texts[1]"));
    ck_assert_int_eq(tfm_translate(t, texts, -1, NULL, &r), TFM_ERR_ARG);
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.deadline_ms = 5;
    ck_assert_int_eq(tfm_translate(t, texts, 1, &o, &r), TFM_ERR_ARG);
    tfm_translate_options_init(&o);
    tfm_decode_options d;
    tfm_decode_options_init(&d);
    tfm_translator_decode_options(t, &d);
    d.callback = (tfm_decode_callback)1;
    o.decode = &d;
    ck_assert_int_eq(tfm_translate(t, texts, 1, &o, &r), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "on_token"));
    d.callback = NULL;
    d.beam_size = 0;
    ck_assert_int_ne(tfm_translate(t, texts, 1, &o, &r), TFM_OK);
    ck_assert_ptr_null(r);
    ck_assert_ptr_null(tfm_translator_submit(t, NULL, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_translator_decode_options(t, NULL), TFM_ERR_NULL);
    ck_assert_ptr_null(tfm_translation_text(NULL, 0, 0));
    ck_assert_int_eq(tfm_translate(t, texts, 1, NULL, &r), TFM_OK);
    ck_assert_ptr_null(tfm_translation_text(r, 1, 0));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_RANGE);
    ck_assert_ptr_null(tfm_translation_text(r, 0, 1));
    ck_assert(isnan(tfm_translation_score(r, 0, 5)));
    tfm_translation_free(r);
    ck_assert_int_eq(tfm_request_wait(NULL), TFM_ERR_NULL);
    tfm_request_free(NULL);
    tfm_translation_free(NULL);
    tfm_translator_free(NULL);
    tfm_translator_free(t);
}
END_TEST

/* Decoding options out of range, through options.decode: refused at once
 * (submit too) with the decoding's message naming the call, never a
 * misleading TFM_ERR_NOMEM nor a write past a buffer sized by them. */
static int ignore_token(void *user, int32_t token, const char *text, int64_t length)
{
    (void)user, (void)token, (void)text, (void)length;
    return 0;
}

START_TEST(bad_decode_options_are_refused_with_the_decodings_message)
{
    tfm_translator *t = open_or_fail(MARIAN, NULL);
    struct {
        const char *field;
        int32_t n_best, max_length, n_suppress_ids;
    } cases[] = {{"n_best", 2000000000, 0, 0}, {"n_best", -3, 0, 0},
                 {"max_length", 0, -1, 0},      {"max_length", 0, 2000000000, 0},
                 {"n_suppress_ids", 0, 0, -5}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tfm_decode_options d;
        tfm_decode_options_init(&d);
        ck_assert_int_eq(tfm_translator_decode_options(t, &d), TFM_OK);
        if (cases[i].n_best)
            d.n_best = cases[i].n_best;
        if (cases[i].max_length)
            d.max_length = cases[i].max_length;
        if (cases[i].n_suppress_ids)
            d.n_suppress_ids = cases[i].n_suppress_ids;
        tfm_translate_options o;
        tfm_translate_options_init(&o);
        o.decode = &d;
        tfm_translation *r = NULL;
        ck_assert_int_eq(tfm_translate(t, texts, 1, &o, &r), TFM_ERR_ARG);
        ck_assert_ptr_null(r);
        ck_assert_msg(strstr(tfm_last_error(), "tfm_translate: ") == tfm_last_error() &&
                          strstr(tfm_last_error(), cases[i].field),
                      "case %zu: %s", i, tfm_last_error());
        o.on_token = ignore_token; /* its stream is sized by max_length */
        ck_assert_ptr_null(tfm_translator_submit(t, texts[0], &o));
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
        ck_assert_msg(strstr(tfm_last_error(), "tfm_translator_submit: ") == tfm_last_error() &&
                          strstr(tfm_last_error(), cases[i].field),
                      "case %zu: %s", i, tfm_last_error());
    }
    tfm_translator_free(t);
}
END_TEST

static Suite *translate_suite(void)
{
    Suite *s = suite_create("translate");
    TCase *c = tcase_create("translator");
    tcase_set_timeout(c, 240);
    tcase_add_test(c, a_text_is_the_same_alone_or_in_any_batch);
    tcase_add_test(c, blank_texts_give_empty_translations);
    tcase_add_test(c, texts_the_tokenizer_reads_as_nothing_are_blank);
    tcase_add_test(c, defaults_are_the_models_own);
    tcase_add_test(c, long_sources_are_cut_and_say_so);
    tcase_add_test(c, languages_per_translation);
    tcase_add_test(c, alignments_on_request);
    tcase_add_test(c, threads_translate_at_once);
    tcase_add_test(c, threads_submit_at_once);
    tcase_add_test(c, threads_submit_at_once_int8);
    tcase_add_test(c, a_request_waiting_is_cancelled_at_once);
    tcase_add_test(c, a_request_being_decoded_stops_when_cancelled);
    tcase_add_test(c, streaming_gives_the_text_so_far);
    tcase_add_test(c, a_request_past_its_deadline_fails);
    tcase_add_test(c, a_full_queue_is_busy);
    tcase_add_test(c, on_done_may_wait_for_its_request);
    tcase_add_test(c, a_model_made_here_decodes_with_beam_4_and_no_non_text);
    tcase_add_test(c, placeholders_are_kept_in_every_decoding);
    tcase_add_test(c, training_pairs_get_placeholders);
    tcase_add_test(c, accelerator_marks_are_kept);
    tcase_add_test(c, glossary_terms_are_placed);
    tcase_add_test(c, caller_literals_are_kept);
    tcase_add_test(c, errors_are_named);
    tcase_add_test(c, bad_decode_options_are_refused_with_the_decodings_message);
    suite_add_tcase(s, c);
    return s;
}

TFM_CHECK_MAIN(translate_suite)
