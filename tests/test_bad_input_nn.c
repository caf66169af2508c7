/* Bad calls to nn.h (lib/nn): layers, attention, encoder and decoder layers
 * and stacks, positions, masks and initialisation, made with every option
 * out of range and run on what does not fit. The fixture, the table's
 * macros and the run are bad_input.h's. */
#include "bad_input.h"
#include "check_main.h"

/* --- calls that need state or options of their own ------------------------------- */

/* A whole layer or model made with changed options: NULL expected. */
static tfm_layer *attention_with(int field, double value)
{
    tfm_attention_options o = attention_options();
    switch (field) {
    case 0: o.struct_size = (uint32_t)value; break;
    case 1: o.d_model = (int64_t)value; break;
    case 2: o.heads = (int32_t)value; break;
    case 3: o.dropout = (float)value; break;
    case 4: o.trainable_scale = 1; o.scale_init = (float)value; break;
    case 5: o.head_dim = (int64_t)value; break;
    case 6: o.heads = 3; o.head_dim = (int64_t)value; break; /* 3 heads do not divide D */
    }
    tfm_layer *layer = tfm_attention_create(fx.layer_params, "new_attention", &o, fx.rng);
    tfm_layer_free(layer);
    return layer;
}

static tfm_layer *block_with(int decoder, int field, double value)
{
    tfm_block_options o = block_options();
    switch (field) {
    case 0: o.struct_size = (uint32_t)value; break;
    case 1: o.d_model = (int64_t)value; break;
    case 2: o.heads = (int32_t)value; break;
    case 3: o.d_ff = (int64_t)value; break;
    case 4: o.dropout = (float)value; break;
    case 5: o.activation = (tfm_activation)value; break;
    case 6: o.layer_norm_eps = (float)value; break;
    case 7: o.trainable_scale = 1; o.scale_init = (float)value; break;
    case 8: o.head_dim = (int64_t)value; break;
    }
    tfm_layer *layer = decoder ? tfm_decoder_layer_create(fx.layer_params, "new", &o, fx.rng)
                               : tfm_encoder_layer_create(fx.layer_params, "new", &o, fx.rng);
    tfm_layer_free(layer);
    return layer;
}

static tfm_layer *stack_with(int decoder, int32_t layers, int field, double value)
{
    tfm_block_options o = block_options();
    if (field == 1)
        o.heads = (int32_t)value;
    else if (field == 2)
        o.struct_size = (uint32_t)value;
    tfm_layer *layer = decoder ? tfm_decoder_create(fx.layer_params, "new", layers, &o, 1, fx.rng)
                               : tfm_encoder_create(fx.layer_params, "new", layers, &o, 1, fx.rng);
    tfm_layer_free(layer);
    return layer;
}

static tfm_tensor *embedding_layer_of_id(int32_t id)
{
    tfm_tensor *id_tensor = tfm_tensor_from_i32(1, SHAPE(1), &id);
    tfm_tensor *out = tfm_embedding_forward(fx.tape, fx.embedding, id_tensor);
    tfm_tensor_free(id_tensor);
    return out;
}

static tfm_tensor *positions_with(int field)
{
    return field == 0 ? tfm_positions_forward(fx.tape, fx.sinusoidal, fx.x, -1)
           : field == 1 ? tfm_positions_forward(fx.tape, fx.sinusoidal, fx.x, 1)
           : field == 2 ? tfm_positions_forward(fx.tape, fx.learned, fx.x, INT64_MAX)
                        : tfm_positions_forward(fx.tape, fx.learned, fx.f23, 0);
}

/* --- the table ------------------------------------------------------------------------ */

