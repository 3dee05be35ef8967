// The grid_sampler op family: grid_sampler_2d_backward with ATen semantics, and the forward
// grid_sampler_2d program that the tests differentiate by finite differences.
//
// A specialization fixes every shape and attribute, so the builders emit only the code paths
// of one interpolation and padding mode. Coordinate math runs in the accumulation type (f32 for
// f16/bf16/f32 data, f64 for f64): grid values are converted once, then unnormalized, clipped or
// reflected exactly as ATen's GridSampler.cuh does it (ops/grid_sampler_coords.h). Programs
// have three kernels:
//   source_coordinates  per grid point: the sampling coordinate in input pixels (and, where it
//                       depends on the point, d coordinate / d grid value), shared by every
//                       channel and tap;
//   grad_input          scatter_add of weight * grad_output into each in-bounds tap (skipped when
//                       output_mask[0] is 0);
//   grad_grid           per grid point and coordinate: the chain rule summed over channels and
//                       taps (zero for nearest, whose output is piecewise constant in the grid).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/program.h"
#include "ops/grid_sampler_coords.h"
#include "ops/registry.h"

namespace adjoint::ops {

/// Registers grid_sampler_2d_backward.
std::vector<OpDefinition> grid_sampler_ops();

/// The validated parameters of one grid_sampler_2d specialization.
struct GridSampler2dParams {
  ir::DType dtype = ir::DType::kF32;  ///< of every tensor
  int64_t batch = 1;                  ///< N
  int64_t channels = 1;               ///< C
  int64_t input_height = 1;           ///< H
  int64_t input_width = 1;            ///< W
  int64_t output_height = 1;          ///< H_out (grid is N x H_out x W_out x 2)
  int64_t output_width = 1;           ///< W_out
  GridSamplerInterpolation interpolation = GridSamplerInterpolation::kBilinear;
  GridSamplerPadding padding = GridSamplerPadding::kZeros;
  bool align_corners = false;
  bool compute_grad_input = true;  ///< output_mask[0]
  /// Strides of the inputs (attributes <tensor>_strides, ops/input_strides.h); empty:
  /// contiguous. The outputs are always contiguous.
  std::vector<int64_t> grad_output_strides, input_strides, grid_strides;
};

/// Reads and checks the attributes of a grid_sampler_2d_backward specialization. Throws
/// adjoint::Error naming the attribute for a wrong number of sizes, a size < 1, or an
/// output_mask that is not two 0/1 values.
GridSampler2dParams grid_sampler_2d_params(const Specialization& spec);

/// The `input_size` and `output_size` attributes that describe a call's tensors.
struct GridSampler2dShapes {
  std::vector<int64_t> input_size;   ///< N, C, H, W
  std::vector<int64_t> output_size;  ///< H_out, W_out
};

/// The attributes for tensors of these shapes (grad_output N,C,H_out,W_out; input N,C,H,W;
/// grid N,H_out,W_out,2), for typed entry points that take tensors. Throws adjoint::Error naming
/// the tensor for a wrong rank, a last grid dimension other than 2, or N, C or output sizes that
/// disagree between the tensors.
GridSampler2dShapes grid_sampler_2d_shapes(const std::vector<int64_t>& grad_output_shape,
                                           const std::vector<int64_t>& input_shape,
                                           const std::vector<int64_t>& grid_shape);

/// The backward program: inputs grad_output, input, grid; outputs grad_input (unless
/// !compute_grad_input) and grad_grid, all of `params.dtype`.
ir::Program build_grid_sampler_2d_backward(const GridSampler2dParams& params);

/// The forward program (not a registered op; for gradient checks): inputs input, grid; output
/// `output` (N, C, H_out, W_out) = the input sampled at the grid points.
ir::Program build_grid_sampler_2d_forward(const GridSampler2dParams& params);

}  // namespace adjoint::ops
