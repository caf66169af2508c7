/* Command lines of the example programs: GNU-style long flags through
 * getopt_long ("--name value", "--name=value", unique prefixes), --help and
 * --version on standard output, usage errors on standard error with exit
 * status 2. Each program describes its flags in one table. */
#ifndef TFM_EXAMPLES_CLI_H
#define TFM_EXAMPLES_CLI_H

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/tfm.h>

typedef enum {
    CLI_INT,    /* int64_t *, within [min, max] */
    CLI_FLOAT,  /* double *, within [min, max] */
    CLI_STRING, /* const char ** */
    CLI_SWITCH  /* int64_t *, set to 1; takes no value */
} cli_kind;

typedef struct cli_flag {
    const char *name; /* without the leading "--" */
    cli_kind kind;
    void *value;
    double min, max;
    const char *help;
} cli_flag;

enum { CLI_MAX_FLAGS = 64, CLI_USAGE_ERROR = 2, CLI_CONTINUE = -1 };

static void cli_usage(FILE *out, const char *program, const char *summary,
                      const cli_flag *flags, int n)
{
    fprintf(out, "usage: %s [flags]\n%s\n\nflags:\n", program, summary);
    for (int i = 0; i < n; i++) {
        const cli_flag *f = &flags[i];
        if (f->kind == CLI_INT)
            fprintf(out, "  --%-16s %s (default %lld)\n", f->name, f->help,
                    (long long)*(int64_t *)f->value);
        else if (f->kind == CLI_FLOAT)
            fprintf(out, "  --%-16s %s (default %g)\n", f->name, f->help, *(double *)f->value);
        else if (f->kind == CLI_STRING)
            fprintf(out, "  --%-16s %s (default %s)\n", f->name, f->help,
                    *(const char **)f->value ? *(const char **)f->value : "none");
        else
            fprintf(out, "  --%-16s %s\n", f->name, f->help);
    }
    fprintf(out, "  --%-16s %s\n  --%-16s %s\n", "help", "print this and exit", "version",
            "print the program's and libtfm's versions and exit");
}

static int cli_usage_error(const char *program)
{
    fprintf(stderr, "Try '%s --help' for more information.\n", program);
    return CLI_USAGE_ERROR;
}

/* Stores one flag's value; 0, or CLI_USAGE_ERROR after saying why. */
static int cli_store(const char *program, const cli_flag *flag, const char *text)
{
    if (flag->kind == CLI_SWITCH) {
        *(int64_t *)flag->value = 1;
        return 0;
    }
    if (flag->kind == CLI_STRING) {
        *(const char **)flag->value = text;
        return 0;
    }
    char *end = NULL;
    errno = 0;
    double number = flag->kind == CLI_INT ? (double)strtoll(text, &end, 10) : strtod(text, &end);
    if (errno || end == text || *end || !(number >= flag->min && number <= flag->max)) {
        fprintf(stderr, "%s: --%s takes %s from %g to %g, not '%s'\n", program, flag->name,
                flag->kind == CLI_INT ? "a whole number" : "a number", flag->min, flag->max,
                text);
        return cli_usage_error(program);
    }
    if (flag->kind == CLI_INT)
        *(int64_t *)flag->value = (int64_t)number;
    else
        *(double *)flag->value = number;
    return 0;
}

/* CLI_CONTINUE when the program should run with the parsed values;
 * otherwise the status main should return: EXIT_SUCCESS after --help or
 * --version, CLI_USAGE_ERROR after a message on standard error. When given
 * is not NULL, given[i] becomes 1 for each flag the command line names. */
static int cli_parse(int argc, char **argv, const char *summary, const cli_flag *flags, int n,
                     unsigned char *given)
{
    enum { HELP = 1, VERSION = 2, FIRST_FLAG = 256 };
    struct option options[CLI_MAX_FLAGS + 3];
    if (n < 0 || n > CLI_MAX_FLAGS) {
        fprintf(stderr, "%s: at most %d flags\n", argv[0], CLI_MAX_FLAGS);
        return CLI_USAGE_ERROR;
    }
    for (int i = 0; i < n; i++)
        options[i] = (struct option){flags[i].name,
                                     flags[i].kind == CLI_SWITCH ? no_argument : required_argument,
                                     NULL, FIRST_FLAG + i};
    options[n] = (struct option){"help", no_argument, NULL, HELP};
    options[n + 1] = (struct option){"version", no_argument, NULL, VERSION};
    options[n + 2] = (struct option){NULL, 0, NULL, 0};

    opterr = 0; /* the messages below name the flag as the user wrote it */
    optind = 1;
    for (;;) {
        int seen = optind;
        /* '+': the first argument that is not a flag ends the flags. */
        int which = getopt_long(argc, argv, "+:h", options, NULL);
        if (which == -1)
            break;
        if (which == HELP || which == 'h') {
            cli_usage(stdout, argv[0], summary, flags, n);
            return EXIT_SUCCESS;
        }
        if (which == VERSION) {
            printf("%s (libtfm %s)\n", argv[0], tfm_version_string());
            return EXIT_SUCCESS;
        }
        if (which == ':') {
            fprintf(stderr, "%s: %s needs a value\n", argv[0], argv[optind - 1]);
            return cli_usage_error(argv[0]);
        }
        if (which == '?' || which < FIRST_FLAG) {
            fprintf(stderr, "%s: unknown or ambiguous flag '%s'\n", argv[0],
                    optind > seen ? argv[optind - 1] : argv[seen]);
            return cli_usage_error(argv[0]);
        }
        int status = cli_store(argv[0], &flags[which - FIRST_FLAG], optarg);
        if (status)
            return status;
        if (given)
            given[which - FIRST_FLAG] = 1;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[optind]);
        return cli_usage_error(argv[0]);
    }
    return CLI_CONTINUE;
}

/* The help of every program's --precision flag. */
#define CLI_PRECISION_HELP \
    "matrix products: float32, or bfloat16 (mixed precision, on CPUs with AVX512_BF16)"

/* Applies --precision (tfm_set_matmul_precision): 0, or -1 after saying
 * why not. */
static inline int cli_set_precision(const char *program, const char *name)
{
    tfm_matmul_precision precision = TFM_MATMUL_FLOAT32;
    if (!strcmp(name, "bfloat16")) {
        precision = TFM_MATMUL_BFLOAT16;
    } else if (strcmp(name, "float32")) {
        fprintf(stderr, "%s: --precision is float32 or bfloat16, not '%s'\n", program, name);
        return -1;
    }
    if (tfm_set_matmul_precision(precision) != TFM_OK) {
        fprintf(stderr, "%s: %s\n", program, tfm_last_error());
        return -1;
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
