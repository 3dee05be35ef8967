// Stages, kernels and programs: the statement level of the IR.
//
// - A Stage defines or updates one tensor over an iteration domain (a list of axes, each
//   starting at 0 with a constant extent):
//     compute     T[d0, d1, ...] = value          each point of T written exactly once; the
//                                                 domain is T's shape, in order
//     scatter_add T[idx...] += value if condition  for every point of the domain; colliding
//                                                 indices accumulate in `accumulation` dtype;
//                                                 the target starts at zero (the runtime
//                                                 zeroes it) and is converted to T's dtype once
//                                                 every contribution is in
// - A Kernel is one launch: stages that share one domain, run point by point in order. A stage
//   may read what an earlier stage of the same kernel wrote only at the same point; anything
//   else goes in a later kernel. Its GridConfig says how the domain maps to blocks and threads;
//   when not set the compiler derives it.
// - A row-group kernel (Kernel::row_axes = r > 0, made by compiler/row_groups.h) relaxes both
//   rules: its stages' domains share their first r axes (the rows: same extents) and may
//   differ after them; each stage runs over its whole domain before the next one starts, and a
//   stage may read what an earlier stage wrote at any point of the same row (the load's first
//   r indices are the stage's first r domain variables).
// - A Program is a list of kernels run in order, with its input, output and temporary tensors.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/dynamic_sizes.h"
#include "ir/expr.h"
#include "ir/tensor.h"

namespace adjoint::ir {

enum class StageKind : uint8_t { kCompute, kScatterAdd };

struct Stage {
  StageKind kind = StageKind::kCompute;
  Tensor target;
  std::vector<Axis> domain;
  std::vector<Expr> indices;  // scatter_add only: where each point lands
  Expr value;
  Expr condition;             // scatter_add only, optional: points where it is false add nothing
  DType accumulation = DType::kF32;  // scatter_add only
};

/// How a domain axis is executed on the device.
enum class AxisBinding : uint8_t {
  kLinear,  ///< part of the flattened index spread over blocks x threads (grid-stride)
  kBlock,   ///< one block (x, then y, then z) per index
  kThread,  ///< one thread of the block per index
  kSerial,  ///< a loop inside each thread
};
std::string_view axis_binding_name(AxisBinding b);

/// The mapping of a kernel's domain onto the launch grid. `is_set == false` asks the compiler
/// to derive it; an explicit one is verified to cover every point exactly once.
struct GridConfig {
  bool is_set = false;
  std::vector<AxisBinding> bindings;  // one per domain axis
  int block_size = 0;                 // threads per block
  int vector_width = 1;               // elements per thread along the innermost linear axis
  /// Threads that cooperate on each domain point's reductions: 1 (each thread reduces alone)
  /// or 32 (a warp: lanes stride over the reduced axis and combine by shuffles in a fixed
  /// tree), or 16, 8 or 4 (that many lanes of a warp per point, 32 / L points per warp; only
  /// for reductions every lane group reaches, compiler/reduction_schedule.h). Lanes need every
  /// axis linear; with a vector width V the lanes compute V points of the innermost axis, one
  /// accumulator each.
  int reduction_lanes = 1;
  /// Thread tile (compiler/thread_tiles.h): with tile_points R > 1, each thread computes R
  /// consecutive points of domain axis `tile_axis` (a linear axis, not the innermost, of extent
  /// E >= R) besides its vector group, so that what the R points read in common inside a
  /// reduction is read once for all of them; where R does not divide E the last of the
  /// ceil(E / R) tiles is partial (its points past E - 1 are computed at E - 1 and not stored).
  /// -1 / 1: no tile.
  int tile_axis = -1;
  int tile_points = 1;
  /// Thread tile blocks (compiler/tile_blocks.h): with tile_block_rows Y > 1 (a thread tile,
  /// every axis linear) a block's threads form Y rows of block_size / Y: row threadIdx.x / X
  /// takes one tile of tile_axis, column threadIdx.x % X one vector group of the innermost
  /// axis, and blockIdx.x decodes the rest (tile_axis counting its tiles / Y, the innermost
  /// axis its groups / X). 1: one row (the flattened linear index).
  int tile_block_rows = 1;
  /// Block reduction (compiler/block_reductions.h): with block_tokens T > 0 each block owns T
  /// points of the token axes (every domain axis but `block_output_axis` and the kBlock axes)
  /// and every point of `block_output_axis`; it walks the reduction in chunks of block_chunk
  /// iterations staged in shared memory, and each thread accumulates block_token_points x
  /// block_output_points points in registers. 0: not a block reduction.
  int block_tokens = 0;
  int block_output_axis = -1;
  int block_token_points = 1;
  int block_output_points = 1;
  int block_chunk = 0;
  /// Block reduction staging width W: each staging thread loads W consecutive iterations of
  /// the reduction's innermost axis for one token (or output) with vector accesses where the
  /// layout allows (W divides the chunk and that axis' extent); 1: one iteration per thread.
  int block_stage_width = 1;
  /// Block reduction shared layout: 4 lays the staged f32 arrays out for 16-byte reads (token
  /// rows of stride C + 4, weights transposed to [C][K]) and the compute loop reads 4 iterations
  /// of a token, and 4 outputs of a weight row, per shared load; 0: rows of stride C + 1 and
  /// one value per shared load.
  int block_shared_vectors = 0;
  /// Row-group kernels (Kernel::row_axes > 0, compiler/row_groups.h): each block owns this many
  /// consecutive rows (row-major over the row axes) for every stage, its threads stride over
  /// the stage's points of those rows, and a barrier separates the stages. `bindings` is empty.
  int64_t rows_per_block = 0;
  /// Row-group kernels only: each thread owns one row and runs every stage's points of it in
  /// order, so no barrier is needed (block_size == rows_per_block). false: the block's threads
  /// stride over each stage's points of its rows, __syncthreads() between the stages.
  bool row_per_thread = false;
};

struct Kernel {
  std::string name;
  std::vector<Stage> stages;
  GridConfig grid;
  /// 0: every stage shares one domain and runs point by point. r > 0: a row-group kernel (see
  /// the top of this file); its grid is set, with GridConfig::rows_per_block.
  int row_axes = 0;
};

struct Program {
  std::string name;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  std::vector<Tensor> temporaries;
  std::vector<Kernel> kernels;
  /// Free-form facts about the specialization (op attributes), printed in the header.
  std::map<std::string, std::string> attributes;
  /// Size parameters of a generic program (ir/dynamic_sizes.h); empty for a static program.
  std::vector<SizeParam> sizes;
  /// Generic programs: a declared bound on the storage elements of every dynamic tensor at run
  /// time (the runtime checks it before choosing the program); 0 when only the sizes' bounds
  /// apply. The index width of generic kernels follows from it (compiler/lower_generic.h).
  int64_t dynamic_storage_bound = 0;

  /// The tensor with this name among inputs, outputs and temporaries, or nullptr.
  Tensor find_tensor(const std::string& name) const;
};

}  // namespace adjoint::ir
