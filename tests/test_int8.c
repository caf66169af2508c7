/* The int8 products (lib/core/gemm_int8.h), linked from the library's
 * objects: every path against a reference written from the header's
 * definition (the same bits, on odd shapes, with and without a bias, on 1
 * and 2 threads), a weight in parts against each part's product, zero
 * rows and columns, huge and tiny magnitudes, NaN and Inf, the values'
 * round trip and refusals, TFM_CPU lowering the path, no allocation once
 * the thread's buffer has grown; and the error against float32 on
 * Gaussian data and, when TFM_INT8_CHECKPOINT names a file, on a trained
 * model's weights. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/gemm_int8.h"
#include "core/tensor.h"
#include "run_at_path.h"
#include "tfm/tfm.h"

/* --- allocations, counted through the linker's --wrap ------------------- */

static long allocations;
void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
int __real_posix_memalign(void **p, size_t alignment, size_t size);

void *__wrap_malloc(size_t size)
{
    allocations++;
    return __real_malloc(size);
}

void *__wrap_calloc(size_t count, size_t size)
{
    allocations++;
    return __real_calloc(count, size);
}

int __wrap_posix_memalign(void **p, size_t alignment, size_t size)
{
    allocations++;
    return __real_posix_memalign(p, alignment, size);
}

/* --- data ----------------------------------------------------------------- */

static uint64_t rng_state;

static double uniform(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return ((z ^ (z >> 31)) >> 11) * 0x1p-53;
}

