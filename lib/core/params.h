/* What layers need from the parameter store beyond its public API. */
#ifndef TFM_CORE_PARAMS_H
#define TFM_CORE_PARAMS_H

#include "tfm/params.h"

/* Removes the parameters added after the store held count of them, so a
 * layer whose creation fails half-way leaves the store as it found it. */
void tfm__params_truncate(tfm_params *params, int64_t count);

/* At most max_numel scalars (0: no limit) from now on: a later add that
 * would pass it fails with TFM_ERR_SIZE before it allocates. */
void tfm__params_limit(tfm_params *params, int64_t max_numel);

/* The index of the parameter named name, or -1; no error set. */
int64_t tfm__params_index_of(const tfm_params *params, const char *name);

#endif
