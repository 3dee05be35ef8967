// lower_token_pair(): lower_outer_generic's form for a token pair. mHC's programs have two sizes,
// batch B and seq S; where they are the first two domain axes (b < B, s < S) of every stage and
// the first two dimensions of every dynamic tensor, whose strides are [S * K, K] (K constant:
// B * S rows of K elements, one contiguous token axis), and b and s enter nothing but those two
// indices of the stage's own target and loads (no token reduction, no neighbouring token),
// memory is that of [1, B * S, ...]. The program is then bound at B = 1 and S = T_max (the largest
// token count within the storage bound), lowered by lower(), and each kernel is emitted with the
// count `B * S * K` for kernel parameters B and S (OuterSizeParam::batch_source): the extent-1
// batch axis decodes to 0 and the seq axis, without a modulo, to the token b * S + s. Invariance
// is checked at T_max and T_max - 1 (invariant_lowering.h) as for one outer batch.
// mhc_pre_backward (token sums over b and s) keeps lower_generic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "compiler/compiled_program.h"
#include "compiler/lower.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// Why `program` is not a token pair as above (two sizes; its storage bound set and 32-bit; the
/// sizes only the leading pair of every stage and dynamic tensor, that pair contiguous), or "".
std::string token_pair_refusal(const ir::Program& program);

/// The largest token count T of a token-pair `program` for which every tensor's storage at
/// batch 1 and seq T stays within program.dynamic_storage_bound (at most seq's upper bound; 0
/// when none or when batch 1 is outside the batch's bounds).
int64_t token_pair_lowering_value(const ir::Program& program);

/// The program lowered as a token pair, or nullopt (the reason in `*why` when given) when it
/// is not one or its kernels are not invariant in the token count.
std::optional<CompiledProgram> lower_token_pair(const ir::Program& program,
                                                const LowerOptions& options, std::string* why);

}  // namespace adjoint::compiler
