/* Decoding: the cached decoder against the recomputing one and against
 * tfm_model_decode run here step by step on unpadded sources; greedy, eos
 * and max_length; sampling's seeds, temperature, top-k and top-p, down to
 * the frequencies of many draws; beam search against greedy and against an
 * exhaustive search; the model's mode; every error path; a batch encoded in
 * slices, and the memory that spares; the run's encoding on packed weights
 * against the model's (the decoding's internals: decode/decode.h). */
#include <check.h>
#include <math.h>
#include <sys/resource.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "core/gemm_int8.h"
#include "decode/decode.h"
#include "model/model.h"
#include "nn/layer.h"
#include "ops/softmax.h"
#include <tfm/tfm.h>

enum { PAD = 0, BOS = 1, EOS = 2, MAXT = 16, MAXS = 12, ROOM = 256 * MAXT };

/* Small models of every configuration the decoder supports. */
enum {
    PLAIN, TUTORIAL_003, PRE_NORM, NO_DECODER_LAYERS, MARIAN, MBART, M2M100, RMS, T5,
    T5_ORIGINAL, KINDS
};
static const char *const kind_name[KINDS] = {"plain", "tutorial 003", "pre-norm",
                                             "no decoder layers", "Marian's pieces",
                                             "mBART's pieces", "M2M100's pieces",
                                             "RMS norms", "T5 v1.1's pieces",
                                             "original T5's pieces"};

/* The target vocabulary: the source's when the embeddings are shared. */
static int64_t vocab_of(int kind)
{
    return kind == PRE_NORM || kind == MARIAN || kind == T5_ORIGINAL ? 13 : 11;
}

static float *param(tfm_model *m, const char *name)
{
    tfm_tensor *t = tfm_params_find(tfm_model_params(m), name);
    ck_assert_msg(t != NULL, "no parameter %s", name);
    return tfm_tensor_data_f32(t);
}

/* Subtracts from the generator's bias the mean logit of each token over
 * pseudo-random targets for a few sources. */
static void center_logits(tfm_model *m, int64_t V, int64_t T)
{
    enum { B = 4, S = 6 };
    int32_t src_ids[B * S], tgt_ids[B * MAXT];
    for (int i = 0; i < B * S; i++)
        src_ids[i] = 1 + (i * 5 + 3) % 12;
    for (int i = 0; i < B * T; i++)
        tgt_ids[i] = (int32_t)((i * 7 + i / 3) % V);
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){B, S}, src_ids);
    tfm_tensor *tgt = tfm_tensor_from_i32(2, (const int64_t[]){B, T}, tgt_ids);
    tfm_tape *tape = tfm_tape_create();
    tfm_tape_set_recording(tape, 0);
    tfm_model_set_training(m, 0);
    tfm_tensor *logits = tfm_model_forward(tape, m, src, tgt, NULL,
                                           tfm_mask_causal(tape, T, TFM_I32), NULL, NULL, NULL, NULL);
    ck_assert_msg(logits != NULL, "%s", tfm_last_error());
    const float *l = tfm_tensor_data_f32(logits);
    float *bias = param(m, "generator.bias");
    for (int64_t v = 0; v < V; v++) {
        double mean = 0.0;
        for (int64_t i = 0; i < B * T; i++)
            mean += l[i * V + v];
        bias[v] -= (float)(mean / (B * T));
    }
    tfm_model_set_training(m, 1);
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
}

static tfm_model *make_model(int kind, int64_t tgt_vocab, int64_t max_tgt_len)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = 13;
    o.tgt_vocab = tgt_vocab;
    o.max_src_len = MAXS;
    o.max_tgt_len = max_tgt_len;
    o.encoder_layers = 2;
    o.decoder_layers = 2;
    o.d_model = 16;
    o.heads = 2;
    o.d_ff = 32;
    o.dropout = 0.1f; /* decoding must switch it off */
    o.seed = 11 + (uint64_t)kind;
    if (kind == TUTORIAL_003) {
        o.positions = TFM_POSITIONS_LEARNED;
        o.embedding_scale = TFM_EMBEDDING_SCALE_TRAINABLE;
        o.final_norm = 0;
        o.fused_qkv = 0;
        o.trainable_scale = 1;
    } else if (kind == PRE_NORM) {
        o.norm_first = 1;
        o.activation = TFM_ACTIVATION_GELU;
        o.bias = 0;
        o.embedding_scale = TFM_EMBEDDING_SCALE_SQRT_D;
        o.share_embeddings = 1;
        o.tgt_vocab = o.src_vocab;
    } else if (kind == NO_DECODER_LAYERS) {
        o.decoder_layers = 0;
    } else if (kind == MARIAN) {
        o.positions = TFM_POSITIONS_SINUSOIDAL_HALVES;
        o.activation = TFM_ACTIVATION_SILU;
        o.embedding_scale = TFM_EMBEDDING_SCALE_SQRT_D;
        o.share_embeddings = 1;
        o.tgt_vocab = o.src_vocab;
        o.tie_generator = 1;
        o.fused_qkv = 0;
        o.final_norm = 0;
    } else if (kind == MBART) {
        o.norm_first = 1;
        o.positions = TFM_POSITIONS_LEARNED;
        o.position_offset = 2;
        o.embedding_norm = 1;
        o.activation = TFM_ACTIVATION_GELU_TANH;
        o.feed_forward_bias = 0;
        o.fused_qkv = 0;
    } else if (kind == RMS) {
        o.norm_first = 1;
        o.rms_norm = 1;
        o.embedding_norm = 1;
        o.bias = 0;
        o.feed_forward_bias = 0;
    } else if (kind == T5 || kind == T5_ORIGINAL) {
        o.norm_first = 1;
        o.rms_norm = 1;
        o.bias = 0;
        o.feed_forward_bias = 0;
        o.fused_qkv = 0;
        o.positions = TFM_POSITIONS_NONE;
        o.unscaled_attention = 1;
        if (kind == T5) { /* v1.1: gated GELU, its own output projection */
            o.head_dim = 5; /* d_kv: an inner width of 10, not d_model's 16 */
            o.gated_feed_forward = 1;
            o.activation = TFM_ACTIVATION_GELU_TANH;
            /* MAXT 16 reaches the logarithmic buckets and the last one */
            o.relative_attention_buckets = 8;
            o.relative_attention_max_distance = 10;
        } else { /* the original: relu, tied and rescaled output */
            o.relative_attention_buckets = 10;
            o.relative_attention_max_distance = 12;
            o.share_embeddings = 1;
            o.tgt_vocab = o.src_vocab;
            o.tie_generator = 1;
            o.generator_rescale = 1;
        }
    } else if (kind == M2M100) {
        o.norm_first = 1;
        o.positions = TFM_POSITIONS_SINUSOIDAL_FAIRSEQ;
        o.position_offset = 2;
        o.embedding_scale = TFM_EMBEDDING_SCALE_SQRT_D;
        o.activation = TFM_ACTIVATION_RELU;
    }
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    if (o.tie_generator) {
        /* N(0, 1) embeddings as the generator spread the logits so far
         * that eos never wins: trained tables are far smaller */
        float *table = param(m, "src_embedding.weight");
        for (int64_t i = 0; i < o.src_vocab * o.d_model; i++)
            table[i] *= 0.1f;
    }
    /* Freshly initialised, every context prefers the same few tokens: centre
     * each token's logit over a batch of contexts, so that the choice
     * depends on the context, and make eos likely enough that sequences
     * end at different steps. */
    center_logits(m, o.tgt_vocab, max_tgt_len < 10 ? max_tgt_len : 10);
    param(m, "generator.bias")[EOS] += 0.25f;
    return m;
}

/* Three sources, two of them padded. */
static tfm_tensor *padded_sources(void)
{
    static const int32_t ids[3 * 8] = {3, 4, 5, 6, 7, 8, 9, 10,
                                       5, 6, 2, 9, 0, 0, 0, 0,
                                       7, 1, 3, 0, 0, 0, 0, 0};
    return tfm_tensor_from_i32(2, (const int64_t[]){3, 8}, ids);
}

static const int32_t source_length[3] = {8, 4, 3};

typedef struct result {
    int32_t tokens[ROOM], lengths[256];
    float scores[256], logits[64 * MAXT * 13], probs[64 * MAXT * 13];
} result;

/* A result's buffers with their sizes, for tfm_decoding_run. */
#define COUNT(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))
#define TOKENS(r) (r)->tokens, COUNT((r)->tokens), (r)->lengths, COUNT((r)->lengths)
#define SCORES(r) (r)->scores, COUNT((r)->scores)
#define LOGITS(r) (r)->logits, COUNT((r)->logits)
#define PROBS(r) (r)->probs, COUNT((r)->probs)
#define NONE NULL, 0

static result *new_result(void)
{
    result *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    return r;
}

/* Decodes src with the options; logits and probs unless beam search. */
static void decode(tfm_model *m, const tfm_decode_options *o, const tfm_tensor *src, result *r)
{
    tfm_decoding *d = tfm_decoding_create(m, o, tfm_tensor_dim(src, 0), tfm_tensor_dim(src, 1));
    ck_assert_msg(d != NULL, "%s", tfm_last_error());
    int beam = o->strategy == TFM_DECODE_BEAM;
    tfm_status s = tfm_decoding_run(d, src, TOKENS(r), SCORES(r), beam ? NULL : r->logits,
                                    COUNT(r->logits), beam ? NULL : r->probs, COUNT(r->probs));
    ck_assert_msg(s == TFM_OK, "%s", tfm_last_error());
    tfm_decoding_free(d);
}

static void options(tfm_decode_options *o, tfm_decode_strategy strategy, int32_t max_length)
{
    tfm_decode_options_init(o);
    o->strategy = strategy;
    o->max_length = max_length;
    o->src_pad_id = PAD;
}

static void assert_close(const float *a, const float *b, int64_t n, double tol, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)a[i] - (double)b[i]) <= tol * (1.0 + fabs((double)b[i])),
                      "%s[%lld]: %.8g vs %.8g", what, (long long)i, (double)a[i], (double)b[i]);
}

/* --- an independent reference: tfm_model_decode on one unpadded source ------- */

/* The logits [tgt_vocab] after the prefix, for source b of padded_sources()
 * without its padding (what the mask must amount to). */
static void reference_logits(tfm_model *m, tfm_tensor *src, int64_t b,
                             const int32_t *prefix, int64_t len, float *logits, int64_t V)
{
    tfm_model_set_training(m, 0);
    int64_t S = tfm_tensor_dim(src, 1), n = source_length[b];
    tfm_tensor *one = tfm_tensor_from_i32(2, (const int64_t[]){1, n},
                                          tfm_tensor_data_i32(src) + b * S);
    tfm_tensor *tgt = tfm_tensor_from_i32(2, (const int64_t[]){1, len}, prefix);
    tfm_tape *tape = tfm_tape_create();
    tfm_tape_set_recording(tape, 0);
    tfm_tensor *memory = tfm_model_encode(tape, m, one, NULL, NULL);
    tfm_tensor *out = tfm_model_decode(tape, m, tgt, memory, tfm_mask_causal(tape, len, TFM_I32),
                                       NULL, NULL, NULL);
    ck_assert_msg(out != NULL, "%s", tfm_last_error());
    memcpy(logits, tfm_tensor_data_f32(out) + (len - 1) * V, (size_t)V * sizeof *logits);
    tfm_tape_free(tape);
    tfm_tensor_free(one);
    tfm_tensor_free(tgt);
}

static double log_softmax_at(const float *l, int64_t V, int64_t v)
{
    double max = l[0], total = 0.0;
    for (int64_t i = 1; i < V; i++)
        max = l[i] > max ? l[i] : max;
    for (int64_t i = 0; i < V; i++)
        total += exp((double)l[i] - max);
    return (double)l[v] - max - log(total);
}

/* --- cached against recomputed --------------------------------------------------- */

