// ATen's grid_sampler coordinate helpers (aten/src/ATen/native/cuda/GridSampler.cuh) as plain
// C++ for the 2-d and 3-d references: each takes and returns `Scalar` (float for f16/bf16/f32
// data, double for f64), one IEEE operation at a time in the order ATen's CUDA build computes
// it, and reports d result / d argument through `grad`. Written without the IR, so that the IR
// checked against these means something.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

namespace adjoint::reference::grid_sampler {

/// [-1, 1] -> input pixels (grid_sampler_unnormalize_set_grad).
template <typename Scalar>
Scalar unnormalize(Scalar coord, int64_t size, bool align_corners, Scalar* grad) {
  if (align_corners) {
    *grad = static_cast<Scalar>(size - 1) / 2;
    return ((coord + 1) / 2) * static_cast<Scalar>(size - 1);
  }
  *grad = static_cast<Scalar>(size) / 2;
  // ATen writes ((coord + 1) * size - 1) / 2; its CUDA build (nvcc, fmad on) contracts the
  // multiply and subtract into one FMA, which decides the side of exact pixel centres.
  return std::fma(coord + 1, static_cast<Scalar>(size), Scalar(-1)) / 2;
}

/// Clamps to [0, size - 1]; the borders count as outside for the derivative.
template <typename Scalar>
Scalar clip(Scalar in, int64_t size, Scalar* grad) {
  Scalar upper = static_cast<Scalar>(size - 1);
  if (in <= 0) {
    *grad = 0;
    return 0;
  }
  if (in >= upper) {
    *grad = 0;
    return upper;
  }
  *grad = 1;
  return in;
}

/// Mirrors into [twice_low / 2, twice_high / 2].
template <typename Scalar>
Scalar reflect(Scalar in, int64_t twice_low, int64_t twice_high, Scalar* grad) {
  if (twice_low == twice_high) {
    *grad = 0;
    return 0;
  }
  Scalar low = static_cast<Scalar>(twice_low) / 2;
  Scalar span = static_cast<Scalar>(twice_high - twice_low) / 2;
  in = in - low;
  Scalar sign = 1;
  if (in < 0) {
    sign = -1;
    in = -in;
  }
  Scalar extra = std::fmod(in, span);
  Scalar flips = std::floor(in / span);
  if (std::fmod(flips, Scalar(2)) == 0) {
    *grad = sign;
    return extra + low;
  }
  *grad = -sign;
  return (span - extra) + low;
}

/// compute_coordinates: border clamps, reflection mirrors then clamps, zeros leaves as is.
template <typename Scalar>
Scalar pad(Scalar coord, int64_t size, const std::string& padding, bool align_corners,
           Scalar* grad) {
  Scalar clip_grad = 1, reflect_grad = 1;
  if (padding == "border") {
    coord = clip(coord, size, &clip_grad);
  } else if (padding == "reflection") {
    coord = align_corners ? reflect(coord, 0, 2 * (size - 1), &reflect_grad)
                          : reflect(coord, -1, 2 * size - 1, &reflect_grad);
    coord = clip(coord, size, &clip_grad);
  }
  *grad = reflect_grad * clip_grad;
  return coord;
}

/// grid_sampler_compute_source_index_set_grad: unnormalize, then pad.
template <typename Scalar>
Scalar source_index(Scalar coord, int64_t size, const std::string& padding, bool align_corners,
                    Scalar* grad) {
  Scalar unnormalize_grad = 0, pad_grad = 0;
  Scalar source = pad(unnormalize(coord, size, align_corners, &unnormalize_grad), size, padding,
                      align_corners, &pad_grad);
  *grad = unnormalize_grad * pad_grad;
  return source;
}

}  // namespace adjoint::reference::grid_sampler
