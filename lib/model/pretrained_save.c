/* A published model saved back as transformers' save_pretrained lays out
 * its family's folder (families.h has the names both ways): config.json
 * and generation_config.json as they were read (the architecture and the
 * decoding defaults do not change after loading), model.safetensors with
 * the published names (tied copies left out, as transformers leaves
 * them out) or shards past a size with model.safetensors.index.json, and
 * the tokenizer files as loaded. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfm/adapters.h"
#include "core/error.h"
#include "core/params.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "model/families.h"
#include "model/model.h"

#define PATH_BYTES 4096
#define NAME_BYTES 256
/* transformers' max_shard_size default, "5GB" */
#define DEFAULT_SHARD_BYTES ((int64_t)5000000000)

typedef struct saver {
    const char *op;
    char ctx[PATH_BYTES + 64];
    const char *folder; /* where files go: the final folder, or a new one's temporary */
    int64_t count;      /* tensors written */
    char (*names)[NAME_BYTES];
    const tfm_tensor **tensors;
    int32_t *shard;     /* per tensor: its shard (0-based) */
    int32_t n_shards;
    tfm_tensor *logits_bias; /* final_logits_bias as [1, V] */
} saver;

static int all_zero(const tfm_tensor *t)
{
    const float *v = tfm__f32(t);
    for (int64_t i = 0; i < t->numel; i++)
        if (v[i] != 0.0f)
            return 0;
    return 1;
}

/* The published tensors: every parameter under its family's name, except
 * what transformers ties (lm_head to the shared table) or computes
 * (sinusoidal tables are no parameters here). */
static int gather(saver *s, const tfm_model *m)
{
    const tfm__published *p = m->published;
    tfm__family_layout layout = tfm__published_layout(p);
    int64_t n = tfm_params_count(m->params);
    s->names = calloc((size_t)n + 1, sizeof *s->names);
    s->tensors = calloc((size_t)n + 1, sizeof *s->tensors);
    s->shard = calloc((size_t)n + 1, sizeof *s->shard);
    if (!s->names || !s->tensors || !s->shard) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", s->ctx);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        const char *ours = tfm_params_name(m->params, i);
        const tfm_tensor *t = tfm_params_at(m->params, i);
        if (strcmp(ours, "generator.weight") == 0 && m->options.tie_generator)
            continue;
        if (strcmp(ours, "generator.bias") == 0) {
            if (!tfm__families[p->family]->logits_bias) {
                /* loading made it zeros */
                if (!all_zero(t)) {
                    tfm__fail(TFM_ERR_STATE, "%s: generator.bias is not zero, but a %s "
                              "model's lm_head has no bias to hold it", s->ctx,
                              tfm__families[p->family]->model_type);
                    return -1;
                }
                continue;
            }
            int64_t shape[2] = {1, t->numel};
            if (!(s->logits_bias = tfm_tensor_from_f32(2, shape, tfm__f32(t)))) {
                tfm__fail_because(tfm_last_status(), "%s: out of memory", s->ctx);
                return -1;
            }
            t = s->logits_bias;
        }
        if (tfm__published_name(&layout, m, ours, s->names[s->count], NAME_BYTES) < 0) {
            tfm__fail(TFM_ERR_STATE, "%s: libtfm's parameter %s has no name in a %s model's "
                      "files", s->ctx, ours, tfm__families[p->family]->model_type);
            return -1;
        }
        s->tensors[s->count++] = t;
    }
    return 0;
}

/* Tensors in order into shards of at most max_bytes (a larger tensor
 * alone), as transformers' shard_checkpoint does. */
static void assign_shards(saver *s, int64_t max_bytes)
{
    int64_t used = 0;
    s->n_shards = s->count > 0 ? 1 : 0;
    for (int64_t i = 0; i < s->count; i++) {
        int64_t bytes = s->tensors[i]->numel * (int64_t)sizeof(float);
        if (used > 0 && used + bytes > max_bytes) {
            s->n_shards++;
            used = 0;
        }
        used += bytes;
        s->shard[i] = s->n_shards - 1;
    }
}

static void shard_name(const saver *s, int32_t shard, char *out, size_t size)
{
    if (s->n_shards <= 1)
        snprintf(out, size, "model.safetensors");
    else
        snprintf(out, size, "model-%05d-of-%05d.safetensors", shard + 1, s->n_shards);
}

static int write_text(saver *s, const char *name, const char *text, size_t size)
{
    char path[PATH_BYTES];
    return tfm__in_folder(s->ctx, s->folder, name, path, sizeof path) < 0 ||
                   tfm__save_bytes_atomically(s->op, path, text, size) != TFM_OK
               ? -1
               : 0;
}

