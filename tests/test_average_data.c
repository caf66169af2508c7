/* The digit-average data of tutorials 000/001: numpy's MT19937, the data
 * set, its tokens (as the tutorials print them) and decoding back. Expected
 * values come from numpy's documented outputs, the tutorial's printout and
 * CPython's random module (the same MT19937 and 53-bit doubles). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "average_data.h"
#include "check_main.h"

START_TEST(mt19937_matches_numpy)
{
    avg_mt19937 mt;
    /* CPython's random with init_genrand(123) as its state. */
    static const uint32_t raw[4] = {2991312382u, 3062119789u, 1228959102u, 1840268610u};
    avg_mt19937_seed(&mt, 123);
    for (int i = 0; i < 4; i++)
        ck_assert_uint_eq(avg_mt19937_next(&mt), raw[i]);
    /* Past the first and second regeneration of the state. */
    avg_mt19937_seed(&mt, 123);
    uint32_t v[1300];
    for (int i = 0; i < 1300; i++)
        v[i] = avg_mt19937_next(&mt);
    ck_assert_uint_eq(v[623], 1058258670u);
    ck_assert_uint_eq(v[624], 1280954235u);
    ck_assert_uint_eq(v[1247], 524589717u);
    ck_assert_uint_eq(v[1299], 3961479804u);

    /* np.random.seed(s); np.random.random_sample() */
    avg_mt19937_seed(&mt, 123);
    ck_assert_double_eq(avg_mt19937_random_sample(&mt), 0.6964691855978616);
    ck_assert_double_eq(avg_mt19937_random_sample(&mt), 0.28613933495037946);
    avg_mt19937_seed(&mt, 0);
    ck_assert_double_eq(avg_mt19937_random_sample(&mt), 0.5488135039273248);
    avg_mt19937_seed(&mt, 4294967295u);
    ck_assert_double_eq(avg_mt19937_random_sample(&mt), 0.0976320289940138);
}
END_TEST

START_TEST(numpy_mean_order)
{
    /* Eight accumulators pairwise, then the rest: 1 + 1e16 and -1e16 + 1
     * both round to even and lose their 1s, leaving 2; adding left to
     * right keeps one of them and gives 3. */
    const double x[10] = {1.0, 1e16, -1e16, 1.0, 0, 0, 0, 0, 1.0, 1.0};
    ck_assert_double_eq(avg_numpy_mean(x, 10), 0.2);
    const double small[3] = {0.5, 0.25, 2.25};
    ck_assert_double_eq(avg_numpy_mean(small, 3), 1.0);
    double many[20];
    for (int i = 0; i < 20; i++)
        many[i] = i;
    ck_assert_double_eq(avg_numpy_mean(many, 20), 9.5);
}
END_TEST

START_TEST(first_sample_as_the_tutorial_prints)
{
    avg_data *d = avg_data_create(123);
    ck_assert_ptr_nonnull(d);
    /* repr() of X[0]; the tutorial prints them rounded: 0.69646919 0.28613933 … */
    static const double x0[AVG_FEATURES] = {
        0.6964691855978616, 0.28613933495037946, 0.2268514535642031, 0.5513147690828912,
        0.7194689697855631, 0.42310646012446096, 0.9807641983846155, 0.6848297385848633,
        0.48093190148436094, 0.3921175181941505};
    for (int f = 0; f < AVG_FEATURES; f++)
        ck_assert_double_eq(d->x[0][f], x0[f]);
    ck_assert_double_eq(d->y[0], 0.544199352975335); /* "raw output: 0.544199352975335" */

    static const int32_t src0[AVG_SRC_LEN] = {
        11, 6, 9, 6, 4, 6, 9, 1, 9, 10, 2, 8, 6, 1, 3, 9, 3, 3, 10, 2, 2, 6, 8, 5, 1, 4, 5,
        10, 5, 5, 1, 3, 1, 4, 7, 7, 10, 7, 1, 9, 4, 6, 8, 9, 7, 10, 4, 2, 3, 1, 0, 6, 4, 6,
        10, 9, 8, 0, 7, 6, 4, 2, 0, 10, 6, 8, 4, 8, 2, 9, 7, 4, 10, 4, 8, 0, 9, 3, 1, 9, 0,
        10, 3, 9, 2, 1, 1, 7, 5, 2, 12};
    static const int32_t tgt0[AVG_TGT_LEN] = {11, 5, 4, 4, 1, 9, 9, 3, 5, 12};
    for (int i = 0; i < AVG_SRC_LEN; i++)
        ck_assert_int_eq(d->src[0][i], src0[i]);
    for (int i = 0; i < AVG_TGT_LEN; i++)
        ck_assert_int_eq(d->tgt[0][i], tgt0[i]);

    /* Further rows, from CPython's generator with the same state. */
    ck_assert_double_eq(d->x[1][0], 0.3431780161508694);
    ck_assert_double_eq(d->y[1], 0.4127839973426267);
    ck_assert_double_eq(d->x[AVG_SAMPLES - 1][AVG_FEATURES - 1], 0.06813879525837796);
    ck_assert_double_eq(d->y[AVG_SAMPLES - 1], 0.31763660388526715);
    free(d);
}
END_TEST

