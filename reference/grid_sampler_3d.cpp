// Plain-loop reference of grid_sampler_3d_backward (ATen semantics), written from ATen's CUDA
// grid_sampler_3d_backward_kernel without the IR: per grid point, the three source coordinates
// (reference/grid_sampler_coords.h), then trilinear over the 8 corners or nearest (nearbyint,
// ties to even). Coordinates and each gradient term are in `Scalar` (float for f16/bf16/f32,
// double for f64); sums over channels and corners are kept in double and rounded once.
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/families.h"
#include "reference/grid_sampler_coords.h"
#include "reference/strided_inputs.h"

namespace adjoint::reference {
namespace {

struct Problem3d {
  ir::DType dtype;
  int64_t N, C, D, H, W, D_out, H_out, W_out;
  std::string interpolation, padding;
  bool align_corners;
  bool grad_input_wanted;

  explicit Problem3d(const ops::Specialization& spec)
      : dtype(spec.get_dtype("dtype")),
        interpolation(spec.get_choice("interpolation_mode")),
        padding(spec.get_choice("padding_mode")),
        align_corners(spec.get_bool("align_corners")),
        grad_input_wanted(spec.get_ints("output_mask").at(0) == 1) {
    std::vector<int64_t> in = spec.get_ints("input_size");
    std::vector<int64_t> out = spec.get_ints("output_size");
    N = in.at(0), C = in.at(1), D = in.at(2), H = in.at(3), W = in.at(4);
    D_out = out.at(0), H_out = out.at(1), W_out = out.at(2);
  }
};

template <typename Scalar>
class GridSampler3dBackward {
 public:
  GridSampler3dBackward(const Problem3d& problem, const ir::HostBuffers& inputs)
      : P(problem),
        grad_output(inputs.at("grad_output")),
        input(inputs.at("input")),
        grid(inputs.at("grid")),
        grad_input(P.N * P.C * P.D * P.H * P.W, 0.0),
        grad_grid(P.N * P.D_out * P.H_out * P.W_out * 3, 0.0) {}

  ir::HostBuffers run() {
    int64_t point = 0;
    for (int64_t n = 0; n < P.N; ++n) {
      for (int64_t d = 0; d < P.D_out; ++d) {
        for (int64_t h = 0; h < P.H_out; ++h) {
          for (int64_t w = 0; w < P.W_out; ++w, ++point) {
            // Coordinate a (x, y, z) samples W, H, D.
            const int64_t sizes[3] = {P.W, P.H, P.D};
            Scalar source[3], scale[3];
            for (int a = 0; a < 3; ++a) {
              source[a] =
                  grid_sampler::source_index(static_cast<Scalar>(grid[point * 3 + a]), sizes[a],
                                             P.padding, P.align_corners, &scale[a]);
            }
            int64_t out_offset = ((n * P.C) * P.D_out + d) * P.H_out * P.W_out + h * P.W_out + w;
            int64_t channel_stride = P.D_out * P.H_out * P.W_out;
            if (P.interpolation == "nearest") {
              nearest(n, source, out_offset, channel_stride);
            } else {
              trilinear(n, source, scale, out_offset, channel_stride, point);
            }
          }
        }
      }
    }
    ir::HostBuffers out;
    if (P.grad_input_wanted) out["grad_input"] = rounded(grad_input);
    out["grad_grid"] = rounded(grad_grid);
    return out;
  }

 private:
  bool inside(int64_t z, int64_t y, int64_t x) const {
    return z >= 0 && z < P.D && y >= 0 && y < P.H && x >= 0 && x < P.W;
  }
  int64_t input_at(int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) const {
    return (((n * P.C + c) * P.D + z) * P.H + y) * P.W + x;
  }

  void trilinear(int64_t n, const Scalar source[3], const Scalar scale[3], int64_t out_offset,
                 int64_t channel_stride, int64_t point) {
    // Per axis: the low corner, the weights of the low (0) and high (1) corner, and their
    // derivatives -1 and +1.
    Scalar low[3], weight[3][2];
    for (int a = 0; a < 3; ++a) {
      low[a] = std::floor(source[a]);
      weight[a][0] = (low[a] + 1) - source[a];
      weight[a][1] = source[a] - low[a];
    }
    const Scalar slope[2] = {-1, 1};
    double g[3] = {0, 0, 0};
    for (int64_t c = 0; c < P.C; ++c) {
      Scalar up = static_cast<Scalar>(grad_output[out_offset + c * channel_stride]);
      for (int dz = 0; dz < 2; ++dz) {
        for (int dy = 0; dy < 2; ++dy) {
          for (int dx = 0; dx < 2; ++dx) {
            int64_t x = static_cast<int64_t>(low[0]) + dx;
            int64_t y = static_cast<int64_t>(low[1]) + dy;
            int64_t z = static_cast<int64_t>(low[2]) + dz;
            if (!inside(z, y, x)) continue;
            Scalar wx = weight[0][dx], wy = weight[1][dy], wz = weight[2][dz];
            grad_input[input_at(n, c, z, y, x)] += ((wx * wy) * wz) * up;
            Scalar value = static_cast<Scalar>(input[input_at(n, c, z, y, x)]);
            g[0] += (value * ((slope[dx] * wy) * wz)) * up;
            g[1] += (value * ((wx * slope[dy]) * wz)) * up;
            g[2] += (value * ((wx * wy) * slope[dz])) * up;
          }
        }
      }
    }
    for (int a = 0; a < 3; ++a) grad_grid[point * 3 + a] = scale[a] * static_cast<Scalar>(g[a]);
  }

  void nearest(int64_t n, const Scalar source[3], int64_t out_offset, int64_t channel_stride) {
    // nearbyint in the default rounding mode: ties go to the even neighbour.
    int64_t x = static_cast<int64_t>(std::nearbyint(source[0]));
    int64_t y = static_cast<int64_t>(std::nearbyint(source[1]));
    int64_t z = static_cast<int64_t>(std::nearbyint(source[2]));
    if (!inside(z, y, x)) return;
    for (int64_t c = 0; c < P.C; ++c) {
      grad_input[input_at(n, c, z, y, x)] += grad_output[out_offset + c * channel_stride];
    }
    // grad_grid stays 0: nearest sampling is piecewise constant in the grid.
  }

  std::vector<double> rounded(std::vector<double> values) const {
    for (double& v : values) v = ir::round_to(P.dtype, v);
    return values;
  }

  const Problem3d& P;
  const std::vector<double>& grad_output;
  const std::vector<double>& input;
  const std::vector<double>& grid;
  std::vector<double> grad_input;
  std::vector<double> grad_grid;
};

}  // namespace

ir::HostBuffers grid_sampler_3d_backward(const ops::Specialization& spec,
                                         const ir::HostBuffers& inputs) {
  Problem3d problem(spec);
  const int64_t n = problem.N, c = problem.C;
  ir::HostBuffers row_major = row_major_inputs(
      spec, inputs,
      {{"grad_output", {n, c, problem.D_out, problem.H_out, problem.W_out}},
       {"input", {n, c, problem.D, problem.H, problem.W}},
       {"grid", {n, problem.D_out, problem.H_out, problem.W_out, 3}}});
  if (problem.dtype == ir::DType::kF64) {
    return GridSampler3dBackward<double>(problem, row_major).run();
  }
  return GridSampler3dBackward<float>(problem, row_major).run();
}

}  // namespace adjoint::reference
