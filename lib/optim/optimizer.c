/* SGD with momentum, Adam and AdamW over a parameter store, following
 * torch.optim 1.13 (single-tensor path) operation by operation: float32
 * element updates with coefficients computed in double, as PyTorch computes
 * them in Python floats. The state is one block: [m | v] for Adam and AdamW,
 * the momentum buffer for SGD with momentum, nothing for plain SGD. */
#include "tfm/optim.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/options.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "optim/optimizer.h"

struct tfm_optimizer {
    tfm_params *params;
    tfm_optimizer_options options;  /* resolved and validated; lr may be set later */
    int64_t numel;                  /* of the store at create */
    int64_t count;                  /* parameter tensors at create */
    int64_t steps;                  /* taken so far */
    float last_grad_norm;
    float *weight_decay;            /* per parameter tensor, from options.weight_decay */
    float *state;                   /* one block of state_floats() floats */
};

static const char *kind_name(tfm_optimizer_kind kind)
{
    switch (kind) {
    case TFM_OPTIMIZER_SGD: return "SGD";
    case TFM_OPTIMIZER_ADAM: return "Adam";
    case TFM_OPTIMIZER_ADAMW: return "AdamW";
    default: return "unknown";
    }
}

void tfm_optimizer_options_init_sized(tfm_optimizer_options *o, tfm_optimizer_kind kind,
                                      uint32_t struct_size)
{
    tfm_optimizer_options d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.kind = kind;
    d.lr = kind == TFM_OPTIMIZER_SGD ? 1e-2f : 1e-3f;
    d.beta1 = 0.9f;
    d.beta2 = 0.999f;
    d.eps = 1e-8f;
    d.weight_decay = kind == TFM_OPTIMIZER_ADAMW ? 1e-2f : 0.0f;
    d.schedule = TFM_SCHEDULE_CONSTANT;
    d.step_size = 1;       /* StepLR has no default; gamma's is 0.1 */
    d.gamma = 0.1f;
    d.warmup_steps = 4000; /* "Attention is all you need" */
    tfm__init_options(o, struct_size, &d, sizeof d);
}

/* The caller's options over the defaults for its kind (tfm__read_options:
 * callers built against an older, shorter struct keep working). */
static tfm_status resolve_options(const char *op, const tfm_optimizer_options *in,
                                  tfm_optimizer_options *out)
{
    size_t kind_end = offsetof(tfm_optimizer_options, kind) + sizeof in->kind;
    tfm_optimizer_options_init(out, in->struct_size >= kind_end ? in->kind : TFM_OPTIMIZER_SGD);
    if (tfm__read_options(op, "tfm_optimizer_options_init", in, out, sizeof *out, kind_end) < 0)
        return tfm_last_status();
    return TFM_OK;
}

static int nonnegative(float x) { return isfinite(x) && x >= 0.0f; }
/* A base learning rate, as the header says: 0 would train nothing */
static int positive_rate(float lr) { return isfinite(lr) && lr > 0.0f; }

