/* tfm-tokenize: text to token ids and back, as spm_encode / spm_decode do.
 *
 *   tfm-tokenize --model m.model < text        one line of ids per line
 *   tfm-tokenize --model m.model --decode < ids
 *   tfm-tokenize --train text --vocab-size 8000 --out m.model
 *   tfm-tokenize --vocab vocab.json --merges merges.txt < text   (GPT-2/BART)
 *
 * Encoding prints each line's ids separated by spaces, as
 * `spm_encode --output_format=id`; decoding reads such lines and prints
 * their text, as `spm_decode --input_format=id`. Training writes a
 * SentencePiece BPE model that spm_encode reads too. */
#include <ctype.h>

#include "cli.h"

/* One line of in without its newline, NUL-terminated, in *line (grown);
 * its length, -1 at the end, -2 when out of memory. */
static int64_t read_line(FILE *in, char **line, size_t *capacity)
{
    size_t n = 0;
    int c = 0;
    while (n + 1 >= *capacity || ((c = getc(in)) != EOF && c != '\n')) {
        if (n + 1 >= *capacity) {
            size_t bigger = *capacity ? 2 * *capacity : 4096;
            char *grown = realloc(*line, bigger);
            if (!grown)
                return -2;
            *line = grown;
            *capacity = bigger;
            continue;
        }
        (*line)[n++] = (char)c;
    }
    (*line)[n] = 0;
    return c == EOF && n == 0 ? -1 : (int64_t)n;
}

