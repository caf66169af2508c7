/* The decoding options that real decoders have (issue 31): the logits
 * processors (min_length, repetition_penalty, no_repeat_ngram_size, bad
 * words, forced_bos_id, suppressed tokens, a forced prefix), several end
 * tokens, per-source length limits, beam patience, and the streaming
 * callback. Greedy and beam search against fixtures/decode_cases.h,
 * written from Hugging Face generate's semantics over a PyTorch twin of
 * the model, token for token, cached and recomputed; sampling by its
 * invariants (a banned token never drawn nor given probability, the
 * distribution drawn from is the processed one); the scores, the copies of
 * the token lists, an older struct's defaults, each option's range and the
 * prefix's errors; the alignments (return_attention) against
 * fixtures/decode_alignments.h, the same model's forward in PyTorch over
 * each output, and their getter's errors; beam search's scores with and
 * without renormalize_logits against transformers' by hand. */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "fixtures/decode_cases.h"
#include "fixtures/decode_alignments.h"
#include <tfm/tfm.h>

enum { PAD = 0, BOS = 1, EOS = 2, V = 11, T = DECODE_MAX_LENGTH, T1 = T + 1,
       B = DECODE_SOURCES, S = DECODE_SRC_LEN };

/* fixtures/model.safetensors' model (generate.py's TorchTransformerModel);
 * its sinusoidal table has 16 positions, as this model's. */
static tfm_model *fixture_model(void)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = 13;
    o.tgt_vocab = V;
    o.max_src_len = 16;
    o.max_tgt_len = 16;
    o.encoder_layers = 2;
    o.decoder_layers = 2;
    o.d_model = 16;
    o.heads = 2;
    o.d_ff = 32;
    o.dropout = 0.0f;
    o.positions = TFM_POSITIONS_SINUSOIDAL;
    o.embedding_scale = TFM_EMBEDDING_SCALE_SQRT_D;
    o.final_norm = 1;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m, "%s", tfm_last_error());
    tfm_load_options lo;
    tfm_load_options_init(&lo);
    lo.strip_prefix = "param.";
    lo.allow_unexpected = 1; /* the fixture's inputs, outputs and optimizer steps */
    ck_assert_msg(tfm_params_load_with(tfm_model_params(m), TFM_FIXTURES "/model.safetensors",
                                       &lo, NULL) == TFM_OK,
                  "%s", tfm_last_error());
    return m;
}

/* Every test's model and sources. */
static tfm_model *model;
static tfm_tensor *src;

static void setup(void)
{
    model = fixture_model();
    src = tfm_tensor_from_i32(2, (const int64_t[]){B, S}, decode_sources);
    ck_assert_ptr_nonnull(src);
}

static void teardown(void)
{
    tfm_tensor_free(src);
    tfm_model_free(model);
}

/* The case's options over strategy's, max_length T, source padding. */
static void case_options(tfm_decode_options *o, const decode_case *c,
                         tfm_decode_strategy strategy, int use_cache)
{
    tfm_decode_options_init(o);
    o->strategy = strategy;
    o->max_length = T;
    o->src_pad_id = PAD;
    o->beam_size = DECODE_BEAM;
    o->n_best = DECODE_N_BEST;
    o->use_cache = use_cache;
    o->min_length = c->min_length;
    o->repetition_penalty = c->repetition_penalty;
    o->no_repeat_ngram_size = c->no_repeat_ngram_size;
    o->suppress_ids = c->n_suppress ? c->suppress : NULL;
    o->n_suppress_ids = c->n_suppress;
    o->eos_ids = c->n_eos ? c->eos : NULL;
    o->n_eos_ids = c->n_eos;
    o->max_length_a = c->max_length_a;
    o->max_length_b = c->max_length_b;
    o->forced_bos_id = c->forced_bos;
    o->patience = c->patience;
    o->bad_words = c->n_bad ? c->bad_tokens : NULL;
    o->bad_word_lengths = c->n_bad ? c->bad_lengths : NULL;
    o->n_bad_words = c->n_bad;
}

/* The case's forced prefix [B, DECODE_PREFIX], or NULL. */
static tfm_tensor *case_prefix(const decode_case *c)
{
    return c->has_prefix ? tfm_tensor_from_i32(2, (const int64_t[]){B, DECODE_PREFIX}, c->prefix)
                         : NULL;
}

/* Source b's longest output: max_length_a * its tokens + max_length_b. */
static int limit_of(const decode_case *c, int b)
{
    int n = 0;
    for (int s = 0; s < S; s++)
        n += decode_sources[b * S + s] != PAD;
    double own = floor((double)c->max_length_a * n) + c->max_length_b;
    return own < T ? (int)own : T;
}

typedef struct result {
    int32_t tokens[B * DECODE_N_BEST * T1], lengths[B * DECODE_N_BEST];
    float scores[B * DECODE_N_BEST], logits[B * T * V], probs[B * T * V];
} result;

#define COUNT(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))

/* Decodes the sources with the options and, unless NULL, the forced
 * prefix; returns the decoding, the caller's to free. */
