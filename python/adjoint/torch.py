"""Drop-in: adjoint as PyTorch's CUDA kernel for the backward of nearest upsampling and grid
sampling, so existing code (F.interpolate(mode="nearest"|"nearest-exact"), F.grid_sample)
gets adjoint's kernels without a change.

    import adjoint.torch
    adjoint.torch.enable()            # or: with adjoint.torch.enabled(): ...
    loss.backward()                   # upsample/grid_sampler backward now run adjoint's kernels
    adjoint.torch.disable()           # PyTorch's own kernels again

enable() registers, through torch.library, a CUDA implementation of each aten op below,
after taking PyTorch's own CUDA kernel with torch.library.get_kernel. A call adjoint does not
cover (a dtype, layout or stride pattern it refuses with AdjointError) falls through to that
kernel, so enabling never turns a working call into an error. disable() destroys the
registration, which restores PyTorch's kernels.

Determinism: PyTorch's CUDA grid_sampler_2d_backward raises under
torch.use_deterministic_algorithms(True) (the alert is made inside its CUDA kernel). The
replacement does not raise: it runs adjoint's deterministic program, and falls through to
PyTorch (which then raises) only where adjoint's program for the call is not deterministic.
Where determinism is not asked for, it runs the "allow_atomics" program, for which the compiler
takes whichever of grad_input's two strategies is the faster (docs/compiler.md "Binned or
atomics"): the deterministic binned gather from 16 channels bilinear, 32 nearest and 8 bicubic
on, float atomics below.
grid_sampler_3d_backward is registered only where this package has that op.
"""

import contextlib
import threading
import warnings

from . import ops
from .errors import AdjointError

_lock = threading.Lock()
_registration = None  # the torch.library.Library while enabled
_pytorch_kernels = {}  # aten op name -> PyTorch's CUDA kernel (SafeKernelFunction)
fallthrough_counts = {}  # aten op name -> calls handed to PyTorch's kernel since enable()


def _torch():
    import torch
    return torch


def _fall_through(name, keyset, *args):
    fallthrough_counts[name] = fallthrough_counts.get(name, 0) + 1
    return _pytorch_kernels[name].call_boxed(keyset, *args)


def _upsample_kernel(name, function):
    def kernel(keyset, grad_output, output_size, input_size, *scales):
        try:
            return function(grad_output, output_size, input_size, *scales)
        except AdjointError:
            return _fall_through(name, keyset, grad_output, output_size, input_size, *scales)
    kernel.__name__ = "adjoint_" + name
    return kernel


def _grid_sampler_kernel(name, program_of, function):
    def kernel(keyset, grad_output, input, grid, interpolation_mode, padding_mode,
               align_corners, output_mask):
        args = (grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
                output_mask)
        try:
            if not _torch().are_deterministic_algorithms_enabled():
                # PyTorch's own kernel is not deterministic here either: atomics are allowed,
                # and the compiler takes them where they are the faster (docs/pytorch.md).
                return function(*args, determinism="allow_atomics")
            if program_of is not None and not program_of(*args).deterministic:
                return _fall_through(name, keyset, *args)
            return function(*args)
        except AdjointError:
            return _fall_through(name, keyset, *args)
    kernel.__name__ = "adjoint_" + name
    return kernel


def kernels():
    """aten op name -> the CUDA kernel enable() registers for it."""
    table = {}
    for rank in (1, 2, 3):
        for exact in (False, True):
            name = ("_upsample_nearest_exact%dd_backward" if exact
                    else "upsample_nearest%dd_backward") % rank
            table[name] = _upsample_kernel(name, getattr(ops, name))
    table["grid_sampler_2d_backward"] = _grid_sampler_kernel(
        "grid_sampler_2d_backward", ops.grid_sampler_2d_backward_program,
        ops.grid_sampler_2d_backward)
    if hasattr(ops, "grid_sampler_3d_backward"):  # once the grid_sampler_3d op is in
        table["grid_sampler_3d_backward"] = _grid_sampler_kernel(
            "grid_sampler_3d_backward", getattr(ops, "grid_sampler_3d_backward_program", None),
            ops.grid_sampler_3d_backward)
    return table


def is_enabled():
    return _registration is not None


def enable():
    """Registers adjoint as the CUDA kernel of every op in kernels() (idempotent)."""
    global _registration
    with _lock:
        if _registration is not None:
            return
        torch = _torch()
        get_kernel = getattr(torch.library, "get_kernel", None)
        if get_kernel is None:
            raise AdjointError("adjoint.torch.enable() needs torch.library.get_kernel "
                               "(PyTorch >= 2.9) to fall through to PyTorch's kernels; this "
                               "is PyTorch %s" % torch.__version__, 5)
        table = kernels()
        originals = {name: get_kernel("aten::" + name, "CUDA") for name in table}
        registration = torch.library.Library("aten", "IMPL")
        try:
            with warnings.catch_warnings():
                # PyTorch warns that a registered kernel is overridden: that is the point.
                warnings.simplefilter("ignore")
                for name, kernel in table.items():
                    registration.impl(name, kernel, "CUDA", with_keyset=True)
        except BaseException:
            registration._destroy()
            raise
        _pytorch_kernels.clear()
        _pytorch_kernels.update(originals)
        fallthrough_counts.clear()
        _registration = registration


def disable():
    """Removes the registration: PyTorch's own kernels run again (idempotent)."""
    global _registration
    with _lock:
        if _registration is None:
            return
        registration, _registration = _registration, None
        registration._destroy()


@contextlib.contextmanager
def enabled():
    """enable() inside the block; the previous state after it."""
    was_enabled = is_enabled()
    enable()
    try:
        yield
    finally:
        if not was_enabled:
            disable()


__all__ = ["disable", "enable", "enabled", "fallthrough_counts", "is_enabled", "kernels"]
