// reduction_schedule: the per-kernel choice between serial and warp-cooperative reductions
// (see the header), with the reason for each choice written to the schedule notes.
#include "compiler/reduction_schedule.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "compiler/program_utils.h"
#include "ir/error.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

using ir::Expr;

std::optional<int64_t> constant(const Expr& e) {
  if (auto* c = e.as<ir::IntConstNode>()) return c->value;
  return std::nullopt;
}

/// True when `var` indexes the innermost, stride-1 dimension of some load of `body`.
bool indexes_contiguously(const Expr& body, const ir::VarNode* var) {
  bool found = false;
  for_each_node(body, [&](const Expr& node) {
    auto* load = node.as<ir::LoadNode>();
    if (!load || load->indices.empty()) return;
    if (load->tensor->strides.back() == 1 && depends_on(load->indices.back(), var)) found = true;
  });
  return found;
}

/// Why the kernel's shape rules the warp schedule out, or empty.
std::string shape_forbids_warp(const ir::Kernel& kernel) {
  if (kernel.grid.is_set) return "its grid is explicit";
  if (kernel.stages.empty()) return "it has no stages";
  if (kernel.stages.front().domain.empty()) return "its domain is one point (rank 0)";
  for (const ir::Stage& stage : kernel.stages) {
    if (stage.kind != ir::StageKind::kCompute) return "a stage scatters";
  }
  return "";
}

bool shuffle_type(ir::DType t) {
  return t == ir::DType::kF16 || t == ir::DType::kBF16 || t == ir::DType::kF32 ||
         t == ir::DType::kF64 || t == ir::DType::kI32 || t == ir::DType::kI64;
}

/// The domain axis a vector group runs along: the innermost of the first target's layout
/// (smallest stride, later axes first on ties), as grid_mapping orders linear axes.
size_t innermost_axis(const ir::Kernel& kernel) {
  const std::vector<int64_t>& strides = kernel.stages.front().target->strides;
  size_t best = 0;
  for (size_t j = 1; j < strides.size(); ++j) {
    if (strides[j] <= strides[best]) best = j;
  }
  return best;
}

/// The multi-output width of a warp kernel: V points of the innermost axis per warp (one
/// accumulator each, combined by the same butterfly), so that a load the V points share (a
/// row of x read for every k of h_mix) is read once for all V. The largest of 8, 4, 2 dividing
/// the axis, when some outermost reduction reads a tensor independently of that axis and every
/// stage's target is contiguous along it; else 1. With `whole_axis_max` > 0, an axis that none
/// of them divides (an odd extent: 3-d grid_sampler's 3 coordinates) and that is at most that
/// long is one group: V = its extent.
int group_width(const ir::Kernel& kernel, const std::vector<const ir::ReduceNode*>& reductions,
                int64_t whole_axis_max = 0) {
  const size_t axis = innermost_axis(kernel);
  const ir::VarNode* x = kernel.stages.front().domain[axis].var.get();
  const int64_t extent = domain_extents(kernel)[axis];
  bool shared = false;
  for (const ir::ReduceNode* r : reductions) {
    for_each_node(r->body, [&](const Expr& node) {
      auto* load = node.as<ir::LoadNode>();
      bool depends = false;
      if (load) {
        for (const Expr& index : load->indices) depends = depends || depends_on(index, x);
      }
      shared = shared || (load && !depends);
    });
  }
  if (!shared) return 1;
  for (const ir::Stage& stage : kernel.stages) {  // as derived_vector_width: one store a group
    if (stage.target->strides[axis] != 1) return 1;
  }
  for (int width : {8, 4, 2}) {
    if (extent % width == 0) return width;
  }
  if (extent > 1 && extent <= whole_axis_max) return static_cast<int>(extent);
  return 1;
}

}  // namespace

ReductionScheduleOptions::Mode parse_reduction_mode(const std::string& text,
                                                    const std::string& what) {
  if (text == "auto") return ReductionScheduleOptions::Mode::kAuto;
  if (text == "serial") return ReductionScheduleOptions::Mode::kSerial;
  if (text == "warp") return ReductionScheduleOptions::Mode::kWarp;
  throw Error(what + ": expected auto, serial or warp, got '" + text + "'",
              ErrorCode::kInvalidArgument);
}