static int bad_calls(int index, bad_case *c)
{
    int n = 0;
    fixture *f = &fx;
    tfm_tape *tape = f->tape;
    int32_t ibuf[64] = {0};
    const int64_t huge = INT64_MAX, big = (int64_t)1 << 40;

    /* nn.h: layers */
    ST(tfm_layer_set_training, E_NULL, tfm_layer_set_training(NULL, 1));
    NUL(tfm_layer_kind, E_NULL, tfm_layer_kind(NULL));
    NUL(tfm_linear_create, E_NULL, tfm_linear_create(NULL, "l", 2, 2, 1, f->rng));
    NUL(tfm_linear_create, E_NULL, tfm_linear_create(f->layer_params, NULL, 2, 2, 1, f->rng));
    NUL(tfm_linear_create, E_NULL, tfm_linear_create(f->layer_params, "l", 2, 2, 1, NULL));
    NUL(tfm_linear_create, E_SHAPE, tfm_linear_create(f->layer_params, "l", 0, 2, 1, f->rng));
    NUL(tfm_linear_create, E_SHAPE, tfm_linear_create(f->layer_params, "l", 2, -1, 1, f->rng));
    NUL(tfm_linear_create, E_SIZE, tfm_linear_create(f->layer_params, "l", huge, huge, 0, f->rng));
    NUL(tfm_linear_create, E_SIZE, tfm_linear_create(f->layer_params, "l", big, big, 1, f->rng));
    NUL(tfm_linear_create, E_ARG, tfm_linear_create(f->layer_params, "linear", 2, 2, 1, f->rng));
    NUL(tfm_linear_create, E_ARG, tfm_linear_create(f->layer_params, long_name(), 2, 2, 1, f->rng));
    NUL(tfm_linear_forward, E_NULL, tfm_linear_forward(tape, NULL, f->x));
    NUL(tfm_linear_forward, E_ARG, tfm_linear_forward(tape, f->norm, f->x));
    NUL(tfm_linear_forward, E_SHAPE, tfm_linear_forward(tape, f->linear, f->f23));
    NUL(tfm_linear_forward, E_DTYPE, tfm_linear_forward(tape, f->linear, f->i3d));
    NUL(tfm_linear_forward, E_NULL, tfm_linear_forward(NULL, f->linear, f->x));
    NUL(tfm_linear_forward, E_NULL, tfm_linear_forward(tape, f->linear, NULL));
    NUL(tfm_embedding_create, E_NULL, tfm_embedding_create(NULL, "e", 3, 2, f->rng));
    NUL(tfm_embedding_create, E_NULL, tfm_embedding_create(f->layer_params, "e", 3, 2, NULL));
    NUL(tfm_embedding_create, E_SHAPE, tfm_embedding_create(f->layer_params, "e", 0, 2, f->rng));
    NUL(tfm_embedding_create, E_SHAPE, tfm_embedding_create(f->layer_params, "e", 3, -2, f->rng));
    NUL(tfm_embedding_create, E_SIZE, tfm_embedding_create(f->layer_params, "e", huge, 2, f->rng));
    NUL(tfm_embedding_create, E_ARG, tfm_embedding_create(f->layer_params, "embedding", 3, 2, f->rng));
    NUL(tfm_embedding_forward, E_ARG, tfm_embedding_forward(tape, f->linear, f->src));
    NUL(tfm_embedding_forward, E_NULL, tfm_embedding_forward(tape, NULL, f->src));
    NUL(tfm_embedding_forward, E_DTYPE, tfm_embedding_forward(tape, f->embedding, f->x));
    NUL(tfm_embedding_forward, E_RANGE, embedding_layer_of_id(SRC_VOCAB));
    NUL(tfm_embedding_forward, E_RANGE, embedding_layer_of_id(-5));
    NUL(tfm_layer_norm_create, E_NULL, tfm_layer_norm_create(NULL, "n", 4, 1e-5f));
    NUL(tfm_layer_norm_create, E_NULL, tfm_layer_norm_create(f->layer_params, NULL, 4, 1e-5f));
    NUL(tfm_layer_norm_create, E_ARG, tfm_layer_norm_create(f->layer_params, "n", 4, -1e-5f));
    NUL(tfm_layer_norm_create, E_ARG, tfm_layer_norm_create(f->layer_params, "n", 4, NAN));
    NUL(tfm_layer_norm_create, E_SHAPE, tfm_layer_norm_create(f->layer_params, "n", 0, 1e-5f));
    NUL(tfm_layer_norm_create, E_SIZE, tfm_layer_norm_create(f->layer_params, "n", huge, 1e-5f));
    NUL(tfm_layer_norm_forward, E_ARG, tfm_layer_norm_forward(tape, f->linear, f->x));
    NUL(tfm_layer_norm_forward, E_SHAPE, tfm_layer_norm_forward(tape, f->norm, f->f23));
    NUL(tfm_layer_norm_forward, E_NULL, tfm_layer_norm_forward(tape, f->norm, NULL));
    NUL(tfm_dropout_create, E_ARG, tfm_dropout_create(1.0f, f->rng));
    NUL(tfm_dropout_create, E_ARG, tfm_dropout_create(-0.5f, f->rng));
    NUL(tfm_dropout_create, E_ARG, tfm_dropout_create(NAN, f->rng));
    NUL(tfm_dropout_create, E_NULL, tfm_dropout_create(0.5f, NULL));
    NUL(tfm_dropout_forward, E_ARG, tfm_dropout_forward(tape, f->norm, f->x));
    NUL(tfm_dropout_forward, E_NULL, tfm_dropout_forward(tape, f->dropout, NULL));
    NUL(tfm_dropout_forward, E_DTYPE, tfm_dropout_forward(tape, f->dropout, f->i23));
    NUL(tfm_feed_forward_create, E_ARG,
        tfm_feed_forward_create(f->layer_params, "f", 4, 8, 7, 0.1f, f->rng));
    NUL(tfm_feed_forward_create, E_ARG,
        tfm_feed_forward_create(f->layer_params, "f", 4, 8, -1, 0.1f, f->rng));
    NUL(tfm_feed_forward_create, E_NULL,
        tfm_feed_forward_create(NULL, "f", 4, 8, TFM_ACTIVATION_RELU, 0.1f, f->rng));
    NUL(tfm_feed_forward_create, E_NULL,
        tfm_feed_forward_create(f->layer_params, "f", 4, 8, TFM_ACTIVATION_GELU, 0.1f, NULL));
    NUL(tfm_feed_forward_create, E_SHAPE,
        tfm_feed_forward_create(f->layer_params, "f", 4, 0, TFM_ACTIVATION_RELU, 0.1f, f->rng));
    NUL(tfm_feed_forward_create, E_ARG,
        tfm_feed_forward_create(f->layer_params, "f", 4, 8, TFM_ACTIVATION_RELU, 1.0f, f->rng));
    NUL(tfm_feed_forward_create, E_ARG,
        tfm_feed_forward_create(f->layer_params, "ff", 4, 8, TFM_ACTIVATION_RELU, 0.1f, f->rng));
    NUL(tfm_feed_forward_forward, E_ARG, tfm_feed_forward_forward(tape, f->linear, f->x));
    NUL(tfm_feed_forward_forward, E_SHAPE, tfm_feed_forward_forward(tape, f->ff, f->f23));
    NUL(tfm_feed_forward_forward, E_NULL, tfm_feed_forward_forward(tape, NULL, f->x));
    NUL(tfm_feed_forward_forward, E_NULL, tfm_feed_forward_forward(NULL, f->ff, f->x));
    /* attention */
    NUL(tfm_attention_create, E_NULL, tfm_attention_create(f->layer_params, "a", NULL, f->rng));
    NUL(tfm_attention_create, E_NULL,
        tfm_attention_create(NULL, "a", &(tfm_attention_options){0}, f->rng));
    NUL(tfm_attention_create, E_ARG, attention_with(0, 0));
    NUL(tfm_attention_create, E_ARG, attention_with(0, 4));
    NUL(tfm_attention_create, E_ARG, attention_with(1, 0));
    NUL(tfm_attention_create, E_ARG, attention_with(1, -8));
    NUL(tfm_attention_create, E_ARG, attention_with(2, 0));
    NUL(tfm_attention_create, E_ARG, attention_with(2, 3));
    NUL(tfm_attention_create, E_ARG, attention_with(2, -2));
    NUL(tfm_attention_create, E_ARG, attention_with(3, 1.0));
    NUL(tfm_attention_create, E_ARG, attention_with(3, NAN));
    NUL(tfm_attention_create, E_ARG, attention_with(4, -1.0));
    NUL(tfm_attention_create, E_ARG, attention_with(4, INFINITY));
    NUL(tfm_attention_create, E_SIZE, attention_with(1, 1e15));
    NUL(tfm_attention_create, E_ARG, attention_with(5, -1));
    NUL(tfm_attention_create, E_ARG, attention_with(5, 2147483648.0)); /* HEADS of 2^31 */
    NUL(tfm_attention_create, E_ARG, attention_with(6, 0));  /* then heads must divide D */
    NUL(tfm_attention_forward, E_NULL, tfm_attention_forward(tape, NULL, f->x, f->x, NULL, NULL, NULL));
    NUL(tfm_attention_forward, E_ARG, tfm_attention_forward(tape, f->linear, f->x, f->x, NULL, NULL, NULL));
    NUL(tfm_attention_forward, E_NULL, tfm_attention_forward(tape, f->attention, NULL, f->x, NULL, NULL, NULL));
    NUL(tfm_attention_forward, E_NULL, tfm_attention_forward(NULL, f->attention, f->x, f->x, NULL, NULL, NULL));
    NUL(tfm_attention_forward, E_SHAPE,
        tfm_attention_forward(tape, f->attention, f->f23, f->f23, NULL, NULL, NULL));
    NUL(tfm_attention_forward, E_SHAPE,
        tfm_attention_forward(tape, f->attention, f->x, f->mem3, NULL, NULL, NULL));
    NUL(tfm_attention_forward, E_SHAPE,
        tfm_attention_forward(tape, f->attention, f->x, f->x, f->i23, NULL, NULL));
    NUL(tfm_attention_forward, E_DTYPE,
        tfm_attention_forward(tape, f->attention, f->i3d, f->i3d, NULL, NULL, NULL));
    /* encoder and decoder */
    NUL(tfm_encoder_layer_create, E_NULL, tfm_encoder_layer_create(f->layer_params, "e", NULL, f->rng));
    NUL(tfm_encoder_layer_create, E_NULL,
        tfm_encoder_layer_create(f->layer_params, NULL, &(tfm_block_options){0}, f->rng));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 0, 0));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 1, 0));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 2, 3));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 3, 0));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 4, -0.5));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 5, 4));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 6, -1));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 7, NAN));
    NUL(tfm_encoder_layer_create, E_ARG, block_with(0, 8, -4));
    NUL(tfm_encoder_layer_create, E_SIZE, block_with(0, 3, 1e15));
    NUL(tfm_decoder_layer_create, E_NULL, tfm_decoder_layer_create(NULL, "d", NULL, f->rng));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 0, 8));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 1, -1));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 2, 0));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 3, -16));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 4, 2.0));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 5, -1));
    NUL(tfm_decoder_layer_create, E_ARG, block_with(1, 6, INFINITY));
    NUL(tfm_encoder_layer_forward, E_ARG, tfm_encoder_layer_forward(tape, f->decoder_layer, f->x, NULL, NULL));
    NUL(tfm_encoder_layer_forward, E_NULL, tfm_encoder_layer_forward(tape, f->encoder_layer, NULL, NULL, NULL));
    NUL(tfm_encoder_layer_forward, E_SHAPE,
        tfm_encoder_layer_forward(tape, f->encoder_layer, f->f23, NULL, NULL));
    NUL(tfm_encoder_layer_forward, E_SHAPE,
        tfm_encoder_layer_forward(tape, f->encoder_layer, f->x, f->f34, NULL));
    NUL(tfm_decoder_layer_forward, E_ARG,
        tfm_decoder_layer_forward(tape, f->encoder_layer, f->x, f->x, NULL, NULL, NULL, NULL));
    NUL(tfm_decoder_layer_forward, E_NULL,
        tfm_decoder_layer_forward(tape, f->decoder_layer, f->x, NULL, NULL, NULL, NULL, NULL));
    NUL(tfm_decoder_layer_forward, E_SHAPE,
        tfm_decoder_layer_forward(tape, f->decoder_layer, f->x, f->mem3, NULL, NULL, NULL, NULL));
    NUL(tfm_decoder_layer_forward, E_SHAPE,
        tfm_decoder_layer_forward(tape, f->decoder_layer, f->x, f->x, f->f34, NULL, NULL, NULL));
    NUL(tfm_decoder_layer_forward, E_SHAPE,
        tfm_decoder_layer_forward(tape, f->decoder_layer, f->x, f->x, NULL, f->i23, NULL, NULL));
    NUL(tfm_encoder_create, E_ARG, stack_with(0, -1, 0, 0));
    NUL(tfm_encoder_create, E_ARG, stack_with(0, 65537, 0, 0));
    NUL(tfm_encoder_create, E_ARG, stack_with(0, INT32_MIN, 0, 0));
    NUL(tfm_encoder_create, E_ARG, stack_with(0, 1, 1, 5));
    NUL(tfm_encoder_create, E_ARG, stack_with(0, 1, 2, 1));
    NUL(tfm_encoder_create, E_NULL, tfm_encoder_create(f->layer_params, "e", 1, NULL, 1, f->rng));
    NUL(tfm_decoder_create, E_ARG, stack_with(1, -2, 0, 0));
    NUL(tfm_decoder_create, E_ARG, stack_with(1, INT32_MAX, 0, 0));
    NUL(tfm_decoder_create, E_ARG, stack_with(1, 2, 1, 16));
    NUL(tfm_decoder_create, E_NULL, tfm_decoder_create(f->layer_params, "d", 1, &(tfm_block_options){0}, 1, NULL));
    NUL(tfm_encoder_forward, E_ARG, tfm_encoder_forward(tape, f->decoder, f->x, NULL, NULL));
    NUL(tfm_encoder_forward, E_SHAPE, tfm_encoder_forward(tape, f->encoder, f->mem3, f->f34, NULL));
    NUL(tfm_encoder_forward, E_SHAPE, tfm_encoder_forward(tape, f->encoder, f->f34, NULL, NULL));
    NUL(tfm_encoder_forward, E_NULL, tfm_encoder_forward(NULL, f->encoder, f->x, NULL, NULL));
    NUL(tfm_decoder_forward, E_ARG, tfm_decoder_forward(tape, f->encoder, f->x, f->x, NULL, NULL, NULL, NULL));
    NUL(tfm_decoder_forward, E_SHAPE, tfm_decoder_forward(tape, f->decoder, f->x, f->mem3, NULL, NULL, NULL, NULL));
    NUL(tfm_decoder_forward, E_SHAPE, tfm_decoder_forward(tape, f->decoder, f->x, f->x, f->i3d, NULL, NULL, NULL));
    NUL(tfm_decoder_forward, E_NULL, tfm_decoder_forward(tape, f->decoder, NULL, f->x, NULL, NULL, NULL, NULL));
    /* positions */
    NUL(tfm_sinusoidal_positions_create, E_ARG, tfm_sinusoidal_positions_create(0, 8));
    NUL(tfm_sinusoidal_positions_create, E_ARG, tfm_sinusoidal_positions_create(8, -1));
    NUL(tfm_sinusoidal_positions_create, E_SIZE, tfm_sinusoidal_positions_create(huge, 8));
    NUL(tfm_sinusoidal_positions_create, E_SIZE, tfm_sinusoidal_positions_create(big, big));
    NUL(tfm_learned_positions_create, E_NULL, tfm_learned_positions_create(NULL, "p", 4, 8, f->rng));
    NUL(tfm_learned_positions_create, E_NULL,
        tfm_learned_positions_create(f->layer_params, "p", 4, 8, NULL));
    NUL(tfm_learned_positions_create, E_ARG,
        tfm_learned_positions_create(f->layer_params, "p", -4, 8, f->rng));
    NUL(tfm_learned_positions_create, E_SIZE,
        tfm_learned_positions_create(f->layer_params, "p", big, big, f->rng));
    NUL(tfm_learned_positions_create, E_ARG,
        tfm_learned_positions_create(f->layer_params, "positions", 4, 8, f->rng));
    NUL(tfm_positions_forward, E_RANGE, positions_with(0));
    NUL(tfm_positions_forward, E_RANGE, positions_with(1));
    NUL(tfm_positions_forward, E_RANGE, positions_with(2));
    NUL(tfm_positions_forward, E_SHAPE, positions_with(3));
    NUL(tfm_positions_forward, E_ARG, tfm_positions_forward(tape, f->linear, f->x, 0));
    NUL(tfm_positions_forward, E_NULL, tfm_positions_forward(tape, NULL, f->x, 0));
    NUL(tfm_positions_forward, E_NULL, tfm_positions_forward(tape, f->sinusoidal, NULL, 0));
    /* masks */
    NUL(tfm_mask_causal, E_ARG, tfm_mask_causal(NULL, 0, TFM_I32));
    NUL(tfm_mask_causal, E_ARG, tfm_mask_causal(tape, 0, TFM_I32));
    NUL(tfm_mask_causal, E_ARG, tfm_mask_causal(tape, -4, TFM_F32));
    NUL(tfm_mask_causal, E_ARG, tfm_mask_causal(tape, 4, 2));
    NUL(tfm_mask_causal, E_ARG, tfm_mask_causal(tape, 4, -1));
    NUL(tfm_mask_causal, E_SIZE, tfm_mask_causal(tape, huge, TFM_I32));
    NUL(tfm_mask_causal, E_SIZE, tfm_mask_causal(tape, big, TFM_F32));
    NUL(tfm_mask_padding, E_NULL, tfm_mask_padding(tape, NULL, 0, TFM_I32));
    NUL(tfm_mask_padding, E_DTYPE, tfm_mask_padding(NULL, f->f23, 0, TFM_I32));
    NUL(tfm_mask_padding, E_DTYPE, tfm_mask_padding(tape, f->f23, 0, TFM_I32));
    NUL(tfm_mask_padding, E_SHAPE, tfm_mask_padding(tape, f->i3d, 0, TFM_I32));
    NUL(tfm_mask_padding, E_SHAPE, tfm_mask_padding(tape, f->i1, 0, TFM_F32));
    NUL(tfm_mask_padding, E_ARG, tfm_mask_padding(tape, f->src, 0, 7));
    NUL(tfm_mask_combine, E_NULL, tfm_mask_combine(tape, NULL, f->i23));
    NUL(tfm_mask_combine, E_NULL, tfm_mask_combine(tape, f->i23, NULL));
    NUL(tfm_mask_combine, E_DTYPE, tfm_mask_combine(NULL, f->i23, f->f23));
    NUL(tfm_mask_from_torch_bool, E_NULL, tfm_mask_from_torch_bool(tape, NULL, 2, SHAPE(2, 3), TFM_I32));
    NUL(tfm_mask_from_torch_bool, E_NULL, tfm_mask_from_torch_bool(tape, (const uint8_t *)ibuf, 2, NULL, TFM_I32));
    NUL(tfm_mask_from_torch_bool, E_ARG, tfm_mask_from_torch_bool(tape, (const uint8_t *)ibuf, 0, SHAPE(2), TFM_I32));
    NUL(tfm_mask_from_torch_bool, E_SHAPE, tfm_mask_from_torch_bool(tape, (const uint8_t *)ibuf, 2, SHAPE(2, -3), TFM_F32));
    NUL(tfm_mask_from_torch_bool, E_ARG, tfm_mask_from_torch_bool(tape, (const uint8_t *)ibuf, 2, SHAPE(2, 3), 7));
    NUL(tfm_mask_combine, E_DTYPE, tfm_mask_combine(tape, f->i23, f->f23));
    NUL(tfm_mask_combine, E_SHAPE, tfm_mask_combine(tape, f->f23, f->f34));
    /* initialisation */
    ST(tfm_init_xavier_uniform, E_NULL, tfm_init_xavier_uniform(NULL, 1.0f, f->rng));
    ST(tfm_init_xavier_uniform, E_NULL, tfm_init_xavier_uniform(f->f34, 1.0f, NULL));
    ST(tfm_init_xavier_uniform, E_DTYPE, tfm_init_xavier_uniform(f->i23, 1.0f, f->rng));
    ST(tfm_init_xavier_uniform, E_SHAPE, tfm_init_xavier_uniform(f->f2, 1.0f, f->rng));
    ST(tfm_init_xavier_uniform, E_ARG, tfm_init_xavier_uniform(f->f34, NAN, f->rng));
    ST(tfm_init_xavier_uniform, E_ARG, tfm_init_xavier_uniform(f->f34, -INFINITY, f->rng));
    ST(tfm_init_uniform, E_NULL, tfm_init_uniform(NULL, 0.0f, 1.0f, f->rng));
    ST(tfm_init_uniform, E_NULL, tfm_init_uniform(f->f34, 0.0f, 1.0f, NULL));
    ST(tfm_init_uniform, E_DTYPE, tfm_init_uniform(f->i23, 0.0f, 1.0f, f->rng));
    ST(tfm_init_uniform, E_ARG, tfm_init_uniform(f->f34, 1.0f, 0.0f, f->rng));
    ST(tfm_init_uniform, E_ARG, tfm_init_uniform(f->f34, -INFINITY, INFINITY, f->rng));
    ST(tfm_init_uniform, E_ARG, tfm_init_uniform(f->f34, NAN, 1.0f, f->rng));
    ST(tfm_init_uniform, E_ARG, tfm_init_uniform(f->f34, -FLT_MAX, FLT_MAX, f->rng));
    ST(tfm_init_normal, E_NULL, tfm_init_normal(NULL, 0.0f, 1.0f, f->rng));
    ST(tfm_init_normal, E_NULL, tfm_init_normal(f->f34, 0.0f, 1.0f, NULL));
    ST(tfm_init_normal, E_DTYPE, tfm_init_normal(f->i1, 0.0f, 1.0f, f->rng));
    ST(tfm_init_normal, E_ARG, tfm_init_normal(f->f34, 0.0f, -2.0f, f->rng));
    ST(tfm_init_normal, E_ARG, tfm_init_normal(f->f34, NAN, 1.0f, f->rng));
    ST(tfm_init_normal, E_ARG, tfm_init_normal(f->f34, 0.0f, INFINITY, f->rng));
    return -1;
}

/* Frees and options-inits of NULL, which must record no error. */
static void free_nulls(void)
{
    tfm_layer_free(NULL);
    tfm_attention_options_init_sized(NULL, sizeof(tfm_attention_options));
    tfm_block_options_init_sized(NULL, sizeof(tfm_block_options));
}

static Suite *suite(void)
{
    return bad_input_suite("bad_input_nn", bad_calls, 185, free_nulls);
}

TFM_CHECK_MAIN(suite)
