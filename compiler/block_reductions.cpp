// block_reductions: the analysis that finds a skinny GEMM in a kernel's IR, the choice of its
// block tile, the pass that marks kernels, and the launch geometry with its coverage proof.
#include "compiler/block_reductions.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "compiler/program_utils.h"
#include "ir/error.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

using ir::Expr;

/// Most shared memory a block kernel stages (the static limit of one block).
constexpr int64_t kMaxSharedBytes = 48 * 1024;

std::optional<int64_t> constant(const Expr& e) {
  if (auto* c = e.as<ir::IntConstNode>()) return c->value;
  return std::nullopt;
}

bool has_load(const Expr& e) {
  bool found = false;
  for_each_node(e, [&](const Expr& node) { found = found || node.kind() == ir::ExprKind::kLoad; });
  return found;
}

bool depends_on_any(const Expr& e, const std::vector<const ir::VarNode*>& vars) {
  for (const ir::VarNode* v : vars) {
    if (depends_on(e, v)) return true;
  }
  return false;
}

/// The combination of staged parts is emitted as plain arithmetic: + - * / of the reduction's
/// float type.
bool arithmetic(const ir::BinaryNode& b) {
  return b.op == ir::BinaryOp::kAdd || b.op == ir::BinaryOp::kSub || b.op == ir::BinaryOp::kMul ||
         b.op == ir::BinaryOp::kDiv;
}

/// Splits `body` into maximal token parts (independent of `output`) and weight parts
/// (independent of `tokens`); the rest must be arithmetic of the reduction's dtype over them.
/// Returns why not, or empty.
std::string partition(const Expr& body, const ir::VarNode* output,
                      const std::vector<const ir::VarNode*>& tokens, ir::DType dtype,
                      std::vector<Expr>& token_parts, std::vector<Expr>& weight_parts) {
  std::string why;
  std::function<void(const Expr&)> walk = [&](const Expr& e) {
    if (!why.empty()) return;
    if (!has_load(e)) {
      if (e.kind() != ir::ExprKind::kFloatConst)
        why = "a value without loads mixes the output and token axes";
      return;
    }
    if (!depends_on(e, output) || !depends_on_any(e, tokens)) {
      if (e.dtype() != ir::DType::kF32 && e.dtype() != ir::DType::kF64) {
        why = "a staged value is " + std::string(ir::dtype_name(e.dtype())) + ", not f32 or f64";
        return;
      }
      (!depends_on(e, output) ? token_parts : weight_parts).push_back(e);
      return;
    }
    auto* b = e.as<ir::BinaryNode>();
    if (!b || !arithmetic(*b) || b->dtype != dtype) {
      why = "a load depends on both the output axis and the token axes";
      return;
    }
    walk(b->a);
    walk(b->b);
  };
  walk(body);
  if (why.empty() && (token_parts.empty() || weight_parts.empty()))
    why = "the body has no token part or no weight part";
  return why;
}

/// The innermost axis of the first target's layout (smallest stride, later axes on ties).
int innermost_axis(const ir::Kernel& kernel) {
  const std::vector<int64_t>& strides = kernel.stages.front().target->strides;
  int best = 0;
  for (size_t j = 1; j < strides.size(); ++j) {
    if (strides[j] <= strides[best]) best = static_cast<int>(j);
  }
  return best;
}

}  // namespace

BlockReductionOptions any_block_shape() {
  BlockReductionOptions o;
  o.min_trips = 1;
  o.max_outputs = INT64_MAX;
  o.min_batched_tokens = 0;
  return o;
}

BlockReductionOptions::Mode parse_block_reduction_mode(const std::string& text,
                                                       const std::string& what) {
  if (text == "auto") return BlockReductionOptions::Mode::kAuto;
  if (text == "off") return BlockReductionOptions::Mode::kOff;
  throw Error(what + ": expected auto or off, got '" + text + "'", ErrorCode::kInvalidArgument);
}

