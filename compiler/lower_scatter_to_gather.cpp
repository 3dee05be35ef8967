// lower_scatter_to_gather: plans each scatter's inversion (classifying its indices and fitting a
// preimage window per mapped axis) and, when every index qualifies, builds the gather stage.
#include "compiler/lower_scatter_to_gather.h"

#include <map>
#include <optional>

#include "compiler/preimage_window.h"
#include "compiler/program_utils.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

using ir::Expr;

/// kScanned: any other index, tested per record (ScanGatherOptions).
enum class IndexKind { kIdentity, kConstant, kMapped, kScanned };

/// How one target index is produced from the scatter's domain.
struct TargetIndex {
  IndexKind kind = IndexKind::kConstant;
  int domain_axis = -1;   ///< kIdentity, kMapped: which domain variable
  int64_t constant = 0;   ///< kConstant
  PreimageWindow window;  ///< kMapped
};

int domain_position(const ir::Stage& stage, const ir::VarNode* var) {
  for (size_t j = 0; j < stage.domain.size(); ++j) {
    if (stage.domain[j].var.get() == var) return static_cast<int>(j);
  }
  return -1;
}

/// The single variable of an index expression, or nullptr when it has loads, reductions or
/// more than one variable.
const ir::VarNode* single_variable(const Expr& index) {
  const ir::VarNode* var = nullptr;
  bool ok = true;
  for_each_node(index, [&](const Expr& e) {
    if (e.kind() == ir::ExprKind::kLoad || e.kind() == ir::ExprKind::kReduce) ok = false;
    if (auto* v = e.as<ir::VarNode>()) {
      if (var && var != v) ok = false;
      var = v;
    }
  });
  return ok ? var : nullptr;
}

/// The cost bound of the inversion: an axis is evaluated point by point (extent points) and its
/// preimage starts tabulated (target extent + 1 entries), so both are capped. About 0.2 s and
/// 16 MiB at the cap on the CI machine; longer axes keep their scatter, which
/// lower_scatter_to_atomics then lowers (a correct, non-deterministic fallback).
constexpr int64_t kMaxInvertedAxisPoints = int64_t{1} << 20;

/// f(o) for every o in [0, extent), evaluated as the interpreter would; nullopt if any value
/// leaves [0, target_extent), the map decreases somewhere, or either extent is over the cap.
std::optional<std::vector<int64_t>> monotone_image(const Expr& f, const ir::VarNode* var,
                                                   int64_t extent, int64_t target_extent) {
  if (extent > kMaxInvertedAxisPoints || target_extent > kMaxInvertedAxisPoints) {
    return std::nullopt;
  }
  std::vector<double> values;
  double last = 0;
  bool valid = true;
  try {
    values = ir::evaluate_at_points(f, var, extent, [&](double value) {
      const int64_t v = static_cast<int64_t>(value);
      valid = v >= 0 && v < target_extent && v >= static_cast<int64_t>(last);
      last = value;
      return !valid;
    });
  } catch (const Error&) {
    return std::nullopt;  // e.g. a division by zero at some o: not a map we can invert
  }
  if (!valid) return std::nullopt;
  std::vector<int64_t> image;
  image.reserve(values.size());
  for (double value : values) image.push_back(static_cast<int64_t>(value));
  return image;
}

/// A scanned gather's records per element (the product of the extents of the domain variables
/// that no identity or mapped index takes; a mapped one keeps its window) and its target's
/// elements. The product stops growing past `length_cap`, so it cannot overflow.
struct ScanSize {
  int64_t length = 1;
  int64_t elements = 1;
};
ScanSize scan_size(const std::vector<TargetIndex>& plan, const std::vector<int64_t>& extents,
                   const std::vector<int64_t>& shape, int64_t length_cap) {
  ScanSize size;
  for (size_t j = 0; j < extents.size() && size.length <= length_cap; ++j) {
    bool taken = false;
    for (const TargetIndex& t : plan) taken = taken || t.domain_axis == static_cast<int>(j);
    if (!taken) size.length *= extents[j];
  }
  for (int64_t e : shape) size.elements *= e;
  return size;
}

