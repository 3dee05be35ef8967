// lower_generic(): verification at sample sizes, the generic gather inversion, the generic grid
// and its coverage proof, the index width from the declared bounds, and emission.
#include "compiler/lower_generic.h"

#include <algorithm>
#include <set>

#include "ir/bounds.h"
#include "compiler/cuda_emitter.h"
#include "compiler/cuda_syntax.h"
#include "compiler/index_width.h"
#include "compiler/invert_floor_map.h"
#include "compiler/launch_geometry.h"
#include "compiler/lower_outer_generic.h"
#include "compiler/program_utils.h"
#include "compiler/split_generic_reductions.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace adjoint::compiler {
namespace {

/// A size expression (constants, size variables and products) as a SizeProduct.
SizeProduct size_product(const ir::Expr& e, const ir::Program& program) {
  if (auto* c = e.as<ir::IntConstNode>()) return SizeProduct{c->value, {}};
  if (auto* v = e.as<ir::VarNode>()) {
    for (const ir::SizeParam& s : program.sizes) {
      if (s.var.get() == v) return SizeProduct{1, {s.source}};
    }
  }
  if (auto* b = e.as<ir::BinaryNode>(); b && b->op == ir::BinaryOp::kMul) {
    SizeProduct x = size_product(b->a, program), y = size_product(b->b, program);
    x.constant *= y.constant;
    x.sizes.insert(x.sizes.end(), y.sizes.begin(), y.sizes.end());
    return x;
  }
  throw Error("generic program '" + program.name + "': '" + ir::to_string(e) +
                  "' is not a product of sizes",
              ErrorCode::kInvalidProgram);
}

/// Distinct sample sizes inside the bounds: the verifier checks structure at them.
std::vector<int64_t> sample_sizes(const ir::Program& program) {
  std::vector<int64_t> values;
  for (size_t i = 0; i < program.sizes.size(); ++i) {
    const ir::SizeParam& s = program.sizes[i];
    values.push_back(std::min(s.upper_bound, std::max<int64_t>(s.lower_bound, 1) + 2 +
                                                 static_cast<int64_t>(i)));
  }
  return values;
}

int64_t saturating_product(int64_t a, int64_t b) {
  int64_t p = 0;
  return __builtin_mul_overflow(a, b, &p) ? INT64_MAX : p;
}

/// Storage elements of the tensor's (upper-bound) shape, saturating at INT64_MAX.
int64_t saturated_storage(const ir::Tensor& t) {
  int64_t span = 1;
  for (size_t i = 0; i < t->shape.size(); ++i) {
    if (t->shape[i] == 0) return 0;
    int64_t term = saturating_product(t->shape[i] - 1, t->strides[i]);
    if (__builtin_add_overflow(span, term, &span)) return INT64_MAX;
  }
  return span;
}

/// The bound on a dynamic tensor's storage: the declared one, else the value at the upper
/// bounds.
int64_t storage_bound(const ir::Program& program, const ir::Tensor& t) {
  int64_t at_upper = saturated_storage(t);
  if (t->is_dynamic() && program.dynamic_storage_bound > 0)
    return std::min(at_upper, program.dynamic_storage_bound);
  return at_upper;
}

/// 32-bit when every tensor's storage, the grid-stride loop and every reduce window stay
/// within int32 for every size in the bounds; the i64 expressions keep 64-bit math either way.
IndexWidth generic_index_width(const ir::Program& program, const ir::Kernel& kernel) {
  for (const ir::Tensor& t : kernel_tensors(program, kernel)) {
    if (storage_bound(program, t) > kGenericInt32StorageBound) return IndexWidth::k64;
  }
  ir::Bounds bounds;
  for (const ir::SizeParam& s : program.sizes) bounds.bind(s.var.get(), {s.lower_bound, s.upper_bound});
  for (const ir::Stage& stage : kernel.stages) {
    bounds.bind_domain(stage.domain);
    bool fits = true;
    for (const ir::Expr& e : stage_expressions(stage)) {
      for_each_node(e, [&](const ir::Expr& node) {
        if (auto* r = node.as<ir::ReduceNode>()) {
          for (const ir::Axis& axis : r->axes) {
            if (!bounds.is_bound(axis.var.get())) bounds.bind_reduce_axis(axis);
            fits &= bounds.of(axis.var).fits_int32();
          }
        }
      });
    }
    if (!fits) return IndexWidth::k64;
  }
  return IndexWidth::k32;
}

/// The lanes of a warp that share each point of a generic kernel: 32 when one of its stages
/// reduces (outside any other reduction) over a long axis of constant extent whose variable
/// indexes the innermost, stride-1 dimension of a load (mhc_pre_backward's gate_grads: a sum over
/// D per token and stream, which one thread would walk alone, reading strided rows), else 1.
/// `why` receives the dump line.
int generic_reduction_lanes(const ir::Kernel& kernel, std::string& why) {
  int64_t points = 1;  // a static domain's point count, else -1
  for (const ir::Stage& stage : kernel.stages) {
    if (stage.kind != ir::StageKind::kCompute) return 1;
  }
  for (const ir::Axis& axis : kernel.stages.front().domain) {
    auto* extent = axis.extent.as<ir::IntConstNode>();
    points = extent && points >= 0 ? points * extent->value : -1;
  }
  // Few points of a static domain that reduce long (the combines of split_generic_reductions:
  // dbias' 24 points over 1024 partials each): a warp per point whatever the access pattern.
  for (const ir::Stage& stage : kernel.stages) {
    auto* r = stage.value.as<ir::ReduceNode>();
    if (points < 0 || points >= kGenericLaneMaxFewPoints || !r || r->axes.size() != 1) continue;
    auto* extent = r->axes.front().extent.as<ir::IntConstNode>();
    if (!extent || extent->value < kGenericLaneMinTrips) continue;
    why = "warp-cooperative: " + stage.target->name + " has " + std::to_string(points) +
          " points, each reducing " + std::to_string(extent->value) + " iterations of " +
          r->axes.front().var.name_hint() + ": a warp per point, its lanes striding over them, "
          "then a shuffle butterfly in fixed order";
    return 32;
  }
  for (const ir::Stage& stage : kernel.stages) {
    bool found = false;
    for_each_node(stage.value, [&](const ir::Expr& node) {
      auto* r = node.as<ir::ReduceNode>();
      if (found || !r || r->axes.empty()) return;
      const ir::Axis& axis = r->axes.back();
      auto* start = axis.start.as<ir::IntConstNode>();
      auto* extent = axis.extent.as<ir::IntConstNode>();
      if (!start || !extent || extent->value < kGenericLaneMinTrips) return;
      for_each_node(r->body, [&](const ir::Expr& inner) {
        auto* load = inner.as<ir::LoadNode>();
        if (found || !load || load->indices.empty() || load->tensor->strides.back() != 1) return;
        if (!depends_on(load->indices.back(), axis.var.get())) return;
        found = true;
        why = "warp-cooperative: " + stage.target->name + " reduces over " +
              axis.var.name_hint() + " (" + std::to_string(extent->value) +
              " iterations, stride-1 in " + load->tensor->name +
              "): the 32 lanes of a warp share each point and stride over it, then a shuffle "
              "butterfly in fixed order; the grid-stride loop steps by warps";
      });
    });
    if (found) return 32;
  }
  return 1;
}

/// The points of the innermost axis that each warp of a warp-cooperative generic kernel computes,
/// one accumulator each (as the specialized reduction schedule's group_width): the largest of 8,
/// 4, 2 that divides the innermost extent, a constant, when a reduction loads a tensor that does
/// not move with that axis (mhc_pre's mhc_mix: x and gamma, the same for its 24 k; mhc_post's
/// dh_res: grad_out for its n points of j) and every stage stores that axis with stride 1; else
/// 1. The lanes then read each such element once for the whole group.
int generic_warp_group(const ir::Kernel& kernel) {
  const std::vector<ir::Axis>& domain = kernel.stages.front().domain;
  auto* extent = domain.empty() ? nullptr : domain.back().extent.as<ir::IntConstNode>();
  if (!extent) return 1;
  bool shared = false;
  for (const ir::Stage& stage : kernel.stages) {
    if (stage.target->strides.back() != 1) return 1;
    const ir::VarNode* var = stage.domain.back().var.get();
    for_each_node(stage.value, [&](const ir::Expr& node) {
      auto* r = node.as<ir::ReduceNode>();
      if (!r) return;
      for_each_node(r->body, [&](const ir::Expr& inside) {
        auto* load = inside.as<ir::LoadNode>();
        if (!load || load->indices.empty()) return;
        bool moves = false;
        for (const ir::Expr& index : load->indices) moves = moves || depends_on(index, var);
        shared = shared || !moves;
      });
    });
  }
  if (!shared) return 1;
  for (int width : {8, 4, 2})
    if (extent->value % width == 0) return width;
  return 1;
}

/// A tensor's size for comparisons: its elements, each runtime dimension counting 2^20 (a
/// dynamic tensor's `shape` holds upper bounds, whose product may overflow).
double tensor_weight(const ir::TensorNode& t) {
  double elements = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    const bool runtime = t.is_dynamic() && !t.dynamic_shape[d].as<ir::IntConstNode>();
    elements *= runtime ? 1048576.0 : static_cast<double>(t.shape[d]);
  }
  return elements;
}

