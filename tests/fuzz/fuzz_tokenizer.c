/* Tokenizers from untrusted bytes (tfm_tokenizer_from_bytes: SentencePiece
 * model files and the byte-level container); whatever loads must encode
 * text of several scripts, and the input's own bytes as text, then decode
 * what it encoded, reading nothing out of bounds. */
#include <stdlib.h>

#include "fuzz.h"

static void round_trip(const tfm_tokenizer *tok, const char *text, size_t size)
{
    int64_t count = 0, length = 0;
    if (tfm_tokenizer_encode(tok, text, (int64_t)size, NULL, 0, &count) != TFM_OK && !count)
        return;
    int32_t *ids = malloc((size_t)count * sizeof *ids + 1);
    if (ids && tfm_tokenizer_encode(tok, text, (int64_t)size, ids, count, &count) == TFM_OK &&
        tfm_tokenizer_decode(tok, ids, count, NULL, 0, &length) == TFM_ERR_SIZE) {
        char *back = malloc((size_t)length + 1);
        if (back && tfm_tokenizer_decode(tok, ids, count, back, length + 1, &length) != TFM_OK)
            __builtin_trap(); /* the size it asked for must do */
        free(back);
    }
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tfm_tokenizer *tok = tfm_tokenizer_from_bytes(data, (int64_t)size);
    if (!tok)
        return 0;
    static const char text[] = "  Fichier « introuvable »  \xe2\x81\x87 \xff\xc3 \xef\xbd\x86 "
                               "\xe2\x91\xa0 \xe8\xbb\xbd\xe9\x87\x8f <0x41> Don't 42\n\t";
    round_trip(tok, text, sizeof text - 1);
    round_trip(tok, (const char *)data, size < 512 ? size : 512);
    tfm_tokenizer_free(tok);
    return 0;
}
