// lower_scatter_to_binned_gather: finds eligible scatters, splits their domain into broadcast
// and record axes, and replaces each by the count / scan / fill / sort / gather kernels the
// header describes, in the broadcast-innermost layout where the broadcast axes are wide.
#include "compiler/lower_scatter_to_binned_gather.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "compiler/binned_taps.h"
#include "compiler/program_utils.h"
#include "compiler/simplify.h"
#include "ir/builder.h"
#include "ir/equality.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;
using ir::Tensor;
using ir::Var;

/// Terms one thread of a scan level adds at most (the chunk of the level below it).
constexpr int64_t kScanChunk = 32;
/// The most taps a tap axis may have to move into the gather (bicubic's 16, trilinear's 8).
constexpr int64_t kMaxTaps = 64;

/// A scatter split into broadcast and record axes.
struct Binning {
  std::vector<int> record_axes;                 ///< domain positions, in domain order
  std::vector<int64_t> record_extents;
  std::vector<std::optional<int>> component_axis;  ///< per target component: its broadcast axis
  int64_t records = 1;
  int64_t cells = 1;
  /// Taps in the gather: the tap axis (not a record axis then) and, per target component, the
  /// extent of its key component (the component's extent + max shift - min shift).
  std::optional<BinnedTaps> taps;
  std::vector<int64_t> key_extent;
  int64_t broadcast_elements = 1;
  /// Why the taps moved into the gather or stayed records (the count kernel's dump note).
  std::string note;
};

int64_t constant_of(const Expr& e) {
  auto* c = e.as<ir::IntConstNode>();
  return c ? c->value : -1;
}

/// True when the scatter's value loads memory at places that several records share
/// (RereadRowKernels): some load does not depend on a non-broadcast domain axis of more than
/// one point (with taps in the gather, the tap axis is one of those).
bool records_share_reads(const ir::Stage& stage, const Binning& b) {
  std::vector<const ir::VarNode*> axes;
  for (size_t a = 0; a < stage.domain.size(); ++a) {
    bool broadcast = false;
    for (const auto& component : b.component_axis) broadcast |= component == static_cast<int>(a);
    if (!broadcast && constant_of(stage.domain[a].extent) > 1)
      axes.push_back(stage.domain[a].var.get());
  }
  bool shared = false;
  for_each_node(stage.value, [&](const Expr& e) {
    if (shared || !e.as<ir::LoadNode>()) return;
    for (const ir::VarNode* v : axes) shared |= !depends_on(e, v);
  });
  return shared;
}

/// The broadcast/record split of `stage`, or nothing when it is not eligible.
std::optional<Binning> plan_binning(const ir::Stage& stage, const BinnedGatherOptions& options) {
  Binning b;
  const int rank = stage.target->rank();
  b.component_axis.assign(rank, std::nullopt);
  for (size_t a = 0; a < stage.domain.size(); ++a) {
    const ir::Axis& axis = stage.domain[a];
    const int64_t extent = constant_of(axis.extent);
    if (extent < 0 || constant_of(axis.start) != 0) return std::nullopt;
    const ir::VarNode* v = axis.var.get();
    int uses = 0, component = -1;
    for (int j = 0; j < rank; ++j) {
      if (depends_on(stage.indices[j], v)) ++uses, component = j;
    }
    const bool broadcast =
        uses == 1 && stage.indices[component].as<ir::VarNode>() == v &&
        !b.component_axis[component] && stage.target->shape[component] == extent &&
        !(stage.condition.defined() && depends_on(stage.condition, v));
    if (broadcast) {
      b.component_axis[component] = static_cast<int>(a);
    } else {
      b.record_axes.push_back(static_cast<int>(a));
      b.record_extents.push_back(extent);
      b.records *= extent;
    }
    if (b.records > std::numeric_limits<int32_t>::max()) return std::nullopt;
  }
  for (int j = 0; j < rank; ++j) {
    if (!b.component_axis[j]) b.cells *= stage.target->shape[j];
    else b.broadcast_elements *= stage.target->shape[j];
    if (b.cells >= std::numeric_limits<int32_t>::max()) return std::nullopt;
  }
  std::optional<BinnedTaps> taps = find_binned_taps(stage, b.record_axes, kMaxTaps);
  if (!taps) return b;
  // The gather walks a clamped innermost component's key range as one span and one other
  // clamped component's range key by key (grid_sampler's bicubic: y and x); more it does not.
  int inner = -1, clamped_outer = 0;
  for (int j = 0; j < rank; ++j) {
    if (!b.component_axis[j]) inner = j;
  }
  for (int j = 0; j < rank; ++j) clamped_outer += taps->clamped[j] && j != inner ? 1 : 0;
  if (clamped_outer > 1) {
    b.note = "binned taps: records (" + std::to_string(clamped_outer) +
             " clamped index components besides the innermost: the gather walks one)";
    return b;
  }
  // The gather would walk taps x broadcast elements buckets per cell, where the records
  // layout walks broadcast elements buckets of taps records each: worth it only for few.
  const int64_t walks = taps->taps * b.broadcast_elements;
  const std::string what = std::to_string(taps->taps) + " taps of " +
                           stage.domain[taps->axis].var.name_hint() + " x " +
                           std::to_string(b.broadcast_elements) + " broadcast elements = " +
                           std::to_string(walks) + " bucket walks per cell ";
  // Past taps_walks_max, up to taps_walks_wide_max where the broadcast elements are few, the
  // gather has work for the whole GPU and each cell gets at least one point: the tap records'
  // binning (count, fill, sort and factors of points x taps records, growing with the taps)
  // then costs more than the walks it saves (cells x taps x broadcast elements, growing with
  // the channels). Where points are fewer than cells (a grid smaller than the input) most walks
  // find an empty bucket, and in small problems each thread's serial walks are the latency.
  const int64_t points = b.records / taps->taps;
  const int64_t elements = b.cells * b.broadcast_elements;
  // taps_walks_max 0 (ADJOINT_TUNE_BINNED_TAPS=0) keeps every tap a record, whatever the wider
  // bound says: the records layout's order (the atomics lowering's) stays one knob away.
  const bool wide = options.taps_walks_max > 0 && walks <= options.taps_walks_wide_max &&
                    b.broadcast_elements <= options.taps_wide_broadcast_max &&
                    points >= b.cells && elements >= options.taps_wide_min_elements;
  if (walks > options.taps_walks_max && !wide) {
    b.note = "binned taps: records (" + what + "> " + std::to_string(options.taps_walks_max) +
             ", ADJOINT_TUNE_BINNED_TAPS";
    if (options.taps_walks_max > 0 && walks <= options.taps_walks_wide_max)
      b.note += "; <= " + std::to_string(options.taps_walks_wide_max) +
                " (ADJOINT_TUNE_BINNED_TAPS_WIDE) needs at most " +
                std::to_string(options.taps_wide_broadcast_max) +
                " broadcast elements, points >= cells and at least " +
                std::to_string(options.taps_wide_min_elements) + " elements: " +
                std::to_string(points) + " points, " + std::to_string(b.cells) + " cells, " +
                std::to_string(elements) + " elements";
    b.note += ")";
    return b;
  }
  // Taps in the gather: one record per point, binned by its base cell.
  Binning s = b;
  s.taps = taps;
  s.record_axes.clear();
  s.record_extents.clear();
  s.records = 1;
  for (size_t i = 0; i < b.record_axes.size(); ++i) {
    if (b.record_axes[i] == taps->axis) continue;
    s.record_axes.push_back(b.record_axes[i]);
    s.record_extents.push_back(b.record_extents[i]);
    s.records *= b.record_extents[i];
  }
  s.cells = 1;
  for (int j = 0; j < rank; ++j) {
    s.key_extent.push_back(stage.target->shape[j] + taps->max_shift[j] - taps->min_shift[j]);
    if (!s.component_axis[j]) s.cells *= s.key_extent[j];
    if (s.cells >= std::numeric_limits<int32_t>::max()) return b;
  }
  s.note = "binned taps: in the gather (" + what + "<= " +
           (walks <= options.taps_walks_max
                ? std::to_string(options.taps_walks_max) + ", ADJOINT_TUNE_BINNED_TAPS"
                : std::to_string(options.taps_walks_wide_max) +
                      ", ADJOINT_TUNE_BINNED_TAPS_WIDE: " + std::to_string(points) +
                      " points >= " + std::to_string(b.cells) + " cells, " +
                      std::to_string(elements) + " elements") +
           "): " + std::to_string(s.records) + " records instead of " + std::to_string(b.records);
  int clamped = 0;
  for (int j = 0; j < rank; ++j) clamped += taps->clamped[j] ? 1 : 0;
  if (clamped > 0)
    s.note += "; " + std::to_string(clamped) +
              " clamped index component(s): bases past the taps' reach keyed at the edge, edge "
              "elements walk a range of keys";
  return s;
}

