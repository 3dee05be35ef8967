// The upsample_nearest op family: the backward of nearest and nearest-exact upsampling in 1, 2
// and 3 spatial dimensions (ATen's upsample_nearest{1,2,3}d_backward and
// _upsample_nearest_exact{1,2,3}d_backward), written as the adjoint of the forward gather:
//
//   forward   compute     out[n, c, o...] = in[n, c, src(o)...]
//   backward  scatter_add grad_input[n, c, src(o)...] += grad_output[n, c, o...]
//
// Per spatial axis with input size I, output size O and the forward's optional scale factor,
// src follows PyTorch's CUDA kernels (aten/src/ATen/native/cuda/UpSample.cuh) bit for bit:
//   r = (scale given and > 0) ? float(1.0 / scale)   (the reciprocal taken in double)
//                             : float(I) / float(O)  (f32 division)
//   nearest        src(o) = min(i64(floor(f32(o) * r)), I - 1)
//   nearest-exact  src(o) = min(i64(floor((f32(o) + 0.5f) * r)), I - 1)
// r is baked into the IR as an f32 constant. The header also exposes the forward program, which
// is not a registered op: the tests use it to check the backward by finite differences.
#pragma once

#include <optional>
#include <vector>

#include "ir/expr.h"
#include "ir/program.h"
#include "ops/dynamic_ops.h"
#include "ops/registry.h"

namespace adjoint::ops {

/// How an output index picks its source: PyTorch's "nearest" (floor(o * r), the legacy
/// OpenCV rule) or "nearest-exact" (floor((o + 0.5) * r), the pixel-centre rule).
enum class NearestRule { kNearest, kNearestExact };

/// A validated upsample_nearest specialization: everything its IR depends on.
struct UpsampleNearestConfig {
  int spatial_rank = 2;
  NearestRule rule = NearestRule::kNearest;
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> input_shape;   ///< N, C, spatial sizes of grad_input (the forward input)
  std::vector<int64_t> output_shape;  ///< N, C, spatial sizes of grad_output
  std::vector<std::optional<double>> scales;  ///< the forward's scale factor per spatial axis
  bool channels_last = false;
};

/// Reads and checks the attributes of an upsample_nearest op; throws adjoint::Error naming the
/// op, the attribute, what was expected and what was given.
UpsampleNearestConfig upsample_nearest_config(const Specialization& spec);

/// The f32 ratio r of one axis (PyTorch's compute_scales_value<float>): float(1.0 / scale) when
/// a scale > 0 is given, else float(input_size) / float(output_size).
float nearest_source_ratio(std::optional<double> scale, int64_t input_size, int64_t output_size);

/// The source index of `output_index` (an i64 expression) along one axis, as an i64 expression.
ir::Expr nearest_source_index(const ir::Expr& output_index, NearestRule rule, float ratio,
                              int64_t input_size);

/// The backward program of an upsample_nearest specialization (what the registered ops build):
/// input `grad_output`, output `grad_input`, one kernel with one scatter_add stage.
ir::Program build_upsample_nearest_backward(const Specialization& spec);

/// The ratio r of one axis as an f32 expression of the (possibly dynamic) sizes: a constant
/// float(1.0 / scale) when a scale > 0 is given, else f32(input) / f32(output), the division
/// PyTorch's kernels make, so a generic kernel rounds exactly as the specialized one.
ir::Expr nearest_source_ratio_expr(std::optional<double> scale, const ir::Expr& input_size,
                                   const ir::Expr& output_size);

/// The source index with the ratio and the clamp `input_size - 1` as expressions (generic
/// programs); the same f32 operations as nearest_source_index.
ir::Expr nearest_source_index(const ir::Expr& output_index, NearestRule rule,
                              const ir::Expr& ratio, const ir::Expr& input_size);

/// The largest spatial size a generic upsample program accepts: its gather windows are computed
/// in the kernel (compiler/invert_floor_map.h), exact while f32(o) is exact with a margin.
constexpr int64_t kMaxGenericSpatialSize = int64_t{1} << 22;

/// The axes that may be dynamic: the batch, each input and each output spatial size.
std::vector<DynamicAxis> upsample_nearest_dynamic_axes(int spatial_rank);

/// The backward program generic in `generic_axes` (DynamicAxis names: input_size[0] is the
/// batch, input_size[2..] and output_size[..] the spatial sizes); every other extent keeps the
/// specialization's value. Throws adjoint::Error for an axis the op does not declare
/// (kInvalidArgument) and for a specialization that gives grad_output_strides (kInvalidProgram:
/// the runtime then specializes).
ir::Program build_upsample_nearest_backward_generic(const Specialization& spec,
                                                    const std::vector<std::string>& generic_axes);

/// The forward program matching a backward specialization: input `input` (grad_input's shape
/// and layout), output `output` (grad_output's), one compute stage gathering input[src(o)].
ir::Program build_upsample_nearest_forward(const Specialization& spec);

/// The six registered ops of the family.
std::vector<OpDefinition> upsample_nearest_ops();

}  // namespace adjoint::ops
