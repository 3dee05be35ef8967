"""adjoint for Python: JIT-compiled backward kernels on PyTorch CUDA tensors.

A thin ctypes binding of libadjoint's C API (include/adjoint/adjoint_c.h); no build step.

    import adjoint
    grad_input = adjoint.upsample_nearest2d_backward(grad_output, [256, 256], [8, 64, 128, 128])
    program = adjoint.prepare("upsample_nearest2d_backward dtype=bf16 "
                              "input_size=8,64,128,128 output_size=256,256")
    outputs = adjoint.run(program.spec, {"grad_output": grad_output})

The library is found through $ADJOINT_LIBRARY, else build/lib/libadjoint.so of this checkout,
else the system search path, and loaded on first use. Every failure raises AdjointError with
the library's message; bad arguments raise InvalidArgumentError, also a ValueError.
"""

from . import spec
from ._capi import locate_library
from .errors import AdjointError, InvalidArgumentError
from .ops import (
    _upsample_nearest_exact1d_backward,
    _upsample_nearest_exact2d_backward,
    _upsample_nearest_exact3d_backward,
    grid_sampler_2d_backward,
    grid_sampler_3d_backward,
    mhc_post,
    mhc_post_backward,
    mhc_pre_backward,
    mhc_sinkhorn,
    mhc_sinkhorn_backward,
    upsample_nearest1d_backward,
    upsample_nearest2d_backward,
    upsample_nearest3d_backward,
)
from .program import Program, TensorInfo, clear_cache, prepare, run

# ATen spells these with a leading underscore; the plain names are offered too.
upsample_nearest_exact1d_backward = _upsample_nearest_exact1d_backward
upsample_nearest_exact2d_backward = _upsample_nearest_exact2d_backward
upsample_nearest_exact3d_backward = _upsample_nearest_exact3d_backward


def __getattr__(name):
    """adjoint.torch (the drop-in registration) and adjoint.mhc (autograd operators) are
    imported on first use: they need PyTorch."""
    if name in ("torch", "mhc"):
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError("module 'adjoint' has no attribute %r" % name)


def library_path():
    """The path of the loaded libadjoint (loading it if needed)."""
    from ._capi import library
    return library().path


def version():
    """libadjoint's version string."""
    from ._capi import library
    return library().version()


def load_package(path):
    """Loads an ahead-of-time kernel package built by `adjoint aot`."""
    from ._capi import library
    library().load_package(path)


def set_jit_enabled(enabled):
    """False: calls no loaded package covers fail instead of compiling with NVRTC."""
    from ._capi import library
    library().set_jit_enabled(enabled)


def set_dynamic_shapes(mode):
    """The dynamic-shape policy, as ADJOINT_DYNAMIC: "never", "batch" (default: generic in
    batch axes only, and in the token pair (batch, seq) of the per-token mHC ops, whose generic
    kernels are the specialized ones), "auto" or "always"."""
    from ._capi import library
    library().set_dynamic_shapes(mode)


def compile_stats():
    """What the engine has built: a dict of specialized_programs, generic_programs,
    specialized_compiles, generic_compiles, generic_bindings and generic_fallbacks."""
    from ._capi import library
    return library().compile_stats()


def reset_compile_stats():
    """Zeroes the compile counters and forgets the sizes the dynamic-shape policy has seen."""
    from ._capi import library
    library().reset_compile_stats()


__all__ = [
    "AdjointError", "InvalidArgumentError", "Program", "TensorInfo", "clear_cache",
    "compile_stats", "reset_compile_stats", "set_dynamic_shapes",
    "grid_sampler_2d_backward", "grid_sampler_3d_backward", "library_path", "load_package",
    "locate_library", "mhc_post", "mhc_post_backward", "mhc_pre_backward", "mhc_sinkhorn",
    "mhc_sinkhorn_backward", "prepare", "run", "set_jit_enabled", "spec",
    "upsample_nearest1d_backward", "upsample_nearest2d_backward",
    "upsample_nearest3d_backward", "_upsample_nearest_exact1d_backward",
    "_upsample_nearest_exact2d_backward", "_upsample_nearest_exact3d_backward",
    "upsample_nearest_exact1d_backward", "upsample_nearest_exact2d_backward",
    "upsample_nearest_exact3d_backward", "version",
]
