"""CPU-only tests of the Python binding (python/adjoint): specialization texts, dtype and layout
recognition, error mapping, library lookup, and the ATen-shaped functions and the Program cache
driven against a fake libadjoint (tests/python/fakes.py) through real ctypes calls. No GPU,
PyTorch or built library is needed; run with `python3 -m unittest discover -s tests/python`.
"""

import math
import os
import tempfile
import unittest

from fakes import FakeDevice, FakeLibrary, FakeProgramDefinition, FakeTensor, fake_environment

import adjoint
from adjoint import _capi, spec
from adjoint.errors import AdjointError, InvalidArgumentError, error_for_status
from adjoint.tensors import (channels_last_strides, contiguous_strides, dtype_of, layout_of,
                             same_addressing)


def parse(text):
    op, *words = text.split()
    return op, dict(word.split("=", 1) for word in words)


def ints(text):
    return [int(v) for v in text.split(",")] if text else []


def given_strides(attributes, tensor):
    """The strides the specialization reads input `tensor` with (<tensor>_strides), or None."""
    text = attributes.get(tensor + "_strides")
    return tuple(ints(text)) if text else None


def fake_definitions(text):
    """Programs shaped like the real ops' (names, roles, dtypes, shapes, strides)."""
    op, attributes = parse(text)
    if "upsample_nearest" in op:
        dtype = attributes.get("dtype", "f32")
        input_size = ints(attributes["input_size"])
        output_shape = input_size[:2] + ints(attributes["output_size"])
        strides = (channels_last_strides if attributes.get("layout") == "channels_last"
                   else contiguous_strides)
        return FakeProgramDefinition([
            ("grad_output", "input", dtype, tuple(output_shape),
             given_strides(attributes, "grad_output") or strides(output_shape)),
            ("grad_input", "output", dtype, tuple(input_size), strides(input_size)),
        ])
    if op == "grid_sampler_2d_backward":
        dtype = attributes["dtype"]
        n, c, h, w = ints(attributes["input_size"])
        ho, wo = ints(attributes["output_size"])
        tensors = [("grad_output", "input", dtype, (n, c, ho, wo)),
                   ("input", "input", dtype, (n, c, h, w)),
                   ("grid", "input", dtype, (n, ho, wo, 2))]
        if attributes["output_mask"].startswith("1"):
            tensors.append(("grad_input", "output", dtype, (n, c, h, w)))
        tensors.append(("grad_grid", "output", dtype, (n, ho, wo, 2)))
        return FakeProgramDefinition(
            [t + (given_strides(attributes, t[0]) or contiguous_strides(t[3]),) for t in tensors],
            deterministic=False)
    if op == "grid_sampler_3d_backward":
        dtype = attributes["dtype"]
        n, c, d, h, w = ints(attributes["input_size"])
        do, ho, wo = ints(attributes["output_size"])
        tensors = [("grad_output", "input", dtype, (n, c, do, ho, wo)),
                   ("input", "input", dtype, (n, c, d, h, w)),
                   ("grid", "input", dtype, (n, do, ho, wo, 3))]
        if attributes["output_mask"].startswith("1"):
            tensors.append(("grad_input", "output", dtype, (n, c, d, h, w)))
        tensors.append(("grad_grid", "output", dtype, (n, do, ho, wo, 3)))
        return FakeProgramDefinition(
            [t + (given_strides(attributes, t[0]) or contiguous_strides(t[3]),) for t in tensors],
            deterministic=False)
    if op == "mhc_pre_backward":
        b, s, n, d = (int(attributes[k]) for k in ("batch", "seq", "n", "dim"))
        x_dtype, k = attributes["dtype"], n * n + 2 * n
        tensors = [("x", "input", x_dtype, (b, s, n, d)), ("phi", "input", "f32", (k, n * d)),
                   ("alpha", "input", "f32", (3,)), ("grad_h_in", "input", x_dtype, (b, s, d)),
                   ("grad_h_post", "input", "f32", (b, s, n)),
                   ("grad_h_res", "input", "f32", (b, s, n, n)),
                   ("inv_rms", "input", "f32", (b, s)), ("h_mix", "input", "f32", (b, s, k)),
                   ("h_pre", "input", "f32", (b, s, n)), ("h_post", "input", "f32", (b, s, n)),
                   ("gamma", "input", "f32", (n, d))]
        if attributes["with_grad_x_post"] == "true":
            tensors.append(("grad_x_post", "input", x_dtype, (b, s, n, d)))
        tensors += [("dx", "output", x_dtype, (b, s, n, d)), ("dphi", "output", "f32", (k, n * d)),
                    ("dalpha", "output", "f32", (3,)), ("dbias", "output", "f32", (k,)),
                    ("dgamma", "output", "f32", (n, d))]
        return FakeProgramDefinition([t + (contiguous_strides(t[3]),) for t in tensors])
    if op in ("mhc_post", "mhc_post_backward"):
        b, s, n, d = (int(attributes[k]) for k in ("batch", "seq", "n", "dim"))
        x_dtype = attributes["dtype"]
        p_dtype = "f64" if x_dtype == "f64" else "f32"
        tensors = [("x", "input", x_dtype, (b, s, n, d)), ("y", "input", x_dtype, (b, s, d)),
                   ("h_res", "input", p_dtype, (b, s, n, n)), ("h_post", "input", p_dtype, (b, s, n))]
        if op == "mhc_post":
            tensors.append(("out", "output", x_dtype, (b, s, n, d)))
        else:
            tensors += [("grad_out", "input", x_dtype, (b, s, n, d)),
                        ("dx", "output", x_dtype, (b, s, n, d)), ("dy", "output", x_dtype, (b, s, d)),
                        ("dh_res", "output", p_dtype, (b, s, n, n)),
                        ("dh_post", "output", p_dtype, (b, s, n))]
        return FakeProgramDefinition([t + (contiguous_strides(t[3]),) for t in tensors])
    if op in ("mhc_sinkhorn", "mhc_sinkhorn_backward"):
        shape = tuple(int(attributes[k]) for k in ("batch", "seq", "n", "n"))
        dtype = attributes["dtype"]
        if op == "mhc_sinkhorn":
            tensors = [("h_res", "input", dtype, shape), ("out", "output", dtype, shape)]
        else:
            tensors = [("h_res", "input", dtype, shape), ("grad_out", "input", dtype, shape),
                       ("grad_h_res", "output", dtype, shape)]
        return FakeProgramDefinition([t + (contiguous_strides(t[3]),) for t in tensors])
    raise ValueError("unknown op '%s'; valid ops: upsample_nearest2d_backward, ..." % op)


