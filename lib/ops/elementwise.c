/* Elementwise arithmetic with broadcasting: add, sub, mul, scale, masked_fill.
 * Each forward is followed by its backward. */
#include <string.h>

#include "autograd/tape.h"
#include "tfm/ops.h"
#include "core/broadcast.h"
#include "core/error.h"

enum binary_kind { BINARY_ADD, BINARY_SUB, BINARY_MUL };

static inline float binary_apply(int kind, float x, float y)
{
    switch (kind) {
    case BINARY_ADD: return x + y;
    case BINARY_SUB: return x - y;
    default: return x * y;
    }
}

/* The length with which b repeats along a when a already has the result's
 * shape and b only lacks leading axes (equal shapes, a bias): such pairs run
 * as contiguous loops. 0 for any other broadcast. */
static int64_t repeat_period(const tfm_tensor *a, const tfm_tensor *b, const tfm_broadcast *bc)
{
    int64_t out_numel = 1;
    for (int32_t i = 0; i < TFM_MAX_DIMS; i++)
        out_numel *= bc->shape[i];
    if (a->numel != out_numel || b->ndim > a->ndim)
        return 0;
    int32_t lead = 0;
    while (lead < b->ndim - 1 && b->shape[lead] == 1)
        lead++;
    for (int32_t i = lead; i < b->ndim; i++)
        if (b->shape[i] != a->shape[a->ndim - b->ndim + i])
            return 0;
    return b->numel;
}

static void binary_backward(tfm_node *node)
{
    const tfm_tensor *a = node->in[0], *b = node->in[1];
    const tfm_broadcast *bc = node->saved[0];
    const float *g = node->out->grad;
    const float *av = tfm__f32(a), *bv = tfm__f32(b);
    float *ga = tfm__grad_of(a), *gb = tfm__grad_of(b);
    int kind = (int)node->ints[0];
    int64_t period = node->ints[1];
    if (period) {
        for (int64_t r = 0; r < node->out->numel; r += period) {
            const float *gr = g + r, *ar = av + r;
            if (ga) {
                float *gar = ga + r;
                if (kind == BINARY_MUL)
                    for (int64_t j = 0; j < period; j++)
                        gar[j] += gr[j] * bv[j];
                else
                    for (int64_t j = 0; j < period; j++)
                        gar[j] += gr[j];
            }
            if (gb) {
                if (kind == BINARY_MUL)
                    for (int64_t j = 0; j < period; j++)
                        gb[j] += gr[j] * ar[j];
                else if (kind == BINARY_SUB)
                    for (int64_t j = 0; j < period; j++)
                        gb[j] -= gr[j];
                else
                    for (int64_t j = 0; j < period; j++)
                        gb[j] += gr[j];
            }
        }
        return;
    }
    FOR_EACH_BROADCAST(bc, i, ia, ib, {
        float gi = g[i];
        if (ga)
            ga[ia] += kind == BINARY_MUL ? gi * bv[ib] : gi;
        if (gb)
            gb[ib] += kind == BINARY_MUL ? gi * av[ia] : kind == BINARY_SUB ? -gi : gi;
    });
}