BlockReductionShape analyze_block_reduction(const ir::Kernel& kernel,
                                            const BlockReductionOptions& options) {
  BlockReductionShape shape;
  auto refuse = [&](const std::string& why) {
    shape.why_not = why;
    return shape;
  };
  if (kernel.grid.is_set) return refuse("its grid is explicit");
  if (kernel.stages.size() != 1) return refuse("it has " + std::to_string(kernel.stages.size()) + " stages");
  const ir::Stage& stage = kernel.stages.front();
  if (stage.kind != ir::StageKind::kCompute) return refuse("its stage scatters");
  if (stage.domain.size() < 2) return refuse("its domain has fewer than two axes");
  const std::vector<const ir::ReduceNode*> reductions = outermost_reductions(stage.value);
  if (reductions.size() != 1) return refuse("it has " + std::to_string(reductions.size()) + " reductions");
  const ir::ReduceNode& r = *reductions.front();
  if (!ir::is_sum(r.op)) return refuse("its reduction is not a sum");
  if (r.dtype != ir::DType::kF32 && r.dtype != ir::DType::kF64)
    return refuse("it accumulates in " + std::string(ir::dtype_name(r.dtype)));
  shape.trips = 1;
  for (const ir::Axis& a : r.axes) {
    auto start = constant(a.start), extent = constant(a.extent);
    if (!start || *start != 0 || !extent || *extent < 1)
      return refuse("a reduced axis has no constant start 0 and constant extent");
    shape.trips *= *extent;
  }
  if (shape.trips < options.min_trips)
    return refuse("fewer than " + std::to_string(options.min_trips) + " iterations");
  bool nested = false;
  for_each_node(r.body, [&](const Expr& n) { nested = nested || n.kind() == ir::ExprKind::kReduce; });
  if (nested) return refuse("its body reduces again");
  // The staging walks the reduction's innermost axis across consecutive threads: some load
  // must read consecutive elements along it, or every staged element is a sector of its own.
  const ir::VarNode* innermost = r.axes.back().var.get();
  bool contiguous = false;
  for_each_node(r.body, [&](const Expr& n) {
    auto* load = n.as<ir::LoadNode>();
    if (load && !load->indices.empty() && load->tensor->strides.back() == 1 &&
        depends_on(load->indices.back(), innermost))
      contiguous = true;
  });
  if (!contiguous)
    return refuse(r.axes.back().var.name_hint() +
                  " indexes no stride-1 dimension: the staging would read strided elements");
  const std::vector<int64_t> extents = domain_extents(kernel);
  // An empty domain (an empty batch) has no tile to stage: the serial loop launches nothing.
  for (int64_t e : extents) {
    if (e == 0) return refuse("the domain is empty");
  }
  // Output axis candidates: the target's innermost axis first, then the others in order.
  std::vector<int> candidates{innermost_axis(kernel)};
  for (int j = 0; j < static_cast<int>(extents.size()); ++j) {
    if (j != candidates.front()) candidates.push_back(j);
  }
  if (kernel.grid.block_output_axis >= 0) candidates = {kernel.grid.block_output_axis};
  std::string last_why;
  for (int k : candidates) {
    if (extents[k] > options.max_outputs) {
      last_why = "its output axis would have more than " + std::to_string(options.max_outputs) +
                 " points";
      continue;
    }
    const ir::VarNode* output = stage.domain[k].var.get();
    // Block axes: the other axes that loads depending on k also depend on.
    std::vector<int> block_axes, token_axes;
    for (int j = 0; j < static_cast<int>(extents.size()); ++j) {
      if (j == k) continue;
      bool with_output = false;
      for_each_node(r.body, [&](const Expr& n) {
        auto* load = n.as<ir::LoadNode>();
        if (load && depends_on(n, output) && depends_on(n, stage.domain[j].var.get()))
          with_output = true;
      });
      (with_output ? block_axes : token_axes).push_back(j);
    }
    if (token_axes.empty() || block_axes.size() > 2) {
      last_why = token_axes.empty() ? "no token axis is left" : "more than two block axes";
      continue;
    }
    std::vector<const ir::VarNode*> token_vars;
    for (int j : token_axes) token_vars.push_back(stage.domain[j].var.get());
    std::vector<Expr> token_parts, weight_parts;
    std::string why = partition(r.body, output, token_vars, r.dtype, token_parts, weight_parts);
    if (!why.empty()) {
      last_why = why;
      continue;
    }
    int64_t tokens = 1;
    for (int j : token_axes) tokens *= extents[j];
    if (!block_axes.empty() && tokens < options.min_batched_tokens) {
      last_why = "only " + std::to_string(tokens) + " token(s) share the weights of a block";
      continue;
    }
    bool fits = true;
    for (int j : block_axes) fits = fits && extents[j] <= 65535;
    if (!fits) {
      last_why = "a block axis has more than 65535 points";
      continue;
    }
    shape.reduce = &r;
    shape.output_axis = k;
    shape.token_axes = token_axes;
    shape.block_axes = block_axes;
    shape.token_parts = token_parts;
    shape.weight_parts = weight_parts;
    shape.outputs = extents[k];
    shape.tokens = 1;
    for (int j : token_axes) shape.tokens *= extents[j];
    return shape;
  }
  return refuse(last_why);
}

