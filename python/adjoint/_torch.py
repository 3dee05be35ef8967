"""The only place the binding touches PyTorch: output allocation, the current stream and the
current device. PyTorch is imported on first use, so the rest of the package (spec texts,
layouts, error handling) works where it is not installed; tests replace these functions to run
the binding against a fake library and fake tensors.
"""

import contextlib

from .errors import InvalidArgumentError

_torch = None


def torch():
    """The torch module (imported on first use)."""
    global _torch
    if _torch is None:
        import torch as module
        _torch = module
    return _torch


def cuda_device_of(tensor, argument):
    """The CUDA device `tensor` lives on; InvalidArgumentError naming `argument` otherwise."""
    device = getattr(tensor, "device", None)
    if device is None or not hasattr(tensor, "data_ptr"):
        raise InvalidArgumentError("%s: expected a CUDA tensor, got %s"
                                   % (argument, type(tensor).__name__))
    if getattr(device, "type", None) != "cuda":
        raise InvalidArgumentError("%s: expected a CUDA tensor, got one on %s" % (argument, device))
    return device


def current_device():
    """The current CUDA device (initializing PyTorch's CUDA context, which the library uses)."""
    t = torch()
    return t.device("cuda", t.cuda.current_device())


def device_index(device):
    return 0 if device.index is None else int(device.index)


_NO_GUARD = contextlib.nullcontext()


def _current_device_index():
    """The index of the current CUDA device. torch._C._cuda_getDevice skips the Python-level
    lazy-init checks of torch.cuda.current_device() (about 1 us); used once CUDA is up."""
    t = torch()
    raw = getattr(t._C, "_cuda_getDevice", None)
    if raw is not None and t.cuda.is_initialized():
        return raw()
    return t.cuda.current_device()


_raw_get_device = None


def current_device_index():
    """The current CUDA device's index, cheaply once CUDA is up (the raw getter)."""
    global _raw_get_device
    if _raw_get_device is None:
        t = torch()
        raw = getattr(t._C, "_cuda_getDevice", None)
        if raw is None or not t.cuda.is_initialized():
            return t.cuda.current_device()
        _raw_get_device = raw
    return _raw_get_device()


def device_guard(device):
    """Makes `device` current for the calls inside (the library uses the thread's context)."""
    if _current_device_index() == device_index(device):
        return _NO_GUARD
    return torch().cuda.device(device)


def current_stream(device):
    """The CUstream handle (an int) of PyTorch's current stream on `device`. The raw getter
    (what PyTorch's own Triton launches use) avoids building a torch.cuda.Stream object."""
    t = torch()
    raw = getattr(t._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(device_index(device))
    return t.cuda.current_stream(device).cuda_stream


def launch_getters(device):
    """(get_device() -> the current device index, get_stream(device index) -> the current
    CUstream) for the compiled launch path: PyTorch's raw builtins where it has them."""
    t = torch()
    raw_device = getattr(t._C, "_cuda_getDevice", None)
    raw_stream = getattr(t._C, "_cuda_getCurrentRawStream", None)
    if raw_device is None or raw_stream is None:
        return _current_device_index, lambda index: current_stream(device)
    return raw_device, raw_stream


def allocator(shape, strides, torch_dtype_name, device):
    """A function of no arguments that allocates what empty_strided(...) would, with the
    arguments resolved once (for a Program's outputs)."""
    t = torch()
    dtype = getattr(t, torch_dtype_name)
    shape, strides = tuple(shape), tuple(strides)
    empty_strided = t.empty_strided
    return lambda: empty_strided(shape, strides, dtype=dtype, device=device)


_DTYPES = {}


def empty_strided(shape, strides, torch_dtype_name, device):
    """An uninitialized tensor with exactly these shape and strides."""
    t = torch()
    dtype = _DTYPES.get(torch_dtype_name)
    if dtype is None:
        dtype = _DTYPES.setdefault(torch_dtype_name, getattr(t, torch_dtype_name))
    return t.empty_strided(tuple(shape), tuple(strides), dtype=dtype, device=device)
