/* A glossary's terms: found in a source by a word-bounded, ASCII
 * case-insensitive match; their target terms as the target tokenizer
 * encodes them alone (a word's first piece, "\xe2\x96\x81fichier"). */
#include "translate/glossary.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

void tfm__glossary_free(tfm__glossary *g)
{
    if (!g)
        return;
    for (int32_t i = 0; g->source && i < g->n; i++)
        free(g->source[i]);
    free(g->source);
    free(g->ids);
    free(g->offsets);
    free(g);
}

tfm_status tfm__glossary_make(const char *op, const tfm_tokenizer *target,
                              const char *const *terms, int32_t n, tfm__glossary **out)
{
    *out = NULL;
    if (n <= 0)
        return TFM_OK;
    if (!terms)
        return tfm__fail(TFM_ERR_NULL, "%s: options.glossary is NULL with n_glossary %d", op,
                         (int)n);
    for (int32_t i = 0; i < 2 * n; i++)
        if (!terms[i] || !terms[i][0])
            return tfm__fail(terms[i] ? TFM_ERR_ARG : TFM_ERR_NULL,
                             "%s: options.glossary's term %d's %s text is %s", op, (int)(i / 2),
                             i % 2 ? "target" : "source", terms[i] ? "empty" : "NULL");
    tfm__glossary *g = calloc(1, sizeof *g);
    int64_t total = 0;
    tfm_status st = TFM_OK;
    uint64_t mark = tfm__error_mark(); /* the tokenizer's errors, under op */
    if (!g || !(g->source = calloc((size_t)n, sizeof *g->source)) ||
        !(g->offsets = calloc((size_t)n + 1, sizeof *g->offsets)))
        st = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the glossary", op);
    else
        g->n = n;
    for (int32_t i = 0; st == TFM_OK && i < n; i++) {
        const char *term = terms[2 * i + 1];
        int64_t count = 0;
        st = tfm_tokenizer_encode(target, term, (int64_t)strlen(term), NULL, 0, &count);
        if (st == TFM_ERR_SIZE || (st == TFM_OK && count == 0)) {
            st = count > 0 ? TFM_OK
                           : tfm__fail(TFM_ERR_ARG, "%s: options.glossary's term %d's target "
                                       "text \"%s\" has no tokens", op, (int)i, term);
            total += count;
            g->offsets[i + 1] = (int32_t)total;
        }
        if (st == TFM_OK && !(g->source[i] = strdup(terms[2 * i])))
            st = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the glossary", op);
    }
    if (st == TFM_OK && !(g->ids = malloc((size_t)total * sizeof *g->ids)))
        st = tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for the glossary", op);
    for (int32_t i = 0; st == TFM_OK && i < n; i++) {
        const char *term = terms[2 * i + 1];
        int64_t count = 0;
        st = tfm_tokenizer_encode(target, term, (int64_t)strlen(term), g->ids + g->offsets[i],
                                  g->offsets[i + 1] - g->offsets[i], &count);
    }
    if (st != TFM_OK) {
        tfm__fail_within(op, mark);
        tfm__glossary_free(g);
        return st;
    }
    *out = g;
    return TFM_OK;
}

/* Whether c is part of a word: a letter, a digit, or a multibyte
 * character's byte. */
static int word_byte(char c)
{
    return isalnum((unsigned char)c) || (unsigned char)c >= 0x80;
}

int tfm__glossary_in(const tfm__glossary *g, int32_t i, const char *text)
{
    const char *term = g->source[i];
    size_t n = strlen(term);
    for (const char *at = text; *at; at++) {
        if (at > text && word_byte(at[-1]) && word_byte(term[0]))
            continue;
        size_t k = 0;
        while (k < n && at[k] && tolower((unsigned char)at[k]) == tolower((unsigned char)term[k]))
            k++;
        if (k == n && !(word_byte(at[n]) && word_byte(term[n - 1])))
            return 1;
    }
    return 0;
}
