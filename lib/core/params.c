/* The parameter store: tensors whose values and gradients are slices of two
 * contiguous blocks that grow as parameters are added. */
#include "tfm/params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/params.h"
#include "core/tensor.h"
#include "core/utf8.h"

#define MAX_NAME 255

struct tfm_params {
    tfm_tensor **tensors;
    char **names;
    int64_t *offsets;      /* of each tensor in the blocks */
    int64_t count, capacity;
    float *values, *grads;
    int64_t numel;
    int64_t values_capacity, grads_capacity;
    int64_t max_numel;     /* 0: none */
    /* names to indices: open addressing, index + 1 per slot (0: empty), a
     * power of two at most half full, so adding, finding and loading by
     * name cost the same whatever the count (8,192 layers make ~100,000
     * parameters) */
    int64_t *slots;
    int64_t slot_count;
};

tfm_params *tfm_params_create(void)
{
    tfm_params *p = calloc(1, sizeof *p);
    if (!p)
        tfm__fail(TFM_ERR_NOMEM, "tfm_params_create: out of memory");
    return p;
}

void tfm_params_free(tfm_params *p)
{
    if (!p)
        return;
    for (int64_t i = 0; i < p->count; i++) {
        free(p->tensors[i]);
        free(p->names[i]);
    }
    free(p->tensors);
    free(p->names);
    free(p->offsets);
    free(p->slots);
    free(p->values);
    free(p->grads);
    free(p);
}

/* Grows *block to hold at least need floats, zeroing the new part. */
static int grow_block(float **block, int64_t *capacity, int64_t used, int64_t need)
{
    if (need <= *capacity)
        return 0;
    int64_t size = *capacity ? *capacity : 1024;
    while (size < need)
        size *= 2;
    float *grown = realloc(*block, (size_t)size * sizeof(float));
    if (!grown)
        return -1;
    memset(grown + used, 0, (size_t)(size - used) * sizeof(float));
    *block = grown;
    *capacity = size;
    return 0;
}

/* FNV-1a */
static uint64_t name_hash(const char *name)
{
    uint64_t h = 1469598103934665603u;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = (h ^ *c) * 1099511628211u;
    return h;
}

/* The slot holding name, or the empty slot where it would go. */
static int64_t slot_of(const tfm_params *p, const char *name)
{
    int64_t mask = p->slot_count - 1, i = (int64_t)(name_hash(name) & (uint64_t)mask);
    while (p->slots[i] && strcmp(p->names[p->slots[i] - 1], name) != 0)
        i = (i + 1) & mask;
    return i;
}

static void index_all(tfm_params *p)
{
    memset(p->slots, 0, (size_t)p->slot_count * sizeof *p->slots);
    for (int64_t i = 0; i < p->count; i++)
        p->slots[slot_of(p, p->names[i])] = i + 1;
}

/* Room for one more name in the slots, at most half full. */
static int grow_slots(tfm_params *p)
{
    if (2 * (p->count + 1) <= p->slot_count)
        return 0;
    int64_t size = p->slot_count ? p->slot_count * 2 : 64;
    int64_t *slots = malloc((size_t)size * sizeof *slots);
    if (!slots)
        return -1;
    free(p->slots);
    p->slots = slots;
    p->slot_count = size;
    index_all(p);
    return 0;
}

static int grow_index(tfm_params *p)
{
    if (grow_slots(p) < 0)
        return -1;
    if (p->count < p->capacity)
        return 0;
    int64_t size = p->capacity ? p->capacity * 2 : 32;
    tfm_tensor **tensors = realloc(p->tensors, (size_t)size * sizeof *tensors);
    if (tensors)
        p->tensors = tensors;
    char **names = realloc(p->names, (size_t)size * sizeof *names);
    if (names)
        p->names = names;
    int64_t *offsets = realloc(p->offsets, (size_t)size * sizeof *offsets);
    if (offsets)
        p->offsets = offsets;
    if (!tensors || !names || !offsets)
        return -1;
    p->capacity = size;
    return 0;
}

/* Points every tensor at its slice again, after the blocks moved. */
static void rebase(tfm_params *p)
{
    for (int64_t i = 0; i < p->count; i++) {
        p->tensors[i]->data = p->values + p->offsets[i];
        p->tensors[i]->grad = p->grads + p->offsets[i];
    }
}

tfm_tensor *tfm_params_add(tfm_params *p, const char *name, int32_t ndim,
                           const int64_t *shape)
{
    const char *op = "tfm_params_add";
    if (!p || !name) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, p ? "name" : "params");
        return NULL;
    }
    size_t len = strlen(name);
    if (len == 0 || len > MAX_NAME) {
        tfm__fail(TFM_ERR_ARG, "%s: a name has 1 to %d bytes", op, MAX_NAME);
        return NULL;
    }
    /* files carry names as JSON strings: refuse now what no save could write */
    if (!tfm__utf8_valid(name, len)) {
        tfm__fail(TFM_ERR_ARG, "%s: the name is not valid UTF-8", op);
        return NULL;
    }
    if (tfm__params_index_of(p, name) >= 0) {
        tfm__fail(TFM_ERR_ARG, "%s: a parameter named \"%s\" exists already", op, name);
        return NULL;
    }
    int64_t numel = tfm__checked_numel(op, ndim, shape);
    if (numel < 0)
        return NULL;
    if (p->max_numel && numel > p->max_numel - p->numel) {
        tfm__fail(TFM_ERR_SIZE, "%s: \"%s\" would take the store past its limit of %lld "
                  "values", op, name, (long long)p->max_numel);
        return NULL;
    }
    tfm_tensor *t = malloc(sizeof *t);
    char *copy = malloc(len + 1);
    const float *values = p->values, *grads = p->grads;
    int grown = t && copy && grow_index(p) == 0 &&
                grow_block(&p->values, &p->values_capacity, p->numel, p->numel + numel) == 0 &&
                grow_block(&p->grads, &p->grads_capacity, p->numel, p->numel + numel) == 0;
    if (p->values != values || p->grads != grads) /* only then: adding stays O(1) */
        rebase(p);
    if (!grown) {
        free(t);
        free(copy);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for \"%s\"", op, name);
        return NULL;
    }
    memcpy(copy, name, len + 1);
    tfm__tensor_init(t, TFM_F32, ndim, shape, numel, TFM_STORAGE_PARAM);
    t->requires_grad = 1;
    t->data = p->values + p->numel;
    t->grad = p->grads + p->numel;
    p->slots[slot_of(p, copy)] = p->count + 1;
    p->tensors[p->count] = t;
    p->names[p->count] = copy;
    p->offsets[p->count] = p->numel;
    p->count++;
    p->numel += numel;
    return t;
}

