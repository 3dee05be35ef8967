#!/usr/bin/env python3
"""A full mHC block (adjoint.mhc.pre, adjoint.mhc.sinkhorn and adjoint.mhc.post: adjoint's
forward and backward programs as autograd operators) trained for a few steps under torch.compile(fullgraph=True) on synthetic data; prints the loss
per step and the graph-break count (0: the custom op traces through).

    python3 examples/pytorch/train_mhc_compile.py [--steps 20]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import torch  # noqa: E402

import adjoint.mhc  # noqa: E402


class MhcBlock(torch.nn.Module):
    """x [B, S, n, D] -> pre mapping (h_in, h_post, h_res logits) -> Sinkhorn projection of
    h_res -> MLP on h_in -> post mapping h_res x + h_post (x) MLP(h_in)."""

    def __init__(self, n=4, dim=64):
        super().__init__()
        k = n * n + 2 * n
        self.phi = torch.nn.Parameter(torch.randn(k, n * dim) * 0.02)
        self.alpha = torch.nn.Parameter(torch.tensor([1.0, 1.0, 1.0]))
        self.bias = torch.nn.Parameter(torch.zeros(k))
        self.gamma = torch.nn.Parameter(torch.ones(n, dim))
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                                       torch.nn.Linear(4 * dim, dim))

    def forward(self, x):
        h_in, h_post, h_res = adjoint.mhc.pre(x, self.phi, self.alpha, self.bias, self.gamma)
        mixing = adjoint.mhc.sinkhorn(h_res)
        return adjoint.mhc.post(x, self.mlp(h_in), mixing, h_post)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    block = MhcBlock().cuda()
    x = torch.randn(8, 16, 4, 64, device="cuda")
    target = torch.randn(8, 16, 4, 64, device="cuda")
    explanation = torch._dynamo.explain(block)(x)
    print("graph breaks: %d" % explanation.graph_break_count)
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True)
    optimizer = torch.optim.Adam(block.parameters(), lr=1e-3)
    losses = []
    for step in range(args.steps):
        loss = torch.nn.functional.mse_loss(compiled(x), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        print("step %2d loss %.5f" % (step, losses[-1]))
    ok = explanation.graph_break_count == 0 and losses[-1] < losses[0]
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
