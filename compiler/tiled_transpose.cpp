// tiled_transpose: the matcher of batched transpositions (the header says what qualifies).
#include "compiler/tiled_transpose.h"

#include <vector>

namespace adjoint::compiler {
namespace {

int64_t constant_of(const ir::Expr& e) {
  auto* c = e.as<ir::IntConstNode>();
  return c ? c->value : -1;
}

/// A merged group of components: their product and the stride of the innermost one, or
/// nothing when they are not dense (each component's stride = the next one's x its extent).
struct Group {
  int64_t extent = 1, stride = 0;
};
std::optional<Group> merge(const ir::Tensor& t, const std::vector<int>& components) {
  Group g;
  if (components.empty()) return g;
  g.stride = t->strides[components.back()];
  for (size_t i = 0; i < components.size(); ++i) {
    const int c = components[i];
    g.extent *= t->shape[c];
    if (i + 1 < components.size()) {
      const int next = components[i + 1];
      if (t->strides[c] != t->strides[next] * t->shape[next]) return std::nullopt;
    }
  }
  return g;
}

}  // namespace

std::optional<TiledTranspose> match_tiled_transpose(const ir::Kernel& kernel,
                                                    int64_t min_extent) {
  if (min_extent <= 0 || kernel.stages.size() != 1) return std::nullopt;
  const ir::Stage& stage = kernel.stages[0];
  if (stage.kind != ir::StageKind::kCompute || stage.condition.defined()) return std::nullopt;
  const ir::Tensor& y = stage.target;
  auto* load = stage.value.as<ir::LoadNode>();
  if (!load) return std::nullopt;
  const ir::Tensor& x = load->tensor;
  if (x == y || x->dtype != y->dtype || x->is_dynamic() || y->is_dynamic() ||
      x->rank() != y->rank() || static_cast<int>(stage.domain.size()) != y->rank()) {
    return std::nullopt;
  }
  const int rank = y->rank();
  for (int k = 0; k < rank; ++k) {
    const ir::Axis& axis = stage.domain[k];
    if (constant_of(axis.start) != 0 || constant_of(axis.extent) != y->shape[k]) {
      return std::nullopt;
    }
  }
  // y_of[j]: the target component that source component j's index variable names.
  std::vector<int> y_of(rank, -1);
  std::vector<bool> named(rank, false);
  for (int j = 0; j < rank; ++j) {
    auto* v = load->indices[j].as<ir::VarNode>();
    if (!v) return std::nullopt;
    for (int k = 0; k < rank; ++k) {
      if (stage.domain[k].var.get() == v) y_of[j] = k;
    }
    if (y_of[j] < 0 || named[y_of[j]]) return std::nullopt;
    named[y_of[j]] = true;
  }
  // Components of one element take no part in the layout.
  std::vector<int> xs;  // source components of more than one element, in source order
  for (int j = 0; j < rank; ++j) {
    if (x->shape[j] > 1) xs.push_back(j);
  }
  const int m = static_cast<int>(xs.size());
  std::vector<int> ranks(m);  // each one's position among the target's components of xs
  for (int i = 0; i < m; ++i) {
    ranks[i] = 0;
    for (int l = 0; l < m; ++l) ranks[i] += y_of[xs[l]] < y_of[xs[i]];
  }
  // Source = [batch | P | Q], target = [batch | Q | P].
  for (int a = 0; a < m; ++a) {
    for (int b = a + 1; b < m; ++b) {
      bool fits = true;
      for (int i = 0; i < m && fits; ++i) {
        const int expected = i < a ? i : i < b ? i + (m - b) : i - (b - a);
        fits = ranks[i] == expected;
      }
      if (!fits) continue;
      std::vector<int> batch(xs.begin(), xs.begin() + a), rows(xs.begin() + a, xs.begin() + b),
          columns(xs.begin() + b, xs.end());
      auto in_target = [&](const std::vector<int>& group) {
        std::vector<int> components;
        for (int j : group) components.push_back(y_of[j]);
        return components;
      };
      auto sb = merge(x, batch), sp = merge(x, rows), sq = merge(x, columns);
      auto tb = merge(y, in_target(batch)), tp = merge(y, in_target(rows)),
           tq = merge(y, in_target(columns));
      if (!sb || !sp || !sq || !tb || !tp || !tq) return std::nullopt;
      if (sp->extent < min_extent || sq->extent < min_extent) return std::nullopt;
      TiledTranspose t;
      t.source = x->name;
      t.target = y->name;
      t.batches = sb->extent;
      t.rows = sp->extent;
      t.columns = sq->extent;
      t.source_batch_stride = sb->stride;
      t.source_row_stride = sp->stride;
      t.source_column_stride = sq->stride;
      t.target_batch_stride = tb->stride;
      t.target_row_stride = tp->stride;
      t.target_column_stride = tq->stride;
      return t;
    }
  }
  return std::nullopt;
}

TiledTransposes choose_tiled_transposes(const ir::Program& program, int64_t min_extent) {
  TiledTransposes out;
  if (!program.sizes.empty()) return out;
  for (const ir::Kernel& kernel : program.kernels) {
    if (auto t = match_tiled_transpose(kernel, min_extent)) out[kernel.name] = *t;
  }
  return out;
}

}  // namespace adjoint::compiler
