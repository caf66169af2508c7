/* Bump allocator behind a tape: grows by chunks during a step, and on reset
 * folds them into one chunk of the step's high-water size, so that from the
 * second step on a step allocates nothing. */
#ifndef TFM_CORE_ARENA_H
#define TFM_CORE_ARENA_H

#include <stddef.h>
#include <stdint.h>

typedef struct tfm_arena_chunk tfm_arena_chunk;

typedef struct tfm_arena {
    tfm_arena_chunk *chunks;  /* oldest first */
    tfm_arena_chunk *current; /* the newest chunk, where allocation bumps */
    size_t capacity;          /* bytes held in all chunks */
} tfm_arena;

void tfm__arena_init(tfm_arena *arena);
/* 64-byte aligned, uninitialised; NULL when out of memory (no error set). */
void *tfm__arena_alloc(tfm_arena *arena, size_t bytes);
/* Rewinds. When the step needed several chunks they are replaced by one of
 * the bytes actually used; if that allocation fails the arena is left empty
 * and grows again on demand. */
void tfm__arena_reset(tfm_arena *arena);
void tfm__arena_release(tfm_arena *arena);

#endif
