/* tfm-bench-softmax: tfm_softmax's time per row on attention's row
 * lengths (a short sentence's 9 keys, tutorial 003's 22 source positions,
 * 000/001's 91, 002's 100, and 128), the best of --repeats runs over 4096
 * rows each. One line per length: nanoseconds a row. Compare builds by
 * running it against each (LD_LIBRARY_PATH), interleaved.
 *
 *   tfm-bench-softmax [--repeats N] */
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

int main(int argc, char **argv)
{
    enum { ROWS = 4096 };
    static const int64_t lengths[] = {9, 22, 91, 100, 128};
    long repeats = argc == 3 && !strcmp(argv[1], "--repeats") ? strtol(argv[2], NULL, 10)
                   : argc == 1                                  ? 50
                                                                : 0;
    if (repeats < 1) {
        fprintf(stderr, "usage: %s [--repeats N (1 or more)]\n", argv[0]);
        return 2;
    }
    tfm_tape *tape = tfm_tape_create();
    tfm_rng *rng = tfm_rng_create(7);
    if (!tape || !rng || tfm_tape_set_recording(tape, 0) != TFM_OK) {
        fprintf(stderr, "tfm-bench-softmax: %s\n", tfm_last_error());
        return 1;
    }
    printf("%8s %12s\n", "length", "ns a row");
    int status = 0;
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0] && !status; i++) {
        tfm_tensor *x = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){ROWS, lengths[i]});
        if (!x || tfm_init_normal(x, 0.0f, 3.0f, rng) != TFM_OK) {
            status = 1;
        } else {
            double best = -1.0;
            for (long r = 0; r < repeats && !status; r++) {
                double start = now_s();
                tfm_tensor *y = tfm_softmax(tape, x, NULL);
                double seconds = now_s() - start;
                tfm_tape_reset(tape);
                status = y ? 0 : 1;
                best = best < 0.0 || seconds < best ? seconds : best;
            }
            if (!status)
                printf("%8lld %12.1f\n", (long long)lengths[i], best / ROWS * 1e9);
        }
        tfm_tensor_free(x);
    }
    if (status)
        fprintf(stderr, "tfm-bench-softmax: %s\n", tfm_last_error());
    tfm_rng_free(rng);
    tfm_tape_free(tape);
    return status;
}
