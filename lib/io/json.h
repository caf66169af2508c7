/* A small strict JSON reader (RFC 8259) for file headers, and the string
 * escaping a writer needs. The document is a flat array of nodes in
 * document order: a container's children follow it, and each node's next
 * field skips its whole subtree, so walking never recurses. Parsing recurses
 * at most TFM__JSON_MAX_DEPTH levels. Strings are decoded in place, into
 * the caller's text (the decoded form never outgrows the quoted one), and
 * a node is 24 bytes: beyond the text itself, parsing allocates at most
 * 24 bytes per value of the caller's limit, which a file reader sets from
 * the text's size (about 5 bytes per byte for safetensors headers, where
 * every value takes at least 5 bytes). */
#ifndef TFM_IO_JSON_H
#define TFM_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "tfm/common.h"

#define TFM__JSON_MAX_DEPTH 64
/* Offsets in a node take 28 bits. */
#define TFM__JSON_MAX_TEXT (((size_t)1 << 28) - 1)

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
    union {                  /* by type: */
        int64_t integer;     /* numbers: the value when is_integer */
        struct {
            uint32_t string_at;  /* strings: the decoded UTF-8, NUL-terminated, at
                                  * text + string_at (tfm__json_string) */
            uint32_t string_len; /* bytes (\u0000 is refused: strlen agrees) */
        };
        int64_t count;       /* arrays and objects: number of children */
    };
    uint32_t key_at;         /* member of an object: its decoded name at text +
                              * key_at (tfm__json_key); 0 for none */
    uint32_t key_len;        /* bytes, without the terminating NUL */
    uint32_t next;           /* index of the first node after this subtree */
    uint32_t offset : 28;    /* byte offset of the value in the input */
    uint32_t type : 3;       /* a tfm__json_type */
    uint32_t is_integer : 1; /* numbers: an integer literal that fits int64 */
} tfm__json_node;

typedef struct tfm__json {
    tfm__json_node *nodes; /* nodes[0] is the top-level value */
    int64_t count;
    const char *text;      /* the caller's, holding the decoded strings */
} tfm__json;

/* Parses text[0, len), len <= TFM__JSON_MAX_TEXT, overwriting its strings
 * with their decoded forms: one value, surrounded only by JSON whitespace,
 * no object naming a key twice, no \u0000 in a string (so every string
 * and key is a C string), of at most max_values values (nodes) in all; a text can hold up to
 * len / 2 + 1. text must outlive *doc. On failure returns TFM_ERR_FORMAT
 * (TFM_ERR_NOMEM if memory runs out) with the message "<context>: invalid
 * JSON at byte N: <reason>" (or "<context>: more than M values ..."), and
 * *doc holds nothing to free. On success free *doc with tfm__json_free. */
tfm_status tfm__json_parse(const char *context, char *text, size_t len, int64_t max_values,
                           tfm__json *doc);
void tfm__json_free(tfm__json *doc);

/* A member's name, or NULL for a value outside an object. */
static inline const char *tfm__json_key(const tfm__json *doc, const tfm__json_node *node)
{
    return node->key_at ? doc->text + node->key_at : NULL;
}

/* A string node's decoded value. */
static inline const char *tfm__json_string(const tfm__json *doc, const tfm__json_node *node)
{
    return doc->text + node->string_at;
}

/* The member key of an object node, or NULL. */
const tfm__json_node *tfm__json_member(const tfm__json *doc, const tfm__json_node *object,
                                       const char *key);

/* Writes s[0, len) as a quoted JSON string into dst (when not NULL) and
 * returns the bytes it takes (at most 6 * len + 2), so a first call with
 * dst NULL sizes the buffer. Control characters become \u00XX. */
size_t tfm__json_quote(char *dst, const char *s, size_t len);

#endif
