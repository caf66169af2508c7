/* What an op needs from the tape: output tensors and scratch from the arena,
 * and a record (inputs, output, backward function, saved state) when a
 * gradient is wanted. The tape knows ops only through this record. */
#ifndef TFM_AUTOGRAD_TAPE_H
#define TFM_AUTOGRAD_TAPE_H

#include <stddef.h>

#include "core/arena.h"
#include "core/header_ring.h"
#include "core/tensor.h"
#include "tfm/tape.h"

typedef struct tfm_node tfm_node;

/* Adds d(loss)/d(inputs) into the inputs' grad buffers, from out->grad.
 * Called only when out->grad exists; every input that requires grad has a
 * zeroed or accumulating grad buffer by then. Must not allocate. */
typedef void (*tfm_backward_fn)(tfm_node *node);
/* Writes node->out's values again, as the forward did, into out->data. */
typedef void (*tfm_recompute_fn)(tfm_node *node);

struct tfm_node {
    tfm_node *prev;
    tfm_backward_fn backward;
    tfm_tensor *out;
    tfm_recompute_fn recompute; /* set when out's values are recomputed */
    int64_t ints[6];     /* op-specific saved sizes, axes, flags */
    float floats[4];     /* op-specific saved scalars */
    void *saved[2];      /* op-specific arena buffers (statistics, masks) */
    int32_t n_in;
    tfm_tensor *in[];    /* the inputs, in the op's argument order */
};

/* Intermediate gradients are recycled during backward: a buffer whose
 * tensor's op has run its backward goes on the free list of its size and
 * serves the next gradient of that size, so backward holds only the live
 * gradients, not one per tensor. */
#define TFM__GRAD_SIZES 128
/* The kinds of recomputed values, one block each, as a record may read one
 * of each at once (the output projection: a context and the residual, a
 * norm's output; a hidden layer is computed from a norm's output). */
enum {
    TFM__RECOMPUTED_HIDDEN,
    TFM__RECOMPUTED_NORM,
    TFM__RECOMPUTED_CONTEXT,
    TFM__RECOMPUTE_KINDS
};

typedef struct tfm_grad_free_list {
    size_t bytes;         /* 0: slot unused */
    void *head;           /* each free buffer starts with the next pointer */
} tfm_grad_free_list;

struct tfm_tape {
    tfm_arena arena;             /* values, scratch, records and gradients */
    tfm_header_ring headers;     /* the tensors' headers, never overwritten by values */
    uint64_t generation;         /* resets so far: stamps every header */
    tfm_grad_free_list free_grads[TFM__GRAD_SIZES];
    tfm_node *last;
    int64_t node_count;
    int32_t recording;
    int32_t backward_done;
    /* a decoding's tape (tfm__tape_set_evaluation): forwards on it run as
     * in evaluation, whatever their layers' training flags, so that
     * decoding reads a model without switching it */
    int32_t evaluation;
    /* weights packed for the linear ops on this tape (ops/linear.h), a
     * decoding's encoder's: [n_packed], each with the weight it stands
     * for; NULL when none */
    const struct tfm__packed_linear *packed;
    int64_t n_packed;
    /* the low-rank adapter the linear ops on this tape apply (ops/adapter.h),
     * or NULL; chosen: set by the tape's owner (a decoding), so the model's
     * forwards keep it rather than apply the model's own */
    const struct tfm__adapter_set *adapter;
    int32_t adapter_chosen;
    /* values a backward recomputes (TFM_RECOMPUTE_*): per kind one block,
     * shared by every such tensor, grown to the largest and kept across
     * resets; holder: the tensor whose values it holds now */
    struct {
        void *block;
        size_t bytes;
        const tfm_tensor *holder;
    } recompute[TFM__RECOMPUTE_KINDS];
};

/* A tape-owned result with uninitialised values; NULL with the error set. */
tfm_tensor *tfm__new_output(tfm_tape *tape, const char *op, tfm_dtype dtype,
                            int32_t ndim, const int64_t *shape);
/* A constant (never recorded) on the tape, or caller-owned (zeroed) when
 * tape is NULL: masks and batches; NULL with the error set. */
tfm_tensor *tfm__new_constant(tfm_tape *tape, const char *op, tfm_dtype dtype,
                              int32_t ndim, const int64_t *shape);
/* The usual start of a float32 op of one input: checks x and the tape and
 * returns a result of x's shape, or NULL with the error set. */
tfm_tensor *tfm__new_like(tfm_tape *tape, const char *op, const tfm_tensor *x);
/* A tape-owned result sharing src's values under another shape. */
tfm_tensor *tfm__new_view(tfm_tape *tape, const char *op, const tfm_tensor *src,
                          int32_t ndim, const int64_t *shape);
/* Arena memory that lives until reset; NULL with the error set. */
void *tfm__scratch(tfm_tape *tape, const char *op, size_t bytes);
/* A float32 result of an op of inputs in[n_in] whose values sit in the
 * tape's recompute block of the kind (TFM__RECOMPUTED_*), which the next
 * such result overwrites: for a result read by nothing past that point in
 * the forward. The op sets its record's recompute, and the backward
 * computes the values again before a record that reads them runs. A
 * result that will not be recorded (no input requires grad) cannot be
 * recomputed, and is kept as tfm__new_output's: a later record may read
 * it. NULL with the error set. */
tfm_tensor *tfm__new_recomputed(tfm_tape *tape, const char *op, int kind, int32_t n_in,
                                const tfm_tensor *const *in, int32_t ndim,
                                const int64_t *shape);

/* Whether a record would be kept: recording, and some input requires grad. */
int tfm__wants_grad(const tfm_tape *tape, int32_t n_in,
                    const tfm_tensor *const *in);

/* Records out = op(in...) when tfm__wants_grad; *node is the record to fill
 * with saved state, or NULL when none is kept. 0, or -1 with the error set. */
int tfm__record(tfm_tape *tape, const char *op, tfm_tensor *out,
                tfm_backward_fn backward, int32_t n_in,
                const tfm_tensor *const *in, tfm_node **node);

/* The gradient an op's backward adds into, or NULL if t wants none. */
static inline float *tfm__grad_of(const tfm_tensor *t)
{
    return t->requires_grad ? t->grad : NULL;
}

/* Sets or clears the tape's evaluation (above); whether it is on (tape
 * NULL: off). */
void tfm__tape_set_evaluation(tfm_tape *tape, int evaluation);
static inline int tfm__tape_evaluating(const tfm_tape *tape)
{
    return tape && tape->evaluation;
}

/* The packed weights the linear ops on this tape read (NULL, 0: none);
 * the caller keeps them alive while the tape is used. */
void tfm__tape_set_packed(tfm_tape *tape, const struct tfm__packed_linear *packed, int64_t n);

/* The adapter the linear ops on this tape apply (NULL: none), chosen by
 * the tape's owner; the caller keeps it alive while the tape is used. */
void tfm__tape_set_adapter(tfm_tape *tape, const struct tfm__adapter_set *adapter);
/* Checks the tape argument of an op; 0 or -1 with the error set. */
int tfm__check_tape(const char *op, const tfm_tape *tape);

#endif
