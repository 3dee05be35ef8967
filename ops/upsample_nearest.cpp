// The upsample_nearest family: attribute checks, the per-axis source-index map, and the two
// programs built from it (the registered backward scatter and the unregistered forward gather).
// Both programs share one index map per axis, so the backward is the adjoint of the forward by
// construction; the tests check it against a plain-loop reference and by finite differences.
#include "ops/upsample_nearest.h"
#include "ops/input_strides.h"
#include "ops/shape_checks.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "ir/builder.h"
#include "ir/error.h"

namespace adjoint::ops {
namespace {

/// One registered op: its name, number of spatial axes and source rule.
struct FamilyMember {
  const char* name;
  int spatial_rank;
  NearestRule rule;
};

constexpr FamilyMember kMembers[] = {
    {"upsample_nearest1d_backward", 1, NearestRule::kNearest},
    {"upsample_nearest2d_backward", 2, NearestRule::kNearest},
    {"upsample_nearest3d_backward", 3, NearestRule::kNearest},
    {"_upsample_nearest_exact1d_backward", 1, NearestRule::kNearestExact},
    {"_upsample_nearest_exact2d_backward", 2, NearestRule::kNearestExact},
    {"_upsample_nearest_exact3d_backward", 3, NearestRule::kNearestExact},
};

const FamilyMember& find_member(const std::string& op) {
  for (const FamilyMember& m : kMembers) {
    if (op == m.name) return m;
  }
  throw Error("'" + op + "' is not an upsample_nearest op", ErrorCode::kInternal);
}

/// ATen's names of the scale attributes, outermost spatial axis first.
std::vector<std::string> scale_attribute_names(int spatial_rank) {
  switch (spatial_rank) {
    case 1: return {"scales"};
    case 2: return {"scales_h", "scales_w"};
    default: return {"scales_d", "scales_h", "scales_w"};
  }
}

/// Letters of the spatial axes ("D", "H", "W"), outermost first.
std::vector<std::string> spatial_axis_letters(int spatial_rank) {
  std::vector<std::string> all = {"D", "H", "W"};
  return std::vector<std::string>(all.end() - spatial_rank, all.end());
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out;
}

[[noreturn]] void reject(const Specialization& spec, const std::string& attribute,
                         const std::string& expected, const std::string& given) {
  throw Error(spec.op_name() + ": attribute '" + attribute + "': expected " + expected +
                  ", given " + given,
              ErrorCode::kInvalidArgument);
}

/// 'text' (built by appending: GCC 12 warns falsely about "literal" + std::string temporaries).
std::string quoted(const std::string& text) {
  std::string out = "'";
  out += text;
  out += "'";
  return out;
}

std::string quoted_sizes(const std::vector<int64_t>& sizes) {
  return std::to_string(sizes.size()) + (sizes.size() == 1 ? " size " : " sizes ") +
         quoted(format_ints(sizes));
}

void check_input_size(const Specialization& spec, int spatial_rank,
                      const std::vector<int64_t>& sizes) {
  std::string axes = "N, C, " + join(spatial_axis_letters(spatial_rank));
  if (static_cast<int>(sizes.size()) != spatial_rank + 2) {
    reject(spec, "input_size",
           std::to_string(spatial_rank + 2) + " sizes (" + axes + ") of grad_input",
           quoted_sizes(sizes));
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    bool spatial = i >= 2;
    if (sizes[i] < 0 || (spatial && sizes[i] == 0)) {
      reject(spec, "input_size",
             "sizes (" + axes + ") with N, C >= 0 and spatial sizes > 0",
             quoted(format_ints(sizes)));
    }
  }
}

void check_output_size(const Specialization& spec, int spatial_rank,
                       const std::vector<int64_t>& sizes) {
  std::string axes = join(spatial_axis_letters(spatial_rank));
  if (static_cast<int>(sizes.size()) != spatial_rank) {
    reject(spec, "output_size",
           std::to_string(spatial_rank) +
               (spatial_rank == 1 ? " spatial size (" : " spatial sizes (") + axes +
               ") of grad_output",
           quoted_sizes(sizes));
  }
  for (int64_t s : sizes) {
    if (s <= 0) {
      reject(spec, "output_size", "spatial sizes (" + axes + ") > 0",
             quoted(format_ints(sizes)));
    }
  }
}

/// A scale so small that floor(o * r) leaves the i64 range has no defined source index (in
/// PyTorch it is undefined behaviour); reject it rather than emit it.
void check_scale_range(const Specialization& spec, const std::string& attribute,
                       std::optional<double> scale, int64_t input_size, int64_t output_size) {
  double ratio = nearest_source_ratio(scale, input_size, output_size);
  double largest_position = (static_cast<double>(output_size) + 0.5) * ratio;
  if (!std::isfinite(ratio) || largest_position >= 0x1p62) {
    reject(spec, attribute,
           "a scale for which (output size + 0.5) / scale fits an i64 index (or none, or a "
           "value <= 0 to derive it from the sizes)",
           format_float(*scale));
  }
}

std::vector<int64_t> layout_strides(const UpsampleNearestConfig& config,
                                    const std::vector<int64_t>& shape) {
  return config.channels_last ? ir::channels_last_strides(shape) : ir::contiguous_strides(shape);
}

/// The variables of grad_output's domain (n, c, then one per spatial axis) and, for each, the
/// grad_input index it maps to.
struct IndexMap {
  std::vector<ir::Var> output_vars;
  std::vector<ir::Expr> output_indices;
  std::vector<ir::Expr> source_indices;
};

IndexMap index_map(const UpsampleNearestConfig& config) {
  static const std::vector<std::string> kSpatialNames = {"od", "oh", "ow"};
  IndexMap map;
  map.output_vars = {ir::Var("n"), ir::Var("c")};
  for (int axis = 0; axis < config.spatial_rank; ++axis) {
    map.output_vars.emplace_back(kSpatialNames[3 - config.spatial_rank + axis]);
  }
  for (const ir::Var& v : map.output_vars) map.output_indices.emplace_back(v);
  map.source_indices = {map.output_indices[0], map.output_indices[1]};
  for (int axis = 0; axis < config.spatial_rank; ++axis) {
    int64_t in = config.input_shape[2 + axis];
    int64_t out = config.output_shape[2 + axis];
    float ratio = nearest_source_ratio(config.scales[axis], in, out);
    map.source_indices.push_back(
        nearest_source_index(map.output_indices[2 + axis], config.rule, ratio, in));
  }
  return map;
}

void annotate(ir::ProgramBuilder& builder, const UpsampleNearestConfig& config) {
  builder.attribute("mode", config.rule == NearestRule::kNearest ? "nearest" : "nearest-exact");
  builder.attribute("layout", config.channels_last ? "channels_last" : "contiguous");
}

/// "upsample_nearest2d" for "upsample_nearest2d_backward".
std::string forward_name(const std::string& backward_name) {
  const std::string suffix = "_backward";
  return backward_name.substr(0, backward_name.size() - suffix.size());
}

std::vector<AttrSpec> attribute_schema(int spatial_rank) {
  std::string axes = join(spatial_axis_letters(spatial_rank));
  std::vector<AttrSpec> schema = {
      {"dtype", AttrKind::kDType, "f32", "element type of grad_output and grad_input",
       {"f16", "bf16", "f32", "f64"}},
      {"input_size", AttrKind::kIntList, std::nullopt,
       "N, C, " + axes + " of grad_input (the forward's input); N and C may be 0", {}},
      {"output_size", AttrKind::kIntList, std::nullopt,
       axes + " of grad_output (the forward's output)", {}},
  };
  std::vector<std::string> letters = spatial_axis_letters(spatial_rank);
  std::vector<std::string> names = scale_attribute_names(spatial_rank);
  for (int axis = 0; axis < spatial_rank; ++axis) {
    schema.push_back({names[axis], AttrKind::kOptionalFloat, "none",
                      "the forward's scale factor along " + letters[axis] +
                          "; none or <= 0 derives it from the sizes",
                      {}});
  }
  std::string layout_doc =
      "memory layout of both tensors (channels_last: N, spatial..., C; 2d and 3d only)";
  schema.push_back(
      {"layout", AttrKind::kChoice, "contiguous", layout_doc, {"contiguous", "channels_last"}});
  schema.push_back(input_strides_attribute("grad_output"));
  return schema;
}

std::vector<std::string> examples(const FamilyMember& m) {
  std::string op = m.name;
  switch (m.spatial_rank) {
    case 1:
      return {op + " dtype=f32 input_size=2,3,7 output_size=17",
              op + " dtype=f16 input_size=4,16,100 output_size=200 scales=2",
              op + " dtype=bf16 input_size=2,8,13 output_size=5"};
    case 2:
      return {op + " dtype=f32 input_size=1,2,5,7 output_size=8,3",
              op + " dtype=bf16 input_size=2,16,32,32 output_size=64,64 scales_h=2 scales_w=2",
              op + " dtype=f16 input_size=2,8,13,17 output_size=20,9 layout=channels_last",
              op + " dtype=f64 input_size=1,3,16,16 output_size=8,24",
              op + " dtype=f32 input_size=2,3,5,7 output_size=9,11 grad_output_strides=297,1,33,3"};
    default:
      return {op + " dtype=f32 input_size=1,2,3,4,5 output_size=6,7,3",
              op + " dtype=bf16 input_size=2,4,8,8,8 output_size=16,16,16 scales_d=2 "
                   "scales_h=2 scales_w=2",
              op + " dtype=f16 input_size=1,8,5,6,7 output_size=3,9,14 layout=channels_last"};
  }
}

std::string summary(const FamilyMember& m) {
  std::string rule = m.rule == NearestRule::kNearest ? "nearest" : "nearest-exact";
  return "gradient of " + std::to_string(m.spatial_rank) + "d " + rule +
         " upsampling: grad_input[src(o)] += grad_output[o]";
}

}  // namespace

float nearest_source_ratio(std::optional<double> scale, int64_t input_size, int64_t output_size) {
  if (scale && *scale > 0) return static_cast<float>(1.0 / *scale);
  return static_cast<float>(input_size) / static_cast<float>(output_size);
}

ir::Expr nearest_source_index(const ir::Expr& output_index, NearestRule rule, float ratio,
                              int64_t input_size) {
  return nearest_source_index(output_index, rule, ir::constant(ir::DType::kF32, ratio),
                              ir::Expr(input_size));
}

ir::Expr nearest_source_index(const ir::Expr& output_index, NearestRule rule,
                              const ir::Expr& ratio, const ir::Expr& input_size) {
  ir::Expr position = ir::cast(ir::DType::kF32, output_index);
  if (rule == NearestRule::kNearestExact) position = position + ir::constant(ir::DType::kF32, 0.5);
  ir::Expr source = ir::floor(position * ratio);
  ir::Expr last = input_size.as<ir::IntConstNode>()
                      ? ir::Expr(input_size.as<ir::IntConstNode>()->value - 1)
                      : input_size - ir::Expr(1);
  return ir::min(ir::cast(ir::DType::kI64, source), last);
}

std::vector<DynamicAxis> upsample_nearest_dynamic_axes(int spatial_rank) {
  std::vector<DynamicAxis> axes = {{"input_size", 0, "batch", true}};
  std::vector<std::string> letters = spatial_axis_letters(spatial_rank);
  for (int a = 0; a < spatial_rank; ++a) axes.push_back({"input_size", 2 + a, "input " + letters[a]});
  for (int a = 0; a < spatial_rank; ++a) axes.push_back({"output_size", a, "output " + letters[a]});
  return axes;
}

ir::Expr nearest_source_ratio_expr(std::optional<double> scale, const ir::Expr& input_size,
                                   const ir::Expr& output_size) {
  auto* in = input_size.as<ir::IntConstNode>();
  auto* out = output_size.as<ir::IntConstNode>();
  if ((scale && *scale > 0) || (in && out)) {
    return ir::constant(ir::DType::kF32,
                        nearest_source_ratio(scale, in ? in->value : 1, out ? out->value : 1));
  }
  return ir::cast(ir::DType::kF32, input_size) / ir::cast(ir::DType::kF32, output_size);
}

ir::Program build_upsample_nearest_backward_generic(const Specialization& spec,
                                                    const std::vector<std::string>& generic_axes) {
  UpsampleNearestConfig config = upsample_nearest_config(spec);
  const std::string strides_attribute = input_strides_attribute_name("grad_output");
  if (!spec.get_ints(strides_attribute).empty()) {
    throw Error(spec.op_name() + ": attribute '" + strides_attribute + "': a generic program reads "
                "grad_output in its layout's strides; a specialization that gives strides stays "
                "specialized", ErrorCode::kInvalidProgram);
  }
  const std::vector<DynamicAxis> declared_axes = upsample_nearest_dynamic_axes(config.spatial_rank);
  for (const std::string& name : generic_axes) {
    bool declared = false;
    for (const DynamicAxis& axis : declared_axes) declared |= axis.name() == name;
    if (!declared) {
      std::string valid;
      for (const DynamicAxis& axis : declared_axes) valid += (valid.empty() ? "" : ", ") + axis.name();
      throw Error(spec.op_name() + ": generic axis '" + name + "': expected one of " + valid,
                  ErrorCode::kInvalidArgument);
    }
  }
  auto generic = [&](const std::string& name) {
    return std::find(generic_axes.begin(), generic_axes.end(), name) != generic_axes.end();
  };
  ir::ProgramBuilder builder(spec.op_name());
  const std::vector<std::string> letters = spatial_axis_letters(config.spatial_rank);
  // A size per generic axis, else the specialization's constant.
  auto extent = [&](const std::string& attribute, int index, int64_t value,
                    const std::string& hint, int64_t lower, int64_t upper) -> ir::Expr {
    std::string name = attribute + "[" + std::to_string(index) + "]";
    if (!generic(name)) return ir::Expr(value);
    return builder.size(hint, name, lower, upper);
  };
  const int rank = config.spatial_rank;
  std::vector<ir::Expr> in_dims = {
      extent("input_size", 0, config.input_shape[0], "N", 0, (int64_t{1} << 31) - 1),
      ir::Expr(config.input_shape[1])};
  std::vector<ir::Expr> out_dims = in_dims;
  for (int a = 0; a < rank; ++a) {
    // With a given scale, the generic window is exact for input sizes up to ratio * 2^24
    // (compiler/invert_floor_map.h); larger ones stay specialized.
    int64_t upper = kMaxGenericSpatialSize;
    if (config.scales[a] && *config.scales[a] > 0) {
      double ratio = nearest_source_ratio(config.scales[a], 1, 1);
      upper = std::min<int64_t>(upper, static_cast<int64_t>(std::floor(ratio * 0x1p24)));
    }
    in_dims.push_back(extent("input_size", 2 + a, config.input_shape[2 + a], letters[a] + "_in", 1,
                             std::max<int64_t>(upper, 1)));
  }
  for (int a = 0; a < rank; ++a) {
    out_dims.push_back(extent("output_size", a, config.output_shape[2 + a], letters[a] + "_out", 1,
                              kMaxGenericSpatialSize));
  }
  std::vector<int> order(rank + 2);
  for (int d = 0; d < rank + 2; ++d) order[d] = d;
  if (config.channels_last) {  // N, spatial..., C
    order = {0};
    for (int d = 2; d < rank + 2; ++d) order.push_back(d);
    order.push_back(1);
  }
  ir::TensorRef grad_output =
      builder.dynamic_tensor("grad_output", config.dtype, out_dims, order, ir::TensorRole::kInput);
  ir::Tensor grad_input =
      builder.dynamic_tensor("grad_input", config.dtype, in_dims, order, ir::TensorRole::kOutput);
  static const std::vector<std::string> kSpatialNames = {"od", "oh", "ow"};
  std::vector<ir::Var> vars = {ir::Var("n"), ir::Var("c")};
  for (int a = 0; a < rank; ++a) vars.emplace_back(kSpatialNames[3 - rank + a]);
  std::vector<ir::Expr> out_index(vars.begin(), vars.end());
  std::vector<ir::Expr> source = {out_index[0], out_index[1]};
  for (int a = 0; a < rank; ++a) {
    ir::Expr ratio = nearest_source_ratio_expr(config.scales[a], in_dims[2 + a], out_dims[2 + a]);
    source.push_back(nearest_source_index(out_index[2 + a], config.rule, ratio, in_dims[2 + a]));
  }
  ir::DType accumulation = ir::default_accumulation(config.dtype);
  builder.kernel("scatter_grad_input",
                 {ir::scatter_add(grad_input, source, ir::cast(accumulation, grad_output(out_index)),
                                  ir::over(grad_output, vars), accumulation)});
  annotate(builder, config);
  return std::move(builder).build();
}

UpsampleNearestConfig upsample_nearest_config(const Specialization& spec) {
  const FamilyMember& member = find_member(spec.op_name());
  UpsampleNearestConfig config;
  config.spatial_rank = member.spatial_rank;
  config.rule = member.rule;
  config.dtype = spec.get_dtype("dtype");

  config.input_shape = spec.get_ints("input_size");
  check_input_size(spec, member.spatial_rank, config.input_shape);
  std::vector<int64_t> output_size = spec.get_ints("output_size");
  check_output_size(spec, member.spatial_rank, output_size);
  config.output_shape = {config.input_shape[0], config.input_shape[1]};
  config.output_shape.insert(config.output_shape.end(), output_size.begin(), output_size.end());
  check_sizes_addressable(spec.op_name(), "attribute 'input_size'", config.input_shape);
  check_sizes_addressable(spec.op_name(), "attribute 'output_size' (grad_output N, C, output_size)",
                          config.output_shape);

  std::vector<std::string> names = scale_attribute_names(member.spatial_rank);
  for (int axis = 0; axis < member.spatial_rank; ++axis) {
    std::optional<double> scale = spec.get_optional_float(names[axis]);
    if (scale && *scale > 0) {
      check_scale_range(spec, names[axis], scale, config.input_shape[2 + axis],
                        output_size[axis]);
    }
    config.scales.push_back(scale);
  }

  config.channels_last = spec.get_choice("layout") == "channels_last";
  if (config.channels_last && member.spatial_rank == 1) {
    reject(spec, "layout", "contiguous (channels_last needs 2 or 3 spatial axes)",
           "'channels_last'");
  }
  return config;
}

ir::Program build_upsample_nearest_backward(const Specialization& spec) {
  UpsampleNearestConfig config = upsample_nearest_config(spec);
  ir::ProgramBuilder builder(spec.op_name());
  ir::TensorRef grad_output = builder.input(
      "grad_output", config.dtype, config.output_shape,
      input_strides(spec, "grad_output", config.output_shape,
                    layout_strides(config, config.output_shape)));
  ir::Tensor grad_input = builder.output("grad_input", config.dtype, config.input_shape,
                                         layout_strides(config, config.input_shape));
  IndexMap map = index_map(config);
  ir::DType accumulation = ir::default_accumulation(config.dtype);
  builder.kernel("scatter_grad_input",
                 {ir::scatter_add(grad_input, map.source_indices,
                                  ir::cast(accumulation, grad_output(map.output_indices)),
                                  ir::over(grad_output, map.output_vars), accumulation)});
  annotate(builder, config);
  return std::move(builder).build();
}

ir::Program build_upsample_nearest_forward(const Specialization& spec) {
  UpsampleNearestConfig config = upsample_nearest_config(spec);
  ir::ProgramBuilder builder(forward_name(spec.op_name()));
  ir::TensorRef input = builder.input("input", config.dtype, config.input_shape,
                                      layout_strides(config, config.input_shape));
  ir::Tensor output = builder.output("output", config.dtype, config.output_shape,
                                     layout_strides(config, config.output_shape));
  IndexMap map = index_map(config);
  builder.kernel("gather_output", {ir::compute(output, ir::over(output, map.output_vars),
                                               input(map.source_indices))});
  annotate(builder, config);
  return std::move(builder).build();
}

std::vector<OpDefinition> upsample_nearest_ops() {
  std::vector<OpDefinition> ops;
  for (const FamilyMember& m : kMembers) {
    ops.push_back(OpDefinition{m.name, summary(m), attribute_schema(m.spatial_rank),
                               built_from_attributes(build_upsample_nearest_backward),
                               examples(m)});
  }
  return ops;
}

}  // namespace adjoint::ops