/* count Gaussian floats times `size`, seeded */
static float *gaussian(int64_t count, double size, uint64_t seed)
{
    rng_state = seed;
    float *v = malloc((size_t)count * sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (int64_t i = 0; i < count; i++)
        v[i] = (float)(size * sqrt(-2.0 * log(1.0 - uniform())) *
                       cos(6.283185307179586 * uniform()));
    return v;
}

/* Gaussian x [m, in], W [out, in] (values of w_size) and bias [out]. */
typedef struct problem {
    float *x, *w, *bias;
} problem;

static problem problem_of(int64_t m, int64_t in, int64_t out, double w_size, uint64_t seed)
{
    problem p = {gaussian(m * in, 1.0, seed), gaussian(out * in, w_size, seed + 1),
                 gaussian(out, 1.0, seed + 2)};
    return p;
}

static void free_problem(problem *p)
{
    free(p->x);
    free(p->w);
    free(p->bias);
}

/* --- the reference, from gemm_int8.h's definition ----------------------- */

/* W's int8 values and scales. */
static void reference_weight(const float *w, int64_t out, int64_t in, int8_t *q, float *scales)
{
    for (int64_t j = 0; j < out; j++) {
        double largest = 0.0;
        for (int64_t k = 0; k < in; k++)
            largest = fmax(largest, fabs(w[j * in + k]));
        scales[j] = (float)largest / 127.0f;
        for (int64_t k = 0; k < in; k++)
            q[j * in + k] = largest > 0.0 ? (int8_t)nearbyint(w[j * in + k] * 127.0 / largest) : 0;
    }
}

/* A row of x's int8 values and scale: p = round(x * (127 / largest)), the
 * row first taken 2^64 times when its largest is under 2^-64; NaN or Inf
 * anywhere: all zeros and a NaN scale. */
static float reference_row(const float *x, int64_t in, int8_t *p)
{
    float largest = 0.0f;
    int finite = 1;
    for (int64_t k = 0; k < in; k++) {
        finite &= isfinite(x[k]) != 0;
        largest = fabsf(x[k]) > largest ? fabsf(x[k]) : largest;
    }
    memset(p, 0, (size_t)(in > 0 ? in : 0));
    if (!finite)
        return NAN;
    if (largest == 0.0f)
        return 0.0f;
    float pre = largest < 0x1p-64f ? 0x1p64f : 1.0f, inv = 127.0f / (largest * pre);
    for (int64_t k = 0; k < in; k++)
        p[k] = (int8_t)nearbyintf((x[k] * pre) * inv);
    return largest / 127.0f;
}

/* y [m, out] by the definition, the sums in int64. */
static void reference_product(const float *x, int64_t m, const int8_t *q, const float *scales,
                              const float *bias, int64_t out, int64_t in, float *y)
{
    int8_t *p = malloc((size_t)in);
    for (int64_t i = 0; i < m; i++) {
        float x_scale = reference_row(x + i * in, in, p);
        for (int64_t j = 0; j < out; j++) {
            int64_t sum = 0;
            for (int64_t k = 0; k < in; k++)
                sum += p[k] * q[j * in + k];
            ck_assert(sum == (int32_t)sum);
            y[i * out + j] = fmaf((float)sum * scales[j], x_scale, bias ? bias[j] : -0.0f);
        }
    }
    free(p);
}

/* --- helpers --------------------------------------------------------------- */

static tfm__int8_weight *quantized(const float *w, int64_t out, int64_t in, const float *bias)
{
    tfm__int8_weight *q = NULL;
    ck_assert_msg(tfm__int8_quantize("test", out, in, w, bias, &q) == TFM_OK, "%s",
                  tfm_last_error());
    return q;
}

/* y from the path on `threads` threads. */
static void run(tfm__int8_path path, int threads, const tfm__int8_weight *w, int64_t m,
                const float *x, float *y)
{
    ck_assert_int_eq(tfm_set_num_threads(threads), TFM_OK);
    ck_assert_msg(tfm__int8_linear_on(path, "test", w, m, x, y, w->out, threads) == TFM_OK, "%s",
                  tfm_last_error());
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
}

/* The paths this CPU runs; says which it cannot. */
static int paths_here(tfm__int8_path *paths)
{
    int n = 0;
    for (int path = 0; path < TFM__INT8_PATHS; path++)
        if (tfm__int8_path_runs((tfm__int8_path)path))
            paths[n++] = (tfm__int8_path)path;
        else
            fprintf(stderr, "test_int8: the %s path does not run here\n",
                    tfm__int8_path_name((tfm__int8_path)path));
    return n;
}

/* Bit for bit (NaN's sign and payload included). */
static void same_bits(const float *want, const float *got, int64_t count, const char *what)
{
    for (int64_t i = 0; i < count; i++)
        ck_assert_msg(memcmp(want + i, got + i, sizeof *got) == 0, "%s: y[%lld] is %.9g, not %.9g",
                      what, (long long)i, (double)got[i], (double)want[i]);
}

/* Every path, on 1 and 2 threads, gives the reference's bits. */
static void check_against_reference(const float *w, const float *bias, int64_t out, int64_t in,
                                    const float *x, int64_t m, const char *what)
{
    int8_t *q = malloc((size_t)(out * in));
    float *scales = malloc((size_t)out * sizeof *scales);
    float *want = malloc((size_t)(m * out) * sizeof *want);
    float *got = malloc((size_t)(m * out) * sizeof *got);
    reference_weight(w, out, in, q, scales);
    reference_product(x, m, q, scales, bias, out, in, want);
    tfm__int8_weight *packed = quantized(w, out, in, bias);
    tfm__int8_path paths[TFM__INT8_PATHS];
    int n = paths_here(paths);
    for (int i = 0; i < n; i++)
        for (int threads = 1; threads <= 2; threads++) {
            char label[160];
            snprintf(label, sizeof label, "%s, %s path, %d threads, m %lld, in %lld, out %lld",
                     what, tfm__int8_path_name(paths[i]), threads, (long long)m, (long long)in,
                     (long long)out);
            memset(got, 0xff, (size_t)(m * out) * sizeof *got);
            run(paths[i], threads, packed, m, x, got);
            same_bits(want, got, m * out, label);
        }
    /* no workers asked for: the calling thread does it all */
    memset(got, 0xff, (size_t)(m * out) * sizeof *got);
    ck_assert_int_eq(tfm__int8_linear("test", packed, m, x, got, out, 0), TFM_OK);
    same_bits(want, got, m * out, "0 workers");
    tfm__int8_free(packed);
    free(q);
    free(scales);
    free(want);
    free(got);
}

/* --- tests ------------------------------------------------------------------ */

START_TEST(every_path_gives_the_reference_bits)
{
    /* rows: every tile's row count of every path (4-row tiles: 1, 3, 4 + 2, 4 x 4 + 1) */
    static const int64_t ms[] = {1, 3, 6, 17}, ins[] = {1, 7, 64, 300, 513},
                         outs[] = {1, 5, 64, 130};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 5; b++)
            for (size_t c = 0; c < 4; c++) {
                int64_t m = ms[a], in = ins[b], out = outs[c];
                problem p = problem_of(m, in, out, 0.05, 1 + a + 10 * b + 100 * c);
                check_against_reference(p.w, p.bias, out, in, p.x, m, "with a bias");
                check_against_reference(p.w, NULL, out, in, p.x, m, "without");
                free_problem(&p);
            }
}
END_TEST

