/* Beam search: per source, a row per live hypothesis, under one of two
 * rule sets (decode.h's tfm_beam_rules). CTranslate2's: each step keeps the
 * best min(beam, finish_count - finished) continuations of the processed
 * log probabilities (logits.c; a banned one never), where finish_count is
 * round(beam * patience); those ending in an end token finish, a source's
 * search stops at finish_count finished or at its length limit.
 * Transformers' (beam_search.py's BeamSearchScorer): the best 2 * beam
 * continuations, an end token among the first beam finishes, the others
 * refill the beam; the finish_count best finished are kept, and the search
 * stops as early_stopping says. Either way the n_best finished ones are
 * returned best first, their scores normalised by length ** length_penalty. */
#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "decode/decode.h"
#include "ops/softmax.h"

/* The raw score of a hypothesis of `counted` tokens, length-normalised. */
static double normalised(const tfm_decoding *d, double score, int64_t counted)
{
    return score / pow((double)counted, (double)d->o.length_penalty);
}

static int transformers(const tfm_decoding *d)
{
    return d->o.beam_rules == TFM_BEAM_RULES_TRANSFORMERS;
}

/* Source b's finished hypothesis f + 1 moves to f (tokens, alignments,
 * length and score). */
static void move_down(tfm_decoding *d, int64_t f)
{
    int64_t T1 = d->max_len + 1;
    memcpy(d->fin_tokens + f * T1, d->fin_tokens + (f + 1) * T1, (size_t)T1 * sizeof(int32_t));
    if (d->alignments)
        memcpy(alignments_of(d, d->fin_alignments, f),
               alignments_of(d, d->fin_alignments, f + 1),
               (size_t)(d->max_len * d->max_src_len) * sizeof(float));
    d->fin_length[f] = d->fin_length[f + 1];
    d->fin_score[f] = d->fin_score[f + 1];
}

/* The index (within source b's) of its worst finished hypothesis, the
 * earliest of equals, as transformers' BeamHypotheses drops it. */
static int64_t worst_of(const tfm_decoding *d, int64_t b)
{
    const double *score = d->fin_score + b * d->finish_count;
    int64_t worst = 0;
    for (int64_t i = 1; i < d->done[b]; i++)
        worst = score[i] < score[worst] ? i : worst;
    return worst;
}

/* Moves row r's hypothesis (its first `len` tokens, and the alignments
 * of those after bos_id) to source b's finished ones, scored by `counted`
 * tokens. When they are full (transformers' rules) it replaces the worst
 * if it is better, the others keeping their order of finishing. */
static void finish(tfm_decoding *d, int64_t b, int64_t r, int64_t len, int64_t counted,
                   double score)
{
    int64_t T1 = d->max_len + 1, first = b * d->finish_count;
    double value = normalised(d, score, counted);
    if (d->done[b] == d->finish_count) {
        int64_t worst = worst_of(d, b);
        if (!(value > d->fin_score[first + worst]))
            return;
        for (int64_t i = first + worst; i < first + d->done[b] - 1; i++)
            move_down(d, i);
        d->done[b]--;
    }
    int64_t f = first + d->done[b]++;
    int32_t *out = d->fin_tokens + f * T1;
    memcpy(out, d->hist + r * T1, (size_t)len * sizeof *out);
    if (d->alignments)
        memcpy(alignments_of(d, d->fin_alignments, f), alignments_of(d, d->alignments, r),
               (size_t)((len - 1) * d->max_src_len) * sizeof(float));
    for (int64_t i = len; i < T1; i++)
        out[i] = -1;
    d->fin_length[f] = (int32_t)len;
    d->fin_score[f] = value;
}

/* Source b's live hypotheses end where they are, `len` tokens long (at
 * max_length or the source's own limit); CTranslate2 counts the tokens
 * generated, transformers bos_id too. */
static void end_live(tfm_decoding *d, int64_t b, int64_t len)
{
    int64_t K = d->beam, counted = transformers(d) ? len : len - 1;
    for (int32_t j = 0; j < d->live[b]; j++)
        finish(d, b, b * K + j, len, counted, d->sum[b * K + j]);
    d->live[b] = 0;
}

