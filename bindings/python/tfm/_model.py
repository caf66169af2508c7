"""Parameter stores, layers, the model, optimizers and decoding."""
import collections
import copy
import os
import tempfile

import numpy as np

from ._binding import ffi, lib
from ._core import (ArgumentError, Handle, Inputs, Tensor, as_array, c_path, c_string,
                    c_strings, check, check_pointer,
                    check_size, masks, recording, StateError, to_numpy)

_NAMED = {
    'positions': {'sinusoidal': lib.TFM_POSITIONS_SINUSOIDAL,
                  'learned': lib.TFM_POSITIONS_LEARNED,
                  'sinusoidal_halves': lib.TFM_POSITIONS_SINUSOIDAL_HALVES,
                  'sinusoidal_fairseq': lib.TFM_POSITIONS_SINUSOIDAL_FAIRSEQ,
                  'none': lib.TFM_POSITIONS_NONE},
    'embedding_scale': {'none': lib.TFM_EMBEDDING_SCALE_NONE,
                        'sqrt_d': lib.TFM_EMBEDDING_SCALE_SQRT_D,
                        'trainable': lib.TFM_EMBEDDING_SCALE_TRAINABLE},
    'activation': {'relu': lib.TFM_ACTIVATION_RELU, 'gelu': lib.TFM_ACTIVATION_GELU,
                   'silu': lib.TFM_ACTIVATION_SILU, 'gelu_tanh': lib.TFM_ACTIVATION_GELU_TANH},
    'strategy': {'greedy': lib.TFM_DECODE_GREEDY, 'sample': lib.TFM_DECODE_SAMPLE,
                 'beam': lib.TFM_DECODE_BEAM},
    'schedule': {'constant': lib.TFM_SCHEDULE_CONSTANT, 'step': lib.TFM_SCHEDULE_STEP,
                 'warmup_invsqrt': lib.TFM_SCHEDULE_WARMUP_INVSQRT,
                 'warmup_cosine': lib.TFM_SCHEDULE_WARMUP_COSINE},
    'kind': {'sgd': lib.TFM_OPTIMIZER_SGD, 'adam': lib.TFM_OPTIMIZER_ADAM,
             'adamw': lib.TFM_OPTIMIZER_ADAMW},
}
# Other names a value goes by (PyTorch's scheduler names).
_ALIASES = {'schedule': {'cosine': 'warmup_cosine', 'invsqrt': 'warmup_invsqrt'}}


def options(struct, init, fields, *init_args):
    """A C options struct filled by its _init_sized call, then fields by
    keyword (names as the C fields; the enumerations also by name)."""
    o = ffi.new(struct + ' *')
    init(o, *init_args, ffi.sizeof(struct))
    known = dict(ffi.typeof(struct).fields)
    for name, value in fields.items():
        if name not in known or name == 'struct_size':
            raise TypeError('%s has no field %r' % (struct, name))
        if isinstance(value, str) and name in _NAMED:
            value = _ALIASES.get(name, {}).get(value, value)
            if value not in _NAMED[name]:
                raise ValueError('%s must be one of %s, not %r' % (
                    name, ', '.join(list(_NAMED[name]) + list(_ALIASES.get(name, ()))), value))
            value = _NAMED[name][value]
        try:
            setattr(o, name, value)
        except (TypeError, OverflowError) as error:  # cffi's words name no field
            raise type(error)('%s: %s=%r does not fit its C type %s (%s)' % (
                struct, name, value, known[name].type.cname, error)) from None
    return o


def options_dict(struct, o):
    """The struct's fields by name, the enumerations as their names."""
    named = {}
    for name, _ in ffi.typeof(struct).fields:
        if name == 'struct_size':
            continue
        value = getattr(o, name)
        names = {v: k for k, v in _NAMED.get(name, {}).items()}
        named[name] = names.get(value, value)
    return named


def _strings(mapping):
    """A str -> str mapping as two cffi char* arrays (kept alive with them)."""
    keys, kept_keys = c_strings(str(k) for k in mapping)
    values, kept_values = c_strings(str(v) for v in mapping.values())
    return len(kept_keys), keys, values, (kept_keys, kept_values)


def _file_tensors(path):
    """Every tensor of a safetensors file, by name, as numpy."""
    pointer = check_pointer(lib.tfm_safetensors_open(c_path(path)))
    try:
        found = {}
        for i in range(check_size(lib.tfm_safetensors_count(pointer))):
            name = ffi.string(check_pointer(lib.tfm_safetensors_name(pointer, i)))
            with Tensor(check_pointer(lib.tfm_safetensors_get(pointer, name))) as t:
                found[name.decode()] = t.numpy()
        return found
    finally:
        lib.tfm_safetensors_close(pointer)


def _write_file(path, arrays):
    """Writes named arrays (float32 or int32) as a safetensors file."""
    tensors = [Tensor.from_numpy(a) for a in arrays.values()]
    try:
        names, _kept = c_strings(arrays)
        check(lib.tfm_safetensors_write(c_path(path), len(arrays), names,
                                        ffi.new('tfm_tensor *[]', [t._ptr() for t in tensors])))
    finally:
        for t in tensors:
            t.close()


LoadResult = collections.namedtuple('LoadResult', 'missing_keys unexpected_keys')
LoadResult.__doc__ = """What load_state_dict did not match, as PyTorch's returns it:
the store's names the state lacked, and the state's names the store lacks."""


