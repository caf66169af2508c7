/* Files that carry their model, loading state_dicts whose names differ,
 * and training states that resume bit for bit in a fresh process. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "rewrite_metadata.h"
#include "training_workload.h"

extern char **environ;

static char folder[64];

static void make_folder(void)
{
    snprintf(folder, sizeof folder, "/tmp/tfm_checkpoint_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(folder));
}

static void remove_folder(void)
{
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", folder);
    ck_assert_int_eq(system(command), 0);
}

static const char *in_folder(const char *name)
{
    static char paths[8][160];
    static int next;
    char *path = paths[next++ % 8];
    snprintf(path, sizeof paths[0], "%s/%s", folder, name);
    return path;
}

static void expect_error(tfm_status status, const char *substring)
{
    ck_assert_msg(tfm_last_status() == status, "status %s, expected %s: %s",
                  tfm_status_name(tfm_last_status()), tfm_status_name(status), tfm_last_error());
    ck_assert_msg(strstr(tfm_last_error(), substring) != NULL, "\"%s\" lacks \"%s\"",
                  tfm_last_error(), substring);
}

static tfm_model *workload_model(void)
{
    tfm_model_options o;
    workload_model_options(&o);
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    return m;
}

/* Evaluation-mode logits of a fixed batch, into out (caller's buffer). */
static void logits_of(tfm_model *m, float *out, int64_t count)
{
    int32_t src[2 * 5] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    int32_t tgt[2 * 4] = {1, 3, 5, 7, 2, 4, 6, 8};
    tfm_tensor *s = tfm_tensor_from_i32(2, (const int64_t[]){2, 5}, src);
    tfm_tensor *t = tfm_tensor_from_i32(2, (const int64_t[]){2, 4}, tgt);
    tfm_tape *tape = tfm_tape_create();
    tfm_model_set_training(m, 0);
    tfm_tensor *logits = tfm_model_forward(tape, m, s, t, NULL, NULL, NULL, NULL, NULL, NULL);
    ck_assert_msg(logits != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_tensor_read_f32(logits, out, count), TFM_OK);
    tfm_tape_free(tape);
    tfm_tensor_free(s);
    tfm_tensor_free(t);
}

START_TEST(a_saved_model_loads_from_the_file_alone)
{
    make_folder();
    tfm_model *m = workload_model();
    const char *path = in_folder("model.safetensors");
    ck_assert_int_eq(tfm_model_save(m, path), TFM_OK);
    tfm_model *loaded = tfm_model_load(path);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());

    tfm_model_options a, b;
    tfm_model_options_init(&a);
    tfm_model_options_init(&b);
    ck_assert_int_eq(tfm_model_get_options(m, &a), TFM_OK);
    ck_assert_int_eq(tfm_model_get_options(loaded, &b), TFM_OK);
    ck_assert_int_eq(memcmp(&a, &b, sizeof a), 0);
    ck_assert_int_eq(tfm_model_tgt_vocab(loaded), 13);
    ck_assert_int_eq(tfm_model_src_vocab(loaded), 17);
    ck_assert_int_eq(tfm_model_max_src_len(loaded), WORKLOAD_SRC);
    ck_assert_int_eq(tfm_model_max_tgt_len(loaded), WORKLOAD_TGT);
    ck_assert_int_eq(tfm_model_d_model(loaded), 16);

    float x[2 * 4 * 13], y[2 * 4 * 13];
    logits_of(m, x, 2 * 4 * 13);
    logits_of(loaded, y, 2 * 4 * 13);
    ck_assert_int_eq(memcmp(x, y, sizeof x), 0);

    /* the description is plain metadata any safetensors reader sees */
    tfm_safetensors *file = tfm_safetensors_open(path);
    ck_assert_str_eq(tfm_safetensors_metadata_get(file, "tfm.positions"), "learned");
    ck_assert_str_eq(tfm_safetensors_metadata_get(file, "tfm.heads"), "4");
    ck_assert_str_eq(tfm_safetensors_metadata_get(file, "tfm.dropout"), "0.200000003");
    ck_assert_ptr_null(tfm_safetensors_metadata_get(file, "tfm.nothing"));
    expect_error(TFM_ERR_ARG, "no key \"tfm.nothing\"");
    tfm_safetensors_close(file);

    /* a store of the same model still loads it by name */
    tfm_model *twin = workload_model();
    ck_assert_int_eq(tfm_params_load(tfm_model_params(twin), path), TFM_OK);
    tfm_model_free(twin);
    tfm_model_free(loaded);
    tfm_model_free(m);
    remove_folder();
}
END_TEST

START_TEST(users_metadata_round_trips)
{
    make_folder();
    tfm_model *m = workload_model();
    const char *path = in_folder("with_vocab.safetensors");
    const char *keys[] = {"vocabulary", "recipe", "note"};
    const char *values[] = {"<pad> <s> </s> a b c", "AdamW lr=3e-3", "quotes \" and \\ and \xc3\xa9"};
    ck_assert_int_eq(tfm_model_save_with_metadata(m, path, 3, keys, values), TFM_OK);
    tfm_safetensors *file = tfm_safetensors_open(path);
    ck_assert_ptr_nonnull(file);
    for (int i = 0; i < 3; i++)
        ck_assert_str_eq(tfm_safetensors_metadata_get(file, keys[i]), values[i]);
    /* sorted by key, libtfm's own among them */
    int64_t count = tfm_safetensors_metadata_count(file);
    ck_assert_int_gt(count, 20);
    for (int64_t i = 1; i < count; i++)
        ck_assert_int_lt(strcmp(tfm_safetensors_metadata_key(file, i - 1),
                                tfm_safetensors_metadata_key(file, i)), 0);
    ck_assert_ptr_null(tfm_safetensors_metadata_key(file, count));
    expect_error(TFM_ERR_RANGE, "outside [0,");
    tfm_safetensors_close(file);

    const char *reserved[] = {"tfm.d_model"};
    ck_assert_int_eq(tfm_model_save_with_metadata(m, in_folder("x"), 1, reserved, values),
                     TFM_ERR_ARG);
    expect_error(TFM_ERR_ARG, "libtfm keeps for its own keys");
    const char *twice[] = {"a", "a"};
    ck_assert_int_eq(tfm_model_save_with_metadata(m, in_folder("x"), 2, twice, values),
                     TFM_ERR_ARG);
    expect_error(TFM_ERR_ARG, "\"a\" is given twice");
    const char *bad_utf8[] = {"\xff"};
    ck_assert_int_eq(tfm_model_save_with_metadata(m, in_folder("x"), 1, keys, bad_utf8),
                     TFM_ERR_ARG);
    ck_assert_int_eq(tfm_model_save_with_metadata(m, in_folder("x"), 1, NULL, values),
                     TFM_ERR_NULL);
    ck_assert_int_eq(access(in_folder("x"), F_OK), -1);

    /* a value past the readers' header limit (100 MB) is refused before the
     * good checkpoint at the path is replaced; it loaded as "tfm_model_load:
     * header length 120000304 is absurd" */
    size_t huge = 120000000;
    char *big = malloc(huge + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'a', huge);
    big[huge] = '\0';
    const char *big_values[] = {big};
    ck_assert_int_eq(tfm_model_save_with_metadata(m, path, 1, keys, big_values), TFM_ERR_SIZE);
    expect_error(TFM_ERR_SIZE, "tfm_model_save_with_metadata: the header would take");
    free(big);
    tfm_model *still = tfm_model_load(path);
    ck_assert_msg(still != NULL, "%s", tfm_last_error());
    tfm_model_free(still);
    tfm_model_free(m);
    remove_folder();
}
END_TEST

