#!/usr/bin/env python3
"""The mHC part of the side-by-side benchmark (issue 9): every mHC op on the issue's shapes,
adjoint against PyTorch eager of the same formulas and torch.compile of the same function.

Ops: mhc_pre (forward) and mhc_pre_backward (DESIGN.md), mhc_post and mhc_post_backward
(ops/mhc_post.h), mhc_sinkhorn and mhc_sinkhorn_backward (ops/mhc_sinkhorn.h, t_max 20, eps
1e-6). The PyTorch functions below are written from those formulas (the backward ones as the
explicit gradient formulas, not autograd, so that torch.compile sees one function); eager and
torch.compile run the very same function. Shapes (B, S, n, D): issue 9's five; Sinkhorn has no
D, so it runs once per distinct (B, S, n).

Per op and shape, each implementation gets:
  * kernel time: CUDA events around every call while the GPU is kept busy (bench.GpuTimer),
    median of `runs` calls after a warm-up;
  * the call from Python to completion on the host clock (call + synchronize), median;
  * GB/s of the minimum bytes (every input read once, every output written once) and the
    fraction of the copy bandwidth measured in the same run.
Inputs are not rotated: the large cases (x of 50 to 270 MB) exceed the 50 MB L2, and the small
ones are latency-bound. Calls slower than 15 ms get fewer timed runs (1.5 s per implementation).
torch.compile's warm-up (seconds per function and shape) is timed separately and bounded: once
80% of `budget_s` is spent, torch.compile is skipped (recorded as None, with the reason), and
past the budget whole cases are; the run stays bounded.

Run standalone (`python3 bench/bench_mhc.py --out mhc.json --chart mhc.png`) or from
bench.py, which adds these records to its JSON "cases" and its chart.
"""

import argparse
import json
import math
import os
import statistics
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import torch  # noqa: E402

import adjoint  # noqa: E402

SHAPES = [  # (B, S, n, D): issue 9
    (1, 4096, 4, 4096),
    (1, 4096, 4, 2560),
    (2, 2048, 6, 1024),
    (1, 65536, 4, 512),
    (1, 1, 8, 16384),
]
T_MAX = 20
SINKHORN_EPS = 1e-6
HC_EPS = 1e-6
NORM_EPS = 1e-6
DEVICE = torch.device("cuda")
F32 = torch.float32


# --- the PyTorch formulas --------------------------------------------------------------------

def torch_mhc_pre(x, phi, alpha, bias, gamma):
    """DESIGN.md's mhc_pre: (h_in, h_post, h_res, h_pre, inv_rms, h_mix)."""
    batch, seq, n, dim = x.shape
    v = x.float().reshape(batch, seq, n * dim)
    h_mix = (v * gamma.reshape(-1)) @ phi.t()
    inv_rms = torch.rsqrt((v * v).mean(-1) + NORM_EPS)
    m = h_mix * inv_rms[..., None]
    h_pre = torch.sigmoid(alpha[0] * m[..., :n] + bias[:n]) + HC_EPS
    h_post = 2 * torch.sigmoid(alpha[1] * m[..., n:2 * n] + bias[n:2 * n])
    h_res = (alpha[2] * m[..., 2 * n:] + bias[2 * n:]).reshape(batch, seq, n, n)
    h_in = (h_pre[..., None] * x.float()).sum(-2).to(x.dtype)
    return h_in, h_post, h_res, h_pre, inv_rms, h_mix


