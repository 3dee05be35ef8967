"""CPU tests of adjoint.torch (the drop-in registration) against a stand-in `torch` module that
records torch.library registrations: which aten ops get a CUDA kernel, that a call adjoint
refuses falls through to PyTorch's kernel with the dispatch keyset, that a supported call runs
adjoint's program, and that disable() destroys the registration.
"""

import sys
import types
import unittest

from fakes import FakeLibrary, FakeTensor, fake_environment
from test_binding import fake_definitions

import adjoint
from adjoint.program import DETERMINISM


class FakeKernel:
    def __init__(self, name):
        self.name = name
        self.calls = []

    def call_boxed(self, keyset, *args):
        self.calls.append((keyset, args))
        return "pytorch:" + self.name


class FakeTorchLibrary:
    instances = []

    def __init__(self, namespace, kind):
        self.namespace, self.kind = namespace, kind
        self.kernels = {}
        self.destroyed = False
        FakeTorchLibrary.instances.append(self)

    def impl(self, name, kernel, dispatch_key, with_keyset=False):
        assert with_keyset and dispatch_key == "CUDA"
        self.kernels[name] = kernel

    def _destroy(self):
        self.destroyed = True


def fake_torch():
    module = types.ModuleType("torch")
    module.__version__ = "0.0-fake"
    module.deterministic = False
    module.are_deterministic_algorithms_enabled = lambda: module.deterministic
    module.original_kernels = {}

    def get_kernel(op, key):
        return module.original_kernels.setdefault(op, FakeKernel(op))

    module.library = types.SimpleNamespace(Library=FakeTorchLibrary, get_kernel=get_kernel)
    return module


class DropInTest(unittest.TestCase):
    def setUp(self):
        self.saved_torch = sys.modules.get("torch")
        self.torch = sys.modules["torch"] = fake_torch()
        self.fake = FakeLibrary(fake_definitions)
        self.environment = fake_environment(self.fake)
        self.environment.__enter__()
        self.dropin = adjoint.torch
        FakeTorchLibrary.instances.clear()

    def tearDown(self):
        self.dropin.disable()
        self.environment.__exit__(None, None, None)
        if self.saved_torch is None:
            sys.modules.pop("torch", None)
        else:
            sys.modules["torch"] = self.saved_torch

    def test_enable_registers_every_backward_and_disable_destroys_it(self):
        with self.dropin.enabled():
            self.assertTrue(self.dropin.is_enabled())
            registration, = FakeTorchLibrary.instances
            self.assertEqual((registration.namespace, registration.kind), ("aten", "IMPL"))
            expected = {"upsample_nearest%dd_backward" % r for r in (1, 2, 3)}
            expected |= {"_upsample_nearest_exact%dd_backward" % r for r in (1, 2, 3)}
            expected.add("grid_sampler_2d_backward")
            if hasattr(adjoint.ops, "grid_sampler_3d_backward"):
                expected.add("grid_sampler_3d_backward")
            self.assertEqual(set(registration.kernels), expected)
            self.dropin.enable()  # idempotent
            self.assertEqual(len(FakeTorchLibrary.instances), 1)
        self.assertTrue(registration.destroyed)
        self.assertFalse(self.dropin.is_enabled())

    def test_supported_call_runs_adjoint_and_unsupported_falls_through(self):
        self.dropin.enable()
        kernel = FakeTorchLibrary.instances[0].kernels["upsample_nearest2d_backward"]
        grad_output = FakeTensor((1, 2, 8, 8))
        grad_input = kernel("keyset", grad_output, [8, 8], [1, 2, 4, 4], None, None)
        self.assertEqual(grad_input.shape, (1, 2, 4, 4))
        self.assertEqual(len(self.fake.launches), 1)
        self.assertEqual(self.dropin.fallthrough_counts, {})
        # a sliced grad_output runs adjoint's specialization for its strides, in place
        strided = FakeTensor((1, 2, 8, 8), strides=(256, 128, 16, 2))
        grad_input = kernel("keyset", strided, [8, 8], [1, 2, 4, 4], None, None)
        self.assertEqual((grad_input.shape, getattr(strided, "copies", 0)), ((1, 2, 4, 4), 0))
        self.assertEqual(self.fake.launches[-1][1]["grad_output"][0], strided.data_ptr())
        self.assertEqual(self.dropin.fallthrough_counts, {})
        # an expanded one (overlapping itself) is refused by adjoint: PyTorch's kernel runs
        expanded = FakeTensor((1, 2, 8, 8), strides=(0, 0, 0, 1))
        result = kernel("keyset", expanded, [8, 8], [1, 2, 4, 4], None, None)
        self.assertEqual(result, "pytorch:aten::upsample_nearest2d_backward")
        original = self.torch.original_kernels["aten::upsample_nearest2d_backward"]
        self.assertEqual(original.calls, [("keyset", (expanded, [8, 8], [1, 2, 4, 4], None,
                                                      None))])
        self.assertEqual(self.dropin.fallthrough_counts, {"upsample_nearest2d_backward": 1})

    def test_grid_sampler_follows_the_programs_determinism(self):
        self.dropin.enable()
        kernel = FakeTorchLibrary.instances[0].kernels["grid_sampler_2d_backward"]
        args = (FakeTensor((1, 2, 3, 3)), FakeTensor((1, 2, 5, 5)), FakeTensor((1, 3, 3, 2)),
                0, 0, False, [True, True])
        grad_input, grad_grid = kernel("keyset", *args)
        self.assertEqual(grad_grid.shape, (1, 3, 3, 2))
        # PyTorch not asked for determinism: the atomics program, as fast as PyTorch's kernel
        self.assertEqual(self.fake.prepared[-1][1], DETERMINISM["allow_atomics"])
        self.torch.deterministic = True  # the fake's grid program reports non-deterministic
        self.assertEqual(kernel("keyset", *args), "pytorch:aten::grid_sampler_2d_backward")
        self.assertEqual(self.fake.prepared[-1][1], DETERMINISM["default"])
        self.assertEqual(len(self.fake.launches), 1)

    def test_grid_sampler_without_determinism_allows_atomics_at_any_channels(self):
        # Which strategy is the faster for the channels is the compiler's choice under
        # allow_atomics (compiler_scatter_test: AllowedAtomicsGiveWayWhereTheBinnedGatherIsFaster);
        # the drop-in asks for allow_atomics whatever the channels and mode.
        self.dropin.enable()
        kernel = FakeTorchLibrary.instances[0].kernels["grid_sampler_2d_backward"]
        for channels, mode in ((2, 0), (16, "bilinear"), (64, 1), (8, "bicubic")):
            args = (FakeTensor((1, channels, 3, 3)), FakeTensor((1, channels, 5, 5)),
                    FakeTensor((1, 3, 3, 2)), mode, 0, False, [True, True])
            kernel("keyset", *args)
            self.assertEqual(self.fake.prepared[-1][1], DETERMINISM["allow_atomics"],
                             (channels, mode))
        self.assertEqual(self.dropin.fallthrough_counts, {})
        self.assertFalse(hasattr(self.dropin, "faster_determinism"))


if __name__ == "__main__":
    unittest.main()
