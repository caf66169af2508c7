/* The published families against their twins: each fixture folder
 * (tests/marian, bart, mbart, m2m100, m2m100/nllb, t5, t5/original: a small random model in
 * the published layout, made by wt-ptw's script from transformers'
 * modeling files) loads with tfm_model_from_pretrained, and its logits for
 * every case of expected.json (input_ids, decoder_input_ids) match
 * expected.safetensors' logits.N within 1e-5 of (1 + |logit|), T5 v1.1's
 * (tests/t5) and the original T5's (tests/t5/original) too. Reads expected.json with the
 * library's own JSON reader (internal: this suite links the objects). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "nn/relative_bias.h"
#include "tfm/tfm.h"

#define FIXTURES TFM_TESTS_DIR

static const char *const families[] = {"marian", "bart",        "mbart",
                                       "m2m100", "m2m100/nllb", "t5",
                                       "t5/original"};
enum { FAMILIES = sizeof families / sizeof families[0], T5_V1_1 = 5 };

/* How far a logit may be from the twin's, of (1 + |logit|): 1e-5, but for
 * tests/t5, whose float32 rounding alone moves the twin's own logits up
 * to 1.4e-5 from the same model computed in float64 (and libtfm's up to
 * 1.9e-5): within that noise, nothing tighter can be asked. */
static double tolerance(int family)
{
    return family == T5_V1_1 ? 2e-5 : 1e-5;
}

/* The member key of an object node, or NULL. */
static const tfm__json_node *member(const tfm__json *doc, const tfm__json_node *object,
                                    const char *key)
{
    for (uint32_t i = (uint32_t)(object - doc->nodes) + 1; i < object->next;
         i = doc->nodes[i].next)
        if (strcmp(tfm__json_key(doc, &doc->nodes[i]), key) == 0)
            return &doc->nodes[i];
    return NULL;
}

/* An array of ids as an int32 [1, n] tensor. */
static tfm_tensor *ids_of(const tfm__json *doc, const tfm__json_node *array)
{
    ck_assert_ptr_nonnull(array);
    int32_t *ids = malloc((size_t)array->count * sizeof *ids);
    int64_t n = 0;
    for (uint32_t i = (uint32_t)(array - doc->nodes) + 1; i < array->next;
         i = doc->nodes[i].next)
        ids[n++] = (int32_t)doc->nodes[i].integer;
    tfm_tensor *t = tfm_tensor_from_i32(2, (const int64_t[]){1, n}, ids);
    free(ids);
    return t;
}

