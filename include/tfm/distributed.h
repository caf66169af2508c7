/** @file
 * Data-parallel training on MPI: libtfm_mpi (pkg-config tfm-mpi), built
 * when meson finds MPI (-Dmpi=auto|enabled|disabled); libtfm itself never
 * needs MPI. Not included by tfm.h: include it after <mpi.h> is available.
 *
 * Every rank holds the whole model. Each step, each rank runs its slice of
 * the global batch (tfm_distributed_slice()), backward, then
 * tfm_distributed_average_gradients() makes every rank's gradients the
 * global batch's, and the optimizer steps identically everywhere. With the
 * model's slice set (done by tfm_distributed_create_for_model()), dropout
 * masks are the global batch's too, so N ranks train as one process would
 * on the global batch, up to the rounding of the sums (docs/scaling.md).
 *
 * Collective calls must be made by every rank of the communicator, in the
 * same order. They agree before they return: when one rank's arguments are
 * wrong, every rank gets the error, with the same message naming the rank.
 * libtfm_mpi works on its own duplicate of the caller's communicator, with
 * MPI errors returned rather than fatal: an MPI failure is TFM_ERR_IO with
 * MPI's message.
 *
 * Ownership: a tfm_distributed is caller-owned (tfm_distributed_free(),
 * which is collective) and refers to its parameter store (or model)
 * without owning it. Threads: one thread at a time per handle; MPI must be
 * initialised (MPI_Init) before create and finalised after free. */
#ifndef TFM_DISTRIBUTED_H
#define TFM_DISTRIBUTED_H

#include <mpi.h>

#include "tfm.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Data-parallel state over a communicator; opaque. */
typedef struct tfm_distributed tfm_distributed;

/** Collective. Checks that every rank's store has the same parameters
 * (names, order, shapes: TFM_ERR_ARG naming the first rank that differs
 * and how), then copies rank 0's values to every rank. NULL on every rank
 * on error. */
TFM_API tfm_distributed *tfm_distributed_create(MPI_Comm comm, tfm_params *params);

/** Collective. tfm_distributed_create() over the model's store, after
 * checking that every rank's model has rank 0's options (TFM_ERR_ARG
 * naming the first option that differs, and the rank); then sets the
 * model's slice to (rank, size) (tfm_model_set_shard()). */
TFM_API tfm_distributed *tfm_distributed_create_for_model(MPI_Comm comm, tfm_model *model);

/** This process's rank, from 0; -1 with TFM_ERR_NULL for NULL. */
TFM_API int32_t tfm_distributed_rank(const tfm_distributed *distributed);
/** The number of ranks; -1 with TFM_ERR_NULL for NULL. */
TFM_API int32_t tfm_distributed_size(const tfm_distributed *distributed);

/** This rank's rows of a global batch of batch rows: [*first, *first +
 * *count), equal slices in rank order, so that the ranks' slices laid end
 * to end are the global batch. batch must be a multiple of the size
 * (TFM_ERR_ARG), as the dropout slices require. Not collective. */
TFM_API tfm_status tfm_distributed_slice(const tfm_distributed *distributed, int64_t batch,
                                         int64_t *first, int64_t *count);

/** Collective, after backward: every rank's gradients become
 * sum_r(weight_r * g_r) / sum_r(weight_r), the gradient of the global
 * batch's loss when each rank's loss is a mean over weight_r items (for a
 * cross-entropy, the targets it counted; for equal slices of a plain mean,
 * any equal weights). A weight that is negative, NaN or infinite says this
 * rank's step failed: every rank then gets TFM_ERR_STATE naming the first
 * such rank, and no gradient changes. A total weight of 0 is TFM_ERR_ARG. */
TFM_API tfm_status tfm_distributed_average_gradients(tfm_distributed *distributed,
                                                     double weight);

/** Collective: TFM_OK on every rank when every rank passes TFM_OK;
 * otherwise every rank gets the status of the first rank that did not,
 * with a message naming it. For a step that may fail on one rank (reading
 * its data, say) before the next collective call. */
TFM_API tfm_status tfm_distributed_agree(tfm_distributed *distributed, tfm_status local);

/** Collective. Frees the handle and its communicator (not the store or
 * the model, whose slice stays set); NULL is a no-op on the rank passing
 * it, but every rank must call it with its handle. */
TFM_API void tfm_distributed_free(tfm_distributed *distributed);

#ifdef __cplusplus
}
#endif

#endif
