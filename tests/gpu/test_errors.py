"""The error path on the GPU machine: bad arguments raise exceptions carrying the library's
message (op, argument, expected vs given), whether the binding or libadjoint finds them, and a
failed call leaves the library usable.
"""

import ctypes

import harness
import pytest
from harness import DEVICE, adjoint, torch

from adjoint import _capi
from adjoint.errors import AdjointError, InvalidArgumentError


def test_bad_shape_is_named_by_the_binding():
    grad_output = torch.zeros(2, 3, 64, 63, device=DEVICE)
    with pytest.raises(InvalidArgumentError, match=r"grad_output: expected shape "
                                                   r"\(2, 3, 64, 64\).*got \(2, 3, 64, 63\)"):
        adjoint.upsample_nearest2d_backward(grad_output, [64, 64], [2, 3, 32, 32])


def test_bad_spec_is_named_by_the_library():
    with pytest.raises(InvalidArgumentError) as caught:
        adjoint.prepare("upsample_nearest2d_backward dtype=f32 input_size=1,1,4 "
                        "output_size=8,8")
    assert "input_size" in str(caught.value)
    with pytest.raises(InvalidArgumentError) as caught:
        adjoint.prepare("upsample_nearest2d_backward dtype=i8 input_size=1,1,4,4 "
                        "output_size=8,8")
    assert "dtype" in str(caught.value)
    with pytest.raises(InvalidArgumentError) as caught:
        adjoint.prepare("no_such_op dtype=f32")
    message = str(caught.value)
    assert "no_such_op" in message and "upsample_nearest2d_backward" in message, \
        "the error should list the valid ops: %s" % message


def test_library_checks_what_it_is_given():
    """adjoint_launch itself rejects a tensor whose shape differs from the specialization's
    (bypassing the binding's own checks), naming the tensor."""
    program = adjoint.prepare("upsample_nearest2d_backward dtype=f32 input_size=1,2,4,4 "
                              "output_size=8,8")
    grad_output = torch.zeros(1, 2, 8, 8, device=DEVICE)
    grad_input = torch.empty(1, 2, 4, 4, device=DEVICE)
    descriptors = (_capi.AdjointTensor * 2)()
    for index, name in enumerate(program._names):
        tensor = grad_output if name == b"grad_output" else grad_input
        descriptors[index].data = tensor.data_ptr()
        descriptors[index].dtype = 2
        descriptors[index].rank = 4
        for axis in range(4):
            descriptors[index].shape[axis] = tensor.shape[axis]
            descriptors[index].strides[axis] = tensor.stride(axis)
    bad = [i for i, name in enumerate(program._names) if name == b"grad_output"][0]
    descriptors[bad].shape[3] = 9
    library = _capi.library()
    with pytest.raises(InvalidArgumentError, match="grad_output"):
        library.launch(program._handle, 2, program._names, descriptors,
                       torch.cuda.current_stream().cuda_stream)
    with pytest.raises(AdjointError):
        library.launch(program._handle, 1, program._names, descriptors, None)
    # Still usable afterwards.
    out = adjoint.upsample_nearest2d_backward(torch.ones(1, 2, 8, 8, device=DEVICE), [8, 8],
                                              [1, 2, 4, 4])
    torch.testing.assert_close(out, torch.full((1, 2, 4, 4), 4.0, device=DEVICE))
    assert ctypes.sizeof(_capi.AdjointTensor) == 8 + 4 + 4 + 8 * 8 * 2
    harness.record("errors", "library rejects a wrong shape at launch", ok=True)
