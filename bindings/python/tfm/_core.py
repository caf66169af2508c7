"""Errors, handles, tensors, tapes and the ops.

Every C handle is owned by one Python object that frees it when it is
closed or collected. A handle that depends on another (a tape's tensors, a
model's optimizer) keeps its owner alive, and is refused with ClosedError
(never passed to C) once that owner was closed; a tape-owned tensor is
refused with StaleError after its tape's reset.
"""
import builtins
import concurrent.futures
import numbers
import os
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
class BusyError(Error, RuntimeError):
    """A translator's queue is full (queue_capacity requests wait): try
    again later."""
class CancelledError(Error, concurrent.futures.CancelledError):
    """A request was cancelled before it was translated (its cancel(), or
    its translator closed)."""
class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 (the builtin's subclass)
    """A request's deadline (deadline_ms) passed before it was translated."""


class ClosedError(Error, ValueError):
    """A handle (or the owner it depends on) was closed."""


class StaleError(StateError):
    """A tape-owned tensor was used after its tape's reset."""


_ERRORS = {lib.TFM_ERR_NULL: NullError, lib.TFM_ERR_ARG: ArgumentError,
           lib.TFM_ERR_SHAPE: ShapeError, lib.TFM_ERR_DTYPE: DtypeError,
           lib.TFM_ERR_RANGE: RangeError, lib.TFM_ERR_SIZE: SizeError,
           lib.TFM_ERR_NOMEM: OutOfMemoryError, lib.TFM_ERR_STATE: StateError,
           lib.TFM_ERR_IO: FileError, lib.TFM_ERR_FORMAT: FormatError,
           lib.TFM_ERR_NUMERIC: NumericError, lib.TFM_ERR_SYNC: SyncError,
           lib.TFM_ERR_BUSY: BusyError, lib.TFM_ERR_CANCELLED: CancelledError,
           lib.TFM_ERR_TIMEOUT: TimeoutError}


def error(status, message):
    """The exception for a status and its message."""
    return _ERRORS.get(status, Error)(message or 'libtfm call failed', status)


def raise_last_error():
    status = lib.tfm_last_status()
    message = ffi.string(lib.tfm_last_error()).decode(errors='replace')
    lib.tfm_clear_error()
    raise error(status, message)


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


# --- strings into C -----------------------------------------------------------------
def c_string(value):
    """A C string's bytes: str as UTF-8, bytes as they are. A NUL inside
    would end the string early in C (two different texts would score alike,
    'a.model\\0junk' would open a.model): ValueError, as open() raises."""
    if isinstance(value, str):
        data = value.encode('utf-8')
    elif isinstance(value, (bytes, bytearray)):
        data = bytes(value)
    else:
        raise TypeError('expected str or bytes, not %s' % type(value).__name__)
    if b'\0' in data:
        raise ValueError('embedded null byte in %r' % (data[:60],))
    return data


def c_path(path):
    """A path (str, bytes or os.PathLike) as the file system spells it, as a
    C string (c_string)."""
    return c_string(os.fsencode(path))


def c_strings(values):
    """C strings (c_string each) as a cffi char *[], and the list that keeps
    its strings alive as long as it is held: (array, kept)."""
    kept = [ffi.new('char[]', c_string(v)) for v in values]
    return ffi.new('char *[]', kept), kept


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

    # A copy of the Python object would be a second owner of one C handle
    # (two frees): subclasses that can copy what the handle holds say how,
    # the others refuse with what to do instead.
    _copy_advice = 'make a new one'

    def __copy__(self):
        raise TypeError('a tfm.%s cannot be copied: %s' % (type(self).__name__,
                                                          self._copy_advice))

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __reduce__(self):
        raise TypeError('a tfm.%s cannot be pickled: %s' % (type(self).__name__,
                                                           self._copy_advice))


class Rng(Handle):
    """A seeded random stream (tfm_rng)."""
    _free = lib.tfm_rng_free

    def __init__(self, seed=0):
        super().__init__(check_pointer(lib.tfm_rng_create(seed)))

    def seed(self, seed):
        """Restarts the stream from seed."""
        check(lib.tfm_rng_seed(self._ptr(), seed))

    def next_u64(self):
        """The next 64 random bits."""
        return lib.tfm_rng_next_u64(self._ptr())

    def uniform(self):
        """A draw from [0, 1)."""
        return lib.tfm_rng_uniform(self._ptr())

    def normal(self):
        """A draw from N(0, 1)."""
        return lib.tfm_rng_normal(self._ptr())

    def __copy__(self):
        """A stream at the same point, drawing the same values from here on."""
        twin = Rng()
        check(lib.tfm_rng_copy(twin._ptr(), self._ptr()))
        return twin

    def __repr__(self):
        return 'tfm.Rng(<closed>)' if self.closed else 'tfm.Rng()'


# --- tensors ------------------------------------------------------------------------
F32, I32 = lib.TFM_F32, lib.TFM_I32
_INT32 = np.iinfo(np.int32)


_WHAT_TO_PASS = ('numpy arrays, tfm.Tensor, nested lists, torch tensors or anything with '
                 '__array__')


def to_numpy(values):
    """numpy's view of values: a tfm.Tensor's values, a torch tensor's
    through .detach().cpu().numpy() (torch is never imported here), and
    anything else through np.asarray (__array__, lists, numbers)."""
    if isinstance(values, Tensor):
        return values.numpy()
    if hasattr(values, 'detach') and hasattr(values, 'numpy'):
        return values.detach().cpu().numpy()
    return np.asarray(values)


def as_array(values, dtype=None):
    """A C-contiguous float32 or int32 array from values (see to_numpy).
    Floats become float32; integers become int32 only when every value fits
    (else OverflowError: ids are never misread); booleans and other kinds
    are refused (TypeError, saying what to pass)."""
    array = to_numpy(values)
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
            raise TypeError('numbers wanted (%s), got %s' % (
                _WHAT_TO_PASS, type(values).__name__ if array.dtype.kind == 'O'
                else 'an array of %s' % array.dtype))
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
    current, and ends at that tape's reset (a one-value result keeps its
    value for .item()); a parameter belongs to its store. Values and
    gradients come out as numpy copies; indexing and argmax work on those
    copies, arithmetic records on the current tape."""
    _free = lib.tfm_tensor_free

    def __init__(self, pointer, owner=None, tape=None):
        super().__init__(pointer, owner if owner is not None else tape)
        self._tape = tape
        self._generation = tape._generation if tape is not None else None
        self._kept_item = None  # a one-value result's value, read at its tape's reset
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
        """A caller-owned tensor holding a copy of values (see as_array)."""
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
        """The sizes of the axes, a tuple."""
        out = ffi.new('int64_t[]', lib.TFM_MAX_DIMS)
        check(lib.tfm_tensor_shape(self._ptr(), out))
        return tuple(out[i] for i in range(lib.tfm_tensor_ndim(self._ptr())))

    @property
    def dtype(self):
        """numpy's float32 or int32."""
        return np.dtype(np.int32) if lib.tfm_tensor_dtype(self._ptr()) == I32 else \
            np.dtype(np.float32)

    @property
    def ndim(self):
        """The number of axes."""
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

    def tolist(self):
        """The values as nested Python lists."""
        return self.numpy().tolist()

    def __getitem__(self, index):
        """numpy indexing of a copy of the values (t[0], t[:, 1:], t[mask]):
        a numpy array or scalar, not recorded on the tape."""
        return self.numpy()[index]

    def argmax(self, axis=-1):
        """The index of the largest value along axis (numpy int64), as
        torch.argmax(t, dim=axis); axis None: over all values, flattened."""
        return self.numpy().argmax(axis=axis)

    def sum(self, axis=None, keepdims=False):
        """tfm.sum(self, axis, keepdims), recorded on the current tape."""
        return sum(self, axis, keepdims)

    def mean(self, axis=None, keepdims=False):
        """tfm.mean(self, axis, keepdims), recorded on the current tape."""
        return mean(self, axis, keepdims)

    def write(self, values):
        """Overwrites every value (same number of values; the dtype's)."""
        array = as_array(values, self.dtype).reshape(-1)
        ctype, _, write = _ACCESS[array.dtype]
        check(write(self._ptr(), ffi.from_buffer(ctype, array), array.size))

    def item(self):
        """The value of a one-value tensor, as a Python float; a tape's
        result keeps it past the reset that ended the tensor (loss.item()
        after the `with tape:` block)."""
        if self._kept_item is not None:
            return self._kept_item
        value = ffi.new('float *')
        check(lib.tfm_tensor_item(self._ptr(), value))
        return value[0]

    def _keep_item(self):
        """Called by the tape just before the reset that ends this tensor."""
        if lib.tfm_tensor_numel(self._pointer) == 1 and self.dtype == np.float32:
            self._kept_item = self.item()

    def clone(self):
        """A caller-owned copy of the values (no gradient), which outlives
        the tape's reset."""
        return Tensor(check_pointer(lib.tfm_tensor_clone(self._ptr())))

    def __copy__(self):
        """A caller-owned copy of the values (clone) with the same
        requires_grad; its gradient starts empty."""
        twin = self.clone()
        if self.requires_grad:
            twin.requires_grad = True
        return twin

    def __reduce__(self):
        return Tensor.from_numpy, (self.numpy(), None, self.requires_grad)

    @property
    def requires_grad(self):
        """Whether backward computes this tensor's gradient."""
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
        """Sets the gradient to zero."""
        check(lib.tfm_tensor_zero_grad(self._ptr()))

    def backward(self, gradient=None):
        """Backward through the tape that made this tensor."""
        if self._tape is None:
            raise StateError('backward needs a tensor made on a tape')
        self._tape.backward(self, gradient)

    def __repr__(self):
        if self.closed:
            return 'tfm.Tensor(<closed>)'
        if self._tape is not None and self._tape._generation != self._generation:
            kept = '' if self._kept_item is None else ', item=%r' % self._kept_item
            return 'tfm.Tensor(<ended at its tape\'s reset%s>)' % kept
        values = np.array2string(self.numpy(), separator=', ', threshold=20, precision=4,
                                 prefix='tfm.Tensor(')
        grad = ', requires_grad=True' if self.requires_grad else ''
        return 'tfm.Tensor(%s, shape=%s, dtype=%s%s)' % (values, self.shape, self.dtype, grad)

    # Arithmetic records on the current tape; a Python number is a scalar.
    # Above numpy's priority, numpy values on the left (np.float32(2) * t,
    # array + t) come to these operators too, instead of numpy reading the
    # tensor through __array__ into a plain array that backward never sees.
    __array_priority__ = 1000

    def __add__(self, other): return add(self, _operand(other))
    def __radd__(self, other): return add(_operand(other), self)
    def __sub__(self, other): return sub(self, _operand(other))
    def __rsub__(self, other): return sub(_operand(other), self)
    def __neg__(self): return scale(self, -1.0)

    def __mul__(self, other):
        return scale(self, other) if isinstance(other, numbers.Real) else mul(self, other)
    __rmul__ = __mul__

    def __truediv__(self, other):
        if not isinstance(other, numbers.Real):
            raise TypeError('libtfm divides a tensor by a number only')
        return scale(self, 1.0 / other)

    def __matmul__(self, other): return matmul(self, other)
    def __rmatmul__(self, other): return matmul(other, self)


