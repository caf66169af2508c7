/* Bad calls to common.h, tensor.h and tape.h (lib/core, lib/autograd):
 * threads, random numbers, tensors' creation, shapes, values and gradients,
 * the tape and backward in a wrong state. The fixture, the table's macros
 * and the run are bad_input.h's. */
#include "bad_input.h"
#include "check_main.h"

/* --- calls that need state or options of their own ------------------------------- */

static tfm_status backward_twice(void)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *loss = tfm_sum(tape, fx.f23);
    tfm_tape_backward(tape, loss);
    tfm_status s = tfm_tape_backward(tape, loss);
    tfm_tensor_zero_grad(fx.f23);
    tfm_tape_free(tape);
    return s;
}

static tfm_status backward_without_grad(int with_seed)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tensor *loss = tfm_sum(tape, fx.f32x3); /* needs no gradient */
    static const float one = 1.0f;
    tfm_status s = with_seed ? tfm_tape_backward_with_grad(tape, loss, &one, 1)
                             : tfm_tape_backward(tape, loss);
    tfm_tape_free(tape);
    return s;
}

static tfm_status backward_not_recorded(void)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_tape_set_recording(tape, 0);
    tfm_status s = tfm_tape_backward(tape, tfm_sum(tape, fx.f23));
    tfm_tape_free(tape);
    return s;
}

static tfm_status op_result_requires_grad(void)
{
    tfm_tape *tape = tfm_tape_create();
    tfm_status s = tfm_tensor_set_requires_grad(tfm_relu(tape, fx.f32x3), 1);
    tfm_tape_free(tape);
    return s;
}

static tfm_status seed_count(int64_t count)
{
    tfm_tape *tape = tfm_tape_create();
    float seed[6] = {1, 1, 1, 1, 1, 1};
    tfm_status s = tfm_tape_backward_with_grad(tape, tfm_relu(tape, fx.f23), seed, count);
    tfm_tape_free(tape);
    return s;
}

/* --- the table ------------------------------------------------------------------------ */

