"""A/B compile times of CUDA files, each compiled alone by NVRTC with adjoint's options (as
bench/nvrtc_phases.py: `-minimal -lineinfo --fmad=false -no-cache`, sm_90, the templates of
templates/): ROUNDS rounds (environment, default 5), the files in order in even rounds and in
reverse in odd ones, so that a shared machine's load falls on every file alike; prints each
file's cubin size and the median and minimum of its compile times. Used for the kernel
variants of docs/compiler.md ("The misaligned copy, point by point"):

    ROUNDS=5 python3 bench/nvrtc_ab.py old_dx.cu new_dx.cu
"""
import ctypes
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nvrtc_phases import load_nvrtc  # noqa: E402

lib = load_nvrtc()
TEMPLATES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "templates")
NAMES = sorted(f for f in os.listdir(TEMPLATES) if f.endswith(".cuh"))
HEADER_NAMES = (ctypes.c_char_p * len(NAMES))(*[n.encode() for n in NAMES])
HEADER_TEXTS = (ctypes.c_char_p * len(NAMES))(
    *[open(os.path.join(TEMPLATES, n), "rb").read() for n in NAMES])
OPTIONS = [b"-arch=sm_90", b"-std=c++17", b"--fmad=false", b"-default-device", b"-lineinfo",
           b"-minimal", b"-no-cache"]


def compile_once(path):
    """Compiles the file at `path` once: (milliseconds, cubin bytes)."""
    program = ctypes.c_void_p()
    lib.nvrtcCreateProgram(ctypes.byref(program), open(path, "rb").read(), b"k.cu", len(NAMES),
                           HEADER_TEXTS, HEADER_NAMES)
    options = (ctypes.c_char_p * len(OPTIONS))(*OPTIONS)
    start = time.perf_counter()
    status = lib.nvrtcCompileProgram(program, len(OPTIONS), options)
    milliseconds = (time.perf_counter() - start) * 1e3
    if status != 0:
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(program, log)
        raise SystemExit("%s: NVRTC status %d\n%s" % (path, status, log.value.decode()))
    size = ctypes.c_size_t()
    lib.nvrtcGetCUBINSize(program, ctypes.byref(size))
    lib.nvrtcDestroyProgram(ctypes.byref(program))
    return milliseconds, size.value


def main():
    rounds = int(os.environ.get("ROUNDS", "5"))
    paths = sys.argv[1:]
    sizes = {path: compile_once(path)[1] for path in paths}  # also a warm-up of NVRTC
    times = {path: [] for path in paths}
    for r in range(rounds):
        for path in paths if r % 2 == 0 else paths[::-1]:
            times[path].append(compile_once(path)[0])
    for path in paths:
        print("%-50s cubin %7d  median %7.1f  min %7.1f ms" %
              (os.path.basename(path), sizes[path], statistics.median(times[path]),
               min(times[path])))


if __name__ == "__main__":
    main()
