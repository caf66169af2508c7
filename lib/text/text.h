/* The tokenizer's record and what its rooms share: UTF-8 as SentencePiece
 * reads it, a byte trie over the pieces, growable buffers, the
 * SentencePiece model (sentencepiece.c), its training (bpe_train.c) and
 * byte-level BPE (byte_bpe.c). tokenizer.c holds the public calls. */
#ifndef TFM_TEXT_TEXT_H
#define TFM_TEXT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "io/json.h"
#include "tfm/text.h"

/* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's visible space. */
#define TFM__SPACE_SYMBOL "\xe2\x96\x81"
#define TFM__SPACE_SYMBOL_LEN 3
/* Model files and vocabularies larger than this are refused. */
#define TFM__TOKENIZER_MAX_BYTES ((size_t)1 << 30)

/* ---- UTF-8, SentencePiece's reading (util.h) ---- */

/* Bytes of the character whose first byte is *s, by its high nibble only
 * (SentencePiece's OneCharLen): 1 for continuation bytes too. */
static inline size_t tfm__utf8_lead_length(const char *s)
{
    return (size_t)"\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[(unsigned char)*s >> 4];
}
/* Decodes the character at s[0, len) (len > 0): its code point and *used
 * bytes; 0xFFFD with *used = 1 when the bytes are not a well-formed
 * character (overlong, surrogate, truncated, above U+10FFFF). */
uint32_t tfm__utf8_decode(const char *s, size_t len, size_t *used);
/* 1 when s[0, len) begins with a well-formed character (a literal U+FFFD
 * included), its length in *used; else 0 with *used = 1. */
int tfm__utf8_valid_prefix(const char *s, size_t len, size_t *used);
/* Writes code point c as UTF-8 into out (4 bytes of room); its length. */
size_t tfm__utf8_encode(uint32_t c, char *out);

/* ---- growable buffers (their failures are TFM_ERR_NOMEM naming op) ---- */

/* Room for need more elements of element bytes in *data, which holds
 * size_now of *capacity (doubling); 0, or -1 with TFM_ERR_NOMEM naming op. */
int tfm__grow(const char *op, void **data, size_t element, size_t size_now, size_t *capacity,
              size_t need);

typedef struct tfm__bytes {
    char *data;
    size_t size, capacity;
} tfm__bytes;
int tfm__bytes_append(const char *op, tfm__bytes *b, const void *data, size_t size);

typedef struct tfm__ids {
    int32_t *data;
    int64_t size, capacity;
} tfm__ids;
int tfm__ids_push(const char *op, tfm__ids *ids, int32_t id);

/* ---- BPE's agenda: pairs of adjacent symbols, best first ---- */

/* symbols left and right would merge into a piece of size bytes; the
 * highest score goes first, then the leftmost. A pair is stale, and
 * skipped, when its symbols' sizes no longer add up to size. */
typedef struct tfm__pair {
    int64_t left, right;
    float score;
    size_t size;
} tfm__pair;

typedef struct tfm__pair_heap {
    tfm__pair *data;
    size_t size, capacity;
} tfm__pair_heap;

int tfm__pair_heap_push(const char *op, tfm__pair_heap *h, tfm__pair pair);
/* Removes and returns the best pair; the heap must not be empty. */
tfm__pair tfm__pair_heap_pop(tfm__pair_heap *h);

/* ---- a byte trie over piece strings ---- */

/* Node 0 is the root. Each node holds up to two ids: the piece's id when it
 * is a piece the models match (SentencePiece's pieces_: normal, user-defined
 * and unused pieces) and when it is a reserved one (unknown, control, byte
 * pieces), -1 where none. Children are found through one hash table. */
typedef struct tfm__trie {
    int32_t (*ids)[2]; /* per node: [0] matched piece, [1] reserved piece */
    int32_t nodes, node_capacity;
    uint64_t *keys;    /* parent << 8 | byte, + 1 (0: empty slot) */
    int32_t *children;
    size_t slots, used;
} tfm__trie;

enum { TFM__TRIE_MATCHED = 0, TFM__TRIE_RESERVED = 1 };

/* Adds piece[0, len) with id in the given role; -1 (error set) when that
 * role of the piece already has an id, or out of memory. */
