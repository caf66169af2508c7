/* The user's guide, part 1: a transformer learns to reverse digit
 * sequences; the trained model is saved, loaded back from the file alone
 * and decoded greedily. Exits 0 when the loaded model reverses at least 90%
 * of new sequences exactly.
 *
 *   cc train_save_decode.c $(pkg-config --cflags --libs tfm) -o train_save_decode
 *   ./train_save_decode [model.safetensors]
 */
#include <stdio.h>
#include <stdlib.h>

#include <tfm/tfm.h>

enum {
    PAD = 0, BOS = 1, EOS = 2, FIRST_DIGIT = 3, VOCAB = 13, /* tokens 3..12: digits 0..9 */
    LENGTH = 6, BATCH = 32, STEPS = 400, TEST = 100
};

/* One batch: sources of LENGTH digits; the decoder reads BOS + the source
 * reversed and must predict the source reversed + EOS. */
static void make_batch(tfm_rng *rng, int32_t *src, int32_t *tgt_in, int32_t *tgt_out, int n)
{
    for (int b = 0; b < n; b++) {
        tgt_in[b * (LENGTH + 1)] = BOS;
        for (int i = 0; i < LENGTH; i++)
            src[b * LENGTH + i] = FIRST_DIGIT + (int32_t)(tfm_rng_next_u64(rng) % 10);
        for (int i = 0; i < LENGTH; i++) {
            int32_t digit = src[b * LENGTH + LENGTH - 1 - i];
            tgt_in[b * (LENGTH + 1) + i + 1] = digit;
            tgt_out[b * (LENGTH + 1) + i] = digit;
        }
        tgt_out[b * (LENGTH + 1) + LENGTH] = EOS;
    }
}

static int fail(const char *what)
{
    fprintf(stderr, "train_save_decode: %s: %s (%s)\n", what, tfm_last_error(),
            tfm_status_name(tfm_last_status()));
    return EXIT_FAILURE;
}

/* Trains a small model on the tape; returns it, or NULL after a message. */
static tfm_model *train(tfm_rng *data)
{
    tfm_model_options options;
    tfm_model_options_init(&options); /* nn.Transformer's defaults, then ours */
    options.src_vocab = VOCAB;
    options.tgt_vocab = VOCAB;
    options.max_src_len = LENGTH;
    options.max_tgt_len = LENGTH + 2;
    options.d_model = 32;
    options.heads = 4;
    options.d_ff = 64;
    options.encoder_layers = 1;
    options.decoder_layers = 1;
    options.dropout = 0.0f;
    options.seed = 7;
    tfm_model *model = tfm_model_create(&options);

    tfm_optimizer_options adam;
    tfm_optimizer_options_init(&adam, TFM_OPTIMIZER_ADAM);
    adam.lr = 3e-3f;
    tfm_optimizer *optimizer = model ? tfm_optimizer_create(tfm_model_params(model), &adam) : NULL;
    tfm_tape *tape = tfm_tape_create();
    /* A mask made without a tape is the caller's, made once for every step. */
    tfm_tensor *causal = tfm_mask_causal(NULL, LENGTH + 1, TFM_F32);
    if (!model || !optimizer || !tape || !causal) {
        fail("setup");
        goto fail;
    }

    int32_t src[BATCH * LENGTH], tgt_in[BATCH * (LENGTH + 1)], tgt_out[BATCH * (LENGTH + 1)];
    const int64_t src_shape[2] = {BATCH, LENGTH}, tgt_shape[2] = {BATCH, LENGTH + 1};
    for (int step = 1; step <= STEPS; step++) {
        make_batch(data, src, tgt_in, tgt_out, BATCH);
        tfm_tensor *s = tfm_tensor_from_i32(2, src_shape, src);
        tfm_tensor *ti = tfm_tensor_from_i32(2, tgt_shape, tgt_in);
        tfm_tensor *to = tfm_tensor_from_i32(2, tgt_shape, tgt_out);
        /* Ops return NULL on error and pass a NULL input on: one check at
         * the end of the chain is enough. */
        tfm_tensor *logits = tfm_model_forward(tape, model, s, ti, NULL, causal, NULL, NULL,
                                               NULL, NULL);
        tfm_tensor *loss = tfm_cross_entropy(tape, logits, to, PAD, 0.0f);
        float loss_value = 0.0f;
        int ok = loss && tfm_optimizer_zero_grad(optimizer) == TFM_OK &&
                 tfm_tape_backward(tape, loss) == TFM_OK &&
                 tfm_tensor_item(loss, &loss_value) == TFM_OK &&
                 tfm_optimizer_step(optimizer) == TFM_OK;
        tfm_tape_reset(tape); /* ends logits and loss; keeps the memory */
        tfm_tensor_free(s);
        tfm_tensor_free(ti);
        tfm_tensor_free(to);
        if (!ok) {
            fail("training step");
            goto fail;
        }
        if (step % 100 == 0)
            printf("step %d  loss %.4f\n", step, loss_value);
    }
    tfm_tensor_free(causal);
    tfm_tape_free(tape);
    tfm_optimizer_free(optimizer);
    return model;
fail:
    tfm_tensor_free(causal);
    tfm_tape_free(tape);
    tfm_optimizer_free(optimizer);
    tfm_model_free(model);
    return NULL;
}

