"""GPU parity of grid_sampler_2d_backward against torch.ops.aten.grid_sampler_2d_backward.

Reference: ATen's backward at the op's stated coordinate precision (ops/grid_sampler.h: f32
for f16/bf16/f32 data, f64 for f64) on the same dtype-rounded inputs, so both sides unnormalize
and clip the same coordinates; tolerance harness.NORM_TOL of the reference's max magnitude.
Grids reach outside [-1, 1] so every padding mode matters. Matrix: 3 interpolation modes x
3 paddings x align_corners x f16/bf16/f32/f64 on an odd-sized case, plus a denser case (many
grid points per input pixel, so scatter collisions are common) in f32 and bf16, output_mask
[False, True] (no grad_input), both determinism settings, and bitwise determinism for every
program that claims it; 32 channels on 64 x 64 cells (WIDE_CASES) reach the vectorized
channels-last gather with its fused store and grad_grid on lanes, and nearest at one record per
cell (NEAREST_WIDE_CASES) the same gather below 2 records per cell; small inputs under large grids
(SMALL_INPUT_CASES) the binned sort's sub-buckets; 3 and 4 channels on 2^15 cells
(FEW_CHANNEL_CASES) the bilinear gather that walks a cell's buckets once for all its channels
(whole-axis groups at 3) and writes grad_input itself (direct stores); empty batches, channels
and grids (EMPTY_CASES, test_empty_parity, into NaN-filled outputs). Edge cases (test_edge_parity): grids exactly on pixel centres, pixel
edges and +-1 and well outside [-1, 1] (special_grid, shared with the 3-d suite), on inputs of
size 1 in each axis, in every mode x padding x align_corners x dtype: there a one-sided
derivative taken on the other side of a pixel from ATen's shows as an O(1) grad_grid error.
"""

import random

import harness
import pytest
from harness import DEVICE, DTYPES, adjoint, torch

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")


class Case:
    def __init__(self, input_size, output_size, mode, padding, align_corners, dtype,
                 output_mask=(True, True), determinism="default"):
        self.input_size = list(input_size)
        self.output_size = list(output_size)
        self.mode = mode
        self.padding = padding
        self.align_corners = align_corners
        self.dtype = dtype
        self.output_mask = list(output_mask)
        self.determinism = determinism

    def spec(self):
        return adjoint.spec.grid_sampler_2d_backward(
            self.dtype, self.input_size, self.output_size, self.mode, self.padding,
            self.align_corners, self.output_mask)

    def __repr__(self):
        return "%s %s %s align=%s %s->%s mask=%s%s" % (
            self.mode, self.padding, self.dtype, self.align_corners, self.input_size,
            self.output_size, "".join("1" if m else "0" for m in self.output_mask),
            " atomics" if self.determinism == "allow_atomics" else "")

    def inputs(self, seed):
        n, c, h, w = self.input_size
        ho, wo = self.output_size
        dtype = DTYPES[self.dtype]
        grad_output = harness.random_tensor((n, c, ho, wo), dtype, seed)
        input = harness.random_tensor((n, c, h, w), dtype, seed + 1)
        grid = harness.random_tensor((n, ho, wo, 2), dtype, seed + 2, low=-1.15, high=1.15)
        return grad_output, input, grid


# 32 channels on 64 x 64 cells: the shapes of issue 10's kernels (channels-last gather with 4 f32
# or 8 bf16 channels per thread and its copy back fused, transposed_store.h; grad_grid on lanes
# over the channels, gathered_reduction_lanes.h).
WIDE_CASES = [Case((2, 32, 64, 64), (64, 64), mode, padding, False, dtype)
              for mode in ("bilinear", "bicubic") for padding in ("zeros", "border")
              for dtype in ("f32", "bf16")]

# Nearest at one record per cell with 32 channels: the channels-last gather that the binned pass
# takes from 4 channels on below 2 records per cell (BinnedGatherOptions::
# sparse_channels_last_min, ADJOINT_TUNE_BINNED_SPARSE_CHANNELS_LAST).
NEAREST_WIDE_CASES = [Case((2, 32, 64, 64), (64, 64), "nearest", padding, False, dtype)
                      for padding in ("zeros", "border") for dtype in ("f32", "bf16")]

