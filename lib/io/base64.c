#include "io/base64.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"

static const char alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *tfm__base64_encode(const char *op, const void *bytes, size_t size)
{
    const unsigned char *in = bytes;
    char *text = malloc((size + 2) / 3 * 4 + 1);
    if (!text) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %zu bytes of base64", op,
                  (size + 2) / 3 * 4 + 1);
        return NULL;
    }
    char *out = text;
    for (size_t i = 0; i < size; i += 3) {
        size_t left = size - i;
        uint32_t group = (uint32_t)in[i] << 16 | (left > 1 ? (uint32_t)in[i + 1] << 8 : 0) |
                         (left > 2 ? in[i + 2] : 0);
        *out++ = alphabet[group >> 18];
        *out++ = alphabet[(group >> 12) & 63];
        *out++ = left > 1 ? alphabet[(group >> 6) & 63] : '=';
        *out++ = left > 2 ? alphabet[group & 63] : '=';
    }
    *out = '\0';
    return text;
}

static int sextet(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

void *tfm__base64_decode(const char *ctx, const char *what, const char *text, size_t length,
                         size_t *size)
{
    if (length % 4) {
        tfm__fail(TFM_ERR_FORMAT, "%s: %s is not base64 (%zu characters, not a multiple of "
                  "4)", ctx, what, length);
        return NULL;
    }
    unsigned char *bytes = malloc(length / 4 * 3 + 1);
    if (!bytes) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for %s (%zu bytes)", ctx, what,
                  length / 4 * 3 + 1);
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < length; i += 4) {
        int pads = (text[i + 3] == '=') + (text[i + 2] == '=');
        int last = i + 4 == length;
        uint32_t group = 0;
        for (int k = 0; k < 4; k++) {
            int v = k >= 4 - pads ? 0 : sextet(text[i + k]);
            if (v < 0 || (pads && !last) || (pads == 1 && text[i + 2] == '=')) {
                free(bytes);
                tfm__fail(TFM_ERR_FORMAT, "%s: %s is not base64 (character %zu)", ctx, what,
                          i + (size_t)k);
                return NULL;
            }
            group = group << 6 | (uint32_t)v;
        }
        bytes[n++] = (unsigned char)(group >> 16);
        if (pads < 2)
            bytes[n++] = (unsigned char)(group >> 8);
        if (pads < 1)
            bytes[n++] = (unsigned char)group;
    }
    *size = n;
    return bytes;
}
