/* tfm-bench-matmul: tfm_matmul's rate in float32 (cblas_sgemm) and with
 * bfloat16 products (tfm_set_matmul_precision), interleaved, on the
 * products of tutorials 000/001's and 002's training steps: a linear
 * layer's forward (x W^T), its input's gradient (g W) and its weight's
 * (g^T x). One line per shape: GFLOP/s each and their ratio, the best of
 * --repeats runs of each.
 *
 *   OPENBLAS_NUM_THREADS=1 tfm-bench-matmul [--threads N] [--repeats N]
 *
 * (At --threads 1, the default, the BLAS keeps its own threads: without
 * OPENBLAS_NUM_THREADS=1 float32 would run on all cores against bfloat16's
 * one. Above 1, libtfm splits both kinds of product among its threads.)
 * The rates include tfm_matmul's own cost (a tape tensor), negligible at
 * these sizes. Needs a CPU with AVX512_BF16. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tfm/tfm.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Seconds for one tfm_matmul at the precision set now, or -1. */
static double timed(tfm_tape *tape, const tfm_tensor *a, const tfm_tensor *b, int ta, int tb)
{
    double start = now_s();
    tfm_tensor *c = tfm_matmul(tape, a, b, ta, tb);
    double seconds = now_s() - start;
    tfm_tape_reset(tape);
    return c ? seconds : -1.0;
}

int main(int argc, char **argv)
{
    long threads = 1, repeats = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads"))
            threads = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--repeats"))
            repeats = strtol(argv[i + 1], NULL, 10);
    }
    if (argc % 2 == 0 || repeats < 1 || tfm_set_num_threads((int32_t)threads) != TFM_OK) {
        fprintf(stderr, "usage: %s [--threads 1..64] [--repeats N >= 1]\n", argv[0]);
        return 2;
    }
    if (tfm_set_matmul_precision(TFM_MATMUL_BFLOAT16) != TFM_OK) {
        fprintf(stderr, "%s: %s\n", argv[0], tfm_last_error());
        return 1;
    }
    /* m, n, k, transposes: rows of x, a layer's out and in features */
    static const struct { const char *what; int64_t m, n, k; int ta, tb; } shapes[] = {
        {"000/001 Q/K/V forward", 2912, 768, 256, 0, 1},
        {"000/001 Q/K/V input grad", 2912, 256, 768, 0, 0},
        {"000/001 Q/K/V weight grad", 768, 256, 2912, 1, 0},
        {"000/001 attention scores", 91, 91, 64, 0, 1},
        {"002 FFN forward", 6400, 2048, 512, 0, 1},
        {"002 FFN input grad", 6400, 512, 2048, 0, 0},
        {"002 FFN weight grad", 2048, 512, 6400, 1, 0},
        {"002 generator forward", 6336, 5000, 512, 0, 1},
    };
    tfm_tape *tape = tfm_tape_create();
    tfm_rng *rng = tfm_rng_create(1);
    if (!tape || !rng)
        return 1;
    printf("threads %ld, best of %ld\n%-28s %18s %10s %10s %6s\n", threads, repeats, "product",
           "m x n x k", "float32", "bfloat16", "ratio");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t m = shapes[s].m, n = shapes[s].n, k = shapes[s].k;
        int ta = shapes[s].ta, tb = shapes[s].tb;
        tfm_tensor *a = tfm_tensor_normal(2, ta ? (int64_t[]){k, m} : (int64_t[]){m, k}, 0, 1, rng);
        tfm_tensor *b = tfm_tensor_normal(2, tb ? (int64_t[]){n, k} : (int64_t[]){k, n}, 0, 1, rng);
        double best[2] = {1e30, 1e30};
        for (long r = 0; r < repeats; r++)
            for (int p = 0; p < 2; p++) {
                tfm_set_matmul_precision(p ? TFM_MATMUL_BFLOAT16 : TFM_MATMUL_FLOAT32);
                double t = timed(tape, a, b, ta, tb);
                if (t < 0) {
                    fprintf(stderr, "%s: %s\n", argv[0], tfm_last_error());
                    return 1;
                }
                best[p] = t < best[p] ? t : best[p];
            }
        double gflop = 2.0 * (double)m * (double)n * (double)k / 1e9;
        char size[40];
        snprintf(size, sizeof size, "%lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
        printf("%-28s %18s %10.1f %10.1f %5.2fx\n", shapes[s].what, size, gflop / best[0],
               gflop / best[1], best[0] / best[1]);
        tfm_tensor_free(a);
        tfm_tensor_free(b);
    }
    tfm_rng_free(rng);
    tfm_tape_free(tape);
    return 0;
}
