/* Training states: a model file plus the optimizer's state and every
 * random stream, so a run resumes bit for bit. */
#include "tfm/training.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/rng.h"
#include "io/load.h"
#include "model/model.h"
#include "model/model_file.h"
#include "optim/optimizer.h"

#define OPTIMIZER_PREFIX TFM__RESERVED_TENSOR_PREFIX "optimizer."
#define ADAPTER_PREFIX TFM__RESERVED_TENSOR_PREFIX "adapter."
#define RNG_COUNT_KEY TFM__MODEL_KEY_PREFIX "rng_count"
#define MODEL_RNG_KEY TFM__MODEL_KEY_PREFIX "rng.model"
/* The caller's streams are tfm.rng.0, tfm.rng.1, …; more than this many
 * would not fit libtfm's metadata. */
#define MAX_RNGS 32

static tfm_status check_rngs(const char *op, int32_t rng_count, const void *rngs)
{
    if (rng_count < 0 || rng_count > MAX_RNGS)
        return tfm__fail(TFM_ERR_ARG, "%s: rng_count %d is outside [0, %d]", op,
                         (int)rng_count, MAX_RNGS);
    if (rng_count > 0 && !rngs)
        return tfm__fail(TFM_ERR_NULL, "%s: rngs is NULL", op);
    return TFM_OK;
}

/* An optimizer over the model's parameters (not quantized), or over the
 * adapter in use (adapters.h), whose parameters the state then holds as
 * ADAPTER_PREFIX + their names. */
static tfm_status check_pair(const char *op, const tfm_model *model,
                             const tfm_optimizer *optimizer, int32_t rng_count,
                             const void *rngs)
{
    if (!model || !optimizer)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, model ? "optimizer" : "model");
    const tfm_params *adapter = tfm__model_adapter_params_in_use(model);
    if (adapter && tfm__optimizer_params(optimizer) == adapter)
        return check_rngs(op, rng_count, rngs); /* the adapter's training, over a frozen base */
    if (tfm__optimizer_params(optimizer) != model->params)
        return tfm__fail(TFM_ERR_ARG, "%s: the optimizer is not over the model's parameters "
                         "(create it with tfm_model_params(model)) nor over the adapter in use "
                         "(tfm_model_adapter_params)", op);
    tfm_status s = check_rngs(op, rng_count, rngs);
    return s != TFM_OK ? s : tfm__model_refuse_quantized(op, model);
}

tfm_status tfm_training_save(const char *path, const tfm_model *model,
                             const tfm_optimizer *optimizer, int32_t rng_count,
                             const tfm_rng *const *rngs, int64_t metadata_count,
                             const char *const *keys, const char *const *values)
{
    const char *op = "tfm_training_save";
    tfm_status s = check_pair(op, model, optimizer, rng_count, rngs);
    if (s != TFM_OK)
        return s;
    tfm__metadata md = {0};
    char text[TFM__RNG_TEXT];
    tfm__metadata_add(&md, TFM__STATE_KEY, "training");
    tfm__rng_format(model->rng, text, sizeof text);
    tfm__metadata_add(&md, MODEL_RNG_KEY, "%s", text);
    tfm__metadata_add(&md, RNG_COUNT_KEY, "%d", (int)rng_count);
    for (int32_t i = 0; i < rng_count; i++) {
        if (!rngs[i])
            return tfm__fail(TFM_ERR_NULL, "%s: rngs[%d] is NULL", op, (int)i);
        char key[32];
        snprintf(key, sizeof key, TFM__MODEL_KEY_PREFIX "rng.%d", (int)i);
        tfm__rng_format(rngs[i], text, sizeof text);
        tfm__metadata_add(&md, key, "%s", text);
    }
    tfm__optimizer_record record;
    tfm__optimizer_describe(optimizer, OPTIMIZER_PREFIX, &record);
    tfm_params *adapter = tfm__optimizer_params(optimizer) == model->params
                              ? NULL
                              : tfm__optimizer_params(optimizer);
    if (!adapter)
        return tfm__model_write(op, model, path, record.count, record.names, record.tensors,
                                &md, metadata_count, keys, values);
    /* the optimizer's tensors, then the adapter's under their prefixed names */
    int64_t n = tfm_params_count(adapter), total = record.count + n;
    const char **names = malloc((size_t)total * sizeof *names);
    const tfm_tensor **tensors = malloc((size_t)total * sizeof *tensors);
    char *prefixed = malloc((size_t)n * 320);
    if (!names || !tensors || !prefixed) {
        s = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    } else {
        for (int64_t i = 0; i < record.count; i++) {
            names[i] = record.names[i];
            tensors[i] = record.tensors[i];
        }
        for (int64_t i = 0; i < n; i++) {
            snprintf(prefixed + i * 320, 320, ADAPTER_PREFIX "%s", tfm_params_name(adapter, i));
            names[record.count + i] = prefixed + i * 320;
            tensors[record.count + i] = tfm_params_at(adapter, i);
        }
        s = tfm__model_write(op, model, path, total, names, tensors, &md, metadata_count, keys,
                             values);
    }
    free(names);
    free(tensors);
    free(prefixed);
    return s;
}