START_TEST(cached_equals_recomputed)
{
    int kind = _i / 3;
    tfm_decode_strategy strategy = (tfm_decode_strategy)(_i % 3);
    tfm_model *m = make_model(kind, 11, MAXT);
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, strategy, MAXT - 1);
    o.seed = 5;
    o.temperature = 1.5f;
    o.top_k = 6;
    o.top_p = 0.9f;
    o.beam_size = 3;
    o.n_best = 3;
    o.length_penalty = 0.7f;
    result *cached = new_result(), *recomputed = new_result();
    decode(m, &o, src, cached);
    o.use_cache = 0;
    decode(m, &o, src, recomputed);
    int64_t rows = 3 * (strategy == TFM_DECODE_BEAM ? o.n_best : 1);
    int64_t V = vocab_of(kind);
    int64_t T1 = o.max_length + 1;
    int eos_seen = 0, ended_early = 0;
    for (int64_t r = 0; r < rows; r++) {
        ck_assert_msg(cached->lengths[r] == recomputed->lengths[r], "%s, strategy %d, row %lld: "
                      "length %d vs %d", kind_name[kind], (int)strategy, (long long)r,
                      cached->lengths[r], recomputed->lengths[r]);
        for (int64_t i = 0; i < T1; i++)
            ck_assert_msg(cached->tokens[r * T1 + i] == recomputed->tokens[r * T1 + i],
                          "%s, strategy %d: token %lld of row %lld", kind_name[kind],
                          (int)strategy, (long long)i, (long long)r);
        eos_seen |= cached->tokens[r * T1 + cached->lengths[r] - 1] == EOS;
        ended_early |= cached->lengths[r] < T1;
    }
    /* rows that end while others go on (greedy decoding of some of these
     * random models never chooses eos) */
    if (strategy != TFM_DECODE_GREEDY || kind == PLAIN || kind == TUTORIAL_003)
        ck_assert_msg(eos_seen && ended_early, "%s: no sequence ended with eos", kind_name[kind]);
    assert_close(cached->scores, recomputed->scores, rows, 1e-5, "scores");
    if (strategy != TFM_DECODE_BEAM) {
        assert_close(cached->logits, recomputed->logits, 3 * o.max_length * V, 1e-5, "logits");
        assert_close(cached->probs, recomputed->probs, 3 * o.max_length * V, 1e-5, "probs");
    }
    free(cached);
    free(recomputed);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* Decodes src with the options cached and recomputed: the same tokens and
 * lengths, scores within 1e-5 (and greedy logits, over logits_count).
 * Returns the longest sequence. */
static int32_t cached_matches_recomputed(tfm_model *m, tfm_decode_options *o,
                                         const tfm_tensor *src, int64_t logits_count)
{
    int64_t rows = tfm_tensor_dim(src, 0) * (o->strategy == TFM_DECODE_BEAM ? o->n_best : 1);
    result *cached = new_result(), *recomputed = new_result();
    o->use_cache = 1;
    decode(m, o, src, cached);
    o->use_cache = 0;
    decode(m, o, src, recomputed);
    int32_t longest = 0;
    for (int64_t r = 0; r < rows; r++) {
        ck_assert_int_eq(cached->lengths[r], recomputed->lengths[r]);
        longest = cached->lengths[r] > longest ? cached->lengths[r] : longest;
    }
    ck_assert_mem_eq(cached->tokens, recomputed->tokens,
                     (size_t)(rows * (o->max_length + 1)) * sizeof(int32_t));
    assert_close(cached->scores, recomputed->scores, rows, 1e-5, "scores");
    if (o->strategy != TFM_DECODE_BEAM)
        assert_close(cached->logits, recomputed->logits, logits_count, 1e-5, "logits");
    free(cached);
    free(recomputed);
    return longest;
}

/* Sequences longer than a cache tile (16 positions): beam hypotheses share
 * their parents' tiles, copy the one they write into if a sibling shares
 * it, and free the tiles of the hypotheses dropped; greedy rows fill tiles
 * of their own. eos is made unlikely, so that sequences go on. */
START_TEST(cached_equals_recomputed_past_a_tile)
{
    enum { LONG = 40 };
    tfm_decode_strategy strategy = _i ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY;
    tfm_model *m = make_model(TUTORIAL_003, 11, LONG + 1);
    param(m, "generator.bias")[EOS] -= 1.5f;
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, strategy, LONG);
    o.beam_size = o.n_best = 4;
    o.length_penalty = 0.7f;
    ck_assert_int_gt(cached_matches_recomputed(m, &o, src, 3 * LONG * 11), 2 * 16 + 1);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* n sources of len ids, 3 to 8 of them before their padding. */
static tfm_tensor *sources_padded_apart(int64_t n, int64_t len)
{
    int32_t *ids = malloc((size_t)(n * len) * sizeof *ids);
    ck_assert_ptr_nonnull(ids);
    for (int64_t b = 0; b < n; b++)
        for (int64_t s = 0; s < len; s++)
            ids[b * len + s] = s < 3 + b % 6 ? (int32_t)(3 + (b * 7 + s * 5) % 10) : PAD;
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){n, len}, ids);
    free(ids);
    ck_assert_ptr_nonnull(src);
    return src;
}

/* Enough sources to be decoded in groups (3 greedily, 10 with beams of 4,
 * for this small model), on two threads, some of them padded: the same as
 * the reference path. */
START_TEST(groups_equal_recomputed)
{
    tfm_decode_strategy strategy = _i ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY;
    tfm_model *m = make_model(TUTORIAL_003, 11, MAXT);
    tfm_tensor *src = sources_padded_apart(40, 8);
    tfm_decode_options o;
    options(&o, strategy, MAXT - 1);
    o.beam_size = o.n_best = 4;
    ck_assert_int_eq(tfm_set_num_threads(2), TFM_OK);
    cached_matches_recomputed(m, &o, src, 40 * (MAXT - 1) * 11);
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* Greedy's token and every score's log-sum-exp find a row's largest in
 * independent lanes: the first index of the largest as the one-compare-
 * at-a-time loop finds it, on rows shorter than a lane's sweep, a sweep
 * and a tail, with ties, zeros of both signs, -Inf, and NaN first (index
 * 0, a NaN sum) or later (passed over by the index; the sum is NaN). */
/* The next state of a 64-bit linear congruential generator (Knuth's
 * MMIX constants), which these tests' random rows draw from. */
static uint64_t next_random(uint64_t *state)
{
    return *state = *state * 6364136223846793005u + 1442695040888963407u;
}

static int64_t argmax_one_at_a_time(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t j = 1; j < n; j++)
        if (x[j] > x[best])
            best = j;
    return best;
}

START_TEST(the_largest_found_in_lanes_is_the_loops)
{
    static const int64_t ns[] = {1, 2, 63, 64, 65, 128, 129, 200, 8000};
    float *x = malloc(8000 * sizeof *x);
    uint64_t seed = 12345;
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; a++)
        for (int kind = 0; kind < 6; kind++) {
            int64_t n = ns[a];
            for (int64_t j = 0; j < n; j++) {
                int v = (int)(next_random(&seed) >> 58); /* 0..63: many ties */
                x[j] = kind == 1 ? (v & 1 ? 0.0f : -0.0f) : (float)(v - 40) * 0.25f;
                if (kind == 2 && v % 3 == 0)
                    x[j] = -INFINITY;
            }
            if (kind == 3)
                x[n / 2] = 100.0f, x[n - 1] = 100.0f; /* the first of two */
            if (kind == 4)
                x[0] = NAN;
            if (kind == 5 && n > 1)
                x[n - 1 - n / 3] = NAN;
            int64_t want = argmax_one_at_a_time(x, n);
            ck_assert_msg(tfm__argmax(x, n) == want, "n %lld, kind %d: %lld, not %lld",
                          (long long)n, kind, (long long)tfm__argmax(x, n), (long long)want);
            double lse = tfm__log_sum_exp(x, n, NULL), sum = 0.0;
            for (int64_t j = 0; j < n; j++)
                sum += exp((double)x[j] - (double)x[want]);
            if (kind == 4 || (kind == 5 && n > 1))
                ck_assert_msg(isnan(lse), "n %lld: %g with a NaN", (long long)n, lse);
            else
                ck_assert_msg(fabs(lse - (x[want] + log(sum))) <= 1e-5 * (1 + fabs(lse)),
                              "n %lld, kind %d: %.9g, not %.9g", (long long)n, kind, lse,
                              x[want] + log(sum));
        }
    free(x);
}
END_TEST

/* Beam search passes over the log probabilities that cannot beat its
 * worst kept candidate, 64 at a time: none it passes over beats it (base +
 * lp in double), and it stops within a float's rounding of the worst.
 * Rows shorter and longer than a block, starts inside one, -Inf, and
 * values a float step or two either side of the one the worst was made
 * from, over bases with every bit of a double set. */
START_TEST(rivals_are_never_skipped)
{
    float x[300];
    uint64_t seed = 99;
    for (int trial = 0; trial < 20000; trial++) {
        int64_t n = 1 + (int64_t)((next_random(&seed) >> 11) % 300);
        int64_t from = (int64_t)((next_random(&seed) >> 11) % (uint64_t)(n + 1));
        double base = -(double)(next_random(&seed) >> 11) / (double)(1ull << 53) * 40.0;
        for (int64_t i = 0; i < n; i++)
            x[i] = -(float)((double)(next_random(&seed) >> 11) / (double)(1ull << 53) * 30.0);
        int64_t k = (int64_t)((next_random(&seed) >> 11) % (uint64_t)n);
        double worst = base + (double)x[k];
        if (trial % 3 == 1)
            worst = nextafter(worst, trial % 2 ? INFINITY : -INFINITY);
        for (int64_t i = 0; i < n; i++) {
            uint64_t r = (next_random(&seed) >> 11) % 16;
            if (r < 5) /* float steps from x[k] */
                x[i] = r == 0 ? x[k]
                              : nextafterf(nextafterf(x[k], r % 2 ? INFINITY : -INFINITY),
                                           r < 3 ? x[k] : r % 2 ? INFINITY : -INFINITY);
            else if (r == 5)
                x[i] = -INFINITY;
        }
        int64_t found = tfm__beam_next_rival(x, from, n, base, worst);
        ck_assert(found >= from && found <= n);
        for (int64_t i = from; i < found; i++)
            ck_assert_msg(!(base + (double)x[i] > worst),
                          "trial %d: %lld passed over, %.17g beats %.17g", trial, (long long)i,
                          base + (double)x[i], worst);
        if (found < n)
            ck_assert_msg(base + (double)x[found] > worst - 2.4e-7 * fabs(worst - base) - 1e-300,
                          "trial %d: %lld far below the worst", trial, (long long)found);
    }
}
END_TEST

/* The cross caches' tiles put BLOCK positions at a time hold what
 * put_position puts one by one: float32 and bfloat16 (ties, NaN, huge
 * values rounding to infinity), whole tiles and a tail, d_k 8, 12, 64. */
START_TEST(a_tile_put_at_once_is_its_positions_put_one_by_one)
{
    static const int64_t dks[] = {8, 12, 64}, counts[] = {BLOCK, 5, 1};
    enum { STRIDE = 150 };
    float *rows = malloc(BLOCK * STRIDE * sizeof *rows);
    ck_assert_ptr_nonnull(rows);
    for (int64_t i = 0; i < BLOCK * STRIDE; i++) {
        uint32_t bits = (uint32_t)(i * 2654435761u) & 0xbfffffffu; /* finite, both signs */
        bits = i % 7 == 0 ? (bits & 0xffff0000u) | 0x8000u : bits; /* a tie */
        memcpy(rows + i, &bits, sizeof bits);
    }
    rows[3] = NAN, rows[STRIDE + 70] = 3.4e38f, rows[2 * STRIDE + 1] = -INFINITY;
    for (int bf16 = 0; bf16 < 2; bf16++)
        for (size_t a = 0; a < 3; a++)
            for (size_t c = 0; c < 3; c++) {
                tfm_decoding d;
                memset(&d, 0, sizeof d);
                d.dk = dks[a];
                d.bf16_cache = bf16;
                size_t bytes = tile_bytes(&d);
                char *want = malloc(bytes), *got = malloc(bytes);
                ck_assert(want && got);
                memset(want, 0x5a, bytes);
                memset(got, 0x5a, bytes);
                for (int64_t i = 0; i < counts[c]; i++)
                    put_position(&d, want, i, rows + i * STRIDE, rows + i * STRIDE + 75);
                tfm__decode_put_tile(&d, got, counts[c], rows, rows + 75, STRIDE);
                ck_assert_msg(memcmp(want, got, bytes) == 0, "bf16 %d, d_k %lld, %lld positions",
                              bf16, (long long)dks[a], (long long)counts[c]);
                free(want);
                free(got);
            }
    free(rows);
}
END_TEST

