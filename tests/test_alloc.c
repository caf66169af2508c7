/* In a steady-state training step libtfm makes no malloc calls: calls made
 * from libtfm's own code are counted (alloc_counter.c) while steps run. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_counter.h"
#include "check_main.h"
#include <tfm/tfm.h>

/* One step of a small attention-shaped network touching every op family:
 * embedding, matmul, heads, softmax with a mask, layer norm, dropout,
 * activations, concat, cross-entropy; then backward and reset. */
typedef struct net {
    tfm_tensor *table, *w_qkv, *w_out, *ln_w, *ln_b, *ids, *targets, *keep;
    tfm_rng *rng;
} net;

static void step(tfm_tape *tape, net *n)
{
    tfm_tensor *x = tfm_embedding(tape, n->table, n->ids);          /* [2,5,8] */
    tfm_tensor *qkv = tfm_matmul(tape, x, n->w_qkv, 0, 1);           /* [2,5,24] */
    tfm_tensor *q = tfm_split_heads(tape, tfm_reshape(tape, qkv, 3, (const int64_t[]){2, 5, 24}), 6);
    tfm_tensor *qt = tfm_transpose(tape, q, 2, 3);
    tfm_tensor *scores = tfm_scale(tape, tfm_matmul(tape, q, q, 0, 1), 0.5f);
    tfm_tensor *attn = tfm_softmax(tape, scores, n->keep);
    tfm_tensor *ctx = tfm_merge_heads(tape, tfm_matmul(tape, attn, q, 0, 0));
    tfm_tensor *both = tfm_concat(tape, (const tfm_tensor *[]){ctx, ctx}, 2, -1);
    tfm_tensor *h = tfm_gelu(tape, tfm_matmul(tape, both, n->w_out, 0, 0)); /* [2,5,8] */
    h = tfm_dropout(tape, tfm_add(tape, tfm_relu(tape, h), tfm_tanh(tape, x)), 0.1f, 1, n->rng);
    h = tfm_layer_norm(tape, h, n->ln_w, n->ln_b, 1e-5f);
    tfm_tensor *logits = tfm_matmul(tape, h, n->table, 0, 1);        /* [2,5,11] */
    tfm_tensor *loss = tfm_add(tape, tfm_cross_entropy(tape, logits, n->targets, 0, 0.1f),
                               tfm_mean(tape, tfm_log_softmax(tape, tfm_sum(tape, qt))));
    ck_assert_msg(loss != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
    ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
}

START_TEST(steady_state_step_does_not_allocate)
{
    net n;
    n.rng = tfm_rng_create(3);
    n.table = tfm_tensor_normal(2, (const int64_t[]){11, 8}, 0, 1, n.rng);
    n.w_qkv = tfm_tensor_normal(2, (const int64_t[]){24, 8}, 0, 0.3f, n.rng);
    n.w_out = tfm_tensor_normal(2, (const int64_t[]){48, 8}, 0, 0.3f, n.rng);
    n.ln_w = tfm_tensor_ones(1, (const int64_t[]){8});
    n.ln_b = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){8});
    const int32_t ids[10] = {1, 4, 5, 9, 0, 2, 3, 10, 7, 0};
    n.ids = tfm_tensor_from_i32(2, (const int64_t[]){2, 5}, ids);
    n.targets = tfm_tensor_from_i32(2, (const int64_t[]){2, 5}, ids);
    const int32_t keep[5] = {1, 1, 1, 1, 0};
    n.keep = tfm_tensor_from_i32(4, (const int64_t[]){1, 1, 1, 5}, keep);
    tfm_tensor *params[5] = {n.table, n.w_qkv, n.w_out, n.ln_w, n.ln_b};
    for (int i = 0; i < 5; i++)
        tfm_tensor_set_requires_grad(params[i], 1);
    ck_assert_int_eq(alloc_counter_init(), 0);
    tfm_tape *tape = tfm_tape_create();
    for (int i = 0; i < 3; i++) /* warm-up: the arena finds its size */
        step(tape, &n);
    long before = alloc_counter_libtfm();
    for (int i = 0; i < 20; i++)
        step(tape, &n);
    /* valgrind replaces malloc where the counter would see it: under
     * memcheck the steps run, uncounted */
    const char *preload = getenv("LD_PRELOAD");
    if (!(preload && strstr(preload, "vgpreload"))) {
        ck_assert_int_eq(alloc_counter_libtfm() - before, 0);
        ck_assert_int_gt(before, 0); /* the counter does see libtfm's allocations */
    }
    tfm_tape_free(tape);
    for (int i = 0; i < 5; i++)
        tfm_tensor_free(params[i]);
    tfm_tensor_free(n.ids);
    tfm_tensor_free(n.targets);
    tfm_tensor_free(n.keep);
    tfm_rng_free(n.rng);
}
END_TEST

/* Decoding a batch again allocates nothing: every buffer is made at create. */
START_TEST(steady_state_decoding_does_not_allocate)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = 13;
    o.tgt_vocab = 11;
    o.max_src_len = 8;
    o.max_tgt_len = 10;
    o.encoder_layers = 1;
    o.decoder_layers = 2;
    o.d_model = 16;
    o.heads = 2;
    o.d_ff = 32;
    tfm_model *model = tfm_model_create(&o);
    ck_assert_ptr_nonnull(model);
    const int32_t ids[12] = {1, 4, 5, 9, 3, 0, 2, 3, 10, 7, 8, 6};
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){2, 6}, ids);
    ck_assert_int_eq(alloc_counter_init(), 0);
    int32_t tokens[2 * 4 * 10], lengths[8];
    float scores[8];
    for (tfm_decode_strategy strategy = TFM_DECODE_GREEDY; strategy <= TFM_DECODE_BEAM;
         strategy++) {
        tfm_decode_options d;
        tfm_decode_options_init(&d);
        d.strategy = strategy;
        d.max_length = 9;
        d.src_pad_id = 0;
        d.n_best = strategy == TFM_DECODE_BEAM ? 4 : 1;
        tfm_decoding *decoding = tfm_decoding_create(model, &d, 2, 6);
        ck_assert_msg(decoding != NULL, "%s", tfm_last_error());
        ck_assert_int_eq(tfm_decoding_run(decoding, src, tokens, 80, lengths, 8, scores, 8, NULL, 0,
                                          NULL, 0),
                         TFM_OK);
        long before = alloc_counter_libtfm();
        for (int i = 0; i < 5; i++)
            ck_assert_int_eq(tfm_decoding_run(decoding, src, tokens, 80, lengths, 8, scores, 8, NULL, 0,
                                          NULL, 0),
                             TFM_OK);
        ck_assert_int_eq(alloc_counter_libtfm() - before, 0);
        tfm_decoding_free(decoding);
    }
    tfm_tensor_free(src);
    tfm_model_free(model);
}
END_TEST

static Suite *alloc_suite(void)
{
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("alloc");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, steady_state_step_does_not_allocate);
    tcase_add_test(tc, steady_state_decoding_does_not_allocate);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(alloc_suite)