START_TEST(bad_descriptions_are_refused_with_the_key_named)
{
    make_folder();
    tfm_model *m = workload_model();
    const char *good = in_folder("good.safetensors"), *bad = in_folder("bad.safetensors");
    ck_assert_int_eq(tfm_model_save(m, good), TFM_OK);
    static const struct {
        const char *key, *value, *expected;
    } cases[] = {
        {"tfm.heads", NULL, "the metadata lacks tfm.heads"},
        {"tfm.format_version", NULL, "holds no model description"},
        {"tfm.format_version", "3", "in format \"3\"; this libtfm reads formats 1 and 2 (int8)"},
        {"tfm.format_version", "2", "tfm.int8 is missing in format 2"},
        {"tfm.d_model", "sixteen", "tfm.d_model = \"sixteen\" is not a whole number"},
        {"tfm.d_model", "16.5", "is not a whole number"},
        {"tfm.d_model", " 16", "is not a whole number"},
        {"tfm.d_model", "+16", "is not a whole number"},
        {"tfm.d_model", "0x10", "is not a whole number"},
        {"tfm.d_model", "", "is not a whole number"},
        {"tfm.d_model", "99999999999999999999", "is not a whole number"},
        {"tfm.d_model", "0", "tfm.d_model = 0 is outside [1, 2147483648]"},
        {"tfm.d_model", "-16", "is outside"},
        {"tfm.d_model", "4294967296", "is outside"},
        {"tfm.encoder_layers", "1000000", "is outside [0, 4096]"},
        {"tfm.dropout", "nan", "tfm.dropout = \"nan\" is not a finite number"},
        {"tfm.dropout", "inf", "is not a finite number"},
        {"tfm.dropout", "1.5", "tfm.dropout = 1.5 is outside [0, 1]"},
        {"tfm.positions", "rotary", "\"rotary\" is not one of \"sinusoidal\", \"learned\""},
        {"tfm.activation", "RELU", "is not one of"},
        {"tfm.seed", "-1", "tfm.seed = \"-1\" is not a whole number from 0 to 2^64 - 1"},
        {"tfm.share_embeddings", "2", "is outside [0, 1]"},
        /* the file's own value named, not what a cast made of it */
        {"tfm.heads", "2147483648", "tfm.heads = 2147483648 is outside [1, 2147483647]"},
        /* out of float's range: which way, not "not a finite number" */
        {"tfm.dropout", "1e-50", "tfm.dropout = 1e-50 is below the smallest normal float "
                                 "(1.17549435e-38) and not 0"},
        {"tfm.layer_norm_eps", "1e-40", "is below the smallest normal float"},
        {"tfm.scale_init", "1e39", "tfm.scale_init = 1e39 is beyond the largest float"},
        {"tfm.embedding_dropout", "-1.5", "is outside [-1, 1]"},
        /* plausible values that do not fit the tensors */
        {"tfm.d_ff", "23", "tensor \"decoder.layers.0.linear1.bias\" has shape [24]"},
        {"tfm.decoder_layers", "1", "holds tensor \"decoder.layers.1."},
        {"tfm.tgt_vocab", "12", "shape"},
        /* sizes that would allocate far more than the file holds */
        {"tfm.d_model", "2000000000", "needs more than the"},
        {"tfm.encoder_layers", "4096", "needs more than the"},
        {"tfm.heads", "3", "is not a valid model"},
        {"tfm.max_src_len", "2000000000", "needs more than the"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rewrite_metadata(good, bad, cases[i].key, cases[i].value);
        tfm_clear_error();
        tfm_model *loaded = tfm_model_load(bad);
        ck_assert_msg(loaded == NULL, "case %zu (%s = %s) loaded", i, cases[i].key,
                      cases[i].value ? cases[i].value : "(none)");
        expect_error(TFM_ERR_FORMAT, cases[i].expected);
        ck_assert_msg(strncmp(tfm_last_error(), "tfm_model_load: ", 16) == 0, "%s",
                      tfm_last_error());
    }
    /* sinusoidal tables are computed, so their length is bounded apart */
    tfm_model_options o;
    workload_model_options(&o);
    o.positions = TFM_POSITIONS_SINUSOIDAL;
    tfm_model *sinusoidal = tfm_model_create(&o);
    ck_assert_int_eq(tfm_model_save(sinusoidal, good), TFM_OK);
    rewrite_metadata(good, bad, "tfm.max_tgt_len", "2000000000");
    ck_assert_ptr_null(tfm_model_load(bad));
    expect_error(TFM_ERR_FORMAT, "sinusoidal tables of 7 + 2000000000 positions");
    /* 2^31 each: the size check itself must not overflow */
    const char *worse = in_folder("worse.safetensors");
    rewrite_metadata(good, bad, "tfm.max_tgt_len", "2147483648");
    rewrite_metadata(bad, worse, "tfm.max_src_len", "2147483648");
    rewrite_metadata(worse, bad, "tfm.d_model", "2147483648");
    ck_assert_ptr_null(tfm_model_load(bad));
    expect_error(TFM_ERR_FORMAT, "sinusoidal tables of 2147483648 + 2147483648 positions of "
                                 "2147483648 values are absurd");
    /* within the absolute bound (2^28 values, 1 GiB) but out of all
     * proportion to the file's few thousand values: refused before the
     * tables are filled */
    rewrite_metadata(good, bad, "tfm.max_tgt_len", "16777209"); /* (7 + 16777209) * 16 = 2^28 */
    ck_assert_ptr_null(tfm_model_load(bad));
    expect_error(TFM_ERR_FORMAT, "sinusoidal tables of 7 + 16777209 positions of 16 values "
                                 "would be larger than the model's");
    tfm_model_free(sinusoidal);

    /* a file of parameters alone, and paths that are no file */
    ck_assert_int_eq(tfm_params_save(tfm_model_params(m), bad), TFM_OK);
    ck_assert_ptr_null(tfm_model_load(bad));
    expect_error(TFM_ERR_FORMAT, "a file of parameters alone loads with tfm_params_load");
    ck_assert_ptr_null(tfm_model_load(in_folder("absent.safetensors")));
    expect_error(TFM_ERR_IO, "tfm_model_load:");
    ck_assert_ptr_null(tfm_model_load(NULL));
    expect_error(TFM_ERR_NULL, "tfm_model_load: path is NULL");
    tfm_model_free(m);
    remove_folder();
}
END_TEST

/* head_dim (T5's d_kv): printed as the other options, the projections
 * [heads * head_dim, d_model], saved and loaded back with the same logits;
 * a file without the key (written before it) loads as 0, d_model / heads,
 * and one whose tensors were made with another width is refused. */
START_TEST(head_dim_travels_with_the_model)
{
    make_folder();
    tfm_model_options o;
    workload_model_options(&o); /* d_model 16, 4 heads */
    o.head_dim = 3;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    tfm_model_set_training(m, 0);
    char value[96] = "";
    for (int32_t i = 0; i < tfm_model_option_count(); i++) {
        const char *name;
        ck_assert_int_eq(tfm_model_option(m, i, &name, value, sizeof value), TFM_OK);
        if (strcmp(name, "head_dim") == 0)
            break;
    }
    ck_assert_str_eq(value, "3");
    tfm_tensor *in_proj = tfm_params_find(tfm_model_params(m),
                                          "decoder.layers.1.multihead_attn.in_proj_weight");
    ck_assert_int_eq(tfm_tensor_dim(in_proj, 0), 3 * 4 * 3);
    ck_assert_int_eq(tfm_tensor_dim(in_proj, 1), 16);
    const char *path = in_folder("wide.safetensors"), *old = in_folder("old.safetensors");
    ck_assert_int_eq(tfm_model_save(m, path), TFM_OK);
    tfm_model *loaded = tfm_model_load(path);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    tfm_model_options got;
    tfm_model_options_init(&got);
    ck_assert_int_eq(tfm_model_get_options(loaded, &got), TFM_OK);
    ck_assert_int_eq(got.head_dim, 3);
    tfm_model_set_training(loaded, 0);
    enum { N = 2 * 3 * 13 };
    float want[N], have[N];
    tfm_tensor *src = tfm_tensor_from_i32(2, (const int64_t[]){2, 4},
                                          (const int32_t[]){1, 5, 9, 2, 3, 4, 16, 7});
    tfm_tensor *tgt = tfm_tensor_from_i32(2, (const int64_t[]){2, 3},
                                          (const int32_t[]){1, 8, 12, 1, 2, 3});
    tfm_tape *tape = tfm_tape_create();
    ck_assert_int_eq(tfm_tensor_read_f32(tfm_model_forward(tape, m, src, tgt, NULL, NULL, NULL,
                                                           NULL, NULL, NULL), want, N), TFM_OK);
    ck_assert_int_eq(tfm_tensor_read_f32(tfm_model_forward(tape, loaded, src, tgt, NULL, NULL,
                                                           NULL, NULL, NULL, NULL), have, N),
                     TFM_OK);
    ck_assert_mem_eq(want, have, sizeof want);
    tfm_tape_free(tape);
    tfm_tensor_free(src);
    tfm_tensor_free(tgt);
    tfm_model_free(loaded);
    rewrite_metadata(path, old, "tfm.head_dim", NULL);
    ck_assert_ptr_null(tfm_model_load(old));
    expect_error(TFM_ERR_FORMAT, "its model description needs more than the");
    tfm_model_free(m);

    workload_model_options(&o);
    m = tfm_model_create(&o);
    ck_assert_int_eq(tfm_model_save(m, path), TFM_OK);
    rewrite_metadata(path, old, "tfm.head_dim", NULL);
    loaded = tfm_model_load(old);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_get_options(loaded, &got), TFM_OK);
    ck_assert_int_eq(got.head_dim, 0);
    ck_assert_int_eq(tfm_model_parameter_count(loaded), tfm_model_parameter_count(m));
    tfm_model_free(loaded);
    tfm_model_free(m);
    remove_folder();
}
END_TEST