/* The cached path encodes a source per thread at a time: on two threads,
 * float32 and int8 models decode 41 padded sources (an odd share per
 * thread) bit for bit as on one. */
START_TEST(sources_encoded_per_thread_decode_as_on_one)
{
    tfm_model *m = make_model(TUTORIAL_003, 11, MAXT);
    if (_i)
        ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS), TFM_OK);
    tfm_tensor *src = sources_padded_apart(41, 9);
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, MAXT - 1);
    o.use_cache = 1;
    result *one = new_result(), *two = new_result();
    decode(m, &o, src, one);
    ck_assert_int_eq(tfm_set_num_threads(2), TFM_OK);
    decode(m, &o, src, two);
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
    ck_assert_mem_eq(one, two, sizeof *one);
    free(one);
    free(two);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* A batch too long to encode at once (48,000 tokens: two slices for this
 * model) decodes as its sources alone, cached and recomputed: every 37th,
 * and the last. */
START_TEST(a_batch_encoded_in_slices_decodes_as_its_sources)
{
    enum { SOURCES = 4000, STEPS = 6 };
    tfm_model *m = make_model(PLAIN, 11, MAXT);
    int32_t *ids = malloc(SOURCES * MAXS * sizeof *ids);
    int32_t *tokens = malloc(SOURCES * (STEPS + 1) * sizeof *tokens);
    int32_t *lengths = malloc(SOURCES * sizeof *lengths), alone_tokens[STEPS + 1], alone_length;
    ck_assert(ids && tokens && lengths);
    for (int b = 0; b < SOURCES; b++)
        for (int s = 0; s < MAXS; s++)
            ids[b * MAXS + s] = s < 4 + b % 8 ? 3 + (b * 5 + s * 3) % 10 : PAD;
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){SOURCES, MAXS}, ids);
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, STEPS);
    o.use_cache = _i == 0;
    tfm_decoding *d = tfm_decoding_create(m, &o, SOURCES, MAXS);
    ck_assert_msg(d && tfm_decoding_run(d, src, tokens, SOURCES * (STEPS + 1), lengths, SOURCES,
                                        NULL, 0, NULL, 0, NULL, 0) == TFM_OK,
                  "%s", tfm_last_error());
    tfm_decoding *one = tfm_decoding_create(m, &o, 1, MAXS);
    ck_assert_ptr_nonnull(one);
    for (int every = 0; every < SOURCES + 37; every += 37) {
        int b = every < SOURCES ? every : SOURCES - 1;
        tfm_tensor *alone = tfm_tensor_from_i32(2, (const int64_t[]){1, MAXS}, ids + b * MAXS);
        ck_assert_int_eq(tfm_decoding_run(one, alone, alone_tokens, STEPS + 1, &alone_length, 1,
                                          NULL, 0, NULL, 0, NULL, 0),
                         TFM_OK);
        ck_assert_msg(memcmp(alone_tokens, tokens + b * (STEPS + 1), sizeof alone_tokens) == 0,
                      "source %d decodes otherwise in the batch", b);
        tfm_tensor_free(alone);
    }
    tfm_decoding_free(one);
    tfm_decoding_free(d);
    free(ids);
    free(tokens);
    free(lengths);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* The process' virtual memory in bytes (/proc/self/statm), or -1. */
static double virtual_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = -1;
    if (f) {
        if (fscanf(f, "%ld", &pages) != 1)
            pages = -1;
        fclose(f);
    }
    return pages < 0 ? -1.0 : (double)pages * 4096.0;
}

/* A run needs far less memory than the whole batch's encoding takes on a
 * tape (which a run once held, 1.9 GB of its 2 GB at tutorial 002's size):
 * with the address space limited to what the decoding holds after its
 * creation plus half that encoding, the run succeeds. (Not under
 * AddressSanitizer, whose shadow memory needs the address space.) */
