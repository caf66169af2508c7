#define _GNU_SOURCE
#include "alloc_counter.h"

#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static long total, from_libtfm;
static uintptr_t libtfm_start, libtfm_end; /* where libtfm's code is mapped */

static int find_libtfm(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (!strstr(info->dlpi_name, "libtfm.so"))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
        if (ph->p_type != PT_LOAD)
            continue;
        if (!libtfm_start || start < libtfm_start)
            libtfm_start = start;
        if (end > libtfm_end)
            libtfm_end = end;
    }
    return 1;
}

int alloc_counter_init(void)
{
    dl_iterate_phdr(find_libtfm, NULL);
    return libtfm_end > libtfm_start ? 0 : -1;
}

long alloc_counter_total(void)
{
    return total;
}

long alloc_counter_libtfm(void)
{
    return from_libtfm;
}

#define COUNT_CALL()                                                           \
    do {                                                                       \
        uintptr_t caller = (uintptr_t)__builtin_return_address(0);             \
        __atomic_fetch_add(&total, 1, __ATOMIC_RELAXED);                       \
        if (caller >= libtfm_start && caller < libtfm_end)                     \
            __atomic_fetch_add(&from_libtfm, 1, __ATOMIC_RELAXED);             \
    } while (0)

void *malloc(size_t n)
{
    COUNT_CALL();
    return __libc_malloc(n);
}

void *calloc(size_t count, size_t n)
{
    COUNT_CALL();
    return __libc_calloc(count, n);
}

void *realloc(void *p, size_t n)
{
    COUNT_CALL();
    return __libc_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    COUNT_CALL();
    return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    COUNT_CALL();
    *out = __libc_memalign(align, n);
    return *out ? 0 : 12 /* ENOMEM */;
}
