/* libtfm_mpi under `mpirun -np 2`: two ranks train as one process would on
 * the global batch (dropout included), a state saved by rank 0 resumes in a
 * single process, and every error reaches both ranks with one message.
 * Rank 0 prints the checks and "N passed, N failed". */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <tfm/distributed.h>

enum { BATCH = 8, SRC = 6, TGT = 5, VOCAB = 12, PAD = 0, STEPS = 100, SAVE_AT = 50 };

static int passed, failed, rank;

static void check(int ok, const char *what)
{
    if (rank != 0)
        return;
    if (ok) {
        passed++;
        printf("ok   %s\n", what);
    } else {
        failed++;
        printf("FAILED: %s (%s)\n", what, tfm_last_error());
    }
}

static tfm_model *make_model(int32_t heads)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = o.tgt_vocab = VOCAB;
    o.max_src_len = SRC;
    o.max_tgt_len = TGT;
    o.d_model = 16;
    o.heads = heads;
    o.d_ff = 32;
    o.encoder_layers = o.decoder_layers = 1;
    o.dropout = 0.1f;
    o.seed = 5;
    return tfm_model_create(&o);
}

static tfm_optimizer_kind optimizer_kind;

/* SGD with momentum, or Adam (see the tolerances in main). */
static tfm_optimizer *make_optimizer(tfm_model *model)
{
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, optimizer_kind);
    if (optimizer_kind == TFM_OPTIMIZER_SGD) {
        o.lr = 0.1f;
        o.momentum = 0.9f;
    }
    return tfm_optimizer_create(tfm_model_params(model), &o);
}

/* The global batch of a step, the same on every rank; targets hold PADs,
 * so the ranks' slices count different numbers of targets. */
static void global_batch(tfm_rng *data, int32_t *src, int32_t *tgt, int32_t *out)
{
    for (int i = 0; i < BATCH * SRC; i++)
        src[i] = 1 + (int32_t)(tfm_rng_next_u64(data) % (VOCAB - 1));
    for (int i = 0; i < BATCH * TGT; i++) {
        tgt[i] = 1 + (int32_t)(tfm_rng_next_u64(data) % (VOCAB - 1));
        out[i] = (int32_t)(tfm_rng_next_u64(data) % VOCAB); /* 0: ignored */
    }
}

/* One step on rows [first, first + rows) of the global batch; the targets
 * the loss counted go to *counted. 0, or -1 with the error set. */
static int step(tfm_model *model, tfm_tape *tape, tfm_rng *data, int64_t first, int64_t rows,
                double *counted)
{
    int32_t src[BATCH * SRC], tgt[BATCH * TGT], out[BATCH * TGT];
    global_batch(data, src, tgt, out);
    tfm_tensor *s = tfm_tensor_from_i32(2, (const int64_t[]){rows, SRC}, src + first * SRC);
    tfm_tensor *t = tfm_tensor_from_i32(2, (const int64_t[]){rows, TGT}, tgt + first * TGT);
    tfm_tensor *o = tfm_tensor_from_i32(2, (const int64_t[]){rows, TGT}, out + first * TGT);
    tfm_tensor *loss = tfm_cross_entropy(
        tape, tfm_model_forward(tape, model, s, t, NULL, tfm_mask_causal(tape, TGT, TFM_F32), NULL,
                                NULL, NULL, NULL),
        o, PAD, 0.0f);
    int ok = loss && tfm_params_zero_grad(tfm_model_params(model)) == TFM_OK &&
             tfm_tape_backward(tape, loss) == TFM_OK;
    *counted = 0;
    for (int64_t i = first * TGT; i < (first + rows) * TGT; i++)
        *counted += out[i] != PAD;
    tfm_tape_reset(tape);
    tfm_tensor_free(s);
    tfm_tensor_free(t);
    tfm_tensor_free(o);
    return ok ? 0 : -1;
}

