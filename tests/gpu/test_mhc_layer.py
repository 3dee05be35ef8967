"""GPU parity of mhc_post / mhc_post_backward and mhc_sinkhorn / mhc_sinkhorn_backward against
PyTorch, and their determinism.

The forwards are written here from their definitions (ops/mhc_post.h, ops/mhc_sinkhorn.h; the
Sinkhorn one as the public PyTorch definition iterates on the matrix), evaluated in f64 on the
same dtype-rounded inputs; the reference gradients are autograd of <grad_out, forward(...)>.
Tolerance: harness.MHC_TOL of each tensor's max magnitude (x-like tensors at the op's dtype,
the rest at f32, or f64 for dtype=f64). Every program must claim determinism and give
bitwise-equal results over three runs.
"""

import harness
import pytest
from harness import DTYPES, adjoint, torch


def post_forward(x, y, h_res, h_post):
    """out[b, s, i, :] = sum_j h_res[b, s, i, j] x[b, s, j, :] + h_post[b, s, i] y[b, s, :]"""
    return torch.einsum("bsij,bsjd->bsid", h_res, x) + h_post[..., None] * y[..., None, :]


def sinkhorn_forward(h_res, t_max, eps):
    """softmax over rows + eps, a column normalization, then t_max - 1 row/column pairs."""
    p = torch.softmax(h_res, dim=-1) + eps
    p = p / (p.sum(-2, keepdim=True) + eps)
    for _ in range(t_max - 1):
        p = p / (p.sum(-1, keepdim=True) + eps)
        p = p / (p.sum(-2, keepdim=True) + eps)
    return p


POST_CASES = [  # batch, seq, n, dim, dtype
    (1, 1, 4, 16, "bf16"),
    (2, 3, 6, 7, "f32"),
    (1, 4, 8, 256, "bf16"),
    (1, 5, 4, 33, "f16"),
    (2, 64, 4, 128, "bf16"),
    (1, 3, 2, 8, "f64"),
    (1, 1, 1, 5, "bf16"),
]

SINKHORN_CASES = [  # batch, seq, n, t_max, eps, dtype
    (1, 1, 4, 20, 1e-6, "f32"),
    (2, 64, 4, 20, 1e-6, "f32"),
    (1, 7, 6, 20, 1e-2, "f32"),
    (1, 3, 8, 20, 1e-6, "f32"),
    (1, 5, 2, 1, 1e-6, "f32"),
    (1, 2, 4, 3, 1e-3, "f64"),
]


def post_id(case):
    return "B%d S%d n%d D%d %s" % case


def sinkhorn_id(case):
    return "B%d S%d n%d t%d eps%g %s" % case


def post_inputs(case, seed):
    batch, seq, n, dim, dtype = case
    p = torch.float64 if dtype == "f64" else torch.float32
    x = harness.random_tensor((batch, seq, n, dim), DTYPES[dtype], seed)
    y = harness.random_tensor((batch, seq, dim), DTYPES[dtype], seed + 1)
    h_res = harness.random_tensor((batch, seq, n, n), p, seed + 2, 0.0, 0.5)
    h_post = harness.random_tensor((batch, seq, n), p, seed + 3, 0.0, 2.0)
    grad_out = harness.random_tensor((batch, seq, n, dim), DTYPES[dtype], seed + 4)
    return x, y, h_res, h_post, grad_out


def sinkhorn_inputs(case, seed):
    batch, seq, n, _, _, dtype = case
    h_res = harness.random_tensor((batch, seq, n, n), DTYPES[dtype], seed, -3.0, 3.0)
    grad_out = harness.random_tensor((batch, seq, n, n), DTYPES[dtype], seed + 1)
    return h_res, grad_out


