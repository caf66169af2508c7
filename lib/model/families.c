/* The families' table and names (families.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/families.h"
#include "model/model.h"

const tfm__family_info tfm__families[TFM__FAMILIES] = {
    /* post-norm, Marian's sinusoids, no norms around the stacks */
    [TFM__MARIAN] = {"marian", 0, 0, 0, TFM_POSITIONS_SINUSOIDAL_HALVES, 0, "gelu",
                {58101, 1024, 12, 16, 4096, 58100, -1, 0, 58100, 0}, 1},
    /* post-norm, learned positions from row 2, layernorm_embedding */
    [TFM__BART] = {"bart", 0, 0, 1, TFM_POSITIONS_LEARNED, 0, "gelu",
              {50265, 1024, 12, 16, 4096, 1, 0, 2, 2, 2}, 1},
    /* pre-norm with layernorm_embedding and the stacks' layer_norm */
    [TFM__MBART] = {"mbart", 1, 1, 1, TFM_POSITIONS_LEARNED, 0, "gelu",
               {50265, 1024, 12, 16, 4096, 1, 0, 2, -1, 2}, 1},
    /* pre-norm, fairseq's sinusoids past the padding id, layer_norm */
    [TFM__M2M100] = {"m2m_100", 1, 1, 0, TFM_POSITIONS_SINUSOIDAL_FAIRSEQ, 1, "relu",
                {128112, 1024, 12, 16, 4096, 1, 0, 2, 2, -1}, 0},
    /* pre-norm RMS norms, final_layer_norm, relative positions only */
    [TFM__T5] = {"t5", 1, 1, 0, TFM_POSITIONS_NONE, 0, NULL, {32128, 512, 6, 8, 2048, 0, -1, 1, -1, -1}, 0},
};

const char *const tfm__tokenizer_files[TFM__TOKENIZER_FILES] = {
    "source.spm", "target.spm", "vocab.json", "target_vocab.json", "merges.txt",
    "sentencepiece.bpe.model", "spiece.model", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "added_tokens.json"};

/* modeling_t5.py's name of a libtfm parameter: blocks of numbered
 * layers (self-attention, the decoder's EncDecAttention, DenseReluDense),
 * each with its layer_norm; the stacks' first block holds the relative
 * bias table. A gated feed-forward's linear1 is wi_0. */
static int t5_name(const char *ours, int gated, char *out, size_t size)
{
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

int tfm__published_name(const tfm__family_layout *layout, const tfm_model *m, const char *ours,
                        char *out, size_t size)
{
    if (strcmp(ours, "generator.weight") == 0 || strcmp(ours, "generator.bias") == 0) {
        snprintf(out, size, "%s", ours[10] == 'w' ? "lm_head.weight" : "final_logits_bias");
        return 0;
    }
    if (layout->family == TFM__T5)
        return t5_name(ours, m->options.gated_feed_forward, out, size);
    static const struct {
        const char *ours, *theirs;
    } top[] = {{"src_embedding.weight", "shared.weight"},
               {"tgt_embedding.weight", "decoder.embed_tokens.weight"},
               {"src_positions.weight", "encoder.embed_positions.weight"},
               {"tgt_positions.weight", "decoder.embed_positions.weight"},
               {"src_embedding_norm.weight", "encoder.layernorm_embedding.weight"},
               {"src_embedding_norm.bias", "encoder.layernorm_embedding.bias"},
               {"tgt_embedding_norm.weight", "decoder.layernorm_embedding.weight"},
               {"tgt_embedding_norm.bias", "decoder.layernorm_embedding.bias"},
               {"encoder.norm.weight", "encoder.layer_norm.weight"},
               {"encoder.norm.bias", "encoder.layer_norm.bias"},
               {"decoder.norm.weight", "decoder.layer_norm.weight"},
               {"decoder.norm.bias", "decoder.layer_norm.bias"}};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (strcmp(ours, top[i].ours) == 0) {
            const char *theirs = top[i].theirs;
            /* separate source embeddings are the encoder's own */
            if (strcmp(ours, "src_embedding.weight") == 0 && !layout->shared)
                theirs = "encoder.embed_tokens.weight";
            snprintf(out, size, "%s%s", layout->prefix, theirs);
            return 0;
        }
    /* encoder.layers.N.<sublayer>.<rest> and decoder.layers.N.… */
    int decoder = strncmp(ours, "decoder.", 8) == 0;
    const char *after = strstr(ours, ".layers.");
    const char *sub = after ? strchr(after + 8, '.') : NULL;
    if (!sub)
        return -1;
    sub++;
    static const struct {
        const char *ours, *encoder, *decoder;
    } sublayers[] = {{"self_attn.", "self_attn.", "self_attn."},
                     {"multihead_attn.", NULL, "encoder_attn."},
                     {"linear1.", "fc1.", "fc1."},
                     {"linear2.", "fc2.", "fc2."},
                     {"norm1.", "self_attn_layer_norm.", "self_attn_layer_norm."},
                     {"norm2.", "final_layer_norm.", "encoder_attn_layer_norm."},
                     {"norm3.", NULL, "final_layer_norm."}};
    for (size_t i = 0; i < sizeof sublayers / sizeof sublayers[0]; i++) {
        size_t n = strlen(sublayers[i].ours);
        const char *theirs = decoder ? sublayers[i].decoder : sublayers[i].encoder;
        if (theirs && strncmp(sub, sublayers[i].ours, n) == 0) {
            snprintf(out, size, "%s%.*s%s%s", layout->prefix, (int)(sub - ours), ours, theirs,
                     sub + n);
            return 0;
        }
    }
    return -1;
}

tfm__family_layout tfm__published_layout(const tfm__published *p)
{
    return (tfm__family_layout){p->family, p->shared, p->family == TFM__T5 ? "" : "model."};
}

int tfm__published_module(const tfm_model *m, const char *ours, char *out, size_t size)
{
    if (!m->published)
        return -1;
    tfm__family_layout layout = tfm__published_layout(m->published);
    char weight[320];
    snprintf(weight, sizeof weight, "%s.weight", ours);
    size_t n;
    if (tfm__published_name(&layout, m, weight, out, size) < 0 || (n = strlen(out)) < 7 ||
        strcmp(out + n - 7, ".weight") != 0)
        return -1;
    out[n - 7] = '\0';
    return 0;
}

void tfm__published_free(tfm__published *p)
{
    if (!p)
        return;
    free(p->config);
    free(p->generation);
    for (int32_t i = 0; i < p->n_files; i++) {
        free(p->file_names[i]);
        free(p->file_bytes[i]);
    }
    free(p);
}
