"""ATen-shaped entry points: the same names, argument names and order as the ATen ops they
mirror, on PyTorch CUDA tensors, queued on PyTorch's current stream.

Each function checks its arguments (ranks, shapes, dtypes, layouts; InvalidArgumentError naming
the argument), builds the specialization text from the tensors (spec.py), takes the Program
from the cache (program.py) and returns freshly allocated gradients in the layout the
specialization gives them (channels_last in, channels_last out).
"""

from . import _torch, spec
from .errors import InvalidArgumentError
from .program import call_cache, prepare
from .tensors import (dtype_of, layout_of, overlaps_itself, require_rank, shape_of,
                      strides_of)


def _int_list(values, argument):
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError):
        raise InvalidArgumentError("%s: expected a list of integers, got %r"
                                   % (argument, values)) from None


def _input_layout(tensor, argument, allowed):
    """(layout, strides) for input `tensor`: the layout among `allowed` its strides follow and
    None; or, for any other strides, "contiguous" and its strides, which the specialization
    then reads in place (attribute <tensor>_strides: compiled for those strides as for a
    shape, no copy). A tensor that overlaps itself (an .expand()ed one) is refused with an
    InvalidArgumentError naming `argument`."""
    try:
        return layout_of(tensor, argument, allowed), None
    except InvalidArgumentError:
        shape, strides = shape_of(tensor), strides_of(tensor)
        if overlaps_itself(shape, strides):
            raise InvalidArgumentError(
                "%s: overlaps itself (shape %s, strides %s: several indices share one "
                "address, as after .expand()); pass one with its own memory, e.g. "
                ".contiguous()" % (argument, shape, strides)) from None
        return "contiguous", strides


# (call signature) -> Program for calls already checked once: a warm call with an alike
# grad_output (same dtype, shape, strides, device) and the same sizes skips the argument checks
# and the spec text. The Program still compares every tensor it binds before each launch.
_programs_by_call = call_cache()


def _call_key(*parts):
    try:
        hash(parts)
    except TypeError:  # e.g. sizes given as a list of tensors: take the checked path
        return None
    return parts


def _upsample_backward(spatial_rank, exact, grad_output, output_size, input_size, scales):
    try:
        key = _call_key(spatial_rank, exact, tuple(output_size), tuple(input_size),
                        tuple(scales), grad_output.dtype, grad_output.shape,
                        grad_output.stride(), grad_output.device)
    except (AttributeError, TypeError):
        key = None
    entry = _programs_by_call.get(key) if key is not None else None
    if entry is None:
        entry = _prepare_upsample_backward(spatial_rank, exact, grad_output, output_size,
                                           input_size, scales)
        if key is not None:
            _programs_by_call[key] = entry
    return entry(grad_output=grad_output)["grad_input"]


def _prepare_upsample_backward(spatial_rank, exact, grad_output, output_size, input_size,
                               scales):
    op = spec.upsample_nearest_op_name(spatial_rank, exact)
    device = _torch.cuda_device_of(grad_output, "%s: grad_output" % op)
    dtype = dtype_of(grad_output, "%s: grad_output" % op)
    shape = require_rank(grad_output, "%s: grad_output" % op, spatial_rank + 2)
    output_size = _int_list(output_size, "%s: output_size" % op)
    input_size = _int_list(input_size, "%s: input_size" % op)
    for argument, values, length in (("output_size", output_size, spatial_rank),
                                     ("input_size", input_size, spatial_rank + 2)):
        if len(values) != length:
            raise InvalidArgumentError("%s: %s: expected %d values, got %s"
                                       % (op, argument, length, values))
    expected = tuple(input_size[:2] + output_size)
    if shape != expected:
        raise InvalidArgumentError(
            "%s: grad_output: expected shape %s (input_size[0:2] + output_size), got %s"
            % (op, expected, shape))
    layout, strides = _input_layout(
        grad_output, "%s: grad_output" % op,
        ("contiguous", "channels_last") if spatial_rank > 1 else ("contiguous",))
    text = spec.upsample_nearest_backward(spatial_rank, exact, dtype.name, input_size,
                                          output_size, scales, layout,
                                          {"grad_output": strides} if strides else None)
    return prepare(text, device=device)