/* One source's best candidates of a step, kept sorted [2 * beam]. */
typedef struct candidates {
    double *score;
    int32_t *parent, *token;
} candidates;

static candidates candidates_of(const tfm_decoding *d, int64_t b)
{
    int64_t at = b * 2 * d->beam;
    return (candidates){d->cand_score + at, d->cand_parent + at, d->cand_token + at};
}

/* Inserts a candidate into the best `width` of the step; an equal score
 * ranks after the earlier candidates, and a banned one (-inf) is dropped. */
static void consider(const candidates *c, int64_t *count, int64_t width, double score,
                     int32_t parent, int32_t token)
{
    if ((*count == width && !(score > c->score[width - 1])) || score == -INFINITY)
        return;
    int64_t pos = *count < width ? (*count)++ : width - 1;
    for (; pos > 0 && score > c->score[pos - 1]; pos--) {
        c->score[pos] = c->score[pos - 1];
        c->parent[pos] = c->parent[pos - 1];
        c->token[pos] = c->token[pos - 1];
    }
    c->score[pos] = score;
    c->parent[pos] = parent;
    c->token[pos] = token;
}

/* The first i in [from, n) with x[i] > floor, or n: a block of 64 values
 * at a time, in vectors, since almost every value of a vocabulary's row
 * falls below the beam's worst. */
static TFM__KERNEL(first_above,
                   (const float *restrict x, int64_t from, int64_t n, float floor,
                    int64_t *restrict found),
                   (x, from, n, floor, found))
{
    enum { VALUES = 64 };
    int64_t i = from;
    for (; i + VALUES <= n; i += VALUES) {
        int above = 0;
#pragma omp simd reduction(| : above)
        for (int l = 0; l < VALUES; l++)
            above |= x[i + l] > floor;
        if (above)
            break;
    }
    while (i < n && !(x[i] > floor))
        i++;
    *found = i;
}

/* A float at or below every log probability lp whose score base + lp
 * cannot beat worst: lp <= worst - base exactly makes the rounded sum <=
 * worst. worst - base is rounded by at most half the spacing on its side,
 * so the next double down is below the exact value, and so is that
 * rounded down to a float. */
int64_t tfm__beam_next_rival(const float *logp, int64_t from, int64_t n, double base,
                             double worst)
{
    double below = nextafter(worst - base, -INFINITY);
    float floor = (float)below;
    if ((double)floor > below)
        floor = nextafterf(floor, -INFINITY);
    int64_t found;
    first_above(logp, from, n, floor, &found);
    return found;
}

/* Source b's best `width` continuations of its live rows, whose log
 * probabilities start at logp, into c; their count. Once `width` are
 * kept, only rivals of the worst of them reach consider: the same
 * candidates in the same order as considering every one. */
static int64_t best_continuations(const tfm_decoding *d, const candidates *c, int64_t b,
                                  const float *logp, int64_t width)
{
    int64_t K = d->beam, V = d->vocab, count = 0;
    for (int32_t j = 0; j < d->live[b]; j++) {
        double base = d->sum[b * K + j];
        const float *row = logp + j * V;
        for (int64_t v = 0; v < V; v++) {
            if (count == width &&
                (v = tfm__beam_next_rival(row, v, V, base, c->score[width - 1])) == V)
                break;
            consider(c, &count, width, base + row[v], j, (int32_t)v);
        }
    }
    return count;
}

/* Source b's live rows take the hypotheses of their parents (tiles and
 * tokens 0..t), then the new tokens at t + 1. */
