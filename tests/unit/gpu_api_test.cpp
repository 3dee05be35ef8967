// GPU tests of the JIT path through the public API: every op's example specializations (those
// small enough for the interpreter) run on the device and must match the interpreter; the typed
// upsample entry point must match too; deterministic programs must be bitwise reproducible.
// Skipped, with a message, where no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "adjoint/adjoint.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ops/registry.h"
#include "reference/reference.h"
#include "runtime/driver.h"
#include "runtime/engine.h"
#include "runtime/host_transfer.h"
#include "support/gradcheck.h"

namespace adjoint {
namespace {

using ir::DType;

bool gpu_present() {
  if (!runtime::driver_available()) return false;
  int count = 0;
  return runtime::driver().DeviceGetCount(&count) == CUDA_SUCCESS && count > 0;
}

#define REQUIRE_GPU()                                                              \
  if (!gpu_present()) GTEST_SKIP() << "no GPU or CUDA driver on this machine: GPU " \
                                      "tests are skipped"

double tolerance(DType t) {
  switch (t) {
    case DType::kF16: return 2e-3;
    case DType::kBF16: return 1.6e-2;
    case DType::kF32: return 2e-5;
    default: return 1e-10;
  }
}

/// Runs `spec` on the GPU through adjoint::run and returns the outputs.
ir::HostBuffers run_on_gpu(const ops::Specialization& spec, const ir::Program& program,
                           const ir::HostBuffers& inputs, Determinism determinism) {
  runtime::current_context();
  runtime::DeviceBuffers buffers(program, inputs);
  adjoint::run(spec.to_string(), buffers.bindings(), nullptr, determinism);
  return buffers.download_outputs();
}

void expect_matches_interpreter(const std::string& text) {
  SCOPED_TRACE(text);
  ops::Specialization spec = ops::parse_specialization(text);
  ir::Program program = spec.build_program();
  ir::HostBuffers inputs = reference::make_inputs(spec, program, 7);
  ir::HostBuffers want = ir::interpret(program, inputs);
  ir::HostBuffers got = run_on_gpu(spec, program, inputs, Determinism::kDefault);
  for (const ir::Tensor& t : program.outputs) {
    int64_t where = -1;
    double tol = tolerance(t->dtype);
    double ratio = testing::tolerance_ratio(got.at(t->name), want.at(t->name), tol, tol, &where);
    EXPECT_LE(ratio, 1.0) << t->name << " differs at storage index " << where << ": got "
                          << (where >= 0 ? got.at(t->name)[where] : 0) << ", interpreter "
                          << (where >= 0 ? want.at(t->name)[where] : 0);
  }
  // Deterministic programs must be bitwise reproducible.
  Program prepared = Program::prepare(spec.to_string());
  if (prepared.deterministic()) {
    ir::HostBuffers again = run_on_gpu(spec, program, inputs, Determinism::kDefault);
    for (const ir::Tensor& t : program.outputs) {
      EXPECT_EQ(again.at(t->name), got.at(t->name)) << t->name << " is not reproducible";
    }
  }
}

TEST(GpuApi, UpsampleFamilyMatchesInterpreter) {
  REQUIRE_GPU();
  for (const char* dtype : {"f16", "bf16", "f32", "f64"}) {
    std::string d = std::string(" dtype=") + dtype;
    expect_matches_interpreter("upsample_nearest2d_backward" + d + " input_size=2,3,5,7 output_size=8,3");
    expect_matches_interpreter("upsample_nearest2d_backward" + d + " input_size=2,3,32,32 output_size=48,24 scales_h=1.5 scales_w=0.75");
    expect_matches_interpreter("upsample_nearest2d_backward" + d + " input_size=1,4,13,17 output_size=29,31 layout=channels_last");
    expect_matches_interpreter("_upsample_nearest_exact2d_backward" + d + " input_size=2,3,7,5 output_size=3,11");
    expect_matches_interpreter("upsample_nearest1d_backward" + d + " input_size=2,3,17 output_size=5");
    expect_matches_interpreter("_upsample_nearest_exact3d_backward" + d + " input_size=1,2,3,5,4 output_size=6,7,2");
  }
  expect_matches_interpreter("upsample_nearest2d_backward dtype=f32 input_size=0,3,4,4 output_size=8,8");
  expect_matches_interpreter("upsample_nearest2d_backward dtype=f32 input_size=1,1,1,1 output_size=1,1");
}

TEST(GpuApi, EveryOpExampleMatchesInterpreter) {
  REQUIRE_GPU();
  for (const ops::OpDefinition& op : ops::all_ops()) {
    for (const std::string& example : op.examples) {
      ops::Specialization spec = ops::parse_specialization(example);
      ir::Program program = spec.build_program();
      int64_t work = 0;
      for (const ir::Tensor& t : program.inputs) work += t->num_elements();
      for (const ir::Tensor& t : program.outputs) work += t->num_elements();
      if (work > 200000) continue;  // the interpreter would be too slow
      expect_matches_interpreter(example);
    }
  }
}

TEST(GpuApi, TypedUpsampleEntryPointMatchesSpecPath) {
  REQUIRE_GPU();
  // Four calls that differ only in scales_w, layout or grad_output's strides (padded rows, read
  // in place): the typed call's cache key must tell them apart (a key that dropped any would
  // reuse an earlier program and fail here).
  struct Call {
    std::optional<double> scales_w;
    bool channels_last;
    const char* strides;
  };
  for (const Call& call : {Call{std::nullopt, false, ""}, Call{1.4, false, ""},
                           Call{std::nullopt, true, ""},
                           Call{std::nullopt, false, " grad_output_strides=960,320,16,1"}}) {
    std::string text =
        "upsample_nearest2d_backward dtype=bf16 input_size=2,3,9,10 output_size=20,15 "
        "scales_h=2.25 scales_w=" + ops::format_optional_float(call.scales_w) +
        (call.channels_last ? " layout=channels_last" : "") + call.strides;
    SCOPED_TRACE(text);
    ops::Specialization spec = ops::parse_specialization(text);
    ir::Program program = spec.build_program();
    ir::HostBuffers inputs = reference::make_inputs(spec, program, 3);
    ir::HostBuffers want = ir::interpret(program, inputs);
    runtime::current_context();
    runtime::DeviceBuffers buffers(program, inputs);
    const ir::Tensor& go = program.inputs[0];
    const ir::Tensor& gi = program.outputs[0];
    upsample_nearest2d_backward(
        TensorRef{buffers.pointer("grad_output"), adjoint::DType::kBF16, go->shape, go->strides},
        TensorRef{buffers.pointer("grad_input"), adjoint::DType::kBF16, gi->shape, gi->strides},
        {20, 15}, {2, 3, 9, 10}, 2.25, call.scales_w, nullptr);
    ir::HostBuffers got = buffers.download_outputs();
    EXPECT_LE(testing::tolerance_ratio(got.at("grad_input"), want.at("grad_input"), 1.6e-2,
                                       1.6e-2),
              1.0);
  }
}

TEST(GpuApi, BadBindingsAreClearErrors) {
  REQUIRE_GPU();
  std::string text = "upsample_nearest2d_backward dtype=f32 input_size=1,1,4,4 output_size=8,8";
  ops::Specialization spec = ops::parse_specialization(text);
  ir::Program program = spec.build_program();
  runtime::current_context();
  runtime::DeviceBuffers buffers(program, reference::make_inputs(spec, program));
  CUdeviceptr a = buffers.pointer("grad_output"), b = buffers.pointer("grad_input");
  try {
    adjoint::run(text, {{"grad_output", TensorRef{a, adjoint::DType::kF16, {1, 1, 8, 8}, {}}},
                        {"grad_input", TensorRef{b, adjoint::DType::kF32, {1, 1, 4, 4}, {}}}},
                 nullptr);
    FAIL() << "a dtype mismatch was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'grad_output' has dtype f16, expected f32"), std::string::npos) << e.what();
  }
  try {
    adjoint::run(text, {{"grad_output", TensorRef{a, adjoint::DType::kF32, {1, 1, 8, 8}, {}}}}, nullptr);
    FAIL() << "a missing output was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'grad_input' (output) was not bound"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace adjoint
