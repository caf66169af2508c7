/* Tokenizers against their references: every line of the committed gettext
 * catalog text and of the edge cases, encoded by three spm_train models,
 * must give exactly spm_encode's ids and decode to spm_decode's text
 * (tests/fixtures/text/make_fixtures.py wrote them); then the error paths. */
#define _DEFAULT_SOURCE /* wait4 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tfm/tfm.h>

#include "check_main.h"
#include "reliability.h"

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

/* Encodes and decodes every line of TEXT.txt with tok and compares with
 * MODEL.TEXT.ids and MODEL.TEXT.decoded (lines whose decoding differs from
 * them, "NUMBER<TAB>TEXT"). */
static void check_tokenizer(tfm_tokenizer *tok, const char *model, const char *text)
{
    char name[256];
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

static void check_against_reference(const char *model, const char *text)
{
    check_tokenizer(load(model), model, text);
}

static tfm_tokenizer *load_byte_bpe(void)
{
    tfm_tokenizer *tok = tfm_tokenizer_load_byte_bpe(TEXT_DIR "byte_bpe.vocab.json",
                                                     TEXT_DIR "byte_bpe.merges.txt");
    ck_assert_msg(tok != NULL, "%s", tfm_last_error());
    return tok;
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
    /* with pieces "%s%s" and "\u2581%s" that BPE must not make, the user
     * symbols being frozen */
    check_against_reference("frozen", "edge");
}
END_TEST

START_TEST(byte_fallback_model_matches_sentencepiece)
{
    check_against_reference("bytes", "heldout");
    check_against_reference("bytes", "edge");
}
END_TEST

/* Encodes text and returns the ids' count, checking the size query. */
static int64_t encode(const tfm_tokenizer *tok, const char *text, int64_t length, int32_t *ids,
                      int64_t capacity)
{
    int64_t needed = -1, count = -1;
    ck_assert_int_eq(tfm_tokenizer_encode(tok, text, length, NULL, 0, &needed),
                     needed ? TFM_ERR_SIZE : TFM_OK);
    ck_assert_int_eq(tfm_tokenizer_encode(tok, text, length, ids, capacity, &count), TFM_OK);
    ck_assert_int_eq(count, needed);
    return count;
}

START_TEST(empty_and_whitespace_only_text_give_no_ids)
{
    tfm_tokenizer *tok = load("unigram");
    int32_t ids[4] = {-7, -7, -7, -7};
    ck_assert_int_eq(encode(tok, "", 0, ids, 4), 0);
    ck_assert_int_eq(encode(tok, NULL, 0, ids, 4), 0);
    ck_assert_int_eq(encode(tok, "  \t ", 2, ids, 4), 0);
    ck_assert_int_eq(ids[0], -7);
    char text[8] = "x";
    int64_t length = -1;
    ck_assert_int_eq(tfm_tokenizer_decode(tok, NULL, 0, text, 8, &length), TFM_OK);
    ck_assert_int_eq(length, 0);
    ck_assert_str_eq(text, "");
    tfm_tokenizer_free(tok);
}
END_TEST

/* Invalid UTF-8 is read byte by byte as U+FFFD, never an error, as
 * SentencePiece reads it: here the unigram model has no piece for it, so
 * the run is one unknown id after the space (spm_encode gives "7 0"; a
 * literal U+FFFD the nmt_nfkc map removes); the byte-fallback model spells
 * U+FFFD in bytes. (The edge fixture compares more such lines.) */
START_TEST(invalid_utf8_is_replacement_characters)
{
    tfm_tokenizer *tok = load("unigram");
    int32_t bad[8];
    int64_t n = encode(tok, "\xff\xfe\xc3", 3, bad, 8);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(bad[0], tfm_tokenizer_piece_to_id(tok, "\xe2\x96\x81", 3));
    ck_assert_int_eq(bad[1], tfm_tokenizer_special_id(tok, TFM_TOKEN_UNK));
    ck_assert_int_eq(encode(tok, "\xef\xbf\xbd", 3, bad, 8), 0);
    tfm_tokenizer_free(tok);
    tok = load("bytes");
    n = encode(tok, "\xff", 1, bad, 8);
    ck_assert_int_eq(n, 3);
    char piece[16];
    int64_t length;
    const char *want[3] = {"<0xEF>", "<0xBF>", "<0xBD>"};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(tfm_tokenizer_id_to_piece(tok, bad[i], piece, 16, &length), TFM_OK);
        ck_assert_str_eq(piece, want[i]);
    }
    tfm_tokenizer_free(tok);
}
END_TEST

/* A megabyte line encodes, and its ids are its parts' ids when the parts
 * meet at a space (the unigram model sees words separately). */
START_TEST(very_long_lines)
{
    tfm_tokenizer *tok = load("unigram");
    const char *word = " Fichier introuvable";
    size_t word_length = strlen(word), repeats = 50000;
    char *text = malloc(word_length * repeats);
    for (size_t i = 0; i < repeats; i++)
        memcpy(text + i * word_length, word, word_length);
    int32_t one[16];
    int64_t per_word = encode(tok, word, (int64_t)word_length, one, 16);
    int64_t capacity = per_word * (int64_t)repeats;
    int32_t *ids = malloc((size_t)capacity * sizeof *ids);
    ck_assert_int_eq(encode(tok, text, (int64_t)(word_length * repeats), ids, capacity), capacity);
    for (int64_t i = 0; i < capacity; i++)
        ck_assert_int_eq(ids[i], one[i % per_word]);
    int64_t length = -1;
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, capacity, NULL, 0, &length), TFM_ERR_SIZE);
    ck_assert_int_eq(length, (int64_t)(word_length * repeats) - 1); /* no leading space */
    free(ids);
    free(text);
    tfm_tokenizer_free(tok);
}
END_TEST

/* The fixtures' tokenizers, SentencePiece's models then byte-level BPE. */
static const char *const truncated_models[] = {"unigram", "bpe", "bytes", "char", "word",
                                               "denormalizer", "byte_bpe"};
enum { TRUNCATED_MODELS = sizeof truncated_models / sizeof truncated_models[0] };

static tfm_tokenizer *load_any(const char *model)
{
    return strcmp(model, "byte_bpe") == 0 ? load_byte_bpe() : load(model);
}

/* lines.txt's lines (French, German, Spanish, Russian, Japanese) run
 * together up to size bytes, NUL-terminated: with a space between them,
 * or without any space at all. */
static char *catalog_text(size_t size, int spaced)
{
    lines l = read_lines("lines.txt");
    char *text = malloc(size + 1);
    ck_assert_ptr_nonnull(text);
    size_t used = 0;
    for (size_t i = 0; used < size; i = (i + 1) % l.count) {
        for (size_t k = 0; k < l.length[i] && used < size; k++)
            if (spaced || l.line[i][k] != ' ')
                text[used++] = l.line[i][k];
        if (spaced && used < size)
            text[used++] = ' ';
    }
    text[size] = 0;
    free_lines(&l);
    return text;
}

/* tfm_tokenizer_encode_truncated gives the whole text's first ids, and
 * says whether there were more: at every capacity tried, for each kind of
 * model, on text with spaces and on text without (the catalog's lines run
 * together, Japanese included, where a prefix ends inside a word). */
START_TEST(truncated_encoding_gives_the_whole_texts_first_ids)
{
    enum { SIZE = 24 << 10 };
    for (int spaced = 0; spaced < 2; spaced++) {
        char *text = catalog_text(SIZE, spaced);
        for (int m = 0; m < TRUNCATED_MODELS; m++) {
            /* without spaces the word model's text is one word, one id:
             * fewer than one per 256 bytes, read only so far (below) */
            if (!spaced && strcmp(truncated_models[m], "word") == 0)
                continue;
            tfm_tokenizer *tok = load_any(truncated_models[m]);
            int64_t all = 0, count = -1;
            ck_assert_int_eq(tfm_tokenizer_encode(tok, text, SIZE, NULL, 0, &all), TFM_ERR_SIZE);
            int32_t *whole = malloc((size_t)all * sizeof *whole);
            int32_t *ids = malloc((size_t)(all + 8) * sizeof *ids);
            ck_assert_int_eq(encode(tok, text, SIZE, whole, all), all);
            const int64_t capacities[] = {0, 1, 17, 100, 512, 1000, all - 1, all, all + 8};
            for (size_t c = 0; c < sizeof capacities / sizeof capacities[0]; c++) {
                int64_t capacity = capacities[c], kept = capacity < all ? capacity : all;
                int32_t cut = -1;
                ck_assert_msg(tfm_tokenizer_encode_truncated(tok, text, SIZE, ids, capacity,
                                                             &count, &cut) == TFM_OK,
                              "%s: %s", truncated_models[m], tfm_last_error());
                ck_assert_int_eq(count, kept);
                ck_assert_int_eq(cut, capacity < all);
                for (int64_t i = 0; i < kept; i++)
                    ck_assert_msg(ids[i] == whole[i], "%s, %s text, capacity %lld: id %lld is "
                                  "%d, the whole text's %d", truncated_models[m],
                                  spaced ? "spaced" : "unspaced", (long long)capacity,
                                  (long long)i, (int)ids[i], (int)whole[i]);
            }
            free(ids);
            free(whole);
            tfm_tokenizer_free(tok);
        }
        free(text);
    }
}
END_TEST

