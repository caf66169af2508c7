/* The families' table and names (families.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/families.h"
#include "model/model.h"

const tfm__family_info *const tfm__families[TFM__FAMILIES] = {
    [TFM__MARIAN] = &tfm__marian, [TFM__BART] = &tfm__bart,     [TFM__MBART] = &tfm__mbart,
    [TFM__M2M100] = &tfm__m2m100, [TFM__T5] = &tfm__t5,
};

const char *const tfm__tokenizer_files[TFM__TOKENIZER_FILES] = {
    "source.spm", "target.spm", "vocab.json", "target_vocab.json", "merges.txt",
    "sentencepiece.bpe.model", "spiece.model", "tokenizer.json", "tokenizer_config.json",
    "special_tokens_map.json", "added_tokens.json"};

int tfm__published_name(const tfm__family_layout *layout, const tfm_model *m, const char *ours,
                        char *out, size_t size)
{
    if (strcmp(ours, "generator.weight") == 0 || strcmp(ours, "generator.bias") == 0) {
        snprintf(out, size, "%s", ours[10] == 'w' ? "lm_head.weight" : "final_logits_bias");
        return 0;
    }
    return tfm__families[layout->family]->name(layout, m, ours, out, size);
}

/* modeling_bart.py's names, which Marian, mBART and M2M100 share: the
 * embeddings, their norms and the stacks' norms, then each layer's
 * sublayers. */
int tfm__bart_name(const tfm__family_layout *layout, const tfm_model *m, const char *ours,
                   char *out, size_t size)
{
    (void)m;
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
    return (tfm__family_layout){p->family, p->shared, tfm__families[p->family]->prefix};
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
