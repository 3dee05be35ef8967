// index_width: 32-bit index math where it provably fits, 64-bit otherwise.
//
// A kernel is 32-bit when every offset of every tensor it touches fits in int32 (its storage
// spans at most 2^31 elements, and loads and stores are in bounds by the IR's rules) and
// every loop bound does too: the grid-stride loop's last index plus its step, and the start and
// end of every reduce axis. In a 32-bit kernel the pass rewrites each i64 index expression whose
// value provably fits in int32 (by the Bounds analysis) as i32: variables become i32(v),
// constants i32 constants, and arithmetic, selects, comparisons and float-to-integer casts over
// such operands i32 nodes. Expressions it cannot bound stay i64. The emitter declares the
// kernel's loop variables and computes offsets in the kernel's width. 64-bit kernels (any
// tensor with more than 2^31 - 1 elements) are left unchanged.
#pragma once

#include <vector>

#include "ir/bounds.h"
#include "ir/program.h"

namespace adjoint::compiler {

enum class IndexWidth { k32, k64 };

/// The index width of a kernel whose grid configuration is set (see the file comment).
IndexWidth kernel_index_width(const ir::Kernel& kernel);

/// One stage of a 32-bit kernel with its index math narrowed: binds the stage's domain in
/// `bounds` (which may hold more ranges, e.g. a generic program's sizes) and rewrites every i64
/// expression that provably fits. What narrow_index_math does per stage.
ir::Stage narrow_stage_index_math(const ir::Stage& stage, ir::Bounds& bounds);

/// Returns `program` with the index math of its 32-bit kernels narrowed to i32.
ir::Program narrow_index_math(const ir::Program& program);
/// narrow_index_math that also records each kernel's width in `widths` (kernel order): the
/// decision lower() hands the emitter (EmitOptions::index_width) rather than deriving it again.
ir::Program narrow_index_math_recording(const ir::Program& program,
                                        std::vector<IndexWidth>& widths);

}  // namespace adjoint::compiler
