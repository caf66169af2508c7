/* int8 inference: a model's linear weights quantized per output channel
 * (core/gemm_int8.h), each weight tensor pointing to its int8 parts so that
 * every product reading it (the linear op, the decoder's steps) takes the
 * int8 kernel instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/gemm_int8.h"
#include "core/params.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "nn/layer.h"

/* Appends the linear's weight (with its parts) to list at *n. */
static void add(const tfm_model *m, tfm_tensor *weight, const tfm_tensor *bias, int32_t parts,
                tfm__quantizable *list, int64_t *n)
{
    if (list) {
        const char *name = NULL;
        for (int64_t i = 0; i < tfm_params_count(m->params) && !name; i++)
            if (tfm_params_at(m->params, i) == weight)
                name = tfm_params_name(m->params, i);
        list[*n] = (tfm__quantizable){weight, bias, name, parts};
    }
    (*n)++;
}

static void add_linear(const tfm_model *m, const tfm_layer *linear, tfm__quantizable *list,
                       int64_t *n)
{
    add(m, linear->weight, linear->bias, 1, list, n);
}

static void add_attention(const tfm_model *m, const tfm_layer *att, tfm__quantizable *list,
                          int64_t *n)
{
    tfm_layer *const *c = att->children;
    if (att->fused) {
        add(m, att->weight, att->bias, 3, list, n);
    } else {
        add_linear(m, c[TFM__ATT_Q], list, n);
        add_linear(m, c[TFM__ATT_K], list, n);
        add_linear(m, c[TFM__ATT_V], list, n);
    }
    add_linear(m, c[TFM__ATT_OUT], list, n);
}

int64_t tfm__model_quantizable(const tfm_model *m, uint32_t what, tfm__quantizable *list)
{
    int64_t n = 0;
    const tfm_layer *stacks[2] = {m->encoder, m->decoder};
    const int32_t layers[2] = {m->options.encoder_layers, m->options.decoder_layers};
    for (int s = 0; s < 2 && (what & TFM_QUANTIZE_LAYERS); s++)
        for (int32_t l = 0; l < layers[s]; l++) {
            tfm_layer *const *c = stacks[s]->children[l]->children;
            add_attention(m, c[TFM__BLK_SELF_ATTN], list, &n);
            if (s == 1)
                add_attention(m, c[TFM__BLK_CROSS_ATTN], list, &n);
            add_linear(m, c[TFM__BLK_FF]->children[TFM__FF_LINEAR1], list, &n);
            add_linear(m, c[TFM__BLK_FF]->children[TFM__FF_LINEAR2], list, &n);
        }
    if (what & TFM_QUANTIZE_GENERATOR)
        add_linear(m, m->generator, list, &n);
    return n;
}

static void free_weights(tfm__int8_weight **w, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        tfm__int8_free(w[i]);
    free(w);
}

/* Part p of q's weight: rows, and their int8 weight into *out. */
static tfm_status quantize_part(const char *op, const tfm__quantizable *q, int32_t p,
                                const int8_t *values, const float *scales,
                                tfm__int8_weight **out)
{
    int64_t rows = q->weight->shape[0] / q->parts, in = q->weight->shape[1];
    const float *bias = q->bias ? tfm__f32(q->bias) + p * rows : NULL;
    if (!values)
        return tfm__int8_quantize(op, rows, in, tfm__f32(q->weight) + p * rows * in, bias, out);
    return tfm__int8_from_values(op, rows, in, values + p * rows * in, scales + p * rows, bias,
                                 out);
}

tfm_status tfm__model_quantize(const char *op, tfm_model *m, uint32_t what,
                               const int8_t *const *values, const float *const *scales)
{
    int64_t n = tfm__model_quantizable(m, what, NULL), parts = 0;
    tfm__quantizable *list = malloc((size_t)(n ? n : 1) * sizeof *list);
    if (list)
        tfm__model_quantizable(m, what, list);
    for (int64_t i = 0; list && i < n; i++)
        parts += list[i].parts;
    tfm__int8_weight **weights = list ? calloc((size_t)(parts ? parts : 1), sizeof *weights)
                                      : NULL;
    if (!weights) {
        free(list);
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld int8 weights", op,
                         (long long)parts);
    }
    tfm_status s = TFM_OK;
    for (int64_t i = 0, k = 0; i < n && s == TFM_OK; i++)
        for (int32_t p = 0; p < list[i].parts && s == TFM_OK; p++, k++)
            s = quantize_part(op, &list[i], p, values ? values[i] : NULL,
                              values ? scales[i] : NULL, &weights[k]);
    if (s != TFM_OK) {
        free_weights(weights, parts);
        free(list);
        return s;
    }
    /* nothing fails from here: the model changes. Its float32 values
     * become the int8 ones times their scales, as a load makes them: the
     * products int8 does not pay for (tfm__int8_pays) read them, and a
     * quantized model must decode as its saved and loaded self does. */
    for (int64_t i = 0, k = 0; i < n; k += list[i].parts, i++) {
        tfm_tensor *w = list[i].weight;
        w->int8 = weights + k;
        w->int8_parts = list[i].parts;
        w->requires_grad = 0; /* never trained again */
        if (tfm__int8_replaces_float(m, w))
            for (int32_t p = 0; p < list[i].parts; p++)
                tfm__int8_dequantize(weights[k + p],
                                     tfm__f32(w) + p * (w->numel / list[i].parts));
    }
    free(list);
    m->int8 = weights;
    m->n_int8 = parts;
    m->quantized = what;
    return tfm_model_set_training(m, 0);
}

