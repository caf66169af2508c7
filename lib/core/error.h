/* Thread-local last error, set by every failing call. */
#ifndef TFM_CORE_ERROR_H
#define TFM_CORE_ERROR_H

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

#endif
