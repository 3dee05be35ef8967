// tile_blocks: how a thread-tiled kernel's block is arranged, one row of threads (today's) or a
// 2-D block of Y rows along the tile axis by B / Y columns along the innermost axis.
//
// A thread tile (thread_tiles.h) shares, among its R points of the tile axis a, what its
// reductions read that does not move with a (phi[k, i D + d] in mhc_dx's
// dx[s, i, d] = sum_k dh_mix[s, k] phi[k, i D + d], tile axis s). In the flattened linear
// order all B threads of a block hold the same tile of a and B consecutive vector groups of the
// innermost axis x: no two of them read the same element of phi, so every block fetches its
// own B V-wide slice of phi from L2, once per tile of a (mhc_dx at B1 S4096 n4 D4096: the 1.5
// MB of phi once per each of 512 token tiles, ~800 MB of L2 traffic for 1.6 G multiply-adds).
// With GridConfig::tile_block_rows Y > 1 the block's threads form Y rows of X = B / Y: row
// y = threadIdx.x / X takes tile Y a_blk + y of a, column c = threadIdx.x % X takes group
// X x_blk + c of x, and the block index decodes (a_blk, the other axes, x_blk) as the linear
// index did (a counting ceil(E / R) / Y tiles of rows, x its groups / X): the Y rows read the
// same X V-wide slice of phi (one L2 fetch, the other rows' reads hit L1), consecutive threads
// still hold consecutive groups of x (coalesced rows of X V elements), and the loads that
// move with a but not with x (dh_mix[s, k]) are read by Y rows instead of one.
//
// Derived choice (choose_tile_blocks, after derive_grid): per reduction iteration a block
// reads B / Y x-slices of the loads that move with x but not with a (V elements a thread) and
// Y a-slices of those that move with a but not with x (R elements a row); Y is the power of
// two in [2, B] that minimizes that sum (the smaller on ties), kept only when it is below the
// sum at Y = 1 (today's row), when Y divides a's tile count, X divides x's group count (every
// block full: the grid is exactly the linear indices / B, no grid-stride loop), a row of X V
// elements of each target spans at least 128 bytes (the stores stay whole lines), and a row
// holds at least a warp (X >= 32: the a-slices stay one address per warp, a broadcast, as in
// one row; with 16 columns a warp's two rows read two). mhc_dx (R = 8, V = 8, B = 128): 4128
// bytes an iteration at Y = 1, 1152 at Y = 4 (32 columns, 512-byte rows of bf16 dx). On the
// H100 at B1 S4096 n4 D4096 (docs/results/h100-2026-11-26-dxtile) the rows cut dx's L2-to-L1
// reads 2.4x (8 rows: 960 -> 405 MB) but not its time, which the issue rate at 4 warps per
// scheduler bounds: 200 -> 192 us with 4 rows, 195 with 8, 197 with 16. Each point is computed
// by one thread with the code of before, so the results are bitwise the same. ADJOINT_TUNE_TILE_BLOCK_ROWS: -1 derives, 0 (or 1) keeps one row
// (the kernels of before, byte for byte), Y >= 2 forces Y rows wherever the divisibility
// allows. Only specialized linear grids: a batch-generic program (EmitOptions::outer_size)
// keeps one row.
#pragma once

#include <string>

#include "compiler/schedule_notes.h"
#include "ir/program.h"

namespace adjoint::compiler {

struct TileBlockOptions {
  /// -1: derive; 0 or 1: one row (the blocks of before); Y >= 2 (a power of two dividing the
  /// block): Y rows wherever the tile and group counts allow it.
  int forced_rows = -1;
  /// Derived rows keep a row of each target at least this many bytes wide.
  int min_row_bytes = 128;
  /// Derived rows keep at least this many threads a row: a warp, so that the loads that move
  /// with the tile but not with x have one address per warp (a broadcast), as in one row.
  int min_columns = 32;
  /// Derived rows yield to the block's ring (EmitOptions::tile_uniform_ring, merged from
  /// branch hmix): a thread tile whose reductions run more than kLongTileReduction iterations
  /// per point (or a runtime count: a token loop, x_mix's partials) is prefetched in chunks,
  /// and a load that moves with the tile axis but is the same for every thread of a one-row
  /// block (x_mix's dh_mix row per token) is then copied once per block into shared memory;
  /// rows would make it differ per row and read it from L1 per thread instead. The contractions
  /// over the mixing coefficients (dx: K = 2n + n^2 = 24, 48 or 80 iterations) keep their rows. Measured on the H100 at B2 S2048 n6 D1024:
  /// x_mix's partials 174.0 us with 2 rows (branch dxtile), 76.7 with one row and the ring
  /// (branch hmix). false: the rows' rule alone (ADJOINT_TUNE_TILE_UNIFORM_RING=0 sets it).
  bool yield_to_block_ring = true;
};

/// The most iterations per point of a tile's reductions for which derived rows are still
/// considered (TileBlockOptions::yield_to_block_ring): above the mixing contractions' K <= 80,
/// below a split token sum's partials (256 to 1024 iterations at the bench shapes).
inline constexpr int64_t kLongTileReduction = 128;

/// Throws adjoint::Error (kInvalidArgument) for forced_rows outside {-1, 0, 1} and the powers
/// of two in [2, 1024].
void check_tile_block_options(const TileBlockOptions& options);

/// The rows `kernel` (grid set) gets: 1 (one row) or Y, and why.
struct TileBlockChoice {
  int rows = 1;
  std::string why;
};
TileBlockChoice choose_tile_block(const ir::Kernel& kernel, const TileBlockOptions& options);

/// Sets GridConfig::tile_block_rows on the thread-tiled kernels chosen (grids set, every axis
/// linear). Returns the very same program when nothing changes; `notes` receives a line per
/// tiled kernel.
ir::Program choose_tile_blocks(const ir::Program& program, const TileBlockOptions& options,
                               ScheduleNotes* notes = nullptr);

}  // namespace adjoint::compiler
