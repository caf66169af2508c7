/* Reductions of all elements to a [1] tensor: sum and mean. */
#include "autograd/tape.h"
#include "tfm/ops.h"
#include "core/error.h"

static void reduce_backward(tfm_node *node)
{
    float *gx = tfm__grad_of(node->in[0]);
    float g = node->out->grad[0] * node->floats[0];
    for (int64_t i = 0; i < node->in[0]->numel; i++)
        gx[i] += g;
}

/* Sums in double: a float accumulator loses digits over millions of terms. */
static tfm_tensor *reduce(const char *op, tfm_tape *tape, const tfm_tensor *x, int mean)
{
    if (tfm__check_input(op, "x", x, TFM_F32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, 1, (const int64_t[]){1});
    if (!out)
        return NULL;
    const float *xv = tfm__f32(x);
    double total = 0.0;
    for (int64_t i = 0; i < x->numel; i++)
        total += xv[i];
    float factor = mean ? 1.0f / (float)x->numel : 1.0f;
    tfm__f32(out)[0] = (float)(mean ? total / (double)x->numel : total);
    tfm_node *node;
    if (tfm__record(tape, op, out, reduce_backward, 1, (const tfm_tensor *[]){x}, &node) < 0)
        return NULL;
    if (node)
        node->floats[0] = factor;
    return out;
}

tfm_tensor *tfm_sum(tfm_tape *tape, const tfm_tensor *x)
{
    return reduce("tfm_sum", tape, x, 0);
}

tfm_tensor *tfm_mean(tfm_tape *tape, const tfm_tensor *x)
{
    return reduce("tfm_mean", tape, x, 1);
}
