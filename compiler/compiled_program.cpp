// SizeProduct: counts of generic kernels evaluated by the runtime at each call's sizes.
#include "compiler/compiled_program.h"

#include "ir/error.h"

namespace adjoint::compiler {

int64_t SizeProduct::evaluate(const std::vector<std::string>& names,
                              const std::vector<int64_t>& values) const {
  int64_t product = constant;
  for (const std::string& size : sizes) {
    size_t i = 0;
    while (i < names.size() && names[i] != size) ++i;
    if (i == names.size() || i >= values.size())
      throw Error("no value for size '" + size + "'", ErrorCode::kInternal);
    if (__builtin_mul_overflow(product, values[i], &product))
      throw Error("a size product overflows int64", ErrorCode::kInvalidArgument);
  }
  return product;
}

std::string SizeProduct::text() const {
  std::string out = sizes.empty() || constant != 1 ? std::to_string(constant) : "";
  for (const std::string& size : sizes) out += (out.empty() ? "" : " * ") + size;
  return out;
}

}  // namespace adjoint::compiler
