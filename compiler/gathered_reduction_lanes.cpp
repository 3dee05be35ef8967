// lay_out_gathered_reductions_for_lanes: finds the header's reductions, reorders their axes,
// points their r-indexed loads at r-innermost copies (reused or added) and records the kernels.
#include "compiler/gathered_reduction_lanes.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "compiler/program_utils.h"
#include "ir/builder.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

using ir::Expr;
using ir::Tensor;
using ir::Var;

int64_t constant_of(const Expr& e) {
  auto* c = e.as<ir::IntConstNode>();
  return c ? c->value : -1;
}

/// The component of `load` that is `r` itself when r indexes exactly that one component, -1
/// when r indexes none, -2 when r appears otherwise (inside another index expression).
int plain_component(const ir::LoadNode& load, const ir::VarNode* r) {
  int found = -1;
  for (int j = 0; j < static_cast<int>(load.indices.size()); ++j) {
    if (load.indices[j].as<ir::VarNode>() == r) {
      if (found >= 0) return -2;
      found = j;
    } else if (depends_on(load.indices[j], r)) {
      return -2;
    }
  }
  return found;
}

/// The order (copy component k = tensor component order[k]) that moves `row` last.
std::vector<int> row_last(int rank, int row) {
  std::vector<int> order;
  for (int j = 0; j < rank; ++j) {
    if (j != row) order.push_back(j);
  }
  order.push_back(row);
  return order;
}

/// Whether `r` qualifies in `reduce` (the header's rule), given the tensors the kernel writes.
bool qualifies(const ir::ReduceNode& reduce, const ir::VarNode* r,
               const std::vector<Tensor>& written) {
  bool gathered = false, every_plain = true;
  for_each_node(reduce.body, [&](const Expr& node) {
    auto* load = node.as<ir::LoadNode>();
    if (!load) return;
    const int row = plain_component(*load, r);
    if (row == -1) return;
    if (row == -2 || std::find(written.begin(), written.end(), load->tensor) != written.end()) {
      every_plain = false;
      return;
    }
    if (row == static_cast<int>(load->indices.size()) - 1) return;
    for (int j = 0; j < static_cast<int>(load->indices.size()); ++j) {
      if (j != row && reads_memory(load->indices[j])) gathered = true;
    }
  });
  return gathered && every_plain;
}

/// Rewrites the loads of one reduction's body that `r` indexes to read r-last copies.
class RowsLast : public ir::ExprMutator {
 public:
  using MakeCopy = std::function<Tensor(const Tensor&, const std::vector<int>&)>;
  RowsLast(const ir::VarNode* r, MakeCopy copy) : r_(r), copy_(std::move(copy)) {}

 protected:
  Expr visit_Load(const ir::LoadNode& n, const Expr& self) override {
    Expr rewritten = ExprMutator::visit_Load(n, self);  // nested loads first
    const auto& load = *rewritten.as<ir::LoadNode>();
    const int rank = static_cast<int>(load.indices.size());
    const int row = plain_component(load, r_);
    if (row < 0) return rewritten;
    const std::vector<int> order = row_last(rank, row);
    if (laid_out(*load.tensor, order)) return rewritten;  // rows already contiguous
    std::vector<Expr> indices;
    for (int k : order) indices.push_back(load.indices[k]);
    return ir::load(copy_(load.tensor, order), std::move(indices));
  }

 private:
  const ir::VarNode* r_;
  MakeCopy copy_;
};

/// Rewrites the outermost reductions of a stage value that qualify.
class OutermostReductions : public ir::ExprMutator {
 public:
  OutermostReductions(int64_t min_extent, std::vector<Tensor> written, RowsLast::MakeCopy copy)
      : min_extent_(min_extent), written_(std::move(written)), copy_(std::move(copy)) {}
  /// "<axis> (<extent>)" for every reduction rewritten.
  std::vector<std::string> rewritten;