/* A 10 MB line cut to 512 ids costs what those ids need, not what the
 * line would (SentencePiece's BPE took 530 MB and 5 s to encode it whole):
 * the peak memory of a child that encodes it, above what it held at the
 * fork, stays under 32 MiB, and its ids are those of the line's first
 * 48 KiB (the same text) encoded whole. */
START_TEST(a_huge_line_is_cut_in_bounded_memory)
{
    enum { HUGE = 10 << 20, HEAD = 48 << 10, KEPT = 512 };
    char *text = catalog_text(HUGE, 1);
    for (int m = 0; m < TRUNCATED_MODELS; m++) {
        tfm_tokenizer *tok = load_any(truncated_models[m]);
        int32_t ids[KEPT];
        int64_t count = 0;
        int32_t cut = 0;
        ck_assert_int_eq(tfm_tokenizer_encode(tok, text, HEAD, NULL, 0, &count), TFM_ERR_SIZE);
        int32_t *head = malloc((size_t)count * sizeof *head);
        ck_assert_int_ge(encode(tok, text, HEAD, head, count), KEPT);
        long before = resident_kib();
        pid_t child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0)
            _exit(tfm_tokenizer_encode_truncated(tok, text, HUGE, ids, KEPT, &count, &cut) ==
                          TFM_OK && count == KEPT && cut == 1 &&
                          memcmp(ids, head, sizeof ids) == 0
                      ? 0
                      : 1);
        int status;
        struct rusage usage;
        ck_assert_int_eq(wait4(child, &status, 0, &usage), child);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "%s: the huge line's ids are not its head's", truncated_models[m]);
        ck_assert_msg(under_valgrind() || usage.ru_maxrss - before < 32 << 10,
                      "%s: %ld KiB to cut a %d MiB line", truncated_models[m],
                      usage.ru_maxrss - before, HUGE >> 20);
        free(head);
        tfm_tokenizer_free(tok);
    }
    free(text);
}
END_TEST

/* A text that gives one id per many bytes (spaces, which SentencePiece
 * drops) is read no further than 256 bytes an id kept, and said cut. */
START_TEST(truncation_reads_a_bounded_prefix)
{
    enum { SIZE = 1 << 20 };
    char *text = malloc(SIZE);
    memset(text, ' ', SIZE);
    memcpy(text + SIZE - 5, "Titre", 5);
    tfm_tokenizer *tok = load("unigram");
    int32_t ids[4];
    int64_t count = -1;
    int32_t cut = -1;
    ck_assert_int_eq(tfm_tokenizer_encode_truncated(tok, text, SIZE, ids, 4, &count, &cut),
                     TFM_OK);
    ck_assert_int_eq(count, 0);
    ck_assert_int_eq(cut, 1);
    /* all of it when the capacity allows */
    ck_assert_int_eq(tfm_tokenizer_encode_truncated(tok, text, SIZE, ids, 4096, &count, &cut),
                     TFM_OK);
    ck_assert_int_gt(count, 0);
    ck_assert_int_eq(cut, 0);
    ck_assert_int_eq(tfm_tokenizer_encode_truncated(tok, text, SIZE, NULL, 4, &count, NULL),
                     TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tokenizer_encode_truncated(tok, text, -1, ids, 4, &count, NULL),
                     TFM_ERR_ARG);
    ck_assert_int_eq(tfm_tokenizer_encode_truncated(tok, text, SIZE, ids, -1, &count, NULL),
                     TFM_ERR_ARG);
    ck_assert_int_eq(tfm_tokenizer_encode_truncated(NULL, text, SIZE, ids, 4, &count, NULL),
                     TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tokenizer_encode_truncated(tok, NULL, 0, NULL, 0, &count, &cut),
                     TFM_OK);
    ck_assert_int_eq(count, 0);
    ck_assert_int_eq(cut, 0);
    tfm_tokenizer_free(tok);
    free(text);
}
END_TEST

START_TEST(buffers_too_small_are_refused_untouched)
{
    tfm_tokenizer *tok = load("bpe");
    int32_t ids[64];
    int64_t count = -1;
    const char *text = "Fichier introuvable";
    ck_assert_int_eq(tfm_tokenizer_encode(tok, text, (int64_t)strlen(text), ids, 64, &count),
                     TFM_OK);
    ck_assert_int_gt(count, 1);
    int32_t small[64];
    memset(small, 0x55, sizeof small);
    int64_t needed = -1;
    ck_assert_int_eq(tfm_tokenizer_encode(tok, text, (int64_t)strlen(text), small, count - 1,
                                          &needed), TFM_ERR_SIZE);
    ck_assert_int_eq(needed, count);
    ck_assert_int_eq(small[0], 0x55555555);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_tokenizer_encode"));
    char back[64];
    memset(back, 'z', sizeof back);
    int64_t length = -1;
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, count, back, (int64_t)strlen(text), &length),
                     TFM_ERR_SIZE); /* no room for the NUL */
    ck_assert_int_eq(length, (int64_t)strlen(text));
    ck_assert_int_eq(back[0], 'z');
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, count, back, length + 1, &length), TFM_OK);
    ck_assert_str_eq(back, text);
    char piece[4];
    ck_assert_int_eq(tfm_tokenizer_id_to_piece(tok, 0, piece, 4, &length), TFM_ERR_SIZE);
    ck_assert_int_eq(length, 5); /* <unk> */
    tfm_tokenizer_free(tok);
}
END_TEST

START_TEST(null_and_bad_arguments)
{
    tfm_tokenizer *tok = load("unigram");
    int32_t ids[4] = {0};
    int64_t n = 0;
    char text[8];
    ck_assert_ptr_null(tfm_tokenizer_load_sentencepiece(NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_null(tfm_tokenizer_load_byte_bpe("vocab.json", NULL));
    ck_assert_str_eq(tfm_last_error(), "tfm_tokenizer_load_byte_bpe: merges_path is NULL");
    ck_assert_ptr_null(tfm_tokenizer_load_byte_bpe(NULL, "merges.txt"));
    ck_assert_str_eq(tfm_last_error(), "tfm_tokenizer_load_byte_bpe: vocab_path is NULL");
    ck_assert_ptr_null(tfm_tokenizer_from_bytes(NULL, 3));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_ptr_null(tfm_tokenizer_from_bytes("", -1));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_tokenizer_encode(NULL, "a", 1, ids, 4, &n), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tokenizer_encode(tok, NULL, 1, ids, 4, &n), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tokenizer_encode(tok, "a", 1, ids, 4, NULL), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tokenizer_encode(tok, "a", -1, ids, 4, &n), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_tokenizer_encode(tok, "a", 1, ids, -4, &n), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_tokenizer_decode(NULL, ids, 1, text, 8, &n), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tokenizer_decode(tok, NULL, 1, text, 8, &n), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, 1, text, 8, NULL), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, -1, text, 8, &n), TFM_ERR_ARG);
    ids[0] = tfm_tokenizer_vocab_size(tok);
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, 1, text, 8, &n), TFM_ERR_RANGE);
    ids[0] = -1;
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, 1, text, 8, &n), TFM_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "ids[0] = -1"));
    ck_assert_int_eq(tfm_tokenizer_vocab_size(NULL), -1);
    ck_assert_int_eq(tfm_tokenizer_piece_to_id(NULL, "a", 1), -1);
    ck_assert_int_eq(tfm_tokenizer_piece_to_id(tok, NULL, 1), -1);
    ck_assert_int_eq(tfm_tokenizer_piece_to_id(tok, "a", -1), -1);
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_tokenizer_id_to_piece(tok, -1, text, 8, &n), TFM_ERR_RANGE);
    /* the message names the argument given: id, not decode's ids[i] */
    ck_assert_str_eq(tfm_last_error(), "tfm_tokenizer_id_to_piece: id -1 is outside [0, 2000)");
    ck_assert_int_eq(tfm_tokenizer_id_to_piece(NULL, 0, text, 8, &n), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tokenizer_special_id(NULL, TFM_TOKEN_BOS), -1);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, (tfm_special_token)4), -1);
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_tokenizer_save_bytes(NULL, text, 8, &n), TFM_ERR_NULL);
    /* a NULL buffer with room claimed: the message names the argument */
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, 0, NULL, 8, &n), TFM_ERR_NULL);
    ck_assert_str_eq(tfm_last_error(), "tfm_tokenizer_decode: text is NULL");
    ck_assert_int_eq(tfm_tokenizer_id_to_piece(tok, 0, NULL, 64, &n), TFM_ERR_NULL);
    ck_assert_str_eq(tfm_last_error(), "tfm_tokenizer_id_to_piece: piece is NULL");
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, NULL, INT64_MAX, &n), TFM_ERR_NULL);
    ck_assert_str_eq(tfm_last_error(), "tfm_tokenizer_save_bytes: bytes is NULL");
    tfm_tokenizer_free(NULL);
    tfm_tokenizer_free(tok);
}
END_TEST

