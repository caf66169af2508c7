/* Byte-level BPE as GPT-2's encoder.py (and BART's, which reuses it) runs
 * it: text cut by GPT-2's pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * matched by hand over code points (letters and numbers by libutf8proc's
 * categories, \s as Unicode's White_Space), each part's bytes spelled in
 * GPT-2's byte-to-unicode alphabet, then merged by rank. Merging takes the
 * best-ranked adjacent pair first, leftmost first among equals, which is
 * encoder.py's order whenever each merge's parts are made by earlier
 * merges, as in any trained merges.txt. A byte that is not part of a
 * well-formed character counts as one punctuation character. */
#include "text/text.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/error.h"
#include "io/json.h"

static const char magic[8] = {'T', 'F', 'M', '-', 'B', 'B', 'P', 'E'};
enum { MAX_MERGES = 1 << 24 }; /* ranks stay exact as float scores */

struct tfm__byte_bpe {
    tfm__trie symbols;       /* spellings of bytes, merge parts and results */
    int32_t symbol_count;
    int32_t *symbol_piece;   /* per symbol: its vocabulary id, or -1 */
    int32_t byte_symbol[256];
    uint64_t *pair_keys;     /* left << 32 | right, + 1; 0: empty */
    int32_t *pair_rank, *pair_merged;
    size_t pair_slots;
};

/* GPT-2's printable stand-in for byte b: itself when printable, else
 * U+0100 on, in byte order (0x00-0x20, 0x7F-0xA0, 0xAD). */
static uint32_t byte_to_unicode(int b)
{
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))
        return (uint32_t)b;
    return 256u + (uint32_t)(b < 0x21 ? b : b <= 0xA0 ? 33 + (b - 0x7F) : 67);
}

/* The byte c stands for, or -1. */
static int unicode_to_byte(uint32_t c)
{
    if (c > 0xFF) {
        uint32_t n = c - 256;
        return c > 256 + 67 ? -1 : n < 33 ? (int)n : n < 67 ? 0x7F + (int)n - 33 : 0xAD;
    }
    return byte_to_unicode((int)c) == c ? (int)c : -1;
}

/* ---- loading ---- */

static int32_t symbol_of(const char *op, tfm__byte_bpe *bpe, const char *s, size_t len)
{
    int32_t node = tfm__trie_find(&bpe->symbols, s, len);
    if (node >= 0 && bpe->symbols.ids[node][0] >= 0)
        return bpe->symbols.ids[node][0];
    if (tfm__trie_add(op, &bpe->symbols, s, len, TFM__TRIE_MATCHED, bpe->symbol_count))
        return -1;
    return bpe->symbol_count++;
}

static size_t pair_slot(const tfm__byte_bpe *bpe, uint64_t key)
{
    size_t i = (size_t)(((key + 1) * 0x9E3779B97F4A7C15ull) >> 20) & (bpe->pair_slots - 1);
    while (bpe->pair_keys[i] && bpe->pair_keys[i] != key + 1)
        i = (i + 1) & (bpe->pair_slots - 1);
    return i;
}

/* Reads merges.txt: "A B" a line, best first; a later copy of a pair
 * takes its rank, as encoder.py's dict does. */
