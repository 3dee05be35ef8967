"""A/B of ADJOINT_TUNE_BINNED_TAPS (run once per knob value: the runtime reads knobs once per
process): kernel ms (bench.py's GpuTimer, median, rotating grad_output) of the default
(deterministic) grid_sampler backward programs and of ATen, on issue 10's shapes, uniform grids
(zeros padding) and the one-cell worst case; one JSON line per case on stdout.

    ADJOINT_TUNE_BINNED_TAPS=0 python3 ab_taps.py TAG [RUNS]
"""

import json
import os
import statistics
import sys

ROOT = os.environ.get("ADJOINT_ROOT", os.getcwd())
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402

import adjoint  # noqa: E402
import bench  # noqa: E402
from bench_grid_sampler_3d import displacement_grid  # noqa: E402

TAG = sys.argv[1]
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 30
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
L2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
timer = bench.GpuTimer()


def median_ms(calls):
    return statistics.median(timer.time(bench.cycle(calls), RUNS, 5))


def case2d(size, out, mode, dtype_name, one_cell=False):
    dtype = DTYPES[dtype_name]
    n, c, h, w = size
    gos = bench.rotating_inputs([n, c] + list(out), dtype, L2)
    x = torch.randn(size, device="cuda", dtype=dtype)
    grid = (torch.rand([n] + list(out) + [2], device="cuda") * 2 - 1).to(dtype)
    if one_cell:
        grid = torch.full_like(grid, 0.1)
    text = adjoint.spec.grid_sampler_2d_backward(dtype_name, list(size), list(out), mode,
                                                 "zeros", False, [True, True])
    program = adjoint.prepare(text)
    ms = median_ms([lambda g=g: program(grad_output=g, input=x, grid=grid) for g in gos])
    torch_ms = median_ms([lambda g=g: torch.ops.aten.grid_sampler_2d_backward(
        g, x, grid, MODES[mode], 0, False, [True, True]) for g in gos])
    ours = program(grad_output=gos[0], input=x, grid=grid)
    ref = torch.ops.aten.grid_sampler_2d_backward(gos[0], x, grid, MODES[mode], 0, False,
                                                  [True, True])
    again = program(grad_output=gos[0], input=x, grid=grid)
    bitwise = all(torch.equal(ours[k], again[k]) for k in ("grad_input", "grad_grid"))
    diff = (ours["grad_input"].float() - ref[0].float()).abs().max().item()
    return {"tag": TAG, "case": "%s%s %s %s->%s" % ("one-cell " if one_cell else "", mode,
                                                  dtype_name, "x".join(map(str, size)),
                                                  "x".join(map(str, out))),
            "ms": ms, "torch_ms": torch_ms, "ratio": torch_ms / ms, "kernels":
            len(program.kernels) if hasattr(program, "kernels") else None,
            "deterministic": bool(program.deterministic), "repeat_bitwise": bitwise,
            "grad_input_max_abs_diff": diff}


def case3d(mode, dtype_name):
    dtype = DTYPES[dtype_name]
    size, out = (2, 16, 32, 32, 32), (32, 32, 32)
    gos = bench.rotating_inputs([2, 16] + list(out), dtype, L2)
    x = torch.randn(size, device="cuda", dtype=dtype)
    grid = displacement_grid(2, out, dtype, "cuda", 3)
    text = adjoint.spec.grid_sampler_3d_backward(dtype_name, list(size), list(out), mode,
                                                 "zeros", False, [True, True])
    program = adjoint.prepare(text)
    ms = median_ms([lambda g=g: program(grad_output=g, input=x, grid=grid) for g in gos])
    torch_ms = median_ms([lambda g=g: torch.ops.aten.grid_sampler_3d_backward(
        g, x, grid, MODES[mode], 0, False, [True, True]) for g in gos])
    return {"tag": TAG, "case": "3d %s %s 2x16x32^3" % (mode, dtype_name), "ms": ms,
            "torch_ms": torch_ms, "ratio": torch_ms / ms,
            "deterministic": bool(program.deterministic)}


SHAPES = [((32, 3, 224, 224), (224, 224)), ((8, 64, 128, 128), (128, 128)),
          ((4, 32, 256, 256), (256, 256))]
jobs = []
for size, out in SHAPES[:1]:
    for mode in ("bilinear", "bicubic"):
        for dt in ("f32", "bf16"):
            jobs.append(lambda size=size, out=out, mode=mode, dt=dt: case2d(size, out, mode, dt))
jobs.append(lambda: case3d("bilinear", "f32"))
jobs.append(lambda: case3d("bilinear", "bf16"))
jobs.append(lambda: case2d((32, 3, 224, 224), (224, 224), "bilinear", "f32", one_cell=True))
jobs.append(lambda: case2d((8, 64, 128, 128), (128, 128), "bilinear", "f32", one_cell=True))
for size, out in SHAPES[1:]:
    for mode in ("bilinear", "bicubic"):
        for dt in ("f32", "bf16"):
            jobs.append(lambda size=size, out=out, mode=mode, dt=dt: case2d(size, out, mode, dt))
for job in jobs:
    try:
        print(json.dumps(job()), flush=True)
    except Exception as error:  # keep measuring
        print(json.dumps({"tag": TAG, "error": "%s: %s" % (type(error).__name__, error)}),
              flush=True)
    torch.cuda.empty_cache()