int tfm__trie_add(const char *op, tfm__trie *trie, const char *piece, size_t len, int role,
                  int32_t id);
/* The child of node by byte, or -1. */
int32_t tfm__trie_child(const tfm__trie *trie, int32_t node, unsigned char byte);
/* The node spelling piece[0, len), or -1. */
int32_t tfm__trie_find(const tfm__trie *trie, const char *piece, size_t len);
void tfm__trie_free(tfm__trie *trie);

/* ---- the tokenizer ---- */

typedef enum tfm__model_kind {
    TFM__MODEL_UNIGRAM = 1, /* SentencePiece's model types, by their values */
    TFM__MODEL_BPE = 2,
    TFM__MODEL_WORD = 3,
    TFM__MODEL_CHAR = 4,
    TFM__MODEL_BYTE_BPE = 100
} tfm__model_kind;

/* SentencePiece's piece types, by their values in the model file. */
typedef enum tfm__piece_type {
    TFM__PIECE_NORMAL = 1,
    TFM__PIECE_UNKNOWN = 2,
    TFM__PIECE_CONTROL = 3,
    TFM__PIECE_USER_DEFINED = 4,
    TFM__PIECE_UNUSED = 5,
    TFM__PIECE_BYTE = 6
} tfm__piece_type;

typedef struct tfm__piece {
    const char *text; /* into the model file's bytes, or the vocabulary's */
    uint32_t length;
    float score;
    int32_t type;
    int32_t byte;     /* a byte piece's byte; -1 for others */
} tfm__piece;

/* A SentencePiece normaliser: the precompiled character map (a Darts
 * double array over UTF-8 prefixes whose values index NUL-terminated
 * replacements) and the whitespace switches. */
typedef struct tfm__normalizer {
    const unsigned char *units; /* the double array's 32-bit units, unaligned */
    size_t unit_count;
    const char *replacements;
    size_t replacements_size;
    int add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
} tfm__normalizer;

/* A piece that stands whole where text spells it (added.c), with
 * transformers' AddedToken flags. */
typedef struct tfm__added {
    int32_t id;
    uint8_t lstrip, rstrip, single_word;
} tfm__added;

typedef struct tfm__byte_bpe tfm__byte_bpe;
/* A vocabulary JSON ({piece: id}), kept: the pieces' strings are in text. */
typedef struct tfm__vocab {
    tfm__json doc;
    char *text;       /* the JSON, its strings decoded in place */
    int parsed;
} tfm__vocab;

struct tfm_tokenizer {
    tfm__model_kind kind;
    int32_t size;
    tfm__piece *pieces;
    tfm__trie trie;
    int32_t special[4]; /* by tfm_special_token; -1: none */
    int32_t unk_id;     /* what unknown text or pieces become; -1: none */
    /* SentencePiece models */
    tfm__normalizer normalizer, denormalizer;
    int has_denormalizer, has_user_defined, byte_fallback;
    int32_t byte_ids[256]; /* <0xNN> pieces; -1 where missing */
    float min_score, max_score;
    char *unk_surface;
    size_t unk_surface_length;
    char *file;            /* the model file's bytes (or the byte-level
                              container), kept for save_bytes */
    size_t file_size;
    /* byte-level BPE */
    tfm__byte_bpe *byte_bpe;
    /* renumbered (renumbered.c): the SentencePiece model whose pieces the
     * vocabulary above numbers; NULL otherwise */
    tfm_tokenizer *base;
    tfm__vocab vocab;  /* byte-level BPE's and renumbered tokenizers' */
    tfm__vocab controls; /* renumbered: the control tokens past the vocabulary */
    /* added tokens (added.c): the trie's matched ids index added */
    tfm__added *added;
    int32_t n_added;
    size_t added_capacity;
    tfm__trie added_trie;
};

/* SentencePiece's Normalizer::Normalize of s[0, len) with n into out
 * (emptied first, NUL-terminated); user_symbols: tok's user-defined pieces
 * pass unchanged (tok may be NULL without them). */
int tfm__normalize(const char *op, const tfm_tokenizer *tok, const tfm__normalizer *n,
                   int user_symbols, const char *s, size_t len, tfm__bytes *out);