/* The special tokens live in the model: set, refused out of range, saved,
 * read back, absent from older files (-1), and handed to decoding. */
START_TEST(special_tokens_travel_with_the_model)
{
    make_folder();
    tfm_model_options o;
    workload_model_options(&o); /* src_vocab 17, tgt_vocab 13 */
    tfm_model *unset = tfm_model_create(&o);
    ck_assert_int_eq(tfm_model_bos_id(unset), -1);
    ck_assert_int_eq(tfm_model_eos_id(unset), -1);
    ck_assert_int_eq(tfm_model_pad_id(unset), -1);
    tfm_decode_options d;
    tfm_decode_options_init(&d);
    ck_assert_int_eq(tfm_decode_options_from_model(unset, &d), TFM_OK);
    ck_assert_int_eq(d.bos_id, 1); /* the decoder's own defaults stay */
    ck_assert_int_eq(d.eos_id, 2);
    ck_assert_int_eq(d.src_pad_id, -1);
    tfm_model_free(unset);

    static const struct {
        int32_t bos, eos, pad;
        const char *expected;
    } bad[] = {
        {13, 2, 0, "options.bos_id 13 is neither -1 (not set) nor in [0, 13)"},
        {1, -2, 0, "options.eos_id -2 is outside [-1, 2147483647]"},
        {1, 2, 13, "pad_id 13 is neither -1 (not set) nor in [0, 13), the ids both"},
        {1, 2, -5, "options.pad_id -5 is outside"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        workload_model_options(&o);
        o.bos_id = bad[i].bos;
        o.eos_id = bad[i].eos;
        o.pad_id = bad[i].pad;
        ck_assert_ptr_null(tfm_model_create(&o));
        expect_error(TFM_ERR_ARG, bad[i].expected);
        ck_assert_ptr_nonnull(strstr(tfm_last_error(), "tfm_model_create: "));
    }

    workload_model_options(&o);
    o.bos_id = 3;
    o.eos_id = 12;
    o.pad_id = 0;
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    const char *path = in_folder("tokens.safetensors");
    ck_assert_int_eq(tfm_model_save(m, path), TFM_OK);
    tfm_model *loaded = tfm_model_load(path);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_bos_id(loaded), 3);
    ck_assert_int_eq(tfm_model_eos_id(loaded), 12);
    ck_assert_int_eq(tfm_model_pad_id(loaded), 0);
    tfm_decode_options_init(&d);
    d.max_length = 3;
    ck_assert_int_eq(tfm_decode_options_from_model(loaded, &d), TFM_OK);
    ck_assert_int_eq(d.bos_id, 3);
    ck_assert_int_eq(d.eos_id, 12);
    ck_assert_int_eq(d.src_pad_id, 0);
    ck_assert_int_eq(d.max_length, 3);
    tfm_model_free(loaded);

    /* a file written before the tokens were saved loads with none set */
    const char *old = in_folder("old.safetensors"), *older = in_folder("older.safetensors");
    rewrite_metadata(path, old, "tfm.bos_id", NULL);
    rewrite_metadata(old, older, "tfm.eos_id", NULL);
    rewrite_metadata(older, old, "tfm.pad_id", NULL);
    rewrite_metadata(old, older, "tfm.tie_generator", NULL);
    loaded = tfm_model_load(older);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_bos_id(loaded), -1);
    ck_assert_int_eq(tfm_model_eos_id(loaded), -1);
    ck_assert_int_eq(tfm_model_pad_id(loaded), -1);
    tfm_model_free(loaded);

    /* a file's ids are checked as create checks them */
    rewrite_metadata(path, old, "tfm.eos_id", "13");
    ck_assert_ptr_null(tfm_model_load(old));
    expect_error(TFM_ERR_FORMAT, "metadata tfm.eos_id 13 is neither");
    rewrite_metadata(path, old, "tfm.pad_id", "-2");
    ck_assert_ptr_null(tfm_model_load(old));
    expect_error(TFM_ERR_FORMAT, "tfm.pad_id = -2 is outside");

    ck_assert_int_eq(tfm_model_bos_id(NULL), -1);
    expect_error(TFM_ERR_NULL, "tfm_model_bos_id: model is NULL");
    ck_assert_int_eq(tfm_decode_options_from_model(NULL, &d), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_decode_options_from_model(m, NULL), TFM_ERR_NULL);
    d.struct_size = 8;
    ck_assert_int_eq(tfm_decode_options_from_model(m, &d), TFM_ERR_ARG);
    expect_error(TFM_ERR_ARG, "call tfm_decode_options_init first");
    tfm_model_free(m);
    remove_folder();
}
END_TEST