START_TEST(logits_match_the_twins)
{
    char folder[512], path[600];
    snprintf(folder, sizeof folder, "%s/%s", FIXTURES, families[_i]);
    tfm_model *m = tfm_model_from_pretrained(folder);
    ck_assert_msg(m != NULL, "%s", tfm_last_error());
    snprintf(path, sizeof path, "%s/expected.json", folder);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    rewind(f);
    char *text = malloc((size_t)size + 1);
    ck_assert_uint_eq(fread(text, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    tfm__json doc;
    ck_assert_int_eq(tfm__json_parse("expected.json", text, (size_t)size, size / 2 + 1, &doc),
                     TFM_OK);
    snprintf(path, sizeof path, "%s/expected.safetensors", folder);
    tfm_safetensors *expected = tfm_safetensors_open(path);
    ck_assert_ptr_nonnull(expected);
    const tfm__json_node *cases = member(&doc, &doc.nodes[0], "cases");
    ck_assert_ptr_nonnull(cases);
    ck_assert_int_gt(cases->count, 0);
    double worst = 0.0;
    int index = 0;
    for (uint32_t i = (uint32_t)(cases - doc.nodes) + 1; i < cases->next;
         i = doc.nodes[i].next, index++) {
        tfm_tensor *src = ids_of(&doc, member(&doc, &doc.nodes[i], "input_ids"));
        tfm_tensor *tgt = ids_of(&doc, member(&doc, &doc.nodes[i], "decoder_input_ids"));
        int64_t T = tfm_tensor_dim(tgt, 1), V = tfm_model_tgt_vocab(m);
        tfm_tape *tape = tfm_tape_create();
        tfm_tensor *logits = tfm_model_forward(tape, m, src, tgt, NULL,
                                               tfm_mask_causal(tape, T, TFM_I32), NULL, NULL,
                                               NULL, NULL);
        ck_assert_msg(logits != NULL, "%s", tfm_last_error());
        char name[32];
        snprintf(name, sizeof name, "logits.%d", index);
        tfm_tensor *want = tfm_safetensors_get(expected, name);
        ck_assert_msg(want != NULL, "%s", tfm_last_error());
        ck_assert_int_eq(tfm_tensor_numel(want), T * V);
        const float *a = tfm_tensor_data_f32(logits), *b = tfm_tensor_data_f32(want);
        for (int64_t k = 0; k < T * V; k++) {
            double off = fabs((double)a[k] - b[k]) / (1.0 + fabs((double)b[k]));
            worst = off > worst ? off : worst;
        }
        tfm_tensor_free(want);
        tfm_tape_free(tape);
        tfm_tensor_free(src);
        tfm_tensor_free(tgt);
    }
    ck_assert_msg(worst <= tolerance(_i), "%s: a logit differs by %g of (1 + |logit|)",
                  families[_i], worst);
    tfm_safetensors_close(expected);
    tfm__json_free(&doc);
    free(text);
    tfm_model_free(m);
}
END_TEST

/* T5's relative-position buckets for distances -20..20 and around the
 * logarithmic ones' edges, as the twin's relative_position_bucket (from
 * modeling_t5.py) gives them: T5's 32 buckets up to 128, and the original
 * fixture's 10 up to 12, both ways. */
START_TEST(relative_buckets_match_the_twin)
{
    static const int32_t near[4][41] = {
        {10, 10, 10, 10, 10, 9,  9,  9,  9,  8,  8,  8,  8,  7,  6,  5,  4,  3,  2,  1, 0,
         17, 18, 19, 20, 21, 22, 23, 24, 24, 24, 24, 25, 25, 25, 25, 26, 26, 26, 26, 26},
        {17, 17, 16, 16, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0,
         0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0, 0, 0, 0, 0},
        {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 3, 3, 3, 2, 2, 1, 0,
         6, 7, 7, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9},
        {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 8, 8, 7, 6, 6, 5, 4, 3, 2, 1, 0,
         0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
    static const struct {
        int bidirectional;
        int32_t buckets, max_distance;
    } kinds[4] = {{1, 32, 128}, {0, 32, 128}, {1, 10, 12}, {0, 10, 12}};
    for (int k = 0; k < 4; k++)
        for (int r = -20; r <= 20; r++)
            ck_assert_msg(tfm__relative_bucket(r, kinds[k].bidirectional, kinds[k].buckets,
                                               kinds[k].max_distance) == near[k][r + 20],
                          "kind %d, distance %d", k, r);
    static const int64_t far[16] = {-200, -129, -128, -127, -64, -33, -32, -31,
                                    31,   32,   33,   64,   127, 128, 129, 200};
    static const int32_t both[16] = {15, 15, 15, 15, 14, 12, 12, 11,
                                     27, 28, 28, 30, 31, 31, 31, 31};
    static const int32_t past[16] = {31, 31, 31, 31, 26, 21, 21, 21, 0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < 16; i++) {
        ck_assert_int_eq(tfm__relative_bucket(far[i], 1, 32, 128), both[i]);
        ck_assert_int_eq(tfm__relative_bucket(far[i], 0, 32, 128), past[i]);
    }
}
END_TEST

static Suite *pretrained_suite(void)
{
    Suite *s = suite_create("pretrained");
    TCase *tc = tcase_create("twins");
    tcase_add_loop_test(tc, logits_match_the_twins, 0, FAMILIES);
    tcase_add_test(tc, relative_buckets_match_the_twin);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(pretrained_suite)
