#!/usr/bin/env python3
"""A small spatial-transformer + nearest-upsampling net trained on synthetic data, three ways:
PyTorch's kernels, adjoint's backward kernels through the drop-in registration
(adjoint.torch.enabled(): no change to the model code), and adjoint under
torch.use_deterministic_algorithms(True) twice. It prints both loss curves' largest relative
difference, whether the two deterministic runs' losses are bitwise identical (PyTorch alone
raises there: its CUDA grid_sampler_2d_backward is not deterministic), and the time per step.

    python3 examples/pytorch/train_dropin.py [--steps 300]
"""

import argparse
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import adjoint.torch  # noqa: E402


class Net(torch.nn.Module):
    """Localization net -> affine grid -> grid_sample -> encoder -> nearest upsampling."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.localize = torch.nn.Linear(16, 6)
        torch.nn.init.zeros_(self.localize.weight)
        with torch.no_grad():
            self.localize.bias.copy_(torch.tensor([1.0, 0, 0, 0, 1, 0]))
        self.encode = torch.nn.Conv2d(3, 32, 3, padding=1, stride=2)
        self.decode = torch.nn.Conv2d(32, 3, 3, padding=1)

    def forward(self, x):
        pooled = F.relu(self.features(x)).mean(dim=(2, 3))
        theta = self.localize(pooled).view(-1, 2, 3)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        warped = F.grid_sample(x, grid, mode="bilinear", padding_mode="border",
                               align_corners=False)
        code = F.relu(self.encode(warped))
        up = F.interpolate(code, scale_factor=2, mode="nearest")
        up = up + F.interpolate(code, size=up.shape[2:], mode="nearest-exact")
        return self.decode(up)


def data(steps, batch, device):
    generator = torch.Generator(device="cpu").manual_seed(1234)
    images = torch.rand(steps, batch, 3, 64, 64, generator=generator)
    targets = torch.roll(images, shifts=(3, -5), dims=(3, 4)).flip(-1)
    return images.to(device), targets.to(device)


def train(steps, images, targets):
    torch.manual_seed(0)
    model = Net().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    losses = []
    for step in range(steps):
        if step == 10:  # JIT compiles and cuDNN's autotuning stay out of the timing
            torch.cuda.synchronize()
            start = time.perf_counter()
        loss = F.mse_loss(model(images[step]), targets[step])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    torch.cuda.synchronize()
    ms_per_step = (time.perf_counter() - start) * 1e3 / max(steps - 10, 1)
    return torch.stack(losses).cpu(), ms_per_step


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=16)
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = False
    images, targets = data(args.steps, args.batch, "cuda")

    pytorch_losses, pytorch_ms = train(args.steps, images, targets)
    with adjoint.torch.enabled():
        adjoint_losses, adjoint_ms = train(args.steps, images, targets)
    relative = ((adjoint_losses - pytorch_losses).abs() / pytorch_losses.abs()).max().item()
    print("device: %s" % torch.cuda.get_device_name())
    print("loss: first %.5f, last %.5f (PyTorch) / %.5f (adjoint); largest relative "
          "difference over %d steps %.2e" % (pytorch_losses[0], pytorch_losses[-1],
                                             adjoint_losses[-1], args.steps, relative))
    print("time per step: PyTorch %.3f ms, adjoint %.3f ms" % (pytorch_ms, adjoint_ms))

    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    try:
        train(2, images, targets)
        print("PyTorch alone under deterministic algorithms: ran (no error)")
    except RuntimeError as error:
        print("PyTorch alone under deterministic algorithms: raises (%s)"
              % str(error).splitlines()[0][:100])
    with adjoint.torch.enabled():
        first, first_ms = train(args.steps, images, targets)
        second, _ = train(args.steps, images, targets)
    identical = torch.equal(first, second)
    print("deterministic, adjoint enabled: two runs bitwise identical: %s (%.3f ms/step)"
          % (identical, first_ms))
    ok = relative < 1e-3 and identical
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
