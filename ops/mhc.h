// The mhc op family: the "pre" mapping of manifold-constrained hyper-connections (mHC), forward
// (`mhc_pre`) and backward (`mhc_pre_backward`), as specified in DESIGN.md. Per token (b, s),
// with x[b, s] in R^{n x D}, v = vec(x) in R^{nD}, K = n*n + 2n:
//
//   h_mix   = (v * vec(gamma)) . phi^T                  [K]
//   inv_rms = rsqrt(mean(v^2) + norm_eps)
//   m       = h_mix * inv_rms  = [m_pre (n), m_post (n), m_res (n*n)]
//   h_pre   = sigmoid(alpha0 * m_pre + bias_pre) + hc_eps
//   h_post  = 2 * sigmoid(alpha1 * m_post + bias_post)
//   h_res   = alpha2 * m_res + bias_res                 (n x n, before Sinkhorn)
//   h_in[d] = sum_i h_pre[i] * x[i, d]
//
// The backward is the exact adjoint of that forward with respect to x, phi, alpha, bias and
// gamma, for the loss <grad_h_in, h_in> + <grad_h_post, h_post> + <grad_h_res, h_res>; h_pre,
// inv_rms and h_mix are saved activations that it reads, not outputs it differentiates. Token
// sums (dphi, dalpha, dbias, dgamma) are Reduce nodes over (b, s): deterministic, no atomics.
// B or S may be 0 (an empty batch, as PyTorch allows): the per-token tensors are empty and the
// token sums are zero.
//
// Dtypes: x, grad_h_in, grad_x_post, h_in and dx have the `dtype` attribute; every other tensor
// (phi, alpha, bias, gamma, the saved activations, the f32 gradients) is f32, or f64 when
// dtype=f64 so that finite-difference checks run in f64 throughout. Arithmetic runs in that
// parameter type; 16-bit values are converted on load and rounded once on store. Each sum of
// products accumulates with fused multiply-adds (ir::fma_sum: one rounding per step).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/dtype.h"
#include "ir/program.h"
#include "ops/dynamic_ops.h"
#include "ops/mhc_token_axes.h"
#include "ops/registry.h"

namespace adjoint::ops {

/// A validated mhc specialization (either op): everything its IR depends on.
struct MhcConfig {
  int64_t batch = 1;                        ///< B
  int64_t seq = 1;                          ///< S
  int64_t streams = 1;                      ///< n, the number of residual streams
  int64_t dim = 1;                          ///< D, the hidden size of one stream
  ir::DType dtype = ir::DType::kBF16;       ///< x, grad_h_in, grad_x_post, h_in, dx
  ir::DType param_dtype = ir::DType::kF32;  ///< everything else; also the arithmetic type
  double norm_eps = 1e-6;                   ///< forward only
  double hc_eps = 1e-6;
  bool with_grad_x_post = false;  ///< backward only

  /// n*n + 2n: the number of mixing coefficients per token (pre, post, res).
  int64_t mix_width() const { return streams * streams + 2 * streams; }
  /// n*D: the length of one flattened token.
  int64_t token_width() const { return streams * dim; }
};

/// Reads and checks the attributes of `mhc_pre` or `mhc_pre_backward`; throws adjoint::Error
/// naming the op, the attribute, what was expected and what was given.
MhcConfig mhc_config(const Specialization& spec);

/// The forward program: inputs x, phi, alpha, bias, gamma; outputs h_in, h_post, h_res and the
/// saved activations h_pre, inv_rms, h_mix; over the token axes `token_axes` makes (constants or
/// sizes, ops/mhc_token_axes.h: build_specialized / build_generic).
ir::Program build_mhc_pre(const Specialization& spec, const TokenAxesMaker& token_axes);

/// The backward program: inputs x, phi, alpha, grad_h_in, grad_h_post, grad_h_res, inv_rms,
/// h_mix, h_pre, h_post, gamma (+ grad_x_post); outputs dx, dphi, dalpha, dbias, dgamma. With
/// few tokens `options` chooses between x_mix, dvecx and the direct token sums.
ir::Program build_mhc_pre_backward(const Specialization& spec, const BuildOptions& options = {});

/// mhc_pre_backward generic in `generic_axes` (a subset of {"batch", "seq"}), the other token
/// axis kept at the specialization's value. Always the x_mix form of many tokens; throws
/// adjoint::Error (kInvalidArgument) for an unknown axis or an invalid specialization.
ir::Program build_mhc_pre_backward_generic(const Specialization& spec,
                                           const std::vector<std::string>& generic_axes);

/// The registered ops of the family: mhc_pre and mhc_pre_backward.
std::vector<OpDefinition> mhc_ops();

}  // namespace adjoint::ops
