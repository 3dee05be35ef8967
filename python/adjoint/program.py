"""Programs: one op specialization compiled and loaded by libadjoint, launched on framework
tensors.

prepare(spec) returns a Program from a per-process cache keyed by (spec text, determinism,
device), so a warm call costs a dict lookup; the library keeps its own caches behind it. A
Program knows every tensor it binds (name, role, dtype, shape, strides, as the library reports
them); calling it checks the given tensors against that, allocates the outputs it was not given
with exactly the expected shape and strides (the library zeroes what it accumulates into, so
they are left uninitialized), and queues the kernels on the current stream.

The per-call path runs in C where the extension adjoint._fastlaunch is built (_fast.py,
python/ext/fastlaunch.c): one call binds the tensors, compares each with the record last
accepted for it, and launches. It runs the same Python checks as the ctypes path on any tensor
that differs from that record, so errors are the same on both paths.
"""

import ctypes
import threading
from collections import namedtuple

from . import _capi, _fast, _torch
from .errors import InvalidArgumentError
from .tensors import DTYPE_BY_CODE, DTYPE_BY_NAME, describe

TensorInfo = namedtuple("TensorInfo", "name role dtype shape strides")
TensorInfo.__doc__ = """One tensor a program binds: role 'input' or 'output', dtype as in
specializations ('bf16'), shape and strides in elements."""

DETERMINISM = {"default": _capi.DETERMINISM_DEFAULT,
               "allow_atomics": _capi.DETERMINISM_ALLOW_ATOMICS}


def determinism_code(determinism):
    """adjoint_determinism for 'default' / 'allow_atomics' (or the enum's int)."""
    if isinstance(determinism, str) and determinism in DETERMINISM:
        return DETERMINISM[determinism]
    if isinstance(determinism, int) and not isinstance(determinism, bool) \
            and determinism in DETERMINISM.values():
        return determinism
    raise InvalidArgumentError("determinism: expected one of %s, got %r"
                               % (", ".join(DETERMINISM), determinism))