/* Pieces and ids both ways, the file's special ids (the bytes model was
 * trained with --pad_id=3; the others have no pad). */
START_TEST(pieces_ids_and_special_tokens)
{
    tfm_tokenizer *tok = load("bytes");
    ck_assert_int_eq(tfm_tokenizer_vocab_size(tok), 2000);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_UNK), 0);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_BOS), 1);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_EOS), 2);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_PAD), 3);
    char piece[64];
    int64_t length;
    for (int32_t id = 0; id < tfm_tokenizer_vocab_size(tok); id++) {
        ck_assert_int_eq(tfm_tokenizer_id_to_piece(tok, id, piece, 64, &length), TFM_OK);
        ck_assert_int_eq(tfm_tokenizer_piece_to_id(tok, piece, length), id);
    }
    ck_assert_int_eq(tfm_tokenizer_piece_to_id(tok, "no such piece", 13), -1);
    ck_assert_int_eq(tfm_tokenizer_piece_to_id(tok, "<pad>", 5), 3);
    tfm_tokenizer_free(tok);
    tok = load("unigram");
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_PAD), -1);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_EOS), 2);
    /* control pieces decode to nothing; user-defined ones are never split */
    int32_t ids[16];
    int64_t n = encode(tok, "%s%lu", 5, ids, 16);
    ck_assert_int_eq(n, 3); /* "▁", "%s", "%lu" */
    ck_assert_int_eq(ids[1], tfm_tokenizer_piece_to_id(tok, "%s", 2));
    ck_assert_int_eq(ids[2], tfm_tokenizer_piece_to_id(tok, "%lu", 3));
    int32_t framed[5] = {1, ids[0], ids[1], ids[2], 2};
    ck_assert_int_eq(tfm_tokenizer_decode(tok, framed, 5, piece, 64, &length), TFM_OK);
    ck_assert_str_eq(piece, "%s%lu");
    tfm_tokenizer_free(tok);
}
END_TEST

START_TEST(bytes_round_trip)
{
    char path[512];
    snprintf(path, sizeof path, TEXT_DIR "unigram.model");
    size_t size;
    char *file = read_all(path, &size);
    tfm_tokenizer *tok = load("unigram");
    int64_t saved = -1;
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, NULL, 0, &saved), TFM_ERR_SIZE);
    ck_assert_int_eq(saved, (int64_t)size);
    char *bytes = malloc(size);
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, bytes, saved, &saved), TFM_OK);
    ck_assert_mem_eq(bytes, file, size); /* the .model file itself */
    tfm_tokenizer *copy = tfm_tokenizer_from_bytes(bytes, saved);
    ck_assert_ptr_nonnull(copy);
    free(bytes); /* the copy does not keep the caller's bytes */
    const char *text = "Impossible d'ouvrir « %s » : fichier introuvable";
    int32_t a[64], b[64];
    int64_t n = encode(tok, text, (int64_t)strlen(text), a, 64);
    ck_assert_int_eq(encode(copy, text, (int64_t)strlen(text), b, 64), n);
    ck_assert_mem_eq(a, b, (size_t)n * sizeof *a);
    tfm_tokenizer_free(copy);
    tfm_tokenizer_free(tok);
    free(file);
}
END_TEST

/* Every prefix of a model file, and random byte changes in one with a
 * character map, load or fail with TFM_ERR_FORMAT; whatever loads encodes
 * and decodes without reading out of bounds (run under ASan). */
static void load_or_refuse(const char *bytes, size_t size)
{
    tfm_clear_error();
    tfm_tokenizer *tok = tfm_tokenizer_from_bytes(bytes, (int64_t)size);
    if (!tok) {
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_FORMAT);
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_tokenizer_from_bytes: "));
        return;
    }
    const char *text = "  Fichier « introuvable » ⁇ \xff ｆｉ ① 軽量  ";
    int32_t ids[256];
    int64_t n = -1, length;
    ck_assert_int_eq(tfm_tokenizer_encode(tok, text, (int64_t)strlen(text), ids, 256, &n), TFM_OK);
    char back[1024];
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, n, back, sizeof back, &length), TFM_OK);
    tfm_tokenizer_free(tok);
}

START_TEST(corrupt_models_fail_cleanly)
{
    size_t size;
    char path[512];
    snprintf(path, sizeof path, TEXT_DIR "bytes.model");
    char *file = read_all(path, &size);
    size_t refused = 0;
    for (size_t cut = 0; cut < size; cut += cut < 2000 ? 1 : 97) {
        load_or_refuse(file, cut);
        refused += tfm_last_status() != TFM_OK;
    }
    ck_assert_uint_gt(refused, 100);
    free(file);
    snprintf(path, sizeof path, TEXT_DIR "unigram.model");
    file = read_all(path, &size);
    uint64_t state = 12345;
    for (int trial = 0; trial < 300; trial++) {
        char *copy = malloc(size);
        memcpy(copy, file, size);
        for (int k = 0; k < 8; k++) {
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            copy[(state >> 33) % size] ^= (char)(1 + (state >> 20) % 255);
        }
        load_or_refuse(copy, size);
        free(copy);
    }
    free(file);
    ck_assert_ptr_null(tfm_tokenizer_load_sentencepiece(TEXT_DIR "lines.txt"));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_FORMAT);
    ck_assert_ptr_null(tfm_tokenizer_load_sentencepiece(TEXT_DIR "no such file"));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_IO);
    ck_assert_ptr_null(tfm_tokenizer_load_sentencepiece(TEXT_DIR));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_IO);
}
END_TEST

/* The lines of lines.txt make_fixtures.py trained on (all but every tenth). */
static tfm_tokenizer *train_on_fixture(lines *all, int32_t vocab_size, int byte_fallback)
{
    const char **train = malloc(all->count * sizeof *train);
    int64_t *lengths = malloc(all->count * sizeof *lengths), n = 0;
    for (size_t i = 0; i < all->count; i++)
        if (i % 10) {
            train[n] = all->line[i];
            lengths[n++] = (int64_t)all->length[i];
        }
    tfm_bpe_train_options options;
    tfm_bpe_train_options_init(&options);
    options.vocab_size = vocab_size;
    options.byte_fallback = byte_fallback;
    tfm_tokenizer *tok = NULL;
    ck_assert_msg(tfm_tokenizer_train_bpe(train, lengths, n, &options, &tok) == TFM_OK, "%s",
                  tfm_last_error());
    free(train);
    free(lengths);
    return tok;
}

/* Trained BPE compresses held-out text within 5% of spm_train's BPE at the
 * same vocabulary size on the same text (heldout.bpe_tokens), gives the
 * same model every time, round-trips through its bytes and decodes what it
 * encodes. */
