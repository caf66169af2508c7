/* Bad calls to model.h and training.h (lib/model): models made with every
 * option out of range, run on what does not fit, saved and loaded from bad
 * paths and forged files (their tokenizers too), training states. The
 * fixture, the table's macros and the run are bad_input.h's. */
#include "bad_input.h"
#include "check_main.h"

/* --- calls that need state or options of their own ------------------------------- */

static tfm_model *model_with(int field, double value)
{
    tfm_model_options o = model_options();
    switch (field) {
    case 0: o.struct_size = (uint32_t)value; break;
    case 1: o.src_vocab = (int64_t)value; break;
    case 2: o.tgt_vocab = (int64_t)value; break;
    case 3: o.max_src_len = (int64_t)value; break;
    case 4: o.max_tgt_len = (int64_t)value; break;
    case 5: o.share_embeddings = 1; o.tgt_vocab = SRC_VOCAB + 1; break;
    case 6: o.positions = (tfm_positions)value; break;
    case 7: o.embedding_scale = (tfm_embedding_scale)value; break;
    case 8: o.encoder_layers = (int32_t)value; break;
    case 9: o.decoder_layers = (int32_t)value; break;
    case 10: o.heads = (int32_t)value; break;
    case 11: o.d_ff = (int64_t)value; break;
    case 12: o.dropout = (float)value; break;
    case 13: o.embedding_dropout = (float)value; break;
    case 14: o.trainable_scale = 1; o.scale_init = (float)value; break;
    case 15: o.d_model = (int64_t)value; break;
    case 16: o.activation = (tfm_activation)value; break;
    case 17: o.layer_norm_eps = (float)value; break;
    case 18: o.norm_first = (int32_t)value; break;
    case 19: o.bias = (int32_t)value; break;
    case 20: o.fused_qkv = (int32_t)value; break;
    case 21: o.trainable_scale = (int32_t)value; break;
    case 22: o.final_norm = (int32_t)value; break;
    case 23: o.share_embeddings = (int32_t)value; break;
    case 24: o.scale_init = (float)value; break; /* saved even when unused */
    case 25: o.dropout = (float)value; break;
    case 26: o.max_src_len = o.max_tgt_len = (int64_t)value; o.d_model = (int64_t)value; break;
    case 27: o.max_tgt_len = (int64_t)value; break; /* tables far larger than the model */
    case 28: o.position_offset = (int64_t)value; break;
    case 29: o.embedding_norm = (int32_t)value; break;
    case 30: o.feed_forward_bias = (int32_t)value; break;
    case 31: o.rms_norm = (int32_t)value; break;
    case 32: o.gated_feed_forward = (int32_t)value; break;
    case 33: o.unscaled_attention = (int32_t)value; break;
    case 34: o.unscaled_attention = 1; o.trainable_scale = (int32_t)value; break;
    case 35: o.relative_attention_buckets = (int32_t)value;
             o.relative_attention_max_distance = 128; break;
    case 36: o.relative_attention_buckets = 32;
             o.relative_attention_max_distance = (int32_t)value; break;
    case 37: o.generator_rescale = (int32_t)value; break;
    case 38: o.head_dim = (int64_t)value; break;
    case 39: o.heads = 3; o.head_dim = (int64_t)value; break;
    }
    tfm_model *model = tfm_model_create(&o);
    tfm_model_free(model);
    return model;
}

static tfm_tensor *model_decode_on(const int32_t *values, int64_t count)
{
    tfm_tensor *tgt = tfm_tensor_from_i32(2, SHAPE(B, count), values);
    tfm_tensor *memory = tfm_model_encode(fx.tape, fx.model, fx.src, NULL, NULL);
    tfm_tensor *logits = tfm_model_decode(fx.tape, fx.model, tgt, memory, NULL, NULL, NULL, NULL);
    tfm_tensor_free(tgt);
    return logits;
}

static tfm_status model_metadata(int64_t count, const char *key)
{
    char path[160];
    snprintf(path, sizeof path, "%s/model_metadata.safetensors", fx.dir);
    return tfm_model_save_with_metadata(fx.model, path, count, (const char *const[]){key},
                                        (const char *const[]){"value"});
}

