/* Batches of text: fairseq's batching by size (sort by length, cut at a
 * padded token budget, shuffle the batches), and padded id tensors. */
#include <stdlib.h>

#include "autograd/tape.h"
#include "core/error.h"
#include "core/tensor.h"
#include "tfm/batch.h"

/* A uniform draw from [0, n), n >= 1, without modulo bias. */
static uint64_t draw_below(tfm_rng *rng, uint64_t n)
{
    uint64_t threshold = -n % n; /* 2^64 mod n: the draws below it are rejected */
    for (;;) {
        uint64_t x = tfm_rng_next_u64(rng);
        if (x >= threshold)
            return x % n;
    }
}

/* Fisher-Yates, drawn from rng. */
static void shuffle(int64_t *values, int64_t count, tfm_rng *rng)
{
    for (int64_t i = count - 1; i > 0; i--) {
        int64_t j = (int64_t)draw_below(rng, (uint64_t)i + 1);
        int64_t swap = values[i];
        values[i] = values[j];
        values[j] = swap;
    }
}

typedef struct sort_entry {
    int64_t source, target, tie, index;
} sort_entry;

static int compare_entries(const void *pa, const void *pb)
{
    const sort_entry *a = pa, *b = pb;
    if (a->source != b->source)
        return a->source < b->source ? -1 : 1;
    if (a->target != b->target)
        return a->target < b->target ? -1 : 1;
    return (a->tie > b->tie) - (a->tie < b->tie);
}

static tfm_status check_plan(const char *op, const int64_t *source_lengths,
                             const int64_t *target_lengths, int64_t count, int64_t max_tokens,
                             int64_t max_rows, const int64_t *order, int64_t order_count,
                             const int64_t *starts, int64_t starts_count,
                             const int64_t *batch_count)
{
    if (!source_lengths || !order || !starts || !batch_count)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                         !source_lengths ? "source_lengths"
                         : !order        ? "order"
                         : !starts       ? "starts"
                                         : "batch_count");
    if (count < 0 || max_tokens < 1 || max_rows < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: count %lld, max_tokens %lld and max_rows %lld must "
                         "be >= 0, >= 1 and >= 0", op, (long long)count,
                         (long long)max_tokens, (long long)max_rows);
    if (order_count < count || starts_count <= count)
        return tfm__fail(TFM_ERR_SIZE, "%s: order holds %lld and starts %lld; %lld examples "
                         "need %lld and %lld", op, (long long)order_count,
                         (long long)starts_count, (long long)count, (long long)count,
                         (long long)count + 1);
    for (int64_t i = 0; i < count; i++)
        if (source_lengths[i] < 1 || (target_lengths && target_lengths[i] < 1))
            return tfm__fail(TFM_ERR_ARG, "%s: example %lld is empty (source length %lld, "
                             "target length %lld); leave it out of the corpus", op,
                             (long long)i, (long long)source_lengths[i],
                             (long long)(target_lengths ? target_lengths[i] : 1));
    return TFM_OK;
}

tfm_status tfm_batch_plan(const int64_t *source_lengths, const int64_t *target_lengths,
                          int64_t count, int64_t max_tokens, int64_t max_rows, tfm_rng *rng,
                          int64_t *order, int64_t order_count, int64_t *starts,
                          int64_t starts_count, int64_t *batch_count)
{
    const char *op = "tfm_batch_plan";
    tfm_status status = check_plan(op, source_lengths, target_lengths, count, max_tokens,
                                   max_rows, order, order_count, starts, starts_count,
                                   batch_count);
    if (status)
        return status;
    sort_entry *entries = malloc((size_t)(count ? count : 1) * sizeof *entries);
    /* the batches' first positions in sorted order, then the batches' order */
    int64_t *cuts = malloc((size_t)(count + 1) * sizeof *cuts);
    int64_t *batch_order = malloc((size_t)(count ? count : 1) * sizeof *batch_order);
    if (!entries || !cuts || !batch_order) {
        free(entries);
        free(cuts);
        free(batch_order);
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld examples", op,
                         (long long)count);
    }
    /* batch_order holds the ties' ranks first */
    for (int64_t i = 0; i < count; i++)
        batch_order[i] = i;
    if (rng)
        shuffle(batch_order, count, rng);
    for (int64_t i = 0; i < count; i++) {
        int64_t target = target_lengths ? target_lengths[i] : 0;
        entries[i] = (sort_entry){source_lengths[i], target, batch_order[i], i};
    }
    qsort(entries, (size_t)count, sizeof *entries, compare_entries);

    int64_t batches = 0, rows = 0, heaviest = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t weight = entries[i].source > entries[i].target ? entries[i].source
                                                               : entries[i].target;
        int64_t next = weight > heaviest ? weight : heaviest;
        /* next * (rows + 1) > max_tokens, without overflow */
        if (rows > 0 && (next > max_tokens / (rows + 1) || (max_rows && rows == max_rows))) {
            rows = 0;
            next = weight;
        }
        if (rows == 0)
            cuts[batches++] = i;
        rows++;
        heaviest = next;
    }
    cuts[batches] = count;

    for (int64_t b = 0; b < batches; b++)
        batch_order[b] = b;
    if (rng)
        shuffle(batch_order, batches, rng);
    int64_t written = 0;
    for (int64_t b = 0; b < batches; b++) {
        starts[b] = written;
        for (int64_t i = cuts[batch_order[b]]; i < cuts[batch_order[b] + 1]; i++)
            order[written++] = entries[i].index;
    }
    starts[batches] = written;
    *batch_count = batches;
    free(entries);
    free(cuts);
    free(batch_order);
    return TFM_OK;
}

