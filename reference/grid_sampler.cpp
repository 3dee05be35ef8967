// Plain-loop reference of grid_sampler_2d_backward (ATen semantics), written from the formulas
// of ATen's GridSampler.cuh without the IR, and the grid generator the tests and the demo use.
//
// Coordinate math runs in `Scalar` = float for f16/bf16/f32 data and double for f64, one IEEE
// operation at a time in the order ATen's CUDA build computes it (GridSampler.cuh, with the FMA
// nvcc contracts in unnormalize), so pixel choices at exact boundaries agree with the IR (whose
// f32 nodes round every result to f32). Each gradient term is formed in
// Scalar; sums over channels and taps are kept in double and rounded once to the output dtype.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reference/families.h"
#include "reference/grid_sampler_coords.h"
#include "reference/strided_inputs.h"

namespace adjoint::reference {
namespace {

/// The attributes of one specialization, read directly from its canonical values.
struct Problem {
  ir::DType dtype;
  int64_t N, C, H, W, H_out, W_out;
  std::string interpolation, padding;
  bool align_corners;
  bool grad_input_wanted;

  explicit Problem(const ops::Specialization& spec)
      : dtype(spec.get_dtype("dtype")),
        interpolation(spec.get_choice("interpolation_mode")),
        padding(spec.get_choice("padding_mode")),
        align_corners(spec.get_bool("align_corners")),
        grad_input_wanted(spec.get_ints("output_mask").at(0) == 1) {
    std::vector<int64_t> in = spec.get_ints("input_size");
    std::vector<int64_t> out = spec.get_ints("output_size");
    N = in.at(0), C = in.at(1), H = in.at(2), W = in.at(3);
    H_out = out.at(0), W_out = out.at(1);
  }
};

template <typename Scalar>
class GridSamplerBackward {
 public:
  GridSamplerBackward(const Problem& problem, const ir::HostBuffers& inputs)
      : P(problem),
        grad_output(inputs.at("grad_output")),
        input(inputs.at("input")),
        grid(inputs.at("grid")),
        grad_input(P.N * P.C * P.H * P.W, 0.0),
        grad_grid(P.N * P.H_out * P.W_out * 2, 0.0) {}

  ir::HostBuffers run() {
    for (int64_t n = 0; n < P.N; ++n) {
      for (int64_t h = 0; h < P.H_out; ++h) {
        for (int64_t w = 0; w < P.W_out; ++w) {
          int64_t g = ((n * P.H_out + h) * P.W_out + w) * 2;
          Scalar x = static_cast<Scalar>(grid[g]), y = static_cast<Scalar>(grid[g + 1]);
          if (P.interpolation == "bilinear") bilinear(n, h, w, x, y, g);
          if (P.interpolation == "nearest") nearest(n, h, w, x, y);
          if (P.interpolation == "bicubic") bicubic(n, h, w, x, y, g);
        }
      }
    }
    ir::HostBuffers out;
    if (P.grad_input_wanted) out["grad_input"] = rounded(grad_input);
    out["grad_grid"] = rounded(grad_grid);
    return out;
  }

 private:
  // --- ATen's coordinate helpers (reference/grid_sampler_coords.h) -------------------------
  Scalar unnormalize(Scalar coord, int64_t size, Scalar* grad) const {
    return grid_sampler::unnormalize(coord, size, P.align_corners, grad);
  }
  Scalar pad(Scalar coord, int64_t size, Scalar* grad) const {
    return grid_sampler::pad(coord, size, P.padding, P.align_corners, grad);
  }
  Scalar source_index(Scalar coord, int64_t size, Scalar* grad) const {
    return grid_sampler::source_index(coord, size, P.padding, P.align_corners, grad);
  }

  bool inside(int64_t y, int64_t x) const { return y >= 0 && y < P.H && x >= 0 && x < P.W; }
  int64_t input_at(int64_t n, int64_t c, int64_t y, int64_t x) const {
    return ((n * P.C + c) * P.H + y) * P.W + x;
  }
  Scalar upstream(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return static_cast<Scalar>(grad_output[((n * P.C + c) * P.H_out + h) * P.W_out + w]);
  }

