/* The cost of MPI_Allreduce (sum of floats, in place) on this machine's
 * transport, by message size: the data for docs/scaling.md's model.
 *   mpirun -np 2 build/bench/tfm-allreduce
 * Prints one line per size: bytes, the median seconds of the repetitions,
 * and the bytes per second that makes. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { REPEATS = 21 };

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0)
        printf("# %d ranks; bytes, median seconds, bytes/s\n", size);
    for (long bytes = 1024; bytes <= 256L << 20; bytes *= 4) {
        long n = bytes / (long)sizeof(float);
        float *values = malloc((size_t)bytes);
        for (long i = 0; i < n; i++)
            values[i] = 1.0f;
        double times[REPEATS];
        for (int r = 0; r < REPEATS; r++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double start = MPI_Wtime();
            MPI_Allreduce(MPI_IN_PLACE, values, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            times[r] = MPI_Wtime() - start;
        }
        qsort(times, REPEATS, sizeof *times, by_value);
        /* the slowest rank's median is the collective's */
        double median = times[REPEATS / 2];
        MPI_Allreduce(MPI_IN_PLACE, &median, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (rank == 0)
            printf("%ld %.3e %.3e\n", bytes, median, (double)bytes / median);
        free(values);
    }
    MPI_Finalize();
    return 0;
}