static tfm_status validate_options(const char *op, const tfm_optimizer_options *o)
{
    if (o->kind != TFM_OPTIMIZER_SGD && o->kind != TFM_OPTIMIZER_ADAM &&
        o->kind != TFM_OPTIMIZER_ADAMW)
        return tfm__fail(TFM_ERR_ARG, "%s: kind %d is not SGD (0), Adam (1) or AdamW (2)",
                         op, (int)o->kind);
    if (!positive_rate(o->lr))
        return tfm__fail(TFM_ERR_ARG, "%s: lr %g must be finite and > 0", op, (double)o->lr);
    const struct { const char *name; float value; } fields[] = {
        {"eps", o->eps}, {"weight_decay", o->weight_decay},
        {"momentum", o->momentum}, {"clip_norm", o->clip_norm},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!nonnegative(fields[i].value))
            return tfm__fail(TFM_ERR_ARG, "%s: %s %g must be finite and >= 0", op,
                             fields[i].name, (double)fields[i].value);
    if (!(o->beta1 >= 0.0f && o->beta1 < 1.0f))
        return tfm__fail(TFM_ERR_ARG, "%s: beta1 %g is outside [0, 1)", op, (double)o->beta1);
    if (!(o->beta2 >= 0.0f && o->beta2 < 1.0f))
        return tfm__fail(TFM_ERR_ARG, "%s: beta2 %g is outside [0, 1)", op, (double)o->beta2);
    switch (o->schedule) {
    case TFM_SCHEDULE_CONSTANT:
        break;
    case TFM_SCHEDULE_STEP:
        if (o->step_size < 1)
            return tfm__fail(TFM_ERR_ARG, "%s: step_size %lld must be >= 1", op,
                             (long long)o->step_size);
        if (!nonnegative(o->gamma))
            return tfm__fail(TFM_ERR_ARG, "%s: gamma %g must be finite and >= 0", op,
                             (double)o->gamma);
        break;
    case TFM_SCHEDULE_WARMUP_INVSQRT:
        if (o->warmup_steps < 1)
            return tfm__fail(TFM_ERR_ARG, "%s: warmup_steps %lld must be >= 1", op,
                             (long long)o->warmup_steps);
        break;
    case TFM_SCHEDULE_WARMUP_COSINE:
        if (o->warmup_steps < 0 || o->total_steps <= o->warmup_steps)
            return tfm__fail(TFM_ERR_ARG,
                             "%s: warmup_steps %lld and total_steps %lld: the cosine "
                             "schedule needs 0 <= warmup_steps < total_steps", op,
                             (long long)o->warmup_steps, (long long)o->total_steps);
        break;
    default:
        return tfm__fail(TFM_ERR_ARG,
                         "%s: schedule %d is not CONSTANT (0), STEP (1), "
                         "WARMUP_INVSQRT (2) or WARMUP_COSINE (3)", op, (int)o->schedule);
    }
    return TFM_OK;
}

/* Floats of state per scalar parameter. */
static int64_t state_per_param(const tfm_optimizer_options *o)
{
    if (o->kind != TFM_OPTIMIZER_SGD)
        return 2;
    return o->momentum > 0.0f ? 1 : 0;
}

tfm_optimizer *tfm_optimizer_create(tfm_params *params, const tfm_optimizer_options *options)
{
    const char *op = "tfm_optimizer_create";
    if (!params || !options) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, params ? "options" : "params");
        return NULL;
    }
    tfm_optimizer_options resolved;
    if (resolve_options(op, options, &resolved) != TFM_OK ||
        validate_options(op, &resolved) != TFM_OK)
        return NULL;
    int64_t numel = tfm_params_numel(params);
    if (numel == 0) {
        tfm__fail(TFM_ERR_ARG, "%s: the parameter store is empty", op);
        return NULL;
    }
    tfm_optimizer *o = calloc(1, sizeof *o);
    int64_t floats = state_per_param(&resolved) * numel, count = tfm_params_count(params);
    float *state = floats ? calloc((size_t)floats, sizeof(float)) : NULL;
    float *weight_decay = malloc((size_t)count * sizeof(float));
    if (!o || (floats && !state) || !weight_decay) {
        free(o);
        free(state);
        free(weight_decay);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld floats of state", op,
                  (long long)floats);
        return NULL;
    }
    for (int64_t i = 0; i < count; i++)
        weight_decay[i] = resolved.weight_decay;
    o->params = params;
    o->options = resolved;
    o->numel = numel;
    o->count = count;
    o->weight_decay = weight_decay;
    o->state = state;
    return o;
}

void tfm_optimizer_free(tfm_optimizer *o)
{
    if (!o)
        return;
    free(o->state);
    free(o->weight_decay);
    free(o);
}

tfm_status tfm_optimizer_set_lr(tfm_optimizer *o, float lr)
{
    const char *op = "tfm_optimizer_set_lr";
    if (!o)
        return tfm__fail(TFM_ERR_NULL, "%s: optimizer is NULL", op);
    if (!positive_rate(lr))
        return tfm__fail(TFM_ERR_ARG, "%s: lr %g must be finite and > 0", op, (double)lr);
    o->options.lr = lr;
    return TFM_OK;
}

