// copy_gathered_rows_innermost: finds qualifying loads (the header's rule) with a mutator that
// tracks the enclosing reduced axes, and adds one transposed copy per tensor and order.
#include "compiler/gathered_rows_innermost.h"

#include <algorithm>
#include <map>
#include <string>
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

/// The memory sector: the unit of a global load's transfer on NVIDIA GPUs.
constexpr int64_t kSectorBytes = 32;

int64_t constant_of(const Expr& e) {
  auto* c = e.as<ir::IntConstNode>();
  return c ? c->value : -1;
}

/// Rewrites the qualifying loads of one kernel; `copy(tensor, order)` makes (or reuses) the
/// copy whose component k is the tensor's component order[k].
class RowsInnermost : public ir::ExprMutator {
 public:
  using MakeCopy = std::function<Tensor(const Tensor&, const std::vector<int>&)>;
  RowsInnermost(int64_t min_extent, std::vector<Tensor> written, MakeCopy copy)
      : min_extent_(min_extent), written_(std::move(written)), copy_(std::move(copy)) {}
  /// The points of the stage being rewritten, when sparse grids keep their loads (else -1).
  void set_points(int64_t points) { points_ = points; }

 protected:
  Expr visit_Reduce(const ir::ReduceNode& n, const Expr& self) override {
    size_t pushed = 0;
    for (const ir::Axis& axis : n.axes) {
      if (constant_of(axis.start) == 0 && constant_of(axis.extent) >= min_extent_) {
        reduced_.push_back(axis.var.get());
        ++pushed;
      }
    }
    Expr out = ExprMutator::visit_Reduce(n, self);
    reduced_.resize(reduced_.size() - pushed);
    return out;
  }

  Expr visit_Load(const ir::LoadNode& n, const Expr& self) override {
    Expr rewritten = ExprMutator::visit_Load(n, self);  // nested loads first
    if (std::find(written_.begin(), written_.end(), n.tensor) != written_.end()) return rewritten;
    const auto& load = *rewritten.as<ir::LoadNode>();
    const int rank = static_cast<int>(load.indices.size());
    for (auto r = reduced_.rbegin(); r != reduced_.rend(); ++r) {  // innermost reduction first
      int row = -1;
      bool other_uses = false, data_dependent = false;
      for (int j = 0; j < rank; ++j) {
        if (load.indices[j].as<ir::VarNode>() == *r && row < 0) {
          row = j;
        } else {
          other_uses |= depends_on(load.indices[j], *r);
          data_dependent |= reads_memory(load.indices[j]);
        }
      }
      if (row < 0 || row == rank - 1 || other_uses || !data_dependent) continue;
      if (n.tensor->shape[row] * ir::dtype_bytes(n.tensor->dtype) > kSectorBytes) continue;
      if (points_ >= 0 && points_ < n.tensor->storage_elements() / n.tensor->shape[row]) continue;
      std::vector<int> order;
      for (int j = 0; j < rank; ++j) {
        if (j != row) order.push_back(j);
      }
      order.push_back(row);
      if (laid_out(*n.tensor, order)) return rewritten;  // read in place: rows already there
      std::vector<Expr> indices;
      for (int k : order) indices.push_back(load.indices[k]);
      return ir::load(copy_(n.tensor, order), std::move(indices));
    }
    return rewritten;
  }

 private:
  int64_t min_extent_;
  std::vector<Tensor> written_;
  MakeCopy copy_;
  std::vector<const ir::VarNode*> reduced_;
  int64_t points_ = -1;
};

}  // namespace

ir::Program copy_gathered_rows_innermost(const ir::Program& program, int64_t min_extent,
                                         bool skip_sparse) {
  if (min_extent <= 0) return program;
  ir::Program out = program;
  out.kernels.clear();
  bool changed = false;
  for (const ir::Kernel& kernel : program.kernels) {
    std::vector<ir::Kernel> copies;
    std::map<std::pair<std::string, std::vector<int>>, Tensor> made;  // per kernel
    RowsInnermost mutator(min_extent, tensors_written(kernel),
                          [&](const Tensor& x, const std::vector<int>& order) {
      Tensor& copy = made[{x->name, order}];
      if (copy) return copy;
      auto [made_copy, fill] = permuted_copy(out, x, order, "_rows", "r");
      copies.push_back(std::move(fill));
      copy = made_copy;
      return copy;
    });
    ir::Kernel rewritten = kernel;
    for (ir::Stage& stage : rewritten.stages) {
      if (stage.kind != ir::StageKind::kCompute) continue;
      int64_t points = -1;
      if (skip_sparse) {
        points = 1;
        for (const ir::Axis& axis : stage.domain) {
          const int64_t extent = constant_of(axis.extent);
          points = extent < 0 ? -1 : points * extent;
          if (points < 0) break;
        }
      }
      mutator.set_points(points);
      stage.value = mutator.mutate(stage.value);
    }
    changed |= !copies.empty();
    for (ir::Kernel& c : copies) out.kernels.push_back(std::move(c));
    out.kernels.push_back(std::move(rewritten));
  }
  return changed ? out : program;
}

}  // namespace adjoint::compiler
