"""The ctypes boundary: finds and loads libadjoint, declares the C API of
include/adjoint/adjoint_c.h, and turns every non-OK adjoint_status into an exception carrying
adjoint_last_error().

Nothing here knows about PyTorch. The library is loaded lazily, on the first call that needs
it, so `import adjoint` works (and spec texts can be built) on a machine without the library or
a GPU. Where it is looked for, in order: $ADJOINT_LIBRARY, then lib/libadjoint.so inside the
package (where `pip install .` puts it), then build/lib/libadjoint.so of the checkout this
package lives in (python/adjoint/../../build/lib), then the system's search path
(ctypes.util.find_library("adjoint")).
"""

import ctypes
import ctypes.util
import os
import threading

from .errors import AdjointError, STATUS_NAMES, error_for_status

MAX_RANK = 8  # ADJOINT_MAX_RANK
STATUS_NOT_AVAILABLE = 5

# Values of adjoint_determinism.
DETERMINISM_DEFAULT = 0
DETERMINISM_ALLOW_ATOMICS = 1

# Values of the role reported by adjoint_program_tensor_info.
ROLE_INPUT = 0
ROLE_OUTPUT = 1


class AdjointTensor(ctypes.Structure):
    """struct adjoint_tensor: a device pointer with dtype, shape and strides (in elements)."""

    _fields_ = [
        ("data", ctypes.c_uint64),
        ("dtype", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_RANK),
        ("strides", ctypes.c_int64 * MAX_RANK),
    ]


_status = ctypes.c_int
_program_p = ctypes.c_void_p


class CompileStats(ctypes.Structure):
    """adjoint_compile_stats: what the engine has built (docs/dynamic_shapes.md)."""

    _fields_ = [(name, ctypes.c_uint64) for name in (
        "specialized_programs", "generic_programs", "specialized_compiles", "generic_compiles",
        "generic_bindings", "generic_fallbacks")]

# name -> (restype, argtypes), exactly as adjoint_c.h declares them.
PROTOTYPES = {
    "adjoint_version": (ctypes.c_char_p, []),
    "adjoint_last_error": (ctypes.c_char_p, []),
    "adjoint_prepare": (_status, [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_program_p)]),
    "adjoint_program_tensors": (_status, [_program_p, ctypes.POINTER(ctypes.c_int)]),
    "adjoint_program_tensor_info": (
        _status,
        [_program_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
         ctypes.POINTER(ctypes.c_int), ctypes.POINTER(AdjointTensor)],
    ),
    "adjoint_program_is_deterministic": (_status, [_program_p, ctypes.POINTER(ctypes.c_int)]),
    "adjoint_launch": (
        _status,
        [_program_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
         ctypes.POINTER(AdjointTensor), ctypes.c_void_p],
    ),
    "adjoint_program_release": (_status, [_program_p]),
    "adjoint_run": (
        _status,
        [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
         ctypes.POINTER(AdjointTensor), ctypes.c_void_p],
    ),
    "adjoint_upsample_nearest2d_backward": (
        _status,
        [ctypes.POINTER(AdjointTensor), ctypes.POINTER(AdjointTensor),
         ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64), ctypes.c_double,
         ctypes.c_double, ctypes.c_void_p],
    ),
    "adjoint_load_package": (_status, [ctypes.c_char_p]),
    "adjoint_set_jit_enabled": (_status, [ctypes.c_int]),
    "adjoint_set_dynamic_shapes": (_status, [ctypes.c_char_p]),
    "adjoint_get_compile_stats": (_status, [ctypes.POINTER(CompileStats)]),
    "adjoint_reset_compile_stats": (_status, []),
}


class RawTensorInfo:
    """What adjoint_program_tensor_info reports for one tensor of a program."""

    __slots__ = ("name", "role", "dtype_code", "shape", "strides")

    def __init__(self, name, role, dtype_code, shape, strides):
        self.name = name
        self.role = role
        self.dtype_code = dtype_code
        self.shape = shape
        self.strides = strides


