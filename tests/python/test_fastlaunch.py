"""CPU-only tests of the compiled launch path (python/ext/fastlaunch.c, adjoint._fastlaunch)
against the fake libadjoint of fakes.py: the C launcher calls the fake's adjoint_launch through
its real C function pointer, so what it binds is seen exactly as the library would see it. The
launches must equal the ctypes path's, and every wrong tensor must get the same error naming
it. Skipped where the extension is not built, unless $ADJOINT_EXPECT_FASTLAUNCH=1 (set by ctest
when CMake built it), where its absence fails.
"""

import os
import shutil
import sys
import tempfile
import unittest

from fakes import (FakeDevice, FakeLibrary, FakeProgramDefinition, FakeTensor,
                   fake_environment)
from test_binding import fake_definitions

import adjoint
from adjoint import _fast, _torch
from adjoint.errors import AdjointError

SPEC = "upsample_nearest1d_backward dtype=f32 input_size=1,2,5 output_size=10"
GRID_SPEC = ("grid_sampler_2d_backward dtype=f32 input_size=1,2,4,4 output_size=3,3 "
             "output_mask=11 interpolation_mode=bilinear padding_mode=zeros align_corners=0")


def expected():
    return os.environ.get("ADJOINT_EXPECT_FASTLAUNCH") == "1"


class FastLaunchTest(unittest.TestCase):
    def setUp(self):
        _fast.set_enabled(True)
        if _fast.module() is None:
            if expected():
                self.fail("adjoint._fastlaunch was built but is not loaded: %s" % _fast.reason)
            self.skipTest("adjoint._fastlaunch is not built (%s)" % _fast.reason)
        self.fake = FakeLibrary(fake_definitions)
        self.environment = fake_environment(self.fake)
        self.environment.__enter__()

    def tearDown(self):
        self.environment.__exit__(None, None, None)
        _fast.set_enabled(True)

    def launches_of(self, enabled, calls):
        """The fake's launches for calls(program) with the compiled path on or off."""
        _fast.set_enabled(enabled)
        adjoint.clear_cache()
        del self.fake.launches[:]
        program = adjoint.prepare(GRID_SPEC)
        self.assertEqual(program._fast is not None, enabled)
        calls(program)
        return [(bound, stream) for _, bound, stream in self.fake.launches]

    def test_binds_what_the_ctypes_path_binds(self):
        tensors = [{"grad_output": FakeTensor((1, 2, 3, 3)), "input": FakeTensor((1, 2, 4, 4)),
                    "grid": FakeTensor((1, 3, 3, 2))} for _ in range(3)]

        def calls(program):
            for bound in tensors:
                program(bound)
            program(tensors[0], stream=0x1234)
            program.launch(dict(tensors[1], grad_input=FakeTensor((1, 2, 4, 4)),
                                grad_grid=FakeTensor((1, 3, 3, 2))))

        compiled = self.launches_of(True, calls)
        self.assertEqual(len(compiled), 5)
        self.assertEqual(compiled[3][1], 0x1234)
        self.assertEqual(compiled[0][1], 0xABC)
        # outputs are allocated per call, so compare everything but their data pointers
        strip = [({n: v[1:] if n.startswith("grad_i") or n == "grad_grid" else v
                   for n, v in bound.items()}, stream) for bound, stream in compiled]
        plain = self.launches_of(False, calls)
        self.assertEqual(strip, [({n: v[1:] if n.startswith("grad_i") or n == "grad_grid" else v
                                   for n, v in bound.items()}, stream) for bound, stream in plain])
        self.assertEqual(compiled[1][0]["input"][0], tensors[1]["input"].data_ptr())

    def test_every_wrong_tensor_gets_the_error_naming_it(self):
        program = adjoint.prepare(SPEC)
        self.assertIsNotNone(program._fast)
        good = FakeTensor((1, 2, 10))
        program(grad_output=good)
        cases = [
            (FakeTensor((1, 2, 11)), r"tensor 'grad_output' expected shape \(1, 2, 10\), got "
                                     r"\(1, 2, 11\)"),
            (FakeTensor((1, 2, 10), "f16"), "tensor 'grad_output' expected dtype f32, got f16"),
            (FakeTensor((1, 2, 10), strides=(40, 20, 2)), r"expected strides \(20, 10, 1\)"),
            (FakeTensor((1, 2, 10), strides=(0, 0, 1)), "tensor 'grad_output' overlaps itself"),
            (FakeTensor((1, 2, 10), device=FakeDevice("cuda", 1)), "'grad_output' is on cuda:1"),
            (FakeTensor((1, 2, 10), device=FakeDevice("cpu", None)), "expected a CUDA tensor"),
            (3, "tensor 'grad_output': expected a CUDA tensor, got int"),
        ]
        for tensor, message in cases:
            with self.assertRaisesRegex(ValueError, message):
                program(grad_output=tensor)
            # a refused tensor leaves the accepted record as it was
            program(grad_output=good)
        self.assertEqual(len(self.fake.launches), 1 + len(cases))
        with self.assertRaisesRegex(ValueError, "tensors grad_output not given"):
            program({})
        with self.assertRaisesRegex(ValueError, "no tensor named 'grad'"):
            program(grad=good)

    def test_library_errors_come_through(self):
        program = adjoint.prepare(SPEC)
        self.fake.launch_status = 4
        self.fake.launch_message = b"cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED"
        with self.assertRaisesRegex(AdjointError, "CUDA_ERROR_LAUNCH_FAILED.*adjoint_launch"):
            program(grad_output=FakeTensor((1, 2, 10)))
        self.assertEqual(self.fake.launches, [])

    def test_another_current_device_takes_the_python_path(self):
        program = adjoint.prepare(SPEC)
        launcher = program._fast
        good = FakeTensor((1, 2, 10))
        self.assertTrue(launcher({"grad_output": good, "grad_input": FakeTensor((1, 2, 5))},
                                 None))
        saved = _torch.launch_getters
        _torch.launch_getters = lambda device: (lambda: 1, lambda index: 0xABC)
        try:
            adjoint.clear_cache()
            program = adjoint.prepare(SPEC)
            self.assertFalse(program._fast({"grad_output": good,
                                            "grad_input": FakeTensor((1, 2, 5))}, None))
            program(grad_output=good)  # launched by the Python path, which makes it current
        finally:
            _torch.launch_getters = saved
        self.assertEqual(len(self.fake.launches), 2)

    def test_more_tensors_than_the_stack_holds(self):
        names = ["t%d" % i for i in range(40)]
        wide = FakeLibrary(lambda text: FakeProgramDefinition(
            [(n, "input", "f32", (i + 1,), (1,)) for i, n in enumerate(names)]))
        with fake_environment(wide):
            program = adjoint.prepare("wide dtype=f32")
            tensors = {n: FakeTensor((i + 1,)) for i, n in enumerate(names)}
            for _ in range(2):
                self.assertTrue(program._fast(tensors, None))
            with self.assertRaisesRegex(ValueError, r"tensor 't39' expected shape \(40,\)"):
                program(dict(tensors, t39=FakeTensor((41,))))
        bound = wide.launches[1][1]
        self.assertEqual(len(wide.launches), 2)
        self.assertEqual([bound[n][0] for n in names], [tensors[n].data_ptr() for n in names])

    def test_released_program_is_not_launched(self):
        program = adjoint.prepare(SPEC)
        adjoint.clear_cache()
        self.assertIsNone(program._fast)
        with self.assertRaisesRegex(ValueError, "was released"):
            program.launch({"grad_output": FakeTensor((1, 2, 10))})



