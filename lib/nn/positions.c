/* Position encodings: a fixed sinusoidal table or a learned one, added to
 * [B, T, D] inputs from a row offset. */
#include <math.h>

#include "autograd/tape.h"
#include "core/error.h"
#include "nn/layer.h"

static int check_sizes(const char *op, int64_t max_len, int64_t d_model)
{
    if (max_len < 1 || d_model < 1) {
        tfm__fail(TFM_ERR_ARG, "%s: max_len %lld and d_model %lld must be positive", op,
                  (long long)max_len, (long long)d_model);
        return -1;
    }
    return 0;
}

/* Interleaved, as the tutorials' PositionalEncoding: columns 2i and 2i+1
 * share the frequency exp(-2i ln(10000) / d); an odd d_model ends on a
 * sine column. */
static void interleaved(float *pe, int64_t max_len, int64_t d_model)
{
    const double step = -log(10000.0) / (double)d_model;
    for (int64_t j = 0; j < d_model; j++) {
        double freq = exp((double)(j - j % 2) * step);
        for (int64_t pos = 0; pos < max_len; pos++) {
            double angle = (double)pos * freq;
            pe[pos * d_model + j] = (float)(j % 2 ? cos(angle) : sin(angle));
        }
    }
}

/* Marian's: the sines of frequencies 10000^(-2i/d) in the first ceil(d/2)
 * columns, the cosines in the rest, computed in double as Marian's numpy. */
static void halves(float *pe, int64_t max_len, int64_t d_model)
{
    int64_t sines = (d_model + 1) / 2;
    for (int64_t j = 0; j < d_model; j++) {
        int64_t i = j < sines ? j : j - sines;
        double freq = pow(10000.0, -2.0 * (double)i / (double)d_model);
        for (int64_t pos = 0; pos < max_len; pos++) {
            double angle = (double)pos * freq;
            pe[pos * d_model + j] = (float)(j < sines ? sin(angle) : cos(angle));
        }
    }
}

/* fairseq's (M2M100, NLLB): floor(d/2) sines of frequencies
 * exp(-i ln(10000) / (floor(d/2) - 1)), then their cosines, then a zero
 * column when d is odd; in float32, as fairseq computes it. */
static void halves_fairseq(float *pe, int64_t max_len, int64_t d_model)
{
    int64_t half = d_model / 2;
    float step = half > 1 ? (float)(log(10000.0) / (double)(half - 1)) : 0.0f;
    for (int64_t i = 0; i < half; i++) {
        float freq = expf((float)i * -step);
        for (int64_t pos = 0; pos < max_len; pos++) {
            float angle = (float)pos * freq;
            pe[pos * d_model + i] = sinf(angle);
            pe[pos * d_model + half + i] = cosf(angle);
        }
    }
}

tfm_layer *tfm_sinusoidal_positions_create_with_layout(int64_t max_len, int64_t d_model,
                                                       tfm_sinusoid_layout layout)
{
    const char *op = "tfm_sinusoidal_positions_create_with_layout";
    const int64_t shape[2] = {max_len, d_model};
    if (layout < TFM_SINUSOIDS_INTERLEAVED || layout > TFM_SINUSOIDS_HALVES_FAIRSEQ) {
        tfm__fail(TFM_ERR_ARG, "%s: unknown layout %d", op, (int)layout);
        return NULL;
    }
    if (check_sizes(op, max_len, d_model) < 0 || tfm__checked_numel(op, 2, shape) < 0)
        return NULL;
    uint64_t mark = tfm__error_mark();
    tfm_layer *layer = tfm__layer_new(op, TFM_LAYER_POSITIONS, 0);
    if (!layer)
        return NULL;
    layer->table = tfm_tensor_zeros(TFM_F32, 2, shape);
    if (!layer->table) {
        tfm__fail_within(op, mark);
        tfm_layer_free(layer);
        return NULL;
    }
    layer->d_model = d_model;
    float *pe = tfm__f32(layer->table);
    if (layout == TFM_SINUSOIDS_HALVES)
        halves(pe, max_len, d_model);
    else if (layout == TFM_SINUSOIDS_HALVES_FAIRSEQ)
        halves_fairseq(pe, max_len, d_model);
    else
        interleaved(pe, max_len, d_model);
    return layer;
}

