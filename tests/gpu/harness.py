"""Shared pieces of the GPU parity suite (tests/gpu): the per-dtype tolerances every test
states against, the check helpers, the determinism check, and a JSON-lines record of every
case's error for the summary that scripts/gpu-check prints.

Tests import this module first: it puts python/ on sys.path and skips the whole module cleanly
where there is no PyTorch or no CUDA device (CI, the development machine). Where a GPU is
present a missing or broken libadjoint is an error, not a skip.

Tolerances (an error is |adjoint - reference|, a tolerance is a fraction of a scale):
  upsample (sums of grad_output values): |error| <= SUM_TOL[dtype] * (sum of |terms|) per
      element, the floating-point bound of one rounded sum; reference in f64.
  grid_sampler, mhc (products and sums of many terms): max |error| <= NORM_TOL[dtype] *
      max |reference|, reference computed by PyTorch in f64 (mhc) or at the op's stated
      coordinate precision (grid_sampler: f32 for f16/bf16/f32 data, f64 for f64).
Determinism: for a program that claims it (adjoint_program_is_deterministic), three runs on the
same inputs are bitwise equal.
"""

import json
import os
import sys

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

torch = pytest.importorskip("torch", reason="PyTorch is not installed")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import adjoint  # noqa: E402  (after the path is set)

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
          "f64": torch.float64}

# Bound on one rounded sum, as a fraction of the sum of |terms|: one rounding of the result to
# the dtype (half an ulp: 2^-11 f16, 2^-8 bf16) plus f32/f64 accumulation, with margin.
SUM_TOL = {"f16": 1e-3, "bf16": 8e-3, "f32": 1e-5, "f64": 1e-12}
# Max error as a fraction of the reference's max magnitude, for products and long sums.
NORM_TOL = {"f16": 4e-3, "bf16": 3e-2, "f32": 1e-4, "f64": 1e-9}
# mHC: dx is in the op's dtype; the f32 gradients are sums over tokens and n*D.
MHC_TOL = {"f16": 4e-3, "bf16": 2e-2, "f32": 2e-4, "f64": 1e-9}

DEVICE = torch.device("cuda", torch.cuda.current_device())


def record(suite, case, **metrics):
    """Appends one case's result to $ADJOINT_PARITY_JSONL (if set), for gpu-check's summary."""
    path = os.environ.get("ADJOINT_PARITY_JSONL")
    if not path:
        return
    line = json.dumps(dict(suite=suite, case=case, **metrics), sort_keys=True)
    with open(path, "a") as f:  # one short write per line: appends from xdist workers interleave
        f.write(line + "\n")     # by whole lines


def seeded(seed):
    return torch.Generator(device=DEVICE).manual_seed(seed)


def random_tensor(shape, dtype, seed, low=-1.0, high=1.0, memory_format=None):
    """Uniform values in [low, high), generated in f32 and rounded to `dtype`."""
    values = torch.rand(shape, generator=seeded(seed), device=DEVICE, dtype=torch.float32)
    values = (values * (high - low) + low).to(dtype)
    if memory_format is not None:
        values = values.contiguous(memory_format=memory_format)
    return values


def bind_random(program, ranges=None, low=0.1, high=1.0):
    """Tensors for every argument of a prepared Program: its inputs uniform in [low, high) (or in
    ranges[name] where given), seeded by their position, and its outputs uninitialized."""
    bound = {}
    for index, info in enumerate(program.tensors):
        dtype = DTYPES[info.dtype]
        if info.role == "input":
            lo, hi = (ranges or {}).get(info.name, (low, high))
            bound[info.name] = random_tensor(info.shape, dtype, index, lo, hi)
        else:
            bound[info.name] = torch.empty(info.shape, device=DEVICE, dtype=dtype)
    return bound


def check_sum_bound(name, actual, reference, abs_sum, dtype_name):
    """|actual - reference| <= SUM_TOL * abs_sum elementwise (plus the smallest normal of the
    dtype); returns the worst error/bound ratio. Reports the first bad elements."""
    bound = abs_sum.double() * SUM_TOL[dtype_name] + torch.finfo(DTYPES[dtype_name]).tiny
    error = (actual.double() - reference.double()).abs()
    ratio = (error / bound).max().item() if error.numel() else 0.0
    if not ratio <= 1.0:
        bad = (error > bound).nonzero()[:5].tolist()
        details = ["%s: adjoint %r reference %r" % (tuple(i), actual[tuple(i)].item(),
                                                     reference[tuple(i)].item()) for i in bad]
        pytest.fail("%s: %d elements over the %s bound (worst error/bound %.3g); first: %s"
                    % (name, int((error > bound).sum()), dtype_name, ratio, "; ".join(details)))
    return ratio


def check_normalized(name, actual, reference, tolerance):
    """max|actual - reference| <= tolerance * max|reference|; returns the normalized error."""
    reference = reference.double()
    scale = max(reference.abs().max().item() if reference.numel() else 0.0, 1e-30)
    error = (actual.double() - reference).abs()
    worst = error.max().item() / scale if error.numel() else 0.0
    if not worst <= tolerance:
        index = tuple(torch.nonzero(error == error.max())[0].tolist())
        pytest.fail("%s: max error %.3g of max |reference| %.3g (normalized %.3g > %.3g) at %s: "
                    "adjoint %r, reference %r" % (name, error.max().item(), scale, worst,
                                                  tolerance, index, actual[index].item(),
                                                  reference[index].item()))
    return worst


def bitwise_equal(a, b):
    """Equal bit patterns (NaN-safe): compares the raw bytes."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


def check_deterministic(spec, run_once, runs=3):
    """For a program that claims determinism, `run_once()` (returning a tuple of tensors) gives
    bitwise-equal results `runs` times. Returns whether the program claims it."""
    program = adjoint.prepare(spec)
    if not program.deterministic:
        return False
    first = run_once()
    for attempt in range(1, runs):
        again = run_once()
        for index, (a, b) in enumerate(zip(first, again)):
            if a is None and b is None:
                continue
            assert bitwise_equal(a, b), ("%s: output %d differs bitwise between run 1 and run %d"
                                         % (spec, index, attempt + 1))
    return True