# --- parameter stores -----------------------------------------------------------------
class Params(Handle):
    """Named float32 parameters (tfm_params). A model's store belongs to the
    model (Model.params); a store made here is the caller's."""
    _free = lib.tfm_params_free
    _copy_advice = 'pickle its state_dict() (copy.copy and copy.deepcopy do copy it)'

    def __init__(self, pointer=None, owner=None):
        if pointer is None:
            pointer = check_pointer(lib.tfm_params_create())
        super().__init__(pointer, owner)
        if owner is not None:
            self._free = None

    def add(self, name, shape):
        """A new zero parameter tensor [shape] under name."""
        shape = list(shape)
        pointer = lib.tfm_params_add(self._ptr(), c_string(name), len(shape),
                                     ffi.new('int64_t[]', shape))
        return Tensor(check_pointer(pointer), owner=self)

    def __len__(self):
        return check_size(lib.tfm_params_count(self._ptr()))

    def names(self):
        """The parameters' names, in the store's order."""
        return [ffi.string(check_pointer(lib.tfm_params_name(self._ptr(), i))).decode()
                for i in range(len(self))]

    def __getitem__(self, name):
        pointer = lib.tfm_params_find(self._ptr(), c_string(name))
        if pointer == ffi.NULL:
            lib.tfm_clear_error()
            raise KeyError(name)
        return Tensor(pointer, owner=self)

    def named_parameters(self):
        """(name, tensor) pairs in the store's order; the tensors are the
        parameters themselves (write, grad, requires_grad)."""
        return [(name, Tensor(check_pointer(lib.tfm_params_at(self._ptr(), i)), owner=self))
                for i, name in enumerate(self.names())]

    def parameters(self):
        """The parameter tensors in the store's order."""
        return [t for _, t in self.named_parameters()]

    def _index(self, parameter):
        """The store's index of a parameter given as a name or a tensor."""
        if isinstance(parameter, str):
            names = self.names()
            if parameter not in names:
                raise KeyError(parameter)
            return names.index(parameter)
        for i in range(len(self)):
            if lib.tfm_params_at(self._ptr(), i) == parameter._ptr():
                return i
        raise ValueError('the tensor is not a parameter of this store')

    def numel(self):
        """The number of values of every parameter together."""
        return check_size(lib.tfm_params_numel(self._ptr()))

    def zero_grad(self):
        """Sets every gradient to zero."""
        check(lib.tfm_params_zero_grad(self._ptr()))

    def clip_grad_norm(self, max_norm):
        """Scales the gradients to a global norm of at most max_norm;
        returns the norm before."""
        norm = ffi.new('float *')
        check(lib.tfm_params_clip_grad_norm(self._ptr(), max_norm, norm))
        return norm[0]

    def state_dict(self):
        """name -> a numpy copy of the values, in the store's order."""
        return {name: self[name].numpy() for name in self.names()}

    def load_state_dict(self, state, strict=True, strip_prefix=None):
        """Copies values by name from a mapping of arrays (numpy, torch
        tensors, anything as_array takes), as tfm_params_load_with does for
        files: strip_prefix is removed from the names that start with it;
        strict (the default) wants the store's names exactly (KeyError
        otherwise); strict=False loads what matches. Every name and shape
        is checked before any value is written. Returns
        LoadResult(missing_keys, unexpected_keys)."""
        if strip_prefix:
            state = {(k[len(strip_prefix):] if k.startswith(strip_prefix) else k): v
                     for k, v in state.items()}
        ours = self.names()
        missing = [n for n in ours if n not in state]
        unexpected = [n for n in state if n not in ours]
        if strict and (missing or unexpected):
            raise KeyError('load_state_dict: missing %s, unexpected %s' % (
                missing[:5] or 'none', unexpected[:5] or 'none'))
        values = {}
        for name in ours:
            if name not in state:
                continue
            array = as_array(state[name], np.float32)
            shape = self[name].shape
            if array.shape != shape:
                raise ValueError('load_state_dict: %s has shape %s here and %s given' % (
                    name, shape, array.shape))
            values[name] = array
        for name, array in values.items():
            self[name].write(array)
        return LoadResult(missing, unexpected)

    def __copy__(self):
        """A caller-owned store with the same names, shapes, values and
        requires_grad (gradients start empty)."""
        twin = Params()
        for name, parameter in self.named_parameters():
            made = twin.add(name, parameter.shape)
            made.write(parameter.numpy())
            made.requires_grad = parameter.requires_grad
        return twin

    def __repr__(self):
        if self.closed:
            return 'tfm.Params(<closed>)'
        return 'tfm.Params(%d tensors, %d values)' % (len(self), self.numel())

    def save(self, path):
        """Writes the values as a safetensors file, by name."""
        check(lib.tfm_params_save(self._ptr(), c_path(path)))

    def load(self, path, strip_prefix=None, allow_unexpected=False, allow_missing=False):
        """Loads a safetensors file by name; returns a dict of the names
        'loaded', 'skipped' and 'missing'."""
        o = options('tfm_load_options', lib.tfm_load_options_init_sized,
                    {'allow_unexpected': int(allow_unexpected),
                     'allow_missing': int(allow_missing)})
        prefix = ffi.new('char[]', c_string(strip_prefix)) if strip_prefix else ffi.NULL
        o.strip_prefix = prefix
        report = ffi.new('tfm_load_report **')
        check(lib.tfm_params_load_with(self._ptr(), c_path(path), o, report))
        try:
            outcome = {}
            for key, kind in (('loaded', lib.TFM_LOAD_LOADED), ('skipped', lib.TFM_LOAD_SKIPPED),
                              ('missing', lib.TFM_LOAD_MISSING)):
                count = check_size(lib.tfm_load_report_count(report[0], kind))
                outcome[key] = [ffi.string(lib.tfm_load_report_name(report[0], kind, i)).decode()
                                for i in range(count)]
            return outcome
        finally:
            lib.tfm_load_report_free(report[0])


# --- layers -------------------------------------------------------------------------
class Layer(Handle):
    """A layer (tfm_layer) created into a store; its parameters stay in the
    store, which must outlive it (the layer keeps it alive)."""
    _free = lib.tfm_layer_free
    _forward = None  # the kind's C forward
    _copy_advice = ('its parameters are in its store: copy.deepcopy(params), then create '
                    'the layer again over the copy under the same name')

    def __init__(self, pointer, params=None, rng=None):
        super().__init__(check_pointer(pointer), params)
        # The C layer keeps the stream and draws from it: the layer keeps it
        # alive, and closing the stream closes the layer (never a freed one).
        self._rng = rng
        if rng is not None:
            rng._dependents.add(self)

    @property
    def kind(self):
        """The layer's kind: 'linear', 'embedding', 'encoder_layer', …"""
        return ffi.string(check_pointer(lib.tfm_layer_kind(self._ptr()))).decode()

    def train(self, training=True):
        """Training mode (dropout on) or not; returns the layer."""
        check(lib.tfm_layer_set_training(self._ptr(), int(training)))
        return self

    def eval(self):
        """Evaluation mode (dropout off); returns the layer."""
        return self.train(False)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, x):
        """The layer on x, recorded on the current tape."""
        tape, inputs = recording()
        with inputs:
            return tape.made(type(self)._forward(tape._ptr(), self._ptr(), inputs(x)))

    def __repr__(self):
        return 'tfm.%s(<closed>)' % type(self).__name__ if self.closed else \
            'tfm.%s(kind=%r)' % (type(self).__name__, self.kind)


def decoder_masks(inputs, self_mask, memory_mask, self_key_padding_mask,
                  memory_key_padding_mask):
    """A decoder's four masks in the C calls' order, each attention's pair
    in one form (see masks)."""
    self_mask, self_key_padding_mask = masks(inputs, self_mask, self_key_padding_mask)
    memory_mask, memory_key_padding_mask = masks(inputs, memory_mask, memory_key_padding_mask)
    return self_mask, memory_mask, self_key_padding_mask, memory_key_padding_mask


def _rng_pointer(rng):
    return rng._ptr() if rng is not None else ffi.NULL


class Linear(Layer):
    """nn.Linear: x @ weight^T + bias, weight [out, in] named name.weight."""
    _forward = lib.tfm_linear_forward

    def __init__(self, params, name, in_features, out_features, bias=True, rng=None):
        super().__init__(lib.tfm_linear_create(params._ptr(), c_string(name), in_features,
                                               out_features, int(bias), _rng_pointer(rng)),
                         params, rng)


class Embedding(Layer):
    """nn.Embedding: forward(ids) -> [ids..., dim]."""

    def forward(self, ids):
        """The rows of the table for int ids."""
        tape, inputs = recording()
        with inputs:
            return tape.made(lib.tfm_embedding_forward(tape._ptr(), self._ptr(),
                                                       inputs(ids, np.int32)))

    def __init__(self, params, name, vocab, dim, rng=None):
        super().__init__(lib.tfm_embedding_create(params._ptr(), c_string(name), vocab, dim,
                                                  _rng_pointer(rng)), params, rng)


class LayerNorm(Layer):
    """nn.LayerNorm over the last axis."""
    _forward = lib.tfm_layer_norm_forward

    def __init__(self, params, name, dim, eps=1e-5):
        super().__init__(lib.tfm_layer_norm_create(params._ptr(), c_string(name), dim, eps),
                         params)


class Dropout(Layer):
    """nn.Dropout, drawing from rng."""
    _forward = lib.tfm_dropout_forward

    def __init__(self, p, rng=None):
        super().__init__(lib.tfm_dropout_create(p, _rng_pointer(rng)), None, rng)


class FeedForward(Layer):
    """linear, activation, dropout, linear: the transformer's feed-forward."""
    _forward = lib.tfm_feed_forward_forward

    def __init__(self, params, name, d_model, d_ff, activation='relu', dropout=0.1, rng=None):
        act = _NAMED['activation'].get(activation, activation)
        super().__init__(lib.tfm_feed_forward_create(params._ptr(), c_string(name), d_model, d_ff,
                                                     act, dropout, _rng_pointer(rng)),
                         params, rng)


