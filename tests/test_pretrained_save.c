/* tfm_model_save_pretrained on every published fixture folder (tests/marian,
 * bart, mbart, m2m100, m2m100/nllb, t5, t5/narrow, t5/original): loading
 * what it saved gives the same model bit for bit (parameters, options,
 * tokenizer ids, decoding defaults), single-file or sharded, over a new or
 * an existing folder; its tensors are the fixture's published names and
 * its config.json the fixture's; models it cannot write are refused. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tfm/tfm.h>

#include "check_main.h"

static const char *const fixtures[] = {"marian", "bart", "mbart", "m2m100", "m2m100/nllb",
                                       "t5", "t5/narrow", "t5/original"};
enum { FIXTURES = sizeof fixtures / sizeof fixtures[0] };
static const char *const texts[] = {"Cannot open the file %s", "Hello, world!",
                                    "Les données sont prêtes."};

static char root[64], saved[128];

static void setup(void)
{
    snprintf(root, sizeof root, "/tmp/tfm_save_pretrained_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(saved, sizeof saved, "%s/saved", root);
}

static void teardown(void)
{
    char command[256];
    snprintf(command, sizeof command, "rm -rf '%s'", root);
    ck_assert_int_eq(system(command), 0);
}

static const char *fixture_path(const char *fixture, const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s%s%s", TFM_TESTS_DIR, fixture, name ? "/" : "",
             name ? name : "");
    return path;
}

static const char *saved_path(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", saved, name);
    return path;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static char *read_all(const char *path, long *size)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *bytes = malloc((size_t)*size + 1);
    ck_assert_ptr_nonnull(bytes);
    ck_assert_int_eq(fread(bytes, 1, (size_t)*size, f), (size_t)*size);
    fclose(f);
    return bytes;
}

static void same_file(const char *a, const char *b)
{
    long na, nb;
    char *x = read_all(a, &na), *y = read_all(b, &nb);
    ck_assert_msg(na == nb && memcmp(x, y, (size_t)na) == 0, "%s differs from %s", b, a);
    free(x);
    free(y);
}

/* Parameters, options, tokenizer ids and decoding defaults, bit for bit. */
static void same_model(const char *what, tfm_model *a, tfm_model *b)
{
    tfm_params *pa = tfm_model_params(a), *pb = tfm_model_params(b);
    ck_assert_int_eq(tfm_params_count(pa), tfm_params_count(pb));
    for (int64_t i = 0; i < tfm_params_count(pa); i++) {
        const char *name = tfm_params_name(pa, i);
        tfm_tensor *x = tfm_params_at(pa, i), *y = tfm_params_find(pb, name);
        ck_assert_msg(y != NULL, "%s: %s is missing", what, name);
        ck_assert_int_eq(tfm_tensor_numel(x), tfm_tensor_numel(y));
        ck_assert_msg(memcmp(tfm_tensor_data_f32(x), tfm_tensor_data_f32(y),
                             (size_t)tfm_tensor_numel(x) * sizeof(float)) == 0,
                      "%s: %s differs", what, name);
    }
    for (int32_t i = 0; i < tfm_model_option_count(); i++) {
        const char *name;
        char va[96], vb[96];
        ck_assert_int_eq(tfm_model_option(a, i, &name, va, sizeof va), TFM_OK);
        ck_assert_int_eq(tfm_model_option(b, i, &name, vb, sizeof vb), TFM_OK);
        ck_assert_msg(strcmp(va, vb) == 0, "%s: option %s %s, then %s", what, name, va, vb);
    }
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        int32_t ia[64], ib[64];
        int64_t na = 0, nb = 0;
        ck_assert_int_eq(tfm_model_encode_text(a, texts[t], (int64_t)strlen(texts[t]), ia, 64, &na), TFM_OK);
        ck_assert_int_eq(tfm_model_encode_text(b, texts[t], (int64_t)strlen(texts[t]), ib, 64, &nb), TFM_OK);
        ck_assert_int_eq(na, nb);
        ck_assert_msg(memcmp(ia, ib, (size_t)na * sizeof *ia) == 0, "%s: ids of %s", what,
                      texts[t]);
    }
    tfm_decode_options da, db;
    tfm_decode_options_init(&da);
    tfm_decode_options_init(&db);
    ck_assert_int_eq(tfm_decode_options_from_model(a, &da), TFM_OK);
    ck_assert_int_eq(tfm_decode_options_from_model(b, &db), TFM_OK);
    ck_assert_int_eq(da.beam_size, db.beam_size);
    ck_assert_int_eq(da.max_length, db.max_length);
    ck_assert_int_eq(da.eos_id, db.eos_id);
    ck_assert_int_eq(da.strategy, db.strategy);
    ck_assert(da.length_penalty == db.length_penalty);
}