/// Whether `condition` only says that the target index is in bounds: a conjunction of
/// `index_j >= 0` and `index_j < extent_j` (grid_sampler's zeros padding). With taps in the
/// gather it then holds for every term: a tap's term in an element's walk has that element's
/// index, which is in bounds (exactly: binned_taps.h). (The chunk sums also sum taps whose
/// index is out of bounds, which no element reads: the caller makes sure that the value reads
/// nothing at a place that depends on the tap.)
bool only_index_bounds(const ir::Stage& stage, const Expr& condition) {
  if (auto* both = condition.as<ir::BinaryNode>(); both && both->op == ir::BinaryOp::kAnd)
    return only_index_bounds(stage, both->a) && only_index_bounds(stage, both->b);
  auto* compare = condition.as<ir::CompareNode>();
  if (!compare) return false;
  auto* bound = compare->b.as<ir::IntConstNode>();
  if (!bound) return false;
  for (int j = 0; j < stage.target->rank(); ++j) {
    if (!ir::structurally_equal(compare->a, stage.indices[j])) continue;
    const int64_t extent = stage.target->shape[j];
    switch (compare->op) {
      case ir::CompareOp::kGe: if (bound->value == 0) return true; break;
      case ir::CompareOp::kGt: if (bound->value == -1) return true; break;
      case ir::CompareOp::kLt: if (bound->value == extent) return true; break;
      case ir::CompareOp::kLe: if (bound->value == extent - 1) return true; break;
      default: break;
    }
  }
  return false;
}

/// Whether no load of `value` indexes by an expression of `tap` (so that every tap of a
/// binned point reads what its in-bounds taps read).
bool reads_independent_of(const Expr& value, const ir::VarNode* tap) {
  bool independent = true;
  for_each_node(value, [&](const Expr& node) {
    if (auto* load = node.as<ir::LoadNode>()) {
      for (const Expr& index : load->indices) independent &= !depends_on(index, tap);
    }
  });
  return independent;
}

/// The key component j of a target index component `index` reached by a tap of shift `shift`.
Expr key_component(const Binning& b, int j, const Expr& index, const Expr& shift) {
  return index - shift + Expr(b.taps->max_shift[j]);
}

Expr cell_of(const Binning& b, const Tensor& target, const std::vector<Expr>& indices);

/// The cell (bucket) of a record: cell_of its target index, or with taps in the gather its
/// base index shifted into [0, key_extent) per component.
Expr record_key(const Binning& b, const ir::Stage& stage) {
  if (!b.taps) return cell_of(b, stage.target, stage.indices);
  Expr key = Expr(int64_t{0});
  bool first = true;
  for (int j = 0; j < stage.target->rank(); ++j) {
    if (b.component_axis[j]) continue;
    const Expr k = key_component(b, j, b.taps->base[j], Expr(int64_t{0}));
    key = first ? k : key * Expr(b.key_extent[j]) + k;
    first = false;
  }
  return simplify(key);
}

/// The records a bucket holds: the stage's condition, or with taps in the gather every base
/// whose key is in range (and the condition where it does not depend on the tap).
Expr record_condition(const Binning& b, const ir::Stage& stage) {
  const Expr true_ = Expr(int64_t{0}) == Expr(int64_t{0});
  if (!b.taps) return stage.condition.defined() ? stage.condition : true_;
  Expr in_range;
  for (int j = 0; j < stage.target->rank(); ++j) {
    if (b.component_axis[j] || b.taps->clamped[j]) continue;  // a clamped key is in range
    const Expr k = key_component(b, j, b.taps->base[j], Expr(int64_t{0}));
    const Expr c = k >= Expr(int64_t{0}) && k < Expr(b.key_extent[j]);
    in_range = in_range.defined() ? (in_range && c) : c;
  }
  if (stage.condition.defined() &&
      !depends_on(stage.condition, stage.domain[b.taps->axis].var.get())) {
    in_range = in_range.defined() ? (in_range && stage.condition) : stage.condition;
  }
  return in_range.defined() ? simplify(in_range) : true_;
}

/// The linear cell of a target index (components not indexed by broadcast axes, row-major).
Expr cell_of(const Binning& b, const Tensor& target, const std::vector<Expr>& indices) {
  Expr key = Expr(int64_t{0});
  bool first = true;
  for (int j = 0; j < target->rank(); ++j) {
    if (b.component_axis[j]) continue;
    key = first ? indices[j] : key * Expr(target->shape[j]) + indices[j];
    first = false;
  }
  return key;
}

/// The record id of a point of the record axes (row-major over them), as i64.
Expr record_id(const Binning& b, const ir::Stage& stage) {
  Expr id = Expr(int64_t{0});
  for (size_t i = 0; i < b.record_axes.size(); ++i) {
    Expr v = stage.domain[b.record_axes[i]].var;
    id = i == 0 ? v : id * Expr(b.record_extents[i]) + v;
  }
  return id;
}

/// `e` with every record axis replaced by its value decoded from the record id `id`.
Expr decode_records(const Binning& b, const ir::Stage& stage, const Expr& e, const Expr& id) {
  Expr out = e;
  int64_t stride = 1;
  for (size_t i = b.record_axes.size(); i-- > 0;) {
    Expr value = stride == 1 ? id : id / Expr(stride);
    if (i > 0) value = value % Expr(b.record_extents[i]);
    if (b.record_extents[i] == 1) value = Expr(int64_t{0});  // nothing to decode
    out = substitute(out, stage.domain[b.record_axes[i]].var.get(), value);
    stride *= b.record_extents[i];
  }
  return out;
}

/// The id ranges each cell's bucket is cut into for the count, fill and sort (the header's
/// "Sub-buckets"): 1 unless cells hold more than twice options.subbucket_records records on
/// average; then records / (subbucket_records x cells), so the count table has at most
/// records / subbucket_records entries.
int64_t subbuckets_per_cell(const Binning& b, const BinnedGatherOptions& options) {
  const int64_t target = options.subbucket_records;
  if (target <= 0 || b.cells <= 0 || b.records < 2 * target * b.cells) return 1;
  return std::max<int64_t>(1, b.records / (target * b.cells));
}

/// The slots per chunk of the gather's walk (BinnedGatherOptions::gather_chunk), derived from
/// the average bucket L = records / cells when the option is -1: a walk costs about C + L / C
/// serial terms (half a chunk at each end, a chunk sum per whole chunk), fewest near C = sqrt(L),
/// and one thread walks it, so crowded buckets on few elements (small inputs, large grids) want
/// short chunks. Below 32 records per cell it stays 64: there buckets rarely hold a whole chunk
/// and the walk is the bucket itself, as without chunks.
int64_t walk_chunk(const Binning& b, const BinnedGatherOptions& options) {
  if (options.gather_chunk >= 0) return options.gather_chunk;
  const int64_t average = b.cells > 0 ? b.records / b.cells : 0;
  if (average < 32) return 64;
  int64_t chunk = 8;  // the power of two nearest sqrt(average): chunk^2 within [average/2, 2 average)
  while (chunk < 64 && 2 * chunk * chunk <= average) chunk *= 2;
  return chunk;
}

std::vector<ir::Axis> record_domain(const Binning& b, const ir::Stage& stage) {
  std::vector<ir::Axis> domain;
  for (int a : b.record_axes) domain.push_back(stage.domain[a]);
  return domain;
}

Expr as_i64(const Expr& e) { return e.dtype() == DType::kI64 ? e : ir::cast(DType::kI64, e); }
/// `e * factor`, or `e` itself for a factor of 1 (the IR of before where nothing is cut).
Expr scaled(const Expr& e, int64_t factor) { return factor == 1 ? e : e * Expr(factor); }
Expr at(const Tensor& t, Expr i) { return as_i64(ir::load(t, {std::move(i)})); }
/// A loaded record id or bucket bound, clamped to the range it always has: a no-op on the
/// values the kernels write, which tells the bounds analysis their range (plain division and
/// modulo instead of floor ones, and 32-bit index math where everything fits).
Expr within(const Expr& e, int64_t lo, int64_t hi) {
  return ir::min(ir::max(e, Expr(lo)), Expr(hi));
}

