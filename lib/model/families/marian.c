/* Marian (modeling_marian.py, MarianConfig, MarianTokenizer): post-norm,
 * Marian's sinusoids, no norms around the stacks; the only family whose
 * target vocabulary may differ from the source's. */
#include "model/families.h"
#include "model/loader.h"

/* source.spm and target.spm numbered by vocab.json (target_vocab.json
 * for a separate target vocabulary) */
static int load_tokenizers(tfm__loader *l, tfm_tokenizer **source, tfm_tokenizer **target)
{
    char a[PATH_MAX_BYTES], b[PATH_MAX_BYTES], c[PATH_MAX_BYTES];
    if (!tfm__has_file(l, "source.spm", a) || !tfm__has_file(l, "vocab.json", b))
        return 0;
    const char *target_vocab = tfm__has_file(l, "target_vocab.json", c) ? c : b;
    if (!(*source = tfm_tokenizer_load_sentencepiece_with_vocab(a, b)))
        return -1;
    if (tfm__has_file(l, "target.spm", a) &&
        !(*target = tfm_tokenizer_load_sentencepiece_with_vocab(a, target_vocab)))
        return -1;
    return 1;
}

const tfm__family_info tfm__marian = {
    .model_type = "marian",
    .positions = TFM_POSITIONS_SINUSOIDAL_HALVES,
    .activation = "gelu",
    .defaults = {58101, 1024, 12, 16, 4096, 58100, -1, 0, 58100, 0},
    .logits_bias = 1,
    .own_target_vocab = 1,
    .tokenizer_class = "MarianTokenizer",
    .special_tokens = {[TFM__EOS_TOKEN] = "</s>", [TFM__UNK_TOKEN] = "<unk>",
                       [TFM__PAD_TOKEN] = "<pad>"},
    .leading_code = 1,
    .read_config = tfm__bart_read_config,
    .load_tokenizers = load_tokenizers,
    .prefix = "model.",
    .name = tfm__bart_name,
};
