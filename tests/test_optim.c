/* Optimizers: SGD, Adam and AdamW against double-precision references
 * written here (textbook formulas, not torch's rearrangement), learning-rate
 * schedules, clipping, the NaN/Inf guard, frozen tensors, the state file and
 * its errors, and option validation. */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include <tfm/tfm.h>

enum { N = 9 }; /* scalars in the two-tensor store: "w" [2,3] and "b" [3] */

static tfm_params *two_tensor_store(void)
{
    tfm_params *params = tfm_params_create();
    ck_assert_ptr_nonnull(tfm_params_add(params, "w", 2, (const int64_t[]){2, 3}));
    ck_assert_ptr_nonnull(tfm_params_add(params, "b", 1, (const int64_t[]){3}));
    float *p = tfm_params_values(params);
    for (int i = 0; i < N; i++)
        p[i] = (float)(0.5 * sin(1.0 + i));
    return params;
}

/* The gradient of step k (from 1): away from zero, changing sign. */
static float grad_at(int k, int i)
{
    double g = 0.4 * cos(0.9 * i + 1.7 * k);
    return (float)(g + (g >= 0 ? 0.05 : -0.05));
}

static void set_grads(tfm_params *params, int k)
{
    float *g = tfm_params_grads(params);
    for (int i = 0; i < N; i++)
        g[i] = grad_at(k, i);
}

static char *temp_path(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "/tmp/tfm_test_optim_%ld_%s.safetensors", (long)getpid(), name);
    return buf;
}

/* --- the reference ------------------------------------------------------- */

typedef struct reference {
    double p[N], m[N], v[N], buf[N];
} reference;

static void reference_init(reference *r)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < N; i++)
        r->p[i] = (float)(0.5 * sin(1.0 + i));
}

static double reference_lr(const tfm_optimizer_options *o, int k)
{
    if (o->schedule == TFM_SCHEDULE_STEP)
        return o->lr * pow(o->gamma, (double)((k - 1) / o->step_size));
    if (o->schedule == TFM_SCHEDULE_WARMUP_INVSQRT) {
        double w = (double)o->warmup_steps;
        return o->lr * (k < w ? k / w : sqrt(w / k));
    }
    return o->lr;
}

/* Step k of Kingma & Ba's Adam (L2 in the gradient), Loshchilov & Hutter's
 * AdamW (decoupled decay) or SGD with heavy-ball momentum, in double. */
static void reference_step(reference *r, const tfm_optimizer_options *o, int k)
{
    double lr = reference_lr(o, k), wd = o->weight_decay;
    for (int i = 0; i < N; i++) {
        double g = grad_at(k, i);
        if (o->kind == TFM_OPTIMIZER_SGD) {
            g += wd * r->p[i];
            if (o->momentum > 0)
                r->buf[i] = k == 1 ? g : o->momentum * r->buf[i] + g;
            r->p[i] -= lr * (o->momentum > 0 ? r->buf[i] : g);
            continue;
        }
        if (o->kind == TFM_OPTIMIZER_ADAMW)
            r->p[i] -= lr * wd * r->p[i];
        else
            g += wd * r->p[i];
        double b1 = o->beta1, b2 = o->beta2;
        r->m[i] = b1 * r->m[i] + (1 - b1) * g;
        r->v[i] = b2 * r->v[i] + (1 - b2) * g * g;
        double mhat = r->m[i] / (1 - pow(b1, k)), vhat = r->v[i] / (1 - pow(b2, k));
        r->p[i] -= lr * mhat / (sqrt(vhat) + o->eps);
    }
}

static void assert_close(const float *got, const double *want, int n, const char *what,
                         int step)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 2e-6 + 1e-5 * fabs(want[i]),
                      "%s[%d] after step %d: %.9g, reference %.9g", what, i, step,
                      (double)got[i], want[i]);
}

/* Runs steps of an optimizer made from `given` and of the reference with
 * the options `o` side by side. */
static void run_with(const tfm_optimizer_options *given, const tfm_optimizer_options *o,
                     int steps)
{
    tfm_params *params = two_tensor_store();
    tfm_optimizer *opt = tfm_optimizer_create(params, given);
    ck_assert_msg(opt != NULL, "%s", tfm_last_error());
    reference r;
    reference_init(&r);
    for (int k = 1; k <= steps; k++) {
        ck_assert_float_eq_tol(tfm_optimizer_lr(opt), reference_lr(o, k), 1e-9);
        set_grads(params, k);
        ck_assert_int_eq(tfm_optimizer_step(opt), TFM_OK);
        reference_step(&r, o, k);
        assert_close(tfm_params_values(params), r.p, N, "p", k);
        ck_assert_int_eq(tfm_optimizer_step_count(opt), k);
    }
    tfm_optimizer_free(opt);
    tfm_params_free(params);
}

static void run_against_reference(const tfm_optimizer_options *o, int steps)
{
    run_with(o, o, steps);
}

static tfm_optimizer_options options_for(tfm_optimizer_kind kind, float lr)
{
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, kind);
    o.lr = lr;
    return o;
}

START_TEST(adam_matches_reference)
{
    tfm_optimizer_options o = options_for(TFM_OPTIMIZER_ADAM, 0.05f);
    o.beta1 = 0.8f;
    o.beta2 = 0.99f;
    o.eps = 1e-3f; /* large enough that sqrt(vhat) + eps vs sqrt(vhat + eps) shows */
    o.weight_decay = 0.1f;
    run_against_reference(&o, 8);
    o = options_for(TFM_OPTIMIZER_ADAM, 0.01f);
    run_against_reference(&o, 8);
    o.schedule = TFM_SCHEDULE_STEP;
    o.step_size = 2;
    o.gamma = 0.5f;
    run_against_reference(&o, 8);
}
END_TEST

START_TEST(adamw_matches_reference)
{
    tfm_optimizer_options o = options_for(TFM_OPTIMIZER_ADAMW, 0.05f);
    o.beta1 = 0.85f;
    o.beta2 = 0.995f;
    o.eps = 1e-3f;
    o.weight_decay = 0.2f;
    run_against_reference(&o, 8);
    o.schedule = TFM_SCHEDULE_WARMUP_INVSQRT;
    o.warmup_steps = 3;
    run_against_reference(&o, 8);
}
END_TEST

