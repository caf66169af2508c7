/* tfm_model_load: the options from the metadata, range-checked, then the
 * parameters; a model that loads encodes one short source. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfm_model *m = tfm_model_load(fuzz_file(data, size));
    if (!m)
        return 0;
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){1, 2}, (const int32_t[]){0, 1});
    tfm_model_encode(tape, m, src, NULL, NULL);
    tfm_tensor_free(src);
    tfm_tape_free(tape);
    tfm_model_free(m);
    return 0;
}
