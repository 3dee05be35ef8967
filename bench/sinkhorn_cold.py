#!/usr/bin/env python3
"""Cold start of mhc_sinkhorn and mhc_sinkhorn_backward (issue 12), build against build.

For each op, n and build (a libadjoint.so with its _fastlaunch*.so), a fresh process with an
empty ADJOINT_CACHE_DIR and CUDA_CACHE_PATH records:
  * first_call_s: the first call (JIT compile, module load, launch), after CUDA, PyTorch and
    the library are up; second_call_ms: the next one;
  * kernel_ms: CUDA event time per call, median (bench.GpuTimer);
  * sha256: of the output for fixed inputs (seeded on the CPU), so that two builds can be
    compared bit for bit, and deterministic: two calls give the same bits;
  * max_rel_diff_vs_torch: against the eager PyTorch formulas of bench_mhc.py;
  * profile: the runtime's debug lines on the prepare (ADJOINT_LOG_LEVEL=debug).
The builds run interleaved (op, n, then each build), and the summary compares each build with
the first.

  python3 bench/sinkhorn_cold.py --out cold.json --build old=LIB[,FASTLAUNCH] --build new=LIB[,..]
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def child(op, n, seq, runs):
    sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import statistics
    import torch
    import bench
    import bench_mhc
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    generator = torch.Generator().manual_seed(1000 + n)
    h_res = (torch.rand((1, seq, n, n), generator=generator) * 6 - 3).cuda()
    grad = (torch.rand((1, seq, n, n), generator=generator) * 2 - 1).cuda()
    import adjoint  # loaded by bench already: the first call is the JIT compile, load, launch
    if op == "mhc_sinkhorn":
        call = lambda: adjoint.mhc_sinkhorn(h_res, 20, 1e-6)  # noqa: E731
        reference = lambda: bench_mhc.torch_mhc_sinkhorn(h_res)  # noqa: E731
    else:
        call = lambda: adjoint.mhc_sinkhorn_backward(grad, h_res, 20, 1e-6)  # noqa: E731
        reference = lambda: bench_mhc.torch_mhc_sinkhorn_backward(grad, h_res)  # noqa: E731
    start = time.perf_counter()
    out = call()
    torch.cuda.synchronize()
    first_call_s = time.perf_counter() - start
    start = time.perf_counter()
    again = call()
    torch.cuda.synchronize()
    second_call_ms = (time.perf_counter() - start) * 1e3
    bits = out.cpu().contiguous().numpy().tobytes()
    theirs = reference()
    scale = max(theirs.double().abs().max().item(), 1e-30)
    timer = bench.GpuTimer()
    kernel_ms = statistics.median(timer.time(call, runs, 20))
    return {
        "op": op, "n": n, "seq": seq, "first_call_s": first_call_s,
        "second_call_ms": second_call_ms, "kernel_ms": kernel_ms,
        "sha256": hashlib.sha256(bits).hexdigest(),
        "deterministic": bits == again.cpu().contiguous().numpy().tobytes(),
        "max_rel_diff_vs_torch": (out.double() - theirs.double()).abs().max().item() / scale,
    }


def run_child(label, library, fastlaunch, op, n, seq, runs):
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as cuda_cache:
        env = dict(os.environ, ADJOINT_LIBRARY=library, ADJOINT_CACHE_DIR=cache,
                   CUDA_CACHE_PATH=cuda_cache, ADJOINT_LOG_LEVEL="debug",
                   ADJOINT_FASTLAUNCH=fastlaunch or "1")
        command = [sys.executable, os.path.abspath(__file__), "--child", op, str(n), str(seq),
                   str(runs)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    record = {"build": label, "op": op, "n": n, "seq": seq}
    lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
    if done.returncode != 0 or not lines:
        record["error"] = (done.stdout[-2000:] + done.stderr[-4000:])
        return record
    record.update(json.loads(lines[-1]))
    record["profile"] = [l for l in done.stderr.splitlines() if "adjoint" in l][-6:]
    return record


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        op, n, seq, runs = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        print(json.dumps(child(op, n, seq, runs)), flush=True)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="sinkhorn_cold.json")
    parser.add_argument("--build", action="append", required=True,
                        help="label=LIBRARY[,FASTLAUNCH]; the first is the baseline")
    parser.add_argument("--n", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--ops", nargs="+", default=["mhc_sinkhorn_backward", "mhc_sinkhorn"])
    args = parser.parse_args()
    builds = []
    for text in args.build:
        label, _, paths = text.partition("=")
        library, _, fastlaunch = paths.partition(",")
        builds.append((label, library, fastlaunch))
    records = []
    for op in args.ops:
        for n in args.n:
            for label, library, fastlaunch in builds:
                record = run_child(label, library, fastlaunch, op, n, args.seq, args.runs)
                records.append(record)
                print(json.dumps({k: v for k, v in record.items() if k != "profile"}),
                      flush=True)
                with open(args.out, "w") as f:
                    json.dump(records, f, indent=1)
    print("\n%-22s %2s %-6s %13s %10s %10s %8s %8s %10s" % (
        "op", "n", "build", "first_call_s", "kernel_ms", "vs_base", "same_bits", "determ",
        "rel_diff"))
    for record in records:
        if "error" in record:
            print("%-22s %2d %-6s error" % (record["op"], record["n"], record["build"]))
            continue
        base = next((r for r in records if r["op"] == record["op"] and r["n"] == record["n"]
                     and r["build"] == builds[0][0] and "error" not in r), None)
        print("%-22s %2d %-6s %13.3f %10.4f %10s %8s %8s %10.2e" % (
            record["op"], record["n"], record["build"], record["first_call_s"],
            record["kernel_ms"],
            "%.3f" % (record["kernel_ms"] / base["kernel_ms"]) if base else "-",
            (record["sha256"] == base["sha256"]) if base else "-", record["deterministic"],
            record["max_rel_diff_vs_torch"]))


if __name__ == "__main__":
    main()
