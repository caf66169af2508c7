#define _GNU_SOURCE /* dladdr */
#include "core/gemm.h"

#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "core/cpu.h"
#include "core/error.h"
#include "core/gemm_bf16.h"
#include "core/parallel.h"

/* A piece below this many multiply-adds (~0.1 ms on one core) is not
 * worth waking a thread for. */
#define MIN_MNK_PER_WORKER (1 << 21)
/* Pieces are whole blocks of this many rows of C. OpenBLAS's x86-64
 * kernels (Haswell/Zen, SkylakeX/Cooperlake, Sandybridge, Nehalem) round
 * such a piece exactly as they round the whole product, so the thread
 * count does not change a result; a cut between columns, or between rows
 * at multiples of 4, 8 or 16, does on Haswell's and Zen's kernels. */
#define PIECE_ROWS 24

typedef struct gemm_job {
    int ta, tb;
    int64_t m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const float *a, *b, *bias;
    float *c;
} gemm_job;

static enum CBLAS_TRANSPOSE op(int transpose)
{
    return transpose ? CblasTrans : CblasNoTrans;
}

/* Rows [first, last) of C through the BLAS. A bias (beta is then 0) is
 * copied into C first, as the BLAS has no such term, row by row just
 * before the product reads them. */
static void gemm_rows(const gemm_job *j, int64_t first, int64_t last)
{
    float *c = j->c + first * j->ldc, beta = j->beta;
    if (j->bias) {
        for (int64_t r = first; r < last; r++)
            memcpy(c + (r - first) * j->ldc, j->bias, (size_t)j->n * sizeof *c);
        beta = 1.0f;
    }
    const float *a = j->a + (j->ta ? first : first * j->lda);
    cblas_sgemm(CblasRowMajor, op(j->ta), op(j->tb), (int)(last - first), (int)j->n, (int)j->k,
                j->alpha, a, (int)j->lda, j->b, (int)j->ldb, beta, c, (int)j->ldc);
}

/* Blocks [begin, end) of C's rows. */
static void gemm_piece(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const gemm_job *j = ctx;
    int64_t last = end * PIECE_ROWS;
    gemm_rows(j, begin * PIECE_ROWS, last < j->m ? last : j->m);
}

static int matmul_precision = TFM_MATMUL_FLOAT32; /* tfm_set_matmul_precision */

/* Below this on any side a bfloat16 product would mostly multiply its
 * tiles' padding (12 x 32), or be too short to pay for packing. */
#define MIN_BF16_SIDE 32

/* tfm__sgemm, plus the bias [n] in every row of C when it is not NULL (beta
 * is then 0). */
static void multiply(int transpose_a, int transpose_b, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                     float beta, const float *bias, float *c, int64_t ldc)
{
    double mnk = (double)m * (double)n * (double)k;
    int workers = tfm__threads();
    if (workers > 1 && mnk < (double)MIN_MNK_PER_WORKER * workers)
        workers = (int)(mnk / MIN_MNK_PER_WORKER);
    if (workers < 1)
        workers = 1;
    /* a product whose buffers cannot be had is made in float32 instead */
    if (__atomic_load_n(&matmul_precision, __ATOMIC_RELAXED) == TFM_MATMUL_BFLOAT16 &&
        m >= MIN_BF16_SIDE && n >= MIN_BF16_SIDE && k >= MIN_BF16_SIDE &&
        tfm__sgemm_bf16(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, bias,
                        c, ldc, workers) == 0)
        return;
    gemm_job j = {transpose_a, transpose_b, m, n, k, lda, ldb, ldc, alpha, beta, a, b, bias, c};
    if (workers == 1)
        gemm_rows(&j, 0, m);
    else
        tfm__parallel_for((m + PIECE_ROWS - 1) / PIECE_ROWS, workers, gemm_piece, &j);
}

