"""Where one kernel's NVRTC compile goes, on whatever machine runs it: each CUDA file given is
compiled with adjoint's options to a cubin (the whole compile), to PTX only (front end and NVVM,
no ptxas) and to a cubin with ptxas at -O1 (how much of ptxas is its optimizer), median of 3.
The NVRTC library is found as libnvrtc.so.13 by the loader or in torch's nvidia wheels. Used to
explain compile-time figures (docs/runtime.md); the templates come from templates/."""
import ctypes
import glob
import os
import statistics
import sys
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


def main():
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
    for path in sys.argv[1:]:
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
        print(row, flush=True)


if __name__ == "__main__":
    main()
