// split_reductions: finds the eligible reductions of each kernel, derives G, and rewrites each
// into a partials kernel (inserted before its kernel) plus an ordered combine in the stage.
#include "compiler/split_reductions.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "compiler/block_reductions.h"
#include "compiler/program_utils.h"
#include "compiler/vector_groups.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/verifier.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

using ir::Expr;

/// Replaces one Reduce node (by identity) with another expression.
class ReplaceReduce : public ir::ExprMutator {
 public:
  ReplaceReduce(const ir::ReduceNode* from, Expr to) : from_(from), to_(std::move(to)) {}

 protected:
  Expr visit_Reduce(const ir::ReduceNode& node, const Expr& self) override {
    return &node == from_ ? to_ : ir::ExprMutator::visit_Reduce(node, self);
  }

 private:
  const ir::ReduceNode* from_;
  Expr to_;
};

std::optional<int64_t> constant(const Expr& e) {
  if (auto* c = e.as<ir::IntConstNode>()) return c->value;
  return std::nullopt;
}

Expr index_constant(int64_t v) { return ir::IntConstNode::make(ir::DType::kI64, v); }

/// Why a reduction cannot be split, or empty when it can; `axis` is then the split axis.
std::string ineligible(const ir::ReduceNode& r, const std::vector<ir::Tensor>& written,
                       size_t& axis) {
  if (r.dtype != ir::DType::kF32 && r.dtype != ir::DType::kF64 && r.dtype != ir::DType::kI32 &&
      r.dtype != ir::DType::kI64)
    return "accumulates in " + std::string(ir::dtype_name(r.dtype));
  std::string why;
  for_each_node(r.body, [&](const Expr& node) {
    if (auto* load = node.as<ir::LoadNode>()) {
      if (std::find(written.begin(), written.end(), load->tensor) != written.end())
        why = "reads " + load->tensor->name + ", which its kernel writes";
    }
  });
  if (!why.empty()) return why;
  int64_t best = 0;
  for (size_t a = 0; a < r.axes.size(); ++a) {
    auto start = constant(r.axes[a].start), extent = constant(r.axes[a].extent);
    if (!start || *start != 0 || !extent || *extent <= best) continue;
    bool named = false;
    for (const ir::Axis& other : r.axes) {
      named = named || depends_on(other.start, r.axes[a].var.get()) ||
              depends_on(other.extent, r.axes[a].var.get());
    }
    if (named) continue;
    best = *extent;
    axis = a;
  }
  return best > 0 ? "" : "no axis of constant start 0 and constant extent";
}

/// Iterations per partial when G partials share an axis of `extent`: floor(extent / G), rounded
/// down to a multiple of `multiple`; 0 when G partials do not fit. Without `tail` G must divide
/// the extent exactly (the split before tails: an odd token count then got no split at all).
/// With it the iterations [G * q, extent) left over go to the combine (tail_reduction), as long
/// as they are no more than `tail_ranges` partials' shares (1: the combine stays a small part of
/// the work; a block split whose combine is a warp per point allows 32).
int64_t iterations_per_partial(int64_t extent, int64_t partials, int64_t multiple, bool tail,
                               int64_t tail_ranges = 1) {
  const int64_t q = extent / partials / multiple * multiple;
  if (q < 1) return 0;
  if (!tail) return extent % partials == 0 && extent / partials == q ? q : 0;
  return extent - partials * q <= q * tail_ranges ? q : 0;
}

/// The iterations of `r` that its partials leave over: `r` itself with the split axis limited
/// to [covered, extent) (fresh variables for every axis, so that the expression may stand next
/// to the partials' combine in one stage value), or an undefined Expr when covered == extent.
/// The combine adds it after the partials, in the axes' order: deterministic like the rest.
Expr tail_reduction(const ir::ReduceNode& r, size_t axis, int64_t covered) {
  const int64_t extent = *constant(r.axes[axis].extent);
  if (covered >= extent) return Expr();
  std::vector<ir::Axis> axes;
  Expr body = r.body;
  for (size_t a = 0; a < r.axes.size(); ++a) {
    ir::Var v(r.axes[a].var.name_hint() + (a == axis ? "_tail" : "_t"));
    axes.push_back(r.axes[a]);
    axes.back().var = v;
  }
  // The split axis runs over the tail, offset by `covered`.
  axes[axis].start = index_constant(0);
  axes[axis].extent = index_constant(extent - covered);
  for (size_t a = 0; a < r.axes.size(); ++a) {
    const Expr value = a == axis ? ir::BinaryNode::make(ir::BinaryOp::kAdd, index_constant(covered),
                                                        axes[a].var)
                                 : Expr(axes[a].var);
    body = substitute(body, r.axes[a].var.get(), value);
    for (ir::Axis& other : axes) {
      other.start = substitute(other.start, r.axes[a].var.get(), value);
      other.extent = substitute(other.extent, r.axes[a].var.get(), value);
    }
  }
  return ir::ReduceNode::make(r.op, axes, body, r.dtype);
}

