// KernelEmitter, row-group kernels (ir::Kernel::row_axes > 0, compiler/row_groups.h): block b
// owns rows [b R, b R + R); each stage is a loop of the block's threads over the R P points of
// those rows (P: the stage's points per row), decoding the row axes from the row and the other
// axes from the point within it, and the stages are separated by __syncthreads() so that a
// stage reads what the earlier ones wrote of its rows. The stages themselves are emitted as in
// any kernel (emit_stage), so each point computes what the separate kernel computed.
// With GridConfig::row_per_thread, thread t of block b owns the row b R + t alone and runs each
// stage's points of it in order (a loop of constant trip count, unrolled when short so that the
// compiler can share what the points of a stage compute alike), with no barrier: a stage reads
// only what this thread wrote of its row before. The temporaries written here that no other
// kernel of the program touches are held by the thread, one row of each in an array (registers
// once the loops are unrolled), as many as fit (row_groups.h choose_row_locals); they never
// reach global memory, and the stages of those that nothing reads are left out.
// Stages that repeat up to their tensors (stage_loops.h) are written once, as a loop over the
// iterations: tensors in global memory through shared tables of their pointers, row-local ones
// through chains of two row arrays.
#include <algorithm>
#include <set>

#include "compiler/kernel_emitter.h"
#include "compiler/program_utils.h"
#include "compiler/cuda_syntax.h"
#include "compiler/row_groups.h"
#include "compiler/stage_loops.h"

