// row_groups: fusion of consecutive kernels whose dependencies stay inside a row. When kernel j
// reads what an earlier kernel i wrote only at points of the same "row" (the same values of
// the leading domain axes they share, e.g. the token (b, s) of mhc_sinkhorn's iterations, which
// read every scale of their own token), one block can own a range of rows for all of them: the
// kernels become the stages of one row-group kernel (ir::Kernel::row_axes, ir/program.h), whose
// block runs stage after stage over the points of its rows (threads striding over each
// stage's points) with __syncthreads() between the stages, so that what a stage reads of its
// row was written by its own block before the barrier. Each point computes the same expression
// as before in the same order, so results are bitwise those of the separate kernels; nothing
// is shared between blocks, so it is deterministic.
//
// A group is a maximal run of consecutive eligible kernels (compute stages only, no explicit
// grid, no warp lanes, no thread tile: what the reduction schedules left to one thread per
// point; reductions of at most max_reduction_trips iterations each and max_point_work in all
// per point; not excluded) for which some
// r >= 1 row axes are legal: every kernel's domain has the same first r extents; every load of
// a tensor written by an earlier kernel of the group indexes its first r dimensions with the
// loading stage's first r domain variables; no kernel of the group reads a tensor that a later
// kernel of the group writes; and no stage has more than max_row_points points per row. Each
// kernel after the first must also read something an earlier one wrote at another point than
// its own: the boundaries fused are those that only such row-local reads forced (kernels that
// are separate for another reason, or could have been one kernel's stages, stay apart). The
// largest legal r is taken (the smallest rows, the most blocks). A derived choice fuses groups
// of at least min_kernels kernels; a forced R any group of two or more.
//
// Rows per block R: the most rows whose points fit block_size threads (at least 1), but no more
// than leave target_blocks blocks when there are enough rows; the block has R x (the largest
// stage's points per row) threads rounded up to whole warps (at most 1024).
// A row per thread (RowSchedule::kThread, chosen by kAuto when every stage has at most
// thread_max_points points per row and the row-local temporaries fit registers): each thread owns one row and runs its stages one after
// the other, each stage's points in order, with no barrier (nothing it reads of its row was
// written by another thread); R = the block size = rows / target_blocks rounded up to whole
// warps, within [32, thread_block_max] (all the rows when fewer). Small rows then cost no
// block-wide barrier per stage and no idle threads in the stages of fewer points, and the
// points of a stage, which often compute the same subexpressions of their row (mhc_sinkhorn's
// scales each recompute the step's sums), are one unrolled loop in which the compiler shares
// them. Results are the same bits: each point computes the same expression.
// ADJOINT_TUNE_ROW_SCHEDULE (runtime::lower_options): auto, block or thread.
// ADJOINT_TUNE_ROW_GROUPS (runtime::lower_options): -1 derives, 0 never fuses, R >= 1 forces R
// rows per block. Runs after choose_thread_tiles and before derive_grid (which leaves set grids
// alone); launch_geometry.h proves the launch covers every row and point once.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "compiler/compiled_program.h"
#include "compiler/schedule_notes.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// How a row-group kernel's threads share its rows (ADJOINT_TUNE_ROW_SCHEDULE): kBlock, the
/// block's threads stride over each stage's points of the block's rows with __syncthreads()
/// between the stages; kThread, each thread runs its own row's points of every stage in order
/// (GridConfig::row_per_thread: no barrier); kAuto, kThread when every stage has at most
/// RowGroupOptions::thread_max_points points per row, else kBlock.
enum class RowSchedule { kAuto, kBlock, kThread };

/// "auto", "block" or "thread"; anything else throws adjoint::Error (kInvalidArgument) naming
/// `what`.
RowSchedule parse_row_schedule(const std::string& text, const std::string& what);

