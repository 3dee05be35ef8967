"""Per-kernel GPU times of grid_sampler_2d_backward on issue 10's three shapes: for each mode,
padding and dtype named on the command line (default bilinear, nearest, bicubic; zeros; f32 and
bf16), five launches of the default (deterministic) and allow_atomics programs and of
aten::grid_sampler_2d_backward under torch.profiler (CUPTI sees the driver-API launches), the
mean time of every kernel printed by name. Shows which kernel of the binned gather a change
moved. Not collected by pytest.

    python3 tests/gpu/grid_sampler_kernel_profile.py [--modes bilinear,...] [--dtypes f32,...]
        [--shapes 0,1,2 | --shape-list NxCxHxW:HoxWo,...] [--paddings zeros,...] [--one-cell]
The layout knobs (ADJOINT_TUNE_BINNED_CHANNELS_LAST, ADJOINT_TUNE_GATHERED_ROWS) apply as set.
Programmatic launches are off (ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=0) unless set: a kernel launched
early waits inside its own duration, so with them the per-kernel times overlap.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Per-kernel times need plain launches: under programmatic dependent launch a kernel's duration
# includes its wait for the one before (docs/results/h100-2026-11-26-gridbf/call2/
# profile_defaults.txt: 252 us of kernels in a 183 us program). Read at the first prepare.
os.environ.setdefault("ADJOINT_TUNE_PROGRAMMATIC_LAUNCH", "0")

import harness  # noqa: E402
from harness import adjoint, torch  # noqa: E402

SHAPES = [((8, 64, 128, 128), (128, 128)), ((4, 32, 256, 256), (256, 256)),
          ((32, 3, 224, 224), (224, 224))]
MODE_INT = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADDING_INT = {"zeros": 0, "border": 1, "reflection": 2}


def kernel_means(run):
    """{kernel name: mean device us} over five calls of run()."""
    for _ in range(3):
        run()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            run()
        torch.cuda.synchronize()
    means = {}
    for event in prof.key_averages():
        total = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)
        if total > 0:
            means[event.key] = total / 5.0
    return means


def print_profiles(title, text, op, mode, grad_output, inputs, grid, padding="zeros"):
    """The per-kernel means of the default and allow_atomics programs of `text` and of ATen's
    `op` (grid_sampler_2d_backward or grid_sampler_3d_backward) on the same tensors."""
    for determinism in ("default", "allow_atomics"):
        program = adjoint.prepare(text, determinism=determinism)
        means = kernel_means(lambda: program(grad_output=grad_output, input=inputs, grid=grid))
        print("== %s  %s: %.1f us in %d kernels" % (title, determinism, sum(means.values()),
                                                    len(means)))
        for key, us in means.items():
            print("  %8.1f us  %s" % (us, key.replace(op + "_", "")[:80]))
    aten = getattr(torch.ops.aten, op)
    means = kernel_means(lambda: aten(grad_output, inputs, grid, MODE_INT[mode],
                                      PADDING_INT[padding], False, [True, True]))
    print("== %s  aten: %.1f us (%s)" % (title, sum(means.values()),
                                         ", ".join("%.1f %s" % (v, k[:40])
                                                   for k, v in means.items())))


def profile(input_size, grid_size, mode, dtype_name, one_cell=False, padding="zeros"):
    dtype = harness.DTYPES[dtype_name]
    n, c, h, w = input_size
    grad_output = harness.random_tensor([n, c] + list(grid_size), dtype, 1)
    inputs = harness.random_tensor(list(input_size), dtype, 2)
    grid = harness.random_tensor([n] + list(grid_size) + [2], dtype, 3)
    if one_cell:  # the worst case of the binning: every point samples the same place
        grid = torch.full_like(grid, 0.1)
    text = adjoint.spec.grid_sampler_2d_backward(dtype_name, list(input_size), list(grid_size),
                                                 mode, padding, False, [True, True])
    title = "%s%s%s %s %s->%s" % ("one-cell " if one_cell else "", mode,
                                  "" if padding == "zeros" else " " + padding, dtype_name,
                                "x".join(map(str, input_size)), "x".join(map(str, grid_size)))
    print_profiles(title, text, "grid_sampler_2d_backward", mode, grad_output, inputs, grid,
                   padding)


def profile_3d(mode, dtype_name):
    """bench_grid_sampler_3d.py's case (2x16x32^3, a displacement-field grid), per kernel."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "bench"))
    import bench_grid_sampler_3d as b3
    dtype = harness.DTYPES[dtype_name]
    n, c = b3.INPUT_SIZE[:2]
    grad_output = harness.random_tensor([n, c] + list(b3.OUTPUT_SIZE), dtype, 1)
    inputs = harness.random_tensor(list(b3.INPUT_SIZE), dtype, 2)
    grid = b3.displacement_grid(n, b3.OUTPUT_SIZE, dtype, torch.device("cuda"), 3)
    text = adjoint.spec.grid_sampler_3d_backward(dtype_name, list(b3.INPUT_SIZE),
                                                 list(b3.OUTPUT_SIZE), mode, "zeros", False,
                                                 [True, True])
    print_profiles("3-d %s %s" % (mode, dtype_name), text, "grid_sampler_3d_backward", mode,
                   grad_output, inputs, grid)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--modes", default="bilinear,nearest,bicubic")
    parser.add_argument("--dtypes", default="f32,bf16")
    parser.add_argument("--paddings", default="zeros", help="2-d shapes only")
    parser.add_argument("--shapes", default="0,1,2", help="indices into SHAPES")
    parser.add_argument("--shape-list", default="",
                        help="shapes instead of --shapes: NxCxHxW:H_outxW_out, comma separated")
    parser.add_argument("--three-d", action="store_true",
                        help="also bench_grid_sampler_3d.py's case (trilinear and nearest)")
    parser.add_argument("--one-cell", action="store_true",
                        help="also every grid point at one place (the binning's worst case)")
    args = parser.parse_args()
    if args.one_cell:
        profile(SHAPES[0][0], SHAPES[0][1], "bilinear", "f32", one_cell=True)
    if args.three_d:
        for mode in ("bilinear", "nearest"):
            for dtype_name in args.dtypes.split(","):
                profile_3d(mode, dtype_name)
    shapes = [SHAPES[int(i)] for i in args.shapes.split(",") if i]
    if args.shape_list:
        shapes = [(tuple(int(v) for v in a.split("x")), tuple(int(v) for v in b.split("x")))
                  for a, b in (item.split(":") for item in args.shape_list.split(",") if item)]
    for input_size, grid_size in shapes:
        for mode in args.modes.split(","):
            for dtype_name in args.dtypes.split(","):
                for padding in args.paddings.split(","):
                    profile(input_size, grid_size, mode, dtype_name, padding=padding)
                    torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
