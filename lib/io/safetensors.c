/* safetensors reading (validated whole, converted on get), atomic writing,
 * and parameter stores saved and loaded by name. */
#include "tfm/io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/utf8.h"
#include "core/tensor.h"
#include "io/json.h"
#include "io/safetensors.h"

/* The reference implementation's limit; real headers are kilobytes. The
 * writer keeps to it too, so that no file written is one readers refuse. */
#define MAX_HEADER_BYTES 100000000ull
/* A valid header spends at least 5 bytes per JSON value: the densest are an
 * entry with four one-digit dimensions (58 bytes for 10 values) and a
 * metadata pair `"k":"",` (7 bytes for 1; keys are unique). So the parser
 * is given header / 5 + 2 nodes (24 bytes each, its strings decoded in the
 * header's own buffer): any header, junk included, costs at most about 6
 * bytes of memory per byte (100 MB: 580 MB, where 56-byte nodes and a copy
 * of the strings took 1.2 GB). */
#define MIN_BYTES_PER_VALUE 5
#define READ_CHUNK ((size_t)1 << 30)
#define METADATA_KEY "__metadata__"

/* Float dtypes are read as float32, the others as int32. */
static const struct {
    const char *name;
    int32_t size;
    int32_t is_float;
} dtypes[] = {
    {"F32", 4, 1}, {"I32", 4, 0}, {"F64", 8, 1}, {"F16", 2, 1}, {"BF16", 2, 1},
    {"I64", 8, 0}, {"I16", 2, 0}, {"I8", 1, 0},  {"U8", 1, 0},  {"U16", 2, 0},
    {"U32", 4, 0}, {"U64", 8, 0}, {"BOOL", 1, 0},
};
enum { DT_F32, DT_I32, DT_F64, DT_F16, DT_BF16, DT_I64, DT_I16, DT_I8, DT_U8,
       DT_U16, DT_U32, DT_U64, DT_BOOL, DT_COUNT };

typedef struct entry {
    const char *name;
    int32_t dtype;             /* index into dtypes */
    int32_t ndim;              /* a 0-d scalar is read as shape [1] */
    int64_t shape[TFM_MAX_DIMS];
    int64_t numel;
    int64_t begin, end;        /* bytes of the data section */
} entry;

/* One "__metadata__" pair; both strings live in the file's names buffer. */
typedef struct metadata_pair {
    const char *key, *value;
} metadata_pair;

struct tfm_safetensors {
    entry *entries;            /* sorted by name */
    int64_t count;
    metadata_pair *metadata;   /* sorted by key */
    int64_t metadata_count;
    char *names;               /* tensor names, metadata keys and values */
    unsigned char *data;
    int64_t data_size;
};

/* --- reading: validation ------------------------------------------------------ */

