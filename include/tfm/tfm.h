/* libtfm: build, train and run encoder-decoder transformers in C.
 * The one header a program includes. */
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

#endif
