/* Marian (modeling_marian.py, MarianConfig, MarianTokenizer): post-norm,
 * Marian's sinusoids, no norms around the stacks; the only family whose
 * target vocabulary may differ from the source's. */
#include "model/families.h"

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
    .prefix = "model.",
    .name = tfm__bart_name,
};