static int key_is(const tfm__json *doc, const tfm__json_node *node, const char *key)
{
    return node->key_len == strlen(key) &&
           memcmp(tfm__json_key(doc, node), key, node->key_len) == 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

static int by_offsets(const void *a, const void *b)
{
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

/* Reads a [a, b, ...] of at most max non-negative integers; -1 if it is not. */
static int64_t read_naturals(const tfm__json *doc, int64_t idx, int64_t *out,
                             int64_t max)
{
    const tfm__json_node *array = &doc->nodes[idx];
    if (array->type != TFM__JSON_ARRAY || array->count > max)
        return -1;
    int64_t i = 0;
    for (int64_t c = idx + 1; c < array->next; c = doc->nodes[c].next, i++) {
        if (!doc->nodes[c].is_integer || doc->nodes[c].integer < 0)
            return -1;
        out[i] = doc->nodes[c].integer;
    }
    return i;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(((const metadata_pair *)a)->key, ((const metadata_pair *)b)->key);
}

/* Checks "__metadata__" is an object of strings (the JSON reader refuses
 * NUL characters and repeated keys: they come back as C strings, one per
 * key) and adds the bytes its keys and values need to *bytes. */
static tfm_status check_metadata(const char *ctx, const tfm__json *doc, int64_t idx,
                                 size_t *bytes)
{
    const tfm__json_node *meta = &doc->nodes[idx];
    if (meta->type != TFM__JSON_OBJECT)
        return tfm__fail(TFM_ERR_FORMAT, "%s: \"" METADATA_KEY "\" (header byte %zu) "
                         "is not an object", ctx, (size_t)meta->offset);
    for (int64_t c = idx + 1; c < meta->next; c = doc->nodes[c].next) {
        const tfm__json_node *pair = &doc->nodes[c];
        if (pair->type != TFM__JSON_STRING)
            return tfm__fail(TFM_ERR_FORMAT, "%s: \"" METADATA_KEY "\" value \"%s\" "
                             "(header byte %zu) is not a string", ctx, tfm__json_key(doc, pair),
                             (size_t)pair->offset);
        *bytes += pair->key_len + pair->string_len + 2;
    }
    return TFM_OK;
}

/* Copies the checked "__metadata__" pairs into file, sorted by key. */
static tfm_status copy_metadata(const char *ctx, const tfm__json *doc, int64_t idx,
                                tfm_safetensors *file, char **out)
{
    const tfm__json_node *meta = &doc->nodes[idx];
    file->metadata = calloc((size_t)meta->count + 1, sizeof *file->metadata);
    if (!file->metadata)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld metadata entries", ctx,
                         (long long)meta->count);
    for (int64_t c = idx + 1; c < meta->next; c = doc->nodes[c].next) {
        const tfm__json_node *pair = &doc->nodes[c];
        metadata_pair *m = &file->metadata[file->metadata_count++];
        m->key = memcpy(*out, tfm__json_key(doc, pair), pair->key_len + 1);
        *out += pair->key_len + 1;
        m->value = memcpy(*out, tfm__json_string(doc, pair), pair->string_len + 1);
        *out += pair->string_len + 1;
    }
    qsort(file->metadata, (size_t)file->metadata_count, sizeof *file->metadata, by_key);
    return TFM_OK;
}

/* Fills e from the header entry at idx; e->name is set by the caller. */
static tfm_status parse_entry(const char *ctx, const tfm__json *doc, int64_t idx,
                              int64_t data_size, entry *e)
{
    const tfm__json_node *node = &doc->nodes[idx];
    const char *name = tfm__json_key(doc, node);
    if (node->type != TFM__JSON_OBJECT)
        return tfm__fail(TFM_ERR_FORMAT, "%s: tensor \"%s\" (header byte %zu) is not "
                         "an object", ctx, name, (size_t)node->offset);
    int64_t dtype_at = -1, shape_at = -1, offsets_at = -1;
    for (int64_t c = idx + 1; c < node->next; c = doc->nodes[c].next) {
        const tfm__json_node *field = &doc->nodes[c];
        int64_t *slot = key_is(doc, field, "dtype")          ? &dtype_at
                        : key_is(doc, field, "shape")        ? &shape_at
                        : key_is(doc, field, "data_offsets") ? &offsets_at
                                                        : NULL;
        if (!slot)
            return tfm__fail(TFM_ERR_FORMAT, "%s: tensor \"%s\" has an unknown field "
                             "\"%s\" (header byte %zu)", ctx, name, tfm__json_key(doc, field),
                             (size_t)field->offset);
        *slot = c;
    }
    const char *missing = dtype_at < 0 ? "dtype" : shape_at < 0 ? "shape"
                          : offsets_at < 0 ? "data_offsets" : NULL;
    if (missing)
        return tfm__fail(TFM_ERR_FORMAT, "%s: tensor \"%s\" (header byte %zu) has no "
                         "\"%s\"", ctx, name, (size_t)node->offset, missing);

    const tfm__json_node *dtype = &doc->nodes[dtype_at];
    e->dtype = -1;
    for (int32_t d = 0; d < DT_COUNT && dtype->type == TFM__JSON_STRING; d++)
        if (strcmp(tfm__json_string(doc, dtype), dtypes[d].name) == 0 &&
            dtype->string_len == strlen(dtypes[d].name))
            e->dtype = d;
    if (e->dtype < 0)
        return tfm__fail(TFM_ERR_FORMAT, "%s: tensor \"%s\": dtype (header byte %zu) "
                         "is not one of F32 I32 F64 F16 BF16 I64 I16 I8 U8 U16 "
                         "U32 U64 BOOL%s%s", ctx, name, (size_t)dtype->offset,
                         dtype->type == TFM__JSON_STRING ? ": " : "",
                         dtype->type == TFM__JSON_STRING ? tfm__json_string(doc, dtype) : "");

    /* one spare slot tells "five or more" from "four" */
    int64_t dims[TFM_MAX_DIMS + 1];
    int64_t ndim = read_naturals(doc, shape_at, dims, TFM_MAX_DIMS + 1);
    if (ndim < 0)
        return tfm__fail(TFM_ERR_FORMAT, "%s: tensor \"%s\": shape (header byte %zu) "
                         "is not an array of non-negative integers", ctx, name,
                         (size_t)doc->nodes[shape_at].offset);
    if (ndim > TFM_MAX_DIMS)
        return tfm__fail(TFM_ERR_FORMAT, "%s: tensor \"%s\" has %lld dimensions; "
                         "libtfm tensors have at most %d", ctx, name,
                         (long long)doc->nodes[shape_at].count, TFM_MAX_DIMS);
    int64_t offsets[2];
    if (read_naturals(doc, offsets_at, offsets, 2) != 2 || offsets[0] > offsets[1])
        return tfm__fail(TFM_ERR_FORMAT, "%s: tensor \"%s\": data_offsets (header "
                         "byte %zu) is not [begin, end] with 0 <= begin <= end", ctx,
                         name, (size_t)doc->nodes[offsets_at].offset);
    e->begin = offsets[0];
    e->end = offsets[1];
    if (e->end > data_size)
        return tfm__fail(TFM_ERR_FORMAT, "%s: tensor \"%s\": data_offsets [%lld, %lld] "
                         "run past the %lld-byte data section", ctx, name,
                         (long long)e->begin, (long long)e->end, (long long)data_size);

    /* -1 for a size int64 cannot hold */
    int64_t span = e->end - e->begin, bytes = dtypes[e->dtype].size;
    for (int64_t i = 0; i < ndim && bytes > 0; i++)
        bytes = dims[i] > INT64_MAX / bytes ? -1 : bytes * dims[i];
    if (bytes != span) {
        char dims_buf[96], needs[32] = "over 2^63";
        if (bytes >= 0)
            snprintf(needs, sizeof needs, "%lld", (long long)bytes);
        return tfm__fail(TFM_ERR_FORMAT, "%s: tensor \"%s\": shape %s of %s needs %s "
                         "bytes but data_offsets [%lld, %lld] hold %lld", ctx, name,
                         tfm__dims_str(dims, (int32_t)ndim, dims_buf, sizeof dims_buf),
                         dtypes[e->dtype].name, needs, (long long)e->begin,
                         (long long)e->end, (long long)span);
    }
    e->numel = bytes / dtypes[e->dtype].size;
    e->ndim = ndim ? (int32_t)ndim : 1;
    e->shape[0] = 1;
    for (int64_t i = 0; i < ndim; i++)
        e->shape[i] = dims[i];
    return TFM_OK;
}

/* The data section must be tiled exactly: no overlap, no gap, no tail. */
static tfm_status check_tiling(const char *ctx, tfm_safetensors *file)
{
    if (!file->count)
        return file->data_size ? tfm__fail(TFM_ERR_FORMAT, "%s: the %lld data bytes "
                                           "belong to no tensor", ctx,
                                           (long long)file->data_size) : TFM_OK;
    entry **order = malloc((size_t)file->count * sizeof *order);
    if (!order)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", ctx);
    for (int64_t i = 0; i < file->count; i++)
        order[i] = &file->entries[i];
    qsort(order, (size_t)file->count, sizeof *order, by_offsets);
    tfm_status s = TFM_OK;
    int64_t covered = 0;
    for (int64_t i = 0; i < file->count && s == TFM_OK; i++) {
        const entry *e = order[i];
        if (e->begin < covered)
            s = tfm__fail(TFM_ERR_FORMAT, "%s: tensor \"%s\" (data_offsets [%lld, %lld]) "
                          "overlaps tensor \"%s\" (data_offsets [%lld, %lld])", ctx,
                          e->name, (long long)e->begin, (long long)e->end,
                          order[i - 1]->name, (long long)order[i - 1]->begin,
                          (long long)order[i - 1]->end);
        else if (e->begin > covered)
            s = tfm__fail(TFM_ERR_FORMAT, "%s: data bytes [%lld, %lld) before tensor "
                          "\"%s\" belong to no tensor", ctx, (long long)covered,
                          (long long)e->begin, e->name);
        covered = e->end;
    }
    if (s == TFM_OK && covered != file->data_size)
        s = tfm__fail(TFM_ERR_FORMAT, "%s: data bytes [%lld, %lld) after the last "
                      "tensor belong to no tensor", ctx, (long long)covered,
                      (long long)file->data_size);
    free(order);
    return s;
}

/* The tensor member at idx, its name checked, into e (e->name not set). */
static tfm_status read_tensor(const char *ctx, const tfm__json *doc, int64_t idx,
                              int64_t data_size, entry *e)
{
    const tfm__json_node *node = &doc->nodes[idx];
    if (node->key_len == 0)
        return tfm__fail(TFM_ERR_FORMAT, "%s: a tensor has an empty name (header byte %zu)",
                         ctx, (size_t)node->offset);
    return parse_entry(ctx, doc, idx, data_size, e);
}

/* Builds file->entries, file->metadata and file->names from the parsed
 * header. Every member is checked before the tables are allocated, so a
 * header of a million empty members costs no table of a million entries. */
static tfm_status read_header(const char *ctx, const tfm__json *doc, tfm_safetensors *file)
{
    const tfm__json_node *root = &doc->nodes[0]; /* an object: read_file checked */
    size_t names_bytes = 1;
    int64_t metadata_at = -1;
    for (int64_t c = 1; c < root->next; c = doc->nodes[c].next) {
        const tfm__json_node *node = &doc->nodes[c];
        tfm_status s;
        if (!key_is(doc, node, METADATA_KEY)) {
            entry checked;
            s = read_tensor(ctx, doc, c, file->data_size, &checked);
            names_bytes += node->key_len + 1;
        } else {
            metadata_at = c;
            s = check_metadata(ctx, doc, c, &names_bytes);
        }
        if (s != TFM_OK)
            return s;
    }
    file->entries = calloc((size_t)root->count + 1, sizeof *file->entries);
    file->names = malloc(names_bytes);
    if (!file->entries || !file->names)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld header entries",
                         ctx, (long long)root->count);
    char *out = file->names;
    if (metadata_at >= 0) {
        tfm_status s = copy_metadata(ctx, doc, metadata_at, file, &out);
        if (s != TFM_OK)
            return s;
    }
    for (int64_t c = 1; c < root->next; c = doc->nodes[c].next) {
        if (c == metadata_at)
            continue;
        const tfm__json_node *node = &doc->nodes[c];
        entry *e = &file->entries[file->count++];
        read_tensor(ctx, doc, c, file->data_size, e); /* checked above */
        e->name = memcpy(out, tfm__json_key(doc, node), node->key_len + 1);
        out += node->key_len + 1;
    }
    qsort(file->entries, (size_t)file->count, sizeof *file->entries, by_name);
    return check_tiling(ctx, file);
}

