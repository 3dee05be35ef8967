"""adjoint.mhc.pre as an autograd operator: forward and gradients against a PyTorch reference of
ops/mhc.h's formulas (in f64, and in f32 at f32 tolerance), and the same under
torch.compile(fullgraph=True) (custom_op + fake implementation: no graph break).
"""

import harness  # noqa: F401  (sets the path, skips without CUDA)
import pytest
from harness import DEVICE, torch

import adjoint.mhc


def reference_pre(x, phi, alpha, bias, gamma, norm_eps=1e-6, hc_eps=1e-6):
    b, s, n, d = x.shape
    v = x.reshape(b, s, n * d)
    h_mix = (v * gamma.reshape(-1)) @ phi.t()
    inv_rms = torch.rsqrt((v * v).mean(-1) + norm_eps)
    m = h_mix * inv_rms[..., None]
    h_pre = torch.sigmoid(alpha[0] * m[..., :n] + bias[:n]) + hc_eps
    h_post = 2 * torch.sigmoid(alpha[1] * m[..., n:2 * n] + bias[n:2 * n])
    h_res = (alpha[2] * m[..., 2 * n:] + bias[2 * n:]).reshape(b, s, n, n)
    h_in = torch.einsum("bsi,bsid->bsd", h_pre, x)
    return h_in, h_post, h_res


def make_inputs(dtype, b=2, s=5, n=4, d=32):
    torch.manual_seed(0)
    k = n * n + 2 * n
    return [torch.randn(b, s, n, d, device=DEVICE, dtype=dtype),
            torch.randn(k, n * d, device=DEVICE, dtype=dtype) * 0.05,
            torch.tensor([0.8, 1.1, 0.9], device=DEVICE, dtype=dtype),
            torch.randn(k, device=DEVICE, dtype=dtype) * 0.1,
            1 + 0.1 * torch.randn(n, d, device=DEVICE, dtype=dtype)]


def loss_and_grads(function, inputs, weights):
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    outputs = function(*leaves)
    loss = sum((o * w).sum() for o, w in zip(outputs, weights))
    loss.backward()
    return [o.detach() for o in outputs], [t.grad for t in leaves]


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 2e-4)])
@pytest.mark.parametrize("compiled", [False, True])
def test_pre_forward_and_backward_match_reference(dtype, tol, compiled):
    inputs = make_inputs(dtype)
    with torch.no_grad():
        shapes = [o.shape for o in reference_pre(*inputs)]
    weights = [torch.randn(shape, device=DEVICE, dtype=dtype) for shape in shapes]
    function = adjoint.mhc.pre
    if compiled:
        torch._dynamo.reset()
        function = torch.compile(adjoint.mhc.pre, fullgraph=True)
    got_out, got_grads = loss_and_grads(function, inputs, weights)
    want_out, want_grads = loss_and_grads(reference_pre, inputs, weights)
    for got, want in zip(got_out + got_grads, want_out + want_grads):
        scale = max(want.abs().max().item(), 1.0)
        assert (got - want).abs().max().item() <= tol * scale


def test_pre_in_a_compiled_module_has_no_graph_break():
    inputs = make_inputs(torch.float32)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.phi = torch.nn.Parameter(inputs[1].clone())
            self.alpha = torch.nn.Parameter(inputs[2].clone())
            self.bias = torch.nn.Parameter(inputs[3].clone())
            self.gamma = torch.nn.Parameter(inputs[4].clone())

        def forward(self, x):
            h_in, h_post, h_res = adjoint.mhc.pre(x, self.phi, self.alpha, self.bias, self.gamma)
            return h_in.square().mean() + h_post.mean() + h_res.square().mean()

    torch._dynamo.reset()
    explanation = torch._dynamo.explain(Block())(inputs[0])
    assert explanation.graph_break_count == 0
    block = torch.compile(Block(), fullgraph=True)
    block(inputs[0]).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in block.parameters())


def reference_post(x, y, h_res, h_post):
    mixed = torch.einsum("bsij,bsjd->bsid", h_res.to(x.dtype), x)
    return mixed + h_post.to(x.dtype)[..., None] * y[:, :, None, :]


def reference_sinkhorn(h_res, t_max=20, eps=1e-6):
    p = torch.softmax(h_res, dim=-1) + eps
    p = p / (p.sum(-2, keepdim=True) + eps)
    for _ in range(t_max - 1):
        p = p / (p.sum(-1, keepdim=True) + eps)
        p = p / (p.sum(-2, keepdim=True) + eps)
    return p


def make_post_inputs(dtype, b=2, s=5, n=4, d=32):
    torch.manual_seed(1)
    return [torch.randn(b, s, n, d, device=DEVICE, dtype=dtype),
            torch.randn(b, s, d, device=DEVICE, dtype=dtype),
            torch.rand(b, s, n, n, device=DEVICE, dtype=dtype),
            2 * torch.rand(b, s, n, device=DEVICE, dtype=dtype)]