/// True when a stage of `kernel` reduces over axes of constant extent (rms_grad's 24 mixing
/// terms per token): such a kernel keeps one point per thread on a runtime innermost axis, for
/// parallelism (a tail-guarded group of 4 tokens per thread ran its reductions serially in a
/// quarter of the threads). Windows of runtime extent (upsample's) keep the group, whose points
/// share window edges.
bool reduces_per_point(const ir::Kernel& kernel) {
  bool found = false;
  for (const ir::Stage& stage : kernel.stages) {
    for (const ir::Expr& e : stage_expressions(stage)) {
      for_each_node(e, [&](const ir::Expr& node) {
        auto* r = node.as<ir::ReduceNode>();
        if (!r || found) return;
        bool constant = !r->axes.empty();
        for (const ir::Axis& a : r->axes)
          constant = constant && a.extent.as<ir::IntConstNode>() && a.start.as<ir::IntConstNode>();
        found = constant;
      });
    }
  }
  return found;
}

/// Whether generic `kernel` decodes its runtime axes between warps of its vector groups
/// (EmitOptions::interleave_size_axes): a vector group on a constant innermost axis of a multiple
/// of 32 groups, runtime extents on a prefix of the domain with a static axis after it, and a
/// load of a static tensor (one the block's warps then share through L1).
bool interleaves_size_axes(const ir::Kernel& kernel) {
  const ir::GridConfig& g = kernel.grid;
  if (kernel.stages.empty() || g.vector_width <= 1 || g.reduction_lanes != 1) return false;
  const std::vector<ir::Axis>& domain = kernel.stages.front().domain;
  auto* inner = domain.empty() ? nullptr : domain.back().extent.as<ir::IntConstNode>();
  if (!inner || (inner->value / g.vector_width) % 32 != 0) return false;
  size_t prefix = 0;
  while (prefix < domain.size() && !domain[prefix].extent.as<ir::IntConstNode>()) ++prefix;
  if (prefix == 0 || prefix + 1 >= domain.size()) return false;
  for (size_t i = prefix; i < domain.size(); ++i)
    if (!domain[i].extent.as<ir::IntConstNode>()) return false;
  bool shared = false;
  for (const ir::Stage& stage : kernel.stages) {
    for (const ir::Expr& e : stage_expressions(stage)) {
      for_each_node(e, [&](const ir::Expr& node) {
        auto* load = node.as<ir::LoadNode>();
        shared = shared || (load && !load->tensor->is_dynamic() && tensor_weight(*load->tensor) > 1);
      });
    }
  }
  return shared;
}

