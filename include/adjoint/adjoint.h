// The C++ API of adjoint for host applications that embed the runtime.
//
// Ops run on the caller's device buffers and the caller's CUstream, with no hidden
// synchronization. The first call for a new specialization (op, attributes, shapes, strides,
// dtypes, determinism, device) compiles it (or loads it from the disk cache or a kernel
// package); later calls are a hash lookup and a cuLaunchKernel. Errors are adjoint::Error
// exceptions whose message says what was wrong (op, argument, expected vs given; for a failed
// compile the NVRTC log and where the source was written).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cuda.h>

#include "adjoint/error.h"

namespace adjoint {

namespace runtime {
struct LoadedProgram;
}

/// Element types (same values as the C API's adjoint_dtype).
enum class DType : int32_t { kF16 = 0, kBF16 = 1, kF32 = 2, kF64 = 3, kI32 = 4, kI64 = 5, kBool = 6 };

/// Whether a call must be bitwise reproducible.
enum class Determinism {
  kDefault,       ///< deterministic unless a kernel has no deterministic strategy
  kAllowAtomics,  ///< atomics allowed where they are faster
};

/// A device tensor owned by the caller. Strides are in elements; empty means contiguous.
struct TensorRef {
  CUdeviceptr data = 0;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

/// A tensor a program binds, as the specialization expects it.
struct TensorInfo {
  std::string name;
  bool is_output = false;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

/// Tensors bound by name for a launch.
using Bindings = std::vector<std::pair<std::string, TensorRef>>;

/// One specialization compiled and loaded for the current CUDA context: prepare once, launch
/// many times.
class Program {
 public:
  /// Parses `spec` ("op key=value ...", see `adjoint ops`) and compiles or loads it.
  static Program prepare(const std::string& spec, Determinism determinism = Determinism::kDefault);

  /// Queues the program on `stream`. Every input and output must be bound with the dtype, shape
  /// and strides the specialization expects. Temporaries come from a stream-ordered allocation
  /// and whatever is accumulated into is zeroed in the same stream.
  void launch(const Bindings& tensors, CUstream stream) const;

  /// The inputs and outputs, in declaration order.
  std::vector<TensorInfo> tensors() const;
  /// Whether every kernel is run-to-run deterministic.
  bool deterministic() const;
  /// The canonical specialization text (the cache key).
  const std::string& spec() const;

  explicit Program(std::shared_ptr<const runtime::LoadedProgram> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<const runtime::LoadedProgram> impl_;
};

/// Program::prepare + launch, through the in-memory cache.
void run(const std::string& spec, const Bindings& tensors, CUstream stream,
         Determinism determinism = Determinism::kDefault);

/// ATen's upsample_nearest2d_backward: writes grad_input (shape input_size; channels-last when
/// grad_output is, else contiguous) from grad_output, which may have any strides that do not
/// overlap (read in place by a specialization for those strides). Deterministic.
void upsample_nearest2d_backward(const TensorRef& grad_output, const TensorRef& grad_input,
                                 std::array<int64_t, 2> output_size,
                                 std::array<int64_t, 4> input_size,
                                 std::optional<double> scales_h, std::optional<double> scales_w,
                                 CUstream stream);

/// Registers a kernel package built by `adjoint aot` (also read from ADJOINT_PACKAGE_PATH, a
/// colon-separated list, at first use). Throws if its version or files do not match.
void load_package(const std::string& directory);

/// With JIT disabled, a call no package covers fails instead of compiling with NVRTC.
void set_jit_enabled(bool enabled);

/// The dynamic-shape policy (docs/dynamic_shapes.md), as ADJOINT_DYNAMIC: kNever always
/// specializes; kAuto serves a specialization with a kernel generic in an axis once a second
/// distinct size shows up on that dynamic axis; kBatch (default) does so for batch axes only
/// and for the (batch, seq) token pair of the per-token mHC ops, whose generic kernels are as
/// fast as specialized ones; kAlways makes every dynamic axis
/// generic.
enum class DynamicShapes { kNever, kAuto, kAlways, kBatch };
void set_dynamic_shapes(DynamicShapes mode);

/// What the engine has built since start (or reset_compile_stats()).
struct CompileStats {
  uint64_t specialized_programs = 0;  ///< specialized programs built (from any binary source)
  uint64_t generic_programs = 0;      ///< generic programs built
  uint64_t specialized_compiles = 0;  ///< of those, compiled by NVRTC
  uint64_t generic_compiles = 0;
  uint64_t generic_bindings = 0;   ///< specializations served by a generic program
  uint64_t generic_fallbacks = 0;  ///< generic programs the compiler refused (specialized)
};
CompileStats compile_stats();
/// Zeroes the counters and forgets the sizes the policy has seen.
void reset_compile_stats();

/// The library version, e.g. "0.1.0".
const char* version();

}  // namespace adjoint
