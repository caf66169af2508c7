/* The user's guide, part 6: from text. A BPE vocabulary is trained on a
 * small made-up English-French corpus ("the black cat sleeps" -> "le chat
 * noir dort": words mapped, the adjective moved after its noun), the pairs
 * are tokenized and cut into token batches, a small tied model learns them,
 * and the model is saved with its tokenizer inside. The file alone then
 * turns an English sentence into French text, which chrF scores. Exits 0
 * when the loss fell and the loaded model translates every pair exactly.
 *
 *   cc text.c $(pkg-config --cflags --libs tfm) -o text
 *   ./text [model.safetensors]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/tfm.h>

/* A word list each side, in the same order: English first, French second. */
static const char *const nouns[][2] = {{"cat", "chat"}, {"dog", "chien"}, {"bird", "oiseau"},
                                       {"fish", "poisson"}};
static const char *const colours[][2] = {{"black", "noir"}, {"white", "blanc"},
                                         {"red", "rouge"}, {"green", "vert"}};
static const char *const verbs[][2] = {{"sleeps", "dort"}, {"eats", "mange"},
                                       {"runs", "court"}, {"sings", "chante"}};

enum {
    PAIRS = 64,   /* every noun, colour and verb */
    MAX_LEN = 16, /* the model's longest source and target, <s> or </s> included */
    STEPS = 300
};
/* The ids the trained vocabulary gives its special pieces (pad_piece). */
enum { BOS = 1, EOS = 2, PAD = 3 };

static int fail(const char *what)
{
    fprintf(stderr, "text: %s: %s (%s)\n", what, tfm_last_error(),
            tfm_status_name(tfm_last_status()));
    return EXIT_FAILURE;
}

/* The corpus: pair i in english[i] and french[i]. */
static void make_pairs(char english[][40], char french[][40])
{
    for (int i = 0; i < PAIRS; i++) {
        int n = i % 4, c = i / 4 % 4, v = i / 16;
        snprintf(english[i], 40, "the %s %s %s", colours[c][0], nouns[n][0], verbs[v][0]);
        snprintf(french[i], 40, "le %s %s %s", nouns[n][1], colours[c][1], verbs[v][1]);
    }
}

/* Token ids as batch.h reads a corpus: example i is ids[offsets[i],
 * offsets[i + 1]), lengths[i] as the tensors will hold it (extra: 1 for
 * a target's bos or eos). */
typedef struct corpus {
    int32_t ids[PAIRS * MAX_LEN];
    int64_t offsets[PAIRS + 1], lengths[PAIRS];
} corpus;

/* The lines' ids into c; a line of more than MAX_LEN - 1 tokens is
 * TFM_ERR_SIZE (a target has room for <s> or </s> too). */
static tfm_status tokenize(const tfm_tokenizer *tok, char lines[][40], int extra, corpus *c)
{
    c->offsets[0] = 0;
    for (int i = 0; i < PAIRS; i++) {
        int64_t count = 0;
        tfm_status s = tfm_tokenizer_encode(tok, lines[i], (int64_t)strlen(lines[i]),
                                            c->ids + c->offsets[i], MAX_LEN - 1, &count);
        if (s != TFM_OK)
            return s;
        c->offsets[i + 1] = c->offsets[i] + count;
        c->lengths[i] = count + extra;
    }
    return TFM_OK;
}

static tfm_model *make_model(int32_t vocab)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = o.tgt_vocab = vocab;
    o.max_src_len = MAX_LEN;
    o.max_tgt_len = MAX_LEN;
    o.share_embeddings = 1; /* one vocabulary for both languages: one table */
    o.tie_generator = 1;    /* and the output projection is that table */
    o.embedding_scale = TFM_EMBEDDING_SCALE_SQRT_D;
    o.norm_first = 1;
    o.d_model = 64;
    o.heads = 4;
    o.d_ff = 128;
    o.encoder_layers = o.decoder_layers = 1;
    o.dropout = 0.0f;
    o.seed = 1;
    o.bos_id = BOS; /* kept in the file, read by tfm_decode_options_from_model */
    o.eos_id = EOS;
    o.pad_id = PAD;
    return tfm_model_create(&o);
}

