// `adjoint compile SPEC --arch sm_90 [-o DIR] [--ptx]`: lowers one specialization and compiles
// each kernel with NVRTC exactly as the runtime does, printing the lowering and compile times
// and each kernel's registers and spills.
//
// Registers and spills come from ptxas itself: the compile adds `--ptxas-options=-v`, and
// NVRTC's log then holds ptxas's report ("Used N registers", "N bytes spill stores"). This needs
// no external tool (cuobjdump/nvdisasm are often missing where NVRTC is installed) and reports
// the very compile that produced the cubin. The option changes only the command line ptxas
// records in the cubin's notes, not its code. With PTX only (an architecture newer than NVRTC
// knows) ptxas does not run and the counts are reported as unavailable.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>

#include "runtime/engine.h"
#include "compiler/lower.h"
#include "ir/error.h"
#include "runtime/nvrtc.h"
#include "tools/commands.h"
#include "tools/spec_file.h"

namespace adjoint::tools {
namespace {

/// What ptxas reported for one entry point.
struct ResourceUsage {
  int registers = 0;
  int stack_bytes = 0;
  int spill_store_bytes = 0;
  int spill_load_bytes = 0;
};

/// Reads ptxas's verbose report for `entry` out of an NVRTC log, if it is there.
std::optional<ResourceUsage> parse_ptxas_report(const std::string& log, const std::string& entry) {
  size_t compiling = log.find("Compiling entry function '" + entry + "'");
  if (compiling == std::string::npos) return std::nullopt;
  std::string report = log.substr(compiling);
  static const std::regex registers(R"(Used (\d+) registers)");
  static const std::regex frame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  std::smatch m;
  ResourceUsage usage;
  if (!std::regex_search(report, m, registers)) return std::nullopt;
  usage.registers = std::stoi(m[1]);
  if (!std::regex_search(report, m, frame)) return std::nullopt;
  usage.stack_bytes = std::stoi(m[1]);
  usage.spill_store_bytes = std::stoi(m[2]);
  usage.spill_load_bytes = std::stoi(m[3]);
  return usage;
}

/// The NVRTC log without ptxas's informational lines (what is left are real diagnostics).
std::string diagnostics_only(const std::string& log) {
  std::istringstream lines(log);
  std::string line, kept;
  while (std::getline(lines, line)) {
    if (line.starts_with("ptxas info") || line.starts_with("ptxas         .")) continue;
    if (!line.empty()) kept += line + "\n";
  }
  return kept;
}

void write_file(const std::filesystem::path& path, const char* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data, static_cast<std::streamsize>(size));
  if (!out) throw Error("-o: cannot write " + path.string());
  std::cout << "  wrote " << path.string() << "\n";
}

struct CompileCommandOptions {
  std::vector<std::string> spec;
  std::string arch = "sm_90";
  std::string output_directory;
  bool ptx = false;
  bool allow_atomics = false;
};

void run_compile(const CompileCommandOptions& options) {
  SpecRequest request = parse_spec_request(join_words(options.spec));
  if (options.allow_atomics) request.determinism = compiler::Determinism::kAllowAtomics;
  const int arch = parse_arch(options.arch);
  const runtime::Nvrtc& nvrtc = runtime::Nvrtc::instance();

  auto start = std::chrono::steady_clock::now();
  compiler::CompiledProgram program = compiler::lower(
      request.specialization.build_program(), runtime::lower_options(request.determinism, arch));
  double lower_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  std::filesystem::path directory(options.output_directory);
  if (!directory.empty()) std::filesystem::create_directories(directory);
  std::cout << std::fixed << std::setprecision(1);
  std::cout << "compile " << request.to_string() << "\n";
  std::cout << "target sm_" << arch << ", NVRTC " << nvrtc.version() << "; lowered to "
            << program.kernels.size() << " kernel(s) in " << lower_ms << " ms\n";

  double total_ms = 0;
  for (const compiler::CompiledKernel& kernel : program.kernels) {
    runtime::CompileRequest compile{kernel.source, kernel.entry + ".cu", arch, true,
                                    {"--ptxas-options=-v"}};
    runtime::CompileResult result = nvrtc.compile(compile);
    total_ms += result.milliseconds;
    const bool has_cubin = !result.cubin.empty();
    std::cout << "kernel " << kernel.entry << ": "
              << (has_cubin ? "cubin " + std::to_string(result.cubin.size()) + " bytes"
                            : "PTX only (sm_" + std::to_string(arch) + " is newer than NVRTC " +
                                  nvrtc.version() + " knows)")
              << ", compile time " << result.milliseconds << " ms\n";
    if (auto usage = parse_ptxas_report(result.log, kernel.entry)) {
      std::cout << "  registers " << usage->registers << ", spill stores "
                << usage->spill_store_bytes << " bytes, spill loads " << usage->spill_load_bytes
                << " bytes, stack frame " << usage->stack_bytes << " bytes\n";
    } else {
      std::cout << "  registers and spills unavailable (ptxas did not run: no cubin)\n";
    }
    std::string diagnostics = diagnostics_only(result.log);
    if (!diagnostics.empty()) std::cout << "  NVRTC log:\n" << diagnostics;
    if (directory.empty()) continue;
    write_file(directory / (kernel.entry + ".cu"), kernel.source.data(), kernel.source.size());
    if (has_cubin) {
      write_file(directory / (kernel.entry + ".sm_" + std::to_string(arch) + ".cubin"),
                 result.cubin.data(), result.cubin.size());
    }
    if (options.ptx || !has_cubin) {
      std::string ptx = result.ptx;
      if (has_cubin) {
        ptx = nvrtc.compile({kernel.source, kernel.entry + ".cu", arch, false, {}}).ptx;
      }
      write_file(directory / (kernel.entry + ".compute_" + std::to_string(arch) + ".ptx"),
                 ptx.data(), ptx.size());
    }
  }
  std::cout << "total NVRTC time " << total_ms << " ms\n";
}

}  // namespace

void add_compile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compile", "Lower a specialization and compile its kernels with NVRTC (cubin, optional PTX)");
  auto options = std::make_shared<CompileCommandOptions>();
  cmd->add_option("spec", options->spec,
                  "op key=value ... [determinism=allow_atomics] (see `adjoint ops`)")
      ->required();
  cmd->add_option("--arch", options->arch, "target architecture, e.g. sm_90")
      ->default_val("sm_90");
  CLI::Option* output =
      cmd->add_option("-o,--output", options->output_directory,
                      "write each kernel's .cu and .cubin (and .ptx) into this directory");
  cmd->add_flag("--ptx", options->ptx, "also write PTX for compute_<arch> (needs -o)")
      ->needs(output);
  cmd->add_flag("--allow-atomics", options->allow_atomics,
                "lower with determinism=allow_atomics");
  cmd->callback([options] { run_compile(*options); });
}

}  // namespace adjoint::tools
