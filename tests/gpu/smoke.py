"""A few small calls of every op family through the Python binding, for running under
compute-sanitizer (scripts/gpu-check): memcheck and racecheck then see the JIT-compiled
kernels the parity suite exercises, on shapes small enough for the sanitizers' slowdown.
Checks each result against PyTorch loosely (the parity suite is the real check) and exits
non-zero on any difference or error. Not collected by pytest (no test_ prefix).
"""

import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402

import adjoint  # noqa: E402


def close(name, actual, expected, tolerance):
    error = (actual.double() - expected.double()).abs().max().item() if actual.numel() else 0.0
    scale = max(expected.double().abs().max().item() if expected.numel() else 0.0, 1.0)
    ok = error <= tolerance * scale
    print("%-60s %s (max error %.3g)" % (name, "ok" if ok else "MISMATCH", error))
    return ok


def grid_sampler_3d(device):
    """grid_sampler_3d_backward, trilinear and nearest, zeros and reflection, f32 and bf16, on a
    short case (also run alone under the sanitizers: smoke.grid_sampler_3d(device))."""
    ok = True
    for dtype, tolerance in ((torch.float32, 1e-4), (torch.bfloat16, 3e-2)):
        for mode in range(2):
            for padding in (0, 2):
                grad_output = torch.randn(2, 3, 3, 4, 5, device=device, dtype=dtype)
                input = torch.randn(2, 3, 4, 5, 6, device=device, dtype=dtype)
                grid = (torch.rand(2, 3, 4, 5, 3, device=device) * 2.3 - 1.15).to(dtype)
                ours = adjoint.grid_sampler_3d_backward(grad_output, input, grid, mode, padding,
                                                        True, [True, True])
                theirs = torch.ops.aten.grid_sampler_3d_backward(
                    grad_output.float(), input.float(), grid.float(), mode, padding, True,
                    [True, True])
                for index, name in enumerate(("grad_input", "grad_grid")):
                    ok &= close("grid_sampler_3d %s mode=%d padding=%d %s"
                                % (dtype, mode, padding, name), ours[index], theirs[index],
                                tolerance)
    torch.cuda.synchronize()
    return ok


def new_schedules(device):
    """Shapes that reach the schedules with shared memory or barriers, so that the sanitizers
    see them: grid_sampler's tiled transpositions and grad_grid on warp lanes (40 channels),
    mhc_pre's block reduction (300 tokens), and Sinkhorn's row groups (64 tokens, t_max 20)."""
    ok = True
    grad_output = torch.randn(2, 40, 17, 18, device=device)
    input = torch.randn(2, 40, 20, 21, device=device)
    grid = torch.rand(2, 17, 18, 2, device=device) * 2.2 - 1.1
    ours = adjoint.grid_sampler_2d_backward(grad_output, input, grid, 0, 0, False, [True, True])
    theirs = torch.ops.aten.grid_sampler_2d_backward(grad_output, input, grid, 0, 0, False,
                                                     [True, True])
    ok &= close("grid_sampler 40 channels (tiles, lanes) grad_input", ours[0], theirs[0], 1e-4)
    ok &= close("grid_sampler 40 channels (tiles, lanes) grad_grid", ours[1], theirs[1], 1e-4)
    b, s, n, d = 1, 300, 4, 64
    f32 = dict(device=device, dtype=torch.float32)
    x = torch.randn(b, s, n, d, device=device, dtype=torch.bfloat16)
    phi = torch.randn(n * n + 2 * n, n * d, **f32) * 0.1
    outputs = adjoint.mhc.pre(x, phi, torch.rand(3, **f32) + 0.5,
                              torch.randn(n * n + 2 * n, **f32), torch.rand(n, d, **f32) + 0.5)
    finite = all(bool(torch.isfinite(t.float()).all()) for t in outputs)
    print("%-60s %s" % ("mhc_pre 300 tokens (block reduction), outputs finite",
                        "ok" if finite else "NOT FINITE"))
    ok &= finite
    logits = torch.randn(1, 64, 4, 4, **f32)
    p = adjoint.mhc_sinkhorn(logits, t_max=20)
    ok &= close("mhc_sinkhorn t_max=20 (row groups) column sums", p.sum(-2),
                torch.ones(1, 64, 4, **f32), 1e-4)
    grad = adjoint.mhc_sinkhorn_backward(torch.randn_like(logits), logits, t_max=20)
    finite = bool(torch.isfinite(grad).all())
    print("%-60s %s" % ("mhc_sinkhorn_backward t_max=20 (row groups), outputs finite",
                        "ok" if finite else "NOT FINITE"))
    return ok and finite