/// Replaces the largest float subexpressions of a scatter's value that depend on no broadcast
/// axis and read memory (grid_sampler's tap weights) by loads of per-record factors in bucket
/// order, `factor[q]`: computed once per record instead of once per broadcast index, and read
/// contiguously by the gather. The same expression in the same dtype: the same bits.
class FactorHoister : public ir::ExprMutator {
 public:
  FactorHoister(std::vector<const ir::VarNode*> broadcast, std::vector<Expr> index,
                std::function<Tensor(const Expr&)> make_factor)
      : broadcast_(std::move(broadcast)),
        index_(std::move(index)),
        make_factor_(std::move(make_factor)) {}

 protected:
  Expr visit_Unary(const ir::UnaryNode& n, const Expr& self) override {
    return hoistable(self) ? hoist(self) : ExprMutator::visit_Unary(n, self);
  }
  Expr visit_Binary(const ir::BinaryNode& n, const Expr& self) override {
    return hoistable(self) ? hoist(self) : ExprMutator::visit_Binary(n, self);
  }
  Expr visit_Select(const ir::SelectNode& n, const Expr& self) override {
    return hoistable(self) ? hoist(self) : ExprMutator::visit_Select(n, self);
  }
  Expr visit_Cast(const ir::CastNode& n, const Expr& self) override {
    return hoistable(self) ? hoist(self) : ExprMutator::visit_Cast(n, self);
  }

 private:
  bool hoistable(const Expr& e) const {
    if (!ir::is_float(e.dtype())) return false;
    for (const ir::VarNode* v : broadcast_) {
      if (depends_on(e, v)) return false;
    }
    bool reads = false;
    for_each_node(e, [&](const Expr& node) {
      reads |= node.kind() == ir::ExprKind::kLoad || node.kind() == ir::ExprKind::kReduce;
    });
    return reads;
  }
  Expr hoist(const Expr& e) { return ir::load(make_factor_(e), index_); }

  std::vector<const ir::VarNode*> broadcast_;
  std::vector<Expr> index_;  ///< the factor's index in the gather: {q}, or {q, tap}
  std::function<Tensor(const Expr&)> make_factor_;
};

/// Replaces loads that index with every broadcast variable as a plain component (each once,
/// and in no other component) by loads of a copy with those components last, in the order of
/// `broadcast` (`transposed(tensor, order)` makes the copy: component k of the copy is
/// component order[k] of the tensor). Other loads stay.
class BroadcastInnermost : public ir::ExprMutator {
 public:
  using MakeCopy = std::function<Tensor(const Tensor&, const std::vector<int>&)>;
  BroadcastInnermost(std::vector<const ir::VarNode*> broadcast, MakeCopy transposed)
      : broadcast_(std::move(broadcast)), transposed_(std::move(transposed)) {}

 protected:
  Expr visit_Load(const ir::LoadNode& n, const Expr& self) override {
    const int rank = static_cast<int>(n.indices.size());
    std::vector<int> last;
    for (const ir::VarNode* v : broadcast_) {
      int found = -1;
      for (int j = 0; j < rank; ++j) {
        if (n.indices[j].as<ir::VarNode>() == v) found = found < 0 ? j : rank;
      }
      if (found < 0 || found == rank) return ExprMutator::visit_Load(n, self);
      last.push_back(found);
    }
    std::vector<int> order;
    for (int j = 0; j < rank; ++j) {
      if (std::find(last.begin(), last.end(), j) != last.end()) continue;
      for (const ir::VarNode* v : broadcast_) {
        if (depends_on(n.indices[j], v)) return ExprMutator::visit_Load(n, self);
      }
      order.push_back(j);
    }
    if (order.empty()) return ExprMutator::visit_Load(n, self);  // already contiguous rows
    order.insert(order.end(), last.begin(), last.end());
    // Already laid out that way (a channels-last input read in place): no copy needed.
    std::vector<int64_t> permuted;
    for (int k : order) permuted.push_back(n.tensor->shape[k]);
    const std::vector<int64_t> wanted = ir::contiguous_strides(permuted);
    bool laid_out = true;
    for (size_t k = 0; k < order.size(); ++k) {
      laid_out &= permuted[k] == 1 || n.tensor->strides[order[k]] == wanted[k];
    }
    if (laid_out) return ExprMutator::visit_Load(n, self);
    std::vector<Expr> indices;
    for (int k : order) indices.push_back(mutate(n.indices[k]));
    return ir::load(transposed_(n.tensor, order), std::move(indices));
  }

 private:
  std::vector<const ir::VarNode*> broadcast_;
  MakeCopy transposed_;
};

/// `e` with every reduce binding fresh variables (same hints): a copy that can sit next to
/// the original in one stage, which binds each variable once.
class FreshReduceVars : public ir::ExprMutator {
 protected:
  Expr visit_Reduce(const ir::ReduceNode& n, const Expr& self) override {
    std::vector<ir::Axis> axes = n.axes;
    Expr body = n.body;
    for (size_t i = 0; i < axes.size(); ++i) {
      Var fresh(axes[i].var.name_hint());
      for (size_t k = i + 1; k < axes.size(); ++k) {
        axes[k].start = substitute(axes[k].start, axes[i].var.get(), fresh);
        axes[k].extent = substitute(axes[k].extent, axes[i].var.get(), fresh);
      }
      body = substitute(body, axes[i].var.get(), fresh);
      axes[i].var = fresh;
    }
    for (ir::Axis& axis : axes) {
      axis.start = mutate(axis.start);
      axis.extent = mutate(axis.extent);
    }
    return ir::ReduceNode::make(n.op, std::move(axes), mutate(body), n.dtype);
  }
};

/// Builds the kernels and temporaries of one program rewrite, with names unique in it.
class Rewriter {
 public:
  explicit Rewriter(ir::Program& out) : out_(out) {}

  Tensor temporary(const std::string& base, int64_t size, DType dtype = DType::kI32) {
    Tensor t = ir::make_tensor(unique_tensor_name(out_, base), dtype, {size},
                               ir::TensorRole::kTemporary);
    out_.temporaries.push_back(t);
    return t;
  }
  Tensor temporary(const std::string& base, std::vector<int64_t> shape, DType dtype) {
    Tensor t = ir::make_tensor(unique_tensor_name(out_, base), dtype, std::move(shape),
                               ir::TensorRole::kTemporary);
    out_.temporaries.push_back(t);
    return t;
  }

  /// Appends kernels computing the exclusive scan of `x` (n entries): n + 1 entries, the last
  /// one the total. Every thread adds at most kScanChunk (or, at the top, fewer) terms, in
  /// index order: integers, so any order gives the same result anyway. The chained levels:
  /// 2 kernels per level of 32 (the level's chunk sums on the way up, its entries on the way
  /// down); `exclusive_scan_digits` is the default.
  Tensor exclusive_scan(const Tensor& x, int64_t n, const std::string& prefix,
                        std::vector<ir::Kernel>& kernels, int level = 0) {
    const std::string name = prefix + "_scan" + std::to_string(level);
    Tensor offsets = temporary(name, n + 1);
    Var i("i"), j("j");
    if (n < kScanChunk) {
      Expr value = ir::sum({ir::range(j, Expr(int64_t{0}), Expr(i))}, ir::load(x, {Expr(j)}),
                           DType::kI32);
      kernels.push_back(
          ir::Kernel{name, {ir::compute(offsets, ir::over({i}, {n + 1}), value)}, {}});
      return offsets;
    }
    const int64_t groups = (n + kScanChunk - 1) / kScanChunk;
    Tensor partial = temporary(name + "_partial", groups);
    kernels.push_back(chunk_sums_kernel(x, n, partial, groups, name + "_partial",
                                        /*constant_when_whole=*/false));
    Tensor upper = exclusive_scan(partial, groups, prefix, kernels, level + 1);
    Expr start = (Expr(i) / Expr(kScanChunk)) * Expr(kScanChunk);
    Expr value = ir::load(upper, {Expr(i) / Expr(kScanChunk)}) +
                 ir::sum({ir::range(j, start, Expr(i) - start)}, ir::load(x, {Expr(j)}),
                         DType::kI32);
    kernels.push_back(ir::Kernel{name, {ir::compute(offsets, ir::over({i}, {n + 1}), value)}, {}});
    return offsets;
  }