class Attention(Layer):
    """nn.MultiheadAttention: forward(query, memory, mask, key_padding_mask)."""

    def __init__(self, params, name, rng=None, **fields):
        o = options('tfm_attention_options', lib.tfm_attention_options_init_sized, fields)
        super().__init__(lib.tfm_attention_create(params._ptr(), c_string(name), o,
                                                  _rng_pointer(rng)), params, rng)

    def forward(self, query, memory=None, mask=None, key_padding_mask=None):
        """Attention of query over memory (itself when None); masks as
        PyTorch's, in any form (see tfm.Model.forward)."""
        tape, inputs = recording()
        with inputs:
            mask, key_padding_mask = masks(inputs, mask, key_padding_mask)
            return tape.made(lib.tfm_attention_forward(
                tape._ptr(), self._ptr(), inputs(query),
                inputs(query if memory is None else memory), mask, key_padding_mask, ffi.NULL))


class EncoderLayer(Layer):
    """nn.TransformerEncoderLayer: forward(x, mask, key_padding_mask)."""

    def __init__(self, params, name, rng=None, **fields):
        o = options('tfm_block_options', lib.tfm_block_options_init_sized, fields)
        super().__init__(lib.tfm_encoder_layer_create(params._ptr(), c_string(name), o,
                                                      _rng_pointer(rng)), params, rng)

    def forward(self, x, mask=None, key_padding_mask=None):
        """x [B, S, D] -> [B, S, D]; masks as PyTorch's, in any form."""
        tape, inputs = recording()
        with inputs:
            mask, key_padding_mask = masks(inputs, mask, key_padding_mask)
            return tape.made(lib.tfm_encoder_layer_forward(tape._ptr(), self._ptr(), inputs(x),
                                                           mask, key_padding_mask))


class DecoderLayer(Layer):
    """nn.TransformerDecoderLayer: forward(x, memory, self_mask, memory_mask,
    self_key_padding_mask, memory_key_padding_mask)."""

    def __init__(self, params, name, rng=None, **fields):
        o = options('tfm_block_options', lib.tfm_block_options_init_sized, fields)
        super().__init__(lib.tfm_decoder_layer_create(params._ptr(), c_string(name), o,
                                                      _rng_pointer(rng)), params, rng)

    def forward(self, x, memory, self_mask=None, memory_mask=None, self_key_padding_mask=None,
                memory_key_padding_mask=None):
        """x [B, T, D] over memory [B, S, D]; masks as PyTorch's, in any form."""
        tape, inputs = recording()
        with inputs:
            return tape.made(lib.tfm_decoder_layer_forward(
                tape._ptr(), self._ptr(), inputs(x), inputs(memory), *decoder_masks(
                    inputs, self_mask, memory_mask, self_key_padding_mask,
                    memory_key_padding_mask)))


class SinusoidalPositions(Layer):
    """x [B, T, D] + PE[offset : offset + T]; no parameters."""

    def __init__(self, max_len, d_model):
        super().__init__(lib.tfm_sinusoidal_positions_create(max_len, d_model))

    def forward(self, x, offset=0):
        """x plus the positions offset to offset + T."""
        tape, inputs = recording()
        with inputs:
            return tape.made(lib.tfm_positions_forward(tape._ptr(), self._ptr(), inputs(x),
                                                       offset))


class LearnedPositions(SinusoidalPositions):
    """x [B, T, D] + a trained table [max_len, D] named name.weight."""

    def __init__(self, params, name, max_len, d_model, rng=None):
        Layer.__init__(self, lib.tfm_learned_positions_create(params._ptr(), c_string(name),
                                                              max_len, d_model,
                                                              _rng_pointer(rng)), params, rng)