# Small inputs sampled by large grids: thousands of records per input cell, so the binned sort
# cuts every bucket into id ranges (lower_scatter_to_binned_gather.h, "Sub-buckets").
SMALL_INPUT_CASES = [Case((2, 5, 3, 4), (96, 80), mode, padding, False, dtype)
                     for mode in MODES for padding in ("zeros", "border")
                     for dtype in ("f32", "bf16")]

# 3 channels on 2 x 128 x 128 cells (2^15 groups) and 2.25 records (points x 4 taps) per cell:
# bilinear's channels-last gather (taps in the gather, 0.55 records per walk) and its chunk sums
# take a cell's 3 channels per thread (vector_groups.h, whole-axis groups), as at 32x3x224^2,
# and the gather writes grad_input itself (transposed_store.h, direct stores), as it does at 4
# channels; bicubic (9 records per walk) keeps one thread per channel and the copy kernel.
FEW_CHANNEL_CASES = [Case((2, 3, 128, 128), (96, 96), mode, padding, False, dtype)
                     for mode in ("bilinear", "bicubic") for padding in ("zeros", "border")
                     for dtype in ("f32", "bf16")] + \
    [Case((2, 4, 128, 128), (96, 96), "bilinear", "zeros", False, dtype)
     for dtype in ("f32", "bf16")]


# Bicubic under border padding with as many points as cells and 3 channels: the binned gather
# takes its taps with clamped keys (compiler/binned_taps.h), the grid's points past the border
# binned at the edge keys and every edge element walking a range of them.
CLAMPED_TAP_CASES = [Case((2, 3, 128, 128), (128, 128), "bicubic", "border", align, dtype)
                     for align in (False, True) for dtype in ("f32", "bf16")]


# Empty batches, channels and grids, which ATen accepts (its input's spatial sizes may not be
# empty): nothing to compute, or zeros that adjoint must write into outputs it did not allocate
# zeroed (grad_input where no point reaches it, grad_grid where no channel adds to it).
EMPTY_CASES = [Case(input_size, output_size, mode, "border", False, dtype)
               for input_size, output_size in (((0, 3, 9, 11), (7, 5)), ((2, 0, 9, 11), (7, 5)),
                                               ((2, 3, 9, 11), (0, 5)), ((2, 3, 9, 11), (7, 0)))
               for mode in MODES for dtype in ("f32", "bf16")] + \
    [Case((2, 3, 9, 11), (0, 5), "bilinear", "zeros", False, "f32", determinism="allow_atomics")]


def matrix():
    cases = []
    for dtype in ("f16", "bf16", "f32", "f64"):
        for mode in MODES:
            for padding in PADDINGS:
                for align in (False, True):
                    cases.append(Case((2, 3, 9, 11), (7, 5), mode, padding, align, dtype))
    for dtype in ("f32", "bf16"):
        for mode in MODES:
            for padding in PADDINGS:
                cases.append(Case((2, 16, 12, 20), (40, 36), mode, padding, False, dtype))
    for case in (WIDE_CASES + NEAREST_WIDE_CASES + SMALL_INPUT_CASES + FEW_CHANNEL_CASES +
                 CLAMPED_TAP_CASES):
        cases.append(case)
    for mode in MODES:
        cases.append(Case((2, 4, 9, 7), (6, 10), mode, "border", True, "f32", (False, True)))
        cases.append(Case((2, 16, 12, 20), (40, 36), mode, "zeros", False, "f32",
                          determinism="allow_atomics"))
        cases.append(Case((2, 16, 12, 20), (40, 36), mode, "reflection", True, "f16",
                          determinism="allow_atomics"))
        # allow_atomics bins bilinear and bicubic at 16 channels (docs/compiler.md "Binned or
        # atomics"): at 5, below every mode's bound, the atomics run in every mode.
        cases.append(Case((2, 5, 12, 20), (40, 36), mode, "zeros", False, "f32",
                          determinism="allow_atomics"))
        cases.append(Case((2, 5, 12, 20), (40, 36), mode, "border", True, "bf16",
                          determinism="allow_atomics"))
    return cases


