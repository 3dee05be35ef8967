// The builder API: C++ that reads like the math. Operators on Expr build Binary/Compare nodes,
// literals adapt to the other operand's dtype, and free functions build math calls, casts,
// reductions and stages. Example (the upsample backward as the adjoint of the forward gather):
//
//   Var n("n"), c("c"), oh("oh"), ow("ow");
//   Stage s = scatter_add(grad_in, {n, c, src_h(oh), src_w(ow)},
//                         cast(DType::kF32, grad_out(n, c, oh, ow)),
//                         over(grad_out, {n, c, oh, ow}));
//
// Every function checks its arguments and throws adjoint::Error naming what was wrong.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/expr.h"
#include "ir/program.h"
#include "ir/tensor.h"

namespace adjoint::ir {

// --- arithmetic -------------------------------------------------------------------------------
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);  ///< floor division on integers
Expr operator%(Expr a, Expr b);  ///< floor modulo on integers
Expr operator-(Expr a);
Expr operator==(Expr a, Expr b);
Expr operator!=(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr operator!(Expr a);

Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr clamp(Expr x, Expr lo, Expr hi);
Expr pow(Expr a, Expr b);
Expr abs(Expr a);
Expr floor(Expr a);
Expr ceil(Expr a);
Expr round_even(Expr a);
Expr exp(Expr a);
Expr log(Expr a);
Expr sqrt(Expr a);
Expr rsqrt(Expr a);
Expr sigmoid(Expr a);
Expr tanh(Expr a);
Expr sin(Expr a);
Expr cos(Expr a);
Expr select(Expr condition, Expr true_value, Expr false_value);
Expr cast(DType t, Expr value);
Expr constant(DType t, double value);

// --- domains and reductions -------------------------------------------------------------------
/// `var` in [0, extent).
Axis range(Var var, Expr extent);
/// `var` in [start, start + extent).
Axis range(Var var, Expr start, Expr extent);
/// A domain over a tensor's shape: one axis per var, extents from `t`'s shape (a dynamic
/// tensor's dimension expressions).
std::vector<Axis> over(const Tensor& t, std::vector<Var> vars);
/// A domain with explicit constant extents.
std::vector<Axis> over(std::vector<Var> vars, std::vector<int64_t> extents);

Expr sum(std::vector<Axis> axes, Expr body, DType accumulation);
/// sum over axes of a * b with each product fused into the accumulation (ir/expr.h, fma_sum;
/// f32 or f64 accumulation): acc = fma(a, b, acc). a and b are converted to the accumulation
/// dtype as a sum's body would be.
Expr fma_sum(std::vector<Axis> axes, Expr a, Expr b, DType accumulation);
Expr maximum(std::vector<Axis> axes, Expr body, DType accumulation);
Expr minimum(std::vector<Axis> axes, Expr body, DType accumulation);

// --- stages -----------------------------------------------------------------------------------
/// compute target[domain vars] = value.
Stage compute(Tensor target, std::vector<Axis> domain, Expr value);
/// scatter_add target[indices] += value over domain (if condition), accumulated in `acc`.
Stage scatter_add(Tensor target, std::vector<Expr> indices, Expr value, std::vector<Axis> domain,
                  DType accumulation, Expr condition = Expr());

/// Builds a Program: declares tensors (names must be unique) and appends kernels.
class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string name);
  Tensor input(std::string name, DType t, std::vector<int64_t> shape,
               std::vector<int64_t> strides = {});
  Tensor output(std::string name, DType t, std::vector<int64_t> shape,
                std::vector<int64_t> strides = {});
  Tensor temporary(std::string name, DType t, std::vector<int64_t> shape);
  /// A size parameter of a generic program (ir/dynamic_sizes.h), read by the runtime from
  /// `source`, declared to lie in [lower_bound, upper_bound].
  Var size(std::string name, std::string source, int64_t lower_bound, int64_t upper_bound);
  /// A dynamic input, output or temporary: `dims` are constants or sizes of this builder,
  /// strides follow `memory_order` (dimensions from outermost to innermost in memory).
  Tensor dynamic_tensor(std::string name, DType t, std::vector<Expr> dims,
                        const std::vector<int>& memory_order, TensorRole role);
  /// Appends a kernel made of `stages`, with a derived grid unless `grid.is_set`.
  void kernel(std::string name, std::vector<Stage> stages, GridConfig grid = {});
  void attribute(std::string key, std::string value);
  Program build() &&;
  const Program& program() const { return program_; }

 private:
  Tensor add(std::string name, DType t, std::vector<int64_t> shape, TensorRole role,
             std::vector<int64_t> strides);
  Program program_;
};

/// A loader bound to a tensor so builder code can write `x(b, s, i, d)`.
class TensorRef {
 public:
  TensorRef(Tensor t) : tensor_(std::move(t)) {}  // NOLINT
  template <typename... Index>
  Expr operator()(Index... idx) const {
    return load(tensor_, std::vector<Expr>{Expr(idx)...});
  }
  Expr operator()(std::vector<Expr> idx) const { return load(tensor_, std::move(idx)); }
  const Tensor& tensor() const { return tensor_; }
  operator const Tensor&() const { return tensor_; }  // NOLINT

 private:
  Tensor tensor_;
};

}  // namespace adjoint::ir
