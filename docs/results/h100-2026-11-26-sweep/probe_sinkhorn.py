import os, sys, torch
sys.path.insert(0, "python"); sys.path.insert(0, "bench")
import adjoint, bench_mhc
worst = []
for trial in range(40):
    torch.manual_seed(trial)
    b, s, n = [(2, 389, 4), (1, 965, 8), (3, 100, 6), (1, 4096, 4)][trial % 4]
    h = (torch.rand((b, s, n, n), device="cuda") * 6 - 3)
    g = torch.rand((b, s, n, n), device="cuda") * 2 - 1
    ours = adjoint.mhc_sinkhorn_backward(g, h, 20, 1e-6)
    f32 = bench_mhc.torch_mhc_sinkhorn_backward(g, h)
    f64 = bench_mhc.torch_mhc_sinkhorn_backward(g.double(), h.double())
    scale = f64.abs().max().item()
    e_ours = (ours.double() - f64).abs().max().item() / scale
    e_f32 = (f32.double() - f64).abs().max().item() / scale
    worst.append((e_ours, e_f32, trial, (b, s, n)))
    fwd = adjoint.mhc_sinkhorn(h, 20, 1e-6)
    ref = bench_mhc.torch_mhc_sinkhorn(h.double())
    ef = (fwd.double() - ref).abs().max().item() / ref.abs().max().item()
    if e_ours > 1e-4 or e_f32 > 1e-4 or ef > 1e-5:
        i = (ours.double() - f64).abs().argmax().item()
        print("trial", trial, (b, s, n), "ours vs f64 %.2e torch f32 vs f64 %.2e fwd %.2e" % (e_ours, e_f32, ef),
              "at", i, "ours", ours.flatten()[i].item(), "f32", f32.flatten()[i].item(), "f64", f64.flatten()[i].item())
worst.sort(reverse=True)
print("worst ours vs f64:", worst[:3])
print("worst torch f32 vs f64:", sorted(worst, key=lambda w: -w[1])[:3])
