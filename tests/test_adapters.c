/* Low-rank adapters (adapters.h): the adapted linears' gradients, merging,
 * training only the adapter over a float32 or int8 base, PEFT's files,
 * decoding and translating with an adapter chosen per call, and the bad
 * calls. Links the library's objects: the gradient checks reseed the
 * model's dropout stream (model/model.h) so each forward draws one mask. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tfm/tfm.h>

#include "check_main.h"
#include "gradcheck.h"
#include "io/json.h"
#include "model/model.h"

#define VOCAB 13
#define LEN 5
#define MAXT 7
#define BOS 1
#define EOS 2

static tfm_model *tiny_with(int fused, int layers, tfm_activation activation)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = o.tgt_vocab = VOCAB;
    o.max_src_len = LEN;
    o.max_tgt_len = MAXT;
    o.encoder_layers = o.decoder_layers = layers;
    o.d_model = 8;
    o.heads = 2;
    o.d_ff = 12;
    o.dropout = 0.0f;
    o.fused_qkv = fused;
    o.activation = activation;
    o.positions = TFM_POSITIONS_LEARNED;
    o.bos_id = BOS;
    o.eos_id = EOS;
    o.seed = 11;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    return m;
}

static tfm_model *tiny(int fused, int layers)
{
    return tiny_with(fused, layers, TFM_ACTIVATION_RELU);
}

static const int32_t src_ids[2 * LEN] = {3, 4, 5, 6, 2, 7, 8, 9, 2, 0};
static const int32_t tgt_ids[2 * 4] = {1, 5, 6, 7, 1, 9, 8, 3};
static const int32_t gold_ids[2 * 4] = {5, 6, 7, 2, 9, 8, 3, 2};

static tfm_tensor *ids(const int32_t *v, int64_t b, int64_t t)
{
    tfm_tensor *x = tfm_tensor_from_i32(2, (const int64_t[]){b, t}, v);
    ck_assert_ptr_nonnull(x);
    return x;
}

/* The model's logits [2, 4, VOCAB] for the fixed batch, on tape. */
static tfm_tensor *logits_of(tfm_tape *tape, tfm_model *m, tfm_tensor *src, tfm_tensor *tgt)
{
    return tfm_model_forward(tape, m, src, tgt, NULL, tfm_mask_causal(tape, 4, TFM_I32), NULL,
                             NULL, NULL, NULL);
}

static void fill_random(tfm_params *p, uint64_t seed, float scale)
{
    tfm_rng *rng = tfm_rng_create(seed);
    for (int64_t i = 0; i < tfm_params_count(p); i++)
        tfm_init_uniform(tfm_params_at(p, i), -scale, scale, rng);
    tfm_rng_free(rng);
}

/* --- gradients ----------------------------------------------------------------------- */

typedef struct gc_ctx {
    tfm_model *m;
    tfm_tensor *src, *tgt;
} gc_ctx;

static tfm_tensor *build(tfm_tape *tape, tfm_tensor *const *inputs, void *ctx)
{
    (void)inputs;
    gc_ctx *c = ctx;
    tfm_rng_seed(c->m->rng, 77); /* one dropout mask for every evaluation */
    return logits_of(tape, c->m, c->src, c->tgt);
}

static void check_gradients(int fused, float dropout)
{
    /* GELU: central differences across ReLU's kink would not be its gradient */
    tfm_model *m = tiny_with(fused, 1, TFM_ACTIVATION_GELU);
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    o.rank = 3;
    o.alpha = 5.0f;
    o.dropout = dropout;
    o.targets = TFM_ADAPT_Q | TFM_ADAPT_K | TFM_ADAPT_V | TFM_ADAPT_O | TFM_ADAPT_FF_IN |
                TFM_ADAPT_FF_OUT;
    ck_assert_msg(tfm_model_add_adapter(m, "a", &o) == TFM_OK, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_use_adapter(m, "a"), TFM_OK);
    tfm_model_set_training(m, 1);
    tfm_params *p = tfm_model_adapter_params(m, "a");
    /* 2 stacks: self q k v o + ff 2 (encoder), + cross q k v o (decoder) */
    ck_assert_int_eq(tfm_params_count(p), 2 * (6 + 10));
    fill_random(p, 3, 0.2f); /* B no longer zero: A's gradient is not */
    gc_ctx c = {m, ids(src_ids, 2, LEN), ids(tgt_ids, 2, 4)};
    tfm_tensor *inputs[64];
    int n = (int)tfm_params_count(p);
    for (int i = 0; i < n; i++)
        inputs[i] = tfm_params_at(p, i);
    ck_assert_gradcheck(build, &c, inputs, n);
    tfm_tensor_free(c.src);
    tfm_tensor_free(c.tgt);
    tfm_model_free(m);
}

START_TEST(gradients_of_adapted_linears)
{
    check_gradients(0, 0.0f);
}
END_TEST

START_TEST(gradients_of_adapted_fused_attention)
{
    check_gradients(1, 0.0f);
}
END_TEST

START_TEST(gradients_with_adapter_dropout)
{
    check_gradients(0, 0.3f);
    check_gradients(1, 0.3f);
}
END_TEST

/* --- merging -------------------------------------------------------------------------- */

static void logits_into(tfm_model *m, float *out, int64_t n)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *src = ids(src_ids, 2, LEN), *tgt = ids(tgt_ids, 2, 4);
    tfm_tensor *y = logits_of(tape, m, src, tgt);
    ck_assert_msg(y != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tensor_numel(y), n);
    memcpy(out, tfm_tensor_data_f32(y), (size_t)n * sizeof *out);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_tape_free(tape);
}

#define NLOGITS (2 * 4 * VOCAB)

