/* Embedding lookup: rows of a [V, D] table gathered by int32 ids. */
#include <string.h>

#include "autograd/tape.h"
#include "tfm/ops.h"
#include "core/error.h"

/* Scatter-add: rows looked up more than once accumulate. */
static void embedding_backward(tfm_node *node)
{
    float *gt = tfm__grad_of(node->in[0]);
    const int32_t *ids = node->saved[0];
    const float *g = node->out->grad;
    int64_t n = node->ints[0], dim = node->ints[1];
    for (int64_t i = 0; i < n; i++) {
        float *row = gt + (int64_t)ids[i] * dim;
        const float *gi = g + i * dim;
        for (int64_t d = 0; d < dim; d++)
            row[d] += gi[d];
    }
}

tfm_tensor *tfm_embedding(tfm_tape *tape, const tfm_tensor *table, const tfm_tensor *ids)
{
    const char *op = "tfm_embedding";
    if (tfm__check_input(op, "table", table, TFM_F32) < 0 ||
        tfm__check_input(op, "ids", ids, TFM_I32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    char buf[64];
    if (table->ndim != 2) {
        tfm__fail(TFM_ERR_SHAPE, "%s: table %s must be 2-D [V, D]", op,
                  tfm__shape_str(table, buf, sizeof buf));
        return NULL;
    }
    if (ids->ndim >= TFM_MAX_DIMS) {
        tfm__fail(TFM_ERR_SHAPE, "%s: ids %s has %d axes; the result [ids..., D] "
                  "allows at most %d", op, tfm__shape_str(ids, buf, sizeof buf),
                  (int)ids->ndim, TFM_MAX_DIMS - 1);
        return NULL;
    }
    const int32_t *iv = tfm__i32(ids);
    int64_t vocab = table->shape[0], dim = table->shape[1];
    for (int64_t i = 0; i < ids->numel; i++)
        if (iv[i] < 0 || iv[i] >= vocab) {
            tfm__fail(TFM_ERR_RANGE, "%s: ids%s = %d is outside the table's [0, %lld)",
                      op, tfm__index_str(ids, i, buf, sizeof buf), (int)iv[i], (long long)vocab);
            return NULL;
        }
    int64_t shape[TFM_MAX_DIMS];
    memcpy(shape, ids->shape, (size_t)ids->ndim * sizeof shape[0]);
    shape[ids->ndim] = dim;
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, ids->ndim + 1, shape);
    if (!out)
        return NULL;
    const float *tv = tfm__f32(table);
    float *o = tfm__f32(out);
    for (int64_t i = 0; i < ids->numel; i++)
        memcpy(o + i * dim, tv + (int64_t)iv[i] * dim, (size_t)dim * sizeof(float));
    tfm_node *node;
    if (tfm__record(tape, op, out, embedding_backward, 2,
                    (const tfm_tensor *[]){table, ids}, &node) < 0)
        return NULL;
    if (node) {
        /* Backward scatters by these ids: its own checked copy means a caller
         * refilling the ids tensor before backward cannot make it write out of
         * bounds. */
        int32_t *saved = tfm__scratch(tape, op, (size_t)ids->numel * sizeof *saved);
        if (!saved)
            return NULL;
        memcpy(saved, iv, (size_t)ids->numel * sizeof *saved);
        node->saved[0] = saved;
        node->ints[0] = ids->numel;
        node->ints[1] = dim;
    }
    return out;
}
