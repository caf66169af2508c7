/* A SentencePiece model whose pieces a published vocabulary numbers
 * (Marian's vocab.json: {piece: id}), as transformers' MarianTokenizer
 * uses source.spm and target.spm: text becomes the model's pieces, each
 * piece's text the vocabulary's id (a run the model does not know looked
 * up by its own text, so a character only the vocabulary has keeps its
 * id; the unknown id when the vocabulary lacks the text); ids become the vocabulary's pieces, which the model decodes (the
 * vocabulary's own control tokens, such as <pad>, give nothing; a piece
 * the model lacks gives its own spelling, U+2581 as a space, as
 * MarianTokenizer's convert_tokens_to_string does). The tokenizer's
 * pieces, ids and special tokens are the vocabulary's. Control tokens past
 * the vocabulary (the fairseq-numbered tokenizers' language codes,
 * fairseq.c) join it as pieces that encoding never gives and decoding
 * drops. */
#include "text/text.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* vocabulary, model file and, when there are control tokens past the
 * vocabulary, their JSON: older files have the first two parts only */
static const char magic[8] = {'T', 'F', 'M', '-', 'V', 'M', 'A', 'P'};

/* {"control_tokens": [piece, ...], "unknown_ids": k}: after the
 * vocabulary, those control pieces in order, then k ids that read as
 * "<unk>" but are not found by it (transformers' M2M100Tokenizer reads its
 * made-up words so). */
static int read_controls(const char *op, tfm_tokenizer *tok, const char *text, size_t length)
{
    if (tfm__vocab_parse(op, &tok->controls, text, length))
        return -1;
    const tfm__json *doc = &tok->controls.doc;
    const tfm__json_node *root = &doc->nodes[0];
    const tfm__json_node *named = root->type == TFM__JSON_OBJECT
                                      ? tfm__json_member(doc, root, "control_tokens") : NULL;
    const tfm__json_node *unknown = root->type == TFM__JSON_OBJECT
                                        ? tfm__json_member(doc, root, "unknown_ids") : NULL;
    int64_t first = tok->size;
    if (!named || named->type != TFM__JSON_ARRAY || !unknown ||
        unknown->type != TFM__JSON_NUMBER || !unknown->is_integer || unknown->integer < 0 ||
        unknown->integer > INT32_MAX - first - named->count) {
        tfm__fail(TFM_ERR_FORMAT, "%s: the control tokens are not {\"control_tokens\": "
                  "[piece, ...], \"unknown_ids\": k} within 2^31 ids", op);
        return -1;
    }
    int32_t size = (int32_t)(first + named->count + unknown->integer);
    tfm__piece *pieces = realloc(tok->pieces, (size_t)size * sizeof *pieces);
    if (!pieces) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %d pieces", op, (int)size);
        return -1;
    }
    tok->pieces = pieces;
    tok->size = size;
    int32_t id = (int32_t)first;
    for (uint32_t i = (uint32_t)(named - doc->nodes) + 1; i < named->next;
         i = doc->nodes[i].next, id++) {
        const tfm__json_node *n = &doc->nodes[i];
        if (n->type != TFM__JSON_STRING || !n->string_len) {
            tfm__fail(TFM_ERR_FORMAT, "%s: control token %d is not a non-empty string", op,
                      (int)(id - first));
            return -1;
        }
        const char *piece = tfm__json_string(doc, n);
        pieces[id] = (tfm__piece){piece, n->string_len, 0.0f, TFM__PIECE_CONTROL, -1};
        if (tfm__trie_add(op, &tok->trie, piece, n->string_len, TFM__TRIE_MATCHED, id))
            return -1;
    }
    for (; id < size; id++)
        pieces[id] = (tfm__piece){"<unk>", 5, 0.0f, TFM__PIECE_UNKNOWN, -1};
    return 0;
}

tfm_tokenizer *tfm__renumbered_create(const char *op, tfm_tokenizer *base, const char *vocab,
                                      size_t vocab_size, const char *controls,
                                      size_t controls_size)
{
    tfm_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) {
        tfm__tokenizer_free(base);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return NULL;
    }
    tok->kind = base->kind;
    tok->base = base;
    const char *const parts[3] = {vocab, base->file, controls};
    const size_t sizes[3] = {vocab_size, base->file_size, controls_size};
    if (tfm__parts_pack(op, magic, controls ? 3 : 2, parts, sizes, tok) ||
        tfm__vocab_read(op, tok, &tok->vocab, vocab, vocab_size) ||
        (controls && read_controls(op, tok, controls, controls_size))) {
        tfm__tokenizer_free(tok);
        return NULL;
    }
    if (tok->unk_id < 0) {
        tfm__fail(TFM_ERR_FORMAT, "%s: the vocabulary has no <unk> for the pieces it lacks", op);
        tfm__tokenizer_free(tok);
        return NULL;
    }
    for (int k = TFM_TOKEN_BOS; k <= TFM_TOKEN_PAD; k++)
        if (tok->special[k] >= 0)
            tok->pieces[tok->special[k]].type = TFM__PIECE_CONTROL;
    return tok;
}

int tfm__renumbered_is_container(const char *bytes, size_t size)
{
    return tfm__parts_is_container(magic, bytes, size);
}

tfm_tokenizer *tfm__renumbered_from_bytes(const char *op, const char *bytes, size_t size)
{
    const char *parts[3];
    size_t sizes[3];
    int count = tfm__parts_unpack(op, "a renumbered SentencePiece tokenizer", bytes, size, 2, 3,
                                  parts, sizes);
    if (count < 0)
        return NULL;
    tfm_tokenizer *base = tfm__sentencepiece_parse(op, parts[1], sizes[1]);
    return base ? tfm__renumbered_create(op, base, parts[0], sizes[0],
                                         count == 3 ? parts[2] : NULL, count == 3 ? sizes[2] : 0)
                : NULL;
}

int tfm__renumbered_encode(const char *op, const tfm_tokenizer *tok, const char *text,
                           size_t length, tfm__ids *out)
{
    return tfm__sentencepiece_encode(op, tok->base, tok, text, length, out);
}

int tfm__renumbered_decode(const char *op, const tfm_tokenizer *tok, const int32_t *ids,
                           int64_t count, tfm__bytes *out)
{
    tfm__ids kept = {0};
    int failed = 0;
    for (int64_t i = 0; i < count && !failed; i++) {
        int special = tok->pieces[ids[i]].type == TFM__PIECE_CONTROL;
        for (int k = TFM_TOKEN_BOS; k <= TFM_TOKEN_PAD; k++)
            special |= ids[i] == tok->special[k];
        failed = !special && tfm__ids_push(op, &kept, ids[i]);
    }
    failed = failed ||
             tfm__sentencepiece_decode_spelled(op, tok->base, tok, kept.data, kept.size, out);
    free(kept.data);
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
