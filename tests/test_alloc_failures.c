/* Out of memory at every allocation of a realistic workload: a model made,
 * trained two steps (forward, cross-entropy, backward, Adam), saved (its
 * parameters, its optimizer, the model file), loaded into a second model and
 * optimizer that take one more step, then greedy and beam decoding.
 * alloc_counter.c counts the calls the workload makes from libtfm's code;
 * the workload then runs once for each N, with the Nth of them failing.
 * Every run must end in TFM_ERR_NOMEM with a message naming the public call
 * that failed, leak nothing (checked after each run in the sanitizer
 * build), leave no temporary file behind, and, when the library absorbed
 * the failure, give the reference's results bit for bit. Each run starts
 * from nothing, so they all run in this one process. TFM_ALLOC_SITES=1
 * lists each run's failing site (docs/reliability.md). */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc_counter.h"
#include "check_main.h"
#include "problems.h"
#include <tfm/tfm.h>

/* A batch large enough for a training step to outgrow the tape's first
 * arena chunk (1 MB), so that the arena grows inside the ops and folds its
 * chunks at the next reset. */
enum { B = 16, S = 12, T = 16, SRC_VOCAB = 23, TGT_VOCAB = 19, MAX_LEN = 6, BEAM = 3 };
enum { DECODED = 3, T1 = MAX_LEN + 1, MAX_PARAMS = 65536 }; /* DECODED: sources decoded */

/* What a workload produces; compared bit for bit with the reference's. */
typedef struct results {
    int64_t numel;
    float losses[3];
    float params[MAX_PARAMS]; /* of the loaded model after its step */
    int32_t greedy_tokens[DECODED * T1], greedy_lengths[DECODED];
    float greedy_scores[DECODED], greedy_logits[DECODED * MAX_LEN * TGT_VOCAB];
    int32_t beam_tokens[DECODED * 2 * T1], beam_lengths[DECODED * 2];
    float beam_scores[DECODED * 2];
} results;

/* The run's objects, all freed whatever step failed. */
typedef struct run {
    const char *dir;
    const char *call; /* the public call running, for the failure's message */
    tfm_model *models[2];
    tfm_optimizer *optimizers[2];
    tfm_tape *tape;
    tfm_tensor *src, *tgt_in, *tgt_out, *decoded_src;
    tfm_decoding *decoding;
} run;

/* A public call returning a handle, or a status: on failure the run stops. */
#define NEW(r, out, call_expr)                                                 \
    do {                                                                       \
        (r)->call = #call_expr;                                                \
        if (!((out) = (call_expr)))                                            \
            return tfm_last_status();                                          \
    } while (0)
#define DO(r, call_expr)                                                       \
    do {                                                                       \
        (r)->call = #call_expr;                                                \
        tfm_status status_ = (call_expr);                                      \
        if (status_ != TFM_OK)                                                 \
            return status_;                                                    \
    } while (0)

static tfm_model_options model_options(void)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = SRC_VOCAB;
    o.tgt_vocab = TGT_VOCAB;
    o.max_src_len = S;
    o.max_tgt_len = T;
    o.encoder_layers = 1;
    o.decoder_layers = 1;
    o.d_model = 32;
    o.heads = 4;
    o.d_ff = 64;
    o.dropout = 0.1f;
    o.seed = 5;
    o.bos_id = 1; /* saved with the model, read back by decoding */
    o.eos_id = 2;
    o.pad_id = 0;
    return o;
}

static tfm_status train_step(run *r, int which, float *loss_out)
{
    tfm_tape *tape = r->tape;
    tfm_tensor *tgt_mask, *src_mask, *logits, *loss;
    DO(r, tfm_tape_reset(tape));
    NEW(r, tgt_mask, tfm_mask_causal(tape, T - 1, TFM_I32));
    NEW(r, src_mask, tfm_mask_padding(tape, r->src, 0, TFM_I32));
    NEW(r, logits, tfm_model_forward(tape, r->models[which], r->src, r->tgt_in, src_mask,
                                     tgt_mask, src_mask, NULL, NULL, NULL));
    NEW(r, loss, tfm_cross_entropy(tape, logits, r->tgt_out, 0, 0.1f));
    DO(r, tfm_optimizer_zero_grad(r->optimizers[which]));
    DO(r, tfm_tape_backward(tape, loss));
    DO(r, tfm_optimizer_step(r->optimizers[which]));
    return tfm_tensor_item(loss, loss_out);
}