/* ||a - b|| / ||b|| over the whole parameter block. */
static double relative_difference(tfm_model *a, tfm_model *b)
{
    const float *x = tfm_params_values(tfm_model_params(a));
    const float *y = tfm_params_values(tfm_model_params(b));
    double diff = 0, norm = 0;
    for (int64_t i = 0; i < tfm_params_numel(tfm_model_params(b)); i++) {
        diff += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        norm += (double)y[i] * y[i];
    }
    return sqrt(diff / norm);
}

/* Single-process training from step `from` to STEPS on the whole batch. */
static int train_alone(tfm_model *model, tfm_optimizer *adam, tfm_rng *data, int from)
{
    tfm_tape *tape = tfm_tape_create();
    double counted;
    int ok = tape != NULL;
    for (int i = from; ok && i < STEPS; i++)
        ok = step(model, tape, data, 0, BATCH, &counted) == 0 && tfm_optimizer_step(adam) == TFM_OK;
    tfm_tape_free(tape);
    return ok;
}

/* 2 ranks against 1 process after STEPS steps, within tolerance (relative,
 * over the whole parameter block); then rank 0's state at SAVE_AT resumed
 * in one process. */
static void equality_and_resume(const char *state_path, const char *name, double tolerance)
{
    char what[160];
    tfm_model *model = make_model(2);
    tfm_distributed *d = model ? tfm_distributed_create_for_model(MPI_COMM_WORLD, model) : NULL;
    check(d != NULL, "create_for_model on every rank");
    if (!d) {
        tfm_model_free(model);
        return;
    }
    tfm_optimizer *adam = make_optimizer(model);
    tfm_tape *tape = tfm_tape_create();
    tfm_rng *data = tfm_rng_create(99);
    int64_t first = 0, rows = 0;
    int ok = tfm_distributed_slice(d, BATCH, &first, &rows) == TFM_OK && rows == BATCH / 2 &&
             first == rank * rows;
    check(ok, "each rank holds its half of the global batch");
    for (int i = 0; ok && i < STEPS; i++) {
        double counted = 0;
        ok = step(model, tape, data, first, rows, &counted) == 0 &&
             tfm_distributed_average_gradients(d, counted) == TFM_OK &&
             tfm_optimizer_step(adam) == TFM_OK;
        if (ok && i + 1 == SAVE_AT && rank == 0) /* checkpoints: rank 0 alone writes */
            ok = tfm_training_save(state_path, model, adam, 1, (const tfm_rng *const[]){data}, 0,
                                   NULL, NULL) == TFM_OK;
    }
    check(ok, "100 steps on 2 ranks");
    /* the ranks hold the same bits */
    int64_t n = tfm_params_numel(tfm_model_params(model));
    float *other = malloc((size_t)n * sizeof *other);
    const float *mine = tfm_params_values(tfm_model_params(model));
    if (rank == 1)
        MPI_Send(mine, (int)n, MPI_FLOAT, 0, 0, MPI_COMM_WORLD);
    else
        MPI_Recv(other, (int)n, MPI_FLOAT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    check(rank != 0 || memcmp(mine, other, (size_t)n * sizeof *other) == 0,
          "both ranks hold the same parameters, bit for bit");
    free(other);

    if (rank == 0) {
        /* one process on the global batch, from the same seed */
        tfm_model *alone = make_model(2);
        tfm_optimizer *adam_alone = make_optimizer(alone);
        tfm_rng *data_alone = tfm_rng_create(99);
        int trained = train_alone(alone, adam_alone, data_alone, 0);
        double r = trained ? relative_difference(model, alone) : INFINITY;
        printf("     %s: 2 ranks against 1 process after %d steps: relative difference %.3g\n",
               name, STEPS, r);
        snprintf(what, sizeof what, "%s: 2 ranks train as one process on the global batch "
                 "(<= %g)", name, tolerance);
        check(trained && r <= tolerance, what);
        /* rank 0's checkpoint resumes in a single process */
        tfm_model *resumed = tfm_model_load(state_path);
        tfm_optimizer *adam_resumed = resumed ? make_optimizer(resumed) : NULL;
        tfm_rng *data_resumed = tfm_rng_create(0);
        int loaded = adam_resumed && tfm_training_load(state_path, resumed, adam_resumed, 1,
                                                       (tfm_rng *const[]){data_resumed}) == TFM_OK;
        trained = loaded && train_alone(resumed, adam_resumed, data_resumed, SAVE_AT);
        r = trained ? relative_difference(model, resumed) : INFINITY;
        printf("     %s: resumed at step %d in 1 process: relative difference %.3g\n", name,
               SAVE_AT, r);
        snprintf(what, sizeof what, "%s: a state saved on 2 ranks resumes in 1 process (<= %g)",
                 name, tolerance);
        check(trained && r <= tolerance, what);
        remove(state_path);
        tfm_rng_free(data_resumed);
        tfm_optimizer_free(adam_resumed);
        tfm_model_free(resumed);
        tfm_rng_free(data_alone);
        tfm_optimizer_free(adam_alone);
        tfm_model_free(alone);
    }
    tfm_rng_free(data);
    tfm_tape_free(tape);
    tfm_optimizer_free(adam);
    tfm_distributed_free(d);
    tfm_model_free(model);
}

/* Both ranks see the error, with the same message naming the rank. */
static int both_see(tfm_status status, const char *fragment)
{
    int mine = tfm_last_status() == status && strstr(tfm_last_error(), fragment) != NULL;
    int all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rank == 0 && !all)
        printf("     status %s, message: %s\n", tfm_status_name(tfm_last_status()),
               tfm_last_error());
    tfm_clear_error();
    return all;
}

