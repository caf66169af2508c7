/* Fused multi-head attention core, forward then backward. Per (batch, head)
 * it runs Q K^T as one GEMM into the weights, the masked softmax in place,
 * the dropout into a scratch row block, and weights times V as one GEMM
 * straight into the head's columns of the merged context. No head copies,
 * no separate scores, dropped weights or unmerged context are kept: the
 * backward regenerates the dropout mask from its counter-based hash and
 * needs only the weights and the projections. */
#include "ops/attention.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>

#include "core/error.h"
#include "core/rng.h"
#include "ops/softmax.h"

/* node->in: q, k, v (projections), scale, weights, mask.
 * ints: q_col, k_col, v_col, heads, dropout key; floats: alpha, p, 1/(1-p). */
enum { IN_Q, IN_K, IN_V, IN_SCALE, IN_WEIGHTS, IN_MASK, IN_COUNT };

/* d = dropout(w) for count weights from flat index first on. */
static void drop_weights(const float *w, float *d, int64_t count, uint64_t key, int64_t first,
                         float p, float keep_scale)
{
    uint32_t threshold = tfm__counter_threshold(p);
    for (int64_t i = 0; i < count; i++)
        d[i] = tfm__counter_bits(key, (uint32_t)(first + i)) >= threshold ? w[i] * keep_scale
                                                                          : 0.0f;
}

static void attention_backward(tfm_node *node)
{
    const tfm_tensor *q = node->in[IN_Q], *k = node->in[IN_K], *v = node->in[IN_V];
    const tfm_tensor *scale = node->in[IN_SCALE], *mask = node->in[IN_MASK];
    const tfm_broadcast *bc = node->saved[0];
    float *dp = node->saved[1]; /* [T, S] */
    int64_t q_col = node->ints[0], k_col = node->ints[1], v_col = node->ints[2];
    int64_t heads = node->ints[3];
    uint64_t key = (uint64_t)node->ints[4];
    float alpha = node->floats[0], p = node->floats[1], keep_scale = node->floats[2];
    int64_t batch = q->shape[0], T = q->shape[1], S = k->shape[1];
    int64_t wq = q->shape[2], wk = k->shape[2], wv = v->shape[2];
    int64_t width = node->out->shape[2], dk = width / heads;
    float *dropped = dp + T * S, *dq_head = dropped + T * S; /* [T, S], [T, dk] */
    const float *g = node->out->grad, *weights = tfm__f32(node->in[IN_WEIGHTS]);
    float *gq = tfm__grad_of(q), *gk = tfm__grad_of(k), *gv = tfm__grad_of(v);
    float *gs = scale ? tfm__grad_of(scale) : NULL;
    float *gm = mask ? tfm__grad_of(mask) : NULL; /* an additive mask that requires grad */
    double scores_dot = 0.0; /* sum(dScores * scores), for the trainable scale */
    for (int64_t b = 0; b < batch; b++)
        for (int64_t h = 0; h < heads; h++) {
            int64_t row0 = (b * heads + h) * T;
            const float *w = weights + row0 * S, *used = w;
            const float *gh = g + b * T * width + h * dk;
            const float *qh = tfm__f32(q) + b * T * wq + q_col + h * dk;
            const float *kh = tfm__f32(k) + b * S * wk + k_col + h * dk;
            const float *vh = tfm__f32(v) + b * S * wv + v_col + h * dk;
            if (p > 0.0f) {
                drop_weights(w, dropped, T * S, key, row0 * S, p, keep_scale);
                used = dropped;
            }
            if (gv)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)S, (int)dk, (int)T,
                            1.0f, used, (int)S, gh, (int)width, 1.0f,
                            gv + b * S * wv + v_col + h * dk, (int)wv);
            if (!gq && !gk && !gs && !gm)
                continue;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)S, (int)dk, 1.0f,
                        gh, (int)width, vh, (int)wv, 0.0f, dp, (int)S);
            /* dropped is 0 where the mask dropped or the weight is 0; at a
             * zero weight the softmax's backward ignores dp anyway */
            if (p > 0.0f)
                for (int64_t i = 0; i < T * S; i++)
                    dp[i] = dropped[i] != 0.0f ? dp[i] * keep_scale : 0.0f;
            for (int64_t t = 0; t < T; t++) {
                tfm__softmax_grad_row(w + t * S, dp + t * S, S, mask, bc, row0 + t, dp + t * S, 0);
                if (gm) {
                    float *gmr = gm + tfm__mask_row(bc, row0 + t);
                    for (int64_t j = 0; j < S; j++)
                        gmr[j * bc->stride_b[3]] += dp[t * S + j];
                }
            }
            float *gqh = gq ? gq + b * T * wq + q_col + h * dk : NULL;
            if (gs) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)dk, (int)S,
                            alpha, dp, (int)S, kh, (int)wk, 0.0f, dq_head, (int)dk);
                for (int64_t t = 0; t < T; t++)
                    for (int64_t j = 0; j < dk; j++) {
                        scores_dot += (double)qh[t * wq + j] * dq_head[t * dk + j];
                        if (gqh)
                            gqh[t * wq + j] += dq_head[t * dk + j];
                    }
            } else if (gqh) {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)dk, (int)S,
                            alpha, dp, (int)S, kh, (int)wk, 1.0f, gqh, (int)wq);
            }
            if (gk)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)S, (int)dk, (int)T,
                            alpha, dp, (int)S, qh, (int)wq, 1.0f,
                            gk + b * S * wk + k_col + h * dk, (int)wk);
        }
    /* scores = alpha Q K^T with alpha = factor / s: d/ds = -scores / s */
    if (gs)
        gs[0] -= (float)(scores_dot / tfm__f32(scale)[0]);
}

