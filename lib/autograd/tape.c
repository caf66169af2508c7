#include "autograd/tape.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"

tfm_tape *tfm_tape_create(void)
{
    tfm_tape *tape = calloc(1, sizeof *tape);
    if (!tape) {
        tfm__fail(TFM_ERR_NOMEM, "tfm_tape_create: out of memory");
        return NULL;
    }
    tfm__arena_init(&tape->arena);
    tfm__header_ring_init(&tape->headers);
    tape->recording = 1;
    return tape;
}

void tfm_tape_free(tfm_tape *tape)
{
    if (!tape)
        return;
    tfm__arena_release(&tape->arena);
    tfm__header_ring_release(&tape->headers);
    for (int k = 0; k < TFM__RECOMPUTE_KINDS; k++)
        free(tape->recompute[k].block);
    free(tape);
}

tfm_status tfm_tape_set_recording(tfm_tape *tape, int32_t recording)
{
    if (!tape)
        return tfm__fail(TFM_ERR_NULL, "tfm_tape_set_recording: tape is NULL");
    tape->recording = recording ? 1 : 0;
    return TFM_OK;
}

void tfm__tape_set_evaluation(tfm_tape *tape, int evaluation)
{
    tape->evaluation = evaluation ? 1 : 0;
}

void tfm__tape_set_packed(tfm_tape *tape, const struct tfm__packed_linear *packed, int64_t n)
{
    tape->packed = packed;
    tape->n_packed = packed ? n : 0;
}

void tfm__tape_set_adapter(tfm_tape *tape, const struct tfm__adapter_set *adapter)
{
    tape->adapter = adapter;
    tape->adapter_chosen = 1;
}

int32_t tfm_tape_is_recording(const tfm_tape *tape)
{
    return tfm__check_tape("tfm_tape_is_recording", tape) < 0 ? 0 : tape->recording;
}

int64_t tfm_tape_node_count(const tfm_tape *tape)
{
    return tfm__check_tape("tfm_tape_node_count", tape) < 0 ? -1 : tape->node_count;
}

int64_t tfm_tape_arena_bytes(const tfm_tape *tape)
{
    if (tfm__check_tape("tfm_tape_arena_bytes", tape) < 0)
        return -1;
    size_t bytes = tape->arena.capacity;
    for (int k = 0; k < TFM__RECOMPUTE_KINDS; k++)
        bytes += tape->recompute[k].bytes;
    return (int64_t)bytes;
}

tfm_status tfm_tape_reset(tfm_tape *tape)
{
    if (!tape)
        return tfm__fail(TFM_ERR_NULL, "tfm_tape_reset: tape is NULL");
    tape->last = NULL;
    tape->node_count = 0;
    tape->backward_done = 0;
    memset(tape->free_grads, 0, sizeof tape->free_grads);
    tfm__arena_reset(&tape->arena);
    for (int k = 0; k < TFM__RECOMPUTE_KINDS; k++)
        tape->recompute[k].holder = NULL;
    tape->generation++; /* every tensor made so far is stale */
    tfm__header_ring_reset(&tape->headers);
    return TFM_OK;
}

int tfm__check_tape(const char *op, const tfm_tape *tape)
{
    if (!tape) {
        tfm__fail(TFM_ERR_NULL, "%s: tape is NULL", op);
        return -1;
    }
    return 0;
}

void *tfm__scratch(tfm_tape *tape, const char *op, size_t bytes)
{
    void *p = tfm__arena_alloc(&tape->arena, bytes);
    if (!p)
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory (%zu bytes)", op, bytes);
    return p;
}

/* A header from the tape's ring, stamped with the tape's generation. */
static tfm_tensor *new_header(tfm_tape *tape, const char *op, tfm_dtype dtype, int32_t ndim,
                              const int64_t *shape, int64_t numel)
{
    tfm_tensor *t = tfm__header_ring_take(&tape->headers, tape->generation);
    if (!t) {
        tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for a tensor header", op);
        return NULL;
    }
    tfm__tensor_init(t, dtype, ndim, shape, numel, TFM_STORAGE_TAPE);
    t->tape_generation = &tape->generation;
    t->generation = tape->generation;
    return t;
}

tfm_tensor *tfm__new_output(tfm_tape *tape, const char *op, tfm_dtype dtype,
                            int32_t ndim, const int64_t *shape)
{
    int64_t numel = tfm__checked_numel(op, ndim, shape);
    if (numel < 0)
        return NULL;
    void *data = tfm__scratch(tape, op, (size_t)numel * tfm__dtype_size(dtype));
    tfm_tensor *t = data ? new_header(tape, op, dtype, ndim, shape, numel) : NULL;
    if (t)
        t->data = data;
    return t;
}

tfm_tensor *tfm__new_constant(tfm_tape *tape, const char *op, tfm_dtype dtype,
                              int32_t ndim, const int64_t *shape)
{
    return tape ? tfm__new_output(tape, op, dtype, ndim, shape)
                : tfm__heap_tensor(op, dtype, ndim, shape);
}

