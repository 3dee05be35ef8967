// Exhaustive GPU check of templates/adjoint_types.cuh's float -> bfloat16 rounding: every one of
// the 2^32 float bit patterns through from_float<bfloat16> as the generated kernels compile it
// on sm_80 and later (ADJOINT_BF16_CVT, default 1: the hardware's cvt.rn.bf16.f32) against the
// integer code (bfloat16_bits_from_float_bits, what the interpreter and host emulation compute;
// every NaN 0x7fff). Counts mismatches per class of input (NaN, infinity,
// zero, subnormal, normal) and prints the first few. Exit status 0 when all 2^32 agree.
//
//   nvcc -std=c++17 -O2 --fmad=false -arch=sm_90 -Itemplates tests/gpu/bf16_rounding_check.cu \
//        -o bf16_rounding_check        # add -DADJOINT_BF16_CVT=0 for the integer code itself
//
// Not collected by pytest: build it here with nvcc and carry the binary.
#include <cstdio>

#include "adjoint_types.cuh"

namespace {

constexpr int kClasses = 5;
const char* const kClassNames[kClasses] = {"NaN", "infinity", "zero", "subnormal", "normal"};

__device__ int float_class(unsigned int u) {
  const unsigned int magnitude = u & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return 0;
  if (magnitude == 0x7f800000u) return 1;
  if (magnitude == 0) return 2;
  if (magnitude < 0x00800000u) return 3;
  return 4;
}

struct Report {
  unsigned long long tested[kClasses];
  unsigned long long mismatched[kClasses];
  unsigned int first[8][3];  // input, hardware bits, integer bits
  unsigned int firsts;
};

__global__ void compare(unsigned long long begin, Report* report) {
  const unsigned long long index = begin + blockIdx.x * 256ull + threadIdx.x;
  const unsigned int u = static_cast<unsigned int>(index);
  const float f = __uint_as_float(u);
  const unsigned short hardware = adjoint::from_float<adjoint::bfloat16>(f).bits;
  const unsigned short integer = adjoint::bfloat16_bits_from_float_bits(u);
  const int c = float_class(u);
  // Counts per warp and class, so that the counters see few atomics (integers: exact).
  for (int k = 0; k < kClasses; ++k) {
    const unsigned int tested = __popc(__ballot_sync(0xffffffffu, c == k));
    const unsigned int bad = __popc(__ballot_sync(0xffffffffu, c == k && hardware != integer));
    if ((threadIdx.x & 31) == 0) {
      if (tested) atomicAdd(&report->tested[k], tested);
      if (bad) atomicAdd(&report->mismatched[k], bad);
    }
  }
  if (hardware != integer) {
    const unsigned int slot = atomicAdd(&report->firsts, 1u);
    if (slot < 8) {
      report->first[slot][0] = u;
      report->first[slot][1] = hardware;
      report->first[slot][2] = integer;
    }
  }
}

}  // namespace

int main() {
  Report* report = nullptr;
  if (cudaMallocManaged(&report, sizeof(Report)) != cudaSuccess) {
    std::printf("bf16_rounding_check: no GPU (%s)\n", cudaGetErrorString(cudaGetLastError()));
    return 2;
  }
  *report = Report{};
  constexpr unsigned long long kTotal = 1ull << 32, kChunk = 1ull << 30;
  for (unsigned long long begin = 0; begin < kTotal; begin += kChunk)
    compare<<<static_cast<unsigned int>(kChunk / 256), 256>>>(begin, report);
  if (cudaDeviceSynchronize() != cudaSuccess) {
    std::printf("bf16_rounding_check: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 2;
  }
  cudaDeviceProp properties;
  cudaGetDeviceProperties(&properties, 0);
  std::printf("bf16 rounding, ADJOINT_BF16_CVT=%d, %s (sm_%d%d): all 2^32 floats\n",
              ADJOINT_BF16_CVT, properties.name, properties.major, properties.minor);
  unsigned long long tested = 0, mismatched = 0;
  for (int k = 0; k < kClasses; ++k) {
    std::printf("  %-9s %10llu inputs, %10llu differ from the integer code\n", kClassNames[k],
                report->tested[k], report->mismatched[k]);
    tested += report->tested[k];
    mismatched += report->mismatched[k];
  }
  for (unsigned int i = 0; i < report->firsts && i < 8; ++i)
    std::printf("  e.g. 0x%08x -> 0x%04x (integer code 0x%04x)\n", report->first[i][0],
                report->first[i][1], report->first[i][2]);
  std::printf("%s: %llu of %llu differ\n", mismatched == 0 ? "SAME BITS" : "DIFFERENT", mismatched,
              tested);
  return mismatched == 0 && tested == kTotal ? 0 : 1;
}
