/* BPE vocabulary training, as spm_train --model_type=bpe trains with
 * identity normalisation: lines normalised as SentencePiece normalises
 * them, cut into words at U+2581 and further where a piece could not
 * continue (SentencePiece's IsValidSentencePiece: one script per piece,
 * punctuation and digits being "Common", marks taking the script before
 * them), characters kept by coverage, then the most frequent adjacent pair
 * merged until the vocabulary is full. The model is written as a
 * SentencePiece model file and read back, so it encodes as any .model. */
#include "text/text.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/error.h"
#include "core/options.h"

static const tfm_bpe_train_options default_options = {
    .struct_size = sizeof(tfm_bpe_train_options),
    .vocab_size = 8000,
    .byte_fallback = 0,
    .character_coverage = 0.9995,
    .max_piece_length = 16,
    .pad_piece = 0,
};

void tfm_bpe_train_options_init_sized(tfm_bpe_train_options *options, uint32_t struct_size)
{
    tfm__init_options(options, struct_size, &default_options, sizeof default_options);
}

/* ---- two hash maps: 64-bit keys, and byte strings, to 64-bit values ---- */

typedef struct number_map {
    uint64_t *keys; /* key + 1; 0: empty */
    int64_t *values; /* zeroed, empty slots too: scans read a value beside its key */
    size_t slots, used;
} number_map;

static size_t hash64(uint64_t key) { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20); }

/* The slot holding key, or the empty slot where it would go. */
static size_t number_probe(const number_map *m, uint64_t key)
{
    size_t i = hash64(key + 1) & (m->slots - 1);
    while (m->keys[i] && m->keys[i] != key + 1)
        i = (i + 1) & (m->slots - 1);
    return i;
}

/* The value slot of key, or NULL when missing (the map never grows). */
static int64_t *number_find(const number_map *m, uint64_t key)
{
    if (!m->slots)
        return NULL;
    size_t i = number_probe(m, key);
    return m->keys[i] ? &m->values[i] : NULL;
}

/* The value slot of key, added as 0 when missing; NULL when out of memory. */
static int64_t *number_slot(number_map *m, uint64_t key)
{
    if (2 * (m->used + 1) > m->slots) {
        number_map bigger = {calloc(m->slots ? 2 * m->slots : 4096, sizeof(uint64_t)),
                             calloc(m->slots ? 2 * m->slots : 4096, sizeof(int64_t)),
                             m->slots ? 2 * m->slots : 4096, m->used};
        if (!bigger.keys || !bigger.values) {
            free(bigger.keys);
            free(bigger.values);
            return NULL;
        }
        for (size_t i = 0; i < m->slots; i++)
            if (m->keys[i]) {
                size_t j = number_probe(&bigger, m->keys[i] - 1);
                bigger.keys[j] = m->keys[i];
                bigger.values[j] = m->values[i];
            }
        free(m->keys);
        free(m->values);
        *m = bigger;
    }
    size_t i = number_probe(m, key);
    if (!m->keys[i]) {
        m->keys[i] = key + 1;
        m->values[i] = 0;
        m->used++;
    }
    return &m->values[i];
}

typedef struct string_map {
    tfm__bytes text;   /* the keys, one after another */
    size_t *offsets;   /* per slot: key's offset + 1; 0: empty */
    uint32_t *lengths;
    int64_t *values;
    size_t slots, used;
} string_map;

static size_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return hash64(h);
}

static int string_map_grow(string_map *m)
{
    size_t slots = m->slots ? 2 * m->slots : 4096;
    size_t *offsets = calloc(slots, sizeof *offsets);
    uint32_t *lengths = malloc(slots * sizeof *lengths);
    int64_t *values = malloc(slots * sizeof *values);
    if (!offsets || !lengths || !values) {
        free(offsets);
        free(lengths);
        free(values);
        return -1;
    }
    for (size_t i = 0; i < m->slots; i++)
        if (m->offsets[i]) {
            size_t j = hash_bytes(m->text.data + m->offsets[i] - 1, m->lengths[i]) & (slots - 1);
            while (offsets[j])
                j = (j + 1) & (slots - 1);
            offsets[j] = m->offsets[i];
            lengths[j] = m->lengths[i];
            values[j] = m->values[i];
        }
    free(m->offsets);
    free(m->lengths);
    free(m->values);
    m->offsets = offsets;
    m->lengths = lengths;
    m->values = values;
    m->slots = slots;
    return 0;
}

