// Math helpers of generated kernels, per dtype: the functions CUDA does not spell the way the
// IR names them. f16/bf16 values are computed with the float versions and rounded by the
// emitter (see adjoint_types.cuh).
#pragma once

#include "adjoint_types.cuh"

namespace adjoint {

#if defined(ADJOINT_DEVICE_CODE)

/// 1 / (1 + exp(-x)).
ADJOINT_DEVICE float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}
ADJOINT_DEVICE double sigmoid(double x) {
  return 1.0 / (1.0 + exp(-x));
}

/// 1 / sqrt(x) (CUDA's rsqrtf/rsqrt: within 2 ulp for float).
ADJOINT_DEVICE float reciprocal_sqrt(float x) {
  return rsqrtf(x);
}
ADJOINT_DEVICE double reciprocal_sqrt(double x) {
  return rsqrt(x);
}

/// Round half to even (the current rounding mode of rint is round-to-nearest-even).
ADJOINT_DEVICE float round_half_even(float x) {
  return rintf(x);
}
ADJOINT_DEVICE double round_half_even(double x) {
  return rint(x);
}

#endif  // ADJOINT_DEVICE_CODE

}  // namespace adjoint
