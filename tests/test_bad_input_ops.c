/* Bad calls to ops.h (lib/ops): linear algebra, elementwise ops,
 * activations, shapes, normalisation, softmax, lookups, reductions and
 * losses on wrong dtypes, shapes, ids and arguments. The fixture, the
 * table's macros and the run are bad_input.h's. */
#include "bad_input.h"
#include "check_main.h"

/* --- calls that need state or options of their own ------------------------------- */

static tfm_tensor *cross_entropy_with_target(int32_t target)
{
    tfm_tensor *targets = tfm_tensor_from_i32(1, SHAPE(3), (const int32_t[]){0, 1, target});
    tfm_tensor *loss = tfm_cross_entropy(fx.tape, fx.f32x3 /* [3,2]: 2 classes */, targets,
                                         -100, 0.0f);
    tfm_tensor_free(targets);
    return loss;
}

static tfm_tensor *embedding_of_id(int32_t id)
{
    tfm_tensor *id_tensor = tfm_tensor_from_i32(1, SHAPE(1), &id);
    tfm_tensor *out = tfm_embedding(fx.tape, fx.f32x3, id_tensor);
    tfm_tensor_free(id_tensor);
    return out;
}

static tfm_tensor *concat_of(int which)
{
    const tfm_tensor *second[4] = {fx.f34, fx.i23, NULL, fx.f23};
    const tfm_tensor *pair[2] = {fx.f23, second[which]};
    return tfm_concat(fx.tape, pair, 2, which == 3 ? 2 : 0);
}

/* --- the table ------------------------------------------------------------------------ */

