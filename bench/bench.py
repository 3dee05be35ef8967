#!/usr/bin/env python3
"""Side-by-side benchmark of adjoint and PyTorch in one process, on the GPU machine.

What it measures (issue 4 and issue 5):
  * device-to-device copy bandwidth (torch copy_ of 1 GiB, bytes read + written), the ceiling;
  * the upsample_nearest2d_backward cases of issue 5 (five large shapes and the small one) in
    f32, f16 and bf16: adjoint's ATen-shaped function and torch.ops.aten's, each timed with CUDA
    events around every call, after a warm-up, median of --runs calls. The GPU is kept busy
    (torch.cuda._sleep) while the host queues each block of calls, so the events bracket the
    kernels and not Python's launch overhead. Inputs rotate among enough copies to exceed L2.
    Effective bandwidth = (grad_output bytes read once + grad_input bytes written once) / time;
  * grid_sampler_3d_backward (bench/bench_grid_sampler_3d.py: trilinear and nearest, f32 and
    bf16, default and allow_atomics programs, kernel time and the Python call to completion);
  * the grid_sampler_2d_backward cases of issue 10 (bench_grid_sampler.py: three shapes x
    every mode and padding, --grid-sampler dtypes): adjoint's default and allow_atomics programs
    next to ATen, kernel time, the Python call to completion and bandwidth against copy;
  * the small case's API-to-completion latency on the host clock (call + synchronize), for
    adjoint's function, a prepared Program's launch, and PyTorch's op;
  * JIT figures from Python (cold compile, disk-cache hit in a fresh process, in-memory hit),
    and, when build/bin/adjoint_jit_bench exists, its JSON (printed on its stdout) under
    "jit_bench".
  * the mHC ops (issue 9), from bench_mhc.py: adjoint against PyTorch eager and torch.compile of
    the same formulas, with the host call to completion and the fraction of copy bandwidth,
    within --mhc-budget seconds; their records join "cases".
Writes --out (JSON) and --chart (PNG of PyTorch time / adjoint time per case; matplotlib if
present, else bench/png.py), and prints a table.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402

import adjoint  # noqa: E402
import bench_mhc  # noqa: E402  (the mHC cases, issue 9)
from bench_grid_sampler import bench_grid_sampler, print_grid_sampler_table  # noqa: E402

UPSAMPLE_CASES = [  # (input N, C, H, W), output (H, W): issue 5's cases, then the small one
    ((8, 64, 128, 128), (256, 256)),
    ((16, 256, 64, 64), (128, 128)),
    ((32, 3, 224, 224), (448, 448)),
    ((4, 32, 256, 256), (384, 192)),
    ((8, 64, 256, 256), (128, 128)),
    ((2, 3, 32, 32), (64, 64)),
]
SMALL_CASE = UPSAMPLE_CASES[-1]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
DTYPE_COLORS = {"f32": (31, 119, 180), "f16": (255, 127, 14), "bf16": (44, 160, 44)}
DEVICE = torch.device("cuda")


class GpuTimer:
    """Per-call CUDA event times with the GPU kept busy while the host queues each block."""

    def __init__(self):
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 20_000_000
        torch.cuda._sleep(1000)  # load the sleep kernel before timing it
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        self.cycles_per_ms = cycles / max(start.elapsed_time(end), 1e-3)

    def time(self, fn, runs, warmup, block=25):
        """Milliseconds of each of `runs` calls of fn (after `warmup` calls)."""
        host = time.perf_counter()
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        host_ms = (time.perf_counter() - host) * 1e3 / max(warmup, 1)
        times = []
        while len(times) < runs:
            count = min(block, runs - len(times))
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(count)]
            busy_ms = min(2.0 * host_ms * count + 0.5, 500.0)
            torch.cuda._sleep(int(self.cycles_per_ms * busy_ms))
            for s, e in zip(starts, ends):
                s.record()
                fn()
                e.record()
            ends[-1].synchronize()
            times += [s.elapsed_time(e) for s, e in zip(starts, ends)]
        return times


def copy_bandwidth(timer, runs, warmup):
    """GB/s of a device-to-device copy (bytes read + written)."""
    size = 1 << 30
    src = torch.empty(size, dtype=torch.uint8, device=DEVICE)
    dst = torch.empty_like(src)
    ms = statistics.median(timer.time(lambda: dst.copy_(src), runs, warmup))
    del src, dst
    return 2 * size / (ms * 1e6)


def rotating_inputs(shape, dtype, l2_bytes):
    """Enough copies of a random grad_output that cycling through them exceeds L2 (<= 8)."""
    one = torch.randn(shape, device=DEVICE, dtype=dtype)
    bytes_each = one.numel() * one.element_size()
    copies = max(1, min(8, math.ceil(3 * l2_bytes / max(bytes_each, 1))))
    return [one] + [torch.randn_like(one) for _ in range(copies - 1)]


def cycle(calls):
    state = {"i": 0}

    def call():
        state["i"] = (state["i"] + 1) % len(calls)
        return calls[state["i"]]()
    return call


def bench_upsample(timer, input_size, output_size, dtype_name, copy_gbps, runs, warmup,
                   l2_bytes):
    dtype = DTYPES[dtype_name]
    output_shape = list(input_size[:2]) + list(output_size)
    inputs = rotating_inputs(output_shape, dtype, l2_bytes)
    output_size, input_size = list(output_size), list(input_size)

    def adjoint_call(g):
        return lambda: adjoint.upsample_nearest2d_backward(g, output_size, input_size)

    def torch_call(g):
        return lambda: torch.ops.aten.upsample_nearest2d_backward(g, output_size, input_size)

    ours = adjoint_call(inputs[0])()
    theirs = torch_call(inputs[0])()
    max_abs_diff = (ours.float() - theirs.float()).abs().max().item()
    adjoint_ms = statistics.median(timer.time(cycle([adjoint_call(g) for g in inputs]), runs,
                                              warmup))
    torch_ms = statistics.median(timer.time(cycle([torch_call(g) for g in inputs]), runs,
                                            warmup))
    element = torch.finfo(dtype).bits // 8
    moved = (math.prod(output_shape) + math.prod(input_size)) * element
    adjoint_gbps, torch_gbps = moved / (adjoint_ms * 1e6), moved / (torch_ms * 1e6)
    return {
        "case": "upsample_nearest2d_backward %s->%s" % ("x".join(map(str, input_size)),
                                                        "x".join(map(str, output_size))),
        "op": "upsample_nearest2d_backward", "dtype": dtype_name, "shape": input_size,
        "output_size": output_size, "bytes": moved,
        "adjoint_ms": adjoint_ms, "torch_ms": torch_ms, "ratio": torch_ms / adjoint_ms,
        "adjoint_GBps": adjoint_gbps, "torch_GBps": torch_gbps,
        "adjoint_fraction_of_copy": adjoint_gbps / copy_gbps,
        "torch_fraction_of_copy": torch_gbps / copy_gbps,
        "max_abs_diff_vs_torch": max_abs_diff,
    }


def host_latency_us(fn, runs, warmup=20):
    """Median host microseconds of fn() + synchronize."""
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


def small_case_latency(runs):
    input_size, output_size = [list(v) for v in SMALL_CASE]
    grad_output = torch.randn(input_size[:2] + output_size, device=DEVICE)
    text = adjoint.spec.upsample_nearest_backward(2, False, "f32", input_size, output_size,
                                                  [None, None])
    program = adjoint.prepare(text)
    grad_input = torch.empty(input_size, device=DEVICE)
    bound = {"grad_output": grad_output, "grad_input": grad_input}
    stream = torch.cuda.current_stream().cuda_stream
    return {
        "case": "upsample_nearest2d_backward f32 %s->%s" % (input_size, output_size),
        "synchronize_only_us": host_latency_us(lambda: None, runs),
        "adjoint_function_us": host_latency_us(
            lambda: adjoint.upsample_nearest2d_backward(grad_output, output_size, input_size),
            runs),
        "adjoint_program_launch_us": host_latency_us(lambda: program.launch(bound, stream), runs),
        "torch_us": host_latency_us(
            lambda: torch.ops.aten.upsample_nearest2d_backward(grad_output, output_size,
                                                               input_size), runs),
    }


# Prepared in the child first, so the library is loaded before the timed disk hit.
SMALL_SPEC_FOR_CHILD = adjoint.spec.upsample_nearest_backward(
    2, False, "f32", list(SMALL_CASE[0]), list(SMALL_CASE[1]), [None, None])


def jit_figures():
    """Cold compile, in-memory hits, and a disk-cache hit measured in a fresh process, for a
    specialization no cache has seen (sizes derived from the clock and pid)."""
    salt = (int(time.time() * 1000) ^ os.getpid()) % 5000
    text = adjoint.spec.upsample_nearest_backward(2, False, "f32", [1, 3, 101 + salt, 67],
                                                  [203 + salt, 134], [None, None])
    start = time.perf_counter()
    adjoint.prepare(text)
    cold_ms = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    adjoint.prepare(text)
    python_hit_us = (time.perf_counter() - start) * 1e6
    library = adjoint._capi.library()
    start = time.perf_counter()
    handle = library.prepare(text, 0)
    library_hit_us = (time.perf_counter() - start) * 1e6
    library.release(handle)
    child = ("import sys, time; sys.path.insert(0, %r); import torch, adjoint; "
             "torch.cuda.init(); torch.cuda.current_device(); "
             "adjoint.prepare(%r); t = time.perf_counter(); adjoint.prepare(%r); "
             "print((time.perf_counter() - t) * 1e3)"
             % (os.path.join(ROOT, "python"), SMALL_SPEC_FOR_CHILD, text))
    try:
        result = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                                timeout=300, check=True)
        disk_hit_ms = float(result.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError) as error:
        disk_hit_ms = "failed: %s" % (getattr(error, "stderr", "") or error)
    return {"spec": text, "cold_compile_ms": cold_ms, "disk_hit_new_process_ms": disk_hit_ms,
            "library_memory_hit_us": library_hit_us, "python_cache_hit_us": python_hit_us}


def jit_bench(path):
    """The runtime team's C++ JIT benchmark, if built: its stdout is one JSON object."""
    if not os.path.exists(path):
        return None
    try:
        result = subprocess.run([path], capture_output=True, text=True, timeout=300)
    except subprocess.SubprocessError as error:
        return {"error": str(error)}
    try:
        return json.loads(result.stdout)
    except ValueError:
        return {"error": "exit %d, stdout is not JSON" % result.returncode,
                "stdout_tail": result.stdout[-2000:], "stderr_tail": result.stderr[-2000:]}


