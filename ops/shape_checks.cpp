// Overflow-safe element counts and addressable-range checks for the ops' shapes.
#include "ops/shape_checks.h"

#include "ir/error.h"
#include "ops/registry.h"

namespace adjoint::ops {
namespace {

std::string bracketed(const std::vector<int64_t>& sizes) { return "[" + format_ints(sizes) + "]"; }

}  // namespace

std::optional<int64_t> checked_element_count(const std::vector<int64_t>& sizes) {
  int64_t count = 1;
  for (int64_t s : sizes) {
    if (s < 0) return std::nullopt;
    if (__builtin_mul_overflow(count, s, &count)) return std::nullopt;
  }
  return count;
}

void check_sizes_addressable(const std::string& op, const std::string& attribute,
                             const std::vector<int64_t>& sizes) {
  for (int64_t s : sizes) {
    if (s < 0) {
      throw Error(op + ": " + attribute + ": expected sizes >= 0, given " + bracketed(sizes),
                  ErrorCode::kInvalidArgument);
    }
  }
  std::optional<int64_t> count = checked_element_count(sizes);
  if (!count || *count > kMaxTensorElements) {
    throw Error(op + ": " + attribute + ": expected a tensor of at most 2^58 elements (the " +
                    "range the kernels' 64-bit index math addresses), given " + bracketed(sizes) +
                    (count ? " (" + std::to_string(*count) + " elements)"
                           : " (the element count overflows i64)"),
                ErrorCode::kInvalidArgument);
  }
}

void check_program_addressable(const std::string& op, const ir::Program& program) {
  for (const auto* list : {&program.inputs, &program.outputs, &program.temporaries}) {
    for (const ir::Tensor& t : *list) {
      std::string what = "tensor '" + t->name + "'";
      check_sizes_addressable(op, what, t->shape);
      for (int64_t stride : t->strides) {
        if (stride < -kMaxTensorElements || stride > kMaxTensorElements) {
          throw Error(op + ": " + what + ": expected strides within +-2^58, given [" +
                          format_ints(t->strides) + "]",
                      ErrorCode::kInvalidArgument);
        }
      }
    }
  }
}

}  // namespace adjoint::ops
