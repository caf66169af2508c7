/* Bad input across the API: a clear status and message, no crash, no leak
 * (the sanitizer and valgrind runs of this suite check the last part). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include <tfm/tfm.h>

#define ck_assert_error(status, fragment)                                      \
    do {                                                                       \
        ck_assert_int_eq(tfm_last_status(), (status));                         \
        ck_assert_msg(strstr(tfm_last_error(), (fragment)) != NULL,            \
                      "message \"%s\" lacks \"%s\"", tfm_last_error(),         \
                      (fragment));                                             \
    } while (0)

/* A library layered on libtfm reports through the same error state. */
START_TEST(layered_libraries_report_errors)
{
    ck_assert_int_eq(tfm_report_error(TFM_ERR_IO, "libtfm_mpi: rank 1 is gone"), TFM_ERR_IO);
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_IO);
    ck_assert_str_eq(tfm_last_error(), "libtfm_mpi: rank 1 is gone");
    ck_assert_int_eq(tfm_report_error(TFM_ERR_ARG, NULL), TFM_ERR_ARG);
    ck_assert_str_eq(tfm_last_error(), "");
    ck_assert_int_eq(tfm_report_error(TFM_OK, "ignored"), TFM_OK);
    ck_assert_int_eq(tfm_last_status(), TFM_OK);
    ck_assert_str_eq(tfm_last_error(), "");
}
END_TEST

START_TEST(null_handles)
{
    tfm_clear_error();
    ck_assert_str_eq(tfm_last_error(), "");
    ck_assert_int_eq(tfm_tape_backward(NULL, NULL), TFM_ERR_NULL);
    ck_assert_error(TFM_ERR_NULL, "tape is NULL");
    ck_assert_int_eq(tfm_tape_reset(NULL), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tape_set_recording(NULL, 1), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tensor_numel(NULL), -1);
    ck_assert_int_eq(tfm_tensor_ndim(NULL), 0);
    ck_assert_int_eq(tfm_tensor_dim(NULL, 0), -1);
    ck_assert_int_eq(tfm_tensor_shape(NULL, NULL), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tensor_read_f32(NULL, NULL, 0), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tensor_set_requires_grad(NULL, 1), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_tensor_zero_grad(NULL), TFM_ERR_NULL);
    ck_assert_ptr_null(tfm_tensor_grad_f32(NULL));
    ck_assert_ptr_null(tfm_tensor_from_f32(1, (const int64_t[]){2}, NULL));
    ck_assert_error(TFM_ERR_NULL, "values is NULL");
    ck_assert_ptr_null(tfm_tensor_normal(1, (const int64_t[]){2}, 0, 1, NULL));
    ck_assert_error(TFM_ERR_NULL, "rng is NULL");
    tfm_tensor_free(NULL);
    tfm_tape_free(NULL);
    tfm_rng_free(NULL);
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_matmul(NULL, NULL, NULL, 0, 0));
    tfm_clear_error();
    tfm_tensor *x = tfm_tensor_ones(1, (const int64_t[]){2});
    ck_assert_ptr_null(tfm_relu(NULL, x));
    ck_assert_error(TFM_ERR_NULL, "tape is NULL");
    tfm_tensor_free(x);
    tfm_tape_free(tape);
}
END_TEST