int tfm__int8_replaces_float(const tfm_model *m, const tfm_tensor *w)
{
    return w->int8 && !(m->options.tie_generator && w == m->generator->weight);
}

int tfm__model_int8_pays(const tfm_model *m)
{
    for (int64_t i = 0; i < m->n_int8; i++)
        if (tfm__int8_pays(m->int8[i]->out, m->int8[i]->in))
            return 1;
    return 0;
}

tfm_status tfm_model_quantize(tfm_model *m, tfm_quantize what)
{
    const char *op = "tfm_model_quantize";
    if (!m)
        return tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
    if (what & ~(uint32_t)(TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR) ||
        !(what & TFM_QUANTIZE_LAYERS))
        return tfm__fail(TFM_ERR_ARG, "%s: what 0x%x is not TFM_QUANTIZE_LAYERS, with "
                         "TFM_QUANTIZE_GENERATOR or not", op, (unsigned)what);
    if (m->quantized)
        return tfm__fail(TFM_ERR_STATE, "%s: the model is quantized already", op);
    return tfm__model_quantize(op, m, what, NULL, NULL);
}

tfm_quantize tfm_model_quantized(const tfm_model *m)
{
    if (!m) {
        tfm__fail(TFM_ERR_NULL, "tfm_model_quantized: model is NULL");
        return 0;
    }
    return m->quantized;
}

tfm_status tfm__model_refuse_quantized(const char *op, const tfm_model *m)
{
    if (m && m->quantized)
        return tfm__fail(TFM_ERR_STATE, "%s: the model is quantized to int8 "
                         "(tfm_model_quantize), for inference only", op);
    return TFM_OK;
}

void tfm__model_free_int8(tfm_model *m)
{
    free_weights(m->int8, m->n_int8);
}

/* --- files ------------------------------------------------------------------------
 * A quantized model's file holds each quantized weight as its int8 values
 * [out, in] (I8) under "tfm.int8.<name>" and its per-channel scales [out]
 * (F32) under "tfm.int8_scales.<name>", in place of its float32 values
 * (beside them for a tied generator's table: tfm__int8_replaces_float), and
 * says what was quantized in "tfm.int8". */

#define VALUES_PREFIX TFM__RESERVED_TENSOR_PREFIX "int8."
#define SCALES_PREFIX TFM__RESERVED_TENSOR_PREFIX "int8_scales."
#define NAME_BYTES (TFM_NAME_MAX + 32)

const char *tfm__int8_what_name(uint32_t what)
{
    return what == (TFM_QUANTIZE_LAYERS | TFM_QUANTIZE_GENERATOR) ? "layers,generator"
           : what == TFM_QUANTIZE_LAYERS                         ? "layers"
                                                                 : NULL;
}

void tfm__int8_tensors_free(tfm__int8_tensors *t)
{
    free(t->names);
    free(t->tensors);
    free(t->headers);
    free(t->text);
    free(t->values);
    memset(t, 0, sizeof *t);
}