  /// `partial[g]` = the sum of x[32g, 32g + 32) (x has n entries): min(32, n - 32g) terms, or
  /// (`constant_when_whole`, the scan by digits) a constant 32 where n is a multiple of 32.
  ir::Kernel chunk_sums_kernel(const Tensor& x, int64_t n, const Tensor& partial, int64_t groups,
                               const std::string& name, bool constant_when_whole) {
    Var g("g"), k("k");
    const Expr chunk_start = Expr(g) * Expr(kScanChunk);
    const Expr extent = constant_when_whole && n % kScanChunk == 0
                            ? Expr(kScanChunk)
                            : ir::min(Expr(kScanChunk), Expr(n) - chunk_start);
    const Expr chunk = ir::sum({ir::range(k, Expr(int64_t{0}), extent)},
                               ir::load(x, {chunk_start + Expr(k)}), DType::kI32);
    return ir::Kernel{name, {ir::compute(partial, ir::over({g}, {groups}), chunk)}, {}};
  }

  /// The levels of both scans: L0 = x (n entries), L(k+1)[g] = the sum of L(k)[32g, 32g + 32),
  /// one kernel each (`<prefix>_scan<k>_partial`, on lanes), until a level has at most `top`
  /// entries. Returns every level with its number of entries, L0 first.
  std::vector<std::pair<Tensor, int64_t>> chunk_sum_levels(const Tensor& x, int64_t n,
                                                           int64_t top,
                                                           const std::string& prefix,
                                                           std::vector<ir::Kernel>& kernels) {
    std::vector<std::pair<Tensor, int64_t>> levels = {{x, n}};
    while (levels.back().second > top) {
      const auto [lower, m] = levels.back();
      const int64_t groups = (m + kScanChunk - 1) / kScanChunk;
      const std::string name =
          prefix + "_scan" + std::to_string(levels.size() - 1) + "_partial";
      Tensor partial = temporary(name, groups);
      kernels.push_back(chunk_sums_kernel(lower, m, partial, groups, name,
                                          /*constant_when_whole=*/true));
      levels.push_back({partial, groups});
    }
    return levels;
  }

  /// The exclusive scan of `x` (n entries, n + 1 results) by digits: levels L0 = x and
  /// L(k+1)[g] = the sum of L(k)[32g, 32g + 32), one kernel each, until a level has at most 32
  /// entries (L_K). With i_k = i / 32^k, the base-32 digits of i give
  ///   offset[i] = sum over k < K of L(k)[32 (i_k / 32), i_k) + L_K[0, i_K),
  /// at most 31 terms per level (32 at the top). Up to K = 2 (n <= 32^3) one kernel adds them
  /// all for every entry: K + 1 kernels. From K = 3 on, every entry's loads of the upper
  /// levels would repeat those of its 31 neighbours (the loads, not the bytes, bound that
  /// kernel: 25 us for 1.6 M entries on the H100), so a kernel adds the upper levels' digits
  /// once per chunk of 32, `coarse[g]` = the exclusive scan of L1 at g, and the last one
  /// `offset[i] = coarse[i / 32] + L0[32 (i / 32), i)`: K + 2 kernels against the chained
  /// levels' 2K + 1. Integer sums: the result is the chained scan's.
  Tensor exclusive_scan_digits(const Tensor& x, int64_t n, const std::string& prefix,
                               std::vector<ir::Kernel>& kernels) {
    std::vector<std::pair<Tensor, int64_t>> levels =
        chunk_sum_levels(x, n, kScanChunk, prefix, kernels);
    // The digits of levels [first, K] for an index i in units of level `first`.
    auto digits = [&](size_t first, const Var& i) {
      Expr value;
      int64_t weight = 1;  // 32^(k - first)
      for (size_t k = first; k < levels.size(); ++k, weight *= kScanChunk) {
        Var j("j" + std::to_string(k));
        const Expr digit_end = weight == 1 ? Expr(i) : Expr(i) / Expr(weight);
        const Expr start = k + 1 == levels.size()
                               ? Expr(int64_t{0})
                               : (digit_end / Expr(kScanChunk)) * Expr(kScanChunk);
        const Expr terms = ir::sum({ir::range(j, start, digit_end - start)},
                                   ir::load(levels[k].first, {Expr(j)}), DType::kI32);
        value = value.defined() ? value + terms : terms;
      }
      return value;
    };
    const std::string name = prefix + "_scan0";
    Tensor offsets = temporary(name, n + 1);
    Var i("i");
    Expr value;
    if (levels.size() <= 3) {
      value = digits(0, i);
    } else {
      const int64_t m = levels[1].second;
      Tensor coarse = temporary(prefix + "_scan1", m + 1);
      Var g("g");
      kernels.push_back(ir::Kernel{
          coarse->name, {ir::compute(coarse, ir::over({g}, {m + 1}), digits(1, g))}, {}});
      Var j("j0");
      const Expr start = (Expr(i) / Expr(kScanChunk)) * Expr(kScanChunk);
      value = ir::load(coarse, {Expr(i) / Expr(kScanChunk)}) +
              ir::sum({ir::range(j, start, Expr(i) - start)}, ir::load(x, {Expr(j)}),
                      DType::kI32);
    }
    kernels.push_back(ir::Kernel{name, {ir::compute(offsets, ir::over({i}, {n + 1}), value)}, {}});
    return offsets;
  }

  /// The exclusive scan of `x` (n entries, n a multiple of 32, and 32 zeros after them: x has n +
  /// 32) on warp lanes, n + 32 results (offset[n] the total), in K + 1 kernels: the levels L0 =
  /// x[0, n), L(k+1)[g] = the sum of L(k)[32g, 32g + 32) (one kernel each, on lanes, as in the
  /// scan by digits) until a level has at most 32 x `top_loads` entries (L_K), and one kernel
  /// `<prefix>_scan0` over the n + 32 entries (whole warps; the digits of i <= n reach no level
  /// entry past those of n):
  ///   offset[i] = L0[32 (i / 32), i) + sum over 0 < k < K of L(k)[32 (i_k / 32), i_k)
  ///               + L_K[0, i_K),   i_k = i / 32^k
  /// (K = 0: L0[32 (i / 32), i) + L0[0, 32 (i / 32))).
  /// Every term but the first depends on i only through i / 32, the same for the 32 entries of
  /// a warp; named in `lane_scan`, the emitter gives the first an exclusive scan over the
  /// warp's lanes (one load per entry, shuffles) and each other one strided loads over the
  /// lanes and a shuffle butterfly (at most `top_loads` loads per lane at the top, one below).
  /// Unnamed, the same sums run serially. Integer sums: the scan by digits' offsets.
  Tensor exclusive_scan_lanes(const Tensor& x, int64_t n, const std::string& prefix,
                              int64_t top_loads, std::vector<ir::Kernel>& kernels) {
    std::vector<std::pair<Tensor, int64_t>> levels =
        chunk_sum_levels(x, n, kScanChunk * std::max<int64_t>(top_loads, 1), prefix, kernels);
    const std::string name = prefix + "_scan0";
    Tensor offsets = temporary(name, n + kScanChunk);
    Var i("i");
    Expr value;
    int64_t weight = 1;  // 32^k
    for (size_t k = 0; k < levels.size(); ++k, weight *= kScanChunk) {
      Var j("j" + std::to_string(k));
      const Expr digit_end = weight == 1 ? Expr(i) : Expr(i) / Expr(weight);
      // The first level's chunk of 32 even where it is the top (n = 32: i / 32 = 0).
      const Expr start = k > 0 && k + 1 == levels.size()
                             ? Expr(int64_t{0})
                             : (digit_end / Expr(kScanChunk)) * Expr(kScanChunk);
      const Expr terms = ir::sum({ir::range(j, start, digit_end - start)},
                                 ir::load(levels[k].first, {Expr(j)}), DType::kI32);
      value = value.defined() ? value + terms : terms;
    }
    if (levels.size() == 1) {  // L0 is the top: the warps before i's too
      Var j("j");
      value = value + ir::sum({ir::range(j, Expr(int64_t{0}),
                                         (Expr(i) / Expr(kScanChunk)) * Expr(kScanChunk))},
                              ir::load(x, {Expr(j)}), DType::kI32);
    }
    kernels.push_back(
        ir::Kernel{name, {ir::compute(offsets, ir::over({i}, {n + kScanChunk}), value)}, {}});
    return offsets;
  }

