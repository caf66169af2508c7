/* A model's text in and out with a source template (text.c): the
 * model's own for tfm_model_encode_text, a translation's for the
 * translator; and the template in the model's file, for tokenizers.c. */
#ifndef TFM_TRANSLATE_TEXT_H
#define TFM_TRANSLATE_TEXT_H

#include <stdint.h>

#include "model/model.h"

/* text[0, length)'s ids with t's around them, at most max_ids (the text's
 * own ids cut first, as transformers truncates; INT64_MAX: all of them),
 * malloc'd into *ids (the caller frees them), *count of them; *cut (may be
 * NULL) 1 when the text was cut. A bounded encoding reads only as much
 * text as its ids need (tfm_tokenizer_encode_truncated). TFM_ERR_STATE
 * without tokenizers, TFM_ERR_SIZE when max_ids cannot hold t's ids, the
 * tokenizer's errors, TFM_ERR_NOMEM. */
tfm_status tfm__text_encode(const char *op, const tfm_model *m, const tfm__text_template *t,
                            const char *text, int64_t length, int64_t max_ids, int32_t **ids,
                            int64_t *count, int32_t *cut);

/* ids[0, count)'s text as tfm_model_decode_text gives it with t's ids and
 * target language skipped, malloc'd and NUL-terminated into *text,
 * *length bytes before the NUL. */
tfm_status tfm__text_decode(const char *op, const tfm_model *m, const tfm__text_template *t,
                            const int32_t *ids, int64_t count, char **text, int64_t *length);

/* The id of a language code as tok spells it: the code itself, or
 * M2M100's "__code__" (a control piece either way: "en" is also a word);
 * -1 with TFM_ERR_ARG naming side ("source", "target") and the code. */
int32_t tfm__text_language_id(const char *op, const tfm_tokenizer *tok, const char *side,
                              const char *code);

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
