"""Determinism and alignment check of the warp kernels' lane spans (compiler/emit_lane_spans.cpp):
for each mHC spec, three launches on the same inputs are bitwise equal, and a launch whose input
bases are shifted by one element (the misaligned copy: element loads in the span order) gives
the same bits as the aligned launch for every output. Prints one line per spec; exit status 1
on a failure. Not collected by pytest. Run it under ADJOINT_TUNE_LANE_SPANS=0 for the kernels of
before (whose misaligned bits also match: same loop either way).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import adjoint, torch  # noqa: E402

SPECS = [
    "mhc_pre_backward dtype=bf16 batch=1 seq=4096 n=4 dim=4096",
    "mhc_pre dtype=bf16 batch=1 seq=4096 n=4 dim=4096",
    "mhc_pre_backward dtype=bf16 batch=2 seq=2048 n=6 dim=1024",
    "mhc_pre dtype=f32 batch=1 seq=1024 n=4 dim=2560",
    "mhc_pre_backward dtype=bf16 batch=1 seq=300 n=4 dim=4000",
]


def shifted(t):
    """A copy of `t` whose base is one element past an aligned allocation."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
    out = buf[1:].view(t.shape)
    out.copy_(t)
    return out


def main():
    failed = False
    for spec in SPECS:
        try:
            program = adjoint.prepare(spec)
        except Exception as error:  # noqa: BLE001  (reported, the other specs still run)
            print("%s: prepare failed: %s" % (spec, error), flush=True)
            failed = True
            continue
        bound = harness.bind_random(program)
        outputs = [i.name for i in program.tensors if i.role != "input"]
        runs = []
        for _ in range(3):
            program.launch(bound)
            torch.cuda.synchronize()
            runs.append({k: bound[k].clone() for k in outputs})
        same = all(harness.bitwise_equal(runs[0][k], r[k]) for r in runs[1:] for k in outputs)
        moved = {k: shifted(v) for k, v in bound.items()}
        program.launch(moved)
        torch.cuda.synchronize()
        misaligned = [k for k in outputs if not harness.bitwise_equal(runs[0][k], moved[k])]
        print("%s: 3 launches bitwise equal: %s; misaligned bases, outputs differing: %s"
              % (spec, same, misaligned or "none"), flush=True)
        failed = failed or not same
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
