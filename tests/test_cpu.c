/* The kernels' code paths (lib/core/cpu.h): TFM_CPU is obeyed, and every
 * path this CPU can run gives the same training step, optimizer update and
 * decoding as the best one, within rounding. Each path runs in a child
 * process of this program (the path is chosen once per process). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_at_path.h"
#include "tfm/tfm.h"

/* The floats the workload writes: logits, loss, gradients, parameters after
 * two Adam steps, decoding logits and three standalone ops. */
enum { BATCH = 3, SRC = 19, TGT = 23, VOCAB = 29, MAX_FLOATS = 1 << 20 };

/* The workload runs outside Check (in the child): a failure exits. */
static void need(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "test_cpu --workload: %s: %s\n", what, tfm_last_error());
        exit(EXIT_FAILURE);
    }
}

static void append(float *out, int64_t *n, const float *values, int64_t count)
{
    need(*n + count <= MAX_FLOATS, "MAX_FLOATS is too small");
    memcpy(out + *n, values, (size_t)count * sizeof *values);
    *n += count;
}

static void append_tensor(float *out, int64_t *n, const tfm_tensor *t)
{
    need(t != NULL, "an op failed");
    int64_t count = tfm_tensor_numel(t);
    need(*n + count <= MAX_FLOATS, "MAX_FLOATS is too small");
    need(tfm_tensor_read_f32(t, out + *n, count) == TFM_OK, "tfm_tensor_read_f32");
    *n += count;
}

static tfm_tensor *ids(int64_t length, int32_t salt)
{
    int32_t values[BATCH * TGT];
    for (int64_t i = 0; i < BATCH * length; i++)
        values[i] = 3 + (int32_t)((i * 7 + salt) % (VOCAB - 3));
    return tfm_tensor_from_i32(2, (const int64_t[]){BATCH, length}, values);
}

/* Sizes with row tails that are not multiples of 16, dropout on, both mask
 * kinds: every kernel of every path runs. Returns the floats written. */
static int64_t workload(float *out)
{
    int64_t n = 0;
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = o.tgt_vocab = VOCAB;
    o.max_src_len = o.max_tgt_len = 32;
    o.encoder_layers = o.decoder_layers = 2;
    o.d_model = 64;
    o.heads = 4;
    o.d_ff = 96;
    o.dropout = 0.1f;
    o.seed = 11;
    tfm_model *m = tfm_model_create(&o);
    need(m != NULL, "tfm_model_create");
    tfm_optimizer_options oo;
    tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAM);
    tfm_optimizer *opt = tfm_optimizer_create(tfm_model_params(m), &oo);
    need(opt != NULL, "tfm_optimizer_create");
    tfm_tensor *src = ids(SRC, 1), *tgt = ids(TGT, 2), *targets = ids(TGT, 5);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *logits = tfm_model_forward(tape, m, src, tgt, NULL,
                                           tfm_mask_causal(tape, TGT, TFM_F32), NULL,
                                           NULL, NULL, NULL);
    tfm_tensor *loss = tfm_cross_entropy(tape, logits, targets, 0, 0.1f);
    append_tensor(out, &n, logits);
    append_tensor(out, &n, loss);
    need(tfm_tape_backward(tape, loss) == TFM_OK, "tfm_tape_backward");
    tfm_params *p = tfm_model_params(m);
    float *grads = tfm_params_grads(p);
    int64_t count = tfm_params_numel(p);
    append(out, &n, grads, count);
    tfm_tape_reset(tape);
    /* Adam's first steps move a parameter by about lr whatever its
     * gradient's size, so a near-zero gradient's rounding would decide a
     * sign: the steps take the same gradients on every path instead */
    for (int step = 0; step < 2; step++) {
        for (int64_t i = 0; i < count; i++)
            grads[i] = cosf((float)(i + step)) * 1e-2f;
        need(tfm_optimizer_step(opt) == TFM_OK, "tfm_optimizer_step");
    }
    append(out, &n, tfm_params_values(p), count);

    tfm_decode_options d;
    tfm_decode_options_init(&d);
    d.max_length = 20;
    d.eos_id = -1;
    tfm_decoding *dec = tfm_decoding_create(m, &d, BATCH, SRC);
    need(dec != NULL, "tfm_decoding_create");
    int32_t tokens[BATCH * 21], lengths[BATCH];
    static float decode_logits[BATCH * 20 * VOCAB];
    need(tfm_decoding_run(dec, src, tokens, BATCH * 21, lengths, BATCH, NULL, 0,
                            decode_logits, BATCH * 20 * VOCAB, NULL, 0) == TFM_OK,
         "tfm_decoding_run");
    append(out, &n, decode_logits, BATCH * 20 * VOCAB);

    /* the ops apart: log-softmax, dropout and a keep-masked softmax */
    float x[BATCH * 37];
    int32_t keep[37];
    for (int i = 0; i < BATCH * 37; i++)
        x[i] = sinf((float)i * 0.7f) * 5.0f;
    for (int i = 0; i < 37; i++)
        keep[i] = i % 5 != 0;
    tfm_tensor *xt = tfm_tensor_from_f32(2, (const int64_t[]){BATCH, 37}, x);
    tfm_tensor *kt = tfm_tensor_from_i32(1, (const int64_t[]){37}, keep);
    tfm_rng *rng = tfm_rng_create(3);
    append_tensor(out, &n, tfm_log_softmax(tape, xt));
    append_tensor(out, &n, tfm_dropout(tape, xt, 0.3f, 1, rng));
    append_tensor(out, &n, tfm_softmax(tape, xt, kt));

    tfm_rng_free(rng);
    tfm_tensor_free(xt);
    tfm_tensor_free(kt);
    tfm_decoding_free(dec);
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_tensor_free(targets);
    tfm_optimizer_free(opt);
    tfm_model_free(m);
    return n;
}

