/* The ready-made encoder-decoder transformer: embeddings, positions,
 * nn.Transformer's encoder and decoder, and the generator. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/options.h"
#include "core/params.h"
#include "core/tensor.h"
#include "model/families.h"
#include "model/model.h"
#include "translate/generation.h"
#include "model/model_file.h"
#include "nn/layer.h"
#include "nn/relative_bias.h"

/* The fields tfm_model_options has of tfm_block_options, by name. */
#define BLOCK_FIELDS(X)                                                        \
    X(d_model) X(heads) X(d_ff) X(dropout) X(activation) X(norm_first)        \
    X(layer_norm_eps) X(bias) X(fused_qkv) X(trainable_scale) X(scale_init)     \
    X(feed_forward_bias) X(rms_norm) X(gated_feed_forward) X(unscaled_attention)  \
    X(head_dim)

void tfm_model_options_init_sized(tfm_model_options *o, uint32_t struct_size)
{
    tfm_model_options d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.positions = TFM_POSITIONS_SINUSOIDAL;
    d.embedding_scale = TFM_EMBEDDING_SCALE_NONE;
    d.encoder_layers = 6;
    d.decoder_layers = 6;
    d.final_norm = 1;
    tfm_block_options block;
    tfm_block_options_init(&block);
#define FROM_BLOCK(field) d.field = block.field;
    BLOCK_FIELDS(FROM_BLOCK)
#undef FROM_BLOCK
    d.seed = 0;
    d.embedding_dropout = -1.0f;
    d.bos_id = d.eos_id = d.pad_id = -1;
    d.position_offset = 0;
    d.embedding_norm = 0;
    tfm__init_options(o, struct_size, &d, sizeof d);
}

/* The layers' options the model's carry. */
static void block_of(const tfm_model_options *o, tfm_block_options *b)
{
    tfm_block_options_init(b);
#define TO_BLOCK(field) b->field = o->field;
    BLOCK_FIELDS(TO_BLOCK)
#undef TO_BLOCK
}

/* The caller's options over the defaults, as far as the caller's struct goes. */
static int read_options(const char *op, const tfm_model_options *given, tfm_model_options *o)
{
    tfm_model_options_init(o);
    if (tfm__read_options(op, "tfm_model_options_init", given, o, sizeof *o,
                          offsetof(tfm_model_options, src_vocab)) < 0)
        return -1;
    return tfm__model_options_check(op, "options.", o, TFM_ERR_ARG) == TFM_OK ? 0 : -1;
}

static tfm_layer *sinusoidal_table(const tfm_model_options *o, int64_t rows)
{
    tfm_sinusoid_layout layout = o->positions == TFM_POSITIONS_SINUSOIDAL_HALVES
                                     ? TFM_SINUSOIDS_HALVES
                                 : o->positions == TFM_POSITIONS_SINUSOIDAL_FAIRSEQ
                                     ? TFM_SINUSOIDS_HALVES_FAIRSEQ
                                     : TFM_SINUSOIDS_INTERLEAVED;
    return tfm_sinusoidal_positions_create_with_layout(rows, o->d_model, layout);
}

/* Each side's table: its longest sequence past the offset's rows. */
static int make_positions(tfm_model *m)
{
    const tfm_model_options *o = &m->options;
    int64_t src_rows = o->max_src_len + o->position_offset;
    int64_t tgt_rows = o->max_tgt_len + o->position_offset;
    if (o->positions == TFM_POSITIONS_NONE)
        return 0;
    if (o->positions == TFM_POSITIONS_LEARNED)
        return (m->src_positions = tfm_learned_positions_create(m->params, "src_positions",
                                                                src_rows, o->d_model, m->rng)) &&
                       (m->tgt_positions = tfm_learned_positions_create(
                            m->params, "tgt_positions", tgt_rows, o->d_model, m->rng))
                   ? 0
                   : -1;
    return (m->src_positions = sinusoidal_table(o, src_rows)) &&
                   (m->tgt_positions = sinusoidal_table(o, tgt_rows))
               ? 0
               : -1;
}

/* Sinusoidal tables are computed, so nothing a file holds bounds them: they
 * may be no larger than the model's parameters (or SMALL_TABLES), and a
 * file of a few kilobytes cannot make the reader fill a gigabyte. */
