// Kernel packages with generic kernels: `adjoint aot` with a `generic=` request packages the
// very program the runtime's dynamic-shape policy builds, so the one kernel of the package
// serves every size of the generic axes (within the index width it was built for). NVRTC runs
// on the CPU; skipped when it is missing. A `generic=input_size[0]` request packages the
// batch-generic kernel (compiler/lower_outer_generic.h) that the default policy looks up.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <tuple>

#include "compiler/lower.h"
#include "ir/error.h"
#include "runtime/dynamic_policy.h"
#include "runtime/engine.h"
#include "runtime/nvrtc.h"
#include "runtime/package.h"
#include "tools/package_builder.cpp"  // NOLINT(bugprone-suspicious-include): same path as the CLI
#include "tools/spec_file.cpp"        // NOLINT(bugprone-suspicious-include)

namespace adjoint {
namespace {

namespace fs = std::filesystem;

/// The kernel key the runtime looks up for `spec_text` when its policy makes every dynamic axis
/// generic (ADJOINT_DYNAMIC=always), on an sm_90 device.
std::string generic_runtime_key(const std::string& spec_text) {
  runtime::DynamicPolicy policy;
  runtime::ProgramChoice choice = runtime::choose_program(
      ops::parse_specialization(spec_text), policy, runtime::DynamicMode::kAlways);
  EXPECT_TRUE(choice.generic) << spec_text;
  compiler::CompiledProgram compiled = compiler::lower(
      choice.program, runtime::lower_options(compiler::Determinism::kDefault, 90));
  EXPECT_EQ(compiled.kernels.size(), 1u);
  return runtime::package_kernel_key(compiled.kernels.front().source);
}

TEST(GenericPackage, OneGenericKernelServesEverySizeOfItsAxes) {
  try {
    runtime::Nvrtc::instance();
  } catch (const Error& e) {
    GTEST_SKIP() << "NVRTC is not available: " << e.what();
  }
  std::vector<tools::SpecRequest> requests = tools::parse_spec_file(
      "upsample_nearest2d_backward dtype=bf16 input_size=2,16,32,32 output_size=64,64 "
      "generic=all\n",
      "specs.txt");
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].to_string(),
            "upsample_nearest2d_backward dtype=bf16 input_size=2,16,32,32 output_size=64,64 "
            "scales_h=none scales_w=none layout=contiguous generic=input_size[0],input_size[2],"
            "input_size[3],output_size[0],output_size[1]");
  fs::path root = fs::temp_directory_path() / ("adjoint-generic-package-" + std::to_string(::getpid()));
  fs::remove_all(root);
  runtime::write_package(root, tools::build_package_contents(requests, {90}));
  runtime::Package package = runtime::Package::load(root);
  EXPECT_EQ(package.kernel_count(), 1u);
  for (const char* sizes : {"input_size=2,16,32,32 output_size=64,64",
                            "input_size=7,16,17,40 output_size=33,80",
                            "input_size=1,16,5,5 output_size=5,5"}) {
    std::string spec = std::string("upsample_nearest2d_backward dtype=bf16 ") + sizes;
    EXPECT_TRUE(package.find(generic_runtime_key(spec), 90).has_value()) << spec;
  }
  // Another channel count is another generic program; storage past 32-bit offsets another width.
  EXPECT_FALSE(package
                   .find(generic_runtime_key("upsample_nearest2d_backward dtype=bf16 "
                                             "input_size=2,8,32,32 output_size=64,64"),
                         90)
                   .has_value());
  EXPECT_FALSE(package
                   .find(generic_runtime_key("upsample_nearest2d_backward dtype=bf16 "
                                             "input_size=4096,16,256,256 output_size=512,512"),
                         90)
                   .has_value());
  fs::remove_all(root);
}

/// A package built from a `generic=input_size[0]` request holds the batch-generic kernel
/// (compiler/lower_outer_generic.h): the one kernel the default policy (batch) looks up for
/// every batch of that shape, and not the kernel of another spatial size.
TEST(GenericPackage, OneBatchGenericKernelServesEveryBatch) {
  try {
    runtime::Nvrtc::instance();
  } catch (const Error& e) {
    GTEST_SKIP() << "NVRTC is not available: " << e.what();
  }
  std::vector<tools::SpecRequest> requests = tools::parse_spec_file(
      "upsample_nearest2d_backward dtype=f32 input_size=2,16,32,32 output_size=64,64 "
      "layout=channels_last generic=input_size[0]\n",
      "specs.txt");
  ASSERT_EQ(requests.size(), 1u);
  fs::path root =
      fs::temp_directory_path() / ("adjoint-batch-package-" + std::to_string(::getpid()));
  fs::remove_all(root);
  runtime::write_package(root, tools::build_package_contents(requests, {90}));
  runtime::Package package = runtime::Package::load(root);
  EXPECT_EQ(package.kernel_count(), 1u);
  // Every batch finds the kernel; another spatial size is another kernel.
  for (const auto& [n, width, found] : std::vector<std::tuple<int64_t, int64_t, bool>>{
           {1, 64, true}, {2, 64, true}, {9, 64, true}, {64, 64, true}, {2, 63, false}}) {
    auto spec = [&, width = width](int64_t batch) {
      return "upsample_nearest2d_backward dtype=f32 input_size=" + std::to_string(batch) +
             ",16,32,32 output_size=64," + std::to_string(width) + " layout=channels_last";
    };
    runtime::DynamicPolicy policy;  // a second batch of the family makes the batch generic
    runtime::choose_program(ops::parse_specialization(spec(n + 1)), policy,
                            runtime::DynamicMode::kBatch);
    runtime::ProgramChoice choice = runtime::choose_program(ops::parse_specialization(spec(n)),
                                                            policy, runtime::DynamicMode::kBatch);
    ASSERT_TRUE(choice.generic) << spec(n);
    EXPECT_TRUE(choice.require_outer_batch);
    compiler::CompiledProgram compiled = compiler::lower(
        choice.program, runtime::lower_options(compiler::Determinism::kDefault, 90));
    ASSERT_EQ(compiled.kernels.size(), 1u);
    EXPECT_TRUE(compiled.kernels[0].one_index_per_thread);
    EXPECT_EQ(package.find(runtime::package_kernel_key(compiled.kernels[0].source), 90).has_value(),
              found)
        << spec(n);
  }
  fs::remove_all(root);
}

TEST(GenericPackage, RequestsNameOnlyDeclaredAxes) {
  EXPECT_THROW(tools::parse_spec_request("upsample_nearest1d_backward dtype=f32 input_size=1,2,7 "
                                         "output_size=17 generic=input_size[1]"),
               Error);
  // An op that declares no dynamic axes (grid_sampler: its binned gathers need a runtime bucket
  // count; every mHC op declares batch and seq).
  EXPECT_THROW(tools::parse_spec_request("grid_sampler_2d_backward dtype=f32 input_size=1,2,5,7 "
                                         "output_size=4,3 generic=all"),
               Error);
}

}  // namespace
}  // namespace adjoint
