// Shape checks shared by every op: overflow-safe element counts and the index range the
// emitted kernels can address. Each op's builder calls check_sizes_addressable on the size
// attributes it reads (so the error names the attribute), and Specialization::build_program
// runs check_program_addressable over every tensor of the built program, so an op that forgets
// the first check still cannot hand the compiler a shape whose byte offsets overflow i64.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/program.h"

namespace adjoint::ops {

/// The largest element count of one tensor: its byte offsets (elements x 8 bytes at most) and
/// every index expression of the kernels (i64 math with headroom for one addition of two
/// in-range offsets) must stay far from overflow. 2^58 elements = 2 EiB of f64.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 58;

/// The product of `sizes`, or nullopt when some size is negative or the product leaves the
/// i64 range (checked with __builtin_mul_overflow, never wrapping).
std::optional<int64_t> checked_element_count(const std::vector<int64_t>& sizes);

/// Throws adjoint::Error (kInvalidArgument) naming `op`, `attribute` and the sizes when the
/// tensor of these sizes has a negative size, an element count that overflows i64, or more
/// than kMaxTensorElements elements.
void check_sizes_addressable(const std::string& op, const std::string& attribute,
                             const std::vector<int64_t>& sizes);

/// check_sizes_addressable for every input, output and temporary of `program` (the attribute
/// named is "tensor '<name>'"), and that every stride is within the same range.
void check_program_addressable(const std::string& op, const ir::Program& program);

}  // namespace adjoint::ops