/* Threads split the rows of a product whose weight fits a thread's cache
 * (each quantizing its own rows) and the channels of a larger one: both
 * give the reference's bits, with a tail of rows and of channels. */
START_TEST(rows_and_channels_split_give_the_reference_bits)
{
    static const struct { int64_t m, in, out; } shapes[] = {
        {8, 64, 40},     /* two tiles of rows per thread, exactly */
        {91, 256, 130},  /* an encoder's source: 22 tiles and a row */
        {9, 300, 1040},  /* W above 256 KB: the channels split */
        {45, 1100, 300}, /* likewise, through the input's tail */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        problem p = problem_of(shapes[i].m, shapes[i].in, shapes[i].out, 0.05, 500 + i);
        check_against_reference(p.w, p.bias, shapes[i].out, shapes[i].in, p.x, shapes[i].m,
                                "split");
        free_problem(&p);
    }
}
END_TEST

/* Rows of y ldy apart (a part of a wider output, as a fused attention's q,
 * k and v): each path writes the product's columns, bit for bit the
 * contiguous product's, and leaves the columns between alone. */
START_TEST(a_row_stride_writes_its_columns_only)
{
    int64_t m = 9, in = 40, out = 37, ldy = 3 * out;
    problem p = problem_of(m, in, out, 0.05, 77);
    tfm__int8_weight *q = quantized(p.w, out, in, p.bias);
    float *want = malloc((size_t)(m * out) * sizeof *want);
    float *got = malloc((size_t)(m * ldy) * sizeof *got);
    ck_assert_int_eq(tfm__int8_linear("test", q, m, p.x, want, out, 1), TFM_OK);
    tfm__int8_path paths[TFM__INT8_PATHS];
    int n = paths_here(paths);
    for (int i = 0; i < n; i++) {
        for (int64_t k = 0; k < m * ldy; k++)
            got[k] = 12345.0f;
        ck_assert_int_eq(tfm__int8_linear_on(paths[i], "test", q, m, p.x, got + out, ldy, 2),
                         TFM_OK);
        for (int64_t r = 0; r < m; r++) {
            same_bits(want + r * out, got + r * ldy + out, out, tfm__int8_path_name(paths[i]));
            for (int64_t j = 0; j < ldy; j++)
                if (j < out || j >= 2 * out)
                    ck_assert_msg(got[r * ldy + j] == 12345.0f, "%s: y[%lld][%lld] written",
                                  tfm__int8_path_name(paths[i]), (long long)r, (long long)j);
        }
    }
    tfm__int8_free(q);
    free(want);
    free(got);
    free_problem(&p);
}
END_TEST

/* A weight quantized in parts (a fused attention's queries, keys and
 * values), multiplied whole or from its second part on (the cross
 * attention's keys and values), and the parts as weights of their own:
 * the rows of x are quantized once for all the parts, and each part's
 * columns are that part's own product, bit for bit, on 1 and 2 threads,
 * the rows split and the channels. */
