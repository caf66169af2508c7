"""Parameter stores, layers, masks, the model, optimizers and decoding."""
import numpy as np

from ._binding import ffi, lib
from ._core import (Handle, Inputs, Tensor, as_array, check, check_pointer, check_size,
                    current_tape)

_NAMED = {
    'positions': {'sinusoidal': lib.TFM_POSITIONS_SINUSOIDAL,
                  'learned': lib.TFM_POSITIONS_LEARNED},
    'embedding_scale': {'none': lib.TFM_EMBEDDING_SCALE_NONE,
                        'sqrt_d': lib.TFM_EMBEDDING_SCALE_SQRT_D,
                        'trainable': lib.TFM_EMBEDDING_SCALE_TRAINABLE},
    'activation': {'relu': lib.TFM_ACTIVATION_RELU, 'gelu': lib.TFM_ACTIVATION_GELU},
    'strategy': {'greedy': lib.TFM_DECODE_GREEDY, 'sample': lib.TFM_DECODE_SAMPLE,
                 'beam': lib.TFM_DECODE_BEAM},
    'schedule': {'constant': lib.TFM_SCHEDULE_CONSTANT, 'step': lib.TFM_SCHEDULE_STEP,
                 'warmup_invsqrt': lib.TFM_SCHEDULE_WARMUP_INVSQRT,
                 'warmup_cosine': lib.TFM_SCHEDULE_WARMUP_COSINE},
}


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
            if value not in _NAMED[name]:
                raise ValueError('%s must be one of %s, not %r' % (
                    name, ', '.join(_NAMED[name]), value))
            value = _NAMED[name][value]
        setattr(o, name, value)
    return o


def options_dict(struct, o):
    return {name: getattr(o, name) for name, _ in ffi.typeof(struct).fields
            if name != 'struct_size'}


# --- parameter stores -----------------------------------------------------------------
class Params(Handle):
    """Named float32 parameters (tfm_params). A model's store belongs to the
    model (Model.params); a store made here is the caller's."""
    _free = lib.tfm_params_free

    def __init__(self, pointer=None, owner=None):
        if pointer is None:
            pointer = check_pointer(lib.tfm_params_create())
        super().__init__(pointer, owner)
        if owner is not None:
            self._free = None

    def add(self, name, shape):
        shape = list(shape)
        pointer = lib.tfm_params_add(self._ptr(), name.encode(), len(shape),
                                     ffi.new('int64_t[]', shape))
        return Tensor(check_pointer(pointer), owner=self)

    def __len__(self):
        return check_size(lib.tfm_params_count(self._ptr()))

    def names(self):
        return [ffi.string(check_pointer(lib.tfm_params_name(self._ptr(), i))).decode()
                for i in range(len(self))]

    def __getitem__(self, name):
        pointer = lib.tfm_params_find(self._ptr(), name.encode())
        if pointer == ffi.NULL:
            lib.tfm_clear_error()
            raise KeyError(name)
        return Tensor(pointer, owner=self)

    def numel(self):
        return check_size(lib.tfm_params_numel(self._ptr()))

    def zero_grad(self):
        check(lib.tfm_params_zero_grad(self._ptr()))

    def clip_grad_norm(self, max_norm):
        norm = ffi.new('float *')
        check(lib.tfm_params_clip_grad_norm(self._ptr(), max_norm, norm))
        return norm[0]

    def state_dict(self):
        """name -> a numpy copy of the values, in the store's order."""
        return {name: self[name].numpy() for name in self.names()}

    def load_state_dict(self, state, strict=True):
        """Copies values by name from a mapping of arrays (numpy, or anything
        with .numpy(), such as torch tensors). Strict: the names must be the
        store's exactly. Every name and shape is checked before any value
        is written."""
        ours = self.names()
        if strict:
            missing = [n for n in ours if n not in state]
            unexpected = [n for n in state if n not in ours]
            if missing or unexpected:
                raise KeyError('load_state_dict: missing %s, unexpected %s' % (
                    missing[:5] or 'none', unexpected[:5] or 'none'))
        values = {}
        for name in ours:
            if name not in state:
                continue
            value = state[name]
            if hasattr(value, 'detach'):
                value = value.detach().cpu().numpy()
            array = as_array(value, np.float32)
            shape = self[name].shape
            if array.shape != shape:
                raise ValueError('load_state_dict: %s has shape %s here and %s given' % (
                    name, shape, array.shape))
            values[name] = array
        for name, array in values.items():
            self[name].write(array)

    def save(self, path):
        check(lib.tfm_params_save(self._ptr(), str(path).encode()))

    def load(self, path, strip_prefix=None, allow_unexpected=False, allow_missing=False):
        """Loads a safetensors file by name; returns a dict of the names
        'loaded', 'skipped' and 'missing'."""
        o = options('tfm_load_options', lib.tfm_load_options_init_sized,
                    {'allow_unexpected': int(allow_unexpected),
                     'allow_missing': int(allow_missing)})
        prefix = ffi.new('char[]', strip_prefix.encode()) if strip_prefix else ffi.NULL
        o.strip_prefix = prefix
        report = ffi.new('tfm_load_report **')
        check(lib.tfm_params_load_with(self._ptr(), str(path).encode(), o, report))
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

    def __init__(self, pointer, params=None, rng=None):
        super().__init__(check_pointer(pointer), params)
        self._rng = rng  # dropout draws from it: keep it alive

    @property
    def kind(self):
        return ffi.string(check_pointer(lib.tfm_layer_kind(self._ptr()))).decode()

    def train(self, training=True):
        check(lib.tfm_layer_set_training(self._ptr(), int(training)))
        return self

    def eval(self):
        return self.train(False)

    def __call__(self, *tensors, **masks):
        return self.forward(*tensors, **masks)

    def forward(self, *args):
        tape = current_tape()
        with Inputs(tape) as inputs:
            pointers = [inputs(a, np.int32 if self.kind == 'embedding' else None)
                        if a is None or isinstance(a, (Tensor, np.ndarray, list)) else a
                        for a in args]
            return tape.made(type(self)._forward(tape._ptr(), self._ptr(), *pointers))


