/* One step of the decoder. Cached: the newest position only, run outside
 * the tape straight on the layers' parameters, each decoder layer
 * appending its self-attention key and value to the caches and attending
 * over the cross-attention keys and values computed once per source.
 * Recomputed: the whole prefix through tfm_model_decode, the tutorials'
 * way (the reference the cached path is tested against). */
#include <math.h>
#include <string.h>

#include "autograd/tape.h"
#include "core/gemm.h"
#include "core/gemm_int8.h"
#include "decode/decode.h"
#include "model/model.h"
#include "nn/layer.h"
#include "ops/activation.h"
#include "ops/adapter.h"
#include "nn/relative_bias.h"
#include "ops/layer_norm.h"


/* out[i, 0:out_f] (row stride ldc) = in[i] W^T + b for n rows, W [out_f, in_f]. */
void tfm__decode_project(const float *in, int64_t n, int64_t in_f, const float *w,
                         const float *b, int64_t out_f, float *out, int64_t ldc)
{
    tfm__sgemm_bias(0, 1, n, out_f, in_f, 1.0f, in, in_f, w, in_f, b, out, ldc);
}

void tfm__decode_product(const tfm_tensor *w, const tfm_tensor *b, int64_t first,
                         int64_t count, const float *in, int64_t n, float *out, int64_t ldc)
{
    if (w->int8 && tfm__int8_tensor_product(w, first, count, n, in, out, ldc) == 0)
        return;
    int64_t in_f = w->shape[1];
    const float *bias = values(b);
    tfm__decode_project(in, n, in_f, tfm__f32(w) + first * in_f, bias ? bias + first : NULL,
                        count, out, ldc);
}

void tfm__decode_linear(const tfm_layer *linear, const float *in, int64_t n, float *out,
                        int64_t ldc)
{
    tfm__decode_product(linear->weight, linear->bias, 0, linear->weight->shape[0], in, n, out,
                        ldc);
}

int tfm__decode_packed_product(const tfm__packed *p, const float *in, int64_t n, float *out,
                               int64_t ldc)
{
    return p->panels && tfm__packed_product(p, in, n, out, ldc) == 0;
}

static void adapt(const tfm_decoding *d, const tfm_tensor *w, int64_t first, int64_t count,
                  const float *in, int64_t n, float *out, int64_t ldc)
{
    int64_t in_f = w->shape[1];
    tfm__adapter_add_rows(d->adapter, tfm__f32(w) + first * in_f, count, in_f, in, n, out, ldc);
}

void tfm__decode_adapt_projections(const tfm_decoding *d, const tfm_layer *att, int first,
                                   int count, const float *in, int64_t n, float *out,
                                   int64_t I)
{
    if (!d->adapter)
        return;
    if (att->fused)
        adapt(d, att->weight, first * I, count * I, in, n, out, count * I);
    else
        for (int i = 0; i < count; i++)
            adapt(d, att->children[TFM__ATT_Q + first + i]->weight, 0, I, in, n, out + i * I,
                  count * I);
}

void tfm__decode_adapt_linear(const tfm_decoding *d, const tfm_layer *linear, const float *in,
                              int64_t n, float *out, int64_t ldc)
{
    if (d->adapter)
        adapt(d, linear->weight, 0, linear->weight->shape[0], in, n, out, ldc);
}

void tfm__decode_projections(const tfm_layer *att, int first, int count, const float *in,
                             int64_t n, float *out, int64_t I)
{
    if (att->fused) {
        tfm__decode_product(att->weight, att->bias, first * I, count * I, in, n, out, count * I);
        return;
    }
    /* int8: the rows quantized once for the layers' products */
    const tfm_tensor *weights[3] = {NULL, NULL, NULL};
    for (int i = 0; i < count; i++)
        weights[i] = att->children[TFM__ATT_Q + first + i]->weight;
    if (tfm__int8_tensors_product(weights, count, n, in, out, count * I) == 0)
        return;
    for (int i = 0; i < count; i++)
        tfm__decode_linear(att->children[TFM__ATT_Q + first + i], in, n, out + i * I, count * I);
}

