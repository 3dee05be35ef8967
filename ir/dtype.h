// Element types of the IR and the host-side rounding that defines their arithmetic.
// Every IR value has one of these dtypes. Index arithmetic is i64 unless said otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace adjoint::ir {

/// Element type of a tensor or expression.
enum class DType : uint8_t { kF16, kBF16, kF32, kF64, kI32, kI64, kBool };

/// Short name used in the printer and in specializations: "f16", "bf16", ...
std::string_view dtype_name(DType t);
/// Inverse of dtype_name; also accepts PyTorch spellings ("float16", "half", "bfloat16",
/// "float", "float32", "double", "float64", "int32", "int64", "bool"). nullopt if unknown.
std::optional<DType> parse_dtype(std::string_view name);
/// Size of one element in bytes.
int dtype_bytes(DType t);
bool is_float(DType t);
bool is_integer(DType t);  // i32, i64 (not bool)
/// The CUDA C++ spelling of the type ("__half", "__nv_bfloat16", "float", ...).
std::string_view cuda_type_name(DType t);
/// Default accumulation type for reductions over data of type t (f32 for 16-bit floats).
DType default_accumulation(DType t);

/// Rounds a double to the nearest value representable in `t` (round-half-even for floats,
/// truncation toward zero for integers as in a C cast, `x != 0` for bool). This is what a
/// store or a cast to `t` does in the interpreter and on the device.
double round_to(DType t, double value);

/// Bit-exact conversions for the 16-bit float formats (round-to-nearest-even).
uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bfloat16_bits(float f);
float bfloat16_bits_to_float(uint16_t b);

}  // namespace adjoint::ir