BlockSharedLayout block_shared_layout(const ir::GridConfig& grid, int64_t outputs) {
  const int64_t C = grid.block_chunk;
  if (grid.block_shared_vectors == 4) return BlockSharedLayout{C + 4, 1, outputs};
  return BlockSharedLayout{C + 1, C + 1, 1};
}

int64_t block_reduction_shared_bytes(const ir::Kernel& kernel, const BlockReductionShape& shape) {
  const ir::GridConfig& g = kernel.grid;
  const BlockSharedLayout layout = block_shared_layout(g, shape.outputs);
  // Weights: K rows of C + 1, or C rows of K (transposed).
  const int64_t weight_elements =
      g.block_shared_vectors == 4 ? g.block_chunk * shape.outputs : shape.outputs * (g.block_chunk + 1);
  int64_t bytes = 0;
  for (const Expr& e : shape.token_parts)
    bytes += g.block_tokens * layout.token_stride * static_cast<int64_t>(ir::dtype_bytes(e.dtype()));
  for (const Expr& e : shape.weight_parts)
    bytes += weight_elements * static_cast<int64_t>(ir::dtype_bytes(e.dtype()));
  return bytes;
}

std::string choose_block_tile(ir::Kernel& kernel, const BlockReductionShape& shape,
                              std::string& reason, int max_stage_width, bool shared_vectors,
                              int output_points, int max_token_points, int max_chunk) {
  const int64_t K = shape.outputs;
  int64_t mk = 1;
  for (int64_t candidate : {8, 6, 4, 3, 2}) {
    if (K % candidate == 0) {
      mk = candidate;
      break;
    }
  }
  // A forced Mk (ADJOINT_TUNE_BLOCK_OUTPUT_POINTS) where it divides K within 1024 threads.
  if (output_points > 0 && K % output_points == 0 && (K / output_points <= 4 ? 64 : 32) * (K / output_points) <= 1024)
    mk = output_points;
  const int64_t groups = K / mk;
  const int64_t lanes = groups <= 4 ? 64 : 32;  // TL: token lanes per output group
  if (lanes * groups > 1024) return "K / Mk = " + std::to_string(groups) + " output groups need more than 1024 threads";
  // Few tokens: one per lane (a tile of TL), else Mt = 4 (unless capped at 1).
  const int64_t mt = shape.tokens >= 4 * lanes && max_token_points >= 4 ? 4 : 1;
  ir::GridConfig& g = kernel.grid;
  g.block_output_axis = shape.output_axis;
  g.block_output_points = static_cast<int>(mk);
  g.block_token_points = static_cast<int>(mt);
  g.block_tokens = static_cast<int>(mt * lanes);
  g.block_chunk = 0;
  for (int64_t chunk : {64, 32, 16, 8}) {
    if (chunk > max_chunk) continue;
    g.block_chunk = static_cast<int>(chunk);
    if (shape.trips % chunk == 0 && block_reduction_shared_bytes(kernel, shape) <= kMaxSharedBytes) break;
    g.block_chunk = 0;
  }
  if (g.block_chunk == 0) {
    g.block_tokens = 0;
    return "no chunk of " + std::string(max_chunk >= 64 ? "64, " : "") + "32, 16 or 8 divides " + std::to_string(shape.trips) +
           " iterations within " + std::to_string(kMaxSharedBytes) + " bytes of shared memory";
  }
  // Staging width: W consecutive iterations of the innermost reduced axis per staging thread,
  // so that its loads of a contiguous dimension become one vector access (W | C and W | that
  // axis' extent keep the W iterations on one row of the other reduced axes).
  const int64_t innermost = shape.reduce->axes.back().extent.as<ir::IntConstNode>()->value;
  g.block_stage_width = 1;
  for (int w = 8; w > 1; w /= 2) {
    if (w <= max_stage_width && g.block_chunk % w == 0 && innermost % w == 0) {
      g.block_stage_width = w;
      break;
    }
  }
  // 16-byte shared reads: f32 parts, whole float4s along c (4 | C), along a weight row
  // (4 | K) and within a thread's outputs (4 | Mk), and the wider rows still fit.
  g.block_shared_vectors = 0;
  if (shared_vectors && g.block_chunk % 4 == 0 && K % 4 == 0 && mk % 4 == 0) {
    bool f32 = true;
    for (const Expr& e : shape.token_parts) f32 = f32 && e.dtype() == ir::DType::kF32;
    for (const Expr& e : shape.weight_parts) f32 = f32 && e.dtype() == ir::DType::kF32;
    g.block_shared_vectors = f32 ? 4 : 0;
    if (block_reduction_shared_bytes(kernel, shape) > kMaxSharedBytes) g.block_shared_vectors = 0;
  }
  reason = "tiles of " + std::to_string(g.block_tokens) + " tokens x " + std::to_string(K) +
           " outputs, " + std::to_string(lanes * groups) + " threads of " + std::to_string(mt) +
           " x " + std::to_string(mk) + " accumulators, chunks of " + std::to_string(g.block_chunk) +
           " iterations staged in " + std::to_string(block_reduction_shared_bytes(kernel, shape)) +
           " bytes of shared memory, " + std::to_string(g.block_stage_width) +
           " iteration(s) per staging thread" +
           (g.block_shared_vectors == 4 ? ", 16-byte shared reads (weights stored [c][k])" : "");
  return "";
}