static void layer_norm(const tfm_layer *norm, const float *x, int64_t n, int64_t dim, float *out)
{
    tfm__layer_norm_rows(x, n, dim, tfm__f32(norm->weight), values(norm->bias), norm->eps,
                         norm->rms, out, NULL, NULL);
}

/* The factor the queries are multiplied by: 1/sqrt(d_k), 1/scale or 1. */
static float query_factor(const tfm_decoding *d, const tfm_layer *att)
{
    if (att->unscaled)
        return 1.0f;
    return att->scale ? 1.0f / tfm__f32(att->scale)[0] : 1.0f / sqrtf((float)d->dk);
}

static void self_attention(tfm_decoding *d, const group *g, int32_t l, const tfm_layer *att,
                           const float *in, int64_t n, const int32_t *rows, int64_t t, float *out)
{
    int64_t I = d->inner;
    tfm_layer *const *c = att->children;
    const tfm__packed *products = d->weights_packed->products[l];
    if (!tfm__decode_packed_product(&products[DECODE_SELF_QKV], in, n, g->qkv, 3 * I))
        tfm__decode_projections(att, 0, 3, in, n, g->qkv, I);
    tfm__decode_adapt_projections(d, att, 0, 3, in, n, g->qkv, I);
    tfm__decode_self_attend(d, g, l, rows, n, t, query_factor(d, att));
    if (!tfm__decode_packed_product(&products[DECODE_SELF_OUT], g->ctx, n, out, d->d))
        tfm__decode_linear(c[TFM__ATT_OUT], g->ctx, n, out, d->d);
    tfm__decode_adapt_linear(d, c[TFM__ATT_OUT], g->ctx, n, out, d->d);
}

static void cross_attention(tfm_decoding *d, const group *g, int32_t l, const tfm_layer *att,
                            const float *in, int64_t n, const int32_t *rows, int64_t S, float *out)
{
    int64_t I = d->inner;
    const tfm__packed *products = d->weights_packed->products[l];
    if (!tfm__decode_packed_product(&products[DECODE_CROSS_Q], in, n, g->qkv, I))
        tfm__decode_projections(att, 0, 1, in, n, g->qkv, I);
    tfm__decode_adapt_projections(d, att, 0, 1, in, n, g->qkv, I);
    tfm__decode_cross_attend(d, g, l, rows, n, S, query_factor(d, att));
    if (!tfm__decode_packed_product(&products[DECODE_CROSS_OUT], g->ctx, n, out, d->d))
        tfm__decode_linear(att->children[TFM__ATT_OUT], g->ctx, n, out, d->d);
    tfm__decode_adapt_linear(d, att->children[TFM__ATT_OUT], g->ctx, n, out, d->d);
}

static void feed_forward(tfm_decoding *d, const group *g, int32_t l, const tfm_layer *ff,
                         const float *in, int64_t n, float *out)
{
    int64_t width = d->d_ff;
    const tfm__packed *products = d->weights_packed->products[l];
    if (!tfm__decode_packed_product(&products[DECODE_FF_IN], in, n, g->ff, width))
        tfm__decode_linear(ff->children[TFM__FF_LINEAR1], in, n, g->ff, width);
    tfm__decode_adapt_linear(d, ff->children[TFM__FF_LINEAR1], in, n, g->ff, width);
    float *hv = g->ff;
    tfm__activation_rows(ff->activation, hv, n * width, hv);
    const tfm_layer *up = ff->children[TFM__FF_LINEAR_UP];
    if (up) {
        float *upv = g->ff + n * width; /* the group's second half (ff_row) */
        if (!tfm__decode_packed_product(&products[DECODE_FF_UP], in, n, upv, width))
            tfm__decode_linear(up, in, n, upv, width);
        for (int64_t i = 0; i < n * width; i++)
            hv[i] *= upv[i];
    }
    if (!tfm__decode_packed_product(&products[DECODE_FF_OUT], hv, n, out, d->d))
        tfm__decode_linear(ff->children[TFM__FF_LINEAR2], hv, n, out, d->d);
    tfm__decode_adapt_linear(d, ff->children[TFM__FF_LINEAR2], hv, n, out, d->d);
}