START_TEST(merged_logits_equal_unmerged)
{
    for (int fused = 0; fused < 2; fused++) {
        tfm_model *m = tiny(fused, 2);
        tfm_adapter_options o;
        tfm_adapter_options_init(&o);
        o.targets = TFM_ADAPT_Q | TFM_ADAPT_V | TFM_ADAPT_SELF_O | TFM_ADAPT_FF_OUT;
        o.rank = 4;
        o.alpha = 16.0f;
        ck_assert_int_eq(tfm_model_add_adapter(m, "x", &o), TFM_OK);
        fill_random(tfm_model_adapter_params(m, "x"), 5, 0.3f);
        float base[NLOGITS], adapted[NLOGITS], merged[NLOGITS];
        logits_into(m, base, NLOGITS);
        ck_assert_int_eq(tfm_model_use_adapter(m, "x"), TFM_OK);
        logits_into(m, adapted, NLOGITS);
        double change = 0.0;
        for (int i = 0; i < NLOGITS; i++)
            change = fmax(change, fabs(adapted[i] - base[i]));
        ck_assert_msg(change > 1e-2, "the adapter changes nothing (%g)", change);
        ck_assert_int_eq(tfm_model_merge_adapter(m, "x"), TFM_OK);
        ck_assert_int_eq(tfm_model_adapter_count(m), 0);
        ck_assert_ptr_null(tfm_model_adapter_in_use(m));
        logits_into(m, merged, NLOGITS);
        for (int i = 0; i < NLOGITS; i++)
            ck_assert_msg(fabs(merged[i] - adapted[i]) <= 1e-5 * (1.0 + fabs(adapted[i])),
                          "logit %d: merged %.9g, unmerged %.9g", i, merged[i], adapted[i]);
        tfm_model_free(m);
    }
}
END_TEST

/* --- training ------------------------------------------------------------------------- */

/* One AdamW step over the adapter alone; the base's values before and
 * after must be the same bits. */
static void train_step_changes_only_the_adapter(tfm_model *m)
{
    tfm_params *base = tfm_model_params(m);
    int64_t nb = tfm_params_numel(base);
    float *before = malloc((size_t)nb * sizeof *before);
    memcpy(before, tfm_params_values(base), (size_t)nb * sizeof *before);
    tfm_params *p = tfm_model_adapter_params(m, "t");
    int64_t na = tfm_params_numel(p);
    float *adapter_before = malloc((size_t)na * sizeof *adapter_before);
    memcpy(adapter_before, tfm_params_values(p), (size_t)na * sizeof *adapter_before);
    tfm_optimizer_options oo;
    tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAMW);
    oo.lr = 1e-2f;
    tfm_optimizer *opt = tfm_optimizer_create(p, &oo);
    ck_assert_ptr_nonnull(opt);
    ck_assert_msg(tfm_model_set_training(m, 1) == TFM_OK, "%s", tfm_last_error());
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *src = ids(src_ids, 2, LEN), *tgt = ids(tgt_ids, 2, 4);
    tfm_tensor *gold = ids(gold_ids, 2, 4);
    for (int step = 0; step < 2; step++) {
        tfm_tape_reset(tape);
        tfm_optimizer_zero_grad(opt);
        tfm_tensor *y = logits_of(tape, m, src, tgt);
        tfm_tensor *loss = tfm_cross_entropy(
            tape, tfm_reshape(tape, y, 2, (const int64_t[]){8, VOCAB}),
            tfm_reshape(tape, gold, 1, (const int64_t[]){8}), -100, 0.0f);
        ck_assert_msg(loss != NULL, "%s", tfm_last_error());
        ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
        ck_assert_msg(tfm_optimizer_step(opt) == TFM_OK, "%s", tfm_last_error());
    }
    ck_assert_msg(memcmp(before, tfm_params_values(base), (size_t)nb * sizeof *before) == 0,
                  "a base parameter changed");
    /* frozen, as PEFT's base: no gradient was even computed */
    const float *grads = tfm_params_grads(base);
    for (int64_t i = 0; i < nb; i++)
        ck_assert_msg(grads[i] == 0.0f, "base gradient %lld is %g", (long long)i, grads[i]);
    ck_assert_msg(memcmp(adapter_before, tfm_params_values(p), (size_t)na * sizeof *before) != 0,
                  "the adapter did not change");
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_tensor_free(gold);
    tfm_tape_free(tape);
    tfm_optimizer_free(opt);
    free(before);
    free(adapter_before);
}

START_TEST(training_changes_only_the_adapter)
{
    tfm_model *m = tiny(1, 2);
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    o.dropout = 0.1f;
    ck_assert_int_eq(tfm_model_add_adapter(m, "t", &o), TFM_OK);
    ck_assert_int_eq(tfm_model_use_adapter(m, "t"), TFM_OK);
    ck_assert(!tfm_tensor_requires_grad(tfm_params_at(tfm_model_params(m), 0)));
    train_step_changes_only_the_adapter(m);
    ck_assert_int_eq(tfm_model_use_adapter(m, NULL), TFM_OK); /* the base trains again */
    for (int64_t i = 0; i < tfm_params_count(tfm_model_params(m)); i++)
        ck_assert(tfm_tensor_requires_grad(tfm_params_at(tfm_model_params(m), i)));
    tfm_model_free(m);
}
END_TEST

START_TEST(training_over_an_int8_base)
{
    tfm_model *m = tiny(0, 2);
    ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS), TFM_OK);
    ck_assert_int_eq(tfm_model_set_training(m, 1), TFM_ERR_STATE); /* no adapter in use */
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    o.targets = TFM_ADAPT_Q | TFM_ADAPT_V | TFM_ADAPT_FF_IN;
    ck_assert_int_eq(tfm_model_add_adapter(m, "t", &o), TFM_OK);
    ck_assert_int_eq(tfm_model_use_adapter(m, "t"), TFM_OK);
    train_step_changes_only_the_adapter(m);
    /* merging would leave the int8 weights behind */
    ck_assert_int_eq(tfm_model_merge_adapter(m, "t"), TFM_ERR_STATE);
    ck_assert_int_eq(tfm_model_adapter_count(m), 1);
    /* no adapter: back to inference only */
    ck_assert_int_eq(tfm_model_use_adapter(m, NULL), TFM_OK);
    ck_assert_int_eq(tfm_model_set_training(m, 1), TFM_ERR_STATE);
    tfm_model_free(m);
}
END_TEST

