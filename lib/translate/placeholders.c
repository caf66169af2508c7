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