START_TEST(a_weight_in_parts_gives_each_parts_bits)
{
    static const struct { int64_t m, in, out; } shapes[] = {
        {1, 64, 64},     /* a decoding step's row at 003's size */
        {91, 256, 40},   /* an encoder's source: the threads split the rows */
        {9, 300, 400},   /* W above 256 KB in all: the channels split */
    };
    tfm__int8_set_pays_from(0);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t m = shapes[i].m, in = shapes[i].in, out = shapes[i].out, ldy = 3 * out;
        problem p = problem_of(m, in, 3 * out, 0.05, 900 + i);
        tfm__int8_weight *parts[3];
        for (int k = 0; k < 3; k++)
            parts[k] = quantized(p.w + k * out * in, out, in, p.bias + k * out);
        struct tfm_tensor w = {.data = p.w, .shape = {3 * out, in}, .numel = 3 * out * in,
                               .ndim = 2, .dtype = TFM_F32, .int8 = parts, .int8_parts = 3};
        float *want = malloc((size_t)(m * ldy) * sizeof *want);
        float *got = malloc((size_t)(m * ldy) * sizeof *got);
        for (int k = 0; k < 3; k++)
            ck_assert_int_eq(tfm__int8_linear("test", parts[k], m, p.x, want + k * out, ldy, 1),
                             TFM_OK);
        for (int threads = 1; threads <= 2; threads++) {
            ck_assert_int_eq(tfm_set_num_threads(threads), TFM_OK);
            for (int first = 0; first < 2; first++) {
                char label[96];
                snprintf(label, sizeof label, "m %lld, in %lld, out %lld, from part %d, %d threads",
                         (long long)m, (long long)in, (long long)out, first, threads);
                for (int64_t k = 0; k < m * ldy; k++)
                    got[k] = 12345.0f;
                ck_assert_int_eq(tfm__int8_tensor_product(&w, first * out, (3 - first) * out, m,
                                                          p.x, got + first * out, ldy),
                                 0);
                for (int64_t r = 0; r < m; r++) {
                    same_bits(want + r * ldy + first * out, got + r * ldy + first * out,
                              (3 - first) * out, label);
                    for (int64_t j = 0; j < first * out; j++)
                        ck_assert_msg(got[r * ldy + j] == 12345.0f, "%s: y[%lld][%lld] written",
                                      label, (long long)r, (long long)j);
                }
            }
        }
        /* the same parts as three weights of their own (separate queries,
         * keys and values) */
        struct tfm_tensor separate[3];
        const tfm_tensor *listed[3];
        for (int k = 0; k < 3; k++) {
            separate[k] = (struct tfm_tensor){.data = p.w + k * out * in, .shape = {out, in},
                                              .numel = out * in, .ndim = 2, .dtype = TFM_F32,
                                              .int8 = parts + k, .int8_parts = 1};
            listed[k] = &separate[k];
        }
        for (int64_t k = 0; k < m * ldy; k++)
            got[k] = 12345.0f;
        ck_assert_int_eq(tfm__int8_tensors_product(listed, 3, m, p.x, got, ldy), 0);
        same_bits(want, got, m * ldy, "three weights");
        /* one of them in parts, or none: nothing written */
        got[0] = 12345.0f;
        ck_assert_int_eq(tfm__int8_tensors_product((const tfm_tensor *[]){&w}, 1, m, p.x, got,
                                                   ldy),
                         -1);
        ck_assert_int_eq(tfm__int8_tensors_product(listed, 0, m, p.x, got, ldy), -1);
        ck_assert(got[0] == 12345.0f);
        ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
        for (int k = 0; k < 3; k++)
            tfm__int8_free(parts[k]);
        free(want);
        free(got);
        free_problem(&p);
    }
    tfm__int8_set_pays_from(-1);
}
END_TEST

/* A zero channel gives its bias, a zero row of x the bias row, a zero
 * input column changes nothing else. */
