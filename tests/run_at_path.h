/* A suite that runs itself again as a child with TFM_CPU set: the code
 * path is chosen once per process (lib/core/cpu.h). */
#ifndef TFM_TESTS_RUN_AT_PATH_H
#define TFM_TESTS_RUN_AT_PATH_H

#include <check.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs this program with the one argument `arg` and TFM_CPU=path, and
 * reads what it writes to its standard output into out (at most size
 * bytes); the child must succeed. Returns the bytes read. */
static size_t run_at_path(const char *path, const char *arg, void *out, size_t size)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        setenv("TFM_CPU", path, 1);
        execl("/proc/self/exe", "/proc/self/exe", arg, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    size_t bytes = 0;
    ssize_t got;
    while ((got = read(fds[0], (char *)out + bytes, size - bytes)) > 0)
        bytes += (size_t)got;
    close(fds[0]);
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "TFM_CPU=%s: the child failed",
                  path);
    return bytes;
}

#endif
