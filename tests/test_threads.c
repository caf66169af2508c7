/* Two trainings in two program threads at once, each on libtfm's pool of
 * 2 threads: the same losses and parameters, bit for bit, as the same two
 * trainings one after the other. Sizes where layer norm, attention and
 * Adam split their loops. Meant for ThreadSanitizer too
 * (docs/reliability.md). */
#define _GNU_SOURCE /* dladdr, sched_setaffinity */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/parallel.h"

#include "check_main.h"
#include "reliability.h"

enum { STEPS = 3, BATCH = 4, LEN = 64, VOCAB = 11 };

typedef struct training {
    uint64_t seed;
    float losses[STEPS];
    double parameter_sum;
    tfm_status status;
} training;

static void *train(void *arg)
{
    training *t = arg;
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = o.tgt_vocab = VOCAB;
    o.max_src_len = o.max_tgt_len = LEN;
    o.encoder_layers = o.decoder_layers = 1;
    o.d_model = 128;
    o.heads = 4;
    o.d_ff = 64;
    o.seed = t->seed;
    tfm_model *m = tfm_model_create(&o);
    tfm_optimizer_options oo;
    tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAM);
    tfm_optimizer *opt = tfm_optimizer_create(tfm_model_params(m), &oo);
    int32_t ids[BATCH * LEN];
    for (int i = 0; i < BATCH * LEN; i++)
        ids[i] = 1 + (int32_t)((i * 7 + t->seed) % (VOCAB - 1));
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){BATCH, LEN}, ids);
    tfm_tape *tape = tfm_tape_create();
    t->status = m && opt && src && tape ? TFM_OK : TFM_ERR_NOMEM;
    for (int s = 0; s < STEPS && t->status == TFM_OK; s++) {
        tfm_tensor *logits = tfm_model_forward(tape, m, src, src, NULL,
                                               tfm_mask_causal(tape, LEN, TFM_F32), NULL,
                                               NULL, NULL, NULL);
        tfm_tensor *loss = tfm_cross_entropy(tape, logits, src, 0, 0.1f);
        t->status = tfm_tensor_item(loss, &t->losses[s]);
        if (t->status == TFM_OK)
            t->status = tfm_tape_backward(tape, loss);
        if (t->status == TFM_OK)
            t->status = tfm_optimizer_step(opt);
        tfm_optimizer_zero_grad(opt);
        tfm_tape_reset(tape);
    }
    const float *v = m ? tfm_params_values(tfm_model_params(m)) : NULL;
    for (int64_t i = 0; v && i < tfm_params_numel(tfm_model_params(m)); i++)
        t->parameter_sum += v[i] * (double)(1 + i % 13);
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_optimizer_free(opt);
    tfm_model_free(m);
    return NULL;
}

START_TEST(two_trainings_at_once_match_one_after_the_other)
{
    ck_assert_int_eq(tfm_set_num_threads(2), TFM_OK);
    training alone[2] = {{.seed = 1}, {.seed = 2}}, together[2] = {{.seed = 1}, {.seed = 2}};
    train(&alone[0]);
    train(&alone[1]);
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, train, &together[i]), 0);
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_join(threads[i], NULL), 0);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(alone[i].status, TFM_OK);
        ck_assert_int_eq(together[i].status, TFM_OK);
        ck_assert_mem_eq(together[i].losses, alone[i].losses, sizeof alone[i].losses);
        ck_assert(together[i].parameter_sum == alone[i].parameter_sum);
    }
    ck_assert(alone[0].losses[STEPS - 1] != alone[1].losses[STEPS - 1]);
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
}
END_TEST

/* y = x W^T + b and its three gradients, with libtfm on `threads`; a
 * product this size is split among the threads. */
enum { ROWS = 300, IN = 256, OUT = 384 };
static void linear_step(int threads, float *out)
{
    ck_assert_int_eq(tfm_set_num_threads(threads), TFM_OK);
    tfm_rng *rng = tfm_rng_create(5);
    tfm_tensor *x = tfm_tensor_uniform(2, (const int64_t[]){ROWS, IN}, -1, 1, rng);
    tfm_tensor *w = tfm_tensor_uniform(2, (const int64_t[]){OUT, IN}, -1, 1, rng);
    tfm_tensor *b = tfm_tensor_uniform(1, (const int64_t[]){OUT}, -1, 1, rng);
    tfm_tensor *leaves[] = {x, w, b};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(tfm_tensor_set_requires_grad(leaves[i], 1), TFM_OK);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *y = tfm_linear(tape, x, w, b);
    ck_assert_int_eq(tfm_tensor_read_f32(y, out, ROWS * OUT), TFM_OK);
    out += ROWS * OUT;
    /* a loss whose gradient is not uniform: sum(y * y) */
    ck_assert_int_eq(tfm_tape_backward(tape, tfm_sum(tape, tfm_mul(tape, y, y))), TFM_OK);
    for (int i = 0; i < 3; i++) {
        int64_t n = tfm_tensor_numel(leaves[i]);
        ck_assert_int_eq(tfm_tensor_read_grad(leaves[i], out, n), TFM_OK);
        out += n;
        tfm_tensor_free(leaves[i]);
    }
    tfm_tape_free(tape);
    tfm_rng_free(rng);
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
}