/* --- resuming an adapter's training -------------------------------------------------- */

static void adapter_steps(tfm_model *m, tfm_optimizer *opt, int steps)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *src = ids(src_ids, 2, LEN), *tgt = ids(tgt_ids, 2, 4);
    tfm_tensor *gold = ids(gold_ids, 2, 4);
    for (int step = 0; step < steps; step++) {
        tfm_tape_reset(tape);
        tfm_optimizer_zero_grad(opt);
        tfm_tensor *loss = tfm_cross_entropy(
            tape, tfm_reshape(tape, logits_of(tape, m, src, tgt), 2, (const int64_t[]){8, VOCAB}),
            tfm_reshape(tape, gold, 1, (const int64_t[]){8}), -100, 0.0f);
        ck_assert_int_eq(tfm_tape_backward(tape, loss), TFM_OK);
        ck_assert_int_eq(tfm_optimizer_step(opt), TFM_OK);
    }
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_tensor_free(gold);
    tfm_tape_free(tape);
}

/* A model (int8 or not) with adapter "r" in use, training, and an AdamW
 * over the adapter into *opt. */
static tfm_model *adapter_training(int quantized, tfm_optimizer **opt)
{
    tfm_model *m = tiny(1, 2);
    if (quantized)
        ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS), TFM_OK);
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    o.dropout = 0.2f; /* the model's stream: resumed too */
    o.targets = TFM_ADAPT_Q | TFM_ADAPT_V | TFM_ADAPT_FF_OUT;
    ck_assert_int_eq(tfm_model_add_adapter(m, "r", &o), TFM_OK);
    ck_assert_int_eq(tfm_model_use_adapter(m, "r"), TFM_OK);
    ck_assert_int_eq(tfm_model_set_training(m, 1), TFM_OK);
    tfm_optimizer_options oo;
    tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAMW);
    oo.lr = 1e-2f;
    *opt = tfm_optimizer_create(tfm_model_adapter_params(m, "r"), &oo);
    ck_assert_ptr_nonnull(*opt);
    return m;
}

START_TEST(an_adapters_training_resumes_bit_for_bit)
{
    for (int quantized = 0; quantized < 2; quantized++) {
        char path[] = "/tmp/tfm_adapter_state_XXXXXX";
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        close(fd);
        tfm_optimizer *opt;
        tfm_model *straight = adapter_training(quantized, &opt);
        adapter_steps(straight, opt, 3);
        ck_assert_msg(tfm_training_save(path, straight, opt, 0, NULL, 0, NULL, NULL) == TFM_OK,
                      "%s", tfm_last_error());
        adapter_steps(straight, opt, 3);
        tfm_optimizer *opt2;
        tfm_model *resumed = adapter_training(quantized, &opt2);
        ck_assert_msg(tfm_training_load(path, resumed, opt2, 0, NULL) == TFM_OK, "%s",
                      tfm_last_error());
        adapter_steps(resumed, opt2, 3);
        tfm_params *a = tfm_model_adapter_params(straight, "r");
        tfm_params *b = tfm_model_adapter_params(resumed, "r");
        ck_assert(memcmp(tfm_params_values(a), tfm_params_values(b),
                         (size_t)tfm_params_numel(a) * sizeof(float)) == 0);
        /* an optimizer over the whole model does not read an adapter's state */
        tfm_optimizer_options oo;
        tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAMW);
        tfm_optimizer *whole = tfm_optimizer_create(tfm_model_params(resumed), &oo);
        ck_assert_int_ne(tfm_training_load(path, resumed, whole, 0, NULL), TFM_OK);
        tfm_optimizer_free(whole);
        tfm_optimizer_free(opt);
        tfm_optimizer_free(opt2);
        tfm_model_free(straight);
        tfm_model_free(resumed);
        unlink(path);
    }
}
END_TEST

/* --- files ---------------------------------------------------------------------------- */

static char *temp_folder(void)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/tfm_adapters_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(path));
    return path;
}

