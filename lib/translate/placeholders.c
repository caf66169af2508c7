/* The spans a translation keeps: each rule reads one kind at a position
 * and gives its length (0: not there). printf directives follow gettext's
 * c-format grammar (format-c-parse.h): '%', an optional argument number
 * "N$", flags from "-+ #0'I", a width ("*", "*N$" or digits), a precision
 * ('.' then the same), a size (hh h ll l L q j z Z t) and a conversion
 * (d i o u x X e E f F g G a A c C s S p n); "%%" is a percent sign. */
#include "translate/placeholders.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tfm/translate.h"
#include "text/text.h"

/* Digits then '$' at s[0, n): the bytes they take, else 0. */
static int64_t argument_number(const char *s, int64_t n)
{
    int64_t i = 0;
    while (i < n && isdigit((unsigned char)s[i]))
        i++;
    return i > 0 && i < n && s[i] == '$' && s[0] != '0' ? i + 1 : 0;
}

/* A width or precision: '*', '*N$' or digits; its bytes, and *numbered
 * set when it names an argument. */
static int64_t amount(const char *s, int64_t n, int *numbered)
{
    if (n > 0 && s[0] == '*') {
        int64_t arg = argument_number(s + 1, n - 1);
        *numbered |= arg > 0;
        return 1 + arg;
    }
    int64_t i = 0;
    while (i < n && isdigit((unsigned char)s[i]))
        i++;
    return i;
}

static int64_t printf_directive(const char *s, int64_t n, tfm__span_kind *kind)
{
    if (n < 2 || s[0] != '%')
        return 0;
    if (s[1] == '%') {
        *kind = TFM__SPAN_PERCENT;
        return 2;
    }
    int64_t i = 1;
    int64_t arg = argument_number(s + i, n - i);
    int numbered = arg > 0;
    i += arg;
    while (i < n && strchr("-+ #0'I", s[i]) && s[i])
        i++;
    i += amount(s + i, n - i, &numbered);
    if (i < n && s[i] == '.') {
        i++;
        i += amount(s + i, n - i, &numbered);
    }
    static const char *const sizes[] = {"hh", "ll", "h", "l", "L", "q", "j", "z", "Z", "t"};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t m = strlen(sizes[k]);
        if (i + (int64_t)m <= n && memcmp(s + i, sizes[k], m) == 0) {
            i += (int64_t)m;
            break;
        }
    }
    if (i >= n || !s[i] || !strchr("diouxXeEfFgGaAcCsSpn", s[i]))
        return 0;
    *kind = numbered ? TFM__SPAN_PRINTF_NUMBERED : TFM__SPAN_PRINTF;
    return i + 1;
}

static int name_start(char c)
{
    return isalpha((unsigned char)c) || c == '_';
}

static int name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* %(name)s with printf's flags, width and precision after the name. */
static int64_t python_named(const char *s, int64_t n)
{
    if (n < 4 || s[0] != '%' || s[1] != '(')
        return 0;
    int64_t i = 2;
    while (i < n && s[i] != ')' && s[i] != '%' && s[i] != '\n')
        i++;
    if (i >= n || s[i] != ')' || i == 2)
        return 0;
    i++;
    while (i < n && s[i] && strchr("-+ #0", s[i]))
        i++;
    int numbered = 0;
    i += amount(s + i, n - i, &numbered);
    if (i < n && s[i] == '.') {
        i++;
        i += amount(s + i, n - i, &numbered);
    }
    return i < n && s[i] && strchr("diouxXeEfFgGcrsa", s[i]) ? i + 1 : 0;
}

/* str.format's replacement field: {}, {0}, {name}, {name.attr[0]!r:>10};
 * "{{" is a brace. */
