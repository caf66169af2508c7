/* Bad calls to params.h and optim.h (lib/core/params.c, lib/optim): stores,
 * gradient clipping, optimizers made with every option out of range, steps
 * in a wrong state, learning rates and weight decay. The fixture, the
 * table's macros and the run are bad_input.h's. */
#include "bad_input.h"
#include "check_main.h"

/* --- calls that need state or options of their own ------------------------------- */

static tfm_status step_after_store_grew(void)
{
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "a", 1, SHAPE(3));
    tfm_optimizer_options o = optimizer_options(TFM_OPTIMIZER_SGD);
    tfm_optimizer *opt = tfm_optimizer_create(params, &o);
    tfm_params_add(params, "b", 1, SHAPE(2));
    tfm_status s = tfm_optimizer_step(opt);
    tfm_optimizer_free(opt);
    tfm_params_free(params);
    return s;
}

static tfm_status step_on_nan_gradient(tfm_optimizer_kind kind)
{
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "a", 1, SHAPE(3));
    tfm_params_grads(params)[1] = NAN;
    tfm_optimizer_options o = optimizer_options(kind);
    tfm_optimizer *opt = tfm_optimizer_create(params, &o);
    tfm_status s = tfm_optimizer_step(opt);
    tfm_optimizer_free(opt);
    tfm_params_free(params);
    return s;
}

static tfm_status clip_infinite_gradient(void)
{
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "a", 1, SHAPE(3));
    tfm_params_grads(params)[0] = INFINITY;
    tfm_status s = tfm_params_clip_grad_norm(params, 1.0f, NULL);
    tfm_params_free(params);
    return s;
}

static tfm_optimizer *optimizer_with(tfm_optimizer_kind kind, int field, double value)
{
    tfm_optimizer_options o = optimizer_options(kind);
    switch (field) {
    case 0: o.struct_size = (uint32_t)value; break;
    case 1: o.kind = (tfm_optimizer_kind)value; break;
    case 2: o.lr = (float)value; break;
    case 3: o.beta1 = (float)value; break;
    case 4: o.beta2 = (float)value; break;
    case 5: o.eps = (float)value; break;
    case 6: o.weight_decay = (float)value; break;
    case 7: o.momentum = (float)value; break;
    case 8: o.clip_norm = (float)value; break;
    case 9: o.schedule = (tfm_schedule)value; break;
    case 10: o.schedule = TFM_SCHEDULE_STEP; o.step_size = (int64_t)value; break;
    case 11: o.schedule = TFM_SCHEDULE_STEP; o.gamma = (float)value; break;
    case 12: o.schedule = TFM_SCHEDULE_WARMUP_INVSQRT; o.warmup_steps = (int64_t)value; break;
    case 13:
        o.schedule = TFM_SCHEDULE_WARMUP_COSINE;
        o.warmup_steps = 10;
        o.total_steps = (int64_t)value;
        break;
    case 14:
        o.schedule = TFM_SCHEDULE_WARMUP_COSINE;
        o.warmup_steps = (int64_t)value;
        o.total_steps = 100;
        break;
    }
    tfm_optimizer *opt = tfm_optimizer_create(fx.params, &o);
    tfm_optimizer_free(opt);
    return opt;
}

/* Into a store of its own holding "taken", so that the shared ones never grow. */
static tfm_tensor *add_param(const char *name, int32_t ndim, const int64_t *shape)
{
    tfm_params *own = tfm_params_create();
    tfm_params_add(own, "taken", 1, SHAPE(2));
    tfm_tensor *t = tfm_params_add(own, name, ndim, shape);
    tfm_params_free(own);
    return t;
}

/* --- the table ------------------------------------------------------------------------ */

