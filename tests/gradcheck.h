/* Finite-difference gradient check for any function of tensors built with
 * libtfm ops, through the public API only. */
#ifndef TFM_TESTS_GRADCHECK_H
#define TFM_TESTS_GRADCHECK_H

#include <check.h>
#include <stddef.h>

#include <tfm/tfm.h>

/* Builds the function's output from inputs on tape (NULL on failure). */
typedef tfm_tensor *(*gc_build_fn)(tfm_tape *tape, tfm_tensor *const *inputs,
                                   void *ctx);

typedef struct gc_options {
    double step;  /* central-difference step h */
    double atol;  /* |analytic - numeric| <= atol + rtol * |numeric| */
    double rtol;
} gc_options;

gc_options gc_default_options(void);

/* Projects the output on fixed random weights R (loss = sum R * out, summed
 * in double), takes the analytic gradient with backward seeded by R and the
 * numeric one by central differences of every element of every input that
 * requires grad. Returns 1 when all agree; otherwise 0 with the worst element
 * described in report. */
int gradcheck(gc_build_fn build, void *ctx, tfm_tensor *const *inputs,
              int n_inputs, gc_options options, char *report, size_t size);

/* The comparison gradcheck uses, exposed so its sensitivity can be tested:
 * 1 when every pair agrees, else 0 and the worst index in *worst. */
int gc_compare(const double *analytic, const double *numeric, size_t n,
               gc_options options, size_t *worst);

/* A Check assertion around gradcheck with the default options. */
#define ck_assert_gradcheck(build, ctx, inputs, n)                             \
    do {                                                                       \
        char gc_report_[512];                                                  \
        int gc_ok_ = gradcheck((build), (ctx), (inputs), (n),                  \
                               gc_default_options(), gc_report_,               \
                               sizeof gc_report_);                             \
        ck_assert_msg(gc_ok_, "%s", gc_report_);                               \
    } while (0)

/* A float32 tensor with N(0, 1) values from a fixed seed. */
tfm_tensor *gc_random(int32_t ndim, const int64_t *shape, uint64_t seed);

#endif