static int64_t brace_field(const char *s, int64_t n)
{
    if (n < 2 || s[0] != '{' || s[1] == '{')
        return 0;
    int64_t i = 1;
    if (name_start(s[i])) {
        while (i < n && name_char(s[i]))
            i++;
    } else {
        while (i < n && isdigit((unsigned char)s[i]))
            i++;
    }
    while (i < n && (s[i] == '.' || s[i] == '[')) { /* attributes and indices */
        char close = s[i] == '[' ? ']' : 0;
        i++;
        while (i < n && (close ? s[i] != close : name_char(s[i])))
            i++;
        if (close) {
            if (i >= n)
                return 0;
            i++;
        }
    }
    if (i + 1 < n && s[i] == '!' && strchr("rsa", s[i + 1]) && s[i + 1])
        i += 2;
    if (i < n && s[i] == ':')
        while (i < n && s[i] != '}' && s[i] != '{' && s[i] != '\n')
            i++;
    return i < n && s[i] == '}' ? i + 1 : 0;
}

/* $NAME and ${NAME...}. */
static int64_t shell_variable(const char *s, int64_t n)
{
    if (n < 2 || s[0] != '$')
        return 0;
    if (s[1] == '{') {
        int64_t i = 2;
        while (i < n && s[i] != '}' && s[i] != '\n' && s[i] != '{')
            i++;
        return i < n && s[i] == '}' && i > 2 ? i + 1 : 0;
    }
    if (!name_start(s[1]))
        return 0;
    int64_t i = 2;
    while (i < n && name_char(s[i]))
        i++;
    return i;
}

/* <name ...>, </name>, <name/>: a letter after '<' or "</", no '<' inside. */
static int64_t tag(const char *s, int64_t n)
{
    if (n < 3 || s[0] != '<')
        return 0;
    int64_t i = 1 + (s[1] == '/');
    if (i >= n || !isalpha((unsigned char)s[i]))
        return 0;
    char quote = 0;
    for (; i < n; i++) {
        if (quote) {
            quote = s[i] == quote ? 0 : quote;
        } else if (s[i] == '"' || s[i] == '\'') {
            quote = s[i];
        } else if (s[i] == '<' || s[i] == '\n') {
            return 0;
        } else if (s[i] == '>') {
            return i + 1;
        }
    }
    return 0;
}

/* &name; &#digits; &#xhex; */
static int64_t entity(const char *s, int64_t n)
{
    if (n < 3 || s[0] != '&')
        return 0;
    int64_t i = 1;
    if (s[1] == '#') {
        i = 2;
        int hex = i < n && (s[i] == 'x' || s[i] == 'X');
        i += hex;
        int64_t from = i;
        while (i < n && (hex ? isxdigit((unsigned char)s[i]) : isdigit((unsigned char)s[i])))
            i++;
        return i > from && i < n && s[i] == ';' ? i + 1 : 0;
    }
    if (!isalpha((unsigned char)s[1]))
        return 0;
    while (i < n && isalnum((unsigned char)s[i]))
        i++;
    return i < n && s[i] == ';' ? i + 1 : 0;
}

/* The longest literal that begins s[0, n), or 0. */
static int64_t literal(const char *s, int64_t n, const char *const *literals, int64_t count)
{
    int64_t best = 0;
    for (int64_t k = 0; k < count; k++) {
        int64_t m = literals[k] ? (int64_t)strlen(literals[k]) : 0;
        if (m > best && m <= n && memcmp(s, literals[k], (size_t)m) == 0)
            best = m;
    }
    return best;
}

static int64_t rule_at(const char *s, int64_t n, tfm__span_kind *kind)
{
    int64_t m;
    if ((m = printf_directive(s, n, kind)))
        return m;
    if ((m = python_named(s, n))) {
        *kind = TFM__SPAN_PYTHON_NAMED;
        return m;
    }
    if ((m = brace_field(s, n))) {
        *kind = TFM__SPAN_BRACE;
        return m;
    }
    if ((m = shell_variable(s, n))) {
        *kind = TFM__SPAN_SHELL;
        return m;
    }
    if ((m = tag(s, n))) {
        *kind = TFM__SPAN_TAG;
        return m;
    }
    if ((m = entity(s, n)))
        *kind = TFM__SPAN_ENTITY;
    return m;
}

