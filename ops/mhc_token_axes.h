// The token axes of the mHC ops (mhc_pre, mhc_pre_backward, mhc_post, mhc_post_backward,
// mhc_sinkhorn, mhc_sinkhorn_backward): batch B and seq S, the two outer dimensions of every
// per-token tensor. A specialization has them as constants; a program generic in them
// (docs/dynamic_shapes.md) has them as size parameters read from the attributes `batch` and
// `seq`, and declares its per-token tensors as dynamic tensors [B, S, row...], contiguous.
// Every op of the family builds its specialized and its generic program through the same code:
// one builder over a TokenAxesMaker, wrapped by build_specialized (the registered op) and
// build_generic (ops/dynamic_ops.cpp's table); mhc_pre_backward, whose specialized form also
// depends on BuildOptions, wraps its builder itself.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ops/dynamic_ops.h"
#include "ops/registry.h"

namespace adjoint::ops {

/// The largest batch and seq of a generic mHC program.
inline constexpr int64_t kMaxGenericTokens = (int64_t{1} << 31) - 1;

/// The token axes of a program: the specialization's constants, or size parameters.
struct TokenAxes {
  ir::Expr batch, seq;
  bool generic = false;
};

/// How a program builder gets its token axes: as constants, or as sizes it declares in the
/// builder it is handed (sizes must be declared before the tensors that use them).
using TokenAxesMaker = std::function<TokenAxes(ir::ProgramBuilder&)>;

/// spec's attribute `attr` (`batch` or `seq`) as a token count: an integer >= 0. A count of 0
/// is an empty batch, as PyTorch allows: per-token outputs are empty and token sums are zero.
/// Throws adjoint::Error (kInvalidArgument) naming the op and the attribute otherwise.
int64_t token_count(const Specialization& spec, const std::string& attr);

/// B and S as the constants of spec's attributes `batch` and `seq` (the op's own config
/// validates them).
TokenAxesMaker constant_token_axes(const Specialization& spec);

/// B and S for a program generic in `generic_axes` (a subset of {"batch", "seq"}): each named
/// axis a size in [1, kMaxGenericTokens] read from its attribute, the other spec's constant.
/// Throws adjoint::Error (kInvalidArgument) naming spec's op for any other name, at once.
TokenAxesMaker generic_token_axes(const Specialization& spec,
                                  const std::vector<std::string>& generic_axes);

/// Records every attribute of `spec` in `pb` and makes the token axes there: how each program of
/// the family begins.
TokenAxes begin_token_program(ir::ProgramBuilder& pb, const Specialization& spec,
                              const TokenAxesMaker& token_axes);

/// A builder of an mHC program over the token axes it is handed.
using TokenProgramBuild = ir::Program (*)(const Specialization&, const TokenAxesMaker&);

/// `build` over spec's constant token axes: the specialized program (OpDefinition's build).
template <TokenProgramBuild build>
ir::Program build_specialized(const Specialization& spec) {
  return build(spec, constant_token_axes(spec));
}

/// `build` generic in `generic_axes` (DynamicOp::build_generic).
template <TokenProgramBuild build>
ir::Program build_generic(const Specialization& spec,
                          const std::vector<std::string>& generic_axes) {
  return build(spec, generic_token_axes(spec, generic_axes));
}

/// A per-token tensor [B, S, row...] of `role` (input, output or temporary), contiguous:
/// static when the axes are constants, dynamic otherwise.
ir::TensorRef per_token_tensor(ir::ProgramBuilder& pb, const TokenAxes& tokens,
                               const std::string& name, ir::DType dtype,
                               const std::vector<int64_t>& row, ir::TensorRole role);

/// The dynamic axes of every mHC op: batch and seq (scalar attributes). Not outer batches (one
/// size each): both are the tokens. `token_pair` marks them a token pair (DynamicAxis::
/// token_pair) for the ops whose stages compute per token (mhc_post, mhc_post_backward,
/// mhc_sinkhorn and its backward); mhc_pre (a block reduction over tokens) and
/// mhc_pre_backward (token sums) are not.
std::vector<DynamicAxis> mhc_token_dynamic_axes(bool token_pair = false);

}  // namespace adjoint::ops
