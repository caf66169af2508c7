/* libtfm_mpi: data-parallel training over MPI, on libtfm's public API
 * alone. Every collective call ends in agreement: a rank that finds a
 * problem tells the others, so no rank is left waiting in a collective the
 * others never reach, and every rank reports the same message. */
#include "tfm/distributed.h"

#include <limits.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct tfm_distributed {
    MPI_Comm comm; /* our duplicate of the caller's, errors returned */
    int rank, size;
    tfm_params *params;
};

enum { MESSAGE_BYTES = 480, OPTION_BYTES = 96, CHUNK = 1 << 30 };

/* MPI's message for a failed call, as this rank's error; TFM_ERR_IO. */
static tfm_status mpi_failure(const char *op, const char *call, int code)
{
    char text[MPI_MAX_ERROR_STRING], message[MESSAGE_BYTES];
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", code);
    snprintf(message, sizeof message, "%s: %s failed: %s", op, call, text);
    return tfm_report_error(TFM_ERR_IO, message);
}

#define MPI_CHECK(op, call)                                                                     \
    do {                                                                                         \
        int code_ = (call);                                                                      \
        if (code_ != MPI_SUCCESS)                                                                \
            return mpi_failure(op, #call, code_);                                                \
    } while (0)

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* MPI's blocking calls poll until they are done (OpenMPI's shared memory
 * has nothing to sleep on), so a rank that waits for a descheduled peer
 * spins on a core the peer could have had. This one polls for SPIN_SECONDS
 * (a peer a little behind, the usual wait of a step on a machine to
 * itself), then sleeps between polls, from SLEEP_FIRST up to SLEEP_LAST
 * seconds, and the core goes to whatever else is runnable. */
static int wait_politely(MPI_Request *request)
{
    const double SPIN_SECONDS = 100e-6, SLEEP_FIRST = 20e-6, SLEEP_LAST = 250e-6;
    int done = 0, code;
    double spin_end = seconds_now() + SPIN_SECONDS, nap = SLEEP_FIRST;
    while ((code = MPI_Test(request, &done, MPI_STATUS_IGNORE)) == MPI_SUCCESS && !done) {
        if (seconds_now() < spin_end)
            continue;
        struct timespec t = {0, (long)(nap * 1e9)};
        nanosleep(&t, NULL);
        nap = nap * 2 < SLEEP_LAST ? nap * 2 : SLEEP_LAST;
    }
    return code;
}

/* Every rank passes its status; all return the first failing rank's, with
 * its message (as tfm_last_error() has it there), or TFM_OK. Where ranks
 * meet, so their waits for each other are spent here, sleeping past a
 * short spin (wait_politely); the collectives after it find every rank. */
static tfm_status agree(const tfm_distributed *d, const char *op, tfm_status local)
{
    int first = local != TFM_OK ? d->rank : d->size;
    MPI_Request request;
    MPI_CHECK(op, MPI_Iallreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, d->comm, &request));
    int code = wait_politely(&request);
    if (code != MPI_SUCCESS)
        return mpi_failure(op, "MPI_Test", code);
    if (first == d->size)
        return TFM_OK;
    struct {
        int32_t status;
        char message[MESSAGE_BYTES];
    } verdict = {0};
    if (d->rank == first) {
        verdict.status = local;
        snprintf(verdict.message, sizeof verdict.message, "%s", tfm_last_error());
    }
    MPI_CHECK(op, MPI_Bcast(&verdict, (int)sizeof verdict, MPI_BYTE, first, d->comm));
    char message[MESSAGE_BYTES + 64];
    snprintf(message, sizeof message, "%s: on rank %d: %s", op, first, verdict.message);
    return tfm_report_error(verdict.status, message);
}

