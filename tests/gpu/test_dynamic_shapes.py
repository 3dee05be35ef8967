"""GPU parity of generic kernels (issue 12, docs/dynamic_shapes.md) at sizes they were not
compiled for.

With the policy set to "always", every upsample_nearest specialization below is served by a
kernel generic in all its dynamic axes (batch and spatial sizes). Each case is first called at
other sizes (batch + 1, every spatial size + 3), which compiles the generic kernel; the case's
own sizes then reuse it. The result must pass test_upsample_nearest's checks (the exact adjoint
of PyTorch's forward within the summation bound, and PyTorch's backward wherever that is the
adjoint of its forward), and the engine's counters must show generic bindings and no fallback to
specialized kernels. The sizes differ from test_upsample_nearest's so that no specialized
program of the same specialization is already in the process's cache.

With the policy "batch" (the default), the same cases at other spatial sizes are served by a
kernel generic in the batch only (compiler/lower_outer_generic.h: the specialized kernel with
the batch as a parameter), compiled at two other batch sizes first.
"""

import os

import harness
import pytest
from harness import DTYPES, adjoint
from test_upsample_nearest import ADJOINT, Case, check_case, extra_cases


def shifted(case, batch, spatial):
    return Case([case.input_size[0] + batch, case.input_size[1]] +
                [s + spatial for s in case.input_size[2:]],
                [s + spatial for s in case.output_size], case.scales, case.dtype, case.exact,
                case.channels_last)


def restore_policy():
    adjoint.set_dynamic_shapes(os.environ.get("ADJOINT_DYNAMIC") or "batch")


@pytest.fixture
def always_generic():
    adjoint.set_dynamic_shapes("always")
    yield
    restore_policy()


@pytest.fixture
def batch_generic():
    adjoint.set_dynamic_shapes("batch")
    yield
    restore_policy()


@pytest.mark.parametrize("case", [shifted(c, 2, 1) for c in extra_cases()], ids=repr)
def test_generic_kernel_at_sizes_it_was_not_compiled_for(case, always_generic):
    compile_at = shifted(case, 1, 3)
    grad_output = harness.random_tensor(compile_at.output_shape, DTYPES[case.dtype], 7,
                                        memory_format=compile_at.memory_format)
    ADJOINT[case.key](grad_output, compile_at.output_size, compile_at.input_size, *case.scales)
    before = adjoint.compile_stats()
    check_case(case, 11)
    after = adjoint.compile_stats()
    assert after["generic_fallbacks"] == before["generic_fallbacks"], case
    assert after["generic_bindings"] == before["generic_bindings"] + 1, (case, before, after)
    assert after["generic_compiles"] == before["generic_compiles"], (
        "%s: its generic kernel should have been compiled at the other sizes" % case)


@pytest.mark.parametrize("case", [shifted(c, 3, 2) for c in extra_cases()], ids=repr)
def test_batch_generic_kernel_at_batches_it_was_not_compiled_for(case, batch_generic):
    for batch in (4, 5):  # the first is specialized (or the family has seen a batch already)
        other = shifted(case, batch, 0)
        grad_output = harness.random_tensor(other.output_shape, DTYPES[case.dtype], 7,
                                            memory_format=other.memory_format)
        ADJOINT[case.key](grad_output, other.output_size, other.input_size, *case.scales)
    before = adjoint.compile_stats()
    check_case(case, 11)
    after = adjoint.compile_stats()
    assert after["generic_fallbacks"] == before["generic_fallbacks"], case
    assert after["generic_bindings"] == before["generic_bindings"] + 1, (case, before, after)
    assert after["generic_compiles"] == before["generic_compiles"], (
        "%s: its batch-generic kernel should have been compiled at the other batches" % case)


# mhc_pre_backward generic in its token axes (docs/dynamic_shapes.md "mhc_pre_backward"): each of
# test_mhc's cases, at seq + 1 so that no test has prepared its specialization in this process,
# is first called at another token count (batch + 1, seq + 3), which compiles the program generic
# in batch and seq; the case itself must then be a binding of that program (no compile) and pass
# test_mhc's parity against autograd, and a generic program must claim determinism and give
# bitwise-equal results over three runs.
import test_mhc  # noqa: E402


