/* The ready-made model: options, parameter names and count, forward shapes,
 * modes, gradients, and checkpoints that reload bit-identically and reject
 * damaged files. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "gradcheck.h"

static void small_options(tfm_model_options *o)
{
    tfm_model_options_init(o);
    o->src_vocab = 13;
    o->tgt_vocab = 11;
    o->max_src_len = 8;
    o->max_tgt_len = 6;
    o->encoder_layers = 2;
    o->decoder_layers = 2;
    o->d_model = 16;
    o->heads = 2;
    o->d_ff = 32;
    o->dropout = 0.1f;
    o->seed = 7;
}

/* Small enough for finite differences through the whole model, no dropout. */
static void gradcheck_options(tfm_model_options *o)
{
    small_options(o);
    o->d_model = 8;
    o->d_ff = 8;
    o->encoder_layers = 1;
    o->decoder_layers = 1;
    o->dropout = 0.0f;
}

static tfm_tensor *ids(int64_t batch, int64_t length, int32_t vocab, uint32_t salt)
{
    int32_t values[64];
    for (int64_t i = 0; i < batch * length; i++)
        values[i] = (int32_t)((i * 7 + salt) % (uint32_t)(vocab - 1)) + 1;
    return tfm_tensor_from_i32(2, (const int64_t[]){batch, length}, values);
}