# --- the model ----------------------------------------------------------------------
class Model(Handle):
    """The encoder-decoder transformer (tfm_model). Keyword arguments are
    tfm_model_options' fields: src_vocab, tgt_vocab, max_src_len,
    max_tgt_len, d_model, heads, head_dim (each head's width; 0: d_model /
    heads), encoder_layers, decoder_layers, d_ff, dropout, positions
    ('sinusoidal', 'learned', 'sinusoidal_halves', 'sinusoidal_fairseq',
    'none'), position_offset, embedding_norm, embedding_scale
    ('none', 'sqrt_d', 'trainable'), activation ('relu', 'gelu', 'silu',
    'gelu_tanh'), feed_forward_bias, rms_norm, gated_feed_forward,
    unscaled_attention, relative_attention_buckets,
    relative_attention_max_distance, generator_rescale, norm_first, seed,
    and the special tokens bos_id, eos_id, pad_id (-1: unset), which the
    decoders use and the model's file keeps, …
    copy.copy, copy.deepcopy and pickle give independent models with what
    the model's file keeps (options, parameter values, int8 weights,
    tokenizers, the ids around sources) and its mode."""
    _free = lib.tfm_model_free

    def __init__(self, _pointer=None, **fields):
        if _pointer is None:
            o = options('tfm_model_options', lib.tfm_model_options_init_sized, fields)
            _pointer = check_pointer(lib.tfm_model_create(o))
        super().__init__(_pointer)
        self.params = Params(check_pointer(lib.tfm_model_params(_pointer)), owner=self)
        self._training = True  # as tfm_model_create and tfm_model_load leave it
        self._recompute = 0

    @classmethod
    def load(cls, path):
        """A model rebuilt from a tfm_model_save or training-state file
        (a quantized model's file gives the quantized model, in evaluation
        mode)."""
        model = cls(_pointer=check_pointer(lib.tfm_model_load(c_path(path))))
        model._training = not model.quantized
        return model

    def quantize(self, generator=False):
        """Quantizes the model to int8 for inference (tfm_model_quantize):
        every linear of its layers, and with generator=True its output
        projection too (a tied one through an int8 copy of the embedding
        table, whose lookups stay float32). Each weight then multiplies in
        int8 where that is the faster on this CPU, else by its float32
        values (tfm_model_quantize says where), which become its int8
        values times their scales (state_dict), as a load makes them. It
        is then in evaluation mode for good (train() raises StateError);
        save and load keep it int8. Returns the model."""
        check(lib.tfm_model_quantize(self._ptr(), lib.TFM_QUANTIZE_LAYERS |
                                     (lib.TFM_QUANTIZE_GENERATOR if generator else 0)))
        self._training = False
        return self

    @property
    def quantized(self):
        """None, 'layers' or 'layers,generator': what quantize() made int8."""
        what = lib.tfm_model_quantized(self._ptr())
        return {0: None, lib.TFM_QUANTIZE_LAYERS: 'layers'}.get(what, 'layers,generator')

    @classmethod
    def from_pretrained(cls, folder):
        """A model from a folder as Hugging Face transformers saves a
        Marian, BART, mBART, M2M100/NLLB or T5 model (config.json and
        model.safetensors or its sharded index), with the family's
        tokenizers when the folder has their files, in evaluation mode;
        tfm.Error naming whatever libtfm does not support."""
        model = cls(_pointer=check_pointer(lib.tfm_model_from_pretrained(
            c_path(folder))))
        model._training = False  # tfm_model_from_pretrained leaves it in evaluation mode
        return model

    def save_pretrained(self, folder, max_shard_bytes=0):
        """Writes a model from_pretrained() loaded (trained since or not)
        back in its family's layout, as transformers' save_pretrained()
        does: config.json, generation_config.json, model.safetensors with
        the published names (shards and their index past max_shard_bytes;
        0: 5 GB) and the tokenizer files. A new folder appears whole or not
        at all; tfm.Error for a model that has no family's layout (not
        from_pretrained, quantized, tokenizers replaced)."""
        check(lib.tfm_model_save_pretrained(self._ptr(), c_path(folder), max_shard_bytes))

    def save(self, path, metadata=None):
        """Writes options and parameters as one safetensors file, with the
        caller's metadata (str -> str; read back with tfm.metadata)."""
        count, keys, values, _kept = _strings(metadata or {})
        check(lib.tfm_model_save_with_metadata(self._ptr(), c_path(path), count, keys,
                                               values))

    # adapters.h's TFM_ADAPT_* bits by name ('q' ... 'o': both attentions')
    _ADAPTER_TARGETS = {'self_q': 1, 'self_k': 2, 'self_v': 4, 'self_o': 8, 'cross_q': 16,
                        'cross_k': 32, 'cross_v': 64, 'cross_o': 128, 'ff_in': 256,
                        'ff_out': 512, 'q': 17, 'k': 34, 'v': 68, 'o': 136}

    def add_adapter(self, name, rank=8, alpha=8.0, dropout=0.0, targets=('q', 'v'),
                    layers=None):
        """Adds a low-rank adapter (LoRA, tfm_model_add_adapter) named name
        on the linears targets names: 'q', 'k', 'v', 'o' (both attentions'),
        'self_q' ... 'cross_o', 'ff_in', 'ff_out'; layers: the layer
        indices adapted (None: all). A from the model's random stream as
        PEFT, B zeros. Returns the model."""
        bits = 0
        for target in targets:
            if target not in self._ADAPTER_TARGETS:
                raise ValueError('targets: %r is not one of %s' % (
                    target, ', '.join(self._ADAPTER_TARGETS)))
            bits |= self._ADAPTER_TARGETS[target]
        fields = {'rank': rank, 'alpha': alpha, 'dropout': dropout, 'targets': bits}
        kept = None
        if layers is not None:
            kept = ffi.new('int32_t[]', [int(v) for v in layers])
            fields['layers'], fields['n_layers'] = kept, len(layers)
        o = options('tfm_adapter_options', lib.tfm_adapter_options_init_sized, fields)
        check(lib.tfm_model_add_adapter(self._ptr(), c_string(name), o))
        del kept  # copied
        return self

    @property
    def adapters(self):
        """The names of the model's adapters, in the order added."""
        return [ffi.string(check_pointer(lib.tfm_model_adapter_name(self._ptr(), i))).decode()
                for i in range(lib.tfm_model_adapter_count(self._ptr()))]

    def adapter_params(self, name):
        """The adapter's parameters (tfm.Params, the model's): what an
        optimizer over the adapter alone is made over. Valid until the
        adapter is removed or merged."""
        store = Params(check_pointer(lib.tfm_model_adapter_params(self._ptr(),
                                                                   c_string(name))), owner=self)
        self.__dict__.setdefault('_adapter_stores', {}).setdefault(name, []).append(store)
        return store

    def _forget_adapter(self, name):
        for store in self.__dict__.get('_adapter_stores', {}).pop(name, []):
            store.close()

    def use_adapter(self, name):
        """The adapter the model's forward calls apply (None: none);
        returns the model. With one, a quantized model may train (its
        adapter only)."""
        check(lib.tfm_model_use_adapter(self._ptr(), ffi.NULL if name is None else
                                        c_string(name)))
        return self

    @property
    def adapter_in_use(self):
        """The name of the adapter the forward calls apply, or None."""
        name = lib.tfm_model_adapter_in_use(self._ptr())
        return None if name == ffi.NULL else ffi.string(name).decode()

    def remove_adapter(self, name):
        """Removes the adapter (its parameters go with it)."""
        check(lib.tfm_model_remove_adapter(self._ptr(), c_string(name)))
        self._forget_adapter(name)

    def merge_adapter(self, name):
        """Adds the adapter into the weights (W += alpha / rank B A, PEFT's
        merge_and_unload) and removes it; StateError for a quantized
        model."""
        check(lib.tfm_model_merge_adapter(self._ptr(), c_string(name)))
        self._forget_adapter(name)

    def save_adapter(self, name, folder, base_model_name_or_path=None):
        """Writes the adapter as PEFT's save_pretrained does:
        folder/adapter_config.json and folder/adapter_model.safetensors
        (PEFT's tensor names), each atomically."""
        check(lib.tfm_model_save_adapter(
            self._ptr(), c_string(name), c_path(folder),
            ffi.NULL if base_model_name_or_path is None else c_string(base_model_name_or_path)))

    def load_adapter(self, name, folder):
        """Adds an adapter named name from a PEFT LoRA folder
        (adapter_config.json, adapter_model.safetensors) for this model;
        returns the model. FormatError naming what does not fit."""
        check(lib.tfm_model_load_adapter(self._ptr(), c_string(name), c_path(folder)))
        return self

    def _tokenizer(self, target):
        pointer = lib.tfm_model_tokenizer(self._ptr(), target)
        return None if pointer == ffi.NULL else _text().Tokenizer._copy_of(pointer)

    @property
    def tokenizer(self):
        """The tokenizer of the model's source text, or None: a copy (an
        independent tfm.Tokenizer), as the model's file keeps it."""
        return self._tokenizer(0)

    @property
    def target_tokenizer(self):
        """The tokenizer of the model's target text (the source's when the
        model has one for both), or None: a copy."""
        return self._tokenizer(1)

    def set_tokenizers(self, source, target=None):
        """Gives the model copies of its tokenizers (tfm.Tokenizer): source
        for the encoder's text, target for the decoder's (None: source does
        both, as for a shared vocabulary). save() writes them into the file
        and load() reads them back, so one file turns text into text; None,
        None removes them. ArgumentError for a tokenizer with more ids than
        the vocabulary it feeds; nothing changes on error."""
        check(lib.tfm_model_set_tokenizers(
            self._ptr(), ffi.NULL if source is None else source._ptr(),
            ffi.NULL if target is None else target._ptr()))

    def _tokenizer_bytes(self):
        """(source, target) tokenizer bytes, None for what the model lacks
        (target: also when the source's does both)."""
        pointers = [lib.tfm_model_tokenizer(self._ptr(), side) for side in (0, 1)]
        own_target = pointers[1] != pointers[0]
        return (None if pointers[0] == ffi.NULL else _text()._bytes_of(pointers[0]),
                _text()._bytes_of(pointers[1]) if own_target else None)

    def encode_text(self, text, max_length=None):
        """The ids the encoder takes for text (str or bytes): the source
        tokenizer's, between the ids the model's family puts around every
        source (BART <s> X </s>, Marian and T5 X </s>, mBART/M2M100/NLLB
        [source language] X </s>); a list of texts gives a list of lists.
        max_length: at most that many ids, the text's cut and those around
        it kept, as transformers' truncation=True (a text of any length is
        then encoded only as far as those ids need). StateError for a
        model without tokenizers."""
        if not isinstance(text, (str, bytes)):
            return [self.encode_text(one, max_length) for one in text]
        data = text.encode('utf-8') if isinstance(text, str) else bytes(text)
        pointer = self._ptr()
        if max_length is not None:
            ids, count = ffi.new('int32_t[]', max(max_length, 1)), ffi.new('int64_t *')
            check(lib.tfm_model_encode_text_truncated(pointer, data, len(data), ids, max_length,
                                                      count, ffi.NULL))
            return list(ffi.unpack(ids, count[0]))
        ids, count = _text()._sized(lambda out, capacity, size: lib.tfm_model_encode_text(
            pointer, data, len(data), out, capacity, size), 'int32_t[]', len(data) + 8)
        return list(ffi.unpack(ids, count))

    def decode_text(self, ids):
        """The text of ids the decoder produced, as transformers' decode
        with skip_special_tokens (and the family's clean-up); a list of
        sequences (or a 2-D array) gives a list of texts."""
        if isinstance(ids, (list, tuple)) and ids and np.ndim(ids[0]) > 0:
            return [self.decode_text(one) for one in ids]
        array = to_numpy(ids)
        if array.ndim == 2:
            return [self.decode_text(row) for row in array]
        # [] reads as floats to numpy; no ids still ask the model (its tokenizers)
        array = as_array(array.reshape(-1) if array.size else np.zeros(0, np.int32), np.int32)
        pointer = self._ptr()
        text, length = _text()._sized(lambda out, capacity, size: lib.tfm_model_decode_text(
            pointer, ffi.from_buffer('int32_t[]', array), array.size, out, capacity, size),
            'char[]', 8 * array.size + 1, terminated=True)
        return ffi.unpack(text, length).decode('utf-8', errors='replace')

    def set_languages(self, source=None, target=None):
        """A multilingual model's languages by their codes ('en_XX',
        'eng_Latn', 'en'): the source code goes before every source, the
        target code is decoding's forced first token. None leaves a side
        as it is."""
        check(lib.tfm_model_set_languages(
            self._ptr(), ffi.NULL if source is None else c_string(source),
            ffi.NULL if target is None else c_string(target)))

    def set_source_template(self, prefix=(), suffix=()):
        """The ids put around every source by encode_text (at most 4 in
        all)."""
        prefix, suffix = list(prefix), list(suffix)
        check(lib.tfm_model_set_source_template(
            self._ptr(), ffi.new('int32_t[]', prefix or [0]), len(prefix),
            ffi.new('int32_t[]', suffix or [0]), len(suffix)))

    @property
    def options(self):
        """The model's options by field name (enumerations by name)."""
        o = options('tfm_model_options', lib.tfm_model_options_init_sized, {})
        check(lib.tfm_model_get_options(self._ptr(), o))
        return options_dict('tfm_model_options', o)

    def parameter_count(self):
        """The number of parameter values."""
        return check_size(lib.tfm_model_parameter_count(self._ptr()))

    def parameters(self):
        """The parameter tensors (see Params.parameters)."""
        return self.params.parameters()

    def named_parameters(self):
        """(name, tensor) pairs, with nn.Transformer's names."""
        return self.params.named_parameters()

    @property
    def training(self):
        """Whether the model is in training mode (dropout on)."""
        return self._training

    def train(self, training=True):
        """Training mode (dropout on) or not; returns the model."""
        check(lib.tfm_model_set_training(self._ptr(), int(training)))
        self._training = bool(training)
        return self

    def eval(self):
        """Evaluation mode (dropout off); returns the model."""
        return self.train(False)

    def recompute(self, attention_weights=False, feed_forward_hidden=False, norm_outputs=False,
                  attention_context=False):
        """What the backward computes again instead of keeping on the tape:
        memory for time, the same results."""
        what = (lib.TFM_RECOMPUTE_ATTENTION_WEIGHTS if attention_weights else 0) | \
               (lib.TFM_RECOMPUTE_FEED_FORWARD_HIDDEN if feed_forward_hidden else 0) | \
               (lib.TFM_RECOMPUTE_NORM_OUTPUTS if norm_outputs else 0) | \
               (lib.TFM_RECOMPUTE_ATTENTION_CONTEXT if attention_context else 0)
        check(lib.tfm_model_set_recompute(self._ptr(), what))
        self._recompute = what
        return self

    def freeze(self, *parts):
        """Keeps exactly the parts named out of training (tfm_model_freeze):
        'embeddings' (a tied output projection's weight too), 'encoder',
        'decoder', 'output'; none named: the whole model trains. Their
        parameters get no gradient and an optimizer's step leaves them as
        they are, weight decay included. Not saved with the model. Returns
        the model."""
        chosen = ffi.new('tfm_model_parts *')
        check(lib.tfm_model_parts_parse(c_string(','.join(parts)), chosen))
        check(lib.tfm_model_freeze(self._ptr(), chosen[0]))
        return self

    @property
    def frozen(self):
        """The parts freeze() froze, as a tuple of their names."""
        what = lib.tfm_model_frozen(self._ptr())
        return tuple(name for name, flag in (
            ('embeddings', lib.TFM_MODEL_PART_EMBEDDINGS), ('encoder', lib.TFM_MODEL_PART_ENCODER),
            ('decoder', lib.TFM_MODEL_PART_DECODER), ('output', lib.TFM_MODEL_PART_OUTPUT))
            if what & flag)

    def state_dict(self):
        """name -> a numpy copy of each parameter's values."""
        return self.params.state_dict()

    def load_state_dict(self, state, strict=True, strip_prefix=None):
        """See Params.load_state_dict; a quantized model's raises StateError
        (its int8 weights would stay as they are)."""
        if self.quantized:
            raise StateError('load_state_dict: the model is quantized to int8; load into a '
                             'float32 model, then quantize it')
        return self.params.load_state_dict(state, strict, strip_prefix)

    def __copy__(self):
        """An independent model: what its file keeps (options, parameter
        values, int8 weights, tokenizers and the ids around sources), its
        mode and recomputation (its dropout stream restarts from the seed;
        a published model's generation defaults, which files do not keep,
        are not copied)."""
        return _model_from_file(*self.__reduce__()[1])

    def __reduce__(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, 'model.safetensors')
            self.save(path)
            with open(path, 'rb') as saved:
                data = saved.read()
        return _model_from_file, (data, self._training, self._recompute)

    def __repr__(self):
        if self.closed:
            return 'tfm.Model(<closed>)'
        o = self.options
        shown = ', '.join('%s=%r' % (k, o[k]) for k in (
            'src_vocab', 'tgt_vocab', 'd_model', 'heads', 'encoder_layers', 'decoder_layers',
            'd_ff'))
        return 'tfm.Model(%s, parameters=%d, training=%s)' % (shown, self.parameter_count(),
                                                            self._training)

    def encode(self, src, src_mask=None, src_key_padding_mask=None):
        """memory [B, S, d_model] from src [B, S], recorded on the current
        tape; masks as forward's."""
        tape, inputs = recording()
        with inputs:
            mask, key_padding_mask = masks(inputs, src_mask, src_key_padding_mask)
            return tape.made(lib.tfm_model_encode(tape._ptr(), self._ptr(), inputs(src, np.int32),
                                                  mask, key_padding_mask))

    def decode(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
               memory_key_padding_mask=None):
        """Logits [B, T, tgt_vocab] for tgt [B, T] over memory (from
        encode), recorded on the current tape; masks as forward's."""
        tape, inputs = recording()
        with inputs:
            return tape.made(lib.tfm_model_decode(
                tape._ptr(), self._ptr(), inputs(tgt, np.int32), inputs(memory), *decoder_masks(
                    inputs, tgt_mask, memory_mask, tgt_key_padding_mask,
                    memory_key_padding_mask)))

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        """Logits [B, T, tgt_vocab], with nn.Transformer.forward's masks as
        numpy, torch or tfm tensors: bool masks are PyTorch's (True =
        ignore), float ones additive (0 / -inf), int ones keep-masks (0 =
        ignore); each attention's pair is brought to one form."""
        tape, inputs = recording()
        with inputs:
            src_mask, src_key_padding_mask = masks(inputs, src_mask, src_key_padding_mask)
            tgt_mask, tgt_key_padding_mask = masks(inputs, tgt_mask, tgt_key_padding_mask)
            memory_mask, memory_key_padding_mask = masks(inputs, memory_mask,
                                                         memory_key_padding_mask)
            return tape.made(lib.tfm_model_forward(
                tape._ptr(), self._ptr(), inputs(src, np.int32), inputs(tgt, np.int32),
                src_mask, tgt_mask, memory_mask, src_key_padding_mask, tgt_key_padding_mask,
                memory_key_padding_mask))

    __call__ = forward

    def _sources(self, src):
        """src as [batch, length] int32: a list of id lists of different
        lengths (encode_text's of several texts) is padded with the model's
        pad_id (refused when it has none), which decoding then masks."""
        if isinstance(src, (list, tuple)) and src and all(
                isinstance(row, (list, tuple, np.ndarray)) for row in src):
            rows = [as_array(row, np.int32).reshape(-1) for row in src]
            width = max(len(row) for row in rows)
            if any(len(row) != width for row in rows):
                pad = lib.tfm_model_pad_id(self._ptr())
                if pad < 0:
                    raise ValueError('sources of different lengths need a pad_id, which '
                                     'the model has not')
                padded = np.full((len(rows), width), pad, np.int32)
                for i, row in enumerate(rows):
                    padded[i, :len(row)] = row
                return padded
        return as_array(src, np.int32)

    def _decode(self, src, with_logits=False, prefix=None, return_attention=False, **fields):
        src = self._sources(src)
        if src.ndim != 2:
            raise ValueError('src must be [batch, length], not %d-D' % src.ndim)
        with Decoding(self, src.shape[0], src.shape[1], return_attention=int(return_attention),
                      **fields) as decoding:
            return decoding.run(src, with_logits, prefix)

    def greedy(self, src, max_length=None, bos_id=None, eos_id=None, src_pad_id=None,
               return_scores=False, return_logits=False, prefix=None, callback=None,
               return_attention=False, cache_precision='auto', **processors):
        """Token ids [B, max_length + 1]: bos_id, the tokens, -1 after;
        bos_id, eos_id and src_pad_id are the model's unless given. With
        return_scores, return_logits or return_attention, a Decoded (tokens,
        lengths, scores; with return_logits the logits [B, max_length,
        tgt_vocab] of each step; with return_attention each source's
        alignments). processors, tfm_decode_options' fields by keyword:
        min_length, repetition_penalty, no_repeat_ngram_size, suppress_ids
        and eos_ids (lists of ids), bad_words (a list of id sequences),
        max_length_a, max_length_b, forced_bos_id, forced_eos_id. prefix [B, P]: each
        source's first tokens after bos_id, forced (-1s pad a row).
        callback(source, token, position) streams each token as it is
        chosen (possibly from libtfm's threads); a true result stops that
        source (see Decoding). cache_precision 'auto' (bfloat16 for a
        quantized model whose products run in int8 on this CPU, else
        float32), 'float32' or 'bfloat16': what the caches of keys and
        values hold (bfloat16: each rounded to nearest
        even, half the memory to read; on CPUs with AVX512_BF16 the
        attention then multiplies in bfloat16 pairs, rounding queries and
        weights too; tfm_decode_options' cache_precision)."""
        # strategy given: a published model's own may be beam search
        decoded = self._decode(src, return_logits, prefix, return_attention, strategy='greedy',
                               **_processors(processors), **_given(
            max_length=max_length, bos_id=bos_id, eos_id=eos_id, src_pad_id=src_pad_id,
            callback=callback,
            cache_precision=_choice('cache_precision', cache_precision, _CACHE_PRECISIONS)))
        return decoded if return_scores or return_logits or return_attention else decoded.tokens

    def sample(self, src, temperature=1.0, top_k=0, top_p=1.0, seed=0, max_length=None,
               bos_id=None, eos_id=None, src_pad_id=None, return_scores=False,
               return_logits=False, prefix=None, callback=None, return_attention=False,
               cache_precision='auto', **processors):
        """Tokens drawn with temperature, top-k and top-p, as greedy's (with
        return_logits, also probs: the distributions drawn from)."""
        decoded = self._decode(src, return_logits, prefix, return_attention, strategy='sample',
                               **_processors(processors), **_given(
            temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
            max_length=max_length, bos_id=bos_id, eos_id=eos_id, src_pad_id=src_pad_id,
            callback=callback,
            cache_precision=_choice('cache_precision', cache_precision, _CACHE_PRECISIONS)))
        return decoded if return_scores or return_logits or return_attention else decoded.tokens

    def beam(self, src, beam_size=4, n_best=1, length_penalty=1.0, max_length=None,
             bos_id=None, eos_id=None, src_pad_id=None, patience=None, prefix=None,
             callback=None, return_attention=False, renormalize_logits=None, beam_rules=None,
             early_stopping=None, cache_precision='auto', **processors):
        """(tokens [B, n_best, max_length + 1], scores [B, n_best]), and with
        return_attention a third, the alignments [B][n_best]; the special
        tokens, processors, prefix and callback as greedy's (the callback
        gets each source's best hypothesis once its search has ended);
        patience: a source stops at round(beam_size * patience) finished
        hypotheses; renormalize_logits (the model's unless given: a
        published folder's generation_config.json, else False): each step's
        processed log probabilities renormalised, so the scores sum log
        probabilities of the tokens left (transformers' renormalize_logits);
        beam_rules 'ctranslate2' or 'transformers' (whose beam search; the
        model's unless given) and, with 'transformers', early_stopping
        False, True or 'never' (as generate's); cache_precision as
        greedy's."""
        decoded = self._decode(src, False, prefix, return_attention, strategy='beam',
                               **_processors(processors), **_given(
            patience=patience, callback=callback,
            renormalize_logits=None if renormalize_logits is None else int(renormalize_logits),
            beam_rules=_choice('beam_rules', beam_rules, _BEAM_RULES),
            early_stopping=_choice('early_stopping', early_stopping, _EARLY_STOPPING),
            cache_precision=_choice('cache_precision', cache_precision, _CACHE_PRECISIONS),
            beam_size=beam_size, n_best=n_best, length_penalty=length_penalty,
            max_length=max_length, bos_id=bos_id, eos_id=eos_id, src_pad_id=src_pad_id))
        batch = decoded.tokens.shape[0] // n_best
        out = decoded.tokens.reshape(batch, n_best, -1), decoded.scores.reshape(batch, n_best)
        if return_attention:
            out += ([decoded.attention[b * n_best:(b + 1) * n_best] for b in range(batch)],)
        return out


