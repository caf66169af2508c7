#include "io/fields.h"

#include <errno.h>
#include <float.h>
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

/* A field's value by its kind: I64, I32 and CHOICE in i, U64 in u, F32 in f. */
typedef struct field_value {
    int64_t i;
    uint64_t u;
    float f;
} field_value;

static field_value value_of(const tfm__field *f, const void *base)
{
    const char *at = (const char *)base + f->offset;
    field_value v = {0, 0, 0.0f};
    int32_t i32;
    switch (f->kind) {
    case TFM__FIELD_I64:
        memcpy(&v.i, at, sizeof v.i);
        break;
    case TFM__FIELD_U64:
        memcpy(&v.u, at, sizeof v.u);
        break;
    case TFM__FIELD_F32:
        memcpy(&v.f, at, sizeof v.f);
        break;
    default:
        memcpy(&i32, at, sizeof i32);
        v.i = i32;
    }
    return v;
}

void tfm__field_format(const tfm__field *f, const void *base, char *out, size_t size)
{
    field_value v = value_of(f, base);
    if (f->kind == TFM__FIELD_U64)
        snprintf(out, size, "%" PRIu64, v.u);
    else if (f->kind == TFM__FIELD_F32)
        snprintf(out, size, "%.9g", (double)v.f); /* 9 digits round-trip a float */
    else if (f->kind == TFM__FIELD_CHOICE)
        snprintf(out, size, "%s", f->choices[v.i]);
    else
        snprintf(out, size, "%" PRId64, v.i);
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

/* Why a value the field holds breaks its bounds, into why; 0 when it
 * keeps them. The one test of a field's value, for a struct
 * (tfm__fields_check) and for a file (tfm__fields_read), so that what one
 * accepts the other does. */
static int out_of_bounds(const tfm__field *f, double value, char *why, size_t size)
{
    if (f->kind == TFM__FIELD_U64)
        return 0;
    if (f->kind == TFM__FIELD_CHOICE) {
        int32_t n = 0;
        while (f->choices[n])
            n++;
        if (value >= 0 && value < n)
            return 0;
        snprintf(why, size, "is not one of the %d choices", (int)n);
        return 1;
    }
    if (f->kind == TFM__FIELD_F32 && !isfinite(value))
        snprintf(why, size, "is not a finite number");
    else if (f->kind == TFM__FIELD_F32 && fabs(value) > FLT_MAX)
        snprintf(why, size, "is beyond the largest float (%.9g)", (double)FLT_MAX);
    else if (f->kind == TFM__FIELD_F32 && value != 0 && fabs(value) < FLT_MIN)
        snprintf(why, size, "is below the smallest normal float (%.9g) and not 0",
                 (double)FLT_MIN);
    else if (value < f->min || value > f->max)
        snprintf(why, size, f->kind == TFM__FIELD_F32 ? "is outside [%.9g, %.9g]"
                                                       : "is outside [%.0f, %.0f]",
                 f->min, f->max);
    else
        return 0;
    return 1;
}

tfm_status tfm__fields_check(const char *op, const tfm__field *fields, int count,
                             const char *prefix, const void *base, tfm_status status)
{
    for (int i = 0; i < count; i++) {
        char why[96], text[48];
        field_value v = value_of(&fields[i], base);
        if (out_of_bounds(&fields[i], fields[i].kind == TFM__FIELD_F32 ? v.f : (double)v.i, why,
                          sizeof why)) {
            if (fields[i].kind == TFM__FIELD_CHOICE) /* no name to format */
                snprintf(text, sizeof text, "%" PRId64, v.i);
            else
                tfm__field_format(&fields[i], base, text, sizeof text);
            return tfm__fail(status, "%s: %s%s %s %s", op, prefix, fields[i].key, text, why);
        }
    }
    return TFM_OK;
}

/* The whole of text as a number of the field's kind, in its bounds. */
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
    float parsed = 0.0f;
    if (f->kind == TFM__FIELD_F32) {
        parsed = strtof(text, &end);
        plain = plain && end != text && *end == '\0' && !isnan(parsed);
        /* the bounds are checked on the float a struct would hold, as
         * tfm__fields_check does; out of float's range (strtof makes 1e-50
         * a 0 and 1e39 an infinity), on the text's own value, which says
         * which way */
        value = errno == ERANGE ? strtod(text, NULL) : parsed;
    } else {
        whole = strtoll(text, &end, 10);
        plain = plain && !errno && end != text && *end == '\0';
        value = (double)whole;
    }
    if (!plain)
        return tfm__fail(TFM_ERR_FORMAT, "%s: metadata %s = \"%s\" is not %s", ctx, key, text,
                         f->kind == TFM__FIELD_F32 ? "a finite number" : "a whole number");
    char why[96];
    if (out_of_bounds(f, value, why, sizeof why))
        return tfm__fail(TFM_ERR_FORMAT, "%s: metadata %s = %s %s", ctx, key, text, why);
    if (f->kind == TFM__FIELD_F32) {
        memcpy(at, &parsed, sizeof parsed);
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