/* CPU seconds to create, save and load a model of layers + layers tiny
 * layers (12 or 16 tensors each). */
static double create_save_load_seconds(int32_t layers)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = o.tgt_vocab = 4;
    o.max_src_len = o.max_tgt_len = 2;
    o.d_model = o.d_ff = 2;
    o.heads = 1;
    o.encoder_layers = o.decoder_layers = layers;
    const char *path = in_folder("deep.safetensors");
    clock_t start = clock();
    tfm_model *m = tfm_model_create(&o);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_save(m, path), TFM_OK);
    tfm_model *loaded = tfm_model_load(path);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
    ck_assert_int_eq(tfm_params_count(tfm_model_params(loaded)),
                     tfm_params_count(tfm_model_params(m)));
    tfm_model_free(loaded);
    tfm_model_free(m);
    return seconds;
}

/* Parameters are found by name in constant time: eight times the layers
 * (4,096 + 4,096, the most a file may hold: 122,888 tensors) cost about
 * eight times as long, where a search through the names cost 64 times
 * (223 s for the largest). */
START_TEST(deep_models_load_in_linear_time)
{
    make_folder();
    double small = create_save_load_seconds(512), large = create_save_load_seconds(4096);
    ck_assert_msg(large <= 20 * small + 1.0, "512 + 512 layers: %.3f s, 4096 + 4096: %.3f s",
                  small, large);
    remove_folder();
}
END_TEST

/* --- options: whatever is made saves and loads back ------------------------- */

typedef enum { SIZE_FIELD, COUNT_FIELD, FLAG_FIELD, FLOAT_FIELD, CHOICE_FIELD, ID_FIELD } kind;
#define FIELD(name, k) {#name, offsetof(tfm_model_options, name), k}
static const struct option_field {
    const char *name;
    size_t offset;
    kind kind;
} option_fields[] = {
    FIELD(src_vocab, SIZE_FIELD),      FIELD(tgt_vocab, SIZE_FIELD),
    FIELD(max_src_len, SIZE_FIELD),    FIELD(max_tgt_len, SIZE_FIELD),
    FIELD(share_embeddings, FLAG_FIELD), FIELD(positions, CHOICE_FIELD),
    FIELD(embedding_scale, CHOICE_FIELD), FIELD(encoder_layers, COUNT_FIELD),
    FIELD(decoder_layers, COUNT_FIELD), FIELD(final_norm, FLAG_FIELD),
    FIELD(d_model, SIZE_FIELD),        FIELD(heads, COUNT_FIELD),
    FIELD(d_ff, SIZE_FIELD),           FIELD(dropout, FLOAT_FIELD),
    FIELD(activation, CHOICE_FIELD),   FIELD(norm_first, FLAG_FIELD),
    FIELD(layer_norm_eps, FLOAT_FIELD), FIELD(bias, FLAG_FIELD),
    FIELD(fused_qkv, FLAG_FIELD),      FIELD(trainable_scale, FLAG_FIELD),
    FIELD(scale_init, FLOAT_FIELD),    FIELD(embedding_dropout, FLOAT_FIELD),
    FIELD(bos_id, ID_FIELD),           FIELD(eos_id, ID_FIELD),
    FIELD(pad_id, ID_FIELD),           FIELD(tie_generator, FLAG_FIELD),
    FIELD(position_offset, SIZE_FIELD), FIELD(embedding_norm, FLAG_FIELD),
    FIELD(feed_forward_bias, FLAG_FIELD), FIELD(rms_norm, FLAG_FIELD),
    FIELD(gated_feed_forward, FLAG_FIELD), FIELD(unscaled_attention, FLAG_FIELD),
    FIELD(relative_attention_buckets, COUNT_FIELD),
    FIELD(relative_attention_max_distance, COUNT_FIELD), FIELD(generator_rescale, FLAG_FIELD),
    FIELD(head_dim, SIZE_FIELD),
};
#undef FIELD
enum { OPTION_FIELDS = sizeof option_fields / sizeof option_fields[0] };

