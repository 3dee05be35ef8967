"""NVRTC through ctypes for the bench scripts that time compiles without the adjoint library
(nvrtc_fixed_cost.py, nvrtc_strategies.py): the library the loader finds (libnvrtc.so.13), with
templates/*.cuh registered as headers by name as runtime/nvrtc.cpp does, adjoint's fixed
options, and the .text sections of a cubin to compare machine code. CPU only, no GPU needed.
"""
import ctypes
import os
import struct
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# adjoint's options (runtime/nvrtc.cpp, kFixedOptions and -minimal) with NVRTC's own cache off;
# the architecture option goes before them.
OPTIONS = ["-std=c++17", "--fmad=false", "-default-device", "-lineinfo", "-minimal", "-no-cache"]
TRIVIAL = b'extern "C" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }\n'


class Nvrtc:
    """libnvrtc loaded once (load_ms: how long that took), adjoint's headers registered."""

    def __init__(self):
        start = time.perf_counter()
        self.lib = ctypes.CDLL("libnvrtc.so.13")
        self.load_ms = (time.perf_counter() - start) * 1e3
        tdir = os.path.join(ROOT, "templates")
        names = sorted(f for f in os.listdir(tdir) if f.endswith(".cuh"))
        self.count = len(names)
        self.names = (ctypes.c_char_p * len(names))(*[n.encode() for n in names])
        self.texts = (ctypes.c_char_p * len(names))(
            *[open(os.path.join(tdir, n), "rb").read() for n in names])

    def compile(self, source, options, cubin=True):
        """{wall_ms, cpu_ms, cubin, log, pch_status} of compiling `source` (bytes) with
        `options` (strings); the cubin is fetched only when `cubin` says the compile makes one
        (b"" otherwise). Raises RuntimeError with NVRTC's log when it fails. ctypes drops the
        GIL during the call, so threads compile concurrently."""
        encoded = [o.encode() for o in options]
        array = (ctypes.c_char_p * len(encoded))(*encoded)
        program = ctypes.c_void_p()
        self.lib.nvrtcCreateProgram(ctypes.byref(program), source, b"unit.cu", self.count,
                                    self.texts, self.names)
        start, cpu = time.perf_counter(), time.thread_time()
        status = self.lib.nvrtcCompileProgram(program, len(encoded), array)
        cpu_ms, wall_ms = (time.thread_time() - cpu) * 1e3, (time.perf_counter() - start) * 1e3
        size = ctypes.c_size_t()
        self.lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        self.lib.nvrtcGetProgramLog(program, log)
        pch_status = self.lib.nvrtcGetPCHCreateStatus(program)
        output = b""
        if status == 0 and cubin:
            self.lib.nvrtcGetCUBINSize(program, ctypes.byref(size))
            buffer = ctypes.create_string_buffer(size.value)
            self.lib.nvrtcGetCUBIN(program, buffer)
            output = buffer.raw
        self.lib.nvrtcDestroyProgram(ctypes.byref(program))
        if status != 0:
            raise RuntimeError("NVRTC status %d: %s" % (status, log.value.decode(errors="replace")))
        return {"wall_ms": wall_ms, "cpu_ms": cpu_ms, "cubin": output,
                "log": log.value.decode(errors="replace"), "pch_status": pch_status}


def text_sections(cubin):
    """{'.text.<kernel>': bytes} of a cubin (ELF64)."""
    b = cubin
    shoff = struct.unpack_from("<Q", b, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = {}
    for h in headers:
        name = b[names_at + h[0]:b.index(b"\0", names_at + h[0])].decode()
        if name.startswith(".text."):
            out[name] = b[h[4]:h[4] + h[5]]
    return out
