import os, sys, statistics, math
sys.path.insert(0, os.path.join(os.getcwd(), "python")); sys.path.insert(0, os.path.join(os.getcwd(), "bench"))
import torch, adjoint, bench, bench_mhc
timer = bench.GpuTimer()
def prof(fn, label):
    for _ in range(3): fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        for _ in range(5): fn()
        torch.cuda.synchronize()
    ks = {e.key[:70]: round((getattr(e, "device_time_total", 0) or 0) / 5, 1) for e in p.key_averages() if (getattr(e, "device_time_total", 0) or 0) > 0}
    print(label, "event ms %.4f" % statistics.median(timer.time(fn, 50, 5)), "kernels", ks, flush=True)
for inp, out in (([3, 129, 54, 181], [54, 181]), ([3, 7, 122, 28], [329, 76])):
    g = torch.randn([inp[0], inp[1]] + out, device="cuda", dtype=torch.bfloat16)
    prof(lambda: adjoint.upsample_nearest2d_backward(g, out, inp), "upsample %s->%s" % (inp, out))
    prof(lambda: torch.ops.aten.upsample_nearest2d_backward(g, out, inp), "  aten")
call, torch_fn, args, nbytes = bench_mhc.make_op("mhc_pre", (1, 4096, 4, 4096))
prof(call, "mhc_pre B1 S4096 n4 D4096 (bench call)")
