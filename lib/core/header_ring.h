/* The tensor headers of a tape, kept apart from the arena's values so that
 * a header is never overwritten by data and never freed before the tape: a
 * handle kept past tfm_tape_reset still reads its own header, whose stamp
 * (the tape's generation) says it is stale. Headers fill blocks in turn,
 * round a circle of blocks that continues across resets; a block is
 * written again only once its newest header is TFM__STALE_RESETS + 1 resets
 * old, otherwise a new block joins the circle. So a stale handle is always
 * told apart within TFM__STALE_RESETS resets, whatever the steps did. */
#ifndef TFM_CORE_HEADER_RING_H
#define TFM_CORE_HEADER_RING_H

#include "core/tensor.h"

#define TFM__STALE_RESETS 16

typedef struct tfm_header_block tfm_header_block;

typedef struct tfm_header_ring {
    tfm_header_block *current;  /* being filled; current->next was filled longest ago */
    int64_t blocks;
    int64_t step_count;         /* headers handed out since the last reset */
    int64_t max_step_count;     /* the most any step has taken */
} tfm_header_ring;

void tfm__header_ring_init(tfm_header_ring *ring);
/* An uninitialised header for a tensor of the given generation; NULL when
 * out of memory (no error set). */
tfm_tensor *tfm__header_ring_take(tfm_header_ring *ring, uint64_t generation);
/* Ends a step. The circle grows here to hold TFM__STALE_RESETS + 1 of the
 * largest step so far, so a steady-state step allocates nothing. */
void tfm__header_ring_reset(tfm_header_ring *ring);
void tfm__header_ring_release(tfm_header_ring *ring);

#endif