START_TEST(products_split_among_threads_agree)
{
    enum { VALUES = ROWS * OUT + ROWS * IN + OUT * IN + OUT };
    float *one = malloc(VALUES * sizeof(float)), *two = malloc(VALUES * sizeof(float));
    linear_step(1, one);
    linear_step(2, two);
    /* each piece sums over the whole depth, but the BLAS may pick another
     * kernel (or BLIS another blocking) for a piece, which rounds
     * differently: within float rounding of each tensor's largest values
     * (a wrong piece is off by as much as they are) */
    const int sizes[] = {ROWS * OUT, ROWS * IN, OUT * IN, OUT};
    for (int part = 0, first = 0; part < 4; first += sizes[part++]) {
        float largest = 0.0f;
        for (int i = first; i < first + sizes[part]; i++)
            largest = fmaxf(largest, fabsf(one[i]));
        for (int i = first; i < first + sizes[part]; i++)
            ck_assert_float_le(fabsf(one[i] - two[i]), 1e-5f * largest);
    }
    free(one);
    free(two);
}
END_TEST

/* Greedy and beam decoding of enough sources that they are decoded in
 * groups on the threads (6 groups greedily, 16 with beams of 4), and a
 * beam's hypotheses share cache tiles: the same sequences as on one
 * thread, scores within rounding (the encoder's products are split too). */
enum { SOURCES = 96, SRC_LEN = 20, MAX_LEN = 14, BEAM = 4 };
typedef struct decoded {
    int32_t tokens[SOURCES * BEAM * (MAX_LEN + 1)], lengths[SOURCES * BEAM];
    float scores[SOURCES * BEAM];
} decoded;

/* Decodes the sources; with nan_from_step >= 0, the generator's output is
 * made NaN from that step on, through the learned position it reads. */
static tfm_status decode_with(int threads, tfm_decode_strategy strategy, decoded *out,
                              int nan_from_step)
{
    ck_assert_int_eq(tfm_set_num_threads(threads), TFM_OK);
    tfm_model_options mo;
    tfm_model_options_init(&mo);
    mo.src_vocab = mo.tgt_vocab = VOCAB;
    mo.max_src_len = SRC_LEN;
    mo.max_tgt_len = MAX_LEN + 1;
    mo.encoder_layers = mo.decoder_layers = 2;
    mo.d_model = 64;
    mo.heads = 8;
    mo.d_ff = 64;
    mo.seed = 3;
    if (nan_from_step >= 0)
        mo.positions = TFM_POSITIONS_LEARNED;
    tfm_model *m = tfm_model_create(&mo);
    ck_assert_ptr_nonnull(m);
    if (nan_from_step >= 0) {
        tfm_tensor *positions = tfm_params_find(tfm_model_params(m), "tgt_positions.weight");
        ck_assert_ptr_nonnull(positions);
        tfm_tensor_data_f32(positions)[nan_from_step * mo.d_model] = NAN;
    }
    int32_t ids[SOURCES * SRC_LEN];
    for (int i = 0; i < SOURCES * SRC_LEN; i++)
        ids[i] = 3 + (int32_t)((i * 7 + i / SRC_LEN * 5) % (VOCAB - 3));
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){SOURCES, SRC_LEN}, ids);
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    o.strategy = strategy;
    o.max_length = MAX_LEN;
    o.beam_size = BEAM;
    o.n_best = BEAM;
    /* a token this seeded model never chooses greedily, and chooses for
     * some beam hypotheses after 1 to 13 others */
    o.eos_id = 5;
    tfm_decoding *d = tfm_decoding_create(m, &o, SOURCES, SRC_LEN);
    ck_assert_msg(d != NULL, "%s", tfm_last_error());
    int64_t rows = strategy == TFM_DECODE_BEAM ? SOURCES * BEAM : SOURCES;
    tfm_status status = tfm_decoding_run(d, src, out->tokens, rows * (MAX_LEN + 1),
                                         out->lengths, rows, out->scores, rows, NULL, 0, NULL, 0);
    tfm_decoding_free(d);
    tfm_tensor_free(src);
    tfm_model_free(m);
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
    return status;
}

START_TEST(decoding_on_two_threads_matches_one)
{
    tfm_decode_strategy strategy = _i ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY;
    decoded *one = calloc(1, sizeof *one), *two = calloc(1, sizeof *two);
    ck_assert_int_eq(decode_with(1, strategy, one, -1), TFM_OK);
    ck_assert_int_eq(decode_with(2, strategy, two, -1), TFM_OK);
    int64_t rows = strategy == TFM_DECODE_BEAM ? SOURCES * BEAM : SOURCES;
    int32_t shortest = MAX_LEN + 1, longest = 0;
    for (int64_t r = 0; r < rows; r++) {
        ck_assert_int_eq(two->lengths[r], one->lengths[r]);
        shortest = one->lengths[r] < shortest ? one->lengths[r] : shortest;
        longest = one->lengths[r] > longest ? one->lengths[r] : longest;
        ck_assert_float_le(fabsf(two->scores[r] - one->scores[r]),
                           1e-5f * (1.0f + fabsf(one->scores[r])));
    }
    ck_assert_mem_eq(two->tokens, one->tokens, sizeof one->tokens);
    /* hypotheses leave the step while others go on */
    if (strategy == TFM_DECODE_BEAM)
        ck_assert_int_lt(shortest, longest);
    free(one);
    free(two);
}
END_TEST