/// ", the tail s in [covered, extent) in the combine" for the dumps, or "" without a tail.
std::string tail_note(int64_t extent, int64_t covered, const std::string& axis) {
  if (covered >= extent) return "";
  return ", the tail " + axis + " in [" + std::to_string(covered) + ", " +
         std::to_string(extent) + ") summed after them in the combine";
}

/// The combine of a split: `partials` (their reduction in order g = 0..G-1), then the tail,
/// joined by the reduction's own operator (a sum's parts add, a max's take the larger).
Expr with_tail(ir::ReduceOp op, Expr partials, const Expr& tail) {
  if (!tail.defined()) return partials;
  const ir::BinaryOp join = op == ir::ReduceOp::kMax   ? ir::BinaryOp::kMax
                            : op == ir::ReduceOp::kMin ? ir::BinaryOp::kMin
                                                       : ir::BinaryOp::kAdd;
  return ir::BinaryNode::make(join, std::move(partials), tail);
}

/// True when `var` picks consecutive elements of a tensor's innermost, stride-1 dimension in
/// some load of `body`: consecutive partials then read consecutive addresses.
bool indexes_contiguously(const Expr& body, const ir::VarNode* var) {
  bool found = false;
  for_each_node(body, [&](const Expr& node) {
    auto* load = node.as<ir::LoadNode>();
    if (!load || load->indices.empty()) return;
    if (load->tensor->strides.back() == 1 && depends_on(load->indices.back(), var)) found = true;
  });
  return found;
}

/// The partials kernel of a thread split of `r` (axis `axis` of extent E) into G = `partials`:
/// domain (stage domain..., g) when `g_innermost`, else (g, stage domain...); partial g reduces
/// the axis' iterations g + G*step. Its target, named `tensor_name`, goes to `partial_tensor`.
ir::Kernel make_partials_kernel(const std::string& kernel_name, const ir::Stage& stage,
                                const ir::ReduceNode& r, size_t axis, int64_t partials,
                                const std::vector<int64_t>& extents, bool g_innermost,
                                const std::string& tensor_name, ir::Tensor& partial_tensor) {
  const ir::Axis& split = r.axes[axis];
  const int64_t extent = *constant(split.extent);
  ir::Var g("g"), step(split.var.name_hint() + "_step");
  std::vector<ir::Var> vars;
  std::vector<int64_t> shape;
  Expr body = r.body;
  std::vector<ir::Axis> axes = r.axes;
  for (size_t j = 0; j < stage.domain.size(); ++j) {
    ir::Var v(stage.domain[j].var.name_hint());
    vars.push_back(v);
    shape.push_back(extents[j]);
    body = substitute(body, stage.domain[j].var.get(), v);
    for (ir::Axis& a : axes) {
      a.start = substitute(a.start, stage.domain[j].var.get(), v);
      a.extent = substitute(a.extent, stage.domain[j].var.get(), v);
    }
  }
  body = substitute(body, split.var.get(),
                    ir::BinaryNode::make(ir::BinaryOp::kAdd, g,
                                         ir::BinaryNode::make(ir::BinaryOp::kMul, step,
                                                              index_constant(partials))));
  axes[axis] = ir::Axis{step, index_constant(0), index_constant(extent / partials)};
  if (g_innermost) {
    vars.push_back(g);
    shape.push_back(partials);
  } else {
    vars.insert(vars.begin(), g);
    shape.insert(shape.begin(), partials);
  }
  partial_tensor = ir::make_tensor(tensor_name, r.dtype, shape, ir::TensorRole::kTemporary);
  return ir::Kernel{kernel_name + "_" + stage.target->name + "_partials",
                    {ir::compute(partial_tensor, ir::over(partial_tensor, vars),
                                 ir::ReduceNode::make(r.op, axes, body, r.dtype))},
                    {}};
}

