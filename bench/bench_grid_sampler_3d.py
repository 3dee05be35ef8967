"""grid_sampler_3d_backward side by side with PyTorch, for bench/bench.py (which calls
bench_cases with its timer, copy bandwidth and settings, and adds the records to its table).

Case: input 2x16x32^3, grid 2x32^3x3 (a displacement field: the identity grid plus uniform noise
of +-0.1, about +-1.6 voxels, so neighbouring points collide on voxels as in registration
warps), zeros padding, align_corners false; trilinear ("bilinear") and nearest; f32 and bf16.
Per case:
  * adjoint_ms: the default (deterministic where the compiler has a strategy) program through
    the ATen-shaped function, kernel time from CUDA events with the GPU kept busy while the host
    queues (bench.GpuTimer), median of --runs calls; adjoint_atomics_ms: the allow_atomics
    program launched as a prepared Program, same timing (the binned gather where that is the
    faster: from 16 channels trilinear, 32 nearest; ADJOINT_TUNE_BINNED_OVER_ATOMICS=0 times
    the atomics lowering); torch_ms: torch.ops.aten's op;
  * adjoint_call_us / torch_call_us: the Python call to completion (call + synchronize, host
    clock), median;
  * bytes = grad_output + grid read, grad_input + grad_grid written, plus input read (trilinear
    only: nearest has a zero grad_grid and never reads the input), each once; GB/s and the
    fraction of bench.py's copy bandwidth;
  * deterministic: what the default program reports, and max_abs_diff_vs_torch.
Run alone (python3 bench/bench_grid_sampler_3d.py [--out F --runs R --sizes
NxCxDxHxW:DoxHoxWo]), it measures the copy bandwidth with bench.py's functions and prints its own table.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402

import adjoint  # noqa: E402

INPUT_SIZE = (2, 16, 32, 32, 32)
OUTPUT_SIZE = (32, 32, 32)
MODES = ("bilinear", "nearest")
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def displacement_grid(n, output_size, dtype, device, seed):
    """The identity sampling grid (align_corners false) plus uniform noise of +-0.1."""
    axes = [(torch.arange(size, device=device, dtype=torch.float64) * 2 + 1) / size - 1
            for size in output_size]  # D, H, W
    z, y, x = torch.meshgrid(*axes, indexing="ij")
    identity = torch.stack((x, y, z), dim=-1).expand(n, *output_size, 3)
    generator = torch.Generator(device=device).manual_seed(seed)
    noise = torch.rand(identity.shape, generator=generator, device=device,
                       dtype=torch.float64) * 0.2 - 0.1
    return (identity + noise).to(dtype).contiguous()


def host_call_us(fn, runs, warmup=10):
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


def bench_case(timer, mode, dtype_name, copy_gbps, runs, warmup, l2_bytes):
    dtype = DTYPES[dtype_name]
    device = torch.device("cuda")
    n, c = INPUT_SIZE[:2]
    out_shape = (n, c) + OUTPUT_SIZE
    one_set = (math.prod(out_shape) + math.prod(INPUT_SIZE) + n * math.prod(OUTPUT_SIZE) * 3) * (
        torch.finfo(dtype).bits // 8)
    copies = max(1, min(8, math.ceil(3 * l2_bytes / one_set)))  # cycling exceeds L2
    sets = [(torch.randn(out_shape, device=device, dtype=dtype),
             torch.randn(INPUT_SIZE, device=device, dtype=dtype),
             displacement_grid(n, OUTPUT_SIZE, dtype, device, seed)) for seed in range(copies)]
    interpolation = MODES.index(mode)

    def ours(s):
        return lambda: adjoint.grid_sampler_3d_backward(s[0], s[1], s[2], interpolation, 0,
                                                        False, [True, True])

    def theirs(s):
        return lambda: torch.ops.aten.grid_sampler_3d_backward(s[0], s[1], s[2], interpolation,
                                                               0, False, [True, True])

    text = adjoint.spec.grid_sampler_3d_backward(dtype_name, INPUT_SIZE, OUTPUT_SIZE, mode,
                                                 "zeros", False, [True, True])
    default_program = adjoint.prepare(text)
    atomics_program = adjoint.prepare(text, determinism="allow_atomics")
    outputs = [{name: torch.empty_like(s[1] if name == "grad_input" else s[2])
                for name in ("grad_input", "grad_grid")} for s in sets]

    def atomics(index):
        bound = {"grad_output": sets[index][0], "input": sets[index][1], "grid": sets[index][2]}
        bound.update(outputs[index])
        return lambda: atomics_program.launch(bound)

    def cycle(calls):
        state = {"i": 0}

        def call():
            state["i"] = (state["i"] + 1) % len(calls)
            return calls[state["i"]]()
        return call

    got, want = ours(sets[0])(), theirs(sets[0])()
    diff = max((a.float() - b.float()).abs().max().item() for a, b in zip(got, want))
    adjoint_ms = statistics.median(timer.time(cycle([ours(s) for s in sets]), runs, warmup))
    atomics_ms = statistics.median(timer.time(cycle([atomics(i) for i in range(len(sets))]),
                                              runs, warmup))
    torch_ms = statistics.median(timer.time(cycle([theirs(s) for s in sets]), runs, warmup))
    element = torch.finfo(dtype).bits // 8
    moved = (math.prod(out_shape) + math.prod(INPUT_SIZE) * (2 if mode == "bilinear" else 1) +
             2 * n * math.prod(OUTPUT_SIZE) * 3) * element
    adjoint_gbps, torch_gbps = moved / (adjoint_ms * 1e6), moved / (torch_ms * 1e6)
    return {
        "case": "grid_sampler_3d_backward %s %s->%s" % (
            mode, "x".join(map(str, INPUT_SIZE)), "x".join(map(str, OUTPUT_SIZE))),
        "op": "grid_sampler_3d_backward", "mode": mode, "padding": "zeros",
        "dtype": dtype_name, "shape": list(INPUT_SIZE), "output_size": list(OUTPUT_SIZE),
        "bytes": moved, "deterministic": default_program.deterministic,
        "adjoint_ms": adjoint_ms, "adjoint_atomics_ms": atomics_ms, "torch_ms": torch_ms,
        "ratio": torch_ms / adjoint_ms, "atomics_ratio": torch_ms / atomics_ms,
        "adjoint_GBps": adjoint_gbps, "torch_GBps": torch_gbps,
        "adjoint_fraction_of_copy": adjoint_gbps / copy_gbps,
        "torch_fraction_of_copy": torch_gbps / copy_gbps,
        "adjoint_call_us": host_call_us(ours(sets[0]), runs),
        "torch_call_us": host_call_us(theirs(sets[0]), runs),
        "max_abs_diff_vs_torch": diff,
    }


def bench_cases(timer, copy_gbps, runs, warmup, l2_bytes):
    """(records, errors) for every mode and dtype; a failing case is reported, not fatal."""
    records, errors = [], []
    for mode in MODES:
        for dtype_name in DTYPES:
            try:
                records.append(bench_case(timer, mode, dtype_name, copy_gbps, runs, warmup,
                                          l2_bytes))
            except Exception as error:  # keep measuring the other cases
                errors.append("grid_sampler_3d_backward %s %s: %s: %s"
                              % (mode, dtype_name, type(error).__name__, error))
            torch.cuda.empty_cache()
    return records, errors


def table(records):
    """Lines for the end of bench.py's output: the atomics time and the call to completion."""
    lines = ["%-52s %-5s %9s %9s %9s %8s %8s %5s" % (
        "grid_sampler_3d_backward", "dtype", "det. ms", "atom. ms", "torch ms", "call us",
        "torch us", "det.")]
    for r in records:
        lines.append("%-52s %-5s %9.4f %9.4f %9.4f %8.1f %8.1f %5s" % (
            r["case"], r["dtype"], r["adjoint_ms"], r["adjoint_atomics_ms"], r["torch_ms"],
            r["adjoint_call_us"], r["torch_call_us"], "yes" if r["deterministic"] else "no"))
    return lines


