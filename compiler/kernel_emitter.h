// KernelEmitter: the state of emitting one kernel of a lowered program as CUDA C++, shared by
// the three parts of the emitter, each in a file of its own:
//   emit_expressions.cpp  expressions (an ExprFunctor<std::string>), `const` temporaries per
//                         scope, serial and warp-cooperative reduction loops;
//   emit_statements.cpp   the kernel body: grid decoding, loops over points, stages;
//   emit_vector_groups.cpp the vector-group schedule (V points per thread, span loads, group
//                         stores and group reductions);
//   emit_lane_spans.cpp   lane spans of warp-cooperative reductions (V consecutive iterations
//                         a lane and trip, one alignment test);
//   emit_block_reduction.cpp the block reduction schedule (block_reductions.h): shared-memory
//                         staging of chunks, register tiles, per-point stores;
//   emit_row_groups.cpp   row-group kernels: a block-strided loop per stage, barriers between,
//                         or a row per thread without barriers;
//   cuda_emitter.cpp      the translation unit: comment, includes, signature and the body.
// Internal to compiler/: only those files include it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/bounds.h"
#include "compiler/compiled_program.h"
#include "compiler/cuda_emitter.h"
#include "compiler/cuda_syntax.h"
#include "compiler/index_width.h"
#include "compiler/launch_geometry.h"
#include "compiler/row_groups.h"
#include "compiler/stage_loops.h"
#include "compiler/structural_ids.h"
#include "compiler/vector_groups.h"
#include "ir/error.h"
#include "ir/program.h"
#include "ir/visitor.h"

namespace adjoint::compiler {

struct BlockReductionShape;

/// Emits one kernel: construct it, then call emit() once.
class KernelEmitter : public ir::ExprFunctor<std::string> {
 public:
  KernelEmitter(const ir::Program& program, const ir::Kernel& kernel, const EmitOptions& options)
      : program_(program),
        kernel_(kernel),
        options_(options),
        index_type_((options.index_width ? *options.index_width : kernel_index_width(kernel)) ==
                            IndexWidth::k32
                        ? "int"
                        : "long long") {}

  CompiledKernel emit(const std::string& entry);

 protected:
  std::string visit_IntConst(const ir::IntConstNode& n, const ir::Expr&) override {
    // i64 literals always carry LL so that no int-sized arithmetic can overflow.
    std::string s = cuda_int_literal(n.dtype, n.value);
    if (n.dtype == ir::DType::kI64 && s.find("LL") == std::string::npos) {
      return s.front() == '(' ? s.substr(0, s.size() - 1) + "LL)" : s + "LL";
    }
    return s;
  }
  std::string visit_FloatConst(const ir::FloatConstNode& n, const ir::Expr&) override {
    return cuda_float_literal(n.dtype, n.value);
  }
  std::string visit_Var(const ir::VarNode& n, const ir::Expr&) override {
    auto it = var_names_.find(&n);
    if (it == var_names_.end()) {
      throw Error(
          "emit_cuda: variable '" + n.name_hint + "' is not bound in kernel '" + kernel_.name + "'",
          ErrorCode::kInternal);
    }
    referenced_.insert(it->second);
    return it->second;
  }
  std::string visit_Load(const ir::LoadNode& n, const ir::Expr& self) override {
    std::string access;
    if (auto span = spans_.find(ids_.id(self)); span != spans_.end()) {
      access = span->second.name + "[" + span->second.index + "]";  // read by a group load
    } else {
      access = element(n.tensor, element_indices(n.tensor, n.indices));
    }
    if (n.tensor->name == options_.claim_slot_tensor) {
      if (options_.claim_counts_up) return "atomicAdd(&" + access + ", 1)";
      return "(atomicAdd(&" + access + ", -1) - 1)";
    }
    return is_half_precision(n.dtype) ? "adjoint::to_float(" + access + ")" : access;
  }
  std::string visit_Unary(const ir::UnaryNode& n, const ir::Expr&) override;
  std::string visit_Binary(const ir::BinaryNode& n, const ir::Expr&) override;
  std::string visit_Compare(const ir::CompareNode& n, const ir::Expr&) override {
    std::string type(value_type(n.a));
    if (value_type(n.b) != type && ir::is_integer(n.a.dtype())) type = "long long";
    return "(" + converted(n.a, type) + " " + std::string(ir::compare_op_name(n.op)) + " " +
           converted(n.b, type) + ")";
  }
  std::string visit_Select(const ir::SelectNode& n, const ir::Expr&) override;
  std::string visit_Cast(const ir::CastNode& n, const ir::Expr&) override;
  std::string visit_Reduce(const ir::ReduceNode& n, const ir::Expr&) override;