/* --- reading: the file --------------------------------------------------------- */

/* Reads exactly n bytes, however many read() calls it takes. */
static tfm_status read_bytes(const char *ctx, int fd, void *buf, size_t n,
                             const char *what)
{
    unsigned char *at = buf;
    while (n > 0) {
        ssize_t got = read(fd, at, n < READ_CHUNK ? n : READ_CHUNK);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return tfm__fail(TFM_ERR_IO, "%s: reading the %s failed: %s", ctx, what,
                             strerror(errno));
        if (got == 0)
            return tfm__fail(TFM_ERR_FORMAT, "%s: the file ends inside the %s", ctx, what);
        at += got;
        n -= (size_t)got;
    }
    return TFM_OK;
}

static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* Reads the file whose size fstat gave. */
static tfm_status read_file(const char *ctx, int fd, off_t size, tfm_safetensors *file)
{
    if (size < 8)
        return tfm__fail(TFM_ERR_FORMAT, "%s: the file has %lld bytes, fewer than the "
                         "8-byte header length", ctx, (long long)size);
    unsigned char prefix[8];
    tfm_status s = read_bytes(ctx, fd, prefix, 8, "header length");
    if (s != TFM_OK)
        return s;
    uint64_t header_size = le64(prefix);
    if (header_size > MAX_HEADER_BYTES)
        return tfm__fail(TFM_ERR_FORMAT, "%s: header length %llu is absurd (the limit "
                         "is %llu bytes)", ctx, (unsigned long long)header_size,
                         MAX_HEADER_BYTES);
    if (header_size > (uint64_t)size - 8)
        return tfm__fail(TFM_ERR_FORMAT, "%s: header length %llu exceeds the %lld "
                         "bytes after it", ctx, (unsigned long long)header_size,
                         (long long)size - 8);
    file->data_size = size - 8 - (int64_t)header_size;
    char *header = malloc((size_t)header_size + 1);
    if (!header)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for a %llu-byte header", ctx,
                         (unsigned long long)header_size);
    s = read_bytes(ctx, fd, header, (size_t)header_size, "header");
    /* A header is an object: junk is refused at its first byte, before the
     * parser spends memory on it. A NUL stops strspn, and is no '{' either. */
    header[header_size] = '\0';
    size_t first = strspn(header, " \t\n\r");
    if (s == TFM_OK && first < header_size && header[first] != '{')
        s = tfm__fail(TFM_ERR_FORMAT, "%s: the header is not a JSON object (byte %zu is "
                      "0x%02x, not '{')", ctx, first, (unsigned char)header[first]);
    char json_ctx[600];
    snprintf(json_ctx, sizeof json_ctx, "%s: the header", ctx);
    tfm__json doc;
    if (s == TFM_OK)
        s = tfm__json_parse(json_ctx, header, (size_t)header_size,
                            (int64_t)(header_size / MIN_BYTES_PER_VALUE) + 2, &doc);
    if (s == TFM_OK) { /* the document's strings are in header */
        s = read_header(ctx, &doc, file);
        tfm__json_free(&doc);
    }
    free(header);
    if (s != TFM_OK)
        return s;
    if (file->data_size) {
        file->data = malloc((size_t)file->data_size);
        if (!file->data)
            return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld data bytes",
                             ctx, (long long)file->data_size);
    }
    return read_bytes(ctx, fd, file->data, (size_t)file->data_size, "data");
}