def _operand(value):
    """A Python number as a one-value float32 array, which broadcasts."""
    return np.full(1, value, np.float32) if isinstance(value, numbers.Real) else value


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
        """Whether ops record for backward (False: inference only)."""
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

    _copy_advice = 'make a new tfm.Tape()'

    def reset(self):
        """Ends the tensors made on the tape (their one-value results keep
        their value for .item()) and makes it ready for the next step."""
        pointer = self._ptr()
        for made in list(self._dependents):
            if made._generation == self._generation and not made.closed:
                made._keep_item()
        self._generation += 1  # before the call: no tensor of before survives a failure
        check(lib.tfm_tape_reset(pointer))
        self._inputs = []

    def close(self):
        """Frees the tape, ending its tensors."""
        super().close()
        self._inputs = []

    def __repr__(self):
        if self.closed:
            return 'tfm.Tape(<closed>)'
        return 'tfm.Tape(recording=%s, nodes=%d)' % (self.recording, self.node_count)

    def backward(self, loss, gradient=None):
        """Gradients of loss (a tensor made on this tape) into every tensor
        that requires them; gradient seeds it (default: ones)."""
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
        """The ops recorded since the last reset."""
        return check_size(lib.tfm_tape_node_count(self._ptr()))

    def made(self, pointer):
        """Wraps an op's result: a tensor owned by this tape."""
        return Tensor(check_pointer(pointer), tape=self)