START_TEST(split_and_every_row)
{
    ck_assert_int_eq(AVG_TRAIN, 4000);
    ck_assert_int_eq(AVG_TEST, 1000);
    ck_assert_int_eq(AVG_SRC_LEN, 91);
    ck_assert_int_eq(AVG_TGT_LEN, 10);
    ck_assert_str_eq(avg_vocab, "0123456789 se");
    avg_data *d = avg_data_create(123);
    ck_assert_ptr_nonnull(d);
    /* X_test[0] is row 4000: the split is the first 4000 rows, then the rest. */
    ck_assert_double_eq(d->x[AVG_TRAIN][0], 0.03007869737980573);
    ck_assert_double_eq(d->y[AVG_TRAIN], 0.5766301932516511);

    double train_mean = 0.0;
    for (int i = 0; i < AVG_TRAIN; i++)
        train_mean += d->y[i];
    train_mean /= AVG_TRAIN;
    ck_assert_double_eq_tol(train_mean, 0.500850014196663, 1e-12);
    double se = 0.0;
    for (int i = AVG_TRAIN; i < AVG_SAMPLES; i++)
        se += (d->y[i] - train_mean) * (d->y[i] - train_mean);
    ck_assert_double_eq_tol(sqrt(se / AVG_TEST), 0.09298651959494679, 1e-12);

    for (int i = 0; i < AVG_SAMPLES; i++) {
        double sum = 0.0;
        for (int f = 0; f < AVG_FEATURES; f++) {
            ck_assert(d->x[i][f] >= 0.0 && d->x[i][f] < 1.0);
            sum += d->x[i][f];
        }
        ck_assert_double_eq_tol(d->y[i], sum / AVG_FEATURES, 1e-15);
        /* 's', 8 digits, ' ', 8 digits, …, 'e', each number its "%.8f". */
        const int32_t *s = d->src[i];
        ck_assert_int_eq(s[0], AVG_START);
        ck_assert_int_eq(s[AVG_SRC_LEN - 1], AVG_END);
        for (int f = 0; f < AVG_FEATURES; f++) {
            const int32_t *digits = s + 1 + f * (AVG_DIGITS + 1);
            if (f > 0)
                ck_assert_int_eq(digits[-1], AVG_SPACE);
            char want[16];
            snprintf(want, sizeof want, "%.8f", d->x[i][f]);
            for (int k = 0; k < AVG_DIGITS; k++)
                ck_assert_int_eq(digits[k], want[2 + k] - '0');
        }
        /* The target round-trips through decoding to y at 8 decimals. */
        double value;
        ck_assert_int_eq(d->tgt[i][0], AVG_START);
        ck_assert_int_eq(avg_decode(d->tgt[i] + 1, AVG_TGT_LEN - 1, &value), 1);
        char text[16];
        snprintf(text, sizeof text, "%.8f", d->y[i]);
        ck_assert_double_eq(value, strtod(text, NULL));
        ck_assert(fabs(value - d->y[i]) <= 5e-9 + 1e-15);
    }
    free(d);
}
END_TEST

START_TEST(tokenize_number_rounding)
{
    int32_t t[AVG_DIGITS];
    ck_assert_int_eq(avg_tokenize_number(0.0, t), 0);
    for (int k = 0; k < AVG_DIGITS; k++)
        ck_assert_int_eq(t[k], 0);
    /* '{:.8f}'.format(0.999999996) is '1.00000000': [2:] is eight zeros. */
    ck_assert_int_eq(avg_tokenize_number(0.999999996, t), 0);
    for (int k = 0; k < AVG_DIGITS; k++)
        ck_assert_int_eq(t[k], 0);
    ck_assert_int_eq(avg_tokenize_number(1.0, t), 0);
    for (int k = 0; k < AVG_DIGITS; k++)
        ck_assert_int_eq(t[k], 0);
    /* Exact ties round to even, as Python: 2^-9 = 0.001953125 -> 0.00195312,
     * 3 * 2^-9 = 0.005859375 -> 0.00585938. */
    static const int32_t tie_down[AVG_DIGITS] = {0, 0, 1, 9, 5, 3, 1, 2};
    static const int32_t tie_up[AVG_DIGITS] = {0, 0, 5, 8, 5, 9, 3, 8};
    ck_assert_int_eq(avg_tokenize_number(0.001953125, t), 0);
    ck_assert_mem_eq(t, tie_down, sizeof t);
    ck_assert_int_eq(avg_tokenize_number(0.005859375, t), 0);
    ck_assert_mem_eq(t, tie_up, sizeof t);
}
END_TEST