/* "a directory", "a FIFO", ... for a file that is not a regular one. */
static const char *file_kind(mode_t mode)
{
    return S_ISDIR(mode)    ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a regular file";
}

/* Opens path for reading if it is a regular file: a FIFO or a device is
 * refused before a read (or the open itself) could block on it. */
static int open_regular(const char *ctx, const char *path, off_t *size)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        tfm__fail(TFM_ERR_IO, "%s: cannot open: %s", ctx, strerror(errno));
        return -1;
    }
    struct stat st;
    int flags;
    if (fstat(fd, &st) != 0)
        tfm__fail(TFM_ERR_IO, "%s: cannot stat the file: %s", ctx, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        tfm__fail(TFM_ERR_IO, "%s: not a regular file (%s)", ctx, file_kind(st.st_mode));
    else if ((flags = fcntl(fd, F_GETFL)) < 0 ||
             fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
        tfm__fail(TFM_ERR_IO, "%s: cannot make reads blocking: %s", ctx, strerror(errno));
    else {
        *size = st.st_size;
        return fd;
    }
    close(fd);
    return -1;
}

int tfm__in_folder(const char *ctx, const char *folder, const char *name, char *out,
                   size_t size)
{
    if ((size_t)snprintf(out, size, "%s/%s", folder, name) >= size) {
        tfm__fail(TFM_ERR_ARG, "%s: the path of %s in \"%s\" is longer than %zu bytes", ctx,
                  name, folder, size - 1);
        return -1;
    }
    return 0;
}

int tfm__path_taken(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 || errno != ENOENT;
}

tfm_status tfm__read_whole_file(const char *op, const char *path, size_t limit, char **bytes,
                               size_t *size)
{
    *bytes = NULL;
    *size = 0;
    if (!path)
        return tfm__fail(TFM_ERR_NULL, "%s: path is NULL", op);
    char ctx[520];
    snprintf(ctx, sizeof ctx, "%s: \"%s\"", op, path);
    off_t file_size = 0;
    int fd = open_regular(ctx, path, &file_size);
    if (fd < 0)
        return tfm_last_status();
    tfm_status s = TFM_OK;
    char *buffer = NULL;
    if (file_size < 0 || (uint64_t)file_size > limit)
        s = tfm__fail(TFM_ERR_SIZE, "%s: %lld bytes, more than the %zu allowed", ctx,
                      (long long)file_size, limit);
    else if (!(buffer = malloc((size_t)file_size + 1)))
        s = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld bytes", ctx,
                      (long long)file_size);
    else
        s = read_bytes(ctx, fd, buffer, (size_t)file_size, "file");
    close(fd);
    if (s != TFM_OK) {
        free(buffer);
        return s;
    }
    buffer[file_size] = 0;
    *bytes = buffer;
    *size = (size_t)file_size;
    return TFM_OK;
}

tfm_safetensors *tfm__safetensors_open(const char *op, const char *path)
{
    if (!path) {
        tfm__fail(TFM_ERR_NULL, "%s: path is NULL", op);
        return NULL;
    }
    char ctx[520];
    snprintf(ctx, sizeof ctx, "%s: \"%s\"", op, path);
    off_t size = 0;
    int fd = open_regular(ctx, path, &size);
    if (fd < 0)
        return NULL;
    tfm_safetensors *file = calloc(1, sizeof *file);
    tfm_status s = file ? read_file(ctx, fd, size, file)
                        : tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", ctx);
    close(fd);
    if (s != TFM_OK) {
        tfm_safetensors_close(file);
        return NULL;
    }
    return file;
}

tfm_safetensors *tfm_safetensors_open(const char *path)
{
    return tfm__safetensors_open("tfm_safetensors_open", path);
}

void tfm_safetensors_close(tfm_safetensors *file)
{
    if (!file)
        return;
    free(file->entries);
    free(file->metadata);
    free(file->names);
    free(file->data);
    free(file);
}

int64_t tfm_safetensors_count(const tfm_safetensors *file)
{
    if (!file) {
        tfm__fail(TFM_ERR_NULL, "tfm_safetensors_count: file is NULL");
        return -1;
    }
    return file->count;
}

const char *tfm_safetensors_name(const tfm_safetensors *file, int64_t index)
{
    if (!file) {
        tfm__fail(TFM_ERR_NULL, "tfm_safetensors_name: file is NULL");
        return NULL;
    }
    if (index < 0 || index >= file->count) {
        tfm__fail(TFM_ERR_RANGE, "tfm_safetensors_name: index %lld is outside [0, %lld)",
                  (long long)index, (long long)file->count);
        return NULL;
    }
    return file->entries[index].name;
}

int64_t tfm_safetensors_metadata_count(const tfm_safetensors *file)
{
    if (!file) {
        tfm__fail(TFM_ERR_NULL, "tfm_safetensors_metadata_count: file is NULL");
        return -1;
    }
    return file->metadata_count;
}

