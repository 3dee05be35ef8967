"""GPU parity of the upsample_nearest backward family (issue 5) against PyTorch.

Reference: the exact adjoint of PyTorch's own forward. The forward is run on a tensor holding
each input element's flat index, which yields the source index of every output element
exactly as PyTorch's CUDA forward computes it; grad_output is then summed into those indices in
f64 (index_add_). adjoint must match it within harness.SUM_TOL. PyTorch's backward kernel is
compared too: adjoint must agree with it at every element where PyTorch's backward is itself
the adjoint of its forward; elements where it is not are counted and recorded, not hidden.

Cases: the seed matrix (3 shapes x 3 scale pairs x scales passed or derived x f16/f32/bf16, for
nearest and nearest-exact: 108 cases), 1d and 3d, channels_last (2d and 3d), sizes of 1, an
empty batch, prime sizes, output equal to input, f64, and a grad_output over 2^31 elements
(64-bit indexing; skipped where the GPU lacks the memory). Determinism: bitwise equal over
three runs, and every program of the family must claim it.
"""

import math

import harness
import pytest
from harness import DEVICE, DTYPES, adjoint, torch

ATEN_FORWARD = {
    (1, False): torch.ops.aten.upsample_nearest1d,
    (2, False): torch.ops.aten.upsample_nearest2d,
    (3, False): torch.ops.aten.upsample_nearest3d,
    (1, True): torch.ops.aten._upsample_nearest_exact1d,
    (2, True): torch.ops.aten._upsample_nearest_exact2d,
    (3, True): torch.ops.aten._upsample_nearest_exact3d,
}
ATEN_BACKWARD = {
    (1, False): torch.ops.aten.upsample_nearest1d_backward,
    (2, False): torch.ops.aten.upsample_nearest2d_backward,
    (3, False): torch.ops.aten.upsample_nearest3d_backward,
    (1, True): torch.ops.aten._upsample_nearest_exact1d_backward,
    (2, True): torch.ops.aten._upsample_nearest_exact2d_backward,
    (3, True): torch.ops.aten._upsample_nearest_exact3d_backward,
}
ADJOINT = {
    (1, False): adjoint.upsample_nearest1d_backward,
    (2, False): adjoint.upsample_nearest2d_backward,
    (3, False): adjoint.upsample_nearest3d_backward,
    (1, True): adjoint._upsample_nearest_exact1d_backward,
    (2, True): adjoint._upsample_nearest_exact2d_backward,
    (3, True): adjoint._upsample_nearest_exact3d_backward,
}


class Case:
    """One call: input_size (N, C, spatial...), output_size (spatial), scales (None = derived)."""

    def __init__(self, input_size, output_size, scales, dtype, exact, channels_last=False):
        self.input_size = list(input_size)
        self.output_size = list(output_size)
        self.scales = list(scales)
        self.dtype = dtype
        self.exact = exact
        self.channels_last = channels_last
        self.rank = len(output_size)

    @property
    def key(self):
        return (self.rank, self.exact)

    @property
    def output_shape(self):
        return self.input_size[:2] + self.output_size

    @property
    def memory_format(self):
        if not self.channels_last:
            return None
        return torch.channels_last if self.rank == 2 else torch.channels_last_3d

    def spec(self):
        return adjoint.spec.upsample_nearest_backward(
            self.rank, self.exact, self.dtype, self.input_size, self.output_size, self.scales,
            "channels_last" if self.channels_last else "contiguous")

    def __repr__(self):
        return "%s%s %s %s->%s scales=%s%s" % (
            "exact" if self.exact else "nearest", self.rank, self.dtype, self.input_size,
            self.output_size, self.scales, " channels_last" if self.channels_last else "")


def seed_matrix():
    cases = []
    for shape in [(1, 1, 4, 4), (2, 3, 32, 32), (1, 4, 128, 128)]:
        for scales in [(2.0, 2.0), (1.5, 0.75), (0.5, 0.5)]:
            output_size = [int(math.floor(size * scale)) for size, scale in zip(shape[2:], scales)]
            for passed in (True, False):
                for dtype in ("f16", "f32", "bf16"):
                    for exact in (False, True):
                        cases.append(Case(shape, output_size, scales if passed else (None, None),
                                          dtype, exact))
    return cases


