// Tests of the shared grid_sampler coordinate math (ops/grid_sampler_coords.h) through the IR
// interpreter: the FMA that unnormalize reproduces is bitwise std::fma for f32 and f64 on random
// values, on every pixel centre and edge of awkward sizes, and on sizes whose split needs both
// halves; and on those pixel centres it lands on the other side of the integer from the plain
// multiply-then-subtract often enough that the check means something.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/verifier.h"
#include "ops/grid_sampler_coords.h"

namespace adjoint {
namespace {

/// Runs unnormalize (align_corners false) of `grid_values` along an axis of `size` pixels in
/// `dtype`, through the interpreter.
std::vector<double> unnormalize_in_ir(ir::DType dtype, int64_t size,
                                      const std::vector<double>& grid_values) {
  ir::ProgramBuilder b("unnormalize");
  int64_t count = static_cast<int64_t>(grid_values.size());
  ir::Tensor grid = b.input("grid", dtype, {count});
  ir::Tensor pixel = b.output("pixel", dtype, {count});
  ir::Var i("i");
  ops::SourceCoordinate c = ops::unnormalize(ir::TensorRef(grid)(i), size, false);
  b.kernel("unnormalize", {ir::compute(pixel, ir::over(pixel, {i}), c.value)});
  ir::Program p = std::move(b).build();
  ir::verify(p);
  return ir::interpret(p, {{"grid", grid_values}}).at("pixel");
}

template <typename Scalar>
bool same_bits(Scalar a, Scalar b) {
  return std::memcmp(&a, &b, sizeof(Scalar)) == 0;
}

/// Grid values of every pixel centre and edge (and a few beyond) of an axis of `size` pixels,
/// computed as a user would in Scalar, plus random values in [-3, 3].
template <typename Scalar>
std::vector<Scalar> probe_values(int64_t size, std::mt19937_64& rng) {
  std::vector<Scalar> values = {-1, 1, 0, Scalar(-1.5), Scalar(2.75), Scalar(-7.25)};
  for (int64_t twice = -4; twice <= 2 * size + 4; ++twice) {
    values.push_back((Scalar(twice) + 1) / Scalar(size) - 1);
    values.push_back(Scalar(twice + 1) / Scalar(size) - Scalar(1));
  }
  std::uniform_real_distribution<double> uniform(-3, 3);
  for (int k = 0; k < 500; ++k) values.push_back(static_cast<Scalar>(uniform(rng)));
  return values;
}

/// Checks the IR against std::fma bitwise; returns how many values the plain, twice-rounded
/// formula would have put on the other side of an integer or half-integer pixel.
template <typename Scalar>
int expect_fma_bitwise(ir::DType dtype, int64_t size, std::mt19937_64& rng) {
  std::vector<Scalar> values = probe_values<Scalar>(size, rng);
  std::vector<double> as_double(values.begin(), values.end());
  std::vector<double> got = unnormalize_in_ir(dtype, size, as_double);
  int sides_differ = 0;
  for (size_t k = 0; k < values.size(); ++k) {
    Scalar t = values[k] + Scalar(1);
    Scalar want = std::fma(t, Scalar(size), Scalar(-1)) / Scalar(2);
    Scalar plain = (t * Scalar(size) - Scalar(1)) / Scalar(2);
    EXPECT_TRUE(same_bits(static_cast<Scalar>(got[k]), want))
        << "size " << size << " grid value " << values[k] << ": got " << got[k] << ", want "
        << want;
    sides_differ += std::floor(2 * want) != std::floor(2 * plain);
  }
  return sides_differ;
}

TEST(GridSamplerCoordinates, UnnormalizeIsTheFusedMultiplyAddBitwise) {
  std::mt19937_64 rng(5);
  int f32_sides = 0, f64_sides = 0;
  // Primes, the 2-d benchmark's 224, sizes whose split has a low half in f32 (> 2^12) and a
  // power of two (the plain product is exact there).
  for (int64_t size : {1, 3, 5, 7, 11, 13, 224, 1000, 4097, 5003, 65537, 256}) {
    f32_sides += expect_fma_bitwise<float>(ir::DType::kF32, size, rng);
    f64_sides += expect_fma_bitwise<double>(ir::DType::kF64, size, rng);
  }
  // The rounding that decides a pixel's side must actually be exercised by the values above.
  EXPECT_GT(f32_sides, 0);
  EXPECT_GT(f64_sides, 0);
}

TEST(GridSamplerCoordinates, PowerOfTwoSizesKeepThePlainFormula) {
  ir::Expr t = ir::constant(ir::DType::kF32, 0.25);
  ir::Expr plain = ops::fused_multiply_minus_one(t, 64);
  ir::Expr split = ops::fused_multiply_minus_one(t, 63);
  EXPECT_EQ(plain.as<ir::BinaryNode>()->op, ir::BinaryOp::kSub);
  EXPECT_EQ(split.as<ir::BinaryNode>()->op, ir::BinaryOp::kAdd);
}

TEST(GridSamplerCoordinates, ReflectionAndBorderFollowAten) {
  // W = 4 without align_corners reflects into [-0.5, 3.5], then clips to [0, 3]; the
  // derivative is the unnormalize scale times +-1, and 0 on and beyond the clip borders.
  auto run = [](ops::GridSamplerPadding padding, double x) {
    ir::ProgramBuilder b("pad");
    ir::Tensor grid = b.input("grid", ir::DType::kF64, {1});
    ir::Tensor out = b.output("out", ir::DType::kF64, {2});
    ir::Var i("i");
    ops::SourceCoordinate c = ops::source_index(ir::TensorRef(grid)(0), 4, padding, false);
    b.kernel("pad", {ir::compute(out, ir::over(out, {i}), ir::select(i == 0, c.value, c.grad))});
    std::vector<double> r = ir::interpret(std::move(b).build(), {{"grid", {x}}}).at("out");
    return std::pair<double, double>(r[0], r[1]);
  };
  using P = ops::GridSamplerPadding;
  EXPECT_EQ(run(P::kReflection, 1.375), (std::pair<double, double>(2.75, -2.0)));
  EXPECT_EQ(run(P::kReflection, -1.5), (std::pair<double, double>(0.5, -2.0)));
  EXPECT_EQ(run(P::kBorder, 1.25), (std::pair<double, double>(3.0, 0.0)));
  EXPECT_EQ(run(P::kBorder, 0.0), (std::pair<double, double>(1.5, 2.0)));
  EXPECT_EQ(run(P::kZeros, -3.0), (std::pair<double, double>(-4.5, 2.0)));
}

}  // namespace
}  // namespace adjoint
