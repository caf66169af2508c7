/* tfm-serve: a translation server that speaks LibreTranslate's API, so its
 * clients (Weblate, browser extensions, editors, the npm and pip client
 * packages) use libtfm's models as they are:
 *
 *   tfm-serve --model en:fr=runs/translation/model.safetensors
 *   curl -s localhost:5000/translate -H 'Content-Type: application/json' \
 *        -d '{"q": "Cannot open the file", "source": "en", "target": "fr"}'
 *
 * HTTP is libmicrohttpd's (one polling thread; a request waiting for its
 * translations is suspended, holding no thread). Every text of every
 * request is submitted to its model's translator (tfm_translator_submit),
 * whose scheduler decodes the texts of all the clients together in
 * batches; a text's translation is the same as tfm_translate's of it
 * alone. Limits: body size, characters and texts a request, the
 * translator's queue (429 past it), a deadline a request, connection idle
 * time and count. SIGTERM or SIGINT: stop accepting, answer the requests
 * already received, exit 0. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#include <tfm/tfm.h>

#include "cli.h"
#include "serve_json.h"

static const char *program = "tfm-serve";

enum { MAX_LANGUAGES = 256, MAX_ROUTES = 4096, MAX_ALTERNATIVES = 8 };

typedef struct config {
    cli_list models;
    const char *host, *source_language, *target_language;
    int64_t port, threads, workers, int8, log;
    int64_t max_body, max_chars, max_items, queue, deadline_ms, timeout, max_connections;
} config;

/* A language as clients name it ("en") and as the model's tokenizer spells
 * it ("en_XX"; NULL: a model of one pair, told no language). */
typedef struct language {
    char *code, *model_code;
} language;

typedef struct served_model {
    const char *path;
    tfm_translator *translator;
    tfm_decode_options decode;
} served_model;

/* A pair of languages and the model that translates it. */
typedef struct route {
    const language *source, *target;
    served_model *model;
} route;

typedef struct server {
    config c;
    served_model models[CLI_LIST_MAX];
    int n_models;
    language languages[MAX_LANGUAGES]; /* each model's, in --model order */
    int n_languages;
    route routes[MAX_ROUTES];
    int n_routes;
    struct MHD_Daemon *daemon;
    atomic_int stopping;
    atomic_int active; /* requests received and not yet answered */
} server;

/* --- the models and their languages -------------------------------------------------- */

static const struct {
    const char *code, *name;
} language_names[] = {
    {"ar", "Arabic"},     {"cs", "Czech"},     {"da", "Danish"},    {"de", "German"},
    {"el", "Greek"},      {"en", "English"},   {"es", "Spanish"},   {"fi", "Finnish"},
    {"fr", "French"},     {"he", "Hebrew"},    {"hi", "Hindi"},     {"hu", "Hungarian"},
    {"id", "Indonesian"}, {"it", "Italian"},   {"ja", "Japanese"},  {"ko", "Korean"},
    {"nl", "Dutch"},      {"pl", "Polish"},    {"pt", "Portuguese"}, {"ro", "Romanian"},
    {"ru", "Russian"},    {"sv", "Swedish"},   {"tr", "Turkish"},   {"uk", "Ukrainian"},
    {"vi", "Vietnamese"}, {"zh", "Chinese"},
};

/* A language's English name, or its code when this table lacks it. */
static const char *language_name(const char *code)
{
    for (size_t i = 0; i < sizeof language_names / sizeof language_names[0]; i++)
        if (!strcmp(language_names[i].code, code))
            return language_names[i].name;
    return code;
}

/* The language code (client's) known as code for model_code's model;
 * NULL after a message when there are too many. */
static language *add_language(server *s, const char *code, size_t length,
                              const char *model_code, size_t model_length)
{
    if (s->n_languages == MAX_LANGUAGES) {
        fprintf(stderr, "%s: more than %d languages\n", program, MAX_LANGUAGES);
        return NULL;
    }
    language *l = &s->languages[s->n_languages];
    l->code = strndup(code, length);
    l->model_code = model_code ? strndup(model_code, model_length) : NULL;
    if (!l->code || (model_code && !l->model_code)) {
        fprintf(stderr, "%s: out of memory\n", program);
        return NULL;
    }
    s->n_languages++;
    return l;
}

static int add_route(server *s, const language *source, const language *target,
                     served_model *model)
{
    for (int i = 0; i < s->n_routes; i++)
        if (!strcmp(s->routes[i].source->code, source->code) &&
            !strcmp(s->routes[i].target->code, target->code)) {
            fprintf(stderr, "%s: %s to %s is translated by two models (%s and %s)\n", program,
                    source->code, target->code, s->routes[i].model->path, model->path);
            return -1;
        }
    if (s->n_routes == MAX_ROUTES) {
        fprintf(stderr, "%s: more than %d language pairs\n", program, MAX_ROUTES);
        return -1;
    }
    s->routes[s->n_routes++] = (route){source, target, model};
    return 0;
}