const char *tfm_safetensors_metadata_key(const tfm_safetensors *file, int64_t index)
{
    const char *op = "tfm_safetensors_metadata_key";
    if (!file) {
        tfm__fail(TFM_ERR_NULL, "%s: file is NULL", op);
        return NULL;
    }
    if (index < 0 || index >= file->metadata_count) {
        tfm__fail(TFM_ERR_RANGE, "%s: index %lld is outside [0, %lld)", op, (long long)index,
                  (long long)file->metadata_count);
        return NULL;
    }
    return file->metadata[index].key;
}

const char *tfm__safetensors_metadata(const tfm_safetensors *file, const char *key)
{
    metadata_pair wanted = {.key = key};
    const metadata_pair *found =
        file->metadata_count ? bsearch(&wanted, file->metadata, (size_t)file->metadata_count,
                                       sizeof *file->metadata, by_key)
                             : NULL;
    return found ? found->value : NULL;
}

const char *tfm_safetensors_metadata_get(const tfm_safetensors *file, const char *key)
{
    const char *op = "tfm_safetensors_metadata_get";
    if (!file || !key) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, file ? "key" : "file");
        return NULL;
    }
    const char *value = tfm__safetensors_metadata(file, key);
    if (!value)
        tfm__fail(TFM_ERR_ARG, "%s: the file's metadata has no key \"%s\"", op, key);
    return value;
}

/* --- reading: conversion ------------------------------------------------------- */

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f,
             mantissa = h & 0x3ff, bits;
    if (exponent == 0) {
        /* zero or subnormal: mantissa * 2^-24 exactly */
        float value = (float)mantissa * 0x1p-24f;
        return sign ? -value : value;
    }
    if (exponent == 0x1f)
        bits = sign | 0x7f800000u | mantissa << 13;
    else
        bits = sign | (exponent + 112) << 23 | mantissa << 13;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* Float dtypes to float32 (F64 rounds, as torch's .float()). */
static void convert_f32(const entry *e, const unsigned char *src, float *dst)
{
    int64_t n = e->numel;
    switch (e->dtype) {
    case DT_F32:
        /* copied as bits, so NaN payloads survive */
        for (int64_t i = 0; i < n; i++) {
            uint32_t bits = le32(src + 4 * i);
            memcpy(dst + i, &bits, sizeof bits);
        }
        break;
    case DT_F64:
        for (int64_t i = 0; i < n; i++) {
            uint64_t bits = le64(src + 8 * i);
            double value;
            memcpy(&value, &bits, sizeof value);
            dst[i] = (float)value;
        }
        break;
    case DT_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = half_to_float(le16(src + 2 * i));
        break;
    default: /* DT_BF16: the top half of a float32 */
        for (int64_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)le16(src + 2 * i) << 16;
            memcpy(dst + i, &bits, sizeof bits);
        }
    }
}

/* Element i of an integer dtype as int64, or -1 with *big set for a U64
 * above INT64_MAX. */
static int64_t integer_at(int32_t dtype, const unsigned char *src, int64_t i, int *big)
{
    switch (dtype) {
    case DT_I32: return (int32_t)le32(src + 4 * i);
    case DT_I64: return (int64_t)le64(src + 8 * i);
    case DT_I16: return (int16_t)le16(src + 2 * i);
    case DT_I8: return (int8_t)src[i];
    case DT_U8: return src[i];
    case DT_U16: return le16(src + 2 * i);
    case DT_U32: return le32(src + 4 * i);
    case DT_BOOL: return src[i] != 0;
    default: { /* DT_U64 */
        uint64_t value = le64(src + 8 * i);
        *big = value > INT64_MAX;
        return *big ? -1 : (int64_t)value;
    }
    }
}

/* Integer dtypes to int32; a value int32 cannot hold is TFM_ERR_RANGE. */
static tfm_status convert_i32(const char *op, const entry *e, const unsigned char *src,
                              tfm_tensor *t)
{
    int32_t *dst = tfm__i32(t);
    for (int64_t i = 0; i < e->numel; i++) {
        int big = 0;
        int64_t value = integer_at(e->dtype, src, i, &big);
        if (big || value < INT32_MIN || value > INT32_MAX) {
            char index[64];
            return tfm__fail(TFM_ERR_RANGE, "%s: tensor \"%s\" (%s): element %s = %s%lld "
                             "does not fit int32", op, e->name, dtypes[e->dtype].name,
                             tfm__index_str(t, i, index, sizeof index),
                             big ? "above " : "", big ? (long long)INT64_MAX : (long long)value);
        }
        dst[i] = (int32_t)value;
    }
    return TFM_OK;
}

static const entry *find_entry(const tfm_safetensors *file, const char *name)
{
    entry key = {.name = name};
    return file->count ? bsearch(&key, file->entries, (size_t)file->count,
                                 sizeof *file->entries, by_name)
                       : NULL;
}

tfm_tensor *tfm_safetensors_get(const tfm_safetensors *file, const char *name)
{
    const char *op = "tfm_safetensors_get";
    if (!file || !name) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, file ? "name" : "file");
        return NULL;
    }
    const entry *e = find_entry(file, name);
    if (!e) {
        tfm__fail(TFM_ERR_ARG, "%s: the file holds no tensor \"%s\"", op, name);
        return NULL;
    }
    char dims[96];
    if (e->numel == 0) {
        tfm__fail(TFM_ERR_SHAPE, "%s: tensor \"%s\" has shape %s; libtfm tensors have "
                  "no empty axes", op, name, tfm__dims_str(e->shape, e->ndim, dims,
                                                           sizeof dims));
        return NULL;
    }
    int is_float = dtypes[e->dtype].is_float;
    uint64_t mark = tfm__error_mark();
    tfm_tensor *t = tfm_tensor_zeros(is_float ? TFM_F32 : TFM_I32, e->ndim, e->shape);
    if (!t) {
        tfm__fail_within(op, mark);
        return NULL;
    }
    const unsigned char *src = file->data + e->begin;
    if (is_float) {
        convert_f32(e, src, tfm__f32(t));
    } else if (convert_i32(op, e, src, t) != TFM_OK) {
        tfm_tensor_free(t);
        return NULL;
    }
    return t;
}