static void remove_folder(const char *folder)
{
    char path[256];
    snprintf(path, sizeof path, "%s/adapter_config.json", folder);
    unlink(path);
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", folder);
    unlink(path);
    rmdir(folder);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    static char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

START_TEST(save_and_load_round_trip)
{
    tfm_model *m = tiny(1, 2);
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    o.rank = 2;
    o.alpha = 7.5f;
    o.dropout = 0.05f;
    o.targets = TFM_ADAPT_SELF_Q | TFM_ADAPT_CROSS_V | TFM_ADAPT_FF_OUT;
    o.n_layers = 1;
    o.layers = (const int32_t[]){1};
    ck_assert_int_eq(tfm_model_add_adapter(m, "s", &o), TFM_OK);
    tfm_params *p = tfm_model_adapter_params(m, "s");
    fill_random(p, 8, 0.4f);
    tfm_model_set_training(m, 0); /* no dropout: the logits compare */
    char *folder = temp_folder();
    ck_assert_msg(tfm_model_save_adapter(m, "s", folder, "here/base") == TFM_OK, "%s",
                  tfm_last_error());
    ck_assert_msg(tfm_model_load_adapter(m, "l", folder) == TFM_OK, "%s", tfm_last_error());
    tfm_params *q = tfm_model_adapter_params(m, "l");
    ck_assert_int_eq(tfm_params_count(q), tfm_params_count(p));
    for (int64_t i = 0; i < tfm_params_count(p); i++)
        ck_assert_str_eq(tfm_params_name(q, i), tfm_params_name(p, i));
    ck_assert(memcmp(tfm_params_values(p), tfm_params_values(q),
                     (size_t)tfm_params_numel(p) * sizeof(float)) == 0);
    tfm_adapter_options r;
    tfm_adapter_options_init(&r);
    ck_assert_int_eq(tfm_model_adapter_options(m, "l", &r), TFM_OK);
    ck_assert_int_eq(r.rank, 2);
    ck_assert(r.alpha == 7.5f && r.dropout == 0.05f);
    ck_assert_uint_eq(r.targets, o.targets);
    ck_assert_int_eq(r.n_layers, 1);
    ck_assert_int_eq(r.layers[0], 1);
    /* libtfm's own names, PEFT's form */
    ck_assert_str_eq(tfm_params_name(p, 0),
                     "base_model.model.encoder.layers.1.self_attn.q_proj.lora_A.weight");
    char path[256];
    snprintf(path, sizeof path, "%s/adapter_config.json", folder);
    const char *config = read_text(path);
    static const char *const keys[] = {
        "\"peft_type\": \"LORA\"", "\"r\": 2", "\"lora_alpha\": 7.5", "\"lora_dropout\": 0.05",
        "\"task_type\": \"SEQ_2_SEQ_LM\"", "\"bias\": \"none\"", "\"fan_in_fan_out\": false",
        "\"base_model_name_or_path\": \"here/base\"", "\"layers_to_transform\": [1]",
        "\"self_attn.q_proj\"", "\"multihead_attn.v_proj\"", "\"linear2\""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ck_assert_msg(strstr(config, keys[i]), "%s lacks %s:\n%s", path, keys[i], config);
    /* the same logits through either */
    float a[NLOGITS], b[NLOGITS];
    tfm_model_use_adapter(m, "s");
    logits_into(m, a, NLOGITS);
    tfm_model_use_adapter(m, "l");
    logits_into(m, b, NLOGITS);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    remove_folder(folder);
    tfm_model_free(m);
}
END_TEST

/* Saving over an earlier adapter whose config cannot be replaced fails
 * before its weights are touched: never a new adapter_model.safetensors
 * beside an old adapter_config.json (another rank or scale). */
START_TEST(a_failed_save_mixes_no_files)
{
    tfm_model *m = tiny(1, 2);
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    o.rank = 2;
    ck_assert_int_eq(tfm_model_add_adapter(m, "s", &o), TFM_OK);
    fill_random(tfm_model_adapter_params(m, "s"), 8, 0.4f);
    char *folder = temp_folder();
    char weights[128], config[128], command[512];
    snprintf(weights, sizeof weights, "%s/adapter_model.safetensors", folder);
    snprintf(config, sizeof config, "%s/adapter_config.json", folder);
    ck_assert_int_eq(tfm_model_save_adapter(m, "s", folder, NULL), TFM_OK);
    snprintf(command, sizeof command, "cp '%s' '%s.before'", weights, weights);
    ck_assert_int_eq(system(command), 0);
    /* a folder where the config goes: neither removed nor replaced */
    ck_assert_int_eq(unlink(config), 0);
    ck_assert_int_eq(mkdir(config, 0755), 0);
    snprintf(command, sizeof command, "touch '%s/x'", config);
    ck_assert_int_eq(system(command), 0);
    fill_random(tfm_model_adapter_params(m, "s"), 9, 0.4f);
    ck_assert_int_eq(tfm_model_save_adapter(m, "s", folder, NULL), TFM_ERR_IO);
    snprintf(command, sizeof command, "cmp -s '%s' '%s.before'", weights, weights);
    ck_assert_msg(system(command) == 0, "the weights were replaced");
    snprintf(command, sizeof command, "rm -rf '%s' '%s.before'", config, weights);
    ck_assert_int_eq(system(command), 0);
    remove_folder(folder);
    tfm_model_free(m);
}
END_TEST

/* --- decoding and translating ---------------------------------------------------------- */

static void greedy(tfm_model *m, const char *adapter, int use_cache, int32_t *tokens)
{
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    ck_assert_int_eq(tfm_decode_options_from_model(m, &o), TFM_OK);
    o.max_length = MAXT - 1;
    o.use_cache = use_cache;
    o.cache_precision = TFM_CACHE_FLOAT32; /* the recomputed path's */
    o.adapter = adapter;
    tfm_decoding *d = tfm_decoding_create(m, &o, 2, LEN);
    ck_assert_msg(d != NULL, "%s", tfm_last_error());
    tfm_tensor *src = ids(src_ids, 2, LEN);
    int32_t lengths[2];
    ck_assert_msg(tfm_decoding_run(d, src, tokens, 2 * MAXT, lengths, 2, NULL, 0, NULL, 0, NULL,
                                   0) == TFM_OK, "%s", tfm_last_error());
    tfm_tensor_free(src);
    tfm_decoding_free(d);
}

START_TEST(decoding_with_an_adapter_is_decoding_the_merged_model)
{
    for (int fused = 0; fused < 2; fused++) {
        tfm_model *m = tiny(fused, 2);
        tfm_adapter_options o;
        tfm_adapter_options_init(&o);
        o.targets = TFM_ADAPT_Q | TFM_ADAPT_K | TFM_ADAPT_V | TFM_ADAPT_O | TFM_ADAPT_FF_IN |
                    TFM_ADAPT_FF_OUT;
        ck_assert_int_eq(tfm_model_add_adapter(m, "d", &o), TFM_OK);
        fill_random(tfm_model_adapter_params(m, "d"), 21, 1.0f);
        int32_t none[2 * MAXT], cached[2 * MAXT], recomputed[2 * MAXT], merged[2 * MAXT];
        greedy(m, NULL, 1, none);
        greedy(m, "d", 1, cached);
        greedy(m, "d", 0, recomputed);
        ck_assert_msg(memcmp(none, cached, sizeof none) != 0, "the adapter changes no token");
        ck_assert_int_eq(tfm_model_merge_adapter(m, "d"), TFM_OK);
        greedy(m, NULL, 1, merged);
        ck_assert(memcmp(cached, merged, sizeof merged) == 0);
        ck_assert(memcmp(recomputed, merged, sizeof merged) == 0);
        tfm_model_free(m);
    }
}
END_TEST

/* A model with a tokenizer and two adapters, "a" and "b", made alike at
 * every call. */
static const char *const lines[] = {"the cat sat on the mat", "le chat est sur le tapis",
                                    "a dog is in the garden", "un chien est dans le jardin"};

static tfm_model *translating_model(tfm_tokenizer **tok)
{
    tfm_bpe_train_options bo;
    tfm_bpe_train_options_init(&bo);
    bo.vocab_size = 40;
    bo.pad_piece = 1;
    ck_assert_int_eq(tfm_tokenizer_train_bpe(lines, NULL, 4, &bo, tok), TFM_OK);
    tfm_model_options mo;
    tfm_model_options_init(&mo);
    mo.src_vocab = mo.tgt_vocab = 48;
    mo.max_src_len = mo.max_tgt_len = 24;
    mo.d_model = 16, mo.heads = 2, mo.d_ff = 32, mo.encoder_layers = mo.decoder_layers = 2;
    mo.share_embeddings = 1;
    mo.fused_qkv = 1;
    mo.seed = 4;
    mo.bos_id = tfm_tokenizer_special_id(*tok, TFM_TOKEN_BOS);
    mo.eos_id = tfm_tokenizer_special_id(*tok, TFM_TOKEN_EOS);
    mo.pad_id = tfm_tokenizer_special_id(*tok, TFM_TOKEN_PAD);
    tfm_model *m = tfm_model_create(&mo);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(tfm_model_set_tokenizers(m, *tok, NULL), TFM_OK);
    tfm_model_set_training(m, 0);
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    o.rank = 4;
    o.alpha = 8.0f;
    ck_assert_int_eq(tfm_model_add_adapter(m, "a", &o), TFM_OK);
    o.targets = TFM_ADAPT_O | TFM_ADAPT_FF_IN | TFM_ADAPT_K;
    ck_assert_int_eq(tfm_model_add_adapter(m, "b", &o), TFM_OK);
    fill_random(tfm_model_adapter_params(m, "a"), 31, 1.5f);
    fill_random(tfm_model_adapter_params(m, "b"), 32, 1.5f);
    return m;
}

/* The texts the translator gives with adapter (NULL: none), into out. */
static void translate(tfm_translator *t, const char *adapter, char out[4][256])
{
    memset(out, 0, 4 * 256);
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.adapter = adapter;
    tfm_translation *r = NULL;
    ck_assert_msg(tfm_translate(t, lines, 4, &o, &r) == TFM_OK, "%s", tfm_last_error());
    for (int i = 0; i < 4; i++)
        snprintf(out[i], 256, "%s", tfm_translation_text(r, i, 0));
    tfm_translation_free(r);
}

START_TEST(the_translator_chooses_an_adapter_per_request)
{
    tfm_tokenizer *tok;
    tfm_model *m = translating_model(&tok);
    tfm_translator *t = tfm_translator_create(m, NULL);
    ck_assert_msg(t != NULL, "%s", tfm_last_error());
    char none[4][256], a[4][256], b[4][256];
    translate(t, NULL, none);
    translate(t, "a", a);
    translate(t, "b", b);
    ck_assert_msg(memcmp(none, a, sizeof a) != 0 && memcmp(none, b, sizeof b) != 0 &&
                      memcmp(a, b, sizeof a) != 0,
                  "the adapters change no translation");
    /* requests of all three at once, over the one model */
    tfm_request *requests[12];
    const char *names[3] = {NULL, "a", "b"};
    for (int i = 0; i < 12; i++) {
        tfm_translate_options o;
        tfm_translate_options_init(&o);
        o.adapter = names[i % 3];
        requests[i] = tfm_translator_submit(t, lines[i / 3], &o);
        ck_assert_msg(requests[i] != NULL, "%s", tfm_last_error());
    }
    for (int i = 0; i < 12; i++) {
        const tfm_translation *r;
        ck_assert_int_eq(tfm_request_wait(requests[i]), TFM_OK);
        ck_assert_int_eq(tfm_request_result(requests[i], &r), TFM_OK);
        char(*expected)[256] = i % 3 == 0 ? none : i % 3 == 1 ? a : b;
        ck_assert_str_eq(tfm_translation_text(r, 0, 0), expected[i / 3]);
        tfm_request_free(requests[i]);
    }
    tfm_translate_options o;
    tfm_translate_options_init(&o);
    o.adapter = "c";
    tfm_translation *r = NULL;
    ck_assert_int_eq(tfm_translate(t, lines, 1, &o, &r), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "\"c\""));
    tfm_translator_free(t);
    tfm_model_free(m);
    tfm_tokenizer_free(tok);
    /* each as its merged model gives it */
    for (int k = 0; k < 2; k++) {
        m = translating_model(&tok);
        ck_assert_int_eq(tfm_model_merge_adapter(m, k ? "b" : "a"), TFM_OK);
        t = tfm_translator_create(m, NULL);
        char merged[4][256];
        translate(t, NULL, merged);
        for (int i = 0; i < 4; i++)
            ck_assert_str_eq(merged[i], k ? b[i] : a[i]);
        tfm_translator_free(t);
        tfm_model_free(m);
        tfm_tokenizer_free(tok);
    }
}
END_TEST

/* --- PEFT's files over a published model -------------------------------------------- */

#define MARIAN TFM_TESTS_DIR "/marian"
#define PEFT_FOLDER MARIAN "/adapter"

static char *read_file(const char *path, long *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s", path);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    rewind(f);
    char *text = malloc((size_t)*size + 1);
    ck_assert_uint_eq(fread(text, 1, (size_t)*size, f), (size_t)*size);
    text[*size] = '\0';
    fclose(f);
    return text;
}

static tfm_tensor *ids_of(const tfm__json *doc, const tfm__json_node *array)
{
    int32_t ids[256];
    int64_t n = 0;
    for (uint32_t i = (uint32_t)(array - doc->nodes) + 1; i < array->next && n < 256;
         i = doc->nodes[i].next)
        ids[n++] = (int32_t)doc->nodes[i].integer;
    return tfm_tensor_from_i32(2, (const int64_t[]){1, n}, ids);
}

/* tests/marian/adapter, written by tests/pretrained/make_adapter_fixture.py
 * after PEFT's source: the logits PEFT's LoRA layers give over the Marian
 * twin, and the same names and config keys when libtfm saves it again. */
START_TEST(a_peft_adapter_over_marian_gives_the_twins_logits)
{
    tfm_model *m = tfm_model_from_pretrained(MARIAN);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    ck_assert_msg(tfm_model_load_adapter(m, "peft", PEFT_FOLDER) == TFM_OK, "%s",
                  tfm_last_error());
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    ck_assert_int_eq(tfm_model_adapter_options(m, "peft", &o), TFM_OK);
    ck_assert_int_eq(o.rank, 4);
    ck_assert(o.alpha == 12.0f);
    ck_assert_uint_eq(o.targets, TFM_ADAPT_Q | TFM_ADAPT_V | TFM_ADAPT_SELF_O | TFM_ADAPT_FF_IN);
    ck_assert_int_eq(tfm_params_count(tfm_model_adapter_params(m, "peft")), 20);
    ck_assert_int_eq(tfm_model_use_adapter(m, "peft"), TFM_OK);
    long size;
    char *text = read_file(MARIAN "/expected.json", &size);
    tfm__json doc;
    ck_assert_int_eq(tfm__json_parse("expected.json", text, (size_t)size, size / 2 + 1, &doc),
                     TFM_OK);
    const tfm__json_node *cases = tfm__json_member(&doc, &doc.nodes[0], "cases");
    tfm_safetensors *expected = tfm_safetensors_open(PEFT_FOLDER "/expected.safetensors");
    ck_assert_ptr_nonnull(expected);
    double worst = 0.0, change = 0.0;
    int index = 0;
    for (uint32_t i = (uint32_t)(cases - doc.nodes) + 1; i < cases->next;
         i = doc.nodes[i].next, index++) {
        tfm_tensor *src = ids_of(&doc, tfm__json_member(&doc, &doc.nodes[i], "input_ids"));
        tfm_tensor *tgt = ids_of(&doc, tfm__json_member(&doc, &doc.nodes[i], "decoder_input_ids"));
        int64_t T = tfm_tensor_dim(tgt, 1), V = tfm_model_tgt_vocab(m);
        char name[32];
        snprintf(name, sizeof name, "logits.%d", index);
        tfm_tensor *want = tfm_safetensors_get(expected, name);
        ck_assert_int_eq(tfm_tensor_numel(want), T * V);
        for (int with = 0; with < 2; with++) {
            tfm_model_use_adapter(m, with ? "peft" : NULL);
            tfm_tape *tape = tfm_tape_create();
            tfm_tensor *logits = tfm_model_forward(tape, m, src, tgt, NULL,
                                                   tfm_mask_causal(tape, T, TFM_I32), NULL, NULL,
                                                   NULL, NULL);
            ck_assert_msg(logits != NULL, "%s", tfm_last_error());
            const float *a = tfm_tensor_data_f32(logits), *b = tfm_tensor_data_f32(want);
            for (int64_t k = 0; k < T * V; k++) {
                double off = fabs((double)a[k] - b[k]) / (1.0 + fabs((double)b[k]));
                if (with)
                    worst = fmax(worst, off);
                else
                    change = fmax(change, off);
            }
            tfm_tape_free(tape);
        }
        tfm_tensor_free(want);
        tfm_tensor_free(src);
        tfm_tensor_free(tgt);
    }
    ck_assert_int_eq(index, 4);
    ck_assert_msg(worst <= 2e-5, "a logit differs from the twin's by %g of (1 + |logit|)", worst);
    ck_assert_msg(change > 1e-2, "the adapter changes the logits by %g only", change);
    tfm_safetensors_close(expected);
    tfm__json_free(&doc);
    free(text);

    /* saved again: PEFT's names and bits, and only PEFT's config keys */
    char *folder = temp_folder();
    ck_assert_int_eq(tfm_model_save_adapter(m, "peft", folder, "Helsinki-NLP/opus-mt-en-fr"),
                     TFM_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", folder);
    tfm_safetensors *ours = tfm_safetensors_open(path);
    tfm_safetensors *theirs = tfm_safetensors_open(PEFT_FOLDER "/adapter_model.safetensors");
    ck_assert_int_eq(tfm_safetensors_count(ours), tfm_safetensors_count(theirs));
    for (int64_t i = 0; i < tfm_safetensors_count(theirs); i++) {
        const char *name = tfm_safetensors_name(theirs, i);
        tfm_tensor *a = tfm_safetensors_get(theirs, name), *b = tfm_safetensors_get(ours, name);
        ck_assert_msg(b != NULL, "the saved adapter lacks %s", name);
        ck_assert_int_eq(tfm_tensor_numel(a), tfm_tensor_numel(b));
        ck_assert(memcmp(tfm_tensor_data_f32(a), tfm_tensor_data_f32(b),
                         (size_t)tfm_tensor_numel(a) * sizeof(float)) == 0);
        tfm_tensor_free(a);
        tfm_tensor_free(b);
    }
    ck_assert_str_eq(tfm_safetensors_metadata_get(ours, "format"), "pt");
    tfm_safetensors_close(ours);
    tfm_safetensors_close(theirs);
    long n_peft, n_ours;
    char *peft_config = read_file(PEFT_FOLDER "/adapter_config.json", &n_peft);
    snprintf(path, sizeof path, "%s/adapter_config.json", folder);
    char *our_config = read_file(path, &n_ours);
    tfm__json pd, od;
    ck_assert_int_eq(tfm__json_parse("peft", peft_config, (size_t)n_peft, n_peft, &pd), TFM_OK);
    ck_assert_int_eq(tfm__json_parse("ours", our_config, (size_t)n_ours, n_ours, &od), TFM_OK);
    int keys = 0;
    for (uint32_t i = 1; i < od.nodes[0].next; i = od.nodes[i].next, keys++) {
        const char *key = tfm__json_key(&od, &od.nodes[i]);
        const tfm__json_node *peft = tfm__json_member(&pd, &pd.nodes[0], key);
        ck_assert_msg(peft != NULL, "adapter_config.json's %s is no key of PEFT's", key);
        ck_assert_msg(peft->type == od.nodes[i].type ||
                          peft->type == TFM__JSON_NULL || od.nodes[i].type == TFM__JSON_NULL,
                      "%s: another JSON type than PEFT's", key);
        if (od.nodes[i].type == TFM__JSON_STRING && peft->type == TFM__JSON_STRING)
            ck_assert_str_eq(tfm__json_string(&od, &od.nodes[i]), tfm__json_string(&pd, peft));
        if (od.nodes[i].type == TFM__JSON_NUMBER)
            ck_assert_msg(strtod(od.text + od.nodes[i].offset, NULL) ==
                              strtod(pd.text + peft->offset, NULL),
                          "%s: %s, PEFT's %s", key, od.text + od.nodes[i].offset,
                          pd.text + peft->offset);
    }
    ck_assert_int_ge(keys, 20);
    tfm__json_free(&pd);
    tfm__json_free(&od);
    free(peft_config);
    free(our_config);
    /* and read back, bit for bit */
    ck_assert_int_eq(tfm_model_load_adapter(m, "again", folder), TFM_OK);
    tfm_params *p = tfm_model_adapter_params(m, "peft"), *q = tfm_model_adapter_params(m, "again");
    ck_assert(memcmp(tfm_params_values(p), tfm_params_values(q),
                     (size_t)tfm_params_numel(p) * sizeof(float)) == 0);
    remove_folder(folder);
    tfm_model_free(m);
}
END_TEST

/* The cached step over int8 weights applies the adapter as the model's
 * forward does (the recomputed path). */
START_TEST(decoding_an_int8_base_with_an_adapter)
{
    tfm_model *m = tiny(0, 2);
    ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS), TFM_OK);
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    o.targets = TFM_ADAPT_Q | TFM_ADAPT_K | TFM_ADAPT_V | TFM_ADAPT_O | TFM_ADAPT_FF_IN |
                TFM_ADAPT_FF_OUT;
    ck_assert_int_eq(tfm_model_add_adapter(m, "d", &o), TFM_OK);
    fill_random(tfm_model_adapter_params(m, "d"), 21, 1.0f);
    int32_t none[2 * MAXT], cached[2 * MAXT], recomputed[2 * MAXT];
    greedy(m, NULL, 1, none);
    greedy(m, "d", 1, cached);
    greedy(m, "d", 0, recomputed);
    ck_assert_msg(memcmp(none, cached, sizeof none) != 0, "the adapter changes no token");
    ck_assert(memcmp(cached, recomputed, sizeof cached) == 0);
    tfm_model_free(m);
}
END_TEST

