// Interpreter tests: the semantics every backend must match. Integer division and modulo round
// toward negative infinity; float nodes round to their dtype; reductions handle extents that
// depend on outer variables and empty boxes; scatter_add accumulates colliding points and
// converts to the target dtype once, at the end; out-of-bounds accesses are errors naming the
// tensor and index; strided (channels-last) buffers are addressed through their strides.
#include "ir/interpreter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "ir/verifier.h"

namespace adjoint::ir {
namespace {

double eval(const Expr& e) {
  return evaluate_constant(e);
}
Expr i64(int64_t v) {
  return Expr(v);
}

TEST(IrInterpreter, IntegerDivisionAndModuloFloor) {
  EXPECT_EQ(eval(i64(-7) / 2), -4);
  EXPECT_EQ(eval(i64(-7) % 2), 1);
  EXPECT_EQ(eval(i64(7) / -2), -4);
  EXPECT_EQ(eval(i64(7) % -2), -1);
  EXPECT_EQ(eval(i64(-7) / -2), 3);
  EXPECT_EQ(eval(i64(-7) % -2), -1);
  EXPECT_EQ(eval(i64(-6) / 3), -2);
  EXPECT_EQ(eval(i64(-6) % 3), 0);
  EXPECT_EQ(eval(i64(7) / 2), 3);
  EXPECT_EQ(eval(i64(0) / -5), 0);
  EXPECT_EQ(eval(constant(DType::kI32, -1) / constant(DType::kI32, 4)), -1);
  EXPECT_EQ(eval(constant(DType::kI32, -1) % constant(DType::kI32, 4)), 3);
  EXPECT_THROW(eval(i64(1) / (i64(2) - 2)), Error);

  // The same through a program: the domain variable is negative after the shift.
  ProgramBuilder pb("div");
  Tensor q = pb.output("q", DType::kI64, {5});
  Tensor r = pb.output("r", DType::kI64, {5});
  Var i("i"), j("j");
  pb.kernel("k", {compute(q, over(q, {i}), (i - 2) / 3), compute(r, over(r, {j}), (j - 2) % 3)});
  verify(pb.program());
  HostBuffers out = interpret(pb.program(), {});
  EXPECT_EQ(out["q"], (std::vector<double>{-1, -1, 0, 0, 0}));
  EXPECT_EQ(out["r"], (std::vector<double>{1, 2, 0, 1, 2}));
}

TEST(IrInterpreter, FloatNodesRoundToTheirDtype) {
  auto f16 = [](double v) { return constant(DType::kF16, v); };
  auto bf16 = [](double v) { return constant(DType::kBF16, v); };
  auto f32 = [](double v) { return constant(DType::kF32, v); };
  EXPECT_EQ(eval(f16(2048) + f16(1)), 2048);  // 2049 is a tie between 2048 and 2050: even
  EXPECT_EQ(eval(f16(2048) + f16(3)), 2052);  // 2051: tie between 2050 and 2052: even
  EXPECT_EQ(eval(f16(2048) + f16(3) - f16(2048)), 4);
  EXPECT_EQ(eval(f16(60000) + f16(10000)), std::numeric_limits<double>::infinity());
  EXPECT_EQ(eval(exp(f16(1))), 2.71875);  // e rounded to f16 (spacing 2^-9 at 2)
  EXPECT_EQ(eval(bf16(256) + bf16(1)), 256);
  EXPECT_EQ(eval(bf16(256) + bf16(3)), 260);
  EXPECT_EQ(eval(f32(16777216) + f32(1)), 16777216);
  EXPECT_EQ(eval(f32(1) / f32(3)), static_cast<double>(1.0f / 3.0f));
  EXPECT_EQ(eval(Expr(1.0) / Expr(3.0)), 1.0 / 3.0);
  EXPECT_EQ(eval(sqrt(f32(2))), static_cast<double>(std::sqrt(2.0f)));
  EXPECT_EQ(eval(floor(f32(-0.5))), -1);
  EXPECT_EQ(eval(round_even(f32(2.5))), 2);
  EXPECT_EQ(eval(round_even(f32(3.5))), 4);
  EXPECT_EQ(eval(cast(DType::kI64, f32(-2.7))), -2);  // float -> int truncates
  EXPECT_EQ(eval(cast(DType::kF16, f32(0.1))), 0.0999755859375);
  // An f32 index map: 10 * 0.7f is 6.99999988 exactly but 7 in f32, so the floor is 7.
  EXPECT_EQ(eval(cast(DType::kI64, floor(f32(10) * f32(0.7)))), 7);
  EXPECT_EQ(eval(cast(DType::kI64, floor(Expr(10.0) * (double)0.7f))), 6);

  // Inputs are read as their dtype (1/3 becomes the f32 nearest it), stores round to the
  // tensor's dtype.
  ProgramBuilder pb("store");
  TensorRef x = pb.input("x", DType::kF32, {3});
  Tensor y = pb.output("y", DType::kBF16, {3});
  Tensor wide = pb.output("wide", DType::kF64, {3});
  Var i("i"), j("j");
  pb.kernel("k", {compute(y, over(y, {i}), cast(DType::kBF16, x(i) * 3.0)),
                  compute(wide, over(wide, {j}), cast(DType::kF64, x(j)))});
  HostBuffers out = interpret(pb.program(), {{"x", {1.0 / 3.0, 100.5, -1e-3}}});
  EXPECT_EQ(out["wide"][0], static_cast<double>(1.0f / 3.0f));
  EXPECT_EQ(out["y"][0], 1.0);    // (1/3 in f32) * 3 = 1 in f32
  EXPECT_EQ(out["y"][1], 302.0);  // 301.5 in bf16 (spacing 2): 302
  EXPECT_EQ(out["y"][2], -0.0030059814453125);
}

TEST(IrInterpreter, ReductionsWithDependentAndEmptyExtents) {
  ProgramBuilder pb("reduce");
  TensorRef x = pb.input("x", DType::kF32, {4});
  Tensor prefix = pb.output("prefix", DType::kF32, {4});
  Tensor suffix = pb.output("suffix", DType::kF32, {4});
  Tensor low = pb.output("low", DType::kF32, {4});
  Tensor count = pb.output("count", DType::kI32, {4});
  Var i("i"), k("k"), m("m"), w("w"), c("c");
  pb.kernel("k", {compute(prefix, over(prefix, {i}), sum({range(k, i)}, x(k), DType::kF32)),
                  compute(suffix, over(suffix, {i}), sum({range(m, i, 4 - i)}, x(m), DType::kF32)),
                  compute(low, over(low, {i}), minimum({range(w, i)}, x(w), DType::kF32)),
                  compute(count, over(count, {i}),
                          maximum({range(c, i - 1)}, cast(DType::kI32, c), DType::kI32))});
  verify(pb.program());
  HostBuffers out = interpret(pb.program(), {{"x", {1, 2, 4, 8}}});
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(out["prefix"], (std::vector<double>{0, 1, 3, 7}));  // i = 0: empty sum is 0
  EXPECT_EQ(out["suffix"], (std::vector<double>{15, 14, 12, 8}));
  EXPECT_EQ(out["low"], (std::vector<double>{inf, 1, 1, 1}));  // empty min is +inf
  // Empty integer max is the smallest value of its own dtype (i32 here, not i64); extent -1
  // at i = 0 is empty too.
  EXPECT_EQ(out["count"], (std::vector<double>{-2147483648.0, -2147483648.0, 0, 1}));
  // Not only when stored: the reduce node itself yields the i32 limit.
  Var e("e");
  EXPECT_EQ(eval(maximum({range(e, 0)}, cast(DType::kI32, e), DType::kI32)), -2147483648.0);
  EXPECT_EQ(eval(minimum({range(e, 0)}, e, DType::kI64)),
            static_cast<double>(std::numeric_limits<int64_t>::max()));

  // Nested: the inner extent depends on the outer reduce variable (0 + 1 + 2 + 3 points).
  Var a("a"), b("b");
  EXPECT_EQ(eval(sum({range(a, 4)}, sum({range(b, a)}, Expr(1), DType::kI64), DType::kI64)), 6);
  // A box of two axes, one with a start: 3 x 2 points of a + b, a in [0, 3), b in [5, 7).
  EXPECT_EQ(eval(sum({range(a, 3), range(b, 5, 2)}, a + b, DType::kI64)), 2 * (0 + 1 + 2) + 3 * (5 + 6));
}

TEST(IrInterpreter, ScatterAddCollidesAndConvertsOnceAtTheEnd) {
  ProgramBuilder pb("scatter");
  TensorRef x = pb.input("x", DType::kF32, {6});
  Tensor g = pb.output("g", DType::kBF16, {2});
  Var i("i");
  // Points 0..4 land on g[0], point 5 on g[1], but only where the condition holds.
  pb.kernel("k", {scatter_add(g, {i / 5}, x(i), over({i}, {6}), DType::kF32, i != 3)});
  verify(pb.program());
  const double tiny = std::ldexp(1.0, -9);  // below half a bf16 ulp of 1 (2^-8)
  HostBuffers out = interpret(pb.program(), {{"x", {1, tiny, tiny, 100, tiny, 3}}});
  // Rounding to bf16 after each add would leave 1.0 (each 2^-9 is below half an ulp); the
  // sum converted once is 1 + 3 * 2^-9 = 1.005859375, whose nearest bf16 is 1 + 2^-7.
  EXPECT_EQ(out["g"][0], 1.0078125);
  EXPECT_EQ(out["g"][1], 3.0);

  // Two scatter stages into one target, accumulated in f64 and converted to f16 once: the sum
  // 1 + 2^-11 + 2^-40 is just above the tie between 1 and 1 + 2^-10, so it rounds up (through
  // an f32 it would become the tie and round to 1).
  ProgramBuilder pb2("scatter2");
  TensorRef y = pb2.input("y", DType::kF64, {3});
  Tensor h = pb2.output("h", DType::kF16, {1});
  Var j("j"), k("k");
  pb2.kernel("k", {scatter_add(h, {0}, y(j), over({j}, {3}), DType::kF64),
                   scatter_add(h, {0}, y(k), over({k}, {3}), DType::kF64)});
  verify(pb2.program());
  HostBuffers halves = {{"y", {0.5, std::ldexp(1.0, -12), std::ldexp(1.0, -41)}}};
  EXPECT_EQ(interpret(pb2.program(), halves)["h"][0], 1.0009765625);
}

TEST(IrInterpreter, OutOfBoundsAccessesNameTheTensorAndIndex) {
  ProgramBuilder pb("oob");
  TensorRef x = pb.input("x", DType::kF32, {2, 4});
  Tensor y = pb.output("y", DType::kF32, {4});
  Var i("i");
  pb.kernel("k", {compute(y, over(y, {i}), x(1, i + 1))});
  try {
    interpret(pb.program(), {{"x", std::vector<double>(8, 0.0)}});
    FAIL() << "expected an out-of-bounds error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "interpreter: load of 'x' at [1, 4]: index 1 is out of bounds for size 4");
  }

  ProgramBuilder scatter("oob_scatter");
  Tensor g = scatter.output("g", DType::kF32, {3});
  Var j("j");
  scatter.kernel("k", {scatter_add(g, {2 - j}, 1, over({j}, {4}), DType::kF32)});
  try {
    interpret(scatter.program(), {});
    FAIL() << "expected an out-of-bounds error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "interpreter: scatter_add of 'g' at [-1]: index 0 is out of bounds for size 3");
  }

  // A load in the branch that select does not take is never evaluated.
  ProgramBuilder guarded("guarded");
  TensorRef z = guarded.input("z", DType::kF32, {4});
  Tensor w = guarded.output("w", DType::kF32, {4});
  guarded.kernel("k", {compute(w, over(w, {i}), select(i > 0, z(i - 1), 0))});
  EXPECT_EQ(interpret(guarded.program(), {{"z", {1, 2, 3, 4}}})["w"],
            (std::vector<double>{0, 1, 2, 3}));
}

TEST(IrInterpreter, MissingAndMissizedInputs) {
  ProgramBuilder pb("inputs");
  TensorRef x = pb.input("x", DType::kF32, {2, 3});
  Tensor y = pb.output("y", DType::kF32, {2, 3});
  Var i("i"), j("j");
  pb.kernel("k", {compute(y, over(y, {i, j}), x(i, j))});
  EXPECT_THROW(interpret(pb.program(), {}), Error);
  try {
    interpret(pb.program(), {{"x", {1, 2, 3}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "interpreter: input 'x' has 3 values, expected 6 for x: f32[2, 3]");
  }
}

TEST(IrInterpreter, ChannelsLastBuffersAreAddressedByStrides) {
  const std::vector<int64_t> shape{1, 2, 2, 3};  // N, C, H, W
  ASSERT_EQ(channels_last_strides(shape), (std::vector<int64_t>{12, 1, 6, 2}));
  ProgramBuilder pb("layout");
  TensorRef x = pb.input("x", DType::kF32, shape, channels_last_strides(shape));
  Tensor y = pb.output("y", DType::kF32, shape);                                // contiguous
  Tensor z = pb.output("z", DType::kF32, shape, channels_last_strides(shape));  // channels-last
  Var n("n"), c("c"), h("h"), w("w");
  pb.kernel("k", {compute(y, over(y, {n, c, h, w}), x(n, c, h, w)),
                  compute(z, over(z, {n, c, h, w}), x(n, c, h, w) * 2.0)});
  verify(pb.program());
  // x's storage in memory order (N, H, W, C): value = 100 c + 10 h + w.
  std::vector<double> storage;
  for (int hh = 0; hh < 2; ++hh) {
    for (int ww = 0; ww < 3; ++ww) {
      for (int cc = 0; cc < 2; ++cc) storage.push_back(100 * cc + 10 * hh + ww);
    }
  }
  HostBuffers out = interpret(pb.program(), {{"x", storage}});
  EXPECT_EQ(out["y"], (std::vector<double>{0, 1, 2, 10, 11, 12, 100, 101, 102, 110, 111, 112}));
  std::vector<double> doubled;
  for (double v : storage) doubled.push_back(2 * v);
  EXPECT_EQ(out["z"], doubled);
}

}  // namespace
}  // namespace adjoint::ir
