#include "core/header_ring.h"

#include <stdlib.h>
#include <string.h>

#define BLOCK_HEADERS 64

struct tfm_header_block {
    tfm_header_block *next;
    int64_t used;
    uint64_t newest;  /* 1 + the generation of the newest header; 0: none yet */
    tfm_tensor slots[BLOCK_HEADERS];
};

void tfm__header_ring_init(tfm_header_ring *ring) { memset(ring, 0, sizeof *ring); }

/* A fresh block after the current one, where the circle's oldest go. */
static tfm_header_block *insert_block(tfm_header_ring *ring)
{
    tfm_header_block *block = malloc(sizeof *block);
    if (!block)
        return NULL;
    block->used = 0;
    block->newest = 0;
    if (ring->current) {
        block->next = ring->current->next;
        ring->current->next = block;
    } else {
        block->next = block;
        ring->current = block;
    }
    ring->blocks++;
    return block;
}

static int may_rewrite(const tfm_header_block *block, uint64_t generation)
{
    return block->newest == 0 || block->newest + TFM__STALE_RESETS <= generation;
}

tfm_tensor *tfm__header_ring_take(tfm_header_ring *ring, uint64_t generation)
{
    tfm_header_block *block = ring->current;
    if (!block || block->used == BLOCK_HEADERS) {
        if (block && may_rewrite(block->next, generation))
            block = block->next;
        else if (!(block = insert_block(ring)))
            return NULL;
        block->used = 0;
        ring->current = block;
    }
    block->newest = generation + 1;
    ring->step_count++;
    return &block->slots[block->used++];
}

/* The headers of the last TFM__STALE_RESETS + 1 steps run contiguously
 * round the circle, over at most ceil(run / BLOCK_HEADERS) + 1 blocks; one
 * more block leaves the oldest one free to rewrite. */
void tfm__header_ring_reset(tfm_header_ring *ring)
{
    if (ring->step_count > ring->max_step_count)
        ring->max_step_count = ring->step_count;
    ring->step_count = 0;
    int64_t run = (TFM__STALE_RESETS + 1) * ring->max_step_count;
    int64_t needed = run ? (run + BLOCK_HEADERS - 1) / BLOCK_HEADERS + 2 : 0;
    while (ring->blocks < needed && insert_block(ring))
        ;
}

void tfm__header_ring_release(tfm_header_ring *ring)
{
    tfm_header_block *block = ring->current;
    for (int64_t i = 0; i < ring->blocks; i++) {
        tfm_header_block *next = block->next;
        free(block);
        block = next;
    }
    tfm__header_ring_init(ring);
}
