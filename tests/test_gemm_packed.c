/* The packed products of decoding (lib/core/gemm_packed.h), linked from
 * the library's objects: against a product in double on every row count
 * from 1 to 70 and column counts around the panels' width, odd inner
 * sizes, a weight packed in parts, with and without a bias, a row stride
 * wider than the output (its other columns untouched); the same bits on
 * one and two threads; and all of it on every code path this CPU runs
 * (TFM_CPU lowers it, lib/core/cpu.h), each in a child process. Packed in
 * bfloat16 (on CPUs with AVX512_BF16), against the sums of the operands
 * rounded to bfloat16. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/gemm_bf16.h"
#include "core/gemm_packed.h"
#include "core/vectors.h"
#include "core/tensor.h"
#include "ops/linear.h"
#include "run_at_path.h"
#include "tfm/tfm.h"

static uint64_t rng_state;

static float uniform(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return (float)(((z ^ (z >> 31)) >> 11) * 0x1p-53 * 2.0 - 1.0);
}

/* The helpers run in the children too, outside Check: no ck_assert there. */
static void *allocated(size_t bytes)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "test_gemm_packed: out of memory\n");
        exit(EXIT_FAILURE);
    }
    return p;
}

static float *random_floats(int64_t count)
{
    float *v = allocated((size_t)(count > 0 ? count : 1) * sizeof *v);
    for (int64_t i = 0; i < count; i++)
        v[i] = uniform();
    return v;
}

/* A weight [out, in] packed in two parts (columns [0, split) and the
 * rest), as decoding packs the queries', keys' and values' side by side;
 * in bfloat16 with bf16. */
static tfm__packed packed_of(const float *w, const float *bias, int64_t out, int64_t in,
                             int bf16)
{
    tfm__packed p;
    float *floats = allocated((size_t)tfm__packed_floats(out, in, bf16) * sizeof(float));
    tfm__packed_init(&p, out, in, bf16, floats);
    int64_t split = out / 3;
    tfm__pack_columns(&p, 0, w, split, bias);
    tfm__pack_columns(&p, split, w + split * in, out - split, bias ? bias + split : NULL);
    return p;
}

/* v as the bfloat16 kernel multiplies it (bf16), or as it is. */
static double operand(float v, int bf16)
{
    if (!bf16)
        return v;
    uint32_t bits = (uint32_t)tfm__bf16_round(v) << 16;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* The packed product of random x [n, in] and w [out, in] against the sums
 * in double (of the operands rounded to bfloat16 with bf16): within
 * float32's rounding of the sum of |terms|; y's columns past out (ldy =
 * out + 3) keep what they held. Returns the failures. */
static int check_product(int64_t n, int64_t out, int64_t in, int with_bias, int bf16)
{
    int64_t ldy = out + 3;
    float *x = random_floats(n * in), *w = random_floats(out * in);
    float *bias = with_bias ? random_floats(out) : NULL;
    float *y = allocated((size_t)(n * ldy) * sizeof *y);
    for (int64_t i = 0; i < n * ldy; i++)
        y[i] = 1234.5f;
    tfm__packed p = packed_of(w, bias, out, in, bf16);
    int failures = tfm__packed_product(&p, x, n, y, ldy) != 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < ldy; j++) {
            double sum = bias ? bias[j < out ? j : 0] : 0.0, size = fabs(sum);
            for (int64_t k = 0; j < out && k < in; k++) {
                double term = operand(x[i * in + k], bf16) * operand(w[j * in + k], bf16);
                sum += term;
                size += fabs(term);
            }
            double want = j < out ? sum : 1234.5, got = y[i * ldy + j];
            if (!(fabs(got - want) <= 1e-6 * (double)(in + 1) * (size + 1e-30)) &&
                failures++ < 5)
                fprintf(stderr, "n %lld out %lld in %lld bias %d bf16 %d: y[%lld][%lld] %.9g, "
                        "want %.9g\n", (long long)n, (long long)out, (long long)in, with_bias,
                        bf16, (long long)i, (long long)j, got, want);
        }
    free(p.panels);
    free(x);
    free(w);
    free(bias);
    free(y);
    return failures;
}

/* Every shape (in bfloat16 with bf16): the failures. */
static int check_all_shapes(int bf16)
{
    static const int64_t outs[] = {1, 15, 16, 17, 31, 33, 48, 50, 100};
    static const int64_t ins[] = {1, 3, 17, 64, 129};
    int failures = 0;
    for (int64_t n = 1; n <= 70; n++)
        for (size_t o = 0; o < sizeof outs / sizeof outs[0]; o++)
            for (size_t k = 0; k < sizeof ins / sizeof ins[0]; k++)
                failures += check_product(n, outs[o], ins[k], (int)((n + o + k) % 2), bf16);
    return failures;
}

START_TEST(products_equal_the_sums)
{
    rng_state = 1;
    ck_assert_int_eq(check_all_shapes(0), 0);
}
END_TEST

START_TEST(bfloat16_products_equal_the_rounded_sums)
{
    if (!tfm__cpu_has_bf16())
        return; /* packing in bfloat16 is refused there (tfm_set_matmul_precision) */
    rng_state = 3;
    ck_assert_int_eq(check_all_shapes(1), 0);
}
END_TEST

/* Two threads split the panels: each sum is the one thread's, bit for bit
 * (float32 and bfloat16). */
