/** @file
 * Export macro, version, status codes, the last-error call and threads.
 *
 * Everything here is thread-safe. The error state (tfm_last_error(),
 * tfm_last_status()) is kept per thread; the thread count is process-wide. */
#ifndef TFM_COMMON_H
#define TFM_COMMON_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks the functions libtfm exports; empty outside the library's build. */
#if defined(TFM_BUILDING_LIBRARY) && defined(__GNUC__)
#define TFM_API __attribute__((visibility("default")))
#else
#define TFM_API
#endif

/** Major version of the headers: changes with an incompatible ABI. */
#define TFM_VERSION_MAJOR 0
/** Minor version of the headers: changes when the API grows. */
#define TFM_VERSION_MINOR 6
/** Patch version of the headers: fixes only. */
#define TFM_VERSION_PATCH 0
/** The headers' version as one number, 10000 * major + 100 * minor + patch,
 * to compare with tfm_version_number(). */
#define TFM_VERSION_NUMBER \
    (TFM_VERSION_MAJOR * 10000 + TFM_VERSION_MINOR * 100 + TFM_VERSION_PATCH)

/** Version of the library actually loaded, to compare with
 * TFM_VERSION_NUMBER (a program built against newer headers than the
 * library it runs with sees a smaller number here). Never fails. */
TFM_API uint32_t tfm_version_number(void);
/** The loaded library's version as "MAJOR.MINOR.PATCH": a static string,
 * never freed, never NULL. */
TFM_API const char *tfm_version_string(void);

/** What a call returns: TFM_OK or one of the TFM_ERR_ codes. The values
 * are part of the ABI and never change. A call that fails also records a
 * message for tfm_last_error(). */
typedef int32_t tfm_status;
/** The status codes. */
enum {
    TFM_OK = 0,            /**< success */
    TFM_ERR_NULL = 1,      /**< a required handle or pointer was NULL */
    TFM_ERR_ARG = 2,       /**< an argument is out of its documented range */
    TFM_ERR_SHAPE = 3,     /**< tensor shapes do not fit together */
    TFM_ERR_DTYPE = 4,     /**< wrong element type (float32 vs int32) */
    TFM_ERR_RANGE = 5,     /**< an index or token id is out of range */
    TFM_ERR_SIZE = 6,      /**< a size is absurd or overflows */
    TFM_ERR_NOMEM = 7,     /**< an allocation failed */
    TFM_ERR_STATE = 8,     /**< the call is not valid in the object's state */
    TFM_ERR_IO = 9,        /**< a file could not be read or written */
    TFM_ERR_FORMAT = 10,   /**< a file is corrupt or not in the expected format */
    TFM_ERR_NUMERIC = 11,  /**< NaN or Inf where a finite value is required */
    /** a save put the new file in place, complete, but syncing its folder
     * failed: it may not survive a crash; the save need not be retried */
    TFM_ERR_SYNC = 12,
    /** a queue is full (tfm_translator_submit): try again later */
    TFM_ERR_BUSY = 13,
    TFM_ERR_CANCELLED = 14, /**< the work was cancelled before it finished */
    TFM_ERR_TIMEOUT = 15    /**< the work's deadline passed before it finished */
};

/** The code's name, "TFM_ERR_SHAPE" etc.; "TFM_UNKNOWN_STATUS" for a value
 * not listed. A static string; never fails and leaves the error state
 * alone. */
TFM_API const char *tfm_status_name(tfm_status status);

/** The message of the last failed call on this thread. Successful calls do
 * not clear it (like errno); tfm_clear_error() does. The message is "" when
 * no error is pending. The string belongs to the library and stays valid
 * until the next libtfm call on this thread. */
TFM_API const char *tfm_last_error(void);
/** The status of the last failed call on this thread, TFM_OK when none is
 * pending; cleared as tfm_last_error()'s message is. */
