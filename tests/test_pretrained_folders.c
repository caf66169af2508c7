/* tfm_model_from_pretrained on folders laid out as transformers saves them:
 * a libtfm model's parameters written under each family's published names
 * (the state_dict keys of modeling_marian.py, modeling_bart.py,
 * modeling_mbart.py, modeling_m2m_100.py) load back into the same model,
 * single-file or sharded; folders that are corrupt or of a family, option
 * or tensor libtfm does not support are refused with the thing named. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tfm/tfm.h>

#include "check_main.h"

enum { MARIAN, BART, MBART, M2M100, FAMILIES };
static const char *const model_type[FAMILIES] = {"marian", "bart", "mbart", "m2m_100"};
enum { VOCAB = 19, D = 8, HEADS = 2, FF = 12, LAYERS = 2, MAX_POS = 16, PAD = 1, EOS = 2 };

static char folder[64];
/* The vocabulary the configs and options give: VOCAB, or a tokenizer's. */
static int64_t vocab = VOCAB;

static void make_folder(void)
{
    snprintf(folder, sizeof folder, "/tmp/tfm_pretrained_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(folder));
}

static const char *in_folder(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    return path;
}

static void remove_folder(void)
{
    static const char *const names[] = {"config.json", "model.safetensors",
                                        "model.safetensors.index.json", "a.safetensors",
                                        "b.safetensors", "generation_config.json",
                                        "source.spm", "target.spm", "vocab.json",
                                        "sentencepiece.bpe.model", "tokenizer_config.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unlink(in_folder(names[i]));
    rmdir(folder);
}

static void write_text(const char *name, const char *text)
{
    FILE *f = fopen(in_folder(name), "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* A config.json as transformers writes it; extra is spliced in last. */
static void write_config(int family, const char *activation, const char *extra)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"model_type\": \"%s\", \"architectures\": [\"X\"], \"vocab_size\": %d,"
             " \"d_model\": %d, \"encoder_layers\": %d, \"decoder_layers\": %d,"
             " \"encoder_attention_heads\": %d, \"decoder_attention_heads\": %d,"
             " \"encoder_ffn_dim\": %d, \"decoder_ffn_dim\": %d,"
             " \"max_position_embeddings\": %d, \"activation_function\": \"%s\","
             " \"pad_token_id\": %d, \"eos_token_id\": %d, \"bos_token_id\": 0,"
             " \"decoder_start_token_id\": %d, \"scale_embedding\": %s,"
             " \"dropout\": 0.1, \"init_std\": 0.02%s}",
             model_type[family], (int)vocab, D, LAYERS, LAYERS, HEADS, HEADS, FF, FF, MAX_POS,
             activation, PAD, EOS, family == MARIAN ? PAD : EOS,
             family == BART ? "false" : "true", extra);
    write_text("config.json", text);
}

/* The libtfm options each family's config above describes. */
static void family_options(int family, tfm_model_options *o)
{
    tfm_model_options_init(o);
    o->src_vocab = o->tgt_vocab = vocab;
    o->share_embeddings = 1;
    o->tie_generator = 1;
    o->max_src_len = o->max_tgt_len = MAX_POS;
    o->encoder_layers = o->decoder_layers = LAYERS;
    o->d_model = D;
    o->heads = HEADS;
    o->d_ff = FF;
    o->fused_qkv = 0;
    o->dropout = 0.0f;
    o->seed = 5 + (uint64_t)family;
    o->embedding_scale = family == BART ? TFM_EMBEDDING_SCALE_NONE : TFM_EMBEDDING_SCALE_SQRT_D;
    o->norm_first = o->final_norm = family == MBART || family == M2M100;
    o->embedding_norm = family == BART || family == MBART;
    o->positions = family == MARIAN   ? TFM_POSITIONS_SINUSOIDAL_HALVES
                   : family == M2M100 ? TFM_POSITIONS_SINUSOIDAL_FAIRSEQ
                                      : TFM_POSITIONS_LEARNED;
    o->position_offset = family == M2M100 ? PAD + 1 : family == MARIAN ? 0 : 2;
    o->activation = family == MARIAN ? TFM_ACTIVATION_SILU
                    : family == M2M100 ? TFM_ACTIVATION_RELU
                                       : TFM_ACTIVATION_GELU;
}

static const char *const activation_name[FAMILIES] = {"swish", "gelu", "gelu", "relu"};

/* The published key of a libtfm parameter, written from the modeling
 * files' module names. */
static void published(const char *ours, char *out, size_t size)
{
    static const char *const pairs[][2] = {
        {"src_embedding.weight", "model.shared.weight"},
        {"src_positions.weight", "model.encoder.embed_positions.weight"},
        {"tgt_positions.weight", "model.decoder.embed_positions.weight"},
        {"src_embedding_norm.", "model.encoder.layernorm_embedding."},
        {"tgt_embedding_norm.", "model.decoder.layernorm_embedding."},
        {"encoder.norm.", "model.encoder.layer_norm."},
        {"decoder.norm.", "model.decoder.layer_norm."},
        {"generator.bias", "final_logits_bias"},
        {"generator.weight", "lm_head.weight"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (strncmp(ours, pairs[i][0], strlen(pairs[i][0])) == 0) {
            snprintf(out, size, "%s%s", pairs[i][1], ours + strlen(pairs[i][0]));
            return;
        }
    int decoder = ours[0] == 'd';
    /* <side>.layers.N.<module>.<rest> */
    const char *module = strchr(strstr(ours, ".layers.") + 8, '.') + 1;
    const char *rest = strchr(module, '.');
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)(rest - module), module);
    const char *theirs = strcmp(name, "multihead_attn") == 0 ? "encoder_attn"
                         : strcmp(name, "linear1") == 0      ? "fc1"
                         : strcmp(name, "linear2") == 0      ? "fc2"
                         : strcmp(name, "norm1") == 0        ? "self_attn_layer_norm"
                         : strcmp(name, "norm2") == 0 ? (decoder ? "encoder_attn_layer_norm"
                                                                 : "final_layer_norm")
                         : strcmp(name, "norm3") == 0 ? "final_layer_norm"
                                                      : name;
    snprintf(out, size, "model.%.*s%s%s", (int)(module - ours), ours, theirs, rest);
}

/* Writes m's parameters under their published names, in one file or split
 * over two shards with an index; extra tensors as transformers also saves
 * (a sinusoidal table, a tied lm_head) when asked. */
static void write_weights(tfm_model *m, int shards, int with_copies, int no_logits_bias)
{
    tfm_params *p = tfm_model_params(m);
    int64_t n = tfm_params_count(p);
    char names[160][128];
    const char *name_of[160];
    const tfm_tensor *tensors[160];
    ck_assert_int_le(n + 2, 160);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        published(tfm_params_name(p, i), names[kept], sizeof names[kept]);
        /* M2M100's lm_head has no bias and its file no final_logits_bias */
        if (no_logits_bias && strcmp(names[kept], "final_logits_bias") == 0)
            continue;
        name_of[kept] = names[kept];
        tensors[kept++] = tfm_params_at(p, i);
    }
    n = kept;
    tfm_tensor *copy = NULL;
    if (with_copies) { /* lm_head.weight, a copy of the tied table */
        snprintf(names[n], sizeof names[n], "lm_head.weight");
        name_of[n] = names[n];
        tensors[n] = tfm_params_find(p, "src_embedding.weight");
        n++;
        copy = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){MAX_POS, D});
        snprintf(names[n], sizeof names[n], "model.encoder.embed_positions.weight");
        name_of[n] = names[n];
        tensors[n] = copy;
        n++;
    }
    if (!shards) {
        ck_assert_int_eq(tfm_safetensors_write(in_folder("model.safetensors"), n, name_of,
                                               tensors), TFM_OK);
    } else {
        int64_t half = n / 2;
        ck_assert_int_eq(tfm_safetensors_write(in_folder("a.safetensors"), half, name_of,
                                               tensors), TFM_OK);
        ck_assert_int_eq(tfm_safetensors_write(in_folder("b.safetensors"), n - half,
                                               name_of + half, tensors + half), TFM_OK);
        char *index = malloc(16384);
        int at = snprintf(index, 16384, "{\"metadata\": {\"total_size\": 1}, \"weight_map\": {");
        for (int64_t i = 0; i < n; i++)
            at += snprintf(index + at, 16384 - (size_t)at, "%s\"%s\": \"%s\"", i ? ", " : "",
                           name_of[i], i < half ? "a.safetensors" : "b.safetensors");
        snprintf(index + at, 16384 - (size_t)at, "}}");
        write_text("model.safetensors.index.json", index);
        free(index);
    }
    tfm_tensor_free(copy);
}

