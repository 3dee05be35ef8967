// The "post" mapping of manifold-constrained hyper-connections (mHC, arXiv 2512.24880): the
// layer output x_{l+1} = H_res x_l + H_post^T F(H_pre x_l), per token (b, s), as the op
// `mhc_post` and its adjoint `mhc_post_backward`:
//
//   out[b, s, i, d] = sum_j h_res[b, s, i, j] * x[b, s, j, d] + h_post[b, s, i] * y[b, s, d]
//
// x [B, S, n, D] is the residual stream, y [B, S, D] the sublayer's output F(h_in), h_res
// [B, S, n, n] the (Sinkhorn-projected) residual mixing, h_post [B, S, n] the post gate. The
// backward, for upstream gradient grad_out [B, S, n, D], gives
//
//   dx[b, s, j, d]      = sum_i h_res[b, s, i, j] * grad_out[b, s, i, d]
//   dy[b, s, d]         = sum_i h_post[b, s, i] * grad_out[b, s, i, d]
//   dh_res[b, s, i, j]  = sum_d grad_out[b, s, i, d] * x[b, s, j, d]
//   dh_post[b, s, i]    = sum_d grad_out[b, s, i, d] * y[b, s, d]
//
// Every sum is a Reduce node inside one token: no atomics, each output written once.
// Dtypes: x, y, out, grad_out, dx, dy have the `dtype` attribute (bf16 by default, f16, f32,
// f64); h_res, h_post, dh_res, dh_post are f32, or f64 when dtype=f64. Arithmetic runs in that
// parameter type; 16-bit values are converted on load and rounded once on store. Each sum of
// products accumulates with fused multiply-adds (ir::fma_sum: one rounding per step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/program.h"
#include "ops/mhc_token_axes.h"
#include "ops/registry.h"

namespace adjoint::ops {

/// A validated mhc_post specialization (either direction).
struct MhcPostConfig {
  int64_t batch = 1;                        ///< B
  int64_t seq = 1;                          ///< S
  int64_t streams = 1;                      ///< n
  int64_t dim = 1;                          ///< D
  ir::DType dtype = ir::DType::kBF16;       ///< x, y, out and their gradients
  ir::DType param_dtype = ir::DType::kF32;  ///< h_res, h_post and theirs; the arithmetic type
};

/// Reads and checks the attributes of `mhc_post` or `mhc_post_backward`; throws adjoint::Error
/// naming the op, the attribute, what was expected and what was given.
MhcPostConfig mhc_post_config(const Specialization& spec);

/// Inputs x, y, h_res, h_post; output out; over the token axes `token_axes` makes (constants
/// or sizes, ops/mhc_token_axes.h: build_specialized / build_generic).
ir::Program build_mhc_post(const Specialization& spec, const TokenAxesMaker& token_axes);

/// Inputs x, y, h_res, h_post, grad_out; outputs dx, dy, dh_res, dh_post; over `token_axes`.
ir::Program build_mhc_post_backward(const Specialization& spec, const TokenAxesMaker& token_axes);

/// The registered ops: mhc_post and mhc_post_backward.
std::vector<OpDefinition> mhc_post_ops();

}  // namespace adjoint::ops
