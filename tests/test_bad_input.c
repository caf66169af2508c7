/* Bad calls across every public header, as a table: NULL handles and
 * pointers, wrong dtypes and shapes, absurd sizes, out-of-range ids and
 * axes, bad options structs, invalid enum values, calls in the wrong state,
 * bad paths and files. Each case must return its failure value with the
 * expected status and a message naming the function called; none may crash
 * or leak (checked after each case in the sanitizer build); and afterwards
 * the same handles must still give the same results to valid calls. */
#define _GNU_SOURCE
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "problems.h"
#include "rewrite_metadata.h"
#include <tfm/tfm.h>

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
enum { B = 2, S = 5, T = 4, D = 8, HEADS = 2, SRC_VOCAB = 11, TGT_VOCAB = 9, MAX_LEN = 3 };

/* Handles in a known state, shared by every case. */
typedef struct fixture {
    tfm_tape *tape;
    tfm_rng *rng;
    /* caller-owned tensors: f23 requires grad, i23 holds ids */
    tfm_tensor *f23, *i23, *f32x3, *f1, *f2, *f34, *i1, *i3, *x, *mem3, *src, *tgt, *long_src, *i3d;
    tfm_params *params, *layer_params, *empty, *small;
    tfm_model *model;
    tfm_layer *linear, *embedding, *norm, *dropout, *ff, *attention, *encoder_layer,
        *decoder_layer, *encoder, *decoder, *sinusoidal, *learned;
    tfm_optimizer *adam;
    tfm_decoding *greedy, *beam;
    /* tokenizers of 9 ids (the model's source and target ones), 10 and 12
     * (more than the target's and the source's vocabularies), and the
     * base64 a model file holds for the last two */
    tfm_tokenizer *tokenizer, *target_tokenizer, *tokenizer10, *tokenizer12;
    char *base64_10, *base64_12, *oversized_base64;
    char dir[64];
    char params_path[128], adam_path[128], sgd_path[128], small_adam_path[128];
    char small_path[128], small_int_path[128], small_extra_path[128], small_other_path[128];
    char empty_path[128], text_path[128], missing_path[128], missing_dir_path[128],
        folder_path[128], model_path[128], training_path[128], nan_path[128],
        prefixed_path[128];
    /* what valid calls gave before any case ran */
    float loss;
    int32_t tokens[B * (MAX_LEN + 1)], lengths[B];
    float *values, *grads, *layer_values;
    float tensor_values[7][64];
} fixture;

static fixture fx;

static tfm_model_options model_options(void)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = SRC_VOCAB;
    o.tgt_vocab = TGT_VOCAB;
    o.max_src_len = S;
    o.max_tgt_len = T + 1;
    o.encoder_layers = 1;
    o.decoder_layers = 1;
    o.d_model = D;
    o.heads = HEADS;
    o.d_ff = 16;
    o.seed = 3;
    return o;
}

/* A SentencePiece BPE tokenizer of vocab ids trained on one line. */
static tfm_tokenizer *tokenizer_of(const char *line, int32_t vocab)
{
    tfm_bpe_train_options o;
    tfm_bpe_train_options_init(&o);
    o.vocab_size = vocab;
    o.character_coverage = 1.0;
    tfm_tokenizer *tok = NULL;
    ck_assert_int_eq(tfm_tokenizer_train_bpe(&line, NULL, 1, &o, &tok), TFM_OK);
    return tok;
}

static tfm_block_options block_options(void)
{
    tfm_block_options o;
    tfm_block_options_init(&o);
    o.d_model = D;
    o.heads = HEADS;
    o.d_ff = 16;
    return o;
}

static tfm_attention_options attention_options(void)
{
    tfm_attention_options o;
    tfm_attention_options_init(&o);
    o.d_model = D;
    o.heads = HEADS;
    return o;
}

static tfm_optimizer_options optimizer_options(tfm_optimizer_kind kind)
{
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, kind);
    return o;
}

static tfm_decode_options decode_options(tfm_decode_strategy strategy)
{
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    o.strategy = strategy;
    o.max_length = MAX_LEN;
    o.src_pad_id = 0;
    o.n_best = 1;
    return o;
}

/* --- the fixture ------------------------------------------------------------------ */

static tfm_tensor *filled(int32_t ndim, const int64_t *shape, float scale)
{
    tfm_tensor *t = tfm_tensor_zeros(TFM_F32, ndim, shape);
    ck_assert_ptr_nonnull(t);
    float *v = tfm_tensor_data_f32(t);
    for (int64_t i = 0; i < tfm_tensor_numel(t); i++)
        v[i] = scale * (float)((i * 7 + 3) % 11 - 5);
    return t;
}

static tfm_tensor *ids(int32_t ndim, const int64_t *shape, int32_t vocab)
{
    tfm_tensor *t = tfm_tensor_zeros(TFM_I32, ndim, shape);
    ck_assert_ptr_nonnull(t);
    int32_t *v = tfm_tensor_data_i32(t);
    for (int64_t i = 0; i < tfm_tensor_numel(t); i++)
        v[i] = (int32_t)(1 + (i * 5) % (vocab - 1));
    return t;
}

static void path_in(char *out, const char *name)
{
    snprintf(out, 128, "%s/%s", fx.dir, name);
}

static void write_file(const char *path, const char *text)
{
    FILE *file = fopen(path, "wb");
    ck_assert_ptr_nonnull(file);
    fputs(text, file);
    fclose(file);
}

static tfm_status save_one(const char *path, const char *name, const tfm_tensor *t)
{
    return tfm_safetensors_write(path, 1, (const char *const[]){name},
                                 (const tfm_tensor *const[]){t});
}

/* The loss of a valid forward pass over the fixture's model. */
static float model_loss(void)
{
    tfm_tape *tape = fx.tape;
    ck_assert_int_eq(tfm_tape_reset(tape), TFM_OK);
    tfm_tensor *logits = tfm_model_forward(tape, fx.model, fx.src, fx.tgt,
                                           tfm_mask_padding(tape, fx.src, 0, TFM_I32),
                                           tfm_mask_causal(tape, T, TFM_I32), NULL, NULL, NULL, NULL);
    tfm_tensor *loss = tfm_cross_entropy(tape, logits, fx.tgt, -100, 0.0f);
    float value = -1.0f;
    ck_assert_msg(tfm_tensor_item(loss, &value) == TFM_OK, "%s", tfm_last_error());
    return value;
}

static tfm_tensor **checked_tensors(void)
{
    static tfm_tensor *list[7];
    tfm_tensor *tensors[7] = {fx.f23, fx.i23, fx.f32x3, fx.x, fx.src, fx.tgt, fx.f34};
    memcpy(list, tensors, sizeof list);
    return list;
}

static void snapshot_tensors(float out[7][64])
{
    tfm_tensor **list = checked_tensors();
    for (int i = 0; i < 7; i++) {
        int64_t n = tfm_tensor_numel(list[i]);
        ck_assert_int_le(n, 64);
        if (tfm_tensor_dtype(list[i]) == TFM_F32)
            ck_assert_int_eq(tfm_tensor_read_f32(list[i], out[i], n), TFM_OK);
        else
            ck_assert_int_eq(tfm_tensor_read_i32(list[i], (int32_t *)out[i], n), TFM_OK);
    }
}

static float *copy_of(const float *values, int64_t n)
{
    float *copy = malloc((size_t)n * sizeof *copy);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, values, (size_t)n * sizeof *copy);
    return copy;
}

/* The base64 text a model file holds for tok (its "tfm.tokenizer"),
 * malloc'd: tfm_model_save's, through a model of 12 ids. */
static char *base64_of(const tfm_tokenizer *tok)
{
    char path[160];
    snprintf(path, sizeof path, "%s/base64.safetensors", fx.dir);
    tfm_model_options mo = model_options();
    mo.src_vocab = mo.tgt_vocab = 12;
    tfm_model *m = tfm_model_create(&mo);
    ck_assert_int_eq(tfm_model_set_tokenizers(m, tok, NULL), TFM_OK);
    ck_assert_int_eq(tfm_model_save(m, path), TFM_OK);
    tfm_model_free(m);
    tfm_safetensors *file = tfm_safetensors_open(path);
    char *text = strdup(tfm_safetensors_metadata_get(file, "tfm.tokenizer"));
    tfm_safetensors_close(file);
    return text;
}

/* tfm_model_load of the fixture model's file (options, tensors and both
 * tokenizers) written again with metadata key set to value (NULL: left
 * out). */
static tfm_model *load_forged(const char *key, const char *value)
{
    char path[160];
    snprintf(path, sizeof path, "%s/forged.safetensors", fx.dir);
    rewrite_metadata(fx.model_path, path, key, value);
    return tfm_model_load(path);
}

static void setup(void)
{
    memset(&fx, 0, sizeof fx);
    strcpy(fx.dir, "/tmp/tfm_bad_input_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(fx.dir));
    fx.tape = tfm_tape_create();
    fx.rng = tfm_rng_create(7);
    fx.f23 = filled(2, SHAPE(2, 3), 0.5f);
    ck_assert_int_eq(tfm_tensor_set_requires_grad(fx.f23, 1), TFM_OK);
    fx.i23 = ids(2, SHAPE(2, 3), 5);
    fx.f32x3 = filled(2, SHAPE(3, 2), 0.25f);
    fx.f1 = filled(1, SHAPE(1), 1.0f);
    fx.f2 = filled(1, SHAPE(2), 1.0f);
    fx.f34 = filled(2, SHAPE(3, 4), 0.1f);
    fx.i1 = ids(1, SHAPE(1), 3);
    fx.i3 = ids(1, SHAPE(3), 2);
    fx.x = filled(3, SHAPE(B, T, D), 0.1f);
    fx.mem3 = filled(3, SHAPE(3, S, D), 0.1f);
    fx.src = ids(2, SHAPE(B, S), SRC_VOCAB);
    fx.tgt = ids(2, SHAPE(B, T), TGT_VOCAB);
    fx.long_src = ids(2, SHAPE(B, S + 1), SRC_VOCAB);
    fx.i3d = ids(3, SHAPE(2, 2, 2), 5);

    tfm_model_options mo = model_options();
    fx.model = tfm_model_create(&mo);
    ck_assert_ptr_nonnull(fx.model);
    ck_assert_int_eq(tfm_model_set_training(fx.model, 0), TFM_OK);
    fx.params = tfm_model_params(fx.model);
    fx.tokenizer = tokenizer_of("ab ab abc abcd", 9);
    fx.target_tokenizer = tokenizer_of("xy xy xyz xyzw", 9);
    fx.tokenizer10 = tokenizer_of("ab ab abc abcd", 10);
    fx.tokenizer12 = tokenizer_of("ab ab abc abcd", 12);
    ck_assert_int_eq(tfm_model_set_tokenizers(fx.model, fx.tokenizer, fx.target_tokenizer),
                     TFM_OK);

    tfm_params *lp = fx.layer_params = tfm_params_create();
    tfm_rng *rng = fx.rng;
    tfm_block_options bo = block_options();
    tfm_attention_options ao = attention_options();
    fx.linear = tfm_linear_create(lp, "linear", D, D, 1, rng);
    fx.embedding = tfm_embedding_create(lp, "embedding", SRC_VOCAB, D, rng);
    fx.norm = tfm_layer_norm_create(lp, "norm", D, 1e-5f);
    fx.dropout = tfm_dropout_create(0.1f, rng);
    fx.ff = tfm_feed_forward_create(lp, "ff", D, 16, TFM_ACTIVATION_RELU, 0.1f, rng);
    fx.attention = tfm_attention_create(lp, "attention", &ao, rng);
    fx.encoder_layer = tfm_encoder_layer_create(lp, "encoder_layer", &bo, rng);
    fx.decoder_layer = tfm_decoder_layer_create(lp, "decoder_layer", &bo, rng);
    fx.encoder = tfm_encoder_create(lp, "encoder", 1, &bo, 1, rng);
    fx.decoder = tfm_decoder_create(lp, "decoder", 1, &bo, 1, rng);
    fx.sinusoidal = tfm_sinusoidal_positions_create(T, D);
    fx.learned = tfm_learned_positions_create(lp, "positions", T, D, rng);
    ck_assert_msg(fx.learned != NULL, "%s", tfm_last_error());

    fx.empty = tfm_params_create();
    fx.small = tfm_params_create();
    ck_assert_ptr_nonnull(tfm_params_add(fx.small, "w", 2, SHAPE(2, 3)));
    tfm_optimizer_options adam = optimizer_options(TFM_OPTIMIZER_ADAM);
    fx.adam = tfm_optimizer_create(fx.params, &adam);
    tfm_decode_options greedy = decode_options(TFM_DECODE_GREEDY);
    tfm_decode_options beam = decode_options(TFM_DECODE_BEAM);
    fx.greedy = tfm_decoding_create(fx.model, &greedy, B, S);
    fx.beam = tfm_decoding_create(fx.model, &beam, B, S);
    ck_assert_msg(fx.beam != NULL, "%s", tfm_last_error());

    /* files: good ones of each kind, and ones that fit nothing here */
    path_in(fx.params_path, "params.safetensors");
    path_in(fx.adam_path, "adam.safetensors");
    path_in(fx.sgd_path, "sgd.safetensors");
    path_in(fx.small_adam_path, "small_adam.safetensors");
    path_in(fx.small_path, "small.safetensors");
    path_in(fx.small_int_path, "small_int.safetensors");
    path_in(fx.small_extra_path, "small_extra.safetensors");
    path_in(fx.small_other_path, "small_other.safetensors");
    path_in(fx.empty_path, "empty");
    path_in(fx.text_path, "text");
    path_in(fx.missing_path, "missing.safetensors");
    path_in(fx.missing_dir_path, "no/such/folder/x.safetensors");
    path_in(fx.folder_path, "folder");
    path_in(fx.model_path, "model.safetensors");
    path_in(fx.training_path, "training.safetensors");
    path_in(fx.nan_path, "nan.safetensors");
    path_in(fx.prefixed_path, "prefixed.safetensors");
    ck_assert_int_eq(mkdir(fx.folder_path, 0700), 0);
    fx.base64_10 = base64_of(fx.tokenizer10);
    fx.base64_12 = base64_of(fx.tokenizer12);
    size_t oversized = (size_t)8 << 20; /* valid base64 of 6 MiB of zero bytes */
    fx.oversized_base64 = malloc(oversized + 1);
    memset(fx.oversized_base64, 'A', oversized);
    fx.oversized_base64[oversized] = '\0';
    ck_assert_int_eq(tfm_params_save(fx.params, fx.params_path), TFM_OK);
    ck_assert_int_eq(tfm_optimizer_save(fx.adam, fx.adam_path), TFM_OK);
    tfm_optimizer_options sgd = optimizer_options(TFM_OPTIMIZER_SGD);
    sgd.momentum = 0.9f;
    tfm_optimizer *o = tfm_optimizer_create(fx.params, &sgd);
    ck_assert_int_eq(tfm_optimizer_save(o, fx.sgd_path), TFM_OK);
    tfm_optimizer_free(o);
    o = tfm_optimizer_create(fx.small, &adam);
    ck_assert_int_eq(tfm_optimizer_save(o, fx.small_adam_path), TFM_OK);
    tfm_optimizer_free(o);
    ck_assert_int_eq(tfm_params_save(fx.small, fx.small_path), TFM_OK);
    ck_assert_int_eq(save_one(fx.small_int_path, "w", fx.i23), TFM_OK);
    ck_assert_int_eq(save_one(fx.small_other_path, "w", fx.f32x3), TFM_OK);
    ck_assert_int_eq(tfm_safetensors_write(fx.small_extra_path, 2,
                                           (const char *const[]){"w", "extra"},
                                           (const tfm_tensor *const[]){fx.f23, fx.f1}),
                     TFM_OK);
    ck_assert_int_eq(tfm_model_save(fx.model, fx.model_path), TFM_OK);
    /* a forged file that fits its model loads: the refused ones are refused
     * for what was forged */
    tfm_model *forged = load_forged("tfm.tokenizer", fx.base64_10);
    ck_assert_msg(forged != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tokenizer_vocab_size(tfm_model_tokenizer(forged, 0)), 10);
    tfm_model_free(forged);
    ck_assert_int_eq(tfm_training_save(fx.training_path, fx.model, fx.adam, 1,
                                       (const tfm_rng *const[]){fx.rng}, 0, NULL, NULL),
                     TFM_OK);
    tfm_tensor *nan = tfm_tensor_full(2, SHAPE(2, 3), NAN);
    ck_assert_int_eq(save_one(fx.nan_path, "w", nan), TFM_OK);
    tfm_tensor_free(nan);
    ck_assert_int_eq(tfm_safetensors_write(fx.prefixed_path, 2, (const char *const[]){"x.w", "w"},
                                           (const tfm_tensor *const[]){fx.f23, fx.f23}),
                     TFM_OK);
    write_file(fx.empty_path, "");
    write_file(fx.text_path, "this is not a safetensors file, though it is long enough");

    fx.loss = model_loss();
    ck_assert_int_eq(tfm_decoding_run(fx.greedy, fx.src, fx.tokens, B * (MAX_LEN + 1), fx.lengths,
                                      B, NULL, 0, NULL, 0, NULL, 0),
                     TFM_OK);
    fx.values = copy_of(tfm_params_values(fx.params), tfm_params_numel(fx.params));
    fx.grads = copy_of(tfm_params_grads(fx.params), tfm_params_numel(fx.params));
    fx.layer_values = copy_of(tfm_params_values(fx.layer_params),
                              tfm_params_numel(fx.layer_params));
    snapshot_tensors(fx.tensor_values);
}

static void teardown(void)
{
    tfm_decoding_free(fx.greedy);
    tfm_decoding_free(fx.beam);
    tfm_optimizer_free(fx.adam);
    tfm_layer *layers[] = {fx.linear, fx.embedding, fx.norm, fx.dropout, fx.ff, fx.attention,
                           fx.encoder_layer, fx.decoder_layer, fx.encoder, fx.decoder,
                           fx.sinusoidal, fx.learned};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        tfm_layer_free(layers[i]);
    tfm_model_free(fx.model);
    tfm_tokenizer *tokenizers[] = {fx.tokenizer, fx.target_tokenizer, fx.tokenizer10,
                                   fx.tokenizer12};
    for (size_t i = 0; i < sizeof tokenizers / sizeof tokenizers[0]; i++)
        tfm_tokenizer_free(tokenizers[i]);
    free(fx.base64_10);
    free(fx.base64_12);
    free(fx.oversized_base64);
    tfm_params_free(fx.layer_params);
    tfm_params_free(fx.empty);
    tfm_params_free(fx.small);
    tfm_tensor *tensors[] = {fx.f23, fx.i23, fx.f32x3, fx.f1, fx.f2, fx.f34, fx.i1, fx.i3, fx.x,
                             fx.mem3, fx.src, fx.tgt, fx.long_src, fx.i3d};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        tfm_tensor_free(tensors[i]);
    tfm_tape_free(fx.tape);
    tfm_rng_free(fx.rng);
    free(fx.values);
    free(fx.grads);
    free(fx.layer_values);
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", fx.dir);
    ck_assert_int_eq(system(command), 0);
}

/* --- calls in a wrong state, each on handles of its own ----------------------------- */

static tfm_status backward_twice(void)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *loss = tfm_sum(tape, fx.f23);
    tfm_tape_backward(tape, loss);
    tfm_status s = tfm_tape_backward(tape, loss);
    tfm_tensor_zero_grad(fx.f23);
    tfm_tape_free(tape);
    return s;
}

