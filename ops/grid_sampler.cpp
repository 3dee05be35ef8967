// grid_sampler_2d_backward and the forward grid_sampler_2d program, built from small helpers
// that mirror ATen's GridSampler.cuh one to one: the coordinate math (ops/grid_sampler_coords.h)
// returns a coordinate together with its derivative, and each interpolation mode describes one
// "tap" of its footprint (which input pixel, with what weight, and how the weight moves with the
// coordinate). The backward kernels are then the adjoint of "output = sum over taps of weight *
// input[tap]": a scatter_add into grad_input and a sum over channels and taps for grad_grid.
#include "ops/grid_sampler.h"
#include "ops/input_strides.h"
#include "ops/shape_checks.h"

#include <string>

#include "ir/builder.h"
#include "ir/error.h"
#include "ops/grid_sampler_attributes.h"
#include "ops/grid_sampler_coords.h"

namespace adjoint::ops {
namespace {

using ir::DType;
using ir::Expr;
using ir::Tensor;
using ir::TensorRef;
using ir::Var;

constexpr const char* kOpName = "grid_sampler_2d_backward";
/// Keys' cubic convolution parameter, as ATen's bicubic upsampling and grid_sample use it.
constexpr double kCubicA = -0.75;

std::string shape_text(const std::vector<int64_t>& shape) {
  return "[" + format_ints(shape) + "]";
}

/// The coordinate a grid value samples along an axis of `size` pixels. Bicubic interpolation
/// pads each of its taps instead of the sample point, so it only unnormalizes.
SourceCoordinate sample_coordinate(const GridSampler2dParams& p, const Expr& grid_value,
                                   int64_t size) {
  if (p.interpolation == GridSamplerInterpolation::kBicubic) {
    return unnormalize(grid_value, size, p.align_corners);
  }
  return source_index(grid_value, size, p.padding, p.align_corners);
}

// --- interpolation footprints -----------------------------------------------------------------

/// Keys' kernel for distances in [0, 1] and [1, 2] (ATen's cubic_convolution1/2), and their
/// derivatives with respect to the distance. Constant terms go through plus_constant so that
/// "- 5A" prints as "+ 3.75f".
Expr cubic_near(const Expr& x) {
  constexpr double A = kCubicA;
  return plus_constant((plus_constant((A + 2) * x, -(A + 3)) * x) * x, 1);
}
Expr cubic_far(const Expr& x) {
  constexpr double A = kCubicA;
  return plus_constant(plus_constant(plus_constant(A * x, -5 * A) * x, 8 * A) * x, -4 * A);
}
Expr cubic_near_slope(const Expr& x) {
  constexpr double A = kCubicA;
  return plus_constant(3 * (A + 2) * x, -2 * (A + 3)) * x;
}
Expr cubic_far_slope(const Expr& x) {
  constexpr double A = kCubicA;
  return plus_constant(plus_constant(3 * A * x, -10 * A) * x, 8 * A);
}

/// Picks one of four expressions by a tap offset in [0, 4).
Expr by_offset(const Expr& offset, Expr e0, Expr e1, Expr e2, Expr e3) {
  return ir::select(offset == 0, std::move(e0),
                    ir::select(offset == 1, std::move(e1),
                               ir::select(offset == 2, std::move(e2), std::move(e3))));
}

/// Bicubic: offset o in [0, 4) reads floor(coord) - 1 + o, padded, with Keys' weight at distance
/// t + 1, t, 1 - t, 2 - t where t = coord - floor(coord) (the weight forms are ATen's).
AxisTap cubic_tap(const GridSampler2dParams& p, const Expr& coord, const Expr& offset,
                  int64_t size) {
  Expr base = ir::floor(coord);
  Expr t = coord - base;
  Expr position = base + ir::cast(coord.dtype(), offset - 1);
  SourceCoordinate padded =
      apply_padding({position, constant_like(coord, 1)}, size, p.padding, p.align_corners);
  Expr weight = by_offset(offset, cubic_far(t + 1.0), cubic_near(t), cubic_near(1.0 - t),
                          cubic_far((1.0 - t) + 1.0));
  Expr slope = by_offset(offset, cubic_far_slope(t + 1.0), cubic_near_slope(t),
                         -cubic_near_slope(1.0 - t), -cubic_far_slope(2.0 - t));
  return {ir::cast(DType::kI64, padded.value), weight, slope};
}

/// One tap of the 2-D footprint: the product of an x tap and a y tap.
struct Tap {
  Expr x, y;
  Expr weight;
  Expr weight_grad_x, weight_grad_y;  ///< d weight / d source x and y
  Expr in_bounds;                     ///< undefined when the tap can never leave the input
};

int64_t taps_per_axis(GridSamplerInterpolation mode) {
  switch (mode) {
    case GridSamplerInterpolation::kBilinear:
      return 2;
    case GridSamplerInterpolation::kNearest:
      return 1;
    case GridSamplerInterpolation::kBicubic:
      return 4;
  }
  return 1;
}

/// Zeros padding leaves coordinates unclamped, and bilinear's second tap steps past the last
/// pixel when the coordinate sits on it; every other tap lands inside the input.
bool taps_may_leave_input(const GridSampler2dParams& p) {
  return p.padding == GridSamplerPadding::kZeros ||
         p.interpolation == GridSamplerInterpolation::kBilinear;
}

/// Tap number `tap` (x fastest) of the footprint at source point (ix, iy). Nearest has a single
/// tap and ignores `tap`.
Tap footprint_tap(const GridSampler2dParams& p, const Expr& ix, const Expr& iy, const Expr& tap) {
  AxisTap x, y;
  switch (p.interpolation) {
    case GridSamplerInterpolation::kNearest:
      x = nearest_tap(ix);
      y = nearest_tap(iy);
      break;
    case GridSamplerInterpolation::kBilinear:
      x = linear_tap(ix, tap % 2);
      y = linear_tap(iy, tap / 2);
      break;
    case GridSamplerInterpolation::kBicubic:
      x = cubic_tap(p, ix, tap % 4, p.input_width);
      y = cubic_tap(p, iy, tap / 4, p.input_height);
      break;
  }
  Tap t{x.index,
        y.index,
        times(x.weight, y.weight),
        times(x.weight_grad, y.weight),
        times(x.weight, y.weight_grad),
        Expr()};
  if (taps_may_leave_input(p)) {
    t.in_bounds =
        (y.index >= 0) && (y.index < p.input_height) && (x.index >= 0) && (x.index < p.input_width);
  }
  return t;
}

/// The loop over the footprint's taps: `tap` over all of them, or no loop for nearest.
std::vector<ir::Axis> footprint_axes(const GridSampler2dParams& p, const Var& tap) {
  int64_t per_axis = taps_per_axis(p.interpolation);
  if (per_axis == 1) return {};
  return {ir::range(tap, Expr(per_axis * per_axis))};
}

// --- programs ---------------------------------------------------------------------------------

/// What the kernels of one program share: the parameters, the sampled tensors, and the sample
/// coordinates that the first kernel computes once per grid point for every channel and tap.
struct Sampler {
  GridSampler2dParams p;
  DType compute = DType::kF32;  ///< coordinate math and accumulation
  Tensor input, grid;
  Tensor source;          ///< source_coordinate[n, h_out, w_out, axis]: pixel x (axis 0), y (1)
  Tensor source_grad;     ///< d source / d grid, when it depends on the point; else null
  Expr scale_x, scale_y;  ///< d source / d grid, when it is a constant
};

std::vector<int64_t> grad_output_shape(const GridSampler2dParams& p) {
  return {p.batch, p.channels, p.output_height, p.output_width};
}
std::vector<int64_t> input_shape(const GridSampler2dParams& p) {
  return {p.batch, p.channels, p.input_height, p.input_width};
}
std::vector<int64_t> grid_shape(const GridSampler2dParams& p) {
  return {p.batch, p.output_height, p.output_width, 2};
}

Sampler declare_sampler(ir::ProgramBuilder& b, const GridSampler2dParams& p) {
  Sampler s;
  s.p = p;
  s.compute = ir::default_accumulation(p.dtype);
  s.input = b.input("input", p.dtype, input_shape(p), p.input_strides);
  s.grid = b.input("grid", p.dtype, grid_shape(p), p.grid_strides);
  return s;
}

void describe(ir::ProgramBuilder& b, const GridSampler2dParams& p) {
  b.attribute("interpolation_mode", interpolation_name(p.interpolation));
  b.attribute("padding_mode", padding_name(p.padding));
  b.attribute("align_corners", p.align_corners ? "true" : "false");
}

/// Kernel `source_coordinates`: the pixel coordinate each grid value samples and, if
/// `with_grad` and it is not a constant, its derivative.
void add_source_kernel(ir::ProgramBuilder& b, Sampler& s, bool with_grad) {
  const GridSampler2dParams& p = s.p;
  Var n("n"), h("h_out"), w("w_out"), axis("axis");
  Expr grid_value = ir::cast(s.compute, TensorRef(s.grid)(n, h, w, axis));
  SourceCoordinate x = sample_coordinate(p, grid_value, p.input_width);
  SourceCoordinate y = sample_coordinate(p, grid_value, p.input_height);
  std::vector<int64_t> shape{p.batch, p.output_height, p.output_width, 2};
  s.source = b.temporary("source_coordinate", s.compute, shape);
  std::vector<ir::Axis> domain = ir::over(s.source, {n, h, w, axis});
  // Both axes share one formula when the input is square.
  bool square = p.input_width == p.input_height;
  auto per_axis = [&](const Expr& along_x, const Expr& along_y) {
    return square ? along_x : ir::select(axis == 0, along_x, along_y);
  };
  std::vector<ir::Stage> stages{ir::compute(s.source, domain, per_axis(x.value, y.value))};
  if (x.grad.as<ir::FloatConstNode>() && y.grad.as<ir::FloatConstNode>()) {
    s.scale_x = x.grad;
    s.scale_y = y.grad;
  } else if (with_grad) {
    s.source_grad = b.temporary("source_coordinate_grad", s.compute, shape);
    stages.push_back(ir::compute(s.source_grad, domain, per_axis(x.grad, y.grad)));
  }
  b.kernel("source_coordinates", std::move(stages));
}

/// The footprint tap `tap` of grid point (n, h, w), read from the source coordinates.
Tap sample_tap(const Sampler& s, const Var& n, const Var& h, const Var& w, const Var& tap) {
  TensorRef source(s.source);
  return footprint_tap(s.p, source(n, h, w, 0), source(n, h, w, 1), tap);
}

/// input[n, c, tap] in the compute dtype, 0 for a tap outside the input.
Expr tap_value(const Sampler& s, const Var& n, const Var& c, const Tap& t) {
  Expr v = ir::cast(s.compute, TensorRef(s.input)(n, c, t.y, t.x));
  return t.in_bounds.defined() ? ir::select(t.in_bounds, v, constant_like(v, 0)) : v;
}

/// d source / d grid along `axis`.
Expr source_scale(const Sampler& s, const Var& n, const Var& h, const Var& w, const Var& axis) {
  if (s.source_grad) return TensorRef(s.source_grad)(n, h, w, axis);
  if (s.scale_x.as<ir::FloatConstNode>()->value == s.scale_y.as<ir::FloatConstNode>()->value) {
    return s.scale_x;
  }
  return ir::select(axis == 0, s.scale_x, s.scale_y);
}

/// Kernel `grad_input`: every (grad_output element, tap) adds weight * grad_output to the
/// input pixel the tap read.
void add_grad_input_kernel(ir::ProgramBuilder& b, const Sampler& s, const Tensor& grad_output) {
  const GridSampler2dParams& p = s.p;
  Tensor grad_input =
      b.output("grad_input", p.dtype, {p.batch, p.channels, p.input_height, p.input_width});
  Var n("n"), c("c"), h("h_out"), w("w_out"), tap("tap");
  Tap t = sample_tap(s, n, h, w, tap);
  std::vector<ir::Axis> domain = ir::over(grad_output, {n, c, h, w});
  for (ir::Axis& a : footprint_axes(p, tap)) domain.push_back(std::move(a));
  Expr upstream = ir::cast(s.compute, TensorRef(grad_output)(n, c, h, w));
  b.kernel("grad_input", {ir::scatter_add(grad_input, {n, c, t.y, t.x}, times(t.weight, upstream),
                                          std::move(domain), s.compute, t.in_bounds)});
}

/// Kernel `grad_grid`: d loss / d grid[n, h, w, axis] = d source / d grid times the sum over
/// channels and taps of input[tap] * d weight / d source * grad_output. Nearest sampling is
/// piecewise constant in the grid, so its grid gradient is zero by definition (as in ATen).
void add_grad_grid_kernel(ir::ProgramBuilder& b, const Sampler& s, const Tensor& grad_output) {
  const GridSampler2dParams& p = s.p;
  Tensor grad_grid = b.output("grad_grid", p.dtype, {p.batch, p.output_height, p.output_width, 2});
  Var n("n"), h("h_out"), w("w_out"), axis("axis"), c("c"), tap("tap");
  std::vector<ir::Axis> domain = ir::over(grad_grid, {n, h, w, axis});
  if (p.interpolation == GridSamplerInterpolation::kNearest) {
    b.kernel("grad_grid", {ir::compute(grad_grid, domain, ir::constant(p.dtype, 0))});
    return;
  }
  Tap t = sample_tap(s, n, h, w, tap);
  Expr weight_grad = ir::select(axis == 0, t.weight_grad_x, t.weight_grad_y);
  Expr upstream = ir::cast(s.compute, TensorRef(grad_output)(n, c, h, w));
  std::vector<ir::Axis> channels_and_taps{ir::range(c, Expr(p.channels))};
  for (ir::Axis& a : footprint_axes(p, tap)) channels_and_taps.push_back(std::move(a));
  Expr d_source = ir::sum(std::move(channels_and_taps),
                          (tap_value(s, n, c, t) * weight_grad) * upstream, s.compute);
  Expr value = ir::cast(p.dtype, source_scale(s, n, h, w, axis) * d_source);
  b.kernel("grad_grid", {ir::compute(grad_grid, std::move(domain), value)});
}

ir::Program build_from_spec(const Specialization& spec) {
  return build_grid_sampler_2d_backward(grid_sampler_2d_params(spec));
}

OpDefinition grid_sampler_2d_backward_definition() {
  using K = AttrKind;
  OpDefinition op;
  op.name = kOpName;
  op.summary =
      "gradients of 2-D grid_sample w.r.t. input and grid, as aten::grid_sampler_2d_backward";
  op.attributes = {
      {"dtype", K::kDType, "f32", "dtype of every tensor", {"f16", "bf16", "f32", "f64"}},
      {"input_size", K::kIntList, std::nullopt, "N,C,H,W of input and grad_input; N and C may be 0, H and W not (as in ATen)", {}},
      {"output_size",
       K::kIntList,
       std::nullopt,
       "H_out,W_out: grid is N,H_out,W_out,2 and grad_output N,C,H_out,W_out; either may be 0",
       {}},
      {"interpolation_mode",
       K::kChoice,
       "bilinear",
       "how the input is sampled",
       {"bilinear", "nearest", "bicubic"}},
  };
  for (AttrSpec& a : grid_sampler_shared_attributes()) op.attributes.push_back(std::move(a));
  op.build = built_from_attributes(build_from_spec);
  op.examples = {
      "grid_sampler_2d_backward dtype=f32 input_size=1,2,5,7 output_size=4,3 "
      "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
      "grid_sampler_2d_backward dtype=bf16 input_size=2,3,6,1 output_size=5,4 "
      "interpolation_mode=bicubic padding_mode=reflection align_corners=true",
      "grid_sampler_2d_backward dtype=f16 input_size=2,4,9,11 output_size=3,13 "
      "interpolation_mode=nearest padding_mode=border output_mask=0,1",
      "grid_sampler_2d_backward dtype=f64 input_size=1,3,8,8 output_size=16,16 "
      "interpolation_mode=bilinear padding_mode=reflection align_corners=false",
      "grid_sampler_2d_backward dtype=f32 input_size=2,3,5,6 output_size=4,7 "
      "grad_output_strides=84,1,21,3 grid_strides=28,7,1,56",
      "grid_sampler_2d_backward dtype=f32 input_size=8,64,128,128 output_size=128,128 "
      "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
  };
  return op;
}

}  // namespace

std::vector<OpDefinition> grid_sampler_ops() {
  return {grid_sampler_2d_backward_definition()};
}

GridSampler2dParams grid_sampler_2d_params(const Specialization& spec) {
  GridSampler2dParams p;
  p.dtype = spec.get_dtype("dtype");
  std::vector<int64_t> in = read_grid_sampler_sizes(spec, "input_size", 4, "N,C,H,W", 2);
  std::vector<int64_t> out = read_grid_sampler_sizes(spec, "output_size", 2, "H_out,W_out", 2);
  p.batch = in[0];
  p.channels = in[1];
  p.input_height = in[2];
  p.input_width = in[3];
  p.output_height = out[0];
  p.output_width = out[1];
  p.interpolation = parse_interpolation(spec.get_choice("interpolation_mode"));
  p.padding = parse_padding(spec.get_choice("padding_mode"));
  p.align_corners = spec.get_bool("align_corners");
  p.compute_grad_input = read_grid_sampler_output_mask(spec);
  p.grad_output_strides = input_strides(spec, "grad_output", grad_output_shape(p), {});
  p.input_strides = input_strides(spec, "input", input_shape(p), {});
  p.grid_strides = input_strides(spec, "grid", grid_shape(p), {});
  return p;
}

GridSampler2dShapes grid_sampler_2d_shapes(const std::vector<int64_t>& grad_output_shape,
                                           const std::vector<int64_t>& input_shape,
                                           const std::vector<int64_t>& grid_shape) {
  auto fail = [](const std::string& what) {
    throw Error(std::string(kOpName) + ": " + what, ErrorCode::kInvalidArgument);
  };
  auto require_rank_4 = [&](const char* name, const std::vector<int64_t>& shape,
                            const char* layout) {
    if (shape.size() != 4) {
      fail(std::string("'") + name + "' must have rank 4 (" + layout + "), got shape " +
           shape_text(shape));
    }
  };
  require_rank_4("grad_output", grad_output_shape, "N, C, H_out, W_out");
  require_rank_4("input", input_shape, "N, C, H, W");
  require_rank_4("grid", grid_shape, "N, H_out, W_out, 2");
  if (grid_shape[3] != 2) {
    fail("'grid' must have last dimension 2 (x, y), got shape " + shape_text(grid_shape));
  }
  auto require_equal = [&](const char* what, const char* a, int64_t va, const char* b, int64_t vb) {
    if (va != vb) {
      fail(std::string(what) + " of '" + a + "' is " + std::to_string(va) + " but of '" + b +
           "' is " + std::to_string(vb) + " (grad_output " + shape_text(grad_output_shape) +
           ", input " + shape_text(input_shape) + ", grid " + shape_text(grid_shape) + ")");
    }
  };
  require_equal("the batch size N", "grid", grid_shape[0], "input", input_shape[0]);
  require_equal("the batch size N", "grad_output", grad_output_shape[0], "input", input_shape[0]);
  require_equal("the channel count C", "grad_output", grad_output_shape[1], "input",
                input_shape[1]);
  require_equal("H_out", "grad_output", grad_output_shape[2], "grid", grid_shape[1]);
  require_equal("W_out", "grad_output", grad_output_shape[3], "grid", grid_shape[2]);
  return {input_shape, {grid_shape[1], grid_shape[2]}};
}

ir::Program build_grid_sampler_2d_backward(const GridSampler2dParams& p) {
  ir::ProgramBuilder b(kOpName);
  describe(b, p);
  Tensor grad_output = b.input("grad_output", p.dtype, grad_output_shape(p), p.grad_output_strides);
  Sampler s = declare_sampler(b, p);
  bool nearest = p.interpolation == GridSamplerInterpolation::kNearest;
  if (p.compute_grad_input || !nearest) add_source_kernel(b, s, /*with_grad=*/!nearest);
  if (p.compute_grad_input) add_grad_input_kernel(b, s, grad_output);
  add_grad_grid_kernel(b, s, grad_output);
  return std::move(b).build();
}

ir::Program build_grid_sampler_2d_forward(const GridSampler2dParams& p) {
  ir::ProgramBuilder b("grid_sampler_2d");
  describe(b, p);
  Sampler s = declare_sampler(b, p);
  add_source_kernel(b, s, /*with_grad=*/false);
  Tensor output =
      b.output("output", p.dtype, {p.batch, p.channels, p.output_height, p.output_width});
  Var n("n"), c("c"), h("h_out"), w("w_out"), tap("tap");
  Tap t = sample_tap(s, n, h, w, tap);
  Expr sample = times(t.weight, tap_value(s, n, c, t));
  std::vector<ir::Axis> taps = footprint_axes(p, tap);
  Expr value = taps.empty() ? sample : ir::sum(std::move(taps), sample, s.compute);
  b.kernel("output",
           {ir::compute(output, ir::over(output, {n, c, h, w}), ir::cast(p.dtype, value))});
  return std::move(b).build();
}

}  // namespace adjoint::ops