START_TEST(zero_rows_and_columns)
{
    enum { M = 7, IN = 37, OUT = 21 };
    problem data = problem_of(M, IN, OUT, 1.0, 5);
    float *x = data.x, *w = data.w, *bias = data.bias, y[M * OUT];
    for (int k = 0; k < IN; k++) {
        w[4 * IN + k] = 0.0f; /* channel 4 */
        x[2 * IN + k] = 0.0f; /* row 2 */
    }
    for (int j = 0; j < OUT; j++)
        w[j * IN + 9] = 0.0f; /* input 9 */
    for (int i = 0; i < M; i++)
        x[i * IN + 30] = 0.0f; /* input 30 */
    check_against_reference(w, bias, OUT, IN, x, M, "zeros");
    tfm__int8_weight *q = quantized(w, OUT, IN, bias);
    run(tfm__int8_path_chosen(), 1, q, M, x, y);
    for (int i = 0; i < M; i++)
        ck_assert_float_eq(y[i * OUT + 4], bias[4]);
    for (int j = 0; j < OUT; j++)
        ck_assert_float_eq(y[2 * OUT + j], bias[j]);
    tfm__int8_free(q);
    /* all zero, no bias: +0 everywhere */
    memset(w, 0, sizeof(float) * OUT * IN);
    q = quantized(w, OUT, IN, NULL);
    run(tfm__int8_path_chosen(), 1, q, M, x, y);
    for (int i = 0; i < M * OUT; i++)
        ck_assert(y[i] == 0.0f && !signbit(y[i]));
    tfm__int8_free(q);
    free_problem(&data);
}
END_TEST

/* Rows of x from 1e-44 (subnormal) to 3e38, weights of 1e-3 and 1e-20:
 * the reference's bits, and within int8's error of the double product
 * where the scales stay normal floats. */
START_TEST(huge_and_tiny_magnitudes)
{
    enum { M = 8, IN = 70, OUT = 40 };
    static const double row_sizes[M] = {1e-44, 1e-38, 1e-30, 1e-3, 1.0, 1e10, 1e30, 1e37};
    problem data = problem_of(M, IN, OUT, 1.0, 8);
    float *x = data.x, *w = data.w, y[M * OUT];
    for (int i = 0; i < M; i++)
        for (int k = 0; k < IN; k++)
            x[i * IN + k] = (float)(x[i * IN + k] * row_sizes[i]);
    float largest = 0.0f; /* row 7's largest to 3e38 */
    for (int k = 0; k < IN; k++)
        largest = fmaxf(largest, fabsf(x[7 * IN + k]));
    for (int k = 0; k < IN; k++)
        x[7 * IN + k] = (float)(x[7 * IN + k] / (double)largest * 3e38);
    for (int j = 0; j < OUT; j++)
        for (int k = 0; k < IN; k++)
            w[j * IN + k] = (float)(w[j * IN + k] * (j % 2 ? 1e-20 : 1e-3));
    check_against_reference(w, NULL, OUT, IN, x, M, "magnitudes");
    tfm__int8_weight *q = quantized(w, OUT, IN, NULL);
    run(tfm__int8_path_chosen(), 1, q, M, x, y);
    for (int i = 2; i < M; i++)
        for (int j = 0; j < OUT; j++) {
            double exact = 0.0, size = 0.0;
            for (int k = 0; k < IN; k++) {
                exact += (double)x[i * IN + k] * w[j * IN + k];
                size += fabs((double)x[i * IN + k] * w[j * IN + k]);
            }
            if (size < 1e-36) /* the product of the scales leaves the normal floats */
                continue;
            ck_assert_msg(isfinite(y[i * OUT + j]) && fabs(y[i * OUT + j] - exact) <= 2e-2 * size,
                          "y[%d][%d] = %g, exact %g (sum of sizes %g)", i, j,
                          (double)y[i * OUT + j], exact, size);
        }
    tfm__int8_free(q);
    free_problem(&data);
}
END_TEST

/* A row holding NaN, +Inf or -Inf gives a row of NaN, the other rows
 * their bits without it; NaN or Inf in a weight is refused. */