tfm_status tfm_optimizer_set_weight_decay(tfm_optimizer *o, int64_t index, float weight_decay)
{
    const char *op = "tfm_optimizer_set_weight_decay";
    if (!o)
        return tfm__fail(TFM_ERR_NULL, "%s: optimizer is NULL", op);
    if (index < -1 || index >= o->count)
        return tfm__fail(TFM_ERR_RANGE, "%s: index %lld is outside [-1, %lld)", op,
                         (long long)index, (long long)o->count);
    if (!nonnegative(weight_decay))
        return tfm__fail(TFM_ERR_ARG, "%s: weight_decay %g must be finite and >= 0", op,
                         (double)weight_decay);
    for (int64_t i = index < 0 ? 0 : index; i < (index < 0 ? o->count : index + 1); i++)
        o->weight_decay[i] = weight_decay;
    return TFM_OK;
}

float tfm_optimizer_weight_decay(const tfm_optimizer *o, int64_t index)
{
    const char *op = "tfm_optimizer_weight_decay";
    if (!o) {
        tfm__fail(TFM_ERR_NULL, "%s: optimizer is NULL", op);
        return -1.0f;
    }
    if (index < 0 || index >= o->count) {
        tfm__fail(TFM_ERR_RANGE, "%s: index %lld is outside [0, %lld)", op, (long long)index,
                  (long long)o->count);
        return -1.0f;
    }
    return o->weight_decay[index];
}

tfm_status tfm_optimizer_no_decay_for_vectors(tfm_optimizer *o)
{
    if (!o)
        return tfm__fail(TFM_ERR_NULL, "tfm_optimizer_no_decay_for_vectors: optimizer is NULL");
    for (int64_t i = 0; i < o->count; i++)
        if (tfm_params_at(o->params, i)->ndim < 2)
            o->weight_decay[i] = 0.0f;
    return TFM_OK;
}

tfm_status tfm_optimizer_zero_grad(tfm_optimizer *o)
{
    if (!o)
        return tfm__fail(TFM_ERR_NULL, "tfm_optimizer_zero_grad: optimizer is NULL");
    return tfm_params_zero_grad(o->params);
}

/* The learning rate of the step taken after `done` steps. STEP matches
 * torch's StepLR stepped after every optimizer step (the first step uses
 * the base rate); the warmups count the step being taken from 1. */
static double lr_after(const tfm_optimizer_options *o, int64_t done)
{
    double lr = o->lr;
    switch (o->schedule) {
    case TFM_SCHEDULE_STEP:
        return lr * pow(o->gamma, (double)(done / o->step_size));
    case TFM_SCHEDULE_WARMUP_INVSQRT: {
        double s = (double)done + 1.0, w = (double)o->warmup_steps;
        return lr * fmin(s / w, sqrt(w / s));
    }
    case TFM_SCHEDULE_WARMUP_COSINE: {
        int64_t w = o->warmup_steps;
        if (done < w)
            return lr * (double)(done + 1) / (double)w;
        const double pi = 3.14159265358979323846; /* C11 has no M_PI */
        double progress = fmin(1.0, (double)(done - w) / (double)(o->total_steps - w));
        return lr * 0.5 * (1.0 + cos(pi * progress));
    }
    default:
        return lr;
    }
}

/* Per-step coefficients, rounded to float as torch rounds its Python
 * scalars when it hands them to a float32 kernel. */
typedef struct coefficients {
    float lr, weight_decay, momentum;             /* SGD */
    float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
    float decay;      /* AdamW's 1 - lr * weight_decay; 1 for Adam */
    float step_size;  /* lr / (1 - beta1^t) */
    float bias2_sqrt; /* sqrt(1 - beta2^t) */
} coefficients;