/* Parses a SentencePiece ModelProto from bytes[0, size) into a tokenizer,
 * keeping a copy of the bytes. NULL with the error set (op names the call). */
tfm_tokenizer *tfm__sentencepiece_parse(const char *op, const char *bytes, size_t size);
/* Appends the ids of text[0, length): tok's, or with spelling (not NULL)
 * spelling's ids of the pieces' texts, as transformers' MarianTokenizer
 * maps the strings SentencePiece's encode gives through vocab.json (an
 * unknown run's text is its own, so a character the model lacks but the
 * vocabulary has keeps the vocabulary's id). */
int tfm__sentencepiece_encode(const char *op, const tfm_tokenizer *tok,
                              const tfm_tokenizer *spelling, const char *text, size_t length,
                              tfm__ids *out);
/* Appends the text of ids (each already checked to be in range). */
int tfm__sentencepiece_decode(const char *op, const tfm_tokenizer *tok, const int32_t *ids,
                              int64_t count, tfm__bytes *out);
/* The same for spelling's pieces ids[0, count) by their spelling (one
 * tok lacks is its own text, as SentencePiece's DecodePieces gives it). */
int tfm__sentencepiece_decode_spelled(const char *op, const tfm_tokenizer *tok,
                                      const tfm_tokenizer *spelling, const int32_t *ids,
                                      int64_t count, tfm__bytes *out);
/* The matched piece's id for piece[0, len), else its reserved id, else -1
 * (SentencePiece's PieceToId but for the unknown fallback). */
int32_t tfm__piece_id(const tfm_tokenizer *tok, const char *piece, size_t len);

/* Writes a ModelProto of pieces[0, count) (text, score, type) for a BPE
 * model with identity normalisation, the given byte fallback and the
 * `<pad>` piece's id (-1: none, as spm_train's default). */
int tfm__sentencepiece_write(const char *op, const tfm__piece *pieces, int32_t count,
                             int byte_fallback, int32_t pad_id, tfm__bytes *out);

/* Vocabularies and containers of parts (vocab.c). */
/* Copies text[0, size) into *vocab and parses it as JSON (any value). */
int tfm__vocab_parse(const char *op, tfm__vocab *vocab, const char *text, size_t size);
/* Reads a {piece: id} object (ids 0 .. N-1, each once) into tok's size,
 * pieces, trie and special ids (<unk>, <s>, </s>, <pad>, GPT-2's
 * <|endoftext|>), keeping the text in *vocab. */
int tfm__vocab_read(const char *op, tfm_tokenizer *tok, tfm__vocab *vocab, const char *text,
                    size_t size);
void tfm__vocab_free(tfm__vocab *vocab);
/* tok->file becomes magic, then each of the count parts after its size. */
int tfm__parts_pack(const char *op, const char magic[8], int count, const char *const *parts,
                    const size_t *sizes, tfm_tokenizer *tok);
int tfm__parts_is_container(const char magic[8], const char *bytes, size_t size);
/* The parts of a container (its magic already checked), at least
 * min_count and at most max_count: their count, or -1 (what names the kind
 * of tokenizer in the error). */
int tfm__parts_unpack(const char *op, const char *what, const char *bytes, size_t size,
                      int min_count, int max_count, const char **parts, size_t *sizes);
/* Renumbered SentencePiece models (renumbered.c): base's pieces numbered
 * by a vocabulary (Marian's vocab.json), and, when controls is not NULL,
 * ids past it: {"control_tokens": [piece, ...], "unknown_ids": k} names the
 * control tokens that follow the vocabulary (language codes: encoding
 * never gives them, decoding drops them), then k ids that read as "<unk>".
 * Takes base, also on failure. */
tfm_tokenizer *tfm__renumbered_create(const char *op, tfm_tokenizer *base, const char *vocab,
                                      size_t vocab_size, const char *controls,
                                      size_t controls_size);
int tfm__renumbered_is_container(const char *bytes, size_t size);
tfm_tokenizer *tfm__renumbered_from_bytes(const char *op, const char *bytes, size_t size);
int tfm__renumbered_encode(const char *op, const tfm_tokenizer *tok, const char *text,
                           size_t length, tfm__ids *out);
int tfm__renumbered_decode(const char *op, const tfm_tokenizer *tok, const int32_t *ids,
                           int64_t count, tfm__bytes *out);