tfm_tensor *tfm__new_recomputed(tfm_tape *tape, const char *op, int kind, int32_t n_in,
                                const tfm_tensor *const *in, int32_t ndim,
                                const int64_t *shape)
{
    if (!tfm__wants_grad(tape, n_in, in))
        return tfm__new_output(tape, op, TFM_F32, ndim, shape);
    int64_t numel = tfm__checked_numel(op, ndim, shape);
    if (numel < 0)
        return NULL;
    size_t bytes = (size_t)numel * sizeof(float);
    if (bytes > tape->recompute[kind].bytes) {
        void *grown = malloc(bytes);
        if (!grown) {
            tfm__fail(TFM_ERR_NOMEM, "%s: out of memory (%zu bytes)", op, bytes);
            return NULL;
        }
        free(tape->recompute[kind].block);
        tape->recompute[kind].block = grown;
        tape->recompute[kind].bytes = bytes;
    }
    tfm_tensor *t = new_header(tape, op, TFM_F32, ndim, shape, numel);
    if (t) {
        t->data = tape->recompute[kind].block;
        t->recomputed = 1 + kind;
        tape->recompute[kind].holder = t;
    }
    return t;
}

tfm_tensor *tfm__new_like(tfm_tape *tape, const char *op, const tfm_tensor *x)
{
    if (tfm__check_input(op, "x", x, TFM_F32) < 0 || tfm__check_tape(op, tape) < 0)
        return NULL;
    return tfm__new_output(tape, op, TFM_F32, x->ndim, x->shape);
}

tfm_tensor *tfm__new_view(tfm_tape *tape, const char *op, const tfm_tensor *src,
                          int32_t ndim, const int64_t *shape)
{
    int64_t numel = tfm__checked_numel(op, ndim, shape);
    if (numel < 0)
        return NULL;
    tfm_tensor *t = new_header(tape, op, src->dtype, ndim, shape, numel);
    if (t)
        t->data = src->data;
    return t;
}

int tfm__wants_grad(const tfm_tape *tape, int32_t n_in, const tfm_tensor *const *in)
{
    if (!tape->recording)
        return 0;
    for (int32_t i = 0; i < n_in; i++)
        if (in[i] && in[i]->requires_grad)
            return 1;
    return 0;
}

int tfm__record(tfm_tape *tape, const char *op, tfm_tensor *out,
                tfm_backward_fn backward, int32_t n_in,
                const tfm_tensor *const *in, tfm_node **node)
{
    *node = NULL;
    if (!tfm__wants_grad(tape, n_in, in))
        return 0;
    for (int32_t i = 0; i < n_in; i++)
        if (in[i] && in[i]->requires_grad && in[i]->tape_generation &&
            in[i]->tape_generation != &tape->generation) {
            /* its gradient would stop here: the other tape's records lead on */
            tfm__fail(TFM_ERR_STATE, "%s: an input that requires grad belongs to another "
                      "tape, and a gradient cannot cross tapes; use one tape per graph (or "
                      "pass a tfm_tensor_clone of the input as a constant)", op);
            return -1;
        }
    tfm_node *n = tfm__scratch(tape, op, sizeof *n + (size_t)n_in * sizeof n->in[0]);
    if (!n)
        return -1;
    memset(n, 0, sizeof *n);
    n->backward = backward;
    n->out = out;
    n->n_in = n_in;
    for (int32_t i = 0; i < n_in; i++)
        n->in[i] = (tfm_tensor *)in[i]; /* backward writes only their grads */
    n->prev = tape->last;
    tape->last = n;
    tape->node_count++;
    out->requires_grad = 1;
    out->producer = n;
    *node = n;
    return 0;
}

static size_t grad_bytes(const tfm_tensor *t)
{
    size_t bytes = (size_t)t->numel * sizeof(float);
    return bytes < sizeof(void *) ? sizeof(void *) : bytes;
}

static tfm_grad_free_list *free_list_for(tfm_tape *tape, size_t bytes, int create)
{
    for (int i = 0; i < TFM__GRAD_SIZES; i++) {
        tfm_grad_free_list *list = &tape->free_grads[i];
        if (list->bytes == bytes)
            return list;
        if (!list->bytes) {
            if (!create)
                return NULL;
            list->bytes = bytes;
            return list;
        }
    }
    return NULL; /* every slot taken: the buffer stays in the arena until reset */
}

typedef struct zero_job {
    char *bytes;
    size_t count;
} zero_job;

#define ZERO_CHUNK ((size_t)64 << 10) /* bytes per unit of the split */

static void zero_chunks(void *ctx, int64_t begin, int64_t end, int worker)
{
    (void)worker;
    const zero_job *j = ctx;
    size_t first = (size_t)begin * ZERO_CHUNK, last = (size_t)end * ZERO_CHUNK;
    memset(j->bytes + first, 0, (last < j->count ? last : j->count) - first);
}

/* A zeroed gradient for t, recycled when one of its size is free. The
 * zeroing of a large one is split among the threads: the calling thread
 * would run it alone, between two ops, while the others wait. */
