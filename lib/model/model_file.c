/* Models that describe themselves: the options written as safetensors
 * "__metadata__" beside the parameters, and a model rebuilt from a file
 * alone. Every option is one "tfm.<field>" string; the table below is the
 * one place that knows which fields there are. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/options.h"
#include "core/params.h"
#include "core/tensor.h"
#include "io/fields.h"
#include "io/load.h"
#include "model/model.h"
#include "model/model_file.h"
#include "translate/tokenizers.h"

/* The bounds of every option, for a model made (tfm_model_create), saved
 * and read back alike. Sizes past these are absurd, whatever a file claims. */
#define MAX_SIZE ((int64_t)1 << 31)
#define MAX_LAYERS 4096
#define MAX_ID (((int64_t)1 << 31) - 1)
#define MAX_BUCKETS 65536

static const char *const positions_names[] = {"sinusoidal", "learned", "sinusoidal_halves",
                                                    "sinusoidal_fairseq", "none", NULL};
static const char *const scale_names[] = {"none", "sqrt_d", "trainable", NULL};
static const char *const activation_names[] = {"relu", "gelu", "silu", "gelu_tanh", NULL};

#define AT(member) offsetof(tfm_model_options, member)
static const tfm__field fields[] = {
    {"src_vocab", TFM__FIELD_I64, AT(src_vocab), 1, MAX_SIZE, NULL},
    {"tgt_vocab", TFM__FIELD_I64, AT(tgt_vocab), 1, MAX_SIZE, NULL},
    {"max_src_len", TFM__FIELD_I64, AT(max_src_len), 1, MAX_SIZE, NULL},
    {"max_tgt_len", TFM__FIELD_I64, AT(max_tgt_len), 1, MAX_SIZE, NULL},
    {"share_embeddings", TFM__FIELD_I32, AT(share_embeddings), 0, 1, NULL},
    {"positions", TFM__FIELD_CHOICE, AT(positions), 0, 0, positions_names},
    {"embedding_scale", TFM__FIELD_CHOICE, AT(embedding_scale), 0, 0, scale_names},
    {"encoder_layers", TFM__FIELD_I32, AT(encoder_layers), 0, MAX_LAYERS, NULL},
    {"decoder_layers", TFM__FIELD_I32, AT(decoder_layers), 0, MAX_LAYERS, NULL},
    {"final_norm", TFM__FIELD_I32, AT(final_norm), 0, 1, NULL},
    {"d_model", TFM__FIELD_I64, AT(d_model), 1, MAX_SIZE, NULL},
    {"heads", TFM__FIELD_I32, AT(heads), 1, MAX_ID, NULL},
    {"d_ff", TFM__FIELD_I64, AT(d_ff), 1, MAX_SIZE, NULL},
    {"dropout", TFM__FIELD_F32, AT(dropout), 0, 1, NULL},
    {"activation", TFM__FIELD_CHOICE, AT(activation), 0, 0, activation_names},
    {"norm_first", TFM__FIELD_I32, AT(norm_first), 0, 1, NULL},
    {"layer_norm_eps", TFM__FIELD_F32, AT(layer_norm_eps), 0, 1, NULL},
    {"bias", TFM__FIELD_I32, AT(bias), 0, 1, NULL},
    {"fused_qkv", TFM__FIELD_I32, AT(fused_qkv), 0, 1, NULL},
    {"trainable_scale", TFM__FIELD_I32, AT(trainable_scale), 0, 1, NULL},
    {"scale_init", TFM__FIELD_F32, AT(scale_init), 0, 1e30, NULL},
    {"seed", TFM__FIELD_U64, AT(seed), 0, 0, NULL},
    {"embedding_dropout", TFM__FIELD_F32, AT(embedding_dropout), -1, 1, NULL},
    /* added in 0.4: files written before load without them (-1, and 0) */
    {"bos_id", TFM__FIELD_I32, AT(bos_id), -1, MAX_ID, NULL},
    {"eos_id", TFM__FIELD_I32, AT(eos_id), -1, MAX_ID, NULL},
    {"pad_id", TFM__FIELD_I32, AT(pad_id), -1, MAX_ID, NULL},
    {"tie_generator", TFM__FIELD_I32, AT(tie_generator), 0, 1, NULL},
    /* added for published models: files written before load without them */
    {"position_offset", TFM__FIELD_I64, AT(position_offset), 0, MAX_SIZE, NULL},
    {"embedding_norm", TFM__FIELD_I32, AT(embedding_norm), 0, 1, NULL},
    {"feed_forward_bias", TFM__FIELD_I32, AT(feed_forward_bias), 0, 1, NULL},
    {"rms_norm", TFM__FIELD_I32, AT(rms_norm), 0, 1, NULL},
    {"gated_feed_forward", TFM__FIELD_I32, AT(gated_feed_forward), 0, 1, NULL},
    {"unscaled_attention", TFM__FIELD_I32, AT(unscaled_attention), 0, 1, NULL},
    {"relative_attention_buckets", TFM__FIELD_I32, AT(relative_attention_buckets), 0,
     MAX_BUCKETS, NULL},
    {"relative_attention_max_distance", TFM__FIELD_I32, AT(relative_attention_max_distance), 0,
     MAX_ID, NULL},
    {"generator_rescale", TFM__FIELD_I32, AT(generator_rescale), 0, 1, NULL},
    {"head_dim", TFM__FIELD_I64, AT(head_dim), 0, MAX_SIZE, NULL},
};
#undef AT
/* Every file holds the fields before bos_id; the later ones may be absent. */
enum { FIELD_COUNT = sizeof fields / sizeof fields[0], OPTIONAL_FIELDS = 14,
       REQUIRED_FIELDS = FIELD_COUNT - OPTIONAL_FIELDS };