static tfm_decoding *decode_kept(const tfm_decode_options *o, const tfm_tensor *prefix,
                                 result *r)
{
    memset(r, 0, sizeof *r);
    tfm_decoding *d = tfm_decoding_create(model, o, tfm_tensor_dim(src, 0), tfm_tensor_dim(src, 1));
    ck_assert_msg(d, "%s", tfm_last_error());
    int beam = o->strategy == TFM_DECODE_BEAM;
    ck_assert_msg(tfm_decoding_run_with_prefix(d, src, prefix, r->tokens, COUNT(r->tokens),
                                               r->lengths, COUNT(r->lengths), r->scores,
                                               COUNT(r->scores), beam ? NULL : r->logits,
                                               COUNT(r->logits), beam ? NULL : r->probs,
                                               COUNT(r->probs)) == TFM_OK,
                  "%s", tfm_last_error());
    return d;
}

static void decode(const tfm_decode_options *o, const tfm_tensor *prefix, result *r)
{
    tfm_decoding_free(decode_kept(o, prefix, r));
}

static void expect_tokens(const int32_t *got, const int32_t *want, int64_t n, const char *what,
                          int64_t row)
{
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s, row %lld: token %lld is %d, generate's %d", what,
                      (long long)row, (long long)i, (int)got[i], (int)want[i]);
}

/* _i: case, strategy (greedy, beam), path (cached, recomputed). */
START_TEST(greedy_and_beam_match_generate)
{
    const decode_case *c = &decode_cases[_i / 4];
    int beam = _i / 2 % 2, use_cache = _i % 2 == 0;
    tfm_decode_options o;
    case_options(&o, c, beam ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY, use_cache);
    result *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    tfm_tensor *prefix = case_prefix(c);
    decode(&o, prefix, r);
    tfm_tensor_free(prefix);
    char what[96];
    snprintf(what, sizeof what, "%s, %s, %s", c->name, beam ? "beam" : "greedy",
             use_cache ? "cached" : "recomputed");
    for (int b = 0; b < B; b++) {
        if (beam)
            for (int h = 0; h < DECODE_N_BEST; h++)
                expect_tokens(r->tokens + (b * DECODE_N_BEST + h) * T1, c->beam[b][h], T1, what,
                              b * DECODE_N_BEST + h);
        else
            expect_tokens(r->tokens + b * T1, c->greedy[b], T1, what, b);
    }
    free(r);
}
END_TEST

static int in(const int32_t *ids, int32_t n, int32_t token)
{
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == token)
            return 1;
    return 0;
}

static void force_by_hand(double *out, int32_t token)
{
    for (int v = 0; v < V; v++)
        out[v] = v == token ? 0.0 : -INFINITY;
}

/* The case's processors applied by hand to one step's logits [V] of source
 * b, for the tokens so far (bos first): what the test expects. */
static void processed_by_hand(const decode_case *c, int b, const float *logits,
                              const int32_t *so_far, int len, double *out)
{
    for (int v = 0; v < V; v++) {
        double x = logits[v];
        if (c->repetition_penalty != 1.0f && in(so_far, len, v))
            x = (float)x < 0.0f ? (float)x * c->repetition_penalty
                                : (float)x / c->repetition_penalty;
        out[v] = x;
    }
    int n = c->no_repeat_ngram_size;
    for (int start = 0; n > 0 && len + 1 >= n && start + n <= len; start++)
        if (memcmp(so_far + start, so_far + len - (n - 1), (size_t)(n - 1) * sizeof *so_far) == 0)
            out[so_far[start + n - 1]] = -INFINITY;
    const int32_t *word = c->bad_tokens;
    for (int i = 0; i < c->n_bad; word += c->bad_lengths[i++]) {
        int before = c->bad_lengths[i] - 1;
        if (before <= len && memcmp(so_far + len - before, word, (size_t)before * sizeof *word) == 0)
            out[word[before]] = -INFINITY;
    }
    if (len - 1 < c->min_length) {
        out[EOS] = -INFINITY;
        for (int i = 0; i < c->n_eos; i++)
            out[c->eos[i]] = -INFINITY;
    }
    if (c->forced_bos >= 0 && len == 1)
        force_by_hand(out, c->forced_bos);
    for (int i = 0; i < c->n_suppress; i++)
        out[c->suppress[i]] = -INFINITY;
    if (c->has_prefix && len - 1 < DECODE_PREFIX && c->prefix[b * DECODE_PREFIX + len - 1] >= 0)
        force_by_hand(out, c->prefix[b * DECODE_PREFIX + len - 1]);
}

/* Sampling (temperature 0.7, top_k 0): at every step the distribution drawn
 * from is softmax(processed logits / 0.7), the token drawn has probability
 * above 0, a sequence ends at its first end token or at max_length, and the
 * recomputed path draws the same. _i: case. */