void tfm__sgemm(int transpose_a, int transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                int64_t ldc)
{
    multiply(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, NULL, c, ldc);
}

void tfm__sgemm_bias(int transpose_a, int transpose_b, int64_t m, int64_t n, int64_t k,
                     float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                     const float *bias, float *c, int64_t ldc)
{
    multiply(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, 0.0f, bias, c, ldc);
}

tfm_status tfm_set_matmul_precision(tfm_matmul_precision precision)
{
    if (precision != TFM_MATMUL_FLOAT32 && precision != TFM_MATMUL_BFLOAT16)
        return tfm__fail(TFM_ERR_ARG, "tfm_set_matmul_precision: %d is not a tfm_matmul_precision",
                         (int)precision);
    if (precision == TFM_MATMUL_BFLOAT16 && !tfm__cpu_has_bf16())
        return tfm__fail(TFM_ERR_STATE, "tfm_set_matmul_precision: bfloat16 products need a CPU "
                         "with AVX512_BF16, and this one has none");
#if TFM__CPU_DISPATCH
    if (precision == TFM_MATMUL_BFLOAT16 && tfm__cpu_level() < TFM__CPU_X86_64_V4)
        return tfm__fail(TFM_ERR_STATE, "tfm_set_matmul_precision: bfloat16 products run on the "
                         "x86-64-v4 path, and TFM_CPU chose %s", tfm_cpu_path());
#endif
    __atomic_store_n(&matmul_precision, (int)precision, __ATOMIC_RELAXED);
    return TFM_OK;
}

tfm_matmul_precision tfm_get_matmul_precision(void)
{
    return (tfm_matmul_precision)__atomic_load_n(&matmul_precision, __ATOMIC_RELAXED);
}

/* --- the BLAS's own threads ---------------------------------------------- */

typedef void (*set_threads_fn)(int);
typedef int (*get_threads_fn)(void);

static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static int blas_set_to_one;  /* by libtfm, which restores ... */
static int blas_found = 1;   /* ... the count it found */

/* OpenBLAS's or BLIS's thread calls, looked up at run time in the library
 * whose cblas_sgemm libtfm calls (another BLAS may be preloaded over the
 * one libtfm was linked with), else anywhere in the process. */
static int blas_calls(set_threads_fn *set, get_threads_fn *get)
{
    static const char *names[][2] = {
        {"openblas_set_num_threads", "openblas_get_num_threads"},
        {"bli_thread_set_num_threads", "bli_thread_get_num_threads"},
    };
    Dl_info info;
    void *blas = NULL, *sgemm = dlsym(RTLD_DEFAULT, "cblas_sgemm");
    if (sgemm && dladdr(sgemm, &info) && info.dli_fname)
        blas = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    int found = 0;
    for (int scope = blas ? 0 : 1; scope < 2 && !found; scope++)
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !found; i++) {
            void *where = scope ? RTLD_DEFAULT : blas;
            *(void **)set = dlsym(where, names[i][0]); /* POSIX's way */
            *(void **)get = dlsym(where, names[i][1]);
            found = *set && *get;
        }
    if (blas)
        dlclose(blas); /* only drops the count dlopen added */
    return found;
}

int tfm__blas_threads(void)
{
    set_threads_fn set;
    get_threads_fn get;
    return blas_calls(&set, &get) ? get() : 0;
}

void tfm__blas_follow_threads(int libtfm_threads)
{
    set_threads_fn set;
    get_threads_fn get;
    if (!blas_calls(&set, &get))
        return;
    pthread_mutex_lock(&blas_lock);
    if (libtfm_threads > 1 && !blas_set_to_one) {
        int found = get();
        blas_found = found > 1 ? found : 1;
        blas_set_to_one = 1;
        set(1);
    } else if (libtfm_threads == 1 && blas_set_to_one) {
        set(blas_found);
        blas_set_to_one = 0;
    }
    pthread_mutex_unlock(&blas_lock);
}