START_TEST(non_finite_inputs)
{
    enum { M = 5, IN = 33, OUT = 18 };
    static const float bad[] = {NAN, INFINITY, -INFINITY};
    problem data = problem_of(M, IN, OUT, 1.0, 10);
    float *x = data.x, *w = data.w, *bias = data.bias, clean[M * OUT], y[M * OUT];
    tfm__int8_weight *q = quantized(w, OUT, IN, bias);
    tfm__int8_path paths[TFM__INT8_PATHS];
    int n = paths_here(paths);
    run(TFM__INT8_PORTABLE, 1, q, M, x, clean);
    for (int b = 0; b < 3; b++)
        for (int at = 0; at < IN; at += 16) {
            float *dirty = malloc(sizeof(float) * M * IN);
            memcpy(dirty, x, sizeof(float) * M * IN);
            dirty[3 * IN + at] = bad[b];
            for (int i = 0; i < n; i++) {
                run(paths[i], 1, q, M, dirty, y);
                for (int r = 0; r < M; r++)
                    for (int j = 0; j < OUT; j++)
                        ck_assert_msg(r == 3 ? isnan(y[r * OUT + j])
                                             : y[r * OUT + j] == clean[r * OUT + j],
                                      "%s path, %g at %d: y[%d][%d] = %g",
                                      tfm__int8_path_name(paths[i]), (double)bad[b], at, r, j,
                                      (double)y[r * OUT + j]);
            }
            free(dirty);
        }
    tfm__int8_free(q);
    for (int b = 0; b < 3; b++) {
        float saved = w[7 * IN + 20];
        w[7 * IN + 20] = bad[b];
        tfm__int8_weight *refused = (tfm__int8_weight *)1;
        ck_assert_int_eq(tfm__int8_quantize("tfm_model_quantize", OUT, IN, w, NULL, &refused),
                         TFM_ERR_NUMERIC);
        ck_assert_ptr_null(refused);
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_model_quantize: weight[7][20]"));
        w[7 * IN + 20] = saved;
    }
    free_problem(&data);
}
END_TEST

/* Values and scales out and back in give the same weight; dequantizing
 * gives value x scale; what a file could hold wrongly is refused. */
START_TEST(values_round_trip_and_refusals)
{
    enum { M = 3, IN = 29, OUT = 19 };
    problem data = problem_of(M, IN, OUT, 1.0, 13);
    float *x = data.x, *w = data.w, *bias = data.bias;
    int8_t values[OUT * IN], want[OUT * IN];
    float scales[OUT], want_scales[OUT], dequantized[OUT * IN], y[M * OUT], y_back[M * OUT];
    tfm__int8_weight *q = quantized(w, OUT, IN, bias), *back = NULL;
    tfm__int8_values(q, values, scales);
    reference_weight(w, OUT, IN, want, want_scales);
    ck_assert(memcmp(values, want, sizeof want) == 0);
    ck_assert(memcmp(scales, want_scales, sizeof scales) == 0);
    tfm__int8_dequantize(q, dequantized);
    double error = 0.0, size = 0.0;
    for (int i = 0; i < OUT * IN; i++) {
        ck_assert_float_eq(dequantized[i], (float)values[i] * scales[i / IN]);
        ck_assert_msg(fabsf(dequantized[i] - w[i]) <= 0.5f * scales[i / IN] * 1.0001f,
                      "w[%d] = %g dequantized to %g", i, (double)w[i], (double)dequantized[i]);
        error += (dequantized[i] - w[i]) * (double)(dequantized[i] - w[i]);
        size += (double)w[i] * w[i];
    }
    ck_assert(sqrt(error / size) < 0.02);
    ck_assert_int_eq(tfm__int8_from_values("load", OUT, IN, values, scales, bias, &back), TFM_OK);
    run(tfm__int8_path_chosen(), 1, q, M, x, y);
    run(tfm__int8_path_chosen(), 1, back, M, x, y_back);
    same_bits(y, y_back, M * OUT, "from values");
    tfm__int8_free(back);

    values[5 * IN + 3] = -128;
    ck_assert_int_eq(tfm__int8_from_values("load", OUT, IN, values, scales, NULL, &back),
                     TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "load: int8 value [5][3] is -128"));
    values[5 * IN + 3] = 0;
    scales[6] = -1.0f;
    ck_assert_int_eq(tfm__int8_from_values("load", OUT, IN, values, scales, NULL, &back),
                     TFM_ERR_ARG);
    scales[6] = NAN;
    ck_assert_int_eq(tfm__int8_from_values("load", OUT, IN, values, scales, NULL, &back),
                     TFM_ERR_NUMERIC);
    ck_assert_ptr_null(back);
    ck_assert_int_eq(tfm__int8_quantize("q", 0, IN, w, NULL, &back), TFM_ERR_ARG);
    ck_assert_int_eq(tfm__int8_quantize("q", OUT, 0, w, NULL, &back), TFM_ERR_ARG);
    ck_assert_int_eq(tfm__int8_quantize("q", 1, TFM__INT8_MAX_IN + 1, w, NULL, &back),
                     TFM_ERR_SIZE);
    ck_assert_int_eq(tfm__int8_quantize("q", INT64_MAX / 64, 64, w, NULL, &back), TFM_ERR_SIZE);
    ck_assert_ptr_null(back);
    tfm__int8_free(q);
    free_problem(&data);
}
END_TEST

