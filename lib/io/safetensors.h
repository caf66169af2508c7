/* safetensors reading and writing for the library's own callers, whose
 * messages name the public call the user made (op). */
#ifndef TFM_IO_SAFETENSORS_H
#define TFM_IO_SAFETENSORS_H

#include "tfm/io.h"

tfm_safetensors *tfm__safetensors_open(const char *op, const char *path);
/* NULL with TFM_ERR_ARG when the name is absent, as tfm_safetensors_get. */
tfm_tensor *tfm__safetensors_get(const char *op, const tfm_safetensors *file,
                                 const char *name);
tfm_status tfm__safetensors_write(const char *op, const char *path, int64_t count,
                                  const char *const *names,
                                  const tfm_tensor *const *tensors);

#endif
