/* Files as a hostile user hands them over: a FIFO to load from, a device,
 * FIFO or folder to save over, junk and over-dense headers, forged
 * optimizer state, temporaries left by killed saves, very long names. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "reliability.h"

static char folder[64];

static void make_folder(void) { scratch_folder(folder, "files"); }
static void drop_folder(void) { remove_folder(folder); }

/* folder/name, in one of a few rotating buffers. */
static const char *at(const char *name)
{
    static char paths[4][1024];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 1024, "%s/%s", folder, name);
    return p;
}

static void write_raw(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(bytes, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* An 8-byte length, the header, then data_len zero bytes. */
static void write_header_file(const char *path, const char *header, size_t len, size_t data_len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    unsigned char prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (unsigned char)((uint64_t)len >> (8 * i));
    fwrite(prefix, 1, 8, f);
    fwrite(header, 1, len, f);
    for (size_t i = 0; i < data_len; i++)
        fputc(0, f);
    ck_assert_int_eq(fclose(f), 0);
}

static tfm_optimizer *adam_over(tfm_params *p)
{
    tfm_optimizer_options o;
    tfm_optimizer_options_init(&o, TFM_OPTIMIZER_ADAM);
    tfm_optimizer *opt = tfm_optimizer_create(p, &o);
    ck_assert_ptr_nonnull(opt);
    return opt;
}

/* --- loading from what is not a regular file ---------------------------------------- */

START_TEST(loading_from_a_fifo_does_not_block)
{
    const char *fifo = at("pipe.safetensors");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    /* in a child, so that a blocked open is killed by the alarm, not the suite */
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        alarm(10);
        tfm_params *p = seeded_params(1.0f);
        tfm_optimizer *opt = adam_over(p);
        int ok = tfm_safetensors_open(fifo) == NULL && tfm_last_status() == TFM_ERR_IO &&
                 strstr(tfm_last_error(), "tfm_safetensors_open: ") &&
                 strstr(tfm_last_error(), "not a regular file (a FIFO)");
        ok = ok && tfm_params_load(p, fifo) == TFM_ERR_IO &&
             strstr(tfm_last_error(), "tfm_params_load: ");
        ok = ok && tfm_optimizer_load(opt, fifo) == TFM_ERR_IO &&
             strstr(tfm_last_error(), "tfm_optimizer_load: ") &&
             strstr(tfm_last_error(), "(a FIFO)");
        tfm_optimizer_free(opt);
        tfm_params_free(p);
        _exit(ok ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(!WIFSIGNALED(status), "the load blocked (killed by signal %d)",
                  WTERMSIG(status));
    ck_assert_msg(WEXITSTATUS(status) == 0, "a load did not refuse the FIFO");
}
END_TEST

START_TEST(loading_a_folder_or_device_is_refused)
{
    tfm_clear_error();
    ck_assert_ptr_null(tfm_safetensors_open(folder));
    expect_error(TFM_ERR_IO, "not a regular file (a directory)");
    tfm_clear_error();
    ck_assert_ptr_null(tfm_safetensors_open("/dev/null"));
    expect_error(TFM_ERR_IO, "not a regular file (a character device)");
}
END_TEST

/* --- saving over what is not a regular file ------------------------------------------ */

/* The three savers, on path: each must refuse with the type named. */
static void expect_saves_refused(const char *path, const char *kind)
{
    tfm_params *p = seeded_params(2.0f);
    tfm_optimizer *opt = adam_over(p);
    tfm_tensor *t = tfm_params_at(p, 0);
    char text[160];
    snprintf(text, sizeof text, "\"%s\" is %s; a save replaces only a regular file", path, kind);
    tfm_clear_error();
    ck_assert_int_eq(tfm_params_save(p, path), TFM_ERR_IO);
    expect_error(TFM_ERR_IO, "tfm_params_save: ");
    expect_error(TFM_ERR_IO, text);
    tfm_clear_error();
    ck_assert_int_eq(tfm_optimizer_save(opt, path), TFM_ERR_IO);
    expect_error(TFM_ERR_IO, "tfm_optimizer_save: ");
    expect_error(TFM_ERR_IO, text);
    tfm_clear_error();
    ck_assert_int_eq(tfm_safetensors_write(path, 1, (const char *[]){"w"},
                                           (const tfm_tensor *const[]){t}),
                     TFM_ERR_IO);
    expect_error(TFM_ERR_IO, text);
    tfm_optimizer_free(opt);
    tfm_params_free(p);
}

START_TEST(saves_never_replace_what_is_not_a_regular_file)
{
    const char *fifo = at("fifo"), *sub = at("sub"), *device = at("device");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    /* a link to a device: as a save to /dev/null itself, without touching /dev */
    ck_assert_int_eq(symlink("/dev/null", device), 0);
    expect_saves_refused(fifo, "a FIFO");
    expect_saves_refused(sub, "a directory");
    expect_saves_refused(device, "a character device");

    struct stat st;
    ck_assert_int_eq(lstat(fifo, &st), 0);
    ck_assert(S_ISFIFO(st.st_mode));
    ck_assert_int_eq(lstat(sub, &st), 0);
    ck_assert(S_ISDIR(st.st_mode));
    ck_assert_int_eq(lstat(device, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(folder_entries(folder), 3); /* no temporary left */
    ck_assert_int_eq(folder_entries(sub), 0);

    /* a link to a regular file is replaced as before */
    tfm_params *p = seeded_params(3.0f);
    ck_assert_int_eq(tfm_params_save(p, at("real")), TFM_OK);
    ck_assert_int_eq(symlink("real", at("link")), 0);
    ck_assert_int_eq(tfm_params_save(p, at("link")), TFM_OK);
    ck_assert_int_eq(tfm_params_load(p, at("link")), TFM_OK);
    tfm_params_free(p);

    p = seeded_params(0.0f);
    tfm_clear_error();
    ck_assert_int_eq(tfm_params_save(p, at("missing/")), TFM_ERR_ARG);
    expect_error(TFM_ERR_ARG, "missing/\" names no file");
    tfm_params_free(p);
}
END_TEST

/* --- headers: junk, too dense, and the densest valid ones ------------------------------ */

START_TEST(junk_headers_are_refused_at_their_first_byte)
{
    static const struct {
        const char *header;
        size_t len;
        const char *message;
    } cases[] = {
        {"[]", 2, "the header is not a JSON object (byte 0 is 0x5b, not '{')"},
        {"   x{}", 6, "(byte 3 is 0x78, not '{')"},
        {"\n\"a\"", 4, "(byte 1 is 0x22, not '{')"},
        {"\0{}", 3, "(byte 0 is 0x00, not '{')"},
        {"12345678", 8, "(byte 0 is 0x31, not '{')"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        write_header_file(at("junk"), cases[c].header, cases[c].len, 0);
        tfm_clear_error();
        ck_assert_ptr_null(tfm_safetensors_open(at("junk")));
        expect_error(TFM_ERR_FORMAT, cases[c].message);
    }
}
END_TEST

#ifndef __SANITIZE_ADDRESS__ /* ASan's quarantine keeps freed blocks resident */
/* The peak resident memory of a child that fails to open path with a
 * message holding refusal, above what this process holds at the fork. */
static long open_peak_kib(const char *path, const char *refusal)
{
    long before = resident_kib();
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        tfm_safetensors *f = tfm_safetensors_open(path);
        _exit(f == NULL && tfm_last_status() == TFM_ERR_FORMAT &&
                      strstr(tfm_last_error(), refusal)
                  ? 0
                  : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the header was not "
                  "refused with \"%s\"", refusal);
    struct rusage usage;
    ck_assert_int_eq(getrusage(RUSAGE_CHILDREN, &usage), 0);
    return usage.ru_maxrss - before;
}
#endif

START_TEST(dense_headers_are_refused_in_bounded_memory)
{
    /* {"a":[0,0,0,...]}: one JSON value per 2 bytes */
    enum { HEADER = 16 << 20 };
    char *header = malloc(HEADER);
    ck_assert_ptr_nonnull(header);
    size_t n = (size_t)sprintf(header, "{\"a\":[0");
    while (n + 3 < HEADER) {
        header[n++] = ',';
        header[n++] = '0';
    }
    header[n++] = ']';
    header[n++] = '}';
    write_header_file(at("dense"), header, n, 0);
    free(header);
    char text[96];
    snprintf(text, sizeof text, "the header: more than %zu values in %zu bytes", n / 5 + 2, n);
    tfm_clear_error();
    ck_assert_ptr_null(tfm_safetensors_open(at("dense")));
    expect_error(TFM_ERR_FORMAT, text);
#ifndef __SANITIZE_ADDRESS__
    /* the header and 24-byte nodes for one value per 5 bytes (strings are
     * decoded in the header's buffer): under 7 bytes per header byte */
    if (under_valgrind())
        return;
    long peak = open_peak_kib(at("dense"), "more than");
    ck_assert_msg(peak < 7L * (HEADER / 1024), "%ld KiB for a %d KiB header", peak,
                  HEADER / 1024);
#endif
}
END_TEST

/* A header that is a JSON object of 5-byte members ({"":0,"":0,...}) is
 * within the value limit and parsed whole before the reader refuses it
 * (its key repeated): 12 bytes per header byte (1.19 GB for 100 MB)
 * before nodes shrank from 56 to 24 bytes and strings were decoded in
 * place, under 7 now with the members' indices sorted by key (4 bytes
 * each). */
START_TEST(header_objects_are_parsed_in_bounded_memory)
{
    enum { HEADER = 16 << 20 };
    char *header = malloc(HEADER);
    ck_assert_ptr_nonnull(header);
    size_t n = 0;
    header[n++] = '{';
    while (n + 6 < HEADER) {
        memcpy(header + n, "\"\":0,", 5);
        n += 5;
    }
    memcpy(header + n, "\"\":0}", 5);
    n += 5;
    write_header_file(at("members"), header, n, 0);
    free(header);
#ifndef __SANITIZE_ADDRESS__
    if (!under_valgrind()) {
        long peak = open_peak_kib(at("members"), "the key \"\" appears twice");
        ck_assert_msg(peak < 7L * (HEADER / 1024), "%ld KiB for a %d KiB header", peak,
                      HEADER / 1024);
    }
#endif
    tfm_clear_error();
    ck_assert_ptr_null(tfm_safetensors_open(at("members")));
    expect_error(TFM_ERR_FORMAT, "the key \"\" appears twice");
}
END_TEST

START_TEST(the_densest_valid_headers_still_open)
{
    /* metadata pairs "k":"" (unique keys) and entries with four one-digit
     * dimensions, without a space */
    enum { PAIRS = 900, ENTRIES = 900 };
    const char letters[] = "abcdefghijklmnopqrstuvwxyz0123";
    size_t cap = 20 + PAIRS * 8 + ENTRIES * 64;
    char *header = malloc(cap);
    size_t n = (size_t)sprintf(header, "{\"__metadata__\":{");
    for (int i = 0; i < PAIRS; i++)
        n += (size_t)sprintf(header + n, "%s\"%c%c\":\"\"", i ? "," : "", letters[i / 30],
                             letters[i % 30]);
    n += (size_t)sprintf(header + n, "}");
    for (int i = 0; i < ENTRIES; i++)
        n += (size_t)sprintf(header + n, ",\"%c%c\":{\"dtype\":\"I8\",\"shape\":[1,1,1,1],"
                             "\"data_offsets\":[%d,%d]}", letters[i / 30], letters[i % 30], i,
                             i + 1);
    n += (size_t)sprintf(header + n, "}");
    ck_assert_uint_lt(n, cap);
    write_header_file(at("dense_valid"), header, n, ENTRIES);
    free(header);
    tfm_safetensors *f = tfm_safetensors_open(at("dense_valid"));
    ck_assert_msg(f != NULL, "%s", tfm_last_error());
    ck_assert_int_eq(tfm_safetensors_count(f), ENTRIES);
    tfm_safetensors_close(f);
}
END_TEST

/* --- forged optimizer state --------------------------------------------------------- */

/* Rewrites an optimizer file with its "step" replaced by value (as int32
 * halves, or as one I64 when as_i64). */
static void forge_step(const char *path, int64_t value, int as_i64)
{
    tfm_safetensors *f = tfm_safetensors_open(path);
    ck_assert_ptr_nonnull(f);
    int64_t n = tfm_safetensors_count(f);
    const char *names[8];
    tfm_tensor *tensors[8];
    for (int64_t i = 0; i < n; i++) {
        names[i] = tfm_safetensors_name(f, i);
        tensors[i] = tfm_safetensors_get(f, names[i]);
        if (strcmp(names[i], "step"))
            continue;
        tfm_tensor_free(tensors[i]);
        uint64_t u = (uint64_t)value;
        int32_t halves[2] = {(int32_t)(uint32_t)u, (int32_t)(uint32_t)(u >> 32)};
        tensors[i] = as_i64 ? tfm_tensor_from_i32(1, (const int64_t[]){1}, halves)
                            : tfm_tensor_from_i32(1, (const int64_t[]){2}, halves);
    }
    char *copy[8];
    for (int64_t i = 0; i < n; i++)
        copy[i] = strdup(names[i]);
    tfm_safetensors_close(f);
    ck_assert_int_eq(tfm_safetensors_write(path, n, (const char *const *)copy,
                                           (const tfm_tensor *const *)tensors), TFM_OK);
    for (int64_t i = 0; i < n; i++) {
        free(copy[i]);
        tfm_tensor_free(tensors[i]);
    }
}

START_TEST(forged_step_counts_are_refused)
{
    tfm_params *p = seeded_params(1.0f);
    tfm_optimizer *opt = adam_over(p);
    const char *path = at("adam.safetensors");
    ck_assert_int_eq(tfm_optimizer_save(opt, path), TFM_OK);
    const struct {
        int64_t step;
        tfm_status want;
    } cases[] = {
        {INT64_MAX, TFM_ERR_FORMAT}, {((int64_t)1 << 53) + 1, TFM_ERR_FORMAT},
        {-1, TFM_ERR_FORMAT},        {INT64_MIN, TFM_ERR_FORMAT},
        {(int64_t)1 << 53, TFM_OK},  {123456789012, TFM_OK},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        forge_step(path, cases[c].step, 0);
        tfm_clear_error();
        ck_assert_int_eq(tfm_optimizer_load(opt, path), cases[c].want);
        if (cases[c].want == TFM_OK) {
            ck_assert_int_eq(tfm_optimizer_step_count(opt), cases[c].step);
            continue;
        }
        char text[96];
        snprintf(text, sizeof text, "holds the step count %lld, outside [0, 2^53]",
                 (long long)cases[c].step);
        expect_error(TFM_ERR_FORMAT, text);
        ck_assert_int_eq(tfm_optimizer_step_count(opt), 0); /* the refusals come first */
    }
    tfm_optimizer_free(opt);
    tfm_params_free(p);
}
END_TEST

START_TEST(optimizer_load_keeps_the_first_cause)
{
    tfm_params *p = seeded_params(1.0f);
    tfm_optimizer *opt = adam_over(p);
    const char *path = at("adam.safetensors");
    ck_assert_int_eq(tfm_optimizer_save(opt, path), TFM_OK);
    /* "step" as one int32 instead of two: a shape problem, said as such */
    forge_step(path, 5, 1);
    tfm_clear_error();
    ck_assert_int_eq(tfm_optimizer_load(opt, path), TFM_ERR_FORMAT);
    expect_error(TFM_ERR_FORMAT, "\"step\" must be a 1-D integer tensor of 2 values");
    /* an I64 "step" beyond int32: the range error is the cause, not "no step" */
    int64_t big[2] = {(int64_t)1 << 40, 0};
    unsigned char data[16];
    for (int i = 0; i < 16; i++)
        data[i] = (unsigned char)((uint64_t)big[i / 8] >> (8 * (i % 8)));
    ck_assert_int_eq(tfm_optimizer_save(opt, path), TFM_OK);
    tfm_safetensors *f = tfm_safetensors_open(path);
    ck_assert_ptr_nonnull(f);
    tfm_tensor *kind = tfm_safetensors_get(f, "kind"), *numel = tfm_safetensors_get(f, "numel");
    tfm_tensor *m = tfm_safetensors_get(f, "m"), *v = tfm_safetensors_get(f, "v");
    tfm_safetensors_close(f);
    char header[512];
    int len = snprintf(header, sizeof header,
                       "{\"kind\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"numel\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[4,12]},"
                       "\"step\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[12,28]},"
                       "\"m\":{\"dtype\":\"F32\",\"shape\":[16],\"data_offsets\":[28,92]},"
                       "\"v\":{\"dtype\":\"F32\",\"shape\":[16],\"data_offsets\":[92,156]}}");
    unsigned char file[8 + 512 + 156] = {0};
    for (int i = 0; i < 8; i++)
        file[i] = (unsigned char)((uint64_t)len >> (8 * i));
    memcpy(file + 8, header, (size_t)len);
    unsigned char *d = file + 8 + len;
    memcpy(d, tfm_tensor_data_i32(kind), 4);
    memcpy(d + 4, tfm_tensor_data_i32(numel), 8);
    memcpy(d + 12, data, 16);
    memcpy(d + 28, tfm_tensor_data_f32(m), 64);
    memcpy(d + 92, tfm_tensor_data_f32(v), 64);
    write_raw(path, file, 8 + (size_t)len + 156);
    tfm_clear_error();
    ck_assert_int_eq(tfm_optimizer_load(opt, path), TFM_ERR_RANGE);
    expect_error(TFM_ERR_RANGE, "tensor \"step\" (I64): element [0] = 1099511627776 does not "
                                "fit int32");
    tfm_tensor_free(kind);
    tfm_tensor_free(numel);
    tfm_tensor_free(m);
    tfm_tensor_free(v);
    tfm_optimizer_free(opt);
    tfm_params_free(p);
}
END_TEST

START_TEST(messages_name_the_call_made)
{
    tfm_params *p = seeded_params(1.0f);
    tfm_optimizer *opt = adam_over(p);
    tfm_clear_error();
    ck_assert_int_eq(tfm_optimizer_load(opt, at("absent")), TFM_ERR_IO);
    expect_error(TFM_ERR_IO, "tfm_optimizer_load: \"");
    expect_error(TFM_ERR_IO, "absent\": cannot open: No such file or directory");
    tfm_clear_error();
    ck_assert_int_eq(tfm_optimizer_save(opt, at("missing/adam")), TFM_ERR_IO);
    expect_error(TFM_ERR_IO, "tfm_optimizer_save: cannot create");
    tfm_optimizer_free(opt);
    tfm_params_free(p);
}
END_TEST

/* --- temporaries ------------------------------------------------------------------- */

/* The PID of a process that has exited and been reaped. */
static pid_t dead_pid(void)
{
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(child, NULL, 0), child);
    return child;
}

START_TEST(stale_temporaries_of_dead_writers_are_removed)
{
    pid_t dead = dead_pid(), live = fork();
    ck_assert_int_ge(live, 0);
    if (live == 0) {
        pause();
        _exit(0);
    }
    char names[7][96];
    snprintf(names[0], 96, ".model.tfm-tmp.%d.0", (int)dead);        /* removed */
    snprintf(names[1], 96, ".model.tfm-tmp.%d.17", (int)dead);       /* removed */
    snprintf(names[2], 96, ".model.tfm-tmp.%d.0", (int)live);        /* a live writer's */
    snprintf(names[3], 96, ".model.tfm-tmp.%d.0", (int)getpid());    /* this process's */
    snprintf(names[4], 96, ".other.tfm-tmp.%d.0", (int)dead);        /* another target's */
    snprintf(names[5], 96, ".model.tfm-tmp.%d.0x", (int)dead);       /* not the pattern */
    snprintf(names[6], 96, ".model.tfm-tmp.%d", (int)dead);          /* not the pattern */
    for (int i = 0; i < 7; i++)
        write_raw(at(names[i]), "junk", 4);
    tfm_params *p = seeded_params(4.0f);
    ck_assert_int_eq(tfm_params_save(p, at("model")), TFM_OK);
    for (int i = 0; i < 7; i++)
        ck_assert_msg((access(at(names[i]), F_OK) == 0) == (i >= 2), "%s", names[i]);
    ck_assert_int_eq(folder_entries(folder), 6);
    kill(live, SIGKILL);
    waitpid(live, NULL, 0);
    ck_assert_int_eq(tfm_params_load(p, at("model")), TFM_OK);
    tfm_params_free(p);
}
END_TEST

START_TEST(long_names_save_and_load)
{
    char name[256];
    memset(name, 'n', 250);
    strcpy(name + 250, ".st");
    tfm_params *p = seeded_params(5.0f), *q = seeded_params(0.0f);
    ck_assert_int_eq(tfm_params_save(p, at(name)), TFM_OK);
    ck_assert_int_eq(tfm_params_load(q, at(name)), TFM_OK);
    ck_assert_mem_eq(tfm_params_values(q), tfm_params_values(p), 16 * sizeof(float));
    ck_assert_int_eq(folder_entries(folder), 1);
    tfm_params_free(p);
    tfm_params_free(q);
}
END_TEST

static Suite *files_suite(void)
{
    Suite *s = suite_create("files");
    TCase *tc = tcase_create("files");
    tcase_add_checked_fixture(tc, make_folder, drop_folder);
    tcase_add_test(tc, loading_from_a_fifo_does_not_block);
    tcase_add_test(tc, loading_a_folder_or_device_is_refused);
    tcase_add_test(tc, saves_never_replace_what_is_not_a_regular_file);
    tcase_add_test(tc, junk_headers_are_refused_at_their_first_byte);
    tcase_add_test(tc, dense_headers_are_refused_in_bounded_memory);
    tcase_add_test(tc, header_objects_are_parsed_in_bounded_memory);
    tcase_add_test(tc, the_densest_valid_headers_still_open);
    tcase_add_test(tc, forged_step_counts_are_refused);
    tcase_add_test(tc, optimizer_load_keeps_the_first_cause);
    tcase_add_test(tc, messages_name_the_call_made);
    tcase_add_test(tc, stale_temporaries_of_dead_writers_are_removed);
    tcase_add_test(tc, long_names_save_and_load);
    suite_add_tcase(s, tc);
    return s;
}

TFM_CHECK_MAIN(files_suite)
