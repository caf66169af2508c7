/* Greedy decoding and sampling: a row per source, each step's token the
 * most likely one of the processed logits (logits.c) or drawn from them
 * (sample.c); a source ends at an end token. */
#include <math.h>
#include <string.h>

#include "decode/decode.h"
#include "ops/softmax.h"

/* The group's sources, one row each. */
tfm_status tfm__decode_search_one(tfm_decoding *d, group *g, int64_t S, int32_t *lengths,
                                  float *out_logits, float *out_probs)
{
    int64_t V = d->vocab, T = d->max_len, T1 = T + 1;
    int64_t n = g->count;
    for (int64_t i = 0; i < n; i++) {
        int64_t b = g->first + i;
        if (d->o.use_cache) /* a row's own tiles */
            for (int64_t j = 0; j < row_tiles(d); j++)
                tile_table_of(d, b)[j] = (int32_t)(b * row_tiles(d) + j);
        g->active[i] = (int32_t)b;
        d->hist[b * T1] = d->o.bos_id;
        d->sum[b] = 0.0;
        lengths[b] = 1;
    }
    for (int64_t t = 0; t < T && n > 0; t++) {
        tfm_status status = tfm__decode_step(d, g, n, t, S);
        if (status != TFM_OK)
            return status;
        int64_t still = 0;
        for (int64_t i = 0; i < n; i++) {
            int32_t r = g->active[i];
            const float *l = g->logits + i * V;
            double lse = tfm__log_sum_exp(l, V, NULL);
            if (!isfinite(lse)) {
                g->bad_step = t;
                return TFM_ERR_NUMERIC;
            }
            const int32_t *so_far = d->hist + r * T1;
            const float *s = l;
            double s_lse = lse;
            if (d->processing) { /* the model's logits stay for the score */
                float *processed = g->processed;
                memcpy(processed, l, (size_t)V * sizeof *l);
                tfm__decode_process(d, processed, so_far, t + 1, r);
                s = processed;
                s_lse = tfm__log_sum_exp(s, V, NULL);
                if (!(s_lse > -INFINITY)) /* every token banned: the source ends */
                    continue;
            }
            if (out_logits)
                memcpy(out_logits + (r * T + t) * V, l, (size_t)V * sizeof *l);
            float *p = out_probs ? out_probs + (r * T + t) * V : d->probs;
            int32_t token;
            if (d->o.strategy == TFM_DECODE_SAMPLE) {
                token = tfm__decode_sample(d, s, p);
            } else {
                token = (int32_t)tfm__argmax(s, V);
                if (out_probs)
                    for (int64_t v = 0; v < V; v++)
                        p[v] = (float)exp(s[v] - s_lse);
            }
            d->sum[r] += l[token] - lse;
            d->hist[r * T1 + t + 1] = token;
            lengths[r] = (int32_t)(t + 2);
            int stop = d->o.callback && d->o.callback(d->o.callback_user, r, token, t + 1);
            if (!d->is_end[token] && t + 1 < d->limit[r] && !stop)
                g->active[still++] = r;
        }
        n = still;
    }
    return TFM_OK;
}
