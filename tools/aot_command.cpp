// `adjoint aot SPECFILE --arch sm_80,sm_90 -o PKG`: builds a kernel package (runtime/package.h)
// from a spec file (tools/spec_file.h): a cubin of every kernel for every listed architecture,
// PTX of the newest one for newer devices, the CUDA sources and the manifest.
//
// An existing package at PKG is replaced (its manifest.json, bin/ and sources/ are removed
// first, so no stale binary survives); any other non-empty directory is refused rather than
// written into.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "ir/error.h"
#include "runtime/nvrtc.h"
#include "runtime/package.h"
#include "tools/commands.h"
#include "tools/package_builder.h"
#include "tools/spec_file.h"

namespace adjoint::tools {
namespace {

namespace fs = std::filesystem;

struct AotCommandOptions {
  std::string spec_file;
  std::string archs;
  std::string output_directory;
};

/// Makes `directory` ready to receive a package: absent, empty, or an old package (cleared).
void prepare_package_directory(const fs::path& directory) {
  if (!fs::exists(directory)) return;
  if (!fs::is_directory(directory)) {
    throw Error("-o: expected a directory for the package, given the file " + directory.string());
  }
  if (fs::is_empty(directory)) return;
  if (!fs::exists(directory / "manifest.json")) {
    throw Error("-o: " + directory.string() +
                " is a non-empty directory without a manifest.json (not a kernel package); "
                "refusing to write into it");
  }
  for (const char* name : {"manifest.json", "bin", "sources"}) fs::remove_all(directory / name);
}

std::string kib(size_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << bytes / 1024.0 << " KiB";
  return out.str();
}

void run_aot(const AotCommandOptions& options) {
  std::vector<SpecRequest> requests = read_spec_file(options.spec_file);
  std::vector<int> archs = parse_arch_list(options.archs);
  fs::path directory(options.output_directory);
  std::cout << "aot: " << requests.size() << " specialization(s) from " << options.spec_file
            << " for";
  for (int a : archs) std::cout << " sm_" << a;
  std::cout << " (+ compute_" << archs.back() << " PTX), NVRTC "
            << runtime::Nvrtc::instance().version() << "\n";

  size_t binaries = 0;
  double total_ms = 0;
  std::string current_spec;
  runtime::PackageContents contents =
      build_package_contents(requests, archs, [&](const PackageBuildStep& step) {
        if (step.spec != current_spec) std::cout << "  " << (current_spec = step.spec) << "\n";
        std::cout << "    " << (step.is_ptx ? "compute_" : "sm_") << step.arch << " "
                  << step.entry << ": ";
        if (step.reused) {
          std::cout << "same source as an earlier kernel, reused\n";
          return;
        }
        ++binaries;
        total_ms += step.milliseconds;
        std::cout << (step.is_ptx ? "PTX " : "cubin ") << kib(step.bytes) << " in " << std::fixed
                  << std::setprecision(1) << step.milliseconds << " ms\n";
      });
  prepare_package_directory(directory);
  runtime::write_package(directory, contents);
  std::cout << "wrote " << (directory / "manifest.json").string() << ": " << contents.kernels.size()
            << " kernel(s), " << binaries << " binaries, NVRTC time " << std::fixed
            << std::setprecision(1) << total_ms << " ms\n";
}

}  // namespace

void add_aot_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "aot", "Build a kernel package (cubins per architecture, PTX, sources, manifest) from a "
             "spec file");
  auto options = std::make_shared<AotCommandOptions>();
  cmd->add_option("specfile", options->spec_file,
                  "one specialization per line ('op key=value ... [determinism=allow_atomics]'; "
                  "# comments)")
      ->required();
  cmd->add_option("--arch", options->archs, "comma-separated architectures, e.g. sm_80,sm_90")
      ->required();
  cmd->add_option("-o,--output", options->output_directory, "the package directory to write")
      ->required();
  cmd->callback([options] { run_aot(*options); });
}

}  // namespace adjoint::tools