  /// The chunk sums of the header's chunked walk: appends the bin_chunk_sums kernel (the sum
  /// of `body` over every interior chunk of `chunk` slots, for every broadcast index) and
  /// returns its tensor, [chunk, tap (with taps in the gather), broadcast components].
  /// With taps in the gather and a clamped innermost component (`inner`), an edge element's
  /// walk spans the buckets of its row's first or last keys: chunks that lie within those
  /// spans have sums too.
  Tensor chunk_sums(const ir::Stage& stage, const Binning& b, const Expr& key,
                    const Tensor& offset, const Tensor& sorted, const Expr& filled,
                    const Expr& body, const Var& q, const std::vector<Var>& vars, int64_t chunk,
                    int64_t sub, const std::string& prefix, int inner,
                    std::vector<ir::Kernel>& kernels) {
    const Tensor& target = stage.target;
    const int64_t chunks = b.records / chunk;
    const Expr c = Expr(chunk);
    std::vector<int64_t> shape = {chunks};
    std::vector<Var> chunk_vars;
    Var g("g"), k("k");
    chunk_vars.push_back(g);
    if (b.taps) {
      shape.push_back(b.taps->taps);
      chunk_vars.push_back(stage.domain[b.taps->axis].var);
    }
    for (int j = 0; j < target->rank(); ++j) {
      if (!b.component_axis[j]) continue;
      shape.push_back(target->shape[j]);
      chunk_vars.push_back(vars[j]);
    }
    Tensor sums = temporary(prefix + "_chunk_sums", shape, stage.accumulation);
    const Expr first = Expr(g) * c;
    const Expr record = within(at(sorted, first), 0, b.records - 1);
    const Expr first_cell = within(as_i64(decode_records(b, stage, key, record)), 0, b.cells - 1);
    // Whether the chunk starts and ends within the slots of the keys from `lo` to `hi`.
    auto starts_within = [&](const Expr& lo) {
      return within(at(offset, scaled(lo, sub)), 0, b.records) <= first;
    };
    auto ends_within = [&](const Expr& hi) {
      return first + c <= within(at(offset, scaled(hi + Expr(int64_t{1}), sub)), 0, b.records);
    };
    const Expr filled_chunk = first + c <= filled;
    Expr interior = (filled_chunk && starts_within(first_cell)) && ends_within(first_cell);
    if (b.taps && inner >= 0 && b.taps->clamped[inner]) {
      // The row's low edge span, keys [0, max - min], and its high one, [extent - 1, end).
      const int64_t row_keys = b.key_extent[inner];
      const int64_t reach = b.taps->max_shift[inner] - b.taps->min_shift[inner];
      const Expr row = first_cell - first_cell % Expr(row_keys);
      const Expr high = row + Expr(target->shape[inner] - 1);
      interior = filled_chunk &&
                 ((starts_within(first_cell) && ends_within(first_cell)) ||
                  (starts_within(row) && ends_within(row + Expr(reach))) ||
                  (starts_within(high) && ends_within(row + Expr(row_keys - 1))));
    }
    const Expr value = ir::sum({ir::range(k, first, ir::select(interior, c, Expr(int64_t{0})))},
                               substitute(body, q.get(), Expr(k)), stage.accumulation);
    kernels.push_back(
        ir::Kernel{sums->name, {ir::compute(sums, ir::over(chunk_vars, shape), value)}, {}});
    return sums;
  }

  /// The gather's sum for the bucket [begin, end) of the header's chunked walk: (head +
  /// middle) + tail with the chunk sums `sums`, or one sequential walk where the bucket
  /// contains no aligned chunk.
  Expr chunked_walk(const ir::Stage& stage, const Binning& b, const Tensor& sums,
                    const Expr& body, const Var& q, const Expr& begin, const Expr& end,
                    const std::vector<Var>& vars, int64_t chunk) {
    const Tensor& target = stage.target;
    const Expr c = Expr(chunk);
    const Expr first_full = (begin + Expr(chunk - 1)) / c;
    const Expr last_full = end / c;
    const Expr has_middle = first_full < last_full;
    const Expr head_end = ir::select(has_middle, first_full * c, end);
    const Expr tail_begin = ir::select(has_middle, last_full * c, end);
    const Expr middle_count =
        ir::select(has_middle, last_full - first_full, Expr(int64_t{0}));
    Var m("m"), t("t");
    std::vector<Expr> sum_indices = {Expr(m)};
    if (b.taps) sum_indices.push_back(stage.domain[b.taps->axis].var);
    for (int j = 0; j < target->rank(); ++j) {
      if (b.component_axis[j]) sum_indices.push_back(vars[j]);
    }
    const Expr head = ir::sum({ir::range(q, begin, head_end - begin)}, body, stage.accumulation);
    const Expr middle = ir::sum({ir::range(m, first_full, middle_count)},
                                ir::load(sums, sum_indices), stage.accumulation);
    const Expr tail = ir::sum({ir::range(t, tail_begin, end - tail_begin)},
                              substitute(body, q.get(), Expr(t)), stage.accumulation);
    return (head + middle) + tail;
  }

