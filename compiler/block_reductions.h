// block_reductions: the block (GEMM-like) reduction schedule. A kernel whose one stage computes
// `epilogue(sum_r body)` where body combines, by + - * /, values that do not depend on one
// domain axis k (the "token parts": x[b, s, r] * gamma[r]) with values that depend on k but on
// no other axis except block axes (the "weight parts": phi[k, r]) is a skinny GEMM: h_mix of
// mhc_pre is one (tokens x n*D times n*D x K). One thread per point re-reads the weights for
// every token, and a warp per point re-reads them for every token too.
//
// Execution model (GridConfig::block_tokens T > 0): the domain axes are the output axis k
// (bound kThread: every block covers all K points), block axes (bound kBlock: axes that both
// parts depend on, e.g. the g of split partials; blockIdx.y, .z, one value per block) and the
// token axes (bound kLinear: the others, flattened row-major into N tokens, tiles of T tokens,
// grid-stride over tiles by blockIdx.x). A block has TL x (K / Mk) threads: thread
// (og, tl) = (threadIdx.x / TL, threadIdx.x % TL) owns the Mt tokens m * TL + tl (m < Mt, T =
// Mt * TL) of its tile and the Mk outputs og * Mk + j (j < Mk). The reduction's axes are
// flattened row-major into R iterations and walked in chunks of C (C divides R): the block
// stages each token part for its T tokens and each weight part for every k into shared memory
// (as f32/f64, the values the serial loop computes), synchronizes, and every thread adds
// body(token value, weight value) for the chunk's iterations in order into its Mt x Mk
// accumulators. Each point is therefore summed in the serial order of the interpreter, by one
// thread: bitwise equal to the serial schedule and independent of the launch. Points past N
// are staged from nothing and never stored.
//
// Small token counts (B*S = 1) cannot fill the GPU with T-token tiles: split_reductions then
// splits such kernels into contiguous ranges of the reduced axis (partial g owns iterations
// [g E/G, (g + 1) E/G)), and the partials kernel, where g is a block axis, gets this schedule.
//
// Chosen (ADJOINT_TUNE_BLOCK_REDUCTION=auto) when the analysis below finds the shape; =off
// never. Runs first among the schedule passes; reduction_schedule, thread_tiles and derive_grid
// leave block kernels' schedules alone; every choice and refusal goes to ScheduleNotes.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "compiler/compiled_program.h"
#include "compiler/schedule_notes.h"
#include "ir/program.h"

