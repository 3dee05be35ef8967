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
#include "compiler/kernel_emitter.h"
#include "compiler/program_utils.h"
#include "compiler/cuda_syntax.h"
#include "compiler/row_groups.h"

namespace adjoint::compiler {

void KernelEmitter::emit_row_group_body() {
  if (kernel_.grid.row_per_thread) {
    emit_row_per_thread_body();
    return;
  }
  const RowGroupShape shape = row_group_shape(kernel_);
  const std::string& type = index_type_;
  const int64_t per_block = kernel_.grid.rows_per_block;
  const std::string first_row = names_.fresh("first_row");
  out_->line("const " + type + " " + first_row + " = (" + type + ")blockIdx.x * " +
             std::to_string(per_block) + ";");
  for (size_t s = 0; s < kernel_.stages.size(); ++s) {
    const ir::Stage& stage = kernel_.stages[s];
    const int64_t points = shape.stage_points[s];
    std::vector<std::string> names;
    for (const ir::Axis& axis : stage.domain) names.push_back(names_.fresh(axis.var.name_hint()));
    const std::string p = names_.fresh("p"), row = names_.fresh("row");
    out_->line("// stage " + std::to_string(s) + ": " + std::to_string(points) +
               " points per row");
    {
      CodeWriter::Block loop = out_->block(
          "for (" + type + " " + p + " = threadIdx.x; " + p + " < " +
          std::to_string(per_block * points) + "; " + p + " += " +
          std::to_string(kernel_.grid.block_size) + ") {");
      out_->line("const " + type + " " + row + " = " + first_row +
                 (points == 1 ? " + " + p : " + " + p + " / " + std::to_string(points)) + ";");
      out_->line("if (" + row + " >= " + std::to_string(shape.rows) + ") break;");
      emit_row_stage(stage, names, row, "(" + p + " % " + std::to_string(points) + ")");
    }
    if (s + 1 < kernel_.stages.size()) out_->line("__syncthreads();");
  }
}

void KernelEmitter::emit_row_per_thread_body() {
  const RowGroupShape shape = row_group_shape(kernel_);
  const std::string& type = index_type_;
  const size_t rows = static_cast<size_t>(kernel_.row_axes);
  const std::string row = names_.fresh("row");
  out_->line("const " + type + " " + row + " = (" + type + ")blockIdx.x * " +
             std::to_string(kernel_.grid.rows_per_block) + " + (" + type + ")threadIdx.x;");
  out_->line("if (" + row + " >= " + std::to_string(shape.rows) + ") return;");
  // Temporaries that no other kernel touches live in the thread, one row of each, as many as
  // fit registers (row_groups.h choose_row_locals).
  const RowLocals locals = choose_row_locals(kernel_, program_);
  for (const ir::Stage& stage : kernel_.stages) {
    const ir::Tensor& t = stage.target;
    if (!locals.tensors.count(t.get()) || row_local_.count(t.get())) continue;
    int64_t elements = 1;
    for (size_t d = rows; d < t->shape.size(); ++d) elements *= t->shape[d];
    const std::string name = names_.fresh(t->name + "_row");
    out_->line(std::string(cuda_storage_type(t->dtype)) + " " + name + "[" +
               std::to_string(elements) + "];  // " + t->name + ", this row's elements");
    row_local_[t.get()] = name;
  }
  for (size_t s = 0; s < kernel_.stages.size(); ++s) {
    const ir::Stage& stage = kernel_.stages[s];
    const int64_t points = shape.stage_points[s];
    std::vector<std::string> names;
    for (const ir::Axis& axis : stage.domain) names.push_back(names_.fresh(axis.var.name_hint()));
    if (locals.unread.count(stage.target.get())) {
      out_->line("// stage " + std::to_string(s) + ": " + stage.target->name +
                 " is read by no stage and no other kernel: not computed");
      continue;
    }
    const std::string p = names_.fresh("p");
    out_->line("// stage " + std::to_string(s) + ": " + std::to_string(points) +
               " points of the thread's row");
    // A stage's points compute alike from the same row (mhc_sinkhorn: every scale of a step
    // recomputes the step's row sums inline): unrolled, the compiler shares what they share.
    out_->line(points <= kRowPerThreadUnrollPoints ? "#pragma unroll" : "#pragma unroll 1");
    CodeWriter::Block loop = out_->block("for (" + type + " " + p + " = 0; " + p + " < " +
                                         std::to_string(points) + "; ++" + p + ") {");
    emit_row_stage(stage, names, row, p);
  }
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
      if (i != from) v += " % " + std::to_string(extent);
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
