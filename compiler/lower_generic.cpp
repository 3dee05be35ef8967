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
  if (g.vector_width != 1) {
    refuse("vector width " + std::to_string(g.vector_width) +
           " needs the innermost extent to be a multiple of it, unknown for a dynamic extent");
  }
  // A group of R consecutive innermost points per thread is covered for every extent E: the
  // decode counts ceil(E / R) groups on that axis, and point g * R + r (r < R) is computed behind
  // the guard g * R + r < E, so each point of [0, E) is computed by exactly one (g, r). Any other
  // tile axis would need R to divide its extent.
  if (g.tile_points < 1 || g.tile_points > kMaxGenericGroupPoints)
    refuse("a group of " + std::to_string(g.tile_points) + " points per thread is outside [1, " +
           std::to_string(kMaxGenericGroupPoints) + "]");
  if (g.tile_points > 1 && g.tile_axis != static_cast<int>(domain.size()) - 1) {
    refuse("a group of " + std::to_string(g.tile_points) + " points on axis " +
           std::to_string(g.tile_axis) + " needs that extent to be a multiple of it, unknown for a " +
           "dynamic extent; groups are proven on the innermost axis only (with a tail guard)");
  }
  if (g.reduction_lanes != 1) refuse("warp-cooperative reductions are not generic");
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
      const int points = generic_group_points(gridded, kernel);
      if (points > 1) {
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
    if (*emit_options.index_width == IndexWidth::k32) {  // i32 window math where it fits
      ir::Bounds bounds;
      for (const ir::SizeParam& s : p.sizes) bounds.bind(s.var.get(), {s.lower_bound, s.upper_bound});
      for (ir::Stage& stage : p.kernels[k].stages) stage = narrow_stage_index_math(stage, bounds);
    }
    emit_options.schedule_note = "generic in " + [&] {
      std::string names;
      for (const ir::SizeParam& s : p.sizes) names += (names.empty() ? "" : ", ") + s.source;
      return names;
    }() + " (not as an outer batch: " + not_outer + ")" + (kernel.grid.tile_points > 1
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
    compiled.points = points;
    compiled.points_per_thread = std::max(kernel.grid.tile_points, 1);
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
