// lower_scatter_to_binned_gather: the deterministic strategy for scatter-adds whose target index
// depends on data (DESIGN.md, scatter strategy 3), such as grid_sampler's grad_input. Chosen by
// lower() under Determinism::kDefault for every such scatter; under kAllowAtomics only where it
// is the faster of the two (BinnedGatherOptions::only_where_faster: enough broadcast elements
// for the records a point scatters), the rest left to lower_scatter_to_atomics.
//
// A scatter `T[idx(d)] += value(d) if cond(d) over D` is split into broadcast axes (domain
// axes that index one component of T as themselves and appear in no other component nor in the
// condition: grid_sampler's channels) and record axes R (the rest). A record r in R lands in
// the cell key(r) (the components of T that broadcast axes do not index, linearized). The
// rewrite, shared by every broadcast index:
//   bin_count_zero  bin_count = 0 (ranked count, the default: "Ranked count" below)
//   bin_count     bin_rank[r] = claim_up(bin_count[key(r)]) if cond(r), over R: the claim is
//                 the emitter's fetch-and-increment (EmitOptions::claim_counts_up), the
//                 record's rank of arrival in its bucket, which varies from run to run while
//                 the final counts do not; ranked_count off: scatter_add bin_count[key(r)] += 1
//                 if cond(r) (integer atomics without results)
//   bin_scan_*    bin_offset = exclusive scan of bin_count (cells + 1 entries), integer
//                 reductions: by default (scan_lanes) one kernel per level of chunk sums of 32
//                 and one that gives every entry its warp's lane scan of its chunk of 32 plus
//                 the upper levels' digits, shared by the warp (shuffles, the emitter's
//                 EmitOptions::lane_scan); scan_lanes off, by digits: at most 31 terms of each
//                 level per entry, serially; scan_digits off, the chained levels (two kernels
//                 per level)
//   bin_fill      bin_unsorted[bin_offset[key(r)] + bin_rank[r]] += key(r) x 2^32 + r (packed
//                 keys, i64; packed_keys off: r, i32), a plain store: each record takes a
//                 distinct slot of its bucket, in an order that varies from run to run; with
//                 ranked_count off the slot is bin_offset[key(r)] + claim(bin_count[key(r)]),
//                 claim the emitter's fetch-and-decrement (EmitOptions::claim_slot_tensor)
//   bin_sort      every filled slot p ranks its record among its bucket's (how many ids are
//                 smaller; the bucket read from the packed key, or recomputed from the record)
//                 and writes it to bin_sorted[bin_offset[key] + rank]: each bucket in
//                 increasing record id, the same every run
//   <kernel>      T[t] = sum over q in [bin_offset[key(t)], bin_offset[key(t) + 1]) of
//                 value(record bin_sorted[q], broadcast axes = t's components), a serial sum
//                 in record order per element (chunked where the bucket holds a whole aligned
//                 chunk: "Chunked walk" below): no float atomics, bitwise the same every run
//                 and for every launch configuration
// Broadcast-innermost layout (BinnedGatherOptions): where the broadcast axes span at least
// channels_last_min elements and there are at least records_per_cell_min records per cell on
// average, or 1-2 records per cell and at least sparse_channels_last_min broadcast elements whose
// copies are cheap (tiled, from sparse_tiled_min elements, or rows of at most
// sparse_row_bytes_max bytes that the gather stores directly): nearest sampling, one record per
// cell, was faster that way on the H100 at 4-64 channels, not at 3, nor at 8 f32 channels with
// two plain copies; bilinear and bicubic, 4 and 16 records, were 2.4-9.3x faster already with
// naive copies), the gather reads and writes
// with the broadcast axes innermost, so
// that the lanes of a warp share one cell's bucket bounds, record ids and factors (one
// transaction each instead of one per lane) and read a record's values for consecutive
// broadcast indices from one contiguous row instead of one scattered element per plane:
//   bin_<X>_transposed   X with its broadcast components moved last, for every tensor X the
//                        value reads with the broadcast indices as plain components
//                        (grid_sampler's grad_output: N, H_out, W_out, C); none for a
//                        tensor whose strides already lay it out that way
//   <kernel>_gather      T's cells x broadcast indices, the same serial sums as above
//   <kernel>             T = the gathered values in T's own layout (a copy: the same bits)
// Chunked walk (BinnedGatherOptions::gather_chunk = C > 0, when there are at least C records):
// the sorted slots are cut into aligned chunks of C slots, [gC, gC + C). A chunk that lies
// inside one bucket is "interior"; bin_chunk_sums sums every interior chunk for every
// broadcast index (a sequential sum of its C records, in record order) on its own thread, and
// the gather of a bucket [b, e) that contains an interior chunk adds
//   (head + middle) + tail, head = the sequential sum of [b, C*ceil(b/C)),
//   middle = the sequential sum of the interior chunk sums in chunk order,
//   tail = the sequential sum of [C*floor(e/C), e),
// while a bucket that contains no aligned chunk (every bucket smaller than C) is one
// sequential walk, bitwise as without chunking. The order depends on the buckets' positions
// (data) only, never on the launch configuration; a bucket of any size costs each element at
// most 2C - 2 records and |bucket| / C chunk sums, instead of |bucket| records.
// Taps in the gather (BinnedGatherOptions::taps_walks_max, binned_taps.h): where a record axis
// only shifts T's index by constants (grid_sampler's tap: T[.., floor(y) + tap / 2, ..]) and
// taps x broadcast elements (the bucket walks per cell) are at most taps_walks_max, the tap
// axis leaves the records: one record per point, binned by its base index shifted into
// [0, extent + max shift - min shift) per component (all its taps' cells at once), counted
// where that key is in range. The factors are per slot and tap, [records, taps], and so is
// the condition (bin_valid, i32) unless it only bounds the index, which every term of a walk
// satisfies; chunk sums per chunk, tap and broadcast index; and
// the gather adds, for taps 0, 1, ... in order, the sum of the bucket of the base that the tap
// shifts onto the element (each walk as above, chunked or not, terms where the condition
// fails add +0):
//   T[t] = (walk(tap 0) + walk(tap 1)) + ...   (written out: no constant-trip reduction)
// Deterministic and launch-independent like the rest, but not the records layout's order
// (there a bucket holds a point's taps in record order), so not its bits.
// Clamped taps (binned_taps.h: T[.., clamp(floor(y) + tap / 4 - 1, 0, H - 1), ..], bicubic
// under border padding): the key is the base clamped to the taps' reach, and an element on an
// edge receives per tap from a range of keys: the innermost component's range is one span of
// slots [bin_offset[first key], bin_offset[last key + 1]) (the one bucket off the edges), and
// one outer clamped component's extra keys on its edges are summed by
//   <T>_bin_edges        per element of the two edges ([.., 2, ..]: low, high) and tap, the
//                        rows past the element's own key, each a span as above
// which the gather adds after its taps on those edges; chunk sums also cover the chunks inside
// a row's edge spans. Order: the taps' own spans in tap order, then on an edge the edges' sum
// (per tap in tap order, its extra rows in increasing key order).
// Sub-buckets (BinnedGatherOptions::subbucket_records = K > 0): the sort ranks a record among
// its whole bucket, the square of the bucket's size, which a small input sampled by a large grid
// makes huge (every cell thousands of records). Where the records exceed 2K x cells, the count,
// fill and sort use S = records / (K x cells) slots per cell instead of one: record r goes to
// key' = key(r) x S + r / ceil(records / S), so bucket c is the concatenation of its S
// sub-buckets in id order, at the same slots as without them (bin_offset has cells x S + 1
// entries; the gather reads bin_offset[c x S] and bin_offset[(c + 1) x S]), and the sorted
// slots, hence every sum, are bitwise those of S = 1. The sort ranks within a sub-bucket: at
// most ceil(records / S) records, and about K on average. A bucket that is huge because the
// data put every point in one cell (border padding with grids far outside) stays quadratic
// where cells are many (S = 1 there): the shapes alone cannot tell.
// Ranked count (BinnedGatherOptions::ranked_count): the count's atomics hand out the slots, so
// that the fill has no atomic of its own (a returning atomic per record on its store's path).
// The claiming kernel (bin_count, or bin_fill with ranked_count off) is the one place whose IR
// reading is not the whole truth (a load of bin_count stands for the claim);
// `claim_slot_tensors` names it for the emitter, `counting_claims` the claims that count up. The fill and
// sort scatters write every slot at most once, so they are plain stores into unzeroed
// temporaries (StoreScatterTargets); slots past the last filled one stay unwritten and are
// read only where the factors' guard discards them (clamped into range first).
//
// Applies to a scatter that is the only stage of its kernel and the only writer of its target,
// whose target is not an input and is read by no earlier kernel, with fewer than 2^31 records
// and cells. Anything else is left to lower_scatter_to_atomics.
#pragma once

