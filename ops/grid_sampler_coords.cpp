// The grid_sampler coordinate helpers: one IR expression per ATen formula, in ATen's order.
// The only departure from a literal transcription is unnormalize without align_corners, which
// spells out the single rounding of the FMA that ATen's CUDA build computes (see the header).
#include "ops/grid_sampler_coords.h"

#include <bit>
#include <cmath>

#include "ir/builder.h"

namespace adjoint::ops {

using ir::DType;
using ir::Expr;

const char* interpolation_name(GridSamplerInterpolation mode) {
  switch (mode) {
    case GridSamplerInterpolation::kBilinear:
      return "bilinear";
    case GridSamplerInterpolation::kNearest:
      return "nearest";
    case GridSamplerInterpolation::kBicubic:
      return "bicubic";
  }
  return "?";
}

const char* padding_name(GridSamplerPadding padding) {
  switch (padding) {
    case GridSamplerPadding::kZeros:
      return "zeros";
    case GridSamplerPadding::kBorder:
      return "border";
    case GridSamplerPadding::kReflection:
      return "reflection";
  }
  return "?";
}

GridSamplerInterpolation parse_interpolation(const std::string& name) {
  if (name == "nearest") return GridSamplerInterpolation::kNearest;
  if (name == "bicubic") return GridSamplerInterpolation::kBicubic;
  return GridSamplerInterpolation::kBilinear;
}

GridSamplerPadding parse_padding(const std::string& name) {
  if (name == "border") return GridSamplerPadding::kBorder;
  if (name == "reflection") return GridSamplerPadding::kReflection;
  return GridSamplerPadding::kZeros;
}

Expr constant_like(const Expr& like, double v) {
  return ir::constant(like.dtype(), v);
}

Expr plus_constant(const Expr& x, double v) {
  if (v == 0) return x;
  return v < 0 ? x - constant_like(x, -v) : x + constant_like(x, v);
}

Expr times(const Expr& a, const Expr& b) {
  auto is_one = [](const Expr& e) {
    auto* c = e.as<ir::FloatConstNode>();
    return c && c->value == 1.0;
  };
  if (is_one(a)) return b;
  if (is_one(b)) return a;
  return a * b;
}

namespace {

/// Significand bits of the dtype (f32 24, f64 53).
int precision_bits(DType t) {
  return t == DType::kF64 ? 53 : 24;
}

/// `size` as the dtype holds it (ATen converts the int to scalar_t; f32 rounds above 2^24).
int64_t size_in(DType t, int64_t size) {
  return t == DType::kF64 ? int64_t(double(size)) : int64_t(float(size));
}

/// The top `bits` significant bits of a positive integer (the rest is `value - result`).
int64_t leading_bits(int64_t value, int bits) {
  int width = std::bit_width(uint64_t(value));
  if (width <= bits) return value;
  int drop = width - bits;
  return (value >> drop) << drop;
}

}  // namespace

Expr fused_multiply_minus_one(const Expr& t, int64_t size) {
  DType dtype = t.dtype();
  int64_t s = size_in(dtype, size);
  if (std::has_single_bit(uint64_t(s))) return t * constant_like(t, double(s)) - 1.0;
  // Veltkamp split of t into hi + lo, each of at most half the significand; s split likewise
  // on the host. Every partial product is then exact, and Dekker's sum recovers the product's
  // rounding error `product_error` exactly: t * s == product + product_error.
  int half = (precision_bits(dtype) + 1) / 2;
  Expr scaled = t * constant_like(t, std::ldexp(1.0, half) + 1.0);
  Expr t_hi = scaled - (scaled - t);
  Expr t_lo = t - t_hi;
  int64_t s_hi = leading_bits(s, precision_bits(dtype) - half);
  int64_t s_lo = s - s_hi;
  Expr product = t * constant_like(t, double(s));
  Expr product_error = t_hi * constant_like(t, double(s_hi)) - product;
  if (s_lo != 0) product_error = product_error + t_hi * constant_like(t, double(s_lo));
  product_error = product_error + t_lo * constant_like(t, double(s_hi));
  if (s_lo != 0) product_error = product_error + t_lo * constant_like(t, double(s_lo));
  // Knuth's two-sum of product and -1: difference + difference_error == product - 1 exactly
  // (difference_error is 0 whenever product >= 1/2).
  Expr difference = product - 1.0;
  Expr moved = difference - product;
  Expr difference_error = (product - (difference - moved)) + (constant_like(t, -1) - moved);
  return difference + (difference_error + product_error);
}

SourceCoordinate unnormalize(const Expr& x, int64_t size, bool align_corners) {
  if (align_corners) {
    return {((x + 1.0) / 2.0) * constant_like(x, double(size - 1)),
            constant_like(x, double(size - 1) / 2.0)};
  }
  return {fused_multiply_minus_one(x + 1.0, size) / 2.0, constant_like(x, double(size) / 2.0)};
}

SourceCoordinate clip_to_border(const SourceCoordinate& c, int64_t size) {
  // Typed constants (not bare literals): c.value is itself a constant after a degenerate
  // reflection, and two literals would meet in f64.
  Expr zero = constant_like(c.value, 0), one = constant_like(c.value, 1);
  Expr upper = constant_like(c.value, double(size - 1));
  Expr inside = (c.value > zero) && (c.value < upper);
  return {ir::min(ir::max(c.value, zero), upper), c.grad * ir::select(inside, one, zero)};
}

SourceCoordinate reflect(const SourceCoordinate& c, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return {constant_like(c.value, 0), constant_like(c.value, 0)};
  double low = double(twice_low) / 2.0;
  Expr span = constant_like(c.value, double(twice_high - twice_low) / 2.0);
  Expr shifted = plus_constant(c.value, -low);
  Expr distance = ir::abs(shifted);
  Expr extra = distance % span;  // fmod: distance >= 0
  Expr flips = ir::floor(distance / span);
  Expr even = (flips % 2.0) == 0.0;
  Expr side = ir::select(shifted < 0.0, constant_like(c.value, -1), constant_like(c.value, 1));
  return {ir::select(even, plus_constant(extra, low), plus_constant(span - extra, low)),
          c.grad * ir::select(even, side, -side)};
}

SourceCoordinate apply_padding(const SourceCoordinate& c, int64_t size, GridSamplerPadding padding,
                               bool align_corners) {
  switch (padding) {
    case GridSamplerPadding::kZeros:
      return c;
    case GridSamplerPadding::kBorder:
      return clip_to_border(c, size);
    case GridSamplerPadding::kReflection:
      return clip_to_border(
          align_corners ? reflect(c, 0, 2 * (size - 1)) : reflect(c, -1, 2 * size - 1), size);
  }
  return c;
}

SourceCoordinate source_index(const Expr& grid_value, int64_t size, GridSamplerPadding padding,
                              bool align_corners) {
  return apply_padding(unnormalize(grid_value, size, align_corners), size, padding, align_corners);
}

AxisTap nearest_tap(const Expr& coord) {
  return {ir::cast(DType::kI64, ir::round_even(coord)), constant_like(coord, 1),
          constant_like(coord, 0)};
}

AxisTap linear_tap(const Expr& coord, const Expr& offset) {
  Expr base = ir::floor(coord);
  Expr is_low = offset == 0;
  return {ir::cast(DType::kI64, base) + offset,
          ir::select(is_low, (base + 1.0) - coord, coord - base),
          ir::select(is_low, constant_like(coord, -1), constant_like(coord, 1))};
}

}  // namespace adjoint::ops