def current_tape():
    """The innermost tape of this thread's `with tape:` blocks."""
    stack = getattr(_current, 'tapes', None)
    if not stack:
        raise StateError('no current tape: run this inside `with tfm.Tape():`')
    return stack[-1]


def recording():
    """(the current tape, an Inputs that records what it converts there)."""
    tape = current_tape()
    return tape, Inputs(tape)


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
def _op(function, tensors, *args, ids=()):
    """Runs function(tape, *tensors, *args) on the current tape, each of
    tensors converted (as_array; positions in ids as int32 ids)."""
    tape, inputs = recording()
    with inputs:
        pointers = [inputs(t, np.int32 if i in ids else None) for i, t in enumerate(tensors)]
        return tape.made(function(tape._ptr(), *pointers, *args))


def add(a, b):
    """a + b, broadcasting as numpy."""
    return _op(lib.tfm_add, (a, b))


def sub(a, b):
    """a - b, broadcasting as numpy."""
    return _op(lib.tfm_sub, (a, b))


def mul(a, b):
    """a * b elementwise, broadcasting as numpy."""
    return _op(lib.tfm_mul, (a, b))


def scale(x, factor):
    """x * factor, factor a number."""
    return _op(lib.tfm_scale, (x,), float(factor))


def matmul(a, b, transpose_a=False, transpose_b=False):
    """a @ b over the last two axes (each transposed first when its flag is
    set); leading axes equal, or one side 2-D and shared."""
    return _op(lib.tfm_matmul, (a, b), int(transpose_a), int(transpose_b))


