// NVRTC loaded at run time: cubins for sm_80/sm_90, half and bfloat16 headers, the embedded
// templates as named headers, PTX output, architecture selection and compile errors. Needs
// NVRTC, not a GPU.
#include "runtime/nvrtc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "compiler/embedded_templates.h"
#include "ir/error.h"
#include "runtime/library_search.h"

namespace adjoint::runtime {
namespace {

const char* kTinyKernel = R"(
extern "C" __global__ void scale(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 2.0f * in[i];
}
)";

bool is_elf(const std::vector<char>& image) {
  return image.size() > 4 && image[0] == '\x7f' && image[1] == 'E' && image[2] == 'L' &&
         image[3] == 'F';
}

CompileRequest request_for(const std::string& source, int arch, const std::string& name) {
  CompileRequest request;
  request.source = source;
  request.name = name;
  request.arch = arch;
  return request;
}

TEST(RuntimeNvrtc, LoadsAndReportsVersionAndArchs) {
  Nvrtc& nvrtc = Nvrtc::instance();
  EXPECT_TRUE(nvrtc_loaded());
  EXPECT_TRUE(std::regex_match(nvrtc.version(), std::regex(R"(\d+\.\d+)"))) << nvrtc.version();
  std::vector<int> archs = nvrtc.supported_archs();
  EXPECT_TRUE(std::is_sorted(archs.begin(), archs.end()));
  EXPECT_NE(std::find(archs.begin(), archs.end(), 80), archs.end());
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
  EXPECT_FALSE(nvrtc.library_path().empty());
}

TEST(RuntimeNvrtc, LoadsTheLocatedLibrary) {
  const NvrtcLocation& location = locate_nvrtc();
  EXPECT_TRUE(std::filesystem::path(location.path).is_absolute()) << location.path;
  EXPECT_FALSE(location.found_by.empty());
  EXPECT_EQ(location.identity, file_identity(location.path));
  EXPECT_FALSE(location.identity.empty());
  Nvrtc& nvrtc = Nvrtc::instance();
  EXPECT_EQ(nvrtc.library_path(), location.path);
  EXPECT_EQ(nvrtc.toolkit_include_dir(), location.include_dir);
  // Once loaded, the search finds the loaded library itself.
  EXPECT_EQ(&locate_nvrtc(), &location);
}

TEST(RuntimeNvrtc, MinimalBuiltinHeaderWhenNvrtcKnowsIt) {
  Nvrtc& nvrtc = Nvrtc::instance();
  const std::vector<std::string> options = nvrtc.options_for(request_for(kTinyKernel, 90, "t.cu"));
  int major = 0, minor = 0;
  ASSERT_EQ(std::sscanf(nvrtc.version().c_str(), "%d.%d", &major, &minor), 2);
  const bool knows_minimal = major > 12 || (major == 12 && minor >= 4);
  EXPECT_EQ(std::find(options.begin(), options.end(), "-minimal") != options.end(), knows_minimal);
}

TEST(RuntimeNvrtc, CacheInputsNameEveryOptionSource) {
  const NvrtcLocation& location = locate_nvrtc();
  CompileRequest request = request_for(kTinyKernel, 90, "tiny.cu");
  request.extra_options = {"-DADJOINT_TEST_DEFINE=1"};
  const std::vector<std::string> inputs = compile_cache_inputs(request, location);
  for (const std::string expected :
       {"arch 90", "output cubin", "name tiny.cu", "option -std=c++17", "option --fmad=false",
        "option -default-device", "option -lineinfo", "option -minimal from NVRTC 12.4",
        "extra -DADJOINT_TEST_DEFINE=1"}) {
    EXPECT_NE(std::find(inputs.begin(), inputs.end(), expected), inputs.end()) << expected;
  }
  EXPECT_NE(std::find(inputs.begin(), inputs.end(), "include " + location.include_dir),
            inputs.end());
  // Every option NVRTC receives, other than -arch and -I, is named by an input.
  for (const std::string& option : Nvrtc::instance().options_for(request)) {
    if (option.starts_with("-arch=") || option.starts_with("-I")) continue;
    const bool named = std::any_of(inputs.begin(), inputs.end(), [&](const std::string& input) {
      return input.find(" " + option) != std::string::npos;
    });
    EXPECT_TRUE(named) << option;
  }
}

TEST(RuntimeNvrtc, CompilesTinyKernelToCubinForSm80AndSm90) {
  for (int arch : {80, 90}) {
    CompileResult result = Nvrtc::instance().compile(request_for(kTinyKernel, arch, "tiny.cu"));
    EXPECT_TRUE(is_elf(result.cubin)) << "sm_" << arch;
    EXPECT_TRUE(result.ptx.empty());
    EXPECT_GT(result.milliseconds, 0.0);
    ASSERT_FALSE(result.options.empty());
    EXPECT_EQ(result.options.front(), "-arch=sm_" + std::to_string(arch));
    for (const char* fixed : {"-std=c++17", "--fmad=false", "-default-device", "-lineinfo"}) {
      EXPECT_NE(std::find(result.options.begin(), result.options.end(), fixed),
                result.options.end())
          << fixed;
    }
  }
}

TEST(RuntimeNvrtc, SameRequestGivesSameCubinAndOptionsForMatchesCompile) {
  CompileRequest request = request_for(kTinyKernel, 80, "tiny.cu");
  request.extra_options = {"-DADJOINT_TEST_DEFINE=1"};
  CompileResult first = Nvrtc::instance().compile(request);
  CompileResult second = Nvrtc::instance().compile(request);
  EXPECT_EQ(first.cubin, second.cubin);
  EXPECT_EQ(first.options, Nvrtc::instance().options_for(request));
  EXPECT_EQ(first.options.back(), "-DADJOINT_TEST_DEFINE=1");
}

TEST(RuntimeNvrtc, CompilesHalfAndBfloat16Kernel) {
  const char* source = R"(
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void mix(__half* h, __nv_bfloat16* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float sum = __half2float(h[i]) + __bfloat162float(b[i]);
    h[i] = __float2half(sum);
    b[i] = __float2bfloat16(sum);
  }
}
)";
  CompileResult result = Nvrtc::instance().compile(request_for(source, 80, "half_bf16.cu"));
  EXPECT_TRUE(is_elf(result.cubin));
  // NVRTC 13 has no builtin fp16/bf16 headers: the toolkit include dir next to the library is
  // what makes this compile.
  EXPECT_FALSE(Nvrtc::instance().toolkit_include_dir().empty());
}