static tfm_status backward_without_grad(int with_seed)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *loss = tfm_sum(tape, fx.f32x3); /* needs no gradient */
    static const float one = 1.0f;
    tfm_status s = with_seed ? tfm_tape_backward_with_grad(tape, loss, &one, 1)
                             : tfm_tape_backward(tape, loss);
    tfm_tape_free(tape);
    return s;
}

static tfm_status backward_not_recorded(void)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tape_set_recording(tape, 0);
    tfm_status s = tfm_tape_backward(tape, tfm_sum(tape, fx.f23));
    tfm_tape_free(tape);
    return s;
}

static tfm_status op_result_requires_grad(void)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_status s = tfm_tensor_set_requires_grad(tfm_relu(tape, fx.f32x3), 1);
    tfm_tape_free(tape);
    return s;
}

static tfm_status seed_count(int64_t count)
{
    tfm_tape *tape = tfm_tape_create();
    float seed[6] = {1, 1, 1, 1, 1, 1};
    tfm_status s = tfm_tape_backward_with_grad(tape, tfm_relu(tape, fx.f23), seed, count);
    tfm_tape_free(tape);
    return s;
}

static tfm_status step_after_store_grew(void)
{
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "a", 1, SHAPE(3));
    tfm_optimizer_options o = optimizer_options(TFM_OPTIMIZER_SGD);
    tfm_optimizer *opt = tfm_optimizer_create(params, &o);
    tfm_params_add(params, "b", 1, SHAPE(2));
    tfm_status s = tfm_optimizer_step(opt);
    tfm_optimizer_free(opt);
    tfm_params_free(params);
    return s;
}

static tfm_status step_on_nan_gradient(tfm_optimizer_kind kind)
{
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "a", 1, SHAPE(3));
    tfm_params_grads(params)[1] = NAN;
    tfm_optimizer_options o = optimizer_options(kind);
    tfm_optimizer *opt = tfm_optimizer_create(params, &o);
    tfm_status s = tfm_optimizer_step(opt);
    tfm_optimizer_free(opt);
    tfm_params_free(params);
    return s;
}

static tfm_status clip_infinite_gradient(void)
{
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "a", 1, SHAPE(3));
    tfm_params_grads(params)[0] = INFINITY;
    tfm_status s = tfm_params_clip_grad_norm(params, 1.0f, NULL);
    tfm_params_free(params);
    return s;
}

/* A whole layer or model made with changed options: NULL expected. */
static tfm_layer *attention_with(int field, double value)
{
    tfm_attention_options o = attention_options();
    switch (field) {
    case 0: o.struct_size = (uint32_t)value; break;
    case 1: o.d_model = (int64_t)value; break;
    case 2: o.heads = (int32_t)value; break;
    case 3: o.dropout = (float)value; break;
    case 4: o.trainable_scale = 1; o.scale_init = (float)value; break;
    case 5: o.head_dim = (int64_t)value; break;
    case 6: o.heads = 3; o.head_dim = (int64_t)value; break; /* 3 heads do not divide D */
    }
    tfm_layer *layer = tfm_attention_create(fx.layer_params, "new_attention", &o, fx.rng);
    tfm_layer_free(layer);
    return layer;
}

static tfm_layer *block_with(int decoder, int field, double value)
{
    tfm_block_options o = block_options();
    switch (field) {
    case 0: o.struct_size = (uint32_t)value; break;
    case 1: o.d_model = (int64_t)value; break;
    case 2: o.heads = (int32_t)value; break;
    case 3: o.d_ff = (int64_t)value; break;
    case 4: o.dropout = (float)value; break;
    case 5: o.activation = (tfm_activation)value; break;
    case 6: o.layer_norm_eps = (float)value; break;
    case 7: o.trainable_scale = 1; o.scale_init = (float)value; break;
    case 8: o.head_dim = (int64_t)value; break;
    }
    tfm_layer *layer = decoder ? tfm_decoder_layer_create(fx.layer_params, "new", &o, fx.rng)
                               : tfm_encoder_layer_create(fx.layer_params, "new", &o, fx.rng);
    tfm_layer_free(layer);
    return layer;
}

static tfm_layer *stack_with(int decoder, int32_t layers, int field, double value)
{
    tfm_block_options o = block_options();
    if (field == 1)
        o.heads = (int32_t)value;
    else if (field == 2)
        o.struct_size = (uint32_t)value;
    tfm_layer *layer = decoder ? tfm_decoder_create(fx.layer_params, "new", layers, &o, 1, fx.rng)
                               : tfm_encoder_create(fx.layer_params, "new", layers, &o, 1, fx.rng);
    tfm_layer_free(layer);
    return layer;
}

static tfm_model *model_with(int field, double value)
{
    tfm_model_options o = model_options();
    switch (field) {
    case 0: o.struct_size = (uint32_t)value; break;
    case 1: o.src_vocab = (int64_t)value; break;
    case 2: o.tgt_vocab = (int64_t)value; break;
    case 3: o.max_src_len = (int64_t)value; break;
    case 4: o.max_tgt_len = (int64_t)value; break;
    case 5: o.share_embeddings = 1; o.tgt_vocab = SRC_VOCAB + 1; break;
    case 6: o.positions = (tfm_positions)value; break;
    case 7: o.embedding_scale = (tfm_embedding_scale)value; break;
    case 8: o.encoder_layers = (int32_t)value; break;
    case 9: o.decoder_layers = (int32_t)value; break;
    case 10: o.heads = (int32_t)value; break;
    case 11: o.d_ff = (int64_t)value; break;
    case 12: o.dropout = (float)value; break;
    case 13: o.embedding_dropout = (float)value; break;
    case 14: o.trainable_scale = 1; o.scale_init = (float)value; break;
    case 15: o.d_model = (int64_t)value; break;
    case 16: o.activation = (tfm_activation)value; break;
    case 17: o.layer_norm_eps = (float)value; break;
    case 18: o.norm_first = (int32_t)value; break;
    case 19: o.bias = (int32_t)value; break;
    case 20: o.fused_qkv = (int32_t)value; break;
    case 21: o.trainable_scale = (int32_t)value; break;
    case 22: o.final_norm = (int32_t)value; break;
    case 23: o.share_embeddings = (int32_t)value; break;
    case 24: o.scale_init = (float)value; break; /* saved even when unused */
    case 25: o.dropout = (float)value; break;
    case 26: o.max_src_len = o.max_tgt_len = (int64_t)value; o.d_model = (int64_t)value; break;
    case 27: o.max_tgt_len = (int64_t)value; break; /* tables far larger than the model */
    case 28: o.position_offset = (int64_t)value; break;
    case 29: o.embedding_norm = (int32_t)value; break;
    case 30: o.feed_forward_bias = (int32_t)value; break;
    case 31: o.rms_norm = (int32_t)value; break;
    case 32: o.gated_feed_forward = (int32_t)value; break;
    case 33: o.unscaled_attention = (int32_t)value; break;
    case 34: o.unscaled_attention = 1; o.trainable_scale = (int32_t)value; break;
    case 35: o.relative_attention_buckets = (int32_t)value;
             o.relative_attention_max_distance = 128; break;
    case 36: o.relative_attention_buckets = 32;
             o.relative_attention_max_distance = (int32_t)value; break;
    case 37: o.generator_rescale = (int32_t)value; break;
    case 38: o.head_dim = (int64_t)value; break;
    case 39: o.heads = 3; o.head_dim = (int64_t)value; break;
    }
    tfm_model *model = tfm_model_create(&o);
    tfm_model_free(model);
    return model;
}

static tfm_optimizer *optimizer_with(tfm_optimizer_kind kind, int field, double value)
{
    tfm_optimizer_options o = optimizer_options(kind);
    switch (field) {
    case 0: o.struct_size = (uint32_t)value; break;
    case 1: o.kind = (tfm_optimizer_kind)value; break;
    case 2: o.lr = (float)value; break;
    case 3: o.beta1 = (float)value; break;
    case 4: o.beta2 = (float)value; break;
    case 5: o.eps = (float)value; break;
    case 6: o.weight_decay = (float)value; break;
    case 7: o.momentum = (float)value; break;
    case 8: o.clip_norm = (float)value; break;
    case 9: o.schedule = (tfm_schedule)value; break;
    case 10: o.schedule = TFM_SCHEDULE_STEP; o.step_size = (int64_t)value; break;
    case 11: o.schedule = TFM_SCHEDULE_STEP; o.gamma = (float)value; break;
    case 12: o.schedule = TFM_SCHEDULE_WARMUP_INVSQRT; o.warmup_steps = (int64_t)value; break;
    case 13:
        o.schedule = TFM_SCHEDULE_WARMUP_COSINE;
        o.warmup_steps = 10;
        o.total_steps = (int64_t)value;
        break;
    case 14:
        o.schedule = TFM_SCHEDULE_WARMUP_COSINE;
        o.warmup_steps = (int64_t)value;
        o.total_steps = 100;
        break;
    }
    tfm_optimizer *opt = tfm_optimizer_create(fx.params, &o);
    tfm_optimizer_free(opt);
    return opt;
}

static tfm_decoding *decoding_with(tfm_decode_strategy strategy, int field, double value)
{
    tfm_decode_options o = decode_options(strategy);
    int64_t max_batch = B, max_src_len = S;
    switch (field) {
    case 0: o.struct_size = (uint32_t)value; break;
    case 1: o.strategy = (tfm_decode_strategy)value; break;
    case 2: o.max_length = (int32_t)value; break;
    case 3: o.bos_id = (int32_t)value; break;
    case 4: o.eos_id = (int32_t)value; break;
    case 5: o.src_pad_id = (int32_t)value; break;
    case 6: o.temperature = (float)value; break;
    case 7: o.top_k = (int32_t)value; break;
    case 8: o.top_p = (float)value; break;
    case 9: o.beam_size = (int32_t)value; break;
    case 10: o.length_penalty = (float)value; break;
    case 11: o.n_best = (int32_t)value; break;
    case 12: max_batch = (int64_t)value; break;
    case 13: max_src_len = (int64_t)value; break;
    }
    tfm_decoding *d = tfm_decoding_create(fx.model, &o, max_batch, max_src_len);
    tfm_decoding_free(d);
    return d;
}

static tfm_status decoding_run_with(tfm_decoding *d, const tfm_tensor *src, int null_field)
{
    static int32_t tokens[B * 2 * (MAX_LEN + 1)], lengths[B * 2];
    static float scores[B * 2], logits[B * MAX_LEN * TGT_VOCAB];
    const int64_t n_logits = B * MAX_LEN * TGT_VOCAB;
    return tfm_decoding_run(d, src, null_field == 1 ? NULL : tokens, B * 2 * (MAX_LEN + 1),
                            null_field == 2 ? NULL : lengths, B * 2, scores, B * 2,
                            null_field == 3 ? logits : NULL, null_field == 3 ? n_logits : 0,
                            null_field == 4 ? logits : NULL, null_field == 4 ? n_logits : 0);
}

static tfm_status run_on_ids(const int32_t *values, int64_t count, int decode)
{
    tfm_tensor *src = tfm_tensor_from_i32(2, SHAPE(1, count), values);
    tfm_status s;
    if (decode) {
        s = decoding_run_with(fx.greedy, src, 0);
    } else {
        tfm_tensor *memory = tfm_model_encode(fx.tape, fx.model, src, NULL, NULL);
        s = memory ? TFM_OK : tfm_last_status();
    }
    tfm_tensor_free(src);
    return s;
}

static tfm_tensor *model_decode_on(const int32_t *values, int64_t count)
{
    tfm_tensor *tgt = tfm_tensor_from_i32(2, SHAPE(B, count), values);
    tfm_tensor *memory = tfm_model_encode(fx.tape, fx.model, fx.src, NULL, NULL);
    tfm_tensor *logits = tfm_model_decode(fx.tape, fx.model, tgt, memory, NULL, NULL, NULL, NULL);
    tfm_tensor_free(tgt);
    return logits;
}

static tfm_tensor *cross_entropy_with_target(int32_t target)
{
    tfm_tensor *targets = tfm_tensor_from_i32(1, SHAPE(3), (const int32_t[]){0, 1, target});
    tfm_tensor *loss = tfm_cross_entropy(fx.tape, fx.f32x3 /* [3,2]: 2 classes */, targets,
                                         -100, 0.0f);
    tfm_tensor_free(targets);
    return loss;
}

static tfm_tensor *embedding_of_id(int32_t id)
{
    tfm_tensor *id_tensor = tfm_tensor_from_i32(1, SHAPE(1), &id);
    tfm_tensor *out = tfm_embedding(fx.tape, fx.f32x3, id_tensor);
    tfm_tensor_free(id_tensor);
    return out;
}

static tfm_tensor *embedding_layer_of_id(int32_t id)
{
    tfm_tensor *id_tensor = tfm_tensor_from_i32(1, SHAPE(1), &id);
    tfm_tensor *out = tfm_embedding_forward(fx.tape, fx.embedding, id_tensor);
    tfm_tensor_free(id_tensor);
    return out;
}

static tfm_tensor *concat_of(int which)
{
    const tfm_tensor *second[4] = {fx.f34, fx.i23, NULL, fx.f23};
    const tfm_tensor *pair[2] = {fx.f23, second[which]};
    return tfm_concat(fx.tape, pair, 2, which == 3 ? 2 : 0);
}

static tfm_status write_named(const char *name)
{
    char path[160];
    snprintf(path, sizeof path, "%s/named.safetensors", fx.dir);
    return save_one(path, name, fx.f23);
}

static tfm_status write_pair(const char *a, const tfm_tensor *ta, const char *b,
                             const tfm_tensor *tb)
{
    char path[160];
    snprintf(path, sizeof path, "%s/pair.safetensors", fx.dir);
    return tfm_safetensors_write(path, 2, (const char *const[]){a, b},
                                 (const tfm_tensor *const[]){ta, tb});
}

static tfm_tensor *get_from(const char *path, const char *name)
{
    tfm_safetensors *file = tfm_safetensors_open(path);
    tfm_tensor *t = tfm_safetensors_get(file, name);
    tfm_safetensors_close(file);
    return t;
}

static const char *name_from(const char *path, int64_t index)
{
    tfm_safetensors *file = tfm_safetensors_open(path);
    const char *name = tfm_safetensors_name(file, index);
    tfm_safetensors_close(file);
    return name;
}

static tfm_status load_small_from(const char *path, const int64_t *shape)
{
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "w", 2, shape);
    tfm_status s = tfm_params_load(params, path);
    tfm_params_free(params);
    return s;
}

/* Into a store of its own holding "taken", so that the shared ones never grow. */
static tfm_tensor *add_param(const char *name, int32_t ndim, const int64_t *shape)
{
    tfm_params *own = tfm_params_create();
    tfm_params_add(own, "taken", 1, SHAPE(2));
    tfm_tensor *t = tfm_params_add(own, name, ndim, shape);
    tfm_params_free(own);
    return t;
}

static const char *long_name(void)
{
    static char name[300];
    memset(name, 'n', sizeof name - 1);
    return name;
}

