"""mHC as PyTorch autograd operators (adjoint::mhc_pre and its backward), usable in a model and
under torch.compile(fullgraph=True): each runs adjoint's forward program, and its backward runs
adjoint's backward program (DESIGN.md, ops/mhc.h). Built on autograd.py.

    h_in, h_post, h_res = adjoint.mhc.pre(x, phi, alpha, bias, gamma)

x [B, S, n, D] (f16, bf16, f32 or f64); phi [n*n + 2n, n*D], alpha [3], bias [n*n + 2n] and
gamma [n, D] in f32 (f64 when x is f64). post and sinkhorn are added here when the library has
those ops (names in POST_OPS / SINKHORN_OPS).
"""

from . import spec
from .autograd import program_op, with_backward
from .tensors import dtype_of


def _param_dtype(torch, x):
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _pre_spec(x, phi, alpha, bias, gamma, norm_eps, hc_eps):
    batch, seq, n, dim = (int(v) for v in x.shape)
    return spec.mhc_pre(batch, seq, n, dim, dtype_of(x, "mhc_pre: x").name, norm_eps, hc_eps)


def _pre_backward_spec(x, phi, alpha, grad_h_in, grad_h_post, grad_h_res, inv_rms, h_mix,
                       h_pre, h_post, gamma, hc_eps):
    batch, seq, n, dim = (int(v) for v in x.shape)
    return spec.mhc_pre_backward(batch, seq, n, dim, dtype_of(x, "mhc_pre_backward: x").name,
                                 hc_eps, False)


def _pre_shapes(x, phi, alpha, bias, gamma, norm_eps, hc_eps):
    import torch
    b, s, n, d = x.shape
    p = _param_dtype(torch, x)
    k = n * n + 2 * n
    return [((b, s, d), x.dtype), ((b, s, n), p), ((b, s, n, n), p), ((b, s, n), p),
            ((b, s), p), ((b, s, k), p)]


def _pre_backward_shapes(x, phi, alpha, *rest):
    return [(tuple(x.shape), x.dtype), (tuple(phi.shape), phi.dtype),
            (tuple(alpha.shape), alpha.dtype), ((phi.shape[0],), phi.dtype),
            ((x.shape[2], x.shape[3]), phi.dtype)]


PRE_OUTPUTS = ("h_in", "h_post", "h_res", "h_pre", "inv_rms", "h_mix")
PRE_ARGS = ("x", "phi", "alpha", "bias", "gamma", "norm_eps", "hc_eps")

mhc_pre_backward_op = program_op(
    "mhc_pre_backward",
    "(Tensor x, Tensor phi, Tensor alpha, Tensor grad_h_in, Tensor grad_h_post, "
    "Tensor grad_h_res, Tensor inv_rms, Tensor h_mix, Tensor h_pre, Tensor h_post, "
    "Tensor gamma, float hc_eps) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    ("x", "phi", "alpha", "grad_h_in", "grad_h_post", "grad_h_res", "inv_rms", "h_mix",
     "h_pre", "h_post", "gamma"),
    ("dx", "dphi", "dalpha", "dbias", "dgamma"), _pre_backward_spec, _pre_backward_shapes)

mhc_pre_op = program_op(
    "mhc_pre",
    "(Tensor x, Tensor phi, Tensor alpha, Tensor bias, Tensor gamma, float norm_eps, "
    "float hc_eps) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    ("x", "phi", "alpha", "bias", "gamma"), PRE_OUTPUTS, _pre_spec, _pre_shapes)

with_backward(
    "adjoint::mhc_pre", PRE_ARGS, mhc_pre_backward_op,
    ("in:x", "in:phi", "in:alpha", "grad:0", "grad:1", "grad:2", "out:4", "out:5", "out:3",
     "out:1", "in:gamma", "in:hc_eps"),
    ("x", "phi", "alpha", "bias", "gamma"))


def pre(x, phi, alpha, bias, gamma, norm_eps=1e-6, hc_eps=1e-6):
    """(h_in, h_post, h_res) of the mHC pre mapping; differentiable in x, phi, alpha, bias and
    gamma through adjoint's mhc_pre_backward."""
    h_in, h_post, h_res, _, _, _ = mhc_pre_op(x, phi, alpha, bias, gamma, float(norm_eps),
                                              float(hc_eps))
    return h_in, h_post, h_res


__all__ = ["pre", "mhc_pre_op", "mhc_pre_backward_op"]
