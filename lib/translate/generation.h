/* A published model's decoding defaults, as generation_config.json gives
 * them (read by model/pretrained.c), in tfm_decode_options' terms:
 * tfm_decode_options_from_model (options_from_model.c) copies them, and
 * the translator starts from them. */
#ifndef TFM_TRANSLATE_GENERATION_H
#define TFM_TRANSLATE_GENERATION_H

#include "io/json_doc.h"
#include "tfm/decode.h"
#include "tfm/model.h"

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

/* The decoding defaults d holds into g (from_generation_config: d is
 * generation_config.json, else config.json, whose forced_eos_token_id
 * defaults to the family's class_forced_eos), and the special tokens they
 * set in o: bos_id (decoder_start_token_id) and eos_id (eos_token_id's
 * first); transformers' lengths count the decoder start token, libtfm's
 * do not, and never pass o's target positions. TFM_ERR_FORMAT naming the
 * key, TFM_ERR_NOMEM. */
tfm_status tfm__generation_read(const tfm__json_doc *d, int from_generation_config,
                                int64_t class_forced_eos, tfm_model_options *o,
                                tfm__generation *g);

/* Frees a generation record and what it owns; NULL is a no-op. */
void tfm__generation_free(tfm__generation *g);

#endif
