"""Fingerprints of grid_sampler_2d_backward's (and, for NxCxDxHxW:DoxHoxWo shapes,
grid_sampler_3d_backward's) default (deterministic) program at large shapes: for
each case, three calls on the same seeded inputs must give bitwise-equal grad_input and
grad_grid, and one line prints a hash of their bytes and the largest error against ATen (at f32,
normalized by the reference's largest magnitude). Run it once per setting of a knob that must not
change any bit (ADJOINT_TUNE_WHOLE_AXIS_GROUPS, ADJOINT_TUNE_DIRECT_STORE,
ADJOINT_TUNE_BINNED_SPARSE_CHANNELS_LAST, ADJOINT_TUNE_GATHERED_WHOLE_AXIS) and diff the lines:
equal hashes are equal bits across the two processes. Not collected by pytest.

    python3 tests/gpu/grid_sampler_bits.py [--shape-list NxCxHxW:HoxWo,...] [--modes ...]
        [--dtypes ...] [--paddings zeros,border,reflection]
"""

import argparse
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import adjoint, torch  # noqa: E402

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")


def fingerprint(tensor):
    return hashlib.sha256(tensor.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()[:16]


def check(input_size, grid_size, mode, dtype_name, padding="zeros"):
    dtype = harness.DTYPES[dtype_name]
    n, c = input_size[:2]
    rank = len(grid_size)  # 2: grid_sampler_2d_backward, 3: grid_sampler_3d_backward
    op = "grid_sampler_%dd_backward" % rank
    grad_output = harness.random_tensor([n, c] + list(grid_size), dtype, 11)
    inputs = harness.random_tensor(list(input_size), dtype, 12)
    grid = harness.random_tensor([n] + list(grid_size) + [rank], dtype, 13, low=-1.1, high=1.1)
    text = getattr(adjoint.spec, op)(dtype_name, list(input_size), list(grid_size), mode, padding,
                                     False, [True, True])
    program = adjoint.prepare(text)
    runs = []
    for _ in range(3):
        out = program(grad_output=grad_output, input=inputs, grid=grid)
        runs.append((out["grad_input"].clone(), out["grad_grid"].clone()))
    torch.cuda.synchronize()
    equal = all(harness.bitwise_equal(a, b) for again in runs[1:] for a, b in zip(runs[0], again))
    ref_input, ref_grid = getattr(torch.ops.aten, op)(
        grad_output.float(), inputs.float(), grid.float(), MODES.index(mode),
        PADDINGS.index(padding), False, [True, True])
    errors = []
    for ours, ref in zip(runs[0], (ref_input, ref_grid)):
        scale = max(ref.abs().max().item(), 1e-30)
        errors.append((ours.float() - ref).abs().max().item() / scale)
    print("%s%s %s %s->%s deterministic_claim=%s bitwise_3_runs=%s grad_input=%s grad_grid=%s "
          "err_input=%.2e err_grid=%.2e" % (
              mode, "" if padding == "zeros" else " " + padding, dtype_name,
              "x".join(map(str, input_size)), "x".join(map(str, grid_size)),
              bool(program.deterministic), equal, fingerprint(runs[0][0]),
              fingerprint(runs[0][1]), errors[0], errors[1]), flush=True)
    return equal and bool(program.deterministic)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape-list", default="32x3x224x224:224x224,16x4x128x128:128x128")
    parser.add_argument("--modes", default="bilinear,nearest,bicubic")
    parser.add_argument("--dtypes", default="f32,bf16")
    parser.add_argument("--paddings", default="zeros")
    args = parser.parse_args()
    ok = True
    for item in args.shape_list.split(","):
        input_text, grid_text = item.split(":")
        input_size = tuple(int(v) for v in input_text.split("x"))
        grid_size = tuple(int(v) for v in grid_text.split("x"))
        for mode in args.modes.split(","):
            if mode == "bicubic" and len(grid_size) == 3:
                continue  # 2-d only
            for dtype_name in args.dtypes.split(","):
                for padding in args.paddings.split(","):
                    ok &= check(input_size, grid_size, mode, dtype_name, padding)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
