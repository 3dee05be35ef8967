// transposed_store: fuses a tiled transposition (tiled_transpose.h) into the kernel that writes
// its source, so that the source is never written to memory. The binned gather's
// broadcast-innermost layout (lower_scatter_to_binned_gather.h) gathers into cells x channels
// (`<T>_bin_gathered`) and a tiled copy moves that into grad_input's N, C, H, W layout: two
// full passes over grad_input's bytes (23 us at 4x32x256^2 f32 on the H100). Fused, each block
// of the gather stages the B * V values it computed (B threads, V per vector group) in shared
// memory, meets at __syncthreads, and writes them to the copy's target transposed: the block's
// values are whole rows of channels of B * V / C consecutive cells, so each channel's cells
// are one coalesced run of the target.
//
// A pair qualifies when the writer kernel K (one compute stage, target G, every axis linear in
// G's order, G dense row-major, V >= 1 points per thread and no lanes, tiles, block reductions
// or row groups) is immediately followed by the tiled copy T whose source is G; G is a temporary no
// other kernel reads or writes, and T's target is not a tensor of K; K's grid covers its linear
// points in one step with full blocks (no thread leaves before the barrier); the channels C
// divide a block's B * V elements and the staging, (B * V / C) x (C + 1) elements, fits in
// kMaxStagingBytes. The copy moves bits: the target's values are bitwise those of the two
// kernels, at every launch configuration. lower() then emits K with the fused store
// (EmitOptions::transposed_store), does not emit T, and does not allocate G.
//
// Direct stores (`direct`, LowerOptions::direct_transposed_store, ADJOINT_TUNE_DIRECT_STORE):
// where K's vector groups are whole rows of G (V == C: the binned gather at 3 f32 channels
// under whole-axis groups, vector_groups.h, or at 4 f32 / 8 bf16 channels), each thread
// already holds every channel of its cell, so it writes its V values straight to T, one
// element per channel: the threads of a warp hold consecutive cells, so each channel's stores
// are one coalesced run of T, with no staging and no barrier. The copy T need not be tiled
// (C = 3 is below tiled_transpose's 16): any transposition T of G that match_tiled_transpose
// describes (at a minimum extent of 1) qualifies, under the same conditions on K and G as
// above except the staging, blocks and grid steps, which a direct store does not use.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "compiler/tiled_transpose.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// The copy a writer kernel performs in its epilogue: `transpose.source` is the writer's target
/// (never written), `transpose.target` gets its values.
struct TransposedStore {
  TiledTranspose transpose;
  std::string copy_kernel;     ///< the copy kernel, no longer emitted
  int64_t block_elements = 0;  ///< B * V: the elements one block stages
  /// Each vector group is a whole row of C values of G: stored straight to the target, one
  /// element per column, nothing staged (see "Direct stores" above).
  bool direct = false;
};

/// Writer kernel name -> its fused store, for EmitOptions.
using TransposedStores = std::map<std::string, TransposedStore>;

/// The most shared memory a block's staging may take.
inline constexpr int64_t kMaxStagingBytes = 32 * 1024;

/// Every writer/copy pair of `program` (grids derived) that qualifies (see above), among the
/// copies `transposes` tiles and, with `direct`, the copies any transposition describes whose
/// writer's groups are whole rows.
TransposedStores choose_transposed_stores(const ir::Program& program,
                                          const TiledTransposes& transposes, bool direct = true);

}  // namespace adjoint::compiler
