/* Flag parsing and error reporting shared by the example programs. Every
 * flag is "--name value"; "--help" prints the usage. */
#ifndef TFM_EXAMPLES_CLI_H
#define TFM_EXAMPLES_CLI_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/tfm.h>

typedef enum { CLI_INT, CLI_FLOAT, CLI_STRING } cli_kind;

typedef struct cli_flag {
    const char *name;   /* without the leading "--" */
    cli_kind kind;
    void *value;        /* int64_t *, double * or const char ** */
    double min, max;    /* accepted range for numbers */
    const char *help;
} cli_flag;

static void cli_usage(const char *program, const char *summary, const cli_flag *flags, int n)
{
    fprintf(stderr, "usage: %s [flags]\n%s\n\nflags:\n", program, summary);
    for (int i = 0; i < n; i++) {
        if (flags[i].kind == CLI_INT)
            fprintf(stderr, "  --%-16s %s (default %lld)\n", flags[i].name, flags[i].help,
                    (long long)*(int64_t *)flags[i].value);
        else if (flags[i].kind == CLI_FLOAT)
            fprintf(stderr, "  --%-16s %s (default %g)\n", flags[i].name, flags[i].help,
                    *(double *)flags[i].value);
        else
            fprintf(stderr, "  --%-16s %s (default %s)\n", flags[i].name, flags[i].help,
                    *(const char **)flags[i].value ? *(const char **)flags[i].value : "none");
    }
}

/* 0 when every argument was a known flag with a valid value; otherwise
 * prints what is wrong and the usage, and returns 1 (2 for --help). */
static int cli_parse(int argc, char **argv, const char *summary, const cli_flag *flags, int n)
{
    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
            cli_usage(argv[0], summary, flags, n);
            return 2;
        }
        const cli_flag *flag = NULL;
        for (int i = 0; i < n && !flag; i++)
            if (strncmp(argv[a], "--", 2) == 0 && strcmp(argv[a] + 2, flags[i].name) == 0)
                flag = &flags[i];
        if (!flag) {
            fprintf(stderr, "%s: unknown flag '%s'\n", argv[0], argv[a]);
            cli_usage(argv[0], summary, flags, n);
            return 1;
        }
        if (a + 1 >= argc) {
            fprintf(stderr, "%s: --%s needs a value\n", argv[0], flag->name);
            return 1;
        }
        const char *text = argv[++a];
        char *end = NULL;
        errno = 0;
        if (flag->kind == CLI_STRING) {
            *(const char **)flag->value = text;
            continue;
        }
        double number = flag->kind == CLI_INT ? (double)strtoll(text, &end, 10) : strtod(text, &end);
        if (errno || end == text || *end || number < flag->min || number > flag->max) {
            fprintf(stderr, "%s: --%s takes %s from %g to %g, not '%s'\n", argv[0], flag->name,
                    flag->kind == CLI_INT ? "a whole number" : "a number", flag->min, flag->max,
                    text);
            return 1;
        }
        if (flag->kind == CLI_INT)
            *(int64_t *)flag->value = (int64_t)number;
        else
            *(double *)flag->value = number;
    }
    return 0;
}

/* Prints what failed with libtfm's message; returns EXIT_FAILURE. */
static int cli_fail(const char *program, const char *what)
{
    fprintf(stderr, "%s: %s: %s (%s)\n", program, what, tfm_last_error(),
            tfm_status_name(tfm_last_status()));
    return EXIT_FAILURE;
}

#endif
