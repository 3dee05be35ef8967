// Tests of the interval analysis (ir/bounds.h): each rule on small expressions, soundness
// against brute-force evaluation, and the f32 index maps of the upsample ops.
#include <gtest/gtest.h>

#include "ir/bounds.h"
#include "compiler/program_utils.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/visitor.h"

namespace adjoint::compiler {
namespace {

using ir::Bounds;
using ir::DType;
using ir::Interval;
using ir::Expr;
using ir::Var;

Interval range_of(const Expr& e, const Var& v, int64_t lo, int64_t hi) {
  Bounds b;
  b.bind(v.get(), {lo, hi});
  return b.of(e);
}

/// Every value of e(v) for v in [lo, hi] lies in the analysed range.
void expect_sound(const Expr& e, const Var& v, int64_t lo, int64_t hi) {
  Interval r = range_of(e, v, lo, hi);
  for (int64_t x = lo; x <= hi; ++x) {
    int64_t value = static_cast<int64_t>(
        ir::evaluate_constant(substitute(e, v.get(), ir::IntConstNode::make(DType::kI64, x))));
    ASSERT_GE(value, r.min) << ir::to_string(e) << " at " << x;
    ASSERT_LE(value, r.max) << ir::to_string(e) << " at " << x;
  }
}

TEST(Bounds, ArithmeticOfAVariable) {
  Var i("i");
  EXPECT_EQ(range_of(i * 3 + 2, i, 0, 9).min, 2);
  EXPECT_EQ(range_of(i * 3 + 2, i, 0, 9).max, 29);
  EXPECT_EQ(range_of(Expr(5) - i, i, 0, 9).min, -4);
  EXPECT_EQ(range_of(i * -2, i, 1, 4).min, -8);
  EXPECT_EQ(range_of(i * -2, i, 1, 4).max, -2);
}

TEST(Bounds, FloorDivisionAndModulo) {
  Var i("i");
  Interval d = range_of(i / 4, i, -5, 11);
  EXPECT_EQ(d.min, -2);  // floor(-5 / 4)
  EXPECT_EQ(d.max, 2);
  Interval m = range_of(i % 4, i, 0, 3);
  EXPECT_EQ(m.min, 0);
  EXPECT_EQ(m.max, 3);
  Interval wrap = range_of(i % 4, i, 2, 9);
  EXPECT_EQ(wrap.min, 0);
  EXPECT_EQ(wrap.max, 3);
  Interval one_period = range_of(i % 8, i, 9, 13);
  EXPECT_EQ(one_period.min, 1);
  EXPECT_EQ(one_period.max, 5);
  EXPECT_FALSE(range_of(Expr(7) / i, i, -1, 1).is_bounded()) << "divisor range contains 0";
}

TEST(Bounds, MinMaxSelectCompare) {
  Var i("i");
  EXPECT_EQ(range_of(ir::min(i, 4), i, 0, 9).max, 4);
  EXPECT_EQ(range_of(ir::max(i, 4), i, 0, 9).min, 4);
  EXPECT_EQ(range_of(ir::select(i < 3, i, Expr(20)), i, 0, 9).max, 20);
  EXPECT_TRUE(range_of(i < 10, i, 0, 9).is_point());
  EXPECT_EQ(range_of(i < 10, i, 0, 9).min, 1);
  EXPECT_EQ(range_of(i >= 10, i, 0, 9).max, 0);
  EXPECT_FALSE(range_of(i < 5, i, 0, 9).is_point());
}

TEST(Bounds, FloatIndexMapsAreBounded) {
  Var o("o");
  Expr map =
      ir::cast(DType::kI64, ir::floor(ir::cast(DType::kF32, o) * ir::constant(DType::kF32, 0.625)));
  Interval r = range_of(map, o, 0, 7);
  EXPECT_EQ(r.min, 0);
  EXPECT_EQ(r.max, 4);
  expect_sound(map, o, 0, 7);
  Expr exact =
      ir::cast(DType::kI64, ir::floor((ir::cast(DType::kF32, o) + ir::constant(DType::kF32, 0.5)) *
                                      ir::constant(DType::kF32, 13.0 / 20.0)));
  expect_sound(exact, o, 0, 19);
  EXPECT_LE(range_of(exact, o, 0, 19).max, 13);
}

TEST(Bounds, OverflowGivesUpInsteadOfWrapping) {
  Var i("i");
  Expr big = i * Expr(int64_t{1} << 40) * Expr(int64_t{1} << 40);
  EXPECT_FALSE(range_of(big, i, 0, 1000).is_bounded());
  EXPECT_FALSE(range_of(i, i, 0, int64_t{1} << 31).fits_int32());
  EXPECT_TRUE(range_of(i, i, -5, (int64_t{1} << 31) - 1).fits_int32());
}

TEST(Bounds, SoundOverManyExpressions) {
  Var i("i");
  std::vector<Expr> exprs = {i * 7 % 5,
                             (i - 3) / 2,
                             ir::min(i * 2, Expr(9) - i),
                             ir::abs(i - 4),
                             ir::select(i % 2 == 0, i / 2, -i),
                             (i * 3 + 1) / 4 - i % 3};
  for (const Expr& e : exprs) expect_sound(e, i, -6, 12);
}

TEST(Bounds, ReduceAxesAreBoundFromTheirStartAndExtent) {
  Var t("t"), o("o");
  Bounds b;
  b.bind(t.get(), {0, 4});
  Expr body = o * 2;
  b.bind_reduce_axis(ir::range(o, t * 2, Expr(3)));
  Interval r = b.of(body);
  EXPECT_EQ(r.min, 0);
  EXPECT_EQ(r.max, 20);  // o <= 4*2 + 3 - 1
}

}  // namespace
}  // namespace adjoint::compiler
