// CompileHeapScope: glibc's mallopt around a batch of NVRTC compiles (see compile_heap.h).
#include "runtime/compile_heap.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <string>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "adjoint/error.h"

namespace adjoint::runtime {
namespace {

// glibc's documented defaults (mallopt(3)): what the scope restores. Any mallopt of these
// parameters also turns off glibc's adaptive mmap threshold for good (mallopt(3)), so after
// level 2 the scope leaves the values that adaptation reaches at its maximum: blocks up to
// 32 MiB from the heaps and a trim threshold of twice that.
constexpr int kDefaultTrimThreshold = 128 * 1024;
constexpr int kAdaptedTrimThreshold = 64 * 1024 * 1024;
constexpr int kDefaultTopPad = 128 * 1024;
// While compiling: never trim, grow a heap 64 MiB at a time, and (level 2) serve blocks up to
// 32 MiB, glibc's largest mmap threshold, from the heaps.
constexpr int kCompileTopPad = 64 * 1024 * 1024;
constexpr int kCompileMmapThreshold = 32 * 1024 * 1024;

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

int compile_heap_level_from_environment() {
  const char* text = std::getenv("ADJOINT_TUNE_COMPILE_HEAP");
  if (text == nullptr || *text == '\0') return 0;
  const std::string word = text;
  if (word == "0" || word == "1" || word == "2") return word[0] - '0';
  throw Error("ADJOINT_TUNE_COMPILE_HEAP: expected 0 (glibc's defaults), 1 (no trimming while "
              "compiling) or 2 (also no mmap of large blocks), got '" + word + "'",
              ErrorCode::kInvalidArgument);
}

CompileHeapScope::CompileHeapScope() {
  const int level = compile_heap_level_from_environment();
#if defined(__GLIBC__)
  if (level == 0 || user_tunes_malloc()) return;
  mallopt(M_TRIM_THRESHOLD, -1);  // no heap is trimmed (glibc: -1 disables trimming)
  mallopt(M_TOP_PAD, kCompileTopPad);
  if (level >= 2) mallopt(M_MMAP_THRESHOLD, kCompileMmapThreshold);
  level_ = level;
#else
  (void)level;
#endif
}

CompileHeapScope::~CompileHeapScope() { finish(); }

double CompileHeapScope::finish() {
  if (level_ == 0) return 0;
  const auto start = std::chrono::steady_clock::now();
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, level_ >= 2 ? kAdaptedTrimThreshold : kDefaultTrimThreshold);
  mallopt(M_TOP_PAD, kDefaultTopPad);
  malloc_trim(0);
#endif
  level_ = 0;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace adjoint::runtime