/* --- the one check ----------------------------------------------------------------- */

tfm_status tfm__model_options_check(const char *op, const char *prefix,
                                    const tfm_model_options *o, tfm_status status)
{
    tfm_status s = tfm__fields_check(op, fields, FIELD_COUNT, prefix, o, status);
    if (s != TFM_OK)
        return s;
    if (o->share_embeddings && o->src_vocab != o->tgt_vocab)
        return tfm__fail(status, "%s: shared embeddings need equal vocabularies (%lld, %lld)",
                         op, (long long)o->src_vocab, (long long)o->tgt_vocab);
    int64_t pad_vocab = o->src_vocab < o->tgt_vocab ? o->src_vocab : o->tgt_vocab;
    const struct {
        const char *name;
        int32_t id;
        int64_t vocab;
    } tokens[] = {{"bos_id", o->bos_id, o->tgt_vocab},
                  {"eos_id", o->eos_id, o->tgt_vocab},
                  {"pad_id", o->pad_id, pad_vocab}};
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++)
        if (tokens[i].id >= tokens[i].vocab)
            return tfm__fail(status, "%s: %s%s %d is neither -1 (not set) nor in [0, %lld)%s",
                             op, prefix, tokens[i].name, (int)tokens[i].id,
                             (long long)tokens[i].vocab,
                             i == 2 ? ", the ids both vocabularies have"
                                    : ", the target vocabulary");
    int32_t buckets = o->relative_attention_buckets;
    if ((buckets != 0 || o->relative_attention_max_distance != 0) &&
        (buckets < 4 || o->relative_attention_max_distance <= buckets / 2))
        return tfm__fail(status, "%s: %srelative_attention_buckets %d must be 0 (none) or 4 to "
                         "%d, with %srelative_attention_max_distance %d more than half of them",
                         op, prefix, (int)buckets, MAX_BUCKETS, prefix,
                         (int)o->relative_attention_max_distance);
    /* lengths and width are at most 2^31 each: divide rather than multiply */
    if (o->positions != TFM_POSITIONS_LEARNED && o->positions != TFM_POSITIONS_NONE &&
        o->max_src_len + o->max_tgt_len + 2 * o->position_offset >
            TFM__MAX_SINUSOIDAL_VALUES / o->d_model)
        return tfm__fail(status, "%s: sinusoidal tables of %lld + %lld positions of %lld "
                         "values are absurd (more than %lld values, with %lld offset rows "
                         "each)", op, (long long)o->max_src_len, (long long)o->max_tgt_len,
                         (long long)o->d_model, (long long)TFM__MAX_SINUSOIDAL_VALUES,
                         (long long)o->position_offset);
    return TFM_OK;
}