static int read_merges(const char *op, tfm__byte_bpe *bpe, const char *text, size_t size)
{
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += text[i] == '\n';
    bpe->pair_slots = 16;
    while (bpe->pair_slots < 2 * lines)
        bpe->pair_slots *= 2;
    bpe->pair_keys = calloc(bpe->pair_slots, sizeof *bpe->pair_keys);
    bpe->pair_rank = malloc(bpe->pair_slots * sizeof *bpe->pair_rank);
    bpe->pair_merged = malloc(bpe->pair_slots * sizeof *bpe->pair_merged);
    if (!bpe->pair_keys || !bpe->pair_rank || !bpe->pair_merged) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %zu merges", op, lines);
        return -1;
    }
    int32_t rank = 0;
    size_t number = 0;
    for (size_t at = 0; at < size; number++) {
        const char *line = text + at, *end = memchr(line, '\n', size - at);
        size_t len = end ? (size_t)(end - line) : size - at;
        at += len + 1;
        if (!len || (number == 0 && len >= 8 && !memcmp(line, "#version", 8)))
            continue;
        const char *space = memchr(line, ' ', len);
        if (!space || space == line || space == line + len - 1 ||
            memchr(space + 1, ' ', len - (size_t)(space + 1 - line))) {
            tfm__fail(TFM_ERR_FORMAT, "%s: merges line %zu is not \"A B\"", op, number + 1);
            return -1;
        }
        if (rank == MAX_MERGES) {
            tfm__fail(TFM_ERR_FORMAT, "%s: more than %d merges", op, MAX_MERGES);
            return -1;
        }
        size_t left_len = (size_t)(space - line);
        int32_t left = symbol_of(op, bpe, line, left_len);
        int32_t right = symbol_of(op, bpe, space + 1, len - left_len - 1);
        /* the merged spelling is the line without its space */
        char *joined = malloc(len);
        if (!joined) {
            tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
            return -1;
        }
        memcpy(joined, line, left_len);
        memcpy(joined + left_len, space + 1, len - left_len - 1);
        int32_t merged = left < 0 || right < 0 ? -1 : symbol_of(op, bpe, joined, len - 1);
        free(joined);
        if (merged < 0)
            return -1;
        uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
        size_t slot = pair_slot(bpe, key);
        bpe->pair_keys[slot] = key + 1;
        bpe->pair_rank[slot] = rank++;
        bpe->pair_merged[slot] = merged;
    }
    return 0;
}

static int build(const char *op, tfm_tokenizer *tok, const char *vocab, size_t vocab_size,
                 const char *merges, size_t merges_size)
{
    tfm__byte_bpe *bpe = tok->byte_bpe;
    tok->kind = TFM__MODEL_BYTE_BPE;
    for (int b = 0; b < 256; b++) {
        char utf8[4];
        size_t len = tfm__utf8_encode(byte_to_unicode(b), utf8);
        if ((bpe->byte_symbol[b] = symbol_of(op, bpe, utf8, len)) < 0)
            return -1;
    }
    if (tfm__vocab_read(op, tok, &tok->vocab, vocab, vocab_size) ||
        read_merges(op, bpe, merges, merges_size))
        return -1;
    bpe->symbol_piece = malloc((size_t)bpe->symbol_count * sizeof *bpe->symbol_piece);
    if (!bpe->symbol_piece) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return -1;
    }
    for (int32_t s = 0; s < bpe->symbol_count; s++)
        bpe->symbol_piece[s] = -1;
    /* each symbol's vocabulary id: walk both tries along every piece */
    for (int32_t id = 0; id < tok->size; id++) {
        int32_t node = tfm__trie_find(&bpe->symbols, tok->pieces[id].text, tok->pieces[id].length);
        if (node >= 0 && bpe->symbols.ids[node][0] >= 0)
            bpe->symbol_piece[bpe->symbols.ids[node][0]] = id;
    }
    return 0;
}

tfm_tokenizer *tfm__byte_bpe_parse(const char *op, const char *vocab, size_t vocab_size,
                                   const char *merges, size_t merges_size)
{
    tfm_tokenizer *tok = calloc(1, sizeof *tok);
    if (tok)
        tok->byte_bpe = calloc(1, sizeof *tok->byte_bpe);
    if (!tok || !tok->byte_bpe) {
        free(tok);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        return NULL;
    }
    const char *const parts[2] = {vocab, merges};
    const size_t sizes[2] = {vocab_size, merges_size};
    if (tfm__parts_pack(op, magic, 2, parts, sizes, tok) ||
        build(op, tok, vocab, vocab_size, merges, merges_size)) {
        tfm__tokenizer_free(tok);
        return NULL;
    }
    return tok;
}

int tfm__byte_bpe_is_container(const char *bytes, size_t size)
{
    return tfm__parts_is_container(magic, bytes, size);
}

tfm_tokenizer *tfm__byte_bpe_from_bytes(const char *op, const char *bytes, size_t size)
{
    const char *parts[2];
    size_t sizes[2];
    if (tfm__parts_unpack(op, "a byte-level BPE tokenizer", bytes, size, 2, 2, parts, sizes) < 0)
        return NULL;
    return tfm__byte_bpe_parse(op, parts[0], sizes[0], parts[1], sizes[1]);
}