/* Greedy decoding of TEST new sequences; the share reversed exactly. */
static double reverse_accuracy(tfm_model *model, tfm_rng *data)
{
    tfm_decode_options options;
    tfm_decode_options_init(&options);
    options.max_length = LENGTH + 1; /* the digits and EOS */
    options.bos_id = BOS;
    options.eos_id = EOS;
    tfm_decoding *decoding = tfm_decoding_create(model, &options, TEST, LENGTH);
    int32_t src[TEST * LENGTH], tgt_in[TEST * (LENGTH + 1)], expected[TEST * (LENGTH + 1)];
    make_batch(data, src, tgt_in, expected, TEST);
    tfm_tensor *s = tfm_tensor_from_i32(2, (const int64_t[]){TEST, LENGTH}, src);
    int32_t tokens[TEST * (LENGTH + 2)], lengths[TEST];
    double accuracy = -1.0;
    if (decoding && s &&
        tfm_decoding_run(decoding, s, tokens, TEST * (LENGTH + 2), lengths, TEST, NULL, 0, NULL,
                         0, NULL, 0) == TFM_OK) {
        int exact = 0;
        for (int b = 0; b < TEST; b++) {
            /* tokens: BOS, then what the model wrote, EOS included */
            int same = lengths[b] == LENGTH + 2;
            for (int i = 0; same && i <= LENGTH; i++)
                same = tokens[b * (LENGTH + 2) + i + 1] == expected[b * (LENGTH + 1) + i];
            exact += same;
        }
        accuracy = (double)exact / TEST;
    }
    tfm_tensor_free(s);
    tfm_decoding_free(decoding);
    return accuracy;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "reverse.safetensors";
    tfm_rng *data = tfm_rng_create(2024);
    tfm_model *trained = data ? train(data) : NULL;
    if (!trained) {
        tfm_rng_free(data);
        return EXIT_FAILURE;
    }
    /* The file carries the model's options: loading needs nothing else. */
    tfm_status saved = tfm_model_save(trained, path);
    tfm_model_free(trained);
    if (saved != TFM_OK) {
        tfm_rng_free(data);
        return fail("save");
    }
    tfm_model *model = tfm_model_load(path);
    if (!model) {
        tfm_rng_free(data);
        return fail("load");
    }
    double accuracy = reverse_accuracy(model, data);
    tfm_model_free(model);
    tfm_rng_free(data);
    if (accuracy < 0.0)
        return fail("decode");
    printf("reversed exactly: %.2f of %d new sequences\n", accuracy, TEST);
    return accuracy >= 0.9 ? EXIT_SUCCESS : EXIT_FAILURE;
}