START_TEST(threads_give_the_same_bits)
{
    int bf16 = _i && tfm__cpu_has_bf16();
    rng_state = 2;
    enum { N = 64, OUT = 531, IN = 257 };
    float *x = random_floats(N * IN), *w = random_floats(OUT * IN), *b = random_floats(OUT);
    float *one = calloc(N * OUT, sizeof(float)), *two = calloc(N * OUT, sizeof(float));
    ck_assert(one && two);
    tfm__packed p = packed_of(w, b, OUT, IN, bf16);
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
    ck_assert_int_eq(tfm__packed_product(&p, x, N, one, OUT), 0);
    ck_assert_int_eq(tfm_set_num_threads(2), TFM_OK);
    ck_assert_int_eq(tfm__packed_product(&p, x, N, two, OUT), 0);
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
    ck_assert_int_eq(memcmp(one, two, sizeof(float) * N * OUT), 0);
    free(p.panels);
    free(x);
    free(w);
    free(b);
    free(one);
    free(two);
}
END_TEST

/* A weight whose packed copy a tape lists (a decoding's,
 * tfm__tape_set_packed) is read packed by the linear ops on that tape with
 * the bias it was packed with, and unpacked with another bias or on
 * another tape: packed from another weight here, so that the output tells
 * which one the op read. */
START_TEST(the_linear_ops_read_a_weight_the_tape_lists)
{
    enum { N = 5, IN = 7, OUT = 19 };
    float *x = random_floats(N * IN), *w = random_floats(OUT * IN), *hung = random_floats(OUT * IN);
    tfm_tensor *xt = tfm_tensor_from_f32(2, (const int64_t[]){N, IN}, x);
    tfm_tensor *wt = tfm_tensor_from_f32(2, (const int64_t[]){OUT, IN}, w);
    float *bias_values[2] = {random_floats(OUT), random_floats(OUT)};
    tfm_tensor *biases[2] = {tfm_tensor_from_f32(1, (const int64_t[]){OUT}, bias_values[0]),
                             tfm_tensor_from_f32(1, (const int64_t[]){OUT}, bias_values[1])};
    tfm__packed_linear packed = {wt, packed_of(hung, tfm__f32(biases[0]), OUT, IN, 0),
                                 tfm__f32(biases[0])};
    tfm_tape *tape = tfm_tape_create(), *other = tfm_tape_create();
    tfm_tape_set_recording(tape, 0);
    tfm__tape_set_packed(tape, &packed, 1);
    for (int c = 0; c < 3; c++) {
        int b = c == 1; /* 2: the packed bias on the other tape */
        const float *read = c == 0 ? hung : w, *bias = tfm__f32(biases[b]);
        tfm_tensor *y = tfm_linear(c == 2 ? other : tape, xt, wt, biases[b]);
        ck_assert_ptr_nonnull(y);
        for (int64_t i = 0; i < N; i++)
            for (int64_t j = 0; j < OUT; j++) {
                double sum = bias[j];
                for (int64_t k = 0; k < IN; k++)
                    sum += (double)x[i * IN + k] * read[j * IN + k];
                ck_assert_msg(fabs(tfm__f32(y)[i * OUT + j] - sum) <= 1e-5 * (1 + fabs(sum)),
                              "case %d: y[%lld][%lld] %g, not %g", c, (long long)i,
                              (long long)j, (double)tfm__f32(y)[i * OUT + j], sum);
            }
    }
    tfm_tape_free(tape);
    tfm_tape_free(other);
    free(packed.product.panels);
    for (int b = 0; b < 2; b++) {
        free(bias_values[b]);
        tfm_tensor_free(biases[b]);
    }
    tfm_tensor_free(xt);
    tfm_tensor_free(wt);
    free(x);
    free(w);
    free(hung);
}
END_TEST

/* Each path in a child (run with "--shapes"), which writes its path's name
 * and its failures. */
START_TEST(every_path_equals_the_sums)
{
    static const char *const paths[] = {"baseline", "x86-64-v3", "x86-64-v4"};
    char ran[3][64];
    for (int i = 0; i < 3; i++) {
        char out[256];
        size_t got = run_at_path(paths[i], "--shapes", out, sizeof out - 1);
        out[got] = '\0';
        int failures = -1;
        ck_assert_msg(sscanf(out, "%63s %d", ran[i], &failures) == 2, "child wrote \"%s\"",
                      out);
        ck_assert_msg(failures == 0, "TFM_CPU=%s (ran %s): %d products wrong", paths[i], ran[i],
                      failures);
    }
    /* the best this CPU runs is what the highest ask gets (not this
     * process's path, which TFM_CPU may have lowered); -1: a build of one
     * path */
    int best = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(ran[2], paths[i]) == 0)
            best = i;
    /* each child ran the path asked for, or the best when that is lower */
    for (int i = 0; best >= 0 && i < 3; i++)
        ck_assert_str_eq(ran[i], paths[i < best ? i : best]);
}
END_TEST

static Suite *gemm_packed_suite(void)
{
    Suite *s = suite_create("gemm_packed");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, products_equal_the_sums);
    tcase_add_test(tc, bfloat16_products_equal_the_rounded_sums);
    tcase_add_loop_test(tc, threads_give_the_same_bits, 0, 2);
    tcase_add_test(tc, every_path_equals_the_sums);
    tcase_add_test(tc, the_linear_ops_read_a_weight_the_tape_lists);
    tcase_set_timeout(tc, 240);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--shapes") == 0) {
        rng_state = 3;
        int failures = check_all_shapes(0);
        printf("%s %d\n", tfm_cpu_path(), failures);
        return 0;
    }
    SRunner *r = srunner_create(gemm_packed_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
