"""Where one kernel's NVRTC compile goes, on whatever machine runs it: each CUDA file given is
compiled with adjoint's options to a cubin (the whole compile), to PTX only (front end and NVVM,
no ptxas) and to a cubin with ptxas at -O1 (how much of ptxas is its optimizer), median of 3.
With --trace, each file's cubin compile is also traced (-fdevice-time-trace) and the phases are
printed, minimum over 5 traced compiles (tracing itself adds time; compare files, not totals).
The NVRTC library is found as libnvrtc.so.13 by the loader or in torch's nvidia wheels. Used to
explain compile-time figures (docs/runtime.md); the templates come from templates/."""
import ctypes
import collections
import glob
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_nvrtc():
    try:
        return ctypes.CDLL("libnvrtc.so.13")
    except OSError:
        import site
        for base in site.getsitepackages():
            for path in glob.glob(os.path.join(base, "nvidia", "**", "libnvrtc.so*"),
                                  recursive=True):
                if "builtins" not in path:
                    return ctypes.CDLL(path)
    raise SystemExit("libnvrtc not found")


# The phases of a -fdevice-time-trace, in the order NVRTC runs them.
TRACE_PHASES = ["CUDA C++ Front-End", "NVVM Module Linker", "NVVM Optimizer", "NVVM CodeGen",
                "PTX parsing and setup time", "Optimizing compilation unit", "Post processing"]


def traced_phases(compile_traced, runs=5):
    """Minimum over runs of each phase's ms; compile_traced(path) compiles with the trace option
    writing to path (NVRTC appends .json)."""
    best = collections.defaultdict(lambda: float("inf"))
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(runs):
            base = os.path.join(tmp, "trace%d" % run)
            compile_traced(base)
            with open(base + ".json") as f:
                events = json.load(f)
            events = events["traceEvents"] if isinstance(events, dict) else events
            totals = collections.defaultdict(float)
            for event in events:
                if event.get("ph") == "X" and event.get("name") in TRACE_PHASES:
                    totals[event["name"]] += event["dur"] / 1e3
            for name in TRACE_PHASES:
                best[name] = min(best[name], totals[name])
    return {name: round(best[name], 2) for name in TRACE_PHASES}


def main():
    trace = "--trace" in sys.argv[1:]
    paths = [a for a in sys.argv[1:] if a != "--trace"]
    lib = load_nvrtc()
    tdir = os.path.join(ROOT, "templates")
    names = sorted(f for f in os.listdir(tdir) if f.endswith(".cuh"))
    header_names = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
    header_texts = (ctypes.c_char_p * len(names))(
        *[open(os.path.join(tdir, n), "rb").read() for n in names])
    # -no-cache: where a driver is present NVRTC 13 would otherwise answer repeats from its
    # compute cache, and every run after the first would be warm.
    base = [b"-std=c++17", b"--fmad=false", b"-default-device", b"-lineinfo", b"-minimal",
            b"-no-cache"]
    variants = {"cubin": [b"-arch=sm_90"], "ptx_only": [b"-arch=compute_90"],
                "cubin_ptxas_O1": [b"-arch=sm_90", b"-Xptxas=-O1"]}
    for path in paths:
        source = open(path, "rb").read()
        row = {"kernel": os.path.basename(path)}
        for label, arch in variants.items():
            options = (ctypes.c_char_p * (len(arch) + len(base)))(*(arch + base))
            runs = []
            for _ in range(3):
                program = ctypes.c_void_p()
                lib.nvrtcCreateProgram(ctypes.byref(program), source, b"k.cu", len(names),
                                       header_texts, header_names)
                start = time.perf_counter()
                status = lib.nvrtcCompileProgram(program, len(arch) + len(base), options)
                runs.append((time.perf_counter() - start) * 1e3)
                lib.nvrtcDestroyProgram(ctypes.byref(program))
                if status != 0:
                    raise SystemExit("%s: NVRTC status %d" % (path, status))
            row[label + "_ms"] = round(statistics.median(runs), 1)
        if trace:
            def compile_traced(out, source=source):
                options = [b"-arch=sm_90"] + base + [b"-fdevice-time-trace=" + out.encode()]
                program = ctypes.c_void_p()
                lib.nvrtcCreateProgram(ctypes.byref(program), source, b"k.cu", len(names),
                                       header_texts, header_names)
                status = lib.nvrtcCompileProgram(
                    program, len(options), (ctypes.c_char_p * len(options))(*options))
                lib.nvrtcDestroyProgram(ctypes.byref(program))
                if status != 0:
                    raise SystemExit("%s: NVRTC status %d" % (path, status))
            row["traced_phases_ms"] = traced_phases(compile_traced)
        print(row, flush=True)


if __name__ == "__main__":
    main()