/* One --model: [LANGUAGES=]PATH, LANGUAGES being SOURCE:TARGET for a model
 * of one pair, or CODE[/MODEL_CODE],... for a multilingual one (every pair
 * of them); without LANGUAGES, --source-language:--target-language. 0, or
 * -1 after a message. */
static int open_model(server *s, const char *spec)
{
    const char *equals = strchr(spec, '=');
    const char *path = equals ? equals + 1 : spec;
    served_model *m = &s->models[s->n_models];
    m->path = path;
    int first = s->n_languages;
    if (!equals) {
        if (!add_language(s, s->c.source_language, strlen(s->c.source_language), NULL, 0) ||
            !add_language(s, s->c.target_language, strlen(s->c.target_language), NULL, 0))
            return -1;
    } else if (memchr(spec, ':', (size_t)(equals - spec))) {
        const char *colon = memchr(spec, ':', (size_t)(equals - spec));
        if (colon == spec || colon + 1 == equals || memchr(colon + 1, ':', (size_t)(equals - colon - 1)) ||
            !add_language(s, spec, (size_t)(colon - spec), NULL, 0) ||
            !add_language(s, colon + 1, (size_t)(equals - colon - 1), NULL, 0)) {
            fprintf(stderr, "%s: --model %s: SOURCE:TARGET=PATH names two languages\n", program,
                    spec);
            return -1;
        }
    } else {
        for (const char *at = spec; at < equals;) {
            const char *comma = memchr(at, ',', (size_t)(equals - at));
            const char *stop = comma ? comma : equals;
            const char *slash = memchr(at, '/', (size_t)(stop - at));
            const char *code_end = slash ? slash : stop;
            if (code_end == at || (slash && slash + 1 == stop) ||
                !add_language(s, at, (size_t)(code_end - at), slash ? slash + 1 : at,
                              slash ? (size_t)(stop - slash - 1) : (size_t)(code_end - at))) {
                fprintf(stderr, "%s: --model %s: CODE[/MODEL_CODE],...=PATH names the "
                        "languages of a multilingual model\n", program, spec);
                return -1;
            }
            at = comma ? comma + 1 : equals;
        }
        if (s->n_languages - first < 2) {
            fprintf(stderr, "%s: --model %s: a multilingual model needs two languages or "
                    "more (SOURCE:TARGET=PATH for one pair)\n", program, spec);
            return -1;
        }
    }
    tfm_translator_options o;
    tfm_translator_options_init(&o);
    o.int8 = s->c.int8 != 0;
    o.workers = (int32_t)s->c.workers;
    o.queue_capacity = (int32_t)s->c.queue;
    if (!(m->translator = tfm_translator_open(path, &o))) {
        fprintf(stderr, "%s: --model %s: %s\n", program, spec, tfm_last_error());
        return -1;
    }
    s->n_models++;
    tfm_decode_options_init(&m->decode);
    if (tfm_translator_decode_options(m->translator, &m->decode) != TFM_OK) {
        fprintf(stderr, "%s: --model %s: %s\n", program, spec, tfm_last_error());
        return -1;
    }
    for (int a = first; a < s->n_languages; a++)
        for (int b = first; b < s->n_languages; b++) {
            int one_pair = s->languages[first].model_code == NULL;
            if (a != b && (!one_pair || (a == first && b == first + 1)) &&
                add_route(s, &s->languages[a], &s->languages[b], m) < 0)
                return -1;
        }
    if (s->languages[first].model_code) { /* the codes the model knows, checked now */
        tfm_translation *r = NULL;
        for (int a = first; a < s->n_languages; a++) {
            tfm_translate_options t;
            tfm_translate_options_init(&t);
            t.source_language = t.target_language = s->languages[a].model_code;
            const char *empty = "";
            if (tfm_translate(m->translator, &empty, 1, &t, &r) != TFM_OK) {
                fprintf(stderr, "%s: --model %s: %s\n", program, spec, tfm_last_error());
                return -1;
            }
            tfm_translation_free(r);
        }
    }
    return 0;
}

/* The route from source to target ("auto": the one source that translates
 * to target), or NULL. */
static const route *find_route(const server *s, const char *source, const char *target)
{
    const route *found = NULL;
    int candidates = 0;
    for (int i = 0; i < s->n_routes; i++) {
        const route *r = &s->routes[i];
        if (strcmp(r->target->code, target))
            continue;
        if (!strcmp(r->source->code, source))
            return r;
        if (!strcmp(source, "auto")) {
            found = r;
            candidates++;
        }
    }
    return candidates == 1 ? found : NULL;
}

/* --- one request and its answer ----------------------------------------------------------- */

enum { RECEIVING, TRANSLATING, ANSWERED };

/* What /translate takes, from a JSON or form body. */
typedef struct translate_args {
    char **q;
    int64_t n, counted; /* counted: the texts in q, kept or not */
    int list;           /* q was a list */
    char *source, *target, *format;
    int64_t alternatives;
} translate_args;

/* One HTTP request, from its first header to its answer. The translator's
 * callbacks and the connection each hold a reference; the last frees it. */
