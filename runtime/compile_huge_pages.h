// Huge pages for the memory NVRTC allocates while a cold program compiles (off by default).
//
// A compile touches tens of MB of fresh heap memory (front end, NVVM, ptxas): ~2,500 to 3,500
// page faults per kernel here, 42-50 thousand per multi-kernel program on the H100 host. With
// glibc's malloc tunables `glibc.malloc.hugetlb=1` and large thresholds set at process start,
// that host faulted 13x less and compiled mhc_pre_backward's 13 kernels in 409 instead of
// 506-694 ms (docs/runtime.md, "Where a cold prepare waits"); a library cannot set tunables in
// a process that has started. A CompileHugePagesScope does the nearest thing it can: for the
// duration of the compiles, glibc serves blocks up to 32 MiB from its heaps, grows them 64 MiB
// at a time and never trims them (mallopt), and each compile thread marks its own heap
// eligible for transparent huge pages (madvise MADV_HUGEPAGE over the 64 MiB-aligned region
// that holds its allocations: glibc's non-main arenas live in such regions). Afterwards the
// top pad and trim threshold go back (the mmap threshold stays at 32 MiB, the value glibc's
// own adaptation reaches, as no mallopt can turn that adaptation on again) and the free
// memory is returned (malloc_trim). Nothing here changes what is compiled. A region that is
// not a glibc heap only becomes eligible for huge pages. A no-op where the C library is not
// glibc or where the user set glibc's malloc tunables (their settings win).
// Only batches of several units use it (a single small compile pays more for zeroing 2 MiB
// pages than it saves in faults). Measured on the development machine (2 threads,
// `adjoint_jit_bench --cold-compile-child`, one unit per kernel): grid_sampler bicubic's 18
// units 37,900 -> 3,400-3,900 page faults, mhc_pre_backward's 13 units 27,700 -> 3,900, the
// cubins byte-identical, wall time within noise on 2 cores; not yet on the H100, hence off by
// default (ADJOINT_TUNE_COMPILE_HUGE_PAGES).
#pragma once

namespace adjoint::runtime {

/// The allocator settings above for the duration of a batch of compiles, when wanted.
class CompileHugePagesScope {
 public:
  /// `wanted`: ADJOINT_TUNE_COMPILE_HUGE_PAGES (BinaryRequest::compile_huge_pages).
  explicit CompileHugePagesScope(bool wanted);
  /// Calls finish() if it has not run.
  ~CompileHugePagesScope();
  CompileHugePagesScope(const CompileHugePagesScope&) = delete;
  CompileHugePagesScope& operator=(const CompileHugePagesScope&) = delete;

  /// True while the settings are in effect.
  bool active() const { return active_; }
  /// Called by each compile thread before its first compile: marks the heap that serves the
  /// calling thread eligible for huge pages (nothing when the scope is inactive).
  void prepare_thread() const;
  /// Restores the settings (see the file comment) and returns the heaps' free memory to the
  /// kernel; the milliseconds that took. Only the first call does anything.
  double finish();

 private:
  bool active_ = false;
};

/// ADJOINT_TUNE_COMPILE_HUGE_PAGES: 0 (default) or 1; anything else is an error naming it.
bool compile_huge_pages_from_environment();

}  // namespace adjoint::runtime
