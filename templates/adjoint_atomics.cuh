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

/// A binned gather's slot claim aggregated per warp (EmitOptions::claim_warp_aggregated): the
/// active lanes that claim from the same counter (__match_any_sync) take one atomic, issued by
/// their lowest lane, and split its old value by their rank among those lanes. Returns what
/// `atomicAdd(counter, -1) - 1` would for some order of the lanes: each claims a distinct slot
/// of [0, count), which order differs from run to run either way (the sort that follows the
/// fill fixes every bucket's order). Integer atomics only.
ADJOINT_DEVICE int claim_slot_warp(int* counter) {
  const unsigned active = __activemask();
  const unsigned peers = __match_any_sync(active, reinterpret_cast<unsigned long long>(counter));
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  const int leader = __ffs(peers) - 1;
  const int below = __popc(peers & ((1u << lane) - 1u));
  int old = 0;
  if (static_cast<int>(lane) == leader) old = atomicAdd(counter, -__popc(peers));
  old = __shfl_sync(peers, old, leader);
  return old - 1 - below;
}

#endif  // __CUDACC__ || __CUDACC_RTC__

}  // namespace adjoint
