// Plain-loop references of the upsample_nearest backward ops, written from PyTorch's definition
// without the IR or ops/upsample_nearest.h: for every grad_output element, find its source
// element in grad_input with PyTorch's f32 index formula and add it there, in double. Each sum
// is rounded once to the data type (as the interpreter does; a device summing in f32 may differ
// from it by the rounding of its f32 partial sums).
//
// Assumes a specialization that the op's builder accepted (the tests build the program first).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "ir/dtype.h"
#include "reference/families.h"
#include "reference/strided_inputs.h"

namespace adjoint::reference {
namespace {

/// The shapes, scales and layout of one call, read from the specialization's attributes.
struct Geometry {
  int spatial_rank = 0;
  bool exact = false;  // _upsample_nearest_exact*: floor((o + 0.5) * r) instead of floor(o * r)
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> input_shape;   // N, C, spatial of grad_input
  std::vector<int64_t> output_shape;  // N, C, spatial of grad_output
  std::vector<std::optional<double>> scales;
  bool channels_last = false;
};

Geometry read_geometry(const ops::Specialization& spec, int spatial_rank, bool exact) {
  Geometry g;
  g.spatial_rank = spatial_rank;
  g.exact = exact;
  g.dtype = spec.get_dtype("dtype");
  g.input_shape = spec.get_ints("input_size");
  g.output_shape = {g.input_shape[0], g.input_shape[1]};
  for (int64_t s : spec.get_ints("output_size")) g.output_shape.push_back(s);
  const char* names[3][3] = {{"scales"}, {"scales_h", "scales_w"},
                             {"scales_d", "scales_h", "scales_w"}};
  for (int axis = 0; axis < spatial_rank; ++axis) {
    g.scales.push_back(spec.get_optional_float(names[spatial_rank - 1][axis]));
  }
  g.channels_last = spec.get_choice("layout") == "channels_last";
  return g;
}

/// Element strides: row-major over (N, C, spatial...), or over (N, spatial..., C).
std::vector<int64_t> strides_of(const std::vector<int64_t>& shape, bool channels_last) {
  size_t rank = shape.size();
  std::vector<size_t> memory_order;  // dimensions from outermost to innermost in memory
  memory_order.push_back(0);
  if (channels_last) {
    for (size_t d = 2; d < rank; ++d) memory_order.push_back(d);
    memory_order.push_back(1);
  } else {
    for (size_t d = 1; d < rank; ++d) memory_order.push_back(d);
  }
  std::vector<int64_t> strides(rank);
  int64_t step = 1;
  for (size_t k = rank; k-- > 0;) {
    strides[memory_order[k]] = step;
    step *= std::max<int64_t>(shape[memory_order[k]], 1);
  }
  return strides;
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

/// PyTorch's source index of every output position along one axis (UpSample.cuh:
/// compute_scales_value<float> and nearest_neighbor[_exact]_compute_source_index), in f32.
std::vector<int64_t> source_indices(int64_t input_size, int64_t output_size,
                                    std::optional<double> scale, bool exact) {
  float ratio = (scale.has_value() && *scale > 0.0)
                    ? static_cast<float>(1.0 / *scale)
                    : static_cast<float>(input_size) / static_cast<float>(output_size);
  std::vector<int64_t> source(output_size);
  for (int64_t o = 0; o < output_size; ++o) {
    float position = exact ? (static_cast<float>(o) + 0.5f) * ratio : static_cast<float>(o) * ratio;
    source[o] = std::min(static_cast<int64_t>(std::floor(position)), input_size - 1);
  }
  return source;
}

ir::HostBuffers upsample_nearest_backward(const ops::Specialization& spec,
                                          const ir::HostBuffers& inputs, int spatial_rank,
                                          bool exact) {
  Geometry g = read_geometry(spec, spatial_rank, exact);
  size_t rank = g.input_shape.size();
  std::vector<int64_t> in_strides = strides_of(g.input_shape, g.channels_last);
  std::vector<int64_t> out_strides = strides_of(g.output_shape, g.channels_last);
  std::vector<std::vector<int64_t>> source(rank);
  for (int axis = 0; axis < spatial_rank; ++axis) {
    source[2 + axis] = source_indices(g.input_shape[2 + axis], g.output_shape[2 + axis],
                                      g.scales[axis], exact);
  }

  // A grad_output of given strides is read in row-major order (the layout's strides no longer
  // apply to it).
  ir::HostBuffers row_major = row_major_inputs(spec, inputs, {{"grad_output", g.output_shape}});
  if (!spec.get_ints("grad_output_strides").empty()) out_strides = strides_of(g.output_shape, false);
  const std::vector<double>& grad_output = row_major.at("grad_output");
  std::vector<double> grad_input(element_count(g.input_shape), 0.0);
  int64_t total = element_count(g.output_shape);
  std::vector<int64_t> index(rank, 0);  // position in grad_output, row-major over (N, C, ...)
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t from = 0, to = 0;
    for (size_t d = 0; d < rank; ++d) {
      int64_t target = d < 2 ? index[d] : source[d][index[d]];
      from += index[d] * out_strides[d];
      to += target * in_strides[d];
    }
    grad_input[to] += grad_output[from];
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < g.output_shape[d]) break;
      index[d] = 0;
    }
  }
  for (double& v : grad_input) v = ir::round_to(g.dtype, v);
  return {{"grad_input", std::move(grad_input)}};
}

ReferenceFn reference_for(int spatial_rank, bool exact) {
  return [spatial_rank, exact](const ops::Specialization& spec, const ir::HostBuffers& inputs) {
    return upsample_nearest_backward(spec, inputs, spatial_rank, exact);
  };
}

}  // namespace

std::vector<std::pair<std::string, ReferenceFn>> upsample_nearest_references() {
  std::vector<std::pair<std::string, ReferenceFn>> all;
  for (int rank = 1; rank <= 3; ++rank) {
    std::string dims = std::to_string(rank) + "d_backward";
    all.emplace_back("upsample_nearest" + dims, reference_for(rank, false));
    all.emplace_back("_upsample_nearest_exact" + dims, reference_for(rank, true));
  }
  return all;
}

}  // namespace adjoint::reference