def reference(case, grad_output, input, grid):
    precision = torch.float64 if case.dtype == "f64" else torch.float32
    grad_input, grad_grid = torch.ops.aten.grid_sampler_2d_backward(
        grad_output.to(precision), input.to(precision), grid.to(precision),
        MODES.index(case.mode), PADDINGS.index(case.padding), case.align_corners,
        case.output_mask)
    return grad_input, grad_grid


def run_adjoint(case, grad_output, input, grid):
    if case.determinism == "default":  # the ATen-shaped entry point
        return adjoint.grid_sampler_2d_backward(grad_output, input, grid, MODES.index(case.mode),
                                                PADDINGS.index(case.padding), case.align_corners,
                                                case.output_mask)
    outputs = adjoint.run(case.spec(), {"grad_output": grad_output, "input": input, "grid": grid},
                          determinism=case.determinism)
    return outputs.get("grad_input"), outputs["grad_grid"]


@pytest.mark.parametrize("case", matrix(), ids=repr)
def test_parity(case):
    _parity(case)


def check_against_terms(name, actual, reference, tolerance, term_scale):
    """max|actual - reference| <= tolerance * max(max|reference|, term_scale); returns the error
    over that scale. As harness.check_normalized, except where a gradient cancels to about zero
    (bicubic on a single pixel with border or reflection padding: all 16 taps read that pixel
    and their slopes sum to 0 up to rounding): there both sides are rounding noise, judged
    against the size of one term (|input| * |grad_output|) instead of against the noise."""
    scale = max(reference.double().abs().max().item() if reference.numel() else 0.0, term_scale,
                1e-30)
    error = (actual.double() - reference.double()).abs()
    worst = error.max().item() / scale if error.numel() else 0.0
    if not worst <= tolerance:
        index = tuple(torch.nonzero(error == error.max())[0].tolist())
        pytest.fail("%s: max error %.3g of scale %.3g (normalized %.3g > %.3g) at %s: adjoint "
                    "%r, reference %r" % (name, error.max().item(), scale, worst, tolerance,
                                          index, actual[index].item(), reference[index].item()))
    return worst


def _parity(case):
    grad_output, input, grid = case.inputs(seed=7)
    grad_input, grad_grid = run_adjoint(case, grad_output, input, grid)
    ref_input, ref_grid = reference(case, grad_output, input, grid)
    tolerance = harness.NORM_TOL[case.dtype]
    assert grad_grid.dtype == DTYPES[case.dtype] and grad_grid.shape == grid.shape
    term_scale = (input.double().abs().max().item() * grad_output.double().abs().max().item()
                  if input.numel() and grad_output.numel() else 0.0)
    errors = {"grad_grid": check_against_terms(repr(case) + " grad_grid", grad_grid, ref_grid,
                                               tolerance, term_scale)}
    if case.output_mask[0]:
        assert grad_input is not None and grad_input.shape == input.shape
        errors["grad_input"] = harness.check_normalized(repr(case) + " grad_input", grad_input,
                                                        ref_input, tolerance)
    else:
        assert grad_input is None
    if case.mode == "nearest":
        assert torch.count_nonzero(grad_grid) == 0, "nearest: grad_grid must be zero"
    harness.record("grid_sampler", repr(case), **errors)


@pytest.mark.parametrize("case", EMPTY_CASES, ids=repr)
def test_empty_parity(case):
    """Outputs given filled with NaN (as memory nobody zeroed may hold): what adjoint does not
    write stays NaN and fails the comparison with ATen's zeros."""
    grad_output, input, grid = case.inputs(seed=3)
    nan = float("nan")
    outputs = adjoint.run(case.spec(), {"grad_output": grad_output, "input": input, "grid": grid,
                                        "grad_input": torch.full_like(input, nan),
                                        "grad_grid": torch.full_like(grid, nan)},
                          determinism=case.determinism)
    ref_input, ref_grid = reference(case, grad_output, input, grid)
    tolerance = harness.NORM_TOL[case.dtype]
    errors = {name: harness.check_normalized("%r %s" % (case, name), outputs[name], ref, tolerance)
              for name, ref in (("grad_input", ref_input), ("grad_grid", ref_grid))}
    harness.record("grid_sampler", repr(case), **errors)