static void logits_of(tfm_model *m, float *out, int64_t count)
{
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){2, 5},
                                          (const int32_t[]){4, 7, 9, 3, 2, 5, 6, 8, 2, 1});
    tfm_tensor *tgt = tfm_tensor_from_i32(2, (const int64_t[]){2, 3},
                                          (const int32_t[]){2, 11, 12, 2, 13, 4});
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *logits = tfm_model_forward(tape, m, src, tgt, NULL,
                                           tfm_mask_causal(tape, 3, TFM_I32), NULL, NULL,
                                           NULL, NULL);
    ck_assert_msg(logits != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tensor_read_f32(logits, out, count), TFM_OK);
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
}

/* Every family, single-file and sharded: the same options, the same
 * logits to the bit. */
START_TEST(each_family_loads_its_published_names)
{
    int family = _i / 2, shards = _i % 2;
    make_folder();
    tfm_model_options o;
    family_options(family, &o);
    tfm_model *made = tfm_model_create(&o);
    ck_assert_msg(made != NULL, "%s", tfm_last_error());
    tfm_model_set_training(made, 0);
    if (family == M2M100) {
        float *bias = tfm_tensor_data_f32(tfm_params_find(tfm_model_params(made),
                                                          "generator.bias"));
        memset(bias, 0, VOCAB * sizeof *bias);
    }
    write_weights(made, shards, family == MARIAN, family == M2M100);
    write_config(family, activation_name[family], "");
    tfm_model *loaded = tfm_model_from_pretrained(folder);
    ck_assert_msg(loaded != NULL, "%s: %s", model_type[family], tfm_last_error());
    tfm_model_options got;
    tfm_model_options_init(&got);
    ck_assert_int_eq(tfm_model_get_options(loaded, &got), TFM_OK);
    ck_assert_int_eq(got.positions, o.positions);
    ck_assert_int_eq(got.position_offset, o.position_offset);
    ck_assert_int_eq(got.norm_first, o.norm_first);
    ck_assert_int_eq(got.final_norm, o.final_norm);
    ck_assert_int_eq(got.embedding_norm, o.embedding_norm);
    ck_assert_int_eq(got.activation, o.activation);
    ck_assert_int_eq(got.embedding_scale, o.embedding_scale);
    ck_assert_int_eq(got.bos_id, family == MARIAN ? PAD : EOS); /* decoder_start_token_id */
    ck_assert_int_eq(got.eos_id, EOS);
    ck_assert_int_eq(got.pad_id, PAD);
    enum { N = 2 * 3 * VOCAB };
    float want[N], have[N];
    logits_of(made, want, N);
    logits_of(loaded, have, N);
    ck_assert_mem_eq(want, have, sizeof want);
    tfm_model_free(loaded);
    tfm_model_free(made);
    remove_folder();
}
END_TEST

/* Rewrites config.json without the key (which must be there) and its
 * value, up to the next comma. */
static void drop_from_config(const char *key)
{
    char text[2048], quoted[64];
    FILE *f = fopen(in_folder("config.json"), "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    snprintf(quoted, sizeof quoted, "\"%s\"", key);
    char *at = strstr(text, quoted), *comma = at ? strchr(at, ',') : NULL;
    ck_assert_msg(comma != NULL, "%s not in config.json", key);
    memmove(at, comma + 1, strlen(comma + 1) + 1);
    write_text("config.json", text);
}

/* The keys a config.json may leave out take the family's Config class
 * default (configuration_*.py): M2M100Config scales embeddings and uses
 * relu, MarianConfig, BartConfig and MBartConfig neither scale nor use
 * anything but gelu; max_position_embeddings is 1024 (here for the
 * sinusoidal families, whose tables are computed). Each folder without
 * them gives the logits of the model made with those defaults, as one
 * that spells them out does. */
START_TEST(config_defaults_are_the_families)
{
    int family = _i;
    static const char *const default_activation[FAMILIES] = {"gelu", "gelu", "gelu", "relu"};
    make_folder();
    tfm_model_options o;
    family_options(family, &o);
    o.activation = family == M2M100 ? TFM_ACTIVATION_RELU : TFM_ACTIVATION_GELU;
    o.embedding_scale =
        family == M2M100 ? TFM_EMBEDDING_SCALE_SQRT_D : TFM_EMBEDDING_SCALE_NONE;
    tfm_model *made = tfm_model_create(&o);
    ck_assert_msg(made != NULL, "%s", tfm_last_error());
    tfm_model_set_training(made, 0);
    if (family == M2M100)
        memset(tfm_tensor_data_f32(tfm_params_find(tfm_model_params(made), "generator.bias")),
               0, VOCAB * sizeof(float));
    write_weights(made, 0, 0, family == M2M100);
    enum { N = 2 * 3 * VOCAB };
    float want[N], have[N];
    logits_of(made, want, N);
    char spelled[64];
    snprintf(spelled, sizeof spelled, ", \"scale_embedding\": %s",
             family == M2M100 ? "true" : "false");
    for (int explicit = 1; explicit >= 0; explicit--) {
        write_config(family, default_activation[family], explicit ? spelled : "");
        /* write_config's own scale_embedding comes first: the reader sees it */
        drop_from_config("scale_embedding");
        if (!explicit) {
            drop_from_config("activation_function");
            if (o.positions != TFM_POSITIONS_LEARNED)
                drop_from_config("max_position_embeddings");
        }
        tfm_model *loaded = tfm_model_from_pretrained(folder);
        ck_assert_msg(loaded != NULL, "%s: %s", model_type[family], tfm_last_error());
        logits_of(loaded, have, N);
        ck_assert_msg(memcmp(want, have, sizeof want) == 0, "%s, %s", model_type[family],
                      explicit ? "spelled out" : "left out");
        tfm_model_options got;
        tfm_model_options_init(&got);
        ck_assert_int_eq(tfm_model_get_options(loaded, &got), TFM_OK);
        ck_assert_int_eq(got.max_src_len,
                         explicit || o.positions == TFM_POSITIONS_LEARNED ? MAX_POS : 1024);
        tfm_model_free(loaded);
    }
    tfm_model_free(made);
    remove_folder();
}
END_TEST

/* A good Marian folder, then one thing broken: NULL, and the message
 * naming what is wrong. */
static void expect_refusal(tfm_status status, const char *fragment);
static tfm_model *good_folder(int family);

