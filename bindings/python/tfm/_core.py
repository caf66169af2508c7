"""Errors, handles, tensors, tapes and the ops.

Every C handle is owned by one Python object that frees it when it is
closed or collected. A handle that depends on another (a tape's tensors, a
model's optimizer) keeps its owner alive, and is refused with ClosedError
(never passed to C) once that owner was closed; a tape-owned tensor is
refused with StaleError after its tape's reset.
"""
import threading
import weakref

import numpy as np

from ._binding import ffi, lib


# --- errors -----------------------------------------------------------------------
class Error(Exception):
    """A libtfm call failed: `status` is its code (lib.TFM_ERR_...),
    `status_name` its name, and the message is tfm_last_error()'s."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status
        self.status_name = None if status is None else \
            ffi.string(lib.tfm_status_name(status)).decode()


class NullError(Error, ValueError): pass
class ArgumentError(Error, ValueError): pass
class ShapeError(Error, ValueError): pass
class DtypeError(Error, TypeError): pass
class RangeError(Error, IndexError): pass
class SizeError(Error, ValueError): pass
class OutOfMemoryError(Error, MemoryError): pass
class StateError(Error, RuntimeError): pass
class FileError(Error, OSError): pass
class FormatError(Error, ValueError): pass
class NumericError(Error, FloatingPointError): pass
class SyncError(Error, OSError): pass


class ClosedError(Error, ValueError):
    """A handle (or the owner it depends on) was closed."""


class StaleError(StateError):
    """A tape-owned tensor was used after its tape's reset."""


_ERRORS = {lib.TFM_ERR_NULL: NullError, lib.TFM_ERR_ARG: ArgumentError,
           lib.TFM_ERR_SHAPE: ShapeError, lib.TFM_ERR_DTYPE: DtypeError,
           lib.TFM_ERR_RANGE: RangeError, lib.TFM_ERR_SIZE: SizeError,
           lib.TFM_ERR_NOMEM: OutOfMemoryError, lib.TFM_ERR_STATE: StateError,
           lib.TFM_ERR_IO: FileError, lib.TFM_ERR_FORMAT: FormatError,
           lib.TFM_ERR_NUMERIC: NumericError, lib.TFM_ERR_SYNC: SyncError}


def raise_last_error():
    status = lib.tfm_last_status()
    message = ffi.string(lib.tfm_last_error()).decode(errors='replace')
    lib.tfm_clear_error()
    raise _ERRORS.get(status, Error)(message or 'libtfm call failed', status)


def check(status):
    """Raises the error a C call's status reports."""
    if status != lib.TFM_OK:
        raise_last_error()


def check_pointer(pointer):
    if pointer == ffi.NULL:
        raise_last_error()
    return pointer


def check_size(value):
    if value < 0:
        raise_last_error()
    return value


# --- handles ------------------------------------------------------------------------
class Handle:
    """One owned C handle. close() (or the end of a `with` block, or garbage
    collection) frees it; closing also closes what was made from it."""
    _free = None  # the C function that frees the handle, set by subclasses

    def __init__(self, pointer, owner=None):
        self._pointer = pointer
        self._owner = owner      # a Handle this one needs alive
        self._dependents = weakref.WeakSet()
        if owner is not None:
            owner._dependents.add(self)

    def _ptr(self):
        if self._pointer is None:
            raise ClosedError('this %s was closed' % type(self).__name__)
        if self._owner is not None:
            self._owner._ptr()
        return self._pointer

    @property
    def closed(self):
        return self._pointer is None

    def close(self):
        if self._pointer is None:
            return
        for dependent in list(self._dependents):
            dependent.close()
        pointer, self._pointer = self._pointer, None
        if self._free is not None:
            type(self)._free(pointer)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass


class Rng(Handle):
    """A seeded random stream (tfm_rng)."""
    _free = lib.tfm_rng_free

    def __init__(self, seed=0):
        super().__init__(check_pointer(lib.tfm_rng_create(seed)))

    def seed(self, seed):
        check(lib.tfm_rng_seed(self._ptr(), seed))

    def next_u64(self):
        return lib.tfm_rng_next_u64(self._ptr())

    def uniform(self):
        return lib.tfm_rng_uniform(self._ptr())

    def normal(self):
        return lib.tfm_rng_normal(self._ptr())


