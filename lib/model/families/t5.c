/* T5 (modeling_t5.py, T5Config, T5Tokenizer): pre-norm RMS norms,
 * final_layer_norm, relative positions only, an lm_head without bias and
 * tensor names of its own. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "model/families.h"
#include "model/loader.h"
#include "model/model.h"
#include "text/text.h"

/* T5Config: its own keys, with T5Config's defaults where older folders
 * (t5-small) leave them out. feed_forward_proj is "ACT" or "gated-ACT",
 * "gated-gelu" meaning the tanh GELU. */
static int read_config(tfm__loader *l, const tfm__family_info *f, tfm_model_options *o)
{
    int64_t vocab, d_model, d_kv, heads, layers, decoder_layers, d_ff, buckets, distance, pad,
        eos, start, max_len;
    int32_t tie;
    float eps;
    const tfm__config_defaults *d = &f->defaults;
    if (tfm__config_int(l, "vocab_size", d->vocab, 1, INT32_MAX, &vocab) < 0 ||
        tfm__config_int(l, "d_model", d->d_model, 1, INT32_MAX, &d_model) < 0 ||
        tfm__config_int(l, "d_kv", TFM__T5_D_KV, 1, INT32_MAX, &d_kv) < 0 ||
        tfm__config_int(l, "num_heads", d->heads, 1, INT32_MAX, &heads) < 0 ||
        tfm__config_int(l, "num_layers", d->layers, 0, 4096, &layers) < 0 ||
        tfm__config_int(l, "num_decoder_layers", layers, 0, 4096, &decoder_layers) < 0 ||
        tfm__config_int(l, "d_ff", d->d_ff, 1, INT32_MAX, &d_ff) < 0 ||
        tfm__config_int(l, "relative_attention_num_buckets", 32, 4, 65536, &buckets) < 0 ||
        tfm__config_int(l, "relative_attention_max_distance", 128, buckets / 2 + 1, INT32_MAX,
                   &distance) < 0 ||
        tfm__special_ids(l, d, &pad, &eos, &start) < 0 ||
        tfm__config_int(l, "n_positions", 512, 1, INT32_MAX, &max_len) < 0 ||
        tfm__config_bool(l, "tie_word_embeddings", 1, &tie) < 0 ||
        tfm__config_float(l, "layer_norm_epsilon", 1e-6f, 0.0, 1.0, &eps) < 0)
        return -1;
    const char *projection = tfm__config_name(l, "feed_forward_proj", "relu");
    if (!projection)
        return tfm__activation_of(l, "feed_forward_proj", NULL, &o->activation);
    int gated = strncmp(projection, "gated-", 6) == 0;
    const char *activation = strcmp(projection, "gated-gelu") == 0 ? "gelu_new"
                             : gated                              ? projection + 6
                                                                  : projection;
    if (tfm__activation_of(l, "feed_forward_proj", activation, &o->activation) < 0)
        return -1;
    o->src_vocab = o->tgt_vocab = vocab;
    o->share_embeddings = l->shared = 1; /* shared.weight */
    o->tie_generator = o->generator_rescale = tie;
    o->d_model = d_model;
    o->heads = (int32_t)heads;
    /* 0 where the heads split d_model, as the options of a model made
     * with the same sizes say */
    o->head_dim = d_kv * heads == d_model ? 0 : d_kv;
    o->d_ff = d_ff;
    o->encoder_layers = (int32_t)layers;
    o->decoder_layers = (int32_t)decoder_layers;
    o->max_src_len = o->max_tgt_len = max_len;
    o->norm_first = f->norm_first;
    o->final_norm = f->final_norm;
    o->positions = f->positions;
    o->rms_norm = 1;
    o->layer_norm_eps = eps;
    o->bias = o->feed_forward_bias = 0;
    o->fused_qkv = 0;
    o->gated_feed_forward = gated;
    o->unscaled_attention = 1;
    o->relative_attention_buckets = (int32_t)buckets;
    o->relative_attention_max_distance = (int32_t)distance;
    o->dropout = o->embedding_dropout = 0.0f;
    o->bos_id = (int32_t)start;
    o->eos_id = (int32_t)eos;
    o->pad_id = (int32_t)pad;
    return 0;
}

/* spiece.model with tokenizer_config.json's extra_ids sentinels (100 by
 * default) */