static tfm_tensor *positions_with(int field)
{
    return field == 0 ? tfm_positions_forward(fx.tape, fx.sinusoidal, fx.x, -1)
           : field == 1 ? tfm_positions_forward(fx.tape, fx.sinusoidal, fx.x, 1)
           : field == 2 ? tfm_positions_forward(fx.tape, fx.learned, fx.x, INT64_MAX)
                        : tfm_positions_forward(fx.tape, fx.learned, fx.f23, 0);
}

static tfm_status load_with(const char *path, int field)
{
    tfm_load_options o;
    tfm_load_options_init(&o);
    if (field == 0)
        o.struct_size = 0;
    else if (field == 1)
        o.check_finite = 1;
    else if (field == 2)
        o.strip_prefix = "x.";
    tfm_load_report *report = NULL;
    tfm_status s = tfm_params_load_with(fx.small, path, &o, &report);
    tfm_load_report_free(report);
    return s;
}

/* A report of a good load, asked a bad question. */
static int64_t report_count(tfm_load_outcome outcome, int64_t index, const char **name)
{
    tfm_load_report *report = NULL;
    ck_assert_int_eq(tfm_params_load_with(fx.small, fx.small_path, NULL, &report), TFM_OK);
    tfm_clear_error();
    int64_t count = name ? 0 : tfm_load_report_count(report, outcome);
    if (name)
        *name = tfm_load_report_name(report, outcome, index);
    tfm_load_report_free(report);
    return count;
}

static const char *report_name(tfm_load_outcome outcome, int64_t index)
{
    const char *name = "";
    report_count(outcome, index, &name);
    return name;
}

static tfm_status write_metadata(int64_t count, const char *key, const char *value)
{
    char path[160];
    snprintf(path, sizeof path, "%s/metadata.safetensors", fx.dir);
    const char *keys[2] = {key, key}, *values[2] = {value, value};
    return tfm_safetensors_write_with_metadata(path, 1, (const char *const[]){"w"},
                                               (const tfm_tensor *const[]){fx.f23}, count,
                                               key || count == 0 ? keys : NULL, values);
}

static tfm_status model_metadata(int64_t count, const char *key)
{
    char path[160];
    snprintf(path, sizeof path, "%s/model_metadata.safetensors", fx.dir);
    return tfm_model_save_with_metadata(fx.model, path, count, (const char *const[]){key},
                                        (const char *const[]){"value"});
}

static const char *metadata_of(const char *path, int64_t index, const char *key)
{
    tfm_safetensors *file = tfm_safetensors_open(path);
    const char *out = key ? tfm_safetensors_metadata_get(file, key)
                          : tfm_safetensors_metadata_key(file, index);
    tfm_safetensors_close(file);
    return out;
}

static tfm_status training_save_with(int field)
{
    char path[160];
    snprintf(path, sizeof path, "%s/training_new.safetensors", fx.dir);
    const tfm_rng *rngs[1] = {fx.rng};
    tfm_optimizer_options o = optimizer_options(TFM_OPTIMIZER_ADAM);
    tfm_optimizer *other = tfm_optimizer_create(fx.small, &o);
    tfm_status s = field == 0   ? tfm_training_save(path, fx.model, fx.adam, -1, rngs, 0, NULL, NULL)
                   : field == 1 ? tfm_training_save(path, fx.model, fx.adam, 1, NULL, 0, NULL, NULL)
                   : field == 2 ? tfm_training_save(path, fx.model, other, 0, NULL, 0, NULL, NULL)
                   : tfm_training_save(path, fx.model, fx.adam, 0, NULL, 1,
                                       (const char *const[]){"tfm.mine"},
                                       (const char *const[]){"v"});
    tfm_optimizer_free(other);
    return s;
}

static tfm_status training_load_with(int field)
{
    tfm_rng *rngs[2] = {fx.rng, fx.rng};
    tfm_model_options mo = model_options();
    mo.d_ff = 8; /* another model */
    tfm_model *other = tfm_model_create(&mo);
    tfm_optimizer_options sgd = optimizer_options(TFM_OPTIMIZER_SGD);
    sgd.momentum = 0.9f;
    tfm_optimizer *sgd_opt = tfm_optimizer_create(fx.params, &sgd);
    tfm_status s = field == 0   ? tfm_training_load(fx.training_path, fx.model, fx.adam, 2, rngs)
                   : field == 1 ? tfm_training_load(fx.training_path, other, fx.adam, 1, rngs)
                   : field == 2 ? tfm_training_load(fx.training_path, fx.model, sgd_opt, 1, rngs)
                   : field == 3 ? tfm_training_load(fx.model_path, fx.model, fx.adam, 1, rngs)
                                : tfm_training_load(fx.training_path, fx.model, fx.adam, 1, NULL);
    tfm_optimizer_free(sgd_opt);
    tfm_model_free(other);
    return s;
}

/* --- the table ------------------------------------------------------------------------ */

/* Case index runs the call; returns whether it returned its failure value,
 * or -1 past the last case. */
typedef struct bad_case {
    const char *function; /* the public function called: its name must be in the message */
    tfm_status status;
    const char *call;
} bad_case;

#define RETURNS_NULL(x) ((x) == NULL)
#define RETURNS_STATUS(x) ((x) != TFM_OK)
#define RETURNS_MINUS_ONE(x) ((x) == -1)
#define RETURNS_ZERO(x) ((x) == 0)

