"""The drop-in path (adjoint.torch): F.interpolate / F.grid_sample backward with adjoint
registered as the CUDA kernel, against PyTorch's own kernels on the same inputs; fall-through
for what adjoint does not cover; disable() restoring PyTorch; grid_sample's backward under
torch.use_deterministic_algorithms(True).
"""

import harness  # noqa: F401  (sets the path, skips without CUDA)
import pytest
from harness import DEVICE, NORM_TOL, adjoint, torch

import adjoint.torch as dropin

F = torch.nn.functional
TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def interpolate_grads(x, size, mode, grad):
    x = x.detach().requires_grad_(True)
    F.interpolate(x, size=size, mode=mode).backward(grad)
    return x.grad


def grid_sample_grads(x, grid, grad, mode, padding, align):
    x = x.detach().requires_grad_(True)
    grid = grid.detach().requires_grad_(True)
    F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align).backward(grad)
    return x.grad, grid.grad


def assert_close(got, want, dtype):
    scale = max(want.abs().max().item(), 1.0)
    assert (got.double() - want.double()).abs().max().item() <= TOL[dtype] * scale


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("shape,size", [((2, 3, 17), (40,)), ((2, 3, 13, 9), (32, 20)),
                                        ((1, 2, 5, 6, 7), (9, 13, 10))])
def test_interpolate_backward_matches_pytorch(dtype, mode, shape, size):
    x = torch.randn(shape, device=DEVICE, dtype=dtype)
    grad = torch.randn(shape[:2] + size, device=DEVICE, dtype=dtype)
    want = interpolate_grads(x, size, mode, grad)
    dropin.fallthrough_counts.clear()
    with dropin.enabled():
        got = interpolate_grads(x, size, mode, grad)
        assert not dropin.fallthrough_counts, dropin.fallthrough_counts
    assert got.stride() == want.stride()
    assert_close(got, want, dtype)


def test_channels_last_interpolate_backward_stays_channels_last():
    x = torch.randn(2, 8, 9, 11, device=DEVICE).contiguous(memory_format=torch.channels_last)
    grad = torch.randn(2, 8, 18, 22, device=DEVICE).contiguous(
        memory_format=torch.channels_last)
    want = interpolate_grads(x, (18, 22), "nearest", grad)
    with dropin.enabled():
        got = interpolate_grads(x, (18, 22), "nearest", grad)
    assert got.is_contiguous(memory_format=torch.channels_last)
    assert_close(got, want, torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_backward_matches_pytorch(dtype, mode, padding, align):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 11, 13, device=DEVICE, dtype=dtype)
    grid = (torch.rand(2, 7, 5, 2, device=DEVICE, dtype=dtype) * 2.4 - 1.2)
    grad = torch.randn(2, 3, 7, 5, device=DEVICE, dtype=dtype)
    with dropin.enabled():
        got = grid_sample_grads(x, grid, grad, mode, padding, align)
    if dtype == torch.float16:
        # PyTorch's f16 kernel accumulates in f16 (several ulps off, measured on the H100):
        # the reference is its f32 backward on the same f16-rounded values, as in
        # test_grid_sampler.py, at the suite's f16 tolerance (harness.NORM_TOL).
        want = grid_sample_grads(x.float(), grid.float(), grad.float(), mode, padding, align)
        for g, w in zip(got, want):
            scale = max(w.abs().max().item(), 1.0)
            assert (g.double() - w.double()).abs().max().item() <= NORM_TOL["f16"] * scale
        return
    want = grid_sample_grads(x, grid, grad, mode, padding, align)
    for g, w in zip(got, want):
        assert_close(g, w, dtype)


@pytest.mark.parametrize("mode,channels,expected", [
    ("bilinear", 16, "default"), ("nearest", 32, "default"), ("bicubic", 8, "default"),
    ("bilinear", 15, "allow_atomics"), ("nearest", 16, "allow_atomics")])
def test_grid_sample_backward_without_determinism_takes_the_faster_program(mode, channels,
                                                                          expected):
    # Not asked for determinism, the drop-in runs the allow_atomics program, which the compiler
    # makes the deterministic binned gather from 16 channels bilinear, 32 nearest and 8 bicubic
    # (compiler/lower_scatter_to_binned_gather.h, binned_over_atomics_min_broadcast), atomics
    # below: both must give PyTorch's gradients.
    torch.manual_seed(1)
    x = torch.randn(2, channels, 11, 13, device=DEVICE)
    grid = torch.rand(2, 7, 5, 2, device=DEVICE) * 2.4 - 1.2
    grad = torch.randn(2, channels, 7, 5, device=DEVICE)
    program = adjoint.ops.grid_sampler_2d_backward_program(
        grad, x, grid, mode, "border", False, [True, True], determinism="allow_atomics")
    assert program.deterministic == (expected == "default")
    want = grid_sample_grads(x, grid, grad, mode, "border", False)
    dropin.fallthrough_counts.clear()
    with dropin.enabled():
        got = grid_sample_grads(x, grid, grad, mode, "border", False)
        assert not dropin.fallthrough_counts, dropin.fallthrough_counts
    for g, w in zip(got, want):
        assert_close(g, w, torch.float32)


