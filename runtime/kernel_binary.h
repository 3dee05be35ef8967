// Where the engine's kernel binaries come from, in order: a loaded kernel package (per kernel, by
// the content key of its source), the disk cache, or NVRTC (whose result is then stored on disk).
// Needs no GPU and no driver: the engine loads the images this returns.
//
// The kernels of one program that no package covers are compiled as ONE translation unit.
// NVRTC's fixed cost per compile (front-end start-up and builtin header, libdevice link, ptxas
// set-up: about 20 of the 35 ms a typical generated kernel takes) is then paid once per program,
// the disk cache holds one entry per program and the engine loads one module. Each kernel's
// source keeps its own namespace and, through `#line`, its own file name and line numbers, so
// helpers cannot collide and diagnostics point into the kernel's source; the SASS of every
// kernel is the same as when it is compiled alone (docs/runtime.md). With ADJOINT_DUMP asking
// for log, ptx or sass, kernels are compiled one by one so that each gets its own files.
//
// With more than one compile thread (BinaryRequest::compile_threads, ADJOINT_COMPILE_THREADS),
// a program's kernels are instead split into several translation units (compile_units,
// ADJOINT_COMPILE_UNITS: by default one per kernel on 8 threads or more, one combined unit
// below; a count groups them), balanced by source size, compiled concurrently. NVRTC programs
// are independent, but on the H100 host one NVRTC program per kernel on 16 threads made each
// compile 2-4x slower than alone (NVRTC's own contention), so fewer, larger units can finish
// first; on the final kernels one unit per kernel measured faster (docs/runtime.md). Each unit may also let NVRTC optimize its kernels on
// several threads (split_compile, ADJOINT_TUNE_SPLIT_COMPILE: -split-compile=N). Each unit is
// its own disk-cache entry, published atomically as before; a failed unit's error (NVRTC log,
// written source) is rethrown after every thread has finished, the first failing kernel in
// program order winning.
//
// A disk-cache hit never loads NVRTC: the key comes from locate_nvrtc() (a file lookup and the
// library's ELF build-id) and compile_cache_inputs(), not from the loaded library.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/disk_cache.h"
#include "runtime/engine.h"
#include "runtime/nvrtc.h"