#define SMALL_TABLES ((int64_t)1 << 22)
static int sinusoidal_tables_fit(const char *op, const tfm_model *m)
{
    const tfm_model_options *o = &m->options;
    int64_t tables = (o->max_src_len + o->max_tgt_len + 2 * o->position_offset) *
                     o->d_model; /* <= 2^28: checked */
    int64_t parameters = tfm_params_numel(m->params);
    if (tables <= SMALL_TABLES || tables <= parameters)
        return 0;
    tfm__fail(TFM_ERR_SIZE, "%s: sinusoidal tables of %lld + %lld positions of %lld values "
              "would be larger than the model's %lld parameters (and than %lld values)", op,
              (long long)o->max_src_len, (long long)o->max_tgt_len, (long long)o->d_model,
              (long long)parameters, (long long)SMALL_TABLES);
    return -1;
}

static tfm_layer *embedding_norm(tfm_model *m, const char *name)
{
    const tfm_model_options *o = &m->options;
    return o->rms_norm ? tfm_rms_norm_create(m->params, name, o->d_model, o->layer_norm_eps)
                       : tfm_layer_norm_create(m->params, name, o->d_model, o->layer_norm_eps);
}

static tfm_tensor *make_scale(tfm_model *m, const char *name)
{
    tfm_tensor *scale = tfm_params_add(m->params, name, 1, (const int64_t[]){1});
    if (scale)
        tfm__f32(scale)[0] = sqrtf((float)m->options.d_model);
    return scale;
}

/* relative_attention_buckets' tables, one per stack. */
static int make_relative_bias(tfm_model *m)
{
    const int64_t shape[2] = {m->options.relative_attention_buckets, m->options.heads};
    return (m->src_relative_bias = tfm_params_add(m->params,
                                                  "encoder.relative_attention_bias.weight", 2,
                                                  shape)) &&
                   (m->tgt_relative_bias = tfm_params_add(
                        m->params, "decoder.relative_attention_bias.weight", 2, shape))
               ? 0
               : -1;
}

/* nn.Transformer._reset_parameters: xavier-uniform for every matrix of the
 * encoder and decoder. */
static int reset_like_nn_transformer(tfm_model *m)
{
    int64_t count = tfm_params_count(m->params);
    for (int64_t i = 0; i < count; i++) {
        const char *name = tfm_params_name(m->params, i);
        tfm_tensor *t = tfm_params_at(m->params, i);
        if ((strncmp(name, "encoder.", 8) == 0 || strncmp(name, "decoder.", 8) == 0) &&
            t->ndim > 1 && tfm_init_xavier_uniform(t, 1.0f, m->rng) != TFM_OK)
            return -1;
    }
    return 0;
}

/* A table that is also the output projection starts at N(0, 1/d_model), as
 * fairseq's and Vaswani et al.'s tied tables: nn.Embedding's N(0, 1) would
 * give first logits of standard deviation sqrt(d_model). Drawn last, so
 * every other parameter is the untied model's of the same seed. */
static int scale_tied_table(tfm_model *m)
{
    float std = 1.0f / sqrtf((float)m->block.d_model);
    return tfm_init_normal(m->tgt_embedding->weight, 0.0f, std, m->rng) == TFM_OK ? 0 : -1;
}

tfm_model *tfm_model_create(const tfm_model_options *options)
{
    return tfm__model_create("tfm_model_create", options, 0);
}

