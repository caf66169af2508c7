/* The published families (one entry each): what loading
 * (pretrained.c) and saving (pretrained_save.c) a folder in transformers'
 * layout both read, so the two cannot drift apart. */
#ifndef TFM_MODEL_FAMILIES_H
#define TFM_MODEL_FAMILIES_H

#include <stddef.h>
#include <stdint.h>

#include "tfm/model.h"
#include "tfm/text.h"

/* The defaults of a family's Config class (configuration_*.py) for the
 * keys a config.json may leave out, as transformers takes them: sizes,
 * special ids (-1: the class has none) and forced_eos_token_id, which
 * generate() takes from config.json when there is no
 * generation_config.json. A missing decoder_start_token_id where the
 * class has none (MBartConfig, T5Config) is bos_token_id, as generate()
 * falls back to it. T5Config's heads are num_heads of d_kv, its layers
 * num_layers, its feed-forward d_ff. */
typedef struct tfm__config_defaults {
    int64_t vocab, d_model, layers, heads, d_ff, pad, bos, eos, start, forced_eos;
} tfm__config_defaults;

/* The families and how each one builds its layers (modeling_*.py), with
 * their Config classes' defaults: scale_embedding and activation_function
 * differ between families (T5Config has neither). Each family's entry is
 * its own room, lib/model/families/NAME.c. */
typedef enum { TFM__MARIAN, TFM__BART, TFM__MBART, TFM__M2M100, TFM__T5 } tfm__family;
struct tfm__family_layout;
struct tfm__loader; /* model/loader.h */
/* The special-token attributes (SPECIAL_TOKENS_ATTRIBUTES) in this order. */
enum { TFM__BOS_TOKEN, TFM__EOS_TOKEN, TFM__UNK_TOKEN, TFM__SEP_TOKEN, TFM__PAD_TOKEN,
       TFM__CLS_TOKEN, TFM__MASK_TOKEN, TFM__SPECIAL_TOKENS };
/* position_offset of a family whose positions start past the padding id */
#define TFM__POSITIONS_PAST_PAD (-1)
typedef struct tfm__family_info {
    const char *model_type;
    int32_t norm_first, final_norm, embedding_norm;
    tfm_positions positions;
    int32_t position_offset; /* rows before position 0, or TFM__POSITIONS_PAST_PAD */
    int32_t scale_embedding;
    const char *activation;
    tfm__config_defaults defaults;
    int32_t logits_bias; /* final_logits_bias (M2M100's and T5's lm_head have no bias) */
    /* decoder_vocab_size and share_encoder_decoder_embeddings are read
     * (MarianConfig's only) */
    int32_t own_target_vocab;
    const char *tokenizer_class; /* transformers' default */
    /* the tokenizer class's special tokens (NULL: none), and whether its
     * <mask> strips the space before it whatever the folder says */
    const char *special_tokens[TFM__SPECIAL_TOKENS];
    int32_t mask_lstrip;
    /* The ids around a source (pretrained.c's read_text_template):
     * <s> X </s> (BART's), a leading ">>xx<<" one token (Marian's); a
     * multilingual family's default src_lang (NULL: one language), NLLB's
     * own, and the tokenizer class that puts the language code first
     * where the family's others put it last (mBART-50's, not mBART-cc25's). */
    int32_t bos_first, leading_code;
    const char *source_language, *nllb_source_language, *code_first_class;
    /* config.json's keys into o (the loader reads config.json); the
     * BART-like families share BartConfig's (tfm__bart_read_config) */
    int (*read_config)(struct tfm__loader *l, const struct tfm__family_info *f,
                       tfm_model_options *o);
    /* the family's tokenizer files, when the folder has them: 1 with
     * *source (NULL: none after all) and *target (NULL: the source's), 0
     * when absent, -1 with the error set (what was loaded is the
     * caller's to free either way) */
    int (*load_tokenizers)(struct tfm__loader *l, tfm_tokenizer **source, tfm_tokenizer **target);
    const char *prefix; /* of the tensor names: "model." (...ForConditionalGeneration) or "" */
    /* the published name of a parameter other than the generator's
     * (tfm__published_name) */
    int (*name)(const struct tfm__family_layout *layout, const tfm_model *m, const char *ours,
                char *out, size_t size);
} tfm__family_info;

extern const tfm__family_info tfm__marian, tfm__bart, tfm__mbart, tfm__m2m100, tfm__t5;
/* by tfm__family */
extern const tfm__family_info *const tfm__families[];
enum { TFM__FAMILIES = 5 };
/* T5Config's d_kv */
#define TFM__T5_D_KV 64

/* Where a family's tensors are in a folder's files. */
typedef struct tfm__family_layout {
    tfm__family family;
    int32_t shared;     /* one embedding table for both sides (model.shared) */
    const char *prefix; /* "model." (...ForConditionalGeneration) or "" */
} tfm__family_layout;

/* The BART-like families' readers (Marian, BART, mBART, M2M100): BartConfig's
 * keys; mBART's and M2M100's sentencepiece.bpe.model numbered as fairseq does
 * (families/fairseq.c). */
int tfm__bart_read_config(struct tfm__loader *l, const tfm__family_info *f, tfm_model_options *o);
int tfm__fairseq_load_tokenizers(struct tfm__loader *l, tfm_tokenizer **source,
                                 tfm_tokenizer **target);

/* The names of the BART-like families (Marian, BART, mBART, M2M100). */
int tfm__bart_name(const tfm__family_layout *layout, const tfm_model *m, const char *ours,
                   char *out, size_t size);
/* T5's */
int tfm__t5_name(const tfm__family_layout *layout, const tfm_model *m, const char *ours,
                 char *out, size_t size);

/* The published name of libtfm's parameter `ours` (prefix included; the
 * generator is lm_head.weight and final_logits_bias): 0, or -1 when the
 * family has no name for it. */
int tfm__published_name(const tfm__family_layout *layout, const tfm_model *m, const char *ours,
                        char *out, size_t size);

/* The tokenizer files transformers' tokenizers of these families read
 * and write (each family has some of them). */
extern const char *const tfm__tokenizer_files[];
enum { TFM__TOKENIZER_FILES = 11 };

/* What a model loaded from a published folder keeps to be saved in the
 * same layout (tfm_model_save_pretrained): its family, the folder's
 * config.json and generation_config.json as read (the architecture and
 * decoding defaults do not change after loading), and its tokenizer
 * files' bytes. */
typedef struct tfm__published {
    tfm__family family;
    int32_t shared;
    char *config, *generation;        /* NUL-terminated; generation NULL if none */
    int32_t n_files;
    char *file_names[TFM__TOKENIZER_FILES];
    char *file_bytes[TFM__TOKENIZER_FILES];
    size_t file_sizes[TFM__TOKENIZER_FILES];
    int32_t tokenizers_replaced;      /* tfm_model_set_tokenizers since loading */
} tfm__published;

/* Where a published model's tensors go: under "model." (the
 * ...ForConditionalGeneration class), T5's directly. */
tfm__family_layout tfm__published_layout(const tfm__published *p);

void tfm__published_free(tfm__published *p);

#endif
