/* Counts malloc-family calls by interposing the allocator in the program
 * that links alloc_counter.c: all calls, and those made from libtfm's own
 * code (OpenBLAS's threaded GEMM and Check allocate too; they are not
 * libtfm's). Not for sanitizer builds, whose allocator it would bypass. */
#ifndef TFM_TESTS_ALLOC_COUNTER_H
#define TFM_TESTS_ALLOC_COUNTER_H

/* Finds where libtfm.so is mapped; 0 on success, -1 if it is not loaded. */
int alloc_counter_init(void);
long alloc_counter_total(void);
long alloc_counter_libtfm(void);

#endif
