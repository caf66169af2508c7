/** @file
 * Tokenizers: text to token ids and back.
 *
 * A tfm_tokenizer reads SentencePiece model files (unigram, BPE, word and
 * char models, as `spm_train` writes them) and GPT-2/BART byte-level BPE
 * files (`vocab.json` + `merges.txt`), or is trained here (BPE). Encoding
 * gives the ids SentencePiece 0.1.97 (`spm_encode --output_format=id`)
 * gives, and decoding its text: the model file's normalisation (its
 * precompiled character map, e.g. nmt_nfkc), whitespace handling, user
 * symbols, unknown pieces and byte fallback included.
 *
 * Text is UTF-8. Invalid UTF-8 never fails: as in SentencePiece, each byte
 * that does not begin a well-formed character is read as U+FFFD (which
 * then becomes the unknown id, or its three bytes with byte fallback).
 * Byte-level BPE takes any bytes as they are.
 *
 * Ownership and threads: what a load, train or from_bytes call returns is
 * the caller's, freed with tfm_tokenizer_free(). A tokenizer never changes
 * after it is made, so any number of threads may encode and decode with
 * one tokenizer at once. Errors as everywhere: a status (or NULL, or -1 as
 * documented) and tfm_last_error(). */
#ifndef TFM_TEXT_H
#define TFM_TEXT_H

#include <stdint.h>

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A tokenizer: an opaque handle. */
typedef struct tfm_tokenizer tfm_tokenizer;

/** The special tokens a tokenizer may have. */
typedef enum tfm_special_token {
    TFM_TOKEN_UNK = 0, /**< the unknown piece */
    TFM_TOKEN_BOS = 1, /**< beginning of sequence */
    TFM_TOKEN_EOS = 2, /**< end of sequence */
    TFM_TOKEN_PAD = 3  /**< padding */
} tfm_special_token;

/** Reads a SentencePiece model file (`spm_train`'s `.model`). NULL on
 * failure: TFM_ERR_IO (cannot read), TFM_ERR_FORMAT (not a valid model: the
 * message says where), TFM_ERR_NOMEM. */
TFM_API tfm_tokenizer *tfm_tokenizer_load_sentencepiece(const char *path);

/** Reads a GPT-2/BART byte-level BPE tokenizer: `vocab.json` (an object of
 * piece to id, pieces in GPT-2's byte-to-unicode alphabet) and
 * `merges.txt` (one merge "A B" a line, best first; a first line beginning
 * with "#version" is skipped). The ids must be 0 .. N-1 for N pieces.
 * Special ids: `<unk>`, `<s>` (else `<|endoftext|>`), `</s>` (else
 * `<|endoftext|>`) and `<pad>` when the vocabulary has them; they are
 * ordinary pieces to encoding and decoding (GPT-2's encoder.py), and a
 * piece the merges make that the vocabulary lacks becomes `<unk>` (an
 * error, TFM_ERR_FORMAT, without one). NULL on failure as above. */
TFM_API tfm_tokenizer *tfm_tokenizer_load_byte_bpe(const char *vocab_path,
                                                   const char *merges_path);

/** A SentencePiece model file's pieces numbered by a vocabulary JSON
 * (an object of piece to id, ids 0 .. N-1, with `<unk>`): Marian's
 * `source.spm` or `target.spm` with its `vocab.json`, as transformers'
 * MarianTokenizer uses them. Encoding gives each piece the vocabulary's
 * id (`<unk>`'s when it has none, or when the vocabulary's id is its
 * `<s>`, `</s>` or `<pad>`: text never becomes those); decoding turns ids into the
 * vocabulary's pieces and those into text as the SentencePiece model
 * does, the vocabulary's `<s>`, `</s>` and `<pad>` giving nothing and a
 * piece the model lacks its own spelling (U+2581 as a space), as
 * MarianTokenizer's convert_tokens_to_string does. Ids,
 * pieces and special ids are the vocabulary's. NULL on failure as
 * tfm_tokenizer_load_sentencepiece(). */
TFM_API tfm_tokenizer *tfm_tokenizer_load_sentencepiece_with_vocab(const char *model_path,
                                                                  const char *vocab_path);

/** Makes a tokenizer from bytes tfm_tokenizer_save_bytes() wrote; the
 * bytes of a SentencePiece `.model` file are such bytes. The bytes are
 * copied. NULL on failure: TFM_ERR_NULL, TFM_ERR_ARG (a negative size),
 * TFM_ERR_FORMAT, TFM_ERR_NOMEM. */
