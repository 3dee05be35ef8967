// The IR's integer division semantics (floor division; a modulo takes the divisor's sign), in
// one place for the interpreter and every analysis that folds or bounds integer expressions.
#pragma once

#include <cstdint>

namespace adjoint::ir {

/// a / b rounded toward negative infinity; b != 0.
inline int64_t floor_div(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

/// a - floor_div(a, b) * b: in [0, b) for b > 0, in (b, 0] for b < 0.
inline int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

}  // namespace adjoint::ir
