/* Every file call of a save made to fail in turn (tests/file_faults.c): for
 * each saver (parameters, optimizer state, model, training state, tokenizer), each
 * call N of the save and each errno, the save reports TFM_ERR_IO naming the
 * call the user made and the errno, the previous file is byte for byte as
 * it was and loads, no temporary is left and no descriptor leaks; when the
 * failure comes after the rename (syncing the folder) the status is
 * TFM_ERR_SYNC and the new file is complete. Short writes change nothing.
 * Leaks of memory are ASan's to find (the suite runs under it in CI). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "check_main.h"
#include "file_faults.h"
#include "reliability.h"

static char folder[64];
static char target[128];

static unsigned char *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    unsigned char *bytes = malloc(*n ? *n : 1);
    ck_assert_uint_eq(fread(bytes, 1, *n, f), *n);
    fclose(f);
    return bytes;
}

/* --- the savers, each with two versions of what it saves ------------------------ */

typedef struct saver {
    const char *op;
    tfm_status (*save)(int version); /* writes target */
    int (*loads)(void);              /* 1 when target loads with its own loader */
} saver;

static tfm_params *stores[2];
static tfm_optimizer *optimizers[2];
static tfm_model *models[2];
static tfm_tokenizer *tokenizers[2];

/* A BPE tokenizer of vocab_size pieces trained on made-up words: a few
 * kilobytes, so that halved writes take many calls. */
static tfm_tokenizer *tiny_tokenizer(int32_t vocab_size)
{
    enum { LINES = 400, WORD = 6 };
    static char text[LINES][4 * (WORD + 1)];
    const char *lines[LINES];
    int64_t lengths[LINES];
    uint32_t state = 12345;
    for (int i = 0; i < LINES; i++) {
        for (int k = 0; k < 4 * (WORD + 1) - 1; k++) {
            state = state * 1103515245u + 12345u;
            text[i][k] = k % (WORD + 1) == WORD ? ' ' : (char)('a' + (state >> 16) % 20);
        }
        lines[i] = text[i];
        lengths[i] = 4 * (WORD + 1) - 1;
    }
    tfm_bpe_train_options o;
    tfm_bpe_train_options_init(&o);
    o.vocab_size = vocab_size;
    tfm_tokenizer *tok = NULL;
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, lengths, LINES, &o, &tok), TFM_OK);
    return tok;
}

static tfm_model *tiny_model(uint64_t seed)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = 7;
    o.tgt_vocab = 7;
    o.max_src_len = 6;
    o.max_tgt_len = 6;
    o.encoder_layers = 1;
    o.decoder_layers = 1;
    o.d_model = 8;
    o.heads = 2;
    o.d_ff = 8;
    o.seed = seed;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_ptr_nonnull(m);
    return m;
}

static void make_things(void)
{
    scratch_folder(folder, "faults");
    snprintf(target, sizeof target, "%s/target.safetensors", folder);
    for (int v = 0; v < 2; v++) {
        stores[v] = seeded_params(1.0f + (float)v);
        models[v] = tiny_model(3 + (uint64_t)v);
        tokenizers[v] = tiny_tokenizer(300 + 100 * v);
        tfm_optimizer_options o;
        tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAM);
        optimizers[v] = tfm_optimizer_create(tfm_model_params(models[v]), &o);
        ck_assert_ptr_nonnull(optimizers[v]);
    }
    /* the versions' optimizer states differ in their moments and step */
    float *g = tfm_params_grads(tfm_model_params(models[1]));
    for (int64_t i = 0; i < tfm_params_numel(tfm_model_params(models[1])); i++)
        g[i] = 0.01f * (float)(i % 7);
    ck_assert_int_eq(tfm_optimizer_step(optimizers[1]), TFM_OK);
}

static void free_things(void)
{
    for (int v = 0; v < 2; v++) {
        tfm_optimizer_free(optimizers[v]);
        tfm_model_free(models[v]);
        tfm_tokenizer_free(tokenizers[v]);
        tfm_params_free(stores[v]);
    }
    remove_folder(folder);
}

