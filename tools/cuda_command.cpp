// `adjoint cuda SPEC`: lowers a specialization and prints each kernel's CUDA source with its
// launch facts; `--after-all` first prints the IR after every pass (the pipeline's dump).
#include <iostream>

#include "runtime/engine.h"
#include "compiler/lower.h"
#include "ops/registry.h"
#include "tools/commands.h"
#include "tools/spec_file.h"

namespace adjoint::tools {
namespace {

std::string dims(const uint32_t (&d)[3]) {
  return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " + std::to_string(d[2]) +
         ")";
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out;
}

}  // namespace

void add_cuda_command(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("cuda", "Lower a specialization and print each kernel's CUDA source");
  auto spec = std::make_shared<std::vector<std::string>>();
  auto after_all = std::make_shared<bool>(false);
  auto allow_atomics = std::make_shared<bool>(false);
  auto arch = std::make_shared<int>(90);
  cmd->add_option("spec", *spec,
                  "op key=value ... [determinism=allow_atomics] [generic=AXES|all] (see `adjoint "
                  "ops`)")
      ->required();
  cmd->add_flag("--after-all", *after_all, "print the IR after every pass first");
  cmd->add_flag("--allow-atomics", *allow_atomics, "lower with Determinism::kAllowAtomics");
  cmd->add_option("--arch", *arch, "target compute capability, e.g. 80 or 90")->default_val(90);
  cmd->callback([=] {
    SpecRequest request = parse_spec_request(join_words(*spec));  // may say generic=AXES
    compiler::LowerOptions options = runtime::lower_options(
        *allow_atomics ? compiler::Determinism::kAllowAtomics : request.determinism, *arch);
    options.record_passes = *after_all;
    compiler::CompiledProgram program = compiler::lower(request.program(), options);
    if (*after_all) std::cout << program.pass_dump;
    std::cout << "// program " << program.name << ": " << program.kernels.size() << " kernel(s), "
              << (program.deterministic ? "deterministic" : "not deterministic (atomics)") << "\n";
    for (const compiler::CompiledKernel& k : program.kernels) {
      std::cout << "// ===== kernel " << k.entry << ": grid "
                << (k.size_params.empty() ? dims(k.launch.grid)
                                          : "from " + k.points.text() + " points")
                << ", block " << dims(k.launch.block) << ", params (" << join(k.params) << ")";
      if (!k.size_params.empty()) std::cout << ", sizes (" << join(k.size_params) << ")";
      if (!k.zero_before.empty()) std::cout << ", zero before (" << join(k.zero_before) << ")";
      std::cout << "\n" << k.source;
    }
  });
}

}  // namespace adjoint::tools
