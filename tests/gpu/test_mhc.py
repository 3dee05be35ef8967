"""GPU parity of mhc_pre_backward against PyTorch autograd of the mHC "pre" forward.

The forward is written here from DESIGN.md (not from ops/ or reference/), evaluated in f64 on
the same dtype-rounded inputs; autograd of <grad_h_in, h_in> + <grad_h_post, h_post> +
<grad_h_res, h_res> gives the reference dx, dphi, dalpha, dbias, dgamma. The saved activations
the op reads (inv_rms, h_mix, h_pre, h_post) come from that forward, rounded to the dtypes the
program declares. Tolerance: harness.MHC_TOL of each gradient's max magnitude (dx at the op's
dtype, the rest at f32, or f64 for dtype=f64). Token sums must be deterministic: every program
must claim determinism and give bitwise-equal results over three runs.
"""

import harness
import pytest
from harness import DTYPES, adjoint, torch

HC_EPS = 1e-6
NORM_EPS = 1e-6


def mhc_pre_forward(x, phi, alpha, bias, gamma, n):
    """DESIGN.md's mhc_pre: returns h_in, h_post, h_res, h_pre, inv_rms, h_mix."""
    batch, seq, _, dim = x.shape
    v = x.reshape(batch, seq, n * dim)
    h_mix = (v * gamma.reshape(-1)) @ phi.t()
    inv_rms = torch.rsqrt((v * v).mean(-1) + NORM_EPS)
    m = h_mix * inv_rms[..., None]
    m_pre, m_post, m_res = m[..., :n], m[..., n:2 * n], m[..., 2 * n:]
    h_pre = torch.sigmoid(alpha[0] * m_pre + bias[:n]) + HC_EPS
    h_post = 2 * torch.sigmoid(alpha[1] * m_post + bias[n:2 * n])
    h_res = (alpha[2] * m_res + bias[2 * n:]).reshape(batch, seq, n, n)
    h_in = (h_pre[..., None] * x).sum(-2)
    return h_in, h_post, h_res, h_pre, inv_rms, h_mix


CASES = [  # batch, seq, n, dim, dtype, with grad_x_post
    (2, 3, 4, 12, "bf16", False),
    (1, 5, 6, 7, "f32", False),
    (2, 64, 4, 128, "bf16", False),
    (1, 4, 8, 256, "bf16", True),
    (1, 5, 6, 7, "f16", True),
    (3, 7, 4, 33, "f32", True),
    (1, 3, 4, 8, "f64", False),
    # Long enough for split reductions (compiler/split_reductions.h): dh_pre2 over D=512 and
    # the token sums over B*S=1024 run as partials plus an ordered combine.
    (1, 1024, 4, 512, "bf16", True),
    # Few tokens with n = 8 (issue 9's B1 S181 n8 D4096 at a smaller D): dh_pre2's warps take
    # one point each and the parameter gradients go through x_mix (ops/mhc.cpp, uses_x_mix);
    # B*S = 2 keeps the direct token sums.
    (1, 181, 8, 1024, "bf16", False),
    (1, 2, 8, 2048, "bf16", False),
    # Token counts no thread tile divides (67 is prime): dx's tile along s ends in a partial
    # tile (compiler/thread_tiles.h; 181 above too).
    (3, 67, 6, 512, "bf16", True),
]


def case_id(case):
    return "B%d S%d n%d D%d %s%s" % (case[:5] + (" +grad_x_post" if case[5] else "",))