static tfm_status save_params(int v) { return tfm_params_save(stores[v], target); }
static tfm_status save_optimizer(int v) { return tfm_optimizer_save(optimizers[v], target); }
static tfm_status save_model(int v) { return tfm_model_save(models[v], target); }
static tfm_status save_training(int v)
{
    return tfm_training_save(target, models[v], optimizers[v], 0, NULL, 0, NULL, NULL);
}
static tfm_status save_tokenizer(int v) { return tfm_tokenizer_save(tokenizers[v], target); }

static int load_params(void) { return tfm_params_load(stores[0], target) == TFM_OK; }
static int load_optimizer(void) { return tfm_optimizer_load(optimizers[0], target) == TFM_OK; }
static int load_model(void)
{
    tfm_model *m = tfm_model_load(target);
    tfm_model_free(m);
    return m != NULL;
}
static int load_training(void)
{
    return tfm_training_load(target, models[0], optimizers[0], 0, NULL) == TFM_OK;
}

static int load_tokenizer(void)
{
    tfm_tokenizer *tok = tfm_tokenizer_load_sentencepiece(target);
    tfm_tokenizer_free(tok);
    return tok != NULL;
}

static const saver savers[] = {
    {"tfm_params_save", save_params, load_params},
    {"tfm_optimizer_save", save_optimizer, load_optimizer},
    {"tfm_model_save", save_model, load_model},
    {"tfm_training_save", save_training, load_training},
    {"tfm_tokenizer_save", save_tokenizer, load_tokenizer},
};
enum { SAVERS = sizeof savers / sizeof savers[0] };

/* --- the runs ----------------------------------------------------------------------- */

static long total_runs;

/* The bytes a save of version v writes. */
static unsigned char *version_bytes(const saver *s, int v, size_t *n)
{
    ck_assert_int_eq(s->save(v), TFM_OK);
    return read_bytes(target, n);
}

static void fail_every_call(const saver *s, int error)
{
    size_t old_n, new_n;
    unsigned char *new_bytes = version_bytes(s, 1, &new_n);
    unsigned char *old_bytes = version_bytes(s, 0, &old_n);
    file_faults_arm(0, 0, 0);
    ck_assert_int_eq(s->save(1), TFM_OK);
    long calls = file_faults_disarm();
    ck_assert_int_ge(calls, 7); /* open, writes, fsync, close, rename, open, fsync … */
    ck_assert_int_eq(s->save(0), TFM_OK);
    int fds = open_fds();
    char reason[96];
    snprintf(reason, sizeof reason, ": %s", strerror(error));
    for (long n = 1; n <= calls; n++) {
        tfm_clear_error();
        file_faults_arm(n, error, 0);
        tfm_status status = s->save(1);
        file_faults_disarm();
        total_runs++;
        const char *call = file_faults_failed();
        ck_assert_msg(call != NULL, "%s: call %ld of %ld was never made", s->op, n, calls);
        size_t got_n;
        unsigned char *got = read_bytes(target, &got_n);
        if (status == TFM_ERR_IO) {
            /* before the rename: the previous file, untouched */
            ck_assert_msg(got_n == old_n && memcmp(got, old_bytes, old_n) == 0,
                          "%s: failing %s (call %ld) changed the file", s->op, call, n);
            expect_error(TFM_ERR_IO, s->op);
            expect_error(TFM_ERR_IO, reason);
        } else {
            /* after it: the new file, complete; only a failed folder sync
             * says so, a failed close of the synced folder is no failure */
            ck_assert_msg(got_n == new_n && memcmp(got, new_bytes, new_n) == 0,
                          "%s: failing %s (call %ld) gave %s and a file that is not the "
                          "new one", s->op, call, n, tfm_status_name(status));
            if (status == TFM_ERR_SYNC) {
                expect_error(TFM_ERR_SYNC, "is written and in place, but syncing its folder");
                expect_error(TFM_ERR_SYNC, strerror(error));
                ck_assert(!strcmp(call, "open") || !strcmp(call, "fsync"));
            } else {
                ck_assert_msg(status == TFM_OK && !strcmp(call, "close") && n == calls,
                              "%s: failing %s (call %ld of %ld) gave %s: %s", s->op, call, n,
                              calls, tfm_status_name(status), tfm_last_error());
            }
            ck_assert_int_eq(s->save(0), TFM_OK);
        }
        free(got);
        ck_assert_msg(s->loads(), "%s: after failing %s (call %ld): %s", s->op, call, n,
                      tfm_last_error());
        ck_assert_msg(folder_entries(folder) == 1, "%s: failing %s (call %ld) left a "
                      "temporary", s->op, call, n);
        ck_assert_int_eq(open_fds(), fds);
    }
    free(old_bytes);
    free(new_bytes);
}

