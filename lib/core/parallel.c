#include "core/parallel.h"

#include <pthread.h>
#include <sched.h>

#include "core/error.h"
#include "core/gemm.h"
#include "core/thread_buffer.h"
#include "tfm/common.h"

/* A loop's ticket is its number times TICKET_LOOP plus the workers it runs
 * on, caller included: one atomic word, so a worker reads both at once. */
#define TICKET_LOOP 128
_Static_assert(TFM__MAX_THREADS < TICKET_LOOP, "a ticket holds the worker count");

/* A loop is handed over without locks while the threads are polling; the
 * mutex and condition variables are for the threads that went to sleep
 * (sleepers, caller_asleep), which the other side then wakes. */
typedef struct pool {
    pthread_mutex_t lock;      /* held by the thread running a loop */
    pthread_mutex_t state;     /* guards started, stopping and the sleeping */
    pthread_cond_t wake, done;
    pthread_t workers[TFM__MAX_THREADS];
    int started;               /* workers 1 .. started are running */
    int fork_handler_set;
    int stopping;
    int sleepers;              /* workers asleep on wake */
    int caller_asleep;         /* the caller asleep on done */
    uint64_t ticket;           /* the current loop's */
    uint64_t pending;          /* its workers still working (the caller excluded) */
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

/* A worker, and the caller waiting for its workers, first poll for this
 * many pauses (~0.25 ms on an Ice Lake, up to ~1 ms where a pause is
 * slower) before sleeping: a training step runs hundreds of short loops
 * with serial work between them, and a sleeping thread takes tens of
 * microseconds to wake, longer when the host has descheduled the core.
 * Tutorial 003's bucketed steps: 37 sleeps a step instead of 104, ~9%
 * more steps a second. The BLAS runs on one thread while libtfm has
 * several (core/gemm.h), so no other pool needs the core meanwhile. */
#define SPIN_PAUSES 20000
/* Past the first SPIN_ALONE pauses (~30 us on a Zen 4, whose pause takes
 * ~60 ns) a poller offers its core every YIELD_EVERY pauses: on a loaded
 * host the thread it waits for may be queued behind it on that core, and
 * polled to the end it would keep that thread off for the whole spin (a
 * loaded run's profile had 55% of its samples here). Where nothing else
 * waits for the core, sched_yield returns at once (~1 us). */
#define SPIN_ALONE 500
#define YIELD_EVERY 100

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
        if (i >= SPIN_ALONE && i % YIELD_EVERY == 0)
            sched_yield();
        else
            pause_briefly();
    }
    return 0;
}

/* Sleeping and waking pair up as a store then a load on each side (the
 * sleeper's count, then the ticket or pending; the waker's ticket or
 * pending, then the count), all sequentially consistent: one of the two
 * sees the other's store, so a wake-up is never lost. */
static void *worker_main(void *arg)
{
    pool *p = &the_pool;
    int worker = (int)(intptr_t)arg;
    /* A worker started later has a higher number than the last loop's
     * workers, so that loop's ticket does not run it. */
    uint64_t seen = 0;
    for (;;) {
        if (__atomic_load_n(&p->ticket, __ATOMIC_ACQUIRE) == seen &&
            !spin_while_equal(&p->ticket, seen)) {
            pthread_mutex_lock(&p->state);
            __atomic_add_fetch(&p->sleepers, 1, __ATOMIC_SEQ_CST);
            while (!p->stopping && __atomic_load_n(&p->ticket, __ATOMIC_SEQ_CST) == seen)
                pthread_cond_wait(&p->wake, &p->state);
            __atomic_sub_fetch(&p->sleepers, 1, __ATOMIC_RELAXED);
            int stopping = p->stopping;
            pthread_mutex_unlock(&p->state);
            if (stopping)
                return NULL;
        }
        seen = __atomic_load_n(&p->ticket, __ATOMIC_ACQUIRE);
        int active = (int)(seen % TICKET_LOOP);
        if (worker >= active)
            continue;
        run_share(p->fn, p->ctx, p->n, active, worker);
        if (__atomic_sub_fetch(&p->pending, 1, __ATOMIC_SEQ_CST) == 0 &&
            __atomic_load_n(&p->caller_asleep, __ATOMIC_SEQ_CST)) {
            pthread_mutex_lock(&p->state);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->state);
        }
    }
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
    p->sleepers = p->caller_asleep = 0;
    p->ticket = p->pending = 0;
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
    tfm__thread_buffer_release(); /* after the workers, whose buffers their ends freed */
}

/* This thread's own limit (tfm__limit_threads); 0: none. */
static _Thread_local int thread_limit;

void tfm__limit_threads(int threads)
{
    thread_limit = threads;
}

int tfm__threads(void)
{
    int threads = __atomic_load_n(&requested_threads, __ATOMIC_RELAXED);
    return thread_limit > 0 && thread_limit < threads ? thread_limit : threads;
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
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    __atomic_store_n(&p->pending, (uint64_t)(count - 1), __ATOMIC_RELAXED);
    uint64_t loop = __atomic_load_n(&p->ticket, __ATOMIC_RELAXED) / TICKET_LOOP + 1;
    __atomic_store_n(&p->ticket, loop * TICKET_LOOP + (uint64_t)count, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&p->sleepers, __ATOMIC_SEQ_CST) > 0) {
        pthread_mutex_lock(&p->state);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->state);
    }
    run_share(fn, ctx, n, count, 0);
    /* pending only falls: the spin waits for it to leave its last value */
    for (uint64_t left; (left = __atomic_load_n(&p->pending, __ATOMIC_ACQUIRE)) > 0;)
        if (!spin_while_equal(&p->pending, left))
            break;
    if (__atomic_load_n(&p->pending, __ATOMIC_ACQUIRE) > 0) {
        pthread_mutex_lock(&p->state);
        __atomic_store_n(&p->caller_asleep, 1, __ATOMIC_SEQ_CST);
        while (__atomic_load_n(&p->pending, __ATOMIC_SEQ_CST) > 0)
            pthread_cond_wait(&p->done, &p->state);
        __atomic_store_n(&p->caller_asleep, 0, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&p->state);
    }
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
