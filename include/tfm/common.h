/* libtfm: export macro, version, status codes and the last-error call. */
#ifndef TFM_COMMON_H
#define TFM_COMMON_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TFM_BUILDING_LIBRARY) && defined(__GNUC__)
#define TFM_API __attribute__((visibility("default")))
#else
#define TFM_API
#endif

#define TFM_VERSION_MAJOR 0
#define TFM_VERSION_MINOR 2
#define TFM_VERSION_PATCH 0
#define TFM_VERSION_NUMBER \
    (TFM_VERSION_MAJOR * 10000 + TFM_VERSION_MINOR * 100 + TFM_VERSION_PATCH)

/* Version of the library actually loaded, to compare with the macros. */
TFM_API uint32_t tfm_version_number(void);
TFM_API const char *tfm_version_string(void);

/* Status codes. The values are part of the ABI and never change. */
typedef int32_t tfm_status;
enum {
    TFM_OK = 0,
    TFM_ERR_NULL = 1,      /* a required handle or pointer was NULL */
    TFM_ERR_ARG = 2,       /* an argument is out of its documented range */
    TFM_ERR_SHAPE = 3,     /* tensor shapes do not fit together */
    TFM_ERR_DTYPE = 4,     /* wrong element type (float32 vs int32) */
    TFM_ERR_RANGE = 5,     /* an index or token id is out of range */
    TFM_ERR_SIZE = 6,      /* a size is absurd or overflows */
    TFM_ERR_NOMEM = 7,     /* an allocation failed */
    TFM_ERR_STATE = 8,     /* the call is not valid in the object's state */
    TFM_ERR_IO = 9,        /* a file could not be read or written */
    TFM_ERR_FORMAT = 10,   /* a file is corrupt or not in the expected format */
    TFM_ERR_NUMERIC = 11,  /* NaN or Inf where a finite value is required */
    /* a save put the new file in place, complete, but syncing its folder
     * failed: it may not survive a crash; the save need not be retried */
    TFM_ERR_SYNC = 12
};

/* "TFM_ERR_SHAPE" etc.; "TFM_UNKNOWN_STATUS" for a value not listed. */
TFM_API const char *tfm_status_name(tfm_status status);

/* The message and status of the last failed call on this thread. Successful
 * calls do not clear them (like errno); tfm_clear_error() does. The message
 * is "" when no error is pending. The pointer stays valid until the next
 * libtfm call on this thread. */
TFM_API const char *tfm_last_error(void);
TFM_API tfm_status tfm_last_status(void);
TFM_API void tfm_clear_error(void);

/* libtfm's own threads for its kernels (attention heads, …), between 1
 * (the default: none started) and 64. BLAS keeps its own threads, set by its
 * variables (OPENBLAS_NUM_THREADS, BLIS_NUM_THREADS); libtfm runs a BLAS
 * call from its threads only when it is small enough for OpenBLAS to run it
 * on one thread, so the two never oversubscribe the cores. */
TFM_API tfm_status tfm_set_num_threads(int32_t threads);
TFM_API int32_t tfm_get_num_threads(void);

/* The instruction set libtfm's own kernels (softmax, layer norm, dropout,
 * attention, the fused linear's elementwise parts, cross-entropy, Adam) run
 * with in this process: "x86-64-v4" (AVX-512), "x86-64-v3" (AVX2, FMA) or
 * "baseline" (any x86-64, or the build's target on other machines); the
 * best the CPU supports unless the environment variable TFM_CPU, read once
 * on the first kernel call, names a lower one ("baseline", "x86-64-v3"; any
 * other name means "baseline"). A build made with -Dnative=true has one
 * path, "native", and ignores TFM_CPU. A static string; thread-safe. */
TFM_API const char *tfm_cpu_path(void);

#ifdef __cplusplus
}
#endif

#endif
