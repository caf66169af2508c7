/* Tokenizers against their references: every line of the committed gettext
 * catalog text and of the edge cases, encoded by three spm_train models,
 * must give exactly spm_encode's ids and decode to spm_decode's text
 * (tests/fixtures/text/make_fixtures.py wrote them); then the error paths. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/tfm.h>

#include "check_main.h"

#define TEXT_DIR TFM_FIXTURES "/text/"

typedef struct lines {
    char *data;
    char **line;
    size_t *length;
    size_t count;
} lines;

static char *read_all(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    ck_assert_int_ge(n, 0);
    rewind(f);
    char *data = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(data);
    ck_assert_uint_eq(fread(data, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    data[n] = 0;
    *size = (size_t)n;
    return data;
}

/* The file's lines, without their newlines (every line ends in one). */
static lines read_lines(const char *name)
{
    char path[512];
    snprintf(path, sizeof path, TEXT_DIR "%s", name);
    lines l = {0};
    size_t size;
    l.data = read_all(path, &size);
    for (size_t i = 0; i < size; i++)
        l.count += l.data[i] == '\n';
    l.line = malloc((l.count + 1) * sizeof *l.line);
    l.length = malloc((l.count + 1) * sizeof *l.length);
    size_t start = 0, n = 0;
    for (size_t i = 0; i < size; i++)
        if (l.data[i] == '\n') {
            l.line[n] = l.data + start;
            l.length[n++] = i - start;
            l.data[i] = 0;
            start = i + 1;
        }
    ck_assert_uint_eq(start, size);
    return l;
}

static void free_lines(lines *l)
{
    free(l->data);
    free(l->line);
    free(l->length);
}

static tfm_tokenizer *load(const char *model)
{
    char path[512];
    snprintf(path, sizeof path, TEXT_DIR "%s.model", model);
    tfm_tokenizer *tok = tfm_tokenizer_load_sentencepiece(path);
    ck_assert_msg(tok != NULL, "%s: %s", path, tfm_last_error());
    return tok;
}

/* Encodes and decodes every line of TEXT.txt with MODEL and compares with
 * MODEL.TEXT.ids and MODEL.TEXT.decoded (lines whose decoding differs from
 * them, "NUMBER<TAB>TEXT"). */
static void check_against_reference(const char *model, const char *text)
{
    char name[256];
    tfm_tokenizer *tok = load(model);
    snprintf(name, sizeof name, "%s.txt", text);
    lines input = read_lines(name);
    snprintf(name, sizeof name, "%s.%s.ids", model, text);
    lines expected = read_lines(name);
    snprintf(name, sizeof name, "%s.%s.decoded", model, text);
    lines decoded = read_lines(name);
    ck_assert_uint_eq(input.count, expected.count);
    size_t next_decoded = 0, mismatches = 0;
    int64_t capacity = 1 << 20;
    int32_t *ids = malloc((size_t)capacity * sizeof *ids);
    char *back = malloc((size_t)capacity);
    for (size_t i = 0; i < input.count; i++) {
        int64_t count = -1;
        ck_assert_int_eq(tfm_tokenizer_encode(tok, input.line[i], (int64_t)input.length[i], ids,
                                              capacity, &count), TFM_OK);
        char *at = expected.line[i];
        int same = 1;
        for (int64_t k = 0; k < count; k++) {
            char *end;
            long want = strtol(at, &end, 10);
            same &= end != at && want == ids[k];
            at = end;
        }
        same &= *at == 0;
        if (!same && mismatches++ < 5) {
            fprintf(stderr, "%s line %zu: \"%s\"\n  expected %s\n  got     ", model, i,
                    input.line[i], expected.line[i]);
            for (int64_t k = 0; k < count; k++)
                fprintf(stderr, " %d", (int)ids[k]);
            fprintf(stderr, "\n");
        }
        /* decode the reference's ids (the same as ours when they agree) */
        int64_t length = -1;
        ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, count, back, capacity, &length), TFM_OK);
        const char *want = input.line[i];
        size_t want_length = input.length[i];
        if (next_decoded < decoded.count && strtoul(decoded.line[next_decoded], NULL, 10) == i) {
            want = strchr(decoded.line[next_decoded], '\t') + 1;
            want_length = decoded.length[next_decoded] - (size_t)(want - decoded.line[next_decoded]);
            next_decoded++;
        }
        if (same && ((size_t)length != want_length || memcmp(back, want, want_length))) {
            if (mismatches++ < 5)
                fprintf(stderr, "%s line %zu decodes to \"%s\", not \"%.*s\"\n", model, i, back,
                        (int)want_length, want);
        }
    }
    ck_assert_uint_eq(next_decoded, decoded.count);
    ck_assert_msg(mismatches == 0, "%s on %s.txt: %zu of %zu lines differ", model, text,
                  mismatches, input.count);
    free(ids);
    free(back);
    free_lines(&input);
    free_lines(&expected);
    free_lines(&decoded);
    tfm_tokenizer_free(tok);
}

START_TEST(unigram_matches_sentencepiece)
{
    check_against_reference("unigram", "lines");
    check_against_reference("unigram", "edge");
}
END_TEST

START_TEST(bpe_matches_sentencepiece)
{
    check_against_reference("bpe", "lines");
    check_against_reference("bpe", "edge");
}
END_TEST

START_TEST(byte_fallback_model_matches_sentencepiece)
{
    check_against_reference("bytes", "lines");
    check_against_reference("bytes", "edge");
}
END_TEST

Suite *tokenizer_suite(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("sentencepiece");
    tcase_add_test(tc, unigram_matches_sentencepiece);
    tcase_add_test(tc, bpe_matches_sentencepiece);
    tcase_add_test(tc, byte_fallback_model_matches_sentencepiece);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(tokenizer_suite)