DETERMINISM_CASES = [Case((2, 16, 12, 20), (40, 36), mode, padding, False, dtype)
                     for mode in MODES for padding in PADDINGS
                     for dtype in ("f16", "bf16", "f32", "f64")] + WIDE_CASES + \
    NEAREST_WIDE_CASES + SMALL_INPUT_CASES + FEW_CHANNEL_CASES


@pytest.mark.parametrize("case", DETERMINISM_CASES, ids=repr)
def test_deterministic(case):
    grad_output, input, grid = case.inputs(seed=9)
    claims = harness.check_deterministic(
        case.spec(), lambda: run_adjoint(case, grad_output, input, grid))
    harness.record("determinism", "grid_sampler " + repr(case), claims=claims,
                   bitwise_equal_runs=3 if claims else 0)
    # Data-dependent scatters are binned gathers by default: every program claims determinism.
    assert claims, "the default program of %s does not claim determinism" % case


def test_mismatched_dtypes_are_rejected():
    grad_output, input, grid = Case((1, 2, 4, 4), (3, 3), "bilinear", "zeros", False,
                                    "f32").inputs(seed=1)
    with pytest.raises(ValueError, match="grid has dtype torch.float64, grad_output has "
                                         "torch.float32"):
        adjoint.grid_sampler_2d_backward(grad_output, input, grid.double(), 0, 0, False,
                                         [True, True])
    with pytest.raises(ValueError, match="interpolation_mode: expected one of bilinear, nearest, "
                                         "bicubic"):
        adjoint.grid_sampler_2d_backward(grad_output, input, grid, 3, 0, False, [True, True])
    # other strides are read in place, bit for bit as their contiguous copies; a tensor
    # overlapping itself is refused
    wide_grid = torch.randn(1, 3, 5, 2, device=DEVICE)
    strided = (grad_output.transpose(2, 3), input.transpose(2, 3), wide_grid[:, :, 1:4])
    transposed = adjoint.grid_sampler_2d_backward(*strided, 0, 0, False, [True, True])
    program = adjoint.ops.grid_sampler_2d_backward_program(*strided, 0, 0, False, [True, True])
    for name in ("grad_output", "input", "grid"):
        assert " %s_strides=" % name in program.spec, program.spec
    copied = adjoint.grid_sampler_2d_backward(*(t.contiguous() for t in strided), 0, 0, False,
                                              [True, True])
    for got, want in zip(transposed, copied):
        assert torch.equal(got, want)
    with pytest.raises(ValueError, match="input: overlaps itself"):
        adjoint.grid_sampler_2d_backward(grad_output, input[:, :1].expand(1, 2, 4, 4), grid, 0,
                                         0, False, [True, True])


# --- edge cases -------------------------------------------------------------------------------

def special_values(size, align_corners):
    """Grid values along an axis of `size` pixels that land on something: -1, 0, 1, every pixel
    centre and edge (and one beyond each border), and values well outside [-1, 1]."""
    values = [-1.0, 0.0, 1.0, -3.75, 5.25, -11.0, 17.5, 1.0625, -1.0625]
    for twice in range(-2, 2 * size + 3):
        pixel = twice / 2.0
        if align_corners and size > 1:
            values.append(2.0 * pixel / (size - 1) - 1.0)
        elif not align_corners:
            values.append((2.0 * pixel + 1.0) / size - 1.0)
    return values


def special_grid(shape, sizes, align_corners, dtype, seed):
    """A grid of `shape` (last dimension = len(sizes), axis a samples an input axis of
    sizes[a] pixels): 80% special values of that axis, 20% uniform in [-1.3, 1.3], in f64 and
    then rounded to `dtype` as a user's grid would be."""
    rng = random.Random(seed)
    special = [special_values(size, align_corners) for size in sizes]
    count = 1
    for extent in shape:
        count *= extent
    values = []
    for i in range(count):
        axis = i % len(sizes)
        if rng.random() < 0.8:
            values.append(rng.choice(special[axis]))
        else:
            values.append(rng.uniform(-1.3, 1.3))
    grid = torch.tensor(values, dtype=torch.float64, device=DEVICE).reshape(shape)
    return grid.to(DTYPES[dtype])


