/* Added tokens: pieces that stand whole where the text spells them, as
 * transformers' slow tokenizers treat their special and added tokens
 * (PreTrainedTokenizer.tokenize, tokenization_utils.py): the text is cut
 * at each one (leftmost, then longest, as its tokens_trie.split), an
 * AddedToken's rstrip/lstrip take the whitespace after/before it from the
 * text beside it, single_word glues it to a neighbour that is no word
 * boundary (so it is read as text), and every other stretch of text is
 * encoded by the tokenizer's model on its own. A tokenizer with added
 * tokens saves as a container around its own bytes: "TFM-ADDT", those
 * bytes, then {"added_tokens": [[id, lstrip, rstrip, single_word], ...]}. */
#include "text/text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

static const char magic[8] = {'T', 'F', 'M', '-', 'A', 'D', 'D', 'T'};

/* Adds or (same text) replaces one added token; -1 on failure. */
static int add_one(const char *op, tfm_tokenizer *tok, int32_t id, int lstrip, int rstrip,
                   int single_word)
{
    const tfm__piece *p = &tok->pieces[id];
    if (!p->length) {
        tfm__fail(TFM_ERR_ARG, "%s: piece %d is empty and cannot stand whole in text", op,
                  (int)id);
        return -1;
    }
    tfm__added token = {id, (uint8_t)lstrip, (uint8_t)rstrip, (uint8_t)single_word};
    int32_t node = tfm__trie_find(&tok->added_trie, p->text, p->length);
    if (node >= 0 && tok->added_trie.ids[node][TFM__TRIE_MATCHED] >= 0) {
        tok->added[tok->added_trie.ids[node][TFM__TRIE_MATCHED]] = token;
        return 0;
    }
    if (tfm__grow(op, (void **)&tok->added, sizeof *tok->added, (size_t)tok->n_added,
                  &tok->added_capacity, 1) ||
        tfm__trie_add(op, &tok->added_trie, p->text, p->length, TFM__TRIE_MATCHED,
                      tok->n_added))
        return -1;
    tok->added[tok->n_added++] = token;
    return 0;
}

/* tok->file becomes the container of its own bytes and its added tokens. */
static int repack(const char *op, tfm_tokenizer *tok)
{
    tfm__bytes list = {0};
    static const char head[] = "{\"added_tokens\": [";
    int failed = tfm__bytes_append(op, &list, head, sizeof head - 1);
    for (int32_t i = 0; i < tok->n_added && !failed; i++) {
        char entry[64];
        const tfm__added *a = &tok->added[i];
        int n = snprintf(entry, sizeof entry, "%s[%d, %d, %d, %d]", i ? ", " : "", (int)a->id,
                         a->lstrip, a->rstrip, a->single_word);
        failed = tfm__bytes_append(op, &list, entry, (size_t)n);
    }
    failed = failed || tfm__bytes_append(op, &list, "]}", 2);
    char *inner = tok->file;
    const char *parts[2] = {inner, list.data};
    const size_t sizes[2] = {tok->file_size, list.size};
    failed = failed || tfm__parts_pack(op, magic, 2, parts, sizes, tok);
    if (!failed)
        free(inner);
    free(list.data);
    return failed ? -1 : 0;
}

int tfm__added_set(const char *op, tfm_tokenizer *tok, const tfm__added_token *tokens,
                   int32_t count)
{
    if (tfm__added_is_container(tok->file, tok->file_size)) {
        tfm__fail(TFM_ERR_STATE, "%s: the tokenizer already has its added tokens", op);
        return -1;
    }
    for (int32_t i = 0; i < count; i++) {
        const tfm__added_token *t = &tokens[i];
        int32_t id = tfm__piece_id(tok, t->content, strlen(t->content));
        if (id < 0 || (t->id >= 0 && id != t->id)) {
            if (id < 0)
                tfm__fail(TFM_ERR_FORMAT, "%s: added token \"%.64s\" is not a piece of the "
                          "tokenizer (libtfm cannot add pieces)", op, t->content);
            else
                tfm__fail(TFM_ERR_FORMAT, "%s: added token \"%.64s\" has id %d, but the "
                          "tokenizer's piece is id %d", op, t->content, (int)t->id, (int)id);
            return -1;
        }
        if (add_one(op, tok, id, t->lstrip, t->rstrip, t->single_word))
            return -1;
    }
    return tok->n_added ? repack(op, tok) : 0;
}

int tfm__added_is_container(const char *bytes, size_t size)
{
    return tfm__parts_is_container(magic, bytes, size);
}

/* {"added_tokens": [[id, lstrip, rstrip, single_word], ...]} onto tok. */
static int read_list(const char *op, tfm_tokenizer *tok, const char *text, size_t size)
{
    tfm__vocab list = {0};
    int failed = tfm__vocab_parse(op, &list, text, size);
    const tfm__json *doc = &list.doc;
    const tfm__json_node *tokens =
        failed || doc->nodes[0].type != TFM__JSON_OBJECT
            ? NULL : tfm__json_member(doc, &doc->nodes[0], "added_tokens");
    failed = failed || !tokens || tokens->type != TFM__JSON_ARRAY || doc->nodes[0].count != 1;
    for (uint32_t i = tokens ? (uint32_t)(tokens - doc->nodes) + 1 : 0;
         !failed && i < tokens->next; i = doc->nodes[i].next) {
        const tfm__json_node *entry = &doc->nodes[i];
        int64_t v[4];
        failed = entry->type != TFM__JSON_ARRAY || entry->count != 4;
        for (int k = 0; k < 4 && !failed; k++) {
            const tfm__json_node *n = &doc->nodes[i + 1 + (uint32_t)k];
            v[k] = n->integer;
            failed = n->type != TFM__JSON_NUMBER || !n->is_integer || v[k] < 0 ||
                     v[k] > (k ? 1 : (int64_t)tok->size - 1);
        }
        failed = failed || add_one(op, tok, (int32_t)v[0], (int)v[1], (int)v[2], (int)v[3]);
    }
    if (failed && tfm_last_status() != TFM_ERR_NOMEM)
        tfm__fail(TFM_ERR_FORMAT, "%s: the added tokens are not {\"added_tokens\": [[id, "
                  "lstrip, rstrip, single_word], ...]} with ids in [0, %d) and flags 0 or 1",
                  op, (int)tok->size);
    tfm__vocab_free(&list);
    return failed ? -1 : 0;
}

