/* The second half of the resume test, as a fresh process: loads the
 * training state at argv[1] into a model and optimizer made from the file
 * and the recipe, runs the remaining steps and writes the final training
 * state to argv[2]. */
#include <stdio.h>

#include "training_workload.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s STATE_IN STATE_OUT\n", argv[0]);
        return 2;
    }
    tfm_model *model = tfm_model_load(argv[1]);
    tfm_optimizer *opt = model ? workload_optimizer(model) : NULL;
    tfm_rng *data = tfm_rng_create(0);
    tfm_status s = opt && data ? tfm_training_load(argv[1], model, opt, 1, &data) : tfm_last_status();
    if (s == TFM_OK)
        s = workload_steps(model, opt, data, WORKLOAD_STEPS / 2, WORKLOAD_STEPS, NULL);
    if (s == TFM_OK)
        s = tfm_training_save(argv[2], model, opt, 1, (const tfm_rng *const *)&data, 0, NULL, NULL);
    if (s != TFM_OK)
        fprintf(stderr, "%s: %s\n", argv[0], tfm_last_error());
    tfm_rng_free(data);
    tfm_optimizer_free(opt);
    tfm_model_free(model);
    return s == TFM_OK ? 0 : 1;
}
