/* tfm_params_load (strict) and tfm_params_load_with (lenient, a prefix,
 * the finiteness check, a report) into a store of the seeds' shapes. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tfm_params *store;
    if (!store)
        store = fuzz_store();
    const char *path = fuzz_file(data, size);
    tfm_params_load(store, path);
    tfm_load_options o;
    tfm_load_options_init(&o);
    o.strip_prefix = "model.";
    o.allow_unexpected = 1;
    o.allow_missing = 1;
    o.check_finite = 1;
    tfm_load_report *report = NULL;
    if (tfm_params_load_with(store, path, &o, &report) == TFM_OK)
        for (tfm_load_outcome k = TFM_LOAD_LOADED; k <= TFM_LOAD_MISSING; k++)
            for (int64_t i = 0; i < tfm_load_report_count(report, k); i++)
                tfm_load_report_name(report, k, i);
    tfm_load_report_free(report);
    return 0;
}