/* A local failure, recorded for agree() to pass on. */
static tfm_status fail(tfm_status status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static tfm_status fail(tfm_status status, const char *format, ...)
{
    char message[MESSAGE_BYTES];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    return tfm_report_error(status, message);
}

/* Long float arrays in int-sized pieces, as MPI counts are ints. */
static tfm_status broadcast_floats(const tfm_distributed *d, const char *op, float *values,
                                   int64_t count)
{
    for (int64_t done = 0; done < count; done += CHUNK) {
        int n = (int)(count - done < CHUNK ? count - done : CHUNK);
        MPI_CHECK(op, MPI_Bcast(values + done, n, MPI_FLOAT, 0, d->comm));
    }
    return TFM_OK;
}

static tfm_status sum_floats(const tfm_distributed *d, const char *op, float *values,
                             int64_t count)
{
    for (int64_t done = 0; done < count; done += CHUNK) {
        int n = (int)(count - done < CHUNK ? count - done : CHUNK);
        MPI_CHECK(op, MPI_Allreduce(MPI_IN_PLACE, values + done, n, MPI_FLOAT, MPI_SUM, d->comm));
    }
    return TFM_OK;
}

/* --- creation ------------------------------------------------------------------- */

/* The caller's communicator duplicated, with MPI errors returned. */
static tfm_distributed *open_comm(const char *op, MPI_Comm comm)
{
    if (comm == MPI_COMM_NULL) {
        fail(TFM_ERR_NULL, "%s: the communicator is MPI_COMM_NULL", op);
        return NULL;
    }
    tfm_distributed *d = calloc(1, sizeof *d);
    if (!d) {
        fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return NULL;
    }
    int code = MPI_Comm_dup(comm, &d->comm);
    if (code == MPI_SUCCESS)
        code = MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    if (code == MPI_SUCCESS)
        code = MPI_Comm_rank(d->comm, &d->rank);
    if (code == MPI_SUCCESS)
        code = MPI_Comm_size(d->comm, &d->size);
    if (code != MPI_SUCCESS) {
        mpi_failure(op, "duplicating the communicator", code);
        free(d);
        return NULL;
    }
    return d;
}

static void close_comm(tfm_distributed *d)
{
    MPI_Comm_free(&d->comm);
    free(d);
}

/* FNV-1a over the parameters' names and shapes, in order. */
static uint64_t layout_hash(tfm_params *params)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t i = 0; i < tfm_params_count(params); i++) {
        const char *name = tfm_params_name(params, i);
        int64_t shape[TFM_MAX_DIMS] = {0};
        tfm_tensor_shape(tfm_params_at(params, i), shape);
        for (size_t k = 0; k <= strlen(name); k++)
            h = (h ^ (unsigned char)name[k]) * 0x100000001b3ull;
        for (int k = 0; k < TFM_MAX_DIMS; k++)
            h = (h ^ (uint64_t)shape[k]) * 0x100000001b3ull;
    }
    return h;
}

/* Every rank's parameters against rank 0's: count, values, names and
 * shapes. All ranks see every rank's description, so all conclude alike. */
static tfm_status check_params(const tfm_distributed *d, const char *op)
{
    int64_t mine[3] = {tfm_params_count(d->params), tfm_params_numel(d->params),
                       (int64_t)layout_hash(d->params)};
    int64_t *all = malloc((size_t)d->size * sizeof mine);
    tfm_status status = all ? TFM_OK : fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    if ((status = agree(d, op, status)) != TFM_OK) {
        free(all);
        return status;
    }
    int code = MPI_Allgather(mine, 3, MPI_INT64_T, all, 3, MPI_INT64_T, d->comm);
    if (code != MPI_SUCCESS) {
        free(all);
        return mpi_failure(op, "MPI_Allgather", code);
    }
    for (int r = 1; r < d->size && status == TFM_OK; r++) {
        const int64_t *theirs = all + 3 * r;
        if (theirs[0] != all[0] || theirs[1] != all[1])
            status = fail(TFM_ERR_ARG, "%s: rank %d has %lld parameter tensors of %lld values, "
                          "rank 0 %lld of %lld", op, r, (long long)theirs[0],
                          (long long)theirs[1], (long long)all[0], (long long)all[1]);
        else if (theirs[2] != all[2])
            status = fail(TFM_ERR_ARG, "%s: rank %d's parameters have other names or shapes "
                          "than rank 0's", op, r);
    }
    free(all);
    return status;
}

static tfm_distributed *finish_create(tfm_distributed *d, const char *op)
{
    tfm_status status = check_params(d, op);
    if (status == TFM_OK)
        status = broadcast_floats(d, op, tfm_params_values(d->params),
                                  tfm_params_numel(d->params));
    if (agree(d, op, status) != TFM_OK) {
        close_comm(d);
        return NULL;
    }
    return d;
}

tfm_distributed *tfm_distributed_create(MPI_Comm comm, tfm_params *params)
{
    const char *op = "tfm_distributed_create";
    tfm_distributed *d = open_comm(op, comm);
    if (!d)
        return NULL;
    d->params = params;
    tfm_status status = params ? TFM_OK : fail(TFM_ERR_NULL, "%s: params is NULL", op);
    if (agree(d, op, status) != TFM_OK) {
        close_comm(d);
        return NULL;
    }
    return finish_create(d, op);
}

