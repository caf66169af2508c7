"""libtfm from Python: encoder-decoder transformers over the C library.

    import numpy as np, tfm
    model = tfm.Model(src_vocab=13, tgt_vocab=13, max_src_len=6, max_tgt_len=8,
                      d_model=32, heads=4, encoder_layers=1, decoder_layers=1,
                      d_ff=64, dropout=0.0)
    adam = tfm.Adam(model, lr=3e-3)
    tape = tfm.Tape()
    with tape:                                   # ops record here; reset at the end
        logits = model.forward(src, tgt_in, tgt_mask=tfm.causal_mask(7))
        loss = tfm.cross_entropy(logits, tgt_out)
        adam.zero_grad(); loss.backward(); adam.step()
    tokens = model.greedy(src)

Errors raise tfm.Error subclasses carrying libtfm's message; handles are
freed by their Python owners (close(), `with`, or collection), and a
handle used after its owner was closed or its tape reset raises instead of
reaching C. The C library itself is tfm.lib (every public call, through
cffi) with tfm.ffi.
"""
from ._binding import ffi, lib, library_path
from ._core import (ArgumentError, BusyError, CancelledError, ClosedError, DtypeError, Error, FileError, FormatError,
                    NullError, NumericError, OutOfMemoryError, RangeError, Rng, ShapeError,
                    SizeError, StaleError, StateError, SyncError, Tape, TimeoutError, Tensor, add, as_array,
                    causal_mask, check, combine_masks, concat, cross_entropy, current_tape,
                    dropout, embedding, from_torch_bool, gelu, gelu_tanh, layer_norm, linear,
                    log_softmax,
                    mask_from_lengths, masked_fill, matmul, mean, merge_heads, mul, padding_mask, relu, reshape,
                    scale, silu, softmax, split_heads, sub, sum, tanh, tensor, to_numpy, transpose)
from ._model import (SGD, Adam, AdamW, Attention, Decoded, Decoding, DecoderLayer, Dropout,
                     Embedding, EncoderLayer, FeedForward, Layer, LayerNorm, LearnedPositions,
                     Linear, LoadResult, Model, Optimizer, Params, SinusoidalPositions,
                     load_training, metadata, save_training)
from ._text import (Corpus, Tokenizer, batch_plan, bleu, chrf, pad, shift_targets)
from ._translate import Hypothesis, Request, Translation, Translator

__version__ = ffi.string(lib.tfm_version_string()).decode()


def set_num_threads(threads):
    """libtfm's own kernel threads (1 to 64); BLAS keeps its own."""
    check(lib.tfm_set_num_threads(threads))


def get_num_threads():
    """libtfm's own kernel threads."""
    return lib.tfm_get_num_threads()


_PRECISIONS = {'float32': 0, 'bfloat16': 1}  # tfm_matmul_precision


def set_matmul_precision(precision):
    """'float32' (the default) or 'bfloat16': libtfm's matrix products on
    bfloat16 inputs with float32 sums, on CPUs with AVX512_BF16 (StateError
    elsewhere, and nothing changes): training's, and decoding's when a
    float32 model's weights are packed (at each Decoding run, when a
    Translator is made); an int8 model's products stay int8."""
    if precision not in _PRECISIONS:
        raise ArgumentError(f"precision is 'float32' or 'bfloat16', not {precision!r}")
    check(lib.tfm_set_matmul_precision(_PRECISIONS[precision]))


def get_matmul_precision():
    """'float32' or 'bfloat16': the precision of libtfm's matrix products."""
    return {v: k for k, v in _PRECISIONS.items()}[lib.tfm_get_matmul_precision()]
