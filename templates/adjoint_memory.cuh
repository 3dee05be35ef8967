// Vector loads and stores of element groups: how a generated kernel moves the N consecutive
// elements one thread reads or writes (a span of an input, the V outputs of a vectorized
// stage) with as few memory instructions as the alignment allows.
//
// The compiler proves that an access's offset from its tensor's base is a multiple of
// AccessBytes (constant strides and offsets) and passes that width; the base pointer is the
// caller's, so its alignment is checked here, at run time. The check is the same for every
// thread (the offsets are aligned), so the branch never diverges; a misaligned base (a view with
// an odd storage offset) takes the element-by-element path and stays correct.
//
// Loads are plain loads: through a `const T* __restrict__` kernel parameter the compiler emits
// the read-only path (ld.global.nc) itself, and a tensor the same kernel writes is read
// coherently. The *_streaming variants issue the aligned words with __ldcs / __stcs
// (ld.global.cs / st.global.cs: cache streaming, evict first, for data touched once; NVRTC
// declares them even with -minimal); their misaligned fallback moves plain elements. Host
// emulation has no caches: there they are plain loads and stores. memcpy between the words and
// the element array is a register move once compiled (NVRTC declares memcpy itself; host
// emulation includes <cstring>). copy_elements_async / commit_async / wait_async wrap cp.async
// (global to shared memory without registers; sm_80+), which a thread-tiled kernel's aligned
// copy uses for prefetched spans; host emulation copies at once.
#pragma once

#include "adjoint_types.cuh"

namespace adjoint {

#if defined(ADJOINT_DEVICE_CODE)

/// The unsigned type of one memory access of `Bytes` bytes.
template <int Bytes>
struct AccessWord;
template <>
struct AccessWord<1> {
  using type = unsigned char;
};
template <>
struct AccessWord<2> {
  using type = unsigned short;
};
template <>
struct AccessWord<4> {
  using type = unsigned int;
};
template <>
struct AccessWord<8> {
  using type = uint2;
};
template <>
struct AccessWord<16> {
  using type = uint4;
};

/// True when `address` is a multiple of `Bytes`.
template <int Bytes, typename T>
ADJOINT_DEVICE bool is_aligned(const T* address) {
  return (reinterpret_cast<unsigned long long>(address) & (Bytes - 1)) == 0;
}

/// How a word is moved: plainly, or with the evict-first streaming cache hint.
enum class CacheHint { kNormal, kStreaming };

/// One word from `address`, with the cache hint on the GPU.
template <CacheHint Hint, typename Word>
ADJOINT_DEVICE Word load_word(const Word* address) {
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
  if constexpr (Hint == CacheHint::kStreaming) {
    return __ldcs(address);
  } else {
    return *address;
  }
#else
  return *address;
#endif
}

/// One word to `address`, with the cache hint on the GPU.
template <CacheHint Hint, typename Word>
ADJOINT_DEVICE void store_word(Word* address, const Word& value) {
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
  if constexpr (Hint == CacheHint::kStreaming) {
    __stcs(address, value);
  } else {
    *address = value;
  }
#else
  *address = value;
#endif
}

/// values[k] = address[k] for k < N, in accesses of AccessBytes bytes (with cache hint Hint)
/// when `address` is aligned to them. AccessBytes must divide N * sizeof(T).
template <int AccessBytes, CacheHint Hint, typename T, int N>
ADJOINT_DEVICE void load_elements_hinted(T (&values)[N], const T* address) {
  using Word = typename AccessWord<AccessBytes>::type;
  constexpr int kWords = static_cast<int>(N * sizeof(T)) / AccessBytes;
  static_assert(kWords * AccessBytes == static_cast<int>(N * sizeof(T)),
                "the access width must divide the group");
  if (is_aligned<AccessBytes>(address)) {
    Word words[kWords];
#pragma unroll
    for (int k = 0; k < kWords; ++k)
      words[k] = load_word<Hint>(reinterpret_cast<const Word*>(address) + k);
    memcpy(values, words, sizeof values);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) values[k] = address[k];
  }
}

/// address[k] = values[k] for k < N, in accesses of AccessBytes bytes (with cache hint Hint)
/// when `address` is aligned to them. AccessBytes must divide N * sizeof(T).
template <int AccessBytes, CacheHint Hint, typename T, int N>
ADJOINT_DEVICE void store_elements_hinted(T* address, const T (&values)[N]) {
  using Word = typename AccessWord<AccessBytes>::type;
  constexpr int kWords = static_cast<int>(N * sizeof(T)) / AccessBytes;
  static_assert(kWords * AccessBytes == static_cast<int>(N * sizeof(T)),
                "the access width must divide the group");
  if (is_aligned<AccessBytes>(address)) {
    Word words[kWords];
    memcpy(words, values, sizeof values);
#pragma unroll
    for (int k = 0; k < kWords; ++k)
      store_word<Hint>(reinterpret_cast<Word*>(address) + k, words[k]);
  } else {
#pragma unroll
    for (int k = 0; k < N; ++k) address[k] = values[k];
  }
}

/// values[k] = address[k] for k < N, in plain accesses of AccessBytes bytes when aligned.
template <int AccessBytes, typename T, int N>
ADJOINT_DEVICE void load_elements(T (&values)[N], const T* address) {
  load_elements_hinted<AccessBytes, CacheHint::kNormal>(values, address);
}