START_TEST(names_follow_nn_transformer)
{
    tfm_model_options o;
    small_options(&o);
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    tfm_params *p = tfm_model_params(m);
    static const char *const expected[] = {
        "src_embedding.weight", "tgt_embedding.weight",
        "encoder.layers.0.self_attn.in_proj_weight", "encoder.layers.0.self_attn.in_proj_bias",
        "encoder.layers.0.self_attn.out_proj.weight", "encoder.layers.1.linear1.weight",
        "encoder.layers.1.linear2.bias", "encoder.layers.1.norm2.weight", "encoder.norm.weight",
        "decoder.layers.0.multihead_attn.in_proj_weight", "decoder.layers.1.norm3.bias",
        "decoder.norm.bias", "generator.weight", "generator.bias",
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        ck_assert_msg(tfm_params_find(p, expected[i]) != NULL, "missing %s", expected[i]);
    ck_assert_int_eq(tfm_tensor_dim(tfm_params_find(p, "encoder.layers.0.self_attn.in_proj_weight"), 0), 48);
    /* the count torch gives for the same configuration */
    int64_t d = 16, f = 32, attn = 3 * d * d + 3 * d + d * d + d, ffn = f * d + f + d * f + d;
    int64_t enc = attn + ffn + 4 * d, dec = 2 * attn + ffn + 6 * d;
    int64_t total = 13 * d + 11 * d + 2 * enc + 2 * dec + 4 * d + 11 * d + 11;
    ck_assert_int_eq(tfm_model_parameter_count(m), total);
    ck_assert_ptr_null(tfm_params_find(p, "src_positions.weight")); /* sinusoidal: no params */
    tfm_model_free(m);
}
END_TEST

START_TEST(tutorial_003_options)
{
    tfm_model_options o;
    small_options(&o);
    o.positions = TFM_POSITIONS_LEARNED;
    o.embedding_scale = TFM_EMBEDDING_SCALE_TRAINABLE;
    o.final_norm = 0;
    o.fused_qkv = 0;
    o.trainable_scale = 1;
    o.scale_init = 4.0f;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    tfm_params *p = tfm_model_params(m);
    static const char *const expected[] = {
        "src_positions.weight", "tgt_positions.weight", "src_scale", "tgt_scale",
        "encoder.layers.0.self_attn.q_proj.weight", "encoder.layers.0.self_attn.scale",
        "decoder.layers.1.multihead_attn.v_proj.bias",
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        ck_assert_msg(tfm_params_find(p, expected[i]) != NULL, "missing %s", expected[i]);
    ck_assert_ptr_null(tfm_params_find(p, "encoder.norm.weight"));
    ck_assert_float_eq_tol(tfm_tensor_data_f32(tfm_params_find(p, "src_scale"))[0], 4.0f, 1e-6f);
    tfm_model_free(m);

    o.share_embeddings = 1;
    o.tgt_vocab = o.src_vocab;
    m = tfm_model_create(&o);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_null(tfm_params_find(tfm_model_params(m), "tgt_embedding.weight"));
    tfm_model_free(m);
}
END_TEST

START_TEST(bad_options)
{
    tfm_model_options o;
    small_options(&o);
    o.tgt_vocab = 0;
    ck_assert_ptr_null(tfm_model_create(&o));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    small_options(&o);
    o.share_embeddings = 1;
    ck_assert_ptr_null(tfm_model_create(&o));
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "shared"));
    small_options(&o);
    o.heads = 3; /* does not divide 16 */
    ck_assert_ptr_null(tfm_model_create(&o));
    small_options(&o);
    o.struct_size = 4;
    ck_assert_ptr_null(tfm_model_create(&o));
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "struct_size"));
    ck_assert_ptr_null(tfm_model_create(NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
}
END_TEST

START_TEST(forward_shapes_and_modes)
{
    tfm_model_options o;
    small_options(&o);
    tfm_model *m = tfm_model_create(&o);
    tfm_tensor *src = ids(2, 5, 13, 1), *tgt = ids(2, 4, 11, 3);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *causal = tfm_mask_causal(tape, 4, TFM_F32);
    tfm_tensor *logits = tfm_model_forward(tape, m, src, tgt, NULL, causal, NULL, NULL, NULL, NULL);
    ck_assert_msg(logits != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tensor_ndim(logits), 3);
    ck_assert_int_eq(tfm_tensor_dim(logits, 0), 2);
    ck_assert_int_eq(tfm_tensor_dim(logits, 1), 4);
    ck_assert_int_eq(tfm_tensor_dim(logits, 2), 11);
    /* training mode: dropout makes two passes differ; eval: identical */
    float a[88], b[88];
    tfm_tensor_read_f32(logits, a, 88);
    tfm_tensor_read_f32(tfm_model_forward(tape, m, src, tgt, NULL, causal, NULL, NULL, NULL, NULL), b, 88);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    tfm_model_set_training(m, 0);
    tfm_tensor_read_f32(tfm_model_forward(tape, m, src, tgt, NULL, causal, NULL, NULL, NULL, NULL), a, 88);
    tfm_tensor_read_f32(tfm_model_forward(tape, m, src, tgt, NULL, causal, NULL, NULL, NULL, NULL), b, 88);
    ck_assert_mem_eq(a, b, sizeof a);
    /* too long for the positions; ids of the wrong type */
    tfm_tensor *long_src = ids(1, 9, 13, 0);
    ck_assert_ptr_null(tfm_model_encode(tape, m, long_src, NULL, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_RANGE);
    ck_assert_ptr_null(tfm_model_encode(tape, m, causal, NULL, NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    tfm_tensor_free(long_src);
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_model_free(m);
}
END_TEST

/* Logits [rows, 4, 11] of rows 0..rows of a fixed batch, in training mode,
 * with the model's stream as seeded and its slice set; and the loss's
 * gradient, summed over the rows, into grad (the tensors' first block). */
static void sharded_logits(int64_t first, int64_t rows, int64_t index, int64_t count,
                           float *logits, float *grad, int64_t grad_count)
{
    tfm_model_options o;
    small_options(&o);
    o.dropout = 0.3f;
    o.embedding_dropout = 0.3f;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_int_eq(tfm_model_set_shard(m, index, count), TFM_OK);
    tfm_tensor *all_src = ids(4, 5, 13, 1), *all_tgt = ids(4, 4, 11, 3);
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){rows, 5},
                                          tfm_tensor_data_i32(all_src) + first * 5);
    tfm_tensor *tgt = tfm_tensor_from_i32(2, (const int64_t[]){rows, 4},
                                          tfm_tensor_data_i32(all_tgt) + first * 4);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *causal = tfm_mask_causal(tape, 4, TFM_F32);
    tfm_tensor *out = tfm_model_forward(tape, m, src, tgt, NULL, causal, NULL, NULL, NULL, NULL);
    ck_assert_msg(out && tfm_tensor_read_f32(out, logits, rows * 44) == TFM_OK, "%s",
                  tfm_last_error());
    ck_assert_int_eq(tfm_tape_backward(tape, tfm_sum(tape, out)), TFM_OK);
    memcpy(grad, tfm_params_grads(tfm_model_params(m)), (size_t)grad_count * sizeof *grad);
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_tensor_free(all_src);
    tfm_tensor_free(all_tgt);
    tfm_model_free(m);
}

/* The largest |a - b| / (1 + |b|) over n values. */
static float largest_difference(const float *a, const float *b, int n)
{
    float worst = 0.0f;
    for (int i = 0; i < n; i++)
        worst = fmaxf(worst, fabsf(a[i] - b[i]) / (1.0f + fabsf(b[i])));
    return worst;
}

/* Two processes each running half the batch with their slice set draw the
 * whole batch's dropout masks (embedding, attention weights, feed-forward,
 * residuals): their logits are the whole batch's (up to the GEMMs'
 * rounding for other row counts, where a wrong mask differs by O(1)), and
 * their gradients add up to its. */
START_TEST(shards_draw_the_whole_batchs_dropout)
{
    enum { GRADS = 4096 };
    static float whole[4 * 44], half[2][2 * 44], g_whole[GRADS], g_half[2][GRADS];
    sharded_logits(0, 4, 0, 1, whole, g_whole, GRADS);
    sharded_logits(0, 2, 0, 2, half[0], g_half[0], GRADS);
    sharded_logits(2, 2, 1, 2, half[1], g_half[1], GRADS);
    ck_assert_float_le(largest_difference(half[0], whole, 2 * 44), 1e-5f);
    ck_assert_float_le(largest_difference(half[1], whole + 2 * 44, 2 * 44), 1e-5f);
    for (int i = 0; i < GRADS; i++)
        ck_assert_msg(fabsf(g_half[0][i] + g_half[1][i] - g_whole[i]) <=
                          1e-4f * (1.0f + fabsf(g_whole[i])),
                      "gradient %d: %g + %g vs %g", i, g_half[0][i], g_half[1][i], g_whole[i]);
    /* without the slice, the second half draws the first half's masks */
    float unsliced[2 * 44], g[GRADS];
    sharded_logits(2, 2, 0, 1, unsliced, g, GRADS);
    ck_assert_float_gt(largest_difference(unsliced, half[1], 2 * 44), 1e-2f);
    tfm_model_options o;
    small_options(&o);
    tfm_model *m = tfm_model_create(&o);
    ck_assert_int_eq(tfm_model_set_shard(m, 2, 2), TFM_ERR_ARG);
    ck_assert_msg(strstr(tfm_last_error(), "tfm_model_set_shard") != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_set_shard(NULL, 0, 1), TFM_ERR_NULL);
    tfm_model_free(m);
}
END_TEST

/* The options as text, as a model file writes them. */
START_TEST(options_as_text)
{
    tfm_model_options o;
    small_options(&o);
    o.positions = TFM_POSITIONS_LEARNED;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_int_ge(tfm_model_option_count(), 20);
    int seen = 0;
    for (int32_t i = 0; i < tfm_model_option_count(); i++) {
        const char *name = NULL;
        char value[96];
        ck_assert_int_eq(tfm_model_option(m, i, &name, value, sizeof value), TFM_OK);
        if (strcmp(name, "d_model") == 0)
            seen += strcmp(value, "16") == 0;
        if (strcmp(name, "positions") == 0)
            seen += strcmp(value, "learned") == 0;
        if (strcmp(name, "dropout") == 0)
            seen += strtof(value, NULL) == 0.1f;
    }
    ck_assert_int_eq(seen, 3);
    const char *name = NULL;
    char small[2];
    ck_assert_int_eq(tfm_model_option(m, tfm_model_option_count(), &name, small, 2), TFM_ERR_RANGE);
    ck_assert_int_eq(tfm_model_option(m, 0, &name, small, 2), TFM_ERR_SIZE); /* "13" */
    ck_assert_int_eq(tfm_model_option(NULL, 0, &name, small, 2), TFM_ERR_NULL);
    tfm_model_free(m);
}
END_TEST

static void assert_error(tfm_status status, const char *fragment)
{
    ck_assert_msg(tfm_last_status() == status, "status %s, wanted %s: %s",
                  tfm_status_name(tfm_last_status()), tfm_status_name(status), tfm_last_error());
    ck_assert_msg(strstr(tfm_last_error(), fragment) != NULL, "\"%s\" lacks \"%s\"",
                  tfm_last_error(), fragment);
    tfm_clear_error();
}

/* Each mask argument has its kind: a key-padding mask [B, S] goes in its
 * own argument (the same as the tutorials' [B, 1, 1, S] attention mask),
 * and is refused as an attention mask; errors name the call and argument. */
START_TEST(masks_are_read_as_declared)
{
    tfm_model_options o;
    small_options(&o);
    tfm_model *m = tfm_model_create(&o);
    tfm_model_set_training(m, 0);
    tfm_tensor *src = ids(2, 5, 13, 1), *tgt = ids(2, 4, 11, 3);
    int32_t *s = tfm_tensor_data_i32(src);
    s[3] = s[4] = s[9] = 0; /* padding */
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *causal = tfm_mask_causal(tape, 4, TFM_I32);
    tfm_tensor *as_4d = tfm_mask_padding(tape, src, 0, TFM_I32);
    const uint8_t pad[10] = {0, 0, 0, 1, 1, 0, 0, 0, 0, 1};
    tfm_tensor *key_padding = tfm_mask_from_torch_bool(tape, pad, 2, (const int64_t[]){2, 5},
                                                       TFM_I32);
    float a[88], b[88];
    ck_assert_int_eq(tfm_tensor_read_f32(tfm_model_forward(tape, m, src, tgt, as_4d, causal, as_4d,
                                                           NULL, NULL, NULL), a, 88), TFM_OK);
    ck_assert_int_eq(tfm_tensor_read_f32(tfm_model_forward(tape, m, src, tgt, NULL, causal, NULL,
                                                           key_padding, NULL, key_padding),
                                         b, 88), TFM_OK);
    ck_assert_mem_eq(a, b, sizeof a);

    tfm_clear_error();
    ck_assert_ptr_null(tfm_model_forward(tape, m, src, tgt, key_padding, causal, NULL, NULL, NULL,
                                         NULL));
    assert_error(TFM_ERR_SHAPE, "tfm_model_forward: src_mask [2,5] is not an attention mask");
    ck_assert_ptr_null(tfm_model_encode(tape, m, src, NULL, causal));
    assert_error(TFM_ERR_SHAPE, "tfm_model_encode: src_key_padding_mask [4,4] must be "
                                "[B, S] = [2, 5]");
    tfm_tensor *memory = tfm_model_encode(tape, m, src, NULL, key_padding);
    ck_assert_ptr_null(tfm_model_decode(tape, m, tgt, memory, causal, NULL, NULL, as_4d));
    assert_error(TFM_ERR_SHAPE, "tfm_model_decode: memory_key_padding_mask [2,1,1,5]");
    ck_assert_ptr_null(tfm_model_decode(tape, m, tgt, memory, tfm_mask_causal(tape, 4, TFM_F32),
                                        NULL, causal, NULL));
    assert_error(TFM_ERR_SHAPE, "tgt_key_padding_mask [4,4] must be [B, S] = [2, 4]");
    tfm_tensor *additive = tfm_mask_causal(tape, 5, TFM_F32);
    ck_assert_ptr_null(tfm_model_encode(tape, m, src, additive, key_padding));
    assert_error(TFM_ERR_DTYPE, "src_mask is a float32 additive mask and src_key_padding_mask "
                                "is an int32 keep-mask");
    /* a mask from before the reset, in the call the caller made */
    ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
    ck_assert_ptr_null(tfm_model_forward(tape, m, src, tgt, NULL, causal, NULL, NULL, NULL, NULL));
    assert_error(TFM_ERR_STATE, "tfm_model_forward: tgt_mask was made on a tape before its "
                                "last tfm_tape_reset");
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_model_free(m);
}
END_TEST

/* The logits [1, 3, 11] of the model for a source of `length` padding
 * tokens and a target padded on the left (under the causal mask its first
 * query has no key), masks from PyTorch's bools in the given form; then
 * the loss's backward, whose gradients must all be finite. */
static void logits_without_source(tfm_model *m, int64_t length, tfm_dtype form, float *logits)
{
    const int32_t pad_ids[8] = {0};
    const uint8_t source_padding[8] = {1, 1, 1, 1, 1, 1, 1, 1}, target_padding[3] = {1, 0, 0};
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){1, length}, pad_ids);
    tfm_tensor *tgt = ids(1, 3, 11, 2), *targets = ids(1, 3, 11, 4);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *src_padding = tfm_mask_from_torch_bool(tape, source_padding, 2,
                                                       (const int64_t[]){1, length}, form);
    tfm_tensor *tgt_padding = tfm_mask_from_torch_bool(tape, target_padding, 2,
                                                       (const int64_t[]){1, 3}, form);
    tfm_tensor *out = tfm_model_forward(tape, m, src, tgt, NULL, tfm_mask_causal(tape, 3, form),
                                        NULL, src_padding, tgt_padding, src_padding);
    ck_assert_msg(out != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tensor_read_f32(out, logits, 33), TFM_OK);
    tfm_params *p = tfm_model_params(m);
    ck_assert_int_eq(tfm_params_zero_grad(p), TFM_OK);
    ck_assert_int_eq(tfm_tape_backward(tape, tfm_cross_entropy(tape, out, targets, -1, 0.0f)),
                     TFM_OK);
    for (int64_t i = 0; i < tfm_params_count(p); i++) {
        const float *g = tfm_tensor_grad_f32(tfm_params_at(p, i));
        for (int64_t j = 0; j < tfm_tensor_numel(tfm_params_at(p, i)); j++)
            ck_assert_msg(isfinite(g[j]), "%s's gradient [%lld] is %g", tfm_params_name(p, i),
                          (long long)j, (double)g[j]);
    }
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_tensor_free(targets);
}

