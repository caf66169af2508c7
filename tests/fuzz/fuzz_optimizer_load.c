/* tfm_optimizer_load into Adam and SGD-with-momentum optimizers over a
 * store of the seeds' shapes; a loaded state must then step. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tfm_params *store;
    static tfm_optimizer *optimizers[2];
    if (!store) {
        store = fuzz_store();
        for (int k = 0; k < 2; k++) {
            tfm_optimizer_options o;
            tfm_optimizer_options_init(&o, k ? TFM_OPTIMIZER_SGD : TFM_OPTIMIZER_ADAM);
            o.momentum = 0.9f;
            o.schedule = TFM_SCHEDULE_WARMUP_COSINE;
            o.warmup_steps = 10;
            o.total_steps = 100;
            optimizers[k] = tfm_optimizer_create(store, &o);
        }
    }
    const char *path = fuzz_file(data, size);
    for (int k = 0; k < 2; k++)
        if (tfm_optimizer_load(optimizers[k], path) == TFM_OK) {
            tfm_optimizer_lr(optimizers[k]);
            tfm_optimizer_step(optimizers[k]);
        }
    return 0;
}
