"""Kernel time of grid_sampler_2d/3d_backward's default (deterministic) program over a broad set
of shapes, next to ATen in the same process, for A/B runs of ADJOINT_TUNE_* knobs (one process
per setting: the knobs are read once per process). Issue 10's "defaults chosen by measurement":
the bench shapes, unseen ones (down- and up-sampling, odd sizes, 3-d), bilinear / nearest /
bicubic, zeros and border padding, f32 and bf16.

Each case: grad_output (and for 3-d every input) rotates among enough copies to exceed L2;
2-d grids uniform in [-1, 1] (bench_grid_sampler.py), 3-d the identity plus +-0.1 noise
(bench_grid_sampler_3d.py); CUDA events around each call with the GPU kept busy while the host
queues (bench.py's GpuTimer), median of --runs. --cases names the cases to run (one key per
line, `case_keys` below, as printed by --list); --prepare-only compiles them into the disk
cache without timing (run several at once before the timed processes). --deadline stops
starting new cases after that many seconds and reports the ones skipped.

    python3 bench/bench_grid_sampler_knobs.py [--list] [--cases FILE] [--runs 20] [--out F.json]
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

SHAPES_2D = ["8x64x128x128:128x128", "4x32x256x256:256x256", "32x3x224x224:224x224",
             "16x64x56x56:56x56", "8x128x64x64:64x64", "4x3x512x512:256x256",
             "16x3x96x96:160x160", "2x8x17x23:31x29"]
SHAPES_3D = ["2x16x32x32x32:32x32x32", "1x32x24x24x24:16x16x16", "1x4x17x17x17:17x17x17"]
PADDINGS = ("zeros", "border")
DTYPE_NAMES = ("f32", "bf16")
MODES = ("bilinear", "nearest", "bicubic")


def case_keys():
    """Every case as 'shape mode padding dtype'."""
    keys = []
    for shape in SHAPES_2D + SHAPES_3D:
        three_d = shape in SHAPES_3D
        for mode in MODES[:2] if three_d else MODES:
            for padding in PADDINGS:
                for dtype_name in DTYPE_NAMES:
                    keys.append("%s %s %s %s" % (shape, mode, padding, dtype_name))
    return keys


def parse(key):
    shape, mode, padding, dtype_name = key.split()
    source, output = shape.split(":")
    return (tuple(int(v) for v in source.split("x")), tuple(int(v) for v in output.split("x")),
            mode, padding, dtype_name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--list", action="store_true", help="print every case key and exit")
    parser.add_argument("--cases", default="", help="file of case keys (default: every case)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=1e9)
    parser.add_argument("--prepare-only", action="store_true")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default="")
    parser.add_argument("--bits", default="",
                        help="after the timing, tests/gpu/grid_sampler_bits.py's check on "
                             "'NxCx..:Ho.. mode dtype' cases, ';' separated (zeros padding)")
    args = parser.parse_args()
    keys = case_keys()
    if args.list:
        print("\n".join(keys))
        return 0
    if args.cases:
        with open(args.cases) as f:
            wanted = [line.strip() for line in f if line.strip()]
        unknown = [k for k in wanted if k not in keys]
        if unknown:
            raise SystemExit("unknown cases: %s" % unknown)
        keys = wanted
    start = time.time()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    sys.path.insert(0, os.path.join(root, "python"))
    sys.path.insert(0, os.path.join(root, "bench"))
    import torch
    import adjoint
    dtypes = {"f32": torch.float32, "bf16": torch.bfloat16}
    if args.prepare_only:
        for key in keys:
            input_size, grid_size, mode, padding, dtype_name = parse(key)
            op = getattr(adjoint.spec, "grid_sampler_%dd_backward" % len(grid_size))
            adjoint.prepare(op(dtype_name, list(input_size), list(grid_size), mode, padding,
                               False, [True, True]))
        print("prepared %d cases in %.1f s" % (len(keys), time.time() - start))
        return 0
    import bench
    from bench_grid_sampler_3d import displacement_grid
    timer = bench.GpuTimer()
    l2_bytes = getattr(torch.cuda.get_device_properties(bench.DEVICE), "L2_cache_size", 50 << 20)
    device = torch.device("cuda")
    records, skipped, errors = [], [], []
    for key in keys:
        if time.time() - start > args.deadline:
            skipped.append(key)
            continue
        input_size, grid_size, mode, padding, dtype_name = parse(key)
        rank = len(grid_size)
        dtype = dtypes[dtype_name]
        n, c = input_size[:2]
        out_shape = (n, c) + grid_size
        one_set = (math.prod(out_shape) + math.prod(input_size)
                   + n * math.prod(grid_size) * rank) * (torch.finfo(dtype).bits // 8)
        copies = max(1, min(8, math.ceil(3 * l2_bytes / one_set)))
        sets = []
        try:
            for seed in range(copies):
                if rank == 2:
                    grid = (torch.rand((n,) + grid_size + (2,), device=device) * 2 - 1).to(dtype)
                else:
                    grid = displacement_grid(n, grid_size, dtype, device, seed)
                sets.append((torch.randn(out_shape, device=device, dtype=dtype),
                             torch.randn(input_size, device=device, dtype=dtype), grid))
            op = "grid_sampler_%dd_backward" % rank
            text = getattr(adjoint.spec, op)(dtype_name, list(input_size), list(grid_size), mode,
                                             padding, False, [True, True])
            t0 = time.time()
            program = adjoint.prepare(text)
            prepare_s = time.time() - t0
            aten = getattr(torch.ops.aten, op)
            interpolation, pad = MODES.index(mode), PADDINGS.index(padding)

            def ours(s):
                return lambda: program(grad_output=s[0], input=s[1], grid=s[2])

            def theirs(s):
                return lambda: aten(s[0], s[1], s[2], interpolation, pad, False, [True, True])

            torch_ms = statistics.median(timer.time(bench.cycle([theirs(s) for s in sets]), args.runs,
                                                    args.warmup))
            adjoint_ms = statistics.median(timer.time(bench.cycle([ours(s) for s in sets]), args.runs,
                                                      args.warmup))
            adjoint_ms, torch_ms = float(adjoint_ms), float(torch_ms)
            records.append({"case": key, "adjoint_ms": adjoint_ms, "torch_ms": torch_ms,
                            "ratio": torch_ms / adjoint_ms, "prepare_s": prepare_s,
                            "deterministic": bool(program.deterministic)})
            print("%-40s %9.4f %9.4f %6.2fx" % (key, adjoint_ms, torch_ms, torch_ms / adjoint_ms),
                  flush=True)
        except Exception as error:  # keep measuring the others
            errors.append("%s: %s: %s" % (key, type(error).__name__, error))
            print("ERROR " + errors[-1], flush=True)
        del sets
        torch.cuda.empty_cache()
    bits_ok = True
    if args.bits:
        sys.path.insert(0, os.path.join(root, "tests", "gpu"))
        import grid_sampler_bits
        for item in filter(None, args.bits.split(";")):
            shape, mode, dtype_name = item.split()
            source, output = shape.split(":")
            try:
                bits_ok &= grid_sampler_bits.check(tuple(int(v) for v in source.split("x")),
                                                   tuple(int(v) for v in output.split("x")),
                                                   mode, dtype_name)
            except Exception as error:
                errors.append("bits %s: %s: %s" % (item, type(error).__name__, error))
                print("ERROR " + errors[-1], flush=True)
    knobs = {k: v for k, v in os.environ.items() if k.startswith("ADJOINT_TUNE_")}
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"label": args.label, "knobs": knobs,
                       "device": torch.cuda.get_device_name(bench.DEVICE),
                       "torch": torch.__version__, "runs": args.runs, "records": records,
                       "skipped": skipped, "errors": errors, "seconds": time.time() - start},
                      f, indent=1)
    print("%s: %d cases, %d skipped, %d errors, %.1f s" % (args.label or "run", len(records),
                                                           len(skipped), len(errors),
                                                           time.time() - start))
    return 1 if errors or not bits_ok else 0


if __name__ == "__main__":
    sys.exit(main())
