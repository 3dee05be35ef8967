// tiled_transpose: recognizes copy kernels that are batched matrix transpositions and describes
// them for the emitter, which writes them as a shared-memory tiled transposition instead of the
// generic one-thread-per-element copy. The binned gather's broadcast-innermost copies are such
// kernels (grad_output N,C,H,W -> N,H,W,C before the gather, the gathered N,H,W,C -> grad_input
// N,C,H,W after it): emitted plainly, one side of the copy strides by a whole row per thread, a
// memory sector per element (72 us of the bilinear 8x64x128^2 backward on the H100).
//
// A kernel qualifies when its only stage is `Y[d] = X[perm(d)]`: a compute stage whose value is
// one load, in Y's dtype, of a tensor X indexed by a permutation of the domain variables, with
// constant extents, that (after merging the components that stay neighbours) is
// `Y[b][q][p] = X[b][p][q]` with both p and q spanning at least `min_extent` elements, and
// whose merged groups are dense in both tensors (one stride per group). The emitted kernel
// gives each warp 32 x 32 tiles in turn: it reads a tile row by row along q (coalesced), stores
// it in shared memory (padded rows of 33, no bank conflicts), and writes it column by column
// along p (coalesced). A copy moves bits: the result is bitwise the plain copy's for every
// dtype and launch configuration.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "ir/program.h"

namespace adjoint::compiler {

/// `target[b][q][p] = source[b][p][q]` for b < batches, p < rows, q < columns, with element
/// strides per merged group (batch, row p, column q) in each tensor.
struct TiledTranspose {
  std::string source, target;
  int64_t batches = 1, rows = 1, columns = 1;
  int64_t source_batch_stride = 0, source_row_stride = 0, source_column_stride = 0;
  int64_t target_batch_stride = 0, target_row_stride = 0, target_column_stride = 0;
};

/// Kernel name -> its transposition, for EmitOptions.
using TiledTransposes = std::map<std::string, TiledTranspose>;

/// The fewest rows and columns (p and q above) for which a transposition is tiled; 0 never.
/// LowerOptions::tiled_transpose_min, ADJOINT_TUNE_TILED_TRANSPOSE.
inline constexpr int64_t kDefaultTiledTransposeMin = 16;

/// The transposition `kernel` performs, or nothing when it is not one (see above) or either
/// extent is below `min_extent` (0: never).
std::optional<TiledTranspose> match_tiled_transpose(const ir::Kernel& kernel,
                                                    int64_t min_extent);

/// Every kernel of `program` that match_tiled_transpose accepts.
TiledTransposes choose_tiled_transposes(const ir::Program& program, int64_t min_extent);

}  // namespace adjoint::compiler