ir::Program choose_block_reductions(const ir::Program& program,
                                    const BlockReductionOptions& options, ScheduleNotes* notes,
                                    std::set<std::string>* few_tokens) {
  ir::Program out = program;
  bool changed = false;
  for (ir::Kernel& kernel : out.kernels) {
    if (kernel.grid.is_set || kernel.stages.empty()) continue;
    if (kernel.grid.reduction_lanes > 1 || kernel.grid.tile_points > 1) continue;  // chosen before
    bool reduces = false;
    for (const ir::Stage& stage : kernel.stages)
      reduces = reduces || !outermost_reductions(stage.value).empty();
    if (!reduces) continue;
    const std::string target = kernel.stages.front().target->name;
    const BlockReductionShape shape = analyze_block_reduction(kernel, options);
    if (!shape.why_not.empty()) continue;  // not a skinny GEMM: the other schedules' business
    if (options.mode == BlockReductionOptions::Mode::kOff) {
      if (notes) add_schedule_note(*notes, kernel.name, target + ": no block reduction (ADJOINT_TUNE_BLOCK_REDUCTION=off)");
      continue;
    }
    int64_t weight_bytes = 0;  // per output and iteration
    for (const Expr& e : shape.weight_parts) weight_bytes += ir::dtype_bytes(e.dtype());
    // In double: huge shapes must not overflow the estimate (they are far above the bound).
    const double streamed_bytes = static_cast<double>(shape.tokens) * shape.outputs *
                                  static_cast<double>(shape.trips) * weight_bytes;
    const bool few = shape.tokens <= options.few_tokens &&
                     streamed_bytes <= static_cast<double>(options.few_tokens_max_bytes);
    const bool narrow = shape.outputs <= options.narrow_outputs &&
                        streamed_bytes <= static_cast<double>(options.streamed_max_bytes);
    if (shape.block_axes.empty() && shape.tokens < options.min_tokens && (few || narrow)) {
      if (few_tokens) few_tokens->insert(kernel.name);
      if (notes)
        add_schedule_note(*notes, kernel.name,
                          target + ": no block reduction (" + std::to_string(shape.tokens) +
                              " token(s), fewer than " + std::to_string(options.min_tokens) +
                              ", would idle most of a tile's 32 token lanes, and their weight "
                              "reads, " + std::to_string(static_cast<int64_t>(streamed_bytes)) +
                              " bytes, are at most " +
                              std::to_string(few ? options.few_tokens_max_bytes
                                                 : options.streamed_max_bytes) +
                              (few ? " (at most " + std::to_string(options.few_tokens) + " tokens)"
                                   : " (at most " + std::to_string(options.narrow_outputs) +
                                         " outputs)") +
                              ": the split reduction streams the weights with every thread instead)");
      continue;
    }
    std::string reason;
    const std::string why = choose_block_tile(kernel, shape, reason, options.max_stage_width,
                                              options.shared_vectors, options.output_points);
    if (!why.empty()) {
      if (notes) add_schedule_note(*notes, kernel.name, target + ": no block reduction (" + why + ")");
      continue;
    }
    changed = true;
    if (notes) {
      const ir::Stage& stage = kernel.stages.front();
      std::string tokens, blocks;
      for (int j : shape.token_axes) tokens += (tokens.empty() ? "" : ", ") + stage.domain[j].var.name_hint();
      for (int j : shape.block_axes) blocks += (blocks.empty() ? "" : ", ") + stage.domain[j].var.name_hint();
      add_schedule_note(
          *notes, kernel.name,
          target + ": block reduction of " + std::to_string(shape.trips) + " iterations: " +
              std::to_string(shape.token_parts.size()) + " token part(s) over (" + tokens +
              ") and " + std::to_string(shape.weight_parts.size()) + " weight part(s) over " +
              stage.domain[shape.output_axis].var.name_hint() +
              (blocks.empty() ? "" : " (block axes " + blocks + ")") +
              ": a block reuses each staged weight chunk for its tile of tokens (" + reason +
              "); each point summed in serial order by one thread");
    }
  }
  return changed ? out : program;
}