void tfm__byte_bpe_free(tfm__byte_bpe *bpe)
{
    if (!bpe)
        return;
    tfm__trie_free(&bpe->symbols);
    free(bpe->symbol_piece);
    free(bpe->pair_keys);
    free(bpe->pair_rank);
    free(bpe->pair_merged);
    free(bpe);
}

/* ---- pre-tokenisation ---- */

enum { CLASS_SPACE, CLASS_LETTER, CLASS_NUMBER, CLASS_OTHER };

static int is_white_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* The class of the character at s[0, len) and its length in bytes. */
static int char_class(const char *s, size_t len, size_t *used)
{
    uint32_t c = tfm__utf8_decode(s, len, used);
    if (c == 0xFFFD && *used == 1) /* not a well-formed character */
        return CLASS_OTHER;
    if (is_white_space(c))
        return CLASS_SPACE;
    utf8proc_category_t category = utf8proc_category((utf8proc_int32_t)c);
    if (category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO)
        return CLASS_LETTER;
    if (category >= UTF8PROC_CATEGORY_ND && category <= UTF8PROC_CATEGORY_NO)
        return CLASS_NUMBER;
    return CLASS_OTHER;
}

/* Bytes from s[0, len) on that are of class kind, whole characters. */
static size_t run_of(const char *s, size_t len, int kind)
{
    size_t at = 0, used;
    while (at < len && char_class(s + at, len - at, &used) == kind)
        at += used;
    return at;
}

/* The length of the pattern's match at s[0, len) (len > 0). */
static size_t next_part(const char *s, size_t len)
{
    static const char *const contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
    for (size_t k = 0; k < sizeof contractions / sizeof *contractions; k++) {
        size_t n = strlen(contractions[k]);
        if (len >= n && !memcmp(s, contractions[k], n))
            return n;
    }
    int space = s[0] == ' ';
    for (int kind = CLASS_LETTER; kind <= CLASS_OTHER; kind++) {
        /* " ?X+": with the space if one leads, else from here */
        size_t run = space ? run_of(s + 1, len - 1, kind) : run_of(s, len, kind);
        if (run)
            return run + (size_t)space;
    }
    /* \s+(?!\S) backs off one character before a non-space; else \s+ */
    size_t used, at = 0, last = 0;
    while (at < len && char_class(s + at, len - at, &used) == CLASS_SPACE) {
        last = at;
        at += used;
    }
    return at < len && last > 0 ? last : at;
}

/* ---- encoding ---- */

typedef struct symbol {
    int64_t prev, next;
    size_t length; /* bytes of the text */
    int32_t id;    /* symbol */
} symbol;

static int add_pair(const char *op, const tfm__byte_bpe *bpe, const symbol *symbols, int64_t left,
                    int64_t right, tfm__pair_heap *heap)
{
    if (left < 0 || right < 0)
        return 0;
    uint64_t key = (uint64_t)(uint32_t)symbols[left].id << 32 | (uint32_t)symbols[right].id;
    size_t slot = pair_slot(bpe, key);
    if (!bpe->pair_keys[slot])
        return 0;
    return tfm__pair_heap_push(op, heap, (tfm__pair){left, right, -(float)bpe->pair_rank[slot],
                                                      symbols[left].length + symbols[right].length});
}

