/* SentencePiece models as SentencePiece 0.1.97 reads and runs them: the
 * ModelProto file, the normaliser (normalizer.cc), the unigram model's
 * optimised Viterbi (unigram_model.cc, EncodeOptimized), BPE by piece score
 * (bpe_model.cc), the word and char models, unknown pieces and byte
 * fallback (sentencepiece_processor.cc, PopulateSentencePieceText) and
 * decoding (its Decode). Every choice that decides an id follows the
 * reference, ties and float rounding included; the fixtures in
 * tests/fixtures/text check it on thousands of lines. */
#include "text/text.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* ---- protobuf wire format ---- */

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };

typedef struct pb_reader {
    const unsigned char *at, *end;
    const unsigned char *file; /* for offsets in messages */
} pb_reader;

typedef struct pb_field {
    uint32_t number;
    int wire;
    uint64_t varint;           /* WIRE_VARINT, WIRE_FIXED32, WIRE_FIXED64 */
    const unsigned char *data; /* WIRE_BYTES */
    size_t size;
} pb_field;

static int pb_fail(const char *op, const pb_reader *r, const char *what)
{
    tfm__fail(TFM_ERR_FORMAT, "%s: not a SentencePiece model: %s at byte %zu", op, what,
              (size_t)(r->at - r->file));
    return -1;
}

static int pb_varint(const char *op, pb_reader *r, uint64_t *value)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->at == r->end)
            return pb_fail(op, r, "a number runs past the end");
        unsigned char byte = *r->at++;
        v |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            *value = v;
            return 0;
        }
    }
    return pb_fail(op, r, "a number longer than 10 bytes");
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The next field, every length checked against what is left: 1, or 0 at
 * the end, or -1 with the error set. */
static int pb_next(const char *op, pb_reader *r, pb_field *f)
{
    if (r->at == r->end)
        return 0;
    uint64_t key;
    if (pb_varint(op, r, &key))
        return -1;
    f->number = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    if (key >> 3 == 0 || key >> 3 > 0x1FFFFFFF)
        return pb_fail(op, r, "a field number out of range");
    size_t left = (size_t)(r->end - r->at);
    switch (f->wire) {
    case WIRE_VARINT:
        return pb_varint(op, r, &f->varint) ? -1 : 1;
    case WIRE_FIXED64:
        if (left < 8)
            return pb_fail(op, r, "a 64-bit field runs past the end");
        f->varint = le32(r->at) | (uint64_t)le32(r->at + 4) << 32;
        r->at += 8;
        return 1;
    case WIRE_FIXED32:
        if (left < 4)
            return pb_fail(op, r, "a 32-bit field runs past the end");
        f->varint = le32(r->at);
        r->at += 4;
        return 1;
    case WIRE_BYTES: {
        uint64_t size;
        if (pb_varint(op, r, &size))
            return -1;
        if (size > (uint64_t)(r->end - r->at))
            return pb_fail(op, r, "a field's length runs past the end");
        f->data = r->at;
        f->size = (size_t)size;
        r->at += size;
        return 1;
    }
    default:
        return pb_fail(op, r, "an unknown wire type");
    }
}

/* A field of the expected wire type, else the error. */
static int pb_expect(const char *op, const pb_reader *r, const pb_field *f, int wire)
{
    if (f->wire == wire)
        return 0;
    char what[64];
    snprintf(what, sizeof what, "field %u has the wrong wire type", (unsigned)f->number);
    return pb_fail(op, r, what);
}

static pb_reader pb_sub(const pb_reader *r, const pb_field *f)
{
    return (pb_reader){f->data, f->data + f->size, r->file};
}

/* ---- the model file ---- */

typedef struct text_ref {
    const char *data;
    size_t size;
} text_ref;

typedef struct trainer_spec {
    int64_t model_type;
    int byte_fallback, treat_whitespace_as_suffix;
    text_ref unk_surface, unk_piece, bos_piece, eos_piece, pad_piece;
} trainer_spec;

static text_ref ref(const char *s) { return (text_ref){s, strlen(s)}; }

static int read_piece(const char *op, const pb_reader *parent, const pb_field *f,
                      tfm__piece *piece)
{
    pb_reader r = pb_sub(parent, f);
    pb_field g;
    int more;
    *piece = (tfm__piece){"", 0, 0.0f, TFM__PIECE_NORMAL, -1};
    while ((more = pb_next(op, &r, &g)) > 0) {
        if (g.number == 1) {
            if (pb_expect(op, &r, &g, WIRE_BYTES))
                return -1;
            if (g.size > UINT32_MAX)
                return pb_fail(op, &r, "a piece longer than 4 GB");
            piece->text = (const char *)g.data;
            piece->length = (uint32_t)g.size;
        } else if (g.number == 2) {
            if (pb_expect(op, &r, &g, WIRE_FIXED32))
                return -1;
            uint32_t bits = (uint32_t)g.varint;
            memcpy(&piece->score, &bits, sizeof bits);
        } else if (g.number == 3) {
            if (pb_expect(op, &r, &g, WIRE_VARINT))
                return -1;
            if (g.varint < TFM__PIECE_NORMAL || g.varint > TFM__PIECE_BYTE)
                return pb_fail(op, &r, "a piece of an unknown type");
            piece->type = (int32_t)g.varint;
        }
    }
    if (more < 0)
        return -1;
    if (!piece->length)
        return pb_fail(op, &r, "an empty piece");
    return 0;
}