#define BAD(function, status, returns, text, ...)                              \
    if (n++ == index) {                                                        \
        *c = (bad_case){#function, status, text};                              \
        return returns((__VA_ARGS__));                                 \
    }
#define NUL(function, status, ...) BAD(function, status, RETURNS_NULL, #__VA_ARGS__, __VA_ARGS__)
/* tfm_model_option into a 96-byte buffer declared value_size bytes long,
 * with or without somewhere for the name. */
static tfm_status option_of(const tfm_model *model, int32_t index, int with_name,
                            int64_t value_size)
{
    const char *name = NULL;
    char value[96];
    return tfm_model_option(model, index, with_name ? &name : NULL, value, value_size);
}

#define ST(function, status, ...) BAD(function, status, RETURNS_STATUS, #__VA_ARGS__, __VA_ARGS__)
#define NEG(function, status, ...)                                             \
    BAD(function, status, RETURNS_MINUS_ONE, #__VA_ARGS__, __VA_ARGS__)
#define ZERO(function, status, ...) BAD(function, status, RETURNS_ZERO, #__VA_ARGS__, __VA_ARGS__)

enum { E_NULL = TFM_ERR_NULL, E_ARG = TFM_ERR_ARG, E_SHAPE = TFM_ERR_SHAPE,
       E_DTYPE = TFM_ERR_DTYPE, E_RANGE = TFM_ERR_RANGE, E_SIZE = TFM_ERR_SIZE,
       E_STATE = TFM_ERR_STATE, E_IO = TFM_ERR_IO, E_FORMAT = TFM_ERR_FORMAT,
       E_NUMERIC = TFM_ERR_NUMERIC };

static int run_case(int index, bad_case *c)
{
    int n = 0;
    fixture *f = &fx;
    tfm_tape *tape = f->tape;
    float buf[64] = {0};
    int32_t ibuf[64] = {0};
    int64_t shape[TFM_MAX_DIMS];
    const int64_t huge = INT64_MAX, big = (int64_t)1 << 40;

    /* common.h */
    ST(tfm_set_num_threads, E_ARG, tfm_set_num_threads(0));
    ST(tfm_set_num_threads, E_ARG, tfm_set_num_threads(-1));
    ST(tfm_set_num_threads, E_ARG, tfm_set_num_threads(65));
    ST(tfm_set_num_threads, E_ARG, tfm_set_num_threads(INT32_MIN));
    ST(tfm_set_num_threads, E_ARG, tfm_set_num_threads(INT32_MAX));

    /* tensor.h: random numbers */
    ST(tfm_rng_seed, E_NULL, tfm_rng_seed(NULL, 1));
    ZERO(tfm_rng_next_u64, E_NULL, tfm_rng_next_u64(NULL));
    ZERO(tfm_rng_uniform, E_NULL, tfm_rng_uniform(NULL));
    ZERO(tfm_rng_normal, E_NULL, tfm_rng_normal(NULL));
    /* creation */
    NUL(tfm_tensor_zeros, E_DTYPE, tfm_tensor_zeros(7, 1, SHAPE(3)));
    NUL(tfm_tensor_zeros, E_DTYPE, tfm_tensor_zeros(-1, 1, SHAPE(3)));
    NUL(tfm_tensor_zeros, E_DTYPE, tfm_tensor_zeros(INT32_MAX, 1, SHAPE(3)));
    NUL(tfm_tensor_zeros, E_ARG, tfm_tensor_zeros(TFM_F32, 0, SHAPE(3)));
    NUL(tfm_tensor_zeros, E_ARG, tfm_tensor_zeros(TFM_F32, 5, SHAPE(1, 1, 1, 1, 1)));
    NUL(tfm_tensor_zeros, E_ARG, tfm_tensor_zeros(TFM_I32, -3, SHAPE(3)));
    NUL(tfm_tensor_zeros, E_ARG, tfm_tensor_zeros(TFM_F32, INT32_MAX, SHAPE(3)));
    NUL(tfm_tensor_zeros, E_NULL, tfm_tensor_zeros(TFM_F32, 1, NULL));
    NUL(tfm_tensor_zeros, E_SHAPE, tfm_tensor_zeros(TFM_F32, 2, SHAPE(3, 0)));
    NUL(tfm_tensor_zeros, E_SHAPE, tfm_tensor_zeros(TFM_F32, 1, SHAPE(-1)));
    NUL(tfm_tensor_zeros, E_SHAPE, tfm_tensor_zeros(TFM_I32, 3, SHAPE(2, 2, INT64_MIN)));
    NUL(tfm_tensor_zeros, E_SIZE, tfm_tensor_zeros(TFM_F32, 1, SHAPE(huge)));
    NUL(tfm_tensor_zeros, E_SIZE, tfm_tensor_zeros(TFM_I32, 2, SHAPE(huge / 2, 3)));
    NUL(tfm_tensor_zeros, E_SIZE, tfm_tensor_zeros(TFM_F32, 2, SHAPE(big, big)));
    NUL(tfm_tensor_zeros, E_SIZE, tfm_tensor_zeros(TFM_F32, 4, SHAPE(65536, 65536, 65536, 65536)));
    NUL(tfm_tensor_zeros, E_SIZE, tfm_tensor_zeros(TFM_F32, 1, SHAPE(huge / 4 + 1)));
    NUL(tfm_tensor_full, E_ARG, tfm_tensor_full(0, SHAPE(1), 2.0f));
    NUL(tfm_tensor_full, E_NULL, tfm_tensor_full(1, NULL, 2.0f));
    NUL(tfm_tensor_full, E_SHAPE, tfm_tensor_full(2, SHAPE(-4, 2), 2.0f));
    NUL(tfm_tensor_full, E_SIZE, tfm_tensor_full(3, SHAPE(big, big, big), 2.0f));
    NUL(tfm_tensor_ones, E_ARG, tfm_tensor_ones(9, SHAPE(1)));
    NUL(tfm_tensor_ones, E_NULL, tfm_tensor_ones(2, NULL));
    NUL(tfm_tensor_ones, E_SHAPE, tfm_tensor_ones(1, SHAPE(0)));
    NUL(tfm_tensor_ones, E_SIZE, tfm_tensor_ones(1, SHAPE(huge)));
    NUL(tfm_tensor_from_f32, E_NULL, tfm_tensor_from_f32(1, SHAPE(2), NULL));
    NUL(tfm_tensor_from_f32, E_NULL, tfm_tensor_from_f32(1, NULL, buf));
    NUL(tfm_tensor_from_f32, E_ARG, tfm_tensor_from_f32(-1, SHAPE(2), buf));
    NUL(tfm_tensor_from_f32, E_SHAPE, tfm_tensor_from_f32(2, SHAPE(2, -2), buf));
    NUL(tfm_tensor_from_f32, E_SIZE, tfm_tensor_from_f32(2, SHAPE(huge, huge), buf));
    NUL(tfm_tensor_from_i32, E_NULL, tfm_tensor_from_i32(1, SHAPE(2), NULL));
    NUL(tfm_tensor_from_i32, E_NULL, tfm_tensor_from_i32(1, NULL, ibuf));
    NUL(tfm_tensor_from_i32, E_ARG, tfm_tensor_from_i32(5, SHAPE(1, 1, 1, 1, 1), ibuf));
    NUL(tfm_tensor_from_i32, E_SHAPE, tfm_tensor_from_i32(1, SHAPE(0), ibuf));
    NUL(tfm_tensor_from_i32, E_SIZE, tfm_tensor_from_i32(1, SHAPE(huge), ibuf));
    NUL(tfm_tensor_uniform, E_NULL, tfm_tensor_uniform(1, SHAPE(3), 0.0f, 1.0f, NULL));
    NUL(tfm_tensor_uniform, E_ARG, tfm_tensor_uniform(1, SHAPE(3), 1.0f, 0.0f, f->rng));
    NUL(tfm_tensor_uniform, E_ARG, tfm_tensor_uniform(1, SHAPE(3), NAN, 1.0f, f->rng));
    NUL(tfm_tensor_uniform, E_ARG, tfm_tensor_uniform(1, SHAPE(3), 0.0f, NAN, f->rng));
    NUL(tfm_tensor_uniform, E_ARG, tfm_tensor_uniform(1, SHAPE(3), -3.4e38f, 3.4e38f, f->rng));
    NUL(tfm_tensor_uniform, E_SHAPE, tfm_tensor_uniform(1, SHAPE(-3), 0.0f, 1.0f, f->rng));
    NUL(tfm_tensor_uniform, E_SIZE, tfm_tensor_uniform(1, SHAPE(huge), 0.0f, 1.0f, f->rng));
    NUL(tfm_tensor_normal, E_NULL, tfm_tensor_normal(1, SHAPE(3), 0.0f, 1.0f, NULL));
    NUL(tfm_tensor_normal, E_ARG, tfm_tensor_normal(1, SHAPE(3), 0.0f, -1.0f, f->rng));
    NUL(tfm_tensor_normal, E_ARG, tfm_tensor_normal(1, SHAPE(3), 0.0f, NAN, f->rng));
    NUL(tfm_tensor_normal, E_ARG, tfm_tensor_normal(0, SHAPE(3), 0.0f, 1.0f, f->rng));
    NUL(tfm_tensor_normal, E_SIZE, tfm_tensor_normal(2, SHAPE(big, big), 0.0f, 1.0f, f->rng));
    /* shape */
    NEG(tfm_tensor_dtype, E_NULL, tfm_tensor_dtype(NULL));
    ZERO(tfm_tensor_ndim, E_NULL, tfm_tensor_ndim(NULL));
    NEG(tfm_tensor_dim, E_NULL, tfm_tensor_dim(NULL, 0));
    NEG(tfm_tensor_dim, E_ARG, tfm_tensor_dim(f->f23, 2));
    NEG(tfm_tensor_dim, E_ARG, tfm_tensor_dim(f->f23, -3));
    NEG(tfm_tensor_dim, E_ARG, tfm_tensor_dim(f->x, INT32_MAX));
    NEG(tfm_tensor_dim, E_ARG, tfm_tensor_dim(f->x, INT32_MIN));
    NEG(tfm_tensor_numel, E_NULL, tfm_tensor_numel(NULL));
    ST(tfm_tensor_shape, E_NULL, tfm_tensor_shape(NULL, shape));
    ST(tfm_tensor_shape, E_NULL, tfm_tensor_shape(f->f23, NULL));
    /* values */
    ST(tfm_tensor_read_f32, E_NULL, tfm_tensor_read_f32(NULL, buf, 6));
    ST(tfm_tensor_read_f32, E_NULL, tfm_tensor_read_f32(f->f23, NULL, 6));
    ST(tfm_tensor_read_f32, E_DTYPE, tfm_tensor_read_f32(f->i23, buf, 6));
    ST(tfm_tensor_read_f32, E_SHAPE, tfm_tensor_read_f32(f->f23, buf, 5));
    ST(tfm_tensor_read_f32, E_SHAPE, tfm_tensor_read_f32(f->f23, buf, 7));
    ST(tfm_tensor_read_f32, E_SHAPE, tfm_tensor_read_f32(f->f23, buf, -6));
    ST(tfm_tensor_read_f32, E_SHAPE, tfm_tensor_read_f32(f->f23, buf, huge));
    ST(tfm_tensor_write_f32, E_NULL, tfm_tensor_write_f32(NULL, buf, 6));
    ST(tfm_tensor_write_f32, E_NULL, tfm_tensor_write_f32(f->f23, NULL, 6));
    ST(tfm_tensor_write_f32, E_DTYPE, tfm_tensor_write_f32(f->i23, buf, 6));
    ST(tfm_tensor_write_f32, E_SHAPE, tfm_tensor_write_f32(f->f23, buf, 0));
    ST(tfm_tensor_write_f32, E_SHAPE, tfm_tensor_write_f32(f->f23, buf, INT64_MIN));
    ST(tfm_tensor_read_i32, E_NULL, tfm_tensor_read_i32(NULL, ibuf, 6));
    ST(tfm_tensor_read_i32, E_NULL, tfm_tensor_read_i32(f->i23, NULL, 6));
    ST(tfm_tensor_read_i32, E_DTYPE, tfm_tensor_read_i32(f->f23, ibuf, 6));
    ST(tfm_tensor_read_i32, E_SHAPE, tfm_tensor_read_i32(f->i23, ibuf, 1));
    ST(tfm_tensor_write_i32, E_NULL, tfm_tensor_write_i32(NULL, ibuf, 6));
    ST(tfm_tensor_write_i32, E_NULL, tfm_tensor_write_i32(f->i23, NULL, 6));
    ST(tfm_tensor_write_i32, E_DTYPE, tfm_tensor_write_i32(f->f23, ibuf, 6));
    ST(tfm_tensor_write_i32, E_SHAPE, tfm_tensor_write_i32(f->i23, ibuf, huge));
    ST(tfm_tensor_item, E_NULL, tfm_tensor_item(NULL, buf));
    ST(tfm_tensor_item, E_NULL, tfm_tensor_item(f->f1, NULL));
    ST(tfm_tensor_item, E_SHAPE, tfm_tensor_item(f->f23, buf));
    ST(tfm_tensor_item, E_DTYPE, tfm_tensor_item(f->i1, buf));
    NUL(tfm_tensor_data_f32, E_NULL, tfm_tensor_data_f32(NULL));
    NUL(tfm_tensor_data_f32, E_DTYPE, tfm_tensor_data_f32(f->i23));
    NUL(tfm_tensor_data_i32, E_NULL, tfm_tensor_data_i32(NULL));
    NUL(tfm_tensor_data_i32, E_DTYPE, tfm_tensor_data_i32(f->f23));
    /* gradients */
    ST(tfm_tensor_set_requires_grad, E_NULL, tfm_tensor_set_requires_grad(NULL, 1));
    ST(tfm_tensor_set_requires_grad, E_DTYPE, tfm_tensor_set_requires_grad(f->i23, 1));
    ST(tfm_tensor_set_requires_grad, E_STATE, op_result_requires_grad());
    ZERO(tfm_tensor_requires_grad, E_NULL, tfm_tensor_requires_grad(NULL));
    ST(tfm_tensor_read_grad, E_NULL, tfm_tensor_read_grad(NULL, buf, 6));
    ST(tfm_tensor_read_grad, E_NULL, tfm_tensor_read_grad(f->f23, NULL, 6));
    ST(tfm_tensor_read_grad, E_STATE, tfm_tensor_read_grad(f->f32x3, buf, 6));
    ST(tfm_tensor_read_grad, E_SHAPE, tfm_tensor_read_grad(f->f23, buf, 3));
    ST(tfm_tensor_read_grad, E_DTYPE, tfm_tensor_read_grad(f->i23, buf, 6));
    NUL(tfm_tensor_grad_f32, E_NULL, tfm_tensor_grad_f32(NULL));
    NUL(tfm_tensor_grad_f32, E_STATE, tfm_tensor_grad_f32(f->f32x3));
    ST(tfm_tensor_zero_grad, E_NULL, tfm_tensor_zero_grad(NULL));

    /* tape.h */
    ST(tfm_tape_set_recording, E_NULL, tfm_tape_set_recording(NULL, 1));
    ZERO(tfm_tape_is_recording, E_NULL, tfm_tape_is_recording(NULL));
    ST(tfm_tape_backward, E_NULL, tfm_tape_backward(NULL, f->f1));
    ST(tfm_tape_backward, E_NULL, tfm_tape_backward(tape, NULL));
    ST(tfm_tape_backward, E_SHAPE, tfm_tape_backward(tape, f->f23));
    ST(tfm_tape_backward, E_SHAPE, tfm_tape_backward(tape, f->i1));
    ST(tfm_tape_backward, E_STATE, tfm_tape_backward(tape, f->f1));
    ST(tfm_tape_backward, E_STATE, backward_twice());
    ST(tfm_tape_backward, E_STATE, backward_without_grad(0));
    ST(tfm_tape_backward, E_STATE, backward_not_recorded());
    ST(tfm_tape_backward_with_grad, E_NULL, tfm_tape_backward_with_grad(NULL, f->f23, buf, 6));
    ST(tfm_tape_backward_with_grad, E_NULL, tfm_tape_backward_with_grad(tape, NULL, buf, 6));
    ST(tfm_tape_backward_with_grad, E_NULL, tfm_tape_backward_with_grad(tape, f->f23, NULL, 6));
    ST(tfm_tape_backward_with_grad, E_SHAPE, seed_count(5));
    ST(tfm_tape_backward_with_grad, E_SHAPE, seed_count(-1));
    ST(tfm_tape_backward_with_grad, E_SHAPE, seed_count(huge));
    ST(tfm_tape_backward_with_grad, E_STATE, tfm_tape_backward_with_grad(tape, f->i23, buf, 6));
    ST(tfm_tape_backward_with_grad, E_STATE, backward_without_grad(1));
    ST(tfm_tape_reset, E_NULL, tfm_tape_reset(NULL));
    NEG(tfm_tape_node_count, E_NULL, tfm_tape_node_count(NULL));
    NEG(tfm_tape_arena_bytes, E_NULL, tfm_tape_arena_bytes(NULL));

    /* ops.h: linear algebra */
    NUL(tfm_matmul, E_NULL, tfm_matmul(NULL, f->f23, f->f32x3, 0, 0));
    NUL(tfm_matmul, E_NULL, tfm_matmul(tape, NULL, f->f32x3, 0, 0));
    NUL(tfm_matmul, E_NULL, tfm_matmul(tape, f->f23, NULL, 0, 0));
    NUL(tfm_matmul, E_DTYPE, tfm_matmul(tape, f->i23, f->f32x3, 0, 0));
    NUL(tfm_matmul, E_DTYPE, tfm_matmul(tape, f->f23, f->i23, 0, 1));
    NUL(tfm_matmul, E_SHAPE, tfm_matmul(tape, f->f23, f->f23, 0, 0));
    NUL(tfm_matmul, E_SHAPE, tfm_matmul(tape, f->f23, f->f32x3, 1, 0));
    NUL(tfm_matmul, E_SHAPE, tfm_matmul(tape, f->f2, f->f23, 0, 0));
    NUL(tfm_matmul, E_SHAPE, tfm_matmul(tape, f->x, f->mem3, 0, 1));
    NUL(tfm_linear, E_NULL, tfm_linear(NULL, f->f23, f->f23, NULL));
    NUL(tfm_linear, E_NULL, tfm_linear(tape, NULL, f->f23, NULL));
    NUL(tfm_linear, E_NULL, tfm_linear(tape, f->f23, NULL, NULL));
    NUL(tfm_linear, E_DTYPE, tfm_linear(tape, f->i23, f->f23, NULL));
    NUL(tfm_linear, E_SHAPE, tfm_linear(tape, f->f23, f->f32x3, NULL));
    NUL(tfm_linear, E_SHAPE, tfm_linear(tape, f->f23, f->f23, f->f1));
    NUL(tfm_linear, E_DTYPE, tfm_linear(tape, f->f23, f->f23, f->i1));
    NUL(tfm_linear, E_SHAPE, tfm_linear(tape, f->f23, f->f2, NULL));
    NUL(tfm_linear_relu, E_NULL, tfm_linear_relu(tape, NULL, f->f23, NULL));
    NUL(tfm_linear_relu, E_SHAPE, tfm_linear_relu(tape, f->f23, f->f34, NULL));
    NUL(tfm_linear_relu, E_DTYPE, tfm_linear_relu(tape, f->f23, f->i23, NULL));
    NUL(tfm_linear_relu_dropout, E_ARG,
        tfm_linear_relu_dropout(tape, f->f23, f->f23, NULL, 1.0f, 1, f->rng));
    NUL(tfm_linear_relu_dropout, E_ARG,
        tfm_linear_relu_dropout(tape, f->f23, f->f23, NULL, -0.5f, 1, f->rng));
    NUL(tfm_linear_relu_dropout, E_ARG,
        tfm_linear_relu_dropout(tape, f->f23, f->f23, NULL, NAN, 1, f->rng));
    NUL(tfm_linear_relu_dropout, E_NULL,
        tfm_linear_relu_dropout(tape, f->f23, f->f23, NULL, 0.5f, 1, NULL));
    NUL(tfm_linear_relu_dropout, E_SHAPE,
        tfm_linear_relu_dropout(tape, f->f23, f->f34, NULL, 0.5f, 1, f->rng));
    /* elementwise */
    NUL(tfm_add, E_NULL, tfm_add(NULL, f->f23, f->f23));
    NUL(tfm_add, E_NULL, tfm_add(tape, NULL, f->f23));
    NUL(tfm_add, E_NULL, tfm_add(tape, f->f23, NULL));
    NUL(tfm_add, E_SHAPE, tfm_add(tape, f->f23, f->f32x3));
    NUL(tfm_add, E_DTYPE, tfm_add(tape, f->f23, f->i23));
    NUL(tfm_sub, E_SHAPE, tfm_sub(tape, f->f23, f->f34));
    NUL(tfm_sub, E_DTYPE, tfm_sub(tape, f->i23, f->f23));
    NUL(tfm_sub, E_NULL, tfm_sub(tape, NULL, NULL));
    NUL(tfm_mul, E_SHAPE, tfm_mul(tape, f->x, f->mem3));
    NUL(tfm_mul, E_DTYPE, tfm_mul(tape, f->i1, f->f1));
    NUL(tfm_mul, E_NULL, tfm_mul(NULL, f->f1, f->f1));
    NUL(tfm_scale, E_NULL, tfm_scale(tape, NULL, 2.0f));
    NUL(tfm_scale, E_NULL, tfm_scale(NULL, f->f23, 2.0f));
    NUL(tfm_scale, E_DTYPE, tfm_scale(tape, f->i23, 2.0f));
    NUL(tfm_masked_fill, E_NULL, tfm_masked_fill(tape, f->f23, NULL, 0.0f));
    NUL(tfm_masked_fill, E_NULL, tfm_masked_fill(tape, NULL, f->i23, 0.0f));
    NUL(tfm_masked_fill, E_DTYPE, tfm_masked_fill(tape, f->f23, f->f23, 0.0f));
    NUL(tfm_masked_fill, E_DTYPE, tfm_masked_fill(tape, f->i23, f->i23, 0.0f));
    NUL(tfm_masked_fill, E_SHAPE, tfm_masked_fill(tape, f->f34, f->i23, 0.0f));
    /* activations */
    NUL(tfm_relu, E_NULL, tfm_relu(NULL, f->f23));
    NUL(tfm_relu, E_NULL, tfm_relu(tape, NULL));
    NUL(tfm_relu, E_DTYPE, tfm_relu(tape, f->i23));
    NUL(tfm_gelu, E_NULL, tfm_gelu(NULL, f->f23));
    NUL(tfm_gelu, E_NULL, tfm_gelu(tape, NULL));
    NUL(tfm_gelu, E_DTYPE, tfm_gelu(tape, f->i1));
    NUL(tfm_tanh, E_NULL, tfm_tanh(NULL, f->f23));
    NUL(tfm_tanh, E_NULL, tfm_tanh(tape, NULL));
    NUL(tfm_tanh, E_DTYPE, tfm_tanh(tape, f->i3d));
    /* shape */
    NUL(tfm_reshape, E_NULL, tfm_reshape(NULL, f->f23, 1, SHAPE(6)));
    NUL(tfm_reshape, E_NULL, tfm_reshape(tape, NULL, 1, SHAPE(6)));
    NUL(tfm_reshape, E_NULL, tfm_reshape(tape, f->f23, 1, NULL));
    NUL(tfm_reshape, E_ARG, tfm_reshape(tape, f->f23, 0, SHAPE(6)));
    NUL(tfm_reshape, E_ARG, tfm_reshape(tape, f->f23, 5, SHAPE(1, 1, 1, 1, 6)));
    NUL(tfm_reshape, E_ARG, tfm_reshape(tape, f->f23, 2, SHAPE(-1, -1)));
    NUL(tfm_reshape, E_SHAPE, tfm_reshape(tape, f->f23, 2, SHAPE(4, 2)));
    NUL(tfm_reshape, E_SHAPE, tfm_reshape(tape, f->f23, 2, SHAPE(-2, 3)));
    NUL(tfm_reshape, E_SHAPE, tfm_reshape(tape, f->f23, 2, SHAPE(0, 6)));
    NUL(tfm_reshape, E_SHAPE, tfm_reshape(tape, f->f23, 2, SHAPE(-1, 4)));
    NUL(tfm_reshape, E_SHAPE, tfm_reshape(tape, f->i23, 1, SHAPE(huge)));
    NUL(tfm_transpose, E_NULL, tfm_transpose(NULL, f->f23, 0, 1));
    NUL(tfm_transpose, E_NULL, tfm_transpose(tape, NULL, 0, 1));
    NUL(tfm_transpose, E_ARG, tfm_transpose(tape, f->f23, 0, 2));
    NUL(tfm_transpose, E_ARG, tfm_transpose(tape, f->f23, -3, 1));
    NUL(tfm_transpose, E_ARG, tfm_transpose(tape, f->x, INT32_MIN, 0));
    NUL(tfm_split_heads, E_NULL, tfm_split_heads(tape, NULL, 2));
    NUL(tfm_split_heads, E_NULL, tfm_split_heads(NULL, f->x, 2));
    NUL(tfm_split_heads, E_SHAPE, tfm_split_heads(tape, f->f23, 2));
    NUL(tfm_split_heads, E_ARG, tfm_split_heads(tape, f->x, 0));
    NUL(tfm_split_heads, E_ARG, tfm_split_heads(tape, f->x, -2));
    NUL(tfm_split_heads, E_SHAPE, tfm_split_heads(tape, f->x, 3));
    NUL(tfm_split_heads, E_DTYPE, tfm_split_heads(tape, f->i3d, 2));
    NUL(tfm_merge_heads, E_NULL, tfm_merge_heads(tape, NULL));
    NUL(tfm_merge_heads, E_NULL, tfm_merge_heads(NULL, f->x));
    NUL(tfm_merge_heads, E_SHAPE, tfm_merge_heads(tape, f->x));
    NUL(tfm_merge_heads, E_DTYPE, tfm_merge_heads(tape, f->i3d));
    NUL(tfm_concat, E_NULL, tfm_concat(tape, NULL, 2, 0));
    NUL(tfm_concat, E_NULL, tfm_concat(NULL, (const tfm_tensor *const[]){f->f23}, 1, 0));
    NUL(tfm_concat, E_ARG, tfm_concat(tape, (const tfm_tensor *const[]){f->f23}, 0, 0));
    NUL(tfm_concat, E_ARG, tfm_concat(tape, (const tfm_tensor *const[]){f->f23}, -1, 0));
    NUL(tfm_concat, E_ARG, tfm_concat(tape, (const tfm_tensor *const[]){f->f23}, 1, 2));
    NUL(tfm_concat, E_SHAPE, concat_of(0));
    NUL(tfm_concat, E_DTYPE, concat_of(1));
    NUL(tfm_concat, E_NULL, concat_of(2));
    NUL(tfm_concat, E_ARG, concat_of(3));
    /* normalisation, softmax */
    NUL(tfm_softmax, E_NULL, tfm_softmax(NULL, f->f23, NULL));
    NUL(tfm_softmax, E_NULL, tfm_softmax(tape, NULL, NULL));
    NUL(tfm_softmax, E_DTYPE, tfm_softmax(tape, f->i23, NULL));
    NUL(tfm_softmax, E_SHAPE, tfm_softmax(tape, f->f23, f->i3d));
    NUL(tfm_softmax, E_SHAPE, tfm_softmax(tape, f->f23, f->f34));
    NUL(tfm_log_softmax, E_NULL, tfm_log_softmax(NULL, f->f23));
    NUL(tfm_log_softmax, E_NULL, tfm_log_softmax(tape, NULL));
    NUL(tfm_log_softmax, E_DTYPE, tfm_log_softmax(tape, f->i23));
    NUL(tfm_layer_norm, E_NULL, tfm_layer_norm(NULL, f->f23, NULL, NULL, 1e-5f));
    NUL(tfm_layer_norm, E_NULL, tfm_layer_norm(tape, NULL, NULL, NULL, 1e-5f));
    NUL(tfm_layer_norm, E_DTYPE, tfm_layer_norm(tape, f->i23, NULL, NULL, 1e-5f));
    NUL(tfm_layer_norm, E_SHAPE, tfm_layer_norm(tape, f->f23, f->f2, NULL, 1e-5f));
    NUL(tfm_layer_norm, E_SHAPE, tfm_layer_norm(tape, f->f23, NULL, f->f34, 1e-5f));
    NUL(tfm_layer_norm, E_DTYPE, tfm_layer_norm(tape, f->f34, NULL, f->i1, 1e-5f));
    NUL(tfm_layer_norm, E_ARG, tfm_layer_norm(tape, f->f23, NULL, NULL, -1.0f));
    NUL(tfm_layer_norm, E_ARG, tfm_layer_norm(tape, f->f23, NULL, NULL, NAN));
    NUL(tfm_layer_norm, E_ARG, tfm_layer_norm(tape, f->f23, NULL, NULL, INFINITY));
    NUL(tfm_dropout, E_NULL, tfm_dropout(NULL, f->f23, 0.5f, 1, f->rng));
    NUL(tfm_dropout, E_NULL, tfm_dropout(tape, NULL, 0.5f, 1, f->rng));
    NUL(tfm_dropout, E_NULL, tfm_dropout(tape, f->f23, 0.5f, 1, NULL));
    NUL(tfm_dropout, E_ARG, tfm_dropout(tape, f->f23, 1.0f, 1, f->rng));
    NUL(tfm_dropout, E_ARG, tfm_dropout(tape, f->f23, -0.1f, 0, f->rng));
    NUL(tfm_dropout, E_ARG, tfm_dropout(tape, f->f23, NAN, 1, f->rng));
    NUL(tfm_dropout, E_DTYPE, tfm_dropout(tape, f->i23, 0.5f, 1, f->rng));
    /* lookup, reductions, loss */
    NUL(tfm_embedding, E_NULL, tfm_embedding(NULL, f->f32x3, f->i1));
    NUL(tfm_embedding, E_NULL, tfm_embedding(tape, NULL, f->i1));
    NUL(tfm_embedding, E_NULL, tfm_embedding(tape, f->f32x3, NULL));
    NUL(tfm_embedding, E_DTYPE, tfm_embedding(tape, f->i23, f->i1));
    NUL(tfm_embedding, E_DTYPE, tfm_embedding(tape, f->f32x3, f->f1));
    NUL(tfm_embedding, E_SHAPE, tfm_embedding(tape, f->x, f->i1));
    NUL(tfm_embedding, E_RANGE, embedding_of_id(3));
    NUL(tfm_embedding, E_RANGE, embedding_of_id(-1));
    NUL(tfm_embedding, E_RANGE, embedding_of_id(INT32_MAX));
    NUL(tfm_embedding, E_RANGE, embedding_of_id(INT32_MIN));
    NUL(tfm_sum, E_NULL, tfm_sum(NULL, f->f23));
    NUL(tfm_sum, E_NULL, tfm_sum(tape, NULL));
    NUL(tfm_sum, E_DTYPE, tfm_sum(tape, f->i23));
    NUL(tfm_mean, E_NULL, tfm_mean(NULL, f->f23));
    NUL(tfm_mean, E_NULL, tfm_mean(tape, NULL));
    NUL(tfm_mean, E_DTYPE, tfm_mean(tape, f->i1));
    NUL(tfm_cross_entropy, E_NULL, tfm_cross_entropy(NULL, f->f32x3, f->i3, -100, 0.0f));
    NUL(tfm_cross_entropy, E_NULL, tfm_cross_entropy(tape, NULL, f->i3, -100, 0.0f));
    NUL(tfm_cross_entropy, E_NULL, tfm_cross_entropy(tape, f->f32x3, NULL, -100, 0.0f));
    NUL(tfm_cross_entropy, E_DTYPE, tfm_cross_entropy(tape, f->i23, f->i1, -100, 0.0f));
    NUL(tfm_cross_entropy, E_DTYPE, tfm_cross_entropy(tape, f->f23, f->f2, -100, 0.0f));
    NUL(tfm_cross_entropy, E_SHAPE, tfm_cross_entropy(tape, f->f23, f->i23, -100, 0.0f));
    NUL(tfm_cross_entropy, E_SHAPE, tfm_cross_entropy(tape, f->f2, f->i1, -100, 0.0f));
    NUL(tfm_cross_entropy, E_ARG, tfm_cross_entropy(tape, f->f32x3, f->i3, -100, 1.0f));
    NUL(tfm_cross_entropy, E_ARG, tfm_cross_entropy(tape, f->f32x3, f->i3, -100, -0.1f));
    NUL(tfm_cross_entropy, E_ARG, tfm_cross_entropy(tape, f->f32x3, f->i3, -100, NAN));
    NUL(tfm_cross_entropy_reduced, E_NULL,
        tfm_cross_entropy_reduced(tape, NULL, f->i3, -100, 0.0f, TFM_REDUCTION_SUM, NULL));
    NUL(tfm_cross_entropy_reduced, E_ARG,
        tfm_cross_entropy_reduced(tape, f->f32x3, f->i3, -100, 0.0f, 2, NULL));
    NUL(tfm_cross_entropy_reduced, E_ARG,
        tfm_cross_entropy_reduced(tape, f->f32x3, f->i3, -100, 0.0f, -1, NULL));
    NUL(tfm_cross_entropy, E_RANGE, cross_entropy_with_target(2));
    NUL(tfm_cross_entropy, E_RANGE, cross_entropy_with_target(-1));
    NUL(tfm_cross_entropy, E_RANGE, cross_entropy_with_target(INT32_MAX));

    /* nn.h: layers */
    ST(tfm_layer_set_training, E_NULL, tfm_layer_set_training(NULL, 1));
    NUL(tfm_layer_kind, E_NULL, tfm_layer_kind(NULL));
    NUL(tfm_linear_create, E_NULL, tfm_linear_create(NULL, "l", 2, 2, 1, f->rng));
    NUL(tfm_linear_create, E_NULL, tfm_linear_create(f->layer_params, NULL, 2, 2, 1, f->rng));
    NUL(tfm_linear_create, E_NULL, tfm_linear_create(f->layer_params, "l", 2, 2, 1, NULL));
    NUL(tfm_linear_create, E_SHAPE, tfm_linear_create(f->layer_params, "l", 0, 2, 1, f->rng));
    NUL(tfm_linear_create, E_SHAPE, tfm_linear_create(f->layer_params, "l", 2, -1, 1, f->rng));
    NUL(tfm_linear_create, E_SIZE, tfm_linear_create(f->layer_params, "l", huge, huge, 0, f->rng));
    NUL(tfm_linear_create, E_SIZE, tfm_linear_create(f->layer_params, "l", big, big, 1, f->rng));
    NUL(tfm_linear_create, E_ARG, tfm_linear_create(f->layer_params, "linear", 2, 2, 1, f->rng));
    NUL(tfm_linear_create, E_ARG, tfm_linear_create(f->layer_params, long_name(), 2, 2, 1, f->rng));
    NUL(tfm_linear_forward, E_NULL, tfm_linear_forward(tape, NULL, f->x));
    NUL(tfm_linear_forward, E_ARG, tfm_linear_forward(tape, f->norm, f->x));
    NUL(tfm_linear_forward, E_SHAPE, tfm_linear_forward(tape, f->linear, f->f23));
    NUL(tfm_linear_forward, E_DTYPE, tfm_linear_forward(tape, f->linear, f->i3d));
    NUL(tfm_linear_forward, E_NULL, tfm_linear_forward(NULL, f->linear, f->x));
    NUL(tfm_linear_forward, E_NULL, tfm_linear_forward(tape, f->linear, NULL));
    NUL(tfm_embedding_create, E_NULL, tfm_embedding_create(NULL, "e", 3, 2, f->rng));
    NUL(tfm_embedding_create, E_NULL, tfm_embedding_create(f->layer_params, "e", 3, 2, NULL));
    NUL(tfm_embedding_create, E_SHAPE, tfm_embedding_create(f->layer_params, "e", 0, 2, f->rng));
    NUL(tfm_embedding_create, E_SHAPE, tfm_embedding_create(f->layer_params, "e", 3, -2, f->rng));
    NUL(tfm_embedding_create, E_SIZE, tfm_embedding_create(f->layer_params, "e", huge, 2, f->rng));
    NUL(tfm_embedding_create, E_ARG, tfm_embedding_create(f->layer_params, "embedding", 3, 2, f->rng));
    NUL(tfm_embedding_forward, E_ARG, tfm_embedding_forward(tape, f->linear, f->src));
    NUL(tfm_embedding_forward, E_NULL, tfm_embedding_forward(tape, NULL, f->src));
    NUL(tfm_embedding_forward, E_DTYPE, tfm_embedding_forward(tape, f->embedding, f->x));
    NUL(tfm_embedding_forward, E_RANGE, embedding_layer_of_id(SRC_VOCAB));
    NUL(tfm_embedding_forward, E_RANGE, embedding_layer_of_id(-5));
    NUL(tfm_layer_norm_create, E_NULL, tfm_layer_norm_create(NULL, "n", 4, 1e-5f));
    NUL(tfm_layer_norm_create, E_NULL, tfm_layer_norm_create(f->layer_params, NULL, 4, 1e-5f));
    NUL(tfm_layer_norm_create, E_ARG, tfm_layer_norm_create(f->layer_params, "n", 4, -1e-5f));
    NUL(tfm_layer_norm_create, E_ARG, tfm_layer_norm_create(f->layer_params, "n", 4, NAN));
    NUL(tfm_layer_norm_create, E_SHAPE, tfm_layer_norm_create(f->layer_params, "n", 0, 1e-5f));
    NUL(tfm_layer_norm_create, E_SIZE, tfm_layer_norm_create(f->layer_params, "n", huge, 1e-5f));
    NUL(tfm_layer_norm_forward, E_ARG, tfm_layer_norm_forward(tape, f->linear, f->x));
    NUL(tfm_layer_norm_forward, E_SHAPE, tfm_layer_norm_forward(tape, f->norm, f->f23));
    NUL(tfm_layer_norm_forward, E_NULL, tfm_layer_norm_forward(tape, f->norm, NULL));
    NUL(tfm_dropout_create, E_ARG, tfm_dropout_create(1.0f, f->rng));
    NUL(tfm_dropout_create, E_ARG, tfm_dropout_create(-0.5f, f->rng));
    NUL(tfm_dropout_create, E_ARG, tfm_dropout_create(NAN, f->rng));
    NUL(tfm_dropout_create, E_NULL, tfm_dropout_create(0.5f, NULL));
    NUL(tfm_dropout_forward, E_ARG, tfm_dropout_forward(tape, f->norm, f->x));
    NUL(tfm_dropout_forward, E_NULL, tfm_dropout_forward(tape, f->dropout, NULL));
    NUL(tfm_dropout_forward, E_DTYPE, tfm_dropout_forward(tape, f->dropout, f->i23));
    NUL(tfm_feed_forward_create, E_ARG,
        tfm_feed_forward_create(f->layer_params, "f", 4, 8, 7, 0.1f, f->rng));
    NUL(tfm_feed_forward_create, E_ARG,
        tfm_feed_forward_create(f->layer_params, "f", 4, 8, -1, 0.1f, f->rng));
    NUL(tfm_feed_forward_create, E_NULL,
        tfm_feed_forward_create(NULL, "f", 4, 8, TFM_ACTIVATION_RELU, 0.1f, f->rng));
    NUL(tfm_feed_forward_create, E_NULL,
        tfm_feed_forward_create(f->layer_params, "f", 4, 8, TFM_ACTIVATION_GELU, 0.1f, NULL));
    NUL(tfm_feed_forward_create, E_SHAPE,
        tfm_feed_forward_create(f->layer_params, "f", 4, 0, TFM_ACTIVATION_RELU, 0.1f, f->rng));
    NUL(tfm_feed_forward_create, E_ARG,
        tfm_feed_forward_create(f->layer_params, "f", 4, 8, TFM_ACTIVATION_RELU, 1.0f, f->rng));
    NUL(tfm_feed_forward_create, E_ARG,
        tfm_feed_forward_create(f->layer_params, "ff", 4, 8, TFM_ACTIVATION_RELU, 0.1f, f->rng));
    NUL(tfm_feed_forward_forward, E_ARG, tfm_feed_forward_forward(tape, f->linear, f->x));
    NUL(tfm_feed_forward_forward, E_SHAPE, tfm_feed_forward_forward(tape, f->ff, f->f23));
    NUL(tfm_feed_forward_forward, E_NULL, tfm_feed_forward_forward(tape, NULL, f->x));
    NUL(tfm_feed_forward_forward, E_NULL, tfm_feed_forward_forward(NULL, f->ff, f->x));
    /* attention */
    NUL(tfm_attention_create, E_NULL, tfm_attention_create(f->layer_params, "a", NULL, f->rng));
    NUL(tfm_attention_create, E_NULL,
        tfm_attention_create(NULL, "a", &(tfm_attention_options){0}, f->rng));
    NUL(tfm_attention_create, E_ARG, attention_with(0, 0));
    NUL(tfm_attention_create, E_ARG, attention_with(0, 4));
    NUL(tfm_attention_create, E_ARG, attention_with(1, 0));
    NUL(tfm_attention_create, E_ARG, attention_with(1, -8));
    NUL(tfm_attention_create, E_ARG, attention_with(2, 0));
    NUL(tfm_attention_create, E_ARG, attention_with(2, 3));
    NUL(tfm_attention_create, E_ARG, attention_with(2, -2));
    NUL(tfm_attention_create, E_ARG, attention_with(3, 1.0));
    NUL(tfm_attention_create, E_ARG, attention_with(3, NAN));
    NUL(tfm_attention_create, E_ARG, attention_with(4, -1.0));
    NUL(tfm_attention_create, E_ARG, attention_with(4, INFINITY));
    NUL(tfm_attention_create, E_SIZE, attention_with(1, 1e15));
    NUL(tfm_attention_create, E_ARG, attention_with(5, -1));
    NUL(tfm_attention_create, E_ARG, attention_with(5, 2147483648.0)); /* HEADS of 2^31 */
    NUL(tfm_attention_create, E_ARG, attention_with(6, 0));  /* then heads must divide D */
    NUL(tfm_attention_forward, E_NULL, tfm_attention_forward(tape, NULL, f->x, f->x, NULL, NULL, NULL));
    NUL(tfm_attention_forward, E_ARG, tfm_attention_forward(tape, f->linear, f->x, f->x, NULL, NULL, NULL));
    NUL(tfm_attention_forward, E_NULL, tfm_attention_forward(tape, f->attention, NULL, f->x, NULL, NULL, NULL));
    NUL(tfm_attention_forward, E_NULL, tfm_attention_forward(NULL, f->attention, f->x, f->x, NULL, NULL, NULL));
    NUL(tfm_attention_forward, E_SHAPE,
        tfm_attention_forward(tape, f->attention, f->f23, f->f23, NULL, NULL, NULL));
    NUL(tfm_attention_forward, E_SHAPE,
        tfm_attention_forward(tape, f->attention, f->x, f->mem3, NULL, NULL, NULL));
    NUL(tfm_attention_forward, E_SHAPE,
        tfm_attention_forward(tape, f->attention, f->x, f->x, f->i23, NULL, NULL));
    NUL(tfm_attention_forward, E_DTYPE,
        tfm_attention_forward(tape, f->attention, f->i3d, f->i3d, NULL, NULL, NULL));
    /* encoder and decoder */
    NUL(tfm_encoder_layer_create, E_NULL, tfm_encoder_layer_create(f->layer_params, "e", NULL, f->rng));
    NUL(tfm_encoder_layer_create, E_NULL,
        tfm_encoder_layer_create(f->layer_params, NULL, &(tfm_block_options){0}, f->rng));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 0, 0));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 1, 0));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 2, 3));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 3, 0));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 4, -0.5));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 5, 4));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 6, -1));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 7, NAN));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 8, -4));
    NUL(tfm_encoder_layer_create, E_SIZE, block_with(0, 3, 1e15));
    NUL(tfm_decoder_layer_create, E_NULL, tfm_decoder_layer_create(NULL, "d", NULL, f->rng));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 0, 8));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 1, -1));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 2, 0));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 3, -16));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 4, 2.0));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 5, -1));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 6, INFINITY));
    NUL(tfm_encoder_layer_forward, E_ARG, tfm_encoder_layer_forward(tape, f->decoder_layer, f->x, NULL, NULL));
    NUL(tfm_encoder_layer_forward, E_NULL, tfm_encoder_layer_forward(tape, f->encoder_layer, NULL, NULL, NULL));
    NUL(tfm_encoder_layer_forward, E_SHAPE,
        tfm_encoder_layer_forward(tape, f->encoder_layer, f->f23, NULL, NULL));
    NUL(tfm_encoder_layer_forward, E_SHAPE,
        tfm_encoder_layer_forward(tape, f->encoder_layer, f->x, f->f34, NULL));
    NUL(tfm_decoder_layer_forward, E_ARG,
        tfm_decoder_layer_forward(tape, f->encoder_layer, f->x, f->x, NULL, NULL, NULL, NULL));
    NUL(tfm_decoder_layer_forward, E_NULL,
        tfm_decoder_layer_forward(tape, f->decoder_layer, f->x, NULL, NULL, NULL, NULL, NULL));
    NUL(tfm_decoder_layer_forward, E_SHAPE,
        tfm_decoder_layer_forward(tape, f->decoder_layer, f->x, f->mem3, NULL, NULL, NULL, NULL));
    NUL(tfm_decoder_layer_forward, E_SHAPE,
        tfm_decoder_layer_forward(tape, f->decoder_layer, f->x, f->x, f->f34, NULL, NULL, NULL));
    NUL(tfm_decoder_layer_forward, E_SHAPE,
        tfm_decoder_layer_forward(tape, f->decoder_layer, f->x, f->x, NULL, f->i23, NULL, NULL));
    NUL(tfm_encoder_create, E_ARG, stack_with(0, -1, 0, 0));
    NUL(tfm_encoder_create, E_ARG, stack_with(0, 65537, 0, 0));
    NUL(tfm_encoder_create, E_ARG, stack_with(0, INT32_MIN, 0, 0));
    NUL(tfm_encoder_create, E_ARG, stack_with(0, 1, 1, 5));
    NUL(tfm_encoder_create, E_ARG, stack_with(0, 1, 2, 1));
    NUL(tfm_encoder_create, E_NULL, tfm_encoder_create(f->layer_params, "e", 1, NULL, 1, f->rng));
    NUL(tfm_decoder_create, E_ARG, stack_with(1, -2, 0, 0));
    NUL(tfm_decoder_create, E_ARG, stack_with(1, INT32_MAX, 0, 0));
    NUL(tfm_decoder_create, E_ARG, stack_with(1, 2, 1, 16));
    NUL(tfm_decoder_create, E_NULL, tfm_decoder_create(f->layer_params, "d", 1, &(tfm_block_options){0}, 1, NULL));
    NUL(tfm_encoder_forward, E_ARG, tfm_encoder_forward(tape, f->decoder, f->x, NULL, NULL));
    NUL(tfm_encoder_forward, E_SHAPE, tfm_encoder_forward(tape, f->encoder, f->mem3, f->f34, NULL));
    NUL(tfm_encoder_forward, E_SHAPE, tfm_encoder_forward(tape, f->encoder, f->f34, NULL, NULL));
    NUL(tfm_encoder_forward, E_NULL, tfm_encoder_forward(NULL, f->encoder, f->x, NULL, NULL));
    NUL(tfm_decoder_forward, E_ARG, tfm_decoder_forward(tape, f->encoder, f->x, f->x, NULL, NULL, NULL, NULL));
    NUL(tfm_decoder_forward, E_SHAPE, tfm_decoder_forward(tape, f->decoder, f->x, f->mem3, NULL, NULL, NULL, NULL));
    NUL(tfm_decoder_forward, E_SHAPE, tfm_decoder_forward(tape, f->decoder, f->x, f->x, f->i3d, NULL, NULL, NULL));
    NUL(tfm_decoder_forward, E_NULL, tfm_decoder_forward(tape, f->decoder, NULL, f->x, NULL, NULL, NULL, NULL));
    /* positions */
    NUL(tfm_sinusoidal_positions_create, E_ARG, tfm_sinusoidal_positions_create(0, 8));
    NUL(tfm_sinusoidal_positions_create, E_ARG, tfm_sinusoidal_positions_create(8, -1));
    NUL(tfm_sinusoidal_positions_create, E_SIZE, tfm_sinusoidal_positions_create(huge, 8));
    NUL(tfm_sinusoidal_positions_create, E_SIZE, tfm_sinusoidal_positions_create(big, big));
    NUL(tfm_learned_positions_create, E_NULL, tfm_learned_positions_create(NULL, "p", 4, 8, f->rng));
    NUL(tfm_learned_positions_create, E_NULL,
        tfm_learned_positions_create(f->layer_params, "p", 4, 8, NULL));
    NUL(tfm_learned_positions_create, E_ARG,
        tfm_learned_positions_create(f->layer_params, "p", -4, 8, f->rng));
    NUL(tfm_learned_positions_create, E_SIZE,
        tfm_learned_positions_create(f->layer_params, "p", big, big, f->rng));
    NUL(tfm_learned_positions_create, E_ARG,
        tfm_learned_positions_create(f->layer_params, "positions", 4, 8, f->rng));
    NUL(tfm_positions_forward, E_RANGE, positions_with(0));
    NUL(tfm_positions_forward, E_RANGE, positions_with(1));
    NUL(tfm_positions_forward, E_RANGE, positions_with(2));
    NUL(tfm_positions_forward, E_SHAPE, positions_with(3));
    NUL(tfm_positions_forward, E_ARG, tfm_positions_forward(tape, f->linear, f->x, 0));
    NUL(tfm_positions_forward, E_NULL, tfm_positions_forward(tape, NULL, f->x, 0));
    NUL(tfm_positions_forward, E_NULL, tfm_positions_forward(tape, f->sinusoidal, NULL, 0));
    /* masks */
    NUL(tfm_mask_causal, E_ARG, tfm_mask_causal(NULL, 0, TFM_I32));
    NUL(tfm_mask_causal, E_ARG, tfm_mask_causal(tape, 0, TFM_I32));
    NUL(tfm_mask_causal, E_ARG, tfm_mask_causal(tape, -4, TFM_F32));
    NUL(tfm_mask_causal, E_ARG, tfm_mask_causal(tape, 4, 2));
    NUL(tfm_mask_causal, E_ARG, tfm_mask_causal(tape, 4, -1));
    NUL(tfm_mask_causal, E_SIZE, tfm_mask_causal(tape, huge, TFM_I32));
    NUL(tfm_mask_causal, E_SIZE, tfm_mask_causal(tape, big, TFM_F32));
    NUL(tfm_mask_padding, E_NULL, tfm_mask_padding(tape, NULL, 0, TFM_I32));
    NUL(tfm_mask_padding, E_DTYPE, tfm_mask_padding(NULL, f->f23, 0, TFM_I32));
    NUL(tfm_mask_padding, E_DTYPE, tfm_mask_padding(tape, f->f23, 0, TFM_I32));
    NUL(tfm_mask_padding, E_SHAPE, tfm_mask_padding(tape, f->i3d, 0, TFM_I32));
    NUL(tfm_mask_padding, E_SHAPE, tfm_mask_padding(tape, f->i1, 0, TFM_F32));
    NUL(tfm_mask_padding, E_ARG, tfm_mask_padding(tape, f->src, 0, 7));
    NUL(tfm_mask_combine, E_NULL, tfm_mask_combine(tape, NULL, f->i23));
    NUL(tfm_mask_combine, E_NULL, tfm_mask_combine(tape, f->i23, NULL));
    NUL(tfm_mask_combine, E_DTYPE, tfm_mask_combine(NULL, f->i23, f->f23));
    /* calls added with the handles: clones, PyTorch's boolean masks, decode buffer sizes */
    NUL(tfm_tensor_clone, E_NULL, tfm_tensor_clone(NULL));
    NUL(tfm_mask_from_torch_bool, E_NULL, tfm_mask_from_torch_bool(tape, NULL, 2, SHAPE(2, 3), TFM_I32));
    NUL(tfm_mask_from_torch_bool, E_NULL, tfm_mask_from_torch_bool(tape, (const uint8_t *)ibuf, 2, NULL, TFM_I32));
    NUL(tfm_mask_from_torch_bool, E_ARG, tfm_mask_from_torch_bool(tape, (const uint8_t *)ibuf, 0, SHAPE(2), TFM_I32));
    NUL(tfm_mask_from_torch_bool, E_SHAPE, tfm_mask_from_torch_bool(tape, (const uint8_t *)ibuf, 2, SHAPE(2, -3), TFM_F32));
    NUL(tfm_mask_from_torch_bool, E_ARG, tfm_mask_from_torch_bool(tape, (const uint8_t *)ibuf, 2, SHAPE(2, 3), 7));
    ST(tfm_decoding_buffer_sizes, E_NULL, tfm_decoding_buffer_sizes(NULL, 1, shape, NULL, NULL, NULL));
    ST(tfm_decoding_buffer_sizes, E_ARG, tfm_decoding_buffer_sizes(f->greedy, 0, shape, NULL, NULL, NULL));
    ST(tfm_decoding_buffer_sizes, E_ARG, tfm_decoding_buffer_sizes(f->greedy, huge, shape, NULL, NULL, NULL));
    ST(tfm_decoding_run, E_SIZE, tfm_decoding_run(f->greedy, f->src, (int32_t *)ibuf, 1, (int32_t *)ibuf, 64, NULL, 0, NULL, 0, NULL, 0));
    ST(tfm_decoding_run, E_SIZE, tfm_decoding_run(f->greedy, f->src, f->tokens, B * (MAX_LEN + 1), (int32_t *)ibuf, 1, NULL, 0, NULL, 0, NULL, 0));
    ST(tfm_decoding_run, E_SIZE, tfm_decoding_run(f->greedy, f->src, f->tokens, B * (MAX_LEN + 1), (int32_t *)ibuf, B, buf, 0, NULL, 0, NULL, 0));
    ST(tfm_decoding_run, E_SIZE, tfm_decoding_run(f->greedy, f->src, f->tokens, B * (MAX_LEN + 1), (int32_t *)ibuf, B, NULL, 0, buf, 1, NULL, 0));
    NUL(tfm_mask_combine, E_DTYPE, tfm_mask_combine(tape, f->i23, f->f23));
    NUL(tfm_mask_combine, E_SHAPE, tfm_mask_combine(tape, f->f23, f->f34));
    /* initialisation */
    ST(tfm_init_xavier_uniform, E_NULL, tfm_init_xavier_uniform(NULL, 1.0f, f->rng));
    ST(tfm_init_xavier_uniform, E_NULL, tfm_init_xavier_uniform(f->f34, 1.0f, NULL));
    ST(tfm_init_xavier_uniform, E_DTYPE, tfm_init_xavier_uniform(f->i23, 1.0f, f->rng));
    ST(tfm_init_xavier_uniform, E_SHAPE, tfm_init_xavier_uniform(f->f2, 1.0f, f->rng));
    ST(tfm_init_xavier_uniform, E_ARG, tfm_init_xavier_uniform(f->f34, NAN, f->rng));
    ST(tfm_init_xavier_uniform, E_ARG, tfm_init_xavier_uniform(f->f34, -INFINITY, f->rng));
    ST(tfm_init_uniform, E_NULL, tfm_init_uniform(NULL, 0.0f, 1.0f, f->rng));
    ST(tfm_init_uniform, E_NULL, tfm_init_uniform(f->f34, 0.0f, 1.0f, NULL));
    ST(tfm_init_uniform, E_DTYPE, tfm_init_uniform(f->i23, 0.0f, 1.0f, f->rng));
    ST(tfm_init_uniform, E_ARG, tfm_init_uniform(f->f34, 1.0f, 0.0f, f->rng));
    ST(tfm_init_uniform, E_ARG, tfm_init_uniform(f->f34, -INFINITY, INFINITY, f->rng));
    ST(tfm_init_uniform, E_ARG, tfm_init_uniform(f->f34, NAN, 1.0f, f->rng));
    ST(tfm_init_uniform, E_ARG, tfm_init_uniform(f->f34, -FLT_MAX, FLT_MAX, f->rng));
    ST(tfm_init_normal, E_NULL, tfm_init_normal(NULL, 0.0f, 1.0f, f->rng));
    ST(tfm_init_normal, E_NULL, tfm_init_normal(f->f34, 0.0f, 1.0f, NULL));
    ST(tfm_init_normal, E_DTYPE, tfm_init_normal(f->i1, 0.0f, 1.0f, f->rng));
    ST(tfm_init_normal, E_ARG, tfm_init_normal(f->f34, 0.0f, -2.0f, f->rng));
    ST(tfm_init_normal, E_ARG, tfm_init_normal(f->f34, NAN, 1.0f, f->rng));
    ST(tfm_init_normal, E_ARG, tfm_init_normal(f->f34, 0.0f, INFINITY, f->rng));

    /* params.h */
    NUL(tfm_params_add, E_NULL, tfm_params_add(NULL, "w", 1, SHAPE(2)));
    NUL(tfm_params_add, E_NULL, add_param(NULL, 1, SHAPE(2)));
    NUL(tfm_params_add, E_ARG, add_param("", 1, SHAPE(2)));
    NUL(tfm_params_add, E_ARG, add_param(long_name(), 1, SHAPE(2)));
    NUL(tfm_params_add, E_ARG, add_param("taken", 1, SHAPE(2)));
    NUL(tfm_params_add, E_ARG, add_param("w\xff", 1, SHAPE(2)));      /* no save could write it */
    NUL(tfm_params_add, E_ARG, add_param("\xc0\xaf", 1, SHAPE(2)));  /* overlong '/' */
    NUL(tfm_params_add, E_ARG, add_param("w", 0, SHAPE(2)));
    NUL(tfm_params_add, E_ARG, add_param("w", 5, SHAPE(1, 1, 1, 1, 2)));
    NUL(tfm_params_add, E_NULL, add_param("w", 1, NULL));
    NUL(tfm_params_add, E_SHAPE, add_param("w", 2, SHAPE(2, 0)));
    NUL(tfm_params_add, E_SIZE, add_param("w", 2, SHAPE(huge, 2)));
    NUL(tfm_params_add, E_SIZE, add_param("w", 3, SHAPE(big, big, big)));
    NEG(tfm_params_count, E_NULL, tfm_params_count(NULL));
    NEG(tfm_params_numel, E_NULL, tfm_params_numel(NULL));
    NUL(tfm_params_at, E_NULL, tfm_params_at(NULL, 0));
    NUL(tfm_params_at, E_RANGE, tfm_params_at(f->params, -1));
    NUL(tfm_params_at, E_RANGE, tfm_params_at(f->params, tfm_params_count(f->params)));
    NUL(tfm_params_at, E_RANGE, tfm_params_at(f->params, huge));
    NUL(tfm_params_at, E_RANGE, tfm_params_at(f->empty, 0));
    NUL(tfm_params_name, E_NULL, tfm_params_name(NULL, 0));
    NUL(tfm_params_name, E_RANGE, tfm_params_name(f->params, INT64_MIN));
    NUL(tfm_params_name, E_RANGE, tfm_params_name(f->small, 1));
    NUL(tfm_params_find, E_NULL, tfm_params_find(NULL, "w"));
    NUL(tfm_params_find, E_NULL, tfm_params_find(f->params, NULL));
    NUL(tfm_params_find, E_ARG, tfm_params_find(f->params, "no.such.parameter"));
    NUL(tfm_params_find, E_ARG, tfm_params_find(f->empty, ""));
    NUL(tfm_params_values, E_NULL, tfm_params_values(NULL));
    NUL(tfm_params_grads, E_NULL, tfm_params_grads(NULL));
    ST(tfm_params_zero_grad, E_NULL, tfm_params_zero_grad(NULL));
    ST(tfm_params_clip_grad_norm, E_NULL, tfm_params_clip_grad_norm(NULL, 1.0f, NULL));
    ST(tfm_params_clip_grad_norm, E_ARG, tfm_params_clip_grad_norm(f->params, 0.0f, NULL));
    ST(tfm_params_clip_grad_norm, E_ARG, tfm_params_clip_grad_norm(f->params, -1.0f, buf));
    ST(tfm_params_clip_grad_norm, E_ARG, tfm_params_clip_grad_norm(f->params, NAN, NULL));
    ST(tfm_params_clip_grad_norm, E_NUMERIC, clip_infinite_gradient());

    /* optim.h */
    NUL(tfm_optimizer_create, E_NULL, tfm_optimizer_create(NULL, &(tfm_optimizer_options){0}));
    NUL(tfm_optimizer_create, E_NULL, tfm_optimizer_create(f->params, NULL));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 0, 0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 0, 4));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 1, 3));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 1, -1));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 2, -1e-3));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 2, NAN));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 2, 0.0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 2, -0.0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 2, INFINITY));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 3, 1.0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 3, -0.1));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 4, 1.5));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 4, NAN));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 5, -1e-8));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 6, -0.01));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 6, NAN));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 7, -0.9));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 8, -1.0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 8, INFINITY));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 9, 4));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 9, -1));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 10, 0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 11, -0.5));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_SGD, 11, NAN));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 12, 0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 12, INT64_MIN));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 13, 10));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAMW, 13, 0));
    NUL(tfm_optimizer_create, E_ARG, optimizer_with(TFM_OPTIMIZER_ADAM, 14, -1));
    NUL(tfm_optimizer_create, E_ARG, tfm_optimizer_create(f->empty, &(tfm_optimizer_options){.struct_size = sizeof(tfm_optimizer_options)}));
    ST(tfm_optimizer_zero_grad, E_NULL, tfm_optimizer_zero_grad(NULL));
    ST(tfm_optimizer_step, E_NULL, tfm_optimizer_step(NULL));
    ST(tfm_optimizer_step, E_STATE, step_after_store_grew());
    ST(tfm_optimizer_step, E_NUMERIC, step_on_nan_gradient(TFM_OPTIMIZER_ADAM));
    ST(tfm_optimizer_step, E_NUMERIC, step_on_nan_gradient(TFM_OPTIMIZER_SGD));
    NEG(tfm_optimizer_step_count, E_NULL, tfm_optimizer_step_count(NULL));
    NEG(tfm_optimizer_lr, E_NULL, tfm_optimizer_lr(NULL));
    NEG(tfm_optimizer_last_grad_norm, E_NULL, tfm_optimizer_last_grad_norm(NULL));
    ST(tfm_optimizer_save, E_NULL, tfm_optimizer_save(NULL, f->adam_path));
    ST(tfm_optimizer_save, E_NULL, tfm_optimizer_save(f->adam, NULL));
    ST(tfm_optimizer_save, E_ARG, tfm_optimizer_save(f->adam, ""));
    ST(tfm_optimizer_save, E_IO, tfm_optimizer_save(f->adam, f->missing_dir_path));
    ST(tfm_optimizer_save, E_IO, tfm_optimizer_save(f->adam, f->folder_path));
    ST(tfm_optimizer_load, E_NULL, tfm_optimizer_load(NULL, f->adam_path));
    ST(tfm_optimizer_load, E_NULL, tfm_optimizer_load(f->adam, NULL));
    ST(tfm_optimizer_load, E_IO, tfm_optimizer_load(f->adam, ""));
    ST(tfm_optimizer_load, E_IO, tfm_optimizer_load(f->adam, f->missing_path));
    ST(tfm_optimizer_load, E_IO, tfm_optimizer_load(f->adam, f->missing_dir_path));
    ST(tfm_optimizer_load, E_IO, tfm_optimizer_load(f->adam, f->folder_path));
    ST(tfm_optimizer_load, E_FORMAT, tfm_optimizer_load(f->adam, f->empty_path));
    ST(tfm_optimizer_load, E_FORMAT, tfm_optimizer_load(f->adam, f->text_path));
    ST(tfm_optimizer_load, E_FORMAT, tfm_optimizer_load(f->adam, f->params_path));
    ST(tfm_optimizer_load, E_ARG, tfm_optimizer_load(f->adam, f->sgd_path));
    ST(tfm_optimizer_load, E_SHAPE, tfm_optimizer_load(f->adam, f->small_adam_path));

    /* io.h */
    NUL(tfm_safetensors_open, E_NULL, tfm_safetensors_open(NULL));
    NUL(tfm_safetensors_open, E_IO, tfm_safetensors_open(""));
    NUL(tfm_safetensors_open, E_IO, tfm_safetensors_open(f->missing_path));
    NUL(tfm_safetensors_open, E_IO, tfm_safetensors_open(f->missing_dir_path));
    NUL(tfm_safetensors_open, E_IO, tfm_safetensors_open(f->folder_path));
    NUL(tfm_safetensors_open, E_FORMAT, tfm_safetensors_open(f->empty_path));
    NUL(tfm_safetensors_open, E_FORMAT, tfm_safetensors_open(f->text_path));
    NEG(tfm_safetensors_count, E_NULL, tfm_safetensors_count(NULL));
    NUL(tfm_safetensors_name, E_NULL, tfm_safetensors_name(NULL, 0));
    NUL(tfm_safetensors_name, E_RANGE, name_from(f->small_path, 1));
    NUL(tfm_safetensors_name, E_RANGE, name_from(f->small_path, -1));
    NUL(tfm_safetensors_get, E_NULL, tfm_safetensors_get(NULL, "w"));
    NUL(tfm_safetensors_get, E_NULL, get_from(f->small_path, NULL));
    NUL(tfm_safetensors_get, E_ARG, get_from(f->small_path, "v"));
    NUL(tfm_safetensors_get, E_ARG, get_from(f->small_path, ""));
    ST(tfm_safetensors_write, E_NULL, tfm_safetensors_write(NULL, 0, NULL, NULL));
    ST(tfm_safetensors_write, E_ARG, tfm_safetensors_write(f->missing_path, -1, NULL, NULL));
    ST(tfm_safetensors_write, E_NULL,
        tfm_safetensors_write(f->missing_path, 1, NULL, (const tfm_tensor *const[]){f->f1}));
    ST(tfm_safetensors_write, E_NULL,
        tfm_safetensors_write(f->missing_path, 1, (const char *const[]){"a"}, NULL));
    ST(tfm_safetensors_write, E_NULL, write_named(NULL));
    ST(tfm_safetensors_write, E_NULL, write_pair("a", f->f1, "b", NULL));
    ST(tfm_safetensors_write, E_ARG, write_named(""));
    ST(tfm_safetensors_write, E_ARG, write_named("__metadata__"));
    ST(tfm_safetensors_write, E_ARG, write_named("bad \xff utf-8"));
    ST(tfm_safetensors_write, E_ARG, write_named("\xc3"));
    ST(tfm_safetensors_write, E_ARG, write_pair("same", f->f1, "same", f->f23));
    ST(tfm_safetensors_write, E_ARG, save_one("", "a", f->f1));
    ST(tfm_safetensors_write, E_IO, save_one(f->missing_dir_path, "a", f->f1));
    ST(tfm_safetensors_write, E_IO, save_one(f->folder_path, "a", f->f1));
    ST(tfm_params_save, E_NULL, tfm_params_save(NULL, f->small_path));
    ST(tfm_params_save, E_NULL, tfm_params_save(f->small, NULL));
    ST(tfm_params_save, E_ARG, tfm_params_save(f->small, ""));
    ST(tfm_params_save, E_IO, tfm_params_save(f->small, f->missing_dir_path));
    ST(tfm_params_save, E_IO, tfm_params_save(f->small, f->folder_path));
    ST(tfm_params_load, E_NULL, tfm_params_load(NULL, f->small_path));
    ST(tfm_params_load, E_NULL, tfm_params_load(f->small, NULL));
    ST(tfm_params_load, E_IO, tfm_params_load(f->small, ""));
    ST(tfm_params_load, E_IO, tfm_params_load(f->small, f->missing_path));
    ST(tfm_params_load, E_IO, tfm_params_load(f->small, f->folder_path));
    ST(tfm_params_load, E_FORMAT, tfm_params_load(f->small, f->empty_path));
    ST(tfm_params_load, E_FORMAT, tfm_params_load(f->small, f->text_path));
    ST(tfm_params_load, E_FORMAT, tfm_params_load(f->params, f->small_path));
    ST(tfm_params_load, E_FORMAT, tfm_params_load(f->small, f->small_extra_path));
    ST(tfm_params_load, E_FORMAT, tfm_params_load(f->small, f->adam_path));
    ST(tfm_params_load, E_SHAPE, load_small_from(f->small_path, SHAPE(3, 2)));
    ST(tfm_params_load, E_SHAPE, load_small_from(f->small_other_path, SHAPE(2, 3)));
    ST(tfm_params_load, E_DTYPE, load_small_from(f->small_int_path, SHAPE(2, 3)));

    /* model.h */
    NUL(tfm_model_create, E_NULL, tfm_model_create(NULL));
    NUL(tfm_model_create, E_ARG, model_with(0, 0));
    NUL(tfm_model_create, E_ARG, model_with(0, 8));
    NUL(tfm_model_create, E_ARG, model_with(1, 0));
    NUL(tfm_model_create, E_ARG, model_with(1, -11));
    NUL(tfm_model_create, E_ARG, model_with(2, 0));
    NUL(tfm_model_create, E_ARG, model_with(3, -1));
    NUL(tfm_model_create, E_ARG, model_with(4, 0));
    NUL(tfm_model_create, E_ARG, model_with(5, 0));
    NUL(tfm_model_create, E_ARG, model_with(6, 5));
    NUL(tfm_model_create, E_ARG, model_with(6, -1));
    NUL(tfm_model_create, E_ARG, model_with(7, 3));
    NUL(tfm_model_create, E_ARG, model_with(7, -1));
    NUL(tfm_model_create, E_ARG, model_with(8, -1));
    NUL(tfm_model_create, E_ARG, model_with(9, INT32_MIN));
    NUL(tfm_model_create, E_ARG, model_with(10, 3));
    NUL(tfm_model_create, E_ARG, model_with(11, 0));
    NUL(tfm_model_create, E_ARG, model_with(12, 1.0));
    NUL(tfm_model_create, E_ARG, model_with(13, 1.0));
    NUL(tfm_model_create, E_ARG, model_with(14, NAN));
    NUL(tfm_model_create, E_ARG, model_with(15, 0));
    NUL(tfm_model_create, E_ARG, model_with(16, 9));
    NUL(tfm_model_create, E_ARG, model_with(17, NAN));
    NUL(tfm_model_create, E_ARG, model_with(1, 1e18));
    NUL(tfm_model_create, E_ARG, model_with(4, 1e18));
    NUL(tfm_model_create, E_ARG, model_with(11, 1e18));
    /* options a model file could not carry: refused when made, not when
     * its checkpoint is read back */
    NUL(tfm_model_create, E_ARG, model_with(18, 2));
    NUL(tfm_model_create, E_ARG, model_with(19, -1));
    NUL(tfm_model_create, E_ARG, model_with(20, 7));
    NUL(tfm_model_create, E_ARG, model_with(21, 2));
    NUL(tfm_model_create, E_ARG, model_with(22, 3));
    NUL(tfm_model_create, E_ARG, model_with(23, 2));
    NUL(tfm_model_create, E_ARG, model_with(13, -1.5));
    NUL(tfm_model_create, E_ARG, model_with(13, NAN));
    NUL(tfm_model_create, E_ARG, model_with(24, -1.0));
    NUL(tfm_model_create, E_ARG, model_with(24, 1e31));
    NUL(tfm_model_create, E_ARG, model_with(17, 2.0));
    NUL(tfm_model_create, E_ARG, model_with(8, 4097));
    NUL(tfm_model_create, E_ARG, model_with(9, 4097));
    NUL(tfm_model_create, E_ARG, model_with(17, 1e-40));  /* subnormal */
    NUL(tfm_model_create, E_ARG, model_with(25, 1e-42));
    NUL(tfm_model_create, E_ARG, model_with(13, -1e-41));
    NUL(tfm_model_create, E_ARG, model_with(26, 2147483648.0)); /* tables of 2^63 values */
    NUL(tfm_model_create, E_SIZE, model_with(27, 1000000));
    NUL(tfm_model_create, E_ARG, model_with(28, -1));
    NUL(tfm_model_create, E_ARG, model_with(28, 2147483649.0));
    NUL(tfm_model_create, E_SIZE, model_with(28, 1000000)); /* offset rows count as positions */
    NUL(tfm_model_create, E_ARG, model_with(29, 2));
    NUL(tfm_model_create, E_ARG, model_with(30, -1));
    NUL(tfm_model_create, E_ARG, model_with(31, 2));
    NUL(tfm_model_create, E_ARG, model_with(32, -1));
    NUL(tfm_model_create, E_ARG, model_with(33, 2));
    NUL(tfm_model_create, E_ARG, model_with(34, 1)); /* unscaled has no scale */
    NUL(tfm_model_create, E_ARG, model_with(35, 2));  /* too few to halve twice */
    NUL(tfm_model_create, E_ARG, model_with(35, 65537));
    NUL(tfm_model_create, E_ARG, model_with(36, 16)); /* not past the exact half */
    NUL(tfm_model_create, E_ARG, model_with(36, 0));
    NUL(tfm_model_create, E_ARG, model_with(37, 2));
    NUL(tfm_model_create, E_ARG, model_with(38, -1));
    NUL(tfm_model_create, E_ARG, model_with(38, 2147483649.0)); /* past a file's bound */
    NUL(tfm_model_create, E_ARG, model_with(38, 1073741825.0)); /* 2 heads of it past 2^31 */
    NUL(tfm_model_create, E_ARG, model_with(39, 0));
    NUL(tfm_model_params, E_NULL, tfm_model_params(NULL));
    NEG(tfm_model_parameter_count, E_NULL, tfm_model_parameter_count(NULL));
    ST(tfm_model_set_training, E_NULL, tfm_model_set_training(NULL, 0));
    NUL(tfm_model_encode, E_NULL, tfm_model_encode(tape, NULL, f->src, NULL, NULL));
    NUL(tfm_model_encode, E_NULL, tfm_model_encode(NULL, f->model, f->src, NULL, NULL));
    NUL(tfm_model_encode, E_NULL, tfm_model_encode(tape, f->model, NULL, NULL, NULL));
    NUL(tfm_model_encode, E_DTYPE, tfm_model_encode(tape, f->model, f->x, NULL, NULL));
    NUL(tfm_model_encode, E_SHAPE, tfm_model_encode(tape, f->model, f->i3d, NULL, NULL));
    NUL(tfm_model_encode, E_RANGE, tfm_model_encode(tape, f->model, f->long_src, NULL, NULL));
    NUL(tfm_model_encode, E_SHAPE, tfm_model_encode(tape, f->model, f->src, f->f34, NULL));
    ST(tfm_model_encode, E_RANGE, run_on_ids((const int32_t[]){1, SRC_VOCAB}, 2, 0));
    ST(tfm_model_encode, E_RANGE, run_on_ids((const int32_t[]){-1, 1}, 2, 0));
    NUL(tfm_model_decode, E_NULL, tfm_model_decode(tape, NULL, f->tgt, f->x, NULL, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_NULL, tfm_model_decode(tape, f->model, f->tgt, NULL, NULL, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_NULL, tfm_model_decode(tape, f->model, NULL, f->x, NULL, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_SHAPE, tfm_model_decode(tape, f->model, f->tgt, f->mem3, NULL, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_SHAPE, tfm_model_decode(tape, f->model, f->tgt, f->f23, NULL, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_SHAPE, tfm_model_decode(tape, f->model, f->tgt, f->x, f->f23, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_DTYPE, tfm_model_decode(tape, f->model, f->x, f->x, NULL, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_RANGE, model_decode_on((const int32_t[]){1, 2, 3, TGT_VOCAB}, 2));
    NUL(tfm_model_decode, E_RANGE, model_decode_on((const int32_t[]){1, 2, 3, 4, 5, 6, 7, 8, 1, 2,
                                                                      3, 4},
                                                    6));
    NUL(tfm_model_forward, E_NULL, tfm_model_forward(tape, NULL, f->src, f->tgt, NULL, NULL, NULL, NULL, NULL, NULL));
    NUL(tfm_model_forward, E_NULL, tfm_model_forward(tape, f->model, NULL, f->tgt, NULL, NULL, NULL, NULL, NULL, NULL));
    NUL(tfm_model_forward, E_NULL, tfm_model_forward(tape, f->model, f->src, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
    NUL(tfm_model_forward, E_SHAPE,
        tfm_model_forward(tape, f->model, f->src, f->i3d, NULL, NULL, NULL, NULL, NULL, NULL));
    NUL(tfm_model_forward, E_SHAPE,
        tfm_model_forward(tape, f->model, f->src, f->tgt, NULL, f->f23, NULL, NULL, NULL, NULL));

    /* decode.h */
    NUL(tfm_decoding_create, E_NULL, tfm_decoding_create(NULL, &(tfm_decode_options){0}, 1, 1));
    NUL(tfm_decoding_create, E_NULL, tfm_decoding_create(f->model, NULL, 1, 1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 0, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 0, 4));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 1, 3));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 1, -1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 2, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 2, T + 1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 2, INT32_MAX));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 3, -1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 3, TGT_VOCAB));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 4, -2));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 4, TGT_VOCAB));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 5, -2));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 5, SRC_VOCAB));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 6, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 6, -1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 6, NAN));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 6, INFINITY));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 7, -1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 8, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 8, 1.5));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 8, NAN));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 9, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 9, 65537));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 10, NAN));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 10, -INFINITY));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 11, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 11, 5));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 12, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 12, -1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 13, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 13, S + 1));
    NUL(tfm_decoding_create, E_SIZE, decoding_with(TFM_DECODE_GREEDY, 12, 9e18));
    NUL(tfm_decoding_create, E_SIZE, decoding_with(TFM_DECODE_BEAM, 12, 1e9));
    ST(tfm_decoding_run, E_NULL, decoding_run_with(NULL, f->src, 0));
    ST(tfm_decoding_run, E_NULL, decoding_run_with(f->greedy, NULL, 0));
    ST(tfm_decoding_run, E_NULL, decoding_run_with(f->greedy, f->src, 1));
    ST(tfm_decoding_run, E_NULL, decoding_run_with(f->beam, f->src, 2));
    ST(tfm_decoding_run, E_DTYPE, decoding_run_with(f->greedy, f->x, 0));
    ST(tfm_decoding_run, E_SHAPE, decoding_run_with(f->greedy, f->i1, 0));
    ST(tfm_decoding_run, E_SHAPE, decoding_run_with(f->greedy, f->i3d, 0));
    ST(tfm_decoding_run, E_SHAPE, decoding_run_with(f->greedy, f->long_src, 0));
    ST(tfm_decoding_run, E_SHAPE, decoding_run_with(f->beam, f->long_src, 0));
    ST(tfm_decoding_run, E_ARG, decoding_run_with(f->beam, f->src, 3));
    ST(tfm_decoding_run, E_ARG, decoding_run_with(f->beam, f->src, 4));
    ST(tfm_decoding_run, E_RANGE, run_on_ids((const int32_t[]){1, 2, SRC_VOCAB}, 3, 1));
    ST(tfm_decoding_run, E_RANGE, run_on_ids((const int32_t[]){INT32_MIN, 2}, 2, 1));
    /* calls added with model files and training states */
    ST(tfm_rng_copy, E_NULL, tfm_rng_copy(NULL, f->rng));
    ST(tfm_rng_copy, E_NULL, tfm_rng_copy(f->rng, NULL));
    NEG(tfm_safetensors_metadata_count, E_NULL, tfm_safetensors_metadata_count(NULL));
    NUL(tfm_safetensors_metadata_key, E_NULL, tfm_safetensors_metadata_key(NULL, 0));
    NUL(tfm_safetensors_metadata_key, E_RANGE, metadata_of(f->model_path, -1, NULL));
    NUL(tfm_safetensors_metadata_key, E_RANGE, metadata_of(f->small_path, 0, NULL));
    NUL(tfm_safetensors_metadata_get, E_NULL, tfm_safetensors_metadata_get(NULL, "k"));
    NUL(tfm_safetensors_metadata_get, E_ARG, metadata_of(f->model_path, 0, "no.such.key"));
    ST(tfm_safetensors_write_with_metadata, E_ARG, write_metadata(-1, "k", "v"));
    ST(tfm_safetensors_write_with_metadata, E_NULL, write_metadata(1, NULL, "v"));
    ST(tfm_safetensors_write_with_metadata, E_NULL, write_metadata(1, "k", NULL));
    ST(tfm_safetensors_write_with_metadata, E_ARG, write_metadata(1, "", "v"));
    ST(tfm_safetensors_write_with_metadata, E_ARG, write_metadata(2, "twice", "v"));
    ST(tfm_safetensors_write_with_metadata, E_ARG, write_metadata(1, "bad \xff", "v"));
    ST(tfm_safetensors_write_with_metadata, E_ARG, write_metadata(1, "k", "bad \xfe"));
    ST(tfm_params_load_with, E_NULL, tfm_params_load_with(NULL, f->small_path, NULL, NULL));
    ST(tfm_params_load_with, E_NULL, tfm_params_load_with(f->small, NULL, NULL, NULL));
    ST(tfm_params_load_with, E_IO, tfm_params_load_with(f->small, f->missing_path, NULL, NULL));
    ST(tfm_params_load_with, E_ARG, load_with(f->small_path, 0));
    ST(tfm_params_load_with, E_NUMERIC, load_with(f->nan_path, 1));
    ST(tfm_params_load_with, E_FORMAT, load_with(f->prefixed_path, 2));
    ST(tfm_params_load_with, E_SHAPE, load_with(f->small_other_path, 3));
    NEG(tfm_load_report_count, E_NULL, tfm_load_report_count(NULL, TFM_LOAD_LOADED));
    NEG(tfm_load_report_count, E_ARG, report_count(3, 0, NULL));
    NEG(tfm_load_report_count, E_ARG, report_count(-1, 0, NULL));
    NUL(tfm_load_report_name, E_NULL, tfm_load_report_name(NULL, TFM_LOAD_LOADED, 0));
    NUL(tfm_load_report_name, E_RANGE, report_name(TFM_LOAD_LOADED, 1));
    NUL(tfm_load_report_name, E_RANGE, report_name(TFM_LOAD_SKIPPED, 0));
    NUL(tfm_load_report_name, E_RANGE, report_name(TFM_LOAD_LOADED, -1));
    ST(tfm_optimizer_set_lr, E_NULL, tfm_optimizer_set_lr(NULL, 0.1f));
    ST(tfm_optimizer_set_lr, E_ARG, tfm_optimizer_set_lr(f->adam, -0.1f));
    ST(tfm_optimizer_set_lr, E_ARG, tfm_optimizer_set_lr(f->adam, NAN));
    ST(tfm_optimizer_set_lr, E_ARG, tfm_optimizer_set_lr(f->adam, INFINITY));
    ST(tfm_optimizer_set_lr, E_ARG, tfm_optimizer_set_lr(f->adam, 0.0f)); /* "> 0" */
    ST(tfm_optimizer_set_weight_decay, E_NULL, tfm_optimizer_set_weight_decay(NULL, 0, 0.1f));
    ST(tfm_optimizer_set_weight_decay, E_RANGE, tfm_optimizer_set_weight_decay(f->adam, -2, 0.1f));
    ST(tfm_optimizer_set_weight_decay, E_RANGE,
        tfm_optimizer_set_weight_decay(f->adam, tfm_params_count(f->params), 0.1f));
    ST(tfm_optimizer_set_weight_decay, E_ARG, tfm_optimizer_set_weight_decay(f->adam, 0, -1.0f));
    ST(tfm_optimizer_set_weight_decay, E_ARG, tfm_optimizer_set_weight_decay(f->adam, -1, NAN));
    NEG(tfm_optimizer_weight_decay, E_NULL, tfm_optimizer_weight_decay(NULL, 0));
    NEG(tfm_optimizer_weight_decay, E_RANGE, tfm_optimizer_weight_decay(f->adam, huge));
    ST(tfm_optimizer_no_decay_for_vectors, E_NULL, tfm_optimizer_no_decay_for_vectors(NULL));
    ST(tfm_model_get_options, E_NULL, tfm_model_get_options(NULL, &(tfm_model_options){0}));
    ST(tfm_model_get_options, E_NULL, tfm_model_get_options(f->model, NULL));
    ST(tfm_model_get_options, E_ARG, tfm_model_get_options(f->model, &(tfm_model_options){0}));
    /* calls added with data-parallel training */
    ST(tfm_rng_set_shard, E_NULL, tfm_rng_set_shard(NULL, 0, 1));
    ST(tfm_rng_set_shard, E_ARG, tfm_rng_set_shard(f->rng, 2, 2));
    ST(tfm_rng_set_shard, E_ARG, tfm_rng_set_shard(f->rng, -1, 2));
    ST(tfm_rng_set_shard, E_ARG, tfm_rng_set_shard(f->rng, 0, 0));
    /* slices whose dropout counters would overflow (shard_index * numel) */
    ST(tfm_rng_set_shard, E_ARG, tfm_rng_set_shard(f->rng, 0, TFM_MAX_SHARDS + 1));
    ST(tfm_rng_set_shard, E_ARG, tfm_rng_set_shard(f->rng, INT64_MAX - 1, INT64_MAX));
    ST(tfm_model_set_shard, E_NULL, tfm_model_set_shard(NULL, 0, 1));
    ST(tfm_model_set_shard, E_ARG, tfm_model_set_shard(f->model, 1, 1));
    ST(tfm_model_set_shard, E_ARG, tfm_model_set_shard(f->model, 0, INT64_MIN));
    ST(tfm_model_set_shard, E_ARG, tfm_model_set_shard(f->model, (int64_t)1 << 40, (int64_t)1 << 41));
    ST(tfm_model_option, E_NULL, option_of(NULL, 0, 1, 96));
    ST(tfm_model_option, E_NULL, option_of(f->model, 0, 0, 96));
    ST(tfm_model_option, E_NULL, tfm_model_option(f->model, 0, &(const char *){0}, NULL, 96));
    ST(tfm_model_option, E_RANGE, option_of(f->model, -1, 1, 96));
    ST(tfm_model_option, E_RANGE, option_of(f->model, tfm_model_option_count(), 1, 96));
    ST(tfm_model_option, E_SIZE, option_of(f->model, 0, 1, 1));
    ST(tfm_model_option, E_SIZE, option_of(f->model, 0, 1, -5));
    NEG(tfm_model_src_vocab, E_NULL, tfm_model_src_vocab(NULL));
    NEG(tfm_model_tgt_vocab, E_NULL, tfm_model_tgt_vocab(NULL));
    NEG(tfm_model_max_src_len, E_NULL, tfm_model_max_src_len(NULL));
    NEG(tfm_model_max_tgt_len, E_NULL, tfm_model_max_tgt_len(NULL));
    NEG(tfm_model_d_model, E_NULL, tfm_model_d_model(NULL));
    ST(tfm_model_set_tokenizers, E_NULL, tfm_model_set_tokenizers(NULL, f->tokenizer, NULL));
    ST(tfm_model_set_tokenizers, E_NULL, tfm_model_set_tokenizers(f->model, NULL, f->tokenizer));
    ST(tfm_model_set_tokenizers, E_ARG, tfm_model_set_tokenizers(f->model, f->tokenizer12, NULL));
    ST(tfm_model_set_tokenizers, E_ARG, tfm_model_set_tokenizers(f->model, f->tokenizer10, NULL));
    ST(tfm_model_set_tokenizers, E_ARG,
       tfm_model_set_tokenizers(f->model, f->tokenizer, f->tokenizer10));
    ST(tfm_model_save, E_NULL, tfm_model_save(NULL, f->model_path));
    ST(tfm_model_save, E_NULL, tfm_model_save(f->model, NULL));
    ST(tfm_model_save, E_ARG, tfm_model_save(f->model, ""));
    ST(tfm_model_save, E_IO, tfm_model_save(f->model, f->missing_dir_path));
    ST(tfm_model_save, E_IO, tfm_model_save(f->model, f->folder_path));
    ST(tfm_model_save_with_metadata, E_ARG, model_metadata(1, "tfm.d_model"));
    ST(tfm_model_save_with_metadata, E_ARG, model_metadata(-1, "k"));
    ST(tfm_model_save_with_metadata, E_ARG, model_metadata(1, ""));
    ST(tfm_model_save_with_metadata, E_NULL, model_metadata(1, NULL));
    NUL(tfm_model_load, E_NULL, tfm_model_load(NULL));
    NUL(tfm_model_load, E_IO, tfm_model_load(""));
    NUL(tfm_model_load, E_IO, tfm_model_load(f->missing_path));
    NUL(tfm_model_load, E_IO, tfm_model_load(f->folder_path));
    NUL(tfm_model_load, E_FORMAT, tfm_model_load(f->empty_path));
    NUL(tfm_model_load, E_FORMAT, tfm_model_load(f->text_path));
    NUL(tfm_model_load, E_FORMAT, tfm_model_load(f->params_path));
    NUL(tfm_model_load, E_FORMAT, tfm_model_load(f->adam_path));
    /* the tokenizers a model file carries, forged */
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", ""));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", "QUJD!EVG"));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", "QUJDREV"));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", "AB=C"));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", "QUJDREVG"));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", "VEZNLUJCUEX//////////w=="));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", f->oversized_base64));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", f->base64_12));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", NULL));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.target_tokenizer", f->base64_10));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.target_tokenizer", "AAAA"));
    ST(tfm_training_save, E_NULL, tfm_training_save(NULL, f->model, f->adam, 0, NULL, 0, NULL, NULL));
    ST(tfm_training_save, E_NULL, tfm_training_save(f->missing_path, NULL, f->adam, 0, NULL, 0, NULL, NULL));
    ST(tfm_training_save, E_NULL, tfm_training_save(f->missing_path, f->model, NULL, 0, NULL, 0, NULL, NULL));
    ST(tfm_training_save, E_IO, tfm_training_save(f->missing_dir_path, f->model, f->adam, 0, NULL, 0, NULL, NULL));
    ST(tfm_training_save, E_IO, tfm_training_save(f->folder_path, f->model, f->adam, 0, NULL, 0, NULL, NULL));
    ST(tfm_training_save, E_ARG, training_save_with(0));
    ST(tfm_training_save, E_NULL, training_save_with(1));
    ST(tfm_training_save, E_ARG, training_save_with(2));
    ST(tfm_training_save, E_ARG, training_save_with(3));
    ST(tfm_training_load, E_NULL, tfm_training_load(NULL, f->model, f->adam, 0, NULL));
    ST(tfm_training_load, E_NULL, tfm_training_load(f->training_path, NULL, f->adam, 0, NULL));
    ST(tfm_training_load, E_NULL, tfm_training_load(f->training_path, f->model, NULL, 0, NULL));
    ST(tfm_training_load, E_IO, tfm_training_load(f->missing_path, f->model, f->adam, 0, NULL));
    ST(tfm_training_load, E_IO, tfm_training_load(f->folder_path, f->model, f->adam, 0, NULL));
    ST(tfm_training_load, E_FORMAT, tfm_training_load(f->text_path, f->model, f->adam, 0, NULL));
    ST(tfm_training_load, E_ARG, training_load_with(0));
    ST(tfm_training_load, E_ARG, training_load_with(1));
    ST(tfm_training_load, E_ARG, training_load_with(2));
    ST(tfm_training_load, E_FORMAT, training_load_with(3));
    ST(tfm_training_load, E_NULL, training_load_with(4));
    return -1;
}