START_TEST(decode_well_formed_and_malformed)
{
    double v = -1.0;
    const int32_t good[9] = {5, 4, 4, 1, 9, 9, 3, 5, AVG_END};
    ck_assert_int_eq(avg_decode(good, 9, &v), 1);
    ck_assert_double_eq(v, 0.54419935);
    ck_assert_int_eq(avg_decode(good, 8, &v), 1); /* no room left for 'e' */
    ck_assert_double_eq(v, 0.54419935);

    /* Early 'e': the digits there are. */
    const int32_t short_[5] = {5, 4, 4, 1, AVG_END};
    ck_assert_int_eq(avg_decode(short_, 5, &v), 0);
    ck_assert_double_eq(v, 0.5441);
    /* A digit where 'e' belongs: malformed, but the 8 digits still count. */
    const int32_t long_[9] = {5, 4, 4, 1, 9, 9, 3, 5, 7};
    ck_assert_int_eq(avg_decode(long_, 9, &v), 0);
    ck_assert_double_eq(v, 0.54419935);
    /* A space, 's' or an id outside the vocabulary stops the number. */
    const int32_t space[9] = {5, 5, AVG_SPACE, 5, 5, 5, 5, 5, AVG_END};
    ck_assert_int_eq(avg_decode(space, 9, &v), 0);
    ck_assert_double_eq(v, 0.55);
    const int32_t junk[3] = {7, 13, 2};
    ck_assert_int_eq(avg_decode(junk, 3, &v), 0);
    ck_assert_double_eq(v, 0.7);
    const int32_t negative[2] = {-1, 2};
    ck_assert_int_eq(avg_decode(negative, 2, &v), 0);
    ck_assert_double_eq(v, 0.0);
    /* Nothing numeric: the tutorial's fallback of 0. */
    const int32_t start[1] = {AVG_START};
    v = -1.0;
    ck_assert_int_eq(avg_decode(start, 1, &v), 0);
    ck_assert_double_eq(v, 0.0);
    v = -1.0;
    ck_assert_int_eq(avg_decode(NULL, 0, &v), 0);
    ck_assert_double_eq(v, 0.0);

    char text[16];
    avg_tokens_to_text(junk, 3, text);
    ck_assert_str_eq(text, "7?2");
    avg_tokens_to_text(good, 9, text);
    ck_assert_str_eq(text, "54419935e");
}
END_TEST

START_TEST(bad_arguments)
{
    int32_t t[AVG_SRC_LEN];
    double v;
    ck_assert_int_eq(avg_tokenize_number(NAN, t), -1);
    ck_assert_int_eq(avg_tokenize_number(INFINITY, t), -1);
    ck_assert_int_eq(avg_tokenize_number(-0.1, t), -1);
    ck_assert_int_eq(avg_tokenize_number(1.5, t), -1);
    ck_assert_int_eq(avg_tokenize_number(0.5, NULL), -1);
    ck_assert_int_eq(avg_tokenize_target(2.0, t), -1);
    ck_assert_int_eq(avg_tokenize_target(0.5, NULL), -1);
    double x[AVG_FEATURES] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.5};
    ck_assert_int_eq(avg_tokenize_source(x, t), 0);
    ck_assert_int_eq(avg_tokenize_source(NULL, t), -1);
    ck_assert_int_eq(avg_tokenize_source(x, NULL), -1);
    x[9] = -2.0;
    ck_assert_int_eq(avg_tokenize_source(x, t), -1);
    const int32_t one[1] = {1};
    ck_assert_int_eq(avg_decode(one, 1, NULL), -1);
    ck_assert_int_eq(avg_decode(one, -1, &v), -1);
    ck_assert_int_eq(avg_decode(NULL, 3, &v), -1);
}
END_TEST

static Suite *average_data_suite(void)
{
    Suite *s = suite_create("average_data");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, mt19937_matches_numpy);
    tcase_add_test(tc, numpy_mean_order);
    tcase_add_test(tc, first_sample_as_the_tutorial_prints);
    tcase_add_test(tc, split_and_every_row);
    tcase_add_test(tc, tokenize_number_rounding);
    tcase_add_test(tc, decode_well_formed_and_malformed);
    tcase_add_test(tc, bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(average_data_suite)