tfm_status tfm__placeholders_find(const char *op, const char *text, int64_t length,
                                  const char *const *literals, int64_t n_literals,
                                  tfm__span **spans, int64_t *count)
{
    *spans = NULL;
    *count = 0;
    size_t capacity = 0;
    for (int64_t at = 0; at < length;) {
        const char *s = text + at;
        int64_t n = length - at;
        tfm__span_kind kind = TFM__SPAN_LITERAL;
        int64_t m = literal(s, n, literals, n_literals);
        /* "{{" and "}}" are braces, "%%" a percent sign: the rules see them
         * whole, never half of them */
        if (!m && strchr("%{$<&", *s) && *s)
            m = rule_at(s, n, &kind);
        if (!m && n >= 2 && (s[0] == '{' || s[0] == '}') && s[1] == s[0]) {
            at += 2;
            continue;
        }
        if (!m) {
            at++;
            continue;
        }
        if (tfm__grow(op, (void **)spans, sizeof **spans, (size_t)*count, &capacity, 1)) {
            free(*spans);
            *spans = NULL;
            *count = 0;
            return TFM_ERR_NOMEM;
        }
        (*spans)[(*count)++] = (tfm__span){at, m, kind};
        at += m;
    }
    return TFM_OK;
}

int tfm__span_ordered(const tfm__span *span)
{
    return span->kind == TFM__SPAN_PRINTF;
}

/* "\xef\xbd\x9f" and "\xef\xbd\xa0" are U+FF5F and U+FF60, the white
 * parentheses OpenNMT's placeholders use: never in a message's text. */
static const char *const pieces[TFM_PLACEHOLDERS] = {
#define P(n) "\xef\xbd\x9f" #n "\xef\xbd\xa0"
    P(1), P(2), P(3), P(4), P(5), P(6), P(7), P(8),
    P(9), P(10), P(11), P(12), P(13), P(14), P(15), P(16),
#undef P
};

const char *tfm_placeholder(int32_t index)
{
    return index >= 0 && index < TFM_PLACEHOLDERS ? pieces[index] : NULL;
}

/* text with spans[k] replaced by placeholder number[k], into out. */
static void put_masked(const char *text, int64_t length, const tfm__span *spans, int64_t count,
                       const int32_t *number, char *out)
{
    int64_t from = 0;
    for (int64_t k = 0; k < count; k++) {
        memcpy(out, text + from, (size_t)(spans[k].start - from));
        out += spans[k].start - from;
        size_t m = strlen(pieces[number[k]]);
        memcpy(out, pieces[number[k]], m);
        out += m;
        from = spans[k].start + spans[k].length;
    }
    memcpy(out, text + from, (size_t)(length - from));
    out[length - from] = '\0';
}

static int same_text(const char *a, const tfm__span *x, const char *b, const tfm__span *y)
{
    return x->length == y->length && memcmp(a + x->start, b + y->start, (size_t)x->length) == 0;
}

