/* Strict JSON reading into a flat node array, and JSON string quoting. */
#include "io/json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/utf8.h"

typedef struct parser {
    const char *context;
    unsigned char *text; /* read at pos, decoded strings written behind it */
    size_t len, pos;
    tfm__json *doc;
    int64_t max_values; /* doc->nodes holds this many */
    unsigned char *out; /* where the string being decoded goes on */
} parser;

static tfm_status syntax_error(const parser *p, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static tfm_status syntax_error(const parser *p, size_t at, const char *fmt, ...)
{
    char reason[160];
    va_list args;
    va_start(args, fmt);
    vsnprintf(reason, sizeof reason, fmt, args);
    va_end(args);
    return tfm__fail(TFM_ERR_FORMAT, "%s: invalid JSON at byte %zu: %s", p->context,
                     at, reason);
}

/* "'x'" for a printable character, "byte 0xNN" otherwise, "the end" at the end. */
static const char *describe(const parser *p, char *buf, size_t size)
{
    if (p->pos >= p->len)
        snprintf(buf, size, "the end of the input");
    else if (p->text[p->pos] >= 0x20 && p->text[p->pos] < 0x7f)
        snprintf(buf, size, "'%c'", p->text[p->pos]);
    else
        snprintf(buf, size, "byte 0x%02x", p->text[p->pos]);
    return buf;
}

static tfm_status unexpected(const parser *p, const char *expected)
{
    char what[32];
    return syntax_error(p, p->pos, "expected %s, found %s", expected,
                        describe(p, what, sizeof what));
}

static void skip_space(parser *p)
{
    while (p->pos < p->len) {
        unsigned char c = p->text[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static unsigned char *put_utf8(unsigned char *out, uint32_t cp)
{
    if (cp < 0x80) {
        *out++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *out++ = (char)(0xc0 | (cp >> 6));
        *out++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *out++ = (char)(0xe0 | (cp >> 12));
        *out++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *out++ = (char)(0x80 | (cp & 0x3f));
    } else {
        *out++ = (char)(0xf0 | (cp >> 18));
        *out++ = (char)(0x80 | ((cp >> 12) & 0x3f));
        *out++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *out++ = (char)(0x80 | (cp & 0x3f));
    }
    return out;
}

/* The four hex digits after "\u" at p->pos; -1 after reporting. */
static int32_t hex4(parser *p)
{
    if (p->len - p->pos < 4) {
        syntax_error(p, p->pos, "a \\u escape needs four hex digits");
        return -1;
    }
    int32_t value = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p->text[p->pos];
        int digit = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
        if (digit < 0) {
            unexpected(p, "a hex digit in a \\u escape");
            return -1;
        }
        value = value * 16 + digit;
        p->pos++;
    }
    return value;
}

/* One escape after the backslash at p->pos - 1, appended to p->out. */
static tfm_status parse_escape(parser *p)
{
    if (p->pos >= p->len)
        return syntax_error(p, p->pos, "unterminated escape");
    size_t start = p->pos - 1;
    char c = (char)p->text[p->pos++];
    static const char plain[] = "\"\\/bfnrt", decoded[] = "\"\\/\b\f\n\r\t";
    const char *at = c ? strchr(plain, c) : NULL;
    if (at) {
        *p->out++ = (unsigned char)decoded[at - plain];
        return TFM_OK;
    }
    if (c != 'u')
        return syntax_error(p, start, "unknown escape \\%c",
                            c >= 0x20 && c < 0x7f ? c : '?');
    int32_t cp = hex4(p);
    if (cp < 0)
        return TFM_ERR_FORMAT;
    /* a NUL would cut the string where C reads it: "marian\u0000x" is not "marian" */
    if (cp == 0)
        return syntax_error(p, start, "\\u0000 (a NUL character) in a string");
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return syntax_error(p, start, "lone low surrogate \\u%04x", (unsigned)cp);
    if (cp >= 0xd800 && cp <= 0xdbff) {
        if (p->len - p->pos < 2 || p->text[p->pos] != '\\' || p->text[p->pos + 1] != 'u')
            return syntax_error(p, start, "high surrogate \\u%04x without a low one",
                                (unsigned)cp);
        p->pos += 2;
        int32_t low = hex4(p);
        if (low < 0)
            return TFM_ERR_FORMAT;
        if (low < 0xdc00 || low > 0xdfff)
            return syntax_error(p, start, "high surrogate \\u%04x followed by \\u%04x",
                                (unsigned)cp, (unsigned)low);
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    p->out = put_utf8(p->out, (uint32_t)cp);
    return TFM_OK;
}

/* The string at p->pos (which is '"'), decoded in place from its opening
 * quote on: every escape is at least as long as what it decodes to, so the
 * writing never overtakes the reading, and the terminating NUL lands at
 * the latest on the closing quote. Its offset and length into *at, *len. */
static tfm_status parse_string(parser *p, uint32_t *at, uint32_t *len)
{
    size_t start = p->pos++;
    p->out = p->text + start;
    for (;;) {
        if (p->pos >= p->len)
            return syntax_error(p, start, "unterminated string");
        unsigned char c = p->text[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c == '\\') {
            p->pos++;
            tfm_status s = parse_escape(p);
            if (s != TFM_OK)
                return s;
        } else if (c < 0x20) {
            return syntax_error(p, p->pos, "control character 0x%02x in a string", c);
        } else {
            size_t n = tfm__utf8_sequence(p->text + p->pos, p->len - p->pos);
            if (!n)
                return syntax_error(p, p->pos, "invalid UTF-8 in a string");
            memmove(p->out, p->text + p->pos, n); /* p->out is behind: they may overlap */
            p->out += n;
            p->pos += n;
        }
    }
    *at = (uint32_t)start;
    *len = (uint32_t)(p->out - (p->text + start));
    *p->out = '\0';
    return TFM_OK;
}

static int is_digit(const parser *p)
{
    return p->pos < p->len && p->text[p->pos] >= '0' && p->text[p->pos] <= '9';
}

static tfm_status parse_number(parser *p, tfm__json_node *node)
{
    int negative = p->text[p->pos] == '-';
    if (negative)
        p->pos++;
    if (!is_digit(p))
        return unexpected(p, "a digit");
    size_t first = p->pos;
    uint64_t magnitude = 0;
    int exact = 1;
    while (is_digit(p)) {
        unsigned digit = (unsigned)(p->text[p->pos] - '0');
        if (magnitude > (UINT64_MAX - digit) / 10)
            exact = 0;
        else
            magnitude = magnitude * 10 + digit;
        p->pos++;
    }
    if (p->text[first] == '0' && p->pos - first > 1)
        return syntax_error(p, first, "a number has a leading zero");
    if (p->pos < p->len && p->text[p->pos] == '.') {
        p->pos++;
        if (!is_digit(p))
            return unexpected(p, "a digit after the decimal point");
        while (is_digit(p))
            p->pos++;
        exact = 0;
    }
    if (p->pos < p->len && (p->text[p->pos] == 'e' || p->text[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (p->text[p->pos] == '+' || p->text[p->pos] == '-'))
            p->pos++;
        if (!is_digit(p))
            return unexpected(p, "a digit in the exponent");
        while (is_digit(p))
            p->pos++;
        exact = 0;
    }
    uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    node->type = TFM__JSON_NUMBER;
    node->is_integer = exact && magnitude <= limit;
    if (node->is_integer)
        node->integer = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
    return TFM_OK;
}

static tfm_status parse_literal(parser *p, const char *word, tfm__json_type type,
                                tfm__json_node *node)
{
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->text + p->pos, word, n) != 0)
        return unexpected(p, "a value");
    p->pos += n;
    node->type = type;
    return TFM_OK;
}

static int64_t new_node(parser *p)
{
    tfm__json *doc = p->doc;
    if (doc->count == p->max_values) {
        tfm__fail(TFM_ERR_FORMAT, "%s: more than %lld values in %zu bytes (at byte %zu)",
                  p->context, (long long)p->max_values, p->len, p->pos);
        return -1;
    }
    memset(&doc->nodes[doc->count], 0, sizeof doc->nodes[0]);
    return doc->count++;
}

static tfm_status parse_value(parser *p, int depth, uint32_t key_at, uint32_t key_len);

/* The members or elements of the container at p->pos, children of node idx. */
static tfm_status parse_container(parser *p, int64_t idx, int depth)
{
    int object = p->text[p->pos] == '{';
    char close = object ? '}' : ']';
    if (depth >= TFM__JSON_MAX_DEPTH)
        return syntax_error(p, p->pos, "nested deeper than %d levels", TFM__JSON_MAX_DEPTH);
    p->doc->nodes[idx].type = object ? TFM__JSON_OBJECT : TFM__JSON_ARRAY;
    p->pos++;
    skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == close) {
        p->pos++;
        return TFM_OK;
    }
    for (int64_t count = 1;; count++) {
        uint32_t key_at = 0, key_len = 0; /* a key is never at 0: the container is */
        skip_space(p);
        if (object) {
            if (p->pos >= p->len || p->text[p->pos] != '"')
                return unexpected(p, "a string key");
            tfm_status s = parse_string(p, &key_at, &key_len);
            if (s != TFM_OK)
                return s;
            skip_space(p);
            if (p->pos >= p->len || p->text[p->pos] != ':')
                return unexpected(p, "':' after an object key");
            p->pos++;
        }
        tfm_status s = parse_value(p, depth + 1, key_at, key_len);
        if (s != TFM_OK)
            return s;
        p->doc->nodes[idx].count = count;
        skip_space(p);
        if (p->pos < p->len && p->text[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->text[p->pos] == close) {
            p->pos++;
            return TFM_OK;
        }
        return unexpected(p, object ? "',' or '}'" : "',' or ']'");
    }
}

static tfm_status parse_value(parser *p, int depth, uint32_t key_at, uint32_t key_len)
{
    skip_space(p);
    if (p->pos >= p->len)
        return unexpected(p, "a value");
    int64_t idx = new_node(p);
    if (idx < 0)
        return tfm_last_status();
    tfm__json_node *node = &p->doc->nodes[idx]; /* only until the next new_node */
    node->key_at = key_at;
    node->key_len = key_len;
    node->offset = (uint32_t)p->pos; /* < 2^28: the text is */
    tfm_status s;
    switch (p->text[p->pos]) {
    case '{':
    case '[': s = parse_container(p, idx, depth); break;
    case '"': s = parse_string(p, &node->string_at, &node->string_len);
              node->type = TFM__JSON_STRING;
              break;
    case 't': s = parse_literal(p, "true", TFM__JSON_TRUE, node); break;
    case 'f': s = parse_literal(p, "false", TFM__JSON_FALSE, node); break;
    case 'n': s = parse_literal(p, "null", TFM__JSON_NULL, node); break;
    default:
        if (p->text[p->pos] == '-' || is_digit(p))
            s = parse_number(p, node);
        else
            s = unexpected(p, "a value");
    }
    p->doc->nodes[idx].next = (uint32_t)p->doc->count;
    return s;
}

static int key_before(const tfm__json *doc, uint32_t a, uint32_t b)
{
    return strcmp(tfm__json_key(doc, &doc->nodes[a]), tfm__json_key(doc, &doc->nodes[b])) < 0;
}

/* Heapsort of member indices by key: in place (a file's largest object
 * may be most of it) and O(n log n) whatever keys a file chooses. */
static void sort_by_key(const tfm__json *doc, uint32_t *at, size_t n)
{
    for (size_t end = n, start = n / 2; end > 1;) {
        size_t root;
        if (start > 0) {
            root = --start;
        } else {
            uint32_t top = at[0];
            at[0] = at[--end];
            at[end] = top;
            root = 0;
        }
        for (size_t child; (child = 2 * root + 1) < end; root = child) {
            if (child + 1 < end && key_before(doc, at[child], at[child + 1]))
                child++;
            if (!key_before(doc, at[root], at[child]))
                break;
            uint32_t swap = at[root];
            at[root] = at[child];
            at[child] = swap;
        }
    }
}

/* Refuses an object that names a key twice, as NaN and trailing commas
 * are refused: Python's json keeps the last, so a reader keeping either
 * would disagree with transformers about one of them. Each object's
 * members are sorted by key in one buffer sized for the largest (4 bytes
 * a member, after the nodes have shrunk to the document). */
static tfm_status refuse_repeated_keys(const char *context, const tfm__json *doc)
{
    int64_t largest = 0;
    for (int64_t i = 0; i < doc->count; i++)
        if (doc->nodes[i].type == TFM__JSON_OBJECT && doc->nodes[i].count > largest)
            largest = doc->nodes[i].count;
    if (largest < 2)
        return TFM_OK;
    uint32_t *members = malloc((size_t)largest * sizeof *members);
    if (!members)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld JSON keys", context,
                         (long long)largest);
    tfm_status s = TFM_OK;
    for (int64_t i = 0; s == TFM_OK && i < doc->count; i++) {
        const tfm__json_node *object = &doc->nodes[i];
        if (object->type != TFM__JSON_OBJECT || object->count < 2)
            continue;
        size_t n = 0;
        for (uint32_t c = (uint32_t)i + 1; c < object->next; c = doc->nodes[c].next)
            members[n++] = c;
        sort_by_key(doc, members, n);
        for (size_t k = 1; s == TFM_OK && k < n; k++) {
            if (key_before(doc, members[k - 1], members[k]))
                continue;
            /* equal keys: the later one's opening quote is at its key_at */
            const tfm__json_node *a = &doc->nodes[members[k - 1]], *b = &doc->nodes[members[k]];
            s = tfm__fail(TFM_ERR_FORMAT, "%s: invalid JSON at byte %u: the key \"%.64s\" "
                          "appears twice in one object", context,
                          (unsigned)(a->key_at > b->key_at ? a->key_at : b->key_at),
                          tfm__json_key(doc, b));
        }
    }
    free(members);
    return s;
}

tfm_status tfm__json_parse(const char *context, char *text, size_t len, int64_t max_values,
                           tfm__json *doc)
{
    memset(doc, 0, sizeof *doc);
    if (len > TFM__JSON_MAX_TEXT)
        return tfm__fail(TFM_ERR_FORMAT, "%s: a JSON text of %zu bytes is past the %zu "
                         "this reader takes", context, len, TFM__JSON_MAX_TEXT);
    /* nodes for as many values as the text can hold, up to the limit, in
     * one block: growing it would copy (and, where pages are touched as
     * they are allocated, keep resident) up to twice as much */
    if (max_values > (int64_t)(len / 2 + 1))
        max_values = (int64_t)(len / 2 + 1);
    parser p = {context, (unsigned char *)text, len, 0, doc, max_values, NULL};
    doc->text = text;
    doc->nodes = malloc((size_t)max_values * sizeof *doc->nodes);
    if (!doc->nodes)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld JSON values", context,
                         (long long)max_values);
    tfm_status s = parse_value(&p, 0, 0, 0);
    if (s == TFM_OK) {
        skip_space(&p);
        if (p.pos < p.len)
            s = unexpected(&p, "nothing after the top-level value");
    }
    if (s != TFM_OK) {
        tfm__json_free(doc);
        return s;
    }
    /* a document kept (a vocabulary) keeps only the nodes it has */
    tfm__json_node *fitted = realloc(doc->nodes, (size_t)doc->count * sizeof *fitted);
    if (fitted)
        doc->nodes = fitted;
    s = refuse_repeated_keys(context, doc);
    if (s != TFM_OK)
        tfm__json_free(doc);
    return s;
}

void tfm__json_free(tfm__json *doc)
{
    free(doc->nodes);
    memset(doc, 0, sizeof *doc);
}

const tfm__json_node *tfm__json_member(const tfm__json *doc, const tfm__json_node *object,
                                       const char *key)
{
    for (uint32_t i = (uint32_t)(object - doc->nodes) + 1; i < object->next;
         i = doc->nodes[i].next)
        if (strcmp(tfm__json_key(doc, &doc->nodes[i]), key) == 0)
            return &doc->nodes[i];
    return NULL;
}

size_t tfm__json_quote(char *dst, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
#define PUT(c) (dst ? (void)(dst[n] = (c)) : (void)0, n++)
    PUT('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *short_form = c == '"'    ? "\\\""
                                 : c == '\\' ? "\\\\"
                                 : c == '\n' ? "\\n"
                                 : c == '\r' ? "\\r"
                                 : c == '\t' ? "\\t"
                                 : c == '\b' ? "\\b"
                                 : c == '\f' ? "\\f"
                                             : NULL;
        if (short_form) {
            PUT(short_form[0]);
            PUT(short_form[1]);
        } else if (c < 0x20) {
            PUT('\\');
            PUT('u');
            PUT('0');
            PUT('0');
            PUT(hex[c >> 4]);
            PUT(hex[c & 15]);
        } else {
            PUT((char)c);
        }
    }
    PUT('"');
#undef PUT
    return n;
}
