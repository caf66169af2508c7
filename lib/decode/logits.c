/* What a step's logits go through before a strategy chooses a token: the
 * logits processors, one function each, in the order of Hugging Face's
 * generate (its _get_logits_processor): repetition penalty, no repeated
 * n-grams, bad words, the minimum length, the forced first token, the forced
 * last token, suppressed tokens, the caller's constraints (constraints.c),
 * the forced prefix (ForceTokensLogitsProcessor,
 * after those as there), then in beam search the renormalisation
 * (LogitNormalization, last as there). Greedy and sampling
 * process the logits, beam search the log probabilities, as generate does;
 * a banned token's value becomes -inf. A row's "tokens so far" are its
 * decoder inputs, bos_id first, as generate's input_ids. */
#include <math.h>

#include "decode/decode.h"
#include "ops/softmax.h"

/* RepetitionPenaltyLogitsProcessor: each distinct token so far once, a
 * positive score divided by the penalty, a negative one multiplied. A
 * token is penalised at its first occurrence only (quadratic in the
 * length, which stays far below the vocabulary's cost per step). */
static void repetition_penalty(float *scores, const int32_t *so_far, int64_t len, float penalty)
{
    for (int64_t i = 0; i < len; i++) {
        int32_t token = so_far[i];
        int64_t seen = 0;
        while (seen < i && so_far[seen] != token)
            seen++;
        if (seen < i)
            continue;
        float s = scores[token];
        scores[token] = s < 0.0f ? s * penalty : s / penalty;
    }
}

/* NoRepeatNGramLogitsProcessor: the tokens that would complete an n-gram
 * already among the tokens so far, given its first n - 1 tokens are the
 * last n - 1 so far. */
static void no_repeat_ngram(float *scores, const int32_t *so_far, int64_t len, int64_t n)
{
    if (len + 1 < n)
        return;
    const int32_t *tail = so_far + len - (n - 1);
    for (int64_t start = 0; start + n <= len; start++)
        if (memcmp(so_far + start, tail, (size_t)(n - 1) * sizeof *tail) == 0)
            scores[so_far[start + n - 1]] = -INFINITY;
}

/* NoBadWordsLogitsProcessor: a bad word's last token where the tokens so
 * far end with its others. */
static void bad_words(const tfm_decoding *d, float *scores, const int32_t *so_far, int64_t len)
{
    const int32_t *word = d->o.bad_words;
    for (int32_t i = 0; i < d->o.n_bad_words; word += d->o.bad_word_lengths[i++]) {
        int64_t n = d->o.bad_word_lengths[i] - 1; /* the tokens before the banned one */
        if (n <= len && memcmp(so_far + len - n, word, (size_t)n * sizeof *word) == 0)
            scores[word[n]] = -INFINITY;
    }
}

/* MinNewTokensLengthLogitsProcessor: no end token before min_length
 * tokens have been generated. */
static void min_length(const tfm_decoding *d, float *scores, int64_t generated)
{
    if (generated >= d->o.min_length)
        return;
    for (int64_t i = 0; i < d->n_ends; i++)
        scores[d->ends[i]] = -INFINITY;
}

/* ForcedBOSTokenLogitsProcessor, ForcedEOSTokenLogitsProcessor and
 * ForceTokensLogitsProcessor: only
 * `token` can be chosen, its value 0. */
static void force(float *scores, int64_t V, int32_t token)
{
    for (int64_t v = 0; v < V; v++)
        scores[v] = -INFINITY;
    scores[token] = 0.0f;
}

/* SuppressTokensLogitsProcessor. */
static void suppress_tokens(const tfm_decoding *d, float *scores)
{
    for (int32_t i = 0; i < d->o.n_suppress_ids; i++)
        scores[d->o.suppress_ids[i]] = -INFINITY;
}

void tfm__decode_process(const tfm_decoding *d, float *scores, const int32_t *so_far,
                         int64_t len, int64_t source)
{
    int64_t generated = len - 1;
    if (d->o.repetition_penalty != 1.0f)
        repetition_penalty(scores, so_far, len, d->o.repetition_penalty);
    if (d->o.no_repeat_ngram_size > 0)
        no_repeat_ngram(scores, so_far, len, d->o.no_repeat_ngram_size);
    bad_words(d, scores, so_far, len);
    min_length(d, scores, generated);
    if (d->o.forced_bos_id >= 0 && generated == 0)
        force(scores, d->vocab, d->o.forced_bos_id);
    if (d->o.forced_eos_id >= 0 && generated == d->limit[source] - 1)
        force(scores, d->vocab, d->o.forced_eos_id);
    suppress_tokens(d, scores);
    const tfm__constraints *c = d->constraints ? d->constraints[source] : NULL;
    if (c) /* a forced end token takes the last place */
        tfm__constraints_mask(c, scores, d->vocab, so_far + 1, generated,
                              d->limit[source] - generated - (d->o.forced_eos_id >= 0),
                              d->ends, d->n_ends);
    int32_t prefix = d->forced[source * d->max_len + generated];
    if (prefix >= 0)
        force(scores, d->vocab, prefix);
    /* LogitNormalization (renormalize_logits): log_softmax of the
     * processed log probabilities, so that the banned tokens' mass goes to
     * the others; a row banned whole stays -inf, as the search drops it.
     * Beam search's only: greedy's argmax and sampling's softmax would not
     * see the shift (decode.h). */
    if (d->o.renormalize_logits && d->o.strategy == TFM_DECODE_BEAM)
        tfm__log_normalise(scores, d->vocab);
}

int tfm__decode_processing(const tfm_decoding *d)
{
    return d->o.repetition_penalty != 1.0f || d->o.no_repeat_ngram_size > 0 ||
           d->o.min_length > 0 || d->o.n_suppress_ids > 0 || d->o.forced_bos_id >= 0 ||
           d->o.n_bad_words > 0 || d->o.forced_eos_id >= 0;
}