TFM_API tfm_tokenizer *tfm_tokenizer_from_bytes(const void *bytes, int64_t size);

/** Writes the tokenizer as bytes that tfm_tokenizer_from_bytes() reads
 * back into the same tokenizer: for SentencePiece tokenizers (loaded or
 * trained) a SentencePiece `.model` file's bytes, which `spm_encode` reads
 * too; for byte-level BPE "TFM-BBPE" and both files, each after its size
 * (8 bytes, little-endian). *size becomes the size needed; bytes may be NULL with capacity 0 to
 * ask for it. TFM_ERR_SIZE (nothing written) when capacity is smaller. */
TFM_API tfm_status tfm_tokenizer_save_bytes(const tfm_tokenizer *tokenizer, void *bytes,
                                            int64_t capacity, int64_t *size);

/** Writes tfm_tokenizer_save_bytes()'s bytes to path, atomically as every
 * libtfm save (io.h): a SentencePiece tokenizer's file is a `.model` file
 * that tfm_tokenizer_load_sentencepiece() and `spm_encode` read; any
 * failure leaves the file at path as it was. TFM_ERR_NULL, TFM_ERR_ARG (a
 * path that names no file), TFM_ERR_IO (writing; a device, FIFO or folder
 * at path), TFM_ERR_SYNC (written and in place, its folder not synced). */
TFM_API tfm_status tfm_tokenizer_save(const tfm_tokenizer *tokenizer, const char *path);

/** Frees the tokenizer; NULL is ignored. */
TFM_API void tfm_tokenizer_free(tfm_tokenizer *tokenizer);

/** Encodes text[0, length) (UTF-8; NUL bytes are ordinary bytes) into
 * ids[0, *count). *count becomes the number of ids the text takes; ids
 * are written only when capacity holds them all, else TFM_ERR_SIZE and
 * nothing is written (ids may be NULL with capacity 0 to ask). No
 * beginning or end token is added. TFM_ERR_NULL for a NULL tokenizer,
 * count, or text with a non-zero length; TFM_ERR_ARG for a negative
 * length or capacity. */
TFM_API tfm_status tfm_tokenizer_encode(const tfm_tokenizer *tokenizer, const char *text,
                                        int64_t length, int32_t *ids, int64_t capacity,
                                        int64_t *count);

/** Encodes as tfm_tokenizer_encode() but keeps the first capacity ids
 * at most, as transformers' truncation does: *count becomes the number
 * written, and *cut (NULL: not asked) 1 when the text takes more ids
 * than capacity (else 0). Only a prefix of the text long enough for
 * those ids is encoded, so memory and time follow capacity, not length:
 * a prefix ends before a space (where neither SentencePiece's pieces nor
 * GPT-2's words cross, so its ids are the whole text's first ids), or,
 * in a text without spaces, 16 ids past those kept. A text that gives
 * fewer than one id per 256 bytes (a run of spaces, a run of unknown
 * characters that is one unknown id) is read no further than 256 bytes
 * per id kept: *cut says so. TFM_ERR_NULL for a NULL tokenizer, count,
 * text with a non-zero length, or ids with a non-zero capacity;
 * TFM_ERR_ARG for a negative length or capacity. */
TFM_API tfm_status tfm_tokenizer_encode_truncated(const tfm_tokenizer *tokenizer,
                                                  const char *text, int64_t length,
                                                  int32_t *ids, int64_t capacity,
                                                  int64_t *count, int32_t *cut);

/** Decodes ids[0, count) into text, as SentencePiece does: control pieces
 * (beginning and end of sequence ...) give nothing, the unknown piece its
 * surface (" \xE2\x81\x87 " by default), byte pieces their bytes (a byte
 * that does not complete a character U+FFFD), U+2581 a space, and the
 * first piece's leading space is dropped when the model adds one. The
 * text is followed by a NUL: *length becomes its size without the NUL, and
 * text is written only when capacity >= *length + 1, else TFM_ERR_SIZE
 * (text may be NULL with capacity 0 to ask). TFM_ERR_RANGE for an id
 * outside [0, vocabulary size). */
TFM_API tfm_status tfm_tokenizer_decode(const tfm_tokenizer *tokenizer, const int32_t *ids,
                                        int64_t count, char *text, int64_t capacity,
                                        int64_t *length);

/** The number of ids (pieces); -1 for a NULL tokenizer. */
TFM_API int32_t tfm_tokenizer_vocab_size(const tfm_tokenizer *tokenizer);

