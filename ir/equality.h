// Structural equality and hashing of the IR, for pass tests ("the pass produced this program")
// and for deduplicating expressions.
//
// Two expressions are structurally equal when they have the same node kinds, dtypes, operators,
// constants (floats compared bit for bit, so 0.0 != -0.0 and a NaN equals the same NaN) and
// tensors, and their variables correspond: variables bound by a reduce axis or a stage domain
// are matched pairwise, in binding order (alpha-equivalence: `sum k: x[k]` equals `sum j: x[j]`),
// and free variables must be the very same node. Name hints never matter. Tensors are equal
// when they are the same node or have the same name, dtype, shape, strides and role, so that two
// builds of one program compare equal.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "ir/program.h"

namespace adjoint::ir {

/// Equality up to renaming of bound variables (see above). Undefined equals undefined only.
bool structurally_equal(const Expr& a, const Expr& b);
/// Same kind, target, accumulation (scatter_add), domain extents, and indices, value and
/// condition equal with the two domains' variables matched axis by axis.
bool structurally_equal(const Stage& a, const Stage& b);
/// Same name, grid configuration and stages.
bool structurally_equal(const Kernel& a, const Kernel& b);
/// Same name, attributes, declared tensors (in order) and kernels.
bool structurally_equal(const Program& a, const Program& b);

/// A one-to-one correspondence of tensors, built up by structurally_equal_renaming: `forward`
/// maps a tensor of the first stage to the tensor of the second at the same place, `backward`
/// the other way.
struct TensorRenaming {
  std::unordered_map<const TensorNode*, const TensorNode*> forward, backward;
};
/// structurally_equal(Stage) with tensors matched through `renaming` instead of by name: two
/// tensors correspond when they have the same dtype, shape and strides (any name and role) and
/// neither is matched to another tensor yet; each new pair is added to `renaming`. So stages
/// that compute alike from different tensors (one iteration of a loop and the next) compare
/// equal, and `renaming` says which tensor of the one stands for which of the other. On false,
/// `renaming` may hold pairs of the failed comparison.
bool structurally_equal_renaming(const Stage& a, const Stage& b, TensorRenaming& renaming);

/// A hash consistent with structurally_equal: equal expressions hash equally. Bound variables
/// hash by their binding depth, free ones by identity.
uint64_t structural_hash(const Expr& e);
/// A hash of a stage consistent with structurally_equal_renaming: tensors count by dtype and
/// shape only (stages equal up to a renaming of tensors hash equally).
uint64_t structural_hash_up_to_tensors(const Stage& s);

}  // namespace adjoint::ir