tfm_layer *tfm_sinusoidal_positions_create(int64_t max_len, int64_t d_model)
{
    uint64_t mark = tfm__error_mark();
    return tfm__result_within("tfm_sinusoidal_positions_create", mark,
                              tfm_sinusoidal_positions_create_with_layout(
                                  max_len, d_model, TFM_SINUSOIDS_INTERLEAVED));
}

tfm_layer *tfm_learned_positions_create(tfm_params *params, const char *name,
                                        int64_t max_len, int64_t d_model, tfm_rng *rng)
{
    const char *op = "tfm_learned_positions_create";
    if (!params || !name || !rng) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, !params ? "params" : !name ? "name" : "rng");
        return NULL;
    }
    if (check_sizes(op, max_len, d_model) < 0)
        return NULL;
    int64_t mark = tfm_params_count(params);
    tfm_layer *layer = tfm__layer_new(op, TFM_LAYER_POSITIONS, 0);
    if (!layer)
        return NULL;
    layer->weight = tfm__layer_param(op, params, name, "weight", 2,
                                     (const int64_t[]){max_len, d_model});
    if (!layer->weight || tfm_init_normal(layer->weight, 0.0f, 1.0f, rng) != TFM_OK)
        return tfm__layer_abandon(layer, params, mark);
    layer->d_model = d_model;
    return layer;
}

/* dx = g; dP[offset + t] = sum over the batch of g[b, t]. */
static void positions_backward(tfm_node *node)
{
    const float *g = node->out->grad;
    float *gx = tfm__grad_of(node->in[0]);
    float *gp = tfm__grad_of(node->in[1]);
    int64_t batch = node->out->shape[0], n = node->out->shape[1] * node->out->shape[2];
    if (gx)
        for (int64_t i = 0; i < batch * n; i++)
            gx[i] += g[i];
    if (gp) {
        gp += node->ints[0] * node->out->shape[2];
        for (int64_t b = 0; b < batch; b++)
            for (int64_t i = 0; i < n; i++)
                gp[i] += g[b * n + i];
    }
}

tfm_tensor *tfm_positions_forward(tfm_tape *tape, const tfm_layer *positions,
                                  const tfm_tensor *x, int64_t offset)
{
    const char *op = "tfm_positions_forward";
    if (tfm__check_layer(op, positions, TFM_LAYER_POSITIONS) < 0 ||
        tfm__check_input(op, "x", x, TFM_F32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    const tfm_tensor *table = positions->weight ? positions->weight : positions->table;
    int64_t max_len = table->shape[0], dim = table->shape[1];
    char buf[64];
    if (x->ndim != 3 || x->shape[2] != dim) {
        tfm__fail(TFM_ERR_SHAPE, "%s: x %s must be [B, T, %lld]", op,
                  tfm__shape_str(x, buf, sizeof buf), (long long)dim);
        return NULL;
    }
    int64_t len = x->shape[1];
    if (offset < 0 || offset > max_len - len) {
        tfm__fail(TFM_ERR_RANGE, "%s: offset %lld with %lld positions does not fit "
                  "in the table's %lld (max_len)", op, (long long)offset, (long long)len,
                  (long long)max_len);
        return NULL;
    }
    tfm_tensor *out = tfm__new_output(tape, op, TFM_F32, 3, x->shape);
    if (!out)
        return NULL;
    const float *xv = tfm__f32(x), *p = tfm__f32(table) + offset * dim;
    float *o = tfm__f32(out);
    int64_t n = len * dim;
    for (int64_t b = 0; b < x->shape[0]; b++)
        for (int64_t i = 0; i < n; i++)
            o[b * n + i] = xv[b * n + i] + p[i];
    tfm_node *node;
    if (tfm__record(tape, op, out, positions_backward, 2,
                    (const tfm_tensor *[]){x, table}, &node) < 0)
        return NULL;
    if (node)
        node->ints[0] = offset;
    return out;
}