/* The buffers hold the beam's n_best of 2; greedy writes the first half. */
static tfm_status decode(run *r, tfm_decode_strategy strategy, int32_t *tokens,
                         int32_t *lengths, float *scores, float *logits)
{
    const int64_t n_best = strategy == TFM_DECODE_BEAM ? 2 : 1;
    tfm_decode_options d;
    tfm_decode_options_init(&d);
    d.strategy = strategy;
    d.max_length = MAX_LEN;
    DO(r, tfm_decode_options_from_model(r->models[1], &d)); /* eos 2, padding 0 */
    d.beam_size = BEAM;
    d.n_best = strategy == TFM_DECODE_BEAM ? 2 : 1;
    NEW(r, r->decoding, tfm_decoding_create(r->models[1], &d, DECODED, S));
    DO(r, tfm_decoding_run(r->decoding, r->decoded_src, tokens, DECODED * n_best * T1, lengths,
                           DECODED * n_best, scores, DECODED * n_best, logits,
                           logits ? DECODED * MAX_LEN * TGT_VOCAB : 0, NULL, 0));
    tfm_decoding_free(r->decoding);
    r->decoding = NULL;
    return TFM_OK;
}

static tfm_status workload_steps(run *r, results *out)
{
    /* sources and targets of several lengths, padded with 0; targets are
     * bos (1), tokens, eos (2) */
    int32_t src[B * S], tgt[B * T], tgt_in[B * (T - 1)], tgt_out[B * (T - 1)];
    for (int b = 0; b < B; b++) {
        for (int i = 0; i < S; i++)
            src[b * S + i] = i < S - b % 5 ? 1 + (b * 7 + i * 3) % (SRC_VOCAB - 1) : 0;
        int length = T - 1 - b % 6;
        for (int t = 0; t < T; t++)
            tgt[b * T + t] = t == 0 ? 1 : t < length ? 3 + (b * 5 + t * 2) % (TGT_VOCAB - 3)
                             : t == length ? 2 : 0;
        for (int t = 0; t < T - 1; t++) {
            tgt_in[b * (T - 1) + t] = tgt[b * T + t];
            tgt_out[b * (T - 1) + t] = tgt[b * T + t + 1];
        }
    }
    char params_path[512], optimizer_path[512], model_path[512];
    snprintf(params_path, sizeof params_path, "%s/params.safetensors", r->dir);
    snprintf(optimizer_path, sizeof optimizer_path, "%s/adam.safetensors", r->dir);
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", r->dir);
    tfm_model_options mo = model_options();
    tfm_optimizer_options oo;
    tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAM);
    oo.lr = 0.01f;

    NEW(r, r->src, tfm_tensor_from_i32(2, (const int64_t[]){B, S}, src));
    NEW(r, r->tgt_in, tfm_tensor_from_i32(2, (const int64_t[]){B, T - 1}, tgt_in));
    NEW(r, r->tgt_out, tfm_tensor_from_i32(2, (const int64_t[]){B, T - 1}, tgt_out));
    NEW(r, r->decoded_src, tfm_tensor_from_i32(2, (const int64_t[]){DECODED, S}, src));
    NEW(r, r->tape, tfm_tape_create());
    NEW(r, r->models[0], tfm_model_create(&mo));
    NEW(r, r->optimizers[0], tfm_optimizer_create(tfm_model_params(r->models[0]), &oo));
    for (int i = 0; i < 2; i++) {
        tfm_status s = train_step(r, 0, &out->losses[i]);
        if (s != TFM_OK)
            return s;
    }
    DO(r, tfm_params_save(tfm_model_params(r->models[0]), params_path));
    DO(r, tfm_optimizer_save(r->optimizers[0], optimizer_path));
    DO(r, tfm_model_save(r->models[0], model_path));

    /* the model from its own file, then the same values again by name */
    NEW(r, r->models[1], tfm_model_load(model_path));
    tfm_params *params = tfm_model_params(r->models[1]);
    DO(r, tfm_params_load(params, params_path));
    NEW(r, r->optimizers[1], tfm_optimizer_create(params, &oo));
    DO(r, tfm_optimizer_load(r->optimizers[1], optimizer_path));
    tfm_status s = train_step(r, 1, &out->losses[2]);
    if (s != TFM_OK)
        return s;
    out->numel = tfm_params_numel(params);
    ck_assert_int_le(out->numel, MAX_PARAMS);
    memcpy(out->params, tfm_params_values(params), (size_t)out->numel * sizeof(float));

    s = decode(r, TFM_DECODE_GREEDY, out->greedy_tokens, out->greedy_lengths,
               out->greedy_scores, out->greedy_logits);
    if (s == TFM_OK)
        s = decode(r, TFM_DECODE_BEAM, out->beam_tokens, out->beam_lengths, out->beam_scores,
                   NULL);
    return s;
}