def extra_cases():
    cases = []
    for exact in (False, True):
        cases += [
            # 1d
            Case((2, 3, 7), (17,), (None,), "f32", exact),
            Case((4, 16, 100), (200,), (2.0,), "f16", exact),
            Case((2, 8, 13), (5,), (None,), "bf16", exact),
            Case((3, 2, 11), (29,), (2.7,), "f64", exact),
            # 3d, contiguous and channels_last
            Case((1, 2, 3, 4, 5), (6, 7, 3), (None, None, None), "f32", exact),
            Case((2, 4, 8, 8, 8), (16, 16, 16), (2.0, 2.0, 2.0), "bf16", exact),
            Case((1, 8, 5, 6, 7), (3, 9, 14), (None, None, None), "f16", exact, True),
            Case((2, 3, 4, 5, 6), (7, 5, 3), (1.75, None, 0.5), "f32", exact, True),
            # channels_last 2d
            Case((2, 8, 13, 17), (20, 9), (None, None), "f16", exact, True),
            Case((4, 16, 32, 32), (64, 64), (2.0, 2.0), "bf16", exact, True),
            Case((1, 3, 31, 29), (47, 13), (1.5, 0.45), "f32", exact, True),
            # sizes of 1, an empty batch
            Case((1, 1, 1, 1), (1, 1), (None, None), "f32", exact),
            Case((1, 3, 1, 5), (4, 1), (None, None), "f16", exact),
            Case((2, 1, 1, 1), (7, 9), (None, None), "bf16", exact),
            Case((1, 5, 9, 1), (1, 8), (None, None), "f32", exact, True),
            Case((0, 3, 4, 4), (8, 8), (None, None), "f32", exact),
            # primes, output equal to input, f64
            Case((3, 5, 17, 31), (13, 37), (None, None), "f32", exact),
            Case((2, 7, 31, 29), (97, 101), (None, None), "bf16", exact),
            Case((2, 3, 16, 16), (16, 16), (None, None), "f16", exact),
            Case((2, 3, 16, 16), (16, 16), (1.0, 1.0), "f32", exact),
            Case((1, 2, 19, 23), (41, 11), (None, None), "f64", exact),
        ]
    return cases


def forward_adjoint(case, grad_output):
    """(reference, sum of |terms|): grad_output summed in f64 into the source index PyTorch's
    forward reads for each output element."""
    spatial_in = case.input_size[2:]
    batch_channels = case.input_size[0] * case.input_size[1]
    numel_in = math.prod(spatial_in)
    index = torch.arange(numel_in, dtype=torch.float64, device=DEVICE).reshape(1, 1, *spatial_in)
    source = ATEN_FORWARD[case.key](index, case.output_size, *case.scales).reshape(-1).long()
    numel_out = math.prod(case.output_size)
    flat = grad_output.double().contiguous().reshape(batch_channels, numel_out)
    reference = torch.zeros(batch_channels, numel_in, dtype=torch.float64, device=DEVICE)
    abs_sum = torch.zeros_like(reference)
    reference.index_add_(1, source, flat)
    abs_sum.index_add_(1, source, flat.abs())
    return reference.reshape(case.input_size), abs_sum.reshape(case.input_size)


def check_case(case, seed):
    grad_output = harness.random_tensor(case.output_shape, DTYPES[case.dtype], seed,
                                        memory_format=case.memory_format)
    actual = ADJOINT[case.key](grad_output, case.output_size, case.input_size, *case.scales)
    assert actual.shape == tuple(case.input_size)
    assert actual.dtype == DTYPES[case.dtype]
    if case.channels_last:
        assert actual.is_contiguous(memory_format=case.memory_format), \
            "%s: grad_input strides %s are not channels_last" % (case, actual.stride())
    else:
        assert actual.is_contiguous(), "%s: grad_input strides %s" % (case, actual.stride())

    reference, abs_sum = forward_adjoint(case, grad_output)
    worst = harness.check_sum_bound(repr(case), actual, reference, abs_sum, case.dtype)

    # PyTorch's backward kernel: adjoint must agree wherever PyTorch agrees with its forward.
    torch_result = ATEN_BACKWARD[case.key](grad_output, case.output_size, case.input_size,
                                           *case.scales)
    bound = abs_sum * harness.SUM_TOL[case.dtype] + torch.finfo(DTYPES[case.dtype]).tiny
    torch_is_adjoint = (torch_result.double() - reference).abs() <= bound
    agrees = (actual.double() - torch_result.double()).abs() <= 2 * bound
    unexplained = int((~agrees & torch_is_adjoint).sum())
    torch_inconsistent = int((~torch_is_adjoint).sum())
    harness.record("upsample_nearest", repr(case), worst_error_over_bound=worst,
                   torch_backward_not_adjoint_elements=torch_inconsistent,
                   disagreements_with_torch=int((~agrees).sum()))
    assert unexplained == 0, ("%s: %d elements differ from PyTorch's backward where PyTorch's "
                              "backward is the adjoint of its forward" % (case, unexplained))


@pytest.mark.parametrize("case", seed_matrix(), ids=repr)
def test_seed_matrix(case):
    check_case(case, seed=11)


@pytest.mark.parametrize("case", extra_cases(), ids=repr)
def test_shapes_layouts_dtypes(case):
    check_case(case, seed=23)


