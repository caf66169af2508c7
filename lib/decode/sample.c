/* Sampling's draw: the softmax of the logits / temperature, cut to the
 * top_k most likely, then to the smallest set of most likely tokens
 * reaching top_p, renormalised; one draw from the run's generator. The
 * most likely tokens come off a heap, so a small top_k costs little. */
#include <math.h>

#include "decode/decode.h"

/* Token a ranks before b: a larger logit, then the smaller id. */
static int before(const float *l, int32_t a, int32_t b)
{
    return l[a] > l[b] || (l[a] == l[b] && a < b);
}

static void sift_down(int32_t *heap, int64_t n, int64_t i, const float *l)
{
    for (;;) {
        int64_t best = i, c = 2 * i + 1;
        if (c < n && before(l, heap[c], heap[best]))
            best = c;
        if (c + 1 < n && before(l, heap[c + 1], heap[best]))
            best = c + 1;
        if (best == i)
            return;
        int32_t tmp = heap[i];
        heap[i] = heap[best];
        heap[best] = tmp;
        i = best;
    }
}

/* The most likely token left in the heap heap[0..*n), moved to heap[*n - 1]:
 * the k-th token popped ends at heap[V - k]. */
static int32_t pop(int32_t *heap, int64_t *n, const float *l)
{
    int32_t top = heap[0];
    heap[0] = heap[*n - 1];
    heap[*n - 1] = top;
    (*n)--;
    sift_down(heap, *n, 0, l);
    return top;
}

/* Writes the distribution to draw from into p [V] (softmax of logits /
 * temperature, cut to the top_k most likely, then to the smallest set of
 * most likely tokens reaching top_p, renormalised) and draws from it. */
int32_t tfm__decode_sample(tfm_decoding *d, const float *logits, float *p)
{
    int64_t V = d->vocab, k = d->o.top_k > 0 && d->o.top_k < V ? d->o.top_k : V;
    float max = logits[0];
    for (int64_t v = 1; v < V; v++)
        max = logits[v] > max ? logits[v] : max;
    /* dividing (not multiplying by 1/T) keeps a tiny temperature finite */
    for (int64_t v = 0; v < V; v++)
        p[v] = expf((logits[v] - max) / d->o.temperature);
    double total = 0.0;
    int64_t kept = V;
    if (k < V || d->o.top_p < 1.0f) {
        int32_t *heap = d->order;
        int64_t n = V;
        for (int64_t v = 0; v < V; v++)
            heap[v] = (int32_t)v;
        for (int64_t i = V / 2 - 1; i >= 0; i--)
            sift_down(heap, V, i, logits);
        if (k < V) {
            for (kept = 0; kept < k; kept++)
                total += p[pop(heap, &n, logits)];
        } else {
            for (int64_t v = 0; v < V; v++)
                total += p[v];
        }
        if (d->o.top_p < 1.0f) {
            double target = (double)d->o.top_p * total, reached = 0.0;
            int64_t m = 0;
            while (m < kept && reached < target) {
                int32_t token = m < V - n ? heap[V - 1 - m] : pop(heap, &n, logits);
                reached += p[token];
                m++;
            }
            kept = m;
            total = reached;
        }
        /* heap[0 .. V - kept) holds every token not kept */
        for (int64_t j = 0; j < V - kept; j++)
            p[heap[j]] = 0.0f;
    } else {
        for (int64_t v = 0; v < V; v++)
            total += p[v];
    }
    for (int64_t v = 0; v < V; v++)
        p[v] = (float)(p[v] / total);
    double u = tfm_rng_uniform(d->rng), reached = 0.0;
    int32_t last = 0;
    for (int64_t v = 0; v < V; v++) {
        if (p[v] <= 0.0f)
            continue;
        reached += p[v];
        last = (int32_t)v;
        if (u < reached)
            return last;
    }
    return last; /* u beyond the rounded total */
}
