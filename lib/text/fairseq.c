/* The tokenizers that number a SentencePiece model as fairseq's
 * dictionaries do, as transformers' MBartTokenizer, MBart50Tokenizer,
 * NllbTokenizer (tokenization_mbart.py, tokenization_mbart50.py,
 * tokenization_nllb.py) and M2M100Tokenizer (tokenization_m2m_100.py)
 * number them, and T5Tokenizer's (tokenization_t5.py) with its sentinels:
 * renumbered tokenizers (renumbered.c) whose vocabulary is written here,
 * the language codes or sentinels following it as control tokens. */
#include "text/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors.h"

/* Appends s[0, len) as a JSON string, then tail. */
static int append_quoted(const char *op, tfm__bytes *out, const char *s, size_t len,
                         const char *tail)
{
    if (tfm__grow(op, (void **)&out->data, 1, out->size, &out->capacity,
                  tfm__json_quote(NULL, s, len)))
        return -1;
    out->size += tfm__json_quote(out->data + out->size, s, len);
    return tfm__bytes_append(op, out, tail, strlen(tail));
}

/* The control tokens past the vocabulary (renumbered.c): each code as
 * affix + code + affix, then last (NULL: none), then unknown ids. */
static int write_controls(const char *op, tfm__bytes *out, const char *const *codes,
                          int32_t n_codes, const char *affix, const char *last, int32_t unknown)
{
    static const char head[] = "{\"control_tokens\": [";
    int failed = tfm__bytes_append(op, out, head, sizeof head - 1);
    for (int32_t i = 0; i < n_codes + (last != NULL) && !failed; i++) {
        char token[64];
        int length = i < n_codes ? snprintf(token, sizeof token, "%s%s%s", affix, codes[i], affix)
                                 : snprintf(token, sizeof token, "%s", last);
        failed = append_quoted(op, out, token, (size_t)length,
                               i + 1 < n_codes + (last != NULL) ? ", " : "");
    }
    char tail[48];
    snprintf(tail, sizeof tail, "], \"unknown_ids\": %d}", (int)unknown);
    return failed || tfm__bytes_append(op, out, tail, strlen(tail));
}


/* The model file at path, parsed. */
static tfm_tokenizer *load_model(const char *op, const char *path)
{
    char *bytes;
    size_t size;
    if (tfm__read_whole_file(op, path, TFM__TOKENIZER_MAX_BYTES, &bytes, &size) != TFM_OK)
        return NULL;
    tfm_tokenizer *tok = tfm__sentencepiece_parse(op, bytes, size);
    free(bytes);
    return tok;
}

/* base (taken, also on failure) numbered by a vocabulary written here:
 * head's entries, then base's pieces from first on at their id + shift,
 * followed by codes and last (NULL: none) as control tokens. */
static tfm_tokenizer *numbered(const char *op, tfm_tokenizer *base, const char *head,
                               int32_t first, int32_t shift, const char *const *codes,
                               int32_t n_codes, const char *last)
{
    tfm__bytes vocab = {0}, controls = {0};
    int failed = tfm__bytes_append(op, &vocab, head, strlen(head)), comma = head[1] != '\0';
    for (int32_t id = first; id < base->size && !failed; id++, comma = 1) {
        char number[24];
        snprintf(number, sizeof number, ": %d", (int)(id + shift));
        failed = (comma && tfm__bytes_append(op, &vocab, ", ", 2)) ||
                 append_quoted(op, &vocab, base->pieces[id].text, base->pieces[id].length,
                               number);
    }
    failed = failed || tfm__bytes_append(op, &vocab, "}", 1) ||
             write_controls(op, &controls, codes, n_codes, "", last, 0);
    if (failed)
        tfm__tokenizer_free(base);
    tfm_tokenizer *tok = failed ? NULL
                                : tfm__renumbered_create(op, base, vocab.data, vocab.size,
                                                         controls.data, controls.size);
    free(vocab.data);
    free(controls.data);
    return tok;
}

tfm_tokenizer *tfm__fairseq_aligned_load(const char *op, const char *model_path,
                                         const char *const *codes, int32_t n_codes)
{
    tfm_tokenizer *base = load_model(op, model_path);
    /* fairseq's four first; the model's own <unk>, <s>, </s> (ids 0, 1, 2)
     * are hidden behind them, and every later piece moves up by one */
    return base ? numbered(op, base, "{\"<s>\": 0, \"<pad>\": 1, \"</s>\": 2, \"<unk>\": 3", 3,
                           1, codes, n_codes, "<mask>")
                : NULL;
}

tfm_tokenizer *tfm__fairseq_vocab_load(const char *op, const char *model_path,
                                       const char *vocab_path, const char *const *codes,
                                       int32_t n_codes, int32_t madeup_words)
{
    tfm__bytes controls = {0};
    char *vocab = NULL;
    size_t vocab_size;
    tfm_tokenizer *base, *tok = NULL;
    if (!write_controls(op, &controls, codes, n_codes, "__", NULL, madeup_words) &&
        tfm__read_whole_file(op, vocab_path, TFM__TOKENIZER_MAX_BYTES, &vocab, &vocab_size) ==
            TFM_OK &&
        (base = load_model(op, model_path)))
        tok = tfm__renumbered_create(op, base, vocab, vocab_size, controls.data, controls.size);
    free(controls.data);
    free(vocab);
    return tok;
}

/* T5Tokenizer's: the model's pieces at their own ids, then the
 * extra_ids sentinels, <extra_id_0> last (vocab_size - 1 - N is
 * <extra_id_N>). */
tfm_tokenizer *tfm__t5_load(const char *op, const char *model_path, int32_t extra_ids)
{
    char (*names)[24] = malloc((size_t)(extra_ids > 0 ? extra_ids : 1) * sizeof *names);
    const char **codes = malloc((size_t)(extra_ids > 0 ? extra_ids : 1) * sizeof *codes);
    tfm_tokenizer *base = names && codes ? load_model(op, model_path) : NULL, *tok = NULL;
    if (!names || !codes)
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %d sentinels", op, (int)extra_ids);
    for (int32_t i = 0; base && i < extra_ids; i++) {
        snprintf(names[i], sizeof names[i], "<extra_id_%d>", (int)(extra_ids - 1 - i));
        codes[i] = names[i];
    }
    if (base)
        tok = numbered(op, base, "{", 0, 0, codes, extra_ids, NULL);
    free(names);
    free(codes);
    return tok;
}
