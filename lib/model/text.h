/* A model's source template in its file (text.c), for tokenizers.c. */
#ifndef TFM_MODEL_TEXT_H
#define TFM_MODEL_TEXT_H

#include <stdint.h>

#include "model/model.h"

#define TFM__TEXT_TEMPLATE_KEY TFM__MODEL_KEY_PREFIX "text_template"

/* The template as its metadata value, malloc'd; NULL with TFM_ERR_NOMEM. */
char *tfm__text_template_format(const char *op, const tfm__text_template *t);

/* The template a metadata value describes, into *out; TFM_ERR_FORMAT (ctx
 * and key first) for a value that is not one, or names ids outside the
 * vocabularies. */
tfm_status tfm__text_template_parse(const char *ctx, const char *key, const char *value,
                                    int64_t src_vocab, int64_t tgt_vocab,
                                    tfm__text_template *out);

#endif