START_TEST(sgd_matches_reference)
{
    tfm_optimizer_options o = options_for(TFM_OPTIMIZER_SGD, 0.1f);
    o.momentum = 0.9f;
    o.weight_decay = 0.01f;
    run_against_reference(&o, 8);
    o.momentum = 0.0f;
    o.weight_decay = 0.05f;
    run_against_reference(&o, 8);
    o = options_for(TFM_OPTIMIZER_SGD, 0.2f);
    o.momentum = 0.5f;
    o.schedule = TFM_SCHEDULE_STEP;
    o.step_size = 3;
    o.gamma = 0.1f;
    run_against_reference(&o, 8);
}
END_TEST

START_TEST(defaults_are_pytorchs)
{
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_SGD);
    ck_assert_uint_eq(o.struct_size, sizeof o);
    ck_assert_int_eq(o.kind, TFM_OPTIMIZER_SGD);
    ck_assert_float_eq(o.lr, 1e-2f);
    ck_assert_float_eq(o.momentum, 0.0f);
    ck_assert_float_eq(o.weight_decay, 0.0f);
    ck_assert_float_eq(o.clip_norm, 0.0f);
    ck_assert_int_eq(o.schedule, TFM_SCHEDULE_CONSTANT);
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAM);
    ck_assert_float_eq(o.lr, 1e-3f);
    ck_assert_float_eq(o.beta1, 0.9f);
    ck_assert_float_eq(o.beta2, 0.999f);
    ck_assert_float_eq(o.eps, 1e-8f);
    ck_assert_float_eq(o.weight_decay, 0.0f);
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAMW);
    ck_assert_float_eq(o.lr, 1e-3f);
    ck_assert_float_eq(o.weight_decay, 1e-2f);
    tfm_optimizer_options_init_sized(NULL, TFM_OPTIMIZER_ADAM, sizeof(tfm_optimizer_options)); /* harmless */
    /* and the defaults train as the reference with the same values */
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAMW);
    run_against_reference(&o, 5);
}
END_TEST

/* --- schedules ----------------------------------------------------------- */

/* The rate before each step, and that each step used it: plain SGD with
 * unit gradients moves every value by exactly -lr. */
static void check_schedule(tfm_optimizer_options o, const double *want, int steps)
{
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "x", 1, (const int64_t[]){2});
    tfm_optimizer *opt = tfm_optimizer_create(params, &o);
    ck_assert_ptr_nonnull(opt);
    double x = 0;
    for (int k = 0; k < steps; k++) {
        ck_assert_msg(fabs(tfm_optimizer_lr(opt) - want[k]) < 1e-6,
                      "schedule %d: lr before step %d is %g, expected %g", (int)o.schedule,
                      k + 1, (double)tfm_optimizer_lr(opt), want[k]);
        float *g = tfm_params_grads(params);
        g[0] = g[1] = 1.0f;
        ck_assert_int_eq(tfm_optimizer_step(opt), TFM_OK);
        x -= want[k];
        ck_assert_float_eq_tol(tfm_params_values(params)[1], x, 1e-5);
    }
    ck_assert_msg(fabs(tfm_optimizer_lr(opt) - want[steps]) < 1e-6,
                  "lr after %d steps is %g, expected %g", steps,
                  (double)tfm_optimizer_lr(opt), want[steps]);
    tfm_optimizer_free(opt);
    tfm_params_free(params);
}

START_TEST(schedules)
{
    tfm_optimizer_options o = options_for(TFM_OPTIMIZER_SGD, 1.0f);
    check_schedule(o, (const double[]){1, 1, 1, 1}, 3);

    o.schedule = TFM_SCHEDULE_STEP;
    o.step_size = 2;
    o.gamma = 0.5f;
    check_schedule(o, (const double[]){1, 1, 0.5, 0.5, 0.25, 0.25}, 5);
    o.step_size = 3;
    o.gamma = 0.1f;
    check_schedule(o, (const double[]){1, 1, 1, 0.1, 0.1, 0.1, 0.01}, 6);

    o.schedule = TFM_SCHEDULE_WARMUP_INVSQRT;
    o.warmup_steps = 4;
    check_schedule(o, (const double[]){0.25, 0.5, 0.75, 1, 0.894427191, 0.816496581, 0.755928946}, 6);
    o.warmup_steps = 1; /* pure inverse square root */
    check_schedule(o, (const double[]){1, 0.707106781, 0.577350269, 0.5}, 3);

    o.schedule = TFM_SCHEDULE_WARMUP_COSINE;
    o.warmup_steps = 2;
    o.total_steps = 6; /* cos(pi k / 4) after the warmup, then 0 for good */
    check_schedule(o, (const double[]){0.5, 1, 1, 0.853553391, 0.5, 0.146446609, 0, 0}, 7);
    o.warmup_steps = 0;
    o.total_steps = 2;
    check_schedule(o, (const double[]){1, 0.5, 0, 0}, 3);
}
END_TEST

/* --- clipping, the NaN guard, frozen tensors ------------------------------ */

START_TEST(clipping_uses_the_clipped_gradient)
{
    const float clip[] = {0.0f, 1.0f, 10.0f};
    for (int c = 0; c < 3; c++) {
        tfm_params *params = tfm_params_create();
        tfm_params_add(params, "w", 1, (const int64_t[]){2});
        tfm_params_add(params, "b", 1, (const int64_t[]){1});
        tfm_optimizer_options o = options_for(TFM_OPTIMIZER_SGD, 1.0f);
        o.clip_norm = clip[c];
        tfm_optimizer *opt = tfm_optimizer_create(params, &o);
        ck_assert_float_eq(tfm_optimizer_last_grad_norm(opt), 0.0f);
        float *g = tfm_params_grads(params);
        g[0] = 3.0f;
        g[1] = 0.0f;
        g[2] = 4.0f; /* global norm 5 across both tensors */
        ck_assert_int_eq(tfm_optimizer_step(opt), TFM_OK);
        ck_assert_float_eq_tol(tfm_optimizer_last_grad_norm(opt), 5.0f, 1e-6);
        double scale = clip[c] == 1.0f ? 1.0 / (5.0 + 1e-6) : 1.0;
        const float *p = tfm_params_values(params);
        ck_assert_float_eq_tol(p[0], -3.0 * scale, 1e-6);
        ck_assert_float_eq_tol(p[1], 0.0, 1e-9);
        ck_assert_float_eq_tol(p[2], -4.0 * scale, 1e-6);
        /* like torch's clip_grad_norm_, the gradients stay clipped */
        ck_assert_float_eq_tol(g[2], 4.0 * scale, 1e-6);
        tfm_optimizer_free(opt);
        tfm_params_free(params);
    }
}
END_TEST

