/* tfm_model_from_pretrained against hostile published folders: each
 * fixture folder (tests/marian, bart, ...) copied, then one file of it
 * replaced by a FIFO, a folder, or JSON that Python's json would read
 * differently (a key twice, a NUL escape). Each must be refused with the
 * file named, never block, never load something else. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "reliability.h"

static char folder[64];

static const char *at(const char *name)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", folder, name);
    return p;
}

static void write_text(const char *name, const char *text)
{
    FILE *f = fopen(at(name), "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
}

/* A fresh copy of the fixture folder tests/<family> (its files, not its
 * subfolders) in folder. */
static void copy_fixture(const char *family)
{
    static const char *const names[] = {
        "config.json",      "generation_config.json",  "tokenizer_config.json",
        "model.safetensors", "source.spm",             "target.spm",
        "vocab.json",       "merges.txt",              "sentencepiece.bpe.model",
        "spiece.model"};
    scratch_folder(folder, "pretrained_bad");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char from[512];
        snprintf(from, sizeof from, "%s/%s/%s", TFM_TESTS_DIR, family, names[i]);
        FILE *in = fopen(from, "rb");
        if (!in)
            continue;
        FILE *out = fopen(at(names[i]), "wb");
        ck_assert_ptr_nonnull(out);
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, in)) > 0)
            ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
        fclose(in);
        ck_assert_int_eq(fclose(out), 0);
    }
}

/* The load fails with status and a message holding both texts. */
static void expect_refusal(tfm_status status, const char *text, const char *more)
{
    tfm_clear_error();
    tfm_model *m = tfm_model_from_pretrained(folder);
    ck_assert_msg(m == NULL, "loaded, expected \"%s\"", text);
    expect_error(status, text);
    expect_error(status, more);
    expect_error(status, "tfm_model_from_pretrained");
}

/* Every file a folder's reader opens, as a FIFO (or, last, a folder): the
 * load refuses it as not a regular file, in a child that an alarm kills
 * if the load blocks on opening it (as fopen did on a FIFO). */
static const struct {
    const char *family, *file;
} fifos[] = {
    {"marian", "config.json"},      {"marian", "generation_config.json"},
    {"marian", "tokenizer_config.json"}, {"marian", "model.safetensors"},
    {"marian", "source.spm"},       {"marian", "target.spm"},
    {"marian", "vocab.json"},       {"bart", "vocab.json"},
    {"bart", "merges.txt"},         {"mbart", "sentencepiece.bpe.model"},
    {"m2m100", "vocab.json"},       {"t5", "spiece.model"},
    {"bart", "model.safetensors.index.json"},
};
enum { FIFOS = sizeof fifos / sizeof fifos[0] };

