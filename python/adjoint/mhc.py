"""mHC as PyTorch autograd operators (adjoint::mhc_pre and its backward), usable in a model and
under torch.compile(fullgraph=True): each runs adjoint's forward program, and its backward runs
adjoint's backward program (DESIGN.md, ops/mhc.h). Built on autograd.py.

    h_in, h_post, h_res = adjoint.mhc.pre(x, phi, alpha, bias, gamma)

x [B, S, n, D] (f16, bf16, f32 or f64); phi [n*n + 2n, n*D], alpha [3], bias [n*n + 2n] and
gamma [n, D] in f32 (f64 when x is f64).

    h_res = adjoint.mhc.sinkhorn(h_res_logits, t_max=20, eps=1e-6)   # doubly stochastic
    out = adjoint.mhc.post(x, y, h_res, h_post)                     # h_res x + h_post (x) y

sinkhorn: h_res_logits [B, S, n, n] f32 or f64 (ops/mhc_sinkhorn.h). post: x [B, S, n, D] and
y [B, S, D] in the op's dtype, h_res [B, S, n, n] and h_post [B, S, n] f32 (f64 for f64)
(ops/mhc_post.h). Every op here is an adjoint:: torch.library operator with a fake
implementation, differentiable through its adjoint backward program.
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


def _post_spec(x, y, h_res, h_post):
    batch, seq, n, dim = (int(v) for v in x.shape)
    return spec.mhc_post(batch, seq, n, dim, dtype_of(x, "mhc_post: x").name)


def _post_backward_spec(grad_out, x, y, h_res, h_post):
    batch, seq, n, dim = (int(v) for v in x.shape)
    return spec.mhc_post(batch, seq, n, dim, dtype_of(x, "mhc_post_backward: x").name,
                         backward=True)


def _post_shapes(x, y, h_res, h_post):
    return [(tuple(x.shape), x.dtype)]


def _post_backward_shapes(grad_out, x, y, h_res, h_post):
    return [(tuple(t.shape), t.dtype) for t in (x, y, h_res, h_post)]


mhc_post_backward_op = program_op(
    "mhc_post_backward",
    "(Tensor grad_out, Tensor x, Tensor y, Tensor h_res, Tensor h_post) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    ("grad_out", "x", "y", "h_res", "h_post"), ("dx", "dy", "dh_res", "dh_post"),
    _post_backward_spec, _post_backward_shapes)

mhc_post_op = program_op(
    "mhc_post", "(Tensor x, Tensor y, Tensor h_res, Tensor h_post) -> Tensor",
    ("x", "y", "h_res", "h_post"), ("out",), _post_spec, _post_shapes)

with_backward("adjoint::mhc_post", ("x", "y", "h_res", "h_post"), mhc_post_backward_op,
              ("grad:0", "in:x", "in:y", "in:h_res", "in:h_post"), ("x", "y", "h_res", "h_post"))


def _sinkhorn_spec(h_res, t_max, eps):
    batch, seq, n, _ = (int(v) for v in h_res.shape)
    return spec.mhc_sinkhorn(batch, seq, n, t_max, eps, dtype_of(h_res, "mhc_sinkhorn: h_res").name)


def _sinkhorn_backward_spec(grad_out, h_res, t_max, eps):
    batch, seq, n, _ = (int(v) for v in h_res.shape)
    return spec.mhc_sinkhorn(batch, seq, n, t_max, eps,
                             dtype_of(h_res, "mhc_sinkhorn_backward: h_res").name, backward=True)


def _sinkhorn_shapes(h_res, *attributes):
    return [(tuple(h_res.shape), h_res.dtype)]


def _sinkhorn_backward_shapes(grad_out, h_res, *attributes):
    return [(tuple(h_res.shape), h_res.dtype)]


mhc_sinkhorn_backward_op = program_op(
    "mhc_sinkhorn_backward", "(Tensor grad_out, Tensor h_res, int t_max, float eps) -> Tensor",
    ("grad_out", "h_res"), ("grad_h_res",), _sinkhorn_backward_spec, _sinkhorn_backward_shapes)

mhc_sinkhorn_op = program_op(
    "mhc_sinkhorn", "(Tensor h_res, int t_max, float eps) -> Tensor",
    ("h_res",), ("out",), _sinkhorn_spec, _sinkhorn_shapes)

with_backward("adjoint::mhc_sinkhorn", ("h_res", "t_max", "eps"), mhc_sinkhorn_backward_op,
              ("grad:0", "in:h_res", "in:t_max", "in:eps"), ("h_res",))


def post(x, y, h_res, h_post):
    """The mHC post mapping h_res x + h_post (x) y per token; differentiable in x, y, h_res and
    h_post through adjoint's mhc_post_backward."""
    return mhc_post_op(x, y, h_res, h_post)


def sinkhorn(h_res, t_max=20, eps=1e-6):
    """The Sinkhorn-Knopp projection of softmax(h_res) [B, S, n, n] onto doubly stochastic
    matrices (t_max row/column pairs); differentiable through adjoint's mhc_sinkhorn_backward."""
    return mhc_sinkhorn_op(h_res, int(t_max), float(eps))


def pre(x, phi, alpha, bias, gamma, norm_eps=1e-6, hc_eps=1e-6):
    """(h_in, h_post, h_res) of the mHC pre mapping; differentiable in x, phi, alpha, bias and
    gamma through adjoint's mhc_pre_backward."""
    h_in, h_post, h_res, _, _, _ = mhc_pre_op(x, phi, alpha, bias, gamma, float(norm_eps),
                                              float(hc_eps))
    return h_in, h_post, h_res


__all__ = ["pre", "post", "sinkhorn", "mhc_pre_op", "mhc_pre_backward_op", "mhc_post_op",
           "mhc_post_backward_op", "mhc_sinkhorn_op", "mhc_sinkhorn_backward_op"]
