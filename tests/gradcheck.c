#include "gradcheck.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

gc_options gc_default_options(void)
{
    gc_options o = {.step = 1e-2, .atol = 2e-3, .rtol = 2e-2};
    return o;
}

tfm_tensor *gc_random(int32_t ndim, const int64_t *shape, uint64_t seed)
{
    tfm_rng *rng = tfm_rng_create(seed);
    tfm_tensor *t = tfm_tensor_normal(ndim, shape, 0.0f, 1.0f, rng);
    tfm_rng_free(rng);
    return t;
}

int gc_compare(const double *analytic, const double *numeric, size_t n,
               gc_options options, size_t *worst)
{
    double worst_excess = 0.0;
    int ok = 1;
    *worst = 0;
    for (size_t i = 0; i < n; i++) {
        double excess = fabs(analytic[i] - numeric[i]) -
                        (options.atol + options.rtol * fabs(numeric[i]));
        if (!(excess <= 0.0)) { /* NaN fails too */
            if (ok || excess > worst_excess || isnan(excess)) {
                worst_excess = excess;
                *worst = i;
            }
            ok = 0;
        }
    }
    return ok;
}

/* sum(R * build(inputs)) in double, with recording off. */
static int projected(gc_build_fn build, void *ctx, tfm_tensor *const *inputs,
                     tfm_tape *tape, const float *weights, int64_t n, double *value)
{
    tfm_tape_reset(tape);
    tfm_tape_set_recording(tape, 0);
    tfm_tensor *out = build(tape, inputs, ctx);
    tfm_tape_set_recording(tape, 1);
    if (!out || tfm_tensor_numel(out) != n)
        return 0;
    const float *o = tfm_tensor_data_f32(out);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)weights[i] * (double)o[i];
    *value = sum;
    return 1;
}

int gradcheck(gc_build_fn build, void *ctx, tfm_tensor *const *inputs,
              int n_inputs, gc_options options, char *report, size_t size)
{
    int ok = 0;
    snprintf(report, size, "gradcheck: ok");
    tfm_tape *tape = tfm_tape_create();
    float *weights = NULL;
    double *analytic = NULL, *numeric = NULL;
    tfm_tensor *out = build(tape, inputs, ctx);
    if (!out) {
        snprintf(report, size, "gradcheck: build failed: %s", tfm_last_error());
        goto done;
    }
    int64_t n_out = tfm_tensor_numel(out);
    weights = malloc((size_t)n_out * sizeof *weights);
    tfm_rng *rng = tfm_rng_create(12345);
    for (int64_t i = 0; i < n_out; i++)
        weights[i] = tfm_rng_normal(rng);
    tfm_rng_free(rng);
    for (int k = 0; k < n_inputs; k++)
        tfm_tensor_zero_grad(inputs[k]);
    if (tfm_tape_backward_with_grad(tape, out, weights, n_out) != TFM_OK) {
        snprintf(report, size, "gradcheck: backward failed: %s", tfm_last_error());
        goto done;
    }
    ok = 1;
    for (int k = 0; k < n_inputs && ok; k++) {
        if (!tfm_tensor_requires_grad(inputs[k]))
            continue;
        int64_t n = tfm_tensor_numel(inputs[k]);
        float *x = tfm_tensor_data_f32(inputs[k]);
        const float *g = tfm_tensor_grad_f32(inputs[k]);
        analytic = realloc(analytic, (size_t)n * sizeof *analytic);
        numeric = realloc(numeric, (size_t)n * sizeof *numeric);
        for (int64_t j = 0; j < n; j++) {
            float saved = x[j];
            double plus, minus;
            x[j] = saved + (float)options.step;
            int got = projected(build, ctx, inputs, tape, weights, n_out, &plus);
            x[j] = saved - (float)options.step;
            got = got && projected(build, ctx, inputs, tape, weights, n_out, &minus);
            x[j] = saved;
            if (!got) {
                snprintf(report, size, "gradcheck: rebuild failed: %s", tfm_last_error());
                ok = 0;
                break;
            }
            /* the perturbation actually applied, after rounding to float */
            double h = ((double)(saved + (float)options.step) -
                        (double)(saved - (float)options.step));
            numeric[j] = (plus - minus) / h;
            analytic[j] = g[j];
        }
        size_t worst;
        if (ok && !gc_compare(analytic, numeric, (size_t)n, options, &worst)) {
            snprintf(report, size,
                     "gradcheck: input %d element %zu: analytic %.6g, numeric %.6g", k,
                     worst, analytic[worst], numeric[worst]);
            ok = 0;
        }
    }
done:
    free(weights);
    free(analytic);
    free(numeric);
    tfm_tape_free(tape);
    return ok;
}