/* A source of padding only leaves the decoder nothing to attend to in the
 * memory: its cross-attention adds only the output projections' biases, so
 * the logits are finite, the same in both mask forms and whatever the
 * source's length (a uniform attention over the padding would read the
 * memory), and the gradients are finite. */
START_TEST(a_source_of_padding_only)
{
    tfm_model_options o;
    small_options(&o);
    o.dropout = 0.0f;
    tfm_model *m = tfm_model_create(&o);
    float logits[2][2][33]; /* [length 3 or 8][form] */
    for (int l = 0; l < 2; l++)
        for (int f = 0; f < 2; f++)
            logits_without_source(m, l ? 8 : 3, f ? TFM_F32 : TFM_I32, logits[l][f]);
    for (int i = 0; i < 33; i++)
        ck_assert(isfinite(logits[0][0][i]));
    ck_assert_mem_eq(logits[0][0], logits[0][1], sizeof logits[0][0]);
    ck_assert_mem_eq(logits[1][0], logits[1][1], sizeof logits[1][0]);
    ck_assert_mem_eq(logits[0][0], logits[1][0], sizeof logits[0][0]);
    tfm_model_free(m);
}
END_TEST

/* Gradients of a tiny model's loss w.r.t. a few of its parameters. */
typedef struct model_ctx {
    tfm_model *model;
    tfm_tensor *src, *tgt, *targets;
} model_ctx;