START_TEST(non_finite_gradients_refuse_the_step)
{
    tfm_params *params = two_tensor_store(), *twin_params = two_tensor_store();
    tfm_optimizer_options o = options_for(TFM_OPTIMIZER_ADAM, 0.05f);
    o.weight_decay = 0.1f;
    o.clip_norm = 0.5f; /* the clipping path must not touch the gradients either */
    tfm_optimizer *opt = tfm_optimizer_create(params, &o);
    tfm_optimizer *twin = tfm_optimizer_create(twin_params, &o);
    for (int k = 1; k <= 2; k++) {
        set_grads(params, k);
        set_grads(twin_params, k);
        ck_assert_int_eq(tfm_optimizer_step(opt), TFM_OK);
        ck_assert_int_eq(tfm_optimizer_step(twin), TFM_OK);
    }
    float norm = tfm_optimizer_last_grad_norm(opt);
    const struct { int index; float value; const char *name, *where; } bad[] = {
        {7, NAN, "\"b\"", "[1]"},
        {5, INFINITY, "\"w\"", "[1,2]"},
        {0, -INFINITY, "\"w\"", "[0,0]"},
    };
    for (int c = 0; c < 3; c++) {
        set_grads(params, 3);
        tfm_params_grads(params)[bad[c].index] = bad[c].value;
        if (c == 0)
            tfm_params_grads(params)[8] = NAN; /* a later one is not named */
        float values[N], grads[N];
        memcpy(values, tfm_params_values(params), sizeof values);
        memcpy(grads, tfm_params_grads(params), sizeof grads);
        tfm_clear_error();
        ck_assert_int_eq(tfm_optimizer_step(opt), TFM_ERR_NUMERIC);
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_NUMERIC);
        const char *msg = tfm_last_error();
        ck_assert_msg(strstr(msg, "tfm_optimizer_step") && strstr(msg, bad[c].name) &&
                          strstr(msg, bad[c].where) && strstr(msg, "refused"),
                      "message: %s", msg);
        ck_assert_int_eq(memcmp(values, tfm_params_values(params), sizeof values), 0);
        ck_assert_int_eq(memcmp(grads, tfm_params_grads(params), sizeof grads), 0);
        ck_assert_int_eq(tfm_optimizer_step_count(opt), 2);
        ck_assert_float_eq(tfm_optimizer_last_grad_norm(opt), norm);
    }
    /* the moments are untouched: the next good step matches the twin's bit
     * for bit */
    set_grads(params, 3);
    set_grads(twin_params, 3);
    ck_assert_int_eq(tfm_optimizer_step(opt), TFM_OK);
    ck_assert_int_eq(tfm_optimizer_step(twin), TFM_OK);
    ck_assert_int_eq(memcmp(tfm_params_values(params), tfm_params_values(twin_params),
                            N * sizeof(float)), 0);
    ck_assert_int_eq(tfm_optimizer_step_count(opt), 3);
    tfm_optimizer_free(opt);
    tfm_optimizer_free(twin);
    tfm_params_free(params);
    tfm_params_free(twin_params);
}
END_TEST

START_TEST(frozen_tensors_are_not_updated)
{
    /* "a" [2], "b" [3], "c" [2]; freeze each one in turn, then all */
    for (int frozen = 0; frozen <= 3; frozen++)
        for (int kind = TFM_OPTIMIZER_SGD; kind <= TFM_OPTIMIZER_ADAMW; kind++) {
            tfm_params *params = tfm_params_create();
            const char *names[] = {"a", "b", "c"};
            const int sizes[] = {2, 3, 2}, offsets[] = {0, 2, 5};
            for (int t = 0; t < 3; t++)
                tfm_params_add(params, names[t], 1, (const int64_t[]){sizes[t]});
            for (int t = 0; t < 3; t++)
                if (frozen == t || frozen == 3)
                    tfm_tensor_set_requires_grad(tfm_params_at(params, t), 0);
            tfm_optimizer_options o = options_for(kind, 0.5f);
            o.momentum = 0.9f;
            o.weight_decay = 0.0f;
            tfm_optimizer *opt = tfm_optimizer_create(params, &o);
            float *p = tfm_params_values(params), *g = tfm_params_grads(params);
            for (int k = 0; k < 2; k++) {
                for (int i = 0; i < 7; i++)
                    g[i] = 1.0f;
                ck_assert_int_eq(tfm_optimizer_step(opt), TFM_OK);
            }
            /* two unit-gradient steps: SGD with momentum moves 0.5 + 0.5*1.9;
             * Adam moves lr * 1/(1 + eps) each time */
            double moved = kind == TFM_OPTIMIZER_SGD ? -1.45 : -1.0;
            for (int t = 0; t < 3; t++)
                for (int i = offsets[t]; i < offsets[t] + sizes[t]; i++) {
                    double want = frozen == t || frozen == 3 ? 0.0 : moved;
                    ck_assert_msg(fabs(p[i] - want) < 1e-6,
                                  "kind %d, frozen %d: %s at %d is %g, expected %g", kind,
                                  frozen, names[t], i, (double)p[i], want);
                }
            tfm_optimizer_free(opt);
            tfm_params_free(params);
        }
}
END_TEST

/* --- fitting through the tape -------------------------------------------- */