START_TEST(a_run_needs_less_memory_than_the_batchs_encoding)
{
#if defined(__SANITIZE_ADDRESS__)
    return;
#endif
    enum { SOURCES = 20000, STEPS = 4 };
    tfm_model *m = make_model(PLAIN, 11, MAXT);
    int32_t *ids = malloc(SOURCES * MAXS * sizeof *ids), *tokens = NULL, *lengths = NULL;
    ck_assert_ptr_nonnull(ids);
    for (int i = 0; i < SOURCES * MAXS; i++)
        ids[i] = 3 + i % 10;
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){SOURCES, MAXS}, ids);
    tfm_tape *tape = tfm_tape_create();
    ck_assert(src && tape && tfm_tape_set_recording(tape, 0) == TFM_OK);
    tfm_model_set_training(m, 0);
    ck_assert_ptr_nonnull(tfm_model_encode(tape, m, src, NULL, NULL));
    double encoding = (double)tfm_tape_arena_bytes(tape);
    tfm_tape_free(tape);
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, STEPS);
    o.src_pad_id = -1;
    tfm_decoding *d = tfm_decoding_create(m, &o, SOURCES, MAXS);
    tokens = malloc(SOURCES * (STEPS + 1) * sizeof *tokens);
    lengths = malloc(SOURCES * sizeof *lengths);
    ck_assert(d && tokens && lengths);
    struct rlimit was, limited;
    ck_assert_int_eq(getrlimit(RLIMIT_AS, &was), 0);
    limited = was;
    limited.rlim_cur = (rlim_t)(virtual_bytes() + encoding / 2);
    ck_assert(virtual_bytes() > 0 && encoding > 100e6);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &limited), 0);
    tfm_status status = tfm_decoding_run(d, src, tokens, SOURCES * (STEPS + 1), lengths,
                                         SOURCES, NULL, 0, NULL, 0, NULL, 0);
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &was), 0);
    ck_assert_msg(status == TFM_OK, "%s (the encoding alone takes %.0f MB)", tfm_last_error(),
                  encoding / 1e6);
    tfm_decoding_free(d);
    free(tokens);
    free(lengths);
    free(ids);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* Heads of 4, 10 and 9 columns (the kernel's context takes d_k sixteen at
 * a time, then eight, then one by one), the third of head_dim 9 in d_model
 * 12 (an inner width of 18: the fused projections' rows and the caches are
 * not d_model's); of 8 (two positions' values at a time), 16, 24 and 40;
 * from one key to past two tiles, the cross-attention's keys masked past
 * each source, greedy (each query its own tiles) and with beams (a
 * source's hypotheses read the same tiles): the same as the reference
 * path. */
/* d_model, heads, head_dim (0: d_model / heads) of models whose heads
 * are of odd widths, or whose attention is wider than d_model */
static const int32_t odd_widths[7][3] = {{12, 3, 0}, {20, 2, 0}, {12, 2, 9}, {16, 2, 0},
                                         {32, 2, 0}, {24, 1, 0},  {20, 1, 40}};

static tfm_model *odd_width_model(const int32_t *widths, int64_t max_tgt_len)
{
    tfm_model_options mo;
    tfm_model_options_init(&mo);
    mo.src_vocab = 13;
    mo.tgt_vocab = 11;
    mo.max_src_len = MAXS;
    mo.max_tgt_len = max_tgt_len;
    mo.d_model = widths[0];
    mo.heads = widths[1];
    mo.head_dim = widths[2];
    mo.d_ff = 32;
    mo.seed = 5;
    tfm_model *m = tfm_model_create(&mo);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    return m;
}

START_TEST(odd_head_widths_equal_recomputed)
{
    enum { LONG = 40 };
    tfm_model *m = odd_width_model(odd_widths[_i / 2], LONG + 1);
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, _i % 2 ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY, LONG);
    o.eos_id = -1; /* every hypothesis runs LONG steps */
    o.beam_size = o.n_best = 4;
    ck_assert_int_eq(cached_matches_recomputed(m, &o, src, _i % 2 ? 0 : 3 * LONG * 11),
                     LONG + 1);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* A run encodes its sources on the encoder's weights packed at its start
 * (decode/weights.c), which its tape lists: the memory it keeps is
 * tfm_model_encode's within 1e-5 with the padding mask, for every kind of
 * model (post- and pre-norm, fused and separate queries, keys and values,
 * RMS norms and relative position bias, embedding norms, final norms or
 * none) and a fused attention wider than d_model / heads; it did pack
 * every encoder linear layer, and only its own tape lists them. */
START_TEST(a_runs_encoding_is_the_models)
{
    tfm_model *m = _i < KINDS ? make_model(_i, vocab_of(_i), MAXT)
                              : odd_width_model(odd_widths[2], MAXT);
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, 4);
    o.use_cache = 0; /* the run keeps the memory itself */
    tfm_decoding *d = tfm_decoding_create(m, &o, 3, 8);
    ck_assert_msg(d != NULL, "%s", tfm_last_error());
    result *r = new_result();
    ck_assert_msg(tfm_decoding_run(d, src, TOKENS(r), NONE, NONE, NONE) == TFM_OK, "%s",
                  tfm_last_error());
    tfm_model_set_training(m, 0);
    tfm_tape *tape = tfm_tape_create();
    tfm_tape_set_recording(tape, 0);
    tfm_tensor *memory = tfm_model_encode(tape, m, src, tfm_mask_padding(tape, src, PAD, TFM_I32),
                                          NULL);
    ck_assert_msg(memory != NULL, "%s", tfm_last_error());
    assert_close(d->memory, tfm_tensor_data_f32(memory), tfm_tensor_numel(memory), 1e-5,
                 _i < KINDS ? kind_name[_i] : "head_dim 9");
    int64_t linears = 0;
    for (int32_t l = 0; l < m->options.encoder_layers; l++) {
        const tfm_layer *block = m->encoder->children[l];
        const tfm_layer *ff = block->children[TFM__BLK_FF];
        linears += (block->children[TFM__BLK_SELF_ATTN]->fused ? 1 : 3) + 1 +
                   (ff->children[TFM__FF_LINEAR_UP] ? 3 : 2);
    }
    ck_assert_int_eq(d->own_weights->n_encoder, linears);
    ck_assert_ptr_eq(d->tape->packed, d->own_weights->encoder);
    ck_assert_int_eq(d->tape->n_packed, linears);
    for (int64_t i = 0; i < linears; i++)
        ck_assert_ptr_nonnull(d->own_weights->encoder[i].product.panels);
    ck_assert_int_eq(tape->n_packed, 0);
    tfm_tape_free(tape);
    free(r);
    tfm_decoding_free(d);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* A tape in evaluation (a decoding's, tfm__tape_set_evaluation) runs a
 * model whose layers train as one in evaluation mode runs, bit for bit:
 * no dropout in the embeddings, attention, feed-forward (plain, gated, or
 * fused with its residual when its hidden layer is recomputed) or
 * sublayers; the same model on an ordinary tape drops out, and its flags
 * stay as they were. _i: the model's kind, then (bit 0) recomputing. */
START_TEST(a_tape_in_evaluation_runs_a_training_model_without_dropout)
{
    static const int kinds[3] = {PLAIN, T5, MBART};
    tfm_model *m = make_model(kinds[_i / 2], vocab_of(kinds[_i / 2]), MAXT);
    if (_i % 2)
        ck_assert_int_eq(tfm_model_set_recompute(m, TFM_RECOMPUTE_FEED_FORWARD_HIDDEN |
                                                        TFM_RECOMPUTE_ATTENTION_WEIGHTS),
                         TFM_OK);
    tfm_tensor *src = padded_sources();
    static const int32_t tgt_ids[3 * 5] = {1, 3, 4, 5, 6, 1, 7, 8, 9, 3, 1, 4, 4, 5, 2};
    tfm_tensor *tgt = tfm_tensor_from_i32(2, (const int64_t[]){3, 5}, tgt_ids);
    float *logits[3]; /* evaluation tape, evaluation mode, training */
    int64_t n = 0;
    for (int c = 0; c < 3; c++) {
        tfm_model_set_training(m, c != 1);
        tfm_tape *tape = tfm_tape_create();
        tfm__tape_set_evaluation(tape, c == 0);
        tfm_tensor *y = tfm_model_forward(tape, m, src, tgt, NULL,
                                          tfm_mask_causal(tape, 5, TFM_I32), NULL, NULL, NULL,
                                          NULL);
        ck_assert_msg(y != NULL, "%s", tfm_last_error());
        n = tfm_tensor_numel(y);
        logits[c] = malloc((size_t)n * sizeof(float));
        memcpy(logits[c], tfm_tensor_data_f32(y), (size_t)n * sizeof(float));
        tfm_tape_free(tape);
        ck_assert_int_eq(m->decoder->training, c != 1);
    }
    ck_assert_mem_eq(logits[0], logits[1], (size_t)n * sizeof(float));
    ck_assert_int_ne(memcmp(logits[1], logits[2], (size_t)n * sizeof(float)), 0);
    for (int c = 0; c < 3; c++)
        free(logits[c]);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_model_free(m);
}
END_TEST

/* A source of padding only leaves each query of the cross-attention no key:
 * it attends to nothing (its context is 0), so the decoding depends on
 * neither the source's length nor the rest of the batch. Cached and
 * recomputed alike, greedy and beam: the tokens and logits of an all-pad
 * source of 8 beside a real one are those of an all-pad source of 4 alone,
 * and both paths agree. */
START_TEST(a_source_of_padding_only)
{
    tfm_decode_strategy strategy = _i ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY;
    tfm_model *m = make_model(TUTORIAL_003, 11, MAXT);
    static const int32_t beside[2 * 8] = {3, 4, 5, 6, 7, 8, 9, 10, PAD, PAD, PAD, PAD, PAD, PAD,
                                          PAD, PAD};
    static const int32_t alone[4] = {PAD, PAD, PAD, PAD};
    tfm_tensor *srcs[2] = {tfm_tensor_from_i32(2, (const int64_t[]){2, 8}, beside),
                           tfm_tensor_from_i32(2, (const int64_t[]){1, 4}, alone)};
    tfm_decode_options o;
    options(&o, strategy, MAXT - 1);
    o.beam_size = o.n_best = 4;
    int64_t rows = strategy == TFM_DECODE_BEAM ? o.n_best : 1, T1 = o.max_length + 1;
    int64_t V = 11, steps = o.max_length;
    result *r[2][2]; /* [source][use_cache] */
    for (int i = 0; i < 2; i++) {
        cached_matches_recomputed(m, &o, srcs[i], tfm_tensor_dim(srcs[i], 0) * steps * V);
        for (int cache = 0; cache < 2; cache++) {
            r[i][cache] = new_result();
            o.use_cache = cache;
            decode(m, &o, srcs[i], r[i][cache]);
        }
    }
    for (int cache = 0; cache < 2; cache++) {
        const result *b = r[0][cache], *a = r[1][cache]; /* beside: its second source's rows */
        ck_assert_mem_eq(b->tokens + rows * T1, a->tokens, (size_t)(rows * T1) * sizeof(int32_t));
        ck_assert_mem_eq(b->lengths + rows, a->lengths, (size_t)rows * sizeof(int32_t));
        assert_close(b->scores + rows, a->scores, rows, 1e-5, "scores");
        if (strategy != TFM_DECODE_BEAM)
            assert_close(b->logits + steps * V, a->logits, steps * V, 1e-5, "logits");
    }
    for (int i = 0; i < 2; i++) {
        free(r[i][0]);
        free(r[i][1]);
        tfm_tensor_free(srcs[i]);
    }
    tfm_model_free(m);
}
END_TEST

/* Runs d on src into r, with the logits unless it searches a beam. */
static void run_into(tfm_decoding *d, const tfm_tensor *src, result *r,
                     tfm_decode_strategy strategy)
{
    int beam = strategy == TFM_DECODE_BEAM;
    ck_assert_msg(tfm_decoding_run(d, src, TOKENS(r), SCORES(r), beam ? NULL : r->logits,
                                   COUNT(r->logits), NONE) == TFM_OK,
                  "%s", tfm_last_error());
}

/* Hypothesis hyp's alignments from both decodings (count floats each),
 * their lengths in target and source tokens; the targets agree. */
static void both_alignments(tfm_decoding *const d[2], int64_t hyp, float *got0, float *got1,
                            int64_t count, int64_t target[2], int64_t source[2])
{
    float *got[2] = {got0, got1};
    for (int i = 0; i < 2; i++)
        ck_assert_msg(tfm_decoding_attention(d[i], hyp, got[i], count, &target[i],
                                             &source[i]) == TFM_OK,
                      "%s", tfm_last_error());
    ck_assert_int_eq(target[0], target[1]);
}

/* The two runs' hypotheses have the same tokens, lengths, scores and
 * logits, bit for bit. */
static void assert_same_results(const result *a, const result *b, int64_t hypotheses)
{
    ck_assert_mem_eq(a->tokens, b->tokens, (size_t)(hypotheses * MAXT) * sizeof(int32_t));
    ck_assert_mem_eq(a->lengths, b->lengths, (size_t)hypotheses * sizeof(int32_t));
    ck_assert_mem_eq(a->scores, b->scores, (size_t)hypotheses * sizeof(float));
    ck_assert_mem_eq(a->logits, b->logits, sizeof a->logits);
}

/* Trailing padding costs nothing and changes nothing: a run encodes each
 * slice of sources only up to its longest, and a source's rows attend up
 * to its last key that is not padding. The batch of padded_sources() with
 * four more columns of padding decodes to the same bits as without them
 * (tokens, scores, logits, alignments), its alignments 0 on the padding. */
START_TEST(trailing_padding_changes_nothing)
{
    int kind = _i / 2;
    tfm_decode_strategy strategy = _i % 2 ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY;
    tfm_model *m = make_model(kind, vocab_of(kind), MAXT);
    tfm_tensor *narrow = padded_sources();
    int32_t ids[3 * MAXS];
    for (int b = 0; b < 3; b++)
        for (int s = 0; s < MAXS; s++)
            ids[b * MAXS + s] = s < 8 ? tfm_tensor_data_i32(narrow)[b * 8 + s] : PAD;
    tfm_tensor *wide = tfm_tensor_from_i32(2, (const int64_t[]){3, MAXS}, ids);
    tfm_decode_options o;
    options(&o, strategy, MAXT - 1);
    o.beam_size = o.n_best = 3;
    o.return_attention = kind != NO_DECODER_LAYERS;
    result *r[2] = {new_result(), new_result()};
    float got[2][MAXT * MAXS];
    tfm_decoding *d[2];
    const tfm_tensor *src[2] = {narrow, wide};
    for (int i = 0; i < 2; i++) {
        d[i] = tfm_decoding_create(m, &o, 3, tfm_tensor_dim(src[i], 1));
        ck_assert_msg(d[i] != NULL, "%s", tfm_last_error());
        run_into(d[i], src[i], r[i], strategy);
    }
    int64_t hypotheses = 3 * (strategy == TFM_DECODE_BEAM ? o.n_best : 1);
    assert_same_results(r[0], r[1], hypotheses);
    for (int64_t hyp = 0; o.return_attention && hyp < hypotheses; hyp++) {
        int64_t target[2], source[2];
        both_alignments(d, hyp, got[0], got[1], COUNT(got[0]), target, source);
        ck_assert_int_eq(source[1], MAXS);
        for (int64_t t = 0; t < target[0]; t++)
            for (int64_t s = 0; s < MAXS; s++)
                ck_assert_msg(got[1][t * MAXS + s] == (s < 8 ? got[0][t * 8 + s] : 0.0f),
                              "hypothesis %lld, row %lld, key %lld", (long long)hyp,
                              (long long)t, (long long)s);
    }
    for (int i = 0; i < 2; i++) {
        tfm_decoding_free(d[i]);
        free(r[i]);
    }
    tfm_tensor_free(narrow);
    tfm_tensor_free(wide);
    tfm_model_free(m);
}
END_TEST

/* The attention kernel fetching each set of queries' tiles ahead (on
 * when a step's caches outgrow the last-level cache, here always) runs
 * the same sets in the same order: the same bits, greedy and beam, on
 * float32 and bfloat16 caches, with alignments. */
START_TEST(prefetching_changes_nothing)
{
    int kind = _i / 4;
    tfm_decode_strategy strategy = _i % 2 ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY;
    tfm_model *m = make_model(kind, vocab_of(kind), MAXT);
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, strategy, MAXT - 1);
    o.beam_size = o.n_best = 3;
    o.return_attention = kind != NO_DECODER_LAYERS;
    o.cache_precision = _i / 2 % 2 ? TFM_CACHE_BFLOAT16 : TFM_CACHE_FLOAT32;
    result *r[2] = {new_result(), new_result()};
    float got[2][MAXT * 8];
    tfm_decoding *d[2];
    const double streamed_bytes = tfm__decode_streamed_bytes;
    for (int i = 0; i < 2; i++) {
        tfm__decode_streamed_bytes = i ? 0.0 : streamed_bytes;
        d[i] = tfm_decoding_create(m, &o, 3, 8);
        ck_assert_msg(d[i] != NULL, "%s", tfm_last_error());
        run_into(d[i], src, r[i], strategy);
    }
    tfm__decode_streamed_bytes = streamed_bytes;
    int64_t hypotheses = 3 * (strategy == TFM_DECODE_BEAM ? o.n_best : 1);
    assert_same_results(r[0], r[1], hypotheses);
    for (int64_t hyp = 0; o.return_attention && hyp < hypotheses; hyp++) {
        int64_t target[2], source[2];
        both_alignments(d, hyp, got[0], got[1], COUNT(got[0]), target, source);
        ck_assert_mem_eq(got[0], got[1], (size_t)(target[0] * source[0]) * sizeof(float));
    }
    for (int i = 0; i < 2; i++) {
        tfm_decoding_free(d[i]);
        free(r[i]);
    }
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* --- greedy --------------------------------------------------------------------------- */

START_TEST(greedy_is_the_argmax_step_by_step)
{
    int kind = _i;
    int64_t V = vocab_of(kind);
    tfm_model *m = make_model(kind, 11, MAXT);
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, MAXT - 1);
    result *r = new_result();
    decode(m, &o, src, r);
    int64_t T = o.max_length, T1 = T + 1;
    for (int64_t b = 0; b < 3; b++) {
        const int32_t *tok = r->tokens + b * T1;
        int32_t len = r->lengths[b];
        ck_assert_int_eq(tok[0], BOS);
        ck_assert(len >= 2 && len <= T1);
        double score = 0.0;
        for (int64_t t = 0; t + 1 < len; t++) {
            float ref[13];
            reference_logits(m, src, b, tok, t + 1, ref, V);
            int32_t best = 0;
            for (int32_t v = 1; v < V; v++)
                best = ref[v] > ref[best] ? v : best;
            ck_assert_msg(tok[t + 1] == best, "%s: source %lld step %lld: %d, argmax %d",
                          kind_name[kind], (long long)b, (long long)t, tok[t + 1], best);
            assert_close(r->logits + (b * T + t) * V, ref, V, 1e-5, "logits vs reference");
            double lse = (double)ref[best] - log_softmax_at(ref, V, best);
            for (int64_t v = 0; v < V; v++)
                ck_assert(fabs(r->probs[(b * T + t) * V + v] - exp(ref[v] - lse)) < 1e-5);
            score += log_softmax_at(ref, V, best);
            ck_assert_msg(t + 2 == len || tok[t + 1] != EOS, "eos before the end");
        }
        ck_assert(len == T1 || tok[len - 1] == EOS);
        for (int64_t i = len; i < T1; i++)
            ck_assert_int_eq(tok[i], -1);
        /* after the end: zeros */
        for (int64_t i = (b * T + len - 1) * V; i < (b + 1) * T * V; i++)
            ck_assert(r->logits[i] == 0.0f && r->probs[i] == 0.0f);
        ck_assert_msg(fabs(r->scores[b] - score) < 1e-4, "score %g vs %g", (double)r->scores[b],
                      score);
    }
    free(r);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

START_TEST(max_length_and_no_eos)
{
    tfm_model *m = make_model(PLAIN, 11, MAXT);
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, MAXT - 1);
    result *full = new_result(), *r = new_result();
    decode(m, &o, src, full);
    for (int use_cache = 0; use_cache < 2; use_cache++) {
        /* a shorter max_length gives the prefix of the longer decoding */
        o.max_length = 3;
        o.use_cache = use_cache;
        decode(m, &o, src, r);
        for (int64_t b = 0; b < 3; b++) {
            ck_assert(r->lengths[b] <= 4);
            ck_assert_int_eq(r->lengths[b], full->lengths[b] < 4 ? full->lengths[b] : 4);
            for (int64_t i = 0; i < r->lengths[b]; i++)
                ck_assert_int_eq(r->tokens[b * 4 + i], full->tokens[b * MAXT + i]);
        }
        /* no eos: every sequence runs to max_length, eos an ordinary token */
        o.max_length = MAXT - 1;
        o.eos_id = -1;
        decode(m, &o, src, r);
        for (int64_t b = 0; b < 3; b++) {
            ck_assert_int_eq(r->lengths[b], MAXT);
            ck_assert_int_eq(r->tokens[b * MAXT], BOS);
            for (int64_t i = 0; i < MAXT; i++)
                ck_assert(r->tokens[b * MAXT + i] >= 0 && r->tokens[b * MAXT + i] < 11);
        }
        o.eos_id = EOS;
    }
    free(full);
    free(r);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* --- sampling --------------------------------------------------------------------------- */

static int same_tokens(const result *a, const result *b, int64_t n)
{
    return memcmp(a->tokens, b->tokens, (size_t)n * sizeof a->tokens[0]) == 0;
}

START_TEST(sampling_seeds_and_limits)
{
    tfm_model *m = make_model(PLAIN, 11, MAXT);
    tfm_tensor *src = padded_sources();
    int64_t n = 3 * MAXT;
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, MAXT - 1);
    result *greedy = new_result(), *a = new_result(), *b = new_result();
    decode(m, &o, src, greedy);

    o.strategy = TFM_DECODE_SAMPLE;
    o.temperature = 2.0f;
    o.eos_id = -1;
    o.seed = 1;
    decode(m, &o, src, a);
    decode(m, &o, src, b);
    ck_assert_msg(same_tokens(a, b, n), "the same seed gave other tokens");
    o.seed = 2;
    decode(m, &o, src, b);
    ck_assert_msg(!same_tokens(a, b, n), "different seeds gave the same 45 tokens");

    /* a temperature near 0 and top_k 1 are greedy, and draw from one token */
    o.eos_id = EOS;
    o.temperature = 1e-4f;
    decode(m, &o, src, a);
    ck_assert_msg(same_tokens(a, greedy, n), "temperature 1e-4 is not greedy");
    assert_close(a->scores, greedy->scores, 3, 1e-6, "scores");
    o.temperature = 1.0f;
    o.top_k = 1;
    decode(m, &o, src, a);
    ck_assert_msg(same_tokens(a, greedy, n), "top_k 1 is not greedy");
    for (int64_t i = 0; i < (a->lengths[0] - 1) * 11; i++)
        ck_assert(a->probs[i] == 0.0f || a->probs[i] == 1.0f);
    free(greedy);
    free(a);
    free(b);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* A model whose logits are log(p) whatever the input: a zero generator. */
static const double known_p[11] = {0.3, 0.2, 0.15, 0.1, 0.08, 0.06, 0.04, 0.03, 0.02, 0.01, 0.01};

static tfm_model *known_model(void)
{
    tfm_model *m = make_model(PLAIN, 11, MAXT);
    memset(param(m, "generator.weight"), 0, 11 * 16 * sizeof(float));
    float *bias = param(m, "generator.bias");
    for (int v = 0; v < 11; v++)
        bias[v] = (float)log(known_p[v]);
    return m;
}

/* The filtered distribution, computed here in double precision. */
static void filtered(double temperature, int top_k, double top_p, double *q)
{
    double total = 0.0;
    for (int v = 0; v < 11; v++) /* known_p is sorted: the top k are the first k */
        total += q[v] = (top_k == 0 || v < top_k) ? pow(known_p[v], 1.0 / temperature) : 0.0;
    double reached = 0.0;
    int kept = 0;
    while (kept < 11 && q[kept] > 0.0 && reached < top_p * total)
        reached += q[kept++];
    for (int v = 0; v < 11; v++)
        q[v] = v < kept ? q[v] / reached : 0.0;
}

START_TEST(sampling_filters_and_frequencies)
{
    static const struct {
        double temperature;
        int top_k;
        double top_p;
        int support;
    } cases[] = {
        {1.0, 0, 1.0, 11}, {2.0, 0, 1.0, 11}, {1.0, 3, 1.0, 3}, {1.0, 0, 0.7, 4},
        {1.0, 3, 0.6, 2},  {0.5, 0, 0.9, 4},  {1.0, 20, 1.0, 11},
    };
    tfm_model *m = known_model();
    int32_t ids[200 * 4];
    for (int i = 0; i < 200 * 4; i++)
        ids[i] = 3 + i % 7;
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){200, 4}, ids);
    int32_t *tokens = malloc(200 * MAXT * sizeof *tokens), lengths[200];
    float *probs = malloc(200 * (MAXT - 1) * 11 * sizeof *probs);
    ck_assert(tokens && probs);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tfm_decode_options o;
        options(&o, TFM_DECODE_SAMPLE, MAXT - 1);
        o.eos_id = -1;
        o.src_pad_id = -1;
        o.seed = 100 + c;
        o.temperature = (float)cases[c].temperature;
        o.top_k = cases[c].top_k;
        o.top_p = (float)cases[c].top_p;
        double q[11];
        filtered(cases[c].temperature, cases[c].top_k, cases[c].top_p, q);
        int support = 0;
        for (int v = 0; v < 11; v++)
            support += q[v] > 0.0;
        ck_assert_int_eq(support, cases[c].support);
        tfm_decoding *d = tfm_decoding_create(m, &o, 200, 4);
        ck_assert_msg(d != NULL, "%s", tfm_last_error());
        ck_assert_int_eq(tfm_decoding_run(d, src, tokens, 200 * MAXT, lengths, 200, NONE, NONE,
                                          probs, 200 * (MAXT - 1) * 11),
                         TFM_OK);
        tfm_decoding_free(d);
        /* every step drew from q, renormalised over its support only */
        for (int64_t i = 0; i < 200 * (MAXT - 1); i++)
            for (int v = 0; v < 11; v++)
                ck_assert_msg(fabs(probs[i * 11 + v] - q[v]) < 1e-6,
                              "case %zu: p[%d] = %g, expected %g", c, v,
                              (double)probs[i * 11 + v], q[v]);
        /* 3000 draws: Pearson's chi-square below its 0.999 quantile */
        double count[11] = {0}, draws = 200.0 * (MAXT - 1), chi2 = 0.0;
        for (int64_t b = 0; b < 200; b++)
            for (int64_t i = 1; i < MAXT; i++)
                count[tokens[b * MAXT + i]] += 1.0;
        for (int v = 0; v < 11; v++) {
            if (q[v] == 0.0) {
                ck_assert_msg(count[v] == 0.0, "case %zu drew token %d, outside the kept set",
                              c, v);
                continue;
            }
            double expected = draws * q[v];
            chi2 += (count[v] - expected) * (count[v] - expected) / expected;
        }
        /* 0.999 quantiles of chi-square with 1, 2, 3 and 10 degrees of freedom */
        double bound = support == 2 ? 10.83 : support == 3 ? 13.82 : support == 4 ? 16.27 : 29.59;
        ck_assert_msg(chi2 < bound, "case %zu: chi-square %g over %d tokens", c, chi2, support);
    }
    free(tokens);
    free(probs);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* --- beam search ------------------------------------------------------------------------ */