/// The threads a (partials) kernel launches and what each computes, as the later passes will
/// schedule it: thread_tiles' tile R (options.tiles) and derive_grid's vector width V, halved
/// while R x V exceeds the accumulators a tiled thread may keep.
struct Launched {
  int64_t threads = 0, tile = 1, vector = 1;
};
Launched launched(const ir::Kernel& kernel, const ThreadTileOptions& tiles) {
  Launched l;
  const std::vector<int64_t> extents = domain_extents(kernel);
  int64_t points = 1;
  for (int64_t e : extents) points *= e;
  const TileChoice tile = choose_thread_tile(kernel, tiles);
  l.tile = tile.points;
  ir::Kernel linear = kernel;  // derive_grid's bindings: every axis linear
  linear.grid.bindings.assign(extents.size(), ir::AxisBinding::kLinear);
  l.vector = derived_vector_width(linear, tiles.group_bytes != 0 ? tiles.group_bytes
                                                                 : kDefaultGroupBytes);
  const int64_t limit = tile_accumulator_limit(kernel, tile.axis, l.tile, tiles);
  while (l.tile > 1 && l.vector > 1 && l.tile * l.vector > limit) l.vector /= 2;
  l.threads = points / (l.tile * l.vector);
  return l;
}

/// The contiguous split of a block reduction kernel (see the header): appends the partials
/// kernel to `out` and returns the combine kernel, or returns nothing (the kernel unchanged)
/// with the reason in `lines`.
std::optional<ir::Kernel> split_block_reduction(const ir::Kernel& kernel,
                                                const ReductionSplitOptions& options,
                                                ir::Program& out, std::vector<std::string>& lines,
                                                ScheduleNotes* notes) {
  ir::Kernel unset = kernel;
  const BlockReductionOptions any = any_block_shape();
  const BlockReductionShape shape = analyze_block_reduction(unset, any);
  if (!shape.why_not.empty()) return std::nullopt;
  const ir::Stage& stage = kernel.stages.front();
  const ir::ReduceNode& r = *shape.reduce;
  const std::vector<int64_t> extents = domain_extents(kernel);
  int64_t points = 1;
  for (int64_t e : extents) points *= e;
  int64_t other_blocks = 1;
  for (int j : shape.block_axes) other_blocks *= extents[j];
  auto tile_blocks = [&](int64_t tile_tokens) {
    return (shape.tokens + tile_tokens - 1) / tile_tokens * other_blocks;
  };
  int64_t blocks = tile_blocks(kernel.grid.block_tokens);
  // Few points (see the header): a warp per point can combine them.
  const bool few_points = points * 32 <= options.target_threads;
  int64_t max_partials = options.block_max_partials;
  int64_t min_iterations = options.block_min_iterations;
  // A tail of up to 32 ranges where a warp per point will combine (few points): the ranges
  // rounded to multiples of 8 leave up to 7 G iterations, which capped G at 32 for D = 12000.
  const bool warp_tail = (options.block_few_tokens & 2) != 0 && few_points;
  const int64_t tail_ranges = warp_tail ? 32 : 1;
  size_t axis = 0;
  const std::string what = stage.target->name + ": block reduction of " +
                           std::to_string(shape.trips) + " iterations, " + std::to_string(blocks) +
                           " blocks";
  std::string why = ineligible(r, tensors_written(kernel), axis);
  if (!why.empty()) {
    lines.push_back(what + ": not split (" + why + ")");
    return std::nullopt;
  }
  const int64_t extent = *constant(r.axes[axis].extent);
  // Rows (block_split_rows): the axis just outside the split axis (mhc's i outside d), of
  // constant start 0 and extent, that no other axis names, may fold into g (below), so that
  // each partial reads one row's contiguous range instead of a slice of every row, and a short
  // split axis (D = 1000) no longer caps G.
  int64_t rows = 1;
  if (options.block_split_rows && axis > 0) {
    const ir::Axis& outer = r.axes[axis - 1];
    auto start = constant(outer.start), rows_extent = constant(outer.extent);
    bool named = false;
    for (const ir::Axis& other : r.axes)
      named = named || depends_on(other.start, outer.var.get()) ||
              depends_on(other.extent, outer.var.get());
    if (start && *start == 0 && rows_extent && *rows_extent > 1 && !named) rows = *rows_extent;
  }
  int64_t folded_rows = 1;  // rows folded into g by the derived G (1: none)
  int64_t partials = 1;
  int token_points = kernel.grid.block_token_points;  // 1: the few-token tiles
  int max_chunk = 32;  // 64: the wide G's chunks (mask bit 8)
  if (options.forced_partials >= 2) {
    if (iterations_per_partial(extent, options.forced_partials, 8, options.tail, tail_ranges) > 0)
      partials = options.forced_partials;
    why = "G=" + std::to_string(options.forced_partials) + " forced by ADJOINT_TUNE_REDUCTION_SPLIT";
  } else if (options.forced_partials == 0) {
    why = "splitting switched off by ADJOINT_TUNE_REDUCTION_SPLIT=0";
  } else {
    // G = F x Gi: F the rows folded into g (1, or `rows` with fold), Gi the partials of each
    // row, doubling while the blocks stay below the target.
    auto derive = [&](int64_t tiles, bool fold) {
      const int64_t f = fold ? rows : 1;
      const int64_t multiple = fold ? 32 : 8;  // a folded range is the chunk's axis
      const int64_t tails = fold ? std::min<int64_t>(tail_ranges, 4) : tail_ranges;
      int64_t g = 1;
      while (tiles * f * g < options.block_target_blocks && f * g * 2 <= max_partials &&
             iterations_per_partial(extent, g * 2, multiple, options.tail, tails) >=
                 min_iterations)
        g *= 2;
      return f * g;
    };
    partials = derive(blocks, false);
    // Tiles of 4 tokens per lane that cannot reach the target with any G: one per lane.
    if ((options.block_few_tokens & 1) != 0 && kernel.grid.block_token_points > 1 &&
        blocks * partials < options.block_target_blocks) {
      token_points = 1;
      blocks = tile_blocks(kernel.grid.block_tokens / kernel.grid.block_token_points);
      partials = derive(blocks, false);
    }
    // One tile (B*S up to a tile) reading many weights: G may grow past block_max_partials, a
    // warp combining them. The weights a block stages: K x R values of 4 bytes or more.
    const int64_t weight_bytes = shape.outputs * shape.trips * 4;
    if ((options.block_few_tokens & 4) != 0 && few_points &&
        blocks * options.block_max_partials < options.block_target_blocks &&
        weight_bytes >= options.block_wide_weight_bytes) {
      max_partials = options.max_partials;
      min_iterations = options.block_min_warp_iterations;
      partials = derive(blocks, false);
      if ((options.block_few_tokens & 8) != 0) max_chunk = 64;
    }
    // Rows folded into g (block_split_rows) where the split above leaves the blocks at half
    // the target or less (D = 1000 allowed 8 ranges of d) and a token has more than
    // block_fold_min_outputs outputs, each row's tail at most 4 ranges.
    if (options.block_split_rows && rows > 1 && shape.outputs > options.block_fold_min_outputs &&
        blocks * partials * 2 <= options.block_target_blocks &&
        blocks * rows <= options.block_target_blocks && rows <= max_partials) {
      const int64_t folded = derive(blocks, true);
      if (folded > partials) {
        partials = folded;
        folded_rows = rows;
      }
    }
    why = blocks >= options.block_target_blocks
              ? "the token tiles alone give " + std::to_string(blocks) + " >= " +
                    std::to_string(options.block_target_blocks) + " blocks"
              : "token tiles x G reach " + std::to_string(blocks * partials) + " blocks (target " +
                    std::to_string(options.block_target_blocks) + ", G at most " +
                    std::to_string(max_partials) + ")";
    if (token_points != kernel.grid.block_token_points)
      why += "; one token per lane: tiles of " + std::to_string(kernel.grid.block_token_points) +
             " per lane reached fewer blocks (ADJOINT_TUNE_BLOCK_FEW_TOKENS)";
  }
  if (partials < 2) {
    lines.push_back(what + ": not split (" + why + ")");
    return std::nullopt;
  }
  const ir::Axis& split = r.axes[axis];
  const int64_t per_row = partials / folded_rows;  // partials of each folded row
  const int64_t range = iterations_per_partial(extent, per_row, folded_rows > 1 ? 32 : 8,
                                               options.tail,
                                               folded_rows > 1 ? std::min<int64_t>(tail_ranges, 4)
                                                               : tail_ranges);
  ir::Var g("g"), step(split.var.name_hint() + "_step");
  std::vector<ir::Var> vars{g};
  std::vector<int64_t> shape_of{partials};
  Expr body = r.body;
  std::vector<ir::Axis> axes = r.axes;
  for (size_t j = 0; j < stage.domain.size(); ++j) {
    ir::Var v(stage.domain[j].var.name_hint());
    vars.push_back(v);
    shape_of.push_back(extents[j]);
    body = substitute(body, stage.domain[j].var.get(), v);
  }
  Expr within = g;  // the partial's range within its row
  if (folded_rows > 1) {
    body = substitute(body, r.axes[axis - 1].var.get(),
                      ir::BinaryNode::make(ir::BinaryOp::kDiv, g, index_constant(per_row)));
    within = ir::BinaryNode::make(ir::BinaryOp::kMod, g, index_constant(per_row));
  }
  body = substitute(body, split.var.get(),
                    ir::BinaryNode::make(ir::BinaryOp::kAdd,
                                         ir::BinaryNode::make(ir::BinaryOp::kMul, within,
                                                              index_constant(range)),
                                         step));
  axes[axis] = ir::Axis{step, index_constant(0), index_constant(range)};
  if (folded_rows > 1) axes.erase(axes.begin() + static_cast<std::ptrdiff_t>(axis) - 1);
  ir::Tensor partial_tensor =
      ir::make_tensor(unique_tensor_name(out, stage.target->name + "_partials"), r.dtype,
                      shape_of, ir::TensorRole::kTemporary);
  out.temporaries.push_back(partial_tensor);
  ir::Kernel partials_kernel{
      kernel.name + "_" + stage.target->name + "_partials",
      {ir::compute(partial_tensor, ir::over(partial_tensor, vars),
                   ir::ReduceNode::make(r.op, axes, body, r.dtype))},
      {}};
  std::string tile_reason;
  const BlockReductionShape partial_shape = analyze_block_reduction(partials_kernel, any);
  std::string tile_why = partial_shape.why_not.empty()
                             ? choose_block_tile(partials_kernel, partial_shape, tile_reason,
                                                 kernel.grid.block_stage_width,
                                                 kernel.grid.block_shared_vectors == 4,
                                                 options.block_output_points, token_points,
                                                 max_chunk)
                             : partial_shape.why_not;
  ir::Var combine("g");
  std::vector<Expr> indices{combine};
  for (const ir::Axis& a : stage.domain) indices.push_back(a.var);
  const Expr tail = tail_reduction(r, axis, per_row * range);
  Expr combined = with_tail(
      r.op,
      ir::ReduceNode::make(r.op, {ir::Axis{combine, index_constant(0), index_constant(partials)}},
                           ir::LoadNode::make(partial_tensor, indices), r.dtype),
      tail);
  ir::Kernel rewritten = kernel;
  rewritten.grid = ir::GridConfig{};  // the combine: a thread per point, in order g = 0..G-1
  // Few points (B*S = 1: K of them) cannot hide G serial loads per thread: a warp per point
  // then, lanes striding over g, combined by the fixed shuffle butterfly.
  const bool warp_combine =
      points < options.block_warp_combine_points ||
      ((options.block_few_tokens & 2) != 0 && few_points &&
       partials >= options.block_warp_combine_min_partials &&
       (points < options.block_warp_combine_rows_points || shape.outputs <= 64)) ||
      (warp_tail && extent - per_row * range > range);  // a tail longer than a range
  if (warp_combine) rewritten.grid.reduction_lanes = 32;
  ReplaceReduce replace(&r, combined);
  rewritten.stages.front().value = replace.mutate(rewritten.stages.front().value);
  const std::string row_name = axis > 0 ? r.axes[axis - 1].var.name_hint() : "";
  const std::string gi = folded_rows > 1 ? "(g % " + std::to_string(per_row) + ")" : "g";
  const std::string gi1 = folded_rows > 1 ? "(g % " + std::to_string(per_row) + " + 1)" : "(g+1)";
  lines.push_back(what + ": split into G=" + std::to_string(partials) +
                  " contiguous partials over " +
                  (folded_rows > 1 ? row_name + " and " : std::string()) +
                  split.var.name_hint() + " (kernel " + partials_kernel.name +
                  ", partial g reduces " +
                  (folded_rows > 1 ? row_name + " = g / " + std::to_string(per_row) + ", " +
                                         std::to_string(per_row) + " partials a row; "
                                     : std::string()) +
                  split.var.name_hint() + " in [" + gi + "*" + std::to_string(range) + ", " +
                  gi1 + "*" + std::to_string(range) + "))" +
                  tail_note(extent, per_row * range, split.var.name_hint()) + ", " +
                  (warp_combine ? "combined by a warp per point (" + std::to_string(points) +
                  " points: lane l sums g = l, l + 32, ..., then the shuffle butterfly)"
                                          : "combined in order g = 0.." + std::to_string(partials - 1)) +
                  "; " + why);
  if (notes) {
    (*notes)[partials_kernel.name] =
        "split reduction, stage 1 of 2: " + std::to_string(partials) +
        " contiguous partials of " + stage.target->name + " per point, each " +
        std::to_string(shape.trips / partials) + " iterations; " + why + "\n" +
        stage.target->name + "_partials: " +
        (tile_why.empty() ? "block reduction, g a block axis: " + tile_reason
                          : "no block reduction (" + tile_why + ")");
  }
  out.kernels.push_back(std::move(partials_kernel));
  return rewritten;
}

}  // namespace

