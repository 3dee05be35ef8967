"""Prepares one mHC program (default mhc_pre_backward B1 S4096 n4 D4096 bf16) and launches it
twice, for `ncu --kernel-name ... --launch-count N` to profile its kernels (run from the
repository root with the usual ADJOINT_* environment; programmatic launches off)."""

import os
import sys

os.environ.setdefault("ADJOINT_TUNE_PROGRAMMATIC_LAUNCH", "0")
sys.path.insert(0, os.path.join(os.getcwd(), "tests", "gpu"))

import harness  # noqa: E402
from harness import adjoint, torch  # noqa: E402

spec = sys.argv[1] if len(sys.argv) > 1 else "mhc_pre_backward batch=1 seq=4096 n=4 dim=4096 dtype=bf16"
program = adjoint.prepare(spec)
bound = harness.bind_random(program)
for _ in range(2):
    program.launch(bound)
torch.cuda.synchronize()
print("launched", spec)