def torch_mhc_pre_backward(x, phi, alpha, grad_h_in, grad_h_post, grad_h_res, inv_rms, h_mix,
                           h_pre, h_post, gamma):
    """DESIGN.md's mhc_pre_backward formulas: (dx, dphi, dalpha, dbias, dgamma)."""
    batch, seq, n, dim = x.shape
    k = n * n + 2 * n
    xf, g = x.float(), grad_h_in.float()
    v = xf.reshape(batch, seq, n * dim)
    dh_pre = (xf * g[..., None, :]).sum(-1)
    s = h_pre - HC_EPS
    dh_pre2 = dh_pre * s * (1 - s)
    dh_post2 = grad_h_post * h_post * (1 - h_post / 2)
    dlogit = torch.cat([dh_pre2, dh_post2, grad_h_res.reshape(batch, seq, n * n)], -1)
    scale = torch.cat([alpha[0].expand(n), alpha[1].expand(n), alpha[2].expand(n * n)])
    dh_mix_tmp = dlogit * scale
    dh_mix = dh_mix_tmp * inv_rms[..., None]
    dvecx_mm = dh_mix @ phi
    gam = gamma.reshape(-1)
    dphi = dh_mix.reshape(-1, k).t() @ (v * gam).reshape(-1, n * dim)
    dinv_rms = (dh_mix_tmp * h_mix).sum(-1)
    dx = (dvecx_mm * gam - (dinv_rms * inv_rms ** 3 / (n * dim))[..., None] * v
          + (h_pre[..., None] * g[..., None, :]).reshape(batch, seq, n * dim))
    product = dlogit * (h_mix * inv_rms[..., None])
    dalpha = torch.stack([product[..., :n].sum(), product[..., n:2 * n].sum(),
                          product[..., 2 * n:].sum()])
    dbias = dlogit.reshape(-1, k).sum(0)
    dgamma = (v * dvecx_mm).reshape(-1, n, dim).sum(0)
    return dx.reshape(batch, seq, n, dim).to(x.dtype), dphi, dalpha, dbias, dgamma


def torch_mhc_post(x, y, h_res, h_post):
    return (h_res @ x.float() + h_post[..., None] * y.float()[..., None, :]).to(x.dtype)


def torch_mhc_post_backward(grad_out, x, y, h_res, h_post):
    g = grad_out.float()
    dx = (h_res.transpose(-1, -2) @ g).to(x.dtype)
    dy = (h_post[..., None] * g).sum(-2).to(x.dtype)
    dh_res = g @ x.float().transpose(-1, -2)
    dh_post = (g * y.float()[..., None, :]).sum(-1)
    return dx, dy, dh_res, dh_post


def _sinkhorn_iterates(h_res):
    p = torch.softmax(h_res, dim=-1) + SINKHORN_EPS
    iterates = [p, p / (p.sum(-2, keepdim=True) + SINKHORN_EPS)]
    for _ in range(T_MAX - 1):
        p = iterates[-1]
        p = p / (p.sum(-1, keepdim=True) + SINKHORN_EPS)
        iterates.append(p)
        iterates.append(p / (p.sum(-2, keepdim=True) + SINKHORN_EPS))
    return iterates


def torch_mhc_sinkhorn(h_res):
    p = torch.softmax(h_res, dim=-1) + SINKHORN_EPS
    p = p / (p.sum(-2, keepdim=True) + SINKHORN_EPS)
    for _ in range(T_MAX - 1):
        p = p / (p.sum(-1, keepdim=True) + SINKHORN_EPS)
        p = p / (p.sum(-2, keepdim=True) + SINKHORN_EPS)
    return p


def torch_mhc_sinkhorn_backward(grad_out, h_res):
    """The adjoint of each normalization, newest first, then of the softmax."""
    iterates = _sinkhorn_iterates(h_res)
    g = grad_out
    for k in range(len(iterates) - 1, 0, -1):
        dim = -1 if k % 2 == 0 else -2  # even k: a row step; odd k: a column step
        before, after = iterates[k - 1], iterates[k]
        dot = (g * after).sum(dim, keepdim=True)
        g = (g - dot) / (before.sum(dim, keepdim=True) + SINKHORN_EPS)
    s = torch.softmax(h_res, dim=-1)
    return s * (g - (s * g).sum(-1, keepdim=True))


# --- inputs, calls and bytes per op ------------------------------------------------------------

def _uniform(shape, dtype, low, high):
    return (torch.rand(shape, device=DEVICE, dtype=F32) * (high - low) + low).to(dtype)


