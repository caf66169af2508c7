/* Each calling thread's scratch buffer, grown to the largest size asked
 * of it and kept, for kernels that pack their operands (core/gemm_bf16.h,
 * core/gemm_int8.h): no allocation once a program's products have reached
 * their largest. One buffer per thread serves every kernel, since a
 * product never runs inside another on the same thread. */
#ifndef TFM_CORE_THREAD_BUFFER_H
#define TFM_CORE_THREAD_BUFFER_H

#include <stddef.h>

/* The calling thread's buffer, at least `bytes` long and 64-byte aligned,
 * or NULL (out of memory, or after tfm__thread_buffer_release). Its
 * contents are not kept when it grows. A pthread key frees it when the
 * thread ends. */
void *tfm__thread_buffer(size_t bytes);

/* Frees the calling thread's buffer and retires the key that frees other
 * threads' at their end, so that no thread ending after the library is
 * unloaded calls into it: from the library's destructor, after its
 * workers have ended (the main thread's end runs no key destructor). A
 * program thread still running keeps its buffer until the process ends. */
void tfm__thread_buffer_release(void);

#endif
