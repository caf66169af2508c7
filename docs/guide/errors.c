/* The user's guide, part 5: errors. Every call reports failure through its
 * return value (a status, NULL or -1) and leaves a status and a message for
 * tfm_last_error() on the calling thread; the library never prints, exits
 * or aborts, and a failed call changes nothing. Each case below is checked;
 * exits 0 when all behave as documented.
 *
 *   cc errors.c $(pkg-config --cflags --libs tfm) -o errors
 *   ./errors [scratch-folder]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/tfm.h>

static int failures;

/* Prints what the last call reported and checks it is the status wanted. */
static void expect(const char *what, tfm_status wanted)
{
    tfm_status got = tfm_last_status();
    printf("%-38s %-16s %s\n", what, tfm_status_name(got), tfm_last_error());
    if (got != wanted) {
        printf("  expected %s\n", tfm_status_name(wanted));
        failures++;
    }
    tfm_clear_error();
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (f)
        fclose(f);
    return size;
}

int main(int argc, char **argv)
{
    const char *folder = argc > 1 ? argv[1] : ".";
    char model_path[4096], corrupt_path[4096];
    snprintf(model_path, sizeof model_path, "%s/errors_model.safetensors", folder);
    snprintf(corrupt_path, sizeof corrupt_path, "%s/errors_corrupt.safetensors", folder);

    /* A NULL handle. */
    tfm_tensor_zero_grad(NULL);
    expect("zero_grad(NULL)", TFM_ERR_NULL);

    /* Shapes that do not fit: the op returns NULL, and the next op given
     * that NULL returns NULL too and keeps the first error, so a chain is
     * checked once at its end. */
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *a = tfm_tensor_ones(2, (const int64_t[]){2, 3});
    tfm_tensor *b = tfm_tensor_ones(2, (const int64_t[]){4, 5});
    tfm_tensor *chain = tfm_relu(tape, tfm_add(tape, a, b));
    if (chain)
        failures++;
    expect("relu(add([2,3], [4,5]))", TFM_ERR_SHAPE);

    /* Absurd sizes are refused before any allocation. */
    if (tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){(int64_t)1 << 40, (int64_t)1 << 40}))
        failures++;
    expect("zeros([2^40, 2^40])", TFM_ERR_SIZE);

    /* A tape-owned result used after the reset that ended it. */
    tfm_tensor *result = tfm_scale(tape, a, 2.0f);
    tfm_tape_reset(tape);
    if (tfm_tensor_numel(result) != -1)
        failures++;
    expect("numel(result after tape reset)", TFM_ERR_STATE);

    /* A corrupt file. */
    static const char corrupt[] = "\x10\0\0\0\0\0\0\0{\"x\": not json} "; /* 16-byte header */
    FILE *f = fopen(corrupt_path, "wb");
    if (f) {
        fwrite(corrupt, 1, sizeof corrupt - 1, f);
        fclose(f);
    }
    if (tfm_model_load(corrupt_path))
        failures++;
    expect("model_load(corrupt file)", TFM_ERR_FORMAT);

    /* A refused save leaves the file that was there as it was. */
    tfm_model_options options;
    tfm_model_options_init(&options);
    options.src_vocab = options.tgt_vocab = 10;
    options.max_src_len = options.max_tgt_len = 8;
    options.d_model = 16;
    options.heads = 2;
    options.d_ff = 16;
    options.encoder_layers = options.decoder_layers = 1;
    tfm_model *model = tfm_model_create(&options);
    if (!model || tfm_model_save(model, model_path) != TFM_OK) {
        printf("setup failed: %s\n", tfm_last_error());
        failures++;
    }
    long size_before = file_size(model_path);
    const char *key = "tfm.d_model", *value = "9999"; /* "tfm." keys are libtfm's */
    tfm_model_save_with_metadata(model, model_path, 1, &key, &value);
    expect("save with a reserved metadata key", TFM_ERR_ARG);
    if (file_size(model_path) != size_before)
        failures++;
    tfm_model *again = tfm_model_load(model_path);
    if (!again || tfm_model_d_model(again) != 16)
        failures++;

    /* Options out of range name the field. */
    options.heads = 3; /* does not divide d_model 16 */
    if (tfm_model_create(&options))
        failures++;
    expect("model_create(heads 3, d_model 16)", TFM_ERR_ARG);

    tfm_model_free(again);
    tfm_model_free(model);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
    tfm_tape_free(tape);
    remove(model_path);
    remove(corrupt_path);
    printf("%s\n", failures ? "some errors were not reported as documented"
                            : "every error was reported as documented");
    return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