static void errors(void)
{
    tfm_model *model = make_model(rank == 1 ? 4 : 2);
    tfm_distributed *d = tfm_distributed_create_for_model(MPI_COMM_WORLD, model);
    check(d == NULL && both_see(TFM_ERR_ARG, "option heads is 4 here and 2 on rank 0"),
          "different model options: refused on both ranks, naming the option");
    tfm_model_free(model);

    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "w", 1, (const int64_t[]){rank == 1 ? 3 : 4});
    d = tfm_distributed_create(MPI_COMM_WORLD, params);
    check(d == NULL && both_see(TFM_ERR_ARG, "rank 1 has 1 parameter tensors of 3 values"),
          "different parameters: refused on both ranks, naming the rank");
    tfm_params_free(params);

    params = tfm_params_create();
    tfm_tensor *w = tfm_params_add(params, "w", 1, (const int64_t[]){4});
    tfm_tensor_write_f32(w, (const float[]){rank + 1.0f, 2, 3, 4}, 4);
    d = tfm_distributed_create(MPI_COMM_WORLD, params);
    check(d && tfm_tensor_data_f32(w)[0] == 1.0f, "create copies rank 0's values everywhere");
    float *g = tfm_params_grads(params);
    for (int i = 0; i < 4; i++)
        g[i] = (float)(rank + 1);
    tfm_status s = tfm_distributed_average_gradients(d, rank == 1 ? NAN : 1.0);
    check(s == TFM_ERR_STATE && both_see(TFM_ERR_STATE, "on rank 1") && g[0] == (float)(rank + 1),
          "a failed step on one rank stops both, gradients unchanged");
    s = tfm_distributed_average_gradients(d, rank == 0 ? 1.0 : 3.0);
    check(s == TFM_OK && g[0] == 1.75f, "gradients weighted by each rank's count: (1*1 + 3*2)/4");
    s = tfm_distributed_agree(d, rank == 0 ? TFM_ERR_IO : TFM_OK);
    check(s == TFM_ERR_IO && both_see(TFM_ERR_IO, "on rank 0"),
          "agree: one rank's failure reaches every rank");
    check(tfm_distributed_agree(d, TFM_OK) == TFM_OK, "agree: all well");
    int64_t first, count;
    check(tfm_distributed_slice(d, 7, &first, &count) == TFM_ERR_ARG,
          "a batch that does not split evenly is refused");
    tfm_clear_error();
    check(tfm_distributed_rank(NULL) == -1 &&
              both_see(TFM_ERR_NULL, "tfm_distributed_rank: distributed is NULL"),
          "rank of NULL: -1 with a message");
    check(tfm_distributed_size(NULL) == -1 &&
              both_see(TFM_ERR_NULL, "tfm_distributed_size: distributed is NULL"),
          "size of NULL: -1 with a message");
    tfm_distributed_free(d);
    tfm_params_free(params);
}

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Rank 0 comes LATE_MS after rank 1 to average the gradients: rank 1 waits
 * asleep (voluntary context switches) instead of spinning all the while on
 * a core that rank 0, on a busy machine, could have had; and the average
 * is still right. */
