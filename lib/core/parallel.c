#include "core/parallel.h"

#include <pthread.h>

#include "core/error.h"
#include "core/gemm.h"
#include "tfm/common.h"

typedef struct pool {
    pthread_mutex_t lock;      /* held by the thread running a loop */
    pthread_mutex_t state;     /* guards everything below */
    pthread_cond_t wake, done;
    pthread_t workers[TFM__MAX_THREADS];
    int started;               /* workers 1 .. started are running */
    int fork_handler_set;
    int stopping;
    uint64_t generation;       /* bumped per loop: wakes the workers */
    int active;                /* workers in the current loop, caller included */
    uint64_t pending;          /* of those, still working (the caller excluded) */
    tfm__range_fn fn;
    void *ctx;
    int64_t n;
} pool;

static pool the_pool = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .state = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};
static int requested_threads = 1; /* tfm_set_num_threads */

/* Worker `worker`'s share of [0, n) split `count` ways. */
static void run_share(tfm__range_fn fn, void *ctx, int64_t n, int count, int worker)
{
    int64_t begin = n * worker / count, end = n * (worker + 1) / count;
    if (begin < end)
        fn(ctx, begin, end, worker);
}

static void run_range(pool *p, int worker)
{
    run_share(p->fn, p->ctx, p->n, p->active, worker);
}

/* A worker, and the caller waiting for its workers, first poll for this
 * many pauses (~50 us) before sleeping: a training step runs hundreds of
 * short loops, and a sleeping thread takes tens of microseconds to wake,
 * longer when the host has descheduled the core. The BLAS runs on one
 * thread while libtfm has several (core/gemm.h), so no other pool needs
 * the core meanwhile. */
#define SPIN_PAUSES 2000

static void pause_briefly(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Polls *value (read atomically) until it differs from `from`; whether it
 * did before the spin ran out. */
static int spin_while_equal(const uint64_t *value, uint64_t from)
{
    for (int i = 0; i < SPIN_PAUSES; i++) {
        if (__atomic_load_n(value, __ATOMIC_ACQUIRE) != from)
            return 1;
        pause_briefly();
    }
    return 0;
}

static void *worker_main(void *arg)
{
    pool *p = &the_pool;
    int worker = (int)(intptr_t)arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->state);
    for (;;) {
        if (!p->stopping && __atomic_load_n(&p->generation, __ATOMIC_RELAXED) == seen) {
            pthread_mutex_unlock(&p->state);
            spin_while_equal(&p->generation, seen);
            pthread_mutex_lock(&p->state);
        }
        while (!p->stopping && __atomic_load_n(&p->generation, __ATOMIC_RELAXED) == seen)
            pthread_cond_wait(&p->wake, &p->state);
        if (p->stopping)
            break;
        seen = __atomic_load_n(&p->generation, __ATOMIC_RELAXED);
        if (worker >= p->active)
            continue;
        pthread_mutex_unlock(&p->state);
        run_range(p, worker);
        pthread_mutex_lock(&p->state);
        if (__atomic_sub_fetch(&p->pending, 1, __ATOMIC_RELEASE) == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->state);
    return NULL;
}

/* A forked child has none of the parent's workers, and its new ones must
 * not take the parent's last loop for theirs. */
static void forget_workers_after_fork(void)
{
    pool *p = &the_pool;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_init(&p->state, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->started = 0;
    p->generation = 0;
    p->active = p->pending = 0;
    p->fn = NULL;
    p->ctx = NULL;
    p->n = 0;
}

/* Starts workers up to count - 1 (the caller is worker 0); how many run. */
static int start_workers(pool *p, int count)
{
    pthread_mutex_lock(&p->state);
    if (!p->fork_handler_set && count > 1)
        p->fork_handler_set = pthread_atfork(NULL, NULL, forget_workers_after_fork) == 0;
    while (!p->stopping && p->started + 1 < count &&
           pthread_create(&p->workers[p->started + 1], NULL, worker_main,
                          (void *)(intptr_t)(p->started + 1)) == 0)
        p->started++;
    int running = p->started + 1;
    pthread_mutex_unlock(&p->state);
    return running;
}

__attribute__((destructor)) static void stop_workers(void)
{
    pool *p = &the_pool;
    pthread_mutex_lock(&p->state);
    p->stopping = 1;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->state);
    for (int i = 1; i <= p->started; i++)
        pthread_join(p->workers[i], NULL);
    p->started = 0; /* loops after this (later destructors) run on the caller */
}

int tfm__threads(void)
{
    return __atomic_load_n(&requested_threads, __ATOMIC_RELAXED);
}

int tfm__workers_for(int64_t floats)
{
    return floats < 32768 ? 1 : tfm__threads();
}

void tfm__parallel_for(int64_t n, int max_workers, tfm__range_fn fn, void *ctx)
{
    pool *p = &the_pool;
    int count = tfm__threads();
    if (count > max_workers)
        count = max_workers;
    if (count > n)
        count = (int)n;
    /* When the pool is busy or short of workers, the caller runs every
     * share itself, as the workers would have: a kernel's rounding depends
     * on its shares (a split product, per-worker partial sums), so the
     * result must not depend on what else the program runs at the time. */
    int pool_taken = count > 1 && pthread_mutex_trylock(&p->lock) == 0;
    if (pool_taken && start_workers(p, count) < count) {
        pthread_mutex_unlock(&p->lock);
        pool_taken = 0;
    }
    if (!pool_taken) {
        for (int worker = 0; worker < count; worker++)
            run_share(fn, ctx, n, count, worker);
        return;
    }
    pthread_mutex_lock(&p->state);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->active = count;
    __atomic_store_n(&p->pending, (uint64_t)(count - 1), __ATOMIC_RELAXED);
    __atomic_add_fetch(&p->generation, 1, __ATOMIC_RELEASE); /* spinning workers go */
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->state);
    run_range(p, 0);
    /* pending only falls: the spin waits for it to leave its last value */
    for (uint64_t left; (left = __atomic_load_n(&p->pending, __ATOMIC_ACQUIRE)) > 0;)
        if (!spin_while_equal(&p->pending, left))
            break;
    pthread_mutex_lock(&p->state);
    while (__atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) > 0)
        pthread_cond_wait(&p->done, &p->state);
    pthread_mutex_unlock(&p->state);
    pthread_mutex_unlock(&p->lock);
}

tfm_status tfm_set_num_threads(int32_t threads)
{
    if (threads < 1 || threads > TFM__MAX_THREADS)
        return tfm__fail(TFM_ERR_ARG, "tfm_set_num_threads: %d threads is outside [1, %d]",
                         (int)threads, TFM__MAX_THREADS);
    __atomic_store_n(&requested_threads, threads, __ATOMIC_RELAXED);
    tfm__blas_follow_threads(threads);
    return TFM_OK;
}

int32_t tfm_get_num_threads(void)
{
    return tfm__threads();
}