START_TEST(absurd_and_invalid_shapes)
{
    ck_assert_ptr_null(tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){INT64_MAX, 4}));
    ck_assert_error(TFM_ERR_SIZE, "absurdly large");
    ck_assert_ptr_null(tfm_tensor_zeros(TFM_F32, 4,
                                        (const int64_t[]){1 << 20, 1 << 20, 1 << 20, 1 << 20}));
    ck_assert_error(TFM_ERR_SIZE, "absurdly large");
    ck_assert_ptr_null(tfm_tensor_zeros(TFM_F32, 5, (const int64_t[]){1, 1, 1, 1, 1}));
    ck_assert_error(TFM_ERR_ARG, "ndim 5");
    ck_assert_ptr_null(tfm_tensor_zeros(TFM_F32, 0, (const int64_t[]){1}));
    ck_assert_error(TFM_ERR_ARG, "ndim 0");
    ck_assert_ptr_null(tfm_tensor_ones(2, (const int64_t[]){3, -2}));
    ck_assert_error(TFM_ERR_SHAPE, "not positive");
    ck_assert_ptr_null(tfm_tensor_zeros(7, 1, (const int64_t[]){3}));
    ck_assert_error(TFM_ERR_DTYPE, "unknown dtype");
    tfm_rng *rng = tfm_rng_create(1);
    ck_assert_ptr_null(tfm_tensor_uniform(1, (const int64_t[]){3}, 2.0f, 1.0f, rng));
    ck_assert_error(TFM_ERR_ARG, "bounds [2, 1] must be finite and ordered");
    tfm_rng_free(rng);
    tfm_tensor *t = tfm_tensor_ones(2, (const int64_t[]){2, 3});
    ck_assert_int_eq(tfm_tensor_dim(t, 2), -1);
    ck_assert_error(TFM_ERR_ARG, "axis 2");
    ck_assert_int_eq(tfm_tensor_dim(t, -3), -1);
    tfm_tensor_free(t);
}
END_TEST

START_TEST(shape_mismatch)
{
    tfm_tensor *a = tfm_tensor_ones(2, (const int64_t[]){2, 3});
    tfm_tensor *b = tfm_tensor_ones(2, (const int64_t[]){4, 5});
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_matmul(tape, a, b, 0, 0));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[2,3]"));
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "[4,5]"));
    ck_assert_ptr_null(tfm_add(tape, a, b));
    ck_assert_error(TFM_ERR_SHAPE, "do not broadcast");
    tfm_tape_free(tape);
    tfm_tensor_free(a);
    tfm_tensor_free(b);
}
END_TEST

START_TEST(token_id_out_of_range)
{
    tfm_tensor *table = tfm_tensor_ones(2, (const int64_t[]){5, 4});
    const int32_t ids[3] = {1, 5, 2};
    tfm_tensor *tokens = tfm_tensor_from_i32(1, (const int64_t[]){3}, ids);
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_embedding(tape, table, tokens));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_RANGE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "5"));
    const int32_t targets[1] = {-3};
    tfm_tensor *target = tfm_tensor_from_i32(1, (const int64_t[]){1}, targets);
    tfm_tensor *logits = tfm_tensor_ones(2, (const int64_t[]){1, 4});
    ck_assert_ptr_null(tfm_cross_entropy(tape, logits, target, -100, 0.0f));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_RANGE);
    tfm_tape_free(tape);
    tfm_tensor_free(table);
    tfm_tensor_free(tokens);
    tfm_tensor_free(target);
    tfm_tensor_free(logits);
}
END_TEST

START_TEST(wrong_dtype)
{
    tfm_tensor *ids = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){2, 2});
    tfm_tape *tape = tfm_tape_create();
    ck_assert_ptr_null(tfm_relu(tape, ids));
    ck_assert_error(TFM_ERR_DTYPE, "float32");
    ck_assert_ptr_null(tfm_embedding(tape, ids, ids));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_DTYPE);
    tfm_tape_free(tape);
    tfm_tensor_free(ids);
}
END_TEST

/* A chain with a failure in the middle: every later op returns NULL and the
 * message still names the first cause. */
START_TEST(a_failed_chain_keeps_the_first_cause)
{
    tfm_tensor *a = tfm_tensor_ones(2, (const int64_t[]){2, 3});
    tfm_tensor *w = tfm_tensor_ones(2, (const int64_t[]){4, 3});
    tfm_tape *tape = tfm_tape_create();
    tfm_clear_error();
    tfm_tensor *h = tfm_matmul(tape, a, w, 0, 0); /* should have been transpose_b */
    tfm_tensor *y = tfm_relu(tape, h);
    tfm_tensor *loss = tfm_mean(tape, tfm_tanh(tape, y));
    ck_assert_ptr_null(loss);
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_SHAPE);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_matmul"));
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_ERR_NULL);
    /* without a pending error, a NULL input is itself the error */
    tfm_clear_error();
    ck_assert_ptr_null(tfm_relu(tape, NULL));
    ck_assert_error(TFM_ERR_NULL, "tfm_relu");
    tfm_tape_free(tape);
    tfm_tensor_free(a);
    tfm_tensor_free(w);
}
END_TEST

