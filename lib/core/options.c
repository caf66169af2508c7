#include "core/options.h"

#include <stdint.h>
#include <string.h>

#include "core/error.h"

int tfm__read_options(const char *op, const char *init, const void *given, void *out,
                      size_t out_size, size_t min_size)
{
    if (!given) {
        tfm__fail(TFM_ERR_NULL, "%s: options is NULL", op);
        return -1;
    }
    uint32_t given_size;
    memcpy(&given_size, given, sizeof given_size);
    size_t size = given_size < out_size ? given_size : out_size;
    if (size < min_size) {
        tfm__fail(TFM_ERR_ARG, "%s: options.struct_size %u is too small; call %s first", op,
                  (unsigned)given_size, init);
        return -1;
    }
    memcpy(out, given, size);
    uint32_t own_size = (uint32_t)out_size;
    memcpy(out, &own_size, sizeof own_size);
    return 0;
}

int tfm__write_options(const char *op, const char *init, const void *src, void *out,
                       size_t src_size, size_t min_size)
{
    uint32_t out_size;
    memcpy(&out_size, out, sizeof out_size);
    if (out_size < min_size) {
        tfm__fail(TFM_ERR_ARG, "%s: options.struct_size %u is too small; call %s first", op,
                  (unsigned)out_size, init);
        return -1;
    }
    size_t size = out_size < src_size ? out_size : src_size;
    memcpy((char *)out + sizeof out_size, (const char *)src + sizeof out_size,
           size - sizeof out_size);
    return 0;
}
