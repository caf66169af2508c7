#include "core/arena.h"

#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 64
#define ARENA_MIN_CHUNK ((size_t)1 << 20)
/* Chunks double up to this size and then grow by it, so the last chunk of a
 * large step overshoots by at most this much address space. */
#define ARENA_MAX_GROWTH ((size_t)1 << 30)

struct tfm_arena_chunk {
    tfm_arena_chunk *next;
    size_t size;
    size_t used;
    unsigned char *base; /* 64-byte aligned */
};

static size_t round_up(size_t n) { return (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1); }

static tfm_arena_chunk *chunk_new(size_t size)
{
    tfm_arena_chunk *chunk = malloc(sizeof *chunk);
    if (!chunk)
        return NULL;
    chunk->base = aligned_alloc(ARENA_ALIGN, size);
    if (!chunk->base) {
        free(chunk);
        return NULL;
    }
    chunk->size = size;
    chunk->used = 0;
    chunk->next = NULL;
    return chunk;
}

static void chunk_free_all(tfm_arena_chunk *chunk)
{
    while (chunk) {
        tfm_arena_chunk *next = chunk->next;
        free(chunk->base);
        free(chunk);
        chunk = next;
    }
}

void tfm__arena_init(tfm_arena *arena) { memset(arena, 0, sizeof *arena); }

void *tfm__arena_alloc(tfm_arena *arena, size_t bytes)
{
    if (bytes > SIZE_MAX - ARENA_ALIGN)
        return NULL;
    size_t need = round_up(bytes ? bytes : 1);
    tfm_arena_chunk *c = arena->current; /* always the newest chunk */
    if (!c || c->size - c->used < need) {
        size_t growth = arena->capacity < ARENA_MIN_CHUNK ? ARENA_MIN_CHUNK
                        : arena->capacity < ARENA_MAX_GROWTH ? arena->capacity
                                                             : ARENA_MAX_GROWTH;
        c = chunk_new(need > growth ? need : growth);
        if (!c)
            return NULL;
        if (arena->current)
            arena->current->next = c;
        else
            arena->chunks = c;
        arena->capacity += c->size;
    }
    arena->current = c;
    void *p = c->base + c->used;
    c->used += need;
    return p;
}

void tfm__arena_reset(tfm_arena *arena)
{
    tfm_arena_chunk *first = arena->chunks;
    if (first && first->next) {
        size_t used = 0;
        for (tfm_arena_chunk *c = first; c; c = c->next)
            used += c->used;
        /* free first: holding both would double the peak */
        chunk_free_all(first);
        arena->chunks = chunk_new(used);
        arena->capacity = arena->chunks ? used : 0;
    }
    if (arena->chunks)
        arena->chunks->used = 0;
    arena->current = arena->chunks;
}

void tfm__arena_release(tfm_arena *arena)
{
    chunk_free_all(arena->chunks);
    tfm__arena_init(arena);
}
