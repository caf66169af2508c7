/* Decoding's constraints (lib/decode/constraints.c) in every path on the
 * tests/marian fixture: greedy, sampling (temperature, top-k, top-p),
 * beam search, cached and recomputed, float32 and int8. Each output has
 * its phrases exactly as often as asked, in the asked order, ends only
 * once they are all written, and a source without constraints in the
 * same batch decodes bit for bit as without any. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "decode/decode.h"
#include <tfm/tfm.h>

#define MARIAN TFM_TESTS_DIR "/marian"
enum { B = 2, S = 12, A = 50, B0 = 60, B1 = 61 };

static const int32_t a_ids[1] = {A}, b_ids[2] = {B0, B1};
static const tfm__phrase phrases[2] = {{a_ids, 1, 2, 2}, {b_ids, 2, 1, 1}};
static const int32_t order[3] = {0, 1, 0};
static const int32_t banned[1] = {9};
static const tfm__constraints wanted = {phrases, 2, order, 3, banned, 1};

typedef struct outputs {
    int32_t tokens[B * 4 * 32], lengths[B * 4];
    float scores[B * 4];
} outputs;

static void run(tfm_model *m, const tfm_decode_options *o, const tfm_tensor *src,
                const tfm__constraints *const *per_source, outputs *out)
{
    tfm_decoding *d = tfm_decoding_create(m, o, B, S);
    ck_assert_msg(d != NULL, "%s", tfm_last_error());
    tfm__decoding_constrain(d, per_source);
    memset(out, 0, sizeof *out);
    int64_t n = o->strategy == TFM_DECODE_BEAM ? o->n_best : 1;
    ck_assert_msg(tfm_decoding_run(d, src, out->tokens, B * n * (o->max_length + 1),
                                   out->lengths, B * n, out->scores, B * n, NULL, 0, NULL,
                                   0) == TFM_OK,
                  "%s", tfm_last_error());
    tfm_decoding_free(d);
}

/* Hypothesis row's generated tokens: A, then B0 B1, then A, nothing else
 * of theirs, and the end token last (the budget allows it). */
static void assert_kept(const tfm_decode_options *o, const outputs *out, int64_t row,
                        const char *what)
{
    const int32_t *t = out->tokens + row * (o->max_length + 1);
    int64_t len = out->lengths[row];
    char seen[16] = "";
    for (int64_t i = 1; i < len; i++) {
        if (t[i] == A)
            strcat(seen, "a");
        else if (t[i] == B0)
            strcat(seen, i + 1 < len && t[i + 1] == B1 ? "b" : "?");
    }
    char all[256] = "";
    for (int64_t i = 0; i < len; i++)
        snprintf(all + strlen(all), sizeof all - strlen(all), " %d", (int)t[i]);
    ck_assert_msg(strcmp(seen, "aba") == 0, "%s: row %lld wrote \"%s\" (%s)", what,
                  (long long)row, seen, all);
    ck_assert_msg(t[len - 1] == o->eos_id, "%s: row %lld did not end", what, (long long)row);
}

