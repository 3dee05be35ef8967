// The emitter's loop-unroll policy: how far NVVM may unroll each reduction loop, decided from
// the loop nest's trip counts and the size of its body, so that no kernel's unrolled code (and
// with it NVRTC's compile time, which grows with it) gets large.
//
// Left to itself NVVM unrolls every loop with a constant trip count completely when it can, and
// nested loops multiply: mhc_pre_backward's dphi partials (512 trips) and dgamma partials (32 x
// 4 x 24 trips) became 395 and 474 KB cubins that took NVRTC seconds. Loops whose trip count is
// known only at run time it unrolls 4 times with a remainder loop, which for the short windows of
// a gather (upsample 203 -> 101: 2 or 3 trips) is code that never runs but that NVVM and ptxas
// still optimize (a third of that kernel's compile time).
//
// Two rules, each with its own switch (UnrollPolicy):
//   - short loops: a loop whose trip count is known only at run time but provably at most
//     kShortLoopTrips (3, below NVVM's runtime factor of 4, so its unrolled body could never
//     run) is not unrolled (`#pragma unroll 1`). Always on; the same SASS path runs either way.
//   - the budget: walking a nest from the innermost loop outwards, a loop with a constant trip
//     count is unrolled completely while the nest stays within `budget` IR nodes (trip counts
//     times the body); a longer one by the largest factor (a divisor of its trip count where one
//     is close to the largest power of two) that keeps its unrolled body within a sixteenth of
//     the budget, or not at all. It caps, it never forces: a loop within the budget keeps the
//     pragma of before. Off by default (budget 0): on the H100 it cut mhc_pre_backward's cold
//     compile from seconds to ~0.1 s but made its kernels 12-47% slower (docs/compiler.md).
// Other loops with run-time trip counts get UnrollPolicy::runtime_factor (0: NVVM's choice).
// Each decision that is not the default comes with a reason, which the emitter writes as a
// `// Schedule: unroll ...` line at the top of the kernel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/expr.h"

namespace adjoint::compiler {

/// The budget ADJOINT_TUNE_UNROLL_BUDGET=on-style tuning starts from: enough for every nest
/// that NVVM unrolled without trouble before the policy (bicubic taps: 16 x 318 nodes; mhc_dx's
/// 24 x 64, which NVVM itself unrolls less), too few for the long loops it unrolled into seconds
/// of compile time (mhc dphi partials: 512 x 64; dgamma partials: 32 x 800). Not the default
/// (UnrollPolicy::budget is 0): measurements in docs/compiler.md, "Loop unrolling".
constexpr int64_t kSuggestedUnrollBudget = 8192;
/// Loops with run-time trip counts provably at most this short are never unrolled.
constexpr int64_t kShortLoopTrips = 3;
/// A loop that cannot be unrolled completely keeps its partially unrolled body within
/// budget / kPartialBudgetDivisor nodes (512 with kSuggestedUnrollBudget: dphi partials'
/// 512-trip loop 8 times).
constexpr int64_t kPartialBudgetDivisor = 16;

struct UnrollPolicy {
  /// IR nodes an unrolled nest may hold; 0 (the default) switches the budget off: constant
  /// loops get the pragmas of before the policy.
  int64_t budget = 0;
  /// `#pragma unroll N` of loops whose trip count is known only at run time and not provably
  /// short: 0 (default) writes no pragma (NVVM unrolls them 4 times with a remainder loop:
  /// rolling them made grid_sampler_2d bicubic 38% and mhc_pre 10% slower), 1 keeps them rolled.
  int runtime_factor = 0;
};

/// What is known of one loop's trip count.
struct LoopTrips {
  std::optional<int64_t> constant;  ///< the trip count when it is a constant
  std::optional<int64_t> at_most;   ///< an upper bound otherwise, where one is known
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

/// The unrolling of a nest of loops, outermost first, from what is known of their trip counts;
/// `body_nodes` is the size of the innermost body in IR nodes, with whatever the emitter
/// replicates inside it (vector elements, window offsets) already multiplied in. With the
/// budget off, constant loops get factor -1 (the caller keeps its pragmas of before). Also
/// returns, through `nest_nodes`, the size of the nest as unrolled (a rolled loop counts its
/// body once), for an enclosing nest's body.
std::vector<LoopUnroll> choose_unrolling(const std::vector<LoopTrips>& trips, int64_t body_nodes,
                                         const UnrollPolicy& policy,
                                         int64_t* nest_nodes = nullptr);

/// An upper bound of a loop extent of the form `(x + c1) / d - (x + c2) / d` (floor division
/// by a constant d > 0, c1 >= c2, the same x): at most ceil((c1 - c2) / d), whatever x is. The
/// extents of gather windows have it (lower_scatter_to_gather); nullopt for other forms.
std::optional<int64_t> window_extent_at_most(const ir::Expr& extent);

/// The size of `e`, the body of loops over `loops`, in IR nodes as the emitter writes it once
/// they are unrolled: each node counted once however often it is shared, a select whose
/// condition depends on loop variables alone counted with its larger arm only (in an unrolled
/// copy the condition is a constant), a reduction inside as its nest unrolled under `policy`.
int64_t unrolled_size(const ir::Expr& e, const UnrollPolicy& policy,
                      const std::vector<ir::Axis>& loops);

/// The constant trip count of a reduce axis, or nullopt when its extent is not a constant.
std::optional<int64_t> constant_trips(const ir::Axis& axis);

}  // namespace adjoint::compiler
