/* tfm-bench-translator: one tfm_translator and many callers (issue 40).
 *
 *   tfm-bench-translator --model FILE_OR_FOLDER --sources FILE [--limit N]
 *       [--int8] [--threads N] [--workers N] [--max-wait-ms N] [--max-batch N]
 *       [--max-batch-tokens N] [--batched] [--callers N] [--threads-decoding N]
 *
 * The lines of --sources (the first --limit) are translated with the
 * model's own defaults, in the modes named, in the order named:
 *   --batched: one tfm_translate() call on every line: sentences/s;
 *   --callers N: N threads, each taking the next line (a shared index) and
 *     submitting it alone (tfm_translator_submit), waiting for it, until
 *     every line is done: sentences/s, and latency p50/p99 from submit to
 *     result; the scheduler's batches, counted from the bursts in which a
 *     worker finishes requests;
 *   --threads-decoding N: N threads, each calling tfm_translate() on its
 *     share of the lines at once (one model, N decodings): the resident
 *     memory after opening and the peak (VmHWM, ru_maxrss). It runs alone
 *     in its process, the peak being the process's.
 * With --batched and --callers both, every caller's text is compared with
 * the batched call's for its line, byte for byte (the translator promises
 * that a translation does not depend on its batch): the count that differ
 * is printed and makes the exit status 1.
 *
 * Each result is a JSON line on standard output, then a line for people.
 * --threads sets libtfm's threads (tfm_set_num_threads); run with
 * OPENBLAS_NUM_THREADS=1. A short tfm_translate() of the first lines warms
 * the translator (its decoding) before anything is timed. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "tfm/tfm.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The process's CPU seconds (its threads', user and system): on a shared
 * machine, the share of the wall time it ran. */
static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * (double)u.ru_utime.tv_usec +
           (double)u.ru_stime.tv_sec + 1e-6 * (double)u.ru_stime.tv_usec;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "tfm-bench-translator: %s%s%s\n", what, detail ? ": " : "",
            detail ? detail : "");
    exit(2);
}

static void *checked_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        die("out of memory", NULL);
    return p;
}

static char *checked_strdup(const char *s)
{
    char *copy = strdup(s);
    if (!copy)
        die("out of memory", NULL);
    return copy;
}

/* The first `limit` lines of path (all when limit < 0), without their
 * line ends. */
static char **read_lines(const char *path, int64_t limit, int64_t *count)
{
    FILE *f = fopen(path, "r");
    if (!f)
        die(path, strerror(errno));
    char **lines = NULL, *line = NULL;
    size_t capacity = 0, size = 0;
    int64_t n = 0;
    ssize_t length;
    while ((limit < 0 || n < limit) && (length = getline(&line, &size, f)) >= 0) {
        while (length > 0 && (line[length - 1] == '\n' || line[length - 1] == '\r'))
            line[--length] = '\0';
        if ((size_t)n == capacity) {
            capacity = capacity ? 2 * capacity : 1024;
            if (!(lines = realloc(lines, capacity * sizeof *lines)))
                die("out of memory", NULL);
        }
        lines[n++] = checked_strdup(line);
    }
    if (ferror(f))
        die(path, "read error");
    free(line);
    fclose(f);
    if (n == 0)
        die(path, "no lines");
    *count = n;
    return lines;
}

/* A field of /proc/self/status in kB ("VmRSS", "VmHWM"), or -1. */
static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':')
            kb = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

/* text as a JSON string. */
static void print_json_string(const char *text)
{
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)text; *c; c++)
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else if (*c < 0x20)
            printf("\\u%04x", *c);
        else
            putchar(*c);
    putchar('"');
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of sorted[0, n), nearest rank. */
static double quantile(const double *sorted, int64_t n, double q)
{
    int64_t rank = (int64_t)(q * (double)n + 0.999999);
    return sorted[rank < 1 ? 0 : rank > n ? n - 1 : rank - 1];
}