/* The token-weighted loss of one batch (rows pairs named by indices). */
static tfm_tensor *batch_loss(tfm_tape *tape, tfm_model *model, const corpus *src,
                              const corpus *tgt, const int64_t *indices, int64_t rows)
{
    tfm_tensor *ids = tfm_batch_pad(tape, src->ids, src->offsets[PAIRS], src->offsets, PAIRS,
                                    indices, rows, PAD);
    tfm_tensor *tgt_in = NULL, *labels = NULL;
    if (!ids || tfm_batch_shift_targets(tape, tgt->ids, tgt->offsets[PAIRS], tgt->offsets,
                                        PAIRS, indices, rows, BOS, EOS, PAD, &tgt_in,
                                        &labels) != TFM_OK)
        return NULL;
    int64_t lengths[PAIRS];
    for (int64_t b = 0; b < rows; b++)
        lengths[b] = src->lengths[indices[b]];
    /* The sources' padding is masked from the encoder and from the decoder's
     * memory; the targets' padding comes after their tokens, so the causal
     * mask keeps it from them, and the loss ignores its labels (PAD). */
    tfm_tensor *padding =
        tfm_mask_from_lengths(tape, lengths, rows, tfm_tensor_dim(ids, 1), TFM_I32);
    tfm_tensor *causal = tfm_mask_causal(tape, tfm_tensor_dim(tgt_in, 1), TFM_I32);
    tfm_tensor *logits = tfm_model_forward(tape, model, ids, tgt_in, NULL, causal, NULL,
                                           padding, NULL, padding);
    return tfm_cross_entropy_reduced(tape, logits, labels, PAD, 0.1f, TFM_REDUCTION_MEAN,
                                     NULL);
}

/* STEPS steps of AdamW on batches of about 128 tokens; *first and *last:
 * the mean loss of the first and last ten steps. */
static tfm_status train(tfm_model *model, const corpus *src, const corpus *tgt, double *first,
                        double *last)
{
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAMW);
    o.lr = 3e-3f;
    o.clip_norm = 1.0f;
    tfm_optimizer *adam = tfm_optimizer_create(tfm_model_params(model), &o);
    tfm_tape *tape = tfm_tape_create();
    tfm_rng *rng = tfm_rng_create(5);
    int64_t order[PAIRS], starts[PAIRS + 1], batches = 0, next = 0;
    tfm_status s = adam && tape && rng ? TFM_OK : tfm_last_status();
    *first = *last = 0.0;
    for (int step = 0; s == TFM_OK && step < STEPS; step++) {
        if (next == batches) { /* a new epoch: its batches, shuffled */
            s = tfm_batch_plan(src->lengths, tgt->lengths, PAIRS, 128, 0, rng, order, PAIRS,
                               starts, PAIRS + 1, &batches);
            next = 0;
            if (s != TFM_OK)
                break;
        }
        const int64_t *indices = order + starts[next];
        int64_t rows = starts[next + 1] - starts[next];
        next++;
        tfm_tensor *loss = batch_loss(tape, model, src, tgt, indices, rows);
        float value = 0.0f;
        s = loss && tfm_optimizer_zero_grad(adam) == TFM_OK &&
                    tfm_tape_backward(tape, loss) == TFM_OK &&
                    tfm_tensor_item(loss, &value) == TFM_OK &&
                    tfm_optimizer_step(adam) == TFM_OK
                ? TFM_OK
                : tfm_last_status();
        tfm_tape_reset(tape);
        if (step < 10)
            *first += value / 10.0;
        if (step >= STEPS - 10)
            *last += value / 10.0;
        if (step % 100 == 0 || step == STEPS - 1)
            printf("step %3d  loss %.3f\n", step, value);
    }
    tfm_rng_free(rng);
    tfm_tape_free(tape);
    tfm_optimizer_free(adam);
    return s;
}

/* The model's French for one English line into text[0, capacity): the
 * file's tokenizer turns text into ids, and ids back into text. */