@pytest.mark.parametrize("case", test_mhc.CASES, ids=test_mhc.case_id)
def test_generic_mhc_pre_backward_at_token_counts_it_was_not_compiled_for(case, always_generic):
    batch, seq, n, dim, dtype, with_post = case
    _, kwargs, _ = test_mhc.make_call((batch + 1, seq + 3, n, dim, dtype, with_post), seed=5)
    adjoint.mhc_pre_backward(**kwargs)
    before = adjoint.compile_stats()
    test_mhc.test_parity((batch, seq + 1, n, dim, dtype, with_post))
    after = adjoint.compile_stats()
    assert after["generic_fallbacks"] == before["generic_fallbacks"], case
    assert after["generic_bindings"] == before["generic_bindings"] + 1, (case, before, after)
    assert after["generic_compiles"] == before["generic_compiles"], (
        "%s: its generic kernels should have been compiled at the other token count" % (case,))


@pytest.mark.parametrize("case", [test_mhc.CASES[i] for i in (2, 7, 10)], ids=test_mhc.case_id)
def test_generic_mhc_pre_backward_is_deterministic(case, always_generic):
    batch, seq, n, dim, dtype, with_post = case
    text, kwargs, _ = test_mhc.make_call((batch, seq + 2, n, dim, dtype, with_post), seed=43)
    claims = harness.check_deterministic(text, lambda: adjoint.mhc_pre_backward(**kwargs))
    harness.record("determinism", "generic mhc " + test_mhc.case_id(case), claims=claims,
                   bitwise_equal_runs=3 if claims else 0)
    assert claims, "%s: the generic program must claim determinism" % text


# The rest of the mHC family generic in its token axes (ops/mhc_token_axes.h): mhc_pre (the
# forward that serving runs at a new token count every batch), mhc_post, mhc_post_backward,
# mhc_sinkhorn and mhc_sinkhorn_backward. As above: each case is first called at another token
# count (batch + 1, seq + 3), which compiles the generic programs; the case at seq + 1 must then
# be a binding of them (no compile) and pass the op's parity test against PyTorch in f64.
import test_mhc_layer  # noqa: E402


def expect_bindings_only(case, before, bindings):
    after = adjoint.compile_stats()
    assert after["generic_fallbacks"] == before["generic_fallbacks"], case
    assert after["generic_bindings"] == before["generic_bindings"] + bindings, (case, before, after)
    assert after["generic_compiles"] == before["generic_compiles"], (
        "%s: its generic kernels should have been compiled at the other token count" % (case,))


def mhc_pre_call(batch, seq, n, dim, dtype, seed):
    """(spec, call, reference outputs in f64) of mhc_pre on seeded inputs (test_mhc's ranges)."""
    text = adjoint.spec.mhc_pre(batch, seq, n, dim, dtype, test_mhc.NORM_EPS, test_mhc.HC_EPS)
    program = adjoint.prepare(text)
    declared = {info.name: DTYPES[info.dtype] for info in program.tensors}
    k = n * n + 2 * n
    ranges = {"x": ((batch, seq, n, dim), -1.0, 1.0), "phi": ((k, n * dim), -0.2, 0.2),
              "alpha": ((3,), 0.5, 1.5), "bias": ((k,), -0.5, 0.5), "gamma": ((n, dim), 0.5, 1.5)}
    inputs = {name: harness.random_tensor(shape, declared[name], seed + i, low, high)
              for i, (name, (shape, low, high)) in enumerate(ranges.items())}
    expected = test_mhc.mhc_pre_forward(*(inputs[name].double() for name in ranges), n)

    def call():
        result = program(inputs)
        return tuple(result[name] for name in PRE_OUTPUTS)
    return text, call, expected


PRE_OUTPUTS = ("h_in", "h_post", "h_res", "h_pre", "inv_rms", "h_mix")


@pytest.mark.parametrize("case", test_mhc.CASES, ids=test_mhc.case_id)
def test_generic_mhc_pre_at_token_counts_it_was_not_compiled_for(case, always_generic):
    batch, seq, n, dim, dtype, _ = case
    mhc_pre_call(batch + 1, seq + 3, n, dim, dtype, seed=5)[1]()
    before = adjoint.compile_stats()
    _, call, expected = mhc_pre_call(batch, seq + 1, n, dim, dtype, seed=17)
    actual = call()
    expect_bindings_only(case, before, 1)
    errors = {}
    for name, a, e in zip(PRE_OUTPUTS, actual, expected):
        assert a.shape == e.shape, "%s: shape %s, expected %s" % (name, a.shape, e.shape)
        tolerance = harness.MHC_TOL[dtype if name == "h_in" or dtype == "f64" else "f32"]
        errors[name] = harness.check_normalized("generic mhc_pre %s %s" % (
            test_mhc.case_id(case), name), a, e, tolerance)
    harness.record("mhc_pre generic", test_mhc.case_id(case), **errors)


