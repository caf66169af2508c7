/* Model files: what the training state (lib/model/training.c) shares with
 * tfm_model_save and tfm_model_load. */
#ifndef TFM_MODEL_MODEL_FILE_H
#define TFM_MODEL_MODEL_FILE_H

#include "io/fields.h"
#include "tfm/model.h"

/* The computed sinusoidal tables of both sides hold at most this many
 * values (1 GiB). */
#define TFM__MAX_SINUSOIDAL_VALUES ((int64_t)1 << 28)

/* The one check of a model's options, run by tfm_model_create, every save
 * and every load, so that whatever is made can be saved and read back:
 * every field within the bounds of the table that files are written and
 * read with, floats finite and normal or 0, then the relations between
 * fields. Fails with status and "op: <prefix><field> ..." (prefix
 * "options." for a caller's struct, "metadata tfm." for a file). */
tfm_status tfm__model_options_check(const char *op, const char *prefix,
                                    const tfm_model_options *options, tfm_status status);

/* Writes the model's parameters and options, then extra_count more tensors
 * (named under TFM__RESERVED_TENSOR_PREFIX), libtfm's pairs already in md
 * and the user's own pairs, as one file. */
tfm_status tfm__model_write(const char *op, const tfm_model *model, const char *path,
                            int64_t extra_count, const char *const *extra_names,
                            const tfm_tensor *const *extra_tensors, tfm__metadata *md,
                            int64_t user_count, const char *const *user_keys,
                            const char *const *user_values);

/* The options a file describes, checked key by key; ctx ("op: \"path\"")
 * starts each message. */
tfm_status tfm__model_options_read(const char *ctx, const tfm_safetensors *file,
                                   tfm_model_options *options);
/* 1 and "tfm.KEY is A here, B there" in out for the first option a and b
 * write differently; 0 when they describe the same model. */
int tfm__model_options_difference(const tfm_model_options *a, const tfm_model_options *b,
                                  char *out, size_t size);

/* A new model built from the file's description, its parameters loaded. */
tfm_model *tfm__model_from_file(const char *op, const char *path, const tfm_safetensors *file);

#endif