/* The fairseq-numbered tokenizers (fairseq.c), from the files at the
 * paths. transformers' MBartTokenizer, MBart50Tokenizer and NllbTokenizer:
 * the SentencePiece model's pieces past its first three moved up by one
 * behind <s> 0, <pad> 1, </s> 2, <unk> 3, then the language codes, then
 * <mask>. M2M100Tokenizer: the pieces numbered by vocab.json, then
 * "__code__" for each code, then madeup_words ids that read as <unk>. The
 * codes and <mask> are control tokens. */
tfm_tokenizer *tfm__fairseq_aligned_load(const char *op, const char *model_path,
                                         const char *const *codes, int32_t n_codes);
tfm_tokenizer *tfm__fairseq_vocab_load(const char *op, const char *model_path,
                                       const char *vocab_path, const char *const *codes,
                                       int32_t n_codes, int32_t madeup_words);
/* T5Tokenizer's numbering (fairseq.c): the model's pieces, then the
 * extra_ids sentinels as control tokens, <extra_id_0> last. */
tfm_tokenizer *tfm__t5_load(const char *op, const char *model_path, int32_t extra_ids);
/* A table of language codes by name (language_codes.c): "mbart" (25),
 * "mbart50" (52), "nllb" (202), "m2m100" (100), "wmt21" (8); NULL for
 * another name. */
const char *const *tfm__language_codes(const char *name, int32_t *count);
/* Byte-level BPE (byte_bpe.c). */
tfm_tokenizer *tfm__byte_bpe_parse(const char *op, const char *vocab, size_t vocab_size,
                                   const char *merges, size_t merges_size);
int tfm__byte_bpe_encode(const char *op, const tfm_tokenizer *tok, const char *text,
                         size_t length, tfm__ids *out);
int tfm__byte_bpe_decode(const char *op, const tfm_tokenizer *tok, const int32_t *ids,
                         int64_t count, tfm__bytes *out);
/* 1 when bytes begin as the byte-level container tfm__byte_bpe_parse
 * keeps (and save_bytes hands out): "TFM-BBPE", then vocab.json and
 * merges.txt, each after its size in 8 bytes, little-endian. */
int tfm__byte_bpe_is_container(const char *bytes, size_t size);
tfm_tokenizer *tfm__byte_bpe_from_bytes(const char *op, const char *bytes, size_t size);
void tfm__byte_bpe_free(tfm__byte_bpe *bpe);

/* Added tokens (added.c). One to make whole: content names the piece,
 * whose id must be id when id >= 0. */
typedef struct tfm__added_token {
    const char *content;
    int32_t id;
    int lstrip, rstrip, single_word;
} tfm__added_token;
/* tok's pieces named by tokens[0, count) stand whole in text (a later
 * entry of the same text replaces an earlier one), and tok's bytes become
 * the container that keeps them; TFM_ERR_FORMAT naming a token the
 * tokenizer lacks or numbers otherwise. Once per tokenizer. */
int tfm__added_set(const char *op, tfm_tokenizer *tok, const tfm__added_token *tokens,
                   int32_t count);
int tfm__added_is_container(const char *bytes, size_t size);
tfm_tokenizer *tfm__added_from_bytes(const char *op, const char *bytes, size_t size);
/* Appends the ids of text[0, length) cut at tok's added tokens, as
 * transformers' PreTrainedTokenizer.tokenize cuts it. */
int tfm__added_encode(const char *op, const tfm_tokenizer *tok, const char *text,
                      size_t length, tfm__ids *out);

/* The tokenizer in bytes of any kind libtfm saves (tokenizer.c). */
tfm_tokenizer *tfm__tokenizer_parse(const char *op, const char *bytes, size_t size);
/* Appends the ids of text[0, length) as tok's model reads it, added
 * tokens aside. */
int tfm__tokenizer_encode_text(const char *op, const tfm_tokenizer *tok, const char *text,
                               size_t length, tfm__ids *out);
/* Python's str.isspace() of one code point (str.strip's whitespace). */
int tfm__is_python_space(uint32_t c);

/* Frees everything a tokenizer holds (tfm_tokenizer_free). */
void tfm__tokenizer_free(tfm_tokenizer *tok);

#endif