typedef struct exchange {
    server *s;
    struct MHD_Connection *connection;
    int state;
    char *body;
    size_t size, capacity;
    int too_big;
    translate_args args;
    const route *route;
    tfm_request **requests;
    int64_t n_requests, chars;
    int list, alternatives, detected; /* how the answer is written */
    pthread_mutex_t lock;
    int64_t remaining; /* requests not yet finished */
    int32_t refs;
    int suspended;
    unsigned status;
    double started;
    char method[16], path[96];
} exchange;

static void args_free(translate_args *a)
{
    for (int64_t i = 0; i < a->n; i++)
        free(a->q[i]);
    free(a->q);
    free(a->source);
    free(a->target);
    free(a->format);
    *a = (translate_args){0};
}

static void exchange_release(exchange *x)
{
    pthread_mutex_lock(&x->lock);
    int32_t left = --x->refs;
    pthread_mutex_unlock(&x->lock);
    if (left)
        return;
    for (int64_t i = 0; i < x->n_requests; i++)
        tfm_request_free(x->requests[i]);
    free(x->requests);
    args_free(&x->args);
    free(x->body);
    pthread_mutex_destroy(&x->lock);
    free(x);
}

/* Queues the answer: status and body (JSON, malloc'd, taken over). */
static enum MHD_Result answer(exchange *x, unsigned status, json_out *body)
{
    x->state = ANSWERED;
    x->status = status;
    if (body->failed) {
        free(body->data);
        return MHD_NO; /* out of memory: the connection is closed */
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body->size, body->data, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body->data);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, MHD_HTTP_HEADER_ACCESS_CONTROL_ALLOW_ORIGIN, "*");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Content-Type");
    if (status == MHD_HTTP_TOO_MANY_REQUESTS || status == MHD_HTTP_SERVICE_UNAVAILABLE)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED || status == MHD_HTTP_NO_CONTENT)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW,
                                strcmp(x->path, "/translate") ? "GET, POST" : "POST");
    if (atomic_load(&x->s->stopping))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result queued = MHD_queue_response(x->connection, status, r);
    MHD_destroy_response(r);
    return queued;
}

/* Answers {"error": message}, as LibreTranslate does. */
static enum MHD_Result answer_error(exchange *x, unsigned status, const char *format, ...)
{
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    json_out o = {0};
    json_text(&o, "{\"error\":");
    json_quote(&o, message);
    json_text(&o, "}");
    return answer(x, status, &o);
}

static enum MHD_Result answer_languages(exchange *x)
{
    const server *s = x->s;
    json_out o = {0};
    json_text(&o, "[");
    int listed = 0;
    for (int i = 0; i < s->n_languages; i++) {
        const language *l = &s->languages[i];
        int seen = 0, targets = 0;
        for (int k = 0; k < i; k++)
            seen |= !strcmp(s->languages[k].code, l->code);
        if (seen)
            continue;
        json_text(&o, listed++ ? ",{\"code\":" : "{\"code\":");
        json_quote(&o, l->code);
        json_text(&o, ",\"name\":");
        json_quote(&o, language_name(l->code));
        json_text(&o, ",\"targets\":[");
        for (int r = 0; r < s->n_routes; r++)
            if (!strcmp(s->routes[r].source->code, l->code)) {
                json_text(&o, targets++ ? "," : "");
                json_quote(&o, s->routes[r].target->code);
            }
        json_text(&o, "]}");
    }
    json_text(&o, "]");
    return answer(x, MHD_HTTP_OK, &o);
}