/// values[k] = address[k] for k < N in accesses of AccessBytes bytes with cache hint Hint,
/// without the check: the caller checked the base pointer once for the whole kernel (a block
/// reduction's wide staging, emit_block_reduction.cpp, runs only when every base it spans is
/// aligned), so consecutive loads have no branch between them and are in flight together.
template <int AccessBytes, CacheHint Hint, typename T, int N>
ADJOINT_DEVICE void load_elements_aligned_hinted(T (&values)[N], const T* address) {
  using Word = typename AccessWord<AccessBytes>::type;
  constexpr int kWords = static_cast<int>(N * sizeof(T)) / AccessBytes;
  static_assert(kWords * AccessBytes == static_cast<int>(N * sizeof(T)),
                "the access width must divide the group");
  Word words[kWords];
#pragma unroll
  for (int k = 0; k < kWords; ++k)
    words[k] = load_word<Hint>(reinterpret_cast<const Word*>(address) + k);
  memcpy(values, words, sizeof values);
}

/// load_elements_aligned_hinted with plain loads.
template <int AccessBytes, typename T, int N>
ADJOINT_DEVICE void load_elements_aligned(T (&values)[N], const T* address) {
  load_elements_aligned_hinted<AccessBytes, CacheHint::kNormal>(values, address);
}

/// load_elements_aligned_hinted with the evict-first streaming hint: a thread-tiled kernel's
/// aligned path (emit_cuda, "one alignment check") reads streamed spans with it.
template <int AccessBytes, typename T, int N>
ADJOINT_DEVICE void load_elements_aligned_streaming(T (&values)[N], const T* address) {
  load_elements_aligned_hinted<AccessBytes, CacheHint::kStreaming>(values, address);
}

/// address[k] = values[k] for k < N in accesses of AccessBytes bytes (with cache hint Hint),
/// without the check: the caller checked the base pointer once for the whole kernel.
template <int AccessBytes, CacheHint Hint, typename T, int N>
ADJOINT_DEVICE void store_elements_aligned_hinted(T* address, const T (&values)[N]) {
  using Word = typename AccessWord<AccessBytes>::type;
  constexpr int kWords = static_cast<int>(N * sizeof(T)) / AccessBytes;
  static_assert(kWords * AccessBytes == static_cast<int>(N * sizeof(T)),
                "the access width must divide the group");
  Word words[kWords];
  memcpy(words, values, sizeof values);
#pragma unroll
  for (int k = 0; k < kWords; ++k)
    store_word<Hint>(reinterpret_cast<Word*>(address) + k, words[k]);
}

/// store_elements without the check (the caller checked the base once).
template <int AccessBytes, typename T, int N>
ADJOINT_DEVICE void store_elements_aligned(T* address, const T (&values)[N]) {
  store_elements_aligned_hinted<AccessBytes, CacheHint::kNormal>(address, values);
}

/// store_elements_streaming without the check (the caller checked the base once).
template <int AccessBytes, typename T, int N>
ADJOINT_DEVICE void store_elements_aligned_streaming(T* address, const T (&values)[N]) {
  store_elements_aligned_hinted<AccessBytes, CacheHint::kStreaming>(address, values);
}

/// shared[k] = address[k] for k < N, asynchronously (cp.async, AccessBytes of 4, 8 or 16 per
/// copy; both addresses aligned to it, which the caller checked once): the data waits in
/// shared memory, not in registers, until wait_async says it has landed. A thread-tiled
/// kernel's prefetched spans (emit_cuda) go through it. Host emulation copies at once.
template <int AccessBytes, int N, typename T>
ADJOINT_DEVICE void copy_elements_async(T* shared, const T* address) {
  constexpr int kWords = static_cast<int>(N * sizeof(T)) / AccessBytes;
  static_assert(kWords * AccessBytes == static_cast<int>(N * sizeof(T)),
                "the access width must divide the group");
  static_assert(AccessBytes == 4 || AccessBytes == 8 || AccessBytes == 16,
                "cp.async copies 4, 8 or 16 bytes");
#if (defined(__CUDACC__) || defined(__CUDACC_RTC__)) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#pragma unroll
  for (int k = 0; k < kWords; ++k) {
    const char* from = reinterpret_cast<const char*>(address) + k * AccessBytes;
    unsigned to;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }"
        : "=r"(to)
        : "l"(reinterpret_cast<char*>(shared) + k * AccessBytes));
    if constexpr (AccessBytes == 16) {
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(from) : "memory");
    } else {
      asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(to), "l"(from),
                   "n"(AccessBytes)
                   : "memory");
    }
  }
#else  // host emulation, or a GPU without cp.async (before sm_80): a plain copy
  memcpy(shared, address, N * sizeof(T));
#endif
}

/// Closes the group of this thread's cp.async copies issued since the last commit.
ADJOINT_DEVICE void commit_async() {
#if (defined(__CUDACC__) || defined(__CUDACC_RTC__)) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/// Waits until at most `Pending` of this thread's committed groups are still in flight.
template <int Pending>
ADJOINT_DEVICE void wait_async() {
#if (defined(__CUDACC__) || defined(__CUDACC_RTC__)) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

/// address[k] = values[k] for k < N, in plain accesses of AccessBytes bytes when aligned.
template <int AccessBytes, typename T, int N>
ADJOINT_DEVICE void store_elements(T* address, const T (&values)[N]) {
  store_elements_hinted<AccessBytes, CacheHint::kNormal>(address, values);
}

/// load_elements with evict-first streaming loads (ld.global.cs) when aligned.
template <int AccessBytes, typename T, int N>
ADJOINT_DEVICE void load_elements_streaming(T (&values)[N], const T* address) {
  load_elements_hinted<AccessBytes, CacheHint::kStreaming>(values, address);
}

/// store_elements with evict-first streaming stores (st.global.cs) when aligned.
template <int AccessBytes, typename T, int N>
ADJOINT_DEVICE void store_elements_streaming(T* address, const T (&values)[N]) {
  store_elements_hinted<AccessBytes, CacheHint::kStreaming>(address, values);
}

#endif  // ADJOINT_DEVICE_CODE

}  // namespace adjoint
