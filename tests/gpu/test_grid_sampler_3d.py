"""GPU parity of grid_sampler_3d_backward against torch.ops.aten.grid_sampler_3d_backward.

As the 2-d suite (test_grid_sampler.py): ATen's backward at the op's coordinate precision (f32
for f16/bf16/f32 data, f64 for f64) on the same dtype-rounded inputs, tolerance
harness.NORM_TOL of the reference's max magnitude. Matrix: trilinear ("bilinear") and nearest x
3 paddings x align_corners x f16/bf16/f32/f64 on an odd-sized case with grids reaching outside
[-1, 1]; a denser case (many grid points per voxel, so scatter collisions are common) in f32 and
bf16; output_mask [False, True]; the atomics opt-in; edge cases (grids on voxel centres, edges,
+-1 and well outside [-1, 1], inputs of size 1 in D, H, W and all three) in every mode x padding
x align_corners x dtype; 3 channels on a 32^3 grid (LARGE_CASES); nearest with 16 channels at
one record per cell (NEAREST_WIDE_CASES: the channels-last gather); bitwise determinism over 3
runs for every program that claims it; empty batches, channels and grids into NaN-filled outputs
(test_empty_parity); and bicubic refused with an error naming the argument.
"""

import harness
import pytest
from harness import DTYPES, adjoint, torch
from test_grid_sampler import special_grid

MODES = ("bilinear", "nearest")
PADDINGS = ("zeros", "border", "reflection")


class Case:
    def __init__(self, input_size, output_size, mode, padding, align_corners, dtype,
                 output_mask=(True, True), determinism="default", edge=False):
        self.input_size = list(input_size)
        self.output_size = list(output_size)
        self.mode = mode
        self.padding = padding
        self.align_corners = align_corners
        self.dtype = dtype
        self.output_mask = list(output_mask)
        self.determinism = determinism
        self.edge = edge

    def spec(self):
        return adjoint.spec.grid_sampler_3d_backward(
            self.dtype, self.input_size, self.output_size, self.mode, self.padding,
            self.align_corners, self.output_mask)

    def __repr__(self):
        return "%s%s %s %s align=%s %s->%s mask=%s%s" % (
            "edge " if self.edge else "", self.mode, self.padding, self.dtype,
            self.align_corners, self.input_size, self.output_size,
            "".join("1" if m else "0" for m in self.output_mask),
            " atomics" if self.determinism == "allow_atomics" else "")

    def inputs(self, seed):
        n, c, d, h, w = self.input_size
        do, ho, wo = self.output_size
        dtype = DTYPES[self.dtype]
        grad_output = harness.random_tensor((n, c, do, ho, wo), dtype, seed)
        input = harness.random_tensor((n, c, d, h, w), dtype, seed + 1)
        if self.edge:
            grid = special_grid((n, do, ho, wo, 3), (w, h, d), self.align_corners, self.dtype,
                                seed + 2)
        else:
            grid = harness.random_tensor((n, do, ho, wo, 3), dtype, seed + 2, low=-1.15,
                                         high=1.15)
        return grad_output, input, grid


DENSE = ((2, 8, 6, 5, 7), (12, 10, 14))
EDGE_SHAPES = (((1, 2, 1, 4, 5), (3, 2, 4)),  # D = 1
               ((1, 2, 3, 1, 4), (2, 3, 3)),  # H = 1
               ((2, 2, 3, 4, 1), (2, 2, 3)),  # W = 1
               ((1, 1, 1, 1, 1), (2, 2, 2)))  # a single voxel

# 3 channels on a 32^3 grid (2^15 points and cells): the channels-last gather with its 8 taps
# as records (8 records per cell, so one thread per channel: compiler/vector_groups.h's
# whole-axis groups want at most 2).
LARGE_CASES = [Case((2, 3, 32, 32, 32), (32, 32, 32), "bilinear", padding, False, dtype)
               for padding in ("zeros", "border") for dtype in ("f32", "bf16")]

# Nearest at one record per cell with 16 channels (bench_grid_sampler_3d.py's channels): the
# channels-last gather below 2 records per cell (BinnedGatherOptions::sparse_channels_last_min).
NEAREST_WIDE_CASES = [Case((2, 16, 16, 16, 16), (16, 16, 16), "nearest", padding, False, dtype)
                      for padding in ("zeros", "border") for dtype in ("f32", "bf16")]


# Trilinear at 16 and 20 channels (bench_grid_sampler_3d.py's 16): grad_grid laid out for lanes
# below 32 channels, 4 lanes per point, a lane group computing the point's 3 coordinates
# (compiler/reduction_schedule.h, kShortLaneAxis and whole_axis_lanes_max).
WIDE_CASES = [Case((2, 16, 16, 16, 16), (16, 16, 16), "bilinear", padding, False, dtype)
              for padding in ("zeros", "border") for dtype in ("f32", "bf16")] + \
    [Case((1, 20, 9, 10, 11), (8, 12, 10), "bilinear", "reflection", True, dtype)
     for dtype in ("f16", "f64")]


def matrix():
    cases = [Case((2, 3, 5, 7, 6), (4, 3, 5), mode, padding, align, dtype)
             for dtype in ("f16", "bf16", "f32", "f64") for mode in MODES
             for padding in PADDINGS for align in (False, True)]
    cases += [Case(DENSE[0], DENSE[1], mode, padding, False, dtype)
              for dtype in ("f32", "bf16") for mode in MODES for padding in PADDINGS]
    cases += LARGE_CASES + NEAREST_WIDE_CASES + WIDE_CASES
    for mode in MODES:
        cases.append(Case((2, 4, 5, 6, 3), (4, 3, 5), mode, "border", True, "f32", (False, True)))
        cases.append(Case(DENSE[0], DENSE[1], mode, "zeros", False, "f32",
                          determinism="allow_atomics"))
        cases.append(Case(DENSE[0], DENSE[1], mode, "reflection", True, "bf16",
                          determinism="allow_atomics"))
    cases += [Case(input_size, output_size, mode, padding, align, dtype, edge=True)
              for input_size, output_size in EDGE_SHAPES
              for dtype in ("f16", "bf16", "f32", "f64") for mode in MODES
              for padding in PADDINGS for align in (False, True)]
    return cases