tfm_model *tfm__model_create(const char *op, const tfm_model_options *options,
                             int64_t max_params)
{
    uint64_t mark = tfm__error_mark();
    tfm_model *m = calloc(1, sizeof *m);
    if (!m) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return NULL;
    }
    if (read_options(op, options, &m->options) < 0) {
        free(m);
        return NULL;
    }
    m->text = TFM__NO_TEXT_TEMPLATE;
    const tfm_model_options *o = &m->options;
    block_of(o, &m->block);
    const tfm_block_options *b = &m->block;
    int ok = (m->params = tfm_params_create()) && (m->rng = tfm_rng_create(o->seed));
    if (ok)
        tfm__params_limit(m->params, max_params);
    ok = ok && (m->src_embedding = tfm_embedding_create(m->params, "src_embedding", o->src_vocab,
                                                      b->d_model, m->rng));
    if (ok && !o->share_embeddings)
        ok = (m->tgt_embedding = tfm_embedding_create(m->params, "tgt_embedding", o->tgt_vocab,
                                                      b->d_model, m->rng)) != NULL;
    else if (ok)
        m->tgt_embedding = m->src_embedding;
    /* learned tables draw from the stream here; computed ones come last,
     * once the parameters they are measured against exist */
    int learned = o->positions == TFM_POSITIONS_LEARNED;
    ok = ok && (!learned || make_positions(m) == 0);
    if (ok && o->embedding_scale == TFM_EMBEDDING_SCALE_TRAINABLE)
        ok = (m->src_scale = make_scale(m, "src_scale")) && (m->tgt_scale = make_scale(m, "tgt_scale"));
    if (ok && o->embedding_norm)
        ok = (m->src_embedding_norm = embedding_norm(m, "src_embedding_norm")) &&
             (m->tgt_embedding_norm = embedding_norm(m, "tgt_embedding_norm"));
    float embedding_dropout = o->embedding_dropout >= 0.0f ? o->embedding_dropout : b->dropout;
    ok = ok && (m->dropout = tfm_dropout_create(embedding_dropout, m->rng)) &&
         (m->encoder = tfm_encoder_create(m->params, "encoder", o->encoder_layers, b,
                                          o->final_norm, m->rng)) &&
         (m->decoder = tfm_decoder_create(m->params, "decoder", o->decoder_layers, b,
                                          o->final_norm, m->rng)) &&
         (m->generator = o->tie_generator
                             ? tfm__linear_tied(op, m->params, "generator",
                                                m->tgt_embedding->weight, 1, m->rng)
                             : tfm_linear_create(m->params, "generator", b->d_model,
                                                 o->tgt_vocab, 1, m->rng)) &&
         (!o->relative_attention_buckets || make_relative_bias(m) == 0) &&
         reset_like_nn_transformer(m) == 0 && (!o->tie_generator || scale_tied_table(m) == 0) &&
         (learned || (sinusoidal_tables_fit(op, m) == 0 && make_positions(m) == 0));
    if (!ok) {
        tfm__fail_within(op, mark);
        tfm_model_free(m);
        return NULL;
    }
    return m;
}

void tfm_model_free(tfm_model *m)
{
    if (!m)
        return;
    if (m->tgt_embedding != m->src_embedding)
        tfm_layer_free(m->tgt_embedding);
    tfm_layer_free(m->src_embedding);
    tfm_layer_free(m->src_positions);
    tfm_layer_free(m->tgt_positions);
    tfm_layer_free(m->src_embedding_norm);
    tfm_layer_free(m->tgt_embedding_norm);
    tfm_layer_free(m->dropout);
    tfm_layer_free(m->encoder);
    tfm_layer_free(m->decoder);
    tfm_layer_free(m->generator);
    tfm__model_free_int8(m);
    tfm__model_free_adapters(m);
    tfm_params_free(m->params);
    tfm_rng_free(m->rng);
    tfm__generation_free(m->generation);
    tfm__published_free(m->published);
    tfm_tokenizer_free(m->tokenizers[0]);
    tfm_tokenizer_free(m->tokenizers[1]);
    free(m);
}

tfm_params *tfm_model_params(tfm_model *m)
{
    if (!m)
        tfm__fail(TFM_ERR_NULL, "tfm_model_params: model is NULL");
    return m ? m->params : NULL;
}

int64_t tfm_model_parameter_count(const tfm_model *m)
{
    if (!m) {
        tfm__fail(TFM_ERR_NULL, "tfm_model_parameter_count: model is NULL");
        return -1;
    }
    return tfm_params_numel(m->params);
}

tfm_status tfm_model_set_training(tfm_model *m, int32_t training)
{
    if (!m)
        return tfm__fail(TFM_ERR_NULL, "tfm_model_set_training: model is NULL");
    /* a quantized model trains an adapter only: its weights stay */
    if (training && !m->in_use &&
        tfm__model_refuse_quantized("tfm_model_set_training", m) != TFM_OK)
        return tfm_last_status();
    tfm_layer *layers[] = {m->src_embedding,      m->tgt_embedding,      m->src_positions,
                           m->tgt_positions,      m->src_embedding_norm, m->tgt_embedding_norm,
                           m->dropout,            m->encoder,            m->decoder,
                           m->generator};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        if (layers[i]) /* embedding norms are optional */
            tfm_layer_set_training(layers[i], training);
    return TFM_OK;
}

tfm_status tfm_model_set_recompute(tfm_model *m, uint32_t what)
{
    if (!m)
        return tfm__fail(TFM_ERR_NULL, "tfm_model_set_recompute: model is NULL");
    tfm_layer *const stacks[] = {m->encoder, m->decoder};
    return tfm__set_recompute("tfm_model_set_recompute", stacks, 2, what);
}

tfm_status tfm_model_set_shard(tfm_model *m, int64_t index, int64_t count)
{
    if (!m)
        return tfm__fail(TFM_ERR_NULL, "tfm_model_set_shard: model is NULL");
    uint64_t mark = tfm__error_mark();
    tfm_status status = tfm_rng_set_shard(m->rng, index, count);
    if (status != TFM_OK)
        tfm__fail_within("tfm_model_set_shard", mark);
    return status;
}

