"""Specialization texts: the "op key=value ..." strings of ops/registry.h, built from typed
Python values.

The library parses, validates and canonicalizes these texts (attributes in schema order,
defaults filled in); the texts built here only have to parse, and are also the keys of the
binding's program cache, so equal calls must build equal texts. Each builder checks what it can
without the library and raises InvalidArgumentError naming the argument.
"""

import math
import numbers

from .errors import InvalidArgumentError

INTERPOLATION_MODES = ("bilinear", "nearest", "bicubic")  # ATen's ints 0, 1, 2
PADDING_MODES = ("zeros", "border", "reflection")  # ATen's ints 0, 1, 2
SPATIAL_SCALE_NAMES = {1: ("scales",), 2: ("scales_h", "scales_w"),
                       3: ("scales_d", "scales_h", "scales_w")}


def format_int(value, argument):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        try:
            index = value.__index__()  # e.g. a 0-d integer tensor or numpy integer
        except (AttributeError, TypeError):
            raise InvalidArgumentError("%s: expected an integer, got %r" % (argument, value)) from None
        value = index
    return str(int(value))


def format_ints(values, argument, length=None):
    """"8,64,128,128"; `length`, if given, is the number of values required."""
    try:
        items = list(values)
    except TypeError:
        raise InvalidArgumentError("%s: expected a list of integers, got %r"
                                   % (argument, values)) from None
    if length is not None and len(items) != length:
        raise InvalidArgumentError("%s: expected %d values, got %d (%r)"
                                   % (argument, length, len(items), items))
    return ",".join(format_int(v, argument) for v in items)


