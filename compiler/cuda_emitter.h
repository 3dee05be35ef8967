// emit_cuda: one self-contained CUDA C++ translation unit per kernel of a lowered program.
//
// Expects a program after derive_grid (every grid set), lower_scatter_to_atomics (every
// scatter target has its accumulation dtype) and optionally narrow_index_math. The unit
// includes only adjoint's embedded templates/*.cuh, defines one `extern "C" __global__
// __launch_bounds__(block)` entry whose parameters are the kernel's tensors (program order:
// inputs, outputs, temporaries; read-only ones const, all __restrict__), and bakes every size
// and stride in as a constant. Index math uses the kernel's IndexWidth. Loads and stores
// convert f16/bf16 storage to and from float in the kernel; f16/bf16 operations are computed in
// float and rounded back after each one; a Reduce is a serial loop in the thread (in warp
// kernels, GridConfig::reduction_lanes = 32, one outside every other Reduce is shared by the
// warp's lanes and combined by a fixed shuffle butterfly, and lane 0 stores) accumulating
// in its dtype (f16/bf16 accumulators are held in float and rounded once at the end); a
// select or && / || whose untaken side needs statements (loads bound to temporaries,
// reductions) becomes an if/else, so only the branch the IR picks is evaluated; integer `/`
// and `%` are floor division unless both operands are provably non-negative; scatter_add is an
// atomic add. Repeated subexpressions are emitted once per scope as `const` temporaries.
// Float operations are written plainly: the runtime compiles with --fmad=false, as the IR's
// no-contraction rule requires; the one fused multiply-add is the IR's own, a fma_sum's
// accumulation step, written as fmaf/fma (correctly rounded on the device and the host alike). With EmitOptions::streaming_loads / streaming_stores the span
// loads / group stores of vector-group kernels use the evict-first helpers of adjoint_memory.cuh.
// A thread-tiled kernel's body is written twice (EmitOptions::tile_prefetch >= 1): behind one
// test that every base pointer it spans is aligned, a copy without a check per access (with its
// long tiled loop's streamed spans, and the spans read after its reductions, copied to shared
// memory with cp.async ahead of their use), else the body with a check per access.
#pragma once

#include <optional>
#include <string>

#include "compiler/compiled_program.h"
#include "compiler/index_width.h"
#include "compiler/tiled_transpose.h"
#include "compiler/transposed_store.h"
#include "compiler/unroll_policy.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// The outermost linear axis of a static kernel whose extent becomes a kernel parameter
/// (compiler/lower_outer_generic.h): the program was bound at `value` for that size, and the
/// emitter writes the size named `source` wherever that extent would bound the grid.
struct OuterSizeParam {
  std::string source;  ///< the SizeParam's source, e.g. "input_size[0]"
  std::string name;    ///< its name in the kernel, e.g. "N"
  int64_t value = 0;   ///< the extent the program was lowered at; any smaller one is served
  /// A token pair (compiler/lower_outer_generic.h): the size counting the batch in front of
  /// this one (its source and kernel name), the program lowered at batch 1. The kernel then
  /// takes both sizes, the batch first, and its count is `batch * size * K`; the linear axes in
  /// front of the token axis have extent 1. Empty: one size.
  std::string batch_source, batch_name;
};