def _bytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def make_op(op, shape):
    """(adjoint call, PyTorch function, its arguments, minimum bytes) for one op and shape."""
    batch, seq, n, dim = shape
    bf16, k = torch.bfloat16, n * n + 2 * n
    if op in ("mhc_pre", "mhc_pre_backward"):
        x = _uniform((batch, seq, n, dim), bf16, -1, 1)
        phi = _uniform((k, n * dim), F32, -1, 1) * (2.0 / math.sqrt(n * dim))
        alpha = _uniform((3,), F32, 0.5, 1.5)
        bias = _uniform((k,), F32, -0.5, 0.5)
        gamma = _uniform((n, dim), F32, 0.5, 1.5)
        if op == "mhc_pre":
            program = adjoint.prepare("mhc_pre batch=%d seq=%d n=%d dim=%d dtype=bf16"
                                      % (batch, seq, n, dim))
            args = (x, phi, alpha, bias, gamma)
            bound = dict(zip(("x", "phi", "alpha", "bias", "gamma"), args))
            outputs = torch_mhc_pre(*args)
            names = ("h_in", "h_post", "h_res", "h_pre", "inv_rms", "h_mix")
            # One launch per call: a generator over program(bound)[name] would launch once per
            # output name (6 launches; the figures before 2026-11-23's gemm branch did).
            def call():
                result = program(bound)
                return tuple(result[name] for name in names)
            return (call, torch_mhc_pre, args, _bytes(*args) + _bytes(*outputs))
        h_in, h_post, h_res, h_pre, inv_rms, h_mix = torch_mhc_pre(x, phi, alpha, bias, gamma)
        grad_h_in = _uniform(h_in.shape, bf16, -1, 1)
        grad_h_post = _uniform(h_post.shape, F32, -1, 1)
        grad_h_res = _uniform(h_res.shape, F32, -1, 1)
        args = (x, phi, alpha, grad_h_in, grad_h_post, grad_h_res, inv_rms, h_mix, h_pre, h_post,
                gamma)
        outputs = torch_mhc_pre_backward(*args)
        return (lambda: adjoint.mhc_pre_backward(*args, hc_eps=HC_EPS), torch_mhc_pre_backward,
                args, _bytes(*args) + _bytes(*outputs))
    if op in ("mhc_post", "mhc_post_backward"):
        x = _uniform((batch, seq, n, dim), bf16, -1, 1)
        y = _uniform((batch, seq, dim), bf16, -1, 1)
        h_res = _uniform((batch, seq, n, n), F32, 0, 0.5)
        h_post = _uniform((batch, seq, n), F32, 0, 2)
        if op == "mhc_post":
            args = (x, y, h_res, h_post)
            return (lambda: (adjoint.mhc_post(*args),), torch_mhc_post, args,
                    _bytes(*args) + _bytes(x))
        args = (_uniform((batch, seq, n, dim), bf16, -1, 1), x, y, h_res, h_post)
        return (lambda: adjoint.mhc_post_backward(*args), torch_mhc_post_backward, args,
                _bytes(*args) + _bytes(x, y, h_res, h_post))
    h_res = _uniform((batch, seq, n, n), F32, -3, 3)
    if op == "mhc_sinkhorn":
        return (lambda: (adjoint.mhc_sinkhorn(h_res, T_MAX, SINKHORN_EPS),), torch_mhc_sinkhorn,
                (h_res,), 2 * _bytes(h_res))
    grad = _uniform((batch, seq, n, n), F32, -1, 1)
    return (lambda: (adjoint.mhc_sinkhorn_backward(grad, h_res, T_MAX, SINKHORN_EPS),),
            torch_mhc_sinkhorn_backward, (grad, h_res), 3 * _bytes(h_res))


OPS = ("mhc_pre", "mhc_pre_backward", "mhc_post", "mhc_post_backward", "mhc_sinkhorn",
       "mhc_sinkhorn_backward")