static tfm_tensor *model_loss(tfm_tape *tape, tfm_tensor *const *in, void *ctx)
{
    (void)in; /* the inputs are the model's own parameters */
    model_ctx *c = ctx;
    tfm_tensor *causal = tfm_mask_causal(tape, 3, TFM_I32);
    tfm_tensor *logits = tfm_model_forward(tape, c->model, c->src, c->tgt, NULL, causal, NULL, NULL, NULL, NULL);
    return tfm_cross_entropy(tape, logits, c->targets, 0, 0.1f);
}

/* Finite differences of a cross-entropy through the whole model (in
 * evaluation mode) against the backward, for the four parameters named. */
static void gradcheck_model(tfm_model *m, const char *const names[4])
{
    model_ctx c = {m, ids(2, 4, 13, 1), ids(2, 3, 11, 2), ids(2, 3, 11, 5)};
    tfm_model_set_training(m, 0);
    tfm_tensor *checked[4];
    for (int i = 0; i < 4; i++) {
        checked[i] = tfm_params_find(tfm_model_params(m), names[i]);
        ck_assert_msg(checked[i] != NULL, "no parameter %s", names[i]);
    }
    /* only these four are perturbed; gradcheck zeroes their grads itself */
    ck_assert_gradcheck(model_loss, &c, checked, 4);
    tfm_tensor_free(c.src);
    tfm_tensor_free(c.tgt);
    tfm_tensor_free(c.targets);
}

