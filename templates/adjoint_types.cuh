// Device helpers every generated kernel includes: storage types for the 16-bit float formats,
// exact conversions between them and float/double, and floor division and modulo.
//
// Self-contained on purpose: NVRTC 13 has no builtin <cuda_fp16.h>/<cuda_bf16.h>, and a
// kernel that needs nothing from the toolkit's include directory compiles the same wherever
// NVRTC alone is installed (and faster: those headers are thousands of lines). Conversions use
// the PTX cvt instructions the CUDA headers use, or exact integer arithmetic.
//
// Representation in generated code: an f16 or bf16 IR value is held in a `float` whose value
// is exactly representable in the 16-bit format; each f16/bf16 operation is computed in float
// and rounded back with round_to_half/round_to_bfloat16. Because float has more than twice the
// precision of either format plus two bits, that single rounding is the correctly rounded
// result for + - * / and sqrt, as the interpreter computes it.
//
// The arithmetic helpers are plain C++ (ADJOINT_HOST_DEVICE) so that host tests can check them
// against the interpreter's definitions. The device helpers (ADJOINT_DEVICE_CODE) also compile
// as host C++ when ADJOINT_HOST_EMULATION is defined: a host test then runs whole generated
// kernels, one emulated thread at a time, against the interpreter. That mode supplies the few
// CUDA built-ins the helpers use (__uint_as_float, uint4, ...); inline PTX is device-only, with
// portable integer code beside it.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ADJOINT_HOST_DEVICE __host__ __device__ __forceinline__
#define ADJOINT_DEVICE __device__ __forceinline__
#define ADJOINT_DEVICE_CODE 1
#elif defined(ADJOINT_HOST_EMULATION)
#define ADJOINT_HOST_DEVICE inline
#define ADJOINT_DEVICE inline
#define ADJOINT_DEVICE_CODE 1
#else
#define ADJOINT_HOST_DEVICE inline
#endif

namespace adjoint {

/// IEEE binary16 storage: the bits of a __half.
struct alignas(2) half {
  unsigned short bits;
};

/// bfloat16 storage: the upper 16 bits of an IEEE binary32.
struct alignas(2) bfloat16 {
  unsigned short bits;
};

// --- integer floor division (the IR's semantics: round toward negative infinity) -------------

template <typename Int>
ADJOINT_HOST_DEVICE Int floor_div(Int a, Int b) {
  Int q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/// The remainder of floor division: it has the sign of the divisor.
template <typename Int>
ADJOINT_HOST_DEVICE Int floor_mod(Int a, Int b) {
  Int r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// --- bfloat16 rounding: exact integer arithmetic --------------------------------------------

/// The bits of x rounded to the nearest bfloat16, ties to even; every NaN becomes the quiet NaN
/// 0x7fff, as cvt.rn.bf16.f32 gives it (its sign and payload are not kept).
ADJOINT_HOST_DEVICE unsigned short bfloat16_bits_from_float_bits(unsigned int u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}

// --- binary16 rounding: exact integer arithmetic (what cvt.rn.f16.f32 computes) -------------

/// The bits of x rounded to the nearest binary16, ties to even; overflow gives infinity and NaN
/// a quiet NaN.
ADJOINT_HOST_DEVICE unsigned short half_bits_from_float_bits(unsigned int x) {
  const unsigned int sign = (x >> 16) & 0x8000u;
  const unsigned int magnitude = x & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<unsigned short>(sign | 0x7e00u);
  if (magnitude >= 0x477ff000u) return static_cast<unsigned short>(sign | 0x7c00u);
  unsigned int result, rest, halfway;
  if (magnitude < 0x38800000u) {  // a subnormal binary16 (or zero): units of 2^-24
    if (magnitude < 0x33000000u) return static_cast<unsigned short>(sign);  // below 2^-25
    const unsigned int shift = 126u - (magnitude >> 23);                     // 14 .. 24
    const unsigned int significand = (magnitude & 0x7fffffu) | 0x800000u;
    result = significand >> shift;
    rest = significand & ((1u << shift) - 1u);
    halfway = 1u << (shift - 1u);
  } else {
    result = (((magnitude >> 23) - 112u) << 10) | ((magnitude & 0x7fffffu) >> 13);
    rest = magnitude & 0x1fffu;
    halfway = 0x1000u;
  }
  if (rest > halfway || (rest == halfway && (result & 1u))) ++result;
  return static_cast<unsigned short>(sign | result);
}

/// The bits of the float equal to a binary16 value.
ADJOINT_HOST_DEVICE unsigned int float_bits_from_half_bits(unsigned short h) {
  const unsigned int sign = static_cast<unsigned int>(h & 0x8000u) << 16;
  const unsigned int exponent = (h >> 10) & 0x1fu;
  unsigned int mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return sign | 0x7f800000u | (mantissa << 13);
  if (exponent != 0) return sign | ((exponent + 112u) << 23) | (mantissa << 13);
  if (mantissa == 0) return sign;
  unsigned int shift = 0;  // normalize the subnormal: value = mantissa * 2^-24
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  return sign | ((113u - shift) << 23) | ((mantissa & 0x3ffu) << 13);
}

#if defined(ADJOINT_DEVICE_CODE)

// --- programmatic dependent launch (sm_90 and later) ---------------------------------------

/// The first statement of every generated kernel. The runtime launches the kernels of a program
/// with programmatic stream serialization where the device allows it (docs/runtime.md,
/// "Programmatic dependent launch"): a kernel may then be scheduled while the kernel before it
/// in the stream is still running. It waits here until that kernel has completed and its
/// memory is visible, before it reads or writes anything, so that the launches overlap and the
/// data never does.
/// Launched without the attribute, or compiled below sm_90 or for the host, it does nothing.
/// It does not trigger the next kernel itself: that kernel is scheduled as this one's blocks exit
/// (the implicit trigger). Triggering at the start (-DADJOINT_PDL_EARLY_TRIGGER through
/// ADJOINT_TUNE_NVRTC_OPTIONS, the code before) let the next kernel's blocks wait on the SMs for
/// the whole of this one and made mhc_pre 2-3x slower on the H100 (docs/runtime.md).
ADJOINT_DEVICE void grid_dependency_prologue() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#if defined(ADJOINT_PDL_EARLY_TRIGGER)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
#endif
}

// --- conversions ----------------------------------------------------------------------------

ADJOINT_DEVICE float to_float(half h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
#else
  return __uint_as_float(float_bits_from_half_bits(h.bits));
#endif
}
ADJOINT_DEVICE float to_float(bfloat16 b) {
  return __uint_as_float(static_cast<unsigned int>(b.bits) << 16);
}

template <typename T>
ADJOINT_DEVICE T from_float(float f);

template <>
ADJOINT_DEVICE half from_float<half>(float f) {
#if defined(__CUDA_ARCH__)
  half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
#else
  return half{half_bits_from_float_bits(__float_as_uint(f))};
#endif
}
/// ADJOINT_BF16_CVT picks how a GPU of sm_80 or later rounds float to bfloat16 (NVRTC
/// -DADJOINT_BF16_CVT=..., which ADJOINT_TUNE_BF16_CVT sets; docs/runtime.md):
/// 1 (default): the hardware's round-to-nearest-even, `cvt.rn.bf16.f32` (F2FP; ptxas pairs two
///   values an instruction, against the integer code's five operations a value). Same bits as
///   the integer code for every float: finite values (subnormals included, no flush) and
///   infinities round alike, overflow goes to infinity, and every NaN gives 0x7fff in both
///   (tests/gpu/bf16_rounding_check.cu compares all 2^32 inputs on the GPU).
/// 0: the integer code (bfloat16_bits_from_float_bits).
/// Host emulation and GPUs before sm_80 always take the integer code.
#ifndef ADJOINT_BF16_CVT
#define ADJOINT_BF16_CVT 1
#endif
template <>
ADJOINT_DEVICE bfloat16 from_float<bfloat16>(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && ADJOINT_BF16_CVT != 0
  unsigned short bits;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(bits) : "f"(f));
  return bfloat16{bits};
#else
  return bfloat16{bfloat16_bits_from_float_bits(__float_as_uint(f))};
#endif
}

ADJOINT_DEVICE half half_from_double(double d) {
#if defined(__CUDA_ARCH__)
  half h;
  asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.bits) : "d"(d));
  return h;
