/** @file
 * libtfm batches of text: examples of different lengths grouped into
 * batches of about a number of tokens, and their token ids padded into
 * [B, T] tensors with the decoder's shifted inputs and labels. The
 * padding masks come from nn.h: tfm_mask_from_lengths() (key padding from
 * lengths) or tfm_mask_padding() (from padded ids).
 *
 * A corpus is one array of token ids, ids[0, ids_count), and offsets:
 * example i is ids[offsets[i], offsets[i + 1]), for i below examples
 * (offsets has examples + 1 values, non-decreasing). A batch names its
 * examples by index (indices[0, rows)), as tfm_batch_plan() lists them.
 *
 * Ownership: the arrays are the caller's and are only read, or written
 * where documented; tensors are made on the tape given (until its reset),
 * or with tape NULL caller-owned (tfm_tensor_free()). Errors: a status and
 * message (common.h); a refused call writes nothing. Threads: no state is
 * kept but the rng, which is used by one thread at a time. */
#ifndef TFM_BATCH_H
#define TFM_BATCH_H

#include "tape.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Plans an epoch's batches of count examples, as fairseq batches by size:
 * an example weighs the longer of its lengths (source_lengths[i],
 * target_lengths[i]; target_lengths may be NULL), the examples are sorted
 * by source length, then target length, ties in an order drawn from rng,
 * and cut in that order into batches whose padded size (the heaviest
 * example's weight x rows) stays within max_tokens and whose rows stay
 * within max_rows (0: no limit); an example heavier than max_tokens alone
 * makes a batch of one. The batches are then shuffled with rng. With rng
 * NULL nothing is drawn: ties in index order, batches shortest first (for
 * evaluation). The same rng state gives the same plan; an rng carried
 * from epoch to epoch gives each epoch its own.
 *
 * Writes order[0, count), every example once, batch by batch, and
 * starts[0, batches], batch b being order[starts[b], starts[b + 1]);
 * *batch_count = batches (at most count). order_count and starts_count
 * are the arrays' sizes, at least count and count + 1. Lengths are as the
 * tensors will hold them (with any bos or eos), each at least 1: an empty
 * example is TFM_ERR_ARG, naming it, rather than trained on silently. */
TFM_API tfm_status tfm_batch_plan(const int64_t *source_lengths,
                                  const int64_t *target_lengths, int64_t count,
                                  int64_t max_tokens, int64_t max_rows, tfm_rng *rng,
                                  int64_t *order, int64_t order_count, int64_t *starts,
                                  int64_t starts_count, int64_t *batch_count);

/** The examples indices[0, rows) of a corpus (see the file's notes) as an
 * int32 tensor [rows, T], T their longest length, each row padded with
 * pad_id after its ids. TFM_ERR_RANGE for an index outside the corpus or
 * offsets outside ids; TFM_ERR_ARG for a batch of empty examples only, or
 * a negative pad_id (a tokenizer without a padding piece gives -1). */
TFM_API tfm_tensor *tfm_batch_pad(tfm_tape *tape, const int32_t *ids, int64_t ids_count,
                                  const int64_t *offsets, int64_t examples,
                                  const int64_t *indices, int64_t rows, int32_t pad_id);

/** A decoder's teacher-forcing pair for the target examples indices[0,
 * rows) of a corpus: *decoder_input = bos_id then the ids, *labels = the
 * ids then eos_id, both int32 [rows, T + 1] (T the longest example),
 * padded with pad_id (give the loss pad_id as its ignore_index); row b's
 * length is its example's length + 1, for tfm_mask_from_lengths(). Both
 * tensors or neither are made. Errors as tfm_batch_pad. */
TFM_API tfm_status tfm_batch_shift_targets(tfm_tape *tape, const int32_t *ids,
                                           int64_t ids_count, const int64_t *offsets,
                                           int64_t examples, const int64_t *indices,
                                           int64_t rows, int32_t bos_id, int32_t eos_id,
                                           int32_t pad_id, tfm_tensor **decoder_input,
                                           tfm_tensor **labels);

#ifdef __cplusplus
}
#endif

#endif
