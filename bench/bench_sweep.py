#!/usr/bin/env python3
"""Shapes nobody tuned for: a seeded random sweep of every op family against PyTorch.

bench.py measures the issues' fixed shapes. This script draws shapes the schedules were never
looked at on (odd and prime sizes, sizes of 1, non-integer scales, down-sampling, few and many
channels, token counts from 1 to 65,536, hidden sizes that are not powers of two) and, for each,
records on the GPU machine:
  * first_call_s: the first call in this process (mostly the JIT compile; the disk cache is
    whatever ADJOINT_CACHE_DIR holds, use an empty one);
  * max_rel_diff_vs_torch: max |ours - torch| / max |torch| over every output (as f64);
  * adjoint_ms and torch_ms: kernel time, CUDA events with the GPU kept busy while the host
    queues (bench.GpuTimer), median of --runs calls, and ratio = torch_ms / adjoint_ms;
  * adjoint_call_us and torch_call_us: the Python call to completion, median;
  * the fraction of the copy bandwidth measured in the same run (minimum bytes / time).
PyTorch is ATen's backward for upsample and grid_sampler (the default, deterministic adjoint
program against it) and eager PyTorch of the mHC formulas (bench_mhc.py). The worst ratios come
first in the printed table, so that a schedule that chooses badly for some shape shows up.

  python3 bench/bench_sweep.py --out sweep.json [--seed 1] [--budget 240] [--families ...]
"""

import argparse
import json
import math
import os
import random
import statistics
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402

import adjoint  # noqa: E402
import bench  # noqa: E402  (GpuTimer, copy_bandwidth)
import bench_mhc  # noqa: E402  (the PyTorch formulas of the mHC ops, host_call_us)

DEVICE = torch.device("cuda")
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
MAX_ELEMENTS = 1 << 26  # per tensor: keeps every case well inside memory and the time budget
LIMITS = {"f32": 1e-4, "f16": 1e-2, "bf16": 2e-2}  # max_rel_diff above these is flagged


def log_uniform_int(rng, low, high):
    return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))


def rel_diff(ours, theirs):
    worst = 0.0
    for a, b in zip(ours, theirs):
        if a is None or b is None or b.numel() == 0:
            continue
        scale = max(b.double().abs().max().item(), 1e-30)
        worst = max(worst, (a.double() - b.double()).abs().max().item() / scale)
    return worst


# ----- case generators: each returns (name, dtype, shape, adjoint fn, torch fn, bytes,
# reference fn): the torch fn is timed; the reference, PyTorch at the op's stated precision, is
# what parity compares with (for f16/bf16 grid_sampler, ATen on the same values in f32: ATen's
# half kernels round coordinates and atomic sums in half precision; for upsample, the adjoint
# of ATen's forward in f64, which ATen's backward is not at some non-integer ratios).