static tfm_status translate(tfm_model *model, const char *line, char *text, int64_t capacity)
{
    const tfm_tokenizer *tok = tfm_model_tokenizer(model, 0);
    int32_t ids[MAX_LEN];
    int64_t count = 0;
    tfm_status s = tfm_tokenizer_encode(tok, line, (int64_t)strlen(line), ids, MAX_LEN, &count);
    if (s != TFM_OK)
        return s;
    tfm_decode_options d;
    tfm_decode_options_init(&d);              /* greedy */
    tfm_decode_options_from_model(model, &d); /* the file's bos, eos and pad ids */
    d.max_length = MAX_LEN - 1;
    tfm_decoding *decoding = tfm_decoding_create(model, &d, 1, count);
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){1, count}, ids);
    int32_t tokens[MAX_LEN], length = 0;
    int64_t size = 0;
    /* tokens: bos, the pieces, eos; control pieces decode to nothing */
    s = decoding && src ? tfm_decoding_run(decoding, src, tokens, MAX_LEN, &length, 1, NULL, 0,
                                           NULL, 0, NULL, 0)
                        : tfm_last_status();
    if (s == TFM_OK)
        s = tfm_tokenizer_decode(tfm_model_tokenizer(model, 1), tokens, length, text, capacity,
                                 &size);
    tfm_tensor_free(src);
    tfm_decoding_free(decoding);
    return s;
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "text.safetensors";
    static char english[PAIRS][40], french[PAIRS][40];
    make_pairs(english, french);

    /* 1. A vocabulary trained on both languages' lines, with <pad> at id 3. */
    const char *lines[2 * PAIRS];
    for (int i = 0; i < PAIRS; i++) {
        lines[i] = english[i];
        lines[PAIRS + i] = french[i];
    }
    tfm_bpe_train_options bpe;
    tfm_bpe_train_options_init(&bpe);
    bpe.vocab_size = 60;
    bpe.pad_piece = 1;
    tfm_tokenizer *tok = NULL;
    if (tfm_tokenizer_train_bpe(lines, NULL, 2 * PAIRS, &bpe, &tok) != TFM_OK)
        return fail("training the vocabulary");
    if (tfm_tokenizer_special_id(tok, TFM_TOKEN_PAD) != PAD ||
        tfm_tokenizer_special_id(tok, TFM_TOKEN_BOS) != BOS ||
        tfm_tokenizer_special_id(tok, TFM_TOKEN_EOS) != EOS) {
        fprintf(stderr, "text: the vocabulary's special ids are not 1, 2, 3\n");
        tfm_tokenizer_free(tok);
        return EXIT_FAILURE;
    }

    /* 2. The pairs as ids: targets count their bos (input) or eos (label). */
    static corpus src, tgt;
    tfm_model *model = NULL;
    double first = 0.0, last = 0.0;
    if (tokenize(tok, english, 0, &src) != TFM_OK || tokenize(tok, french, 1, &tgt) != TFM_OK ||
        !(model = make_model(tfm_tokenizer_vocab_size(tok))) ||
        train(model, &src, &tgt, &first, &last) != TFM_OK ||
        /* 3. The tokenizer goes into the model, and with it into the file. */
        tfm_model_set_tokenizers(model, tok, NULL) != TFM_OK ||
        tfm_model_save(model, path) != TFM_OK) {
        tfm_model_free(model);
        tfm_tokenizer_free(tok);
        return fail("training");
    }
    tfm_model_free(model);
    tfm_tokenizer_free(tok);
    printf("loss: first ten steps %.3f, last ten %.3f\n", first, last);

    /* 4. The file alone translates text. */
    model = tfm_model_load(path);
    if (!model)
        return fail("loading");
    tfm_model_set_training(model, 0);
    static char hypotheses[PAIRS][64];
    const char *hypothesis[PAIRS], *reference[PAIRS];
    int exact = 0;
    for (int i = 0; i < PAIRS; i++) {
        if (translate(model, english[i], hypotheses[i], sizeof hypotheses[i]) != TFM_OK) {
            tfm_model_free(model);
            return fail("translating");
        }
        hypothesis[i] = hypotheses[i];
        reference[i] = french[i];
        exact += strcmp(hypotheses[i], french[i]) == 0;
    }
    tfm_model_free(model);
    printf("%s -> %s\n", english[5], hypotheses[5]);
    double chrf = 0.0;
    if (tfm_score_chrf(hypothesis, reference, PAIRS, &chrf) != TFM_OK)
        return fail("scoring");
    printf("%d of %d pairs exact, chrF %.1f\n", exact, PAIRS, chrf);
    return last < 0.5 * first && exact == PAIRS && chrf == 100.0 ? EXIT_SUCCESS
                                                                 : EXIT_FAILURE;
}
