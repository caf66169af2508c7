/* The translator's scheduler: requests from any number of callers wait in
 * a bounded queue; worker threads take the oldest with every pending
 * request that decodes alike (equal settings), once the batch is full (by
 * sources or padded tokens) or the oldest has waited max_wait_ms, and
 * decode them as tfm_translate does. A request's result depends on its
 * text and options only. Each request has its own lock, so a finished one
 * outlives the translator. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "translate/text.h"
#include "translate/translator.h"

enum { QUEUED, RUNNING, FINISHED, DONE };

struct tfm_request {
    tfm_translator *translator;
    tfm__settings settings;
    tfm__job job;
    tfm_translation *result;
    tfm_translate_token_fn on_token;
    tfm_request_done_fn on_done;
    void *user;
    double submitted, deadline; /* deadline 0: none */
    atomic_int cancelled;
    atomic_int state;
    tfm_status status;
    pthread_t finisher; /* the thread calling on_done */
    char message[512];
    int32_t *stream; /* on_token's ids so far */
    pthread_mutex_t lock; /* refs, and state's change to DONE */
    pthread_cond_t changed;
    int32_t refs;         /* the caller's and the scheduler's */
    struct tfm_request *next;
};

static void request_destroy(tfm_request *q)
{
    free(q->job.ids);
    tfm__masked_free(q->job.masked);
    free(q->job.prefix);
    free(q->stream);
    tfm_translation_free(q->result);
    tfm__settings_free(&q->settings);
    pthread_cond_destroy(&q->changed);
    pthread_mutex_destroy(&q->lock);
    free(q);
}

static void release(tfm_request *q)
{
    pthread_mutex_lock(&q->lock);
    int32_t left = --q->refs;
    pthread_mutex_unlock(&q->lock);
    if (left == 0)
        request_destroy(q);
}

/* Ends the request with status (message: the error's), tells its caller,
 * and drops the scheduler's reference. */
static void finish(tfm_request *q, tfm_status status, const char *message)
{
    q->status = status;
    snprintf(q->message, sizeof q->message, "%s", status == TFM_OK ? "" : message);
    q->finisher = pthread_self();
    atomic_store(&q->state, FINISHED);
    if (q->on_done)
        q->on_done(q->user, q);
    pthread_mutex_lock(&q->lock);
    atomic_store(&q->state, DONE);
    pthread_cond_broadcast(&q->changed);
    pthread_mutex_unlock(&q->lock);
    release(q);
}

static void finish_cancelled(tfm_request *q)
{
    finish(q, TFM_ERR_CANCELLED, "the request was cancelled before it was translated");
}

static void finish_timed_out(tfm_request *q)
{
    finish(q, TFM_ERR_TIMEOUT, "the request's deadline passed before it was translated");
}

int tfm__request_token(tfm__job *job, const tfm_translator *t, const tfm__settings *s,
                       int32_t token, int64_t position)
{
    tfm_request *q = job->request;
    if (atomic_load(&q->cancelled))
        job->stopped = TFM__STOP_CANCELLED;
    else if (q->deadline > 0.0 && tfm__now() > q->deadline)
        job->stopped = TFM__STOP_TIMEOUT;
    if (job->stopped || !q->on_token || position > s->decode.max_length)
        return job->stopped != TFM__RUNNING;
    q->stream[position] = token;
    char *text = NULL;
    int64_t length = 0;
    /* a token the caller cannot be given fails the request: a stream never
     * skips one */
    tfm_status st = tfm__text_decode("tfm_translator_submit", t->model, &s->text, q->stream,
                                     position + 1, &text, &length);
    if (st == TFM_OK && job->masked)
        st = tfm__masked_restore("tfm_translator_submit", job->masked, &text, &length);
    if (st != TFM_OK) {
        job->stopped = TFM__STOP_FAILED;
        q->status = st;
        snprintf(q->message, sizeof q->message, "%s", tfm_last_error());
    } else if (q->on_token(q->user, token, text, length) != 0) {
        job->stopped = TFM__STOP_CALLER;
    }
    free(text);
    return job->stopped != TFM__RUNNING;
}