/* --- the test ------------------------------------------------------------------------- */

/* The shared handles still give what they gave before any case ran. */
static void check_fixture_intact(const char *after)
{
    tfm_clear_error();
    float loss = model_loss();
    ck_assert_msg(memcmp(&loss, &fx.loss, sizeof loss) == 0,
                  "after %s: the model's loss changed from %g to %g", after, (double)fx.loss,
                  (double)loss);
    int64_t numel = tfm_params_numel(fx.params);
    ck_assert_msg(memcmp(tfm_params_values(fx.params), fx.values, (size_t)numel * sizeof(float)) == 0,
                  "after %s: the model's parameters changed", after);
    ck_assert_msg(memcmp(tfm_params_grads(fx.params), fx.grads, (size_t)numel * sizeof(float)) == 0,
                  "after %s: the model's gradients changed", after);
    ck_assert_msg(tfm_params_numel(fx.layer_params) * (int64_t)sizeof(float) > 0 &&
                      memcmp(tfm_params_values(fx.layer_params), fx.layer_values,
                             (size_t)tfm_params_numel(fx.layer_params) * sizeof(float)) == 0,
                  "after %s: the layers' parameters changed (%lld scalars)", after,
                  (long long)tfm_params_numel(fx.layer_params));
    ck_assert_int_eq(tfm_params_count(fx.small), 1);
    ck_assert_int_eq(tfm_params_count(fx.empty), 0);
    float values[7][64];
    memset(values, 0, sizeof values);
    snapshot_tensors(values);
    ck_assert_msg(memcmp(values, fx.tensor_values, sizeof values) == 0,
                  "after %s: a caller-owned tensor changed", after);
    int32_t tokens[B * (MAX_LEN + 1)], lengths[B];
    ck_assert_int_eq(tfm_decoding_run(fx.greedy, fx.src, tokens, B * (MAX_LEN + 1), lengths, B,
                                      NULL, 0, NULL, 0, NULL, 0),
                     TFM_OK);
    ck_assert_msg(memcmp(tokens, fx.tokens, sizeof tokens) == 0 &&
                      memcmp(lengths, fx.lengths, sizeof lengths) == 0,
                  "after %s: decoding changed", after);
    ck_assert_int_eq(tfm_optimizer_step_count(fx.adam), 0);
    ck_assert(tfm_optimizer_lr(fx.adam) == 1e-3f);
    ck_assert(tfm_optimizer_weight_decay(fx.adam, 0) == 0.0f);
    ck_assert_int_eq(tfm_get_num_threads(), 1);
    ck_assert_msg(tfm_tokenizer_vocab_size(tfm_model_tokenizer(fx.model, 0)) == 9 &&
                      tfm_tokenizer_piece_to_id(tfm_model_tokenizer(fx.model, 1), "x", 1) >= 0,
                  "after %s: the model's tokenizers changed", after);
    ck_assert_msg(tfm_last_status() == TFM_OK, "after %s: valid calls failed: %s", after,
                  tfm_last_error());
}