/* The longest rows there can be: sums near 2^31 stay exact. */
START_TEST(longest_rows_stay_exact)
{
    enum { M = 2, IN = TFM__INT8_MAX_IN, OUT = 3 };
    float *x = malloc(sizeof(float) * M * IN), *w = malloc(sizeof(float) * OUT * IN);
    for (int k = 0; k < IN; k++) {
        x[k] = 1.0f;             /* p = 127 */
        x[IN + k] = k % 2 ? -1.0f : 1.0f;
        w[k] = -1.0f;            /* q = -127: the sum is -127^2 x 2^17 */
        w[IN + k] = 1.0f;
        w[2 * IN + k] = k % 3 ? 0.5f : -1.0f;
    }
    check_against_reference(w, NULL, OUT, IN, x, M, "longest");
    free(x);
    free(w);
}
END_TEST

/* After a first product has grown the thread's buffer, none allocates. */
START_TEST(steady_state_does_not_allocate)
{
    enum { M = 9, IN = 300, OUT = 70 };
    problem data = problem_of(M, IN, OUT, 1.0, 16);
    float *x = data.x, *w = data.w, y[M * OUT];
    tfm__int8_weight *q = quantized(w, OUT, IN, NULL);
    tfm__int8_path paths[TFM__INT8_PATHS];
    int n = paths_here(paths);
    ck_assert_int_eq(tfm_set_num_threads(2), TFM_OK);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < n; i++) {
            /* Check's own calls allocate (its library is static): none
             * while counting */
            long before = allocations;
            int failed = 0;
            for (int64_t m = 1; m <= M; m++)
                failed += tfm__int8_linear_on(paths[i], "test", q, m, x, y, q->out, 2) != TFM_OK;
            long made = allocations - before;
            ck_assert_int_eq(failed, 0);
            if (round == 1)
                ck_assert_msg(made == 0, "%s path: %ld allocations",
                              tfm__int8_path_name(paths[i]), made);
        }
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
    tfm__int8_free(q);
    free_problem(&data);
}
END_TEST

/* The chosen path's name in a child run with TFM_CPU=level. */
static void chosen_at(const char *level, char *name, size_t size)
{
    name[run_at_path(level, "--path", name, size - 1)] = '\0';
}

START_TEST(tfm_cpu_lowers_the_path)
{
    char name[64];
    int native = !strcmp(tfm_cpu_path(), "native");
    chosen_at("baseline", name, sizeof name);
    if (!native)
        ck_assert_str_eq(name, "portable");
    chosen_at("x86-64-v3", name, sizeof name);
    if (!native)
        ck_assert_str_ne(name, "avx512-vnni");
    /* the best path runs, and is the one chosen with no TFM_CPU */
    tfm__int8_path best = TFM__INT8_PATHS - 1;
    while (!tfm__int8_path_runs(best))
        best--;
    ck_assert_int_eq(tfm__int8_path_chosen(), best);
    fprintf(stderr, "test_int8: %s path chosen (TFM_CPU=x86-64-v3: %s)\n",
            tfm__int8_path_name(best), name);
}
END_TEST

/* ||y - y_float32|| / ||y_float32|| over rows of Gaussian x. */
static double relative_error(const float *w, int64_t out, int64_t in, int64_t m, uint64_t seed)
{
    float *x = gaussian(m * in, 1.0, seed), *y = malloc(sizeof(float) * (size_t)(m * out));
    tfm__int8_weight *q = quantized(w, out, in, NULL);
    ck_assert_int_eq(tfm__int8_linear("test", q, m, x, y, out, 1), TFM_OK); /* the chosen path */
    double error = 0.0, size = 0.0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < out; j++) {
            double exact = 0.0;
            for (int64_t k = 0; k < in; k++)
                exact += (double)x[i * in + k] * w[j * in + k];
            error += (y[i * out + j] - exact) * (y[i * out + j] - exact);
            size += exact * exact;
        }
    tfm__int8_free(q);
    free(x);
    free(y);
    return sqrt(error / size);
}

