/* Data-parallel runs of the example programs (--distributed, under
 * `mpirun -np N`): one rank or many behind the same few calls, so the
 * programs read the same either way. Built with MPI when meson found it
 * (TFM_EXAMPLES_MPI); otherwise --distributed says so and single-process
 * runs are unchanged. */
#ifndef TFM_EXAMPLES_RANKS_H
#define TFM_EXAMPLES_RANKS_H

#include <stdio.h>

#include <tfm/tfm.h>
#ifdef TFM_EXAMPLES_MPI
#include <tfm/distributed.h>
#endif

typedef struct ranks {
    int rank, size;
    int started;           /* MPI was initialised here */
    double reduce_seconds; /* spent averaging gradients */
#ifdef TFM_EXAMPLES_MPI
    tfm_distributed *distributed;
#endif
} ranks;

/* Starts MPI when distributed (call first, before anything prints); 0, or
 * -1 after a message. */
static inline int ranks_start(ranks *r, int distributed, int *argc, char ***argv,
                              const char *program)
{
    r->rank = 0;
    r->size = 1;
    r->started = 0;
    r->reduce_seconds = 0.0;
#ifdef TFM_EXAMPLES_MPI
    r->distributed = NULL;
    if (!distributed)
        return 0;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        fprintf(stderr, "%s: MPI_Init failed\n", program);
        return -1;
    }
    r->started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r->size);
    return 0;
#else
    (void)argc;
    (void)argv;
    if (!distributed)
        return 0;
    fprintf(stderr, "%s: --distributed needs libtfm built with MPI (meson -Dmpi=enabled, "
            "Debian's libopenmpi-dev)\n", program);
    return -1;
#endif
}

/* Every rank's model starts as rank 0's, and draws its slice's dropout. */
static inline tfm_status ranks_share_model(ranks *r, tfm_model *model)
{
#ifdef TFM_EXAMPLES_MPI
    if (r->started) {
        r->distributed = tfm_distributed_create_for_model(MPI_COMM_WORLD, model);
        return r->distributed ? TFM_OK : tfm_last_status();
    }
#else
    (void)r;
    (void)model;
#endif
    return TFM_OK;
}

/* This rank's rows of a global batch of batch rows: equal slices when
 * batch divides by the ranks (as the dropout slices require), else as
 * near equal as can be. */
static inline void ranks_slice(const ranks *r, int64_t batch, int64_t *first, int64_t *count)
{
    *first = batch * r->rank / r->size;
    *count = batch * (r->rank + 1) / r->size - *first;
}

/* The global batch's gradient on every rank; weight: the items this rank's
 * loss averaged over. */
static inline tfm_status ranks_average_gradients(ranks *r, double weight)
{
#ifdef TFM_EXAMPLES_MPI
    if (r->distributed) {
        double start = MPI_Wtime();
        tfm_status status = tfm_distributed_average_gradients(r->distributed, weight);
        r->reduce_seconds += MPI_Wtime() - start;
        return status;
    }
#else
    (void)r;
    (void)weight;
#endif
    return TFM_OK;
}

/* The mean over every rank's items of a value each rank averaged over
 * weight items of its own (a slice's loss), on every rank. */
static inline double ranks_mean(const ranks *r, double value, double weight)
{
#ifdef TFM_EXAMPLES_MPI
    if (r->distributed) {
        double sums[2] = {value * weight, weight};
        MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        return sums[0] / sums[1];
    }
#else
    (void)r;
    (void)weight;
#endif
    return value;
}

/* Rank 0's value, on every rank (a decision only rank 0 may take alone,
 * such as a time limit, must be the same everywhere). */
static inline double ranks_share(const ranks *r, double value)
{
#ifdef TFM_EXAMPLES_MPI
    if (r->distributed)
        MPI_Bcast(&value, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
#else
    (void)r;
#endif
    return value;
}

/* Rank 0's flag, on every rank. */
static inline int ranks_decide(const ranks *r, int flag)
{
    return (int)ranks_share(r, flag);
}

/* Ends MPI and returns status, what main returns. A failed rank (status
 * not 0) among several ends the whole job with it (MPI_Abort): the others
 * may be waiting for it in a collective, and would wait forever. */
static inline int ranks_stop(ranks *r, int status)
{
#ifdef TFM_EXAMPLES_MPI
    if (r->started && r->size > 1 && status != 0) {
        fflush(stdout);
        fflush(stderr); /* this rank's message before the job's end */
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    tfm_distributed_free(r->distributed);
    r->distributed = NULL;
    if (r->started)
        MPI_Finalize();
#endif
    r->started = 0;
    return status;
}

#endif
