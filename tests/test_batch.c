/* Batches of text: token-budget plans, padded ids, shifted targets, and the
 * key-padding masks made from lengths against the masks made from ids. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_main.h"
#include "tfm/tfm.h"

enum { EXAMPLES = 2000 };

/* Catalog-like lengths: mostly short, a few long, some over any budget. */
static void make_lengths(uint64_t seed, int64_t *source, int64_t *target)
{
    tfm_rng *rng = tfm_rng_create(seed);
    for (int i = 0; i < EXAMPLES; i++) {
        source[i] = 1 + (int64_t)(tfm_rng_next_u64(rng) % 30);
        target[i] = 1 + source[i] + (int64_t)(tfm_rng_next_u64(rng) % 10);
        if (i % 500 == 7)
            target[i] = 3000;
    }
    tfm_rng_free(rng);
}

typedef struct plan {
    int64_t order[EXAMPLES], starts[EXAMPLES + 1], batches;
} plan;

static void make_plan(const int64_t *source, const int64_t *target, int64_t max_tokens,
                      int64_t max_rows, tfm_rng *rng, plan *p)
{
    ck_assert_int_eq(tfm_batch_plan(source, target, EXAMPLES, max_tokens, max_rows, rng,
                                    p->order, EXAMPLES, p->starts, EXAMPLES + 1, &p->batches),
                     TFM_OK);
}

static int64_t weight(const int64_t *source, const int64_t *target, int64_t i)
{
    return source[i] > target[i] ? source[i] : target[i];
}

/* Every example once; no batch over the budget or max_rows but an
 * example alone; what is left after a batch would not have fitted in it. */
static void check_plan(const int64_t *source, const int64_t *target, int64_t max_tokens,
                       int64_t max_rows, const plan *p)
{
    static int seen[EXAMPLES];
    memset(seen, 0, sizeof seen);
    ck_assert_int_ge(p->batches, 1);
    ck_assert_int_le(p->batches, EXAMPLES);
    ck_assert_int_eq(p->starts[0], 0);
    ck_assert_int_eq(p->starts[p->batches], EXAMPLES);
    for (int64_t b = 0; b < p->batches; b++) {
        int64_t rows = p->starts[b + 1] - p->starts[b], heaviest = 0;
        ck_assert_int_ge(rows, 1);
        for (int64_t k = p->starts[b]; k < p->starts[b + 1]; k++) {
            int64_t e = p->order[k];
            ck_assert(e >= 0 && e < EXAMPLES);
            ck_assert_int_eq(seen[e]++, 0);
            if (weight(source, target, e) > heaviest)
                heaviest = weight(source, target, e);
        }
        if (heaviest > max_tokens)
            ck_assert_int_eq(rows, 1);
        else
            ck_assert_int_le(heaviest * rows, max_tokens);
        if (max_rows)
            ck_assert_int_le(rows, max_rows);
    }
}

START_TEST(every_example_once_within_the_budget)
{
    static int64_t source[EXAMPLES], target[EXAMPLES];
    static plan p;
    make_lengths(1, source, target);
    const int64_t budgets[] = {1, 40, 41, 500, 2000, 1 << 20};
    tfm_rng *rng = tfm_rng_create(7);
    for (size_t i = 0; i < sizeof budgets / sizeof *budgets; i++)
        for (int64_t max_rows = 0; max_rows <= 64; max_rows += 16) {
            make_plan(source, target, budgets[i], max_rows, rng, &p);
            check_plan(source, target, budgets[i], max_rows, &p);
            make_plan(source, NULL, budgets[i], max_rows, rng, &p);
            check_plan(source, source, budgets[i], max_rows, &p);
        }
    tfm_rng_free(rng);
}
END_TEST

/* Without an rng: sorted by source then target length, index order within
 * ties, and each batch full (the next example would not have fitted). */
