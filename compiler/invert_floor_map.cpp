// lower_scatter_to_gather_generic: matching the floor maps and building the gathers whose
// windows the kernel computes from the runtime extents (see the header).
#include "compiler/invert_floor_map.h"

#include <optional>

#include "compiler/program_utils.h"
#include "ir/builder.h"
#include "ir/error.h"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;

constexpr int64_t kMaxExtent = int64_t{1} << 22;

struct Refusal {
  std::string reason;
};

/// The declared upper bound of a size expression (a constant or a size variable).
int64_t upper_bound(const Expr& e, const ir::Program& program) {
  if (auto* c = e.as<ir::IntConstNode>()) return c->value;
  if (auto* v = e.as<ir::VarNode>()) {
    for (const ir::SizeParam& s : program.sizes) {
      if (s.var.get() == v) return s.upper_bound;
    }
  }
  throw Refusal{"an extent that is neither a constant nor a size parameter"};
}

int64_t lower_bound(const Expr& e, const ir::Program& program) {
  if (auto* c = e.as<ir::IntConstNode>()) return c->value;
  if (auto* v = e.as<ir::VarNode>()) {
    for (const ir::SizeParam& s : program.sizes) {
      if (s.var.get() == v) return s.lower_bound;
    }
  }
  return -1;
}

bool same_extent(const Expr& a, const Expr& b) {
  auto* ca = a.as<ir::IntConstNode>();
  auto* cb = b.as<ir::IntConstNode>();
  if (ca && cb) return ca->value == cb->value;
  return a.same_as(b) || (a.as<ir::VarNode>() && a.as<ir::VarNode>() == b.as<ir::VarNode>());
}

/// True when `cap` is `dim - 1`: a constant one less, or `size - 1` of the same size variable.
bool is_last_index(const Expr& cap, const Expr& dim) {
  auto* c = cap.as<ir::IntConstNode>();
  auto* d = dim.as<ir::IntConstNode>();
  if (c && d) return c->value == d->value - 1;
  auto* difference = cap.as<ir::BinaryNode>();
  auto* one = difference ? difference->b.as<ir::IntConstNode>() : nullptr;
  return difference && difference->op == ir::BinaryOp::kSub && one && one->value == 1 &&
         dim.as<ir::VarNode>() && difference->a.as<ir::VarNode>() == dim.as<ir::VarNode>();
}

/// The dimensions of a tensor as expressions.
std::vector<Expr> dims_of(const ir::Tensor& t) {
  if (t->is_dynamic()) return t->dynamic_shape;
  std::vector<Expr> dims;
  for (int64_t d : t->shape) dims.emplace_back(d);
  return dims;
}

/// A matched floor map f(o) = min(i64(floor((f32(o) + c) * R)), cap).
struct FloorMap {
  const ir::VarNode* var = nullptr;
  Expr position_times_ratio;  ///< (f32(o) + c) * R, the f32 expression floored
  double offset = 0;          ///< c
  Expr ratio;                 ///< R
  Expr cap;
};

std::optional<FloorMap> match_floor_map(const Expr& index) {
  auto* clamp = index.as<ir::BinaryNode>();
  if (!clamp || clamp->op != ir::BinaryOp::kMin) return std::nullopt;
  auto* to_int = clamp->a.as<ir::CastNode>();
  if (!to_int || to_int->dtype != DType::kI64) return std::nullopt;
  auto* floor = to_int->value.as<ir::UnaryNode>();
  if (!floor || floor->op != ir::UnaryOp::kFloor || floor->dtype != DType::kF32) return std::nullopt;
  auto* product = floor->operand.as<ir::BinaryNode>();
  if (!product || product->op != ir::BinaryOp::kMul) return std::nullopt;
  FloorMap map;
  Expr position = product->a;
  if (auto* shifted = position.as<ir::BinaryNode>(); shifted && shifted->op == ir::BinaryOp::kAdd) {
    auto* c = shifted->b.as<ir::FloatConstNode>();
    if (!c || c->value < 0) return std::nullopt;
    map.offset = c->value;
    position = shifted->a;
  }
  auto* to_float = position.as<ir::CastNode>();
  if (!to_float || to_float->dtype != DType::kF32) return std::nullopt;
  map.var = to_float->value.as<ir::VarNode>();
  if (!map.var) return std::nullopt;
  map.position_times_ratio = floor->operand;
  map.ratio = product->b;
  map.cap = clamp->b;
  if (depends_on(map.ratio, map.var)) return std::nullopt;
  return map;
}

/// Checks R > 0 and the f32 exactness conditions of the header; throws a Refusal.
void check_ratio(const FloorMap& map, const Expr& target_dim, const ir::Program& program) {
  const int64_t target_upper = upper_bound(target_dim, program);
  if (auto* c = map.ratio.as<ir::FloatConstNode>()) {
    if (!(c->value > 0) || static_cast<double>(target_upper) > c->value * 0x1p24)
      throw Refusal{"a constant ratio that is not positive or too small for the target's bound"};
    return;
  }
  auto* quotient = map.ratio.as<ir::BinaryNode>();
  auto size_as_float = [&](const Expr& e) {
    if (auto* c = e.as<ir::FloatConstNode>())  // a static size, converted by the builder
      return c->value >= 1 && c->value <= static_cast<double>(kMaxExtent) &&
             c->value == static_cast<double>(static_cast<int64_t>(c->value));
    auto* cast = e.as<ir::CastNode>();
    return cast && cast->dtype == DType::kF32 && lower_bound(cast->value, program) >= 1 &&
           upper_bound(cast->value, program) <= kMaxExtent;
  };
  if (!quotient || quotient->op != ir::BinaryOp::kDiv || !size_as_float(quotient->a) ||
      !size_as_float(quotient->b)) {
    throw Refusal{"a ratio that is neither a positive constant nor f32(size) / f32(size)"};
  }
}

