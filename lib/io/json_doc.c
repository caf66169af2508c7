/* A published folder's JSON files, member by member (json_doc.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/json_doc.h"

const tfm__json_node *tfm__doc_member(const tfm__json_doc *d, const char *key)
{
    const tfm__json *doc = d->json;
    const tfm__json_node *top = &doc->nodes[0];
    for (uint32_t i = 1; i < top->next; i = doc->nodes[i].next)
        if (strcmp(tfm__json_key(doc, &doc->nodes[i]), key) == 0)
            return &doc->nodes[i];
    return NULL;
}

int tfm__doc_int(const tfm__json_doc *d, const char *key, int64_t fallback, int64_t min,
                 int64_t max, int64_t *out)
{
    const tfm__json_node *n = tfm__doc_member(d, key);
    if (!n || n->type == TFM__JSON_NULL) {
        *out = fallback;
        return 0;
    }
    if (n->type != TFM__JSON_NUMBER || !n->is_integer || n->integer < min || n->integer > max) {
        tfm__fail(TFM_ERR_FORMAT, "%s: %s's %s must be an integer in [%lld, %lld]", d->ctx,
                  d->name, key, (long long)min, (long long)max);
        return -1;
    }
    *out = n->integer;
    return 0;
}

int tfm__doc_float(const tfm__json_doc *d, const char *key, float fallback, double min,
                   double max, float *out)
{
    const tfm__json_node *n = tfm__doc_member(d, key);
    if (!n || n->type == TFM__JSON_NULL) {
        *out = fallback;
        return 0;
    }
    double v = n->type != TFM__JSON_NUMBER ? NAN
               : n->is_integer             ? (double)n->integer
                                           : strtod(d->json->text + n->offset, NULL);
    if (!(v >= min && v <= max)) {
        tfm__fail(TFM_ERR_FORMAT, "%s: %s's %s must be a number in [%g, %g]", d->ctx, d->name,
                  key, min, max);
        return -1;
    }
    *out = (float)v;
    return 0;
}

int tfm__doc_bool(const tfm__json_doc *d, const char *key, int fallback, int32_t *out)
{
    const tfm__json_node *n = tfm__doc_member(d, key);
    if (!n || n->type == TFM__JSON_NULL) {
        *out = fallback;
        return 0;
    }
    if (n->type != TFM__JSON_TRUE && n->type != TFM__JSON_FALSE) {
        tfm__fail(TFM_ERR_FORMAT, "%s: %s's %s must be true or false", d->ctx, d->name, key);
        return -1;
    }
    *out = n->type == TFM__JSON_TRUE;
    return 0;
}

const char *tfm__doc_string(const tfm__json_doc *d, const char *key)
{
    const tfm__json_node *n = tfm__doc_member(d, key);
    return n && n->type == TFM__JSON_STRING ? tfm__json_string(d->json, n) : NULL;
}

const char *tfm__doc_name(const tfm__json_doc *d, const char *key, const char *fallback)
{
    const tfm__json_node *n = tfm__doc_member(d, key);
    return !n || n->type == TFM__JSON_NULL ? fallback : tfm__doc_string(d, key);
}

int tfm__doc_ids(const tfm__json_doc *d, const char *key, const tfm__json_node *array,
                 int64_t max, int32_t *out)
{
    const tfm__json *doc = d->json;
    uint32_t at = (uint32_t)(array - doc->nodes);
    int32_t n = 0;
    for (uint32_t i = at + 1; i < array->next; i = doc->nodes[i].next) {
        const tfm__json_node *id = &doc->nodes[i];
        if (id->type != TFM__JSON_NUMBER || !id->is_integer || id->integer < 0 ||
            id->integer > max) {
            tfm__fail(TFM_ERR_FORMAT, "%s: %s's %s holds something other than token ids in "
                      "[0, %lld]", d->ctx, d->name, key, (long long)max);
            return -1;
        }
        out[n++] = (int32_t)id->integer;
    }
    return 0;
}
