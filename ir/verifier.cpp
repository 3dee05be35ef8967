// The verifier: walks a program kernel by kernel and stage by stage and throws the first broken
// rule as an adjoint::Error (kInvalidProgram) that says where (program, kernel, stage), which rule
// and what it expected and got.
//
// Bounds are checked by interval analysis over the domain and reduce ranges. An index that is
// affine in the index variables gets its exact range (each reduce variable is rewritten as its
// start plus an offset over [0, extent) when the extent is a positive constant), so any point
// outside the tensor is an error; any other index is an error only when its whole range lies
// outside. Loads in a select branch, on the right of && / ||, under a scatter_add condition or in
// a reduce that may be empty run at only some points: for them, too, only an index that can
// never be in bounds is an error.
#include "ir/verifier.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/error.h"
#include "ir/bounds.h"
#include "ir/printer.h"
#include "ir/visitor.h"

namespace adjoint::ir {
namespace {

/// Whether an expression runs at every point of the stage's domain, at some, or at none.
enum class Reach { kEveryPoint, kSomePoints, kNoPoint };
Reach weaker(Reach r) {
  return r == Reach::kEveryPoint ? Reach::kSomePoints : r;
}

std::string quoted(const std::string& s) {
  return "'" + s + "'";
}
std::string dtype_string(DType t) {
  return std::string(dtype_name(t));
}
std::string extents_string(const std::vector<Axis>& domain) {
  std::string s;
  for (const Axis& ax : domain) s += (s.empty() ? "" : ", ") + to_string(ax.extent);
  return "[" + s + "]";
}

class Verifier {
 public:
  explicit Verifier(const Program& program) : program_(program) {}

