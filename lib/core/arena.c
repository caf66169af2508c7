#include "core/arena.h"

#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 64
#define ARENA_MIN_CHUNK ((size_t)1 << 20)

struct tfm_arena_chunk {
    tfm_arena_chunk *next;
    size_t size;
    size_t used;
    unsigned char *base; /* aligned start of the usable bytes */
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
    tfm_arena_chunk *head = arena->chunks;
    if (!head || head->size - head->used < need) {
        size_t size = need > ARENA_MIN_CHUNK ? need : ARENA_MIN_CHUNK;
        if (head && head->size > size / 2 && head->size <= SIZE_MAX / 2 &&
            head->size * 2 >= need)
            size = head->size * 2; /* grow geometrically */
        tfm_arena_chunk *chunk = chunk_new(size);
        if (!chunk)
            return NULL;
        if (head)
            arena->used_in_older += head->used;
        chunk->next = head;
        arena->chunks = head = chunk;
        arena->capacity += size;
    }
    void *p = head->base + head->used;
    head->used += need;
    return p;
}

void *tfm__arena_calloc(tfm_arena *arena, size_t bytes)
{
    void *p = tfm__arena_alloc(arena, bytes);
    if (p)
        memset(p, 0, bytes);
    return p;
}

int tfm__arena_reset(tfm_arena *arena)
{
    tfm_arena_chunk *head = arena->chunks;
    if (!head)
        return 0;
    if (head->next) {
        tfm_arena_chunk *single = chunk_new(round_up(arena->capacity));
        if (!single) {
            for (tfm_arena_chunk *c = head; c; c = c->next)
                c->used = 0;
            arena->used_in_older = 0;
            return -1;
        }
        chunk_free_all(head);
        arena->chunks = single;
        arena->capacity = single->size;
    }
    arena->chunks->used = 0;
    arena->used_in_older = 0;
    return 0;
}

void tfm__arena_release(tfm_arena *arena)
{
    chunk_free_all(arena->chunks);
    tfm__arena_init(arena);
}
