"""Describing framework tensors to libadjoint: dtypes, memory layouts and adjoint_tensor structs.

Tensors are read through the small interface PyTorch tensors have (`dtype`, `shape`,
`stride()`, `data_ptr()`, `device`), and dtypes are recognised by their printed name
("torch.float16"), so this module imports no framework and is testable without one.

Layouts: a specialization names the memory layout of its tensors ("contiguous", or
"channels_last": N, spatial..., C innermost). Strides of dimensions of size 1 never change an
address, so they are ignored when a layout is recognised and replaced by the expected ones when
a tensor is handed to the library (PyTorch leaves them arbitrary).
"""

from ._capi import MAX_RANK, AdjointTensor
from .errors import InvalidArgumentError


class DType:
    """One element type: its adjoint_dtype code, specialization spelling and size in bytes."""

    __slots__ = ("code", "name", "torch_name", "itemsize")

    def __init__(self, code, name, torch_name, itemsize):
        self.code = code
        self.name = name
        self.torch_name = torch_name
        self.itemsize = itemsize

    def __repr__(self):
        return "DType(%s)" % self.name


DTYPES = [
    DType(0, "f16", "float16", 2),
    DType(1, "bf16", "bfloat16", 2),
    DType(2, "f32", "float32", 4),
    DType(3, "f64", "float64", 8),
    DType(4, "i32", "int32", 4),
    DType(5, "i64", "int64", 8),
    DType(6, "bool", "bool", 1),
]
DTYPE_BY_CODE = {d.code: d for d in DTYPES}
DTYPE_BY_NAME = {d.name: d for d in DTYPES}
DTYPE_BY_TORCH_NAME = {d.torch_name: d for d in DTYPES}
# PyTorch also prints these aliases.
DTYPE_BY_TORCH_NAME.update({"half": DTYPE_BY_NAME["f16"], "float": DTYPE_BY_NAME["f32"],
                            "double": DTYPE_BY_NAME["f64"]})
FLOAT_DTYPES = ("f16", "bf16", "f32", "f64")


def dtype_of(tensor, argument, allowed=FLOAT_DTYPES):
    """The DType of `tensor`; InvalidArgumentError naming `argument` if it is not `allowed`."""
    text = str(getattr(tensor, "dtype", None))
    found = DTYPE_BY_TORCH_NAME.get(text[len("torch."):] if text.startswith("torch.") else text)
    if found is None or found.name not in allowed:
        raise InvalidArgumentError("%s: expected dtype %s, got %s"
                                   % (argument, " or ".join(allowed), text))
    return found


def contiguous_strides(shape):
    """Row-major strides, in elements."""
    strides = [0] * len(shape)
    step = 1
    for axis in reversed(range(len(shape))):
        strides[axis] = step
        step *= max(shape[axis], 1)
    return tuple(strides)


def channels_last_strides(shape):
    """Strides of N, C, spatial... stored as N, spatial..., C (PyTorch's channels_last and
    channels_last_3d); rank 4 or 5."""
    if len(shape) not in (4, 5):
        raise ValueError("channels_last needs rank 4 or 5, got shape %s" % (tuple(shape),))
    order = [1] + list(range(len(shape) - 1, 1, -1)) + [0]  # innermost first: C, W, H, (D,) N
    strides = [0] * len(shape)
    step = 1
    for axis in order:
        strides[axis] = step
        step *= max(shape[axis], 1)
    return tuple(strides)


LAYOUT_STRIDES = {"contiguous": contiguous_strides, "channels_last": channels_last_strides}


def same_addressing(shape, strides, expected_strides):
    """True when the strides address every element as `expected_strides` does: they agree on
    every dimension of size > 1 (any tensor with no elements qualifies)."""
    if any(size == 0 for size in shape):
        return True
    return all(size == 1 or s == e for size, s, e in zip(shape, strides, expected_strides))


def overlaps_itself(shape, strides):
    """True when two indices may address the same element (an expanded tensor, stride 0, or
    interleaved strides): with dimensions of size > 1 ordered by stride, each stride must
    exceed the extent of the smaller ones."""
    dims = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    if any(n == 0 for n in shape):
        return False
    extent = 0
    for stride, size in dims:
        if stride <= extent:
            return True
        extent += stride * (size - 1)
    return False


def shape_of(tensor):
    return tuple(int(size) for size in tensor.shape)


def strides_of(tensor):
    return tuple(int(stride) for stride in tensor.stride())


def layout_of(tensor, argument, allowed=("contiguous", "channels_last")):
    """The layout name among `allowed` that `tensor`'s strides follow (contiguous first when
    both do); InvalidArgumentError naming `argument` when none does."""
    shape, strides = shape_of(tensor), strides_of(tensor)
    for layout in allowed:
        if layout == "channels_last" and len(shape) not in (4, 5):
            continue
        if same_addressing(shape, strides, LAYOUT_STRIDES[layout](shape)):
            return layout
    raise InvalidArgumentError(
        "%s: strides %s of shape %s are not %s; make it so with .contiguous()%s"
        % (argument, strides, shape, " or ".join(allowed),
           " or .contiguous(memory_format=torch.channels_last)"
           if "channels_last" in allowed and len(shape) in (4, 5) else ""))


def require_rank(tensor, argument, rank):
    shape = shape_of(tensor)
    if len(shape) != rank:
        raise InvalidArgumentError("%s: expected a %d-d tensor, got shape %s"
                                   % (argument, rank, shape))
    return shape


def describe(tensor, expected, argument, op):
    """The adjoint_tensor for `tensor` bound as `argument` of a program whose specialization
    expects `expected` (a TensorInfo). Raises InvalidArgumentError naming the op and tensor when
    the dtype, shape or strides differ."""
    dtype = dtype_of(tensor, "%s: tensor '%s'" % (op, argument), allowed=tuple(DTYPE_BY_NAME))
    if dtype.name != expected.dtype:
        raise InvalidArgumentError("%s: tensor '%s' expected dtype %s, got %s"
                                   % (op, argument, expected.dtype, dtype.name))
    shape = shape_of(tensor)
    if shape != expected.shape:
        raise InvalidArgumentError("%s: tensor '%s' expected shape %s, got %s"
                                   % (op, argument, expected.shape, shape))
    strides = strides_of(tensor)
    if not same_addressing(shape, strides, expected.strides):
        if overlaps_itself(shape, strides):
            raise InvalidArgumentError(
                "%s: tensor '%s' overlaps itself (shape %s, strides %s: several indices share "
                "one address, as after .expand()); pass one with its own memory, e.g. "
                ".contiguous()" % (op, argument, shape, strides))
        raise InvalidArgumentError("%s: tensor '%s' expected strides %s, got %s"
                                   % (op, argument, expected.strides, strides))
    if len(shape) > MAX_RANK:
        raise InvalidArgumentError("%s: tensor '%s' has rank %d > %d"
                                   % (op, argument, len(shape), MAX_RANK))
    descriptor = AdjointTensor()
    descriptor.data = tensor.data_ptr()
    descriptor.dtype = dtype.code
    descriptor.rank = len(shape)
    for axis, size in enumerate(shape):
        descriptor.shape[axis] = size
        descriptor.strides[axis] = expected.strides[axis]
    return descriptor
