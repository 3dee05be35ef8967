// Specialization parsing and validation against an op's attribute schema. Values are stored in
// canonical text form (ints without leading zeros, shortest round-trip floats, canonical dtype
// names) so that equal specializations print, hash and cache identically.
#include "ops/registry.h"
#include "ops/shape_checks.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include "ir/error.h"

namespace adjoint::ops {
namespace {

[[noreturn]] void bad(const std::string& op, const std::string& attr, const std::string& what) {
  throw Error(op + ": attribute '" + attr + "': " + what, ErrorCode::kInvalidArgument);
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  if (s.empty()) return std::nullopt;
  std::string str(s);
  char* end = nullptr;
  double v = std::strtod(str.c_str(), &end);
  if (end != str.c_str() + str.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string kind_text(const AttrSpec& a) {
  switch (a.kind) {
    case AttrKind::kInt: return "an integer";
    case AttrKind::kIntList: return "a comma-separated list of integers";
    case AttrKind::kFloat: return "a number";
    case AttrKind::kOptionalFloat: return "a number or 'none'";
    case AttrKind::kBool: return "true or false";
    case AttrKind::kDType: return "one of " + join(a.choices);
    case AttrKind::kChoice: return "one of " + join(a.choices);
  }
  return "?";
}

/// Validates `text` for attribute `a` and returns its canonical form.
std::string canonicalize(const std::string& op, const AttrSpec& a, std::string_view text) {
  auto fail = [&]() -> std::string {
    bad(op, a.name, "expected " + kind_text(a) + ", got '" + std::string(text) + "'");
  };
  switch (a.kind) {
    case AttrKind::kInt: {
      auto v = parse_int(text);
      return v ? std::to_string(*v) : fail();
    }
    case AttrKind::kIntList: {
      std::vector<int64_t> values;
      std::string_view rest = text;
      while (!rest.empty()) {
        size_t comma = rest.find(',');
        auto v = parse_int(rest.substr(0, comma));
        if (!v) return fail();
        values.push_back(*v);
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
        if (rest.empty()) return fail();
      }
      return format_ints(values);
    }
    case AttrKind::kFloat: {
      auto v = parse_double(text);
      return v ? format_float(*v) : fail();
    }
    case AttrKind::kOptionalFloat: {
      if (text == "none" || text == "None" || text.empty()) return "none";
      auto v = parse_double(text);
      return v ? format_float(*v) : fail();
    }
    case AttrKind::kBool:
      if (text == "true" || text == "1" || text == "True") return "true";
      if (text == "false" || text == "0" || text == "False") return "false";
      return fail();
    case AttrKind::kDType: {
      auto t = ir::parse_dtype(text);
      if (!t) return fail();
      std::string name(ir::dtype_name(*t));
      for (const std::string& c : a.choices) {
        if (c == name) return name;
      }
      if (a.choices.empty()) return name;
      return fail();
    }
    case AttrKind::kChoice:
      for (const std::string& c : a.choices) {
        if (c == text) return c;
      }
      return fail();
  }
  return fail();
}

}  // namespace

std::string format_ints(const std::vector<int64_t>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out;
}

std::string format_float(double value) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, res.ptr);
}

std::string format_optional_float(std::optional<double> value) {
  return value ? format_float(*value) : "none";
}

Specialization::Specialization(const OpDefinition& op, std::map<std::string, std::string> given)
    : op_(&op) {
  for (const auto& [key, value] : given) {
    bool known = false;
    for (const AttrSpec& a : op.attributes) known |= a.name == key;
    if (!known) {
      std::vector<std::string> names;
      for (const AttrSpec& a : op.attributes) names.push_back(a.name);
      throw Error(op.name + ": unknown attribute '" + key + "'; valid attributes are " +
                      join(names),
                  ErrorCode::kInvalidArgument);
    }
  }
  for (const AttrSpec& a : op.attributes) {
    auto it = given.find(a.name);
    if (it == given.end()) {
      if (!a.default_value) {
        throw Error(op.name + ": attribute '" + a.name + "' is required (" + kind_text(a) + ")",
                    ErrorCode::kInvalidArgument);
      }
      values_[a.name] = canonicalize(op.name, a, *a.default_value);
    } else {
      values_[a.name] = canonicalize(op.name, a, it->second);
    }
  }
}

const std::string& Specialization::raw(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    throw Error(op_->name + ": no attribute named '" + name + "'", ErrorCode::kInternal);
  }
  return it->second;
}

int64_t Specialization::get_int(const std::string& name) const { return *parse_int(raw(name)); }

std::vector<int64_t> Specialization::get_ints(const std::string& name) const {
  std::vector<int64_t> out;
  std::string_view rest = raw(name);
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    out.push_back(*parse_int(rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

double Specialization::get_float(const std::string& name) const {
  return *parse_double(raw(name));
}

std::optional<double> Specialization::get_optional_float(const std::string& name) const {
  const std::string& r = raw(name);
  if (r == "none") return std::nullopt;
  return parse_double(r);
}

bool Specialization::get_bool(const std::string& name) const { return raw(name) == "true"; }

ir::DType Specialization::get_dtype(const std::string& name) const {
  return *ir::parse_dtype(raw(name));
}

const std::string& Specialization::get_choice(const std::string& name) const {
  return raw(name);
}

std::string Specialization::to_string() const {
  std::string out = op_->name;
  for (const AttrSpec& a : op_->attributes) {
    const std::string& value = values_.at(a.name);
    if (!a.print_when_default && a.default_value && value == *a.default_value) continue;
    out += " " + a.name + "=" + value;
  }
  return out;
}

ir::Program Specialization::build_program(const BuildOptions& options) const {
  ir::Program program = op_->build(*this, options);
  check_program_addressable(op_name(), program);  // every op: no shape past 64-bit indexing
  return program;
}

const OpDefinition& find_op(std::string_view name) {
  for (const OpDefinition& op : all_ops()) {
    if (op.name == name) return op;
  }
  std::vector<std::string> names;
  for (const OpDefinition& op : all_ops()) names.push_back(op.name);
  throw Error("unknown op '" + std::string(name) + "'; valid ops are " + join(names),
              ErrorCode::kInvalidArgument);
}

Specialization make_specialization(std::string_view op,
                                   std::map<std::string, std::string> values) {
  return Specialization(find_op(op), std::move(values));
}

Specialization parse_specialization(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string op;
  if (!(in >> op)) {
    throw Error("empty specialization: expected 'op key=value ...'", ErrorCode::kInvalidArgument);
  }
  const OpDefinition& def = find_op(op);
  std::map<std::string, std::string> values;
  std::string word;
  while (in >> word) {
    size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw Error(op + ": expected key=value, got '" + word + "'", ErrorCode::kInvalidArgument);
    }
    std::string key = word.substr(0, eq);
    if (values.count(key)) {
      throw Error(op + ": attribute '" + key + "' given twice", ErrorCode::kInvalidArgument);
    }
    values[key] = word.substr(eq + 1);
  }
  return Specialization(def, std::move(values));
}

}  // namespace adjoint::ops