/* The special ids a config.json leaves out take its Config class's
 * defaults (BartConfig's pad 1, eos 2, decoder start 2; MBartConfig has no
 * decoder start: generate() starts from bos_token_id, itself 0 by
 * default), and so does forced_eos_token_id without a
 * generation_config.json (BART's and mBART's 2, M2M100's none): the
 * folders were refused for the missing keys. */
START_TEST(config_ids_default_to_the_families)
{
    int family = _i + BART; /* MarianConfig's ids are past this vocabulary */
    tfm_model *m = good_folder(family);
    static const char *const dropped[] = {"pad_token_id", "eos_token_id", "bos_token_id",
                                          "decoder_start_token_id"};
    for (size_t k = 0; k < sizeof dropped / sizeof dropped[0]; k++)
        drop_from_config(dropped[k]);
    tfm_model *loaded = tfm_model_from_pretrained(folder);
    ck_assert_msg(loaded != NULL, "%s: %s", model_type[family], tfm_last_error());
    tfm_model_options got;
    tfm_model_options_init(&got);
    ck_assert_int_eq(tfm_model_get_options(loaded, &got), TFM_OK);
    ck_assert_int_eq(got.pad_id, 1);
    ck_assert_int_eq(got.eos_id, 2);
    ck_assert_int_eq(got.bos_id, family == MBART ? 0 : 2);
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    ck_assert_int_eq(tfm_decode_options_from_model(loaded, &o), TFM_OK);
    ck_assert_int_eq(o.forced_eos_id, family == M2M100 ? -1 : 2);
    tfm_model_free(loaded);
    /* a bos_token_id is mBART's start */
    write_config(family, activation_name[family], "");
    drop_from_config("decoder_start_token_id");
    write_text("generation_config.json", "{}");
    loaded = tfm_model_from_pretrained(folder);
    ck_assert_msg(loaded != NULL, "%s: %s", model_type[family], tfm_last_error());
    ck_assert_int_eq(tfm_model_get_options(loaded, &got), TFM_OK);
    ck_assert_int_eq(got.bos_id, family == MBART ? 0 : 2);
    tfm_decode_options_init(&o);
    ck_assert_int_eq(tfm_decode_options_from_model(loaded, &o), TFM_OK);
    ck_assert_int_eq(o.forced_eos_id, -1); /* GenerationConfig's, not the class's */
    tfm_model_free(loaded);
    /* a vocab_size the tables do not have: both shapes and the value named */
    write_config(family, activation_name[family], ", \"vocab_size\": 20");
    drop_from_config("vocab_size"); /* write_config's, the first */
    expect_refusal(TFM_ERR_FORMAT, "tensor model.shared.weight is F32 [19,8] where config.json "
                   "describes [20,8] (vocab_size 20, d_model 8)");
    tfm_model_free(m);
    remove_folder();
}
END_TEST

/* Marian's decoder_vocab_size other than the one table's: its shape, not
 * "no tensor model.decoder.embed_tokens.weight" */
START_TEST(vocabulary_sizes_are_checked_against_the_tables)
{
    tfm_model *m = good_folder(MARIAN);
    write_config(MARIAN, "swish", ", \"decoder_vocab_size\": 20");
    expect_refusal(TFM_ERR_FORMAT, "tensor model.shared.weight is F32 [19,8] where config.json "
                   "describes [20,8] (decoder_vocab_size 20, d_model 8)");
    tfm_model_free(m);
    remove_folder();
}
END_TEST
static void expect_refusal(tfm_status status, const char *fragment)
{
    tfm_clear_error();
    tfm_model *m = tfm_model_from_pretrained(folder);
    ck_assert_msg(m == NULL, "loaded, expected \"%s\"", fragment);
    ck_assert_int_eq(tfm_last_status(), status);
    ck_assert_msg(strstr(tfm_last_error(), fragment) != NULL, "\"%s\" not in \"%s\"", fragment,
                  tfm_last_error());
    ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_model_from_pretrained"));
}

static tfm_model *good_folder(int family)
{
    make_folder();
    tfm_model_options o;
    family_options(family, &o);
    tfm_model *m = tfm_model_create(&o);
    write_weights(m, 0, 0, 0);
    write_config(family, activation_name[family], "");
    return m;
}

START_TEST(unsupported_configs_are_named)
{
    tfm_model *m = good_folder(MARIAN);
    write_text("config.json", "{\"model_type\": \"pegasus\"}");
    expect_refusal(TFM_ERR_FORMAT, "model_type \"pegasus\" is not a family");
    /* T5's own keys: an inner width num_heads * d_kv past 2^31 (one other
     * than d_model is head_dim), an activation libtfm lacks inside
     * feed_forward_proj */
    static const char t5[] = "{\"model_type\": \"t5\", \"vocab_size\": 19, \"d_model\": 8,"
                             " \"num_layers\": 1, \"num_heads\": 2, \"d_ff\": 12,"
                             " \"pad_token_id\": 0, \"eos_token_id\": 1,"
                             " \"decoder_start_token_id\": 0, ";
    char config[512];
    snprintf(config, sizeof config, "%s\"d_kv\": 2147483647}", t5);
    write_text("config.json", config);
    expect_refusal(TFM_ERR_FORMAT, "head_dim 2147483647 must be 0 (d_model / heads) or "
                   "positive, with 2 heads of it at most 2147483648 wide");
    snprintf(config, sizeof config, "%s\"d_kv\": 4, \"feed_forward_proj\": \"gated-quick_gelu\"}",
             t5);
    write_text("config.json", config);
    expect_refusal(TFM_ERR_FORMAT, "feed_forward_proj \"quick_gelu\" is not supported");
    /* a name that is no string is refused, not taken for the default */
    snprintf(config, sizeof config, "%s\"d_kv\": 4, \"feed_forward_proj\": 3}", t5);
    write_text("config.json", config);
    expect_refusal(TFM_ERR_FORMAT, "feed_forward_proj (not a string) is not supported");
    write_text("config.json", "[1, 2]");
    expect_refusal(TFM_ERR_FORMAT, "config.json is not a JSON object");
    write_text("config.json", "{\"model_type\": \"marian\",");
    expect_refusal(TFM_ERR_FORMAT, "invalid JSON");
    write_config(MARIAN, "quick_gelu", "");
    expect_refusal(TFM_ERR_FORMAT, "activation_function \"quick_gelu\" is not supported");
    write_text("config.json",
               "{\"model_type\": \"marian\", \"vocab_size\": 19, \"d_model\": 8,"
               " \"encoder_layers\": 2, \"decoder_layers\": 2, \"encoder_attention_heads\": 2,"
               " \"decoder_attention_heads\": 2, \"encoder_ffn_dim\": 12,"
               " \"decoder_ffn_dim\": 16}");
    expect_refusal(TFM_ERR_FORMAT, "encoder_ffn_dim 12 and decoder_ffn_dim 16 differ");
    write_text("config.json", "{\"model_type\": \"marian\", \"vocab_size\": -3}");
    expect_refusal(TFM_ERR_FORMAT, "vocab_size must be an integer");
    /* the rest MarianConfig's defaults: a decoder start past the vocabulary */
    write_text("config.json", "{\"model_type\": \"marian\", \"vocab_size\": 19}");
    expect_refusal(TFM_ERR_FORMAT, "options.bos_id 58100 is neither -1 (not set) nor in [0, 19)");
    /* T5Config has no decoder start; transformers' generate() would start
     * from bos_token_id */
    write_text("config.json", "{\"model_type\": \"t5\", \"vocab_size\": 19}");
    expect_refusal(TFM_ERR_FORMAT, "config.json has no decoder_start_token_id (nor bos_token_id");
    /* heads that do not divide d_model: the options' own check, renamed */
    write_text("config.json",
               "{\"model_type\": \"marian\", \"vocab_size\": 19, \"d_model\": 8,"
               " \"encoder_layers\": 2, \"decoder_layers\": 2, \"encoder_attention_heads\": 3,"
               " \"decoder_attention_heads\": 3, \"encoder_ffn_dim\": 12,"
               " \"decoder_ffn_dim\": 12, \"max_position_embeddings\": 16,"
               " \"activation_function\": \"swish\", \"pad_token_id\": 1, \"eos_token_id\": 2,"
               " \"decoder_start_token_id\": 1}");
    expect_refusal(TFM_ERR_FORMAT, "config.json describes no model");
    unlink(in_folder("config.json"));
    expect_refusal(TFM_ERR_IO, "config.json");
    tfm_model_free(m);
    remove_folder();
}
END_TEST

