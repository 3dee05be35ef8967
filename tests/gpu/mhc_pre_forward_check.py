"""mhc_pre (forward) at issue 9's five shapes, for comparing schedule knobs in one GPU call: per
shape the kernel time (CUDA events around 20 back-to-back launches, so that launch gaps are
hidden as in bench.py's GpuTimer; median of 7 such groups, in ms per forward), whether two
launches give bitwise-equal outputs, and each output's largest error against test_mhc's
PyTorch forward in f64 on the same bf16 inputs, relative to the output's largest magnitude.
Knobs are read once per process: run it once per setting (ADJOINT_TUNE_BLOCK_STAGING=1 and
ADJOINT_TUNE_SPLIT_WARP_COMBINE=0 give the schedule before mhcfwd). Not collected by pytest.

    python3 tests/gpu/mhc_pre_forward_check.py [--filter S65536] [--json out.json]
        [--shapes 1x16x8x16384,1x256x4x4096]   (BxSxNxD: other shapes instead of the five)
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import adjoint, torch  # noqa: E402
from test_mhc import mhc_pre_forward  # noqa: E402

SHAPES = [(1, 4096, 4, 4096), (1, 4096, 4, 2560), (2, 2048, 6, 1024), (1, 65536, 4, 512),
          (1, 1, 8, 16384)]
OUTPUTS = ("h_in", "h_post", "h_res", "h_pre", "inv_rms", "h_mix")


def check(shape):
    batch, seq, n, dim = shape
    program = adjoint.prepare("mhc_pre batch=%d seq=%d n=%d dim=%d dtype=bf16" % shape)
    k = n * n + 2 * n
    ranges = {"x": (-1.0, 1.0), "phi": (-0.2, 0.2), "alpha": (0.5, 1.5), "bias": (-0.5, 0.5),
              "gamma": (0.5, 1.5)}
    bound = harness.bind_random(program, ranges)
    program.launch(bound)
    torch.cuda.synchronize()
    first = {name: bound[name].clone() for name in OUTPUTS}
    program.launch(bound)
    torch.cuda.synchronize()
    bitwise = all(torch.equal(first[name], bound[name]) for name in OUTPUTS)
    groups = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            program.launch(bound)
        end.record()
        end.synchronize()
        groups.append(start.elapsed_time(end) / 20)
    with torch.no_grad():
        params = [bound[name].double() for name in ("x", "phi", "alpha", "bias", "gamma")]
        expected = mhc_pre_forward(*params, n)
    errors = {}
    for name, want in zip(OUTPUTS, expected):
        got = first[name].double().reshape(want.shape)
        scale = max(want.abs().max().item(), 1e-30)
        errors[name] = (got - want).abs().max().item() / scale
    del expected, params
    torch.cuda.empty_cache()
    return dict(shape=shape, ms=statistics.median(groups), bitwise_equal=bitwise,
                deterministic=program.deterministic, errors=errors, k=k)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--filter", default=None)
    parser.add_argument("--json", default=None)
    parser.add_argument("--shapes", default=None, help="BxSxNxD,... instead of issue 9's five")
    args = parser.parse_args()
    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(v) for v in text.split("x")) for text in args.shapes.split(",")]
    knobs = {key: value for key, value in os.environ.items() if key.startswith("ADJOINT_TUNE")}
    print("knobs:", knobs or "defaults")
    records = []
    for shape in shapes:
        name = "B%d S%d n%d D%d" % shape
        if args.filter and args.filter not in name:
            continue
        r = check(shape)
        r["name"] = name
        records.append(r)
        worst = max(r["errors"].items(), key=lambda item: item[1])
        print("mhc_pre %-22s %8.4f ms  bitwise %s  deterministic %s  worst error %s %.2e"
              % (name, r["ms"], r["bitwise_equal"], r["deterministic"], worst[0], worst[1]),
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(knobs=knobs, records=records), f, indent=1)


if __name__ == "__main__":
    main()
