/** @file
 * libtfm reverse-mode autograd tape.
 *
 * Every op takes a tape. The tape owns the memory of the tensors ops return
 * (an arena that grows to the step's high-water mark and is rewound by
 * tfm_tape_reset, so a steady-state step allocates nothing) and, while
 * recording, the record of each op whose inputs require a gradient.
 *
 * A tape-owned tensor lives until the next tfm_tape_reset (or
 * tfm_tape_free). Kept past the reset, its handle is stale, and the
 * guarantee is: every call given it (ops, layers, the model, decoding,
 * accessors, backward) returns TFM_ERR_STATE (or NULL / -1 with that
 * status) with a message naming the call and the reset, when it is used
 * within 16 resets of its making, whatever the steps in between made. It
 * never crashes the caller before tfm_tape_free: the tensor's header is
 * kept apart from the values and is never freed nor overwritten by data
 * until then. Used later than 16 resets on, the header may have been
 * reused and the handle then names a newer tensor of the tape. After
 * tfm_tape_free a handle is dangling, as any freed memory. To keep a
 * result, copy it with tfm_tensor_clone; masks can be made without a tape
 * (nn.h). A tape-owned tensor may be used on another tape as a constant;
 * if it requires grad and that tape records, the op is refused
 * (TFM_ERR_STATE), as its gradient cannot cross tapes.
 *
 * Threads: a tape, and the tensors it owns, are used by one thread at a
 * time; separate tapes may run in separate threads (their ops share only
 * libtfm's thread pool, which serialises kernels). */
#ifndef TFM_TAPE_H
#define TFM_TAPE_H

#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The record of a step's ops and the memory of their results; opaque. */
typedef struct tfm_tape tfm_tape;

/** A new, empty, recording tape. Caller-owned: free with tfm_tape_free().
 * NULL with TFM_ERR_NOMEM when out of memory. */
TFM_API tfm_tape *tfm_tape_create(void);
/** Frees the tape and every tensor it owns; NULL is a no-op. Handles to
 * its tensors dangle after. */
TFM_API void tfm_tape_free(tfm_tape *tape);

/** Recording is on after create. Off is no-grad mode: ops still compute and
 * return tape-owned tensors, but record nothing and need no gradients.
 * tfm_tape_is_recording gives 0 for a NULL tape (TFM_ERR_NULL). */
TFM_API tfm_status tfm_tape_set_recording(tfm_tape *tape, int32_t recording);
/** 1 while the tape records, 0 in no-grad mode or for a NULL tape. */
TFM_API int32_t tfm_tape_is_recording(const tfm_tape *tape);

/** Runs the recorded ops backward from a one-element float32 tensor made on
 * this tape since its last reset (else TFM_ERR_STATE), seeding its
 * gradient with 1. Gradients accumulate (+=) into the leaf tensors that
 * require grad. As in PyTorch, the gradients of intermediate (tape-owned)
 * tensors are not kept: each is reused once its op has run backward, so
 * backward holds only the live ones. Valid once per recorded step: call
 * tfm_tape_reset() next. */
TFM_API tfm_status tfm_tape_backward(tfm_tape *tape, tfm_tensor *loss);

/** The same from any recorded float32 tensor, seeding its gradient with
 * count == numel values (a vector-Jacobian product, as PyTorch's
 * tensor.backward(gradient)). */
TFM_API tfm_status tfm_tape_backward_with_grad(tfm_tape *tape,
                                               tfm_tensor *output,
                                               const float *seed,
                                               int64_t count);

/** Forgets the records and ends every tape-owned tensor (see above),
 * keeping the memory for the next step. */
TFM_API tfm_status tfm_tape_reset(tfm_tape *tape);

/** Ops recorded since the last reset; -1 for a NULL tape (TFM_ERR_NULL). */
TFM_API int64_t tfm_tape_node_count(const tfm_tape *tape);
/** Bytes the arena holds (values, records, gradients, and the block that
 * recomputed values share: tfm_model_set_recompute; the tensors' headers
 * are kept apart and not counted); -1 for a NULL tape (TFM_ERR_NULL). */
TFM_API int64_t tfm_tape_arena_bytes(const tfm_tape *tape);

#ifdef __cplusplus
}
#endif

#endif