static void add_into(float *x, const float *y, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        x[i] += y[i];
}

/* One residual sublayer on the stream x: pre-norm x += f(norm(x)),
 * post-norm x = norm(x + f(x)). kind: 0 self-, 1 cross-attention, 2 FF. */
static void sublayer(tfm_decoding *d, const group *g, int32_t l, const tfm_layer *block,
                     int kind, int64_t n, const int32_t *rows, int64_t t, int64_t S)
{
    static const int child[3] = {TFM__BLK_SELF_ATTN, TFM__BLK_CROSS_ATTN, TFM__BLK_FF};
    static const int norm_of[3] = {TFM__BLK_NORM1, TFM__BLK_NORM2, TFM__BLK_NORM3};
    const tfm_layer *f = block->children[child[kind]], *norm = block->children[norm_of[kind]];
    int64_t D = d->d;
    const float *in = g->x;
    if (block->norm_first) {
        layer_norm(norm, g->x, n, D, g->h);
        in = g->h;
    }
    if (kind == 0)
        self_attention(d, g, l, f, in, n, rows, t, g->y);
    else if (kind == 1)
        cross_attention(d, g, l, f, in, n, rows, S, g->y);
    else
        feed_forward(d, g, l, f, in, n, g->y);
    if (block->norm_first) {
        add_into(g->x, g->y, n * D);
    } else {
        add_into(g->y, g->x, n * D);
        layer_norm(norm, g->y, n, D, g->x);
    }
}

/* Logits [n, vocab] of position t for the group's rows listed, whose input
 * tokens are their hist[t]. */
static void cached_step(tfm_decoding *d, const group *g, int64_t n, const int32_t *rows,
                        int64_t t, int64_t S)
{
    const tfm_model *m = d->model;
    int64_t D = d->d, T1 = d->max_len + 1;
    const tfm_layer *positions = m->tgt_positions;
    const float *table = tfm__f32(m->tgt_embedding->weight);
    const float *pos = positions ? tfm__f32(positions->weight ? positions->weight
                                                              : positions->table) +
                                       (m->options.position_offset + t) * D
                                 : NULL;
    float scale = m->options.embedding_scale == TFM_EMBEDDING_SCALE_SQRT_D ? sqrtf((float)D)
                  : m->tgt_scale ? tfm__f32(m->tgt_scale)[0] : 1.0f;
    int scaled = m->options.embedding_scale != TFM_EMBEDDING_SCALE_NONE;
    for (int64_t i = 0; i < n; i++) {
        const float *e = table + (int64_t)d->hist[rows[i] * T1 + t] * D;
        float *x = g->x + i * D;
        for (int64_t j = 0; j < D; j++)
            x[j] = (scaled ? e[j] * scale : e[j]) + (pos ? pos[j] : 0.0f);
    }
    if (m->tgt_relative_bias)
        tfm__relative_bias_row(m->tgt_relative_bias, t, m->options.relative_attention_max_distance,
                               g->position_bias, d->self_tiled);
    if (m->tgt_embedding_norm) {
        layer_norm(m->tgt_embedding_norm, g->x, n, D, g->h);
        memcpy(g->x, g->h, (size_t)(n * D) * sizeof(float));
    }
    const tfm_layer *decoder = m->decoder;
    for (int32_t l = 0; l < d->layers; l++)
        for (int kind = 0; kind < 3; kind++)
            sublayer(d, g, l, decoder->children[l], kind, n, rows, t, S);
    const tfm_layer *final_norm = decoder->children[decoder->n_children - 1];
    const float *out = g->x;
    if (final_norm) {
        layer_norm(final_norm, g->x, n, D, g->h);
        out = g->h;
    }
    if (m->options.generator_rescale) {
        float rescale = tfm__generator_rescale(m);
        for (int64_t i = 0; i < n * D; i++)
            g->h[i] = out[i] * rescale;
        out = g->h;
    }
    if (!tfm__decode_packed_product(&d->weights_packed->generator, out, n, g->logits, d->vocab))
        tfm__decode_linear(m->generator, out, n, g->logits, d->vocab);
}

