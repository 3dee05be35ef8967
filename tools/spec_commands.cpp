// `adjoint ops` and `adjoint ir`: the registry and the IR of one specialization.
#include <iostream>

#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "tools/commands.h"

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
        std::cout << ")" << (a.default_value ? " default=" + *a.default_value : " required")
                  << "  " << a.doc << "\n";
      }
      for (const std::string& ex : op.examples) std::cout << "  example: " << ex << "\n";
    }
  });
}

void add_ir_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("ir", "Print the IR of a specialization");
  auto spec = std::make_shared<std::vector<std::string>>();
  cmd->add_option("spec", *spec, "op key=value ... (see `adjoint ops`)")->required();
  cmd->callback([spec] {
    std::string text;
    for (const std::string& w : *spec) text += w + " ";
    ops::Specialization s = ops::parse_specialization(text);
    ir::Program p = s.build_program();
    ir::verify(p);
    std::cout << ir::to_string(p);
  });
}

}  // namespace adjoint::tools