START_TEST(beam_of_one_is_greedy)
{
    tfm_model *m = make_model(_i, 11, MAXT);
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, MAXT - 1);
    result *greedy = new_result(), *beam = new_result();
    decode(m, &o, src, greedy);
    o.strategy = TFM_DECODE_BEAM;
    o.beam_size = 1;
    o.length_penalty = 0.0f;
    decode(m, &o, src, beam);
    ck_assert(same_tokens(greedy, beam, 3 * MAXT));
    ck_assert(memcmp(greedy->lengths, beam->lengths, 3 * sizeof(int32_t)) == 0);
    assert_close(beam->scores, greedy->scores, 3, 1e-6, "scores");
    free(greedy);
    free(beam);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

START_TEST(beam_ranks_and_beats_greedy)
{
    tfm_model *m = make_model(_i, 11, MAXT);
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, MAXT - 1);
    result *greedy = new_result(), *beam = new_result();
    decode(m, &o, src, greedy);
    o.strategy = TFM_DECODE_BEAM;
    o.beam_size = 5;
    o.n_best = 4;
    o.length_penalty = 0.0f;
    decode(m, &o, src, beam);
    int64_t V = vocab_of(_i);
    for (int64_t b = 0; b < 3; b++) {
        const float *s = beam->scores + b * 4;
        ck_assert_msg(s[0] >= greedy->scores[b] - 1e-5, "beam %g below greedy %g",
                      (double)s[0], (double)greedy->scores[b]);
        for (int h = 0; h < 4; h++) {
            const int32_t *tok = beam->tokens + (b * 4 + h) * MAXT;
            int32_t len = beam->lengths[b * 4 + h];
            ck_assert(h == 0 || s[h] <= s[h - 1]);
            for (int g = 0; g < h; g++)
                ck_assert_msg(memcmp(tok, beam->tokens + (b * 4 + g) * MAXT,
                                     MAXT * sizeof *tok) != 0, "hypotheses %d and %d agree", g, h);
            /* its score is its log probability, computed here */
            double score = 0.0;
            for (int64_t t = 0; t + 1 < len; t++) {
                float ref[13];
                reference_logits(m, src, b, tok, t + 1, ref, V);
                score += log_softmax_at(ref, V, tok[t + 1]);
            }
            ck_assert_msg(fabs(score - s[h]) < 1e-4, "hypothesis %d: score %g, log prob %g", h,
                          (double)s[h], score);
            for (int64_t i = len; i < MAXT; i++)
                ck_assert_int_eq(tok[i], -1);
        }
    }
    free(greedy);
    free(beam);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* Every sequence of a 4-token vocabulary up to 3 tokens, scored through the
 * reference: a beam wider than their number must find the best ones. */
typedef struct sequence {
    int32_t tokens[4];
    int32_t length;
    double score;
} sequence;

static int enumerate(tfm_model *m, tfm_tensor *src, int32_t *prefix, int32_t len,
                     double logp, double alpha, sequence *out, int count)
{
    float ref[4];
    reference_logits(m, src, 0, prefix, len, ref, 4);
    for (int32_t v = 0; v < 4; v++) {
        prefix[len] = v;
        double lp = logp + log_softmax_at(ref, 4, v);
        if (v == EOS || len == 3) {
            memcpy(out[count].tokens, prefix, sizeof out[count].tokens);
            out[count].length = len + 1;
            out[count].score = lp / pow((double)len, alpha);
            count++;
        } else {
            count = enumerate(m, src, prefix, len + 1, lp, alpha, out, count);
        }
    }
    return count;
}