static coefficients coefficients_for(const tfm_optimizer *o, float weight_decay)
{
    const tfm_optimizer_options *op = &o->options;
    double lr = lr_after(op, o->steps), t = (double)(o->steps + 1);
    coefficients c = {
        .lr = (float)lr,
        .weight_decay = weight_decay,
        .momentum = op->momentum,
        .beta1 = op->beta1,
        .one_minus_beta1 = (float)(1.0 - op->beta1),
        .beta2 = op->beta2,
        .one_minus_beta2 = (float)(1.0 - op->beta2),
        .eps = op->eps,
        .decay = 1.0f,
        .step_size = (float)(lr / (1.0 - pow(op->beta1, t))),
        .bias2_sqrt = (float)sqrt(1.0 - pow(op->beta2, t)),
    };
    if (op->kind == TFM_OPTIMIZER_ADAMW)
        c.decay = (float)(1.0 - lr * weight_decay);
    return c;
}

/* The element loops. The flags are constants at every call site, so each
 * variant compiles to its own branch-free loop. Operation order follows
 * torch: m.mul_(b1).add_(g, 1-b1); v.mul_(b2).addcmul_(g, g, 1-b2);
 * p.addcdiv_(m, sqrt(v) / sqrt(bc2) + eps, -step_size). */
TFM__INLINE void adam_run(float *restrict p, const float *restrict g, float *restrict m,
                          float *restrict v, int64_t n, const coefficients *c, int l2)
{
    const coefficients k = *c;
    for (int64_t i = 0; i < n; i++) {
        float pi = p[i] * k.decay;
        float gi = l2 ? g[i] + k.weight_decay * pi : g[i];
        float mi = m[i] * k.beta1 + k.one_minus_beta1 * gi;
        float vi = v[i] * k.beta2 + k.one_minus_beta2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - k.step_size * mi / (sqrtf(vi) / k.bias2_sqrt + k.eps);
    }
}

/* torch keeps no buffer before the first step and starts it as a copy of
 * the gradient; a zeroed buffer gives exactly that, 0 * momentum + g == g. */
TFM__INLINE void sgd_run(float *restrict p, const float *restrict g, float *restrict buf,
                         int64_t n, const coefficients *c, int l2, int with_momentum)
{
    const coefficients k = *c;
    for (int64_t i = 0; i < n; i++) {
        float d = l2 ? g[i] + k.weight_decay * p[i] : g[i];
        if (with_momentum) {
            d = buf[i] * k.momentum + d;
            buf[i] = d;
        }
        p[i] = p[i] - k.lr * d;
    }
}

/* Updates the scalars [begin, end) of the store. */
TFM__INLINE void update_part(tfm_optimizer *o, float *values, const float *grads, int64_t begin,
                             int64_t end, const coefficients *c)
{
    float *p = values + begin;
    const float *g = grads + begin;
    int64_t n = end - begin;
    int l2 = c->weight_decay > 0.0f;
    switch (o->options.kind) {
    case TFM_OPTIMIZER_SGD: {
        float *buf = o->state ? o->state + begin : NULL;
        if (buf && l2)
            sgd_run(p, g, buf, n, c, 1, 1);
        else if (buf)
            sgd_run(p, g, buf, n, c, 0, 1);
        else if (l2)
            sgd_run(p, g, NULL, n, c, 1, 0);
        else
            sgd_run(p, g, NULL, n, c, 0, 0);
        break;
    }
    case TFM_OPTIMIZER_ADAM:
        if (l2)
            adam_run(p, g, o->state + begin, o->state + o->numel + begin, n, c, 1);
        else
            adam_run(p, g, o->state + begin, o->state + o->numel + begin, n, c, 0);
        break;
    default: /* AdamW: the decay is in the coefficients, not the gradient */
        adam_run(p, g, o->state + begin, o->state + o->numel + begin, n, c, 0);
        break;
    }
}

typedef struct update_job {
    tfm_optimizer *o;
    float *values;
    const float *grads;
    int64_t first;
    const coefficients *c;
} update_job;

static TFM__KERNEL(update_part_of_range, (void *ctx, int64_t begin, int64_t end, int worker),
                   (ctx, begin, end, worker))
{
    (void)worker;
    const update_job *j = ctx;
    update_part(j->o, j->values, j->grads, j->first + begin, j->first + end, j->c);
}

