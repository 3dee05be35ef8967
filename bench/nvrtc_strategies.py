"""How to spend a machine's cores on one program's cold compile (issue 12): the same kernels
compiled by NVRTC in several ways, each in a fresh process (NVRTC loaded and warmed by one
trivial compile first, so every figure is compile time alone), median over --reps processes:

  kernel_threads    one NVRTC program per kernel, on min(kernels, cores) threads (the runtime's
                    default before this script);
  kernel_processes  the same, one process per kernel (tells NVRTC's in-process contention apart
                    from the machine's);
  one_unit          all kernels in one NVRTC program, as runtime/kernel_binary.cpp combines them;
  one_unit_splitN   that program with -split-compile=N (NVRTC optimizes and assembles its
                    kernels on N threads; 0 = the number of CPUs);
  groupsK_splitN    K programs of kernels balanced by source size, on K threads, each with
                    -split-compile=N (none for N = 1).

It also measures a trivial kernel compiled 16 times serially, on 16 threads and in 16
processes (scaling of the fixed cost), the NVRTC library load and a process's first compile,
and checks that every strategy gives each kernel the same machine code (.text section) as
one_unit. Kernel sources come from `adjoint compile SPEC -o DIR` of the build given; NVRTC is
the library the loader finds (libnvrtc.so.13). Output: one JSON object.

  python3 bench/nvrtc_strategies.py --adjoint build/bin/adjoint [--reps 3] [--only WORD,...]
      [--strategies one_unit,groups4_split1,...] [--processes]
"""
import argparse
import concurrent.futures
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvrtc_ctypes import OPTIONS, ROOT, TRIVIAL, Nvrtc, text_sections  # noqa: E402

SPECS = {
    "upsample_nearest2d_backward":
        "upsample_nearest2d_backward dtype=f32 input_size=1,3,101,67 output_size=203,134",
    "grid_sampler_2d_backward bicubic":
        "grid_sampler_2d_backward dtype=f32 input_size=8,64,128,128 output_size=128,128 "
        "interpolation_mode=bicubic padding_mode=zeros align_corners=false",
    "mhc_pre_backward": "mhc_pre_backward batch=1 seq=4096 n=4 dim=2560 dtype=bf16",
}


def emitted_programs(adjoint, only, work):
    """(label, directory, sorted .cu file names) of each program of SPECS whose label holds a
    word of `only` (comma-separated; every program when empty), its kernels written into a
    directory under `work` by `adjoint compile`."""
    for label, spec in SPECS.items():
        if only and not any(w in label for w in only.split(",")):
            continue
        directory = os.path.join(work, label.split()[0])
        subprocess.run([adjoint, "compile", *spec.split(), "-o", directory], check=True,
                       capture_output=True, env=dict(os.environ, CUDA_CACHE_DISABLE="1"))
        yield label, directory, sorted(f for f in os.listdir(directory) if f.endswith(".cu"))


# adjoint's options (runtime/nvrtc.cpp) for sm_90 with NVRTC's own cache off.
BASE = ["-arch=sm_90"] + OPTIONS


def compile_ms(nvrtc, source, extra=()):
    """(milliseconds, cubin bytes) of one compile with BASE and `extra`."""
    r = nvrtc.compile(source, BASE + list(extra))
    return r["wall_ms"], r["cubin"]


def combined(sources):
    """The translation unit runtime/kernel_binary.cpp (combined_translation_unit) makes."""
    if len(sources) == 1:
        return sources[0][1].encode()
    includes, bodies = [], ""
    for i, (entry, text) in enumerate(sources):
        body = ""
        for line in text.split("\n"):
            if line.lstrip().startswith("#include"):
                if line not in includes:
                    includes.append(line)
                line = ""
            body += line + "\n"
        bodies += '\nnamespace adjoint_kernel_%d {\n#line 1 "%s.cu"\n%s}\n' % (i, entry, body)
    return ("\n".join(includes) + "\n" + bodies).encode()


def balanced_groups(sources, k):
    """k groups of kernels, largest source first into the lightest group."""
    groups = [[] for _ in range(min(k, len(sources)))]
    for s in sorted(sources, key=lambda s: -len(s[1])):
        min(groups, key=lambda g: sum(len(x[1]) for x in g)).append(s)
    return [sorted(g) for g in groups if g]


def run_units(nvrtc, units, threads, extra):
    """Wall ms, each unit's ms and {.text name: bytes} of compiling `units` on `threads` threads."""
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        results = list(pool.map(lambda u: compile_ms(nvrtc, u, extra), units))
    wall = (time.perf_counter() - start) * 1e3
    texts = {}
    for _, cubin in results:
        texts.update(text_sections(cubin))
    return wall, [round(ms, 1) for ms, _ in results], texts


