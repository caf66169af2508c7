/* tfm-serve's JSON: a reader for the request bodies it takes (an object
 * of strings, numbers and lists, values of any other kind skipped) and a
 * writer for its answers. Strict RFC 8259: UTF-8 only, no trailing
 * commas, no comments, nesting at most JSON_MAX_DEPTH deep. */
#ifndef TFM_EXAMPLES_SERVE_JSON_H
#define TFM_EXAMPLES_SERVE_JSON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JSON_MAX_DEPTH = 64 };

/* The code points of text[0, size) into *chars when it is valid UTF-8
 * (no overlong forms, surrogates or values past U+10FFFF): 1, else 0. */
static int utf8_valid(const char *text, size_t size, int64_t *chars)
{
    const unsigned char *s = (const unsigned char *)text;
    int64_t count = 0;
    for (size_t i = 0; i < size; count++) {
        unsigned char c = s[i];
        size_t extra;
        uint32_t min, value;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            extra = 1, min = 0x80, value = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            extra = 2, min = 0x800, value = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            extra = 3, min = 0x10000, value = c & 0x07;
        } else {
            return 0;
        }
        if (size - i <= extra)
            return 0;
        for (size_t k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            value = value << 6 | (s[i + k] & 0x3f);
        }
        if (value < min || value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff))
            return 0;
        i += extra + 1;
    }
    if (chars)
        *chars = count;
    return 1;
}

/* --- reading ------------------------------------------------------------------------ */

typedef struct json_in {
    const char *start, *at, *end;
    int failed; /* 1 once malformed: the position is where */
} json_in;

typedef enum { JSON_STRING, JSON_NUMBER, JSON_ARRAY, JSON_OBJECT, JSON_OTHER } json_kind;

static void json_space(json_in *j)
{
    while (j->at < j->end && (*j->at == ' ' || *j->at == '\t' || *j->at == '\n' || *j->at == '\r'))
        j->at++;
}

static int json_fail(json_in *j)
{
    j->failed = 1;
    return 0;
}

/* 1 and past c (and the spaces after it) when c comes next, else 0. */
static int json_take(json_in *j, char c)
{
    json_space(j);
    if (j->at == j->end || *j->at != c)
        return 0;
    j->at++;
    json_space(j);
    return 1;
}

/* The kind of the value that comes next (spaces skipped). */
static json_kind json_peek(json_in *j)
{
    json_space(j);
    if (j->at == j->end)
        return JSON_OTHER;
    char c = *j->at;
    return c == '"' ? JSON_STRING
           : c == '[' ? JSON_ARRAY
           : c == '{' ? JSON_OBJECT
           : (c == '-' || (c >= '0' && c <= '9')) ? JSON_NUMBER
           : JSON_OTHER;
}

static int hex4(const char *s, uint32_t *value)
{
    *value = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int digit = c >= '0' && c <= '9' ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (digit < 0)
            return 0;
        *value = *value << 4 | (uint32_t)digit;
    }
    return 1;
}

