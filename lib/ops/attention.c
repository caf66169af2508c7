/* Fused multi-head attention core, forward then backward. Per (batch, head)
 * it runs Q K^T as one GEMM into the weights, the masked softmax in place,
 * the dropout into a scratch row block, and weights times V as one GEMM
 * straight into the head's columns of the merged context. No head copies,
 * no scores, dropped weights or unmerged context are kept, and the weights
 * not either when the layer recomputes them (TFM_RECOMPUTE_ATTENTION_WEIGHTS):
 * the backward then runs a head's Q K^T and softmax again, the same bits.
 * It regenerates the dropout mask from its counter-based hash. The (batch, head) pairs are
 * independent, so they are split among libtfm's threads, each calling a
 * single-threaded BLAS (core/gemm.h). Heads of 8 or 16 columns skip the
 * BLAS: their products are too small for its call and packing to
 * pay (d_k = 8 in tutorial 003), and the loops below keep a row's sums in
 * registers. */
#include "ops/attention.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/gemm.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/vectors.h"
#include "ops/softmax.h"


/* The records' inputs; plan_of lists what else they keep. */
enum { IN_Q, IN_K, IN_V, IN_SCALE, IN_WEIGHTS, IN_MASK, IN_COUNT };

/* Everything a range of (batch, head) pairs needs, forward or backward. */
typedef struct plan {
    const float *q, *k, *v;
    int64_t q_col, k_col, v_col, wq, wk, wv; /* column offsets, row widths */
    int64_t heads, T, S, dk, width;
    float alpha, p, keep_scale;
    tfm__mask_key drop;              /* the weights' dropout mask */
    const tfm_tensor *mask;
    const tfm_broadcast *bc;
    float *weights;                  /* [B, heads, T, S], or NULL: recomputed */
    float *out;                      /* forward: the context [B, T, width] */
    const float *g;                  /* backward: the context's gradient */
    float *gq, *gk, *gv, *gm;        /* backward: the inputs' gradients, or NULL */
    float *gw;                       /* backward: the handed-out weights' gradient */
    int scale_grad;                  /* backward: the trainable scale wants one */
    float *scratch;                  /* per worker: scratch_floats */
    double scores_dot[TFM__MAX_THREADS]; /* per worker: sum(dScores * scores) */
} plan;

/* Per worker: three [T, S] blocks, a head's [T, dk] and a head's
 * transpose [dk, S]. */
static int64_t scratch_floats(int64_t T, int64_t S, int64_t dk)
{
    return 3 * T * S + T * dk + dk * S;
}

/* The three products of a head, each through the BLAS or, for heads of 8
 * or 16 columns, through loops on vectors of 8 floats that keep a row's
 * sums in registers (d_k is a compile-time 1 or 2 vectors there). */
TFM__INLINE int narrow(int64_t dk)
{
    return dk == 8 || dk == 16;
}

/* Rows i .. i + rows - 1 of narrow_nn: up to ROWS chains of sums at once,
 * as one chain alone waits on each addition's latency. */
enum { ROWS = 4 };
TFM__INLINE void narrow_rows(int64_t i, const int rows, const int nv, int64_t K, int64_t step_i,
                             int64_t step_p, float alpha, const float *A, const float *B,
                             int64_t ldb, float beta, float *C, int64_t ldc)
{
    vec8 sum[ROWS][2] = {{{0}}};
    for (int64_t p = 0; p < K; p++)
        for (int v = 0; v < nv; v++) {
            vec8 b = load8(B + p * ldb + 8 * v);
            for (int r = 0; r < rows; r++)
                sum[r][v] += (alpha * A[(i + r) * step_i + p * step_p]) * b;
        }
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < nv; v++) {
            float *c = C + (i + r) * ldc + 8 * v;
            store8(c, beta == 0.0f ? sum[r][v] : sum[r][v] + beta * load8(c));
        }
}

/* C [M, 8 nv] = alpha A [M, K] B [K, 8 nv] + beta C (beta 0: C not read);
 * transpose_a: A is stored [K, M] instead. */