static int write_shards(saver *s)
{
    static const char *const keys[] = {"format"}, *const values[] = {"pt"};
    const char **names = calloc((size_t)s->count + 1, sizeof *names);
    const tfm_tensor **tensors = calloc((size_t)s->count + 1, sizeof *tensors);
    int status = names && tensors ? 0 : -1;
    if (status < 0)
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", s->ctx);
    for (int32_t shard = 0; status == 0 && shard < s->n_shards; shard++) {
        int64_t n = 0;
        for (int64_t i = 0; i < s->count; i++)
            if (s->shard[i] == shard) {
                names[n] = s->names[i];
                tensors[n++] = s->tensors[i];
            }
        char file[64], path[PATH_BYTES];
        shard_name(s, shard, file, sizeof file);
        status = tfm__in_folder(s->ctx, s->folder, file, path, sizeof path) < 0 ||
                         tfm__safetensors_write(s->op, path, n, names, tensors, 1, keys,
                                                values) != TFM_OK
                     ? -1
                     : 0;
    }
    free(names);
    free(tensors);
    return status;
}

/* model.safetensors.index.json: the total size and where each tensor is,
 * names sorted as transformers writes them. */
static int name_order(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int write_index(saver *s)
{
    const char **sorted = calloc((size_t)s->count + 1, sizeof *sorted);
    size_t cap = 128 + (size_t)s->count * (NAME_BYTES + 64);
    char *text = malloc(cap);
    int status = -1;
    if (!sorted || !text) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", s->ctx);
        goto done;
    }
    int64_t total = 0;
    for (int64_t i = 0; i < s->count; i++) {
        sorted[i] = s->names[i];
        total += s->tensors[i]->numel * (int64_t)sizeof(float);
    }
    qsort(sorted, (size_t)s->count, sizeof *sorted, name_order);
    size_t len = (size_t)snprintf(text, cap, "{\n  \"metadata\": {\n    \"total_size\": %lld\n  },\n"
                                  "  \"weight_map\": {\n", (long long)total);
    for (int64_t i = 0; i < s->count; i++) {
        int64_t at = (sorted[i] - s->names[0]) / NAME_BYTES; /* its tensor */
        char file[64];
        shard_name(s, s->shard[at], file, sizeof file);
        len += (size_t)snprintf(text + len, cap - len, "    \"%s\": \"%s\"%s\n", sorted[i], file,
                                i + 1 < s->count ? "," : "");
    }
    len += (size_t)snprintf(text + len, cap - len, "  }\n}\n");
    status = write_text(s, "model.safetensors.index.json", text, len);
done:
    free(sorted);
    free(text);
    return status;
}

/* Removes folder/name when it is there: 0, or -1 with the error set. */
static int remove_file(saver *s, const char *folder, const char *name)
{
    char path[PATH_BYTES];
    if (tfm__in_folder(s->ctx, folder, name, path, sizeof path) < 0)
        return -1;
    if (unlink(path) != 0 && errno != ENOENT) {
        tfm__fail(TFM_ERR_IO, "%s: cannot remove the earlier %s: %s", s->ctx, name,
                  strerror(errno));
        return -1;
    }
    return 0;
}

static int is_shard_name(const char *name)
{
    int a, b, end = 0;
    return sscanf(name, "model-%5d-of-%5d.safetensors%n", &a, &b, &end) == 2 &&
           name[end] == 0 && strlen(name) == 32;
}

/* In a folder saved over: the files of the other layout (a single file
 * where shards now go, an index and shards where one file goes, shards of
 * another count), which the loader would otherwise read instead. */
static int remove_stale_tensors(saver *s)
{
    if (s->n_shards > 1 ? remove_file(s, s->folder, "model.safetensors") < 0
                        : remove_file(s, s->folder, "model.safetensors.index.json") < 0)
        return -1;
    DIR *dir = opendir(s->folder);
    if (!dir) {
        tfm__fail(TFM_ERR_IO, "%s: cannot list the folder: %s", s->ctx, strerror(errno));
        return -1;
    }
    int status = 0;
    struct dirent *e;
    while (status == 0 && (e = readdir(dir))) {
        if (!is_shard_name(e->d_name))
            continue;
        int keep = 0;
        for (int32_t shard = 0; shard < s->n_shards && !keep; shard++) {
            char file[64];
            shard_name(s, shard, file, sizeof file);
            keep = s->n_shards > 1 && strcmp(file, e->d_name) == 0;
        }
        if (!keep)
            status = remove_file(s, s->folder, e->d_name);
    }
    closedir(dir);
    return status;
}

/* Everything but config.json, which goes last: a folder whose save
 * failed has none, so no reader takes it for a whole model. */
static int write_files(saver *s, const tfm_model *m, int existing)
{
    const tfm__published *p = m->published;
    if (existing && (remove_file(s, s->folder, "config.json") < 0 || remove_stale_tensors(s) < 0))
        return -1;
    if (write_shards(s) < 0 || (s->n_shards > 1 && write_index(s) < 0))
        return -1;
    if (p->generation && write_text(s, "generation_config.json", p->generation,
                                    strlen(p->generation)) < 0)
        return -1;
    for (int32_t i = 0; i < p->n_files; i++)
        if (write_text(s, p->file_names[i], p->file_bytes[i], p->file_sizes[i]) < 0)
            return -1;
    return write_text(s, "config.json", p->config, strlen(p->config));
}

/* A new folder's temporary beside it, emptied and removed after a failed
 * save (errors there are not the caller's: the save's own is kept). */
