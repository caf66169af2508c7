/* The user's guide, part 2: masks and their polarity. One attention layer
 * runs over a padded batch with its masks made three ways that must agree:
 * libtfm's keep-masks (1 = attend), additive masks (0 / -inf, PyTorch's
 * float masks), and PyTorch's boolean masks (True = ignore) converted.
 * Passing a PyTorch boolean mask as if it were a keep-mask inverts it: the
 * program shows that too. A sequence of padding only leaves its queries no
 * key: both forms give them weights 0 (PyTorch: NaN), so the attention's
 * output there is its output projection's bias. Exits 0 when every
 * agreement holds.
 *
 *   cc masks.c $(pkg-config --cflags --libs tfm) -o masks
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <tfm/tfm.h>

enum { B = 2, T = 4, D = 8, HEADS = 2, PAD = 0 };

static float max_difference(tfm_tensor *a, tfm_tensor *b)
{
    const float *x = tfm_tensor_data_f32(a), *y = tfm_tensor_data_f32(b);
    float worst = 0.0f;
    for (int64_t i = 0; i < tfm_tensor_numel(a); i++)
        worst = fmaxf(worst, fabsf(x[i] - y[i]));
    return worst;
}

int main(void)
{
    int status = EXIT_FAILURE;
    tfm_rng *rng = tfm_rng_create(1);
    tfm_params *params = tfm_params_create();
    tfm_tape *tape = tfm_tape_create();
    tfm_attention_options options;
    tfm_attention_options_init(&options);
    options.d_model = D;
    options.heads = HEADS;
    tfm_layer *attention = params && rng ? tfm_attention_create(params, "attn", &options, rng)
                                         : NULL;
    /* Two sequences; the second ends with two padding tokens. */
    const int32_t ids[B * T] = {5, 6, 7, 8, 9, 4, PAD, PAD};
    /* PyTorch's src_key_padding_mask = (ids == PAD): True where ignored. */
    uint8_t torch_padding[B * T];
    for (int i = 0; i < B * T; i++)
        torch_padding[i] = ids[i] == PAD;
    tfm_tensor *id_tensor = tfm_tensor_from_i32(2, (const int64_t[]){B, T}, ids);
    tfm_tensor *x = tfm_tensor_normal(3, (const int64_t[]){B, T, D}, 0.0f, 1.0f, rng);
    if (!attention || !tape || !id_tensor || !x)
        goto done;

    /* 1. Causal masks: a keep-mask (1 on and below the diagonal) and an
     * additive one (-inf above it) mean the same. */
    tfm_tensor *keep_causal = tfm_mask_causal(tape, T, TFM_I32);
    tfm_tensor *additive_causal = tfm_mask_causal(tape, T, TFM_F32);
    /* 2. Padding, three ways: the tutorials' keep-mask from the ids,
     * [B, 1, 1, T], given as an attention mask; PyTorch's boolean
     * key-padding mask [B, T] converted to each form. */
    tfm_tensor *keep_padding = tfm_mask_padding(tape, id_tensor, PAD, TFM_I32);
    tfm_tensor *from_torch_keep = tfm_mask_from_torch_bool(tape, torch_padding, 2,
                                                           (const int64_t[]){B, T}, TFM_I32);
    tfm_tensor *from_torch_additive = tfm_mask_from_torch_bool(tape, torch_padding, 2,
                                                               (const int64_t[]){B, T}, TFM_F32);
    /* 3. The mistake: PyTorch's True-is-ignored bytes taken as keep values. */
    int32_t inverted_values[B * T];
    for (int i = 0; i < B * T; i++)
        inverted_values[i] = torch_padding[i];
    tfm_tensor *inverted = tfm_tensor_from_i32(2, (const int64_t[]){B, T}, inverted_values);

    /* The decoder's self-attention: causal and padded. */
    tfm_tensor *by_keep = tfm_attention_forward(tape, attention, x, x, keep_causal, from_torch_keep,
                                                NULL);
    tfm_tensor *by_additive = tfm_attention_forward(tape, attention, x, x, additive_causal,
                                                    from_torch_additive, NULL);
    tfm_tensor *combined = tfm_mask_combine(tape, keep_causal, keep_padding);
    tfm_tensor *by_tutorial = tfm_attention_forward(tape, attention, x, x, combined, NULL, NULL);
    tfm_tensor *by_mistake = tfm_attention_forward(tape, attention, x, x, keep_causal, inverted,
                                                   NULL);
    /* 4. The second sequence all padding: its queries have no key left. */
    uint8_t no_keys[B * T];
    for (int i = 0; i < B * T; i++)
        no_keys[i] = i >= T;
    tfm_tensor *empty_keep = tfm_attention_forward(
        tape, attention, x, x, NULL,
        tfm_mask_from_torch_bool(tape, no_keys, 2, (const int64_t[]){B, T}, TFM_I32), NULL);
    tfm_tensor *empty_additive = tfm_attention_forward(
        tape, attention, x, x, NULL,
        tfm_mask_from_torch_bool(tape, no_keys, 2, (const int64_t[]){B, T}, TFM_F32), NULL);
    if (!by_keep || !by_additive || !by_tutorial || !by_mistake || !empty_keep ||
        !empty_additive) {
        tfm_tensor_free(inverted);
        goto done;
    }
    float additive_vs_keep = max_difference(by_keep, by_additive);
    float tutorial_vs_keep = max_difference(by_keep, by_tutorial);
    float mistake_vs_keep = max_difference(by_keep, by_mistake);
    float empty_forms = max_difference(empty_keep, empty_additive), empty_vs_bias = 0.0f;
    const float *bias = tfm_tensor_data_f32(tfm_params_find(params, "attn.out_proj.bias"));
    for (int t = 0; t < T; t++)
        for (int e = 0; e < D; e++)
            empty_vs_bias = fmaxf(empty_vs_bias,
                                  fabsf(tfm_tensor_data_f32(empty_keep)[(T + t) * D + e] - bias[e]));
    printf("keep-mask vs additive mask:      max |difference| %g\n", additive_vs_keep);
    printf("key-padding vs tutorial 4-D mask: max |difference| %g\n", tutorial_vs_keep);
    printf("PyTorch bool taken as keep-mask: max |difference| %g (wrong, as expected)\n",
           mistake_vs_keep);
    printf("no key to attend to, keep-mask vs additive: max |difference| %g; "
           "output vs out_proj.bias: %g\n", empty_forms, empty_vs_bias);
    status = additive_vs_keep < 1e-6f && tutorial_vs_keep < 1e-6f && mistake_vs_keep > 1e-2f &&
                     empty_forms == 0.0f && empty_vs_bias < 1e-6f
                 ? EXIT_SUCCESS
                 : EXIT_FAILURE;
    tfm_tensor_free(inverted);
done:
    if (status != EXIT_SUCCESS && tfm_last_status() != TFM_OK)
        fprintf(stderr, "masks: %s\n", tfm_last_error());
    tfm_tensor_free(x);
    tfm_tensor_free(id_tensor);
    tfm_layer_free(attention);
    tfm_tape_free(tape);
    tfm_params_free(params);
    tfm_rng_free(rng);
    return status;
}