  /// Rewrites `stage` (the only stage of `kernel`) into kernels appended to `kernels`.
  void rewrite(const ir::Kernel& kernel, const ir::Stage& stage, const Binning& b,
               std::vector<ir::Kernel>& kernels, ClaimSlotTensors* claims,
               const BinnedGatherOptions& options, StoreScatterTargets* stores,
               ScheduleNotes* notes, LaneKernels* lane_kernels,
               WholeAxisKernels* whole_axis_kernels, CountingClaims* counting_claims,
               LaneScanKernels* lane_scan_kernels,
               RereadRowKernels* reread_kernels, RolledLoopKernels* rolled_kernels) {
    const Tensor& target = stage.target;
    const std::string prefix = target->name + "_bin";
    // The kernels that walk the records' values (RereadRowKernels), named where they are
    // made (a kernel of these names that is not made is never looked up).
    const bool reread = reread_kernels && records_share_reads(stage, b);
    if (reread) {
      reread_kernels->insert(prefix + "_factors");
      reread_kernels->insert(prefix + "_chunk_sums");
    }
    const Expr condition = record_condition(b, stage);
    const Expr key = record_key(b, stage);
    const Expr one = ir::constant(DType::kI32, 1);
    if (notes && !b.note.empty()) add_schedule_note(*notes, prefix + "_count", b.note);

    // Counts per cell.
    // Padded to a multiple of 32 (zeros: no record's key reaches the padding) for the scan by
    // digits, whose first chunk sums then have a constant 32 terms.
    // Sub-buckets: slot key' = cell x sub + id / ids_per_sub, so bucket c is the slots of
    // keys [c x sub, (c + 1) x sub), each in increasing id (the same slots as without).
    const int64_t sub = subbuckets_per_cell(b, options);
    const int64_t ids_per_sub = (b.records + sub - 1) / sub;
    const int64_t slots = b.cells * sub;
    const Expr id = record_id(b, stage);
    auto sub_key = [&](const Expr& cell, const Expr& record) {
      return sub == 1 ? cell : cell * Expr(sub) + record / Expr(ids_per_sub);
    };
    if (notes && sub > 1) {
      add_schedule_note(
          *notes, prefix + "_count",
          "binned sort: " + std::to_string(sub) + " id ranges of " +
              std::to_string(ids_per_sub) + " records per cell (" + std::to_string(b.records) +
              " records over " + std::to_string(b.cells) + " cells, > 2 x " +
              std::to_string(options.subbucket_records) +
              " per cell, ADJOINT_TUNE_BINNED_SUBBUCKET): a record is ranked within its range");
    }
    const Expr slot_key = sub_key(key, id);
    // The scan on lanes: a warp of zeros more, so that its offsets' kernel runs whole warps up
    // to the total (its levels cover the padded slots only).
    const bool lanes = options.scan_digits && options.scan_lanes;
    const int64_t count_size =
        lanes ? (slots + kScanChunk - 1) / kScanChunk * kScanChunk + kScanChunk
        : options.scan_digits ? (slots + kScanChunk - 1) / kScanChunk * kScanChunk
                              : slots;
    Tensor count = temporary(prefix + "_count", count_size);
    // Ranked count: the count's atomic hands each record its rank of arrival in its bucket
    // (the load of bin_count stands for `atomicAdd(&bin_count[k], 1)`, EmitOptions::
    // claim_counts_up), stored at the record's id; the fill then stores without atomics.
    const bool ranked = options.ranked_count && claims && stores && counting_claims;
    Tensor rank;
    if (ranked) {
      rank = temporary(prefix + "_rank", b.records);
      Var z("i");  // the counts start from zero (a kernel of the IR: the claims read them)
      kernels.push_back(ir::Kernel{
          prefix + "_count_zero",
          {ir::compute(count, ir::over({z}, {count_size}), ir::constant(DType::kI32, 0))},
          {}});
      kernels.push_back(ir::Kernel{
          prefix + "_count",
          {ir::scatter_add(rank, {id}, ir::load(count, {slot_key}), record_domain(b, stage),
                           DType::kI32, condition)},
          {}});
      (*claims)[prefix + "_count"] = count->name;
      (*stores)[prefix + "_count"] = rank->name;
      counting_claims->insert(prefix + "_count");
    } else {
      kernels.push_back(ir::Kernel{
          prefix + "_count",
          {ir::scatter_add(count, {slot_key}, one, record_domain(b, stage), DType::kI32,
                           condition)},
          {}});
    }
    // Offsets: bucket c is [offset[c], offset[c + 1]).
    const size_t scan_first = kernels.size();
    Tensor offset =
        lanes ? exclusive_scan_lanes(count, count_size - kScanChunk, prefix,
                                     options.scan_top_loads, kernels)
        : options.scan_digits ? exclusive_scan_digits(count, count_size, prefix, kernels)
                              : exclusive_scan(count, slots, prefix, kernels);
    if (lanes && lane_scan_kernels) lane_scan_kernels->insert(prefix + "_scan0");
    if (lanes && notes) {
      const int64_t top = kScanChunk * std::max<int64_t>(options.scan_top_loads, 1);
      add_schedule_note(*notes, prefix + "_scan0",
                        "binned scan: on warp lanes, " +
                            std::to_string(kernels.size() - scan_first) + " kernel(s) for " +
                            std::to_string(count_size) + " counts (levels of chunk sums until " +
                            std::to_string(top) +
                            " entries, ADJOINT_TUNE_BINNED_SCAN_TOP; ADJOINT_TUNE_BINNED_SCAN=1 "
                            "the scan by digits)");
    }
    if (options.scan_digits && lane_kernels) {  // the chunk sums read rows of 32 on lanes
      for (size_t k = scan_first; k < kernels.size(); ++k) {
        if (kernels[k].name.size() > 8 &&
            kernels[k].name.compare(kernels[k].name.size() - 8, 8, "_partial") == 0)
          lane_kernels->insert(kernels[k].name);
      }
    }
    // Fill: every record claims a slot of its bucket (counting bin_count down to zero). With
    // packed keys it writes slot key x 2^32 + id, which tells the sort the slot's bucket.
    const bool packed = options.packed_keys;
    const Expr key_unit = Expr(int64_t{1} << 32);
    Tensor unsorted =
        temporary(prefix + "_unsorted", b.records, packed ? DType::kI64 : DType::kI32);
    const std::string fill_name = prefix + "_fill";
    kernels.push_back(ir::Kernel{
        fill_name,
        {ir::scatter_add(unsorted,
                         {at(offset, slot_key) + (ranked ? at(rank, id) : at(count, slot_key))},
                         packed ? as_i64(slot_key) * key_unit + as_i64(id)
                                : ir::cast(DType::kI32, id),
                         record_domain(b, stage), packed ? DType::kI64 : DType::kI32,
                         condition)},
        {}});
    if (claims && !ranked) (*claims)[fill_name] = count->name;
    if (stores) (*stores)[fill_name] = unsorted->name;
    // Sort: slot p's record goes to its rank (by id) within its bucket.
    Tensor sorted = temporary(prefix + "_sorted", b.records);
    {
      Var p("p"), q("q");
      const Expr slot = ir::load(unsorted, {Expr(p)});
      Expr record = slot, cell;
      if (packed) {  // same key in a bucket: packed values compare as their ids
        const Expr bounded = within(slot, 0, (slots << 32) - 1);  // plain division and modulo
        record = ir::cast(DType::kI32, within(bounded % key_unit, 0, b.records - 1));
        cell = within(bounded / key_unit, 0, slots - 1);
      } else {
        const Expr record_i64 = within(as_i64(record), 0, b.records - 1);
        cell = sub_key(decode_records(b, stage, key, record_i64), record_i64);
      }
      const Expr begin = within(at(offset, cell), 0, b.records);
      const Expr rank =
          ir::sum({ir::range(q, begin,
                             within(at(offset, cell + Expr(int64_t{1})), 0, b.records) - begin)},
                  ir::select(ir::load(unsorted, {Expr(q)}) < slot, one,
                             ir::constant(DType::kI32, 0)),
                  DType::kI32);
      if (stores) (*stores)[prefix + "_sort"] = sorted->name;
      kernels.push_back(ir::Kernel{
          prefix + "_sort",
          {ir::scatter_add(sorted, {begin + as_i64(rank)}, record,
                           ir::over({p}, {b.records}), DType::kI32,
                           Expr(p) < at(offset, Expr(slots)))},
          {}});
    }
    // Gather: every target element sums its bucket in record order.
    std::vector<Var> vars;
    std::vector<Expr> indices;
    for (int j = 0; j < target->rank(); ++j) {
      vars.emplace_back(b.component_axis[j] ? stage.domain[*b.component_axis[j]].var.name_hint()
                                            : "i" + std::to_string(j));
      indices.push_back(vars.back());
    }
    Var q("q");
    // Per-record factors, in bucket order (a slot past the last filled one reads record 0,
    // whose factor is never used: the guard keeps its loads from running).
    std::vector<const ir::VarNode*> broadcast;
    for (const auto& axis : b.component_axis) {
      if (axis) broadcast.push_back(stage.domain[*axis].var.get());
    }
    std::vector<ir::Stage> factor_stages;
    const Expr filled = at(offset, Expr(slots));
    Var f("q");  // the factor kernel's slot (one domain variable shared by its stages)
    // With taps in the gather the factors are per slot and tap, [records, taps], and the
    // condition (which depends on the tap) is one more of them, an i32 0/1 per slot and tap.
    std::optional<Var> tap, factor_tap;
    std::vector<Expr> factor_index = {Expr(q)};
    std::vector<Var> factor_vars = {f};
    std::vector<int64_t> factor_shape = {b.records};
    if (b.taps) {
      tap = stage.domain[b.taps->axis].var;
      factor_tap = Var("tap");
      factor_index.push_back(*tap);
      factor_vars.push_back(*factor_tap);
      factor_shape.push_back(b.taps->taps);
    }
    auto factor_value = [&](const Expr& e) {
      Expr value = decode_records(b, stage, e, within(at(sorted, Expr(f)), 0, b.records - 1));
      return factor_tap ? substitute(value, tap->get(), *factor_tap) : value;
    };
    FactorHoister hoister(broadcast, factor_index, [&](const Expr& e) {
      Tensor factor = temporary(prefix + "_factor", factor_shape, e.dtype());
      factor_stages.push_back(ir::compute(
          factor, ir::over(factor_vars, factor_shape),
          ir::select(Expr(f) < filled, factor_value(e), ir::constant(e.dtype(), 0))));
      return factor;
    });
    Expr body = hoister.mutate(stage.value);
    if (b.taps && stage.condition.defined() && depends_on(stage.condition, tap->get()) &&
        !(only_index_bounds(stage, stage.condition) &&
          reads_independent_of(stage.value, tap->get()))) {
      // Each tap adds only where the scatter's condition holds (+0 otherwise: a sum that
      // starts from +0 is unchanged by it, so the same bits as skipping the term).
      Tensor valid = temporary(prefix + "_valid", factor_shape, DType::kI32);
      factor_stages.push_back(ir::compute(
          valid, ir::over(factor_vars, factor_shape),
          ir::select(Expr(f) < filled && factor_value(stage.condition), one,
                     ir::constant(DType::kI32, 0))));
      body = ir::select(ir::load(valid, factor_index) != ir::constant(DType::kI32, 0), body,
                        ir::constant(body.dtype(), 0));
    }
    if (!factor_stages.empty()) {
      kernels.push_back(ir::Kernel{prefix + "_factors", std::move(factor_stages), {}});
    }
    int64_t broadcast_elements = 1;
    std::vector<const ir::VarNode*> broadcast_vars;  // the gather's, in target order
    for (int j = 0; j < target->rank(); ++j) {
      if (!b.component_axis[j]) continue;
      body = substitute(body, stage.domain[*b.component_axis[j]].var.get(), vars[j]);
      broadcast_elements *= target->shape[j];
      broadcast_vars.push_back(vars[j].get());
    }
    const int64_t record_terms = b.records * (b.taps ? b.taps->taps : 1);
    const bool crowded = record_terms >= options.records_per_cell_min * b.cells;
    const int64_t row_bytes = broadcast_elements * ir::dtype_bytes(target->dtype);
    const bool cheap_copies =
        (options.sparse_tiled_min > 0 && broadcast_elements >= options.sparse_tiled_min) ||
        (options.sparse_row_bytes_max > 0 && row_bytes <= options.sparse_row_bytes_max);
    // At least one record per cell on average: the regime measured (nearest on a grid of the
    // input's size); sparser grids, whose gather mostly writes empty cells, keep the planar one.
    const bool wide = options.sparse_channels_last_min > 0 &&
                      broadcast_elements >= options.sparse_channels_last_min && cheap_copies &&
                      record_terms >= b.cells;
    const bool innermost = options.channels_last_min > 0 && !broadcast_vars.empty() &&
                           broadcast_elements >= options.channels_last_min && (crowded || wide);
    if (notes && options.sparse_channels_last_min > 0 && options.channels_last_min > 0 &&
        !broadcast_vars.empty() && broadcast_elements >= options.channels_last_min && !crowded) {
      add_schedule_note(
          *notes, prefix + "_count",
          std::string("binned layout: ") + (wide ? "broadcast-innermost" : "planar") + " at " +
              std::to_string(record_terms) + " records over " + std::to_string(b.cells) +
              " cells (< " + std::to_string(options.records_per_cell_min) + " per cell" +
              (record_terms >= b.cells ? "" : ", < 1") + ") and " +
              std::to_string(broadcast_elements) + " broadcast elements " +
              (broadcast_elements >= options.sparse_channels_last_min ? ">= " : "< ") +
              std::to_string(options.sparse_channels_last_min) +
              " (ADJOINT_TUNE_BINNED_SPARSE_CHANNELS_LAST), rows of " +
              std::to_string(row_bytes) + " bytes, copies " +
              (cheap_copies ? "tiled or stored directly" : "plain"));
    }
    if (innermost) {
      std::map<std::pair<std::string, std::vector<int>>, Tensor> copies;
      BroadcastInnermost transposer(broadcast_vars, [&](const Tensor& x,
                                                        const std::vector<int>& order) {
        Tensor& copy = copies[{x->name, order}];
        if (copy) return copy;
        std::vector<int64_t> shape;
        for (int k : order) shape.push_back(x->shape[k]);
        copy = temporary(prefix + "_" + x->name + "_transposed", shape, x->dtype);
        std::vector<Var> copy_vars;
        for (size_t k = 0; k < order.size(); ++k) copy_vars.emplace_back("d" + std::to_string(k));
        std::vector<Expr> source(order.size());
        for (size_t k = 0; k < order.size(); ++k) source[order[k]] = copy_vars[k];
        kernels.push_back(ir::Kernel{copy->name,
                                     {ir::compute(copy, ir::over(copy, copy_vars),
                                                  ir::load(x, std::move(source)))},
                                     {}});
        return copy;
      });
      body = transposer.mutate(body);
    }
    body = decode_records(b, stage, body, within(at(sorted, Expr(q)), 0, b.records - 1));
    if (body.dtype() != stage.accumulation) body = ir::cast(stage.accumulation, body);
    // The bucket an element reads: its own cell, or with taps in the gather, per tap, the cell
    // of the base that this tap shifts onto the element. With clamped components (binned_taps.h)
    // an element on an edge reads, per tap, a range of keys in each clamped component: the
    // innermost component's range is one span of slots (its keys are consecutive), and an outer
    // one's range is its own key plus keys below it (low edge) or above it (high edge).
    const Expr zero = Expr(int64_t{0});
    const Expr next = Expr(int64_t{1});
    int inner = -1;  // the innermost non-broadcast component (the key's fastest)
    for (int j = 0; j < target->rank(); ++j) {
      if (!b.component_axis[j]) inner = j;
    }
    int outer_clamped = -1;
    std::vector<Expr> first_key(target->rank()), last_key(target->rank());
    for (int j = 0; j < target->rank(); ++j) {
      if (b.component_axis[j]) continue;
      if (!b.taps) {
        first_key[j] = last_key[j] = indices[j];
        continue;
      }
      const Expr k = key_component(b, j, Expr(vars[j]), b.taps->shift[j]);
      first_key[j] = last_key[j] = k;
      if (!b.taps->clamped[j]) continue;
      if (j != inner) {
        outer_clamped = j;  // plan_binning allows one
        continue;
      }
      first_key[j] = ir::select(Expr(vars[j]) == zero, zero, k);
      last_key[j] = ir::select(Expr(vars[j]) == Expr(target->shape[j] - 1),
                               Expr(b.key_extent[j] - 1), k);
    }
    // The linear key of the components `keys` (row-major over the non-broadcast ones).
    auto linear_key = [&](const std::vector<Expr>& keys) {
      if (!b.taps) return cell_of(b, target, indices);
      Expr key;
      for (int j = 0; j < target->rank(); ++j) {
        if (b.component_axis[j]) continue;
        key = key.defined() ? key * Expr(b.key_extent[j]) + keys[j] : keys[j];
      }
      return simplify(key);
    };
    const int64_t chunk = walk_chunk(b, options);
    if (notes && options.gather_chunk < 0 && chunk != 64) {
      add_schedule_note(*notes, prefix + "_count",
                        "binned walk: chunks of " + std::to_string(chunk) + " slots (" +
                            std::to_string(b.records) + " records over " +
                            std::to_string(b.cells) +
                            " cells: a walk of about C + L / C terms for buckets of L, "
                            "ADJOINT_TUNE_BINNED_GATHER_CHUNK)");
    }
    const bool chunked = chunk > 0 && b.records >= chunk;
    Tensor sums;
    if (chunked)
      sums = chunk_sums(stage, b, key, offset, sorted, filled, body, q, vars, chunk, sub, prefix,
                        inner, kernels);
    // The walk of the slots of the keys from `first` to `last` (in one span).
    auto walk_of = [&](const std::vector<Expr>& first, const std::vector<Expr>& last) {
      const Expr begin = within(at(offset, scaled(linear_key(first), sub)), 0, b.records);
      const Expr end =
          within(at(offset, scaled(linear_key(last) + next, sub)), 0, b.records);
      return chunked ? chunked_walk(stage, b, sums, body, q, begin, end, vars, chunk)
                     : ir::sum({ir::range(q, begin, end - begin)}, body, stage.accumulation);
    };
    // Taps in the gather: the taps in order, each its bucket's sum, written out as adds
    // ((w(0) + w(1)) + w(2)) ...: the bits of a sum from +0 (no bucket sum is -0, as each
    // starts from +0), but no constant-trip reduction for the schedule passes to tile (a
    // thread tile over the batch made the bicubic gather serial in 32 batch points).
    auto over_taps = [&](const Expr& walk) {
      if (!b.taps) return walk;
      Expr sum;
      for (int64_t k = 0; k < b.taps->taps; ++k) {
        Expr w = simplify(substitute(walk, tap->get(), Expr(k)));
        if (auto* c = w.as<ir::FloatConstNode>(); c && c->value == 0.0 && sum.defined())
          continue;  // a tap with no keys here (an edge kernel's)
        if (sum.defined()) w = FreshReduceVars().mutate(w);
        sum = sum.defined() ? sum + w : w;
      }
      return sum;
    };
    Expr total = over_taps(walk_of(first_key, last_key));
    if (outer_clamped >= 0) {
      // The outer clamped component's other keys on its edges, each a span like the first:
      // on the low edge the max_shift - shift keys below the own one (from key 0), on the
      // high edge the shift - min_shift above it; at most max_shift - min_shift per tap. Their
      // sums over the taps are a kernel of its own over the two edges' elements (few, and the
      // gather's code stays one span per tap), which the gather adds on its edges. The edge is
      // a domain axis there (0 low, 1 high), so that the row loops keep run-time trip counts
      // of at most max_shift - min_shift, which the emitter leaves rolled (and so does it the
      // walks in them: RolledLoopKernels).
      const int j = outer_clamped;
      const int64_t extent = target->shape[j];
      const Expr high_edge = Expr(extent - 1);
      std::vector<Var> edge_vars = vars;
      const Var side(vars[j].name_hint() + "_edge");
      edge_vars[j] = side;
      const Expr low = Expr(side) == zero;
      const Expr shift = b.taps->shift[j];
      Var row("key" + std::to_string(j) + "_edge");
      std::vector<Expr> first = first_key, last = last_key;
      first[j] = last[j] = row;
      Expr rows = ir::sum({ir::range(row, ir::select(low, zero, first_key[j] + next),
                                     ir::select(low, Expr(b.taps->max_shift[j]) - shift,
                                                shift - Expr(b.taps->min_shift[j])))},
                          walk_of(first, last), stage.accumulation);
      rows = substitute(rows, vars[j].get(), ir::select(low, zero, high_edge));
      for (size_t v = 0; v < vars.size(); ++v) {
        if (static_cast<int>(v) != j) rows = substitute(rows, vars[v].get(), edge_vars[v]);
      }
      std::vector<int64_t> shape = target->shape;
      shape[j] = 2;
      Tensor edges = temporary(prefix + "_edges", shape, stage.accumulation);
      kernels.push_back(ir::Kernel{
          edges->name, {ir::compute(edges, ir::over(edge_vars, shape), over_taps(rows))}, {}});
      if (rolled_kernels) rolled_kernels->insert(edges->name);
      for (int64_t e = 0; e < 2; ++e) {
        std::vector<Expr> edge_index(vars.begin(), vars.end());
        edge_index[j] = Expr(e);
        total = total + ir::select(Expr(vars[j]) == (e == 0 ? zero : high_edge),
                                   ir::load(edges, edge_index),
                                   ir::constant(stage.accumulation, 0.0));
      }
    }
    if (total.dtype() != target->dtype) total = ir::cast(target->dtype, total);
    if (!innermost) {
      if (reread) reread_kernels->insert(kernel.name);
      kernels.push_back(
          ir::Kernel{kernel.name, {ir::compute(target, ir::over(target, vars), total)}, {}});
      return;
    }
    if (reread) reread_kernels->insert(kernel.name + "_gather");
    // Broadcast-innermost: gather into cells x broadcast indices, then copy into T's layout.
    std::vector<int> order;  // gathered component k is target component order[k]
    for (int j = 0; j < target->rank(); ++j) {
      if (!b.component_axis[j]) order.push_back(j);
    }
    for (int j = 0; j < target->rank(); ++j) {
      if (b.component_axis[j]) order.push_back(j);
    }
    // Short walks: a thread may take a cell's broadcast elements whole (vector_groups.h).
    if (whole_axis_kernels && options.whole_axis_records_max > 0 &&
        (broadcast_elements & (broadcast_elements - 1)) != 0) {
      const bool whole = b.records <= options.whole_axis_records_max * b.cells;
      if (whole) {
        whole_axis_kernels->insert(kernel.name + "_gather");
        whole_axis_kernels->insert(prefix + "_chunk_sums");
      }
      if (notes) {
        add_schedule_note(
            *notes, kernel.name + "_gather",
            std::string("whole-axis groups: ") +
                (whole ? "allowed where 2^15 cells remain" : "not taken") + " (" +
                std::to_string(b.records) + " records over " + std::to_string(b.cells) +
                " cells " + (whole ? "<=" : ">") + " " +
                std::to_string(options.whole_axis_records_max) +
                " per cell, ADJOINT_TUNE_WHOLE_AXIS_GROUPS)");
      }
    }
    std::vector<Var> gather_vars;
    std::vector<int64_t> gather_shape;
    for (int j : order) {
      gather_vars.push_back(vars[j]);
      gather_shape.push_back(target->shape[j]);
    }
    Tensor gathered = temporary(prefix + "_gathered", gather_shape, target->dtype);
    kernels.push_back(ir::Kernel{
        kernel.name + "_gather",
        {ir::compute(gathered, ir::over(gathered, gather_vars), total)},
        {}});
    std::vector<Var> copy_vars;
    for (int j = 0; j < target->rank(); ++j) copy_vars.emplace_back("o" + std::to_string(j));
    std::vector<Expr> source;
    for (int j : order) source.push_back(copy_vars[j]);
    kernels.push_back(ir::Kernel{
        kernel.name,
        {ir::compute(target, ir::over(target, copy_vars), ir::load(gathered, std::move(source)))},
        {}});
  }

