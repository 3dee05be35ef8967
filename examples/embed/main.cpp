// A host application embedding adjoint: it owns its device buffers and its stream, and calls
// two backward ops through the C++ API:
//   1. adjoint::upsample_nearest2d_backward, the ATen-shaped entry point, in bf16;
//   2. adjoint::run with a specialization text, for grid_sampler_2d_backward in f32.
// Each result is copied back and compared with adjoint's reference interpreter on the host
// (ir::interpret of the same specialization's IR). Prints PASS/FAIL and exits non-zero on a
// failure; exits 0 after saying so where there is no GPU.
#include <cstdio>
#include <exception>

#include "adjoint/adjoint.h"
#include "common/example_support.h"
#include "ir/interpreter.h"
#include "ops/registry.h"

namespace {

using adjoint::ir::DType;
using example::DeviceTensor;

/// grad_input = upsample_nearest2d_backward(grad_output) for a 5x4 -> 8x6 upsampling.
bool upsample_on_the_applications_stream(CUstream stream) {
  const std::array<int64_t, 4> input_size = {2, 3, 5, 4};
  const std::array<int64_t, 2> output_size = {8, 6};
  DeviceTensor grad_output(DType::kBF16, {2, 3, 8, 6});
  DeviceTensor grad_input(DType::kBF16, {2, 3, 5, 4});
  std::vector<double> upstream = example::uniform_values(grad_output.elements(), -1, 1, 7);
  grad_output.upload(upstream, stream);

  adjoint::upsample_nearest2d_backward(grad_output.ref(), grad_input.ref(), output_size,
                                       input_size, std::nullopt, std::nullopt, stream);
  grad_input.download(stream);
  example::check(example::driver().StreamSynchronize(stream), "cuStreamSynchronize");

  adjoint::ir::Program program =
      adjoint::ops::parse_specialization(
          "upsample_nearest2d_backward dtype=bf16 input_size=2,3,5,4 output_size=8,6")
          .build_program();
  adjoint::ir::HostBuffers want = adjoint::ir::interpret(program, {{"grad_output", upstream}});
  return example::check_close("upsample_nearest2d_backward bf16 grad_input", grad_input.values(),
                              want.at("grad_input"), example::tolerance_for(DType::kBF16));
}

/// (grad_input, grad_grid) = grid_sampler_2d_backward(grad_output, input, grid), bilinear.
bool grid_sampler_through_a_spec(CUstream stream) {
  const std::string spec =
      "grid_sampler_2d_backward dtype=f32 input_size=2,3,6,7 output_size=5,4 "
      "interpolation_mode=bilinear padding_mode=border align_corners=false";
  DeviceTensor grad_output(DType::kF32, {2, 3, 5, 4});
  DeviceTensor input(DType::kF32, {2, 3, 6, 7});
  DeviceTensor grid(DType::kF32, {2, 5, 4, 2});
  DeviceTensor grad_input(DType::kF32, {2, 3, 6, 7});
  DeviceTensor grad_grid(DType::kF32, {2, 5, 4, 2});
  adjoint::ir::HostBuffers inputs = {
      {"grad_output", example::uniform_values(grad_output.elements(), -1, 1, 11)},
      {"input", example::uniform_values(input.elements(), -1, 1, 12)},
      {"grid", example::uniform_values(grid.elements(), -1.2, 1.2, 13)}};
  grad_output.upload(inputs.at("grad_output"), stream);
  input.upload(inputs.at("input"), stream);
  grid.upload(inputs.at("grid"), stream);

  adjoint::run(spec,
               {{"grad_output", grad_output.ref()}, {"input", input.ref()}, {"grid", grid.ref()},
                {"grad_input", grad_input.ref()}, {"grad_grid", grad_grid.ref()}},
               stream);
  grad_input.download(stream);
  grad_grid.download(stream);
  example::check(example::driver().StreamSynchronize(stream), "cuStreamSynchronize");

  adjoint::ir::Program program = adjoint::ops::parse_specialization(spec).build_program();
  adjoint::ir::HostBuffers want = adjoint::ir::interpret(program, inputs);
  // grad_input is accumulated with atomics: the order of the f32 additions varies.
  bool input_ok = example::check_close("grid_sampler_2d_backward grad_input", grad_input.values(),
                                       want.at("grad_input"), 1e-4);
  bool grid_ok = example::check_close("grid_sampler_2d_backward grad_grid", grad_grid.values(),
                                      want.at("grad_grid"), 1e-4);
  return input_ok && grid_ok;
}

}  // namespace

int main() {
  if (!example::gpu_present("embed")) return 0;
  try {
    example::use_device_zero();
    CUstream stream;
    example::check(example::driver().StreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                   "cuStreamCreate");
    std::printf("embed: adjoint %s, two ops on the application's own buffers and stream\n",
                adjoint::version());
    bool upsample_ok = upsample_on_the_applications_stream(stream);
    bool grid_sampler_ok = grid_sampler_through_a_spec(stream);
    example::check(example::driver().StreamDestroy(stream), "cuStreamDestroy");
    bool pass = upsample_ok && grid_sampler_ok;
    std::printf("embed: %s\n", pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("embed: FAIL: %s\n", e.what());
    return 1;
  }
}