struct RowGroupOptions {
  /// -1: derive; 0: never fuse; R >= 1: fuse with R rows per block.
  int64_t forced_rows_per_block = -1;
  /// The most points a stage may have per row (a row's stage is run by one block).
  int64_t max_row_points = 256;
  /// The fewest kernels a derived group fuses: a group saves its size - 1 launches and costs
  /// the vector groups and the per-kernel grids derive_grid would give its kernels, which two
  /// kernels need not repay (a forced R fuses groups of 2 as well).
  int64_t min_kernels = 3;
  /// Threads per block a derived R aims at (R = block_size / points per row).
  int64_t block_size = 256;
  /// A derived R leaves at least this many blocks when the rows allow (2 per SM of an H100).
  int64_t target_blocks = 264;
  /// > 0: R is derived as for at most this many rows (a token pair's kernels, lowered at the
  /// largest token count, serve every smaller one: lower() passes target_blocks * 32, so R is
  /// that of a specialized program of up to 8448 rows, 32 for a row per thread). 0: the rows.
  int64_t schedule_rows = 0;
  /// The longest reduction (trip count of one reduce) an eligible kernel may have: a long one
  /// streams memory, which the kernel's own schedule (vector groups, splits) serves better
  /// than a block that owns rows.
  int64_t max_reduction_trips = 256;
  /// The most reduction iterations a point of an eligible kernel may run in all (nested
  /// reductions multiply, sibling ones add).
  int64_t max_point_work = int64_t{1} << 16;
  /// How the rows are run (see RowSchedule).
  RowSchedule schedule = RowSchedule::kAuto;
  /// kAuto runs a row per thread when no stage has more points per row than this and every
  /// row-local candidate (RowLocals) fits kRowLocalMaxLiveBytes (mhc_sinkhorn's forward holds
  /// K and two states, 128 bytes at n = 4; its backward keeps every state for the reverse
  /// sweep, 768).
  int64_t thread_max_points = 64;
  /// A derived row-per-thread block: rows / target_blocks rounded up to whole warps, within
  /// [32, thread_block_max] threads (fewer when there are fewer rows).
  int64_t thread_block_max = 128;
  /// The most tensors a fused kernel may take as parameters (kMaxKernelParams): a group ends
  /// before it would need more.
  int64_t max_params = static_cast<int64_t>(kMaxKernelParams);
  /// Kernels that must keep their own launch (claim-slot and store-scatter kernels of binned
  /// gathers, whose emit options go by kernel name).
  std::set<std::string> excluded_kernels;
};

/// Row-local temporaries of a row-per-thread kernel: the emitter (emit_row_groups.cpp) holds one
/// row of each in the thread (an array, registers once unrolled) instead of global memory.
/// Candidates: temporaries written by a stage of the kernel that no other kernel reads or
/// writes, of at most kRowLocalMaxElements elements per row and no broadcast dimension. Each
/// lives from the stage that first writes it to the last stage that reads it; the shortest
/// lived are taken first while the bytes live at once stay within kRowLocalMaxLiveBytes per
/// row (the others stay in global memory, read back by the thread that wrote them).
struct RowLocals {
  std::set<const ir::TensorNode*> tensors;
  /// Candidates that no stage reads (mhc_sinkhorn's forward writes every scales_t, but the
  /// second iteration of a launch recomputes the first inline): their values are dead, the
  /// emitter leaves their stages out.
  std::set<const ir::TensorNode*> unread;
  int64_t live_bytes = 0;  ///< the most bytes per row of `tensors` live at once
  int64_t all_bytes = 0;   ///< the same if every candidate were row-local
};
constexpr int64_t kRowLocalMaxElements = 256;
constexpr int64_t kRowLocalMaxLiveBytes = 512;

/// `stages` in order, `outside` the tensors other kernels read or write.
RowLocals choose_row_locals(const std::vector<const ir::Stage*>& stages,
                            const std::set<const ir::TensorNode*>& outside, size_t row_axes,
                            int64_t max_live_bytes = kRowLocalMaxLiveBytes);
/// Of a row-group kernel of `program`.
RowLocals choose_row_locals(const ir::Kernel& kernel, const ir::Program& program);

/// Throws adjoint::Error (kInvalidArgument) for forced_rows_per_block outside {-1, 0} and
/// [1, 1024].
void check_row_group_options(const RowGroupOptions& options);

/// Fuses the groups described above into row-group kernels named `<first>_to_<last>` (stages
/// in order, grid set). Returns the very same program when nothing is fused. `notes` (by kernel
/// name) receives a line per fused kernel (its members, rows and R, and why), keeps the notes
/// of the fused kernels under the new name, and a line per kernel that stayed alone although
/// it is eligible, with the reason.
ir::Program fuse_row_groups(const ir::Program& program, const RowGroupOptions& options,
                            ScheduleNotes* notes = nullptr);

}  // namespace adjoint::compiler