/* Every element updates alone: the range is split among libtfm's threads. */
static void update_range(tfm_optimizer *o, float *values, const float *grads, int64_t begin,
                         int64_t end, const coefficients *c)
{
    update_job j = {o, values, grads, begin, c};
    tfm__parallel_for(end - begin, tfm__workers_for(end - begin), update_part_of_range, &j);
}

/* Names the first non-finite gradient, for the refused step's message. */
static tfm_status refuse_non_finite(tfm_optimizer *o, const float *grads)
{
    int64_t count = tfm_params_count(o->params);
    for (int64_t i = 0; i < count; i++) {
        const tfm_tensor *t = tfm_params_at(o->params, i);
        const float *g = grads + (tfm__f32(t) - tfm_params_values(o->params));
        for (int64_t j = 0; j < t->numel; j++)
            if (!isfinite(g[j])) {
                char where[96];
                return tfm__fail(TFM_ERR_NUMERIC,
                                 "tfm_optimizer_step: the gradient of \"%s\" is %g at %s; "
                                 "step %lld refused, nothing changed",
                                 tfm_params_name(o->params, i), (double)g[j],
                                 tfm__index_str(t, j, where, sizeof where),
                                 (long long)(o->steps + 1));
            }
    }
    return tfm__fail(TFM_ERR_NUMERIC, "tfm_optimizer_step: the gradient norm is not finite");
}

tfm_status tfm_optimizer_step(tfm_optimizer *o)
{
    const char *op = "tfm_optimizer_step";
    if (!o)
        return tfm__fail(TFM_ERR_NULL, "%s: optimizer is NULL", op);
    tfm_params *params = o->params;
    if (tfm_params_numel(params) != o->numel)
        return tfm__fail(TFM_ERR_STATE,
                         "%s: the store has %lld scalars, %lld when the optimizer "
                         "was created; parameters must not be added afterwards", op,
                         (long long)tfm_params_numel(params), (long long)o->numel);
    float *values = tfm_params_values(params), *grads = tfm_params_grads(params);
    /* One pass measures the norm, finds NaN/Inf before anything changes and
     * clips; without clipping the limit is infinite and it only measures. */
    float max_norm = o->options.clip_norm > 0.0f ? o->options.clip_norm : INFINITY;
    float norm = 0.0f;
    tfm_status s = tfm_params_clip_grad_norm(params, max_norm, &norm);
    if (s == TFM_ERR_NUMERIC)
        return refuse_non_finite(o, grads);
    if (s != TFM_OK)
        return s;

    /* Runs of consecutive trainable tensors of one weight decay, so a store
     * where everything trains alike is one loop over the whole block. */
    int64_t begin = -1;
    float decay = 0.0f;
    for (int64_t i = 0; i <= o->count; i++) {
        const tfm_tensor *t = i < o->count ? tfm_params_at(params, i) : NULL;
        int64_t offset = t ? tfm__f32(t) - values : o->numel;
        int trains = t && t->requires_grad;
        if (begin >= 0 && (!trains || o->weight_decay[i] != decay)) {
            coefficients c = coefficients_for(o, decay);
            update_range(o, values, grads, begin, offset, &c);
            begin = -1;
        }
        if (trains && begin < 0) {
            begin = offset;
            decay = o->weight_decay[i];
        }
    }
    o->steps++;
    o->last_grad_norm = norm;
    return TFM_OK;
}

int64_t tfm_optimizer_step_count(const tfm_optimizer *o)
{
    if (!o) {
        tfm__fail(TFM_ERR_NULL, "tfm_optimizer_step_count: optimizer is NULL");
        return -1;
    }
    return o->steps;
}

float tfm_optimizer_lr(const tfm_optimizer *o)
{
    if (!o) {
        tfm__fail(TFM_ERR_NULL, "tfm_optimizer_lr: optimizer is NULL");
        return -1.0f;
    }
    return (float)lr_after(&o->options, o->steps);
}