DETERMINISM_CASES = [
    Case((2, 3, 32, 32), (64, 64), (2.0, 2.0), "f16", False),
    Case((1, 4, 128, 128), (192, 96), (1.5, 0.75), "bf16", True),
    Case((4, 16, 32, 32), (48, 40), (None, None), "bf16", False, True),
    Case((2, 4, 8, 8, 8), (16, 12, 5), (None, None, None), "f32", True),
    Case((4, 16, 100), (333,), (None,), "f16", False),
]


@pytest.mark.parametrize("case", DETERMINISM_CASES, ids=repr)
def test_deterministic(case):
    grad_output = harness.random_tensor(case.output_shape, DTYPES[case.dtype], 5,
                                        memory_format=case.memory_format)
    claims = harness.check_deterministic(
        case.spec(),
        lambda: (ADJOINT[case.key](grad_output, case.output_size, case.input_size,
                                   *case.scales),))
    harness.record("determinism", repr(case), claims=claims, bitwise_equal_runs=3 if claims else 0)
    assert claims, "%s: the program does not claim determinism (it must: no atomics)" % case


def test_over_two_to_the_31_elements():
    """grad_output of 2 x 32770 x 32768 f16 values (> 2^31): offsets need 64 bits."""
    input_size, output_size = [1, 2, 16385, 16384], [32770, 32768]
    numel_out = 2 * 32770 * 32768
    assert numel_out > 2 ** 31
    needed = numel_out * 2 * 2 + math.prod(input_size) * (2 * 3 + 8 * 3)
    free, _ = torch.cuda.mem_get_info()
    if free < needed * 1.2:
        pytest.skip("needs %.1f GiB of free GPU memory, %.1f free" % (needed / 2 ** 30,
                                                                      free / 2 ** 30))
    grad_output = torch.randn(input_size[:2] + output_size, generator=harness.seeded(3),
                              device=DEVICE, dtype=torch.float16)
    actual = adjoint.upsample_nearest2d_backward(grad_output, output_size, input_size)
    reference = torch.ops.aten.upsample_nearest2d_backward(grad_output, output_size, input_size)
    abs_sum = torch.ops.aten.upsample_nearest2d_backward(grad_output.abs(), output_size,
                                                         input_size)
    del grad_output
    worst = 0.0
    for channel in range(input_size[1]):  # per channel, to bound the f64 temporaries
        worst = max(worst, harness.check_sum_bound(
            "over 2^31 elements, channel %d" % channel, actual[:, channel],
            reference[:, channel], 2 * abs_sum[:, channel].float(), "f16"))  # two roundings
    harness.record("upsample_nearest", "nearest2d f16 [1,2,16385,16384]->[32770,32768] (>2^31)",
                   worst_error_over_bound=worst)


def strided_views(shape, dtype):
    """grad_outputs of `shape` that are not in a layout, each with its contiguous copy: a slice
    of every other row with padded rows, two permutations that are not channels_last, and one that
    starts one element past an aligned address (vector loads must fall back)."""
    n, c, h, w = shape
    base = torch.randn(n, c, 2 * h, w + 3, device=DEVICE).to(dtype)
    yield "every other row, padded", base[:, :, ::2, 1:w + 1]
    yield "w outermost", torch.randn(n, w, c, h, device=DEVICE).to(dtype).permute(0, 2, 3, 1)
    yield "h and w swapped", torch.randn(n, c, w, h, device=DEVICE).to(dtype).transpose(2, 3)
    flat = torch.randn(n * c * h * w + 1, device=DEVICE).to(dtype)
    yield "one element past alignment", flat[1:].view(n, c, h, w)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_strided_grad_output_is_read_in_place(dtype):
    """A grad_output of other strides gets its own specialization (grad_output_strides) and
    gives bit for bit the gradients of its contiguous copy, and PyTorch's within rounding."""
    input_size, output_size = [2, 5, 13, 16], [27, 32]
    for what, grad_output in strided_views([2, 5] + output_size, DTYPES[dtype]):
        program = adjoint.ops._prepare_upsample_backward(2, False, grad_output, output_size,
                                                         input_size, [None, None])
        if not grad_output.is_contiguous():
            assert "grad_output_strides=" in program.spec, (what, program.spec)
        got = adjoint.upsample_nearest2d_backward(grad_output, output_size, input_size)
        want = adjoint.upsample_nearest2d_backward(grad_output.contiguous(), output_size,
                                                   input_size)
        assert torch.equal(got, want), what
        torch_result = torch.ops.aten.upsample_nearest2d_backward(grad_output, output_size,
                                                                  input_size)
        torch.testing.assert_close(got.float(), torch_result.float(), rtol=2e-2, atol=2e-2)