class SpecTextTest(unittest.TestCase):
    def test_upsample_texts_follow_aten_names_and_scale_rules(self):
        self.assertEqual(
            spec.upsample_nearest_backward(2, False, "bf16", [8, 64, 128, 128], [256, 256],
                                           [None, None]),
            "upsample_nearest2d_backward dtype=bf16 input_size=8,64,128,128 output_size=256,256 "
            "scales_h=none scales_w=none")
        self.assertEqual(
            spec.upsample_nearest_backward(1, True, "f16", [2, 3, 7], [17], [2.0]),
            "_upsample_nearest_exact1d_backward dtype=f16 input_size=2,3,7 output_size=17 "
            "scales=2")
        text = spec.upsample_nearest_backward(3, False, "f32", [1, 2, 3, 4, 5], [6, 7, 3],
                                              [1.5, -1.0, math.nan], "channels_last")
        self.assertEqual(text, "upsample_nearest3d_backward dtype=f32 input_size=1,2,3,4,5 "
                               "output_size=6,7,3 scales_d=1.5 scales_h=none scales_w=none "
                               "layout=channels_last")

    def test_floats_are_shortest_round_trip(self):
        for value, text in [(2.0, "2"), (0.75, "0.75"), (1e-6, "1e-06"), (1 / 3, repr(1 / 3))]:
            self.assertEqual(spec.format_float(value, "x"), text)
            self.assertEqual(float(text), value)

    def test_wrong_list_lengths_name_the_argument(self):
        with self.assertRaisesRegex(InvalidArgumentError, "output_size: expected 2 values"):
            spec.upsample_nearest_backward(2, False, "f32", [1, 1, 4, 4], [8], [None, None])
        with self.assertRaisesRegex(InvalidArgumentError, "input_size: expected an integer"):
            spec.upsample_nearest_backward(2, False, "f32", [1, 1, 4.5, 4], [8, 8], [None, None])

    def test_grid_sampler_modes_accept_aten_ints_and_names(self):
        text = spec.grid_sampler_2d_backward("f32", [2, 3, 9, 11], [7, 5], 2, 1, True,
                                             [False, True])
        self.assertEqual(text, "grid_sampler_2d_backward dtype=f32 input_size=2,3,9,11 "
                               "output_size=7,5 interpolation_mode=bicubic padding_mode=border "
                               "align_corners=true output_mask=0,1")
        self.assertIn("interpolation_mode=nearest padding_mode=reflection",
                      spec.grid_sampler_2d_backward("f16", [1, 1, 2, 2], [1, 1], "nearest",
                                                    "reflection", False, [True, True]))
        for bad in (3, -1, "linear", True, 1.0):
            with self.assertRaisesRegex(ValueError, "interpolation_mode: expected one of"):
                spec.interpolation_mode_name(bad)
        with self.assertRaisesRegex(ValueError, "output_mask"):
            spec.output_mask_values([True])

    def test_grid_sampler_3d_text_refuses_bicubic(self):
        self.assertEqual(spec.grid_sampler_3d_backward("bf16", [2, 3, 4, 9, 11], [5, 7, 5], 1, 2,
                                                       True, [False, True]),
                         "grid_sampler_3d_backward dtype=bf16 input_size=2,3,4,9,11 "
                         "output_size=5,7,5 interpolation_mode=nearest "
                         "padding_mode=reflection align_corners=true output_mask=0,1")
        for bicubic in (2, "bicubic"):
            with self.assertRaisesRegex(ValueError, "bicubic .* is 2-d only"):
                spec.grid_sampler_3d_backward("f32", [1, 1, 2, 2, 2], [1, 1, 1], bicubic, 0,
                                              False, [True, True])
        with self.assertRaisesRegex(ValueError, "output_size: expected 3 values"):
            spec.grid_sampler_3d_backward("f32", [1, 1, 2, 2, 2], [1, 1], 0, 0, False,
                                          [True, True])

    def test_mhc_text(self):
        self.assertEqual(spec.mhc_pre_backward(2, 3, 4, 12, "bf16", 1e-6, False),
                         "mhc_pre_backward batch=2 seq=3 n=4 dim=12 dtype=bf16 hc_eps=1e-06 "
                         "with_grad_x_post=false")
        self.assertEqual(spec.mhc_post(1, 2, 4, 8, "bf16", backward=True),
                         "mhc_post_backward batch=1 seq=2 n=4 dim=8 dtype=bf16")
        self.assertEqual(spec.mhc_sinkhorn(1, 2, 4, 20, 1e-6, "f32"),
                         "mhc_sinkhorn batch=1 seq=2 n=4 t_max=20 eps=1e-06 dtype=f32")
        with self.assertRaisesRegex(ValueError, "t_max: expected an integer"):
            spec.mhc_sinkhorn(1, 2, 4, 2.5, 1e-6, "f32")