static int read_trainer_spec(const char *op, const pb_reader *parent, const pb_field *f,
                             trainer_spec *spec)
{
    pb_reader r = pb_sub(parent, f);
    pb_field g;
    int more;
    while ((more = pb_next(op, &r, &g)) > 0) {
        text_ref *text = g.number == 44   ? &spec->unk_surface
                         : g.number == 45 ? &spec->unk_piece
                         : g.number == 46 ? &spec->bos_piece
                         : g.number == 47 ? &spec->eos_piece
                         : g.number == 48 ? &spec->pad_piece
                                          : NULL;
        if (text) {
            if (pb_expect(op, &r, &g, WIRE_BYTES))
                return -1;
            *text = (text_ref){(const char *)g.data, g.size};
        } else if (g.number == 3 || g.number == 35 || g.number == 24) {
            if (pb_expect(op, &r, &g, WIRE_VARINT))
                return -1;
            if (g.number == 3)
                spec->model_type = (int64_t)g.varint;
            else if (g.number == 35)
                spec->byte_fallback = g.varint != 0;
            else
                spec->treat_whitespace_as_suffix = g.varint != 0;
        }
    }
    return more;
}

static int read_charsmap(const char *op, const pb_reader *r, const pb_field *f,
                         tfm__normalizer *n)
{
    if (!f->size) {
        n->units = NULL;
        n->unit_count = 0;
        return 0;
    }
    uint32_t trie_size = f->size >= 4 ? le32(f->data) : 0;
    if (f->size < 4 || trie_size < 4 || trie_size % 4 || trie_size > f->size - 4 ||
        f->size - 4 - trie_size == 0 || f->data[f->size - 1] != 0)
        return pb_fail(op, r, "a broken precompiled character map");
    n->units = f->data + 4;
    n->unit_count = trie_size / 4;
    n->replacements = (const char *)f->data + 4 + trie_size;
    n->replacements_size = f->size - 4 - trie_size;
    return 0;
}

static int read_normalizer_spec(const char *op, const pb_reader *parent, const pb_field *f,
                                tfm__normalizer *n)
{
    pb_reader r = pb_sub(parent, f);
    pb_field g;
    int more;
    while ((more = pb_next(op, &r, &g)) > 0) {
        if (g.number == 2) {
            if (pb_expect(op, &r, &g, WIRE_BYTES) || read_charsmap(op, &r, &g, n))
                return -1;
        } else if (g.number >= 3 && g.number <= 5) {
            if (pb_expect(op, &r, &g, WIRE_VARINT))
                return -1;
            int *flag = g.number == 3   ? &n->add_dummy_prefix
                        : g.number == 4 ? &n->remove_extra_whitespaces
                                        : &n->escape_whitespaces;
            *flag = g.varint != 0;
        }
    }
    return more;
}

/* "<0xNN>" -> NN, else -1. */
static int byte_of_piece(const char *s, size_t len)
{
    static const char digits[] = "0123456789ABCDEF";
    if (len != 6 || memcmp(s, "<0x", 3) || s[5] != '>')
        return -1;
    const char *hi = memchr(digits, s[3], 16), *lo = memchr(digits, s[4], 16);
    return hi && lo && s[3] && s[4] ? (int)((hi - digits) * 16 + (lo - digits)) : -1;
}

int32_t tfm__piece_id(const tfm_tokenizer *tok, const char *piece, size_t len)
{
    int32_t node = tfm__trie_find(&tok->trie, piece, len);
    if (node < 0)
        return -1;
    return tok->trie.ids[node][0] >= 0 ? tok->trie.ids[node][0] : tok->trie.ids[node][1];
}

/* The id of a control piece spelled so, else -1 (SentencePiece's bos_id ...). */
static int32_t control_id(const tfm_tokenizer *tok, text_ref name)
{
    int32_t id = tfm__piece_id(tok, name.data, name.size);
    return id >= 0 && tok->pieces[id].type == TFM__PIECE_CONTROL ? id : -1;
}