static tfm_status recomputed_step(tfm_decoding *d, const group *g, int64_t n,
                                  const int32_t *rows, int64_t t, int64_t S)
{
    int64_t D = d->d, T1 = d->max_len + 1, len = t + 1, V = d->vocab;
    for (int64_t i = 0; i < n; i++) {
        int64_t b = rows[i] / d->beam;
        memcpy(d->prefix + i * len, d->hist + rows[i] * T1, (size_t)len * sizeof(int32_t));
        memcpy(d->memory_rows + i * S * D, d->memory + b * S * D, (size_t)(S * D) * sizeof(float));
        memcpy(d->src_rows + i * S, d->src + b * S, (size_t)S * sizeof(int32_t));
    }
    tfm_tensor prefix, memory, src;
    tensor_over(&prefix, TFM_I32, 2, (const int64_t[]){n, len}, d->prefix);
    tensor_over(&memory, TFM_F32, 3, (const int64_t[]){n, S, D}, d->memory_rows);
    tensor_over(&src, TFM_I32, 2, (const int64_t[]){n, S}, d->src_rows);
    tfm_tape *tape = d->tape;
    tfm_tape_reset(tape);
    tfm_tensor *memory_mask = NULL;
    if (d->o.src_pad_id >= 0 &&
        !(memory_mask = tfm_mask_padding(tape, &src, d->o.src_pad_id, TFM_I32)))
        return tfm_last_status();
    tfm_tensor *weights = NULL;
    tfm_tensor *logits = tfm__model_decode_attending(tape, d->model, &prefix, &memory,
                                                     tfm_mask_causal(tape, len, TFM_I32),
                                                     memory_mask,
                                                     d->head_weights ? &weights : NULL);
    if (!logits)
        return tfm_last_status();
    for (int64_t i = 0; i < n; i++)
        memcpy(g->logits + i * V, tfm__f32(logits) + (i * len + t) * V, (size_t)V * sizeof(float));
    /* weights [n, heads, len, S]: position t's, as the cached step keeps them */
    for (int64_t i = 0; weights && i < n; i++)
        for (int64_t h = 0; h < d->heads; h++)
            memcpy(head_weights_of(d, rows[i], h),
                   tfm__f32(weights) + ((i * d->heads + h) * len + t) * S,
                   (size_t)S * sizeof(float));
    return TFM_OK;
}

/* Each of the n rows' alignment of step t: its heads' weights averaged. */
static void keep_alignments(tfm_decoding *d, const int32_t *rows, int64_t n, int64_t t,
                            int64_t S)
{
    for (int64_t i = 0; i < n; i++) {
        float *out = alignments_of(d, d->alignments, rows[i]) + t * d->max_src_len;
        for (int64_t s = 0; s < S; s++) {
            float sum = 0.0f;
            for (int64_t h = 0; h < d->heads; h++)
                sum += head_weights_of(d, rows[i], h)[s];
            out[s] = sum / (float)d->heads;
        }
    }
}

/* The logits of the group's n rows listed in g->active at step t. */
tfm_status tfm__decode_step(tfm_decoding *d, const group *g, int64_t n, int64_t t, int64_t S)
{
    tfm_status status = TFM_OK;
    if (d->o.use_cache)
        cached_step(d, g, n, g->active, t, S);
    else
        status = recomputed_step(d, g, n, g->active, t, S);
    if (status == TFM_OK && d->alignments)
        keep_alignments(d, g->active, n, t, S);
    return status;
}