tfm_status tfm__int8_tensors_make(const char *op, const tfm_model *m, tfm__int8_tensors *t)
{
    memset(t, 0, sizeof *t);
    int64_t n = tfm__model_quantizable(m, m->quantized, NULL), bytes = 0;
    tfm__quantizable *list = malloc((size_t)(n ? n : 1) * sizeof *list);
    if (list)
        tfm__model_quantizable(m, m->quantized, list);
    for (int64_t i = 0; list && i < n; i++) /* values, then scales 4-aligned */
        bytes += (list[i].weight->numel + 3) / 4 * 4 + list[i].weight->shape[0] * 4;
    t->count = 2 * n;
    t->names = malloc((size_t)(t->count + 1) * sizeof *t->names);
    t->tensors = malloc((size_t)(t->count + 1) * sizeof *t->tensors);
    t->headers = malloc((size_t)(t->count + 1) * sizeof *t->headers);
    t->text = malloc((size_t)(t->count + 1) * NAME_BYTES);
    t->values = malloc((size_t)(bytes ? bytes : 1));
    if (!list || !t->names || !t->tensors || !t->headers || !t->text || !t->values) {
        free(list);
        tfm__int8_tensors_free(t);
        return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the int8 weights", op);
    }
    unsigned char *at = t->values;
    for (int64_t i = 0, k = 0; i < n; k += list[i].parts, i++) {
        const tfm_tensor *w = list[i].weight;
        int64_t out = w->shape[0], rows = out / list[i].parts, in = w->shape[1];
        int8_t *values = (int8_t *)at;
        float *scales = (float *)(at + (w->numel + 3) / 4 * 4);
        at = (unsigned char *)(scales + out);
        for (int32_t p = 0; p < list[i].parts; p++)
            tfm__int8_values(m->int8[k + p], values + p * rows * in, scales + p * rows);
        tfm_tensor *h = &t->headers[2 * i];
        tfm__tensor_init(h, TFM__I8, 2, w->shape, w->numel, TFM_STORAGE_HEAP);
        h->data = values;
        tfm__tensor_init(h + 1, TFM_F32, 1, w->shape, out, TFM_STORAGE_HEAP);
        h[1].data = scales;
        char *name = t->text + 2 * i * NAME_BYTES;
        snprintf(name, NAME_BYTES, VALUES_PREFIX "%s", list[i].name);
        snprintf(name + NAME_BYTES, NAME_BYTES, SCALES_PREFIX "%s", list[i].name);
        t->names[2 * i] = name;
        t->names[2 * i + 1] = name + NAME_BYTES;
        t->tensors[2 * i] = h;
        t->tensors[2 * i + 1] = h + 1;
    }
    free(list);
    return TFM_OK;
}

/* The file's tensor named prefix + name, if it is of the dtype (NULL: any
 * float) and shape; else -1 with TFM_ERR_FORMAT. */
static int64_t tensor_of(const char *ctx, const tfm_safetensors *file, const char *prefix,
                         const char *name, const char *dtype, int32_t ndim, const int64_t *shape)
{
    char full[NAME_BYTES];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    int64_t index = tfm__safetensors_find(file, full);
    if (index < 0) {
        tfm__fail(TFM_ERR_FORMAT, "%s: tensor \"%s\" is missing: the file says its model is "
                  "quantized (" TFM__MODEL_KEY_PREFIX "int8)", ctx, full);
        return -1;
    }
    tfm__tensor_info info;
    tfm__safetensors_info(file, index, &info);
    int fits = dtype ? strcmp(info.dtype_name, dtype) == 0 : info.is_float;
    fits = fits && info.ndim == ndim;
    for (int32_t d = 0; fits && d < ndim; d++)
        fits = info.shape[d] == shape[d];
    if (!fits) {
        char want[64];
        tfm__fail(TFM_ERR_FORMAT, "%s: tensor \"%s\" is %s, not %s %s", ctx, full,
                  info.dtype_name, dtype ? dtype : "a float",
                  tfm__dims_str(shape, ndim, want, sizeof want));
        return -1;
    }
    return index;
}

tfm_status tfm__int8_read(const char *op, const char *ctx, tfm_model *m, uint32_t what,
                          const tfm_safetensors *file)
{
    int64_t n = tfm__model_quantizable(m, what, NULL);
    tfm__quantizable *list = malloc((size_t)(n ? n : 1) * sizeof *list);
    int8_t **values = calloc((size_t)(n ? n : 1), sizeof *values);
    float **scales = calloc((size_t)(n ? n : 1), sizeof *scales);
    tfm_status s = TFM_OK;
    if (!list || !values || !scales)
        s = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the int8 weights", ctx);
    else
        tfm__model_quantizable(m, what, list);
    for (int64_t i = 0; s == TFM_OK && i < n; i++) {
        const tfm_tensor *w = list[i].weight;
        int64_t at = tensor_of(ctx, file, VALUES_PREFIX, list[i].name, "I8", 2, w->shape);
        int64_t scales_at = at < 0 ? -1
                                   : tensor_of(ctx, file, SCALES_PREFIX, list[i].name, NULL, 1,
                                               w->shape);
        if (scales_at < 0) {
            s = tfm_last_status();
            break;
        }
        values[i] = malloc((size_t)w->numel);
        scales[i] = malloc((size_t)w->shape[0] * sizeof **scales);
        if (!values[i] || !scales[i]) {
            s = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for \"%s\"", ctx, list[i].name);
            break;
        }
        tfm__safetensors_read_i8(file, at, values[i]);
        tfm__safetensors_read_f32(file, scales_at, scales[i]);
    }
    if (s == TFM_OK) {
        s = tfm__model_quantize(op, m, what, (const int8_t *const *)values,
                                (const float *const *)scales);
        if (s == TFM_ERR_ARG || s == TFM_ERR_NUMERIC)
            s = tfm__fail_because(TFM_ERR_FORMAT, "%s: its int8 weights are not usable", ctx);
    }
    for (int64_t i = 0; values && scales && i < n; i++) {
        free(values[i]);
        free(scales[i]);
    }
    free(values);
    free(scales);
    free(list);
    return s;
}