START_TEST(corrupt_weights_are_named)
{
    tfm_model *m = good_folder(MBART);
    write_weights(m, 0, 0, 0);
    tfm_safetensors *file = tfm_safetensors_open(in_folder("model.safetensors"));
    int64_t n = tfm_safetensors_count(file), kept = 0;
    const char **names = calloc((size_t)n + 1, sizeof *names);
    tfm_tensor **tensors = calloc((size_t)n + 1, sizeof *tensors);
    for (int64_t i = 0; i < n; i++) {
        names[i] = tfm_safetensors_name(file, i);
        tensors[i] = tfm_safetensors_get(file, names[i]);
    }
    /* a tensor missing */
    const char *without[160];
    const tfm_tensor *without_tensors[160];
    for (int64_t i = 0; i < n; i++)
        if (strcmp(names[i], "model.decoder.layers.1.fc2.bias") != 0) {
            without[kept] = names[i];
            without_tensors[kept++] = tensors[i];
        }
    ck_assert_int_eq(kept, n - 1);
    ck_assert_int_eq(tfm_safetensors_write(in_folder("model.safetensors"), kept, without,
                                           without_tensors), TFM_OK);
    expect_refusal(TFM_ERR_FORMAT, "no tensor model.decoder.layers.1.fc2.bias (libtfm's "
                                   "decoder.layers.1.linear2.bias)");
    /* a tensor libtfm does not know: an option it would ignore */
    names[n] = "model.encoder.layers.0.self_attn.rotary.weight";
    tensors[n] = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){4});
    ck_assert_int_eq(tfm_safetensors_write(in_folder("model.safetensors"), n + 1, names,
                                           (const tfm_tensor *const *)tensors), TFM_OK);
    expect_refusal(TFM_ERR_FORMAT, "tensor model.encoder.layers.0.self_attn.rotary.weight is "
                                   "not one libtfm reads for a mbart model");
    /* a tensor of the wrong shape */
    tfm_tensor_free(tensors[n]);
    for (int64_t i = 0; i < n; i++)
        if (strcmp(names[i], "model.encoder.layers.1.fc1.weight") == 0) {
            tfm_tensor_free(tensors[i]);
            tensors[i] = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){FF, D + 1});
        }
    ck_assert_int_eq(tfm_safetensors_write(in_folder("model.safetensors"), n, names,
                                           (const tfm_tensor *const *)tensors), TFM_OK);
    expect_refusal(TFM_ERR_FORMAT, "tensor model.encoder.layers.1.fc1.weight is F32 [12,9] "
                                   "where config.json describes [12,8]");
    for (int64_t i = 0; i < n; i++)
        tfm_tensor_free(tensors[i]);
    free(tensors);
    free(names);
    tfm_safetensors_close(file);
    /* a truncated file */
    FILE *f = fopen(in_folder("model.safetensors"), "r+b");
    ck_assert_int_eq(ftruncate(fileno(f), 40), 0);
    fclose(f);
    expect_refusal(TFM_ERR_FORMAT, "model.safetensors");
    /* no weights at all */
    unlink(in_folder("model.safetensors"));
    expect_refusal(TFM_ERR_IO, "neither model.safetensors nor model.safetensors.index.json");
    /* an index naming a path outside the folder, a missing shard, no map */
    write_text("model.safetensors.index.json",
               "{\"weight_map\": {\"model.shared.weight\": \"../x.safetensors\"}}");
    expect_refusal(TFM_ERR_FORMAT, "other than a file name in the folder");
    write_text("model.safetensors.index.json",
               "{\"weight_map\": {\"model.shared.weight\": \"a.safetensors\"}}");
    expect_refusal(TFM_ERR_IO, "a.safetensors");
    write_text("model.safetensors.index.json", "{\"metadata\": {}}");
    expect_refusal(TFM_ERR_FORMAT, "has no weight_map object");
    write_text("model.safetensors.index.json", "{\"weight_map\": {}}");
    expect_refusal(TFM_ERR_FORMAT, "names no shard");
    tfm_model_free(m);
    remove_folder();
}
END_TEST

/* generation_config.json's defaults reach a decoding through
 * tfm_decode_options_from_model, lengths less the start token (20 when
 * absent, as transformers'), with transformers' beam search and
 * renormalize_logits; a decoding made with them never produces a bad
 * word and ends with its forced eos (or the other end token). */