class Library:
    """libadjoint's C API with checked calls. `functions` is anything with one attribute per C
    function (a ctypes.CDLL, or for tests an object of CFUNCTYPE pointers)."""

    def __init__(self, functions, path):
        self.path = path
        self._f = functions
        if isinstance(functions, ctypes.CDLL):
            for name, (restype, argtypes) in PROTOTYPES.items():
                try:
                    function = getattr(functions, name)
                except AttributeError:
                    continue  # reported when called: older libraries may lack a function
                function.restype = restype
                function.argtypes = argtypes

    def _function(self, name):
        try:
            return getattr(self._f, name)
        except AttributeError:
            raise AdjointError("%s does not export %s" % (self.path, name),
                               STATUS_NOT_AVAILABLE) from None

    def last_error(self):
        """The library's message for the last failed call on this thread."""
        text = self._function("adjoint_last_error")()
        return text.decode("utf-8", "replace") if text else ""

    def check(self, status, function_name):
        """Raises the exception for `status` unless it is ADJOINT_OK."""
        if status == 0:
            return
        message = self.last_error() or "%s failed" % function_name
        raise error_for_status(
            status, "%s [%s from %s]" % (message, STATUS_NAMES.get(status, status), function_name))

    def call(self, name, *args):
        """Calls the C function `name` and checks its status."""
        self.check(self._function(name)(*args), name)

    def version(self):
        text = self._function("adjoint_version")()
        return text.decode() if text else ""

    def prepare(self, spec, determinism):
        """adjoint_prepare: the opaque program handle (an int) for `spec`."""
        handle = _program_p()
        self.call("adjoint_prepare", spec.encode("utf-8"), determinism, ctypes.byref(handle))
        if not handle.value:
            raise AdjointError("adjoint_prepare returned ADJOINT_OK but no program for '%s'" % spec,
                               6)
        return handle.value

    def program_tensors(self, handle):
        """Every tensor the program binds, in the library's order, as RawTensorInfo."""
        count = ctypes.c_int()
        self.call("adjoint_program_tensors", handle, ctypes.byref(count))
        infos = []
        for index in range(count.value):
            name = ctypes.c_char_p()
            role = ctypes.c_int()
            expected = AdjointTensor()
            self.call("adjoint_program_tensor_info", handle, index, ctypes.byref(name),
                      ctypes.byref(role), ctypes.byref(expected))
            rank = expected.rank
            if not 0 <= rank <= MAX_RANK:
                raise AdjointError("tensor %d of the program has rank %d" % (index, rank), 6)
            infos.append(RawTensorInfo(
                name=(name.value or b"").decode("utf-8"),
                role=role.value,
                dtype_code=expected.dtype,
                shape=tuple(expected.shape[i] for i in range(rank)),
                strides=tuple(expected.strides[i] for i in range(rank)),
            ))
        return infos

    def is_deterministic(self, handle):
        result = ctypes.c_int()
        self.call("adjoint_program_is_deterministic", handle, ctypes.byref(result))
        return bool(result.value)

    def launch(self, handle, count, names, tensors, stream):
        """adjoint_launch; `names` is a (c_char_p * count), `tensors` an (AdjointTensor * count).
        The function is looked up once: this is the per-call path."""
        function = self.__dict__.get("_launch_function")
        if function is None:
            function = self._launch_function = self._function("adjoint_launch")
        status = function(handle, count, names, tensors, stream)
        if status:
            self.check(status, "adjoint_launch")

    def function_address(self, name):
        """The address of C function `name` (for the compiled launch path), or None."""
        try:
            function = getattr(self._f, name)
        except AttributeError:
            return None
        try:
            return ctypes.cast(function, ctypes.c_void_p).value
        except (TypeError, ctypes.ArgumentError):
            return None

    def release(self, handle):
        self.call("adjoint_program_release", handle)

    def load_package(self, path):
        self.call("adjoint_load_package", os.fsencode(path))

    def set_jit_enabled(self, enabled):
        self.call("adjoint_set_jit_enabled", 1 if enabled else 0)

    def set_dynamic_shapes(self, mode):
        self.call("adjoint_set_dynamic_shapes", str(mode).encode())

    def compile_stats(self):
        stats = CompileStats()
        self.call("adjoint_get_compile_stats", ctypes.byref(stats))
        return {name: int(getattr(stats, name)) for name, _ in CompileStats._fields_}

    def reset_compile_stats(self):
        self.call("adjoint_reset_compile_stats")


def default_library_path():
    """build/lib/libadjoint.so of the checkout holding this package."""
    package_dir = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(os.path.join(package_dir, "..", "..", "build", "lib", "libadjoint.so"))


def installed_library_path():
    """lib/libadjoint.so inside the package, where `pip install .` puts it."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "libadjoint.so")


def locate_library():
    """The path of libadjoint to load; raises AdjointError listing the places tried."""
    from_env = os.environ.get("ADJOINT_LIBRARY")
    if from_env:
        if not os.path.exists(from_env):
            raise AdjointError("ADJOINT_LIBRARY=%s: no such file" % from_env, STATUS_NOT_AVAILABLE)
        return from_env
    installed = installed_library_path()
    if os.path.exists(installed):
        return installed
    beside = default_library_path()
    if os.path.exists(beside):
        return beside
    found = ctypes.util.find_library("adjoint")
    if found:
        return found
    raise AdjointError(
        "libadjoint not found: set ADJOINT_LIBRARY, or build it into %s, or install it on the "
        "library search path" % beside, STATUS_NOT_AVAILABLE)


_lock = threading.Lock()
_library = None


def library():
    """The loaded Library (loaded on first use)."""
    global _library
    if _library is None:
        with _lock:
            if _library is None:
                path = locate_library()
                try:
                    cdll = ctypes.CDLL(path)
                except OSError as error:
                    raise AdjointError("cannot load %s: %s" % (path, error),
                                       STATUS_NOT_AVAILABLE) from None
                _library = Library(cdll, path)
    return _library


def set_library(replacement):
    """Replaces the loaded Library (a Library, or None to load again on next use); returns the
    previous one. For embedding a library loaded elsewhere, and for tests."""
    global _library
    with _lock:
        previous, _library = _library, replacement
    return previous