static int load_tokenizers(tfm__loader *l, tfm_tokenizer **source, tfm_tokenizer **target)
{
    char a[PATH_MAX_BYTES];
    (void)target;
    if (!tfm__has_file(l, "spiece.model", a))
        return 0;
    l->extra_ids = 100;
    if (l->has_settings)
        tfm__reading_settings(l);
    int failed = (l->has_settings &&
                  tfm__config_int(l, "extra_ids", 100, 0, 1 << 20, &l->extra_ids) < 0) ||
                 !(*source = tfm__t5_load(l->ctx, a, (int32_t)l->extra_ids));
    tfm__reading_config(l);
    return failed ? -1 : 1;
}

const tfm__family_info tfm__t5 = {
    .model_type = "t5",
    .norm_first = 1,
    .final_norm = 1,
    .positions = TFM_POSITIONS_NONE,
    .defaults = {32128, 512, 6, 8, 2048, 0, -1, 1, -1, -1},
    .tokenizer_class = "T5Tokenizer",
    .special_tokens = {[TFM__EOS_TOKEN] = "</s>", [TFM__UNK_TOKEN] = "<unk>",
                       [TFM__PAD_TOKEN] = "<pad>"},
    .read_config = read_config,
    .load_tokenizers = load_tokenizers,
    .prefix = "",
    .name = tfm__t5_name,
};

/* modeling_t5.py's name of a libtfm parameter: blocks of numbered
 * layers (self-attention, the decoder's EncDecAttention, DenseReluDense),
 * each with its layer_norm; the stacks' first block holds the relative
 * bias table. A gated feed-forward's linear1 is wi_0. */
int tfm__t5_name(const tfm__family_layout *layout, const tfm_model *m, const char *ours,
                 char *out, size_t size)
{
    (void)layout;
    int gated = m->options.gated_feed_forward;
    static const struct {
        const char *ours, *theirs;
    } top[] = {{"src_embedding.weight", "shared.weight"},
               {"encoder.norm.weight", "encoder.final_layer_norm.weight"},
               {"decoder.norm.weight", "decoder.final_layer_norm.weight"},
               {"encoder.relative_attention_bias.weight",
                "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"},
               {"decoder.relative_attention_bias.weight",
                "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"}};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (strcmp(ours, top[i].ours) == 0) {
            snprintf(out, size, "%s", top[i].theirs);
            return 0;
        }
    int decoder = strncmp(ours, "decoder.", 8) == 0;
    int layer;
    char sub[64];
    if (sscanf(ours + 8, "layers.%d.%63s", &layer, sub) != 2)
        return -1;
    /* the feed-forward is layer 1 of an encoder block, 2 of a decoder's */
    static const struct {
        const char *ours;
        int encoder, decoder; /* the sublayer's number, -1: none */
        const char *theirs;
    } sublayers[] = {{"self_attn.q_proj.weight", 0, 0, "SelfAttention.q.weight"},
                     {"self_attn.k_proj.weight", 0, 0, "SelfAttention.k.weight"},
                     {"self_attn.v_proj.weight", 0, 0, "SelfAttention.v.weight"},
                     {"self_attn.out_proj.weight", 0, 0, "SelfAttention.o.weight"},
                     {"multihead_attn.q_proj.weight", -1, 1, "EncDecAttention.q.weight"},
                     {"multihead_attn.k_proj.weight", -1, 1, "EncDecAttention.k.weight"},
                     {"multihead_attn.v_proj.weight", -1, 1, "EncDecAttention.v.weight"},
                     {"multihead_attn.out_proj.weight", -1, 1, "EncDecAttention.o.weight"},
                     {"norm1.weight", 0, 0, "layer_norm.weight"},
                     {"norm2.weight", 1, 1, "layer_norm.weight"},
                     {"norm3.weight", -1, 2, "layer_norm.weight"},
                     {"linear1.weight", 1, 2, "DenseReluDense.wi.weight"},
                     {"linear_up.weight", 1, 2, "DenseReluDense.wi_1.weight"},
                     {"linear2.weight", 1, 2, "DenseReluDense.wo.weight"}};
    for (size_t i = 0; i < sizeof sublayers / sizeof sublayers[0]; i++) {
        int number = decoder ? sublayers[i].decoder : sublayers[i].encoder;
        if (number >= 0 && strcmp(sub, sublayers[i].ours) == 0) {
            const char *theirs = gated && strcmp(sub, "linear1.weight") == 0
                                     ? "DenseReluDense.wi_0.weight"
                                     : sublayers[i].theirs;
            snprintf(out, size, "%s.block.%d.layer.%d.%s", decoder ? "decoder" : "encoder", layer,
                     number, theirs);
            return 0;
        }
    }
    return -1;
}
