"""Kernel time of mhc_pre (the forward) over token counts, for comparing the compiler's
schedule choices at few tokens (run it once per ADJOINT_TUNE_* setting, each in its own
process: knobs are read once per process). tests/gpu/mhc_pre_forward_check.py --shapes times
the same forward with parity against f64; this one takes --op (any mHC op of B, S, n, D) and
also times single launches. Prints one JSON line per shape: "ms", the median over --runs of one
launch between two CUDA events, and "batch_ms", the time of 20 launches back to back over 20 (the launch overhead of
the host hidden where the GPU is the slower), and "bitwise" (two launches equal).
Not collected by pytest.

  python3 bench/mhc_pre_tokens_sweep.py --shapes 1x1x8x16384,1x8x4x4096 [--runs 50]
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))

import harness  # noqa: E402
from harness import adjoint, torch  # noqa: E402
from mhc_timing import event_times  # noqa: E402


def event_ms(fn, runs):
    fn()
    fn()
    return statistics.median(event_times(fn, runs))  # one more warm-up, then CUDA events


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", required=True, help="BxSxNxD,... (batch, seq, n, dim)")
    parser.add_argument("--op", default="mhc_pre")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    for text in args.shapes.split(","):
        batch, seq, n, dim = (int(v) for v in text.split("x"))
        program = adjoint.prepare("%s batch=%d seq=%d n=%d dim=%d dtype=bf16"
                                  % (args.op, batch, seq, n, dim))
        bound = harness.bind_random(program)
        ms = event_ms(lambda: program.launch(bound), args.runs)

        def twenty():
            for _ in range(20):
                program.launch(bound)
        batch_ms = event_ms(twenty, max(3, args.runs // 10)) / 20
        first = {name: bound[name].clone() for name in program.outputs}
        program.launch(bound)
        torch.cuda.synchronize()
        bitwise = all(torch.equal(first[name], bound[name]) for name in program.outputs)
        print(json.dumps(dict(op=args.op, shape=text, ms=round(ms, 5), batch_ms=round(batch_ms, 5), bitwise=bitwise)), flush=True)
        del bound
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