def _model_from_file(data, training, recompute):
    """A model from what Model.__reduce__ keeps (copies and pickles): its
    file's bytes, its mode and recomputation."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, 'model.safetensors')
        with open(path, 'wb') as out:
            out.write(data)
        model = Model.load(path)
    check(lib.tfm_model_set_recompute(model._ptr(), recompute))
    model._recompute = recompute
    return model if model.quantized else model.train(training)


def _rebuilt_model(options, state, training, recompute, tokenizers=(None, None),
                   quantized=None):
    """A model from what Model.__reduce__ kept before 0.6 (pickles made by
    libtfm 0.5)."""
    model = Model(**options)
    model.load_state_dict(state)
    if tokenizers[0] is not None:
        model.set_tokenizers(*(None if t is None else _text().Tokenizer.from_bytes(t)
                               for t in tokenizers))
    check(lib.tfm_model_set_recompute(model._ptr(), recompute))
    model._recompute = recompute
    if quantized:
        return model.quantize(generator=quantized == 'layers,generator')
    return model.train(training)


def _text():
    """The tfm._text module, which imports this one (so not at the top)."""
    from . import _text as text
    return text


def _given(**values):
    return {k: v for k, v in values.items() if v is not None}


# The decoding options greedy, sample and beam take by keyword: the logits
# processors and the per-source length limit.
_PROCESSORS = ('min_length', 'repetition_penalty', 'no_repeat_ngram_size', 'suppress_ids',
              'eos_ids', 'bad_words', 'max_length_a', 'max_length_b', 'forced_bos_id',
              'forced_eos_id')

# beam's named choices and their C values
_BEAM_RULES = {'ctranslate2': 'TFM_BEAM_RULES_CTRANSLATE2',
               'transformers': 'TFM_BEAM_RULES_TRANSFORMERS'}
_EARLY_STOPPING = {False: 'TFM_EARLY_STOPPING_HEURISTIC', True: 'TFM_EARLY_STOPPING_TRUE',
                   'never': 'TFM_EARLY_STOPPING_NEVER'}
# the decode methods' cache_precision
_CACHE_PRECISIONS = {'auto': 'TFM_CACHE_AUTO', 'float32': 'TFM_CACHE_FLOAT32',
                     'bfloat16': 'TFM_CACHE_BFLOAT16'}


def _choice(name, value, choices):
    """The C value of one of a keyword's named choices; None stays None."""
    if value is None:
        return None
    for key, constant in choices.items():
        if value is key or (isinstance(value, str) and value == key):
            return getattr(lib, constant)
    raise ValueError('%s must be one of %s, not %r' % (
        name, ', '.join(repr(k) for k in choices), value))


