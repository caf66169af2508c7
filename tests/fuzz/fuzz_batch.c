/* tfm_batch_plan, tfm_batch_pad and tfm_batch_shift_targets on a corpus
 * the input gives: a count of examples (0 to 40), each example's source
 * and target lengths (0 to 255, a 255 made huge), max_tokens and max_rows
 * (2 bytes each), an rng seed (or none), array sizes short of what is
 * needed now and then, then a batch's indices (some outside the corpus),
 * pad, bos and eos ids; the corpus' ids are the input's bytes again. A
 * plan lists every example once in batches within max_rows and, unless
 * one example alone, within max_tokens; a padded batch holds its
 * examples' ids then pad_id, the shifted pair bos_id ids and ids eos_id. */
#include <string.h>

#include "fuzz.h"

enum { MAX_EXAMPLES = 40 };

static void check_plan(const int64_t *src, const int64_t *tgt, int64_t count, int64_t max_tokens,
                       int64_t max_rows, const int64_t *order, const int64_t *starts,
                       int64_t batches)
{
    int seen[MAX_EXAMPLES] = {0};
    FUZZ_ASSERT(batches >= (count > 0) && batches <= count && starts[0] == 0 &&
                starts[batches] == count);
    for (int64_t b = 0; b < batches; b++) {
        int64_t rows = starts[b + 1] - starts[b], heaviest = 0;
        FUZZ_ASSERT(rows >= 1 && (max_rows == 0 || rows <= max_rows));
        for (int64_t i = starts[b]; i < starts[b + 1]; i++) {
            FUZZ_ASSERT(order[i] >= 0 && order[i] < count && !seen[order[i]]);
            seen[order[i]] = 1;
            int64_t weight = tgt && tgt[order[i]] > src[order[i]] ? tgt[order[i]] : src[order[i]];
            heaviest = weight > heaviest ? weight : heaviest;
        }
        FUZZ_ASSERT(rows == 1 || heaviest <= max_tokens / rows); /* no overflow */
    }
}

/* The rows of a batch tensor [rows, width]: row r is the example's ids
 * between before (or none: -1) and after (-1: none), then pad. */
static void check_rows(tfm_tensor *t, const int32_t *ids, const int64_t *offsets,
                       const int64_t *indices, int64_t rows, int32_t before, int32_t after,
                       int32_t pad)
{
    FUZZ_ASSERT(tfm_tensor_ndim(t) == 2 && tfm_tensor_dim(t, 0) == rows);
    int64_t width = tfm_tensor_dim(t, 1);
    const int32_t *v = tfm_tensor_data_i32(t);
    for (int64_t r = 0; r < rows; r++) {
        const int32_t *row = v + r * width;
        int64_t k = 0, start = offsets[indices[r]], end = offsets[indices[r] + 1];
        if (before >= 0)
            FUZZ_ASSERT(row[k++] == before);
        for (int64_t i = start; i < end; i++)
            FUZZ_ASSERT(row[k++] == ids[i]);
        if (after >= 0)
            FUZZ_ASSERT(row[k++] == after);
        for (; k < width; k++)
            FUZZ_ASSERT(row[k] == pad);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bytes in = {data, size};
    int64_t count = fuzz_range(&in, 0, MAX_EXAMPLES);
    int64_t src[MAX_EXAMPLES], tgt[MAX_EXAMPLES], offsets[MAX_EXAMPLES + 1] = {0};
    for (int64_t i = 0; i < count; i++) {
        src[i] = (int64_t)fuzz_take(&in, 1);
        tgt[i] = (int64_t)fuzz_take(&in, 1);
        src[i] = src[i] == 255 ? INT64_MAX / 2 : src[i];
        tgt[i] = tgt[i] == 255 ? (int64_t)1 << 40 : tgt[i];
    }
    int64_t max_tokens = (int64_t)fuzz_take(&in, 2) - 8, max_rows = (int64_t)fuzz_take(&in, 1) - 2;
    uint64_t flags = fuzz_take(&in, 1);
    tfm_rng *rng = flags & 1 ? tfm_rng_create(fuzz_take(&in, 1)) : NULL;
    const int64_t *targets = flags & 2 ? tgt : NULL;
    int64_t order_count = count - (int64_t)(flags >> 6 & 1),
            starts_count = count + 1 - (int64_t)(flags >> 7 & 1);
    int64_t order[MAX_EXAMPLES], starts[MAX_EXAMPLES + 1], batches = -1;
    tfm_status s = tfm_batch_plan(src, targets, count, max_tokens, max_rows, rng, order,
                                  order_count, starts, starts_count, &batches);
    tfm_rng_free(rng);
    FUZZ_ASSERT(s == TFM_OK || s == TFM_ERR_ARG || s == TFM_ERR_SIZE || s == TFM_ERR_NULL);
    if (s == TFM_OK)
        check_plan(src, targets, count, max_tokens, max_rows, order, starts, batches);

    /* a corpus of the example lengths (targets, cut to 64) over the input's bytes */
    const int32_t *ids = NULL;
    static int32_t corpus[MAX_EXAMPLES * 64];
    int64_t ids_count = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t n = tgt[i] % 65;
        for (int64_t k = 0; k < n; k++)
            corpus[ids_count + k] = (int32_t)(data[(size_t)(ids_count + k) % (size ? size : 1)] % 97);
        ids_count += n;
        offsets[i + 1] = ids_count;
    }
    ids = corpus;
    int64_t rows = fuzz_range(&in, 0, 8), indices[8];
    for (int64_t r = 0; r < rows; r++)
        indices[r] = (int64_t)fuzz_take(&in, 1) - 2;
    int32_t pad = (int32_t)fuzz_take(&in, 1) - 1, bos = (int32_t)fuzz_take(&in, 1) - 1,
            eos = (int32_t)fuzz_take(&in, 1) - 1;
    int in_corpus = 1;
    for (int64_t r = 0; r < rows; r++)
        in_corpus &= indices[r] >= 0 && indices[r] < count;

    tfm_tensor *padded = tfm_batch_pad(NULL, ids, ids_count, offsets, count, indices, rows, pad);
    if (padded)
        check_rows(padded, ids, offsets, indices, rows, -1, -1, pad);
    FUZZ_ASSERT(!padded || in_corpus);
    tfm_tensor_free(padded);
    tfm_tensor *input = NULL, *labels = NULL;
    s = tfm_batch_shift_targets(NULL, ids, ids_count, offsets, count, indices, rows, bos, eos,
                                pad, &input, &labels);
    FUZZ_ASSERT((s == TFM_OK) == (input && labels) && (s == TFM_OK || (!input && !labels)));
    if (s == TFM_OK && bos >= 0 && eos >= 0 && pad >= 0) {
        check_rows(input, ids, offsets, indices, rows, bos, -1, pad);
        check_rows(labels, ids, offsets, indices, rows, -1, eos, pad);
    }
    tfm_tensor_free(input);
    tfm_tensor_free(labels);
    return 0;
}