namespace adjoint::compiler {
namespace {

/// Elements of one row of `t` (its dimensions after the row axes).
int64_t row_elements(const ir::TensorNode& t, size_t row_axes) {
  int64_t elements = 1;
  for (size_t d = row_axes; d < t.shape.size(); ++d) elements *= t.shape[d];
  return elements;
}

}  // namespace

std::vector<KernelEmitter::PlannedStageLoop> KernelEmitter::plan_stage_loops(
    const RowLocals& locals) {
  std::vector<PlannedStageLoop> planned;
  if (!options_.stage_loops) return planned;
  const std::vector<ir::Stage>& stages = kernel_.stages;
  enum class Held { kGlobal, kLocal, kUnread };
  auto held = [&](const ir::TensorNode* t) {
    return locals.unread.count(t) ? Held::kUnread
                                  : locals.tensors.count(t) ? Held::kLocal : Held::kGlobal;
  };
  for (const StageLoop& loop : find_stage_loops(stages)) {
    PlannedStageLoop plan{loop, {}, {}, {}, {}};
    const size_t families = loop.families.size();
    const std::string what =
        "stages " + std::to_string(loop.first) + " to " + std::to_string(loop.end() - 1) + " (" +
        stages[loop.first].target->name + " to " + stages[loop.end() - 1].target->name + "), " +
        std::to_string(loop.count) + " iterations of " + std::to_string(loop.period) +
        " stage(s)";
    std::string why;
    std::set<const ir::TensorNode*> targets;  // of the first iteration
    for (size_t k = 0; k < loop.period; ++k) targets.insert(stages[loop.first + k].target.get());
    for (const ir::TensorNode* t : loop.invariant) {
      if (targets.count(t) && why.empty()) why = "every iteration writes " + t->name;
    }
    std::vector<Held> how(families, Held::kGlobal);
    for (size_t f = 0; f < families; ++f) {
      how[f] = held(loop.families[f].front());
      plan.written.push_back(targets.count(loop.families[f].front()) > 0);
      for (const ir::TensorNode* t : loop.families[f]) {
        if (held(t) != how[f] && why.empty()) {
          why = "the tensors standing for " + loop.families[f].front()->name +
                " are not all held alike (row-local, unread or in global memory)";
        }
      }
    }
    // Row-local families: a written family W, and a read one F only as W one iteration later.
    std::vector<int> chain_of(families, -1);  // W -> F
    for (size_t f = 0; f < families && why.empty(); ++f) {
      if (how[f] != Held::kLocal) continue;
      if (plan.written[f]) {
        plan.local_written.push_back(f);
        continue;
      }
      bool found = false;
      for (size_t w = 0; w < families && !found; ++w) {
        if (w == f || how[w] != Held::kLocal || !plan.written[w]) continue;
        bool lagging = true;
        for (size_t r = 1; r < loop.count && lagging; ++r)
          lagging = loop.families[f][r] == loop.families[w][r - 1];
        if (!lagging) continue;
        found = true;
        chain_of[w] = static_cast<int>(f);
        plan.chains.emplace_back(f, w);
      }
      if (!found)
        why = "row-local " + loop.families[f].front()->name +
              " is not the previous iteration's value of a row-local tensor the loop writes";
    }
    // Each member of a row-local written family is read in its own iteration or through its
    // chain one iteration later, never through another family or as an invariant.
    for (size_t w : plan.local_written) {
      for (size_t s = 0; s < loop.count && why.empty(); ++s) {
        const ir::TensorNode* t = loop.families[w][s];
        if (std::find(loop.invariant.begin(), loop.invariant.end(), t) != loop.invariant.end())
          why = "row-local " + t->name + " is read in every iteration";
        for (size_t g = 0; g < families && why.empty(); ++g) {
          if (g == w) continue;
          for (size_t r = 0; r < loop.count; ++r) {
            if (loop.families[g][r] != t) continue;
            if (chain_of[w] == static_cast<int>(g) && r == s + 1) continue;
            why = "row-local " + t->name + " is read in another iteration than the one " +
                  "writing it and the next";
            break;
          }
        }
      }
    }
    // After the loop, the row arrays hold the last iteration's values: no later stage may read
    // a row-local member of the loop's families but the last of a written one.
    std::set<const ir::TensorNode*> hidden;
    for (size_t f = 0; f < families; ++f) {
      if (how[f] == Held::kLocal) hidden.insert(loop.families[f].begin(), loop.families[f].end());
    }
    for (size_t w : plan.local_written) hidden.erase(loop.families[w].back());
    for (size_t s = loop.end(); s < stages.size() && why.empty() && !hidden.empty(); ++s) {
      for (const ir::Expr& root : stage_expressions(stages[s])) {
        for_each_node(root, [&](const ir::Expr& node) {
          auto* load = node.as<ir::LoadNode>();
          if (load && why.empty() && hidden.count(load->tensor.get()))
            why = "stage " + std::to_string(s) + " reads row-local " + load->tensor->name +
                  " after the loop";
        });
      }
    }
    if (!why.empty()) {
      stage_loop_notes_.push_back("no stage loop for " + what + ": " + why);
      continue;
    }
    size_t tables = 0;
    for (size_t f = 0; f < families; ++f) {
      if (how[f] != Held::kGlobal) {
        plan.tables.emplace_back();
        continue;
      }
      const ir::TensorNode* t = loop.families[f].front();
      plan.tables.push_back(names_.fresh(t->name + "_of"));
      out_->line(std::string("__shared__ ") + (plan.written[f] ? "" : "const ") +
                 std::string(cuda_storage_type(t->dtype)) + "* " + plan.tables.back() + "[" +
                 std::to_string(loop.count) + "];  // " + t->name + " to " +
                 loop.families[f].back()->name + ", one per iteration");
      ++tables;
    }
    stage_loop_notes_.push_back(
        "stage loop: " + what + " written once, as a loop (#pragma unroll 1; the iterations "
        "compute alike but for their tensors): " + std::to_string(tables) +
        " tensor(s) through tables of pointers in shared memory, " +
        std::to_string(plan.chains.size()) + " row-local chain(s) of two row arrays, " +
        std::to_string(loop.invariant.size()) + " tensor(s) the same in every iteration");
    planned.push_back(std::move(plan));
  }
  // The tables, filled once per block before any thread returns.
  bool any = false;
  for (const PlannedStageLoop& plan : planned) {
    for (const std::string& table : plan.tables) any |= !table.empty();
  }
  if (any) {
    {
      CodeWriter::Block fill = out_->block("if (threadIdx.x == 0) {");
      for (const PlannedStageLoop& plan : planned) {
        for (size_t f = 0; f < plan.tables.size(); ++f) {
          if (plan.tables[f].empty()) continue;
          for (size_t r = 0; r < plan.loop.count; ++r) {
            out_->line(plan.tables[f] + "[" + std::to_string(r) +
                       "] = " + params_.at(plan.loop.families[f][r]) + ";");
          }
        }
      }
    }
    out_->line("__syncthreads();");
  }
  return planned;
}

void KernelEmitter::emit_row_stages(const std::vector<PlannedStageLoop>& loops,
                                    const std::function<void(size_t)>& emit_one,
                                    const std::string& between) {
  const std::vector<ir::Stage>& stages = kernel_.stages;
  const size_t row_axes = static_cast<size_t>(kernel_.row_axes);
  size_t next = 0;
  for (size_t s = 0; s < stages.size();) {
    if (next >= loops.size() || loops[next].loop.first != s) {
      emit_one(s);
      if (s + 1 < stages.size() && !between.empty()) out_->line(between);
      ++s;
      continue;
    }
    const PlannedStageLoop& plan = loops[next++];
    const StageLoop& loop = plan.loop;
    const std::string it = names_.fresh("iteration");
    out_->line("// stages " + std::to_string(loop.first) + " to " +
               std::to_string(loop.end() - 1) + ": " + std::to_string(loop.count) +
               " iterations of the " + std::to_string(loop.period) +
               " stage(s) below, each with its own tensors (the first iteration's named)");
    out_->line("#pragma unroll 1");
    {
      CodeWriter::Block body = out_->block("for (int " + it + " = 0; " + it + " < " +
                                           std::to_string(loop.count) + "; ++" + it + ") {");
      std::vector<std::pair<const ir::TensorNode*, std::string>> saved;
      for (size_t f = 0; f < loop.families.size(); ++f) {
        if (plan.tables[f].empty()) continue;
        const ir::TensorNode* t = loop.families[f].front();
        const std::string name = names_.fresh(t->name + "_now");
        out_->line(std::string(plan.written[f] ? "" : "const ") +
                   std::string(cuda_storage_type(t->dtype)) + "* __restrict__ " + name + " = " +
                   plan.tables[f] + "[" + it + "];");
        saved.emplace_back(t, params_.at(t));
        params_[t] = name;
      }
      for (size_t k = 0; k < loop.period; ++k) {
        emit_one(loop.first + k);
        if (!between.empty()) out_->line(between);
      }
      for (const auto& [f, w] : plan.chains) {
        const ir::TensorNode* from = loop.families[w].front();
        const ir::TensorNode* to = loop.families[f].front();
        const std::string e = names_.fresh("e");
        out_->line("// the next iteration reads this one's " + from->name + " as " + to->name);
        out_->line("#pragma unroll");
        out_->line("for (int " + e + " = 0; " + e + " < " +
                   std::to_string(row_elements(*from, row_axes)) + "; ++" + e + ") " +
                   row_local_.at(to) + "[" + e + "] = " + row_local_.at(from) + "[" + e + "];");
      }
      for (const auto& [t, name] : saved) params_[t] = name;
    }
    // Later stages read a row-local written family's last tensor from the array the loop
    // wrote.
    for (size_t w : plan.local_written)
      row_local_[loop.families[w].back()] = row_local_.at(loop.families[w].front());
    s = loop.end();
  }
}


void KernelEmitter::emit_row_group_body() {
  if (kernel_.grid.row_per_thread) {
    emit_row_per_thread_body();
    return;
  }
  const RowGroupShape shape = row_group_shape(kernel_);
  const std::string& type = index_type_;
  const int64_t per_block = kernel_.grid.rows_per_block;
  const std::vector<PlannedStageLoop> loops = plan_stage_loops(RowLocals{});
  const std::string first_row = names_.fresh("first_row");
  out_->line("const " + type + " " + first_row + " = (" + type + ")blockIdx.x * " +
             std::to_string(per_block) + ";");
  auto emit_one = [&](size_t s) {
    const ir::Stage& stage = kernel_.stages[s];
    const int64_t points = shape.stage_points[s];
    std::vector<std::string> names;
    for (const ir::Axis& axis : stage.domain) names.push_back(names_.fresh(axis.var.name_hint()));
    const std::string p = names_.fresh("p"), row = names_.fresh("row");
    out_->line("// stage " + std::to_string(s) + ": " + std::to_string(points) +
               " points per row");
    CodeWriter::Block loop = out_->block(
        "for (" + type + " " + p + " = threadIdx.x; " + p + " < " +
        std::to_string(per_block * points) + "; " + p + " += " +
        std::to_string(kernel_.grid.block_size) + ") {");
    out_->line("const " + type + " " + row + " = " + first_row +
               (points == 1 ? " + " + p : " + " + p + " / " + std::to_string(points)) + ";");
    out_->line("if (" + row + " >= " + (outer_count_.empty() ? std::to_string(shape.rows)
                                                                : outer_count_) + ") break;");
    emit_row_stage(stage, names, row, "(" + p + " % " + std::to_string(points) + ")");
  };
  emit_row_stages(loops, emit_one, "__syncthreads();");
}

void KernelEmitter::emit_row_per_thread_body() {
  const RowGroupShape shape = row_group_shape(kernel_);
  const std::string& type = index_type_;
  const size_t rows = static_cast<size_t>(kernel_.row_axes);
  // Temporaries that no other kernel touches live in the thread, one row of each, as many as
  // fit registers (row_groups.h choose_row_locals).
  const RowLocals locals = choose_row_locals(kernel_, program_);
  // The pointer tables of stage loops are filled (the block synchronized) before any thread
  // returns.
  const std::vector<PlannedStageLoop> loops = plan_stage_loops(locals);
  const std::string row = names_.fresh("row");
  out_->line("const " + type + " " + row + " = (" + type + ")blockIdx.x * " +
             std::to_string(kernel_.grid.rows_per_block) + " + (" + type + ")threadIdx.x;");
  out_->line("if (" + row + " >= " +
             (outer_count_.empty() ? std::to_string(shape.rows) : outer_count_) + ") return;");
  // A stage loop's row-local families live in the arrays of their first iteration's tensors:
  // the others get none.
  std::set<const ir::TensorNode*> looped, firsts;
  for (const PlannedStageLoop& plan : loops) {
    for (const std::vector<const ir::TensorNode*>& family : plan.loop.families) {
      firsts.insert(family.front());
      if (locals.tensors.count(family.front())) looped.insert(family.begin() + 1, family.end());
    }
  }
  for (const ir::TensorNode* t : firsts) looped.erase(t);
  for (const ir::Stage& stage : kernel_.stages) {
    const ir::Tensor& t = stage.target;
    if (!locals.tensors.count(t.get()) || row_local_.count(t.get()) || looped.count(t.get()))
      continue;
    const std::string name = names_.fresh(t->name + "_row");
    out_->line(std::string(cuda_storage_type(t->dtype)) + " " + name + "[" +
               std::to_string(row_elements(*t, rows)) + "];  // " + t->name +
               ", this row's elements");
    row_local_[t.get()] = name;
  }
  auto emit_one = [&](size_t s) {
    const ir::Stage& stage = kernel_.stages[s];
    const int64_t points = shape.stage_points[s];
    std::vector<std::string> names;
    for (const ir::Axis& axis : stage.domain) names.push_back(names_.fresh(axis.var.name_hint()));
    if (locals.unread.count(stage.target.get())) {
      out_->line("// stage " + std::to_string(s) + ": " + stage.target->name +
                 " is read by no stage and no other kernel: not computed");
      return;
    }
    const std::string p = names_.fresh("p");
    out_->line("// stage " + std::to_string(s) + ": " + std::to_string(points) +
               " points of the thread's row");
    // A stage's points compute alike from the same row (mhc_sinkhorn: every scale of a step
    // recomputes the step's row sums inline): unrolled, the compiler shares what they share,
    // unless the unrolled loop would still read memory too often (NVRTC's time grows with it).
    std::vector<std::pair<const ir::VarNode*, int64_t>> point_axes;
    for (size_t a = static_cast<size_t>(kernel_.row_axes); a < stage.domain.size(); ++a)
      point_axes.emplace_back(stage.domain[a].var.get(),
                              stage.domain[a].extent.as<ir::IntConstNode>()->value);
    const int64_t loads = memory_loads_unrolled(stage.value, point_axes);
    const bool unroll = points <= kRowPerThreadUnrollPoints &&
                        (options_.row_stage_unroll_loads == 0 ||
                         loads <= options_.row_stage_unroll_loads);
    if (points <= kRowPerThreadUnrollPoints && !unroll)
      stage_loop_notes_.push_back("stage " + std::to_string(s) + ": " + std::to_string(points) +
                                  " points reading memory " + std::to_string(loads) +
                                  " times unrolled (their distinct loads, reductions unrolled), "
                                  "over " + std::to_string(options_.row_stage_unroll_loads) +
                                  ": kept a loop (#pragma unroll 1)");
    out_->line(unroll ? "#pragma unroll" : "#pragma unroll 1");
    CodeWriter::Block loop = out_->block("for (" + type + " " + p + " = 0; " + p + " < " +
                                         std::to_string(points) + "; ++" + p + ") {");
    emit_row_stage(stage, names, row, p);
  };
  emit_row_stages(loops, emit_one, "");
}

int64_t KernelEmitter::memory_loads_unrolled(
    const ir::Expr& e, const std::vector<std::pair<const ir::VarNode*, int64_t>>& point_axes) const {
  constexpr int64_t kMost = int64_t{1} << 40;
  if (const auto* load = e.as<ir::LoadNode>()) {
    int64_t total = 0;
    if (!row_local_.count(load->tensor.get())) {
      // One load per value of the point axes its address depends on: the unrolled points that
      // differ only in the others read the same address, and share the load.
      total = 1;
      for (const auto& [var, extent] : point_axes)
        if (depends_on(e, var)) total = std::min(total * extent, kMost);
    }
    for (const ir::Expr& index : load->indices)
      total = std::min(total + memory_loads_unrolled(index, point_axes), kMost);
    return total;
  }
  if (const auto* reduce = e.as<ir::ReduceNode>()) {
    // A reduction's loads repeat once per trip; a trip count known only at run time counts
    // as kRowPerThreadUnrollPoints (NVVM does not unroll it completely anyway).
    int64_t trips = 1;
    for (const ir::Axis& axis : reduce->axes)
      trips = std::min(trips * constant_trips(axis).value_or(kRowPerThreadUnrollPoints), kMost);
    return std::min(trips * memory_loads_unrolled(reduce->body, point_axes), kMost);
  }
  int64_t total = 0;
  ir::for_each_child(e, [&](const ir::Expr& child) {
    total = std::min(total + memory_loads_unrolled(child, point_axes), kMost);
  });
  return total;
}

void KernelEmitter::emit_row_stage(const ir::Stage& stage, const std::vector<std::string>& names,
                                   const std::string& row, const std::string& point) {
  const std::string& type = index_type_;
  const size_t rows = static_cast<size_t>(kernel_.row_axes);
  // Row-major decodes of the row (its axes) and of the point within it (the others), each
  // declared only when the stage's code names it.
  std::vector<std::pair<std::string, std::string>> pending;
  auto decode = [&](const std::string& flat, size_t from, size_t to) {
    int64_t divisor = 1;
    for (size_t i = to; i-- > from;) {
      const int64_t extent = stage.domain[i].extent.as<ir::IntConstNode>()->value;
      std::string v = divisor == 1 ? flat : flat + " / " + std::to_string(divisor);
      // A token pair's token axis (outer_token_axis_) is outermost: the rows before it count 1.
      if (i != from && static_cast<int>(i) != outer_token_axis_) v += " % " + std::to_string(extent);
      if (extent == 1) v = "0";
      pending.emplace_back(names[i], v);
      divisor *= extent;
    }
  };
  decode(row, 0, rows);
  decode(point, rows, stage.domain.size());
  CodeWriter code(out_->indent());
  CodeWriter* saved = out_;
  out_ = &code;
  referenced_.clear();
  emit_stage(stage, names);
  out_ = saved;
  for (const auto& [name, value] : pending) {
    if (referenced_.count(name)) out_->line("const " + type + " " + name + " = " + value + ";");
  }
  out_->append(code.text());
}

}  // namespace adjoint::compiler
