/* tfm_safetensors_open, then every tensor and metadata pair read back. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfm_safetensors *file = tfm_safetensors_open(fuzz_file(data, size));
    if (!file)
        return 0;
    for (int64_t i = 0; i < tfm_safetensors_count(file); i++)
        tfm_tensor_free(tfm_safetensors_get(file, tfm_safetensors_name(file, i)));
    for (int64_t i = 0; i < tfm_safetensors_metadata_count(file); i++)
        tfm_safetensors_metadata_get(file, tfm_safetensors_metadata_key(file, i));
    tfm_safetensors_close(file);
    return 0;
}
