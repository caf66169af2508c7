/* Tutorial 003's Taylor data (examples/taylor_data.c) against the numbers
 * FORMAT.md lists and the notebook prints, the file's own text (every row
 * must stringify back to its line), hand-worked toy files, and the error
 * for each kind of bad line. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "taylor_data.h"

static taylor_data *data;
static char data_error[256];

static void load_data(void)
{
    data = taylor_data_load(TFM_TAYLOR_DATA, TAYLOR_MAX_SEQ_LEN, data_error, sizeof data_error);
}

static void free_data(void)
{
    taylor_data_free(data);
    data = NULL;
}

static void assert_vocab(const taylor_vocab *v, const char *const *expected, int32_t size)
{
    ck_assert_int_eq(v->size, size);
    for (int32_t i = 0; i < size; i++)
        ck_assert_msg(strcmp(v->tokens[i], expected[i]) == 0, "code %d: '%s', expected '%s'",
                      (int)i, v->tokens[i], expected[i]);
}

static void assert_codes(const int32_t *row, const int32_t *expected, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(row[i] == expected[i], "entry %lld: %d, expected %d", (long long)i,
                      (int)row[i], (int)expected[i]);
}

/* FORMAT.md section 4, both tables in full. */
START_TEST(vocabularies)
{
    ck_assert_msg(data, "%s", data_error);
    static const char *const src[37] = {
        "<pad>", "<sos>", "<eos>", "(", ")", "*", "**", "+", "-", "/",
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
        "a", "b", "c", "cos", "cosh", "d", "exp", "f", "g", "h",
        "m", "n", "sin", "sinh", "tan", "tanh", "x"};
    static const char *const tgt[30] = {
        "<pad>", "<sos>", "<eos>", "(", ")", "*", "**", "+", "-", "/",
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
        "O(x**6)", "a", "b", "c", "d", "f", "g", "h", "m", "x"};
    assert_vocab(&data->src_vocab, src, 37);
    assert_vocab(&data->tgt_vocab, tgt, 30);
    ck_assert_int_eq(taylor_vocab_code(&data->src_vocab, "cosh", 4), 24);
    ck_assert_int_eq(taylor_vocab_code(&data->src_vocab, "cos", 3), 23);
    ck_assert_int_eq(taylor_vocab_code(&data->src_vocab, "n", 1), 31);
    ck_assert_int_eq(taylor_vocab_code(&data->tgt_vocab, "O(x**6)", 7), 20);
    ck_assert_int_eq(taylor_vocab_code(&data->tgt_vocab, "<eos>", 5), TAYLOR_EOS);
    ck_assert_int_eq(taylor_vocab_code(&data->tgt_vocab, "cos", 3), -1);
}
END_TEST

/* FORMAT.md section 5. */
START_TEST(length_statistics)
{
    ck_assert_msg(data, "%s", data_error);
    const taylor_lengths *s = &data->src_lengths, *t = &data->tgt_lengths;
    ck_assert_int_eq(data->samples, 14367);
    ck_assert_int_eq(s->sum, 205502);
    ck_assert_int_eq(s->sum_sq, 2978196);
    ck_assert_int_eq(t->sum, 899431);
    ck_assert_int_eq(t->sum_sq, 77581839);
    double n = 14367.0, ms = s->sum / n, mt = t->sum / n;
    ck_assert_double_eq_tol(ms, 14.3038, 5e-5);
    ck_assert_double_eq_tol(sqrt(s->sum_sq / n - ms * ms), 1.6422, 5e-5);
    ck_assert_double_eq_tol(mt, 62.6040, 5e-5);
    ck_assert_double_eq_tol(sqrt(t->sum_sq / n - mt * mt), 38.4805, 5e-5);
    ck_assert_int_eq(s->avg, 14);
    ck_assert_int_eq(s->std, 2);
    ck_assert_int_eq(s->max, 20);
    ck_assert_int_eq(s->cap, 20);
    ck_assert_int_eq(t->avg, 63);
    ck_assert_int_eq(t->std, 38);
    ck_assert_int_eq(t->max, 376);
    ck_assert_int_eq(t->cap, 83);
    ck_assert_int_eq(data->src_len, 22);
    ck_assert_int_eq(data->tgt_len, 85);
}
END_TEST