TEST(RuntimeNvrtc, EmbeddedTemplatesAreNamedHeaders) {
  const auto& templates = compiler::embedded_templates();
  ASSERT_FALSE(templates.empty());
  const std::string source = "#include \"" + templates.front().first + "\"\n" + kTinyKernel;
  CompileResult result = Nvrtc::instance().compile(request_for(source, 90, "with_template.cu"));
  EXPECT_TRUE(is_elf(result.cubin));

  const std::string missing =
      "#include \"no_such_adjoint_header.cuh\"\n" + std::string(kTinyKernel);
  EXPECT_THROW(Nvrtc::instance().compile(request_for(missing, 90, "missing.cu")), Error);
}

TEST(RuntimeNvrtc, PtxWhenCubinNotWanted) {
  CompileRequest request = request_for(kTinyKernel, 90, "tiny.cu");
  request.want_cubin = false;
  CompileResult result = Nvrtc::instance().compile(request);
  EXPECT_TRUE(result.cubin.empty());
  EXPECT_NE(result.ptx.find(".target sm_90"), std::string::npos);
  EXPECT_NE(result.ptx.find(".entry scale"), std::string::npos);
  EXPECT_EQ(result.options.front(), "-arch=compute_90");
}

TEST(RuntimeNvrtc, ArchNewerThanNvrtcGivesPtxForNewestSupported) {
  const int newest = Nvrtc::instance().supported_archs().back();
  CompileResult result =
      Nvrtc::instance().compile(request_for(kTinyKernel, newest + 1000, "new.cu"));
  EXPECT_TRUE(result.cubin.empty());
  EXPECT_FALSE(result.ptx.empty());
  EXPECT_EQ(result.options.front(), "-arch=compute_" + std::to_string(newest));
}

TEST(RuntimeNvrtc, UnsupportedOldArchIsInvalidArgument) {
  try {
    Nvrtc::instance().compile(request_for(kTinyKernel, 20, "old.cu"));
    FAIL() << "expected an error for sm_20";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("CompileRequest.arch"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("got 20"), std::string::npos);
  }
}

TEST(RuntimeNvrtc, EmptySourceIsInvalidArgument) {
  try {
    Nvrtc::instance().compile(request_for("", 90, "empty.cu"));
    FAIL() << "expected an error for an empty source";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(error.what()).find("CompileRequest.source"), std::string::npos);
  }
}

TEST(RuntimeNvrtc, SyntaxErrorIsCompileFailedWithFullLog) {
  const char* broken = R"(
extern "C" __global__ void broken(float* out) {
  out[0] = 1.0f
  undeclared_identifier_xyz = 3;
}
)";
  try {
    Nvrtc::instance().compile(request_for(broken, 90, "broken.cu"));
    FAIL() << "expected a compile error";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.code(), ErrorCode::kCompileFailed);
    // The log names the file and line, and every error it found.
    EXPECT_NE(message.find("broken.cu("), std::string::npos) << message;
    EXPECT_NE(message.find("expected a \";\""), std::string::npos) << message;
    EXPECT_NE(message.find("undeclared_identifier_xyz"), std::string::npos) << message;
    EXPECT_NE(message.find("-arch=sm_90"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace adjoint::runtime