int64_t tfm_params_count(const tfm_params *p)
{
    if (!p) {
        tfm__fail(TFM_ERR_NULL, "tfm_params_count: params is NULL");
        return -1;
    }
    return p->count;
}

int64_t tfm_params_numel(const tfm_params *p)
{
    if (!p) {
        tfm__fail(TFM_ERR_NULL, "tfm_params_numel: params is NULL");
        return -1;
    }
    return p->numel;
}

static int check_index(const char *op, const tfm_params *p, int64_t index)
{
    if (!p) {
        tfm__fail(TFM_ERR_NULL, "%s: params is NULL", op);
        return -1;
    }
    if (index < 0 || index >= p->count) {
        tfm__fail(TFM_ERR_RANGE, "%s: index %lld is outside [0, %lld)", op,
                  (long long)index, (long long)p->count);
        return -1;
    }
    return 0;
}

tfm_tensor *tfm_params_at(const tfm_params *p, int64_t index)
{
    return check_index("tfm_params_at", p, index) < 0 ? NULL : p->tensors[index];
}

const char *tfm_params_name(const tfm_params *p, int64_t index)
{
    return check_index("tfm_params_name", p, index) < 0 ? NULL : p->names[index];
}

int64_t tfm__params_index_of(const tfm_params *p, const char *name)
{
    return p->slot_count ? p->slots[slot_of(p, name)] - 1 : -1;
}

tfm_tensor *tfm_params_find(const tfm_params *p, const char *name)
{
    if (!p || !name) {
        tfm__fail(TFM_ERR_NULL, "tfm_params_find: %s is NULL", p ? "name" : "params");
        return NULL;
    }
    int64_t index = tfm__params_index_of(p, name);
    tfm_tensor *t = index >= 0 ? p->tensors[index] : NULL;
    if (!t)
        tfm__fail(TFM_ERR_ARG, "tfm_params_find: no parameter is named \"%s\"", name);
    return t;
}

void tfm__params_limit(tfm_params *p, int64_t max_numel)
{
    p->max_numel = max_numel;
}

void tfm__params_truncate(tfm_params *p, int64_t count)
{
    if (p->count <= count)
        return;
    while (p->count > count) {
        p->count--;
        p->numel = p->offsets[p->count];
        free(p->tensors[p->count]);
        free(p->names[p->count]);
    }
    index_all(p);
    /* the freed tail of the blocks must read as zeros when reused */
    memset(p->values + p->numel, 0, (size_t)(p->values_capacity - p->numel) * sizeof(float));
    memset(p->grads + p->numel, 0, (size_t)(p->grads_capacity - p->numel) * sizeof(float));
}

float *tfm_params_values(tfm_params *p)
{
    if (!p)
        tfm__fail(TFM_ERR_NULL, "tfm_params_values: params is NULL");
    return p ? p->values : NULL;
}

float *tfm_params_grads(tfm_params *p)
{
    if (!p)
        tfm__fail(TFM_ERR_NULL, "tfm_params_grads: params is NULL");
    return p ? p->grads : NULL;
}

tfm_status tfm_params_zero_grad(tfm_params *p)
{
    if (!p)
        return tfm__fail(TFM_ERR_NULL, "tfm_params_zero_grad: params is NULL");
    if (p->numel)
        memset(p->grads, 0, (size_t)p->numel * sizeof(float));
    return TFM_OK;
}

tfm_status tfm_params_clip_grad_norm(tfm_params *p, float max_norm, float *norm_out)
{
    const char *op = "tfm_params_clip_grad_norm";
    if (!p)
        return tfm__fail(TFM_ERR_NULL, "%s: params is NULL", op);
    if (!(max_norm > 0.0f))
        return tfm__fail(TFM_ERR_ARG, "%s: max_norm %g must be positive", op, (double)max_norm);
    /* four accumulators: one dependent chain would bound this pass by the
     * add latency instead of memory */
    double sums[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t i = 0;
    for (; i + 4 <= p->numel; i += 4)
        for (int k = 0; k < 4; k++)
            sums[k] += (double)p->grads[i + k] * p->grads[i + k];
    for (; i < p->numel; i++)
        sums[0] += (double)p->grads[i] * p->grads[i];
    double norm = sqrt((sums[0] + sums[1]) + (sums[2] + sums[3]));
    if (norm_out)
        *norm_out = (float)norm;
    if (!isfinite(norm))
        return tfm__fail(TFM_ERR_NUMERIC, "%s: the gradient norm is not finite", op);
    /* as torch: scale by min(1, max_norm / (norm + 1e-6)) */
    float factor = (float)(max_norm / (norm + 1e-6));
    if (factor < 1.0f) {
        for (int64_t j = 0; j < p->numel; j++)
            p->grads[j] *= factor;
    }
    return TFM_OK;
}