def linear(x, weight, bias=None):
    """x @ weight^T + bias, as torch.nn.functional.linear."""
    return _op(lib.tfm_linear, (x, weight, bias))


def relu(x):
    """max(x, 0)."""
    return _op(lib.tfm_relu, (x,))


def gelu(x):
    """Exact GELU, as torch.nn.functional.gelu."""
    return _op(lib.tfm_gelu, (x,))


def gelu_tanh(x):
    """GELU's tanh approximation, as torch.nn.functional.gelu(x, approximate='tanh')."""
    return _op(lib.tfm_gelu_tanh, (x,))


def silu(x):
    """x * sigmoid(x), as torch.nn.functional.silu."""
    return _op(lib.tfm_silu, (x,))


def tanh(x):
    """tanh(x)."""
    return _op(lib.tfm_tanh, (x,))


def softmax(x, mask=None):
    """Softmax over the last axis; mask (broadcast to x) as attention's:
    additive float (0 / -inf), int32 keep (0 drops) or PyTorch bool (True
    drops)."""
    tape, inputs = recording()
    with inputs:
        return tape.made(lib.tfm_softmax(tape._ptr(), inputs(x), masks(inputs, mask)[0]))


def log_softmax(x):
    """log(softmax(x)) over the last axis."""
    return _op(lib.tfm_log_softmax, (x,))


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """Layer norm over the last axis; weight and bias [N] or None."""
    return _op(lib.tfm_layer_norm, (x, weight, bias), float(eps))


def masked_fill(x, mask, value):
    """x where mask == 0, value where mask != 0 (mask int32 or bool,
    broadcast to x), as torch.Tensor.masked_fill."""
    mask = to_numpy(mask) if not isinstance(mask, Tensor) else mask
    if isinstance(mask, np.ndarray) and mask.dtype == bool:
        mask = mask.astype(np.int32)
    return _op(lib.tfm_masked_fill, (x, mask), float(value), ids=(1,))


def transpose(x, axis0, axis1):
    """x with two axes swapped (a copy)."""
    return _op(lib.tfm_transpose, (x,), axis0, axis1)


def split_heads(x, heads):
    """[B, T, H*D] -> [B, H, T, D]."""
    return _op(lib.tfm_split_heads, (x,), heads)


def merge_heads(x):
    """[B, H, T, D] -> [B, T, H*D]."""
    return _op(lib.tfm_merge_heads, (x,))


def embedding(table, ids):
    """Rows of table [V, D] for int ids of 1 to 3 axes: [ids..., D]."""
    return _op(lib.tfm_embedding, (table, ids), ids=(1,))


def reshape(x, shape):
    """The same values in a new shape; one axis may be -1."""
    return _op(lib.tfm_reshape, (x,), len(shape), ffi.new('int64_t[]', list(shape)))


def _sum_along(x, axis, keepdims):
    """The sum along one axis through the ops backward knows: the axis
    swapped to the end, a product with a column of ones, swapped back."""
    if not isinstance(x, Tensor):
        x = tensor(x)
    shape = list(x.shape)
    if not -len(shape) <= axis < len(shape):
        raise IndexError('axis %d is outside a tensor of %d axes' % (axis, len(shape)))
    axis %= len(shape)
    last = len(shape) - 1
    moved = x if axis == last else transpose(x, axis, last)
    if len(shape) == 1:
        moved = reshape(moved, [1, shape[0]])
    column = matmul(moved, np.ones((shape[axis], 1), np.float32))
    summed = column if axis == last else transpose(column, axis, last)
    kept = shape[:axis] + [1] + shape[axis + 1:]
    return reshape(summed, kept if keepdims else (kept[:axis] + kept[axis + 1:] or [1]))


