/* tfm-encoder-layer (tutorial 004, "The Transformer Architecture"):
 * sinusoidal positional encoding added to a random (2, 10, 128) batch, then
 * one post-norm encoder layer (8 heads, feed-forward 512, separate Q/K/V
 * projections with biases, no dropout, no mask), as the notebook builds it. */
#include <math.h>

#include "cli.h"

int main(int argc, char **argv)
{
    const char *program = cli_name(argv[0]);
    int64_t batch = 2, length = 10, d_model = 128, heads = 8, d_ff = 512, seed = 0;
    const cli_flag flags[] = {
        {"batch", CLI_INT, &batch, 1, 4096, "sequences in the batch"},
        {"length", CLI_INT, &length, 1, 5000, "positions per sequence"},
        {"d-model", CLI_INT, &d_model, 2, 8192, "model width"},
        {"heads", CLI_INT, &heads, 1, 256, "attention heads (must divide d-model)"},
        {"ff", CLI_INT, &d_ff, 1, 65536, "feed-forward width"},
        {"seed", CLI_INT, &seed, 0, 1e15, "random seed"},
    };
    int exit_now = cli_parse(argc, argv, "Sinusoidal positions + one transformer encoder layer.",
                             flags, (int)(sizeof flags / sizeof flags[0]), NULL);
    if (exit_now != CLI_CONTINUE)
        return exit_now;
    if (cli_check_heads(program, d_model, heads))
        return CLI_USAGE_ERROR;

    int status = EXIT_FAILURE;
    tfm_rng *rng = tfm_rng_create((uint64_t)seed);
    tfm_params *params = tfm_params_create();
    tfm_tape *tape = tfm_tape_create();
    tfm_block_options options;
    tfm_block_options_init(&options);
    options.d_model = d_model;
    options.heads = (int32_t)heads;
    options.d_ff = d_ff;
    options.dropout = 0.0f;
    options.fused_qkv = 0; /* the notebook's W_q, W_k, W_v */
    tfm_layer *positions = tfm_sinusoidal_positions_create(5000 > length ? 5000 : length, d_model);
    tfm_layer *layer = rng && params ? tfm_encoder_layer_create(params, "encoder_layer", &options, rng)
                                     : NULL;
    tfm_tensor *x = rng ? tfm_tensor_normal(3, (const int64_t[]){batch, length, d_model}, 0.0f,
                                            1.0f, rng)
                        : NULL;
    if (!tape || !positions || !layer || !x) {
        cli_fail(program, "setup");
        goto done;
    }
    tfm_layer_set_training(layer, 0);
    tfm_tape_set_recording(tape, 0); /* inference: no gradients */
    tfm_tensor *out = tfm_encoder_layer_forward(tape, layer, tfm_positions_forward(tape, positions, x, 0),
                                                NULL, NULL);
    if (!out) {
        cli_fail(program, "forward");
        goto done;
    }
    int64_t shape[TFM_MAX_DIMS];
    tfm_tensor_shape(out, shape);
    printf("Output shape: (%lld, %lld, %lld)\n", (long long)shape[0], (long long)shape[1],
           (long long)shape[2]);
    /* post-norm output: every position is layer-normalised */
    const float *v = tfm_tensor_data_f32(out);
    double sum = 0.0, squares = 0.0;
    int64_t n = tfm_tensor_numel(out);
    for (int64_t i = 0; i < n; i++) {
        sum += v[i];
        squares += (double)v[i] * v[i];
    }
    printf("parameters: %lld; output mean %.4f, std %.4f\n", (long long)tfm_params_numel(params),
           sum / (double)n, sqrt(squares / (double)n - (sum / (double)n) * (sum / (double)n)));
    status = EXIT_SUCCESS;
done:
    tfm_tensor_free(x);
    tfm_layer_free(layer);
    tfm_layer_free(positions);
    tfm_tape_free(tape);
    tfm_params_free(params);
    tfm_rng_free(rng);
    return status;
}