def test_strided_grad_output_runs_adjoint_and_expanded_falls_through():
    # A sliced grad_output runs adjoint's kernel specialized for its strides, read in place.
    base = torch.randn(2, 3, 40, 64, device=DEVICE)
    grad_output = base[:, :, :, ::2]
    want = torch.ops.aten.upsample_nearest2d_backward(grad_output, [40, 32], [2, 3, 20, 16])
    dropin.fallthrough_counts.clear()
    with dropin.enabled():
        got = torch.ops.aten.upsample_nearest2d_backward(grad_output, [40, 32], [2, 3, 20, 16])
        assert not dropin.fallthrough_counts, dropin.fallthrough_counts
        # an .expand()ed one (out.sum().backward()) overlaps itself: PyTorch's kernel runs
        ones = torch.ones(1, 1, 1, 1, device=DEVICE).expand(2, 3, 40, 32)
        got_ones = torch.ops.aten.upsample_nearest2d_backward(ones, [40, 32], [2, 3, 20, 16])
        assert dropin.fallthrough_counts.get("upsample_nearest2d_backward") == 1
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got_ones, torch.full((2, 3, 20, 16), 4.0, device=DEVICE))


def test_permuted_grid_sample_grad_output_runs_adjoint():
    torch.manual_seed(4)
    x = torch.randn(2, 3, 9, 11, device=DEVICE)
    grid = torch.rand(2, 7, 5, 2, device=DEVICE) * 2 - 1
    grad = torch.randn(2, 5, 7, 3, device=DEVICE).permute(0, 3, 2, 1)  # [2, 3, 7, 5], strided
    want = grid_sample_grads(x, grid, grad, "bilinear", "zeros", False)
    dropin.fallthrough_counts.clear()
    with dropin.enabled():
        got = grid_sample_grads(x, grid, grad, "bilinear", "zeros", False)
        assert not dropin.fallthrough_counts, dropin.fallthrough_counts
    for g, w in zip(got, want):
        assert_close(g, w, torch.float32)


def test_disable_restores_pytorch():
    g = torch.randn(1, 1, 8, 8, device=DEVICE)
    dropin.enable()
    assert dropin.is_enabled()
    dropin.disable()
    assert not dropin.is_enabled()
    dropin.fallthrough_counts.clear()
    torch.ops.aten.upsample_nearest2d_backward(g, [8, 8], [1, 1, 4, 4])
    assert not dropin.fallthrough_counts


def grid_sample_under_determinism(x, grid, grad):
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        return grid_sample_grads(x, grid, grad, "bilinear", "zeros", False)
    finally:
        torch.use_deterministic_algorithms(previous)


def test_grid_sample_backward_under_deterministic_algorithms():
    torch.manual_seed(1)
    x = torch.randn(2, 4, 16, 16, device=DEVICE)
    grid = torch.rand(2, 64, 64, 2, device=DEVICE) * 2 - 1  # many points per pixel: collisions
    grad = torch.randn(2, 4, 64, 64, device=DEVICE)
    # PyTorch alone raises, even when only grad_grid is asked for (input needs no grad).
    with pytest.raises(RuntimeError, match="deterministic"):
        grid_sample_under_determinism(x, grid.requires_grad_(False), grad)

    def grid_grad_only():
        g = grid.detach().requires_grad_(True)
        previous = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)
        try:
            F.grid_sample(x, g, align_corners=False).backward(grad)
        finally:
            torch.use_deterministic_algorithms(previous)
        return g.grad

    with dropin.enabled():
        first, second = grid_grad_only(), grid_grad_only()
    assert torch.equal(first, second)

    # With grad_input too: the default program is a binned gather, deterministic, so adjoint
    # runs it where PyTorch alone raises; three runs agree bit for bit.
    program = adjoint.ops.grid_sampler_2d_backward_program(
        grad, x, grid, 0, 0, False, [True, True])
    assert program.deterministic
    dropin.fallthrough_counts.clear()
    with dropin.enabled():
        a = grid_sample_under_determinism(x, grid, grad)
        for _ in range(2):
            b = grid_sample_under_determinism(x, grid, grad)
            assert all(torch.equal(u, v) for u, v in zip(a, b))
    assert not dropin.fallthrough_counts
