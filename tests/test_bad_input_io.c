/* Bad calls to io.h (lib/io): safetensors files written and read with bad
 * names, metadata and paths, loads of files of another kind or shape, load
 * options and reports. The fixture, the table's macros and the run are
 * bad_input.h's. */
#include "bad_input.h"
#include "check_main.h"

/* --- calls that need state or options of their own ------------------------------- */

static tfm_status write_named(const char *name)
{
    char path[160];
    snprintf(path, sizeof path, "%s/named.safetensors", fx.dir);
    return save_one(path, name, fx.f23);
}

static tfm_status write_pair(const char *a, const tfm_tensor *ta, const char *b,
                             const tfm_tensor *tb)
{
    char path[160];
    snprintf(path, sizeof path, "%s/pair.safetensors", fx.dir);
    return tfm_safetensors_write(path, 2, (const char *const[]){a, b},
                                 (const tfm_tensor *const[]){ta, tb});
}

static tfm_tensor *get_from(const char *path, const char *name)
{
    tfm_safetensors *file = tfm_safetensors_open(path);
    tfm_tensor *t = tfm_safetensors_get(file, name);
    tfm_safetensors_close(file);
    return t;
}

static const char *name_from(const char *path, int64_t index)
{
    tfm_safetensors *file = tfm_safetensors_open(path);
    const char *name = tfm_safetensors_name(file, index);
    tfm_safetensors_close(file);
    return name;
}

static tfm_status load_small_from(const char *path, const int64_t *shape)
{
    tfm_params *params = tfm_params_create();
    tfm_params_add(params, "w", 2, shape);
    tfm_status s = tfm_params_load(params, path);
    tfm_params_free(params);
    return s;
}

static tfm_status load_with(const char *path, int field)
{
    tfm_load_options o;
    tfm_load_options_init(&o);
    if (field == 0)
        o.struct_size = 0;
    else if (field == 1)
        o.check_finite = 1;
    else if (field == 2)
        o.strip_prefix = "x.";
    tfm_load_report *report = NULL;
    tfm_status s = tfm_params_load_with(fx.small, path, &o, &report);
    tfm_load_report_free(report);
    return s;
}

/* A report of a good load, asked a bad question. */
static int64_t report_count(tfm_load_outcome outcome, int64_t index, const char **name)
{
    tfm_load_report *report = NULL;
    ck_assert_int_eq(tfm_params_load_with(fx.small, fx.small_path, NULL, &report), TFM_OK);
    tfm_clear_error();
    int64_t count = name ? 0 : tfm_load_report_count(report, outcome);
    if (name)
        *name = tfm_load_report_name(report, outcome, index);
    tfm_load_report_free(report);
    return count;
}

static const char *report_name(tfm_load_outcome outcome, int64_t index)
{
    const char *name = "";
    report_count(outcome, index, &name);
    return name;
}

static tfm_status write_metadata(int64_t count, const char *key, const char *value)
{
    char path[160];
    snprintf(path, sizeof path, "%s/metadata.safetensors", fx.dir);
    const char *keys[2] = {key, key}, *values[2] = {value, value};
    return tfm_safetensors_write_with_metadata(path, 1, (const char *const[]){"w"},
                                               (const tfm_tensor *const[]){fx.f23}, count,
                                               key || count == 0 ? keys : NULL, values);
}

static const char *metadata_of(const char *path, int64_t index, const char *key)
{
    tfm_safetensors *file = tfm_safetensors_open(path);
    const char *out = key ? tfm_safetensors_metadata_get(file, key)
                          : tfm_safetensors_metadata_key(file, index);
    tfm_safetensors_close(file);
    return out;
}

/* --- the table ------------------------------------------------------------------------ */