/* The value slot of s[0, len); with add, a missing key is added with
 * value -1 (*added set); else NULL when missing. NULL and *added = -1 when
 * memory runs out. */
static int64_t *string_slot(const char *op, string_map *m, const char *s, size_t len, int add,
                            int *added)
{
    *added = 0;
    if (add && 2 * (m->used + 1) > m->slots && string_map_grow(m)) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        *added = -1;
        return NULL;
    }
    if (!m->slots)
        return NULL;
    size_t i = hash_bytes(s, len) & (m->slots - 1);
    for (; m->offsets[i]; i = (i + 1) & (m->slots - 1))
        if (m->lengths[i] == len && !memcmp(m->text.data + m->offsets[i] - 1, s, len))
            return &m->values[i];
    if (!add)
        return NULL;
    size_t offset = m->text.size;
    if (tfm__bytes_append(op, &m->text, s, len)) {
        *added = -1;
        return NULL;
    }
    m->offsets[i] = offset + 1;
    m->lengths[i] = (uint32_t)len;
    m->values[i] = -1;
    m->used++;
    *added = 1;
    return &m->values[i];
}

static void string_map_free(string_map *m)
{
    free(m->text.data);
    free(m->offsets);
    free(m->lengths);
    free(m->values);
}

/* ---- words ---- */

/* Which pieces a character may share (SentencePiece's scripts, roughly by
 * Unicode block: Han with kana, Latin, Greek, Cyrillic, Hangul, others by
 * 128-character block); 0: "Common" (digits, punctuation, symbols); -1: a
 * mark, which takes the class before it. */
static int32_t character_class(uint32_t c)
{
    utf8proc_category_t category = utf8proc_category((utf8proc_int32_t)c);
    if (category == UTF8PROC_CATEGORY_MN || category == UTF8PROC_CATEGORY_MC ||
        category == UTF8PROC_CATEGORY_ME)
        return -1;
    if (category < UTF8PROC_CATEGORY_LU || category > UTF8PROC_CATEGORY_LO)
        return 0;
    if ((c >= 0x3040 && c <= 0x30FF) || (c >= 0x3400 && c <= 0x4DBF) ||
        (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xF900 && c <= 0xFAFF) ||
        (c >= 0xFF66 && c <= 0xFF9F) || c >= 0x20000)
        return 1;
    if (c <= 0x024F || (c >= 0x1E00 && c <= 0x1EFF) || (c >= 0xFF21 && c <= 0xFF5A))
        return 2;
    if ((c >= 0x0370 && c <= 0x03FF) || (c >= 0x1F00 && c <= 0x1FFF))
        return 3;
    if (c >= 0x0400 && c <= 0x052F)
        return 4;
    if ((c >= 0xAC00 && c <= 0xD7AF) || (c >= 0x1100 && c <= 0x11FF))
        return 5;
    return 16 + (int32_t)(c >> 7);
}

typedef struct trainer {
    const char *op;
    number_map characters; /* code point -> count */
    string_map words;      /* word -> count */
    string_map symbols;    /* piece -> symbol id */
    struct symbol {         /* a symbol's text in the symbols map's text */
        size_t offset;
        uint32_t length, chars;
    } *symbol;
    size_t symbol_count, symbol_capacity;
    /* words as symbol sequences */
    int32_t *sequence;       /* every word's symbols, one after another */
    int64_t *word_start, *word_length, *word_count;
    int64_t word_total;
    number_map pairs;        /* (left << 32 | right) -> count */
    /* which words hold a pair: pair -> its list's first link + 1 (0: none);
       a list may name a word that no longer holds the pair, or name it
       twice, but names every word that does */
    number_map pair_words;
    struct link {
        int64_t word, next; /* next: the list's next link, -1 at its end */
    } *link;
    size_t link_count, link_capacity;
    /* the pairs by count, highest first (ties: the merged piece's bytes);
       an entry whose count is no longer the pair's is dropped when met */
    struct queued {
        int64_t count;
        uint64_t pair;
    } *queue;
    size_t queued, queue_capacity;
    uint64_t *changed;       /* the pairs whose counts this step changed */
    size_t changed_count, changed_capacity;
    int64_t *visit;          /* the words the step's pair's list names */
    size_t visit_capacity;
} trainer;

