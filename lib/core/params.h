/* What layers need from the parameter store beyond its public API. */
#ifndef TFM_CORE_PARAMS_H
#define TFM_CORE_PARAMS_H

#include "tfm/params.h"

/* Removes the parameters added after the store held count of them, so a
 * layer whose creation fails half-way leaves the store as it found it. */
void tfm__params_truncate(tfm_params *params, int64_t count);

#endif
