/* Tutorial 003's Taylor-series data (mlinphysics' SequenceData), exactly as
 * data/taylor/FORMAT.md specifies it:
 * "SOURCE|TARGET" lines, the regex tokenizer, byte-ordered vocabularies
 * built over every line, length caps from the mean and spread of the token
 * counts, the length filter, <sos> + codes + <pad>s + <eos> rows (the
 * pads sit BEFORE <eos>), the file-order train / validation / test split,
 * and the notebook's string-equality scoring. Nothing here prints or
 * exits: errors come back as a return value with a message naming the
 * line. */
#ifndef TFM_EXAMPLES_TAYLOR_DATA_H
#define TFM_EXAMPLES_TAYLOR_DATA_H

#include <stddef.h>
#include <stdint.h>

#define TAYLOR_PAD 0
#define TAYLOR_SOS 1
#define TAYLOR_EOS 2
#define TAYLOR_MAX_SEQ_LEN 85   /* the short tutorial's MAX_SEQ_LEN */
#define TAYLOR_TRAIN_SIZE 11000
#define TAYLOR_TEST_SIZE 750    /* validation: whatever is left between them */

typedef struct taylor_vocab {
    int32_t size;
    char **tokens;              /* code -> token: <pad> <sos> <eos>, then byte order */
} taylor_vocab;

/* Token counts (without <sos>/<eos>) over every line, before filtering. */
typedef struct taylor_lengths {
    int64_t sum, sum_sq;
    int32_t max;
    int32_t avg, std;           /* mean and population sd, rounded half up */
    int32_t cap;                /* min(avg + 3 std, max, max_seq_len - 2) */
} taylor_lengths;

typedef struct taylor_data {
    int64_t samples;            /* lines in the file */
    taylor_vocab src_vocab, tgt_vocab;
    taylor_lengths src_lengths, tgt_lengths;
    int64_t src_len, tgt_len;   /* row lengths: cap + 2 */
    int64_t rows;               /* pairs kept by the length filter */
    int32_t *src;               /* [rows, src_len] */
    int32_t *tgt;               /* [rows, tgt_len] */
    int64_t *lines;             /* 1-based file line of each row */
} taylor_data;

typedef struct taylor_split {
    int64_t begin, count;       /* rows begin .. begin + count - 1 */
} taylor_split;

/* Reads and prepares the file; max_seq_len is the tutorial's MAX_SEQ_LEN.
 * NULL on error, with the reason (and line number) in error. */
taylor_data *taylor_data_load(const char *path, int64_t max_seq_len, char *error,
                              size_t error_size);
void taylor_data_free(taylor_data *data);

/* The notebook's contiguous split: train first, test last, validation the
 * rows between. -1 (with a message) when they do not fit. */
int taylor_data_split(const taylor_data *data, int64_t train_size, int64_t test_size,
                      taylor_split *train, taylor_split *validation, taylor_split *test,
                      char *error, size_t error_size);

/* Length of the token that starts text (length > 0 bytes), by the helper's
 * regex O[(]x[*][*]6[)]|[*][*]|[*]|[+]|[-]|[/]|[(]|[)]|[1-9][.]0|[0-9]|[a-zA-Z]+;
 * 0 when no token starts there (an unknown character). */
int64_t taylor_token_length(const char *text, int64_t length);

/* The code of a token, -1 when it is not in the vocabulary. */
int32_t taylor_vocab_code(const taylor_vocab *vocab, const char *token, size_t length);

/* tnm.stringify: the tokens of count codes concatenated, every "<pad>"
 * deleted. A new string (free it); NULL when a code is out of range or
 * memory runs out. */
char *taylor_stringify(const taylor_vocab *vocab, const int32_t *codes, int64_t count);

/* The notebook's test: drop the first and last element of both code lists,
 * stringify, compare. 1 equal, 0 different, -1 on a bad code or no memory. */
int taylor_matches(const taylor_vocab *vocab, const int32_t *predicted, int64_t n_predicted,
                   const int32_t *target, int64_t n_target);

/* The list the tutorial's greedy loop returns, from a decoder's output
 * tokens[0] = <sos>, tokens[1 .. length-1] generated: a generated <pad> is
 * not appended and, the input being unchanged, is predicted again until
 * the loop's max_steps run out, so it ends the list without <eos>; <eos> is
 * appended and ends it; at most max_steps tokens follow <sos>. Writes the
 * list to out (room for length entries) and returns its length. */
int64_t taylor_greedy_list(const int32_t *tokens, int64_t length, int64_t max_steps,
                           int32_t *out);

#endif