namespace adjoint::compiler {

struct BlockReductionOptions {
  enum class Mode { kAuto, kOff };
  Mode mode = Mode::kAuto;
  /// Reductions of fewer iterations than this are left to the other schedules.
  int64_t min_trips = 256;
  /// The largest number of output points a block covers.
  int64_t max_outputs = 256;
  /// With block axes (a batch of small GEMMs, such as mhc_post_backward's per-token 4 x 4
  /// products), the fewest tokens that must share each block's weights.
  int64_t min_batched_tokens = 32;
  /// The widest staging width (GridConfig::block_stage_width) a tile may take: 8 (default)
  /// stages 8 consecutive iterations per thread with vector loads where they fit, 1 stages one
  /// iteration per thread (the schedule of before). ADJOINT_TUNE_BLOCK_STAGING.
  int max_stage_width = 8;
  /// GridConfig::block_shared_vectors where it applies (f32 parts, 4 | C, 4 | K, 4 | Mk):
  /// 16-byte shared reads in the compute loop. ADJOINT_TUNE_BLOCK_SHARED_VECTORS.
  bool shared_vectors = true;
  /// Mk, the outputs per thread: 0 derives it (the largest of 8, 6, 4, 3, 2 dividing K);
  /// N > 0 takes N where it divides K and the block stays within 1024 threads, else derives.
  /// ADJOINT_TUNE_BLOCK_OUTPUT_POINTS.
  int output_points = 0;
  /// A kernel without block axes of fewer tokens (the product of the token axes) than
  /// min_tokens keeps no block schedule where its weights, read once per token (tokens x K x
  /// R x the weight parts' bytes), stay within a bound: few_tokens_max_bytes for at most
  /// few_tokens tokens, streamed_max_bytes for narrow GEMMs (at most narrow_outputs outputs K).
  /// A tile puts its tokens on 32 lanes, so with few tokens most lanes idle between the barriers
  /// while the weights wait in shared memory; the split reduction (split_reductions.h) streams
  /// them with every thread of the GPU instead, each (token, output) point reading its weight
  /// row: cheap while the re-reads stay few or in L2. Measured on the H200 (docs/compiler.md
  /// "Few tokens: the weights streamed"): h_mix at B1 S1 n8 D16384 38.7 -> 17.8 us, S2 40.8 ->
  /// 22.4; n = 4 (K = 24) faster up to 24 tokens; n = 6 and 8 at 8 tokens 15% slower, hence the
  /// two bounds. ADJOINT_TUNE_BLOCK_MIN_TOKENS (1: every token count keeps the block, before)
  /// and ADJOINT_TUNE_BLOCK_STREAMED_MB (streamed_max_bytes in MiB; few_tokens_max_bytes is
  /// twice it).
  int64_t min_tokens = 32;
  int64_t few_tokens = 4;
  int64_t narrow_outputs = 32;
  int64_t streamed_max_bytes = int64_t{40} << 20;
  int64_t few_tokens_max_bytes = int64_t{80} << 20;
};

/// Options under which every kernel of the shape qualifies: for kernels whose schedule is
/// already chosen (the split's partials kernel, derive_grid, the emitter, the proof).
BlockReductionOptions any_block_shape();

/// The mode named by `text` ("auto" or "off"); throws adjoint::Error (kInvalidArgument)
/// naming `what` otherwise.
BlockReductionOptions::Mode parse_block_reduction_mode(const std::string& text,
                                                       const std::string& what);

/// What the schedule needs to know about a kernel, derived from its IR alone.
struct BlockReductionShape {
  std::string why_not;  ///< empty when the kernel has the shape
  const ir::ReduceNode* reduce = nullptr;
  int output_axis = -1;
  std::vector<int> token_axes;  ///< domain order
  std::vector<int> block_axes;  ///< domain order: blockIdx.y, then .z
  std::vector<ir::Expr> token_parts, weight_parts;  ///< maximal subexpressions, staged
  int64_t trips = 0;    ///< R: iterations of the reduction per point
  int64_t tokens = 0;   ///< N: product of the token axes' extents
  int64_t outputs = 0;  ///< K: the output axis' extent
};

/// The shape of `kernel` (see the top of this file), or why_not saying why it has none.
/// A kernel already marked (GridConfig::block_output_axis >= 0) is analyzed for that axis only.
BlockReductionShape analyze_block_reduction(const ir::Kernel& kernel,
                                            const BlockReductionOptions& options = {});

/// Sets the block fields of `kernel.grid` (T, Mt, Mk, C, the staging width W <= max_stage_width
/// and the output axis) for `shape`, or returns why no tile fits; the reason text of the choice
/// goes to `reason`. max_token_points caps Mt (4 or 1): split_reductions passes 1 when tiles of
/// 4 tokens per lane leave too few blocks to fill the GPU; max_chunk caps C (32, or 64 for a
/// one-tile GEMV streaming many weights: twice the bytes in flight between two barriers).
std::string choose_block_tile(ir::Kernel& kernel, const BlockReductionShape& shape,
                              std::string& reason, int max_stage_width = 8,
                              bool shared_vectors = true, int output_points = 0,
                              int max_token_points = 4, int max_chunk = 32);

/// The shared arrays' layout: a token part's element (row t, iteration c) is at
/// t * token_stride + c; a weight part's (output k, iteration c) at k * weight_row + c * weight_column.
struct BlockSharedLayout {
  int64_t token_stride = 0, weight_row = 0, weight_column = 0;
};
BlockSharedLayout block_shared_layout(const ir::GridConfig& grid, int64_t outputs);

/// The pass: marks every kernel with the shape (grid not set yet; derive_grid binds the axes).
/// Returns the very same program when nothing changes. `few_tokens`, when given, receives the
/// names of the kernels that have the shape but fewer than options.min_tokens tokens (left
/// unmarked: ReductionSplitOptions::streamed_weight_kernels).
ir::Program choose_block_reductions(const ir::Program& program,
                                    const BlockReductionOptions& options,
                                    ScheduleNotes* notes = nullptr,
                                    std::set<std::string>* few_tokens = nullptr);

/// Binds the axes of a marked kernel (output kThread, block axes kBlock, tokens kLinear) and its
/// block size; the grid is then set.
void bind_block_reduction_grid(ir::Kernel& kernel);

/// The launch of a block kernel: (tiles, block axes...) x TL * K / Mk threads, checked by
/// check_block_reduction_coverage.
LaunchDims block_reduction_launch(const ir::Kernel& kernel);

/// Proves that `launch` computes every point of `kernel` exactly once under the model above;
/// throws adjoint::Error naming the kernel and the first condition that fails.
void check_block_reduction_coverage(const ir::Kernel& kernel, const LaunchDims& launch);

/// Bytes of shared memory a block kernel stages per chunk.
int64_t block_reduction_shared_bytes(const ir::Kernel& kernel, const BlockReductionShape& shape);

}  // namespace adjoint::compiler