static void every_path(tfm_model *m, const char *precision)
{
    int32_t ids[B * S];
    for (int64_t b = 0; b < B; b++) {
        int64_t count = 0;
        ck_assert_int_eq(tfm_model_encode_text(m, b ? "the file" : "the files are open",
                                               b ? 8 : 18, ids + b * S, S, &count),
                         TFM_OK);
        for (int64_t i = count; i < S; i++)
            ids[b * S + i] = tfm_model_pad_id(m);
    }
    tfm_tensor *src = tfm_tensor_from_i32(2, (int64_t[]){B, S}, ids);
    const tfm__constraints *first_only[B] = {&wanted, NULL};
    for (int path = 0; path < 10; path++) {
        tfm_decode_options o;
        tfm_decode_options_init(&o);
        ck_assert_int_eq(tfm_decode_options_from_model(m, &o), TFM_OK);
        o.max_length = 20;
        o.use_cache = path % 2;
        o.strategy = path < 2 ? TFM_DECODE_GREEDY
                     : path < 8 ? TFM_DECODE_SAMPLE : TFM_DECODE_BEAM;
        o.beam_size = o.n_best = 4;
        o.temperature = path < 4 ? 1.0f : 1.5f;
        o.top_k = path >= 4 && path < 6 ? 20 : 0;
        o.top_p = path >= 6 && path < 8 ? 0.9f : 1.0f;
        o.seed = 7;
        char what[96];
        snprintf(what, sizeof what, "%s, path %d (strategy %d, cache %d)", precision, path,
                 (int)o.strategy, (int)o.use_cache);
        outputs free_run, constrained;
        run(m, &o, src, NULL, &free_run);
        run(m, &o, src, first_only, &constrained);
        int64_t n = o.strategy == TFM_DECODE_BEAM ? o.n_best : 1;
        for (int64_t h = 0; h < n; h++)
            if (constrained.lengths[h] > 0)
                assert_kept(&o, &constrained, h, what);
        /* the unconstrained source decodes as without constraints (sampling
         * draws from the rng the first source shares; the recomputing
         * path's products see the batch's rows: the cached greedy and beam) */
        if (o.strategy != TFM_DECODE_SAMPLE && o.use_cache) {
            int64_t row = n * (o.max_length + 1);
            ck_assert_msg(memcmp(free_run.tokens + row, constrained.tokens + row,
                                 (size_t)row * sizeof(int32_t)) == 0,
                          "%s: the other source changed", what);
            ck_assert_msg(memcmp(free_run.scores + n, constrained.scores + n,
                                 (size_t)n * sizeof(float)) == 0,
                          "%s: the other source's scores changed: %a %a / %a %a", what,
                          free_run.scores[n + 2], constrained.scores[n + 2], free_run.scores[n + 3],
                          constrained.scores[n + 3]);
        }
        /* constraints of none decode bit for bit as without */
        const tfm__constraints *none[B] = {NULL, NULL};
        run(m, &o, src, none, &constrained);
        ck_assert_msg(memcmp(&free_run, &constrained, sizeof free_run) == 0,
                      "%s: no constraints changed the output", what);
    }
    tfm_tensor_free(src);
}

START_TEST(every_decoding_path_keeps_the_phrases)
{
    tfm_model *m = tfm_model_from_pretrained(MARIAN);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    every_path(m, "float32");
    ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR),
                     TFM_OK);
    every_path(m, "int8");
    tfm_model_free(m);
}
END_TEST

/* A phrase that cannot fit in max_length is as much of it as fits, and
 * the reading says it is unmet; a forced start keeps the phrase whole. */
START_TEST(state_reads_the_tokens)
{
    tfm__constraint_state s;
    const int32_t g[] = {7, A, 8, B0, B1, A, 3};
    tfm__constraints_read(&wanted, g, 7, &s);
    ck_assert_int_eq(s.count[0], 2);
    ck_assert_int_eq(s.count[1], 1);
    ck_assert_int_eq(s.open, -1);
    ck_assert_int_eq(s.at_order, 3);
    /* B0 before the first A is no start (the order is at A) */
    const int32_t early[] = {B0, A, B0};
    tfm__constraints_read(&wanted, early, 3, &s);
    ck_assert_int_eq(s.count[0], 1);
    ck_assert_int_eq(s.open, 1);
    ck_assert_int_eq(s.written, 1);
    float scores[100];
    for (int v = 0; v < 100; v++)
        scores[v] = 0.0f;
    tfm__constraints_mask(&wanted, scores, 100, early, 3, 10, (const int32_t[]){2}, 1);
    for (int v = 0; v < 100; v++)
        ck_assert(v == B1 ? scores[v] == 0.0f : isinf(scores[v]));
    /* one token left with A still to write: only A */
    for (int v = 0; v < 100; v++)
        scores[v] = 0.0f;
    const int32_t almost[] = {A, B0, B1};
    tfm__constraints_mask(&wanted, scores, 100, almost, 3, 1, (const int32_t[]){2}, 1);
    for (int v = 0; v < 100; v++)
        ck_assert(v == A ? scores[v] == 0.0f : isinf(scores[v]));
    /* plenty left: the end token, B0 and the banned id banned, A free, the
     * rest free */
    for (int v = 0; v < 100; v++)
        scores[v] = 0.0f;
    tfm__constraints_mask(&wanted, scores, 100, almost, 3, 10, (const int32_t[]){2}, 1);
    ck_assert(isinf(scores[2]) && isinf(scores[B0]) && isinf(scores[9]));
    ck_assert(scores[A] == 0.0f && scores[8] == 0.0f);
}
END_TEST

static Suite *constraints_suite(void)
{
    Suite *s = suite_create("constraints");
    TCase *c = tcase_create("decoding");
    tcase_set_timeout(c, 240);
    tcase_add_test(c, state_reads_the_tokens);
    tcase_add_test(c, every_decoding_path_keeps_the_phrases);
    suite_add_tcase(s, c);
    return s;
}

TFM_CHECK_MAIN(constraints_suite)