  // --- the three interpolation modes --------------------------------------------------------
  void bilinear(int64_t n, int64_t h, int64_t w, Scalar x, Scalar y, int64_t g) {
    Scalar x_scale, y_scale;
    Scalar ix = source_index(x, P.W, &x_scale);
    Scalar iy = source_index(y, P.H, &y_scale);
    Scalar x0 = std::floor(ix), y0 = std::floor(iy);
    // Weights of the low (0) and high (1) neighbor along each axis.
    Scalar wx[2] = {(x0 + 1) - ix, ix - x0};
    Scalar wy[2] = {(y0 + 1) - iy, iy - y0};
    const Scalar slope[2] = {-1, 1};
    double gx = 0, gy = 0;
    for (int64_t c = 0; c < P.C; ++c) {
      Scalar up = upstream(n, c, h, w);
      for (int dy = 0; dy < 2; ++dy) {
        for (int dx = 0; dx < 2; ++dx) {
          int64_t px = static_cast<int64_t>(x0) + dx, py = static_cast<int64_t>(y0) + dy;
          if (!inside(py, px)) continue;
          grad_input[input_at(n, c, py, px)] += (wx[dx] * wy[dy]) * up;
          Scalar value = static_cast<Scalar>(input[input_at(n, c, py, px)]);
          gx += (value * (slope[dx] * wy[dy])) * up;
          gy += (value * (wx[dx] * slope[dy])) * up;
        }
      }
    }
    grad_grid[g] = x_scale * static_cast<Scalar>(gx);
    grad_grid[g + 1] = y_scale * static_cast<Scalar>(gy);
  }

  void nearest(int64_t n, int64_t h, int64_t w, Scalar x, Scalar y) {
    Scalar unused;
    // nearbyint in the default rounding mode: ties go to the even neighbor.
    int64_t px = static_cast<int64_t>(std::nearbyint(source_index(x, P.W, &unused)));
    int64_t py = static_cast<int64_t>(std::nearbyint(source_index(y, P.H, &unused)));
    if (!inside(py, px)) return;
    for (int64_t c = 0; c < P.C; ++c) grad_input[input_at(n, c, py, px)] += upstream(n, c, h, w);
    // grad_grid stays 0: nearest sampling is piecewise constant in the grid.
  }

  /// Keys' cubic convolution with A = -0.75: weights of the four taps at floor - 1 .. floor + 2
  /// for fraction t, and their derivatives d weight / d t.
  static void cubic_weights(Scalar t, Scalar weight[4], Scalar slope[4]) {
    const Scalar A = Scalar(-0.75);
    auto near = [&](Scalar d) { return (((A + 2) * d - (A + 3)) * d) * d + 1; };
    auto far = [&](Scalar d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };
    auto near_slope = [&](Scalar d) { return (3 * (A + 2) * d - 2 * (A + 3)) * d; };
    auto far_slope = [&](Scalar d) { return (3 * A * d - 10 * A) * d + 8 * A; };
    weight[0] = far(t + 1);
    weight[1] = near(t);
    weight[2] = near(1 - t);
    weight[3] = far((1 - t) + 1);
    slope[0] = far_slope(t + 1);
    slope[1] = near_slope(t);
    slope[2] = -near_slope(1 - t);
    slope[3] = -far_slope(2 - t);
  }

  void bicubic(int64_t n, int64_t h, int64_t w, Scalar x, Scalar y, int64_t g) {
    Scalar x_scale, y_scale, unused;
    Scalar ix = unnormalize(x, P.W, &x_scale);
    Scalar iy = unnormalize(y, P.H, &y_scale);
    Scalar x0 = std::floor(ix), y0 = std::floor(iy);
    Scalar wx[4], wy[4], sx[4], sy[4];
    cubic_weights(ix - x0, wx, sx);
    cubic_weights(iy - y0, wy, sy);
    double gx = 0, gy = 0;
    for (int64_t c = 0; c < P.C; ++c) {
      Scalar up = upstream(n, c, h, w);
      for (int j = 0; j < 4; ++j) {
        for (int i = 0; i < 4; ++i) {
          // Each tap is padded on its own (ATen's get_value_bounded / add_value_bounded).
          int64_t px = static_cast<int64_t>(pad(x0 + Scalar(i - 1), P.W, &unused));
          int64_t py = static_cast<int64_t>(pad(y0 + Scalar(j - 1), P.H, &unused));
          if (!inside(py, px)) continue;
          grad_input[input_at(n, c, py, px)] += (wx[i] * wy[j]) * up;
          Scalar value = static_cast<Scalar>(input[input_at(n, c, py, px)]);
          gx += (value * (sx[i] * wy[j])) * up;
          gy += (value * (wx[i] * sy[j])) * up;
        }
      }
    }
    grad_grid[g] = x_scale * static_cast<Scalar>(gx);
    grad_grid[g + 1] = y_scale * static_cast<Scalar>(gy);
  }

