#!/usr/bin/env python3
"""Dynamic shapes on the GPU machine (issue 12, docs/dynamic_shapes.md).

What it measures, each part in child processes with fresh, empty caches (ADJOINT_CACHE_DIR and
CUDA_CACHE_PATH), so that every program the engine builds is an NVRTC compile:
  * size sweeps: upsample_nearest2d_backward (f16, C=16, scale 2) over 50 batch sizes x 3
    spatial sizes, under ADJOINT_DYNAMIC=auto and batch (all 150 calls) and never (the first 10
    batch sizes x 3, as the baseline per call): the engine's compile counters
    (adjoint.compile_stats), the wall time of the sweep and of its compiles, and every result
    against PyTorch's (--sweep-modes);
  * generic against specialized kernel time: bench.py's large upsample cases in f32 and bf16,
    timed as bench.py times them (CUDA events, inputs rotating past L2, median), in a child
    under ADJOINT_DYNAMIC=never (specialized), one under auto (or batch) whose first call per case
    is at batch + 1, with the sizes the policy has seen forgotten before each case (so the timed
    call is served by a kernel generic in the batch only, compiled at another batch) and one
    under always (generic in every axis, compiled at batch + 1) (--time-modes);
  * GPU parity of generic kernels: 1-3d, nearest and nearest-exact, contiguous and channels-last,
    f16/bf16/f32/f64, odd sizes and an empty batch. The always child serves them with generic
    kernels compiled at other sizes; their outputs must be bitwise those of the never child's
    specialized kernels, and match PyTorch (max abs difference reported).
Writes --out (JSON) and prints a summary.
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

SPATIAL = [16, 32, 64]
BATCHES = list(range(1, 51))
TIMING_CASES = [  # bench.py's large cases: (input N, C, H, W), output (H, W)
    ((8, 64, 128, 128), (256, 256)),
    ((16, 256, 64, 64), (128, 128)),
    ((32, 3, 224, 224), (448, 448)),
    ((4, 32, 256, 256), (384, 192)),
    ((8, 64, 256, 256), (128, 128)),
]
# (spatial rank, exact, dtype, layout, input_size, output_size, scales)
PARITY_CASES = [
    (1, False, "float32", "contiguous", [3, 5, 7], [17], [None]),
    (1, True, "float16", "contiguous", [2, 4, 13], [5], [None]),
    (1, False, "bfloat16", "contiguous", [4, 3, 100], [200], [2.0]),
    (2, False, "float32", "contiguous", [5, 7, 13, 17], [20, 9], [None, None]),
    (2, True, "bfloat16", "channels_last", [3, 16, 33, 31], [64, 65], [None, None]),
    (2, False, "float16", "channels_last", [6, 8, 13, 17], [26, 34], [None, None]),
    (2, False, "float64", "contiguous", [2, 3, 16, 16], [8, 24], [None, None]),
    (2, True, "float32", "contiguous", [0, 3, 5, 5], [9, 9], [None, None]),
    (3, False, "float32", "contiguous", [2, 3, 5, 6, 7], [9, 11, 13], [None, None, None]),
    (3, True, "bfloat16", "channels_last", [3, 4, 6, 7, 5], [12, 9, 10], [None, None, None]),
]


def upsample_function(adjoint, rank, exact):
    name = ("_upsample_nearest_exact%dd_backward" if exact else "upsample_nearest%dd_backward")
    return getattr(adjoint, name % rank)


def torch_function(torch, rank, exact):
    name = ("_upsample_nearest_exact%dd_backward" if exact else "upsample_nearest%dd_backward")
    return getattr(torch.ops.aten, name % rank)


def digest(tensor):
    return hashlib.sha256(tensor.detach().cpu().contiguous().view(-1).view(
        __import__("torch").uint8).numpy().tobytes()).hexdigest()


def child_sweep(mode):
    import torch
    import adjoint
    batches = BATCHES if mode in ("auto", "batch") else BATCHES[:10]
    adjoint.reset_compile_stats()
    calls, worst, start = 0, 0.0, time.perf_counter()
    per_call_ms = []
    for s in SPATIAL:
        for n in batches:
            g = torch.randn(n, 16, 2 * s, 2 * s, device="cuda", dtype=torch.float16)
            t0 = time.perf_counter()
            ours = adjoint.upsample_nearest2d_backward(g, [2 * s, 2 * s], [n, 16, s, s])
            torch.cuda.synchronize()
            per_call_ms.append((time.perf_counter() - t0) * 1e3)
            theirs = torch.ops.aten.upsample_nearest2d_backward(g, [2 * s, 2 * s], [n, 16, s, s])
            worst = max(worst, (ours.float() - theirs.float()).abs().max().item())
            calls += 1
    total_s = time.perf_counter() - start
    stats = adjoint.compile_stats()
    return {"mode": mode, "calls": calls, "batches": len(batches), "spatial_sizes": SPATIAL,
            "compile_stats": stats, "sweep_seconds": total_s,
            "first_call_ms": per_call_ms[0], "max_call_ms": max(per_call_ms),
            "median_call_ms": statistics.median(per_call_ms),
            "max_abs_diff_vs_torch": worst}


def child_time(mode, runs):
    import torch
    import adjoint
    from bench import GpuTimer, cycle, rotating_inputs
    timer = GpuTimer()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    records, totals = [], {}
    for dtype_name, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        for input_size, output_size in TIMING_CASES:
            input_size, output_size = list(input_size), list(output_size)
            # The policy forgets the sizes it has seen (the family pools every case of one
            # dtype and channel count: under auto, a case would otherwise be generic in the
            # spatial sizes that earlier cases varied); the counters add up below.
            for key, value in adjoint.compile_stats().items():
                totals[key] = totals.get(key, 0) + value
            adjoint.reset_compile_stats()
            if mode in ("always", "auto", "batch"):  # first a call at another batch size: the
                # timed call gets a kernel generic in every axis (always) or in the batch only
                # (auto and batch: the batch is the one axis that has shown two sizes)
                other = [input_size[0] + 1] + input_size[1:]
                g = torch.randn(other[:2] + output_size, device="cuda", dtype=dtype)
                adjoint.upsample_nearest2d_backward(g, output_size, other)
            torch.manual_seed(4321)  # the same inputs in both children: digests comparable
            inputs = rotating_inputs(input_size[:2] + output_size, dtype, l2)
            calls = [(lambda g=g: adjoint.upsample_nearest2d_backward(g, output_size,
                                                                      input_size))
                     for g in inputs]
            calls[0]()
            torch.cuda.synchronize()
            ms = statistics.median(timer.time(cycle(calls), runs, 10))
            records.append({"case": "%s->%s" % ("x".join(map(str, input_size)),
                                                 "x".join(map(str, output_size))),
                            "dtype": dtype_name, "ms": ms,
                            "digest": digest(calls[0]())})
    for key, value in adjoint.compile_stats().items():
        totals[key] = totals.get(key, 0) + value
    return {"mode": mode, "records": records, "compile_stats": totals}


def child_parity(mode):
    import torch
    import adjoint
    out = []
    for rank, exact, dtype_name, layout, input_size, output_size, scales in PARITY_CASES:
        dtype = getattr(torch, dtype_name)
        fn, ref = upsample_function(adjoint, rank, exact), torch_function(torch, rank, exact)
        if mode == "always":  # compile at other sizes first: batch + 1, spatial + 3
            other_in = [input_size[0] + 1, input_size[1]] + [x + 3 for x in input_size[2:]]
            other_out = [x + 3 for x in output_size]
            g = torch.randn(other_in[:2] + other_out, device="cuda", dtype=dtype)
            if layout == "channels_last":
                g = g.to(memory_format=torch.channels_last if rank == 2
                         else torch.channels_last_3d)
            fn(g, other_out, other_in, *scales)
        torch.manual_seed(1234)
        g = torch.randn(input_size[:2] + output_size, device="cuda", dtype=dtype)
        if layout == "channels_last":
            g = g.to(memory_format=torch.channels_last if rank == 2 else torch.channels_last_3d)
        ours = fn(g, output_size, input_size, *scales)
        try:
            theirs = ref(g, output_size, input_size, *scales)
            diff = (ours.double() - theirs.double()).abs().max().item() if ours.numel() else 0.0
        except RuntimeError as e:  # PyTorch refuses some shapes (e.g. an empty batch)
            diff = "torch: %s" % str(e).splitlines()[0]
        out.append({"case": "%s%dd %s %s %s->%s scales=%s" % (
            "exact" if exact else "nearest", rank, dtype_name, layout, input_size, output_size,
            scales), "digest": digest(ours), "max_abs_diff_vs_torch": diff})
    return {"mode": mode, "records": out, "compile_stats": adjoint.compile_stats()}


def run_child(part, mode, runs, timeout, script=__file__, extra=()):
    """Runs `script --child part --mode mode --runs runs [extra...]` under ADJOINT_DYNAMIC=mode
    with fresh, empty ADJOINT_CACHE_DIR and CUDA_CACHE_PATH; returns the JSON of its last output
    line, or {"error": its stderr's tail}. bench_mhc_dynamic.py runs its children through it too."""
    env = dict(os.environ)
    env["ADJOINT_DYNAMIC"] = mode
    env["ADJOINT_CACHE_DIR"] = tempfile.mkdtemp(prefix="adjoint-dyn-cache-")
    env["CUDA_CACHE_PATH"] = tempfile.mkdtemp(prefix="adjoint-dyn-cuda-")
    command = [sys.executable, os.path.abspath(script), "--child", part, "--mode", mode,
               "--runs", str(runs)] + list(extra)
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        return {"error": result.stderr[-3000:]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="dynamic.json")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--parts", default="sweep,time,parity")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds per child")
    parser.add_argument("--sweep-modes", default="auto,batch,never",
                        help="ADJOINT_DYNAMIC values of the sweep children")
    parser.add_argument("--time-modes", default="never,auto,always",
                        help="never first: the specialized times the others are divided by")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        part = {"sweep": lambda: child_sweep(args.mode),
                "time": lambda: child_time(args.mode, args.runs),
                "parity": lambda: child_parity(args.mode)}[args.child]
        print(json.dumps(part()))
        return 0
    report, failures = {}, []
    parts = args.parts.split(",")
    if "sweep" in parts:
        report["sweep"] = {m: run_child("sweep", m, args.runs, args.timeout)
                           for m in args.sweep_modes.split(",")}
        for m, r in report["sweep"].items():
            if "error" in r:
                failures.append("sweep %s: %s" % (m, r["error"]))
                continue
            s = r["compile_stats"]
            print("sweep %-5s: %3d calls, %d specialized + %d generic compiles, %.2f s, "
                  "median call %.2f ms, first %.1f ms, max %.1f ms, max |diff| vs torch %g"
                  % (m, r["calls"], s["specialized_compiles"], s["generic_compiles"],
                     r["sweep_seconds"], r["median_call_ms"], r["first_call_ms"],
                     r["max_call_ms"], r["max_abs_diff_vs_torch"]))
    if "time" in parts:
        modes = args.time_modes.split(",")
        timing = {m: run_child("time", m, args.runs, args.timeout) for m in modes}
        rows = []
        if all("error" not in t for t in timing.values()) and modes[0] == "never":
            for i, spec in enumerate(timing["never"]["records"]):
                row = {"case": spec["case"], "dtype": spec["dtype"], "specialized_ms": spec["ms"]}
                line = "time %-28s %-4s specialized %.4f ms" % (spec["case"], spec["dtype"],
                                                               spec["ms"])
                for m in modes[1:]:
                    gen = timing[m]["records"][i]
                    name = {"auto": "batch_generic", "batch": "batch_generic_mode_batch",
                            "always": "all_generic"}.get(m, m)
                    row[name + "_ms"] = gen["ms"]
                    row[name + "_over_specialized"] = gen["ms"] / spec["ms"]
                    row[name + "_bitwise_equal"] = spec["digest"] == gen["digest"]
                    line += ", %s %.4f ms (ratio %.3f, bitwise %s)" % (
                        name, gen["ms"], gen["ms"] / spec["ms"], spec["digest"] == gen["digest"])
                rows.append(row)
                print(line)
            for m in modes:
                timing[m].pop("records")
        else:
            failures += ["time %s: %s" % (m, t["error"]) for m, t in timing.items() if "error" in t]
        report["timing"] = {"rows": rows, "children": timing}
    if "parity" in parts:
        parity = {m: run_child("parity", m, args.runs, args.timeout) for m in ("never", "always")}
        rows = []
        if all("error" not in p for p in parity.values()):
            for spec, gen in zip(parity["never"]["records"], parity["always"]["records"]):
                same = spec["digest"] == gen["digest"]
                rows.append({"case": spec["case"], "bitwise_equal_to_specialized": same,
                             "generic_max_abs_diff_vs_torch": gen["max_abs_diff_vs_torch"],
                             "specialized_max_abs_diff_vs_torch": spec["max_abs_diff_vs_torch"]})
                print("parity %-70s bitwise %s, |diff| vs torch %g" % (
                    spec["case"], same, gen["max_abs_diff_vs_torch"]))
                if not same:
                    failures.append("parity: " + spec["case"])
            print("parity: always child compile stats %s" % parity["always"]["compile_stats"])
        else:
            failures += ["parity %s: %s" % (m, p["error"]) for m, p in parity.items()
                         if "error" in p]
        report["parity"] = {"rows": rows,
                            "always_compile_stats": parity.get("always", {}).get("compile_stats")}
    report["failures"] = failures
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    for failure in failures:
        print("FAILED:", failure[:2000])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