def main():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import bench
    parser = argparse.ArgumentParser(description="grid_sampler_3d_backward vs PyTorch")
    parser.add_argument("--out", default="bench_grid_sampler_3d.json")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--sizes", default="",
                        help="another case: NxCxDxHxW:DoxHoxWo (default 2x16x32x32x32:32x32x32)")
    args = parser.parse_args()
    if args.sizes:
        global INPUT_SIZE, OUTPUT_SIZE
        source, output = args.sizes.split(":")
        INPUT_SIZE = tuple(int(v) for v in source.split("x"))
        OUTPUT_SIZE = tuple(int(v) for v in output.split("x"))
    properties = torch.cuda.get_device_properties(bench.DEVICE)
    l2_bytes = getattr(properties, "L2_cache_size", 50 << 20)
    timer = bench.GpuTimer()
    copy_gbps = bench.copy_bandwidth(timer, args.runs, args.warmup)
    records, errors = bench_cases(timer, copy_gbps, args.runs, args.warmup, l2_bytes)
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(bench.DEVICE), "torch": torch.__version__,
                   "copy_GBps": copy_gbps, "runs": args.runs, "cases": records,
                   "errors": errors}, f, indent=1)
    print("device: %s   copy bandwidth: %.0f GB/s" % (torch.cuda.get_device_name(bench.DEVICE),
                                                      copy_gbps))
    print("%-52s %-5s %7s %8s %6s %6s" % ("case", "dtype", "ratio", "GB/s", "copy%", "torch%"))
    for r in records:
        print("%-52s %-5s %7.2f %8.0f %5.0f%% %5.0f%%" % (
            r["case"], r["dtype"], r["ratio"], r["adjoint_GBps"],
            100 * r["adjoint_fraction_of_copy"], 100 * r["torch_fraction_of_copy"]))
    for line in table(records):
        print(line)
    for error in errors:
        print("ERROR " + error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
