"""Call overhead of the Python path on the small upsample case, beside PyTorch's op, measured
in one run: host microseconds from the call to completion (call + torch.cuda.synchronize,
median), for adjoint's function, a prepared Program's launch, a warm prepare() cache hit
(host time only, nothing is queued), the drop-in path (F.interpolate's backward op through
adjoint.torch), and PyTorch's own op. bench.py calls measure(); run alone it prints JSON.
"""

import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch  # noqa: E402

import adjoint  # noqa: E402

SMALL_INPUT_SIZE = [2, 3, 32, 32]
SMALL_OUTPUT_SIZE = [64, 64]


def completion_us(fn, runs, warmup=50):
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


def host_us(fn, runs, warmup=50):
    """Median host microseconds of fn() alone."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e3)
    return statistics.median(samples)


def profile_function_call(call, calls=2000):
    """The ten functions with the most own time over `calls` calls (cProfile), to show where
    the Python path's time goes."""
    import cProfile
    import pstats
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        call()
    profiler.disable()
    torch.cuda.synchronize()
    stats = pstats.Stats(profiler)
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])[:10]
    return ["%s:%s %s: %.2f us/call own" % (os.path.basename(f), line, name, tt / calls * 1e6)
            for (f, line, name), (cc, nc, tt, ct, callers) in rows]


def measure(runs=1000):
    """Every figure with the compiled launch path (adjoint._fastlaunch) where it is built,
    beside the adjoint figures with the ctypes path, in one run."""
    from adjoint import _fast
    results = _measure(runs)
    results["launch_path"] = "fastlaunch" if _fast.module() is not None else "ctypes"
    if _fast.module() is not None:
        results["fastlaunch_binding_only_us"] = _binding_only_us(runs)
    if _fast.module() is None:
        results["fastlaunch_missing"] = _fast.reason
        return results
    _fast.set_enabled(False)
    adjoint.clear_cache()
    try:
        plain = _measure(runs, adjoint_only=True)
    finally:
        _fast.set_enabled(True)
        adjoint.clear_cache()
    results["ctypes_path"] = {k: v for k, v in plain.items() if k.startswith("adjoint_")}
    return results


def _binding_only_us(runs):
    """Host microseconds of a prepared program's launch through the compiled path with a launch
    function that does nothing: the binding's own cost (the tensors' checks and pointers, the
    stream), without the library's launch."""
    from adjoint import _fast
    device = torch.device("cuda")
    text = adjoint.spec.upsample_nearest_backward(2, False, "f32", SMALL_INPUT_SIZE,
                                                  SMALL_OUTPUT_SIZE, [None, None])
    program = adjoint.prepare(text)
    launcher = program._fast_launcher(_fast.module().launch_nothing_address())
    bound = {"grad_output": torch.randn(SMALL_INPUT_SIZE[:2] + SMALL_OUTPUT_SIZE, device=device),
             "grad_input": torch.empty(SMALL_INPUT_SIZE, device=device)}
    if not launcher(bound, None):
        raise RuntimeError("the compiled launcher declined the bound tensors")
    return host_us(lambda: launcher(bound, None), runs)


def _measure(runs, adjoint_only=False):
    device = torch.device("cuda")
    input_size, output_size = SMALL_INPUT_SIZE, SMALL_OUTPUT_SIZE
    grad_output = torch.randn(input_size[:2] + output_size, device=device)
    text = adjoint.spec.upsample_nearest_backward(2, False, "f32", input_size, output_size,
                                                  [None, None])
    program = adjoint.prepare(text)
    grad_input = torch.empty(input_size, device=device)
    bound = {"grad_output": grad_output, "grad_input": grad_input}

    def adjoint_call():
        return adjoint.upsample_nearest2d_backward(grad_output, output_size, input_size)

    def torch_call():
        return torch.ops.aten.upsample_nearest2d_backward(grad_output, output_size, input_size)

    results = {
        "device": torch.cuda.get_device_name(device),
        "case": "upsample_nearest2d_backward f32 %s->%s" % (input_size, output_size),
        "synchronize_only_us": completion_us(lambda: None, runs),
        "adjoint_function_us": completion_us(adjoint_call, runs),
        "adjoint_program_launch_us": completion_us(lambda: program.launch(bound), runs),
        "adjoint_program_launch_host_only_us": host_us(lambda: program.launch(bound), runs),
        "adjoint_program_call_us": completion_us(lambda: program(bound), runs),
        "adjoint_prepare_hit_us": host_us(lambda: adjoint.prepare(text), runs),
        "torch_us": completion_us(torch_call, runs),
        "torch_host_only_us": host_us(torch_call, runs),
        "torch_empty_us": completion_us(lambda: torch.empty(input_size, device=device), runs),
        "adjoint_function_host_only_us": host_us(adjoint_call, runs),
        "targets_us": {"adjoint_function_us": 20, "adjoint_program_launch_us": 8,
                       "adjoint_prepare_hit_us": 2},
    }
    if adjoint_only:
        return results
    try:
        import adjoint.torch as dropin
        with dropin.enabled():
            results["dropin_aten_op_us"] = completion_us(torch_call, runs)
    except Exception as error:  # keep the other figures; report this one
        results["dropin_error"] = "%s: %s" % (type(error).__name__, error)
    results["profile_adjoint_function"] = profile_function_call(adjoint_call)
    return results


if __name__ == "__main__":
    print(json.dumps(measure(), indent=1))