/// Classifies every target index, or nullopt when the scatter cannot be inverted. With `scan`,
/// an index that has no other form is kScanned, kept only while the scan stays within bounds.
std::optional<std::vector<TargetIndex>> plan_inversion(const ir::Stage& stage,
                                                       const std::vector<int64_t>& extents,
                                                       const ScanGatherOptions& scan) {
  const std::vector<int64_t>& shape = stage.target->shape;
  const bool may_scan = scan.work_max > 0 && scan.length_max > 0 &&
                        (!scan.may_scan_stage || scan.may_scan_stage(stage));
  std::vector<bool> used(stage.domain.size(), false);
  std::vector<TargetIndex> plan;
  bool scanned = false;
  auto scan_instead = [&](TargetIndex t) {
    if (!may_scan) return false;
    t.kind = IndexKind::kScanned;
    t.domain_axis = -1;
    plan.push_back(t);
    scanned = true;
    return true;
  };
  for (size_t k = 0; k < stage.indices.size(); ++k) {
    const Expr& index = stage.indices[k];
    TargetIndex t;
    if (auto* c = index.as<ir::IntConstNode>()) {
      if (c->value < 0 || c->value >= shape[k]) return std::nullopt;
      t.kind = IndexKind::kConstant;
      t.constant = c->value;
      plan.push_back(t);
      continue;
    }
    const ir::VarNode* var = single_variable(index);
    int j = var ? domain_position(stage, var) : -1;
    if (j < 0 || used[j]) {
      if (scan_instead(t)) continue;
      return std::nullopt;
    }
    if (index.as<ir::VarNode>()) {
      if (extents[j] > shape[k]) return std::nullopt;
      t.kind = IndexKind::kIdentity;
    } else {
      auto image = monotone_image(index, var, extents[j], shape[k]);
      std::optional<PreimageWindow> window;
      if (image) window = fit_preimage_window(preimage_starts(*image, shape[k]), extents[j]);
      if (!window || window->slack() > kMaxGatherWindowSlack) {
        if (scan_instead(t)) continue;
        return std::nullopt;
      }
      t.kind = IndexKind::kMapped;
      t.window = *window;
    }
    used[j] = true;
    t.domain_axis = j;
    plan.push_back(t);
  }
  if (scanned) {
    const ScanSize size = scan_size(plan, extents, shape, scan.length_max);
    if (size.length > scan.length_max) return std::nullopt;
    if (size.length > 0 && size.elements > scan.work_max / size.length) return std::nullopt;
  }
  return plan;
}

/// The reduce axis of a mapped domain variable: the window of source points for target t.
ir::Axis window_axis(const ir::Var& source, const Expr& t, const PreimageWindow& w) {
  const int64_t e = w.source_extent;
  auto line = [&](int64_t intercept) {
    return ir::min(ir::max((t * Expr(w.a) + Expr(intercept)) / Expr(w.c), 0), Expr(e));
  };
  Expr lo = ir::max(line(w.b) + Expr(w.lo_offset), 0);
  Expr hi = ir::min(line(w.a + w.b) + Expr(w.hi_offset), Expr(e));
  return ir::range(source, lo, hi - lo);
}

ir::Stage build_gather(const ir::Stage& scatter, const std::vector<TargetIndex>& plan,
                       const std::vector<int64_t>& extents) {
  const ir::Tensor& target = scatter.target;
  std::vector<ir::Var> target_vars;
  std::vector<int> target_of_axis(scatter.domain.size(), -1);
  Expr mask, guard;
  auto conjoin = [](Expr& acc, Expr c) { acc = acc.defined() ? (acc && c) : c; };
  for (size_t k = 0; k < plan.size(); ++k) {
    const TargetIndex& t = plan[k];
    target_vars.push_back(t.kind == IndexKind::kIdentity ? scatter.domain[t.domain_axis].var
                                                         : ir::Var("i" + std::to_string(k)));
    if (t.domain_axis >= 0) target_of_axis[t.domain_axis] = static_cast<int>(k);
    Expr tk = target_vars.back();
    if (t.kind == IndexKind::kConstant) conjoin(guard, tk == Expr(t.constant));
    if (t.kind == IndexKind::kIdentity && extents[t.domain_axis] < target->shape[k]) {
      conjoin(guard, tk < Expr(extents[t.domain_axis]));
    }
    if ((t.kind == IndexKind::kMapped && !t.window.exact) || t.kind == IndexKind::kScanned)
      conjoin(mask, scatter.indices[k] == tk);
  }
  if (scatter.condition.defined()) conjoin(mask, scatter.condition);

  std::vector<ir::Axis> axes;  // in domain order: the interpreter's accumulation order
  for (size_t j = 0; j < scatter.domain.size(); ++j) {
    int k = target_of_axis[j];
    if (k < 0) {
      axes.push_back(ir::range(scatter.domain[j].var, Expr(extents[j])));  // summed over
    } else if (plan[k].kind == IndexKind::kMapped) {
      axes.push_back(window_axis(scatter.domain[j].var, target_vars[k], plan[k].window));
    }
  }
  Expr body = mask.defined()
                  ? ir::select(mask, scatter.value, ir::constant(scatter.accumulation, 0))
                  : scatter.value;
  Expr gathered = axes.empty() ? body : ir::sum(axes, body, scatter.accumulation);
  Expr value = ir::cast(target->dtype, gathered);
  if (guard.defined()) value = ir::select(guard, value, ir::constant(target->dtype, 0));
  return ir::compute(target, ir::over(target, target_vars), value);
}

