// The compiler's output and the runtime's input: a lowered program as CUDA translation units
// plus everything the runtime needs to launch them (parameter order, launch dimensions, which
// buffers to zero, which temporaries to allocate). Nothing here touches the driver.
#pragma once

#include <cstdint>
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

/// One `extern "C"` entry point in its own self-contained CUDA translation unit.
struct CompiledKernel {
  std::string entry;                     ///< the __global__ function's name
  std::string source;                    ///< complete CUDA C++ source for NVRTC
  std::vector<std::string> params;       ///< tensor names; each parameter is a device pointer
  LaunchDims launch;
  std::vector<std::string> zero_before;  ///< tensors the runtime zeroes (stream-ordered) first
  /// True when the kernel adds atomically (data-dependent scatter): its results may differ in
  /// the last bits from run to run.
  bool uses_atomics = false;
};

/// A tensor the runtime must bind or allocate.
struct BufferInfo {
  std::string name;
  ir::DType dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  int64_t bytes;  ///< storage size in bytes (storage_elements * element size)
  ir::TensorRole role;
};

/// A whole lowered program: kernels run in order on one stream.
struct CompiledProgram {
  std::string name;
  std::vector<CompiledKernel> kernels;
  std::vector<BufferInfo> buffers;  ///< inputs, outputs and temporaries
  /// False when some kernel accumulates with atomics (run-to-run results may differ in the
  /// last bits); the lowering sets it.
  bool deterministic = true;
  /// The IR after each pass ("(unchanged)" where a pass changed nothing); filled only when
  /// LowerOptions::record_passes is set.
  std::string pass_dump;
};

}  // namespace adjoint::compiler