START_TEST(without_rng_batches_are_sorted_and_full)
{
    static int64_t source[EXAMPLES], target[EXAMPLES];
    static plan p;
    make_lengths(2, source, target);
    const int64_t max_tokens = 600, max_rows = 32;
    make_plan(source, target, max_tokens, max_rows, NULL, &p);
    check_plan(source, target, max_tokens, max_rows, &p);
    for (int64_t k = 1; k < EXAMPLES; k++) {
        int64_t a = p.order[k - 1], b = p.order[k];
        ck_assert(source[a] < source[b] ||
                  (source[a] == source[b] &&
                   (target[a] < target[b] || (target[a] == target[b] && a < b))));
    }
    for (int64_t b = 0; b + 1 < p.batches; b++) {
        int64_t rows = p.starts[b + 1] - p.starts[b], heaviest = 0;
        for (int64_t k = p.starts[b]; k <= p.starts[b + 1]; k++)
            if (weight(source, target, p.order[k]) > heaviest)
                heaviest = weight(source, target, p.order[k]);
        ck_assert(rows == max_rows || heaviest * (rows + 1) > max_tokens);
    }
}
END_TEST

START_TEST(a_seed_gives_one_plan_and_epochs_differ)
{
    static int64_t source[EXAMPLES], target[EXAMPLES];
    static plan first, again, next;
    make_lengths(3, source, target);
    tfm_rng *rng = tfm_rng_create(11), *twin = tfm_rng_create(11);
    make_plan(source, target, 400, 0, rng, &first);
    make_plan(source, target, 400, 0, twin, &again);
    ck_assert_int_eq(first.batches, again.batches);
    ck_assert_mem_eq(first.order, again.order, sizeof first.order);
    ck_assert_mem_eq(first.starts, again.starts, sizeof first.starts);
    /* the next epoch from the same stream: another order, still a plan */
    make_plan(source, target, 400, 0, rng, &next);
    check_plan(source, target, 400, 0, &next);
    ck_assert(memcmp(first.order, next.order, sizeof first.order) != 0);
    /* and another seed another plan */
    tfm_rng_seed(twin, 12);
    make_plan(source, target, 400, 0, twin, &again);
    ck_assert(memcmp(first.order, again.order, sizeof first.order) != 0);
    tfm_rng_free(rng);
    tfm_rng_free(twin);
}
END_TEST

/* With an rng, examples of one length are not in index order within
 * their batches, and the batches not shortest first. */
START_TEST(ties_and_batches_are_shuffled)
{
    static int64_t source[EXAMPLES], target[EXAMPLES];
    static plan p;
    tfm_rng *rng = tfm_rng_create(5);
    for (int i = 0; i < EXAMPLES; i++)
        source[i] = 5;
    make_plan(source, NULL, 50, 0, rng, &p);
    int in_index_order = 1; /* within each batch */
    for (int64_t b = 0; b < p.batches; b++)
        for (int64_t k = p.starts[b] + 1; k < p.starts[b + 1]; k++)
            in_index_order &= p.order[k - 1] < p.order[k];
    ck_assert(!in_index_order);
    make_lengths(4, source, target);
    make_plan(source, target, 500, 0, rng, &p);
    int shortest_first = 1;
    for (int64_t b = 1; b < p.batches; b++)
        shortest_first &= source[p.order[p.starts[b - 1]]] <= source[p.order[p.starts[b]]];
    ck_assert(!shortest_first);
    tfm_rng_free(rng);
}
END_TEST

/* An example over the budget is alone; the batches around it are not. */
START_TEST(an_example_over_the_budget_is_alone)
{
    const int64_t source[5] = {3, 9, 3, 3, 3};
    int64_t order[5], starts[6], batches;
    ck_assert_int_eq(tfm_batch_plan(source, NULL, 5, 6, 0, NULL, order, 5, starts, 6,
                                    &batches), TFM_OK);
    ck_assert_int_eq(batches, 3);
    const int64_t expected_order[5] = {0, 2, 3, 4, 1}, expected_starts[4] = {0, 2, 4, 5};
    ck_assert_mem_eq(order, expected_order, sizeof order);
    ck_assert_mem_eq(starts, expected_starts, sizeof expected_starts);
}
END_TEST

static void check_refused(tfm_status got, tfm_status status, const char *text)
{
    ck_assert_int_eq(got, status);
    ck_assert_msg(strstr(tfm_last_error(), text) != NULL, "\"%s\" not in \"%s\"", text,
                  tfm_last_error());
    tfm_clear_error();
}

