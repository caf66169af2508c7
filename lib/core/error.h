/* Thread-local last error, set by every failing call. */
#ifndef TFM_CORE_ERROR_H
#define TFM_CORE_ERROR_H

#include <stdint.h>

#include "tfm/common.h"

/* Records status and a printf-style message; returns status for chaining. */
tfm_status tfm__fail(tfm_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Replaces the pending error with status and the formatted message, the
 * pending message following in parentheses as its cause. */
tfm_status tfm__fail_because(tfm_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* For an op handed a NULL input: keeps the pending error that produced the
 * NULL (the real cause) and only records one when none is pending. */
void tfm__fail_null_input(const char *op, const char *what);

/* TFM_OK when a padding id given to op is an id (>= 0), else
 * TFM_ERR_ARG: a tokenizer without a padding piece says -1
 * (tfm_tokenizer_special_id), which fails far away, in an embedding. */
tfm_status tfm__check_pad_id(const char *op, int32_t pad_id);

/* For a public call that makes other public calls: take a mark first, and
 * when the call fails, tfm__fail_within puts its name before the message of
 * any failure recorded since the mark ("tfm_model_create: tfm_params_add:
 * out of memory"), so the message names the call the user made. An error
 * that was pending before the mark (passed along a chain of NULL results)
 * is left as it is. */
uint64_t tfm__error_mark(void);
void tfm__fail_within(const char *op, uint64_t mark);
/* result itself, after tfm__fail_within when it is NULL. */
void *tfm__result_within(const char *op, uint64_t mark, void *result);

#endif