/* Rank 0's options as text against this rank's: the first that differs. */
static tfm_status check_options(const tfm_distributed *d, const char *op, const tfm_model *model)
{
    int count = tfm_model_option_count();
    char *theirs = malloc((size_t)count * OPTION_BYTES), mine[OPTION_BYTES];
    tfm_status status = theirs ? TFM_OK : fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    if ((status = agree(d, op, status)) != TFM_OK) {
        free(theirs);
        return status;
    }
    const char *name = NULL;
    for (int i = 0; d->rank == 0 && i < count; i++)
        tfm_model_option(model, i, &name, theirs + i * OPTION_BYTES, OPTION_BYTES);
    int code = MPI_Bcast(theirs, count * OPTION_BYTES, MPI_CHAR, 0, d->comm);
    if (code != MPI_SUCCESS) {
        free(theirs);
        return mpi_failure(op, "MPI_Bcast", code);
    }
    for (int i = 0; i < count && status == TFM_OK; i++) {
        tfm_model_option(model, i, &name, mine, sizeof mine);
        if (strcmp(mine, theirs + i * OPTION_BYTES) != 0)
            status = fail(TFM_ERR_ARG, "%s: option %s is %s here and %s on rank 0", op, name,
                          mine, theirs + i * OPTION_BYTES);
    }
    free(theirs);
    return agree(d, op, status);
}

tfm_distributed *tfm_distributed_create_for_model(MPI_Comm comm, tfm_model *model)
{
    const char *op = "tfm_distributed_create_for_model";
    tfm_distributed *d = open_comm(op, comm);
    if (!d)
        return NULL;
    tfm_status status = model ? TFM_OK : fail(TFM_ERR_NULL, "%s: model is NULL", op);
    if (agree(d, op, status) != TFM_OK || check_options(d, op, model) != TFM_OK) {
        close_comm(d);
        return NULL;
    }
    d->params = tfm_model_params(model);
    if (!finish_create(d, op))
        return NULL;
    tfm_model_set_shard(model, d->rank, d->size); /* within [0, size) */
    return d;
}

void tfm_distributed_free(tfm_distributed *d)
{
    if (d)
        close_comm(d);
}

int32_t tfm_distributed_rank(const tfm_distributed *d)
{
    if (!d)
        fail(TFM_ERR_NULL, "tfm_distributed_rank: distributed is NULL");
    return d ? d->rank : -1;
}

int32_t tfm_distributed_size(const tfm_distributed *d)
{
    if (!d)
        fail(TFM_ERR_NULL, "tfm_distributed_size: distributed is NULL");
    return d ? d->size : -1;
}

/* --- each step ------------------------------------------------------------------- */

tfm_status tfm_distributed_slice(const tfm_distributed *d, int64_t batch, int64_t *first,
                                 int64_t *count)
{
    const char *op = "tfm_distributed_slice";
    if (!d || !first || !count)
        return fail(TFM_ERR_NULL, "%s: %s is NULL", op, !d ? "distributed" : "first or count");
    if (batch < 1 || batch % d->size)
        return fail(TFM_ERR_ARG, "%s: a batch of %lld rows does not split into %d equal slices",
                    op, (long long)batch, d->size);
    *count = batch / d->size;
    *first = d->rank * *count;
    return TFM_OK;
}

tfm_status tfm_distributed_average_gradients(tfm_distributed *d, double weight)
{
    const char *op = "tfm_distributed_average_gradients";
    if (!d)
        return fail(TFM_ERR_NULL, "%s: distributed is NULL", op);
    tfm_status status = isfinite(weight) && weight >= 0.0
                            ? TFM_OK
                            : fail(TFM_ERR_STATE, "this rank's step failed (its weight is %g)",
                                   weight);
    if ((status = agree(d, op, status)) != TFM_OK)
        return status;
    double total = weight;
    MPI_CHECK(op, MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_DOUBLE, MPI_SUM, d->comm));
    if (!(total > 0.0))
        return fail(TFM_ERR_ARG, "%s: the ranks' weights add up to %g", op, total);
    float *grads = tfm_params_grads(d->params);
    int64_t n = tfm_params_numel(d->params);
    float share = (float)(weight / total);
    if (share != 1.0f)
        for (int64_t i = 0; i < n; i++)
            grads[i] *= share;
    return sum_floats(d, op, grads, n);
}

tfm_status tfm_distributed_agree(tfm_distributed *d, tfm_status local)
{
    if (!d)
        return fail(TFM_ERR_NULL, "tfm_distributed_agree: distributed is NULL");
    return agree(d, "tfm_distributed_agree", local);
}
