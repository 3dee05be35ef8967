// Stage loops: a run of a row-group kernel's stages that repeats one sequence of stages up to
// the tensors it reads and writes (mhc_sinkhorn's iterations t = 3..t_max, each computing
// scales_t from scales_{t-1} alike; its backward's reverse steps, each computing grad_p_{t-1}
// from grad_p_t, scales_t and scales_{t-1} alike) is emitted as a loop of constant trip count
// that runs the sequence once per iteration (`#pragma unroll 1`), instead of as straight-line
// code. NVRTC then optimizes and assembles one copy of the sequence instead of t_max: what
// makes the cold compile of such a kernel fast (mhc_sinkhorn_backward at n = 8 from seconds to
// a fraction of one, docs/compiler.md "Stage loops").
//
// The stages of each iteration are those of the first one with other tensors: a *family* is a
// tensor of the first iteration together with the tensor standing in its place in each later
// iteration (ir::structurally_equal_renaming finds them); a tensor that is the same in every
// iteration is invariant. The emitter (emit_row_groups.cpp) gives each family a place the loop
// can address by its counter: tensors in global memory through a table of their pointers in
// shared memory (filled once per block), row-local temporaries of a row-per-thread kernel
// (registers) through a *chain*: a written family W whose member of iteration r is read only
// by iteration r and, through a read family F with F_r = W_{r-1}, by iteration r + 1 (two row
// arrays, the one of F_0 and the one of W_0, W_0's copied into F_0's at the end of every
// iteration; after the loop W's last member is W_0's array). Every point computes the very
// expression it computed in the straight-line code, so results are bitwise the same.
//
// find_stage_loops only finds the runs (structure); the emitter decides whether it can address
// every family and says why not in a schedule note when it cannot. ADJOINT_TUNE_STAGE_LOOPS=0
// (LowerOptions::stage_loops) keeps the straight-line code of before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir/program.h"

namespace adjoint::compiler {

/// One run: stages [first, first + period * count) of the kernel are `count` iterations of
/// the `period` stages from `first`.
struct StageLoop {
  size_t first = 0;
  size_t period = 1;
  size_t count = 0;
  /// Each family that varies: its tensor in every iteration (count entries, the first
  /// iteration's first), all distinct. Tensors of the first iteration not listed are invariant.
  std::vector<std::vector<const ir::TensorNode*>> families;
  /// The first iteration's tensors that are the same in every iteration.
  std::vector<const ir::TensorNode*> invariant;

  size_t end() const { return first + period * count; }
};

/// The fewest iterations a run is looped for.
constexpr size_t kMinStageLoopIterations = 3;
/// The longest sequence of stages (period) looked for.
constexpr size_t kMaxStageLoopPeriod = 8;

/// The runs of `stages`, in order and disjoint: from each stage, the shortest period whose
/// sequence repeats at least kMinStageLoopIterations times (as many times as it does), else
/// none from that stage.
std::vector<StageLoop> find_stage_loops(const std::vector<ir::Stage>& stages);

}  // namespace adjoint::compiler