static int count_word(trainer *t, const char *s, size_t len)
{
    int added;
    int64_t *count = string_slot(t->op, &t->words, s, len, 1, &added);
    if (!count)
        return -1;
    *count = added ? 1 : *count + 1;
    return 0;
}

/* Counts the characters and words of one normalised line. */
static int count_line(trainer *t, const char *s, size_t len)
{
    size_t word = 0;
    int32_t last_class = -2;
    for (size_t at = 0; at < len;) {
        size_t used;
        uint32_t c = tfm__utf8_decode(s + at, len - at, &used);
        int64_t *n = number_slot(&t->characters, c);
        if (!n) {
            tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", t->op);
            return -1;
        }
        ++*n;
        int space = c == 0x2581;
        int32_t class = space ? -2 : character_class(c);
        if (class == -1)
            class = last_class;
        /* a word ends before a space, or where a piece could not go on */
        if (at > word && (space || (last_class != -2 && class != last_class))) {
            if (count_word(t, s + word, at - word))
                return -1;
            word = at;
        }
        last_class = class;
        at += used;
    }
    return len > word ? count_word(t, s + word, len - word) : 0;
}

/* The symbol spelled s[0, len) (chars characters), added when new. */
static int32_t symbol_of(trainer *t, const char *s, size_t len, uint32_t chars)
{
    int added;
    int64_t *id = string_slot(t->op, &t->symbols, s, len, 1, &added);
    if (!id)
        return -1;
    if (!added)
        return (int32_t)*id;
    void *data = t->symbol;
    if (t->symbol_count >= INT32_MAX ||
        tfm__grow(t->op, &data, sizeof *t->symbol, t->symbol_count, &t->symbol_capacity, 1))
        return -1;
    t->symbol = data;
    *id = (int64_t)t->symbol_count;
    t->symbol[t->symbol_count] = (struct symbol){t->symbols.text.size - len, (uint32_t)len, chars};
    return (int32_t)t->symbol_count++;
}

static const char *symbol_text(const trainer *t, int32_t id)
{
    return t->symbols.text.data + t->symbol[id].offset;
}

typedef struct char_count {
    uint32_t c;
    int64_t count;
} char_count;

static int by_count(const void *a, const void *b)
{
    const char_count *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return x->c < y->c ? -1 : x->c > y->c;
}

/* The characters kept (most frequent first, as spm_train orders them),
 * each made a symbol; *kept of them. */
static char_count *keep_characters(trainer *t, double coverage, int32_t *kept)
{
    char_count *all = malloc((t->characters.used + 1) * sizeof *all);
    if (!all) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", t->op);
        return NULL;
    }
    size_t n = 0;
    int64_t total = 0;
    for (size_t i = 0; i < t->characters.slots; i++)
        if (t->characters.keys[i]) {
            all[n++] = (char_count){(uint32_t)(t->characters.keys[i] - 1), t->characters.values[i]};
            total += t->characters.values[i];
        }
    qsort(all, n, sizeof *all, by_count);
    int64_t covered = 0;
    size_t k = 0;
    /* spm_train: stop once the characters so far cover the share */
    while (k < n && (double)covered / (double)total < coverage)
        covered += all[k++].count;
    for (size_t i = 0; i < k; i++) {
        char utf8[4];
        size_t len = tfm__utf8_encode(all[i].c, utf8);
        if (symbol_of(t, utf8, len, 1) != (int32_t)i) {
            free(all);
            return NULL;
        }
    }
    *kept = (int32_t)k;
    return all;
}

/* Every distinct word as its characters' symbols (-1: not kept). */
static int spell_words(trainer *t)
{
    size_t symbols = 0, n = 0;
    for (size_t i = 0; i < t->words.slots; i++)
        symbols += t->words.offsets[i] ? t->words.lengths[i] : 0;
    t->sequence = malloc((symbols + 1) * sizeof *t->sequence);
    t->word_start = malloc((t->words.used + 1) * sizeof *t->word_start);
    t->word_length = malloc((t->words.used + 1) * sizeof *t->word_length);
    t->word_count = malloc((t->words.used + 1) * sizeof *t->word_count);
    if (!t->sequence || !t->word_start || !t->word_length || !t->word_count) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the words", t->op);
        return -1;
    }
    size_t at = 0;
    for (size_t i = 0; i < t->words.slots; i++) {
        if (!t->words.offsets[i])
            continue;
        const char *s = t->words.text.data + t->words.offsets[i] - 1;
        size_t len = t->words.lengths[i];
        t->word_start[n] = (int64_t)at;
        t->word_count[n] = t->words.values[i];
        for (size_t k = 0; k < len;) {
            size_t used;
            tfm__utf8_decode(s + k, len - k, &used);
            int added;
            const int64_t *id = string_slot(t->op, &t->symbols, s + k, used, 0, &added);
            t->sequence[at++] = id ? (int32_t)*id : -1;
            k += used;
        }
        t->word_length[n] = (int64_t)at - t->word_start[n];
        n++;
    }
    t->word_total = (int64_t)n;
    return 0;
}