float tfm_optimizer_last_grad_norm(const tfm_optimizer *o)
{
    if (!o) {
        tfm__fail(TFM_ERR_NULL, "tfm_optimizer_last_grad_norm: optimizer is NULL");
        return -1.0f;
    }
    return o->last_grad_norm;
}

/* --- save and load ---------------------------------------------------------
 * The state is "kind" (int32 [1]), "step" and "numel" (int32 [2]: the low
 * and high 32 bits of the int64), "lr" (float32 [1], the base rate, which
 * tfm_optimizer_set_lr may have changed), "weight_decay" (float32, one per
 * parameter tensor) and the state blocks as float32 [numel]: "m" and "v"
 * (Adam, AdamW) or "momentum" (SGD with momentum). A file of its own holds
 * these names; a training state holds them under a prefix. Files from
 * libtfm 0.1, without "lr" and "weight_decay", load and keep the
 * optimizer's own. */

/* Step counts past this are forgeries: no run takes 2^53 steps, and the
 * schedules compute with the count as a double. */
#define MAX_STEPS ((int64_t)1 << 53)

static void split_i64(int64_t value, int32_t halves[2])
{
    uint64_t u = (uint64_t)value;
    uint32_t lo = (uint32_t)u, hi = (uint32_t)(u >> 32);
    memcpy(&halves[0], &lo, sizeof lo);
    memcpy(&halves[1], &hi, sizeof hi);
}

static int64_t join_i64(const int32_t halves[2])
{
    uint32_t lo, hi;
    memcpy(&lo, &halves[0], sizeof lo);
    memcpy(&hi, &halves[1], sizeof hi);
    uint64_t u = (uint64_t)hi << 32 | lo;
    int64_t value;
    memcpy(&value, &u, sizeof value);
    return value;
}

/* The names of the state blocks this optimizer keeps and where they are. */
static int state_blocks(const tfm_optimizer *o, const char *names[2], float *blocks[2])
{
    if (o->options.kind != TFM_OPTIMIZER_SGD) {
        names[0] = "m";
        names[1] = "v";
        blocks[0] = o->state;
        blocks[1] = o->state + o->numel;
        return 2;
    }
    names[0] = "momentum";
    blocks[0] = o->state;
    return o->state ? 1 : 0;
}

static void add_header(tfm__optimizer_record *r, const char *prefix, const char *name,
                       tfm_dtype dtype, int64_t numel, void *data)
{
    tfm_tensor *t = &r->headers[r->count];
    tfm__tensor_init(t, dtype, 1, &numel, numel, TFM_STORAGE_PARAM);
    t->data = data;
    snprintf(r->name_text[r->count], sizeof r->name_text[0], "%s%s", prefix, name);
    r->names[r->count] = r->name_text[r->count];
    r->tensors[r->count] = t;
    r->count++;
}

void tfm__optimizer_describe(const tfm_optimizer *o, const char *prefix, tfm__optimizer_record *r)
{
    r->count = 0;
    r->kind = o->options.kind;
    r->lr = o->options.lr;
    split_i64(o->steps, r->step);
    split_i64(o->numel, r->numel);
    add_header(r, prefix, "kind", TFM_I32, 1, &r->kind);
    add_header(r, prefix, "step", TFM_I32, 2, r->step);
    add_header(r, prefix, "numel", TFM_I32, 2, r->numel);
    add_header(r, prefix, "lr", TFM_F32, 1, &r->lr);
    add_header(r, prefix, "weight_decay", TFM_F32, o->count, o->weight_decay);
    const char *names[2];
    float *blocks[2];
    int n = state_blocks(o, names, blocks);
    for (int b = 0; b < n; b++)
        add_header(r, prefix, names[b], TFM_F32, o->numel, blocks[b]);
}

tfm_status tfm_optimizer_save(const tfm_optimizer *o, const char *path)
{
    const char *op = "tfm_optimizer_save";
    if (!o || !path)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, o ? "path" : "optimizer");
    /* headers over the optimizer's own memory: nothing is copied */
    tfm__optimizer_record r;
    tfm__optimizer_describe(o, "", &r);
    return tfm__safetensors_write(op, path, r.count, r.names, r.tensors, 0, NULL, NULL);
}

