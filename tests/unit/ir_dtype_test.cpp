// Dtype conversion tests: f16 and bf16 round to nearest, ties to even, bit for bit as the
// device's __float2half_rn / __float2bfloat16_rn; overflow to infinity, subnormals, signed
// zeros, infinities and NaNs; round_to() on doubles rounds once (no double rounding through
// f32); integer and bool conversions; names and sizes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "ir/dtype.h"

namespace adjoint::ir {
namespace {

const float kInf = std::numeric_limits<float>::infinity();
float pow2(int e) {
  return std::ldexp(1.0f, e);
}

TEST(IrDType, HalfRoundsToNearestEven) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(1.0f + pow2(-10)), 0x3c01);              // exactly one ulp
  EXPECT_EQ(float_to_half_bits(1.0f + pow2(-11)), 0x3c00);              // tie, 1.0 is even
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * pow2(-11)), 0x3c02);          // tie, up to even
  EXPECT_EQ(float_to_half_bits(1.0f + pow2(-11) + pow2(-20)), 0x3c01);  // above the tie
  EXPECT_EQ(float_to_half_bits(1.0f + pow2(-11) - pow2(-20)), 0x3c00);  // below the tie
  EXPECT_EQ(float_to_half_bits(2.0f - pow2(-12)), 0x4000);  // rounds up into the next binade
  EXPECT_EQ(float_to_half_bits(0.1f), 0x2e66);
}

TEST(IrDType, HalfOverflowSubnormalsZerosInfAndNan) {
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);  // largest finite
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7bff);  // below the midpoint to 65536
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);  // the midpoint: ties to "even" infinity
  EXPECT_EQ(float_to_half_bits(-1e6f), 0xfc00);
  EXPECT_EQ(float_to_half_bits(kInf), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-kInf), 0xfc00);
  uint16_t nan = float_to_half_bits(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_NE(float_to_half_bits(std::bit_cast<float>(0x7f800001u)) & 0x03ff, 0);  // stays NaN
  EXPECT_TRUE(std::isnan(half_bits_to_float(0x7c01)));
  EXPECT_EQ(half_bits_to_float(0x7c00), kInf);

  EXPECT_EQ(float_to_half_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(pow2(-14)), 0x0400);              // smallest normal
  EXPECT_EQ(float_to_half_bits(pow2(-24)), 0x0001);              // smallest subnormal
  EXPECT_EQ(float_to_half_bits(pow2(-25)), 0x0000);              // tie between 0 and 2^-24: 0
  EXPECT_EQ(float_to_half_bits(3 * pow2(-26)), 0x0001);          // 0.75 ulp: up
  EXPECT_EQ(float_to_half_bits(3 * pow2(-25)), 0x0002);          // 1.5 ulp: tie, up to even 2
  EXPECT_EQ(float_to_half_bits(-5 * pow2(-25)), 0x8002);         // -2.5 ulp: tie, down to even 2
  EXPECT_EQ(float_to_half_bits(pow2(-14) - pow2(-26)), 0x0400);  // rounds up to the normal
  EXPECT_EQ(float_to_half_bits(1e-10f), 0x0000);
  EXPECT_EQ(half_bits_to_float(0x0001), pow2(-24));
  EXPECT_EQ(half_bits_to_float(0x03ff), 1023 * pow2(-24));
  EXPECT_EQ(half_bits_to_float(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(half_bits_to_float(0x8000)));

  // Every finite half survives the round trip.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;
    ASSERT_EQ(float_to_half_bits(half_bits_to_float(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(IrDType, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + pow2(-7)), 0x3f81);
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + pow2(-8)), 0x3f80);              // tie: even
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + 3 * pow2(-8)), 0x3f82);          // tie: even
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + pow2(-8) + pow2(-20)), 0x3f81);  // above the tie
  EXPECT_EQ(float_to_bfloat16_bits(-3.0f), 0xc040);
  // Largest finite bf16 and the overflow boundary.
  EXPECT_EQ(bfloat16_bits_to_float(0x7f7f), std::bit_cast<float>(0x7f7f0000u));
  EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(0x7f7f8000u)), 0x7f80);  // tie: inf
  EXPECT_EQ(float_to_bfloat16_bits(std::numeric_limits<float>::max()), 0x7f80);
  // Every NaN, quiet or signalling, of either sign and any payload, is the quiet NaN 0x7fff
  // (what the GPU's cvt.rn.bf16.f32 gives); round_to keeps it a NaN.
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff812345u, 0x7fffffffu,
                       0xffffffffu, 0x7fbfffffu}) {
    EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(nan)), 0x7fff) << std::hex << nan;
  }
  EXPECT_TRUE(std::isnan(round_to(DType::kBF16, std::numeric_limits<double>::quiet_NaN())));
  EXPECT_EQ(float_to_bfloat16_bits(-kInf), 0xff80);
  // NaN stays NaN (a signaling NaN's payload would otherwise round to infinity).
  uint16_t nan = float_to_bfloat16_bits(std::bit_cast<float>(0x7f800001u));
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_TRUE(std::isnan(bfloat16_bits_to_float(0x7fc0)));
  // Subnormals (bf16 shares f32's exponent range).
  EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(0x00010000u)), 0x0001);
  EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(0x00008000u)), 0x0000);  // tie: even
  EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(0x00018000u)), 0x0002);  // tie: even
  EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(0x00000001u)), 0x0000);
  EXPECT_EQ(float_to_bfloat16_bits(-0.0f), 0x8000);
}