START_TEST(adam_fits_a_line)
{
    enum { B = 16 };
    float xs[B], ys[B];
    for (int i = 0; i < B; i++) {
        xs[i] = -1.0f + 2.0f * i / (B - 1);
        ys[i] = 3.0f * xs[i] + 2.0f;
    }
    tfm_tensor *x = tfm_tensor_from_f32(2, (const int64_t[]){B, 1}, xs);
    tfm_tensor *y = tfm_tensor_from_f32(2, (const int64_t[]){B, 1}, ys);
    tfm_params *params = tfm_params_create();
    tfm_tensor *w = tfm_params_add(params, "w", 2, (const int64_t[]){1, 1});
    tfm_tensor *b = tfm_params_add(params, "b", 1, (const int64_t[]){1});
    tfm_optimizer_options o = options_for(TFM_OPTIMIZER_ADAM, 0.1f);
    o.schedule = TFM_SCHEDULE_STEP;
    o.step_size = 150;
    o.gamma = 0.3f;
    tfm_optimizer *opt = tfm_optimizer_create(params, &o);
    tfm_tape *tape = tfm_tape_create();
    float loss_value = 0;
    for (int step = 0; step < 600; step++) {
        ck_assert_int_eq(tfm_optimizer_zero_grad(opt), TFM_OK);
        tfm_tensor *pred = tfm_add(tape, tfm_matmul(tape, x, w, 0, 0), b);
        tfm_tensor *diff = tfm_sub(tape, pred, y);
        tfm_tensor *loss = tfm_mean(tape, tfm_mul(tape, diff, diff));
        ck_assert_msg(loss != NULL, "%s", tfm_last_error());
        ck_assert_int_eq(tfm_tensor_item(loss, &loss_value), TFM_OK);
        ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
        ck_assert_int_eq(tfm_optimizer_step(opt), TFM_OK);
        ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
    }
    ck_assert_float_eq_tol(tfm_tensor_data_f32(w)[0], 3.0f, 1e-3);
    ck_assert_float_eq_tol(tfm_tensor_data_f32(b)[0], 2.0f, 1e-3);
    ck_assert_float_lt(loss_value, 1e-5f);
    ck_assert_float_gt(tfm_optimizer_last_grad_norm(opt), 0.0f);
    tfm_tape_free(tape);
    tfm_optimizer_free(opt);
    tfm_params_free(params);
    tfm_tensor_free(x);
    tfm_tensor_free(y);
}
END_TEST

/* --- the state file ------------------------------------------------------- */

static tfm_optimizer_options round_trip_options(int c)
{
    tfm_optimizer_options o;
    switch (c) {
    case 0:
        o = options_for(TFM_OPTIMIZER_ADAM, 0.05f);
        o.weight_decay = 0.1f;
        o.schedule = TFM_SCHEDULE_STEP; /* the restored step count drives it */
        o.step_size = 2;
        o.gamma = 0.5f;
        return o;
    case 1:
        o = options_for(TFM_OPTIMIZER_ADAMW, 0.05f);
        o.schedule = TFM_SCHEDULE_WARMUP_INVSQRT;
        o.warmup_steps = 4;
        return o;
    case 2:
        o = options_for(TFM_OPTIMIZER_SGD, 0.1f);
        o.momentum = 0.9f;
        o.weight_decay = 0.01f;
        o.clip_norm = 0.5f;
        return o;
    default:
        return options_for(TFM_OPTIMIZER_SGD, 0.1f);
    }
}

START_TEST(save_and_load_resume_identically)
{
    char path[256];
    temp_path(path, sizeof path, "resume");
    for (int c = 0; c < 4; c++) {
        tfm_optimizer_options o = round_trip_options(c);
        tfm_params *straight = two_tensor_store(), *resumed = two_tensor_store();
        tfm_optimizer *a = tfm_optimizer_create(straight, &o);
        for (int k = 1; k <= 6; k++) {
            set_grads(straight, k);
            ck_assert_int_eq(tfm_optimizer_step(a), TFM_OK);
        }
        tfm_optimizer *b = tfm_optimizer_create(resumed, &o);
        for (int k = 1; k <= 3; k++) {
            set_grads(resumed, k);
            ck_assert_int_eq(tfm_optimizer_step(b), TFM_OK);
        }
        float lr = tfm_optimizer_lr(b);
        ck_assert_msg(tfm_optimizer_save(b, path) == TFM_OK, "%s", tfm_last_error());
        tfm_optimizer_free(b);
        tfm_optimizer *fresh = tfm_optimizer_create(resumed, &o);
        ck_assert_int_eq(tfm_optimizer_step_count(fresh), 0);
        ck_assert_msg(tfm_optimizer_load(fresh, path) == TFM_OK, "%s", tfm_last_error());
        ck_assert_int_eq(tfm_optimizer_step_count(fresh), 3);
        ck_assert_float_eq(tfm_optimizer_lr(fresh), lr);
        for (int k = 4; k <= 6; k++) {
            set_grads(resumed, k);
            ck_assert_int_eq(tfm_optimizer_step(fresh), TFM_OK);
        }
        ck_assert_msg(memcmp(tfm_params_values(straight), tfm_params_values(resumed),
                             N * sizeof(float)) == 0,
                      "case %d: the resumed run differs", c);
        ck_assert_int_eq(tfm_optimizer_step_count(fresh), 6);
        tfm_optimizer_free(a);
        tfm_optimizer_free(fresh);
        tfm_params_free(straight);
        tfm_params_free(resumed);
    }
    unlink(path);
}
END_TEST

static void assert_i32_tensor(const tfm_safetensors *file, const char *name,
                              const int32_t *want, int n)
{
    tfm_tensor *t = tfm_safetensors_get(file, name);
    ck_assert_msg(t != NULL, "%s: %s", name, tfm_last_error());
    ck_assert_int_eq(tfm_tensor_dtype(t), TFM_I32);
    ck_assert_int_eq(tfm_tensor_ndim(t), 1);
    ck_assert_int_eq(tfm_tensor_numel(t), n);
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(tfm_tensor_data_i32(t)[i], want[i]);
    tfm_tensor_free(t);
}

static void assert_block(const tfm_safetensors *file, const char *name, const double *want)
{
    tfm_tensor *t = tfm_safetensors_get(file, name);
    ck_assert_msg(t != NULL, "%s: %s", name, tfm_last_error());
    ck_assert_int_eq(tfm_tensor_dtype(t), TFM_F32);
    ck_assert_int_eq(tfm_tensor_ndim(t), 1);
    ck_assert_int_eq(tfm_tensor_numel(t), N);
    assert_close(tfm_tensor_data_f32(t), want, N, name, 3);
    tfm_tensor_free(t);
}

/* The state is one flat block per moment, in the store's parameter order,
 * and the file says so. */