/* Names word w in pair's list of words (once, when it already heads it). */
static int note_word(trainer *t, uint64_t pair, int64_t w)
{
    int64_t *head = number_slot(&t->pair_words, pair);
    if (!head) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", t->op);
        return -1;
    }
    if (*head && t->link[*head - 1].word == w)
        return 0;
    void *data = t->link;
    if (tfm__grow(t->op, &data, sizeof *t->link, t->link_count, &t->link_capacity, 1))
        return -1;
    t->link = data;
    t->link[t->link_count] = (struct link){w, *head - 1};
    *head = (int64_t)++t->link_count;
    return 0;
}

/* Adds sign * the word's count to each of its pairs, noting them as
 * changed; with sign 1, names the word in the lists of its pairs holding
 * symbol fresh (of all its pairs when fresh is -1): the pairs a merge
 * making fresh gave it, the others being there before. */
static int count_pairs(trainer *t, int64_t w, int sign, int max_chars, int32_t fresh)
{
    const int32_t *s = t->sequence + t->word_start[w];
    for (int64_t i = 0; i + 1 < t->word_length[w]; i++) {
        if (s[i] < 0 || s[i + 1] < 0 ||
            t->symbol[s[i]].chars + t->symbol[s[i + 1]].chars > (uint32_t)max_chars)
            continue;
        uint64_t pair = (uint64_t)(uint32_t)s[i] << 32 | (uint32_t)s[i + 1];
        int64_t *n = number_slot(&t->pairs, pair);
        if (!n) {
            tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", t->op);
            return -1;
        }
        *n += sign * t->word_count[w];
        void *data = t->changed;
        if (tfm__grow(t->op, &data, sizeof *t->changed, t->changed_count, &t->changed_capacity,
                      1))
            return -1;
        t->changed = data;
        t->changed[t->changed_count++] = pair;
        if (sign > 0 && (fresh < 0 || s[i] == fresh || s[i + 1] == fresh) &&
            note_word(t, pair, w))
            return -1;
    }
    return 0;
}

/* Compares the pieces two pairs would make, by bytes. */
static int pair_text_cmp(const trainer *t, uint64_t a, uint64_t b)
{
    int32_t al = (int32_t)(a >> 32), ar = (int32_t)(uint32_t)a;
    int32_t bl = (int32_t)(b >> 32), br = (int32_t)(uint32_t)b;
    char x[2 * 64 * 4], y[2 * 64 * 4];
    size_t xl = t->symbol[al].length + t->symbol[ar].length;
    size_t yl = t->symbol[bl].length + t->symbol[br].length;
    if (xl > sizeof x || yl > sizeof y)
        return xl < yl ? -1 : 1;
    memcpy(x, symbol_text(t, al), t->symbol[al].length);
    memcpy(x + t->symbol[al].length, symbol_text(t, ar), t->symbol[ar].length);
    memcpy(y, symbol_text(t, bl), t->symbol[bl].length);
    memcpy(y + t->symbol[bl].length, symbol_text(t, br), t->symbol[br].length);
    int c = memcmp(x, y, xl < yl ? xl : yl);
    return c ? c : (xl < yl ? -1 : xl > yl);
}

/* ---- the queue of pairs: a binary heap, the best pair on top ---- */

static int queued_before(const trainer *t, struct queued a, struct queued b)
{
    return a.count != b.count ? a.count > b.count : pair_text_cmp(t, a.pair, b.pair) < 0;
}