/* --- the workers ------------------------------------------------------------------------ */

static void unlink_request(tfm_translator *t, tfm_request *q)
{
    tfm_request **link = &t->queue_head, *before = NULL;
    while (*link != q) {
        before = *link;
        link = &(*link)->next;
    }
    *link = q->next;
    if (t->queue_tail == q)
        t->queue_tail = before;
    q->next = NULL;
    t->queued--;
}

/* Takes the oldest request and those that decode alike into taken, once
 * the batch is full or the oldest has waited enough; their count, 0 when
 * it is not yet time (then *due is when it will be). With t->lock. */
static int64_t take_batch(tfm_translator *t, tfm_request **taken, double *due)
{
    tfm_request *head = t->queue_head;
    int64_t max_batch = t->options.max_batch, budget = t->options.max_batch_tokens;
    int64_t n = 0, longest = 0;
    int full = 0;
    for (tfm_request *q = head; q && !full; q = q->next) {
        if (q != head && !tfm__settings_equal(&q->settings, &head->settings))
            continue;
        int64_t wider = q->job.n_ids > longest ? q->job.n_ids : longest;
        if (n > 0 && (n + 1) * wider > budget) {
            full = 1;
            break;
        }
        taken[n++] = q;
        longest = wider;
        /* sampled texts run alone (tfm__translator_run): take one at a time */
        full = n == max_batch || q->settings.decode.strategy == TFM_DECODE_SAMPLE;
    }
    *due = head->submitted + 1e-3 * t->options.max_wait_ms;
    if (!full && tfm__now() < *due && !t->stopping)
        return 0;
    /* what is ready is spread over the idle workers (this one among them),
     * each decoding on its share of libtfm's threads */
    int32_t idle = t->started - t->busy;
    n = idle > 1 ? (n + idle - 1) / idle : n;
    for (int64_t i = 0; i < n; i++) {
        unlink_request(t, taken[i]);
        atomic_store(&taken[i]->state, RUNNING);
    }
    return n;
}

/* Decodes the requests taken and finishes each. */
static void decode_batch(tfm_translator *t, tfm_request **taken, int64_t n, tfm__job **rows)
{
    double now = tfm__now();
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        tfm_request *q = taken[i];
        if (atomic_load(&q->cancelled))
            finish_cancelled(q);
        else if (q->deadline > 0.0 && now > q->deadline)
            finish_timed_out(q);
        else if (q->job.n_ids == 0) /* a blank text */
            finish(q, TFM_OK, "");
        else
            rows[m++] = &q->job;
    }
    if (m == 0)
        return;
    tfm__jobs_sort(rows, m);
    tfm_clear_error();
    tfm_status status = tfm__translator_run("tfm_translator_submit", t,
                                             &rows[0]->request->settings, rows, m);
    char message[512];
    snprintf(message, sizeof message, "%s", tfm_last_error());
    now = tfm__now();
    for (int64_t i = 0; i < m; i++) {
        tfm_request *q = rows[i]->request;
        if (status != TFM_OK)
            finish(q, status, message);
        else if (rows[i]->stopped == TFM__STOP_FAILED)
            finish(q, q->status, strcpy(message, q->message));
        else if (rows[i]->stopped == TFM__STOP_CANCELLED || atomic_load(&q->cancelled))
            finish_cancelled(q);
        else if (rows[i]->stopped == TFM__STOP_TIMEOUT || (q->deadline > 0.0 && now > q->deadline))
            finish_timed_out(q);
        else
            finish(q, TFM_OK, "");
    }
}

static void wait_until(pthread_cond_t *cond, pthread_mutex_t *lock, double due)
{
    /* the condition's clock is CLOCK_MONOTONIC, as tfm__now's */
    struct timespec at = {.tv_sec = (time_t)due};
    at.tv_nsec = (long)((due - (double)at.tv_sec) * 1e9);
    pthread_cond_timedwait(cond, lock, &at);
}

/* A worker thread and its room for a batch. */
struct tfm__worker {
    tfm_translator *translator;
    pthread_t thread;
    int threads; /* of libtfm's, for this worker's loops */
    tfm_request **taken;
    tfm__job **rows;
};