START_TEST(every_bad_call_fails_cleanly)
{
    setup();
    enum { MAX_CASES = 1024 };
    static bad_case cases[MAX_CASES];
    int count = 0;
    for (;; count++) {
        ck_assert_int_lt(count, MAX_CASES);
        bad_case *c = &cases[count];
        tfm_clear_error();
        int failed = run_case(count, c);
        if (failed < 0)
            break;
        if (!failed)
            problem("%s: returned success (%s)", c->call, tfm_status_name(tfm_last_status()));
        else if (tfm_last_status() != c->status)
            problem("%s: %s, expected %s: \"%s\"", c->call, tfm_status_name(tfm_last_status()),
                    tfm_status_name(c->status), tfm_last_error());
        else if (!strstr(tfm_last_error(), c->function))
            problem("%s: the message does not name %s: \"%s\"", c->call, c->function,
                    tfm_last_error());
        if (LEAK_CHECK())
            problem("%s leaks", c->call);
        check_fixture_intact(c->call);
    }
    /* every case is a different call */
    for (int i = 0; i < count; i++)
        for (int j = i + 1; j < count; j++)
            ck_assert_msg(strcmp(cases[i].call, cases[j].call) != 0, "cases %d and %d are both %s",
                          i, j, cases[i].call);
    printf("bad_input: %d distinct bad calls\n", count);
    ck_assert_msg(problems == 0, "%ld of %d bad calls went wrong (listed above)", problems, count);
    ck_assert_int_ge(count, 300);
    teardown();
    ck_assert_int_eq(LEAK_CHECK(), 0);
}
END_TEST