START_TEST(bpe_training_compresses_as_spm_train)
{
    lines all = read_lines("lines.txt"), heldout = read_lines("heldout.txt");
    size_t size;
    char *reference = read_all(TEXT_DIR "heldout.bpe_tokens", &size);
    long spm_tokens = strtol(reference, NULL, 10);
    free(reference);
    tfm_tokenizer *tok = train_on_fixture(&all, 2000, 0);
    ck_assert_int_eq(tfm_tokenizer_vocab_size(tok), 2000);
    int32_t ids[4096];
    char back[8192];
    int64_t tokens = 0, length;
    for (size_t i = 0; i < heldout.count; i++) {
        int64_t n = encode(tok, heldout.line[i], (int64_t)heldout.length[i], ids, 4096);
        tokens += n;
        ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, n, back, sizeof back, &length), TFM_OK);
        /* the text again, but for runs of spaces (one) and unknown characters */
        if (!strstr(heldout.line[i], "  ") && heldout.line[i][0] != ' ' &&
            heldout.line[i][heldout.length[i] - 1] != ' ' && !strstr(back, "\xe2\x81\x87"))
            ck_assert_str_eq(back, heldout.line[i]);
    }
    fprintf(stderr, "BPE training: %lld ids for held-out text, spm_train %ld (%+.2f%%)\n",
            (long long)tokens, spm_tokens, 100.0 * ((double)tokens / (double)spm_tokens - 1.0));
    ck_assert_int_le(tokens, spm_tokens + spm_tokens / 20);

    tfm_tokenizer *again = train_on_fixture(&all, 2000, 0);
    int64_t a_size = 0, b_size = 0;
    tfm_tokenizer_save_bytes(tok, NULL, 0, &a_size);
    tfm_tokenizer_save_bytes(again, NULL, 0, &b_size);
    ck_assert_int_eq(a_size, b_size);
    char *a = malloc((size_t)a_size), *b = malloc((size_t)b_size);
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, a, a_size, &a_size), TFM_OK);
    ck_assert_int_eq(tfm_tokenizer_save_bytes(again, b, b_size, &b_size), TFM_OK);
    ck_assert_mem_eq(a, b, (size_t)a_size);
    tfm_tokenizer *copy = tfm_tokenizer_from_bytes(a, a_size);
    ck_assert_ptr_nonnull(copy);
    int32_t other[4096];
    for (size_t i = 0; i < heldout.count; i += 7) {
        int64_t n = encode(tok, heldout.line[i], (int64_t)heldout.length[i], ids, 4096);
        ck_assert_int_eq(encode(copy, heldout.line[i], (int64_t)heldout.length[i], other, 4096), n);
        ck_assert_mem_eq(ids, other, (size_t)n * sizeof *ids);
    }
    free(a);
    free(b);
    tfm_tokenizer_free(copy);
    tfm_tokenizer_free(again);
    tfm_tokenizer_free(tok);
    free_lines(&all);
    free_lines(&heldout);
}
END_TEST

/* With byte fallback, characters outside the vocabulary come back whole. */
START_TEST(bpe_training_with_byte_fallback)
{
    lines all = read_lines("lines.txt");
    tfm_tokenizer *tok = train_on_fixture(&all, 1500, 1);
    char piece[16];
    int64_t length;
    ck_assert_int_eq(tfm_tokenizer_id_to_piece(tok, 3 + 0x41, piece, 16, &length), TFM_OK);
    ck_assert_str_eq(piece, "<0x41>");
    const char *text = "Zürich 𝄞 ☃ 軽量";
    int32_t ids[64];
    char back[64];
    int64_t n = encode(tok, text, (int64_t)strlen(text), ids, 64);
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, n, back, 64, &length), TFM_OK);
    ck_assert_str_eq(back, text);
    tfm_tokenizer_free(tok);
    free_lines(&all);
}
END_TEST

/* pad_piece puts <pad> at id 3, a control piece: the pad id the tokenizer
 * names, never an id of text, and what the saved bytes say again. */
/* The ids of text by tok (at most 256). */
static int64_t ids_of(const tfm_tokenizer *tok, const char *text, int32_t *ids)
{
    int64_t n = 0;
    ck_assert_int_eq(tfm_tokenizer_encode(tok, text, (int64_t)strlen(text), ids, 256, &n),
                     TFM_OK);
    return n;
}

static tfm_model *model_of_vocab(int64_t src_vocab, int64_t tgt_vocab)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = src_vocab;
    o.tgt_vocab = tgt_vocab;
    o.max_src_len = o.max_tgt_len = 8;
    o.encoder_layers = o.decoder_layers = 1;
    o.d_model = 8;
    o.heads = 2;
    o.d_ff = 8;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_ptr_nonnull(m);
    return m;
}

/* A model's tokenizers travel in its file: one tokenizer for both sides, or
 * two; a file whose tokenizer is damaged or does not fit is refused. */
START_TEST(tokenizers_travel_in_the_model_file)
{
    tfm_tokenizer *unigram = tfm_tokenizer_load_sentencepiece(TEXT_DIR "unigram.model");
    tfm_tokenizer *bpe = tfm_tokenizer_load_sentencepiece(TEXT_DIR "bpe.model");
    int32_t vocab = tfm_tokenizer_vocab_size(unigram);
    tfm_model *m = model_of_vocab(vocab, tfm_tokenizer_vocab_size(bpe));
    ck_assert_ptr_null(tfm_model_tokenizer(m, 0));
    const char *path = "tokenizers_travel.safetensors", *text = "Cannot open the file: %s";
    int32_t want[256], got[256];

    ck_assert_int_eq(tfm_model_set_tokenizers(m, unigram, NULL), TFM_OK);
    ck_assert_ptr_eq(tfm_model_tokenizer(m, 1), tfm_model_tokenizer(m, 0));
    ck_assert_int_eq(tfm_model_save(m, path), TFM_OK);
    tfm_model *back = tfm_model_load(path);
    ck_assert_msg(back != NULL, "%s", tfm_last_error());
    int64_t n = ids_of(unigram, text, want);
    ck_assert_int_eq(ids_of(tfm_model_tokenizer(back, 0), text, got), n);
    ck_assert_mem_eq(got, want, (size_t)n * sizeof *got);
    ck_assert_ptr_eq(tfm_model_tokenizer(back, 1), tfm_model_tokenizer(back, 0));
    tfm_model_free(back);

    ck_assert_int_eq(tfm_model_set_tokenizers(m, unigram, bpe), TFM_OK);
    ck_assert_int_eq(tfm_model_save(m, path), TFM_OK);
    back = tfm_model_load(path);
    ck_assert_ptr_nonnull(back);
    n = ids_of(bpe, text, want);
    ck_assert_int_eq(ids_of(tfm_model_tokenizer(back, 1), text, got), n);
    ck_assert_mem_eq(got, want, (size_t)n * sizeof *got);
    tfm_model_free(back);

    /* one base64 character damaged: refused, naming the key */
    size_t size;
    char *file = read_all(path, &size);
    char *at = strstr(file + 8, "\"tfm.tokenizer\":\"");
    ck_assert_ptr_nonnull(at);
    at[strlen("\"tfm.tokenizer\":\"") + 10] = '!';
    const char *damaged = "tokenizers_damaged.safetensors";
    FILE *f = fopen(damaged, "wb");
    ck_assert_uint_eq(fwrite(file, 1, size, f), size);
    fclose(f);
    free(file);
    ck_assert_ptr_null(tfm_model_load(damaged));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm.tokenizer is not base64"));

    /* too many ids for the vocabulary; a target alone; removal */
    tfm_model *small = model_of_vocab(vocab - 1, vocab);
    ck_assert_int_eq(tfm_model_set_tokenizers(small, unigram, NULL), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_model_set_tokenizers(small, NULL, unigram), TFM_ERR_NULL);
    ck_assert_ptr_null(tfm_model_tokenizer(small, 0));
    ck_assert_int_eq(tfm_model_set_tokenizers(m, NULL, NULL), TFM_OK);
    ck_assert_ptr_null(tfm_model_tokenizer(m, 1));
    ck_assert_int_eq(tfm_model_save(m, path), TFM_OK);
    back = tfm_model_load(path);
    ck_assert_ptr_null(tfm_model_tokenizer(back, 0));
    tfm_model_free(back);
    tfm_model_free(small);
    tfm_model_free(m);
    tfm_tokenizer_free(unigram);
    tfm_tokenizer_free(bpe);
    remove(path);
    remove(damaged);
}
END_TEST

START_TEST(bpe_training_with_a_pad_piece)
{
    const char *lines[2] = {"abc abd", "abc"};
    tfm_bpe_train_options options;
    tfm_bpe_train_options_init(&options);
    options.character_coverage = 1.0;
    options.vocab_size = 11;
    options.pad_piece = 1;
    tfm_tokenizer *tok = NULL;
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 2, &options, &tok), TFM_OK);
    ck_assert_int_eq(tfm_tokenizer_vocab_size(tok), 11);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_PAD), 3);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_EOS), 2);
    ck_assert_int_eq(tfm_tokenizer_piece_to_id(tok, "<pad>", 5), 3);
    int32_t ids[8];
    int64_t n = encode(tok, "<pad> abd", 9, ids, 8);
    for (int64_t i = 0; i < n; i++)
        ck_assert_int_ne(ids[i], 3);
    int64_t size = 0;
    tfm_tokenizer_save_bytes(tok, NULL, 0, &size);
    char *bytes = malloc((size_t)size);
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, bytes, size, &size), TFM_OK);
    tfm_tokenizer *copy = tfm_tokenizer_from_bytes(bytes, size);
    ck_assert_int_eq(tfm_tokenizer_special_id(copy, TFM_TOKEN_PAD), 3);
    options.pad_piece = 2;
    tfm_tokenizer *refused = tok;
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 2, &options, &refused), TFM_ERR_ARG);
    ck_assert_ptr_null(refused);
    free(bytes);
    tfm_tokenizer_free(copy);
    tfm_tokenizer_free(tok);
}
END_TEST