class FastLaunchSearchTest(unittest.TestCase):
    """Where the extension is looked for: a build staged away from this checkout (ADJOINT_LIBRARY
    pointing into it, as scripts/gpu-check --stage does) must give its own extension, not a
    silent ctypes path."""

    def setUp(self):
        self.saved = os.environ.get("ADJOINT_LIBRARY")
        self.saved_fast = os.environ.get("ADJOINT_FASTLAUNCH")
        os.environ.pop("ADJOINT_FASTLAUNCH", None)

    def tearDown(self):
        for name, value in (("ADJOINT_LIBRARY", self.saved), ("ADJOINT_FASTLAUNCH", self.saved_fast)):
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        sys.modules.pop("adjoint._fastlaunch", None)
        _fast.set_enabled(True)

    def test_the_library_directory_comes_before_the_checkout(self):
        os.environ["ADJOINT_LIBRARY"] = "/somewhere/stage/build/lib/libadjoint.so"
        directories = _fast._build_lib_directories()
        self.assertEqual(directories[0], "/somewhere/stage/build/lib")
        self.assertTrue(directories[-1].endswith(os.path.join("build", "lib")))
        os.environ.pop("ADJOINT_LIBRARY")
        self.assertEqual(len(_fast._build_lib_directories()), 1)

    def test_loads_the_extension_beside_a_staged_library(self):
        _fast.set_enabled(True)
        built = _fast.module()
        if built is None or not getattr(built, "__file__", None):
            if expected():
                self.fail("adjoint._fastlaunch was built but is not loaded: %s" % _fast.reason)
            self.skipTest("adjoint._fastlaunch is not built (%s)" % _fast.reason)
        if os.path.dirname(os.path.abspath(built.__file__)) == os.path.dirname(
                os.path.abspath(adjoint.__file__)):
            self.skipTest("the extension is installed inside the package, which comes first")
        with tempfile.TemporaryDirectory() as stage:
            copy = os.path.join(stage, os.path.basename(built.__file__))
            shutil.copy(built.__file__, copy)
            os.environ["ADJOINT_LIBRARY"] = os.path.join(stage, "libadjoint.so")
            sys.modules.pop("adjoint._fastlaunch", None)
            if hasattr(adjoint, "_fastlaunch"):
                delattr(adjoint, "_fastlaunch")
            self.assertTrue(_fast.set_enabled(True), _fast.reason)
            self.assertEqual(os.path.abspath(_fast.module().__file__), copy)


if __name__ == "__main__":
    unittest.main()