START_TEST(state_file_contents)
{
    char path[256];
    temp_path(path, sizeof path, "contents");
    for (int c = 0; c < 4; c++) {
        tfm_optimizer_options o = round_trip_options(c);
        o.clip_norm = 0.0f;
        tfm_params *params = two_tensor_store();
        tfm_optimizer *opt = tfm_optimizer_create(params, &o);
        reference r;
        reference_init(&r);
        for (int k = 1; k <= 3; k++) {
            set_grads(params, k);
            ck_assert_int_eq(tfm_optimizer_step(opt), TFM_OK);
            reference_step(&r, &o, k);
        }
        ck_assert_int_eq(tfm_optimizer_save(opt, path), TFM_OK);
        tfm_safetensors *file = tfm_safetensors_open(path);
        ck_assert_msg(file != NULL, "%s", tfm_last_error());
        assert_i32_tensor(file, "kind", (const int32_t[]){o.kind}, 1);
        assert_i32_tensor(file, "step", (const int32_t[]){3, 0}, 2);
        assert_i32_tensor(file, "numel", (const int32_t[]){N, 0}, 2);
        int blocks = o.kind != TFM_OPTIMIZER_SGD ? 2 : o.momentum > 0 ? 1 : 0;
        ck_assert_int_eq(tfm_safetensors_count(file), 5 + blocks); /* + lr, weight_decay */
        if (o.kind != TFM_OPTIMIZER_SGD) {
            assert_block(file, "m", r.m);
            assert_block(file, "v", r.v);
        } else if (blocks) {
            assert_block(file, "momentum", r.buf);
        }
        tfm_safetensors_close(file);
        tfm_optimizer_free(opt);
        tfm_params_free(params);
    }
    unlink(path);
}
END_TEST

static void expect_load_error(tfm_optimizer *opt, const char *path, tfm_status status,
                              const char *substring)
{
    tfm_clear_error();
    int64_t steps = tfm_optimizer_step_count(opt);
    ck_assert_int_eq(tfm_optimizer_load(opt, path), status);
    ck_assert_msg(strstr(tfm_last_error(), substring) != NULL,
                  "expected \"%s\" in: %s", substring, tfm_last_error());
    ck_assert_int_eq(tfm_optimizer_step_count(opt), steps);
}

/* Writes a state file by hand: kind, step, numel and the given blocks. */
static void write_state(const char *path, int32_t kind, int64_t step, int64_t numel,
                        int n_blocks, const char *const *block_names,
                        const int64_t *block_sizes, float fill)
{
    const char *names[6] = {"kind", "step", "numel"};
    tfm_tensor *tensors[6];
    tensors[0] = tfm_tensor_from_i32(1, (const int64_t[]){1}, &kind);
    tensors[1] = tfm_tensor_from_i32(1, (const int64_t[]){2},
                                     (const int32_t[]){(int32_t)step, (int32_t)(step >> 32)});
    tensors[2] = tfm_tensor_from_i32(1, (const int64_t[]){2},
                                     (const int32_t[]){(int32_t)numel, 0});
    for (int b = 0; b < n_blocks; b++) {
        names[3 + b] = block_names[b];
        tensors[3 + b] = tfm_tensor_full(1, &block_sizes[b], fill);
    }
    ck_assert_int_eq(tfm_safetensors_write(path, 3 + n_blocks, names,
                                           (const tfm_tensor *const *)tensors),
                     TFM_OK);
    for (int i = 0; i < 3 + n_blocks; i++)
        tfm_tensor_free(tensors[i]);
}