# --- tensors ------------------------------------------------------------------------
F32, I32 = lib.TFM_F32, lib.TFM_I32
_INT32 = np.iinfo(np.int32)


def as_array(values, dtype=None):
    """A C-contiguous float32 or int32 array from values. Floats become
    float32; integers become int32 only when every value fits (else
    OverflowError: ids are never misread); booleans and other kinds are
    refused (TypeError)."""
    array = np.asarray(values)
    if dtype is None:
        dtype = np.int32 if array.dtype.kind in 'iu' else np.float32
    dtype = np.dtype(dtype)
    if dtype == np.int32:
        if array.dtype.kind not in 'iu':
            raise TypeError('integer ids wanted, got an array of %s' % array.dtype)
        if array.size and (array.min() < _INT32.min or array.max() > _INT32.max):
            raise OverflowError('ids outside int32 cannot be passed to libtfm')
    elif dtype == np.float32:
        if array.dtype.kind not in 'fiu':
            raise TypeError('numbers wanted, got an array of %s' % array.dtype)
    else:
        raise TypeError('libtfm tensors are float32 or int32, not %s' % dtype)
    return np.ascontiguousarray(array, dtype=dtype)


def _shape_of(array):
    if not 1 <= array.ndim <= lib.TFM_MAX_DIMS:
        raise ShapeError('libtfm tensors have 1 to %d axes, not %d' %
                         (lib.TFM_MAX_DIMS, array.ndim))
    return ffi.new('int64_t[]', array.shape)


# Each element type's C buffer type, reader and writer.
_ACCESS = {np.dtype(np.int32): ('int32_t[]', lib.tfm_tensor_read_i32, lib.tfm_tensor_write_i32),
           np.dtype(np.float32): ('float[]', lib.tfm_tensor_read_f32, lib.tfm_tensor_write_f32)}