/* Builds the piece table and special ids of a parsed model. */
static int index_pieces(const char *op, tfm_tokenizer *tok, const trainer_spec *spec)
{
    int32_t unk = -1;
    for (int b = 0; b < 256; b++)
        tok->byte_ids[b] = -1;
    tok->min_score = FLT_MAX;
    tok->max_score = FLT_MIN;
    for (int32_t i = 0; i < tok->size; i++) {
        tfm__piece *p = &tok->pieces[i];
        int matched = p->type == TFM__PIECE_NORMAL || p->type == TFM__PIECE_USER_DEFINED ||
                      p->type == TFM__PIECE_UNUSED;
        if (tfm__trie_add(op, &tok->trie, p->text, p->length,
                          matched ? TFM__TRIE_MATCHED : TFM__TRIE_RESERVED, i))
            return -1;
        if (p->type == TFM__PIECE_USER_DEFINED)
            tok->has_user_defined = 1;
        if (p->type == TFM__PIECE_NORMAL) {
            tok->min_score = p->score < tok->min_score ? p->score : tok->min_score;
            tok->max_score = p->score > tok->max_score ? p->score : tok->max_score;
        }
        if (p->type == TFM__PIECE_UNKNOWN) {
            if (unk >= 0) {
                tfm__fail(TFM_ERR_FORMAT, "%s: pieces %d and %d are both unknown pieces", op,
                          (int)unk, (int)i);
                return -1;
            }
            unk = i;
        }
        if (p->type == TFM__PIECE_BYTE) {
            p->byte = byte_of_piece(p->text, p->length);
            if (!spec->byte_fallback || p->byte < 0) {
                tfm__fail(TFM_ERR_FORMAT, "%s: piece %d is a byte piece %s", op, (int)i,
                          p->byte < 0 ? "not spelled <0xNN>" : "but byte_fallback is off");
                return -1;
            }
            tok->byte_ids[p->byte] = i;
        }
    }
    if (unk < 0) {
        tfm__fail(TFM_ERR_FORMAT, "%s: the model has no unknown piece", op);
        return -1;
    }
    if (tok->min_score == FLT_MAX)
        tok->min_score = 0.0f;
    if (tok->max_score == FLT_MIN)
        tok->max_score = 0.0f;
    int32_t named_unk = tfm__piece_id(tok, spec->unk_piece.data, spec->unk_piece.size);
    tok->special[TFM_TOKEN_UNK] = named_unk == unk ? unk : -1;
    tok->special[TFM_TOKEN_BOS] = control_id(tok, spec->bos_piece);
    tok->special[TFM_TOKEN_EOS] = control_id(tok, spec->eos_piece);
    tok->special[TFM_TOKEN_PAD] = control_id(tok, spec->pad_piece);
    /* encoding falls back on the unknown piece whatever its name */
    tok->byte_fallback = spec->byte_fallback;
    tok->unk_surface = malloc(spec->unk_surface.size + 1);
    if (!tok->unk_surface) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return -1;
    }
    memcpy(tok->unk_surface, spec->unk_surface.data, spec->unk_surface.size);
    tok->unk_surface[spec->unk_surface.size] = 0;
    tok->unk_surface_length = spec->unk_surface.size;
    tok->unk_id = unk;
    return 0;
}

static int read_model(const char *op, tfm_tokenizer *tok)
{
    pb_reader r = {(const unsigned char *)tok->file,
                   (const unsigned char *)tok->file + tok->file_size,
                   (const unsigned char *)tok->file};
    trainer_spec spec = {TFM__MODEL_UNIGRAM, 0, 0, ref(" \xE2\x81\x87 "), ref("<unk>"),
                         ref("<s>"), ref("</s>"), ref("<pad>")};
    tok->normalizer = (tfm__normalizer){NULL, 0, NULL, 0, 1, 1, 1};
    tok->denormalizer = tok->normalizer;
    size_t capacity = 0;
    pb_field f;
    int more;
    while ((more = pb_next(op, &r, &f)) > 0) {
        if (f.number == 1) {
            if (pb_expect(op, &r, &f, WIRE_BYTES))
                return -1;
            void *pieces = tok->pieces;
            if (tok->size == INT32_MAX)
                return pb_fail(op, &r, "too many pieces");
            if (tfm__grow(op, &pieces, sizeof *tok->pieces, (size_t)tok->size, &capacity, 1))
                return -1;
            tok->pieces = pieces;
            if (read_piece(op, &r, &f, &tok->pieces[tok->size]))
                return -1;
            tok->size++;
        } else if (f.number == 2 || f.number == 3 || f.number == 5) {
            if (pb_expect(op, &r, &f, WIRE_BYTES))
                return -1;
            int s = f.number == 2   ? read_trainer_spec(op, &r, &f, &spec)
                    : f.number == 3 ? read_normalizer_spec(op, &r, &f, &tok->normalizer)
                                    : read_normalizer_spec(op, &r, &f, &tok->denormalizer);
            if (s < 0)
                return -1;
            tok->has_denormalizer |= f.number == 5;
        }
    }
    if (more < 0)
        return -1;
    if (!tok->size)
        return pb_fail(op, &r, "no pieces");
    if (spec.model_type < TFM__MODEL_UNIGRAM || spec.model_type > TFM__MODEL_CHAR)
        return pb_fail(op, &r, "an unknown model type");
    if (spec.treat_whitespace_as_suffix) {
        tfm__fail(TFM_ERR_FORMAT, "%s: models trained with treat_whitespace_as_suffix are not "
                  "supported", op);
        return -1;
    }
    /* as SentencePiece: a denormaliser only when it has a character map */
    tok->has_denormalizer = tok->has_denormalizer && tok->denormalizer.unit_count > 0;
    tok->kind = (tfm__model_kind)spec.model_type;
    return index_pieces(op, tok, &spec);
}