/* Freeing NULL is allowed everywhere and records no error. */
START_TEST(freeing_null_is_harmless)
{
    tfm_clear_error();
    tfm_rng_free(NULL);
    tfm_tensor_free(NULL);
    tfm_tape_free(NULL);
    tfm_layer_free(NULL);
    tfm_params_free(NULL);
    tfm_optimizer_free(NULL);
    tfm_safetensors_close(NULL);
    tfm_model_free(NULL);
    tfm_decoding_free(NULL);
    tfm_attention_options_init_sized(NULL, sizeof(tfm_attention_options));
    tfm_block_options_init_sized(NULL, sizeof(tfm_block_options));
    tfm_optimizer_options_init_sized(NULL, TFM_OPTIMIZER_ADAM, sizeof(tfm_optimizer_options));
    tfm_model_options_init_sized(NULL, sizeof(tfm_model_options));
    tfm_decode_options_init_sized(NULL, sizeof(tfm_decode_options));
    tfm_load_options_init_sized(NULL, sizeof(tfm_load_options));
    tfm_load_report_free(NULL);
    ck_assert_int_eq(tfm_last_status(), TFM_OK);
    ck_assert_str_eq(tfm_last_error(), "");
}
END_TEST

static Suite *bad_input_suite(void)
{
    Suite *s = suite_create("bad_input");
    TCase *tc = tcase_create("bad_input");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, every_bad_call_fails_cleanly);
    tcase_add_test(tc, freeing_null_is_harmless);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(bad_input_suite)
