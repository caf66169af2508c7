/* tfm_score_chrf and tfm_score_bleu on segments the input gives: NUL
 * bytes cut it into strings, taken in turn as hypothesis and reference (an
 * odd last one dropped; invalid UTF-8 included, which must be refused with
 * TFM_ERR_ARG). A corpus that scores must score each segment alone too,
 * and every score lies in [0, 100]; a segment's chrF against itself is 100
 * when it has a character n-gram at all, else 0. */
#include <math.h>
#include <string.h>

#include "fuzz.h"

enum { MAX_SEGMENTS = 128 };

static void score_both(const char *const *hypotheses, const char *const *references,
                       int64_t count, tfm_status *status)
{
    tfm_status (*const scorers[2])(const char *const *, const char *const *, int64_t,
                                   double *) = {tfm_score_chrf, tfm_score_bleu};
    for (int k = 0; k < 2; k++) {
        double score = -1.0;
        status[k] = scorers[k](hypotheses, references, count, &score);
        FUZZ_ASSERT(status[k] == TFM_OK || status[k] == TFM_ERR_ARG);
        if (status[k] == TFM_OK)
            FUZZ_ASSERT(score >= 0.0 && score <= 100.0 + 1e-9);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char text[65536];
    if (size >= sizeof text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    const char *strings[2 * MAX_SEGMENTS];
    int64_t n = 0;
    for (size_t at = 0; at <= size && n < 2 * MAX_SEGMENTS; at += strlen(text + at) + 1)
        strings[n++] = text + at;
    const char *hypotheses[MAX_SEGMENTS], *references[MAX_SEGMENTS];
    int64_t count = n / 2;
    for (int64_t i = 0; i < count; i++) {
        hypotheses[i] = strings[2 * i];
        references[i] = strings[2 * i + 1];
    }
    tfm_status corpus[2], alone[2];
    score_both(hypotheses, references, count, corpus);
    for (int64_t i = 0; i < count; i++) {
        score_both(hypotheses + i, references + i, 1, alone);
        /* a corpus is refused exactly when one of its segments is */
        if (corpus[0] == TFM_OK)
            FUZZ_ASSERT(alone[0] == TFM_OK && alone[1] == TFM_OK);
    }
    double self = -1.0;
    if (count && tfm_score_chrf(hypotheses, hypotheses, 1, &self) == TFM_OK)
        FUZZ_ASSERT(self == 0.0 || fabs(self - 100.0) < 1e-6);
    return 0;
}