 private:
  /// Statements and value of an expression emitted one level deeper in a scope of its own.
  struct Captured {
    std::string statements;
    std::string value;
  };

  /// A block of the emitted body: its const temporaries (by structural id), the writer its
  /// statements go to, and whether it is a captured branch (a writer of its own, so an
  /// expression can be hoisted out of it by writing to the enclosing scope's writer).
  struct Scope {
    std::unordered_map<int, std::string> temps;
    CodeWriter* writer;
    bool captured;
  };

  std::string emit_expr(const ir::Expr& e, std::string_view hint = "");
  std::string bind(int id, const ir::Expr& e, const std::string& text, std::string_view hint,
                   size_t level);
  size_t hoist_level(const ir::Expr& e);
  bool speculatable(const ir::Expr& e);
  Captured capture(const ir::Expr& e);
  std::string declare(std::string_view hint, std::string_view type, const std::string& value);

  /// The C++ type an emitted expression has: its dtype's, but index variables are index_t.
  std::string value_type(const ir::Expr& e) const {
    return e.kind() == ir::ExprKind::kVar ? index_type_ : std::string(cuda_value_type(e.dtype()));
  }
  /// emit_expr(e), converted to `type` if its C++ type differs.
  std::string converted(const ir::Expr& e, const std::string& type) {
    if (auto* c = e.as<ir::IntConstNode>(); c && (type == "int" || type == "long long")) {
      bool fits = c->value >= INT32_MIN && c->value <= INT32_MAX;
      if (type == "int" && fits) return cuda_int_literal(ir::DType::kI32, c->value);
      if (type == "long long") return visit(ir::IntConstNode::make(ir::DType::kI64, c->value));
    }
    std::string text = emit_expr(e);
    return value_type(e) == type ? text : "(" + type + ")" + text;
  }
  std::string converted_named(const ir::Expr& e, const std::string& type, std::string_view hint) {
    std::string text = emit_expr(e, hint);
    return value_type(e) == type ? text : "(" + type + ")" + text;
  }
  /// An index expression in the kernel's index type (loads and stores are in bounds, so a
  /// 64-bit index value of a 32-bit kernel fits).
  std::string as_index(const ir::Expr& e) { return converted(e, index_type_); }
  std::string element(const ir::Tensor& t, const std::vector<std::string>& indices);
  /// The indices of an element of `t` as text. A variable indexing a dimension that element()
  /// drops (size 1 or stride 0, or a row dimension of a row-local temporary) does not count as
  /// used.
  std::vector<std::string> element_indices(const ir::Tensor& t,
                                           const std::vector<ir::Expr>& indices);
  std::string element_index(const ir::Tensor& t, size_t d, const ir::Expr& index);
  std::string integer_division(const ir::BinaryNode& n, const std::string& type);

  /// A reduce loop's bounds: `start` and `end` as emitted before the loops; `unrolled` when
  /// the trip count is a constant that keeps the product of the reduction's unrolled trip
  /// counts so far (`unrolled_trips`, updated) within kMaxUnrolledTrips.
  struct LoopBounds {
    std::string start, end;
    bool unrolled = false;
    bool long_constant = false;  ///< a constant trip count above kMaxUnrolledTrips
  };
  LoopBounds loop_bounds(const ir::Axis& axis, int64_t& unrolled_trips);
  /// The pragma to write before each loop of a reduction nest over `axes` (outermost first;
  /// `bounds` from loop_bounds), whose innermost body holds `body_nodes` IR nodes as emitted
  /// (unroll_policy.h; with the policy off, the pragmas of loop_bounds' decisions). Loops
  /// `first_free` and later get no pragma (a warp's strided loop). Records a note on every
  /// loop not unrolled completely in unroll_notes_.
  std::vector<std::string> loop_pragmas(const std::vector<ir::Axis>& axes,
                                        const std::vector<LoopBounds>& bounds,
                                        int64_t body_nodes, size_t first_free = SIZE_MAX);
  std::string reduce_init(const ir::ReduceNode& n);
  std::string accumulate(const ir::ReduceNode& n, const std::string& acc, const std::string& body);
  std::string accumulate_body(const ir::ReduceNode& n, const std::string& acc);

