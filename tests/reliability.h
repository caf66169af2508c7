/* What the reliability suites (non-finite values, file attacks, failed and
 * killed saves) share: error checks, scratch folders, small stores. */
#ifndef TFM_TESTS_RELIABILITY_H
#define TFM_TESTS_RELIABILITY_H

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tfm/tfm.h>

/* The last error has this status and its message holds text. */
#define expect_error(status, text)                                             \
    do {                                                                       \
        ck_assert_msg(tfm_last_status() == (status), "status %s, want %s: %s", \
                      tfm_status_name(tfm_last_status()),                      \
                      tfm_status_name(status), tfm_last_error());              \
        ck_assert_msg(strstr(tfm_last_error(), (text)) != NULL,                \
                      "message \"%s\" lacks \"%s\"", tfm_last_error(), (text));\
    } while (0)

/* A new empty folder under /tmp, named into folder[64]. */
static inline void scratch_folder(char *folder, const char *tag)
{
    snprintf(folder, 64, "/tmp/tfm_%s_XXXXXX", tag);
    ck_assert_ptr_nonnull(mkdtemp(folder));
}

/* Removes a folder and the files in it. */
static inline void remove_folder(const char *folder)
{
    DIR *d = opendir(folder);
    if (!d)
        return;
    struct dirent *ent;
    char child[512];
    while ((ent = readdir(d)))
        if (strcmp(ent->d_name, ".") && strcmp(ent->d_name, "..")) {
            snprintf(child, sizeof child, "%s/%s", folder, ent->d_name);
            if (unlink(child) != 0)
                rmdir(child);
        }
    closedir(d);
    rmdir(folder);
}

/* The number of entries in a folder other than "." and "..". */
static inline int folder_entries(const char *folder)
{
    DIR *d = opendir(folder);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)))
        n += strcmp(ent->d_name, ".") && strcmp(ent->d_name, "..");
    closedir(d);
    return n;
}

/* Open file descriptors of this process, to find leaked ones. */
static inline int open_fds(void)
{
    return folder_entries("/proc/self/fd") - 1; /* less opendir's own */
}

/* A store of two tensors ("w" [3, 4], "b" [4]) whose values all come from
 * seed: the same seed gives the same bits. */
static inline tfm_params *seeded_params(float seed)
{
    tfm_params *p = tfm_params_create();
    ck_assert_ptr_nonnull(p);
    tfm_tensor *w = tfm_params_add(p, "w", 2, (const int64_t[]){3, 4});
    tfm_tensor *b = tfm_params_add(p, "b", 1, (const int64_t[]){4});
    ck_assert_ptr_nonnull(w);
    ck_assert_ptr_nonnull(b);
    float *v = tfm_params_values(p);
    for (int64_t i = 0; i < tfm_params_numel(p); i++)
        v[i] = seed + 0.25f * (float)i;
    return p;
}

/* valgrind counts its own shadow memory in ours: nothing to measure */
static inline int under_valgrind(void)
{
    const char *preload = getenv("LD_PRELOAD");
    return preload && strstr(preload, "vgpreload");
}

/* Resident memory now, in KiB. */
static inline long resident_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%ld %ld", &pages, &resident), 2);
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

#endif
