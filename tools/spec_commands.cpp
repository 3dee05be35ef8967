// `adjoint ops` and `adjoint ir`: the registry and the IR of one specialization, optionally
// after every pass of the lowering (`--after-all`, the pipeline's record of each pass).
#include <iostream>

#include "runtime/engine.h"
#include "compiler/lower.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "tools/commands.h"
#include "tools/spec_file.h"

namespace adjoint::tools {
namespace {

std::string kind_name(ops::AttrKind k) {
  switch (k) {
    case ops::AttrKind::kInt: return "int";
    case ops::AttrKind::kIntList: return "ints";
    case ops::AttrKind::kFloat: return "float";
    case ops::AttrKind::kOptionalFloat: return "float|none";
    case ops::AttrKind::kBool: return "bool";
    case ops::AttrKind::kDType: return "dtype";
    case ops::AttrKind::kChoice: return "choice";
  }
  return "?";
}

}  // namespace

void add_ops_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("ops", "List every op with its attributes and defaults");
  cmd->callback([] {
    for (const ops::OpDefinition& op : ops::all_ops()) {
      std::cout << op.name << ": " << op.summary << "\n";
      for (const ops::AttrSpec& a : op.attributes) {
        std::cout << "  " << a.name << " (" << kind_name(a.kind);
        if (!a.choices.empty()) {
          std::cout << ": ";
          for (size_t i = 0; i < a.choices.size(); ++i) std::cout << (i ? "|" : "") << a.choices[i];
        }
        std::cout << ")" << (!a.default_value         ? std::string(" required")
                            : a.default_value->empty() ? std::string(" optional")
                                                       : " default=" + *a.default_value)
                  << "  " << a.doc << "\n";
      }
      for (const std::string& ex : op.examples) std::cout << "  example: " << ex << "\n";
    }
  });
}

void add_ir_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("ir", "Print the IR of a specialization");
  auto spec = std::make_shared<std::vector<std::string>>();
  auto after_all = std::make_shared<bool>(false);
  auto allow_atomics = std::make_shared<bool>(false);
  auto arch = std::make_shared<std::string>("sm_90");
  cmd->add_option("spec", *spec, "op key=value ... [determinism=allow_atomics] (see `adjoint ops`)")
      ->required();
  cmd->add_flag("--after-all", *after_all, "lower it and print the IR after every pass");
  cmd->add_flag("--allow-atomics", *allow_atomics, "lower with determinism=allow_atomics");
  cmd->add_option("--arch", *arch, "target architecture of the lowering, e.g. sm_90")
      ->default_val("sm_90");
  cmd->callback([=] {
    SpecRequest request = parse_spec_request(join_words(*spec));
    ir::Program p = request.specialization.build_program();
    ir::verify(p);
    if (!*after_all) {
      std::cout << ir::to_string(p);
      return;
    }
    compiler::LowerOptions options = runtime::lower_options(
        *allow_atomics ? compiler::Determinism::kAllowAtomics : request.determinism,
        parse_arch(*arch));
    options.record_passes = true;
    std::cout << compiler::lower(p, options).pass_dump;
  });
}

}  // namespace adjoint::tools
