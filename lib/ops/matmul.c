/* Batched matrix product through tfm__sgemm (core/gemm.h), forward then backward.
 *
 * The product is C[i] = op(A[i]) @ op(B[i]) for i < batch, with op(A[i]) of
 * m x k and op(B[i]) of k x n; a 2-D side is shared by the batch (stride 0).
 * node->ints holds batch, m, n, k, transpose_a, transpose_b. */
#include <limits.h>

#include "autograd/tape.h"
#include "tfm/ops.h"
#include "core/error.h"
#include "core/gemm.h"

/* dA = G op(B)^T and dB = op(A)^T G, stored transposed when the input was
 * used transposed; beta = 1 because gradients accumulate, which also sums a
 * shared side's gradient over the batch. */
static void matmul_backward(tfm_node *node)
{
    const tfm_tensor *a = node->in[0], *b = node->in[1];
    int64_t batch = node->ints[0];
    int m = (int)node->ints[1], n = (int)node->ints[2], k = (int)node->ints[3];
    int ta = (int)node->ints[4], tb = (int)node->ints[5];
    int64_t sa = a->ndim > 2 ? (int64_t)m * k : 0, sb = b->ndim > 2 ? (int64_t)k * n : 0;
    int lda = ta ? m : k, ldb = tb ? k : n;
    const float *av = tfm__f32(a), *bv = tfm__f32(b), *g = node->out->grad;
    float *ga = tfm__grad_of(a), *gb = tfm__grad_of(b);
    for (int64_t i = 0; i < batch; i++) {
        const float *gi = g + i * m * n, *ai = av + i * sa, *bi = bv + i * sb;
        if (ga && !ta)
            tfm__sgemm(0, !tb, m, k, n, 1.0f, gi, n, bi, ldb, 1.0f, ga + i * sa, k);
        else if (ga)
            tfm__sgemm(tb, 1, k, m, n, 1.0f, bi, ldb, gi, n, 1.0f, ga + i * sa, m);
        if (gb && !tb)
            tfm__sgemm(!ta, 0, k, n, m, 1.0f, ai, lda, gi, n, 1.0f, gb + i * sb, n);
        else if (gb)
            tfm__sgemm(1, ta, n, k, m, 1.0f, gi, n, ai, lda, 1.0f, gb + i * sb, k);
    }
}

/* Shapes are formatted only on failure, keeping the success path cheap. */
static tfm_tensor *fail_shapes(tfm_status status, const char *problem, const tfm_tensor *a,
                               int ta, const tfm_tensor *b, int tb)
{
    char as[64], bs[64];
    tfm__fail(status, "tfm_matmul: %s: a %s%s, b %s%s", problem,
              tfm__shape_str(a, as, sizeof as), ta ? " (transposed)" : "",
              tfm__shape_str(b, bs, sizeof bs), tb ? " (transposed)" : "");
    return NULL;
}

tfm_tensor *tfm_matmul(tfm_tape *tape, const tfm_tensor *a, const tfm_tensor *b,
                       int32_t transpose_a, int32_t transpose_b)
{
    const char *op = "tfm_matmul";
    if (tfm__check_input(op, "a", a, TFM_F32) < 0 ||
        tfm__check_input(op, "b", b, TFM_F32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    int ta = transpose_a != 0, tb = transpose_b != 0;
    if (a->ndim < 2 || b->ndim < 2)
        return fail_shapes(TFM_ERR_SHAPE, "a and b need 2 to 4 dimensions", a, ta, b, tb);
    const int64_t *a2 = a->shape + a->ndim - 2, *b2 = b->shape + b->ndim - 2;
    int64_t m = a2[ta], k = a2[!ta], n = b2[!tb];
    if (b2[tb] != k)
        return fail_shapes(TFM_ERR_SHAPE, "inner dimensions differ", a, ta, b, tb);
    const tfm_tensor *batched = a->ndim > 2 ? a : b;
    if (a->ndim > 2 && b->ndim > 2) {
        int same = a->ndim == b->ndim;
        for (int32_t i = 0; same && i < a->ndim - 2; i++)
            same = a->shape[i] == b->shape[i];
        if (!same)
            return fail_shapes(TFM_ERR_SHAPE, "batch axes differ", a, ta, b, tb);
    }
    int64_t shape[TFM_MAX_DIMS], batch = 1;
    for (int32_t i = 0; i < batched->ndim - 2; i++) {
        shape[i] = batched->shape[i];
        batch *= shape[i];
    }
    shape[batched->ndim - 2] = m;
    shape[batched->ndim - 1] = n;
    /* A batch times a shared B (x @ W^T) is one tall product: a contiguous,
     * untransposed A is already [batch * m, k]. */
    if (b->ndim == 2 && !ta && batch * m <= INT_MAX) {
        m *= batch;
        batch = 1;
    }
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX)
        return fail_shapes(TFM_ERR_SIZE, "a matrix size exceeds the BLAS int range", a, ta,
                           b, tb);
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, batched->ndim, shape);
    if (!out)
        return NULL;
    int64_t sa = a->ndim > 2 ? m * k : 0, sb = b->ndim > 2 ? k * n : 0;
    const float *av = tfm__f32(a), *bv = tfm__f32(b);
    float *o = tfm__f32(out);
    for (int64_t i = 0; i < batch; i++)
        tfm__sgemm(ta, tb, m, n, k, 1.0f, av + i * sa, ta ? m : k, bv + i * sb, tb ? k : n, 0.0f,
                   o + i * m * n, n);
    tfm_node *node;
    if (tfm__record(tape, op, out, matmul_backward, 2, (const tfm_tensor *[]){a, b}, &node) < 0)
        return NULL;
    if (node) {
        const int64_t saved[6] = {batch, m, n, k, ta, tb};
        for (int i = 0; i < 6; i++)
            node->ints[i] = saved[i];
    }
    return out;
}
