// What `adjoint aot` does before it writes anything: lowers every requested specialization for
// every listed architecture, compiles each kernel with NVRTC to a cubin per architecture and to
// PTX for the newest one, and gathers the results as runtime::PackageContents, ready for
// runtime::write_package (runtime/package.h owns the on-disk format).
//
// Lowering depends on the target architecture, so a kernel may lower to different CUDA source
// for different architectures. Kernels are keyed by their source (runtime::package_kernel_key,
// the key the runtime looks up), so each distinct source is one package kernel holding the
// binaries of the architectures that produced it; a source shared by several specializations or
// architectures is compiled once per binary. The PTX goes with the source lowered for the
// newest listed architecture; a newer device finds it when the runtime lowers the same source.
//
// Lives in tools/ (used by the CLI) and is also compiled into tests/unit/package_test.cpp, so
// the round-trip test runs exactly the code path of `adjoint aot`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/package.h"
#include "tools/spec_file.h"

namespace adjoint::tools {

/// One binary produced while building a package, reported as it is made.
struct PackageBuildStep {
  std::string spec;    ///< the request's canonical text
  std::string entry;   ///< the kernel's entry point
  std::string key;     ///< runtime::package_kernel_key of its source
  int arch = 0;
  bool is_ptx = false;
  bool reused = false;      ///< an identical source was already compiled for this binary
  size_t bytes = 0;
  double milliseconds = 0;  ///< NVRTC wall time (0 when reused)
};

/// Builds the contents of a package covering `requests` on `archs` (any order; the newest also
/// gets PTX). Throws adjoint::Error when NVRTC cannot emit a cubin for one
/// of `archs`, when a specialization fails to lower, or when NVRTC rejects a kernel.
runtime::PackageContents build_package_contents(
    const std::vector<SpecRequest>& requests, std::vector<int> archs,
    const std::function<void(const PackageBuildStep&)>& on_step = {});

}  // namespace adjoint::tools