static tfm_tensor *binary(const char *op, int kind, tfm_tape *tape,
                          const tfm_tensor *a, const tfm_tensor *b)
{
    if (tfm__check_input(op, "a", a, TFM_F32) < 0 ||
        tfm__check_input(op, "b", b, TFM_F32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    tfm_broadcast bc;
    if (tfm__broadcast(op, a, b, &bc) < 0)
        return NULL;
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, bc.ndim, tfm__broadcast_shape(&bc));
    if (!out)
        return NULL;
    const float *av = tfm__f32(a), *bv = tfm__f32(b);
    float *o = tfm__f32(out);
    int64_t period = repeat_period(a, b, &bc);
    if (period) {
        for (int64_t r = 0; r < out->numel; r += period)
            for (int64_t j = 0; j < period; j++)
                o[r + j] = binary_apply(kind, av[r + j], bv[j]);
    } else {
        FOR_EACH_BROADCAST(&bc, i, ia, ib, o[i] = binary_apply(kind, av[ia], bv[ib]));
    }
    tfm_node *node;
    if (tfm__record(tape, op, out, binary_backward, 2, (const tfm_tensor *[]){a, b}, &node) < 0)
        return NULL;
    if (node) {
        tfm_broadcast *saved = tfm__scratch(tape, op, sizeof bc);
        if (!saved)
            return NULL;
        *saved = bc;
        node->saved[0] = saved;
        node->ints[0] = kind;
        node->ints[1] = period;
    }
    return out;
}

tfm_tensor *tfm_add(tfm_tape *tape, const tfm_tensor *a, const tfm_tensor *b)
{
    return binary("tfm_add", BINARY_ADD, tape, a, b);
}

tfm_tensor *tfm_sub(tfm_tape *tape, const tfm_tensor *a, const tfm_tensor *b)
{
    return binary("tfm_sub", BINARY_SUB, tape, a, b);
}

tfm_tensor *tfm_mul(tfm_tape *tape, const tfm_tensor *a, const tfm_tensor *b)
{
    return binary("tfm_mul", BINARY_MUL, tape, a, b);
}

/* --- scale ------------------------------------------------------------------ */

static void scale_backward(tfm_node *node)
{
    float *gx = tfm__grad_of(node->in[0]);
    const float *g = node->out->grad;
    float factor = node->floats[0];
    for (int64_t i = 0; i < node->out->numel; i++)
        gx[i] += factor * g[i];
}

tfm_tensor *tfm_scale(tfm_tape *tape, const tfm_tensor *x, float factor)
{
    const char *op = "tfm_scale";
    tfm_tensor *out = tfm__new_like(tape, op, x);
    if (!out)
        return NULL;
    const float *xv = tfm__f32(x);
    float *o = tfm__f32(out);
    for (int64_t i = 0; i < x->numel; i++)
        o[i] = factor * xv[i];
    tfm_node *node;
    if (tfm__record(tape, op, out, scale_backward, 1, (const tfm_tensor *[]){x}, &node) < 0)
        return NULL;
    if (node)
        node->floats[0] = factor;
    return out;
}

/* --- masked_fill ------------------------------------------------------------ */

/* Filled positions get no gradient; the rest pass it through. */
static void masked_fill_backward(tfm_node *node)
{
    const tfm_broadcast *bc = node->saved[0];
    const int32_t *mask = tfm__i32(node->in[1]);
    const float *g = node->out->grad;
    float *gx = tfm__grad_of(node->in[0]);
    FOR_EACH_BROADCAST(bc, i, ix, im, {
        (void)ix;
        if (!mask[im])
            gx[i] += g[i];
    });
}

tfm_tensor *tfm_masked_fill(tfm_tape *tape, const tfm_tensor *x,
                            const tfm_tensor *mask, float value)
{
    const char *op = "tfm_masked_fill";
    if (tfm__check_input(op, "x", x, TFM_F32) < 0 ||
        tfm__check_input(op, "mask", mask, TFM_I32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    tfm_broadcast bc;
    if (tfm__broadcast(op, x, mask, &bc) < 0)
        return NULL;
    if (bc.ndim != x->ndim || memcmp(tfm__broadcast_shape(&bc), x->shape,
                                     (size_t)x->ndim * sizeof x->shape[0]) != 0) {
        char xs[64], ms[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: mask %s does not broadcast to x %s", op,
                  tfm__shape_str(mask, ms, sizeof ms), tfm__shape_str(x, xs, sizeof xs));
        return NULL;
    }
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, x->ndim, x->shape);
    if (!out)
        return NULL;
    const float *xv = tfm__f32(x);
    const int32_t *m = tfm__i32(mask);
    float *o = tfm__f32(out);
    FOR_EACH_BROADCAST(&bc, i, ix, im, o[i] = m[im] ? value : xv[ix]);
    /* the mask is an int32 input: it never requires grad */
    tfm_node *node;
    if (tfm__record(tape, op, out, masked_fill_backward, 2,
                    (const tfm_tensor *[]){x, mask}, &node) < 0)
        return NULL;
    if (node) {
        tfm_broadcast *saved = tfm__scratch(tape, op, sizeof bc);
        if (!saved)
            return NULL;
        *saved = bc;
        node->saved[0] = saved;
    }
    return out;
}