def _rng_pointer(rng):
    return rng._ptr() if rng is not None else ffi.NULL


class Linear(Layer):
    _forward = lib.tfm_linear_forward

    def __init__(self, params, name, in_features, out_features, bias=True, rng=None):
        super().__init__(lib.tfm_linear_create(params._ptr(), name.encode(), in_features,
                                               out_features, int(bias), _rng_pointer(rng)),
                         params, rng)


class Embedding(Layer):
    _forward = lib.tfm_embedding_forward

    def __init__(self, params, name, vocab, dim, rng=None):
        super().__init__(lib.tfm_embedding_create(params._ptr(), name.encode(), vocab, dim,
                                                  _rng_pointer(rng)), params, rng)


class LayerNorm(Layer):
    _forward = lib.tfm_layer_norm_forward

    def __init__(self, params, name, dim, eps=1e-5):
        super().__init__(lib.tfm_layer_norm_create(params._ptr(), name.encode(), dim, eps),
                         params)


class Dropout(Layer):
    _forward = lib.tfm_dropout_forward

    def __init__(self, p, rng=None):
        super().__init__(lib.tfm_dropout_create(p, _rng_pointer(rng)), None, rng)


class FeedForward(Layer):
    _forward = lib.tfm_feed_forward_forward

    def __init__(self, params, name, d_model, d_ff, activation='relu', dropout=0.1, rng=None):
        act = _NAMED['activation'].get(activation, activation)
        super().__init__(lib.tfm_feed_forward_create(params._ptr(), name.encode(), d_model, d_ff,
                                                     act, dropout, _rng_pointer(rng)),
                         params, rng)


class Attention(Layer):
    """nn.MultiheadAttention: forward(query, memory, mask, key_padding_mask)."""
    _forward = lib.tfm_attention_forward

    def __init__(self, params, name, rng=None, **fields):
        o = options('tfm_attention_options', lib.tfm_attention_options_init_sized, fields)
        super().__init__(lib.tfm_attention_create(params._ptr(), name.encode(), o,
                                                  _rng_pointer(rng)), params, rng)

    def forward(self, query, memory=None, mask=None, key_padding_mask=None):
        return Layer.forward(self, query, query if memory is None else memory,
                             mask, key_padding_mask, ffi.NULL)


class EncoderLayer(Layer):
    """nn.TransformerEncoderLayer: forward(x, mask, key_padding_mask)."""
    _forward = lib.tfm_encoder_layer_forward

    def __init__(self, params, name, rng=None, **fields):
        o = options('tfm_block_options', lib.tfm_block_options_init_sized, fields)
        super().__init__(lib.tfm_encoder_layer_create(params._ptr(), name.encode(), o,
                                                      _rng_pointer(rng)), params, rng)

    def forward(self, x, mask=None, key_padding_mask=None):
        return Layer.forward(self, x, mask, key_padding_mask)