/// The thread tile of a generic vector-group kernel (points per thread on one axis), or {-1, 1}:
///  * a runtime axis (the innermost one) when a stage reduces, over constant trips, loads of a
///    tensor that does not move with it: dx's phi, then read once per tile of tokens instead of
///    once per token. R = kGenericTileAccumulators / V, at most kMaxGenericTilePoints; any tile
///    may be partial (clamped, guarded);
///  * in a static domain, the outer axis whose tile shares the largest tensor a reduction over
///    a runtime extent loads (split_generic_reductions' x_mix partials: x does not move with k,
///    so a tile of k reads each x span once for all its k). R is the largest divisor of the
///    axis' extent within the same bounds (no partial tile).
/// `why` receives the dump's reason.
std::pair<int, int> generic_thread_tile(const ir::Kernel& kernel, int vector_width,
                                        std::string& why) {
  const std::vector<ir::Axis>& domain = kernel.stages.front().domain;
  const int64_t most = std::min<int64_t>(kMaxGenericTilePoints, kGenericTileAccumulators / vector_width);
  if (most < 2) return {-1, 1};
  int runtime_axis = -1;
  for (size_t i = 0; i + 1 < domain.size(); ++i)
    if (!domain[i].extent.as<ir::IntConstNode>()) runtime_axis = static_cast<int>(i);
  // The largest tensor that a reduction (of constant trips, or of runtime trips) of some stage
  // loads without moving with domain axis `axis`.
  auto shared_load = [&](int axis, bool runtime_trips) -> const ir::TensorNode* {
    const ir::TensorNode* best = nullptr;
    for (const ir::Stage& stage : kernel.stages) {
      const ir::VarNode* var = stage.domain[axis].var.get();
      for (const ir::Expr& e : stage_expressions(stage)) {
        for_each_node(e, [&](const ir::Expr& node) {
          auto* r = node.as<ir::ReduceNode>();
          if (!r) return;
          bool constant = true;
          for (const ir::Axis& a : r->axes)
            constant = constant && a.extent.as<ir::IntConstNode>() && a.start.as<ir::IntConstNode>();
          if (constant == runtime_trips) return;
          for_each_node(r->body, [&](const ir::Expr& inner) {
            auto* load = inner.as<ir::LoadNode>();
            if (!load || tensor_weight(*load->tensor) <= 1) return;
            bool moves = false;
            for (const ir::Expr& index : load->indices) moves = moves || depends_on(index, var);
            if (!moves && (!best || tensor_weight(*load->tensor) > tensor_weight(*best)))
              best = load->tensor.get();
          });
        });
      }
    }
    return best;
  };
  if (runtime_axis >= 0) {
    const ir::TensorNode* shared = shared_load(runtime_axis, false);
    if (!shared) return {-1, 1};
    why = "the reduction's loads of " + shared->name + " do not move with it";
    return {runtime_axis, static_cast<int>(most)};
  }
  int best_axis = -1, best_points = 1;
  const ir::TensorNode* best = nullptr;
  for (size_t i = 0; i + 1 < domain.size(); ++i) {
    const int64_t extent = domain[i].extent.as<ir::IntConstNode>()->value;
    int points = 1;
    for (int64_t r = most; r >= 2; --r) {
      if (extent % r == 0) {
        points = static_cast<int>(r);
        break;
      }
    }
    const ir::TensorNode* shared = points > 1 ? shared_load(static_cast<int>(i), true) : nullptr;
    if (shared && (!best || tensor_weight(*shared) > tensor_weight(*best))) {
      best = shared;
      best_axis = static_cast<int>(i);
      best_points = points;
    }
  }
  if (best_axis < 0) return {-1, 1};
  why = "the loads of " + best->name + " in its reduction over a runtime extent do not move with it";
  return {best_axis, best_points};
}