static void *worker_main(void *arg)
{
    tfm__worker *w = arg;
    tfm_translator *t = w->translator;
    tfm__limit_threads(w->threads);
    pthread_mutex_lock(&t->lock);
    while (!t->stopping) {
        double due = 0.0;
        int64_t n = 0;
        if (!t->queue_head)
            pthread_cond_wait(&t->work, &t->lock);
        else if (!(n = take_batch(t, w->taken, &due)))
            wait_until(&t->work, &t->lock, due);
        if (n == 0)
            continue;
        t->busy++;
        if (t->queue_head) /* what is left is another idle worker's */
            pthread_cond_signal(&t->work);
        pthread_mutex_unlock(&t->lock);
        decode_batch(t, w->taken, n, w->rows);
        pthread_mutex_lock(&t->lock);
        t->busy--;
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static void free_workers(tfm_translator *t)
{
    for (int32_t i = 0; t->workers && i < t->n_workers; i++) {
        free(t->workers[i].taken);
        free(t->workers[i].rows);
    }
    free(t->workers);
    t->workers = NULL;
}

/* Starts the workers, with t->lock; TFM_OK once at least one runs. */
static tfm_status start_workers(const char *op, tfm_translator *t)
{
    if (t->started > 0)
        return TFM_OK;
    size_t batch = (size_t)t->options.max_batch;
    int32_t threads = tfm_get_num_threads();
    int32_t n = t->options.workers ? t->options.workers : threads, ready = 0;
    t->n_workers = n;
    if ((t->workers = calloc((size_t)n, sizeof *t->workers)))
        for (; ready < n; ready++) {
            tfm__worker *w = &t->workers[ready];
            w->translator = t;
            w->threads = threads / n > 1 ? threads / n : 1;
            if (!(w->taken = malloc(batch * sizeof *w->taken)) ||
                !(w->rows = malloc(batch * sizeof *w->rows)))
                break;
        }
    if (ready < n) {
        free_workers(t);
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the scheduler", op);
    }
    int error = 0;
    while (t->started < n &&
           (error = pthread_create(&t->workers[t->started].thread, NULL, worker_main,
                                   &t->workers[t->started])) == 0)
        t->started++;
    if (t->started == 0) {
        free_workers(t);
        return tfm__fail(TFM_ERR_NOMEM, "%s: cannot start the scheduler's threads: %s", op,
                         strerror(error));
    }
    return TFM_OK;
}

void tfm__scheduler_stop(tfm_translator *t)
{
    pthread_mutex_lock(&t->lock);
    t->stopping = 1;
    tfm_request *waiting = t->queue_head;
    for (tfm_request *q = waiting; q; q = q->next)
        atomic_store(&q->state, RUNNING);
    t->queue_head = t->queue_tail = NULL;
    t->queued = 0;
    pthread_cond_broadcast(&t->work);
    pthread_mutex_unlock(&t->lock);
    for (tfm_request *q = waiting, *next; q; q = next) {
        next = q->next;
        finish_cancelled(q);
    }
    for (int32_t i = 0; i < t->started; i++)
        pthread_join(t->workers[i].thread, NULL);
    free_workers(t);
    t->started = 0;
}

/* --- requests -------------------------------------------------------------------------- */

tfm_request *tfm_translator_submit(tfm_translator *t, const char *text,
                                   const tfm_translate_options *options)
{
    const char *op = "tfm_translator_submit";
    if (!t || !text) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, t ? "text" : "translator");
        return NULL;
    }
    tfm_request *q = calloc(1, sizeof *q);
    if (!q) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return NULL;
    }
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->changed, NULL);
    q->translator = t;
    q->refs = 2;
    q->submitted = tfm__now();
    tfm_status s = tfm__settings_resolve(op, t, options, &q->settings, &q->job.prefix,
                                         &q->job.n_prefix);
    if (s == TFM_OK && options && options->struct_size >= sizeof *options) {
        if (options->deadline_ms < 0)
            s = tfm__fail(TFM_ERR_ARG, "%s: options.deadline_ms %lld is negative", op,
                          (long long)options->deadline_ms);
        q->deadline = options->deadline_ms > 0 ? q->submitted + 1e-3 * (double)options->deadline_ms
                                               : 0.0;
        q->on_token = options->on_token;
        q->on_done = options->on_done;
        q->user = options->user;
    }
    if (s == TFM_OK && !(q->result = tfm__translation_create(op, 1, &q->settings)))
        s = tfm_last_status();
    if (s == TFM_OK && q->on_token &&
        !(q->stream = calloc((size_t)q->settings.decode.max_length + 1, sizeof *q->stream)))
        s = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    if (q->stream)
        q->stream[0] = q->settings.decode.bos_id;
    if (s == TFM_OK) {
        q->job.out = q->result;
        q->job.request = q;
        s = tfm__job_encode(op, t, &q->settings, text, &q->job);
    }
    if (s == TFM_OK) {
        pthread_mutex_lock(&t->lock);
        if (t->stopping)
            s = tfm__fail(TFM_ERR_STATE, "%s: the translator is being freed", op);
        else if (t->queued >= t->options.queue_capacity)
            s = tfm__fail(TFM_ERR_BUSY, "%s: %d requests are waiting, the queue's capacity; "
                          "try again later", op, (int)t->options.queue_capacity);
        else
            s = start_workers(op, t);
        if (s == TFM_OK) {
            atomic_store(&q->state, QUEUED);
            if (t->queue_tail)
                t->queue_tail->next = q;
            else
                t->queue_head = q;
            t->queue_tail = q;
            t->queued++;
            pthread_cond_signal(&t->work);
        }
        pthread_mutex_unlock(&t->lock);
    }
    if (s != TFM_OK) {
        request_destroy(q);
        return NULL;
    }
    return q;
}