START_TEST(published_decoding_defaults)
{
    tfm_model *m = good_folder(MARIAN);
    write_text("generation_config.json",
               "{\"bad_words_ids\": [[1], [4, 5]], \"max_length\": 9, \"num_beams\": 3,"
               " \"decoder_start_token_id\": 1, \"eos_token_id\": [2, 3],"
               " \"forced_bos_token_id\": 7, \"min_length\": 3, \"length_penalty\": 0.5,"
               " \"no_repeat_ngram_size\": 2, \"forced_eos_token_id\": 2,"
               " \"early_stopping\": \"never\", \"renormalize_logits\": true}");
    tfm_model *loaded = tfm_model_from_pretrained(folder);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    ck_assert_int_eq(tfm_decode_options_from_model(loaded, &o), TFM_OK);
    ck_assert_int_eq(o.strategy, TFM_DECODE_BEAM);
    ck_assert_int_eq(o.beam_size, 3);
    ck_assert_int_eq(o.max_length, 8);
    ck_assert_int_eq(o.min_length, 2);
    ck_assert_float_eq(o.length_penalty, 0.5f);
    ck_assert_int_eq(o.no_repeat_ngram_size, 2);
    ck_assert_int_eq(o.bos_id, 1);
    ck_assert_int_eq(o.eos_id, 2);
    ck_assert_int_eq(o.n_eos_ids, 1);
    ck_assert_int_eq(o.eos_ids[0], 3);
    ck_assert_int_eq(o.forced_bos_id, 7);
    ck_assert_int_eq(o.src_pad_id, PAD);
    ck_assert_int_eq(o.n_bad_words, 2);
    ck_assert_int_eq(o.bad_word_lengths[0], 1);
    ck_assert_int_eq(o.bad_word_lengths[1], 2);
    ck_assert_int_eq(o.bad_words[0], 1);
    ck_assert_int_eq(o.bad_words[2], 5);
    ck_assert_int_eq(o.forced_eos_id, 2);
    ck_assert_int_eq(o.beam_rules, TFM_BEAM_RULES_TRANSFORMERS);
    ck_assert_int_eq(o.early_stopping, TFM_EARLY_STOPPING_NEVER);
    ck_assert_int_eq(o.renormalize_logits, 1);
    tfm_decoding *d = tfm_decoding_create(loaded, &o, 1, 5);
    ck_assert_msg(d != NULL, "%s", tfm_last_error());
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){1, 5},
                                          (const int32_t[]){4, 7, 9, 3, 2});
    int32_t tokens[9], lengths[1];
    ck_assert_int_eq(tfm_decoding_run(d, src, tokens, 9, lengths, 1, NULL, 0, NULL, 0, NULL, 0),
                     TFM_OK);
    ck_assert_int_eq(tokens[1], 7); /* forced */
    for (int i = 1; i < lengths[0]; i++)
        ck_assert_int_ne(tokens[i], 1);
    ck_assert(tokens[lengths[0] - 1] == 2 || tokens[lengths[0] - 1] == 3);
    tfm_tensor_free(src);
    tfm_decoding_free(d);
    tfm_model_free(loaded);

    /* older folders keep them in config.json */
    unlink(in_folder("generation_config.json"));
    write_config(MARIAN, "swish", ", \"num_beams\": 4, \"max_length\": 6,"
                 " \"early_stopping\": true");
    loaded = tfm_model_from_pretrained(folder);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    tfm_decode_options_init(&o);
    ck_assert_int_eq(tfm_decode_options_from_model(loaded, &o), TFM_OK);
    ck_assert_int_eq(o.beam_size, 4);
    ck_assert_int_eq(o.max_length, 5);
    ck_assert_int_eq(o.early_stopping, TFM_EARLY_STOPPING_TRUE);
    tfm_model_free(loaded);
    write_text("generation_config.json", "{}");
    loaded = tfm_model_from_pretrained(folder);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    tfm_decode_options_init(&o);
    ck_assert_int_eq(tfm_decode_options_from_model(loaded, &o), TFM_OK);
    ck_assert_int_eq(o.max_length, MAX_POS - 1); /* 20 - 1, capped by the positions */
    ck_assert_int_eq(o.forced_eos_id, -1);
    ck_assert_int_eq(o.early_stopping, TFM_EARLY_STOPPING_HEURISTIC);
    ck_assert_int_eq(o.renormalize_logits, 0);
    tfm_model_free(loaded);

    /* a minimum past the maximum: transformers warns and generates to the
     * maximum, end tokens banned all the way; so does libtfm (min_length
     * at max_length), where every decode used to be refused */
    static const char *const unfeasible[] = {
        "{\"min_length\": 50, \"max_length\": 9}",
        "{\"min_new_tokens\": 30, \"max_new_tokens\": 8}"};
    for (int k = 0; k < 2; k++) {
        write_text("generation_config.json", unfeasible[k]);
        loaded = tfm_model_from_pretrained(folder);
        ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
        tfm_decode_options_init(&o);
        ck_assert_int_eq(tfm_decode_options_from_model(loaded, &o), TFM_OK);
        ck_assert_int_eq(o.max_length, 8);
        ck_assert_int_eq(o.min_length, 8);
        d = tfm_decoding_create(loaded, &o, 1, 5);
        ck_assert_msg(d != NULL, "%s", tfm_last_error());
        src = tfm_tensor_from_i32(2, (const int64_t[]){1, 5}, (const int32_t[]){4, 7, 9, 3, 2});
        ck_assert_int_eq(tfm_decoding_run(d, src, tokens, 9, lengths, 1, NULL, 0, NULL, 0,
                                          NULL, 0), TFM_OK);
        ck_assert_int_eq(lengths[0], 9);
        for (int i = 1; i < 9; i++)
            ck_assert_int_ne(tokens[i], EOS);
        tfm_tensor_free(src);
        tfm_decoding_free(d);
        tfm_model_free(loaded);
    }

    write_text("generation_config.json", "{\"bad_words_ids\": [[]]}");
    expect_refusal(TFM_ERR_FORMAT, "generation_config.json's bad_words_ids is not a list");
    write_text("generation_config.json", "{\"bad_words_ids\": [[99]]}");
    expect_refusal(TFM_ERR_FORMAT, "bad_words_ids holds something other than token ids");
    write_text("generation_config.json", "{\"num_beams\": 0}");
    expect_refusal(TFM_ERR_FORMAT, "generation_config.json's num_beams must be an integer");
    write_text("generation_config.json", "{\"length_penalty\": \"long\"}");
    expect_refusal(TFM_ERR_FORMAT, "length_penalty must be a number");
    write_text("generation_config.json", "{\"early_stopping\": \"soon\"}");
    expect_refusal(TFM_ERR_FORMAT, "early_stopping must be true, false or \"never\"");
    write_text("generation_config.json", "{\"renormalize_logits\": 1}");
    expect_refusal(TFM_ERR_FORMAT, "renormalize_logits must be true or false");
    write_text("generation_config.json", "{\"eos_token_id\": []}");
    expect_refusal(TFM_ERR_FORMAT, "eos_token_id is an empty list");
    write_text("generation_config.json", "7");
    expect_refusal(TFM_ERR_FORMAT, "generation_config.json is not a JSON object");
    tfm_model_free(m);
    remove_folder();
}
END_TEST

/* generation_config.json {refusing, "key": value} is refused by key's
 * name; {loading, "key": kept} loads. */
static void refused_then_loaded(const char *refusing, const char *key, const char *value,
                                const char *loading, const char *kept)
{
    char text[256];
    snprintf(text, sizeof text, "{%s, \"%s\": %s}", refusing, key, value);
    write_text("generation_config.json", text);
    snprintf(text, sizeof text, "generation_config.json's %s is not supported", key);
    expect_refusal(TFM_ERR_FORMAT, text);
    snprintf(text, sizeof text, "{%s, \"%s\": %s}", loading, key, kept);
    write_text("generation_config.json", text);
    tfm_model *loaded = tfm_model_from_pretrained(folder);
    ck_assert_msg(loaded != NULL, "%s: %s", key, tfm_last_error());
    tfm_model_free(loaded);
}

/* generation_config.json's options that would change the decoding and
 * that libtfm does not implement are refused by name when set; at their
 * defaults (or null, or empty) the folder loads. The sampling-only ones
 * count only with do_sample; config.json carries them for older folders. */
START_TEST(unsupported_generation_options_are_named)
{
    static const struct {
        const char *key, *set, *neutral;
    } options[] = {
        {"num_beam_groups", "2", "1"},
        {"diversity_penalty", "0.5", "0.0"},
        {"penalty_alpha", "0.6", "null"},
        {"encoder_no_repeat_ngram_size", "3", "0"},
        {"encoder_repetition_penalty", "1.2", "1.0"},
        {"guidance_scale", "1.5", "1"},
        {"exponential_decay_length_penalty", "[5, 1.5]", "null"},
        {"sequence_bias", "[[[4], -1.0]]", "null"},
        {"force_words_ids", "[[4]]", "null"},
        {"constraints", "[{}]", "null"},
        {"suppress_tokens", "[4, 5]", "[]"},
        {"begin_suppress_tokens", "[4]", "null"},
        {"forced_decoder_ids", "[[1, 4]]", "null"},
        {"max_time", "2.5", "null"},
        {"stop_strings", "[\"end\"]", "null"},
        {"token_healing", "true", "false"},
        {"watermarking_config", "{\"bias\": 2.5}", "null"},
        {"dola_layers", "\"high\"", "null"},
    }, sampling[] = {
        {"typical_p", "0.9", "1.0"},
        {"epsilon_cutoff", "0.001", "0.0"},
        {"eta_cutoff", "0.001", "0.0"},
        {"min_p", "0.1", "null"},
    };
    tfm_model *m = good_folder(MARIAN);
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++)
        refused_then_loaded("\"num_beams\": 4", options[i].key, options[i].set,
                            "\"num_beams\": 4", options[i].neutral);
    /* without sampling, generate() never reads these */
    for (size_t i = 0; i < sizeof sampling / sizeof sampling[0]; i++)
        refused_then_loaded("\"do_sample\": true", sampling[i].key, sampling[i].set,
                            "\"do_sample\": false", sampling[i].set);
    write_text("generation_config.json", "{\"do_sample\": true, \"num_beams\": 3}");
    expect_refusal(TFM_ERR_FORMAT, "do_sample with num_beams 3 (beam sampling) is not");
    /* what Python alone reads, and num_return_sequences (its first sequence
     * is libtfm's), load */
    write_text("generation_config.json",
               "{\"num_beams\": 4, \"num_return_sequences\": 2, \"output_scores\": true,"
               " \"return_dict_in_generate\": true, \"use_cache\": false,"
               " \"_from_model_config\": true, \"transformers_version\": \"4.40.0\","
               " \"pad_token_id\": 1, \"bos_token_id\": 0}");
    tfm_model *loaded = tfm_model_from_pretrained(folder);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    tfm_model_free(loaded);
    /* older folders: config.json's own */
    unlink(in_folder("generation_config.json"));
    write_config(MARIAN, "swish", ", \"num_beam_groups\": 2, \"diversity_penalty\": 0.5");
    expect_refusal(TFM_ERR_FORMAT, "config.json's num_beam_groups is not supported");
    tfm_model_free(m);
    remove_folder();
}
END_TEST