def upsample_nearest1d_backward(grad_output, output_size, input_size, scales=None):
    """grad_input of nearest 1-d upsampling (ATen upsample_nearest1d_backward)."""
    return _upsample_backward(1, False, grad_output, output_size, input_size, [scales])


def upsample_nearest2d_backward(grad_output, output_size, input_size, scales_h=None,
                                scales_w=None):
    """grad_input of nearest 2-d upsampling (ATen upsample_nearest2d_backward)."""
    return _upsample_backward(2, False, grad_output, output_size, input_size,
                              [scales_h, scales_w])


def upsample_nearest3d_backward(grad_output, output_size, input_size, scales_d=None,
                                scales_h=None, scales_w=None):
    """grad_input of nearest 3-d upsampling (ATen upsample_nearest3d_backward)."""
    return _upsample_backward(3, False, grad_output, output_size, input_size,
                              [scales_d, scales_h, scales_w])


def _upsample_nearest_exact1d_backward(grad_output, output_size, input_size, scales=None):
    """grad_input of nearest-exact 1-d upsampling (ATen _upsample_nearest_exact1d_backward)."""
    return _upsample_backward(1, True, grad_output, output_size, input_size, [scales])


def _upsample_nearest_exact2d_backward(grad_output, output_size, input_size, scales_h=None,
                                       scales_w=None):
    """grad_input of nearest-exact 2-d upsampling (ATen _upsample_nearest_exact2d_backward)."""
    return _upsample_backward(2, True, grad_output, output_size, input_size,
                              [scales_h, scales_w])


def _upsample_nearest_exact3d_backward(grad_output, output_size, input_size, scales_d=None,
                                       scales_h=None, scales_w=None):
    """grad_input of nearest-exact 3-d upsampling (ATen _upsample_nearest_exact3d_backward)."""
    return _upsample_backward(3, True, grad_output, output_size, input_size,
                              [scales_d, scales_h, scales_w])


def _same_device_and_dtype(op, named_tensors):
    """The device and DType shared by every (name, tensor); errors name the odd one."""
    first_name, first = named_tensors[0]
    device = _torch.cuda_device_of(first, "%s: %s" % (op, first_name))
    dtype = dtype_of(first, "%s: %s" % (op, first_name))
    for name, tensor in named_tensors[1:]:
        other = _torch.cuda_device_of(tensor, "%s: %s" % (op, name))
        if _torch.device_index(other) != _torch.device_index(device):
            raise InvalidArgumentError("%s: %s is on %s, %s on %s"
                                       % (op, name, other, first_name, device))
        if dtype_of(tensor, "%s: %s" % (op, name)).name != dtype.name:
            raise InvalidArgumentError("%s: %s has dtype %s, %s has %s"
                                       % (op, name, tensor.dtype, first_name, first.dtype))
    return device, dtype


def grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                             align_corners, output_mask, determinism="default"):
    """(grad_input or None, grad_grid) of 2-d grid sampling (ATen grid_sampler_2d_backward).
    Modes as ATen's ints (interpolation 0 bilinear, 1 nearest, 2 bicubic; padding 0 zeros,
    1 border, 2 reflection) or those names; output_mask[0] false skips grad_input.
    determinism "default" is bitwise reproducible (grad_input as a binned gather);
    "allow_atomics" lets the compiler scatter grad_input with float atomics where they are the
    faster, at few channels (below 32 nearest, 16 bilinear, 8 bicubic), which varies from run
    to run; from those channels on it is the default's deterministic program (the program's
    `deterministic` says which)."""
    program = _grid_sampler_2d_backward_entry(grad_output, input, grid, interpolation_mode,
                                              padding_mode, align_corners, output_mask,
                                              determinism)
    outputs = program({"grad_output": grad_output, "input": input, "grid": grid})
    return outputs.get("grad_input"), outputs["grad_grid"]


