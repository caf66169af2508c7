/* A published model's decoding defaults, as generation_config.json gives
 * them (read by model/pretrained.c), in tfm_decode_options' terms:
 * tfm_decode_options_from_model (options_from_model.c) copies them, and
 * the translator starts from them. */
#ifndef TFM_TRANSLATE_GENERATION_H
#define TFM_TRANSLATE_GENERATION_H

#include "tfm/decode.h"

typedef struct tfm__generation {
    tfm_decode_strategy strategy;
    int32_t max_length, min_length;   /* -1: not given */
    int32_t beam_size, top_k, no_repeat_ngram_size, forced_bos_id;
    float length_penalty, repetition_penalty, temperature, top_p;
    int32_t *bad_words, *bad_word_lengths; /* owned */
    int32_t n_bad_words;
    int32_t *eos_ids;                 /* owned: the end tokens past eos_id */
    int32_t n_eos_ids;
    int32_t forced_eos_id, early_stopping; /* -1: none; a TFM_EARLY_STOPPING_ value */
    int32_t renormalize_logits;       /* 0 or 1 */
} tfm__generation;

/* Frees a generation record and what it owns; NULL is a no-op. */
void tfm__generation_free(tfm__generation *g);

#endif
