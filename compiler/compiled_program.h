// The compiler's output and the runtime's input: a lowered program as CUDA translation units
// plus everything the runtime needs to launch them (parameter order, launch dimensions, which
// buffers to zero, which temporaries to allocate). Nothing here touches the driver.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/tensor.h"

namespace adjoint::compiler {

/// Launch geometry of one kernel. A grid with a zero dimension means "nothing to do" (empty
/// tensors): the runtime skips the launch.
struct LaunchDims {
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t shared_bytes = 0;
};

/// A count that depends on the sizes of a generic kernel (ir/dynamic_sizes.h): `constant`
/// times the product of the sizes named (by their SizeParam source, e.g. "input_size[0]").
struct SizeProduct {
  int64_t constant = 1;
  std::vector<std::string> sizes;

  /// The value for `values` (one per name in `names`, in that order); throws adjoint::Error
  /// for a name not among them.
  int64_t evaluate(const std::vector<std::string>& names, const std::vector<int64_t>& values) const;
  /// "4 * input_size[0] * output_size[1]".
  std::string text() const;
};

/// One `extern "C"` entry point in its own self-contained CUDA translation unit.
/// The most parameters (tensor pointers and size arguments) a kernel may take: the runtime's
/// launch keeps them in arrays of this size (1 KB of 8-byte values, within CUDA's 4 KB).
inline constexpr size_t kMaxKernelParams = 128;

struct CompiledKernel {
  std::string entry;                     ///< the __global__ function's name
  std::string source;                    ///< complete CUDA C++ source for NVRTC
  std::vector<std::string> params;       ///< tensor names; each parameter is a device pointer
  LaunchDims launch;
  std::vector<std::string> zero_before;  ///< tensors the runtime zeroes (stream-ordered) first
  /// True when the kernel adds atomically (data-dependent scatter): its results may differ in
  /// the last bits from run to run.
  bool uses_atomics = false;
  /// Generic kernels: the sizes passed after the pointers (by SizeParam source), each as an
  /// integer of `size_param_bytes` (4 in 32-bit kernels, else 8); the domain's point count, from
  /// which the runtime derives the grid (launch holds the block only). Empty for specialized
  /// kernels.
  std::vector<std::string> size_params;
  int size_param_bytes = 8;
  SizeProduct points;
  /// Generic kernels: points each thread computes (a group along the innermost axis); the
  /// runtime launches about points / (block * points_per_thread) threads. A token pair's
  /// kernels (compiler/lower_outer_generic.h) fill points and points_per_thread so that this
  /// gives their blocks: a warp-cooperative kernel counts each point once per lane, a row-group
  /// kernel `block` per row with its rows per block as points_per_thread.
  int points_per_thread = 1;
  /// Generic kernels lowered through the specialized pipeline (compiler/lower_outer_generic.h):
  /// one linear index per thread and no grid-stride loop, as in the specialized kernel, so the
  /// runtime must launch every block, ceil(points / (block * points_per_thread)), uncapped.
  bool one_index_per_thread = false;
};

/// A tensor the runtime must bind or allocate.
struct BufferInfo {
  std::string name;
  ir::DType dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int64_t bytes;  ///< storage size in bytes (storage_elements * element size)
  ir::TensorRole role;
  /// Dynamic tensors of generic programs: dimensions and strides as products of sizes (shape
  /// and strides then hold the values at the sizes' upper bounds). Empty for static tensors.
  std::vector<SizeProduct> dynamic_shape;
  std::vector<SizeProduct> dynamic_strides;
};

/// A whole lowered program: kernels run in order on one stream.
struct CompiledProgram {
  std::string name;
  std::vector<CompiledKernel> kernels;
  std::vector<BufferInfo> buffers;  ///< inputs, outputs and temporaries
  /// False when some kernel accumulates with atomics (run-to-run results may differ in the
  /// last bits); the lowering sets it.
  bool deterministic = true;
  /// Generic programs: the size parameters by source, in the order of ir::Program::sizes.
  std::vector<std::string> sizes;
  /// The IR after each pass ("(unchanged)" where a pass changed nothing); filled only when
  /// LowerOptions::record_passes is set.
  std::string pass_dump;
};

}  // namespace adjoint::compiler
