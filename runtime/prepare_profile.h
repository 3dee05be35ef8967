// Where the time of the engine's most recent program build on this thread went: building the
// IR, lowering (emission), acquiring binaries (package, disk cache, NVRTC load and compiles,
// their wall time and their sum when they run concurrently) and loading modules. Cheap
// enough to record always (a few steady_clock reads per build); logged at debug level and read
// by adjoint_jit_bench to break a disk-cache hit down into its steps.
#pragma once

#include <cstddef>

#include "runtime/engine.h"

namespace adjoint::runtime {

/// Wall-clock milliseconds of each step of one Engine build (a miss of the in-memory cache).
struct PrepareProfile {
  double build_ir_ms = 0;      ///< Specialization::build_program
  double lower_ms = 0;         ///< compiler::lower
  double binaries_ms = 0;      ///< acquire_kernel_images: package, disk cache or NVRTC
  double compile_ms = 0;       ///< NVRTC compile time summed over units (0 on a hit)
  double nvrtc_load_ms = 0;    ///< locating and loading NVRTC, when this build did it first
  double compile_wall_ms = 0;  ///< wall time of the (concurrent) NVRTC compiles
  size_t units_compiled = 0;   ///< translation units NVRTC compiled
  int compile_threads = 1;     ///< threads that compiled them
  double memory_release_ms = 0;  ///< returning their free memory (compile_huge_pages.h)
  double load_modules_ms = 0;  ///< cuModuleLoadData and cuModuleGetFunction
  double total_ms = 0;         ///< the whole build, including the above
  BinarySource source = BinarySource::kCompiled;
  size_t kernels = 0;  ///< kernels of the program
  size_t images = 0;   ///< modules loaded for them
};

/// The profile of the most recent build on the calling thread (all zeros before the first).
const PrepareProfile& last_prepare_profile();

}  // namespace adjoint::runtime