def _processors(given):
    unknown = sorted(set(given) - set(_PROCESSORS))
    if unknown:
        raise TypeError('unexpected keyword %s (the processors: %s)' % (
            ', '.join(unknown), ', '.join(_PROCESSORS)))
    return given


def _token_lists(fields):
    """suppress_ids and eos_ids (lists of ids) and bad_words (a list of id
    sequences) turned into the C fields, arrays and counts; returns the
    arrays, to keep alive until tfm_decoding_create has copied them."""
    arrays = []

    def array(values):
        arrays.append(ffi.new('int32_t[]', values) if values else ffi.NULL)
        return arrays[-1]
    for name in ('suppress_ids', 'eos_ids'):
        if name in fields:
            ids = [int(v) for v in fields.pop(name)]
            fields[name], fields['n_' + name] = array(ids), len(ids)
    if 'bad_words' in fields:
        words = [[int(v) for v in word] for word in fields.pop('bad_words')]
        fields['bad_words'] = array([v for word in words for v in word])
        fields['bad_word_lengths'] = array([len(word) for word in words])
        fields['n_bad_words'] = len(words)
    return arrays


Decoded = collections.namedtuple('Decoded', 'tokens lengths scores logits probs attention',
                                 defaults=(None,))
Decoded.__doc__ = """A decoding run's results: tokens [N, max_length + 1] (bos, the
tokens, -1 after), lengths [N] (the tokens before the -1s), scores [N] (the
sum of the chosen tokens' log probabilities), and when asked logits and
probs [N, max_length, tgt_vocab] (each step's logits and the distribution
the token was drawn from; zeros after a sequence ended), else None; with
return_attention, attention: per hypothesis its alignments [lengths - 1, S]
(row i the last decoder layer's cross-attention weights, averaged over its
heads, that chose the token at i + 1), else None."""