static tfm_status give_grad(const char *op, tfm_tape *tape, tfm_tensor *t)
{
    size_t bytes = grad_bytes(t);
    tfm_grad_free_list *list = free_list_for(tape, bytes, 0);
    void *buffer = NULL;
    if (list && list->head) {
        buffer = list->head;
        list->head = *(void **)buffer;
    } else {
        buffer = tfm__arena_alloc(&tape->arena, bytes);
        if (!buffer)
            return tfm__fail(TFM_ERR_NOMEM, "%s: out of memory for a gradient", op);
    }
    zero_job zero = {buffer, bytes};
    tfm__parallel_for((int64_t)((bytes + ZERO_CHUNK - 1) / ZERO_CHUNK),
                      tfm__workers_for((int64_t)(bytes / sizeof(float))), zero_chunks, &zero);
    t->grad = buffer;
    t->grad_recycled = 1;
    return TFM_OK;
}

/* After its op's backward nothing reads or adds to out's gradient again
 * (the tape runs in reverse order), as PyTorch frees non-leaf gradients. */
static void recycle_grad(tfm_tape *tape, tfm_tensor *t)
{
    if (!t->grad_recycled)
        return;
    tfm_grad_free_list *list = free_list_for(tape, grad_bytes(t), 1);
    if (list) {
        *(void **)t->grad = list->head;
        list->head = t->grad;
    }
    t->grad = NULL;
    t->grad_recycled = 0;
}

/* Gives every tape-owned input that wants a gradient a zeroed buffer. */
static tfm_status prepare_input_grads(const char *op, tfm_tape *tape, tfm_node *node)
{
    for (int32_t i = 0; i < node->n_in; i++) {
        tfm_tensor *t = node->in[i];
        if (!t || !t->requires_grad || t->grad)
            continue; /* optional inputs may be recorded as NULL */
        tfm_status s = give_grad(op, tape, t);
        if (s != TFM_OK)
            return s;
    }
    return TFM_OK;
}

/* Puts t's values back in its recompute block, if it is a recomputed
 * tensor another has displaced there: its record's inputs first. */
static void restore_values(tfm_tape *tape, tfm_tensor *t)
{
    if (!t || !t->recomputed || tape->recompute[t->recomputed - 1].holder == t)
        return;
    tfm_node *producer = t->producer;
    for (int32_t i = 0; i < producer->n_in; i++)
        restore_values(tape, producer->in[i]);
    t->data = tape->recompute[t->recomputed - 1].block;
    producer->recompute(producer);
    tape->recompute[t->recomputed - 1].holder = t;
}

static tfm_status run_backward(const char *op, const char *what, tfm_tape *tape,
                               tfm_tensor *output, const float *seed, int64_t count)
{
    if (!tape || !output || !seed)
        return tfm__fail(TFM_ERR_NULL, "%s: %s is NULL", op,
                         !tape ? "tape" : !output ? what : "seed");
    if (tfm__check_tensor(op, what, output) < 0)
        return tfm_last_status();
    if (output->tape_generation != &tape->generation)
        return tfm__fail(TFM_ERR_STATE, "%s: the %s %s; pass a result of this tape's ops", op,
                         what, output->tape_generation ? "belongs to another tape"
                                                       : "is not an op's result");
    if (output->dtype != TFM_F32 || count != output->numel)
        return tfm__fail(TFM_ERR_SHAPE, "%s: the seed must give one float per element "
                         "of a float32 tensor (%lld given, %lld needed)", op,
                         (long long)count, (long long)output->numel);
    if (tape->backward_done)
        return tfm__fail(TFM_ERR_STATE, "%s: backward already ran; reset the tape first", op);
    if (!output->requires_grad)
        return tfm__fail(TFM_ERR_STATE,
                         "%s: the output does not depend on any tensor that requires "
                         "grad (or was computed with recording off)", op);
    if (!output->grad) {
        tfm_status s = give_grad(op, tape, output);
        if (s != TFM_OK)
            return s;
    }
    for (int64_t i = 0; i < count; i++)
        output->grad[i] += seed[i];
    tape->backward_done = 1;
    for (tfm_node *node = tape->last; node; node = node->prev) {
        if (!node->out->grad)
            continue; /* nothing flowed back to this op */
        tfm_status s = prepare_input_grads(op, tape, node);
        if (s != TFM_OK)
            return s;
        restore_values(tape, node->out);
        for (int32_t i = 0; i < node->n_in; i++)
            restore_values(tape, node->in[i]);
        node->backward(node);
        recycle_grad(tape, node->out);
    }
    return TFM_OK;
}

tfm_status tfm_tape_backward(tfm_tape *tape, tfm_tensor *loss)
{
    static const float one = 1.0f;
    if (loss && !tfm__is_stale(loss) && (loss->dtype != TFM_F32 || loss->numel != 1))
        return tfm__fail(TFM_ERR_SHAPE,
                         "tfm_tape_backward: the loss must be a one-element float32 tensor");
    return run_backward("tfm_tape_backward", "loss", tape, loss, &one, 1);
}

tfm_status tfm_tape_backward_with_grad(tfm_tape *tape, tfm_tensor *output,
                                       const float *seed, int64_t count)
{
    return run_backward("tfm_tape_backward_with_grad", "output", tape, output, seed, count);
}