START_TEST(gradients_through_the_model)
{
    tfm_model_options o;
    gradcheck_options(&o);
    tfm_model *m = tfm_model_create(&o);
    static const char *const names[4] = {"encoder.layers.0.self_attn.in_proj_bias",
                                         "decoder.layers.0.multihead_attn.out_proj.bias",
                                         "decoder.norm.weight", "generator.bias"};
    gradcheck_model(m, names);
    tfm_model_free(m);
}
END_TEST

/* The published models' pieces: an embedding norm, offset learned
 * positions, SiLU, feed-forwards without biases and RMS norms, through
 * the gradient. */
START_TEST(gradients_through_the_published_pieces)
{
    tfm_model_options o;
    gradcheck_options(&o);
    o.positions = TFM_POSITIONS_LEARNED;
    o.position_offset = 2;
    o.embedding_norm = 1;
    o.activation = TFM_ACTIVATION_SILU;
    o.feed_forward_bias = 0;
    o.rms_norm = 1;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    tfm_params *p = tfm_model_params(m);
    ck_assert_ptr_null(tfm_params_find(p, "encoder.layers.0.linear1.bias"));
    ck_assert_ptr_null(tfm_params_find(p, "decoder.layers.0.linear2.bias"));
    ck_assert_ptr_null(tfm_params_find(p, "decoder.layers.0.norm3.bias"));
    ck_assert_ptr_null(tfm_params_find(p, "encoder.norm.bias"));
    /* max_tgt_len 6 + 2 rows before position 0 */
    ck_assert_int_eq(tfm_tensor_numel(tfm_params_find(p, "tgt_positions.weight")), 8 * 8);
    static const char *const names[4] = {"src_embedding_norm.weight", "decoder.norm.weight",
                                         "tgt_positions.weight",
                                         "decoder.layers.0.linear1.weight"};
    gradcheck_model(m, names);
    tfm_model_free(m);
}
END_TEST

/* T5 v1.1's gated feed-forward, linear2(gelu_tanh(linear1(x)) *
 * linear_up(x)), through the gradient: both input projections and the
 * output one. */
START_TEST(gradients_through_the_gated_feed_forward)
{
    tfm_model_options o;
    gradcheck_options(&o);
    o.gated_feed_forward = 1;
    o.activation = TFM_ACTIVATION_GELU_TANH;
    o.feed_forward_bias = 0;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    tfm_params *p = tfm_model_params(m);
    ck_assert_int_eq(tfm_tensor_numel(tfm_params_find(p, "decoder.layers.0.linear_up.weight")),
                     8 * 8);
    ck_assert_ptr_null(tfm_params_find(p, "decoder.layers.0.linear_up.bias"));
    static const char *const names[4] = {"encoder.layers.0.linear_up.weight",
                                         "decoder.layers.0.linear_up.weight",
                                         "decoder.layers.0.linear1.weight",
                                         "decoder.layers.0.linear2.weight"};
    gradcheck_model(m, names);
    tfm_model_free(m);
}
END_TEST

/* T5's attention: no absolute positions, a relative position bias per
 * stack added to unscaled scores, and the tied output rescaled by
 * d_model^-0.5, through the gradient. */
START_TEST(gradients_through_the_relative_position_bias)
{
    tfm_model_options o;
    gradcheck_options(&o);
    o.positions = TFM_POSITIONS_NONE;
    o.unscaled_attention = 1;
    o.relative_attention_buckets = 4;
    o.relative_attention_max_distance = 3;
    o.tie_generator = 1;
    o.generator_rescale = 1;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    tfm_params *p = tfm_model_params(m);
    ck_assert_ptr_null(tfm_params_find(p, "src_positions.weight"));
    ck_assert_int_eq(tfm_tensor_numel(tfm_params_find(p, "decoder.relative_attention_bias.weight")),
                     4 * o.heads);
    static const char *const names[4] = {"encoder.relative_attention_bias.weight",
                                         "decoder.relative_attention_bias.weight",
                                         "tgt_embedding.weight",
                                         "decoder.layers.0.self_attn.in_proj_weight"};
    gradcheck_model(m, names);
    tfm_model_free(m);
}
END_TEST

/* With no encoder layers and no final norm, encoding is the embedding
 * step alone: norm(E[id] * sqrt(d) + P[offset + t]) per row, in double. */
