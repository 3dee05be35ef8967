// Builder tests: literals adapt to the other operand's dtype, mixed index widths widen to i64,
// reductions cast their body to the accumulation type, and every ill-typed construction throws
// an adjoint::Error (kInvalidProgram) whose message names the operands and their types.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "ir/builder.h"

namespace adjoint::ir {
namespace {

/// The message of the adjoint::Error that `f` throws ("" if it throws none), and checks the code.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidProgram) << e.what();
    return e.what();
  }
  return "";
}

DType constant_dtype(const Expr& e) {
  EXPECT_TRUE(e.kind() == ExprKind::kIntConst || e.kind() == ExprKind::kFloatConst);
  return e.dtype();
}

TEST(IrBuilder, LiteralsTakeTheOtherOperandsDtype) {
  Tensor x = make_tensor("x", DType::kF16, {4}, TensorRole::kInput);
  Var i("i");
  Expr scaled = TensorRef(x)(i) * 2.0;
  ASSERT_EQ(scaled.kind(), ExprKind::kBinary);
  EXPECT_EQ(scaled.dtype(), DType::kF16);
  EXPECT_EQ(constant_dtype(scaled.as<BinaryNode>()->b), DType::kF16);

  Expr left_literal = 1 - TensorRef(x)(i);
  EXPECT_EQ(constant_dtype(left_literal.as<BinaryNode>()->a), DType::kF16);

  Expr index = i + 1;
  EXPECT_EQ(index.dtype(), DType::kI64);
  Expr narrow = cast(DType::kI32, i) * 3;
  EXPECT_EQ(narrow.dtype(), DType::kI32);
  EXPECT_EQ(constant_dtype(narrow.as<BinaryNode>()->b), DType::kI32);

  Expr chosen = select(i < 2, TensorRef(x)(i), 0);
  EXPECT_EQ(constant_dtype(chosen.as<SelectNode>()->false_value), DType::kF16);
  EXPECT_EQ(chosen.as<SelectNode>()->condition.as<CompareNode>()->b.dtype(), DType::kI64);

  // Two literals: the float one wins.
  Expr both = Expr(1) + Expr(0.5);
  EXPECT_EQ(both.dtype(), DType::kF64);
  // A float literal is rounded to the dtype it adapts to.
  Expr third = TensorRef(x)(i) + 0.1;
  EXPECT_EQ(third.as<BinaryNode>()->b.as<FloatConstNode>()->value, 0.0999755859375);
}

TEST(IrBuilder, MixedIndexWidthsWidenToI64) {
  Var i("i"), j("j");
  Expr sum_ij = i + cast(DType::kI32, j);
  EXPECT_EQ(sum_ij.dtype(), DType::kI64);
  const auto* widened = sum_ij.as<BinaryNode>()->b.as<CastNode>();
  ASSERT_NE(widened, nullptr);
  EXPECT_EQ(widened->dtype, DType::kI64);
}

TEST(IrBuilder, StagesAndReductionsAdaptTheirValues) {
  Tensor x = make_tensor("x", DType::kBF16, {4, 8}, TensorRole::kInput);
  Tensor y = make_tensor("y", DType::kF16, {4}, TensorRole::kOutput);
  Var i("i"), k("k");
  Expr total = sum({range(k, 8)}, TensorRef(x)(i, k), DType::kF32);
  ASSERT_EQ(total.kind(), ExprKind::kReduce);
  EXPECT_EQ(total.dtype(), DType::kF32);
  const auto* body = total.as<ReduceNode>()->body.as<CastNode>();
  ASSERT_NE(body, nullptr) << "the bf16 body is converted to the f32 accumulation";
  EXPECT_EQ(body->dtype, DType::kF32);

  Stage zero = compute(y, over(y, {i}), 0);
  EXPECT_EQ(constant_dtype(zero.value), DType::kF16);
  Stage ones = scatter_add(y, {i}, 1, over({i}, {4}), DType::kF32);
  EXPECT_EQ(constant_dtype(ones.value), DType::kF32);
  EXPECT_EQ(ones.accumulation, DType::kF32);

  EXPECT_EQ(constant(DType::kBF16, 1.0 / 3.0).as<FloatConstNode>()->value, 0.333984375);
  EXPECT_EQ(cast(DType::kF32, Expr(2)).as<FloatConstNode>()->value, 2.0);
  EXPECT_EQ(TensorRef(x)(i, 3).as<LoadNode>()->indices[1].as<IntConstNode>()->value, 3);
}

