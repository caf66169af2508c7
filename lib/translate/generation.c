/* A published model's decoding defaults: generation_config.json's keys (or
 * config.json's, where older folders keep them) in tfm_decode_options'
 * terms, refusing by name what libtfm's decoding does not implement; and
 * what the model owns of them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "translate/generation.h"

/* bad_words_ids: an array of non-empty arrays of ids. */
static int bad_words(const tfm__json_doc *d, int64_t vocab, tfm__generation *g)
{
    const tfm__json_node *list = tfm__doc_member(d, "bad_words_ids");
    if (!list || list->type == TFM__JSON_NULL)
        return 0;
    const tfm__json *doc = d->json;
    int64_t total = 0;
    int ok = list->type == TFM__JSON_ARRAY && list->count <= INT32_MAX;
    for (uint32_t i = (uint32_t)(list - doc->nodes) + 1; ok && i < list->next;
         i = doc->nodes[i].next) {
        ok = doc->nodes[i].type == TFM__JSON_ARRAY && doc->nodes[i].count > 0;
        total += ok ? doc->nodes[i].count : 0;
    }
    if (!ok || total > INT32_MAX) {
        tfm__fail(TFM_ERR_FORMAT, "%s: %s's bad_words_ids is not a list of lists of token ids",
                  d->ctx, d->name);
        return -1;
    }
    g->bad_words = malloc((size_t)total * sizeof *g->bad_words + 1);
    g->bad_word_lengths = malloc((size_t)list->count * sizeof *g->bad_word_lengths + 1);
    if (!g->bad_words || !g->bad_word_lengths) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for bad_words_ids", d->ctx);
        return -1;
    }
    int64_t at = 0;
    for (uint32_t i = (uint32_t)(list - doc->nodes) + 1; i < list->next;
         i = doc->nodes[i].next) {
        if (tfm__doc_ids(d, "bad_words_ids", &doc->nodes[i], vocab - 1, g->bad_words + at) < 0)
            return -1;
        g->bad_word_lengths[g->n_bad_words++] = (int32_t)doc->nodes[i].count;
        at += doc->nodes[i].count;
    }
    return 0;
}

/* eos_token_id may list several end tokens: the first is the model's
 * eos_id, the others end sequences too. */
static int end_tokens(const tfm__json_doc *d, tfm_model_options *o, tfm__generation *g)
{
    const tfm__json_node *eos = tfm__doc_member(d, "eos_token_id");
    if (!eos || eos->type != TFM__JSON_ARRAY) {
        int64_t id;
        if (tfm__doc_int(d, "eos_token_id", o->eos_id, 0, o->tgt_vocab - 1, &id) < 0)
            return -1;
        o->eos_id = (int32_t)id;
        return 0;
    }
    int32_t *ids = malloc((size_t)eos->count * sizeof *ids + 1);
    if (!ids) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for eos_token_id", d->ctx);
        return -1;
    }
    if (eos->count == 0 || tfm__doc_ids(d, "eos_token_id", eos, o->tgt_vocab - 1, ids) < 0) {
        if (eos->count == 0)
            tfm__fail(TFM_ERR_FORMAT, "%s: %s's eos_token_id is an empty list", d->ctx,
                      d->name);
        free(ids);
        return -1;
    }
    o->eos_id = ids[0];
    g->n_eos_ids = (int32_t)eos->count - 1;
    memmove(ids, ids + 1, (size_t)g->n_eos_ids * sizeof *ids);
    g->eos_ids = ids;
    return 0;
}

/* early_stopping: true, false or "never" (TFM_EARLY_STOPPING_). */
static int early_stopping(const tfm__json_doc *d, int32_t *out)
{
    const char *never = tfm__doc_string(d, "early_stopping");
    if (never && strcmp(never, "never") == 0) {
        *out = TFM_EARLY_STOPPING_NEVER;
        return 0;
    }
    if (never) {
        tfm__fail(TFM_ERR_FORMAT, "%s: %s's early_stopping must be true, false or \"never\"",
                  d->ctx, d->name);
        return -1;
    }
    return tfm__doc_bool(d, "early_stopping", TFM_EARLY_STOPPING_HEURISTIC, out);
}

/* GenerationConfig's options (generation/configuration_utils.py) that
 * change what generate() produces and that libtfm's decoding does not
 * have, each with the number that changes nothing (NAN: none does; absent,
 * null, false and an empty list or object change nothing either); the
 * sampling ones matter only when do_sample is true, as in generate().
 * Options that only shape Python's return value (num_return_sequences:
 * its first sequence is the one libtfm returns, output_scores, ...) or
 * its speed (use_cache, low_memory, ...) are not here. suppress_tokens
 * has a counterpart in tfm_decode_options' suppress_ids, which the
 * published defaults do not carry (yet): refused too. */
static const struct {
    const char *key;
    double neutral;
    int sampling;
} unsupported_generation[] = {
    {"num_beam_groups", 1, 0},         {"diversity_penalty", 0, 0},
    {"penalty_alpha", 0, 0},           {"encoder_no_repeat_ngram_size", 0, 0},
    {"encoder_repetition_penalty", 1, 0}, {"guidance_scale", 1, 0},
    {"exponential_decay_length_penalty", NAN, 0}, {"sequence_bias", NAN, 0},
    {"force_words_ids", NAN, 0},       {"constraints", NAN, 0},
    {"suppress_tokens", NAN, 0},       {"begin_suppress_tokens", NAN, 0},
    {"forced_decoder_ids", NAN, 0},    {"max_time", NAN, 0},
    {"stop_strings", NAN, 0},          {"token_healing", NAN, 0},
    {"watermarking_config", NAN, 0},   {"dola_layers", NAN, 0},
    {"typical_p", 1, 1},               {"epsilon_cutoff", 0, 1},
    {"eta_cutoff", 0, 1},              {"min_p", 0, 1},
};

