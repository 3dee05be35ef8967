// unfuse_fma_sums: the ADJOINT_TUNE_FMA=0 override. Every fma_sum reduce (ir/expr.h) becomes a
// plain sum, so each product is rounded on its own before it is added: the kernels of before
// fused multiply-adds were part of the IR. It changes results in the last bits (the device no
// longer computes what the interpreter computes for the op's program), deterministically; it
// exists to measure what the fused accumulation buys, not for use. The ops decide where a
// product is fused (docs/compiler.md, "Fused multiply-add"); no pass ever fuses one.
#pragma once

#include "ir/program.h"

namespace adjoint::compiler {

/// `program` with every fma_sum replaced by a sum of the same axes, body and dtype; the very
/// same program when it has none.
ir::Program unfuse_fma_sums(const ir::Program& program);

}  // namespace adjoint::compiler
