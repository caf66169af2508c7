/* The public tokenizer calls: argument checks, the caller's buffers, and
 * dispatch to the model's room. */
#include "text/text.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/safetensors.h"

void tfm__tokenizer_free(tfm_tokenizer *tok)
{
    if (!tok)
        return;
    tfm__trie_free(&tok->trie);
    tfm__byte_bpe_free(tok->byte_bpe);
    tfm__tokenizer_free(tok->base);
    tfm__vocab_free(&tok->vocab);
    tfm__vocab_free(&tok->controls);
    tfm__trie_free(&tok->added_trie);
    free(tok->added);
    free(tok->pieces);
    free(tok->unk_surface);
    free(tok->file);
    free(tok);
}

void tfm_tokenizer_free(tfm_tokenizer *tokenizer) { tfm__tokenizer_free(tokenizer); }

tfm_tokenizer *tfm_tokenizer_load_sentencepiece(const char *path)
{
    static const char op[] = "tfm_tokenizer_load_sentencepiece";
    char *bytes;
    size_t size;
    if (tfm__read_whole_file(op, path, TFM__TOKENIZER_MAX_BYTES, &bytes, &size))
        return NULL;
    tfm_tokenizer *tok = tfm__sentencepiece_parse(op, bytes, size);
    free(bytes);
    return tok;
}

tfm_tokenizer *tfm_tokenizer_load_byte_bpe(const char *vocab_path, const char *merges_path)
{
    static const char op[] = "tfm_tokenizer_load_byte_bpe";
    char *vocab = NULL, *merges = NULL;
    size_t vocab_size, merges_size;
    tfm_tokenizer *tok = NULL;
    if (!vocab_path || !merges_path) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, !vocab_path ? "vocab_path" : "merges_path");
        return NULL;
    }
    if (!tfm__read_whole_file(op, vocab_path, TFM__TOKENIZER_MAX_BYTES, &vocab, &vocab_size) &&
        !tfm__read_whole_file(op, merges_path, TFM__TOKENIZER_MAX_BYTES, &merges, &merges_size))
        tok = tfm__byte_bpe_parse(op, vocab, vocab_size, merges, merges_size);
    free(vocab);
    free(merges);
    return tok;
}

tfm_tokenizer *tfm_tokenizer_load_sentencepiece_with_vocab(const char *model_path,
                                                          const char *vocab_path)
{
    static const char op[] = "tfm_tokenizer_load_sentencepiece_with_vocab";
    char *model = NULL, *vocab = NULL;
    size_t model_size, vocab_size;
    tfm_tokenizer *tok = NULL, *base = NULL;
    if (!model_path || !vocab_path) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, !model_path ? "model_path" : "vocab_path");
        return NULL;
    }
    if (!tfm__read_whole_file(op, model_path, TFM__TOKENIZER_MAX_BYTES, &model, &model_size) &&
        !tfm__read_whole_file(op, vocab_path, TFM__TOKENIZER_MAX_BYTES, &vocab, &vocab_size) &&
        (base = tfm__sentencepiece_parse(op, model, model_size)))
        tok = tfm__renumbered_create(op, base, vocab, vocab_size, NULL, 0);
    free(model);
    free(vocab);
    return tok;
}

tfm_tokenizer *tfm_tokenizer_from_bytes(const void *bytes, int64_t size)
{
    static const char op[] = "tfm_tokenizer_from_bytes";
    if (!bytes) {
        tfm__fail(TFM_ERR_NULL, "%s: bytes is NULL", op);
        return NULL;
    }
    if (size < 0 || (uint64_t)size > TFM__TOKENIZER_MAX_BYTES) {
        tfm__fail(TFM_ERR_ARG, "%s: size %lld is outside [0, %zu]", op, (long long)size,
                  TFM__TOKENIZER_MAX_BYTES);
        return NULL;
    }
    return tfm__tokenizer_parse(op, bytes, (size_t)size);
}

