/* Parameter stores saved and loaded by name: strict by default, or with a
 * prefix stripped, unexpected tensors skipped and missing ones allowed, and
 * a report of what happened. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/options.h"
#include "core/params.h"
#include "core/tensor.h"
#include "io/load.h"

struct tfm_load_report {
    char **names[3];          /* per tfm_load_outcome */
    int64_t counts[3];
};

void tfm_load_options_init_sized(tfm_load_options *o, uint32_t struct_size)
{
    tfm_load_options d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    tfm__init_options(o, struct_size, &d, sizeof d);
}

tfm_status tfm_params_save(const tfm_params *params, const char *path)
{
    const char *op = "tfm_params_save";
    if (!params)
        return tfm__fail(TFM_ERR_NULL, "%s: params is NULL", op);
    int64_t count = tfm_params_count(params);
    const char **names = malloc((size_t)(count ? count : 1) * sizeof *names);
    const tfm_tensor **tensors = malloc((size_t)(count ? count : 1) * sizeof *tensors);
    tfm_status s = TFM_OK;
    if (!names || !tensors) {
        s = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
    } else {
        for (int64_t i = 0; i < count; i++) {
            names[i] = tfm_params_name(params, i);
            tensors[i] = tfm_params_at(params, i);
        }
        s = tfm__safetensors_write(op, path, count, names, tensors, 0, NULL, NULL);
    }
    free(names);
    free(tensors);
    return s;
}

/* --- the report -------------------------------------------------------------- */

void tfm_load_report_free(tfm_load_report *r)
{
    if (!r)
        return;
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < r->counts[k]; i++)
            free(r->names[k][i]);
        free(r->names[k]);
    }
    free(r);
}

/* Room for capacity names of each outcome; NULL with the error set. */
static tfm_load_report *report_create(const char *op, int64_t capacity)
{
    tfm_load_report *r = calloc(1, sizeof *r);
    for (int k = 0; r && k < 3; k++)
        if (!(r->names[k] = calloc((size_t)capacity + 1, sizeof(char *)))) {
            tfm_load_report_free(r);
            r = NULL;
        }
    if (!r)
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the load report", op);
    return r;
}

static int report_add(const char *op, tfm_load_report *r, tfm_load_outcome outcome,
                      const char *name)
{
    size_t len = strlen(name);
    char *copy = malloc(len + 1);
    if (!copy) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the load report", op);
        return -1;
    }
    r->names[outcome][r->counts[outcome]++] = memcpy(copy, name, len + 1);
    return 0;
}

static int check_outcome(const char *op, const tfm_load_report *r, tfm_load_outcome outcome)
{
    if (!r) {
        tfm__fail(TFM_ERR_NULL, "%s: report is NULL", op);
        return -1;
    }
    if (outcome < TFM_LOAD_LOADED || outcome > TFM_LOAD_MISSING) {
        tfm__fail(TFM_ERR_ARG, "%s: outcome %d is not LOADED (0), SKIPPED (1) or "
                  "MISSING (2)", op, (int)outcome);
        return -1;
    }
    return 0;
}

int64_t tfm_load_report_count(const tfm_load_report *r, tfm_load_outcome outcome)
{
    return check_outcome("tfm_load_report_count", r, outcome) < 0 ? -1 : r->counts[outcome];
}

const char *tfm_load_report_name(const tfm_load_report *r, tfm_load_outcome outcome,
                                 int64_t index)
{
    const char *op = "tfm_load_report_name";
    if (check_outcome(op, r, outcome) < 0)
        return NULL;
    if (index < 0 || index >= r->counts[outcome]) {
        tfm__fail(TFM_ERR_RANGE, "%s: index %lld is outside [0, %lld)", op, (long long)index,
                  (long long)r->counts[outcome]);
        return NULL;
    }
    return r->names[outcome][index];
}

/* --- matching ------------------------------------------------------------------ */

void tfm__load_match_free(tfm__load_match *m)
{
    free(m->entry_of);
    tfm_load_report_free(m->report);
    m->entry_of = NULL;
    m->report = NULL;
}

