/* mBART (modeling_mbart.py, MBartConfig, MBartTokenizer): pre-norm with
 * layernorm_embedding and the stacks' layer_norm, learned positions from
 * row 2. */
#include "model/families.h"
#include "model/loader.h"


const tfm__family_info tfm__mbart = {
    .model_type = "mbart",
    .norm_first = 1,
    .final_norm = 1,
    .embedding_norm = 1,
    .positions = TFM_POSITIONS_LEARNED,
    .position_offset = 2,
    .activation = "gelu",
    .defaults = {50265, 1024, 12, 16, 4096, 1, 0, 2, -1, 2},
    .logits_bias = 1,
    .tokenizer_class = "MBartTokenizer",
    .special_tokens = {"<s>", "</s>", "<unk>", "</s>", "<pad>", "<s>", "<mask>"},
    .source_language = "en_XX",
    .code_first_class = "MBart50Tokenizer",
    .read_config = tfm__bart_read_config,
    .load_tokenizers = tfm__fairseq_load_tokenizers,
    .prefix = "model.",
    .name = tfm__bart_name,
};