typedef struct bench {
    tfm_translator *translator;
    char **lines;
    int64_t n;
    char **batched; /* the batched call's texts, or NULL when it has not run */
    char **alone;   /* the callers' texts, or NULL */
} bench;

static char **texts_of(const tfm_translation *r, int64_t n)
{
    char **texts = checked_calloc((size_t)n, sizeof *texts);
    for (int64_t i = 0; i < n; i++)
        texts[i] = checked_strdup(tfm_translation_text(r, i, 0));
    return texts;
}

static void translate_or_die(bench *b, char *const *lines, int64_t n, tfm_translation **out)
{
    if (tfm_translate(b->translator, (const char *const *)lines, n, NULL, out) != TFM_OK)
        die("tfm_translate", tfm_last_error());
}

static void run_batched(bench *b)
{
    tfm_translation *r = NULL;
    double start = now_s(), cpu = cpu_s();
    translate_or_die(b, b->lines, b->n, &r);
    double seconds = now_s() - start;
    cpu = cpu_s() - cpu;
    b->batched = texts_of(r, b->n);
    tfm_translation_free(r);
    printf("{\"mode\": \"batched\", \"sentences\": %lld, \"seconds\": %.4f, "
           "\"cpu_seconds\": %.3f, \"sentences_per_s\": %.3f}\n",
           (long long)b->n, seconds, cpu, (double)b->n / seconds);
    printf("batched: %lld sentences in one call, %.2f s: %.1f sentences/s\n", (long long)b->n,
           seconds, (double)b->n / seconds);
}

/* --- callers ------------------------------------------------------------------------------- */

typedef struct callers {
    bench *b;
    atomic_llong next;
    char **texts;
    double *latency;             /* seconds, by line */
    double *finished;            /* when a worker finished the line's request */
    pthread_t *finisher;         /* and which worker */
    atomic_llong busy;           /* submits refused with TFM_ERR_BUSY, retried */
    const char *failure;         /* the first failure's message, or NULL */
    pthread_mutex_t failure_lock;
    char message[512];
} callers;

typedef struct done_note {
    callers *c;
    int64_t line;
} done_note;

/* On the worker's thread, as it finishes the request. */
static void on_done(void *user, tfm_request *request)
{
    (void)request;
    done_note *note = user;
    note->c->finished[note->line] = now_s();
    note->c->finisher[note->line] = pthread_self();
}

static void fail(callers *c, const char *what, const char *message)
{
    pthread_mutex_lock(&c->failure_lock);
    if (!c->failure) {
        snprintf(c->message, sizeof c->message, "%s: %s", what, message);
        c->failure = c->message;
    }
    pthread_mutex_unlock(&c->failure_lock);
}

static void *caller_main(void *arg)
{
    callers *c = arg;
    bench *b = c->b;
    for (int64_t i; (i = atomic_fetch_add(&c->next, 1)) < b->n;) {
        done_note note = {c, i};
        tfm_translate_options o;
        tfm_translate_options_init(&o);
        o.on_done = on_done;
        o.user = &note;
        double start = now_s();
        tfm_request *q;
        while (!(q = tfm_translator_submit(b->translator, b->lines[i], &o)) &&
               tfm_last_status() == TFM_ERR_BUSY) {
            atomic_fetch_add(&c->busy, 1);
            nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        }
        if (!q) {
            fail(c, "tfm_translator_submit", tfm_last_error());
            return NULL;
        }
        const tfm_translation *r = NULL;
        if (tfm_request_wait(q) != TFM_OK || tfm_request_result(q, &r) != TFM_OK) {
            fail(c, "a request", tfm_request_error(q));
            tfm_request_free(q);
            return NULL;
        }
        c->latency[i] = now_s() - start;
        c->texts[i] = checked_strdup(tfm_translation_text(r, 0, 0));
        tfm_request_free(q);
    }
    return NULL;
}

/* The scheduler's batches, from the order in which its workers finished
 * the requests: a worker finishes a batch's requests one after another,
 * then decodes the next; a gap of more than `gap` seconds between two of
 * one worker's finishes starts a batch. Returns their count. */