  std::vector<double> rounded(std::vector<double> values) const {
    for (double& v : values) v = ir::round_to(P.dtype, v);
    return values;
  }

  const Problem& P;
  const std::vector<double>& grad_output;
  const std::vector<double>& input;
  const std::vector<double>& grid;
  std::vector<double> grad_input;
  std::vector<double> grad_grid;
};

ir::HostBuffers grid_sampler_2d_backward(const ops::Specialization& spec,
                                         const ir::HostBuffers& inputs) {
  Problem problem(spec);
  const int64_t n = problem.N, c = problem.C;
  ir::HostBuffers row_major =
      row_major_inputs(spec, inputs,
                       {{"grad_output", {n, c, problem.H_out, problem.W_out}},
                        {"input", {n, c, problem.H, problem.W}},
                        {"grid", {n, problem.H_out, problem.W_out, 2}}});
  if (problem.dtype == ir::DType::kF64) {
    return GridSamplerBackward<double>(problem, row_major).run();
  }
  return GridSamplerBackward<float>(problem, row_major).run();
}

/// Grid values that land exactly on something: the image edges and center, and the values
/// whose pixel coordinate along an axis of `size` pixels is an integer or a half.
std::vector<double> special_grid_values(int64_t size, bool align_corners) {
  // Also values well outside [-1, 1], where reflection crosses several spans.
  std::vector<double> values = {-1.0, 0.0, 1.0, -0.5, 0.5, -1.25, 1.25, -2.5, 3.0, -7.0, 11.0};
  for (int64_t twice = -2; twice <= 2 * size; ++twice) {
    double pixel = twice / 2.0;  // the pixel coordinate wanted
    if (align_corners && size > 1) values.push_back(2.0 * pixel / double(size - 1) - 1.0);
    if (!align_corners) values.push_back((2.0 * pixel + 1.0) / double(size) - 1.0);
  }
  return values;
}

}  // namespace

std::vector<std::pair<std::string, ReferenceFn>> grid_sampler_references() {
  return {{"grid_sampler_2d_backward", grid_sampler_2d_backward},
          {"grid_sampler_3d_backward", grid_sampler_3d_backward}};
}

void adjust_grid_sampler_inputs(const ops::Specialization& spec, const ir::Program& program,
                                ir::HostBuffers& inputs, std::mt19937_64& rng) {
  ir::Tensor grid = program.find_tensor("grid");
  ir::Tensor input = program.find_tensor("input");
  if (!grid || !input || !inputs.count("grid")) return;
  bool align_corners = spec.get_bool("align_corners");
  // Grid axis a (x, y, z) samples input dimension rank - 1 - a (W, H, D).
  size_t axes = static_cast<size_t>(grid->shape.back());
  std::vector<std::vector<double>> special;
  for (size_t a = 0; a < axes; ++a) {
    special.push_back(
        special_grid_values(input->shape[input->shape.size() - 1 - a], align_corners));
  }
  std::uniform_real_distribution<double> uniform(-1.3, 1.3);
  std::bernoulli_distribution pick_special(0.4);
  std::vector<double>& values = inputs["grid"];
  for (size_t i = 0; i < values.size(); ++i) {
    const std::vector<double>& choices = special[i % axes];
    double v = uniform(rng);
    if (pick_special(rng)) {
      v = choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)];
    }
    values[i] = ir::round_to(grid->dtype, v);
  }
}

}  // namespace adjoint::reference