 private:
  ir::Program& out_;
};

/// How many stages of the program write `t`, and whether a kernel before `before` reads it.
bool sole_writer_unread_before(const ir::Program& program, const Tensor& t, size_t before) {
  int writers = 0;
  for (const ir::Kernel& k : program.kernels) {
    for (const ir::Stage& s : k.stages) writers += s.target == t;
  }
  if (writers != 1) return false;
  for (size_t k = 0; k < before; ++k) {
    for (const Tensor& r : tensors_read(program.kernels[k])) {
      if (r == t) return false;
    }
  }
  return true;
}

/// The records each point of `stage` scatters: the taps in the gather, else the product of the
/// record axes that are taps of the value, an axis some load of the value does not depend on
/// while it depends on every other record axis (grid_sampler's tap: the point's grad_output row
/// and coordinates serve all its taps, at any padding); 1 where there is none (nearest).
int64_t taps_per_point(const ir::Stage& stage, const Binning& b) {
  if (b.taps) return b.taps->taps;
  int64_t taps = 1;
  for (size_t i = 0; i < b.record_axes.size(); ++i) {
    const ir::VarNode* axis = stage.domain[b.record_axes[i]].var.get();
    bool tap = false;
    for_each_node(stage.value, [&](const Expr& e) {
      if (tap || !e.as<ir::LoadNode>() || depends_on(e, axis)) return;
      bool others = true, any_other = false;  // a load of no record axis (a weight) says nothing
      for (size_t j = 0; j < b.record_axes.size(); ++j) {
        if (j == i || b.record_extents[j] <= 1) continue;
        const bool depends = depends_on(e, stage.domain[b.record_axes[j]].var.get());
        others = others && depends;
        any_other = any_other || depends;
      }
      tap = others && any_other;
    });
    if (tap) taps *= b.record_extents[i];
  }
  return taps;
}

