/* A SentencePiece model whose pieces a published vocabulary numbers
 * (Marian's vocab.json: {piece: id}), as transformers' MarianTokenizer
 * uses source.spm and target.spm: text becomes the model's pieces, each
 * piece the vocabulary's id (its unknown id when the vocabulary lacks the
 * piece); ids become the vocabulary's pieces, which the model decodes (the
 * vocabulary's own control tokens, such as <pad>, give nothing; a piece
 * the model lacks gives its own spelling, U+2581 as a space, as
 * MarianTokenizer's convert_tokens_to_string does). The tokenizer's
 * pieces, ids and special tokens are the vocabulary's. */
#include "text/text.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static const char magic[8] = {'T', 'F', 'M', '-', 'V', 'M', 'A', 'P'};

tfm_tokenizer *tfm__renumbered_create(const char *op, tfm_tokenizer *base, const char *vocab,
                                      size_t vocab_size)
{
    tfm_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) {
        tfm__tokenizer_free(base);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return NULL;
    }
    tok->kind = base->kind;
    tok->base = base;
    const char *const parts[2] = {vocab, base->file};
    const size_t sizes[2] = {vocab_size, base->file_size};
    if (tfm__pair_pack(op, magic, parts, sizes, tok) ||
        tfm__vocab_read(op, tok, &tok->vocab, vocab, vocab_size)) {
        tfm__tokenizer_free(tok);
        return NULL;
    }
    if (tok->unk_id < 0) {
        tfm__fail(TFM_ERR_FORMAT, "%s: the vocabulary has no <unk> for the pieces it lacks", op);
        tfm__tokenizer_free(tok);
        return NULL;
    }
    return tok;
}

int tfm__renumbered_is_container(const char *bytes, size_t size)
{
    return tfm__pair_is_container(magic, bytes, size);
}

tfm_tokenizer *tfm__renumbered_from_bytes(const char *op, const char *bytes, size_t size)
{
    const char *parts[2];
    size_t sizes[2];
    if (tfm__pair_unpack(op, "a renumbered SentencePiece tokenizer", bytes, size, parts, sizes))
        return NULL;
    tfm_tokenizer *base = tfm__sentencepiece_parse(op, parts[1], sizes[1]);
    return base ? tfm__renumbered_create(op, base, parts[0], sizes[0]) : NULL;
}

int tfm__renumbered_encode(const char *op, const tfm_tokenizer *tok, const char *text,
                           size_t length, tfm__ids *out)
{
    tfm__ids pieces = {0};
    int failed = tfm__sentencepiece_encode(op, tok->base, text, length, &pieces);
    for (int64_t i = 0; i < pieces.size && !failed; i++) {
        const tfm__piece *p = &tok->base->pieces[pieces.data[i]];
        int32_t id = tfm__piece_id(tok, p->text, p->length);
        failed = tfm__ids_push(op, out, id >= 0 ? id : tok->unk_id);
    }
    free(pieces.data);
    return failed;
}

int tfm__renumbered_decode(const char *op, const tfm_tokenizer *tok, const int32_t *ids,
                           int64_t count, tfm__bytes *out)
{
    const tfm__piece **spelled = malloc((size_t)(count > 0 ? count : 1) * sizeof *spelled);
    if (!spelled) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %lld pieces", op, (long long)count);
        return -1;
    }
    int64_t n = 0;
    for (int64_t i = 0; i < count; i++) {
        int special = 0;
        for (int k = TFM_TOKEN_BOS; k <= TFM_TOKEN_PAD; k++)
            special |= ids[i] == tok->special[k];
        if (!special)
            spelled[n++] = &tok->pieces[ids[i]];
    }
    int failed = tfm__sentencepiece_decode_spelled(op, tok->base, spelled, n, out);
    free(spelled);
    /* MarianTokenizer: a piece the model lacks keeps its U+2581, which
     * becomes a space too */
    size_t w = 0;
    for (size_t r = 0; !failed && r < out->size;) {
        int space = out->size - r >= TFM__SPACE_SYMBOL_LEN &&
                    !memcmp(out->data + r, TFM__SPACE_SYMBOL, TFM__SPACE_SYMBOL_LEN);
        out->data[w++] = space ? ' ' : out->data[r];
        r += space ? TFM__SPACE_SYMBOL_LEN : 1;
    }
    if (!failed)
        out->size = w;
    return failed;
}
