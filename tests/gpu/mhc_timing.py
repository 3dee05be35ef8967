"""Kernel times of mhc_pre_backward and mhc_pre at the issue's shapes, with parity and
determinism at the same shapes (the pytest suite's shapes are small).

For each case: the program's launch timed with CUDA events (median of --runs after a warm-up),
the minimum bytes it must move (read x and grad_h_in, write dx for the backward; read x, write
h_in for the forward; the small tensors added), the fraction of the copy bandwidth measured in
the same run, bitwise equality of two launches, and for the backward the normalized error of
every gradient against autograd of test_mhc's PyTorch forward in f64 (harness.MHC_TOL). Prints
one line per case and writes JSON to --json. Not collected by pytest.
"""

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402
import test_mhc  # noqa: E402
from harness import adjoint, torch  # noqa: E402

BACKWARD = [(1, 4096, 4, 4096), (1, 4096, 4, 2560), (2, 2048, 6, 1024), (1, 65536, 4, 512),
            (1, 1, 8, 16384)]


def copy_bandwidth():
    """Bytes per second of a device-to-device copy of 1 GiB (read + write counted)."""
    a = torch.empty(1 << 28, device="cuda", dtype=torch.float32)
    b = torch.empty_like(a)
    times = event_times(lambda: b.copy_(a), 10)
    return 2 * a.numel() * 4 / (statistics.median(times) / 1e3)


def event_times(fn, runs):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def backward_case(shape, runs, bandwidth, check):
    batch, seq, n, dim = shape
    case = (batch, seq, n, dim, "bf16", False)
    text, kwargs, expected = test_mhc.make_call(case, seed=5)
    program = adjoint.prepare(text)
    names = dict(kwargs)
    names.pop("hc_eps")
    names.pop("grad_x_post")
    outputs = {}
    for info in program.tensors:
        if info.role == "output":
            outputs[info.name] = torch.empty(info.shape, device="cuda",
                                             dtype=harness.DTYPES[info.dtype])
    bound = dict(names, **outputs)
    times = event_times(lambda: program.launch(bound), runs)
    first = [t.clone() for t in outputs.values()]
    program.launch(bound)
    torch.cuda.synchronize()
    bitwise = all(torch.equal(a, b) for a, b in zip(first, outputs.values()))
    tokens, k = batch * seq, n * n + 2 * n
    minimum = (2 * tokens * n * dim * 2 + 2 * tokens * dim + 4 * k * n * dim * 2 + 4 * n * dim * 2
               + 4 * tokens * (k * 2 + n * n + 4 * n + 1))
    errors = {}
    if check:
        for name, e in zip(test_mhc.NAMES, expected):
            a = outputs[name]
            tolerance = harness.MHC_TOL["bf16" if name == "dx" else "f32"]
            e = e.double()
            worst = (a.double() - e).abs().max().item() / max(e.abs().max().item(), 1e-30)
            errors[name] = worst
            errors[name + "_ok"] = worst <= tolerance
    ms = statistics.median(times)
    return dict(op="mhc_pre_backward", shape=shape, ms=ms, min_bytes=minimum,
                roofline=minimum / bandwidth / (ms / 1e3), bitwise_equal=bitwise, errors=errors,
                deterministic=program.deterministic)


def forward_case(shape, runs, bandwidth):
    batch, seq, n, dim = shape
    program = adjoint.prepare("mhc_pre batch=%d seq=%d n=%d dim=%d dtype=bf16"
                              % (batch, seq, n, dim))
    bound = harness.bind_random(program)
    times = event_times(lambda: program.launch(bound), runs)
    first = {name: t.clone() for name, t in bound.items()}
    program.launch(bound)
    torch.cuda.synchronize()
    bitwise = all(torch.equal(first[name], bound[name]) for name in program.outputs)
    tokens, k = batch * seq, n * n + 2 * n
    minimum = 2 * tokens * n * dim + 2 * tokens * dim + 4 * k * n * dim + 4 * tokens * (2 * k + 1)
    ms = statistics.median(times)
    return dict(op="mhc_pre", shape=shape, ms=ms, min_bytes=minimum,
                roofline=minimum / bandwidth / (ms / 1e3), bitwise_equal=bitwise,
                deterministic=program.deterministic)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", default=None)
    parser.add_argument("--no-check", action="store_true", help="skip the autograd parity")
    parser.add_argument("--forward", action="store_true", help="time mhc_pre too")
    args = parser.parse_args()
    bandwidth = copy_bandwidth()
    print("device %s, copy bandwidth %.0f GB/s" % (torch.cuda.get_device_name(), bandwidth / 1e9))
    results = []
    for shape in BACKWARD:
        r = backward_case(shape, args.runs, bandwidth, not args.no_check)
        results.append(r)
        print("%-18s B%d S%d n%d D%d: %8.3f ms, %5.1f%% of roofline, bitwise %s, errors %s"
              % (r["op"], *shape, r["ms"], 100 * r["roofline"], r["bitwise_equal"],
                 {k: ("%.2g" % v if not isinstance(v, bool) else v) for k, v in r["errors"].items()}), flush=True)
        torch.cuda.empty_cache()
    if args.forward:
        for shape in BACKWARD:
            r = forward_case(shape, args.runs, bandwidth)
            results.append(r)
            print("%-18s B%d S%d n%d D%d: %8.3f ms, %5.1f%% of roofline, bitwise %s"
                  % (r["op"], *shape, r["ms"], 100 * r["roofline"], r["bitwise_equal"]),
                  flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), bandwidth=bandwidth,
                           results=results), f, indent=1)
    ok = all(r["bitwise_equal"] and all(v for k, v in r.get("errors", {}).items()
                                        if k.endswith("_ok")) for r in results)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
