/* A decoding's special tokens taken from the model that carries them, and
 * a published model's decoding defaults. */
#include <stddef.h>

#include "core/error.h"
#include "model/model.h"
#include "translate/generation.h"

/* Whether the caller's struct, of options->struct_size bytes, has field. */
#define HAS(options, field)                                                    \
    ((options)->struct_size >= offsetof(tfm_decode_options, field) + sizeof (options)->field)

/* generation_config.json's values, into the fields the caller's struct has. */
static void published_defaults(const tfm__generation *g, tfm_decode_options *o)
{
    o->strategy = g->strategy;
    o->max_length = g->max_length;
    o->temperature = g->temperature;
    o->top_k = g->top_k;
    o->top_p = g->top_p;
    o->beam_size = g->beam_size;
    o->length_penalty = g->length_penalty;
    if (HAS(o, no_repeat_ngram_size)) {
        o->min_length = g->min_length;
        o->repetition_penalty = g->repetition_penalty;
        o->no_repeat_ngram_size = g->no_repeat_ngram_size;
    }
    if (HAS(o, n_eos_ids)) {
        o->eos_ids = g->eos_ids;
        o->n_eos_ids = g->n_eos_ids;
    }
    if (HAS(o, forced_bos_id))
        o->forced_bos_id = g->forced_bos_id;
    if (HAS(o, n_bad_words)) {
        o->bad_words = g->bad_words;
        o->bad_word_lengths = g->bad_word_lengths;
        o->n_bad_words = g->n_bad_words;
    }
    if (HAS(o, early_stopping)) {
        o->forced_eos_id = g->forced_eos_id;
        o->beam_rules = TFM_BEAM_RULES_TRANSFORMERS;
        o->early_stopping = g->early_stopping;
    }
    if (HAS(o, renormalize_logits))
        o->renormalize_logits = g->renormalize_logits;
}

tfm_status tfm_decode_options_from_model(const tfm_model *model, tfm_decode_options *options)
{
    const char *op = "tfm_decode_options_from_model";
    if (!model || !options)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, model ? "options" : "model");
    size_t needed = offsetof(tfm_decode_options, src_pad_id) + sizeof options->src_pad_id;
    if (model->generation)
        needed = offsetof(tfm_decode_options, length_penalty) + sizeof options->length_penalty;
    if (options->struct_size < needed)
        return tfm__fail(TFM_ERR_ARG, "%s: options.struct_size %u is too small; call "
                         "tfm_decode_options_init first", op, (unsigned)options->struct_size);
    int32_t bos = tfm_model_bos_id(model), eos = tfm_model_eos_id(model),
            pad = tfm_model_pad_id(model);
    if (bos >= 0)
        options->bos_id = bos;
    if (eos >= 0)
        options->eos_id = eos;
    if (pad >= 0)
        options->src_pad_id = pad;
    if (model->generation)
        published_defaults(model->generation, options);
    /* never past the model's target positions (the start token takes one) */
    if (options->max_length > model->options.max_tgt_len - 1)
        options->max_length = (int32_t)(model->options.max_tgt_len - 1);
    if (model->text.target_language >= 0 && HAS(options, forced_bos_id))
        options->forced_bos_id = model->text.target_language;
    return TFM_OK;
}
