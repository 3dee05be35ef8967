// `adjoint compile SPEC --arch sm_90 [-o DIR] [--ptx]`: lowers one specialization (or, when SPEC
// says generic=AXES, the program generic in those axes, as `adjoint cuda` does) and compiles
// each kernel with NVRTC with the runtime's options (ADJOINT_TUNE_NVRTC_OPTIONS and
// ADJOINT_TUNE_BF16_CVT included, runtime::nvrtc_options_from_environment), one unit per kernel on
// ADJOINT_COMPILE_THREADS threads at once (so that each kernel's time, registers and spills can
// be reported; the runtime groups a cold program's kernels into ADJOINT_COMPILE_UNITS units,
// which this names), printing each phase's time (NVRTC load, IR, emission, compile wall and
// summed) and each kernel's registers and spills.
//
// Registers and spills come from ptxas itself: the compile adds `--ptxas-options=-v`, and
// NVRTC's log then holds ptxas's report ("Used N registers", "N bytes spill stores"). This needs
// no external tool (cuobjdump/nvdisasm are often missing where NVRTC is installed) and reports
// the very compile that produced the cubin. The option changes only the command line ptxas
// records in the cubin's notes, not its code. With PTX only (an architecture newer than NVRTC
// knows) ptxas does not run and the counts are reported as unavailable.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "runtime/engine.h"
#include "compiler/lower.h"
#include "ir/error.h"
#include "runtime/kernel_binary.h"
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
    std::erase(line, '\0');  // the log may carry its terminating NUL
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

double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// Compiles every kernel of `program` alone, on up to `threads` threads at once (as the runtime
/// does on a cold prepare); the results in kernel order, or the first kernel's error.
std::vector<runtime::CompileResult> compile_kernels(const runtime::Nvrtc& nvrtc,
                                                    const compiler::CompiledProgram& program,
                                                    int arch, int threads) {
  const size_t count = program.kernels.size();
  std::vector<runtime::CompileResult> results(count);
  std::vector<std::exception_ptr> errors(count);
  std::atomic<size_t> next{0};
  std::vector<std::string> extra = runtime::nvrtc_options_from_environment();
  extra.push_back("--ptxas-options=-v");
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) {
      const compiler::CompiledKernel& kernel = program.kernels[i];
      try {
        results[i] = nvrtc.compile(
            {kernel.source, kernel.entry + ".cu", arch, true, extra});
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads && static_cast<size_t>(t) < count; ++t) pool.emplace_back(work);
  work();
  for (std::thread& thread : pool) thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return results;
}

/// The translation units the runtime would compile a cold `program` in on `threads` threads
/// (runtime/kernel_binary.h), one line each.
void print_runtime_units(const compiler::CompiledProgram& program, int threads) {
  std::vector<size_t> kernels, sizes;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    kernels.push_back(k);
    sizes.push_back(program.kernels[k].source.size());
  }
  const int units = runtime::compile_units_from_environment(threads);
  const std::vector<std::vector<size_t>> groups =
      threads > 1 ? runtime::kernel_groups(kernels, sizes, units)
                  : std::vector<std::vector<size_t>>{kernels};
  std::cout << "runtime units on " << threads << " thread(s): " << groups.size() << "\n";
  for (size_t g = 0; g < groups.size(); ++g) {
    std::cout << "  unit " << g + 1 << ":";
    for (size_t k : groups[g]) std::cout << " " << program.kernels[k].entry;
    std::cout << "\n";
  }
}

void run_compile(const CompileCommandOptions& options) {
  SpecRequest request = parse_spec_request(join_words(options.spec));
  if (options.allow_atomics) request.determinism = compiler::Determinism::kAllowAtomics;
  const int arch = parse_arch(options.arch);
  const int threads = runtime::compile_threads_from_environment();

  auto start = std::chrono::steady_clock::now();
  const runtime::Nvrtc& nvrtc = runtime::Nvrtc::instance();
  const double load_ms = milliseconds_since(start);

  start = std::chrono::steady_clock::now();
  ir::Program ir_program = request.program();  // specialized, or generic when it says generic=
  const double build_ms = milliseconds_since(start);
  start = std::chrono::steady_clock::now();
  compiler::CompiledProgram program =
      compiler::lower(ir_program, runtime::lower_options(request.determinism, arch));
  const double lower_ms = milliseconds_since(start);

  std::filesystem::path directory(options.output_directory);
  if (!directory.empty()) std::filesystem::create_directories(directory);
  std::cout << std::fixed << std::setprecision(1);
  std::cout << "compile " << request.to_string() << "\n";
  std::cout << "target sm_" << arch << ", NVRTC " << nvrtc.version() << "; lowered to "
            << program.kernels.size() << " kernel(s) in " << lower_ms << " ms\n";

  start = std::chrono::steady_clock::now();
  std::vector<runtime::CompileResult> results = compile_kernels(nvrtc, program, arch, threads);
  const double compile_wall_ms = milliseconds_since(start);

  double total_ms = 0;
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    const compiler::CompiledKernel& kernel = program.kernels[i];
    const runtime::CompileResult& result = results[i];
    total_ms += result.milliseconds;
    const bool has_cubin = !result.cubin.empty();
    std::cout << "kernel " << kernel.entry << ": "
              << (has_cubin ? "cubin " + std::to_string(result.cubin.size()) + " bytes"
                            : "PTX only (sm_" + std::to_string(arch) + " is newer than NVRTC " +
                                  nvrtc.version() + " knows)")
              << ", compile time " << result.milliseconds << " ms\n";
    if (!kernel.size_params.empty()) {
      std::cout << "  generic: sizes (";
      for (size_t s = 0; s < kernel.size_params.size(); ++s)
        std::cout << (s ? ", " : "") << kernel.size_params[s];
      std::cout << "), grid from " << kernel.points.text() << " points\n";
    }
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
        ptx = nvrtc
                  .compile({kernel.source, kernel.entry + ".cu", arch, false,
                            runtime::nvrtc_options_from_environment()})
                  .ptx;
      }
      write_file(directory / (kernel.entry + ".compute_" + std::to_string(arch) + ".ptx"),
                 ptx.data(), ptx.size());
    }
  }
  std::cout << "total NVRTC time " << total_ms << " ms\n";
  std::cout << "phases: NVRTC load " << load_ms << " ms, IR " << build_ms
            << " ms, emission (lowering) " << lower_ms << " ms, NVRTC compile (front end, NVVM "
            << "and ptxas) " << compile_wall_ms << " ms wall on "
            << std::min<size_t>(static_cast<size_t>(threads), program.kernels.size())
            << " thread(s), " << total_ms << " ms summed\n";
  print_runtime_units(program, threads);
}

}  // namespace

void add_compile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "compile", "Lower a specialization and compile its kernels with NVRTC (cubin, optional PTX)");
  auto options = std::make_shared<CompileCommandOptions>();
  cmd->add_option("spec", options->spec,
                  "op key=value ... [determinism=allow_atomics] [generic=AXES|all] (see `adjoint "
                  "ops`)")
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
