"""Loads the built libtfm.so through ctypes, as an FFI user would: builds a
tiny graph, runs backward, reads a gradient, and reads an error message.

  test_ctypes.py LIBRARY PROJECT_VERSION"""
import ctypes
import math
import sys

lib = ctypes.CDLL(sys.argv[1])
P = ctypes.c_void_p
i32, i64, f32 = ctypes.c_int32, ctypes.c_int64, ctypes.c_float
Shape = i64 * 4


def declare(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = restype, list(argtypes)
    return fn


tensor_from_f32 = declare("tfm_tensor_from_f32", P, i32, ctypes.POINTER(i64), ctypes.POINTER(f32))
tensor_zeros = declare("tfm_tensor_zeros", P, i32, i32, ctypes.POINTER(i64))
tensor_free = declare("tfm_tensor_free", None, P)
set_requires_grad = declare("tfm_tensor_set_requires_grad", i32, P, i32)
read_grad = declare("tfm_tensor_read_grad", i32, P, ctypes.POINTER(f32), i64)
item = declare("tfm_tensor_item", i32, P, ctypes.POINTER(f32))
tape_create = declare("tfm_tape_create", P)
tape_free = declare("tfm_tape_free", None, P)
backward = declare("tfm_tape_backward", i32, P, P)
mul = declare("tfm_mul", P, P, P, P)
tanh = declare("tfm_tanh", P, P, P)
tsum = declare("tfm_sum", P, P, P)
last_error = declare("tfm_last_error", ctypes.c_char_p)
last_status = declare("tfm_last_status", i32)
status_name = declare("tfm_status_name", ctypes.c_char_p, i32)
version = declare("tfm_version_string", ctypes.c_char_p)

results = []


def check(name, condition, detail=""):
    results.append(bool(condition))
    print(("ok   " if condition else "FAIL ") + name + (f": {detail}" if detail and not condition else ""))


check("version", version().decode() == sys.argv[2], version())

# loss = sum(tanh(x * w)); dloss/dw = x * (1 - tanh(x w)^2)
xs, ws = [0.5, -1.0, 2.0], [1.5, 0.25, -0.5]
x = tensor_from_f32(1, Shape(3), (f32 * 3)(*xs))
w = tensor_from_f32(1, Shape(3), (f32 * 3)(*ws))
check("set_requires_grad", set_requires_grad(w, 1) == 0)
tape = tape_create()
loss = tsum(tape, tanh(tape, mul(tape, x, w)))
check("graph built", loss is not None, last_error())
check("backward", backward(tape, loss) == 0, last_error())
value = f32()
item(loss, ctypes.byref(value))
expected_loss = sum(math.tanh(a * b) for a, b in zip(xs, ws))
check("loss value", abs(value.value - expected_loss) < 1e-5, (value.value, expected_loss))
grad = (f32 * 3)()
check("read grad", read_grad(w, grad, 3) == 0, last_error())
expected = [a * (1 - math.tanh(a * b) ** 2) for a, b in zip(xs, ws)]
check("gradient", all(abs(g - e) < 1e-5 for g, e in zip(grad, expected)), (list(grad), expected))

bad = tensor_zeros(0, 5, Shape(1))
check("bad ndim is refused", bad is None)
check("status", status_name(last_status()) == b"TFM_ERR_ARG", status_name(last_status()))
check("message", b"ndim" in last_error(), last_error())

tape_free(tape)
tensor_free(x)
tensor_free(w)
passed = sum(results)
print(f"{passed} passed, {len(results) - passed} failed")
sys.exit(0 if passed == len(results) else 1)
