"""Kernel time of programs as this process lowers them (run it once per setting of the unroll
knobs, ADJOINT_TUNE_UNROLL_BUDGET, ADJOINT_TUNE_RUNTIME_UNROLL, ADJOINT_TUNE_PARTIAL_UNROLL, to
compare): per spec, random inputs of the program's own shapes and dtypes (seeded, so every
setting sees the same), 10 warm-up calls, then CUDA events around 30 calls, median per call in
microseconds, and a digest of the outputs' bytes (unroll pragmas must not change a bit).
Specs given as arguments replace the default list. Each spec's `adjoint.prepare` wall time
("prepare_ms": its NVRTC compiles when ADJOINT_CACHE_DIR and CUDA_CACHE_PATH start empty) is
recorded too. Prints one JSON object {spec: {"us": microseconds, "digest": hex, "prepare_ms":
milliseconds}}."""
import hashlib
import json
import os
import statistics
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402
import adjoint  # noqa: E402

SPECS = [
    "mhc_pre_backward batch=1 seq=4096 n=4 dim=4096 dtype=bf16",
    "mhc_pre_backward batch=1 seq=4096 n=4 dim=2560 dtype=bf16",
    "mhc_pre_backward batch=2 seq=2048 n=6 dim=1024 dtype=bf16",
    "mhc_pre_backward batch=1 seq=65536 n=4 dim=512 dtype=bf16",
    "mhc_pre batch=1 seq=4096 n=4 dim=4096 dtype=bf16",
    "mhc_post_backward batch=1 seq=4096 n=4 dim=4096 dtype=bf16",
    "grid_sampler_2d_backward dtype=f32 input_size=8,64,128,128 output_size=128,128 "
    "interpolation_mode=bicubic padding_mode=zeros align_corners=false",
    "grid_sampler_2d_backward dtype=f32 input_size=8,64,128,128 output_size=128,128 "
    "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
    # gather windows with run-time trip counts (ratio 203/101), and constant 2x2 windows
    "upsample_nearest2d_backward dtype=f32 input_size=16,64,101,67 output_size=203,134",
    "upsample_nearest2d_backward dtype=bf16 input_size=8,64,128,128 output_size=256,256",
]


def main():
    results = {}
    for spec in sys.argv[1:] or SPECS:
        start_prepare = time.perf_counter()
        program = adjoint.prepare(spec)
        prepare_ms = (time.perf_counter() - start_prepare) * 1e3
        torch.manual_seed(0)
        tensors = {}
        for info in program.tensors:
            if info.role != "input":
                continue
            dtype = getattr(torch, {"f32": "float32", "f16": "float16", "bf16": "bfloat16",
                                    "f64": "float64"}[info.dtype])
            tensors[info.name] = torch.randn(info.shape, device="cuda").to(dtype) * 0.5
        for _ in range(10):
            outputs = program(tensors)
        torch.cuda.synchronize()
        digest = hashlib.sha1()
        for name in sorted(outputs):
            digest.update(outputs[name].contiguous().view(torch.uint8).cpu().numpy().tobytes())
        times = []
        for _ in range(30):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            program(tensors)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3)
        results[spec] = {"us": round(statistics.median(times), 1), "digest": digest.hexdigest()[:16],
                         "prepare_ms": round(prepare_ms, 1)}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