/// Code generation choices that do not change what a kernel computes.
struct EmitOptions {
  /// Vector-group kernels read their spans with ld.global.cs (evict first: the data is not
  /// expected to be touched again soon). Applied to every span load, without proof that the
  /// input is read once; scalar loads are unchanged.
  bool streaming_loads = false;
  /// Vector-group kernels store their groups with st.global.cs.
  bool streaming_stores = false;
  /// Lines on the schedule of the kernel's reductions and why it was chosen (from
  /// split_reductions), written as comments at the top of the unit; none when empty.
  std::string schedule_note;
  /// The kernel's index width as narrow_index_math decided it; derived again (with
  /// kernel_index_width) when absent, for programs that did not go through that pass.
  std::optional<IndexWidth> index_width;
  /// Loads of this i32 tensor claim a slot: each is emitted as the atomic fetch-and-decrement
  /// `atomicAdd(&t[i], -1) - 1`, never hoisted or shared (lower_scatter_to_binned_gather's
  /// fill kernel, where t holds each bucket's count; empty: none). Integer atomics whose final
  /// values do not depend on their order leave the kernel deterministic.
  std::string claim_slot_tensor;
  /// The claims count up instead: `atomicAdd(&t[i], 1)`, the old value (the binned gather's
  /// ranked count, whose IR zeroes t in an earlier kernel).
  bool claim_counts_up = false;
  /// The kernel is a lane scan (lower_scatter_to_binned_gather.h, LaneScanKernels): where its
  /// grid is one point per thread over a 1-d domain of whole warps (every warp 32 consecutive
  /// points from a multiple of 32), an integer sum over [32 (i / 32), i) of x[j] (i the point)
  /// is an exclusive scan over the warp's lanes (__shfl_up_sync, one load per lane), and an
  /// integer sum whose bounds depend on i only through i / 32c is shared by the warp (lanes
  /// stride over it, a __shfl_xor_sync butterfly). Other sums, or another grid: serial loops.
  bool lane_scan = false;
  /// The scatter-add into this tensor lands on a distinct element at every point (the binned
  /// gather's fill and sort kernels, which write a permutation of record ids into slots that
  /// start unused): emitted as a plain store, no atomic, and the pipeline does not zero the
  /// target first (empty: none).
  std::string store_scatter_target;
  /// Loops with a constant trip count above 8 that are not unrolled completely get
  /// `#pragma unroll N` with this N; 0 writes no pragma and leaves the choice to NVVM, which unrolls such loops
  /// completely (a 512-trip reduction loop of mhc_pre_backward gave a 395 KB cubin and took
  /// NVRTC seconds instead of tens of milliseconds; docs/runtime.md).
  int partial_unroll = 0;
  /// Reduction loops of more than 128 constant trips that no other rule gives a pragma (not in a
  /// thread tile or a warp's lanes, partial_unroll 0, the unroll budget off) get
  /// `#pragma unroll N` with this N instead of NVVM's complete unrolling (mhc_pre_backward's
  /// serial x_mix at 455 tokens: a 446 KB cubin, seconds of NVRTC); 0: no pragma, as before
  /// (ADJOINT_TUNE_LONG_LOOP_UNROLL).
  int long_loop_unroll = 16;
  /// The unroll factor of a thread-tiled kernel's long reduction loops (the tile's R x V updates
  /// per trip): 0 derives it (up to 4, at most 128 updates per unrolled body: 2 for dx's 8 x 8),
  /// N in [1, 64] that factor (ADJOINT_TUNE_TILE_UNROLL; 4 the derived factor before, for tiles
  /// of at most 64 accumulators).
  int tile_unroll = 0;
  /// Thread-tiled kernels (ADJOINT_TUNE_TILE_PREFETCH): 0 emits every span load and group
  /// store with its own alignment check (the kernel of before); 1 emits the body twice, behind
  /// one test that every base pointer spanned is aligned: the aligned copy loads and stores
  /// without a branch per access (so the loads of several iterations can be in flight), the
  /// other is the body of before; N >= 2 also loads, in the aligned copy, the spans of a long
  /// tiled reduction loop that do not move with the tile axis (x_mix's x) for P iterations
  /// ahead of their multiply-adds, P the largest power of two <= N dividing the trip count.
  int tile_prefetch = 8;
  /// Thread-tiled kernels' aligned copy (tile_prefetch >= 1): the spans a stage reads per tile
  /// point after its reductions (dx's x and grad_h_in) are copied to shared memory (cp.async)
  /// before the reductions, their DRAM latency overlapping the multiply-adds
  /// (ADJOINT_TUNE_TILE_EARLY_COPIES; false: loaded after the reductions, as before).
  bool tile_early_copies = true;
  /// A value that adds reductions (a binned gather's bucket walks, one per tap and part): each
  /// add whose operands are both computed is written as soon as they are (vector-group kernels
  /// without a thread tile, from three group reductions: into an array of its own; elsewhere, a
  /// float add both of whose sides reduce: a const before the right side's loops), so the accumulators die as the walks go
  /// instead of all living to the end (bicubic's 48 walks x 3 channels held 181 registers). The
  /// same adds in the same order: the same bits (ADJOINT_TUNE_PROGRESSIVE_SUMS; false: every
  /// accumulator added at the end, as before).
  bool progressive_group_sums = true;
  /// The early copies' reads (tile_early_copies): each tile point's span is read back from
  /// shared memory into registers with the widest aligned loads (one 16-byte load for dx's 8
  /// bf16 of x), ahead of the point's values (ADJOINT_TUNE_TILE_EARLY_WIDE_READS; false: each
  /// element read from shared memory where the value uses it, as before, which ptxas may split
  /// into one 2-byte load an element).
  bool tile_early_wide_reads = true;
  /// Thread-tiled kernels' ring (tile_prefetch >= 2): a span that moves with the tile axis but
  /// is the same for every thread of a block (x_mix's 24 floats of dh_mix per token, read by
  /// all 128 threads) is copied once per block into a ring of its own, by a few threads, and
  /// read from shared memory (a broadcast) instead of from global memory by every thread; the
  /// chunk loop then waits for its copies and synchronizes the block before it computes
  /// (ADJOINT_TUNE_TILE_UNIFORM_RING; false: such spans loaded per iteration, as before).
  bool tile_uniform_ring = true;
  /// Thread-tiled kernels with an aligned copy (tile_prefetch >= 1): the other copy, run when
  /// some base pointer is misaligned, computes the thread's R x V points one at a time in
  /// rolled loops (`#pragma unroll 1`: one scalar accumulator, each reduction loop rolled,
  /// element accesses) instead of repeating the unrolled tile with a branch per access. Same
  /// expressions per point, same order of every sum: the same bits. It halves the NVRTC time
  /// of mhc_dx and x_mix's partials (docs/compiler.md, "The misaligned copy, point by point"),
  /// and on the H100 the misaligned path ran as fast as the tiled copy it replaces. false: the
  /// tiled body of before (ADJOINT_TUNE_TILE_FALLBACK=0).
  bool tile_point_fallback = true;
  /// Warp-cooperative reductions (reduction_schedule.h): the most bytes a lane reads of one
  /// spanned load per trip of the lane loop (emit_lane_spans.cpp). 16 (default) or 8: where
  /// every load that moves with the lane axis reads it stride-1 (and nothing else does), lane l
  /// reads V consecutive iterations (V = bytes / the narrowest element, halved while the axis
  /// has fewer than 32 V iterations or the offsets do not allow whole-span accesses), one
  /// vector load per span behind one alignment test of the bases (else element loads in the
  /// same order: the same bits), the trips past the last whole 32 V strided. 0: one iteration
  /// per lane and trip, the kernels of before (ADJOINT_TUNE_LANE_SPANS=0).
  int lane_spans = 16;
  /// Trips of the lane-span loop unrolled: 0 derives it (4, halved while 16 span loads per
  /// unrolled body are exceeded), N >= 1 that factor (ADJOINT_TUNE_LANE_SPAN_UNROLL).
  int lane_span_unroll = 0;
  /// `__launch_bounds__(block, N)` for thread-tiled kernels (ptxas keeps their registers to
  /// what N resident blocks per SM allow; ADJOINT_TUNE_TILE_MIN_BLOCKS). -1 (default): derived,
  /// N = 640 / block (5 blocks of 128) for a kernel whose aligned copy has a prefetched ring
  /// and at most kMinBlocksAccumulators accumulators a thread (x_mix's partials at n = 4 and
  /// 6: 48), none for the others; 0: none (the kernels of before); N >= 1: every tiled kernel.
  int tile_min_blocks = -1;
  /// Row-group kernels run the stages that repeat as loops (stage_loops.h); false: straight
  /// line, as before (ADJOINT_TUNE_STAGE_LOOPS=0).
  bool stage_loops = true;
  /// A row-per-thread stage of at most 64 points is unrolled while its unrolled loop reads
  /// memory at most this many times (KernelEmitter::memory_loads_unrolled: its distinct loads of
  /// tensors that are not row-local, its points' reductions unrolled); above it the stage stays
  /// a loop. NVRTC's time grows with the loads written out: mhc_pre at D=32 (h_mix: 24 points of
  /// 128 trips of phi, 3328 distinct loads) took 16 s of cold prepare on the H100 host unrolled;
  /// Sinkhorn's stages, whose unrolling pays, stay below it (n = 8: 704). 0: always unrolled, as
  /// before (ADJOINT_TUNE_ROW_STAGE_UNROLL_LOADS=0).
  int64_t row_stage_unroll_loads = 1024;
  /// How far reduction loops are unrolled (unroll_policy.h); budget 0: the pragmas above.
  UnrollPolicy unroll;
  /// A static kernel whose outermost linear extent is the runtime size `outer_size->name`
  /// (compiler/lower_outer_generic.h): the size is the last parameter, the linear count is
  /// `size * (points per outer index)`, and the grid is derived at launch. The emitter throws
  /// adjoint::Error (kInvalidProgram) when the kernel's grid does not have that form (the
  /// outermost linear axis of that extent, no thread, block or cooperative axes).
  std::optional<OuterSizeParam> outer_size;
  /// Generic kernels with a vector group whose innermost axis counts a multiple of 32 groups and
  /// whose outermost axes have runtime extents (mhc_pre_backward's dx over (b, s, i, d)): the
  /// decode takes the runtime axes between the innermost axis' warps of 32 groups and the rest,
  /// so the warps of a block take neighbouring tokens of the same 32 groups and what does not
  /// depend on the tokens (dx's phi spans) is read from L1 by the block's other warps
  /// (emit_generic_grid.cpp). Coverage is unchanged: a mixed-radix decode in another order.
  bool interleave_size_axes = false;
  /// Vector-group spans: a load that the expression being loaded evaluates unconditionally (no
  /// select branch, no right operand of && or ||) takes a span when its lane dimension is in
  /// bounds for the whole lane, its other indices needing no interval proof (the IR's loads are
  /// in bounds where evaluated, ir/expr.h). Generic kernels set it (LowerOptions::
  /// generic_evaluated_spans): the bounds of a split token sum's index g + G u, u < (S - g + G -
  /// 1) / G, do not show it below S. false: every index proven by intervals, before.
  bool spans_of_evaluated_loads = false;
  /// The kernel is this batched transposition (tiled_transpose.h): emitted as warps moving
  /// 32 x 32 tiles through shared memory, with a launch of its own (emit_tiled_transpose.cpp).
  std::optional<TiledTranspose> tiled_transpose;
  /// The kernel writes `transposed_store->transpose.target` instead of its stage's target
  /// (transposed_store.h): each vector group is staged in shared memory and the block writes
  /// its values transposed after a __syncthreads (emit_statements.cpp).
  std::optional<TransposedStore> transposed_store;
};

/// Emits kernel `kernel_index` of `program` with the entry point name `entry`. Fills entry,
/// source, params, launch and uses_atomics (zero_before is the pipeline's business).
CompiledKernel emit_cuda_kernel(const ir::Program& program, size_t kernel_index,
                                const std::string& entry, const EmitOptions& options = {});

}  // namespace adjoint::compiler
