/* tfm-bench-int8: a linear layer's product y = x W^T + b on decoding's
 * shapes, interleaved: float32 as libtfm's forward makes it
 * (tfm__sgemm_bias: cblas_sgemm, split among libtfm's threads from 48
 * rows), decoding's packed float32 and bfloat16 kernels
 * (tfm__packed_product: weights packed as lib/decode/weights.c packs
 * them), the bfloat16 BLAS-like kernel (tfm__sgemm_bf16, called
 * directly: the library sends it only products with every side >= 32)
 * and the int8 kernel (tfm__int8_linear, x quantized in the call, on as
 * many threads as decoding gives it); at one row also
 * cblas_sgemv, float32's fastest there (OpenBLAS 0.3.21's sgemm packs W
 * on every call, ~10x sgemv's time at one row). Per shape and row count:
 * microseconds per call, the best of --repeats, int8's speed as a
 * multiple of the others', and the kernel an int8 model decodes the
 * product with on the path (tfm__int8_pays_on: int8, or f32 packed). It
 * links the library's objects, the kernels being internal.
 *
 *   OPENBLAS_NUM_THREADS=1 tfm-bench-int8 [--threads N] [--repeats N] [--path P]
 *
 * runs each thread count from 1 to N (2 by default), on the int8 path P
 * (portable, avx2, avx-vnni, avx512-vnni; by default the one chosen). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "core/gemm.h"
#include "core/gemm_bf16.h"
#include "core/gemm_int8.h"
#include "core/gemm_packed.h"
#include "tfm/tfm.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *random_floats(int64_t count, float size, tfm_rng *rng)
{
    float *v = malloc((size_t)count * sizeof *v);
    for (int64_t i = 0; v && i < count; i++)
        v[i] = size * tfm_rng_normal(rng);
    return v;
}

/* The CPU's model name, from /proc/cpuinfo. */
static void cpu_model(char *name, size_t size)
{
    snprintf(name, size, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(name, size, "%s", strchr(line, ':') + 2);
            name[strcspn(name, "\n")] = '\0';
            break;
        }
    if (f)
        fclose(f);
}

enum { FLOAT32, GEMV, PACKED, PACKED_BF16, BFLOAT16, INT8, KINDS };

/* A column of the table: the value, or "-" where the kind did not run. */
static void cell(double value, const char *format)
{
    if (isnan(value))
        printf(" %9s", "-");
    else
        printf(format, value);
}

typedef struct layer {
    int64_t m, out, in;
    const float *x, *w, *bias;
    const tfm__int8_weight *q;
    const tfm__packed *packed, *packed_bf16;
    tfm__int8_path path;
    float *y;
    int threads;
} layer;

/* One product of the kind; 0, or -1 when it failed. */
static int multiply(const layer *l, int kind)
{
    if (kind == FLOAT32) {
        tfm__sgemm_bias(0, 1, l->m, l->out, l->in, 1.0f, l->x, l->in, l->w, l->in, l->bias, l->y,
                        l->out);
        return 0;
    }
    if (kind == GEMV) { /* one row */
        memcpy(l->y, l->bias, (size_t)l->out * sizeof *l->y);
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)l->out, (int)l->in, 1.0f, l->w, (int)l->in,
                    l->x, 1, 1.0f, l->y, 1);
        return 0;
    }
    if (kind == PACKED || kind == PACKED_BF16)
        return tfm__packed_product(kind == PACKED ? l->packed : l->packed_bf16, l->x, l->m,
                                   l->y, l->out);
    if (kind == BFLOAT16)
        return tfm__sgemm_bf16(0, 1, l->m, l->out, l->in, 1.0f, l->x, l->in, l->w, l->in, 0.0f,
                               l->bias, l->y, l->out, l->threads);
    /* on as many threads as decoding's products take, at most --threads' */
    int workers = tfm__int8_workers(l->q, l->m);
    return tfm__int8_linear_on(l->path, "tfm-bench-int8", l->q, l->m, l->x, l->y, l->q->out,
                               workers < l->threads ? workers : l->threads) ==
                   TFM_OK
               ? 0
               : -1;
}

/* Seconds per product, over enough calls to take a few milliseconds. */
static double timed(const layer *l, int kind)
{
    double macs = (double)l->m * (double)l->out * (double)l->in;
    long calls = (long)ceil(3e7 / macs);
    double start = now_s();
    for (long c = 0; c < calls; c++)
        if (multiply(l, kind) != 0)
            return -1.0;
    return (now_s() - start) / (double)calls;
}