START_TEST(wide_beam_is_exhaustive)
{
    double alpha = _i ? 1.0 : 0.0;
    tfm_model *m = make_model(PLAIN, 4, 4);
    float *w = param(m, "generator.weight");
    for (int i = 0; i < 4 * 16; i++)
        w[i] *= 0.5f; /* rivals close enough to make the order interesting */
    tfm_tensor *src = padded_sources();
    sequence all[64];
    int32_t prefix[4] = {BOS};
    int count = enumerate(m, src, prefix, 1, 0.0, alpha, all, 0);
    ck_assert_int_eq(count, 1 + 3 + 9 * 4);
    /* sort best first */
    for (int i = 1; i < count; i++)
        for (int j = i; j > 0 && all[j].score > all[j - 1].score; j--) {
            sequence tmp = all[j];
            all[j] = all[j - 1];
            all[j - 1] = tmp;
        }
    for (int use_cache = 0; use_cache < 2; use_cache++) {
        tfm_decode_options o;
        options(&o, TFM_DECODE_BEAM, 3);
        o.beam_size = 64;
        o.n_best = 41;
        o.length_penalty = (float)alpha;
        o.use_cache = use_cache;
        result *r = new_result();
        decode(m, &o, src, r);
        for (int h = 0; h < count; h++) {
            ck_assert_msg(fabs(r->scores[h] - all[h].score) < 1e-5, "alpha %g, rank %d: %g vs %g",
                          alpha, h, (double)r->scores[h], all[h].score);
            ck_assert_int_eq(r->lengths[h], all[h].length);
            if (h + 1 < count && all[h].score - all[h + 1].score > 1e-5)
                for (int i = 0; i < all[h].length; i++)
                    ck_assert_int_eq(r->tokens[h * 4 + i], all[h].tokens[i]);
        }
        /* the 41st does not exist: no tokens, no score */
        ck_assert_int_eq(r->lengths[count], 0);
        ck_assert_int_eq(r->tokens[count * 4], -1);
        ck_assert(isinf(r->scores[count]) && r->scores[count] < 0);
        free(r);
    }
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* --- steady state and the model's mode -------------------------------------------------- */

/* Two forwards in training mode differ (dropout); in eval mode they agree. */
static int forward_is_random(tfm_model *m, tfm_tensor *src)
{
    int32_t tgt_ids[3] = {BOS, 4, 5};
    tfm_tensor *tgt = tfm_tensor_from_i32(2, (const int64_t[]){1, 3}, tgt_ids);
    tfm_tensor *one = tfm_tensor_from_i32(2, (const int64_t[]){1, 8}, tfm_tensor_data_i32(src));
    tfm_tape *tape = tfm_tape_create();
    tfm_tape_set_recording(tape, 0);
    float first[33], second[33];
    for (int k = 0; k < 2; k++) {
        tfm_tensor *out = tfm_model_forward(tape, m, one, tgt, NULL, NULL, NULL, NULL, NULL, NULL);
        ck_assert_msg(out != NULL, "%s", tfm_last_error());
        tfm_tensor_read_f32(out, k ? second : first, 33);
        tfm_tape_reset(tape);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(tgt);
    tfm_tensor_free(one);
    return memcmp(first, second, sizeof first) != 0;
}

START_TEST(steady_state_and_mode)
{
    tfm_model *m = make_model(PLAIN, 11, MAXT);
    tfm_tensor *src = padded_sources();
    int32_t other_ids[2 * 5] = {4, 4, 4, 4, 4, 9, 8, 7, 0, 0};
    tfm_tensor *other = tfm_tensor_from_i32(2, (const int64_t[]){2, 5}, other_ids);
    for (int strategy = 0; strategy < 3; strategy++) {
        tfm_decode_options o;
        options(&o, strategy, MAXT - 1);
        o.seed = 3;
        o.temperature = 1.3f;
        int beam = strategy == TFM_DECODE_BEAM;
        tfm_decoding *d = tfm_decoding_create(m, &o, 4, 10);
        ck_assert_msg(d != NULL, "%s", tfm_last_error());
        result *first = new_result(), *again = new_result(), *eval = new_result();
        /* in training mode, then another batch, then again: the same */
        tfm_model_set_training(m, 1);
        ck_assert_int_eq(tfm_decoding_run(d, src, TOKENS(first), SCORES(first),
                                          beam ? NULL : first->logits, COUNT(first->logits), NONE),
                         TFM_OK);
        ck_assert_msg(forward_is_random(m, src), "training mode was not restored");
        ck_assert_int_eq(tfm_decoding_run(d, other, TOKENS(again), NONE, NONE, NONE), TFM_OK);
        ck_assert_int_eq(tfm_decoding_run(d, src, TOKENS(again), SCORES(again),
                                          beam ? NULL : again->logits, COUNT(again->logits), NONE),
                         TFM_OK);
        ck_assert(memcmp(first, again, offsetof(result, probs)) == 0);
        /* in eval mode: the same, and eval mode stays */
        tfm_model_set_training(m, 0);
        ck_assert_int_eq(tfm_decoding_run(d, src, TOKENS(eval), SCORES(eval),
                                          beam ? NULL : eval->logits, COUNT(eval->logits), NONE),
                         TFM_OK);
        ck_assert(memcmp(first, eval, offsetof(result, probs)) == 0);
        ck_assert_msg(!forward_is_random(m, src), "eval mode was not restored");
        tfm_decoding_free(d);
        free(first);
        free(again);
        free(eval);
    }
    tfm_tensor_free(other);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* A run decodes with the weights as they are when it starts (the steps'
 * products pack them at each run): a decoding made before the model
 * changed gives what one made after gives, bit for bit. */
START_TEST(a_run_reads_the_weights_as_they_are)
{
    tfm_model *m = make_model(_i ? TUTORIAL_003 : PLAIN, 11, MAXT);
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, MAXT - 1);
    tfm_decoding *before = tfm_decoding_create(m, &o, 3, 8);
    ck_assert_msg(before != NULL, "%s", tfm_last_error());
    result *first = new_result(), *again = new_result(), *fresh = new_result();
    ck_assert_int_eq(tfm_decoding_run(before, src, TOKENS(first), NONE, LOGITS(first), NONE),
                     TFM_OK);
    /* as a training step would: every parameter moves */
    tfm_params *params = tfm_model_params(m);
    float *v = tfm_params_values(params);
    for (int64_t i = 0; i < tfm_params_numel(params); i++)
        v[i] = v[i] * 1.25f + 0.01f * (float)(i % 7 - 3);
    ck_assert_int_eq(tfm_decoding_run(before, src, TOKENS(again), NONE, LOGITS(again), NONE),
                     TFM_OK);
    decode(m, &o, src, fresh);
    int64_t logits = 3 * o.max_length * 11;
    ck_assert(memcmp(again->logits, fresh->logits, sizeof(float) * logits) == 0);
    ck_assert(memcmp(again->tokens, fresh->tokens, sizeof again->tokens) == 0);
    ck_assert(memcmp(first->logits, again->logits, sizeof(float) * logits) != 0);
    tfm_decoding_free(before);
    free(first);
    free(again);
    free(fresh);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* --- bfloat16 caches ------------------------------------------------------------------ */

/* Decodes src with the options, each row's tokens after bos_id forced
 * from forced_rows (rows of max_length + 1 tokens as a run writes them;
 * NULL: none), and copies each row's alignments [max_length][S] into
 * alignments when the options keep them. */
static void decode_forced(tfm_model *m, const tfm_decode_options *o, const tfm_tensor *src,
                          const int32_t *forced_rows, result *r, float *alignments)
{
    int64_t B = tfm_tensor_dim(src, 0), S = tfm_tensor_dim(src, 1), T = o->max_length;
    int32_t forced[64 * MAXT];
    ck_assert(B * T <= 64 * MAXT);
    for (int64_t b = 0; forced_rows && b < B; b++)
        memcpy(forced + b * T, forced_rows + b * (T + 1) + 1, (size_t)T * sizeof *forced);
    tfm_tensor *prefix =
        forced_rows ? tfm_tensor_from_i32(2, (const int64_t[]){B, T}, forced) : NULL;
    tfm_decoding *d = tfm_decoding_create(m, o, B, S);
    ck_assert_msg(d != NULL, "%s", tfm_last_error());
    ck_assert_msg(tfm_decoding_run_with_prefix(d, src, prefix, TOKENS(r), SCORES(r), LOGITS(r),
                                               PROBS(r)) == TFM_OK,
                  "%s", tfm_last_error());
    for (int64_t b = 0; o->return_attention && b < B; b++)
        ck_assert_int_eq(tfm_decoding_attention(d, b, alignments + b * T * S, T * S, NULL, NULL),
                         TFM_OK);
    tfm_decoding_free(d);
    tfm_tensor_free(prefix);
}

/* The largest |a - b| / (1 + |b|) over n values, and whether any differ. */
static double deviation(const float *a, const float *b, int64_t n, int *differ)
{
    double worst = 0.0;
    *differ = memcmp(a, b, (size_t)n * sizeof *a) != 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]) / (1.0 + fabs((double)b[i]));
        worst = e > worst ? e : worst;
    }
    return worst;
}

/* Greedy decoding with bfloat16 caches against float32 caches, the float32
 * run's tokens forced on the bfloat16 one so that both see the same
 * prefixes, for every kind of model, sources padded: the logits and the
 * alignments differ (the keys and values were rounded) by at most
 * BF16_LOGITS (the keys and values move by at most 2^-9 of themselves,
 * the scores, weights and contexts by about as much, through two decoder
 * layers and the generator; measured at most 2.4e-3) and BF16_WEIGHTS
 * (weights in [0, 1]; measured at most 1.3e-3), padded keys' weights
 * staying 0. A model without decoder layers caches nothing: the same
 * bits. */
#define BF16_LOGITS 1e-2
#define BF16_WEIGHTS 5e-3
START_TEST(bf16_caches_round_the_float32_ones)
{
    int kind = _i;
    int64_t V = vocab_of(kind), T = MAXT - 1, S = 8;
    tfm_model *m = make_model(kind, 11, MAXT);
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, (int32_t)T);
    o.return_attention = kind != NO_DECODER_LAYERS;
    o.cache_precision = TFM_CACHE_FLOAT32;
    result *f32 = new_result(), *bf16 = new_result();
    float(*aligned)[3 * (MAXT - 1) * 8] = calloc(2, sizeof *aligned);
    ck_assert_ptr_nonnull(aligned);
    decode_forced(m, &o, src, NULL, f32, aligned[0]);
    o.cache_precision = TFM_CACHE_BFLOAT16;
    decode_forced(m, &o, src, f32->tokens, bf16, aligned[1]);
    ck_assert_mem_eq(bf16->tokens, f32->tokens, 3 * MAXT * sizeof(int32_t));
    int differ, weights_differ;
    double logits = deviation(bf16->logits, f32->logits, 3 * T * V, &differ);
    double weights = deviation(aligned[1], aligned[0], 3 * T * S, &weights_differ);
    ck_assert_msg(kind == NO_DECODER_LAYERS ? !differ : differ && weights_differ,
                  "%s: the logits %s", kind_name[kind], differ ? "differ" : "are the same");
    ck_assert_msg(logits <= BF16_LOGITS && weights <= BF16_WEIGHTS,
                  "%s: logits %.3g, weights %.3g from float32 caches'", kind_name[kind], logits,
                  weights);
    for (int64_t b = 1; b < 3; b++) /* the padded sources */
        for (int64_t i = 0; i < T * S; i++)
            ck_assert(i % S < source_length[b] || aligned[1][b * T * S + i] == 0.0f);
    free(aligned);
    free(f32);
    free(bf16);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* With bfloat16 caches on a CPU with AVX512_BF16, attention multiplies in
 * bfloat16 pairs, rounding the queries and the weights too: greedy
 * decoding in pairs against the widened float32 sums over the same
 * caches, the widened run's tokens forced, every kind of model (masks,
 * relative position bias) and heads of 8 (four positions a vector), 16,
 * 32 and 64 (sixteen elements a vector), sources of 3 to 12 positions
 * (tiles part filled, odd counts) and up to 15 steps: logits within
 * PAIRS_LOGITS and weights within PAIRS_WEIGHTS of the widened run's
 * (measured at most 1.6e-3 and 6.4e-4 on Zen 4); without AVX512_BF16 (or
 * at d_k 5, T5's here) the same bits. */
#define PAIRS_LOGITS 5e-3
#define PAIRS_WEIGHTS 2.5e-3
static const int32_t pair_widths[3][3] = {{32, 2, 0}, {64, 2, 0}, {64, 1, 0}};
START_TEST(bf16_pairs_round_the_widened_sums)
{
    int kind = _i < KINDS ? _i : PLAIN;
    tfm_model *m = _i < KINDS ? make_model(kind, 11, MAXT)
                              : odd_width_model(pair_widths[_i - KINDS], MAXT);
    int64_t V = m->options.tgt_vocab, T = MAXT - 1, S = 8;
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, (int32_t)T);
    o.return_attention = kind != NO_DECODER_LAYERS;
    o.cache_precision = TFM_CACHE_BFLOAT16;
    tfm_decoding *probe = tfm_decoding_create(m, &o, 3, S);
    ck_assert_msg(probe != NULL, "%s", tfm_last_error());
    int in_pairs = probe->attend_in_pairs, capable = tfm__decode_attend_in_pairs(probe->dk);
    ck_assert_int_eq(in_pairs, capable && kind != NO_DECODER_LAYERS ? 1 : in_pairs);
    tfm_decoding_free(probe);
    result *widened = new_result(), *pairs = new_result();
    float(*aligned)[3 * (MAXT - 1) * 8] = calloc(2, sizeof *aligned);
    ck_assert_ptr_nonnull(aligned);
    tfm__decode_pairs_allowed = 0;
    decode_forced(m, &o, src, NULL, widened, aligned[0]);
    tfm__decode_pairs_allowed = 1;
    decode_forced(m, &o, src, widened->tokens, pairs, aligned[1]);
    ck_assert_mem_eq(pairs->tokens, widened->tokens, 3 * MAXT * sizeof(int32_t));
    int differ, weights_differ;
    double logits = deviation(pairs->logits, widened->logits, 3 * T * V, &differ);
    double weights = deviation(aligned[1], aligned[0], 3 * T * S, &weights_differ);
    if (!capable)
        ck_assert_msg(!differ, "without pairs the runs differ");
    else if (kind != NO_DECODER_LAYERS)
        ck_assert_msg(differ, "%s, width %d: pairs change nothing", kind_name[kind], _i);
    ck_assert_msg(logits <= PAIRS_LOGITS && weights <= PAIRS_WEIGHTS,
                  "%s, width %d: logits %.3g, weights %.3g from the widened sums'",
                  kind_name[kind], _i, logits, weights);
    free(aligned);
    free(widened);
    free(pairs);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* A tile's positions past a source's length or a row's step hold what
 * earlier runs left there: NaN in every cache byte (bfloat16 and float32
 * alike) before a run changes none of its logits, in pairs (d_k 8 and 32),
 * widened and in float32, greedy and beam, sources of 3 to 12 positions. */
START_TEST(stale_tiles_never_reach_the_context)
{
    static const tfm_cache_precision precisions[4] = {TFM_CACHE_BFLOAT16, TFM_CACHE_BFLOAT16,
                                                      TFM_CACHE_FLOAT32, TFM_CACHE_BFLOAT16};
    tfm_model *m = _i < 6 ? make_model(PLAIN, 11, MAXT) : odd_width_model(pair_widths[1], MAXT);
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, _i % 2 ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY, MAXT - 1);
    o.beam_size = o.n_best = 3;
    o.cache_precision = precisions[_i / 2];
    tfm__decode_pairs_allowed = _i / 2 != 1;
    result *fresh = new_result(), *stale = new_result();
    tfm_decoding *d = tfm_decoding_create(m, &o, 3, 8);
    ck_assert_msg(d != NULL, "%s", tfm_last_error());
    run_into(d, src, fresh, o.strategy);
    size_t tile = tile_bytes(d);
    memset(d->self_cache, 0xff, (size_t)(d->layers * d->heads * d->tiles) * tile);
    memset(d->cross_cache, 0xff,
           (size_t)(d->layers * d->max_batch * d->heads * (d->cross_tiled / BLOCK)) * tile);
    run_into(d, src, stale, o.strategy);
    tfm__decode_pairs_allowed = 1;
    assert_same_results(fresh, stale, 3 * (_i % 2 ? o.n_best : 1));
    tfm_decoding_free(d);
    free(fresh);
    free(stale);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* Beam search with bfloat16 caches past two tiles (hypotheses share their
 * parents' tiles, copy the one they write into while a sibling shares it,
 * take new ones), padded sources: each hypothesis' score (length_penalty
 * 0: its log probability) is its tokens' under the model as the
 * recomputed float32 path scores them, forced, within BF16_STEP_SCORE a
 * token (each step's log probability moves as its logits do, by about
 * BF16_LOGITS; measured at most 7.5e-4 a token, 0.03 over 41). A tile
 * copied half short moved them by 1.6 to 12. */
