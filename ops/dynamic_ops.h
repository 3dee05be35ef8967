// Dynamic axes of ops (docs/dynamic_shapes.md): which extents of a specialization may be
// dynamic, and how an op builds a program generic in a subset of them. An op that declares
// nothing here is always specialized. The runtime's policy (runtime/dynamic_policy.h) reads
// this table; the ops themselves stay in their own files.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/program.h"
#include "ops/registry.h"

namespace adjoint::ops {

/// An extent of a specialization that may be dynamic: element `index` of the int-list
/// attribute `attribute`, e.g. input_size[0], the batch of upsample, or (index -1) the int
/// attribute `attribute` itself, e.g. seq, the sequence length of mHC.
struct DynamicAxis {
  std::string attribute;
  int index = 0;  ///< -1: a scalar int attribute
  std::string meaning;  ///< "batch", "input H", ...
  /// The axis counts an outer batch: outermost in memory and in no index math, so its generic
  /// program is the specialized kernel with the count as a parameter
  /// (compiler/lower_outer_generic.h), as fast as the specialized one. ADJOINT_DYNAMIC=batch
  /// makes only such axes generic.
  bool outer_batch = false;
  /// The axis is one of a token pair (mHC's batch and seq over one contiguous token axis, in no
  /// index math of the op's stages: compiler/lower_token_pair.h), whose generic program is the
  /// specialized kernel with B * S tokens as a parameter, as fast as the specialized one.
  /// ADJOINT_DYNAMIC=batch makes such axes generic together, both once either has varied.
  bool token_pair = false;

  /// "input_size[0]" (or "seq" for a scalar): the axis' name in generic keys, size parameters
  /// and dumps.
  std::string name() const {
    return index < 0 ? attribute : attribute + "[" + std::to_string(index) + "]";
  }
  /// The axis' value in `spec`, or nullopt when the spec has no such element (the op's build
  /// rejects it).
  std::optional<int64_t> value(const Specialization& spec) const;
};

/// The dynamic declaration of one op.
struct DynamicOp {
  std::vector<DynamicAxis> axes;
  /// Builds the program generic in `generic_axes` (names from DynamicAxis::name()); every other
  /// extent keeps the specialization's value. Validates the specialization like the op's build.
  std::function<ir::Program(const Specialization&, const std::vector<std::string>&)> build_generic;
};

/// The declaration of op `name`, or nullptr when the op is always specialized.
const DynamicOp* find_dynamic_op(std::string_view name);

/// The value of each size parameter of generic `program` for `spec` (read from the attribute
/// each SizeParam::source names), in the order of program.sizes.
std::vector<int64_t> size_values(const ir::Program& program, const Specialization& spec);

/// The generic key of `spec`: its canonical text with the value of each generic axis written
/// `?` (e.g. "upsample_nearest2d_backward dtype=f32 input_size=?,3,?,? output_size=?,?",
/// "mhc_pre_backward batch=? seq=? n=4 dim=4096 ..."), so the key says which axes are generic.
std::string generic_key(const Specialization& spec, const std::vector<std::string>& generic_axes);

}  // namespace adjoint::ops
