/* What the tokenizers share: UTF-8 read as SentencePiece reads it, growable
 * buffers and the byte trie over piece strings. */
#include "text/text.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static int is_trail(unsigned char c) { return (c & 0xC0) == 0x80; }

static int is_scalar(uint32_t c) { return c < 0xD800 || (c >= 0xE000 && c <= 0x10FFFF); }

uint32_t tfm__utf8_decode(const char *text, size_t len, size_t *used)
{
    const unsigned char *s = (const unsigned char *)text;
    *used = 1;
    if (s[0] < 0x80)
        return s[0];
    if (len >= 2 && (s[0] & 0xE0) == 0xC0) {
        uint32_t c = (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
        if (is_trail(s[1]) && c >= 0x80) {
            *used = 2;
            return c;
        }
    } else if (len >= 3 && (s[0] & 0xF0) == 0xE0) {
        uint32_t c = (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        if (is_trail(s[1]) && is_trail(s[2]) && c >= 0x800 && is_scalar(c)) {
            *used = 3;
            return c;
        }
    } else if (len >= 4 && (s[0] & 0xF8) == 0xF0) {
        uint32_t c = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 |
                     (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
        if (is_trail(s[1]) && is_trail(s[2]) && is_trail(s[3]) && c >= 0x10000 && is_scalar(c)) {
            *used = 4;
            return c;
        }
    }
    return 0xFFFD;
}

int tfm__is_python_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 ||
           c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

int tfm__utf8_valid_prefix(const char *s, size_t len, size_t *used)
{
    /* U+FFFD itself is three bytes; the error marker takes one. */
    return tfm__utf8_decode(s, len, used) != 0xFFFD || *used == 3;
}

size_t tfm__utf8_encode(uint32_t c, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (c < 0x80) {
        o[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (unsigned char)(0xC0 | c >> 6);
        o[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | c >> 12);
        o[1] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | c >> 18);
    o[1] = (unsigned char)(0x80 | (c >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

int tfm__grow(const char *op, void **data, size_t element, size_t size_now, size_t *capacity,
                size_t need)
{
    if (need <= *capacity - size_now)
        return 0;
    size_t wanted = *capacity ? *capacity : 64;
    while (wanted - size_now < need) {
        if (wanted > SIZE_MAX / 2 / element) {
            tfm__fail(TFM_ERR_NOMEM, "%s: out of memory", op);
            return -1;
        }
        wanted *= 2;
    }
    void *bigger = realloc(*data, wanted * element);
    if (!bigger) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %zu bytes", op, wanted * element);
        return -1;
    }
    *data = bigger;
    *capacity = wanted;
    return 0;
}

int tfm__bytes_append(const char *op, tfm__bytes *b, const void *data, size_t size)
{
    void *buffer = b->data;
    if (tfm__grow(op, &buffer, 1, b->size, &b->capacity, size + 1))
        return -1;
    b->data = buffer;
    if (size)
        memcpy(b->data + b->size, data, size);
    b->size += size;
    b->data[b->size] = 0; /* text stays NUL-terminated */
    return 0;
}

int tfm__ids_push(const char *op, tfm__ids *ids, int32_t id)
{
    void *buffer = ids->data;
    size_t capacity = (size_t)ids->capacity;
    if (tfm__grow(op, &buffer, sizeof *ids->data, (size_t)ids->size, &capacity, 1))
        return -1;
    ids->data = buffer;
    ids->capacity = (int64_t)capacity;
    ids->data[ids->size++] = id;
    return 0;
}

/* ---- pair heap ---- */

static int pair_before(const tfm__pair *a, const tfm__pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

int tfm__pair_heap_push(const char *op, tfm__pair_heap *h, tfm__pair pair)
{
    void *buffer = h->data;
    if (tfm__grow(op, &buffer, sizeof *h->data, h->size, &h->capacity, 1))
        return -1;
    h->data = buffer;
    size_t i = h->size++;
    while (i > 0 && pair_before(&pair, &h->data[(i - 1) / 2])) {
        h->data[i] = h->data[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->data[i] = pair;
    return 0;
}

tfm__pair tfm__pair_heap_pop(tfm__pair_heap *h)
{
    tfm__pair top = h->data[0], last = h->data[--h->size];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->size)
            break;
        if (child + 1 < h->size && pair_before(&h->data[child + 1], &h->data[child]))
            child++;
        if (!pair_before(&h->data[child], &last))
            break;
        h->data[i] = h->data[child];
        i = child;
    }
    if (h->size)
        h->data[i] = last;
    return top;
}

/* ---- trie ---- */

static size_t slot_of(uint64_t key, size_t slots)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (slots - 1);
}

int32_t tfm__trie_child(const tfm__trie *trie, int32_t node, unsigned char byte)
{
    if (!trie->slots)
        return -1;
    uint64_t key = ((uint64_t)node << 8 | byte) + 1;
    for (size_t i = slot_of(key, trie->slots);; i = (i + 1) & (trie->slots - 1)) {
        if (trie->keys[i] == key)
            return trie->children[i];
        if (!trie->keys[i])
            return -1;
    }
}

static void put(uint64_t *keys, int32_t *children, size_t slots, uint64_t key, int32_t child)
{
    size_t i = slot_of(key, slots);
    while (keys[i])
        i = (i + 1) & (slots - 1);
    keys[i] = key;
    children[i] = child;
}

/* Room for one more edge: the table is kept at most half full. */
static int reserve_edge(const char *op, tfm__trie *trie)
{
    if (2 * (trie->used + 1) <= trie->slots)
        return 0;
    size_t slots = trie->slots ? 2 * trie->slots : 1024;
    uint64_t *keys = calloc(slots, sizeof *keys);
    int32_t *children = malloc(slots * sizeof *children);
    if (!keys || !children) {
        free(keys);
        free(children);
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the piece table", op);
        return -1;
    }
    for (size_t i = 0; i < trie->slots; i++)
        if (trie->keys[i])
            put(keys, children, slots, trie->keys[i], trie->children[i]);
    free(trie->keys);
    free(trie->children);
    trie->keys = keys;
    trie->children = children;
    trie->slots = slots;
    return 0;
}

static int32_t new_node(const char *op, tfm__trie *trie)
{
    if (trie->nodes == trie->node_capacity) {
        if (trie->node_capacity > INT32_MAX / 2) {
            tfm__fail(TFM_ERR_SIZE, "%s: too many piece bytes", op);
            return -1;
        }
        int32_t capacity = trie->node_capacity ? 2 * trie->node_capacity : 256;
        void *bigger = realloc(trie->ids, (size_t)capacity * sizeof *trie->ids);
        if (!bigger) {
            tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the piece table", op);
            return -1;
        }
        trie->ids = bigger;
        trie->node_capacity = capacity;
    }
    trie->ids[trie->nodes][0] = trie->ids[trie->nodes][1] = -1;
    return trie->nodes++;
}

int tfm__trie_add(const char *op, tfm__trie *trie, const char *piece, size_t len, int role,
                  int32_t id)
{
    if (!trie->nodes && new_node(op, trie) < 0)
        return -1;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char byte = (unsigned char)piece[i];
        int32_t child = tfm__trie_child(trie, node, byte);
        if (child < 0) {
            if (reserve_edge(op, trie) || (child = new_node(op, trie)) < 0)
                return -1;
            put(trie->keys, trie->children, trie->slots, ((uint64_t)node << 8 | byte) + 1, child);
            trie->used++;
        }
        node = child;
    }
    if (trie->ids[node][role] >= 0) {
        tfm__fail(TFM_ERR_FORMAT, "%s: piece %d \"%.*s\" is already piece %d", op, (int)id,
                  (int)(len > 64 ? 64 : len), piece, (int)trie->ids[node][role]);
        return -1;
    }
    trie->ids[node][role] = id;
    return 0;
}

int32_t tfm__trie_find(const tfm__trie *trie, const char *piece, size_t len)
{
    if (!trie->nodes)
        return -1;
    int32_t node = 0;
    for (size_t i = 0; i < len && node >= 0; i++)
        node = tfm__trie_child(trie, node, (unsigned char)piece[i]);
    return node;
}

void tfm__trie_free(tfm__trie *trie)
{
    free(trie->ids);
    free(trie->keys);
    free(trie->children);
    memset(trie, 0, sizeof *trie);
}