static int encode_lines(const char *program, const tfm_tokenizer *tok)
{
    char *line = NULL;
    size_t capacity = 0;
    int32_t *ids = NULL;
    int64_t room = 0, length, count;
    int status = EXIT_SUCCESS;
    while ((length = read_line(stdin, &line, &capacity)) >= 0) {
        tfm_status s = tfm_tokenizer_encode(tok, line, length, ids, room, &count);
        if (s == TFM_ERR_SIZE) {
            free(ids);
            room = 2 * count;
            ids = malloc((size_t)room * sizeof *ids);
            s = ids ? tfm_tokenizer_encode(tok, line, length, ids, room, &count) : TFM_ERR_NOMEM;
        }
        if (s != TFM_OK) {
            status = cli_fail(program, "encoding");
            break;
        }
        for (int64_t i = 0; i < count; i++)
            printf(i ? " %d" : "%d", (int)ids[i]);
        putchar('\n');
        if (cli_stdout_failed()) {
            status = EXIT_FAILURE; /* said at exit */
            break;
        }
    }
    if (length == -2)
        status = cli_fail(program, "out of memory reading a line");
    free(line);
    free(ids);
    return status;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* The ids of line[0, length), ids separated by blanks, into ids (room for
 * length / 2 + 1 of them): their count; -1 with the first word that is no
 * id below vocab_size (a NUL byte is no digit) in *bad and *bad_length. */
static int64_t parse_ids(const char *line, int64_t length, int32_t vocab_size, int32_t *ids,
                         const char **bad, int *bad_length)
{
    int64_t count = 0;
    for (const char *at = line, *end = line + length; at < end;) {
        if (is_blank(*at)) {
            at++;
            continue;
        }
        const char *word = at;
        int64_t id = 0;
        for (; at < end && !is_blank(*at); at++)
            id = id >= 0 && id < vocab_size && isdigit((unsigned char)*at)
                     ? 10 * id + (*at - '0')
                     : -1; /* stays -1: no id */
        if (id < 0 || id >= vocab_size) {
            *bad = word;
            *bad_length = at - word < 40 ? (int)(at - word) : 40;
            return -1;
        }
        ids[count++] = (int32_t)id;
    }
    return count;
}

static int decode_lines(const char *program, const tfm_tokenizer *tok)
{
    char *line = NULL, *text = NULL;
    size_t capacity = 0;
    int64_t room = 0, length, size, number = 0;
    int status = EXIT_SUCCESS;
    int32_t *ids = NULL;
    while ((length = read_line(stdin, &line, &capacity)) >= 0) {
        number++;
        free(ids);
        ids = malloc(((size_t)length / 2 + 1) * sizeof *ids);
        const char *bad = NULL;
        int bad_length = 0;
        int64_t count = ids ? parse_ids(line, length, tfm_tokenizer_vocab_size(tok), ids, &bad,
                                        &bad_length)
                            : 0;
        if (count < 0) {
            fprintf(stderr, "%s: line %lld: '%.*s' is not a token id (a whole number from 0 "
                    "to %d)\n", program, (long long)number, bad_length, bad,
                    (int)tfm_tokenizer_vocab_size(tok) - 1);
            status = EXIT_FAILURE;
            break;
        }
        tfm_status s = ids ? tfm_tokenizer_decode(tok, ids, count, text, room, &size)
                           : TFM_ERR_NOMEM;
        if (s == TFM_ERR_SIZE) {
            free(text);
            room = 2 * size + 1;
            text = malloc((size_t)room);
            s = text ? tfm_tokenizer_decode(tok, ids, count, text, room, &size) : TFM_ERR_NOMEM;
        }
        if (s != TFM_OK) {
            status = cli_fail(program, "decoding");
            break;
        }
        fwrite(text ? text : "", 1, (size_t)size, stdout);
        putchar('\n');
        if (cli_stdout_failed()) {
            status = EXIT_FAILURE; /* said at exit */
            break;
        }
    }
    free(line);
    free(text);
    free(ids);
    return status;
}

/* Trains on the lines of path and writes the model to out. */
static int train(const char *program, const char *path, int64_t vocab_size, int64_t byte_fallback,
                 double coverage, const char *out)
{
    FILE *in = fopen(path, "rb");
    if (!in) {
        fprintf(stderr, "%s: cannot open %s\n", program, path);
        return EXIT_FAILURE;
    }
    char **lines = NULL;
    int64_t *lengths = NULL, count = 0, capacity = 0, length;
    char *line = NULL;
    size_t line_capacity = 0;
    int status = EXIT_FAILURE;
    while ((length = read_line(in, &line, &line_capacity)) >= 0) {
        if (count == capacity) {
            capacity = capacity ? 2 * capacity : 1024;
            char **more = realloc(lines, (size_t)capacity * sizeof *lines);
            int64_t *more_lengths = more ? realloc(lengths, (size_t)capacity * sizeof *lengths)
                                         : NULL;
            if (more)
                lines = more;
            if (more_lengths)
                lengths = more_lengths;
            if (!more || !more_lengths)
                goto done;
        }
        if (!(lines[count] = malloc((size_t)length + 1)))
            goto done;
        memcpy(lines[count], line, (size_t)length);
        lengths[count++] = length;
    }
    tfm_bpe_train_options options;
    tfm_bpe_train_options_init(&options);
    options.vocab_size = (int32_t)vocab_size;
    options.byte_fallback = (int32_t)byte_fallback;
    options.character_coverage = coverage;
    tfm_tokenizer *tok = NULL;
    if (tfm_tokenizer_train_bpe((const char *const *)lines, lengths, count, &options, &tok)) {
        status = cli_fail(program, "training");
        goto done;
    }
    if (tfm_tokenizer_save(tok, out) != TFM_OK) {
        cli_fail(program, "writing the model");
    } else {
        printf("%s: %d pieces from %lld lines\n", out, (int)tfm_tokenizer_vocab_size(tok),
               (long long)count);
        status = EXIT_SUCCESS;
    }
    tfm_tokenizer_free(tok);
done:
    if (status == EXIT_FAILURE && tfm_last_status() == TFM_OK)
        fprintf(stderr, "%s: out of memory reading %s\n", program, path);
    fclose(in);
    for (int64_t i = 0; i < count; i++)
        free(lines[i]);
    free(lines);
    free(lengths);
    free(line);
    return status;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *vocab = NULL, *merges = NULL, *train_path = NULL, *out = NULL;
    int64_t decode = 0, vocab_size = 8000, byte_fallback = 0;
    double coverage = 0.9995;
    const cli_flag flags[] = {
        {"model", CLI_STRING, &model, 0, 0, "a SentencePiece .model file"},
        {"vocab", CLI_STRING, &vocab, 0, 0, "byte-level BPE: vocab.json (with --merges)"},
        {"merges", CLI_STRING, &merges, 0, 0, "byte-level BPE: merges.txt (with --vocab)"},
        {"decode", CLI_SWITCH, &decode, 0, 0, "read lines of ids, print their text"},
        {"train", CLI_STRING, &train_path, 0, 0, "train a BPE model on this file's lines"},
        {"vocab-size", CLI_INT, &vocab_size, 4, 1 << 24, "--train: pieces in all"},
        {"byte-fallback", CLI_SWITCH, &byte_fallback, 0, 0,
         "--train: unknown characters as byte pieces"},
        {"character-coverage", CLI_FLOAT, &coverage, 1e-9, 1,
         "--train: share of the characters kept"},
        {"out", CLI_STRING, &out, 0, 0, "--train: the model file to write"},
    };
    int exit_now = cli_parse(argc, argv,
                             "Text to token ids (one line of ids per line of text, as "
                             "spm_encode --output_format=id) and back (--decode), or BPE "
                             "training (--train FILE --out MODEL).",
                             flags, (int)(sizeof flags / sizeof flags[0]), NULL);
    if (exit_now != CLI_CONTINUE)
        return exit_now;
    const char *program = cli_name(argv[0]);
    if (train_path) {
        if (!out || model || vocab || merges || decode) {
            fprintf(stderr, "%s: --train takes --out and no model\n", program);
            return cli_usage_error(program);
        }
        return train(program, train_path, vocab_size, byte_fallback, coverage, out);
    }
    if (!model == !(vocab && merges) || !vocab != !merges) {
        fprintf(stderr, "%s: give --model FILE, or --vocab and --merges\n", program);
        return cli_usage_error(program);
    }
    tfm_tokenizer *tok = model ? tfm_tokenizer_load_sentencepiece(model)
                               : tfm_tokenizer_load_byte_bpe(vocab, merges);
    if (!tok)
        return cli_fail(program, "loading the tokenizer");
    int status = decode ? decode_lines(program, tok) : encode_lines(program, tok);
    tfm_tokenizer_free(tok);
    return status;
}
