/* Tutorial 003's Taylor-series data, as FORMAT.md specifies it. */
#include "taylor_data.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SOURCE = 0, TARGET = 1 };
static const char *const side_name[2] = {"source", "target"};

typedef struct line_info {
    int64_t number;           /* 1-based */
    const char *raw;          /* the line as read, for column numbers */
    const char *side[2];      /* source and target text */
    int64_t side_len[2];
    int64_t tokens[2];        /* token counts */
} line_info;

static void say(char *error, size_t size, const char *format, ...)
{
    if (!error || !size)
        return;
    va_list args;
    va_start(args, format);
    vsnprintf(error, size, format, args);
    va_end(args);
}

static int is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* The regex's alternatives in its order. The helper then re-splits the text
 * greedily by the longest of the line's distinct candidates; that gives the
 * same tokens whenever every character belongs to a candidate (a longer
 * candidate is a prefix only where this scan would have taken it too), and
 * fails exactly where this scan finds no token. */
int64_t taylor_token_length(const char *t, int64_t n)
{
    if (n <= 0)
        return 0;
    if (n >= 7 && memcmp(t, "O(x**6)", 7) == 0)
        return 7;
    if (n >= 2 && t[0] == '*' && t[1] == '*')
        return 2;
    if (t[0] != '\0' && strchr("*+-/()", t[0]))
        return 1;
    if (t[0] >= '1' && t[0] <= '9' && n >= 3 && t[1] == '.' && t[2] == '0')
        return 3;
    if (t[0] >= '0' && t[0] <= '9')
        return 1;
    int64_t run = 0;
    while (run < n && is_letter(t[run]))
        run++;
    return run;
}

int32_t taylor_vocab_code(const taylor_vocab *v, const char *token, size_t length)
{
    for (int32_t i = 0; v && i < v->size; i++)
        if (strlen(v->tokens[i]) == length && memcmp(v->tokens[i], token, length) == 0)
            return i;
    return -1;
}

static void vocab_free(taylor_vocab *v)
{
    for (int32_t i = 0; v->tokens && i < v->size; i++)
        free(v->tokens[i]);
    free(v->tokens);
    v->tokens = NULL;
    v->size = 0;
}

/* Adds a token the vocabulary lacks; -1 when memory runs out. */
static int vocab_add(taylor_vocab *v, int32_t *capacity, const char *token, size_t length)
{
    if (taylor_vocab_code(v, token, length) >= 0)
        return 0;
    if (v->size == *capacity) {
        int32_t grown = *capacity ? 2 * *capacity : 64;
        char **tokens = realloc(v->tokens, (size_t)grown * sizeof *tokens);
        if (!tokens)
            return -1;
        v->tokens = tokens;
        *capacity = grown;
    }
    char *copy = malloc(length + 1);
    if (!copy)
        return -1;
    memcpy(copy, token, length);
    copy[length] = '\0';
    v->tokens[v->size++] = copy;
    return 0;
}

static int by_bytes(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* build_vocabulary: the digits, every token of the column, byte order, then
 * <pad> <sos> <eos> in front. */
static int build_vocab(taylor_vocab *v, const line_info *lines, int64_t count, int side)
{
    int32_t capacity = 0;
    for (char digit = '0'; digit <= '9'; digit++)
        if (vocab_add(v, &capacity, &digit, 1) < 0)
            return -1;
    for (int64_t l = 0; l < count; l++) {
        const char *t = lines[l].side[side];
        int64_t n = lines[l].side_len[side];
        for (int64_t i = 0, len; i < n; i += len) {
            len = taylor_token_length(t + i, n - i);
            if (vocab_add(v, &capacity, t + i, (size_t)len) < 0)
                return -1;
        }
    }
    qsort(v->tokens, (size_t)v->size, sizeof *v->tokens, by_bytes);
    static const char *const special[3] = {"<pad>", "<sos>", "<eos>"};
    for (int i = 0; i < 3; i++)
        if (vocab_add(v, &capacity, special[i], strlen(special[i])) < 0)
            return -1;
    /* The three just went to the end; rotate them to codes 0, 1, 2. */
    char *tail[3] = {v->tokens[v->size - 3], v->tokens[v->size - 2], v->tokens[v->size - 1]};
    memmove(v->tokens + 3, v->tokens, (size_t)(v->size - 3) * sizeof *v->tokens);
    memcpy(v->tokens, tail, sizeof tail);
    return 0;
}

/* Counts one side's tokens; -1 with the line and column of an unknown
 * character. */
static int count_tokens(line_info *line, int side, char *error, size_t size)
{
    const char *t = line->side[side];
    int64_t n = line->side_len[side], count = 0;
    for (int64_t i = 0, len; i < n; i += len, count++) {
        if (!(len = taylor_token_length(t + i, n - i))) {
            unsigned char c = (unsigned char)t[i];
            say(error, size, "line %lld: unknown character '%c' (byte 0x%02x) at column %lld of "
                "the %s", (long long)line->number, c >= 32 && c < 127 ? c : '?', c,
                (long long)(t + i - line->raw + 1), side_name[side]);
            return -1;
        }
    }
    line->tokens[side] = count;
    return 0;
}

/* Splits the file into stripped "SOURCE|TARGET" lines and counts tokens. */
static line_info *parse_lines(const char *text, size_t bytes, int64_t *count_out, char *error,
                              size_t size)
{
    int64_t count = 0;
    for (size_t i = 0; i < bytes; i++)
        count += text[i] == '\n';
    if (bytes && text[bytes - 1] != '\n')
        count++;
    if (!count) {
        say(error, size, "the file is empty");
        return NULL;
    }
    line_info *lines = calloc((size_t)count, sizeof *lines);
    if (!lines) {
        say(error, size, "out of memory for %lld lines", (long long)count);
        return NULL;
    }
    const char *p = text, *end = text + bytes;
    for (int64_t l = 0; l < count; l++) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        line_info *line = &lines[l];
        line->number = l + 1;
        line->raw = p;
        const char *a = p, *b = eol;
        while (a < b && is_space(*a))
            a++;
        while (b > a && is_space(b[-1]))
            b--;
        p = eol + 1;
        if (a == b) {
            say(error, size, "line %lld is empty", (long long)line->number);
            goto fail;
        }
        const char *bar = memchr(a, '|', (size_t)(b - a));
        if (!bar) {
            say(error, size, "line %lld has no '|' between source and target",
                (long long)line->number);
            goto fail;
        }
        if (memchr(bar + 1, '|', (size_t)(b - bar - 1))) {
            say(error, size, "line %lld has more than one '|'", (long long)line->number);
            goto fail;
        }
        line->side[SOURCE] = a;
        line->side_len[SOURCE] = bar - a;
        line->side[TARGET] = bar + 1;
        line->side_len[TARGET] = b - bar - 1;
        for (int s = SOURCE; s <= TARGET; s++) {
            if (!line->side_len[s]) {
                say(error, size, "line %lld: the %s is empty", (long long)line->number,
                    side_name[s]);
                goto fail;
            }
            if (count_tokens(line, s, error, size) < 0)
                goto fail;
        }
    }
    *count_out = count;
    return lines;
fail:
    free(lines);
    return NULL;
}

