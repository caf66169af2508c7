/* tfm_model_load: the options from the metadata, range-checked, then the
 * parameters; a model that loads encodes one short source. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfm_model *m = tfm_model_load(fuzz_file(data, size));
    if (!m)
        return 0;
    fuzz_encode_and_free(m);
    return 0;
}
