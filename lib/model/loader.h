/* What a family's room (lib/model/families/) reads a published folder
 * with: pretrained.c's loader, its config_ helpers over the current
 * document (config.json, or tokenizer_config.json after
 * tfm__reading_settings) and the files it finds. */
#ifndef TFM_MODEL_LOADER_H
#define TFM_MODEL_LOADER_H

#include <stdint.h>

#include "io/json.h"
#include "io/json_doc.h"
#include "io/safetensors.h"
#include "model/families.h"

#define MAX_SHARDS 1024
#define PATH_MAX_BYTES 4096

typedef struct tfm__loader {
    const char *op;
    char ctx[PATH_MAX_BYTES + 64]; /* "op: \"folder\"" for messages */
    const char *folder;
    char *config_text, *generation_text, *settings_text;
    char *config_as_read, *generation_as_read; /* as the files hold them, to save them back */
    tfm__json config, generation, settings; /* settings: tokenizer_config.json */
    int has_config, has_generation, has_settings;
    const tfm__json *doc;          /* the document the config_ helpers read */
    const char *doc_name;          /* its file's name, for messages */
    tfm_safetensors *files[MAX_SHARDS];
    int32_t n_files;
    uint8_t **used;                /* per file, per tensor: mapped onto a parameter */
    tfm__family family;
    int32_t shared;                /* one embedding table for both sides */
    const char *prefix;            /* "model." (ForConditionalGeneration) or "" */
    const char *tokenizer_class;   /* a fairseq-numbered tokenizer's, once read */
    const char *const *codes;      /* its language codes, each affix + code + affix */
    int32_t n_codes;
    const char *code_affix;
    int mask_lstrip;               /* a tokenizer class whose <mask> takes the space before it */
    int64_t extra_ids;             /* T5's sentinels */
} tfm__loader;

/* The loader's current document, read as io/json_doc.h reads one. */
static inline tfm__json_doc tfm__doc_of(const tfm__loader *l)
{
    return (tfm__json_doc){l->ctx, l->doc, l->doc_name};
}

static inline int tfm__config_int(tfm__loader *l, const char *key, int64_t fallback,
                                  int64_t min, int64_t max, int64_t *out)
{
    return tfm__doc_int((tfm__json_doc[]){tfm__doc_of(l)}, key, fallback, min, max, out);
}

static inline int tfm__config_bool(tfm__loader *l, const char *key, int fallback,
                                   int32_t *out)
{
    return tfm__doc_bool((tfm__json_doc[]){tfm__doc_of(l)}, key, fallback, out);
}

static inline const char *tfm__config_string(tfm__loader *l, const char *key)
{
    return tfm__doc_string((tfm__json_doc[]){tfm__doc_of(l)}, key);
}

static inline const char *tfm__config_name(tfm__loader *l, const char *key,
                                           const char *fallback)
{
    return tfm__doc_name((tfm__json_doc[]){tfm__doc_of(l)}, key, fallback);
}

static inline int tfm__config_float(tfm__loader *l, const char *key, float fallback,
                                    double min, double max, float *out)
{
    return tfm__doc_float((tfm__json_doc[]){tfm__doc_of(l)}, key, fallback, min, max, out);
}

/* transformers' ACT2FN names of the activations libtfm has; key is the
 * config member that gave name, for the message. */
int tfm__activation_of(tfm__loader *l, const char *key, const char *name, tfm_activation *out);

/* pad_token_id, eos_token_id and decoder_start_token_id (else the
 * class's, else bos_token_id) with the family's defaults. */
int tfm__special_ids(tfm__loader *l, const tfm__config_defaults *d, int64_t *pad, int64_t *eos,
                     int64_t *start);

/* Whether the folder has the file (its path, PATH_MAX_BYTES, into path):
 * anything by that name, for its reader to refuse if it is no regular
 * file. */
int tfm__has_file(tfm__loader *l, const char *name, char *path);

/* The config_ helpers read tokenizer_config.json (which must be there),
 * and config.json again. */
void tfm__reading_settings(tfm__loader *l);
void tfm__reading_config(tfm__loader *l);

#endif
