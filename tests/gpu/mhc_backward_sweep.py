"""Per-kernel GPU times of mhc_pre_backward at issue 9's five shapes under several sets of
ADJOINT_TUNE_* knobs, so that schedule choices can be compared kernel by kernel in one GPU call.

Knobs are read once per process, so every configuration runs in a child process of its own
(`--child`). Phase 1 prepares every configuration's programs concurrently (filling the disk
cache, ADJOINT_CACHE_DIR); phase 2 times them one configuration at a time: the program's launch
with CUDA events (median of --runs after warm-ups) and each kernel's mean under torch.profiler.
Prints one block per configuration and shape, with a digest of the outputs (the inputs are
seeded, so equal digests across configurations mean bitwise equal results, and the digest after
the first launches must equal the one after the last: determinism). With --misaligned every
input is bound as a view one element into a larger buffer (its base pointer misaligned), so a
thread-tiled kernel runs its misaligned copy: its digests must equal the aligned run's. Not
collected by pytest.

    python3 tests/gpu/mhc_backward_sweep.py base: tile8:ADJOINT_TUNE_THREAD_TILE=8 ...

--op names another mHC op of the same shapes (mhc_pre: its forward, whose h_mix partials are a
block reduction).
"""

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = [(1, 4096, 4, 4096), (1, 4096, 4, 2560), (2, 2048, 6, 1024), (1, 65536, 4, 512),
          (1, 1, 8, 16384)]


def parse_config(text):
    name, _, rest = text.partition(":")
    env = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        env[key] = value
    return name, env


def outputs_digest(program, bound):
    """sha1 of every output's bytes, in program order: equal digests are bitwise equal outputs
    (across launches: determinism; across configurations: the same results)."""
    import torch

    torch.cuda.synchronize()
    digest = hashlib.sha1()
    for info in program.tensors:
        if info.role == "output":
            digest.update(bound[info.name].contiguous().view(torch.uint8).cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def misaligned_copy(tensor):
    """The same values in a view one element into a larger buffer: its base pointer is aligned
    to the element only."""
    import torch

    buffer = torch.empty(tensor.numel() + 1, dtype=tensor.dtype, device=tensor.device)
    view = buffer[1:].view(tensor.shape)
    view.copy_(tensor)
    return view


def child(shapes, runs, prepare_only, misaligned=False, op="mhc_pre_backward"):
    sys.path.insert(0, HERE)
    import harness  # noqa: E402
    from harness import adjoint, torch  # noqa: E402

    for shape in shapes:
        spec = op + " batch=%d seq=%d n=%d dim=%d dtype=bf16" % shape
        program = adjoint.prepare(spec)
        if prepare_only:
            continue
        bound = harness.bind_random(program)
        if misaligned:
            for info in program.tensors:
                if info.role == "input":
                    bound[info.name] = misaligned_copy(bound[info.name])
        for _ in range(3):
            program.launch(bound)
        torch.cuda.synchronize()
        first = outputs_digest(program, bound)
        times = []
        for _ in range(runs):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            program.launch(bound)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                program.launch(bound)
            torch.cuda.synchronize()
        kernels = []
        for event in prof.key_averages():
            total = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
            if total > 0:
                kernels.append((total / max(event.count, 1), event.key))
        last = outputs_digest(program, bound)
        print("B%d S%d n%d D%d%s: %.4f ms (median of %d), kernels sum %.1f us, outputs %s%s" %
              (shape + (" (misaligned inputs)" if misaligned else "", statistics.median(times),
                        runs, sum(k[0] for k in kernels), last,
                        "" if last == first else " NOT DETERMINISTIC (first %s)" % first)))
        for us, key in kernels:
            print("  %8.1f us  %s" % (us, key.replace(op + "_", "")[:70]))
        sys.stdout.flush()
        del bound
        torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("configs", nargs="*", default=["base:"])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--prepare-only", action="store_true")
    parser.add_argument("--shapes", default="")
    parser.add_argument("--budget", type=float, default=120.0)
    parser.add_argument("--misaligned", action="store_true")
    parser.add_argument("--op", default="mhc_pre_backward")
    args = parser.parse_args()
    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
    if args.child:
        child(shapes, args.runs, args.prepare_only, args.misaligned, args.op)
        return
    began = time.time()
    configs = [parse_config(c) for c in args.configs]
    me = [sys.executable, os.path.abspath(__file__), "--runs", str(args.runs), "--op", args.op]
    if args.shapes:
        me += ["--shapes", args.shapes]
    if args.misaligned:
        me += ["--misaligned"]
    warm = [subprocess.Popen(me + ["--child", "--prepare-only"], env=dict(os.environ, **env),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for _, env in configs]
    for (name, _), p in zip(configs, warm):
        _, err = p.communicate()
        if p.returncode != 0:
            print("== %s: prepare failed (%d): %s" % (name, p.returncode, err[-400:]))
    print("prepared %d configurations in %.1f s" % (len(configs), time.time() - began))
    for name, env in configs:
        left = args.budget - (time.time() - began)
        if left < 8:
            print("== %s: not run (budget)" % name)
            continue
        print("== %s %s" % (name, " ".join("%s=%s" % kv for kv in env.items())))
        sys.stdout.flush()
        try:
            result = subprocess.run(me + ["--child"], env=dict(os.environ, **env), timeout=left,
                                    capture_output=True, text=True)
            print(result.stdout, end="")
            if result.returncode != 0:
                print("  failed (%d): %s" % (result.returncode, result.stderr[-400:]))
        except subprocess.TimeoutExpired as e:
            print((e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""))
            print("  timed out")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
