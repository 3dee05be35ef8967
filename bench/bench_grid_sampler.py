"""grid_sampler_2d_backward cases of issue 10 for bench.py, side by side with PyTorch.

For every shape of issue 10 (8x64x128² -> 128², 4x32x256² -> 256², 32x3x224² -> 224²), every
interpolation mode and padding mode (align_corners false, grid uniform in [-1, 1]) and each dtype
asked for, it measures:
  * kernel time: CUDA events around each call, GPU kept busy while the host queues (bench.py's
    GpuTimer), median, for adjoint's default (deterministic where the compiler has a
    deterministic strategy) and allow_atomics programs and for torch.ops.aten (allow_atomics
    is the binned gather too where that is the faster, from 16 channels bilinear, 32 nearest, 8
    bicubic: docs/compiler.md "Binned or atomics"; ADJOINT_TUNE_BINNED_OVER_ATOMICS=0 times the
    atomics lowering at every size);
  * the Python call to completion on the host clock (call + synchronize), median;
  * effective bandwidth: grad_output, input and grid read once, grad_input and grad_grid written
    once, over the kernel time, and its fraction of the copy bandwidth;
  * whether each adjoint program reports itself deterministic, and the largest difference
    from ATen (grad_input and grad_grid, as f32).
Inputs rotate among enough copies to exceed L2 (bench.py's rotating_inputs).
"""

import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import adjoint  # noqa: E402

GRID_SAMPLER_SHAPES = [  # (input N, C, H, W), grid (H_out, W_out): issue 10's cases
    ((8, 64, 128, 128), (128, 128)),
    ((4, 32, 256, 256), (256, 256)),
    ((32, 3, 224, 224), (224, 224)),
]
MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")
MODE_INT = {name: i for i, name in enumerate(MODES)}
PADDING_INT = {name: i for i, name in enumerate(PADDINGS)}


def _host_call_us(fn, runs, warmup=5):
    """Median host microseconds of fn() + synchronize (the Python call to completion)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter_ns() - start) / 1e3)
    return statistics.median(samples)


def _host_queue_us(fn, runs, warmup=5):
    """Median host microseconds of fn() alone, the GPU left to catch up afterwards: the Python
    call and its launches, without the kernels' time (call_us minus this is mostly GPU time)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e3)
    torch.cuda.synchronize()
    return statistics.median(samples)


def _max_abs_diff(ours, theirs):
    return max((a.float() - b.float()).abs().max().item() for a, b in zip(ours, theirs))