/* The last call refused a stale tensor, naming itself. */
static void expect_stale(const char *call)
{
    char prefix[96];
    snprintf(prefix, sizeof prefix, "%s: ", call);
    ck_assert_msg(tfm_last_status() == TFM_ERR_STATE &&
                      strncmp(tfm_last_error(), prefix, strlen(prefix)) == 0 &&
                      strstr(tfm_last_error(), "tfm_tape_reset"),
                  "%s: status %s, message \"%s\"", call, tfm_status_name(tfm_last_status()),
                  tfm_last_error());
    tfm_clear_error();
}

#define STALE(call, expr)     \
    do {                      \
        tfm_clear_error();    \
        (void)(expr);         \
        expect_stale(call);   \
    } while (0)

/* Every call of the API that takes a tensor refuses one made before its
 * tape's last reset, in the caller's name, before reading anything else of
 * it. */
START_TEST(every_call_refuses_a_stale_tensor)
{
    enum { B = 2, T = 3, D = 4, V = 5 };
    tfm_rng *rng = tfm_rng_create(1);
    tfm_params *p = tfm_params_create();
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *fx = tfm_tensor_normal(3, (const int64_t[]){B, T, D}, 0, 1, rng);
    tfm_tensor *fw = tfm_tensor_normal(2, (const int64_t[]){D, D}, 0, 1, rng);
    tfm_tensor *fid = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){B, T});
    tfm_tensor *fkeep = tfm_tensor_zeros(TFM_I32, 2, (const int64_t[]){T, T});
    /* the stale ones: made, then their tape reset */
    tfm_tensor *sx = tfm_scale(tape, fx, 1.0f), *s1 = tfm_sum(tape, fx);
    tfm_tensor *sid = tfm_reshape(tape, fid, 2, (const int64_t[]){B, T});
    tfm_tensor *skeep = tfm_mask_causal(tape, T, TFM_I32);
    tfm_tensor *spad = tfm_reshape(tape, fid, 2, (const int64_t[]){B, T});
    ck_assert(sx && s1 && sid && skeep && spad);
    ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);

    float f[64];
    int32_t i32[64];
    int64_t shape[TFM_MAX_DIMS];
    STALE("tfm_tensor_dtype", tfm_tensor_dtype(sx));
    STALE("tfm_tensor_ndim", tfm_tensor_ndim(sx));
    STALE("tfm_tensor_dim", tfm_tensor_dim(sx, 0));
    STALE("tfm_tensor_numel", tfm_tensor_numel(sx));
    STALE("tfm_tensor_shape", tfm_tensor_shape(sx, shape));
    STALE("tfm_tensor_read_f32", tfm_tensor_read_f32(sx, f, B * T * D));
    STALE("tfm_tensor_write_f32", tfm_tensor_write_f32(sx, f, B * T * D));
    STALE("tfm_tensor_read_i32", tfm_tensor_read_i32(sid, i32, B * T));
    STALE("tfm_tensor_write_i32", tfm_tensor_write_i32(sid, i32, B * T));
    STALE("tfm_tensor_item", tfm_tensor_item(s1, f));
    STALE("tfm_tensor_data_f32", tfm_tensor_data_f32(sx));
    STALE("tfm_tensor_data_i32", tfm_tensor_data_i32(sid));
    STALE("tfm_tensor_set_requires_grad", tfm_tensor_set_requires_grad(sx, 1));
    STALE("tfm_tensor_requires_grad", tfm_tensor_requires_grad(sx));
    STALE("tfm_tensor_read_grad", tfm_tensor_read_grad(sx, f, B * T * D));
    STALE("tfm_tensor_grad_f32", tfm_tensor_grad_f32(sx));
    STALE("tfm_tensor_zero_grad", tfm_tensor_zero_grad(sx));
    STALE("tfm_tensor_clone", tfm_tensor_clone(sx));
    STALE("tfm_tape_backward", tfm_tape_backward(tape, s1));
    STALE("tfm_tape_backward_with_grad", tfm_tape_backward_with_grad(tape, sx, f, B * T * D));

    STALE("tfm_matmul", tfm_matmul(tape, sx, fw, 0, 1));
    STALE("tfm_linear", tfm_linear(tape, sx, fw, NULL));
    STALE("tfm_linear_relu", tfm_linear_relu(tape, fx, fw, s1));
    STALE("tfm_linear_relu_dropout", tfm_linear_relu_dropout(tape, sx, fw, NULL, 0.5f, 1, rng));
    STALE("tfm_add", tfm_add(tape, fx, sx));
    STALE("tfm_sub", tfm_sub(tape, sx, fx));
    STALE("tfm_mul", tfm_mul(tape, sx, fx));
    STALE("tfm_scale", tfm_scale(tape, sx, 2.0f));
    STALE("tfm_masked_fill", tfm_masked_fill(tape, fx, skeep, 0.0f));
    STALE("tfm_relu", tfm_relu(tape, sx));
    STALE("tfm_gelu", tfm_gelu(tape, sx));
    STALE("tfm_tanh", tfm_tanh(tape, sx));
    STALE("tfm_reshape", tfm_reshape(tape, sx, 1, (const int64_t[]){-1}));
    STALE("tfm_transpose", tfm_transpose(tape, sx, 0, 1));
    STALE("tfm_split_heads", tfm_split_heads(tape, sx, 2));
    STALE("tfm_merge_heads", tfm_merge_heads(tape, sx));
    STALE("tfm_concat", tfm_concat(tape, (const tfm_tensor *[]){fx, sx}, 2, 0));
    STALE("tfm_softmax", tfm_softmax(tape, fx, skeep));
    STALE("tfm_log_softmax", tfm_log_softmax(tape, sx));
    STALE("tfm_layer_norm", tfm_layer_norm(tape, fx, s1, NULL, 1e-5f));
    STALE("tfm_dropout", tfm_dropout(tape, sx, 0.5f, 1, rng));
    STALE("tfm_embedding", tfm_embedding(tape, fw, sid));
    STALE("tfm_sum", tfm_sum(tape, sx));
    STALE("tfm_mean", tfm_mean(tape, sx));
    STALE("tfm_cross_entropy", tfm_cross_entropy(tape, fx, sid, -1, 0.0f));

    tfm_layer *linear = tfm_linear_create(p, "linear", D, D, 1, rng);
    tfm_layer *embedding = tfm_embedding_create(p, "embedding", V, D, rng);
    tfm_layer *norm = tfm_layer_norm_create(p, "norm", D, 1e-5f);
    tfm_layer *dropout = tfm_dropout_create(0.1f, rng);
    tfm_layer *ff = tfm_feed_forward_create(p, "ff", D, 8, TFM_ACTIVATION_RELU, 0.1f, rng);
    tfm_layer *positions = tfm_sinusoidal_positions_create(8, D);
    tfm_attention_options ao;
    tfm_attention_options_init(&ao);
    ao.d_model = D;
    ao.heads = 2;
    tfm_layer *attention = tfm_attention_create(p, "attention", &ao, rng);
    tfm_block_options bo;
    tfm_block_options_init(&bo);
    bo.d_model = D;
    bo.heads = 2;
    bo.d_ff = 8;
    tfm_layer *enc_layer = tfm_encoder_layer_create(p, "el", &bo, rng);
    tfm_layer *dec_layer = tfm_decoder_layer_create(p, "dl", &bo, rng);
    tfm_layer *enc = tfm_encoder_create(p, "e", 1, &bo, 1, rng);
    tfm_layer *dec = tfm_decoder_create(p, "d", 1, &bo, 1, rng);
    ck_assert(linear && embedding && norm && dropout && ff && positions && attention &&
              enc_layer && dec_layer && enc && dec);
    STALE("tfm_linear_forward", tfm_linear_forward(tape, linear, sx));
    STALE("tfm_embedding_forward", tfm_embedding_forward(tape, embedding, sid));
    STALE("tfm_layer_norm_forward", tfm_layer_norm_forward(tape, norm, sx));
    STALE("tfm_dropout_forward", tfm_dropout_forward(tape, dropout, sx));
    STALE("tfm_feed_forward_forward", tfm_feed_forward_forward(tape, ff, sx));
    STALE("tfm_positions_forward", tfm_positions_forward(tape, positions, sx, 0));
    STALE("tfm_attention_forward", tfm_attention_forward(tape, attention, sx, fx, NULL, NULL, NULL));
    STALE("tfm_attention_forward", tfm_attention_forward(tape, attention, fx, fx, skeep, NULL, NULL));
    STALE("tfm_attention_forward", tfm_attention_forward(tape, attention, fx, fx, NULL, spad, NULL));
    STALE("tfm_encoder_layer_forward", tfm_encoder_layer_forward(tape, enc_layer, sx, NULL, NULL));
    STALE("tfm_encoder_layer_forward",
          tfm_encoder_layer_forward(tape, enc_layer, fx, skeep, NULL));
    STALE("tfm_decoder_layer_forward",
          tfm_decoder_layer_forward(tape, dec_layer, fx, sx, NULL, NULL, NULL, NULL));
    STALE("tfm_decoder_layer_forward",
          tfm_decoder_layer_forward(tape, dec_layer, fx, fx, fkeep, NULL, NULL, spad));
    STALE("tfm_encoder_forward", tfm_encoder_forward(tape, enc, fx, NULL, spad));
    STALE("tfm_decoder_forward", tfm_decoder_forward(tape, dec, fx, fx, skeep, NULL, NULL, NULL));
    STALE("tfm_mask_padding", tfm_mask_padding(tape, sid, 0, TFM_I32));
    STALE("tfm_mask_combine", tfm_mask_combine(tape, fkeep, skeep));
    STALE("tfm_init_uniform", tfm_init_uniform(sx, 0.0f, 1.0f, rng));
    STALE("tfm_init_normal", tfm_init_normal(sx, 0.0f, 1.0f, rng));
    STALE("tfm_init_xavier_uniform", tfm_init_xavier_uniform(sx, 1.0f, rng));
    STALE("tfm_safetensors_write",
          tfm_safetensors_write("/nonexistent/never.safetensors", 1, (const char *[]){"x"},
                                (const tfm_tensor *[]){sx}));

    tfm_model_options mo;
    tfm_model_options_init(&mo);
    mo.src_vocab = mo.tgt_vocab = V;
    mo.max_src_len = mo.max_tgt_len = 8;
    mo.encoder_layers = mo.decoder_layers = 1;
    mo.d_model = bo.d_model;
    mo.heads = bo.heads;
    mo.d_ff = bo.d_ff;
    tfm_model *model = tfm_model_create(&mo);
    tfm_decode_options dop;
    tfm_decode_options_init(&dop);
    dop.max_length = 4;
    tfm_decoding *decoding = tfm_decoding_create(model, &dop, B, T);
    ck_assert(model && decoding);
    tfm_tensor *memory = tfm_model_encode(tape, model, fid, NULL, NULL);
    ck_assert_ptr_nonnull(memory);
    STALE("tfm_model_encode", tfm_model_encode(tape, model, sid, NULL, NULL));
    STALE("tfm_model_decode", tfm_model_decode(tape, model, fid, memory, skeep, NULL, NULL, NULL));
    STALE("tfm_model_forward",
          tfm_model_forward(tape, model, fid, fid, NULL, NULL, NULL, NULL, spad, NULL));
    STALE("tfm_decoding_run", tfm_decoding_run(decoding, sid, i32, 64, i32, 64, NULL, 0, NULL, 0,
                                               NULL, 0));

    tfm_decoding_free(decoding);
    tfm_model_free(model);
    tfm_layer *layers[] = {linear, embedding, norm, dropout, ff, positions, attention,
                           enc_layer, dec_layer, enc, dec};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        tfm_layer_free(layers[i]);
    tfm_tape_free(tape);
    tfm_tensor_free(fx);
    tfm_tensor_free(fw);
    tfm_tensor_free(fid);
    tfm_tensor_free(fkeep);
    tfm_params_free(p);
    tfm_rng_free(rng);
}
END_TEST

static Suite *errors_suite(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, null_handles);
    tcase_add_test(tc, layered_libraries_report_errors);
    tcase_add_test(tc, absurd_and_invalid_shapes);
    tcase_add_test(tc, shape_mismatch);
    tcase_add_test(tc, token_id_out_of_range);
    tcase_add_test(tc, wrong_dtype);
    tcase_add_test(tc, a_failed_chain_keeps_the_first_cause);
    tcase_add_test(tc, every_call_refuses_a_stale_tensor);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(errors_suite)
