// The Sinkhorn-Knopp projection of mHC (arXiv 2512.24880, eq. 19): per token (b, s), the n x n
// residual mixing logits h_res are mapped onto (nearly) doubly stochastic matrices by
// alternating row and column normalizations. Op `mhc_sinkhorn` and its exact adjoint
// `mhc_sinkhorn_backward`.
//
// Semantics (those of deepseek-ai/TileKernels' `sinkhorn_normalize_ref`, with repeat = t_max):
//
//   P = softmax(h_res, over j) + eps              the first row normalization, of exp(h_res)
//   P = P / (column sums of P + eps)
//   repeat t_max - 1 times:
//     P = P / (row sums of P + eps)
//     P = P / (column sums of P + eps)
//   out = P
//
// so t_max counts row/column pairs, 2 * t_max normalizations in all. The paper writes
// M0 = exp(h_res) and t_max = 20 alternating row/column normalizations without an epsilon;
// with eps = 0 the two agree (softmax is exp normalized over a row, computed here as
// exp(h - row max) so that large logits do not overflow). Other public versions differ: some
// start from exp(h) without the softmax and add eps only in the denominators (r = 1/(K c + eps),
// c = 1/(K^T r + eps)), some clamp or log-domain the iteration, some skip tiny sums instead of
// adding eps; those give different values for eps > 0. Defaults: t_max = 20 (the paper's), eps
// = 1e-6 (TileKernels').
//
// The IR keeps the iterate as P_t = diag(R_t) K diag(C_t), K = softmax(h_res) + eps, with
//   R_1 = 1, C_1[j] = 1 / (sum_k K[k, j] + eps), and for t >= 2
//   R_t[i] = R_{t-1}[i] / (R_{t-1}[i] sum_l K[i, l] C_{t-1}[l] + eps)
//   C_t[j] = C_{t-1}[j] / (C_{t-1}[j] sum_k R_t[k] K[k, j] + eps),
// which is the iteration above exactly (row sums of P_{t-1} are R_{t-1}[i] sum_l K C_{t-1});
// the IR evaluates R / (R a + eps) as 1 / (a + eps / R). See docs/mhc.md.
//
// IR rule: a stage reads what its own kernel wrote only at the same point, and the row step
// needs every column scale. So K is one kernel; a kernel over (b, s, q < 2n) stores the initial
// state scales_1 = [R_1 = 1, C_1]; the iterations t >= 2 run in kernels over (b, s, q < 2n),
// each writing scales_t = [R_t, C_t] for k consecutive t (k = sinkhorn_iterations_per_launch(n):
// 2 for n = 4, 1 for n >= 5), every value recomputed inline from the state the kernel starts
// from (the column scales read R_t inline, O(n^2) per point, and each further iteration
// multiplies that by about n^2); the forward is 2 + ceil((t_max - 1) / k) + 1 launches (K,
// scales_1, iterations, out = R K C). Storing scales_1 (instead of computing C_1 inline where
// it is read) gives the same values and makes every iteration from the second on read its
// state alike, so that the compiler writes them as one loop (compiler/stage_loops.h). The
// backward recomputes the iterations (it takes only h_res and grad_out: nothing is saved by
// the forward; its first kernel also stores the softmax S in `soft`, K = soft + eps, and a
// kernel stores the column sums of K plus eps in `col_sums`, for the last step) and then runs
// the exact adjoint of each row and column normalization on the n x n matrix,
//   Q = P / (row sums + eps):  dP[i, j] = (dQ[i, j] - sum_l dQ[i, l] Q[i, l]) / (row sum_i + eps)
// (columns alike), one kernel per iteration over (b, s, i, j), newest first, and finishes with
// the softmax adjoint dh = S (dK - sum_l S dK): 3 + ceil((t_max - 1) / k) + t_max kernels. Every
// value is written once; no atomics; deterministic. Each kernel reads the earlier ones only at
// points of its own token, so the compiler's row groups (compiler/row_groups.h) fuse either
// direction into one launch, a block owning whole tokens (or a thread one token).
//
// Dtypes: h_res, out, grad_out, grad_h_res and every temporary have the `dtype` attribute,
// f32 (default) or f64. The row/column sums of products and the adjoint's dot products
// accumulate with fused multiply-adds (ir::fma_sum: one rounding per step); the softmax
// denominators are plain sums.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/program.h"
#include "ops/mhc_token_axes.h"
#include "ops/registry.h"

namespace adjoint::ops {

/// A validated mhc_sinkhorn specialization (either direction).
struct MhcSinkhornConfig {
  int64_t batch = 1;                  ///< B
  int64_t seq = 1;                    ///< S
  int64_t streams = 1;                ///< n: h_res is n x n per token
  int64_t iterations = 20;            ///< t_max: row/column normalization pairs
  double eps = 1e-6;                  ///< added to P after the softmax and to every sum
  ir::DType dtype = ir::DType::kF32;  ///< every tensor
};

/// How many iterations one launch runs (each written to its own scales_t): the largest k <= 4
/// with n^(2k) <= 256, as inlining an iteration into the next multiplies the work per point by
/// about n^2 (n <= 2: 4, n = 3 or 4: 2, n >= 5: 1).
int64_t sinkhorn_iterations_per_launch(int64_t streams);

/// The largest t_max accepted (each iteration is one launch forward, two backward).
inline constexpr int64_t kMaxSinkhornIterations = 100;

/// Reads and checks the attributes of `mhc_sinkhorn` or `mhc_sinkhorn_backward`; throws
/// adjoint::Error naming the op, the attribute, what was expected and what was given.
MhcSinkhornConfig mhc_sinkhorn_config(const Specialization& spec);

/// Input h_res [B, S, n, n]; output out [B, S, n, n]; over the token axes `token_axes` makes
/// (constants or sizes, ops/mhc_token_axes.h: build_specialized / build_generic).
ir::Program build_mhc_sinkhorn(const Specialization& spec, const TokenAxesMaker& token_axes);

/// Inputs h_res, grad_out [B, S, n, n]; output grad_h_res [B, S, n, n]; over `token_axes`.
ir::Program build_mhc_sinkhorn_backward(const Specialization& spec,
                                        const TokenAxesMaker& token_axes);

/// The registered ops: mhc_sinkhorn and mhc_sinkhorn_backward.
std::vector<OpDefinition> mhc_sinkhorn_ops();

}  // namespace adjoint::ops
