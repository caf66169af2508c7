/* The tutorials' digit-average data, bit for bit as numpy makes it. */
#include "average_data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

const char avg_vocab[AVG_VOCAB + 1] = "0123456789 se";

enum { MT_N = 624, MT_M = 397 };

void avg_mt19937_seed(avg_mt19937 *mt, uint32_t seed)
{
    mt->state[0] = seed;
    for (int i = 1; i < MT_N; i++) {
        uint32_t prev = mt->state[i - 1];
        mt->state[i] = 1812433253u * (prev ^ (prev >> 30)) + (uint32_t)i;
    }
    mt->index = MT_N; /* the first draw regenerates the whole state */
}

static void mt_regenerate(avg_mt19937 *mt)
{
    uint32_t *s = mt->state;
    for (int i = 0; i < MT_N; i++) {
        uint32_t y = (s[i] & 0x80000000u) | (s[(i + 1) % MT_N] & 0x7fffffffu);
        s[i] = s[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    mt->index = 0;
}

uint32_t avg_mt19937_next(avg_mt19937 *mt)
{
    if (mt->index >= MT_N)
        mt_regenerate(mt);
    uint32_t y = mt->state[mt->index++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

double avg_mt19937_random_sample(avg_mt19937 *mt)
{
    uint32_t a = avg_mt19937_next(mt) >> 5, b = avg_mt19937_next(mt) >> 6;
    return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

double avg_numpy_mean(const double *x, int n)
{
    double sum = 0.0;
    int i = 0;
    if (n >= 8) {
        double r[8];
        for (int j = 0; j < 8; j++)
            r[j] = x[j];
        for (i = 8; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++)
                r[j] += x[i + j];
        sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    }
    for (; i < n; i++)
        sum += x[i];
    /* The reduction adds that sum to its identity, 0, then mean divides. */
    return (0.0 + sum) / (double)n;
}

int avg_tokenize_number(double value, int32_t digits[AVG_DIGITS])
{
    if (!digits || !(value >= 0.0 && value <= 1.0))
        return -1;
    char text[16];
    /* glibc rounds the exact binary value correctly, as Python's format. */
    snprintf(text, sizeof text, "%.*f", AVG_DIGITS, value);
    for (int i = 0; i < AVG_DIGITS; i++)
        digits[i] = text[2 + i] - '0';
    return 0;
}

int avg_tokenize_source(const double x[AVG_FEATURES], int32_t tokens[AVG_SRC_LEN])
{
    if (!x || !tokens)
        return -1;
    int32_t *t = tokens;
    *t++ = AVG_START;
    for (int f = 0; f < AVG_FEATURES; f++) {
        if (f > 0)
            *t++ = AVG_SPACE;
        if (avg_tokenize_number(x[f], t) < 0)
            return -1;
        t += AVG_DIGITS;
    }
    *t = AVG_END;
    return 0;
}

int avg_tokenize_target(double y, int32_t tokens[AVG_TGT_LEN])
{
    if (!tokens)
        return -1;
    tokens[0] = AVG_START;
    tokens[AVG_TGT_LEN - 1] = AVG_END;
    return avg_tokenize_number(y, tokens + 1);
}

avg_data *avg_data_create(uint32_t seed)
{
    avg_data *d = malloc(sizeof *d);
    if (!d)
        return NULL;
    avg_mt19937 mt;
    avg_mt19937_seed(&mt, seed);
    /* np.random.uniform(size=(5000, 10)) fills row by row with
     * 0 + (1 - 0) * random_sample(). */
    for (int i = 0; i < AVG_SAMPLES; i++)
        for (int f = 0; f < AVG_FEATURES; f++)
            d->x[i][f] = avg_mt19937_random_sample(&mt);
    for (int i = 0; i < AVG_SAMPLES; i++) {
        d->y[i] = avg_numpy_mean(d->x[i], AVG_FEATURES);
        /* Draws and means lie in [0, 1), so tokenizing cannot fail. */
        avg_tokenize_source(d->x[i], d->src[i]);
        avg_tokenize_target(d->y[i], d->tgt[i]);
    }
    return d;
}

int avg_decode(const int32_t *tokens, int count, double *value)
{
    if (!value || count < 0 || (count > 0 && !tokens))
        return -1;
    /* An integer over a power of ten: correctly rounded, as float("0.…"). */
    int digits = 0;
    double whole = 0.0, scale = 1.0;
    while (digits < count && digits < AVG_DIGITS && tokens[digits] >= 0 && tokens[digits] <= 9) {
        whole = whole * 10.0 + tokens[digits++];
        scale *= 10.0;
    }
    *value = whole / scale;
    return digits == AVG_DIGITS && (count == AVG_DIGITS || tokens[AVG_DIGITS] == AVG_END);
}

void avg_tokens_to_text(const int32_t *tokens, int count, char *out)
{
    for (int i = 0; i < count; i++)
        out[i] = tokens[i] >= 0 && tokens[i] < AVG_VOCAB ? avg_vocab[tokens[i]] : '?';
    out[count] = '\0';
}