/* embedding * scale + positions (from the offset's row), the embedding
 * norm, then dropout: [B, T] ids -> [B, T, D]. */
static tfm_tensor *embed(tfm_tape *tape, tfm_model *m, const char *op, const tfm_tensor *ids,
                         const tfm_layer *embedding, const tfm_layer *positions,
                         int64_t max_len, const tfm_tensor *scale, const tfm_layer *norm)
{
    if (tfm__check_input(op, "ids", ids, TFM_I32) < 0)
        return NULL;
    if (ids->ndim != 2) {
        char s[64];
        tfm__fail(TFM_ERR_SHAPE, "%s: ids must be [batch, length], not %s", op,
                  tfm__shape_str(ids, s, sizeof s));
        return NULL;
    }
    if (ids->shape[1] > max_len) {
        tfm__fail(TFM_ERR_RANGE, "%s: %lld positions are more than the model's %lld", op,
                  (long long)ids->shape[1], (long long)max_len);
        return NULL;
    }
    tfm_tensor *x = tfm_embedding_forward(tape, embedding, ids);
    switch (m->options.embedding_scale) {
    case TFM_EMBEDDING_SCALE_SQRT_D:
        x = tfm_scale(tape, x, sqrtf((float)m->options.d_model));
        break;
    case TFM_EMBEDDING_SCALE_TRAINABLE:
        x = tfm_mul(tape, x, scale);
        break;
    default:
        break;
    }
    if (positions)
        x = tfm_positions_forward(tape, positions, x, m->options.position_offset);
    if (norm)
        x = tfm_layer_norm_forward(tape, norm, x);
    return tfm__dropout_if_active(tape, m->dropout, x);
}

/* With a relative-position table, the self-attention masks of x's stack
 * become one additive mask: the bias [1, heads, T, T] (recorded, for the
 * table's gradient) plus the caller's masks. */
static int with_relative_bias(tfm_tape *tape, const tfm_model *m, const char *op,
                              const tfm_tensor *table, int bidirectional, const tfm_tensor *x,
                              tfm__masks *masks)
{
    if (!table)
        return 0;
    int64_t B = x->shape[0], T = x->shape[1];
    const tfm_tensor *given;
    if (tfm__attention_mask(tape, op, masks, (const int64_t[]){B, m->options.heads, T, T},
                            &given) < 0)
        return -1;
    const tfm_tensor *bias = tfm__relative_bias(tape, op, table, T, T, bidirectional,
                                                m->options.relative_attention_max_distance);
    if (bias && given) {
        given = tfm__mask_additive(tape, op, given);
        bias = given ? tfm_add(tape, bias, given) : NULL;
    }
    masks->mask = bias;
    masks->key_padding = NULL;
    return bias ? 0 : -1;
}

float tfm__generator_rescale(const tfm_model *m)
{
    return (float)pow((double)m->options.d_model, -0.5);
}

static tfm_tensor *encode_run(tfm_tape *tape, tfm_model *m, const char *op,
                              const tfm_tensor *src, const tfm_tensor *src_mask, const tfm_tensor *src_key_padding_mask)
{
    uint64_t mark = tfm__error_mark();
    if (!m) {
        tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
        return NULL;
    }
    tfm_tensor *x = embed(tape, m, op, src, m->src_embedding, m->src_positions,
                          m->options.max_src_len, m->src_scale, m->src_embedding_norm);
    tfm__masks masks = {src_mask, src_key_padding_mask, "src_mask", "src_key_padding_mask"};
    if (!x || with_relative_bias(tape, m, op, m->src_relative_bias, 1, x, &masks) < 0)
        return tfm__result_within(op, mark, NULL);
    return tfm__result_within(op, mark, tfm__encoder_run(tape, op, m->encoder, x, &masks));
}