def compare(function, reference, inputs, tol, compiled):
    if compiled:
        torch._dynamo.reset()
        function = torch.compile(function, fullgraph=True)

    def as_tuple(f):
        return lambda *a: (f(*a),)

    with torch.no_grad():
        shape = reference(*inputs).shape
    weights = [torch.randn(shape, device=DEVICE, dtype=inputs[0].dtype)]
    got_out, got_grads = loss_and_grads(as_tuple(function), inputs, weights)
    want_out, want_grads = loss_and_grads(as_tuple(reference), inputs, weights)
    for got, want in zip(got_out + got_grads, want_out + want_grads):
        assert got.shape == want.shape and got.dtype == want.dtype
        if want.numel() == 0:
            continue  # an empty batch: nothing to compare
        scale = max(want.abs().max().item(), 1.0)
        assert (got - want).abs().max().item() <= tol * scale


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 2e-5)])
@pytest.mark.parametrize("compiled", [False, True])
def test_post_forward_and_backward_match_reference(dtype, tol, compiled):
    compare(adjoint.mhc.post, reference_post, make_post_inputs(dtype), tol, compiled)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-9), (torch.float32, 1e-4)])
@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("n,t_max", [(4, 20), (6, 3)])
def test_sinkhorn_forward_and_backward_match_reference(dtype, tol, compiled, n, t_max):
    torch.manual_seed(2)
    h_res = torch.randn(2, 3, n, n, device=DEVICE, dtype=dtype)
    compare(lambda h: adjoint.mhc.sinkhorn(h, t_max), lambda h: reference_sinkhorn(h, t_max),
            [h_res], tol, compiled)


def test_post_only_x_needs_grad():
    """Autograd hands the backward what it has: the other inputs need no gradient."""
    x, y, h_res, h_post = make_post_inputs(torch.float32)
    x.requires_grad_(True)
    adjoint.mhc.post(x, y, h_res, h_post).sum().backward()
    want = torch.einsum("bsij,bsid->bsjd", h_res, torch.ones_like(x))
    assert (x.grad - want).abs().max().item() <= 1e-5 * want.abs().max().item()


def test_full_block_compiles_without_graph_break_and_matches_eager():
    """pre -> sinkhorn -> sublayer -> post, the mHC block, under torch.compile(fullgraph=True)."""
    inputs = make_inputs(torch.float32)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.phi = torch.nn.Parameter(inputs[1].clone())
            self.alpha = torch.nn.Parameter(inputs[2].clone())
            self.bias = torch.nn.Parameter(inputs[3].clone())
            self.gamma = torch.nn.Parameter(inputs[4].clone())
            self.linear = torch.nn.Linear(32, 32, device=DEVICE)

        def forward(self, x):
            h_in, h_post, h_res = adjoint.mhc.pre(x, self.phi, self.alpha, self.bias, self.gamma)
            mixing = adjoint.mhc.sinkhorn(h_res)
            return adjoint.mhc.post(x, torch.tanh(self.linear(h_in)), mixing, h_post)

    torch.manual_seed(3)
    block = Block()
    torch._dynamo.reset()
    explanation = torch._dynamo.explain(block)(inputs[0])
    assert explanation.graph_break_count == 0
    x = inputs[0].clone().requires_grad_(True)
    block(x).square().mean().backward()
    eager = [x.grad] + [p.grad.clone() for p in block.parameters()]
    block.zero_grad(set_to_none=True)
    x.grad = None
    torch._dynamo.reset()
    torch.compile(block, fullgraph=True)(x).square().mean().backward()
    compiled = [x.grad] + [p.grad for p in block.parameters()]
    for got, want in zip(compiled, eager):
        assert torch.isfinite(got).all()
        assert (got - want).abs().max().item() <= 1e-5 * max(want.abs().max().item(), 1.0)


def test_empty_batches_match_reference():
    """B x S = 0 through every autograd operator: empty outputs and per-token gradients, zero
    parameter gradients, as PyTorch's own formulas give."""
    for b, s in ((0, 5), (2, 0)):
        inputs = make_inputs(torch.float32, b=b, s=s)
        with torch.no_grad():
            shapes = [o.shape for o in reference_pre(*inputs)]
        weights = [torch.randn(shape, device=DEVICE) for shape in shapes]
        got_out, got_grads = loss_and_grads(adjoint.mhc.pre, inputs, weights)
        want_out, want_grads = loss_and_grads(reference_pre, inputs, weights)
        for got, want in zip(got_out + got_grads, want_out + want_grads):
            assert got.shape == want.shape and got.dtype == want.dtype
            assert torch.equal(got, want), (b, s, got.shape)
        compare(adjoint.mhc.post, reference_post, make_post_inputs(torch.float32, b=b, s=s), 0,
                False)
        h_res = torch.randn(b, s, 4, 4, device=DEVICE)
        compare(adjoint.mhc.sinkhorn, reference_sinkhorn, [h_res], 0, False)
