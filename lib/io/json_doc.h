/* A JSON document's top-level members read as a published folder's files
 * are read (config.json, generation_config.json, tokenizer_config.json):
 * each key typed and ranged, its default when absent or null, and a
 * message naming the context, the file and the key when it is not. */
#ifndef TFM_IO_JSON_DOC_H
#define TFM_IO_JSON_DOC_H

#include <stdint.h>

#include "io/json.h"

typedef struct tfm__json_doc {
    const char *ctx;     /* "op: \"folder\"", first in messages */
    const tfm__json *json;
    const char *name;    /* the file's name, for messages */
} tfm__json_doc;

/* The top-level member key, or NULL. */
const tfm__json_node *tfm__doc_member(const tfm__json_doc *d, const char *key);
/* An integer member in [min, max] into *out, fallback when absent; 0, or
 * -1 with TFM_ERR_FORMAT (so are the others). */
int tfm__doc_int(const tfm__json_doc *d, const char *key, int64_t fallback, int64_t min,
                 int64_t max, int64_t *out);
/* A number member in [min, max], fallback when absent. */
int tfm__doc_float(const tfm__json_doc *d, const char *key, float fallback, double min,
                   double max, float *out);
/* true or false (1, 0), fallback when absent. */
int tfm__doc_bool(const tfm__json_doc *d, const char *key, int fallback, int32_t *out);
/* A string member, NULL when absent or not a string. */
const char *tfm__doc_string(const tfm__json_doc *d, const char *key);
/* A string member, fallback when absent or null, NULL when not a string
 * (for the caller to refuse). */
const char *tfm__doc_name(const tfm__json_doc *d, const char *key, const char *fallback);
/* The integers of array (a member named key) into out, each in [0, max];
 * 0, or -1 naming key when one is not. */
int tfm__doc_ids(const tfm__json_doc *d, const char *key, const tfm__json_node *array,
                 int64_t max, int32_t *out);

#endif
