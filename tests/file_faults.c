/* The interposed calls go straight to the kernel (syscall), so they work
 * the same under the sanitizers, whose own wrappers they replace. Only the
 * test runs between arm and disarm: every call counted is libtfm's. */
#define _GNU_SOURCE
#include "file_faults.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static int armed, fault_error, short_writes;
static long calls, fail_at;
static const char *failed;

void file_faults_arm(long at, int error, int halve_writes)
{
    calls = 0;
    fail_at = at;
    fault_error = error;
    short_writes = halve_writes;
    failed = NULL;
    armed = 1;
}

long file_faults_disarm(void)
{
    armed = 0;
    return calls;
}

const char *file_faults_failed(void) { return failed; }

/* 1 when this call is the one to fail (errno is then set). */
static int fails(const char *name)
{
    if (!armed || ++calls != fail_at)
        return 0;
    failed = name;
    errno = fault_error;
    return 1;
}

int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list args;
        va_start(args, flags);
        mode = (mode_t)va_arg(args, int);
        va_end(args);
    }
    if (fails("open"))
        return -1;
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

ssize_t write(int fd, const void *buf, size_t n)
{
    if (fails("write"))
        return -1;
    if (armed && short_writes && n > 1)
        n /= 2;
    return syscall(SYS_write, fd, buf, n);
}

int fsync(int fd)
{
    if (fails("fsync"))
        return -1;
    return (int)syscall(SYS_fsync, fd);
}

int rename(const char *from, const char *to)
{
    if (fails("rename"))
        return -1;
    return (int)syscall(SYS_renameat, AT_FDCWD, from, AT_FDCWD, to);
}

/* A failed close still releases the descriptor, as Linux's does. */
int close(int fd)
{
    int failing = fails("close");
    int result = (int)syscall(SYS_close, fd);
    if (failing) {
        errno = fault_error;
        return -1;
    }
    return result;
}