static int check_heads(const char *op, const char *what, tfm_heads side, int64_t d_model)
{
    if (tfm__check_input(op, what, side.x, TFM_F32) < 0)
        return -1;
    if (side.x->ndim != 3 || side.col < 0 || side.x->shape[2] < side.col + d_model) {
        char xs[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: the %s %s have no %lld columns from %lld", op, what,
                  tfm__shape_str(side.x, xs, sizeof xs), (long long)d_model,
                  (long long)side.col);
        return -1;
    }
    return 0;
}

tfm_tensor *tfm__attention(tfm_tape *tape, const char *op, tfm_heads q, tfm_heads k,
                           tfm_heads v, const tfm_attention_core *core, tfm_tensor **weights_out)
{
    if (weights_out)
        *weights_out = NULL;
    int64_t d = core->d_model, heads = core->heads;
    if (check_heads(op, "queries", q, d) < 0 || check_heads(op, "keys", k, d) < 0 ||
        check_heads(op, "values", v, d) < 0)
        return NULL;
    int64_t batch = q.x->shape[0], T = q.x->shape[1], S = k.x->shape[1], dk = d / heads;
    if (k.x->shape[0] != batch || v.x->shape[0] != batch || v.x->shape[1] != S ||
        T > INT_MAX || S > INT_MAX || q.x->shape[2] > INT_MAX || k.x->shape[2] > INT_MAX ||
        v.x->shape[2] > INT_MAX) {
        char qs[64], ks[64], vs[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: queries %s, keys %s and values %s do not fit", op,
                  tfm__shape_str(q.x, qs, sizeof qs), tfm__shape_str(k.x, ks, sizeof ks),
                  tfm__shape_str(v.x, vs, sizeof vs));
        return NULL;
    }
    float alpha = core->factor;
    if (core->scale) {
        float s = tfm__f32(core->scale)[0];
        if (!(s != 0.0f) || !isfinite(s)) {
            tfm__fail(TFM_ERR_NUMERIC, "%s: the trainable scale is %g; it must be finite and "
                      "nonzero", op, (double)s);
            return NULL;
        }
        alpha /= s;
    }
    tfm_tensor *weights = tfm__new_output(tape, op, TFM_F32, 4,
                                          (const int64_t[]){batch, heads, T, S});
    tfm_tensor *out = weights ? tfm__new_output(tape, op, TFM_F32, 3,
                                                (const int64_t[]){batch, T, d})
                              : NULL;
    tfm_broadcast bc;
    if (!out || (core->mask && tfm__mask_broadcast(op, weights, core->mask, &bc) < 0))
        return NULL;
    float p = core->dropout, keep_scale = 1.0f / (1.0f - p);
    uint64_t key = p > 0.0f ? tfm_rng_next_u64(core->rng) : 0;
    float *dropped = p > 0.0f ? tfm__scratch(tape, op, (size_t)(T * S) * sizeof(float)) : NULL;
    if (p > 0.0f && !dropped)
        return NULL;
    int64_t wq = q.x->shape[2], wk = k.x->shape[2], wv = v.x->shape[2];
    for (int64_t b = 0; b < batch; b++)
        for (int64_t h = 0; h < heads; h++) {
            int64_t row0 = (b * heads + h) * T;
            float *w = tfm__f32(weights) + row0 * S;
            const float *used = w;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)T, (int)S, (int)dk, alpha,
                        tfm__f32(q.x) + b * T * wq + q.col + h * dk, (int)wq,
                        tfm__f32(k.x) + b * S * wk + k.col + h * dk, (int)wk, 0.0f, w, (int)S);
            for (int64_t t = 0; t < T; t++)
                tfm__softmax_row(w + t * S, w + t * S, S, core->mask, &bc, row0 + t);
            if (p > 0.0f) {
                drop_weights(w, dropped, T * S, key, row0 * S, p, keep_scale);
                used = dropped;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)dk, (int)S, 1.0f,
                        used, (int)S, tfm__f32(v.x) + b * S * wv + v.col + h * dk, (int)wv, 0.0f,
                        tfm__f32(out) + b * T * d + h * dk, (int)d);
        }
    tfm_node *node;
    const tfm_tensor *in[IN_COUNT] = {q.x, k.x, v.x, core->scale, weights, core->mask};
    if (tfm__record(tape, op, out, attention_backward, IN_COUNT, in, &node) < 0)
        return NULL;
    if (node) {
        tfm_broadcast *saved = core->mask ? tfm__scratch(tape, op, sizeof bc) : NULL;
        float *scratch = tfm__scratch(tape, op, (size_t)(2 * T * S + T * dk) * sizeof(float));
        if ((core->mask && !saved) || !scratch)
            return NULL;
        if (saved)
            *saved = bc;
        node->saved[0] = saved;
        node->saved[1] = scratch;
        const int64_t ints[5] = {q.col, k.col, v.col, heads, (int64_t)key};
        for (int i = 0; i < 5; i++)
            node->ints[i] = ints[i];
        node->floats[0] = alpha;
        node->floats[1] = p;
        node->floats[2] = keep_scale;
    }
    if (weights_out)
        *weights_out = weights;
    return out;
}