tfm_tokenizer *tfm__tokenizer_parse(const char *op, const char *bytes, size_t size)
{
    return tfm__byte_bpe_is_container(bytes, size)     ? tfm__byte_bpe_from_bytes(op, bytes, size)
           : tfm__renumbered_is_container(bytes, size) ? tfm__renumbered_from_bytes(op, bytes, size)
           : tfm__added_is_container(bytes, size)      ? tfm__added_from_bytes(op, bytes, size)
                                                       : tfm__sentencepiece_parse(op, bytes, size);
}

/* Copies data[0, size) into the caller's buffer dst, the argument called
 * dst_name, of capacity bytes (plus a NUL when text), after checking it fits. */
static tfm_status copy_out(const char *op, const void *data, size_t size, int text, void *dst,
                          const char *dst_name, int64_t capacity, int64_t *size_out)
{
    *size_out = (int64_t)size;
    if (capacity < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: capacity %lld is negative", op, (long long)capacity);
    if ((uint64_t)capacity < size + (text ? 1 : 0))
        return tfm__fail(TFM_ERR_SIZE, "%s: the result takes %zu bytes%s; capacity is %lld",
                         op, size, text ? " and a NUL" : "", (long long)capacity);
    if (!dst)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, dst_name);
    memcpy(dst, data, size);
    if (text)
        ((char *)dst)[size] = 0;
    return TFM_OK;
}

tfm_status tfm_tokenizer_save_bytes(const tfm_tokenizer *tokenizer, void *bytes,
                                    int64_t capacity, int64_t *size)
{
    static const char op[] = "tfm_tokenizer_save_bytes";
    if (!tokenizer || !size)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, tokenizer ? "size" : "tokenizer");
    return copy_out(op, tokenizer->file, tokenizer->file_size, 0, bytes, "bytes", capacity,
                    size);
}

tfm_status tfm_tokenizer_save(const tfm_tokenizer *tokenizer, const char *path)
{
    static const char op[] = "tfm_tokenizer_save";
    if (!tokenizer || !path)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, tokenizer ? "path" : "tokenizer");
    return tfm__save_bytes_atomically(op, path, tokenizer->file, tokenizer->file_size);
}

int tfm__tokenizer_encode_text(const char *op, const tfm_tokenizer *tok, const char *text,
                               size_t length, tfm__ids *out)
{
    return tok->byte_bpe ? tfm__byte_bpe_encode(op, tok, text, length, out)
           : tok->base   ? tfm__renumbered_encode(op, tok, text, length, out)
                         : tfm__sentencepiece_encode(op, tok, NULL, text, length, out);
}

/* text[0, length)'s ids into *out: its added tokens as one id each, the
 * text between them by the tokenizer's model; 0, or -1 with the error set
 * (out is the caller's to free either way). */
static int encode_all(const char *op, const tfm_tokenizer *tok, const char *text, size_t length,
                      tfm__ids *out)
{
    text = text ? text : "";
    return tok->n_added ? tfm__added_encode(op, tok, text, length, out)
                        : tfm__tokenizer_encode_text(op, tok, text, length, out);
}

/* The common checks of the encoding calls; TFM_OK or the error. */
static tfm_status check_encode(const char *op, const tfm_tokenizer *tok, const char *text,
                               int64_t length, int64_t capacity, int64_t *count)
{
    if (!tok || !count || (!text && length))
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                         !tok ? "tokenizer" : !count ? "count" : "text");
    *count = 0;
    if (length < 0 || capacity < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: %s %lld is negative", op,
                         length < 0 ? "length" : "capacity",
                         (long long)(length < 0 ? length : capacity));
    return TFM_OK;
}

