#include "autograd/tape.h"
#include "tfm/ops.h"
