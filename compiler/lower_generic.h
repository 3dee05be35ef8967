// lower_generic(): the pipeline of generic programs (ir/dynamic_sizes.h), whose extents are
// kernel parameters. lower() hands them here. It is shorter than the specialized pipeline on
// purpose: every step must hold for every size in the declared bounds, so it keeps to what it
// can prove symbolically:
//
// A program whose one size is an outer batch (entering no index math) goes to
// lower_outer_generic (compiler/lower_outer_generic.h) first: the specialized pipeline with the
// batch as a parameter. Every other one:
//
//   verify (at sample sizes) -> lower_scatter_to_gather_generic (compiler/invert_floor_map.h)
//     -> split_generic_reductions (sums over a runtime extent get a fixed number of partials)
//     -> generic grid (every axis linear, a tail-guarded group of consecutive innermost points
//        per thread, grid-stride) + coverage proof
//     -> index width from the declared bounds -> emit_cuda (sizes as parameters)
//
// The specialized split reductions need lengths the host knows: a sum over a runtime extent gets
// split_generic_reductions' strided partials instead. Warp lanes, vector groups and thread tiles
// are taken where the static part of the domain proves them, else groups of consecutive
// innermost points guard the row's tail; thread-tiled kernels get the emitter's aligned twin
// (early copies, a ring of shared memory over runtime trips) as specialized ones do
// (docs/dynamic_shapes.md, "The compiler").
#pragma once

#include <cstdint>

#include "compiler/compiled_program.h"
#include "compiler/lower.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// The largest storage bound (elements per tensor) with which a generic kernel uses 32-bit
/// index math: room for the grid-stride loop's last step past the end.
inline constexpr int64_t kGenericInt32StorageBound = (int64_t{1} << 31) - 1 - (int64_t{1} << 30);

/// The most points a generic kernel's domain may have at run time (the runtime checks each
/// call): a grid-stride step past the last point stays within int64.
inline constexpr int64_t kMaxGenericPoints = int64_t{1} << 62;

/// The most consecutive innermost points one thread of a generic kernel computes.
inline constexpr int kMaxGenericGroupPoints = 16;

/// The bytes of stored elements in a generic kernel's group along the innermost axis (4 f32,
/// 8 f16/bf16 points), as in a specialized vector group: the decode and the outer axes' windows
/// are computed once per group, and each point after the first computes one window edge (its
/// left edge is its neighbour's right edge). Measured on the H100 (docs/dynamic_shapes.md):
/// groups of 8 f32 points (32 bytes per thread) spread each warp's stores and loads over twice
/// the sectors and were slower than one point per thread on the upsampling cases.
inline constexpr int kGenericGroupBytes = 16;

/// The shortest reduction (constant trips) for which a generic kernel lets a warp share each
/// point (generic_reduction_lanes in lower_generic.cpp).
inline constexpr int64_t kGenericLaneMinTrips = 128;
/// Static domains of fewer points than this that reduce at least kGenericLaneMinTrips
/// iterations take a warp per point whatever their access pattern.
inline constexpr int64_t kGenericLaneMaxFewPoints = 4096;

/// A generic thread tile (a vector-group kernel's runtime axis, lower_generic.cpp) keeps at most
/// this many accumulators per thread (tile points x vector width), and at most
/// kMaxGenericTilePoints points.
inline constexpr int64_t kGenericTileAccumulators = 64;
inline constexpr int64_t kMaxGenericTilePoints = 16;
/// The block size of a thread-tiled generic kernel (LowerOptions::block_size unset).
inline constexpr int kGenericTiledBlockSize = 128;

/// The points of a group: kGenericGroupBytes of the widest stored element, at most the innermost
/// extent's upper bound (1 for an empty domain).
int generic_group_points(const ir::Program& program, const ir::Kernel& kernel);

/// Lowers a generic program. Throws adjoint::Error (kInvalidProgram) when a scatter has no
/// gather computable from runtime extents or a grid configuration cannot be proven to cover
/// the symbolic domain.
CompiledProgram lower_generic(const ir::Program& program, const LowerOptions& options);

/// The coverage proof of a generic kernel: its grid must map every point of the domain to
/// exactly one (thread, loop iteration) for every size in the declared bounds. Proven for
/// all-linear bindings with one point per thread or a group of R consecutive points of the
/// innermost axis (tile_axis = innermost, tile_points = R <= kMaxGenericGroupPoints; a
/// mixed-radix decode of a grid-stride index over the outer extents and ceil(E / R) groups,
/// each point guarded by g * R + r < E), given a point count of at most kMaxGenericPoints.
/// Throws adjoint::Error (kInvalidProgram) naming the kernel and what it cannot prove.
void check_generic_coverage(const ir::Program& program, const ir::Kernel& kernel);

}  // namespace adjoint::compiler
