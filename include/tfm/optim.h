/** @file
 * libtfm optimizers over a parameter store: SGD with momentum, Adam, AdamW,
 * with learning-rate schedules, optional gradient clipping by global norm,
 * and a guard that refuses a step on NaN/Inf gradients. The optimizer's
 * state (moments, momentum) lives in one contiguous block, like the
 * parameters and gradients it updates.
 *
 * Ownership: an optimizer is caller-owned (free with tfm_optimizer_free())
 * and refers to its parameter store without owning it: the store (or the
 * model holding it) must outlive every use of the optimizer.
 *
 * Errors: a status, or for the getters the value said, with the message
 * (common.h); a refused step or load changes neither the parameters nor the
 * optimizer's state.
 *
 * Threads: one thread at a time per optimizer and its store. */
#ifndef TFM_OPTIM_H
#define TFM_OPTIM_H

#include "params.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An optimizer and its state; opaque. */
typedef struct tfm_optimizer tfm_optimizer;

/** Which update rule: one of the TFM_OPTIMIZER_ values. */
typedef int32_t tfm_optimizer_kind;
/** The update rules, as PyTorch's torch.optim classes of the same names. */
enum {
    TFM_OPTIMIZER_SGD = 0,  /**< SGD, with momentum when set */
    TFM_OPTIMIZER_ADAM = 1, /**< Adam, weight decay as an L2 term */
    TFM_OPTIMIZER_ADAMW = 2 /**< AdamW, decoupled weight decay */
};

/** How the learning rate changes with the steps: one of the
 * TFM_SCHEDULE_ values. */
typedef int32_t tfm_schedule;
/** The schedules, with t the steps already taken (0 for the first step). */
enum {
    TFM_SCHEDULE_CONSTANT = 0,      /**< lr at every step */
    TFM_SCHEDULE_STEP = 1,          /**< lr * gamma^floor(t / step_size), as StepLR */
    TFM_SCHEDULE_WARMUP_INVSQRT = 2, /**< s = t + 1: lr * min(s / warmup, sqrt(warmup / s)) */
    /** lr * (t + 1) / warmup while t < warmup, then half a cosine from lr
     * down to 0 at t = total_steps, and 0 after it */
    TFM_SCHEDULE_WARMUP_COSINE = 3
};

/** An optimizer's options. Fill with tfm_optimizer_options_init() for the
 * kind, then change fields; the library reads only the fields of the size
 * the caller compiled with. */
typedef struct tfm_optimizer_options {
    uint32_t struct_size;       /**< set by tfm_optimizer_options_init */
    tfm_optimizer_kind kind;    /**< set by tfm_optimizer_options_init */
    float lr;                   /**< the base learning rate, > 0 */
    float beta1;                /**< Adam, AdamW: first-moment decay */
    float beta2;                /**< Adam, AdamW: second-moment decay */
    float eps;                  /**< Adam, AdamW: added to the denominator */
    float weight_decay;         /**< L2 in the gradient (SGD, Adam); decoupled (AdamW) */
    float momentum;             /**< SGD */
    float clip_norm;            /**< > 0: clip the global gradient norm first */
    tfm_schedule schedule;      /**< the learning rate's schedule */
    int64_t step_size;          /**< TFM_SCHEDULE_STEP */
    float gamma;                /**< TFM_SCHEDULE_STEP */
    int64_t warmup_steps;       /**< TFM_SCHEDULE_WARMUP_INVSQRT, _COSINE */
    int64_t total_steps;        /**< TFM_SCHEDULE_WARMUP_COSINE */
} tfm_optimizer_options;

/** PyTorch's defaults for the kind: lr 1e-3 (SGD: 1e-2), betas 0.9/0.999,
 * eps 1e-8, weight decay 0 (AdamW: 1e-2), momentum 0, no clipping, constant
 * schedule (step_size 1, gamma 0.1, warmup_steps 4000 when chosen;
 * total_steps has no default: the cosine schedule needs it set). */
TFM_API void tfm_optimizer_options_init_sized(tfm_optimizer_options *options,
                                              tfm_optimizer_kind kind,
                                              uint32_t struct_size);
/** The defaults, for a struct of the size this program was compiled with. */
#define tfm_optimizer_options_init(options, kind)                              \
    tfm_optimizer_options_init_sized((options), (kind), (uint32_t)sizeof *(options))
/** A new optimizer over every parameter of the store, its state zero.
 * Caller-owned: free with tfm_optimizer_free(). NULL with TFM_ERR_NULL,
 * TFM_ERR_ARG (an option out of range, named in the message) or
 * TFM_ERR_NOMEM. The store must not gain parameters afterwards. */
TFM_API tfm_optimizer *tfm_optimizer_create(tfm_params *params,
                                            const tfm_optimizer_options *options);
/** Frees the optimizer and its state (not the store); NULL is a no-op. */
TFM_API void tfm_optimizer_free(tfm_optimizer *optimizer);

/** Sets every gradient of the store to zero. */
TFM_API tfm_status tfm_optimizer_zero_grad(tfm_optimizer *optimizer);
/** One update of every parameter that requires grad. NaN or Inf in the
 * gradients: TFM_ERR_NUMERIC, nothing is changed and the step is not
 * counted. */
TFM_API tfm_status tfm_optimizer_step(tfm_optimizer *optimizer);

/** Sets the base learning rate between steps (the rate the schedule
 * scales; with the constant schedule, the rate itself), as assigning a
 * PyTorch param_group's "lr"; finite and > 0, as at creation (else
 * TFM_ERR_ARG). Saved and restored with the state. */
TFM_API tfm_status tfm_optimizer_set_lr(tfm_optimizer *optimizer, float lr);

/** Weight decay per parameter tensor (index as tfm_params_at; -1 sets every
 * one), as PyTorch's parameter groups: every tensor starts with the
 * options' weight_decay. Saved and restored with the state. */
TFM_API tfm_status tfm_optimizer_set_weight_decay(tfm_optimizer *optimizer,
                                                  int64_t index,
                                                  float weight_decay);
/** -1 with TFM_ERR_NULL or TFM_ERR_RANGE. */
TFM_API float tfm_optimizer_weight_decay(const tfm_optimizer *optimizer,
                                         int64_t index);
/** The usual AdamW recipe: no decay for tensors of fewer than two axes
 * (biases, layer norms' weights, scales); matrices keep theirs. */
TFM_API tfm_status tfm_optimizer_no_decay_for_vectors(tfm_optimizer *optimizer);

/** Steps taken (refused steps not counted); -1 for a NULL optimizer, as
 * every getter here. */
TFM_API int64_t tfm_optimizer_step_count(const tfm_optimizer *optimizer);
/** The learning rate the next step will use. */
TFM_API float tfm_optimizer_lr(const tfm_optimizer *optimizer);
/** The global gradient norm the last step saw (before clipping). */
TFM_API float tfm_optimizer_last_grad_norm(const tfm_optimizer *optimizer);

/** The optimizer's state (step count, base learning rate, weight decays,
 * moments) as safetensors, atomically; loading checks it all fits this
 * optimizer before changing anything. tfm_training_save (training.h) keeps
 * it in one file with the model and the random streams. */
TFM_API tfm_status tfm_optimizer_save(const tfm_optimizer *optimizer,
                                      const char *path);
/** Restores what tfm_optimizer_save() wrote into an optimizer over the
 * same parameters (TFM_ERR_FORMAT when it does not fit; nothing changes). */
TFM_API tfm_status tfm_optimizer_load(tfm_optimizer *optimizer,
                                      const char *path);

#ifdef __cplusplus
}
#endif

#endif