tfm_status tfm_request_wait(tfm_request *q)
{
    if (!q)
        return tfm__fail(TFM_ERR_NULL, "tfm_request_wait: request is NULL");
    /* from its own on_done: finished, though not yet DONE */
    if (atomic_load(&q->state) == FINISHED && pthread_equal(q->finisher, pthread_self()))
        return q->status;
    pthread_mutex_lock(&q->lock);
    while (atomic_load(&q->state) != DONE)
        pthread_cond_wait(&q->changed, &q->lock);
    pthread_mutex_unlock(&q->lock);
    return q->status;
}

int32_t tfm_request_done(const tfm_request *q)
{
    if (!q) {
        tfm__fail(TFM_ERR_NULL, "tfm_request_done: request is NULL");
        return 0;
    }
    return atomic_load(&((tfm_request *)q)->state) == DONE;
}

tfm_status tfm_request_result(const tfm_request *q, const tfm_translation **result)
{
    const char *op = "tfm_request_result";
    if (result)
        *result = NULL;
    if (!q)
        return tfm__fail(TFM_ERR_NULL, "%s: request is NULL", op);
    if (atomic_load(&((tfm_request *)q)->state) < FINISHED)
        return tfm__fail(TFM_ERR_STATE, "%s: the request has not finished", op);
    if (result && q->status == TFM_OK)
        *result = q->result;
    return q->status;
}

const char *tfm_request_error(const tfm_request *q)
{
    if (!q) {
        tfm__fail(TFM_ERR_NULL, "tfm_request_error: request is NULL");
        return "";
    }
    return atomic_load(&((tfm_request *)q)->state) < FINISHED ? "" : q->message;
}

void tfm_request_cancel(tfm_request *q)
{
    if (!q || atomic_load(&q->state) >= FINISHED)
        return;
    atomic_store(&q->cancelled, 1);
    tfm_translator *t = q->translator;
    pthread_mutex_lock(&t->lock);
    int waiting = atomic_load(&q->state) == QUEUED;
    if (waiting) {
        unlink_request(t, q);
        atomic_store(&q->state, RUNNING);
    }
    pthread_mutex_unlock(&t->lock);
    if (waiting)
        finish_cancelled(q);
}

void tfm_request_free(tfm_request *q)
{
    if (!q)
        return;
    tfm_request_cancel(q);
    release(q);
}