/* Content length of a row: the entries between <sos> and the first pad or
 * <eos>. */
static int64_t content_length(const int32_t *row, int64_t width)
{
    int64_t n = 1;
    while (n < width - 1 && row[n] != TAYLOR_PAD)
        n++;
    return n - 1;
}

/* FORMAT.md sections 6 and 7: counts, kept lengths, and the row layout
 * <sos> codes <pad>... <eos> with no pad or special inside the content. */
START_TEST(filter_and_layout)
{
    ck_assert_msg(data, "%s", data_error);
    ck_assert_int_eq(data->rows, 11850);
    ck_assert_int_eq(data->samples - data->rows, 2517);
    int64_t src_min = 1000, src_max = 0, tgt_min = 1000, tgt_max = 0, full = 0;
    const int64_t widths[2] = {data->src_len, data->tgt_len};
    for (int64_t r = 0; r < data->rows; r++) {
        const int32_t *rows[2] = {data->src + r * data->src_len, data->tgt + r * data->tgt_len};
        int64_t lengths[2];
        for (int s = 0; s < 2; s++) {
            const int32_t *row = rows[s];
            int64_t w = widths[s], n = lengths[s] = content_length(row, w);
            ck_assert_int_eq(row[0], TAYLOR_SOS);
            ck_assert_int_eq(row[w - 1], TAYLOR_EOS);
            for (int64_t i = 1; i <= n; i++)
                ck_assert_int_gt(row[i], TAYLOR_EOS);
            for (int64_t i = n + 1; i < w - 1; i++)
                ck_assert_int_eq(row[i], TAYLOR_PAD);
        }
        src_min = lengths[0] < src_min ? lengths[0] : src_min;
        src_max = lengths[0] > src_max ? lengths[0] : src_max;
        tgt_min = lengths[1] < tgt_min ? lengths[1] : tgt_min;
        tgt_max = lengths[1] > tgt_max ? lengths[1] : tgt_max;
        full += lengths[1] == 83;
        if (r)
            ck_assert_int_gt(data->lines[r], data->lines[r - 1]);
    }
    ck_assert_int_eq(src_min, 6);
    ck_assert_int_eq(src_max, 20);
    ck_assert_int_eq(tgt_min, 9);
    ck_assert_int_eq(tgt_max, 83);
    ck_assert_int_eq(full, 62);
    ck_assert_int_eq(data->lines[data->rows - 1], 14367);
}
END_TEST