/* --- writing ------------------------------------------------------------------ */

/* qsort has no context argument; the names ride along in each element. */
typedef struct ranked {
    const char *name;
    int64_t index;
} ranked;

static int by_ranked_name(const void *a, const void *b)
{
    return strcmp(((const ranked *)a)->name, ((const ranked *)b)->name);
}

/* Checks count names (non-empty UTF-8, unique, not "__metadata__" when
 * they name tensors) and sorts them into order. */
static tfm_status check_names(const char *op, const char *what, int64_t count,
                              const char *const *names, int tensors, ranked *order)
{
    for (int64_t i = 0; i < count; i++) {
        if (!names[i])
            return tfm__fail(TFM_ERR_NULL, "%s: %s[%lld] is NULL", op, what, (long long)i);
        size_t len = strlen(names[i]);
        if (len == 0)
            return tfm__fail(TFM_ERR_ARG, "%s: %s[%lld] is empty", op, what, (long long)i);
        if (tensors && strcmp(names[i], METADATA_KEY) == 0)
            return tfm__fail(TFM_ERR_ARG, "%s: %s[%lld] is \"" METADATA_KEY "\", "
                             "which safetensors reserves", op, what, (long long)i);
        if (!tfm__utf8_valid(names[i], len))
            return tfm__fail(TFM_ERR_ARG, "%s: %s[%lld] is not valid UTF-8", op, what,
                             (long long)i);
        order[i] = (ranked){names[i], i};
    }
    qsort(order, (size_t)count, sizeof *order, by_ranked_name);
    for (int64_t i = 1; i < count; i++)
        if (strcmp(order[i - 1].name, order[i].name) == 0)
            return tfm__fail(TFM_ERR_ARG, "%s: \"%s\" is given twice (%s[%lld] "
                             "and %s[%lld])", op, order[i].name, what,
                             (long long)order[i - 1].index, what, (long long)order[i].index);
    return TFM_OK;
}

/* What one file will hold: tensors and metadata, each in name order. */
typedef struct write_plan {
    int64_t count;
    const tfm_tensor *const *tensors;
    ranked *order;
    int64_t metadata_count;
    const char *const *values;
    ranked *metadata_order;
} write_plan;

/* Appends to dst (when not NULL; cap bytes including a final NUL). */
static void emit(char *dst, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void emit(char *dst, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(dst ? dst + *len : NULL, dst ? cap - *len : 0, fmt, args);
    va_end(args);
    *len += n > 0 ? (size_t)n : 0;
}

/* The header JSON, padded with spaces so the data starts 8-byte aligned;
 * into dst when not NULL. Returns its length. */
static size_t header_text(char *dst, size_t cap, const write_plan *plan)
{
    size_t len = 0;
    int64_t offset = 0;
    emit(dst, cap, &len, "{");
    if (plan->metadata_count) {
        emit(dst, cap, &len, "\"" METADATA_KEY "\":{");
        for (int64_t i = 0; i < plan->metadata_count; i++) {
            const ranked *m = &plan->metadata_order[i];
            const char *value = plan->values[m->index];
            len += tfm__json_quote(dst ? dst + len : NULL, m->name, strlen(m->name));
            emit(dst, cap, &len, ":");
            len += tfm__json_quote(dst ? dst + len : NULL, value, strlen(value));
            emit(dst, cap, &len, "%s", i + 1 < plan->metadata_count ? "," : "");
        }
        emit(dst, cap, &len, "}%s", plan->count ? "," : "");
    }
    for (int64_t i = 0; i < plan->count; i++) {
        const tfm_tensor *t = plan->tensors[plan->order[i].index];
        len += tfm__json_quote(dst ? dst + len : NULL, plan->order[i].name,
                               strlen(plan->order[i].name));
        emit(dst, cap, &len, ":{\"dtype\":\"%s\",\"shape\":[",
             t->dtype == TFM__I8 ? "I8" : t->dtype == TFM_I32 ? "I32" : "F32");
        for (int32_t d = 0; d < t->ndim; d++)
            emit(dst, cap, &len, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        int64_t bytes = t->numel * (int64_t)tfm__dtype_size(t->dtype);
        emit(dst, cap, &len, "],\"data_offsets\":[%lld,%lld]}%s", (long long)offset,
             (long long)(offset + bytes), i + 1 < plan->count ? "," : "");
        offset += bytes;
    }
    emit(dst, cap, &len, "}");
    while (len % 8)
        emit(dst, cap, &len, " ");
    return len;
}

/* Writes all n bytes, however many write() calls it takes; -1 with errno. */
static int write_all(int fd, const void *buf, size_t n)
{
    const unsigned char *at = buf;
    while (n > 0) {
        ssize_t done = write(fd, at, n);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0) {
            if (done == 0)
                errno = EIO; /* no progress and no reason: do not spin */
            return -1;
        }
        at += done;
        n -= (size_t)done;
    }
    return 0;
}

/* The values little-endian, through a small buffer whatever the host order. */
static int write_values(int fd, const tfm_tensor *t)
{
    if (t->dtype == TFM__I8) /* bytes have no order */
        return write_all(fd, t->data, (size_t)t->numel);
    unsigned char buf[16384];
    const unsigned char *src = t->data;
    const int64_t per_chunk = sizeof buf / 4;
    for (int64_t start = 0; start < t->numel; start += per_chunk) {
        int64_t n = t->numel - start < per_chunk ? t->numel - start : per_chunk;
        for (int64_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, src + 4 * (start + i), 4);
            buf[4 * i] = (unsigned char)v;
            buf[4 * i + 1] = (unsigned char)(v >> 8);
            buf[4 * i + 2] = (unsigned char)(v >> 16);
            buf[4 * i + 3] = (unsigned char)(v >> 24);
        }
        if (write_all(fd, buf, 4 * (size_t)n) != 0)
            return -1;
    }
    return 0;
}