/* Merges one part's symbols and appends their ids. */
static int encode_part(const char *op, const tfm_tokenizer *tok, const unsigned char *s,
                       size_t len, symbol *symbols, tfm__pair_heap *heap, tfm__ids *out)
{
    const tfm__byte_bpe *bpe = tok->byte_bpe;
    heap->size = 0;
    for (size_t i = 0; i < len; i++)
        symbols[i] = (symbol){(int64_t)i - 1, i + 1 < len ? (int64_t)i + 1 : -1, 1,
                              bpe->byte_symbol[s[i]]};
    for (size_t i = 1; i < len; i++)
        if (add_pair(op, bpe, symbols, (int64_t)i - 1, (int64_t)i, heap))
            return -1;
    while (heap->size) {
        tfm__pair top = tfm__pair_heap_pop(heap);
        symbol *left = &symbols[top.left], *right = &symbols[top.right];
        if (!left->length || !right->length || left->length + right->length != top.size)
            continue;
        uint64_t key = (uint64_t)(uint32_t)left->id << 32 | (uint32_t)right->id;
        left->id = bpe->pair_merged[pair_slot(bpe, key)];
        left->length += right->length;
        left->next = right->next;
        if (right->next >= 0)
            symbols[right->next].prev = top.left;
        right->length = 0;
        if (add_pair(op, bpe, symbols, left->prev, top.left, heap) ||
            add_pair(op, bpe, symbols, top.left, left->next, heap))
            return -1;
    }
    for (int64_t i = 0; i >= 0; i = symbols[i].next) {
        int32_t id = bpe->symbol_piece[symbols[i].id];
        if (id < 0)
            id = tok->unk_id;
        if (id < 0) {
            tfm__fail(TFM_ERR_FORMAT, "%s: the vocabulary has neither a piece the merges made "
                      "nor <unk>", op);
            return -1;
        }
        if (tfm__ids_push(op, out, id))
            return -1;
    }
    return 0;
}

int tfm__byte_bpe_encode(const char *op, const tfm_tokenizer *tok, const char *text,
                         size_t length, tfm__ids *out)
{
    symbol *symbols = NULL;
    tfm__pair_heap heap = {0};
    int status = 0;
    size_t capacity = 0;
    for (size_t at = 0; at < length && !status;) {
        size_t part = next_part(text + at, length - at);
        if (part > capacity) {
            free(symbols);
            capacity = part;
            if (!(symbols = malloc(capacity * sizeof *symbols))) {
                tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
                status = -1;
                break;
            }
        }
        status = encode_part(op, tok, (const unsigned char *)text + at, part, symbols, &heap, out);
        at += part;
    }
    free(symbols);
    free(heap.data);
    return status;
}

/* ---- decoding ---- */

/* The bytes of a maximal prefix of a well-formed character that s[0, len)
 * begins with but does not complete (Unicode's "maximal subpart", which
 * Python's errors="replace" turns into one U+FFFD); at least 1. */
static size_t maximal_subpart(const unsigned char *s, size_t len)
{
    unsigned char b = s[0];
    size_t need = b >= 0xC2 && b <= 0xDF ? 1 : b >= 0xE0 && b <= 0xEF ? 2 : b >= 0xF0 && b <= 0xF4 ? 3 : 0;
    if (!need || len < 2)
        return 1;
    unsigned char lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
    if (s[1] < lo || s[1] > hi)
        return 1;
    size_t k = 2;
    while (k <= need && k < len && s[k] >= 0x80 && s[k] <= 0xBF)
        k++;
    return k;
}

int tfm__byte_bpe_decode(const char *op, const tfm_tokenizer *tok, const int32_t *ids,
                         int64_t count, tfm__bytes *out)
{
    tfm__bytes bytes = {0};
    int status = -1;
    for (int64_t i = 0; i < count; i++) {
        const tfm__piece *p = &tok->pieces[ids[i]];
        for (size_t at = 0; at < p->length;) {
            size_t used;
            uint32_t c = tfm__utf8_decode(p->text + at, p->length - at, &used);
            int byte = unicode_to_byte(c);
            char one = (char)byte;
            /* a character outside the byte alphabet (an added token's) is itself */
            if (tfm__bytes_append(op, &bytes, byte >= 0 ? &one : p->text + at, byte >= 0 ? 1 : used))
                goto done;
            at += used;
        }
    }
    out->size = 0;
    if (tfm__bytes_append(op, out, "", 0))
        goto done;
    for (size_t at = 0; at < bytes.size;) {
        size_t used;
        int valid = tfm__utf8_valid_prefix(bytes.data + at, bytes.size - at, &used);
        if (!valid)
            used = maximal_subpart((const unsigned char *)bytes.data + at, bytes.size - at);
        if (tfm__bytes_append(op, out, valid ? bytes.data + at : "\xEF\xBF\xBD", valid ? used : 3))
            goto done;
        at += used;
    }
    status = 0;
done:
    free(bytes.data);
    return status;
}
