"""Per-kernel GPU times of the mHC programs named on the command line (default mhc_pre_backward
and mhc_pre) at three of issue 9's shapes (all five with --all, or --shapes BxSxNxD,...): five
launches of each program under torch.profiler (CUPTI sees the driver-API launches), the mean
time of each kernel printed by name. Shows which kernel a schedule change moved (compare runs
with ADJOINT_TUNE_REDUCTION=serial|auto|warp). Not collected by pytest. Programmatic launches
are off (ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0) unless set: with them the per-kernel times overlap.
With --generic the programs are generic in their dynamic axes (ADJOINT_DYNAMIC=always, compiled
at another token count first): the kernels whose names end in _generic (docs/dynamic_shapes.md).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Per-kernel times need plain launches: under programmatic dependent launch a kernel's duration
# includes its wait for the one before. Read at the first prepare.
os.environ.setdefault("ADJOINT_TUNE_PROGRAMMATIC_LAUNCH", "0")

import harness  # noqa: E402
from harness import adjoint, torch  # noqa: E402

SHAPES = [(1, 4096, 4, 4096), (2, 2048, 6, 1024), (1, 65536, 4, 512)]
# With --all: issue 9's five shapes.
ALL_SHAPES = [(1, 4096, 4, 4096), (1, 4096, 4, 2560), (2, 2048, 6, 1024), (1, 65536, 4, 512),
              (1, 1, 8, 16384)]


def profile(op, shape, generic=False):
    spec = "%s batch=%d seq=%d n=%d dim=%d dtype=bf16" % ((op,) + shape)
    if op.startswith("mhc_sinkhorn"):
        spec = "%s batch=%d seq=%d n=%d" % ((op,) + shape[:3])
    if generic:  # the generic program, compiled at another token count
        adjoint.set_dynamic_shapes("always")
        b, s = shape[:2]
        other = spec.replace("batch=%d seq=%d" % (b, s), "batch=%d seq=%d" % (b + 1, s + 3))
        adjoint.prepare(other)
    program = adjoint.prepare(spec)
    bound = harness.bind_random(program)
    for _ in range(3):
        program.launch(bound)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            program.launch(bound)
        torch.cuda.synchronize()
    print("== %s B%d S%d n%d D%d%s" % ((op,) + shape + (" generic" if generic else "",)))
    for event in prof.key_averages():
        total = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
        if total > 0:
            print("  %8.1f us  %s" % (total / max(event.count, 1), event.key[:90]))


def main():
    argv = sys.argv[1:]
    shapes = ALL_SHAPES if "--all" in argv else SHAPES
    if "--shapes" in argv:  # --shapes BxSxNxD,...: these shapes instead
        at = argv.index("--shapes")
        shapes = [tuple(int(v) for v in text.split("x")) for text in argv[at + 1].split(",")]
        del argv[at:at + 2]
    args = [a for a in argv if a not in ("--all", "--generic")]
    ops = args or ["mhc_pre_backward", "mhc_pre"]
    for op in ops:
        for shape in shapes:
            profile(op, shape, generic="--generic" in sys.argv[1:])
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