/* A stream's state from key, into *rng. */
static tfm_status read_rng(const char *ctx, const tfm_safetensors *file, const char *key,
                           tfm_rng *rng)
{
    const char *text = tfm__safetensors_metadata(file, key);
    if (!text)
        return tfm__fail(TFM_ERR_FORMAT, "%s: the metadata lacks %s", ctx, key);
    if (tfm__rng_parse(text, rng) < 0)
        return tfm__fail(TFM_ERR_FORMAT, "%s: metadata %s = \"%.100s\" is not a random "
                         "stream's state", ctx, key, text);
    return TFM_OK;
}

/* Everything but the parameters and the optimizer, read and checked. */
static tfm_status read_streams(const char *ctx, const tfm_safetensors *file,
                               const tfm_model *model, int32_t rng_count, tfm_rng *streams)
{
    const char *kind = tfm__safetensors_metadata(file, TFM__STATE_KEY);
    if (!kind || strcmp(kind, "training") != 0)
        return tfm__fail(TFM_ERR_FORMAT, "%s holds no training state (metadata " TFM__STATE_KEY
                         " is not \"training\"): a model file loads with tfm_model_load",
                         ctx);
    tfm_model_options described;
    tfm_status s = tfm__model_options_read(ctx, file, &described);
    if (s != TFM_OK)
        return s;
    char difference[160];
    if (tfm__model_options_difference(&model->options, &described, difference,
                                      sizeof difference))
        return tfm__fail(TFM_ERR_ARG, "%s: the file's model differs from this one: %s", ctx,
                         difference);
    const char *count = tfm__safetensors_metadata(file, RNG_COUNT_KEY);
    char expected[16];
    snprintf(expected, sizeof expected, "%d", (int)rng_count);
    if (!count || strcmp(count, expected) != 0)
        return tfm__fail(TFM_ERR_ARG, "%s holds %s%s%s random streams of the caller's; "
                         "rng_count is %d", ctx, count ? "\"" : "no count of", count ? count : "",
                         count ? "\"" : "", (int)rng_count);
    if ((s = read_rng(ctx, file, MODEL_RNG_KEY, &streams[rng_count])) != TFM_OK)
        return s;
    for (int32_t i = 0; i < rng_count; i++) {
        char key[32];
        snprintf(key, sizeof key, TFM__MODEL_KEY_PREFIX "rng.%d", (int)i);
        if ((s = read_rng(ctx, file, key, &streams[i])) != TFM_OK)
            return s;
    }
    return TFM_OK;
}

tfm_status tfm_training_load(const char *path, tfm_model *model, tfm_optimizer *optimizer,
                             int32_t rng_count, tfm_rng *const *rngs)
{
    const char *op = "tfm_training_load";
    tfm_status s = check_pair(op, model, optimizer, rng_count, rngs);
    for (int32_t i = 0; s == TFM_OK && i < rng_count; i++)
        if (!rngs[i])
            s = tfm__fail(TFM_ERR_NULL, "%s: rngs[%d] is NULL", op, (int)i);
    if (s != TFM_OK)
        return s;
    tfm_safetensors *file = tfm__safetensors_open(op, path);
    if (!file)
        return tfm_last_status();
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: \"%s\"", op, path);
    tfm_rng streams[MAX_RNGS + 1]; /* the caller's, then the model's */
    for (int32_t i = 0; i < rng_count; i++)
        streams[i] = *rngs[i]; /* each keeps its slice: the file holds the states */
    streams[rng_count] = *model->rng;
    tfm__optimizer_loaded loaded;
    tfm__load_match match;
    s = read_streams(ctx, file, model, rng_count, streams);
    if (s == TFM_OK)
        s = tfm__optimizer_read(ctx, optimizer, file, OPTIMIZER_PREFIX, &loaded);
    /* an adapter's state: its parameters alone (the base is frozen, and a
     * quantized one's int8 weights would not follow new values) */
    tfm_params *params = tfm__optimizer_params(optimizer) == model->params
                             ? model->params
                             : tfm__optimizer_params(optimizer);
    tfm_load_options adapter;
    tfm_load_options_init(&adapter);
    adapter.strip_prefix = ADAPTER_PREFIX;
    adapter.allow_unexpected = 1;
    if (s == TFM_OK) {
        s = params == model->params
                ? tfm__load_match_params(op, path, params, file, NULL,
                                         TFM__RESERVED_TENSOR_PREFIX, &match)
                : tfm__load_match_params(op, path, params, file, &adapter, NULL, &match);
        if (s != TFM_OK)
            tfm__optimizer_loaded_free(&loaded);
    }
    if (s == TFM_OK) {
        tfm__load_apply(params, file, &match, NULL);
        tfm__optimizer_restore(optimizer, &loaded);
        for (int32_t i = 0; i < rng_count; i++)
            *rngs[i] = streams[i];
        *model->rng = streams[rng_count];
    }
    tfm_safetensors_close(file);
    return s;
}
