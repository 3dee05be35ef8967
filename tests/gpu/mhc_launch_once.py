"""Launches the mHC programs named on the command line (spec strings) a few times on seeded
random inputs and prints a digest of their outputs: a small driver for Nsight Compute (ncu) and
compute-sanitizer runs, which need plain launches and no torch.profiler. Not collected by pytest.

    ncu --kernel-name regex:h_mix_partials python3 tests/gpu/mhc_launch_once.py \
        "mhc_pre dtype=bf16 batch=1 seq=4096 n=4 dim=4096"
"""

import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("ADJOINT_TUNE_PROGRAMMATIC_LAUNCH", "0")

import harness  # noqa: E402
from harness import adjoint, torch  # noqa: E402


def main(specs, launches=3):
    for spec in specs:
        program = adjoint.prepare(spec)
        bound = harness.bind_random(program)
        for _ in range(launches):
            program.launch(bound)
        torch.cuda.synchronize()
        digest = hashlib.sha256()
        for name, tensor in sorted(bound.items()) if isinstance(bound, dict) else []:
            digest.update(name.encode())
            digest.update(tensor.contiguous().view(torch.uint8).cpu().numpy().tobytes())
        print("%s: digest %s" % (spec, digest.hexdigest()[:16]), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or ["mhc_pre dtype=bf16 batch=1 seq=4096 n=4 dim=4096"])