class DecoderLayer(Layer):
    """nn.TransformerDecoderLayer: forward(x, memory, self_mask, memory_mask,
    self_key_padding_mask, memory_key_padding_mask)."""
    _forward = lib.tfm_decoder_layer_forward

    def __init__(self, params, name, rng=None, **fields):
        o = options('tfm_block_options', lib.tfm_block_options_init_sized, fields)
        super().__init__(lib.tfm_decoder_layer_create(params._ptr(), name.encode(), o,
                                                      _rng_pointer(rng)), params, rng)

    def forward(self, x, memory, self_mask=None, memory_mask=None, self_key_padding_mask=None,
                memory_key_padding_mask=None):
        return Layer.forward(self, x, memory, self_mask, memory_mask, self_key_padding_mask,
                             memory_key_padding_mask)


class SinusoidalPositions(Layer):
    """x [B, T, D] + PE[offset : offset + T]; no parameters."""
    _forward = lib.tfm_positions_forward

    def __init__(self, max_len, d_model):
        super().__init__(lib.tfm_sinusoidal_positions_create(max_len, d_model))

    def forward(self, x, offset=0):
        return Layer.forward(self, x, offset)


class LearnedPositions(SinusoidalPositions):
    def __init__(self, params, name, max_len, d_model, rng=None):
        Layer.__init__(self, lib.tfm_learned_positions_create(params._ptr(), name.encode(),
                                                              max_len, d_model,
                                                              _rng_pointer(rng)), params, rng)


# --- masks --------------------------------------------------------------------------
def _form(additive):
    return lib.TFM_F32 if additive else lib.TFM_I32


def causal_mask(length, additive=True):
    """The square subsequent mask [T, T], caller-owned: additive (0 / -inf,
    as nn.Transformer.generate_square_subsequent_mask) or keep (1 / 0)."""
    return Tensor(check_pointer(lib.tfm_mask_causal(ffi.NULL, length, _form(additive))))


def padding_mask(ids, pad_id, additive=False):
    """From ids [B, S]: the tutorials' 4-D attention mask [B, 1, 1, S]."""
    with Inputs() as inputs:
        return Tensor(check_pointer(lib.tfm_mask_padding(ffi.NULL, inputs(ids, np.int32),
                                                         pad_id, _form(additive))))


def from_torch_bool(mask, additive=False):
    """A PyTorch boolean mask (True = ignore) in libtfm's form."""
    array = np.ascontiguousarray(np.asarray(mask, dtype=bool)).view(np.uint8)
    return Tensor(check_pointer(lib.tfm_mask_from_torch_bool(
        ffi.NULL, ffi.from_buffer('uint8_t[]', array), array.ndim,
        ffi.new('int64_t[]', array.shape), _form(additive))))


def combine_masks(a, b):
    """Both masks at once, broadcast (keep-masks AND, additive masks add)."""
    with Inputs() as inputs:
        return Tensor(check_pointer(lib.tfm_mask_combine(ffi.NULL, inputs(a), inputs(b))))


def _mask(inputs, mask):
    """Masks given to models and layers: a numpy bool array is PyTorch's
    (True = ignore) and is converted; other values pass as they are."""
    if mask is None or isinstance(mask, Tensor):
        return inputs(mask)
    array = np.asarray(mask)
    if array.dtype == bool:
        converted = from_torch_bool(array)
        inputs.made.append(converted)
        return inputs(converted)
    return inputs(array)