/* Every tensor written is one the fixture's file holds under that name. */
static void published_names(const char *fixture, const char *file)
{
    tfm_safetensors *theirs = tfm_safetensors_open(fixture_path(fixture, "model.safetensors"));
    tfm_safetensors *ours = tfm_safetensors_open(saved_path(file));
    ck_assert_ptr_nonnull(theirs);
    ck_assert_ptr_nonnull(ours);
    for (int64_t i = 0; i < tfm_safetensors_count(ours); i++) {
        const char *name = tfm_safetensors_name(ours, i);
        int found = 0;
        for (int64_t k = 0; k < tfm_safetensors_count(theirs) && !found; k++)
            found = strcmp(name, tfm_safetensors_name(theirs, k)) == 0;
        ck_assert_msg(found, "%s: %s is not a published name", fixture, name);
    }
    tfm_safetensors_close(theirs);
    tfm_safetensors_close(ours);
}

START_TEST(round_trip)
{
    const char *fixture = fixtures[_i];
    tfm_model *original = tfm_model_from_pretrained(fixture_path(fixture, NULL));
    ck_assert_msg(original != NULL, "%s: %s", fixture, tfm_last_error());
    ck_assert_msg(tfm_model_save_pretrained(original, saved, 0) == TFM_OK, "%s: %s", fixture,
                  tfm_last_error());
    same_file(fixture_path(fixture, "config.json"), saved_path("config.json"));
    published_names(fixture, "model.safetensors");
    ck_assert(!exists(saved_path("model.safetensors.index.json")));
    tfm_model *again = tfm_model_from_pretrained(saved);
    ck_assert_msg(again != NULL, "%s: %s", fixture, tfm_last_error());
    same_model(fixture, original, again);

    /* over the same folder in shards (each at most half the tensors), then
     * in one file again */
    long size;
    free(read_all(saved_path("model.safetensors"), &size));
    ck_assert_int_eq(tfm_model_save_pretrained(again, saved, size / 2), TFM_OK);
    ck_assert(!exists(saved_path("model.safetensors")));
    ck_assert(exists(saved_path("model.safetensors.index.json")));
    char first[64];
    int shards = 0;
    for (int n = 2; n < 10 && !shards; n++) {
        snprintf(first, sizeof first, "model-00001-of-%05d.safetensors", n);
        shards = exists(saved_path(first)) ? n : 0;
    }
    ck_assert_msg(shards >= 2, "%s: no shards", fixture);
    published_names(fixture, first);
    tfm_model *sharded = tfm_model_from_pretrained(saved);
    ck_assert_msg(sharded != NULL, "%s sharded: %s", fixture, tfm_last_error());
    same_model(fixture, original, sharded);
    ck_assert_int_eq(tfm_model_save_pretrained(sharded, saved, 0), TFM_OK);
    ck_assert(!exists(saved_path("model.safetensors.index.json")));
    ck_assert(!exists(saved_path(first)));
    tfm_model *single = tfm_model_from_pretrained(saved);
    ck_assert_ptr_nonnull(single);
    same_model(fixture, original, single);
    tfm_model_free(original);
    tfm_model_free(again);
    tfm_model_free(sharded);
    tfm_model_free(single);
}
END_TEST

/* A trained parameter is what the saved folder holds. */
START_TEST(trained_values_saved)
{
    tfm_model *m = tfm_model_from_pretrained(fixture_path("marian", NULL));
    ck_assert_ptr_nonnull(m);
    tfm_tensor *w = tfm_params_find(tfm_model_params(m), "encoder.layers.0.linear1.weight");
    ck_assert_ptr_nonnull(w);
    tfm_tensor_data_f32(w)[3] = 0.125f;
    ck_assert_int_eq(tfm_model_save_pretrained(m, saved, 0), TFM_OK);
    tfm_model *again = tfm_model_from_pretrained(saved);
    ck_assert_msg(again != NULL, "%s", tfm_last_error());
    ck_assert(tfm_tensor_data_f32(tfm_params_find(tfm_model_params(again),
                                                  "encoder.layers.0.linear1.weight"))[3] == 0.125f);
    tfm_model_free(m);
    tfm_model_free(again);
}
END_TEST

/* A path with a trailing slash, as a shell completes it, names the
 * folder: a new one is made, an existing one saved over. */
START_TEST(trailing_slash)
{
    tfm_model *m = tfm_model_from_pretrained(fixture_path("marian", NULL));
    ck_assert_ptr_nonnull(m);
    char slashed[160];
    snprintf(slashed, sizeof slashed, "%s//", saved);
    for (int again = 0; again < 2; again++) {
        ck_assert_msg(tfm_model_save_pretrained(m, slashed, 0) == TFM_OK, "%s",
                      tfm_last_error());
        tfm_model *loaded = tfm_model_from_pretrained(saved);
        ck_assert_msg(loaded != NULL, "%s", tfm_last_error());
        tfm_model_free(loaded);
    }
    tfm_model_free(m);
}
END_TEST