/* Reads /translate's JSON body into x->args; NULL, or why not. */
static const char *read_json(exchange *x, char *why, size_t size)
{
    translate_args *a = &x->args;
    json_in j = {x->body, x->body, x->body + x->size, 0};
    int bad = 0;
    if (!json_take(&j, '{')) { /* JSON of another kind, or none */
        int other = json_skip(&j, 0);
        json_space(&j);
        snprintf(why, size, other && j.at == j.end ? "Invalid request: the body is not a JSON "
                 "object" : "Invalid request: malformed JSON at byte %lld",
                 (long long)(j.at - j.start));
        return why;
    }
    if (!json_take(&j, '}'))
        do {
            char *key = NULL, **field = NULL;
            size_t length;
            if (!json_string(&j, &key, &length, &bad) || !json_take(&j, ':')) {
                free(key);
                goto malformed;
            }
            int is_q = !strcmp(key, "q");
            field = !strcmp(key, "source") ? &a->source
                    : !strcmp(key, "target") ? &a->target
                    : !strcmp(key, "format") ? &a->format : NULL;
            json_kind kind = json_peek(&j);
            if (field) {
                free(*field);
                *field = NULL;
                if (kind != JSON_STRING) {
                    snprintf(why, size, "Invalid request: %s must be a string", key);
                    free(key);
                    return why;
                }
                if (!json_string(&j, field, &length, &bad)) {
                    free(key);
                    goto malformed;
                }
            } else if (!strcmp(key, "alternatives")) {
                int whole = 0;
                if (kind != JSON_NUMBER || !json_number(&j, &a->alternatives, &whole) || !whole ||
                    a->alternatives < 0 || a->alternatives > MAX_ALTERNATIVES) {
                    free(key);
                    if (j.failed)
                        goto malformed;
                    snprintf(why, size, "Invalid request: alternatives must be a whole number "
                             "from 0 to %d", MAX_ALTERNATIVES);
                    return why;
                }
            } else if (is_q && (kind == JSON_STRING || kind == JSON_ARRAY)) {
                for (int64_t i = 0; i < a->n; i++)
                    free(a->q[i]);
                a->n = a->counted = 0;
                a->list = kind == JSON_ARRAY;
                if (!a->q && !(a->q = malloc((size_t)x->s->c.max_items * sizeof *a->q))) {
                    free(key);
                    snprintf(why, size, "out of memory");
                    return why;
                }
                if (a->list)
                    j.at++;
                int more = !a->list || !json_take(&j, ']');
                while (more) {
                    char *text = NULL;
                    if (json_peek(&j) != JSON_STRING) {
                        free(key);
                        if (!json_skip(&j, 1))
                            goto malformed;
                        snprintf(why, size, "Invalid request: q must be a string or a list of "
                                 "strings");
                        return why;
                    }
                    if (!json_string(&j, &text, &length, &bad)) {
                        free(key);
                        goto malformed;
                    }
                    if (a->n < x->s->c.max_items)
                        a->q[a->n++] = text;
                    else
                        free(text);
                    a->counted++;
                    more = a->list && json_take(&j, ',');
                }
                if (a->list && !json_take(&j, ']')) {
                    free(key);
                    goto malformed;
                }
            } else if (is_q) {
                free(key);
                if (!json_skip(&j, 1))
                    goto malformed;
                snprintf(why, size, "Invalid request: q must be a string or a list of strings");
                return why;
            } else if (!json_skip(&j, 1)) {
                free(key);
                goto malformed;
            }
            free(key);
        } while (json_take(&j, ','));
    if (!json_take(&j, '}') && !j.failed)
        j.failed = 1;
    json_space(&j);
    if (!j.failed && j.at == j.end)
        return NULL;
malformed:
    if (bad) {
        snprintf(why, size, "Invalid request: a string is not UTF-8 text (or holds a NUL)");
        return why;
    }
    snprintf(why, size, "Invalid request: malformed JSON at byte %lld",
             (long long)(j.at - j.start));
    return why;
}

/* One field of a form body, as the post processor gives it in pieces. */
static enum MHD_Result form_field(void *user, enum MHD_ValueKind kind, const char *key,
                                  const char *filename, const char *content_type,
                                  const char *transfer_encoding, const char *data,
                                  uint64_t offset, size_t size)
{
    (void)kind, (void)filename, (void)content_type, (void)transfer_encoding;
    exchange *x = user;
    translate_args *a = &x->args;
    char **field = !strcmp(key, "q") ? (a->q ? a->q : (a->q = calloc(1, sizeof *a->q)))
                   : !strcmp(key, "source") ? &a->source
                   : !strcmp(key, "target") ? &a->target
                   : !strcmp(key, "format") ? &a->format : NULL;
    char number[24];
    if (!strcmp(key, "alternatives")) {
        if (offset + size >= sizeof number)
            return MHD_NO;
        memcpy(number + offset, data, size);
        number[offset + size] = '\0';
        char *end;
        a->alternatives = strtoll(number, &end, 10);
        return *end || end == number ? MHD_NO : MHD_YES;
    }
    if (!field)
        return MHD_YES;
    if (field == a->q) {
        a->n = a->counted = 1;
    }
    char *grown = realloc(offset ? *field : NULL, offset + size + 1);
    if (!grown)
        return MHD_NO;
    if (!offset)
        free(*field);
    memcpy(grown + offset, data, size);
    grown[offset + size] = '\0';
    *field = grown;
    return MHD_YES;
}

/* Reads /translate's form body into x->args; NULL, or why not. */
static const char *read_form(exchange *x, char *why, size_t size)
{
    struct MHD_PostProcessor *p = MHD_create_post_processor(x->connection, 16384, form_field, x);
    int read = p && MHD_post_process(p, x->body, x->size) == MHD_YES;
    if (p && MHD_destroy_post_processor(p) != MHD_YES)
        read = 0;
    if (!read) {
        snprintf(why, size, "Invalid request: the form cannot be read (alternatives must be a "
                 "whole number)");
        return why;
    }
    for (char **f = x->args.q; f && f < x->args.q + x->args.n; f++)
        if (*f && !utf8_valid(*f, strlen(*f), NULL)) {
            snprintf(why, size, "Invalid request: a string is not UTF-8 text (or holds a NUL)");
            return why;
        }
    if (x->args.alternatives < 0 || x->args.alternatives > MAX_ALTERNATIVES) {
        snprintf(why, size, "Invalid request: alternatives must be a whole number from 0 to %d",
                 MAX_ALTERNATIVES);
        return why;
    }
    return NULL;
}

/* A request's translation has finished (a scheduler thread): the last
 * one resumes the connection. */
