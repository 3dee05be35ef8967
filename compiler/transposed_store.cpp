// transposed_store: the matcher of writer/copy pairs whose copy the writer performs itself (the
// header says what qualifies; emit_statements.cpp and emit_vector_groups.cpp emit the staging
// and the epilogue).
#include "compiler/transposed_store.h"

#include <algorithm>
#include <optional>

#include "compiler/launch_geometry.h"
#include "compiler/program_utils.h"

namespace adjoint::compiler {
namespace {

bool contains(const std::vector<ir::Tensor>& tensors, const ir::Tensor& t) {
  return std::find(tensors.begin(), tensors.end(), t) != tensors.end();
}

/// True when `t` is dense row-major (strides the suffix products of its shape).
bool row_major(const ir::TensorNode& t) {
  int64_t stride = 1;
  for (int k = t.rank(); k-- > 0;) {
    if (t.shape[k] > 1 && t.strides[k] != stride) return false;
    stride *= t.shape[k];
  }
  return true;
}

}  // namespace

TransposedStores choose_transposed_stores(const ir::Program& program,
                                          const TiledTransposes& transposes, bool direct) {
  TransposedStores out;
  if (!program.sizes.empty()) return out;
  for (size_t k = 0; k + 1 < program.kernels.size(); ++k) {
    const ir::Kernel& writer = program.kernels[k];
    const ir::Kernel& copy = program.kernels[k + 1];
    if (writer.stages.size() != 1) continue;
    // The copy: a tiled transposition, or (direct stores) any transposition.
    std::optional<TiledTranspose> matched;
    if (auto tiled = transposes.find(copy.name); tiled != transposes.end()) {
      matched = tiled->second;
    } else if (direct) {
      matched = match_tiled_transpose(copy, 1);
    }
    if (!matched) continue;
    const TiledTranspose& t = *matched;
    const ir::Stage& stage = writer.stages[0];
    const ir::Tensor& g = stage.target;
    if (stage.kind != ir::StageKind::kCompute || g->name != t.source ||
        g->role != ir::TensorRole::kTemporary || g->is_dynamic() || !row_major(*g)) {
      continue;
    }
    // G dense as the copy reads it: [b][p][q] with q innermost.
    if (t.source_column_stride != 1 || t.source_row_stride != t.columns ||
        (t.batches > 1 && t.source_batch_stride != t.rows * t.columns) ||
        t.batches * t.rows * t.columns != g->storage_elements()) {
      continue;
    }
    const ir::Tensor target = program.find_tensor(t.target);
    if (!target || contains(kernel_tensors(program, writer), target)) continue;
    bool others = false;  // another kernel reads or writes G
    for (size_t j = 0; j < program.kernels.size(); ++j) {
      if (j == k || j == k + 1) continue;
      const ir::Kernel& other = program.kernels[j];
      others |= contains(tensors_read(other), g) || contains(tensors_written(other), g);
    }
    if (others || contains(tensors_read(writer), g)) continue;
    // The writer's grid: every axis linear, in G's order, one step, full blocks.
    const ir::GridConfig& grid = writer.grid;
    if (!grid.is_set || writer.row_axes > 0 || grid.block_tokens > 0 ||
        grid.reduction_lanes != 1 || grid.tile_points > 1 || grid.vector_width < 1 ||
        static_cast<int>(stage.domain.size()) != g->rank()) {
      continue;
    }
    if (!std::all_of(grid.bindings.begin(), grid.bindings.end(),
                     [](ir::AxisBinding b) { return b == ir::AxisBinding::kLinear; })) {
      continue;
    }
    const std::vector<int64_t> extents = domain_extents(writer);
    if (extents != g->shape) continue;
    const GridMapping m = grid_mapping(writer);
    // The linear index decodes G's components in order (axes of one point anywhere).
    std::vector<int> wide, order;
    for (int a : m.linear_axes) {
      if (extents[a] > 1) wide.push_back(a);
    }
    for (int a = 0; a < g->rank(); ++a) {
      if (extents[a] > 1) order.push_back(a);
    }
    if (wide != order || m.linear_axes.size() != extents.size()) continue;
    // Direct: every group a whole row of G (its C channels), so the thread writes them itself.
    if (direct && grid.vector_width == t.columns && t.columns >= 2 &&
        extents[static_cast<size_t>(g->rank() - 1)] == t.columns) {
      TransposedStore store;
      store.transpose = t;
      store.copy_kernel = copy.name;
      store.block_elements = int64_t{grid.block_size} * grid.vector_width;
      store.direct = true;
      out[writer.name] = store;
      ++k;  // the copy is taken
      continue;
    }
    if (!transposes.count(copy.name)) continue;  // staging: tiled copies only
    const int64_t block = grid.block_size;
    const LaunchDims launch = launch_dims(writer);
    if (block <= 0 || m.linear_points % block != 0 ||
        int64_t{launch.grid[0]} * block < m.linear_points || launch.grid[1] != 1 ||
        launch.grid[2] != 1 || int64_t{launch.block[0]} != block) {
      continue;
    }
    const int64_t elements = block * grid.vector_width;
    if (elements % t.columns != 0) continue;
    const int64_t staging =
        elements / t.columns * (t.columns + 1) * static_cast<int64_t>(ir::dtype_bytes(g->dtype));
    if (staging > kMaxStagingBytes) continue;
    TransposedStore store;
    store.transpose = t;
    store.copy_kernel = copy.name;
    store.block_elements = elements;
    out[writer.name] = store;
    ++k;  // the copy is taken
  }
  return out;
}

}  // namespace adjoint::compiler