/* Refuses, by name, an option above set to something that would change
 * the decoding, and beam sampling (do_sample with num_beams > 1), which
 * libtfm's sampling would silently replace. */
static int refuse_unsupported_generation(const tfm__json_doc *d, int32_t sample, int64_t beams)
{
    if (sample && beams > 1) {
        tfm__fail(TFM_ERR_FORMAT, "%s: %s's do_sample with num_beams %lld (beam sampling) is "
                  "not supported: libtfm samples or searches beams", d->ctx, d->name,
                  (long long)beams);
        return -1;
    }
    size_t n = sizeof unsupported_generation / sizeof unsupported_generation[0];
    for (size_t i = 0; i < n; i++) {
        const tfm__json_node *v = tfm__doc_member(d, unsupported_generation[i].key);
        if (!v || (unsupported_generation[i].sampling && !sample))
            continue;
        double number = v->type != TFM__JSON_NUMBER ? NAN
                        : v->is_integer              ? (double)v->integer
                                                     : strtod(d->json->text + v->offset, NULL);
        int neutral = v->type == TFM__JSON_NULL || v->type == TFM__JSON_FALSE ||
                      ((v->type == TFM__JSON_ARRAY || v->type == TFM__JSON_OBJECT) &&
                       v->count == 0) ||
                      number == unsupported_generation[i].neutral;
        if (!neutral) {
            tfm__fail(TFM_ERR_FORMAT, "%s: %s's %s is not supported: it changes decoding in a "
                      "way libtfm does not implement (leave it out, or at its default)",
                      d->ctx, d->name, unsupported_generation[i].key);
            return -1;
        }
    }
    return 0;
}

tfm_status tfm__generation_read(const tfm__json_doc *d, int from_generation_config,
                                int64_t class_forced_eos, tfm_model_options *o,
                                tfm__generation *g)
{
    int64_t max_length, max_new, min_length, min_new, beams, top_k, ngram, forced, forced_eos,
        start;
    int32_t sample;
    int64_t vocab = o->tgt_vocab, longest = o->max_tgt_len;
    /* transformers' GenerationConfig default: 20 tokens, the start token one of them */
    if (tfm__doc_int(d, "max_length", 20, 1, INT32_MAX, &max_length) < 0 ||
        tfm__doc_int(d, "max_new_tokens", -1, 1, INT32_MAX, &max_new) < 0 ||
        tfm__doc_int(d, "min_length", -1, 0, INT32_MAX, &min_length) < 0 ||
        tfm__doc_int(d, "min_new_tokens", -1, 0, INT32_MAX, &min_new) < 0 ||
        tfm__doc_int(d, "num_beams", 1, 1, 4096, &beams) < 0 ||
        tfm__doc_bool(d, "do_sample", 0, &sample) < 0 ||
        tfm__doc_int(d, "top_k", 50, 0, INT32_MAX, &top_k) < 0 ||
        tfm__doc_float(d, "top_p", 1.0f, 1e-6, 1.0, &g->top_p) < 0 ||
        tfm__doc_float(d, "temperature", 1.0f, 1e-6, 1e6, &g->temperature) < 0 ||
        tfm__doc_float(d, "length_penalty", 1.0f, -1e3, 1e3, &g->length_penalty) < 0 ||
        tfm__doc_float(d, "repetition_penalty", 1.0f, 1e-6, 1e6, &g->repetition_penalty) < 0 ||
        tfm__doc_int(d, "no_repeat_ngram_size", 0, 0, INT32_MAX, &ngram) < 0 ||
        tfm__doc_int(d, "forced_bos_token_id", -1, 0, vocab - 1, &forced) < 0 ||
        /* without generation_config.json, config.json's with its class's default */
        tfm__doc_int(d, "forced_eos_token_id", from_generation_config ? -1 : class_forced_eos, 0,
                   vocab - 1, &forced_eos) < 0 ||
        early_stopping(d, &g->early_stopping) < 0 ||
        tfm__doc_bool(d, "renormalize_logits", 0, &g->renormalize_logits) < 0 ||
        tfm__doc_int(d, "decoder_start_token_id", o->bos_id, 0, vocab - 1, &start) < 0 ||
        end_tokens(d, o, g) < 0 || bad_words(d, vocab, g) < 0 ||
        refuse_unsupported_generation(d, sample, beams) < 0)
        return tfm_last_status();
    o->bos_id = (int32_t)start;
    g->strategy = sample ? TFM_DECODE_SAMPLE : beams > 1 ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY;
    g->beam_size = (int32_t)beams;
    g->top_k = (int32_t)top_k;
    /* never past the positions the model has (the start token takes one) */
    int64_t length = max_new > 0 ? max_new : max_length > 1 ? max_length - 1 : 1;
    g->max_length = (int32_t)(length < longest - 1 ? length : longest - 1);
    int64_t least = min_new >= 0 ? min_new : min_length > 0 ? min_length - 1 : 0;
    /* a minimum past the maximum: transformers warns ("unfeasible length
     * constraints") and generates to the maximum with the end tokens
     * banned all the way, which a minimum at the maximum does */
    g->min_length = (int32_t)(least < g->max_length ? least : g->max_length);
    g->no_repeat_ngram_size = (int32_t)ngram;
    g->forced_bos_id = (int32_t)forced;
    g->forced_eos_id = (int32_t)forced_eos;
    return TFM_OK;
}

void tfm__generation_free(tfm__generation *g)
{
    if (!g)
        return;
    free(g->bad_words);
    free(g->bad_word_lengths);
    free(g->eos_ids);
    free(g);
}