def reference(case, grad_output, input, grid):
    precision = torch.float64 if case.dtype == "f64" else torch.float32
    return torch.ops.aten.grid_sampler_3d_backward(
        grad_output.to(precision), input.to(precision), grid.to(precision),
        MODES.index(case.mode), PADDINGS.index(case.padding), case.align_corners,
        case.output_mask)


def run_adjoint(case, grad_output, input, grid):
    if case.determinism == "default":  # the ATen-shaped entry point
        return adjoint.grid_sampler_3d_backward(grad_output, input, grid, MODES.index(case.mode),
                                                PADDINGS.index(case.padding), case.align_corners,
                                                case.output_mask)
    outputs = adjoint.run(case.spec(), {"grad_output": grad_output, "input": input, "grid": grid},
                          determinism=case.determinism)
    return outputs.get("grad_input"), outputs["grad_grid"]


# Empty batches, channels and grids, which ATen accepts (its input's spatial sizes may not be
# empty), as in the 2-d suite.
EMPTY_CASES = [Case(input_size, output_size, mode, "zeros", True, dtype)
               for input_size, output_size in (((0, 2, 3, 4, 5), (2, 3, 2)),
                                               ((2, 0, 3, 4, 5), (2, 3, 2)),
                                               ((2, 2, 3, 4, 5), (2, 0, 2)))
               for mode in MODES for dtype in ("f32", "bf16")]


@pytest.mark.parametrize("case", EMPTY_CASES, ids=repr)
def test_empty_parity(case):
    """Outputs given filled with NaN: what adjoint does not write stays NaN and fails the
    comparison with ATen's zeros."""
    grad_output, input, grid = case.inputs(seed=3)
    nan = float("nan")
    outputs = adjoint.run(case.spec(), {"grad_output": grad_output, "input": input, "grid": grid,
                                        "grad_input": torch.full_like(input, nan),
                                        "grad_grid": torch.full_like(grid, nan)})
    ref_input, ref_grid = reference(case, grad_output, input, grid)
    tolerance = harness.NORM_TOL[case.dtype]
    errors = {name: harness.check_normalized("%r %s" % (case, name), outputs[name], ref, tolerance)
              for name, ref in (("grad_input", ref_input), ("grad_grid", ref_grid))}
    harness.record("grid_sampler_3d", repr(case), **errors)


@pytest.mark.parametrize("case", matrix(), ids=repr)
def test_parity(case):
    grad_output, input, grid = case.inputs(seed=7)
    grad_input, grad_grid = run_adjoint(case, grad_output, input, grid)
    ref_input, ref_grid = reference(case, grad_output, input, grid)
    tolerance = harness.NORM_TOL[case.dtype]
    assert grad_grid.dtype == DTYPES[case.dtype] and grad_grid.shape == grid.shape
    errors = {"grad_grid": harness.check_normalized(repr(case) + " grad_grid", grad_grid,
                                                    ref_grid, tolerance)}
    if case.output_mask[0]:
        assert grad_input is not None and grad_input.shape == input.shape
        errors["grad_input"] = harness.check_normalized(repr(case) + " grad_input", grad_input,
                                                        ref_input, tolerance)
    else:
        assert grad_input is None
    if case.mode == "nearest":
        assert torch.count_nonzero(grad_grid) == 0, "nearest: grad_grid must be zero"
    harness.record("grid_sampler_3d", repr(case), **errors)


DETERMINISM_CASES = [Case(DENSE[0], DENSE[1], mode, padding, False, dtype)
                     for mode in MODES for padding in PADDINGS
                     for dtype in ("f16", "bf16", "f32", "f64")] + LARGE_CASES + \
    NEAREST_WIDE_CASES + WIDE_CASES


@pytest.mark.parametrize("case", DETERMINISM_CASES, ids=repr)
def test_deterministic(case):
    grad_output, input, grid = case.inputs(seed=9)
    claims = harness.check_deterministic(
        case.spec(), lambda: run_adjoint(case, grad_output, input, grid))
    harness.record("determinism", "grid_sampler_3d " + repr(case), claims=claims,
                   bitwise_equal_runs=3 if claims else 0)
    # Data-dependent scatters are binned gathers by default: every program claims determinism.
    assert claims, "the default program of %s does not claim determinism" % case


def test_bicubic_and_bad_shapes_are_rejected():
    grad_output, input, grid = Case((1, 2, 3, 4, 4), (2, 3, 3), "bilinear", "zeros", False,
                                    "f32").inputs(seed=1)
    with pytest.raises(ValueError, match="bicubic .* is 2-d only"):
        adjoint.grid_sampler_3d_backward(grad_output, input, grid, 2, 0, False, [True, True])
    with pytest.raises(ValueError, match="grid: expected shape"):
        adjoint.grid_sampler_3d_backward(grad_output, input, grid[..., :2], 0, 0, False,
                                         [True, True])
    with pytest.raises(ValueError, match="grid has dtype torch.float64, grad_output has "
                                         "torch.float32"):
        adjoint.grid_sampler_3d_backward(grad_output, input, grid.double(), 0, 0, False,
                                         [True, True])