static void copy_file(const char *from, const char *name)
{
    FILE *in = fopen(from, "rb"), *out = fopen(in_folder(name), "wb");
    ck_assert(in && out);
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, in)) > 0)
        ck_assert_uint_eq(fwrite(buffer, 1, n, out), n);
    fclose(in);
    fclose(out);
}

/* A vocab.json numbering base's pieces as they are, then <pad> when pad. */
static void write_vocab(const tfm_tokenizer *base, int pad)
{
    int32_t n = tfm_tokenizer_vocab_size(base);
    FILE *f = fopen(in_folder("vocab.json"), "w");
    ck_assert_ptr_nonnull(f);
    fputc('{', f);
    for (int32_t id = 0; id < n; id++) {
        char piece[256];
        int64_t length;
        ck_assert_int_eq(tfm_tokenizer_id_to_piece(base, id, piece, sizeof piece, &length),
                         TFM_OK);
        fputc('"', f);
        for (int64_t k = 0; k < length; k++) /* the fixture's pieces are printable */
            fprintf(f, strchr("\"\\", piece[k]) ? "\\%c" : "%c", piece[k]);
        fprintf(f, "\": %d%s", id, id + 1 < n || pad ? ", " : "");
    }
    if (pad)
        fprintf(f, "\"<pad>\": %d", n);
    fputc('}', f);
    fclose(f);
}

/* The ids of a short English text (capacity 64): their count. */
static int64_t encode_fox(const tfm_tokenizer *tok, int32_t *ids)
{
    static const char text[] = "the quick brown fox";
    int64_t count;
    ck_assert_int_eq(tfm_tokenizer_encode(tok, text, sizeof text - 1, ids, 64, &count), TFM_OK);
    return count;
}

/* Marian's source.spm and target.spm with vocab.json become the model's
 * tokenizers: here the fixture's SentencePiece model, its pieces numbered
 * as they are, and <pad> after them. */
START_TEST(marian_tokenizers_come_with_the_folder)
{
    tfm_tokenizer *base = tfm_tokenizer_load_sentencepiece(TFM_FIXTURES "/text/bpe.model");
    ck_assert_ptr_nonnull(base);
    int32_t n = tfm_tokenizer_vocab_size(base);
    vocab = n + 1;
    tfm_model *m = good_folder(MARIAN);
    copy_file(TFM_FIXTURES "/text/bpe.model", "source.spm");
    copy_file(TFM_FIXTURES "/text/bpe.model", "target.spm");
    write_vocab(base, 1);
    tfm_model *loaded = tfm_model_from_pretrained(folder);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    const tfm_tokenizer *source = tfm_model_tokenizer(loaded, 0);
    const tfm_tokenizer *target = tfm_model_tokenizer(loaded, 1);
    ck_assert_ptr_nonnull(source);
    ck_assert_ptr_nonnull(target);
    ck_assert_int_eq(tfm_tokenizer_vocab_size(target), n + 1);
    ck_assert_int_eq(tfm_tokenizer_special_id(target, TFM_TOKEN_PAD), n);
    int32_t want[64], got[64];
    int64_t count = encode_fox(base, want);
    ck_assert_int_eq(encode_fox(source, got), count);
    ck_assert_mem_eq(got, want, (size_t)count * sizeof *got);
    tfm_model_free(loaded);
    /* a one-language family's src_lang and tgt_lang are no codes it carries */
    write_text("tokenizer_config.json", "{\"src_lang\": \"en\", \"tgt_lang\": \"fr\"}");
    loaded = tfm_model_from_pretrained(folder);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    tfm_model_free(loaded);
    unlink(in_folder("tokenizer_config.json"));

    /* a broken vocabulary refuses the folder */
    write_text("vocab.json", "{\"<unk>\": 0,");
    expect_refusal(TFM_ERR_FORMAT, "tfm_tokenizer_load_sentencepiece_with_vocab");
    tfm_model_free(m);
    tfm_tokenizer_free(base);
    vocab = VOCAB;
    remove_folder();
}
END_TEST

/* A multilingual OPUS-MT source starts with its target language, ">>fra<<":
 * MarianTokenizer (tokenization_marian.py, remove_language_code) takes a
 * leading ">>" up to the first "<<" as one token, vocab.json's id for it
 * (<unk> when vocab.json lacks it), before the SentencePiece pieces of the
 * rest; anywhere else it is text. Decoding spells it out: it is no special
 * token. The model keeps the rule through a save and a load. */
START_TEST(marian_sources_take_a_leading_language_code)
{
    tfm_tokenizer *base = tfm_tokenizer_load_sentencepiece(TFM_FIXTURES "/text/bpe.model");
    ck_assert_ptr_nonnull(base);
    int32_t n = tfm_tokenizer_vocab_size(base), fox[64], ids[64];
    int64_t count = encode_fox(base, fox);
    vocab = n + 2;
    tfm_model *m = good_folder(MARIAN);
    copy_file(TFM_FIXTURES "/text/bpe.model", "source.spm");
    copy_file(TFM_FIXTURES "/text/bpe.model", "target.spm");
    write_vocab(base, 1);
    FILE *f = fopen(in_folder("vocab.json"), "r+");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fseek(f, -1, SEEK_END), 0); /* over the closing brace */
    fprintf(f, ", \">>fra<<\": %d}", n + 1);
    fclose(f);
    tfm_model *loaded = tfm_model_from_pretrained(folder);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    const char *path = in_folder("saved.safetensors");
    ck_assert_int_eq(tfm_model_save(loaded, path), TFM_OK);
    tfm_model *back = tfm_model_load(path);
    ck_assert_msg(back != NULL, "%s", tfm_last_error());
    unlink(path);
    int32_t unk = tfm_tokenizer_special_id(tfm_model_tokenizer(loaded, 0), TFM_TOKEN_UNK);
    static const struct {
        const char *text;
        int code; /* 1: >>fra<<, 0: <unk>, -1: no code */
    } cases[] = {{">>fra<< the quick brown fox", 1},
                 {">>fra<<the quick brown fox", 1},
                 {">>xyz<< the quick brown fox", 0},
                 {">>fr a<< the quick brown fox", 0},
                 {"the quick brown fox", -1}};
    for (tfm_model *each = loaded; each; each = each == loaded ? back : NULL)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            int64_t got;
            ck_assert_int_eq(tfm_model_encode_text(each, cases[c].text,
                                                   (int64_t)strlen(cases[c].text), ids, 64,
                                                   &got), TFM_OK);
            int32_t has = cases[c].code >= 0;
            ck_assert_int_eq(got, count + has + 1);
            if (has)
                ck_assert_int_eq(ids[0], cases[c].code ? n + 1 : unk);
            ck_assert_mem_eq(ids + has, fox, (size_t)count * sizeof *fox);
            ck_assert_int_eq(ids[got - 1], EOS);
        }
    /* ">>" with no "<<" is text, and so is a code past the start */
    int64_t got;
    ck_assert_int_eq(tfm_model_encode_text(loaded, "the >>fra<<", 11, ids, 64, &got), TFM_OK);
    ck_assert_int_ne(ids[0], n + 1);
    ck_assert_int_eq(tfm_model_encode_text(loaded, ">>fra", 5, ids, 64, &got), TFM_OK);
    ck_assert_int_ne(ids[0], n + 1);
    char text[128];
    int32_t tokens[65] = {n + 1};
    memcpy(tokens + 1, fox, (size_t)count * sizeof *fox);
    ck_assert_int_eq(tfm_model_decode_text(loaded, tokens, count + 1, text, sizeof text, &got),
                     TFM_OK);
    ck_assert_str_eq(text, ">>fra<< the quick brown fox");
    tfm_model_free(back);
    tfm_model_free(loaded);
    tfm_model_free(m);
    tfm_tokenizer_free(base);
    vocab = VOCAB;
    remove_folder();
}
END_TEST

