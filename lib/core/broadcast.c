#include "core/broadcast.h"

#include "core/error.h"

/* Row-major strides of t aligned to the right of four axes, 0 on size-1 axes
 * that the other operand stretches. */
static void padded(const tfm_tensor *t, int64_t shape[TFM_MAX_DIMS])
{
    int32_t pad = TFM_MAX_DIMS - t->ndim;
    for (int32_t i = 0; i < TFM_MAX_DIMS; i++)
        shape[i] = i < pad ? 1 : t->shape[i - pad];
}

static void strides_for(const int64_t shape[TFM_MAX_DIMS], const int64_t out[TFM_MAX_DIMS],
                        int64_t stride[TFM_MAX_DIMS])
{
    int64_t step = 1;
    for (int32_t i = TFM_MAX_DIMS - 1; i >= 0; i--) {
        stride[i] = (shape[i] == 1 && out[i] != 1) ? 0 : step;
        step *= shape[i];
    }
}

int tfm__broadcast(const char *op, const tfm_tensor *a, const tfm_tensor *b,
                   tfm_broadcast *bc)
{
    int64_t sa[TFM_MAX_DIMS], sb[TFM_MAX_DIMS];
    padded(a, sa);
    padded(b, sb);
    bc->ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int32_t i = 0; i < TFM_MAX_DIMS; i++) {
        if (sa[i] != sb[i] && sa[i] != 1 && sb[i] != 1) {
            char as[64], bs[64];
            tfm__fail(TFM_ERR_SHAPE, "%s: shapes %s and %s do not broadcast", op,
                      tfm__shape_str(a, as, sizeof as), tfm__shape_str(b, bs, sizeof bs));
            return -1;
        }
        bc->shape[i] = sa[i] > sb[i] ? sa[i] : sb[i];
    }
    strides_for(sa, bc->shape, bc->stride_a);
    strides_for(sb, bc->shape, bc->stride_b);
    return 0;
}

const int64_t *tfm__broadcast_shape(const tfm_broadcast *bc)
{
    return bc->shape + (TFM_MAX_DIMS - bc->ndim);
}