/* --- writing -------------------------------------------------------------------- */

#define INT8_KEY TFM__MODEL_KEY_PREFIX "int8"

static void model_metadata(const tfm_model *m, tfm__metadata *md)
{
    /* a quantized model's file is format 2, so that a libtfm without int8
     * refuses it by its version */
    tfm__metadata_add(md, TFM__MODEL_KEY_PREFIX "format_version", "%d",
                      m->quantized ? TFM__MODEL_INT8_FORMAT_VERSION : TFM__MODEL_FORMAT_VERSION);
    tfm__fields_write(fields, FIELD_COUNT, TFM__MODEL_KEY_PREFIX, &m->options, md);
    if (m->quantized)
        tfm__metadata_add(md, INT8_KEY, "%s", tfm__int8_what_name(m->quantized));
}

/* The model's keys (md's, then the tokenizers') followed by the caller's,
 * which must not use libtfm's prefix; NULL on error. */
static const char **join_keys(const char *op, const tfm__metadata *md, int tokenizers,
                              const char *const *tokenizer_keys,
                              const char *const *tokenizer_values, int64_t user_count,
                              const char *const *user_keys, const char *const *user_values,
                              const char ***values_out)
{
    if (user_count < 0) {
        tfm__fail(TFM_ERR_ARG, "%s: metadata_count %lld is negative", op, (long long)user_count);
        return NULL;
    }
    if (user_count > 0 && (!user_keys || !user_values)) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, user_keys ? "values" : "keys");
        return NULL;
    }
    for (int64_t i = 0; i < user_count; i++)
        if (user_keys[i] && strncmp(user_keys[i], TFM__MODEL_KEY_PREFIX,
                                    strlen(TFM__MODEL_KEY_PREFIX)) == 0) {
            tfm__fail(TFM_ERR_ARG, "%s: keys[%lld] \"%s\" starts with \"" TFM__MODEL_KEY_PREFIX
                      "\", which libtfm keeps for its own keys", op, (long long)i,
                      user_keys[i]);
            return NULL;
        }
    size_t total = (size_t)(md->count + tokenizers + user_count);
    const char **keys = malloc(total * sizeof *keys);
    const char **values = malloc(total * sizeof *values);
    if (!keys || !values) {
        free(keys);
        free(values);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the metadata", op);
        return NULL;
    }
    for (int64_t i = 0; i < md->count; i++) {
        keys[i] = md->keys[i];
        values[i] = md->values[i];
    }
    for (int i = 0; i < tokenizers; i++) {
        keys[md->count + i] = tokenizer_keys[i];
        values[md->count + i] = tokenizer_values[i];
    }
    for (int64_t i = 0; i < user_count; i++) {
        keys[md->count + tokenizers + i] = user_keys[i];
        values[md->count + tokenizers + i] = user_values[i];
    }
    *values_out = values;
    return keys;
}