void check_reduction_split_options(const ReductionSplitOptions& options) {
  if (options.forced_partials < -1 || options.forced_partials > 4096) {
    throw Error("split_reductions: forced_partials: expected -1 (derive), 0 (never) or a count "
                "in [2, 4096], got " + std::to_string(options.forced_partials),
                ErrorCode::kInvalidArgument);
  }
  const int64_t t = options.target_threads;
  if (t < (int64_t{1} << 10) || t > (int64_t{1} << 24) || (t & (t - 1)) != 0) {
    throw Error("split_reductions: target_threads: expected a power of two in [2^10, 2^24], got " +
                    std::to_string(t),
                ErrorCode::kInvalidArgument);
  }
}

ir::Program split_reductions(const ir::Program& program, const ReductionSplitOptions& options,
                             ScheduleNotes* notes) {
  check_reduction_split_options(options);
  check_thread_tile_options(options.tiles);
  ir::Program out = program;
  out.kernels.clear();
  bool changed = false;
  for (const ir::Kernel& kernel : program.kernels) {
    if (kernel.grid.is_set || kernel.stages.empty() || kernel.grid.reduction_lanes > 1) {
      out.kernels.push_back(kernel);
      continue;
    }
    if (kernel.grid.block_tokens > 0) {
      std::vector<std::string> lines;
      std::optional<ir::Kernel> combine = split_block_reduction(kernel, options, out, lines, notes);
      changed = changed || combine.has_value();
      if (notes && !lines.empty()) {
        if (combine) {  // the block schedule went to the partials kernel: the combine's own line
          (*notes)[kernel.name] = lines.front() + " (the block schedule is the partials kernel's)";
        } else {
          add_schedule_note(*notes, kernel.name, lines.front());
        }
      }
      out.kernels.push_back(combine ? std::move(*combine) : kernel);
      continue;
    }
    const std::vector<int64_t> extents = domain_extents(kernel);
    int64_t points = 1;
    for (int64_t e : extents) points *= e;
    const std::vector<ir::Tensor> written = tensors_written(kernel);
    // The tile thread_tiles will give the partials kernel (its parallelism is the split's).
    ThreadTileOptions tile_options = options.tiles;
    tile_options.min_threads = 1;
    const int64_t tile = choose_thread_tile(kernel, tile_options).points;
    const int64_t target =
        tile <= 1 ? options.target_threads
        : options.count_vector
            ? std::max<int64_t>(options.target_threads / options.vector_thread_divisor, 1)
            : std::max<int64_t>(options.target_threads / options.tiled_thread_divisor, 1);
    const bool streamed = options.streamed_weight_kernels.count(kernel.name) > 0;
    const int64_t max_partials = streamed ? options.streamed_max_partials : options.max_partials;
    ir::Kernel rewritten = kernel;
    std::vector<std::string> lines;
    int64_t most_partials = 0;  // the largest G split here
    for (ir::Stage& stage : rewritten.stages) {
      if (stage.kind != ir::StageKind::kCompute) continue;
      for (const ir::ReduceNode* r : unconditional_reductions(stage.value)) {
        const std::string what = stage.target->name + ": reduction of " +
                                 std::to_string(constant_trips(*r)) + " iterations per point, " +
                                 std::to_string(points) + " points";
        size_t axis = 0;
        std::string why = ineligible(*r, written, axis);
        if (!why.empty()) {
          lines.push_back(what + ": serial in the thread (" + why + ")");
          continue;
        }
        const int64_t extent = *constant(r->axes[axis].extent);
        int64_t partials = 1;
        if (options.forced_partials >= 2) {
          if (iterations_per_partial(extent, options.forced_partials, 1, options.tail) > 0)
            partials = options.forced_partials;
          why = "G=" + std::to_string(options.forced_partials) + " forced by ADJOINT_TUNE_REDUCTION_SPLIT";
          if (partials == 1)
            why += options.tail ? ", which leaves a tail longer than a partial of " +
                                      std::to_string(extent)
                                : ", which does not divide " + std::to_string(extent);
        } else if (options.forced_partials == 0) {
          why = "splitting switched off by ADJOINT_TUNE_REDUCTION_SPLIT=0";
        } else if (constant_trips(*r) < options.min_trips) {
          why = "fewer than " + std::to_string(options.min_trips) + " iterations";
        } else {
          if (tile > 1 && options.count_vector) {
            // The threads the partials kernel will launch for each G: its own tile (which
            // grows with its points) and vector width, as the later passes derive them.
            const bool g_innermost = indexes_contiguously(r->body, r->axes[axis].var.get());
            auto count = [&](int64_t g) {
              if (g == 1) return launched(kernel, options.tiles);
              ir::Tensor probe;
              return launched(make_partials_kernel(kernel.name, stage, *r, axis, g, extents,
                                                   g_innermost, "probe", probe),
                              options.tiles);
            };
            Launched l = count(1);
            while (l.threads < target && partials * 2 <= max_partials &&
                   iterations_per_partial(extent, partials * 2, 1, options.tail) >=
                       options.min_iterations) {
              partials *= 2;
              l = count(partials);
            }
            const std::string each = " (threads of R=" + std::to_string(l.tile) + " points x V=" +
                                     std::to_string(l.vector) + ")";
            why = partials == 1 ? "the domain alone fills the GPU (" +
                                      std::to_string(l.threads) + each + " >= " +
                                      std::to_string(target) + " threads)"
                                : "the partials kernel launches " + std::to_string(l.threads) +
                                      " threads" + each + " (target " +
                                      std::to_string(target) + ")";
          } else {
            // A streamed kernel's partial also walks the reduction's other axes (mhc's i): its
            // floor counts all of its iterations, not only the split axis' share.
            const int64_t other_trips = streamed ? std::max<int64_t>(constant_trips(*r) / extent, 1) : 1;
            while (points * partials / tile < target && partials * 2 <= max_partials &&
                   iterations_per_partial(extent, partials * 2, 1, options.tail) * other_trips >=
                       options.min_iterations)
              partials *= 2;
            const std::string tiled =
                tile > 1 ? " / a thread tile of " + std::to_string(tile) : std::string();
            why = points / tile >= target
                      ? "the domain alone fills the GPU (" + std::to_string(points) + tiled +
                            " >= " + std::to_string(target) + " threads)"
                      : "domain points x G" + tiled + " reach " +
                            std::to_string(points * partials / tile) + " threads (target " +
                            std::to_string(target) + ")";
            if (streamed)
              why += "; streamed weights: G up to " + std::to_string(max_partials);
          }
        }
        if (partials < 2) {
          lines.push_back(what + ": serial in the thread (" + why + ")");
          continue;
        }
        // The partials kernel: domain (stage domain..., g) or (g, stage domain...).
        const ir::Axis& split = r->axes[axis];
        const bool g_innermost = indexes_contiguously(r->body, split.var.get());
        ir::Tensor partial_tensor;
        ir::Kernel partials_kernel =
            make_partials_kernel(kernel.name, stage, *r, axis, partials, extents, g_innermost,
                                 unique_tensor_name(out, stage.target->name + "_partials"),
                                 partial_tensor);
        out.temporaries.push_back(partial_tensor);
        // The combine: the same reduction over g = 0..G-1 of the partials, in order (a
        // fma_sum's partials are plain values: they combine as a sum).
        ir::Var combine("g");
        const ir::ReduceOp combine_op = ir::is_sum(r->op) ? ir::ReduceOp::kSum : r->op;
        std::vector<Expr> indices;
        for (const ir::Axis& a : stage.domain) indices.push_back(a.var);
        if (g_innermost) {
          indices.push_back(combine);
        } else {
          indices.insert(indices.begin(), combine);
        }
        const int64_t covered = partials * (extent / partials);
        Expr combined = with_tail(
            r->op,
            ir::ReduceNode::make(combine_op,
                                 {ir::Axis{combine, index_constant(0), index_constant(partials)}},
                                 ir::LoadNode::make(partial_tensor, indices), r->dtype),
            tail_reduction(*r, axis, covered));
        ReplaceReduce replace(r, combined);
        stage.value = replace.mutate(stage.value);
        lines.push_back(what + ": split into G=" + std::to_string(partials) + " partials over " +
                        split.var.name_hint() + " (kernel " + partials_kernel.name + ", " +
                        (g_innermost ? "partial g reads " + split.var.name_hint() +
                                           " = g + G*step: neighbouring threads read neighbouring "
                                           "elements"
                                     : "g outermost: neighbouring threads keep neighbouring "
                                       "domain points") +
                        "), combined in order g = 0.." + std::to_string(partials - 1) +
                        tail_note(extent, covered, split.var.name_hint()) + "; " + why);
        if (notes) (*notes)[partials_kernel.name] =
            "split reduction, stage 1 of 2: " + std::to_string(partials) + " partials of " +
            stage.target->name + " per point, each " + std::to_string(constant_trips(*r) / partials) +
            " iterations; " + why;
        out.kernels.push_back(std::move(partials_kernel));
        most_partials = std::max(most_partials, partials);
        changed = true;
      }
    }
    // Few points cannot hide G serial loads per thread: a warp per point then (the combine's
    // order is the fixed lane stride and butterfly, deterministic like the thread's).
    bool split_here = false;
    for (const std::string& l : lines) split_here = split_here || l.find(": split into G=") != std::string::npos;
    // A kernel of several stages (mhc_pre_backward's gate_grads: dh_pre2's combine and
    // dh_post2) takes the warp too when one of its combines sums more than
    // multi_stage_warp_combine_partials partials, every stage computes over the first's domain
    // extents (the lanes share each point) and the later stages' reductions shuffle as well.
    bool multi_stage = rewritten.stages.size() > 1 && options.multi_stage_warp_combine_partials > 0 &&
                       most_partials > options.multi_stage_warp_combine_partials;
    if (multi_stage) {
      for (const ir::Stage& stage : rewritten.stages) {
        bool same = stage.kind == ir::StageKind::kCompute &&
                    stage.domain.size() == rewritten.stages.front().domain.size();
        for (size_t a = 0; same && a < stage.domain.size(); ++a) {
          const std::optional<int64_t> e = constant(stage.domain[a].extent);
          same = e && *e == extents[a] && constant(stage.domain[a].start).value_or(-1) == 0;
        }
        multi_stage = multi_stage && same;
      }
    }
    if (split_here && points < options.warp_combine_points &&
        (rewritten.stages.size() == 1 || multi_stage) &&
        rewritten.stages.front().kind == ir::StageKind::kCompute &&
        !rewritten.stages.front().domain.empty()) {
      bool shuffles = true;
      for (const ir::Stage& stage : rewritten.stages) {
        for (const ir::ReduceNode* r : outermost_reductions(stage.value)) {
          const ir::DType t = r->dtype;
          shuffles = shuffles && (t == ir::DType::kF32 || t == ir::DType::kF64 ||
                                  t == ir::DType::kI32 || t == ir::DType::kI64);
        }
      }
      if (shuffles) {
        rewritten.grid.reduction_lanes = 32;
        lines.push_back(rewritten.stages.front().target->name + ": the combine runs a warp per point (" +
                        std::to_string(points) + " points: lane l sums g = l, l + 32, ..., then "
                        "the shuffle butterfly" +
                        (multi_stage ? "; " + std::to_string(rewritten.stages.size()) +
                                           " stages, " + std::to_string(most_partials) +
                                           " partials > " +
                                           std::to_string(options.multi_stage_warp_combine_partials)
                                     : std::string()) +
                        ")");
      }
    }
    if (notes && !lines.empty()) {
      std::string text;
      for (const std::string& l : lines) text += (text.empty() ? "" : "\n") + l;
      // A streamed kernel keeps the block schedule's refusal above its split (why it has one).
      const auto before = notes->find(kernel.name);
      if (streamed && before != notes->end() && !before->second.empty())
        text = before->second + "\n" + text;
      (*notes)[kernel.name] = text;
    }
    out.kernels.push_back(std::move(rewritten));
  }
  if (!changed) return program;
  ir::verify(out);
  return out;
}

}  // namespace adjoint::compiler