void tfm__optimizer_loaded_free(tfm__optimizer_loaded *l)
{
    tfm_tensor_free(l->blocks[0]);
    tfm_tensor_free(l->blocks[1]);
    tfm_tensor_free(l->weight_decay);
    memset(l, 0, sizeof *l);
}

/* Takes prefix+name from the file as a 1-D tensor of dtype and numel
 * values; keeps the reason it cannot (out of memory stays out of memory). */
static tfm_tensor *take(const char *ctx, const tfm_safetensors *file, const char *prefix,
                        const char *name, tfm_dtype dtype, int64_t numel)
{
    char full[96];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    int64_t index = tfm__safetensors_find(file, full);
    if (index < 0) {
        tfm__fail(TFM_ERR_FORMAT, "%s holds no \"%s\"; it is not this optimizer's state", ctx,
                  full);
        return NULL;
    }
    tfm__tensor_info info;
    tfm__safetensors_info(file, index, &info);
    if (info.is_float != (dtype == TFM_F32) || info.ndim != 1 || info.numel != numel) {
        tfm__fail(TFM_ERR_FORMAT, "%s: \"%s\" must be a 1-D %s tensor of %lld values", ctx,
                  full, dtype == TFM_F32 ? "float" : "integer", (long long)numel);
        return NULL;
    }
    uint64_t mark = tfm__error_mark();
    return tfm__result_within(ctx, mark, tfm_safetensors_get(file, full));
}

static int holds(const tfm_safetensors *file, const char *prefix, const char *name)
{
    char full[96];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return tfm__safetensors_find(file, full) >= 0;
}

/* One integer tensor's values: kind [1], or an int64 as step and numel. */
static int take_integer(const char *ctx, const tfm_safetensors *file, const char *prefix,
                        const char *name, int64_t *value)
{
    int halves = strcmp(name, "kind") != 0 ? 2 : 1;
    tfm_tensor *t = take(ctx, file, prefix, name, TFM_I32, halves);
    if (!t)
        return -1;
    *value = halves == 2 ? join_i64(tfm__i32(t)) : tfm__i32(t)[0];
    tfm_tensor_free(t);
    return 0;
}

static tfm_status check_unknown(const char *ctx, const tfm_optimizer *o,
                                const tfm_safetensors *file, const char *prefix)
{
    tfm__optimizer_record r;
    tfm__optimizer_describe(o, prefix, &r);
    size_t len = strlen(prefix);
    int64_t count = tfm_safetensors_count(file);
    for (int64_t i = 0; i < count; i++) {
        const char *name = tfm_safetensors_name(file, i);
        int known = strncmp(name, prefix, len) != 0;
        for (int k = 0; k < r.count && !known; k++)
            known = strcmp(name, r.names[k]) == 0;
        if (!known)
            return tfm__fail(TFM_ERR_FORMAT, "%s holds \"%s\", which this %s optimizer does "
                             "not keep", ctx, name, kind_name(o->options.kind));
    }
    return TFM_OK;
}

