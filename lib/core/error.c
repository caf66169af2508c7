#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local tfm_status last_status = TFM_OK;
static _Thread_local char last_message[512];
static _Thread_local uint64_t failures; /* recorded on this thread, for the marks */

tfm_status tfm__fail(tfm_status status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, args);
    va_end(args);
    last_status = status;
    failures++;
    return status;
}

tfm_status tfm_report_error(tfm_status status, const char *message)
{
    if (status == TFM_OK) {
        tfm_clear_error();
        return TFM_OK;
    }
    return tfm__fail(status, "%s", message ? message : "");
}

tfm_status tfm__fail_because(tfm_status status, const char *fmt, ...)
{
    char cause[sizeof last_message];
    memcpy(cause, last_message, sizeof cause);
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(last_message, sizeof last_message, fmt, args);
    va_end(args);
    if (n >= 0 && (size_t)n < sizeof last_message)
        snprintf(last_message + n, sizeof last_message - (size_t)n, " (%s)", cause);
    last_status = status;
    return status;
}

void tfm__fail_null_input(const char *op, const char *what)
{
    if (last_status == TFM_OK)
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, what);
}

tfm_status tfm__check_pad_id(const char *op, int32_t pad_id)
{
    if (pad_id < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: pad_id %d is not an id (>= 0); a tokenizer "
                         "without a padding piece gives -1: pad with another id", op,
                         (int)pad_id);
    return TFM_OK;
}

uint64_t tfm__error_mark(void) { return failures; }

void tfm__fail_within(const char *op, uint64_t mark)
{
    size_t len = strlen(op);
    if (failures == mark || (strncmp(last_message, op, len) == 0 && last_message[len] == ':'))
        return;
    char inner[sizeof last_message];
    memcpy(inner, last_message, sizeof inner);
    int n = snprintf(last_message, sizeof last_message, "%s: ", op);
    if (n > 0 && (size_t)n < sizeof last_message)
        snprintf(last_message + n, sizeof last_message - (size_t)n, "%s", inner);
}

void *tfm__result_within(const char *op, uint64_t mark, void *result)
{
    if (!result)
        tfm__fail_within(op, mark);
    return result;
}

const char *tfm_last_error(void) { return last_message; }

tfm_status tfm_last_status(void) { return last_status; }

void tfm_clear_error(void)
{
    last_status = TFM_OK;
    last_message[0] = '\0';
}

const char *tfm_status_name(tfm_status status)
{
    static const char *const names[] = {
        "TFM_OK",         "TFM_ERR_NULL",  "TFM_ERR_ARG",   "TFM_ERR_SHAPE",
        "TFM_ERR_DTYPE",  "TFM_ERR_RANGE", "TFM_ERR_SIZE",  "TFM_ERR_NOMEM",
        "TFM_ERR_STATE",  "TFM_ERR_IO",    "TFM_ERR_FORMAT", "TFM_ERR_NUMERIC",
        "TFM_ERR_SYNC",   "TFM_ERR_BUSY",  "TFM_ERR_CANCELLED", "TFM_ERR_TIMEOUT",
    };
    if (status < 0 || status >= (tfm_status)(sizeof names / sizeof names[0]))
        return "TFM_UNKNOWN_STATUS";
    return names[status];
}

uint32_t tfm_version_number(void) { return TFM_VERSION_NUMBER; }

#define TFM_STR2(x) #x
#define TFM_STR(x) TFM_STR2(x)
const char *tfm_version_string(void)
{
    return TFM_STR(TFM_VERSION_MAJOR) "." TFM_STR(TFM_VERSION_MINOR) "." TFM_STR(
        TFM_VERSION_PATCH);
}
