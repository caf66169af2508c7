/* Saves killed at random moments: a child saves two contents in turn
 * until SIGKILL lands (after a random delay, seeded); after each kill the
 * target loads as exactly one of the two files, and what the kill left
 * behind is at most one temporary, of the documented form, which the next
 * save removes. TFM_KILLS (default 200) and TFM_KILL_SEED (default 1) set
 * the run; it prints its figures for docs/reliability.md. */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "reliability.h"

enum { VALUES = 1 << 14 };

static char folder[64];
static char target[128];

static tfm_params *store(float seed)
{
    tfm_params *p = tfm_params_create();
    float *v = tfm_tensor_data_f32(tfm_params_add(p, "big", 1, (const int64_t[]){VALUES}));
    for (int i = 0; i < VALUES; i++)
        v[i] = seed + (float)i;
    return p;
}

static long env_or(const char *name, long fallback)
{
    const char *text = getenv(name);
    return text && *text ? strtol(text, NULL, 10) : fallback;
}

/* xorshift64: the delays, reproducible from the seed */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* The one entry of the folder besides the target, if any, must be a
 * temporary of the documented form from a process that is gone; 1 if there
 * is one. */
static int check_leftover(void)
{
    DIR *d = opendir(folder);
    ck_assert_ptr_nonnull(d);
    int temps = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..") ||
            !strcmp(ent->d_name, "target.safetensors"))
            continue;
        int pid = 0, n = -1;
        ck_assert_msg(sscanf(ent->d_name, ".target.safetensors.tfm-tmp.%d.%d", &pid, &n) == 2,
                      "unexpected entry %s", ent->d_name);
        ck_assert_msg(kill(pid, 0) != 0, "%s belongs to a live process", ent->d_name);
        temps++;
    }
    closedir(d);
    ck_assert_int_le(temps, 1);
    return temps;
}

START_TEST(killed_saves_leave_the_old_or_the_new_file)
{
    scratch_folder(folder, "kill");
    snprintf(target, sizeof target, "%s/target.safetensors", folder);
    long kills = env_or("TFM_KILLS", 200);
    uint64_t random = (uint64_t)env_or("TFM_KILL_SEED", 1) * 0x9E3779B97F4A7C15ull | 1;
    tfm_params *versions[2] = {store(1.0f), store(2.0f)}, *loaded = store(0.0f);
    float *got = tfm_params_values(loaded);
    ck_assert_int_eq(tfm_params_save(versions[0], target), TFM_OK);
    long seen[2] = {0, 0}, temporaries = 0;
    for (long k = 0; k < kills; k++) {
        pid_t child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0)
            for (int v = 1;; v ^= 1)
                tfm_params_save(versions[v], target);
        /* up to 30 ms: some kills land before the first save, most inside one */
        struct timespec delay = {0, (long)(next_random(&random) % 30000) * 1000};
        nanosleep(&delay, NULL);
        kill(child, SIGKILL);
        int status;
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

        ck_assert_msg(tfm_params_load(loaded, target) == TFM_OK, "kill %ld: %s", k,
                      tfm_last_error());
        int v = got[0] == 2.0f;
        ck_assert_msg(memcmp(got, tfm_params_values(versions[v]), VALUES * sizeof *got) == 0,
                      "kill %ld: the file is neither content", k);
        seen[v]++;
        temporaries += check_leftover();
    }
    /* the next save removes what the last kill left */
    ck_assert_int_eq(tfm_params_save(versions[0], target), TFM_OK);
    ck_assert_int_eq(folder_entries(folder), 1);
    printf("kill_save: %ld kills (seed %ld): the first content %ld times, the second %ld "
           "times, never anything else; %ld kills left a temporary, each removed by the "
           "next save\n", kills, env_or("TFM_KILL_SEED", 1), seen[0], seen[1], temporaries);
    ck_assert_int_gt(seen[0], 0);
    ck_assert_int_gt(seen[1], 0);
    for (int v = 0; v < 2; v++)
        tfm_params_free(versions[v]);
    tfm_params_free(loaded);
    remove_folder(folder);
}
END_TEST

static Suite *kill_save_suite(void)
{
    Suite *s = suite_create("kill_save");
    TCase *tc = tcase_create("kill_save");
    tcase_add_test(tc, killed_saves_leave_the_old_or_the_new_file);
    tcase_set_timeout(tc, 240);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(kill_save_suite)