static int queue_push(trainer *t, int64_t count, uint64_t pair)
{
    void *data = t->queue;
    if (tfm__grow(t->op, &data, sizeof *t->queue, t->queued, &t->queue_capacity, 1))
        return -1;
    t->queue = data;
    struct queued entry = {count, pair};
    size_t i = t->queued++;
    for (; i && queued_before(t, entry, t->queue[(i - 1) / 2]); i = (i - 1) / 2)
        t->queue[i] = t->queue[(i - 1) / 2];
    t->queue[i] = entry;
    return 0;
}

static struct queued queue_pop(trainer *t)
{
    struct queued top = t->queue[0], last = t->queue[--t->queued];
    size_t i = 0;
    for (size_t child; (child = 2 * i + 1) < t->queued; i = child) {
        if (child + 1 < t->queued && queued_before(t, t->queue[child + 1], t->queue[child]))
            child++;
        if (!queued_before(t, t->queue[child], last))
            break;
        t->queue[i] = t->queue[child];
    }
    t->queue[i] = last;
    return top;
}

static int by_pair(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int by_word(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Queues each changed pair (once) at its count, when any. */
static int queue_changed(trainer *t)
{
    if (!t->changed_count) /* no pair at all: changed may be NULL */
        return 0;
    qsort(t->changed, t->changed_count, sizeof *t->changed, by_pair);
    for (size_t i = 0; i < t->changed_count; i++) {
        int64_t n = *number_find(&t->pairs, t->changed[i]);
        if ((!i || t->changed[i] != t->changed[i - 1]) && n > 0 &&
            queue_push(t, n, t->changed[i]))
            return -1;
    }
    t->changed_count = 0;
    return 0;
}

/* The pair to merge in *best, 0 when none is left: the most frequent, ties
 * by the merged piece's bytes (no two pairs with counts make one piece:
 * see tfm_tokenizer_train_bpe). */
static int best_pair(trainer *t, uint64_t *best)
{
    while (t->queued) {
        struct queued top = queue_pop(t);
        if (*number_find(&t->pairs, top.pair) == top.count) {
            *best = top.pair;
            return 1;
        }
    }
    return 0;
}

/* Merges pair, in every word its list names that holds it, into a new
 * symbol, *made. */
static int merge_pair(trainer *t, uint64_t pair, int max_chars, int32_t *made)
{
    int32_t left = (int32_t)(pair >> 32), right = (int32_t)(uint32_t)pair;
    size_t ll = t->symbol[left].length, rl = t->symbol[right].length;
    char text[64 * 4]; /* a counted pair has at most 64 characters */
    memcpy(text, symbol_text(t, left), ll);
    memcpy(text + ll, symbol_text(t, right), rl);
    int32_t merged = symbol_of(t, text, ll + rl, t->symbol[left].chars + t->symbol[right].chars);
    if (merged < 0)
        return -1;
    *made = merged;
    int64_t *head = number_find(&t->pair_words, pair);
    size_t visits = 0;
    for (int64_t at = *head - 1; at >= 0; at = t->link[at].next) {
        void *data = t->visit;
        if (tfm__grow(t->op, &data, sizeof *t->visit, visits, &t->visit_capacity, 1))
            return -1;
        t->visit = data;
        t->visit[visits++] = t->link[at].word;
    }
    *head = 0; /* no word will hold the pair */
    qsort(t->visit, visits, sizeof *t->visit, by_word);
    for (size_t v = 0; v < visits; v++) {
        int64_t w = t->visit[v];
        if (v && w == t->visit[v - 1])
            continue;
        int32_t *s = t->sequence + t->word_start[w];
        int64_t len = t->word_length[w], i = 0;
        while (i + 1 < len && !(s[i] == left && s[i + 1] == right))
            i++;
        if (i + 1 >= len)
            continue;
        if (count_pairs(t, w, -1, max_chars, merged))
            return -1;
        int64_t out = 0;
        for (i = 0; i < len; i++) {
            if (i + 1 < len && s[i] == left && s[i + 1] == right) {
                s[out++] = merged;
                i++;
            } else {
                s[out++] = s[i];
            }
        }
        t->word_length[w] = out;
        if (count_pairs(t, w, 1, max_chars, merged))
            return -1;
    }
    return queue_changed(t);
}

static void trainer_free(trainer *t)
{
    free(t->characters.keys);
    free(t->characters.values);
    string_map_free(&t->words);
    string_map_free(&t->symbols);
    free(t->symbol);
    free(t->sequence);
    free(t->word_start);
    free(t->word_length);
    free(t->word_count);
    free(t->pairs.keys);
    free(t->pairs.values);
    free(t->pair_words.keys);
    free(t->pair_words.values);
    free(t->link);
    free(t->queue);
    free(t->changed);
    free(t->visit);
}

static const char *const meta_pieces[4] = {"<unk>", "<s>", "</s>", "<pad>"};
static const char byte_names[] = "0123456789ABCDEF";

/* The vocabulary: meta pieces, byte pieces, merged pieces by merge order,
 * characters by frequency, scores falling from 0 as spm_train's. */
static tfm_tokenizer *write_model(trainer *t, const int32_t *merges, int32_t merge_count,
                                  int32_t kept, const tfm_bpe_train_options *o)
{
    int byte_fallback = o->byte_fallback, pad_piece = o->pad_piece;
    int32_t metas = pad_piece ? 4 : 3;
    int32_t count = metas + o->n_user_symbols + (byte_fallback ? 256 : 0) + merge_count + kept;
    tfm__piece *pieces = malloc((size_t)count * sizeof *pieces);
    char *bytes = malloc(256 * 6);
    tfm__bytes file = {0};
    tfm_tokenizer *tok = NULL;
    if (!pieces || !bytes) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", t->op);
        goto done;
    }
    int32_t n = 0;
    for (int i = 0; i < metas; i++)
        pieces[n++] = (tfm__piece){meta_pieces[i], (uint32_t)strlen(meta_pieces[i]), 0.0f,
                                   i ? TFM__PIECE_CONTROL : TFM__PIECE_UNKNOWN, -1};
    for (int32_t i = 0; i < o->n_user_symbols; i++)
        pieces[n++] = (tfm__piece){o->user_symbols[i], (uint32_t)strlen(o->user_symbols[i]),
                                   0.0f, TFM__PIECE_USER_DEFINED, -1};
    for (int b = 0; byte_fallback && b < 256; b++) {
        char *name = bytes + 6 * b;
        memcpy(name, "<0x", 3);
        name[3] = byte_names[b >> 4];
        name[4] = byte_names[b & 15];
        name[5] = '>';
        pieces[n++] = (tfm__piece){name, 6, 0.0f, TFM__PIECE_BYTE, b};
    }
    int32_t first = n;
    for (int32_t i = 0; i < merge_count + kept; i++) {
        int32_t symbol = i < merge_count ? merges[i] : i - merge_count;
        float score = -(float)(n - first);
        pieces[n++] = (tfm__piece){symbol_text(t, symbol), t->symbol[symbol].length, score,
                                   TFM__PIECE_NORMAL, -1};
    }
    if (!tfm__sentencepiece_write(t->op, pieces, count, byte_fallback, pad_piece ? 3 : -1,
                                  &file))
        tok = tfm__sentencepiece_parse(t->op, file.data, file.size);
done:
    free(pieces);
    free(bytes);
    free(file.data);
    return tok;
}

/* The options' user symbols: a count in range, each a distinct non-empty
 * string that is not a meta piece; -1 with the error set. */
static int check_user_symbols(const char *op, const tfm_bpe_train_options *o)
{
    if (o->n_user_symbols < 0 || o->n_user_symbols > (1 << 20) ||
        (!o->user_symbols && o->n_user_symbols))
        return tfm__fail(o->n_user_symbols > 0 ? TFM_ERR_NULL : TFM_ERR_ARG,
                         "%s: user_symbols %s with n_user_symbols %d", op,
                         o->user_symbols ? "given" : "NULL", (int)o->n_user_symbols), -1;
    for (int32_t i = 0; i < o->n_user_symbols; i++) {
        const char *u = o->user_symbols[i];
        if (!u || !*u)
            return tfm__fail(u ? TFM_ERR_ARG : TFM_ERR_NULL, "%s: user symbol %d is %s", op,
                             (int)i, u ? "empty" : "NULL"), -1;
        for (int m = 0; m < 4; m++)
            if (strcmp(u, meta_pieces[m]) == 0)
                return tfm__fail(TFM_ERR_ARG, "%s: user symbol %d is the meta piece %s", op,
                                 (int)i, u), -1;
        for (int32_t j = 0; j < i; j++)
            if (strcmp(u, o->user_symbols[j]) == 0)
                return tfm__fail(TFM_ERR_ARG, "%s: user symbols %d and %d are both \"%s\"",
                                 op, (int)j, (int)i, u), -1;
    }
    return 0;
}

tfm_status tfm_tokenizer_train_bpe(const char *const *lines, const int64_t *lengths,
                                   int64_t count, const tfm_bpe_train_options *options,
                                   tfm_tokenizer **tokenizer)
{
    static const char op[] = "tfm_tokenizer_train_bpe";
    if (!tokenizer)
        return tfm__fail(TFM_ERR_NULL, "%s: tokenizer is NULL", op);
    *tokenizer = NULL;
    tfm_bpe_train_options o = default_options;
    if (tfm__read_options(op, "tfm_bpe_train_options_init", options, &o, sizeof o,
                          offsetof(tfm_bpe_train_options, pad_piece)))
        return tfm_last_status();
    if (!lines && count)
        return tfm__fail(TFM_ERR_NULL, "%s: lines is NULL", op);
    if (check_user_symbols(op, &o))
        return tfm_last_status();
    if (count < 0)
        return tfm__fail(TFM_ERR_ARG, "%s: count %lld is negative", op, (long long)count);
    if (!(o.character_coverage > 0.0 && o.character_coverage <= 1.0) ||
        o.max_piece_length < 1 || o.max_piece_length > 64 || o.vocab_size < 4 ||
        (o.pad_piece != 0 && o.pad_piece != 1))
        return tfm__fail(TFM_ERR_ARG, "%s: options out of range (vocab_size %d >= 4, "
                         "character_coverage %g in (0, 1], max_piece_length %d in [1, 64], "
                         "pad_piece %d 0 or 1)", op, (int)o.vocab_size, o.character_coverage,
                         (int)o.max_piece_length, (int)o.pad_piece);
    trainer t = {.op = op};
    tfm__bytes normalized = {0};
    int32_t *merges = NULL;
    char_count *characters = NULL;
    const tfm__normalizer identity = {NULL, 0, NULL, 0, 1, 1, 1};
    for (int64_t i = 0; i < count; i++) {
        if (!lines[i] || (lengths && lengths[i] < 0)) {
            tfm__fail(!lines[i] ? TFM_ERR_NULL : TFM_ERR_ARG, "%s: line %lld is %s", op,
                      (long long)i, !lines[i] ? "NULL" : "of negative length");
            goto fail;
        }
        size_t len = lengths ? (size_t)lengths[i] : strlen(lines[i]);
        if (tfm__normalize(op, NULL, &identity, 0, lines[i], len, &normalized) ||
            count_line(&t, normalized.data, normalized.size))
            goto fail;
    }
    int32_t kept = 0;
    if (!(characters = keep_characters(&t, o.character_coverage, &kept)) || spell_words(&t))
        goto fail;
    int32_t fixed = 3 + o.pad_piece + o.n_user_symbols + (o.byte_fallback ? 256 : 0) + kept;
    int32_t wanted = o.vocab_size - fixed;
    if (wanted < 1) {
        tfm__fail(TFM_ERR_ARG, "%s: vocab_size %d leaves no room for merges beside %d "
                  "characters and %d special pieces", op, (int)o.vocab_size, (int)kept,
                  (int)(fixed - kept));
        goto fail;
    }
    if (!(merges = malloc((size_t)wanted * sizeof *merges))) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
        goto fail;
    }
    for (int64_t w = 0; w < t.word_total; w++)
        if (count_pairs(&t, w, 1, o.max_piece_length, -1))
            goto fail;
    if (queue_changed(&t))
        goto fail;
    /* Each merge makes a new piece, and no two pairs with counts make the
     * same piece: a piece's characters, where no merge has crossed their
     * ends, are cut the same way in every word (the merges are the same for
     * all words, each applied left to right), so one pair makes it. */
    int32_t made = 0;
    for (uint64_t pair; made < wanted && best_pair(&t, &pair); made++)
        if (merge_pair(&t, pair, o.max_piece_length, &merges[made]))
            goto fail;
    if (made < wanted) {
        tfm__fail(TFM_ERR_SIZE, "%s: the text has only %d merges for a vocab_size of %d "
                  "(%d at most)", op, (int)made, (int)o.vocab_size, (int)(fixed + made));
        goto fail;
    }
    *tokenizer = write_model(&t, merges, made, kept, &o);
fail:
    free(normalized.data);
    free(merges);
    free(characters);
    trainer_free(&t);
    return *tokenizer ? TFM_OK : tfm_last_status();
}