#define BF16_STEP_SCORE 2e-3
START_TEST(bf16_beam_scores_are_their_tokens)
{
    enum { LONG = 40, BEAM = 4, ROWS = 3 * BEAM };
    tfm_model *m = make_model(TUTORIAL_003, 11, LONG + 1);
    param(m, "generator.bias")[EOS] -= 1.5f;
    tfm_tensor *src = padded_sources();
    tfm_decode_options o;
    options(&o, TFM_DECODE_BEAM, LONG);
    o.beam_size = o.n_best = BEAM;
    o.length_penalty = 0.0f;
    o.cache_precision = TFM_CACHE_BFLOAT16;
    result *beam = new_result(), *forced = new_result();
    decode(m, &o, src, beam);
    /* each hypothesis beside its source, scored greedily with its tokens forced */
    int32_t ids[ROWS * 8];
    for (int r = 0; r < ROWS; r++)
        memcpy(ids + r * 8, tfm_tensor_data_i32(src) + r / BEAM * 8, 8 * sizeof *ids);
    tfm_tensor *rows = tfm_tensor_from_i32(2, (const int64_t[]){ROWS, 8}, ids);
    tfm_decode_options g;
    options(&g, TFM_DECODE_GREEDY, LONG);
    g.use_cache = 0;
    decode_forced(m, &g, rows, beam->tokens, forced, NULL);
    int32_t longest = 0;
    for (int r = 0; r < ROWS; r++) {
        ck_assert_int_eq(forced->lengths[r], beam->lengths[r]);
        longest = beam->lengths[r] > longest ? beam->lengths[r] : longest;
        ck_assert_msg(fabs((double)beam->scores[r] - forced->scores[r]) <=
                          BF16_STEP_SCORE * beam->lengths[r],
                      "hypothesis %d: score %.7g, its tokens' %.7g", r,
                      (double)beam->scores[r], (double)forced->scores[r]);
    }
    ck_assert_int_gt(longest, 2 * BLOCK + 1);
    free(beam);
    free(forced);
    tfm_tensor_free(rows);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* TFM_CACHE_AUTO is bfloat16 for a model quantized when the decoding is
 * made whose products run in int8 (tfm__model_int8_pays: the CPU's rule,
 * or every product and none as the int8 hook sets them), else float32;
 * only the cached path has caches; a group holds at least twice the
 * sources in bfloat16. */
START_TEST(auto_caches_follow_quantization)
{
    tfm_model *m = make_model(PLAIN, 11, MAXT);
    static const tfm_cache_precision precisions[3] = {TFM_CACHE_AUTO, TFM_CACHE_FLOAT32,
                                                      TFM_CACHE_BFLOAT16};
    static const int64_t pays_from[3] = {-1, 0, INT64_MAX}; /* the rule, every, none */
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, MAXT - 1);
    int64_t groups[3];
    for (int quantized = 0; quantized < 2; quantized++) {
        for (int rule = 0; rule < 3; rule++) {
            tfm__int8_set_pays_from(pays_from[rule]);
            int int8 = quantized && (rule == 1 || (rule == 0 && tfm__model_int8_pays(m)));
            for (int cache = 0; cache < 2; cache++)
                for (int p = 0; p < 3; p++) {
                    o.use_cache = cache;
                    o.cache_precision = precisions[p];
                    tfm_decoding *d = tfm_decoding_create(m, &o, 4, MAXS);
                    ck_assert_msg(d != NULL, "%s", tfm_last_error());
                    int bf16 = cache && (precisions[p] == TFM_CACHE_BFLOAT16 ||
                                         (precisions[p] == TFM_CACHE_AUTO && int8));
                    ck_assert_msg(d->bf16_cache == bf16, "quantized %d, rule %d, use_cache %d, "
                                  "precision %d", quantized, rule, cache, (int)precisions[p]);
                    groups[p] = d->group_sources;
                    tfm_decoding_free(d);
                }
            ck_assert_int_ge(groups[2], 2 * groups[1]);
        }
        tfm__int8_set_pays_from(-1);
        if (!quantized)
            ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS), TFM_OK);
    }
    tfm_model_free(m);
}
END_TEST

/* bfloat16 rounding to nearest even, ties to the even neighbour, an
 * infinity and a NaN kept (a NaN whose payload is in the low half only
 * would round to an infinity), a finite value past bfloat16's largest
 * made infinite; widening back is exact. */
START_TEST(bf16_rounding)
{
    static const struct {
        uint32_t bits;
        uint16_t want;
    } cases[] = {
        {0x3f800000u, 0x3f80}, {0x3f808000u, 0x3f80}, {0x3f818000u, 0x3f82},
        {0x3f808001u, 0x3f81}, {0x3f807fffu, 0x3f80}, {0xbfc00000u, 0xbfc0},
        {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80}, {0x7f7fffffu, 0x7f80},
        {0x7f7f7fffu, 0x7f7f}, {0x00000000u, 0x0000}, {0x80000000u, 0x8000},
        {0x00018000u, 0x0002}, {0xc0490fdbu, 0xc049},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float x;
        memcpy(&x, &cases[i].bits, sizeof x);
        ck_assert_msg(tfm__bf16_round(x) == cases[i].want, "%08x: %04x, not %04x",
                      cases[i].bits, tfm__bf16_round(x), cases[i].want);
    }
    static const uint32_t nans[3] = {0x7fc00000u, 0x7f800001u, 0xff80ffffu};
    for (int i = 0; i < 3; i++) {
        float x;
        memcpy(&x, &nans[i], sizeof x);
        uint32_t widened = (uint32_t)tfm__bf16_round(x) << 16;
        memcpy(&x, &widened, sizeof x);
        ck_assert_msg(isnan(x), "%08x", nans[i]);
    }
    uint16_t h[16];
    for (int i = 0; i < 16; i++)
        h[i] = tfm__bf16_round((float)(i - 8) * 0.3f);
    float wide[16];
    store16(wide, load16_bf16(h));
    for (int i = 0; i < 16; i++) {
        uint32_t bits;
        memcpy(&bits, &wide[i], sizeof bits);
        ck_assert_uint_eq(bits, (uint32_t)h[i] << 16);
    }
}
END_TEST

/* --- errors ------------------------------------------------------------------------------ */

static void expect_create_error(tfm_model *m, const tfm_decode_options *o, int64_t batch,
                                int64_t len, tfm_status status, const char *text)
{
    tfm_clear_error();
    tfm_decoding *d = tfm_decoding_create(m, o, batch, len);
    ck_assert_msg(d == NULL, "created despite: %s", text);
    ck_assert_msg(tfm_last_status() == status, "%s: status %s, message %s", text,
                  tfm_status_name(tfm_last_status()), tfm_last_error());
    ck_assert_msg(strstr(tfm_last_error(), text) != NULL, "'%s' not in '%s'", text,
                  tfm_last_error());
}

START_TEST(create_errors)
{
    tfm_model *m = make_model(PLAIN, 11, MAXT);
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, MAXT - 1);
    expect_create_error(NULL, &o, 1, 4, TFM_ERR_NULL, "model is NULL");
    expect_create_error(m, NULL, 1, 4, TFM_ERR_NULL, "options is NULL");
    static const struct {
        int field;
        double value;
        const char *text;
    } bad[] = {
        {0, 3, "strategy"},           {0, -1, "strategy"},
        {1, 0, "max_length"},         {1, MAXT, "max_length"},
        {2, -1, "bos_id"},            {2, 11, "bos_id"},
        {3, -2, "eos_id"},            {3, 11, "eos_id"},
        {4, -2, "src_pad_id"},        {4, 13, "src_pad_id"},
        {5, 0, "temperature"},        {5, -1, "temperature"},
        {5, NAN, "temperature"},      {5, INFINITY, "temperature"},
        {6, -1, "top_k"},             {7, 0, "top_p"},
        {7, 1.5, "top_p"},            {7, NAN, "top_p"},
        {8, 0, "beam_size"},          {8, 70000, "beam_size"},
        {9, NAN, "length_penalty"},   {10, 0, "n_best"},
        {10, 5, "n_best"},            {11, 0, "struct_size"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tfm_decode_options b = o;
        switch (bad[i].field) {
        case 0: b.strategy = (int32_t)bad[i].value; break;
        case 1: b.max_length = (int32_t)bad[i].value; break;
        case 2: b.bos_id = (int32_t)bad[i].value; break;
        case 3: b.eos_id = (int32_t)bad[i].value; break;
        case 4: b.src_pad_id = (int32_t)bad[i].value; break;
        case 5: b.temperature = (float)bad[i].value; break;
        case 6: b.top_k = (int32_t)bad[i].value; break;
        case 7: b.top_p = (float)bad[i].value; break;
        case 8: b.beam_size = (int32_t)bad[i].value; break;
        case 9: b.length_penalty = (float)bad[i].value; break;
        case 10: b.n_best = (int32_t)bad[i].value; break;
        default: b.struct_size = 2; break;
        }
        expect_create_error(m, &b, 1, 4, TFM_ERR_ARG, bad[i].text);
    }
    expect_create_error(m, &o, 0, 4, TFM_ERR_ARG, "max_batch 0");
    expect_create_error(m, &o, 1, 0, TFM_ERR_ARG, "max_src_len 0");
    expect_create_error(m, &o, 1, MAXS + 1, TFM_ERR_ARG, "max_src_len 13");
    expect_create_error(m, &o, (int64_t)1 << 40, 4, TFM_ERR_SIZE, "too large");
    o.strategy = TFM_DECODE_BEAM;
    o.beam_size = 65536;
    expect_create_error(m, &o, 32767, MAXS, TFM_ERR_SIZE, "too large");
    /* a struct from an older, shorter version gets the defaults beyond it */
    tfm_decode_options old;
    tfm_decode_options_init(&old);
    old.struct_size = (uint32_t)offsetof(tfm_decode_options, temperature);
    old.max_length = 7;
    tfm_decoding *d = tfm_decoding_create(m, &old, 1, 4);
    ck_assert_msg(d != NULL, "%s", tfm_last_error());
    tfm_decoding_free(d);
    tfm_decoding_free(NULL);
    tfm_decode_options_init_sized(NULL, sizeof(tfm_decode_options));
    tfm_model_free(m);
}
END_TEST