START_TEST(refused)
{
    tfm_model *m = tfm_model_from_pretrained(fixture_path("marian", NULL));
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(tfm_model_save_pretrained(NULL, saved, 0), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_model_save_pretrained(m, NULL, 0), TFM_ERR_NULL);
    ck_assert_int_eq(tfm_model_save_pretrained(m, saved, -1), TFM_ERR_ARG);
    ck_assert_int_eq(tfm_model_save_pretrained(m, "", 0), TFM_ERR_ARG);
    ck_assert(!exists(saved));

    /* a file in the way stays as it was */
    FILE *f = fopen(saved, "w");
    fputs("keep", f);
    fclose(f);
    ck_assert_int_eq(tfm_model_save_pretrained(m, saved, 0), TFM_ERR_IO);
    long size;
    char *text = read_all(saved, &size);
    ck_assert(size == 4 && memcmp(text, "keep", 4) == 0);
    free(text);
    unlink(saved);
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no/such/folder", root);
    ck_assert_int_eq(tfm_model_save_pretrained(m, missing, 0), TFM_ERR_IO);

    /* no family: libtfm's own model */
    tfm_model_options o;
    tfm_model_options_init(&o);
    o.src_vocab = o.tgt_vocab = 11;
    o.d_model = 8;
    o.heads = 2;
    o.d_ff = 16;
    o.encoder_layers = o.decoder_layers = 1;
    o.max_src_len = o.max_tgt_len = 16;
    tfm_model *own = tfm_model_create(&o);
    ck_assert_msg(own != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_model_save_pretrained(own, saved, 0), TFM_ERR_STATE);
    ck_assert(strstr(tfm_last_error(), "tfm_model_save") != NULL);
    tfm_model_free(own);

    /* tokenizers replaced since loading */
    tfm_model *other = tfm_model_from_pretrained(fixture_path("marian", NULL));
    ck_assert_int_eq(tfm_model_set_tokenizers(other, tfm_model_tokenizer(m, 1),
                                              tfm_model_tokenizer(m, 0)),
                     TFM_OK);
    ck_assert_int_eq(tfm_model_save_pretrained(other, saved, 0), TFM_ERR_STATE);
    tfm_model_free(other);

    /* an adapter in use: its terms are in no weight the folder holds */
    ck_assert_int_eq(tfm_model_add_adapter(m, "a", NULL), TFM_OK);
    ck_assert_int_eq(tfm_model_use_adapter(m, "a"), TFM_OK);
    ck_assert_int_eq(tfm_model_save_pretrained(m, saved, 0), TFM_ERR_STATE);
    ck_assert(strstr(tfm_last_error(), "adapter \"a\"") != NULL);
    ck_assert(!exists(saved));
    ck_assert_int_eq(tfm_model_use_adapter(m, NULL), TFM_OK);
    ck_assert_int_eq(tfm_model_save_pretrained(m, saved, 0), TFM_OK);
    char command[256];
    snprintf(command, sizeof command, "rm -rf '%s'", saved);
    ck_assert_int_eq(system(command), 0);
    ck_assert_int_eq(tfm_model_remove_adapter(m, "a"), TFM_OK);

    /* int8 */
    ck_assert_int_eq(tfm_model_quantize(m, TFM_QUANTIZE_LAYERS), TFM_OK);
    ck_assert_int_eq(tfm_model_save_pretrained(m, saved, 0), TFM_ERR_STATE);
    ck_assert(strstr(tfm_last_error(), "int8") != NULL);
    ck_assert(!exists(saved));
    tfm_model_free(m);

    /* M2M100's lm_head has no bias to hold a trained one */
    tfm_model *m2m = tfm_model_from_pretrained(fixture_path("m2m100", NULL));
    ck_assert_ptr_nonnull(m2m);
    tfm_tensor_data_f32(tfm_params_find(tfm_model_params(m2m), "generator.bias"))[0] = 1.0f;
    ck_assert_int_eq(tfm_model_save_pretrained(m2m, saved, 0), TFM_ERR_STATE);
    ck_assert(strstr(tfm_last_error(), "generator.bias") != NULL);
    ck_assert(!exists(saved));
    tfm_model_free(m2m);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pretrained_save");
    TCase *tc = tcase_create("save");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, round_trip, 0, FIXTURES);
    tcase_add_test(tc, trained_values_saved);
    tcase_add_test(tc, trailing_slash);
    tcase_add_test(tc, refused);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(suite)
