"""Test doubles for the CPU-only tests of the Python binding: a fake libadjoint whose functions
are real C function pointers (ctypes CFUNCTYPE) with the prototypes of adjoint_c.h, so the
binding's ctypes marshalling runs exactly as against the real library; fake tensors with the
PyTorch attributes the binding reads; and a patch of adjoint._torch so no PyTorch or GPU is
needed.
"""

import contextlib
import ctypes
import os
import sys

# $ADJOINT_PYTHON_PATH: test an installed package instead of the checkout's (check_package.py).
sys.path.insert(0, os.environ.get("ADJOINT_PYTHON_PATH") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from adjoint import _capi, _torch  # noqa: E402
from adjoint.tensors import DTYPE_BY_NAME, contiguous_strides  # noqa: E402


class FakeDevice:
    def __init__(self, type="cuda", index=0):
        self.type = type
        self.index = index

    def __repr__(self):
        return "%s:%s" % (self.type, self.index)

    # Compared by value, as torch.device is (the binding's fast paths compare devices).
    def __eq__(self, other):
        return isinstance(other, FakeDevice) and (self.type, self.index) == (other.type,
                                                                            other.index)

    def __hash__(self):
        return hash((self.type, self.index))


class FakeDType:
    def __init__(self, torch_name):
        self.torch_name = torch_name

    def __str__(self):
        return "torch." + self.torch_name

    def __eq__(self, other):
        return isinstance(other, FakeDType) and self.torch_name == other.torch_name

    def __hash__(self):
        return hash(self.torch_name)


class FakeTensor:
    """What the binding reads of a torch.Tensor: dtype, shape, stride(), data_ptr(), device."""

    _next_address = 0x7F0000000000

    def __init__(self, shape, dtype="f32", strides=None, device=None):
        self.shape = tuple(shape)
        self.dtype = FakeDType(DTYPE_BY_NAME[dtype].torch_name if dtype in DTYPE_BY_NAME
                               else dtype)
        self._strides = tuple(strides) if strides is not None else contiguous_strides(shape)
        self.device = device or FakeDevice()
        FakeTensor._next_address += 1 << 20
        self._address = FakeTensor._next_address

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._address

    def contiguous(self):
        """Itself when contiguous, else a contiguous copy (a new address), as torch's."""
        if self._strides == contiguous_strides(self.shape):
            return self
        copy = FakeTensor(self.shape, self.dtype.torch_name, None, self.device)
        self.copies = getattr(self, "copies", 0) + 1
        return copy


class FakeProgramDefinition:
    def __init__(self, tensors, deterministic=True):
        self.tensors = tensors  # [(name, role, dtype name, shape, strides)]
        self.deterministic = deterministic


class FakeLibrary:
    """A libadjoint stand-in. `definitions(spec)` returns a FakeProgramDefinition or raises
    ValueError(message), which the fake reports as ADJOINT_ERROR_INVALID_ARGUMENT."""

    def __init__(self, definitions):
        self.definitions = definitions
        self.prepared = []  # spec texts, in order
        self.launches = []  # (handle, {name: (data, dtype, shape, strides)}, stream)
        self.released = []
        self.launch_status = 0
        self.launch_message = b""
        self._programs = {}
        self._error = b""
        self._keep = []  # bytes handed to C must outlive the call
        self.functions = type("Functions", (), {})()
        self._callbacks = []
        for name, (restype, argtypes) in _capi.PROTOTYPES.items():
            implementation = getattr(self, "_" + name, None)
            if implementation is None:
                continue
            if restype is ctypes.c_char_p:
                # A callback cannot return Python bytes without leaking them: it returns the
                # address of a kept buffer, seen by the caller through the real prototype.
                callback = ctypes.CFUNCTYPE(ctypes.c_void_p, *argtypes)(
                    self._returning_address(implementation))
                self._callbacks.append(callback)
                pointer = ctypes.cast(callback, ctypes.CFUNCTYPE(restype, *argtypes))
            else:
                pointer = ctypes.CFUNCTYPE(restype, *argtypes)(implementation)
            setattr(self.functions, name, pointer)

    def _returning_address(self, implementation):
        def call(*args):
            buffer = ctypes.create_string_buffer(implementation(*args))
            self._keep.append(buffer)
            return ctypes.addressof(buffer)
        return call

    def library(self):
        return _capi.Library(self.functions, "fake-libadjoint.so")

    def _fail(self, status, message):
        self._error = message.encode()
        return status

    def _adjoint_version(self):
        return b"0.0.0-fake"

    def _adjoint_last_error(self):
        return self._error

    def _adjoint_prepare(self, spec, determinism, out):
        text = spec.decode()
        self.prepared.append((text, determinism))
        try:
            definition = self.definitions(text)
        except ValueError as error:
            return self._fail(1, str(error))
        handle = 0x1000 + len(self._programs) * 16
        self._programs[handle] = definition
        out[0] = handle
        return 0

    def _adjoint_program_tensors(self, program, count):
        count[0] = len(self._programs[program].tensors)
        return 0

    def _adjoint_program_tensor_info(self, program, index, name, role, expected):
        tensors = self._programs[program].tensors
        if not 0 <= index < len(tensors):
            return self._fail(1, "tensor index %d out of range" % index)
        tensor_name, tensor_role, dtype, shape, strides = tensors[index]
        encoded = tensor_name.encode()
        self._keep.append(encoded)
        name[0] = encoded
        role[0] = 0 if tensor_role == "input" else 1
        expected[0].data = 0
        expected[0].dtype = DTYPE_BY_NAME[dtype].code
        expected[0].rank = len(shape)
        for axis in range(len(shape)):
            expected[0].shape[axis] = shape[axis]
            expected[0].strides[axis] = strides[axis]
        return 0

    def _adjoint_program_is_deterministic(self, program, result):
        result[0] = 1 if self._programs[program].deterministic else 0
        return 0

    def _adjoint_launch(self, program, count, names, tensors, stream):
        if self.launch_status:
            return self._fail(self.launch_status, self.launch_message.decode())
        bound = {}
        for i in range(count):
            t = tensors[i]
            bound[names[i].decode()] = (t.data, t.dtype, tuple(t.shape[:t.rank]),
                                        tuple(t.strides[:t.rank]))
        self.launches.append((program, bound, stream))
        return 0

    def _adjoint_program_release(self, program):
        self.released.append(program)
        return 0


@contextlib.contextmanager
def fake_environment(fake):
    """Installs `fake` as the library and replaces PyTorch in adjoint._torch; clears the
    binding's program cache before and after."""
    import adjoint
    allocated = []

    def empty_strided(shape, strides, torch_dtype_name, device):
        tensor = FakeTensor(shape, torch_dtype_name, strides, device)
        allocated.append(tensor)
        return tensor

    replacements = {
        "current_device": lambda: FakeDevice("cuda", 0),
        "device_guard": lambda device: contextlib.nullcontext(),
        "current_stream": lambda device: 0xABC,
        "launch_getters": lambda device: (lambda: 0, lambda index: 0xABC),
        "current_device_index": lambda: 0,
        "allocator": lambda shape, strides, name, device: (
            lambda: empty_strided(shape, strides, name, device)),
        "empty_strided": empty_strided,
    }
    saved = {name: getattr(_torch, name) for name in replacements}
    adjoint.clear_cache()
    previous = _capi.set_library(fake.library())
    for name, value in replacements.items():
        setattr(_torch, name, value)
    try:
        yield allocated
    finally:
        adjoint.clear_cache()
        for name, value in saved.items():
            setattr(_torch, name, value)
        _capi.set_library(previous)