tfm_tokenizer *tfm__sentencepiece_parse(const char *op, const char *bytes, size_t size)
{
    tfm_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok || !(tok->file = malloc(size ? size : 1))) {
        free(tok);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for a %zu-byte model", op, size);
        return NULL;
    }
    memcpy(tok->file, bytes, size);
    tok->file_size = size;
    if (read_model(op, tok)) {
        tfm__tokenizer_free(tok);
        return NULL;
    }
    return tok;
}

/* ---- normalisation ---- */

static uint32_t unit_at(const tfm__normalizer *n, size_t i) { return le32(n->units + 4 * i); }
static int unit_has_leaf(uint32_t u) { return (u >> 8) & 1; }
static uint32_t unit_value(uint32_t u) { return u & 0x7FFFFFFFu; }
static uint32_t unit_label(uint32_t u) { return u & (0x80000000u | 0xFFu); }
static size_t unit_offset(uint32_t u) { return (size_t)(u >> 10) << ((u & (1u << 9)) >> 6); }

/* The longest rule of the character map that is a prefix of s[0, len)
 * (Darts' commonPrefixSearch): its length, its replacement in *value. A
 * walk leaving the array, or a value outside the replacements, ends it. */
static size_t longest_rule(const tfm__normalizer *n, const char *s, size_t len, uint32_t *value)
{
    size_t longest = 0;
    size_t id = unit_offset(unit_at(n, 0));
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        id ^= c;
        if (id >= n->unit_count)
            break;
        uint32_t unit = unit_at(n, id);
        if (unit_label(unit) != c)
            break;
        id ^= unit_offset(unit);
        if (unit_has_leaf(unit)) {
            if (id >= n->unit_count)
                break;
            uint32_t v = unit_value(unit_at(n, id));
            if (v < n->replacements_size) {
                longest = i + 1;
                *value = v;
            }
        }
    }
    return longest;
}

/* The longest user-defined piece that begins s[0, len), or 0. */
static size_t user_defined_prefix(const tfm_tokenizer *tok, const char *s, size_t len)
{
    size_t longest = 0;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        node = tfm__trie_child(&tok->trie, node, (unsigned char)s[i]);
        if (node < 0)
            break;
        int32_t id = tok->trie.ids[node][TFM__TRIE_MATCHED];
        if (id >= 0 && tok->pieces[id].type == TFM__PIECE_USER_DEFINED)
            longest = i + 1;
    }
    return longest;
}

/* SentencePiece's PrefixMatcher: a user-defined piece, else one character
 * (by its first byte's length). *found says which. */
static size_t prefix_match(const tfm_tokenizer *tok, const char *s, size_t len, int *found)
{
    size_t user = tok->has_user_defined ? user_defined_prefix(tok, s, len) : 0;
    *found = user > 0;
    if (user)
        return user;
    size_t one = tfm__utf8_lead_length(s);
    return one < len ? one : len;
}

/* Normalizer::NormalizePrefix: how many bytes of s[0, len) the next step
 * consumes, and what they become (*out, *out_len). */
static size_t normalize_prefix(const tfm_tokenizer *tok, const tfm__normalizer *n,
                               int user_symbols, const char *s, size_t len, const char **out,
                               size_t *out_len)
{
    if (user_symbols && tok->has_user_defined) {
        size_t user = user_defined_prefix(tok, s, len);
        if (user) {
            *out = s;
            *out_len = user;
            return user;
        }
    }
    uint32_t value = 0;
    size_t rule = n->unit_count ? longest_rule(n, s, len, &value) : 0;
    if (rule) {
        *out = n->replacements + value;
        *out_len = strlen(*out); /* the map's last byte is a NUL */
        return rule;
    }
    size_t used;
    if (!tfm__utf8_valid_prefix(s, len, &used)) {
        *out = "\xEF\xBF\xBD";
        *out_len = 3;
        return 1;
    }
    *out = s;
    *out_len = used;
    return used;
}

static int ends_with(const tfm__bytes *b, const char *suffix, size_t len)
{
    return b->size >= len && !memcmp(b->data + b->size - len, suffix, len);
}

int tfm__normalize(const char *op, const tfm_tokenizer *tok, const tfm__normalizer *n,
                     int user_symbols, const char *s, size_t len, tfm__bytes *out)
{
    const char *piece;
    size_t piece_len;
    out->size = 0;
    if (tfm__bytes_append(op, out, "", 0))
        return -1;
    if (n->remove_extra_whitespaces)
        while (len) {
            size_t used = normalize_prefix(tok, n, user_symbols, s, len, &piece, &piece_len);
            if (piece_len != 1 || piece[0] != ' ')
                break;
            s += used;
            len -= used;
        }
    if (!len)
        return 0;
    const char *space = n->escape_whitespaces ? TFM__SPACE_SYMBOL : " ";
    size_t space_len = n->escape_whitespaces ? TFM__SPACE_SYMBOL_LEN : 1;
    if (n->add_dummy_prefix && tfm__bytes_append(op, out, space, space_len))
        return -1;
    int is_prev_space = n->remove_extra_whitespaces;
    while (len) {
        size_t used = normalize_prefix(tok, n, user_symbols, s, len, &piece, &piece_len);
        while (is_prev_space && piece_len && piece[0] == ' ') {
            piece++;
            piece_len--;
        }
        if (piece_len) {
            for (size_t i = 0; i < piece_len; i++) {
                int escape = n->escape_whitespaces && piece[i] == ' ';
                if (tfm__bytes_append(op, out, escape ? space : piece + i, escape ? space_len : 1))
                    return -1;
            }
            is_prev_space = piece[piece_len - 1] == ' ';
        }
        s += used;
        len -= used;
        if (!n->remove_extra_whitespaces)
            is_prev_space = 0;
    }
    if (n->remove_extra_whitespaces)
        while (ends_with(out, space, space_len))
            out->size -= space_len;
    out->data[out->size] = 0;
    return 0;
}