/* text2codes' statistics and SequenceData's cap. */
static void length_stats(const line_info *lines, int64_t count, int side, int64_t max_len,
                         taylor_lengths *out)
{
    memset(out, 0, sizeof *out);
    for (int64_t l = 0; l < count; l++) {
        int64_t n = lines[l].tokens[side];
        out->sum += n;
        out->sum_sq += n * n;
        if (n > out->max)
            out->max = (int32_t)n;
    }
    double mean = (double)out->sum / (double)count;
    double var = (double)out->sum_sq / (double)count - mean * mean;
    out->avg = (int32_t)floor(mean + 0.5);
    out->std = (int32_t)floor(sqrt(var > 0.0 ? var : 0.0) + 0.5);
    int64_t cap = (int64_t)out->avg + 3 * (int64_t)out->std;
    if (cap > out->max)
        cap = out->max;
    if (cap > max_len)
        cap = max_len;
    out->cap = (int32_t)cap;
}

/* <sos> + codes + <pad> * (cap - n) + <eos>. */
static void write_row(const taylor_vocab *v, const char *t, int64_t n, int32_t *row, int64_t width)
{
    int64_t k = 0;
    row[k++] = TAYLOR_SOS;
    for (int64_t i = 0, len; i < n; i += len) {
        len = taylor_token_length(t + i, n - i);
        row[k++] = taylor_vocab_code(v, t + i, (size_t)len);
    }
    while (k < width - 1)
        row[k++] = TAYLOR_PAD;
    row[k] = TAYLOR_EOS;
}

static char *read_file(const char *path, size_t *bytes, char *error, size_t size)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        say(error, size, "cannot open '%s'", path);
        return NULL;
    }
    char *text = NULL;
    size_t used = 0, capacity = 0, got;
    do {
        if (used == capacity) {
            capacity = capacity ? 2 * capacity : (size_t)1 << 20;
            char *grown = realloc(text, capacity);
            if (!grown) {
                say(error, size, "out of memory reading '%s'", path);
                goto fail;
            }
            text = grown;
        }
        got = fread(text + used, 1, capacity - used, f);
        used += got;
    } while (got);
    if (ferror(f)) {
        say(error, size, "cannot read '%s'", path);
        goto fail;
    }
    fclose(f);
    *bytes = used;
    return text;
fail:
    free(text);
    fclose(f);
    return NULL;
}

void taylor_data_free(taylor_data *d)
{
    if (!d)
        return;
    vocab_free(&d->src_vocab);
    vocab_free(&d->tgt_vocab);
    free(d->src);
    free(d->tgt);
    free(d->lines);
    free(d);
}