static tfm_tensor *decode_run(tfm_tape *tape, tfm_model *m, const char *op, const tfm_tensor *tgt,
                          const tfm_tensor *memory, const tfm_tensor *tgt_mask,
                          const tfm_tensor *memory_mask, const tfm_tensor *tgt_key_padding_mask,
                          const tfm_tensor *memory_key_padding_mask, tfm_tensor **cross_weights)
{
    uint64_t mark = tfm__error_mark();
    if (!m) {
        tfm__fail(TFM_ERR_NULL, "%s: model is NULL", op);
        return NULL;
    }
    tfm_tensor *y = embed(tape, m, op, tgt, m->tgt_embedding, m->tgt_positions,
                          m->options.max_tgt_len, m->tgt_scale, m->tgt_embedding_norm);
    tfm__masks masks = {tgt_mask, tgt_key_padding_mask, "tgt_mask", "tgt_key_padding_mask"};
    if (!y || with_relative_bias(tape, m, op, m->tgt_relative_bias, 0, y, &masks) < 0)
        return tfm__result_within(op, mark, NULL);
    y = tfm__decoder_run(tape, op, m->decoder, y, memory, &masks,
                         &(const tfm__masks){memory_mask, memory_key_padding_mask,
                                             "memory_mask", "memory_key_padding_mask"},
                         cross_weights);
    if (y && m->options.generator_rescale)
        y = tfm_scale(tape, y, tfm__generator_rescale(m));
    return tfm__result_within(op, mark, tfm_linear_forward(tape, m->generator, y));
}

/* The model's adapter in use on the tape for one forward, unless the
 * tape's owner chose one (a decoding's). */
static const struct tfm__adapter_set *adapter_on(tfm_tape *tape, const tfm_model *m)
{
    if (!tape || tape->adapter_chosen || !m)
        return tape ? tape->adapter : NULL;
    const struct tfm__adapter_set *before = tape->adapter;
    tape->adapter = tfm__model_adapter_in_use(m);
    return before;
}

static tfm_tensor *encode(tfm_tape *tape, tfm_model *m, const char *op, const tfm_tensor *src,
                          const tfm_tensor *src_mask, const tfm_tensor *src_key_padding_mask)
{
    const struct tfm__adapter_set *before = adapter_on(tape, m);
    tfm_tensor *memory = encode_run(tape, m, op, src, src_mask, src_key_padding_mask);
    if (tape)
        tape->adapter = before;
    return memory;
}

static tfm_tensor *decode(tfm_tape *tape, tfm_model *m, const char *op, const tfm_tensor *tgt,
                          const tfm_tensor *memory, const tfm_tensor *tgt_mask,
                          const tfm_tensor *memory_mask, const tfm_tensor *tgt_key_padding_mask,
                          const tfm_tensor *memory_key_padding_mask, tfm_tensor **cross_weights)
{
    const struct tfm__adapter_set *before = adapter_on(tape, m);
    tfm_tensor *logits = decode_run(tape, m, op, tgt, memory, tgt_mask, memory_mask,
                                    tgt_key_padding_mask, memory_key_padding_mask, cross_weights);
    if (tape)
        tape->adapter = before;
    return logits;
}

tfm_tensor *tfm_model_encode(tfm_tape *tape, tfm_model *m, const tfm_tensor *src,
                             const tfm_tensor *src_mask, const tfm_tensor *src_key_padding_mask)
{
    return encode(tape, m, "tfm_model_encode", src, src_mask, src_key_padding_mask);
}

tfm_tensor *tfm_model_decode(tfm_tape *tape, tfm_model *m, const tfm_tensor *tgt,
                             const tfm_tensor *memory, const tfm_tensor *tgt_mask,
                             const tfm_tensor *memory_mask, const tfm_tensor *tgt_key_padding_mask,
                             const tfm_tensor *memory_key_padding_mask)
{
    return decode(tape, m, "tfm_model_decode", tgt, memory, tgt_mask, memory_mask,
                  tgt_key_padding_mask, memory_key_padding_mask, NULL);
}

tfm_tensor *tfm__model_decode_attending(tfm_tape *tape, tfm_model *m, const tfm_tensor *tgt,
                                        const tfm_tensor *memory, const tfm_tensor *tgt_mask,
                                        const tfm_tensor *memory_mask,
                                        tfm_tensor **cross_weights)
{
    return decode(tape, m, "tfm_model_decode", tgt, memory, tgt_mask, memory_mask, NULL, NULL,
                  cross_weights);
}

tfm_tensor *tfm_model_forward(tfm_tape *tape, tfm_model *m, const tfm_tensor *src,
                              const tfm_tensor *tgt, const tfm_tensor *src_mask,
                              const tfm_tensor *tgt_mask, const tfm_tensor *memory_mask,
                              const tfm_tensor *src_key_padding_mask,
                              const tfm_tensor *tgt_key_padding_mask,
                              const tfm_tensor *memory_key_padding_mask)
{
    const char *op = "tfm_model_forward";
    tfm_tensor *memory = encode(tape, m, op, src, src_mask, src_key_padding_mask);
    return decode(tape, m, op, tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                  memory_key_padding_mask, NULL);
}
