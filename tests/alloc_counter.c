#define _GNU_SOURCE
#include "alloc_counter.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The allocator this file stands in front of: libc's, or the sanitizer's
 * in a sanitizer build (whose free must see its own blocks). */
static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static void *(*next_aligned_alloc)(size_t, size_t);
static int (*next_posix_memalign)(void **, size_t, size_t);

static long total, from_libtfm;
static long fail_at; /* the value of from_libtfm whose call fails; 0: none */
static int failed;
static uintptr_t failed_caller;
static uintptr_t libtfm_start, libtfm_end; /* where libtfm's code is mapped */

/* dlsym's object pointer into a function pointer, as POSIX allows. */
static void find(const char *name, void *function_pointer)
{
    void *symbol = dlsym(RTLD_NEXT, name);
    memcpy(function_pointer, &symbol, sizeof symbol);
}

static void find_next(void)
{
    find("malloc", &next_malloc);
    find("calloc", &next_calloc);
    find("realloc", &next_realloc);
    find("aligned_alloc", &next_aligned_alloc);
    find("posix_memalign", &next_posix_memalign);
}

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
    return __atomic_load_n(&from_libtfm, __ATOMIC_RELAXED);
}

void alloc_counter_fail_nth(long n)
{
    failed = 0;
    __atomic_store_n(&fail_at, n > 0 ? alloc_counter_libtfm() + n : 0, __ATOMIC_RELAXED);
}

int alloc_counter_failed(void)
{
    return failed;
}

uintptr_t alloc_counter_failed_site(void)
{
    return failed ? failed_caller - libtfm_start : 0;
}

/* Counts the call; 1 when it is the one to fail. */
static int count_call(uintptr_t caller)
{
    if (!next_malloc)
        find_next();
    __atomic_fetch_add(&total, 1, __ATOMIC_RELAXED);
    if (caller < libtfm_start || caller >= libtfm_end)
        return 0;
    long n = __atomic_add_fetch(&from_libtfm, 1, __ATOMIC_RELAXED);
    if (n != __atomic_load_n(&fail_at, __ATOMIC_RELAXED))
        return 0;
    failed = 1;
    failed_caller = caller;
    errno = ENOMEM;
    return 1;
}

#define CALLER ((uintptr_t)__builtin_return_address(0))

void *malloc(size_t n)
{
    return count_call(CALLER) ? NULL : next_malloc(n);
}

void *calloc(size_t count, size_t n)
{
    return count_call(CALLER) ? NULL : next_calloc(count, n);
}

void *realloc(void *p, size_t n)
{
    return count_call(CALLER) ? NULL : next_realloc(p, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    return count_call(CALLER) ? NULL : next_aligned_alloc(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    return count_call(CALLER) ? ENOMEM : next_posix_memalign(out, align, n);
}