START_TEST(plan_errors)
{
    const int64_t source[3] = {2, 0, 4}, target[3] = {1, 1, 0}, good[3] = {1, 2, 3};
    int64_t order[3] = {-1, -1, -1}, starts[4] = {-1, -1, -1, -1}, batches = -1;
    check_refused(tfm_batch_plan(source, NULL, 3, 10, 0, NULL, order, 3, starts, 4, &batches),
                  TFM_ERR_ARG, "tfm_batch_plan: example 1 is empty");
    check_refused(tfm_batch_plan(good, target, 3, 10, 0, NULL, order, 3, starts, 4, &batches),
                  TFM_ERR_ARG, "example 2 is empty (source length 3, target length 0)");
    check_refused(tfm_batch_plan(good, NULL, 3, 10, 0, NULL, order, 3, starts, 3, &batches),
                  TFM_ERR_SIZE, "need 3 and 4");
    check_refused(tfm_batch_plan(good, NULL, 3, 10, 0, NULL, order, 2, starts, 4, &batches),
                  TFM_ERR_SIZE, "order holds 2");
    check_refused(tfm_batch_plan(good, NULL, 3, 0, 0, NULL, order, 3, starts, 4, &batches),
                  TFM_ERR_ARG, "max_tokens 0");
    check_refused(tfm_batch_plan(good, NULL, 3, 10, -1, NULL, order, 3, starts, 4, &batches),
                  TFM_ERR_ARG, "max_rows -1");
    check_refused(tfm_batch_plan(NULL, NULL, 3, 10, 0, NULL, order, 3, starts, 4, &batches),
                  TFM_ERR_NULL, "source_lengths is NULL");
    check_refused(tfm_batch_plan(good, NULL, 3, 10, 0, NULL, order, 3, starts, 4, NULL),
                  TFM_ERR_NULL, "batch_count is NULL");
    /* nothing written by a refused call */
    ck_assert_int_eq(order[0] & order[1] & order[2], -1);
    ck_assert_int_eq(starts[0] & starts[3], -1);
    ck_assert_int_eq(batches, -1);
    /* no examples, no batches */
    ck_assert_int_eq(tfm_batch_plan(good, NULL, 0, 10, 0, NULL, order, 0, starts, 1, &batches),
                     TFM_OK);
    ck_assert_int_eq(batches, 0);
    ck_assert_int_eq(starts[0], 0);
}
END_TEST

/* A corpus of four examples: lengths 3, 1, 0 and 2. */
static const int32_t corpus_ids[6] = {11, 12, 13, 21, 41, 42};
static const int64_t corpus_offsets[5] = {0, 3, 4, 4, 6};

START_TEST(padding_and_shifted_targets)
{
    const int64_t indices[3] = {3, 0, 1};
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *padded = tfm_batch_pad(tape, corpus_ids, 6, corpus_offsets, 4, indices, 3, 0);
    ck_assert_ptr_nonnull(padded);
    ck_assert_int_eq(tfm_tensor_dim(padded, 0), 3);
    ck_assert_int_eq(tfm_tensor_dim(padded, 1), 3);
    const int32_t expected[9] = {41, 42, 0, 11, 12, 13, 21, 0, 0};
    ck_assert_mem_eq(tfm_tensor_data_i32(padded), expected, sizeof expected);

    tfm_tensor *input = NULL, *labels = NULL;
    const int64_t with_empty[2] = {2, 1};
    ck_assert_int_eq(tfm_batch_shift_targets(tape, corpus_ids, 6, corpus_offsets, 4, indices, 3,
                                             1, 2, 0, &input, &labels), TFM_OK);
    ck_assert_int_eq(tfm_tensor_dim(input, 1), 4);
    const int32_t expected_input[12] = {1, 41, 42, 0, 1, 11, 12, 13, 1, 21, 0, 0};
    const int32_t expected_labels[12] = {41, 42, 2, 0, 11, 12, 13, 2, 21, 2, 0, 0};
    ck_assert_mem_eq(tfm_tensor_data_i32(input), expected_input, sizeof expected_input);
    ck_assert_mem_eq(tfm_tensor_data_i32(labels), expected_labels, sizeof expected_labels);
    /* an empty target still gets bos and eos */
    ck_assert_int_eq(tfm_batch_shift_targets(tape, corpus_ids, 6, corpus_offsets, 4, with_empty,
                                             2, 1, 2, 0, &input, &labels), TFM_OK);
    const int32_t empty_input[4] = {1, 0, 1, 21}, empty_labels[4] = {2, 0, 21, 2};
    ck_assert_mem_eq(tfm_tensor_data_i32(input), empty_input, sizeof empty_input);
    ck_assert_mem_eq(tfm_tensor_data_i32(labels), empty_labels, sizeof empty_labels);
    tfm_tape_free(tape);

    /* without a tape the tensors are the caller's */
    padded = tfm_batch_pad(NULL, corpus_ids, 6, corpus_offsets, 4, indices, 1, 0);
    ck_assert_ptr_nonnull(padded);
    ck_assert_int_eq(tfm_tensor_numel(padded), 2);
    tfm_tensor_free(padded);
    ck_assert_int_eq(tfm_batch_shift_targets(NULL, corpus_ids, 6, corpus_offsets, 4, indices, 3,
                                             1, 2, 0, &input, &labels), TFM_OK);
    ck_assert_mem_eq(tfm_tensor_data_i32(labels), expected_labels, sizeof expected_labels);
    tfm_tensor_free(input);
    tfm_tensor_free(labels);
}
END_TEST

