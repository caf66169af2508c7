/* docs/guide.md, part 9: fine-tuning a published model's folder (or a
 * model file) on your own pairs, its embeddings frozen, then saving it.
 *   usage: fine_tune FOLDER OUT.safetensors */
#include <stdio.h>
#include <string.h>
#include <tfm/tfm.h>

/* One pair as the model reads it: the source with what its family puts
 * around it, the decoder's inputs (its start id, then the target's ids)
 * and its labels (the target's ids, then </s>). */
static tfm_tensor *loss_of(tfm_tape *tape, tfm_model *model, const char *source,
                           const char *target)
{
    int32_t src[64], tgt[64], in[65], labels[65];
    int64_t n_src = 0, n_tgt = 0;
    if (tfm_model_encode_text(model, source, (int64_t)strlen(source), src, 64, &n_src) != TFM_OK ||
        tfm_tokenizer_encode(tfm_model_tokenizer(model, 1), target, (int64_t)strlen(target), tgt,
                             64, &n_tgt) != TFM_OK)
        return NULL;
    in[0] = tfm_model_bos_id(model);
    for (int64_t i = 0; i < n_tgt; i++)
        in[i + 1] = labels[i] = tgt[i];
    labels[n_tgt] = tfm_model_eos_id(model);
    tfm_tensor *s = tfm_tensor_from_i32(2, (int64_t[]){1, n_src}, src);
    tfm_tensor *t = tfm_tensor_from_i32(2, (int64_t[]){1, n_tgt + 1}, in);
    tfm_tensor *l = tfm_tensor_from_i32(1, (int64_t[]){n_tgt + 1}, labels);
    tfm_tensor *logits = tfm_model_forward(tape, model, s, t, NULL,
                                           tfm_mask_causal(tape, n_tgt + 1, TFM_I32), NULL,
                                           NULL, NULL, NULL);
    tfm_tensor *loss = tfm_cross_entropy(
        tape, tfm_reshape(tape, logits, 2, (int64_t[]){n_tgt + 1, -1}), l, -100, 0.1f);
    tfm_tensor_free(s);
    tfm_tensor_free(t);
    tfm_tensor_free(l);
    return loss;
}

int main(int argc, char **argv)
{
    const char *pairs[][2] = {{"Undefined reference to a symbol.", "Référence indéfinie à un symbole."},
                              {"The compiler stopped.", "Le compilateur s'est arrêté."}};
    tfm_model *model = tfm_model_from_pretrained(argc > 1 ? argv[1] : "opus-mt-en-fr");
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAMW);
    o.lr = 1e-4f;
    tfm_optimizer *adam = NULL;
    tfm_tape *tape = tfm_tape_create();
    if (!model || !tape || tfm_model_freeze(model, TFM_MODEL_PART_EMBEDDINGS) != TFM_OK ||
        tfm_model_set_training(model, 1) != TFM_OK ||
        !(adam = tfm_optimizer_create(tfm_model_params(model), &o)))
        goto failed;
    for (int step = 0; step < 10; step++) {
        tfm_optimizer_zero_grad(adam);
        float value = 0.0f;
        tfm_tensor *loss = loss_of(tape, model, pairs[step % 2][0], pairs[step % 2][1]);
        if (!loss || tfm_tape_backward(tape, loss) != TFM_OK ||
            tfm_tensor_item(loss, &value) != TFM_OK || tfm_optimizer_step(adam) != TFM_OK)
            goto failed;
        printf("step %d: loss %.3f\n", step + 1, (double)value);
        tfm_tape_reset(tape);
    }
    /* the tokenizers and languages travel in the file */
    if (tfm_model_save(model, argc > 2 ? argv[2] : "fine-tuned.safetensors") != TFM_OK)
        goto failed;
    tfm_optimizer_free(adam);
    tfm_tape_free(tape);
    tfm_model_free(model);
    return 0;
failed:
    fprintf(stderr, "%s\n", tfm_last_error());
    tfm_optimizer_free(adam);
    tfm_tape_free(tape);
    tfm_model_free(model);
    return 1;
}
