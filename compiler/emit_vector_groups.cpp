// KernelEmitter, vector groups (kernels with vector width V > 1, see vector_groups.h): each
// thread computes V consecutive points of the innermost linear axis; loads that read one span
// of consecutive elements for the whole group are loaded once with the widest aligned access,
// reductions uniform over the group run once with V accumulators, and contiguous targets are
// stored as one group.
#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <unordered_set>

#include "compiler/kernel_emitter.h"
#include "compiler/program_utils.h"

namespace adjoint::compiler {

using ir::BinaryOp;
using ir::DType;
using ir::Expr;
using ir::UnaryOp;

void KernelEmitter::emit_scoped_loop(const std::string& header, const ir::VarNode* var,
                                     const std::string& name, const std::string& base,
                                     const std::string& offset,
                                     const std::function<void()>& body, int64_t clamp,
                                     const std::string& pragma,
                                     const std::string& runtime_limit) {
  out_->line(pragma);
  CodeWriter::Block loop = out_->block(header);
  CodeWriter inner(out_->indent());
  CodeWriter* saved = out_;
  out_ = &inner;
  scopes_.push_back(Scope{{}, &inner, false});
  var_names_[var] = name;
  var_levels_[var] = scopes_.size() - 1;
  const bool used = uses_name(name, body);
  var_names_.erase(var);
  scopes_.pop_back();
  out_ = saved;
  if (used && !runtime_limit.empty()) {  // a generic tile: points past the runtime extent
    const std::string sum = base + " + " + offset;  // read (and compute) its last point's
    out_->line("const " + index_type_ + " " + name + " = " + sum + " < " + runtime_limit + " ? " +
               sum + " : " + runtime_limit + " - 1;");
    referenced_.insert(base);
  } else if (used && clamp >= 0) {  // a partial tile's points past clamp read (and compute) clamp's
    const std::string sum = base + " + " + offset;
    out_->line("const " + index_type_ + " " + name + " = " + sum + " < " +
               std::to_string(clamp + 1) + " ? " + sum + " : " + std::to_string(clamp) + ";");
    referenced_.insert(base);
  } else if (used) {
    out_->line("const " + index_type_ + " " + name + " = " + base + " + " + offset + ";");
    referenced_.insert(base);
  }
  out_->append(inner.text());
}

void KernelEmitter::emit_guarded(const std::string& condition, const std::function<void()>& body) {
  CodeWriter::Block guard = out_->block("if (" + condition + ") {");
  CodeWriter inner(out_->indent());
  CodeWriter* saved = out_;
  out_ = &inner;
  scopes_.push_back(Scope{{}, &inner, false});
  body();
  scopes_.pop_back();
  out_ = saved;
  out_->append(inner.text());
}

int KernelEmitter::tile_loop_unroll() const {
  // At most kTileUnrollUpdates accumulator updates per unrolled body, and at most 4 copies: a
  // cubin NVRTC compiles in a fraction of a second (a fully unrolled 512-trip token loop of
  // 24 x 2 updates took 4.8 s and 574 KB).
  if (options_.tile_unroll > 0) return options_.tile_unroll;
  int factor = 1;
  while (factor < 4 && 2 * factor * tile_->points * vector_->width <= kTileUnrollUpdates)
    factor *= 2;
  return factor;
}

void KernelEmitter::for_each_tile_point(const ir::VarNode* a, const std::string& a_name,
                                        const std::function<void()>& body) {
  if (!tile_) {
    body();
    return;
  }
  const std::string& r = tile_->index;
  emit_scoped_loop("for (int " + r + " = 0; " + r + " < " + std::to_string(tile_->points) +
                       "; ++" + r + ") {",
                   a, a_name, tile_->base, r, body, tile_->partial() ? tile_->extent - 1 : -1,
                   "#pragma unroll", tile_->runtime_extent);
}

void KernelEmitter::for_each_element(const ir::VarNode* x, const std::string& x_name,
                                     const std::function<void()>& body) {
  const std::string& e = vector_->element;
  emit_scoped_loop(
      "for (int " + e + " = 0; " + e + " < " + std::to_string(vector_->width) + "; ++" + e + ") {",
      x, x_name, vector_->base, e, body);
}

/// A reduction runs once for the whole group, with one accumulator per element, when all its
/// axes but the last are uniform over the group (independent of x) and the last is uniform too
/// or has the same windows in every group (`windows`, see vector_groups.h).
bool KernelEmitter::plan_group_reduction(const ir::ReduceNode& n, const ir::VarNode* x,
                                         std::optional<GroupWindows>& windows) {
  if (n.axes.empty()) return false;
  if (!lane_.empty() && reduce_depth_ > 0) return false;
  auto uniform = [&](const ir::Axis& axis) {
    return !depends_on(axis.start, x) && !depends_on(axis.extent, x);
  };
  if (tile_) {  // one loop for every tile point: the axes must not move with the tile either
    for (const ir::Axis& axis : n.axes) {
      if (depends_on(axis.start, tile_->var) || depends_on(axis.extent, tile_->var) ||
          !uniform(axis))
        return false;
    }
    return true;
  }
  for (size_t i = 0; i + 1 < n.axes.size(); ++i) {
    if (!uniform(n.axes[i])) return false;
  }
  if (uniform(n.axes.back())) return true;
  if (!lane_.empty()) return false;  // warp lanes stride over uniform axes only
  windows = group_windows(n.axes.back(), x, vector_->extent, vector_->width);
  return windows.has_value();
}

std::string KernelEmitter::emit_group_reduction(const ir::ReduceNode& n, const ir::VarNode* x,
                                                const std::string& x_name,
                                                const std::optional<GroupWindows>& windows) {
  const size_t uniform_axes = windows ? n.axes.size() - 1 : n.axes.size();
  const std::string width = std::to_string(vector_->width);
  const std::string& e = vector_->element;
  std::vector<LoopBounds> bounds;
  int64_t unrolled_trips = 1;
  for (size_t i = 0; i < uniform_axes; ++i)
    bounds.push_back(loop_bounds(n.axes[i], unrolled_trips));
  for (const ir::Axis& axis : n.axes) bounds_.bind_reduce_axis(axis);
  std::unordered_map<const ir::VarNode*, Lane> lanes;
  lanes[x] = x_lane();

  // A windowed last axis: element e runs over window_base + [begin(e), end(e)).
  const ir::Axis* windowed = windows ? &n.axes.back() : nullptr;
  std::string window_base, window_begin, window_end, window_var;
  if (windowed) {
    const std::string hint = windowed->var.name_hint();
    std::string start = as_index(substitute(windowed->start, x, vector_->base_var));
    window_base = declare(hint + "_base", index_type_, plus(start, windows->shift));
    out_->line("// the " + hint + " windows of " + x_name + " = " + vector_->base + " + " + e +
               " lie in " + window_base + " + [0, " + std::to_string(windows->span) + ")");
    if (windows->affine()) {
      std::string scaled = windows->step() == 0   ? ""
                           : windows->step() == 1 ? e
                                                  : e + " * " + std::to_string(windows->step());
      window_begin =
          scaled.empty() ? std::to_string(windows->begin[0]) : plus(scaled, windows->begin[0]);
      window_end =
          scaled.empty() ? std::to_string(windows->end[0]) : plus(window_begin, windows->width());
    } else {
      auto table = [&](const std::string& suffix, const std::vector<int64_t>& values) {
        std::string name = names_.fresh(hint + suffix);
        std::vector<std::string> items;
        for (int64_t v : values) items.push_back(std::to_string(v));
        out_->line("constexpr int " + name + "[" + width + "] = {" + join(items, ", ") + "};");
        return name + "[" + e + "]";
      };
      window_begin = table("_begin_offset", windows->begin);
      window_end = table("_end_offset", windows->end);
    }
    window_var = names_.fresh(hint);
    lanes[windowed->var.get()] =
        Lane{window_base,     vector_->offset, windows->span, windows->base_alignment,
             windows->lowest, windows->highest};
  }

  if (!lane_.empty() && windowed) {
    throw Error("emit_cuda: a windowed group reduction in a warp kernel ('" + kernel_.name + "')",
                ErrorCode::kInternal);
  }
  // Inside the uniform loops the body is written once per element (and window offset).
  const int64_t copies = vector_->width * (windowed ? windows->span : 1);
  const std::vector<std::string> pragmas =
      loop_pragmas(std::vector<ir::Axis>(n.axes.begin(), n.axes.begin() + uniform_axes), bounds,
                   (unrolled_size(n.body, options_.unroll, n.axes) + 1) * copies,
                   !lane_.empty() && !windowed ? n.axes.size() - 1 : SIZE_MAX);
  std::string acc = names_.fresh("acc");
  std::vector<std::string> init(static_cast<size_t>(vector_->width), reduce_init(n));
  if (tile_) {  // acc[r][e]: one row of V accumulators per tile point
    std::vector<std::string> rows(static_cast<size_t>(tile_->points), "{" + join(init, ", ") + "}");
    out_->line(std::string(cuda_value_type(n.dtype)) + " " + acc + "[" +
               std::to_string(tile_->points) + "][" + width + "] = {" + join(rows, ", ") + "};");
  } else {
    out_->line(std::string(cuda_value_type(n.dtype)) + " " + acc + "[" + width + "] = {" +
               join(init, ", ") + "};");
  }
  scopes_.push_back(Scope{{}, out_, false});
  std::vector<CodeWriter::Block> loops;
  // Warp kernels: lanes stride over the last axis (plan_group_reduction gives them no windows).
  const bool cooperative = !lane_.empty() && !windowed;
  // The aligned copy of a tiled kernel: the innermost loop may run in chunks of P iterations
  // whose streamed spans are loaded ahead (emit_prefetched_iterations).
  const int64_t prefetch =
      cooperative || windowed ? 0 : prefetch_depth(n, x, bounds, pragmas, uniform_axes);
  std::string prefetched_name;
  // Lane spans (emit_lane_spans.cpp) in place of the strided loop over the last axis.
  const bool spans_planned = cooperative && plan_lane_spans(n, x).has_value();
  bool spanned = false;
  const std::string row = tile_ ? acc + "[" + tile_->index + "]" : acc;
  const std::string element_acc = row + "[" + e + "]";
  for (size_t i = 0; i < uniform_axes; ++i) {
    if (spans_planned && i + 1 == n.axes.size()) {
      ++reduce_depth_;
      spanned = emit_lane_spans(
          n, strip_parens(bounds[i].start), bounds[i].end, x,
          [&](const std::function<void()>& f) { for_each_element(x, x_name, f); },
          [&] { out_->line(accumulate_body(n, element_acc)); });
      --reduce_depth_;
      if (spanned) break;
    }
    std::string v = names_.fresh(n.axes[i].var.name_hint());
    if (prefetch > 0 && i + 1 == uniform_axes) {  // emit_prefetched_iterations opens it
      prefetched_name = v;
      break;
    }
    var_names_[n.axes[i].var.get()] = v;
    var_levels_[n.axes[i].var.get()] = scopes_.size() - 1;
    const bool strided = cooperative && i + 1 == n.axes.size();
    std::string pragma = pragmas[i];
    if (pragma.empty() && bounds[i].long_constant && tile_ && !strided)  // R x V updates a
      pragma = "#pragma unroll " + std::to_string(tile_loop_unroll());  // trip: not all of it
    if (!pragma.empty()) out_->line(pragma);
    std::string start = strip_parens(bounds[i].start);
    if (strided) start = start == "0" ? lane_ : start + " + " + lane_;
    loops.push_back(out_->block("for (" + index_type_ + " " + v + " = " + start + "; " + v +
                                " < " + bounds[i].end +
                                (strided ? "; " + v + " += " + std::to_string(kernel_.grid.reduction_lanes)
                                         : "; ++" + v) +
                                ") {"));
  }
  ++reduce_depth_;
  std::unordered_map<int, Span> outer_spans = spans_;
  // With a thread tile the tile loop runs inside the reduction's loops: loads that do not move
  // with the tile axis are the same in every unrolled iteration and read once.
  auto iteration = [&] {
    span_reduction_ = &n;
    if (tile_) emit_tile_spans(n.body, lanes, false);
    span_reduction_ = nullptr;
    for_each_tile_point(tile_ ? tile_->var : nullptr, tile_ ? tile_name_ : std::string(), [&] {
      span_reduction_ = &n;
      if (tile_) emit_tile_spans(n.body, lanes, true);
      else emit_spans(n.body, lanes);
      span_reduction_ = nullptr;
      for_each_element(x, x_name, [&] {
        if (!windowed) {
          out_->line(accumulate_body(n, element_acc));
          return;
        }
        const std::string& j = vector_->offset;
        emit_scoped_loop(
            "for (int " + j + " = " + window_begin + "; " + j + " < " + window_end + "; ++" + j +
                ") {",
            windowed->var.get(), window_var, window_base, j,
            [&] { out_->line(accumulate_body(n, element_acc)); });
      });
    });
  };
  if (spanned) {
    // the lane-span loops are written
  } else if (prefetch > 0) {
    emit_prefetched_iterations(n, lanes, n.axes[uniform_axes - 1].var.get(), prefetched_name,
                               strip_parens(bounds[uniform_axes - 1].start),
                               bounds[uniform_axes - 1].end, prefetch, iteration);
  } else {
    iteration();
  }
  --reduce_depth_;
  spans_ = std::move(outer_spans);
  scopes_.pop_back();
  while (!loops.empty()) loops.pop_back();
  if (cooperative) {  // the fixed butterfly per element, then lane 0's values everywhere
    const std::string offset = names_.fresh("offset");
    std::optional<CodeWriter::Block> tile_points;  // and per point of a thread tile
    if (tile_) {
      const std::string& r = tile_->index;
      out_->line("#pragma unroll");
      tile_points.emplace(out_->block("for (int " + r + " = 0; " + r + " < " +
                                      std::to_string(tile_->points) + "; ++" + r + ") {"));
    }
    out_->line("#pragma unroll");
    CodeWriter::Block elements = out_->block("for (int " + e + " = 0; " + e + " < " + width +
                                             "; ++" + e + ") {");
    out_->line("#pragma unroll");
    {
      CodeWriter::Block loop = out_->block("for (int " + offset + " = " +
                                           std::to_string(kernel_.grid.reduction_lanes / 2) + "; " +
                                           offset + " > 0; " + offset + " /= 2) {");
      out_->line(accumulate(n, element_acc,
                            "__shfl_xor_sync(0xffffffffu, " + element_acc + ", " + offset + ")"));
    }
    out_->line(element_acc + " = " + lane_broadcast(element_acc) + ";");
  }
  return row;
}

int64_t KernelEmitter::prefetch_depth(const ir::ReduceNode& n, const ir::VarNode* x,
                                      const std::vector<LoopBounds>& bounds,
                                      const std::vector<std::string>& pragmas,
                                      size_t uniform_axes) const {
  // Only the aligned copy of a tiled kernel (its loads have no branch that would keep the
  // prefetched ones apart), and only a long loop of constant trips: x_mix's token loop; in a
  // generic kernel also a loop of runtime trips (x_mix's split token loop), whose last trips
  // that fill no whole chunk run without the ring.
  if (!aligned_twin_ || !tile_ || options_.tile_prefetch < 2 || uniform_axes == 0) return 0;
  const size_t last = uniform_axes - 1;
  auto* extent = n.axes[last].extent.as<ir::IntConstNode>();
  const bool runtime_trips = !program_.sizes.empty() && !extent && pragmas[last].empty();
  if (!runtime_trips && (!bounds[last].long_constant || !extent || !pragmas[last].empty()))
    return 0;
  // The bytes per iteration that would be held P times: the loads that move with the group's
  // axis x but not with the tile axis (x_mix's 2 bf16 of x; dx's 8 floats of phi).
  int64_t bytes = 0;
  std::unordered_set<const ir::ExprNode*> seen;
  std::function<void(const Expr&)> walk = [&](const Expr& node) {
    if (!seen.insert(node.get()).second || node.kind() == ir::ExprKind::kReduce) return;
    ir::for_each_child(node, walk);
    auto* load = node.as<ir::LoadNode>();
    if (load && depends_on(node, x) && !depends_on(node, tile_->var))
      bytes += vector_->width * ir::dtype_bytes(load->tensor->dtype);
  };
  walk(n.body);
  if (bytes == 0) return 0;
  int64_t depth = 1;
  while (2 * depth <= options_.tile_prefetch && (runtime_trips || extent->value % (2 * depth) == 0) &&
         2 * (2 * depth) * bytes <= kPrefetchBytes)
    depth *= 2;
  return depth >= 4 ? depth : 0;
}

void KernelEmitter::emit_prefetched_iterations(
    const ir::ReduceNode& n, const std::unordered_map<const ir::VarNode*, Lane>& lanes,
    const ir::VarNode* var, const std::string& name, const std::string& start,
    const std::string& end, int64_t depth, const std::function<void()>& iteration) {
  const std::string u = names_.fresh("u");
  const std::string p = std::to_string(depth);
  const std::string header = "for (int " + u + " = 0; " + u + " < " + p + "; ++" + u + ") {";
  const std::string chunk = names_.fresh(name + "_chunk");
  const std::string buffer = names_.fresh("ring_buffer");
  // The copies of the spans that do not move with the tile axis for P iterations from `first`
  // into ring buffer `into` (emit_spans in prefetch mode), one group of cp.async.
  CodeWriter declarations(out_->indent());
  prefetch_ = Prefetch{u, depth, &declarations, 0, "0", {}};
  auto copies = [&](const std::string& first) {
    const std::unordered_map<int, Span> saved = spans_;
    auto body = [&] {
      span_reduction_ = &n;
      emit_tile_spans(n.body, lanes, false);
      span_reduction_ = nullptr;
    };
    emit_scoped_loop(header, var, name, first, u, body);
    spans_ = saved;
    if (!options_.tile_uniform_ring) return;
    // The block's rings (block_uniform_load): thread j copies piece j / P of iteration j % P.
    const std::string thread_u = names_.fresh("block_u"), piece = names_.fresh("piece");
    CodeWriter block(out_->indent() + 1);
    CodeWriter* outer = out_;
    out_ = &block;
    prefetch_->block_pass = true;
    prefetch_->index = thread_u;
    prefetch_->piece = piece;
    const int64_t before = prefetch_->block_copies;
    emit_scoped_loop("{", var, name, first, thread_u, body, -1,
                     "// the spans the whole block reads: thread j copies piece j / " + p +
                         " of iteration j % " + p);
    prefetch_->block_pass = false;
    prefetch_->index = u;
    out_ = outer;
    spans_ = saved;
    if (prefetch_->block_copies == before) return;
    CodeWriter::Block scope = out_->block("{");
    out_->line("const int " + thread_u + " = (int)threadIdx.x % " + p + ";");
    out_->line("const int " + piece + " = (int)threadIdx.x / " + p + ";");
    out_->append(block.text());
  };
  // A runtime trip count (generic kernels, prefetch_depth): the chunks end at the last whole
  // one, `full`, and the trips after it run plainly.
  bool runtime_trips = false;
  for (const ir::Axis& axis : n.axes)
    if (axis.var.get() == var) runtime_trips = !axis.extent.as<ir::IntConstNode>();
  std::string full = end;
  if (runtime_trips) {
    full = names_.fresh(name + "_chunks_end");
    out_->line("const " + index_type_ + " " + full + " = " + end + " > " + start + " ? " +
               start + " + (" + end + " - " + start + ") / " + p + " * " + p + " : " + start +
               ";");
  }
  CodeWriter prologue(out_->indent() + (runtime_trips ? 1 : 0));
  CodeWriter* saved = out_;
  out_ = &prologue;
  copies(start);
  out_ = saved;
  Prefetch ring = std::move(*prefetch_);
  prefetch_.reset();
  // Trips [from, end) one by one, their spans loaded directly.
  auto plain_trips = [&](const std::string& from) {
    emit_scoped_loop("for (" + index_type_ + " " + u + " = 0; " + u + " < " + end + " - " + from +
                         "; ++" + u + ") {",
                     var, name, from, u, iteration, -1, "#pragma unroll 1");
  };
  if (ring.spans == 0 && runtime_trips) {  // nothing to prefetch after all: the plain loop
    plain_trips(start);
    return;
  }
  if (ring.spans == 0) {  // nothing to prefetch after all: the plain loop
    out_->line("#pragma unroll 1");
    CodeWriter::Block loop = out_->block("for (" + index_type_ + " " + chunk + " = " + start +
                                         "; " + chunk + " < " + end + "; " + chunk + " += " + p +
                                         ") {");
    emit_scoped_loop(header, var, name, chunk, u, iteration);
    return;
  }
  out_->line("// the spans that do not move with " + tile_name_ + " go through shared memory, " +
             p + " iterations a group of cp.async, a group ahead of their multiply-adds");
  out_->append(declarations.text());
  if (runtime_trips) {
    CodeWriter::Block any = out_->block("if (" + start + " < " + full + ") {");
    out_->append(prologue.text());
  } else {
    out_->append(prologue.text());
  }
  out_->line("adjoint::commit_async();");
  out_->line("int " + buffer + " = 0;");
  const std::unordered_map<int, Span> plain_spans = spans_;
  out_->line("#pragma unroll 1");
  std::optional<CodeWriter::Block> loop;
  loop.emplace(out_->block("for (" + index_type_ + " " + chunk + " = " + start + "; " + chunk +
                           " < " + full + "; " + chunk + " += " + p + ") {"));
  // A ring of the block: each chunk waits for its copies and meets the block (whose copies
  // then all have landed, and which is done with the other buffer) before it copies the next.
  bool block_shared = false;
  for (const auto& [id, slot] : ring.rings) block_shared = block_shared || slot.block_shared;
  if (block_shared) {
    out_->line("adjoint::wait_async<0>();  // this chunk's copies have landed");
    out_->line("__syncthreads();  // the block's too, and every thread is done with the other buffer");
  }
  {
    CodeWriter::Block next = out_->block("if (" + chunk + " + " + p + " < " + full + ") {");
    prefetch_ = std::move(ring);
    prefetch_->buffer = buffer + " ^ 1";
    copies(chunk + " + " + p);
    ring = std::move(*prefetch_);
    prefetch_.reset();
  }
  out_->line("adjoint::commit_async();");
  if (!block_shared) out_->line("adjoint::wait_async<1>();  // this chunk's copies have landed");
  for (const auto& [id, slot] : ring.rings)
    spans_[id] = Span{slot.name + "[" + buffer + "][" + u + "]" +
                          (slot.block_shared ? "" : "[threadIdx.x]"),
                      slot.index};
  emit_scoped_loop(header, var, name, chunk, u, iteration);
  out_->line(buffer + " ^= 1;");
  loop.reset();
  if (runtime_trips) {  // the trips past the last whole chunk, their spans loaded directly
    spans_ = plain_spans;
    plain_trips(full);
  }
  ++prefetch_rings_;
  prefetch_notes_.push_back(
      p + " iterations of " + name + " per chunk: the spans that do not move with " +
      tile_name_ + " are copied to shared memory (cp.async) a chunk ahead of their multiply-adds" +
      (block_shared ? "; those that do but are the same for the whole block too, once per "
                      "block, read by all after a __syncthreads"
                    : ""));
}

bool KernelEmitter::block_uniform_load(const Expr& load) const {
  if (!options_.tile_uniform_ring || !span_reduction_ || block_uniform_vars_.empty()) return false;
  auto uniform_expr = [&](const Expr& e) {
    bool uniform = true;
    for_each_node(e, [&](const Expr& n) {
      if (auto* v = n.as<ir::VarNode>()) uniform = uniform && block_uniform_vars_.count(v) > 0;
    });
    return uniform;
  };
  std::unordered_set<const ir::VarNode*> loop_vars;
  for (const ir::Axis& axis : span_reduction_->axes) {
    if (!uniform_expr(axis.start) || !uniform_expr(axis.extent)) return false;
    loop_vars.insert(axis.var.get());
  }
  bool uniform = true;
  for_each_node(load, [&](const Expr& n) {
    auto* v = n.as<ir::VarNode>();
    if (!v) return;
    uniform = uniform && (v == tile_->var || block_uniform_vars_.count(v) > 0 || loop_vars.count(v) > 0);
  });
  return uniform;
}

std::vector<KernelEmitter::EarlyCopy> KernelEmitter::emit_early_copies(
    const ir::Stage& stage, const ir::VarNode* x) {
  CodeWriter declarations(out_->indent()), copies(out_->indent());
  CodeWriter* saved = out_;
  out_ = &copies;
  const std::unordered_map<int, Span> saved_spans = spans_;
  prefetch_ = Prefetch{tile_->index, tile_->points, &declarations, 0, "", {}, true, 0};
  for_each_tile_point(tile_->var, tile_name_,
                      [&] { emit_tile_spans(stage.value, {{x, x_lane()}}, true); });
  Prefetch copied = std::move(*prefetch_);
  prefetch_.reset();
  spans_ = saved_spans;
  out_ = saved;
  std::vector<EarlyCopy> early;
  const int64_t block_bytes = copied.bytes * tile_->points * launch_.block[0];
  if (copied.spans == 0 || block_bytes > kEarlyCopyBytes) return early;
  out_->line("// the spans read per point of " + tile_name_ +
             " after the reductions, copied to shared memory (cp.async) before them");
  out_->append(declarations.text());
  out_->append(copies.text());
  out_->line("adjoint::commit_async();");
  std::vector<std::pair<size_t, int>> order;  // the rings in the order they were made
  for (const auto& [id, ring] : copied.rings) order.emplace_back(ring.order, id);
  std::sort(order.begin(), order.end());
  for (const auto& [made, id] : order) {
    const Prefetch::Ring& ring = copied.rings.at(id);
    // Row [r][threadIdx.x] starts at a multiple of its count x element bytes from the array's
    // 16-byte aligned base.
    early.push_back(EarlyCopy{id,
                              Span{ring.name + "[" + tile_->index + "][threadIdx.x]", ring.index},
                              ring.type, ring.count,
                              access_bytes(ring.count, ring.count, ring.element_bytes)});
  }
  prefetch_notes_.push_back("the spans read per point of " + tile_name_ +
                            " after the reductions (" + std::to_string(block_bytes / 1024) +
                            " KB a block) are copied to shared memory (cp.async) before them");
  return early;
}

void KernelEmitter::emit_early_wide_reads(const std::vector<EarlyCopy>& early) {
  for (const EarlyCopy& copy : early) {
    const std::string shared = copy.span.name.substr(0, copy.span.name.find('['));
    const std::string name = names_.fresh(shared + "_span");
    out_->line(copy.type + " " + name + "[" + std::to_string(copy.count) + "];");
    out_->line("adjoint::load_elements_aligned<" + std::to_string(copy.bytes) + ">(" + name +
               ", &" + copy.span.name + "[0]);");
    uses_memory_helpers_ = true;
    spans_[copy.id] = Span{name, copy.span.index};
  }
}

void KernelEmitter::emit_tile_spans(const Expr& e,
                                    const std::unordered_map<const ir::VarNode*, Lane>& lanes,
                                    bool moving) {
  spans_moving_with_tile_ = moving;
  if (moving) {
    emit_spans(e, lanes);
  } else {  // before the tile loop: the tile axis is a lane too (tile spans, indexed by r)
    std::unordered_map<const ir::VarNode*, Lane> with_tile = lanes;
    // A partial last tile's span would reach padded - 1: spans past the tensor's extent are
    // refused (emit_spans), and their loads read per point at the clamped index. A generic
    // tile (runtime extent) has no tile spans: every tile may be the partial one.
    if (tile_->runtime_extent.empty())
      with_tile[tile_->var] = Lane{tile_->base, tile_->index, tile_->points, tile_->points, 0,
                                   tile_->padded - 1};
    emit_spans(e, with_tile);
  }
  spans_moving_with_tile_.reset();
}

namespace {

/// What a stride of a dynamic tensor is always a multiple of: the product of its constant factors
/// (a size may take any value, so it contributes 1). A static stride is its own value.
int64_t stride_multiple(const ir::Tensor& t, size_t d) {
  if (!t->is_dynamic()) return t->strides[d];
  std::function<int64_t(const Expr&)> factor = [&](const Expr& e) -> int64_t {
    if (auto* c = e.as<ir::IntConstNode>()) return c->value;
    if (auto* b = e.as<ir::BinaryNode>(); b && b->op == ir::BinaryOp::kMul)
      return factor(b->a) * factor(b->b);
    return 1;
  };
  return factor(t->dynamic_strides[d]);
}

}  // namespace

int64_t KernelEmitter::offset_alignment(const ir::Tensor& t, const std::vector<Expr>& indices,
                                        size_t lane_dim, int64_t lane_alignment) {
  int64_t alignment = lane_alignment;  // the lane dimension has stride 1
  for (size_t d = 0; d < indices.size(); ++d) {
    if (d == lane_dim || t->shape[d] == 1 || t->strides[d] == 0) continue;
    // A dynamic tensor's `strides` hold the values at the sizes' upper bounds: its alignment is
    // that of the stride's constant factors only.
    const int64_t stride = stride_multiple(t, d);
    auto* constant = indices[d].as<ir::IntConstNode>();
    alignment = std::gcd(alignment, constant ? constant->value * stride : stride);
  }
  return alignment;
}

/// Loads of `e` (outside reductions) whose indices vary over the group only along one
/// contiguous dimension, as a lane variable plus a constant, and that are in bounds for the
/// whole lane: each becomes one span, loaded here with the widest aligned accesses.
void KernelEmitter::emit_spans(const Expr& e,
                               const std::unordered_map<const ir::VarNode*, Lane>& lanes) {
  std::unordered_set<const ir::ExprNode*> seen;
  // EmitOptions::spans_of_evaluated_loads: a load that `e` evaluates whenever it is evaluated
  // has its other indices in bounds by the IR's rules, whatever the interval bounds prove.
  std::unordered_set<const ir::LoadNode*> evaluated;
  if (options_.spans_of_evaluated_loads) evaluated = unconditional_loads(e);
  std::function<void(const Expr&)> walk = [&](const Expr& node) {
    if (!seen.insert(node.get()).second || node.kind() == ir::ExprKind::kReduce) return;
    ir::for_each_child(node, walk);
    auto* load = node.as<ir::LoadNode>();
    if (!load || spans_.count(ids_.id(node))) return;
    if (spans_skip_var_ && depends_on(node, spans_skip_var_)) return;
    if (tile_ && spans_moving_with_tile_ && depends_on(node, tile_->var) &&
        !*spans_moving_with_tile_ && !lanes.count(tile_->var))
      return;
    if (tile_ && spans_moving_with_tile_ && *spans_moving_with_tile_ &&
        !depends_on(node, tile_->var))
      return;
    // A load moving with the tile axis is loaded per iteration, unless the whole block reads
    // the same span: then it goes through a ring of the block (block_uniform_load).
    const bool moves = prefetch_ && !prefetch_->early && tile_ && depends_on(node, tile_->var);
    const bool block_shared = moves && block_uniform_load(node);
    if (prefetch_ && !prefetch_->early && prefetch_->block_pass != block_shared)
      return;  // copied by the other pass
    if (moves && !block_shared) return;  // loaded per iteration
    const ir::Tensor& t = load->tensor;
    int lane_dim = -1;
    for (size_t d = 0; d < load->indices.size(); ++d) {
      bool varies = false;
      for (const auto& [var, lane] : lanes) varies = varies || depends_on(load->indices[d], var);
      if (!varies) continue;
      if (lane_dim >= 0) return;  // varies along two dimensions
      lane_dim = static_cast<int>(d);
    }
    if (lane_dim < 0 || t->strides[lane_dim] != 1 || t->shape[lane_dim] == 1) return;
    std::vector<const ir::VarNode*> lane_vars;
    for (const auto& [var, lane] : lanes) lane_vars.push_back(var);
    std::optional<LaneIndex> index = lane_index(load->indices[lane_dim], lane_vars);
    if (!index) return;
    const Lane& lane = lanes.at(index->var);
    // Every element of every span is in bounds (the span reads points no element may need).
    ir::Interval rest = index->rest.defined() ? bounds_.of(index->rest) : ir::Interval::point(0);
    if (index->rest.defined() && !speculatable(index->rest)) return;
    if (!rest.is_bounded() || lane.lowest + index->offset + rest.min < 0 ||
        lane.highest + index->offset + rest.max >= t->shape[lane_dim])
      return;
    for (size_t d = 0; d < load->indices.size(); ++d) {
      if (static_cast<int>(d) == lane_dim) continue;
      const Expr& i = load->indices[d];
      if (!speculatable(i)) return;
      if (!evaluated.count(load) && !bounds_.of(i).within(0, t->shape[d] - 1)) return;
    }
    std::vector<std::string> first;
    for (size_t d = 0; d < load->indices.size(); ++d) {
      if (static_cast<int>(d) != lane_dim) {
        first.push_back(element_index(t, d, load->indices[d]));
      } else {
        std::string rest_text = index->rest.defined() ? as_index(index->rest) + " + " : "";
        first.push_back(rest_text + plus(lane.base, index->offset));
        referenced_.insert(lane.base);
      }
    }
    const int64_t lane_alignment =
        std::gcd(std::gcd(lane.alignment, index->offset), index->rest_multiple);
    const int64_t alignment =
        offset_alignment(t, load->indices, static_cast<size_t>(lane_dim), lane_alignment);
    const int bytes = access_bytes(alignment, lane.count, ir::dtype_bytes(t->dtype));
    if (prefetch_ && bytes < 4) return;  // cp.async moves 4, 8 or 16 bytes: loaded per iteration
    if (block_shared) {
      // One ring of the block: piece q (bytes wide) of iteration u's span is copied by thread
      // q * depth + u; all read it after the chunk's __syncthreads.
      const int64_t per = bytes / ir::dtype_bytes(t->dtype), pieces = lane.count / per;
      if (pieces * prefetch_->depth > launch_.block[0]) return;  // too few threads: per iteration
      auto [slot, fresh] = prefetch_->rings.try_emplace(ids_.id(node));
      if (fresh) {
        slot->second.name = names_.fresh(t->name + "_block_ring");
        slot->second.index = lane.index;
        slot->second.block_shared = true;
        prefetch_->declarations->line(
            "alignas(16) __shared__ " + std::string(cuda_storage_type(t->dtype)) + " " +
            slot->second.name + "[2][" + std::to_string(prefetch_->depth) + "][" +
            std::to_string(lane.count) + "];");
      }
      const std::string& piece = prefetch_->piece;
      std::vector<std::string> at_piece = first;
      at_piece[lane_dim] += " + " + piece + " * " + std::to_string(per);
      out_->line("if (" + piece + " < " + std::to_string(pieces) +
                 ") adjoint::copy_elements_async<" + std::to_string(bytes) + ", " +
                 std::to_string(per) + ">(&" + slot->second.name + "[" + prefetch_->buffer +
                 "][" + prefetch_->index + "][" + piece + " * " + std::to_string(per) + "], &" +
                 element(t, at_piece) + ");");
      span_alignment_claims_->emplace_back(params_.at(t.get()), bytes);
      uses_memory_helpers_ = true;
      ++prefetch_->spans;
      ++prefetch_->block_copies;
      return;
    }
    if (prefetch_) {  // a cp.async into this load's ring of shared memory
      auto [slot, fresh] = prefetch_->rings.try_emplace(ids_.id(node));
      const std::string dims =
          prefetch_->early ? "[" + std::to_string(prefetch_->depth) + "]"
                           : "[2][" + std::to_string(prefetch_->depth) + "]";
      const std::string at = prefetch_->early
                                 ? "[" + prefetch_->index + "]"
                                 : "[" + prefetch_->buffer + "][" + prefetch_->index + "]";
      if (fresh) {
        slot->second.name = names_.fresh(t->name + (prefetch_->early ? "_early" : "_ring"));
        slot->second.index = lane.index;
        slot->second.type = cuda_storage_type(t->dtype);
        slot->second.count = lane.count;
        slot->second.element_bytes = ir::dtype_bytes(t->dtype);
        slot->second.order = prefetch_->rings.size() - 1;
        prefetch_->declarations->line(
            "alignas(16) __shared__ " + std::string(cuda_storage_type(t->dtype)) + " " +
            slot->second.name + dims + "[" + std::to_string(launch_.block[0]) + "][" +
            std::to_string(lane.count) + "];");
        prefetch_->bytes += lane.count * ir::dtype_bytes(t->dtype);
      }
      out_->line("adjoint::copy_elements_async<" + std::to_string(bytes) + ", " +
                 std::to_string(lane.count) + ">(&" + slot->second.name + at +
                 "[threadIdx.x][0], &" + element(t, first) + ");");
      span_alignment_claims_->emplace_back(params_.at(t.get()), bytes);
      uses_memory_helpers_ = true;
      ++prefetch_->spans;
      return;
    }
    std::string name = names_.fresh(t->name + "_span");
    const std::string target = name;
    out_->line(std::string(cuda_storage_type(t->dtype)) + " " + name + "[" +
               std::to_string(lane.count) + "];");
    if (aligned_twin_) {  // the kernel checks every base once (emit: the aligned copy)
      out_->line("adjoint::" + aligned_helper("load_elements", read_by_many_points(*load)) + "<" +
                 std::to_string(bytes) + ">(" + target + ", &" + element(t, first) + ");");
      span_alignment_claims_->emplace_back(params_.at(t.get()), bytes);
    } else if (span_alignment_claims_) {  // the caller checks the base once (block staging)
      out_->line("adjoint::load_elements_aligned<" + std::to_string(bytes) + ">(" + name + ", &" +
                 element(t, first) + ");");
      span_alignment_claims_->emplace_back(params_.at(t.get()), bytes);
    } else {
      out_->line("adjoint::" + memory_helper("load_elements", read_by_many_points(*load)) + "<" +
                 std::to_string(bytes) + ">(" + name + ", &" + element(t, first) + ");");
    }
    uses_memory_helpers_ = true;
    spans_[ids_.id(node)] = Span{target, lane.index};
  };
  walk(e);
}

bool KernelEmitter::read_by_many_points(const ir::LoadNode& load) const {
  for (const ir::VarNode* var : varying_axes_) {
    bool named = false;
    for (const Expr& index : load.indices) named = named || depends_on(index, var);
    if (span_reduction_) {
      for (const ir::Axis& axis : span_reduction_->axes)
        named = named || depends_on(axis.start, var) || depends_on(axis.extent, var);
    }
    if (!named) return true;
  }
  return false;
}

void KernelEmitter::emit_vector_stage(const ir::Stage& stage,
                                      const std::vector<std::string>& axis_names) {
  begin_stage(stage, axis_names);
  const ir::VarNode* x = stage.domain[vector_->axis].var.get();
  const std::string& x_name = axis_names[vector_->axis];
  var_names_.erase(x);  // each element loop names it
  if (tile_) {  // and each tile loop the tile axis
    tile_->var = stage.domain[tile_->axis].var.get();
    tile_name_ = axis_names[tile_->axis];
    var_names_.erase(tile_->var);
  }
  const ir::Tensor& target = stage.target;
  if (stage.kind != ir::StageKind::kCompute) {  // explicit grids only: one point at a time
    if (tile_) {
      throw Error("emit_cuda: a thread tile on a scatter stage ('" + kernel_.name + "')",
                  ErrorCode::kInternal);
    }
    for_each_element(x, x_name, [&] { emit_stage_point(stage, axis_names); });
    scopes_.clear();
    return;
  }
  if (point_fallback_ && tile_) {
    emit_points_one_by_one(stage, axis_names, x, x_name);
    scopes_.clear();
    return;
  }
  const std::string width = std::to_string(vector_->width);
  std::vector<std::string> group_point = axis_names;
  group_point[vector_->axis] = vector_->base;
  std::vector<std::string> comment_point = axis_names;
  comment_point[vector_->axis] = vector_->base + " + " + vector_->element;
  if (tile_) comment_point[tile_->axis] = tile_->base + " + " + tile_->index;
  out_->line("// compute " + target->name + "[" + join(comment_point, ", ") + "], " +
             vector_->element + " < " + width +
             (tile_ ? ", " + tile_->index + " < " + std::to_string(tile_->points) : ""));
  std::vector<EarlyCopy> early;
  const std::vector<const ir::ReduceNode*> reductions = unconditional_reductions(stage.value);
  if (aligned_twin_ && tile_ && options_.tile_early_copies && !reductions.empty())
    early = emit_early_copies(stage, x);
  if (options_.progressive_group_sums && !tile_ && reductions.size() >= 3)
    emit_progressive_group_sum(stage.value, reductions, x, x_name);
  for (const ir::ReduceNode* reduce : reductions) {
    if (group_reductions_.count(reduce)) continue;  // written by the progressive sum
    std::optional<GroupWindows> windows;
    if (plan_group_reduction(*reduce, x, windows))
      group_reductions_[reduce] = emit_group_reduction(*reduce, x, x_name, windows);
  }
  if (!early.empty()) {
    out_->line("adjoint::wait_async<0>();  // the early copies have landed");
    for (const EarlyCopy& copy : early) spans_[copy.id] = copy.span;
  }
  if (tile_) emit_tile_spans(stage.value, {{x, x_lane()}}, false);
  for_each_tile_point(tile_ ? tile_->var : nullptr, tile_name_, [&] {
    if (options_.tile_early_wide_reads) emit_early_wide_reads(early);
    if (tile_) emit_tile_spans(stage.value, {{x, x_lane()}}, true);
    if (tile_ && tile_->partial()) {  // the partial last tile stores its points below extent
      referenced_.insert(tile_->base);
      emit_guarded(tile_->base + " + " + tile_->index + " < " + tile_->extent_text(),
                   [&] { emit_group_values(stage, axis_names, group_point, x, x_name); });
    } else {
      emit_group_values(stage, axis_names, group_point, x, x_name);
    }
  });
  group_reductions_.clear();
  spans_.clear();
  scopes_.clear();
}

std::optional<std::string> KernelEmitter::emit_progressive_group_sum(
    const Expr& e, const std::vector<const ir::ReduceNode*>& reductions, const ir::VarNode* x,
    const std::string& x_name) {
  if (auto* reduce = e.as<ir::ReduceNode>()) {
    if (std::find(reductions.begin(), reductions.end(), reduce) == reductions.end())
      return std::nullopt;
    if (auto done = group_reductions_.find(reduce); done != group_reductions_.end())
      return done->second;
    std::optional<GroupWindows> windows;
    if (is_half_precision(reduce->dtype) || !plan_group_reduction(*reduce, x, windows))
      return std::nullopt;
    return group_reductions_[reduce] = emit_group_reduction(*reduce, x, x_name, windows);
  }
  if (auto* cast = e.as<ir::CastNode>()) {  // the stored value's conversion (bf16 of the sum)
    emit_progressive_group_sum(cast->value, reductions, x, x_name);
    return std::nullopt;
  }
  auto* add = e.as<ir::BinaryNode>();
  if (!add || add->op != ir::BinaryOp::kAdd || !ir::is_float(add->dtype) ||
      is_half_precision(add->dtype) || add->a.dtype() != add->dtype ||
      add->b.dtype() != add->dtype) {
    return std::nullopt;
  }
  // Left before right, as the expression evaluates; both must be whole arrays to add now.
  std::optional<std::string> a = emit_progressive_group_sum(add->a, reductions, x, x_name);
  std::optional<std::string> b = emit_progressive_group_sum(add->b, reductions, x, x_name);
  if (!a || !b) return std::nullopt;
  const std::string width = std::to_string(vector_->width);
  const std::string& element = vector_->element;
  const std::string sum = names_.fresh("partial");
  out_->line(std::string(cuda_value_type(add->dtype)) + " " + sum + "[" + width + "];");
  out_->line("#pragma unroll");
  out_->line("for (int " + element + " = 0; " + element + " < " + width + "; ++" + element +
             ") " + sum + "[" + element + "] = " + *a + "[" + element + "] + " + *b + "[" +
             element + "];");
  return group_reductions_[e.get()] = sum;
}

void KernelEmitter::emit_points_one_by_one(const ir::Stage& stage,
                                           const std::vector<std::string>& axis_names,
                                           const ir::VarNode* x, const std::string& x_name) {
  const std::string& r = tile_->index;
  const std::string& e = vector_->element;
  out_->line("// each of the " + std::to_string(tile_->points * vector_->width) +
             " points alone, in rolled loops (element accesses, one accumulator)");
  const std::string rolled = "#pragma unroll 1";
  emit_scoped_loop(
      "for (int " + r + " = 0; " + r + " < " + std::to_string(tile_->points) + "; ++" + r + ") {",
      tile_->var, tile_name_, tile_->base, r,
      [&] {
        auto point = [&] {
          emit_scoped_loop("for (int " + e + " = 0; " + e + " < " +
                               std::to_string(vector_->width) + "; ++" + e + ") {",
                           x, x_name, vector_->base, e,
                           [&] { emit_stage_point(stage, axis_names); }, -1, rolled);
        };
        if (tile_->partial()) {  // the partial last tile: its points past the extent are skipped
          referenced_.insert(tile_->base);
          emit_guarded(tile_->base + " + " + r + " < " + tile_->extent_text(), point);
        } else {
          point();
        }
      },
      -1, rolled);
}

/// The values of one vector group (one tile point of a tiled kernel) and their stores.
void KernelEmitter::emit_group_values(const ir::Stage& stage,
                                      const std::vector<std::string>& axis_names,
                                      const std::vector<std::string>& group_point,
                                      const ir::VarNode* x, const std::string& x_name) {
  const ir::Tensor& target = stage.target;
  const std::string width = std::to_string(vector_->width);
  emit_spans(stage.value, {{x, x_lane()}});
  const bool contiguous = target->strides[vector_->axis] == 1;
  std::string values;
  auto accumulated = group_reductions_.find(stage.value.get());
  if (contiguous && accumulated != group_reductions_.end() &&
      stage.value.dtype() == target->dtype && !is_half_precision(target->dtype)) {
    values = accumulated->second;  // the accumulators are the stored values
  } else {
    if (contiguous) {
      values = names_.fresh(target->name + "_values");
      out_->line(std::string(cuda_storage_type(target->dtype)) + " " + values + "[" + width + "];");
    }
    for_each_element(x, x_name, [&] {
      std::string stored =
          contiguous ? values + "[" + vector_->element + "]" : element(target, axis_names);
      const std::string value = strip_parens(stored_value(stage));
      const bool guarded = !lane_.empty() && !contiguous;  // lane 0 stores
      out_->line((guarded ? "if (" + lane_ + " == 0) " : std::string()) + stored + " = " + value +
                 ";");
    });
  }
  if (contiguous && !staged_.empty() && target->name == options_.transposed_store->transpose.source) {
    // Transposed store: the group waits in shared memory for the block's epilogue.
    const int64_t columns = options_.transposed_store->transpose.columns;
    const std::string at = names_.fresh("staged_at");
    out_->line("const int " + at + " = (int)threadIdx.x * " + width + ";");
    out_->line("#pragma unroll");
    out_->line("for (int " + vector_->element + " = 0; " + vector_->element + " < " + width +
               "; ++" + vector_->element + ") " + staged_ + "[(" + at + " + " + vector_->element +
               ") / " + std::to_string(columns) + " * " + std::to_string(columns + 1) + " + (" +
               at + " + " + vector_->element + ") % " + std::to_string(columns) + "] = " +
               values + "[" + vector_->element + "];");
  } else if (contiguous && options_.transposed_store && options_.transposed_store->direct &&
             target->name == options_.transposed_store->transpose.source) {
    emit_direct_transposed_store(stage, group_point, values);
  } else if (contiguous) {
    std::vector<Expr> point;
    for (const ir::Axis& axis : stage.domain) point.push_back(axis.var);
    const int64_t alignment =
        offset_alignment(target, point, static_cast<size_t>(vector_->axis), vector_->width);
    const int bytes = access_bytes(alignment, vector_->width, ir::dtype_bytes(target->dtype));
    std::string helper = memory_helper("store_elements");
    if (aligned_twin_) {  // the kernel checks the base once
      helper = aligned_helper("store_elements");
      span_alignment_claims_->emplace_back(params_.at(target.get()), bytes);
    }
    out_->line((lane_.empty() ? std::string() : "if (" + lane_ + " == 0) ") + "adjoint::" +
               helper + "<" + std::to_string(bytes) + ">(&" + element(target, group_point) +
               ", " + values + ");");
    uses_memory_helpers_ = true;
  }
}

/// Direct transposed store (transposed_store.h): the group is the whole row p of G = [b][p][q]
/// (its C values, q = e), written to target[b][q][p] one element per column. G is dense
/// row-major in the domain's order (choose_transposed_stores proved it), so the row is the
/// group's flat element index over C.
void KernelEmitter::emit_direct_transposed_store(const ir::Stage& stage,
                                                 const std::vector<std::string>& group_point,
                                                 const std::string& values) {
  const TransposedStore& s = *options_.transposed_store;
  const TiledTranspose& t = s.transpose;
  const ir::Tensor& g = stage.target;
  const ir::Tensor target = program_.find_tensor(t.target);
  const int64_t highest = (t.batches - 1) * t.target_batch_stride +
                          (t.columns - 1) * t.target_column_stride +
                          (t.rows - 1) * t.target_row_stride;
  const std::string index =
      index_type_ == "int" && highest <= INT32_MAX && t.batches * t.rows * t.columns <= INT32_MAX
          ? "int"
          : "long long";
  auto literal = [&](int64_t v) {
    return index == "int" ? std::to_string(v) : std::to_string(v) + "LL";
  };
  std::string row;  // the group's flat element index / C: G's index without its last axis
  int64_t stride = 1;
  for (size_t d = g->shape.size(); d-- > 0;) {
    if (d + 1 < g->shape.size() && g->shape[d] != 1) {
      if (is_identifier(group_point[d])) referenced_.insert(group_point[d]);
      const int64_t rows_stride = stride / t.columns;
      std::string term = "(" + index + ")" + group_point[d] +
                         (rows_stride == 1 ? "" : " * " + literal(rows_stride));
      row = row.empty() ? term : term + " + " + row;
    }
    stride *= g->shape[d];
  }
  const std::string cell = names_.fresh("cell");
  out_->line("// Direct transposed store (compiler/transposed_store.h): the group is row " + cell +
             " of " + t.source + ", written as " + t.target + "[b][q][p] = " + t.source +
             "[b][p][q] (b < " + std::to_string(t.batches) + ", p < " + std::to_string(t.rows) +
             ", q < " + std::to_string(t.columns) + "), the copy kernel '" + s.copy_kernel +
             "' fused.");
  out_->line("const " + index + " " + cell + " = " + (row.empty() ? literal(0) : row) + ";");
  const std::string& out = params_.at(target.get());
  const std::string& e = vector_->element;
  out_->line("#pragma unroll");
  out_->line("for (int " + e + " = 0; " + e + " < " + std::to_string(t.columns) + "; ++" + e +
             ") " + out + "[" + cell + " / " + literal(t.rows) + " * " +
             literal(t.target_batch_stride) + " + " + e + " * " +
             literal(t.target_column_stride) + " + " + cell + " % " + literal(t.rows) + " * " +
             literal(t.target_row_stride) + "] = " + values + "[" + e + "];");
}

}  // namespace adjoint::compiler
