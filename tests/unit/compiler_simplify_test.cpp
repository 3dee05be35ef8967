// Tests of the simplify pass: each rewrite on a small expression (structural checks through the
// printer), the rules it must not apply to floats, and that an unchanged program comes back as
// the very same object.
#include <gtest/gtest.h>

#include <cmath>

#include "compiler/simplify.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;
using ir::Var;

std::string simplified(const Expr& e) {
  return ir::to_string(simplify(e));
}

/// Simplifies `value` as a compute stage over i < extent (so i's range is known).
std::string simplified_over(const Var& i, int64_t extent, const Expr& value) {
  ir::ProgramBuilder b("p");
  ir::Tensor out = b.output("out", value.dtype(), {extent});
  b.kernel("k", {ir::compute(out, ir::over(out, {i}), value)});
  ir::Program p = simplify(std::move(b).build());
  return ir::to_string(p.kernels[0].stages[0].value);
}

TEST(Simplify, FoldsIntegerConstantsExactly) {
  EXPECT_EQ(simplified(Expr(6) * Expr(7) - Expr(2)), "40");
  EXPECT_EQ(simplified(Expr(-7) / Expr(2)), "-4");  // floor division
  EXPECT_EQ(simplified(Expr(-7) % Expr(2)), "1");
  Expr big = Expr(int64_t{1} << 53) + Expr(1);  // beyond double's integers
  EXPECT_EQ(simplified(big), std::to_string((int64_t{1} << 53) + 1));
  EXPECT_EQ(simplified(Expr(1) / Expr(0)), "1 / 0") << "division by zero is left alone";
}

TEST(Simplify, FoldsFloatConstantsAsTheInterpreter) {
  Expr a = ir::constant(DType::kF32, 0.1), b = ir::constant(DType::kF32, 0.2);
  Expr sum = a + b;
  Expr folded = simplify(sum);
  ASSERT_NE(folded.as<ir::FloatConstNode>(), nullptr);
  EXPECT_EQ(folded.as<ir::FloatConstNode>()->value, ir::evaluate_constant(sum));
  EXPECT_EQ(folded.dtype(), DType::kF32);
  Expr e = simplify(ir::exp(ir::constant(DType::kF16, 1.0)));
  EXPECT_EQ(e.as<ir::FloatConstNode>()->value, ir::round_to(DType::kF16, std::exp(1.0)));
}

TEST(Simplify, IntegerIdentities) {
  Var i("i");
  EXPECT_EQ(simplified(i * 1 + 0), "i");
  EXPECT_EQ(simplified(Expr(1) * i - 0), "i");
  EXPECT_EQ(simplified(i * 0 + 3), "3");
  EXPECT_EQ(simplified(i / 1), "i");
  EXPECT_EQ(simplified(i % 1), "0");
  EXPECT_EQ(simplified(i + 1 + -1), "i");
  EXPECT_EQ(simplified(i - 3 + 5), "i + 2");
  EXPECT_EQ(simplified(i + 4 - 9), "i + -5");
}

TEST(Simplify, FloatIdentitiesOnlyWhereExact) {
  Var i("i");
  Expr x = ir::cast(DType::kF32, i);
  EXPECT_EQ(simplified(x * ir::constant(DType::kF32, 1.0)), "f32(i)");
  EXPECT_EQ(simplified(x - ir::constant(DType::kF32, 0.0)), "f32(i)");
  EXPECT_EQ(simplified(x * ir::constant(DType::kF32, 0.0)), "f32(i) * 0.0f") << "NaN * 0 is NaN";
  EXPECT_EQ(simplified(x + ir::constant(DType::kF32, 0.0)), "f32(i) + 0.0f") << "-0 + 0 is +0";
  EXPECT_EQ(simplified(x + ir::constant(DType::kF32, -0.0)), "f32(i)");
}

TEST(Simplify, MinMaxOfOrderedRanges) {
  Var i("i");
  EXPECT_EQ(simplified_over(i, 8, ir::min(i, Expr(7))), "i");
  EXPECT_EQ(simplified_over(i, 8, ir::max(i, Expr(0))), "i");
  EXPECT_EQ(simplified_over(i, 8, ir::min(i, Expr(6))), "min(i, 6)");
  EXPECT_EQ(simplified_over(i, 8, ir::max(ir::min(i * 2, Expr(20)), Expr(-1))), "i * 2");
}

TEST(Simplify, ComparisonsDecidedByRanges) {
  Var i("i");
  EXPECT_EQ(simplified_over(i, 8, ir::select(i < 8, i, Expr(5))), "i");
  EXPECT_EQ(simplified_over(i, 8, ir::select(i >= 9, Expr(1), i + 2)), "i + 2");
  EXPECT_EQ(simplified_over(i, 8, ir::select(i < 4, i, Expr(5))), "select(i < 4, i, 5)");
}