START_TEST(embedding_norm_after_offset_positions)
{
    enum { B = 2, S = 4, D = 8 };
    tfm_model_options o;
    gradcheck_options(&o);
    o.encoder_layers = 0;
    o.final_norm = 0;
    o.positions = TFM_POSITIONS_LEARNED;
    o.position_offset = 3;
    o.embedding_norm = 1;
    o.embedding_scale = TFM_EMBEDDING_SCALE_SQRT_D;
    o.layer_norm_eps = 1e-5f;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_ptr_nonnull(m);
    tfm_model_set_training(m, 0);
    tfm_params *p = tfm_model_params(m);
    float *gamma = tfm_tensor_data_f32(tfm_params_find(p, "src_embedding_norm.weight"));
    float *beta = tfm_tensor_data_f32(tfm_params_find(p, "src_embedding_norm.bias"));
    for (int j = 0; j < D; j++) {
        gamma[j] = 0.5f + 0.1f * (float)j;
        beta[j] = 0.05f * (float)(j - 3);
    }
    const float *table = tfm_tensor_data_f32(tfm_params_find(p, "src_embedding.weight"));
    const float *pos = tfm_tensor_data_f32(tfm_params_find(p, "src_positions.weight"));
    tfm_tensor *src = ids(B, S, 13, 4);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *memory = tfm_model_encode(tape, m, src, NULL, NULL);
    ck_assert_msg(memory != NULL, "%s", tfm_last_error());
    const float *got = tfm_tensor_data_f32(memory);
    const int32_t *id = tfm_tensor_data_i32(src);
    for (int r = 0; r < B * S; r++) {
        double x[D], mean = 0, var = 0;
        for (int j = 0; j < D; j++) {
            x[j] = table[id[r] * D + j] * sqrt((double)D) + pos[(3 + r % S) * D + j];
            mean += x[j] / D;
        }
        for (int j = 0; j < D; j++)
            var += (x[j] - mean) * (x[j] - mean) / D;
        for (int j = 0; j < D; j++) {
            double want = (x[j] - mean) / sqrt(var + 1e-5) * gamma[j] + beta[j];
            ck_assert_msg(fabs(got[r * D + j] - want) < 1e-5, "row %d col %d: %g, want %g", r,
                          j, (double)got[r * D + j], want);
        }
    }
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_model_free(m);
}
END_TEST

/* Sinusoidal tables in each layout, read from the offset's row: the
 * encoder's input is the table layer's own rows offset + t. */
START_TEST(sinusoidal_layouts_from_the_offset)
{
    enum { B = 1, S = 5, D = 8 };
    static const tfm_positions kinds[3] = {TFM_POSITIONS_SINUSOIDAL,
                                           TFM_POSITIONS_SINUSOIDAL_HALVES,
                                           TFM_POSITIONS_SINUSOIDAL_FAIRSEQ};
    static const tfm_sinusoid_layout layouts[3] = {
        TFM_SINUSOIDS_INTERLEAVED, TFM_SINUSOIDS_HALVES, TFM_SINUSOIDS_HALVES_FAIRSEQ};
    for (int k = 0; k < 3; k++) {
        tfm_model_options o;
        gradcheck_options(&o);
        o.encoder_layers = 0;
        o.final_norm = 0;
        o.positions = kinds[k];
        o.position_offset = 2;
        tfm_model *m = tfm_model_create(&o);
        ck_assert_ptr_nonnull(m);
        tfm_model_set_training(m, 0);
        tfm_layer *table = tfm_sinusoidal_positions_create_with_layout(16, D, layouts[k]);
        tfm_tensor *src = ids(B, S, 13, 2);
        tfm_tape *tape = tfm_tape_create();
        tfm_tensor *zeros = tfm_tensor_zeros(TFM_F32, 3, (const int64_t[]){B, S, D});
        const float *want = tfm_tensor_data_f32(tfm_positions_forward(tape, table, zeros, 2));
        const float *got = tfm_tensor_data_f32(tfm_model_encode(tape, m, src, NULL, NULL));
        const float *emb = tfm_tensor_data_f32(
            tfm_params_find(tfm_model_params(m), "src_embedding.weight"));
        const int32_t *id = tfm_tensor_data_i32(src);
        for (int r = 0; r < S; r++)
            for (int j = 0; j < D; j++)
                ck_assert_float_eq(got[r * D + j], emb[id[r] * D + j] + want[r * D + j]);
        tfm_tape_free(tape);
        tfm_tensor_free(zeros);
        tfm_tensor_free(src);
        tfm_layer_free(table);
        tfm_model_free(m);
    }
}
END_TEST

/* --- threads ----------------------------------------------------------------- */

/* Logits and every gradient of one training step (dropout on, the same
 * seed), sizes where layer norm and attention split their rows. */
static void training_step(int32_t threads, uint32_t recompute, float *logits_out,
                          float *grads_out)
{
    ck_assert_int_eq(tfm_set_num_threads(threads), TFM_OK);
    tfm_model_options o;
    small_options(&o);
    o.max_src_len = o.max_tgt_len = 64;
    o.d_model = 128;
    o.heads = 4;
    o.d_ff = 64;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(tfm_model_set_recompute(m, recompute), TFM_OK);
    int32_t src_ids[4 * 64], tgt_ids[4 * 64];
    for (int i = 0; i < 4 * 64; i++) {
        src_ids[i] = 1 + (i * 7) % 12;
        tgt_ids[i] = 1 + (i * 5) % 10;
    }
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){4, 64}, src_ids);
    tfm_tensor *tgt = tfm_tensor_from_i32(2, (const int64_t[]){4, 64}, tgt_ids);
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *logits = tfm_model_forward(tape, m, src, tgt, NULL,
                                           tfm_mask_causal(tape, 64, TFM_F32), NULL, NULL, NULL, NULL);
    ck_assert_int_eq(tfm_tensor_read_f32(logits, logits_out, 4 * 64 * 11), TFM_OK);
    ck_assert_int_eq(tfm_tape_backward(tape, tfm_cross_entropy(tape, logits, tgt, 0, 0.0f)),
                     TFM_OK);
    tfm_params *p = tfm_model_params(m);
    ck_assert_int_le(tfm_params_numel(p), 1 << 20);
    memcpy(grads_out, tfm_params_grads(p), (size_t)tfm_params_numel(p) * sizeof(float));
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_model_free(m);
    ck_assert_int_eq(tfm_set_num_threads(1), TFM_OK);
}