taylor_data *taylor_data_load(const char *path, int64_t max_seq_len, char *error,
                              size_t error_size)
{
    if (!path) {
        say(error, error_size, "no data file given");
        return NULL;
    }
    if (max_seq_len < 3) {
        say(error, error_size, "max_seq_len %lld leaves no room for tokens besides <sos> and "
            "<eos>", (long long)max_seq_len);
        return NULL;
    }
    size_t bytes;
    char *text = read_file(path, &bytes, error, error_size);
    if (!text)
        return NULL;
    int64_t count = 0;
    line_info *lines = parse_lines(text, bytes, &count, error, error_size);
    taylor_data *d = lines ? calloc(1, sizeof *d) : NULL;
    if (!d)
        goto fail;
    d->samples = count;
    if (build_vocab(&d->src_vocab, lines, count, SOURCE) < 0 ||
        build_vocab(&d->tgt_vocab, lines, count, TARGET) < 0) {
        say(error, error_size, "out of memory building the vocabularies");
        goto fail;
    }
    length_stats(lines, count, SOURCE, max_seq_len - 2, &d->src_lengths);
    length_stats(lines, count, TARGET, max_seq_len - 2, &d->tgt_lengths);
    d->src_len = d->src_lengths.cap + 2;
    d->tgt_len = d->tgt_lengths.cap + 2;
    for (int64_t l = 0; l < count; l++)
        d->rows += lines[l].tokens[SOURCE] <= d->src_lengths.cap &&
                   lines[l].tokens[TARGET] <= d->tgt_lengths.cap;
    d->src = malloc((size_t)(d->rows * d->src_len) * sizeof *d->src + 1);
    d->tgt = malloc((size_t)(d->rows * d->tgt_len) * sizeof *d->tgt + 1);
    d->lines = malloc((size_t)d->rows * sizeof *d->lines + 1);
    if (!d->src || !d->tgt || !d->lines) {
        say(error, error_size, "out of memory for %lld rows", (long long)d->rows);
        goto fail;
    }
    for (int64_t l = 0, r = 0; l < count; l++) {
        const line_info *line = &lines[l];
        if (line->tokens[SOURCE] > d->src_lengths.cap || line->tokens[TARGET] > d->tgt_lengths.cap)
            continue;
        write_row(&d->src_vocab, line->side[SOURCE], line->side_len[SOURCE],
                  d->src + r * d->src_len, d->src_len);
        write_row(&d->tgt_vocab, line->side[TARGET], line->side_len[TARGET],
                  d->tgt + r * d->tgt_len, d->tgt_len);
        d->lines[r++] = line->number;
    }
    free(lines);
    free(text);
    return d;
fail:
    taylor_data_free(d);
    free(lines);
    free(text);
    return NULL;
}

int taylor_data_split(const taylor_data *d, int64_t train_size, int64_t test_size,
                      taylor_split *train, taylor_split *validation, taylor_split *test,
                      char *error, size_t error_size)
{
    int64_t rows = d ? d->rows : 0;
    int64_t val_size = rows - train_size - test_size;
    if (train_size < 1 || test_size < 1 || val_size < 1) {
        say(error, error_size, "a split of %lld rows into %lld train and %lld test leaves %lld "
            "for validation; each needs at least one", (long long)rows, (long long)train_size,
            (long long)test_size, (long long)val_size);
        return -1;
    }
    *train = (taylor_split){0, train_size};
    *validation = (taylor_split){train_size, val_size};
    *test = (taylor_split){train_size + val_size, test_size};
    return 0;
}

char *taylor_stringify(const taylor_vocab *v, const int32_t *codes, int64_t count)
{
    size_t total = 1;
    for (int64_t i = 0; i < count; i++) {
        if (codes[i] < 0 || codes[i] >= v->size)
            return NULL;
        total += strlen(v->tokens[codes[i]]);
    }
    char *s = malloc(total), *w = s;
    if (!s)
        return NULL;
    for (int64_t i = 0; i < count; i++) {
        size_t n = strlen(v->tokens[codes[i]]);
        memcpy(w, v->tokens[codes[i]], n);
        w += n;
    }
    *w = '\0';
    /* str.replace('<pad>', ''): left to right, non-overlapping. */
    char *r = s;
    w = s;
    while (*r) {
        if (strncmp(r, "<pad>", 5) == 0)
            r += 5;
        else
            *w++ = *r++;
    }
    *w = '\0';
    return s;
}

int taylor_matches(const taylor_vocab *v, const int32_t *predicted, int64_t n_predicted,
                   const int32_t *target, int64_t n_target)
{
    /* Python's x[1:-1] is empty for lists shorter than 3. */
    char *p = taylor_stringify(v, predicted + (n_predicted > 0), n_predicted > 2 ? n_predicted - 2 : 0);
    char *t = taylor_stringify(v, target + (n_target > 0), n_target > 2 ? n_target - 2 : 0);
    int result = p && t ? strcmp(p, t) == 0 : -1;
    free(p);
    free(t);
    return result;
}

int64_t taylor_greedy_list(const int32_t *tokens, int64_t length, int64_t max_steps,
                           int32_t *out)
{
    if (length < 1)
        return 0;
    int64_t n = 0;
    out[n++] = tokens[0];
    for (int64_t i = 1; i < length && n - 1 < max_steps; i++) {
        if (tokens[i] == TAYLOR_PAD)
            break;
        out[n++] = tokens[i];
        if (tokens[i] == TAYLOR_EOS)
            break;
    }
    return n;
}