START_TEST(sampling_draws_from_the_processed_logits)
{
    const decode_case *c = &decode_cases[_i];
    result *r = malloc(2 * sizeof *r);
    ck_assert_ptr_nonnull(r);
    for (int use_cache = 1; use_cache >= 0; use_cache--) {
        tfm_decode_options o;
        case_options(&o, c, TFM_DECODE_SAMPLE, use_cache);
        o.temperature = 0.7f;
        o.seed = 5;
        tfm_tensor *prefix = case_prefix(c);
        decode(&o, prefix, &r[use_cache]);
        tfm_tensor_free(prefix);
    }
    ck_assert_mem_eq(r[0].tokens, r[1].tokens, sizeof r[0].tokens);
    const result *got = &r[1];
    for (int b = 0; b < B; b++) {
        const int32_t *so_far = got->tokens + b * T1;
        for (int t = 0; t + 1 < got->lengths[b]; t++) {
            double want[V], total = 0.0;
            processed_by_hand(c, b, got->logits + (b * T + t) * V, so_far, t + 1, want);
            for (int v = 0; v < V; v++)
                total += want[v] == -INFINITY ? 0.0 : exp(want[v] / 0.7);
            const float *p = got->probs + (b * T + t) * V;
            for (int v = 0; v < V; v++) {
                double q = want[v] == -INFINITY ? 0.0 : exp(want[v] / 0.7) / total;
                ck_assert_msg(fabs(p[v] - q) <= 1e-5, "%s: source %d step %d token %d: p %g, "
                              "by hand %g", c->name, b, t, v, (double)p[v], q);
            }
            int32_t token = so_far[t + 1];
            ck_assert_msg(p[token] > 0.0f, "%s: drew token %d of probability 0", c->name,
                          (int)token);
            int end = token == EOS || in(c->eos, c->n_eos, token);
            int last = t + 2 == got->lengths[b];
            ck_assert_msg(end ? last : !last || got->lengths[b] == limit_of(c, b) + 1,
                          "%s: source %d ends at %d, token %d", c->name, b, got->lengths[b],
                          (int)token);
        }
    }
    free(r);
}
END_TEST

/* Greedy's scores stay the model's: the sum of its log probabilities of
 * the chosen tokens, read from the logits it returns, processors or not. */
START_TEST(greedy_scores_are_the_models)
{
    const decode_case *c = &decode_cases[DECODE_CASES - 1]; /* every processor */
    tfm_decode_options o;
    case_options(&o, c, TFM_DECODE_GREEDY, 1);
    result *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    tfm_tensor *prefix = case_prefix(c);
    decode(&o, prefix, r);
    tfm_tensor_free(prefix);
    for (int b = 0; b < B; b++) {
        double sum = 0.0;
        for (int t = 0; t + 1 < r->lengths[b]; t++) {
            const float *l = r->logits + (b * T + t) * V;
            double total = 0.0;
            for (int v = 0; v < V; v++)
                total += exp(l[v]);
            sum += l[r->tokens[b * T1 + t + 1]] - log(total);
        }
        ck_assert_msg(fabs(sum - r->scores[b]) <= 1e-4 * (1.0 + fabs(sum)),
                      "source %d: score %g, the model's %g", b, (double)r->scores[b], sum);
    }
    free(r);
}
END_TEST

/* The decoding copies suppress_ids, eos_ids and the bad words at creation:
 * the caller's arrays changed afterwards change nothing. */
START_TEST(token_lists_are_copied)
{
    int32_t suppress[2] = {0, 9}, eos[1] = {10}, words[2] = {8, 8}, lengths[1] = {2};
    tfm_decode_options o;
    case_options(&o, &decode_cases[0], TFM_DECODE_GREEDY, 1);
    o.suppress_ids = suppress;
    o.n_suppress_ids = 2;
    o.eos_ids = eos;
    o.n_eos_ids = 1;
    o.bad_words = words;
    o.bad_word_lengths = lengths;
    o.n_bad_words = 1;
    result *r = malloc(2 * sizeof *r);
    ck_assert_ptr_nonnull(r);
    decode(&o, NULL, &r[0]);
    tfm_decoding *d = tfm_decoding_create(model, &o, B, S);
    ck_assert_msg(d, "%s", tfm_last_error());
    suppress[0] = suppress[1] = 3;
    eos[0] = 5;
    words[0] = words[1] = 5;
    lengths[0] = 1;
    memset(&r[1], 0, sizeof r[1]);
    ck_assert_int_eq(tfm_decoding_run(d, src, r[1].tokens, COUNT(r[1].tokens), r[1].lengths,
                                      COUNT(r[1].lengths), NULL, 0, NULL, 0, NULL, 0),
                     TFM_OK);
    tfm_decoding_free(d);
    ck_assert_mem_eq(r[0].tokens, r[1].tokens, sizeof r[0].tokens);
    free(r);
}
END_TEST

/* A caller compiled before the processors (a struct ending at use_cache)
 * gets none, whatever lies past its struct. */
START_TEST(an_older_struct_gets_no_processors)
{
    tfm_decode_options o;
    case_options(&o, &decode_cases[DECODE_CASES - 1], TFM_DECODE_GREEDY, 1);
    o.struct_size = (uint32_t)offsetof(tfm_decode_options, min_length);
    result *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    decode(&o, NULL, r);
    for (int b = 0; b < B; b++)
        expect_tokens(r->tokens + b * T1, decode_cases[0].greedy[b], T1, "older struct", b);
    free(r);
}
END_TEST