/* --- writing: the target, its temporaries and its folder -----------------------
 * A save of folder/NAME writes folder/.NAME.tfm-tmp.PID.N (NAME cut to
 * TEMP_NAME_BYTES), then renames it over the target. A save killed before
 * the rename leaves its temporary; the next save of the same target removes
 * those whose PID is no running process. */

#define TEMP_TAG ".tfm-tmp."
enum { TEMP_NAME_BYTES = 200, TEMP_SUFFIX_BYTES = 48 };

/* A save replaces only a regular file (or creates one): never a device, a
 * FIFO or a folder, which rename would replace or fail on late. */
static tfm_status check_target(const char *op, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return tfm__fail(TFM_ERR_IO, "%s: \"%s\" is %s; a save replaces only a regular "
                         "file, so nothing was written", op, path, file_kind(st.st_mode));
    return TFM_OK;
}

/* Removes the temporaries of earlier saves of name (in folder) whose
 * writer is dead: kill(PID, 0) says no such process. A live writer's
 * temporary (another process's, or this process's own: another thread may
 * be saving) stays. Best effort: a folder that cannot be listed is left. */
static void remove_stale_temps(const char *folder, const char *name)
{
    char prefix[TEMP_NAME_BYTES + 16];
    int prefix_len = snprintf(prefix, sizeof prefix, ".%.*s" TEMP_TAG, TEMP_NAME_BYTES, name);
    DIR *d = opendir(folder);
    if (!d)
        return;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        if (strncmp(ent->d_name, prefix, (size_t)prefix_len) != 0)
            continue;
        const char *digits = ent->d_name + prefix_len;
        char *end;
        long pid = strtol(digits, &end, 10);
        if (end == digits || *end != '.' || pid <= 0 || pid > INT_MAX || pid == (long)getpid() ||
            strspn(end + 1, "0123456789") != strlen(end + 1) || end[1] == '\0')
            continue;
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
            unlinkat(dirfd(d), ent->d_name, 0);
    }
    closedir(d);
}

/* A new temporary beside the target, named as above into tmp (O_EXCL: never
 * one another writer is using), with the usual permissions after umask.
 * dir_len bytes of path are its folder, name the rest. */
static int create_temp(const char *op, const char *path, size_t dir_len, const char *name,
                       char *tmp, size_t size)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        snprintf(tmp, size, "%.*s.%.*s" TEMP_TAG "%ld.%d", (int)dir_len, path,
                 TEMP_NAME_BYTES, name, (long)getpid(), attempt);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST) {
            tfm__fail(TFM_ERR_IO, "%s: cannot create \"%s\": %s", op, tmp, strerror(errno));
            return -1;
        }
    }
    tfm__fail(TFM_ERR_IO, "%s: temporary files \"%s\" and 99 others all exist", op, tmp);
    return -1;
}

/* Past the rename, a failure is TFM_ERR_SYNC: the new file is in place,
 * so the caller must not take it for a failed write. */
tfm_status tfm__sync_folder(const char *op, const char *path, const char *folder)
{
    int fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL)) {
        tfm__fail(TFM_ERR_SYNC, "%s: \"%s\" is written and in place, but syncing its folder "
                  "\"%s\" failed (%s): a crash could still bring back the previous file",
                  op, path, folder, strerror(errno));
        if (fd >= 0)
            close(fd);
        return TFM_ERR_SYNC;
    }
    close(fd);
    return TFM_OK;
}

/* Writes the temporary with writer(fd, context) and renames it over path;
 * the temporary is removed on any failure. */
static tfm_status write_temp(const char *op, const char *path, const char *tmp, int fd,
                             tfm__file_writer writer, const void *context)
{
    tfm_status s = TFM_OK;
    if (writer(fd, context) != 0 || fsync(fd) != 0)
        s = tfm__fail(TFM_ERR_IO, "%s: writing \"%s\" failed: %s", op, tmp, strerror(errno));
    if (close(fd) != 0 && s == TFM_OK)
        s = tfm__fail(TFM_ERR_IO, "%s: closing \"%s\" failed: %s", op, tmp, strerror(errno));
    if (s == TFM_OK && rename(tmp, path) != 0)
        s = tfm__fail(TFM_ERR_IO, "%s: cannot rename \"%s\" to \"%s\": %s", op, tmp, path,
                      strerror(errno));
    if (s != TFM_OK)
        unlink(tmp);
    return s;
}

tfm_status tfm__save_atomically(const char *op, const char *path, tfm__file_writer writer,
                                const void *context)
{
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    size_t dir_len = (size_t)(name - path);
    if (!*name)
        return tfm__fail(TFM_ERR_ARG, "%s: path \"%s\" names no file", op, path);
    tfm_status s = check_target(op, path);
    if (s != TFM_OK)
        return s;
    size_t tmp_size = dir_len + TEMP_NAME_BYTES + TEMP_SUFFIX_BYTES;
    char *tmp = malloc(tmp_size);
    char *folder = malloc(dir_len + 2);
    if (!tmp || !folder) {
        free(tmp);
        free(folder);
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the path \"%s\"", op, path);
    }
    /* path up to its last slash; "/" at the root, "." for a bare name */
    snprintf(folder, dir_len + 2, "%.*s", (int)(dir_len > 1 ? dir_len - 1 : 1),
             dir_len ? path : ".");
    remove_stale_temps(folder, name);
    int fd = create_temp(op, path, dir_len, name, tmp, tmp_size);
    if (fd < 0)
        s = tfm_last_status();
    else
        s = write_temp(op, path, tmp, fd, writer, context);
    if (s == TFM_OK)
        s = tfm__sync_folder(op, path, folder);
    free(tmp);
    free(folder);
    return s;
}

typedef struct byte_span {
    const void *bytes;
    size_t size;
} byte_span;

static int write_span(int fd, const void *context)
{
    const byte_span *span = context;
    return write_all(fd, span->bytes, span->size);
}

tfm_status tfm__save_bytes_atomically(const char *op, const char *path, const void *bytes,
                                      size_t size)
{
    byte_span span = {bytes, size};
    return tfm__save_atomically(op, path, write_span, &span);
}

