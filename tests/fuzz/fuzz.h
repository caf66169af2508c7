/* What the libFuzzer harnesses share. Each fuzz_NAME.c defines
 * LLVMFuzzerTestOneInput for one reader of untrusted bytes; meson builds
 * every fuzz_*.c it finds here, and scripts/fuzz.sh runs it on the seeds
 * in seeds/NAME/ when that folder exists, else on seeds/files/. So a new
 * harness is one new file. */
#ifndef TFM_FUZZ_H
#define TFM_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tfm/tfm.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a file the loaders can open (on tmpfs, one per process). */
static inline const char *fuzz_file(const uint8_t *data, size_t size)
{
    static char path[64];
    if (!path[0])
        snprintf(path, sizeof path, "%s/tfm_fuzz_%ld.safetensors",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f)
        return NULL;
    if (size)
        fwrite(data, 1, size, f);
    fclose(f);
    return path;
}

/* What a loaded model must survive: encoding one short source; then the
 * model is freed. */
static inline void fuzz_encode_and_free(tfm_model *m)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){1, 2}, (const int32_t[]){0, 1});
    tfm_model_encode(tape, m, src, NULL, NULL);
    tfm_tensor_free(src);
    tfm_tape_free(tape);
    tfm_model_free(m);
}

/* The input read a few bytes at a time, for harnesses that derive their
 * call's arguments from it: fuzz_take gives the next n bytes (n <= 8) as a
 * little-endian number, 0 for bytes past the end; fuzz_rest what is left. */
typedef struct {
    const uint8_t *data;
    size_t size;
} fuzz_bytes;

static inline uint64_t fuzz_take(fuzz_bytes *in, int n)
{
    uint64_t value = 0;
    for (int i = 0; i < n; i++) {
        if (in->size) {
            value |= (uint64_t)in->data[0] << (8 * i);
            in->data++;
            in->size--;
        }
    }
    return value;
}

/* A number in [low, high], from 1 or 2 bytes as the range needs. */
static inline int64_t fuzz_range(fuzz_bytes *in, int64_t low, int64_t high)
{
    uint64_t span = (uint64_t)(high - low) + 1;
    return low + (int64_t)(fuzz_take(in, span > 256 ? 2 : 1) % span);
}

/* Stops the harness where the library broke a promise the sanitizers
 * cannot see (libFuzzer reports the trap with its input). */
#define FUZZ_ASSERT(condition)                                                 \
    do {                                                                       \
        if (!(condition)) {                                                    \
            fprintf(stderr, "%s:%d: %s (last error: %s)\n", __FILE__, __LINE__,  \
                    #condition, tfm_last_error());                             \
            __builtin_trap();                                                  \
        }                                                                      \
    } while (0)

/* The files of a published folder the pretrained harnesses write, in the
 * order their records number them (make_seeds writes its seeds so). */
static const char *const fuzz_folder_files[] = {
    "config.json", "model.safetensors", "generation_config.json", "tokenizer_config.json",
    "vocab.json",  "source.spm",        "target.spm",             "merges.txt",
    "sentencepiece.bpe.model", "spiece.model", "target_vocab.json"};
enum { FUZZ_FOLDER_FILES = sizeof fuzz_folder_files / sizeof fuzz_folder_files[0] };

/* The input as a published folder (on tmpfs, one per process): a sequence
 * of records, each one byte naming the file (its value modulo
 * FUZZ_FOLDER_FILES, as fuzz_folder_files), its length in two bytes
 * (little-endian, cut to what is left) and its bytes; a file named twice
 * holds the last record's bytes, a file not named is not there, a short
 * last record is dropped. */
static inline const char *fuzz_folder(const uint8_t *data, size_t size)
{
    static char folder[64], paths[FUZZ_FOLDER_FILES][128];
    if (!folder[0]) {
        snprintf(folder, sizeof folder, "%s/tfm_fuzz_pretrained_%ld",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
        mkdir(folder, 0700);
        for (int i = 0; i < FUZZ_FOLDER_FILES; i++)
            snprintf(paths[i], sizeof paths[i], "%s/%s", folder, fuzz_folder_files[i]);
    }
    for (int i = 0; i < FUZZ_FOLDER_FILES; i++)
        unlink(paths[i]);
    for (size_t at = 0; at + 3 <= size;) {
        size_t file = data[at] % FUZZ_FOLDER_FILES;
        size_t length = (size_t)data[at + 1] | (size_t)data[at + 2] << 8;
        at += 3;
        if (length > size - at)
            length = size - at;
        FILE *f = fopen(paths[file], "wb");
        if (f) {
            if (length)
                fwrite(data + at, 1, length, f);
            fclose(f);
        }
        at += length;
    }
    return folder;
}

/* The store the seeds' parameter and optimizer files were made from. */
static inline tfm_params *fuzz_store(void)
{
    tfm_params *p = tfm_params_create();
    tfm_params_add(p, "w", 2, (const int64_t[]){3, 4});
    tfm_params_add(p, "b", 1, (const int64_t[]){4});
    return p;
}

#endif