tfm_status tfm__model_write(const char *op, const tfm_model *m, const char *path,
                            int64_t extra_count, const char *const *extra_names,
                            const tfm_tensor *const *extra_tensors, tfm__metadata *md,
                            int64_t user_count, const char *const *user_keys,
                            const char *const *user_values)
{
    /* never write what tfm_model_load would refuse */
    if (tfm__model_options_check(op, "options.", &m->options, TFM_ERR_ARG) != TFM_OK)
        return tfm_last_status();
    model_metadata(m, md);
    const char *tokenizer_keys[3];
    char *tokenizer_values[3];
    int tokenizers = tfm__model_tokenizer_metadata(op, m, tokenizer_keys, tokenizer_values);
    if (tokenizers < 0)
        return tfm_last_status();
    const char **values = NULL;
    const char **keys = join_keys(op, md, tokenizers, tokenizer_keys,
                                  (const char *const *)tokenizer_values, user_count, user_keys,
                                  user_values, &values);
    if (!keys) {
        while (tokenizers > 0)
            free(tokenizer_values[--tokenizers]);
        return tfm_last_status();
    }
    /* a quantized weight is written as its int8 values and scales (a tied
     * generator's beside its float32 values, the embedding's) */
    tfm__int8_tensors q = {0};
    tfm_status s = m->quantized ? tfm__int8_tensors_make(op, m, &q) : TFM_OK;
    int64_t params = tfm_params_count(m->params), total = params + q.count + extra_count;
    const char **names = malloc((size_t)total * sizeof *names);
    const tfm_tensor **tensors = malloc((size_t)total * sizeof *tensors);
    if (s == TFM_OK && (!names || !tensors))
        s = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld names", op, (long long)total);
    if (s == TFM_OK) {
        int64_t count = 0;
        for (int64_t i = 0; i < params; i++)
            if (!tfm__int8_replaces_float(m, tfm_params_at(m->params, i))) {
                names[count] = tfm_params_name(m->params, i);
                tensors[count++] = tfm_params_at(m->params, i);
            }
        for (int64_t i = 0; i < q.count; i++, count++) {
            names[count] = q.names[i];
            tensors[count] = q.tensors[i];
        }
        for (int64_t i = 0; i < extra_count; i++, count++) {
            names[count] = extra_names[i];
            tensors[count] = extra_tensors[i];
        }
        s = tfm__safetensors_write(op, path, count, names, tensors,
                                   md->count + tokenizers + user_count, keys, values);
    }
    while (tokenizers > 0)
        free(tokenizer_values[--tokenizers]);
    tfm__int8_tensors_free(&q);
    free(names);
    free(tensors);
    free(keys);
    free(values);
    return s;
}

tfm_status tfm_model_save(const tfm_model *m, const char *path)
{
    return tfm_model_save_with_metadata(m, path, 0, NULL, NULL);
}

tfm_status tfm_model_save_with_metadata(const tfm_model *m, const char *path,
                                        int64_t metadata_count, const char *const *keys,
                                        const char *const *values)
{
    const char *op = metadata_count ? "tfm_model_save_with_metadata" : "tfm_model_save";
    if (!m)
        return tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
    tfm__metadata md = {0};
    return tfm__model_write(op, m, path, 0, NULL, NULL, &md, metadata_count, keys, values);
}

/* --- reading -------------------------------------------------------------------- */

tfm_status tfm__model_options_read(const char *ctx, const tfm_safetensors *file,
                                   tfm_model_options *o)
{
    tfm_model_options_init(o);
    const char *version = tfm__safetensors_metadata(file, TFM__MODEL_KEY_PREFIX "format_version");
    if (!version)
        return tfm__fail(TFM_ERR_FORMAT, "%s holds no model description (no metadata "
                         TFM__MODEL_KEY_PREFIX "format_version): a file of parameters alone "
                         "loads with tfm_params_load into a model made with the options it "
                         "was trained with", ctx);
    char expected[16], int8[16];
    snprintf(expected, sizeof expected, "%d", TFM__MODEL_FORMAT_VERSION);
    snprintf(int8, sizeof int8, "%d", TFM__MODEL_INT8_FORMAT_VERSION);
    if (strcmp(version, expected) != 0 && strcmp(version, int8) != 0)
        return tfm__fail(TFM_ERR_FORMAT, "%s describes its model in format \"%s\"; this "
                         "libtfm reads formats %s and %s (int8)", ctx, version, expected, int8);
    tfm_status s = tfm__fields_read(ctx, fields, FIELD_COUNT, REQUIRED_FIELDS,
                                    TFM__MODEL_KEY_PREFIX, file, o);
    return s != TFM_OK ? s
                       : tfm__model_options_check(ctx, "metadata " TFM__MODEL_KEY_PREFIX, o,
                                                  TFM_ERR_FORMAT);
}

int tfm__model_options_difference(const tfm_model_options *a, const tfm_model_options *b,
                                  char *out, size_t size)
{
    for (int i = 0; i < FIELD_COUNT; i++) {
        char x[48], y[48];
        tfm__field_format(&fields[i], a, x, sizeof x);
        tfm__field_format(&fields[i], b, y, sizeof y);
        if (strcmp(x, y) != 0) {
            snprintf(out, size, TFM__MODEL_KEY_PREFIX "%s is %s here, %s there", fields[i].key,
                     x, y);
            return 1;
        }
    }
    return 0;
}

