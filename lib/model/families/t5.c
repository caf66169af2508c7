/* T5 (modeling_t5.py, T5Config, T5Tokenizer): pre-norm RMS norms,
 * final_layer_norm, relative positions only, an lm_head without bias and
 * tensor names of its own. */
#include <stdio.h>
#include <string.h>

#include "model/families.h"
#include "model/model.h"

const tfm__family_info tfm__t5 = {
    .model_type = "t5",
    .norm_first = 1,
    .final_norm = 1,
    .positions = TFM_POSITIONS_NONE,
    .defaults = {32128, 512, 6, 8, 2048, 0, -1, 1, -1, -1},
    .tokenizer_class = "T5Tokenizer",
    .special_tokens = {[TFM__EOS_TOKEN] = "</s>", [TFM__UNK_TOKEN] = "<unk>",
                       [TFM__PAD_TOKEN] = "<pad>"},
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
