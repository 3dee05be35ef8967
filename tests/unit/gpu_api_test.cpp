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

std::vector<char> to_bytes(DType t, const std::vector<double>& v) {
  std::vector<char> out(v.size() * ir::dtype_bytes(t));
  for (size_t i = 0; i < v.size(); ++i) {
    char* p = out.data() + i * ir::dtype_bytes(t);
    switch (t) {
      case DType::kF16: { uint16_t h = ir::float_to_half_bits(float(v[i])); std::memcpy(p, &h, 2); break; }
      case DType::kBF16: { uint16_t h = ir::float_to_bfloat16_bits(float(v[i])); std::memcpy(p, &h, 2); break; }
      case DType::kF32: { float f = float(v[i]); std::memcpy(p, &f, 4); break; }
      case DType::kF64: std::memcpy(p, &v[i], 8); break;
      case DType::kI32: { int32_t x = int32_t(v[i]); std::memcpy(p, &x, 4); break; }
      case DType::kI64: { int64_t x = int64_t(v[i]); std::memcpy(p, &x, 8); break; }
      case DType::kBool: *p = v[i] != 0; break;
    }
  }
  return out;
}

std::vector<double> from_bytes(DType t, const std::vector<char>& b) {
  size_t n = b.size() / ir::dtype_bytes(t);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    const char* p = b.data() + i * ir::dtype_bytes(t);
    uint16_t h; float f; double d; int32_t x; int64_t y;
    switch (t) {
      case DType::kF16: std::memcpy(&h, p, 2); out[i] = ir::half_bits_to_float(h); break;
      case DType::kBF16: std::memcpy(&h, p, 2); out[i] = ir::bfloat16_bits_to_float(h); break;
      case DType::kF32: std::memcpy(&f, p, 4); out[i] = f; break;
      case DType::kF64: std::memcpy(&d, p, 8); out[i] = d; break;
      case DType::kI32: std::memcpy(&x, p, 4); out[i] = x; break;
      case DType::kI64: std::memcpy(&y, p, 8); out[i] = double(y); break;
      case DType::kBool: out[i] = *p != 0; break;
    }
  }
  return out;
}

/// Device buffers of one program run, freed at scope exit.
struct DeviceRun {
  std::vector<std::pair<std::string, CUdeviceptr>> allocations;
  ~DeviceRun() {
    for (auto& [name, p] : allocations) {
      if (p) runtime::driver().MemFree(p);
    }
  }
  CUdeviceptr alloc(const std::string& name, size_t bytes) {
    runtime::current_context();  // the test allocates before adjoint has made a context current
    CUdeviceptr p = 0;
    if (bytes) runtime::check(runtime::driver().MemAlloc(&p, bytes), "cuMemAlloc");
    allocations.emplace_back(name, p);
    return p;
  }
};

double tolerance(DType t) {
  switch (t) {
    case DType::kF16: return 2e-3;
    case DType::kBF16: return 1.6e-2;
    case DType::kF32: return 2e-5;
    default: return 1e-10;
  }
}

/// Runs `spec_text` on the GPU through adjoint::run and returns the outputs (and the program).
ir::HostBuffers run_on_gpu(const ops::Specialization& spec, const ir::Program& program,
                           const ir::HostBuffers& inputs, Determinism determinism) {
  DeviceRun run;
  Bindings bindings;
  for (const ir::Tensor& t : program.inputs) {
    std::vector<char> bytes = to_bytes(t->dtype, inputs.at(t->name));
    CUdeviceptr p = run.alloc(t->name, bytes.size());
    if (!bytes.empty()) runtime::check(runtime::driver().MemcpyHtoD(p, bytes.data(), bytes.size()), "HtoD");
    bindings.push_back({t->name, TensorRef{p, static_cast<adjoint::DType>(t->dtype), t->shape, t->strides}});
  }
  for (const ir::Tensor& t : program.outputs) {
    size_t bytes = t->storage_elements() * ir::dtype_bytes(t->dtype);
    CUdeviceptr p = run.alloc(t->name, bytes);
    // Poison outputs so that an element a kernel forgets to write is caught.
    if (bytes) runtime::check(runtime::driver().MemsetD8Async(p, 0x7f, bytes, nullptr), "memset");
    bindings.push_back({t->name, TensorRef{p, static_cast<adjoint::DType>(t->dtype), t->shape, t->strides}});
  }
  adjoint::run(spec.to_string(), bindings, nullptr, determinism);
  ir::HostBuffers out;
  for (const ir::Tensor& t : program.outputs) {
    std::vector<char> bytes(t->storage_elements() * ir::dtype_bytes(t->dtype));
    CUdeviceptr p = 0;
    for (auto& [name, q] : run.allocations) if (name == t->name) p = q;
    if (!bytes.empty()) runtime::check(runtime::driver().MemcpyDtoH(bytes.data(), p, bytes.size()), "DtoH");
    out[t->name] = from_bytes(t->dtype, bytes);
  }
  return out;
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
  std::string text = "upsample_nearest2d_backward dtype=bf16 input_size=2,3,9,10 output_size=20,15 scales_h=2.25";
  ops::Specialization spec = ops::parse_specialization(text);
  ir::Program program = spec.build_program();
  ir::HostBuffers inputs = reference::make_inputs(spec, program, 3);
  ir::HostBuffers want = ir::interpret(program, inputs);
  DeviceRun run;
  const ir::Tensor& go = program.inputs[0];
  const ir::Tensor& gi = program.outputs[0];
  std::vector<char> bytes = to_bytes(go->dtype, inputs.at(go->name));
  CUdeviceptr pgo = run.alloc("grad_output", bytes.size());
  runtime::check(runtime::driver().MemcpyHtoD(pgo, bytes.data(), bytes.size()), "HtoD");
  size_t out_bytes = gi->storage_elements() * 2;
  CUdeviceptr pgi = run.alloc("grad_input", out_bytes);
  upsample_nearest2d_backward(TensorRef{pgo, adjoint::DType::kBF16, go->shape, {}},
                              TensorRef{pgi, adjoint::DType::kBF16, gi->shape, {}}, {20, 15},
                              {2, 3, 9, 10}, 2.25, std::nullopt, nullptr);
  std::vector<char> out(out_bytes);
  runtime::check(runtime::driver().MemcpyDtoH(out.data(), pgi, out_bytes), "DtoH");
  EXPECT_LE(testing::tolerance_ratio(from_bytes(DType::kBF16, out), want.at("grad_input"), 1.6e-2, 1.6e-2), 1.0);
}

TEST(GpuApi, BadBindingsAreClearErrors) {
  REQUIRE_GPU();
  std::string text = "upsample_nearest2d_backward dtype=f32 input_size=1,1,4,4 output_size=8,8";
  DeviceRun run;
  CUdeviceptr a = run.alloc("a", 64 * 4), b = run.alloc("b", 16 * 4);
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