/* user_symbols: pieces right after the meta ones that stand whole in the
 * text, and decode back to their text; bad lists refused. */
START_TEST(bpe_training_with_user_symbols)
{
    const char *lines[2] = {"abc abd", "abc"};
    const char *const symbols[2] = {"\xef\xbd\x9f" "1" "\xef\xbd\xa0", "<b>"};
    tfm_bpe_train_options options;
    tfm_bpe_train_options_init(&options);
    options.character_coverage = 1.0;
    options.vocab_size = 12;
    options.pad_piece = 1;
    options.user_symbols = symbols;
    options.n_user_symbols = 2;
    tfm_tokenizer *tok = NULL;
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 2, &options, &tok), TFM_OK);
    ck_assert_int_eq(tfm_tokenizer_piece_to_id(tok, symbols[0], (int64_t)strlen(symbols[0])), 4);
    ck_assert_int_eq(tfm_tokenizer_piece_to_id(tok, "<b>", 3), 5);
    const char *text = "abc\xef\xbd\x9f" "1" "\xef\xbd\xa0 <b>abd";
    int32_t ids[16];
    int64_t n = encode(tok, text, (int64_t)strlen(text), ids, 16);
    int seen[2] = {0, 0};
    for (int64_t i = 0; i < n; i++)
        if (ids[i] == 4 || ids[i] == 5)
            seen[ids[i] - 4]++;
    ck_assert_int_eq(seen[0], 1);
    ck_assert_int_eq(seen[1], 1);
    char back[64];
    int64_t length = 0;
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, n, back, sizeof back, &length), TFM_OK);
    ck_assert_str_eq(back, text);
    tfm_tokenizer_free(tok);
    const char *const twice[2] = {"<b>", "<b>"};
    const char *const meta[1] = {"</s>"};
    const char *const empty[1] = {""};
    const char *const *bad[3] = {twice, meta, empty};
    for (int i = 0; i < 3; i++) {
        options.user_symbols = bad[i];
        options.n_user_symbols = i ? 1 : 2;
        tok = NULL;
        ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 2, &options, &tok), TFM_ERR_ARG);
        ck_assert_ptr_null(tok);
    }
    options.user_symbols = NULL;
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 2, &options, &tok), TFM_ERR_NULL);
}
END_TEST

START_TEST(bpe_training_refuses_bad_requests)
{
    const char *lines[2] = {"abc abd", "abc"};
    tfm_bpe_train_options options;
    tfm_bpe_train_options_init(&options);
    tfm_tokenizer *tok = (tfm_tokenizer *)&options;
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 2, NULL, &tok), TFM_ERR_NULL);
    ck_assert_ptr_null(tok);
    ck_assert_int_eq(tfm_tokenizer_train_bpe(NULL, NULL, 2, &options, &tok), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 2, &options, NULL), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, -1, &options, &tok), TFM_ERR_ARG);
    options.character_coverage = 0.0;
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 2, &options, &tok), TFM_ERR_ARG);
    options.character_coverage = 1.0;
    options.vocab_size = 8; /* <unk> <s> </s> ▁ a b c d: no room for a merge */
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 2, &options, &tok), TFM_ERR_ARG);
    options.vocab_size = 100; /* more than "▁abc", "▁abd" ... can make */
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 2, &options, &tok), TFM_ERR_SIZE);
    ck_assert_ptr_null(tok);
    options.vocab_size = 10;
    options.max_piece_length = 1; /* no pair at all */
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 2, &options, &tok), TFM_ERR_SIZE);
    options.max_piece_length = 16;
    options.vocab_size = 10; /* ▁a, then ▁ab */
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 2, &options, &tok), TFM_OK);
    int32_t ids[8];
    ck_assert_int_eq(encode(tok, "abd", 3, ids, 8), 2);
    char piece[16];
    int64_t length;
    ck_assert_int_eq(tfm_tokenizer_id_to_piece(tok, ids[0], piece, 16, &length), TFM_OK);
    ck_assert_str_eq(piece, "\xe2\x96\x81" "ab");
    tfm_tokenizer_free(tok);
}
END_TEST

/* FNV-1a of the tokenizer's saved bytes. */
static uint64_t saved_bytes_hash(const tfm_tokenizer *tok)
{
    int64_t size = 0;
    tfm_tokenizer_save_bytes(tok, NULL, 0, &size);
    unsigned char *bytes = malloc((size_t)size);
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, bytes, size, &size), TFM_OK);
    uint64_t hash = 1469598103934665603ull;
    for (int64_t i = 0; i < size; i++)
        hash = (hash ^ bytes[i]) * 1099511628211ull;
    free(bytes);
    return hash;
}

/* The vocabulary trained on the fixture is pinned: these are the hashes of
 * the models the first (exhaustive-scan) trainer wrote, so a faster
 * trainer, or any later change, must make the same vocabulary. */
START_TEST(bpe_training_gives_the_pinned_vocabulary)
{
    lines all = read_lines("lines.txt");
    const uint64_t pinned[2] = {0x061f1508d3c10cbfull, 0xdc34924c7e37697cull};
    for (int byte_fallback = 0; byte_fallback < 2; byte_fallback++) {
        tfm_tokenizer *tok = train_on_fixture(&all, 2000, byte_fallback);
        uint64_t hash = saved_bytes_hash(tok);
        ck_assert_msg(hash == pinned[byte_fallback], "byte_fallback %d: model hash %016llx",
                      byte_fallback, (unsigned long long)hash);
        tfm_tokenizer_free(tok);
    }
    free_lines(&all);
}
END_TEST

/* The obvious BPE, for a handful of words of lowercase letters: count
 * every adjacent pair of every word (pieces of at most max_chars
 * characters), merge the most frequent (ties: the merged piece first by
 * bytes) everywhere, left to right, until no pair is left. '~' stands for
 * U+2581 (it sorts after the letters as U+2581's bytes do). The vocabulary
 * (merged pieces in order, then the characters by count) goes to
 * vocab[0, return). */
#define REF_PIECES 64
#define REF_PIECE_CHARS 24
typedef char ref_piece[REF_PIECE_CHARS];

static int reference_bpe(const char *const *text, int lines, int max_chars,
                         ref_piece vocab[REF_PIECES])
{
    enum { WORDS = 64, LENGTH = 24 };
    ref_piece word[WORDS][LENGTH];
    int word_length[WORDS], words = 0;
    for (int i = 0; i < lines; i++)
        for (const char *at = text[i]; *at;) {
            ck_assert_int_lt(words, WORDS);
            at += *at == ' ';
            word_length[words] = 1;
            strcpy(word[words][0], "~");
            for (; *at && *at != ' '; at++) {
                ck_assert_int_lt(word_length[words], LENGTH);
                word[words][word_length[words]][0] = *at;
                word[words][word_length[words]++][1] = 0;
            }
            words++;
        }
    int merges = 0;
    for (;;) {
        ck_assert_int_lt(merges, REF_PIECES);
        /* the best pair, found by counting every pair of every word again */
        int best_count = 0;
        char best[2 * REF_PIECE_CHARS] = "", best_left[REF_PIECE_CHARS] = "";
        for (int w = 0; w < words; w++)
            for (int i = 0; i + 1 < word_length[w]; i++) {
                const char *l = word[w][i], *r = word[w][i + 1];
                if ((int)(strlen(l) + strlen(r)) > max_chars)
                    continue;
                int count = 0; /* every place: "a a a" holds "a a" twice */
                for (int v = 0; v < words; v++)
                    for (int k = 0; k + 1 < word_length[v]; k++)
                        count += !strcmp(word[v][k], l) && !strcmp(word[v][k + 1], r);
                char merged[2 * REF_PIECE_CHARS];
                snprintf(merged, sizeof merged, "%s%s", l, r);
                int order = strcmp(merged, best);
                /* one pair makes each piece (the trainer counts on it) */
                ck_assert(!(count == best_count && order == 0 && strcmp(l, best_left)));
                if (count > best_count || (count == best_count && order < 0)) {
                    best_count = count;
                    strcpy(best, merged);
                    strcpy(best_left, l);
                }
            }
        if (!best_count)
            break;
        size_t left_length = strlen(best_left);
        for (int w = 0; w < words; w++) {
            int out = 0;
            for (int i = 0; i < word_length[w]; i++) {
                if (i + 1 < word_length[w] && !strcmp(word[w][i], best_left) &&
                    !strcmp(word[w][i + 1], best + left_length)) {
                    strcpy(word[w][out++], best);
                    i++;
                } else {
                    memmove(word[w][out++], word[w][i], REF_PIECE_CHARS);
                }
            }
            word_length[w] = out;
        }
        int known = 0;
        for (int k = 0; k < merges; k++)
            known |= !strcmp(vocab[k], best);
        ck_assert_uint_lt(strlen(best), REF_PIECE_CHARS);
        if (!known)
            strcpy(vocab[merges++], best);
    }
    /* the characters, most frequent first, ties by code point */
    int count[128] = {0}, n = merges;
    for (int i = 0; i < lines; i++)
        for (const char *at = text[i]; *at; at++)
            count[*at == ' ' ? '~' : (unsigned char)*at]++;
    count['~'] += lines; /* the space before each line */
    for (;;) {
        int most = 0;
        for (int c = 1; c < 128; c++)
            most = count[c] > count[most] ? c : most;
        if (!count[most])
            return n;
        ck_assert_int_lt(n, REF_PIECES);
        vocab[n][0] = (char)most;
        vocab[n++][1] = 0;
        count[most] = 0;
    }
}