int main(int argc, char **argv)
{
    long most_threads = 2, repeats = 5;
    int path = tfm__int8_path_chosen();
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--path")) {
            for (path = TFM__INT8_PATHS - 1; path >= 0; path--)
                if (!strcmp(argv[i + 1], tfm__int8_path_name((tfm__int8_path)path)))
                    break;
        } else if (!strcmp(argv[i], "--threads"))
            most_threads = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--repeats"))
            repeats = strtol(argv[i + 1], NULL, 10);
    }
    if (argc % 2 == 0 || repeats < 1 || most_threads < 1 || most_threads > 64 || path < 0 ||
        !tfm__int8_path_runs((tfm__int8_path)path)) {
        fprintf(stderr, "usage: %s [--threads 1..64] [--repeats N >= 1] [--path P] (P: a path "
                "this CPU runs)\n", argv[0]);
        return 2;
    }
    /* out, in: a decoder layer's products (queries, keys and values; an
     * output; the feed-forward's two) and the generator at tutorial 003's
     * size (d 64, d_ff 128, 30 tokens), the translation model's (d 256,
     * d_ff 1024, 8,000 pieces) and 002's (d 512, d_ff 2048, 5,000) */
    static const struct { const char *what; int64_t out, in; } shapes[] = {
        {"003 qkv", 192, 64},          {"003 projection", 64, 64},
        {"003 FFN up", 128, 64},       {"003 FFN down", 64, 128},
        {"003 generator", 30, 64},     {"d 256 qkv", 768, 256},
        {"d 256 projection", 256, 256}, {"d 256 FFN up", 1024, 256},
        {"d 256 FFN down", 256, 1024}, {"8k vocabulary", 8000, 256},
        {"002 projection", 512, 512},  {"002 FFN up", 2048, 512},
        {"002 FFN down", 512, 2048},   {"5k vocabulary", 5000, 512},
    };
    static const int64_t rows[] = {1, 4, 16, 64, 256};
    int bf16 = tfm__cpu_has_bf16();
    char model[128];
    cpu_model(model, sizeof model);
    printf("CPU: %s; int8 path %s; bfloat16 kernel %s; best of %ld\n", model,
           tfm__int8_path_name((tfm__int8_path)path), bf16 ? "runs" : "does not run here",
           repeats);
    printf("%-18s %4s %7s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %5s\n", "product",
           "rows", "threads", "f32 us", "gemv us", "packed us", "pk-bf16", "bf16 us", "int8 us",
           "int8/f32", "int8/gemv", "int8/pack", "int8/pkbf", "int8/bf16", "pack/pkbf", "rule");
    tfm_rng *rng = tfm_rng_create(1);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t out = shapes[s].out, in = shapes[s].in;
        float *w = random_floats(out * in, 1.0f / sqrtf((float)in), rng);
        float *bias = random_floats(out, 0.1f, rng);
        float *x = random_floats(256 * in, 1.0f, rng), *y = malloc(sizeof(float) * 256 * out);
        /* the packed copies as decoding packs them (lib/decode/weights.c) */
        tfm__packed packed[2];
        float *floats[2];
        for (int b = 0; b < 2; b++) {
            floats[b] = malloc(sizeof(float) * (size_t)tfm__packed_floats(out, in, b));
            if (floats[b] && (!b || bf16)) {
                tfm__packed_init(&packed[b], out, in, b, floats[b]);
                tfm__pack_columns(&packed[b], 0, w, out, bias);
            }
        }
        tfm__int8_weight *q = NULL;
        if (!w || !bias || !x || !y || !floats[0] || !floats[1] ||
            tfm__int8_quantize("tfm-bench-int8", out, in, w, bias, &q) != TFM_OK) {
            fprintf(stderr, "%s: %s\n", argv[0], tfm_last_error());
            return 1;
        }
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
            for (int threads = 1; threads <= most_threads; threads++) {
                tfm_set_num_threads(threads);
                layer l = {rows[r], out, in, x, w, bias, q, &packed[0], &packed[1],
                           (tfm__int8_path)path, y, threads};
                double best[KINDS] = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30};
                int runs[KINDS] = {1, rows[r] == 1, 1, bf16, bf16, 1};
                for (long rep = 0; rep < repeats; rep++)
                    for (int kind = 0; kind < KINDS; kind++) {
                        if (!runs[kind])
                            continue;
                        double t = timed(&l, kind);
                        if (t < 0) {
                            fprintf(stderr, "%s: %s\n", argv[0], tfm_last_error());
                            return 1;
                        }
                        best[kind] = t < best[kind] ? t : best[kind];
                    }
                printf("%-18s %4lld %7d", shapes[s].what, (long long)rows[r], threads);
                for (int kind = 0; kind < KINDS; kind++)
                    cell(runs[kind] ? best[kind] * 1e6 : NAN, " %9.2f");
                for (int kind = 0; kind < INT8; kind++)
                    cell(runs[kind] ? best[kind] / best[INT8] : NAN, " %8.2fx");
                cell(bf16 ? best[PACKED] / best[PACKED_BF16] : NAN, " %8.2fx");
                /* the kernel an int8 model's decoding takes on the path */
                printf(" %5s\n", tfm__int8_pays_on((tfm__int8_path)path, out, in) ? "int8" : "f32");
                fflush(stdout);
            }
        tfm__int8_free(q);
        free(floats[0]);
        free(floats[1]);
        free(w);
        free(bias);
        free(x);
        free(y);
    }
    tfm_rng_free(rng);
    return 0;
}
