/* M2M100 and NLLB (modeling_m2m_100.py, M2M100Config, M2M100Tokenizer):
 * pre-norm, fairseq's sinusoids past the padding id, the stacks'
 * layer_norm, an lm_head without bias. */
#include "model/families.h"
#include "model/loader.h"


const tfm__family_info tfm__m2m100 = {
    .model_type = "m2m_100",
    .norm_first = 1,
    .final_norm = 1,
    .positions = TFM_POSITIONS_SINUSOIDAL_FAIRSEQ,
    .position_offset = TFM__POSITIONS_PAST_PAD,
    .scale_embedding = 1,
    .activation = "relu",
    .defaults = {128112, 1024, 12, 16, 4096, 1, 0, 2, 2, -1},
    .tokenizer_class = "M2M100Tokenizer",
    .special_tokens = {"<s>", "</s>", "<unk>", "</s>", "<pad>"},
    .source_language = "en",
    .nllb_source_language = "eng_Latn",
    .read_config = tfm__bart_read_config,
    .load_tokenizers = tfm__fairseq_load_tokenizers,
    .prefix = "model.",
    .name = tfm__bart_name,
};