class Program:
    """A prepared specialization. Call it with tensors by name; it returns the outputs."""

    def __init__(self, library, handle, spec, determinism, device):
        self.spec = spec
        self.determinism = determinism
        self.device = device
        self._library = library
        self._handle = handle
        self.tensors = tuple(self._tensor_info(raw) for raw in library.program_tensors(handle))
        self.inputs = tuple(t.name for t in self.tensors if t.role == "input")
        self.outputs = tuple(t.name for t in self.tensors if t.role == "output")
        self.deterministic = library.is_deterministic(handle)
        self._by_name = {t.name: t for t in self.tensors}
        self._order = tuple(t.name for t in self.tensors)
        self._names = (ctypes.c_char_p * len(self.tensors))(
            *[t.name.encode("utf-8") for t in self.tensors])
        self._prepare_launch_data()

    def _tensor_info(self, raw):
        dtype = DTYPE_BY_CODE.get(raw.dtype_code)
        if dtype is None:
            raise InvalidArgumentError("%s: tensor '%s' has unknown dtype code %d"
                                       % (self.spec, raw.name, raw.dtype_code))
        role = {_capi.ROLE_INPUT: "input", _capi.ROLE_OUTPUT: "output"}.get(raw.role)
        if role is None:
            raise InvalidArgumentError("%s: tensor '%s' has unknown role %d"
                                       % (self.spec, raw.name, raw.role))
        return TensorInfo(raw.name, role, dtype.name, raw.shape, raw.strides)

    @property
    def op(self):
        return self.spec.split(" ", 1)[0]

    def info(self, name):
        """The TensorInfo of tensor `name`."""
        try:
            return self._by_name[name]
        except KeyError:
            raise InvalidArgumentError("%s: no tensor named '%s'; it binds %s"
                                       % (self.op, name, ", ".join(self._by_name))) from None

    def __repr__(self):
        return "Program(%r, determinism=%r, deterministic=%r)" % (
            self.spec, self.determinism, self.deterministic)

    def _prepare_launch_data(self):
        """Precomputed once per Program, so a launch only writes data pointers: the descriptor
        array with every dtype, shape and stride filled in, the output allocations, and, per
        tensor, the (dtype, shape, strides, device) last accepted by the full checks."""
        count = len(self.tensors)
        self._descriptors = (_capi.AdjointTensor * count)()
        for index, info in enumerate(self.tensors):
            descriptor = self._descriptors[index]
            descriptor.dtype = DTYPE_BY_NAME[info.dtype].code
            descriptor.rank = len(info.shape)
            for axis, size in enumerate(info.shape):
                descriptor.shape[axis] = size
                descriptor.strides[axis] = info.strides[axis]
        self._accepted = [None] * count
        self._allocations = tuple((t.name, t.shape, t.strides, _dtype_torch_name(t.dtype))
                                  for t in self.tensors if t.role == "output")
        self._launch_lock = threading.Lock()
        self._allocators = None  # (name, allocate()) per output, made on the first call
        self._fast = self._fast_launcher()

    def _fast_launcher(self, function=None):
        """The compiled launcher of this program (adjoint._fastlaunch.Launcher), or None where
        the extension or the library's function address is not available. `function`: another
        launch function's address (bench_overhead.py measures the binding with one that does
        nothing)."""
        fast = _fast.module()
        if fast is None:
            return None
        function = function or self._library.function_address("adjoint_launch")
        if not function:
            return None
        get_device, get_stream = _torch.launch_getters(self.device)
        return fast.Launcher(
            function, self._handle, ctypes.addressof(self._names),
            ctypes.addressof(self._descriptors), (self._names, self._descriptors), self._order,
            self._checked, get_device, get_stream, self._check_status,
            _torch.device_index(self.device))

    def _check_status(self, status):
        self._library.check(status, "adjoint_launch")

    def _checked(self, index, tensor):
        """For the compiled launcher: the full checks of tensor `index`, and the address of its
        descriptor (with the descriptor, which must outlive the copy)."""
        descriptor = self._check(index, tensor)
        return ctypes.addressof(descriptor), descriptor

    def _check_names(self, tensors):
        unknown = [name for name in tensors if name not in self._by_name]
        if unknown:
            raise InvalidArgumentError("%s: no tensor named %s; it binds %s"
                                       % (self.op, ", ".join(repr(n) for n in unknown),
                                          ", ".join(self._by_name)))
        missing = [t.name for t in self.tensors if t.name not in tensors]
        if missing:
            raise InvalidArgumentError("%s: tensors %s not given" % (self.op, ", ".join(missing)))

    def _check(self, index, tensor):
        """The full checks of tensor `index` (InvalidArgumentError naming it): its descriptor."""
        info = self.tensors[index]
        device = _torch.cuda_device_of(tensor, "%s: tensor '%s'" % (self.op, info.name))
        if _torch.device_index(device) != _torch.device_index(self.device):
            raise InvalidArgumentError("%s: tensor '%s' is on %s, the program on %s"
                                       % (self.op, info.name, device, self.device))
        return describe(tensor, info, info.name, self.op)

    def _accept(self, index, tensor):
        """The full checks of tensor `index`; remembers what passed so that the next launch
        with an alike tensor only compares four attributes."""
        self._descriptors[index] = self._check(index, tensor)
        self._accepted[index] = (tensor.dtype, tensor.shape, tensor.stride(), tensor.device)

    def launch(self, tensors, stream=None):
        """Queues the program with every tensor bound (`tensors`: name -> tensor) on `stream`
        (a CUstream handle; default: PyTorch's current stream on the program's device)."""
        if self._handle is None:
            raise InvalidArgumentError("%s: the program was released" % self.op)
        fast = self._fast
        if fast is not None and fast(tensors, stream):
            return
        if len(tensors) != len(self.tensors):
            self._check_names(tensors)
        with self._launch_lock:
            descriptors = self._descriptors
            accepted = self._accepted
            for index, name in enumerate(self._order):
                try:
                    tensor = tensors[name]
                except KeyError:
                    self._check_names(tensors)
                    raise
                seen = accepted[index]
                try:
                    same = (seen is not None and tensor.dtype == seen[0]
                            and tensor.shape == seen[1] and tensor.stride() == seen[2]
                            and tensor.device == seen[3])
                except (AttributeError, TypeError):
                    same = False
                if same:
                    descriptors[index].data = tensor.data_ptr()
                else:
                    self._accept(index, tensor)
            if stream is None:
                stream = _torch.current_stream(self.device)
            with _torch.device_guard(self.device):
                self._library.launch(self._handle, len(descriptors), self._names, descriptors,
                                     stream)

    def __call__(self, tensors=None, stream=None, **named):
        """Binds `tensors` (a dict) and keyword tensors, allocates the outputs not given, launches,
        and returns {output name: tensor}."""
        if tensors:
            bound = dict(tensors)
            if named:
                bound.update(named)
        else:
            bound = named
        outputs = {}
        allocators = self._allocators
        if allocators is None:
            allocators = self._allocators = tuple(
                (name, _torch.allocator(shape, strides, torch_dtype_name, self.device))
                for name, shape, strides, torch_dtype_name in self._allocations)
        for name, allocate in allocators:
            tensor = bound.get(name)
            if tensor is None:
                tensor = bound[name] = allocate()
            outputs[name] = tensor
        fast = self._fast
        if fast is None or not fast(bound, stream):
            self.launch(bound, stream)
        return outputs

    def release(self):
        """Releases the library's handle (the program cannot be launched afterwards)."""
        handle, self._handle = self._handle, None
        self._fast = None
        if handle is not None:
            self._library.release(handle)


