/** @file
 * libtfm files: safetensors (the format PyTorch and Hugging Face users
 * exchange: an 8-byte little-endian header length, a JSON header of
 * name -> {dtype, shape, data_offsets}, then the raw little-endian data).
 * Writes are atomic: a temporary file in the same folder, flushed, synced
 * and renamed over the target, so a crash never destroys the previous file.
 * The temporary of folder/NAME is folder/.NAME.tfm-tmp.PID.N (NAME cut to
 * 200 bytes); a save killed before its rename leaves it, and the next save
 * of the same target removes those whose PID is no running process (it
 * cannot tell a writer in another PID namespace or on another host sharing
 * the folder: such a writer's save may then fail, never corrupt). A save
 * replaces only a regular file: a device, FIFO or folder at the path is
 * TFM_ERR_IO and nothing is written. A save that fails after the rename
 * (syncing the folder) is TFM_ERR_SYNC: the new file is complete and in
 * place, only its durability across a crash is in doubt; any other failure
 * leaves the previous file as it was. Reading refuses anything but a regular
 * file (TFM_ERR_IO) before it reads, so a FIFO cannot block it.
 *
 * Ownership: an open file is a caller-owned handle (close with
 * tfm_safetensors_close()); names and metadata strings belong to it. A load
 * report is caller-owned (tfm_load_report_free()).
 *
 * Threads: an open file may be read from several threads at once; saving
 * and loading a store follow the store's rule (one thread at a time). Two
 * saves to the same path from different threads or processes each leave a
 * complete file; the last rename wins. */
#ifndef TFM_IO_H
#define TFM_IO_H

#include "params.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A safetensors file read into memory and validated; opaque. */
typedef struct tfm_safetensors tfm_safetensors;

/** Reads and validates a whole file: header length against the file size,
 * the JSON, names, dtypes (F32 and I32; F64, F16, BF16 and the integer types
 * I64, I16, I8, U8, U16, U32, U64, BOOL are converted on reading), shapes,
 * and that data offsets tile the data without overlap or overrun. Anything
 * else is TFM_ERR_FORMAT with the reason; a file that cannot be read is
 * TFM_ERR_IO. */
TFM_API tfm_safetensors *tfm_safetensors_open(const char *path);
/** Frees the handle and everything it lent (names, metadata strings);
 * NULL is a no-op. Tensors from tfm_safetensors_get() stay the caller's. */
TFM_API void tfm_safetensors_close(tfm_safetensors *file);
/** The number of tensors; -1 with TFM_ERR_NULL for a NULL handle. */
TFM_API int64_t tfm_safetensors_count(const tfm_safetensors *file);
/** The index-th tensor's name (names in byte order), owned by the handle;
 * NULL with TFM_ERR_RANGE for an index outside 0..count-1. */
TFM_API const char *tfm_safetensors_name(const tfm_safetensors *file,
                                         int64_t index);
/** A new caller-owned tensor (float32, or int32 for integer dtypes; a 0-d
 * tensor comes back as [1]); NULL with TFM_ERR_ARG when the name is absent,
 * TFM_ERR_SHAPE for a tensor with a zero-sized axis, TFM_ERR_RANGE for an
 * integer int32 cannot hold. */
TFM_API tfm_tensor *tfm_safetensors_get(const tfm_safetensors *file,
                                        const char *name);

/** The file's "__metadata__": string pairs (a vocabulary, a tokenizer, a
 * training recipe, or libtfm's own "tfm." keys that describe a model),
 * sorted by key. The strings belong to the file handle and live until
 * tfm_safetensors_close. This is their number; -1 for a NULL handle. */
TFM_API int64_t tfm_safetensors_metadata_count(const tfm_safetensors *file);
/** The index-th metadata key, in sorted order; NULL with TFM_ERR_RANGE for
 * an index outside 0..count-1. */
TFM_API const char *tfm_safetensors_metadata_key(const tfm_safetensors *file,
                                                 int64_t index);
/** The value stored under key; NULL with TFM_ERR_ARG when it is absent. */
TFM_API const char *tfm_safetensors_metadata_get(const tfm_safetensors *file,
                                                 const char *key);

