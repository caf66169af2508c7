/* NumPy broadcasting of two tensors, padded to four axes so kernels can walk
 * any pair with four nested loops. */
#ifndef TFM_CORE_BROADCAST_H
#define TFM_CORE_BROADCAST_H

#include "core/tensor.h"

typedef struct tfm_broadcast {
    int32_t ndim;                        /* of the result */
    int64_t shape[TFM_MAX_DIMS];         /* of the result, left-padded with 1 */
    int64_t stride_a[TFM_MAX_DIMS];      /* element strides, 0 where broadcast */
    int64_t stride_b[TFM_MAX_DIMS];
} tfm_broadcast;

/* 0, or -1 with TFM_ERR_SHAPE set when the shapes do not broadcast. */
int tfm__broadcast(const char *op, const tfm_tensor *a, const tfm_tensor *b,
                   tfm_broadcast *bc);

/* The result's shape, unpadded (bc->ndim values). */
const int64_t *tfm__broadcast_shape(const tfm_broadcast *bc);

/* Walks the broadcast result in order (i) with the matching element offsets
 * into a (ia) and b (ib). */
#define FOR_EACH_BROADCAST(bc, i, ia, ib, BODY)                                   \
    do {                                                                          \
        int64_t i = 0;                                                            \
        for (int64_t d0 = 0; d0 < (bc)->shape[0]; d0++)                           \
            for (int64_t d1 = 0; d1 < (bc)->shape[1]; d1++)                       \
                for (int64_t d2 = 0; d2 < (bc)->shape[2]; d2++)                   \
                    for (int64_t d3 = 0; d3 < (bc)->shape[3]; d3++, i++) {        \
                        int64_t ia = d0 * (bc)->stride_a[0] + d1 * (bc)->stride_a[1] + \
                                     d2 * (bc)->stride_a[2] + d3 * (bc)->stride_a[3]; \
                        int64_t ib = d0 * (bc)->stride_b[0] + d1 * (bc)->stride_b[1] + \
                                     d2 * (bc)->stride_b[2] + d3 * (bc)->stride_b[3]; \
                        BODY;                                                     \
                    }                                                             \
    } while (0)

#endif