START_TEST(out_of_range_options_are_named)
{
    static const int32_t too_big[2] = {3, V}, negative[1] = {-1};
    static const struct {
        int field;
        double value;
        const int32_t *ids;
        const char *text;
    } bad[] = {
        {0, -1, NULL, "min_length -1"},
        {0, T + 1, NULL, "min_length 13"},
        {1, 0, NULL, "repetition_penalty 0"},
        {1, -1, NULL, "repetition_penalty -1"},
        {1, INFINITY, NULL, "repetition_penalty inf"},
        {1, NAN, NULL, "repetition_penalty"},
        {2, -1, NULL, "no_repeat_ngram_size -1"},
        {3, 2, too_big, "suppress_ids[1] is 11"},
        {3, 1, negative, "suppress_ids[0] is -1"},
        {3, 1, NULL, "n_suppress_ids is 1"},
        {3, -1, NULL, "n_suppress_ids is -1"},
        {4, 2, too_big, "eos_ids[1] is 11"},
        {4, 1, negative, "eos_ids[0] is -1"},
        {4, 1, NULL, "n_eos_ids is 1"},
        {4, -2, too_big, "n_eos_ids is -2"},
        {5, -0.5, NULL, "max_length_a -0.5"},
        {5, INFINITY, NULL, "max_length_a inf"},
        {6, 0, NULL, "max_length_b 0"},
        {7, -2, NULL, "forced_bos_id -2"},
        {7, V, NULL, "forced_bos_id 11"},
        {8, 0, NULL, "patience 0"},
        {8, 65, NULL, "patience 65"},
        {8, NAN, NULL, "patience"},
        {9, 1, NULL, "n_bad_words is 1"},
        {9, -1, NULL, "n_bad_words is -1"},
        {10, 0, NULL, "bad_word_lengths[1] is 0"},
        {11, V, NULL, "bad_words[2] is 11"},
        {12, -2, NULL, "forced_eos_id -2"},
        {12, V, NULL, "forced_eos_id 11"},
        {13, 2, NULL, "beam_rules 2"},
        {14, 3, NULL, "early_stopping 3"},
        {15, 2, NULL, "renormalize_logits 2"},
        {16, 3, NULL, "cache_precision 3"},
        {16, -1, NULL, "cache_precision -1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tfm_decode_options o;
        case_options(&o, &decode_cases[0], TFM_DECODE_GREEDY, 1);
        switch (bad[i].field) {
        case 0: o.min_length = (int32_t)bad[i].value; break;
        case 1: o.repetition_penalty = (float)bad[i].value; break;
        case 2: o.no_repeat_ngram_size = (int32_t)bad[i].value; break;
        case 3: o.suppress_ids = bad[i].ids, o.n_suppress_ids = (int32_t)bad[i].value; break;
        case 4: o.eos_ids = bad[i].ids, o.n_eos_ids = (int32_t)bad[i].value; break;
        case 5: o.max_length_a = (float)bad[i].value; break;
        case 6: o.max_length_b = (int32_t)bad[i].value; break;
        case 7: o.forced_bos_id = (int32_t)bad[i].value; break;
        case 8: o.patience = (float)bad[i].value; break;
        case 9: o.n_bad_words = (int32_t)bad[i].value; break;
        case 12: o.forced_eos_id = (int32_t)bad[i].value; break;
        case 13: o.beam_rules = (int32_t)bad[i].value; break;
        case 14: o.early_stopping = (int32_t)bad[i].value; break;
        case 15: o.renormalize_logits = (int32_t)bad[i].value; break;
        case 16: o.cache_precision = (int32_t)bad[i].value; break;
        default: { /* two words, one of them wrong */
            static int32_t words[3], lengths[2];
            words[0] = 3, words[1] = 4, words[2] = bad[i].field == 11 ? V : 5;
            lengths[0] = 2, lengths[1] = bad[i].field == 10 ? 0 : 1;
            o.bad_words = words, o.bad_word_lengths = lengths, o.n_bad_words = 2;
            break;
        }
        }
        tfm_clear_error();
        tfm_decoding *d = tfm_decoding_create(model, &o, B, S);
        ck_assert_msg(d == NULL, "created despite %s", bad[i].text);
        ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
        ck_assert_msg(strstr(tfm_last_error(), bad[i].text) &&
                          strstr(tfm_last_error(), "tfm_decoding_create"),
                      "'%s' not in '%s'", bad[i].text, tfm_last_error());
    }
}
END_TEST

/* What the callback saw, per source, and where it stops a source. */
typedef struct streamed {
    int32_t tokens[B][T1];
    int64_t count[B];
    int64_t stop_source, stop_after;
    int out_of_order;
} streamed;

static int stream(void *user, int64_t source, int32_t token, int64_t position)
{
    streamed *s = user;
    if (source < 0 || source >= B || position != s->count[source] + 1 || position >= T1) {
        s->out_of_order = 1;
        return 1;
    }
    s->tokens[source][s->count[source]++] = token;
    return source == s->stop_source && s->count[source] == s->stop_after;
}

/* The callback gets each source's output tokens in order (beam: its best
 * hypothesis'); returning non-zero after source 1's third token ends that
 * source there (greedy, sampling: the draws before it are the same) or
 * stops the calls (beam). _i: strategy, path. */
START_TEST(callback_streams_and_stops)
{
    tfm_decode_strategy strategy = (tfm_decode_strategy)(_i / 2);
    int beam = strategy == TFM_DECODE_BEAM, rows = beam ? DECODE_N_BEST : 1;
    tfm_decode_options o;
    case_options(&o, &decode_cases[0], strategy, _i % 2 == 0);
    o.seed = 9;
    o.callback = stream;
    result *r = malloc(2 * sizeof *r);
    streamed *s = calloc(2, sizeof *s);
    ck_assert(r && s);
    for (int run = 0; run < 2; run++) {
        s[run].stop_source = run ? 1 : -1;
        s[run].stop_after = 3;
        o.callback_user = &s[run];
        decode(&o, NULL, &r[run]);
        ck_assert(!s[run].out_of_order);
    }
    for (int b = 0; b < B; b++) {
        const int32_t *out = r[0].tokens + b * rows * T1;
        int64_t generated = r[0].lengths[b * rows] - 1;
        ck_assert_int_eq(s[0].count[b], generated);
        ck_assert_mem_eq(s[0].tokens[b], out + 1, (size_t)generated * sizeof *out);
    }
    ck_assert_int_eq(s[1].count[1], 3);
    ck_assert_mem_eq(s[1].tokens[1], s[0].tokens[1], 3 * sizeof(int32_t));
    if (beam) { /* the outputs are final before the calls */
        ck_assert_mem_eq(r[1].tokens, r[0].tokens, sizeof r[0].tokens);
    } else {
        ck_assert_int_eq(r[1].lengths[1], 4);
        ck_assert_mem_eq(r[1].tokens + T1, r[0].tokens + T1, 4 * sizeof(int32_t));
        ck_assert_int_eq(r[1].tokens[T1 + 4], -1);
        if (strategy == TFM_DECODE_GREEDY) /* sampling's later draws shift */
            for (int b = 0; b < B; b += 2)
                ck_assert_mem_eq(r[1].tokens + b * T1, r[0].tokens + b * T1,
                                 T1 * sizeof(int32_t));
    }
    free(s);
    free(r);
}
END_TEST

/* The decoding a callback runs again, and what that run returned. */
typedef struct reentry {
    tfm_decoding *decoding;
    tfm_status status;
    char message[256];
} reentry;

static int run_again(void *user, int64_t source, int32_t token, int64_t position)
{
    (void)source, (void)token, (void)position;
    reentry *e = user;
    result *inner = malloc(sizeof *inner);
    ck_assert_ptr_nonnull(inner);
    e->status = tfm_decoding_run(e->decoding, src, inner->tokens, COUNT(inner->tokens),
                                 inner->lengths, COUNT(inner->lengths), NULL, 0, NULL, 0,
                                 NULL, 0);
    snprintf(e->message, sizeof e->message, "%s", tfm_last_error());
    free(inner);
    return 0;
}

/* A callback that runs the decoding calling it is refused (its run would
 * overwrite the caches and state of the run in progress), and the outer
 * run's tokens are those of a run without the callback. _i: strategy. */
START_TEST(callback_cannot_rerun_its_decoding)
{
    tfm_decode_options o;
    case_options(&o, &decode_cases[0], (tfm_decode_strategy)_i, 1);
    o.seed = 9;
    result *r = calloc(2, sizeof *r);
    ck_assert_ptr_nonnull(r);
    decode(&o, NULL, &r[0]);
    reentry e = {NULL, TFM_OK, ""};
    o.callback = run_again;
    o.callback_user = &e;
    e.decoding = tfm_decoding_create(model, &o, B, S);
    ck_assert_msg(e.decoding, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_decoding_run(e.decoding, src, r[1].tokens, COUNT(r[1].tokens),
                                      r[1].lengths, COUNT(r[1].lengths), NULL, 0, NULL, 0,
                                      NULL, 0),
                     TFM_OK);
    ck_assert_int_eq(e.status, TFM_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(e.message, "tfm_decoding_run: the decoding is already running"));
    ck_assert_mem_eq(r[1].tokens, r[0].tokens, sizeof r[0].tokens);
    ck_assert_mem_eq(r[1].lengths, r[0].lengths, sizeof r[0].lengths);
    tfm_decoding_free(e.decoding);
    free(r);
}
END_TEST

/* A source whose every token is banned (forced_bos_id suppressed) ends
 * before the first step: bos alone (greedy, sampling: nothing drawn, no
 * logits or probabilities written), no hypothesis (beam). _i: strategy,
 * path. */
START_TEST(every_token_banned_ends_the_source)
{
    tfm_decode_strategy strategy = (tfm_decode_strategy)(_i / 2);
    static const int32_t forced[1] = {4};
    tfm_decode_options o;
    case_options(&o, &decode_cases[0], strategy, _i % 2 == 0);
    o.forced_bos_id = forced[0];
    o.suppress_ids = forced;
    o.n_suppress_ids = 1;
    result *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    decode(&o, NULL, r);
    int beam = strategy == TFM_DECODE_BEAM, rows = beam ? B * DECODE_N_BEST : B;
    for (int i = 0; i < rows; i++) {
        ck_assert_int_eq(r->lengths[i], (beam ? 0 : 1));
        ck_assert_int_eq(r->tokens[i * T1], (beam ? -1 : BOS));
        for (int j = 1; j < T1; j++)
            ck_assert_int_eq(r->tokens[i * T1 + j], -1);
    }
    for (int i = 0; !beam && i < B * T * V; i++)
        ck_assert(r->logits[i] == 0.0f && r->probs[i] == 0.0f);
    free(r);
}
END_TEST

/* forced_eos_id is the last token of every source that reaches its own
 * limit (max_length_b here), under greedy decoding and both beam rules;
 * a source that ends earlier ends with eos. */
START_TEST(forced_eos_ends_each_source_at_its_limit)
{
    enum { LIMIT = 3, FORCED = 7 };
    tfm_decode_options o;
    case_options(&o, &decode_cases[0], _i == 0 ? TFM_DECODE_GREEDY : TFM_DECODE_BEAM, 1);
    o.beam_rules = _i == 2 ? TFM_BEAM_RULES_TRANSFORMERS : TFM_BEAM_RULES_CTRANSLATE2;
    o.max_length_b = LIMIT;
    o.n_suppress_ids = o.n_bad_words = 0;
    o.forced_eos_id = FORCED;
    result *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    decode(&o, NULL, r);
    int rows = _i == 0 ? B : B * DECODE_N_BEST, forced = 0;
    for (int i = 0; i < rows; i++) {
        int length = r->lengths[i], last = length > 0 ? r->tokens[i * T1 + length - 1] : -1;
        ck_assert_int_le(length, LIMIT + 1);
        if (length == LIMIT + 1 && last == FORCED)
            forced++;
        else if (length > 0)
            ck_assert_msg(last == o.eos_id, "row %d ends with %d after %d tokens", i, last,
                          length);
    }
    ck_assert_int_gt(forced, 0);
    free(r);
}
END_TEST

/* A prefix refused writes nothing; each refusal names what is wrong. */
START_TEST(prefix_errors)
{
    tfm_decode_options o;
    case_options(&o, &decode_cases[0], TFM_DECODE_GREEDY, 1);
    tfm_decoding *d = tfm_decoding_create(model, &o, B, S);
    ck_assert_msg(d, "%s", tfm_last_error());
    static const int32_t out_of_range[B * 2] = {3, 4, 5, V, 6, 7};
    static const int32_t after_padding[B * 2] = {3, 4, -1, 5, 6, 7};
    static const int32_t below[B * 2] = {3, 4, -2, -1, 6, 7};
    static const int32_t too_long[B * (T + 1)] = {0};
    const struct {
        tfm_tensor *prefix;
        tfm_status status;
        const char *text;
    } bad[] = {
        {tfm_tensor_from_i32(2, (const int64_t[]){B, 2}, out_of_range), TFM_ERR_RANGE,
         "prefix[1,1] is 11"},
        {tfm_tensor_from_i32(2, (const int64_t[]){B, 2}, after_padding), TFM_ERR_RANGE,
         "prefix[1,1] is 5; it must be a target token id (below 11), not after a -1"},
        {tfm_tensor_from_i32(2, (const int64_t[]){B, 2}, below), TFM_ERR_RANGE,
         "prefix[1,0] is -2"},
        {tfm_tensor_from_i32(2, (const int64_t[]){B, T + 1}, too_long), TFM_ERR_SHAPE,
         "at most max_length 12"},
        {tfm_tensor_from_i32(2, (const int64_t[]){B - 1, 2}, out_of_range), TFM_ERR_SHAPE,
         "must be [batch 3"},
        {tfm_tensor_from_i32(1, (const int64_t[]){B}, out_of_range), TFM_ERR_SHAPE, "prefix"},
    };
    int32_t tokens[B * T1], lengths[B];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(tokens, 0x5a, sizeof tokens);
        memset(lengths, 0x5a, sizeof lengths);
        ck_assert_int_eq(tfm_decoding_run_with_prefix(d, src, bad[i].prefix, tokens, B * T1,
                                                      lengths, B, NULL, 0, NULL, 0, NULL, 0),
                         bad[i].status);
        ck_assert_msg(strstr(tfm_last_error(), bad[i].text) &&
                          strstr(tfm_last_error(), "tfm_decoding_run_with_prefix"),
                      "'%s' not in '%s'", bad[i].text, tfm_last_error());
        for (int j = 0; j < B * T1; j++)
            ck_assert_int_eq(tokens[j], 0x5a5a5a5a);
        for (int j = 0; j < B; j++)
            ck_assert_int_eq(lengths[j], 0x5a5a5a5a);
        tfm_tensor_free(bad[i].prefix);
    }
    /* the run's own checks name the call made too, not tfm_decoding_run */
    tfm_tensor *prefix = tfm_tensor_from_i32(2, (const int64_t[]){B, 2}, after_padding);
    ck_assert_int_eq(tfm_decoding_run_with_prefix(d, src, prefix, NULL, 0, lengths, B, NULL, 0,
                                                  NULL, 0, NULL, 0),
                     TFM_ERR_NULL);
    ck_assert_str_eq(tfm_last_error(), "tfm_decoding_run_with_prefix: tokens is NULL");
    ck_assert_int_eq(tfm_decoding_run_with_prefix(d, src, NULL, tokens, B * T1 - 1, lengths, B,
                                                  NULL, 0, NULL, 0, NULL, 0),
                     TFM_ERR_SIZE);
    ck_assert_msg(strncmp(tfm_last_error(), "tfm_decoding_run_with_prefix: tokens holds", 42) == 0,
                  "%s", tfm_last_error());
    tfm_tensor_free(prefix);
    tfm_decoding_free(d);
}
END_TEST