#else  // one rounding through round-to-odd, as bfloat16_from_double below
  float truncated = __double2float_rz(d);
  unsigned int u = __float_as_uint(truncated);
  if (static_cast<double>(truncated) != d && d == d) u |= 1u;
  return half{half_bits_from_float_bits(u)};
#endif
}

/// double -> bfloat16 with a single rounding: truncate to float, make the result "round to
/// odd" (set the last bit when inexact), then round to nearest even. Float keeps more than two
/// extra bits beyond bfloat16's eight, so the two steps round exactly like one.
ADJOINT_DEVICE bfloat16 bfloat16_from_double(double d) {
  float truncated = __double2float_rz(d);
  unsigned int u = __float_as_uint(truncated);
  if (static_cast<double>(truncated) != d && d == d) u |= 1u;
  return bfloat16{bfloat16_bits_from_float_bits(u)};
}

/// Rounds to the nearest f16 / bf16 value, returned as float: how f16 and bf16 IR values live
/// in registers.
ADJOINT_DEVICE float round_to_half(float x) {
  return to_float(from_float<half>(x));
}
ADJOINT_DEVICE float round_to_half(double x) {
  return to_float(half_from_double(x));
}
ADJOINT_DEVICE float round_to_bfloat16(float x) {
  return to_float(from_float<bfloat16>(x));
}
ADJOINT_DEVICE float round_to_bfloat16(double x) {
  return to_float(bfloat16_from_double(x));
}

// --- float floor modulo ----------------------------------------------------------------------

/// a - floor(a / b) * b computed in double and rounded once, as the interpreter does.
ADJOINT_DEVICE float floor_mod(float a, float b) {
  double x = a, y = b;
  return static_cast<float>(x - floor(x / y) * y);
}
ADJOINT_DEVICE double floor_mod(double a, double b) {
  return a - floor(a / b) * b;
}
/// The same for f16/bf16 values held in float, without rounding to float first.
ADJOINT_DEVICE double floor_mod_exact(float a, float b) {
  double x = a, y = b;
  return x - floor(x / y) * y;
}

#endif  // ADJOINT_DEVICE_CODE

}  // namespace adjoint
