// The dynamic-shape policy (docs/dynamic_shapes.md): when a specialization gets a kernel
// generic in some of its op's dynamic axes (ops/dynamic_ops.h) instead of a specialized one.
//
//   never   always specialized (the behaviour before dynamic shapes)
//   batch   (default) auto, over the axes that count an outer batch only (DynamicAxis::
//           outer_batch), whose generic kernel is the specialized one with the batch as a
//           parameter (compiler/lower_outer_generic.h): as fast, bitwise the same results;
//           and over a token pair (DynamicAxis::token_pair: the per-token mHC ops' batch and
//           seq, compiler/lower_token_pair.h), both axes generic once either has varied
//   auto    the first size seen on an axis is specialized; once a second distinct size shows up
//           on a dynamic axis of the same family (the specialization with every dynamic axis
//           blanked out), that axis is generic for this and every later new specialization of
//           the family, as torch.compile's automatic dynamic shapes
//   always  every dynamic axis is generic from the first call
//
// The mode comes from ADJOINT_DYNAMIC (never|batch|auto|always, default batch) or the API
// (adjoint::set_dynamic_shapes). The policy is consulted only on an in-memory cache miss:
// a specialization already prepared keeps its program, so specialized kernels stay preferred
// where they exist.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ops/dynamic_ops.h"
#include "ops/registry.h"

namespace adjoint::runtime {

enum class DynamicMode { kNever, kBatch, kAuto, kAlways };

/// "never", "batch", "auto" or "always".
const char* dynamic_mode_name(DynamicMode mode);
/// Parses a mode; throws adjoint::Error (kInvalidArgument) naming `what` and the valid values.
DynamicMode parse_dynamic_mode(const std::string& text, const std::string& what);

/// Records the sizes seen per family and decides the generic axes of a new specialization.
class DynamicPolicy {
 public:
  /// Records `spec`'s values of `op`'s dynamic axes and returns the axes (DynamicAxis names,
  /// in the op's order) a program for it should be generic in; empty means specialized.
  std::vector<std::string> observe(const ops::Specialization& spec, const ops::DynamicOp& op,
                                   DynamicMode mode);
  /// Forgets every family (tests).
  void reset();

 private:
  std::mutex mutex_;
  /// family key -> axis name -> distinct values seen
  std::map<std::string, std::map<std::string, std::set<int64_t>>> seen_;
};

/// What a new specialization is built as: its own specialized program, or a binding of a
/// program generic in `axes`.
struct ProgramChoice {
  bool generic = false;
  std::vector<std::string> axes;
  ir::Program program;               ///< generic only: the generic IR
  std::vector<int64_t> size_values;  ///< generic only: the specialization's value of each size
  /// generic only: the cache key of the generic program, its generic key plus the index width
  /// its storage allows ("... |index32" or "... |index64").
  std::string key;
  /// generic only (mode batch): the program must lower to lower_outer_generic's kernels (one
  /// index per thread: an outer batch or a token pair); the engine specializes when it does not.
  bool require_outer_batch = false;
};

/// The choice of a program generic in `axes` for `spec` (what `adjoint aot` packages for a
/// `generic=` request, and what choose_program returns once the policy named the axes): not
/// generic when a size lies outside the generic program's bounds.
ProgramChoice generic_choice(const ops::Specialization& spec, const std::vector<std::string>& axes);

/// Asks `policy` and, for generic axes, builds the generic IR (no compile) and checks that the
/// specialization's sizes lie within its bounds (else: specialized). In mode batch, a program
/// with neither the outer-batch form (compiler::outer_batch_refusal, e.g. 64-bit storage) nor
/// the token pair's (compiler::token_pair_refusal) is specialized too. Throws what the op's build
/// throws for an invalid specialization.
ProgramChoice choose_program(const ops::Specialization& spec, DynamicPolicy& policy,
                             DynamicMode mode);

}  // namespace adjoint::runtime