/// The points of `kernel`'s domain when every extent is a constant, else -1.
int64_t static_domain_points(const ir::Kernel& kernel) {
  int64_t points = 1;
  for (const ir::Axis& axis : kernel.stages.front().domain) {
    auto* extent = axis.extent.as<ir::IntConstNode>();
    if (!extent) return -1;
    points *= extent->value;
  }
  return points;
}

std::string entry_name(const ir::Program& program, const ir::Kernel& kernel,
                       std::set<std::string>& used) {
  std::string base = sanitize_identifier(program.name + "_" + kernel.name + "_generic");
  std::string name = base;
  for (int i = 1; used.count(name); ++i) name = base + "_" + std::to_string(i);
  used.insert(name);
  return name;
}

}  // namespace

int generic_group_points(const ir::Program& program, const ir::Kernel& kernel) {
  if (kernel.stages.empty() || kernel.stages.front().domain.empty()) return 1;
  int bytes = kGenericGroupBytes;  // the narrowest stored element sets the group
  for (const ir::Stage& stage : kernel.stages)
    bytes = std::min(bytes, kGenericGroupBytes / static_cast<int>(ir::dtype_bytes(stage.target->dtype)));
  int points = std::clamp(bytes, 1, kMaxGenericGroupPoints);
  ir::Bounds bounds;
  for (const ir::SizeParam& s : program.sizes) bounds.bind(s.var.get(), {s.lower_bound, s.upper_bound});
  const ir::Interval inner = bounds.of(kernel.stages.front().domain.back().extent);
  if (inner.has_max()) points = static_cast<int>(std::min<int64_t>(points, std::max<int64_t>(inner.max, 1)));
  return points;
}