static void request_done(void *user, tfm_request *request)
{
    (void)request;
    exchange *x = user;
    pthread_mutex_lock(&x->lock);
    if (--x->remaining == 0 && x->suspended) {
        x->suspended = 0;
        MHD_resume_connection(x->connection);
    }
    pthread_mutex_unlock(&x->lock);
    exchange_release(x);
}

/* Submits every text of x->args to the route's translator: 1 when the
 * connection waits for them, 0 when they have all finished already, or -1
 * after answering why not (*queued: the answer's queuing). */
static int submit_all(exchange *x, enum MHD_Result *queued)
{
    const config *c = &x->s->c;
    translate_args *a = &x->args;
    served_model *m = x->route->model;
    tfm_decode_options decode = m->decode;
    if (a->alternatives > 0) { /* a beam wide enough to hold them */
        decode.strategy = TFM_DECODE_BEAM;
        if (decode.beam_size < a->alternatives + 1)
            decode.beam_size = (int32_t)a->alternatives + 1;
        decode.n_best = (int32_t)a->alternatives + 1;
    }
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.decode = &decode;
    o.source_language = x->route->source->model_code;
    o.target_language = x->route->target->model_code;
    o.deadline_ms = c->deadline_ms;
    o.on_done = request_done;
    o.user = x;
    if (!(x->requests = calloc((size_t)a->n, sizeof *x->requests))) {
        *queued = answer_error(x, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        return -1;
    }
    x->state = TRANSLATING;
    pthread_mutex_lock(&x->lock);
    x->remaining = a->n;
    x->refs += (int32_t)a->n;
    pthread_mutex_unlock(&x->lock);
    tfm_status failed = TFM_OK;
    char message[256] = "";
    for (; x->n_requests < a->n; x->n_requests++) {
        tfm_request *q = tfm_translator_submit(m->translator, a->q[x->n_requests], &o);
        if (!q) {
            failed = tfm_last_status();
            snprintf(message, sizeof message, "%s", tfm_last_error());
            break;
        }
        x->requests[x->n_requests] = q;
    }
    pthread_mutex_lock(&x->lock);
    int64_t unsent = a->n - x->n_requests;
    x->remaining -= unsent;
    x->refs -= (int32_t)unsent;
    int wait = failed == TFM_OK && x->remaining > 0;
    if (wait) {
        x->suspended = 1;
        MHD_suspend_connection(x->connection);
    }
    pthread_mutex_unlock(&x->lock);
    args_free(a);
    if (failed == TFM_OK)
        return wait;
    for (int64_t i = 0; i < x->n_requests; i++)
        tfm_request_cancel(x->requests[i]);
    if (failed == TFM_ERR_BUSY)
        *queued = answer_error(x, MHD_HTTP_TOO_MANY_REQUESTS,
                               "Slowdown: the translation queue is full, try again later");
    else
        *queued = answer_error(x, MHD_HTTP_INTERNAL_SERVER_ERROR, "Cannot translate text: %s",
                               message);
    return -1;
}

/* Answers a request whose translations have all finished. */
static enum MHD_Result answer_translations(exchange *x)
{
    for (int64_t i = 0; i < x->n_requests; i++) {
        tfm_status status = tfm_request_result(x->requests[i], NULL);
        if (status == TFM_ERR_TIMEOUT)
            return answer_error(x, MHD_HTTP_SERVICE_UNAVAILABLE, "Cannot translate text: "
                                "not finished within the deadline (%lld ms)",
                                (long long)x->s->c.deadline_ms);
        if (status != TFM_OK)
            return answer_error(x, MHD_HTTP_INTERNAL_SERVER_ERROR, "Cannot translate text: %s",
                                tfm_request_error(x->requests[i]));
    }
    json_out o = {0};
    for (int field = 0; field < 3; field++) {
        if ((field == 1 && !x->alternatives) || (field == 2 && !x->detected))
            continue;
        json_text(&o, field == 0 ? "{\"translatedText\":" : field == 1 ? ",\"alternatives\":"
                                                                      : ",\"detectedLanguage\":");
        json_text(&o, x->list ? "[" : "");
        for (int64_t i = 0; i < x->n_requests; i++) {
            const tfm_translation *r = NULL;
            tfm_request_result(x->requests[i], &r);
            json_text(&o, i ? "," : "");
            if (field == 0) {
                json_quote(&o, tfm_translation_text(r, 0, 0));
            } else if (field == 1) {
                json_text(&o, "[");
                for (int32_t h = 1, n = 0; h < tfm_translation_n_best(r); h++) {
                    const char *text = tfm_translation_text(r, 0, h);
                    if (!*text)
                        continue; /* a hypothesis the beam did not find */
                    json_text(&o, n++ ? "," : "");
                    json_quote(&o, text);
                }
                json_text(&o, "]");
            } else {
                json_text(&o, "{\"confidence\":100,\"language\":");
                json_quote(&o, x->route->source->code);
                json_text(&o, "}");
            }
        }
        json_text(&o, x->list ? "]" : "");
    }
    json_text(&o, "}");
    return answer(x, MHD_HTTP_OK, &o);
}

/* /translate once its body has come: checked, then translated. */
static enum MHD_Result translate(exchange *x)
{
    const config *c = &x->s->c;
    translate_args *a = &x->args;
    if (x->too_big)
        return answer_error(x, MHD_HTTP_CONTENT_TOO_LARGE, "Invalid request: the body is "
                            "larger than %lld bytes", (long long)c->max_body);
    const char *type = MHD_lookup_connection_value(x->connection, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_CONTENT_TYPE);
    char why[256];
    const char *error = type && !strncasecmp(type, "application/json", 16)
                            ? read_json(x, why, sizeof why)
                            : read_form(x, why, sizeof why);
    free(x->body);
    x->body = NULL;
    if (error)
        return answer_error(x, MHD_HTTP_BAD_REQUEST, "%s", error);
    if (a->counted == 0 || (!a->list && !a->q[0][0]))
        return answer_error(x, MHD_HTTP_BAD_REQUEST, "Invalid request: missing q parameter");
    if (!a->source || !*a->source)
        return answer_error(x, MHD_HTTP_BAD_REQUEST, "Invalid request: missing source parameter");
    if (!a->target || !*a->target)
        return answer_error(x, MHD_HTTP_BAD_REQUEST, "Invalid request: missing target parameter");
    if (a->format && strcmp(a->format, "text"))
        return answer_error(x, MHD_HTTP_BAD_REQUEST, "%s format is not supported%s", a->format,
                            strcmp(a->format, "html") ? "" : " (only text)");
    if (a->counted > c->max_items)
        return answer_error(x, MHD_HTTP_BAD_REQUEST, "Invalid request: Request (%lld) exceeds "
                            "text limit (%lld)", (long long)a->counted, (long long)c->max_items);
    for (int64_t i = 0; i < a->n; i++) {
        int64_t chars = 0;
        utf8_valid(a->q[i], strlen(a->q[i]), &chars);
        x->chars += chars;
    }
    if (x->chars > c->max_chars)
        return answer_error(x, MHD_HTTP_BAD_REQUEST, "Invalid request: Request (%lld) exceeds "
                            "character limit (%lld)", (long long)x->chars,
                            (long long)c->max_chars);
    int known_source = !strcmp(a->source, "auto");
    for (int i = 0; i < x->s->n_languages; i++)
        known_source |= !strcmp(x->s->languages[i].code, a->source);
    if (!known_source)
        return answer_error(x, MHD_HTTP_BAD_REQUEST, "%s is not supported", a->source);
    if (!(x->route = find_route(x->s, a->source, a->target)))
        return answer_error(x, MHD_HTTP_BAD_REQUEST, "%s is not supported", a->target);
    x->list = a->list;
    x->alternatives = a->alternatives > 0;
    x->detected = !strcmp(a->source, "auto");
    enum MHD_Result queued = MHD_YES;
    int waiting = submit_all(x, &queued);
    return waiting < 0 ? queued : waiting ? MHD_YES : answer_translations(x);
}

static enum MHD_Result on_request(void *user, struct MHD_Connection *connection,
                                  const char *url, const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **context)
{
    (void)version;
    server *s = user;
    exchange *x = *context;
    if (!x) { /* the headers have come */
        if (!(x = calloc(1, sizeof *x)))
            return MHD_NO;
        pthread_mutex_init(&x->lock, NULL);
        x->s = s;
        x->connection = connection;
        x->refs = 1;
        x->started = cli_seconds();
        snprintf(x->method, sizeof x->method, "%s", method);
        snprintf(x->path, sizeof x->path, "%s", url);
        *context = x;
        atomic_fetch_add(&s->active, 1);
        int is_translate = !strcmp(url, "/translate"), is_languages = !strcmp(url, "/languages");
        int post = !strcmp(method, "POST"), get = !strcmp(method, "GET");
        if (!is_translate && !is_languages)
            return answer_error(x, MHD_HTTP_NOT_FOUND, "Not Found: %s", url);
        if (!strcmp(method, "OPTIONS")) { /* a browser's preflight */
            json_out none = {0};
            json_text(&none, "");
            return answer(x, MHD_HTTP_NO_CONTENT, &none);
        }
        if (is_languages && (get || post || !strcmp(method, "HEAD")))
            return answer_languages(x);
        if (!post || is_languages)
            return answer_error(x, MHD_HTTP_METHOD_NOT_ALLOWED, "Method Not Allowed: %s %s",
                                method, url);
        const char *length = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                         MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (length && strtoll(length, NULL, 10) > s->c.max_body) {
            x->too_big = 1;
            /* A client that waits for "100 Continue" is answered before it
             * sends the body; any other body is read and dropped, for a
             * connection closed with unread bytes would be reset, its
             * answer lost. */
            const char *expect = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
                                                             MHD_HTTP_HEADER_EXPECT);
            if (expect && !strcasecmp(expect, "100-continue"))
                return translate(x);
        }
        return MHD_YES;
    }
    if (*upload_data_size) { /* a piece of the body */
        size_t size = *upload_data_size;
        *upload_data_size = 0;
        if (x->state != RECEIVING || x->too_big)
            return MHD_YES;
        if (x->size + size > (size_t)s->c.max_body) {
            x->too_big = 1; /* the rest is read and dropped */
            free(x->body);
            x->body = NULL;
            x->size = 0;
            return MHD_YES;
        }
        if (x->size + size + 1 > x->capacity) {
            size_t capacity = x->capacity ? x->capacity : 4096;
            while (x->size + size + 1 > capacity)
                capacity *= 2;
            char *grown = realloc(x->body, capacity);
            if (!grown)
                return MHD_NO;
            x->body = grown;
            x->capacity = capacity;
        }
        memcpy(x->body + x->size, upload_data, size);
        x->size += size;
        x->body[x->size] = '\0';
        return MHD_YES;
    }
    if (x->state == RECEIVING) {
        if (!x->body && !(x->body = calloc(1, 1)))
            return MHD_NO;
        return translate(x);
    }
    if (x->state == TRANSLATING) /* resumed: every translation has finished */
        return answer_translations(x);
    return MHD_YES;
}

