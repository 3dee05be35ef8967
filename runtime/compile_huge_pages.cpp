// CompileHugePagesScope: glibc's mallopt and madvise around a batch of NVRTC compiles
// (see compile_huge_pages.h).
#include "runtime/compile_huge_pages.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#include <sys/mman.h>
#endif

#include "adjoint/error.h"

namespace adjoint::runtime {
namespace {

// glibc on 64-bit: a non-main arena's heap is a region of HEAP_MAX_SIZE = 64 MiB aligned to
// its size, and the mmap threshold's adaptive maximum is 32 MiB (mallopt(3)).
constexpr std::uintptr_t kGlibcHeapRegion = std::uintptr_t{64} << 20;
constexpr int kCompileMmapThreshold = 32 * 1024 * 1024;
constexpr int kCompileTopPad = 64 * 1024 * 1024;
constexpr int kAdaptedTrimThreshold = 64 * 1024 * 1024;  // glibc: twice the mmap threshold
constexpr int kDefaultTopPad = 128 * 1024;

/// True when the environment already tunes glibc's allocator: those settings are the user's.
bool user_tunes_malloc() {
  for (const char* variable : {"GLIBC_TUNABLES", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
                               "MALLOC_MMAP_THRESHOLD_", "MALLOC_MMAP_MAX_"}) {
    const char* text = std::getenv(variable);
    if (text != nullptr && *text != '\0') return true;
  }
  return false;
}

}  // namespace

bool compile_huge_pages_from_environment() {
  const char* text = std::getenv("ADJOINT_TUNE_COMPILE_HUGE_PAGES");
  if (text == nullptr || *text == '\0' || std::string(text) == "0") return false;
  if (std::string(text) == "1") return true;
  throw Error(std::string("ADJOINT_TUNE_COMPILE_HUGE_PAGES: expected 0 (glibc's settings) or 1 "
                          "(huge pages for the compiles' heaps), got '") + text + "'",
              ErrorCode::kInvalidArgument);
}

CompileHugePagesScope::CompileHugePagesScope(bool wanted) {
#if defined(__GLIBC__)
  if (!wanted || user_tunes_malloc()) return;
  mallopt(M_MMAP_THRESHOLD, kCompileMmapThreshold);
  mallopt(M_TOP_PAD, kCompileTopPad);
  mallopt(M_TRIM_THRESHOLD, -1);  // -1: never trim
  active_ = true;
#else
  (void)wanted;
#endif
}

CompileHugePagesScope::~CompileHugePagesScope() { finish(); }

void CompileHugePagesScope::prepare_thread() const {
#if defined(__GLIBC__)
  if (!active_) return;
  void* probe = std::malloc(64);  // attaches the thread to its arena, as its compile will
  if (probe == nullptr) return;
  const std::uintptr_t region = reinterpret_cast<std::uintptr_t>(probe) & ~(kGlibcHeapRegion - 1);
  std::free(probe);
  // Only the parts of the region that are mapped are affected; an error changes nothing.
  madvise(reinterpret_cast<void*>(region), kGlibcHeapRegion, MADV_HUGEPAGE);
#endif
}

double CompileHugePagesScope::finish() {
  if (!active_) return 0;
  const auto start = std::chrono::steady_clock::now();
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, kAdaptedTrimThreshold);
  mallopt(M_TOP_PAD, kDefaultTopPad);
  malloc_trim(0);
#endif
  active_ = false;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace adjoint::runtime