/* A safetensors file: its length prefix, its header, the tensors' values. */
typedef struct safetensors_bytes {
    const char *header;
    size_t header_len;
    const write_plan *plan;
} safetensors_bytes;

static int write_safetensors(int fd, const void *context)
{
    const safetensors_bytes *file = context;
    unsigned char prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (unsigned char)((uint64_t)file->header_len >> (8 * i));
    if (write_all(fd, prefix, 8) != 0 || write_all(fd, file->header, file->header_len) != 0)
        return -1;
    const write_plan *plan = file->plan;
    for (int64_t i = 0; i < plan->count; i++)
        if (write_values(fd, plan->tensors[plan->order[i].index]) != 0)
            return -1;
    return 0;
}

static tfm_status write_file(const char *op, const char *path, const write_plan *plan)
{
    size_t header_len = header_text(NULL, 0, plan);
    if (header_len > MAX_HEADER_BYTES) /* before the file at path is touched */
        return tfm__fail(TFM_ERR_SIZE, "%s: the header would take %zu bytes, past the %llu "
                         "that safetensors readers (libtfm's included) accept: the metadata "
                         "is too large", op, header_len, MAX_HEADER_BYTES);
    char *header = malloc(header_len + 1);
    if (!header)
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for a %zu-byte header", op,
                         header_len);
    header_text(header, header_len + 1, plan);
    safetensors_bytes file = {header, header_len, plan};
    tfm_status s = tfm__save_atomically(op, path, write_safetensors, &file);
    free(header);
    return s;
}

tfm_status tfm__safetensors_write(const char *op, const char *path, int64_t count,
                                  const char *const *names, const tfm_tensor *const *tensors,
                                  int64_t metadata_count, const char *const *keys,
                                  const char *const *values)
{
    if (!path)
        return tfm__fail(TFM_ERR_NULL, "%s: path is NULL", op);
    if (count < 0 || metadata_count < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: %s %lld is negative", op,
                         count < 0 ? "count" : "metadata_count",
                         (long long)(count < 0 ? count : metadata_count));
    if (count > 0 && (!names || !tensors))
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, names ? "tensors" : "names");
    if (metadata_count > 0 && (!keys || !values))
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, keys ? "values" : "keys");
    for (int64_t i = 0; i < count; i++) {
        char what[32];
        snprintf(what, sizeof what, "tensors[%lld]", (long long)i);
        if (!tensors[i])
            return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, what);
        if (tfm__check_tensor(op, what, tensors[i]) < 0)
            return tfm_last_status();
    }
    for (int64_t i = 0; i < metadata_count; i++) {
        if (!values[i])
            return tfm__fail(TFM_ERR_NULL, "%s: values[%lld] is NULL", op, (long long)i);
        if (!tfm__utf8_valid(values[i], strlen(values[i])))
            return tfm__fail(TFM_ERR_ARG, "%s: values[%lld] is not valid UTF-8", op,
                             (long long)i);
    }
    write_plan plan = {count, tensors, malloc((size_t)(count + 1) * sizeof(ranked)),
                       metadata_count, values,
                       malloc((size_t)(metadata_count + 1) * sizeof(ranked))};
    tfm_status s = TFM_OK;
    if (!plan.order || !plan.metadata_order)
        s = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld names", op,
                      (long long)(count + metadata_count));
    if (s == TFM_OK)
        s = check_names(op, "names", count, names, 1, plan.order);
    if (s == TFM_OK)
        s = check_names(op, "keys", metadata_count, keys, 0, plan.metadata_order);
    if (s == TFM_OK)
        s = write_file(op, path, &plan);
    free(plan.order);
    free(plan.metadata_order);
    return s;
}

tfm_status tfm_safetensors_write(const char *path, int64_t count, const char *const *names,
                                 const tfm_tensor *const *tensors)
{
    return tfm__safetensors_write("tfm_safetensors_write", path, count, names, tensors, 0,
                                  NULL, NULL);
}

tfm_status tfm_safetensors_write_with_metadata(const char *path, int64_t count,
                                               const char *const *names,
                                               const tfm_tensor *const *tensors,
                                               int64_t metadata_count,
                                               const char *const *keys,
                                               const char *const *values)
{
    return tfm__safetensors_write("tfm_safetensors_write_with_metadata", path, count, names,
                                  tensors, metadata_count, keys, values);
}

/* --- what the loaders in this folder need -------------------------------------- */

int64_t tfm__safetensors_find(const tfm_safetensors *file, const char *name)
{
    const entry *e = find_entry(file, name);
    return e ? e - file->entries : -1;
}

void tfm__safetensors_info(const tfm_safetensors *file, int64_t index, tfm__tensor_info *info)
{
    const entry *e = &file->entries[index];
    info->name = e->name;
    info->dtype_name = dtypes[e->dtype].name;
    info->is_float = dtypes[e->dtype].is_float;
    info->ndim = e->ndim;
    memcpy(info->shape, e->shape, sizeof info->shape);
    info->numel = e->numel;
}

void tfm__safetensors_read_f32(const tfm_safetensors *file, int64_t index, float *dst)
{
    const entry *e = &file->entries[index];
    convert_f32(e, file->data + e->begin, dst);
}

void tfm__safetensors_read_i8(const tfm_safetensors *file, int64_t index, int8_t *dst)
{
    const entry *e = &file->entries[index];
    memcpy(dst, file->data + e->begin, (size_t)e->numel);
}

int tfm__safetensors_all_finite(const tfm_safetensors *file, int64_t index, int64_t *where)
{
    const entry *e = &file->entries[index];
    float chunk[1024];
    entry part = *e;
    for (int64_t first = 0; first < e->numel; first += 1024) {
        part.numel = e->numel - first < 1024 ? e->numel - first : 1024;
        convert_f32(&part, file->data + e->begin + first * dtypes[e->dtype].size, chunk);
        for (int64_t i = 0; i < part.numel; i++)
            if (!isfinite(chunk[i])) {
                *where = first + i;
                return 0;
            }
    }
    return 1;
}
