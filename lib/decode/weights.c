/* The model's float32 weights packed for decoding's products
 * (core/gemm_packed.h) in a tfm__decode_weights: a step's 16 to 256 rows
 * do not pay for the BLAS packing them at every product, and the
 * encoding's products on this CPU's widest vectors (the packed kernel's
 * AVX-512 where OpenBLAS runs its AVX2 kernels) take 0.5-0.6 of the BLAS's
 * time. The encoder's are listed on the decoding's tape
 * (tfm__tape_set_packed), where the model's own forward finds them while
 * the run encodes; nothing is written into the model, so that any number
 * of decodings read one model, and training and every other forward never
 * see them. A decoding made by tfm_decoding_create packs into its own at
 * the start of each run, so a model trained, loaded into or quantized
 * between runs decodes with its new weights; packing reads them once, a
 * small part of a run's steps, which read them at every step. Decodings
 * made over shared weights (tfm__decoding_create_shared) read them as
 * they were packed. A product whose weight is int8 (tfm_model_quantize)
 * is left unpacked, its int8 weight packed once when quantized, where
 * int8 is the faster kernel on this CPU (tfm__int8_pays); elsewhere its
 * float32 values are packed like a float32 model's.
 * Packed while tfm_matmul_precision is TFM_MATMUL_BFLOAT16, the float32
 * weights are packed in bfloat16 (core/gemm_packed.h), and every product
 * of a decoding that reads them rounds its rows to bfloat16 too. */
#include <stdlib.h>

#include "core/error.h"
#include "core/gemm_int8.h"
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
 * an int8 part that multiplies faster in int8 on this CPU. */
static int64_t columns_of(const part *parts, int n)
{
    int64_t out = 0;
    for (int i = 0; i < n; i++) {
        if (tfm__int8_tensor_pays(parts[i].w))
            return 0;
        out += parts[i].count;
    }
    return out;
}

/* Lays out p over *floats (NULL: only counts them) and packs it there,
 * in bfloat16 with bf16. */
static int64_t pack(tfm__packed *p, const part *parts, int n, int bf16, float *floats)
{
    int64_t out = columns_of(parts, n), in = n ? parts[0].w->shape[1] : 0;
    *p = (tfm__packed){0};
    if (out == 0)
        return 0;
    if (floats) {
        tfm__packed_init(p, out, in, bf16, floats);
        int64_t first = 0;
        for (int i = 0; i < n; first += parts[i++].count) {
            const float *b = values(parts[i].b);
            tfm__pack_columns(p, first, tfm__f32(parts[i].w) + parts[i].first * in,
                              parts[i].count, b ? b + parts[i].first : NULL);
        }
    }
    return tfm__packed_floats(out, in, bf16);
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

/* Every product over floats from its start (NULL: counts the floats):
 * the encoder's float32 linear layers (listed in w->encoder, n_encoder of
 * them), then the decoder's when w packs them. */
static int64_t pack_all(tfm__decode_weights *w, float *floats)
{
    const tfm_model *m = w->model;
    int64_t used = 0;
    part parts[3];
    tfm_layer *linears[ENCODE_LINEARS];
    int64_t listed = 0;
    for (int32_t l = 0; l < m->options.encoder_layers; l++) {
        int n = encoder_linears(m->encoder->children[l], linears);
        for (int i = 0; i < n; i++) {
            tfm__packed_linear *p = &w->encoder[listed];
            parts[0] = whole(linears[i]);
            used += pack(&p->product, parts, 1, w->bf16, floats ? floats + used : NULL);
            p->weight = linears[i]->weight;
            p->bias = values(linears[i]->bias);
            listed += p->product.panels != NULL; /* an int8 one (or a count) is not listed */
        }
    }
    w->n_encoder = listed;
    if (!w->products)
        return used;
    for (int32_t l = 0; l < m->options.decoder_layers; l++)
        for (int product = 0; product < DECODE_PRODUCTS; product++) {
            int n = parts_of(m->decoder->children[l], product, parts);
            used += pack(&w->products[l][product], parts, n, w->bf16,
                         floats ? floats + used : NULL);
        }
    parts[0] = whole(m->generator);
    return used + pack(&w->generator, parts, 1, w->bf16, floats ? floats + used : NULL);
}

tfm__decode_weights *tfm__decode_weights_make(const tfm_model *model, int decoder,
                                              const char *op)
{
    tfm__decode_weights *w = calloc(1, sizeof *w);
    int64_t linears = (int64_t)model->options.encoder_layers * ENCODE_LINEARS;
    if (w) {
        w->model = model;
        w->encoder = calloc(linears > 0 ? (size_t)linears : 1, sizeof *w->encoder);
        if (decoder)
            w->products = calloc(model->options.decoder_layers > 0
                                     ? (size_t)model->options.decoder_layers : 1,
                                 sizeof *w->products);
    }
    if (!w || !w->encoder || (decoder && !w->products)) {
        tfm__decode_weights_free(w);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the packed weights' tables", op);
        return NULL;
    }
    return w;
}

tfm_status tfm__decode_weights_repack(tfm__decode_weights *w, const char *op)
{
    /* set only where the CPU runs the kernel (tfm_set_matmul_precision) */
    w->bf16 = tfm_get_matmul_precision() == TFM_MATMUL_BFLOAT16;
    int64_t floats = pack_all(w, NULL);
    if (floats > w->n_floats) {
        float *grown = realloc(w->floats, (size_t)floats * sizeof(float));
        if (!grown)
            return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory packing the weights "
                             "(%lld floats)", op, (long long)floats);
        w->floats = grown;
        w->n_floats = floats;
    }
    pack_all(w, w->floats);
    w->quantized = w->model->quantized;
    return TFM_OK;
}

tfm__decode_weights *tfm__decode_weights_pack(const tfm_model *model)
{
    const char *op = "tfm__decode_weights_pack";
    if (!model) {
        tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
        return NULL;
    }
    tfm__decode_weights *w = tfm__decode_weights_make(model, 1, op);
    if (w && tfm__decode_weights_repack(w, op) != TFM_OK) {
        tfm__decode_weights_free(w);
        return NULL;
    }
    return w;
}

void tfm__decode_weights_free(tfm__decode_weights *w)
{
    if (!w)
        return;
    free(w->encoder);
    free(w->products);
    free(w->floats);
    free(w);
}

size_t tfm__decode_weights_bytes(const tfm__decode_weights *w)
{
    if (!w)
        return 0;
    size_t tables = (size_t)w->model->options.encoder_layers * ENCODE_LINEARS *
                    sizeof *w->encoder;
    if (w->products)
        tables += (size_t)w->model->options.decoder_layers * sizeof *w->products;
    return sizeof *w + tables + (size_t)w->n_floats * sizeof(float);
}