void bind_block_reduction_grid(ir::Kernel& kernel) {
  const BlockReductionShape shape = analyze_block_reduction(kernel, any_block_shape());
  if (!shape.why_not.empty() || shape.output_axis != kernel.grid.block_output_axis)
    throw Error("block_reductions: kernel '" + kernel.name + "' was marked but " +
                    (shape.why_not.empty() ? "its output axis moved" : "has no block shape: " + shape.why_not),
                ErrorCode::kInternal);
  ir::GridConfig& g = kernel.grid;
  g.is_set = true;
  g.bindings.assign(kernel.stages.front().domain.size(), ir::AxisBinding::kLinear);
  g.bindings[shape.output_axis] = ir::AxisBinding::kThread;
  for (int j : shape.block_axes) g.bindings[j] = ir::AxisBinding::kBlock;
  g.vector_width = 1;
  g.reduction_lanes = 1;
  g.tile_axis = -1;
  g.tile_points = 1;
  g.block_size = (g.block_tokens / g.block_token_points) *
                 static_cast<int>(shape.outputs / g.block_output_points);
}

LaunchDims block_reduction_launch(const ir::Kernel& kernel) {
  ir::Kernel unset = kernel;
  unset.grid.is_set = false;
  const BlockReductionShape shape = analyze_block_reduction(unset, any_block_shape());
  if (!shape.why_not.empty())
    throw Error("block_reductions: kernel '" + kernel.name + "' has no block shape: " + shape.why_not,
                ErrorCode::kInternal);
  const std::vector<int64_t> extents = domain_extents(kernel);
  const int64_t T = kernel.grid.block_tokens;
  const int64_t tiles = T > 0 ? (shape.tokens + T - 1) / T : 0;
  LaunchDims d;
  d.grid[0] = static_cast<uint32_t>(std::min<int64_t>(std::max<int64_t>(tiles, 1), int64_t{1} << 30));
  for (size_t i = 0; i < shape.block_axes.size(); ++i)
    d.grid[1 + i] = static_cast<uint32_t>(std::min<int64_t>(extents[shape.block_axes[i]], int64_t{1} << 30));
  d.block[0] = static_cast<uint32_t>(kernel.grid.block_size);
  check_block_reduction_coverage(kernel, d);
  return d;
}

