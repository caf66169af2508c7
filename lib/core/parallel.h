/* libtfm's own threads: a small pool that splits a loop's range among the
 * calling thread and its workers. Workers poll briefly, then sleep on a
 * condition variable between loops. When the pool is busy (another thread
 * of the program, or a loop inside a loop) or its workers cannot be
 * started, the calling thread runs every worker's share itself, one after
 * the other, so that a result never depends on contention. */
#ifndef TFM_CORE_PARALLEL_H
#define TFM_CORE_PARALLEL_H

#include <stdint.h>

/* The most threads libtfm runs; also the most per-worker scratch blocks a
 * kernel may need. */
#define TFM__MAX_THREADS 64

/* Runs fn(ctx, begin, end, worker) over [0, n) in contiguous ranges, one per
 * worker 0 .. workers - 1 (worker 0 is the calling thread), with at most
 * max_workers workers. Returns when every range is done. */
typedef void (*tfm__range_fn)(void *ctx, int64_t begin, int64_t end, int worker);
void tfm__parallel_for(int64_t n, int max_workers, tfm__range_fn fn, void *ctx);

/* The threads a loop may use now (tfm_set_num_threads), at most the
 * calling thread's limit. */
int tfm__threads(void);

/* Limits the loops the calling thread runs to `threads` of libtfm's (0:
 * no limit): the translator's scheduler workers share the threads between
 * them. Results do not depend on it, as on tfm_set_num_threads. */
void tfm__limit_threads(int threads);

/* The workers worth waking for a loop over this many floats: waking one
 * costs a few microseconds, so small loops stay on the calling thread. */
int tfm__workers_for(int64_t floats);

#endif