/* Rows, heads and matrix products (along C's rows: lib/core/gemm.c) are
 * split, never a sum: the same bits on 1, 2 and 3 threads, with the BLAS
 * on one thread at one libtfm thread (meson sets OPENBLAS_NUM_THREADS=1);
 * and with the attention weights and feed-forward hidden layers recomputed
 * in the backward. */
enum { RECOMPUTE_ALL = TFM_RECOMPUTE_ATTENTION_WEIGHTS | TFM_RECOMPUTE_FEED_FORWARD_HIDDEN };
START_TEST(threads_give_the_same_step)
{
    enum { LOGITS = 4 * 64 * 11, GRADS = 1 << 20 };
    float *l1 = malloc(LOGITS * sizeof(float)), *ln = malloc(LOGITS * sizeof(float));
    float *g1 = calloc(GRADS, sizeof(float)), *gn = calloc(GRADS, sizeof(float));
    training_step(1, 0, l1, g1);
    for (int32_t threads = 1; threads <= 3; threads++) {
        training_step(threads, threads == 1 ? RECOMPUTE_ALL : 0, ln, gn);
        ck_assert_mem_eq(l1, ln, LOGITS * sizeof(float));
        ck_assert_mem_eq(g1, gn, GRADS * sizeof(float));
    }
    training_step(2, TFM_RECOMPUTE_ATTENTION_WEIGHTS, ln, gn);
    ck_assert_mem_eq(g1, gn, GRADS * sizeof(float));
    training_step(2, TFM_RECOMPUTE_FEED_FORWARD_HIDDEN, ln, gn);
    ck_assert_mem_eq(l1, ln, LOGITS * sizeof(float));
    ck_assert_mem_eq(g1, gn, GRADS * sizeof(float));
    ck_assert_int_eq(tfm_model_set_recompute(NULL, 0), TFM_ERR_NULL);
    tfm_model_options o;
    small_options(&o);
    tfm_model *m = tfm_model_create(&o);
    ck_assert_int_eq(tfm_model_set_recompute(m, RECOMPUTE_ALL | 16), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "TFM_RECOMPUTE_"));
    tfm_model_free(m);
    free(l1);
    free(ln);
    free(g1);
    free(gn);
}
END_TEST

/* --- checkpoints ----------------------------------------------------------- */

static char checkpoint_dir[64];