START_TEST(load_errors_change_nothing)
{
    char adam_path[256], sgd_path[256], plain_path[256], small_path[256], bad_path[256];
    temp_path(adam_path, sizeof adam_path, "adam");
    temp_path(sgd_path, sizeof sgd_path, "sgd");
    temp_path(plain_path, sizeof plain_path, "plain");
    temp_path(small_path, sizeof small_path, "small");
    temp_path(bad_path, sizeof bad_path, "bad");

    /* files from other optimizers */
    tfm_optimizer_options adam = options_for(TFM_OPTIMIZER_ADAM, 0.05f);
    tfm_optimizer_options sgd = options_for(TFM_OPTIMIZER_SGD, 0.1f);
    sgd.momentum = 0.9f;
    tfm_optimizer_options plain = options_for(TFM_OPTIMIZER_SGD, 0.1f);
    tfm_params *params = two_tensor_store();
    tfm_params *small = tfm_params_create();
    tfm_params_add(small, "w", 1, (const int64_t[]){5});
    const struct { tfm_params *params; tfm_optimizer_options *o; const char *path; } sources[] = {
        {params, &sgd, sgd_path}, {params, &plain, plain_path}, {small, &adam, small_path},
    };
    for (int s = 0; s < 3; s++) {
        tfm_optimizer *other = tfm_optimizer_create(sources[s].params, sources[s].o);
        ck_assert_int_eq(tfm_optimizer_save(other, sources[s].path), TFM_OK);
        tfm_optimizer_free(other);
    }

    /* an Adam optimizer with two steps, and its twin that sees no errors */
    tfm_params *twin_params = two_tensor_store();
    tfm_optimizer *opt = tfm_optimizer_create(params, &adam);
    tfm_optimizer *twin = tfm_optimizer_create(twin_params, &adam);
    for (int k = 1; k <= 2; k++) {
        set_grads(params, k);
        set_grads(twin_params, k);
        tfm_optimizer_step(opt);
        tfm_optimizer_step(twin);
    }
    ck_assert_int_eq(tfm_optimizer_save(opt, adam_path), TFM_OK);

    expect_load_error(opt, sgd_path, TFM_ERR_ARG, "kind 0 (SGD)");
    expect_load_error(opt, small_path, TFM_ERR_SHAPE, "state for 5 parameters");
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "has 9"));

    /* a file whose second block is short, one with a negative second
     * moment, one with a negative step count, one with an extra tensor:
     * the good "m" in front must not be half-loaded */
    const char *mv[] = {"m", "v", "extra"};
    write_state(bad_path, TFM_OPTIMIZER_ADAM, 7, N, 2, mv, (const int64_t[]){N, N - 1}, 0.5f);
    expect_load_error(opt, bad_path, TFM_ERR_FORMAT, "\"v\"");
    write_state(bad_path, TFM_OPTIMIZER_ADAM, 7, N, 2, mv, (const int64_t[]){N, N}, -0.5f);
    expect_load_error(opt, bad_path, TFM_ERR_FORMAT, "-0.5");
    write_state(bad_path, TFM_OPTIMIZER_ADAM, -1, N, 2, mv, (const int64_t[]){N, N}, 0.5f);
    expect_load_error(opt, bad_path, TFM_ERR_FORMAT, "step count -1, outside");
    write_state(bad_path, TFM_OPTIMIZER_ADAM, 7, N, 3, mv, (const int64_t[]){N, N, 1}, 0.5f);
    expect_load_error(opt, bad_path, TFM_ERR_FORMAT, "\"extra\"");
    write_state(bad_path, TFM_OPTIMIZER_ADAM, 7, N, 1, mv, (const int64_t[]){N}, 0.5f);
    expect_load_error(opt, bad_path, TFM_ERR_FORMAT, "no \"v\"");
    write_state(bad_path, 9, 7, N, 2, mv, (const int64_t[]){N, N}, 0.5f);
    expect_load_error(opt, bad_path, TFM_ERR_ARG, "kind 9");

    /* not a safetensors file at all, a truncated one, a missing one */
    FILE *f = fopen(bad_path, "wb");
    fputs("this is not a safetensors file", f);
    fclose(f);
    expect_load_error(opt, bad_path, TFM_ERR_FORMAT, "");
    f = fopen(adam_path, "rb");
    char bytes[4096];
    size_t n = fread(bytes, 1, sizeof bytes, f);
    fclose(f);
    f = fopen(bad_path, "wb");
    fwrite(bytes, 1, n - 10, f);
    fclose(f);
    expect_load_error(opt, bad_path, TFM_ERR_FORMAT, "");
    unlink(bad_path);
    expect_load_error(opt, bad_path, TFM_ERR_IO, "");

    /* SGD: a momentum buffer where none is kept, and none where one is */
    tfm_optimizer *plain_opt = tfm_optimizer_create(params, &plain);
    expect_load_error(plain_opt, sgd_path, TFM_ERR_FORMAT, "\"momentum\"");
    expect_load_error(plain_opt, adam_path, TFM_ERR_ARG, "kind 1 (Adam)");
    tfm_optimizer_free(plain_opt);
    tfm_optimizer *sgd_opt = tfm_optimizer_create(params, &sgd);
    expect_load_error(sgd_opt, plain_path, TFM_ERR_FORMAT, "no \"momentum\"");
    tfm_optimizer_free(sgd_opt);

    /* nothing changed: the next step still matches the twin bit for bit */
    set_grads(params, 3);
    set_grads(twin_params, 3);
    ck_assert_int_eq(tfm_optimizer_step(opt), TFM_OK);
    ck_assert_int_eq(tfm_optimizer_step(twin), TFM_OK);
    ck_assert_int_eq(memcmp(tfm_params_values(params), tfm_params_values(twin_params),
                            N * sizeof(float)), 0);

    tfm_clear_error();
    ck_assert_int_eq(tfm_optimizer_load(NULL, adam_path), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_optimizer_load(opt, NULL), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "path"));
    ck_assert_int_eq(tfm_optimizer_save(NULL, adam_path), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_optimizer_save(opt, NULL), TFM_ERR_NULL);

    tfm_optimizer_free(opt);
    tfm_optimizer_free(twin);
    tfm_params_free(params);
    tfm_params_free(twin_params);
    tfm_params_free(small);
    unlink(adam_path);
    unlink(sgd_path);
    unlink(plain_path);
    unlink(small_path);
}
END_TEST

/* --- options and misuse ---------------------------------------------------- */

#define EXPECT_BAD_OPTION(kind_, change, substring)                             \
    do {                                                                       \
        tfm_optimizer_options o_;                                              \
        tfm_optimizer_options_init(&o_, (kind_));                              \
        change;                                                                \
        tfm_clear_error();                                                     \
        ck_assert_ptr_null(tfm_optimizer_create(params, &o_));                 \
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);                      \
        ck_assert_msg(strstr(tfm_last_error(), "tfm_optimizer_create") &&      \
                          strstr(tfm_last_error(), (substring)),               \
                      "expected \"%s\" in: %s", (substring), tfm_last_error()); \
    } while (0)

START_TEST(invalid_options)
{
    tfm_params *params = two_tensor_store();
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_SGD, o_.lr = -0.1f, "lr -0.1");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_SGD, o_.lr = NAN, "lr nan");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_ADAM, o_.beta1 = 1.0f, "beta1 1 ");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_ADAM, o_.beta1 = -0.1f, "beta1 -0.1");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_ADAM, o_.beta2 = 1.5f, "beta2 1.5");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_ADAM, o_.beta2 = NAN, "beta2");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_ADAMW, o_.beta2 = 1.0f, "beta2 1 ");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_ADAM, o_.eps = -1e-8f, "eps");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_ADAMW, o_.weight_decay = -0.01f, "weight_decay");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_SGD, o_.momentum = -0.9f, "momentum");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_SGD, o_.clip_norm = -1.0f, "clip_norm");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_SGD, o_.clip_norm = INFINITY, "clip_norm inf");
    EXPECT_BAD_OPTION(3, (void)0, "kind 3");
    EXPECT_BAD_OPTION(-1, (void)0, "kind -1");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_SGD, o_.schedule = 7, "schedule 7");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_SGD, (o_.schedule = TFM_SCHEDULE_STEP, o_.step_size = 0),
                      "step_size 0");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_SGD, (o_.schedule = TFM_SCHEDULE_STEP, o_.gamma = -0.5f),
                      "gamma -0.5");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_ADAM,
                      (o_.schedule = TFM_SCHEDULE_WARMUP_INVSQRT, o_.warmup_steps = 0),
                      "warmup_steps 0");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_ADAM, (o_.schedule = TFM_SCHEDULE_WARMUP_COSINE,
                                           o_.warmup_steps = 10, o_.total_steps = 10),
                      "total_steps 10");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_ADAM, (o_.schedule = TFM_SCHEDULE_WARMUP_COSINE,
                                           o_.warmup_steps = -1, o_.total_steps = 10),
                      "warmup_steps -1");
    EXPECT_BAD_OPTION(TFM_OPTIMIZER_ADAM, o_.struct_size = 4, "struct_size 4");

    /* the parameters of a schedule not in use are not looked at */
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_SGD);
    o.step_size = 0;
    o.warmup_steps = -5;
    tfm_optimizer *opt = tfm_optimizer_create(params, &o);
    ck_assert_ptr_nonnull(opt);
    tfm_optimizer_free(opt);

    tfm_clear_error();
    ck_assert_ptr_null(tfm_optimizer_create(NULL, &o));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "params"));
    tfm_clear_error();
    ck_assert_ptr_null(tfm_optimizer_create(params, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "options"));

    tfm_params *empty = tfm_params_create();
    tfm_clear_error();
    ck_assert_ptr_null(tfm_optimizer_create(empty, &o));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "empty"));
    tfm_params_free(empty);
    tfm_params_free(params);
}
END_TEST