/* --- bad calls ------------------------------------------------------------------------ */

START_TEST(bad_calls)
{
    tfm_model *m = tiny(0, 1);
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    ck_assert_int_eq(tfm_model_add_adapter(NULL, "a", &o), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_model_add_adapter(m, NULL, &o), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_model_add_adapter(m, "", &o), TFM_ERR_ARG);
    o.rank = 0;
    ck_assert_int_eq(tfm_model_add_adapter(m, "a", &o), TFM_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "rank 0"));
    tfm_adapter_options_init(&o);
    o.alpha = NAN;
    ck_assert_int_eq(tfm_model_add_adapter(m, "a", &o), TFM_ERR_ARG);
    tfm_adapter_options_init(&o);
    o.dropout = 1.0f;
    ck_assert_int_eq(tfm_model_add_adapter(m, "a", &o), TFM_ERR_ARG);
    tfm_adapter_options_init(&o);
    o.targets = 1u << 12;
    ck_assert_int_eq(tfm_model_add_adapter(m, "a", &o), TFM_ERR_ARG);
    tfm_adapter_options_init(&o);
    o.n_layers = 1;
    o.layers = (const int32_t[]){3};
    ck_assert_int_eq(tfm_model_add_adapter(m, "a", &o), TFM_ERR_ARG);
    o.layers = NULL;
    ck_assert_int_eq(tfm_model_add_adapter(m, "a", &o), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_model_adapter_count(m), 0);
    ck_assert_int_eq(tfm_model_add_adapter(m, "a", NULL), TFM_OK);
    ck_assert_int_eq(tfm_model_add_adapter(m, "a", NULL), TFM_ERR_ARG); /* taken */
    ck_assert_int_eq(tfm_model_use_adapter(m, "b"), TFM_ERR_ARG);
    ck_assert_ptr_null(tfm_model_adapter_params(m, "b"));
    ck_assert_int_eq(tfm_model_merge_adapter(m, "b"), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_model_remove_adapter(m, "b"), TFM_ERR_ARG);
    ck_assert_ptr_null(tfm_model_adapter_name(m, 1));
    ck_assert_int_eq(tfm_model_save_adapter(m, "a", NULL, NULL), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_model_save_adapter(m, "a", "/proc/no/such/folder", NULL), TFM_ERR_IO);
    ck_assert_int_eq(tfm_model_load_adapter(m, "c", "/no/such/folder"), TFM_ERR_IO);
    /* a decoding naming an adapter the model lacks */
    tfm_decode_options d;
    tfm_decode_options_init(&d);
    tfm_decode_options_from_model(m, &d);
    d.max_length = 3;
    d.adapter = "nope";
    ck_assert_ptr_null(tfm_decoding_create(m, &d, 1, LEN));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_ARG);
    /* a decoding whose adapter was removed since */
    d.adapter = "a";
    tfm_decoding *run = tfm_decoding_create(m, &d, 1, LEN);
    ck_assert_ptr_nonnull(run);
    ck_assert_int_eq(tfm_model_remove_adapter(m, "a"), TFM_OK);
    tfm_tensor *src = ids(src_ids, 1, LEN);
    int32_t tokens[MAXT], lengths[1];
    ck_assert_int_eq(tfm_decoding_run(run, src, tokens, MAXT, lengths, 1, NULL, 0, NULL, 0, NULL,
                                      0), TFM_ERR_ARG);
    tfm_tensor_free(src);
    tfm_decoding_free(run);
    tfm_model_free(m);
}
END_TEST

