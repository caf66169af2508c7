/* The user's guide, part 3: checkpoints both ways with PyTorch.
 *
 * PyTorch to libtfm: the file given is a PyTorch model's state_dict (an
 * nn.Transformer with embeddings and a generator, made by
 * tests/fixtures/generate.py) whose parameter names carry a "param." prefix
 * and which holds other tensors too: the inputs and the logits PyTorch
 * computed. The load strips the prefix and skips what is not a parameter,
 * reporting both; the logits must then agree with PyTorch's.
 *
 * libtfm to PyTorch: the model is saved and the saved names must be
 * exactly the state_dict's, so that PyTorch's
 *     model.load_state_dict(safetensors.torch.load_file(path), strict=True)
 * accepts the file (the options in its metadata do not disturb it).
 *
 *   ./pytorch_checkpoints tests/fixtures/model.safetensors [out.safetensors]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/tfm.h>

static tfm_model *model_like_the_fixture(void)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = 13;
    o.tgt_vocab = 11;
    o.max_src_len = 6;
    o.max_tgt_len = 5;
    o.encoder_layers = 2;
    o.decoder_layers = 2;
    o.d_model = 16;
    o.heads = 2;
    o.d_ff = 32;
    o.dropout = 0.0f;
    o.embedding_scale = TFM_EMBEDDING_SCALE_SQRT_D;
    return tfm_model_create(&o);
}

/* PyTorch to libtfm: load, then compare logits with the file's. */
static int load_from_pytorch(tfm_model *model, const char *path)
{
    tfm_load_options options;
    tfm_load_options_init(&options);
    options.strip_prefix = "param.";
    options.allow_unexpected = 1;
    tfm_load_report *report = NULL;
    if (tfm_params_load_with(tfm_model_params(model), path, &options, &report) != TFM_OK)
        return -1;
    printf("loaded %lld tensors, skipped %lld (for example %s), missing %lld\n",
           (long long)tfm_load_report_count(report, TFM_LOAD_LOADED),
           (long long)tfm_load_report_count(report, TFM_LOAD_SKIPPED),
           tfm_load_report_name(report, TFM_LOAD_SKIPPED, 0),
           (long long)tfm_load_report_count(report, TFM_LOAD_MISSING));
    int64_t missing = tfm_load_report_count(report, TFM_LOAD_MISSING);
    tfm_load_report_free(report);

    tfm_safetensors *file = tfm_safetensors_open(path);
    tfm_tensor *src = tfm_safetensors_get(file, "input.src");
    tfm_tensor *tgt = tfm_safetensors_get(file, "input.tgt");
    tfm_tensor *src_keep = tfm_safetensors_get(file, "mask.src"); /* [B, 1, 1, S], 1 = attend */
    tfm_tensor *tgt_additive = tfm_safetensors_get(file, "mask.tgt"); /* [T, T], 0 / -inf */
    tfm_tensor *expected = tfm_safetensors_get(file, "output.logits");
    tfm_safetensors_close(file);
    tfm_tape *tape = tfm_tape_create();
    /* In training mode, as the fixture ran PyTorch (its dropout is 0). */
    tfm_tensor *logits = tape ? tfm_model_forward(tape, model, src, tgt, src_keep, tgt_additive,
                                                  src_keep, NULL, NULL, NULL)
                              : NULL;
    int result = -1;
    if (logits && expected && missing == 0) {
        const float *got = tfm_tensor_data_f32(logits), *want = tfm_tensor_data_f32(expected);
        float worst = 0.0f;
        for (int64_t i = 0; i < tfm_tensor_numel(expected); i++)
            worst = fmaxf(worst, fabsf(got[i] - want[i]));
        printf("logits against PyTorch's: max |difference| %g\n", worst);
        result = worst < 1e-5f ? 0 : -1;
    }
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_tensor_free(src_keep);
    tfm_tensor_free(tgt_additive);
    tfm_tensor_free(expected);
    return result;
}

/* libtfm to PyTorch: the saved names are the fixture's parameter names. */
static int save_for_pytorch(const tfm_model *model, const char *fixture, const char *path)
{
    if (tfm_model_save(model, path) != TFM_OK)
        return -1;
    tfm_safetensors *saved = tfm_safetensors_open(path);
    tfm_safetensors *original = tfm_safetensors_open(fixture);
    if (!saved || !original) {
        tfm_safetensors_close(saved);
        tfm_safetensors_close(original);
        return -1;
    }
    int64_t in_pytorch = 0, found = 0;
    for (int64_t i = 0; i < tfm_safetensors_count(original); i++) {
        const char *name = tfm_safetensors_name(original, i);
        if (strncmp(name, "param.", 6) != 0)
            continue;
        in_pytorch++;
        tfm_tensor *tensor = tfm_safetensors_get(saved, name + 6);
        found += tensor != NULL;
        tfm_tensor_free(tensor);
    }
    int64_t saved_count = tfm_safetensors_count(saved);
    printf("saved %lld tensors; the state_dict has %lld, all found: %s\n",
           (long long)saved_count, (long long)in_pytorch, found == in_pytorch ? "yes" : "no");
    tfm_clear_error(); /* a name not found above left its error */
    tfm_safetensors_close(saved);
    tfm_safetensors_close(original);
    return found == in_pytorch && saved_count == in_pytorch ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PYTORCH.safetensors [OUT.safetensors]\n", argv[0]);
        return 2;
    }
    tfm_model *model = model_like_the_fixture();
    int ok = model && load_from_pytorch(model, argv[1]) == 0 &&
             save_for_pytorch(model, argv[1], argc > 2 ? argv[2] : "from_libtfm.safetensors") == 0;
    if (!ok)
        fprintf(stderr, "pytorch_checkpoints: failed: %s\n", tfm_last_error());
    tfm_model_free(model);
    return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