/* ---- the models ---- */

/* One piece of an encoding: normalized[start, start + length) is id. */
typedef struct segment {
    size_t start, length;
    int32_t id;
} segment;

typedef struct segments {
    segment *data;
    size_t size, capacity;
} segments;

static int push_segment(const char *op, segments *list, size_t start, size_t length, int32_t id)
{
    void *data = list->data;
    if (tfm__grow(op, &data, sizeof *list->data, list->size, &list->capacity, 1))
        return -1;
    list->data = data;
    list->data[list->size++] = (segment){start, length, id};
    return 0;
}

/* PieceToId: the piece, else the unknown piece. */
static int32_t id_or_unknown(const tfm_tokenizer *tok, const char *s, size_t len)
{
    int32_t id = tfm__piece_id(tok, s, len);
    return id >= 0 ? id : tok->unk_id;
}

/* unigram_model.cc's EncodeOptimized: the best path ending at each byte,
 * candidates compared in double as there (a user-defined piece's bonus is
 * a double), the unknown piece's in float. */
static int encode_unigram(const char *op, const tfm_tokenizer *tok, const char *s, size_t size,
                          segments *out)
{
    typedef struct best {
        int32_t id;
        float score;
        int64_t start;
    } best;
    best *ends = malloc((size + 1) * sizeof *ends);
    if (!ends) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for a %zu-byte text", op, size);
        return -1;
    }
    for (size_t i = 0; i <= size; i++)
        ends[i] = (best){-1, 0.0f, -1};
    const float unk_score = tok->min_score - 10.0f;
    for (size_t start = 0; start < size;) {
        const float till_here = ends[start].score;
        size_t one = tfm__utf8_lead_length(s + start);
        size_t mblen = one < size - start ? one : size - start;
        int has_single = 0;
        int32_t node = 0;
        for (size_t key = start; key < size;) {
            node = tfm__trie_child(&tok->trie, node, (unsigned char)s[key]);
            if (node < 0)
                break;
            key++;
            int32_t id = tok->trie.ids[node][TFM__TRIE_MATCHED];
            if (id < 0 || tok->pieces[id].type == TFM__PIECE_UNUSED)
                continue;
            size_t length = key - start;
            double score = tok->pieces[id].type == TFM__PIECE_USER_DEFINED
                               ? (double)((float)length * tok->max_score) - 0.1
                               : (double)tok->pieces[id].score;
            double candidate = score + (double)till_here;
            best *target = &ends[key];
            if (target->start == -1 || candidate > (double)target->score) {
                *target = (best){id, (float)candidate, (int64_t)start};
            }
            if (length == mblen)
                has_single = 1;
        }
        if (!has_single) {
            best *target = &ends[start + mblen];
            float candidate = unk_score + till_here;
            if (target->start == -1 || candidate > target->score)
                *target = (best){tok->unk_id, candidate, (int64_t)start};
        }
        start += mblen;
    }
    size_t first = out->size;
    for (size_t end = size; end > 0; end = (size_t)ends[end].start)
        if (push_segment(op, out, (size_t)ends[end].start, end - (size_t)ends[end].start,
                         ends[end].id)) {
            free(ends);
            return -1;
        }
    free(ends);
    for (size_t i = first, j = out->size; i + 1 < j; i++, j--) {
        segment t = out->data[i];
        out->data[i] = out->data[j - 1];
        out->data[j - 1] = t;
    }
    return 0;
}

/* bpe_model.cc: symbols merged best piece score first (ties: leftmost),
 * pairs kept in a heap and dropped when stale. */
typedef struct bpe_symbol {
    int64_t prev, next;
    size_t start, length;
    int frozen;
} bpe_symbol;

/* The unused pieces' pairs pushed, for resegmenting (rev_merge). */
typedef struct unused_merge {
    size_t start, size, cut;
} unused_merge;

typedef struct unused_merges {
    unused_merge *data;
    size_t size, capacity;
} unused_merges;