namespace adjoint::runtime {

/// One kernel of a program: its entry point and complete CUDA source.
struct KernelSource {
  std::string entry;
  std::string source;
};

/// The binaries the engine needs for one program.
struct BinaryRequest {
  std::string program;  ///< the program's name (the op), names a combined translation unit
  std::vector<KernelSource> kernels;
  int arch = 90;            ///< the device's compute capability, major * 10 + minor
  bool jit_enabled = true;  ///< false: only kernel packages may provide binaries
  std::string spec;         ///< canonical specialization text, for messages
  std::string dump_key;     ///< file name prefix of ADJOINT_DUMP output
  /// Threads compiling a program's kernels: 1 compiles them as one translation unit; more
  /// splits them into compile_units units compiled that many at a time
  /// (compile_threads_from_environment()).
  int compile_threads = 1;
  /// With compile_threads > 1: the most translation units a program's kernels are split into
  /// (kernel_groups); 0 means one per kernel (compile_units_from_environment()).
  int compile_units = 0;
  /// NVRTC threads per unit of several kernels (`-split-compile=N`, part of the unit's options
  /// and key); 1 or less: none (split_compile_from_environment()).
  int split_compile = 1;
  /// Options added to every NVRTC compile of this request (nvrtc_options_from_environment());
  /// part of each unit's disk-cache key.
  std::vector<std::string> nvrtc_options;
  /// Huge pages for the compiles' heaps (runtime/compile_huge_pages.h); changes no binary.
  bool compile_huge_pages = false;
  /// Several units at once are compiled in adjoint_compile_worker processes, one per thread
  /// (runtime/compile_worker.h, ADJOINT_COMPILE_PROCESSES); changes no binary.
  bool compile_processes = false;
};

/// The extra NVRTC options ADJOINT_TUNE_NVRTC_OPTIONS asks for, split at spaces (unset or
/// empty: none), e.g. "-Ofc=mid", then -DADJOINT_BF16_CVT=0 when ADJOINT_TUNE_BF16_CVT says 0
/// (unset, empty or 1: nothing, the template's default). Read on every call; throws
/// adjoint::Error (kInvalidArgument) naming the variable when a word does not start with '-' or
/// ADJOINT_TUNE_BF16_CVT is not 0 or 1.
std::vector<std::string> nvrtc_options_from_environment();

/// The compile thread count ADJOINT_COMPILE_THREADS asks for: unset, empty or 0 means the
/// hardware's thread count, at most 16; otherwise an integer in [1, 256]. Read on every call;
/// throws adjoint::Error (kInvalidArgument) naming the variable for any other value.
int compile_threads_from_environment();

/// How many translation units ADJOINT_COMPILE_UNITS asks for, given `threads` compile
/// threads: unset, empty or "auto" means max(1, threads / 4) (the fastest split measured on the
/// H100 host, docs/runtime.md); "kernel" means one per kernel (0); otherwise an integer in
/// [1, 256]. Read on every call; throws adjoint::Error (kInvalidArgument) naming the variable
/// for any other value.
int compile_units_from_environment(int threads);

/// The -split-compile thread count ADJOINT_TUNE_SPLIT_COMPILE asks for: unset, empty or 1
/// means none (1); otherwise an integer in [2, 64]. Read on every call; throws adjoint::Error
/// (kInvalidArgument) naming the variable for any other value.
int split_compile_from_environment();

/// `kernels` (indices into a program's kernels, with their source sizes in `source_sizes`)
/// split into at most `units` groups (0 or more than there are kernels: one per kernel):
/// the largest source first, each into the group with the fewest bytes so far (the earlier
/// group on ties), each group then in program order, the groups ordered by their first kernel.
/// Deterministic, so that a later process forms the same units and hits their cache entries.
std::vector<std::vector<size_t>> kernel_groups(const std::vector<size_t>& kernels,
                                               const std::vector<size_t>& source_sizes,
                                               int units);

/// Where the time of one acquire_kernel_images call went.
struct AcquireProfile {
  double nvrtc_load_ms = 0;    ///< locating and loading NVRTC, when this call did it first
  double compile_wall_ms = 0;  ///< wall time of the NVRTC compiles, from first start to last end
  double compile_sum_ms = 0;   ///< the NVRTC compile times added up over units
  size_t units_compiled = 0;   ///< translation units NVRTC compiled
  int threads = 1;             ///< threads that compiled them
  double memory_release_ms = 0;  ///< malloc_trim after them (CompileHugePagesScope)
  bool processes = false;  ///< compiled in worker processes (compile_worker.h)
};

/// A loadable image, a cubin or NUL-terminated PTX, holding some of a program's kernels.
struct KernelImage {
  std::vector<char> bytes;
  BinarySource source = BinarySource::kCompiled;
  std::vector<size_t> kernels;      ///< indices into BinaryRequest::kernels
  double compile_milliseconds = 0;  ///< NVRTC time spent now (0 for packages and cache hits)
  std::string disk_cache_key;  ///< the entry it was loaded from or stored as; empty for packages
};

/// Images that together hold every kernel of `request` exactly once: one per packaged kernel,
/// then one for all the others (one per kernel when ADJOINT_DUMP asks for log, ptx or sass),
/// from `cache` or compiled by NVRTC and stored in `cache`. Throws adjoint::Error:
/// kNotAvailable naming the kernel when JIT is disabled and no package covers it, or when
/// NVRTC cannot be found; kCompileFailed with NVRTC's log and the path of the rejected source.
/// With compile_threads > 1 (and no per-kernel dumps asked for), one image per unit of
/// kernel_groups(compile_units), compiled concurrently. `profile`, when given, receives where
/// the time went.
std::vector<KernelImage> acquire_kernel_images(const BinaryRequest& request,
                                               const DiskCache& cache,
                                               AcquireProfile* profile = nullptr);

/// The translation unit compiled for `kernels`: the source itself for one kernel; for several,
/// their #include lines once at the top, then each source in `namespace adjoint_kernel_<i>`
/// after `#line 1 "<entry>.cu"` (its #include lines left blank, so line numbers hold).
/// Assumes, as the emitter guarantees, that kernels include headers only at file scope and
/// that those headers are include-guarded.
std::string combined_translation_unit(const std::vector<KernelSource>& kernels);

/// The NVRTC request for compiling `kernels` (indices into `request.kernels`) as one unit
/// (with `-split-compile=<request.split_compile>` when it holds several kernels and
/// split_compile > 1).
CompileRequest unit_compile_request(const BinaryRequest& request,
                                    const std::vector<size_t>& kernels);

/// The disk cache key of `compile` with the NVRTC at `location`. Loads nothing.
std::string unit_cache_key(const CompileRequest& compile, const NvrtcLocation& location);

}  // namespace adjoint::runtime