/* Training where ties are everywhere (a few words of two or three letters)
 * makes the brute-force reference's vocabulary, piece for piece, and no
 * piece more. */
START_TEST(bpe_training_matches_the_obvious_algorithm)
{
    static const char *const fixed[][3] = {
        {"ab ba ab ba", "", ""},
        {"aaaa aaa aa a", "aaaaaaaa", ""},
        {"abc bca cab abc", "cba", "c b a"},
        {"abab baba", "aabb bbaa", "ab"},
    };
    uint64_t state = 30;
    for (int round = 0; round < 24; round++) {
        char random_text[3][64];
        const char *text[3];
        int lines = round < 4 ? 1 + (fixed[round][1][0] != 0) + (fixed[round][2][0] != 0) : 3;
        for (int i = 0; i < lines; i++) {
            text[i] = round < 4 ? fixed[round][i] : random_text[i];
            if (round < 4)
                continue;
            /* three to five words of one to six letters of a, b (and c) */
            int words = 3 + (int)((state = state * 6364136223846793005ull + 1) >> 62) % 3, at = 0;
            for (int w = 0; w < words; w++) {
                int letters = 1 + (int)((state = state * 6364136223846793005ull + 1) >> 61) % 6;
                for (int k = 0; k < letters; k++) {
                    state = state * 6364136223846793005ull + 1;
                    random_text[i][at++] = (char)('a' + (state >> 62) % (2 + round % 2));
                }
                random_text[i][at++] = ' ';
            }
            random_text[i][at - 1] = 0;
        }
        int max_chars = (int[]){16, 2, 3}[round % 3];
        ref_piece want[REF_PIECES];
        int n = reference_bpe(text, lines, max_chars, want);
        tfm_bpe_train_options options;
        tfm_bpe_train_options_init(&options);
        options.character_coverage = 1.0;
        options.max_piece_length = max_chars;
        options.vocab_size = 3 + n;
        tfm_tokenizer *tok = NULL;
        ck_assert_msg(tfm_tokenizer_train_bpe(text, NULL, lines, &options, &tok) == TFM_OK,
                      "round %d: %s", round, tfm_last_error());
        for (int i = 0; i < n; i++) {
            char piece[64], expected[64];
            int64_t length;
            ck_assert_int_eq(tfm_tokenizer_id_to_piece(tok, 3 + i, piece, 64, &length), TFM_OK);
            size_t e = 0;
            for (const char *c = want[i]; *c; c++)
                e += (size_t)snprintf(expected + e, sizeof expected - e, "%s",
                                      *c == '~' ? "\xe2\x96\x81" : (char[]){*c, 0});
            ck_assert_msg(!strcmp(piece, expected), "round %d (\"%s\"...), max %d: piece %d is "
                          "\"%s\", not \"%s\"", round, text[0], max_chars, i, piece, expected);
        }
        tfm_tokenizer_free(tok);
        options.vocab_size = 4 + n;
        ck_assert_int_eq(tfm_tokenizer_train_bpe(text, NULL, lines, &options, &tok),
                         TFM_ERR_SIZE);
    }
}
END_TEST

START_TEST(char_and_word_models_match_sentencepiece)
{
    check_against_reference("char", "heldout");
    check_against_reference("word", "heldout");
}
END_TEST

/* A model with a denormaliser (spm_train --denormalization_rule_tsv, here
 * "oe" -> "\u0153") applies it to decoded text, as spm_decode does. */
START_TEST(denormalizer_applies_to_decoded_text)
{
    check_against_reference("denormalizer", "heldout");
    tfm_tokenizer *tok = load("denormalizer");
    int32_t ids[32];
    char back[64];
    int64_t length, n = encode(tok, "le coeur oe", 11, ids, 32);
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, n, back, 64, &length), TFM_OK);
    ck_assert_str_eq(back, "le c\xc5\x93ur \xc5\x93");
    tfm_tokenizer_free(tok);
}
END_TEST

/* GPT-2's encoder.py over the fixture's vocab.json and merges.txt (in
 * make_fixtures.py): held-out catalog lines and the edge cases, invalid
 * UTF-8 and its decoding with errors="replace" included. */
START_TEST(byte_bpe_matches_gpt2)
{
    check_tokenizer(load_byte_bpe(), "byte_bpe", "heldout");
    check_tokenizer(load_byte_bpe(), "byte_bpe", "edge");
}
END_TEST

/* The pre-tokenisation pattern's corners, each checked by the pieces it
 * gives (vocab has every byte, so pieces show the parts' boundaries when
 * merges cannot cross them). */
START_TEST(byte_bpe_pattern_and_round_trip)
{
    tfm_tokenizer *tok = load_byte_bpe();
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_BOS), 0);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_PAD), 1);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_EOS), 2);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_UNK), 3);
    /* every byte string comes back: bytes as pieces, whatever they are */
    char text[256], back[1024];
    for (int i = 0; i < 255; i++)
        text[i] = (char)(i + 1);
    int32_t ids[512];
    int64_t n = encode(tok, text, 127, ids, 512), length;
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, n, back, sizeof back, &length), TFM_OK);
    ck_assert_int_eq(length, 127);
    ck_assert_mem_eq(back, text, 127);
    /* a truncated character decodes to one U+FFFD, as Python's "replace" */
    const char *cut = "\xe2\x82 \xf0\x9f\x98";
    n = encode(tok, cut, (int64_t)strlen(cut), ids, 512);
    ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, n, back, sizeof back, &length), TFM_OK);
    ck_assert_str_eq(back, "\xef\xbf\xbd \xef\xbf\xbd");
    int64_t size = 0;
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, NULL, 0, &size), TFM_ERR_SIZE);
    char *bytes = malloc((size_t)size);
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, bytes, size, &size), TFM_OK);
    tfm_tokenizer *copy = tfm_tokenizer_from_bytes(bytes, size);
    ck_assert_ptr_nonnull(copy);
    const char *line = "Don't   panic: 42 files\n\n";
    int32_t other[64];
    n = encode(tok, line, (int64_t)strlen(line), ids, 512);
    ck_assert_int_eq(encode(copy, line, (int64_t)strlen(line), other, 64), n);
    ck_assert_mem_eq(ids, other, (size_t)n * sizeof *ids);
    tfm_tokenizer_free(copy);
    ck_assert_ptr_null(tfm_tokenizer_from_bytes(bytes, size - 1));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_FORMAT);
    free(bytes);
    tfm_tokenizer_free(tok);
    ck_assert_ptr_null(tfm_tokenizer_load_byte_bpe(TEXT_DIR "byte_bpe.merges.txt",
                                                   TEXT_DIR "byte_bpe.merges.txt"));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_FORMAT);
    ck_assert_ptr_null(tfm_tokenizer_load_byte_bpe(TEXT_DIR "byte_bpe.vocab.json",
                                                   TEXT_DIR "byte_bpe.vocab.json"));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_FORMAT);
    ck_assert_ptr_null(tfm_tokenizer_load_byte_bpe(NULL, TEXT_DIR "byte_bpe.merges.txt"));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
}
END_TEST