START_TEST(a_fifo_in_a_folder_does_not_block)
{
    copy_fixture(fifos[_i].family);
    if (strcmp(fifos[_i].file, "model.safetensors.index.json") == 0)
        unlink(at("model.safetensors")); /* sharded: the index is read */
    unlink(at(fifos[_i].file));
    ck_assert_int_eq(mkfifo(at(fifos[_i].file), 0600), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        signal(SIGALRM, SIG_DFL); /* not Check's handler: the alarm must kill */
        alarm(10);
        tfm_model *m = tfm_model_from_pretrained(folder);
        const char *e = tfm_last_error();
        int ok = !m && tfm_last_status() == TFM_ERR_IO && strstr(e, "(a FIFO)") &&
                 strstr(e, fifos[_i].file) && strstr(e, "tfm_model_from_pretrained");
        if (!ok)
            fprintf(stderr, "%s/%s: %s\n", fifos[_i].family, fifos[_i].file, e);
        _exit(ok ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(!WIFSIGNALED(status), "%s/%s: the load blocked (killed by signal %d)",
                  fifos[_i].family, fifos[_i].file, WTERMSIG(status));
    ck_assert_msg(WEXITSTATUS(status) == 0, "%s/%s: the FIFO was not refused",
                  fifos[_i].family, fifos[_i].file);
    remove_folder(folder);
}
END_TEST

START_TEST(a_folder_in_place_of_a_file_is_refused)
{
    copy_fixture("marian");
    unlink(at("generation_config.json"));
    ck_assert_int_eq(mkdir(at("generation_config.json"), 0700), 0);
    expect_refusal(TFM_ERR_IO, "generation_config.json", "(a directory)");
    remove_folder(folder);
}
END_TEST

/* JSON Python's json reads otherwise: it keeps a repeated key's last
 * value (libtfm kept the first: another family, greedy for beams), and a
 * NUL escape is part of its string (libtfm cut the string there). */
START_TEST(json_read_otherwise_by_python_is_refused)
{
    copy_fixture("marian");
    FILE *f = fopen(at("config.json"), "r");
    ck_assert_ptr_nonnull(f);
    char config[8192];
    size_t n = fread(config, 1, sizeof config - 1, f);
    fclose(f);
    config[n] = 0;
    char *end = strrchr(config, '}');
    ck_assert_ptr_nonnull(end);
    snprintf(end, sizeof config - (size_t)(end - config), ", \"model_type\": \"bart\"}");
    write_text("config.json", config);
    expect_refusal(TFM_ERR_FORMAT, "config.json", "the key \"model_type\" appears twice");
    copy_fixture("marian");
    write_text("generation_config.json", "{\"num_beams\": 1, \"num_beams\": 4}");
    expect_refusal(TFM_ERR_FORMAT, "generation_config.json",
                   "the key \"num_beams\" appears twice");
    write_text("generation_config.json", "{\"bad_words_ids\": [[3]]}");
    write_text("tokenizer_config.json", "{\"src_lang\": \"en\\u0000x\"}");
    expect_refusal(TFM_ERR_FORMAT, "tokenizer_config.json", "\\u0000 (a NUL character)");
    remove_folder(folder);
}
END_TEST

/* tokenizer_config.json's added tokens: each must be the tokenizer's own
 * piece at its id (libtfm adds no pieces), each an AddedToken; their
 * flags count (single_word: </s> glued to the word before it is text). */
START_TEST(added_tokens_are_checked)
{
    copy_fixture("marian");
    write_text("tokenizer_config.json",
               "{\"added_tokens_decoder\": {\"5\": {\"content\": \"</s>\"}}}");
    expect_refusal(TFM_ERR_FORMAT, "added token \"</s>\" has id 5",
                   "the tokenizer's piece is id 0");
    write_text("tokenizer_config.json", "{\"additional_special_tokens\": [\"<new>\"]}");
    expect_refusal(TFM_ERR_FORMAT, "added token \"<new>\" is not a piece of the tokenizer",
                   "libtfm cannot add pieces");
    write_text("tokenizer_config.json", "{\"added_tokens_decoder\": [1]}");
    expect_refusal(TFM_ERR_FORMAT, "added_tokens_decoder is not an object", "tokenizer_config");
    write_text("tokenizer_config.json", "{\"added_tokens_decoder\": {\"x\": {}}}");
    expect_refusal(TFM_ERR_FORMAT, "maps \"x\", not an id to an AddedToken", "tokenizer_config");
    write_text("tokenizer_config.json", "{\"eos_token\": {\"content\": \"</s>\", \"lstrip\": 1}}");
    expect_refusal(TFM_ERR_FORMAT, "eos_token is not a token", "tokenizer_config");

    int32_t ids[64];
    int64_t count;
    for (int glued = 0; glued < 2; glued++) {
        write_text("tokenizer_config.json",
                   glued ? "{\"added_tokens_decoder\": {\"0\": {\"content\": \"</s>\", "
                           "\"single_word\": true}}}"
                         : "{\"added_tokens_decoder\": {\"0\": {\"content\": \"</s>\"}}}");
        tfm_model *m = tfm_model_from_pretrained(folder);
        ck_assert_msg(m != NULL, "%s", tfm_last_error());
        ck_assert_int_eq(tfm_model_encode_text(m, "a</s>b", 6, ids, 64, &count), TFM_OK);
        int whole = 0;
        for (int64_t k = 0; k + 1 < count; k++)
            whole += ids[k] == 0;
        ck_assert_int_eq(whole, !glued);
        tfm_model_free(m);
    }
    remove_folder(folder);
}
END_TEST

/* A tokenizer's added tokens travel in a container around its bytes:
 * cut short, nested, or with a list that is not one, it is refused. */
START_TEST(added_token_containers_are_checked)
{
    copy_fixture("t5");
    tfm_model *m = tfm_model_from_pretrained(folder);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    const tfm_tokenizer *tok = tfm_model_tokenizer(m, 0);
    int64_t size;
    tfm_tokenizer_save_bytes(tok, NULL, 0, &size);
    char *bytes = malloc((size_t)size + 256);
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, bytes, size, &size), TFM_OK);
    ck_assert_mem_eq(bytes, "TFM-ADDT", 8);
    tfm_tokenizer *copy = tfm_tokenizer_from_bytes(bytes, size);
    ck_assert_ptr_nonnull(copy);
    tfm_tokenizer_free(copy);
    ck_assert_ptr_null(tfm_tokenizer_from_bytes(bytes, size - 1));
    expect_error(TFM_ERR_FORMAT, "truncated");
    /* the first part, the tokenizer itself, then another list */
    uint64_t inner = 0;
    for (int i = 0; i < 8; i++)
        inner |= (uint64_t)(unsigned char)bytes[8 + i] << (8 * i);
    static const char *const lists[] = {
        "{\"added_tokens\": [[99999, 0, 0, 0]]}", "{\"added_tokens\": [[1, 2, 0, 0]]}",
        "{\"added_tokens\": [[1, 0, 0]]}", "{\"added_tokens\": 1}", "[]",
        "{\"added_tokens\": [], \"more\": 1}"};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
        size_t n = strlen(lists[k]), at = 16 + (size_t)inner;
        for (int i = 0; i < 8; i++)
            bytes[at + (size_t)i] = (char)((uint64_t)n >> (8 * i));
        memcpy(bytes + at + 8, lists[k], n);
        ck_assert_msg(tfm_tokenizer_from_bytes(bytes, (int64_t)(at + 8 + n)) == NULL, "%s",
                      lists[k]);
        expect_error(TFM_ERR_FORMAT, "added tokens");
    }
    /* a container inside a container */
    memcpy(bytes + 16, "TFM-ADDT", 8);
    ck_assert_ptr_null(tfm_tokenizer_from_bytes(bytes, size));
    free(bytes);
    tfm_model_free(m);
    remove_folder(folder);
}
END_TEST

static Suite *pretrained_bad_input_suite(void)
{
    Suite *s = suite_create("pretrained_bad_input");
    TCase *tc = tcase_create("folders");
    tcase_add_loop_test(tc, a_fifo_in_a_folder_does_not_block, 0, FIFOS);
    tcase_add_test(tc, a_folder_in_place_of_a_file_is_refused);
    tcase_add_test(tc, json_read_otherwise_by_python_is_refused);
    tcase_add_test(tc, added_tokens_are_checked);
    tcase_add_test(tc, added_token_containers_are_checked);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(pretrained_bad_input_suite)
