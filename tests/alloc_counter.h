/* Counts malloc-family calls by interposing the allocator in the program
 * that links alloc_counter.c: all calls, and those made from libtfm's own
 * code (OpenBLAS's threaded GEMM and Check allocate too; they are not
 * libtfm's). It forwards to the next allocator, so it works under the
 * sanitizers as well. It can also make one call from libtfm fail, to test
 * every out-of-memory path of a workload. */
#ifndef TFM_TESTS_ALLOC_COUNTER_H
#define TFM_TESTS_ALLOC_COUNTER_H

#include <stdint.h>

/* Finds where libtfm.so is mapped; 0 on success, -1 if it is not loaded. */
int alloc_counter_init(void);
long alloc_counter_total(void);
long alloc_counter_libtfm(void);

/* Makes the nth call from libtfm, counted from now, return NULL (the rest
 * succeed); 0 disarms. */
void alloc_counter_fail_nth(long n);
/* 1 once the armed call has failed. */
int alloc_counter_failed(void);
/* Where in libtfm that call returns to (an address in the library's file,
 * for addr2line), or 0 before it failed. */
uintptr_t alloc_counter_failed_site(void);

#endif
