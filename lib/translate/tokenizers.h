/* A model's tokenizers in its file (tokenizers.c), for model_file.c. */
#ifndef TFM_TRANSLATE_TOKENIZERS_H
#define TFM_TRANSLATE_TOKENIZERS_H

#include "io/safetensors.h"
#include "tfm/model.h"

/* The model's tokenizers, and the ids around its sources when it has
 * any (text.c), as metadata pairs: up to 3 keys (libtfm's) and
 * base64 values (malloc'd, the caller frees them); the count, or -1 on
 * error (nothing left to free). */
int tfm__model_tokenizer_metadata(const char *op, const tfm_model *model, const char **keys,
                                  char **values);

/* Gives model the tokenizers file's metadata carries (none: it keeps
 * none); TFM_ERR_FORMAT, ctx first, for one that does not read or does
 * not fit the model's vocabularies. */
tfm_status tfm__model_tokenizers_read(const char *ctx, const tfm_safetensors *file,
                                      tfm_model *model);

#endif