/* The request has been answered, or its connection has ended. */
static void on_completed(void *user, struct MHD_Connection *connection, void **context,
                         enum MHD_RequestTerminationCode code)
{
    server *s = user;
    exchange *x = *context;
    if (!x)
        return;
    *context = NULL;
    if (s->c.log) { /* one write a line, whatever the threads */
        char address[INET6_ADDRSTRLEN] = "-", line[512];
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *peer = info ? info->client_addr : NULL;
        if (peer && peer->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)peer)->sin_addr,
                      address, sizeof address);
        else if (peer && peer->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)peer)->sin6_addr,
                      address, sizeof address);
        int length = snprintf(line, sizeof line, "%s %s %s %u %lld texts %lld chars %.1f ms%s\n",
                              address, x->method, x->path, x->status,
                              (long long)x->n_requests, (long long)x->chars,
                              1e3 * (cli_seconds() - x->started),
                              code == MHD_REQUEST_TERMINATED_COMPLETED_OK ? ""
                              : code == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? " (timed out)"
                              : " (connection lost)");
        if (length > 0 && write(STDERR_FILENO, line, (size_t)length < sizeof line
                                                         ? (size_t)length : sizeof line - 1) < 0)
            s->c.log = 0;
    }
    for (int64_t i = 0; i < x->n_requests; i++) /* a client gone: its work is not */
        tfm_request_cancel(x->requests[i]);
    atomic_fetch_sub(&s->active, 1);
    exchange_release(x);
}

