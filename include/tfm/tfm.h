/** @file
 * libtfm: build, train and run encoder-decoder transformers in C.
 * The one header a program includes. */

/** @mainpage libtfm API reference
 *
 * libtfm builds, trains and runs encoder-decoder transformers from C.
 * Include <tfm/tfm.h>; link with `pkg-config --libs tfm` (or CMake's
 * tfm::tfm). Each header is one concept:
 *
 * | header      | what it holds |
 * | ----------- | ------------- |
 * | common.h    | version, status codes, tfm_last_error(), threads |
 * | tensor.h    | tensors and random streams |
 * | tape.h      | the autograd tape: recording, backward, reset |
 * | ops.h       | differentiable ops |
 * | params.h    | named parameter stores |
 * | nn.h        | layers, masks, positions, initialisation |
 * | model.h     | the ready-made transformer and its files |
 * | optim.h     | SGD, Adam, AdamW, schedules, clipping |
 * | io.h        | safetensors reading and writing, loading state_dicts |
 * | training.h  | saving and resuming a whole training run |
 * | decode.h    | greedy, sampling, top-k, nucleus and beam decoding |
 * | score.h     | chrF and BLEU of translations, as sacrebleu |
 * | batch.h     | batches of text by tokens, padded ids, shifted targets |
 * | text.h      | tokenizers: SentencePiece, byte-level BPE, BPE training |
 *
 * Rules that hold everywhere (each header adds its own):
 * - Ownership: what a create, load or open call returns is the caller's
 *   and is freed with the matching free or close call, which accepts NULL.
 *   Tensors returned by ops, layers and the model belong to the tape that
 *   made them and end at its next reset. The library keeps no pointer to a
 *   caller's buffer past the call, except to the handles it documents
 *   (a layer's rng and store, an optimizer's store, a decoding's model).
 * - Errors: a call returns a tfm_status, or NULL or -1 (as documented),
 *   and records the status and a message for tfm_last_error() on the
 *   calling thread. The library never prints, exits or aborts; a failed
 *   call leaves its objects and files as they were.
 * - Threads: different handles may be used from different threads at once;
 *   one handle is used by one thread at a time unless its header says
 *   more. Kernels may use libtfm's own threads (tfm_set_num_threads()) and
 *   BLAS's.
 * - ABI: options structs are filled by their _init macro, which passes
 *   the size the program was compiled with, so fields added by a later
 *   version keep their defaults. */
#ifndef TFM_H
#define TFM_H

#include "common.h"
#include "tensor.h"
#include "tape.h"
#include "ops.h"
#include "params.h"
#include "nn.h"
#include "model.h"
#include "optim.h"
#include "io.h"
#include "training.h"
#include "decode.h"
#include "score.h"
#include "batch.h"
#include "text.h"
#include "translate.h"
#include "adapters.h"

#endif
