// Names, sizes and host rounding of IR dtypes. The 16-bit conversions are written out bit by
// bit so that the interpreter rounds exactly as the device's __float2half_rn/__float2bfloat16_rn.
#include "ir/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace adjoint::ir {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kBool: return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view n) {
  if (n == "f16" || n == "float16" || n == "half") return DType::kF16;
  if (n == "bf16" || n == "bfloat16") return DType::kBF16;
  if (n == "f32" || n == "float32" || n == "float") return DType::kF32;
  if (n == "f64" || n == "float64" || n == "double") return DType::kF64;
  if (n == "i32" || n == "int32" || n == "int") return DType::kI32;
  if (n == "i64" || n == "int64" || n == "long") return DType::kI64;
  if (n == "bool") return DType::kBool;
  return std::nullopt;
}

int dtype_bytes(DType t) {
  switch (t) {
    case DType::kF16:
    case DType::kBF16: return 2;
    case DType::kF32:
    case DType::kI32: return 4;
    case DType::kF64:
    case DType::kI64: return 8;
    case DType::kBool: return 1;
  }
  return 0;
}

bool is_float(DType t) {
  return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32 || t == DType::kF64;
}
bool is_integer(DType t) { return t == DType::kI32 || t == DType::kI64; }

std::string_view cuda_type_name(DType t) {
  switch (t) {
    case DType::kF16: return "__half";
    case DType::kBF16: return "__nv_bfloat16";
    case DType::kF32: return "float";
    case DType::kF64: return "double";
    case DType::kI32: return "int";
    case DType::kI64: return "long long";
    case DType::kBool: return "bool";
  }
  return "?";
}

DType default_accumulation(DType t) {
  switch (t) {
    case DType::kF64: return DType::kF64;
    case DType::kI32:
    case DType::kI64:
    case DType::kBool: return DType::kI64;
    default: return DType::kF32;
  }
}

uint16_t float_to_half_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {  // subnormal half (or zero): value = abs_float / 2^-24
    float af = std::bit_cast<float>(abs);
    // Scale into the integer domain where rounding to nearest-even is a plain rint.
    float scaled = af * 16777216.0f;  // 2^24, exact
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t exponent = ((abs >> 23) - 112u) << 10;
  uint32_t mantissa = abs & 0x7fffffu;
  uint32_t h = exponent | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float half_bits_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    float v = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -v : v;
  }
  if (exponent == 31) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t float_to_bfloat16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  // Every NaN becomes the one quiet NaN 0x7fff (what cvt.rn.bf16.f32 gives; sign and payload
  // are not kept), as every f16 NaN becomes a quiet NaN of its sign.
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bfloat16_bits_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

namespace {

/// `v` rounded to float with round-to-odd: truncated toward zero, then the last bit set when
/// that was inexact. Rounding this float to a format with at least two fewer significand bits
/// (f16: 11, bf16: 8, against f32's 24) gives exactly the correctly rounded result of `v`,
/// which a plain double -> float -> half conversion does not (the first rounding can create a
/// tie that the second then breaks the wrong way).
float round_to_odd_float(double v) {
  float f = static_cast<float>(v);
  if (std::isnan(v) || static_cast<double>(f) == v) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}

}  // namespace

double round_to(DType t, double v) {
  switch (t) {
    case DType::kF64: return v;
    case DType::kF32: return static_cast<double>(static_cast<float>(v));
    case DType::kF16: return half_bits_to_float(float_to_half_bits(round_to_odd_float(v)));
    case DType::kBF16:
      return bfloat16_bits_to_float(float_to_bfloat16_bits(round_to_odd_float(v)));
    case DType::kI32:
      if (std::isnan(v)) return 0;
      return static_cast<double>(static_cast<int32_t>(
          std::fmax(std::fmin(std::trunc(v), 2147483647.0), -2147483648.0)));
    case DType::kI64:
      if (std::isnan(v)) return 0;
      return std::trunc(v);
    case DType::kBool: return v != 0 ? 1.0 : 0.0;
  }
  return v;
}

}  // namespace adjoint::ir