/* The address to listen on: an IPv4 or IPv6 literal; 0, or -1. */
static int parse_host(const char *host, uint16_t port, struct sockaddr_storage *address)
{
    memset(address, 0, sizeof *address);
    if (!strcmp(host, "localhost"))
        host = "127.0.0.1";
    struct sockaddr_in *v4 = (struct sockaddr_in *)address;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)address;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        return 0;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        return 0;
    }
    return -1;
}

static int stop_pipe[2];

static void stop_signal(int signal)
{
    int kept = errno;
    unsigned char byte = (unsigned char)signal;
    ssize_t written = write(stop_pipe[1], &byte, 1); /* full: a signal is there already */
    (void)written;
    errno = kept;
}

static int serve(server *s)
{
    const config *c = &s->c;
    struct sockaddr_storage address;
    if (parse_host(c->host, (uint16_t)c->port, &address) < 0) {
        fprintf(stderr, "%s: --host takes an IPv4 or IPv6 address (127.0.0.1, 0.0.0.0, ::1), "
                "not '%s'\n", program, c->host);
        return cli_usage_error(program);
    }
    for (int i = 0; i < c->models.count; i++)
        if (open_model(s, c->models.item[i]) < 0)
            return EXIT_FAILURE;
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                     (address.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0) |
                     (c->log ? MHD_USE_ERROR_LOG : 0);
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)c->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, &address,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)c->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)c->timeout, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_END);
    if (!s->daemon) {
        fprintf(stderr, "%s: cannot listen on %s port %lld: %s\n", program, c->host,
                (long long)c->port, strerror(errno));
        return EXIT_FAILURE;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    printf("%s: listening on http://%s%s%s:%u\n", program, address.ss_family == AF_INET6 ? "[" : "",
           c->host, address.ss_family == AF_INET6 ? "]" : "",
           info ? info->port : (unsigned)c->port);
    for (int r = 0; r < s->n_routes; r++)
        printf("  %s -> %s: %s\n", s->routes[r].source->code, s->routes[r].target->code,
               s->routes[r].model->path);
    fflush(stdout);

    unsigned char signal = 0;
    while (read(stop_pipe[0], &signal, 1) < 0 && errno == EINTR)
        ;
    /* Stop accepting; answer every request already received (each ends:
     * its deadline, the connection timeout), then close what is idle. */
    atomic_store(&s->stopping, 1);
    MHD_socket listening = MHD_quiesce_daemon(s->daemon);
    if (listening != MHD_INVALID_SOCKET) { /* connections the kernel took are answered too */
        int kept = fcntl(listening, F_GETFL);
        fcntl(listening, F_SETFL, kept | O_NONBLOCK);
        for (;;) {
            struct sockaddr_storage peer;
            socklen_t length = sizeof peer;
            int fd = accept(listening, (struct sockaddr *)&peer, &length);
            if (fd < 0 && errno == EINTR)
                continue;
            if (fd < 0)
                break;
            MHD_add_connection(s->daemon, fd, (struct sockaddr *)&peer, length); /* or closed */
        }
        close(listening);
    }
    if (c->log)
        fprintf(stderr, "%s: %s: answering %d requests, then exiting\n", program,
                strsignal(signal), atomic_load(&s->active));
    while (atomic_load(&s->active) > 0)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    MHD_stop_daemon(s->daemon);
    return EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
    program = cli_name(argv[0]);
    static server s;
    s.c = (config){
        .host = "127.0.0.1", .port = 5000, .threads = 1, .workers = 0,
        .source_language = "en", .target_language = "fr",
        .max_body = 1 << 18, .max_chars = 20000, .max_items = 128, .queue = 1024,
        .deadline_ms = 30000, .timeout = 10, .max_connections = 128,
    };
    config *c = &s.c;
    const cli_flag flags[] = {
        {"model", CLI_LIST, &c->models, 0, 0, "[LANGUAGES=]PATH: a model file or published "
         "folder; LANGUAGES is SOURCE:TARGET (en:fr) for a model of one pair, or "
         "CODE[/MODEL_CODE],... (en/en_XX,fr/fr_XX) for a multilingual one: every pair of "
         "them; none: --source-language:--target-language"},
        {"source-language", CLI_STRING, &c->source_language, 0, 0, "a --model PATH's source "
         "language, as clients name it"},
        {"target-language", CLI_STRING, &c->target_language, 0, 0, "its target language"},
        {"host", CLI_STRING, &c->host, 0, 0, "the address to listen on: localhost, an IPv4 or IPv6 address (0.0.0.0, :: for all)"},
        {"port", CLI_INT, &c->port, 0, 65535, "the port to listen on (0: any free one, printed)"},
        {"threads", CLI_INT, &c->threads, 1, 64, "libtfm threads for each decoding's products"},
        {"workers", CLI_INT, &c->workers, 0, 64, "batches decoded at once, each model (0: one "
         "per --threads)"},
        {"int8", CLI_SWITCH, &c->int8, 0, 0, "quantize the models to int8 (layers and output "
         "projection)"},
        {"max-body", CLI_INT, &c->max_body, 64, 1 << 30, "bytes a request body (413 past it)"},
        {"max-chars", CLI_INT, &c->max_chars, 1, 1e9, "characters a request, its texts "
         "together (400 past it)"},
        {"max-items", CLI_INT, &c->max_items, 1, 1 << 20, "texts in a request's list q "
         "(400 past it)"},
        {"queue", CLI_INT, &c->queue, 1, 1 << 20, "texts waiting for a decoding, each model "
         "(429 past it)"},
        {"deadline-ms", CLI_INT, &c->deadline_ms, 0, 1e9, "a text not translated this long "
         "after its request came fails the request (503); 0: none"},
        {"timeout", CLI_INT, &c->timeout, 1, 86400, "seconds a connection may stay idle or "
         "stalled"},
        {"max-connections", CLI_INT, &c->max_connections, 1, 60000, "connections served at "
         "once (more wait to be accepted)"},
        {"log", CLI_SWITCH, &c->log, 0, 0, "a line a request on standard error"},
    };
    int parsed = cli_parse(argc, argv,
                           "Serves translations over HTTP with LibreTranslate's API: POST "
                           "/translate, GET /languages.",
                           flags, (int)(sizeof flags / sizeof flags[0]), NULL);
    if (parsed != CLI_CONTINUE)
        return parsed;
    if (c->models.count == 0) {
        fprintf(stderr, "%s: give a --model\n", program);
        return cli_usage_error(program);
    }
    if (tfm_set_num_threads((int32_t)c->threads) != TFM_OK)
        return cli_fail(program, "setting up");
    /* SIGTERM and SIGINT wake serve() through a pipe, whichever thread
     * takes them (the BLAS's threads are started before main, with every
     * signal unblocked); a client that hangs up is no signal. */
    struct sigaction on_stop = {.sa_handler = stop_signal, .sa_flags = SA_RESTART};
    sigemptyset(&on_stop.sa_mask);
    if (pipe(stop_pipe) != 0 || sigaction(SIGTERM, &on_stop, NULL) != 0 ||
        sigaction(SIGINT, &on_stop, NULL) != 0) {
        fprintf(stderr, "%s: cannot set up the signals: %s\n", program, strerror(errno));
        return EXIT_FAILURE;
    }
    signal(SIGPIPE, SIG_IGN);
    int status = serve(&s);
    for (int i = 0; i < s.n_models; i++)
        tfm_translator_free(s.models[i].translator);
    for (int i = 0; i < s.n_languages; i++) {
        free(s.languages[i].code);
        free(s.languages[i].model_code);
    }
    return status;
}