  void emit_body(const GridMapping& m, const std::vector<int64_t>& extents);
  /// The linear axes' pending declarations from their decoded values (`decoded`, in
  /// m.linear_axes order): the tile axis' base, the innermost axis' vector group, the others.
  void declare_linear_axes(const GridMapping& m, const std::vector<int64_t>& extents,
                           const std::vector<std::string>& names,
                           const std::vector<std::string>& decoded,
                           std::vector<std::pair<std::string, std::string>>& pending);
  /// Writes the body of a tiled transposition (emit_tiled_transpose.cpp) and returns its launch.
  LaunchDims emit_tiled_transpose(const TiledTranspose& t);
  /// EmitOptions::transposed_store (transposed_store.h): the block's staging array, declared
  /// before the body (its name in staged_), and the epilogue after it that writes the staged
  /// values to the copy's target (emit_statements.cpp); emit_group_values stages each group.
  void begin_transposed_store();
  /// `value` of lane 0 of the lanes sharing the point (a warp, or a group of
  /// GridConfig::reduction_lanes < 32 lanes): __shfl_sync from that lane.
  std::string lane_broadcast(const std::string& value) const {
    const int lanes = kernel_.grid.reduction_lanes;
    return "__shfl_sync(0xffffffffu, " + value + ", 0" + (lanes < 32 ? ", " + std::to_string(lanes) : "") + ")";
  }
  void end_transposed_store();
  /// A direct transposed store (TransposedStore::direct): the group's `values` written to the
  /// copy's target, one element per column (emit_vector_groups.cpp).
  void emit_direct_transposed_store(const ir::Stage& stage,
                                    const std::vector<std::string>& group_point,
                                    const std::string& values);
  /// Row-group kernels (emit_row_groups.cpp): a loop per stage over the block's rows' points,
  /// __syncthreads() between stages.
  void emit_row_group_body();
  /// GridConfig::row_per_thread: each thread runs its row's points of every stage in order.
  void emit_row_per_thread_body();
  /// One stage of a row-group kernel at the point `point` of the row `row` (index expressions):
  /// the decodes of its axes that its code names, then the stage.
  void emit_row_stage(const ir::Stage& stage, const std::vector<std::string>& names,
                      const std::string& row, const std::string& point);
  /// A stage loop (stage_loops.h) the emitter runs: per family, the shared table of its
  /// pointers ("" for a row-local or unread family), and the row-local chains as (read
  /// family F, written family W) indices into loop.families.
  struct PlannedStageLoop {
    StageLoop loop;
    std::vector<std::string> tables;
    std::vector<std::pair<size_t, size_t>> chains;
    std::vector<bool> written;          ///< per family: the loop writes it
    std::vector<size_t> local_written;  ///< the row-local families the loop writes
  };
  /// The stage loops of this row-group kernel that can be emitted with `locals` (empty for a
  /// block schedule), their tables declared and filled (writes the code); a note in
  /// stage_loop_notes_ for each, and for each run left straight-line with the reason.
  std::vector<PlannedStageLoop> plan_stage_loops(const RowLocals& locals);
  /// Emits the stages of a row-group kernel: `emit_one(s)` writes stage s; each planned loop
  /// is emitted once, as a loop of its iterations. `between` (a barrier, or empty) is written
  /// between stages, and after every stage of a loop's body.
  void emit_row_stages(const std::vector<PlannedStageLoop>& loops,
                       const std::function<void(size_t)>& emit_one, const std::string& between);
  std::vector<std::string> stage_loop_notes_;
  /// The most points per row a row-per-thread stage's loop is unrolled for.
  static constexpr int64_t kRowPerThreadUnrollPoints = 64;
  /// ... while the unrolled loop reads memory at most EmitOptions::row_stage_unroll_loads times.
  /// The distinct memory loads of a stage's points unrolled: each load of a tensor that is not
  /// row-local counted once per trip of the reductions around it and once per value of the
  /// point axes (`point_axes`: variable, extent) its address depends on.
  int64_t memory_loads_unrolled(
      const ir::Expr& e,
      const std::vector<std::pair<const ir::VarNode*, int64_t>>& point_axes) const;
  /// Generic kernels (ir/dynamic_sizes.h, emit_generic_grid.cpp): the size parameters in the
  /// signature, and a grid-stride loop over the runtime point count decoding every axis.
  std::vector<std::string> bind_size_params(CompiledKernel& result);
  void emit_generic_body();
  /// EmitOptions::outer_size (compiler/lower_outer_generic.h): checks the grid's form, adds the
  /// size to the signature and fills the result's size fields; the body then bounds the grid
  /// by outer_count_.
  void bind_outer_size(const GridMapping& m, const std::vector<int64_t>& extents,
                       CompiledKernel& result, std::vector<std::string>& signature);
  /// EmitOptions::outer_size for a row-group kernel of a token pair (lower_outer_generic.h):
  /// its row axes begin with the batch (extent 1) and the tokens; adds both sizes to the
  /// signature, fills the result's size fields, and the body bounds its rows by outer_count_.
  void bind_outer_rows(CompiledKernel& result, std::vector<std::string>& signature);
  /// An extent or stride of a generic kernel as text: a literal or a size parameter's name.
  std::string size_text(const ir::Expr& e);
  void emit_points(const GridMapping& m, const std::vector<int64_t>& extents,
                   std::vector<std::string> names);
  void begin_stage(const ir::Stage& stage, const std::vector<std::string>& axis_names);
  void emit_stage(const ir::Stage& stage, const std::vector<std::string>& axis_names);
  void emit_stage_point(const ir::Stage& stage, const std::vector<std::string>& axis_names);
  std::string stored_value(const ir::Stage& stage);