static int maybe_add_pair(const char *op, const tfm_tokenizer *tok, const char *s,
                          const bpe_symbol *symbols, int64_t left, int64_t right, tfm__pair_heap *h,
                          unused_merges *unused)
{
    if (left < 0 || right < 0 || symbols[left].frozen || symbols[right].frozen)
        return 0;
    size_t size = symbols[left].length + symbols[right].length;
    int32_t node = tfm__trie_find(&tok->trie, s + symbols[left].start, size);
    int32_t id = node < 0 ? -1 : tok->trie.ids[node][TFM__TRIE_MATCHED];
    if (id < 0)
        return 0;
    if (tok->pieces[id].type == TFM__PIECE_UNUSED) {
        void *data = unused->data;
        if (tfm__grow(op, &data, sizeof *unused->data, unused->size, &unused->capacity, 1))
            return -1;
        unused->data = data;
        unused->data[unused->size++] =
            (unused_merge){symbols[left].start, size, symbols[left].length};
    }
    return tfm__pair_heap_push(op, h, (tfm__pair){left, right, tok->pieces[id].score, size});
}

/* bpe_model.cc's resegment: an unused piece the merges made is split back
 * into the pair that made it (the pair last pushed for that spelling, its
 * rev_merge), recursively. */
static int push_bpe_piece(const char *op, const tfm_tokenizer *tok, const char *s,
                          const unused_merges *merges, size_t start, size_t length,
                          segments *out)
{
    int32_t id = id_or_unknown(tok, s + start, length);
    if (tok->pieces[id].type == TFM__PIECE_UNUSED)
        for (size_t i = merges->size; i-- > 0;) {
            const unused_merge *m = &merges->data[i];
            if (m->size == length && !memcmp(s + m->start, s + start, length))
                return push_bpe_piece(op, tok, s, merges, start, m->cut, out) ||
                       push_bpe_piece(op, tok, s, merges, start + m->cut, length - m->cut, out);
        }
    return push_segment(op, out, start, length, id);
}

static int encode_bpe(const char *op, const tfm_tokenizer *tok, const char *s, size_t size,
                      segments *out)
{
    bpe_symbol *symbols = malloc((size + 1) * sizeof *symbols);
    tfm__pair_heap heap = {0};
    unused_merges unused = {0};
    int status = -1;
    if (!symbols) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for a %zu-byte text", op, size);
        return -1;
    }
    int64_t count = 0;
    for (size_t at = 0; at < size; count++) {
        int found;
        size_t len = prefix_match(tok, s + at, size - at, &found);
        symbols[count] = (bpe_symbol){count - 1, at + len < size ? count + 1 : -1, at, len, found};
        at += len;
    }
    for (int64_t i = 1; i < count; i++)
        if (maybe_add_pair(op, tok, s, symbols, i - 1, i, &heap, &unused))
            goto done;
    while (heap.size) {
        tfm__pair top = tfm__pair_heap_pop(&heap);
        bpe_symbol *left = &symbols[top.left], *right = &symbols[top.right];
        if (!left->length || !right->length || left->length + right->length != top.size)
            continue;
        left->length += right->length;
        left->next = right->next;
        if (right->next >= 0)
            symbols[right->next].prev = top.left;
        right->length = 0;
        if (maybe_add_pair(op, tok, s, symbols, left->prev, top.left, &heap, &unused) ||
            maybe_add_pair(op, tok, s, symbols, top.left, left->next, &heap, &unused))
            goto done;
    }
    for (int64_t i = count ? 0 : -1; i >= 0; i = symbols[i].next)
        if (push_bpe_piece(op, tok, s, &unused, symbols[i].start, symbols[i].length, out))
            goto done;
    status = 0;
done:
    free(symbols);
    free(heap.data);
    free(unused.data);
    return status;
}

/* char_model.cc and word_model.cc. Words begin the text and at each U+2581
 * (SplitIntoWords). */
static int encode_split(const char *op, const tfm_tokenizer *tok, const char *s, size_t size,
                        segments *out)
{
    size_t word = 0;
    for (size_t at = 0; at < size;) {
        int found;
        size_t len;
        if (tok->kind == TFM__MODEL_CHAR) {
            len = prefix_match(tok, s + at, size - at, &found);
            if (push_segment(op, out, at, len, id_or_unknown(tok, s + at, len)))
                return -1;
            at += len;
            continue;
        }
        size_t one = tfm__utf8_lead_length(s + at);
        len = one < size - at ? one : size - at;
        if (at > word && len == TFM__SPACE_SYMBOL_LEN &&
            !memcmp(s + at, TFM__SPACE_SYMBOL, TFM__SPACE_SYMBOL_LEN)) {
            if (push_segment(op, out, word, at - word, id_or_unknown(tok, s + word, at - word)))
                return -1;
            word = at;
        }
        at += len;
        if (at >= size &&
            push_segment(op, out, word, at - word, id_or_unknown(tok, s + word, at - word)))
            return -1;
    }
    return 0;
}

/* One piece of the encoding: its id, or with a spelling tokenizer
 * spelling's id of the piece's text (EncodeAsPieces' string: an unknown
 * run's is its normalized text), which is its unknown id when spelling
 * lacks it or it is a control token there (text never becomes one). */
