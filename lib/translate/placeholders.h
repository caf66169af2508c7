/* The spans of a software message that must pass through a translation
 * unchanged (placeholders.c): printf directives as gettext's c-format
 * reads them, Python's %(name)s and {name} fields, shell variables,
 * XML/HTML tags and entities, and the caller's own literal strings. */
#ifndef TFM_TRANSLATE_PLACEHOLDERS_H
#define TFM_TRANSLATE_PLACEHOLDERS_H

#include <stdint.h>

#include "tfm/common.h"

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

#endif
