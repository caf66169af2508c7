/* What the tokenizers numbered by a vocabulary JSON share: reading
 * {piece: id} into a tokenizer's pieces, and the container of parts their
 * save_bytes writes (8 bytes of magic, then each part after its size in 8
 * bytes, little-endian). Byte-level BPE keeps vocab.json and merges.txt
 * so; a renumbered SentencePiece model its vocabulary, model file and, when
 * it has control tokens past the vocabulary, those. */
#include "text/text.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

int tfm__vocab_parse(const char *op, tfm__vocab *vocab, const char *text, size_t size)
{
    /* a copy: the parser decodes strings in place, and the pieces point
     * into it */
    if (!(vocab->text = malloc(size ? size : 1))) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return -1;
    }
    memcpy(vocab->text, text, size);
    if (tfm__json_parse(op, vocab->text, size, (int64_t)(size / 2 + 1), &vocab->doc))
        return -1;
    vocab->parsed = 1;
    return 0;
}

int tfm__vocab_read(const char *op, tfm_tokenizer *tok, tfm__vocab *vocab, const char *text,
                    size_t size)
{
    if (tfm__vocab_parse(op, vocab, text, size))
        return -1;
    const tfm__json_node *root = &vocab->doc.nodes[0];
    if (root->type != TFM__JSON_OBJECT || root->count < 1 || root->count > INT32_MAX) {
        tfm__fail(TFM_ERR_FORMAT, "%s: the vocabulary is not an object of pieces", op);
        return -1;
    }
    tok->size = (int32_t)root->count;
    tok->pieces = calloc((size_t)tok->size, sizeof *tok->pieces);
    if (!tok->pieces) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %d pieces", op, (int)tok->size);
        return -1;
    }
    for (int64_t i = 1; i < vocab->doc.count; i = vocab->doc.nodes[i].next) {
        const tfm__json_node *n = &vocab->doc.nodes[i];
        const char *key = tfm__json_key(&vocab->doc, n);
        if (n->type != TFM__JSON_NUMBER || !n->is_integer || n->integer < 0 ||
            n->integer >= tok->size || tok->pieces[n->integer].text || !n->key_len) {
            tfm__fail(TFM_ERR_FORMAT, "%s: the vocabulary's \"%.*s\" is not a new id in [0, %d)",
                      op, (int)(n->key_len > 64 ? 64 : n->key_len), key, (int)tok->size);
            return -1;
        }
        tok->pieces[n->integer] = (tfm__piece){key, (uint32_t)n->key_len, 0.0f,
                                               TFM__PIECE_NORMAL, -1};
        if (tfm__trie_add(op, &tok->trie, key, n->key_len, TFM__TRIE_MATCHED,
                          (int32_t)n->integer))
            return -1;
    }
    static const char *const names[4][2] = {
        {"<unk>", "<unk>"}, {"<s>", "<|endoftext|>"}, {"</s>", "<|endoftext|>"}, {"<pad>", "<pad>"}};
    for (int k = 0; k < 4; k++) {
        int32_t id = tfm__piece_id(tok, names[k][0], strlen(names[k][0]));
        tok->special[k] = id >= 0 ? id : tfm__piece_id(tok, names[k][1], strlen(names[k][1]));
    }
    tok->unk_id = tok->special[TFM_TOKEN_UNK];
    return 0;
}

void tfm__vocab_free(tfm__vocab *vocab)
{
    if (vocab->parsed)
        tfm__json_free(&vocab->doc);
    free(vocab->text);
    memset(vocab, 0, sizeof *vocab);
}

int tfm__parts_pack(const char *op, const char magic[8], int count, const char *const *parts,
                    const size_t *sizes, tfm_tokenizer *tok)
{
    tfm__bytes out = {0};
    int failed = tfm__bytes_append(op, &out, magic, 8);
    for (int k = 0; k < count && !failed; k++) {
        unsigned char size[8];
        for (int i = 0; i < 8; i++)
            size[i] = (unsigned char)((uint64_t)sizes[k] >> (8 * i));
        failed = tfm__bytes_append(op, &out, size, 8) ||
                 tfm__bytes_append(op, &out, parts[k], sizes[k]);
    }
    if (failed) {
        free(out.data);
        return -1;
    }
    tok->file = out.data;
    tok->file_size = out.size;
    return 0;
}

int tfm__parts_is_container(const char magic[8], const char *bytes, size_t size)
{
    return size >= 8 && !memcmp(bytes, magic, 8);
}

int tfm__parts_unpack(const char *op, const char *what, const char *bytes, size_t size,
                      int min_count, int max_count, const char **parts, size_t *sizes)
{
    size_t at = 8;
    int k = 0;
    for (; k < max_count && at < size; k++) {
        uint64_t n = 0;
        if (size - at < 8)
            goto broken;
        for (int i = 0; i < 8; i++)
            n |= (uint64_t)(unsigned char)bytes[at + (size_t)i] << (8 * i);
        at += 8;
        if (n > size - at)
            goto broken;
        parts[k] = bytes + at;
        sizes[k] = (size_t)n;
        at += (size_t)n;
    }
    if (at == size && k >= min_count)
        return k;
broken:
    tfm__fail(TFM_ERR_FORMAT, "%s: %s's bytes are truncated or have bytes after them", op,
              what);
    return -1;
}
