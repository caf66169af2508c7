/* The model's float32 weights packed for decoding's products
 * (core/gemm_packed.h), once per run: a step's 16 to 256 rows do not pay
 * for the BLAS packing them at every product, and the encoding's products
 * on this CPU's widest vectors (the packed kernel's AVX-512 where OpenBLAS
 * runs its AVX2 kernels) take 0.5-0.6 of the BLAS's time. The encoder's
 * hang on its weights while the run encodes (tfm_tensor's packed), so that
 * the model's own forward multiplies by them; only then, so that training
 * and every other forward never see them. A run packs the weights as
 * they are when it starts, so a model trained, loaded into or quantized
 * between runs decodes with its new weights; packing reads them once, a
 * small part of a run's steps, which read them at every step. A product
 * whose weight is int8 (tfm_model_quantize) is left unpacked: its int8
 * weight was packed once when quantized. */
#include <stdlib.h>

#include "core/error.h"
#include "decode/decode.h"
#include "model/model.h"
#include "nn/layer.h"

/* Rows [first, first + count) of a weight, and of its bias (NULL: none). */
typedef struct part {
    const tfm_tensor *w, *b;
    int64_t first, count;
} part;

static part whole(const tfm_layer *linear)
{
    return (part){linear->weight, linear->bias, 0, linear->weight->shape[0]};
}

/* A product's parts, side by side in its output columns: self-attention's
 * queries, keys and values in one product (fused or not), cross-attention's
 * queries (a fused weight's first third), and its keys and values (the
 * other two). Returns their count. */
static int parts_of(const tfm_layer *block, int product, part *parts)
{
    const tfm_layer *self = block->children[TFM__BLK_SELF_ATTN];
    const tfm_layer *cross = block->children[TFM__BLK_CROSS_ATTN];
    const tfm_layer *ff = block->children[TFM__BLK_FF];
    switch (product) {
    case DECODE_SELF_QKV:
        if (self->fused) {
            parts[0] = (part){self->weight, self->bias, 0, self->weight->shape[0]};
            return 1;
        }
        for (int i = 0; i < 3; i++)
            parts[i] = whole(self->children[TFM__ATT_Q + i]);
        return 3;
    case DECODE_SELF_OUT:
        parts[0] = whole(self->children[TFM__ATT_OUT]);
        return 1;
    case DECODE_CROSS_Q:
        if (cross->fused)
            parts[0] = (part){cross->weight, cross->bias, 0, cross->weight->shape[0] / 3};
        else
            parts[0] = whole(cross->children[TFM__ATT_Q]);
        return 1;
    case DECODE_CROSS_OUT:
        parts[0] = whole(cross->children[TFM__ATT_OUT]);
        return 1;
    case DECODE_FF_IN:
        parts[0] = whole(ff->children[TFM__FF_LINEAR1]);
        return 1;
    case DECODE_CROSS_KV:
        if (cross->fused) {
            int64_t inner = cross->weight->shape[0] / 3;
            parts[0] = (part){cross->weight, cross->bias, inner, 2 * inner};
            return 1;
        }
        parts[0] = whole(cross->children[TFM__ATT_K]);
        parts[1] = whole(cross->children[TFM__ATT_V]);
        return 2;
    case DECODE_FF_UP:
        if (!ff->children[TFM__FF_LINEAR_UP])
            return 0;
        parts[0] = whole(ff->children[TFM__FF_LINEAR_UP]);
        return 1;
    default:
        parts[0] = whole(ff->children[TFM__FF_LINEAR2]);
        return 1;
    }
}

/* The product's output columns, or 0 when it is not packed: absent, or
 * an int8 part. */
static int64_t columns_of(const part *parts, int n)
{
    int64_t out = 0;
    for (int i = 0; i < n; i++) {
        if (parts[i].w->int8)
            return 0;
        out += parts[i].count;
    }
    return out;
}

