// The JIT engine: turns a specialization into loaded kernels for the current CUDA context and
// launches them on a caller's stream.
//
//   Specialization --build--> IR --lower--> CompiledProgram (CUDA sources, launch dims)
//     --binary--> package binary | disk-cache hit | NVRTC compile (then stored on disk)
//     --cuModuleLoadData--> LoadedProgram (CUfunctions), kept in the in-memory cache
//
// The in-memory cache is keyed by (specialization text, determinism, context) and is
// single-flight: many threads asking for the same new program compile it once, with no global
// lock held while NVRTC runs; a failed compile is remembered and rethrown, not retried. It
// keeps at most ADJOINT_MEMORY_CACHE_MAX_PROGRAMS programs (default 1024), unloading the least
// recently used, so a process that prepares many specializations keeps bounded memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda.h>

#include "compiler/compiled_program.h"
#include "compiler/lower.h"
#include "ops/registry.h"
#include "runtime/dynamic_policy.h"
#include "runtime/temporary_arena.h"

namespace adjoint::runtime {

/// A device tensor bound for one launch.
struct BoundTensor {
  std::string name;
  CUdeviceptr data = 0;
  ir::DType dtype = ir::DType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  ///< empty: contiguous
};

/// The same, by reference to the caller's arrays (nothing copied): what the C API and Python's
/// compiled fast path pass on every launch.
struct TensorView {
  const char* name = nullptr;
  CUdeviceptr data = 0;
  ir::DType dtype = ir::DType::kF32;
  int rank = 0;
  const int64_t* shape = nullptr;
  const int64_t* strides = nullptr;  ///< null: contiguous
};

struct LoadedKernel {
  std::string entry;
  CUfunction function = nullptr;
  compiler::LaunchDims launch;
  std::vector<int> params;       ///< buffer index of each parameter
  std::vector<int> zero_before;  ///< buffer indices zeroed before the launch
  /// Generic kernels (docs/dynamic_shapes.md): the size parameters (by source), their width in
  /// bytes (4 or 8) and the point count the grid is derived from; in a binding to one
  /// specialization, the values passed after the pointers (launch.grid is then derived).
  std::vector<std::string> size_params;
  int size_param_bytes = 8;
  compiler::SizeProduct points;
  int points_per_thread = 1;  ///< generic kernels: the group each thread computes
  /// Generic kernels without a grid-stride loop (CompiledKernel::one_index_per_thread): the
  /// grid must cover every linear index, uncapped.
  bool one_index_per_thread = false;
  std::vector<int64_t> size_args;
};

/// Where a program's binaries came from, for logs and benchmarks.
enum class BinarySource { kPackage, kDiskCache, kCompiled };

/// A specialization loaded in one context. Immutable once built; shared by all callers.
struct LoadedProgram {
  std::string spec;  ///< canonical specialization text
  compiler::Determinism determinism;
  CUcontext context = nullptr;
  std::vector<compiler::BufferInfo> buffers;
  std::vector<LoadedKernel> kernels;
  std::vector<CUmodule> modules;
  bool deterministic = true;
  BinarySource source = BinarySource::kCompiled;
  double compile_milliseconds = 0;  ///< NVRTC time spent building it (0 on a cache hit)
  /// A generic program: its size parameters (by source). A binding of one to a specialization
  /// has them empty and holds the generic program in `generic` (it owns no modules).
  std::vector<std::string> sizes;
  std::shared_ptr<const LoadedProgram> generic;
  /// Launch kernels with programmatic stream serialization (Hopper's programmatic dependent
  /// launch: a kernel's launch overlaps the end of the one before; every kernel waits for it in
  /// its first statement). Set where the device is sm_90 or later, the driver has
  /// cuLaunchKernelEx and ADJOINT_TUNE_PROGRAMMATIC_LAUNCH is not 0; it applies to the kernels
  /// of at most `programmatic_launch_blocks` blocks (every kernel by default; two blocks per SM
  /// under ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=1; docs/runtime.md, "Programmatic dependent launch").
  bool programmatic_launch = false;
  int64_t programmatic_launch_blocks = 0;
  /// Where a launch places the temporaries under ADJOINT_TUNE_TEMPORARY_ARENA=1
  /// (temporary_arena.h): planned once when the program is loaded, and placed again for each
  /// binding of a generic program to its sizes (bind_generic_program), never per launch.
  TemporaryArena temporary_arena;