tfm_status tfm_placeholders_pair(const char *source, const char *target, char *source_out,
                                 char *target_out, int32_t *count)
{
    static const char op[] = "tfm_placeholders_pair";
    if (!source || !target || !source_out || !target_out || !count)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                         !source ? "source" : !target ? "target" : !source_out ? "source_out"
                         : !target_out ? "target_out" : "count");
    *count = 0;
    int64_t ns = (int64_t)strlen(source), nt = (int64_t)strlen(target), cs = 0, ct = 0;
    tfm__span *a = NULL, *b = NULL;
    int32_t *number = NULL;
    tfm_status status = tfm__placeholders_find(op, source, ns, NULL, 0, &a, &cs);
    if (status == TFM_OK)
        status = tfm__placeholders_find(op, target, nt, NULL, 0, &b, &ct);
    int matched = status == TFM_OK && cs == ct && cs > 0 && cs <= TFM_PLACEHOLDERS;
    if (matched && !(number = malloc((size_t)ct * sizeof *number)))
        status = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    /* the target's k-th span of a text takes the number of the source's
     * k-th span of that text */
    for (int64_t j = 0; matched && number && j < ct; j++) {
        int64_t before = 0, i = 0;
        for (int64_t k = 0; k < j; k++)
            before += same_text(target, &b[k], target, &b[j]);
        for (; i < cs; i++)
            if (same_text(source, &a[i], target, &b[j]) && before-- == 0)
                break;
        matched = i < cs;
        number[j] = (int32_t)i;
    }
    if (status == TFM_OK && matched && number) {
        int32_t in_order[TFM_PLACEHOLDERS];
        for (int32_t i = 0; i < (int32_t)cs; i++)
            in_order[i] = i;
        put_masked(source, ns, a, cs, in_order, source_out);
        put_masked(target, nt, b, ct, number, target_out);
        *count = (int32_t)cs;
    } else if (status == TFM_OK) {
        memcpy(source_out, source, (size_t)ns + 1);
        memcpy(target_out, target, (size_t)nt + 1);
    }
    free(a);
    free(b);
    free(number);
    return status;
}

/* The id of placeholder i in tok, or -1. */
static int32_t piece_id(const tfm_tokenizer *tok, int32_t i)
{
    return tok ? tfm_tokenizer_piece_to_id(tok, pieces[i], (int64_t)strlen(pieces[i])) : -1;
}

tfm_status tfm__placeholder_vocab_make(const char *op, const tfm_tokenizer *source,
                                       const tfm_tokenizer *target,
                                       tfm__placeholder_vocab **out)
{
    *out = NULL;
    for (int32_t i = 0; i < TFM_PLACEHOLDERS; i++)
        if (piece_id(source, i) < 0 || piece_id(target, i) < 0)
            return TFM_OK;
    tfm__placeholder_vocab *v = calloc(1, sizeof *v);
    int32_t V = tfm_tokenizer_vocab_size(target);
    if (!v || !(v->percent = malloc((size_t)V * sizeof *v->percent))) {
        free(v);
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    }
    for (int32_t i = 0; i < TFM_PLACEHOLDERS; i++) {
        v->source_ids[i] = piece_id(source, i);
        v->target_ids[i] = piece_id(target, i);
    }
    for (int32_t id = 0; id < V; id++) {
        char text[256];
        int64_t n = 0;
        if (tfm_tokenizer_decode(target, &id, 1, text, sizeof text, &n) == TFM_OK &&
            memchr(text, '%', (size_t)n))
            v->percent[v->n_percent++] = id;
    }
    *out = v;
    return TFM_OK;
}

void tfm__placeholder_vocab_free(tfm__placeholder_vocab *v)
{
    if (v)
        free(v->percent);
    free(v);
}

/* Whether text[at] is an accelerator mark: '_' or '&' before an ASCII
 * letter or digit, at the start or after a character that is neither (so
 * "core_pattern" holds none). */
static int accelerator_at(const char *text, int64_t at, int64_t length)
{
    char c = text[at];
    return (c == '_' || c == '&') && at + 1 < length && isalnum((unsigned char)text[at + 1]) &&
           (at == 0 || !isalnum((unsigned char)text[at - 1]));
}

/* The source's accelerator mark outside its spans when it has exactly one. */
static void find_accelerator(tfm__masked *m, const char *text, int64_t length,
                             const tfm__span *spans, int64_t count)
{
    int found = 0;
    for (int64_t at = 0, k = 0; at < length; at++) {
        if (k < count && at == spans[k].start) {
            at += spans[k++].length - 1;
        } else if (accelerator_at(text, at, length)) {
            found++;
            m->accelerator = text[at];
            m->accelerated = text[at + 1];
        }
    }
    if (found != 1)
        m->accelerator = m->accelerated = 0;
}