/* FORMAT.md sections 7 and 8, and the notebook's printout. */
START_TEST(first_rows_and_split)
{
    ck_assert_msg(data, "%s", data_error);
    taylor_split train, val, test;
    char error[256];
    ck_assert_int_eq(taylor_data_split(data, TAYLOR_TRAIN_SIZE, TAYLOR_TEST_SIZE, &train, &val,
                                       &test, error, sizeof error), 0);
    ck_assert_int_eq(train.begin, 0);
    ck_assert_int_eq(train.count, 11000);
    ck_assert_int_eq(val.begin, 11000);
    ck_assert_int_eq(val.count, 100);
    ck_assert_int_eq(test.begin, 11100);
    ck_assert_int_eq(test.count, 750);
    ck_assert_int_eq(data->lines[train.begin], 1);
    ck_assert_int_eq(data->lines[train.begin + train.count - 1], 13331);
    ck_assert_int_eq(data->lines[val.begin], 13332);
    ck_assert_int_eq(data->lines[val.begin + val.count - 1], 13451);
    ck_assert_int_eq(data->lines[test.begin], 13453);

    static const int32_t src0[22] = {1, 24, 3, 20, 5, 36, 4, 6, 13, 7, 35,
                                     3, 21, 5, 36, 4, 0, 0, 0, 0, 0, 2};
    int32_t tgt0[85] = {1, 11, 7, 22, 5, 29, 7, 13, 5, 21, 6, 12, 5, 29, 6, 12, 9, 12, 8,
                        22, 6, 13, 5, 29, 6, 13, 9, 13, 7, 17, 5, 21, 6, 14, 5, 29, 6, 14,
                        9, 18, 7, 12, 5, 22, 6, 15, 5, 29, 6, 15, 9, 11, 15, 7, 20};
    tgt0[84] = 2; /* <sos> and 54 codes, 29 pads, <eos> (FORMAT.md says 30 pads) */
    static const int32_t val_src0[22] = {1, 8, 34, 3, 28, 5, 36, 4, 7, 35, 3,
                                         29, 5, 36, 4, 6, 13, 0, 0, 0, 0, 2};
    static const int32_t test_src0[22] = {1, 33, 3, 21, 5, 36, 4, 6, 13, 5, 24,
                                          3, 25, 5, 36, 4, 6, 12, 0, 0, 0, 2};
    assert_codes(data->src, src0, 22);
    assert_codes(data->tgt, tgt0, 85);
    assert_codes(data->src + val.begin * 22, val_src0, 22);
    assert_codes(data->src + test.begin * 22, test_src0, 22);

    /* The first kept target, stringified as the notebook scores it. */
    char *text = taylor_stringify(&data->tgt_vocab, data->tgt + 1, 83);
    ck_assert_str_eq(text, "1+b*x+3*a**2*x**2/2-b**3*x**3/3+7*a**4*x**4/8+2*b**5*x**5/15+O(x**6)");
    free(text);

    ck_assert_int_eq(taylor_data_split(data, 11000, 850, &train, &val, &test, error,
                                       sizeof error), -1);
    ck_assert_ptr_nonnull(strstr(error, "leaves 0 for validation"));
    ck_assert_int_eq(taylor_data_split(data, 0, 750, &train, &val, &test, error, sizeof error),
                     -1);
}
END_TEST

/* Every kept row turns back into its own line of the file, read here
 * independently: the tokenizer loses nothing and the codes are right. */
START_TEST(rows_reproduce_the_file)
{
    ck_assert_msg(data, "%s", data_error);
    FILE *f = fopen(TFM_TAYLOR_DATA, "r");
    ck_assert_ptr_nonnull(f);
    static char line[16384];
    int64_t number = 0, r = 0;
    while (fgets(line, sizeof line, f) && r < data->rows) {
        number++;
        if (data->lines[r] != number)
            continue;
        line[strcspn(line, "\n")] = '\0';
        char *bar = strchr(line, '|');
        ck_assert_ptr_nonnull(bar);
        *bar = '\0';
        char *src = taylor_stringify(&data->src_vocab, data->src + r * data->src_len + 1,
                                     data->src_len - 2);
        char *tgt = taylor_stringify(&data->tgt_vocab, data->tgt + r * data->tgt_len + 1,
                                     data->tgt_len - 2);
        ck_assert_str_eq(src, line);
        ck_assert_str_eq(tgt, bar + 1);
        free(src);
        free(tgt);
        r++;
    }
    fclose(f);
    ck_assert_int_eq(r, data->rows);
}
END_TEST