class _Streaming:
    """A Python callable as a tfm_decode_callback: function(source, token,
    position), a true result stopping that source. An exception it raises
    stops the source too, and the run raises it once decoding has ended."""

    def __init__(self, function):
        self.function, self.error = function, None
        self.c = ffi.callback('tfm_decode_callback', self._call)

    def _call(self, user, source, token, position):
        try:
            return 1 if self.function(int(source), int(token), int(position)) else 0
        except BaseException as error:  # noqa: B902 - raised again by Decoding.run
            if self.error is None:
                self.error = error
            return 1


# The decoding options a model's special tokens fill, and those tokens.
_SPECIAL_TOKENS = (('bos_id', 'bos_id'), ('eos_id', 'eos_id'), ('src_pad_id', 'pad_id'))


class Decoding(Handle):
    """A tfm_decoding for a model, sized for max_batch sources of up to
    max_src_len tokens; keyword arguments are tfm_decode_options' fields.
    bos_id, eos_id and src_pad_id are the model's unless given; one that
    neither the model nor the caller has is refused (ArgumentError).
    max_length is the model's max_tgt_len - 1 unless given. callback, a
    Python callable(source, token, position), streams each source's tokens
    as they are chosen (tfm_decode_callback: greedy and sampling at each
    step, beam search the best hypothesis once a source's search has ended;
    calls for different sources may come from libtfm's threads at once); a
    true result stops that source. return_attention=1 keeps each
    hypothesis' alignments (Decoded.attention)."""
    _free = lib.tfm_decoding_free
    _copy_advice = 'make another tfm.Decoding for the model'

    def __init__(self, model, max_batch, max_src_len, **fields):
        fields.setdefault('max_length', model.options['max_tgt_len'] - 1)
        unset = [field for field, model_field in _SPECIAL_TOKENS
                 if field not in fields and model.options[model_field] == -1]
        if unset:
            raise ArgumentError(
                'decoding needs %s: the model has none (tfm.Model(..., bos_id=, eos_id=, '
                'pad_id=) keeps them, in its file too) and none was passed (eos_id=-1: no end '
                'token; src_pad_id=-1: sources without padding)' % ', '.join(unset))

        def init_from_model(o, size):
            lib.tfm_decode_options_init_sized(o, size)
            check(lib.tfm_decode_options_from_model(model._ptr(), o))
        kept = _token_lists(fields)
        if fields.get('adapter') is not None:  # the model's adapter by name
            kept.append(ffi.new('char[]', c_string(fields['adapter'])))
            fields['adapter'] = kept[-1]
        self._streaming = None  # kept alive as long as the C side may call it
        if fields.get('callback') is not None:
            self._streaming = _Streaming(fields['callback'])
            fields['callback'] = self._streaming.c
        o = options('tfm_decode_options', init_from_model, fields)
        super().__init__(check_pointer(lib.tfm_decoding_create(model._ptr(), o, max_batch,
                                                               max_src_len)), model)
        del kept  # copied by tfm_decoding_create
        self._width = o.max_length + 1
        self._steps = o.max_length
        self._attention = bool(o.return_attention)

    def run(self, src, with_logits=False, prefix=None):
        """A Decoded for src [B, S] (tokens [B * n_best, max_length + 1]);
        with_logits also fills logits and probs (not for beam search).
        prefix [B, P]: each source's first tokens after bos_id, forced as
        generated ones (tfm_decoding_run_with_prefix; -1s pad a row)."""
        src = as_array(src, np.int32)
        counts = ffi.new('int64_t[4]')
        check(lib.tfm_decoding_buffer_sizes(self._ptr(), src.shape[0], counts, counts + 1,
                                            counts + 2, counts + 3))
        tokens = np.empty(counts[0], np.int32)
        lengths = np.empty(counts[1], np.int32)
        scores = np.empty(counts[2], np.float32)
        vocab = lib.tfm_model_tgt_vocab(self._owner._ptr())
        steps = [np.empty((src.shape[0], self._steps, vocab), np.float32)
                 for _ in range(2)] if with_logits else []
        step_buffers = [ffi.from_buffer('float[]', a) for a in steps] or [ffi.NULL] * 2
        if self._streaming is not None:
            self._streaming.error = None
        with Inputs() as inputs:
            status = lib.tfm_decoding_run_with_prefix(
                self._ptr(), inputs(src, np.int32), inputs(prefix, np.int32),
                ffi.from_buffer('int32_t[]', tokens), tokens.size,
                ffi.from_buffer('int32_t[]', lengths), lengths.size,
                ffi.from_buffer('float[]', scores), scores.size,
                step_buffers[0], steps[0].size if steps else 0,
                step_buffers[1], steps[0].size if steps else 0)
        if self._streaming is not None and self._streaming.error is not None:
            raise self._streaming.error
        check(status)
        logits, probs = steps or (None, None)
        attention = [self._alignments(i) for i in range(lengths.size)] if self._attention else None
        return Decoded(tokens.reshape(-1, self._width), lengths, scores, logits, probs, attention)

    def _alignments(self, hypothesis):
        """The last run's hypothesis' alignments [target length, source length]."""
        sizes = ffi.new('int64_t[2]')
        check(lib.tfm_decoding_attention(self._ptr(), hypothesis, ffi.NULL, 0, sizes, sizes + 1))
        out = np.empty((sizes[0], sizes[1]), np.float32)
        check(lib.tfm_decoding_attention(self._ptr(), hypothesis, ffi.from_buffer('float[]', out),
                                         out.size, ffi.NULL, ffi.NULL))
        return out