/** The id of the piece piece[0, length), or -1 when no piece is spelled
 * so (no error is recorded then); -1 with TFM_ERR_NULL or TFM_ERR_ARG for
 * bad arguments. */
TFM_API int32_t tfm_tokenizer_piece_to_id(const tfm_tokenizer *tokenizer, const char *piece,
                                          int64_t length);

/** Copies the piece of id into piece, followed by a NUL, as
 * tfm_tokenizer_decode() copies text (*length without the NUL,
 * TFM_ERR_SIZE when capacity < *length + 1); TFM_ERR_RANGE for an id
 * outside the vocabulary. Byte-level BPE pieces are spelled in GPT-2's
 * byte-to-unicode alphabet, as in vocab.json. */
TFM_API tfm_status tfm_tokenizer_id_to_piece(const tfm_tokenizer *tokenizer, int32_t id,
                                             char *piece, int64_t capacity, int64_t *length);

/** The id of a special token, or -1 when the tokenizer has none (no error
 * is recorded then); -1 with TFM_ERR_NULL or TFM_ERR_ARG for a NULL
 * tokenizer or a value not in tfm_special_token. For SentencePiece models
 * as the file says: the unknown piece, and the trainer's bos, eos and pad
 * pieces when they are control pieces. */
TFM_API int32_t tfm_tokenizer_special_id(const tfm_tokenizer *tokenizer,
                                         tfm_special_token which);

/** How tfm_tokenizer_train_bpe() trains. Fill with
 * tfm_bpe_train_options_init(), then change fields. */
typedef struct tfm_bpe_train_options {
    uint32_t struct_size;      /**< set by tfm_bpe_train_options_init */
    /** Pieces in all, including `<unk>`, `<s>`, `</s>` (ids 0, 1, 2; `<pad>` 3 with pad_piece), the
     * characters and, with byte_fallback, the 256 byte pieces (default
     * 8000, as spm_train's; at least the count of those plus one). */
    int32_t vocab_size;
    /** 1: unknown characters become their UTF-8 bytes' pieces
     * `<0x00>`...`<0xFF>` (default 0). */
    int32_t byte_fallback;
    /** Characters kept: the most frequent ones covering this share of the
     * text's characters, in (0, 1] (default 0.9995, as spm_train's); the
     * others are unknown. */
    double character_coverage;
    /** Longest piece in characters (default 16, as spm_train's). */
    int32_t max_piece_length;
    /** 1: a `<pad>` control piece at id 3, after `<unk>`, `<s>`, `</s>`, as
     * spm_train's `--pad_id=3` makes (default 0: none). Models padding
     * their batches need an id that is never text. */
    int32_t pad_piece;
    /** n_user_symbols strings (UTF-8, NUL-terminated, not empty, distinct)
     * that become user-defined pieces right after the meta pieces, as
     * spm_train's `--user_defined_symbols`: each stands whole wherever the
     * text spells it (placeholders, tags). They count in vocab_size.
     * NULL with 0 (default): none. */
    const char *const *user_symbols;
    int32_t n_user_symbols; /**< the count of user_symbols */
} tfm_bpe_train_options;

/** Writes the defaults; use the tfm_bpe_train_options_init macro. */
TFM_API void tfm_bpe_train_options_init_sized(tfm_bpe_train_options *options,
                                              uint32_t struct_size);
/** Fills *options with the defaults for the caller's struct size. */
#define tfm_bpe_train_options_init(options) \
    tfm_bpe_train_options_init_sized((options), (uint32_t)sizeof *(options))

/** Trains a SentencePiece BPE model on lines[0, count) (lengths[i] bytes
 * each; lengths NULL: NUL-terminated lines) and returns it in *tokenizer.
 * The text is read as SentencePiece reads it with identity normalisation
 * (`--normalization_rule_name=identity`): invalid bytes become U+FFFD,
 * runs of spaces one, a space before each line, spaces as U+2581. Words
 * are the runs between spaces (and between letters, digits and other
 * characters); pieces never cross them. Each step merges the most frequent
 * adjacent pair (ties: the pair whose merged piece sorts first by bytes),
 * so the result does not depend on anything but the lines and options.
 * TFM_ERR_ARG for options out of range or a vocabulary the text cannot
 * fill (TFM_ERR_SIZE); *tokenizer is NULL on failure. */
TFM_API tfm_status tfm_tokenizer_train_bpe(const char *const *lines, const int64_t *lengths,
                                           int64_t count, const tfm_bpe_train_options *options,
                                           tfm_tokenizer **tokenizer);

#ifdef __cplusplus
}
#endif

#endif
