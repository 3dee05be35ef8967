// How the process heap behaves while NVRTC compiles a cold program's translation units.
//
// NVRTC allocates and frees hundreds of MB per compile (front end, NVVM, ptxas). With glibc's
// default settings the freed memory goes back to the kernel (munmap of large blocks, trimming
// of the heaps' tops) and every compile faults it in again (~2,500 page faults for a
// grid_sampler kernel, measured here). In one process compiling on many threads those system
// calls and faults take the process's memory-map lock and, for munmap and madvise, interrupt
// every other running thread to flush its TLB; separate processes do not share that cost. A
// CompileHeapScope keeps the freed memory in the process's heaps for the duration of the
// compiles (glibc's mallopt: trim threshold, top pad and, at level 2, the mmap threshold),
// then restores glibc's defaults and returns what is free to the kernel (malloc_trim), so
// the host application's memory is as before once the program is built.
// Chosen by ADJOINT_TUNE_COMPILE_HEAP; a no-op where the C library is not glibc or where the
// user set glibc's malloc tunables in the environment (their settings win).
#pragma once

namespace adjoint::runtime {

/// Heap settings for the duration of a batch of NVRTC compiles (see the file comment).
class CompileHeapScope {
 public:
  /// Applies the level ADJOINT_TUNE_COMPILE_HEAP names: 0 none, 1 no trimming and a large
  /// top pad, 2 also large blocks from the heap instead of mmap. Throws Error(kInvalidArgument)
  /// for any other value.
  CompileHeapScope();
  /// Calls finish() if it has not run.
  ~CompileHeapScope();
  CompileHeapScope(const CompileHeapScope&) = delete;
  CompileHeapScope& operator=(const CompileHeapScope&) = delete;

  /// Restores glibc's default top pad and trim threshold (after level 2: the mmap threshold
  /// stays at 32 MiB and the trim threshold becomes 64 MiB, the values glibc's own adaptation
  /// reaches, since no mallopt can turn that adaptation back on) and returns the heaps' free
  /// memory to the kernel; the milliseconds that took. Only the first call does anything.
  double finish();

  /// The level in effect for this scope (0 when nothing was changed).
  int level() const { return level_; }

 private:
  int level_ = 0;
};

/// The level ADJOINT_TUNE_COMPILE_HEAP names (default 1), validated.
int compile_heap_level_from_environment();

}  // namespace adjoint::runtime
