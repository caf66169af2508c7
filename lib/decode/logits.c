/* What a step's logits go through before a strategy chooses a token:
 * their normaliser, whose finiteness says whether they are usable. The
 * logits processors (penalties, suppressed tokens, length limits) belong
 * here too. */
#include <math.h>

#include "decode/decode.h"

/* log(sum(exp(logits))); NaN or infinite when the logits are not usable. */
double tfm__decode_log_sum_exp(const float *logits, int64_t V)
{
    float max = logits[0];
    for (int64_t v = 1; v < V; v++)
        max = logits[v] > max ? logits[v] : max;
    double total = 0.0;
    for (int64_t v = 0; v < V; v++)
        total += expf(logits[v] - max);
    return (double)max + log(total);
}