  /// Index of the buffer named `name`, or -1.
  int buffer_index(const std::string& name) const;
  /// Checks the bindings and queues every kernel on `stream`.
  void launch(const std::vector<BoundTensor>& tensors, CUstream stream) const;
  /// The same without copies: no heap allocation when the program has no temporaries and at
  /// most kInlineBuffers buffers (tensors given in the program's order are matched without a
  /// name search). Every check and error message is the same as above.
  void launch(const TensorView* tensors, int count, CUstream stream) const;
  static constexpr size_t kInlineBuffers = 32;
  ~LoadedProgram();
};

/// Counters of the engine's work since the process started (or reset_compile_stats): what
/// tests and benchmarks count to see the dynamic-shape policy at work.
struct CompileStats {
  uint64_t specialized_programs = 0;  ///< specialized programs built (any binary source)
  uint64_t generic_programs = 0;      ///< generic programs built (any binary source)
  uint64_t specialized_compiles = 0;  ///< specialized programs whose binaries NVRTC compiled
  uint64_t generic_compiles = 0;      ///< generic programs whose binaries NVRTC compiled
  uint64_t generic_bindings = 0;      ///< specializations served by a generic program
  uint64_t generic_fallbacks = 0;     ///< generic programs refused by the compiler: specialized
};

/// A binding of the generic `program` to one specialization's size values (in the order of
/// program->sizes): the buffers' shapes, each kernel's size arguments and grid, and the
/// temporaries' arena placed again from the plan `program` was loaded with (planned whole when
/// it has none). No compile.
std::shared_ptr<const LoadedProgram> bind_generic_program(
    const std::shared_ptr<const LoadedProgram>& program, const std::string& spec_text,
    const std::vector<int64_t>& values);

/// The process-wide engine.
class Engine {
 public:
  static Engine& instance();

  /// The loaded program for `spec` in the current context (the primary context of device 0 is
  /// made current when the thread has none).
  std::shared_ptr<const LoadedProgram> prepare(const ops::Specialization& spec,
                                               compiler::Determinism determinism);
  /// The same, from specialization text.
  std::shared_ptr<const LoadedProgram> prepare(const std::string& spec_text,
                                               compiler::Determinism determinism);
  /// A program a user built in the IR (see examples/custom_op): verified, lowered and compiled
  /// like a shipped op, cached under its printed form (the same program built twice is one
  /// entry; packages and the disk cache apply by kernel source as usual).
  std::shared_ptr<const LoadedProgram> prepare(const ir::Program& program,
                                               compiler::Determinism determinism);

  /// The in-memory cache keeps at most this many loaded programs by default
  /// (ADJOINT_MEMORY_CACHE_MAX_PROGRAMS overrides it); past it the least recently used are
  /// unloaded once no caller holds them.
  static constexpr size_t kDefaultProgramCacheCapacity = 1024;
  /// Sets the cap (0: unbounded), unloading least recently used programs over it now.
  void set_program_cache_capacity(size_t programs);
  size_t program_cache_capacity() const;
  /// Programs in the in-memory cache (loaded, failed or being built).
  size_t cached_programs() const;

  /// The dynamic-shape policy (runtime/dynamic_policy.h): ADJOINT_DYNAMIC at start, default batch.
  void set_dynamic_mode(DynamicMode mode) { dynamic_mode_ = mode; }
  DynamicMode dynamic_mode() const { return dynamic_mode_; }
  CompileStats compile_stats() const;
  /// Zeroes the counters and forgets the sizes the policy has seen (loaded programs stay).
  void reset_compile_stats();

  void set_jit_enabled(bool enabled) { jit_enabled_ = enabled; }
  bool jit_enabled() const { return jit_enabled_; }

 private:
  Engine();
  /// Lowers, compiles or finds, and loads `ir_program`; `spec_text` names it in errors and
  /// dumps, `name` prefixes its dump files.
  std::shared_ptr<const LoadedProgram> build(const ir::Program& ir_program,
                                             const std::string& spec_text, const std::string& name,
                                             compiler::Determinism determinism, CUcontext context,
                                             int arch, double build_ir_ms);
  /// A specialization `choice` says to serve with a generic program: the generic program
  /// (built once per generic key) bound to the specialization's sizes.
  std::shared_ptr<const LoadedProgram> prepare_generic(const ops::Specialization& spec,
                                                       const ProgramChoice& choice,
                                                       compiler::Determinism determinism,
                                                       CUcontext context);
  struct Caches;
  std::unique_ptr<Caches> caches_;
  bool jit_enabled_ = true;
  std::atomic<DynamicMode> dynamic_mode_;
  DynamicPolicy policy_;
  struct Counters;
  std::unique_ptr<Counters> counters_;
};

/// LowerOptions for `arch` with this process's ADJOINT_TUNE_* knobs applied: exactly what the
/// engine lowers with, so that `adjoint aot`, `compile` and `cuda` produce the kernels (and the
/// package keys) the runtime will look up. Throws adjoint::Error for an invalid knob value.
compiler::LowerOptions lower_options(compiler::Determinism determinism, int arch);

/// ops::BuildOptions with this process's op-building knobs (ADJOINT_TUNE_MHC_*) applied: what
/// the engine builds a specialization's program with, and so what the CLI's ir, cuda, compile,
/// aot and demo build with too. Throws adjoint::Error for an invalid knob value.
ops::BuildOptions build_options();

/// The current context, made current from device 0's primary context if there is none.
CUcontext current_context();

}  // namespace adjoint::runtime