START_TEST(padding_errors)
{
    const int64_t outside[2] = {0, 4}, negative[1] = {-1}, empty[1] = {2};
    const int64_t bad_offsets[5] = {0, 3, 4, 4, 7};
    tfm_tensor *input = NULL, *labels = NULL;
    ck_assert_ptr_null(tfm_batch_pad(NULL, corpus_ids, 6, corpus_offsets, 4, outside, 2, 0));
    check_refused(tfm_last_status(), TFM_ERR_RANGE,
                  "tfm_batch_pad: indices[1] = 4 is not an example (0..3)");
    ck_assert_ptr_null(tfm_batch_pad(NULL, corpus_ids, 6, corpus_offsets, 4, negative, 1, 0));
    check_refused(tfm_last_status(), TFM_ERR_RANGE, "indices[0] = -1");
    const int64_t last[1] = {3};
    ck_assert_ptr_null(tfm_batch_pad(NULL, corpus_ids, 6, bad_offsets, 4, last, 1, 0));
    check_refused(tfm_last_status(), TFM_ERR_RANGE, "example 3 spans offsets 4..7, outside ids");
    ck_assert_ptr_null(tfm_batch_pad(NULL, corpus_ids, 6, corpus_offsets, 4, empty, 1, 0));
    check_refused(tfm_last_status(), TFM_ERR_ARG, "all empty");
    ck_assert_ptr_null(tfm_batch_pad(NULL, corpus_ids, 6, corpus_offsets, 4, empty, 0, 0));
    check_refused(tfm_last_status(), TFM_ERR_ARG, "rows 0");
    check_refused(tfm_batch_shift_targets(NULL, corpus_ids, 6, corpus_offsets, 4, outside, 2, 1,
                                          2, 0, &input, &labels),
                  TFM_ERR_RANGE, "tfm_batch_shift_targets: indices[1]");
    check_refused(tfm_batch_shift_targets(NULL, corpus_ids, 6, corpus_offsets, 4, empty, 1, -1,
                                          2, 0, &input, &labels),
                  TFM_ERR_ARG, "bos_id -1");
    check_refused(tfm_batch_shift_targets(NULL, corpus_ids, 6, corpus_offsets, 4, empty, 1, 1,
                                          2, 0, &input, NULL),
                  TFM_ERR_NULL, "labels is NULL");
    ck_assert_ptr_null(input);
    ck_assert_ptr_null(labels);
}
END_TEST

/* A tokenizer made without its padding piece gives -1 as its pad id: the
 * batch refuses it, where the embedding would fail far from the cause. */
START_TEST(a_missing_pad_id_is_refused)
{
    const int64_t indices[2] = {0, 1};
    tfm_tensor *input = NULL, *labels = NULL;
    ck_assert_ptr_null(tfm_batch_pad(NULL, corpus_ids, 6, corpus_offsets, 4, indices, 2, -1));
    check_refused(tfm_last_status(), TFM_ERR_ARG, "tfm_batch_pad: pad_id -1 is not an id");
    check_refused(tfm_batch_shift_targets(NULL, corpus_ids, 6, corpus_offsets, 4, indices, 2, 1,
                                          2, -1, &input, &labels),
                  TFM_ERR_ARG, "tfm_batch_shift_targets: pad_id -1 is not an id");
    ck_assert_ptr_null(input);
    ck_assert_ptr_null(labels);
}
END_TEST

/* The mask from lengths holds the values the mask from padded ids holds
 * (there [B, 1, 1, S]) and PyTorch's key_padding_mask converted, in both forms. */