static void a_waiting_rank_sleeps(void)
{
    enum { LATE_MS = 500 };
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "w", 1, (const int64_t[]){3});
    tfm_distributed *d = tfm_distributed_create(MPI_COMM_WORLD, params);
    check(d != NULL, "create for the waiting test");
    if (!d) {
        tfm_params_free(params);
        return;
    }
    float *g = tfm_params_grads(params);
    for (int i = 0; i < 3; i++)
        g[i] = (float)(rank + 1);
    if (rank == 0)
        nanosleep(&(struct timespec){0, LATE_MS * 1000000L}, NULL);
    struct rusage before, after;
    getrusage(RUSAGE_THREAD, &before);
    double wall = seconds(CLOCK_MONOTONIC), cpu = seconds(CLOCK_THREAD_CPUTIME_ID);
    tfm_status s = tfm_distributed_average_gradients(d, 1.0);
    getrusage(RUSAGE_THREAD, &after);
    /* rank 1's wait, CPU time and sleeps, on rank 0 */
    double waited[3] = {seconds(CLOCK_MONOTONIC) - wall, seconds(CLOCK_THREAD_CPUTIME_ID) - cpu,
                        (double)(after.ru_nvcsw - before.ru_nvcsw)};
    MPI_Bcast(waited, 3, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    if (rank == 0)
        printf("     rank 1 waited %.3f s for rank 0: %.3f s of CPU, %.0f sleeps\n", waited[0],
               waited[1], waited[2]);
    check(s == TFM_OK && g[0] == 1.5f && g[2] == 1.5f, "a late rank's gradients are averaged in");
    check(waited[0] >= 0.8e-3 * LATE_MS && waited[2] >= 20 && waited[1] < 0.25 * waited[0],
          "a rank waiting for a late one sleeps (>= 20 sleeps, < 25% of the wait on the CPU)");
    tfm_distributed_free(d);
    tfm_params_free(params);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check(size == 2, "run with 2 ranks");
    if (size == 2) {
        const char *state = argc > 1 ? argv[1] : "distributed_state.safetensors";
        /* The halves' gradients add up to the batch's up to rounding (the
         * ranks agree bit for bit). SGD keeps that rounding where it is;
         * Adam's first steps move each weight by about lr whatever its
         * gradient's size, so a gradient that is zero up to rounding moves
         * by +-lr on the sign of the rounding: 1e-4 here. */
        optimizer_kind = TFM_OPTIMIZER_SGD;
        equality_and_resume(state, "SGD with momentum", 1e-6);
        optimizer_kind = TFM_OPTIMIZER_ADAM;
        equality_and_resume(state, "Adam", 1e-3);
        errors();
        a_waiting_rank_sleeps();
    }
    if (rank == 0)
        printf("%d passed, %d failed\n", passed, failed);
    int result = failed;
    MPI_Bcast(&result, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return result ? EXIT_FAILURE : EXIT_SUCCESS;
}