static int bad_calls(int index, bad_case *c)
{
    int n = 0;
    fixture *f = &fx;
    tfm_tape *tape = f->tape;
    const int64_t huge = INT64_MAX;

    /* ops.h: linear algebra */
    NUL(tfm_matmul, E_NULL, tfm_matmul(NULL, f->f23, f->f32x3, 0, 0));
    NUL(tfm_matmul, E_NULL, tfm_matmul(tape, NULL, f->f32x3, 0, 0));
    NUL(tfm_matmul, E_NULL, tfm_matmul(tape, f->f23, NULL, 0, 0));
    NUL(tfm_matmul, E_DTYPE, tfm_matmul(tape, f->i23, f->f32x3, 0, 0));
    NUL(tfm_matmul, E_DTYPE, tfm_matmul(tape, f->f23, f->i23, 0, 1));
    NUL(tfm_matmul, E_SHAPE, tfm_matmul(tape, f->f23, f->f23, 0, 0));
    NUL(tfm_matmul, E_SHAPE, tfm_matmul(tape, f->f23, f->f32x3, 1, 0));
    NUL(tfm_matmul, E_SHAPE, tfm_matmul(tape, f->f2, f->f23, 0, 0));
    NUL(tfm_matmul, E_SHAPE, tfm_matmul(tape, f->x, f->mem3, 0, 1));
    NUL(tfm_linear, E_NULL, tfm_linear(NULL, f->f23, f->f23, NULL));
    NUL(tfm_linear, E_NULL, tfm_linear(tape, NULL, f->f23, NULL));
    NUL(tfm_linear, E_NULL, tfm_linear(tape, f->f23, NULL, NULL));
    NUL(tfm_linear, E_DTYPE, tfm_linear(tape, f->i23, f->f23, NULL));
    NUL(tfm_linear, E_SHAPE, tfm_linear(tape, f->f23, f->f32x3, NULL));
    NUL(tfm_linear, E_SHAPE, tfm_linear(tape, f->f23, f->f23, f->f1));
    NUL(tfm_linear, E_DTYPE, tfm_linear(tape, f->f23, f->f23, f->i1));
    NUL(tfm_linear, E_SHAPE, tfm_linear(tape, f->f23, f->f2, NULL));
    NUL(tfm_linear_relu, E_NULL, tfm_linear_relu(tape, NULL, f->f23, NULL));
    NUL(tfm_linear_relu, E_SHAPE, tfm_linear_relu(tape, f->f23, f->f34, NULL));
    NUL(tfm_linear_relu, E_DTYPE, tfm_linear_relu(tape, f->f23, f->i23, NULL));
    NUL(tfm_linear_relu_dropout, E_ARG,
        tfm_linear_relu_dropout(tape, f->f23, f->f23, NULL, 1.0f, 1, f->rng));
    NUL(tfm_linear_relu_dropout, E_ARG,
        tfm_linear_relu_dropout(tape, f->f23, f->f23, NULL, -0.5f, 1, f->rng));
    NUL(tfm_linear_relu_dropout, E_ARG,
        tfm_linear_relu_dropout(tape, f->f23, f->f23, NULL, NAN, 1, f->rng));
    NUL(tfm_linear_relu_dropout, E_NULL,
        tfm_linear_relu_dropout(tape, f->f23, f->f23, NULL, 0.5f, 1, NULL));
    NUL(tfm_linear_relu_dropout, E_SHAPE,
        tfm_linear_relu_dropout(tape, f->f23, f->f34, NULL, 0.5f, 1, f->rng));
    /* elementwise */
    NUL(tfm_add, E_NULL, tfm_add(NULL, f->f23, f->f23));
    NUL(tfm_add, E_NULL, tfm_add(tape, NULL, f->f23));
    NUL(tfm_add, E_NULL, tfm_add(tape, f->f23, NULL));
    NUL(tfm_add, E_SHAPE, tfm_add(tape, f->f23, f->f32x3));
    NUL(tfm_add, E_DTYPE, tfm_add(tape, f->f23, f->i23));
    NUL(tfm_sub, E_SHAPE, tfm_sub(tape, f->f23, f->f34));
    NUL(tfm_sub, E_DTYPE, tfm_sub(tape, f->i23, f->f23));
    NUL(tfm_sub, E_NULL, tfm_sub(tape, NULL, NULL));
    NUL(tfm_mul, E_SHAPE, tfm_mul(tape, f->x, f->mem3));
    NUL(tfm_mul, E_DTYPE, tfm_mul(tape, f->i1, f->f1));
    NUL(tfm_mul, E_NULL, tfm_mul(NULL, f->f1, f->f1));
    NUL(tfm_scale, E_NULL, tfm_scale(tape, NULL, 2.0f));
    NUL(tfm_scale, E_NULL, tfm_scale(NULL, f->f23, 2.0f));
    NUL(tfm_scale, E_DTYPE, tfm_scale(tape, f->i23, 2.0f));
    NUL(tfm_masked_fill, E_NULL, tfm_masked_fill(tape, f->f23, NULL, 0.0f));
    NUL(tfm_masked_fill, E_NULL, tfm_masked_fill(tape, NULL, f->i23, 0.0f));
    NUL(tfm_masked_fill, E_DTYPE, tfm_masked_fill(tape, f->f23, f->f23, 0.0f));
    NUL(tfm_masked_fill, E_DTYPE, tfm_masked_fill(tape, f->i23, f->i23, 0.0f));
    NUL(tfm_masked_fill, E_SHAPE, tfm_masked_fill(tape, f->f34, f->i23, 0.0f));
    /* activations */
    NUL(tfm_relu, E_NULL, tfm_relu(NULL, f->f23));
    NUL(tfm_relu, E_NULL, tfm_relu(tape, NULL));
    NUL(tfm_relu, E_DTYPE, tfm_relu(tape, f->i23));
    NUL(tfm_gelu, E_NULL, tfm_gelu(NULL, f->f23));
    NUL(tfm_gelu, E_NULL, tfm_gelu(tape, NULL));
    NUL(tfm_gelu, E_DTYPE, tfm_gelu(tape, f->i1));
    NUL(tfm_tanh, E_NULL, tfm_tanh(NULL, f->f23));
    NUL(tfm_tanh, E_NULL, tfm_tanh(tape, NULL));
    NUL(tfm_tanh, E_DTYPE, tfm_tanh(tape, f->i3d));
    /* shape */
    NUL(tfm_reshape, E_NULL, tfm_reshape(NULL, f->f23, 1, SHAPE(6)));
    NUL(tfm_reshape, E_NULL, tfm_reshape(tape, NULL, 1, SHAPE(6)));
    NUL(tfm_reshape, E_NULL, tfm_reshape(tape, f->f23, 1, NULL));
    NUL(tfm_reshape, E_ARG, tfm_reshape(tape, f->f23, 0, SHAPE(6)));
    NUL(tfm_reshape, E_ARG, tfm_reshape(tape, f->f23, 5, SHAPE(1, 1, 1, 1, 6)));
    NUL(tfm_reshape, E_ARG, tfm_reshape(tape, f->f23, 2, SHAPE(-1, -1)));
    NUL(tfm_reshape, E_SHAPE, tfm_reshape(tape, f->f23, 2, SHAPE(4, 2)));
    NUL(tfm_reshape, E_SHAPE, tfm_reshape(tape, f->f23, 2, SHAPE(-2, 3)));
    NUL(tfm_reshape, E_SHAPE, tfm_reshape(tape, f->f23, 2, SHAPE(0, 6)));
    NUL(tfm_reshape, E_SHAPE, tfm_reshape(tape, f->f23, 2, SHAPE(-1, 4)));
    NUL(tfm_reshape, E_SHAPE, tfm_reshape(tape, f->i23, 1, SHAPE(huge)));
    NUL(tfm_transpose, E_NULL, tfm_transpose(NULL, f->f23, 0, 1));
    NUL(tfm_transpose, E_NULL, tfm_transpose(tape, NULL, 0, 1));
    NUL(tfm_transpose, E_ARG, tfm_transpose(tape, f->f23, 0, 2));
    NUL(tfm_transpose, E_ARG, tfm_transpose(tape, f->f23, -3, 1));
    NUL(tfm_transpose, E_ARG, tfm_transpose(tape, f->x, INT32_MIN, 0));
    NUL(tfm_split_heads, E_NULL, tfm_split_heads(tape, NULL, 2));
    NUL(tfm_split_heads, E_NULL, tfm_split_heads(NULL, f->x, 2));
    NUL(tfm_split_heads, E_SHAPE, tfm_split_heads(tape, f->f23, 2));
    NUL(tfm_split_heads, E_ARG, tfm_split_heads(tape, f->x, 0));
    NUL(tfm_split_heads, E_ARG, tfm_split_heads(tape, f->x, -2));
    NUL(tfm_split_heads, E_SHAPE, tfm_split_heads(tape, f->x, 3));
    NUL(tfm_split_heads, E_DTYPE, tfm_split_heads(tape, f->i3d, 2));
    NUL(tfm_merge_heads, E_NULL, tfm_merge_heads(tape, NULL));
    NUL(tfm_merge_heads, E_NULL, tfm_merge_heads(NULL, f->x));
    NUL(tfm_merge_heads, E_SHAPE, tfm_merge_heads(tape, f->x));
    NUL(tfm_merge_heads, E_DTYPE, tfm_merge_heads(tape, f->i3d));
    NUL(tfm_concat, E_NULL, tfm_concat(tape, NULL, 2, 0));
    NUL(tfm_concat, E_NULL, tfm_concat(NULL, (const tfm_tensor *const[]){f->f23}, 1, 0));
    NUL(tfm_concat, E_ARG, tfm_concat(tape, (const tfm_tensor *const[]){f->f23}, 0, 0));
    NUL(tfm_concat, E_ARG, tfm_concat(tape, (const tfm_tensor *const[]){f->f23}, -1, 0));
    NUL(tfm_concat, E_ARG, tfm_concat(tape, (const tfm_tensor *const[]){f->f23}, 1, 2));
    NUL(tfm_concat, E_SHAPE, concat_of(0));
    NUL(tfm_concat, E_DTYPE, concat_of(1));
    NUL(tfm_concat, E_NULL, concat_of(2));
    NUL(tfm_concat, E_ARG, concat_of(3));
    /* normalisation, softmax */
    NUL(tfm_softmax, E_NULL, tfm_softmax(NULL, f->f23, NULL));
    NUL(tfm_softmax, E_NULL, tfm_softmax(tape, NULL, NULL));
    NUL(tfm_softmax, E_DTYPE, tfm_softmax(tape, f->i23, NULL));
    NUL(tfm_softmax, E_SHAPE, tfm_softmax(tape, f->f23, f->i3d));
    NUL(tfm_softmax, E_SHAPE, tfm_softmax(tape, f->f23, f->f34));
    NUL(tfm_log_softmax, E_NULL, tfm_log_softmax(NULL, f->f23));
    NUL(tfm_log_softmax, E_NULL, tfm_log_softmax(tape, NULL));
    NUL(tfm_log_softmax, E_DTYPE, tfm_log_softmax(tape, f->i23));
    NUL(tfm_layer_norm, E_NULL, tfm_layer_norm(NULL, f->f23, NULL, NULL, 1e-5f));
    NUL(tfm_layer_norm, E_NULL, tfm_layer_norm(tape, NULL, NULL, NULL, 1e-5f));
    NUL(tfm_layer_norm, E_DTYPE, tfm_layer_norm(tape, f->i23, NULL, NULL, 1e-5f));
    NUL(tfm_layer_norm, E_SHAPE, tfm_layer_norm(tape, f->f23, f->f2, NULL, 1e-5f));
    NUL(tfm_layer_norm, E_SHAPE, tfm_layer_norm(tape, f->f23, NULL, f->f34, 1e-5f));
    NUL(tfm_layer_norm, E_DTYPE, tfm_layer_norm(tape, f->f34, NULL, f->i1, 1e-5f));
    NUL(tfm_layer_norm, E_ARG, tfm_layer_norm(tape, f->f23, NULL, NULL, -1.0f));
    NUL(tfm_layer_norm, E_ARG, tfm_layer_norm(tape, f->f23, NULL, NULL, NAN));
    NUL(tfm_layer_norm, E_ARG, tfm_layer_norm(tape, f->f23, NULL, NULL, INFINITY));
    NUL(tfm_dropout, E_NULL, tfm_dropout(NULL, f->f23, 0.5f, 1, f->rng));
    NUL(tfm_dropout, E_NULL, tfm_dropout(tape, NULL, 0.5f, 1, f->rng));
    NUL(tfm_dropout, E_NULL, tfm_dropout(tape, f->f23, 0.5f, 1, NULL));
    NUL(tfm_dropout, E_ARG, tfm_dropout(tape, f->f23, 1.0f, 1, f->rng));
    NUL(tfm_dropout, E_ARG, tfm_dropout(tape, f->f23, -0.1f, 0, f->rng));
    NUL(tfm_dropout, E_ARG, tfm_dropout(tape, f->f23, NAN, 1, f->rng));
    NUL(tfm_dropout, E_DTYPE, tfm_dropout(tape, f->i23, 0.5f, 1, f->rng));
    /* lookup, reductions, loss */
    NUL(tfm_embedding, E_NULL, tfm_embedding(NULL, f->f32x3, f->i1));
    NUL(tfm_embedding, E_NULL, tfm_embedding(tape, NULL, f->i1));
    NUL(tfm_embedding, E_NULL, tfm_embedding(tape, f->f32x3, NULL));
    NUL(tfm_embedding, E_DTYPE, tfm_embedding(tape, f->i23, f->i1));
    NUL(tfm_embedding, E_DTYPE, tfm_embedding(tape, f->f32x3, f->f1));
    NUL(tfm_embedding, E_SHAPE, tfm_embedding(tape, f->x, f->i1));
    NUL(tfm_embedding, E_RANGE, embedding_of_id(3));
    NUL(tfm_embedding, E_RANGE, embedding_of_id(-1));
    NUL(tfm_embedding, E_RANGE, embedding_of_id(INT32_MAX));
    NUL(tfm_embedding, E_RANGE, embedding_of_id(INT32_MIN));
    NUL(tfm_sum, E_NULL, tfm_sum(NULL, f->f23));
    NUL(tfm_sum, E_NULL, tfm_sum(tape, NULL));
    NUL(tfm_sum, E_DTYPE, tfm_sum(tape, f->i23));
    NUL(tfm_mean, E_NULL, tfm_mean(NULL, f->f23));
    NUL(tfm_mean, E_NULL, tfm_mean(tape, NULL));
    NUL(tfm_mean, E_DTYPE, tfm_mean(tape, f->i1));
    NUL(tfm_cross_entropy, E_NULL, tfm_cross_entropy(NULL, f->f32x3, f->i3, -100, 0.0f));
    NUL(tfm_cross_entropy, E_NULL, tfm_cross_entropy(tape, NULL, f->i3, -100, 0.0f));
    NUL(tfm_cross_entropy, E_NULL, tfm_cross_entropy(tape, f->f32x3, NULL, -100, 0.0f));
    NUL(tfm_cross_entropy, E_DTYPE, tfm_cross_entropy(tape, f->i23, f->i1, -100, 0.0f));
    NUL(tfm_cross_entropy, E_DTYPE, tfm_cross_entropy(tape, f->f23, f->f2, -100, 0.0f));
    NUL(tfm_cross_entropy, E_SHAPE, tfm_cross_entropy(tape, f->f23, f->i23, -100, 0.0f));
    NUL(tfm_cross_entropy, E_SHAPE, tfm_cross_entropy(tape, f->f2, f->i1, -100, 0.0f));
    NUL(tfm_cross_entropy, E_ARG, tfm_cross_entropy(tape, f->f32x3, f->i3, -100, 1.0f));
    NUL(tfm_cross_entropy, E_ARG, tfm_cross_entropy(tape, f->f32x3, f->i3, -100, -0.1f));
    NUL(tfm_cross_entropy, E_ARG, tfm_cross_entropy(tape, f->f32x3, f->i3, -100, NAN));
    NUL(tfm_cross_entropy_reduced, E_NULL,
        tfm_cross_entropy_reduced(tape, NULL, f->i3, -100, 0.0f, TFM_REDUCTION_SUM, NULL));
    NUL(tfm_cross_entropy_reduced, E_ARG,
        tfm_cross_entropy_reduced(tape, f->f32x3, f->i3, -100, 0.0f, 2, NULL));
    NUL(tfm_cross_entropy_reduced, E_ARG,
        tfm_cross_entropy_reduced(tape, f->f32x3, f->i3, -100, 0.0f, -1, NULL));
    NUL(tfm_cross_entropy, E_RANGE, cross_entropy_with_target(2));
    NUL(tfm_cross_entropy, E_RANGE, cross_entropy_with_target(-1));
    NUL(tfm_cross_entropy, E_RANGE, cross_entropy_with_target(INT32_MAX));
    return -1;
}

static Suite *suite(void)
{
    return bad_input_suite("bad_input_ops", bad_calls, 145, NULL);
}

TFM_CHECK_MAIN(suite)