ir::Program choose_reduction_schedules(const ir::Program& program,
                                       const ReductionScheduleOptions& options,
                                       ScheduleNotes* notes) {
  using Mode = ReductionScheduleOptions::Mode;
  ir::Program out = program;
  bool changed = false;
  for (ir::Kernel& kernel : out.kernels) {
    std::vector<std::pair<const ir::ReduceNode*, const ir::Stage*>> reductions;
    for (const ir::Stage& stage : kernel.stages) {
      for (const ir::ReduceNode* r : outermost_reductions(stage.value)) reductions.push_back({r, &stage});
    }
    if (reductions.empty() || kernel.grid.reduction_lanes > 1 || kernel.grid.block_tokens > 0)
      continue;  // block_reductions chose a block schedule for the latter
    int64_t points = 1;
    for (int64_t e : domain_extents(kernel)) points *= e;
    std::vector<std::string> lines;
    bool warp = false;
    const std::string forbids = options.excluded_kernels.count(kernel.name)
                                    ? "it claims slots with atomics, which every lane would repeat"
                                    : shape_forbids_warp(kernel);
    for (const auto& [r, stage] : reductions) {
      const ir::Axis& lane_axis = r->axes.back();
      int64_t trips = 1;
      for (const ir::Axis& a : r->axes) trips *= std::max<int64_t>(constant(a.extent).value_or(1), 1);
      const std::optional<int64_t> lane_extent = constant(lane_axis.extent);
      const std::string what = stage->target->name + ": reduction of " + std::to_string(trips) +
                               " iterations per point, " + std::to_string(points) + " points";
      std::string why;  // why not, when not
      if (!forbids.empty()) {
        why = forbids;
      } else if (!shuffle_type(r->dtype)) {
        why = "it accumulates in " + std::string(ir::dtype_name(r->dtype));
      } else if (options.mode == Mode::kSerial) {
        why = "ADJOINT_TUNE_REDUCTION=serial";
      } else if (options.mode == Mode::kAuto && !options.preferred_kernels.count(kernel.name)) {
        if (trips < options.min_trips) {
          why = "fewer than " + std::to_string(options.min_trips) + " iterations";
        } else if (!lane_extent || *lane_extent < options.min_lane_extent) {
          why = "its innermost axis " + lane_axis.var.name_hint() + " is not a constant of at least " +
                std::to_string(options.min_lane_extent) + " iterations";
        } else if (!indexes_contiguously(r->body, lane_axis.var.get())) {
          why = lane_axis.var.name_hint() +
                " indexes no stride-1 dimension: the lanes of a warp would read strided elements";
        } else if (points < options.min_points) {
          why = "fewer than " + std::to_string(options.min_points) +
                " points: too few warps to fill the GPU";
        }
      }
      if (why.empty()) {
        warp = true;
        lines.push_back(what + ": warp-cooperative, 32 lanes stride over " +
                        lane_axis.var.name_hint() +
                        (options.mode == Mode::kWarp
                             ? " (forced by ADJOINT_TUNE_REDUCTION=warp)"
                         : options.preferred_kernels.count(kernel.name)
                             ? " (laid out for lanes: " + lane_axis.var.name_hint() +
                                   " innermost, its rows contiguous)"
                             : " (long, and " + lane_axis.var.name_hint() +
                                   " indexes a stride-1 dimension: lanes read consecutive elements)") +
                        ", shuffle butterfly 16, 8, 4, 2, 1, lane 0 stores");
      } else if (trips >= options.min_trips || options.mode == Mode::kWarp) {
        lines.push_back(what + ": no warp lanes (" + why + ")");  // short ones go unsaid
      }
    }
    if (warp) {
      const int serial_width = kernel.grid.vector_width;  // restored if it stays serial
      kernel.grid.reduction_lanes = 32;
      std::vector<const ir::ReduceNode*> outermost;
      for (const auto& [r, stage] : reductions) outermost.push_back(r);
      kernel.grid.vector_width =
          group_width(kernel, outermost,
                      options.preferred_kernels.count(kernel.name) ? options.whole_axis_lanes_max
                                                                   : 0);
      if (options.fill_warps && options.mode == Mode::kAuto &&
          !options.preferred_kernels.count(kernel.name) && kernel.grid.vector_width > 1 &&
          points / kernel.grid.vector_width < options.min_points) {
        // Halving keeps a divisor of the axis (8, 4, 2 divide it when the wider one does).
        const int widest = kernel.grid.vector_width;
        while (kernel.grid.vector_width > 1 &&
               points / kernel.grid.vector_width < options.min_points)
          kernel.grid.vector_width /= 2;
        const size_t axis = innermost_axis(kernel);
        lines.push_back(std::to_string(kernel.grid.vector_width) + " point(s) of " +
                        kernel.stages.front().domain[axis].var.name_hint() + " per warp, not " +
                        std::to_string(widest) + ": " + std::to_string(widest) + " would leave " +
                        std::to_string(points / widest) + " warps, fewer than " +
                        std::to_string(options.min_points) + " to fill the GPU; " +
                        std::to_string(points / kernel.grid.vector_width) + " warps");
      }
      int lanes = options.preferred_lanes;
      if (lanes != 0 && lanes != 4 && lanes != 8 && lanes != 16 && lanes != 32)
        throw Error("ReductionScheduleOptions.preferred_lanes: expected 0 (derived), 32, 16, 8 "
                    "or 4, got " + std::to_string(lanes),
                    ErrorCode::kInvalidArgument);
      bool short_axis = false;  // derived 4 lanes for a lane axis shorter than a warp
      bool serial = false;      // ... which then stays serial
      int64_t shortest_lane_axis = kShortLaneAxis;
      if (lanes == 0) {  // derived: 16 lanes for short rows outside the lane axis
        int64_t rows = 1;
        for (const auto& [r, stage] : reductions) {
          int64_t outer = 1;
          for (size_t a = 0; a + 1 < r->axes.size(); ++a)
            outer *= constant(r->axes[a].extent).value_or(kFewLaneRows + 1);
          rows = std::max(rows, outer);
          shortest_lane_axis =
              std::min(shortest_lane_axis, constant(r->axes.back().extent).value_or(kShortLaneAxis));
        }
        lanes = rows <= kFewLaneRows ? 16 : 32;
        // A lane axis shorter than a warp (ADJOINT_TUNE_GATHERED_LANES below 32: 3-d
        // grid_sampler's 16 channels) gets 4 lanes, each lane at least 4 of its elements.
        short_axis = options.preferred_kernels.count(kernel.name) &&
                     shortest_lane_axis < kShortLaneAxis;
        if (short_axis) lanes = 4;
      }
      if (lanes != 32 && options.preferred_kernels.count(kernel.name)) {
        size_t unconditional = 0;
        for (const ir::Stage& stage : kernel.stages)
          unconditional += unconditional_reductions(stage.value).size();
        const int64_t linear = points / std::max(kernel.grid.vector_width, 1);
        // A short lane axis whose points do not fill warps of 4-lane groups tries 8 lanes, then
        // stays one thread per point: 32 lanes would leave half of them idle or more (16
        // channels on 32 lanes made 3-d grad_grid twice as slow on the H100).
        if (short_axis && unconditional == reductions.size() && linear % (32 / lanes) != 0 &&
            linear % (32 / 8) == 0)
          lanes = 8;
        if (short_axis && (unconditional != reductions.size() || linear % (32 / lanes) != 0)) {
          serial = true;
          lines.push_back("one thread per point, not " + std::to_string(lanes) + " lanes: " +
                          (unconditional != reductions.size()
                               ? "a reduction is evaluated under a point-dependent branch"
                               : "the points do not fill whole warps") +
                          ", and " + std::to_string(shortest_lane_axis) +
                          " elements of the lane axis would leave most of 32 lanes idle");
        } else if (unconditional == reductions.size() && linear % (32 / lanes) == 0) {
          kernel.grid.reduction_lanes = lanes;
          for (std::string& line : lines) {
            const std::string from = "warp-cooperative, 32 lanes";
            if (size_t at = line.find(from); at != std::string::npos) {
              line.replace(at, from.size(), "cooperative, " + std::to_string(lanes) +
                                                " lanes per point (" +
                                                std::to_string(32 / lanes) + " points per warp)");
            }
            const std::string butterfly = "shuffle butterfly 16, 8, 4, 2, 1";
            if (size_t at = line.find(butterfly); at != std::string::npos) {
              std::string steps;
              for (int o = lanes / 2; o > 0; o /= 2) steps += (steps.empty() ? "" : ", ") + std::to_string(o);
              line.replace(at, butterfly.size(), "shuffle butterfly " + steps);
            }
          }
        } else {
          lines.push_back("32 lanes, not " + std::to_string(lanes) + ": " +
                          (unconditional != reductions.size()
                               ? "a reduction is evaluated under a point-dependent branch"
                               : "the points do not fill whole warps"));
        }
      }
      if (serial) {
        kernel.grid.reduction_lanes = 1;
        kernel.grid.vector_width = serial_width;
        lines.erase(std::remove_if(lines.begin(), lines.end(),
                                   [](const std::string& line) {
                                     return line.find(": warp-cooperative, 32 lanes") !=
                                            std::string::npos;
                                   }),
                    lines.end());
      } else if (kernel.grid.vector_width > 1) {
        const size_t axis = innermost_axis(kernel);
        lines.push_back("each warp computes " + std::to_string(kernel.grid.vector_width) +
                        " points of " + kernel.stages.front().domain[axis].var.name_hint() +
                        ", one accumulator each: loads independent of " +
                        kernel.stages.front().domain[axis].var.name_hint() +
                        " are read once for all of them");
      }
      changed = changed || !serial;
      // Every outermost reduction of a warp kernel is cooperative, chosen or not.
      for (std::string& line : lines) {
        if (serial) break;
        const std::string marker = ": no warp lanes (";
        if (size_t at = line.find(marker); at != std::string::npos)
          line = line.substr(0, at) + ": warp-cooperative with the kernel's other reductions (" +
                 line.substr(at + marker.size());
      }
    }
    if (notes && !lines.empty()) {
      std::string text;
      for (const std::string& line : lines) text += (text.empty() ? "" : "\n") + line;
      (*notes)[kernel.name] = text;
    }
  }
  return changed ? out : program;
}

}  // namespace adjoint::compiler