/* Files that are not the adapter the config describes, or not PEFT's. */
START_TEST(bad_files)
{
    tfm_model *m = tiny(0, 1);
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    o.rank = 2;
    ck_assert_int_eq(tfm_model_add_adapter(m, "a", &o), TFM_OK);
    char *folder = temp_folder();
    ck_assert_int_eq(tfm_model_save_adapter(m, "a", folder, NULL), TFM_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/adapter_config.json", folder);
    char *good = strdup(read_text(path));
    static const struct {
        const char *from, *to, *named;
    } edits[] = {
        {"\"r\": 2", "\"r\": 3", "lora_A.weight"},          /* wrong shapes in the file */
        {"\"r\": 2", "\"r\": 0", "r"},                      /* rank 0 */
        {"\"self_attn.q_proj\"", "\"self_attn.qq\"", "self_attn.qq"}, /* unknown module */
        {"\"bias\": \"none\"", "\"bias\": \"all\"", "bias"},
        {"\"use_dora\": false", "\"use_dora\": true", "use_dora"},
        {"\"peft_type\": \"LORA\"", "\"peft_type\": \"IA3\"", "IA3"},
        {"\"fan_in_fan_out\": false", "\"fan_in_fan_out\": true", "fan_in_fan_out"},
        /* PEFT's regex form: the list becomes another key's value */
        {"\"target_modules\": ", "\"target_modules\": \".*\\\\.q_proj\", \"x\": ",
         "regular expression"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        const char *at = strstr(good, edits[i].from);
        ck_assert_ptr_nonnull(at);
        FILE *f = fopen(path, "wb");
        fprintf(f, "%.*s%s%s", (int)(at - good), good, edits[i].to, at + strlen(edits[i].from));
        fclose(f);
        tfm_status st = tfm_model_load_adapter(m, "b", folder);
        ck_assert_msg(st == TFM_ERR_FORMAT, "edit %zu: %s", i, tfm_status_name(st));
        ck_assert_msg(strstr(tfm_last_error(), edits[i].named), "edit %zu: %s", i,
                      tfm_last_error());
        ck_assert_int_eq(tfm_model_adapter_count(m), 1);
    }
    /* a model with another shape: the tensors do not fit */
    FILE *f = fopen(path, "wb");
    fputs(good, f);
    fclose(f);
    tfm_model *other = tiny(0, 2);
    ck_assert_int_eq(tfm_model_load_adapter(other, "b", folder), TFM_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "layers.1"));
    tfm_model_free(other);
    ck_assert_int_eq(tfm_model_load_adapter(m, "b", folder), TFM_OK);
    free(good);
    remove_folder(folder);
    tfm_model_free(m);
}
END_TEST

/* An adapter removed while the translator holds an idle decoding that
 * named it: the translator's settings keep their own copy of the name, so
 * a later request for another adapter (whose memory may be the removed
 * one's) decodes with its own adapter. */
START_TEST(an_adapter_removed_under_the_translator)
{
    tfm_tokenizer *tok;
    tfm_model *m = translating_model(&tok);
    tfm_translator *t = tfm_translator_create(m, NULL);
    ck_assert_msg(t != NULL, "%s", tfm_last_error());
    char a[4][256], b[4][256], c[4][256];
    translate(t, "a", a);
    translate(t, "b", b);
    ck_assert_int_eq(tfm_model_remove_adapter(m, "a"), TFM_OK);
    tfm_adapter_options o;
    tfm_adapter_options_init(&o);
    o.rank = 4;
    o.alpha = 8.0f;
    o.targets = TFM_ADAPT_O | TFM_ADAPT_FF_IN | TFM_ADAPT_K;
    ck_assert_int_eq(tfm_model_add_adapter(m, "c", &o), TFM_OK);
    fill_random(tfm_model_adapter_params(m, "c"), 32, 1.5f);
    translate(t, "c", c); /* "b"'s weights under another name */
    ck_assert(memcmp(b, c, sizeof b) == 0);
    tfm_translate_options to;
    tfm_translate_options_init(&to);
    to.adapter = "a";
    tfm_translation *r = NULL;
    ck_assert_int_eq(tfm_translate(t, lines, 1, &to, &r), TFM_ERR_ARG);
    tfm_translator_free(t);
    tfm_model_free(m);
    tfm_tokenizer_free(tok);
}
END_TEST

static Suite *adapters_suite(void)
{
    Suite *s = suite_create("adapters");
    TCase *tc = tcase_create("adapters");
    tcase_add_test(tc, gradients_of_adapted_linears);
    tcase_add_test(tc, gradients_of_adapted_fused_attention);
    tcase_add_test(tc, gradients_with_adapter_dropout);
    tcase_add_test(tc, merged_logits_equal_unmerged);
    tcase_add_test(tc, training_changes_only_the_adapter);
    tcase_add_test(tc, training_over_an_int8_base);
    tcase_add_test(tc, an_adapters_training_resumes_bit_for_bit);
    tcase_add_test(tc, save_and_load_round_trip);
    tcase_add_test(tc, a_failed_save_mixes_no_files);
    tcase_add_test(tc, decoding_with_an_adapter_is_decoding_the_merged_model);
    tcase_add_test(tc, decoding_an_int8_base_with_an_adapter);
    tcase_add_test(tc, the_translator_chooses_an_adapter_per_request);
    tcase_add_test(tc, an_adapter_removed_under_the_translator);
    tcase_add_test(tc, a_peft_adapter_over_marian_gives_the_twins_logits);
    tcase_add_test(tc, bad_calls);
    tcase_add_test(tc, bad_files);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(adapters_suite)
