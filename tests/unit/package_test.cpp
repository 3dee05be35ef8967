// Kernel package round trip without a GPU: a package is built with the real NVRTC for sm_80 and
// sm_90 through the code path of `adjoint aot` (tools/package_builder.cpp and
// tools/spec_file.cpp are compiled into this test: the CLI is an executable, not a library),
// written with runtime::write_package and loaded with runtime::Package::load. Lookups are made
// with the key the runtime computes (the content key of the source it lowers), and a package
// that is from another version or does not match its manifest is refused with a clear message.
#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "adjoint/version.h"
#include "compiler/lower.h"
#include "ir/error.h"
#include "runtime/package.h"
#include "tools/package_builder.cpp"  // NOLINT(bugprone-suspicious-include): same path as the CLI
#include "tools/spec_file.cpp"        // NOLINT(bugprone-suspicious-include)

namespace adjoint {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSpecFile = R"(# a spec file as `adjoint aot` reads it
upsample_nearest2d_backward dtype=f32 input_size=1,2,5,7 output_size=8,3
)";

/// The kernel key the runtime looks up for `spec_text` on a device of `arch`: the content key of
/// the CUDA source that lower() produces for it.
std::string runtime_key(const std::string& spec_text, int arch) {
  tools::SpecRequest request = tools::parse_spec_request(spec_text);
  compiler::CompiledProgram compiled = compiler::lower(
      request.specialization.build_program(), runtime::lower_options(request.determinism, arch));
  EXPECT_EQ(compiled.kernels.size(), 1u);
  return runtime::package_kernel_key(compiled.kernels.front().source);
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

/// Expects Package::load(directory) to throw an adjoint::Error whose message contains each of
/// `fragments`.
void expect_refused(const fs::path& directory, const std::vector<std::string>& fragments) {
  try {
    runtime::Package::load(directory);
    ADD_FAILURE() << "Package::load accepted " << directory;
  } catch (const Error& e) {
    for (const std::string& fragment : fragments) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "message: " << e.what() << "\nexpected to contain: " << fragment;
    }
  }
}

class PackageTest : public ::testing::Test {
 protected:
  /// Builds the package once (four NVRTC compiles: sm_80 and sm_90 cubins, compute_90 PTX).
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() /
                         ("adjoint-package-test-" + std::to_string(::getpid())));
    fs::remove_all(*root_);
    std::vector<tools::SpecRequest> requests = tools::parse_spec_file(kSpecFile, "specs.txt");
    contents_ = new runtime::PackageContents(
        tools::build_package_contents(requests, tools::parse_arch_list("sm_90,sm_80")));
    runtime::write_package(*root_ / "package", *contents_);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
    delete contents_;
  }

  fs::path package() const { return *root_ / "package"; }

  /// A fresh copy of the package that a test may damage.
  fs::path scratch_copy(const std::string& name) const {
    fs::path copy = *root_ / name;
    fs::remove_all(copy);
    fs::copy(package(), copy, fs::copy_options::recursive);
    return copy;
  }

  /// The manifest entry of the first binary with this arch and kind.
  static nlohmann::json binary_entry(const fs::path& directory, int arch, bool ptx) {
    nlohmann::json manifest = nlohmann::json::parse(read_text(directory / "manifest.json"));
    for (const auto& kernel : manifest.at("kernels")) {
      for (const auto& binary : kernel.at("binaries")) {
        if (binary.at("arch") == arch && binary.at("ptx") == ptx) return binary;
      }
    }
    ADD_FAILURE() << "no binary for arch " << arch << (ptx ? " (PTX)" : " (cubin)");
    return {};
  }

  static fs::path* root_;
  static runtime::PackageContents* contents_;
};

fs::path* PackageTest::root_ = nullptr;
runtime::PackageContents* PackageTest::contents_ = nullptr;

const std::string kSpec =
    "upsample_nearest2d_backward dtype=f32 input_size=1,2,5,7 output_size=8,3";

TEST_F(PackageTest, BuilderGathersOneKernelWithCubinsPerArchAndPtxOfTheNewest) {
  ASSERT_EQ(contents_->kernels.size(), 1u);
  EXPECT_EQ(contents_->archs, (std::vector<int>{80, 90}));
  ASSERT_EQ(contents_->specializations.size(), 1u);
  EXPECT_EQ(contents_->specializations[0], tools::parse_spec_request(kSpec).to_string());
  const runtime::PackageKernel& kernel = contents_->kernels[0];
  EXPECT_EQ(kernel.entry, "upsample_nearest2d_backward_scatter_grad_input");
  ASSERT_EQ(kernel.binaries.size(), 3u);
  EXPECT_EQ(kernel.binaries[0].arch, 80);
  EXPECT_FALSE(kernel.binaries[0].is_ptx);
  EXPECT_EQ(kernel.binaries[1].arch, 90);
  EXPECT_FALSE(kernel.binaries[1].is_ptx);
  EXPECT_EQ(kernel.binaries[2].arch, 90);
  EXPECT_TRUE(kernel.binaries[2].is_ptx);
}

TEST_F(PackageTest, LoadsAndListsWhatItCovers) {
  runtime::Package loaded = runtime::Package::load(package());
  EXPECT_EQ(loaded.kernel_count(), 1u);
  EXPECT_EQ(loaded.specializations(), contents_->specializations);
  EXPECT_EQ(loaded.directory(), package());
}

