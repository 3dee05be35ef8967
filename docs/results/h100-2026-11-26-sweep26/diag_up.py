import os, sys, time, statistics, json
sys.path.insert(0, os.path.join(os.getcwd(), "python")); sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
import torch, adjoint, bench
DT = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
cases = [(2, [5, 1, 4, 2], [1, 5], "bf16"), (3, [16, 129, 1, 4, 20], [1, 1, 15], "f32"),
         (2, [16, 64, 17, 104], [8, 52], "bf16"), (2, [4, 3, 64, 64], [128, 128], "f32")]
timer = bench.GpuTimer()
def run(tag):
    for rank, inp, out, dt in cases:
        g = torch.randn([inp[0], inp[1]] + out, device="cuda", dtype=DT[dt])
        ours = getattr(adjoint, "upsample_nearest%dd_backward" % rank)
        theirs = getattr(torch.ops.aten, "upsample_nearest%dd_backward" % rank)
        f = lambda: ours(g, out, inp); t = lambda: theirs(g, out, inp)
        f(); torch.cuda.synchronize()
        ms = statistics.median(timer.time(f, 50, 5)); tms = statistics.median(timer.time(t, 50, 5))
        s = time.perf_counter(); [f() for _ in range(20)]; torch.cuda.synchronize(); host = (time.perf_counter() - s) / 20 * 1e6
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA, torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(5): f()
            torch.cuda.synchronize()
        kern = {e.key[:60]: round((getattr(e, "device_time_total", 0) or 0) / 5, 2) for e in prof.key_averages() if (getattr(e, "device_time_total", 0) or 0) > 0}
        cpu = sorted(((round(e.cpu_time_total / 5, 1), e.key[:50]) for e in prof.key_averages()), reverse=True)[:6]
        print(tag, rank, inp, out, dt, "ours %.4f ms torch %.4f ms host %.1f us" % (ms, tms, host), "kernels", kern, "cpu", cpu, flush=True)
        print(tag, "stats", adjoint.compile_stats(), flush=True)
run("fresh")
run("again")
