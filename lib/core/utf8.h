/* UTF-8 checks shared by names given to libtfm and the JSON files that
 * carry them. */
#ifndef TFM_CORE_UTF8_H
#define TFM_CORE_UTF8_H

#include <stddef.h>

/* Length of the well-formed UTF-8 sequence at s (avail >= 1 bytes left),
 * or 0 (overlongs, surrogates and code points past U+10FFFF are not). */
size_t tfm__utf8_sequence(const unsigned char *s, size_t avail);
/* 1 when s[0, len) is well-formed UTF-8. */
int tfm__utf8_valid(const char *s, size_t len);

#endif
