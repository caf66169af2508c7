/* Cross-entropy loss over the last axis, fused with its log-softmax, as
 * torch.nn.functional.cross_entropy(reduction='mean' or 'sum') with
 * ignore_index and label_smoothing. */
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "tfm/ops.h"
#include "core/cpu.h"
#include "core/error.h"
#include "core/fastmath.h"
#include "ops/softmax.h"

/* dlogits = (softmax - ((1 - eps) * onehot + eps / C)) * g * scale (1 / count
 * for the mean, 1 for the sum), with the softmax rebuilt from the saved
 * log-sum-exp; ignored rows (target -1 in the saved copy) get nothing. */
static TFM__KERNEL(cross_entropy_backward, (tfm_node *node), (node))
{
    const float *x = tfm__f32(node->in[0]);
    float *gx = tfm__grad_of(node->in[0]);
    const float *lse = node->saved[0];
    const int32_t *targets = node->saved[1];
    int64_t rows = node->ints[0], classes = node->ints[1];
    float eps = node->floats[0];
    float scale = node->out->grad[0] * node->floats[1];
    float on = scale * (1.0f - eps), off = scale * eps / (float)classes;
    for (int64_t r = 0; r < rows; r++) {
        if (targets[r] < 0)
            continue;
        const float *xr = x + r * classes;
        float *gr = gx + r * classes;
#pragma omp simd
        for (int64_t c = 0; c < classes; c++)
            gr[c] += scale * tfm__expf(xr[c] - lse[r]) - off;
        gr[targets[r]] -= on;
    }
}

static tfm_tensor *cross_entropy(const char *op, tfm_tape *tape, const tfm_tensor *logits,
                                 const tfm_tensor *targets, int32_t ignore_index,
                                 float label_smoothing, tfm_reduction reduction,
                                 int64_t *counted)
{
    if (tfm__check_input(op, "logits", logits, TFM_F32) < 0 ||
        tfm__check_input(op, "targets", targets, TFM_I32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    char s1[64], s2[64];
    if (logits->ndim < 2 || targets->ndim != logits->ndim - 1 ||
        memcmp(targets->shape, logits->shape, (size_t)targets->ndim * sizeof targets->shape[0])) {
        tfm__fail(TFM_ERR_SHAPE, "%s: logits %s and targets %s do not fit: logits are "
                  "[..., C] with at least one axis before C, targets [...]", op,
                  tfm__shape_str(logits, s1, sizeof s1), tfm__shape_str(targets, s2, sizeof s2));
        return NULL;
    }
    if (reduction != TFM_REDUCTION_MEAN && reduction != TFM_REDUCTION_SUM) {
        tfm__fail(TFM_ERR_ARG, "%s: reduction %d is not MEAN (0) or SUM (1)", op,
                  (int)reduction);
        return NULL;
    }
    if (!(label_smoothing >= 0.0f && label_smoothing < 1.0f)) {
        tfm__fail(TFM_ERR_ARG, "%s: label_smoothing %g is outside [0, 1)", op,
                  (double)label_smoothing);
        return NULL;
    }
    int64_t rows = targets->numel, classes = logits->shape[logits->ndim - 1];
    const int32_t *tv = tfm__i32(targets);
    int64_t count = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (tv[r] == ignore_index)
            continue;
        if (tv[r] < 0 || tv[r] >= classes) {
            tfm__fail(TFM_ERR_RANGE, "%s: targets%s = %d is outside [0, %lld) and is not "
                      "ignore_index %d", op, tfm__index_str(targets, r, s1, sizeof s1),
                      (int)tv[r], (long long)classes, (int)ignore_index);
            return NULL;
        }
        count++;
    }
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, 1, (const int64_t[]){1});
    if (!out)
        return NULL;
    tfm_node *node;
    if (tfm__record(tape, op, out, cross_entropy_backward, 2,
                    (const tfm_tensor *[]){logits, targets}, &node) < 0)
        return NULL;
    float *lse = NULL;
    int32_t *saved_targets = NULL;
    if (node) {
        /* Targets are copied (ignored rows as -1) so backward neither needs
         * ignore_index nor trusts a targets tensor the caller may refill. */
        lse = tfm__scratch(tape, op, (size_t)rows * sizeof *lse);
        saved_targets = lse ? tfm__scratch(tape, op, (size_t)rows * sizeof *saved_targets) : NULL;
        if (!saved_targets)
            return NULL;
        node->saved[0] = lse;
        node->saved[1] = saved_targets;
        node->ints[0] = rows;
        node->ints[1] = classes;
        node->floats[0] = label_smoothing;
        node->floats[1] = reduction == TFM_REDUCTION_SUM ? 1.0f
                          : count                        ? 1.0f / (float)count
                                                         : 0.0f;
    }
    const float *x = tfm__f32(logits);
    double eps = label_smoothing, total = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        int32_t t = tv[r];
        if (saved_targets)
            saved_targets[r] = t == ignore_index ? -1 : t;
        if (t == ignore_index)
            continue;
        const float *xr = x + r * classes;
        double sum_x;
        double row_lse = tfm__log_sum_exp(xr, classes, &sum_x);
        /* -log p[c] = lse - x[c], averaged over c for the smoothing term */
        total += (1.0 - eps) * (row_lse - xr[t]) + eps * (row_lse - sum_x / (double)classes);
        if (lse)
            lse[r] = (float)row_lse;
    }
    tfm__f32(out)[0] = reduction == TFM_REDUCTION_SUM ? (float)total
                       : count                        ? (float)(total / (double)count)
                                                      : 0.0f;
    if (counted)
        *counted = count;
    return out;
}

tfm_tensor *tfm_cross_entropy(tfm_tape *tape, const tfm_tensor *logits,
                              const tfm_tensor *targets, int32_t ignore_index,
                              float label_smoothing)
{
    return cross_entropy("tfm_cross_entropy", tape, logits, targets, ignore_index,
                         label_smoothing, TFM_REDUCTION_MEAN, NULL);
}

tfm_tensor *tfm_cross_entropy_reduced(tfm_tape *tape, const tfm_tensor *logits,
                                      const tfm_tensor *targets, int32_t ignore_index,
                                      float label_smoothing, tfm_reduction reduction,
                                      int64_t *counted)
{
    return cross_entropy("tfm_cross_entropy_reduced", tape, logits, targets, ignore_index,
                         label_smoothing, reduction, counted);
}