void check_block_reduction_coverage(const ir::Kernel& kernel, const LaunchDims& launch) {
  auto fail = [&](const std::string& what) {
    throw Error("block reduction of kernel '" + kernel.name + "' does not cover its domain: " + what,
                ErrorCode::kInternal);
  };
  ir::Kernel unset = kernel;
  unset.grid.is_set = false;
  const BlockReductionShape shape = analyze_block_reduction(unset, any_block_shape());
  if (!shape.why_not.empty()) fail("no block shape (" + shape.why_not + ")");
  const ir::GridConfig& g = kernel.grid;
  const std::vector<int64_t> extents = domain_extents(kernel);
  if (g.block_output_axis != shape.output_axis) fail("the output axis is not the analysis' one");
  const int64_t K = shape.outputs, T = g.block_tokens, mt = g.block_token_points,
                mk = g.block_output_points;
  if (T < 1 || mt < 1 || mk < 1 || T % mt != 0) fail("tile of " + std::to_string(T) + " tokens, " + std::to_string(mt) + " per thread");
  const int64_t lanes = T / mt;
  if (lanes % 32 != 0) fail("token lanes " + std::to_string(lanes) + " are not whole warps");
  if (K % mk != 0) fail(std::to_string(mk) + " outputs per thread do not divide " + std::to_string(K));
  if (g.block_size != lanes * (K / mk) || launch.block[0] != static_cast<uint32_t>(g.block_size) ||
      g.block_size > 1024)
    fail("a block of " + std::to_string(launch.block[0]) + " threads, not TL x K / Mk = " +
         std::to_string(lanes * (K / mk)) + " (at most 1024)");
  if (g.block_chunk < 1 || shape.trips % g.block_chunk != 0)
    fail("a chunk of " + std::to_string(g.block_chunk) + " does not divide " + std::to_string(shape.trips) + " iterations");
  if (block_reduction_shared_bytes(kernel, shape) > kMaxSharedBytes) fail("more than 48 KB of shared memory");
  if (g.block_shared_vectors != 0 &&
      (g.block_shared_vectors != 4 || g.block_chunk % 4 != 0 || K % 4 != 0 || mk % 4 != 0))
    fail("16-byte shared reads need 4 | C, 4 | K and 4 | Mk");
  if (g.block_stage_width < 1 || g.block_chunk % g.block_stage_width != 0 ||
      shape.reduce->axes.back().extent.as<ir::IntConstNode>()->value % g.block_stage_width != 0)
    fail("a staging width of " + std::to_string(g.block_stage_width) +
         " does not divide the chunk and the innermost reduced axis");
  if (launch.grid[0] < 1) fail("no blocks over the token tiles");
  for (size_t i = 0; i < 2; ++i) {
    const uint32_t expected = i < shape.block_axes.size() ? static_cast<uint32_t>(extents[shape.block_axes[i]]) : 1;
    if (launch.grid[1 + i] != expected || expected > 65535)
      fail("grid dimension " + std::to_string(1 + i) + " is " + std::to_string(launch.grid[1 + i]) +
           ", not the block axis' extent " + std::to_string(expected) + " (at most 65535)");
  }
  for (size_t j = 0; j < extents.size(); ++j) {
    const bool output = static_cast<int>(j) == shape.output_axis;
    const bool block = std::count(shape.block_axes.begin(), shape.block_axes.end(), static_cast<int>(j)) > 0;
    const ir::AxisBinding expected = output ? ir::AxisBinding::kThread : block ? ir::AxisBinding::kBlock : ir::AxisBinding::kLinear;
    if (g.bindings.size() != extents.size() || g.bindings[j] != expected)
      fail("axis " + std::to_string(j) + " is not bound as its role says");
  }
}

}  // namespace adjoint::compiler
