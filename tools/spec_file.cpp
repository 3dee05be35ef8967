// Spec requests, spec files and architecture lists (see spec_file.h for the syntax).
#include "tools/spec_file.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "ops/dynamic_ops.h"
#include "runtime/dynamic_policy.h"
#include "runtime/engine.h"

namespace adjoint::tools {
namespace {

constexpr std::string_view kDeterminismKey = "determinism=";

compiler::Determinism parse_determinism(std::string_view value) {
  if (value == "default") return compiler::Determinism::kDefault;
  if (value == "allow_atomics") return compiler::Determinism::kAllowAtomics;
  throw Error("determinism: expected default or allow_atomics, given '" + std::string(value) + "'");
}

std::string_view trim(std::string_view text) {
  const char* spaces = " \t\r\n";
  size_t first = text.find_first_not_of(spaces);
  if (first == std::string_view::npos) return {};
  size_t last = text.find_last_not_of(spaces);
  return text.substr(first, last - first + 1);
}

}  // namespace

std::string SpecRequest::to_string() const {
  std::string text = specialization.to_string();
  if (determinism == compiler::Determinism::kAllowAtomics) text += " determinism=allow_atomics";
  for (size_t i = 0; i < generic_axes.size(); ++i)
    text += (i ? "," : " generic=") + generic_axes[i];
  return text;
}

ir::Program SpecRequest::program() const {
  if (generic_axes.empty()) return specialization.build_program(runtime::build_options());
  runtime::ProgramChoice choice = runtime::generic_choice(specialization, generic_axes);
  if (!choice.generic) {
    throw Error("generic: a size of '" + specialization.to_string() +
                "' lies outside the bounds of the generic program");
  }
  return choice.program;
}

SpecRequest parse_spec_request(std::string_view text) {
  std::istringstream words{std::string(text)};
  std::string word, rest, generic_text;
  bool determinism_given = false;
  compiler::Determinism determinism = compiler::Determinism::kDefault;
  while (words >> word) {
    if (word.starts_with("generic=")) {
      if (!generic_text.empty()) throw Error("generic: given twice");
      generic_text = word.substr(8);
      if (generic_text.empty()) throw Error("generic: expected dynamic axes such as input_size[0] or all, given ''");
      continue;
    }
    if (word.starts_with(kDeterminismKey)) {
      if (determinism_given) throw Error("determinism: given twice");
      determinism = parse_determinism(std::string_view(word).substr(kDeterminismKey.size()));
      determinism_given = true;
      continue;
    }
    rest += word + " ";
  }
  SpecRequest request{ops::parse_specialization(rest), determinism, {}};
  if (generic_text.empty()) return request;
  const ops::DynamicOp* op = ops::find_dynamic_op(request.specialization.op_name());
  std::string valid;
  if (op) {
    for (const ops::DynamicAxis& axis : op->axes) valid += (valid.empty() ? "" : ",") + axis.name();
  }
  if (!op) {
    throw Error("generic: " + request.specialization.op_name() +
                " has no dynamic axes (it is always specialized)");
  }
  std::istringstream names(generic_text == "all" ? valid : generic_text);
  for (std::string name; std::getline(names, name, ',');) {
    if (("," + valid + ",").find("," + name + ",") == std::string::npos)
      throw Error("generic: expected dynamic axes among " + valid + " or all, given '" + name + "'");
    // in the op's order, each once
    if (std::find(request.generic_axes.begin(), request.generic_axes.end(), name) ==
        request.generic_axes.end())
      request.generic_axes.push_back(name);
  }
  std::vector<std::string> ordered;
  for (const ops::DynamicAxis& axis : op->axes) {
    if (std::find(request.generic_axes.begin(), request.generic_axes.end(), axis.name()) !=
        request.generic_axes.end())
      ordered.push_back(axis.name());
  }
  request.generic_axes = ordered;
  return request;
}

std::vector<SpecRequest> parse_spec_file(std::string_view contents, const std::string& file_name) {
  std::vector<SpecRequest> requests;
  std::set<std::string> seen;
  std::istringstream lines{std::string(contents)};
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::string_view text = trim(std::string_view(line).substr(0, line.find('#')));
    if (text.empty()) continue;
    try {
      SpecRequest request = parse_spec_request(text);
      request.program();  // shape errors surface here, before any compile
      if (seen.insert(request.to_string()).second) requests.push_back(std::move(request));
    } catch (const Error& e) {
      throw Error(file_name + ":" + std::to_string(number) + ": " + e.what(), e.code());
    }
  }
  if (requests.empty()) {
    throw Error(file_name + ": expected at least one specialization ('op key=value ...' per "
                "line), found none");
  }
  return requests;
}

std::vector<SpecRequest> read_spec_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("spec file '" + path.string() + "': cannot be read");
  std::ostringstream contents;
  contents << in.rdbuf();
  return parse_spec_file(contents.str(), path.string());
}

int parse_arch(std::string_view text, std::string_view option) {
  std::string_view digits = text;
  for (std::string_view prefix : {"sm_", "compute_"}) {
    if (digits.starts_with(prefix)) digits.remove_prefix(prefix.size());
  }
  int arch = 0;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), arch);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() ||
      arch < 10) {
    throw Error(std::string(option) + ": expected an architecture such as sm_90 (or 90), given '" +
                std::string(text) + "'");
  }
  return arch;
}

std::vector<int> parse_arch_list(std::string_view text, std::string_view option) {
  std::vector<int> archs;
  std::istringstream items{std::string(text)};
  std::string item;
  while (std::getline(items, item, ',')) {
    std::string_view trimmed = trim(item);
    if (!trimmed.empty()) archs.push_back(parse_arch(trimmed, option));
  }
  if (archs.empty()) {
    throw Error(std::string(option) + ": expected a comma-separated list such as sm_80,sm_90, "
                "given '" + std::string(text) + "'");
  }
  std::sort(archs.begin(), archs.end());
  archs.erase(std::unique(archs.begin(), archs.end()), archs.end());
  return archs;
}

std::string join_words(const std::vector<std::string>& words) {
  std::string text;
  for (const std::string& w : words) text += (text.empty() ? "" : " ") + w;
  return text;
}

}  // namespace adjoint::tools