def grid_sampler_2d_backward_program(grad_output, input, grid, interpolation_mode, padding_mode,
                                     align_corners, output_mask, determinism="default"):
    """The Program grid_sampler_2d_backward runs for these arguments (checked, memoized)."""
    return _grid_sampler_2d_backward_entry(grad_output, input, grid, interpolation_mode,
                                           padding_mode, align_corners, output_mask,
                                           determinism)


def _grid_sampler_2d_backward_entry(grad_output, input, grid, interpolation_mode, padding_mode,
                                    align_corners, output_mask, determinism="default"):
    """The Program for these arguments (checked once, then memoized by call signature)."""
    try:
        key = _call_key(grad_output.dtype, grad_output.shape, grad_output.stride(),
                        grad_output.device, input.dtype, input.shape, input.stride(),
                        input.device, grid.dtype, grid.shape, grid.stride(), grid.device,
                        interpolation_mode, padding_mode, bool(align_corners),
                        tuple(bool(m) for m in output_mask), determinism)
    except (AttributeError, TypeError):
        key = None
    entry = _grid_programs_by_call.get(key) if key is not None else None
    if entry is None:
        entry = _prepare_grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode,
                                                  padding_mode, align_corners, output_mask,
                                                  determinism)
        if key is not None:
            _grid_programs_by_call[key] = entry
    return entry


_grid_programs_by_call = call_cache()


def _strided_inputs(op, named):
    """{name: strides} of the (name, tensor) inputs that are not contiguous: the grid_sampler
    specializations read them in place."""
    strides = {}
    for name, tensor in named:
        given = _input_layout(tensor, "%s: %s" % (op, name), ("contiguous",))[1]
        if given is not None:
            strides[name] = given
    return strides


def _prepare_grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                                      align_corners, output_mask, determinism):
    op = "grid_sampler_2d_backward"
    named = [("grad_output", grad_output), ("input", input), ("grid", grid)]
    device, dtype = _same_device_and_dtype(op, named)
    out_shape = require_rank(grad_output, "%s: grad_output" % op, 4)
    in_shape = require_rank(input, "%s: input" % op, 4)
    grid_shape = require_rank(grid, "%s: grid" % op, 4)
    if grid_shape[3] != 2 or grid_shape[0] != in_shape[0]:
        raise InvalidArgumentError("%s: grid: expected shape (%d, H_out, W_out, 2), got %s"
                                   % (op, in_shape[0], grid_shape))
    expected = (in_shape[0], in_shape[1], grid_shape[1], grid_shape[2])
    if out_shape != expected:
        raise InvalidArgumentError("%s: grad_output: expected shape %s (N, C of input; H_out, "
                                   "W_out of grid), got %s" % (op, expected, out_shape))
    strides = _strided_inputs(op, named)
    text = spec.grid_sampler_2d_backward(dtype.name, in_shape, grid_shape[1:3],
                                         interpolation_mode, padding_mode, align_corners,
                                         output_mask, strides)
    return prepare(text, determinism, device=device)


def grid_sampler_3d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                             align_corners, output_mask, determinism="default"):
    """(grad_input or None, grad_grid) of 3-d grid sampling (ATen grid_sampler_3d_backward).
    Modes as ATen's ints (interpolation 0 bilinear, i.e. trilinear, 1 nearest; padding 0 zeros,
    1 border, 2 reflection) or those names; output_mask[0] false skips grad_input.
    determinism as in grid_sampler_2d_backward."""
    program = _grid_sampler_3d_backward_entry(grad_output, input, grid, interpolation_mode,
                                              padding_mode, align_corners, output_mask,
                                              determinism)
    outputs = program({"grad_output": grad_output, "input": input, "grid": grid})
    return outputs.get("grad_input"), outputs["grad_grid"]


def grid_sampler_3d_backward_program(grad_output, input, grid, interpolation_mode, padding_mode,
                                     align_corners, output_mask, determinism="default"):
    """The Program grid_sampler_3d_backward runs for these arguments (checked, memoized)."""
    return _grid_sampler_3d_backward_entry(grad_output, input, grid, interpolation_mode,
                                           padding_mode, align_corners, output_mask,
                                           determinism)