  // Vector groups (kernels with vector width V > 1, see vector_groups.h): each thread computes
  // the points x_base + e, e < V, of the innermost linear axis x.
  struct VectorGroup {
    int axis = -1;        ///< the domain axis of x
    int64_t width = 1;    ///< V
    int64_t extent = 1;   ///< x's extent
    std::string base;     ///< the name of x_base
    ir::Var base_var;     ///< x_base as an IR variable, for expressions evaluated at x_base
    std::string element;  ///< the name of the element loop's variable e
    std::string offset;   ///< the name of a window loop's variable (an offset into a span)
  };
  /// A load every element of a group reads from one span of consecutive elements, loaded
  /// once before the group's element loop: the load reads `name[index]`.
  struct Span {
    std::string name, index;
  };
  /// A lane variable of a span: x (spans of V points from x_base) or a window axis over x
  /// (spans of a group's windows from that axis' base).
  struct Lane {
    std::string base;                  ///< the lane index of the span's first element
    std::string index;                 ///< the loop variable indexing the span
    int64_t count = 0;                 ///< elements in the span
    int64_t alignment = 0;             ///< the base is always a multiple of this (0: always 0)
    int64_t lowest = 0, highest = -1;  ///< the lane values any span covers
  };
  /// x as a lane: spans of V points from x_base, over the whole axis.
  Lane x_lane() const {
    return Lane{vector_->base,      vector_->element, vector_->width, vector_->width, 0,
                vector_->extent - 1};
  }
  void emit_vector_stage(const ir::Stage& stage, const std::vector<std::string>& axis_names);
  /// A `#pragma unroll` loop whose body sees `var` as `name`, declared `base + offset` at the
  /// top of the loop only when the body used it (clamped to `clamp` when clamp >= 0: a partial
  /// thread tile's extra points; to runtime_limit - 1 when that code is given: a generic tile).
  void emit_scoped_loop(const std::string& header, const ir::VarNode* var, const std::string& name,
                        const std::string& base, const std::string& offset,
                        const std::function<void()>& body, int64_t clamp = -1,
                        const std::string& pragma = "#pragma unroll",
                        const std::string& runtime_limit = "");
  /// `body` inside `if (condition) { ... }`, in a scope of its own (its temporaries stay in it
  /// or are hoisted before the if).
  void emit_guarded(const std::string& condition, const std::function<void()>& body);
  void for_each_element(const ir::VarNode* x, const std::string& x_name,
                        const std::function<void()>& body);
  bool plan_group_reduction(const ir::ReduceNode& n, const ir::VarNode* x,
                            std::optional<GroupWindows>& windows);
  /// EmitOptions::progressive_group_sums: emits the group reductions of an add tree in
  /// evaluation order, each add of computed operands into an array as soon as it can be
  /// (registered in group_reductions_ under its node); the name of e's array when all of e was.
  std::optional<std::string> emit_progressive_group_sum(
      const ir::Expr& e, const std::vector<const ir::ReduceNode*>& reductions,
      const ir::VarNode* x, const std::string& x_name);
  std::string emit_group_reduction(const ir::ReduceNode& n, const ir::VarNode* x,
                                   const std::string& x_name,
                                   const std::optional<GroupWindows>& windows);
  void emit_spans(const ir::Expr& e, const std::unordered_map<const ir::VarNode*, Lane>& lanes);
  int64_t offset_alignment(const ir::Tensor& t, const std::vector<ir::Expr>& indices, size_t lane_dim,
                           int64_t lane_alignment);
  /// The adjoint_memory.cuh helper for `base` ("load_elements", "store_elements"): its
  /// streaming variant under EmitOptions::streaming_loads / streaming_stores. `reused` (loads
  /// only): the data is read again by other points, so it keeps the default caching.
  std::string memory_helper(const std::string& base, bool reused = false) const {
    const bool streaming =
        base == "store_elements" ? options_.streaming_stores : options_.streaming_loads && !reused;
    return streaming ? base + "_streaming" : base;
  }
  /// True when some domain axis of more than one point is named neither by `load`'s indices
  /// nor by the bounds of the group reduction being emitted (span_reduction_): other points of
  /// the domain read the same elements (a broadcast such as a weight row).
  bool read_by_many_points(const ir::LoadNode& load) const;