void check_generic_coverage(const ir::Program& program, const ir::Kernel& kernel) {
  const ir::GridConfig& g = kernel.grid;
  auto refuse = [&](const std::string& why) {
    throw Error("generic kernel '" + kernel.name + "': cannot prove that its grid covers the "
                "symbolic domain exactly once: " + why,
                ErrorCode::kInvalidProgram);
  };
  if (kernel.stages.empty()) return;
  const std::vector<ir::Axis>& domain = kernel.stages.front().domain;
  if (g.bindings.size() != domain.size()) refuse("one binding per domain axis is needed");
  for (size_t j = 0; j < domain.size(); ++j) {
    if (g.bindings[j] != ir::AxisBinding::kLinear) {
      refuse("axis '" + domain[j].var.name_hint() + "' is bound " +
             std::string(ir::axis_binding_name(g.bindings[j])) +
             "; only linear axes (a grid-stride decode of every extent) are proven generically");
    }
  }
  const int innermost = static_cast<int>(domain.size()) - 1;
  // A vector group of V points covers the innermost axis exactly when its extent is a constant
  // multiple of V (extent / V whole groups); a dynamic extent has no such guarantee.
  if (g.vector_width != 1) {
    if (g.vector_width < 1 || g.vector_width > 16 || (g.vector_width & (g.vector_width - 1)) != 0)
      refuse("vector width " + std::to_string(g.vector_width) + " is not a power of two up to 16");
    auto* inner = domain.empty() ? nullptr : domain.back().extent.as<ir::IntConstNode>();
    if (!inner || inner->value % g.vector_width != 0)
      refuse("vector width " + std::to_string(g.vector_width) +
             " needs the innermost extent to be a constant multiple of it");
    if (g.tile_points > 1 && g.tile_axis == innermost)
      refuse("a vector group and a group of points on one axis");
  }
  // A group of R consecutive innermost points per thread is covered for every extent E: the
  // decode counts ceil(E / R) groups on that axis, and point g * R + r (r < R) is computed behind
  // the guard g * R + r < E, so each point of [0, E) is computed by exactly one (g, r). With a
  // vector group on the innermost axis, the same holds for a thread tile of R points on another
  // axis: ceil(E / R) tiles, point base + r stored behind base + r < E. Any other tile axis
  // would need R to divide its extent.
  if (g.tile_points < 1 || g.tile_points > kMaxGenericGroupPoints)
    refuse("a group of " + std::to_string(g.tile_points) + " points per thread is outside [1, " +
           std::to_string(kMaxGenericGroupPoints) + "]");
  if (g.tile_points > 1 && g.vector_width == 1 && g.tile_axis != innermost) {
    refuse("a group of " + std::to_string(g.tile_points) + " points on axis " +
           std::to_string(g.tile_axis) + " needs that extent to be a multiple of it, unknown for a " +
           "dynamic extent; groups are proven on the innermost axis only (with a tail guard)");
  }
  if (g.tile_points > 1 && g.vector_width > 1 && (g.tile_axis < 0 || g.tile_axis >= innermost))
    refuse("a thread tile must be on an axis other than the vector group's");
  if (g.reduction_lanes != 1 && g.reduction_lanes != 32)
    refuse("only whole warps (32 lanes) share a point of a generic kernel");
  if (g.block_size < 32 || g.block_size > 1024 || g.block_size % 32 != 0)
    refuse("block size " + std::to_string(g.block_size) + " is not a multiple of 32 in [32, 1024]");
  ir::Bounds bounds;
  for (const ir::SizeParam& s : program.sizes) bounds.bind(s.var.get(), {s.lower_bound, s.upper_bound});
  for (const ir::Axis& axis : domain) {
    ir::Interval extent = bounds.of(axis.extent);
    auto* start = axis.start.as<ir::IntConstNode>();
    if (!start || start->value != 0) refuse("axis '" + axis.var.name_hint() + "' does not start at 0");
    if (!extent.has_max() || extent.min < 0)
      refuse("the extent of axis '" + axis.var.name_hint() + "' is not a bounded size");
  }
  // The decode needs the point count plus one grid stride to fit the index type: the index
  // width covers it for 32-bit kernels, and the runtime checks it for each call
  // (kMaxGenericPoints) since a product of upper bounds may exceed int64.
  auto same_extent = [](const ir::Expr& a, const ir::Expr& b) {
    auto* x = a.as<ir::IntConstNode>();
    auto* y = b.as<ir::IntConstNode>();
    if (x && y) return x->value == y->value;
    return a.same_as(b) || (a.as<ir::VarNode>() && a.as<ir::VarNode>() == b.as<ir::VarNode>());
  };
  for (const ir::Stage& stage : kernel.stages) {
    bool same = stage.domain.size() == domain.size();
    for (size_t j = 0; same && j < domain.size(); ++j)
      same = same_extent(stage.domain[j].extent, domain[j].extent);
    if (!same) refuse("its stages do not share one domain");
  }
}

