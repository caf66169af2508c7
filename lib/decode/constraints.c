/* Phrases a decoding must write: read a hypothesis' state from its
 * tokens, then mask the next step's scores (constraints.h). */
#include "decode/constraints.h"

#include <math.h>

static int named_in_order(const tfm__constraints *c, int32_t p)
{
    for (int32_t i = 0; i < c->n_order; i++)
        if (c->order[i] == p)
            return 1;
    return 0;
}

/* Whether phrase p may start in state s. */
static int may_start(const tfm__constraints *c, const tfm__constraint_state *s, int32_t p)
{
    if (s->count[p] >= c->phrases[p].max)
        return 0;
    if (!named_in_order(c, p))
        return 1;
    return s->at_order < c->n_order && c->order[s->at_order] == p;
}

static void complete(const tfm__constraints *c, tfm__constraint_state *s, int32_t p)
{
    s->count[p]++;
    s->open = -1;
    s->written = 0;
    if (s->at_order < c->n_order && c->order[s->at_order] == p)
        s->at_order++;
}

void tfm__constraints_read(const tfm__constraints *c, const int32_t *g, int64_t n,
                           tfm__constraint_state *s)
{
    for (int32_t p = 0; p < c->n; p++)
        s->count[p] = 0;
    s->open = -1;
    s->written = s->at_order = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t token = g[i];
        if (s->open >= 0) {
            const tfm__phrase *ph = &c->phrases[s->open];
            if (ph->ids[s->written] == token) {
                if (++s->written == ph->length)
                    complete(c, s, s->open);
                continue;
            }
            s->open = -1; /* left by a forced prefix: the token may start another */
            s->written = 0;
        }
        for (int32_t p = 0; p < c->n; p++) {
            if (c->phrases[p].ids[0] != token || !may_start(c, s, p))
                continue;
            if (c->phrases[p].length == 1) {
                complete(c, s, p);
            } else {
                s->open = p;
                s->written = 1;
            }
            break;
        }
    }
}

/* Whether some phrase that may start begins with token. */
static int a_start(const tfm__constraints *c, const tfm__constraint_state *s, int32_t token,
                   int unmet_only)
{
    for (int32_t p = 0; p < c->n; p++)
        if (c->phrases[p].ids[0] == token && may_start(c, s, p) &&
            (!unmet_only || s->count[p] < c->phrases[p].min))
            return 1;
    return 0;
}

void tfm__constraints_mask(const tfm__constraints *c, float *scores, int64_t V,
                           const int32_t *g, int64_t n, int64_t left, const int32_t *ends,
                           int64_t n_ends)
{
    tfm__constraint_state s;
    tfm__constraints_read(c, g, n, &s);
    if (s.open >= 0) { /* forced through the phrase */
        int32_t next = c->phrases[s.open].ids[s.written];
        for (int64_t v = 0; v < V; v++)
            if (v != next)
                scores[v] = -INFINITY;
        return;
    }
    for (int32_t i = 0; i < c->n_banned; i++)
        scores[c->banned[i]] = -INFINITY;
    int64_t need = 0;
    for (int32_t p = 0; p < c->n; p++) {
        const tfm__phrase *ph = &c->phrases[p];
        if (s.count[p] < ph->min)
            need += (int64_t)(ph->min - s.count[p]) * ph->length;
        if (!may_start(c, &s, p) && !a_start(c, &s, ph->ids[0], 0))
            scores[ph->ids[0]] = -INFINITY;
    }
    if (need == 0)
        return;
    for (int64_t i = 0; i < n_ends; i++)
        scores[ends[i]] = -INFINITY;
    if (need >= left) /* only the unmet phrases fit in what is left */
        for (int64_t v = 0; v < V; v++)
            if (!a_start(c, &s, (int32_t)v, 1))
                scores[v] = -INFINITY;
}