/* The loaded folder's tokenizer (which it must have), kept past the model. */
static tfm_tokenizer *folder_tokenizer(void)
{
    tfm_model *m = tfm_model_from_pretrained(folder);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    const tfm_tokenizer *tok = tfm_model_tokenizer(m, 0);
    ck_assert_ptr_nonnull(tok);
    int64_t size;
    tfm_tokenizer_save_bytes(tok, NULL, 0, &size);
    char *bytes = malloc((size_t)size);
    ck_assert_int_eq(tfm_tokenizer_save_bytes(tok, bytes, size, &size), TFM_OK);
    tfm_tokenizer *copy = tfm_tokenizer_from_bytes(bytes, size);
    ck_assert_ptr_nonnull(copy);
    free(bytes);
    tfm_model_free(m);
    return copy;
}

static int32_t id_of(const tfm_tokenizer *tok, const char *piece)
{
    return tfm_tokenizer_piece_to_id(tok, piece, (int64_t)strlen(piece));
}

/* A new folder of the family with a vocabulary of size, the fixture's
 * BPE model as sentencepiece.bpe.model, and settings (when not NULL) as
 * tokenizer_config.json. */
static tfm_model *fairseq_folder(int family, int64_t size, const char *settings)
{
    vocab = size;
    tfm_model *m = good_folder(family);
    copy_file(TFM_FIXTURES "/text/bpe.model", "sentencepiece.bpe.model");
    if (settings)
        write_text("tokenizer_config.json", settings);
    return m;
}

/* mBART's and M2M100's sentencepiece.bpe.model (here the fixture's BPE
 * model) numbered by tokenizer_config.json's tokenizer_class, as
 * transformers does: mBART's 25 codes by default, mBART-50's 52 and
 * NLLB's 202 after the pieces (moved up by one behind fairseq's four),
 * then <mask>; M2M100's vocab.json, then its "__xx__" codes (m2m100's 100
 * or wmt21's 8), then the made-up words. */
START_TEST(fairseq_tokenizers_come_with_the_folder)
{
    tfm_tokenizer *base = tfm_tokenizer_load_sentencepiece(TFM_FIXTURES "/text/bpe.model");
    ck_assert_ptr_nonnull(base);
    int32_t n = tfm_tokenizer_vocab_size(base);
    tfm_model *m = fairseq_folder(MBART, n + 204, NULL);
    tfm_tokenizer *tok = folder_tokenizer();
    ck_assert_int_eq(tfm_tokenizer_vocab_size(tok), n + 27);
    ck_assert_int_eq(id_of(tok, "ar_AR"), n + 1);
    ck_assert_int_eq(id_of(tok, "zh_CN"), n + 25);
    ck_assert_int_eq(id_of(tok, "<mask>"), n + 26);
    ck_assert_int_eq(id_of(tok, "gl_ES"), -1);
    int32_t want[64], got[64];
    int64_t count = encode_fox(base, want);
    ck_assert_int_eq(encode_fox(tok, got), count);
    for (int64_t k = 0; k < count; k++)
        ck_assert_int_eq(got[k], want[k] == tfm_tokenizer_special_id(base, TFM_TOKEN_UNK)
                                     ? 3 : want[k] + 1);
    tfm_tokenizer_free(tok);

    write_text("tokenizer_config.json", "{\"tokenizer_class\": \"MBart50TokenizerFast\"}");
    tok = folder_tokenizer();
    ck_assert_int_eq(id_of(tok, "sl_SI"), n + 52);
    ck_assert_int_eq(id_of(tok, "<mask>"), n + 53);
    tfm_tokenizer_free(tok);
    write_text("tokenizer_config.json", "{\"tokenizer_class\": \"T5Tokenizer\"}");
    expect_refusal(TFM_ERR_FORMAT, "tokenizer_class \"T5Tokenizer\" is not one libtfm reads "
                   "for a mbart model");
    write_text("tokenizer_config.json", "{\"tokenizer_class\": ");
    expect_refusal(TFM_ERR_FORMAT, "tokenizer_config.json: invalid JSON");
    write_text("tokenizer_config.json", "[]");
    expect_refusal(TFM_ERR_FORMAT, "tokenizer_config.json is not a JSON object");
    tfm_model_free(m);
    remove_folder();

    /* M2M100: no tokenizer without vocab.json */
    m = fairseq_folder(M2M100, n + 108, NULL);
    tfm_model *loaded = tfm_model_from_pretrained(folder);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    ck_assert_ptr_null(tfm_model_tokenizer(loaded, 0));
    tfm_model_free(loaded);
    write_vocab(base, 0);
    tok = folder_tokenizer();
    ck_assert_int_eq(tfm_tokenizer_vocab_size(tok), n + 108);
    ck_assert_int_eq(id_of(tok, "__af__"), n);
    ck_assert_int_eq(id_of(tok, "__zu__"), n + 99);
    ck_assert_int_eq(encode_fox(tok, got), count);
    ck_assert_mem_eq(got, want, (size_t)count * sizeof *got);
    tfm_tokenizer_free(tok);
    write_text("tokenizer_config.json", "{\"tokenizer_class\": \"M2M100Tokenizer\", "
               "\"language_codes\": \"wmt21\", \"num_madeup_words\": 0}");
    tok = folder_tokenizer();
    ck_assert_int_eq(tfm_tokenizer_vocab_size(tok), n + 8);
    ck_assert_int_eq(id_of(tok, "__de__"), n + 7);
    tfm_tokenizer_free(tok);
    write_text("tokenizer_config.json", "{\"language_codes\": \"wmt22\"}");
    expect_refusal(TFM_ERR_FORMAT, "tokenizer_config.json's language_codes \"wmt22\" is not");
    write_text("tokenizer_config.json", "{\"num_madeup_words\": -1}");
    expect_refusal(TFM_ERR_FORMAT, "tokenizer_config.json's num_madeup_words must be");
    /* NLLB: an M2M100 model with NllbTokenizer */
    tfm_model_free(m);
    remove_folder();
    m = fairseq_folder(M2M100, n + 204, "{\"tokenizer_class\": \"NllbTokenizer\"}");
    tok = folder_tokenizer();
    ck_assert_int_eq(tfm_tokenizer_vocab_size(tok), n + 204);
    ck_assert_int_eq(id_of(tok, "eng_Latn"), n + 47);
    ck_assert_int_eq(id_of(tok, "<mask>"), n + 203);
    tfm_tokenizer_free(tok);
    /* a model too small for its tokenizer */
    tfm_model_free(m);
    remove_folder();
    m = fairseq_folder(M2M100, n + 203, "{\"tokenizer_class\": \"NllbTokenizer\"}");
    expect_refusal(TFM_ERR_ARG, "more than the model's");
    tfm_model_free(m);
    tfm_tokenizer_free(base);
    vocab = VOCAB;
    remove_folder();
}
END_TEST