def cases(name_filter=None):
    """(op, shape) pairs, most important first: the backward ops on the first shape lead."""
    chosen, sinkhorn_seen = [], set()
    for shape in SHAPES:
        for op in OPS:
            if op.startswith("mhc_sinkhorn"):
                key = (op, shape[:3])
                if key in sinkhorn_seen:
                    continue
                sinkhorn_seen.add(key)
            if name_filter and name_filter not in case_name(op, shape):
                continue
            chosen.append((op, shape))
    return chosen


def case_name(op, shape):
    batch, seq, n, dim = shape
    if op.startswith("mhc_sinkhorn"):
        return "mHC %s B%d S%d n%d t%d" % (op, batch, seq, n, T_MAX)
    return "mHC %s B%d S%d n%d D%d" % (op, batch, seq, n, dim)


def _as_tuple(value):
    return value if isinstance(value, tuple) else (value,)


def max_relative_difference(ours, theirs):
    worst = 0.0
    for a, b in zip(_as_tuple(ours), _as_tuple(theirs)):
        scale = max(b.double().abs().max().item() if b.numel() else 0.0, 1e-30)
        worst = max(worst, (a.double() - b.double()).abs().max().item() / scale)
    return worst


def host_call_us(fn, runs, warmup=3):
    """Median host microseconds of fn() + synchronize."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter_ns() - start) / 1e3)
    return statistics.median(samples)


def bench_case(timer, op, shape, copy_gbps, runs, warmup, compile_allowed):
    adjoint_call, function, args, moved = make_op(op, shape)
    start = time.perf_counter()
    ours = adjoint_call()
    torch.cuda.synchronize()
    first_call_s = time.perf_counter() - start
    eager = lambda: function(*args)  # noqa: E731
    record = {
        "case": case_name(op, shape), "op": op, "family": "mhc",
        "dtype": "f32" if op.startswith("mhc_sinkhorn") else "bf16",
        "shape": list(shape[:3]) + ([] if op.startswith("mhc_sinkhorn") else [shape[3]]),
        "bytes": moved, "adjoint_first_call_s": first_call_s,
        "max_rel_diff_vs_torch": max_relative_difference(ours, eager()),
    }
    host_runs = max(10, runs // 5)
    implementations = [("adjoint", adjoint_call), ("torch", eager)]
    if compile_allowed:
        try:
            compiled = torch.compile(function)
            start = time.perf_counter()
            compiled(*args)
            torch.cuda.synchronize()
            record["torch_compile_warmup_s"] = time.perf_counter() - start
            implementations.append(("torch_compile", lambda: compiled(*args)))
        except Exception as error:  # eager and adjoint are still measured
            record["torch_compile_error"] = "%s: %s" % (type(error).__name__, str(error)[:500])
    else:
        record["torch_compile_skipped"] = "time budget spent"
    for name, call in implementations:
        # Slow calls (tens of ms) get fewer timed runs, so that every case stays bounded.
        estimate_ms = host_call_us(call, 2, warmup=1) / 1e3
        timed_runs = max(10, min(runs, int(1500 / max(estimate_ms, 1e-3))))
        ms = statistics.median(timer.time(call, timed_runs, min(warmup, timed_runs)))
        record[name + "_ms"] = ms
        record[name + "_runs"] = timed_runs
        record[name + "_GBps"] = moved / (ms * 1e6)
        record[name + "_fraction_of_copy"] = moved / (ms * 1e6) / copy_gbps
        record[name + "_call_us"] = host_call_us(
            call, max(5, min(host_runs, int(400 / max(estimate_ms, 1e-3)))))
    for name in ("torch_compile_ms", "torch_compile_GBps", "torch_compile_fraction_of_copy",
                 "torch_compile_call_us"):
        record.setdefault(name, None)
    record["ratio"] = record["torch_ms"] / record["adjoint_ms"]
    record["compile_ratio"] = (record["torch_compile_ms"] / record["adjoint_ms"]
                               if record["torch_compile_ms"] else None)
    return record


def measure(timer, copy_gbps, runs=100, warmup=10, budget_s=200.0, name_filter=None,
            use_compile=True, progress=None):
    """Every mHC case within `budget_s` seconds (torch.compile while 80% of it is left):
    {"cases": records, "errors": [...], "seconds": ...}; `progress(result)` after each case."""
    import torch._dynamo
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
    start = time.monotonic()
    records, errors = [], []
    for op, shape in cases(name_filter):
        elapsed = time.monotonic() - start
        if elapsed > budget_s:
            errors.append("%s: not run, the %.0f s budget is spent" % (case_name(op, shape),
                                                                       budget_s))
            continue
        try:
            records.append(bench_case(timer, op, shape, copy_gbps, runs, warmup,
                                      use_compile and elapsed < 0.8 * budget_s))
        except Exception as error:  # keep measuring the other cases; report this one
            errors.append("%s: %s: %s" % (case_name(op, shape), type(error).__name__, error))
        torch.cuda.empty_cache()
        if progress:
            progress({"cases": records, "errors": errors, "seconds": time.monotonic() - start})
    return {"cases": records, "errors": errors, "seconds": time.monotonic() - start}


def _ms(value):
    return "%9.4f" % value if value is not None else "%9s" % "-"


def print_table(records, copy_gbps):
    print("mHC (copy bandwidth %.0f GB/s): kernel ms (CUDA events), call us (host, to completion),"
          " %% of copy bandwidth for the minimum bytes" % copy_gbps)
    print("%-44s %9s %9s %9s %7s %7s %6s %6s %6s %8s %8s %8s" % (
        "case", "adjoint", "eager", "compile", "eager/", "compl/", "adj%", "eag%", "cmp%",
        "adj us", "eag us", "cmp us"))
    for r in records:
        if r.get("family") != "mhc":
            continue
        fraction = r.get("torch_compile_fraction_of_copy")
        print("%-44s %s %s %s %7.2f %7s %5.0f%% %5.0f%% %6s %8.0f %8.0f %8s" % (
            r["case"][4:], _ms(r["adjoint_ms"]), _ms(r["torch_ms"]), _ms(r["torch_compile_ms"]),
            r["ratio"], "%.2f" % r["compile_ratio"] if r["compile_ratio"] else "-",
            100 * r["adjoint_fraction_of_copy"], 100 * r["torch_fraction_of_copy"],
            "%.0f%%" % (100 * fraction) if fraction is not None else "-",
            r["adjoint_call_us"], r["torch_call_us"],
            "%.0f" % r["torch_compile_call_us"] if r["torch_compile_call_us"] else "-"))


def main():
    import bench  # GpuTimer, copy_bandwidth and write_chart are bench.py's
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench_mhc.json")
    parser.add_argument("--chart", default="bench_mhc.png")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--budget", type=float, default=150.0, help="seconds for all cases")
    parser.add_argument("--filter", default=None, help="only cases whose name contains this")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    args = parser.parse_args()
    timer = bench.GpuTimer()
    copy_gbps = bench.copy_bandwidth(timer, args.runs, args.warmup)
    header = {"device": torch.cuda.get_device_name(DEVICE), "torch": torch.__version__,
              "adjoint": adjoint.version(), "copy_GBps": copy_gbps, "runs": args.runs}

    def save(partial):  # after every case, so that a run cut short still leaves its figures
        with open(args.out, "w") as f:
            json.dump(dict(partial, **header), f, indent=1)

    result = measure(timer, copy_gbps, args.runs, args.warmup, args.budget, args.filter,
                     not args.no_compile, save)
    result.update(header)
    if result["cases"]:
        result["chart"] = bench.write_chart(args.chart, result["cases"], "%s mHC, copy %.0f GB/s"
                                            % (result["device"], copy_gbps))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print("device: %s" % result["device"])
    print_table(result["cases"], copy_gbps)
    for error in result["errors"]:
        print("ERROR " + error)
    print("mHC bench: %d cases in %.0f s" % (len(result["cases"]), result["seconds"]))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