/* The float values the file holds: no model it describes can have more
 * parameters, so creation stops there instead of allocating what a forged
 * description asks for. */
static int64_t float_values(const tfm_safetensors *file)
{
    int64_t total = 0, count = tfm_safetensors_count(file);
    for (int64_t i = 0; i < count; i++) {
        tfm__tensor_info info;
        tfm__safetensors_info(file, i, &info);
        /* int8 values stand for the float32 ones of a quantized weight */
        total += info.is_float || !strcmp(info.dtype_name, "I8") ? info.numel : 0;
    }
    return total;
}

/* What the file's model had quantized (TFM_QUANTIZE_*): 0 for a format 1
 * file, else its INT8_KEY, which format 2 requires; -1 with TFM_ERR_FORMAT. */
static int64_t quantized_of(const char *ctx, const tfm_safetensors *file)
{
    const char *version = tfm__safetensors_metadata(file, TFM__MODEL_KEY_PREFIX "format_version");
    const char *what = tfm__safetensors_metadata(file, INT8_KEY);
    char int8[16];
    snprintf(int8, sizeof int8, "%d", TFM__MODEL_INT8_FORMAT_VERSION);
    if (strcmp(version, int8) != 0 && !what)
        return 0;
    for (uint32_t flags = 1; flags < 4; flags++)
        if (what && tfm__int8_what_name(flags) && !strcmp(what, tfm__int8_what_name(flags)) &&
            strcmp(version, int8) == 0)
            return flags;
    tfm__fail(TFM_ERR_FORMAT, "%s: " INT8_KEY " is %s%s%s in format %s; format %s writes "
              "\"layers\" or \"layers,generator\"", ctx, what ? "\"" : "",
              what ? what : "missing", what ? "\"" : "", version, int8);
    return -1;
}

/* Loads the parameters from the file; those of a quantized model's int8
 * weights (and only those: tfm__int8_replaces_float) come from its int8
 * values. */
static tfm_status load_params(const char *op, const char *path, const char *ctx, tfm_model *m,
                              const tfm_safetensors *file, uint32_t quantized)
{
    tfm_load_options lenient;
    tfm_load_options_init(&lenient);
    lenient.allow_missing = 1; /* the int8 weights, checked below */
    tfm__load_match match;
    tfm_status s = tfm__load_match_params(op, path, m->params, file, quantized ? &lenient : NULL,
                                          TFM__RESERVED_TENSOR_PREFIX, &match);
    if (s != TFM_OK) {
        /* the file contradicts its own description */
        if (s == TFM_ERR_SHAPE || s == TFM_ERR_DTYPE)
            tfm__fail_because(TFM_ERR_FORMAT, "%s: its tensors do not fit its model "
                              "description", ctx);
        return tfm_last_status();
    }
    if (!quantized) {
        tfm__load_apply(m->params, file, &match, NULL);
        return TFM_OK;
    }
    tfm_load_report *report = NULL;
    tfm__load_apply(m->params, file, &match, &report);
    s = tfm__int8_read(op, ctx, m, quantized, file);
    for (int64_t i = 0; s == TFM_OK && i < tfm_load_report_count(report, TFM_LOAD_MISSING);
         i++) {
        const char *name = tfm_load_report_name(report, TFM_LOAD_MISSING, i);
        if (!tfm__int8_replaces_float(m, tfm_params_find(m->params, name)))
            s = tfm__fail(TFM_ERR_FORMAT, "%s: parameter \"%s\" is missing", ctx, name);
    }
    tfm_load_report_free(report);
    return s;
}