TEST_F(PackageTest, FindsTheCubinForExactlyTheDeviceArchitecture) {
  runtime::Package loaded = runtime::Package::load(package());
  for (int arch : {80, 90}) {
    std::optional<runtime::PackageBinary> binary = loaded.find(runtime_key(kSpec, arch), arch);
    ASSERT_TRUE(binary.has_value()) << "sm_" << arch;
    EXPECT_EQ(binary->arch, arch);
    EXPECT_FALSE(binary->is_ptx);
    ASSERT_GE(binary->bytes.size(), 4u);
    EXPECT_EQ(std::string(binary->bytes.data(), 4), "\x7f" "ELF");
    const runtime::PackageBinary& built = contents_->kernels[0].binaries[arch == 80 ? 0 : 1];
    EXPECT_EQ(binary->bytes, built.bytes);
  }
}

TEST_F(PackageTest, NewerDeviceFallsBackToThePtxOfTheNewestArchitecture) {
  runtime::Package loaded = runtime::Package::load(package());
  std::optional<runtime::PackageBinary> binary = loaded.find(runtime_key(kSpec, 90), 100);
  ASSERT_TRUE(binary.has_value());
  EXPECT_TRUE(binary->is_ptx);
  EXPECT_EQ(binary->arch, 90);
  std::string ptx(binary->bytes.begin(), binary->bytes.end());
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
  EXPECT_NE(ptx.find(".entry upsample_nearest2d_backward_scatter_grad_input"), std::string::npos);
}

TEST_F(PackageTest, MissesWhatItDoesNotCover) {
  runtime::Package loaded = runtime::Package::load(package());
  // A device older than every binary: no cubin for it and the PTX is too new.
  EXPECT_FALSE(loaded.find(runtime_key(kSpec, 90), 75).has_value());
  // Another specialization lowers to another source, hence another key.
  std::string other = runtime_key(
      "upsample_nearest2d_backward dtype=f32 input_size=1,2,5,7 output_size=8,4", 90);
  EXPECT_NE(other, runtime_key(kSpec, 90));
  EXPECT_FALSE(loaded.find(other, 90).has_value());
  // The same op with atomics allowed is covered only if it lowers to the same source.
  std::string atomics = runtime_key(kSpec + " determinism=allow_atomics", 90);
  EXPECT_EQ(loaded.find(atomics, 90).has_value(), atomics == runtime_key(kSpec, 90));
}

TEST_F(PackageTest, RefusesAPackageFromAnotherVersion) {
  fs::path copy = scratch_copy("other-version");
  nlohmann::json manifest = nlohmann::json::parse(read_text(copy / "manifest.json"));
  manifest["adjoint_version"] = "0.0.1-elsewhere";
  write_text(copy / "manifest.json", manifest.dump(2));
  expect_refused(copy, {"built by adjoint 0.0.1-elsewhere",
                        std::string("this is adjoint ") + ADJOINT_VERSION_STRING,
                        "rebuild it with `adjoint aot`"});
}

TEST_F(PackageTest, RefusesACubinWithAFlippedByte) {
  fs::path copy = scratch_copy("flipped-byte");
  std::string file = binary_entry(copy, 90, false).at("file");
  std::string bytes = read_text(copy / file);
  bytes[bytes.size() / 2] ^= 0x01;
  write_text(copy / file, bytes);
  expect_refused(copy, {file, "does not match the manifest", "damaged or was modified"});
}

TEST_F(PackageTest, RefusesAPackageWithAMissingFile) {
  fs::path copy = scratch_copy("missing-file");
  std::string file = binary_entry(copy, 90, true).at("file");
  fs::remove(copy / file);
  expect_refused(copy, {"cannot read", file});
}

TEST_F(PackageTest, RefusesADirectoryWithoutManifest) {
  fs::path copy = scratch_copy("no-manifest");
  fs::remove(copy / "manifest.json");
  expect_refused(copy, {"no manifest.json"});
}

TEST(PackageBuilder, RefusesAnArchitectureNvrtcCannotEmitACubinFor) {
  std::vector<tools::SpecRequest> requests = tools::parse_spec_file(kSpecFile, "specs.txt");
  try {
    tools::build_package_contents(requests, {35, 90});
    ADD_FAILURE() << "sm_35 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot emit a cubin for sm_35"), std::string::npos)
        << e.what();
  }
}

TEST(SpecFile, ParsesCommentsBlankLinesDeterminismAndDuplicates) {
  std::vector<tools::SpecRequest> requests = tools::parse_spec_file(
      "# header\n\n" + kSpec + "  # trailing comment\n   \n" + kSpec + "\n" + kSpec +
          " determinism=allow_atomics\n",
      "specs.txt");
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].determinism, compiler::Determinism::kDefault);
  EXPECT_EQ(requests[1].determinism, compiler::Determinism::kAllowAtomics);
  EXPECT_EQ(tools::parse_spec_request(requests[1].to_string()).to_string(),
            requests[1].to_string());
}

TEST(SpecFile, ErrorsNameFileAndLine) {
  try {
    tools::parse_spec_file("# ok\n" + kSpec + "\nupsample_nearest2d_backward input_size=1\n",
                           "specs.txt");
    ADD_FAILURE() << "bad line accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("specs.txt:3: upsample_nearest2d_backward", 0), 0u)
        << e.what();
  }
}

TEST(SpecFile, ArchitectureListsAreSortedAndDeduplicated) {
  EXPECT_EQ(tools::parse_arch_list("sm_90, 80,compute_90"), (std::vector<int>{80, 90}));
  EXPECT_THROW(tools::parse_arch_list(","), Error);
  EXPECT_THROW(tools::parse_arch("sm_9x"), Error);
}

}  // namespace
}  // namespace adjoint