class Tensor(Handle):
    """A libtfm tensor. Made from numpy (tfm.tensor) it is the caller's;
    returned by an op, a layer or a model it belongs to the tape that was
    current, and ends at that tape's reset; a parameter belongs to its
    store. Values and gradients come out as numpy copies."""
    _free = lib.tfm_tensor_free

    def __init__(self, pointer, owner=None, tape=None):
        super().__init__(pointer, owner if owner is not None else tape)
        self._tape = tape
        self._generation = tape._generation if tape is not None else None
        if owner is not None or tape is not None:
            self._free = None  # the tape's or the store's to free

    def _ptr(self):
        pointer = super()._ptr()
        if self._tape is not None and self._tape._generation != self._generation:
            raise StaleError('this tensor was made on a tape before its last reset, which '
                             'ended it; keep a copy with .numpy() or .clone()')
        return pointer

    @classmethod
    def from_numpy(cls, values, dtype=None, requires_grad=False):
        array = as_array(values, dtype)
        shape = _shape_of(array)
        if array.dtype == np.int32:
            pointer = lib.tfm_tensor_from_i32(array.ndim, shape, ffi.from_buffer('int32_t[]', array))
        else:
            pointer = lib.tfm_tensor_from_f32(array.ndim, shape, ffi.from_buffer('float[]', array))
        tensor = cls(check_pointer(pointer))
        if requires_grad:
            tensor.requires_grad = True
        return tensor

    @property
    def shape(self):
        out = ffi.new('int64_t[]', lib.TFM_MAX_DIMS)
        check(lib.tfm_tensor_shape(self._ptr(), out))
        return tuple(out[i] for i in range(lib.tfm_tensor_ndim(self._ptr())))

    @property
    def dtype(self):
        return np.dtype(np.int32) if lib.tfm_tensor_dtype(self._ptr()) == I32 else \
            np.dtype(np.float32)

    @property
    def ndim(self):
        return len(self.shape)

    def __len__(self):
        return self.shape[0]

    def numpy(self):
        """A copy of the values."""
        out = np.empty(self.shape, self.dtype)
        ctype, read, _ = _ACCESS[out.dtype]
        check(read(self._ptr(), ffi.from_buffer(ctype, out), out.size))
        return out

    def __array__(self, dtype=None):
        return self.numpy() if dtype is None else self.numpy().astype(dtype)

    def write(self, values):
        """Overwrites every value (same number of values; the dtype's)."""
        array = as_array(values, self.dtype).reshape(-1)
        ctype, _, write = _ACCESS[array.dtype]
        check(write(self._ptr(), ffi.from_buffer(ctype, array), array.size))

    def item(self):
        value = ffi.new('float *')
        check(lib.tfm_tensor_item(self._ptr(), value))
        return value[0]

    def clone(self):
        """A caller-owned copy, which outlives the tape's reset."""
        return Tensor(check_pointer(lib.tfm_tensor_clone(self._ptr())))

    @property
    def requires_grad(self):
        return bool(lib.tfm_tensor_requires_grad(self._ptr()))

    @requires_grad.setter
    def requires_grad(self, value):
        check(lib.tfm_tensor_set_requires_grad(self._ptr(), 1 if value else 0))

    @property
    def grad(self):
        """A copy of the gradient, or None when there is none."""
        pointer = self._ptr()
        if lib.tfm_tensor_grad_f32(pointer) == ffi.NULL:
            lib.tfm_clear_error()
            return None
        out = np.empty(self.shape, np.float32)
        check(lib.tfm_tensor_read_grad(pointer, ffi.from_buffer('float[]', out), out.size))
        return out

    def zero_grad(self):
        check(lib.tfm_tensor_zero_grad(self._ptr()))

    def backward(self, gradient=None):
        """Backward through the tape that made this tensor."""
        if self._tape is None:
            raise StateError('backward needs a tensor made on a tape')
        self._tape.backward(self, gradient)

    def __repr__(self):
        if self.closed:
            return 'tfm.Tensor(<closed>)'
        return 'tfm.Tensor(shape=%s, dtype=%s)' % (self.shape, self.dtype)

    # operators record on the current tape
    def __add__(self, other): return add(self, other)
    def __sub__(self, other): return sub(self, other)
    def __mul__(self, other):
        return scale(self, other) if isinstance(other, (int, float)) else mul(self, other)
    def __matmul__(self, other): return matmul(self, other)


def tensor(values, dtype=None, requires_grad=False):
    """A caller-owned tensor holding a copy of values (see as_array)."""
    return Tensor.from_numpy(values, dtype, requires_grad)


# --- the tape -----------------------------------------------------------------------
_current = threading.local()


class Tape(Handle):
    """The autograd tape. `with tape:` makes it the current tape of this
    thread (ops, layers and models record on it) and resets it at the end of
    the block, ending the tensors made in it; close() frees it."""
    _free = lib.tfm_tape_free

    def __init__(self, recording=True):
        super().__init__(check_pointer(lib.tfm_tape_create()))
        self._generation = 0
        self._inputs = []  # what this step's ops read, kept alive until the reset
        if not recording:
            self.recording = False

    @property
    def recording(self):
        return bool(lib.tfm_tape_is_recording(self._ptr()))

    @recording.setter
    def recording(self, value):
        check(lib.tfm_tape_set_recording(self._ptr(), 1 if value else 0))

    def __enter__(self):
        self._ptr()
        stack = getattr(_current, 'tapes', None)
        if stack is None:
            stack = _current.tapes = []
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _current.tapes.remove(self)
        if not self.closed:
            self.reset()

    def reset(self):
        pointer = self._ptr()
        self._generation += 1  # before the call: no tensor of before survives a failure
        check(lib.tfm_tape_reset(pointer))
        self._inputs = []

    def close(self):
        super().close()
        self._inputs = []

    def backward(self, loss, gradient=None):
        if loss._tape is not self:
            raise StateError('the tensor was not made on this tape')
        if gradient is None:
            check(lib.tfm_tape_backward(self._ptr(), loss._ptr()))
        else:
            seed = as_array(gradient, np.float32).reshape(-1)
            check(lib.tfm_tape_backward_with_grad(self._ptr(), loss._ptr(),
                                                  ffi.from_buffer('float[]', seed), seed.size))

    @property
    def node_count(self):
        return check_size(lib.tfm_tape_node_count(self._ptr()))

    def made(self, pointer):
        """Wraps an op's result: a tensor owned by this tape."""
        return Tensor(check_pointer(pointer), tape=self)