/* Gaussian x and W at decoding's shapes: about 1% (each side's rounding
 * is within half a step of 1/127 of its row's largest). */
START_TEST(error_against_float32_on_gaussian_data)
{
    static const int64_t shapes[][2] = {{256, 256}, {512, 512}, {2048, 512}, {512, 2048}};
    for (size_t s = 0; s < 4; s++) {
        int64_t out = shapes[s][0], in = shapes[s][1];
        float *w = gaussian(out * in, 1.0 / sqrt((double)in), 18 + s);
        double error = relative_error(w, out, in, 16, 19 + s);
        fprintf(stderr, "test_int8: Gaussian %lld x %lld: relative error %.4f\n",
                (long long)out, (long long)in, error);
        ck_assert_msg(error < 0.02, "relative error %g", error);
        free(w);
    }
}
END_TEST

/* Every 2-D weight of the checkpoint TFM_INT8_CHECKPOINT names (tutorial
 * 003's model, say), its products with Gaussian rows. */
START_TEST(error_against_float32_on_a_checkpoint)
{
    const char *path = getenv("TFM_INT8_CHECKPOINT");
    if (!path || access(path, R_OK) != 0) {
        fprintf(stderr, "test_int8: no checkpoint (TFM_INT8_CHECKPOINT=%s): not run\n",
                path ? path : "");
        return;
    }
    tfm_safetensors *file = tfm_safetensors_open(path);
    ck_assert_msg(file != NULL, "%s", tfm_last_error());
    double worst = 0.0;
    int weights = 0;
    for (int64_t t = 0; t < tfm_safetensors_count(file); t++) {
        const char *name = tfm_safetensors_name(file, t);
        tfm_tensor *tensor = tfm_safetensors_get(file, name);
        ck_assert_msg(tensor != NULL, "%s", tfm_last_error());
        if (tfm_tensor_ndim(tensor) == 2 && tfm_tensor_dtype(tensor) == TFM_F32) {
            int64_t out = tfm_tensor_dim(tensor, 0), in = tfm_tensor_dim(tensor, 1);
            double error = relative_error(tfm_tensor_data_f32(tensor), out, in, 16, 20 + t);
            fprintf(stderr, "test_int8: %s [%lld, %lld]: relative error %.4f\n", name,
                    (long long)out, (long long)in, error);
            worst = fmax(worst, error);
            weights++;
        }
        tfm_tensor_free(tensor);
    }
    tfm_safetensors_close(file);
    ck_assert_int_gt(weights, 0);
    ck_assert_msg(worst < 0.03, "worst relative error %g", worst);
}
END_TEST

static Suite *int8_suite(void)
{
    Suite *s = suite_create("int8");
    TCase *tc = tcase_create("products");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, every_path_gives_the_reference_bits);
    tcase_add_test(tc, rows_and_channels_split_give_the_reference_bits);
    tcase_add_test(tc, a_row_stride_writes_its_columns_only);
    tcase_add_test(tc, a_weight_in_parts_gives_each_parts_bits);
    tcase_add_test(tc, zero_rows_and_columns);
    tcase_add_test(tc, huge_and_tiny_magnitudes);
    tcase_add_test(tc, non_finite_inputs);
    tcase_add_test(tc, values_round_trip_and_refusals);
    tcase_add_test(tc, longest_rows_stay_exact);
    tcase_add_test(tc, steady_state_does_not_allocate);
    tcase_add_test(tc, tfm_cpu_lowers_the_path);
    tcase_add_test(tc, error_against_float32_on_gaussian_data);
    tcase_add_test(tc, error_against_float32_on_a_checkpoint);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--path")) {
        fputs(tfm__int8_path_name(tfm__int8_path_chosen()), stdout);
        return EXIT_SUCCESS;
    }
    SRunner *runner = srunner_create(int8_suite());
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
