/* A small strict JSON reader (RFC 8259) for file headers, and the string
 * escaping a writer needs. The document is a flat array of nodes in
 * document order: a container's children follow it, and each node's next
 * field skips its whole subtree, so walking never recurses. Parsing recurses
 * at most TFM__JSON_MAX_DEPTH levels and allocates at most the input's size
 * (the decoded strings) plus the caller's limit of nodes (56 bytes each). */
#ifndef TFM_IO_JSON_H
#define TFM_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "tfm/common.h"

#define TFM__JSON_MAX_DEPTH 64

typedef enum tfm__json_type {
    TFM__JSON_NULL,
    TFM__JSON_FALSE,
    TFM__JSON_TRUE,
    TFM__JSON_NUMBER,
    TFM__JSON_STRING,
    TFM__JSON_ARRAY,
    TFM__JSON_OBJECT
} tfm__json_type;

typedef struct tfm__json_node {
    tfm__json_type type;
    int32_t is_integer;   /* numbers: an integer literal that fits int64 */
    const char *key;      /* member of an object: its decoded name, else NULL */
    size_t key_len;       /* bytes, without the terminating NUL */
    union {               /* by type: */
        int64_t integer;  /* numbers: the value when is_integer */
        struct {
            const char *string; /* strings: decoded UTF-8, NUL-terminated */
            size_t string_len;  /* bytes; may be shorter than strlen says if \u0000 */
        };
        int64_t count;    /* arrays and objects: number of children */
    };
    int64_t next;         /* index of the first node after this subtree */
    size_t offset;        /* byte offset of the value in the input */
} tfm__json_node;

typedef struct tfm__json {
    tfm__json_node *nodes; /* nodes[0] is the top-level value */
    int64_t count;
    char *strings;         /* storage behind key and string */
} tfm__json;

/* Parses text[0, len): one value, surrounded only by JSON whitespace, of at
 * most max_values values (nodes) in all; a text can hold up to len / 2 + 1.
 * On failure returns TFM_ERR_FORMAT (TFM_ERR_NOMEM if memory runs out) with
 * the message "<context>: invalid JSON at byte N: <reason>" (or "<context>:
 * more than M values ..."), and *doc holds nothing to free. On success free
 * *doc with tfm__json_free. */
tfm_status tfm__json_parse(const char *context, const char *text, size_t len,
                           int64_t max_values, tfm__json *doc);
void tfm__json_free(tfm__json *doc);

/* Writes s[0, len) as a quoted JSON string into dst (when not NULL) and
 * returns the bytes it takes (at most 6 * len + 2), so a first call with
 * dst NULL sizes the buffer. Control characters become \u00XX. */
size_t tfm__json_quote(char *dst, const char *s, size_t len);

#endif