/* The examples' length, after checking the corpus arrays where the batch
 * reads them; -1 with the error set. */
static int64_t longest_example(const char *op, const int32_t *ids, int64_t ids_count,
                               const int64_t *offsets, int64_t examples,
                               const int64_t *indices, int64_t rows)
{
    if (!ids || !offsets || !indices) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                  !ids ? "ids" : !offsets ? "offsets" : "indices");
        return -1;
    }
    if (rows < 1 || examples < 0 || ids_count < 0) {
        tfm__fail(TFM_ERR_ARG, "%s: rows %lld must be >= 1, examples %lld and ids_count %lld "
                  ">= 0", op, (long long)rows, (long long)examples, (long long)ids_count);
        return -1;
    }
    int64_t longest = 0;
    for (int64_t b = 0; b < rows; b++) {
        int64_t e = indices[b];
        if (e < 0 || e >= examples) {
            tfm__fail(TFM_ERR_RANGE, "%s: indices[%lld] = %lld is not an example (0..%lld)",
                      op, (long long)b, (long long)e, (long long)examples - 1);
            return -1;
        }
        if (offsets[e] < 0 || offsets[e] > offsets[e + 1] || offsets[e + 1] > ids_count) {
            tfm__fail(TFM_ERR_RANGE, "%s: example %lld spans offsets %lld..%lld, outside ids "
                      "(%lld)", op, (long long)e, (long long)offsets[e],
                      (long long)offsets[e + 1], (long long)ids_count);
            return -1;
        }
        if (offsets[e + 1] - offsets[e] > longest)
            longest = offsets[e + 1] - offsets[e];
    }
    return longest;
}

/* Row b of a [rows, width] tensor: first (unless < 0), the example's ids,
 * last (unless < 0), then pad_id. */
static void fill_rows(int32_t *out, int64_t width, const int32_t *ids, const int64_t *offsets,
                      const int64_t *indices, int64_t rows, int32_t first, int32_t last,
                      int32_t pad_id)
{
    for (int64_t b = 0; b < rows; b++) {
        int32_t *row = out + b * width;
        int64_t n = 0;
        if (first >= 0)
            row[n++] = first;
        for (int64_t i = offsets[indices[b]]; i < offsets[indices[b] + 1]; i++)
            row[n++] = ids[i];
        if (last >= 0)
            row[n++] = last;
        while (n < width)
            row[n++] = pad_id;
    }
}

tfm_tensor *tfm_batch_pad(tfm_tape *tape, const int32_t *ids, int64_t ids_count,
                          const int64_t *offsets, int64_t examples, const int64_t *indices,
                          int64_t rows, int32_t pad_id)
{
    const char *op = "tfm_batch_pad";
    if (tfm__check_pad_id(op, pad_id))
        return NULL;
    int64_t width = longest_example(op, ids, ids_count, offsets, examples, indices, rows);
    if (width < 0)
        return NULL;
    if (width == 0) {
        tfm__fail(TFM_ERR_ARG, "%s: the %lld examples are all empty", op, (long long)rows);
        return NULL;
    }
    tfm_tensor *out = tfm__new_constant(tape, op, TFM_I32, 2, (const int64_t[]){rows, width});
    if (out)
        fill_rows(tfm__i32(out), width, ids, offsets, indices, rows, -1, -1, pad_id);
    return out;
}

tfm_status tfm_batch_shift_targets(tfm_tape *tape, const int32_t *ids, int64_t ids_count,
                                   const int64_t *offsets, int64_t examples,
                                   const int64_t *indices, int64_t rows, int32_t bos_id,
                                   int32_t eos_id, int32_t pad_id, tfm_tensor **decoder_input,
                                   tfm_tensor **labels)
{
    const char *op = "tfm_batch_shift_targets";
    if (!decoder_input || !labels)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                         !decoder_input ? "decoder_input" : "labels");
    int64_t longest = longest_example(op, ids, ids_count, offsets, examples, indices, rows);
    if (longest < 0)
        return tfm_last_status();
    if (bos_id < 0 || eos_id < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: bos_id %d and eos_id %d must be ids (>= 0)", op,
                         (int)bos_id, (int)eos_id);
    if (tfm__check_pad_id(op, pad_id))
        return tfm_last_status();
    const int64_t shape[2] = {rows, longest + 1};
    tfm_tensor *input = tfm__new_constant(tape, op, TFM_I32, 2, shape);
    tfm_tensor *shifted = input ? tfm__new_constant(tape, op, TFM_I32, 2, shape) : NULL;
    if (!shifted) {
        tfm_tensor_free(input); /* a no-op on the tape's */
        return tfm_last_status();
    }
    fill_rows(tfm__i32(input), longest + 1, ids, offsets, indices, rows, bos_id, -1, pad_id);
    fill_rows(tfm__i32(shifted), longest + 1, ids, offsets, indices, rows, -1, eos_id, pad_id);
    *decoder_input = input;
    *labels = shifted;
    return TFM_OK;
}