static const decode_case *case_named(const char *name)
{
    for (int i = 0; i < DECODE_CASES; i++)
        if (strcmp(decode_cases[i].name, name) == 0)
            return &decode_cases[i];
    ck_abort_msg("no decode case %s", name);
    return NULL;
}

/* Each output's alignments are PyTorch's over its tokens (the last decoder
 * layer's cross-attention weights, averaged over the heads), a row per
 * generated token, the padded source keys 0. _i: aligned case, strategy
 * (greedy, beam), path (cached, recomputed). */
START_TEST(alignments_match_the_forward)
{
    const decode_case *c = case_named(aligned_cases[_i / 4]);
    int beam = _i / 2 % 2, use_cache = _i % 2 == 0, rows = beam ? DECODE_N_BEST : 1;
    tfm_decode_options o;
    case_options(&o, c, beam ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY, use_cache);
    o.return_attention = 1;
    result *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    tfm_tensor *prefix = case_prefix(c);
    tfm_decoding *d = decode_kept(&o, prefix, r);
    tfm_tensor_free(prefix);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < rows; h++) {
            int hyp = b * rows + h;
            const int32_t *want_tokens = beam ? c->beam[b][h] : c->greedy[b];
            const float(*want)[S] = beam ? aligned_beam[_i / 4][b][h] : aligned_greedy[_i / 4][b];
            expect_tokens(r->tokens + hyp * T1, want_tokens, T1, c->name, hyp);
            float got[T * S];
            int64_t target = -1, source = -1;
            ck_assert_msg(tfm_decoding_attention(d, hyp, got, COUNT(got), &target, &source) ==
                              TFM_OK,
                          "%s", tfm_last_error());
            /* a hypothesis beam search did not find (length 0) has none */
            ck_assert_int_eq(target, r->lengths[hyp] > 0 ? r->lengths[hyp] - 1 : 0);
            ck_assert_int_eq(source, S);
            for (int64_t i = 0; i < target; i++)
                for (int s = 0; s < S; s++)
                    ck_assert_msg(fabsf(got[i * S + s] - want[i][s]) < 2e-6f,
                                  "%s, %s, %s, hypothesis %d: weight [%lld, %d] is %.7g, "
                                  "PyTorch's %.7g", c->name, beam ? "beam" : "greedy",
                                  use_cache ? "cached" : "recomputed", hyp, (long long)i, s,
                                  (double)got[i * S + s], (double)want[i][s]);
        }
    tfm_decoding_free(d);
    free(r);
}
END_TEST

