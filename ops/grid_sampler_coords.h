// The coordinate math that grid_sampler_2d_backward and grid_sampler_3d_backward share, built as
// IR: the sampling modes, a grid value's source coordinate in input pixels together with its
// derivative (ATen's unnormalize, clip_coordinates and reflect_coordinates with their "set_grad"
// multipliers), and the per-axis taps of nearest and linear interpolation.
//
// The operation order is ATen's CUDA one (aten/src/ATen/native/cuda/GridSampler.cuh), rounding
// for rounding, so that a grid value that lands exactly on a pixel centre, a pixel edge or a
// border falls on the same side as in ATen and takes the same one-sided derivative. ATen's
// unnormalize without align_corners is `((x + 1) * size - 1) / 2`, which nvcc (fmad on, its
// default) contracts into fma(x + 1, size, -1) / 2; the IR has no FMA and its float operations
// are never contracted, so unnormalize reproduces the single rounding of that FMA exactly with
// an error-free product (Veltkamp split, Dekker product) and an error-free sum.
//
// Expressions are in the dtype of the grid value they are given (the op's compute dtype: f32 for
// f16/bf16/f32 data, f64 for f64).
#pragma once

#include <cstdint>
#include <string>

#include "ir/expr.h"

namespace adjoint::ops {

enum class GridSamplerInterpolation { kBilinear, kNearest, kBicubic };
enum class GridSamplerPadding { kZeros, kBorder, kReflection };

/// The attribute spellings: "bilinear", "nearest", "bicubic"; "zeros", "border", "reflection".
const char* interpolation_name(GridSamplerInterpolation mode);
const char* padding_name(GridSamplerPadding padding);
/// The inverse of the names above; a name the registry admitted (anything else is bilinear /
/// zeros: the registry checks choices before a builder runs).
GridSamplerInterpolation parse_interpolation(const std::string& name);
GridSamplerPadding parse_padding(const std::string& name);

/// A coordinate in input pixels and its derivative with respect to the grid value it came from.
struct SourceCoordinate {
  ir::Expr value;
  ir::Expr grad;
};

/// The constant `v` in the dtype of `like`.
ir::Expr constant_like(const ir::Expr& like, double v);
/// x + v for a constant v, written as a subtraction when v < 0 and dropped when v == 0, so the
/// printed IR reads "x + 0.5f" rather than "x - -0.5f" (both are exact in IEEE arithmetic).
ir::Expr plus_constant(const ir::Expr& x, double v);
/// a * b, dropping a constant factor of 1 so that products of unit weights print plainly.
ir::Expr times(const ir::Expr& a, const ir::Expr& b);

/// t * size - 1 rounded once, as a fused multiply-add would, from operations that each round:
/// the product is made exact (Dekker) and then summed with -1 without losing a bit. Exact for
/// finite t whenever t * size >= 1/2; below that the last step could round twice, but only if
/// the product's error term is below the square of the dtype's epsilon, relative. Plain
/// t * size - 1 when the product is exact anyway (size a power of two).
ir::Expr fused_multiply_minus_one(const ir::Expr& t, int64_t size);

/// ATen's grid_sampler_unnormalize_set_grad: [-1, 1] -> input pixels. align_corners maps +-1
/// to the centres of the corner pixels ((x + 1) / 2 * (size - 1)), otherwise to the outer
/// edges of the image (fma(x + 1, size, -1) / 2).
SourceCoordinate unnormalize(const ir::Expr& x, int64_t size, bool align_corners);

/// ATen's clip_coordinates_set_grad: clamps to [0, size - 1]; the borders themselves count as
/// outside for the derivative (it is 0 there).
SourceCoordinate clip_to_border(const SourceCoordinate& c, int64_t size);

/// ATen's reflect_coordinates_set_grad: reflects into [twice_low / 2, twice_high / 2] (bounds
/// doubled so half pixels are integers); the derivative is +1 or -1 by the parity of the spans
/// crossed and the side the coordinate started on.
SourceCoordinate reflect(const SourceCoordinate& c, int64_t twice_low, int64_t twice_high);

/// ATen's compute_coordinates: zeros leaves the coordinate (out-of-range taps read 0), border
/// clamps, reflection mirrors then clamps.
SourceCoordinate apply_padding(const SourceCoordinate& c, int64_t size, GridSamplerPadding padding,
                               bool align_corners);

/// ATen's grid_sampler_compute_source_index_set_grad: unnormalize, then pad.
SourceCoordinate source_index(const ir::Expr& grid_value, int64_t size, GridSamplerPadding padding,
                              bool align_corners);

/// One tap of an interpolation footprint along one axis.
struct AxisTap {
  ir::Expr index;        ///< i64 input index (out of range only with zeros padding)
  ir::Expr weight;       ///< interpolation weight
  ir::Expr weight_grad;  ///< d weight / d source coordinate
};

/// Nearest: the closest pixel, ties to even (nearbyint), weight 1, no coordinate derivative.
AxisTap nearest_tap(const ir::Expr& coord);

/// Linear: offset 0 is floor(coord) with weight (floor + 1 - coord), offset 1 is floor + 1 with
/// weight (coord - floor).
AxisTap linear_tap(const ir::Expr& coord, const ir::Expr& offset);

}  // namespace adjoint::ops