class TensorDescriptionTest(unittest.TestCase):
    def test_strides(self):
        self.assertEqual(contiguous_strides((2, 3, 4, 5)), (60, 20, 5, 1))
        self.assertEqual(channels_last_strides((2, 3, 4, 5)), (60, 1, 15, 3))
        self.assertEqual(channels_last_strides((2, 3, 4, 5, 6)), (360, 1, 90, 18, 3))

    def test_layouts_ignore_size_one_dimensions(self):
        self.assertEqual(layout_of(FakeTensor((2, 3, 4, 5)), "t"), "contiguous")
        cl = FakeTensor((2, 3, 4, 5), strides=channels_last_strides((2, 3, 4, 5)))
        self.assertEqual(layout_of(cl, "t"), "channels_last")
        # PyTorch may give a size-1 dimension any stride.
        self.assertEqual(layout_of(FakeTensor((1, 3, 1, 5), strides=(999, 5, 7, 1)), "t"),
                         "contiguous")
        self.assertTrue(same_addressing((1, 3), (0, 1), (3, 1)))
        self.assertFalse(same_addressing((2, 3), (4, 1), (3, 1)))

    def test_unsupported_strides_name_the_argument(self):
        transposed = FakeTensor((2, 3, 4, 5), strides=(60, 20, 1, 4))
        with self.assertRaisesRegex(InvalidArgumentError, r"grad_output: strides \(60, 20, 1, 4\)"):
            layout_of(transposed, "grad_output")
        cl = FakeTensor((2, 3, 4, 5), strides=channels_last_strides((2, 3, 4, 5)))
        with self.assertRaisesRegex(ValueError, "grid: .* are not contiguous"):
            layout_of(cl, "grid", ("contiguous",))

    def test_self_overlap(self):
        from adjoint.tensors import overlaps_itself
        self.assertFalse(overlaps_itself((2, 3, 4), (12, 4, 1)))
        self.assertFalse(overlaps_itself((2, 3, 4), (1, 8, 2)))  # permuted, disjoint
        self.assertFalse(overlaps_itself((2, 3, 4), (24, 8, 2)))  # sliced with gaps
        self.assertFalse(overlaps_itself((1, 3, 0), (0, 0, 0)))  # no elements
        self.assertTrue(overlaps_itself((2, 3, 4), (0, 4, 1)))  # expanded
        self.assertTrue(overlaps_itself((2, 3, 4), (4, 2, 1)))  # interleaved

    def test_dtypes(self):
        self.assertEqual(dtype_of(FakeTensor((1,), "bf16"), "x").name, "bf16")
        self.assertEqual(dtype_of(FakeTensor((1,), "f64"), "x").code, 3)
        with self.assertRaisesRegex(InvalidArgumentError, "x: expected dtype f16 or bf16 or f32 "
                                                          "or f64, got torch.int8"):
            dtype_of(FakeTensor((1,), "int8"), "x")