static int64_t count_batches(const callers *c, int64_t n, double gap)
{
    int64_t *order = checked_calloc((size_t)n, sizeof *order);
    int64_t batches = 0;
    char *counted = checked_calloc((size_t)n, 1);
    for (int64_t i = 0; i < n; i++) {
        if (counted[i])
            continue;
        /* the finishes of line i's worker, in time order */
        int64_t m = 0;
        for (int64_t j = 0; j < n; j++)
            if (!counted[j] && pthread_equal(c->finisher[j], c->finisher[i])) {
                order[m++] = j;
                counted[j] = 1;
            }
        double *times = checked_calloc((size_t)m, sizeof *times);
        for (int64_t k = 0; k < m; k++)
            times[k] = c->finished[order[k]];
        qsort(times, (size_t)m, sizeof *times, by_value);
        for (int64_t k = 0; k < m; k++)
            batches += k == 0 || times[k] - times[k - 1] > gap;
        free(times);
    }
    free(counted);
    free(order);
    return batches;
}

static void run_callers(bench *b, int32_t n_callers)
{
    callers c = {.b = b};
    atomic_init(&c.next, 0);
    atomic_init(&c.busy, 0);
    pthread_mutex_init(&c.failure_lock, NULL);
    c.texts = checked_calloc((size_t)b->n, sizeof *c.texts);
    c.latency = checked_calloc((size_t)b->n, sizeof *c.latency);
    c.finished = checked_calloc((size_t)b->n, sizeof *c.finished);
    c.finisher = checked_calloc((size_t)b->n, sizeof *c.finisher);
    pthread_t *threads = checked_calloc((size_t)n_callers, sizeof *threads);
    double start = now_s(), cpu = cpu_s();
    int32_t started = 0;
    for (; started < n_callers; started++)
        if (pthread_create(&threads[started], NULL, caller_main, &c) != 0)
            break;
    for (int32_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    double seconds = now_s() - start;
    cpu = cpu_s() - cpu;
    if (started < n_callers)
        die("cannot start the callers' threads", NULL);
    if (c.failure)
        die(c.failure, NULL);
    double *sorted = checked_calloc((size_t)b->n, sizeof *sorted);
    memcpy(sorted, c.latency, (size_t)b->n * sizeof *sorted);
    qsort(sorted, (size_t)b->n, sizeof *sorted, by_value);
    double p50 = 1e3 * quantile(sorted, b->n, 0.50), p99 = 1e3 * quantile(sorted, b->n, 0.99);
    int64_t batches = count_batches(&c, b->n, 1e-3);
    printf("{\"mode\": \"callers\", \"callers\": %d, \"sentences\": %lld, \"seconds\": %.4f, "
           "\"cpu_seconds\": %.3f, \"sentences_per_s\": %.3f, \"p50_ms\": %.2f, \"p99_ms\": %.2f, "
           "\"batches\": %lld, \"mean_batch\": %.2f, \"busy_retries\": %lld}\n",
           (int)n_callers, (long long)b->n, seconds, cpu, (double)b->n / seconds, p50, p99,
           (long long)batches, (double)b->n / (double)batches,
           (long long)atomic_load(&c.busy));
    printf("callers: %d callers, %lld sentences, %.2f s: %.1f sentences/s, p50 %.1f ms, "
           "p99 %.1f ms; %lld batches of %.1f on average\n",
           (int)n_callers, (long long)b->n, seconds, (double)b->n / seconds, p50, p99,
           (long long)batches, (double)b->n / (double)batches);
    b->alone = c.texts;
    free(c.latency);
    free(c.finished);
    free(c.finisher);
    free(sorted);
    free(threads);
    pthread_mutex_destroy(&c.failure_lock);
}

/* The lines whose callers' text differs from the batched call's (the
 * translator promises none), the first few shown on stderr. */
static int64_t compare(const bench *b)
{
    int64_t differ = 0;
    for (int64_t i = 0; i < b->n; i++)
        if (strcmp(b->alone[i], b->batched[i]) != 0 && differ++ < 3)
            fprintf(stderr, "line %lld differs:\n  batched: %s\n  alone:   %s\n",
                    (long long)i + 1, b->batched[i], b->alone[i]);
    printf("{\"check\": \"callers_equal_batched\", \"sentences\": %lld, \"differ\": %lld}\n",
           (long long)b->n, (long long)differ);
    printf("batch invariance: %lld of %lld callers' texts differ from the batched call's\n",
           (long long)differ, (long long)b->n);
    return differ;
}

/* --- decoding threads ------------------------------------------------------------------------- */

typedef struct share {
    bench *b;
    int64_t first, count;
    const char *failure;
    char message[512];
} share;

static void *decoding_main(void *arg)
{
    share *s = arg;
    tfm_translation *r = NULL;
    if (tfm_translate(s->b->translator, (const char *const *)s->b->lines + s->first, s->count,
                      NULL, &r) != TFM_OK) {
        snprintf(s->message, sizeof s->message, "%s", tfm_last_error());
        s->failure = s->message;
    }
    tfm_translation_free(r);
    return NULL;
}

static void run_threads_decoding(bench *b, int32_t n_threads, long open_kb)
{
    pthread_t *threads = checked_calloc((size_t)n_threads, sizeof *threads);
    share *shares = checked_calloc((size_t)n_threads, sizeof *shares);
    double start = now_s();
    int32_t started = 0;
    for (; started < n_threads; started++) {
        share *s = &shares[started];
        s->b = b;
        s->first = b->n * started / n_threads;
        s->count = b->n * (started + 1) / n_threads - s->first;
        if (pthread_create(&threads[started], NULL, decoding_main, s) != 0)
            break;
    }
    for (int32_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    double seconds = now_s() - start;
    if (started < n_threads)
        die("cannot start the decoding threads", NULL);
    for (int32_t i = 0; i < n_threads; i++)
        if (shares[i].failure)
            die("tfm_translate", shares[i].failure);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    long hwm = status_kb("VmHWM");
    printf("{\"mode\": \"threads_decoding\", \"threads_decoding\": %d, \"sentences\": %lld, "
           "\"seconds\": %.4f, \"open_rss_kb\": %ld, \"peak_vmhwm_kb\": %ld, "
           "\"peak_maxrss_kb\": %ld}\n",
           (int)n_threads, (long long)b->n, seconds, open_kb, hwm, usage.ru_maxrss);
    printf("threads decoding: %d threads on one model, %lld sentences, %.2f s: RSS after "
           "opening %.1f MB, peak %.1f MB (VmHWM; ru_maxrss %.1f MB)\n",
           (int)n_threads, (long long)b->n, seconds, open_kb / 1024.0, hwm / 1024.0,
           usage.ru_maxrss / 1024.0);
    free(threads);
    free(shares);
}

/* --- the command line ------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: tfm-bench-translator --model FILE_OR_FOLDER --sources FILE [--limit N]\n"
            "    [--int8] [--threads N] [--workers N] [--max-wait-ms N] [--max-batch N]\n"
            "    [--max-batch-tokens N] [--batched] [--callers N] [--threads-decoding N]\n");
    exit(2);
}

static long long number(const char *flag, const char *text, long long low, long long high)
{
    char *end;
    errno = 0;
    long long v = text ? strtoll(text, &end, 10) : 0;
    if (!text || errno || *end || end == text || v < low || v > high) {
        fprintf(stderr, "tfm-bench-translator: %s takes a whole number from %lld to %lld\n",
                flag, low, high);
        exit(2);
    }
    return v;
}

enum { BATCHED = 1, CALLERS, THREADS_DECODING };

int main(int argc, char **argv)
{
    const char *model = NULL, *sources = NULL;
    int64_t limit = -1;
    int32_t threads = 1, n_callers = 0, n_decoding = 0;
    int modes[8], n_modes = 0;
    tfm_translator_options o;
    tfm_translator_options_init(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int mode = 0;
        if (!strcmp(a, "--model") && v)
            model = argv[++i];
        else if (!strcmp(a, "--sources") && v)
            sources = argv[++i];
        else if (!strcmp(a, "--limit"))
            limit = number(a, v, 1, 1LL << 40), i++;
        else if (!strcmp(a, "--int8"))
            o.int8 = 1;
        else if (!strcmp(a, "--threads"))
            threads = (int32_t)number(a, v, 1, 64), i++;
        else if (!strcmp(a, "--workers"))
            o.workers = (int32_t)number(a, v, 1, 64), i++;
        else if (!strcmp(a, "--max-wait-ms"))
            o.max_wait_ms = (int32_t)number(a, v, 0, 60000), i++;
        else if (!strcmp(a, "--max-batch"))
            o.max_batch = (int32_t)number(a, v, 1, 4096), i++;
        else if (!strcmp(a, "--max-batch-tokens"))
            o.max_batch_tokens = number(a, v, 1, 1 << 24), i++;
        else if (!strcmp(a, "--batched"))
            mode = BATCHED;
        else if (!strcmp(a, "--callers"))
            n_callers = (int32_t)number(a, v, 1, 4096), i++, mode = CALLERS;
        else if (!strcmp(a, "--threads-decoding"))
            n_decoding = (int32_t)number(a, v, 1, 4096), i++, mode = THREADS_DECODING;
        else
            usage();
        if (mode && n_modes < 8)
            modes[n_modes++] = mode;
    }
    if (!model || !sources || n_modes == 0)
        usage();
    for (int k = 0; k < n_modes; k++)
        if (modes[k] == THREADS_DECODING && n_modes > 1)
            die("--threads-decoding runs alone (its peak memory is the process's)", NULL);
    if (tfm_set_num_threads(threads) != TFM_OK)
        die("tfm_set_num_threads", tfm_last_error());

    bench b = {0};
    b.lines = read_lines(sources, limit, &b.n);
    if (!(b.translator = tfm_translator_open(model, &o)))
        die("tfm_translator_open", tfm_last_error());
    long open_kb = status_kb("VmRSS");
    printf("{\"model\": ");
    print_json_string(model);
    printf(", \"sources\": ");
    print_json_string(sources);
    printf(", \"sentences\": %lld, \"int8\": %d, \"threads\": %d, \"workers\": %d, "
           "\"max_wait_ms\": %d, \"max_batch\": %d, \"max_batch_tokens\": %lld, "
           "\"open_rss_kb\": %ld}\n",
           (long long)b.n, (int)o.int8, (int)threads, (int)o.workers,
           (int)o.max_wait_ms, (int)o.max_batch, (long long)o.max_batch_tokens, open_kb);

    if (modes[0] != THREADS_DECODING) {
        /* the translator's decoding made once, before anything is timed */
        tfm_translation *warm = NULL;
        translate_or_die(&b, b.lines, b.n < 8 ? b.n : 8, &warm);
        tfm_translation_free(warm);
    }
    for (int k = 0; k < n_modes; k++) {
        if (modes[k] == BATCHED)
            run_batched(&b);
        else if (modes[k] == CALLERS)
            run_callers(&b, n_callers);
        else
            run_threads_decoding(&b, n_decoding, open_kb);
        fflush(stdout);
    }
    int64_t differ = b.batched && b.alone ? compare(&b) : 0;
    tfm_translator_free(b.translator);
    for (int64_t i = 0; i < b.n; i++) {
        free(b.lines[i]);
        free(b.batched ? b.batched[i] : NULL);
        free(b.alone ? b.alone[i] : NULL);
    }
    free(b.lines);
    free(b.batched);
    free(b.alone);
    if (fflush(stdout) != 0 || ferror(stdout))
        die("cannot write the results", strerror(errno));
    return differ ? 1 : 0;
}