TEST(Simplify, DivisionAndModuloByConstants) {
  Var i("i"), j("j");
  EXPECT_EQ(simplified_over(i, 4, i / 4), "0");
  EXPECT_EQ(simplified_over(i, 4, i % 4), "i");
  EXPECT_EQ(simplified(i * 8 / 4), "i * 2");
  EXPECT_EQ(simplified(i * 8 % 4), "0");
  EXPECT_EQ(simplified((i * 8 + j) / 8), "i + (j / 8)");
  EXPECT_EQ(simplified((j + i * 12) % 4), "j % 4");
  EXPECT_EQ(simplified(i / 3), "i / 3");
}

TEST(Simplify, CastsAndSelectsOfConstants) {
  EXPECT_EQ(simplified(ir::CastNode::make(DType::kI32, Expr(5))), "5i32");
  EXPECT_EQ(simplified(ir::CastNode::make(DType::kF32, Expr(3))), "3.0f");
  EXPECT_EQ(simplified(ir::CastNode::make(DType::kI64, ir::constant(DType::kF32, -2.5))), "-2");
  Var i("i");
  EXPECT_EQ(simplified(ir::CastNode::make(DType::kI64, i)), "i");
  EXPECT_EQ(simplified(ir::select(Expr(1) < Expr(2), i, i + 1)), "i");
  Expr t = ir::IntConstNode::make(DType::kBool, 1), f = ir::IntConstNode::make(DType::kBool, 0);
  EXPECT_EQ(simplified(t && (i < 3)), "i < 3");
  EXPECT_EQ(simplified(f && (i < 3)), "false");
  EXPECT_EQ(simplified((i < 3) || t), "true");
}

TEST(Simplify, UnchangedProgramIsTheSameObject) {
  ir::ProgramBuilder b("p");
  ir::Tensor in = b.input("in", DType::kF32, {4});
  ir::Tensor out = b.output("out", DType::kF32, {4});
  Var i("i");
  Expr value = ir::load(in, {i}) * ir::constant(DType::kF32, 2.0);
  b.kernel("k", {ir::compute(out, ir::over(out, {i}), value)});
  ir::Program p = std::move(b).build();
  ir::Program s = simplify(p);
  EXPECT_TRUE(s.kernels[0].stages[0].value.same_as(value));
  Expr untouched = simplify(value);
  EXPECT_TRUE(untouched.same_as(value));
}

TEST(Simplify, SimplifiesInsideReductionsWithTheirAxisRanges) {
  ir::ProgramBuilder b("p");
  ir::Tensor in = b.input("in", DType::kF32, {4, 8});
  ir::Tensor out = b.output("out", DType::kF32, {4});
  Var i("i"), k("k");
  Expr value =
      ir::sum({ir::range(k, Expr(8))}, ir::load(in, {i, ir::min(k, Expr(7))}), DType::kF32);
  b.kernel("k", {ir::compute(out, ir::over(out, {i}), value)});
  ir::Program p = simplify(std::move(b).build());
  EXPECT_EQ(ir::to_string(p.kernels[0].stages[0].value), "sum<f32>(k < 8 : in[i, k])");
}

}  // namespace
}  // namespace adjoint::compiler

namespace adjoint::compiler {
namespace {

TEST(Simplify, AReduceUsedTwiceStaysOneNode) {
  // out[p] = r + r * 2 with r = sum over t of x[p, t] * 1: the body simplifies, and both uses
  // must keep sharing one Reduce (two would bind t twice, which verify rejects).
  ir::ProgramBuilder b("shared_reduce");
  ir::Tensor x = b.input("x", ir::DType::kF32, {4, 8});
  ir::Tensor out = b.output("out", ir::DType::kF32, {4});
  ir::Var p("p"), t("t");
  ir::Expr r = ir::sum({ir::range(t, ir::Expr(8))}, ir::load(x, {p, t}) * 1.0, ir::DType::kF32);
  b.kernel("k", {ir::compute(out, ir::over(out, {p}), r + r * 2.0)});
  ir::Program input = std::move(b).build();
  ir::Program simplified = simplify(input);
  EXPECT_NO_THROW(ir::verify(simplified)) << ir::to_string(simplified);
  const auto* sum = simplified.kernels[0].stages[0].value.as<ir::BinaryNode>();
  ASSERT_NE(sum, nullptr);
  const auto* product = sum->b.as<ir::BinaryNode>();
  ASSERT_NE(product, nullptr);
  EXPECT_TRUE(sum->a.same_as(product->a)) << ir::to_string(simplified);
  EXPECT_EQ(sum->a.as<ir::ReduceNode>()->body.kind(), ir::ExprKind::kLoad);  // x * 1 went
  ir::HostBuffers in;
  for (int i = 0; i < 32; ++i) in["x"].push_back(i / 4.0);
  EXPECT_EQ(ir::interpret(simplified, in).at("out"), ir::interpret(input, in).at("out"));
}

}  // namespace
}  // namespace adjoint::compiler