tfm_status tfm__masked_make(const char *op, const char *text, int64_t length,
                            const tfm__placeholder_vocab *v, const char *const *literals,
                            int64_t n_literals, const tfm__glossary *g, tfm__masked **out)
{
    *out = NULL;
    int32_t terms = 0, room = TFM__MAX_PHRASES - TFM_PLACEHOLDERS; /* the first terms found */
    for (int32_t i = 0; g && i < g->n && terms < room; i++)
        terms += tfm__glossary_in(g, i, text);
    if (!v && !terms)
        return TFM_OK;
    tfm__masked *m = calloc(1, sizeof *m);
    tfm__span *spans = NULL;
    int64_t count = 0;
    if (!m)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    m->placeholders = v ? TFM_PLACEHOLDERS : 0;
    tfm_status st = TFM_OK;
    if (!(m->phrases = calloc((size_t)(m->placeholders + terms), sizeof *m->phrases)) ||
        !(m->term = calloc((size_t)(terms ? terms : 1), sizeof *m->term)))
        st = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    if (st == TFM_OK && v)
        st = tfm__placeholders_find(op, text, length, literals, n_literals, &spans, &count);
    if (count > TFM_PLACEHOLDERS)
        count = 0;
    int64_t bytes = 0;
    for (int64_t i = 0; i < count; i++)
        bytes += spans[i].length + 1;
    if (st == TFM_OK && count > 0 &&
        (!(m->text = malloc((size_t)(4 * length + 1))) || !(m->spans = malloc((size_t)bytes))))
        st = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    if (st == TFM_OK && count > 0) {
        int32_t number[TFM_PLACEHOLDERS];
        char *at = m->spans;
        for (int32_t i = 0; i < (int32_t)count; i++) {
            number[i] = i;
            m->span[i] = at;
            memcpy(at, text + spans[i].start, (size_t)spans[i].length);
            at += spans[i].length;
            *at++ = '\0';
            if (tfm__span_ordered(&spans[i]))
                m->order[m->constraints.n_order++] = i;
        }
        put_masked(text, length, spans, count, number, m->text);
        m->n = (int32_t)count;
    }
    if (st == TFM_OK && v)
        find_accelerator(m, text, length, spans, count);
    int64_t percents = 0; /* the text's '%' outside its spans */
    for (int64_t at = 0, k = 0; at < length; at++) {
        if (k < count && at == spans[k].start)
            at += spans[k++].length - 1;
        else
            percents += text[at] == '%';
    }
    if (v && !percents) {
        m->constraints.banned = v->percent;
        m->constraints.n_banned = v->n_percent;
    }
    for (int32_t i = 0; st == TFM_OK && i < m->placeholders; i++) {
        m->source_ids[i] = v->source_ids[i];
        m->target_ids[i] = v->target_ids[i];
        m->phrases[i] = (tfm__phrase){&m->target_ids[i], 1, 0, 0};
    }
    for (int32_t i = 0; st == TFM_OK && g && i < g->n && m->n_terms < terms; i++)
        if (tfm__glossary_in(g, i, text)) {
            m->term[m->n_terms] = i;
            m->phrases[m->placeholders + m->n_terms++] = (tfm__phrase){
                g->ids + g->offsets[i], g->offsets[i + 1] - g->offsets[i], 1, INT32_MAX};
        }
    m->constraints.phrases = m->phrases;
    m->constraints.n = m->placeholders + m->n_terms;
    m->constraints.order = m->order;
    free(spans);
    if (st != TFM_OK) {
        tfm__masked_free(m);
        return st;
    }
    *out = m;
    return TFM_OK;
}

