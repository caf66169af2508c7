/* A program over MPI as libtfm_mpi's users write one: it calls MPI itself
 * (MPI_Init, MPI_Comm_rank), so `pkg-config --libs tfm-mpi` must give it
 * the MPI library too. Averages one gradient over the ranks. */
#include <mpi.h>
#include <stdio.h>
#include <tfm/distributed.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    tfm_params *params = tfm_params_create();
    tfm_tensor *w = params ? tfm_params_add(params, "w", 1, (const int64_t[]){1}) : NULL;
    tfm_distributed *distributed = w ? tfm_distributed_create(MPI_COMM_WORLD, params) : NULL;
    int ok = distributed != NULL;
    if (ok) {
        tfm_params_grads(params)[0] = (float)rank; /* the mean of 0..size-1 */
        ok = tfm_distributed_average_gradients(distributed, 1.0) == TFM_OK &&
             tfm_params_grads(params)[0] == 0.5f * (float)(size - 1);
    }
    if (rank == 0)
        printf("%d ranks: the averaged gradient %s\n", size, ok ? "is right" : "is WRONG");
    if (!ok && !distributed)
        fprintf(stderr, "rank %d: %s\n", rank, tfm_last_error());
    tfm_distributed_free(distributed);
    tfm_params_free(params);
    MPI_Finalize();
    return ok ? 0 : 1;
}