  const ir::Program& program_;
  const ir::Kernel& kernel_;
  const EmitOptions options_;
  const std::string index_type_;
  NameSupply names_;
  CodeWriter body_{1};
  CodeWriter* out_ = &body_;
  std::string staged_;  ///< the shared staging array of a transposed store (empty: none)
  std::vector<Scope> scopes_;
  std::unordered_map<const ir::VarNode*, std::string> var_names_;
  std::unordered_map<const ir::VarNode*, size_t> var_levels_;  ///< scope level declaring each var
  std::unordered_map<const ir::ExprNode*, std::pair<ir::Expr, bool>> speculatable_;
  std::unordered_map<const ir::TensorNode*, std::string> params_;
  /// Row-per-thread kernels (emit_row_groups.cpp): temporaries that only this kernel touches,
  /// held per thread as an array of one row's elements (the name), indexed by the non-row
  /// indices row-major, instead of in global memory.
  std::unordered_map<const ir::TensorNode*, std::string> row_local_;
  StructuralIds ids_;
  std::unordered_map<int, int> uses_;
  ir::Bounds bounds_;
  /// `// Schedule: unroll ...` lines for the head of the unit: loops the unroll policy did not
  /// unroll completely, and why.
  std::vector<std::string> unroll_notes_;
  bool uses_atomics_ = false;
  bool uses_fma_ = false;  ///< a fma_sum accumulates with fmaf/fma
  bool uses_float_atomics_ = false;  ///< some atomic add is a float's: order-dependent rounding
  bool uses_memory_helpers_ = false;
  LaunchDims launch_;
  /// With EmitOptions::outer_size: the linear count as text (`N * K`); empty otherwise.
  std::string outer_count_;
  /// With a token pair (OuterSizeParam::batch_source): the domain axis that counts the tokens;
  /// the linear axes in front of it have extent 1 and decode to 0, and it decodes without a
  /// modulo (the count keeps it below the extent lowered at). -1 otherwise.
  int outer_token_axis_ = -1;
  std::optional<VectorGroup> vector_;
  /// A thread tile (GridConfig::tile_points > 1, see thread_tiles.h): each thread computes the
  /// points a_base + r, r < points, of domain axis `axis` besides its vector group; group
  /// reductions keep acc[points][V] and run the tile loop inside their loops.
  struct ThreadTile {
    int axis = -1;
    int64_t points = 1;
    std::string base;   ///< the name of a_base
    ir::Var base_var;   ///< a_base as an IR variable
    std::string index;  ///< the name of the tile loop's variable r
    int64_t extent = 1; ///< the tile axis' extent
    /// ceil(extent / points) x points: above extent, the last tile is partial (its points past
    /// extent - 1 are computed at the clamped index extent - 1 and not stored).
    int64_t padded = 1;
    /// Generic kernels: the tile axis' runtime extent as code (empty: `extent`). Any tile may
    /// then be the partial last one: its points at or past it compute at extent - 1 (clamped)
    /// and are not stored; `extent` holds the declared upper bound for the bounds analysis.
    std::string runtime_extent;
    bool partial() const { return padded != extent || !runtime_extent.empty(); }
    /// The extent as code, for clamps and store guards.
    std::string extent_text() const {
      return runtime_extent.empty() ? std::to_string(extent) : runtime_extent;
    }
    const ir::VarNode* var = nullptr;  ///< the current stage's variable of the tile axis
  };
  std::optional<ThreadTile> tile_;
  std::string tile_name_;  ///< the current stage's name of the tile axis' variable
  /// With a tile, emit_spans loads only the spans whose load moves with the tile axis (true,
  /// inside the tile loop) or only those that do not, and the tile spans: loads contiguous
  /// along the tile axis alone, R elements from a_base (false, once before it).
  std::optional<bool> spans_moving_with_tile_;
  /// The partial unroll factor of a tiled group reduction's long constant loops: the largest
  /// of 1, 2, 4 whose unrolled body makes at most kTileUnrollUpdates accumulator updates
  /// (EmitOptions::tile_unroll overrides it).
  int tile_loop_unroll() const;
  /// 128: dx's k loop (8 x 8 accumulators) unrolled 2 times. On the H100 (branch dxcold,
  /// docs/compiler.md) 2 ran dx 5-6% faster than the 4 of 256 updates at three of the issue's
  /// shapes and compiles faster; 1 ran 7-14% slower.
  static constexpr int64_t kTileUnrollUpdates = 128;
  /// emit_spans of `e`, split around the tile loop (see spans_moving_with_tile_).
  void emit_tile_spans(const ir::Expr& e, const std::unordered_map<const ir::VarNode*, Lane>& lanes,
                       bool moving);
  void emit_group_values(const ir::Stage& stage, const std::vector<std::string>& axis_names,
                         const std::vector<std::string>& group_point, const ir::VarNode* x,
                         const std::string& x_name);
  /// Emits `body` inside the unrolled tile loop with the tile axis' variable bound to
  /// a_base + r (or `body` alone without a tile).
  void for_each_tile_point(const ir::VarNode* a, const std::string& a_name,
                           const std::function<void()>& body);
  /// Reductions of the current stage computed for a whole group: node -> accumulator array.
  std::unordered_map<const ir::ExprNode*, std::string> group_reductions_;
  std::unordered_map<int, Span> spans_;  ///< by structural id of the load
  /// The current stage's domain variables whose axis has more than one point.
  std::vector<const ir::VarNode*> varying_axes_;
  /// Per domain axis (emit_body, linear grids): whether its value is the same for every thread
  /// of a block, and every block is whole (no thread of a block returns or leaves the
  /// grid-stride loop without the others), so that a __syncthreads is reached by the whole
  /// block: a linear axis decoded as 0 or as linear / D with D a multiple of the block's
  /// linear indices, a block or serial axis. Empty for other grids (no block-uniform values).
  std::vector<bool> block_uniform_axes_;
  /// The current stage's variables of block_uniform_axes_ (begin_stage), with the tile's base
  /// where its axis is one of them.
  std::unordered_set<const ir::VarNode*> block_uniform_vars_;
  /// Whether `load`, read in the prefetched loop of span_reduction_, moves with the tile axis
  /// only in its span and is otherwise the same for every thread of the block: every variable
  /// it names is the tile's, block-uniform, or an axis of span_reduction_ whose bounds name
  /// only block-uniform variables (EmitOptions::tile_uniform_ring).
  bool block_uniform_load(const ir::Expr& load) const;
  /// Names the emitted code has used so far (variables visited, identifiers indexing an
  /// element, lane bases): a declaration written after its code (an axis decoded from the
  /// grid, an element loop's x) is written only if its name is here.
  std::unordered_set<std::string> referenced_;
  /// Runs `body` and tells whether it used `name`, leaving `referenced_` as it was plus
  /// what `body` used.
  bool uses_name(const std::string& name, const std::function<void()>& body);
  /// While set (a block reduction's wide staging): emit_spans loads with
  /// load_elements_aligned and records here each base pointer and the access width it
  /// assumed, for the one alignment check the kernel makes before taking that path.
  std::vector<std::pair<std::string, int>>* span_alignment_claims_ = nullptr;
  /// The aligned copy of a thread-tiled kernel's body (EmitOptions::tile_prefetch >= 1; emit()
  /// writes it behind one test of every base it claims, in twin_claims_): span loads and group
  /// stores take the adjoint_memory.cuh helpers without a check per access.
  bool aligned_twin_ = false;
  std::vector<std::pair<std::string, int>> twin_claims_;
  /// The misaligned copy beside an aligned twin (EmitOptions::tile_point_fallback): each
  /// vector stage computes the thread's tile points one at a time (emit_points_one_by_one) and
  /// every reduction loop longer than kMaxUnrolledTrips is rolled (loop_pragmas).
  bool point_fallback_ = false;
  /// The thread's R x V points of `stage` one at a time: rolled loops over r and e binding the
  /// tile and vector axes, each point computed and stored as an unvectorized kernel would
  /// (emit_stage_point; a partial tile's points past the extent skipped).
  void emit_points_one_by_one(const ir::Stage& stage, const std::vector<std::string>& axis_names,
                              const ir::VarNode* x, const std::string& x_name);
  /// The `_aligned` variant of memory_helper(base, reused).
  std::string aligned_helper(const std::string& base, bool reused = false) const {
    const std::string helper = memory_helper(base, reused);
    return base + "_aligned" + helper.substr(base.size());
  }
  /// While set (emit_prefetched_iterations): emit_spans skips the loads that move with the
  /// tile axis (but those the whole block reads: block_pass, rings of the block) and copies
  /// each of the others (cp.async) into its ring
  /// `name[2][depth][block][count]` of shared memory (declared in `declarations` when first
  /// met), at [buffer][index][threadIdx.x]; `spans` counts the copies.
  struct Prefetch {
    std::string index;
    int64_t depth = 0;
    CodeWriter* declarations = nullptr;
    int64_t spans = 0;
    std::string buffer;
    struct Ring {
      std::string name, index;  ///< the ring's name, and the lane index of its elements
      std::string type;         ///< its elements' storage type
      int64_t count = 0;        ///< elements of a span
      int64_t element_bytes = 0;
      size_t order = 0;  ///< rings made before this one
      /// A ring of the block, not of each thread (block_uniform_load): `name[2][depth][count]`,
      /// copied by depth x pieces threads and read by all after a __syncthreads.
      bool block_shared = false;
    };
    std::unordered_map<int, Ring> rings;  ///< by structural id of the load
    /// Early copies (emit_early_copies): the loads that move with the tile axis, into
    /// `name[R][block][count]` at [r][threadIdx.x]; `bytes` sums their bytes per thread.
    bool early = false;
    int64_t bytes = 0;
    /// The pass over the block's rings (block_uniform_load): only their copies, iteration
    /// `index` = threadIdx.x % depth, piece `piece` = threadIdx.x / depth; the other pass skips
    /// them. `block_copies` counts them.
    bool block_pass = false;
    std::string piece;
    int64_t block_copies = 0;
  };
  /// The aligned copy of a tiled stage whose values read spans per tile point after its
  /// reductions (dx reads x and grad_h_in for each of its 8 tokens): those spans are copied to
  /// shared memory (cp.async) before the reductions run, so that their DRAM latency overlaps
  /// the multiply-adds (EmitOptions::tile_early_copies). Returns the loads' spans to use after
  /// the reductions and the wait (none: nothing copied, or more than kEarlyCopyBytes a block),
  /// by structural id of the load, in the order of the copies.
  struct EarlyCopy {
    int id = 0;
    Span span;         ///< the thread's span of the current tile point in shared memory
    std::string type;  ///< its elements' storage type
    int64_t count = 0;
    int bytes = 0;  ///< the widest aligned access of a span (the rows start 16-byte aligned)
  };
  std::vector<EarlyCopy> emit_early_copies(const ir::Stage& stage, const ir::VarNode* x);
  /// In a tile point's body (EmitOptions::tile_early_wide_reads): each early copy's span of
  /// this point read from shared memory into registers with EarlyCopy::bytes-wide loads; the
  /// point's values use the registers.
  void emit_early_wide_reads(const std::vector<EarlyCopy>& early);
  /// The shared memory the early copies of a block may take: 32 KB (dx's 8 tokens x 2 spans
  /// of 16 bytes x 128 threads).
  static constexpr int64_t kEarlyCopyBytes = 32 * 1024;
  std::optional<Prefetch> prefetch_;
  /// Notes on the prefetched loops, for the unit's `// Schedule:` lines.
  std::vector<std::string> prefetch_notes_;
  /// Rings of prefetched spans emitted (emit_prefetched_iterations).
  int prefetch_rings_ = 0;
  /// The most accumulators (R x V) a thread of a ring-prefetched kernel may keep for the
  /// derived minimum of 5 blocks of 128 (EmitOptions::tile_min_blocks): 48, x_mix at n = 4, 6.
  static constexpr int64_t kMinBlocksAccumulators = 48;
  /// The most accumulators of a ring-prefetched kernel held to 384 resident threads per SM
  /// (3 blocks of 128) when it has more than ThreadTileOptions::max_accumulators (a long
  /// tile's: x_mix's partials, 24 k x 4 d).
  static constexpr int64_t kMinBlocksLongAccumulators = 96;
  /// P, the iterations of a tiled group reduction's innermost loop whose spans not moving with
  /// the tile axis are copied ahead (0: no prefetch): in the aligned copy, for a long loop of
  /// constant trips that gets no other unroll pragma, the largest power of two
  /// <= EmitOptions::tile_prefetch dividing its trip count whose two ring buffers of P
  /// iterations hold at most kPrefetchBytes of such spans per thread; none below P = 4.
  int64_t prefetch_depth(const ir::ReduceNode& n, const ir::VarNode* x,
                         const std::vector<LoopBounds>& bounds,
                         const std::vector<std::string>& pragmas, size_t uniform_axes) const;
  /// The shared memory a thread's rings may take: 128 bytes (16 KB for a block of 128; x_mix's
  /// 2 x 16 tokens of 2 bf16, dx's 8 floats of phi per k would allow 2 k: no prefetch).
  static constexpr int64_t kPrefetchBytes = 128;
  /// The innermost loop [start, end) in chunks of P iterations: a prologue copies the first
  /// chunk's spans that do not move with the tile axis into ring buffer 0 (cp.async, one
  /// group); each chunk then copies the next chunk's into the other buffer, waits for its own
  /// group, and runs its P iterations (`iteration`) reading those spans from shared memory.
  /// `var` is the loop's variable, named `name` in every loop over u < P.
  void emit_prefetched_iterations(const ir::ReduceNode& n,
                                  const std::unordered_map<const ir::VarNode*, Lane>& lanes,
                                  const ir::VarNode* var, const std::string& name,
                                  const std::string& start, const std::string& end,
                                  int64_t depth, const std::function<void()>& iteration);
  /// The group reduction whose body emit_spans is loading, if any.
  const ir::ReduceNode* span_reduction_ = nullptr;
  /// Warp-cooperative kernels (GridConfig::reduction_lanes > 1): the name of the lane index
  /// (threadIdx.x % 32), empty otherwise; and how many reductions enclose the one being
  /// emitted (only those outside every other reduction are cooperative).
  std::string lane_;
  int reduce_depth_ = 0;
  /// A reduction's loops with lanes striding over its innermost axis, then the fixed shuffle
  /// butterfly; emit_statements.cpp stores from lane 0 only.
  std::string emit_cooperative_reduce(const ir::ReduceNode& n);
  /// Lane scans (emit_lane_scan.cpp, EmitOptions::lane_scan): the point variable of a kernel
  /// whose grid puts 32 consecutive points from a multiple of 32 on each warp (set by
  /// emit_body), null otherwise; the reductions it writes on lanes, for the kernel's header.
  const ir::VarNode* lane_scan_point_ = nullptr;
  int64_t lane_scan_extent_ = 0;  ///< its domain's extent, a multiple of 32
  std::string lane_scan_lane_;    ///< the lane's name, once declared
  std::vector<std::string> lane_scan_notes_;
  /// The code of `n` on the warp's lanes (an exclusive lane scan, or a sum shared by the warp),
  /// or nothing, having written nothing, where `n` has neither form.
  std::optional<std::string> emit_lane_scan_reduce(const ir::ReduceNode& n);
  /// Lane spans (emit_lane_spans.cpp, EmitOptions::lane_spans): the lane loop over the last
  /// axis of cooperative reduction `n` (its bounds `start`, `end` as emitted) with each lane
  /// reading V consecutive iterations per trip, behind one alignment test of the spanned bases
  /// (aligned: one vector load per span; else element loads in the same order), a strided tail.
  /// `group_var` (a vector group's axis, or null) and `group_loop` (its element loop around a
  /// callback, or the callback alone) place the accumulation `accumulate_one`, written with
  /// every variable bound. Returns false, having written nothing, where the plan refuses (the
  /// caller writes the strided loop of before).
  bool emit_lane_spans(const ir::ReduceNode& n, const std::string& start, const std::string& end,
                       const ir::VarNode* group_var,
                       const std::function<void(const std::function<void()>&)>& group_loop,
                       const std::function<void()>& accumulate_one);
  struct LaneSpanPlan {
    int64_t width = 0;       ///< V: consecutive iterations per lane and trip
    int unroll = 1;          ///< the trips unrolled (`#pragma unroll`)
    int64_t alignment = 0;   ///< the first iteration of every span is a multiple of this
    std::vector<int> loads;  ///< structural ids of the loads that move with the lane axis
  };
  std::optional<LaneSpanPlan> plan_lane_spans(const ir::ReduceNode& n,
                                              const ir::VarNode* group_var);
  /// While set, emit_spans leaves the loads that depend on this variable to a later call.
  const ir::VarNode* spans_skip_var_ = nullptr;
  /// One line per reduction given lane spans, for the kernel's header.
  std::vector<std::string> lane_span_notes_;
  /// Block reductions (GridConfig::block_tokens > 0, emit_block_reduction.cpp): the whole body.
  void emit_block_reduction_body();
  /// The staging of one chunk with GridConfig::block_stage_width W > 1: each thread takes W
  /// consecutive iterations of one token's (or one output's) row, its contiguous loads as one
  /// span (vector accesses), in a loop unrolled over the thread's rows so that their loads are
  /// in flight together (emit_block_reduction.cpp).
  void emit_wide_staging(const BlockReductionShape& shape,
                         const std::vector<std::string>& axis_names, const std::string& tile,
                         const std::string& chunk, const std::vector<std::string>& token_arrays,
                         const std::vector<std::string>& weight_arrays);
  /// The block kernel's reduction -> the accumulator holding the point being stored.
  std::unordered_map<const ir::ReduceNode*, std::string> block_accumulators_;
};

}  // namespace adjoint::compiler
