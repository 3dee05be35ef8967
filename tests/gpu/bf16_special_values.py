"""Special values through a bf16 epilogue: mhc_pre_backward's dx (bf16) on inputs that make some
of its outputs NaN, infinite, subnormal or round past bfloat16's largest finite value, under
several sets of ADJOINT_TUNE_* knobs (e.g. ADJOINT_TUNE_BF16_CVT=0, the integer rounding, and
the default hardware rounding). Prints, per configuration, the digest of every output and how
many dx values fell in each class: equal digests across configurations mean the same bits for
those values too. Not collected by pytest.

    python3 tests/gpu/bf16_special_values.py new: old:ADJOINT_TUNE_BF16_CVT=0
"""

import hashlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = [(1, 256, 4, 1024), (2, 67, 6, 512)]


def child():
    sys.path.insert(0, HERE)
    import harness  # noqa: E402
    from harness import adjoint, torch  # noqa: E402

    for shape in SHAPES:
        batch, seq, n, dim = shape
        program = adjoint.prepare("mhc_pre_backward batch=%d seq=%d n=%d dim=%d dtype=bf16" % shape)
        bound = harness.bind_random(program)
        x, g = bound["x"], bound["grad_h_in"]
        # Token 1: tiny x and grad_h_in, no mix gradients: dx ~ h_pre * grad_h_in, subnormal
        # in bfloat16 (below 2^-126) with low bits to round.
        x[0, 1] = harness.random_tensor(x[0, 1].shape, x.dtype, 90, 1e-39, 9e-39)
        g[0, 1] = harness.random_tensor(g[0, 1].shape, g.dtype, 91, -9e-39, 9e-39)
        for name in ("grad_h_post", "grad_h_res"):
            if name in bound:
                bound[name][0, 1] = 0
        # Token 2: grad_h_in near bfloat16's largest finite value (3.39e38): some dx round up
        # to infinity, some stay finite.
        g[0, 2] = harness.random_tensor(g[0, 2].shape, g.dtype, 92, 3.0e38, 3.39e38)
        # Token 3: infinities and NaNs in grad_h_in and x.
        g[0, 3, 0::4] = float("inf")
        g[0, 3, 1::4] = float("-inf")
        x[0, 3, :, 2::8] = float("nan")
        for _ in range(2):
            program.launch(bound)
        torch.cuda.synchronize()
        digest = hashlib.sha1()
        for info in program.tensors:
            if info.role == "output":
                digest.update(bound[info.name].contiguous().view(torch.uint8).cpu().numpy()
                              .tobytes())
        dx = bound["dx"].float()
        tiny = torch.finfo(torch.bfloat16).tiny
        classes = {
            "nan": int(torch.isnan(dx).sum()),
            "inf": int(torch.isinf(dx).sum()),
            "subnormal": int(((dx != 0) & (dx.abs() < tiny)).sum()),
            "zero": int((dx == 0).sum()),
            "all": dx.numel(),
        }
        print("B%d S%d n%d D%d: outputs %s, dx %s" % (shape + (
            digest.hexdigest()[:16], " ".join("%s %d" % kv for kv in classes.items()))))
        sys.stdout.flush()


def main(configs):
    if configs == ["--child"]:
        child()
        return
    digests = {}
    for text in configs or ["default:"]:
        name, _, rest = text.partition(":")
        env = dict(os.environ)
        for item in filter(None, rest.split(",")):
            key, _, value = item.partition("=")
            env[key] = value
        result = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], env=env,
                                capture_output=True, text=True, timeout=300)
        print("== %s %s" % (name, rest))
        print(result.stdout, end="")
        if result.returncode != 0:
            print("  failed (%d): %s" % (result.returncode, result.stderr[-600:]))
        digests[name] = [line.split("outputs ")[1][:16] for line in result.stdout.splitlines()
                         if "outputs " in line]
        sys.stdout.flush()
    same = len({tuple(d) for d in digests.values()}) == 1
    print("SAME OUTPUTS in every configuration" if same else "OUTPUTS DIFFER: %s" % digests)


if __name__ == "__main__":
    main(sys.argv[1:])