/* Lays out p over *floats (NULL: only counts them) and packs it there. */
static int64_t pack(tfm__packed *p, const part *parts, int n, float *floats)
{
    int64_t out = columns_of(parts, n), in = n ? parts[0].w->shape[1] : 0;
    *p = (tfm__packed){0};
    if (out == 0)
        return 0;
    if (floats) {
        tfm__packed_init(p, out, in, floats);
        int64_t first = 0;
        for (int i = 0; i < n; first += parts[i++].count) {
            const float *b = values(parts[i].b);
            tfm__pack_columns(p, first, tfm__f32(parts[i].w) + parts[i].first * in,
                              parts[i].count, b ? b + parts[i].first : NULL);
        }
    }
    return tfm__packed_floats(out, in);
}

/* An encoder layer's linear layers, as its forward multiplies by them
 * (tfm_linear): the fused queries, keys and values or each, the output,
 * the feed-forward's. Returns their count. */
static int encoder_linears(const tfm_layer *block, tfm_layer **linears)
{
    tfm_layer *att = block->children[TFM__BLK_SELF_ATTN], *ff = block->children[TFM__BLK_FF];
    int n = 0;
    if (att->fused)
        linears[n++] = att;
    else
        for (int i = 0; i < 3; i++)
            linears[n++] = att->children[TFM__ATT_Q + i];
    linears[n++] = att->children[TFM__ATT_OUT];
    linears[n++] = ff->children[TFM__FF_LINEAR1];
    if (ff->children[TFM__FF_LINEAR_UP])
        linears[n++] = ff->children[TFM__FF_LINEAR_UP];
    linears[n++] = ff->children[TFM__FF_LINEAR2];
    return n;
}

/* Every product over d->packed from its start (NULL: counts the floats):
 * the encoder's, then the decoder's when the steps use them. */
static int64_t pack_all(tfm_decoding *d, float *floats)
{
    const tfm_model *m = d->model;
    int64_t used = 0;
    part parts[3];
    tfm_layer *linears[ENCODE_LINEARS];
    for (int32_t l = 0; l < m->options.encoder_layers; l++) {
        int n = encoder_linears(m->encoder->children[l], linears);
        for (int i = 0; i < n; i++) {
            tfm__packed_linear *p = &d->encoder_products[l][i];
            parts[0] = whole(linears[i]);
            used += pack(&p->product, parts, 1, floats ? floats + used : NULL);
            p->bias = values(linears[i]->bias);
        }
    }
    if (!d->products)
        return used;
    for (int32_t l = 0; l < d->layers; l++)
        for (int product = 0; product < DECODE_PRODUCTS; product++) {
            int n = parts_of(m->decoder->children[l], product, parts);
            used += pack(&d->products[l][product], parts, n, floats ? floats + used : NULL);
        }
    parts[0] = whole(m->generator);
    return used + pack(&d->generator, parts, 1, floats ? floats + used : NULL);
}

tfm_status tfm__decode_pack_weights(tfm_decoding *d)
{
    int64_t floats = pack_all(d, NULL);
    if (floats > d->packed_floats) {
        float *grown = realloc(d->packed, (size_t)floats * sizeof(float));
        if (!grown)
            return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory packing the weights "
                             "(%lld floats)", d->running, (long long)floats);
        d->packed = grown;
        d->packed_floats = floats;
    }
    pack_all(d, d->packed);
    return TFM_OK;
}

void tfm__decode_hang_encoder_weights(tfm_decoding *d, int on)
{
    const tfm_model *m = d->model;
    tfm_layer *linears[ENCODE_LINEARS];
    for (int32_t l = 0; l < m->options.encoder_layers; l++) {
        int n = encoder_linears(m->encoder->children[l], linears);
        for (int i = 0; i < n; i++) {
            const tfm__packed_linear *p = &d->encoder_products[l][i];
            linears[i]->weight->packed = on && p->product.panels ? p : NULL;
        }
    }
}