TEST(IrDType, RoundToRoundsDoublesOnce) {
  const double one_ulp_half = std::ldexp(1.0, -10), one_ulp_bf16 = std::ldexp(1.0, -7);
  // Just above a tie: correct rounding goes up; rounding to f32 first would land on the tie.
  EXPECT_EQ(round_to(DType::kF16, 1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)),
            1 + one_ulp_half);
  EXPECT_EQ(round_to(DType::kF16, -(1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40))),
            -(1 + one_ulp_half));
  EXPECT_EQ(round_to(DType::kF16, 1 + std::ldexp(1.0, -11)), 1.0);  // exact tie: even
  EXPECT_EQ(round_to(DType::kF16, 1 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40)), 1.0);
  EXPECT_EQ(round_to(DType::kBF16, 1 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)),
            1 + one_ulp_bf16);
  EXPECT_EQ(round_to(DType::kBF16, 1 + std::ldexp(1.0, -8)), 1.0);
  EXPECT_EQ(round_to(DType::kF16, 65519.99), 65504.0);
  EXPECT_EQ(round_to(DType::kF16, 65520.0), std::numeric_limits<double>::infinity());
  EXPECT_EQ(round_to(DType::kF16, 1e300), std::numeric_limits<double>::infinity());
  EXPECT_EQ(round_to(DType::kBF16, -1e300), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(round_to(DType::kF16, 1e-300), 0.0);
  EXPECT_EQ(round_to(DType::kF16, std::ldexp(1.0, -25) + std::ldexp(1.0, -60)),
            std::ldexp(1.0, -24));  // above the subnormal tie
  EXPECT_TRUE(std::isnan(round_to(DType::kF16, std::nan(""))));
  EXPECT_TRUE(std::isnan(round_to(DType::kBF16, std::nan(""))));
  EXPECT_EQ(round_to(DType::kF32, 1 + std::ldexp(1.0, -24) + std::ldexp(1.0, -40)),
            1 + std::ldexp(1.0, -23));
  EXPECT_EQ(round_to(DType::kF64, 0.1), 0.1);

  EXPECT_EQ(round_to(DType::kI32, -2.7), -2);
  EXPECT_EQ(round_to(DType::kI32, 3e9), 2147483647);
  EXPECT_EQ(round_to(DType::kI32, -3e9), -2147483648.0);
  EXPECT_EQ(round_to(DType::kI32, std::nan("")), 0);
  EXPECT_EQ(round_to(DType::kI64, -2.5), -2);
  EXPECT_EQ(round_to(DType::kBool, 0.25), 1);
  EXPECT_EQ(round_to(DType::kBool, 0.0), 0);
}

TEST(IrDType, NamesSizesAndAccumulation) {
  for (DType t : {DType::kF16, DType::kBF16, DType::kF32, DType::kF64, DType::kI32, DType::kI64,
                  DType::kBool}) {
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_EQ(parse_dtype("half"), DType::kF16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("double"), DType::kF64);
  EXPECT_FALSE(parse_dtype("f8").has_value());
  EXPECT_EQ(dtype_bytes(DType::kBF16), 2);
  EXPECT_EQ(dtype_bytes(DType::kI64), 8);
  EXPECT_EQ(cuda_type_name(DType::kBF16), "__nv_bfloat16");
  EXPECT_EQ(default_accumulation(DType::kF16), DType::kF32);
  EXPECT_EQ(default_accumulation(DType::kF64), DType::kF64);
  EXPECT_TRUE(is_float(DType::kBF16));
  EXPECT_FALSE(is_integer(DType::kBool));
}

}  // namespace
}  // namespace adjoint::ir
