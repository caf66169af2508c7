/* What the attack suites (alloc_failures, bad_input.c) share: a leak check
 * to run after each case (LeakSanitizer's in the sanitizer build, none in the
 * others), and problem(), which prints a case gone wrong and counts it, so
 * that one run lists them all before the test fails on the count. */
#ifndef TFM_TESTS_PROBLEMS_H
#define TFM_TESTS_PROBLEMS_H

#include <stdarg.h>
#include <stdio.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#define LEAK_CHECK() __lsan_do_recoverable_leak_check()
#else
#define LEAK_CHECK() 0
#endif

static long problems;

static void problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void problem(const char *fmt, ...)
{
    if (problems++ >= 100)
        return; /* enough to see the pattern */
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
}

#endif