/* The getter refuses a decoding without return_attention (an older
 * struct's too), one not yet run, a hypothesis outside the run and a
 * buffer too small; sizes alone with out NULL. */
START_TEST(alignment_errors)
{
    tfm_decode_options o;
    case_options(&o, &decode_cases[0], TFM_DECODE_BEAM, 1);
    o.return_attention = 1;
    o.struct_size = (uint32_t)offsetof(tfm_decode_options, return_attention);
    result *r = malloc(sizeof *r);
    ck_assert_ptr_nonnull(r);
    tfm_decoding *d = decode_kept(&o, NULL, r);
    float out[T * S];
    ck_assert_int_eq(tfm_decoding_attention(d, 0, out, COUNT(out), NULL, NULL), TFM_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_decoding_attention: the decoding was "
                                                   "created without return_attention"));
    tfm_decoding_free(d);
    o.struct_size = sizeof o;
    d = tfm_decoding_create(model, &o, B, S);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(tfm_decoding_attention(d, 0, out, COUNT(out), NULL, NULL), TFM_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "no run"));
    tfm_decoding_free(d);
    d = decode_kept(&o, NULL, r);
    int64_t target = -1, source = -1;
    ck_assert_int_eq(tfm_decoding_attention(d, 0, NULL, 0, &target, &source), TFM_OK);
    ck_assert_int_eq(target, r->lengths[0] - 1);
    ck_assert_int_eq(source, S);
    ck_assert_int_eq(tfm_decoding_attention(d, 0, out, target * S - 1, NULL, NULL),
                     TFM_ERR_SIZE);
    ck_assert_int_eq(tfm_decoding_attention(d, B * DECODE_N_BEST, out, COUNT(out), NULL, NULL),
                     TFM_ERR_ARG);
    ck_assert_int_eq(tfm_decoding_attention(d, -1, out, COUNT(out), NULL, NULL), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_decoding_attention(NULL, 0, out, COUNT(out), NULL, NULL),
                     TFM_ERR_NULL);
    tfm_decoding_free(d);
    o.return_attention = 2;
    ck_assert_ptr_null(tfm_decoding_create(model, &o, B, S));
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "return_attention must be 0 or 1"));
    free(r);
}
END_TEST

