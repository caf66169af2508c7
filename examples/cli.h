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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tfm/tfm.h>

typedef enum {
    CLI_INT,    /* int64_t *, within [min, max] */
    CLI_FLOAT,  /* double *, within [min, max] */
    CLI_STRING, /* const char ** */
    CLI_SWITCH, /* int64_t *, set to 1; takes no value */
    CLI_LIST    /* cli_list *: each time the flag is given, one more value */
} cli_kind;

enum { CLI_LIST_MAX = 32 };

/* The values of a flag that may be given several times, in order. */
typedef struct cli_list {
    const char *item[CLI_LIST_MAX];
    int count;
} cli_list;

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
        else if (f->kind == CLI_LIST)
            fprintf(out, "  --%-16s %s (may be given up to %d times)\n", f->name, f->help,
                    CLI_LIST_MAX);
        else
            fprintf(out, "  --%-16s %s\n", f->name, f->help);
    }
    fprintf(out, "  --%-16s %s\n  --%-16s %s\n", "help", "print this and exit", "version",
            "print the program's and libtfm's versions and exit");
}

/* The program's name as its messages and --version print it: argv[0]
 * without its folders, the same however the program was started. */
static const char *cli_name(const char *argv0)
{
    const char *slash = strrchr(argv0, '/');
    return slash ? slash + 1 : argv0;
}

/* Standard output, checked: its writes are buffered, so a failure (a full
 * disk, a closed pipe) shows in its error flag or in the final flush.
 * cli_parse has cli_close_stdout run at exit: a program whose output was
 * lost exits 1 with a message, whatever main returned. Programs that print
 * as they go ask cli_stdout_failed after each write, to stop early. */
static const char *cli_program = "";
static int cli_stdout_errno;

/* 1 when a write to standard output has failed (its errno kept for the
 * message at exit), else 0. */
static inline int cli_stdout_failed(void)
{
    if (!ferror(stdout))
        return 0;
    if (!cli_stdout_errno)
        cli_stdout_errno = errno ? errno : EIO;
    return 1;
}

static void cli_close_stdout(void)
{
    int failed = cli_stdout_failed();
    if (fclose(stdout) != 0 && !failed) {
        failed = 1;
        cli_stdout_errno = errno;
    }
    if (failed) {
        fprintf(stderr, "%s: cannot write standard output: %s\n", cli_program,
                strerror(cli_stdout_errno));
        _exit(EXIT_FAILURE); /* exit() may not be called again from an exit handler */
    }
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
    if (flag->kind == CLI_LIST) {
        cli_list *list = flag->value;
        if (list->count == CLI_LIST_MAX) {
            fprintf(stderr, "%s: --%s is given more than %d times\n", program, flag->name,
                    CLI_LIST_MAX);
            return cli_usage_error(program);
        }
        list->item[list->count++] = text;
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
    const char *program = cli_name(argv[0]);
    cli_program = program;
    atexit(cli_close_stdout);
    if (n < 0 || n > CLI_MAX_FLAGS) {
        fprintf(stderr, "%s: at most %d flags\n", program, CLI_MAX_FLAGS);
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
            cli_usage(stdout, program, summary, flags, n);
            return EXIT_SUCCESS;
        }
        if (which == VERSION) {
            printf("%s (libtfm %s)\n", program, tfm_version_string());
            return EXIT_SUCCESS;
        }
        if (which == ':') {
            fprintf(stderr, "%s: %s needs a value\n", program, argv[optind - 1]);
            return cli_usage_error(program);
        }
        if (which == '?' || which < FIRST_FLAG) {
            fprintf(stderr, "%s: unknown or ambiguous flag '%s'\n", program,
                    optind > seen ? argv[optind - 1] : argv[seen]);
            return cli_usage_error(program);
        }
        int status = cli_store(program, &flags[which - FIRST_FLAG], optarg);
        if (status)
            return status;
        if (given)
            given[which - FIRST_FLAG] = 1;
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\n", program, argv[optind]);
        return cli_usage_error(program);
    }
    return CLI_CONTINUE;
}

/* --heads must divide --d-model (each head takes d_model / heads columns):
 * a usage error, found before anything runs. 0, or CLI_USAGE_ERROR after
 * saying why. */
static inline int cli_check_heads(const char *program, int64_t d_model, int64_t heads)
{
    if (heads > 0 && d_model % heads == 0)
        return 0;
    fprintf(stderr, "%s: --heads %lld does not divide --d-model %lld\n", program,
            (long long)heads, (long long)d_model);
    return cli_usage_error(program);
}

/* The help of every program's --precision flag. */
#define CLI_PRECISION_HELP \
    "matrix products, training's and decoding's: float32, or bfloat16 (on CPUs with " \
    "AVX512_BF16; mixed precision)"

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

/* Creates the folder path and every missing folder above it, as mkdir -p
 * (output paths such as runs/demo work in a fresh checkout); 0, or -1 with
 * errno set. */
static inline int cli_make_folders(const char *path)
{
    char partial[4096];
    size_t length = strlen(path);
    if (length == 0 || length >= sizeof partial) {
        errno = length ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(partial, path, length + 1);
    for (char *at = partial + 1;; at++) {
        if (*at != '/' && *at != '\0')
            continue;
        char kept = *at;
        *at = '\0';
        if (mkdir(partial, 0777) != 0 && errno != EEXIST)
            return -1;
        *at = kept;
        if (!kept)
            break;
    }
    struct stat info;
    if (stat(partial, &info) != 0)
        return -1;
    if (!S_ISDIR(info.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* The folders above the file path, as cli_make_folders (none for a bare
 * file name); 0, or -1 with errno set. */
static inline int cli_make_parent_folders(const char *path)
{
    char parent[4096];
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return 0;
    size_t length = (size_t)(slash - path);
    if (length >= sizeof parent) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(parent, path, length);
    parent[length] = '\0';
    return cli_make_folders(parent);
}

/* Seconds on a monotonic clock, for the programs' timings. */
static inline double cli_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Prints what failed, with libtfm's message when libtfm set one; returns
 * EXIT_FAILURE. */
static int cli_fail(const char *program, const char *what)
{
    if (tfm_last_status() == TFM_OK)
        fprintf(stderr, "%s: %s\n", program, what);
    else
        fprintf(stderr, "%s: %s: %s (%s)\n", program, what, tfm_last_error(),
                tfm_status_name(tfm_last_status()));
    return EXIT_FAILURE;
}

#endif