def main():
    device = torch.device("cuda")
    torch.manual_seed(0)
    ok = True
    for dtype, tolerance in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
        for memory_format in (torch.contiguous_format, torch.channels_last):
            g = torch.randn(2, 3, 19, 24, device=device, dtype=dtype).contiguous(
                memory_format=memory_format)
            for exact in (False, True):
                ours = (adjoint._upsample_nearest_exact2d_backward if exact
                        else adjoint.upsample_nearest2d_backward)(g, [19, 24], [2, 3, 7, 16])
                theirs = (torch.ops.aten._upsample_nearest_exact2d_backward if exact
                          else torch.ops.aten.upsample_nearest2d_backward)(g, [19, 24],
                                                                           [2, 3, 7, 16])
                ok &= close("upsample2d %s %s exact=%s" % (dtype, memory_format, exact), ours,
                            theirs, tolerance)
    g = torch.randn(2, 4, 5, 6, 7, device=device, dtype=torch.float16)
    ok &= close("upsample3d f16", adjoint.upsample_nearest3d_backward(g, [5, 6, 7], [2, 4, 3, 4, 5]),
                torch.ops.aten.upsample_nearest3d_backward(g, [5, 6, 7], [2, 4, 3, 4, 5]), 2e-3)
    g = torch.randn(3, 2, 40, device=device)
    ok &= close("upsample1d f32", adjoint.upsample_nearest1d_backward(g, [40], [3, 2, 13]),
                torch.ops.aten.upsample_nearest1d_backward(g, [40], [3, 2, 13]), 1e-5)

    for mode in range(3):
        for padding in range(3):
            grad_output = torch.randn(2, 3, 6, 5, device=device)
            input = torch.randn(2, 3, 7, 9, device=device)
            grid = torch.rand(2, 6, 5, 2, device=device) * 2.3 - 1.15
            ours = adjoint.grid_sampler_2d_backward(grad_output, input, grid, mode, padding,
                                                    False, [True, True])
            theirs = torch.ops.aten.grid_sampler_2d_backward(grad_output, input, grid, mode,
                                                             padding, False, [True, True])
            ok &= close("grid_sampler mode=%d padding=%d grad_input" % (mode, padding), ours[0],
                        theirs[0], 1e-4)
            ok &= close("grid_sampler mode=%d padding=%d grad_grid" % (mode, padding), ours[1],
                        theirs[1], 1e-4)

    ok &= grid_sampler_3d(device)
    ok &= new_schedules(device)

    b, s, n, d = 2, 3, 4, 16
    k = n * n + 2 * n
    x = torch.randn(b, s, n, d, device=device, dtype=torch.bfloat16)
    f32 = dict(device=device, dtype=torch.float32)
    outputs = adjoint.mhc_pre_backward(
        x, torch.randn(k, n * d, **f32) * 0.1, torch.rand(3, **f32) + 0.5,
        torch.randn(b, s, d, device=device, dtype=torch.bfloat16), torch.randn(b, s, n, **f32),
        torch.randn(b, s, n, n, **f32), torch.rand(b, s, **f32) + 0.5,
        torch.randn(b, s, k, **f32), torch.rand(b, s, n, **f32), torch.rand(b, s, n, **f32) * 2,
        torch.rand(n, d, **f32) + 0.5, grad_x_post=torch.randn_like(x))
    finite = all(bool(torch.isfinite(t.float()).all()) for t in outputs)
    print("%-60s %s" % ("mhc_pre_backward runs, outputs finite", "ok" if finite else "NOT FINITE"))
    ok &= finite

    # The rest of the mHC layer (tests/gpu/test_mhc_layer.py is the real check).
    y = torch.randn(b, s, d, device=device, dtype=torch.bfloat16)
    h_res, h_post = torch.rand(b, s, n, n, **f32), torch.rand(b, s, n, **f32)
    out = adjoint.mhc_post(x, y, h_res, h_post)
    ok &= close("mhc_post bf16", out, (h_res @ x.float() + h_post[..., None] * y.float()[..., None, :]),
                2e-2)
    outputs = adjoint.mhc_post_backward(torch.randn_like(x), x, y, h_res, h_post)
    finite = all(bool(torch.isfinite(t.float()).all()) for t in outputs)
    print("%-60s %s" % ("mhc_post_backward runs, outputs finite", "ok" if finite else "NOT FINITE"))
    ok &= finite
    logits = torch.randn(b, s, n, n, **f32)
    p = adjoint.mhc_sinkhorn(logits, t_max=3)
    ok &= close("mhc_sinkhorn t_max=3 column sums", p.sum(-2), torch.ones(b, s, n, **f32), 1e-4)
    grad = adjoint.mhc_sinkhorn_backward(torch.randn_like(logits), logits, t_max=3)
    finite = bool(torch.isfinite(grad).all())
    print("%-60s %s" % ("mhc_sinkhorn_backward runs, outputs finite", "ok" if finite else "NOT FINITE"))
    ok &= finite
    torch.cuda.synchronize()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