tfm_status tfm__optimizer_read(const char *ctx, const tfm_optimizer *o,
                               const tfm_safetensors *file, const char *prefix,
                               tfm__optimizer_loaded *l)
{
    memset(l, 0, sizeof *l);
    int64_t kind, numel;
    if (take_integer(ctx, file, prefix, "kind", &kind) < 0)
        return tfm_last_status();
    if (kind != o->options.kind)
        return tfm__fail(TFM_ERR_ARG, "%s holds the state of optimizer kind %lld (%s); "
                         "this one is kind %d (%s)", ctx, (long long)kind,
                         kind_name((tfm_optimizer_kind)kind), (int)o->options.kind,
                         kind_name(o->options.kind));
    if (take_integer(ctx, file, prefix, "numel", &numel) < 0)
        return tfm_last_status();
    if (numel != o->numel)
        return tfm__fail(TFM_ERR_SHAPE, "%s holds state for %lld parameters; this optimizer "
                         "has %lld", ctx, (long long)numel, (long long)o->numel);
    tfm_status s = check_unknown(ctx, o, file, prefix);
    if (s != TFM_OK)
        return s;
    if (take_integer(ctx, file, prefix, "step", &l->steps) < 0)
        return tfm_last_status();
    if (l->steps < 0 || l->steps > MAX_STEPS)
        return tfm__fail(TFM_ERR_FORMAT, "%s holds the step count %lld, outside [0, 2^53]",
                         ctx, (long long)l->steps);
    l->lr = o->options.lr;
    if (holds(file, prefix, "lr")) {
        tfm_tensor *lr = take(ctx, file, prefix, "lr", TFM_F32, 1);
        if (!lr)
            return tfm_last_status();
        l->lr = tfm__f32(lr)[0];
        tfm_tensor_free(lr);
        if (!nonnegative(l->lr))
            return tfm__fail(TFM_ERR_FORMAT, "%s holds the learning rate %g", ctx,
                             (double)l->lr);
    }
    const char *names[2];
    float *targets[2];
    int n_blocks = state_blocks(o, names, targets);
    l->weight_decay = holds(file, prefix, "weight_decay")
                          ? take(ctx, file, prefix, "weight_decay", TFM_F32, o->count)
                          : tfm_tensor_from_f32(1, &o->count, o->weight_decay);
    for (int b = 0; b < n_blocks && l->weight_decay; b++)
        if (!(l->blocks[b] = take(ctx, file, prefix, names[b], TFM_F32, o->numel)))
            break;
    s = tfm_last_status();
    if (!l->weight_decay || (n_blocks && !l->blocks[n_blocks - 1])) {
        tfm__optimizer_loaded_free(l);
        return s;
    }
    for (int b = -1; b < n_blocks; b++) {
        const tfm_tensor *t = b < 0 ? l->weight_decay : l->blocks[b];
        const float *x = tfm__f32(t);
        int nonnegative_only = b < 0 || strcmp(names[b], "v") == 0;
        for (int64_t i = 0; i < t->numel; i++)
            if (!isfinite(x[i]) || (nonnegative_only && x[i] < 0.0f)) {
                s = tfm__fail(TFM_ERR_FORMAT, "%s: \"%s%s\" holds %g at %lld", ctx, prefix,
                              b < 0 ? "weight_decay" : names[b], (double)x[i], (long long)i);
                tfm__optimizer_loaded_free(l);
                return s;
            }
    }
    return TFM_OK;
}

void tfm__optimizer_restore(tfm_optimizer *o, tfm__optimizer_loaded *l)
{
    const char *names[2];
    float *targets[2];
    int n_blocks = state_blocks(o, names, targets);
    for (int b = 0; b < n_blocks; b++)
        memcpy(targets[b], tfm__f32(l->blocks[b]), (size_t)o->numel * sizeof(float));
    memcpy(o->weight_decay, tfm__f32(l->weight_decay), (size_t)o->count * sizeof(float));
    o->options.lr = l->lr;
    o->steps = l->steps;
    tfm__optimizer_loaded_free(l);
}

tfm_params *tfm__optimizer_params(const tfm_optimizer *o)
{
    return o->params;
}

tfm_status tfm_optimizer_load(tfm_optimizer *o, const char *path)
{
    const char *op = "tfm_optimizer_load";
    if (!o || !path)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, o ? "path" : "optimizer");
    tfm_safetensors *file = tfm__safetensors_open(op, path);
    if (!file)
        return tfm_last_status();
    char ctx[600];
    snprintf(ctx, sizeof ctx, "%s: \"%s\"", op, path);
    tfm__optimizer_loaded loaded;
    tfm_status s = tfm__optimizer_read(ctx, o, file, "", &loaded);
    if (s == TFM_OK)
        tfm__optimizer_restore(o, &loaded);
    tfm_safetensors_close(file);
    return s;
}
