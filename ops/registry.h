// The op registry: every backward op adjoint ships, with its attribute schema, and the one
// textual specialization syntax shared by the CLI, AOT spec files and cache keys:
//
//   upsample_nearest2d_backward dtype=bf16 input_size=8,64,128,128 output_size=256,256
//
// A Specialization is an op name plus attribute values, validated against the op's schema and
// completed with defaults; its canonical text (attributes in schema order) is a stable key.
// Op families register themselves in ops/all_ops.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"
#include "ir/program.h"
#include "ops/build_options.h"

namespace adjoint::ops {

enum class AttrKind {
  kInt,            ///< 42
  kIntList,        ///< 8,64,128,128 (may be empty: "")
  kFloat,          ///< 1.5
  kOptionalFloat,  ///< 1.5 or "none"
  kBool,           ///< true/false (also 1/0)
  kDType,          ///< f16, bf16, f32, f64 (PyTorch spellings accepted)
  kChoice,         ///< one of `choices`
};

struct AttrSpec {
  std::string name;
  AttrKind kind;
  /// Canonical default text; std::nullopt means the attribute is required.
  std::optional<std::string> default_value;
  std::string doc;
  std::vector<std::string> choices;  ///< kChoice: valid values; kDType: allowed dtypes
  /// False: the canonical text leaves the attribute out while it has its default, so that an
  /// attribute added later keeps the text (and cache keys) of specializations without it.
  bool print_when_default = true;
};

class Specialization;

/// Builds the IR program for a validated specialization under `options` (ops/build_options.h).
/// Throws adjoint::Error (kind kInvalidArgument) naming the attribute when the values are
/// inconsistent.
using BuildFunction = std::function<ir::Program(const Specialization&, const BuildOptions&)>;

/// The BuildFunction of an op whose IR depends on its attributes alone.
inline BuildFunction built_from_attributes(ir::Program (*build)(const Specialization&)) {
  return [build](const Specialization& spec, const BuildOptions&) { return build(spec); };
}

struct OpDefinition {
  std::string name;
  std::string summary;
  std::vector<AttrSpec> attributes;
  BuildFunction build;
  /// Example specialization texts (used by the CLI, docs and the compile tests).
  std::vector<std::string> examples;
};

/// An op and its attribute values (canonical text, defaults filled in), validated.
class Specialization {
 public:
  Specialization(const OpDefinition& op, std::map<std::string, std::string> values);
  const OpDefinition& op() const { return *op_; }
  const std::string& op_name() const { return op_->name; }

  int64_t get_int(const std::string& name) const;
  std::vector<int64_t> get_ints(const std::string& name) const;
  double get_float(const std::string& name) const;
  std::optional<double> get_optional_float(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  ir::DType get_dtype(const std::string& name) const;
  const std::string& get_choice(const std::string& name) const;
  const std::string& raw(const std::string& name) const;

  /// "op a=1 b=2,3 ..." with attributes in schema order: the canonical text and cache key.
  std::string to_string() const;
  /// Builds the op's IR program; `options` as the runtime's knobs give them
  /// (runtime::build_options()) wherever the program is to match what the runtime runs.
  ir::Program build_program(const BuildOptions& options = {}) const;

 private:
  const OpDefinition* op_;
  std::map<std::string, std::string> values_;
};

/// All registered ops, in a stable order.
const std::vector<OpDefinition>& all_ops();
/// The op with this name; throws adjoint::Error listing the valid names if there is none.
const OpDefinition& find_op(std::string_view name);
/// Parses "op key=value key=value ..."; unknown attributes or bad values are errors that list
/// what is valid.
Specialization parse_specialization(std::string_view text);
/// Builds a specialization from an op name and raw attribute texts.
Specialization make_specialization(std::string_view op, std::map<std::string, std::string> values);

// Formatting helpers for building specializations from typed arguments.
std::string format_ints(const std::vector<int64_t>& values);
std::string format_float(double value);
std::string format_optional_float(std::optional<double> value);

}  // namespace adjoint::ops