static void expect_run_error(tfm_decoding *d, const tfm_tensor *src, int32_t *tokens,
                             int32_t *lengths, float *logits, tfm_status status, const char *text)
{
    tfm_clear_error();
    tfm_status s = tfm_decoding_run(d, src, tokens, ROOM, lengths, 256, NONE, logits,
                                    64 * MAXT * 13, NONE);
    ck_assert_msg(s == status && tfm_last_status() == status, "%s: status %s, message %s", text,
                  tfm_status_name(s), tfm_last_error());
    ck_assert_msg(strstr(tfm_last_error(), text) != NULL, "'%s' not in '%s'", text,
                  tfm_last_error());
}

START_TEST(run_errors)
{
    tfm_model *m = make_model(TUTORIAL_003, 11, MAXT);
    tfm_decode_options o;
    options(&o, TFM_DECODE_GREEDY, MAXT - 1);
    tfm_decoding *d = tfm_decoding_create(m, &o, 3, 8);
    ck_assert_msg(d != NULL, "%s", tfm_last_error());
    tfm_tensor *src = padded_sources();
    result *r = new_result();
    expect_run_error(NULL, src, r->tokens, r->lengths, NULL, TFM_ERR_NULL, "decoding is NULL");
    expect_run_error(d, NULL, r->tokens, r->lengths, NULL, TFM_ERR_NULL, "src");
    expect_run_error(d, src, NULL, r->lengths, NULL, TFM_ERR_NULL, "tokens is NULL");
    expect_run_error(d, src, r->tokens, NULL, NULL, TFM_ERR_NULL, "lengths is NULL");
    tfm_tensor *f = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){3, 8});
    expect_run_error(d, f, r->tokens, r->lengths, NULL, TFM_ERR_DTYPE, "src");
    tfm_tensor *flat = tfm_tensor_zeros(TFM_I32, 1, (const int64_t[]){8});
    expect_run_error(d, flat, r->tokens, r->lengths, NULL, TFM_ERR_SHAPE, "[batch, length]");
    tfm_tensor *wide = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){3, 9});
    expect_run_error(d, wide, r->tokens, r->lengths, NULL, TFM_ERR_SHAPE, "max_src_len 8");
    tfm_tensor *tall = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){4, 8});
    expect_run_error(d, tall, r->tokens, r->lengths, NULL, TFM_ERR_SHAPE, "max_batch 3");
    int32_t *ids = tfm_tensor_data_i32(src);
    ids[9] = 13;
    expect_run_error(d, src, r->tokens, r->lengths, NULL, TFM_ERR_RANGE, "src[1,1] is 13");
    ids[9] = -1;
    expect_run_error(d, src, r->tokens, r->lengths, NULL, TFM_ERR_RANGE, "src[1,1] is -1");
    ids[9] = 6;
    /* an unusable trainable attention scale, as the layers reject it */
    float *scale = param(m, "decoder.layers.1.multihead_attn.scale");
    *scale = 0.0f;
    expect_run_error(d, src, r->tokens, r->lengths, NULL, TFM_ERR_NUMERIC, "scale is 0");
    *scale = 4.0f;
    /* logits that are not finite, in both paths */
    param(m, "generator.bias")[3] = NAN;
    expect_run_error(d, src, r->tokens, r->lengths, NULL, TFM_ERR_NUMERIC, "not finite");
    tfm_decoding_free(d);
    o.use_cache = 0;
    d = tfm_decoding_create(m, &o, 3, 8);
    expect_run_error(d, src, r->tokens, r->lengths, NULL, TFM_ERR_NUMERIC, "not finite");
    tfm_decoding_free(d);
    param(m, "generator.bias")[3] = 0.0f;
    /* beam search has no per-step logits or probabilities */
    o.strategy = TFM_DECODE_BEAM;
    d = tfm_decoding_create(m, &o, 3, 8);
    expect_run_error(d, src, r->tokens, r->lengths, r->logits, TFM_ERR_ARG, "beam search");
    ck_assert_int_eq(tfm_decoding_run(d, src, TOKENS(r), NONE, NONE, NONE), TFM_OK);
    tfm_decoding_free(d);
    tfm_tensor_free(f);
    tfm_tensor_free(flat);
    tfm_tensor_free(wide);
    tfm_tensor_free(tall);
    tfm_tensor_free(src);
    free(r);
    tfm_model_free(m);
}
END_TEST

/* Buffers come with their sizes: one element short is refused before
 * anything is written, with the count needed; the query gives the counts. */
START_TEST(run_checks_buffer_sizes)
{
    enum { B = 3, L = MAXT - 1, V = 11 };
    tfm_model *m = make_model(TUTORIAL_003, V, MAXT);
    tfm_tensor *src = padded_sources();
    result *r = new_result();
    for (int strategy = 0; strategy < 3; strategy++) {
        int beam = strategy == TFM_DECODE_BEAM;
        tfm_decode_options o;
        options(&o, strategy, L);
        o.n_best = beam ? 2 : 1;
        tfm_decoding *d = tfm_decoding_create(m, &o, 4, 8);
        ck_assert_msg(d != NULL, "%s", tfm_last_error());
        int64_t n_tokens, n_lengths, n_scores, n_logits;
        ck_assert_int_eq(tfm_decoding_buffer_sizes(d, B, &n_tokens, &n_lengths, &n_scores,
                                                   &n_logits), TFM_OK);
        int64_t hypotheses = B * o.n_best;
        ck_assert_int_eq(n_tokens, hypotheses * (L + 1));
        ck_assert_int_eq(n_lengths, hypotheses);
        ck_assert_int_eq(n_scores, hypotheses);
        ck_assert_int_eq(n_logits, beam ? 0 : B * L * V);
        float *logits = beam ? NULL : r->logits, *probs = beam ? NULL : r->probs;
        /* each buffer one element short in turn: nothing is written */
        for (int shorter = 0; shorter < (beam ? 3 : 5); shorter++) {
            memset(r, 0x7f, sizeof *r);
            int64_t counts[5] = {n_tokens, n_lengths, n_scores, n_logits, n_logits};
            counts[shorter]--;
            tfm_clear_error();
            ck_assert_int_eq(tfm_decoding_run(d, src, r->tokens, counts[0], r->lengths, counts[1],
                                              r->scores, counts[2], logits, counts[3], probs,
                                              counts[4]),
                             TFM_ERR_SIZE);
            static const char *const names[5] = {"tokens", "lengths", "scores", "logits",
                                                  "probs"};
            char text[128];
            snprintf(text, sizeof text, "tfm_decoding_run: %s holds %lld elements; this batch "
                     "needs %lld", names[shorter], (long long)counts[shorter],
                     (long long)counts[shorter] + 1);
            ck_assert_msg(strstr(tfm_last_error(), text), "'%s' lacks '%s'", tfm_last_error(),
                          text);
            ck_assert_int_eq(r->tokens[0], 0x7f7f7f7f);
            ck_assert_int_eq(r->lengths[0], 0x7f7f7f7f);
        }
        /* exactly the counts, and NULL for what is not wanted (its count unread) */
        ck_assert_int_eq(tfm_decoding_run(d, src, r->tokens, n_tokens, r->lengths, n_lengths,
                                          r->scores, n_scores, logits, n_logits, probs, n_logits),
                         TFM_OK);
        ck_assert_int_eq(r->tokens[n_tokens], 0x7f7f7f7f); /* nothing past them */
        ck_assert_int_eq(tfm_decoding_run(d, src, r->tokens, n_tokens, r->lengths, n_lengths, NULL,
                                          -1, NULL, -1, NULL, -1),
                         TFM_OK);
        tfm_clear_error();
        ck_assert_int_eq(tfm_decoding_buffer_sizes(d, 5, &n_tokens, NULL, NULL, NULL),
                         TFM_ERR_ARG);
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "batch 5 is outside the decoding's 1..4"));
        ck_assert_int_eq(tfm_decoding_buffer_sizes(d, 0, NULL, NULL, NULL, NULL), TFM_ERR_ARG);
        tfm_decoding_free(d);
    }
    ck_assert_int_eq(tfm_decoding_buffer_sizes(NULL, 1, NULL, NULL, NULL, NULL), TFM_ERR_NULL);
    free(r);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

static Suite *decode_suite(void)
{
    Suite *s = suite_create("decode");
    TCase *c = tcase_create("decode");
    tcase_set_timeout(c, 120);
    tcase_add_loop_test(c, cached_equals_recomputed, 0, 3 * KINDS);
    tcase_add_loop_test(c, cached_equals_recomputed_past_a_tile, 0, 2);
    tcase_add_loop_test(c, groups_equal_recomputed, 0, 2);
    tcase_add_loop_test(c, sources_encoded_per_thread_decode_as_on_one, 0, 2);
    tcase_add_test(c, the_largest_found_in_lanes_is_the_loops);
    tcase_add_test(c, rivals_are_never_skipped);
    tcase_add_test(c, a_tile_put_at_once_is_its_positions_put_one_by_one);
    tcase_add_loop_test(c, odd_head_widths_equal_recomputed, 0, 2 * 7);
    tcase_add_loop_test(c, a_tape_in_evaluation_runs_a_training_model_without_dropout, 0, 6);
    tcase_add_loop_test(c, a_batch_encoded_in_slices_decodes_as_its_sources, 0, 2);
    tcase_add_test(c, a_run_needs_less_memory_than_the_batchs_encoding);
    tcase_add_loop_test(c, a_runs_encoding_is_the_models, 0, KINDS + 1);
    tcase_add_loop_test(c, a_source_of_padding_only, 0, 2);
    tcase_add_loop_test(c, trailing_padding_changes_nothing, 0, 2 * KINDS);
    tcase_add_loop_test(c, prefetching_changes_nothing, 0, 4 * KINDS);
    tcase_add_loop_test(c, greedy_is_the_argmax_step_by_step, 0, KINDS);
    tcase_add_test(c, max_length_and_no_eos);
    tcase_add_test(c, sampling_seeds_and_limits);
    tcase_add_test(c, sampling_filters_and_frequencies);
    tcase_add_loop_test(c, beam_of_one_is_greedy, 0, KINDS);
    tcase_add_loop_test(c, beam_ranks_and_beats_greedy, 0, KINDS);
    tcase_add_loop_test(c, wide_beam_is_exhaustive, 0, 2);
    tcase_add_test(c, steady_state_and_mode);
    tcase_add_loop_test(c, a_run_reads_the_weights_as_they_are, 0, 2);
    tcase_add_loop_test(c, bf16_caches_round_the_float32_ones, 0, KINDS);
    tcase_add_loop_test(c, bf16_pairs_round_the_widened_sums, 0, KINDS + 3);
    tcase_add_loop_test(c, stale_tiles_never_reach_the_context, 0, 8);
    tcase_add_test(c, bf16_beam_scores_are_their_tokens);
    tcase_add_test(c, auto_caches_follow_quantization);
    tcase_add_test(c, bf16_rounding);
    tcase_add_test(c, create_errors);
    tcase_add_test(c, run_errors);
    tcase_add_test(c, run_checks_buffer_sizes);
    suite_add_tcase(s, c);
    return s;
}

TFM_CHECK_MAIN(decode_suite)