static int starts_with(const char *s, const char *prefix)
{
    return prefix && *prefix && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Finds the parameter the file's tensor `index` fills and checks it fits. */
static tfm_status match_one(const char *op, const char *path, const tfm_params *params,
                            const tfm_safetensors *file, const tfm_load_options *o,
                            int64_t index, tfm__load_match *m)
{
    tfm__tensor_info info;
    tfm__safetensors_info(file, index, &info);
    const char *name = info.name;
    if (starts_with(name, o->strip_prefix))
        name += strlen(o->strip_prefix);
    int64_t p = tfm__params_index_of(params, name);
    if (p < 0) {
        if (o->allow_unexpected)
            return report_add(op, m->report, TFM_LOAD_SKIPPED, info.name) < 0
                       ? TFM_ERR_NOMEM : TFM_OK;
        return tfm__fail(TFM_ERR_FORMAT, "%s: \"%s\" holds tensor \"%s\", which is no "
                         "parameter (allow_unexpected skips such tensors)", op, path,
                         info.name);
    }
    if (m->entry_of[p] >= 0) {
        tfm__tensor_info other;
        tfm__safetensors_info(file, m->entry_of[p], &other);
        return tfm__fail(TFM_ERR_FORMAT, "%s: \"%s\": tensors \"%s\" and \"%s\" both name "
                         "parameter \"%s\" once \"%s\" is stripped", op, path, other.name,
                         info.name, name, o->strip_prefix ? o->strip_prefix : "");
    }
    const tfm_tensor *t = tfm_params_at(params, p);
    char a[96], b[96];
    if (!info.is_float)
        return tfm__fail(TFM_ERR_DTYPE, "%s: \"%s\": tensor \"%s\" is %s; parameters are "
                         "float32", op, path, info.name, info.dtype_name);
    if (info.ndim != t->ndim ||
        memcmp(info.shape, t->shape, (size_t)t->ndim * sizeof t->shape[0]) != 0)
        return tfm__fail(TFM_ERR_SHAPE, "%s: \"%s\": tensor \"%s\" has shape %s; the "
                         "parameter \"%s\" has %s", op, path, info.name,
                         tfm__dims_str(info.shape, info.ndim, a, sizeof a), name,
                         tfm__shape_str(t, b, sizeof b));
    int64_t where;
    if (o->check_finite && !tfm__safetensors_all_finite(file, index, &where))
        return tfm__fail(TFM_ERR_NUMERIC, "%s: \"%s\": tensor \"%s\" holds a NaN or Inf at "
                         "%s", op, path, info.name, tfm__index_str(t, where, a, sizeof a));
    m->entry_of[p] = index;
    return TFM_OK;
}

static tfm_status match_all(const char *op, const char *path, const tfm_params *params,
                            const tfm_safetensors *file, const tfm_load_options *o,
                            const char *reserved, tfm__load_match *m)
{
    int64_t count = tfm_params_count(params), entries = tfm_safetensors_count(file);
    for (int64_t i = 0; i < count; i++)
        m->entry_of[i] = -1;
    for (int64_t i = 0; i < entries; i++) {
        tfm__tensor_info info;
        tfm__safetensors_info(file, i, &info);
        if (starts_with(info.name, reserved))
            continue;
        tfm_status s = match_one(op, path, params, file, o, i, m);
        if (s != TFM_OK)
            return s;
    }
    for (int64_t i = 0; i < count; i++) {
        const char *name = tfm_params_name(params, i);
        if (m->entry_of[i] >= 0) {
            if (report_add(op, m->report, TFM_LOAD_LOADED, name) < 0)
                return TFM_ERR_NOMEM;
        } else if (o->allow_missing) {
            if (report_add(op, m->report, TFM_LOAD_MISSING, name) < 0)
                return TFM_ERR_NOMEM;
        } else {
            return tfm__fail(TFM_ERR_FORMAT, "%s: \"%s\" holds no tensor \"%s%s\" for "
                             "parameter %lld (allow_missing keeps its value)", op, path,
                             o->strip_prefix ? o->strip_prefix : "", name, (long long)i);
        }
    }
    return TFM_OK;
}

tfm_status tfm__load_match_params(const char *op, const char *path, const tfm_params *params,
                                  const tfm_safetensors *file, const tfm_load_options *options,
                                  const char *reserved, tfm__load_match *m)
{
    tfm_load_options o;
    tfm_load_options_init(&o);
    if (options && tfm__read_options(op, "tfm_load_options_init", options, &o, sizeof o,
                                     sizeof o.struct_size) < 0)
        return tfm_last_status();
    int64_t count = tfm_params_count(params), entries = tfm_safetensors_count(file);
    m->entry_of = malloc((size_t)(count + 1) * sizeof *m->entry_of);
    m->report = report_create(op, count > entries ? count : entries);
    if (!m->entry_of || !m->report) {
        tfm__load_match_free(m);
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld parameters", op,
                         (long long)count);
    }
    tfm_status s = match_all(op, path, params, file, &o, reserved, m);
    if (s != TFM_OK)
        tfm__load_match_free(m);
    return s;
}

void tfm__load_apply(tfm_params *params, const tfm_safetensors *file, tfm__load_match *m,
                     tfm_load_report **report)
{
    int64_t count = tfm_params_count(params);
    for (int64_t i = 0; i < count; i++)
        if (m->entry_of[i] >= 0)
            tfm__safetensors_read_f32(file, m->entry_of[i], tfm__f32(tfm_params_at(params, i)));
    if (report) {
        *report = m->report;
        m->report = NULL;
    }
    tfm__load_match_free(m);
}

static tfm_status load(const char *op, tfm_params *params, const char *path,
                       const tfm_load_options *options, tfm_load_report **report)
{
    if (report)
        *report = NULL;
    if (!params)
        return tfm__fail(TFM_ERR_NULL, "%s: params is NULL", op);
    /* new values would leave its int8 weights behind */
    for (int64_t i = 0; i < tfm_params_count(params); i++)
        if (tfm_params_at(params, i)->int8)
            return tfm__fail(TFM_ERR_STATE, "%s: the parameters are a quantized model's "
                             "(tfm_model_quantize), whose int8 weights they would leave behind: "
                             "load into a float32 model, then quantize it", op);
    tfm_safetensors *file = tfm__safetensors_open(op, path);
    if (!file)
        return tfm_last_status();
    /* a training state's optimizer tensors are not parameters */
    const char *state = tfm__safetensors_metadata(file, TFM__STATE_KEY);
    const char *reserved = state && strcmp(state, "training") == 0 ? TFM__RESERVED_TENSOR_PREFIX
                                                                   : NULL;
    tfm__load_match m;
    tfm_status s = tfm__load_match_params(op, path, params, file, options, reserved, &m);
    if (s == TFM_OK)
        tfm__load_apply(params, file, &m, report);
    tfm_safetensors_close(file);
    return s;
}

tfm_status tfm_params_load(tfm_params *params, const char *path)
{
    return load("tfm_params_load", params, path, NULL, NULL);
}

tfm_status tfm_params_load_with(tfm_params *params, const char *path,
                                const tfm_load_options *options, tfm_load_report **report)
{
    return load("tfm_params_load_with", params, path, options, report);
}
