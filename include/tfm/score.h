/** @file
 * libtfm translation scores: chrF and BLEU of hypotheses against one
 * reference each, as sacrebleu 2 computes them with its defaults, so a
 * figure from libtfm can stand beside one from sacrebleu.
 *
 * Strings are UTF-8, one segment each (a sentence); a string that is not
 * well-formed UTF-8 is refused. Scores are corpus-level, from statistics
 * summed over the segments; a segment's own score is the corpus of that one
 * segment, as sacrebleu's sentence_score with its defaults. Both are on
 * sacrebleu's 0 to 100 scale.
 *
 * Ownership: the arrays and strings are the caller's and are only read.
 * Errors: a status and message (common.h): TFM_ERR_NULL for a NULL array,
 * string or result, TFM_ERR_ARG for a negative count or a string that is
 * not UTF-8 (the message names its index), TFM_ERR_NOMEM; the result is
 * written only on success. Threads: the calls keep no state and may run on
 * several threads at once. */
#ifndef TFM_SCORE_H
#define TFM_SCORE_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** chrF (Popović 2015) as sacrebleu's CHRF(): character n-grams of 1 to 6
 * Unicode code points, no word n-grams, beta 2, whitespace (Python's
 * str.isspace) removed before the n-grams are taken, case kept. For each
 * order, the hypotheses' n-grams, the references' and their clipped
 * matches are summed over the count segments; precision and recall are
 * averaged over the orders for which both sides have n-grams (the
 * effective order), and the score is 100 * F_beta of the averages (0 when
 * no order has n-grams on both sides). */
TFM_API tfm_status tfm_score_chrf(const char *const *hypotheses,
                                  const char *const *references,
                                  int64_t count, double *score);

/** BLEU (Papineni et al. 2002) as sacrebleu's BLEU(): each segment's
 * trailing whitespace removed and the segment tokenised as mteval-v13a
 * (sacrebleu's default "13a" tokenizer), word n-grams of 1 to 4 with
 * clipped matches summed over the count segments, the brevity penalty
 * from the summed lengths, and the "exp" smoothing (an order with no match
 * counts as 1 / (2^k * total) for its k-th such order; 0 when no n-gram of
 * any order matches). */
TFM_API tfm_status tfm_score_bleu(const char *const *hypotheses,
                                  const char *const *references,
                                  int64_t count, double *score);

#ifdef __cplusplus
}
#endif

#endif
