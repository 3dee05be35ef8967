// grid_sampler_3d_backward and the forward grid_sampler_3d program. A grid point's footprint is
// the product of one tap per axis (ops/grid_sampler_coords.h): 2 x 2 x 2 linear taps or a
// single nearest one, numbered x fastest. The backward kernels are the adjoint of "output = sum
// over taps of weight * input[tap]", as in the 2-d op.
#include "ops/grid_sampler_3d.h"

#include <array>
#include <string>

#include "ir/builder.h"
#include "ir/error.h"
#include "ops/grid_sampler_attributes.h"
#include "ops/input_strides.h"
#include "ops/shape_checks.h"

namespace adjoint::ops {
namespace {

using ir::DType;
using ir::Expr;
using ir::Tensor;
using ir::TensorRef;
using ir::Var;

constexpr const char* kOpName = "grid_sampler_3d_backward";

/// Grid axis a (0 x, 1 y, 2 z) samples input dimension W, H, D.
constexpr int kAxes = 3;

[[noreturn]] void bad_attribute(const std::string& attribute, const std::string& what) {
  bad_grid_sampler_attribute(kOpName, attribute, what);
}

/// The input size along grid axis `axis` (x: W, y: H, z: D).
int64_t axis_size(const GridSampler3dParams& p, int axis) {
  return axis == 0 ? p.input_width : axis == 1 ? p.input_height : p.input_depth;
}

/// One of three expressions by grid axis, dropping the selects where the sizes (and so the
/// expressions) agree.
Expr by_axis(const GridSampler3dParams& p, const Expr& axis, const std::array<Expr, 3>& along) {
  Expr yz = p.input_height == p.input_depth ? along[1] : ir::select(axis == 1, along[1], along[2]);
  if (p.input_width == p.input_height && p.input_height == p.input_depth) return along[0];
  return ir::select(axis == 0, along[0], yz);
}

// --- footprint --------------------------------------------------------------------------------

/// Tap `tap` (x fastest) of the footprint at source point `source`: its input index per axis,
/// its weight, and d weight / d source coordinate per axis.
struct Tap {
  std::array<Expr, 3> index;
  Expr weight;
  std::array<Expr, 3> weight_grad;
  Expr in_bounds;  ///< undefined when no tap can leave the input
};

Tap footprint_tap(const GridSampler3dParams& p, const std::array<Expr, 3>& source,
                  const Expr& tap) {
  bool nearest = p.interpolation == GridSamplerInterpolation::kNearest;
  std::array<Expr, 3> offsets = {tap % 2, (tap / 2) % 2, tap / 4};  // unused by nearest
  std::array<AxisTap, 3> axis_taps;
  for (int a = 0; a < kAxes; ++a) {
    axis_taps[a] = nearest ? nearest_tap(source[a]) : linear_tap(source[a], offsets[a]);
  }
  Tap t;
  for (int a = 0; a < kAxes; ++a) t.index[a] = axis_taps[a].index;
  // ATen's order: (x weight * y weight) * z weight, and for d/d source along one axis the
  // slope of that axis times the other two weights in the same order.
  t.weight = times(times(axis_taps[0].weight, axis_taps[1].weight), axis_taps[2].weight);
  t.weight_grad[0] =
      times(times(axis_taps[0].weight_grad, axis_taps[1].weight), axis_taps[2].weight);
  t.weight_grad[1] =
      times(times(axis_taps[0].weight, axis_taps[1].weight_grad), axis_taps[2].weight);
  t.weight_grad[2] =
      times(times(axis_taps[0].weight, axis_taps[1].weight), axis_taps[2].weight_grad);
  // Zeros padding leaves coordinates unclamped, and a linear tap steps past the last pixel when
  // the coordinate sits on it; nearest with border or reflection always lands inside.
  if (p.padding == GridSamplerPadding::kZeros || !nearest) {
    for (int a = 0; a < kAxes; ++a) {
      Expr inside = (t.index[a] >= 0) && (t.index[a] < axis_size(p, a));
      t.in_bounds = t.in_bounds.defined() ? (t.in_bounds && inside) : inside;
    }
  }
  return t;
}

/// The loop over the footprint's taps: 8 for trilinear, none for nearest.
std::vector<ir::Axis> footprint_axes(const GridSampler3dParams& p, const Var& tap) {
  if (p.interpolation == GridSamplerInterpolation::kNearest) return {};
  return {ir::range(tap, Expr(int64_t{8}))};
}

// --- programs ---------------------------------------------------------------------------------

/// What the kernels of one program share (see the 2-d Sampler in ops/grid_sampler.cpp).
struct Sampler {
  GridSampler3dParams p;
  DType compute = DType::kF32;  ///< coordinate math and accumulation
  Tensor input, grid;
  Tensor source;              ///< source_coordinate[n, d, h, w, axis]: pixel x (0), y (1), z (2)
  Tensor source_grad;         ///< d source / d grid, when it depends on the point; else null
  std::array<Expr, 3> scale;  ///< d source / d grid per axis, when it is a constant
};

std::vector<int64_t> grad_output_shape(const GridSampler3dParams& p) {
  return {p.batch, p.channels, p.output_depth, p.output_height, p.output_width};
}
std::vector<int64_t> input_shape(const GridSampler3dParams& p) {
  return {p.batch, p.channels, p.input_depth, p.input_height, p.input_width};
}
std::vector<int64_t> grid_shape(const GridSampler3dParams& p) {
  return {p.batch, p.output_depth, p.output_height, p.output_width, kAxes};
}

Sampler declare_sampler(ir::ProgramBuilder& b, const GridSampler3dParams& p) {
  Sampler s;
  s.p = p;
  s.compute = ir::default_accumulation(p.dtype);
  s.input = b.input("input", p.dtype, input_shape(p), p.input_strides);
  s.grid = b.input("grid", p.dtype, grid_shape(p), p.grid_strides);
  return s;
}

void describe(ir::ProgramBuilder& b, const GridSampler3dParams& p) {
  b.attribute("interpolation_mode", interpolation_name(p.interpolation));
  b.attribute("padding_mode", padding_name(p.padding));
  b.attribute("align_corners", p.align_corners ? "true" : "false");
}

/// The grid-point axes (n, d_out, h_out, w_out) over a tensor shaped like the grid.
struct PointVars {
  Var n{"n"}, d{"d_out"}, h{"h_out"}, w{"w_out"};
};

/// Kernel `source_coordinates`: the pixel coordinate each grid value samples and, if
/// `with_grad` and it is not a constant, its derivative.
void add_source_kernel(ir::ProgramBuilder& b, Sampler& s, bool with_grad) {
  const GridSampler3dParams& p = s.p;
  PointVars v;
  Var axis("axis");
  Expr grid_value = ir::cast(s.compute, TensorRef(s.grid)(v.n, v.d, v.h, v.w, axis));
  std::array<SourceCoordinate, 3> c;
  for (int a = 0; a < kAxes; ++a) {
    c[a] = source_index(grid_value, axis_size(p, a), p.padding, p.align_corners);
  }
  std::vector<int64_t> shape{p.batch, p.output_depth, p.output_height, p.output_width, kAxes};
  s.source = b.temporary("source_coordinate", s.compute, shape);
  std::vector<ir::Axis> domain = ir::over(s.source, {v.n, v.d, v.h, v.w, axis});
  std::vector<ir::Stage> stages{
      ir::compute(s.source, domain, by_axis(p, axis, {c[0].value, c[1].value, c[2].value}))};
  bool constant_scale = true;
  for (const SourceCoordinate& ca : c)
    constant_scale &= ca.grad.as<ir::FloatConstNode>() != nullptr;
  if (constant_scale) {
    s.scale = {c[0].grad, c[1].grad, c[2].grad};
  } else if (with_grad) {
    s.source_grad = b.temporary("source_coordinate_grad", s.compute, shape);
    stages.push_back(
        ir::compute(s.source_grad, domain, by_axis(p, axis, {c[0].grad, c[1].grad, c[2].grad})));
  }
  b.kernel("source_coordinates", std::move(stages));
}

/// The footprint tap `tap` of grid point v, read from the source coordinates.
Tap sample_tap(const Sampler& s, const PointVars& v, const Var& tap) {
  TensorRef source(s.source);
  return footprint_tap(
      s.p,
      {source(v.n, v.d, v.h, v.w, 0), source(v.n, v.d, v.h, v.w, 1), source(v.n, v.d, v.h, v.w, 2)},
      tap);
}

/// input[n, c, tap] in the compute dtype, 0 for a tap outside the input.
Expr tap_value(const Sampler& s, const Var& n, const Var& c, const Tap& t) {
  Expr v = ir::cast(s.compute, TensorRef(s.input)(n, c, t.index[2], t.index[1], t.index[0]));
  return t.in_bounds.defined() ? ir::select(t.in_bounds, v, constant_like(v, 0)) : v;
}

/// Kernel `grad_input`: every (grad_output element, tap) adds weight * grad_output to the
/// input pixel the tap read.
void add_grad_input_kernel(ir::ProgramBuilder& b, const Sampler& s, const Tensor& grad_output) {
  const GridSampler3dParams& p = s.p;
  Tensor grad_input = b.output("grad_input", p.dtype,
                               {p.batch, p.channels, p.input_depth, p.input_height, p.input_width});
  PointVars v;
  Var c("c"), tap("tap");
  Tap t = sample_tap(s, v, tap);
  std::vector<ir::Axis> domain = ir::over(grad_output, {v.n, c, v.d, v.h, v.w});
  for (ir::Axis& a : footprint_axes(p, tap)) domain.push_back(std::move(a));
  Expr upstream = ir::cast(s.compute, TensorRef(grad_output)(v.n, c, v.d, v.h, v.w));
  b.kernel("grad_input",
           {ir::scatter_add(grad_input, {v.n, c, t.index[2], t.index[1], t.index[0]},
                            times(t.weight, upstream), std::move(domain), s.compute, t.in_bounds)});
}

/// Kernel `grad_grid`: d loss / d grid[n, d, h, w, axis] = d source / d grid times the sum over
/// channels and taps of input[tap] * d weight / d source * grad_output; zero for nearest.
void add_grad_grid_kernel(ir::ProgramBuilder& b, const Sampler& s, const Tensor& grad_output) {
  const GridSampler3dParams& p = s.p;
  Tensor grad_grid = b.output("grad_grid", p.dtype,
                              {p.batch, p.output_depth, p.output_height, p.output_width, kAxes});
  PointVars v;
  Var axis("axis"), c("c"), tap("tap");
  std::vector<ir::Axis> domain = ir::over(grad_grid, {v.n, v.d, v.h, v.w, axis});
  if (p.interpolation == GridSamplerInterpolation::kNearest) {
    b.kernel("grad_grid", {ir::compute(grad_grid, domain, ir::constant(p.dtype, 0))});
    return;
  }
  Tap t = sample_tap(s, v, tap);
  Expr weight_grad = ir::select(axis == 0, t.weight_grad[0],
                                ir::select(axis == 1, t.weight_grad[1], t.weight_grad[2]));
  Expr upstream = ir::cast(s.compute, TensorRef(grad_output)(v.n, c, v.d, v.h, v.w));
  std::vector<ir::Axis> channels_and_taps{ir::range(c, Expr(p.channels))};
  for (ir::Axis& a : footprint_axes(p, tap)) channels_and_taps.push_back(std::move(a));
  Expr d_source = ir::sum(std::move(channels_and_taps),
                          (tap_value(s, v.n, c, t) * weight_grad) * upstream, s.compute);
  Expr scale = s.source_grad ? TensorRef(s.source_grad)(v.n, v.d, v.h, v.w, axis)
                             : by_axis(p, axis, s.scale);
  b.kernel("grad_grid",
           {ir::compute(grad_grid, std::move(domain), ir::cast(p.dtype, scale * d_source))});
}

ir::Program build_from_spec(const Specialization& spec) {
  return build_grid_sampler_3d_backward(grid_sampler_3d_params(spec));
}

OpDefinition grid_sampler_3d_backward_definition() {
  using K = AttrKind;
  OpDefinition op;
  op.name = kOpName;
  op.summary =
      "gradients of 3-D grid_sample w.r.t. input and grid, as aten::grid_sampler_3d_backward";
  op.attributes = {
      {"dtype", K::kDType, "f32", "dtype of every tensor", {"f16", "bf16", "f32", "f64"}},
      {"input_size", K::kIntList, std::nullopt, "N,C,D,H,W of input and grad_input; N and C may be 0, D, H and W not (as in ATen)",
       {}},
      {"output_size",
       K::kIntList,
       std::nullopt,
       "D_out,H_out,W_out: grid is N,D_out,H_out,W_out,3 and grad_output N,C,D_out,H_out,W_out; "
       "any may be 0",
       {}},
      {"interpolation_mode",
       K::kChoice,
       "bilinear",
       "how the input is sampled (bilinear is trilinear in 3-D; ATen has no 3-D bicubic)",
       {"bilinear", "nearest"}},
  };
  for (AttrSpec& a : grid_sampler_shared_attributes()) op.attributes.push_back(std::move(a));
  op.build = built_from_attributes(build_from_spec);
  op.examples = {
      "grid_sampler_3d_backward dtype=f32 input_size=1,2,3,5,7 output_size=2,4,3 "
      "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
      "grid_sampler_3d_backward dtype=bf16 input_size=2,3,1,6,4 output_size=3,2,5 "
      "interpolation_mode=bilinear padding_mode=reflection align_corners=true",
      "grid_sampler_3d_backward dtype=f16 input_size=2,4,5,3,1 output_size=2,3,4 "
      "interpolation_mode=nearest padding_mode=border output_mask=0,1",
      "grid_sampler_3d_backward dtype=f64 input_size=1,3,4,4,4 output_size=6,6,6 "
      "interpolation_mode=bilinear padding_mode=border align_corners=true",
      "grid_sampler_3d_backward dtype=f32 input_size=2,16,32,32,32 output_size=32,32,32 "
      "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
  };
  return op;
}

}  // namespace

std::vector<OpDefinition> grid_sampler_3d_ops() {
  return {grid_sampler_3d_backward_definition()};
}

GridSampler3dParams grid_sampler_3d_params(const Specialization& spec) {
  GridSampler3dParams p;
  p.dtype = spec.get_dtype("dtype");
  std::vector<int64_t> in = read_grid_sampler_sizes(spec, "input_size", 5, "N,C,D,H,W", 2);
  std::vector<int64_t> out =
      read_grid_sampler_sizes(spec, "output_size", 3, "D_out,H_out,W_out", 3);
  p.batch = in[0];
  p.channels = in[1];
  p.input_depth = in[2];
  p.input_height = in[3];
  p.input_width = in[4];
  p.output_depth = out[0];
  p.output_height = out[1];
  p.output_width = out[2];
  p.interpolation = parse_interpolation(spec.get_choice("interpolation_mode"));
  if (p.interpolation == GridSamplerInterpolation::kBicubic) {  // the registry refuses it first
    bad_attribute("interpolation_mode", "bicubic is 2-D only (ATen has no 3-D bicubic)");
  }
  p.padding = parse_padding(spec.get_choice("padding_mode"));
  p.align_corners = spec.get_bool("align_corners");
  p.compute_grad_input = read_grid_sampler_output_mask(spec);
  p.grad_output_strides = input_strides(spec, "grad_output", grad_output_shape(p), {});
  p.input_strides = input_strides(spec, "input", input_shape(p), {});
  p.grid_strides = input_strides(spec, "grid", grid_shape(p), {});
  return p;
}

ir::Program build_grid_sampler_3d_backward(const GridSampler3dParams& p) {
  if (p.interpolation == GridSamplerInterpolation::kBicubic) {
    throw Error(std::string(kOpName) +
                    ": interpolation 'bicubic' is 2-D only (ATen has no 3-D bicubic); use "
                    "bilinear or nearest",
                ErrorCode::kInvalidArgument);
  }
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

ir::Program build_grid_sampler_3d_forward(const GridSampler3dParams& p) {
  ir::ProgramBuilder b("grid_sampler_3d");
  describe(b, p);
  Sampler s = declare_sampler(b, p);
  add_source_kernel(b, s, /*with_grad=*/false);
  Tensor output = b.output("output", p.dtype,
                           {p.batch, p.channels, p.output_depth, p.output_height, p.output_width});
  PointVars v;
  Var c("c"), tap("tap");
  Tap t = sample_tap(s, v, tap);
  Expr sample = times(t.weight, tap_value(s, v.n, c, t));
  std::vector<ir::Axis> taps = footprint_axes(p, tap);
  Expr value = taps.empty() ? sample : ir::sum(std::move(taps), sample, s.compute);
  b.kernel("output", {ir::compute(output, ir::over(output, {v.n, c, v.d, v.h, v.w}),
                                  ir::cast(p.dtype, value))});
  return std::move(b).build();
}

}  // namespace adjoint::ops