class ErrorTest(unittest.TestCase):
    def test_invalid_argument_is_a_value_error(self):
        error = error_for_status(1, "bad")
        self.assertIsInstance(error, InvalidArgumentError)
        self.assertIsInstance(error, ValueError)
        self.assertIsInstance(error, AdjointError)
        self.assertEqual(error.status_name, "ADJOINT_ERROR_INVALID_ARGUMENT")
        compile_error = error_for_status(3, "nvrtc said no")
        self.assertNotIsInstance(compile_error, ValueError)
        self.assertEqual(compile_error.status_name, "ADJOINT_ERROR_COMPILE_FAILED")

    def test_library_lookup(self):
        saved = os.environ.get("ADJOINT_LIBRARY")
        try:
            os.environ["ADJOINT_LIBRARY"] = "/nonexistent/libadjoint.so"
            with self.assertRaisesRegex(AdjointError, "ADJOINT_LIBRARY=/nonexistent"):
                _capi.locate_library()
            with tempfile.NamedTemporaryFile(suffix=".so") as f:
                os.environ["ADJOINT_LIBRARY"] = f.name
                self.assertEqual(_capi.locate_library(), f.name)
        finally:
            if saved is None:
                os.environ.pop("ADJOINT_LIBRARY", None)
            else:
                os.environ["ADJOINT_LIBRARY"] = saved
        self.assertTrue(_capi.default_library_path().endswith(
            os.path.join("build", "lib", "libadjoint.so")))