/* Logits that are not finite in groups of sources decoded on libtfm's
 * threads are reported by the calling thread, at the first such step. */
START_TEST(decoding_reports_logits_not_finite_from_the_threads)
{
    tfm_decode_strategy strategy = _i ? TFM_DECODE_BEAM : TFM_DECODE_GREEDY;
    decoded *out = calloc(1, sizeof *out);
    for (int threads = 1; threads <= 2; threads++) {
        ck_assert_int_eq(decode_with(threads, strategy, out, 3), TFM_ERR_NUMERIC);
        ck_assert_msg(strstr(tfm_last_error(), "at step 3 are not finite") != NULL, "%s",
                      tfm_last_error());
    }
    free(out);
}
END_TEST

/* With several libtfm threads the BLAS runs on one; back at one libtfm
 * thread it has its own count again. The BLAS is the library whose
 * cblas_sgemm the process calls (BLIS may be preloaded over OpenBLAS). */
START_TEST(the_blas_runs_on_one_thread_under_libtfms)
{
    int (*get)(void) = NULL;
    void (*set)(int) = NULL;
    const char *names[][2] = {{"openblas_get_num_threads", "openblas_set_num_threads"},
                              {"bli_thread_get_num_threads", "bli_thread_set_num_threads"}};
    Dl_info info;
    ck_assert(dladdr(dlsym(RTLD_DEFAULT, "cblas_sgemm"), &info) && info.dli_fname);
    void *blas = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    ck_assert_ptr_nonnull(blas);
    for (int i = 0; i < 2 && !(get && set); i++) {
        *(void **)&get = dlsym(blas, names[i][0]);
        *(void **)&set = dlsym(blas, names[i][1]);
    }
    dlclose(blas);
    ck_assert_msg(get && set, "neither OpenBLAS's nor BLIS's thread calls are linked");
    set(2);
    int found = get(); /* 1 on a serial build */
    ck_assert_int_eq(tfm_set_num_threads(2), TFM_OK);
    ck_assert_int_eq(get(), 1);
    ck_assert_int_eq(tfm_set_num_threads(3), TFM_OK);
    ck_assert_int_eq(get(), 1);
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
    ck_assert_int_eq(get(), found);
}
END_TEST

static void count_share(void *ctx, int64_t begin, int64_t end, int worker)
{
    ((int64_t *)ctx)[worker] += end - begin;
}

/* Two libtfm threads on one core, as on a host whose other cores are
 * busy: a thread waiting for the other offers it the core after a short
 * poll, so that a loop costs tens of microseconds of CPU time, where
 * polling through its whole spin (about 1 ms a loop here) kept the other
 * off its core all that while. */
START_TEST(threads_sharing_a_core_hand_it_over)
{
    enum { LOOPS = 400 };
    cpu_set_t set;
    ck_assert_int_eq(sched_getaffinity(0, sizeof set, &set), 0);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &set))
        cpu++;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    ck_assert_int_eq(sched_setaffinity(0, sizeof set, &set), 0); /* the workers started next too */
    ck_assert_int_eq(tfm_set_num_threads(2), TFM_OK);
    int64_t done[2] = {0, 0};
    tfm__parallel_for(2, 2, count_share, done);
    struct timespec start, end;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
    for (int i = 0; i < LOOPS; i++)
        tfm__parallel_for(2, 2, count_share, done);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &end);
    double per_loop = ((double)(end.tv_sec - start.tv_sec) +
                       1e-9 * (double)(end.tv_nsec - start.tv_nsec)) / LOOPS;
    ck_assert_int_eq(done[0], LOOPS + 1);
    ck_assert_int_eq(done[1], LOOPS + 1);
    ck_assert_msg(per_loop < 250e-6, "a loop on one core took %.0f us of CPU time",
                  per_loop * 1e6);
}
END_TEST

static Suite *threads_suite(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("threads");
    tcase_add_test(tc, two_trainings_at_once_match_one_after_the_other);
    tcase_add_test(tc, products_split_among_threads_agree);
    tcase_add_test(tc, the_blas_runs_on_one_thread_under_libtfms);
    tcase_add_test(tc, threads_sharing_a_core_hand_it_over);
    tcase_add_loop_test(tc, decoding_on_two_threads_matches_one, 0, 2);
    tcase_add_loop_test(tc, decoding_reports_logits_not_finite_from_the_threads, 0, 2);
    tcase_set_timeout(tc, 600);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(threads_suite)