static void remove_temporary(const char *folder)
{
    DIR *dir = opendir(folder);
    if (dir) {
        struct dirent *e;
        char path[PATH_BYTES];
        while ((e = readdir(dir)))
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
                (size_t)snprintf(path, sizeof path, "%s/%s", folder, e->d_name) < sizeof path)
                unlink(path);
        closedir(dir);
    }
    rmdir(folder);
}

static tfm_status refuse(saver *s, const tfm_model *m)
{
    const tfm__published *p = m->published;
    if (!p)
        return tfm__fail(TFM_ERR_STATE, "%s: the model was not loaded from a published folder "
                         "(tfm_model_from_pretrained), so it has no family's layout to be "
                         "saved in: tfm_model_save() writes libtfm's own file", s->ctx);
    if (m->quantized)
        return tfm__fail(TFM_ERR_STATE, "%s: the model is quantized to int8, which a %s "
                         "folder cannot hold (save the float32 model before "
                         "tfm_model_quantize())", s->ctx, tfm__families[p->family]->model_type);
    if (m->in_use)
        return tfm__fail(TFM_ERR_STATE, "%s: the model's forwards apply adapter \"%s\", whose "
                         "terms are not in the weights a %s folder holds: merge it "
                         "(tfm_model_merge_adapter), save it apart (tfm_model_save_adapter), "
                         "or stop using it (tfm_model_use_adapter NULL) to save the base",
                         s->ctx, tfm_model_adapter_in_use(m), tfm__families[p->family]->model_type);
    if (p->tokenizers_replaced)
        return tfm__fail(TFM_ERR_STATE, "%s: the model's tokenizers were replaced "
                         "(tfm_model_set_tokenizers) since loading, and libtfm writes a %s "
                         "folder's tokenizer files only as it read them", s->ctx,
                         tfm__families[p->family]->model_type);
    return TFM_OK;
}

tfm_status tfm_model_save_pretrained(const tfm_model *model, const char *folder,
                                     int64_t max_shard_bytes)
{
    saver s = {.op = "tfm_model_save_pretrained"};
    if (!model || !folder)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", s.op, model ? "folder" : "model");
    snprintf(s.ctx, sizeof s.ctx, "%s: \"%s\"", s.op, folder);
    if (max_shard_bytes < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: max_shard_bytes is %lld (0 for transformers' 5 GB)",
                         s.ctx, (long long)max_shard_bytes);
    if (!*folder || strlen(folder) > PATH_BYTES - 64)
        return tfm__fail(TFM_ERR_ARG, "%s: the folder's path is %s", s.ctx,
                         *folder ? "too long" : "empty");
    if (refuse(&s, model) != TFM_OK)
        return tfm_last_status();
    /* "new/" names the folder "new": its temporary goes beside it, not in it */
    char trimmed[PATH_BYTES - 63]; /* the length was checked */
    size_t length = strlen(folder);
    while (length > 1 && folder[length - 1] == '/')
        length--;
    memcpy(trimmed, folder, length);
    trimmed[length] = 0;
    folder = trimmed;
    struct stat st;
    int existing = stat(folder, &st) == 0;
    if (existing && !S_ISDIR(st.st_mode))
        return tfm__fail(TFM_ERR_IO, "%s: something other than a folder is there", s.ctx);
    if (!existing && errno != ENOENT)
        return tfm__fail(TFM_ERR_IO, "%s: %s", s.ctx, strerror(errno));
    char temporary[PATH_BYTES];
    int status = gather(&s, model);
    if (status == 0) {
        assign_shards(&s, max_shard_bytes ? max_shard_bytes : DEFAULT_SHARD_BYTES);
        if (existing) {
            s.folder = folder;
            status = write_files(&s, model, 1);
        } else {
            /* a new folder appears whole or not at all */
            snprintf(temporary, sizeof temporary, "%s.partial-XXXXXX", folder);
            if (!mkdtemp(temporary)) {
                tfm__fail(TFM_ERR_IO, "%s: cannot make the folder: %s", s.ctx, strerror(errno));
                status = -1;
            } else {
                s.folder = temporary;
                status = write_files(&s, model, 0) < 0 || chmod(temporary, 0755) != 0 ? -1 : 0;
                if (status == 0 && rename(temporary, folder) != 0) {
                    tfm__fail(TFM_ERR_IO, "%s: cannot rename the saved folder into place: %s",
                              s.ctx, strerror(errno));
                    status = -1;
                }
                if (status < 0)
                    remove_temporary(temporary);
            }
        }
    }
    if (status == 0) {
        char parent[PATH_BYTES];
        snprintf(parent, sizeof parent, "%s", folder);
        char *slash = strrchr(parent, '/');
        if (slash == parent)
            slash[1] = 0;
        else if (slash)
            *slash = 0;
        else
            snprintf(parent, sizeof parent, ".");
        status = tfm__sync_folder(s.op, folder, existing ? folder : parent) == TFM_OK ? 0 : -1;
    }
    free(s.names);
    free(s.tensors);
    free(s.shard);
    tfm_tensor_free(s.logits_bias);
    return status == 0 ? TFM_OK : tfm_last_status();
}