def write_chart(path, cases, title):
    labels = ["%s\n%s" % (c["case"].split(" ", 1)[1], c["dtype"]) for c in cases]
    ratios = [c["ratio"] for c in cases]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        import png
        with open(path, "wb") as f:
            f.write(png.bar_chart(ratios, [DTYPE_COLORS[c["dtype"]] for c in cases],
                                  guides=(1.0, 2.0)))
        return "bench/png.py (no matplotlib)"
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(max(10, 0.55 * len(cases)), 8),
                                         sharex=True)
    colors = ["#%02x%02x%02x" % DTYPE_COLORS[c["dtype"]] for c in cases]
    top.bar(range(len(cases)), ratios, color=colors)
    top.axhline(1.0, color="black", linewidth=0.8)
    top.axhline(2.0, color="gray", linestyle="--", linewidth=0.8)
    top.set_ylabel("PyTorch time / adjoint time")
    top.set_title(title)
    bottom.bar(range(len(cases)), [c["adjoint_fraction_of_copy"] for c in cases], color=colors)
    bottom.plot(range(len(cases)), [c["torch_fraction_of_copy"] for c in cases], "k_",
                markersize=14)
    bottom.axhline(0.85, color="gray", linestyle="--", linewidth=0.8)
    bottom.set_ylabel("fraction of copy bandwidth")
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    handles = [Patch(color="#%02x%02x%02x" % rgb, label="adjoint " + name)
               for name, rgb in DTYPE_COLORS.items()]
    handles.append(Line2D([], [], color="black", marker="_", linestyle="none", markersize=14,
                          label="PyTorch"))
    bottom.legend(handles=handles, loc="upper right", fontsize=8)
    bottom.set_xticks(range(len(cases)))
    bottom.set_xticklabels(labels, rotation=90, fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return "matplotlib"


def dynamic_figures(enabled):
    """bench_dynamic.py's report (docs/dynamic_shapes.md), run in its own processes."""
    if not enabled:
        return {"skipped": "pass --dynamic"}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_dynamic.py")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dynamic.json")
    subprocess.run([sys.executable, path, "--out", out], check=False)
    with open(out) as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench.json")
    parser.add_argument("--chart", default="bench.png")
    parser.add_argument("--runs", type=int, default=100, help="timed calls per case (>= 50)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--mhc-budget", type=float, default=220.0,
                        help="seconds for the mHC cases (bench_mhc.py); 0 skips them")
    parser.add_argument("--grid-sampler", default="f32,bf16",
                        help="dtypes of the grid_sampler_2d_backward cases (comma list; "
                             "empty: skip them)")
    parser.add_argument("--jit-bench", default=os.path.join(
        os.environ.get("ADJOINT_BUILD_DIR", os.path.join(ROOT, "build")), "bin",
        "adjoint_jit_bench"))
    parser.add_argument("--dynamic", action="store_true",
                        help="also run bench_dynamic.py (issue 12: compile counts over size "
                             "sweeps, generic vs specialized kernel time); under \"dynamic\"")
    args = parser.parse_args()

    properties = torch.cuda.get_device_properties(DEVICE)
    l2_bytes = getattr(properties, "L2_cache_size", 50 << 20)
    timer = GpuTimer()
    copy_gbps = copy_bandwidth(timer, args.runs, args.warmup)
    results = {
        "device": torch.cuda.get_device_name(DEVICE), "torch": torch.__version__,
        "adjoint": adjoint.version(), "library": adjoint.library_path(),
        "runs": args.runs, "warmup": args.warmup, "copy_GBps": copy_gbps,
        "ratio": "torch_ms / adjoint_ms (> 1: adjoint is faster)",
        "bytes": "grad_output read once + grad_input written once",
        "cases": [], "errors": [],
    }
    for input_size, output_size in UPSAMPLE_CASES:
        for dtype_name in DTYPES:
            try:
                results["cases"].append(bench_upsample(timer, input_size, output_size,
                                                       dtype_name, copy_gbps, args.runs,
                                                       args.warmup, l2_bytes))
            except Exception as error:  # keep measuring the other cases; report this one
                results["errors"].append("%s %s->%s: %s: %s" % (dtype_name, input_size,
                                                                output_size,
                                                                type(error).__name__, error))
            torch.cuda.empty_cache()
    import bench_grid_sampler_3d  # grid_sampler_3d_backward (its own module)
    cases_3d, errors_3d = bench_grid_sampler_3d.bench_cases(timer, copy_gbps, args.runs,
                                                            args.warmup, l2_bytes)
    results["cases"] += cases_3d
    results["errors"] += errors_3d
    if args.mhc_budget > 0:
        try:
            mhc = bench_mhc.measure(timer, copy_gbps, args.runs, args.warmup, args.mhc_budget)
            results["cases"] += mhc["cases"]
            results["errors"] += mhc["errors"]
            results["mhc_seconds"] = mhc["seconds"]
        except Exception as error:
            results["errors"].append("mhc: %s: %s" % (type(error).__name__, error))
    grid_dtypes = {d: DTYPES[d] for d in args.grid_sampler.split(",") if d}
    grid_cases, grid_errors = bench_grid_sampler(timer, rotating_inputs, cycle, grid_dtypes,
                                                 copy_gbps, args.runs, args.warmup, l2_bytes)
    results["cases"] += grid_cases
    results["errors"] += grid_errors
    for name, measure in (("latency", lambda: small_case_latency(max(args.runs, 200))),
                          ("overhead", lambda: __import__("bench_overhead").measure()),
                          ("jit", jit_figures),
                          ("jit_bench", lambda: jit_bench(args.jit_bench)),
                          ("dynamic", lambda: dynamic_figures(args.dynamic))):
        try:
            results[name] = measure()
        except Exception as error:
            results["errors"].append("%s: %s: %s" % (name, type(error).__name__, error))
    if results["cases"]:
        results["chart"] = write_chart(args.chart, results["cases"], "%s, copy %.0f GB/s" % (
            results["device"], copy_gbps))
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)

    print("device: %s   copy bandwidth: %.0f GB/s" % (results["device"], copy_gbps))
    print("%-52s %-5s %10s %10s %7s %8s %6s %6s" % ("case", "dtype", "adjoint ms", "torch ms",
                                                    "ratio", "GB/s", "copy%", "torch%"))
    for c in results["cases"]:
        print("%-52s %-5s %10.4f %10.4f %7.2f %8.0f %5.0f%% %5.0f%%" % (
            c["case"], c["dtype"], c["adjoint_ms"], c["torch_ms"], c["ratio"], c["adjoint_GBps"],
            100 * c["adjoint_fraction_of_copy"], 100 * c["torch_fraction_of_copy"]))
    bench_mhc.print_table(results["cases"], copy_gbps)
    if cases_3d:
        print("\n".join(bench_grid_sampler_3d.table(cases_3d)))
    print_grid_sampler_table([c for c in results["cases"]
                              if c["op"] == "grid_sampler_2d_backward"])
    if "latency" in results:
        print("small case, call to completion (us): " + ", ".join(
            "%s %.1f" % (k, v) for k, v in results["latency"].items() if k.endswith("_us")))
    if "overhead" in results:
        print("call overhead, call to completion (us): " + ", ".join(
            "%s %.1f" % (k, v) for k, v in results["overhead"].items()
            if k.endswith("_us") and not isinstance(v, dict)))
    if "jit" in results:
        print("jit: " + ", ".join("%s %s" % (k, v if isinstance(v, str) else "%.3g" % v)
                                  for k, v in results["jit"].items() if k != "spec"))
    for error in results["errors"]:
        print("ERROR " + error)
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