static size_t utf8_put(char *out, uint32_t c)
{
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        out[0] = (char)(0xc0 | c >> 6);
        out[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    if (c < 0x10000) {
        out[0] = (char)(0xe0 | c >> 12);
        out[1] = (char)(0x80 | (c >> 6 & 0x3f));
        out[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | c >> 18);
    out[1] = (char)(0x80 | (c >> 12 & 0x3f));
    out[2] = (char)(0x80 | (c >> 6 & 0x3f));
    out[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* The string that comes next, unescaped into a malloc'd NUL-terminated
 * copy (*size bytes), or NULL: malformed (j->failed), not UTF-8 or holding
 * a NUL (*bad = 1), or out of memory. out may be NULL to only skip it. */
static int json_string(json_in *j, char **out, size_t *size, int *bad)
{
    if (out)
        *out = NULL;
    *bad = 0;
    json_space(j);
    if (j->at == j->end || *j->at != '"')
        return json_fail(j);
    const char *s = ++j->at;
    const char *close = s;
    while (close < j->end && *close != '"') /* the escapes are never longer unescaped */
        close += *close == '\\' && close + 1 < j->end ? 2 : 1;
    if (close >= j->end)
        return json_fail(j);
    char *text = malloc((size_t)(close - s) + 1);
    if (!text)
        return 0;
    size_t n = 0;
    while (s < close) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20) {
            free(text);
            j->at = s;
            return json_fail(j);
        }
        if (c != '\\') {
            text[n++] = (char)c;
            s++;
            continue;
        }
        char e = s[1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            text[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            s += 2;
            continue;
        }
        uint32_t code, low;
        if (e != 'u' || close - s < 6 || !hex4(s + 2, &code)) {
            free(text);
            j->at = s;
            return json_fail(j);
        }
        s += 6;
        if (code >= 0xd800 && code <= 0xdbff && close - s >= 6 && s[0] == '\\' &&
            s[1] == 'u' && hex4(s + 2, &low) && low >= 0xdc00 && low <= 0xdfff) {
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
            s += 6;
        } else if (code >= 0xd800 && code <= 0xdfff) {
            *bad = 1; /* a lone surrogate is no character */
        }
        if (code == 0)
            *bad = 1;
        n += utf8_put(text + n, code);
    }
    j->at = close + 1;
    text[n] = '\0';
    if (!*bad && (memchr(text, '\0', n) || !utf8_valid(text, n, NULL)))
        *bad = 1;
    if (*bad || !out) {
        free(text);
        return *bad ? 0 : 1;
    }
    *out = text;
    *size = n;
    return 1;
}

/* A number: its value when it is a whole number that fits, with
 * *whole = 1; else *whole = 0. 0 when malformed. */
static int json_number(json_in *j, int64_t *value, int *whole)
{
    json_space(j);
    const char *s = j->at;
    if (s < j->end && *s == '-')
        s++;
    if (s == j->end || *s < '0' || *s > '9' || (*s == '0' && s + 1 < j->end && s[1] >= '0' &&
                                                 s[1] <= '9'))
        return json_fail(j);
    int fraction = 0;
    while (s < j->end && ((*s >= '0' && *s <= '9') || *s == '.' || *s == 'e' || *s == 'E' ||
                          ((*s == '+' || *s == '-') && (s[-1] == 'e' || s[-1] == 'E')))) {
        fraction |= *s == '.' || *s == 'e' || *s == 'E';
        s++;
    }
    char digits[32];
    size_t length = (size_t)(s - j->at);
    char *end = NULL;
    *whole = 0;
    if (length < sizeof digits) {
        memcpy(digits, j->at, length);
        digits[length] = '\0';
        double number = strtod(digits, &end);
        if (end != digits + length)
            return json_fail(j);
        if (!fraction && length < 19) {
            *value = strtoll(digits, NULL, 10);
            *whole = 1;
        } else if (number == (double)(int64_t)number && number > -1e15 && number < 1e15) {
            *value = (int64_t)number; /* 2.0 and 1e1 are whole */
            *whole = 1;
        }
    }
    j->at = s;
    return 1;
}

/* Skips the value that comes next, of any kind; 0 when malformed or
 * nested too deep. */
static int json_skip(json_in *j, int depth)
{
    json_kind kind = json_peek(j);
    if (depth > JSON_MAX_DEPTH)
        return json_fail(j);
    if (kind == JSON_STRING) {
        int bad;
        return json_string(j, NULL, NULL, &bad) || bad;
    }
    if (kind == JSON_NUMBER) {
        int64_t value;
        int whole;
        return json_number(j, &value, &whole);
    }
    if (kind == JSON_ARRAY || kind == JSON_OBJECT) {
        char close = kind == JSON_ARRAY ? ']' : '}';
        j->at++;
        if (json_take(j, close))
            return 1;
        do {
            if (kind == JSON_OBJECT) {
                int bad;
                if (!(json_string(j, NULL, NULL, &bad) || bad) || !json_take(j, ':'))
                    return json_fail(j);
            }
            if (!json_skip(j, depth + 1))
                return 0;
        } while (json_take(j, ','));
        return json_take(j, close) || json_fail(j);
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++) {
        size_t length = strlen(words[w]);
        if ((size_t)(j->end - j->at) >= length && !memcmp(j->at, words[w], length)) {
            j->at += length;
            return 1;
        }
    }
    return json_fail(j);
}

/* --- writing ------------------------------------------------------------------------ */

typedef struct json_out {
    char *data;
    size_t size, capacity;
    int failed; /* out of memory */
} json_out;

static void json_raw(json_out *o, const char *text, size_t size)
{
    if (o->failed)
        return;
    if (o->size + size + 1 > o->capacity) {
        size_t capacity = o->capacity ? o->capacity : 256;
        while (o->size + size + 1 > capacity)
            capacity *= 2;
        char *grown = realloc(o->data, capacity);
        if (!grown) {
            o->failed = 1;
            return;
        }
        o->data = grown;
        o->capacity = capacity;
    }
    memcpy(o->data + o->size, text, size);
    o->size += size;
    o->data[o->size] = '\0';
}

static void json_text(json_out *o, const char *text)
{
    json_raw(o, text, strlen(text));
}

/* text as a JSON string, quoted and escaped (UTF-8 as it is). */
static void json_quote(json_out *o, const char *text)
{
    json_raw(o, "\"", 1);
    const char *run = text;
    for (const char *s = text;; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        json_raw(o, run, (size_t)(s - run));
        if (!c)
            break;
        char escape[8];
        snprintf(escape, sizeof escape, c == '"' ? "\\\"" : c == '\\' ? "\\\\" : "\\u%04x", c);
        json_text(o, escape);
        run = s + 1;
    }
    json_raw(o, "\"", 1);
}

#endif
