/* Matching a file's tensors to a parameter store's by name, checked whole
 * before any value is copied, so a caller loading several things from one
 * file (a training state) can check them all first. */
#ifndef TFM_IO_LOAD_H
#define TFM_IO_LOAD_H

#include "io/safetensors.h"

typedef struct tfm__load_match {
    int64_t *entry_of;         /* per parameter: the file's tensor index, or -1 */
    tfm_load_report *report;   /* what was loaded, skipped and left missing */
} tfm__load_match;

/* Matches file's tensors to params under options (NULL: strict). Tensors
 * whose names start with reserved (may be NULL) are not parameters and are
 * passed over silently: the other parts of a training state. On failure
 * nothing is held and the error names op and path. */
tfm_status tfm__load_match_params(const char *op, const char *path, const tfm_params *params,
                                  const tfm_safetensors *file,
                                  const tfm_load_options *options, const char *reserved,
                                  tfm__load_match *match);
/* Copies the matched values; then frees match but for the report, which
 * goes to *report when it is not NULL (else it is freed too). */
void tfm__load_apply(tfm_params *params, const tfm_safetensors *file, tfm__load_match *match,
                     tfm_load_report **report);
void tfm__load_match_free(tfm__load_match *match);

#endif