static int bad_calls(int index, bad_case *c)
{
    int n = 0;
    fixture *f = &fx;
    tfm_tape *tape = f->tape;
    float buf[64] = {0};
    int32_t ibuf[64] = {0};
    int64_t shape[TFM_MAX_DIMS];
    const int64_t huge = INT64_MAX, big = (int64_t)1 << 40;

    /* common.h */
    ST(tfm_set_num_threads, E_ARG, tfm_set_num_threads(0));
    ST(tfm_set_num_threads, E_ARG, tfm_set_num_threads(-1));
    ST(tfm_set_num_threads, E_ARG, tfm_set_num_threads(65));
    ST(tfm_set_num_threads, E_ARG, tfm_set_num_threads(INT32_MIN));
    ST(tfm_set_num_threads, E_ARG, tfm_set_num_threads(INT32_MAX));

    /* tensor.h: random numbers */
    ST(tfm_rng_seed, E_NULL, tfm_rng_seed(NULL, 1));
    ZERO(tfm_rng_next_u64, E_NULL, tfm_rng_next_u64(NULL));
    ZERO(tfm_rng_uniform, E_NULL, tfm_rng_uniform(NULL));
    ZERO(tfm_rng_normal, E_NULL, tfm_rng_normal(NULL));
    /* creation */
    NUL(tfm_tensor_zeros, E_DTYPE, tfm_tensor_zeros(7, 1, SHAPE(3)));
    NUL(tfm_tensor_zeros, E_DTYPE, tfm_tensor_zeros(-1, 1, SHAPE(3)));
    NUL(tfm_tensor_zeros, E_DTYPE, tfm_tensor_zeros(INT32_MAX, 1, SHAPE(3)));
    NUL(tfm_tensor_zeros, E_ARG, tfm_tensor_zeros(TFM_F32, 0, SHAPE(3)));
    NUL(tfm_tensor_zeros, E_ARG, tfm_tensor_zeros(TFM_F32, 5, SHAPE(1, 1, 1, 1, 1)));
    NUL(tfm_tensor_zeros, E_ARG, tfm_tensor_zeros(TFM_I32, -3, SHAPE(3)));
    NUL(tfm_tensor_zeros, E_ARG, tfm_tensor_zeros(TFM_F32, INT32_MAX, SHAPE(3)));
    NUL(tfm_tensor_zeros, E_NULL, tfm_tensor_zeros(TFM_F32, 1, NULL));
    NUL(tfm_tensor_zeros, E_SHAPE, tfm_tensor_zeros(TFM_F32, 2, SHAPE(3, 0)));
    NUL(tfm_tensor_zeros, E_SHAPE, tfm_tensor_zeros(TFM_F32, 1, SHAPE(-1)));
    NUL(tfm_tensor_zeros, E_SHAPE, tfm_tensor_zeros(TFM_I32, 3, SHAPE(2, 2, INT64_MIN)));
    NUL(tfm_tensor_zeros, E_SIZE, tfm_tensor_zeros(TFM_F32, 1, SHAPE(huge)));
    NUL(tfm_tensor_zeros, E_SIZE, tfm_tensor_zeros(TFM_I32, 2, SHAPE(huge / 2, 3)));
    NUL(tfm_tensor_zeros, E_SIZE, tfm_tensor_zeros(TFM_F32, 2, SHAPE(big, big)));
    NUL(tfm_tensor_zeros, E_SIZE, tfm_tensor_zeros(TFM_F32, 4, SHAPE(65536, 65536, 65536, 65536)));
    NUL(tfm_tensor_zeros, E_SIZE, tfm_tensor_zeros(TFM_F32, 1, SHAPE(huge / 4 + 1)));
    NUL(tfm_tensor_full, E_ARG, tfm_tensor_full(0, SHAPE(1), 2.0f));
    NUL(tfm_tensor_full, E_NULL, tfm_tensor_full(1, NULL, 2.0f));
    NUL(tfm_tensor_full, E_SHAPE, tfm_tensor_full(2, SHAPE(-4, 2), 2.0f));
    NUL(tfm_tensor_full, E_SIZE, tfm_tensor_full(3, SHAPE(big, big, big), 2.0f));
    NUL(tfm_tensor_ones, E_ARG, tfm_tensor_ones(9, SHAPE(1)));
    NUL(tfm_tensor_ones, E_NULL, tfm_tensor_ones(2, NULL));
    NUL(tfm_tensor_ones, E_SHAPE, tfm_tensor_ones(1, SHAPE(0)));
    NUL(tfm_tensor_ones, E_SIZE, tfm_tensor_ones(1, SHAPE(huge)));
    NUL(tfm_tensor_from_f32, E_NULL, tfm_tensor_from_f32(1, SHAPE(2), NULL));
    NUL(tfm_tensor_from_f32, E_NULL, tfm_tensor_from_f32(1, NULL, buf));
    NUL(tfm_tensor_from_f32, E_ARG, tfm_tensor_from_f32(-1, SHAPE(2), buf));
    NUL(tfm_tensor_from_f32, E_SHAPE, tfm_tensor_from_f32(2, SHAPE(2, -2), buf));
    NUL(tfm_tensor_from_f32, E_SIZE, tfm_tensor_from_f32(2, SHAPE(huge, huge), buf));
    NUL(tfm_tensor_from_i32, E_NULL, tfm_tensor_from_i32(1, SHAPE(2), NULL));
    NUL(tfm_tensor_from_i32, E_NULL, tfm_tensor_from_i32(1, NULL, ibuf));
    NUL(tfm_tensor_from_i32, E_ARG, tfm_tensor_from_i32(5, SHAPE(1, 1, 1, 1, 1), ibuf));
    NUL(tfm_tensor_from_i32, E_SHAPE, tfm_tensor_from_i32(1, SHAPE(0), ibuf));
    NUL(tfm_tensor_from_i32, E_SIZE, tfm_tensor_from_i32(1, SHAPE(huge), ibuf));
    NUL(tfm_tensor_uniform, E_NULL, tfm_tensor_uniform(1, SHAPE(3), 0.0f, 1.0f, NULL));
    NUL(tfm_tensor_uniform, E_ARG, tfm_tensor_uniform(1, SHAPE(3), 1.0f, 0.0f, f->rng));
    NUL(tfm_tensor_uniform, E_ARG, tfm_tensor_uniform(1, SHAPE(3), NAN, 1.0f, f->rng));
    NUL(tfm_tensor_uniform, E_ARG, tfm_tensor_uniform(1, SHAPE(3), 0.0f, NAN, f->rng));
    NUL(tfm_tensor_uniform, E_ARG, tfm_tensor_uniform(1, SHAPE(3), -3.4e38f, 3.4e38f, f->rng));
    NUL(tfm_tensor_uniform, E_SHAPE, tfm_tensor_uniform(1, SHAPE(-3), 0.0f, 1.0f, f->rng));
    NUL(tfm_tensor_uniform, E_SIZE, tfm_tensor_uniform(1, SHAPE(huge), 0.0f, 1.0f, f->rng));
    NUL(tfm_tensor_normal, E_NULL, tfm_tensor_normal(1, SHAPE(3), 0.0f, 1.0f, NULL));
    NUL(tfm_tensor_normal, E_ARG, tfm_tensor_normal(1, SHAPE(3), 0.0f, -1.0f, f->rng));
    NUL(tfm_tensor_normal, E_ARG, tfm_tensor_normal(1, SHAPE(3), 0.0f, NAN, f->rng));
    NUL(tfm_tensor_normal, E_ARG, tfm_tensor_normal(0, SHAPE(3), 0.0f, 1.0f, f->rng));
    NUL(tfm_tensor_normal, E_SIZE, tfm_tensor_normal(2, SHAPE(big, big), 0.0f, 1.0f, f->rng));
    /* shape */
    NEG(tfm_tensor_dtype, E_NULL, tfm_tensor_dtype(NULL));
    ZERO(tfm_tensor_ndim, E_NULL, tfm_tensor_ndim(NULL));
    NEG(tfm_tensor_dim, E_NULL, tfm_tensor_dim(NULL, 0));
    NEG(tfm_tensor_dim, E_ARG, tfm_tensor_dim(f->f23, 2));
    NEG(tfm_tensor_dim, E_ARG, tfm_tensor_dim(f->f23, -3));
    NEG(tfm_tensor_dim, E_ARG, tfm_tensor_dim(f->x, INT32_MAX));
    NEG(tfm_tensor_dim, E_ARG, tfm_tensor_dim(f->x, INT32_MIN));
    NEG(tfm_tensor_numel, E_NULL, tfm_tensor_numel(NULL));
    ST(tfm_tensor_shape, E_NULL, tfm_tensor_shape(NULL, shape));
    ST(tfm_tensor_shape, E_NULL, tfm_tensor_shape(f->f23, NULL));
    /* values */
    ST(tfm_tensor_read_f32, E_NULL, tfm_tensor_read_f32(NULL, buf, 6));
    ST(tfm_tensor_read_f32, E_NULL, tfm_tensor_read_f32(f->f23, NULL, 6));
    ST(tfm_tensor_read_f32, E_DTYPE, tfm_tensor_read_f32(f->i23, buf, 6));
    ST(tfm_tensor_read_f32, E_SHAPE, tfm_tensor_read_f32(f->f23, buf, 5));
    ST(tfm_tensor_read_f32, E_SHAPE, tfm_tensor_read_f32(f->f23, buf, 7));
    ST(tfm_tensor_read_f32, E_SHAPE, tfm_tensor_read_f32(f->f23, buf, -6));
    ST(tfm_tensor_read_f32, E_SHAPE, tfm_tensor_read_f32(f->f23, buf, huge));
    ST(tfm_tensor_write_f32, E_NULL, tfm_tensor_write_f32(NULL, buf, 6));
    ST(tfm_tensor_write_f32, E_NULL, tfm_tensor_write_f32(f->f23, NULL, 6));
    ST(tfm_tensor_write_f32, E_DTYPE, tfm_tensor_write_f32(f->i23, buf, 6));
    ST(tfm_tensor_write_f32, E_SHAPE, tfm_tensor_write_f32(f->f23, buf, 0));
    ST(tfm_tensor_write_f32, E_SHAPE, tfm_tensor_write_f32(f->f23, buf, INT64_MIN));
    ST(tfm_tensor_read_i32, E_NULL, tfm_tensor_read_i32(NULL, ibuf, 6));
    ST(tfm_tensor_read_i32, E_NULL, tfm_tensor_read_i32(f->i23, NULL, 6));
    ST(tfm_tensor_read_i32, E_DTYPE, tfm_tensor_read_i32(f->f23, ibuf, 6));
    ST(tfm_tensor_read_i32, E_SHAPE, tfm_tensor_read_i32(f->i23, ibuf, 1));
    ST(tfm_tensor_write_i32, E_NULL, tfm_tensor_write_i32(NULL, ibuf, 6));
    ST(tfm_tensor_write_i32, E_NULL, tfm_tensor_write_i32(f->i23, NULL, 6));
    ST(tfm_tensor_write_i32, E_DTYPE, tfm_tensor_write_i32(f->f23, ibuf, 6));
    ST(tfm_tensor_write_i32, E_SHAPE, tfm_tensor_write_i32(f->i23, ibuf, huge));
    ST(tfm_tensor_item, E_NULL, tfm_tensor_item(NULL, buf));
    ST(tfm_tensor_item, E_NULL, tfm_tensor_item(f->f1, NULL));
    ST(tfm_tensor_item, E_SHAPE, tfm_tensor_item(f->f23, buf));
    ST(tfm_tensor_item, E_DTYPE, tfm_tensor_item(f->i1, buf));
    NUL(tfm_tensor_data_f32, E_NULL, tfm_tensor_data_f32(NULL));
    NUL(tfm_tensor_data_f32, E_DTYPE, tfm_tensor_data_f32(f->i23));
    NUL(tfm_tensor_data_i32, E_NULL, tfm_tensor_data_i32(NULL));
    NUL(tfm_tensor_data_i32, E_DTYPE, tfm_tensor_data_i32(f->f23));
    /* gradients */
    ST(tfm_tensor_set_requires_grad, E_NULL, tfm_tensor_set_requires_grad(NULL, 1));
    ST(tfm_tensor_set_requires_grad, E_DTYPE, tfm_tensor_set_requires_grad(f->i23, 1));
    ST(tfm_tensor_set_requires_grad, E_STATE, op_result_requires_grad());
    ZERO(tfm_tensor_requires_grad, E_NULL, tfm_tensor_requires_grad(NULL));
    ST(tfm_tensor_read_grad, E_NULL, tfm_tensor_read_grad(NULL, buf, 6));
    ST(tfm_tensor_read_grad, E_NULL, tfm_tensor_read_grad(f->f23, NULL, 6));
    ST(tfm_tensor_read_grad, E_STATE, tfm_tensor_read_grad(f->f32x3, buf, 6));
    ST(tfm_tensor_read_grad, E_SHAPE, tfm_tensor_read_grad(f->f23, buf, 3));
    ST(tfm_tensor_read_grad, E_DTYPE, tfm_tensor_read_grad(f->i23, buf, 6));
    NUL(tfm_tensor_grad_f32, E_NULL, tfm_tensor_grad_f32(NULL));
    NUL(tfm_tensor_grad_f32, E_STATE, tfm_tensor_grad_f32(f->f32x3));
    ST(tfm_tensor_zero_grad, E_NULL, tfm_tensor_zero_grad(NULL));

    /* tape.h */
    ST(tfm_tape_set_recording, E_NULL, tfm_tape_set_recording(NULL, 1));
    ZERO(tfm_tape_is_recording, E_NULL, tfm_tape_is_recording(NULL));
    ST(tfm_tape_backward, E_NULL, tfm_tape_backward(NULL, f->f1));
    ST(tfm_tape_backward, E_NULL, tfm_tape_backward(tape, NULL));
    ST(tfm_tape_backward, E_SHAPE, tfm_tape_backward(tape, f->f23));
    ST(tfm_tape_backward, E_SHAPE, tfm_tape_backward(tape, f->i1));
    ST(tfm_tape_backward, E_STATE, tfm_tape_backward(tape, f->f1));
    ST(tfm_tape_backward, E_STATE, backward_twice());
    ST(tfm_tape_backward, E_STATE, backward_without_grad(0));
    ST(tfm_tape_backward, E_STATE, backward_not_recorded());
    ST(tfm_tape_backward_with_grad, E_NULL, tfm_tape_backward_with_grad(NULL, f->f23, buf, 6));
    ST(tfm_tape_backward_with_grad, E_NULL, tfm_tape_backward_with_grad(tape, NULL, buf, 6));
    ST(tfm_tape_backward_with_grad, E_NULL, tfm_tape_backward_with_grad(tape, f->f23, NULL, 6));
    ST(tfm_tape_backward_with_grad, E_SHAPE, seed_count(5));
    ST(tfm_tape_backward_with_grad, E_SHAPE, seed_count(-1));
    ST(tfm_tape_backward_with_grad, E_SHAPE, seed_count(huge));
    ST(tfm_tape_backward_with_grad, E_STATE, tfm_tape_backward_with_grad(tape, f->i23, buf, 6));
    ST(tfm_tape_backward_with_grad, E_STATE, backward_without_grad(1));
    ST(tfm_tape_reset, E_NULL, tfm_tape_reset(NULL));
    NEG(tfm_tape_node_count, E_NULL, tfm_tape_node_count(NULL));
    NEG(tfm_tape_arena_bytes, E_NULL, tfm_tape_arena_bytes(NULL));

    /* tensor.h */
    NUL(tfm_tensor_clone, E_NULL, tfm_tensor_clone(NULL));
    ST(tfm_rng_copy, E_NULL, tfm_rng_copy(NULL, f->rng));
    ST(tfm_rng_copy, E_NULL, tfm_rng_copy(f->rng, NULL));
    ST(tfm_rng_set_shard, E_NULL, tfm_rng_set_shard(NULL, 0, 1));
    ST(tfm_rng_set_shard, E_ARG, tfm_rng_set_shard(f->rng, 2, 2));
    ST(tfm_rng_set_shard, E_ARG, tfm_rng_set_shard(f->rng, -1, 2));
    ST(tfm_rng_set_shard, E_ARG, tfm_rng_set_shard(f->rng, 0, 0));
    /* slices whose dropout counters would overflow (shard_index * numel) */
    ST(tfm_rng_set_shard, E_ARG, tfm_rng_set_shard(f->rng, 0, TFM_MAX_SHARDS + 1));
    ST(tfm_rng_set_shard, E_ARG, tfm_rng_set_shard(f->rng, INT64_MAX - 1, INT64_MAX));
    return -1;
}

/* Frees and options-inits of NULL, which must record no error. */
static void free_nulls(void)
{
    tfm_rng_free(NULL);
    tfm_tensor_free(NULL);
    tfm_tape_free(NULL);
}

static Suite *suite(void)
{
    return bad_input_suite("bad_input_tensor", bad_calls, 135, free_nulls);
}

TFM_CHECK_MAIN(suite)