@pytest.mark.parametrize("case", POST_CASES, ids=post_id)
def test_post_parity(case):
    x, y, h_res, h_post, grad_out = post_inputs(case, seed=71)
    dtype = case[4]
    leaves = [t.double().requires_grad_() for t in (x, y, h_res, h_post)]
    out = post_forward(*leaves)
    expected_grads = torch.autograd.grad((out * grad_out.double()).sum(), leaves)
    data_tol = harness.MHC_TOL[dtype]
    param_tol = harness.MHC_TOL["f64" if dtype == "f64" else "f32"]

    actual_out = adjoint.mhc_post(x, y, h_res, h_post)
    assert actual_out.dtype == DTYPES[dtype] and actual_out.shape == out.shape
    errors = {"out": harness.check_normalized(post_id(case) + " out", actual_out, out, data_tol)}
    actual = adjoint.mhc_post_backward(grad_out, x, y, h_res, h_post)
    for name, a, e, tol in zip(("dx", "dy", "dh_res", "dh_post"), actual, expected_grads,
                               (data_tol, data_tol, param_tol, param_tol)):
        assert a.shape == e.shape, "%s: shape %s, expected %s" % (name, a.shape, e.shape)
        errors[name] = harness.check_normalized("%s %s" % (post_id(case), name), a, e, tol)
    harness.record("mhc_post", post_id(case), **errors)


@pytest.mark.parametrize("case", SINKHORN_CASES, ids=sinkhorn_id)
def test_sinkhorn_parity(case):
    _, _, _, t_max, eps, dtype = case
    h_res, grad_out = sinkhorn_inputs(case, seed=83)
    leaf = h_res.double().requires_grad_()
    out = sinkhorn_forward(leaf, t_max, eps)
    (expected_grad,) = torch.autograd.grad((out * grad_out.double()).sum(), [leaf])
    tol = harness.MHC_TOL[dtype]
    actual_out = adjoint.mhc_sinkhorn(h_res, t_max=t_max, eps=eps)
    errors = {"out": harness.check_normalized(sinkhorn_id(case) + " out", actual_out, out, tol)}
    actual_grad = adjoint.mhc_sinkhorn_backward(grad_out, h_res, t_max=t_max, eps=eps)
    errors["grad_h_res"] = harness.check_normalized(sinkhorn_id(case) + " grad_h_res",
                                                    actual_grad, expected_grad, tol)
    assert actual_grad.dtype == DTYPES[dtype]
    harness.record("mhc_sinkhorn", sinkhorn_id(case), **errors)


@pytest.mark.parametrize("case", [POST_CASES[2], POST_CASES[4]], ids=post_id)
def test_post_deterministic(case):
    x, y, h_res, h_post, grad_out = post_inputs(case, seed=5)
    batch, seq, n, dim, dtype = case
    for backward, run in ((False, lambda: (adjoint.mhc_post(x, y, h_res, h_post),)),
                          (True, lambda: adjoint.mhc_post_backward(grad_out, x, y, h_res,
                                                                   h_post))):
        text = adjoint.spec.mhc_post(batch, seq, n, dim, dtype, backward=backward)
        claims = harness.check_deterministic(text, run)
        harness.record("determinism", text, claims=claims, bitwise_equal_runs=3 if claims else 0)
        assert claims, "%s does not claim determinism" % text


@pytest.mark.parametrize("case", [SINKHORN_CASES[1], SINKHORN_CASES[3]], ids=sinkhorn_id)
def test_sinkhorn_deterministic(case):
    batch, seq, n, t_max, eps, dtype = case
    h_res, grad_out = sinkhorn_inputs(case, seed=9)
    for backward, run in ((False, lambda: (adjoint.mhc_sinkhorn(h_res, t_max, eps),)),
                          (True, lambda: (adjoint.mhc_sinkhorn_backward(grad_out, h_res, t_max,
                                                                        eps),))):
        text = adjoint.spec.mhc_sinkhorn(batch, seq, n, t_max, eps, dtype, backward=backward)
        claims = harness.check_deterministic(text, run)
        harness.record("determinism", text, claims=claims, bitwise_equal_runs=3 if claims else 0)
        assert claims, "%s does not claim determinism" % text


def test_wrong_shapes_name_the_tensor():
    x, y, h_res, h_post, _ = post_inputs(POST_CASES[0], seed=1)
    with pytest.raises(ValueError, match="mhc_post: tensor 'y' expected shape"):
        adjoint.mhc_post(x, y[..., :-1].contiguous(), h_res, h_post)
    with pytest.raises(ValueError, match="tensor 'h_res' expected dtype f32"):
        adjoint.mhc_post(x, y, h_res.to(torch.bfloat16), h_post)
    h, g = sinkhorn_inputs(SINKHORN_CASES[0], seed=1)
    with pytest.raises(ValueError, match="mhc_sinkhorn_backward: tensor 'grad_out' expected shape"):
        adjoint.mhc_sinkhorn_backward(g[..., :-1].contiguous(), h)
