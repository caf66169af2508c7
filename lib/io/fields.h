/* Options structs as safetensors metadata: a table of fields (a key, a
 * kind, an offset, a range) formats a struct into string pairs and parses
 * them back, checking every value, so each struct that files carry is
 * described once, by its table. */
#ifndef TFM_IO_FIELDS_H
#define TFM_IO_FIELDS_H

#include <stddef.h>

#include "io/safetensors.h"

typedef enum {
    TFM__FIELD_I64,
    TFM__FIELD_I32,
    TFM__FIELD_F32,     /* finite, and normal or 0 */
    TFM__FIELD_U64,
    TFM__FIELD_CHOICE   /* an int32 enum written as its name: choices[value] */
} tfm__field_kind;

typedef struct tfm__field {
    const char *key;            /* after the table's prefix */
    tfm__field_kind kind;
    size_t offset;              /* in the struct */
    double min, max;            /* numbers (U64: any) */
    const char *const *choices; /* CHOICE: names, NULL-terminated */
} tfm__field;

/* libtfm's own metadata pairs, built before a write. */
#define TFM__METADATA_MAX 96
typedef struct tfm__metadata {
    int64_t count;
    char keys[TFM__METADATA_MAX][48];
    char values[TFM__METADATA_MAX][96];
} tfm__metadata;

void tfm__metadata_add(tfm__metadata *md, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One field's value as written, into out. */
void tfm__field_format(const tfm__field *field, const void *base, char *out, size_t size);

/* Adds "<prefix><key>" = value for every field of base. */
void tfm__fields_write(const tfm__field *fields, int count, const char *prefix,
                       const void *base, tfm__metadata *md);
/* Checks every field of base against its bounds (a choice's value among
 * its names); the first that breaks them fails with status and the
 * message "op: <prefix><key> <value> <why>". The same bounds as
 * tfm__fields_read, so a struct that passes is one a file can carry. */
tfm_status tfm__fields_check(const char *op, const tfm__field *fields, int count,
                             const char *prefix, const void *base, tfm_status status);
/* Reads every field into base from file's metadata. The fields past the
 * first `required` came later: a key of theirs that older files lack
 * leaves base's value as it was. A missing required key, a value
 * of the wrong form or out of range is TFM_ERR_FORMAT naming the key, with
 * ctx ("tfm_model_load: \"path\"") before the message. */
tfm_status tfm__fields_read(const char *ctx, const tfm__field *fields, int count,
                            int required, const char *prefix, const tfm_safetensors *file, void *base);

#endif
