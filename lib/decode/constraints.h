/* Constraints on what a decoding writes (constraints.c): phrases of
 * target ids that must appear between min and max times, some of them in
 * a given order, as placeholders and glossaries need. Each hypothesis'
 * state is read again from its tokens so far at each step, so greedy
 * decoding, sampling and every beam hypothesis keep their own without a
 * copy to carry through the beam's reordering. */
#ifndef TFM_DECODE_CONSTRAINTS_H
#define TFM_DECODE_CONSTRAINTS_H

#include <stdint.h>

/* The most phrases one source's constraints may hold. */
#define TFM__MAX_PHRASES 256

typedef struct tfm__phrase {
    const int32_t *ids; /* target ids, at least one */
    int32_t length;
    int32_t min, max;   /* completed occurrences allowed: 0 <= min <= max */
} tfm__phrase;

/* A source's constraints: its phrases, and the sequence order[0,
 * n_order) of phrase indices in which the phrases it names must complete
 * (a phrase named there starts only where the sequence is at it; the
 * others start anywhere). */
typedef struct tfm__constraints {
    const tfm__phrase *phrases;
    int32_t n;
    const int32_t *order;
    int32_t n_order;
    const int32_t *banned; /* ids never chosen outside a phrase */
    int32_t n_banned;
} tfm__constraints;

/* What the tokens g[0, n) generated so far have done: each phrase's
 * completed occurrences into count[c->n], and the phrase being written
 * (-1: none) with its tokens written. A phrase starts where its first id
 * is chosen while it may start (the first such phrase when several share
 * it); once started the decoding is forced through it. */
typedef struct tfm__constraint_state {
    int32_t count[TFM__MAX_PHRASES];
    int32_t open, written, at_order;
} tfm__constraint_state;

void tfm__constraints_read(const tfm__constraints *c, const int32_t *g, int64_t n,
                           tfm__constraint_state *state);

/* The next step's scores [V] masked (-inf) for a hypothesis whose
 * generated tokens are g[0, n), with `left` tokens it may still generate
 * (this one included): inside a phrase only its next id; the banned ids
 * banned; a phrase that
 * may not start (its max reached, or not next in the order) banned; the
 * end tokens ends[0, n_ends) banned while a min is unmet; and when the
 * unmet phrases' tokens fill what is left, only their starts. */
void tfm__constraints_mask(const tfm__constraints *c, float *scores, int64_t V,
                           const int32_t *g, int64_t n, int64_t left, const int32_t *ends,
                           int64_t n_ends);

#endif
