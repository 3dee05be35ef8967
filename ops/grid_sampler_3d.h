// grid_sampler_3d_backward with ATen semantics, and the forward grid_sampler_3d program that the
// tests differentiate by finite differences.
//
// The 3-d twin of ops/grid_sampler.h: a grid point (x, y, z) samples the input along W, H and D
// with the coordinate math of ops/grid_sampler_coords.h, by trilinear ("bilinear", as ATen
// calls it) or nearest interpolation; ATen has no 3-d bicubic and neither has this op (the
// registry refuses it). Programs have the same three kernels as the 2-d op:
//   source_coordinates  per grid point and axis: the coordinate in input pixels (and, where it
//                       depends on the point, d coordinate / d grid value);
//   grad_input          scatter_add of weight * grad_output into each of the 8 (trilinear) or 1
//                       (nearest) in-bounds taps, written as the adjoint of the forward's gather
//                       so that the compiler chooses how to combine colliding points; skipped
//                       when output_mask[0] is 0;
//   grad_grid           per grid point and axis: the chain rule summed over channels and taps
//                       (zero for nearest).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/program.h"
#include "ops/grid_sampler_coords.h"
#include "ops/registry.h"

namespace adjoint::ops {

/// Registers grid_sampler_3d_backward.
std::vector<OpDefinition> grid_sampler_3d_ops();

/// The validated parameters of one grid_sampler_3d specialization.
struct GridSampler3dParams {
  ir::DType dtype = ir::DType::kF32;  ///< of every tensor
  int64_t batch = 1;                  ///< N
  int64_t channels = 1;               ///< C
  int64_t input_depth = 1;            ///< D
  int64_t input_height = 1;           ///< H
  int64_t input_width = 1;            ///< W
  int64_t output_depth = 1;           ///< D_out (grid is N x D_out x H_out x W_out x 3)
  int64_t output_height = 1;          ///< H_out
  int64_t output_width = 1;           ///< W_out
  GridSamplerInterpolation interpolation = GridSamplerInterpolation::kBilinear;  ///< or nearest
  GridSamplerPadding padding = GridSamplerPadding::kZeros;
  bool align_corners = false;
  bool compute_grad_input = true;  ///< output_mask[0]
  /// Strides of the inputs (attributes <tensor>_strides, ops/input_strides.h); empty:
  /// contiguous. The outputs are always contiguous.
  std::vector<int64_t> grad_output_strides, input_strides, grid_strides;
};

/// Reads and checks the attributes of a grid_sampler_3d_backward specialization. Throws
/// adjoint::Error naming the attribute for a wrong number of sizes, a size < 1, or an
/// output_mask that is not two 0/1 values.
GridSampler3dParams grid_sampler_3d_params(const Specialization& spec);

/// The backward program: inputs grad_output (N, C, D_out, H_out, W_out), input (N, C, D, H, W),
/// grid (N, D_out, H_out, W_out, 3); outputs grad_input (unless !compute_grad_input) and
/// grad_grid, all of `params.dtype`.
ir::Program build_grid_sampler_3d_backward(const GridSampler3dParams& params);

/// The forward program (not a registered op; for gradient checks): inputs input, grid; output
/// `output` (N, C, D_out, H_out, W_out) = the input sampled at the grid points.
ir::Program build_grid_sampler_3d_forward(const GridSampler3dParams& params);

}  // namespace adjoint::ops