# --- the model ----------------------------------------------------------------------
class Model(Handle):
    """The encoder-decoder transformer (tfm_model). Keyword arguments are
    tfm_model_options' fields: src_vocab, tgt_vocab, max_src_len,
    max_tgt_len, d_model, heads, encoder_layers, decoder_layers, d_ff,
    dropout, positions ('sinusoidal' or 'learned'), embedding_scale ('none',
    'sqrt_d', 'trainable'), activation, norm_first, seed, …"""
    _free = lib.tfm_model_free

    def __init__(self, _pointer=None, **fields):
        if _pointer is None:
            o = options('tfm_model_options', lib.tfm_model_options_init_sized, fields)
            _pointer = check_pointer(lib.tfm_model_create(o))
        super().__init__(_pointer)
        self.params = Params(check_pointer(lib.tfm_model_params(_pointer)), owner=self)

    @classmethod
    def load(cls, path):
        """A model rebuilt from a tfm_model_save or training-state file."""
        return cls(_pointer=check_pointer(lib.tfm_model_load(str(path).encode())))

    def save(self, path, metadata=None):
        metadata = metadata or {}
        keys = [ffi.new('char[]', str(k).encode()) for k in metadata]
        values = [ffi.new('char[]', str(v).encode()) for v in metadata.values()]
        check(lib.tfm_model_save_with_metadata(self._ptr(), str(path).encode(), len(keys),
                                               ffi.new('char *[]', keys),
                                               ffi.new('char *[]', values)))

    @property
    def options(self):
        o = options('tfm_model_options', lib.tfm_model_options_init_sized, {})
        check(lib.tfm_model_get_options(self._ptr(), o))
        return options_dict('tfm_model_options', o)

    def parameter_count(self):
        return check_size(lib.tfm_model_parameter_count(self._ptr()))

    def train(self, training=True):
        check(lib.tfm_model_set_training(self._ptr(), int(training)))
        return self

    def recompute(self, attention_weights=False, feed_forward_hidden=False, norm_outputs=False,
                  attention_context=False):
        """What the backward computes again instead of keeping on the tape:
        memory for time, the same results."""
        what = (lib.TFM_RECOMPUTE_ATTENTION_WEIGHTS if attention_weights else 0) | \
               (lib.TFM_RECOMPUTE_FEED_FORWARD_HIDDEN if feed_forward_hidden else 0) | \
               (lib.TFM_RECOMPUTE_NORM_OUTPUTS if norm_outputs else 0) | \
               (lib.TFM_RECOMPUTE_ATTENTION_CONTEXT if attention_context else 0)
        check(lib.tfm_model_set_recompute(self._ptr(), what))
        return self

    def eval(self):
        return self.train(False)

    def state_dict(self):
        return self.params.state_dict()

    def load_state_dict(self, state, strict=True):
        self.params.load_state_dict(state, strict)

    def encode(self, src, src_mask=None, src_key_padding_mask=None):
        tape = current_tape()
        with Inputs(tape) as inputs:
            return tape.made(lib.tfm_model_encode(tape._ptr(), self._ptr(), inputs(src, np.int32),
                                                  _mask(inputs, src_mask),
                                                  _mask(inputs, src_key_padding_mask)))

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        """Logits [B, T, tgt_vocab], with nn.Transformer.forward's masks:
        numpy bool masks are PyTorch's (True = ignore), float ones additive."""
        tape = current_tape()
        with Inputs(tape) as inputs:
            return tape.made(lib.tfm_model_forward(
                tape._ptr(), self._ptr(), inputs(src, np.int32), inputs(tgt, np.int32),
                _mask(inputs, src_mask), _mask(inputs, tgt_mask), _mask(inputs, memory_mask),
                _mask(inputs, src_key_padding_mask), _mask(inputs, tgt_key_padding_mask),
                _mask(inputs, memory_key_padding_mask)))

    __call__ = forward

    def _decode(self, src, **fields):
        src = as_array(src, np.int32)
        if src.ndim != 2:
            raise ValueError('src must be [batch, length], not %d-D' % src.ndim)
        fields.setdefault('max_length', self.options['max_tgt_len'] - 1)
        with Decoding(self, src.shape[0], src.shape[1], **fields) as decoding:
            return decoding.run(src)

    def greedy(self, src, max_length=None, bos_id=1, eos_id=2, src_pad_id=-1):
        """Token ids [B, max_length + 1]: bos_id, the tokens, -1 after."""
        return self._decode(src, **_given(max_length=max_length, bos_id=bos_id, eos_id=eos_id,
                                          src_pad_id=src_pad_id))[0]

    def sample(self, src, temperature=1.0, top_k=0, top_p=1.0, seed=0, max_length=None,
               bos_id=1, eos_id=2, src_pad_id=-1):
        return self._decode(src, strategy='sample', **_given(
            temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
            max_length=max_length, bos_id=bos_id, eos_id=eos_id, src_pad_id=src_pad_id))[0]

    def beam(self, src, beam_size=4, n_best=1, length_penalty=1.0, max_length=None, bos_id=1,
             eos_id=2, src_pad_id=-1):
        """(tokens [B, n_best, max_length + 1], scores [B, n_best])."""
        tokens, scores = self._decode(src, strategy='beam', **_given(
            beam_size=beam_size, n_best=n_best, length_penalty=length_penalty,
            max_length=max_length, bos_id=bos_id, eos_id=eos_id, src_pad_id=src_pad_id))
        batch = tokens.shape[0] // n_best
        return tokens.reshape(batch, n_best, -1), scores.reshape(batch, n_best)


def _given(**values):
    return {k: v for k, v in values.items() if v is not None}