class EdgeCase(Case):
    def __repr__(self):
        return "edge " + super().__repr__()

    def inputs(self, seed):
        grad_output, input, _ = super().inputs(seed)
        n, c, h, w = self.input_size
        ho, wo = self.output_size
        grid = special_grid((n, ho, wo, 2), (w, h), self.align_corners, self.dtype, seed + 3)
        return grad_output, input, grid


EDGE_SHAPES = (((2, 3, 1, 5), (4, 6)),  # H = 1
               ((1, 2, 7, 1), (5, 3)),  # W = 1
               ((1, 1, 1, 1), (3, 3)),  # a single pixel
               ((1, 2, 5, 7), (6, 6)))  # primes


def edge_matrix():
    return [EdgeCase(input_size, output_size, mode, padding, align, dtype)
            for input_size, output_size in EDGE_SHAPES for dtype in ("f16", "bf16", "f32", "f64")
            for mode in MODES for padding in PADDINGS for align in (False, True)]


@pytest.mark.parametrize("case", edge_matrix(), ids=repr)
def test_edge_parity(case):
    _parity(case)


def test_aten_unnormalize_is_one_fused_multiply_add():
    """The fact ops/grid_sampler_coords.h builds on: ATen's CUDA build computes the unnormalized
    coordinate ((x + 1) * size - 1) / 2 (align_corners false) with the multiply and subtract
    fused into one rounding. At every pixel centre of sizes 3..40 in f64, the bilinear grad_grid
    of a convex input tells which side of the pixel the coordinate fell on (the slope to the
    right or to the left); ATen's matches the fused formula's side everywhere, at some centres
    the twice-rounded formula would give the other side, and adjoint matches ATen."""
    from fractions import Fraction
    import math
    plain_would_differ = 0
    checked = 0
    for size in range(3, 41):
        xs = [(2.0 * p + 1.0) / size - 1.0 for p in range(size)]
        values = [(i + 1.0) ** 2 for i in range(size)]
        input = torch.tensor(values, dtype=torch.float64, device=DEVICE).reshape(1, 1, 1, size)
        grid = torch.tensor([[[[x, 0.0] for x in xs]]], dtype=torch.float64, device=DEVICE)
        grad_output = torch.ones(1, 1, 1, len(xs), dtype=torch.float64, device=DEVICE)
        theirs = torch.ops.aten.grid_sampler_2d_backward(grad_output, input, grid, 0, 0, False,
                                                         [True, True])[1]

        def slope(coordinate):
            low = math.floor(coordinate)
            at = [values[i] if 0 <= i < size else 0.0 for i in (low, low + 1)]
            return (at[1] - at[0]) * size / 2

        for index, x in enumerate(xs):
            t = x + 1.0
            fused = float(Fraction(t) * size - 1) / 2  # one rounding, then an exact halving
            plain = (t * size - 1) / 2
            got = theirs[0, 0, index, 0].item()
            assert got == slope(fused), (
                "size %d, x %r: ATen's d/dx %r, the fused formula's side gives %r (plain: %r)"
                % (size, x, got, slope(fused), slope(plain)))
            plain_would_differ += slope(plain) != slope(fused)
            checked += 1
        ours = adjoint.grid_sampler_2d_backward(grad_output, input, grid, 0, 0, False,
                                                [True, True])[1]
        assert torch.equal(ours[..., 0], theirs[..., 0]), (
            "size %d: adjoint's grad_grid x %s, ATen's %s" % (size, ours[..., 0].tolist(),
                                                             theirs[..., 0].tolist()))
    harness.record("grid_sampler", "aten unnormalize fused", checked=checked,
                   plain_formula_would_differ=plain_would_differ)
    assert plain_would_differ > 0, "no point tells the fused and the plain formula apart"
