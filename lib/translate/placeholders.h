/* The spans of a software message that must pass through a translation
 * unchanged (placeholders.c): printf directives as gettext's c-format
 * reads them, Python's %(name)s and {name} fields, shell variables,
 * XML/HTML tags and entities, and the caller's own literal strings. */
#ifndef TFM_TRANSLATE_PLACEHOLDERS_H
#define TFM_TRANSLATE_PLACEHOLDERS_H

#include <stdint.h>

#include "decode/constraints.h"
#include "translate/glossary.h"
#include "tfm/text.h"
#include "tfm/translate.h"

typedef enum tfm__span_kind {
    TFM__SPAN_PRINTF,          /* %s, %-10.3lf, %'d, %*d: unnumbered, kept in order */
    TFM__SPAN_PRINTF_NUMBERED, /* %2$s, %1$*2$d: may move */
    TFM__SPAN_PERCENT,         /* %%: a literal percent sign */
    TFM__SPAN_PYTHON_NAMED,    /* %(name)s */
    TFM__SPAN_BRACE,           /* {}, {0}, {name}, {name!r:>10} */
    TFM__SPAN_SHELL,           /* $VAR, ${VAR} */
    TFM__SPAN_TAG,             /* <b>, </b>, <a href="...">, <br/> */
    TFM__SPAN_ENTITY,          /* &amp;, &#160;, &#xA0; */
    TFM__SPAN_LITERAL          /* one of the caller's strings */
} tfm__span_kind;

typedef struct tfm__span {
    int64_t start, length;
    tfm__span_kind kind;
} tfm__span;

/* The spans of text[0, length), left to right and never overlapping, into
 * *spans (malloc'd; NULL when none), *count of them. At each position the
 * longest of the caller's literals[0, n_literals) (NUL-terminated, not
 * empty) wins, then the rules in the order of tfm__span_kind. TFM_ERR_NOMEM
 * with the error set (op names the call). */
tfm_status tfm__placeholders_find(const char *op, const char *text, int64_t length,
                                  const char *const *literals, int64_t n_literals,
                                  tfm__span **spans, int64_t *count);

/* Whether the span must keep its place among the text's other such spans
 * (unnumbered printf directives: the arguments come in their order). */
int tfm__span_ordered(const tfm__span *span);

/* A source with its spans as placeholders (a model whose tokenizers hold
 * the placeholder pieces) and its glossary's terms: what to encode, what
 * each placeholder stands for, and the constraints that make the
 * decoding write each placeholder exactly as often as the encoded source
 * holds it (the unnumbered printf directives in their order; those the
 * source lacks never) and each term found in the source at least once. */
typedef struct tfm__masked {
    char *text;   /* the source to encode; NULL: the text as it is (no spans) */
    char *spans;  /* the spans' texts, each NUL-terminated */
    const char *span[TFM_PLACEHOLDERS];
    int32_t n;    /* placeholders used, at most TFM_PLACEHOLDERS */
    int32_t placeholders; /* the phrases of the placeholders: TFM_PLACEHOLDERS or 0 */
    int32_t source_ids[TFM_PLACEHOLDERS], target_ids[TFM_PLACEHOLDERS];
    /* the placeholders', then the terms'; term[k]: phrase
     * placeholders + k's glossary term */
    tfm__phrase *phrases;
    int32_t *term, n_terms;
    int32_t order[TFM_PLACEHOLDERS];
    tfm__constraints constraints;
    /* the source's one accelerator mark ('_' of GTK's "_File", '&' of
     * Qt's "&File"; 0: none, or more than one) and the character it marks */
    char accelerator, accelerated;
} tfm__masked;

/* What placeholders need of a model's tokenizers: the pieces' ids on
 * each side, and the target ids whose text holds a '%' (which, written
 * by the model outside a placeholder, would make a directive). */
typedef struct tfm__placeholder_vocab {
    int32_t source_ids[TFM_PLACEHOLDERS], target_ids[TFM_PLACEHOLDERS];
    int32_t *percent;
    int32_t n_percent;
} tfm__placeholder_vocab;

/* The vocabulary of the tokenizers source and target into *out (malloc'd;
 * free with tfm__placeholder_vocab_free); NULL when they lack a piece.
 * TFM_ERR_NOMEM. */
tfm_status tfm__placeholder_vocab_make(const char *op, const tfm_tokenizer *source,
                                       const tfm_tokenizer *target,
                                       tfm__placeholder_vocab **out);
void tfm__placeholder_vocab_free(tfm__placeholder_vocab *v);

/* text[0, length) masked for vocabulary v (NULL: no placeholders; the
 * caller's literals[0, n_literals) beside the rules) with the terms of
 * glossary g (NULL: none) it holds, into *out (malloc'd;
 * free with tfm__masked_free; NULL when neither applies). A text with
 * more spans than TFM_PLACEHOLDERS is kept whole (no spans). Unless the
 * text holds a '%' outside its spans, the target ids that write one are
 * banned. TFM_ERR_NOMEM. */
tfm_status tfm__masked_make(const char *op, const char *text, int64_t length,
                            const tfm__placeholder_vocab *v, const char *const *literals,
                            int64_t n_literals, const tfm__glossary *g, tfm__masked **out);
/* The glossary terms a hypothesis' generated tokens g[0, n) lack, into
 * terms (room for m->n_terms), their count. */
int32_t tfm__masked_unplaced(const tfm__masked *m, const int32_t *g, int64_t n,
                             int32_t *terms);
/* Each placeholder's count as the encoded source ids[0, n) hold it (a
 * source cut short may lose some) becomes its phrase's min and max. */
void tfm__masked_count(tfm__masked *m, const int32_t *ids, int64_t n);
/* *text (malloc'd, *length bytes) with each placeholder's text replaced
 * by its span, in place of the old (freed), and as many accelerator marks
 * as the source had (msgfmt --check-accelerators): a missing one goes
 * before the first letter the source's marked (any case), else before the
 * first letter; marks past the first are dropped. TFM_ERR_NOMEM. */
tfm_status tfm__masked_restore(const char *op, const tfm__masked *m, char **text,
                               int64_t *length);
void tfm__masked_free(tfm__masked *m);

#endif