/* Values at and around every bound, none of them a size that would really
 * allocate gigabytes. */
static const double size_edges[] = {-1, 0, 1, 2, 3, 4, 8, 13, 2147483649.0, 1e18};
static const double count_edges[] = {INT32_MIN, -1, 0, 1, 2, 3, 4097, INT32_MAX};
static const double flag_edges[] = {-1, 0, 1, 2, INT32_MAX};
static const double choice_edges[] = {-1, 0, 1, 2, 3, 4, 100};
static const double id_edges[] = {-2, -1, 0, 1, 12, 13, 16, 17, INT32_MAX};
static const float float_edges[] = {
    NAN, INFINITY, -INFINITY, -FLT_MAX, -2.0f, -1.0f, -0.5f, -1e-40f, -0.0f, 0.0f,
    1e-40f, FLT_MIN, 1e-5f, 0.1f, 0.5f, 0.999f, 1.0f, 1.5f, 1e30f, 1e31f, FLT_MAX};

static void set_field(tfm_model_options *o, const struct option_field *f, uint64_t pick)
{
    char *at = (char *)o + f->offset;
    switch (f->kind) {
    case SIZE_FIELD: {
        int64_t v = (int64_t)size_edges[pick % (sizeof size_edges / sizeof size_edges[0])];
        memcpy(at, &v, sizeof v);
        break;
    }
    case FLOAT_FIELD: {
        float v = float_edges[pick % (sizeof float_edges / sizeof float_edges[0])];
        memcpy(at, &v, sizeof v);
        break;
    }
    default: {
        const double *edges = f->kind == COUNT_FIELD ? count_edges
                              : f->kind == FLAG_FIELD ? flag_edges
                              : f->kind == CHOICE_FIELD ? choice_edges : id_edges;
        size_t n = f->kind == COUNT_FIELD ? sizeof count_edges / sizeof count_edges[0]
                   : f->kind == FLAG_FIELD ? sizeof flag_edges / sizeof flag_edges[0]
                   : f->kind == CHOICE_FIELD ? sizeof choice_edges / sizeof choice_edges[0]
                                             : sizeof id_edges / sizeof id_edges[0];
        int32_t v = (int32_t)edges[pick % n];
        memcpy(at, &v, sizeof v);
    }
    }
}

static void small_model_options(tfm_model_options *o)
{
    workload_model_options(o); /* src_vocab 17, tgt_vocab 13, learned positions */
    o->positions = TFM_POSITIONS_SINUSOIDAL;
    o->d_model = 8;
    o->heads = 2;
    o->d_ff = 8;
    o->encoder_layers = o->decoder_layers = 1;
}

/* The text tfm_model_save writes for field f of o. */
static void field_text(const tfm_model_options *o, const struct option_field *f, char *out,
                       size_t size)
{
    static const char *const choices[3][5] = {{"sinusoidal", "learned", "sinusoidal_halves",
                                               "sinusoidal_fairseq", "none"},
                                              {"none", "sqrt_d", "trainable"},
                                              {"relu", "gelu", "silu", "gelu_tanh"}};
    const char *at = (const char *)o + f->offset;
    int32_t i32;
    memcpy(&i32, at, sizeof i32);
    if (f->kind == FLOAT_FIELD) {
        float v;
        memcpy(&v, at, sizeof v);
        snprintf(out, size, "%.9g", (double)v);
    } else if (f->kind == SIZE_FIELD) {
        int64_t v;
        memcpy(&v, at, sizeof v);
        snprintf(out, size, "%lld", (long long)v);
    } else if (f->kind == CHOICE_FIELD) {
        int which = strcmp(f->name, "positions") == 0 ? 0
                    : strcmp(f->name, "embedding_scale") == 0 ? 1 : 2;
        snprintf(out, size, "%s", i32 >= 0 && i32 < 4 && choices[which][i32]
                                      ? choices[which][i32] : "unknown");
    } else {
        snprintf(out, size, "%d", (int)i32);
    }
}

/* Random option sets made of edge values: every one tfm_model_create
 * accepts saves (as a model and as a training state) and loads back with
 * equal options; and a file carrying an option loads exactly when a model
 * can be made with it (fields that leave the tensors' names and shapes as
 * they are, written into a good file). Before, flags of 2, subnormal
 * floats, eps above 1, scale_init past 1e30, embedding_dropout below -1
 * and 4,097 layers were made and saved, and the files never loaded. */
