// A backward op adjoint does not ship, written by a user in the IR: ATen's
// embedding_dense_backward (scale_grad_by_freq = false). The forward gathers rows,
// out[i, :] = weight[indices[i], :], so the backward is the adjoint scatter,
// grad_weight[indices[i], d] += grad_output[i, d], skipping rows whose index is padding_idx.
// That is one scatter_add with the builder. The program then goes through the same JIT as
// adjoint's own ops (runtime::Engine::prepare: verify, lower, NVRTC or the disk cache, load),
// is launched through runtime::LoadedProgram, and is checked against the reference
// interpreter on the host. Exits 0 after saying so where there is no GPU.
#include <cstdio>
#include <exception>
#include <memory>

#include "adjoint/adjoint.h"
#include "common/example_support.h"
#include "compiler/lower.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "runtime/driver.h"
#include "runtime/engine.h"
#include "runtime/nvrtc.h"

namespace {

namespace ir = adjoint::ir;
namespace compiler = adjoint::compiler;
namespace runtime = adjoint::runtime;
using example::DeviceTensor;

/// embedding_dense_backward(grad_output[num_indices, dim], indices[num_indices], num_weights,
/// padding_idx) -> grad_weight[num_weights, dim], in the IR.
ir::Program embedding_dense_backward(int64_t num_indices, int64_t num_weights, int64_t dim,
                                     int64_t padding_idx) {
  ir::ProgramBuilder b("embedding_dense_backward");
  ir::TensorRef grad_output = b.input("grad_output", ir::DType::kF32, {num_indices, dim});
  ir::TensorRef indices = b.input("indices", ir::DType::kI64, {num_indices});
  ir::Tensor grad_weight = b.output("grad_weight", ir::DType::kF32, {num_weights, dim});
  ir::Var i("i"), d("d");
  b.kernel("scatter_rows",
           {ir::scatter_add(grad_weight, {indices(i), d}, grad_output(i, d),
                            ir::over(grad_output, {i, d}), ir::DType::kF32,
                            /*condition=*/indices(i) != padding_idx)});
  return std::move(b).build();
}

/// Verifies, lowers for this device, compiles (or finds in the disk cache) and loads the
/// user's program through the same engine as adjoint's own ops.
std::shared_ptr<const runtime::LoadedProgram> load_user_program(const ir::Program& program) {
  std::shared_ptr<const runtime::LoadedProgram> loaded =
      runtime::Engine::instance().prepare(program, compiler::Determinism::kDefault);
  std::printf("compiled to %zu kernel(s), %s; NVRTC %.1f ms\n", loaded->kernels.size(),
              loaded->deterministic ? "deterministic" : "not deterministic (atomics)",
              loaded->compile_milliseconds);
  return loaded;
}

}  // namespace

int main() {
  const int64_t num_indices = 777, num_weights = 40, dim = 96, padding_idx = 3;
  ir::Program program = embedding_dense_backward(num_indices, num_weights, dim, padding_idx);
  std::printf("custom_op: a user-written backward op\n%s", ir::to_string(program).c_str());
  if (!example::gpu_present("custom_op")) return 0;
  try {
    example::use_device_zero();
    CUstream stream;
    example::check(example::driver().StreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                   "cuStreamCreate");
    std::shared_ptr<const runtime::LoadedProgram> loaded = load_user_program(program);

    // Indices in [0, num_weights): many rows collide, some are the padding row.
    std::vector<double> indices = example::uniform_values(num_indices, 0, num_weights, 5);
    for (double& index : indices) index = std::floor(index);
    ir::HostBuffers inputs = {
        {"grad_output", example::uniform_values(num_indices * dim, -1, 1, 6)},
        {"indices", indices}};
    DeviceTensor grad_output(ir::DType::kF32, {num_indices, dim});
    DeviceTensor index_tensor(ir::DType::kI64, {num_indices});
    DeviceTensor grad_weight(ir::DType::kF32, {num_weights, dim});
    grad_output.upload(inputs.at("grad_output"), stream);
    index_tensor.upload(inputs.at("indices"), stream);

    auto bind = [](const char* name, const DeviceTensor& t) {
      adjoint::TensorRef r = t.ref();
      return runtime::BoundTensor{name, r.data, static_cast<ir::DType>(r.dtype), r.shape,
                                  r.strides};
    };
    loaded->launch({bind("grad_output", grad_output), bind("indices", index_tensor),
                    bind("grad_weight", grad_weight)},
                   stream);
    grad_weight.download(stream);
    example::check(example::driver().StreamSynchronize(stream), "cuStreamSynchronize");
    example::check(example::driver().StreamDestroy(stream), "cuStreamDestroy");

    ir::HostBuffers want = ir::interpret(program, inputs);
    std::vector<double> got = grad_weight.values();
    // Atomic f32 adds in any order vs the interpreter's f64 sum rounded once.
    bool pass =
        example::check_close("grad_weight vs interpreter", got, want.at("grad_weight"), 1e-5);
    bool padding_zero = true;
    for (int64_t d = 0; d < dim; ++d) padding_zero &= got[padding_idx * dim + d] == 0;
    std::printf("  padding row stays zero: %s\n", padding_zero ? "PASS" : "FAIL");
    pass &= padding_zero;
    std::printf("custom_op: %s\n", pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("custom_op: FAIL: %s\n", e.what());
    return 1;
  }
}