/// start(t) clamped to [0, E]: the first o with f(o) >= t, computed as the header says. Two
/// rewrites keep it cheap and in 32-bit range, with the same result:
/// - the estimate is clamped to [0, E + 3] in f64 before it becomes an integer (an estimate
///   below 0 has start(t) <= 0 and one above E + 3 has start(t) > E, which the probes and the
///   final clamp then give), so its conversion is defined and its range bounded;
/// - a probe f(x) < t is tested as (f32(x) + c) * R < f32(t), the floored product's own
///   comparison: floor(y) < t exactly when y < t for an integer t (exact in f32, t < 2^24), and
///   min(., T - 1) changes nothing for t <= T - 1. The product is the forward's f32 operations.
Expr window_start(const FloorMap& map, const Expr& t, const Expr& extent) {
  Expr reciprocal = ir::constant(DType::kF64, 1.0) / ir::cast(DType::kF64, map.ratio);
  Expr estimate = ir::ceil(ir::cast(DType::kF64, t) * reciprocal -
                           ir::constant(DType::kF64, map.offset));
  Expr highest = ir::cast(DType::kF64, extent + Expr(3));
  Expr base = ir::cast(DType::kI64, ir::min(ir::max(estimate, ir::constant(DType::kF64, 0)),
                                            highest)) -
              Expr(2);
  Expr target = ir::cast(DType::kF32, t);
  Expr start = base;
  for (int j = 0; j < 3; ++j) {
    Expr product = substitute(map.position_times_ratio, map.var, base + Expr(j));
    start = start + ir::select(product < target, Expr(1), Expr(0));
  }
  return ir::min(ir::max(start, Expr(0)), extent);
}

ir::Stage invert(const ir::Stage& stage, const ir::Program& program) {
  const std::vector<Expr> dims = dims_of(stage.target);
  if (stage.indices.size() != dims.size()) throw Refusal{"an index count unlike the target's rank"};
  std::vector<ir::Var> target_vars;
  std::vector<int> target_of_axis(stage.domain.size(), -1);
  std::vector<std::optional<FloorMap>> maps(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) {
    const Expr& index = stage.indices[k];
    int axis = -1;
    const ir::VarNode* var = index.as<ir::VarNode>();
    if (!var) {
      maps[k] = match_floor_map(index);
      if (!maps[k]) throw Refusal{"index " + std::to_string(k) + " is not a floor map of one variable"};
      var = maps[k]->var;
      if (!is_last_index(maps[k]->cap, dims[k]))
        throw Refusal{"index " + std::to_string(k) + " is not clamped to the target's last index"};
      check_ratio(*maps[k], dims[k], program);
    }
    for (size_t j = 0; j < stage.domain.size(); ++j) {
      if (stage.domain[j].var.get() == var) axis = static_cast<int>(j);
    }
    if (axis < 0 || target_of_axis[axis] >= 0)
      throw Refusal{"index " + std::to_string(k) + " does not use its own domain variable"};
    if (!stage.domain[axis].start.as<ir::IntConstNode>() ||
        stage.domain[axis].start.as<ir::IntConstNode>()->value != 0)
      throw Refusal{"a domain axis that does not start at 0"};
    target_of_axis[axis] = static_cast<int>(k);
    if (!maps[k] && !same_extent(stage.domain[axis].extent, dims[k]))
      throw Refusal{"index " + std::to_string(k) + " is a variable whose extent is not the target's"};
    if (maps[k] && (upper_bound(stage.domain[axis].extent, program) > kMaxExtent ||
                    upper_bound(dims[k], program) > kMaxExtent))
      throw Refusal{"index " + std::to_string(k) + " maps an axis longer than 2^22"};
    target_vars.push_back(maps[k] ? ir::Var("i" + std::to_string(k)) : stage.domain[axis].var);
  }
  std::vector<ir::Axis> axes;  // domain order: the interpreter's accumulation order
  for (size_t j = 0; j < stage.domain.size(); ++j) {
    const int k = target_of_axis[j];
    if (k < 0) {
      axes.push_back(ir::range(stage.domain[j].var, stage.domain[j].extent));
    } else if (maps[k]) {
      const Expr t = target_vars[k];
      const Expr e = stage.domain[j].extent;
      Expr lo = window_start(*maps[k], t, e);
      Expr hi = ir::select(t >= maps[k]->cap, e, window_start(*maps[k], t + Expr(1), e));
      axes.push_back(ir::range(stage.domain[j].var, lo, hi - lo));
    }
  }
  Expr body = stage.condition.defined()
                  ? ir::select(stage.condition, stage.value, ir::constant(stage.accumulation, 0))
                  : stage.value;
  Expr gathered = axes.empty() ? body : ir::sum(axes, body, stage.accumulation);
  return ir::compute(stage.target, ir::over(stage.target, target_vars),
                     ir::cast(stage.target->dtype, gathered));
}

}  // namespace

ir::Program lower_scatter_to_gather_generic(const ir::Program& program) {
  ir::Program out = program;
  bool changed = false;
  for (ir::Kernel& kernel : out.kernels) {
    for (ir::Stage& stage : kernel.stages) {
      if (stage.kind != ir::StageKind::kScatterAdd) continue;
      try {
        stage = invert(stage, program);
      } catch (const Refusal& refusal) {
        throw Error("generic program '" + program.name + "', kernel '" + kernel.name +
                        "': the scatter into '" + stage.target->name +
                        "' has no gather computable from runtime extents: " + refusal.reason,
                    ErrorCode::kInvalidProgram);
      }
      changed = true;
    }
  }
  return changed ? out : program;
}

}  // namespace adjoint::compiler