def _grid_sampler_3d_backward_entry(grad_output, input, grid, interpolation_mode, padding_mode,
                                    align_corners, output_mask, determinism="default"):
    """The Program for these arguments: a warm call skips the argument checks, the spec text and the library's lookup, as in 2-d."""
    try:
        key = _call_key(grad_output.dtype, grad_output.shape, grad_output.stride(),
                        grad_output.device, input.dtype, input.shape, input.stride(),
                        input.device, grid.dtype, grid.shape, grid.stride(), grid.device,
                        interpolation_mode, padding_mode, bool(align_corners),
                        tuple(bool(m) for m in output_mask), determinism)
    except (AttributeError, TypeError):
        key = None
    entry = _grid3d_programs_by_call.get(key) if key is not None else None
    if entry is None:
        entry = _prepare_grid_sampler_3d_backward(grad_output, input, grid, interpolation_mode,
                                                  padding_mode, align_corners, output_mask,
                                                  determinism)
        if key is not None:
            _grid3d_programs_by_call[key] = entry
    return entry


_grid3d_programs_by_call = call_cache()


def _prepare_grid_sampler_3d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                                      align_corners, output_mask, determinism):
    op = "grid_sampler_3d_backward"
    named = [("grad_output", grad_output), ("input", input), ("grid", grid)]
    device, dtype = _same_device_and_dtype(op, named)
    out_shape = require_rank(grad_output, "%s: grad_output" % op, 5)
    in_shape = require_rank(input, "%s: input" % op, 5)
    grid_shape = require_rank(grid, "%s: grid" % op, 5)
    if grid_shape[4] != 3 or grid_shape[0] != in_shape[0]:
        raise InvalidArgumentError("%s: grid: expected shape (%d, D_out, H_out, W_out, 3), got %s"
                                   % (op, in_shape[0], grid_shape))
    expected = (in_shape[0], in_shape[1]) + tuple(grid_shape[1:4])
    if out_shape != expected:
        raise InvalidArgumentError("%s: grad_output: expected shape %s (N, C of input; D_out, "
                                   "H_out, W_out of grid), got %s" % (op, expected, out_shape))
    strides = _strided_inputs(op, named)
    text = spec.grid_sampler_3d_backward(dtype.name, in_shape, grid_shape[1:4],
                                         interpolation_mode, padding_mode, align_corners,
                                         output_mask, strides)
    return prepare(text, determinism, device=device)


MHC_SAVED = ("x", "phi", "alpha", "grad_h_in", "grad_h_post", "grad_h_res", "inv_rms", "h_mix",
             "h_pre", "h_post", "gamma")


def mhc_pre_backward(x, phi, alpha, grad_h_in, grad_h_post, grad_h_res, inv_rms, h_mix, h_pre,
                     h_post, gamma, hc_eps=1e-6, grad_x_post=None):
    """(dx, dphi, dalpha, dbias, dgamma) of the mHC "pre" mapping (DESIGN.md, ops/mhc.h).
    x is [B, S, n, D] in the op's dtype; grad_x_post [B, S, n, D], if given, is added into dx.
    Token sums are deterministic."""
    op = "mhc_pre_backward"
    tensors = dict(zip(MHC_SAVED, (x, phi, alpha, grad_h_in, grad_h_post, grad_h_res, inv_rms,
                                   h_mix, h_pre, h_post, gamma)))
    if grad_x_post is not None:
        tensors["grad_x_post"] = grad_x_post
    device = _torch.cuda_device_of(x, "%s: x" % op)
    dtype = dtype_of(x, "%s: x" % op)
    batch, seq, n, dim = require_rank(x, "%s: x" % op, 4)
    tensors = _mhc_inputs(op, tensors)
    text = spec.mhc_pre_backward(batch, seq, n, dim, dtype.name, hc_eps, grad_x_post is not None)
    outputs = prepare(text, device=device)(tensors)
    return tuple(outputs[name] for name in ("dx", "dphi", "dalpha", "dbias", "dgamma"))