static void reorder(tfm_decoding *d, const candidates *c, int64_t b, int64_t n_new, int64_t t)
{
    int64_t K = d->beam, T1 = d->max_len + 1, base = b * K;
    int32_t *hist_tmp = d->hist_tmp + base * T1;
    double *sum_tmp = d->sum_tmp + base;
    for (int64_t j = 0; j < n_new; j++) {
        memcpy(hist_tmp + j * T1, d->hist + (base + c->parent[j]) * T1,
               (size_t)(t + 1) * sizeof(int32_t));
        hist_tmp[j * T1 + t + 1] = c->token[j];
        sum_tmp[j] = c->score[j];
    }
    for (int64_t j = 0; j < n_new; j++) {
        memcpy(d->hist + (base + j) * T1, hist_tmp + j * T1, (size_t)(t + 2) * sizeof(int32_t));
        d->sum[base + j] = sum_tmp[j];
    }
    if (d->alignments) { /* steps 0..t's, through the scratch as the tokens */
        size_t bytes = (size_t)((t + 1) * d->max_src_len) * sizeof(float);
        for (int64_t j = 0; j < n_new; j++)
            memcpy(alignments_of(d, d->alignments_tmp, base + j),
                   alignments_of(d, d->alignments, base + c->parent[j]), bytes);
        for (int64_t j = 0; j < n_new; j++)
            memcpy(alignments_of(d, d->alignments, base + j),
                   alignments_of(d, d->alignments_tmp, base + j), bytes);
    }
    if (d->o.use_cache)
        tfm__decode_reorder_tiles(d, c->parent, b, d->live[b], n_new, t);
}

/* Source b's candidates of step t, best first, split: an end token among
 * the first `finishing` finishes its hypothesis (a later one is dropped),
 * the others move to the front of c, up to `kept` of them; their count. */
static int64_t split(tfm_decoding *d, const candidates *c, int64_t b, int64_t count,
                     int64_t t, int64_t finishing, int64_t kept)
{
    int64_t K = d->beam, T1 = d->max_len + 1, n_new = 0;
    for (int64_t i = 0; i < count && n_new < kept; i++) {
        if (d->is_end[c->token[i]]) {
            if (i >= finishing)
                continue;
            int64_t r = b * K + c->parent[i];
            d->hist[r * T1 + t + 1] = c->token[i]; /* past the parent's tokens, rewritten if kept */
            finish(d, b, r, t + 2, t + 1, c->score[i]);
        } else {
            c->score[n_new] = c->score[i];
            c->parent[n_new] = c->parent[i];
            c->token[n_new] = c->token[i];
            n_new++;
        }
    }
    return n_new;
}

/* One step of source b, whose live rows' log probabilities start at logp:
 * the best (beam - finished) continuations; those ending in eos finish. */
static void advance(tfm_decoding *d, int64_t b, const float *logp, int64_t t)
{
    int64_t K = d->beam;
    int64_t width = d->finish_count - d->done[b] < K ? d->finish_count - d->done[b] : K;
    candidates c = candidates_of(d, b);
    int64_t count = best_continuations(d, &c, b, logp, width);
    int64_t n_new = split(d, &c, b, count, t, count, count);
    reorder(d, &c, b, n_new, t);
    d->live[b] = (int32_t)n_new;
}

/* Whether source b's search is over after a step whose best candidate
 * scored `best` with live hypotheses of `len` tokens (BeamHypotheses'
 * is_done). */
static int transformers_done(const tfm_decoding *d, int64_t b, double best, int64_t len)
{
    if (d->done[b] < d->finish_count)
        return 0;
    if (d->o.early_stopping == TFM_EARLY_STOPPING_TRUE)
        return 1;
    if (d->o.early_stopping == TFM_EARLY_STOPPING_NEVER && d->o.length_penalty > 0.0f)
        len = d->max_len + 1;
    return d->fin_score[b * d->finish_count + worst_of(d, b)] >= normalised(d, best, len);
}

/* advance under transformers' rules: of the best 2 * beam continuations, in
 * rank order, an end token within the first beam finishes, the others
 * refill the beam. */
static void advance_transformers(tfm_decoding *d, int64_t b, const float *logp, int64_t t)
{
    int64_t K = d->beam;
    candidates c = candidates_of(d, b);
    int64_t count = best_continuations(d, &c, b, logp, 2 * K);
    double best = count > 0 ? c.score[0] : -INFINITY;
    int64_t n_new = split(d, &c, b, count, t, K, K);
    if (count == 0 || transformers_done(d, b, best, t + 1)) {
        d->live[b] = 0;
        return;
    }
    reorder(d, &c, b, n_new, t);
    d->live[b] = (int32_t)n_new;
}