START_TEST(options_that_are_made_save_and_load_back)
{
    make_folder();
    const char *path = in_folder("made.safetensors"), *state = in_folder("state.safetensors");
    uint64_t x = 0x9e3779b97f4a7c15u;
    int made = 0, refused = 0;
    for (int round = 0; round < 400; round++) {
        tfm_model_options o;
        small_model_options(&o);
        int changes = 1 + round % 3;
        for (int c = 0; c < changes; c++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            const struct option_field *f = &option_fields[(x >> 33) % OPTION_FIELDS];
            if (f->kind == COUNT_FIELD && strcmp(f->name, "heads") != 0 && (x >> 20) % 8)
                continue; /* 4,097 layers: refused; keep the rest quick */
            set_field(&o, f, x >> 40);
        }
        tfm_model *m = tfm_model_create(&o);
        if (!m) {
            refused++;
            continue;
        }
        made++;
        ck_assert_msg(tfm_model_save(m, path) == TFM_OK, "round %d: %s", round, tfm_last_error());
        tfm_model *loaded = tfm_model_load(path);
        ck_assert_msg(loaded != NULL, "round %d: %s", round, tfm_last_error());
        tfm_model_options a, b;
        tfm_model_options_init(&a);
        tfm_model_options_init(&b);
        tfm_model_get_options(m, &a);
        tfm_model_get_options(loaded, &b);
        ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "round %d: options differ", round);
        if (round % 8 == 0) {
            tfm_optimizer_options oo;
            tfm_optimizer_options_init(&oo, TFM_OPTIMIZER_ADAM);
            tfm_optimizer *opt = tfm_optimizer_create(tfm_model_params(m), &oo);
            ck_assert_int_eq(tfm_training_save(state, m, opt, 0, NULL, 0, NULL, NULL), TFM_OK);
            ck_assert_msg(tfm_training_load(state, m, opt, 0, NULL) == TFM_OK, "round %d: %s",
                          round, tfm_last_error());
            tfm_optimizer_free(opt);
        }
        tfm_model_free(loaded);
        tfm_model_free(m);
    }
    ck_assert_int_gt(made, 50);
    ck_assert_int_gt(refused, 50);

    /* loads exactly when it can be made */
    tfm_model_options base;
    small_model_options(&base);
    tfm_model *m = tfm_model_create(&base);
    const char *good = in_folder("base.safetensors"), *bad = in_folder("edited.safetensors");
    ck_assert_int_eq(tfm_model_save(m, good), TFM_OK);
    tfm_model_free(m);
    static const char *const neutral[] = {"dropout", "embedding_dropout", "layer_norm_eps",
                                          "scale_init", "activation", "norm_first", "heads",
                                          "max_src_len", "max_tgt_len", "bos_id", "eos_id",
                                          "pad_id"};
    for (size_t i = 0; i < OPTION_FIELDS; i++) {
        int is_neutral = 0;
        for (size_t k = 0; k < sizeof neutral / sizeof neutral[0]; k++)
            is_neutral |= strcmp(option_fields[i].name, neutral[k]) == 0;
        if (!is_neutral)
            continue;
        for (uint64_t pick = 0; pick < 21; pick++) {
            tfm_model_options o = base;
            set_field(&o, &option_fields[i], pick);
            tfm_model *created = tfm_model_create(&o);
            char key[64], text[64];
            snprintf(key, sizeof key, "tfm.%s", option_fields[i].name);
            field_text(&o, &option_fields[i], text, sizeof text);
            rewrite_metadata(good, bad, key, text);
            tfm_model *loaded = tfm_model_load(bad);
            ck_assert_msg((created != NULL) == (loaded != NULL), "%s = %s: %s, %s (%s)", key,
                          text, created ? "made" : "not made", loaded ? "loaded" : "not loaded",
                          tfm_last_error());
            tfm_model_free(created);
            tfm_model_free(loaded);
        }
    }
    remove_folder();
}
END_TEST

START_TEST(getters_refuse_null)
{
    tfm_model_options o;
    tfm_model_options_init(&o);
    ck_assert_int_eq(tfm_model_get_options(NULL, &o), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_model_tgt_vocab(NULL), -1);
    expect_error(TFM_ERR_NULL, "tfm_model_tgt_vocab: model is NULL");
    ck_assert_int_eq(tfm_model_d_model(NULL), -1);
    tfm_model *m = workload_model();
    ck_assert_int_eq(tfm_model_get_options(m, NULL), TFM_ERR_NULL);
    o.struct_size = 4;
    ck_assert_int_eq(tfm_model_get_options(m, &o), TFM_ERR_ARG);
    expect_error(TFM_ERR_ARG, "call tfm_model_options_init first");
    /* a caller built against a shorter struct gets what it has room for */
    tfm_model_options shorter;
    memset(&shorter, 0xAB, sizeof shorter);
    shorter.struct_size = (uint32_t)offsetof(tfm_model_options, share_embeddings);
    ck_assert_int_eq(tfm_model_get_options(m, &shorter), TFM_OK);
    ck_assert_int_eq(shorter.max_tgt_len, WORKLOAD_TGT);
    ck_assert_int_eq(shorter.share_embeddings, (int32_t)0xABABABAB);
    tfm_model_free(m);
}
END_TEST

/* A PyTorch-style state_dict of the model under a wrapper's prefix, with a
 * registered buffer beside it. */
static void write_wrapped(tfm_model *m, const char *path, int drop_one)
{
    tfm_params *p = tfm_model_params(m);
    int64_t count = tfm_params_count(p);
    char names[128][128];
    const char *name_ptrs[130];
    const tfm_tensor *tensors[130];
    int64_t n = 0;
    for (int64_t i = drop_one ? 1 : 0; i < count; i++, n++) {
        snprintf(names[n], sizeof names[0], "transformer.%s", tfm_params_name(p, i));
        name_ptrs[n] = names[n];
        tensors[n] = tfm_params_at(p, i);
    }
    tfm_tensor *pe = tfm_tensor_zeros(TFM_F32, 2, (const int64_t[]){7, 16});
    name_ptrs[n] = "pe";
    tensors[n++] = pe;
    ck_assert_int_eq(tfm_safetensors_write(path, n, name_ptrs, tensors), TFM_OK);
    tfm_tensor_free(pe);
}