class FakeLibraryTest(unittest.TestCase):
    def setUp(self):
        self.fake = FakeLibrary(fake_definitions)
        self.environment = fake_environment(self.fake)
        self.allocated = self.environment.__enter__()

    def tearDown(self):
        self.environment.__exit__(None, None, None)

    def test_upsample_builds_spec_allocates_and_launches(self):
        grad_output = FakeTensor((2, 3, 64, 64), "bf16")
        grad_input = adjoint.upsample_nearest2d_backward(grad_output, [64, 64], [2, 3, 32, 32],
                                                         scales_h=2.0)
        self.assertEqual(self.fake.prepared, [(
            "upsample_nearest2d_backward dtype=bf16 input_size=2,3,32,32 output_size=64,64 "
            "scales_h=2 scales_w=none", 0)])
        self.assertEqual(grad_input.shape, (2, 3, 32, 32))
        self.assertEqual(str(grad_input.dtype), "torch.bfloat16")
        (handle, bound, stream), = self.fake.launches
        self.assertEqual(stream, 0xABC)
        self.assertEqual(bound["grad_output"], (grad_output.data_ptr(), 1, (2, 3, 64, 64),
                                                (12288, 4096, 64, 1)))
        self.assertEqual(bound["grad_input"][0], grad_input.data_ptr())

    def test_warm_call_hits_the_cache(self):
        for _ in range(3):
            adjoint.upsample_nearest1d_backward(FakeTensor((1, 2, 10)), [10], [1, 2, 5])
        self.assertEqual(len(self.fake.prepared), 1)
        self.assertEqual(len(self.fake.launches), 3)
        adjoint._upsample_nearest_exact1d_backward(FakeTensor((1, 2, 10)), [10], [1, 2, 5])
        self.assertEqual(len(self.fake.prepared), 2)

    def test_channels_last_in_channels_last_out(self):
        shape = (2, 8, 20, 9)
        grad_output = FakeTensor(shape, "f16", strides=channels_last_strides(shape))
        grad_input = adjoint.upsample_nearest2d_backward(grad_output, [20, 9], [2, 8, 13, 17])
        self.assertIn("layout=channels_last", self.fake.prepared[0][0])
        self.assertEqual(grad_input.stride(), channels_last_strides((2, 8, 13, 17)))

    def test_size_one_strides_are_normalized(self):
        grad_output = FakeTensor((1, 3, 4, 4), strides=(7, 16, 4, 1))
        adjoint.upsample_nearest2d_backward(grad_output, [4, 4], [1, 3, 2, 2])
        self.assertEqual(self.fake.launches[0][1]["grad_output"][3], (48, 16, 4, 1))

    def test_bad_arguments_fail_before_the_library(self):
        with self.assertRaisesRegex(InvalidArgumentError,
                                    r"upsample_nearest2d_backward: grad_output: expected shape "
                                    r"\(2, 3, 64, 64\) \(input_size\[0:2\] \+ output_size\), got "
                                    r"\(2, 3, 64, 63\)"):
            adjoint.upsample_nearest2d_backward(FakeTensor((2, 3, 64, 63)), [64, 64],
                                                [2, 3, 32, 32])
        with self.assertRaisesRegex(ValueError, "expected a CUDA tensor, got one on cpu:0"):
            adjoint.upsample_nearest2d_backward(
                FakeTensor((1, 1, 2, 2), device=FakeDevice("cpu")), [2, 2], [1, 1, 1, 1])
        with self.assertRaisesRegex(ValueError, "grad_output: expected a 3-d tensor"):
            adjoint.upsample_nearest1d_backward(FakeTensor((1, 1, 2, 2)), [2], [1, 1, 1])
        with self.assertRaisesRegex(ValueError, "input_size: expected 4 values"):
            adjoint.upsample_nearest2d_backward(FakeTensor((1, 1, 2, 2)), [2, 2], [1, 1, 1])
        self.assertEqual(self.fake.prepared, [])

    def test_library_errors_carry_its_message(self):
        with self.assertRaisesRegex(InvalidArgumentError, "unknown op 'nope'.*INVALID_ARGUMENT "
                                                          "from adjoint_prepare"):
            adjoint.prepare("nope dtype=f32")
        self.fake.launch_status = 4
        self.fake.launch_message = b"cuLaunchKernel: CUDA_ERROR_LAUNCH_FAILED"
        with self.assertRaises(AdjointError) as caught:
            adjoint.upsample_nearest1d_backward(FakeTensor((1, 1, 4)), [4], [1, 1, 2])
        self.assertNotIsInstance(caught.exception, ValueError)
        self.assertIn("CUDA_ERROR_LAUNCH_FAILED", str(caught.exception))
        self.assertEqual(caught.exception.status_name, "ADJOINT_ERROR_CUDA")

    def test_program_checks_bound_tensors(self):
        program = adjoint.prepare("upsample_nearest1d_backward dtype=f32 input_size=1,2,5 "
                                  "output_size=10")
        self.assertEqual(program.inputs, ("grad_output",))
        self.assertEqual(program.outputs, ("grad_input",))
        self.assertTrue(program.deterministic)
        self.assertEqual(program.info("grad_input").strides, (10, 5, 1))
        with self.assertRaisesRegex(ValueError, "tensors grad_output not given"):
            program({})
        with self.assertRaisesRegex(ValueError, "no tensor named 'grad'; it binds grad_output, "
                                                "grad_input"):
            program(grad=FakeTensor((1, 2, 10)))
        with self.assertRaisesRegex(ValueError, r"tensor 'grad_output' expected shape "
                                                r"\(1, 2, 10\), got \(1, 2, 11\)"):
            program(grad_output=FakeTensor((1, 2, 11)))
        with self.assertRaisesRegex(ValueError, "tensor 'grad_output' expected dtype f32, got f16"):
            program(grad_output=FakeTensor((1, 2, 10), "f16"))
        with self.assertRaisesRegex(ValueError, "tensor 'grad_output' is on cuda:1"):
            program(grad_output=FakeTensor((1, 2, 10), device=FakeDevice("cuda", 1)))
        outputs = adjoint.run(program.spec, {"grad_output": FakeTensor((1, 2, 10))})
        self.assertEqual(list(outputs), ["grad_input"])
        self.assertEqual(len(self.fake.prepared), 1)
        with self.assertRaisesRegex(ValueError, "determinism: expected one of default, "
                                                "allow_atomics"):
            adjoint.prepare(program.spec, determinism="fast")

    def test_warm_launch_rebinds_data_and_still_checks_every_tensor(self):
        program = adjoint.prepare("upsample_nearest1d_backward dtype=f32 input_size=1,2,5 "
                                  "output_size=10")
        first, second = FakeTensor((1, 2, 10)), FakeTensor((1, 2, 10))
        program(grad_output=first)
        program(grad_output=second)  # the precomputed path: only the pointer changes
        self.assertEqual([launch[1]["grad_output"][0] for launch in self.fake.launches],
                         [first.data_ptr(), second.data_ptr()])
        self.assertEqual(self.fake.launches[1][1]["grad_output"][2:], ((1, 2, 10), (20, 10, 1)))
        with self.assertRaisesRegex(ValueError, r"tensor 'grad_output' expected strides "
                                                r"\(20, 10, 1\), got \(40, 20, 2\)"):
            program(grad_output=FakeTensor((1, 2, 10), strides=(40, 20, 2)))
        with self.assertRaisesRegex(ValueError, "tensor 'grad_output': expected a CUDA tensor, got one on cpu"):
            program(grad_output=FakeTensor((1, 2, 10), device=FakeDevice("cpu", None)))
        with self.assertRaisesRegex(ValueError, "tensor 'grad_output': expected a CUDA tensor, "
                                                "got int"):
            program(grad_output=3)
        with self.assertRaisesRegex(ValueError, r"tensor 'grad_output' overlaps itself \(shape "
                                                r"\(1, 2, 10\), strides \(0, 0, 1\)"):
            program(grad_output=FakeTensor((1, 2, 10), strides=(0, 0, 1)))
        program(grad_output=first)
        self.assertEqual(len(self.fake.launches), 3)

    def test_function_memo_skips_checks_only_for_alike_calls(self):
        grad_output = FakeTensor((1, 2, 8, 8))
        for _ in range(3):
            adjoint.upsample_nearest2d_backward(grad_output, [8, 8], [1, 2, 4, 4])
        self.assertEqual(len(self.fake.prepared), 1)
        with self.assertRaisesRegex(ValueError, r"grad_output: expected shape \(1, 2, 8, 8\)"):
            adjoint.upsample_nearest2d_backward(FakeTensor((1, 2, 8, 9)), [8, 8], [1, 2, 4, 4])
        with self.assertRaisesRegex(ValueError, "grad_output: expected a CUDA tensor"):
            adjoint.upsample_nearest2d_backward(
                FakeTensor((1, 2, 8, 8), device=FakeDevice("cpu", None)), [8, 8], [1, 2, 4, 4])
        adjoint.clear_cache()  # the memo must not keep the released Program
        adjoint.upsample_nearest2d_backward(grad_output, [8, 8], [1, 2, 4, 4])
        self.assertEqual(len(self.fake.prepared), 2)
        self.assertEqual(len(self.fake.launches), 4)

    def test_strided_inputs_are_read_in_place_and_overlapping_ones_refused(self):
        sliced = FakeTensor((1, 2, 8, 8), strides=(256, 128, 16, 2))
        for _ in range(2):  # the memo remembers the strided specialization
            adjoint.upsample_nearest2d_backward(sliced, [8, 8], [1, 2, 4, 4])
        self.assertEqual(getattr(sliced, "copies", 0), 0)
        self.assertEqual(len(self.fake.prepared), 1)
        self.assertIn(" grad_output_strides=256,128,16,2", self.fake.prepared[-1][0])
        self.assertEqual(self.fake.launches[-1][1]["grad_output"],
                         (sliced.data_ptr(), 2, (1, 2, 8, 8), (256, 128, 16, 2)))
        with self.assertRaisesRegex(ValueError, r"upsample_nearest2d_backward: grad_output: "
                                                r"overlaps itself \(shape \(1, 2, 8, 8\), "
                                                r"strides \(0, 0, 8, 1\)"):
            adjoint.upsample_nearest2d_backward(FakeTensor((1, 2, 8, 8), strides=(0, 0, 8, 1)),
                                                [8, 8], [1, 2, 4, 4])
        go, x = FakeTensor((1, 2, 3, 3)), FakeTensor((1, 2, 4, 4))
        grid = FakeTensor((1, 3, 3, 2), strides=(36, 12, 4, 1))  # a slice of a wider grid
        adjoint.grid_sampler_2d_backward(go, x, grid, 0, 0, False, [True, True])
        self.assertEqual((getattr(grid, "copies", 0), getattr(go, "copies", 0)), (0, 0))
        self.assertIn(" grid_strides=36,12,4,1", self.fake.prepared[-1][0])
        self.assertNotIn("grad_output_strides", self.fake.prepared[-1][0])
        self.assertEqual(self.fake.launches[-1][1]["grid"][3], (36, 12, 4, 1))
        with self.assertRaisesRegex(ValueError, "grid_sampler_2d_backward: input: overlaps "
                                                "itself"):
            adjoint.grid_sampler_2d_backward(go, FakeTensor((1, 2, 4, 4), strides=(0, 0, 4, 1)),
                                             FakeTensor((1, 3, 3, 2)), 0, 0, False, [True, True])

    def test_release_and_cache_clear(self):
        program = adjoint.prepare("upsample_nearest1d_backward dtype=f32 input_size=1,2,5 "
                                  "output_size=10", determinism="allow_atomics")
        self.assertEqual(self.fake.prepared[-1][1], 1)
        adjoint.clear_cache()
        self.assertEqual(len(self.fake.released), 1)
        with self.assertRaisesRegex(ValueError, "was released"):
            program.launch({})

    def test_grid_sampler_output_mask_and_modes(self):
        grad_output = FakeTensor((2, 3, 7, 5))
        input, grid = FakeTensor((2, 3, 9, 11)), FakeTensor((2, 7, 5, 2))
        grad_input, grad_grid = adjoint.grid_sampler_2d_backward(grad_output, input, grid, 0, 2,
                                                                 False, [True, True])
        self.assertEqual(grad_input.shape, (2, 3, 9, 11))
        self.assertEqual(grad_grid.shape, (2, 7, 5, 2))
        self.assertIn("interpolation_mode=bilinear padding_mode=reflection align_corners=false",
                      self.fake.prepared[-1][0])
        grad_input, grad_grid = adjoint.grid_sampler_2d_backward(grad_output, input, grid, 1, 0,
                                                                 True, (False, True))
        self.assertIsNone(grad_input)
        self.assertEqual(set(self.fake.launches[-1][1]), {"grad_output", "input", "grid",
                                                          "grad_grid"})
        with self.assertRaisesRegex(ValueError, "grid has dtype torch.float16, grad_output has "
                                                "torch.float32"):
            adjoint.grid_sampler_2d_backward(grad_output, input, FakeTensor((2, 7, 5, 2), "f16"),
                                             0, 0, False, [True, True])
        with self.assertRaisesRegex(ValueError, r"grad_output: expected shape \(2, 3, 7, 5\)"):
            adjoint.grid_sampler_2d_backward(FakeTensor((2, 3, 5, 7)), input, grid, 0, 0, False,
                                             [True, True])

    def test_grid_sampler_3d_output_mask_and_shapes(self):
        grad_output = FakeTensor((2, 3, 4, 7, 5))
        input, grid = FakeTensor((2, 3, 6, 9, 11)), FakeTensor((2, 4, 7, 5, 3))
        grad_input, grad_grid = adjoint.grid_sampler_3d_backward(grad_output, input, grid, 0, 1,
                                                                 True, [True, True])
        self.assertEqual(grad_input.shape, (2, 3, 6, 9, 11))
        self.assertEqual(grad_grid.shape, (2, 4, 7, 5, 3))
        self.assertIn("grid_sampler_3d_backward dtype=f32 input_size=2,3,6,9,11 "
                      "output_size=4,7,5 interpolation_mode=bilinear padding_mode=border "
                      "align_corners=true", self.fake.prepared[-1][0])
        grad_input, grad_grid = adjoint.grid_sampler_3d_backward(grad_output, input, grid,
                                                                 "nearest", "zeros", False,
                                                                 (False, True))
        self.assertIsNone(grad_input)
        with self.assertRaisesRegex(ValueError, r"grid: expected shape \(2, D_out, H_out, W_out, "
                                                r"3\), got \(2, 4, 7, 5, 2\)"):
            adjoint.grid_sampler_3d_backward(grad_output, input, FakeTensor((2, 4, 7, 5, 2)), 0,
                                             0, False, [True, True])
        with self.assertRaisesRegex(ValueError, r"grad_output: expected shape \(2, 3, 4, 7, 5\)"):
            adjoint.grid_sampler_3d_backward(FakeTensor((2, 3, 4, 5, 7)), input, grid, 0, 0,
                                             False, [True, True])
        with self.assertRaisesRegex(ValueError,
                                    r"input: expected a 5-d tensor, got shape \(2, 3, 9, 11\)"):
            adjoint.grid_sampler_3d_backward(grad_output, FakeTensor((2, 3, 9, 11)), grid, 0, 0,
                                             False, [True, True])

    def test_mhc_binds_every_tensor(self):
        b, s, n, d, k = 2, 3, 4, 12, 24
        args = [FakeTensor((b, s, n, d), "bf16"), FakeTensor((k, n * d)), FakeTensor((3,)),
                FakeTensor((b, s, d), "bf16"), FakeTensor((b, s, n)), FakeTensor((b, s, n, n)),
                FakeTensor((b, s)), FakeTensor((b, s, k)), FakeTensor((b, s, n)),
                FakeTensor((b, s, n)), FakeTensor((n, d))]
        dx, dphi, dalpha, dbias, dgamma = adjoint.mhc_pre_backward(*args, hc_eps=1e-3)
        self.assertEqual((dx.shape, dphi.shape, dalpha.shape, dbias.shape, dgamma.shape),
                         ((b, s, n, d), (k, n * d), (3,), (k,), (n, d)))
        self.assertEqual(str(dx.dtype), "torch.bfloat16")
        self.assertIn("hc_eps=0.001 with_grad_x_post=false", self.fake.prepared[-1][0])
        adjoint.mhc_pre_backward(*args, grad_x_post=FakeTensor((b, s, n, d), "bf16"))
        self.assertIn("with_grad_x_post=true", self.fake.prepared[-1][0])
        self.assertIn("grad_x_post", self.fake.launches[-1][1])
        args[1] = FakeTensor((k, n * d), "f16")
        with self.assertRaisesRegex(ValueError, "tensor 'phi' expected dtype f32, got f16"):
            adjoint.mhc_pre_backward(*args)


    def test_mhc_post_and_sinkhorn_bind_every_tensor(self):
        b, s, n, d = 1, 3, 4, 8
        x, y = FakeTensor((b, s, n, d), "bf16"), FakeTensor((b, s, d), "bf16")
        h_res, h_post = FakeTensor((b, s, n, n)), FakeTensor((b, s, n))
        self.assertEqual(adjoint.mhc_post(x, y, h_res, h_post).shape, (b, s, n, d))
        dx, dy, dh_res, dh_post = adjoint.mhc_post_backward(FakeTensor((b, s, n, d), "bf16"),
                                                            x, y, h_res, h_post)
        self.assertEqual((dx.shape, dy.shape, dh_res.shape, dh_post.shape),
                         ((b, s, n, d), (b, s, d), (b, s, n, n), (b, s, n)))
        self.assertEqual(set(self.fake.launches[-1][1]),
                         {"x", "y", "h_res", "h_post", "grad_out", "dx", "dy", "dh_res", "dh_post"})
        grad = adjoint.mhc_sinkhorn_backward(FakeTensor((b, s, n, n)), h_res, t_max=7, eps=0.01)
        self.assertEqual(grad.shape, (b, s, n, n))
        self.assertIn("t_max=7 eps=0.01 dtype=f32", self.fake.prepared[-1][0])
        self.assertEqual(adjoint.mhc_sinkhorn(h_res).shape, (b, s, n, n))

    def test_mhc_inputs_of_other_strides_are_copied_and_overlapping_ones_refused(self):
        b, s, n, d = 1, 3, 4, 8
        x = FakeTensor((b, s, n, d), "bf16", strides=(s * d * n, d, s * d, 1))  # s, n swapped
        y, h_res = FakeTensor((b, s, d), "bf16"), FakeTensor((b, s, n, n))
        h_post = FakeTensor((b, s, n))
        adjoint.mhc_post(x, y, h_res, h_post)
        self.assertEqual(x.copies, 1)
        self.assertNotEqual(self.fake.launches[-1][1]["x"][0], x.data_ptr())
        self.assertEqual(self.fake.launches[-1][1]["y"][0], y.data_ptr())
        expanded = FakeTensor((b, s, n), strides=(0, 0, 1))
        with self.assertRaisesRegex(ValueError, "mhc_post: h_post: overlaps itself"):
            adjoint.mhc_post(FakeTensor((b, s, n, d), "bf16"), y, h_res, expanded)