START_TEST(tokenizer)
{
    static const struct { const char *text; int64_t length; } cases[] = {
        {"O(x**6)", 7}, {"O(x**5)", 1}, {"Ox", 2}, {"**3", 2}, {"*x", 1}, {"+", 1}, {"-1", 1},
        {"/2", 1}, {"(a", 1}, {")", 1}, {"2.0*x", 3}, {"0.0", 1}, {"2.5", 1}, {"120", 1},
        {"cosh(x)", 4}, {"sin", 3}, {"xAb+", 3}, {" x", 0}, {"#", 0}, {".", 0}, {"|", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(taylor_token_length(cases[i].text, (int64_t)strlen(cases[i].text)) ==
                          cases[i].length,
                      "'%s'", cases[i].text);
    /* The length bounds the match. */
    ck_assert_int_eq(taylor_token_length("O(x**6)", 6), 1);
    ck_assert_int_eq(taylor_token_length("**", 1), 1);
    ck_assert_int_eq(taylor_token_length("cosh", 3), 3);
    ck_assert_int_eq(taylor_token_length("x", 0), 0);
}
END_TEST

/* FORMAT.md section 10. */
START_TEST(scoring)
{
    ck_assert_msg(data, "%s", data_error);
    const taylor_vocab *v = &data->tgt_vocab;
    /* <sos> x ** 2 + O(x**6) <eos> against the padded row. */
    const int32_t target[9] = {1, 29, 6, 12, 7, 20, 0, 0, 2};
    const int32_t exact[7] = {1, 29, 6, 12, 7, 20, 2};
    const int32_t stars[8] = {1, 29, 5, 5, 12, 7, 20, 2};       /* '*','*' for '**' */
    const int32_t padded[9] = {1, 29, 0, 6, 12, 7, 20, 0, 2};    /* pads vanish */
    const int32_t no_eos[7] = {1, 29, 6, 12, 7, 20, 17};         /* last one dropped */
    const int32_t wrong[7] = {1, 29, 6, 13, 7, 20, 2};
    const int32_t short_end[6] = {1, 29, 6, 12, 7, 20};          /* loses O(x**6) */
    ck_assert_int_eq(taylor_matches(v, exact, 7, target, 9), 1);
    ck_assert_int_eq(taylor_matches(v, stars, 8, target, 9), 1);
    ck_assert_int_eq(taylor_matches(v, padded, 9, target, 9), 1);
    ck_assert_int_eq(taylor_matches(v, no_eos, 7, target, 9), 1);
    ck_assert_int_eq(taylor_matches(v, wrong, 7, target, 9), 0);
    ck_assert_int_eq(taylor_matches(v, short_end, 6, target, 9), 0);
    /* [1:-1] of lists shorter than 3 is empty. */
    const int32_t sos_only[1] = {1}, sos_eos[2] = {1, 2}, empty_target[3] = {1, 0, 2};
    ck_assert_int_eq(taylor_matches(v, sos_only, 1, empty_target, 3), 1);
    ck_assert_int_eq(taylor_matches(v, sos_eos, 2, empty_target, 3), 1);
    ck_assert_int_eq(taylor_matches(v, sos_only, 0, empty_target, 3), 1);
    ck_assert_int_eq(taylor_matches(v, sos_eos, 2, target, 9), 0);
    /* A code outside the vocabulary. */
    const int32_t bad[4] = {1, 29, 30, 2};
    ck_assert_int_eq(taylor_matches(v, bad, 4, target, 9), -1);
    ck_assert_ptr_null(taylor_stringify(v, bad, 4));
    char *s = taylor_stringify(v, padded, 9);
    ck_assert_str_eq(s, "<sos>x**2+O(x**6)<eos>");
    free(s);
}
END_TEST

/* The tutorial's greedy list from a decoder's tokens. */
START_TEST(greedy_list)
{
    int32_t out[16];
    const int32_t ends[6] = {1, 29, 7, 20, 2, 29};
    ck_assert_int_eq(taylor_greedy_list(ends, 6, 85, out), 5);
    assert_codes(out, ends, 5);
    const int32_t pad[6] = {1, 29, 7, 0, 20, 2};
    ck_assert_int_eq(taylor_greedy_list(pad, 6, 85, out), 3);
    assert_codes(out, pad, 3);
    const int32_t runs[6] = {1, 29, 7, 20, 7, 29};
    ck_assert_int_eq(taylor_greedy_list(runs, 6, 85, out), 6);
    ck_assert_int_eq(taylor_greedy_list(runs, 6, 3, out), 4);
    assert_codes(out, runs, 4);
    ck_assert_int_eq(taylor_greedy_list(runs, 1, 85, out), 1);
    ck_assert_int_eq(taylor_greedy_list(runs, 0, 85, out), 0);
}
END_TEST

/* --- small files ---------------------------------------------------------------- */

static char temp_dir[64];

static void make_temp_dir(void)
{
    strcpy(temp_dir, "/tmp/tfm_taylor_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(temp_dir));
}

static void remove_temp_dir(void)
{
    rmdir(temp_dir);
}

/* Writes contents to a file in the temporary folder; returns its path. */
static const char *write_file(const char *name, const char *contents)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", temp_dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fwrite(contents, 1, strlen(contents), f);
    fclose(f);
    return path;
}

static taylor_data *load_text(const char *contents, int64_t max_seq_len, char *error,
                              size_t size)
{
    const char *path = write_file("data.txt", contents);
    taylor_data *d = taylor_data_load(path, max_seq_len, error, size);
    remove(path);
    return d;
}

/* Worked by hand: source lengths 4, 4, 4, 8 (mean 5, sd sqrt 3, so avg 5,
 * std 2), target lengths 3, 3, 5, 5 (mean 4, sd 1). With MAX_SEQ_LEN 7 the
 * caps are min(11, 8, 5) = 5 and min(7, 5, 5) = 5: line 4 is dropped, yet
 * its tokens (tanh, **, 2, *, a) are in the vocabularies. */
START_TEST(toy_file)
{
    char error[256] = "";
    const char *text = "sin(x)|x+O(x**6)\n"
                       "  cos(x)|1+O(x**6)\r\n"
                       "exp(x)|1+x+O(x**6)\n"
                       "tanh(x)**2*a|x**2+O(x**6)";   /* no final newline */
    taylor_data *d = load_text(text, 7, error, sizeof error);
    ck_assert_msg(d, "%s", error);
    ck_assert_int_eq(d->samples, 4);
    ck_assert_int_eq(d->src_lengths.sum, 20);
    ck_assert_int_eq(d->src_lengths.sum_sq, 112);
    ck_assert_int_eq(d->src_lengths.avg, 5);
    ck_assert_int_eq(d->src_lengths.std, 2);
    ck_assert_int_eq(d->src_lengths.max, 8);
    ck_assert_int_eq(d->src_lengths.cap, 5);
    ck_assert_int_eq(d->tgt_lengths.avg, 4);
    ck_assert_int_eq(d->tgt_lengths.std, 1);
    ck_assert_int_eq(d->tgt_lengths.cap, 5);
    ck_assert_int_eq(d->rows, 3);
    ck_assert_int_eq(d->src_len, 7);
    ck_assert_int_eq(d->tgt_len, 7);
    static const char *const src[23] = {
        "<pad>", "<sos>", "<eos>", "(", ")", "*", "**", "0", "1", "2", "3", "4",
        "5", "6", "7", "8", "9", "a", "cos", "exp", "sin", "tanh", "x"};
    static const char *const tgt[17] = {
        "<pad>", "<sos>", "<eos>", "**", "+", "0", "1", "2", "3", "4", "5", "6",
        "7", "8", "9", "O(x**6)", "x"};
    assert_vocab(&d->src_vocab, src, 23);
    assert_vocab(&d->tgt_vocab, tgt, 17);
    static const int32_t src_rows[21] = {1, 20, 3, 22, 4, 0, 2,
                                         1, 18, 3, 22, 4, 0, 2,
                                         1, 19, 3, 22, 4, 0, 2};
    static const int32_t tgt_rows[21] = {1, 16, 4, 15, 0, 0, 2,
                                         1, 6, 4, 15, 0, 0, 2,
                                         1, 6, 4, 16, 4, 15, 2};
    assert_codes(d->src, src_rows, 21);
    assert_codes(d->tgt, tgt_rows, 21);
    ck_assert_int_eq(d->lines[2], 3);
    taylor_data_free(d);

    /* MAX_SEQ_LEN 85: caps min(11, 8, 83) = 8 and min(7, 5, 83) = 5, all kept. */
    d = load_text(text, 85, error, sizeof error);
    ck_assert_msg(d, "%s", error);
    ck_assert_int_eq(d->src_lengths.cap, 8);
    ck_assert_int_eq(d->rows, 4);
    ck_assert_int_eq(d->src_len, 10);
    taylor_data_free(d);
}
END_TEST

static void assert_load_fails(const char *contents, const char *message)
{
    char error[256] = "";
    taylor_data *d = load_text(contents, 85, error, sizeof error);
    ck_assert_ptr_null(d);
    ck_assert_msg(strstr(error, message), "error '%s' lacks '%s'", error, message);
}

START_TEST(bad_lines)
{
    assert_load_fails("sin(x)|x\ncos(x)\n", "line 2 has no '|'");
    assert_load_fails("sin(x)|x\nsin(x)|x\nx|y|z\n", "line 3 has more than one '|'");
    assert_load_fails("sin(x)|x\n\ncos(x)|1\n", "line 2 is empty");
    assert_load_fails("sin(x)|x\n   \t\n", "line 2 is empty");
    assert_load_fails("sin(x)|x\n\n", "line 2 is empty");
    assert_load_fails("sin (x)|x\n", "line 1: unknown character ' ' (byte 0x20) at column 4 of "
                      "the source");
    assert_load_fails("sin(x)|x\n  x|1+x#2\n", "line 2: unknown character '#' (byte 0x23) at "
                      "column 8 of the target");
    assert_load_fails("sin(x)|2.5\n", "line 1: unknown character '.' (byte 0x2e) at column 9 "
                      "of the target");
    assert_load_fails("a|b\n|x\n", "line 2: the source is empty");
    assert_load_fails("a|\n", "line 1: the target is empty");
    assert_load_fails("", "the file is empty");
    char error[256] = "";
    ck_assert_ptr_null(taylor_data_load("/nonexistent/taylor.txt", 85, error, sizeof error));
    ck_assert_ptr_nonnull(strstr(error, "cannot open '/nonexistent/taylor.txt'"));
    ck_assert_ptr_null(taylor_data_load(NULL, 85, error, sizeof error));
    ck_assert_ptr_nonnull(strstr(error, "no data file"));
    const char *path = write_file("ok.txt", "a|b\n");
    ck_assert_ptr_null(taylor_data_load(path, 2, error, sizeof error));
    ck_assert_ptr_nonnull(strstr(error, "max_seq_len 2"));
    /* No error buffer: still NULL, nothing written. */
    ck_assert_ptr_null(taylor_data_load(path, 2, NULL, 0));
    remove(path);
}
END_TEST

static Suite *taylor_data_suite(void)
{
    Suite *s = suite_create("taylor_data");
    TCase *file = tcase_create("file");
    tcase_add_unchecked_fixture(file, load_data, free_data);
    tcase_set_timeout(file, 300);
    tcase_add_test(file, vocabularies);
    tcase_add_test(file, length_statistics);
    tcase_add_test(file, filter_and_layout);
    tcase_add_test(file, first_rows_and_split);
    tcase_add_test(file, rows_reproduce_the_file);
    tcase_add_test(file, scoring);
    suite_add_tcase(s, file);
    TCase *pure = tcase_create("pure");
    tcase_add_test(pure, tokenizer);
    tcase_add_test(pure, greedy_list);
    suite_add_tcase(s, pure);
    TCase *small = tcase_create("small_files");
    tcase_add_checked_fixture(small, make_temp_dir, remove_temp_dir);
    tcase_add_test(small, toy_file);
    tcase_add_test(small, bad_lines);
    suite_add_tcase(s, small);
    return s;
}

TFM_CHECK_MAIN(taylor_data_suite)