void tfm__masked_count(tfm__masked *m, const int32_t *ids, int64_t n)
{
    for (int32_t i = 0; i < m->placeholders; i++) {
        int32_t count = 0;
        for (int64_t k = 0; k < n; k++)
            count += ids[k] == m->source_ids[i];
        m->phrases[i].min = m->phrases[i].max = count;
    }
    /* an ordered placeholder the cut source lost leaves the order */
    int32_t kept = 0;
    for (int32_t k = 0; k < m->constraints.n_order; k++)
        if (m->phrases[m->order[k]].min > 0)
            m->order[kept++] = m->order[k];
    m->constraints.n_order = kept;
}

int32_t tfm__masked_unplaced(const tfm__masked *m, const int32_t *g, int64_t n,
                             int32_t *terms)
{
    tfm__constraint_state s;
    tfm__constraints_read(&m->constraints, g, n, &s);
    int32_t count = 0;
    for (int32_t k = 0; k < m->n_terms; k++)
        if (s.count[m->placeholders + k] < 1)
            terms[count++] = m->term[k];
    return count;
}

/* The restored text with as many accelerator marks as the source's one
 * (see placeholders.h); in place, which the text's bytes + 1 hold. */
static void keep_accelerator(const tfm__masked *m, char *text, int64_t *length)
{
    int64_t first = -1, n = *length, to = 0;
    for (int64_t at = 0; at < n; at++) {
        int mark = text[at] == m->accelerator && accelerator_at(text, at, n);
        if (mark && first >= 0)
            continue; /* a second mark */
        if (mark)
            first = to;
        text[to++] = text[at];
    }
    n = to;
    if (first < 0) {
        int64_t place = -1;
        for (int64_t at = 0; at < n && place < 0; at++)
            if (tolower((unsigned char)text[at]) == tolower((unsigned char)m->accelerated) &&
                (at == 0 || !isalnum((unsigned char)text[at - 1])))
                place = at;
        for (int64_t at = 0; at < n && place < 0; at++)
            if (isalnum((unsigned char)text[at]))
                place = at;
        if (place >= 0) {
            memmove(text + place + 1, text + place, (size_t)(n - place));
            text[place] = m->accelerator;
            n++;
        }
    }
    text[n] = '\0';
    *length = n;
}

/* keep_accelerator on a copy with room for one mark more. */
static tfm_status restore_accelerator(const char *op, const tfm__masked *m, char **text,
                                      int64_t *length)
{
    if (!m->accelerator)
        return TFM_OK;
    char *grown = realloc(*text, (size_t)*length + 2);
    if (!grown)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    *text = grown;
    keep_accelerator(m, grown, length);
    return TFM_OK;
}

tfm_status tfm__masked_restore(const char *op, const tfm__masked *m, char **text,
                               int64_t *length)
{
    if (m->n == 0)
        return restore_accelerator(op, m, text, length);
    size_t size = (size_t)*length + 1;
    for (const char *from = *text; *from; from++)
        for (int32_t i = 0; i < m->n; i++)
            if (strncmp(from, pieces[i], strlen(pieces[i])) == 0)
                size += strlen(m->span[i]);
    char *out = malloc(size), *to = out;
    if (!out)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    for (const char *from = *text; *from;) {
        int32_t i = 0;
        while (i < m->n && strncmp(from, pieces[i], strlen(pieces[i])) != 0)
            i++;
        if (i < m->n) {
            size_t k = strlen(m->span[i]);
            memcpy(to, m->span[i], k);
            to += k;
            from += strlen(pieces[i]);
        } else {
            *to++ = *from++;
        }
    }
    *to = '\0';
    free(*text);
    *text = out;
    *length = to - out;
    return restore_accelerator(op, m, text, length);
}

void tfm__masked_free(tfm__masked *m)
{
    if (!m)
        return;
    free(m->text);
    free(m->spans);
    free(m->phrases);
    free(m->term);
    free(m);
}
