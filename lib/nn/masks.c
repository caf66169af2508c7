/* Attention masks, in either form tfm_softmax takes: int32 keep-masks (1
 * keeps, 0 drops) or float32 additive masks (0 keeps, -inf drops). They are
 * tape-owned constants and never recorded. */
#include <math.h>

#include "autograd/tape.h"
#include "core/broadcast.h"
#include "core/error.h"
#include "tfm/nn.h"

static int check_form(const char *op, tfm_dtype form)
{
    if (form != TFM_I32 && form != TFM_F32) {
        tfm__fail(TFM_ERR_ARG, "%s: form %d is neither TFM_I32 (keep-mask) nor TFM_F32 "
                  "(additive mask)", op, (int)form);
        return -1;
    }
    return 0;
}

tfm_tensor *tfm_mask_causal(tfm_tape *tape, int64_t length, tfm_dtype form)
{
    const char *op = "tfm_mask_causal";
    if (tfm__check_tape(op, tape) < 0 || check_form(op, form) < 0)
        return NULL;
    if (length < 1) {
        tfm__fail(TFM_ERR_ARG, "%s: length %lld must be positive", op, (long long)length);
        return NULL;
    }
    tfm_tensor *out = tfm__new_output(tape, op, form, 2, (const int64_t[]){length, length});
    if (!out)
        return NULL;
    if (form == TFM_I32) {
        int32_t *m = tfm__i32(out);
        for (int64_t i = 0; i < length; i++)
            for (int64_t j = 0; j < length; j++)
                m[i * length + j] = j <= i;
    } else {
        float *m = tfm__f32(out);
        for (int64_t i = 0; i < length; i++)
            for (int64_t j = 0; j < length; j++)
                m[i * length + j] = j <= i ? 0.0f : -INFINITY;
    }
    return out;
}

tfm_tensor *tfm_mask_padding(tfm_tape *tape, const tfm_tensor *ids, int32_t pad_id,
                             tfm_dtype form)
{
    const char *op = "tfm_mask_padding";
    if (tfm__check_input(op, "ids", ids, TFM_I32) < 0 || tfm__check_tape(op, tape) < 0 ||
        check_form(op, form) < 0)
        return NULL;
    if (ids->ndim != 2) {
        char buf[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: ids %s must be 2-D [B, S]", op,
                  tfm__shape_str(ids, buf, sizeof buf));
        return NULL;
    }
    tfm_tensor *out = tfm__new_output(tape, op, form, 4,
                                      (const int64_t[]){ids->shape[0], 1, 1, ids->shape[1]});
    if (!out)
        return NULL;
    const int32_t *iv = tfm__i32(ids);
    if (form == TFM_I32) {
        int32_t *m = tfm__i32(out);
        for (int64_t i = 0; i < ids->numel; i++)
            m[i] = iv[i] != pad_id;
    } else {
        float *m = tfm__f32(out);
        for (int64_t i = 0; i < ids->numel; i++)
            m[i] = iv[i] != pad_id ? 0.0f : -INFINITY;
    }
    return out;
}

tfm_tensor *tfm_mask_combine(tfm_tape *tape, const tfm_tensor *a, const tfm_tensor *b)
{
    const char *op = "tfm_mask_combine";
    if (!a || !b) {
        tfm__fail_null_input(op, a ? "b" : "a");
        return NULL;
    }
    if (tfm__check_tape(op, tape) < 0)
        return NULL;
    if (a->dtype != b->dtype) {
        tfm__fail(TFM_ERR_DTYPE, "%s: a is %s and b is %s; convert one so both are keep-masks "
                  "(int32) or both additive (float32)", op,
                  a->dtype == TFM_I32 ? "an int32 keep-mask" : "a float32 additive mask",
                  b->dtype == TFM_I32 ? "an int32 keep-mask" : "a float32 additive mask");
        return NULL;
    }
    tfm_broadcast bc;
    if (tfm__broadcast(op, a, b, &bc) < 0)
        return NULL;
    tfm_tensor *out = tfm__new_output(tape, op, a->dtype, bc.ndim, tfm__broadcast_shape(&bc));
    if (!out)
        return NULL;
    if (a->dtype == TFM_I32) {
        const int32_t *av = tfm__i32(a), *bv = tfm__i32(b);
        int32_t *m = tfm__i32(out);
        FOR_EACH_BROADCAST(&bc, i, ia, ib, m[i] = av[ia] && bv[ib]);
    } else {
        const float *av = tfm__f32(a), *bv = tfm__f32(b);
        float *m = tfm__f32(out);
        FOR_EACH_BROADCAST(&bc, i, ia, ib, m[i] = av[ia] + bv[ib]);
    }
    return out;
}