def sum(x, axis=None, keepdims=False):  # noqa: A001 (as numpy's and torch's)
    """The sum of all values ([1]), or along axis (that axis dropped, or
    kept as 1 with keepdims), differentiable."""
    if axis is None:
        return _op(lib.tfm_sum, (x,))
    return _sum_along(x, axis, keepdims)


def mean(x, axis=None, keepdims=False):
    """The mean of all values ([1]), or along axis, as sum."""
    if axis is None:
        return _op(lib.tfm_mean, (x,))
    summed = _sum_along(x, axis, keepdims)
    return scale(summed, 1.0 / (x.shape if isinstance(x, Tensor) else np.shape(x))[axis])


def dropout(x, p, rng, training=True):
    """Inverted dropout with probability p, drawing from rng."""
    return _op(lib.tfm_dropout, (x,), float(p), int(training), rng._ptr())


def cross_entropy(logits, targets, ignore_index=-100, label_smoothing=0.0):
    """Mean cross-entropy of logits [..., C] (classes on the LAST axis)
    against int targets [...], as F.cross_entropy."""
    return _op(lib.tfm_cross_entropy, (logits, targets), ignore_index, float(label_smoothing),
               ids=(1,))


def concat(tensors, axis):
    """The tensors joined along axis."""
    tape, inputs = recording()
    with inputs:
        pointers = ffi.new('tfm_tensor *[]', [inputs(t) for t in tensors])
        return tape.made(lib.tfm_concat(tape._ptr(), pointers, len(tensors), axis))


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


def mask_from_lengths(lengths, width=None, additive=False):
    """A key-padding mask [B, width] from each row's length (width default:
    the longest), caller-owned: position s of row b kept (1, or 0 additive)
    when s < lengths[b], dropped (0, or -inf) past it; RangeError for a
    length outside 0..width."""
    lengths = np.ascontiguousarray(to_numpy(lengths), dtype=np.int64).reshape(-1)
    if width is None:
        width = int(lengths.max()) if lengths.size else 0
    return Tensor(check_pointer(lib.tfm_mask_from_lengths(
        ffi.NULL, ffi.from_buffer('int64_t[]', lengths), lengths.size, width, _form(additive))))


def from_torch_bool(mask, additive=False):
    """A PyTorch boolean mask (True = ignore; numpy or torch) in libtfm's
    keep form (1 = attend) or additive form (0 / -inf)."""
    array = np.ascontiguousarray(to_numpy(mask).astype(bool)).view(np.uint8)
    return Tensor(check_pointer(lib.tfm_mask_from_torch_bool(
        ffi.NULL, ffi.from_buffer('uint8_t[]', array), array.ndim,
        ffi.new('int64_t[]', array.shape), _form(additive))))


def combine_masks(a, b):
    """Both masks at once, broadcast (keep-masks AND, additive masks add)."""
    with Inputs() as inputs:
        return Tensor(check_pointer(lib.tfm_mask_combine(ffi.NULL, inputs(a), inputs(b))))


def masks(inputs, *given):
    """One attention's masks as libtfm takes them, in one form (libtfm
    wants a mask and its key-padding mask alike): additive when any is
    float (PyTorch's 0 / -inf, as generate_square_subsequent_mask), keep
    otherwise. PyTorch's bool masks (True = ignore) and int keep-masks
    (0 = ignore) are converted to that form; numpy, torch or tfm.Tensor.
    uint8 masks, which PyTorch reads as bool ones, are refused (TypeError)."""
    arrays = [m if m is None or isinstance(m, Tensor) else to_numpy(m) for m in given]
    if any(m is not None and m.dtype == np.uint8 for m in arrays):
        # PyTorch reads a byte mask as its bool mask (non-zero = ignore),
        # the opposite of a keep-mask: either reading would be silently
        # wrong for someone.
        raise TypeError('a uint8 mask is ambiguous: pass bool (True = ignore, PyTorch\'s '
                        'byte masks as .bool()) or int32 (0 = ignore)')
    additive = any((m.dtype.kind == 'f') for m in arrays if m is not None)
    pointers = []
    for mask in arrays:
        if mask is not None and mask.dtype == bool:
            mask = from_torch_bool(mask, additive)
            inputs.made.append(mask)
        elif mask is not None and additive and mask.dtype.kind in 'iu':
            mask = np.where(to_numpy(mask) != 0, 0.0, -np.inf).astype(np.float32)
        pointers.append(inputs(mask))
    return pointers
