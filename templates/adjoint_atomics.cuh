// Atomic adds for the scatter strategy of last resort (data-dependent indices): one overload
// per storage type. The value is the accumulation dtype's value held in a register (float for
// f16/bf16, see adjoint_types.cuh). Not run-to-run deterministic: the order in which colliding
// adds land is the hardware's.
#pragma once

#include "adjoint_types.cuh"

namespace adjoint {

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

ADJOINT_DEVICE void atomic_add(float* address, float value) {
  atomicAdd(address, value);
}
ADJOINT_DEVICE void atomic_add(double* address, double value) {
  atomicAdd(address, value);
}
ADJOINT_DEVICE void atomic_add(int* address, int value) {
  atomicAdd(address, value);
}
ADJOINT_DEVICE void atomic_add(long long* address, long long value) {
  atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value));
}

/// f16: the native reduction (sm_70 and newer), generic addressing like CUDA's own atomicAdd.
ADJOINT_DEVICE void atomic_add(half* address, float value) {
  half h = from_float<half>(value);
  asm volatile("red.add.noftz.f16 [%0], %1;" ::"l"(address), "h"(h.bits) : "memory");
}

/// bf16: the native reduction on sm_90; a compare-and-swap loop on the 16-bit word before.
ADJOINT_DEVICE void atomic_add(bfloat16* address, float value) {
#if __CUDA_ARCH__ >= 900
  bfloat16 b = from_float<bfloat16>(value);
  asm volatile("red.add.noftz.bf16 [%0], %1;" ::"l"(address), "h"(b.bits) : "memory");
#else
  unsigned short* word = &address->bits;
  unsigned short seen = *word, expected;
  do {
    expected = seen;
    float sum = to_float(bfloat16{expected}) + value;
    seen = atomicCAS(word, expected, from_float<bfloat16>(sum).bits);
  } while (seen != expected);
#endif
}

#endif  // __CUDACC__ || __CUDACC_RTC__

}  // namespace adjoint