/* The log of the sum of exp(x[v]) over the finite x [V], in double. */
static double log_sum_exp_by_hand(const double *x)
{
    double total = 0.0;
    for (int v = 0; v < V; v++)
        total += x[v] == -INFINITY ? 0.0 : exp(x[v]);
    return log(total);
}

/* Beam search's scores, as transformers' generate makes them: at each
 * step the log_softmax of the logits, the processors, then with
 * renormalize_logits a log_softmax again (LogitNormalization, last); the
 * chosen tokens' values summed and divided by the length ** length_penalty
 * (CTranslate2's rules: the tokens generated; transformers': bos_id too,
 * not the end token). By hand over the model's logits along each
 * hypothesis (a greedy run forced along it by a prefix), for a case with
 * banned tokens. With renormalize_logits the scores move (by more than
 * 1e-3 for some hypothesis); greedy decoding and sampling do not change.
 * _i: case (bad words, suppressed tokens), renormalize_logits, rules,
 * path. */
START_TEST(beam_scores_renormalized)
{
    static const char *const names[] = {"bad_words", "suppress"};
    const decode_case *c = case_named(names[_i / 8]);
    int renormalize = _i / 4 % 2, transformers = _i / 2 % 2, use_cache = _i % 2 == 0;
    tfm_decode_options o;
    case_options(&o, c, TFM_DECODE_BEAM, use_cache);
    o.renormalize_logits = renormalize;
    o.beam_rules = transformers ? TFM_BEAM_RULES_TRANSFORMERS : TFM_BEAM_RULES_CTRANSLATE2;
    result *r = malloc(3 * sizeof *r);
    ck_assert_ptr_nonnull(r);
    decode(&o, NULL, &r[0]);
    double moved = 0.0;
    for (int h = 0; h < DECODE_N_BEST; h++) {
        int32_t forced[B * T];
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                int hyp = b * DECODE_N_BEST + h;
                forced[b * T + t] = t + 1 < r[0].lengths[hyp] ? r[0].tokens[hyp * T1 + t + 1] : -1;
            }
        tfm_tensor *prefix = tfm_tensor_from_i32(2, (const int64_t[]){B, T}, forced);
        tfm_decode_options g;
        case_options(&g, c, TFM_DECODE_GREEDY, 1);
        decode(&g, prefix, &r[1]);
        tfm_tensor_free(prefix);
        for (int b = 0; b < B; b++) {
            int hyp = b * DECODE_N_BEST + h, length = r[0].lengths[hyp];
            const int32_t *so_far = r[0].tokens + hyp * T1;
            if (length == 0) /* no such hypothesis */
                continue;
            double plain = 0.0, renormalized = 0.0;
            for (int t = 0; t + 1 < length; t++) {
                const float *l = r[1].logits + (b * T + t) * V;
                double x[V], out[V];
                float logp[V];
                for (int v = 0; v < V; v++)
                    x[v] = l[v];
                double lse = log_sum_exp_by_hand(x);
                for (int v = 0; v < V; v++)
                    logp[v] = (float)(l[v] - lse);
                processed_by_hand(c, b, logp, so_far, t + 1, out);
                plain += out[so_far[t + 1]];
                renormalized += out[so_far[t + 1]] - log_sum_exp_by_hand(out);
            }
            int32_t last = so_far[length - 1];
            int ended = last == EOS || in(c->eos, c->n_eos, last);
            int counted = transformers ? length - ended : length - 1;
            double norm = pow(counted, o.length_penalty);
            double want = (renormalize ? renormalized : plain) / norm;
            /* float32 log probabilities over at most 12 steps: 1.8e-7 apart at most */
            ck_assert_msg(fabs(r[0].scores[hyp] - want) <= 1e-6 * (1.0 + fabs(want)),
                          "%s, renormalize %d, %s rules, %s, hypothesis %d: score %.9g, by "
                          "hand %.9g", c->name, renormalize,
                          transformers ? "transformers'" : "CTranslate2's",
                          use_cache ? "cached" : "recomputed", hyp, (double)r[0].scores[hyp],
                          want);
            moved = fmax(moved, fabs(renormalized - plain) / norm);
        }
    }
    ck_assert_msg(moved > 1e-3, "%s: renormalizing moves no score (%g)", c->name, moved);
    for (tfm_decode_strategy strategy = TFM_DECODE_GREEDY; strategy <= TFM_DECODE_SAMPLE;
         strategy++) {
        case_options(&o, c, strategy, use_cache);
        decode(&o, NULL, &r[1]);
        o.renormalize_logits = 1;
        decode(&o, NULL, &r[2]);
        ck_assert_mem_eq(&r[1], &r[2], sizeof r[1]);
    }
    free(r);
}
END_TEST

