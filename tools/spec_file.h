// The command-line vocabulary shared by `adjoint ir`, `compile` and `aot`: one specialization
// request per text, and spec files listing many of them, plus `--arch` lists.
//
// A specialization request is the registry's syntax (ops/registry.h) with one line-level
// option that is not an op attribute, because it is a property of the lowering, not of the op:
//
//   grid_sampler_2d_backward dtype=f32 input_size=1,2,4,4 grid_size=1,3,3 determinism=allow_atomics
//
// `determinism` is `default` (the default) or `allow_atomics`; the name is reserved, no op may
// declare an attribute called so. `generic=AXES` (also reserved) asks for the program generic in
// the listed dynamic axes (ops/dynamic_ops.h, e.g. generic=input_size[0],output_size[1], or
// generic=all), the very program the runtime's dynamic-shape policy builds: a package holding it
// serves every size of those axes (docs/dynamic_shapes.md). A spec file holds one request per line; `#` starts a comment
// that runs to the end of the line, and blank lines are ignored. A request listed twice (same
// canonical text and determinism) is kept once. Errors name the file and line.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/lower.h"
#include "ops/registry.h"

namespace adjoint::tools {

/// One specialization and how it must be lowered.
struct SpecRequest {
  ops::Specialization specialization;
  compiler::Determinism determinism = compiler::Determinism::kDefault;
  std::vector<std::string> generic_axes;  ///< empty: the specialized program

  /// The IR program the request asks for: specialized, or generic in generic_axes. Throws
  /// adjoint::Error when the op has no such dynamic axis or a size is out of the generic bounds.
  ir::Program program() const;

  /// The canonical text: the specialization's text, plus " determinism=allow_atomics" when the
  /// determinism is not the default and " generic=..." for a generic request. Parsing it gives back an equal request.
  std::string to_string() const;
};

/// Parses "op key=value ... [determinism=default|allow_atomics]". Throws adjoint::Error listing
/// what is valid for an unknown op, attribute or value.
SpecRequest parse_spec_request(std::string_view text);

/// Parses the contents of a spec file; `file_name` prefixes every error as "file:line: ".
/// Each line's IR is built once, so inconsistent attributes (e.g. a wrong number of sizes) are
/// reported with their line before anything is compiled. Throws adjoint::Error when a line is
/// invalid or the file lists no specialization.
std::vector<SpecRequest> parse_spec_file(std::string_view contents, const std::string& file_name);

/// Reads and parses the spec file at `path`.
std::vector<SpecRequest> read_spec_file(const std::filesystem::path& path);

/// Parses one architecture: "sm_90", "compute_90" or "90" give 90. Throws adjoint::Error naming
/// `option` for anything else.
int parse_arch(std::string_view text, std::string_view option = "--arch");

/// Parses a comma-separated list of architectures ("sm_80,sm_90"): ascending, without
/// duplicates, never empty.
std::vector<int> parse_arch_list(std::string_view text, std::string_view option = "--arch");

/// The words of a command line's positional SPEC joined by spaces.
std::string join_words(const std::vector<std::string>& words);

}  // namespace adjoint::tools