/* The workload's floats from this program run with TFM_CPU=path. */
static int64_t workload_at(const char *path, float *out)
{
    return (int64_t)(run_at_path(path, "--workload", out, MAX_FLOATS * sizeof(float)) /
                     sizeof(float));
}

START_TEST(tfm_cpu_is_obeyed)
{
    const char *path = tfm_cpu_path(), *wanted = getenv("TFM_CPU");
    ck_assert_msg(!strcmp(path, "x86-64-v4") || !strcmp(path, "x86-64-v3") ||
                      !strcmp(path, "baseline") || !strcmp(path, "native"),
                  "path %s", path);
    if (wanted && !strcmp(wanted, "baseline") && strcmp(path, "native"))
        ck_assert_str_eq(path, "baseline");
    if (wanted && !strcmp(wanted, "x86-64-v3"))
        ck_assert_msg(strcmp(path, "x86-64-v4"), "TFM_CPU=x86-64-v3 ran x86-64-v4");
    /* bfloat16 products are AVX-512 code: a lower path refuses them */
    if (!strcmp(path, "x86-64-v3") || !strcmp(path, "baseline")) {
        ck_assert_int_eq(tfm_set_matmul_precision(TFM_MATMUL_BFLOAT16), TFM_ERR_STATE);
        ck_assert_int_eq(tfm_get_matmul_precision(), TFM_MATMUL_FLOAT32);
    }
}
END_TEST

/* The paths sum rows in different orders (16, 8 or 4 lanes), so values
 * differ by rounding: within 1e-5 of the best path's, relative to the
 * value or 1, whichever is larger. */
START_TEST(every_path_agrees_with_the_best)
{
    static float best[MAX_FLOATS], other[MAX_FLOATS];
    int64_t n = workload_at("x86-64-v4", best);
    ck_assert_int_gt(n, 0);
    const char *paths[] = {"x86-64-v3", "baseline"};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(workload_at(paths[i], other), n);
        double worst = 0.0;
        int64_t at = 0;
        for (int64_t j = 0; j < n; j++) {
            double scale = fabs(best[j]) > 1.0 ? fabs(best[j]) : 1.0;
            double error = fabs((double)other[j] - best[j]) / scale;
            if (!(error <= worst)) {
                worst = error;
                at = j;
            }
        }
        ck_assert_msg(worst <= 1e-5, "TFM_CPU=%s: float %lld is %.9g, the best path's %.9g",
                      paths[i], (long long)at, (double)other[at], (double)best[at]);
    }
}
END_TEST

static Suite *cpu_suite(void)
{
    Suite *s = suite_create("cpu");
    TCase *tc = tcase_create("paths");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, tfm_cpu_is_obeyed);
    tcase_add_test(tc, every_path_agrees_with_the_best);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--workload")) {
        static float out[MAX_FLOATS];
        int64_t n = workload(out);
        return fwrite(out, sizeof(float), (size_t)n, stdout) == (size_t)n ? EXIT_SUCCESS
                                                                         : EXIT_FAILURE;
    }
    SRunner *runner = srunner_create(cpu_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
