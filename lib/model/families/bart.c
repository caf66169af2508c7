/* BART (modeling_bart.py, BartConfig, BartTokenizer): post-norm, learned
 * positions from row 2, layernorm_embedding; <mask> always strips the
 * space before it. */
#include <stdint.h>

#include "core/error.h"
#include "model/families.h"
#include "model/loader.h"

/* Two members that libtfm's one block description needs equal, each
 * fallback when absent. */
static int same_sides(tfm__loader *l, const char *encoder_key, const char *decoder_key,
                      int64_t fallback, int64_t *out)
{
    int64_t decoder;
    if (tfm__config_int(l, encoder_key, fallback, 1, INT32_MAX, out) < 0 ||
        tfm__config_int(l, decoder_key, fallback, 1, INT32_MAX, &decoder) < 0)
        return -1;
    if (*out != decoder) {
        tfm__fail(TFM_ERR_FORMAT, "%s: config.json's %s %lld and %s %lld differ, which libtfm "
                  "does not support (one layer description serves both stacks)", l->ctx,
                  encoder_key, (long long)*out, decoder_key, (long long)decoder);
        return -1;
    }
    return 0;
}

/* BartConfig's keys, which MarianConfig, MBartConfig and M2M100Config
 * share (Marian's decoder_vocab_size and share_encoder_decoder_embeddings
 * besides) */
int tfm__bart_read_config(tfm__loader *l, const tfm__family_info *f, tfm_model_options *o)
{
    int64_t vocab, tgt_vocab, d_model, layers, heads, d_ff, max_len, pad, eos, start;
    int32_t scale, tie, share;
    const char *activation = tfm__config_name(l, "activation_function", f->activation);
    const tfm__config_defaults *d = &f->defaults;
    if (tfm__config_int(l, "vocab_size", d->vocab, 1, INT32_MAX, &vocab) < 0 ||
        tfm__config_int(l, "decoder_vocab_size", vocab, 1, INT32_MAX, &tgt_vocab) < 0 ||
        tfm__config_int(l, "d_model", d->d_model, 1, INT32_MAX, &d_model) < 0 ||
        tfm__config_int(l, "encoder_layers", d->layers, 0, 4096, &layers) < 0 ||
        (o->encoder_layers = (int32_t)layers,
         tfm__config_int(l, "decoder_layers", d->layers, 0, 4096, &layers)) < 0 ||
        same_sides(l, "encoder_attention_heads", "decoder_attention_heads", d->heads,
                   &heads) < 0 ||
        same_sides(l, "encoder_ffn_dim", "decoder_ffn_dim", d->d_ff, &d_ff) < 0 ||
        /* every family's Config: 1024 */
        tfm__config_int(l, "max_position_embeddings", 1024, 1, INT32_MAX, &max_len) < 0 ||
        tfm__special_ids(l, d, &pad, &eos, &start) < 0 ||
        tfm__config_bool(l, "scale_embedding", f->scale_embedding, &scale) < 0 ||
        tfm__config_bool(l, "tie_word_embeddings", 1, &tie) < 0 ||
        tfm__config_bool(l, "share_encoder_decoder_embeddings", 1, &share) < 0 ||
        tfm__activation_of(l, "activation_function", activation, &o->activation) < 0)
        return -1;
    o->decoder_layers = (int32_t)layers;
    o->src_vocab = vocab;
    o->tgt_vocab = f->own_target_vocab ? tgt_vocab : vocab;
    o->share_embeddings = o->src_vocab == o->tgt_vocab && (!f->own_target_vocab || share);
    l->shared = o->share_embeddings;
    o->tie_generator = tie;
    o->d_model = d_model;
    o->heads = (int32_t)heads;
    o->d_ff = d_ff;
    o->max_src_len = o->max_tgt_len = max_len;
    o->norm_first = f->norm_first;
    o->final_norm = f->final_norm;
    o->embedding_norm = f->embedding_norm;
    o->positions = f->positions;
    o->position_offset =
        f->position_offset == TFM__POSITIONS_PAST_PAD ? pad + 1 : f->position_offset;
    o->embedding_scale = scale ? TFM_EMBEDDING_SCALE_SQRT_D : TFM_EMBEDDING_SCALE_NONE;
    o->fused_qkv = 0;
    o->bias = 1;
    o->dropout = 0.0f; /* published for inference; fine-tuning sets its own */
    o->embedding_dropout = 0.0f;
    o->layer_norm_eps = 1e-5f; /* nn.LayerNorm's, which every family uses */
    /* generation starts from decoder_start_token_id */
    o->bos_id = (int32_t)start;
    o->eos_id = (int32_t)eos;
    o->pad_id = (int32_t)pad;
    return 0;
}


/* the byte-level vocab.json and merges.txt */
static int load_tokenizers(tfm__loader *l, tfm_tokenizer **source, tfm_tokenizer **target)
{
    char a[PATH_MAX_BYTES], b[PATH_MAX_BYTES];
    (void)target;
    if (!tfm__has_file(l, "vocab.json", a) || !tfm__has_file(l, "merges.txt", b))
        return 0;
    return (*source = tfm_tokenizer_load_byte_bpe(a, b)) ? 1 : -1;
}

const tfm__family_info tfm__bart = {
    .model_type = "bart",
    .embedding_norm = 1,
    .positions = TFM_POSITIONS_LEARNED,
    .position_offset = 2,
    .activation = "gelu",
    .defaults = {50265, 1024, 12, 16, 4096, 1, 0, 2, 2, 2},
    .logits_bias = 1,
    .tokenizer_class = "BartTokenizer",
    .special_tokens = {"<s>", "</s>", "<unk>", "</s>", "<pad>", "<s>", "<mask>"},
    .mask_lstrip = 1,
    .bos_first = 1,
    .read_config = tfm__bart_read_config,
    .load_tokenizers = load_tokenizers,
    .prefix = "model.",
    .name = tfm__bart_name,
};
