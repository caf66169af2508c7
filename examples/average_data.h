/* The data of tutorials 000 and 001: the average of 10 uniform numbers as a
 * sequence-to-sequence task over digit tokens, generated exactly as the
 * tutorials' numpy code does:
 *
 *   np.random.seed(123); X = np.random.uniform(size=(5000, 10))
 *   Y = np.mean(X, axis=1); train = rows [0, 4000), test = rows [4000, 5000)
 *   VOCAB = ['0', …, '9', ' ', 's', 'e']
 *   source = 's' + ' '.join('{:.8f}'.format(x)[2:] for x in row) + 'e'  (91)
 *   target = 's' + '{:.8f}'.format(y)[2:] + 'e'                          (10)
 *
 * Functions that can fail return 0 on success and -1 on bad input (NULL,
 * NaN, a number outside [0, 1]); none prints. */
#ifndef TFM_EXAMPLES_AVERAGE_DATA_H
#define TFM_EXAMPLES_AVERAGE_DATA_H

#include <stdint.h>

enum {
    AVG_SAMPLES = 5000,
    AVG_FEATURES = 10,
    AVG_TRAIN = 4000,                 /* the first rows; the test set is the rest */
    AVG_TEST = AVG_SAMPLES - AVG_TRAIN,
    AVG_DIGITS = 8,                   /* MAX_DIGITS: decimals kept per number */
    AVG_VOCAB = 13,
    AVG_SPACE = 10,
    AVG_START = 11,                   /* 's' */
    AVG_END = 12,                     /* 'e' */
    AVG_SRC_LEN = 1 + AVG_FEATURES * AVG_DIGITS + (AVG_FEATURES - 1) + 1, /* 91 */
    AVG_TGT_LEN = 1 + AVG_DIGITS + 1  /* 10 */
};

/* VOCAB as characters: avg_vocab[id] is the token's text. */
extern const char avg_vocab[AVG_VOCAB + 1];

/* MT19937 as numpy's legacy RandomState: an integer seed goes through
 * init_genrand, and random_sample() is genrand_res53. */
typedef struct avg_mt19937 {
    uint32_t state[624];
    int index;
} avg_mt19937;

void avg_mt19937_seed(avg_mt19937 *mt, uint32_t seed);
uint32_t avg_mt19937_next(avg_mt19937 *mt);
/* (a >> 5, b >> 6) -> (a * 2^26 + b) / 2^53, in [0, 1). */
double avg_mt19937_random_sample(avg_mt19937 *mt);

/* np.mean of n <= 128 doubles, summed in numpy's order (eight pairwise
 * accumulators, then the rest one by one), so Y matches to the last bit. */
double avg_numpy_mean(const double *x, int n);

typedef struct avg_data {
    double x[AVG_SAMPLES][AVG_FEATURES];
    double y[AVG_SAMPLES];
    int32_t src[AVG_SAMPLES][AVG_SRC_LEN];
    int32_t tgt[AVG_SAMPLES][AVG_TGT_LEN];
} avg_data;

/* The tutorials' data set for a seed (123 in the tutorials); NULL when out
 * of memory. Free with free(). */
avg_data *avg_data_create(uint32_t seed);

/* '{:.8f}'.format(value)[2:] as AVG_DIGITS token ids ("1.00000000" gives
 * eight zeros, as in Python). */
int avg_tokenize_number(double value, int32_t digits[AVG_DIGITS]);
int avg_tokenize_source(const double x[AVG_FEATURES], int32_t tokens[AVG_SRC_LEN]);
int avg_tokenize_target(double y, int32_t tokens[AVG_TGT_LEN]);

/* Reads generated tokens (what follows 's') as the number 0.d1d2…: the
 * digits before the first token that is not a digit, at most AVG_DIGITS;
 * none reads as 0, the tutorial's fallback. Returns 1 when the output is
 * well formed (AVG_DIGITS digits, then 'e' or nothing), 0 when it is not
 * (the value is then what the leading digits say), -1 on bad arguments. */
int avg_decode(const int32_t *tokens, int count, double *value);

/* The tokens as text ("?" for an id outside the vocabulary), NUL-terminated
 * in out, which holds count + 1 chars. */
void avg_tokens_to_text(const int32_t *tokens, int count, char *out);

#endif
