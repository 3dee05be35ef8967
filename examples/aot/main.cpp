// A deployment that must not compile at run time. It loads the kernel package that
// `adjoint aot` built from specs.txt (next to this executable, or the directory given as the
// first argument), disables the JIT, and runs every specialization the package lists on data
// of its own, checking each output against the reference interpreter. Then it shows what a call
// the package does not cover does with the JIT disabled (a clear error), and asserts that NVRTC
// was never loaded by this process. Exits 0 after saying so where there is no GPU (the package
// is still loaded and checked against its manifest: that needs no GPU).
#include <climits>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "adjoint/adjoint.h"
#include "common/example_support.h"
#include "ir/interpreter.h"
#include "ops/registry.h"
#include "runtime/nvrtc.h"
#include "runtime/package.h"

namespace {

namespace fs = std::filesystem;
using example::DeviceTensor;

fs::path default_package_directory() {
  char path[PATH_MAX];
  ssize_t length = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (length <= 0) return "adjoint_example_aot_package";
  path[length] = '\0';
  return fs::path(path).parent_path() / "adjoint_example_aot_package";
}

/// A package lists its specializations in the CLI syntax; the determinism option is not part of
/// the op's attributes, so it is taken off here and passed separately.
adjoint::Determinism take_determinism(std::string& spec) {
  const std::string option = " determinism=allow_atomics";
  if (spec.size() > option.size() && spec.ends_with(option)) {
    spec.resize(spec.size() - option.size());
    return adjoint::Determinism::kAllowAtomics;
  }
  return adjoint::Determinism::kDefault;
}

/// Prepares `spec` (from the package: the JIT is off), runs it on fresh data and compares every
/// output with the interpreter.
bool run_from_package(std::string spec, CUstream stream) {
  adjoint::Determinism determinism = take_determinism(spec);
  adjoint::Program program = adjoint::Program::prepare(spec, determinism);
  std::printf("%s\n", spec.c_str());

  std::vector<std::unique_ptr<DeviceTensor>> buffers;
  adjoint::Bindings bindings;
  adjoint::ir::HostBuffers inputs;
  uint64_t seed = 1;
  for (const adjoint::TensorInfo& info : program.tensors()) {
    auto dtype = static_cast<adjoint::ir::DType>(info.dtype);
    buffers.push_back(std::make_unique<DeviceTensor>(dtype, info.shape, info.strides));
    if (!info.is_output) {
      inputs[info.name] = example::uniform_values(buffers.back()->elements(), -1, 1, seed++);
      buffers.back()->upload(inputs[info.name], stream);
    }
    bindings.emplace_back(info.name, buffers.back()->ref());
  }
  program.launch(bindings, stream);
  for (auto& buffer : buffers) buffer->download(stream);
  example::check(example::driver().StreamSynchronize(stream), "cuStreamSynchronize");

  adjoint::ir::HostBuffers want =
      adjoint::ir::interpret(adjoint::ops::parse_specialization(spec).build_program(), inputs);
  bool pass = true;
  std::vector<adjoint::TensorInfo> infos = program.tensors();
  for (size_t i = 0; i < infos.size(); ++i) {
    if (!infos[i].is_output) continue;
    auto dtype = static_cast<adjoint::ir::DType>(infos[i].dtype);
    pass &= example::check_close(infos[i].name, buffers[i]->values(), want.at(infos[i].name),
                                 example::tolerance_for(dtype));
  }
  return pass;
}

/// With the JIT disabled, a specialization no package covers must fail with an error naming it.
bool uncovered_call_fails_clearly() {
  const std::string uncovered = "upsample_nearest2d_backward dtype=f32 input_size=1,1,3,3 "
                                "output_size=7,7";
  try {
    adjoint::Program::prepare(uncovered);
  } catch (const adjoint::Error& e) {
    bool clear = e.code() == adjoint::ErrorCode::kNotAvailable &&
                 std::string(e.what()).find("JIT compilation is disabled") != std::string::npos;
    std::printf("  uncovered call: %s (%s)\n", clear ? "PASS" : "FAIL", e.what());
    return clear;
  }
  std::printf("  uncovered call: FAIL (it ran although no package covers it and JIT is off)\n");
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    fs::path package = argc > 1 ? fs::path(argv[1]) : default_package_directory();
    adjoint::load_package(package.string());
    adjoint::set_jit_enabled(false);
    adjoint::runtime::Package listing = adjoint::runtime::Package::load(package);
    std::printf("aot: loaded %s (%zu specializations, %zu kernels); JIT disabled\n",
                package.c_str(), listing.specializations().size(), listing.kernel_count());
    if (!example::gpu_present("aot")) return 0;

    example::use_device_zero();
    CUstream stream;
    example::check(example::driver().StreamCreate(&stream, CU_STREAM_NON_BLOCKING),
                   "cuStreamCreate");
    bool pass = true;
    for (const std::string& spec : listing.specializations()) {
      pass &= run_from_package(spec, stream);
    }
    pass &= uncovered_call_fails_clearly();
    example::check(example::driver().StreamDestroy(stream), "cuStreamDestroy");

    bool nvrtc_loaded = adjoint::runtime::nvrtc_loaded();
    std::printf("  NVRTC loaded by this process: %s\n", nvrtc_loaded ? "yes (FAIL)" : "no (PASS)");
    pass &= !nvrtc_loaded;
    std::printf("aot: %s\n", pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("aot: FAIL: %s\n", e.what());
    return 1;
  }
}