/* --- SentencePiece pieces numbered by a published vocabulary ------------------ */

/* Writes s[0, n) as a JSON string. */
static void json_string(FILE *f, const char *s, int64_t n)
{
    fputc('"', f);
    for (int64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* A vocab.json numbering bpe.model's pieces backwards, without piece
 * `dropped`, and with <pad> last, as Marian's does beside source.spm. */
static void write_renumbering(const tfm_tokenizer *base, int32_t dropped, const char *path)
{
    int32_t n = tfm_tokenizer_vocab_size(base);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputc('{', f);
    for (int32_t id = 0, written = 0; id < n; id++) {
        if (id == dropped)
            continue;
        char piece[256];
        int64_t length;
        ck_assert_int_eq(tfm_tokenizer_id_to_piece(base, id, piece, sizeof piece, &length), TFM_OK);
        json_string(f, piece, length);
        fprintf(f, ": %d, ", n - 2 - written++);
    }
    fprintf(f, "\"<pad>\": %d}", n - 1);
    fclose(f);
}

/* The id the renumbering gives base id b (dropped: <unk>'s). */
static int32_t renumbered_id(const tfm_tokenizer *base, int32_t dropped, int32_t b)
{
    int32_t n = tfm_tokenizer_vocab_size(base);
    if (b == dropped)
        b = tfm_tokenizer_special_id(base, TFM_TOKEN_UNK);
    return n - 2 - (b > dropped ? b - 1 : b);
}

START_TEST(sentencepiece_with_a_published_vocabulary)
{
    tfm_tokenizer *base = load("bpe");
    int32_t n = tfm_tokenizer_vocab_size(base), dropped = n / 2;
    char model_path[512], vocab_path[] = "/tmp/tfm_vocab_XXXXXX";
    snprintf(model_path, sizeof model_path, TEXT_DIR "bpe.model");
    int fd = mkstemp(vocab_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    write_renumbering(base, dropped, vocab_path);
    tfm_tokenizer *tok = tfm_tokenizer_load_sentencepiece_with_vocab(model_path, vocab_path);
    ck_assert_msg(tok != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tokenizer_vocab_size(tok), n);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_PAD), n - 1);
    ck_assert_int_eq(tfm_tokenizer_special_id(tok, TFM_TOKEN_UNK),
                     renumbered_id(base, dropped, tfm_tokenizer_special_id(base, TFM_TOKEN_UNK)));

    /* through the bytes a model file carries, too */
    int64_t size;
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, NULL, 0, &size), TFM_ERR_SIZE);
    char *bytes = malloc((size_t)size);
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, bytes, size, &size), TFM_OK);
    tfm_tokenizer *again = tfm_tokenizer_from_bytes(bytes, size);
    ck_assert_msg(again != NULL, "%s", tfm_last_error());
    ck_assert_ptr_null(tfm_tokenizer_from_bytes(bytes, size - 1));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_FORMAT);
    free(bytes);

    lines text = read_lines("lines.txt");
    int compared = 0;
    static int32_t want[1 << 16], got[1 << 16], back[1 << 16];
    for (size_t i = 0; i < text.count; i++) {
        int64_t count = encode(base, text.line[i], (int64_t)text.length[i], want, 1 << 16);
        ck_assert_int_eq(encode(tok, text.line[i], (int64_t)text.length[i], got, 1 << 16), count);
        ck_assert_int_eq(encode(again, text.line[i], (int64_t)text.length[i], back, 1 << 16),
                         count);
        int has_dropped = 0;
        for (int64_t k = 0; k < count; k++) {
            ck_assert_int_eq(got[k], renumbered_id(base, dropped, want[k]));
            ck_assert_int_eq(back[k], got[k]);
            has_dropped |= want[k] == dropped;
        }
        if (has_dropped)
            continue; /* it decodes as the unknown piece */
        static char a[1 << 18], b[1 << 18];
        int64_t la, lb;
        ck_assert_int_eq(tfm_tokenizer_decode(base, want, count, a, sizeof a, &la), TFM_OK);
        ck_assert_int_eq(tfm_tokenizer_decode(tok, got, count, b, sizeof b, &lb), TFM_OK);
        ck_assert_str_eq(a, b);
        compared++;
    }
    ck_assert_int_gt(compared, 10);
    /* the vocabulary's own control tokens give nothing */
    char out[16];
    int64_t length;
    const int32_t controls[2] = {n - 1, tfm_tokenizer_special_id(tok, TFM_TOKEN_EOS)};
    ck_assert_int_eq(tfm_tokenizer_decode(tok, controls, 2, out, sizeof out, &length), TFM_OK);
    ck_assert_str_eq(out, "");
    free_lines(&text);

    /* a vocabulary without <unk> has nothing for the pieces it lacks */
    FILE *f = fopen(vocab_path, "w");
    fputs("{\"a\": 0}", f);
    fclose(f);
    ck_assert_ptr_null(tfm_tokenizer_load_sentencepiece_with_vocab(model_path, vocab_path));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "no <unk>"));
    ck_assert_ptr_null(tfm_tokenizer_load_sentencepiece_with_vocab(model_path, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    unlink(vocab_path);
    tfm_tokenizer_free(again);
    tfm_tokenizer_free(tok);
    tfm_tokenizer_free(base);
}
END_TEST

/* The little-endian 8-byte size at bytes. */
static uint64_t size_at(const char *bytes)
{
    uint64_t n = 0;
    for (int i = 0; i < 8; i++)
        n |= (uint64_t)(unsigned char)bytes[i] << (8 * i);
    return n;
}

/* bytes[0, size) with one more part, text, after its size: in *out
 * (malloc'd), its size returned. */
static int64_t with_part(const char *bytes, int64_t size, const char *text, char **out)
{
    size_t n = strlen(text);
    *out = malloc((size_t)size + 8 + n);
    memcpy(*out, bytes, (size_t)size);
    for (int i = 0; i < 8; i++)
        (*out)[size + i] = (char)((uint64_t)n >> (8 * i));
    memcpy(*out + size + 8, text, n);
    return size + 8 + (int64_t)n;
}

/* A renumbered tokenizer's saved bytes: a vocabulary and a model file
 * (Marian's, which older libtfm reads), and a third part naming the
 * control tokens past the vocabulary and the ids after them that read as
 * <unk> (the fairseq-numbered tokenizers' language codes and M2M100's
 * made-up words). Control tokens are found by their piece, never given by
 * encoding, even when the model has a piece so spelled, and give nothing
 * when decoded. */
/* transformers' MarianTokenizer maps the pieces SentencePiece's encode
 * gives (an unknown run's text is its own) through vocab.json: tests/marian's
 * vocab.json has "«" and "»", which source.spm lacks, and here "û" (307),
 * which neither spm has, so they keep their ids where libtfm gave <unk>
 * (1). The ids are sentencepiece 0.1.97's pieces looked up as
 * MarianTokenizer's _convert_token_to_id does (vocab.get(piece, unk)); the
 * target side's text is its decode_pieces of the ids' pieces. */
START_TEST(marian_pieces_the_model_lacks_keep_the_vocabularys_ids)
{
    char vocab_path[] = "/tmp/tfm_vocab_XXXXXX";
    int fd = mkstemp(vocab_path);
    ck_assert_int_ge(fd, 0);
    FILE *in = fopen(TFM_FIXTURES "/../marian/vocab.json", "rb"), *out = fdopen(fd, "wb");
    ck_assert_ptr_nonnull(in);
    char text[16384];
    size_t n = fread(text, 1, sizeof text - 1, in);
    fclose(in);
    text[n] = 0;
    char *end = strrchr(text, '}');
    ck_assert_ptr_nonnull(end);
    *end = 0;
    fprintf(out, "%s, \"\u00fb\": 307}", text);
    ck_assert_int_eq(fclose(out), 0);
    static const struct {
        const char *side, *text;
        int32_t ids[16];
        int count;
    } cases[] = {
        {"source", "\u00ab \u00fb \u00bb", {2, 293, 2, 307, 2, 298}, 6},
        {"source", "Un \u00ab\u0153uvre\u00bb \u0178 \u00fb",
         {2, 104, 15, 2, 1, 16, 63, 28, 298, 2, 1, 2, 307}, 13},
        {"target", "\u00ab \u00fb \u00bb", {212, 2, 307, 2, 298}, 5},
        {"target", "Un \u00ab\u0153uvre\u00bb \u0178 \u00fb",
         {2, 104, 15, 212, 294, 16, 63, 28, 298, 2, 1, 2, 307}, 13},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char model_path[512];
        snprintf(model_path, sizeof model_path, TFM_FIXTURES "/../marian/%s.spm", cases[c].side);
        tfm_tokenizer *tok = tfm_tokenizer_load_sentencepiece_with_vocab(model_path, vocab_path);
        ck_assert_msg(tok != NULL, "%s", tfm_last_error());
        int32_t ids[32];
        int64_t count = encode(tok, cases[c].text, (int64_t)strlen(cases[c].text), ids, 32);
        ck_assert_int_eq(count, cases[c].count);
        for (int i = 0; i < cases[c].count; i++)
            ck_assert_msg(ids[i] == cases[c].ids[i], "%s \"%s\": id %d is %d, not %d",
                          cases[c].side, cases[c].text, i, ids[i], cases[c].ids[i]);
        if (c == 2) { /* the target side decodes them back */
            char back[64];
            int64_t length;
            ck_assert_int_eq(tfm_tokenizer_decode(tok, ids, count, back, sizeof back, &length),
                             TFM_OK);
            ck_assert_str_eq(back, cases[c].text);
        }
        tfm_tokenizer_free(tok);
    }
    unlink(vocab_path);
}
END_TEST

START_TEST(control_tokens_past_a_published_vocabulary)
{
    tfm_tokenizer *base = load("bpe");
    int32_t n = tfm_tokenizer_vocab_size(base), the[8];
    ck_assert_int_ge(encode(base, "the", 3, the, 8), 1);
    char the_piece[64], model_path[512], vocab_path[] = "/tmp/tfm_vocab_XXXXXX";
    int64_t the_length;
    ck_assert_int_eq(tfm_tokenizer_id_to_piece(base, the[0], the_piece, sizeof the_piece,
                                               &the_length), TFM_OK);
    snprintf(model_path, sizeof model_path, TEXT_DIR "bpe.model");
    int fd = mkstemp(vocab_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    write_renumbering(base, the[0], vocab_path); /* without the piece of "the" */
    tfm_tokenizer *marian = tfm_tokenizer_load_sentencepiece_with_vocab(model_path, vocab_path);
    ck_assert_ptr_nonnull(marian);
    unlink(vocab_path);
    int64_t size;
    tfm_tokenizer_save_bytes(marian, NULL, 0, &size);
    char *bytes = malloc((size_t)size), *more;
    ck_assert_int_eq(tfm_tokenizer_save_bytes(marian, bytes, size, &size), TFM_OK);
    /* two parts, as before control tokens */
    uint64_t first = size_at(bytes + 8);
    ck_assert_uint_eq(8 + 8 + first + 8 + size_at(bytes + 16 + first), (uint64_t)size);

    char controls[256];
    snprintf(controls, sizeof controls, "{\"control_tokens\": [\"xx_XX\", \"%s\"], "
             "\"unknown_ids\": 2}", the_piece);
    int64_t more_size = with_part(bytes, size, controls, &more);
    tfm_tokenizer *tok = tfm_tokenizer_from_bytes(more, more_size);
    ck_assert_msg(tok != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tokenizer_vocab_size(tok), n + 4);
    ck_assert_int_eq(tfm_tokenizer_piece_to_id(tok, "xx_XX", 5), n);
    ck_assert_int_eq(tfm_tokenizer_piece_to_id(tok, the_piece, the_length), n + 1);
    int32_t unk = tfm_tokenizer_special_id(tok, TFM_TOKEN_UNK), got[8];
    ck_assert_int_eq(encode(tok, "the", 3, got, 8), 1);
    ck_assert_int_eq(got[0], unk);
    char text[64], piece[16];
    int64_t length;
    const int32_t quiet[3] = {n, n + 1, tfm_tokenizer_special_id(tok, TFM_TOKEN_EOS)};
    ck_assert_int_eq(tfm_tokenizer_decode(tok, quiet, 3, text, sizeof text, &length), TFM_OK);
    ck_assert_str_eq(text, "");
    const int32_t unknown[2] = {n + 3, unk};
    ck_assert_int_eq(tfm_tokenizer_decode(tok, unknown, 2, text, sizeof text, &length), TFM_OK);
    ck_assert_str_eq(text, " \xE2\x81\x87  \xE2\x81\x87 ");
    ck_assert_int_eq(tfm_tokenizer_id_to_piece(tok, n + 2, piece, sizeof piece, &length), TFM_OK);
    ck_assert_str_eq(piece, "<unk>");
    ck_assert_int_eq(tfm_tokenizer_piece_to_id(tok, "<unk>", 5), unk);
    int64_t again_size;
    tfm_tokenizer_save_bytes(tok, NULL, 0, &again_size);
    ck_assert_int_eq(again_size, more_size);
    char *again = malloc((size_t)again_size);
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, again, again_size, &again_size), TFM_OK);
    ck_assert_mem_eq(again, more, (size_t)more_size);
    free(again);
    tfm_tokenizer_free(tok);

    /* a fourth part, or control tokens that are not what they must be */
    char *four;
    int64_t four_size = with_part(more, more_size, "{}", &four);
    ck_assert_ptr_null(tfm_tokenizer_from_bytes(four, four_size));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_FORMAT);
    free(four);
    free(more);
    static const char *const broken[] = {
        "[]", "{\"control_tokens\": [\"a_A\"]}", "{\"control_tokens\": [\"\"], \"unknown_ids\": 0}",
        "{\"control_tokens\": [7], \"unknown_ids\": 0}",
        "{\"control_tokens\": [\"<unk>\"], \"unknown_ids\": 0}",
        "{\"control_tokens\": [\"a\", \"a\"], \"unknown_ids\": 0}",
        "{\"control_tokens\": [], \"unknown_ids\": 2147483647}",
        "{\"control_tokens\": [], \"unknown_ids\": -1}", "{\"control_tokens\": [], "};
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        more_size = with_part(bytes, size, broken[i], &more);
        ck_assert_msg(tfm_tokenizer_from_bytes(more, more_size) == NULL, "%s", broken[i]);
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_FORMAT);
        free(more);
    }
    free(bytes);
    tfm_tokenizer_free(marian);
    tfm_tokenizer_free(base);
}
END_TEST