def _dtype_torch_name(name):
    return DTYPE_BY_NAME[name].torch_name


_cache = {}
_cache_lock = threading.Lock()


def prepare(spec, determinism="default", device=None):
    """The Program for specialization text `spec` on `device` (default: the current CUDA
    device), from the cache or compiled and loaded now."""
    # A warm hit: these exact arguments were resolved before (one dict lookup).
    try:
        return _warm[(spec, determinism,
                      _torch.current_device_index() if device is None else device)]
    except (KeyError, TypeError):
        pass
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidArgumentError("spec: expected 'op key=value ...', got %r" % (spec,))
    code = determinism_code(determinism)
    given = device
    if device is None:
        device = _torch.current_device()
    key = (spec, code, _torch.device_index(device))
    program = _cache.get(key)
    if program is None:
        program = _load(spec, determinism, code, device, key)
    try:
        _warm[(spec, determinism, _torch.device_index(device) if given is None else given)] = \
            program
    except TypeError:  # an unhashable device or determinism: no warm entry
        pass
    return program


def _load(spec, determinism, code, device, key):
    library = _capi.library()
    with _torch.device_guard(device):
        handle = library.prepare(spec, code)
    try:
        program = Program(library, handle, spec, determinism, device)
    except BaseException:
        library.release(handle)
        raise
    with _cache_lock:
        winner = _cache.setdefault(key, program)
    if winner is not program:
        program.release()
    return winner


_call_caches = []


_warm = {}
_call_caches.append(_warm)  # (spec, determinism as given, device as given or current index)


def call_cache():
    """A new dict for a caller's own (call signature) -> Program memo; clear_cache empties it
    with the Program cache, so no memo keeps a released Program."""
    memo = {}
    _call_caches.append(memo)
    return memo


def clear_cache():
    """Releases every cached Program (for tests and long-running processes)."""
    with _cache_lock:
        programs = list(_cache.values())
        _cache.clear()
        for memo in _call_caches:
            memo.clear()
    for program in programs:
        program.release()


def run(spec, tensors, determinism="default", stream=None):
    """Prepares `spec` (cached) and runs it on `tensors` (name -> tensor): returns every output
    by name, allocating those not given. The device is the tensors' device."""
    if not tensors:
        raise InvalidArgumentError("tensors: expected a dict of named CUDA tensors, got %r"
                                   % (tensors,))
    name, first = next(iter(tensors.items()))
    device = _torch.cuda_device_of(first, "tensor '%s'" % name)
    return prepare(spec, determinism, device)(tensors, stream=stream)
