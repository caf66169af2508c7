/* tfm_tokenizer_train_bpe on lines the input gives: its first 5 bytes are
 * the options (vocab_size from 2 bytes, 0 to 1,023; byte_fallback;
 * character_coverage in 256ths, 0 and past 1 refused; max_piece_length
 * 0 to 19; pad_piece), the rest the lines, cut at '\n' (NUL bytes and
 * invalid UTF-8 included, lengths given). A trained tokenizer must encode
 * every line, decode the ids, and read back the bytes it saves as the same
 * tokenizer (the same bytes saved again, the same ids). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

enum { MAX_LINES = 64, MAX_IDS = 8192 };

/* The ids of every line, written one after another into ids. */
static int64_t encode_all(const tfm_tokenizer *tok, const char *const *lines,
                          const int64_t *lengths, int64_t count, int32_t *ids)
{
    int64_t at = 0;
    for (int64_t i = 0; i < count; i++) {
        int64_t n = 0;
        tfm_status s = tfm_tokenizer_encode(tok, lines[i], lengths[i], ids + at, MAX_IDS - at, &n);
        FUZZ_ASSERT(s == TFM_OK || s == TFM_ERR_SIZE);
        if (s != TFM_OK)
            return at;
        at += n;
    }
    return at;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_bytes in = {data, size};
    tfm_bpe_train_options o;
    tfm_bpe_train_options_init(&o);
    o.vocab_size = (int32_t)fuzz_range(&in, 0, 1023);
    o.byte_fallback = (int32_t)fuzz_take(&in, 1) & 1;
    o.character_coverage = (double)fuzz_take(&in, 1) / 255.0 * 1.01;
    o.max_piece_length = (int32_t)fuzz_range(&in, 0, 19);
    o.pad_piece = (int32_t)fuzz_take(&in, 1) & 1;

    const char *lines[MAX_LINES];
    int64_t lengths[MAX_LINES], count = 0;
    const char *text = (const char *)in.data;
    for (size_t start = 0, i = 0; i <= in.size && count < MAX_LINES; i++) {
        if (i == in.size || text[i] == '\n') {
            lines[count] = text + start;
            lengths[count++] = (int64_t)(i - start);
            start = i + 1;
        }
    }
    tfm_tokenizer *tok = NULL;
    tfm_status s = tfm_tokenizer_train_bpe(lines, lengths, count, &o, &tok);
    FUZZ_ASSERT((s == TFM_OK) == (tok != NULL));
    if (!tok)
        return 0;

    static int32_t ids[MAX_IDS], again[MAX_IDS];
    int64_t n_ids = encode_all(tok, lines, lengths, count, ids);
    for (int64_t i = 0; i < n_ids; i++)
        FUZZ_ASSERT(ids[i] >= 0 && ids[i] < tfm_tokenizer_vocab_size(tok));
    static char decoded[MAX_IDS * 80]; /* 19 characters of 4 bytes a piece at most */
    int64_t length = 0;
    FUZZ_ASSERT(tfm_tokenizer_decode(tok, ids, n_ids, decoded, sizeof decoded, &length) == TFM_OK);

    /* what it saves it reads back */
    int64_t bytes_size = 0;
    FUZZ_ASSERT(tfm_tokenizer_save_bytes(tok, NULL, 0, &bytes_size) == TFM_ERR_SIZE);
    char *bytes = malloc((size_t)bytes_size * 2);
    if (bytes) {
        FUZZ_ASSERT(tfm_tokenizer_save_bytes(tok, bytes, bytes_size, &bytes_size) == TFM_OK);
        tfm_tokenizer *back = tfm_tokenizer_from_bytes(bytes, bytes_size);
        FUZZ_ASSERT(back != NULL);
        int64_t again_size = 0;
        FUZZ_ASSERT(tfm_tokenizer_save_bytes(back, bytes + bytes_size, bytes_size, &again_size) ==
                        TFM_OK &&
                    again_size == bytes_size &&
                    memcmp(bytes, bytes + bytes_size, (size_t)bytes_size) == 0);
        FUZZ_ASSERT(encode_all(back, lines, lengths, count, again) == n_ids &&
                    memcmp(ids, again, (size_t)n_ids * sizeof *ids) == 0);
        tfm_tokenizer_free(back);
        free(bytes);
    }
    tfm_tokenizer_free(tok);
    return 0;
}