static tfm_status training_save_with(int field)
{
    char path[160];
    snprintf(path, sizeof path, "%s/training_new.safetensors", fx.dir);
    const tfm_rng *rngs[1] = {fx.rng};
    tfm_optimizer_options o = optimizer_options(TFM_OPTIMIZER_ADAM);
    tfm_optimizer *other = tfm_optimizer_create(fx.small, &o);
    tfm_status s = field == 0   ? tfm_training_save(path, fx.model, fx.adam, -1, rngs, 0, NULL, NULL)
                   : field == 1 ? tfm_training_save(path, fx.model, fx.adam, 1, NULL, 0, NULL, NULL)
                   : field == 2 ? tfm_training_save(path, fx.model, other, 0, NULL, 0, NULL, NULL)
                   : tfm_training_save(path, fx.model, fx.adam, 0, NULL, 1,
                                       (const char *const[]){"tfm.mine"},
                                       (const char *const[]){"v"});
    tfm_optimizer_free(other);
    return s;
}

static tfm_status training_load_with(int field)
{
    tfm_rng *rngs[2] = {fx.rng, fx.rng};
    tfm_model_options mo = model_options();
    mo.d_ff = 8; /* another model */
    tfm_model *other = tfm_model_create(&mo);
    tfm_optimizer_options sgd = optimizer_options(TFM_OPTIMIZER_SGD);
    sgd.momentum = 0.9f;
    tfm_optimizer *sgd_opt = tfm_optimizer_create(fx.params, &sgd);
    tfm_status s = field == 0   ? tfm_training_load(fx.training_path, fx.model, fx.adam, 2, rngs)
                   : field == 1 ? tfm_training_load(fx.training_path, other, fx.adam, 1, rngs)
                   : field == 2 ? tfm_training_load(fx.training_path, fx.model, sgd_opt, 1, rngs)
                   : field == 3 ? tfm_training_load(fx.model_path, fx.model, fx.adam, 1, rngs)
                                : tfm_training_load(fx.training_path, fx.model, fx.adam, 1, NULL);
    tfm_optimizer_free(sgd_opt);
    tfm_model_free(other);
    return s;
}

/* tfm_model_option into a 96-byte buffer declared value_size bytes long,
 * with or without somewhere for the name. */
static tfm_status option_of(const tfm_model *model, int32_t index, int with_name,
                            int64_t value_size)
{
    const char *name = NULL;
    char value[96];
    return tfm_model_option(model, index, with_name ? &name : NULL, value, value_size);
}

/* --- the table ------------------------------------------------------------------------ */

