"""What NVRTC's fixed cost per compile is made of, and what adjoint's headers and a precompiled
header (PCH) change in it (issue 12). Run on the machine whose compile times matter (CPU only, no
GPU needed; NVRTC is the library the loader finds, libnvrtc.so.13), all with adjoint's options
(runtime/nvrtc.cpp) and NVRTC's own cache off:

  floor       an empty source and a one-line kernel compiled to LTO IR (-dlto: front end and
              NVVM's link, no NVVM optimizer or code generation), to PTX (no ptxas) and to a
              cubin, so the differences split a compile's fixed cost into its stages;
  headers     the one-line kernel with no header, with adjoint_types.cuh, with all four
              templates/*.cuh, and with all four through an explicit PCH (-create-pch once, then
              -use-pch; created with the same options, or NVRTC ignores it);
  kernels     each kernel of the programs given, as `adjoint compile` emits it, and with the four
              headers through the PCH (its own #include lines kept; the headers are include-once),
              with whether the two give the same machine code (.text sections);
  concurrent  all kernels of a program at once, one NVRTC program each, on one thread per kernel
              (at most --threads) as emitted and through the PCH, and in as many worker processes
              (started and warmed before the clock, so only the compiles are timed): wall time
              and the sum of the compiles, which tells in-process contention apart.

Single-thread figures are medians over --reps of the compiling thread's CPU time (and wall time),
interleaved between variants; concurrent ones are medians of wall time over --reps rounds.

  python3 bench/nvrtc_fixed_cost.py --adjoint build/bin/adjoint [--reps 7] [--threads 16]
      [--only grid_sampler,upsample,mhc] [--skip-kernels]
Output: one JSON object on stdout.
"""
import argparse
import concurrent.futures
import hashlib
import json
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nvrtc_ctypes  # noqa: E402
from nvrtc_ctypes import OPTIONS, ROOT, TRIVIAL, text_sections  # noqa: E402
from nvrtc_strategies import emitted_programs  # noqa: E402

CUBIN, PTX = ["-arch=sm_90"], ["-arch=compute_90"]
EMPTY = b"\n"
TEMPLATES = ["adjoint_types.cuh", "adjoint_math.cuh", "adjoint_memory.cuh", "adjoint_atomics.cuh"]
ALL_HEADERS = b"".join(b'#include "%s"\n' % n.encode() for n in TEMPLATES)


class Nvrtc(nvrtc_ctypes.Nvrtc):
    def compile_for(self, source, arch=CUBIN, extra=()):
        """{wall_ms, cpu_ms, cubin, log, pch_status} with adjoint's options for `arch` (a cubin
        for CUBIN without -dlto, else b"")."""
        return self.compile(source, arch + OPTIONS + list(extra),
                            cubin=arch == CUBIN and "-dlto" not in extra)


def medians(nvrtc, variants, reps):
    """{label: {cpu_ms, wall_ms}} medians, variants interleaved rep by rep."""
    runs = {label: [] for label in variants}
    for _ in range(reps):
        for label, (source, arch, extra) in variants.items():
            runs[label].append(nvrtc.compile_for(source, arch, extra))
    return {label: {"cpu_ms": round(statistics.median(r["cpu_ms"] for r in rs), 2),
                    "wall_ms": round(statistics.median(r["wall_ms"] for r in rs), 2)}
            for label, rs in runs.items()}


def digest(cubin):
    return hashlib.sha256(b"".join(k.encode() + v for k, v in
                                   sorted(text_sections(cubin).items()))).hexdigest()[:16]


