#!/usr/bin/env python3
"""The mHC ops under dynamic token counts on the GPU machine (issue 12, docs/dynamic_shapes.md).

--op names the ops (a comma list of bench_mhc.OPS; mhc_pre_backward by default), --shapes the
timed shapes (BxSxnxD, comma-separated; TIME_SHAPES by default), --sweep-count the token counts
of the sweep.

Each part runs in child processes with fresh, empty caches (ADJOINT_CACHE_DIR and CUDA_CACHE_PATH),
so that every program the engine builds is an NVRTC compile:
  * sweep, per op: 100 distinct token counts B*S (a seeded mix of B in {1, 2, 3, 4, 8} and S up to
    8192, n=4, D=1024, bf16) under ADJOINT_DYNAMIC=auto, and the first 10 of them under never as the
    per-call baseline: the engine's compile counters (adjoint.compile_stats), the sweep's wall
    time, per-call times, and every result against the PyTorch formulas (bench_mhc.py);
  * time: generic against specialized kernel time on issue 9's shapes and a few token counts
    nobody tuned for, CUDA events with the GPU kept busy (bench.GpuTimer), median: a never child
    (specialized kernels) and an always child whose first call per shape is at another token
    count (the timed call runs kernels generic in batch and seq, compiled for other sizes), each
    result's relative difference to PyTorch, and the generic results of three calls compared bit
    for bit (determinism). With --variants, one more always child per variant, under its
    ADJOINT_TUNE_* variables (e.g. the generic schedules of before), its times and whether its
    results have the default generic kernels' bits.
Writes --out (JSON) and prints a summary.
"""

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

SWEEP_DIM, SWEEP_STREAMS = 1024, 4
TIME_SHAPES = [  # (B, S, n, D): issue 9's shapes, then token counts nobody tuned for
    (1, 4096, 4, 4096),
    (1, 4096, 4, 2560),
    (2, 2048, 6, 1024),
    (1, 65536, 4, 512),
    (1, 1, 8, 16384),
    (3, 1000, 4, 2048),
    (1, 777, 6, 1536),
    (16, 1, 4, 4096),
]