def format_float(value, argument):
    """The shortest text that reads back as the same double (integral values without '.0',
    like the library's own std::to_chars spelling)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError("%s: expected a number, got %r" % (argument, value))
    value = float(value)
    if not math.isfinite(value):
        raise InvalidArgumentError("%s: expected a finite number, got %r" % (argument, value))
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def format_optional_scale(value, argument):
    """A forward scale factor: 'none' when not given, or, as in ATen, when <= 0 or NaN."""
    if value is None:
        return "none"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError("%s: expected a number or None, got %r" % (argument, value))
    if math.isnan(value) or value <= 0:
        return "none"
    return format_float(value, argument)


def format_bool(value):
    return "true" if value else "false"


def make(op, attributes):
    """"op k=v ..." in the given order; values are already formatted texts."""
    return " ".join([op] + ["%s=%s" % (key, value) for key, value in attributes])


def upsample_nearest_op_name(spatial_rank, exact):
    if spatial_rank not in (1, 2, 3):
        raise InvalidArgumentError("spatial rank must be 1, 2 or 3, got %r" % (spatial_rank,))
    if exact:
        return "_upsample_nearest_exact%dd_backward" % spatial_rank
    return "upsample_nearest%dd_backward" % spatial_rank


def upsample_nearest_backward(spatial_rank, exact, dtype, input_size, output_size, scales,
                              layout="contiguous", strides=None):
    """The specialization of upsample_nearest{1,2,3}d_backward (or the nearest-exact one):
    `input_size` is N, C, spatial... of grad_input, `output_size` the spatial sizes of
    grad_output, `scales` one optional forward scale factor per spatial axis, `strides`
    {"grad_output": strides} to read a grad_output of other strides in place."""
    op = upsample_nearest_op_name(spatial_rank, exact)
    names = SPATIAL_SCALE_NAMES[spatial_rank]
    if len(scales) != spatial_rank:
        raise InvalidArgumentError("%s: expected %d scales (%s), got %d"
                                   % (op, spatial_rank, ", ".join(names), len(scales)))
    attributes = [
        ("dtype", dtype),
        ("input_size", format_ints(input_size, "input_size", spatial_rank + 2)),
        ("output_size", format_ints(output_size, "output_size", spatial_rank)),
    ]
    attributes += [(name, format_optional_scale(scale, name)) for name, scale in zip(names, scales)]
    if layout != "contiguous":
        attributes.append(("layout", layout))
    return make(op, attributes + input_strides_attributes(strides, ("grad_output",)))


def input_strides_attributes(strides, tensors):
    """The <tensor>_strides attributes of `strides` ({tensor name: strides}, or None) for an
    op whose inputs are `tensors` (ops/input_strides.h): read in place with those strides."""
    strides = strides or {}
    unknown = sorted(set(strides) - set(tensors))
    if unknown:
        raise InvalidArgumentError("strides: no input named %s; expected %s"
                                   % (", ".join(unknown), ", ".join(tensors)))
    return [(name + "_strides", format_ints(strides[name], name + "_strides"))
            for name in tensors if strides.get(name) is not None]


def _choice(value, choices, argument):
    """An ATen mode given as its int (index into `choices`) or as the attribute string."""
    if isinstance(value, str):
        if value in choices:
            return value
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if 0 <= int(value) < len(choices):
            return choices[int(value)]
    raise InvalidArgumentError("%s: expected one of %s (or 0..%d as in ATen), got %r"
                               % (argument, ", ".join(choices), len(choices) - 1, value))


def interpolation_mode_name(value):
    return _choice(value, INTERPOLATION_MODES, "interpolation_mode")


def padding_mode_name(value):
    return _choice(value, PADDING_MODES, "padding_mode")


def output_mask_values(output_mask):
    try:
        mask = [bool(m) for m in output_mask]
    except TypeError:
        raise InvalidArgumentError("output_mask: expected two booleans, got %r"
                                   % (output_mask,)) from None
    if len(mask) != 2:
        raise InvalidArgumentError("output_mask: expected two booleans, got %r" % (output_mask,))
    return mask


GRID_SAMPLER_INPUTS = ("grad_output", "input", "grid")


def grid_sampler_2d_backward(dtype, input_size, output_size, interpolation_mode, padding_mode,
                             align_corners, output_mask, strides=None):
    """The specialization of grid_sampler_2d_backward: `input_size` N, C, H, W of the input,
    `output_size` H_out, W_out of the grid; modes as ATen ints or attribute strings."""
    mask = output_mask_values(output_mask)
    return make("grid_sampler_2d_backward", [
        ("dtype", dtype),
        ("input_size", format_ints(input_size, "input_size", 4)),
        ("output_size", format_ints(output_size, "output_size", 2)),
        ("interpolation_mode", interpolation_mode_name(interpolation_mode)),
        ("padding_mode", padding_mode_name(padding_mode)),
        ("align_corners", format_bool(align_corners)),
        ("output_mask", ",".join("1" if m else "0" for m in mask)),
    ] + input_strides_attributes(strides, GRID_SAMPLER_INPUTS))


def grid_sampler_3d_backward(dtype, input_size, output_size, interpolation_mode, padding_mode,
                             align_corners, output_mask, strides=None):
    """The specialization of grid_sampler_3d_backward: `input_size` N, C, D, H, W of the input,
    `output_size` D_out, H_out, W_out of the grid; modes as ATen ints or attribute strings
    (bilinear, i.e. trilinear, or nearest: ATen has no 3-d bicubic)."""
    mode = interpolation_mode_name(interpolation_mode)
    if mode == "bicubic":
        raise InvalidArgumentError("interpolation_mode: bicubic (2) is 2-d only; "
                                   "grid_sampler_3d_backward takes bilinear (0) or nearest (1)")
    mask = output_mask_values(output_mask)
    return make("grid_sampler_3d_backward", [
        ("dtype", dtype),
        ("input_size", format_ints(input_size, "input_size", 5)),
        ("output_size", format_ints(output_size, "output_size", 3)),
        ("interpolation_mode", mode),
        ("padding_mode", padding_mode_name(padding_mode)),
        ("align_corners", format_bool(align_corners)),
        ("output_mask", ",".join("1" if m else "0" for m in mask)),
    ] + input_strides_attributes(strides, GRID_SAMPLER_INPUTS))


def mhc_pre_backward(batch, seq, n, dim, dtype, hc_eps, with_grad_x_post):
    """The specialization of mhc_pre_backward (attributes as in ops/mhc.h)."""
    return make("mhc_pre_backward", [
        ("batch", format_int(batch, "batch")),
        ("seq", format_int(seq, "seq")),
        ("n", format_int(n, "n")),
        ("dim", format_int(dim, "dim")),
        ("dtype", dtype),
        ("hc_eps", format_float(hc_eps, "hc_eps")),
        ("with_grad_x_post", format_bool(with_grad_x_post)),
    ])


def mhc_pre(batch, seq, n, dim, dtype, norm_eps, hc_eps):
    """The specialization of the mhc_pre forward (attributes as in ops/mhc.h)."""
    return make("mhc_pre", [
        ("batch", format_int(batch, "batch")),
        ("seq", format_int(seq, "seq")),
        ("n", format_int(n, "n")),
        ("dim", format_int(dim, "dim")),
        ("dtype", dtype),
        ("norm_eps", format_float(norm_eps, "norm_eps")),
        ("hc_eps", format_float(hc_eps, "hc_eps")),
    ])


def _mhc_shape(batch, seq, n, dim=None):
    items = [("batch", format_int(batch, "batch")), ("seq", format_int(seq, "seq")),
             ("n", format_int(n, "n"))]
    if dim is not None:
        items.append(("dim", format_int(dim, "dim")))
    return items


def mhc_post(batch, seq, n, dim, dtype, backward=False):
    """The specialization of mhc_post or mhc_post_backward (attributes as in ops/mhc_post.h)."""
    op = "mhc_post_backward" if backward else "mhc_post"
    return make(op, _mhc_shape(batch, seq, n, dim) + [("dtype", dtype)])


def mhc_sinkhorn(batch, seq, n, t_max, eps, dtype, backward=False):
    """The specialization of mhc_sinkhorn or mhc_sinkhorn_backward (ops/mhc_sinkhorn.h)."""
    op = "mhc_sinkhorn_backward" if backward else "mhc_sinkhorn"
    return make(op, _mhc_shape(batch, seq, n) + [
        ("t_max", format_int(t_max, "t_max")),
        ("eps", format_float(eps, "eps")),
        ("dtype", dtype),
    ])