std::optional<ir::Stage> invert(const ir::Stage& stage, const ScanGatherOptions& scan,
                                std::string* scanned = nullptr) {
  std::vector<int64_t> extents;
  for (const ir::Axis& axis : stage.domain) {
    auto* c = axis.extent.as<ir::IntConstNode>();
    if (!c) return std::nullopt;
    extents.push_back(c->value);
  }
  if (stage.indices.size() != static_cast<size_t>(stage.target->rank())) return std::nullopt;
  auto plan = plan_inversion(stage, extents, scan);
  if (!plan) return std::nullopt;
  if (scanned) {
    bool any = false;
    for (const TargetIndex& t : *plan) any = any || t.kind == IndexKind::kScanned;
    if (any) {
      const ScanSize size = scan_size(*plan, extents, stage.target->shape, scan.length_max);
      *scanned = "scanned gather: each of the " + std::to_string(size.elements) +
                 " elements of " + stage.target->name + " tests " + std::to_string(size.length) +
                 " records in domain order (at most " + std::to_string(scan.length_max) +
                 ", ADJOINT_TUNE_SCAN_GATHER_LENGTH; " +
                 std::to_string(size.elements * size.length) +
                 " in all, at most " + std::to_string(scan.work_max) +
                 ", ADJOINT_TUNE_SCAN_GATHER): no bins, no atomics";
    }
  }
  return build_gather(stage, *plan, extents);
}

}  // namespace

ir::Program lower_scatter_to_gather(const ir::Program& program, const ScanGatherOptions& scan) {
  std::map<const ir::TensorNode*, int> writers;
  for (const ir::Kernel& kernel : program.kernels) {
    for (const ir::Stage& stage : kernel.stages) ++writers[stage.target.get()];
  }
  ir::Program out = program;
  out.kernels.clear();
  bool changed = false;
  for (const ir::Kernel& kernel : program.kernels) {
    ir::Kernel kept = kernel;
    kept.stages.clear();
    std::vector<ir::Stage> gathers;
    std::vector<std::string> scanned;  // the dump's line of each scanned gather, else empty
    for (const ir::Stage& stage : kernel.stages) {
      std::optional<ir::Stage> gather;
      std::string by_scan;
      if (stage.kind == ir::StageKind::kScatterAdd && writers[stage.target.get()] == 1)
        gather = invert(stage, scan, &by_scan);
      if (gather) {
        gathers.push_back(*gather);
        scanned.push_back(by_scan);
      } else {
        kept.stages.push_back(stage);
      }
    }
    if (gathers.empty()) {
      out.kernels.push_back(kernel);
      continue;
    }
    changed = true;
    if (!kept.stages.empty()) out.kernels.push_back(kept);
    const bool keeps_name = kept.stages.empty() && gathers.size() == 1;
    for (size_t g = 0; g < gathers.size(); ++g) {
      const ir::Stage& gather = gathers[g];
      out.kernels.push_back(ir::Kernel{
          keeps_name ? kernel.name : kernel.name + "_" + gather.target->name, {gather}, {}});
      if (!scanned[g].empty() && scan.scanned_kernels)
        (*scan.scanned_kernels)[out.kernels.back().name] = scanned[g];
    }
  }
  return changed ? out : program;
}

ir::Program lower_scatter_to_gather(const ir::Program& program) {
  return lower_scatter_to_gather(program, ScanGatherOptions{});
}

}  // namespace adjoint::compiler
