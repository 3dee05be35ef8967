// lower_scatter_to_atomics: finds scatter targets whose dtype differs from the accumulation,
// gives each an accumulation temporary, retargets the scatters and appends the conversion.
#include "compiler/lower_scatter_to_atomics.h"

#include <algorithm>
#include <vector>

#include "compiler/program_utils.h"
#include "ir/builder.h"
#include "ir/error.h"

namespace adjoint::compiler {
namespace {

/// A narrow scatter target and what replaces it.
struct Redirect {
  ir::Tensor target;
  ir::Tensor accumulator;
  size_t first_kernel = 0;  ///< index of the first kernel that scatters into the target
  size_t last_kernel = 0;   ///< index of the last one
};

/// The conversion runs after the last scatter; a kernel in between that reads the target would
/// see a partial sum, which the IR's semantics do not allow for: refuse it.
void check_no_partial_reads(const ir::Program& program, const Redirect& r) {
  for (size_t k = r.first_kernel + 1; k <= r.last_kernel; ++k) {
    for (const ir::Tensor& t : tensors_read(program.kernels[k])) {
      if (t == r.target) {
        throw Error("kernel '" + program.kernels[k].name + "' reads '" + t->name +
                        "' between two kernels that scatter into it; split the program so that "
                        "every scatter into it comes first",
                    ErrorCode::kInvalidProgram);
      }
    }
  }
}

ir::Kernel conversion_kernel(const ir::Tensor& target, const ir::Tensor& accumulator) {
  std::vector<ir::Var> vars;
  std::vector<ir::Expr> indices;
  for (int d = 0; d < target->rank(); ++d) {
    vars.emplace_back("i" + std::to_string(d));
    indices.push_back(vars.back());
  }
  ir::Expr value = ir::cast(target->dtype, ir::load(accumulator, indices));
  return ir::Kernel{
      target->name + "_convert", {ir::compute(target, ir::over(target, vars), value)}, {}};
}

}  // namespace

ir::Program lower_scatter_to_atomics(const ir::Program& program) {
  ir::Program out = program;
  std::vector<Redirect> redirects;  // in order of first appearance: deterministic output
  auto find = [&](const ir::Tensor& t) {
    auto it = std::find_if(redirects.begin(), redirects.end(),
                           [&](const Redirect& r) { return r.target == t; });
    return it == redirects.end() ? nullptr : &*it;
  };
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    for (const ir::Stage& stage : program.kernels[k].stages) {
      if (stage.kind != ir::StageKind::kScatterAdd || stage.target->dtype == stage.accumulation)
        continue;
      Redirect* r = find(stage.target);
      if (!r) {
        redirects.push_back(Redirect{stage.target, nullptr, k, k});
        r = &redirects.back();
        r->accumulator =
            ir::make_tensor(unique_tensor_name(out, stage.target->name + "_accumulator"),
                            stage.accumulation, stage.target->shape, ir::TensorRole::kTemporary);
        out.temporaries.push_back(r->accumulator);
      }
      r->last_kernel = k;
    }
  }
  if (redirects.empty()) return program;
  for (const Redirect& r : redirects) check_no_partial_reads(program, r);

  out.kernels.clear();
  for (size_t k = 0; k < program.kernels.size(); ++k) {
    ir::Kernel kernel = program.kernels[k];
    for (ir::Stage& stage : kernel.stages) {
      const Redirect* r = find(stage.target);
      if (stage.kind == ir::StageKind::kScatterAdd && r) {
        if (stage.target->role == ir::TensorRole::kInput) {
          throw Error(
              "kernel '" + kernel.name + "' scatters into input '" + stage.target->name + "'",
              ErrorCode::kInvalidProgram);
        }
        stage.target = r->accumulator;
      }
    }
    out.kernels.push_back(std::move(kernel));
    for (const Redirect& r : redirects) {
      if (r.last_kernel == k) out.kernels.push_back(conversion_kernel(r.target, r.accumulator));
    }
  }
  return out;
}

}  // namespace adjoint::compiler