static int push_piece(const char *op, const tfm_tokenizer *tok, const tfm_tokenizer *spelling,
                      const char *s, const segment *p, tfm__ids *out)
{
    if (!spelling)
        return tfm__ids_push(op, out, p->id);
    const tfm__piece *own = &tok->pieces[p->id];
    int unknown = own->type == TFM__PIECE_UNKNOWN;
    int32_t id = tfm__piece_id(spelling, unknown ? s + p->start : own->text,
                               unknown ? p->length : own->length);
    int control = id >= 0 && spelling->pieces[id].type == TFM__PIECE_CONTROL;
    return tfm__ids_push(op, out, id >= 0 && !control ? id : spelling->unk_id);
}

int tfm__sentencepiece_encode(const char *op, const tfm_tokenizer *tok,
                              const tfm_tokenizer *spelling, const char *text, size_t length,
                              tfm__ids *out)
{
    tfm__bytes normalized = {0};
    segments pieces = {0};
    int status = -1;
    if (tfm__normalize(op, tok, &tok->normalizer, 1, text, length, &normalized))
        goto done;
    const char *s = normalized.data;
    size_t size = normalized.size;
    int failed = size == 0                          ? 0
                 : tok->kind == TFM__MODEL_UNIGRAM ? encode_unigram(op, tok, s, size, &pieces)
                 : tok->kind == TFM__MODEL_BPE     ? encode_bpe(op, tok, s, size, &pieces)
                                                   : encode_split(op, tok, s, size, &pieces);
    if (failed)
        goto done;
    /* PopulateSentencePieceText: unknown pieces become their bytes' pieces
     * with byte fallback, else runs of them one unknown piece (whose text
     * is the run's) */
    segment run = {0, 0, -1};
    for (size_t i = 0; i < pieces.size; i++) {
        const segment *p = &pieces.data[i];
        int unknown = tok->pieces[p->id].type == TFM__PIECE_UNKNOWN;
        if (unknown && run.id >= 0 && tok->pieces[run.id].type == TFM__PIECE_UNKNOWN &&
            !tok->byte_fallback) {
            run.length = p->start + p->length - run.start;
            continue;
        }
        if (run.id >= 0 && push_piece(op, tok, spelling, s, &run, out))
            goto done;
        run = *p;
        if (unknown && tok->byte_fallback) {
            for (size_t b = 0; b < p->length; b++) {
                int32_t id = tok->byte_ids[(unsigned char)s[p->start + b]];
                segment byte = {p->start + b, 1, id >= 0 ? id : tok->unk_id};
                if (push_piece(op, tok, spelling, s, &byte, out))
                    goto done;
            }
            run.id = -1;
        }
    }
    if (run.id >= 0 && push_piece(op, tok, spelling, s, &run, out))
        goto done;
    status = 0;
done:
    free(normalized.data);
    free(pieces.data);
    return status;
}

/* ---- decoding ---- */

/* Byte pieces ids[begin, end) (spelling's) as text: each byte that does
 * not complete a well-formed character is U+FFFD. */
static int append_bytes(const char *op, const tfm_tokenizer *tok,
                        const tfm_tokenizer *spelling, const int32_t *ids, int64_t begin,
                        int64_t end, tfm__bytes *out)
{
    if (begin >= end)
        return 0;
    char *bytes = malloc((size_t)(end - begin));
    if (!bytes) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return -1;
    }
    size_t n = (size_t)(end - begin);
    for (size_t i = 0; i < n; i++) {
        const tfm__piece *p = &spelling->pieces[ids[begin + (int64_t)i]];
        bytes[i] = (char)tok->pieces[id_or_unknown(tok, p->text, p->length)].byte;
    }
    int status = 0;
    for (size_t at = 0; at < n && !status;) {
        size_t used;
        int valid = tfm__utf8_valid_prefix(bytes + at, n - at, &used);
        status = tfm__bytes_append(op, out, valid ? bytes + at : "\xEF\xBF\xBD", valid ? used : 3);
        at += used;
    }
    free(bytes);
    return status;
}

/* A piece's text with U+2581 as spaces, after one leading U+2581 removed
 * when strip says so. */
static int append_piece(const char *op, const char *s, size_t len, int strip, tfm__bytes *out)
{
    if (strip && len >= TFM__SPACE_SYMBOL_LEN && !memcmp(s, TFM__SPACE_SYMBOL, TFM__SPACE_SYMBOL_LEN)) {
        s += TFM__SPACE_SYMBOL_LEN;
        len -= TFM__SPACE_SYMBOL_LEN;
    }
    for (size_t i = 0; i < len;) {
        int space = len - i >= TFM__SPACE_SYMBOL_LEN &&
                    !memcmp(s + i, TFM__SPACE_SYMBOL, TFM__SPACE_SYMBOL_LEN);
        if (tfm__bytes_append(op, out, space ? " " : s + i, 1))
            return -1;
        i += space ? TFM__SPACE_SYMBOL_LEN : 1;
    }
    return 0;
}