def _mhc_inputs(op, tensors):
    """The tensors an mHC program binds: each input as given when contiguous, else a contiguous
    copy (the mHC specializations are not specialized on strides yet); one that overlaps
    itself is refused with an InvalidArgumentError naming it."""
    bound = {}
    for name, tensor in tensors.items():
        _torch.cuda_device_of(tensor, "%s: %s" % (op, name))
        strides = _input_layout(tensor, "%s: %s" % (op, name), ("contiguous",))[1]
        bound[name] = tensor if strides is None else tensor.contiguous()
    return bound


def _mhc_call(op, text, device, tensors):
    return prepare(text, device=device)(_mhc_inputs(op, tensors))


def mhc_post(x, y, h_res, h_post):
    """out [B, S, n, D] = h_res . x + h_post (x) y per token (ops/mhc_post.h); x and y in the
    op's dtype, h_res [B, S, n, n] and h_post [B, S, n] f32 (f64 for f64)."""
    op = "mhc_post"
    device = _torch.cuda_device_of(x, "%s: x" % op)
    batch, seq, n, dim = require_rank(x, "%s: x" % op, 4)
    text = spec.mhc_post(batch, seq, n, dim, dtype_of(x, "%s: x" % op).name)
    tensors = {"x": x, "y": y, "h_res": h_res, "h_post": h_post}
    return _mhc_call(op, text, device, tensors)["out"]


def mhc_post_backward(grad_out, x, y, h_res, h_post):
    """(dx, dy, dh_res, dh_post) of mhc_post; every sum stays inside its token."""
    op = "mhc_post_backward"
    device = _torch.cuda_device_of(x, "%s: x" % op)
    batch, seq, n, dim = require_rank(x, "%s: x" % op, 4)
    text = spec.mhc_post(batch, seq, n, dim, dtype_of(x, "%s: x" % op).name, backward=True)
    tensors = {"x": x, "y": y, "h_res": h_res, "h_post": h_post, "grad_out": grad_out}
    outputs = _mhc_call(op, text, device, tensors)
    return tuple(outputs[name] for name in ("dx", "dy", "dh_res", "dh_post"))


def mhc_sinkhorn(h_res, t_max=20, eps=1e-6):
    """The Sinkhorn-Knopp projection of softmax(h_res) [B, S, n, n] (f32 or f64) onto doubly
    stochastic matrices, t_max row/column pairs (ops/mhc_sinkhorn.h)."""
    op = "mhc_sinkhorn"
    device = _torch.cuda_device_of(h_res, "%s: h_res" % op)
    batch, seq, n, _ = require_rank(h_res, "%s: h_res" % op, 4)
    text = spec.mhc_sinkhorn(batch, seq, n, t_max, eps, dtype_of(h_res, "%s: h_res" % op).name)
    return _mhc_call(op, text, device, {"h_res": h_res})["out"]


def mhc_sinkhorn_backward(grad_out, h_res, t_max=20, eps=1e-6):
    """grad_h_res of mhc_sinkhorn: the exact adjoint of its iterations, recomputed from h_res."""
    op = "mhc_sinkhorn_backward"
    device = _torch.cuda_device_of(h_res, "%s: h_res" % op)
    batch, seq, n, _ = require_rank(h_res, "%s: h_res" % op, 4)
    text = spec.mhc_sinkhorn(batch, seq, n, t_max, eps, dtype_of(h_res, "%s: h_res" % op).name,
                             backward=True)
    return _mhc_call(op, text, device, {"h_res": h_res, "grad_out": grad_out})["grad_h_res"]


__all__ = [
    "upsample_nearest1d_backward", "upsample_nearest2d_backward", "upsample_nearest3d_backward",
    "_upsample_nearest_exact1d_backward", "_upsample_nearest_exact2d_backward",
    "_upsample_nearest_exact3d_backward", "grid_sampler_2d_backward", "grid_sampler_3d_backward",
    "mhc_pre_backward", "mhc_post", "mhc_post_backward", "mhc_sinkhorn", "mhc_sinkhorn_backward",
]