/* The folder's model's source ids for the fox, with the family's ids
 * around them (capacity 64): their count. */
static int64_t fox_source(const tfm_model *m, int32_t *ids)
{
    static const char text[] = "the quick brown fox";
    int64_t count;
    ck_assert_msg(tfm_model_encode_text(m, text, sizeof text - 1, ids, 64, &count) == TFM_OK, "%s",
                  tfm_last_error());
    return count;
}

/* The forced first token decoding takes from the model. */
static int32_t forced_bos(const tfm_model *m)
{
    tfm_decode_options o;
    tfm_decode_options_init(&o);
    ck_assert_int_eq(tfm_decode_options_from_model(m, &o), TFM_OK);
    return o.forced_bos_id;
}

/* The ids each multilingual layout puts around a source, as
 * transformers' tokenizers do: mBART-cc25's MBartTokenizer X </s> [code],
 * MBart50Tokenizer [code] X </s>, NllbTokenizer [code] X </s> (legacy
 * X </s> [code]), M2M100Tokenizer [__code__] X </s>; src_lang, tgt_lang
 * and their defaults; tfm_model_set_languages, its refusals, and the
 * languages through a save and a load. */
START_TEST(multilingual_sources_carry_their_language)
{
    static const struct {
        int family;
        int64_t extra;
        const char *settings, *source, *target;
        int code_last;
    } cases[] = {
        {MBART, 204, NULL, "en_XX", NULL, 1},
        {MBART, 204, "{\"tokenizer_class\": \"MBart50Tokenizer\", \"src_lang\": \"de_DE\", "
         "\"tgt_lang\": \"fr_XX\"}", "de_DE", "fr_XX", 0},
        {M2M100, 204, "{\"tokenizer_class\": \"NllbTokenizer\"}", "eng_Latn", NULL, 0},
        {M2M100, 204, "{\"tokenizer_class\": \"NllbTokenizer\", \"legacy_behaviour\": true, "
         "\"tgt_lang\": \"fra_Latn\"}", "eng_Latn", "fra_Latn", 1},
        {M2M100, 108, "{\"src_lang\": \"fr\"}", "__fr__", NULL, 0},
    };
    tfm_tokenizer *base = tfm_tokenizer_load_sentencepiece(TFM_FIXTURES "/text/bpe.model");
    ck_assert_ptr_nonnull(base);
    int32_t n = tfm_tokenizer_vocab_size(base), fox[64], ids[64];
    int64_t count = encode_fox(base, fox);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tfm_model *m = fairseq_folder(cases[c].family, n + cases[c].extra, cases[c].settings);
        if (cases[c].family == M2M100 && cases[c].extra == 108)
            write_vocab(base, 0);
        tfm_model *loaded = tfm_model_from_pretrained(folder);
        ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
        const tfm_tokenizer *tok = tfm_model_tokenizer(loaded, 0);
        int32_t code = id_of(tok, cases[c].source);
        ck_assert_int_ge(code, 0);
        ck_assert_int_eq(fox_source(loaded, ids), count + 2);
        ck_assert_int_eq(ids[cases[c].code_last ? count + 1 : 0], code);
        ck_assert_int_eq(ids[cases[c].code_last ? count : count + 1], EOS);
        ck_assert_int_eq(forced_bos(loaded), cases[c].target ? id_of(tok, cases[c].target) : -1);
        /* M2M100's codes by their short name too; an unknown one changes nothing */
        const char *other = cases[c].family == MBART ? "es_XX"
                            : cases[c].extra == 108  ? "de"
                                                     : "deu_Latn";
        ck_assert_int_eq(tfm_model_set_languages(loaded, "xx_YY", NULL), TFM_ERR_ARG);
        ck_assert_int_eq(tfm_model_set_languages(loaded, NULL, "the"), TFM_ERR_ARG);
        /* the special tokens are control pieces too, but no language */
        ck_assert_int_eq(tfm_model_set_languages(loaded, "</s>", NULL), TFM_ERR_ARG);
        ck_assert_int_eq(tfm_model_set_languages(loaded, NULL, "<pad>"), TFM_ERR_ARG);
        ck_assert_int_eq(fox_source(loaded, ids), count + 2);
        ck_assert_int_eq(ids[cases[c].code_last ? count + 1 : 0], code);
        ck_assert_int_eq(tfm_model_set_languages(loaded, other, other), TFM_OK);
        int32_t other_id = cases[c].extra == 108 ? id_of(tok, "__de__") : id_of(tok, other);
        ck_assert_int_ge(other_id, 0);
        const char *path = in_folder("saved.safetensors");
        ck_assert_int_eq(tfm_model_save(loaded, path), TFM_OK);
        tfm_model *back = tfm_model_load(path);
        ck_assert_msg(back != NULL, "%s", tfm_last_error());
        unlink(path);
        for (tfm_model *each = loaded; each; each = each == loaded ? back : NULL) {
            ck_assert_int_eq(fox_source(each, ids), count + 2);
            ck_assert_int_eq(ids[cases[c].code_last ? count + 1 : 0], other_id);
            ck_assert_int_eq(forced_bos(each), other_id);
        }
        tfm_model_free(back);
        tfm_model_free(loaded);
        tfm_model_free(m);
        remove_folder();
    }
    tfm_tokenizer_free(base);
    vocab = VOCAB;
}
END_TEST

START_TEST(null_folder)
{
    ck_assert_ptr_null(tfm_model_from_pretrained(NULL));
    ck_assert_int_eq(tfm_last_status(), TFM_ERR_NULL);
    ck_assert_str_eq(tfm_last_error(), "tfm_model_from_pretrained: folder is NULL");
}
END_TEST

static Suite *pretrained_folders_suite(void)
{
    Suite *s = suite_create("pretrained_folders");
    TCase *tc = tcase_create("folders");
    tcase_add_loop_test(tc, each_family_loads_its_published_names, 0, 2 * FAMILIES);
    tcase_add_loop_test(tc, config_defaults_are_the_families, 0, FAMILIES);
    tcase_add_loop_test(tc, config_ids_default_to_the_families, 0, FAMILIES - BART);
    tcase_add_test(tc, vocabulary_sizes_are_checked_against_the_tables);
    tcase_add_test(tc, unsupported_configs_are_named);
    tcase_add_test(tc, multilingual_sources_carry_their_language);
    tcase_add_test(tc, corrupt_weights_are_named);
    tcase_add_test(tc, published_decoding_defaults);
    tcase_add_test(tc, unsupported_generation_options_are_named);
    tcase_add_test(tc, marian_tokenizers_come_with_the_folder);
    tcase_add_test(tc, marian_sources_take_a_leading_language_code);
    tcase_add_test(tc, fairseq_tokenizers_come_with_the_folder);
    tcase_add_test(tc, null_folder);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(pretrained_folders_suite)