START_TEST(state_dicts_with_other_names_load_with_options)
{
    make_folder();
    tfm_model *source = workload_model();
    const char *path = in_folder("wrapped.safetensors");
    write_wrapped(source, path, 0);
    tfm_model *m = workload_model();
    tfm_params *p = tfm_model_params(m);
    for (int64_t i = 0; i < tfm_params_numel(p); i++)
        tfm_params_values(p)[i] = 0.5f;

    /* strict by default: nothing changes */
    ck_assert_int_eq(tfm_params_load(p, path), TFM_ERR_FORMAT);
    expect_error(TFM_ERR_FORMAT, "allow_unexpected");
    ck_assert_float_eq(tfm_params_values(p)[0], 0.5f);

    tfm_load_options o;
    tfm_load_options_init(&o);
    o.strip_prefix = "transformer.";
    ck_assert_int_eq(tfm_params_load_with(p, path, &o, NULL), TFM_ERR_FORMAT);
    expect_error(TFM_ERR_FORMAT, "tensor \"pe\", which is no parameter");
    o.allow_unexpected = 1;
    tfm_load_report *report = NULL;
    ck_assert_int_eq(tfm_params_load_with(p, path, &o, &report), TFM_OK);
    ck_assert_ptr_nonnull(report);
    ck_assert_int_eq(tfm_load_report_count(report, TFM_LOAD_SKIPPED), 1);
    ck_assert_str_eq(tfm_load_report_name(report, TFM_LOAD_SKIPPED, 0), "pe");
    ck_assert_int_eq(tfm_load_report_count(report, TFM_LOAD_MISSING), 0);
    ck_assert_int_eq(tfm_load_report_count(report, TFM_LOAD_LOADED), tfm_params_count(p));
    ck_assert_ptr_null(tfm_load_report_name(report, TFM_LOAD_SKIPPED, 1));
    ck_assert_int_eq(tfm_load_report_count(report, 3), -1);
    tfm_load_report_free(report);
    ck_assert_int_eq(memcmp(tfm_params_values(p), tfm_params_values(tfm_model_params(source)),
                            (size_t)tfm_params_numel(p) * sizeof(float)),
                     0);

    /* a parameter the file lacks: refused, or kept and reported */
    write_wrapped(source, path, 1);
    for (int64_t i = 0; i < tfm_params_numel(p); i++)
        tfm_params_values(p)[i] = 0.5f;
    ck_assert_int_eq(tfm_params_load_with(p, path, &o, &report), TFM_ERR_FORMAT);
    ck_assert_ptr_null(report);
    expect_error(TFM_ERR_FORMAT, "holds no tensor \"transformer.src_embedding.weight\"");
    o.allow_missing = 1;
    ck_assert_int_eq(tfm_params_load_with(p, path, &o, &report), TFM_OK);
    ck_assert_int_eq(tfm_load_report_count(report, TFM_LOAD_MISSING), 1);
    ck_assert_str_eq(tfm_load_report_name(report, TFM_LOAD_MISSING, 0), "src_embedding.weight");
    tfm_load_report_free(report);
    ck_assert_float_eq(tfm_params_values(p)[0], 0.5f);

    /* two names that collide once stripped */
    const char *names[] = {"generator.bias", "transformer.generator.bias"};
    tfm_tensor *bias = tfm_tensor_zeros(TFM_F32, 1, (const int64_t[]){13});
    const tfm_tensor *both[] = {bias, bias};
    ck_assert_int_eq(tfm_safetensors_write(path, 2, names, both), TFM_OK);
    ck_assert_int_eq(tfm_params_load_with(p, path, &o, NULL), TFM_ERR_FORMAT);
    expect_error(TFM_ERR_FORMAT, "both name parameter \"generator.bias\"");

    /* non-finite values on request */
    tfm_tensor_write_f32(bias, (const float[]){0, 0, 0, 0, 0, NAN, 0, 0, 0, 0, 0, 0, 0}, 13);
    ck_assert_int_eq(tfm_safetensors_write(path, 1, names, both), TFM_OK);
    ck_assert_int_eq(tfm_params_load_with(p, path, &o, NULL), TFM_OK);
    ck_assert(isnan(tfm_params_values(p)[tfm_params_numel(p) - 8]));
    o.check_finite = 1;
    ck_assert_int_eq(tfm_params_load_with(p, path, &o, NULL), TFM_ERR_NUMERIC);
    expect_error(TFM_ERR_NUMERIC, "tensor \"generator.bias\" holds a NaN or Inf at [5]");
    o.struct_size = 2;
    ck_assert_int_eq(tfm_params_load_with(p, path, &o, NULL), TFM_ERR_ARG);
    tfm_tensor_free(bias);
    tfm_model_free(m);
    tfm_model_free(source);
    remove_folder();
}
END_TEST