static void make_dir(void)
{
    strcpy(checkpoint_dir, "/tmp/tfm-model-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(checkpoint_dir));
}

static void eval_logits(tfm_model *m, float *out, int64_t n)
{
    tfm_tensor *src = ids(2, 5, 13, 1), *tgt = ids(2, 4, 11, 3);
    tfm_tape *tape = tfm_tape_create();
    tfm_model_set_training(m, 0);
    tfm_tensor *logits = tfm_model_forward(tape, m, src, tgt, NULL, tfm_mask_causal(tape, 4, TFM_F32), NULL, NULL, NULL, NULL);
    ck_assert_int_eq(tfm_tensor_read_f32(logits, out, n), TFM_OK);
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    return size;
}

START_TEST(checkpoint_reloads_bit_identically)
{
    make_dir();
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", checkpoint_dir);
    tfm_model_options o;
    small_options(&o);
    tfm_model *trained = tfm_model_create(&o);
    ck_assert_int_eq(tfm_params_save(tfm_model_params(trained), path), TFM_OK);
    o.seed = 99; /* different initial weights */
    tfm_model *fresh = tfm_model_create(&o);
    float a[88], b[88];
    eval_logits(trained, a, 88);
    eval_logits(fresh, b, 88);
    ck_assert(memcmp(a, b, sizeof a) != 0);
    ck_assert_int_eq(tfm_params_load(tfm_model_params(fresh), path), TFM_OK);
    eval_logits(fresh, b, 88);
    ck_assert_mem_eq(a, b, sizeof a);
    tfm_model_free(trained);
    tfm_model_free(fresh);
    unlink(path);
    rmdir(checkpoint_dir);
}
END_TEST

START_TEST(damaged_checkpoints_are_rejected)
{
    make_dir();
    char path[128], damaged[160];
    snprintf(path, sizeof path, "%s/model.safetensors", checkpoint_dir);
    snprintf(damaged, sizeof damaged, "%s/damaged.safetensors", checkpoint_dir);
    tfm_model_options o;
    small_options(&o);
    tfm_model *m = tfm_model_create(&o);
    ck_assert_int_eq(tfm_params_save(tfm_model_params(m), path), TFM_OK);
    float before[88], after[88];
    eval_logits(m, before, 88);
    long size = file_size(path);
    unsigned char *bytes = malloc((size_t)size);
    FILE *f = fopen(path, "rb");
    ck_assert_int_eq(fread(bytes, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    /* truncated */
    f = fopen(damaged, "wb");
    fwrite(bytes, 1, (size_t)size - 100, f);
    fclose(f);
    ck_assert_int_ne(tfm_params_load(tfm_model_params(m), damaged), TFM_OK);
    eval_logits(m, after, 88); /* a failed load changes nothing */
    ck_assert_mem_eq(before, after, sizeof before);
    /* a flipped bit in the header's digits or braces */
    for (long i = 8; i < 200; i += 13) {
        bytes[i] ^= 0x10;
        f = fopen(damaged, "wb");
        fwrite(bytes, 1, (size_t)size, f);
        fclose(f);
        bytes[i] ^= 0x10;
        tfm_status s = tfm_params_load(tfm_model_params(m), damaged);
        ck_assert_msg(s == TFM_OK || s == TFM_ERR_FORMAT || s == TFM_ERR_ARG || s == TFM_ERR_SHAPE,
                      "byte %ld: %s", i, tfm_last_error());
    }
    /* a model of another shape */
    tfm_model_options other;
    small_options(&other);
    other.d_ff = 48;
    tfm_model *wrong = tfm_model_create(&other);
    ck_assert_int_ne(tfm_params_load(tfm_model_params(wrong), path), TFM_OK);
    /* the good file still loads */
    ck_assert_int_eq(tfm_params_load(tfm_model_params(m), path), TFM_OK);
    eval_logits(m, after, 88);
    ck_assert_mem_eq(before, after, sizeof before);
    free(bytes);
    tfm_model_free(m);
    tfm_model_free(wrong);
    unlink(path);
    unlink(damaged);
    rmdir(checkpoint_dir);
}
END_TEST

/* tie_generator: the generator's weight is the target embedding table, one
 * parameter fewer, its gradient the sum of both uses (finite differences),
 * and the model saves and loads back with it. */
START_TEST(tied_generator_shares_the_target_embedding)
{
    tfm_model_options o;
    gradcheck_options(&o);
    tfm_model *untied = tfm_model_create(&o);
    o.tie_generator = 1;
    model_ctx c = {tfm_model_create(&o), ids(2, 4, 13, 1), ids(2, 3, 11, 2), ids(2, 3, 11, 5)};
    ck_assert_msg(c.model != NULL, "%s", tfm_last_error());
    tfm_params *p = tfm_model_params(c.model);
    ck_assert_int_eq(tfm_model_parameter_count(untied) - tfm_model_parameter_count(c.model),
                     11 * 8); /* tgt_vocab x d_model */
    ck_assert_ptr_null(tfm_params_find(p, "generator.weight"));
    tfm_clear_error();
    ck_assert_ptr_nonnull(tfm_params_find(p, "generator.bias"));

    /* the table's gradient: its lookups and the logits' projection */
    tfm_model_set_training(c.model, 0);
    tfm_tensor *checked[2] = {tfm_params_find(p, "tgt_embedding.weight"),
                              tfm_params_find(p, "generator.bias")};
    ck_assert_gradcheck(model_loss, &c, checked, 2);

    /* saved and loaded back, tied */
    make_dir();
    char path[128];
    snprintf(path, sizeof path, "%s/tied.safetensors", checkpoint_dir);
    ck_assert_int_eq(tfm_model_save(c.model, path), TFM_OK);
    tfm_model *loaded = tfm_model_load(path);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    tfm_model_options back;
    tfm_model_options_init(&back);
    tfm_model_get_options(loaded, &back);
    ck_assert_int_eq(back.tie_generator, 1);
    ck_assert_int_eq(tfm_model_parameter_count(loaded), tfm_model_parameter_count(c.model));
    float a[88], b[88];
    eval_logits(c.model, a, 88);
    eval_logits(loaded, b, 88);
    ck_assert_mem_eq(a, b, sizeof a);
    tfm_model_free(loaded);
    unlink(path);
    rmdir(checkpoint_dir);

    /* with shared embeddings, the one table serves all three uses */
    o.share_embeddings = 1;
    o.tgt_vocab = o.src_vocab;
    tfm_model *shared = tfm_model_create(&o);
    ck_assert_msg(shared != NULL, "%s", tfm_last_error());
    ck_assert_ptr_null(tfm_params_find(tfm_model_params(shared), "tgt_embedding.weight"));
    tfm_clear_error();
    tfm_model_free(shared);
    o.tie_generator = 2;
    ck_assert_ptr_null(tfm_model_create(&o));
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "options.tie_generator 2 is outside [0, 1]"));

    tfm_tensor_free(c.src);
    tfm_tensor_free(c.tgt);
    tfm_tensor_free(c.targets);
    tfm_model_free(c.model);
    tfm_model_free(untied);
}
END_TEST

static Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, names_follow_nn_transformer);
    tcase_add_test(tc, tutorial_003_options);
    tcase_add_test(tc, bad_options);
    tcase_add_test(tc, forward_shapes_and_modes);
    tcase_add_test(tc, masks_are_read_as_declared);
    tcase_add_test(tc, a_source_of_padding_only);
    tcase_add_test(tc, gradients_through_the_model);
    tcase_add_test(tc, gradients_through_the_published_pieces);
    tcase_add_test(tc, gradients_through_the_gated_feed_forward);
    tcase_add_test(tc, gradients_through_the_relative_position_bias);
    tcase_add_test(tc, embedding_norm_after_offset_positions);
    tcase_add_test(tc, sinusoidal_layouts_from_the_offset);
    tcase_add_test(tc, threads_give_the_same_step);
    tcase_add_test(tc, checkpoint_reloads_bit_identically);
    tcase_add_test(tc, damaged_checkpoints_are_rejected);
    tcase_add_test(tc, shards_draw_the_whole_batchs_dropout);
    tcase_add_test(tc, options_as_text);
    tcase_add_test(tc, tied_generator_shares_the_target_embedding);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(model_suite)
