/* What mBART and M2M100 (NLLB) share: sentencepiece.bpe.model numbered
 * as fairseq does, with the language codes of the tokenizer class. */
#include <string.h>

#include "core/error.h"
#include "model/families.h"
#include "model/loader.h"
#include "text/text.h"

/* transformers' tokenizer classes that number sentencepiece.bpe.model as
 * fairseq does (a "...Fast" class as its slow one), with their table of
 * language codes (language_codes.c); M2M100Tokenizer's is
 * tokenizer_config.json's language_codes and its pieces vocab.json's. */
static const struct {
    const char *name, *codes;
} fairseq_classes[] = {{"MBartTokenizer", "mbart"},
                       {"MBart50Tokenizer", "mbart50"},
                       {"NllbTokenizer", "nllb"},
                       {"M2M100Tokenizer", NULL}};

/* M2M100Tokenizer into *out: vocab.json numbers the pieces (none when it
 * is not there), the loader's document says language_codes and
 * num_madeup_words. */
static int m2m100_tokenizer(tfm__loader *l, const char *model_path, tfm_tokenizer **out)
{
    char vocab_path[PATH_MAX_BYTES];
    int64_t madeup;
    int32_t n_codes;
    if (!tfm__has_file(l, "vocab.json", vocab_path))
        return 0;
    if (tfm__config_int(l, "num_madeup_words", 8, 0, 1 << 20, &madeup) < 0)
        return -1;
    const char *table = tfm__config_string(l, "language_codes");
    table = table ? table : "m2m100";
    if (strcmp(table, "m2m100") != 0 && strcmp(table, "wmt21") != 0) {
        tfm__fail(TFM_ERR_FORMAT, "%s: %s's language_codes \"%s\" is not a table libtfm knows "
                  "(m2m100, wmt21)", l->ctx, l->doc_name, table);
        return -1;
    }
    const char *const *codes = tfm__language_codes(table, &n_codes);
    l->codes = codes;
    l->n_codes = n_codes;
    l->code_affix = "__";
    *out = tfm__fairseq_vocab_load(l->ctx, model_path, vocab_path, codes, n_codes,
                                   (int32_t)madeup);
    return *out ? 0 : -1;
}

/* mBART's and M2M100's tokenizer into *out: sentencepiece.bpe.model at
 * model_path numbered as tokenizer_config.json's tokenizer_class does
 * (else config.json's, else the family's transformers default); none for
 * an M2M100 folder without vocab.json. */
static int fairseq_tokenizer(tfm__loader *l, const char *model_path, tfm_tokenizer **out)
{
    tfm__reading_config(l);
    const char *name = tfm__config_string(l, "tokenizer_class");
    if (l->has_settings) {
        tfm__reading_settings(l);
        const char *own = tfm__config_string(l, "tokenizer_class");
        name = own ? own : name;
    }
    name = name ? name : tfm__families[l->family]->tokenizer_class;
    l->tokenizer_class = name;
    size_t length = strlen(name);
    length -= length > 4 && strcmp(name + length - 4, "Fast") == 0 ? 4 : 0;
    size_t k = 0, n = sizeof fairseq_classes / sizeof fairseq_classes[0];
    while (k < n && !(strlen(fairseq_classes[k].name) == length &&
                      strncmp(fairseq_classes[k].name, name, length) == 0))
        k++;
    int32_t n_codes, status = -1;
    if (k == n) {
        tfm__fail(TFM_ERR_FORMAT, "%s: tokenizer_class \"%s\" is not one libtfm reads for a %s "
                  "model (MBartTokenizer, MBart50Tokenizer, NllbTokenizer, M2M100Tokenizer)",
                  l->ctx, name, tfm__families[l->family]->model_type);
    } else if (!fairseq_classes[k].codes) {
        status = m2m100_tokenizer(l, model_path, out);
    } else {
        const char *const *codes = tfm__language_codes(fairseq_classes[k].codes, &n_codes);
        l->codes = codes;
        l->n_codes = n_codes;
        l->code_affix = "";
        l->mask_lstrip = 1;
        status = (*out = tfm__fairseq_aligned_load(l->ctx, model_path, codes, n_codes)) ? 0 : -1;
    }
    tfm__reading_config(l);
    return status;
}

int tfm__fairseq_load_tokenizers(tfm__loader *l, tfm_tokenizer **source,
                                 tfm_tokenizer **target)
{
    char a[PATH_MAX_BYTES];
    (void)target;
    if (!tfm__has_file(l, "sentencepiece.bpe.model", a))
        return 0;
    return fairseq_tokenizer(l, a, source) < 0 ? -1 : 1;
}
