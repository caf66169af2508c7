/* Fine-tuning a part of a model: the other parts' parameters stop
 * requiring grad, which the tape and the optimizers already honour. */
#include <string.h>

#include "core/error.h"
#include "model/model.h"

#define ALL_PARTS                                                                          \
    (TFM_MODEL_PART_EMBEDDINGS | TFM_MODEL_PART_ENCODER | TFM_MODEL_PART_DECODER |         \
     TFM_MODEL_PART_OUTPUT)

static const struct {
    const char *word;
    tfm_model_parts part;
} part_words[] = {
    {"embeddings", TFM_MODEL_PART_EMBEDDINGS},
    {"encoder", TFM_MODEL_PART_ENCODER},
    {"decoder", TFM_MODEL_PART_DECODER},
    {"output", TFM_MODEL_PART_OUTPUT},
};

static int starts_with(const char *name, const char *prefix)
{
    return strncmp(name, prefix, strlen(prefix)) == 0;
}

/* The part a parameter belongs to, by the names tfm__model_create gives. */
static tfm_model_parts part_of(const char *name)
{
    if (starts_with(name, "encoder."))
        return TFM_MODEL_PART_ENCODER;
    if (starts_with(name, "decoder."))
        return TFM_MODEL_PART_DECODER;
    if (starts_with(name, "generator."))
        return TFM_MODEL_PART_OUTPUT;
    return TFM_MODEL_PART_EMBEDDINGS; /* src_ and tgt_ embeddings, positions, scales, norms */
}

tfm_status tfm_model_freeze(tfm_model *m, tfm_model_parts parts)
{
    const char *op = "tfm_model_freeze";
    if (!m)
        return tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
    if (parts & ~(tfm_model_parts)ALL_PARTS)
        return tfm__fail(TFM_ERR_ARG, "%s: parts %#x are not TFM_MODEL_PART_ flags", op,
                         (unsigned)parts);
    if (tfm__model_refuse_quantized(op, m) != TFM_OK)
        return tfm_last_status();
    if (m->in_use) /* the adapter trains over a base frozen whole */
        return tfm__fail(TFM_ERR_STATE, "%s: an adapter is in use, over a base frozen whole; "
                         "stop using it first (tfm_model_use_adapter(model, NULL))", op);
    int64_t count = tfm_params_count(m->params);
    for (int64_t i = 0; i < count; i++) {
        int frozen = (part_of(tfm_params_name(m->params, i)) & parts) != 0;
        /* cannot fail: a parameter is float32 with its gradient in the store */
        tfm_tensor_set_requires_grad(tfm_params_at(m->params, i), !frozen);
    }
    return TFM_OK;
}

tfm_model_parts tfm_model_frozen(const tfm_model *m)
{
    if (!m) {
        tfm__fail(TFM_ERR_NULL, "tfm_model_frozen: model is NULL");
        return 0;
    }
    tfm_model_parts seen = 0, training = 0;
    int64_t count = tfm_params_count(m->params);
    for (int64_t i = 0; i < count; i++) {
        tfm_model_parts part = part_of(tfm_params_name(m->params, i));
        seen |= part;
        if (tfm_tensor_requires_grad(tfm_params_at(m->params, i)))
            training |= part;
    }
    return seen & ~training;
}

tfm_status tfm_model_parts_parse(const char *text, tfm_model_parts *parts)
{
    const char *op = "tfm_model_parts_parse";
    if (!text || !parts)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, text ? "parts" : "text");
    tfm_model_parts found = 0;
    for (const char *word = text; *word;) {
        size_t length = strcspn(word, ",");
        size_t k = 0, n = sizeof part_words / sizeof part_words[0];
        while (k < n && !(strlen(part_words[k].word) == length &&
                          strncmp(word, part_words[k].word, length) == 0))
            k++;
        if (k == n)
            return tfm__fail(TFM_ERR_ARG, "%s: '%.*s' is not a part of a model (embeddings, "
                             "encoder, decoder, output)", op, (int)(length > 64 ? 64 : length),
                             word);
        found |= part_words[k].part;
        word += length + (word[length] == ',');
    }
    *parts = found;
    return TFM_OK;
}
