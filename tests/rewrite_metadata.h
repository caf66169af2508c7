/* Files forged from good ones: a safetensors file written again with one
 * metadata value changed, as an attacker (or a careless tool) would. */
#ifndef TFM_TESTS_REWRITE_METADATA_H
#define TFM_TESTS_REWRITE_METADATA_H

#include <check.h>
#include <string.h>

#include <tfm/tfm.h>

/* Rewrites src into dst with its metadata key set to value (NULL:
 * dropped); a key src lacks stays absent. */
static inline void rewrite_metadata(const char *src, const char *dst, const char *key,
                                    const char *value)
{
    tfm_safetensors *file = tfm_safetensors_open(src);
    ck_assert_ptr_nonnull(file);
    int64_t count = tfm_safetensors_count(file), pairs = tfm_safetensors_metadata_count(file);
    const char *names[256], *keys[64], *values[64];
    tfm_tensor *tensors[256];
    ck_assert_int_le(count, 256);
    ck_assert_int_le(pairs, 64);
    for (int64_t i = 0; i < count; i++) {
        names[i] = tfm_safetensors_name(file, i);
        tensors[i] = tfm_safetensors_get(file, names[i]);
    }
    int64_t kept = 0;
    for (int64_t i = 0; i < pairs; i++) {
        const char *k = tfm_safetensors_metadata_key(file, i);
        if (strcmp(k, key) == 0 && !value)
            continue;
        keys[kept] = k;
        values[kept++] = strcmp(k, key) == 0 ? value : tfm_safetensors_metadata_get(file, k);
    }
    ck_assert_int_eq(tfm_safetensors_write_with_metadata(dst, count, names,
                                                         (const tfm_tensor *const *)tensors,
                                                         kept, keys, values),
                     TFM_OK);
    for (int64_t i = 0; i < count; i++)
        tfm_tensor_free(tensors[i]);
    tfm_safetensors_close(file);
}

#endif