tfm_tokenizer *tfm__added_from_bytes(const char *op, const char *bytes, size_t size)
{
    const char *parts[2];
    size_t sizes[2];
    if (tfm__parts_unpack(op, "a tokenizer with added tokens", bytes, size, 2, 2, parts,
                          sizes) < 0)
        return NULL;
    if (tfm__added_is_container(parts[0], sizes[0])) {
        tfm__fail(TFM_ERR_FORMAT, "%s: a tokenizer with added tokens holds another", op);
        return NULL;
    }
    tfm_tokenizer *tok = tfm__tokenizer_parse(op, parts[0], sizes[0]);
    if (tok && (read_list(op, tok, parts[1], sizes[1]) || repack(op, tok))) {
        tfm__tokenizer_free(tok);
        return NULL;
    }
    return tok;
}

/* ---- encoding ---- */

/* A stretch of the text, or of a copy when single_word glued two. */
typedef struct segment {
    const char *s;
    size_t n;
    char *owned;
} segment;

/* The added token s[0, n) spells exactly, or NULL. */
static const tfm__added *whole(const tfm_tokenizer *tok, const char *s, size_t n)
{
    int32_t node = n ? tfm__trie_find(&tok->added_trie, s, n) : -1;
    int32_t k = node >= 0 ? tok->added_trie.ids[node][TFM__TRIE_MATCHED] : -1;
    return k >= 0 ? &tok->added[k] : NULL;
}

/* The length of the longest added token at s[0, n), 0 for none. */
static size_t match_at(const tfm_tokenizer *tok, const char *s, size_t n)
{
    size_t longest = 0;
    int32_t node = 0;
    for (size_t i = 0; i < n && (node = tfm__trie_child(&tok->added_trie, node,
                                                       (unsigned char)s[i])) >= 0; i++)
        if (tok->added_trie.ids[node][TFM__TRIE_MATCHED] >= 0)
            longest = i + 1;
    return longest;
}

/* str.lstrip() and str.rstrip(): Python's whitespace off one end. */
static void strip_left(segment *g)
{
    size_t used;
    while (g->n && tfm__is_python_space(tfm__utf8_decode(g->s, g->n, &used))) {
        g->s += used;
        g->n -= used;
    }
}

static void strip_right(segment *g)
{
    size_t end = 0, used;
    for (size_t at = 0; at < g->n; at += used)
        if (!tfm__is_python_space(tfm__utf8_decode(g->s + at, g->n - at, &used)))
            end = at + used;
    g->n = end;
}

/* *into becomes a + b, a copy. */
static int glue(const char *op, segment *into, segment a, segment b)
{
    char *s = malloc(a.n + b.n ? a.n + b.n : 1);
    if (!s) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %zu bytes of text", op, a.n + b.n);
        return -1;
    }
    memcpy(s, a.s, a.n);
    memcpy(s + a.n, b.s, b.n);
    free(into->owned);
    *into = (segment){s, a.n + b.n, s};
    return 0;
}

int tfm__added_encode(const char *op, const tfm_tokenizer *tok, const char *text,
                      size_t length, tfm__ids *out)
{
    segment *g = NULL;
    size_t count = 0, capacity = 0, from = 0;
    int failed = 0;
    /* the cut: text, token, text ... (no empty stretch) */
    for (size_t at = 0; at <= length && !failed;) {
        size_t n = at < length ? match_at(tok, text + at, length - at) : 0;
        if (at < length && !n) {
            at++;
            continue;
        }
        failed = tfm__grow(op, (void **)&g, sizeof *g, count, &capacity, 2);
        if (!failed && at > from)
            g[count++] = (segment){text + from, at - from, NULL};
        if (!failed && n)
            g[count++] = (segment){text + at, n, NULL};
        from = at += n ? n : 1;
    }
    /* each token, as the text then reads, takes its neighbours' spaces or
     * joins one */
    for (size_t i = 0; i < count && !failed; i++) {
        const tfm__added *a = whole(tok, g[i].s, g[i].n);
        if (!a)
            continue;
        segment *left = i > 0 && g[i - 1].n ? &g[i - 1] : NULL;
        segment *right = i + 1 < count && g[i + 1].n ? &g[i + 1] : NULL;
        if (a->rstrip && right)
            strip_left(right);
        if (a->lstrip && left)
            strip_right(left);
        if (a->single_word && left && left->n && left->s[left->n - 1] != ' ') {
            failed = glue(op, left, *left, g[i]);
            g[i].n = 0;
        } else if (a->single_word && right && right->n && right->s[0] != ' ') {
            failed = glue(op, right, g[i], *right);
            g[i].n = 0;
        }
    }
    for (size_t i = 0; i < count && !failed; i++) {
        const tfm__added *a = whole(tok, g[i].s, g[i].n);
        failed = a ? tfm__ids_push(op, out, a->id)
                   : g[i].n && tfm__tokenizer_encode_text(op, tok, g[i].s, g[i].n, out);
    }
    for (size_t i = 0; i < count; i++)
        free(g[i].owned);
    free(g);
    return failed ? -1 : 0;
}
