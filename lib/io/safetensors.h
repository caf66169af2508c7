/* What the loaders and writers built on safetensors files (parameter
 * stores, models, optimizers, training states) need beyond the public API. */
#ifndef TFM_IO_SAFETENSORS_H
#define TFM_IO_SAFETENSORS_H

#include "tfm/io.h"

/* libtfm's own files. Metadata keys libtfm writes begin with this; users'
 * keys may not. */
#define TFM__MODEL_KEY_PREFIX "tfm."
/* Raised whenever a model key changes meaning or a new one must be read. */
#define TFM__MODEL_FORMAT_VERSION 1
/* The format of a quantized model's file (model/quantize.c). */
#define TFM__MODEL_INT8_FORMAT_VERSION 2
/* A training state says so: its tensors named under
 * TFM__RESERVED_TENSOR_PREFIX (the optimizer's) are no parameters. */
#define TFM__STATE_KEY TFM__MODEL_KEY_PREFIX "state"
#define TFM__RESERVED_TENSOR_PREFIX "tfm."

/* tfm_safetensors_open with op naming the public call in messages. */
tfm_safetensors *tfm__safetensors_open(const char *op, const char *path);

/* Reads the regular file at path whole into *bytes (malloc'd, NUL after
 * its *size bytes, for text): TFM_ERR_SIZE beyond limit bytes; messages
 * begin with op and the path. */
tfm_status tfm__read_whole_file(const char *op, const char *path, size_t limit, char **bytes,
                               size_t *size);

/* Puts a file's bytes into fd: 0, or -1 with errno set. */
typedef int (*tfm__file_writer)(int fd, const void *context);

/* The library's one way to save a file (see io.h): writer(fd, context)
 * fills a temporary beside path, which is synced and renamed over path, so
 * a failed or killed save leaves the previous file as it was. Messages
 * begin with op. */
tfm_status tfm__save_atomically(const char *op, const char *path, tfm__file_writer writer,
                                const void *context);
/* tfm__save_atomically of size bytes. */
tfm_status tfm__save_bytes_atomically(const char *op, const char *path, const void *bytes,
                                      size_t size);

/* Whether something is at path (a FIFO or a folder too), found without
 * opening it, which could block: the readers above, the one way files are
 * opened for reading, then refuse what is not a regular file. */
int tfm__path_taken(const char *path);

/* "folder/name" into out (size bytes): 0, or -1 with TFM_ERR_ARG naming
 * ctx when it does not fit. */
int tfm__in_folder(const char *ctx, const char *folder, const char *name, char *out,
                   size_t size);

/* fsync of folder, making a rename in it durable (EINVAL, a file system
 * that cannot sync folders, is no error): TFM_OK, or TFM_ERR_SYNC saying
 * path is written and in place. */
tfm_status tfm__sync_folder(const char *op, const char *path, const char *folder);

/* Writes tensors and "__metadata__" string pairs atomically; op names the
 * public call in messages. */
tfm_status tfm__safetensors_write(const char *op, const char *path, int64_t count,
                                  const char *const *names, const tfm_tensor *const *tensors,
                                  int64_t metadata_count, const char *const *keys,
                                  const char *const *values);

/* The metadata value for key, or NULL (no error set) when there is none. */
const char *tfm__safetensors_metadata(const tfm_safetensors *file, const char *key);

typedef struct tfm__tensor_info {
    const char *name;
    const char *dtype_name;    /* "F32", "BF16", … */
    int32_t is_float;
    int32_t ndim;              /* a 0-d scalar reads as [1] */
    int64_t shape[TFM_MAX_DIMS];
    int64_t numel;
} tfm__tensor_info;

/* The index of the named tensor, or -1 (no error set). */
int64_t tfm__safetensors_find(const tfm_safetensors *file, const char *name);
void tfm__safetensors_info(const tfm_safetensors *file, int64_t index, tfm__tensor_info *info);
/* A float tensor's values as float32 into dst (numel of them). */
void tfm__safetensors_read_f32(const tfm_safetensors *file, int64_t index, float *dst);
/* An I8 tensor's values into dst (numel of them). */
void tfm__safetensors_read_i8(const tfm_safetensors *file, int64_t index, int8_t *dst);
/* 1 when a float tensor holds no NaN or Inf; else 0 and the first bad
 * element's flat index in *where. */
int tfm__safetensors_all_finite(const tfm_safetensors *file, int64_t index, int64_t *where);

#endif