tfm_status tfm_tokenizer_encode(const tfm_tokenizer *tokenizer, const char *text,
                                int64_t length, int32_t *ids, int64_t capacity, int64_t *count)
{
    static const char op[] = "tfm_tokenizer_encode";
    if (check_encode(op, tokenizer, text, length, capacity, count))
        return tfm_last_status();
    tfm__ids out = {0};
    if (encode_all(op, tokenizer, text, (size_t)length, &out)) {
        free(out.data);
        return tfm_last_status();
    }
    tfm_status s = TFM_OK;
    *count = out.size;
    if (capacity < out.size)
        s = tfm__fail(TFM_ERR_SIZE, "%s: the text takes %lld ids; capacity is %lld", op,
                      (long long)out.size, (long long)capacity);
    else if (out.size && !ids)
        s = tfm__fail(TFM_ERR_NULL, "%s: ids is NULL", op);
    else if (out.size)
        memcpy(ids, out.data, (size_t)out.size * sizeof *ids);
    free(out.data);
    return s;
}

/* Where a prefix of at most limit bytes of text[0, length) may end so
 * that its ids are the whole text's first ids: before an ASCII space
 * that follows a printable ASCII byte, where neither SentencePiece's
 * pieces (split at whitespace: U+2581 only begins one) nor GPT-2's words
 * cross, nor a normalisation rule reaches. In the last half of the limit;
 * 0 when there is none. */
static size_t word_boundary(const char *text, size_t length, size_t limit)
{
    for (size_t at = limit < length ? limit : length; at > limit / 2; at--)
        if (strchr(" \t\n\r\v\f", text[at]) && text[at] != '\0' && text[at - 1] > ' ' &&
            text[at - 1] < 0x7f)
            return at;
    return 0;
}

/* The start of the character holding text[at] (at > 0). */
static size_t character_start(const char *text, size_t at)
{
    while (at > 0 && ((unsigned char)text[at] & 0xC0) == 0x80)
        at--;
    return at;
}

tfm_status tfm_tokenizer_encode_truncated(const tfm_tokenizer *tokenizer, const char *text,
                                          int64_t length, int32_t *ids, int64_t capacity,
                                          int64_t *count, int32_t *cut)
{
    static const char op[] = "tfm_tokenizer_encode_truncated";
    if (cut)
        *cut = 0;
    if (check_encode(op, tokenizer, text, length, capacity, count))
        return tfm_last_status();
    if (capacity > 0 && !ids)
        return tfm__fail(TFM_ERR_NULL, "%s: ids is NULL", op);
    /* Prefixes four times longer each time until one gives more than
     * capacity ids: encoding costs tens of bytes of memory per byte of
     * text, so a line of megabytes is never encoded whole for a few
     * hundred ids. A prefix cut inside a word may end in other ids than
     * the whole text: MARGIN of its last ids are not trusted then. Past
     * BYTES_PER_ID bytes an id kept (runs of spaces, which SentencePiece
     * drops; one unknown piece for a run of unknown characters) the text
     * is cut as if it ended there. */
    enum { MARGIN = 16, FIRST_BYTES_PER_ID = 16, BYTES_PER_ID = 256 };
    size_t total = (size_t)length, want = (size_t)capacity;
    size_t ids_read = want < total ? want + MARGIN + 1 : total;
    size_t limit = ids_read * FIRST_BYTES_PER_ID, most = ids_read * BYTES_PER_ID;
    tfm__ids out = {0};
    for (;;) {
        size_t end = total, margin = 0;
        if (limit < total && !(end = word_boundary(text, total, limit))) {
            end = character_start(text, limit);
            margin = MARGIN;
        }
        out.size = 0;
        if (encode_all(op, tokenizer, text, end, &out)) {
            free(out.data);
            return tfm_last_status();
        }
        size_t got = (size_t)out.size;
        if (end == total || got > want + margin || limit >= most) {
            *count = (int64_t)(got < want ? got : want);
            if (*count)
                memcpy(ids, out.data, (size_t)*count * sizeof *ids);
            if (cut)
                *cut = end < total || got > want;
            free(out.data);
            return TFM_OK;
        }
        limit = limit > most / 4 ? most : limit * 4;
    }
}