#include <map>
#include <set>
#include <string>

#include "compiler/schedule_notes.h"
#include "ir/program.h"

namespace adjoint::compiler {

/// Kernel name -> the tensor whose loads in that kernel are slot claims (EmitOptions).
using ClaimSlotTensors = std::map<std::string, std::string>;
/// Kernel name -> the target its scatter writes at distinct elements (EmitOptions::
/// store_scatter_target): the fill and sort kernels.
using StoreScatterTargets = std::map<std::string, std::string>;
/// Kernels among ClaimSlotTensors' whose claims count up from zero (EmitOptions::
/// claim_counts_up: the ranked count, after a kernel that zeroes the claimed tensor).
using CountingClaims = std::set<std::string>;

struct BinnedGatherOptions {
  /// The fewest broadcast elements per cell (product of the broadcast extents) for which the
  /// gather uses the broadcast-innermost layout; 0 never uses it. LowerOptions carries it.
  int64_t channels_last_min = 2;
  /// ... and the fewest records per cell, as records >= records_per_cell_min * cells.
  int64_t records_per_cell_min = 2;
  /// ... or, below records_per_cell_min but with at least one record per cell (nearest sampling
  /// on a grid of the input's size), the fewest broadcast elements for which the gather still
  /// takes that layout (sparser grids keep the planar gather: not measured): a planar gather of
  /// one record per cell reads one sector per element (a record's broadcast elements lie in
  /// different planes), the copies move whole rows. 0 never (the rule before: the records
  /// alone decide). LowerOptions::binned_sparse_channels_last_min carries it.
  int64_t sparse_channels_last_min = 4;
  /// ... and there only where the copies are cheap: at least this many broadcast elements (the
  /// copies are tiled transpositions: LowerOptions::tiled_transpose_min; 0 never) ...
  int64_t sparse_tiled_min = 16;
  /// ... or a cell's broadcast elements in at most this many bytes of T (one vector group,
  /// which the gather stores into T itself: transposed_store.h's direct stores; 0 never). At 8
  /// f32 channels, neither, the layout's two plain copies made nearest slower on the H100.
  int64_t sparse_row_bytes_max = 16;
  /// Slots per chunk of the chunked gather (see the header's "Chunked walk"); 0 never chunks
  /// (one sequential walk per bucket, serial in the bucket's size); -1 derives it: 64 where
  /// cells hold fewer than 32 records on average, else the power of two nearest the square
  /// root of that average, within [8, 64] (a walk of about C + L / C terms for buckets of L).
  int64_t gather_chunk = -1;
  /// Taps in the gather (binned_taps.h, "Taps in the gather" above): a tap axis leaves the
  /// records where taps x broadcast elements (the bucket walks per cell) are at most this; 0
  /// never. LowerOptions::binned_taps_walks_max carries it.
  int64_t taps_walks_max = 16;
  /// The wider bound: taps x broadcast elements up to this also take the taps into the gather
  /// where the broadcast elements are at most taps_wide_broadcast_max (a walk's cost grows with
  /// them, the records' binning that the taps save does not), the records' points are at least
  /// the cells (no fewer points than destination cells: otherwise most walks find an empty
  /// bucket) and the gather has at least taps_wide_min_elements elements (cells x broadcast
  /// elements: small problems are bound by each thread's serial walks). 0 (or at most
  /// taps_walks_max): taps_walks_max alone. LowerOptions::binned_taps_walks_wide_max carries it.
  /// Measured on the H100: docs/compiler.md "Taps in the gather".
  int64_t taps_walks_wide_max = 64;
  int64_t taps_wide_broadcast_max = 8;
  int64_t taps_wide_min_elements = int64_t{1} << 16;
  /// The offsets' exclusive scan by base-32 digits (one kernel per level of chunk sums and one
  /// for every entry, `bin_scan*` above); false: the chained levels (two kernels per level).
  /// LowerOptions::binned_scan_digits carries it.
  bool scan_digits = true;
  /// The scan on warp lanes (with scan_digits; "Scan on lanes" in docs/compiler.md): the count
  /// padded to whole warps with at least one zero past the last slot, the levels of chunk sums
  /// as by digits, and one kernel `bin_scan0` for every offset, named in LaneScanKernels: the
  /// warp's 32 entries scan their chunk with shuffles (one load each) and share every upper
  /// level's digit sum (strided over the lanes, a butterfly). false: the scan by digits (its
  /// kernels byte for byte). LowerOptions::binned_scan_lanes carries it
  /// (ADJOINT_TUNE_BINNED_SCAN=2, the default; 1 by digits, 0 chained).
  bool scan_lanes = true;
  /// ... the levels stop at a level of at most 32 x this many entries, which the offsets'
  /// kernel sums with at most this many loads per lane (fewer levels: fewer launches, at the
  /// price of these loads in every warp). 32: on the H100 the small shapes' programs whose top
  /// it moves (4x3x64^2, 2x1x512^2, 16x4x128^2, 1x4x17^3) were as fast or faster than at 8;
  /// the larger ones measured have the same levels at 8 and 32 (docs/compiler.md, "Scan on
  /// lanes"). LowerOptions::binned_scan_top_loads carries it (ADJOINT_TUNE_BINNED_SCAN_TOP).
  int64_t scan_top_loads = 32;
  /// Packed keys: bin_fill writes slot key x 2^32 + record id (i64) into bin_unsorted, so that
  /// bin_sort reads each slot's bucket instead of recomputing it from the record (the key's
  /// loads, often gathers of the scatter's index data); comparing packed values within a
  /// bucket compares ids. false: ids only (i32), the sort decodes the key. LowerOptions::
  /// binned_packed_keys carries it.
  bool packed_keys = true;
  /// Ranked count: bin_count's atomic returns each record's rank of arrival in its bucket,
  /// which the count kernel stores per record (bin_rank, i32), so that the fill is a plain
  /// store at offset + rank, with no atomic of its own; needs `counting_claims`. false: the
  /// count adds without a result and the fill claims its slot by an atomic decrement.
  /// LowerOptions::binned_ranked_count carries it.
  bool ranked_count = true;
  /// Sub-buckets by record id ("Sub-buckets" above): where a cell holds more than twice this
  /// many records on average, each cell's bucket is cut into S = records / (this x cells) id
  /// ranges for the count, fill and sort, so the sort ranks a record among at most
  /// ceil(records / S) others instead of its whole bucket. 0 never. LowerOptions::
  /// binned_subbucket_records carries it.
  int64_t subbucket_records = 16;
  /// Whole-axis groups (vector_groups.h): the broadcast-innermost gather and its chunk sums are
  /// named in WholeAxisKernels, so that derive_grid may give a thread all of a cell's broadcast
  /// elements (3 channels: one bucket walk for the three), where records / cells is at most this
  /// (short walks, whose fixed cost per walk the group shares; with 16 records per walk,
  /// bicubic's, the group's 3 row loads per record cost more on the H100). 0 never.
  /// LowerOptions::binned_whole_axis_records_max carries it.
  int64_t whole_axis_records_max = 2;
  /// Under Determinism::kAllowAtomics (atomics allowed where they are faster): bin only the
  /// scatters whose broadcast elements reach binned_over_atomics_min_broadcast of their taps,
  /// and leave the others unchanged for the atomics (each gets a dump note either way). false
  /// (kDefault): every scatter the strategy can take.
  bool only_where_faster = false;
};

/// The fewest broadcast elements (grid_sampler's channels) from which the binned gather of a
/// scatter whose points each scatter `taps` records (1 without a tap axis: nearest; bilinear 4,
/// trilinear 8, bicubic 16, whether the taps move into the gather or stay records) is faster
/// than its atomics: the binning costs per point, the gather
/// saves per tap and broadcast element. 32 for one tap, 16 up to 8 taps, 8 above, as measured on
/// the H100 (501 random shapes, docs/results/h100-2026-11-26-sweep26) and the H200
/// (docs/results/h200-2026-12-02); docs/compiler.md "Binned or atomics".
int64_t binned_over_atomics_min_broadcast(int64_t taps);

/// Whether `stage` is a data-dependent scatter this strategy can take whose broadcast elements
/// reach binned_over_atomics_min_broadcast of its taps: where, under kAllowAtomics, a
/// deterministic gather (binned, or scanned where that is small enough) beats the atomics.
bool binned_gather_beats_atomics(const ir::Stage& stage);

/// Kernels whose vector groups may take their whole innermost axis (DeriveGridOptions::
/// whole_axis_kernels).
using WholeAxisKernels = std::set<std::string>;

/// Kernels the binned gather wants on warp lanes (ReductionScheduleOptions::preferred_kernels):
/// the scan by digits' chunk sums, each point a sum of 32 consecutive counts, which lanes read
/// as one contiguous row instead of one thread's 32 loads of a row of its own.
using LaneKernels = std::set<std::string>;

/// Kernels whose offsets are scanned on warp lanes (BinnedGatherOptions::scan_lanes; EmitOptions::
/// lane_scan): one point per thread, a domain of whole warps.
using LaneScanKernels = std::set<std::string>;
/// Kernels that read the records' values in bucket order (the factors, the chunk sums and the
/// gather) where those values read memory that several records share: a load of the scatter's
/// value that does not depend on some non-broadcast domain axis of more than one point
/// (grid_sampler's taps: a bilinear point's 4 records read the same grad_output row and source
/// coordinates, from 4 buckets; nearest has one record per point and none). Each such row is
/// read again by other walks, which an evict-first hint works against; lower() drops the
/// streaming hint on their span loads when LowerOptions::binned_reread_streaming is false.
using RereadRowKernels = std::set<std::string>;

/// Kernels whose loops with run-time trip counts the emitter keeps rolled
/// (UnrollPolicy::runtime_factor 1): `<T>_bin_edges` (clamped taps), which walks a few rows of
/// buckets per tap for the elements of two edges only; unrolled by NVVM it was a 498 KB cubin
/// and seconds of NVRTC time, rolled 118 KB.
using RolledLoopKernels = std::set<std::string>;

/// Returns `program` with every eligible scatter-add rewritten into binning and gather kernels;
/// fills `claims` (may be null) for the fill kernels it adds, and `stores` (may be null) for
/// the fill and sort kernels. Without `stores` those scatters stay atomic adds into zeroed
/// slots, which gives the same result.
ir::Program lower_scatter_to_binned_gather(const ir::Program& program, ClaimSlotTensors* claims,
                                           const BinnedGatherOptions& options = {},
                                           StoreScatterTargets* stores = nullptr,
                                           ScheduleNotes* notes = nullptr,
                                           LaneKernels* lane_kernels = nullptr,
                                           WholeAxisKernels* whole_axis_kernels = nullptr,
                                           CountingClaims* counting_claims = nullptr,
                                           LaneScanKernels* lane_scan_kernels = nullptr,
                                           RereadRowKernels* reread_kernels = nullptr,
                                           RolledLoopKernels* rolled_kernels = nullptr);

}  // namespace adjoint::compiler