TFM_API tfm_status tfm_last_status(void);
/** Forgets this thread's pending error: tfm_last_status() is TFM_OK and
 * tfm_last_error() "" until the next failure. */
TFM_API void tfm_clear_error(void);

/** Records status and message as this thread's last error, as a failing
 * libtfm call does, and returns status; TFM_OK clears the error instead.
 * For libraries layered on libtfm (libtfm_mpi's distributed.h) so that
 * their callers read one error state. The message is copied (up to 511
 * bytes); NULL is "". */
TFM_API tfm_status tfm_report_error(tfm_status status, const char *message);

/** libtfm's own threads for its kernels and matrix products, between 1
 * (the default: none started) and 64. With more than one, libtfm splits
 * its matrix products among its threads, each calling the BLAS on one
 * thread: it sets OpenBLAS's (or BLIS's) own thread count to 1,
 * process-wide, and gives back the count it found when set to 1 again.
 * With one, the BLAS keeps its own threads (OPENBLAS_NUM_THREADS,
 * BLIS_NUM_THREADS). Either way the two never oversubscribe the cores.
 * The count does not change a result's bits on OpenBLAS's x86-64 kernels
 * when the BLAS runs on one thread at a count of 1. A
 * count outside 1..64 is TFM_ERR_ARG and changes nothing. Process-wide
 * and safe from any thread: a kernel already running finishes with the
 * count it began with. */
TFM_API tfm_status tfm_set_num_threads(int32_t threads);
/** libtfm's own thread count, as tfm_set_num_threads() last set it (1 by
 * default). Never fails. */
TFM_API int32_t tfm_get_num_threads(void);

/** How libtfm's matrix products compute: every product of a linear layer,
 * of attention (projections, and the heads' scores and contexts where
 * heads are wider than 16 columns) and of tfm_matmul, forward and backward. */
typedef enum tfm_matmul_precision {
    /** float32 inputs and sums, on the BLAS (the default). */
    TFM_MATMUL_FLOAT32 = 0,
    /** Inputs rounded to bfloat16 (8 bits of mantissa, to nearest even),
     * products summed in float32, on libtfm's own kernel for CPUs with
     * AVX512_BF16: up to twice the multiply-adds a second of float32, as
     * PyTorch's autocast to bfloat16 on CPU does for its matrix products.
     * Parameters, gradients, optimizer state and every other op stay
     * float32 (mixed precision). Results differ from float32's by about
     * 2^-8 of each product's terms, and do not depend on the thread count;
     * a product with a side under 32 runs in float32, except decoding's:
     * a decoding (tfm_decoding_run) or a translator (tfm_translator_create)
     * that packs a float32 model's weights while this precision is set
     * packs them in bfloat16 (half the bytes; when each run starts, and
     * when the translator is made), and multiplies each step's rows by
     * them in bfloat16 whatever their number; int8 weights
     * (tfm_model_quantize) stay int8. Each thread that runs products keeps
     * a buffer for the packed operands, as large as the largest product's
     * right-hand side in bfloat16 (6.5 MB at tutorial 002), until it ends. */
    TFM_MATMUL_BFLOAT16 = 1
} tfm_matmul_precision;

/** Sets the precision of libtfm's matrix products from now on, process-wide
 * (a product already running finishes as it began). TFM_ERR_ARG for a
 * value not in tfm_matmul_precision; TFM_ERR_STATE for
 * TFM_MATMUL_BFLOAT16 on a CPU without AVX512_BF16, or with TFM_CPU
 * below x86-64-v4, or in a build for another architecture; either
 * changes nothing. Safe from any thread. */
TFM_API tfm_status tfm_set_matmul_precision(tfm_matmul_precision precision);
/** The precision tfm_set_matmul_precision() last set (TFM_MATMUL_FLOAT32
 * by default). Never fails. */
TFM_API tfm_matmul_precision tfm_get_matmul_precision(void);

/** The instruction set libtfm's own kernels (softmax, layer norm, dropout,
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
