// find_stage_loops (stage_loops.h): candidate periods by a hash of each stage that ignores
// which tensors it names, then the renaming of tensors from each iteration to the next
// (ir::structurally_equal_renaming), chained into families.
#include "compiler/stage_loops.h"

#include <algorithm>
#include <optional>
#include <set>

#include "compiler/program_utils.h"
#include "ir/equality.h"

namespace adjoint::compiler {
namespace {

/// The tensors the stages [first, first + period) name, in order of first appearance (each
/// stage's target, then its loads in visiting order): a deterministic order for the families.
std::vector<const ir::TensorNode*> tensors_in_order(const std::vector<ir::Stage>& stages,
                                                    size_t first, size_t period) {
  std::vector<const ir::TensorNode*> order;
  std::set<const ir::TensorNode*> seen;
  auto add = [&](const ir::TensorNode* t) {
    if (seen.insert(t).second) order.push_back(t);
  };
  for (size_t s = first; s < first + period; ++s) {
    add(stages[s].target.get());
    for (const ir::Expr& root : stage_expressions(stages[s])) {
      for_each_node(root, [&](const ir::Expr& node) {
        if (auto* load = node.as<ir::LoadNode>()) add(load->tensor.get());
      });
    }
  }
  return order;
}

/// The run of at most `most` iterations of the `period` stages from `first` that the stages
/// really repeat, with its families (count 1 when not even the second iteration matches).
StageLoop grow(const std::vector<ir::Stage>& stages, size_t first, size_t period, size_t most) {
  StageLoop loop;
  loop.first = first;
  loop.period = period;
  loop.count = 1;
  const std::vector<const ir::TensorNode*> tensors = tensors_in_order(stages, first, period);
  std::vector<std::vector<const ir::TensorNode*>> members;
  std::vector<bool> invariant;
  for (const ir::TensorNode* t : tensors) members.push_back({t});
  for (size_t r = 0; r + 1 < most; ++r) {
    ir::TensorRenaming renaming;
    bool equal = true;
    for (size_t k = 0; k < period && equal; ++k) {
      equal = ir::structurally_equal_renaming(stages[first + r * period + k],
                                              stages[first + (r + 1) * period + k], renaming);
    }
    if (!equal) break;
    bool consistent = true;
    std::vector<const ir::TensorNode*> next(members.size());
    for (size_t f = 0; f < members.size() && consistent; ++f) {
      const ir::TensorNode* last = members[f].back();
      auto it = renaming.forward.find(last);
      consistent = it != renaming.forward.end();
      if (!consistent) break;
      next[f] = it->second;
      const bool same = next[f] == last;
      if (r == 0) {
        invariant.push_back(same);
      } else if (same != invariant[f]) {
        consistent = false;  // invariant so far and not now, or the other way
      }
      if (!same && std::find(members[f].begin(), members[f].end(), next[f]) != members[f].end())
        consistent = false;  // a family's tensors are distinct
    }
    if (!consistent || renaming.forward.size() != members.size()) {
      if (r == 0) invariant.clear();
      break;
    }
    for (size_t f = 0; f < members.size(); ++f) members[f].push_back(next[f]);
    loop.count = r + 2;
  }
  for (size_t f = 0; f < members.size() && loop.count > 1; ++f) {
    if (invariant[f]) {
      loop.invariant.push_back(members[f].front());
    } else {
      members[f].resize(loop.count);
      loop.families.push_back(std::move(members[f]));
    }
  }
  return loop;
}

}  // namespace

std::vector<StageLoop> find_stage_loops(const std::vector<ir::Stage>& stages) {
  const size_t n = stages.size();
  std::vector<uint64_t> hashes(n);
  for (size_t s = 0; s < n; ++s) hashes[s] = ir::structural_hash_up_to_tensors(stages[s]);
  auto same_hashes = [&](size_t a, size_t b, size_t period) {
    for (size_t k = 0; k < period; ++k) {
      if (hashes[a + k] != hashes[b + k]) return false;
    }
    return true;
  };
  std::vector<StageLoop> loops;
  size_t i = 0;
  while (i < n) {
    std::optional<StageLoop> found;
    for (size_t period = 1; period <= kMaxStageLoopPeriod && !found; ++period) {
      size_t reps = 1;
      while (i + (reps + 1) * period <= n && same_hashes(i, i + reps * period, period)) ++reps;
      if (reps < kMinStageLoopIterations) continue;
      StageLoop loop = grow(stages, i, period, reps);
      if (loop.count >= kMinStageLoopIterations) found = std::move(loop);
    }
    if (found) {
      i = found->end();
      loops.push_back(std::move(*found));
    } else {
      ++i;
    }
  }
  return loops;
}

}  // namespace adjoint::compiler