def child(args):
    """One strategy in this fresh process; prints a JSON line."""
    nvrtc = Nvrtc()
    first_ms, _ = compile_ms(nvrtc, TRIVIAL)
    second_ms, _ = compile_ms(nvrtc, TRIVIAL)
    out = {"nvrtc_load_ms": nvrtc.load_ms, "first_trivial_ms": first_ms,
           "second_trivial_ms": second_ms}
    if args.child == "trivial":
        start = time.perf_counter()
        for _ in range(16):
            compile_ms(nvrtc, TRIVIAL)
        out["serial16_ms"] = (time.perf_counter() - start) * 1e3
        out["threads16_ms"], each, _ = run_units(nvrtc, [TRIVIAL] * 16, 16, [])
        out["threads16_sum_ms"] = sum(each)
    else:
        sources = json.load(open(args.sources))
        strategy = args.child
        cores = os.cpu_count() or 1
        if strategy == "kernel_threads":
            units, threads, extra = [combined([s]) for s in sources], min(len(sources), 16), []
        elif strategy == "one_unit":
            units, threads, extra = [combined(sources)], 1, []
        elif m := re.fullmatch(r"one_unit_split(\d+)", strategy):
            units, threads, extra = [combined(sources)], 1, ["-split-compile=" + m.group(1)]
        elif m := re.fullmatch(r"groups(\d+)_split(\d+)", strategy):
            groups = balanced_groups(sources, int(m.group(1)))
            units, threads = [combined(g) for g in groups], len(groups)
            extra = ["-split-compile=" + m.group(2)] if int(m.group(2)) > 1 else []
        else:
            raise SystemExit("unknown strategy " + strategy)
        out["cores"] = cores
        out["units"] = len(units)
        out["wall_ms"], out["unit_ms"], texts = run_units(nvrtc, units, threads, extra)
        out["sum_ms"] = sum(out["unit_ms"])
        out["text_digest"] = {k: hash(v) for k, v in texts.items()}
        with open(args.sources + "." + strategy + ".texts", "wb") as f:
            for name in sorted(texts):
                f.write(name.encode() + b"\0" + texts[name].hex().encode() + b"\n")
    print(json.dumps(out), flush=True)


def spawn(args, strategy, sources=None):
    command = [sys.executable, os.path.abspath(__file__), "--child", strategy]
    if sources:
        command += ["--sources", sources]
    env = dict(os.environ, CUDA_CACHE_DISABLE="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        return {"error": done.stderr[-500:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def kernel_processes(sources_path, count, reps):
    """Wall ms of one process per kernel, all started at once (each loads NVRTC itself)."""
    walls = []
    for _ in range(reps):
        start = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child-one",
                                   str(i), "--sources", sources_path],
                                  env=dict(os.environ, CUDA_CACHE_DISABLE="1"),
                                  stdout=subprocess.PIPE, text=True) for i in range(count)]
        per = [json.loads(p.communicate()[0]) for p in procs]
        walls.append({"wall_ms": (time.perf_counter() - start) * 1e3,
                      "max_compile_ms": max(x["ms"] for x in per),
                      "sum_compile_ms": sum(x["ms"] for x in per)})
    walls.sort(key=lambda w: w["wall_ms"])
    return walls[len(walls) // 2]


def child_one(args):
    nvrtc = Nvrtc()
    entry, text = json.load(open(args.sources))[args.child_one]
    ms, _ = compile_ms(nvrtc, combined([(entry, text)]))
    print(json.dumps({"ms": ms}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adjoint", default=os.path.join(ROOT, "build", "bin", "adjoint"))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", default="")
    parser.add_argument("--strategies", default="kernel_threads,one_unit,one_unit_split0,"
                        "one_unit_split8,groups2_split8,groups4_split4")
    parser.add_argument("--processes", action="store_true",
                        help="also time kernel_processes (one process per kernel)")
    parser.add_argument("--child")
    parser.add_argument("--child-one", type=int)
    parser.add_argument("--sources")
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.child_one is not None:
        return child_one(args)

    result = {"cores": os.cpu_count(), "reps": args.reps, "programs": []}
    trivial = [spawn(args, "trivial") for _ in range(args.reps)]
    result["trivial"] = {k: statistics.median(t[k] for t in trivial) for k in trivial[0]}
    work = tempfile.mkdtemp(prefix="nvrtc_strategies_")
    for label, directory, names in emitted_programs(args.adjoint, args.only, work):
        sources = [(f[:-3], open(os.path.join(directory, f)).read()) for f in names]
        sources_path = directory + ".json"
        json.dump(sources, open(sources_path, "w"))
        entry = {"op": label, "kernels": len(sources), "strategies": {}}
        for strategy in args.strategies.split(","):
            runs = [spawn(args, strategy, sources_path) for _ in range(args.reps)]
            runs = [r for r in runs if "wall_ms" in r] or runs
            runs.sort(key=lambda r: r.get("wall_ms", 0))
            row = dict(runs[len(runs) // 2])
            row["wall_ms_runs"] = [round(r.get("wall_ms", -1), 1) for r in runs]
            row.pop("text_digest", None)
            entry["strategies"][strategy] = row
        if args.processes and len(sources) > 1:
            entry["strategies"]["kernel_processes"] = kernel_processes(
                sources_path, len(sources), args.reps)
        # Same machine code whatever the strategy: compare every strategy's .text sections.
        reference = open(sources_path + ".one_unit.texts", "rb").read()
        entry["text_identical_to_one_unit"] = {
            s: open(sources_path + "." + s + ".texts", "rb").read() == reference
            for s in args.strategies.split(",") if os.path.exists(sources_path + "." + s + ".texts")}
        result["programs"].append(entry)
        print(json.dumps(entry), file=sys.stderr, flush=True)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