static Suite *decode_options_suite(void)
{
    Suite *s = suite_create("decode_options");
    TCase *c = tcase_create("decode_options");
    tcase_set_timeout(c, 120);
    tcase_add_checked_fixture(c, setup, teardown);
    tcase_add_loop_test(c, greedy_and_beam_match_generate, 0, 4 * DECODE_CASES);
    tcase_add_loop_test(c, sampling_draws_from_the_processed_logits, 0, DECODE_CASES);
    tcase_add_test(c, greedy_scores_are_the_models);
    tcase_add_test(c, token_lists_are_copied);
    tcase_add_test(c, an_older_struct_gets_no_processors);
    tcase_add_test(c, out_of_range_options_are_named);
    tcase_add_test(c, prefix_errors);
    tcase_add_loop_test(c, forced_eos_ends_each_source_at_its_limit, 0, 3);
    tcase_add_loop_test(c, callback_streams_and_stops, 0, 6);
    tcase_add_loop_test(c, callback_cannot_rerun_its_decoding, 0, 3);
    tcase_add_loop_test(c, every_token_banned_ends_the_source, 0, 6);
    tcase_add_loop_test(c, alignments_match_the_forward, 0, 4 * ALIGNED_CASES);
    tcase_add_test(c, alignment_errors);
    tcase_add_loop_test(c, beam_scores_renormalized, 0, 16);
    suite_add_tcase(s, c);
    return s;
}

TFM_CHECK_MAIN(decode_options_suite)