TFM__INLINE void narrow_nn(int64_t M, const int nv, int64_t K, int transpose_a, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                           float *C, int64_t ldc)
{
    int64_t step_i = transpose_a ? 1 : lda, step_p = transpose_a ? lda : 1, i = 0;
    for (; i + ROWS <= M; i += ROWS)
        narrow_rows(i, ROWS, nv, K, step_i, step_p, alpha, A, B, ldb, beta, C, ldc);
    for (; i < M; i++)
        narrow_rows(i, 1, nv, K, step_i, step_p, alpha, A, B, ldb, beta, C, ldc);
}

/* C [M, N] = alpha A [M, 8 nv] Bt [8 nv, N] + beta C, 8 of C's columns at
 * a time. */
TFM__INLINE void narrow_depth(int64_t M, int64_t N, const int nv, float alpha, const float *A,
                              int64_t lda, const float *Bt, float beta, float *C, int64_t ldc)
{
    const int k = 8 * nv;
    for (int64_t i = 0; i < M; i++) {
        const float *a = A + i * lda;
        float *c = C + i * ldc;
        int64_t j = 0;
        for (; j + 32 <= N; j += 32) { /* four chains of sums at once */
            vec8 sum[4] = {{0}};
            for (int p = 0; p < k; p++)
                for (int v = 0; v < 4; v++)
                    sum[v] += a[p] * load8(Bt + p * N + j + 8 * v);
            for (int v = 0; v < 4; v++) {
                float *cv = c + j + 8 * v;
                store8(cv, beta == 0.0f ? alpha * sum[v] : alpha * sum[v] + beta * load8(cv));
            }
        }
        for (; j + 8 <= N; j += 8) {
            vec8 sum = {0};
            for (int p = 0; p < k; p++)
                sum += a[p] * load8(Bt + p * N + j);
            store8(c + j, beta == 0.0f ? alpha * sum : alpha * sum + beta * load8(c + j));
        }
        for (; j < N; j++) {
            float sum = 0.0f;
            for (int p = 0; p < k; p++)
                sum += a[p] * Bt[p * N + j];
            c[j] = beta == 0.0f ? alpha * sum : alpha * sum + beta * c[j];
        }
    }
}

/* C [M, N] = alpha A [M, dk] B^T + beta C with B [N, dk]; bt: [dk, N]
 * scratch for B's transpose on the narrow path. */