def make_call(case, seed):
    """(spec, keyword arguments for adjoint.mhc_pre_backward, reference gradients)."""
    batch, seq, n, dim, dtype, with_post = case
    text = adjoint.spec.mhc_pre_backward(batch, seq, n, dim, dtype, HC_EPS, with_post)
    program = adjoint.prepare(text)
    declared = {info.name: DTYPES[info.dtype] for info in program.tensors}
    k = n * n + 2 * n

    def leaf(shape, dtype, offset, low=-1.0, high=1.0):
        return harness.random_tensor(shape, dtype, seed + offset, low, high)

    x = leaf((batch, seq, n, dim), declared["x"], 0)
    phi = leaf((k, n * dim), declared["phi"], 1, -0.2, 0.2)
    alpha = leaf((3,), declared["alpha"], 2, 0.5, 1.5)
    bias = leaf((k,), declared["phi"], 3, -0.5, 0.5)
    gamma = leaf((n, dim), declared["gamma"], 4, 0.5, 1.5)
    grad_h_in = leaf((batch, seq, dim), declared["grad_h_in"], 5)
    grad_h_post = leaf((batch, seq, n), declared["grad_h_post"], 6)
    grad_h_res = leaf((batch, seq, n, n), declared["grad_h_res"], 7)
    grad_x_post = leaf((batch, seq, n, dim), declared["grad_x_post"], 8) if with_post else None

    params = [t.double().requires_grad_() for t in (x, phi, alpha, bias, gamma)]
    h_in, h_post, h_res, h_pre, inv_rms, h_mix = mhc_pre_forward(*params, n)
    loss = ((grad_h_in.double() * h_in).sum() + (grad_h_post.double() * h_post).sum()
            + (grad_h_res.double() * h_res).sum())
    dx, dphi, dalpha, dbias, dgamma = torch.autograd.grad(loss, params)
    if with_post:
        dx = dx + grad_x_post.double()
    kwargs = dict(x=x, phi=phi, alpha=alpha, grad_h_in=grad_h_in, grad_h_post=grad_h_post,
                  grad_h_res=grad_h_res, inv_rms=inv_rms.detach().to(declared["inv_rms"]),
                  h_mix=h_mix.detach().to(declared["h_mix"]),
                  h_pre=h_pre.detach().to(declared["h_pre"]),
                  h_post=h_post.detach().to(declared["h_post"]), gamma=gamma, hc_eps=HC_EPS,
                  grad_x_post=grad_x_post)
    return text, kwargs, (dx, dphi, dalpha, dbias, dgamma)


NAMES = ("dx", "dphi", "dalpha", "dbias", "dgamma")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_parity(case):
    _, kwargs, expected = make_call(case, seed=31)
    actual = adjoint.mhc_pre_backward(**kwargs)
    dtype = case[4]
    errors = {}
    for name, a, e in zip(NAMES, actual, expected):
        assert a.shape == e.shape, "%s: shape %s, expected %s" % (name, a.shape, e.shape)
        tolerance = harness.MHC_TOL[dtype if name == "dx" or dtype == "f64" else "f32"]
        errors[name] = harness.check_normalized("%s %s" % (case_id(case), name), a, e, tolerance)
    assert actual[0].dtype == DTYPES[dtype]
    harness.record("mhc", case_id(case), **errors)


@pytest.mark.parametrize("case", [CASES[2], CASES[3], CASES[7], CASES[8]], ids=case_id)
def test_deterministic(case):
    text, kwargs, _ = make_call(case, seed=41)
    claims = harness.check_deterministic(text, lambda: adjoint.mhc_pre_backward(**kwargs))
    harness.record("determinism", "mhc " + case_id(case), claims=claims,
                   bitwise_equal_runs=3 if claims else 0)
    assert claims, "%s: token sums must be deterministic, the program does not claim it" % text


@pytest.mark.parametrize("case", [(0, 5, 4, 12, "bf16", False), (2, 0, 6, 7, "f32", True),
                                  (0, 4096, 4, 64, "bf16", False)], ids=case_id)
def test_empty_batches_give_zero_token_sums(case):
    """B x S = 0, as PyTorch allows: dx is empty and dphi, dalpha, dbias, dgamma are zero (the
    kernels write them: a NaN-filled block is freed first so that the outputs likely reuse it)."""
    _, kwargs, expected = make_call(case, seed=3)
    torch.full((1 << 20,), float("nan"), device=harness.DEVICE)
    actual = adjoint.mhc_pre_backward(**kwargs)
    for name, a, e in zip(NAMES, actual, expected):
        assert a.shape == e.shape, "%s: shape %s, expected %s" % (name, a.shape, e.shape)
        if name != "dx":
            assert a.numel() > 0 and torch.equal(a, torch.zeros_like(a)), name
            assert torch.equal(e, torch.zeros_like(e)), name
    assert actual[0].numel() == 0
    harness.record("mhc", case_id(case) + " empty", dx=0.0)


def test_wrong_saved_shape_names_the_tensor():
    _, kwargs, _ = make_call(CASES[0], seed=1)
    kwargs["h_mix"] = kwargs["h_mix"][..., :-1].contiguous()
    with pytest.raises(ValueError, match="mhc_pre_backward: tensor 'h_mix' expected shape"):
        adjoint.mhc_pre_backward(**kwargs)