static int bad_calls(int index, bad_case *c)
{
    int n = 0;
    fixture *f = &fx;

    /* io.h */
    NUL(tfm_safetensors_open, E_NULL, tfm_safetensors_open(NULL));
    NUL(tfm_safetensors_open, E_IO, tfm_safetensors_open(""));
    NUL(tfm_safetensors_open, E_IO, tfm_safetensors_open(f->missing_path));
    NUL(tfm_safetensors_open, E_IO, tfm_safetensors_open(f->missing_dir_path));
    NUL(tfm_safetensors_open, E_IO, tfm_safetensors_open(f->folder_path));
    NUL(tfm_safetensors_open, E_FORMAT, tfm_safetensors_open(f->empty_path));
    NUL(tfm_safetensors_open, E_FORMAT, tfm_safetensors_open(f->text_path));
    NEG(tfm_safetensors_count, E_NULL, tfm_safetensors_count(NULL));
    NUL(tfm_safetensors_name, E_NULL, tfm_safetensors_name(NULL, 0));
    NUL(tfm_safetensors_name, E_RANGE, name_from(f->small_path, 1));
    NUL(tfm_safetensors_name, E_RANGE, name_from(f->small_path, -1));
    NUL(tfm_safetensors_get, E_NULL, tfm_safetensors_get(NULL, "w"));
    NUL(tfm_safetensors_get, E_NULL, get_from(f->small_path, NULL));
    NUL(tfm_safetensors_get, E_ARG, get_from(f->small_path, "v"));
    NUL(tfm_safetensors_get, E_ARG, get_from(f->small_path, ""));
    ST(tfm_safetensors_write, E_NULL, tfm_safetensors_write(NULL, 0, NULL, NULL));
    ST(tfm_safetensors_write, E_ARG, tfm_safetensors_write(f->missing_path, -1, NULL, NULL));
    ST(tfm_safetensors_write, E_NULL,
        tfm_safetensors_write(f->missing_path, 1, NULL, (const tfm_tensor *const[]){f->f1}));
    ST(tfm_safetensors_write, E_NULL,
        tfm_safetensors_write(f->missing_path, 1, (const char *const[]){"a"}, NULL));
    ST(tfm_safetensors_write, E_NULL, write_named(NULL));
    ST(tfm_safetensors_write, E_NULL, write_pair("a", f->f1, "b", NULL));
    ST(tfm_safetensors_write, E_ARG, write_named(""));
    ST(tfm_safetensors_write, E_ARG, write_named("__metadata__"));
    ST(tfm_safetensors_write, E_ARG, write_named("bad \xff utf-8"));
    ST(tfm_safetensors_write, E_ARG, write_named("\xc3"));
    ST(tfm_safetensors_write, E_ARG, write_pair("same", f->f1, "same", f->f23));
    ST(tfm_safetensors_write, E_ARG, save_one("", "a", f->f1));
    ST(tfm_safetensors_write, E_IO, save_one(f->missing_dir_path, "a", f->f1));
    ST(tfm_safetensors_write, E_IO, save_one(f->folder_path, "a", f->f1));
    ST(tfm_params_save, E_NULL, tfm_params_save(NULL, f->small_path));
    ST(tfm_params_save, E_NULL, tfm_params_save(f->small, NULL));
    ST(tfm_params_save, E_ARG, tfm_params_save(f->small, ""));
    ST(tfm_params_save, E_IO, tfm_params_save(f->small, f->missing_dir_path));
    ST(tfm_params_save, E_IO, tfm_params_save(f->small, f->folder_path));
    ST(tfm_params_load, E_NULL, tfm_params_load(NULL, f->small_path));
    ST(tfm_params_load, E_NULL, tfm_params_load(f->small, NULL));
    ST(tfm_params_load, E_IO, tfm_params_load(f->small, ""));
    ST(tfm_params_load, E_IO, tfm_params_load(f->small, f->missing_path));
    ST(tfm_params_load, E_IO, tfm_params_load(f->small, f->folder_path));
    ST(tfm_params_load, E_FORMAT, tfm_params_load(f->small, f->empty_path));
    ST(tfm_params_load, E_FORMAT, tfm_params_load(f->small, f->text_path));
    ST(tfm_params_load, E_FORMAT, tfm_params_load(f->params, f->small_path));
    ST(tfm_params_load, E_FORMAT, tfm_params_load(f->small, f->small_extra_path));
    ST(tfm_params_load, E_FORMAT, tfm_params_load(f->small, f->adam_path));
    ST(tfm_params_load, E_SHAPE, load_small_from(f->small_path, SHAPE(3, 2)));
    ST(tfm_params_load, E_SHAPE, load_small_from(f->small_other_path, SHAPE(2, 3)));
    ST(tfm_params_load, E_DTYPE, load_small_from(f->small_int_path, SHAPE(2, 3)));
    NEG(tfm_safetensors_metadata_count, E_NULL, tfm_safetensors_metadata_count(NULL));
    NUL(tfm_safetensors_metadata_key, E_NULL, tfm_safetensors_metadata_key(NULL, 0));
    NUL(tfm_safetensors_metadata_key, E_RANGE, metadata_of(f->model_path, -1, NULL));
    NUL(tfm_safetensors_metadata_key, E_RANGE, metadata_of(f->small_path, 0, NULL));
    NUL(tfm_safetensors_metadata_get, E_NULL, tfm_safetensors_metadata_get(NULL, "k"));
    NUL(tfm_safetensors_metadata_get, E_ARG, metadata_of(f->model_path, 0, "no.such.key"));
    ST(tfm_safetensors_write_with_metadata, E_ARG, write_metadata(-1, "k", "v"));
    ST(tfm_safetensors_write_with_metadata, E_NULL, write_metadata(1, NULL, "v"));
    ST(tfm_safetensors_write_with_metadata, E_NULL, write_metadata(1, "k", NULL));
    ST(tfm_safetensors_write_with_metadata, E_ARG, write_metadata(1, "", "v"));
    ST(tfm_safetensors_write_with_metadata, E_ARG, write_metadata(2, "twice", "v"));
    ST(tfm_safetensors_write_with_metadata, E_ARG, write_metadata(1, "bad \xff", "v"));
    ST(tfm_safetensors_write_with_metadata, E_ARG, write_metadata(1, "k", "bad \xfe"));
    ST(tfm_params_load_with, E_NULL, tfm_params_load_with(NULL, f->small_path, NULL, NULL));
    ST(tfm_params_load_with, E_NULL, tfm_params_load_with(f->small, NULL, NULL, NULL));
    ST(tfm_params_load_with, E_IO, tfm_params_load_with(f->small, f->missing_path, NULL, NULL));
    ST(tfm_params_load_with, E_ARG, load_with(f->small_path, 0));
    ST(tfm_params_load_with, E_NUMERIC, load_with(f->nan_path, 1));
    ST(tfm_params_load_with, E_FORMAT, load_with(f->prefixed_path, 2));
    ST(tfm_params_load_with, E_SHAPE, load_with(f->small_other_path, 3));
    NEG(tfm_load_report_count, E_NULL, tfm_load_report_count(NULL, TFM_LOAD_LOADED));
    NEG(tfm_load_report_count, E_ARG, report_count(3, 0, NULL));
    NEG(tfm_load_report_count, E_ARG, report_count(-1, 0, NULL));
    NUL(tfm_load_report_name, E_NULL, tfm_load_report_name(NULL, TFM_LOAD_LOADED, 0));
    NUL(tfm_load_report_name, E_RANGE, report_name(TFM_LOAD_LOADED, 1));
    NUL(tfm_load_report_name, E_RANGE, report_name(TFM_LOAD_SKIPPED, 0));
    NUL(tfm_load_report_name, E_RANGE, report_name(TFM_LOAD_LOADED, -1));
    return -1;
}

/* Frees and options-inits of NULL, which must record no error. */
static void free_nulls(void)
{
    tfm_safetensors_close(NULL);
    tfm_load_options_init_sized(NULL, sizeof(tfm_load_options));
    tfm_load_report_free(NULL);
}

static Suite *suite(void)
{
    return bad_input_suite("bad_input_io", bad_calls, 74, free_nulls);
}

TFM_CHECK_MAIN(suite)