  void run() {
    std::map<std::string, int> count;
    for (const auto* list : {&program_.inputs, &program_.outputs, &program_.temporaries}) {
      for (const Tensor& t : *list) declared_.insert(t.get()), ++count[t->name];
    }
    for (const auto& [name, n] : count) {
      if (n > 1)
        fail("tensor names: " + quoted(name) + " is declared more than once", "unique names",
             std::to_string(n) + " tensors with this name");
    }
    for (const Kernel& k : program_.kernels) check_kernel(k);
    kernel_ = nullptr;
    for (const Tensor& t : program_.outputs) {
      if (!written_.count(t.get()))
        fail("writes: output " + quoted(t->name) + " is never written", "a stage that writes it",
             "none");
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what, const std::string& expected,
                         const std::string& got) const {
    std::string where = "verify: program " + quoted(program_.name);
    if (kernel_) where += ", kernel " + quoted(kernel_->name);
    if (stage_) {
      std::string target = stage_->target ? quoted(stage_->target->name) : "<no tensor>";
      where += ", stage " + std::to_string(stage_index_) + " (" +
               (stage_->kind == StageKind::kCompute ? "compute " : "scatter_add into ") + target +
               ")";
    }
    throw Error(where + ": " + what + ", expected " + expected + ", got " + got,
                ErrorCode::kInvalidProgram);
  }

  void check_kernel(const Kernel& k) {
    kernel_ = &k;
    kernel_targets_.clear();
    computed_in_kernel_.clear();
    for (const Stage& s : k.stages) kernel_targets_.insert(s.target.get());
    for (size_t i = 0; i < k.stages.size(); ++i) {
      stage_ = &k.stages[i];
      stage_index_ = static_cast<int>(i);
      check_stage(k.stages[i], k.stages.front().domain);
      if (stage_->kind == StageKind::kCompute) computed_in_kernel_.insert(stage_->target.get());
    }
    stage_ = nullptr;
    check_grid(k);
    written_before_kernel_.insert(kernel_targets_.begin(), kernel_targets_.end());
  }

  /// A row-group kernel (Kernel::row_axes > 0): compute stages whose domains share the row
  /// axes, and a set grid of whole rows per block with nothing else.
  void check_row_group(const Kernel& k) {
    const GridConfig& g = k.grid;
    if (k.row_axes < 0) fail("rows: invalid row axes", "0 or more", std::to_string(k.row_axes));
    if (k.row_axes == 0) {
      if (g.rows_per_block != 0)
        fail("grid: rows per block outside a row-group kernel", "0",
             std::to_string(g.rows_per_block));
      if (g.row_per_thread)
        fail("grid: a row per thread outside a row-group kernel", "no row per thread",
             "a row per thread");
      return;
    }
    for (const Stage& s : k.stages) {
      if (s.kind != StageKind::kCompute)
        fail("rows: a row-group kernel's stages", "compute stages", "a scatter_add stage");
    }
    if (!g.is_set || !g.bindings.empty() || g.rows_per_block < 1 || g.vector_width != 1 ||
        g.reduction_lanes != 1 || g.tile_points != 1)
      fail("grid: a row-group kernel's grid",
           "set, no axis bindings, at least one row per block, no vector width, reduction "
           "lanes or thread tile",
           "rows per block " + std::to_string(g.rows_per_block) + ", " +
               std::to_string(g.bindings.size()) + " bindings");
    if (g.block_size < 1 || g.block_size > 1024)
      fail("grid: invalid block size", "1 to 1024 threads", std::to_string(g.block_size));
    if (g.row_per_thread && g.block_size != g.rows_per_block)
      fail("grid: a row per thread", "one thread per row of the block (" +
               std::to_string(g.rows_per_block) + " threads)",
           std::to_string(g.block_size) + " threads");
  }

  void check_grid(const Kernel& k) {
    const GridConfig& g = k.grid;
    check_row_group(k);
    if (!g.is_set || k.row_axes > 0) return;
    std::vector<Axis> domain = k.stages.empty() ? std::vector<Axis>{} : k.stages.front().domain;
    if (g.bindings.size() != domain.size())
      fail("grid: one binding per domain axis", std::to_string(domain.size()) + " bindings",
           std::to_string(g.bindings.size()));
    if (g.block_size < 1 || g.block_size > 1024)
      fail("grid: invalid block size", "1 to 1024 threads", std::to_string(g.block_size));
    // A power of two, or a whole linear axis of at most 16 points (compiler/vector_groups.h,
    // whole-axis groups: 3 channels per thread).
    bool whole_axis = false;
    for (size_t i = 0; i < domain.size() && i < g.bindings.size(); ++i) {
      const auto* extent = domain[i].extent.as<IntConstNode>();
      whole_axis |= g.bindings[i] == AxisBinding::kLinear && extent &&
                    extent->value == g.vector_width;
    }
    if (g.vector_width < 1 || g.vector_width > 16 ||
        ((g.vector_width & (g.vector_width - 1)) && !whole_axis))
      fail("grid: invalid vector width",
           "a power of two from 1 to 16, or the extent of a linear axis of at most 16",
           std::to_string(g.vector_width));
    int block_axes = 0;
    int64_t threads = 1;
    bool has_linear = false;
    for (size_t i = 0; i < domain.size(); ++i) {
      int64_t extent = domain[i].extent.as<IntConstNode>()->value;
      if (g.bindings[i] == AxisBinding::kThread) threads *= extent;
      has_linear |= g.bindings[i] == AxisBinding::kLinear;
      if (g.bindings[i] != AxisBinding::kBlock) continue;
      int64_t limit = block_axes++ == 0 ? 2147483647 : 65535;
      if (extent > limit)
        fail("grid: block axis " + std::to_string(i) + " exceeds the grid dimension",
             "at most " + std::to_string(limit) + " blocks", std::to_string(extent));
    }
    if (block_axes > 3)
      fail("grid: too many block axes", "at most 3 (x, y, z)", std::to_string(block_axes));
    if (threads > g.block_size)
      fail("grid: the thread axes do not fit in one block",
           "at most " + std::to_string(g.block_size) + " threads", std::to_string(threads));
    if (g.vector_width > 1 && !has_linear)
      fail("grid: a vector width needs a linear axis", "a linear binding", "none");
    if (g.reduction_lanes != 1 && g.reduction_lanes != 4 && g.reduction_lanes != 8 &&
        g.reduction_lanes != 16 && g.reduction_lanes != 32)
      fail("grid: invalid reduction lanes", "1, or 4, 8, 16 or 32 lanes of a warp per point",
           std::to_string(g.reduction_lanes));
    if (g.reduction_lanes > 1) {
      bool all_linear = true;
      for (AxisBinding b : g.bindings) all_linear &= b == AxisBinding::kLinear;
      if (!all_linear || g.block_size % 32 != 0)
        fail("grid: cooperative reduction lanes", "every axis linear and a block of whole warps",
             "a grid of " + std::to_string(g.block_size) + " threads or other bindings");
    }
    if (g.tile_points < 1)
      fail("grid: invalid thread tile", "at least 1 point", std::to_string(g.tile_points));
    if (g.tile_points > 1) {
      const bool axis_ok = g.tile_axis >= 0 && static_cast<size_t>(g.tile_axis) < domain.size();
      if (!axis_ok)
        fail("grid: thread tile axis", "a domain axis", std::to_string(g.tile_axis));
      int64_t extent = domain[g.tile_axis].extent.as<IntConstNode>()->value;
      // A tile that does not divide its axis ends in a partial tile (its points past the
      // extent are computed at a clamped index and never stored); it must not exceed the axis.
      if (g.bindings[g.tile_axis] != AxisBinding::kLinear || extent < g.tile_points)
        fail("grid: thread tile axis " + std::to_string(g.tile_axis),
             "a linear axis at least as long as the tile",
             "extent " + std::to_string(extent) + ", tile " + std::to_string(g.tile_points));
      if (g.reduction_lanes > 1)
        fail("grid: thread tile", "no cooperative reduction lanes", "reduction lanes");
    }
    if (g.tile_block_rows < 1 || (g.tile_block_rows > 1 && g.tile_points < 2))
      fail("grid: thread tile rows", "1, or rows of a thread tile",
           std::to_string(g.tile_block_rows) + " rows, tile of " + std::to_string(g.tile_points));
    if (g.block_tokens < 0)
      fail("grid: block reduction tokens", "0 (none) or a count", std::to_string(g.block_tokens));
    if (g.block_tokens > 0) {
      const bool axis_ok =
          g.block_output_axis >= 0 && static_cast<size_t>(g.block_output_axis) < domain.size();
      if (!axis_ok || g.bindings[g.block_output_axis] != AxisBinding::kThread)
        fail("grid: block reduction output axis", "a domain axis bound to threads",
             std::to_string(g.block_output_axis));
      if (g.reduction_lanes > 1 || g.tile_points > 1 || g.vector_width > 1)
        fail("grid: block reduction", "no reduction lanes, thread tile or vector width",
             "lanes " + std::to_string(g.reduction_lanes) + ", tile " +
                 std::to_string(g.tile_points) + ", width " + std::to_string(g.vector_width));
      if (g.block_token_points < 1 || g.block_output_points < 1 || g.block_chunk < 1 ||
          g.block_tokens % g.block_token_points != 0)
        fail("grid: block reduction tile", "positive points per thread, a chunk, and tokens "
             "divisible by the token points per thread", std::to_string(g.block_tokens));
      if (g.block_stage_width < 1 || g.block_chunk % g.block_stage_width != 0)
        fail("grid: block reduction staging width", "at least 1 and dividing the chunk",
             std::to_string(g.block_stage_width));
    }
  }

  void check_stage(const Stage& s, const std::vector<Axis>& kernel_domain) {
    check_target(s);
    check_domain(s.domain, kernel_domain);
    binders_.clear();
    if (!s.value.defined()) fail("stage: no value", "an expression", "undefined");
    if (s.kind == StageKind::kCompute) {
      check_compute(s);
    } else {
      check_scatter_add(s);
    }
    Reach reach = Reach::kEveryPoint;
    for (const Axis& ax : s.domain) {
      bind_once(ax.var, &s);
      int64_t extent = ax.extent.as<IntConstNode>()->value;
      ranges_.bind_domain({ax});
      if (extent == 0) reach = Reach::kNoPoint;
    }
    if (s.condition.defined()) {
      check_expr(s.condition, reach);
      reach = weaker(reach);
    }
    for (size_t d = 0; d < s.indices.size(); ++d) {
      check_expr(s.indices[d], reach);
      check_index(s.indices[d], *s.target, d, reach, "scatter_add into");
    }
    check_expr(s.value, reach);
    for (const Axis& ax : s.domain) ranges_.unbind(ax.var.get());
  }

  void check_target(const Stage& s) {
    if (!s.target) fail("writes: the stage has no target", "a tensor", "none");
    const TensorNode* t = s.target.get();
    require_declared(*t);
    if (t->role == TensorRole::kInput)
      fail("writes: the stage writes " + quoted(t->name), "an output or a temporary", "an input");
    bool is_compute = s.kind == StageKind::kCompute;
    if (computed_.count(t) || (is_compute && written_.count(t)))
      fail("writes: " + quoted(t->name) + " is written by a compute stage and by another stage",
           "one compute stage, or scatter_add stages only", "a second stage");
    written_.insert(t);
    if (is_compute) computed_.insert(t);
  }

  void check_domain(const std::vector<Axis>& domain, const std::vector<Axis>& kernel_domain) {
    for (const Axis& ax : domain) {
      auto* start = ax.start.as<IntConstNode>();
      if (!start || start->value != 0)
        fail("domain: axis " + quoted(ax.var.name_hint()) + " must start at 0", "0",
             to_string(ax.start));
      auto* extent = ax.extent.as<IntConstNode>();
      if (!extent || extent->value < 0)
        fail("domain: the extent of axis " + quoted(ax.var.name_hint()) + " must be a constant",
             "a constant >= 0", to_string(ax.extent));
    }
    // A row-group kernel's stages share only the row axes (its first row_axes).
    const size_t rows = static_cast<size_t>(std::max(kernel_->row_axes, 0));
    bool same = rows > 0 ? domain.size() >= rows && kernel_domain.size() >= rows
                         : domain.size() == kernel_domain.size();
    for (size_t i = 0; same && i < (rows > 0 ? rows : domain.size()); ++i) {
      same = domain[i].extent.as<IntConstNode>()->value ==
             kernel_domain[i].extent.as<IntConstNode>()->value;
    }
    if (!same && rows > 0)
      fail("domain: the stages of a row-group kernel share the row axes",
           "the first " + std::to_string(rows) + " axes of stage 0, " +
               extents_string(kernel_domain),
           extents_string(domain));
    if (!same)
      fail("domain: the stages of a kernel share one domain",
           "the domain of stage 0, " + extents_string(kernel_domain), extents_string(domain));
  }

  void check_compute(const Stage& s) {
    const TensorNode& t = *s.target;
    bool matches = static_cast<int>(s.domain.size()) == t.rank();
    for (int d = 0; matches && d < t.rank(); ++d)
      matches = s.domain[d].extent.as<IntConstNode>()->value == t.shape[d];
    if (!matches) {
      std::string shape;
      for (int64_t n : t.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(n);
      fail("compute stage: the domain must be the target's shape", "[" + shape + "]",
           extents_string(s.domain));
    }
    if (s.value.dtype() != t.dtype)
      fail("compute stage: the value's dtype must be the target's", dtype_string(t.dtype),
           dtype_string(s.value.dtype()));
    if (!s.indices.empty() || s.condition.defined())
      fail("compute stage: indices and a condition belong to scatter_add", "none",
           "indices or a condition");
  }

  void check_scatter_add(const Stage& s) {
    const TensorNode& t = *s.target;
    if (static_cast<int>(s.indices.size()) != t.rank())
      fail("scatter_add stage: one index per target dimension",
           std::to_string(t.rank()) + " indices", std::to_string(s.indices.size()));
    for (size_t d = 0; d < s.indices.size(); ++d) {
      if (!s.indices[d].defined() || !is_integer(s.indices[d].dtype()))
        fail("scatter_add stage: index " + std::to_string(d) + " must be an integer", "i32 or i64",
             s.indices[d].defined() ? dtype_string(s.indices[d].dtype()) : "undefined");
    }
    if (s.value.dtype() != s.accumulation)
      fail("scatter_add stage: the value's dtype must be the accumulation dtype",
           dtype_string(s.accumulation), dtype_string(s.value.dtype()));
    bool same_kind = is_float(t.dtype) ? is_float(s.accumulation) : is_integer(s.accumulation);
    if (!same_kind || t.dtype == DType::kBool ||
        dtype_bytes(s.accumulation) < dtype_bytes(t.dtype)) {
      fail("scatter_add stage: the accumulation dtype must be at least as wide as the target",
           std::string(is_float(t.dtype) ? "a float" : "an integer") +
               " type at least as wide as " + dtype_string(t.dtype),
           dtype_string(s.accumulation));
    }
    if (s.condition.defined() && s.condition.dtype() != DType::kBool)
      fail("scatter_add stage: the condition must be bool", "bool",
           dtype_string(s.condition.dtype()));
  }

  /// `binder` is the stage or reduce node binding v; a reduce node shared by two parts of an
  /// expression binds its variables once.
  void bind_once(const Var& v, const void* binder) {
    if (ranges_.is_bound(v.get()))
      fail("variable binding: " + quoted(v.name_hint()) + " is bound twice",
           "each variable bound once", "a second binding in the scope of the first");
    auto [it, first] = binders_.emplace(v.get(), binder);
    if (!first && it->second != binder)
      fail("variable binding: " + quoted(v.name_hint()) + " is bound by two reduces of the stage",
           "one binder per variable in a stage", "two");
  }

  void require_declared(const TensorNode& t) {
    if (!declared_.count(&t))
      fail("tensor names: " + quoted(t.name) + " is not declared by the program",
           "one of its inputs, outputs or temporaries", "an undeclared tensor");
  }

  void check_expr(const Expr& e, Reach reach) {
    if (auto* v = e.as<VarNode>()) {
      if (!ranges_.is_bound(v))
        fail("variable binding: " + quoted(v->name_hint) + " is not bound here",
             "a variable of the stage domain or of an enclosing reduce", "a free variable");
    } else if (auto* load = e.as<LoadNode>()) {
      require_declared(*load->tensor);
      for (const Expr& i : load->indices) check_expr(i, reach);
      check_dataflow(e, *load);
      for (size_t d = 0; d < load->indices.size(); ++d)
        check_index(load->indices[d], *load->tensor, d, reach, "load of");
    } else if (auto* s = e.as<SelectNode>()) {
      check_expr(s->condition, reach);
      check_expr(s->true_value, weaker(reach));
      check_expr(s->false_value, weaker(reach));
    } else if (auto* b = e.as<BinaryNode>();
               b && (b->op == BinaryOp::kAnd || b->op == BinaryOp::kOr)) {
      check_expr(b->a, reach);
      check_expr(b->b, weaker(reach));  // short-circuit: evaluated at some points only
    } else if (auto* r = e.as<ReduceNode>()) {
      check_reduce(*r, reach);
    } else {
      for_each_child(e, [&](const Expr& child) { check_expr(child, reach); });
    }
  }

  void check_reduce(const ReduceNode& r, Reach reach) {
    std::set<const VarNode*> own;
    for (const Axis& ax : r.axes) own.insert(ax.var.get());
    for (const Axis& ax : r.axes) {
      for (const Expr* bound : {&ax.start, &ax.extent}) {
        visit_post_order(*bound, [&](const Expr& x) {
          auto* v = x.as<VarNode>();
          if (v && own.count(v))
            fail("reduce axes: the start or extent of axis " + quoted(ax.var.name_hint()) +
                     " uses " + quoted(v->name_hint) + " of the same reduce",
                 "only variables bound outside the reduce", to_string(*bound));
        });
        check_expr(*bound, reach);
      }
    }
    for (const Axis& ax : r.axes) {
      bind_once(ax.var, &r);
      Interval extent = ranges_.of(ax.extent);
      if (extent.has_max() && extent.max <= 0) reach = Reach::kNoPoint;
      if (!extent.has_min() || extent.min <= 0) reach = weaker(reach);
      ranges_.bind_reduce_axis(ax);
    }
    check_expr(r.body, reach);
    for (const Axis& ax : r.axes) ranges_.unbind(ax.var.get());
  }

  void check_index(const Expr& index, const TensorNode& t, size_t dim, Reach reach,
                   const std::string& access) {
    if (reach == Reach::kNoPoint) return;
    std::optional<Interval> exact = ranges_.exact_of(index);
    Interval range = exact ? *exact : ranges_.of(index);
    int64_t size = t.shape[dim];
    bool somewhere = range.min < 0 || range.max >= size,
         everywhere = range.max < 0 || range.min >= size;
    if (everywhere || (somewhere && exact && reach == Reach::kEveryPoint)) {
      fail("out of bounds: index " + std::to_string(dim) + " of the " + access + " " +
               quoted(t.name) + " (" + to_string(index) + ")" +
               (everywhere ? " is never" : " is not always") + " in bounds",
           "values in [0, " + std::to_string(size) + ")", to_string(range));
    }
  }

  /// A stage reads a tensor its own kernel writes only where an earlier compute stage wrote it,
  /// at the same point; other tensors it reads must be inputs or written by an earlier kernel.
  void check_dataflow(const Expr& e, const LoadNode& load) {
    const TensorNode* t = load.tensor.get();
    if (t->role == TensorRole::kInput) return;
    if (computed_in_kernel_.count(t) && kernel_->row_axes > 0) {
      // A row-group kernel: anywhere in the same row (the block that owns it wrote it).
      const size_t rows = static_cast<size_t>(kernel_->row_axes);
      bool same_row = load.indices.size() >= rows;
      for (size_t d = 0; same_row && d < rows; ++d)
        same_row = load.indices[d].as<VarNode>() == stage_->domain[d].var.get();
      if (!same_row)
        fail("dataflow: " + quoted(t->name) +
                 " is read in another row than an earlier stage of this row-group kernel wrote",
             "the stage's own row variables as the first " + std::to_string(rows) + " indices",
             to_string(e));
    } else if (computed_in_kernel_.count(t)) {
      bool same_point = load.indices.size() == stage_->domain.size();
      for (size_t d = 0; same_point && d < load.indices.size(); ++d)
        same_point = load.indices[d].as<VarNode>() == stage_->domain[d].var.get();
      if (!same_point)
        fail("dataflow: " + quoted(t->name) +
                 " is read at another point than an earlier stage of this kernel wrote",
             "the stage's own domain point", to_string(e));
    } else if (kernel_targets_.count(t)) {
      fail("dataflow: " + quoted(t->name) + " is read in the kernel that writes it",
           "a read after an earlier compute stage or in a later kernel", to_string(e));
    } else if (!written_before_kernel_.count(t)) {
      fail("dataflow: " + quoted(t->name) + " is read before any kernel writes it",
           "a write in an earlier kernel", to_string(e));
    }
  }

  const Program& program_;
  const Kernel* kernel_ = nullptr;
  const Stage* stage_ = nullptr;
  int stage_index_ = 0;
  Bounds ranges_;
  std::map<const VarNode*, const void*> binders_;  // in the current stage
  std::set<const TensorNode*> declared_, written_, computed_;
  std::set<const TensorNode*> written_before_kernel_, kernel_targets_, computed_in_kernel_;
};

}  // namespace

void verify(const Program& program) {
  Verifier(program).run();
}

}  // namespace adjoint::ir