START_TEST(struct_size_versions)
{
    tfm_params *params = two_tensor_store();
    /* a caller whose struct ends after lr: the tail is the kind's defaults,
     * whatever lies beyond (here an invalid beta1) */
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAM);
    o.struct_size = offsetof(tfm_optimizer_options, lr) + sizeof o.lr;
    o.lr = 0.05f;
    o.beta1 = 7.0f;
    o.weight_decay = 3.0f;
    tfm_optimizer *opt = tfm_optimizer_create(params, &o);
    ck_assert_msg(opt != NULL, "%s", tfm_last_error());
    ck_assert_float_eq(tfm_optimizer_lr(opt), 0.05f);
    tfm_optimizer_free(opt);
    tfm_optimizer_options expected;
    tfm_optimizer_options_init(&expected, TFM_OPTIMIZER_ADAM);
    expected.lr = 0.05f;
    run_with(&o, &expected, 3);

    /* ending after the kind: SGD's default rate */
    o.kind = TFM_OPTIMIZER_SGD;
    o.struct_size = offsetof(tfm_optimizer_options, kind) + sizeof o.kind;
    opt = tfm_optimizer_create(params, &o);
    ck_assert_ptr_nonnull(opt);
    ck_assert_float_eq(tfm_optimizer_lr(opt), 1e-2f);
    tfm_optimizer_free(opt);

    /* a struct from a newer header: every known field is read, and the
     * fields this library does not know must be left as init made them */
    struct {
        tfm_optimizer_options known;
        uint32_t newer[4];
    } wide;
    memset(&wide, 0xEE, sizeof wide);
    tfm_optimizer_options_init_sized(&wide.known, TFM_OPTIMIZER_SGD, sizeof wide);
    ck_assert_uint_eq(wide.known.struct_size, sizeof wide);
    ck_assert_uint_eq(wide.newer[3], 0);
    wide.known.lr = 0.25f;
    wide.known.schedule = TFM_SCHEDULE_STEP;
    wide.known.step_size = 1;
    wide.known.gamma = 0.5f;
    opt = tfm_optimizer_create(params, &wide.known);
    ck_assert_ptr_nonnull(opt);
    tfm_optimizer_step(opt);
    ck_assert_float_eq(tfm_optimizer_lr(opt), 0.125f);
    tfm_optimizer_free(opt);
    wide.newer[2] = 1;
    ck_assert_ptr_null(tfm_optimizer_create(params, &wide.known));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "built for a newer libtfm"));
    /* an older program's shorter struct: init writes only its bytes */
    unsigned char narrow[offsetof(tfm_optimizer_options, eps) + 16];
    memset(narrow, 0xEE, sizeof narrow);
    tfm_optimizer_options_init_sized((tfm_optimizer_options *)(void *)narrow, TFM_OPTIMIZER_ADAM,
                                     offsetof(tfm_optimizer_options, eps));
    for (size_t i = offsetof(tfm_optimizer_options, eps); i < sizeof narrow; i++)
        ck_assert_uint_eq(narrow[i], 0xEE);
    /* absurd sizes are refused, not read */
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_SGD);
    o.struct_size = UINT32_MAX;
    ck_assert_ptr_null(tfm_optimizer_create(params, &o));
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "absurd"));
    /* 0: the caller never called tfm_optimizer_options_init */
    o.struct_size = 0;
    ck_assert_ptr_null(tfm_optimizer_create(params, &o));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    tfm_params_free(params);
}
END_TEST

START_TEST(misuse)
{
    tfm_clear_error();
    ck_assert_int_eq(tfm_optimizer_step(NULL), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_optimizer_zero_grad(NULL), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_optimizer_step_count(NULL), -1);
    ck_assert_float_eq(tfm_optimizer_lr(NULL), -1.0f);
    tfm_clear_error();
    ck_assert_float_eq(tfm_optimizer_last_grad_norm(NULL), -1.0f);
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_optimizer_last_grad_norm"));
    tfm_optimizer_free(NULL);

    tfm_params *params = two_tensor_store();
    tfm_optimizer_options o = options_for(TFM_OPTIMIZER_SGD, 0.1f);
    tfm_optimizer *opt = tfm_optimizer_create(params, &o);
    set_grads(params, 1);
    ck_assert_int_eq(tfm_optimizer_zero_grad(opt), TFM_OK);
    for (int i = 0; i < N; i++)
        ck_assert_float_eq(tfm_params_grads(params)[i], 0.0f);

    /* the store grows after the optimizer was made */
    tfm_params_add(params, "late", 1, (const int64_t[]){4});
    tfm_clear_error();
    ck_assert_int_eq(tfm_optimizer_step(opt), TFM_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "13 scalars, 9"));
    ck_assert_int_eq(tfm_optimizer_step_count(opt), 0);
    tfm_optimizer_free(opt);
    tfm_params_free(params);
}
END_TEST

/* Runs steps 1..steps on a fresh two-tensor store with the options and a
 * hook between steps; the final values go to out. */
static void run_steps(const tfm_optimizer_options *o, int steps, float lr_at_3,
                      float weight_decay_of_b, float *out)
{
    tfm_params *params = two_tensor_store();
    tfm_optimizer *opt = tfm_optimizer_create(params, o);
    if (weight_decay_of_b >= 0.0f)
        ck_assert_int_eq(tfm_optimizer_set_weight_decay(opt, 1, weight_decay_of_b), TFM_OK);
    for (int k = 1; k <= steps; k++) {
        if (k == 3 && lr_at_3 > 0.0f)
            ck_assert_int_eq(tfm_optimizer_set_lr(opt, lr_at_3), TFM_OK);
        set_grads(params, k);
        ck_assert_int_eq(tfm_optimizer_step(opt), TFM_OK);
    }
    memcpy(out, tfm_params_values(params), N * sizeof(float));
    tfm_optimizer_free(opt);
    tfm_params_free(params);
}

