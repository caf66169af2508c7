/* Fine-tuning with parts frozen (tfm_model_freeze): the published Marian
 * fixture (tests/marian) trains a few steps with its embeddings and
 * encoder frozen; those stay bit for bit, get no gradient, the rest
 * moves, the loss falls, and the saved model reloads with them. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tfm/tfm.h>

#include "check_main.h"

static tfm_model *marian(void)
{
    tfm_model *model = tfm_model_from_pretrained(TFM_TESTS_DIR "/marian");
    ck_assert_msg(model != NULL, "%s", tfm_last_error());
    return model;
}

static int frozen_name(const char *name)
{
    return strncmp(name, "encoder.", 8) == 0 || strstr(name, "embedding") != NULL ||
           strstr(name, "positions") != NULL;
}

START_TEST(parts_parse)
{
    tfm_model_parts parts = 99;
    ck_assert_int_eq(tfm_model_parts_parse("embeddings,encoder", &parts), TFM_OK);
    ck_assert_uint_eq(parts, TFM_MODEL_PART_EMBEDDINGS | TFM_MODEL_PART_ENCODER);
    ck_assert_int_eq(tfm_model_parts_parse("decoder,output", &parts), TFM_OK);
    ck_assert_uint_eq(parts, TFM_MODEL_PART_DECODER | TFM_MODEL_PART_OUTPUT);
    ck_assert_int_eq(tfm_model_parts_parse("", &parts), TFM_OK);
    ck_assert_uint_eq(parts, 0);
    parts = 5;
    ck_assert_int_eq(tfm_model_parts_parse("encoder,attention", &parts), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "'attention' is not a part"));
    ck_assert_int_eq(tfm_model_parts_parse("encoder,", &parts), TFM_OK);
    ck_assert_uint_eq(parts, TFM_MODEL_PART_ENCODER);
    ck_assert_int_eq(tfm_model_parts_parse("encoders", &parts), TFM_ERR_ARG);
    ck_assert_uint_eq(parts, TFM_MODEL_PART_ENCODER); /* unchanged on error */
    ck_assert_int_eq(tfm_model_parts_parse(NULL, &parts), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_model_parts_parse("encoder", NULL), TFM_ERR_NULL);
}
END_TEST

START_TEST(freeze_marks_the_parts)
{
    tfm_model *model = marian();
    tfm_params *params = tfm_model_params(model);
    ck_assert_uint_eq(tfm_model_frozen(model), 0);
    ck_assert_int_eq(tfm_model_freeze(model, TFM_MODEL_PART_EMBEDDINGS | TFM_MODEL_PART_ENCODER),
                     TFM_OK);
    ck_assert_uint_eq(tfm_model_frozen(model),
                      TFM_MODEL_PART_EMBEDDINGS | TFM_MODEL_PART_ENCODER);
    for (int64_t i = 0; i < tfm_params_count(params); i++)
        ck_assert_msg(tfm_tensor_requires_grad(tfm_params_at(params, i)) ==
                          !frozen_name(tfm_params_name(params, i)),
                      "%s", tfm_params_name(params, i));
    ck_assert_int_eq(tfm_model_freeze(model, 0), TFM_OK); /* everything trains again */
    ck_assert_uint_eq(tfm_model_frozen(model), 0);
    ck_assert_int_eq(tfm_model_freeze(model, 16), TFM_ERR_ARG);
    ck_assert_uint_eq(tfm_model_frozen(model), 0);
    ck_assert_int_eq(tfm_model_freeze(NULL, 0), TFM_ERR_NULL);
    ck_assert_uint_eq(tfm_model_frozen(NULL), 0);
    /* an adapter trains over a base frozen whole: no part of it is chosen then */
    tfm_adapter_options adapter;
    tfm_adapter_options_init(&adapter);
    ck_assert_int_eq(tfm_model_add_adapter(model, "a", &adapter), TFM_OK);
    ck_assert_int_eq(tfm_model_use_adapter(model, "a"), TFM_OK);
    ck_assert_int_eq(tfm_model_freeze(model, TFM_MODEL_PART_ENCODER), TFM_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "adapter is in use"));
    ck_assert_int_eq(tfm_model_use_adapter(model, NULL), TFM_OK);
    ck_assert_int_eq(tfm_model_freeze(model, TFM_MODEL_PART_ENCODER), TFM_OK);
    ck_assert_uint_eq(tfm_model_frozen(model), TFM_MODEL_PART_ENCODER);
    ck_assert_int_eq(tfm_model_quantize(model, TFM_QUANTIZE_LAYERS), TFM_OK);
    ck_assert_int_eq(tfm_model_freeze(model, TFM_MODEL_PART_ENCODER), TFM_ERR_STATE);
    tfm_model_free(model);
}
END_TEST

/* The loss of one fixed pair of sentences (ids of the fixture's vocabulary:
 * the source ends with </s> = 0, the decoder starts at 306). */