/// Whether `plan`'s binned gather beats the atomics of `kernel`'s scatter
/// (binned_over_atomics_min_broadcast), with the reason noted for the kernel's dump.
/// The note is the atomics kernel's (the scatter keeps its name), or the binning's count
/// kernel's: the gather itself may be fused into the target and leave no kernel of that name.
bool faster_than_atomics(const ir::Kernel& kernel, const Binning& plan, ScheduleNotes* notes) {
  const ir::Stage& stage = kernel.stages[0];
  const int64_t taps = taps_per_point(stage, plan);
  const int64_t needed = binned_over_atomics_min_broadcast(taps);
  const bool faster = plan.broadcast_elements >= needed;
  if (notes) {
    add_schedule_note(*notes, faster ? stage.target->name + "_bin_count" : kernel.name,
                      std::string(faster ? "binned gather although atomics are allowed: "
                                         : "atomics (allowed, and faster here than the binned "
                                           "gather): ") +
                          std::to_string(plan.broadcast_elements) + " broadcast elements " +
                          (faster ? ">= " : "< ") + std::to_string(needed) + " for " +
                          std::to_string(taps) + (taps == 1 ? " tap" : " taps") + " a point");
  }
  return faster;
}

}  // namespace

int64_t binned_over_atomics_min_broadcast(int64_t taps) {
  if (taps <= 1) return 32;
  return taps <= 8 ? 16 : 8;
}

bool binned_gather_beats_atomics(const ir::Stage& stage) {
  if (stage.kind != ir::StageKind::kScatterAdd) return false;
  const std::optional<Binning> plan = plan_binning(stage, BinnedGatherOptions{});
  return plan && plan->broadcast_elements >=
                     binned_over_atomics_min_broadcast(taps_per_point(stage, *plan));
}

ir::Program lower_scatter_to_binned_gather(const ir::Program& program, ClaimSlotTensors* claims,
                                           const BinnedGatherOptions& options,
                                           StoreScatterTargets* stores, ScheduleNotes* notes,
                                           LaneKernels* lane_kernels,
                                           WholeAxisKernels* whole_axis_kernels,
                                           CountingClaims* counting_claims,
                                           LaneScanKernels* lane_scan_kernels,
                                           RereadRowKernels* reread_kernels,
                                           RolledLoopKernels* rolled_kernels) {
  ir::Program out = program;
  out.kernels.clear();
  Rewriter rewriter(out);
  bool changed = false;
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    const ir::Kernel& kernel = program.kernels[k];
    std::optional<Binning> plan;
    if (kernel.stages.size() == 1 && kernel.stages[0].kind == ir::StageKind::kScatterAdd &&
        kernel.stages[0].target->role != ir::TensorRole::kInput &&
        sole_writer_unread_before(program, kernel.stages[0].target, k)) {
      plan = plan_binning(kernel.stages[0], options);
    }
    if (plan && options.only_where_faster && !faster_than_atomics(kernel, *plan, notes)) {
      plan.reset();
    }
    if (!plan) {
      out.kernels.push_back(kernel);
      continue;
    }
    rewriter.rewrite(kernel, kernel.stages[0], *plan, out.kernels, claims, options, stores,
                     notes, lane_kernels, whole_axis_kernels, counting_claims,
                     lane_scan_kernels, reread_kernels, rolled_kernels);
    changed = true;
  }
  return changed ? out : program;
}

}  // namespace adjoint::compiler