tfm_model *tfm__model_from_file(const char *op, const char *path, const tfm_safetensors *file)
{
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: \"%s\"", op, path);
    tfm_model_options o;
    int64_t quantized;
    if (tfm__model_options_read(ctx, file, &o) != TFM_OK || (quantized = quantized_of(ctx, file)) < 0)
        return NULL;
    tfm_model *m = tfm__model_create(op, &o, float_values(file));
    if (!m) {
        if (tfm_last_status() == TFM_ERR_SIZE)
            tfm__fail_because(TFM_ERR_FORMAT, "%s: \"%s\": its model description needs "
                              "more than the %lld values the file holds", op, path,
                              (long long)float_values(file));
        else if (tfm_last_status() == TFM_ERR_ARG)
            tfm__fail_because(TFM_ERR_FORMAT, "%s: \"%s\": its model description is not a "
                              "valid model", op, path);
        return NULL;
    }
    if (load_params(op, path, ctx, m, file, (uint32_t)quantized) != TFM_OK ||
        tfm__model_tokenizers_read(ctx, file, m) != TFM_OK) {
        tfm_model_free(m);
        return NULL;
    }
    return m;
}

tfm_model *tfm_model_load(const char *path)
{
    const char *op = "tfm_model_load";
    tfm_safetensors *file = tfm__safetensors_open(op, path);
    if (!file)
        return NULL;
    tfm_model *m = tfm__model_from_file(op, path, file);
    tfm_safetensors_close(file);
    return m;
}

/* --- the options, read back ------------------------------------------------------- */

tfm_status tfm_model_get_options(const tfm_model *m, tfm_model_options *out)
{
    const char *op = "tfm_model_get_options";
    if (!m || !out)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, m ? "options" : "model");
    return tfm__write_options(op, "tfm_model_options_init", &m->options, out,
                              sizeof m->options, offsetof(tfm_model_options, src_vocab)) < 0
               ? tfm_last_status()
               : TFM_OK;
}

int32_t tfm_model_option_count(void)
{
    return FIELD_COUNT;
}

tfm_status tfm_model_option(const tfm_model *m, int32_t index, const char **name, char *value,
                            int64_t value_size)
{
    const char *op = "tfm_model_option";
    if (!m || !name || !value)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                         !m ? "model" : !name ? "name" : "value");
    if (index < 0 || index >= FIELD_COUNT)
        return tfm__fail(TFM_ERR_RANGE, "%s: index %d is outside [0, %d)", op, (int)index,
                         FIELD_COUNT);
    char text[96];
    tfm__field_format(&fields[index], &m->options, text, sizeof text);
    if (value_size <= (int64_t)strlen(text))
        return tfm__fail(TFM_ERR_SIZE, "%s: \"%s\" needs %zu bytes, value_size is %lld", op,
                         fields[index].key, strlen(text) + 1, (long long)value_size);
    memcpy(value, text, strlen(text) + 1);
    *name = fields[index].key;
    return TFM_OK;
}

static int64_t size_of(const char *op, const tfm_model *m, const int64_t *field)
{
    if (!m) {
        tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
        return -1;
    }
    return *field;
}

int64_t tfm_model_src_vocab(const tfm_model *m)
{
    return size_of("tfm_model_src_vocab", m, m ? &m->options.src_vocab : NULL);
}

int64_t tfm_model_tgt_vocab(const tfm_model *m)
{
    return size_of("tfm_model_tgt_vocab", m, m ? &m->options.tgt_vocab : NULL);
}

int64_t tfm_model_max_src_len(const tfm_model *m)
{
    return size_of("tfm_model_max_src_len", m, m ? &m->options.max_src_len : NULL);
}

int64_t tfm_model_max_tgt_len(const tfm_model *m)
{
    return size_of("tfm_model_max_tgt_len", m, m ? &m->options.max_tgt_len : NULL);
}

int64_t tfm_model_d_model(const tfm_model *m)
{
    return size_of("tfm_model_d_model", m, m ? &m->options.d_model : NULL);
}

static int32_t token_of(const char *op, const tfm_model *m, const int32_t *field)
{
    if (!m) {
        tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
        return -1;
    }
    return *field;
}

int32_t tfm_model_bos_id(const tfm_model *m)
{
    return token_of("tfm_model_bos_id", m, m ? &m->options.bos_id : NULL);
}

int32_t tfm_model_eos_id(const tfm_model *m)
{
    return token_of("tfm_model_eos_id", m, m ? &m->options.eos_id : NULL);
}

int32_t tfm_model_pad_id(const tfm_model *m)
{
    return token_of("tfm_model_pad_id", m, m ? &m->options.pad_id : NULL);
}