/** Writes count named tensors (float32 as F32, int32 as I32), atomically.
 * A header (names, shapes, metadata) past the 100 MB that safetensors
 * readers accept is TFM_ERR_SIZE before the file at path is touched, here
 * and in every save built on it. */
TFM_API tfm_status tfm_safetensors_write(const char *path, int64_t count,
                                         const char *const *names,
                                         const tfm_tensor *const *tensors);
/** The same with metadata_count key/value string pairs (UTF-8, unique
 * non-empty keys) as the header's "__metadata__". */
TFM_API tfm_status tfm_safetensors_write_with_metadata(
    const char *path, int64_t count, const char *const *names,
    const tfm_tensor *const *tensors, int64_t metadata_count,
    const char *const *keys, const char *const *values);

/** A parameter store's values, by name. A training state's (training.h)
 * optimizer tensors are passed over. Loading is strict: every parameter
 * must be in the file (else TFM_ERR_FORMAT) with the same shape (else
 * TFM_ERR_SHAPE) and a float dtype (else TFM_ERR_DTYPE), and the file must
 * hold nothing else (TFM_ERR_FORMAT); on any error no parameter is changed.
 * This writes them, atomically. */
TFM_API tfm_status tfm_params_save(const tfm_params *params, const char *path);
/** Reads a store's values back, strictly (see tfm_params_save()). */
TFM_API tfm_status tfm_params_load(tfm_params *params, const char *path);

/** Loading when names differ slightly, as a PyTorch state_dict's often do
 * (a wrapper module's "transformer." prefix, a registered "pe" buffer).
 * All zero is tfm_params_load's strict behaviour. */
typedef struct tfm_load_options {
    uint32_t struct_size;      /**< set by tfm_load_options_init */
    /** Removed from the start of every file name that has it before names
     * are compared; NULL or "": none. Two file names that then collide are
     * TFM_ERR_FORMAT. */
    const char *strip_prefix;
    int32_t allow_unexpected;  /**< file tensors that are no parameter are skipped */
    int32_t allow_missing;     /**< parameters absent from the file keep their values */
    int32_t check_finite;      /**< a NaN or Inf value is TFM_ERR_NUMERIC */
} tfm_load_options;

/** All zero: strict loading, as tfm_params_load(). */
TFM_API void tfm_load_options_init_sized(tfm_load_options *options,
                                         uint32_t struct_size);
/** The defaults, for a struct of the size this program was compiled with. */
#define tfm_load_options_init(options)                                        \
    tfm_load_options_init_sized((options), (uint32_t)sizeof *(options))

/** What a load did, by name: parameters loaded, file tensors skipped (file
 * names, as written there), parameters missing (left as they were). */
typedef struct tfm_load_report tfm_load_report;
/** A class of names in a load report: one of the TFM_LOAD_ values. */
typedef int32_t tfm_load_outcome;
/** The outcomes. */
enum {
    TFM_LOAD_LOADED = 0,  /**< parameters given the file's values */
    TFM_LOAD_SKIPPED = 1, /**< file tensors that are no parameter */
    TFM_LOAD_MISSING = 2  /**< parameters the file lacks, left as they were */
};

/** tfm_params_load under options (NULL: strict). Every check runs before
 * any value is copied: on error no parameter changes. When report is not
 * NULL, *report receives a new report on success (NULL on error), which
 * the caller frees with tfm_load_report_free. */
TFM_API tfm_status tfm_params_load_with(tfm_params *params, const char *path,
                                        const tfm_load_options *options,
                                        tfm_load_report **report);
/** -1 (count) or NULL (name) with TFM_ERR_NULL, TFM_ERR_ARG (an outcome not
 * listed) or TFM_ERR_RANGE (an index past the count). Names live
 * as long as the report. */
TFM_API int64_t tfm_load_report_count(const tfm_load_report *report,
                                      tfm_load_outcome outcome);
/** The index-th name of an outcome, in the order met; owned by the
 * report. */
TFM_API const char *tfm_load_report_name(const tfm_load_report *report,
                                         tfm_load_outcome outcome, int64_t index);
/** Frees a report and its names; NULL is a no-op. */
TFM_API void tfm_load_report_free(tfm_load_report *report);

#ifdef __cplusplus
}
#endif

#endif