# --- optimizers ---------------------------------------------------------------------
class Optimizer(Handle):
    """An optimizer over every parameter of a store, given as a model, a
    store, model.parameters(), or PyTorch-style groups [{'params': [...],
    'weight_decay': ...}, ...] that together hold every parameter of one
    store (libtfm has one learning rate: groups set weight decay only).
    Keyword arguments are tfm_optimizer_options' fields (lr, betas,
    weight_decay, clip_norm, schedule ('constant', 'step', 'warmup_invsqrt'
    or 'invsqrt', 'warmup_cosine' or 'cosine'), warmup_steps, …).
    copy.copy gives an optimizer over the same parameters with a copy of
    the state; copy.deepcopy copies the model (or store) too."""
    _free = lib.tfm_optimizer_free
    _kind = None

    def __init__(self, params, **fields):
        self._source, groups = _store_and_groups(params)
        store = self._source.params if isinstance(self._source, Model) else self._source
        self._fields = dict(fields)
        if 'betas' in fields:
            fields['beta1'], fields['beta2'] = fields.pop('betas')
        o = options('tfm_optimizer_options', lib.tfm_optimizer_options_init_sized, fields,
                    self._kind)
        super().__init__(check_pointer(lib.tfm_optimizer_create(store._ptr(), o)), store)
        for group in groups:
            if 'weight_decay' in group:
                for parameter in group['params']:
                    self.set_weight_decay(parameter, group['weight_decay'])

    def step(self):
        """One update of every parameter that requires grad."""
        check(lib.tfm_optimizer_step(self._ptr()))

    def zero_grad(self):
        """Sets every gradient of the store to zero."""
        check(lib.tfm_optimizer_zero_grad(self._ptr()))

    @property
    def lr(self):
        """The rate the next step uses; setting it sets the base rate."""
        return lib.tfm_optimizer_lr(self._ptr())

    @lr.setter
    def lr(self, value):
        check(lib.tfm_optimizer_set_lr(self._ptr(), value))

    def weight_decay(self, parameter):
        """A parameter's weight decay (parameter: a name or a tensor)."""
        value = lib.tfm_optimizer_weight_decay(self._ptr(), self._owner._index(parameter))
        return check_size(value)

    def set_weight_decay(self, parameter, value):
        """Sets one parameter's weight decay (a name or a tensor; None:
        every parameter's), as a PyTorch parameter group's."""
        index = -1 if parameter is None else self._owner._index(parameter)
        check(lib.tfm_optimizer_set_weight_decay(self._ptr(), index, value))

    def no_decay_for_vectors(self):
        """No weight decay for tensors of fewer than two axes (biases, norms)."""
        check(lib.tfm_optimizer_no_decay_for_vectors(self._ptr()))

    @property
    def step_count(self):
        """Steps taken (refused steps not counted)."""
        return check_size(lib.tfm_optimizer_step_count(self._ptr()))

    @property
    def last_grad_norm(self):
        """The global gradient norm the last step saw, before clipping."""
        return lib.tfm_optimizer_last_grad_norm(self._ptr())

    def save(self, path):
        """Writes the state (steps, rate, weight decays, moments) as safetensors."""
        check(lib.tfm_optimizer_save(self._ptr(), c_path(path)))

    def load(self, path):
        """Restores a state save() wrote for an optimizer over the same parameters."""
        check(lib.tfm_optimizer_load(self._ptr(), c_path(path)))

    def state_dict(self):
        """The state as name -> numpy array (what save() writes)."""
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, 'optimizer.safetensors')
            self.save(path)
            return _file_tensors(path)

    def load_state_dict(self, state):
        """Restores a state_dict() of an optimizer over the same parameters
        (nothing changes when it does not fit: FormatError)."""
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, 'optimizer.safetensors')
            _write_file(path, {name: to_numpy(value) for name, value in state.items()})
            self.load(path)

    def _over(self, source):
        twin = type(self)(source, **self._fields)
        twin.load_state_dict(self.state_dict())
        return twin

    def __copy__(self):
        return self._over(self._source)

    def __deepcopy__(self, memo):
        return self._over(copy.deepcopy(self._source, memo))

    def __reduce__(self):
        raise TypeError('a tfm.%s cannot be pickled: pickle its state_dict() and the model, '
                        'then load_state_dict() into a new optimizer over the model'
                        % type(self).__name__)

    def __repr__(self):
        if self.closed:
            return 'tfm.%s(<closed>)' % type(self).__name__
        return 'tfm.%s(%s)' % (type(self).__name__, ', '.join(
            ['lr=%g' % self.lr, 'step_count=%d' % self.step_count] +
            ['%s=%r' % kv for kv in self._fields.items() if kv[0] != 'lr']))


def _store_and_groups(given):
    """(the model or store an optimizer updates, the parameter groups)."""
    if isinstance(given, (Model, Params)):
        return given, []
    groups = list(given)
    if groups and not isinstance(groups[0], dict):
        groups = [{'params': groups}]
    stores, covered = set(), 0
    for group in groups:
        unknown = set(group) - {'params', 'weight_decay'}
        if unknown:
            raise ValueError('libtfm\'s parameter groups set weight_decay only, not %s (one '
                             'lr for all: set it on the optimizer)' % ', '.join(sorted(unknown)))
        group['params'] = list(group['params'])
        for parameter in group['params']:
            if not isinstance(parameter, Tensor) or not isinstance(parameter._owner, Params):
                raise TypeError('parameter groups hold parameters (model.parameters()), not %s'
                                % type(parameter).__name__)
            stores.add(parameter._owner)
        covered += len(group['params'])
    if len(stores) != 1:
        raise ValueError('an optimizer updates the parameters of one store (model); '
                         'these come from %d' % len(stores))
    store = stores.pop()
    if covered != len(store):
        raise ValueError('libtfm\'s optimizer updates every parameter of the store: the '
                         'groups hold %d of its %d (set requires_grad = False to freeze one)'
                         % (covered, len(store)))
    return (store._owner if isinstance(store._owner, Model) else store), groups


class SGD(Optimizer):
    """torch.optim.SGD (momentum, weight_decay, ...)."""
    _kind = lib.TFM_OPTIMIZER_SGD


class Adam(Optimizer):
    """torch.optim.Adam: weight decay as an L2 term."""
    _kind = lib.TFM_OPTIMIZER_ADAM


class AdamW(Optimizer):
    """torch.optim.AdamW: decoupled weight decay."""
    _kind = lib.TFM_OPTIMIZER_ADAMW


# --- training states ----------------------------------------------------------------
def save_training(path, model, optimizer, rngs=(), metadata=None):
    """Parameters, optimizer state and random streams in one file."""
    count, keys, values, _kept = _strings(metadata or {})
    check(lib.tfm_training_save(c_path(path), model._ptr(), optimizer._ptr(), len(rngs),
                                ffi.new('tfm_rng *[]', [r._ptr() for r in rngs]), count,
                                keys, values))


def load_training(path, model, optimizer, rngs=()):
    """Restores what save_training wrote into a model, optimizer and streams."""
    check(lib.tfm_training_load(c_path(path), model._ptr(), optimizer._ptr(), len(rngs),
                                ffi.new('tfm_rng *[]', [r._ptr() for r in rngs])))


def metadata(path):
    """A safetensors file's "__metadata__" as a dict of strings."""
    pointer = check_pointer(lib.tfm_safetensors_open(c_path(path)))
    try:
        count = check_size(lib.tfm_safetensors_metadata_count(pointer))
        keys = [ffi.string(lib.tfm_safetensors_metadata_key(pointer, i)).decode()
                for i in range(count)]
        return {k: ffi.string(lib.tfm_safetensors_metadata_get(pointer, c_string(k))).decode()
                for k in keys}
    finally:
        lib.tfm_safetensors_close(pointer)

