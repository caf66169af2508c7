#include "io/fields.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

void tfm__metadata_add(tfm__metadata *md, const char *key, const char *fmt, ...)
{
    snprintf(md->keys[md->count], sizeof md->keys[0], "%s", key);
    va_list args;
    va_start(args, fmt);
    vsnprintf(md->values[md->count], sizeof md->values[0], fmt, args);
    va_end(args);
    md->count++;
}

void tfm__field_format(const tfm__field *f, const void *base, char *out, size_t size)
{
    const char *at = (const char *)base + f->offset;
    int32_t i32;
    int64_t i64;
    uint64_t u64;
    float f32;
    switch (f->kind) {
    case TFM__FIELD_I64:
        memcpy(&i64, at, sizeof i64);
        snprintf(out, size, "%" PRId64, i64);
        break;
    case TFM__FIELD_I32:
        memcpy(&i32, at, sizeof i32);
        snprintf(out, size, "%" PRId32, i32);
        break;
    case TFM__FIELD_U64:
        memcpy(&u64, at, sizeof u64);
        snprintf(out, size, "%" PRIu64, u64);
        break;
    case TFM__FIELD_F32:
        memcpy(&f32, at, sizeof f32);
        snprintf(out, size, "%.9g", (double)f32); /* 9 digits round-trip a float */
        break;
    default:
        memcpy(&i32, at, sizeof i32);
        snprintf(out, size, "%s", f->choices[i32]);
    }
}

void tfm__fields_write(const tfm__field *fields, int count, const char *prefix,
                       const void *base, tfm__metadata *md)
{
    for (int i = 0; i < count; i++) {
        char key[48], value[48];
        snprintf(key, sizeof key, "%s%s", prefix, fields[i].key);
        tfm__field_format(&fields[i], base, value, sizeof value);
        tfm__metadata_add(md, key, "%s", value);
    }
}

static tfm_status parse_choice(const char *ctx, const char *key, const tfm__field *f,
                               const char *text, char *at)
{
    char names[160] = "";
    for (int32_t i = 0; f->choices[i]; i++) {
        if (strcmp(text, f->choices[i]) == 0) {
            memcpy(at, &i, sizeof i);
            return TFM_OK;
        }
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s\"%s\"", i ? ", " : "", f->choices[i]);
    }
    return tfm__fail(TFM_ERR_FORMAT, "%s: metadata %s = \"%s\" is not one of %s", ctx, key,
                     text, names);
}

/* The whole of text as a number of the field's kind, in its range. */
static tfm_status parse_field(const char *ctx, const char *key, const tfm__field *f,
                              const char *text, void *base)
{
    char *at = (char *)base + f->offset, *end = NULL;
    if (f->kind == TFM__FIELD_CHOICE)
        return parse_choice(ctx, key, f, text, at);
    /* strto* skip leading space and accept '+' and, for floats, hex: a
     * value libtfm wrote has none of that */
    int plain = text[0] != '\0' && text[0] != ' ' && text[0] != '+' && !strpbrk(text, "xX");
    errno = 0;
    if (f->kind == TFM__FIELD_U64) {
        uint64_t value = strtoull(text, &end, 10);
        if (plain && text[0] != '-' && !errno && *end == '\0') {
            memcpy(at, &value, sizeof value);
            return TFM_OK;
        }
        return tfm__fail(TFM_ERR_FORMAT, "%s: metadata %s = \"%s\" is not a whole number "
                         "from 0 to 2^64 - 1", ctx, key, text);
    }
    double value;
    long long whole = 0;
    if (f->kind == TFM__FIELD_F32) {
        float parsed = strtof(text, &end);
        plain = plain && !errno && end != text && *end == '\0' && isfinite(parsed);
        value = parsed;
    } else {
        whole = strtoll(text, &end, 10);
        plain = plain && !errno && end != text && *end == '\0';
        value = (double)whole;
    }
    if (!plain)
        return tfm__fail(TFM_ERR_FORMAT, "%s: metadata %s = \"%s\" is not %s", ctx, key, text,
                         f->kind == TFM__FIELD_F32 ? "a finite number" : "a whole number");
    if (value < f->min || value > f->max)
        return tfm__fail(TFM_ERR_FORMAT, f->kind == TFM__FIELD_F32
                                             ? "%s: metadata %s = %s is outside [%.9g, %.9g]"
                                             : "%s: metadata %s = %s is outside [%.0f, %.0f]",
                         ctx, key, text, f->min, f->max);
    if (f->kind == TFM__FIELD_F32) {
        float f32 = (float)value;
        memcpy(at, &f32, sizeof f32);
    } else if (f->kind == TFM__FIELD_I64) {
        int64_t i64 = whole;
        memcpy(at, &i64, sizeof i64);
    } else {
        int32_t i32 = (int32_t)whole;
        memcpy(at, &i32, sizeof i32);
    }
    return TFM_OK;
}

tfm_status tfm__fields_read(const char *ctx, const tfm__field *fields, int count,
                            int required, const char *prefix, const tfm_safetensors *file, void *base)
{
    for (int i = 0; i < count; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s%s", prefix, fields[i].key);
        const char *text = tfm__safetensors_metadata(file, key);
        if (!text && i >= required)
            continue;
        if (!text)
            return tfm__fail(TFM_ERR_FORMAT, "%s: the metadata lacks %s", ctx, key);
        tfm_status s = parse_field(ctx, key, &fields[i], text, base);
        if (s != TFM_OK)
            return s;
    }
    return TFM_OK;
}