CompiledProgram lower_generic(const ir::Program& input, const LowerOptions& options) {
  if (input.sizes.empty()) return lower(input, options);
  // A size that only counts an outer batch: the specialized pipeline's kernels, with that count
  // as a parameter (compiler/lower_outer_generic.h).
  std::string not_outer = "off";
  if (options.outer_generic) {
    if (std::optional<CompiledProgram> outer = lower_outer_generic(input, options, &not_outer))
      return std::move(*outer);
  }
  ir::verify(ir::bind_sizes(input, sample_sizes(input)));
  std::string dump;
  auto record = [&](const char* name, const ir::Program& before, const ir::Program& after) {
    if (!options.record_passes) return;
    dump += "// ----- after " + std::string(name) + "\n";
    dump += same_program(before, after) ? "(unchanged)\n" : ir::to_string(after);
  };
  if (options.record_passes) dump += "// ----- input\n" + ir::to_string(input);
  ir::Program p = lower_scatter_to_gather_generic(input);
  record("lower_scatter_to_gather_generic", input, p);
  ScheduleNotes notes;
  {
    GenericSplitOptions split;
    split.enabled = options.reduction_split != 0;
    ir::Program split_program = split_generic_reductions(p, split, &notes);
    record("split_generic_reductions", p, split_program);
    p = std::move(split_program);
  }
  ir::Program gridded = p;
  const int block = options.block_size > 0 ? options.block_size : kDefaultBlockSize;
  for (ir::Kernel& kernel : gridded.kernels) {
    if (!kernel.grid.is_set && !kernel.stages.empty()) {
      kernel.grid.is_set = true;
      kernel.grid.bindings.assign(kernel.stages.front().domain.size(), ir::AxisBinding::kLinear);
      kernel.grid.block_size = block;
      std::string lanes_note;
      kernel.grid.reduction_lanes =
          options.reduction_schedule == "serial" ? 1 : generic_reduction_lanes(kernel, lanes_note);
      if (!lanes_note.empty()) add_schedule_note(notes, kernel.name, lanes_note);
      bool warp_grouped = false;  // by generic_warp_group: the lane groups below then stay out
      if (kernel.grid.reduction_lanes == 32 && options.generic_warp_groups > 0) {
        if (const int width = generic_warp_group(kernel); width > 1) {
          warp_grouped = true;
          kernel.grid.vector_width = width;
          const ir::Axis& axis = kernel.stages.front().domain.back();
          add_schedule_note(notes, kernel.name,
                            "each warp computes " + std::to_string(width) + " points of " +
                                axis.var.name_hint() +
                                ", one accumulator each: loads independent "
                                "of " +
                                axis.var.name_hint() + " are read once for all of them");
          // And a tile of tokens where the reduction's loads of a tensor do not move with them
          // (mhc_mix's phi): each lane then reads phi once per tile instead of once per token.
          std::string tile_note;
          auto [tile_axis, tile] = generic_thread_tile(kernel, width, tile_note);
          if (options.generic_warp_groups > 1 && tile_axis >= 0 &&
              !kernel.stages.front().domain[tile_axis].extent.as<ir::IntConstNode>()) {
            kernel.grid.tile_axis = tile_axis;
            kernel.grid.tile_points = tile;
            add_schedule_note(notes, kernel.name,
                              "warp tile: " + std::to_string(tile) + " points of " +
                                  kernel.stages.front().domain[tile_axis].var.name_hint() +
                                  " per warp (a runtime extent: any tile may be the partial last "
                                  "one, clamped and guarded); " +
                                  tile_note);
          }
        }
      }
      const int points = generic_group_points(gridded, kernel);
      auto* inner = kernel.stages.front().domain.empty()
                        ? nullptr
                        : kernel.stages.front().domain.back().extent.as<ir::IntConstNode>();
      // A warp-cooperative kernel takes the group too (LowerOptions::generic_lane_groups): its
      // warps compute the group's points, the lanes striding over each reduction once for all
      // of them (gate_grads' 4 streams of a token: grad_h_in read once, not 4 times).
      // Only where the warps scale with a runtime extent: a static domain of few points keeps
      // a warp per point (dbias' 24 combines took 2.8 us so, 6.7 us in 6 warps on the H100).
      const int64_t static_points = static_domain_points(kernel);
      // A warp group chosen above (generic_warp_groups) keeps its width and tile; where that
      // rule is off or finds no shared load, generic_lane_groups may still group the lanes.
      const bool lanes_group = kernel.grid.reduction_lanes == 1 ||
                               (options.generic_lane_groups && static_points < 0);

      // A static domain with fewer than generic_min_vector_groups groups keeps a thread per
      // point, as derive_grid's kMinVectorGroups rule for specialized kernels (dgamma's 16384
      // points, each a reduction of 24 trips: 11.3 us in 4096 groups, 2.5 us specialized).
      const bool enough_groups =
          static_points < 0 || kernel.grid.reduction_lanes > 1 ||
          static_points / points >= options.generic_min_vector_groups;
      if (warp_grouped) {
        // nothing more: the warp group above is the kernel's schedule
      } else if (points > 1 && (points & (points - 1)) == 0 && lanes_group && enough_groups &&
          options.generic_vector_groups && inner && inner->value % points == 0) {
        // A static innermost extent that the group divides: a vector group (spans, one
        // reduction loop for the group's points), as in a specialized kernel.
        kernel.grid.vector_width = points;
        if (kernel.grid.reduction_lanes > 1)
          add_schedule_note(notes, kernel.name,
                            "each warp computes a vector group of " + std::to_string(points) +
                                " points of " + kernel.stages.front().domain.back().var.name_hint() +
                                ": loads that do not move with it are read once for all of them");
        std::string tile_note;
        if (const auto [axis, tile] = kernel.grid.reduction_lanes > 1
                                    ? std::pair<int, int>{-1, 1}
                                    : generic_thread_tile(kernel, points, tile_note);
            axis >= 0) {
          const ir::Axis& tiled = kernel.stages.front().domain[axis];
          kernel.grid.tile_axis = axis;
          kernel.grid.tile_points = tile;
          add_schedule_note(notes, kernel.name,
                            "thread tile: " + std::to_string(tile) + " points of " +
                                tiled.var.name_hint() + " per thread" +
                                (tiled.extent.as<ir::IntConstNode>()
                                     ? std::string(" (a divisor of its extent)")
                                     : std::string(" (a runtime extent: any tile may be the "
                                                   "partial last one, clamped and guarded)")) +
                                "; " + tile_note);
          // A tiled thread keeps tile x V accumulators: blocks of 128 let more of them reside
          // (as thread_tiles does for specialized kernels).
          if (options.block_size <= 0) kernel.grid.block_size = kGenericTiledBlockSize;
        }
      } else if (points > 1 && enough_groups && !reduces_per_point(kernel)) {
        kernel.grid.tile_axis = static_cast<int>(kernel.stages.front().domain.size()) - 1;
        kernel.grid.tile_points = points;
      }
    }
    check_generic_coverage(gridded, kernel);
  }
  record("generic_grid", p, gridded);
  p = gridded;

  CompiledProgram out;
  out.name = input.name;
  for (const ir::SizeParam& s : input.sizes) out.sizes.push_back(s.source);
  std::set<std::string> entries;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const ir::Kernel& kernel = p.kernels[k];
    if (kernel.stages.empty()) continue;
    EmitOptions emit_options;
    emit_options.index_width = generic_index_width(p, kernel);
    // The aligned twin of thread-tiled kernels (LowerOptions::generic_aligned_twin;
    // tile_prefetch 0: one copy, a check per access) and the streaming hints, as in lower().
    emit_options.tile_prefetch = options.generic_aligned_twin ? options.tile_prefetch : 0;
    emit_options.tile_early_copies = options.tile_early_copies;
    emit_options.progressive_group_sums = options.progressive_group_sums;
    emit_options.tile_early_wide_reads = options.tile_early_wide_reads;
    emit_options.tile_uniform_ring = options.tile_uniform_ring;
    emit_options.lane_spans = options.lane_spans;
    emit_options.lane_span_unroll = options.lane_span_unroll;
    emit_options.tile_point_fallback = options.tile_point_fallback;
    emit_options.tile_min_blocks = options.tile_min_blocks;
    emit_options.streaming_loads = options.generic_streaming && options.streaming_loads;
    emit_options.streaming_stores = options.generic_streaming && options.streaming_stores;
    emit_options.spans_of_evaluated_loads = options.generic_evaluated_spans;
    emit_options.interleave_size_axes =
        options.generic_interleave && interleaves_size_axes(kernel);
    if (*emit_options.index_width == IndexWidth::k32) {  // i32 window math where it fits
      ir::Bounds bounds;
      for (const ir::SizeParam& s : p.sizes) bounds.bind(s.var.get(), {s.lower_bound, s.upper_bound});
      for (ir::Stage& stage : p.kernels[k].stages) stage = narrow_stage_index_math(stage, bounds);
    }
    emit_options.schedule_note =
        "generic in " +
        [&] {
          std::string names;
          for (const ir::SizeParam& s : p.sizes) names += (names.empty() ? "" : ", ") + s.source;
          return names;
        }() +
        " (not as an outer batch: " + not_outer + ")" +
        (kernel.grid.vector_width > 1 && kernel.grid.reduction_lanes > 1
             ? "; a group of " + std::to_string(kernel.grid.vector_width) +
                   " innermost points per warp (a constant extent that it divides), "
                   "grid-stride over the runtime group count"
         : kernel.grid.vector_width > 1
             ? "; a vector group of " + std::to_string(kernel.grid.vector_width) +
                   " innermost points per thread (a constant extent that it divides: spans and "
                   "one reduction loop for the group), grid-stride over the runtime group count"
         : kernel.grid.tile_points > 1
             ? "; " + std::to_string(kernel.grid.tile_points) +
                   " consecutive innermost points per thread (tail-guarded), grid-stride over "
                   "the runtime group count"
             : std::string("; one point per thread, grid-stride over the runtime point count"));
    if (auto note = notes.find(kernel.name); note != notes.end())
      emit_options.schedule_note += "\n" + note->second;
    CompiledKernel compiled = emit_cuda_kernel(p, k, entry_name(p, kernel, entries), emit_options);
    SizeProduct points;
    for (const ir::Axis& axis : kernel.stages.front().domain) {
      SizeProduct e = size_product(axis.extent, p);
      points.constant *= e.constant;
      points.sizes.insert(points.sizes.end(), e.sizes.begin(), e.sizes.end());
    }
    // The runtime launches about points / (block x points per thread) threads: a warp-cooperative
    // kernel counts a thread per lane of each point.
    points.constant *= std::max(kernel.grid.reduction_lanes, 1);
    compiled.points = points;
    compiled.points_per_thread =
        kernel.grid.vector_width > 1
            ? kernel.grid.vector_width * std::max(kernel.grid.tile_points, 1)
            : std::max(kernel.grid.tile_points, 1);
    for (const ir::Stage& stage : kernel.stages) {
      if (stage.kind == ir::StageKind::kScatterAdd)
        throw Error("generic kernel '" + kernel.name + "' kept a scatter", ErrorCode::kInternal);
    }
    out.kernels.push_back(std::move(compiled));
  }
  for (const auto* list : {&p.inputs, &p.outputs, &p.temporaries}) {
    for (const ir::Tensor& t : *list) {
      BufferInfo b{t->name, t->dtype, t->shape, t->strides,
                   saturating_product(saturated_storage(t), ir::dtype_bytes(t->dtype)), t->role,
                   {}, {}};
      if (t->is_dynamic()) {
        for (const ir::Expr& d : t->dynamic_shape) b.dynamic_shape.push_back(size_product(d, p));
        for (const ir::Expr& d : t->dynamic_strides) b.dynamic_strides.push_back(size_product(d, p));
      }
      out.buffers.push_back(std::move(b));
    }
  }
  out.pass_dump = dump;
  return out;
}

}  // namespace adjoint::compiler
