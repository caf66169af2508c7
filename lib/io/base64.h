/* Base64 (RFC 4648's alphabet, with padding): bytes carried inside text,
 * such as a tokenizer inside a safetensors file's metadata strings. */
#ifndef TFM_IO_BASE64_H
#define TFM_IO_BASE64_H

#include <stddef.h>

/* The text of size bytes, NUL-terminated, malloc'd; NULL with TFM_ERR_NOMEM
 * (op names the public call). */
char *tfm__base64_encode(const char *op, const void *bytes, size_t size);

/* The bytes text spells, malloc'd (*size of them; at least one byte is
 * allocated); NULL with TFM_ERR_FORMAT "ctx: what is not base64 (...)" for
 * a character outside the alphabet, a length not a multiple of 4 or
 * misplaced padding, or TFM_ERR_NOMEM. */
void *tfm__base64_decode(const char *ctx, const char *what, const char *text, size_t length,
                         size_t *size);

#endif