/* The group's sources, a row per live hypothesis. */
tfm_status tfm__decode_search_beam(tfm_decoding *d, group *g, int64_t S, int32_t *tokens,
                                   int32_t *lengths, float *scores)
{
    int64_t K = d->beam, V = d->vocab, T = d->max_len, T1 = T + 1, N = d->o.n_best;
    int64_t F = d->finish_count;
    int64_t first = g->first, last = g->first + g->count;
    int64_t owned = K * row_tiles(d);
    for (int64_t b = first; b < last; b++) {
        if (d->o.use_cache) { /* one hypothesis, writing position 0 */
            memset(d->tile_refs + b * owned, 0, (size_t)owned * sizeof *d->tile_refs);
            tile_table_of(d, b * K)[0] = tfm__decode_new_tile(d, b);
        }
        d->live[b] = 1;
        d->done[b] = 0;
        d->hist[b * K * T1] = d->o.bos_id;
        d->sum[b * K] = 0.0;
    }
    for (int64_t t = 0; t < T; t++) {
        int64_t n = 0;
        for (int64_t b = first; b < last; b++) {
            if (t == d->limit[b])
                end_live(d, b, t + 1);
            for (int32_t j = 0; j < d->live[b]; j++)
                g->active[n++] = (int32_t)(b * K + j);
        }
        if (n == 0)
            break;
        tfm_status status = tfm__decode_step(d, g, n, t, S);
        if (status != TFM_OK)
            return status;
        for (int64_t i = 0; i < n; i++) {
            float *l = g->logits + i * V;
            if (!isfinite(tfm__log_normalise(l, V))) {
                g->bad_step = t;
                return TFM_ERR_NUMERIC;
            }
            tfm__decode_process(d, l, d->hist + g->active[i] * T1, t + 1, g->active[i] / K);
        }
        const float *logp = g->logits;
        for (int64_t b = first; b < last; b++) {
            int32_t live = d->live[b];
            if (live > 0 && transformers(d))
                advance_transformers(d, b, logp, t);
            else if (live > 0)
                advance(d, b, logp, t);
            logp += live * V;
        }
    }
    for (int64_t b = first; b < last; b++) {
        end_live(d, b, T1);
        /* best first; an equal score keeps the order of finishing
         * (transformers': the later first) */
        int32_t found = d->done[b], later_first = transformers(d);
        const double *score = d->fin_score + b * F;
        int32_t *rank = d->rank + b * F;
        for (int32_t i = 0; i < found; i++) {
            int32_t pos = i;
            for (; pos > 0 && (score[i] > score[rank[pos - 1]] ||
                               (later_first && score[i] == score[rank[pos - 1]]));
                 pos--)
                rank[pos] = rank[pos - 1];
            rank[pos] = i;
        }
        for (int64_t h = 0; h < N; h++) {
            int64_t out = b * N + h, f = b * F + (h < found ? rank[h] : 0);
            if (h < found) {
                memcpy(tokens + out * T1, d->fin_tokens + f * T1, (size_t)T1 * sizeof *tokens);
                lengths[out] = d->fin_length[f];
            } else { /* fewer distinct sequences exist than n_best */
                for (int64_t i = 0; i < T1; i++)
                    tokens[out * T1 + i] = -1;
                lengths[out] = 0;
            }
            if (scores)
                scores[out] = h < found ? (float)d->fin_score[f] : -INFINITY;
            if (d->alignments) {
                d->result[out] = alignments_of(d, d->fin_alignments, f);
                d->result_rows[out] = h < found ? d->fin_length[f] - 1 : 0;
            }
        }
        if (d->o.callback && found > 0) { /* the best hypothesis, now final */
            const int32_t *best = d->fin_tokens + (b * F + rank[0]) * T1;
            for (int64_t i = 1; i < d->fin_length[b * F + rank[0]]; i++)
                if (d->o.callback(d->o.callback_user, b, best[i], i))
                    break;
        }
    }
    return TFM_OK;
}