START_TEST(masks_from_lengths_equal_the_masks_from_ids)
{
    const int64_t indices[4] = {0, 1, 3, 0}, lengths[4] = {3, 1, 2, 3};
    const uint8_t torch_mask[12] = {0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0};
    tfm_tape *tape = tfm_tape_create();
    /* pad id 99 is in no example */
    tfm_tensor *ids = tfm_batch_pad(tape, corpus_ids, 6, corpus_offsets, 4, indices, 4, 99);
    const tfm_dtype forms[2] = {TFM_I32, TFM_F32};
    for (int f = 0; f < 2; f++) {
        tfm_tensor *from_lengths = tfm_mask_from_lengths(tape, lengths, 4, 3, forms[f]);
        tfm_tensor *from_ids = tfm_mask_padding(tape, ids, 99, forms[f]);
        tfm_tensor *from_torch = tfm_mask_from_torch_bool(tape, torch_mask, 2,
                                                          (const int64_t[]){4, 3}, forms[f]);
        ck_assert_ptr_nonnull(from_lengths);
        ck_assert_int_eq(tfm_tensor_ndim(from_lengths), 2);
        ck_assert_int_eq(tfm_tensor_dim(from_lengths, 0), 4);
        ck_assert_int_eq(tfm_tensor_dim(from_lengths, 1), 3);
        ck_assert_int_eq(tfm_tensor_dtype(from_lengths), forms[f]);
        size_t bytes = 12 * sizeof(int32_t);
        void *values = forms[f] == TFM_I32 ? (void *)tfm_tensor_data_i32(from_lengths)
                                           : (void *)tfm_tensor_data_f32(from_lengths);
        void *id_values = forms[f] == TFM_I32 ? (void *)tfm_tensor_data_i32(from_ids)
                                              : (void *)tfm_tensor_data_f32(from_ids);
        void *torch_values = forms[f] == TFM_I32 ? (void *)tfm_tensor_data_i32(from_torch)
                                                 : (void *)tfm_tensor_data_f32(from_torch);
        ck_assert_mem_eq(values, id_values, bytes);
        ck_assert_mem_eq(values, torch_values, bytes);
    }
    /* caller-owned without a tape */
    tfm_tensor *owned = tfm_mask_from_lengths(NULL, lengths, 4, 5, TFM_I32);
    ck_assert_int_eq(tfm_tensor_data_i32(owned)[4], 0);
    ck_assert_int_eq(tfm_tensor_data_i32(owned)[5], 1);
    tfm_tensor_free(owned);
    /* errors */
    ck_assert_ptr_null(tfm_mask_from_lengths(tape, lengths, 4, 2, TFM_I32));
    check_refused(tfm_last_status(), TFM_ERR_RANGE,
                  "tfm_mask_from_lengths: lengths[0] = 3 is outside 0..width 2");
    ck_assert_ptr_null(tfm_mask_from_lengths(tape, NULL, 4, 3, TFM_I32));
    check_refused(tfm_last_status(), TFM_ERR_NULL, "lengths is NULL");
    ck_assert_ptr_null(tfm_mask_from_lengths(tape, lengths, 4, 3, (tfm_dtype)7));
    check_refused(tfm_last_status(), TFM_ERR_ARG, "form 7");
    tfm_tape_free(tape);
}
END_TEST

static Suite *batch_suite(void)
{
    Suite *suite = suite_create("batch");
    TCase *plans = tcase_create("plan");
    tcase_add_test(plans, every_example_once_within_the_budget);
    tcase_add_test(plans, without_rng_batches_are_sorted_and_full);
    tcase_add_test(plans, a_seed_gives_one_plan_and_epochs_differ);
    tcase_add_test(plans, ties_and_batches_are_shuffled);
    tcase_add_test(plans, an_example_over_the_budget_is_alone);
    tcase_add_test(plans, plan_errors);
    suite_add_tcase(suite, plans);
    TCase *tensors = tcase_create("tensors");
    tcase_add_test(tensors, padding_and_shifted_targets);
    tcase_add_test(tensors, padding_errors);
    tcase_add_test(tensors, a_missing_pad_id_is_refused);
    tcase_add_test(tensors, masks_from_lengths_equal_the_masks_from_ids);
    suite_add_tcase(suite, tensors);
    return suite;
}

TFM_CHECK_MAIN(batch_suite)
