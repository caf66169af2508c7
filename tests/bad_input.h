/* What the bad-input suites (test_bad_input_ROOM.c, one per room of the
 * library) share: a fixture of handles in a known state (a tape, tensors
 * of both dtypes and several shapes, a model carrying tokenizers, one layer
 * of every kind, stores, an Adam optimizer, greedy and beam decodings, good
 * and bad files), the table's macros, and bad_input_run, which runs a
 * suite's table of bad calls. Each call must return its failure value with
 * the expected status and a message naming the function called; none may
 * crash or leak (checked after each case in the sanitizer build); and
 * afterwards the same handles must still give the same results to valid
 * calls. bad_input.c holds the fixture and the run. */
#ifndef TFM_TESTS_BAD_INPUT_H
#define TFM_TESTS_BAD_INPUT_H

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tfm/tfm.h>

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
enum { B = 2, S = 5, T = 4, D = 8, HEADS = 2, SRC_VOCAB = 11, TGT_VOCAB = 9, MAX_LEN = 3 };

/* Handles in a known state, shared by every case. */
typedef struct fixture {
    tfm_tape *tape;
    tfm_rng *rng;
    /* caller-owned tensors: f23 requires grad, i23 holds ids */
    tfm_tensor *f23, *i23, *f32x3, *f1, *f2, *f34, *i1, *i3, *x, *mem3, *src, *tgt, *long_src, *i3d;
    tfm_params *params, *layer_params, *empty, *small;
    tfm_model *model;
    tfm_layer *linear, *embedding, *norm, *dropout, *ff, *attention, *encoder_layer,
        *decoder_layer, *encoder, *decoder, *sinusoidal, *learned;
    tfm_optimizer *adam;
    tfm_decoding *greedy, *beam;
    /* tokenizers of 9 ids (the model's source and target ones), 10 and 12
     * (more than the target's and the source's vocabularies), and the
     * base64 a model file holds for the last two */
    tfm_tokenizer *tokenizer, *target_tokenizer, *tokenizer10, *tokenizer12;
    char *base64_10, *base64_12, *oversized_base64;
    char dir[64];
    char params_path[128], adam_path[128], sgd_path[128], small_adam_path[128];
    char small_path[128], small_int_path[128], small_extra_path[128], small_other_path[128];
    char empty_path[128], text_path[128], missing_path[128], missing_dir_path[128],
        folder_path[128], model_path[128], training_path[128], nan_path[128],
        prefixed_path[128];
    /* what valid calls gave before any case ran */
    float loss;
    int32_t tokens[B * (MAX_LEN + 1)], lengths[B];
    float *values, *grads, *layer_values;
    float tensor_values[7][64];
} fixture;

extern fixture fx;

/* The fixture's options, for a case to change one field of. */
tfm_model_options model_options(void);
tfm_block_options block_options(void);
tfm_attention_options attention_options(void);
tfm_optimizer_options optimizer_options(tfm_optimizer_kind kind);
tfm_decode_options decode_options(tfm_decode_strategy strategy);

/* Helpers more than one room's table calls. */
tfm_status save_one(const char *path, const char *name, const tfm_tensor *t);
tfm_status decoding_run_with(tfm_decoding *d, const tfm_tensor *src, int null_field);
tfm_status run_on_ids(const int32_t *values, int64_t count, int decode);
const char *long_name(void);
tfm_model *load_forged(const char *key, const char *value);

/* --- the table ------------------------------------------------------------------------ */

/* A room's table: case index runs the call; returns whether it returned
 * its failure value, or -1 past the last case. */
typedef struct bad_case {
    const char *function; /* the public function called: its name must be in the message */
    tfm_status status;
    const char *call;
} bad_case;

typedef int (*bad_table)(int index, bad_case *c);

#define RETURNS_NULL(x) ((x) == NULL)
#define RETURNS_STATUS(x) ((x) != TFM_OK)
#define RETURNS_MINUS_ONE(x) ((x) == -1)
#define RETURNS_ZERO(x) ((x) == 0)

/* In a table: `int n = 0;` counts the cases, index and c are its arguments. */
#define BAD(function, status, returns, text, ...)                              \
    if (n++ == index) {                                                        \
        *c = (bad_case){#function, status, text};                              \
        return returns((__VA_ARGS__));                                         \
    }
#define NUL(function, status, ...) BAD(function, status, RETURNS_NULL, #__VA_ARGS__, __VA_ARGS__)
#define ST(function, status, ...) BAD(function, status, RETURNS_STATUS, #__VA_ARGS__, __VA_ARGS__)
#define NEG(function, status, ...)                                             \
    BAD(function, status, RETURNS_MINUS_ONE, #__VA_ARGS__, __VA_ARGS__)
#define ZERO(function, status, ...) BAD(function, status, RETURNS_ZERO, #__VA_ARGS__, __VA_ARGS__)

enum { E_NULL = TFM_ERR_NULL, E_ARG = TFM_ERR_ARG, E_SHAPE = TFM_ERR_SHAPE,
       E_DTYPE = TFM_ERR_DTYPE, E_RANGE = TFM_ERR_RANGE, E_SIZE = TFM_ERR_SIZE,
       E_STATE = TFM_ERR_STATE, E_IO = TFM_ERR_IO, E_FORMAT = TFM_ERR_FORMAT,
       E_NUMERIC = TFM_ERR_NUMERIC };

/* A room's suite: "every_bad_call_fails_cleanly" sets the fixture up,
 * runs every case of table on it (each checked as above, the fixture
 * checked intact after each, no two cases the same call), prints "ROOM: N
 * distinct bad calls", fails when a case went wrong or the table holds
 * fewer than at_least cases (so that none is lost), and tears the fixture
 * down; with free_nulls (not NULL), "freeing_null_is_harmless" calls it
 * (the room's frees and options-inits of NULL) and checks that no error
 * was recorded. One suite per program. */
Suite *bad_input_suite(const char *room, bad_table table, int at_least, void (*free_nulls)(void));

#endif
