/* A small training run with every source of state a resume must carry:
 * dropout (the model's stream), batches drawn from the caller's stream,
 * AdamW with warm-up and cosine decay, weight decay only on matrices, a
 * learning rate changed by hand half-way, gradient clipping. Shared by the
 * resume test and the program it starts as a fresh process. */
#ifndef TFM_TESTS_TRAINING_WORKLOAD_H
#define TFM_TESTS_TRAINING_WORKLOAD_H

#include <tfm/tfm.h>

enum { WORKLOAD_BATCH = 3, WORKLOAD_SRC = 7, WORKLOAD_TGT = 6, WORKLOAD_STEPS = 12 };

static inline void workload_model_options(tfm_model_options *o)
{
    tfm_model_options_init(o);
    o->src_vocab = 17;
    o->tgt_vocab = 13;
    o->max_src_len = WORKLOAD_SRC;
    o->max_tgt_len = WORKLOAD_TGT;
    o->encoder_layers = 1;
    o->decoder_layers = 2;
    o->positions = TFM_POSITIONS_LEARNED;
    o->d_model = 16;
    o->heads = 4;
    o->d_ff = 24;
    o->dropout = 0.2f;
    o->seed = 11;
}

static inline void workload_optimizer_options(tfm_optimizer_options *o)
{
    tfm_optimizer_options_init(o, TFM_OPTIMIZER_ADAMW);
    o->lr = 3e-3f;
    o->weight_decay = 0.05f;
    o->clip_norm = 1.0f;
    o->schedule = TFM_SCHEDULE_WARMUP_COSINE;
    o->warmup_steps = 3;
    o->total_steps = WORKLOAD_STEPS;
}

static inline tfm_optimizer *workload_optimizer(tfm_model *model)
{
    tfm_optimizer_options o;
    workload_optimizer_options(&o);
    tfm_optimizer *opt = tfm_optimizer_create(tfm_model_params(model), &o);
    if (opt && tfm_optimizer_no_decay_for_vectors(opt) != TFM_OK) {
        tfm_optimizer_free(opt);
        return NULL;
    }
    return opt;
}

/* Steps [first, last) of the run; the loss of each into losses[step] when
 * losses is not NULL. TFM_OK or the first error. */
static inline tfm_status workload_steps(tfm_model *model, tfm_optimizer *opt, tfm_rng *data,
                                 int first, int last, float *losses)
{
    tfm_tape *tape = tfm_tape_create();
    if (!tape)
        return tfm_last_status();
    tfm_status s = TFM_OK;
    for (int step = first; step < last && s == TFM_OK; step++) {
        int32_t src[WORKLOAD_BATCH * WORKLOAD_SRC], tgt[WORKLOAD_BATCH * WORKLOAD_TGT];
        for (int i = 0; i < WORKLOAD_BATCH * WORKLOAD_SRC; i++)
            src[i] = (int32_t)(tfm_rng_next_u64(data) % 17);
        for (int i = 0; i < WORKLOAD_BATCH * WORKLOAD_TGT; i++)
            tgt[i] = (int32_t)(tfm_rng_next_u64(data) % 13);
        tfm_tensor *src_ids = tfm_tensor_from_i32(2, (const int64_t[]){WORKLOAD_BATCH, WORKLOAD_SRC}, src);
        tfm_tensor *in = tfm_tensor_from_i32(2, (const int64_t[]){WORKLOAD_BATCH, WORKLOAD_TGT - 1}, tgt);
        int32_t next[WORKLOAD_BATCH * (WORKLOAD_TGT - 1)];
        for (int b = 0; b < WORKLOAD_BATCH; b++)
            for (int t = 0; t < WORKLOAD_TGT - 1; t++)
                next[b * (WORKLOAD_TGT - 1) + t] = tgt[b * WORKLOAD_TGT + t + 1];
        tfm_tensor *out = tfm_tensor_from_i32(2, (const int64_t[]){WORKLOAD_BATCH, WORKLOAD_TGT - 1}, next);
        if (step == WORKLOAD_STEPS / 2)
            s = tfm_optimizer_set_lr(opt, 2e-3f);
        tfm_tensor *mask = tfm_mask_causal(tape, WORKLOAD_TGT - 1, TFM_F32);
        tfm_tensor *logits = tfm_model_forward(tape, model, src_ids, in, NULL, mask, NULL, NULL, NULL, NULL);
        tfm_tensor *loss = tfm_cross_entropy(tape, logits, out, -100, 0.1f);
        float value = 0.0f;
        if (s == TFM_OK && !loss)
            s = tfm_last_status();
        if (s == TFM_OK)
            s = tfm_tensor_item(loss, &value);
        if (s == TFM_OK)
            s = tfm_optimizer_zero_grad(opt);
        if (s == TFM_OK)
            s = tfm_tape_backward(tape, loss);
        if (s == TFM_OK)
            s = tfm_optimizer_step(opt);
        if (s == TFM_OK)
            s = tfm_tape_reset(tape);
        if (losses)
            losses[step] = value;
        tfm_tensor_free(src_ids);
        tfm_tensor_free(in);
        tfm_tensor_free(out);
    }
    tfm_tape_free(tape);
    return s;
}

#endif
