/* tfm_model_from_pretrained: the input is a folder's two files, config.json
 * (its length in the first two bytes, little-endian, then its text) and
 * model.safetensors (the rest); a model that loads encodes one source. */
#include <stdlib.h>
#include <sys/stat.h>

#include "fuzz.h"

static void write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    if (size)
        fwrite(data, 1, size, f);
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char folder[64], config[96], weights[96];
    if (!folder[0]) {
        snprintf(folder, sizeof folder, "%s/tfm_fuzz_pretrained_%ld",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
        mkdir(folder, 0700);
        snprintf(config, sizeof config, "%s/config.json", folder);
        snprintf(weights, sizeof weights, "%s/model.safetensors", folder);
    }
    if (size < 2)
        return 0;
    size_t config_size = (size_t)data[0] | (size_t)data[1] << 8;
    if (config_size > size - 2)
        config_size = size - 2;
    write_file(config, data + 2, config_size);
    write_file(weights, data + 2 + config_size, size - 2 - config_size);
    tfm_model *m = tfm_model_from_pretrained(folder);
    if (!m)
        return 0;
    fuzz_encode_and_free(m);
    return 0;
}