def worker():
    """A compile process: reads JSON requests, one a line, answers each with one JSON line."""
    nvrtc = Nvrtc()
    nvrtc.compile_for(TRIVIAL)
    print("ready", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        r = nvrtc.compile_for(request["source"].encode(), CUBIN, request["extra"])
        print(json.dumps({"wall_ms": r["wall_ms"], "cpu_ms": r["cpu_ms"],
                          "digest": digest(r["cubin"])}), flush=True)


def concurrent_rounds(nvrtc, sources, threads, reps, pch_option):
    """Median wall and summed compile ms of the kernels compiled all at once, three ways."""
    out = {}
    n = min(len(sources), threads)
    for label, prefix, extra in [("threads_as_emitted", b"", []),
                                 ("threads_pch", ALL_HEADERS, [pch_option])]:
        rounds = []
        for _ in range(reps):
            start = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(n) as pool:
                results = list(pool.map(lambda s: nvrtc.compile_for(prefix + s, CUBIN, extra),
                                        sources))
            rounds.append(((time.perf_counter() - start) * 1e3,
                           sum(r["wall_ms"] for r in results)))
        rounds.sort()
        out[label] = {"wall_ms": round(rounds[len(rounds) // 2][0], 1),
                      "sum_ms": round(rounds[len(rounds) // 2][1], 1),
                      "wall_ms_runs": [round(w, 1) for w, _ in rounds]}
    # Worker processes, each warmed by one compile before the clock starts.
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(n)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    rounds = []
    for _ in range(reps):
        start = time.perf_counter()
        pending = list(enumerate(sources))
        answers = []
        busy = {}
        while pending or busy:
            for p in procs:
                if p not in busy and pending:
                    i, s = pending.pop(0)
                    p.stdin.write(json.dumps({"source": s.decode(), "extra": []}) + "\n")
                    p.stdin.flush()
                    busy[p] = i
            # each worker answers its one request with one line
            ready, _, _ = select.select([q.stdout for q in busy], [], [])
            for p in [q for q in busy if q.stdout in ready]:
                answers.append(json.loads(p.stdout.readline()))
                del busy[p]
        rounds.append(((time.perf_counter() - start) * 1e3, sum(a["wall_ms"] for a in answers)))
    for p in procs:
        p.stdin.close()
        p.wait()
    rounds.sort()
    out["processes"] = {"wall_ms": round(rounds[len(rounds) // 2][0], 1),
                        "sum_ms": round(rounds[len(rounds) // 2][1], 1),
                        "wall_ms_runs": [round(w, 1) for w, _ in rounds], "workers": n}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adjoint", default=os.path.join(ROOT, "build", "bin", "adjoint"))
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=min(os.cpu_count() or 1, 16))
    parser.add_argument("--only", default="grid_sampler,upsample")
    parser.add_argument("--skip-kernels", action="store_true")
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args()
    if args.worker:
        return worker()
    os.environ["CUDA_CACHE_DISABLE"] = "1"
    nvrtc = Nvrtc()
    nvrtc.compile_for(TRIVIAL)  # a process's first compile carries NVRTC's one-time set-up
    work = tempfile.mkdtemp(prefix="nvrtc_fixed_cost_")
    pch = os.path.join(work, "adjoint_templates.pch")
    created = nvrtc.compile_for(ALL_HEADERS + TRIVIAL, CUBIN, ["-create-pch=" + pch])
    use_pch = "-use-pch=" + pch
    check = nvrtc.compile_for(ALL_HEADERS + TRIVIAL, CUBIN, [use_pch])
    result = {"cores": os.cpu_count(), "reps": args.reps, "threads": args.threads,
              "pch_bytes": os.path.getsize(pch), "pch_create_status": created["pch_status"],
              "pch_used": "using precompiled header" in check["log"]}
    dlto = ["-dlto"]
    result["floor"] = medians(nvrtc, {
        "empty_ltoir": (EMPTY, CUBIN, dlto), "empty_ptx": (EMPTY, PTX, []),
        "empty_cubin": (EMPTY, CUBIN, []), "trivial_ltoir": (TRIVIAL, CUBIN, dlto),
        "trivial_ptx": (TRIVIAL, PTX, []), "trivial_cubin": (TRIVIAL, CUBIN, [])}, args.reps)
    result["headers"] = medians(nvrtc, {
        "none": (TRIVIAL, CUBIN, []),
        "adjoint_types": (b'#include "adjoint_types.cuh"\n' + TRIVIAL, CUBIN, []),
        "all_four": (ALL_HEADERS + TRIVIAL, CUBIN, []),
        "all_four_pch": (ALL_HEADERS + TRIVIAL, CUBIN, [use_pch])}, args.reps)
    print(json.dumps(result), file=sys.stderr, flush=True)
    result["programs"] = []
    for label, directory, names in emitted_programs(args.adjoint, args.only, work):
        sources = [open(os.path.join(directory, f), "rb").read() for f in names]
        entry = {"op": label, "kernels": len(sources)}
        if not args.skip_kernels:
            rows = {}
            for name, source in zip(names, sources):
                variants = {"as_emitted": (source, CUBIN, []),
                            "pch": (ALL_HEADERS + source, CUBIN, [use_pch])}
                row = medians(nvrtc, variants, max(3, args.reps // 2))
                a = nvrtc.compile_for(source)["cubin"]
                b = nvrtc.compile_for(ALL_HEADERS + source, CUBIN, [use_pch])["cubin"]
                row["same_text"] = text_sections(a) == text_sections(b)
                rows[name[:-3]] = row
            entry["per_kernel"] = rows
            entry["sum_cpu_ms"] = {v: round(sum(r[v]["cpu_ms"] for r in rows.values()), 1)
                                   for v in ("as_emitted", "pch")}
            entry["all_same_text"] = all(r["same_text"] for r in rows.values())
        if len(sources) > 1:
            entry["concurrent"] = concurrent_rounds(nvrtc, sources, args.threads,
                                                    max(3, args.reps // 2), use_pch)
        result["programs"].append(entry)
        print(json.dumps(entry), file=sys.stderr, flush=True)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