TFM__INLINE void head_nt(int64_t M, int64_t N, int64_t dk, float alpha, const float *A,
                         int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                         int64_t ldc, float *bt)
{
    if (!narrow(dk)) {
        tfm__sgemm(0, 1, M, N, dk, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    for (int64_t j = 0; j < N; j++)
        for (int64_t p = 0; p < dk; p++)
            bt[p * N + j] = B[j * ldb + p];
    if (dk == 8)
        narrow_depth(M, N, 1, alpha, A, lda, bt, beta, C, ldc);
    else
        narrow_depth(M, N, 2, alpha, A, lda, bt, beta, C, ldc);
}

/* C [M, dk] = alpha A [M, K] B [K, dk] + beta C. */
TFM__INLINE void head_nn(int64_t M, int64_t dk, int64_t K, float alpha, const float *A,
                         int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                         int64_t ldc)
{
    if (!narrow(dk))
        tfm__sgemm(0, 0, M, dk, K, alpha, A, lda, B, ldb, beta, C, ldc);
    else if (dk == 8)
        narrow_nn(M, 1, K, 0, alpha, A, lda, B, ldb, beta, C, ldc);
    else
        narrow_nn(M, 2, K, 0, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* C [M, dk] += alpha A^T B, A [K, M], B [K, dk]. */
TFM__INLINE void head_tn(int64_t M, int64_t dk, int64_t K, float alpha, const float *A,
                         int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc)
{
    if (!narrow(dk))
        tfm__sgemm(1, 0, M, dk, K, alpha, A, lda, B, ldb, 1.0f, C, ldc);
    else if (dk == 8)
        narrow_nn(M, 1, K, 1, alpha, A, lda, B, ldb, 1.0f, C, ldc);
    else
        narrow_nn(M, 2, K, 1, alpha, A, lda, B, ldb, 1.0f, C, ldc);
}

/* d = dropout(w) for count weights from flat index offset on. */
TFM__INLINE void drop_weights(const float *w, float *d, int64_t count, tfm__mask_key drop,
                              int64_t offset, float p, float keep_scale)
{
    uint32_t threshold = tfm__counter_threshold(p), first = drop.first + (uint32_t)offset;
#pragma omp simd
    for (int64_t i = 0; i < count; i++)
        d[i] = tfm__dropped(drop.key, first + (uint32_t)i, threshold, w[i], keep_scale);
}

/* One head's weights [T, S]: softmax(alpha Q K^T, masked); kt [dk, S] is
 * scratch. */
TFM__INLINE void head_weights(const plan *a, int64_t pair, float *w, float *kt)
{
    int64_t T = a->T, S = a->S, dk = a->dk, b = pair / a->heads, h = pair % a->heads;
    head_nt(T, S, dk, a->alpha, a->q + b * T * a->wq + a->q_col + h * dk, a->wq,
            a->k + b * S * a->wk + a->k_col + h * dk, a->wk, 0.0f, w, S, kt);
    for (int64_t t = 0; t < T; t++)
        tfm__softmax_row(w + t * S, w + t * S, S, a->mask, a->bc, pair * T + t);
}

static TFM__KERNEL(forward_range, (void *ctx, int64_t begin, int64_t end, int worker),
                   (ctx, begin, end, worker))
{
    const plan *a = ctx;
    int64_t T = a->T, S = a->S, dk = a->dk;
    float *dropped = a->scratch + worker * scratch_floats(T, S, dk);
    float *head = dropped + T * S;                /* [T, S] when not kept */
    float *kt = dropped + 3 * T * S + T * dk;     /* [dk, S] */
    for (int64_t pair = begin; pair < end; pair++) {
        int64_t b = pair / a->heads, h = pair % a->heads, row0 = pair * T;
        float *w = a->weights ? a->weights + row0 * S : head;
        const float *used = w;
        head_weights(a, pair, w, kt);
        if (a->p > 0.0f) {
            drop_weights(w, dropped, T * S, a->drop, row0 * S, a->p, a->keep_scale);
            used = dropped;
        }
        head_nn(T, dk, S, 1.0f, used, S, a->v + b * S * a->wv + a->v_col + h * dk, a->wv, 0.0f,
                a->out + b * T * a->width + h * dk, a->width);
    }
}

/* From dp, the gradient of one head's weights w [T, S] (rewritten in place
 * as the scores' gradient), adds into the mask's, Q's and K's gradients;
 * returns the head's sum(dScores * scores) for the trainable scale.
 * dq_head [T, dk] is scratch. */
TFM__INLINE double scores_backward(const plan *a, int64_t pair, const float *w, float *dp,
                                   float *dq_head)
{
    int64_t T = a->T, S = a->S, dk = a->dk;
    int64_t b = pair / a->heads, h = pair % a->heads, row0 = pair * T;
    const float *qh = a->q + b * T * a->wq + a->q_col + h * dk;
    const float *kh = a->k + b * S * a->wk + a->k_col + h * dk;
    double scores_dot = 0.0;
    for (int64_t t = 0; t < T; t++) {
        tfm__softmax_grad_row(w + t * S, dp + t * S, S, dp + t * S, 0);
        if (a->gm) {
            float *gmr = a->gm + tfm__mask_row(a->bc, row0 + t);
            for (int64_t j = 0; j < S; j++)
                gmr[j * a->bc->stride_b[3]] += dp[t * S + j];
        }
    }
    float *gqh = a->gq ? a->gq + b * T * a->wq + a->q_col + h * dk : NULL;
    if (a->scale_grad) {
        head_nn(T, dk, S, a->alpha, dp, S, kh, a->wk, 0.0f, dq_head, dk);
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < dk; j++) {
                scores_dot += (double)qh[t * a->wq + j] * dq_head[t * dk + j];
                if (gqh)
                    gqh[t * a->wq + j] += dq_head[t * dk + j];
            }
    } else if (gqh) {
        head_nn(T, dk, S, a->alpha, dp, S, kh, a->wk, 1.0f, gqh, a->wq);
    }
    if (a->gk)
        head_tn(S, dk, T, a->alpha, dp, S, qh, a->wq, a->gk + b * S * a->wk + a->k_col + h * dk,
                a->wk);
    return scores_dot;
}

static TFM__KERNEL(backward_range, (void *ctx, int64_t begin, int64_t end, int worker),
                   (ctx, begin, end, worker))
{
    plan *a = ctx;
    int64_t T = a->T, S = a->S, dk = a->dk, width = a->width;
    float *dp = a->scratch + worker * scratch_floats(T, S, dk); /* [T, S] */
    float *dropped = dp + T * S, *head = dropped + T * S;      /* [T, S], [T, S] */
    float *dq_head = head + T * S, *vt = dq_head + T * dk;     /* [T, dk], [dk, S] */
    double scores_dot = 0.0;
    for (int64_t pair = begin; pair < end; pair++) {
        int64_t b = pair / a->heads, h = pair % a->heads, row0 = pair * T;
        const float *w = a->weights ? a->weights + row0 * S : head, *used = w;
        if (!a->weights)
            head_weights(a, pair, head, vt);
        const float *gh = a->g + b * T * width + h * dk;
        const float *vh = a->v + b * S * a->wv + a->v_col + h * dk;
        if (a->p > 0.0f) {
            drop_weights(w, dropped, T * S, a->drop, row0 * S, a->p, a->keep_scale);
            used = dropped;
        }
        if (a->gv)
            head_tn(S, dk, T, 1.0f, used, S, gh, width, a->gv + b * S * a->wv + a->v_col + h * dk,
                    a->wv);
        if (!a->gq && !a->gk && !a->gm && !a->scale_grad)
            continue;
        head_nt(T, S, dk, 1.0f, gh, width, vh, a->wv, 0.0f, dp, S, vt);
        /* dropped is 0 where the mask dropped or the weight is 0; at a zero
         * weight the softmax's backward ignores dp anyway */
        if (a->p > 0.0f) {
            float keep = a->keep_scale;
#pragma omp simd
            for (int64_t i = 0; i < T * S; i++)
                dp[i] = dropped[i] != 0.0f ? dp[i] * keep : 0.0f;
        }
        scores_dot += scores_backward(a, pair, w, dp, dq_head);
    }
    a->scores_dot[worker] += scores_dot;
}

/* The weights handed out (weights_out) as an op of their own: their
 * gradient goes straight into the scores' backward. */
static TFM__KERNEL(weights_backward_range, (void *ctx, int64_t begin, int64_t end, int worker),
                   (ctx, begin, end, worker))
{
    plan *a = ctx;
    int64_t T = a->T, S = a->S, dk = a->dk;
    float *dq_head = a->scratch + worker * scratch_floats(T, S, dk);
    double scores_dot = 0.0;
    for (int64_t pair = begin; pair < end; pair++)
        scores_dot += scores_backward(a, pair, a->weights + pair * T * S, a->gw + pair * T * S,
                                      dq_head);
    a->scores_dot[worker] += scores_dot;
}

/* What both records share: in q, k, v, scale, weights, mask (v NULL for
 * the weights' own record); ints q_col, k_col, v_col, heads, the dropout
 * mask's key, and the workers with the mask's first counter in the high
 * 32 bits; floats alpha, p, 1/(1-p); saved the mask's broadcast, the
 * scratch. */
static plan plan_of(const tfm_node *node, int64_t dk)
{
    const tfm_tensor *q = node->in[IN_Q], *k = node->in[IN_K], *v = node->in[IN_V];
    const tfm_tensor *scale = node->in[IN_SCALE], *mask = node->in[IN_MASK];
    return (plan){
        .q = tfm__f32(q), .k = tfm__f32(k), .v = v ? tfm__f32(v) : NULL,
        .q_col = node->ints[0], .k_col = node->ints[1], .v_col = node->ints[2],
        .wq = q->shape[2], .wk = k->shape[2], .wv = v ? v->shape[2] : 0,
        .heads = node->ints[3], .T = q->shape[1], .S = k->shape[1], .dk = dk,
        .width = dk * node->ints[3],
        .alpha = node->floats[0], .p = node->floats[1], .keep_scale = node->floats[2],
        .drop = {(uint64_t)node->ints[4], (uint32_t)((uint64_t)node->ints[5] >> 32)},
        .mask = mask, .bc = node->saved[0],
        .gq = tfm__grad_of(q), .gk = tfm__grad_of(k), .gv = v ? tfm__grad_of(v) : NULL,
        .gm = mask ? tfm__grad_of(mask) : NULL, /* an additive mask that requires grad */
        .scale_grad = scale && tfm__grad_of(scale),
        .scratch = node->saved[1],
    };
}

/* Runs fn over the (batch, head) pairs, then the trainable scale's
 * gradient: scores = alpha Q K^T with alpha = factor / s, so
 * d/ds = -sum(dScores * scores) / s. */
static void run_backward(const tfm_node *node, plan *a, tfm__range_fn fn)
{
    /* a mask's gradient is shared by every head: one worker then */
    int workers = a->gm ? 1 : (int)(node->ints[5] & 0xffffffff);
    tfm__parallel_for(node->in[IN_Q]->shape[0] * a->heads, workers, fn, a);
    const tfm_tensor *scale = node->in[IN_SCALE];
    if (a->scale_grad) {
        double scores_dot = 0.0;
        for (int i = 0; i < workers; i++)
            scores_dot += a->scores_dot[i];
        tfm__grad_of(scale)[0] -= (float)(scores_dot / tfm__f32(scale)[0]);
    }
}

static void attention_backward(tfm_node *node)
{
    plan a = plan_of(node, node->out->shape[2] / node->ints[3]);
    a.weights = node->in[IN_WEIGHTS] ? tfm__f32(node->in[IN_WEIGHTS]) : NULL;
    a.g = node->out->grad;
    run_backward(node, &a, backward_range);
}

/* The weights' record keeps dk where the context's keeps v_col. */
static void weights_backward(tfm_node *node)
{
    plan a = plan_of(node, node->ints[2]);
    a.weights = tfm__f32(node->out);
    a.gw = node->out->grad; /* this op's own: rewritten in place */
    run_backward(node, &a, weights_backward_range);
}

/* The context not kept (recompute_context), computed again as in the
 * forward, its head weights in the scratch as when they are recomputed. */
static void recompute_context(tfm_node *node)
{
    plan a = plan_of(node, node->out->shape[2] / node->ints[3]);
    a.out = tfm__f32(node->out);
    tfm__parallel_for(node->in[IN_Q]->shape[0] * a.heads, (int)(node->ints[5] & 0xffffffff),
                      forward_range, &a);
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

/* The weights for weights_out: the core's own when no gradient is wanted,
 * else a copy recorded as an op of Q, K, the scale and the mask, so a loss
 * on them reaches those (the core's record keeps its copy for itself).
 * Everything else the copy's record needs is in the core's. */
static tfm_tensor *weights_for_caller(tfm_tape *tape, const char *op, tfm_tensor *weights,
                                      const tfm_node *core)
{
    if (!core)
        return weights;
    const tfm_tensor *in[IN_COUNT] = {core->in[IN_Q], core->in[IN_K], NULL,
                                      core->in[IN_SCALE], NULL, core->in[IN_MASK]};
    if (!tfm__wants_grad(tape, IN_COUNT, in))
        return weights;
    tfm_tensor *copy = tfm__new_output(tape, op, TFM_F32, 4, weights->shape);
    tfm_node *node;
    if (!copy || tfm__record(tape, op, copy, weights_backward, IN_COUNT, in, &node) < 0)
        return NULL;
    memcpy(tfm__f32(copy), tfm__f32(weights), (size_t)weights->numel * sizeof(float));
    int64_t heads = core->ints[3], dk = core->out->shape[2] / heads;
    const int64_t ints[6] = {core->ints[0], core->ints[1], dk, heads, 0, core->ints[5]};
    for (int i = 0; i < 6; i++)
        node->ints[i] = ints[i];
    node->floats[0] = core->floats[0];
    node->floats[1] = 0.0f; /* the weights are before dropout */
    node->floats[2] = 1.0f;
    node->saved[0] = core->saved[0];
    node->saved[1] = core->saved[1]; /* the backwards run one after the other */
    return copy;
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
    /* kept for the caller or the backward; else the backward recomputes them */
    const int64_t weights_shape[4] = {batch, heads, T, S};
    int64_t weights_numel = tfm__checked_numel(op, 4, weights_shape);
    if (weights_numel < 0)
        return NULL;
    tfm_tensor shape_only, *weights = NULL;
    tfm__tensor_init(&shape_only, TFM_F32, 4, weights_shape, weights_numel, TFM_STORAGE_HEAP);
    if ((weights_out || !core->recompute_weights) &&
        !(weights = tfm__new_output(tape, op, TFM_F32, 4, weights_shape)))
        return NULL;
    const tfm_tensor *in[IN_COUNT] = {q.x, k.x, v.x, core->scale, weights, core->mask};
    const int64_t out_shape[3] = {batch, T, d};
    tfm_tensor *out =
        core->recompute_context
            ? tfm__new_recomputed(tape, op, TFM__RECOMPUTED_CONTEXT, IN_COUNT, in, 3, out_shape)
            : tfm__new_output(tape, op, TFM_F32, 3, out_shape);
    tfm_broadcast bc;
    if (!out || (core->mask && tfm__mask_broadcast(op, &shape_only, core->mask, &bc) < 0))
        return NULL;
    int workers = tfm__threads();
    if (workers > batch * heads)
        workers = (int)(batch * heads);
    float *scratch = tfm__scratch(tape, op, (size_t)(workers * scratch_floats(T, S, dk)) *
                                                sizeof(float));
    if (!scratch)
        return NULL;
    float p = core->dropout;
    plan a = {
        .q = tfm__f32(q.x), .k = tfm__f32(k.x), .v = tfm__f32(v.x),
        .q_col = q.col, .k_col = k.col, .v_col = v.col,
        .wq = q.x->shape[2], .wk = k.x->shape[2], .wv = v.x->shape[2],
        .heads = heads, .T = T, .S = S, .dk = dk, .width = d,
        .alpha = alpha, .p = p, .keep_scale = 1.0f / (1.0f - p),
        .drop = p > 0.0f ? tfm__rng_mask_key(core->rng, batch * heads * T * S)
                         : (tfm__mask_key){0, 0},
        .mask = core->mask, .bc = &bc,
        .weights = weights ? tfm__f32(weights) : NULL, .out = tfm__f32(out),
        .scratch = scratch,
    };
    tfm__parallel_for(batch * heads, workers, forward_range, &a);
    tfm_node *node;
    if (tfm__record(tape, op, out, attention_backward, IN_COUNT, in, &node) < 0)
        return NULL;
    if (node) {
        tfm_broadcast *saved = core->mask ? tfm__scratch(tape, op, sizeof bc) : NULL;
        if (core->mask && !saved)
            return NULL;
        if (saved)
            *saved = bc;
        node->saved[0] = saved;
        node->saved[1] = scratch; /* the forward is done with it */
        const int64_t ints[6] = {q.col, k.col, v.col, heads, (int64_t)a.drop.key,
                                 (int64_t)((uint64_t)a.drop.first << 32 | (uint32_t)workers)};
        for (int i = 0; i < 6; i++)
            node->ints[i] = ints[i];
        node->floats[0] = alpha;
        node->floats[1] = p;
        node->floats[2] = a.keep_scale;
        if (out->recomputed)
            node->recompute = recompute_context;
    }
    if (weights_out && !(*weights_out = weights_for_caller(tape, op, weights, node)))
        return NULL;
    return out;
}