static int bad_calls(int index, bad_case *c)
{
    int n = 0;
    fixture *f = &fx;
    tfm_tape *tape = f->tape;

    /* model.h */
    NUL(tfm_model_create, E_NULL, tfm_model_create(NULL));
    NUL(tfm_model_create, E_ARG, model_with(0, 0));
    NUL(tfm_model_create, E_ARG, model_with(0, 8));
    NUL(tfm_model_create, E_ARG, model_with(1, 0));
    NUL(tfm_model_create, E_ARG, model_with(1, -11));
    NUL(tfm_model_create, E_ARG, model_with(2, 0));
    NUL(tfm_model_create, E_ARG, model_with(3, -1));
    NUL(tfm_model_create, E_ARG, model_with(4, 0));
    NUL(tfm_model_create, E_ARG, model_with(5, 0));
    NUL(tfm_model_create, E_ARG, model_with(6, 5));
    NUL(tfm_model_create, E_ARG, model_with(6, -1));
    NUL(tfm_model_create, E_ARG, model_with(7, 3));
    NUL(tfm_model_create, E_ARG, model_with(7, -1));
    NUL(tfm_model_create, E_ARG, model_with(8, -1));
    NUL(tfm_model_create, E_ARG, model_with(9, INT32_MIN));
    NUL(tfm_model_create, E_ARG, model_with(10, 3));
    NUL(tfm_model_create, E_ARG, model_with(11, 0));
    NUL(tfm_model_create, E_ARG, model_with(12, 1.0));
    NUL(tfm_model_create, E_ARG, model_with(13, 1.0));
    NUL(tfm_model_create, E_ARG, model_with(14, NAN));
    NUL(tfm_model_create, E_ARG, model_with(15, 0));
    NUL(tfm_model_create, E_ARG, model_with(16, 9));
    NUL(tfm_model_create, E_ARG, model_with(17, NAN));
    NUL(tfm_model_create, E_ARG, model_with(1, 1e18));
    NUL(tfm_model_create, E_ARG, model_with(4, 1e18));
    NUL(tfm_model_create, E_ARG, model_with(11, 1e18));
    /* options a model file could not carry: refused when made, not when
     * its checkpoint is read back */
    NUL(tfm_model_create, E_ARG, model_with(18, 2));
    NUL(tfm_model_create, E_ARG, model_with(19, -1));
    NUL(tfm_model_create, E_ARG, model_with(20, 7));
    NUL(tfm_model_create, E_ARG, model_with(21, 2));
    NUL(tfm_model_create, E_ARG, model_with(22, 3));
    NUL(tfm_model_create, E_ARG, model_with(23, 2));
    NUL(tfm_model_create, E_ARG, model_with(13, -1.5));
    NUL(tfm_model_create, E_ARG, model_with(13, NAN));
    NUL(tfm_model_create, E_ARG, model_with(24, -1.0));
    NUL(tfm_model_create, E_ARG, model_with(24, 1e31));
    NUL(tfm_model_create, E_ARG, model_with(17, 2.0));
    NUL(tfm_model_create, E_ARG, model_with(8, 4097));
    NUL(tfm_model_create, E_ARG, model_with(9, 4097));
    NUL(tfm_model_create, E_ARG, model_with(17, 1e-40));  /* subnormal */
    NUL(tfm_model_create, E_ARG, model_with(25, 1e-42));
    NUL(tfm_model_create, E_ARG, model_with(13, -1e-41));
    NUL(tfm_model_create, E_ARG, model_with(26, 2147483648.0)); /* tables of 2^63 values */
    NUL(tfm_model_create, E_SIZE, model_with(27, 1000000));
    NUL(tfm_model_create, E_ARG, model_with(28, -1));
    NUL(tfm_model_create, E_ARG, model_with(28, 2147483649.0));
    NUL(tfm_model_create, E_SIZE, model_with(28, 1000000)); /* offset rows count as positions */
    NUL(tfm_model_create, E_ARG, model_with(29, 2));
    NUL(tfm_model_create, E_ARG, model_with(30, -1));
    NUL(tfm_model_create, E_ARG, model_with(31, 2));
    NUL(tfm_model_create, E_ARG, model_with(32, -1));
    NUL(tfm_model_create, E_ARG, model_with(33, 2));
    NUL(tfm_model_create, E_ARG, model_with(34, 1)); /* unscaled has no scale */
    NUL(tfm_model_create, E_ARG, model_with(35, 2));  /* too few to halve twice */
    NUL(tfm_model_create, E_ARG, model_with(35, 65537));
    NUL(tfm_model_create, E_ARG, model_with(36, 16)); /* not past the exact half */
    NUL(tfm_model_create, E_ARG, model_with(36, 0));
    NUL(tfm_model_create, E_ARG, model_with(37, 2));
    NUL(tfm_model_create, E_ARG, model_with(38, -1));
    NUL(tfm_model_create, E_ARG, model_with(38, 2147483649.0)); /* past a file's bound */
    NUL(tfm_model_create, E_ARG, model_with(38, 1073741825.0)); /* 2 heads of it past 2^31 */
    NUL(tfm_model_create, E_ARG, model_with(39, 0));
    NUL(tfm_model_params, E_NULL, tfm_model_params(NULL));
    NEG(tfm_model_parameter_count, E_NULL, tfm_model_parameter_count(NULL));
    ST(tfm_model_set_training, E_NULL, tfm_model_set_training(NULL, 0));
    NUL(tfm_model_encode, E_NULL, tfm_model_encode(tape, NULL, f->src, NULL, NULL));
    NUL(tfm_model_encode, E_NULL, tfm_model_encode(NULL, f->model, f->src, NULL, NULL));
    NUL(tfm_model_encode, E_NULL, tfm_model_encode(tape, f->model, NULL, NULL, NULL));
    NUL(tfm_model_encode, E_DTYPE, tfm_model_encode(tape, f->model, f->x, NULL, NULL));
    NUL(tfm_model_encode, E_SHAPE, tfm_model_encode(tape, f->model, f->i3d, NULL, NULL));
    NUL(tfm_model_encode, E_RANGE, tfm_model_encode(tape, f->model, f->long_src, NULL, NULL));
    NUL(tfm_model_encode, E_SHAPE, tfm_model_encode(tape, f->model, f->src, f->f34, NULL));
    ST(tfm_model_encode, E_RANGE, run_on_ids((const int32_t[]){1, SRC_VOCAB}, 2, 0));
    ST(tfm_model_encode, E_RANGE, run_on_ids((const int32_t[]){-1, 1}, 2, 0));
    NUL(tfm_model_decode, E_NULL, tfm_model_decode(tape, NULL, f->tgt, f->x, NULL, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_NULL, tfm_model_decode(tape, f->model, f->tgt, NULL, NULL, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_NULL, tfm_model_decode(tape, f->model, NULL, f->x, NULL, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_SHAPE, tfm_model_decode(tape, f->model, f->tgt, f->mem3, NULL, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_SHAPE, tfm_model_decode(tape, f->model, f->tgt, f->f23, NULL, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_SHAPE, tfm_model_decode(tape, f->model, f->tgt, f->x, f->f23, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_DTYPE, tfm_model_decode(tape, f->model, f->x, f->x, NULL, NULL, NULL, NULL));
    NUL(tfm_model_decode, E_RANGE, model_decode_on((const int32_t[]){1, 2, 3, TGT_VOCAB}, 2));
    NUL(tfm_model_decode, E_RANGE, model_decode_on((const int32_t[]){1, 2, 3, 4, 5, 6, 7, 8, 1, 2,
                                                                      3, 4},
                                                    6));
    NUL(tfm_model_forward, E_NULL, tfm_model_forward(tape, NULL, f->src, f->tgt, NULL, NULL, NULL, NULL, NULL, NULL));
    NUL(tfm_model_forward, E_NULL, tfm_model_forward(tape, f->model, NULL, f->tgt, NULL, NULL, NULL, NULL, NULL, NULL));
    NUL(tfm_model_forward, E_NULL, tfm_model_forward(tape, f->model, f->src, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
    NUL(tfm_model_forward, E_SHAPE,
        tfm_model_forward(tape, f->model, f->src, f->i3d, NULL, NULL, NULL, NULL, NULL, NULL));
    NUL(tfm_model_forward, E_SHAPE,
        tfm_model_forward(tape, f->model, f->src, f->tgt, NULL, f->f23, NULL, NULL, NULL, NULL));
    ST(tfm_model_get_options, E_NULL, tfm_model_get_options(NULL, &(tfm_model_options){0}));
    ST(tfm_model_get_options, E_NULL, tfm_model_get_options(f->model, NULL));
    ST(tfm_model_get_options, E_ARG, tfm_model_get_options(f->model, &(tfm_model_options){0}));
    ST(tfm_model_set_shard, E_NULL, tfm_model_set_shard(NULL, 0, 1));
    ST(tfm_model_set_shard, E_ARG, tfm_model_set_shard(f->model, 1, 1));
    ST(tfm_model_set_shard, E_ARG, tfm_model_set_shard(f->model, 0, INT64_MIN));
    ST(tfm_model_set_shard, E_ARG, tfm_model_set_shard(f->model, (int64_t)1 << 40, (int64_t)1 << 41));
    ST(tfm_model_option, E_NULL, option_of(NULL, 0, 1, 96));
    ST(tfm_model_option, E_NULL, option_of(f->model, 0, 0, 96));
    ST(tfm_model_option, E_NULL, tfm_model_option(f->model, 0, &(const char *){0}, NULL, 96));
    ST(tfm_model_option, E_RANGE, option_of(f->model, -1, 1, 96));
    ST(tfm_model_option, E_RANGE, option_of(f->model, tfm_model_option_count(), 1, 96));
    ST(tfm_model_option, E_SIZE, option_of(f->model, 0, 1, 1));
    ST(tfm_model_option, E_SIZE, option_of(f->model, 0, 1, -5));
    NEG(tfm_model_src_vocab, E_NULL, tfm_model_src_vocab(NULL));
    NEG(tfm_model_tgt_vocab, E_NULL, tfm_model_tgt_vocab(NULL));
    NEG(tfm_model_max_src_len, E_NULL, tfm_model_max_src_len(NULL));
    NEG(tfm_model_max_tgt_len, E_NULL, tfm_model_max_tgt_len(NULL));
    NEG(tfm_model_d_model, E_NULL, tfm_model_d_model(NULL));
    ST(tfm_model_set_tokenizers, E_NULL, tfm_model_set_tokenizers(NULL, f->tokenizer, NULL));
    ST(tfm_model_set_tokenizers, E_NULL, tfm_model_set_tokenizers(f->model, NULL, f->tokenizer));
    ST(tfm_model_set_tokenizers, E_ARG, tfm_model_set_tokenizers(f->model, f->tokenizer12, NULL));
    ST(tfm_model_set_tokenizers, E_ARG, tfm_model_set_tokenizers(f->model, f->tokenizer10, NULL));
    ST(tfm_model_set_tokenizers, E_ARG,
       tfm_model_set_tokenizers(f->model, f->tokenizer, f->tokenizer10));
    ST(tfm_model_save, E_NULL, tfm_model_save(NULL, f->model_path));
    ST(tfm_model_save, E_NULL, tfm_model_save(f->model, NULL));
    ST(tfm_model_save, E_ARG, tfm_model_save(f->model, ""));
    ST(tfm_model_save, E_IO, tfm_model_save(f->model, f->missing_dir_path));
    ST(tfm_model_save, E_IO, tfm_model_save(f->model, f->folder_path));
    ST(tfm_model_save_with_metadata, E_ARG, model_metadata(1, "tfm.d_model"));
    ST(tfm_model_save_with_metadata, E_ARG, model_metadata(-1, "k"));
    ST(tfm_model_save_with_metadata, E_ARG, model_metadata(1, ""));
    ST(tfm_model_save_with_metadata, E_NULL, model_metadata(1, NULL));
    NUL(tfm_model_load, E_NULL, tfm_model_load(NULL));
    NUL(tfm_model_load, E_IO, tfm_model_load(""));
    NUL(tfm_model_load, E_IO, tfm_model_load(f->missing_path));
    NUL(tfm_model_load, E_IO, tfm_model_load(f->folder_path));
    NUL(tfm_model_load, E_FORMAT, tfm_model_load(f->empty_path));
    NUL(tfm_model_load, E_FORMAT, tfm_model_load(f->text_path));
    NUL(tfm_model_load, E_FORMAT, tfm_model_load(f->params_path));
    NUL(tfm_model_load, E_FORMAT, tfm_model_load(f->adam_path));
    /* the tokenizers a model file carries, forged */
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", ""));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", "QUJD!EVG"));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", "QUJDREV"));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", "AB=C"));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", "QUJDREVG"));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", "VEZNLUJCUEX//////////w=="));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", f->oversized_base64));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", f->base64_12));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.tokenizer", NULL));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.target_tokenizer", f->base64_10));
    NUL(tfm_model_load, E_FORMAT, load_forged("tfm.target_tokenizer", "AAAA"));

    /* training.h */
    ST(tfm_training_save, E_NULL, tfm_training_save(NULL, f->model, f->adam, 0, NULL, 0, NULL, NULL));
    ST(tfm_training_save, E_NULL, tfm_training_save(f->missing_path, NULL, f->adam, 0, NULL, 0, NULL, NULL));
    ST(tfm_training_save, E_NULL, tfm_training_save(f->missing_path, f->model, NULL, 0, NULL, 0, NULL, NULL));
    ST(tfm_training_save, E_IO, tfm_training_save(f->missing_dir_path, f->model, f->adam, 0, NULL, 0, NULL, NULL));
    ST(tfm_training_save, E_IO, tfm_training_save(f->folder_path, f->model, f->adam, 0, NULL, 0, NULL, NULL));
    ST(tfm_training_save, E_ARG, training_save_with(0));
    ST(tfm_training_save, E_NULL, training_save_with(1));
    ST(tfm_training_save, E_ARG, training_save_with(2));
    ST(tfm_training_save, E_ARG, training_save_with(3));
    ST(tfm_training_load, E_NULL, tfm_training_load(NULL, f->model, f->adam, 0, NULL));
    ST(tfm_training_load, E_NULL, tfm_training_load(f->training_path, NULL, f->adam, 0, NULL));
    ST(tfm_training_load, E_NULL, tfm_training_load(f->training_path, f->model, NULL, 0, NULL));
    ST(tfm_training_load, E_IO, tfm_training_load(f->missing_path, f->model, f->adam, 0, NULL));
    ST(tfm_training_load, E_IO, tfm_training_load(f->folder_path, f->model, f->adam, 0, NULL));
    ST(tfm_training_load, E_FORMAT, tfm_training_load(f->text_path, f->model, f->adam, 0, NULL));
    ST(tfm_training_load, E_ARG, training_load_with(0));
    ST(tfm_training_load, E_ARG, training_load_with(1));
    ST(tfm_training_load, E_ARG, training_load_with(2));
    ST(tfm_training_load, E_FORMAT, training_load_with(3));
    ST(tfm_training_load, E_NULL, training_load_with(4));
    return -1;
}

/* Frees and options-inits of NULL, which must record no error. */
static void free_nulls(void)
{
    tfm_model_free(NULL);
    tfm_model_options_init_sized(NULL, sizeof(tfm_model_options));
}

static Suite *suite(void)
{
    return bad_input_suite("bad_input_model", bad_calls, 160, free_nulls);
}

TFM_CHECK_MAIN(suite)