START_TEST(every_file_call_of_a_save_may_fail)
{
    const int errors[] = {EIO, ENOSPC, EDQUOT};
    total_runs = 0;
    for (int e = 0; e < 3; e++)
        fail_every_call(&savers[_i], errors[e]);
    /* the figure docs/reliability.md quotes */
    printf("save_faults: %s: %ld failed saves (every call x EIO, ENOSPC, EDQUOT), "
           "nothing lost\n", savers[_i].op, total_runs);
}
END_TEST

START_TEST(short_writes_change_nothing)
{
    const saver *s = &savers[_i];
    size_t want_n, got_n;
    unsigned char *want = version_bytes(s, 1, &want_n);
    ck_assert_int_eq(s->save(0), TFM_OK);
    file_faults_arm(0, 0, 1);
    tfm_status status = s->save(1);
    long calls = file_faults_disarm();
    ck_assert_int_eq(status, TFM_OK);
    unsigned char *got = read_bytes(target, &got_n);
    ck_assert_uint_eq(got_n, want_n);
    ck_assert_mem_eq(got, want, want_n);
    ck_assert_int_gt(calls, 20); /* the halved writes took many calls */
    free(got);
    free(want);
}
END_TEST

/* A save that readers would refuse (a header past their 100 MB) is refused
 * before its first file call: the checkpoint at the path stays as it was.
 * tfm_model_save_with_metadata with a 120 MB value replaced it with a file
 * no reader loads. */
START_TEST(saves_readers_would_refuse_make_no_file_call)
{
    size_t old_n, got_n;
    unsigned char *old_bytes = version_bytes(&savers[3], 0, &old_n);
    size_t huge = 120000000;
    char *big = malloc(huge + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'x', huge);
    big[huge] = '\0';
    const char *keys[] = {"notes"}, *values[] = {big};
    file_faults_arm(0, 0, 0);
    tfm_status model = tfm_model_save_with_metadata(models[1], target, 1, keys, values);
    tfm_status training = tfm_training_save(target, models[1], optimizers[1], 0, NULL, 1, keys,
                                            values);
    long calls = file_faults_disarm();
    free(big);
    ck_assert_int_eq(model, TFM_ERR_SIZE);
    ck_assert_int_eq(training, TFM_ERR_SIZE);
    expect_error(TFM_ERR_SIZE, "tfm_training_save: the header would take");
    ck_assert_int_eq(calls, 0);
    unsigned char *got = read_bytes(target, &got_n);
    ck_assert_uint_eq(got_n, old_n);
    ck_assert_mem_eq(got, old_bytes, old_n);
    ck_assert(load_training());
    free(got);
    free(old_bytes);
}
END_TEST

static Suite *save_faults_suite(void)
{
    Suite *s = suite_create("save_faults");
    TCase *tc = tcase_create("save_faults");
    tcase_add_checked_fixture(tc, make_things, free_things);
    tcase_add_loop_test(tc, every_file_call_of_a_save_may_fail, 0, SAVERS);
    tcase_add_loop_test(tc, short_writes_change_nothing, 0, SAVERS);
    tcase_add_test(tc, saves_readers_would_refuse_make_no_file_call);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(save_faults_suite)
