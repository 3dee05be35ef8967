// build_package_contents: lower, compile and gather the kernels of a package (see the header).
#include "tools/package_builder.h"

#include <algorithm>
#include <map>

#include "ir/error.h"
#include "runtime/engine.h"
#include "runtime/nvrtc.h"

namespace adjoint::tools {
namespace {

std::string join_archs(const std::vector<int>& archs) {
  std::string text;
  for (int a : archs) text += (text.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return text;
}

/// Throws unless NVRTC can emit a cubin for every architecture in `archs`.
void check_archs_supported(const runtime::Nvrtc& nvrtc, const std::vector<int>& archs) {
  std::vector<int> supported = nvrtc.supported_archs();
  for (int arch : archs) {
    if (std::find(supported.begin(), supported.end(), arch) == supported.end()) {
      throw Error("--arch: NVRTC " + nvrtc.version() + " cannot emit a cubin for sm_" +
                  std::to_string(arch) + "; it supports " + join_archs(supported) +
                  " (the package's PTX of its newest architecture serves newer devices)");
    }
  }
}

/// The package kernels being gathered, by source key, in first-seen order.
class KernelTable {
 public:
  runtime::PackageKernel& kernel_for(const compiler::CompiledKernel& kernel,
                                     const std::string& key) {
    auto [it, inserted] = index_.emplace(key, kernels_.size());
    if (inserted) kernels_.push_back(runtime::PackageKernel{kernel.entry, kernel.source, {}});
    return kernels_[it->second];
  }
  std::vector<runtime::PackageKernel> take() && { return std::move(kernels_); }

 private:
  std::map<std::string, size_t> index_;
  std::vector<runtime::PackageKernel> kernels_;
};

bool has_binary(const runtime::PackageKernel& kernel, int arch, bool is_ptx) {
  return std::any_of(kernel.binaries.begin(), kernel.binaries.end(),
                     [&](const runtime::PackageBinary& b) {
                       return b.arch == arch && b.is_ptx == is_ptx;
                     });
}

runtime::PackageBinary compile_binary(const runtime::Nvrtc& nvrtc,
                                      const compiler::CompiledKernel& kernel, int arch,
                                      bool is_ptx, double* milliseconds) {
  runtime::CompileRequest request{kernel.source, kernel.entry + ".cu", arch, !is_ptx, {}};
  runtime::CompileResult result = nvrtc.compile(request);
  *milliseconds = result.milliseconds;
  runtime::PackageBinary binary{arch, is_ptx, {}};
  if (is_ptx) {
    binary.bytes.assign(result.ptx.begin(), result.ptx.end());
  } else {
    binary.bytes = std::move(result.cubin);
  }
  return binary;
}

/// Lowers `request` for each of `archs` and adds every binary its kernels still lack.
void add_request_binaries(const runtime::Nvrtc& nvrtc, const SpecRequest& request,
                          const std::string& text, const std::vector<int>& archs,
                          KernelTable& table,
                          const std::function<void(const PackageBuildStep&)>& on_step) {
  const ir::Program program = request.program();  // specialized or generic
  for (int arch : archs) {
    compiler::CompiledProgram compiled =
        compiler::lower(program, runtime::lower_options(request.determinism, arch));
    for (const compiler::CompiledKernel& kernel : compiled.kernels) {
      const std::string key = runtime::package_kernel_key(kernel.source);
      runtime::PackageKernel& entry = table.kernel_for(kernel, key);
      std::vector<bool> wanted_ptx = {false};
      if (arch == archs.back()) wanted_ptx.push_back(true);
      for (bool is_ptx : wanted_ptx) {
        PackageBuildStep step{text, kernel.entry, key, arch, is_ptx};
        step.reused = has_binary(entry, arch, is_ptx);
        if (!step.reused) {
          entry.binaries.push_back(compile_binary(nvrtc, kernel, arch, is_ptx, &step.milliseconds));
          step.bytes = entry.binaries.back().bytes.size();
        }
        if (on_step) on_step(step);
      }
    }
  }
}

}  // namespace

runtime::PackageContents build_package_contents(
    const std::vector<SpecRequest>& requests, std::vector<int> archs,
    const std::function<void(const PackageBuildStep&)>& on_step) {
  std::sort(archs.begin(), archs.end());
  archs.erase(std::unique(archs.begin(), archs.end()), archs.end());
  if (archs.empty()) throw Error("--arch: expected at least one architecture, given none");
  if (requests.empty()) throw Error("expected at least one specialization, given none");
  const runtime::Nvrtc& nvrtc = runtime::Nvrtc::instance();
  check_archs_supported(nvrtc, archs);

  runtime::PackageContents contents;
  contents.archs = archs;
  KernelTable table;
  for (const SpecRequest& request : requests) {
    const std::string text = request.to_string();
    contents.specializations.push_back(text);
    try {
      add_request_binaries(nvrtc, request, text, archs, table, on_step);
    } catch (const Error& e) {
      throw Error("building '" + text + "': " + e.what(), e.code());
    }
  }
  contents.kernels = std::move(table).take();
  return contents;
}

}  // namespace adjoint::tools
