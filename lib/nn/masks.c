/* Attention masks, in either form tfm_softmax takes: int32 keep-masks (1
 * keeps, 0 drops) or float32 additive masks (0 keeps, -inf drops). They are
 * constants, never recorded: tape-owned, or caller-owned when made without
 * a tape. Also the one mask the attention layers read, from an attention
 * mask and a key-padding mask, each of its declared kind. */
#include <math.h>

#include "autograd/tape.h"
#include "core/broadcast.h"
#include "core/error.h"
#include "nn/layer.h"
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
    if (check_form(op, form) < 0)
        return NULL;
    if (length < 1) {
        tfm__fail(TFM_ERR_ARG, "%s: length %lld must be positive", op, (long long)length);
        return NULL;
    }
    tfm_tensor *out = tfm__new_constant(tape, op, form, 2, (const int64_t[]){length, length});
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
    if (tfm__check_input(op, "ids", ids, TFM_I32) < 0 || check_form(op, form) < 0 ||
        tfm__check_pad_id(op, pad_id))
        return NULL;
    if (ids->ndim != 2) {
        char buf[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: ids %s must be 2-D [B, S]", op,
                  tfm__shape_str(ids, buf, sizeof buf));
        return NULL;
    }
    tfm_tensor *out = tfm__new_constant(tape, op, form, 4,
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

tfm_tensor *tfm_mask_from_lengths(tfm_tape *tape, const int64_t *lengths, int64_t rows,
                                  int64_t width, tfm_dtype form)
{
    const char *op = "tfm_mask_from_lengths";
    if (!lengths) {
        tfm__fail(TFM_ERR_NULL, "%s: lengths is NULL", op);
        return NULL;
    }
    if (check_form(op, form) < 0)
        return NULL;
    for (int64_t b = 0; b < rows; b++)
        if (lengths[b] < 0 || lengths[b] > width) {
            tfm__fail(TFM_ERR_RANGE, "%s: lengths[%lld] = %lld is outside 0..width %lld", op,
                      (long long)b, (long long)lengths[b], (long long)width);
            return NULL;
        }
    tfm_tensor *out = tfm__new_constant(tape, op, form, 2, (const int64_t[]){rows, width});
    if (!out)
        return NULL;
    for (int64_t b = 0; b < rows; b++)
        for (int64_t s = 0; s < width; s++) {
            int keep = s < lengths[b];
            if (form == TFM_I32)
                tfm__i32(out)[b * width + s] = keep;
            else
                tfm__f32(out)[b * width + s] = keep ? 0.0f : -INFINITY;
        }
    return out;
}

tfm_tensor *tfm_mask_from_torch_bool(tfm_tape *tape, const uint8_t *masked_out, int32_t ndim,
                                     const int64_t *shape, tfm_dtype form)
{
    const char *op = "tfm_mask_from_torch_bool";
    if (!masked_out) {
        tfm__fail(TFM_ERR_NULL, "%s: masked_out is NULL", op);
        return NULL;
    }
    if (check_form(op, form) < 0 || tfm__checked_numel(op, ndim, shape) < 0)
        return NULL;
    tfm_tensor *out = tfm__new_constant(tape, op, form, ndim, shape);
    if (!out)
        return NULL;
    /* PyTorch's True (nonzero) masks a position out: the opposite of a keep-mask */
    if (form == TFM_I32) {
        int32_t *m = tfm__i32(out);
        for (int64_t i = 0; i < out->numel; i++)
            m[i] = masked_out[i] == 0;
    } else {
        float *m = tfm__f32(out);
        for (int64_t i = 0; i < out->numel; i++)
            m[i] = masked_out[i] ? -INFINITY : 0.0f;
    }
    return out;
}

static const char *form_name(const tfm_tensor *mask)
{
    return mask->dtype == TFM_I32 ? "an int32 keep-mask" : "a float32 additive mask";
}

/* a and b broadcast: keep-masks AND, additive masks add (not recorded). */
static tfm_tensor *combine(tfm_tape *tape, const char *op, const tfm_tensor *a,
                           const tfm_tensor *b)
{
    tfm_broadcast bc;
    if (tfm__broadcast(op, a, b, &bc) < 0)
        return NULL;
    tfm_tensor *out = tfm__new_constant(tape, op, a->dtype, bc.ndim, tfm__broadcast_shape(&bc));
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

tfm_tensor *tfm_mask_combine(tfm_tape *tape, const tfm_tensor *a, const tfm_tensor *b)
{
    const char *op = "tfm_mask_combine";
    if (tfm__check_tensor(op, "a", a) < 0 || tfm__check_tensor(op, "b", b) < 0)
        return NULL;
    if (a->dtype != b->dtype) {
        tfm__fail(TFM_ERR_DTYPE, "%s: a is %s and b is %s; convert one so both are keep-masks "
                  "(int32) or both additive (float32)", op, form_name(a), form_name(b));
        return NULL;
    }
    return combine(tape, op, a, b);
}

const tfm_tensor *tfm__mask_additive(tfm_tape *tape, const char *op, const tfm_tensor *mask)
{
    if (mask->dtype == TFM_F32)
        return mask;
    tfm_tensor *out = tfm__new_constant(tape, op, TFM_F32, mask->ndim, mask->shape);
    if (!out)
        return NULL;
    const int32_t *keep = tfm__i32(mask);
    float *m = tfm__f32(out);
    for (int64_t i = 0; i < mask->numel; i++)
        m[i] = keep[i] ? 0.0f : -INFINITY;
    return out;
}

/* --- what attention reads ------------------------------------------------------- */

static int check_attention_mask(const char *op, const char *name, const tfm_tensor *mask,
                                const int64_t *scores)
{
    int ok = mask->ndim == 2 ? mask->shape[0] == scores[2] && mask->shape[1] == scores[3]
                             : mask->ndim == 4;
    for (int32_t i = 0; ok && mask->ndim == 4 && i < 4; i++)
        ok = mask->shape[i] == 1 || mask->shape[i] == scores[i];
    if (!ok) {
        char ms[64], ss[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: %s %s is not an attention mask for scores %s "
                  "[B, heads, T, S]: it must be [T, S] or 4-D, each axis 1 or the scores' "
                  "(a [B, S] key-padding mask has an argument of its own)", op, name,
                  tfm__shape_str(mask, ms, sizeof ms), tfm__dims_str(scores, 4, ss, sizeof ss));
        return -1;
    }
    return 0;
}

static int check_key_padding(const char *op, const char *name, const tfm_tensor *padding,
                             const int64_t *scores)
{
    if (padding->ndim != 2 || padding->shape[0] != scores[0] || padding->shape[1] != scores[3]) {
        char ps[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: %s %s must be [B, S] = [%lld, %lld]", op, name,
                  tfm__shape_str(padding, ps, sizeof ps), (long long)scores[0],
                  (long long)scores[3]);
        return -1;
    }
    return 0;
}

int tfm__attention_mask(tfm_tape *tape, const char *op, const tfm__masks *given,
                        const int64_t *scores, const tfm_tensor **out)
{
    const tfm_tensor *mask = given->mask, *padding = given->key_padding;
    const char *mask_name = given->mask_name, *padding_name = given->padding_name;
    *out = NULL;
    if ((mask && (tfm__check_tensor(op, mask_name, mask) < 0 ||
                  check_attention_mask(op, mask_name, mask, scores) < 0)) ||
        (padding && (tfm__check_tensor(op, padding_name, padding) < 0 ||
                     check_key_padding(op, padding_name, padding, scores) < 0)))
        return -1;
    if (!padding) {
        *out = mask;
        return 0;
    }
    if (mask && mask->dtype != padding->dtype) {
        tfm__fail(TFM_ERR_DTYPE, "%s: %s is %s and %s is %s; give both in one form", op,
                  mask_name, form_name(mask), padding_name, form_name(padding));
        return -1;
    }
    /* each batch row's keys, for every head and query */
    tfm_tensor *keys = tfm_reshape(tape, padding, 4,
                                   (const int64_t[]){scores[0], 1, 1, scores[3]});
    if (keys && mask)
        /* a float mask may want its gradient: added as an op */
        keys = mask->dtype == TFM_I32 ? combine(tape, op, mask, keys) : tfm_add(tape, mask, keys);
    *out = keys;
    return keys ? 0 : -1;
}
