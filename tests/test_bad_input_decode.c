/* Bad calls to decode.h (lib/decode): decodings made with every option out
 * of range, run on sources and buffers that do not fit. The fixture, the
 * table's macros and the run are bad_input.h's. */
#include "bad_input.h"
#include "check_main.h"

/* --- calls that need state or options of their own ------------------------------- */

static tfm_decoding *decoding_with(tfm_decode_strategy strategy, int field, double value)
{
    tfm_decode_options o = decode_options(strategy);
    int64_t max_batch = B, max_src_len = S;
    switch (field) {
    case 0: o.struct_size = (uint32_t)value; break;
    case 1: o.strategy = (tfm_decode_strategy)value; break;
    case 2: o.max_length = (int32_t)value; break;
    case 3: o.bos_id = (int32_t)value; break;
    case 4: o.eos_id = (int32_t)value; break;
    case 5: o.src_pad_id = (int32_t)value; break;
    case 6: o.temperature = (float)value; break;
    case 7: o.top_k = (int32_t)value; break;
    case 8: o.top_p = (float)value; break;
    case 9: o.beam_size = (int32_t)value; break;
    case 10: o.length_penalty = (float)value; break;
    case 11: o.n_best = (int32_t)value; break;
    case 12: max_batch = (int64_t)value; break;
    case 13: max_src_len = (int64_t)value; break;
    }
    tfm_decoding *d = tfm_decoding_create(fx.model, &o, max_batch, max_src_len);
    tfm_decoding_free(d);
    return d;
}

/* --- the table ------------------------------------------------------------------------ */

static int bad_calls(int index, bad_case *c)
{
    int n = 0;
    fixture *f = &fx;
    float buf[64] = {0};
    int32_t ibuf[64] = {0};
    int64_t shape[TFM_MAX_DIMS];
    const int64_t huge = INT64_MAX;

    /* decode.h */
    ST(tfm_decoding_buffer_sizes, E_NULL, tfm_decoding_buffer_sizes(NULL, 1, shape, NULL, NULL, NULL));
    ST(tfm_decoding_buffer_sizes, E_ARG, tfm_decoding_buffer_sizes(f->greedy, 0, shape, NULL, NULL, NULL));
    ST(tfm_decoding_buffer_sizes, E_ARG, tfm_decoding_buffer_sizes(f->greedy, huge, shape, NULL, NULL, NULL));
    ST(tfm_decoding_run, E_SIZE, tfm_decoding_run(f->greedy, f->src, (int32_t *)ibuf, 1, (int32_t *)ibuf, 64, NULL, 0, NULL, 0, NULL, 0));
    ST(tfm_decoding_run, E_SIZE, tfm_decoding_run(f->greedy, f->src, f->tokens, B * (MAX_LEN + 1), (int32_t *)ibuf, 1, NULL, 0, NULL, 0, NULL, 0));
    ST(tfm_decoding_run, E_SIZE, tfm_decoding_run(f->greedy, f->src, f->tokens, B * (MAX_LEN + 1), (int32_t *)ibuf, B, buf, 0, NULL, 0, NULL, 0));
    ST(tfm_decoding_run, E_SIZE, tfm_decoding_run(f->greedy, f->src, f->tokens, B * (MAX_LEN + 1), (int32_t *)ibuf, B, NULL, 0, buf, 1, NULL, 0));
    NUL(tfm_decoding_create, E_NULL, tfm_decoding_create(NULL, &(tfm_decode_options){0}, 1, 1));
    NUL(tfm_decoding_create, E_NULL, tfm_decoding_create(f->model, NULL, 1, 1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 0, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 0, 4));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 1, 3));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 1, -1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 2, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 2, T + 1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 2, INT32_MAX));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 3, -1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 3, TGT_VOCAB));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 4, -2));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 4, TGT_VOCAB));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 5, -2));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 5, SRC_VOCAB));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 6, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 6, -1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 6, NAN));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 6, INFINITY));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 7, -1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 8, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 8, 1.5));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_SAMPLE, 8, NAN));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 9, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 9, 65537));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 10, NAN));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 10, -INFINITY));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 11, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_BEAM, 11, 5));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 12, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 12, -1));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 13, 0));
    NUL(tfm_decoding_create, E_ARG, decoding_with(TFM_DECODE_GREEDY, 13, S + 1));
    NUL(tfm_decoding_create, E_SIZE, decoding_with(TFM_DECODE_GREEDY, 12, 9e18));
    NUL(tfm_decoding_create, E_SIZE, decoding_with(TFM_DECODE_BEAM, 12, 1e9));
    ST(tfm_decoding_run, E_NULL, decoding_run_with(NULL, f->src, 0));
    ST(tfm_decoding_run, E_NULL, decoding_run_with(f->greedy, NULL, 0));
    ST(tfm_decoding_run, E_NULL, decoding_run_with(f->greedy, f->src, 1));
    ST(tfm_decoding_run, E_NULL, decoding_run_with(f->beam, f->src, 2));
    ST(tfm_decoding_run, E_DTYPE, decoding_run_with(f->greedy, f->x, 0));
    ST(tfm_decoding_run, E_SHAPE, decoding_run_with(f->greedy, f->i1, 0));
    ST(tfm_decoding_run, E_SHAPE, decoding_run_with(f->greedy, f->i3d, 0));
    ST(tfm_decoding_run, E_SHAPE, decoding_run_with(f->greedy, f->long_src, 0));
    ST(tfm_decoding_run, E_SHAPE, decoding_run_with(f->beam, f->long_src, 0));
    ST(tfm_decoding_run, E_ARG, decoding_run_with(f->beam, f->src, 3));
    ST(tfm_decoding_run, E_ARG, decoding_run_with(f->beam, f->src, 4));
    ST(tfm_decoding_run, E_RANGE, run_on_ids((const int32_t[]){1, 2, SRC_VOCAB}, 3, 1));
    ST(tfm_decoding_run, E_RANGE, run_on_ids((const int32_t[]){INT32_MIN, 2}, 2, 1));
    return -1;
}

/* Frees and options-inits of NULL, which must record no error. */
static void free_nulls(void)
{
    tfm_decoding_free(NULL);
    tfm_decode_options_init_sized(NULL, sizeof(tfm_decode_options));
}

static Suite *suite(void)
{
    return bad_input_suite("bad_input_decode", bad_calls, 55, free_nulls);
}

TFM_CHECK_MAIN(suite)