static int bad_calls(int index, bad_case *c)
{
    int n = 0;
    fixture *f = &fx;
    float buf[64] = {0};
    const int64_t huge = INT64_MAX, big = (int64_t)1 << 40;

    /* params.h */
    NUL(tfm_params_add, E_NULL, tfm_params_add(NULL, "w", 1, SHAPE(2)));
    NUL(tfm_params_add, E_NULL, add_param(NULL, 1, SHAPE(2)));
    NUL(tfm_params_add, E_ARG, add_param("", 1, SHAPE(2)));
    NUL(tfm_params_add, E_ARG, add_param(long_name(), 1, SHAPE(2)));
    NUL(tfm_params_add, E_ARG, add_param("taken", 1, SHAPE(2)));
    NUL(tfm_params_add, E_ARG, add_param("w\xff", 1, SHAPE(2)));      /* no save could write it */
    NUL(tfm_params_add, E_ARG, add_param("\xc0\xaf", 1, SHAPE(2)));  /* overlong '/' */
    NUL(tfm_params_add, E_ARG, add_param("w", 0, SHAPE(2)));
    NUL(tfm_params_add, E_ARG, add_param("w", 5, SHAPE(1, 1, 1, 1, 2)));
    NUL(tfm_params_add, E_NULL, add_param("w", 1, NULL));
    NUL(tfm_params_add, E_SHAPE, add_param("w", 2, SHAPE(2, 0)));
    NUL(tfm_params_add, E_SIZE, add_param("w", 2, SHAPE(huge, 2)));
    NUL(tfm_params_add, E_SIZE, add_param("w", 3, SHAPE(big, big, big)));
    NEG(tfm_params_count, E_NULL, tfm_params_count(NULL));
    NEG(tfm_params_numel, E_NULL, tfm_params_numel(NULL));
    NUL(tfm_params_at, E_NULL, tfm_params_at(NULL, 0));
    NUL(tfm_params_at, E_RANGE, tfm_params_at(f->params, -1));
    NUL(tfm_params_at, E_RANGE, tfm_params_at(f->params, tfm_params_count(f->params)));
    NUL(tfm_params_at, E_RANGE, tfm_params_at(f->params, huge));
    NUL(tfm_params_at, E_RANGE, tfm_params_at(f->empty, 0));
    NUL(tfm_params_name, E_NULL, tfm_params_name(NULL, 0));
    NUL(tfm_params_name, E_RANGE, tfm_params_name(f->params, INT64_MIN));
    NUL(tfm_params_name, E_RANGE, tfm_params_name(f->small, 1));
    NUL(tfm_params_find, E_NULL, tfm_params_find(NULL, "w"));
    NUL(tfm_params_find, E_NULL, tfm_params_find(f->params, NULL));
    NUL(tfm_params_find, E_ARG, tfm_params_find(f->params, "no.such.parameter"));
    NUL(tfm_params_find, E_ARG, tfm_params_find(f->empty, ""));
    NUL(tfm_params_values, E_NULL, tfm_params_values(NULL));
    NUL(tfm_params_grads, E_NULL, tfm_params_grads(NULL));
    ST(tfm_params_zero_grad, E_NULL, tfm_params_zero_grad(NULL));
    ST(tfm_params_clip_grad_norm, E_NULL, tfm_params_clip_grad_norm(NULL, 1.0f, NULL));
    ST(tfm_params_clip_grad_norm, E_ARG, tfm_params_clip_grad_norm(f->params, 0.0f, NULL));
    ST(tfm_params_clip_grad_norm, E_ARG, tfm_params_clip_grad_norm(f->params, -1.0f, buf));
    ST(tfm_params_clip_grad_norm, E_ARG, tfm_params_clip_grad_norm(f->params, NAN, NULL));
    ST(tfm_params_clip_grad_norm, E_NUMERIC, clip_infinite_gradient());

    /* optim.h */
    NUL(tfm_optimizer_create, E_NULL, tfm_optimizer_create(NULL, &(tfm_optimizer_options){0}));
    NUL(tfm_optimizer_create, E_NULL, tfm_optimizer_create(f->params, NULL));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 0, 0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 0, 4));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 1, 3));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 1, -1));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 2, -1e-3));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 2, NAN));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 2, 0.0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 2, -0.0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 2, INFINITY));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 3, 1.0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 3, -0.1));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 4, 1.5));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 4, NAN));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 5, -1e-8));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 6, -0.01));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 6, NAN));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 7, -0.9));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 8, -1.0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 8, INFINITY));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 9, 4));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 9, -1));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 10, 0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 11, -0.5));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 11, NAN));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 12, 0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 12, INT64_MIN));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 13, 10));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 13, 0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 14, -1));
    NUL(tfm_optimizer_create, E_ARG, tfm_optimizer_create(f->empty, &(tfm_optimizer_options){.struct_size = sizeof(tfm_optimizer_options)}));
    ST(tfm_optimizer_zero_grad, E_NULL, tfm_optimizer_zero_grad(NULL));
    ST(tfm_optimizer_step, E_NULL, tfm_optimizer_step(NULL));
    ST(tfm_optimizer_step, E_STATE, step_after_store_grew());
    ST(tfm_optimizer_step, E_NUMERIC, step_on_nan_gradient(TFM_OPTIMIZER_ADAM));
    ST(tfm_optimizer_step, E_NUMERIC, step_on_nan_gradient(TFM_OPTIMIZER_SGD));
    NEG(tfm_optimizer_step_count, E_NULL, tfm_optimizer_step_count(NULL));
    NEG(tfm_optimizer_lr, E_NULL, tfm_optimizer_lr(NULL));
    NEG(tfm_optimizer_last_grad_norm, E_NULL, tfm_optimizer_last_grad_norm(NULL));
    ST(tfm_optimizer_save, E_NULL, tfm_optimizer_save(NULL, f->adam_path));
    ST(tfm_optimizer_save, E_NULL, tfm_optimizer_save(f->adam, NULL));
    ST(tfm_optimizer_save, E_ARG, tfm_optimizer_save(f->adam, ""));
    ST(tfm_optimizer_save, E_IO, tfm_optimizer_save(f->adam, f->missing_dir_path));
    ST(tfm_optimizer_save, E_IO, tfm_optimizer_save(f->adam, f->folder_path));
    ST(tfm_optimizer_load, E_NULL, tfm_optimizer_load(NULL, f->adam_path));
    ST(tfm_optimizer_load, E_NULL, tfm_optimizer_load(f->adam, NULL));
    ST(tfm_optimizer_load, E_IO, tfm_optimizer_load(f->adam, ""));
    ST(tfm_optimizer_load, E_IO, tfm_optimizer_load(f->adam, f->missing_path));
    ST(tfm_optimizer_load, E_IO, tfm_optimizer_load(f->adam, f->missing_dir_path));
    ST(tfm_optimizer_load, E_IO, tfm_optimizer_load(f->adam, f->folder_path));
    ST(tfm_optimizer_load, E_FORMAT, tfm_optimizer_load(f->adam, f->empty_path));
    ST(tfm_optimizer_load, E_FORMAT, tfm_optimizer_load(f->adam, f->text_path));
    ST(tfm_optimizer_load, E_FORMAT, tfm_optimizer_load(f->adam, f->params_path));
    ST(tfm_optimizer_load, E_ARG, tfm_optimizer_load(f->adam, f->sgd_path));
    ST(tfm_optimizer_load, E_SHAPE, tfm_optimizer_load(f->adam, f->small_adam_path));
    ST(tfm_optimizer_set_lr, E_NULL, tfm_optimizer_set_lr(NULL, 0.1f));
    ST(tfm_optimizer_set_lr, E_ARG, tfm_optimizer_set_lr(f->adam, -0.1f));
    ST(tfm_optimizer_set_lr, E_ARG, tfm_optimizer_set_lr(f->adam, NAN));
    ST(tfm_optimizer_set_lr, E_ARG, tfm_optimizer_set_lr(f->adam, INFINITY));
    ST(tfm_optimizer_set_lr, E_ARG, tfm_optimizer_set_lr(f->adam, 0.0f)); /* "> 0" */
    ST(tfm_optimizer_set_weight_decay, E_NULL, tfm_optimizer_set_weight_decay(NULL, 0, 0.1f));
    ST(tfm_optimizer_set_weight_decay, E_RANGE, tfm_optimizer_set_weight_decay(f->adam, -2, 0.1f));
    ST(tfm_optimizer_set_weight_decay, E_RANGE,
        tfm_optimizer_set_weight_decay(f->adam, tfm_params_count(f->params), 0.1f));
    ST(tfm_optimizer_set_weight_decay, E_ARG, tfm_optimizer_set_weight_decay(f->adam, 0, -1.0f));
    ST(tfm_optimizer_set_weight_decay, E_ARG, tfm_optimizer_set_weight_decay(f->adam, -1, NAN));
    NEG(tfm_optimizer_weight_decay, E_NULL, tfm_optimizer_weight_decay(NULL, 0));
    NEG(tfm_optimizer_weight_decay, E_RANGE, tfm_optimizer_weight_decay(f->adam, huge));
    ST(tfm_optimizer_no_decay_for_vectors, E_NULL, tfm_optimizer_no_decay_for_vectors(NULL));
    return -1;
}

/* Frees and options-inits of NULL, which must record no error. */
static void free_nulls(void)
{
    tfm_params_free(NULL);
    tfm_optimizer_free(NULL);
    tfm_optimizer_options_init_sized(NULL, TFM_OPTIMIZER_ADAM, sizeof(tfm_optimizer_options));
}

static Suite *suite(void)
{
    return bad_input_suite("bad_input_optim", bad_calls, 104, free_nulls);
}

TFM_CHECK_MAIN(suite)
