/* Bump allocator behind a tape: grows by chunks during a step, and on reset
 * folds them into one chunk of the high-water size, so that from the second
 * step on a step allocates nothing. */
#ifndef TFM_CORE_ARENA_H
#define TFM_CORE_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct tfm_arena_chunk tfm_arena_chunk;

typedef struct tfm_arena {
    tfm_arena_chunk *chunks; /* newest first */
    size_t used_in_older;    /* bytes used in all chunks but the newest */
    size_t capacity;         /* bytes held in all chunks */
} tfm_arena;

void tfm__arena_init(tfm_arena *arena);
/* 64-byte aligned, uninitialised; NULL when out of memory (no error set). */
void *tfm__arena_alloc(tfm_arena *arena, size_t bytes);
void *tfm__arena_calloc(tfm_arena *arena, size_t bytes);
/* Rewinds; returns 0, or -1 if folding the chunks could not allocate (the
 * arena then stays valid, just fragmented). */
int tfm__arena_reset(tfm_arena *arena);
void tfm__arena_release(tfm_arena *arena);

#endif