def upsample_case(rng):
    rank = rng.choice((1, 2, 2, 2, 3))
    dtype = rng.choice(("f32", "f16", "bf16"))
    n, c = rng.choice((1, 2, 3, 5, 8, 16)), rng.choice((1, 3, 7, 16, 32, 64, 129))
    size_range = {1: (1, 4096), 2: (1, 384), 3: (1, 64)}[rank]
    input_spatial = [log_uniform_int(rng, *size_range) for _ in range(rank)]
    output_spatial = [max(1, int(round(s * rng.choice((0.37, 0.5, 0.77, 1.0, 1.5, 2.0, 2.0, 2.7, 3.0)))))
                      for s in input_spatial]
    while n * c * max(math.prod(input_spatial), math.prod(output_spatial)) > MAX_ELEMENTS:
        c = max(1, c // 2)
        n = max(1, n // 2)
        if n == 1 and c == 1:
            break
    input_size = [n, c] + input_spatial
    g = torch.randn([n, c] + output_spatial, device=DEVICE, dtype=DTYPES[dtype])
    ours_fn = getattr(adjoint, "upsample_nearest%dd_backward" % rank)
    theirs_fn = getattr(torch.ops.aten, "upsample_nearest%dd_backward" % rank)
    name = "upsample_nearest%dd_backward %s->%s" % (rank, "x".join(map(str, input_size)),
                                                   "x".join(map(str, output_spatial)))
    moved = (g.numel() + math.prod(input_size)) * g.element_size()
    return (name, dtype, input_size,
            lambda: (ours_fn(g, output_spatial, input_size),),
            lambda: (theirs_fn(g, output_spatial, input_size),), moved,
            lambda: (upsample_forward_adjoint(rank, g, output_spatial, input_size),))


def upsample_forward_adjoint(rank, g, output_spatial, input_size):
    """The adjoint of ATen's nearest forward, in f64: grad_output summed into the source index
    the forward reads for each output element. adjoint computes this (docs: the exact adjoint
    of the forward); ATen's own backward differs from it at some non-integer ratios, so it is
    timed but not the parity reference (tests/gpu/test_upsample_nearest.py does the same)."""
    spatial_in = input_size[2:]
    index = torch.arange(math.prod(spatial_in), dtype=torch.float64, device=DEVICE)
    forward = getattr(torch.ops.aten, "upsample_nearest%dd" % rank)
    source = forward(index.reshape(1, 1, *spatial_in), output_spatial).reshape(-1).long()
    flat = g.double().reshape(input_size[0] * input_size[1], -1)
    out = torch.zeros(flat.shape[0], math.prod(spatial_in), dtype=torch.float64, device=DEVICE)
    out.index_add_(1, source, flat)
    return out.reshape(input_size)


def grid_case(rng, rank):
    dtype = rng.choice(("f32", "f16", "bf16"))
    modes = ("bilinear", "nearest", "bicubic") if rank == 2 else ("bilinear", "nearest")
    mode = rng.choice(modes)
    padding = rng.choice(("zeros", "border", "reflection"))
    align = rng.choice((False, True))
    n, c = rng.choice((1, 2, 3, 4, 8)), rng.choice((1, 2, 3, 4, 5, 8, 16, 24, 32, 64, 96))
    size_range = (1, 320) if rank == 2 else (1, 48)
    spatial = [log_uniform_int(rng, *size_range) for _ in range(rank)]
    grid_spatial = [log_uniform_int(rng, *size_range) for _ in range(rank)]
    while n * c * max(math.prod(spatial), math.prod(grid_spatial)) > MAX_ELEMENTS // 4 and c > 1:
        c //= 2
    input_size = [n, c] + spatial
    scale = rng.choice((1.0, 1.0, 1.3))  # 1.3: some points fall outside [-1, 1]
    t = DTYPES[dtype]
    inp = torch.randn(input_size, device=DEVICE, dtype=t)
    grid = ((torch.rand([n] + grid_spatial + [rank], device=DEVICE) * 2 - 1) * scale).to(t)
    g = torch.randn([n, c] + grid_spatial, device=DEVICE, dtype=t)
    mode_int, pad_int = modes.index(mode), ("zeros", "border", "reflection").index(padding)
    ours_fn = getattr(adjoint, "grid_sampler_%dd_backward" % rank)
    theirs_fn = getattr(torch.ops.aten, "grid_sampler_%dd_backward" % rank)
    name = "grid_sampler_%dd_backward %s %s%s %s->%s" % (
        rank, mode, padding, " align" if align else "", "x".join(map(str, input_size)),
        "x".join(map(str, grid_spatial)))
    moved = (2 * g.numel() + 2 * inp.numel() + 2 * grid.numel()) * inp.element_size()
    return (name, dtype, input_size,
            lambda: ours_fn(g, inp, grid, mode_int, pad_int, align, [True, True]),
            lambda: theirs_fn(g, inp, grid, mode_int, pad_int, align, [True, True]), moved,
            lambda: theirs_fn(g.float(), inp.float(), grid.float(), mode_int, pad_int, align,
                              [True, True]))


def mhc_case(rng):
    op = rng.choice(("mhc_pre_backward", "mhc_pre_backward", "mhc_pre", "mhc_post",
                     "mhc_post_backward", "mhc_sinkhorn", "mhc_sinkhorn_backward"))
    n = rng.choice((4, 6, 8))
    dim = rng.choice((128, 200, 512, 768, 1000, 1536, 2048, 2560, 3072, 4096, 5120, 7168))
    tokens = log_uniform_int(rng, 1, 65536)
    while tokens * n * dim > 2 * MAX_ELEMENTS:
        tokens //= 2
    batch = rng.choice([b for b in (1, 2, 3, 4) if tokens % b == 0 and tokens >= b])
    shape = (batch, tokens // batch, n, dim)
    call, function, args, moved = bench_mhc.make_op(op, shape)
    name = bench_mhc.case_name(op, shape)
    dtype = "f32" if op.startswith("mhc_sinkhorn") else "bf16"
    # _as_tuple: a single-output formula returns a tensor, which tuple() would split by batch.
    return (name, dtype, list(shape), lambda: bench_mhc._as_tuple(call()),
            lambda: bench_mhc._as_tuple(function(*args)), moved,
            lambda: bench_mhc._as_tuple(function(*args)))


FAMILIES = {
    "upsample": upsample_case,
    "grid2d": lambda rng: grid_case(rng, 2),
    "grid3d": lambda rng: grid_case(rng, 3),
    "mhc": mhc_case,
}


def measure(timer, case, family, copy_gbps, runs):
    name, dtype, shape, ours, theirs, moved, reference = case
    record = {"family": family, "case": name, "op": name.split()[0], "dtype": dtype,
              "shape": shape, "bytes": moved}
    start = time.perf_counter()
    got = ours()
    torch.cuda.synchronize()
    record["first_call_s"] = time.perf_counter() - start
    want = reference()
    record["max_rel_diff_vs_torch"] = rel_diff(got, want)
    limit = LIMITS["bf16" if family == "mhc" else dtype]
    record["parity_flag"] = record["max_rel_diff_vs_torch"] > limit
    for key, fn in (("adjoint", ours), ("torch", theirs)):
        estimate_ms = bench_mhc.host_call_us(fn, 2, warmup=1) / 1e3
        timed = max(5, min(runs, int(1000 / max(estimate_ms, 1e-3))))
        ms = statistics.median(timer.time(fn, timed, min(3, timed)))
        record[key + "_ms"] = ms
        record[key + "_fraction_of_copy"] = moved / (ms * 1e6) / copy_gbps
        record[key + "_call_us"] = bench_mhc.host_call_us(fn, max(5, min(20, int(300 / max(estimate_ms, 1e-3)))))
    record["ratio"] = record["torch_ms"] / record["adjoint_ms"]
    record["call_ratio"] = record["torch_call_us"] / record["adjoint_call_us"]
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--budget", type=float, default=240.0, help="seconds in all")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--families", default=",".join(FAMILIES))
    args = parser.parse_args()
    families = args.families.split(",")
    for f in families:
        if f not in FAMILIES:
            parser.error("--families: unknown family '%s' (expected some of %s)"
                         % (f, ", ".join(FAMILIES)))
    timer = bench.GpuTimer()
    copy_gbps = bench.copy_bandwidth(timer, 20, 5)
    rng = random.Random(args.seed)
    records, errors = [], []
    per_family = args.budget / len(families)
    for family in families:
        family_start = time.monotonic()
        while time.monotonic() - family_start < per_family:
            case = None
            try:
                case = FAMILIES[family](rng)
                records.append(measure(timer, case, family, copy_gbps, args.runs))
            except Exception as error:  # record it and go on: one failure must not hide the rest
                name = case[0] if case else family + " (drawing the case)"
                errors.append("%s: %s: %s" % (name, type(error).__name__, str(error)[:400]))
            del case
            torch.cuda.empty_cache()
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "seed": args.seed, "copy_GBps": copy_gbps, "cases": records, "errors": errors}
    with open(args.out, "w") as out:
        json.dump(result, out, indent=1)
    print("device %s, copy %.0f GB/s, %d cases, %d errors" % (result["device"], copy_gbps,
                                                               len(records), len(errors)))
    print("%-72s %5s %9s %9s %6s %7s %8s %s" % ("case (worst ratio first)", "dtype", "ours ms",
                                                "torch ms", "ratio", "copy%", "first s", "rel diff"))
    for r in sorted(records, key=lambda r: r["ratio"]):
        print("%-72s %5s %9.4f %9.4f %6.2f %6.1f%% %8.3f %.2e%s" % (
            r["case"][:72], r["dtype"], r["adjoint_ms"], r["torch_ms"], r["ratio"],
            100 * r["adjoint_fraction_of_copy"], r["first_call_s"], r["max_rel_diff_vs_torch"],
            "  PARITY" if r["parity_flag"] else ""))
    for e in errors:
        print("ERROR", e)


if __name__ == "__main__":
    main()