class Decoding(Handle):
    """A tfm_decoding for a model, sized for max_batch sources of up to
    max_src_len tokens; keyword arguments are tfm_decode_options' fields."""
    _free = lib.tfm_decoding_free

    def __init__(self, model, max_batch, max_src_len, **fields):
        o = options('tfm_decode_options', lib.tfm_decode_options_init_sized, fields)
        super().__init__(check_pointer(lib.tfm_decoding_create(model._ptr(), o, max_batch,
                                                               max_src_len)), model)
        self._width = o.max_length + 1

    def run(self, src):
        """(tokens [B * n_best, max_length + 1], scores [B * n_best])."""
        src = as_array(src, np.int32)
        counts = ffi.new('int64_t[4]')
        check(lib.tfm_decoding_buffer_sizes(self._ptr(), src.shape[0], counts, counts + 1,
                                            counts + 2, counts + 3))
        tokens = np.empty(counts[0], np.int32)
        lengths = np.empty(counts[1], np.int32)
        scores = np.empty(counts[2], np.float32)
        with Inputs() as inputs:
            check(lib.tfm_decoding_run(self._ptr(), inputs(src, np.int32),
                                       ffi.from_buffer('int32_t[]', tokens), tokens.size,
                                       ffi.from_buffer('int32_t[]', lengths), lengths.size,
                                       ffi.from_buffer('float[]', scores), scores.size,
                                       ffi.NULL, 0, ffi.NULL, 0))
        return tokens.reshape(-1, self._width), scores


# --- optimizers ---------------------------------------------------------------------
class Optimizer(Handle):
    """An optimizer over a model's (or a store's) parameters; keyword
    arguments are tfm_optimizer_options' fields (lr, weight_decay,
    clip_norm, schedule, warmup_steps, …)."""
    _free = lib.tfm_optimizer_free
    _kind = None

    def __init__(self, model, **fields):
        params = model.params if isinstance(model, Model) else model
        if 'betas' in fields:
            fields['beta1'], fields['beta2'] = fields.pop('betas')
        o = options('tfm_optimizer_options', lib.tfm_optimizer_options_init_sized, fields,
                    self._kind)
        super().__init__(check_pointer(lib.tfm_optimizer_create(params._ptr(), o)), params)

    def step(self):
        check(lib.tfm_optimizer_step(self._ptr()))

    def zero_grad(self):
        check(lib.tfm_optimizer_zero_grad(self._ptr()))

    @property
    def lr(self):
        """The rate the next step uses; setting it sets the base rate."""
        return lib.tfm_optimizer_lr(self._ptr())

    @lr.setter
    def lr(self, value):
        check(lib.tfm_optimizer_set_lr(self._ptr(), value))

    @property
    def step_count(self):
        return check_size(lib.tfm_optimizer_step_count(self._ptr()))

    @property
    def last_grad_norm(self):
        return lib.tfm_optimizer_last_grad_norm(self._ptr())

    def save(self, path):
        check(lib.tfm_optimizer_save(self._ptr(), str(path).encode()))

    def load(self, path):
        check(lib.tfm_optimizer_load(self._ptr(), str(path).encode()))


class SGD(Optimizer):
    _kind = lib.TFM_OPTIMIZER_SGD


class Adam(Optimizer):
    _kind = lib.TFM_OPTIMIZER_ADAM


class AdamW(Optimizer):
    _kind = lib.TFM_OPTIMIZER_ADAMW


# --- training states ----------------------------------------------------------------
def save_training(path, model, optimizer, rngs=(), metadata=None):
    """Parameters, optimizer state and random streams in one file."""
    metadata = metadata or {}
    keys = [ffi.new('char[]', str(k).encode()) for k in metadata]
    values = [ffi.new('char[]', str(v).encode()) for v in metadata.values()]
    check(lib.tfm_training_save(str(path).encode(), model._ptr(), optimizer._ptr(), len(rngs),
                                ffi.new('tfm_rng *[]', [r._ptr() for r in rngs]), len(keys),
                                ffi.new('char *[]', keys), ffi.new('char *[]', values)))


def load_training(path, model, optimizer, rngs=()):
    check(lib.tfm_training_load(str(path).encode(), model._ptr(), optimizer._ptr(), len(rngs),
                                ffi.new('tfm_rng *[]', [r._ptr() for r in rngs])))


def metadata(path):
    """A safetensors file's "__metadata__" as a dict of strings."""
    pointer = check_pointer(lib.tfm_safetensors_open(str(path).encode()))
    try:
        count = check_size(lib.tfm_safetensors_metadata_count(pointer))
        keys = [ffi.string(lib.tfm_safetensors_metadata_key(pointer, i)).decode()
                for i in range(count)]
        return {k: ffi.string(lib.tfm_safetensors_metadata_get(pointer, k.encode())).decode()
                for k in keys}
    finally:
        lib.tfm_safetensors_close(pointer)