static int same_bytes(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        same = ca == cb;
        if (ca == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* 2N steps straight equal N steps, a save, a fresh process that loads and
 * takes N steps: the same bits, parameters, moments, streams and all. */
START_TEST(training_resumes_bit_for_bit_in_a_fresh_process)
{
    make_folder();
    const char *straight = in_folder("straight.safetensors"), *half = in_folder("half.safetensors"),
               *resumed = in_folder("resumed.safetensors");
    tfm_model *m = workload_model();
    tfm_optimizer *opt = workload_optimizer(m);
    tfm_rng *data = tfm_rng_create(5);
    float losses[WORKLOAD_STEPS];
    ck_assert_int_eq(workload_steps(m, opt, data, 0, WORKLOAD_STEPS, losses), TFM_OK);
    ck_assert_int_eq(tfm_training_save(straight, m, opt, 1, (const tfm_rng *const *)&data, 0,
                                       NULL, NULL),
                     TFM_OK);
    ck_assert_float_ne(losses[0], losses[WORKLOAD_STEPS - 1]);
    tfm_rng_free(data);
    tfm_optimizer_free(opt);
    tfm_model_free(m);

    m = workload_model();
    opt = workload_optimizer(m);
    data = tfm_rng_create(5);
    ck_assert_int_eq(workload_steps(m, opt, data, 0, WORKLOAD_STEPS / 2, NULL), TFM_OK);
    ck_assert_int_eq(tfm_training_save(half, m, opt, 1, (const tfm_rng *const *)&data, 0, NULL,
                                       NULL),
                     TFM_OK);
    const char *child = getenv("TFM_RESUME_CHILD");
    ck_assert_msg(child != NULL, "TFM_RESUME_CHILD names the resume_child program");
    char *argv[] = {(char *)child, (char *)half, (char *)resumed, NULL};
    pid_t pid;
    ck_assert_int_eq(posix_spawn(&pid, child, NULL, NULL, argv, environ), 0);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed");
    ck_assert_msg(same_bytes(straight, resumed), "the resumed run's state differs");

    /* resuming in this process too, into the objects that ran the first half */
    ck_assert_int_eq(workload_steps(m, opt, data, WORKLOAD_STEPS / 2, WORKLOAD_STEPS, NULL),
                     TFM_OK);
    ck_assert_int_eq(tfm_training_save(half, m, opt, 1, (const tfm_rng *const *)&data, 0, NULL,
                                       NULL),
                     TFM_OK);
    ck_assert(same_bytes(straight, half));

    /* a fresh optimizer takes the saved step count and weight decays */
    tfm_model *fresh = tfm_model_load(half);
    tfm_optimizer *fresh_opt = workload_optimizer(fresh);
    ck_assert_int_eq(tfm_training_load(half, fresh, fresh_opt, 1, &data), TFM_OK);
    ck_assert_int_eq(tfm_optimizer_step_count(fresh_opt), WORKLOAD_STEPS);
    tfm_params *p = tfm_model_params(fresh);
    for (int64_t i = 0; i < tfm_params_count(p); i++)
        ck_assert_float_eq(tfm_optimizer_weight_decay(fresh_opt, i),
                           tfm_tensor_ndim(tfm_params_at(p, i)) < 2 ? 0.0f : 0.05f);
    tfm_optimizer_free(fresh_opt);
    tfm_model_free(fresh);
    tfm_rng_free(data);
    tfm_optimizer_free(opt);
    tfm_model_free(m);
    remove_folder();
}
END_TEST

START_TEST(training_load_checks_everything_first)
{
    make_folder();
    const char *path = in_folder("state.safetensors"), *bad = in_folder("bad.safetensors");
    tfm_model *m = workload_model();
    tfm_optimizer *opt = workload_optimizer(m);
    tfm_rng *data = tfm_rng_create(5);
    ck_assert_int_eq(workload_steps(m, opt, data, 0, 2, NULL), TFM_OK);
    const char *keys[] = {"epoch"}, *values[] = {"3"};
    ck_assert_int_eq(tfm_training_save(path, m, opt, 1, (const tfm_rng *const *)&data, 1, keys,
                                       values),
                     TFM_OK);
    tfm_safetensors *file = tfm_safetensors_open(path);
    ck_assert_str_eq(tfm_safetensors_metadata_get(file, "epoch"), "3");
    tfm_safetensors_close(file);
    /* a model file reads a training state's model */
    tfm_model *loaded = tfm_model_load(path);
    ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
    tfm_model_free(loaded);

    /* another model, streams or optimizer: refused, and nothing changes */
    tfm_model_options o;
    workload_model_options(&o);
    o.d_ff = 20;
    tfm_model *other = tfm_model_create(&o);
    tfm_optimizer *other_opt = workload_optimizer(other);
    float before = tfm_params_values(tfm_model_params(other))[0];
    ck_assert_int_eq(tfm_training_load(path, other, other_opt, 1, &data), TFM_ERR_ARG);
    expect_error(TFM_ERR_ARG, "tfm.d_ff is 20 here, 24 there");
    ck_assert_float_eq(tfm_params_values(tfm_model_params(other))[0], before);
    ck_assert_int_eq(tfm_optimizer_step_count(other_opt), 0);

    tfm_model *twin = workload_model();
    tfm_optimizer *twin_opt = workload_optimizer(twin);
    ck_assert_int_eq(tfm_training_load(path, twin, twin_opt, 0, NULL), TFM_ERR_ARG);
    expect_error(TFM_ERR_ARG, "holds \"1\" random streams of the caller's; rng_count is 0");
    ck_assert_int_eq(tfm_training_load(path, twin, other_opt, 1, &data), TFM_ERR_ARG);
    expect_error(TFM_ERR_ARG, "not over the model's parameters");
    ck_assert_int_eq(tfm_training_load(path, twin, twin_opt, 40, &data), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_training_load(path, NULL, twin_opt, 1, &data), TFM_ERR_NULL);
    tfm_rng *null_rng = NULL;
    ck_assert_int_eq(tfm_training_load(path, twin, twin_opt, 1, &null_rng), TFM_ERR_NULL);

    /* a damaged stream or step count */
    rewrite_metadata(path, bad, "tfm.rng.0", "0000000000000000 0000000000000000 0000000000000000 "
                                    "0000000000000000 0 00000000");
    ck_assert_int_eq(tfm_training_load(bad, twin, twin_opt, 1, &data), TFM_ERR_FORMAT);
    expect_error(TFM_ERR_FORMAT, "tfm.rng.0 = ");
    rewrite_metadata(path, bad, "tfm.rng.model", "zz");
    ck_assert_int_eq(tfm_training_load(bad, twin, twin_opt, 1, &data), TFM_ERR_FORMAT);
    rewrite_metadata(path, bad, "tfm.state", NULL);
    ck_assert_int_eq(tfm_training_load(bad, twin, twin_opt, 1, &data), TFM_ERR_FORMAT);
    expect_error(TFM_ERR_FORMAT, "holds no training state");
    ck_assert_int_eq(tfm_optimizer_step_count(twin_opt), 0);
    ck_assert_int_eq(tfm_training_load(path, twin, twin_opt, 1, &data), TFM_OK);
    ck_assert_int_eq(tfm_optimizer_step_count(twin_opt), 2);

    ck_assert_int_eq(tfm_training_save(bad, twin, other_opt, 1, (const tfm_rng *const *)&data,
                                       0, NULL, NULL),
                     TFM_ERR_ARG);
    tfm_optimizer_free(twin_opt);
    tfm_model_free(twin);
    tfm_optimizer_free(other_opt);
    tfm_model_free(other);
    tfm_rng_free(data);
    tfm_optimizer_free(opt);
    tfm_model_free(m);
    remove_folder();
}
END_TEST

START_TEST(rng_copy_continues_the_stream)
{
    tfm_rng *a = tfm_rng_create(3), *b = tfm_rng_create(4);
    tfm_rng_normal(a); /* leaves a spare normal, part of the state */
    ck_assert_int_eq(tfm_rng_copy(b, a), TFM_OK);
    ck_assert_float_eq(tfm_rng_normal(a), tfm_rng_normal(b));
    ck_assert_uint_eq(tfm_rng_next_u64(a), tfm_rng_next_u64(b));
    ck_assert_int_eq(tfm_rng_copy(NULL, a), TFM_ERR_NULL);
    tfm_rng_free(a);
    tfm_rng_free(b);
}
END_TEST

static Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *files = tcase_create("model files");
    tcase_add_test(files, a_saved_model_loads_from_the_file_alone);
    tcase_add_test(files, users_metadata_round_trips);
    tcase_add_test(files, bad_descriptions_are_refused_with_the_key_named);
    tcase_add_test(files, getters_refuse_null);
    tcase_add_test(files, special_tokens_travel_with_the_model);
    tcase_add_test(files, head_dim_travels_with_the_model);
    tcase_add_test(files, deep_models_load_in_linear_time);
    tcase_add_test(files, options_that_are_made_save_and_load_back);
    tcase_add_test(files, state_dicts_with_other_names_load_with_options);
    suite_add_tcase(s, files);
    TCase *training = tcase_create("training states");
    tcase_set_timeout(training, 120);
    tcase_add_test(training, training_resumes_bit_for_bit_in_a_fresh_process);
    tcase_add_test(training, training_load_checks_everything_first);
    tcase_add_test(training, rng_copy_continues_the_stream);
    suite_add_tcase(s, training);
    return s;
}

TFM_CHECK_MAIN(checkpoint_suite)