@pytest.mark.parametrize("case", test_mhc_layer.POST_CASES, ids=test_mhc_layer.post_id)
def test_generic_mhc_post_at_token_counts_it_was_not_compiled_for(case, always_generic):
    batch, seq, n, dim, dtype = case
    x, y, h_res, h_post, grad_out = test_mhc_layer.post_inputs((batch + 1, seq + 3, n, dim, dtype),
                                                               seed=5)
    adjoint.mhc_post(x, y, h_res, h_post)
    adjoint.mhc_post_backward(grad_out, x, y, h_res, h_post)
    before = adjoint.compile_stats()
    test_mhc_layer.test_post_parity((batch, seq + 1, n, dim, dtype))
    expect_bindings_only(case, before, 2)


@pytest.mark.parametrize("case", test_mhc_layer.SINKHORN_CASES, ids=test_mhc_layer.sinkhorn_id)
def test_generic_mhc_sinkhorn_at_token_counts_it_was_not_compiled_for(case, always_generic):
    batch, seq, n, t_max, eps, dtype = case
    h_res, grad_out = test_mhc_layer.sinkhorn_inputs((batch + 1, seq + 3) + case[2:], seed=5)
    adjoint.mhc_sinkhorn(h_res, t_max=t_max, eps=eps)
    adjoint.mhc_sinkhorn_backward(grad_out, h_res, t_max=t_max, eps=eps)
    before = adjoint.compile_stats()
    test_mhc_layer.test_sinkhorn_parity((batch, seq + 1) + case[2:])
    expect_bindings_only(case, before, 2)


@pytest.mark.parametrize("case", test_mhc_layer.POST_CASES[:2], ids=test_mhc_layer.post_id)
def test_batch_mode_serves_mhc_post_token_counts_from_one_program(case, batch_generic):
    """Mode batch (the default): the per-token ops' batch and seq are a token pair
    (ops/dynamic_ops.h, DynamicAxis::token_pair): the first token count is specialized, the
    second compiles the program generic in both, and a third is a binding of it."""
    batch, seq, n, dim, dtype = case
    for shift in ((0, 5), (1, 6)):
        x, y, h_res, h_post, grad_out = test_mhc_layer.post_inputs(
            (batch + shift[0], seq + shift[1], n, dim, dtype), seed=5)
        adjoint.mhc_post(x, y, h_res, h_post)
        adjoint.mhc_post_backward(grad_out, x, y, h_res, h_post)
    before = adjoint.compile_stats()
    test_mhc_layer.test_post_parity((batch, seq + 2, n, dim, dtype))
    expect_bindings_only(case, before, 2)


def test_generic_mhc_family_is_deterministic(always_generic):
    """Each generic program claims determinism and gives bitwise-equal results over 3 calls."""
    runs = []
    text, call, _ = mhc_pre_call(2, 67, 6, 512, "bf16", seed=43)
    runs.append((text, call))
    post = (3, 67, 4, 256, "bf16")
    x, y, h_res, h_post, grad_out = test_mhc_layer.post_inputs(post, seed=43)
    runs.append((adjoint.spec.mhc_post(*post, backward=False),
                 lambda: (adjoint.mhc_post(x, y, h_res, h_post),)))
    runs.append((adjoint.spec.mhc_post(*post, backward=True),
                 lambda: adjoint.mhc_post_backward(grad_out, x, y, h_res, h_post)))
    sinkhorn = (2, 67, 4, 20, 1e-6, "f32")
    logits, grad = test_mhc_layer.sinkhorn_inputs(sinkhorn, seed=43)
    runs.append((adjoint.spec.mhc_sinkhorn(*sinkhorn, backward=False),
                 lambda: (adjoint.mhc_sinkhorn(logits, 20, 1e-6),)))
    runs.append((adjoint.spec.mhc_sinkhorn(*sinkhorn, backward=True),
                 lambda: (adjoint.mhc_sinkhorn_backward(grad, logits, 20, 1e-6),)))
    for text, run in runs:
        claims = harness.check_deterministic(text, run)
        harness.record("determinism", "generic " + text, claims=claims,
                       bitwise_equal_runs=3 if claims else 0)
        assert claims, "%s: the generic program must claim determinism" % text
