#include "core/options.h"

#include <stdint.h>
#include <string.h>

#include "core/error.h"
#include "tfm/common.h"

void tfm__init_options(void *out, uint32_t struct_size, const void *defaults,
                       size_t defaults_size)
{
    if (!out || struct_size < sizeof struct_size || struct_size > TFM__MAX_OPTIONS_SIZE)
        return;
    size_t known = struct_size < defaults_size ? struct_size : defaults_size;
    memcpy(out, defaults, known);
    memset((char *)out + known, 0, struct_size - known);
    memcpy(out, &struct_size, sizeof struct_size);
}

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
    if (size < min_size || given_size > TFM__MAX_OPTIONS_SIZE) {
        tfm__fail(TFM_ERR_ARG, "%s: options.struct_size %u is %s; call %s first", op,
                  (unsigned)given_size, size < min_size ? "too small" : "absurd", init);
        return -1;
    }
    for (size_t i = out_size; i < given_size; i++)
        if (((const unsigned char *)given)[i]) {
            tfm__fail(TFM_ERR_ARG, "%s: options of %u bytes set byte %zu, past the %zu this "
                      "libtfm %s knows: the program was built for a newer libtfm",
                      op, (unsigned)given_size, i, out_size, tfm_version_string());
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
