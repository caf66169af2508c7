/* A translation's glossary (glossary.c): source terms and the target
 * terms their translation must hold, as the decoding's constraints take
 * them. */
#ifndef TFM_TRANSLATE_GLOSSARY_H
#define TFM_TRANSLATE_GLOSSARY_H

#include <stdint.h>

#include "tfm/text.h"

typedef struct tfm__glossary {
    int32_t n;
    char **source;    /* each term's source text */
    int32_t *ids;     /* the target terms' ids, one after another */
    int32_t *offsets; /* term i's ids: ids[offsets[i], offsets[i + 1]) */
} tfm__glossary;

/* The glossary of terms[0, 2 n) (source, target, source, target ...),
 * its target terms encoded by target, into *out (malloc'd, NULL for n 0;
 * free with tfm__glossary_free). TFM_ERR_NULL for a NULL term, TFM_ERR_ARG
 * for an empty one (named), TFM_ERR_NOMEM. */
tfm_status tfm__glossary_make(const char *op, const tfm_tokenizer *target,
                              const char *const *terms, int32_t n, tfm__glossary **out);
void tfm__glossary_free(tfm__glossary *g);

/* Whether source term i appears in text: its bytes, ASCII letters in
 * either case, with no letter or digit (nor a byte of a multibyte
 * character) just before or after it. */
int tfm__glossary_in(const tfm__glossary *g, int32_t i, const char *text);

#endif