/* TFM_OK when every id is a piece of the tokenizer. */
static tfm_status check_ids(const char *op, const tfm_tokenizer *tok, const int32_t *ids,
                            int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        if (ids[i] < 0 || ids[i] >= tok->size)
            return tfm__fail(TFM_ERR_RANGE, "%s: ids[%lld] = %d is outside [0, %d)", op,
                             (long long)i, (int)ids[i], (int)tok->size);
    return TFM_OK;
}

tfm_status tfm_tokenizer_decode(const tfm_tokenizer *tokenizer, const int32_t *ids,
                                int64_t count, char *text, int64_t capacity, int64_t *length)
{
    static const char op[] = "tfm_tokenizer_decode";
    if (!tokenizer || !length || (!ids && count))
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                         !tokenizer ? "tokenizer" : !length ? "length" : "ids");
    *length = 0;
    if (count < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: count %lld is negative", op, (long long)count);
    if (check_ids(op, tokenizer, ids, count))
        return tfm_last_status();
    tfm__bytes out = {0};
    int failed = tokenizer->byte_bpe ? tfm__byte_bpe_decode(op, tokenizer, ids, count, &out)
                 : tokenizer->base   ? tfm__renumbered_decode(op, tokenizer, ids, count, &out)
                                     : tfm__sentencepiece_decode(op, tokenizer, ids, count, &out);
    tfm_status s = failed ? tfm_last_status()
                       : copy_out(op, out.data ? out.data : "", out.size, 1, text, "text", capacity,
                                  length);
    free(out.data);
    return s;
}

int32_t tfm_tokenizer_vocab_size(const tfm_tokenizer *tokenizer)
{
    if (!tokenizer) {
        tfm__fail(TFM_ERR_NULL, "tfm_tokenizer_vocab_size: tokenizer is NULL");
        return -1;
    }
    return tokenizer->size;
}

int32_t tfm_tokenizer_piece_to_id(const tfm_tokenizer *tokenizer, const char *piece,
                                  int64_t length)
{
    static const char op[] = "tfm_tokenizer_piece_to_id";
    if (!tokenizer || (!piece && length)) {
        tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, tokenizer ? "piece" : "tokenizer");
        return -1;
    }
    if (length < 0) {
        tfm__fail(TFM_ERR_ARG, "%s: length %lld is negative", op, (long long)length);
        return -1;
    }
    return tfm__piece_id(tokenizer, piece ? piece : "", (size_t)length);
}

tfm_status tfm_tokenizer_id_to_piece(const tfm_tokenizer *tokenizer, int32_t id, char *piece,
                                     int64_t capacity, int64_t *length)
{
    static const char op[] = "tfm_tokenizer_id_to_piece";
    if (!tokenizer || !length)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op, tokenizer ? "length" : "tokenizer");
    *length = 0;
    if (id < 0 || id >= tokenizer->size)
        return tfm__fail(TFM_ERR_RANGE, "%s: id %d is outside [0, %d)", op, (int)id,
                         (int)tokenizer->size);
    const tfm__piece *p = &tokenizer->pieces[id];
    return copy_out(op, p->text, p->length, 1, piece, "piece", capacity, length);
}

int32_t tfm_tokenizer_special_id(const tfm_tokenizer *tokenizer, tfm_special_token which)
{
    static const char op[] = "tfm_tokenizer_special_id";
    if (!tokenizer) {
        tfm__fail(TFM_ERR_NULL, "%s: tokenizer is NULL", op);
        return -1;
    }
    if ((int)which < TFM_TOKEN_UNK || (int)which > TFM_TOKEN_PAD) {
        tfm__fail(TFM_ERR_ARG, "%s: %d is not a tfm_special_token", op, (int)which);
        return -1;
    }
    return tokenizer->special[which];
}
