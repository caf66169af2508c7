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

/* The store the seeds' parameter and optimizer files were made from. */
static inline tfm_params *fuzz_store(void)
{
    tfm_params *p = tfm_params_create();
    tfm_params_add(p, "w", 2, (const int64_t[]){3, 4});
    tfm_params_add(p, "b", 1, (const int64_t[]){4});
    return p;
}

#endif