TEST(IrBuilder, FmaSumsMultiplyTheirFactorsInTheAccumulationDtype) {
  Tensor x = make_tensor("x", DType::kBF16, {4, 8}, TensorRole::kInput);
  Tensor w = make_tensor("w", DType::kF32, {8}, TensorRole::kInput);
  Var i("i"), k("k");
  Expr dot = fma_sum({range(k, 8)}, TensorRef(x)(i, k), TensorRef(w)(k), DType::kF32);
  const auto* r = dot.as<ReduceNode>();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->op, ReduceOp::kFmaSum);
  const BinaryNode* product = fused_product(*r);
  ASSERT_NE(product, nullptr) << "the body is the product the accumulation fuses";
  EXPECT_NE(product->a.as<CastNode>(), nullptr) << "the bf16 factor is converted to f32";
  EXPECT_EQ(product->b.as<LoadNode>()->tensor->name, "w");
  EXPECT_TRUE(is_sum(ReduceOp::kFmaSum) && is_sum(ReduceOp::kSum) && !is_sum(ReduceOp::kMax));
  // A body that is not a product in the accumulation dtype is added as in a sum.
  Expr plain = ReduceNode::make(ReduceOp::kFmaSum, {range(k, 8)}, TensorRef(w)(k), DType::kF32);
  EXPECT_EQ(fused_product(*plain.as<ReduceNode>()), nullptr);
  EXPECT_EQ(fused_product(*sum({range(k, 8)}, TensorRef(w)(k) * 2.0, DType::kF32)
                               .as<ReduceNode>()),
            nullptr)
      << "a plain sum never fuses";
  EXPECT_EQ(error_of([&] { fma_sum({range(k, 8)}, TensorRef(x)(i, k), 2.0, DType::kBF16); }),
            "IR type error: fma_sum accumulated in bf16, expected f32 or f64");
}

TEST(IrBuilder, TypeErrorsNameTheOperandsAndTypes) {
  Tensor x = make_tensor("x", DType::kF32, {2, 3}, TensorRole::kInput);
  Tensor h = make_tensor("h", DType::kF16, {2, 3}, TensorRole::kInput);
  Var i("i"), j("j");
  TensorRef xr(x), hr(h);
  EXPECT_EQ(error_of([&] { xr(i, j) + hr(i, j); }),
            "IR type error: operands of '+' have types f32 and f16; insert a cast so they match");
  EXPECT_EQ(error_of([&] { xr(i, j) < hr(i, j); }),
            "IR type error: operands of '<' have types f32 and f16; insert a cast so they match");
  EXPECT_NE(error_of([&] { i + 0.5; }).find("cannot be used as an i64 value"), std::string::npos);
  EXPECT_EQ(error_of([&] { xr(i); }),
            "IR type error: load of 'x' has 1 indices, but the tensor has rank 2");
  EXPECT_EQ(error_of([&] { xr(i, cast(DType::kF32, j)); }),
            "IR type error: load of 'x': index 1 has type f32, expected i32 or i64");
  EXPECT_EQ(error_of([&] { select(i, xr(i, j), 0); }),
            "IR type error: select condition has type i64, expected bool");
  EXPECT_EQ(error_of([&] { select(i < 1, xr(i, j), hr(i, j)); }),
            "IR type error: select branches have types f32 and f16");
  EXPECT_NE(error_of([&] { exp(i); }).find("exp of a i64 operand, expected a float type"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { pow(i, j); }),
            "IR type error: pow of i64 operands, expected a float type");
  EXPECT_EQ(error_of([&] { !i; }), "IR type error: not of a i64 operand, expected bool");
  EXPECT_NE(error_of([&] { i&& j; }).find("'&&' of i64 operands, expected bool"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { sum({range(j, 3)}, xr(i, j), DType::kI64); }),
            "IR type error: sum of a f32 body accumulated in i64, expected a float accumulation "
            "type");
  EXPECT_EQ(error_of([&] { sum({range(j, 3)}, cast(DType::kF64, xr(i, j)), DType::kF32); }),
            "IR type error: sum of a f64 body accumulated in the narrower f32");
  EXPECT_EQ(error_of([&] { sum({range(j, 0.5)}, xr(i, j), DType::kF32); }),
            "IR type error: sum axis 'j' has a non-integer start or extent");
  EXPECT_EQ(error_of([&] { constant(DType::kI32, 3e9); }),
            "IR type error: constant 3000000000 does not fit in i32");
  EXPECT_EQ(error_of([&] { over(x, {i}); }), "over('x'): 1 variables for a tensor of rank 2");
  EXPECT_EQ(error_of([&] {
              make_tensor("z", DType::kF32, {2, -2}, TensorRole::kInput);
            }),
            "tensor 'z': dimension 1 has size -2, expected a size >= 0");
  EXPECT_EQ(error_of([&] {
              ProgramBuilder pb("p");
              pb.input("x", DType::kF32, {2});
              pb.output("x", DType::kF32, {2});
            }),
            "program 'p': a tensor named 'x' already exists");
}

}  // namespace
}  // namespace adjoint::ir