int tfm__sentencepiece_decode_spelled(const char *op, const tfm_tokenizer *tok,
                                      const tfm_tokenizer *spelling, const int32_t *ids,
                                      int64_t count, tfm__bytes *out)
{
    tfm__bytes text = {0};
    int status = -1;
    int is_bos_ws = 1, bos_ws_seen = 0;
    int64_t byte_start = 0;
    const tfm__normalizer *n = &tok->normalizer;
    if (tfm__bytes_append(op, &text, "", 0))
        goto done;
    for (int64_t i = 0; i < count; i++) {
        const tfm__piece *p = &spelling->pieces[ids[i]];
        /* the reference looks the piece's id up again by its spelling */
        const tfm__piece *q = &tok->pieces[id_or_unknown(tok, p->text, p->length)];
        if (q->type == TFM__PIECE_BYTE)
            continue;
        if (append_bytes(op, tok, spelling, ids, byte_start, i, &text))
            goto done;
        if (bos_ws_seen || text.size)
            is_bos_ws = 0;
        byte_start = i + 1;
        bos_ws_seen = 0;
        if (q->type == TFM__PIECE_CONTROL)
            continue;
        if (q->type == TFM__PIECE_UNKNOWN) {
            /* a spelling the model lacks is its own surface, as it is */
            int named = p->length == q->length && !memcmp(p->text, q->text, q->length);
            if (tfm__bytes_append(op, &text, named ? tok->unk_surface : p->text,
                                  named ? tok->unk_surface_length : p->length))
                goto done;
            continue;
        }
        int strip = is_bos_ws && (n->add_dummy_prefix || n->remove_extra_whitespaces);
        int has_space = p->length >= TFM__SPACE_SYMBOL_LEN &&
                        !memcmp(p->text, TFM__SPACE_SYMBOL, TFM__SPACE_SYMBOL_LEN);
        bos_ws_seen = strip && has_space && !n->remove_extra_whitespaces;
        if (append_piece(op, p->text, p->length, strip, &text))
            goto done;
    }
    if (append_bytes(op, tok, spelling, ids, byte_start, count, &text))
        goto done;
    if (tok->has_denormalizer) {
        if (tfm__normalize(op, tok, &tok->denormalizer, 0, text.data, text.size, out))
            goto done;
    } else {
        out->size = 0;
        if (tfm__bytes_append(op, out, text.data, text.size))
            goto done;
    }
    status = 0;
done:
    free(text.data);
    return status;
}

int tfm__sentencepiece_decode(const char *op, const tfm_tokenizer *tok, const int32_t *ids,
                              int64_t count, tfm__bytes *out)
{
    return tfm__sentencepiece_decode_spelled(op, tok, tok, ids, count, out);
}

/* ---- writing a model (trained here) ---- */

static int put_varint(const char *op, tfm__bytes *out, uint64_t v)
{
    unsigned char buffer[10];
    size_t n = 0;
    do {
        buffer[n++] = (unsigned char)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return tfm__bytes_append(op, out, buffer, n);
}

static int put_key(const char *op, tfm__bytes *out, uint32_t number, int wire)
{
    return put_varint(op, out, (uint64_t)number << 3 | (uint64_t)wire);
}

static int put_bytes(const char *op, tfm__bytes *out, uint32_t number, const void *data,
                     size_t size)
{
    return put_key(op, out, number, WIRE_BYTES) || put_varint(op, out, size) ||
           tfm__bytes_append(op, out, data, size);
}

static int put_number(const char *op, tfm__bytes *out, uint32_t number, uint64_t value)
{
    return put_key(op, out, number, WIRE_VARINT) || put_varint(op, out, value);
}

int tfm__sentencepiece_write(const char *op, const tfm__piece *pieces, int32_t count,
                             int byte_fallback, int32_t pad_id, tfm__bytes *out)
{
    tfm__bytes message = {0};
    int status = -1;
    out->size = 0;
    for (int32_t i = 0; i < count; i++) {
        uint32_t bits;
        memcpy(&bits, &pieces[i].score, sizeof bits);
        unsigned char score[4] = {(unsigned char)bits, (unsigned char)(bits >> 8),
                                  (unsigned char)(bits >> 16), (unsigned char)(bits >> 24)};
        message.size = 0;
        if (put_bytes(op, &message, 1, pieces[i].text, pieces[i].length) ||
            put_key(op, &message, 2, WIRE_FIXED32) ||
            tfm__bytes_append(op, &message, score, sizeof score) ||
            put_number(op, &message, 3, (uint64_t)pieces[i].type) ||
            put_bytes(op, out, 1, message.data, message.size))
            goto done;
    }
    message.size = 0;
    if (put_number(op, &message, 3, TFM__MODEL_BPE) || put_number(op, &message, 4, (uint64_t)count) ||
        put_number(op, &message, 35, byte_fallback != 0) ||
        (pad_id >= 0 && put_number(op, &message, 43, (uint64_t)pad_id)) ||
        put_bytes(op, out, 2, message.data, message.size))
        goto done;
    message.size = 0;
    if (put_bytes(op, &message, 1, "identity", 8) || put_number(op, &message, 3, 1) ||
        put_number(op, &message, 4, 1) || put_number(op, &message, 5, 1) ||
        put_bytes(op, out, 3, message.data, message.size))
        goto done;
    status = 0;
done:
    free(message.data);
    return status;
}
