/* BART (modeling_bart.py, BartConfig, BartTokenizer): post-norm, learned
 * positions from row 2, layernorm_embedding; <mask> always strips the
 * space before it. */
#include "model/families.h"

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
    .prefix = "model.",
    .name = tfm__bart_name,
};