def bench_grid_sampler_case(timer, rotating_inputs, cycle, input_size, grid_size, mode, padding,
                            dtype, dtype_name, copy_gbps, runs, warmup, l2_bytes):
    """One case: a dict of the figures named in this module's docstring."""
    device = torch.device("cuda")
    n, c, h, w = input_size
    output_shape = [n, c] + list(grid_size)
    grad_outputs = rotating_inputs(output_shape, dtype, l2_bytes)
    inputs = torch.randn(input_size, device=device, dtype=dtype)
    grid = (torch.rand([n] + list(grid_size) + [2], device=device, dtype=torch.float32) * 2 - 1
            ).to(dtype)
    text = adjoint.spec.grid_sampler_2d_backward(dtype_name, list(input_size), list(grid_size),
                                                 mode, padding, False, [True, True])
    programs = {"default": adjoint.prepare(text),
                "atomics": adjoint.prepare(text, determinism="allow_atomics")}

    def adjoint_call(program, g):
        def call():
            out = program(grad_output=g, input=inputs, grid=grid)
            return out["grad_input"], out["grad_grid"]
        return call

    def torch_call(g):
        return lambda: torch.ops.aten.grid_sampler_2d_backward(
            g, inputs, grid, MODE_INT[mode], PADDING_INT[padding], False, [True, True])

    reference = torch_call(grad_outputs[0])()
    element = torch.finfo(dtype).bits // 8
    moved = (2 * math.prod(output_shape) + 2 * math.prod(input_size)
             + 2 * n * math.prod(grid_size) * 2) * element
    torch_ms = statistics.median(timer.time(cycle([torch_call(g) for g in grad_outputs]), runs,
                                            warmup))
    result = {
        "case": "grid_sampler_2d_backward %s %s %s->%s" % (
            mode, padding, "x".join(map(str, input_size)), "x".join(map(str, grid_size))),
        "op": "grid_sampler_2d_backward", "dtype": dtype_name, "shape": list(input_size),
        "output_size": list(grid_size), "mode": mode, "padding": padding, "bytes": moved,
        "torch_ms": torch_ms, "torch_GBps": moved / (torch_ms * 1e6),
        "torch_call_us": _host_call_us(torch_call(grad_outputs[0]), max(runs // 2, 10)),
        "torch_queue_us": _host_queue_us(torch_call(grad_outputs[0]), 20),
    }
    result["torch_fraction_of_copy"] = result["torch_GBps"] / copy_gbps
    for key, program in programs.items():
        ours = adjoint_call(program, grad_outputs[0])()
        ms = statistics.median(timer.time(
            cycle([adjoint_call(program, g) for g in grad_outputs]), runs, warmup))
        result[key + "_deterministic"] = bool(program.deterministic)
        result[key + "_ms"] = ms
        result[key + "_ratio"] = torch_ms / ms
        result[key + "_GBps"] = moved / (ms * 1e6)
        result[key + "_fraction_of_copy"] = result[key + "_GBps"] / copy_gbps
        result[key + "_call_us"] = _host_call_us(adjoint_call(program, grad_outputs[0]),
                                                 max(runs // 2, 10))
        result[key + "_queue_us"] = _host_queue_us(adjoint_call(program, grad_outputs[0]), 20)
        result[key + "_max_abs_diff_vs_torch"] = _max_abs_diff(ours, reference)
    # bench.py's table and chart read these: the default program is the one users get.
    result["adjoint_ms"] = result["default_ms"]
    result["ratio"] = result["default_ratio"]
    result["adjoint_GBps"] = result["default_GBps"]
    result["adjoint_fraction_of_copy"] = result["default_fraction_of_copy"]
    result["max_abs_diff_vs_torch"] = result["default_max_abs_diff_vs_torch"]
    return result


def bench_grid_sampler(timer, rotating_inputs, cycle, dtypes, copy_gbps, runs, warmup, l2_bytes,
                       modes=MODES, paddings=PADDINGS, shapes=GRID_SAMPLER_SHAPES):
    """(cases, errors) over shapes x modes x paddings x dtypes ({name: torch dtype}); a failing
    case is reported in errors and the others still run."""
    cases, errors = [], []
    for input_size, grid_size in shapes:
        for mode in modes:
            for padding in paddings:
                for dtype_name, dtype in dtypes.items():
                    try:
                        cases.append(bench_grid_sampler_case(
                            timer, rotating_inputs, cycle, input_size, grid_size, mode, padding,
                            dtype, dtype_name, copy_gbps, runs, warmup, l2_bytes))
                    except Exception as error:  # keep measuring; report this one
                        errors.append("grid_sampler %s %s %s %s->%s: %s: %s" % (
                            mode, padding, dtype_name, input_size, grid_size,
                            type(error).__name__, error))
                    torch.cuda.empty_cache()
    return cases, errors


def print_grid_sampler_table(cases):
    print("%-62s %-5s %9s %9s %9s %6s %6s %7s %7s %9s %9s %9s %9s" % (
        "grid_sampler_2d_backward case", "dtype", "det ms", "atom ms", "torch ms", "det x",
        "atom x", "det%cp", "torch%", "det us", "atom us", "torch us", "det q us"))
    for c in cases:
        print("%-62s %-5s %9.4f %9.4f %9.4f %6.2f %6.2f %6.0f%% %6.0f%% %9.1f %9.1f %9.1f %9.1f%s"
              % (c["case"], c["dtype"], c["default_ms"], c["atomics_ms"], c["torch_ms"],
                 c["default_ratio"], c["atomics_ratio"], 100 * c["default_fraction_of_copy"],
                 100 * c["torch_fraction_of_copy"], c["default_call_us"], c["atomics_call_us"],
                 c["torch_call_us"], c["default_queue_us"],
                 "" if c["default_deterministic"] else "  (default not deterministic)"))


def _parse_shape_list(text):
    """[((N, C, H, W), (H_out, W_out)), ...] from "NxCxHxW:H_outxW_out,..." (empty: [])."""
    shapes = []
    for item in filter(None, text.split(",")):
        try:
            input_text, grid_text = item.split(":")
            input_size = tuple(int(v) for v in input_text.split("x"))
            grid_size = tuple(int(v) for v in grid_text.split("x"))
        except ValueError:
            input_size, grid_size = (), ()
        if len(input_size) != 4 or len(grid_size) != 2:
            raise SystemExit("--shape-list: expected NxCxHxW:H_outxW_out, got %r" % item)
        shapes.append((input_size, grid_size))
    return shapes


def main():
    """Only the grid_sampler_2d_backward cases: python3 bench/bench_grid_sampler.py
    [--dtypes f32,bf16] [--modes ...] [--paddings ...] [--shapes 0,1,2] [--runs N]
    [--out file.json]."""
    import argparse
    import json
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench
    parser = argparse.ArgumentParser(description="grid_sampler_2d_backward vs PyTorch")
    parser.add_argument("--out", default="bench_grid_sampler.json")
    parser.add_argument("--dtypes", default="f32,bf16")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--paddings", default=",".join(PADDINGS))
    parser.add_argument("--shapes", default="0,1,2", help="indices into GRID_SAMPLER_SHAPES")
    parser.add_argument("--shape-list", default="",
                        help="shapes instead of --shapes: N x C x H x W : H_out x W_out, comma "
                             "separated (e.g. 1x2x3x4:297x261,2x32x8x8:256x256)")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()
    torch_dtypes = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
                    "f64": torch.float64}
    dtypes = {name: torch_dtypes[name] for name in args.dtypes.split(",") if name}
    properties = torch.cuda.get_device_properties(bench.DEVICE)
    l2_bytes = getattr(properties, "L2_cache_size", 50 << 20)
    timer = bench.GpuTimer()
    copy_gbps = bench.copy_bandwidth(timer, args.runs, args.warmup)
    cases, errors = bench_grid_sampler(timer, bench.rotating_inputs, bench.cycle, dtypes,
                                       copy_gbps, args.runs, args.warmup, l2_bytes,
                                       modes=tuple(args.modes.split(",")),
                                       paddings=tuple(args.paddings.split(",")),
                                       shapes=_parse_shape_list(args.shape_list) or
                                       [GRID_SAMPLER_SHAPES[int(i)]
                                        for i in args.shapes.split(",") if i])
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(bench.DEVICE), "torch": torch.__version__,
                   "copy_GBps": copy_gbps, "runs": args.runs, "cases": cases, "errors": errors},
                  f, indent=1)
    print("device: %s   copy bandwidth: %.0f GB/s" % (torch.cuda.get_device_name(bench.DEVICE),
                                                      copy_gbps))
    print_grid_sampler_table(cases)
    for error in errors:
        print("ERROR " + error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
