// The emitter's loop-unroll policy: how far NVVM may unroll each reduction loop, decided from
// the loop nest's trip counts and the size of its body, so that no kernel's unrolled code (and
// with it NVRTC's compile time, which grows with it) gets large.
//
// Left to itself NVVM unrolls every loop with a constant trip count completely when it can, and
// nested loops multiply: mhc_pre_backward's dphi partials (512 trips) and dgamma partials (32 x
// 4 x 24 trips) became 395 and 474 KB cubins that took NVRTC seconds. Loops whose trip count is
// known only at run time it unrolls 4 times with a remainder loop, which for the short windows of
// a gather (upsample: 2 or 3 trips) is code that never runs but that NVVM and ptxas still
// optimize. The policy walks a nest from the innermost loop outwards and keeps the number of IR
// nodes the unrolled nest holds (trip counts times the body) within a budget:
//   - a loop with a constant trip count is unrolled completely while the nest stays within the
//     budget; a longer one by the largest factor (a divisor of its trip count where one is
//     close to the largest power of two) that keeps its unrolled body within a sixteenth of the
//     budget, or not at all when not even 2 copies fit;
//   - a loop whose trip count is known only at run time is not unrolled (a rolled loop), unless
//     UnrollPolicy::runtime_factor asks for a factor (0: NVVM's own choice).
// Each decision that is not complete unrolling comes with a reason, which the emitter writes as
// a `// Schedule: unroll ...` line at the top of the kernel. Budget 0 turns the policy off: the
// emitter then writes the pragmas it wrote before the policy (complete unrolling of constant
// loops multiplying to at most 8 trips, LowerOptions::partial_unroll on longer ones).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace adjoint::compiler {

/// IR nodes an unrolled reduction nest may hold by default: enough for every nest that NVVM
/// unrolled without trouble before the policy (bicubic taps: 16 x 318 nodes; mhc_dx's 24 x 64,
/// which NVVM itself unrolls less), too few for the long loops it unrolled into seconds of
/// compile time (mhc dphi partials: 512 x 64; dgamma partials: 32 x 800). Measurements in
/// docs/compiler.md, "Loop unrolling".
constexpr int64_t kDefaultUnrollBudget = 8192;
/// A loop that cannot be unrolled completely keeps its partially unrolled body within
/// budget / kPartialBudgetDivisor nodes (512 by default: dphi partials' 512-trip loop 8 times).
constexpr int64_t kPartialBudgetDivisor = 16;

struct UnrollPolicy {
  /// IR nodes an unrolled nest may hold; 0 turns the policy off (the pragmas of before).
  int64_t budget = kDefaultUnrollBudget;
  /// `#pragma unroll N` of loops whose trip count is known only at run time: 1 (default) keeps
  /// them rolled, 0 writes no pragma (NVVM unrolls them 4 times with a remainder loop).
  int runtime_factor = 1;
};

/// How one loop is to be unrolled.
struct LoopUnroll {
  /// 0: completely (`#pragma unroll`); 1: not at all (`#pragma unroll 1`); N > 1:
  /// `#pragma unroll N`; -1: no pragma (NVVM's choice).
  int64_t factor = -1;
  /// Why, when the loop is not unrolled completely (empty otherwise).
  std::string reason;
  /// The pragma line to write before the loop, or "" for none.
  std::string pragma() const;
};

/// The unrolling of a nest of loops, outermost first: `constant_trips[i]` is loop i's constant
/// trip count, or nullopt when it is known only at run time; `body_nodes` is the size of the
/// innermost body in IR nodes, with whatever the emitter replicates inside it (vector elements,
/// window offsets) already multiplied in. Also returns, through `nest_nodes`, the size of the
/// nest as unrolled (a rolled loop counts its body once), for an enclosing nest's body.
std::vector<LoopUnroll> choose_unrolling(const std::vector<std::optional<int64_t>>& constant_trips,
                                         int64_t body_nodes, const UnrollPolicy& policy,
                                         int64_t* nest_nodes = nullptr);

/// The size of `e`, the body of loops over `loops`, in IR nodes as the emitter writes it once
/// they are unrolled: each node counted once however often it is shared, a select whose
/// condition depends on loop variables alone counted with its larger arm only (in an unrolled
/// copy the condition is a constant), a reduction inside as its nest unrolled under `policy`.
int64_t unrolled_size(const ir::Expr& e, const UnrollPolicy& policy,
                      const std::vector<ir::Axis>& loops);

/// The constant trip count of a reduce axis, or nullopt when its extent is not a constant.
std::optional<int64_t> constant_trips(const ir::Axis& axis);

}  // namespace adjoint::compiler