static tfm_status workload(const char *dir, results *out, const char **failed_call)
{
    run r = {.dir = dir};
    memset(out, 0, sizeof *out);
    tfm_clear_error();
    tfm_status s = workload_steps(&r, out);
    *failed_call = r.call;
    tfm_decoding_free(r.decoding);
    for (int i = 0; i < 2; i++) {
        tfm_optimizer_free(r.optimizers[i]);
        tfm_model_free(r.models[i]);
    }
    tfm_tape_free(r.tape);
    tfm_tensor_free(r.src);
    tfm_tensor_free(r.tgt_in);
    tfm_tensor_free(r.tgt_out);
    tfm_tensor_free(r.decoded_src);
    return s;
}

/* The public function a call expression begins with: "tfm_x(a, b)" -> "tfm_x". */
static void function_of(const char *call, char *name, size_t size)
{
    size_t n = strcspn(call, "(");
    snprintf(name, size, "%.*s", (int)(n < size ? n : size - 1), call);
}

/* The folder holds the checkpoints and nothing else (no temporary file
 * left by a failed save); they are removed for the next run. */
static void check_and_empty(const char *dir, long n)
{
    DIR *folder = opendir(dir);
    ck_assert_ptr_nonnull(folder);
    struct dirent *e;
    char path[600];
    while ((e = readdir(folder))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        ck_assert_msg(!strcmp(e->d_name, "params.safetensors") ||
                          !strcmp(e->d_name, "adam.safetensors") ||
                          !strcmp(e->d_name, "model.safetensors"),
                      "allocation %ld: \"%s\" left behind", n, e->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        ck_assert_int_eq(unlink(path), 0);
    }
    closedir(folder);
}

START_TEST(every_allocation_of_the_workload_may_fail)
{
    /* in memory where there is a tmpfs: the runs sync hundreds of files */
    char dir[64];
    snprintf(dir, sizeof dir, "%s/tfm_alloc_failures_XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(alloc_counter_init(), 0);
    static results reference, got;
    const char *call;

    long before = alloc_counter_libtfm();
    tfm_status s = workload(dir, &reference, &call);
    ck_assert_msg(s == TFM_OK, "reference run: %s: %s", call, tfm_last_error());
    long count = alloc_counter_libtfm() - before;
    ck_assert_int_gt(count, 100); /* the workload does allocate: the counter sees it */
    check_and_empty(dir, 0);
    ck_assert_int_eq(LEAK_CHECK(), 0);

    long absorbed = 0, sites = 0;
    static uintptr_t site[4096]; /* the distinct places in libtfm that allocate */
    for (long n = 1; n <= count; n++) {
        alloc_counter_fail_nth(n);
        s = workload(dir, &got, &call);
        int failed = alloc_counter_failed();
        uintptr_t where = alloc_counter_failed_site();
        alloc_counter_fail_nth(0);
        long i = 0;
        while (i < sites && site[i] != where)
            i++;
        if (i == sites && sites < 4096)
            site[sites++] = where;
        if (getenv("TFM_ALLOC_SITES"))
            printf("allocation %ld at 0x%lx in %s: %s\n", n, (unsigned long)where, call,
                   tfm_status_name(s));
        char name[64];
        function_of(call, name, sizeof name);
        if (!failed)
            problem("allocation %ld of %ld was never made", n, count);
        if (s == TFM_OK) {
            absorbed++;
            if (memcmp(&got, &reference, sizeof got) != 0)
                problem("allocation %ld failed, the workload succeeded, but its results "
                        "differ from the reference", n);
        } else if (s != TFM_ERR_NOMEM || tfm_last_status() != TFM_ERR_NOMEM) {
            problem("allocation %ld: %s returned %s (last %s): %s", n, name,
                    tfm_status_name(s), tfm_status_name(tfm_last_status()), tfm_last_error());
        } else if (!strstr(tfm_last_error(), name)) {
            problem("allocation %ld: the message of %s does not name it: \"%s\"", n, name,
                    tfm_last_error());
        }
        check_and_empty(dir, n);
        if (LEAK_CHECK())
            problem("allocation %ld failing (in %s) leaks", n, name);
    }
    printf("alloc_failures: the workload makes %ld allocations from libtfm at %ld distinct "
           "call sites; each failed in turn: %ld runs failed with TFM_ERR_NOMEM, %ld "
           "absorbed the failure with identical results\n",
           count, sites, count - absorbed, absorbed);
    ck_assert_msg(problems == 0, "%ld runs went wrong (listed above)", problems);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* --- the translator -------------------------------------------------------------------- */

/* What the translator's workload gives: each text's ids, score and text. */
enum { TRANSLATED = 4, MAX_IDS = 32 };
typedef struct translated {
    int32_t ids[2 * TRANSLATED][MAX_IDS];
    int64_t n_ids[2 * TRANSLATED];
    float scores[2 * TRANSLATED];
    char texts[2 * TRANSLATED][256];
    int64_t streamed[TRANSLATED]; /* the tokens each request streamed */
} translated;

static const char *const sentences[] = {"the cat sat on the mat %s", "le chat est sur le tapis",
                                        "a dog is in the garden", "un chien est dans le jardin"};

static void keep_translation(const tfm_translation *r, int64_t i, translated *out, int k)
{
    const int32_t *ids = tfm_translation_ids(r, i, 0, &out->n_ids[k]);
    ck_assert_int_le(out->n_ids[k], MAX_IDS);
    memcpy(out->ids[k], ids, (size_t)out->n_ids[k] * sizeof *ids);
    out->scores[k] = tfm_translation_score(r, i, 0);
    snprintf(out->texts[k], sizeof out->texts[k], "%s", tfm_translation_text(r, i, 0));
}

static int stream_token(void *user, int32_t token, const char *text, int64_t length)
{
    (void)token, (void)text, (void)length;
    ++*(int64_t *)user;
    return 0;
}

/* tfm_translate of the sentences (the defaults: beam 4), then each
 * submitted greedily with streaming, waited for; with a placeholder and a
 * glossary term. */
static tfm_status translator_workload(tfm_translator *t, translated *out, const char **call,
                                      char *message, size_t size)
{
    memset(out, 0, sizeof *out);
    tfm_clear_error();
    tfm_translation *r = NULL;
    *call = "tfm_translate";
    static const char *const glossary[] = {"cat", "chat"};
    tfm_translate_options defaults;
    tfm_translate_options_init(&defaults);
    defaults.glossary = glossary;
    defaults.n_glossary = 1;
    tfm_status s = tfm_translate(t, sentences, TRANSLATED, &defaults, &r);
    snprintf(message, size, "%s", tfm_last_error());
    if (s != TFM_OK)
        return s;
    for (int i = 0; i < TRANSLATED; i++)
        keep_translation(r, i, out, i);
    tfm_translation_free(r);
    tfm_decode_options d;
    tfm_decode_options_init(&d);
    ck_assert_int_eq(tfm_translator_decode_options(t, &d), TFM_OK);
    d.strategy = TFM_DECODE_GREEDY;
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.decode = &d;
    o.on_token = stream_token;
    o.glossary = glossary;
    o.n_glossary = 1;
    *call = "tfm_translator_submit";
    for (int i = 0; i < TRANSLATED; i++) {
        o.user = &out->streamed[i];
        tfm_request *q = tfm_translator_submit(t, sentences[i], &o);
        if (!q) {
            snprintf(message, size, "%s", tfm_last_error());
            return tfm_last_status();
        }
        s = tfm_request_wait(q);
        snprintf(message, size, "%s", tfm_request_error(q));
        const tfm_translation *mine = NULL;
        if (s == TFM_OK && tfm_request_result(q, &mine) == TFM_OK)
            keep_translation(mine, 0, out, TRANSLATED + i);
        tfm_request_free(q);
        if (s != TFM_OK)
            return s;
    }
    return TFM_OK;
}

START_TEST(every_allocation_of_a_translation_may_fail)
{
    tfm_set_num_threads(1); /* the allocations in one order */
    tfm_bpe_train_options bo;
    tfm_bpe_train_options_init(&bo);
    bo.vocab_size = 58;
    bo.pad_piece = 1;
    const char *symbols[TFM_PLACEHOLDERS];
    for (int32_t i = 0; i < TFM_PLACEHOLDERS; i++)
        symbols[i] = tfm_placeholder(i);
    bo.user_symbols = symbols;
    bo.n_user_symbols = TFM_PLACEHOLDERS;
    tfm_tokenizer *tok = NULL;
    ck_assert_int_eq(tfm_tokenizer_train_bpe(sentences, NULL, TRANSLATED, &bo, &tok), TFM_OK);
    tfm_model_options mo = model_options();
    mo.src_vocab = mo.tgt_vocab = 64;
    mo.max_src_len = mo.max_tgt_len = MAX_IDS;
    mo.dropout = 0.0f;
    mo.bos_id = tfm_tokenizer_special_id(tok, TFM_TOKEN_BOS);
    mo.eos_id = tfm_tokenizer_special_id(tok, TFM_TOKEN_EOS);
    mo.pad_id = tfm_tokenizer_special_id(tok, TFM_TOKEN_PAD);
    tfm_model *model = tfm_model_create(&mo);
    ck_assert_ptr_nonnull(model);
    ck_assert_int_eq(tfm_model_set_tokenizers(model, tok, NULL), TFM_OK);
    tfm_model_set_training(model, 0);
    tfm_translator_options to;
    tfm_translator_options_init(&to);
    to.max_wait_ms = 0;
    tfm_translator *t = tfm_translator_create(model, &to);
    ck_assert_msg(t != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(alloc_counter_init(), 0);
    static translated reference, got;
    const char *call;
    char message[512];
    /* a first run starts the scheduler and keeps its decodings: the
     * runs counted reuse them, as a serving translator does */
    ck_assert_int_eq(translator_workload(t, &reference, &call, message, sizeof message), TFM_OK);
    long before = alloc_counter_libtfm();
    tfm_status s = translator_workload(t, &reference, &call, message, sizeof message);
    ck_assert_msg(s == TFM_OK, "reference run: %s: %s", call, message);
    long count = alloc_counter_libtfm() - before;
    ck_assert_int_gt(count, 20);
    long absorbed = 0;
    for (long n = 1; n <= count; n++) {
        alloc_counter_fail_nth(n);
        s = translator_workload(t, &got, &call, message, sizeof message);
        int failed = alloc_counter_failed();
        alloc_counter_fail_nth(0);
        if (!failed)
            problem("translator: allocation %ld of %ld was never made", n, count);
        if (s == TFM_OK) {
            absorbed++;
            if (memcmp(&got, &reference, sizeof got) != 0)
                problem("translator: allocation %ld failed, the workload succeeded, but its "
                        "results differ from the reference", n);
        } else if (s != TFM_ERR_NOMEM) {
            problem("translator: allocation %ld: %s returned %s: %s", n, call,
                    tfm_status_name(s), message);
        } else if (!strstr(message, call)) {
            problem("translator: allocation %ld: the message of %s does not name it: \"%s\"",
                    n, call, message);
        }
        if (LEAK_CHECK())
            problem("translator: allocation %ld failing (in %s) leaks", n, call);
        /* a failure leaves nothing behind: the next run is the reference's */
        s = translator_workload(t, &got, &call, message, sizeof message);
        if (s != TFM_OK || memcmp(&got, &reference, sizeof got) != 0)
            problem("translator: after allocation %ld failed, a run gives %s (%s), not the "
                    "reference", n, tfm_status_name(s), message);
    }
    printf("alloc_failures: a translation makes %ld allocations from libtfm; each failed in "
           "turn: %ld runs failed with TFM_ERR_NOMEM, %ld absorbed the failure\n",
           count, count - absorbed, absorbed);
    tfm_translator_free(t);
    tfm_model_free(model);
    tfm_tokenizer_free(tok);
    ck_assert_msg(problems == 0, "%ld runs went wrong (listed above)", problems);
}
END_TEST

static Suite *alloc_failures_suite(void)
{
    Suite *s = suite_create("alloc_failures");
    TCase *tc = tcase_create("alloc_failures");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, every_allocation_of_the_workload_may_fail);
    tcase_add_test(tc, every_allocation_of_a_translation_may_fail);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(alloc_failures_suite)