/* Setting the rate between steps is the same as a schedule that changes it
 * there, and a tensor's own weight decay is the same as an optimizer whose
 * decay is that for every tensor. */
START_TEST(learning_rate_and_weight_decay_between_steps)
{
    for (int kind = TFM_OPTIMIZER_SGD; kind <= TFM_OPTIMIZER_ADAMW; kind++) {
        tfm_optimizer_options o = options_for(kind, 0.05f);
        o.weight_decay = 0.1f;
        float set[N], fresh[N], decayed[N], undecayed[N];
        /* lr changed after two steps: against a reference built from two runs */
        tfm_optimizer_options stepped = o;
        stepped.schedule = TFM_SCHEDULE_STEP;
        stepped.step_size = 2;
        stepped.gamma = 0.5f;
        run_steps(&o, 4, 0.025f, -1.0f, set);
        run_steps(&stepped, 4, 0.0f, -1.0f, fresh);
        ck_assert_int_eq(memcmp(set, fresh, sizeof set), 0);
        /* "w" keeps 0.1, "b" gets 0: each equals a run with that decay everywhere */
        run_steps(&o, 3, 0.0f, 0.0f, set);
        run_steps(&o, 3, 0.0f, -1.0f, decayed);
        tfm_optimizer_options none = o;
        none.weight_decay = 0.0f;
        run_steps(&none, 3, 0.0f, -1.0f, undecayed);
        ck_assert_int_eq(memcmp(set, decayed, 6 * sizeof(float)), 0);
        ck_assert_int_eq(memcmp(set + 6, undecayed + 6, 3 * sizeof(float)), 0);
        ck_assert(memcmp(decayed + 6, undecayed + 6, 3 * sizeof(float)) != 0);
    }

    tfm_params *params = two_tensor_store();
    tfm_optimizer_options o = options_for(TFM_OPTIMIZER_ADAMW, 0.05f);
    tfm_optimizer *opt = tfm_optimizer_create(params, &o);
    ck_assert_float_eq(tfm_optimizer_weight_decay(opt, 1), 1e-2f);
    ck_assert_int_eq(tfm_optimizer_no_decay_for_vectors(opt), TFM_OK);
    ck_assert_float_eq(tfm_optimizer_weight_decay(opt, 0), 1e-2f); /* "w" [2, 3] */
    ck_assert_float_eq(tfm_optimizer_weight_decay(opt, 1), 0.0f);  /* "b" [3] */
    ck_assert_int_eq(tfm_optimizer_set_weight_decay(opt, -1, 0.5f), TFM_OK);
    ck_assert_float_eq(tfm_optimizer_weight_decay(opt, 1), 0.5f);
    ck_assert_int_eq(tfm_optimizer_set_weight_decay(opt, 2, 0.5f), TFM_ERR_RANGE);
    ck_assert_int_eq(tfm_optimizer_set_weight_decay(opt, -2, 0.5f), TFM_ERR_RANGE);
    ck_assert_int_eq(tfm_optimizer_set_weight_decay(opt, 0, -0.5f), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_optimizer_set_weight_decay(opt, 0, NAN), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_optimizer_set_lr(opt, INFINITY), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_optimizer_set_lr(opt, -1.0f), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_optimizer_set_lr: lr -1"));
    ck_assert_float_eq(tfm_optimizer_weight_decay(opt, 5), -1.0f);
    ck_assert_int_eq(tfm_optimizer_set_lr(NULL, 1.0f), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_optimizer_no_decay_for_vectors(NULL), TFM_ERR_NULL);

    /* both go with the saved state */
    ck_assert_int_eq(tfm_optimizer_set_lr(opt, 0.125f), TFM_OK);
    ck_assert_int_eq(tfm_optimizer_set_weight_decay(opt, 0, 0.25f), TFM_OK);
    char path[256];
    temp_path(path, sizeof path, "groups");
    ck_assert_int_eq(tfm_optimizer_save(opt, path), TFM_OK);
    tfm_optimizer *again = tfm_optimizer_create(params, &o);
    ck_assert_int_eq(tfm_optimizer_load(again, path), TFM_OK);
    ck_assert_float_eq(tfm_optimizer_lr(again), 0.125f);
    ck_assert_float_eq(tfm_optimizer_weight_decay(again, 0), 0.25f);
    ck_assert_float_eq(tfm_optimizer_weight_decay(again, 1), 0.5f);
    unlink(path);
    tfm_optimizer_free(again);
    tfm_optimizer_free(opt);
    tfm_params_free(params);
}
END_TEST

static Suite *optim_suite(void)
{
    Suite *s = suite_create("optim");
    TCase *updates = tcase_create("updates");
    tcase_add_test(updates, adam_matches_reference);
    tcase_add_test(updates, adamw_matches_reference);
    tcase_add_test(updates, sgd_matches_reference);
    tcase_add_test(updates, defaults_are_pytorchs);
    tcase_add_test(updates, schedules);
    tcase_add_test(updates, clipping_uses_the_clipped_gradient);
    tcase_add_test(updates, non_finite_gradients_refuse_the_step);
    tcase_add_test(updates, frozen_tensors_are_not_updated);
    tcase_add_test(updates, adam_fits_a_line);
    tcase_add_test(updates, learning_rate_and_weight_decay_between_steps);
    suite_add_tcase(s, updates);
    TCase *files = tcase_create("state file");
    tcase_add_test(files, save_and_load_resume_identically);
    tcase_add_test(files, state_file_contents);
    tcase_add_test(files, load_errors_change_nothing);
    suite_add_tcase(s, files);
    TCase *options = tcase_create("options");
    tcase_add_test(options, invalid_options);
    tcase_add_test(options, struct_size_versions);
    tcase_add_test(options, misuse);
    suite_add_tcase(s, options);
    return s;
}

TFM_CHECK_MAIN(optim_suite)
