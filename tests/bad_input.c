/* The bad-input suites' fixture and run (bad_input.h). */
#define _GNU_SOURCE
#include "bad_input.h"

#include <sys/stat.h>
#include <unistd.h>

#include "problems.h"
#include "rewrite_metadata.h"

fixture fx;

tfm_model_options model_options(void)
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

tfm_block_options block_options(void)
{
    tfm_block_options o;
    tfm_block_options_init(&o);
    o.d_model = D;
    o.heads = HEADS;
    o.d_ff = 16;
    return o;
}

tfm_attention_options attention_options(void)
{
    tfm_attention_options o;
    tfm_attention_options_init(&o);
    o.d_model = D;
    o.heads = HEADS;
    return o;
}

tfm_optimizer_options optimizer_options(tfm_optimizer_kind kind)
{
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, kind);
    return o;
}

tfm_decode_options decode_options(tfm_decode_strategy strategy)
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

tfm_status save_one(const char *path, const char *name, const tfm_tensor *t)
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
tfm_model *load_forged(const char *key, const char *value)
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

/* --- helpers more than one room's table calls ------------------------------------- */

tfm_status decoding_run_with(tfm_decoding *d, const tfm_tensor *src, int null_field)
{
    static int32_t tokens[B * 2 * (MAX_LEN + 1)], lengths[B * 2];
    static float scores[B * 2], logits[B * MAX_LEN * TGT_VOCAB];
    const int64_t n_logits = B * MAX_LEN * TGT_VOCAB;
    return tfm_decoding_run(d, src, null_field == 1 ? NULL : tokens, B * 2 * (MAX_LEN + 1),
                            null_field == 2 ? NULL : lengths, B * 2, scores, B * 2,
                            null_field == 3 ? logits : NULL, null_field == 3 ? n_logits : 0,
                            null_field == 4 ? logits : NULL, null_field == 4 ? n_logits : 0);
}

tfm_status run_on_ids(const int32_t *values, int64_t count, int decode)
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

const char *long_name(void)
{
    static char name[300];
    memset(name, 'n', sizeof name - 1);
    return name;
}

/* --- the run ---------------------------------------------------------------------- */

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

/* The room this program runs (bad_input_suite). */
static struct {
    const char *room;
    bad_table table;
    int at_least;
    void (*free_nulls)(void);
} this_room;

START_TEST(every_bad_call_fails_cleanly)
{
    const char *room = this_room.room;
    int at_least = this_room.at_least;
    setup();
    enum { MAX_CASES = 1024 };
    static bad_case cases[MAX_CASES];
    int count = 0;
    for (;; count++) {
        ck_assert_int_lt(count, MAX_CASES);
        bad_case *c = &cases[count];
        tfm_clear_error();
        int failed = this_room.table(count, c);
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
    printf("%s: %d distinct bad calls\n", room, count);
    ck_assert_msg(problems == 0, "%ld of %d bad calls went wrong (listed above)", problems, count);
    ck_assert_msg(count >= at_least, "%s: %d bad calls, fewer than the %d it had", room, count,
                  at_least);
    teardown();
    ck_assert_int_eq(LEAK_CHECK(), 0);
}
END_TEST

START_TEST(freeing_null_is_harmless)
{
    tfm_clear_error();
    this_room.free_nulls();
    ck_assert_int_eq(tfm_last_status(), TFM_OK);
    ck_assert_str_eq(tfm_last_error(), "");
}
END_TEST

Suite *bad_input_suite(const char *room, bad_table table, int at_least, void (*free_nulls)(void))
{
    this_room.room = room;
    this_room.table = table;
    this_room.at_least = at_least;
    this_room.free_nulls = free_nulls;
    Suite *s = suite_create(room);
    TCase *tc = tcase_create(room);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, every_bad_call_fails_cleanly);
    if (free_nulls)
        tcase_add_test(tc, freeing_null_is_harmless);
    suite_add_tcase(s, tc);
    return s;
}