static float step_loss(tfm_tape *tape, tfm_model *model)
{
    const int32_t src[] = {12, 40, 77, 150, 0}, tgt_in[] = {306, 9, 81, 200},
                  labels[] = {9, 81, 200, 0};
    tfm_tensor *s = tfm_tensor_from_i32(2, (const int64_t[]){1, 5}, src);
    tfm_tensor *t = tfm_tensor_from_i32(2, (const int64_t[]){1, 4}, tgt_in);
    tfm_tensor *l = tfm_tensor_from_i32(1, (const int64_t[]){4}, labels);
    tfm_tensor *causal = tfm_mask_causal(tape, 4, TFM_I32);
    tfm_tensor *logits =
        tfm_model_forward(tape, model, s, t, NULL, causal, NULL, NULL, NULL, NULL);
    tfm_tensor *flat = tfm_reshape(tape, logits, 2, (const int64_t[]){4, -1});
    tfm_tensor *loss = tfm_cross_entropy(tape, flat, l, -100, 0.0f);
    float value = -1.0f;
    ck_assert_msg(loss && tfm_tape_backward(tape, loss) == TFM_OK &&
                      tfm_tensor_item(loss, &value) == TFM_OK,
                  "%s", tfm_last_error());
    tfm_tensor_free(s);
    tfm_tensor_free(t);
    tfm_tensor_free(l);
    return value;
}

START_TEST(frozen_parts_stay_bit_for_bit)
{
    tfm_model *model = marian();
    tfm_params *params = tfm_model_params(model);
    ck_assert_int_eq(tfm_model_freeze(model, TFM_MODEL_PART_EMBEDDINGS | TFM_MODEL_PART_ENCODER),
                     TFM_OK);
    ck_assert_int_eq(tfm_model_set_training(model, 1), TFM_OK);
    int64_t numel = tfm_params_numel(params);
    float *before = malloc((size_t)numel * sizeof *before);
    memcpy(before, tfm_params_values(params), (size_t)numel * sizeof *before);
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAMW);
    o.lr = 1e-2f;
    o.weight_decay = 0.1f; /* decay must not touch frozen tensors either */
    tfm_optimizer *adam = tfm_optimizer_create(params, &o);
    tfm_tape *tape = tfm_tape_create();
    float first = 0.0f, last = 0.0f;
    for (int step = 0; step < 20; step++) {
        ck_assert_int_eq(tfm_optimizer_zero_grad(adam), TFM_OK);
        last = step_loss(tape, model);
        if (step == 0) {
            first = last;
            /* no gradient reaches a frozen tensor */
            for (int64_t i = 0; i < tfm_params_count(params); i++) {
                tfm_tensor *p = tfm_params_at(params, i);
                if (!frozen_name(tfm_params_name(params, i)))
                    continue;
                const float *g = tfm_tensor_grad_f32(p);
                for (int64_t j = 0; g && j < tfm_tensor_numel(p); j++)
                    ck_assert_msg(g[j] == 0.0f, "%s", tfm_params_name(params, i));
            }
        }
        ck_assert_int_eq(tfm_optimizer_step(adam), TFM_OK);
        tfm_tape_reset(tape);
    }
    ck_assert_msg(last < 0.5f * first, "loss %g then %g", (double)first, (double)last);
    const float *after = tfm_params_values(params);
    for (int64_t i = 0; i < tfm_params_count(params); i++) {
        tfm_tensor *p = tfm_params_at(params, i);
        int64_t at = tfm_tensor_data_f32(p) - tfm_params_values(params), n = tfm_tensor_numel(p);
        int same = memcmp(before + at, after + at, (size_t)n * sizeof *after) == 0;
        const char *name = tfm_params_name(params, i);
        if (frozen_name(name))
            ck_assert_msg(same, "frozen %s changed", name);
        else if (tfm_tensor_ndim(p) == 2)
            ck_assert_msg(!same, "trained %s did not change", name);
    }
    /* saved and reloaded: the frozen values are still the folder's */
    char path[] = "/tmp/tfm_fine_tune_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(tfm_model_save(model, path), TFM_OK);
    tfm_model *again = tfm_model_load(path);
    ck_assert_msg(again != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_params_numel(tfm_model_params(again)), numel);
    ck_assert_int_eq(memcmp(tfm_params_values(tfm_model_params(again)), after,
                            (size_t)numel * sizeof *after), 0);
    ck_assert_uint_eq(tfm_model_frozen(again), 0); /* a training choice, not saved */
    unlink(path);
    tfm_model_free(again);
    tfm_tape_free(tape);
    tfm_optimizer_free(adam);
    free(before);
    tfm_model_free(model);
}
END_TEST

static Suite *fine_tune_suite(void)
{
    Suite *s = suite_create("fine_tune");
    TCase *tc = tcase_create("fine_tune");
    tcase_add_test(tc, parts_parse);
    tcase_add_test(tc, freeze_marks_the_parts);
    tcase_add_test(tc, frozen_parts_stay_bit_for_bit);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(fine_tune_suite)