class RealLibraryTest(unittest.TestCase):
    """Only where a built libadjoint with the C API is present: its errors reach Python."""

    def setUp(self):
        try:
            self.library = _capi.Library(__import__("ctypes").CDLL(_capi.locate_library()),
                                         "libadjoint")
            self.library._function("adjoint_prepare")
        except (AdjointError, OSError) as error:
            self.skipTest("no libadjoint with the C API: %s" % error)

    def test_version_and_bad_spec(self):
        self.assertRegex(self.library.version(), r"^\d+\.\d+")
        with self.assertRaises(AdjointError) as caught:
            self.library.prepare("no_such_op dtype=f32", 0)
        error = caught.exception
        if isinstance(error, InvalidArgumentError):
            self.assertIn("no_such_op", str(error))
        else:  # a library that looks for a GPU before parsing: it must say why it failed
            self.assertIn(error.status_name, ("ADJOINT_ERROR_NOT_AVAILABLE", "ADJOINT_ERROR_CUDA"))
            self.assertNotEqual(str(error).split(" [")[0], "adjoint_prepare failed")


if __name__ == "__main__":
    unittest.main()


class DynamicShapesTest(unittest.TestCase):
    """The dynamic-shape policy's mode and counters through the real library (no GPU needed)."""

    def setUp(self):
        try:
            self.library = _capi.Library(
                __import__("ctypes").CDLL(_capi.locate_library()), _capi.locate_library())
        except (AdjointError, OSError) as error:  # no built library here: nothing to check
            self.skipTest("libadjoint not loadable: %s" % error)

    def test_modes_and_counters(self):
        for mode in ("never", "always", "auto", "batch"):
            self.library.set_dynamic_shapes(mode)
        with self.assertRaisesRegex(
                InvalidArgumentError,
                "adjoint_set_dynamic_shapes: mode: expected never, batch, auto or always, got 'often'"):
            self.library.set_dynamic_shapes("often")
        self.library.reset_compile_stats()
        stats = self.library.compile_stats()
        self.assertEqual(sorted(stats), sorted([
            "specialized_programs", "generic_programs", "specialized_compiles",
            "generic_compiles", "generic_bindings", "generic_fallbacks"]))
        self.assertEqual(set(stats.values()), {0})