def current_tape():
    stack = getattr(_current, 'tapes', None)
    if not stack:
        raise StateError('no current tape: run this inside `with tfm.Tape():`')
    return stack[-1]


class Inputs:
    """Tensors for a call: a Tensor as it is, anything else copied into a
    caller-owned tensor. Given a tape, the tape keeps every input alive until
    its next reset, as backward reads them (ids, saved activations);
    otherwise the copies are freed when the call returns."""

    def __init__(self, tape=None):
        self.tape = tape
        self.made = []

    def __call__(self, value, dtype=None):
        if value is None:
            return ffi.NULL
        if not isinstance(value, Tensor):
            value = Tensor.from_numpy(value, dtype)
            self.made.append(value)
        if self.tape is not None:
            self.tape._inputs.append(value)
        return value._ptr()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.tape is None:
            for made in self.made:
                made.close()


# --- ops (recorded on the current tape) ---------------------------------------------
def _op(function, *tensors_and_args, ids=()):
    """Runs function(tape, ...) with tensors converted; positions in ids take
    int32 values."""
    tape = current_tape()
    with Inputs(tape) as inputs:
        args = [inputs(a, np.int32 if i in ids else None)
                if a is None or isinstance(a, (Tensor, np.ndarray, list)) else a
                for i, a in enumerate(tensors_and_args)]
        return tape.made(function(tape._ptr(), *args))


def add(a, b): return _op(lib.tfm_add, a, b)
def sub(a, b): return _op(lib.tfm_sub, a, b)
def mul(a, b): return _op(lib.tfm_mul, a, b)
def scale(x, factor): return _op(lib.tfm_scale, x, float(factor))
def matmul(a, b, transpose_a=False, transpose_b=False):
    return _op(lib.tfm_matmul, a, b, int(transpose_a), int(transpose_b))
def linear(x, weight, bias=None): return _op(lib.tfm_linear, x, weight, bias)
def relu(x): return _op(lib.tfm_relu, x)
def gelu(x): return _op(lib.tfm_gelu, x)
def tanh(x): return _op(lib.tfm_tanh, x)
def softmax(x, mask=None): return _op(lib.tfm_softmax, x, mask)
def log_softmax(x): return _op(lib.tfm_log_softmax, x)
def layer_norm(x, weight=None, bias=None, eps=1e-5):
    return _op(lib.tfm_layer_norm, x, weight, bias, float(eps))
def masked_fill(x, mask, value): return _op(lib.tfm_masked_fill, x, mask, float(value), ids=(1,))
def transpose(x, axis0, axis1): return _op(lib.tfm_transpose, x, axis0, axis1)
def split_heads(x, heads): return _op(lib.tfm_split_heads, x, heads)
def merge_heads(x): return _op(lib.tfm_merge_heads, x)
def embedding(table, ids): return _op(lib.tfm_embedding, table, ids, ids=(1,))
def sum(x): return _op(lib.tfm_sum, x)  # noqa: A001 (as numpy's and torch's)
def mean(x): return _op(lib.tfm_mean, x)


def reshape(x, shape):
    return _op(lib.tfm_reshape, x, len(shape), ffi.new('int64_t[]', list(shape)))


def dropout(x, p, rng, training=True):
    return _op(lib.tfm_dropout, x, float(p), int(training), rng._ptr())


def cross_entropy(logits, targets, ignore_index=-100, label_smoothing=0.0):
    """Mean cross-entropy of logits [..., C] (classes on the LAST axis)
    against int32 targets [...], as F.cross_entropy."""
    return _op(lib.tfm_cross_entropy, logits, targets, ignore_index, float(label_smoothing),
               ids=(1,))


def concat(tensors, axis):
    tape = current_tape()
    with Inputs(tape) as inputs:
        pointers = ffi.new('tfm_tensor *[]', [inputs(t) for t in tensors])
        return tape.made(lib.tfm_concat(tape._ptr(), pointers, len(tensors), axis))
