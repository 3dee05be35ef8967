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
// against the interpreter's definitions.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define ADJOINT_HOST_DEVICE __host__ __device__ __forceinline__
#define ADJOINT_DEVICE __device__ __forceinline__
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

/// The bits of x rounded to the nearest bfloat16, ties to even; NaN stays a (quiet) NaN.
ADJOINT_HOST_DEVICE unsigned short bfloat16_bits_from_float_bits(unsigned int u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<unsigned short>(u >> 16);
}

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)

// --- conversions ----------------------------------------------------------------------------

ADJOINT_DEVICE float to_float(half h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
ADJOINT_DEVICE float to_float(bfloat16 b) {
  return __uint_as_float(static_cast<unsigned int>(b.bits) << 16);
}

template <typename T>
ADJOINT_DEVICE T from_float(float f);

template <>
ADJOINT_DEVICE half from_float<half>(float f) {
  half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
template <>
ADJOINT_DEVICE bfloat16 from_float<bfloat16>(float f) {
  return bfloat16{bfloat16_bits_from_float_bits(__float_as_uint(f))};
}

ADJOINT_DEVICE half half_from_double(double d) {
  half h;
  asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.bits) : "d"(d));
  return h;
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

#endif  // __CUDACC__ || __CUDACC_RTC__

}  // namespace adjoint