def sweep_token_counts(count=100, seed=12):
    """`count` (B, S) pairs of distinct B*S, seeded."""
    rng = random.Random(seed)
    pairs, seen = [], set()
    while len(pairs) < count:
        b = rng.choice([1, 1, 1, 2, 3, 4, 8])
        s = rng.choice([rng.randint(1, 64), rng.randint(65, 1024), rng.randint(1025, max(1026, 8192 // b))])
        if b * s not in seen:
            seen.add(b * s)
            pairs.append((b, s))
    return pairs


def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.contiguous().view(-1).view(__import__("torch").uint8).cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def worst_relative(ours, theirs):
    """The largest relative difference over the outputs; either side may be one tensor or a
    tuple (a bare tensor must not be zipped: that walks its first dimension, and broadcasting
    then compared batch 0 of the reference with every batch of ours)."""
    from bench_mhc import max_relative_difference
    return max_relative_difference(ours, theirs)


def child_sweep(mode, op, count):
    import torch
    import adjoint
    import bench_mhc
    pairs = sweep_token_counts(count)
    if mode == "never":
        pairs = pairs[:10]
    adjoint.reset_compile_stats()
    per_call_ms, worst = [], 0.0
    start = time.perf_counter()
    for b, s in pairs:
        call, reference, args, _ = bench_mhc.make_op(op, (b, s, SWEEP_STREAMS, SWEEP_DIM))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        ours = call()
        torch.cuda.synchronize()
        per_call_ms.append((time.perf_counter() - t0) * 1e3)
        worst = max(worst, worst_relative(ours, reference(*args)))
    total_s = time.perf_counter() - start
    return {"op": op, "mode": mode, "calls": len(pairs), "token_counts": [b * s for b, s in pairs],
            "compile_stats": adjoint.compile_stats(), "sweep_seconds": total_s,
            "first_call_ms": per_call_ms[0], "first_calls_ms": per_call_ms[:3],
            "max_call_ms": max(per_call_ms),
            "median_call_ms": statistics.median(per_call_ms),
            "median_call_ms_after_first_two": statistics.median(per_call_ms[2:]),
            "max_relative_difference_vs_torch": worst}


def child_time(mode, runs, ops, shapes):
    import torch
    import adjoint
    import bench_mhc
    from bench import GpuTimer
    timer = GpuTimer()
    records = []
    for op, shape in ((op, shape) for op in ops for shape in shapes):
        b, s, n, d = shape
        adjoint.reset_compile_stats()
        if mode == "always":  # compile the generic program at other sizes first
            other, _, other_args, _ = bench_mhc.make_op(op, (b + 1, s + 3, n, d)
                                                        if s > 1 else (b + 2, 1, n, d))
            other()
        torch.manual_seed(4321)  # the same inputs in both children
        call, reference, args, _ = bench_mhc.make_op(op, shape)
        first = call()
        torch.cuda.synchronize()
        digests = [digest(first)] + [digest(call()) for _ in range(2)]
        ms = statistics.median(timer.time(call, runs, 10))
        records.append({"op": op, "shape": list(shape), "ms": ms, "digest": digests[0],
                        "bitwise_equal_over_3_calls": len(set(digests)) == 1,
                        "max_relative_difference_vs_torch": worst_relative(first,
                                                                           reference(*args)),
                        "compile_stats": adjoint.compile_stats()})
    return {"mode": mode, "records": records}


def run_child(part, mode, args):
    """This script's `part` in a child with fresh, empty caches (bench_dynamic.run_child)."""
    import bench_dynamic
    extra = ["--op", args.op, "--sweep-count", str(args.sweep_count)]
    if args.shapes:
        extra += ["--shapes", args.shapes]
    return bench_dynamic.run_child(part, mode, args.runs, args.timeout, script=__file__,
                                   extra=extra)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="mhc_dynamic.json")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--parts", default="sweep,time")
    parser.add_argument("--timeout", type=int, default=300)
    parser.add_argument("--variants", default="",
                        help="NAME:KEY=VALUE,...;NAME:... : also time the generic kernels in an "
                             "always child per variant under those variables (ADJOINT_TUNE_* "
                             "knobs, e.g. the ones restoring the generic schedules of before), in "
                             "the same run")
    parser.add_argument("--op", default="mhc_pre_backward",
                        help="comma list of ops (bench_mhc.OPS); the sweep runs each")
    parser.add_argument("--shapes", default="", help="timed shapes BxSxnxD, comma-separated")
    parser.add_argument("--sweep-count", type=int, default=100, help="token counts of the sweep")
    parser.add_argument("--time-modes", default="never,always",
                        help="the time part's children (never: specialized, always: generic)")
    parser.add_argument("--child")
    parser.add_argument("--mode")
    args = parser.parse_args()
    ops = args.op.split(",")
    shapes = ([tuple(int(v) for v in text.split("x")) for text in args.shapes.split(",")]
              if args.shapes else TIME_SHAPES)
    if args.child == "sweep":
        print(json.dumps([child_sweep(args.mode, op, args.sweep_count) for op in ops]))
        return
    if args.child == "time":
        print(json.dumps(child_time(args.mode, args.runs, ops, shapes)))
        return
    parts = args.parts.split(",")
    result = {"sweep": {}, "time": {}}
    if "sweep" in parts:
        for mode in ("auto", "never"):
            result["sweep"][mode] = run_child("sweep", mode, args)
            print("sweep", mode, json.dumps(result["sweep"][mode])[:600], flush=True)
    if "time" in parts:
        for mode in args.time_modes.split(","):
            result["time"][mode] = run_child("time", mode, args)
            print("time", mode, json.dumps(result["time"][mode]), flush=True)
        variants = []  # (name, {variable: value})
        for text in filter(None, args.variants.split(";")):
            name, _, assignments = text.partition(":")
            variants.append((name, dict(item.split("=", 1)
                                        for item in assignments.split(",") if item)))
        for name, env in variants:  # generic kernels under other knobs, each in its own child
            saved = dict(os.environ)
            os.environ.update(env)
            try:
                record = run_child("time", "always", args)
            finally:
                os.environ.clear()
                os.environ.update(saved)
            record["env"] = env
            result["time"]["always_" + name] = record
        never = result["time"].get("never", {}).get("records", [])
        always = result["time"].get("always", {}).get("records", [])
        header = "%-22s %-22s %12s %12s %7s %10s %10s %6s" % (
            "op", "shape", "special ms", "generic ms", "ratio", "rel spec", "rel gen", "det")
        for name, _ in variants:
            header += " %12s %7s %9s" % (name[:12] + " ms", "ratio", "same bits")
        print(header)
        for index, (a, g) in enumerate(zip(never, always)):
            line = "%-22s %-22s %12.4f %12.4f %7.2f %10.2e %10.2e %6s" % (
                a["op"], "x".join(map(str, a["shape"])), a["ms"], g["ms"], g["ms"] / a["ms"],
                a["max_relative_difference_vs_torch"], g["max_relative_difference_vs_torch"],
                g["bitwise_equal_over_3_calls"])
            for name, _ in variants:
                records = result["time"]["always_" + name].get("records", [])
                o = records[index] if index < len(records) else {}
                line += " %12s %7s %9s" % ("%.4f" % o["ms"] if "ms" in o else "-",
                                           "%.2f" % (o["ms"] / a["ms"]) if "ms" in o else "-",
                                           o.get("digest") == g["digest"] if "digest" in o else "-")
            print(line)
        for mode in result["time"]:
            if "error" in result["time"][mode]:
                print("time", mode, "error:", result["time"][mode]["error"])
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