Suite *tokenizer_suite(void)
{
    Suite *s = suite_create("tokenizer");
    TCase *tc = tcase_create("sentencepiece");
    tcase_add_test(tc, unigram_matches_sentencepiece);
    tcase_add_test(tc, bpe_matches_sentencepiece);
    tcase_add_test(tc, byte_fallback_model_matches_sentencepiece);
    tcase_add_test(tc, char_and_word_models_match_sentencepiece);
    tcase_add_test(tc, denormalizer_applies_to_decoded_text);
    tcase_add_test(tc, empty_and_whitespace_only_text_give_no_ids);
    tcase_add_test(tc, invalid_utf8_is_replacement_characters);
    tcase_add_test(tc, very_long_lines);
    tcase_add_test(tc, truncated_encoding_gives_the_whole_texts_first_ids);
    tcase_add_test(tc, a_huge_line_is_cut_in_bounded_memory);
    tcase_add_test(tc, truncation_reads_a_bounded_prefix);
    tcase_add_test(tc, buffers_too_small_are_refused_untouched);
    tcase_add_test(tc, null_and_bad_arguments);
    tcase_add_test(tc, pieces_ids_and_special_tokens);
    tcase_add_test(tc, bytes_round_trip);
    tcase_add_test(tc, corrupt_models_fail_cleanly);
    suite_add_tcase(s, tc);
    tc = tcase_create("byte_bpe");
    tcase_add_test(tc, byte_bpe_matches_gpt2);
    tcase_add_test(tc, byte_bpe_pattern_and_round_trip);
    suite_add_tcase(s, tc);
    tc = tcase_create("training");
    tcase_add_test(tc, bpe_training_compresses_as_spm_train);
    tcase_add_test(tc, bpe_training_with_byte_fallback);
    tcase_add_test(tc, bpe_training_refuses_bad_requests);
    tcase_add_test(tc, bpe_training_with_a_pad_piece);
    tcase_add_test(tc, bpe_training_with_user_symbols);
    tcase_add_test(tc, bpe_training_gives_the_pinned_vocabulary);
    tcase_add_test(tc, bpe_training_matches_the_obvious_algorithm);
    tcase_add_test(tc, tokenizers_travel_in_the_model_file);
    tcase_add_test(tc, sentencepiece_with_a_published_vocabulary);
    tcase_add_test(tc, control_tokens_past_a_published_vocabulary);
    tcase_add_test(tc, marian_pieces_the_model_lacks_keep_the_vocabularys_ids);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(tokenizer_suite)