 protected:
  Expr visit_Reduce(const ir::ReduceNode& n, const Expr& self) override {
    // The widest qualifying axis (the innermost among equals).
    std::optional<size_t> best;
    for (size_t a = 0; a < n.axes.size(); ++a) {
      const int64_t extent = constant_of(n.axes[a].extent);
      if (constant_of(n.axes[a].start) != 0 || extent < min_extent_) continue;
      if (!qualifies(n, n.axes[a].var.get(), written_)) continue;
      if (!best || extent >= constant_of(n.axes[*best].extent)) best = a;
    }
    if (!best) return self;  // nested reductions stay as they are
    std::vector<ir::Axis> axes;
    for (size_t a = 0; a < n.axes.size(); ++a) {
      if (a != *best) axes.push_back(n.axes[a]);
    }
    axes.push_back(n.axes[*best]);
    RowsLast rows(n.axes[*best].var.get(), copy_);
    rewritten.push_back(n.axes[*best].var.name_hint() + " (" +
                        std::to_string(constant_of(n.axes[*best].extent)) + ")");
    return ir::ReduceNode::make(n.op, std::move(axes), rows.mutate(n.body), n.dtype);
  }

 private:
  int64_t min_extent_;
  std::vector<Tensor> written_;
  RowsLast::MakeCopy copy_;
};

/// The order of a copy kernel `t[d] = x[perm(d)]` (component k of t = component order[k] of
/// x), when `kernel` is one.
std::optional<std::pair<Tensor, std::vector<int>>> copy_of(const ir::Kernel& kernel) {
  if (kernel.stages.size() != 1) return std::nullopt;
  const ir::Stage& stage = kernel.stages[0];
  auto* load = stage.value.as<ir::LoadNode>();
  if (stage.kind != ir::StageKind::kCompute || !load ||
      stage.target->role != ir::TensorRole::kTemporary ||
      load->indices.size() != stage.domain.size()) {
    return std::nullopt;
  }
  std::vector<int> order(stage.domain.size(), -1);
  for (size_t j = 0; j < load->indices.size(); ++j) {
    auto* v = load->indices[j].as<ir::VarNode>();
    for (size_t k = 0; v && k < stage.domain.size(); ++k) {
      if (stage.domain[k].var.get() == v) order[k] = static_cast<int>(j);
    }
  }
  for (size_t k = 0; k < order.size(); ++k) {
    if (order[k] < 0 || constant_of(stage.domain[k].start) != 0 ||
        constant_of(stage.domain[k].extent) != stage.target->shape[k]) {
      return std::nullopt;
    }
  }
  return std::make_pair(load->tensor, order);
}

}  // namespace

ir::Program lay_out_gathered_reductions_for_lanes(const ir::Program& program, int64_t min_extent,
                                                  std::set<std::string>* warp_kernels,
                                                  ScheduleNotes* notes) {
  if (min_extent <= 0 || !program.sizes.empty()) return program;
  ir::Program out = program;
  out.kernels.clear();
  bool changed = false;
  for (const ir::Kernel& kernel : program.kernels) {
    if (kernel.stages.size() != 1 || kernel.stages[0].kind != ir::StageKind::kCompute ||
        kernel.grid.is_set) {
      out.kernels.push_back(kernel);
      continue;
    }
    std::vector<ir::Kernel> copies;
    std::vector<std::string> reused;
    OutermostReductions mutator(
        min_extent, tensors_written(kernel), [&](const Tensor& x, const std::vector<int>& order) {
          for (const std::vector<ir::Kernel>* list : {&out.kernels, &copies}) {
            for (const ir::Kernel& k : *list) {
              auto copy = copy_of(k);
              if (copy && copy->first == x && copy->second == order) {
                if (list == &out.kernels) reused.push_back(k.stages[0].target->name);
                return k.stages[0].target;
              }
            }
          }
          auto [copy, fill] = permuted_copy(out, x, order, "_lanes", "l");
          copies.push_back(std::move(fill));
          return copy;
        });
    ir::Kernel rewritten = kernel;
    rewritten.stages[0].value = mutator.mutate(kernel.stages[0].value);
    if (mutator.rewritten.empty()) {
      out.kernels.push_back(kernel);
      continue;
    }
    changed = true;
    if (warp_kernels) warp_kernels->insert(kernel.name);
    if (notes) {
      std::string line = kernel.name + ": gathered reduction over " +
                         mutator.rewritten.front() +
                         " laid out for warp lanes: that axis innermost, its rows contiguous";
      for (const ir::Kernel& c : copies) line += ", copy " + c.name;
      for (const std::string& r : reused) line += ", reads " + r;
      add_schedule_note(*notes, kernel.name, line);
    }
    for (ir::Kernel& c : copies) out.kernels.push_back(std::move(c));
    out.kernels.push_back(std::move(rewritten));
  }
  return changed ? out : program;
}

}  // namespace adjoint::compiler
