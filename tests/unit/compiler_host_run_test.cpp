// Generated kernels run on the host, checked against the interpreter. The templates compile as
// host C++ under ADJOINT_HOST_EMULATION; a small prelude supplies the CUDA built-ins the
// generated code names (threadIdx, blockIdx, uint4, __uint_as_float, ...), and a launcher runs
// every (block, thread) of a kernel's launch one after the other. Warp-cooperative kernels
// (reduction lanes, compiler/reduction_schedule.h) run each warp as 32 host threads in lock
// step: __shfl_xor_sync, __shfl_sync and __syncwarp meet at a barrier of the 32. The host C++
// compiler builds all kernels of a test into one shared library, which the test loads with
// dlopen.
//
// What this proves without a GPU: the index math, the grid decoding, vector groups (spans,
// per-element windows and tables, vector loads and stores, their element-by-element fallback
// for misaligned base pointers) compute what the interpreter computes. Gathers of values that
// are small multiples of 1/16 sum exactly in every dtype, so they must agree bit for bit;
// vectorized kernels must also agree bit for bit with the scalar kernel of the same program.
// What it cannot prove: anything about the GPU's memory model or NVRTC (jit_compile_test and
// the GPU tests cover those). Skipped when no host C++ compiler is found.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/block_reductions.h"
#include "compiler/cuda_emitter.h"
#include "compiler/derive_grid.h"
#include "compiler/embedded_templates.h"
#include "compiler/index_width.h"
#include "compiler/launch_geometry.h"
#include "compiler/lower.h"
#include "compiler/lower_generic.h"
#include "compiler/lower_outer_generic.h"
#include "compiler/lower_scatter_to_atomics.h"
#include "compiler/gathered_reduction_lanes.h"
#include "compiler/gathered_rows_innermost.h"
#include "compiler/lower_scatter_to_binned_gather.h"
#include "compiler/lower_scatter_to_gather.h"
#include "compiler/program_utils.h"
#include "compiler/reduction_schedule.h"
#include "compiler/row_groups.h"
#include "compiler/simplify.h"
#include "compiler/split_reductions.h"
#include "compiler/thread_tiles.h"
#include "compiler/tile_blocks.h"
#include "compiler/tiled_transpose.h"
#include "compiler/transposed_store.h"
#include "compiler/unfuse_fma.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ops/dynamic_ops.h"
#include "ops/registry.h"
#include "support/zero_outputs.h"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;
using ir::Var;

/// CUDA built-ins for generated code compiled as host C++.
constexpr const char* kPrelude = R"(// Host emulation of the CUDA built-ins generated kernels use.
#include <math.h>
#include <stdlib.h>
#include <algorithm>
#include <cfloat>
#include <cstring>
#include <utility>
#include <atomic>
#include <thread>
#include <vector>
#define ADJOINT_HOST_EMULATION 1
#define __global__
#define __launch_bounds__(...)
// Shared memory: one array for every host thread. Only warp-private tiles use it (tiled
// transpositions), and a warp's 32 lanes run as 32 host threads that meet at __syncwarp.
#define __shared__ static
struct adjoint_dim3 { unsigned x = 0, y = 0, z = 0; };
static thread_local adjoint_dim3 threadIdx, blockIdx;
static adjoint_dim3 blockDim, gridDim;
// The warp running now (warp launches only): its 32 lanes exchange values through `slots`.
struct adjoint_warp_state {
  std::atomic<unsigned> arrived{0}, generation{0};
  unsigned long long slots[32] = {};
};
static adjoint_warp_state* adjoint_warp = nullptr;
inline void adjoint_warp_barrier() {  // a sense-reversing barrier that yields while it waits
  const unsigned generation = adjoint_warp->generation.load();
  if (adjoint_warp->arrived.fetch_add(1) + 1 == 32) {
    adjoint_warp->arrived.store(0);
    adjoint_warp->generation.fetch_add(1);
  } else {
    while (adjoint_warp->generation.load() == generation) std::this_thread::yield();
  }
}
template <typename T>
T adjoint_exchange(T value, unsigned from_lane) {
  static_assert(sizeof(T) <= sizeof(unsigned long long), "a shuffle moves at most 8 bytes");
  std::memcpy(&adjoint_warp->slots[threadIdx.x % 32], &value, sizeof(T));
  adjoint_warp_barrier();
  T result;
  std::memcpy(&result, &adjoint_warp->slots[from_lane % 32], sizeof(T));
  adjoint_warp_barrier();  // nobody overwrites a slot before every lane has read
  return result;
}
template <typename T>
T __shfl_xor_sync(unsigned, T value, int mask) {
  return adjoint_exchange(value, (threadIdx.x % 32) ^ static_cast<unsigned>(mask));
}
template <typename T>
T __shfl_up_sync(unsigned, T value, unsigned delta) {  // lanes below delta get their own value
  const unsigned lane = threadIdx.x % 32;
  return adjoint_exchange(value, lane >= delta ? lane - delta : lane);
}
template <typename T>
T __shfl_sync(unsigned, T value, int lane) {
  return adjoint_exchange(value, static_cast<unsigned>(lane));
}
template <typename T>
T __shfl_sync(unsigned, T value, int lane, int width) {  // lane of this lane's group of width
  const unsigned group = threadIdx.x % 32 / static_cast<unsigned>(width);
  return adjoint_exchange(value, group * static_cast<unsigned>(width) + static_cast<unsigned>(lane));
}
inline void __syncwarp(unsigned = 0xffffffffu) { adjoint_warp_barrier(); }
// The block running now (block launches only: kernels that synchronize their threads), whose
// threads are host threads meeting at __syncthreads; shared arrays are statics (one block at a
// time).
struct adjoint_block_state {
  std::atomic<unsigned> arrived{0}, generation{0};
  unsigned size = 0;
};
static adjoint_block_state* adjoint_block = nullptr;
inline void __syncthreads() {
  const unsigned generation = adjoint_block->generation.load();
  if (adjoint_block->arrived.fetch_add(1) + 1 == adjoint_block->size) {
    adjoint_block->arrived.store(0);
    adjoint_block->generation.fetch_add(1);
  } else {
    while (adjoint_block->generation.load() == generation) std::this_thread::yield();
  }
}
#define __shared__ static
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
using std::max;
using std::min;
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
inline float __double2float_rz(double d) {
  float f = static_cast<float>(d);
  if (std::isinf(f) && !std::isinf(d)) return std::copysign(FLT_MAX, static_cast<float>(d));
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
  return f;
}
inline int atomicAdd(int* address, int value) { int old = *address; *address += value; return old; }
namespace adjoint {  // one thread at a time: atomics are plain adds
inline void atomic_add(int* address, int value) { *address += value; }
inline void atomic_add(float* address, float value) { *address += value; }
inline void atomic_add(double* address, double value) { *address += value; }
}
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
)";

/// Runs every thread of a launch; one exported launcher per kernel.
constexpr const char* kLauncher = R"(
#include <type_traits>
// Pointer parameters are passed as the pointers; a generic kernel's sizes as their addresses.
template <typename P>
P adjoint_argument(void* arg) {
  if constexpr (std::is_pointer_v<P>) return static_cast<P>(arg);
  else return *static_cast<const P*>(arg);
}
template <typename... P, size_t... I>
void adjoint_call(void (*kernel)(P...), void** args, std::index_sequence<I...>) {
  kernel(adjoint_argument<P>(args[I])...);
}
template <typename... P>
void adjoint_launch(void (*kernel)(P...), void** args, const unsigned* grid, unsigned block) {
  gridDim = {grid[0], grid[1], grid[2]};
  blockDim = {block, 1, 1};
  for (unsigned z = 0; z < grid[2]; ++z)
    for (unsigned y = 0; y < grid[1]; ++y)
      for (unsigned x = 0; x < grid[0]; ++x)
        for (unsigned t = 0; t < block; ++t) {
          blockIdx = {x, y, z};
          threadIdx = {t, 0, 0};
          adjoint_call(kernel, args, std::index_sequence_for<P...>{});
        }
}
template <typename... P>
void adjoint_launch_blocks(void (*kernel)(P...), void** args, const unsigned* grid,
                           unsigned block) {
  gridDim = {grid[0], grid[1], grid[2]};
  blockDim = {block, 1, 1};
  // One host thread per thread of the block, each running its thread of every block in the
  // same order; they meet at every __syncthreads (the code reaches them uniformly).
  adjoint_block_state state;
  state.size = block;
  adjoint_block = &state;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < block; ++t) {
    threads.emplace_back([&, t] {
      for (unsigned z = 0; z < grid[2]; ++z)
        for (unsigned y = 0; y < grid[1]; ++y)
          for (unsigned x = 0; x < grid[0]; ++x) {
            blockIdx = {x, y, z};
            threadIdx = {t, 0, 0};
            adjoint_call(kernel, args, std::index_sequence_for<P...>{});
            // The block's shared arrays are statics: no thread starts the next block before
            // every thread is done with this one (a GPU block has shared memory of its own).
            __syncthreads();
          }
    });
  }
  for (std::thread& thread : threads) thread.join();
  adjoint_block = nullptr;
}
template <typename... P>
void adjoint_launch_warps(void (*kernel)(P...), void** args, const unsigned* grid,
                          unsigned block) {
  gridDim = {grid[0], grid[1], grid[2]};
  blockDim = {block, 1, 1};
  // 32 host threads, one per lane, each running its lane of every warp in the same order. The
  // lanes of a warp meet at the same barriers (the code is warp-uniform), and the second barrier
  // of each exchange keeps a lane that moves on to the next warp from overwriting a slot that
  // another lane has yet to read.
  adjoint_warp_state warp;
  adjoint_warp = &warp;
  std::vector<std::thread> lanes;
  for (unsigned l = 0; l < 32; ++l) {
    lanes.emplace_back([&, l] {
      for (unsigned z = 0; z < grid[2]; ++z)
        for (unsigned y = 0; y < grid[1]; ++y)
          for (unsigned x = 0; x < grid[0]; ++x)
            for (unsigned w = 0; w < block / 32; ++w) {
              blockIdx = {x, y, z};
              threadIdx = {w * 32 + l, 0, 0};
              adjoint_call(kernel, args, std::index_sequence_for<P...>{});
            }
    });
  }
  for (std::thread& lane : lanes) lane.join();
  adjoint_warp = nullptr;
}
)";

/// A host C++ compiler, or empty when there is none.
std::string host_compiler() {
  for (const char* candidate : {"c++", "g++", "clang++"}) {
    std::string probe = std::string(candidate) + " --version > /dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return candidate;
  }
  return "";
}

/// True for a kernel whose warps must run in lock step (it shuffles or shares a tile).
bool cooperative(const CompiledKernel& k) {
  return k.source.find("__shfl_xor_sync") != std::string::npos ||
         k.source.find("__shfl_up_sync") != std::string::npos ||
         k.source.find("__syncwarp") != std::string::npos;
}

/// True for a kernel whose blocks must run their threads concurrently (it synchronizes them:
/// block reductions, row groups).
bool synchronizes(const CompiledKernel& k) {
  return k.source.find("__syncthreads") != std::string::npos;
}

/// One program to run: its kernels as compiled (entries made unique) and its tensors.
struct HostProgram {
  std::string label;
  ir::Program program;
  std::vector<CompiledKernel> kernels;
  /// Temporaries the passes added (split_reductions' partials).
  std::vector<ir::Tensor> added_temporaries = {};
};

/// How to compile a program: a forced vector width (0: derive_grid's own choice) and the tuning
/// knobs of LowerOptions (block size 0: the default, vector bytes for derived widths, streaming
/// hints).
struct Variant {
  Variant(int width) : width(width) {}  // NOLINT: a bare width is the common case
  Variant(int width, int block_size, int vector_bytes, bool streaming)
      : width(width), block_size(block_size), vector_bytes(vector_bytes), streaming(streaming) {}
  /// A bare width with the split-reduction knob (-1 derive, 0 never, G >= 2 forced).
  static Variant split(int width, int partials) {
    Variant v(width);
    v.reduction_split = partials;
    return v;
  }
  /// Data-dependent scatters as binned gathers (Determinism::kDefault) at a block size.
  /// `channels_last_min`: BinnedGatherOptions::channels_last_min (1: always broadcast-innermost).
  static Variant binned_gather(int block_size, int64_t channels_last_min = 8) {
    Variant v(0, block_size, 0, false);
    v.binned = true;
    v.channels_last_min = channels_last_min;
    v.gathered_rows_min = channels_last_min;
    return v;
  }
  /// Small data-dependent scatters as scanned gathers (ScanGatherOptions, bounds that take
  /// every program of the tests) at a block size; the rest of the pipeline as binned_gather's.
  static Variant scanned_gather(int block_size) {
    Variant v = binned_gather(block_size);
    v.scan_gather = true;
    return v;
  }
  bool scan_gather = false;
  /// Binned gathers whose walk is chunked by `chunk` slots (BinnedGatherOptions::gather_chunk;
  /// 0: one sequential walk per bucket).
  static Variant binned_chunked(int block_size, int64_t chunk, int64_t channels_last_min = 8) {
    Variant v = binned_gather(block_size, channels_last_min);
    v.gather_chunk = chunk;
    return v;
  }
  int64_t gather_chunk = BinnedGatherOptions{}.gather_chunk;
  /// BinnedGatherOptions::scan_digits (false: the chained scan levels).
  bool scan_digits = BinnedGatherOptions{}.scan_digits;
  /// Binned gathers whose offsets are scanned by the chained levels (two kernels per level).
  static Variant binned_chained_scan(int block_size) {
    Variant v = binned_gather(block_size);
    v.scan_digits = false;
    return v;
  }
  /// BinnedGatherOptions::scan_lanes and scan_top_loads (the scan on warp lanes).
  bool scan_lanes = BinnedGatherOptions{}.scan_lanes;
  int64_t scan_top_loads = BinnedGatherOptions{}.scan_top_loads;
  /// Binned gathers whose offsets are scanned by digits, serially (ADJOINT_TUNE_BINNED_SCAN=1).
  static Variant binned_digits_scan(int block_size) {
    Variant v = binned_gather(block_size);
    v.scan_lanes = false;
    return v;
  }
  /// ... on warp lanes, their levels stopping at 32 x `top_loads` entries.
  static Variant binned_lane_scan(int block_size, int64_t top_loads) {
    Variant v = binned_gather(block_size);
    v.scan_top_loads = top_loads;
    return v;
  }
  /// BinnedGatherOptions::ranked_count (false: the fill claims its slots by atomic decrements).
  bool ranked_count = BinnedGatherOptions{}.ranked_count;
  /// Binned gathers whose fill claims its slots (ADJOINT_TUNE_BINNED_RANKED_COUNT=0).
  static Variant binned_claimed_fill(int block_size) {
    Variant v = binned_gather(block_size);
    v.ranked_count = false;
    return v;
  }
  /// BinnedGatherOptions::subbucket_records (0: every bucket ranked whole).
  int64_t subbucket_records = BinnedGatherOptions{}.subbucket_records;
  /// binned_taps with buckets cut into id ranges of about `records` (0: never cut).
  static Variant binned_subbuckets(int block_size, int64_t records,
                                   int64_t channels_last_min = 8) {
    Variant v = binned_taps(block_size, 64, channels_last_min);
    v.subbucket_records = records;
    return v;
  }
  /// BinnedGatherOptions::taps_walks_max (0: every tap a record, the order the atomics
  /// lowering adds in, which the other binned tests compare against bit for bit).
  int64_t taps_walks_max = 0;
  /// Binned gathers with taps in the gather (binned_taps.h) up to `channels` taps x broadcast
  /// elements, chunked by `chunk` slots.
  static Variant binned_taps(int block_size, int64_t chunk = 64, int64_t channels_last_min = 8,
                             int64_t channels = 1 << 20) {
    Variant v = binned_chunked(block_size, chunk, channels_last_min);
    v.taps_walks_max = channels;
    return v;
  }
  /// lay_out_gathered_reductions_for_lanes' min_extent (0: not run).
  int64_t gathered_lanes_min = 0;
  /// A binned gather whose gathered reductions over `min` or more channels take warp lanes.
  static Variant binned_lanes(int block_size, int64_t min, int64_t tiled_min = 0) {
    Variant v = binned_gather(block_size);
    v.gathered_lanes_min = min;
    v.tiled_transpose_min = tiled_min;
    return v;
  }
  /// ReductionScheduleOptions::preferred_lanes: lanes per point of the kernels laid out for lanes.
  int lane_width = 32;
  /// binned_lanes with `width` lanes per point (16, 8 or 4: several points per warp).
  static Variant binned_lane_width(int block_size, int width) {
    Variant v = binned_lanes(block_size, 32);
    v.lane_width = width;
    return v;
  }
  /// ReductionScheduleOptions::whole_axis_lanes_max (0, the default: one point per lane group).
  int64_t whole_axis_lanes = 0;
  /// lower()'s defaults for grad_grid: lanes from 16 channels on, the lane width derived (4
  /// lanes below 32 channels); odd innermost axes up to `whole_axis` elements whole per group.
  static Variant binned_short_lanes(int block_size, int64_t whole_axis = 0) {
    Variant v = binned_lanes(block_size, 16);
    v.lane_width = 0;
    v.whole_axis_lanes = whole_axis;
    return v;
  }
  /// choose_tiled_transposes' min_extent (0: every copy stays a plain copy).
  int64_t tiled_transpose_min = 0;
  /// A binned gather whose transposing copies are tiled from `min` rows and columns up.
  static Variant binned_tiled(int block_size, int64_t min, int64_t channels_last_min = 8) {
    Variant v = binned_gather(block_size, channels_last_min);
    v.tiled_transpose_min = min;
    return v;
  }
  /// choose_transposed_stores (transposed_store.h): tiled copies fused into their writers.
  bool transposed_store = false;
  /// A binned gather whose tiled copy back is fused into the gather (transposed_store.h).
  static Variant binned_fused(int block_size, int64_t min = kDefaultTiledTransposeMin) {
    Variant v = binned_tiled(block_size, min);
    v.transposed_store = true;
    return v;
  }
  /// copy_gathered_rows_innermost's min_extent (0: not run).
  int64_t gathered_rows_min = 0;
  /// BinnedGatherOptions::whole_axis_records_max at its default (false: 0, power-of-two vector
  /// widths only).
  bool whole_axis_groups = true;
  int64_t channels_last_min = 8;
  /// BinnedGatherOptions::sparse_channels_last_min (0: the records per cell alone decide).
  int64_t sparse_channels_last_min = BinnedGatherOptions{}.sparse_channels_last_min;
  /// binned_gather at the default channels_last_min (2) with the sparse bound `sparse`.
  static Variant binned_sparse(int block_size, int64_t sparse) {
    Variant v = binned_gather(block_size, 2);
    v.sparse_channels_last_min = sparse;
    return v;
  }
  int width = 1;
  int block_size = 0;
  int vector_bytes = 0;
  bool streaming = false;
  int reduction_split = -1;
  /// The reduction schedule knob: auto, serial or warp.
  std::string reduction = "auto";
  /// A bare width with the reduction schedule knob and the split knob.
  static Variant schedule(int width, const std::string& reduction, int partials = -1) {
    Variant v(width);
    v.reduction = reduction;
    v.reduction_split = partials;
    return v;
  }
  bool binned = false;
  /// The thread tile knob: -1 derive, 0 never, R >= 2 forced.
  int thread_tile = -1;
  /// ThreadTileOptions::partial_tiles: a tile that does not divide its axis ends in a partial
  /// tile (the default), or only dividing tiles (before).
  bool tile_partial = true;
  /// TileBlockOptions::forced_rows (tile_blocks.h): -1 derived, 0 one row, Y rows forced.
  int tile_block_rows = -1;
  /// tile(width, points) in blocks of `block` threads with the rows knob.
  static Variant tile_rows(int width, int points, int block, int rows) {
    Variant v(width, block, 0, false);
    v.thread_tile = points;
    v.tile_block_rows = rows;
    return v;
  }
  /// The block reduction knob (block_reductions.h): off unless a test asks for auto.
  std::string block_reduction = "off";
  /// BlockReductionOptions::max_stage_width: 8 (wide staging, the default) down to 1.
  int stage_width = 8;
  /// BlockReductionOptions::shared_vectors: 16-byte shared reads (the default) or not.
  bool shared_vectors = true;
  /// BlockReductionOptions::output_points: Mk forced (0: derived).
  int output_points = 0;
  /// BlockReductionOptions::min_tokens: 1 (the block schedule at any token count, so that the
  /// block tests keep their one-token programs) unless a test asks for the default 8.
  int64_t block_min_tokens = 1;
  /// ReductionSplitOptions::warp_combine_points: splits of fewer points combine in a warp.
  int64_t split_warp_combine = 1024;
  /// ReductionSplitOptions::count_vector: a tiled split counts R x V per thread.
  bool split_count_vector = false;
  /// ReductionSplitOptions::block_few_tokens (ADJOINT_TUNE_BLOCK_FEW_TOKENS).
  int block_few_tokens = 7;
  /// ReductionSplitOptions::block_wide_weight_bytes; -1 keeps its default (16 MB).
  int64_t wide_weight_bytes = -1;
  /// ReductionSplitOptions::block_split_rows (ADJOINT_TUNE_BLOCK_SPLIT_ROWS).
  bool split_rows = true;
  /// ReductionScheduleOptions::fill_warps: a warp kernel's points per warp halve while its
  /// warps are fewer than the minimum (the default), or not (the widest group, before).
  bool warp_group_fill = true;
  /// ReductionSplitOptions::multi_stage_warp_combine_partials (256; 0: one-stage kernels only).
  int64_t split_warp_combine_stages = 256;
  /// EmitOptions::lane_spans (16 bytes, the default; 0 the strided lanes of before) and
  /// lane_span_unroll (0 derived).
  int lane_spans = 16;
  /// EmitOptions::progressive_group_sums (false: every group accumulator added at the end).
  bool progressive_sums = true;
  int lane_span_unroll = 0;
  static Variant spans(int bytes, int unroll = 0) {
    Variant v = schedule(0, "warp", 0);
    v.lane_spans = bytes;
    v.lane_span_unroll = unroll;
    return v;
  }
  /// Block reductions chosen (auto) with the split knob.
  static Variant block(int partials = -1) {
    Variant v(0);
    v.block_reduction = "auto";
    v.reduction_split = partials;
    return v;
  }
  /// Row groups (row_groups.h): 0 never (every other variant), -1 derived, R rows per block.
  int row_groups = 0;
  /// The row schedule (row_groups.h RowSchedule) of fused row groups.
  std::string row_schedule = "block";
  /// Derived grids with the row-group knob.
  static Variant rows(int rows_per_block, const std::string& schedule = "block") {
    Variant v(0);
    v.row_groups = rows_per_block;
    v.row_schedule = schedule;
    return v;
  }
  /// EmitOptions::stage_loops: row-group stages that repeat run as loops (stage_loops.h).
  bool stage_loops = true;
  /// Row groups with every stage written out (no stage loops, the code of before).
  static Variant rows_straight(int rows_per_block, const std::string& schedule = "block") {
    Variant v = rows(rows_per_block, schedule);
    v.stage_loops = false;
    return v;
  }
  /// A bare width with the thread tile knob and the split knob.
  static Variant tile(int width, int points, int partials = -1) {
    Variant v(width);
    v.thread_tile = points;
    v.reduction_split = partials;
    return v;
  }
  /// EmitOptions::tile_prefetch: 0 a check per access, 1 one alignment test per tiled kernel,
  /// N >= 2 also N iterations' spans loaded ahead (8, the default, everywhere else).
  int tile_prefetch = 8;
  /// tile(width, points, partials) with the prefetch knob.
  static Variant prefetch(int width, int points, int depth, int partials = -1) {
    Variant v = tile(width, points, partials);
    v.tile_prefetch = depth;
    return v;
  }
  /// EmitOptions::tile_point_fallback: the misaligned copy beside the aligned one computes its
  /// points one at a time (true, the default) or is the tiled body with a check per access.
  bool tile_point_fallback = true;
  /// EmitOptions::tile_uniform_ring: spans the whole block reads go through a ring of the
  /// block (true, the default) or are loaded per iteration by every thread.
  bool tile_uniform_ring = true;
  /// EmitOptions::tile_early_wide_reads: each tile point's early-copied span read from shared
  /// memory into registers with the widest loads (true, the default) or element by element.
  bool tile_early_wide_reads = true;
  static Variant per_thread_ring(int width, int points, int depth, int partials = -1) {
    Variant v = prefetch(width, points, depth, partials);
    v.tile_uniform_ring = false;
    return v;
  }
  /// prefetch(width, points, depth, partials) with the tiled misaligned copy of before.
  static Variant tiled_fallback(int width, int points, int depth, int partials = -1) {
    Variant v = prefetch(width, points, depth, partials);
    v.tile_point_fallback = false;
    return v;
  }

  std::string label() const {
    return std::string(binned ? "binned_cl" + std::to_string(channels_last_min) + "_c" +
                                    (gather_chunk < 0 ? std::string("d")
                                                      : std::to_string(gather_chunk)) +
                                    "_tp" +
                                    std::to_string(taps_walks_max) + "_" +
                                    (scan_digits ? "" : "chained_") +
                                    (scan_lanes ? "lanes" + std::to_string(scan_top_loads) + "_"
                                                : "digits_") +
                                    (ranked_count ? "" : "claimed_") + "sb" +
                                    std::to_string(subbucket_records) + "_sp" +
                                    std::to_string(sparse_channels_last_min) + "_"
                              : "") +
           (tiled_transpose_min > 0 ? "tt" + std::to_string(tiled_transpose_min) + "_" : "") +
           (transposed_store ? "ts_" : "") +
           (lane_width != 32 ? "lw" + std::to_string(lane_width) + "_" : "") +
           (gathered_lanes_min > 0 ? "gl" + std::to_string(gathered_lanes_min) + "_" : "") +
           (whole_axis_lanes == 0 ? "" : "wl" + std::to_string(whole_axis_lanes) + "_") +
           "rows" + std::to_string(gathered_rows_min) + "_v" + std::to_string(width) + "_b" + std::to_string(block_size) + "_B" +
           std::to_string(vector_bytes) + (streaming ? "_s" : "") + "_g" +
           std::to_string(reduction_split < 0 ? 1000 : reduction_split) + "_" + reduction +
           (thread_tile < 0 ? std::string() : "_t" + std::to_string(thread_tile)) +
           (tile_partial ? std::string() : "_whole") +
           (tile_block_rows < 0 ? std::string() : "_tr" + std::to_string(tile_block_rows)) +
           (tile_prefetch == 8 ? std::string() : "_pf" + std::to_string(tile_prefetch)) +
           (tile_point_fallback ? std::string() : "_tiledfb") +
           (tile_uniform_ring ? std::string() : "_nur") +
           (tile_early_wide_reads ? std::string() : "_ner") +
           (block_reduction == "off" ? std::string() : "_block") +
           (stage_width == 8 ? std::string() : "_w" + std::to_string(stage_width)) +
           (shared_vectors ? std::string() : "_nsv") +
           (output_points == 0 ? std::string() : "_mk" + std::to_string(output_points)) +
           (block_min_tokens == 1 ? std::string() : "_mt" + std::to_string(block_min_tokens)) +
           (split_warp_combine == 1024 ? std::string() : "_wc" + std::to_string(split_warp_combine)) +
           (split_count_vector ? "_cv" : "") + (warp_group_fill ? "" : "_widest") +
           (block_few_tokens == 7 ? std::string() : "_ft" + std::to_string(block_few_tokens)) +
           (wide_weight_bytes < 0 ? std::string() : "_wb" + std::to_string(wide_weight_bytes)) +
           (split_rows ? "" : "_slices") +
           (split_warp_combine_stages == 256 ? std::string()
                                             : "_ws" + std::to_string(split_warp_combine_stages)) +
           (row_groups == 0 ? std::string() : "_rows" + std::to_string(row_groups + 1)) +
           (row_groups == 0 || row_schedule == "block" ? std::string() : "_" + row_schedule) +
           (stage_loops ? std::string() : "_straight") + (whole_axis_groups ? "" : "_pow2") +
           (lane_spans == 16 ? std::string() : "_ls" + std::to_string(lane_spans)) +
           (lane_span_unroll == 0 ? std::string() : "_lu" + std::to_string(lane_span_unroll)) +
           (progressive_sums ? std::string() : "_sumsatend");
  }
};

/// Everything lower() runs, with each derived grid's vector width forced to `variant.width`
/// where the innermost linear axis allows it (1 elsewhere; 0 keeps derive_grid's own choice)
/// and the variant's block size and streaming hints.
std::vector<CompiledKernel> compile_kernels(const ir::Program& input, const Variant& variant,
                                            const std::string& prefix,
                                            std::vector<ir::Tensor>* added_temporaries = nullptr) {
  ir::Program p = simplify(input);
  ScanGatherOptions scan;
  if (variant.scan_gather) {
    scan.work_max = int64_t{1} << 22;
    scan.length_max = 4096;
  }
  p = simplify(lower_scatter_to_gather(p, scan));
  ClaimSlotTensors claims;
  CountingClaims counting;
  StoreScatterTargets stores;
  ReductionScheduleOptions schedule;
  WholeAxisKernels whole_axis;
  LaneScanKernels lane_scans;
  if (variant.binned) {
    BinnedGatherOptions binned;
    binned.channels_last_min = variant.channels_last_min;
    binned.gather_chunk = variant.gather_chunk;
    binned.taps_walks_max = variant.taps_walks_max;
    binned.scan_digits = variant.scan_digits;
    binned.scan_lanes = variant.scan_lanes;
    binned.scan_top_loads = variant.scan_top_loads;
    binned.subbucket_records = variant.subbucket_records;
    binned.sparse_channels_last_min = variant.sparse_channels_last_min;
    if (!variant.whole_axis_groups) binned.whole_axis_records_max = 0;
    binned.ranked_count = variant.ranked_count;
    p = lower_scatter_to_binned_gather(p, &claims, binned, &stores, nullptr,
                                       &schedule.preferred_kernels, &whole_axis, &counting,
                                       &lane_scans);
    schedule.excluded_kernels.insert(lane_scans.begin(), lane_scans.end());
  }
  p = lower_scatter_to_atomics(p);
  p = lay_out_gathered_reductions_for_lanes(p, variant.gathered_lanes_min,
                                            &schedule.preferred_kernels);
  p = copy_gathered_rows_innermost(p, variant.gathered_rows_min);
  BlockReductionOptions block_options;
  block_options.mode = parse_block_reduction_mode(variant.block_reduction, "block_reduction");
  block_options.max_stage_width = variant.stage_width;
  block_options.shared_vectors = variant.shared_vectors;
  block_options.output_points = variant.output_points;
  block_options.min_tokens = variant.block_min_tokens;
  ReductionSplitOptions split;
  p = choose_block_reductions(p, block_options, nullptr, &split.streamed_weight_kernels);
  schedule.mode = parse_reduction_mode(variant.reduction, "reduction");
  schedule.preferred_lanes = variant.lane_width;
  schedule.whole_axis_lanes_max = variant.whole_axis_lanes;
  schedule.fill_warps = variant.warp_group_fill;
  p = choose_reduction_schedules(p, schedule);
  split.forced_partials = variant.reduction_split;
  split.block_output_points = variant.output_points;
  split.tiles.forced_points = variant.thread_tile;
  split.tiles.partial_tiles = variant.tile_partial;
  split.warp_combine_points = variant.split_warp_combine;
  split.multi_stage_warp_combine_partials = variant.split_warp_combine_stages;
  split.count_vector = variant.split_count_vector;
  split.block_few_tokens = variant.block_few_tokens;
  if (variant.wide_weight_bytes >= 0) split.block_wide_weight_bytes = variant.wide_weight_bytes;
  split.block_split_rows = variant.split_rows;
  p = split_reductions(p, split);
  p = choose_thread_tiles(p, split.tiles);
  RowGroupOptions row_options;
  row_options.forced_rows_per_block = variant.row_groups;
  row_options.schedule = parse_row_schedule(variant.row_schedule, "row_schedule");
  row_options.excluded_kernels.insert(lane_scans.begin(), lane_scans.end());
  p = fuse_row_groups(p, row_options);
  if (added_temporaries) {
    for (const ir::Tensor& t : p.temporaries) {
      if (!input.find_tensor(t->name)) added_temporaries->push_back(t);
    }
  }
  const int block = variant.block_size > 0 ? variant.block_size : kDefaultBlockSize;
  if (variant.width > 0) {
    for (ir::Kernel& kernel : p.kernels) {
      if (kernel.grid.is_set || kernel.stages.empty()) continue;
      std::vector<int64_t> extents = domain_extents(kernel);
      kernel.grid.is_set = true;
      kernel.grid.bindings.assign(extents.size(), ir::AxisBinding::kLinear);
      kernel.grid.block_size = extents.empty() ? 32 : block;
      kernel.grid.vector_width = 1;
      GridMapping m = grid_mapping(kernel);
      if (kernel.grid.reduction_lanes == 1 && !m.linear_axes.empty() &&
          extents[m.linear_axes.back()] % variant.width == 0)
        kernel.grid.vector_width = variant.width;
    }
  }
  DeriveGridOptions grid_options;
  grid_options.block_size = variant.block_size;
  grid_options.vector_bytes = variant.vector_bytes;
  grid_options.whole_axis_kernels = whole_axis;
  grid_options.scalar_kernels = lane_scans;
  p = derive_grid(p, grid_options);
  p = narrow_index_math(choose_tile_blocks(p, {variant.tile_block_rows}));
  const TiledTransposes transposes = choose_tiled_transposes(p, variant.tiled_transpose_min);
  const TransposedStores fused =
      variant.transposed_store ? choose_transposed_stores(p, transposes) : TransposedStores{};
  std::set<std::string> fused_copies;
  for (const auto& [writer, store] : fused) fused_copies.insert(store.copy_kernel);
  std::vector<CompiledKernel> kernels;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    if (p.kernels[k].stages.empty() || fused_copies.count(p.kernels[k].name)) continue;
    EmitOptions options;
    options.streaming_loads = variant.streaming;
    options.tile_prefetch = variant.tile_prefetch;
    options.tile_uniform_ring = variant.tile_uniform_ring;
    options.tile_early_wide_reads = variant.tile_early_wide_reads;
    options.tile_point_fallback = variant.tile_point_fallback;
    options.stage_loops = variant.stage_loops;
    options.lane_spans = variant.lane_spans;
    options.lane_span_unroll = variant.lane_span_unroll;
    options.progressive_group_sums = variant.progressive_sums;
    if (auto t = transposes.find(p.kernels[k].name); t != transposes.end())
      options.tiled_transpose = t->second;
    if (auto f = fused.find(p.kernels[k].name); f != fused.end())
      options.transposed_store = f->second;
    if (auto claim = claims.find(p.kernels[k].name); claim != claims.end())
      options.claim_slot_tensor = claim->second;
    options.claim_counts_up = counting.count(p.kernels[k].name) > 0;
    options.lane_scan = lane_scans.count(p.kernels[k].name) > 0;
    if (auto store = stores.find(p.kernels[k].name); store != stores.end())
      options.store_scatter_target = store->second;
    kernels.push_back(emit_cuda_kernel(p, k, prefix + "_" + std::to_string(k), options));
  }
  return kernels;
}

/// Values exactly representable in every dtype whose small sums are exact too: multiples of
/// 1/16 in [-8, 8] (small integers for integer tensors).
ir::HostBuffers exact_inputs(const ir::Program& p, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> value(-128, 128);
  ir::HostBuffers in;
  for (const ir::Tensor& t : p.inputs) {
    std::vector<double>& v = in[t->name];
    for (int64_t i = 0; i < t->storage_elements(); ++i) {
      int k = value(rng);
      v.push_back(ir::is_float(t->dtype) ? k / 16.0 : (t->dtype == DType::kBool ? k > 0 : k / 16));
    }
  }
  return in;
}

/// A tensor's storage on the host, `offset` bytes into an aligned allocation.
class HostTensor {
 public:
  HostTensor(const ir::Tensor& t, size_t offset)
      : tensor_(t),
        offset_(offset),
        bytes_(static_cast<size_t>(t->storage_elements()) * ir::dtype_bytes(t->dtype)) {
    storage_.assign(bytes_ + offset_ + 64, 0);
  }
  /// Null for an empty tensor, as the runtime binds one on the GPU: a kernel that reads it
  /// crashes here too.
  void* data() {
    if (bytes_ == 0) return nullptr;
    auto base = reinterpret_cast<uintptr_t>(storage_.data());
    return reinterpret_cast<void*>(((base + 63) & ~uintptr_t{63}) + offset_);
  }
  void write(const std::vector<double>& values) {
    for (size_t i = 0; i < values.size(); ++i) set(i, values[i]);
  }
  /// Every byte 0xff (NaN in the float dtypes): what an output the GPU caller allocated
  /// without zeroing may hold.
  void poison() { std::fill(storage_.begin(), storage_.end(), static_cast<unsigned char>(0xff)); }
  std::vector<double> read() {
    std::vector<double> values;
    for (int64_t i = 0; i < tensor_->storage_elements(); ++i)
      values.push_back(get(static_cast<size_t>(i)));
    return values;
  }

 private:
  template <typename T>
  T* as() {
    return static_cast<T*>(data());
  }
  void set(size_t i, double v) {
    switch (tensor_->dtype) {
      case DType::kF16:
        as<uint16_t>()[i] = ir::float_to_half_bits(static_cast<float>(v));
        break;
      case DType::kBF16:
        as<uint16_t>()[i] = ir::float_to_bfloat16_bits(static_cast<float>(v));
        break;
      case DType::kF32:
        as<float>()[i] = static_cast<float>(v);
        break;
      case DType::kF64:
        as<double>()[i] = v;
        break;
      case DType::kI32:
        as<int32_t>()[i] = static_cast<int32_t>(v);
        break;
      case DType::kI64:
        as<int64_t>()[i] = static_cast<int64_t>(v);
        break;
      case DType::kBool:
        as<bool>()[i] = v != 0;
        break;
    }
  }
  double get(size_t i) {
    switch (tensor_->dtype) {
      case DType::kF16:
        return ir::half_bits_to_float(as<uint16_t>()[i]);
      case DType::kBF16:
        return ir::bfloat16_bits_to_float(as<uint16_t>()[i]);
      case DType::kF32:
        return as<float>()[i];
      case DType::kF64:
        return as<double>()[i];
      case DType::kI32:
        return as<int32_t>()[i];
      case DType::kI64:
        return static_cast<double>(as<int64_t>()[i]);
      case DType::kBool:
        return as<bool>()[i];
    }
    return 0;
  }

  ir::Tensor tensor_;
  size_t offset_, bytes_;
  std::vector<unsigned char> storage_;
};

/// Builds the kernels of several programs into one host library and runs them.
class HostLibrary {
 public:
  using Launcher = void (*)(void**, const unsigned*, unsigned);

  /// Compiles every kernel; returns an error text (empty on success).
  std::string build(const std::vector<const CompiledKernel*>& kernels) {
    dir_ = std::filesystem::temp_directory_path() /
           ("adjoint_host_run_" + std::to_string(::getpid()) + "_" + std::to_string(++builds_));
    std::filesystem::create_directories(dir_);
    for (const auto& [name, text] : embedded_templates()) std::ofstream(dir_ / name) << text;
    std::ofstream source(dir_ / "kernels.cpp");
    source << kPrelude;
    for (const CompiledKernel* k : kernels) source << k->source << "\n";
    source << kLauncher;
    for (const CompiledKernel* k : kernels) {
      source << "extern \"C\" void launch_" << k->entry
             << "(void** args, const unsigned* grid, unsigned block) { adjoint_launch"
             << (synchronizes(*k) ? "_blocks(" : cooperative(*k) ? "_warps(" : "(") << k->entry << ", args, grid, block); }\n";
    }
    source.close();
    std::string command =
        host_compiler() +
        " -std=c++17 -O1 -fPIC -shared -pthread -ffp-contract=off -Wno-unknown-pragmas -I" + dir_.string() +
        " -o " + (dir_ / "kernels.so").string() + " " + (dir_ / "kernels.cpp").string() + " > " +
        (dir_ / "log.txt").string() + " 2>&1";
    if (std::system(command.c_str()) != 0) {
      std::ifstream log(dir_ / "log.txt");
      return std::string(std::istreambuf_iterator<char>(log), {});
    }
    handle_ = dlopen((dir_ / "kernels.so").c_str(), RTLD_NOW | RTLD_LOCAL);
    return handle_ ? "" : dlerror();
  }
  void* handle() const { return handle_; }
  ~HostLibrary() {
    if (handle_) dlclose(handle_);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  /// Runs a program's kernels in order on buffers bound by name; `misalign` moves every
  /// buffer one element off its 64-byte alignment. Buffers start zeroed, but with
  /// `poison_outputs` the outputs start as 0xff bytes, as an output the caller did not zero may
  /// on the GPU; not in a run with atomics, whose targets the runtime zeroes first (lower()'s
  /// CompiledKernel::zero_before, which these kernels, emitted one by one, do not carry).
  ir::HostBuffers run(const HostProgram& hp, const ir::HostBuffers& inputs, bool misalign,
                      ir::HostBuffers* temporaries = nullptr, bool poison_outputs = false) {
    std::map<std::string, std::unique_ptr<HostTensor>> tensors;
    for (const auto* list : {&hp.program.inputs, &hp.program.outputs, &hp.program.temporaries,
                             &hp.added_temporaries}) {
      for (const ir::Tensor& t : *list) {
        size_t offset = misalign ? ir::dtype_bytes(t->dtype) : 0;
        tensors[t->name] = std::make_unique<HostTensor>(t, offset);
        if (inputs.count(t->name)) tensors[t->name]->write(inputs.at(t->name));
      }
    }
    bool atomics = false;
    for (const CompiledKernel& k : hp.kernels) atomics |= k.uses_atomics;
    if (poison_outputs && !atomics) {
      for (const ir::Tensor& t : hp.program.outputs) tensors.at(t->name)->poison();
    }
    for (const CompiledKernel& k : hp.kernels) {
      std::vector<void*> args;
      for (const std::string& name : k.params) args.push_back(tensors.at(name)->data());
      auto launch = reinterpret_cast<Launcher>(dlsym(handle_, ("launch_" + k.entry).c_str()));
      EXPECT_NE(launch, nullptr) << k.entry;
      if (!launch || k.launch.grid[0] == 0) continue;
      launch(args.data(), k.launch.grid, k.launch.block[0]);
    }
    ir::HostBuffers out;
    for (const ir::Tensor& t : hp.program.outputs) out[t->name] = tensors.at(t->name)->read();
    if (temporaries) {  // the program's own and those the lowering added (the binned scans')
      for (const auto* list : {&hp.program.temporaries, &hp.added_temporaries}) {
        for (const ir::Tensor& t : *list) (*temporaries)[t->name] = tensors.at(t->name)->read();
      }
    }
    return out;
  }

 private:
  std::filesystem::path dir_;
  void* handle_ = nullptr;
  static inline int builds_ = 0;
};

/// Compares outputs: bit for bit, or within a relative tolerance for math that host libm and
/// the interpreter may round differently.
void expect_outputs_equal(const ir::Program& p, const ir::HostBuffers& expected,
                          const ir::HostBuffers& actual, double tolerance,
                          const std::string& what) {
  for (const ir::Tensor& t : p.outputs) {
    const std::vector<double>& e = expected.at(t->name);
    const std::vector<double>& a = actual.at(t->name);
    ASSERT_EQ(e.size(), a.size()) << what;
    for (size_t i = 0; i < e.size(); ++i) {
      if (tolerance == 0) {
        ASSERT_EQ(e[i], a[i]) << what << ": " << t->name << "[" << i << "]";
      } else if (e[i] != a[i] && !(std::isnan(e[i]) && std::isnan(a[i]))) {
        ASSERT_NEAR(e[i], a[i], tolerance * (1 + std::fabs(e[i])))
            << what << ": " << t->name << "[" << i << "]";
      }
    }
  }
}

/// Compiles each program in every variant, runs all of them on aligned and misaligned buffers,
/// and expects the first variant's run (usually scalar: vector width 1) to match the
/// interpreter (within `tolerance`) and every other run to match it bit for bit.
/// Compiles every program under every variant (labelled `<prefix><program>_<variant>`, program
/// major) into one host library; returns the runs, in that order, and the build's error text
/// in `error` (empty on success).
std::vector<HostProgram> build_host_runs(const std::vector<ir::Program>& programs,
                                         const std::vector<Variant>& variants,
                                         const std::string& prefix, HostLibrary& library,
                                         std::string& error) {
  std::vector<HostProgram> runs;
  for (size_t i = 0; i < programs.size(); ++i) {
    for (const Variant& variant : variants) {
      const std::string label = prefix + std::to_string(i) + "_" + variant.label();
      HostProgram run{label, programs[i], {}};
      run.kernels = compile_kernels(programs[i], variant, label, &run.added_temporaries);
      runs.push_back(std::move(run));
    }
  }
  std::vector<const CompiledKernel*> kernels;
  for (const HostProgram& r : runs) {
    for (const CompiledKernel& k : r.kernels) kernels.push_back(&k);
  }
  error = library.build(kernels);
  return runs;
}

void expect_host_runs_match(
    const std::vector<ir::Program>& programs, const std::vector<Variant>& variants,
    double tolerance,
    ir::HostBuffers (*make_inputs)(const ir::Program&, unsigned) = exact_inputs) {
  if (host_compiler().empty()) GTEST_SKIP() << "no host C++ compiler";
  HostLibrary library;
  std::string error;
  const std::vector<HostProgram> runs = build_host_runs(programs, variants, "p", library, error);
  ASSERT_TRUE(error.empty()) << error;
  size_t r = 0;
  for (size_t i = 0; i < programs.size(); ++i) {
    ir::HostBuffers inputs = make_inputs(programs[i], static_cast<unsigned>(i + 1));
    ir::HostBuffers expected = ir::interpret(programs[i], inputs);
    std::optional<ir::HostBuffers> scalar;
    for (const Variant& variant : variants) {
      const HostProgram& run = runs[r++];
      for (bool misalign : {false, true}) {
        std::string what = ir::to_string(programs[i]) + "variant " + variant.label() +
                           (misalign ? ", misaligned buffers" : "") + "\n" +
                           run.kernels.front().source;
        ir::HostBuffers actual = library.run(run, inputs, misalign);
        if (!scalar) {
          expect_outputs_equal(programs[i], expected, actual, tolerance, what);
          scalar = actual;
        } else {
          expect_outputs_equal(programs[i], *scalar, actual, 0, what);
        }
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// --- programs ---------------------------------------------------------------------------------

/// The upsample_nearest backward of the registry (the very op the runtime serves).
ir::Program upsample(const std::string& spec) {
  return ops::parse_specialization(spec).build_program();
}

/// Sizes along one axis where floor(o * f32(in/out)) departs from the rational map, so that the
/// gather keeps a membership test; `in` a multiple of 8 so that vector groups apply.
std::pair<int64_t, int64_t> membership_sizes() {
  for (int64_t in = 8; in <= 64; in += 8) {
    for (int64_t out = in + 1; out <= 400; ++out) {
      float r = static_cast<float>(in) / static_cast<float>(out);
      for (int64_t o = 0; o < out; ++o) {
        if (static_cast<int64_t>(std::floor(static_cast<float>(o) * r)) != o * in / out)
          return {in, out};
      }
    }
  }
  return {0, 0};
}

TEST(HostRun, UpsampleGathersMatchTheInterpreterAtEveryVectorWidth) {
  std::vector<ir::Program> programs;
  for (const char* dtype : {"f32", "bf16"}) {
    std::string d = std::string("dtype=") + dtype + " ";
    programs.push_back(upsample("upsample_nearest2d_backward " + d +
                                "input_size=2,3,8,16 output_size=16,32"));  // 2x up
    programs.push_back(upsample("upsample_nearest2d_backward " + d +
                                "input_size=2,3,16,16 output_size=8,8"));  // 2x down
    programs.push_back(upsample("upsample_nearest2d_backward " + d +
                                "input_size=2,2,16,16 output_size=24,12"));  // 1.5 and 0.75
    programs.push_back(upsample("_upsample_nearest_exact2d_backward " + d +
                                "input_size=1,2,16,24 output_size=20,40"));
  }
  programs.push_back(upsample(
      "upsample_nearest2d_backward dtype=f16 input_size=1,2,8,16 output_size=8,16"));  // identity
  programs.push_back(upsample(
      "upsample_nearest1d_backward dtype=f64 input_size=2,3,16 output_size=37 scales=2.3"));
  expect_host_runs_match(programs, {1, 2, 4, 8}, 0);
}

TEST(HostRun, ChannelsLastThreeDimensionsAndMembershipTests) {
  auto [in, out] = membership_sizes();
  ASSERT_GT(in, 0);
  std::vector<ir::Program> programs = {
      upsample("upsample_nearest2d_backward dtype=bf16 input_size=2,16,6,5 output_size=12,10 "
               "layout=channels_last"),
      upsample("_upsample_nearest_exact3d_backward dtype=f16 input_size=1,8,3,4,5 "
               "output_size=6,3,9 layout=channels_last"),
      upsample("_upsample_nearest_exact3d_backward dtype=f32 input_size=1,2,4,6,16 "
               "output_size=8,9,12"),
      upsample("upsample_nearest1d_backward dtype=f32 input_size=1,2," + std::to_string(in) +
               " output_size=" + std::to_string(out)),
      upsample("upsample_nearest1d_backward dtype=bf16 input_size=2,2," + std::to_string(out) +
               " output_size=" + std::to_string(in)),
      // A grad_output read in place with channels innermost, and one with padded rows.
      upsample("upsample_nearest2d_backward dtype=f32 input_size=2,3,5,7 output_size=9,11 "
               "grad_output_strides=297,1,33,3"),
      upsample("upsample_nearest2d_backward dtype=bf16 input_size=1,2,8,16 output_size=16,32 "
               "grad_output_strides=1280,640,40,1"),
  };
  expect_host_runs_match(programs, {1, 2, 8}, 0);
}

TEST(HostRun, DerivedGridsOfAVectorizedSize) {
  // Large enough for derive_grid to choose vector groups itself (no forced width).
  ir::Program p =
      upsample("upsample_nearest2d_backward dtype=bf16 input_size=1,16,128,128 output_size=64,96");
  std::vector<CompiledKernel> kernels = compile_kernels(p, 0, "derived");
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_NE(kernels[0].source.find("store_elements<16>"), std::string::npos) << kernels[0].source;
  expect_host_runs_match({p}, {0}, 0);
}

TEST(HostRun, TuningVariantsMatchTheDefaultBitForBit) {
  // Forced widths: blocks of 128 and 512 threads, 16 bf16 / 8 f32 per group (32 bytes), 4 bf16
  // (8 bytes), streaming hints; 2x up, 2x down and 1.5 / 0.75.
  std::vector<ir::Program> programs;
  for (const char* dtype : {"f32", "bf16"}) {
    std::string d = std::string("dtype=") + dtype + " ";
    programs.push_back(upsample("upsample_nearest2d_backward " + d +
                                "input_size=2,3,8,32 output_size=16,64"));
    programs.push_back(upsample("upsample_nearest2d_backward " + d +
                                "input_size=1,3,16,32 output_size=8,16"));
    programs.push_back(upsample("upsample_nearest2d_backward " + d +
                                "input_size=1,2,16,32 output_size=24,48"));
  }
  expect_host_runs_match(programs,
                         {Variant(1), Variant(8, 128, 0, false), Variant(16, 512, 0, true),
                          Variant(4, 0, 0, true)},
                         0);
}

TEST(HostRun, DerivedTuningVariantsMatchTheDefaultBitForBit) {
  // Large enough (2^19 points) for derive_grid to give 16 bf16 per group at 32 vector bytes;
  // 2x down, so that the interpreter's scatter walks only 2^17 points.
  ir::Program p = upsample(
      "upsample_nearest2d_backward dtype=bf16 input_size=1,16,128,256 output_size=64,128");
  std::vector<CompiledKernel> wide = compile_kernels(p, Variant(0, 0, 32, false), "wide");
  ASSERT_EQ(wide.size(), 1u);
  EXPECT_NE(wide[0].source.find("grad_input_values[16]"), std::string::npos) << wide[0].source;
  expect_host_runs_match({p},
                         {Variant(0), Variant(0, 0, 32, false), Variant(0, 128, 8, false),
                          Variant(0, 512, 16, true), Variant(0, 1024, 32, true)},
                         0);
}

/// Element-wise work, loads under branches (some out of bounds where not taken), shifted and
/// strided reads, reductions of every kind, and a second stage reading the first one's output.
ir::Program mixed_program(DType t) {
  ir::ProgramBuilder b(std::string("mixed_") + std::string(ir::dtype_name(t)));
  ir::Tensor x = b.input("x", t, {6, 32});
  ir::Tensor y = b.input("y", t, {32, 6});  // read transposed
  ir::Tensor doubled = b.output("doubled", t, {6, 32});
  ir::Tensor out = b.output("out", t, {6, 32});
  Var i("i"), j("j"), k("k"), l("l"), i2("i2"), j2("j2");
  DType acc = ir::default_accumulation(t);
  auto f = [&](const Expr& e) { return ir::cast(acc, e); };
  Expr left = ir::select(j > 0, f(ir::load(x, {i, j - 1})), f(ir::load(x, {i, j})));
  Expr value = f(ir::load(x, {i, j})) * f(ir::load(y, {j, i})) + left +
               ir::sum({ir::range(k, Expr(6))}, f(ir::load(x, {k, j})), acc) +
               ir::maximum({ir::range(l, j, Expr(32) - j)}, f(ir::load(x, {i, l})), acc);
  ir::Stage first = ir::compute(doubled, ir::over(doubled, {i, j}), ir::cast(t, value));
  Expr second = f(ir::load(doubled, {i2, j2})) - f(ir::load(x, {i2, j2}));
  b.kernel("k", {first, ir::compute(out, ir::over(out, {i2, j2}), ir::cast(t, second))});
  return std::move(b).build();
}

TEST(HostRun, GeneralComputeStagesMatchTheInterpreter) {
  std::vector<ir::Program> programs = {mixed_program(DType::kF32), mixed_program(DType::kF64),
                                       mixed_program(DType::kBF16)};
  expect_host_runs_match(programs, {1, 2, 4, 8}, 0);
}

/// Elements of every tensor of a program together: what the interpreter and the emulation
/// walk over at least once.
int64_t total_elements(const ir::Program& p) {
  int64_t total = 0;
  for (const auto* list : {&p.inputs, &p.outputs, &p.temporaries}) {
    for (const ir::Tensor& t : *list) total += t->storage_elements();
  }
  return total;
}

TEST(HostRun, RegisteredExamplesWithoutAtomics) {
  std::vector<ir::Program> programs;
  for (const ops::OpDefinition& op : ops::all_ops()) {
    for (const std::string& example : op.examples) {
      ir::Program p = ops::parse_specialization(example).build_program();
      if (total_elements(p) > (int64_t{1} << 16)) continue;  // seconds in the interpreter
      bool atomics = false;
      for (const CompiledKernel& k : lower(p, LowerOptions{}).kernels) atomics |= k.uses_atomics;
      if (!atomics) programs.push_back(p);
    }
  }
  ASSERT_FALSE(programs.empty());
  // mHC's long f32 sums (the interpreter accumulates in f64), its sigmoid and rsqrt (the host's
  // libm) and its bf16 outputs (one rounding step of 2^-8) agree only approximately; the
  // vectorized kernels still agree bit for bit with the scalar ones.
  expect_host_runs_match(programs, {1, 2, 4}, 2e-2);
}

/// Reductions the split schedule applies to: a long contiguous per-point sum (partials
/// interleaved along the reduced axis), token sums over two axes (partials outermost), a max,
/// a window whose start depends on the domain and a reduction reading a 16-bit tensor.
ir::Program reduction_program(DType t) {
  ir::ProgramBuilder b(std::string("reductions_") + std::string(ir::dtype_name(t)));
  ir::Tensor x = b.input("x", t, {2, 32, 5});
  ir::Tensor w = b.input("w", t, {3, 64});
  ir::Tensor rows = b.output("rows", DType::kF32, {3});
  ir::Tensor tokens = b.output("tokens", DType::kF32, {5});
  ir::Tensor peaks = b.output("peaks", DType::kF32, {5});
  ir::Tensor windows = b.output("windows", DType::kF32, {3});
  Var i("i"), d("d"), j("j"), bb("b"), s("s"), q("q"), d2("d2"), j2("j2"), b2("b2"), s2("s2"),
      k("k");
  auto f = [&](const Expr& e) { return ir::cast(DType::kF32, e); };
  b.kernel("rows", {ir::compute(rows, ir::over(rows, {i}),
                                ir::sum({ir::range(d, Expr(64))},
                                        f(ir::load(w, {i, d})) * f(ir::load(w, {i, d})),
                                        DType::kF32) +
                                    1.0)});
  b.kernel("tokens",
           {ir::compute(tokens, ir::over(tokens, {j}),
                        ir::sum({ir::range(bb, Expr(2)), ir::range(s, Expr(32))},
                                f(ir::load(x, {bb, s, j})) * f(ir::load(w, {j % 3, s})),
                                DType::kF32)),
            ir::compute(peaks, ir::over(peaks, {j2}),
                        ir::maximum({ir::range(b2, Expr(2)), ir::range(s2, Expr(32))},
                                    f(ir::load(x, {b2, s2, j2})), DType::kF32))});
  b.kernel("windows",
           {ir::compute(windows, ir::over(windows, {q}),
                        ir::sum({ir::range(d2, Expr(32)), ir::range(k, q, Expr(3))},
                                f(ir::load(w, {q, d2 + k})), DType::kF32))});
  return std::move(b).build();
}

TEST(HostRun, SplitReductionsMatchTheInterpreterBitForBit) {
  std::vector<ir::Program> programs = {reduction_program(DType::kF32),
                                       reduction_program(DType::kBF16)};
  // Serial first (checked against the interpreter), then forced splits and vector widths:
  // exact inputs make every combine order give the same bits.
  expect_host_runs_match(programs,
                         {Variant::split(1, 0), Variant::split(1, 2), Variant::split(1, 4),
                          Variant::split(2, 8), Variant::split(4, 16), Variant::split(1, 32)},
                         0);
}

TEST(HostRun, SplitReductionsOfTheMhcOps) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_pre batch=2 seq=8 n=4 dim=16 dtype=bf16",
                           "mhc_pre_backward batch=2 seq=8 n=4 dim=16 dtype=f32",
                           "mhc_pre_backward batch=1 seq=16 n=6 dim=8 dtype=bf16 "
                           "with_grad_x_post=true"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  // The splits change the order of the long f32 sums: close to the interpreter, not equal.
  expect_host_runs_match(programs, {Variant::split(1, 4)}, 2e-2);
  expect_host_runs_match(programs, {Variant::split(1, 8), Variant::split(2, 8)}, 2e-2);
}

/// Reductions for the warp schedule: lane axes shorter than a warp, not a multiple of 32 and of
/// a start that depends on the point; sum, max and min; i64 and f64 accumulators; a reduction
/// taken only in one branch of a select; a reduction nested in another (serial inside the
/// lanes); two stages of one kernel.
ir::Program warp_program(DType t) {
  ir::ProgramBuilder b(std::string("warp_") + std::string(ir::dtype_name(t)));
  ir::Tensor x = b.input("x", t, {6, 100});
  ir::Tensor n = b.input("n", DType::kI64, {6, 37});
  ir::Tensor sums = b.output("sums", DType::kF32, {6});
  ir::Tensor lows = b.output("lows", DType::kF32, {6});
  ir::Tensor counts = b.output("counts", DType::kI64, {6});
  ir::Tensor wide = b.output("wide", DType::kF64, {6, 2});
  ir::Tensor tails = b.output("tails", DType::kF32, {6});
  ir::Tensor picked = b.output("picked", DType::kF32, {6});
  ir::Tensor mixed = b.output("mixed", DType::kF32, {6, 4});
  Var i("i"), d("d"), i2("i2"), d2("d2"), i3("i3"), c("c"), i4("i4"), h("h"), d4("d4"),
      i5("i5"), d5("d5"), i6("i6"), d6("d6"), e6("e6");
  auto f = [&](const Expr& e) { return ir::cast(DType::kF32, e); };
  b.kernel("rows",
           {ir::compute(sums, ir::over(sums, {i}),
                        ir::sum({ir::range(d, Expr(100))},
                                f(ir::load(x, {i, d})) * f(ir::load(x, {i, 99 - d})), DType::kF32)),
            ir::compute(lows, ir::over(lows, {i2}),
                        ir::minimum({ir::range(d2, Expr(100))}, f(ir::load(x, {i2, d2})),
                                    DType::kF32))});
  b.kernel("counts", {ir::compute(counts, ir::over(counts, {i3}),
                                  ir::sum({ir::range(c, Expr(37))}, ir::load(n, {i3, c}),
                                          DType::kI64))});
  b.kernel("wide", {ir::compute(wide, ir::over(wide, {i4, h}),
                                ir::sum({ir::range(d4, h * 50, Expr(50))},
                                        ir::cast(DType::kF64, ir::load(x, {i4, d4})),
                                        DType::kF64))});
  // Lanes over d5 in [i5 * 10, 100): lanes start at a point-dependent offset.
  b.kernel("tails", {ir::compute(tails, ir::over(tails, {i5}),
                                 ir::maximum({ir::range(d5, i5 * 10, Expr(100) - i5 * 10)},
                                             f(ir::load(x, {i5, d5})), DType::kF32))});
  // Only the points of odd i6 reduce; the inner reduction (5 terms) is serial in each lane.
  Expr inner = ir::sum({ir::range(e6, Expr(5))}, f(ir::load(x, {i6, (d6 + e6) % 100})),
                       DType::kF32);
  b.kernel("picked",
           {ir::compute(picked, ir::over(picked, {i6}),
                        ir::select(i6 % 2 == 1,
                                   ir::sum({ir::range(d6, Expr(64))}, inner, DType::kF32),
                                   f(ir::load(x, {i6, 0}))))});
  // x[i7, :] is the same for every k7: a warp takes the 4 k7's (derived width) and reads it once.
  Var i7("i7"), k7("k7"), d7("d7");
  b.kernel("mixed", {ir::compute(mixed, ir::over(mixed, {i7, k7}),
                                 ir::sum({ir::range(d7, Expr(100))},
                                         f(ir::load(x, {i7, d7})) * f(ir::load(x, {k7, d7})),
                                         DType::kF32))});
  return std::move(b).build();
}

TEST(HostRun, WarpReductionsMatchTheInterpreterBitForBit) {
  std::vector<ir::Program> programs = {warp_program(DType::kF32), warp_program(DType::kBF16),
                                       reduction_program(DType::kF32),
                                       reduction_program(DType::kBF16)};
  // Serial first (checked against the interpreter), then the warp schedule forced, alone and
  // next to splits: exact inputs make every combine order give the same bits.
  std::vector<CompiledKernel> warp = compile_kernels(programs[0], Variant::schedule(1, "warp"),
                                                     "probe");
  ASSERT_FALSE(warp.empty());
  EXPECT_TRUE(cooperative(warp.front())) << warp.front().source;
  std::vector<CompiledKernel> groups = compile_kernels(programs[0], Variant::schedule(0, "warp"),
                                                       "groups");
  EXPECT_NE(groups.back().source.find("acc[e] += __shfl_xor_sync"), std::string::npos)
      << groups.back().source;
  expect_host_runs_match(programs,
                         {Variant::schedule(1, "serial", 0), Variant::schedule(1, "warp", 0),
                          Variant::schedule(1, "warp", -1), Variant::schedule(1, "warp", 4),
                          Variant::schedule(0, "warp", 0), Variant::schedule(2, "auto", 2)},
                         0);
}

TEST(HostRun, WarpReductionsOfTheMhcOps) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_pre batch=1 seq=2 n=2 dim=40 dtype=bf16",
                           "mhc_pre_backward batch=1 seq=2 n=2 dim=40 dtype=f32",
                           "mhc_pre_backward batch=1 seq=3 n=4 dim=8 dtype=bf16 "
                           "with_grad_x_post=true"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  // The lanes change the order of the long f32 sums: close to the interpreter, not equal.
  // Every kernel with a reduction takes warps; mhc_mix's warps take several k each.
  Variant groups = Variant::schedule(0, "warp", 0);  // the chooser's widths: several points a warp
  groups.block_size = 64;
  expect_host_runs_match(programs, {groups}, 2e-2);
}

/// Rows of `length` elements of `t` for the lane-span test: an rms-like sum of squares, a
/// vector group (4 points of k share x's row: acc[e]), a sum over (c, d) (the span loop inside
/// an outer axis), and a sum from d = 8 i (a point-dependent start, a runtime chunk end).
ir::Program span_program(DType t, int64_t length) {
  ir::ProgramBuilder b(std::string("spans_") + std::string(ir::dtype_name(t)));
  ir::Tensor x = b.input("x", t, {6, length});
  ir::Tensor w = b.input("w", t, {4, length});
  ir::Tensor y = b.input("y", t, {6, 3, length});
  ir::Tensor squares = b.output("squares", DType::kF32, {6});
  ir::Tensor dots = b.output("dots", DType::kF32, {6, 4});
  ir::Tensor planes = b.output("planes", DType::kF32, {6});
  ir::Tensor suffixes = b.output("suffixes", DType::kF32, {6});
  Var i("i"), d("d"), i2("i2"), k2("k2"), d2("d2"), i3("i3"), c3("c3"), d3("d3"), i4("i4"),
      d4("d4");
  auto f = [&](const Expr& e) { return ir::cast(DType::kF32, e); };
  const Expr n(length);
  b.kernel("squares", {ir::compute(squares, ir::over(squares, {i}),
                                   ir::fma_sum({ir::range(d, n)}, f(ir::load(x, {i, d})),
                                               f(ir::load(x, {i, d})), DType::kF32))});
  b.kernel("dots", {ir::compute(dots, ir::over(dots, {i2, k2}),
                                ir::sum({ir::range(d2, n)},
                                        f(ir::load(x, {i2, d2})) * f(ir::load(w, {k2, d2})),
                                        DType::kF32))});
  b.kernel("planes", {ir::compute(planes, ir::over(planes, {i3}),
                                  ir::sum({ir::range(c3, Expr(3)), ir::range(d3, n)},
                                          f(ir::load(y, {i3, c3, d3})), DType::kF32))});
  b.kernel("suffixes", {ir::compute(suffixes, ir::over(suffixes, {i4}),
                                    ir::sum({ir::range(d4, i4 * 8, n - i4 * 8)},
                                            f(ir::load(x, {i4, d4})), DType::kF32))});
  return std::move(b).build();
}

/// Lane spans of warp reductions (emit_lane_spans.cpp): lanes read V consecutive iterations a
/// trip (bf16 V = 8, f32 V = 4; 8-byte spans: half that), aligned bases with vector loads,
/// shifted ones (the misaligned runs) with element loads in the same order, the iterations past
/// the whole chunks strided (296 = 256 + 40, 520 = 4 x 128 + 8), several points a warp. The
/// first variant against the interpreter, the others (the strided lanes of before, 8-byte spans,
/// unroll 1) and every misaligned run bit for bit: exact inputs make every order agree.
TEST(HostRun, LaneSpansOfWarpReductions) {
  std::vector<ir::Program> programs = {span_program(DType::kBF16, 296),
                                       span_program(DType::kF32, 520)};
  std::string spans;
  for (const CompiledKernel& k : compile_kernels(programs[0], Variant::spans(16), "probe"))
    spans += k.source;
  EXPECT_NE(spans.find("for (int d_base = lane * 8; d_base < 256; d_base += 256)"),
            std::string::npos)
      << spans;
  EXPECT_NE(spans.find("for (int d = 256 + lane; d < 296; d += 32)"), std::string::npos) << spans;
  EXPECT_NE(spans.find("} else {  // a misaligned base: element loads, the same order"),
            std::string::npos)
      << spans;
  EXPECT_NE(spans.find("acc[e] += adjoint::to_float(x_span[j_1]) * adjoint::to_float(w_span[j_1])"),
            std::string::npos)
      << spans;  // the group: x's span once a trip, w's per point
  EXPECT_NE(spans.find("_chunks_end"), std::string::npos) << spans;  // suffixes' runtime end
  for (const CompiledKernel& k : compile_kernels(programs[0], Variant::spans(0), "probe0"))
    EXPECT_EQ(k.source.find("_base = lane *"), std::string::npos) << k.source;
  expect_host_runs_match(programs,
                         {Variant::spans(16), Variant::spans(0), Variant::spans(8),
                          Variant::spans(16, 1)},
                         1e-6);
}

/// mhc_pre_backward at few tokens with n = 8 (issue 9's B1 S181 n8 at a host-sized D): at
/// B*S = 130, dh_pre2's 1040 points take warps of one point each (8 points a warp would leave
/// 130 warps, ReductionScheduleOptions::fill_warps) and the parameter gradients go through
/// x_mix (ops/mhc.cpp, uses_x_mix: from B*S = 4 on); B*S = 3 keeps the direct token sums, with
/// dvecx = dh_mix . phi stored once for dx and dgamma.
/// Against the interpreter, with and without the group fill.
TEST(HostRun, FewTokensAtEightStreams) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_pre_backward batch=1 seq=130 n=8 dim=256 dtype=bf16",
                           "mhc_pre_backward batch=1 seq=5 n=8 dim=16 dtype=f32",
                           "mhc_pre_backward batch=1 seq=3 n=8 dim=16 dtype=bf16"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  EXPECT_TRUE(programs[0].find_tensor("x_mix"));
  EXPECT_TRUE(programs[1].find_tensor("x_mix"));
  EXPECT_FALSE(programs[2].find_tensor("x_mix"));
  EXPECT_TRUE(programs[2].find_tensor("dvecx"));  // stored once for dx and dgamma
  Variant derived(0), widest(0);
  widest.warp_group_fill = false;
  auto gate_grads = [](const std::vector<CompiledKernel>& kernels) {
    for (const CompiledKernel& k : kernels)
      if (k.source.find("float* __restrict__ dh_pre2,") != std::string::npos) return k;
    ADD_FAILURE() << "no kernel writes dh_pre2";
    return kernels.front();
  };
  const CompiledKernel one = gate_grads(compile_kernels(programs[0], derived, "probe"));
  EXPECT_TRUE(cooperative(one)) << one.source;
  EXPECT_EQ(one.source.find("acc[e]"), std::string::npos) << one.source;  // a point a warp
  const CompiledKernel eight = gate_grads(compile_kernels(programs[0], widest, "probe8"));
  EXPECT_NE(eight.source.find("acc[e]"), std::string::npos) << eight.source;  // 8 a warp
  // f32 sums in another order than the interpreter's f64, bf16 dx: close, not equal.
  expect_host_runs_match(programs, {derived, widest}, 2e-2);
}

/// B*S = 1 with n = 8 and a long D: dh_pre2's 8 points split into 512 partials over d, and
/// the gate_grads kernel (dh_pre2's combine and dh_post2, two stages) combines them with a warp
/// per point (ReductionSplitOptions::multi_stage_warp_combine_partials); 0 keeps one thread per
/// point. Both against the interpreter.
TEST(HostRun, WarpCombinesOfSeveralStages) {
  std::vector<ir::Program> programs = {
      ops::parse_specialization("mhc_pre_backward batch=1 seq=1 n=8 dim=8192 dtype=f32")
          .build_program()};
  Variant derived(0), thread(0);
  thread.split_warp_combine_stages = 0;
  auto combine = [](const std::vector<CompiledKernel>& kernels) {
    for (const CompiledKernel& k : kernels)
      if (k.source.find("float* __restrict__ dh_pre2,") != std::string::npos) return k;
    ADD_FAILURE() << "no kernel writes dh_pre2";
    return kernels.front();
  };
  const CompiledKernel warp = combine(compile_kernels(programs[0], derived, "probe"));
  EXPECT_TRUE(cooperative(warp)) << warp.source;
  // Lane spans (emit_lane_spans.cpp): 4 consecutive partials a lane, 16-byte loads.
  EXPECT_NE(warp.source.find("for (int g_base = lane * 4; g_base < 512; g_base += 128)"),
            std::string::npos)
      << warp.source;
  Variant strided = derived;
  strided.lane_spans = 0;
  const CompiledKernel before = combine(compile_kernels(programs[0], strided, "probe0"));
  EXPECT_NE(before.source.find("for (int g = lane; g < 512; g += 32)"), std::string::npos)
      << before.source;
  const CompiledKernel one = combine(compile_kernels(programs[0], thread, "probe1"));
  EXPECT_FALSE(cooperative(one)) << one.source;
  expect_host_runs_match(programs, {derived, thread}, 2e-2);
}

/// Whether some kernel's source contains every one of `parts` (probes of a schedule's choice).
bool some_source_contains(const std::vector<CompiledKernel>& kernels,
                          std::initializer_list<const char*> parts) {
  for (const CompiledKernel& k : kernels) {
    bool all = true;
    for (const char* part : parts) all = all && k.source.find(part) != std::string::npos;
    if (all) return true;
  }
  return false;
}

/// The block schedule (block_reductions.h) sums each point in the serial order, so mhc_pre's
/// outputs are bitwise those of the serial schedule; its h_mix kernel must take it (tails of
/// token tiles, one output group and several, Mt = 1 and 4).
TEST(HostRun, BlockReductionsOfMhcPreMatchTheSerialScheduleBitForBit) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_pre batch=2 seq=40 n=4 dim=64 dtype=f32",
                           "mhc_pre batch=1 seq=3 n=2 dim=128 dtype=bf16",
                           "mhc_pre batch=2 seq=150 n=2 dim=128 dtype=f32",
                           "mhc_pre batch=1 seq=256 n=2 dim=132 dtype=bf16"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
    Variant block = Variant::block(0);
    EXPECT_TRUE(some_source_contains(compile_kernels(programs.back(), block, "probe"),
                                     {"Block reduction", "h_mix"}))
        << spec;
  }
  Variant serial = Variant::schedule(0, "serial", 0);
  std::vector<Variant> variants{serial};
  // Wide staging (8, or 4 where rows of 132 allow no more), 2, and one element per thread.
  for (int width : {8, 2, 1}) {
    Variant block = Variant::block(0);
    block.reduction = "serial";
    block.stage_width = width;
    variants.push_back(block);
  }
  Variant scalar_reads = Variant::block(0);  // one value per shared load
  scalar_reads.reduction = "serial";
  scalar_reads.shared_vectors = false;
  variants.push_back(scalar_reads);
  // Mk forced (ADJOINT_TUNE_BLOCK_OUTPUT_POINTS): 4 and 2 of n = 2's 8 outputs.
  for (int points : {4, 2}) {
    Variant block = Variant::block(0);
    block.reduction = "serial";
    block.output_points = points;
    variants.push_back(block);
  }
  expect_host_runs_match(programs, variants, 1e-5);
}

/// Split block reductions (contiguous partials, g a block axis of the partials kernel): exact
/// f64 sums, so every split equals the serial schedule bit for bit; forced G and the derived G
/// of one token.
TEST(HostRun, SplitBlockReductionsMatchTheSerialScheduleBitForBit) {
  std::vector<ir::Program> programs;
  // dim=1000: 2000 iterations, which G = 4 partials of 496 (a multiple of 8) leave a tail of 16.
  for (const char* spec : {"mhc_pre batch=1 seq=2 n=2 dim=256 dtype=f64",
                           "mhc_pre batch=1 seq=1 n=2 dim=1000 dtype=f64",
                           "mhc_pre batch=1 seq=1 n=2 dim=1024 dtype=f64"}) {
    // Unfused (ADJOINT_TUNE_FMA=0's pass): so these exact inputs sum to the same bits in any
    // partial split. With the ops' fma_sums a split legitimately changes the last bits (seen
    // here as one-ulp differences), which the bitwise rule of this test cannot allow.
    programs.push_back(unfuse_fma_sums(ops::parse_specialization(spec).build_program()));
  }
  Variant serial = Variant::schedule(0, "serial", 0);
  std::vector<Variant> variants{serial};
  for (int partials : {2, 4, -1}) {
    Variant block = Variant::block(partials);
    block.reduction = "serial";
    variants.push_back(block);
  }
  Variant scalar_staging = Variant::block(4);
  scalar_staging.reduction = "serial";
  scalar_staging.stage_width = 1;
  variants.push_back(scalar_staging);
  Variant scalar_reads = Variant::block(4);
  scalar_reads.reduction = "serial";
  scalar_reads.shared_vectors = false;
  variants.push_back(scalar_reads);
  Variant four_outputs = Variant::block(4);  // Mk 4 in the partials kernel too
  four_outputs.reduction = "serial";
  four_outputs.output_points = 4;
  EXPECT_TRUE(some_source_contains(compile_kernels(programs.back(), four_outputs, "probe"),
                                   {"h_mix_partials", "double acc[1][4];"}));
  variants.push_back(four_outputs);
  EXPECT_TRUE(some_source_contains(compile_kernels(programs.back(), scalar_reads, "probe"),
                                   {"Block reduction", "h_mix_partials"}));
  expect_host_runs_match(programs, variants, 1e-9);
}

/// Block splits at few tokens (ADJOINT_TUNE_BLOCK_FEW_TOKENS): tiles of one token per lane
/// where four per lane leave too few blocks (seq=300: T = 64, not 256), a warp combining many
/// partials (seq=130: G = 64 over 1,040 points), a tail of more than one range that a warp
/// combines (dim=1000: G = 32 ranges of 24 and a tail of 232), G past block_max_partials for one tile
/// (seq=1, dim=16384: G = 512 of 32 iterations, its 1 MB of weights let through by a bound of
/// 0 bytes; the default 16 MB keeps G = 256; mask 15 stages those partials in chunks of 64);
/// n=6 at dim=200 folds its 6 rows into the partials (ADJOINT_TUNE_BLOCK_SPLIT_ROWS, G = 12),
/// and every program runs with the knob off too. Exact f64 sums, so every variant equals the
/// serial schedule bit for bit; mask 0 is the split of before.
TEST(HostRun, FewTokenBlockSplitsMatchTheSerialScheduleBitForBit) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_pre batch=1 seq=300 n=2 dim=256 dtype=f64",
                           "mhc_pre batch=1 seq=130 n=2 dim=4096 dtype=f64",
                           "mhc_pre batch=1 seq=8 n=2 dim=1000 dtype=f64",
                           "mhc_pre batch=1 seq=40 n=6 dim=200 dtype=f64",
                           "mhc_pre batch=1 seq=1 n=2 dim=16384 dtype=f64"}) {
    programs.push_back(unfuse_fma_sums(ops::parse_specialization(spec).build_program()));
  }
  const char* expected[] = {"tiles of 64 tokens", "combined by a warp per point (1040 points",
                            "the tail d in [768, 1000)", "over i and d", "split into G=512"};
  Variant few = Variant::block(-1);
  few.reduction = "serial";
  few.wide_weight_bytes = 0;
  for (size_t i = 0; i < programs.size(); ++i) {
    ScheduleNotes notes;
    ReductionSplitOptions split;
    split.block_few_tokens = 7;
    split.block_wide_weight_bytes = 0;
    BlockReductionOptions any_tokens;  // the one-token program keeps the block schedule
    any_tokens.min_tokens = 1;
    ir::Program p = split_reductions(
        choose_reduction_schedules(choose_block_reductions(simplify(programs[i]), any_tokens), {}),
        split, &notes);
    std::string all;
    for (const auto& [kernel, text] : notes) all += text + "\n";
    EXPECT_NE(all.find(expected[i]), std::string::npos) << all;
  }
  Variant before = few;
  before.block_few_tokens = 0;
  Variant bounded = Variant::block(-1);  // the default weight bound: G = 256 for one token
  bounded.reduction = "serial";
  Variant chunk64 = few;  // mask bit 8: the wide G's partials in chunks of 64
  chunk64.block_few_tokens = 15;
  EXPECT_TRUE(some_source_contains(compile_kernels(programs.back(), chunk64, "probe"),
                                   {"chunks of 64 of the"}));
  Variant slices = few;  // ADJOINT_TUNE_BLOCK_SPLIT_ROWS=0: each partial a slice of every row
  slices.split_rows = false;
  expect_host_runs_match(
      programs, {Variant::schedule(0, "serial", 0), few, before, bounded, chunk64, slices}, 1e-9);
}

/// Skinny GEMMs of fewer tokens than BlockReductionOptions::min_tokens (ADJOINT_TUNE_BLOCK_MIN_TOKENS,
/// default 32; their weight re-reads bounded) keep no block schedule: the strided split streams
/// the weights, G past max_partials (ReductionSplitOptions::streamed_weight_kernels; seq=1 n=2
/// dim=16384: G = 2048, every partial 16 iterations of i and d) and a warp combines each point.
/// The notes say so; seq=32 keeps the block schedule. Exact f64 sums: every variant equals the serial schedule bit for bit, at the
/// default and with the block schedule forced (min_tokens 1), at two block sizes.
TEST(HostRun, FewTokenGemvsStreamTheirWeightsThroughTheSplit) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_pre batch=1 seq=1 n=2 dim=16384 dtype=f64",
                           "mhc_pre batch=1 seq=3 n=2 dim=4096 dtype=f64",
                           "mhc_pre batch=1 seq=32 n=2 dim=1024 dtype=f64"}) {
    programs.push_back(unfuse_fma_sums(ops::parse_specialization(spec).build_program()));
  }
  const char* expected[] = {"streamed weights: G up to 4096", "streamed weights: G up to 4096",
                            "h_mix: block reduction"};
  for (size_t i = 0; i < programs.size(); ++i) {
    ScheduleNotes notes;
    ReductionSplitOptions split;
    const ir::Program chosen =
        choose_block_reductions(simplify(programs[i]), {}, &notes, &split.streamed_weight_kernels);
    EXPECT_EQ(split.streamed_weight_kernels.count("mhc_mix"), i < 2 ? 1u : 0u);
    split_reductions(choose_reduction_schedules(chosen, {}), split, &notes);
    std::string all;
    for (const auto& [kernel, text] : notes) all += text + "\n";
    EXPECT_NE(all.find(expected[i]), std::string::npos) << all;
    if (i == 0) {
      EXPECT_NE(all.find("no block reduction (1 token(s), fewer than 32"), std::string::npos) << all;
      EXPECT_NE(all.find("split into G=2048 partials"), std::string::npos) << all;
    }
  }
  Variant streamed = Variant::block(-1);
  streamed.reduction = "serial";
  streamed.block_min_tokens = 32;
  Variant small_blocks = streamed;
  small_blocks.block_size = 64;
  Variant blocked = Variant::block(-1);  // min_tokens 1: the block schedule at every count
  blocked.reduction = "serial";
  expect_host_runs_match(programs, {Variant::schedule(0, "serial", 0), streamed, small_blocks, blocked},
                         1e-9);
}

/// Reductions for thread tiles: a token sum whose x does not move with k (tiled along k), a
/// mixing sum whose phi does not move with s (tiled along s, a bf16 output through a cast),
/// a kernel of two stages (the second reads the first), a reduction nested in another and one
/// taken only in one branch of a select, a max, and an i64 sum.
ir::Program tile_program(DType t) {
  ir::ProgramBuilder b(std::string("tiles_") + std::string(ir::dtype_name(t)));
  ir::Tensor x = b.input("x", t, {2, 12, 3, 16});  // b, s, i, d
  ir::Tensor w = b.input("w", DType::kF32, {2, 12, 8});
  ir::Tensor phi = b.input("phi", DType::kF32, {8, 48});
  ir::Tensor n = b.input("n", DType::kI64, {12, 8});
  ir::Tensor sums = b.output("sums", DType::kF32, {8, 3, 16});
  ir::Tensor peaks = b.output("peaks", DType::kF32, {8, 3, 16});
  ir::Tensor mixed = b.output("mixed", t, {2, 12, 3, 16});
  ir::Tensor counts = b.output("counts", DType::kI64, {8, 16});
  auto f = [&](const Expr& e) { return ir::cast(DType::kF32, e); };
  Var k("k"), i("i"), d("d"), bb("b"), s("s"), k2("k2"), i2("i2"), d2("d2"), b2("b2"), s2("s2");
  b.kernel("token_sums",
           {ir::compute(sums, ir::over(sums, {k, i, d}),
                        ir::sum({ir::range(bb, Expr(2)), ir::range(s, Expr(12))},
                                ir::load(w, {bb, s, k}) * f(ir::load(x, {bb, s, i, d})),
                                DType::kF32)),
            ir::compute(peaks, ir::over(peaks, {k2, i2, d2}),
                        ir::load(sums, {k2, i2, d2}) +
                            ir::maximum({ir::range(b2, Expr(2)), ir::range(s2, Expr(12))},
                                        ir::load(w, {b2, s2, k2}) * f(ir::load(x, {b2, s2, i2, d2})),
                                        DType::kF32))});
  Var b3("b3"), s3("s3"), i3("i3"), d3("d3"), q("q"), e("e");
  Expr inner = ir::sum({ir::range(e, Expr(3))}, ir::load(phi, {(q + e) % 8, i3 * 16 + d3}),
                       DType::kF32);
  Expr mix = ir::sum({ir::range(q, Expr(8))}, ir::load(w, {b3, s3, q}) * inner, DType::kF32);
  b.kernel("mix", {ir::compute(mixed, ir::over(mixed, {b3, s3, i3, d3}),
                               ir::cast(t, ir::select(d3 % 3 == 1, mix,
                                                      f(ir::load(x, {b3, s3, i3, d3})) -
                                                          ir::load(phi, {0, i3 * 16 + d3}))))});
  Var k4("k4"), d4("d4"), s4("s4");
  b.kernel("counts", {ir::compute(counts, ir::over(counts, {k4, d4}),
                                  ir::sum({ir::range(s4, Expr(12))},
                                          ir::load(n, {s4, k4}) * ir::cast(DType::kI64, d4),
                                          DType::kI64))});
  return std::move(b).build();
}

TEST(HostRun, ThreadTilesMatchTheInterpreterBitForBit) {
  std::vector<ir::Program> programs = {tile_program(DType::kF32), tile_program(DType::kBF16)};
  // The tiles are forced (these domains are far too small for derived ones); they change which
  // thread computes a point, never the order of its sum: bit for bit, at every vector width,
  // alone and after forced splits.
  std::vector<CompiledKernel> probe = compile_kernels(programs[0], Variant::tile(0, 4), "probe");
  ASSERT_FALSE(probe.empty());
  EXPECT_NE(probe.front().source.find("for (int r = 0; r < 4; ++r)"), std::string::npos)
      << probe.front().source;
  expect_host_runs_match(programs,
                         {Variant::tile(1, 0), Variant::tile(1, 2), Variant::tile(1, 4),
                          Variant::tile(0, 4), Variant::tile(2, 8), Variant::tile(4, 2),
                          Variant::tile(0, 2, 3), Variant::tile(2, 4, 2)},
                         0);
}

/// sums[k, i, d] = sum over 64 tokens s of w[s, k] x[s, i, d] (x bf16 [64, n, dim], w f32
/// [64, 8]): x_mix's token sum in small, tiled over k.
ir::Program token_sums_program(const std::string& name, int64_t n, int64_t dim) {
  ir::ProgramBuilder b(name);
  ir::Tensor x = b.input("x", DType::kBF16, {64, n, dim});  // s, i, d
  ir::Tensor w = b.input("w", DType::kF32, {64, 8});
  ir::Tensor sums = b.output("sums", DType::kF32, {8, n, dim});
  Var k("k"), i("i"), d("d"), s("s");
  b.kernel("token_sums",
           {ir::compute(sums, ir::over(sums, {k, i, d}),
                        ir::fma_sum({ir::range(s, Expr(64))}, ir::load(w, {s, k}),
                                    ir::cast(DType::kF32, ir::load(x, {s, i, d})), DType::kF32))});
  return std::move(b).build();
}

/// The aligned copy of a tiled kernel (one alignment test, EmitOptions::tile_prefetch >= 1) and
/// its prefetched token loop (x through a ring of shared memory, copied a chunk ahead): the
/// same points in the same order, so the bits of the kernel of before, on aligned buffers (the
/// aligned copy runs) and misaligned ones (the checked copy).
TEST(HostRun, PrefetchedThreadTilesMatchTheInterpreterBitForBit) {
  std::vector<ir::Program> programs = {token_sums_program("prefetch", 3, 16),
                                       tile_program(DType::kBF16)};
  std::vector<CompiledKernel> probe =
      compile_kernels(programs[0], Variant::prefetch(2, 8, 8, 0), "probe");
  ASSERT_FALSE(probe.empty());
  const std::string& source = probe.front().source;
  EXPECT_NE(source.find("one alignment test"), std::string::npos) << source;
  EXPECT_NE(source.find("s_chunk += 8"), std::string::npos) << source;
  EXPECT_NE(source.find("__shared__ adjoint::bfloat16 x_ring[2][8]["), std::string::npos) << source;
  EXPECT_NE(source.find("copy_elements_async<4, 2>(&x_ring[0][u][threadIdx.x][0]"),
            std::string::npos)
      << source;
  // The misaligned copy computes each point alone (EmitOptions::tile_point_fallback): rolled
  // loops over r and e, one accumulator, the token loop rolled; the tiled copy of before with
  // tiled_fallback.
  EXPECT_NE(source.find("} else {  // a misaligned base: each point alone"), std::string::npos)
      << source;
  EXPECT_NE(source.find("// each of the 16 points alone, in rolled loops"), std::string::npos)
      << source;
  EXPECT_NE(source.find("#pragma unroll 1\n        for (int s = 0; s < 64; ++s)"),
            std::string::npos)
      << source;
  std::vector<CompiledKernel> tiled = compile_kernels(programs[0], Variant::tiled_fallback(2, 8, 8, 0), "probe");
  ASSERT_FALSE(tiled.empty());
  EXPECT_NE(tiled.front().source.find("} else {  // a misaligned base: a check per access"),
            std::string::npos)
      << tiled.front().source;
  // mhc_pre_backward's dx reads x and grad_h_in per point of s after its reduction: copied to
  // shared memory before it (EmitOptions::tile_early_copies; 8 tokens x 2 spans of 4 floats x
  // 128 threads = 32 KB, kEarlyCopyBytes), and the same bits; each tile point reads its spans
  // back with one 16-byte load each (EmitOptions::tile_early_wide_reads) or, with that off,
  // element by element where the value uses them.
  ir::Program mhc =
      ops::parse_specialization("mhc_pre_backward batch=2 seq=8 n=4 dim=16 dtype=f32").build_program();
  Variant early_copies(4, 128, 0, false), late(4, 128, 0, false);
  early_copies.thread_tile = late.thread_tile = 8;
  late.tile_prefetch = 0;
  Variant narrow_reads = early_copies;
  narrow_reads.tile_early_wide_reads = false;
  bool early = false, wide = false;
  for (const CompiledKernel& k : compile_kernels(mhc, early_copies, "probe")) {
    early = early || (k.source.find("copy_elements_async<16, 4>(&x_early[r][threadIdx.x][0], &x[") !=
                          std::string::npos &&
                      k.source.find("adjoint::wait_async<0>();") != std::string::npos);
    wide = wide || (k.source.find("float x_early_span[4];\n") != std::string::npos &&
                    k.source.find("adjoint::load_elements_aligned<16>(x_early_span, "
                                  "&x_early[r][threadIdx.x][0]);") != std::string::npos &&
                    k.source.find("adjoint::to_float(x_early[") == std::string::npos &&
                    k.source.find("* x_early_span[e]") != std::string::npos);
  }
  EXPECT_TRUE(early);
  EXPECT_TRUE(wide);
  bool narrow = false;
  for (const CompiledKernel& k : compile_kernels(mhc, narrow_reads, "probe"))
    narrow = narrow || (k.source.find("x_early[r][threadIdx.x][e]") != std::string::npos &&
                        k.source.find("x_early_span") == std::string::npos);
  EXPECT_TRUE(narrow);
  expect_host_runs_match({mhc}, {late, early_copies, narrow_reads}, 2e-2);
  // bf16 x and grad_h_in (the bench's dtype): spans of 8 bf16, one 16-byte shared load each,
  // rounded to bf16 in the epilogue; the same bits as the loads after the reduction.
  ir::Program mhc_bf16 =
      ops::parse_specialization("mhc_pre_backward batch=2 seq=8 n=4 dim=64 dtype=bf16").build_program();
  Variant early_bf16(8, 128, 0, false), late_bf16(8, 128, 0, false);
  early_bf16.thread_tile = late_bf16.thread_tile = 8;
  late_bf16.tile_prefetch = 0;
  Variant narrow_bf16 = early_bf16;
  narrow_bf16.tile_early_wide_reads = false;
  bool wide_bf16 = false;
  for (const CompiledKernel& k : compile_kernels(mhc_bf16, early_bf16, "probe"))
    wide_bf16 = wide_bf16 || k.source.find("adjoint::bfloat16 x_early_span[8];\n"
                                           "      adjoint::load_elements_aligned<16>(x_early_span, "
                                           "&x_early[r][threadIdx.x][0]);") != std::string::npos;
  EXPECT_TRUE(wide_bf16);
  expect_host_runs_match({mhc_bf16}, {late_bf16, early_bf16, narrow_bf16}, 2e-2);
  std::vector<CompiledKernel> before =
      compile_kernels(programs[0], Variant::prefetch(2, 8, 0, 0), "probe");
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(before.front().source.find("one alignment test"), std::string::npos);
  EXPECT_EQ(before.front().source.find("_aligned"), std::string::npos);
  expect_host_runs_match(programs,
                         {Variant::prefetch(2, 8, 0, 0), Variant::prefetch(2, 8, 1, 0),
                          Variant::prefetch(2, 8, 4, 0), Variant::prefetch(2, 8, 8, 0),
                          Variant::prefetch(4, 4, 16, 0), Variant::prefetch(1, 2, 8, 2),
                          Variant::prefetch(2, 4, 8, 2), Variant::tiled_fallback(2, 8, 8, 0),
                          Variant::tiled_fallback(1, 2, 8, 2), Variant::per_thread_ring(2, 8, 8, 0),
                          Variant::per_thread_ring(4, 4, 16, 0)},
                         0);
}

// A span the whole block reads (EmitOptions::tile_uniform_ring): w[s, k] moves with the tile's k
// only within the span, and s is the loop's; with whole blocks (256 groups of 2 d, blocks of
// 256 threads, or 128) it goes through a ring of the block, copied by 8 x 2 threads (16-byte
// pieces of 4 floats), read by all after a __syncthreads; the same bits as the per-thread loads.
TEST(HostRun, BlockRingsOfThreadTilesMatchTheInterpreterBitForBit) {
  const ir::Program program = token_sums_program("uniform_spans", 8, 64);
  std::vector<CompiledKernel> probe = compile_kernels(program, Variant::prefetch(2, 8, 8, 0), "probe");
  ASSERT_FALSE(probe.empty());
  const std::string& source = probe.front().source;
  EXPECT_NE(source.find("__shared__ float w_block_ring[2][8][8];"), std::string::npos) << source;
  EXPECT_NE(source.find("if (piece < 2) adjoint::copy_elements_async<16, 4>(&w_block_ring[0][block_u][piece * 4]"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("adjoint::wait_async<0>();  // this chunk's copies have landed"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("__syncthreads();"), std::string::npos) << source;
  EXPECT_EQ(source.find("w_span"), std::string::npos) << source;
  std::vector<CompiledKernel> per_thread =
      compile_kernels(program, Variant::per_thread_ring(2, 8, 8, 0), "probe");
  ASSERT_FALSE(per_thread.empty());
  EXPECT_EQ(per_thread.front().source.find("w_block_ring"), std::string::npos);
  EXPECT_EQ(per_thread.front().source.find("__syncthreads"), std::string::npos);
  EXPECT_NE(per_thread.front().source.find("adjoint::wait_async<1>();"), std::string::npos);
  expect_host_runs_match({program},
                         {Variant::per_thread_ring(2, 8, 8, 0), Variant::prefetch(2, 8, 8, 0),
                          Variant::prefetch(2, 8, 4, 0), Variant::prefetch(4, 4, 16, 0),
                          Variant::prefetch(2, 8, 16, 0), Variant::prefetch(1, 2, 8, 2)},
                         0);
}

// Long tiles (ThreadTileOptions::long_tile_accumulators): x_mix's partials shape, 24 k over
// 256 tokens a partial, keeps 24 x 4 accumulators (96) instead of 24 x 2, the block ring of
// w and the x ring as before: each point's sum in the same order, so the bits of the untiled
// kernel of the same split, and of the interpreter (exact inputs), on aligned buffers and
// misaligned ones (each point alone).
TEST(HostRun, LongThreadTilesMatchTheInterpreterBitForBit) {
  ir::ProgramBuilder b("long_tiles");
  ir::Tensor x = b.input("x", DType::kBF16, {512, 2, 512});  // s, i, d
  ir::Tensor w = b.input("w", DType::kF32, {512, 24});
  ir::Tensor sums = b.output("sums", DType::kF32, {24, 2, 512});
  Var k("k"), i("i"), d("d"), s("s");
  b.kernel("token_sums",
           {ir::compute(sums, ir::over(sums, {k, i, d}),
                        ir::fma_sum({ir::range(s, Expr(512))}, ir::load(w, {s, k}),
                                    ir::cast(DType::kF32, ir::load(x, {s, i, d})), DType::kF32))});
  const ir::Program program = std::move(b).build();
  std::vector<CompiledKernel> probe =
      compile_kernels(program, Variant::prefetch(4, 24, 8, 2), "probe");
  ASSERT_FALSE(probe.empty());
  const std::string& source = probe.front().source;
  EXPECT_NE(source.find("float acc[24][4]"), std::string::npos) << source;
  EXPECT_NE(source.find("w_block_ring[2][8][24]"), std::string::npos) << source;
  EXPECT_NE(source.find("x_ring[2][8][256][4]"), std::string::npos) << source;
  expect_host_runs_match({program},
                         {Variant::tile(1, 0, 2), Variant::prefetch(4, 24, 8, 2),
                          Variant::prefetch(2, 24, 8, 2), Variant::prefetch(4, 24, 16, 2),
                          Variant::per_thread_ring(4, 24, 8, 2)},
                         0);
}

TEST(HostRun, ThreadTilesOfTheMhcOps) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_pre batch=2 seq=8 n=4 dim=16 dtype=bf16",
                           "mhc_pre_backward batch=2 seq=8 n=4 dim=16 dtype=f32",
                           "mhc_pre_backward batch=1 seq=16 n=6 dim=8 dtype=bf16 "
                           "with_grad_x_post=true",
                           "mhc_pre_backward batch=2 seq=100 n=2 dim=8 dtype=bf16"}) {  // x_mix
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  ASSERT_TRUE(programs.back().find_tensor("x_mix"));
  // Untiled first (within rounding of the interpreter's f64), then tiles: the same bits, with
  // and without splits (the split changes the order, so each tiled split run is compared with
  // the untiled run of the same split).
  // tile(8, 8): dx's derived schedule at the issue's shapes, R = 8 tokens with groups of 8 d
  // (ThreadTileOptions::prefer_vector halves R = 16 so that R x V stays at 64).
  expect_host_runs_match(programs, {Variant::tile(0, 0), Variant::tile(0, 2), Variant::tile(0, 4),
                                    Variant::tile(0, 8), Variant::tile(1, 4), Variant::tile(8, 8)},
                         2e-2);
  // The tiled kernels of before (a check per access) and the aligned copy without prefetch.
  expect_host_runs_match(programs, {Variant::prefetch(0, -1, 0), Variant::prefetch(0, -1, 1),
                                    Variant::prefetch(0, -1, 16), Variant::tiled_fallback(0, -1, 8)},
                         2e-2);
  expect_host_runs_match(programs, {Variant::tile(0, 0, 4), Variant::tile(0, 2, 4),
                                    Variant::tile(0, 8, 4)},
                         2e-2);
  // Splits that count R x V per thread (ReductionSplitOptions::count_vector): derived tiles and
  // G, against the interpreter.
  Variant counted = Variant::tile(0, -1);
  counted.split_count_vector = true;
  expect_host_runs_match(programs, {counted}, 2e-2);
}

/// Thread tiles in blocks of rows (tile_blocks.h): dx's tile of 8 tokens in blocks of 32 and 64
/// threads, one row (the blocks of before) and 2, 4 or 8 rows of tiles by columns of vector
/// groups; a partial last tile (60 tokens) and a batch axis outside the rows; the rows change
/// which thread computes a point, never how: the bits of one row, aligned and misaligned.
TEST(HostRun, ThreadTileRowsMatchTheInterpreterBitForBit) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_pre_backward batch=2 seq=64 n=4 dim=128 dtype=bf16",
                           "mhc_pre_backward batch=1 seq=60 n=2 dim=64 dtype=f32"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  bool rows = false, before = true;
  for (const CompiledKernel& k :
       compile_kernels(programs.front(), Variant::tile_rows(8, 8, 32, 4), "probe")) {
    rows = rows || (k.source.find("const int tile_row = threadIdx.x / 8;") != std::string::npos &&
                    k.source.find("const int column = threadIdx.x % 8;") != std::string::npos &&
                    k.source.find("+ tile_row) * 8;") != std::string::npos);
  }
  for (const CompiledKernel& k :
       compile_kernels(programs.front(), Variant::tile_rows(8, 8, 32, 0), "probe"))
    before = before && k.source.find("tile_row") == std::string::npos;
  EXPECT_TRUE(rows && before);
  expect_host_runs_match(programs,
                         {Variant::tile_rows(8, 8, 32, 0), Variant::tile_rows(8, 8, 32, 2),
                          Variant::tile_rows(8, 8, 32, 4), Variant::tile_rows(8, 8, 64, 8),
                          Variant::tile_rows(4, 8, 64, 4), Variant::tile_rows(8, 8, 32, -1),
                          Variant::tile_rows(0, -1, 0, -1)},
                         2e-2);
}

/// Thread tiles with a partial last tile (thread_tiles.h): token counts no tile divides (13 and
/// 7 are prime; tile_program's 12 tokens with R = 8), dx tiled along s with its extra points at
/// the clamped index and its stores guarded. The untiled kernel first (against the interpreter),
/// then every tile the same bits, with and without the aligned copy, early copies and splits.
TEST(HostRun, PartialThreadTilesMatchTheInterpreterBitForBit) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_pre_backward batch=1 seq=13 n=4 dim=16 dtype=f32",
                           "mhc_pre_backward batch=3 seq=7 n=2 dim=8 dtype=bf16"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  programs.push_back(tile_program(DType::kBF16));
  bool partial = false, guarded = false, clamped = false;
  for (const CompiledKernel& k : compile_kernels(programs.front(), Variant::tile(8, 8), "probe")) {
    partial = partial || k.source.find("The last tile is partial: its points past 12 compute at "
                                       "12 and are not stored.") != std::string::npos;
    guarded = guarded || k.source.find("if (s_base + r < 13) {") != std::string::npos;
    clamped = clamped ||
              k.source.find("const int s = s_base + r < 13 ? s_base + r : 12;") != std::string::npos;
  }
  EXPECT_TRUE(partial && guarded && clamped);
  Variant whole = Variant::tile(8, 8);  // ThreadTileOptions::partial_tiles off: no tile on s
  whole.tile_partial = false;
  for (const CompiledKernel& k : compile_kernels(programs.front(), whole, "probe"))
    EXPECT_EQ(k.source.find("The last tile is partial"), std::string::npos) << k.source;
  expect_host_runs_match(programs,
                         {Variant::tile(0, 0), Variant::tile(0, 2), Variant::tile(0, 4),
                          Variant::tile(0, 8), Variant::tile(8, 8), Variant::tile(1, 4),
                          Variant::tile(2, 8), whole, Variant::prefetch(0, 8, 0),
                          Variant::prefetch(8, 8, 1), Variant::prefetch(4, 4, 16)},
                         2e-2);
  expect_host_runs_match(programs, {Variant::tile(0, 0, 4), Variant::tile(0, 8, 4),
                                    Variant::tile(8, 4, 4)},
                         2e-2);
}

/// Token counts that no power of two divides (1031 is prime, 3 x 37): the token sums split
/// with a tail that the combine sums after the partials (ReductionSplitOptions::tail), derived
/// and forced, tiled and not, with the warp combine and without; against the interpreter.
TEST(HostRun, SplitTailsOfOddTokenCounts) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_pre_backward batch=1 seq=1031 n=2 dim=8 dtype=bf16",
                           "mhc_pre_backward batch=3 seq=37 n=2 dim=8 dtype=f32"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  bool tail = false;
  for (const CompiledKernel& k : compile_kernels(programs.front(), Variant::split(0, -1), "probe"))
    tail = tail || k.source.find("_tail") != std::string::npos;
  EXPECT_TRUE(tail) << "the derived split of 1031 tokens has no tail";
  Variant no_warp_combine = Variant::split(0, 4);
  no_warp_combine.split_warp_combine = 0;
  // Each split sums in its own order: each is compared with the interpreter, and a tile of the
  // same split must give its bits.
  expect_host_runs_match(programs, {Variant::split(0, -1)}, 2e-2);
  expect_host_runs_match(programs, {Variant::split(0, 4), Variant::tile(0, 4, 4)}, 2e-2);
  expect_host_runs_match(programs, {Variant::split(0, 3)}, 2e-2);
  expect_host_runs_match(programs, {no_warp_combine}, 2e-2);
}

/// fma_sums whose fused and unfused results differ: per row, p[0] * q[0] = -(1 + 2u) and
/// p[1] * q[1] = (1 + u)^2 = 1 + 2u + u^2 (u = 2^-12 in f32, 2^-27 in f64), whose rounding to
/// the dtype drops u^2. Serially fused, the sum is u^2 exactly (a power of two, times the row's
/// scale); unfused it is 0. Two f32 stages (one vector-group friendly, one whose reduction is
/// nested in an elementwise product) and an f64 stage.
ir::Program fma_program() {
  ir::ProgramBuilder b("fma_sums");
  ir::Tensor p32 = b.input("p32", DType::kF32, {8, 2});
  ir::Tensor q32 = b.input("q32", DType::kF32, {8, 2});
  ir::Tensor p64 = b.input("p64", DType::kF64, {8, 2});
  ir::Tensor q64 = b.input("q64", DType::kF64, {8, 2});
  ir::Tensor fused = b.output("fused", DType::kF32, {8});
  ir::Tensor scaled = b.output("scaled", DType::kF32, {8, 4});
  ir::Tensor wide = b.output("wide", DType::kF64, {8});
  Var i("i"), k("k"), i2("i2"), j("j"), k2("k2"), i3("i3"), k3("k3");
  b.kernel("fused", {ir::compute(fused, ir::over(fused, {i}),
                                 ir::fma_sum({ir::range(k, Expr(2))}, ir::load(p32, {i, k}),
                                             ir::load(q32, {i, k}), DType::kF32))});
  b.kernel("scaled",
           {ir::compute(scaled, ir::over(scaled, {i2, j}),
                        ir::cast(DType::kF32, j + 1) *
                            ir::fma_sum({ir::range(k2, Expr(2))}, ir::load(p32, {i2, k2}),
                                        ir::load(q32, {i2, k2}), DType::kF32))});
  b.kernel("wide", {ir::compute(wide, ir::over(wide, {i3}),
                                ir::fma_sum({ir::range(k3, Expr(2))}, ir::load(p64, {i3, k3}),
                                            ir::load(q64, {i3, k3}), DType::kF64))});
  return std::move(b).build();
}

ir::HostBuffers fma_inputs(const ir::Program& p, unsigned) {
  ir::HostBuffers in;
  for (const char* suffix : {"32", "64"}) {
    const double u = std::ldexp(1.0, std::string(suffix) == "32" ? -12 : -27);
    std::vector<double>& pv = in[std::string("p") + suffix];
    std::vector<double>& qv = in[std::string("q") + suffix];
    for (int row = 0; row < 8; ++row) {
      const double scale = std::ldexp(1.0, row - 4);
      pv.insert(pv.end(), {-(1 + 2 * u) * scale, (1 + u) * scale});
      qv.insert(qv.end(), {1.0, 1 + u});
    }
  }
  EXPECT_EQ(in.size(), p.inputs.size());
  return in;
}

TEST(HostRun, FmaSumsRoundOncePerStepAndUnfusedTheyRoundEachProduct) {
  ir::Program program = fma_program();
  ir::Program unfused = unfuse_fma_sums(program);
  ASSERT_FALSE(same_program(program, unfused));
  ASSERT_TRUE(same_program(unfuse_fma_sums(unfused), unfused));  // nothing left to unfuse
  // The interpreter's own answers: u^2 times the row's scale fused, 0 unfused.
  ir::HostBuffers inputs = fma_inputs(program, 0);
  ir::HostBuffers fused = ir::interpret(program, inputs), plain = ir::interpret(unfused, inputs);
  for (int row = 0; row < 8; ++row) {
    EXPECT_EQ(fused.at("fused")[row], std::ldexp(1.0, -24 + row - 4)) << row;
    EXPECT_EQ(fused.at("wide")[row], std::ldexp(1.0, -54 + row - 4)) << row;
    EXPECT_EQ(plain.at("fused")[row], 0.0) << row;
    EXPECT_EQ(plain.at("wide")[row], 0.0) << row;
  }
  std::vector<CompiledKernel> kernels = compile_kernels(program, Variant(1), "probe");
  ASSERT_EQ(kernels.size(), 3u);
  EXPECT_NE(kernels[0].source.find("= fmaf("), std::string::npos) << kernels[0].source;
  EXPECT_NE(kernels[2].source.find("= fma("), std::string::npos) << kernels[2].source;
  for (const CompiledKernel& k : compile_kernels(unfused, Variant(1), "probe_unfused"))
    EXPECT_EQ(k.source.find(" = fma"), std::string::npos) << k.source;
  // The kernels, scalar and vectorized (the order of each sum is the serial one), compute
  // bit for bit what the interpreter computes, fused and unfused.
  expect_host_runs_match({program, unfused}, {Variant(1), Variant(2), Variant(4), Variant(0)}, 0,
                         fma_inputs);
}

/// t[i, j] = 2 x[i, j]; u[i, j] = t[i, (j + 1) % 5] + t[i, j]; v[i] = sum_j u[i, j]: each
/// kernel reads the previous one's output at other points of its row i.
ir::Program row_chain() {
  ir::ProgramBuilder b("row_chain");
  ir::Tensor x = b.input("x", DType::kF32, {7, 5});
  ir::Tensor t = b.temporary("t", DType::kF32, {7, 5});
  ir::Tensor u = b.temporary("u", DType::kF32, {7, 5});
  ir::Tensor v = b.output("v", DType::kF32, {7});
  Var i("i"), j("j"), i2("i"), j2("j"), i3("i"), k("k");
  b.kernel("scale", {ir::compute(t, ir::over(t, {i, j}), ir::load(x, {i, j}) * 2.0)});
  b.kernel("shift", {ir::compute(u, ir::over(u, {i2, j2}),
                                 ir::load(t, {i2, (j2 + 1) % 5}) + ir::load(t, {i2, j2}))});
  b.kernel("sum", {ir::compute(v, ir::over(v, {i3}),
                               ir::sum({ir::range(k, Expr(5))}, ir::load(u, {i3, k}),
                                       DType::kF32))});
  return std::move(b).build();
}

/// Row groups (compiler/row_groups.h): each block's threads run as host threads that meet at
/// __syncthreads(), so a stage that read its row before the block's earlier stages wrote it
/// would see zeros (or another block's rows) and differ. The separate kernels first (within
/// rounding of the interpreter: expf is the host's), then the fused kernel derived and at
/// forced rows per block, bit for bit.
TEST(HostRun, RowGroupsMatchTheSeparateKernelsBitForBit) {
  std::vector<ir::Program> programs = {row_chain()};
  for (const char* spec : {"mhc_sinkhorn batch=2 seq=3 n=4 t_max=3",
                           "mhc_sinkhorn batch=1 seq=5 n=6 t_max=4 eps=0.01",
                           "mhc_sinkhorn batch=1 seq=1 n=8 t_max=3",
                           "mhc_sinkhorn_backward batch=2 seq=3 n=4 t_max=3",
                           "mhc_sinkhorn_backward batch=1 seq=5 n=6 t_max=2 eps=0.01",
                           "mhc_sinkhorn_backward batch=1 seq=2 n=8 t_max=2"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  for (const ir::Program& p : programs) {
    std::vector<CompiledKernel> fused = compile_kernels(p, Variant::rows(-1), "probe");
    ASSERT_EQ(fused.size(), 1u) << p.name;
    EXPECT_TRUE(synchronizes(fused.front())) << fused.front().source;
  }
  expect_host_runs_match(programs,
                         {Variant(1), Variant::rows(-1), Variant::rows(1), Variant::rows(2),
                          Variant::rows(3)},
                         1e-3);
}

/// A row per thread (RowSchedule::kThread, row_groups.h): each thread runs its row's stages in
/// order with no barrier, the temporaries only the fused kernel touches held in the thread.
/// Derived (auto picks it for the forwards), forced, and forced with R rows per block (tails
/// of partly used blocks): bit for bit against the separate kernels.
TEST(HostRun, RowPerThreadMatchesTheSeparateKernelsBitForBit) {
  std::vector<ir::Program> programs = {row_chain()};
  for (const char* spec : {"mhc_sinkhorn batch=2 seq=3 n=4 t_max=3",
                           "mhc_sinkhorn batch=1 seq=5 n=6 t_max=4 eps=0.01",
                           "mhc_sinkhorn batch=1 seq=1 n=8 t_max=3",
                           "mhc_sinkhorn_backward batch=2 seq=3 n=4 t_max=3",
                           "mhc_sinkhorn_backward batch=1 seq=2 n=8 t_max=2",
                           "mhc_sinkhorn dtype=f64 batch=1 seq=3 n=4 t_max=20"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  for (size_t i = 1; i <= 3; ++i) {  // the forwards: auto gives a row per thread, no barrier
    std::vector<CompiledKernel> fused = compile_kernels(programs[i], Variant::rows(-1, "auto"), "probe");
    ASSERT_EQ(fused.size(), 1u) << programs[i].name;
    EXPECT_FALSE(synchronizes(fused.front())) << fused.front().source;
    EXPECT_NE(fused.front().source.find("_row["), std::string::npos) << fused.front().source;
  }
  expect_host_runs_match(programs,
                         {Variant(1), Variant::rows(-1, "auto"), Variant::rows(-1, "thread"),
                          Variant::rows(2, "thread"), Variant::rows(3, "thread")},
                         1e-3);
}

/// Stage loops (compiler/stage_loops.h): the Sinkhorn iterations and reverse steps of a
/// row-group kernel run as loops over their iterations, the tensors of each iteration through
/// shared pointer tables (the block schedule) or chains of row arrays (a row per thread). Every
/// schedule, with loops and with every stage written out, gives the separate kernels' bits.
TEST(HostRun, StageLoopsMatchTheSeparateKernelsBitForBit) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_sinkhorn batch=2 seq=3 n=4 t_max=20",
                           "mhc_sinkhorn batch=1 seq=3 n=6 t_max=5 eps=0.01",
                           "mhc_sinkhorn dtype=f64 batch=1 seq=2 n=8 t_max=4",
                           "mhc_sinkhorn_backward batch=2 seq=3 n=4 t_max=6",
                           "mhc_sinkhorn_backward dtype=f64 batch=1 seq=3 n=6 t_max=4 eps=0.01"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  // A loop in the block schedule (tables) and in the forwards' derived schedule (chains); the
  // backward's row per thread keeps grad_out (global) and grad_p_t (row-local) in one family,
  // so its reverse steps stay straight-line there, which the runs below check too.
  for (const ir::Program& p : programs) {
    for (const Variant& v : {Variant::rows(-1, "auto"), Variant::rows(-1, "block")}) {
      if (v.row_schedule == "auto" && p.name != "mhc_sinkhorn") continue;
      std::vector<CompiledKernel> fused = compile_kernels(p, v, "probe");
      ASSERT_EQ(fused.size(), 1u) << p.name;
      EXPECT_NE(fused.front().source.find("#pragma unroll 1\n  for (int iteration = 0; "),
                std::string::npos)
          << fused.front().source;
    }
  }
  expect_host_runs_match(programs,
                         {Variant(1), Variant::rows(-1, "auto"), Variant::rows(-1, "block"),
                          Variant::rows(3, "block"), Variant::rows(-1, "thread"),
                          Variant::rows(2, "thread"), Variant::rows_straight(-1, "auto"),
                          Variant::rows_straight(-1, "block")},
                         1e-3);
}

/// The other mHC programs whose kernels form row groups at small shapes (their long reductions
/// keep them apart at the issue's shapes): the fused kernels give the separate kernels' bits.
TEST(HostRun, RowGroupsOfTheMhcPreOps) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_pre batch=2 seq=3 n=4 dim=12 dtype=bf16",
                           "mhc_pre batch=1 seq=1 n=8 dim=512 dtype=bf16",
                           "mhc_pre_backward batch=1 seq=5 n=6 dim=7 dtype=f16 "
                           "with_grad_x_post=true",
                           "mhc_pre_backward batch=1 seq=1 n=8 dim=512 dtype=bf16"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
    // Split combines of one thread per point (a warp combine is not a row-group stage), so
    // that B*S = 1 has its inv_rms combine fused with the kernels after it.
    Variant rows = Variant::rows(-1);
    rows.split_warp_combine = 0;
    std::vector<CompiledKernel> kernels = compile_kernels(programs.back(), rows, "probe");
    bool fused = false;
    for (const CompiledKernel& k : kernels) fused |= synchronizes(k);
    EXPECT_TRUE(fused) << spec;
  }
  // mHC's f32 sums (the interpreter accumulates in f64), sigmoid and rsqrt (the host's libm)
  // and bf16 outputs agree with the interpreter only approximately.
  // A warp combine sums the partials in another order than a thread: compared apart.
  expect_host_runs_match(programs, {Variant(0), Variant::rows(-1)}, 2e-2);
  Variant plain(0), derived_rows = Variant::rows(-1), two_rows = Variant::rows(2);
  // A row per thread (derived by auto, and forced with 2 rows per block) as well.
  Variant auto_rows = Variant::rows(-1, "auto"), two_thread_rows = Variant::rows(2, "thread");
  plain.split_warp_combine = derived_rows.split_warp_combine = two_rows.split_warp_combine = 0;
  auto_rows.split_warp_combine = two_thread_rows.split_warp_combine = 0;
  expect_host_runs_match(programs, {plain, derived_rows, two_rows, auto_rows, two_thread_rows},
                         2e-2);
}

/// grid_sampler inputs whose sums depend on their order: grad_output and input with full
/// mantissas in (-1, 1), grids k/16 in [-1.5, 1.5] (in range, edges, pixel centres, outside).
ir::HostBuffers rounding_inputs(const ir::Program& p, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  std::uniform_int_distribution<int> grid(-24, 24);
  ir::HostBuffers in;
  for (const ir::Tensor& t : p.inputs) {
    std::vector<double>& v = in[t->name];
    for (int64_t i = 0; i < t->storage_elements(); ++i)
      v.push_back(t->name == "grid" ? grid(rng) / 16.0 : value(rng));
  }
  return in;
}

/// Small grid_sampler programs of three modes (bilinear zeros f32, bicubic reflection f64,
/// nearest border bf16) that the binned and the scanned gather tests both run.
std::vector<ir::Program> three_mode_grid_samplers() {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,3,5,7 output_size=4,6 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=f64 input_size=1,2,4,4 output_size=5,3 "
        "interpolation_mode=bicubic padding_mode=reflection align_corners=true",
        "grid_sampler_2d_backward dtype=bf16 input_size=2,2,3,1 output_size=4,4 "
        "interpolation_mode=nearest padding_mode=border align_corners=false"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  return programs;
}

/// Data-dependent scatters of every grid_sampler mode, 2-d and 3-d, as binned gathers. The
/// first run is the atomics lowering, which on the host adds in thread order, that is in
/// record order for every destination: within rounding of the interpreter (it sums in f64).
/// The binned gathers at three block sizes must equal it bit for bit, which they do only when
/// every bucket is summed in record order: the fill claims slots counting down, so the sort
/// kernel has to put each bucket back in order.
TEST(HostRun, BinnedGathersOfGridSamplerMatchTheInterpreterAtEveryBlockSize) {
  std::vector<ir::Program> programs = three_mode_grid_samplers();
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f16 input_size=1,3,6,5 output_size=7,2 "
        "interpolation_mode=bilinear padding_mode=border align_corners=true output_mask=1,0",
        "grid_sampler_3d_backward dtype=f32 input_size=1,2,3,4,5 output_size=3,2,4 "
        "interpolation_mode=bilinear padding_mode=reflection align_corners=false",
        // Nine channels: broadcast-innermost by default.
        "grid_sampler_2d_backward dtype=bf16 input_size=2,9,4,3 output_size=3,5 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        // Every input read in place: grad_output channels-last, padded input rows, grid planes.
        "grid_sampler_2d_backward dtype=f32 input_size=2,3,5,6 output_size=4,7 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=true "
        "grad_output_strides=84,1,21,3 input_strides=120,40,8,1 grid_strides=28,7,1,56"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  // Grids in [-8, 8] (exact inputs): most points out of range (zeros), clamped to the edge
  // cells (border: large buckets) or reflected; then values whose sums round by order.
  // The broadcast-innermost gather (channels innermost, through transposed copies) for every
  // mode too: the same sums in the same order, so the same bits.
  const std::vector<Variant> variants = {
      Variant(1),
      Variant::binned_gather(256),
      Variant::binned_gather(32),
      Variant::binned_gather(1024),
      Variant::binned_gather(256, 1),
      Variant::binned_gather(32, 1),
      Variant::binned_tiled(64, 1, 1),
      Variant::binned_tiled(1024, 2, 1),
      Variant::binned_claimed_fill(128)};  // the fill's claims of before the ranked count
  expect_host_runs_match(programs, variants, 1e-2);
  expect_host_runs_match(programs, variants, 1e-2, rounding_inputs);
}

/// Scanned gathers (lower_scatter_to_gather.h, ScanGatherOptions): each grad_input element sums
/// its batch's records whose cell is its own, in domain order, as the atomics lowering adds on
/// the host; so at every block size the bits are the same, within rounding of the interpreter,
/// on uniform grids and on grids far outside (border: every record of a row at one edge cell),
/// in every mode, 2-d and 3-d. The kernels hold no bins and no atomics.
TEST(HostRun, ScannedGathersOfGridSamplerMatchTheInterpreterAtEveryBlockSize) {
  std::vector<ir::Program> programs = three_mode_grid_samplers();
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f16 input_size=1,3,6,5 output_size=7,2 "
        "interpolation_mode=bicubic padding_mode=border align_corners=true output_mask=1,0",
        "grid_sampler_3d_backward dtype=f32 input_size=1,2,3,4,5 output_size=3,2,4 "
        "interpolation_mode=bilinear padding_mode=reflection align_corners=false",
        "grid_sampler_3d_backward dtype=f64 input_size=2,1,1,3,2 output_size=2,1,5 "
        "interpolation_mode=nearest padding_mode=zeros align_corners=true"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  const std::vector<Variant> variants = {Variant::scanned_gather(256),
                                         Variant::scanned_gather(32),
                                         Variant::scanned_gather(1024)};
  for (const ir::Program& p : programs) {
    const std::vector<CompiledKernel> kernels = compile_kernels(p, variants[0], "probe");
    EXPECT_FALSE(some_source_contains(kernels, {"bin_"})) << ir::to_string(p);
    EXPECT_FALSE(some_source_contains(kernels, {"atomic"})) << ir::to_string(p);
  }
  expect_host_runs_match(programs, variants, 1e-2);
  expect_host_runs_match(programs, variants, 1e-2, rounding_inputs);
  // The same sums in the same order as the atomics lowering on the host: bit for bit.
  expect_host_runs_match(programs, {Variant(1), Variant::scanned_gather(256)}, 1e-2,
                         rounding_inputs);
}

/// Expects every output of `programs` zero: in the interpreter, and in host runs of each
/// variant whose outputs start as NaN bytes, so that the zeros are written, not found (an atomics
/// run keeps zeroed outputs: the runtime zeroes its targets). An empty tensor is bound as a null
/// pointer (HostTensor::data), so a kernel that reads one crashes.
void expect_zeros_written(const std::vector<ir::Program>& programs,
                          const std::vector<Variant>& variants, const std::string& prefix) {
  for (const ir::Program& p : programs) {
    ASSERT_EQ(testing::first_nonzero_output(p, ir::interpret(p, exact_inputs(p, 1))), "")
        << ir::to_string(p);
  }
  expect_host_runs_match(programs, variants, 0);
  if (host_compiler().empty()) GTEST_SKIP() << "no host C++ compiler";
  HostLibrary library;
  std::string error;
  const std::vector<HostProgram> runs = build_host_runs(programs, variants, prefix, library, error);
  ASSERT_TRUE(error.empty()) << error;
  for (size_t r = 0; r < runs.size(); ++r) {
    const ir::Program& p = programs[r / variants.size()];
    const ir::HostBuffers got = library.run(runs[r], exact_inputs(p, 1), false, nullptr, true);
    ASSERT_EQ(testing::first_nonzero_output(p, got), "")
        << ir::to_string(p) << "variant " << variants[r % variants.size()].label();
  }
}

/// Empty batches, channels and grids (ATen accepts them; ops/grid_sampler_attributes.h): the
/// kernels of an empty domain get empty grids (the runtime skips them) and the rest write
/// zeros, grad_input where no grid point reaches it and grad_grid where no channel adds to it,
/// under the atomics, binned, taps and scanned lowerings alike; an empty tensor is bound as a
/// null pointer (HostTensor::data), so a kernel that reads one crashes.
TEST(HostRun, EmptyGridSamplersWriteZerosOrNothing) {
  std::vector<ir::Program> programs;
  for (const char* shape : {"input_size=0,3,4,5 output_size=3,2", "input_size=2,0,4,5 output_size=3,2",
                            "input_size=2,3,4,5 output_size=0,2", "input_size=2,3,4,5 output_size=3,0"}) {
    for (const char* mode : {"interpolation_mode=bilinear padding_mode=zeros",
                             "interpolation_mode=nearest padding_mode=reflection",
                             "interpolation_mode=bicubic padding_mode=border"}) {
      programs.push_back(ops::parse_specialization(std::string("grid_sampler_2d_backward dtype=f32 ") +
                                                   shape + " " + mode)
                             .build_program());
    }
  }
  for (const char* spec :
       {"grid_sampler_3d_backward dtype=bf16 input_size=1,0,2,3,4 output_size=2,2,2 "
        "interpolation_mode=bilinear padding_mode=border",
        "grid_sampler_3d_backward dtype=f64 input_size=1,2,2,3,4 output_size=2,0,2 "
        "interpolation_mode=nearest padding_mode=zeros"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  expect_zeros_written(programs,
                       {Variant(1), Variant::binned_gather(256), Variant::binned_taps(32),
                        Variant::scanned_gather(128)},
                       "e");
}

/// Every mHC op at B x S = 0 (an empty batch, which PyTorch allows): the per-token outputs are
/// empty and the token sums (mhc_pre_backward's dphi, dgamma, dbias, dalpha) are zero, in the
/// x_mix form (many tokens a batch) and the few-token form, with the split partials derived or
/// forced. Outputs that start as NaN bytes come back zero: the zeros are written, not found.
TEST(HostRun, EmptyMhcBatchesWriteZeroTokenSums) {
  std::vector<ir::Program> programs;
  for (const char* spec : {"mhc_pre batch=0 seq=64 n=4 dim=16 dtype=bf16",
                           "mhc_pre_backward batch=0 seq=4096 n=4 dim=16 dtype=bf16",
                           "mhc_pre_backward batch=3 seq=0 n=6 dim=8 dtype=f32 "
                           "with_grad_x_post=true",
                           "mhc_pre_backward batch=0 seq=1 n=4 dim=16 dtype=f64",
                           "mhc_post batch=0 seq=5 n=4 dim=16 dtype=bf16",
                           "mhc_post_backward batch=2 seq=0 n=4 dim=16 dtype=bf16",
                           "mhc_sinkhorn batch=0 seq=3 n=4 t_max=3",
                           "mhc_sinkhorn_backward batch=0 seq=3 n=4 t_max=3"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  for (const ir::Program& p : programs) {
    // The backward's token sums are not empty: their zeros are values the kernels write.
    if (p.name == "mhc_pre_backward") {
      EXPECT_GT(p.find_tensor("dphi")->num_elements(), 0);
    }
  }
  expect_zeros_written(programs, {Variant(0), Variant(1), Variant::split(1, 8)}, "m");
}

/// Nearest sampling, about one record per cell, with 4 or more channels whose copies are cheap:
/// the broadcast-innermost gather (sparse_channels_last_min, the default since branch gridnear)
/// sums the same records in the same order as the planar gather, so at every block size and
/// with the bound off (planar) the bits are the atomics lowering's (record order on the host),
/// within rounding of the interpreter; uniform grids and grids far outside (border: huge
/// buckets, chunked walks).
TEST(HostRun, SparseChannelsLastGathersMatchThePlanarGatherBitForBit) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,4,6,5 output_size=5,6 "
        "interpolation_mode=nearest padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=bf16 input_size=1,8,7,4 output_size=6,5 "
        "interpolation_mode=nearest padding_mode=border align_corners=true",
        "grid_sampler_2d_backward dtype=f64 input_size=2,16,3,6 output_size=3,6 "
        "interpolation_mode=nearest padding_mode=reflection align_corners=false",
        "grid_sampler_3d_backward dtype=f32 input_size=1,16,3,4,5 output_size=3,4,5 "
        "interpolation_mode=nearest padding_mode=zeros align_corners=false",
        // Planar by default: 8 f32 channels (32-byte rows, plain copies), 3 channels.
        "grid_sampler_2d_backward dtype=f32 input_size=2,8,6,5 output_size=5,6 "
        "interpolation_mode=nearest padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=f16 input_size=1,3,6,5 output_size=5,6 "
        "interpolation_mode=nearest padding_mode=zeros align_corners=false"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  ClaimSlotTensors claims;
  for (size_t i = 0; i < programs.size(); ++i) {
    EXPECT_EQ(lower_scatter_to_binned_gather(simplify(programs[i]), &claims, {})
                  .find_tensor("grad_input_bin_gathered") != nullptr,
              i < 4)
        << i;
  }
  const std::vector<Variant> variants = {
      Variant(1),
      Variant::binned_sparse(256, 0),
      Variant::binned_sparse(256, 4),
      Variant::binned_sparse(32, 4),
      Variant::binned_sparse(1024, 4),
      Variant::binned_sparse(64, 3)};
  expect_host_runs_match(programs, variants, 1e-2);
  expect_host_runs_match(programs, variants, 1e-2, rounding_inputs);
}

/// Channels wide enough for the default tiled transpositions (tiled_transpose.h): both copies
/// of the broadcast-innermost gather (grad_output to N,H,W,C, the gathered values back to
/// N,C,H,W) are tiled, with full and partial 32 x 32 tiles, and give the plain copies' bits at
/// every block size (one warp per block up to the shared-memory cap of f64 tiles).
TEST(HostRun, TiledTranspositionsOfTheBinnedGatherCopyTheSameBits) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,40,5,7 output_size=9,8 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=f64 input_size=1,33,6,6 output_size=10,9 "
        "interpolation_mode=bicubic padding_mode=border align_corners=true",
        "grid_sampler_3d_backward dtype=bf16 input_size=1,16,2,3,4 output_size=4,4,3 "
        "interpolation_mode=bilinear padding_mode=reflection align_corners=false"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  for (const ir::Program& program : programs) {
    const std::vector<CompiledKernel> kernels = compile_kernels(
        program, Variant::binned_tiled(256, kDefaultTiledTransposeMin), "probe");
    int tiled = 0;
    for (const CompiledKernel& k : kernels) {
      tiled += k.source.find("Tiled transposition") != std::string::npos;
    }
    EXPECT_GE(tiled, 2) << program.name;  // 3-d bf16: grad_grid's input rows (32 bytes) too
  }
  expect_host_runs_match(programs,
                         {Variant::binned_gather(256), Variant::binned_tiled(256, 16),
                          Variant::binned_tiled(32, 16), Variant::binned_tiled(1024, 16),
                          Variant::binned_tiled(96, 1)},
                         1e-2, rounding_inputs);
}

/// The tiled copy back of the broadcast-innermost gather fused into the gather
/// (transposed_store.h): each block stages its values in shared memory and writes grad_input
/// transposed, blocks that straddle a batch included. Bit for bit the two kernels' result at
/// every block size that qualifies, on exact inputs and on sums that round.
TEST(HostRun, TransposedStoresOfTheBinnedGatherWriteTheCopysBits) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {// 32 channels, 5 x 4 cells per batch: blocks of 256 threads hold 8 cells (straddling).
        "grid_sampler_2d_backward dtype=f32 input_size=2,32,5,4 output_size=7,6 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=f64 input_size=1,64,4,4 output_size=5,6 "
        "interpolation_mode=bicubic padding_mode=border align_corners=true",
        "grid_sampler_2d_backward dtype=bf16 input_size=2,32,4,8 output_size=6,9 "
        "interpolation_mode=bilinear padding_mode=reflection align_corners=false",
        "grid_sampler_3d_backward dtype=f32 input_size=1,16,2,4,4 output_size=3,4,5 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=true"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  // Which (program, block size) pairs fuse: the gather's linear points fill whole blocks.
  const std::vector<std::pair<size_t, int>> fused_at = {{0, 32}, {0, 256}, {1, 64}, {1, 256},
                                                        {2, 32}, {3, 32}};
  for (const auto& [i, block] : fused_at) {
    const std::vector<CompiledKernel> kernels =
        compile_kernels(programs[i], Variant::binned_fused(block), "probe");
    int fused = 0, tiled = 0;
    for (const CompiledKernel& k : kernels) {
      fused += k.source.find("Transposed store") != std::string::npos;
      tiled += k.source.find("Tiled transposition") != std::string::npos;
    }
    EXPECT_EQ(fused, 1) << programs[i].name << " " << i << " at " << block;
    EXPECT_GE(tiled, 1) << programs[i].name << " " << i << " at " << block;  // grad_output's
  }
  const std::vector<Variant> variants = {
      Variant::binned_tiled(256, 16), Variant::binned_fused(32), Variant::binned_fused(64),
      Variant::binned_fused(128),     Variant::binned_fused(256)};
  expect_host_runs_match(programs, variants, 1e-2);
  expect_host_runs_match(programs, variants, 1e-2, rounding_inputs);
}

/// The same with vector groups (4 f32 channels per thread; 32,768 groups, the fewest that
/// derive_grid vectorizes): each group staged element by element.
TEST(HostRun, TransposedStoresOfVectorGroupsWriteTheCopysBits) {
  const ir::Program program =
      ops::parse_specialization(
          "grid_sampler_2d_backward dtype=f32 input_size=1,32,64,64 output_size=64,64 "
          "interpolation_mode=bilinear padding_mode=zeros align_corners=false")
          .build_program();
  const std::vector<CompiledKernel> kernels =
      compile_kernels(program, Variant::binned_fused(256), "probe");
  int fused = 0;
  for (const CompiledKernel& k : kernels) {
    if (k.source.find("Transposed store") == std::string::npos) continue;
    ++fused;
    EXPECT_NE(k.source.find("staged[1056]"), std::string::npos) << k.source;  // 32 x 33
    EXPECT_NE(k.source.find("Each thread computes 4 consecutive points of c"), std::string::npos)
        << k.source;
  }
  EXPECT_EQ(fused, 1);
  expect_host_runs_match({program}, {Variant::binned_tiled(256, 16), Variant::binned_fused(256)},
                         1e-2);
}

/// grad_grid laid out for warp lanes (gathered_reduction_lanes.h): channels innermost, read
/// through channels-last copies (the binned gather's grad_output copy reused), 32 lanes over the
/// channels. Within rounding of the interpreter, and bitwise the same at every block size and
/// with the copies tiled or not (its order does not depend on the launch), on exact inputs and
/// on sums that round.
TEST(HostRun, GatheredReductionsOnWarpLanesAreIndependentOfTheLaunch) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,40,5,7 output_size=9,8 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=bf16 input_size=1,33,6,6 output_size=10,9 "
        "interpolation_mode=bicubic padding_mode=border align_corners=true",
        "grid_sampler_2d_backward dtype=f64 input_size=2,36,4,5 output_size=3,4 "
        "interpolation_mode=bilinear padding_mode=reflection align_corners=false",
        "grid_sampler_3d_backward dtype=f32 input_size=1,32,2,3,4 output_size=4,4,3 "
        "interpolation_mode=bilinear padding_mode=reflection align_corners=false "
        "output_mask=0,1"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  for (const ir::Program& program : programs) {
    const std::vector<CompiledKernel> kernels =
        compile_kernels(program, Variant::binned_lanes(256, 32), "probe");
    bool lanes = false;
    for (const CompiledKernel& k : kernels) {
      lanes |= k.source.find("kernel 'grad_grid'") != std::string::npos &&
               k.source.find("__shfl_xor_sync") != std::string::npos &&
               k.source.find("_lanes[") != std::string::npos;
    }
    EXPECT_TRUE(lanes) << program.name;
  }
  expect_host_runs_match(programs,
                         {Variant::binned_lanes(256, 32), Variant::binned_lanes(64, 16, 16),
                          Variant::binned_lanes(1024, 32)},
                         2e-2);
  expect_host_runs_match(programs,
                         {Variant::binned_lanes(256, 32), Variant::binned_lanes(32, 32),
                          Variant::binned_lanes(1024, 32, 16), Variant::binned_lanes(96, 32, 1)},
                         2e-2, rounding_inputs);
}

/// The same with 16 or 8 lanes per point (several points per warp; ADJOINT_TUNE_GATHERED_LANE_
/// WIDTH): within rounding of the interpreter and bitwise the same at every block size. The
/// bf16 program's 90 points do not fill warps of 8-lane groups: it keeps 32 lanes there.
TEST(HostRun, GatheredReductionsOnSubWarpLanesAreIndependentOfTheLaunch) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,40,5,7 output_size=9,8 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=bf16 input_size=1,33,6,6 output_size=10,9 "
        "interpolation_mode=bicubic padding_mode=border align_corners=true",
        "grid_sampler_2d_backward dtype=f64 input_size=2,36,4,5 output_size=3,4 "
        "interpolation_mode=bilinear padding_mode=reflection align_corners=false",
        "grid_sampler_3d_backward dtype=f32 input_size=1,32,2,3,4 output_size=4,4,3 "
        "interpolation_mode=bilinear padding_mode=reflection align_corners=false "
        "output_mask=0,1"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  for (int width : {16, 8}) {
    for (size_t i = 0; i < programs.size(); ++i) {
      const std::vector<CompiledKernel> kernels =
          compile_kernels(programs[i], Variant::binned_lane_width(256, width), "probe");
      bool sub_warp = false;
      for (const CompiledKernel& k : kernels) {
        sub_warp |= k.source.find("kernel 'grad_grid'") != std::string::npos &&
                    k.source.find("each group of " + std::to_string(width) + " lanes") !=
                        std::string::npos &&
                    k.source.find(", 0, " + std::to_string(width) + ");") != std::string::npos;
      }
      EXPECT_EQ(sub_warp, !(width == 8 && i == 1)) << programs[i].name << " " << i << " " << width;
    }
    expect_host_runs_match(programs,
                           {Variant::binned_lane_width(256, width),
                            Variant::binned_lane_width(64, width),
                            Variant::binned_lane_width(1024, width),
                            Variant::binned_lane_width(96, width)},
                           2e-2);
    expect_host_runs_match(programs,
                           {Variant::binned_lane_width(256, width),
                            Variant::binned_lane_width(32, width)},
                           2e-2, rounding_inputs);
  }
}

/// Lane axes shorter than a warp (ADJOINT_TUNE_GATHERED_LANES=16, the default): 4 lanes per
/// point; with ADJOINT_TUNE_GATHERED_WHOLE_AXIS=8 also grad_grid's odd coordinate axis (3-d: 3)
/// computed whole by each lane group, one accumulator per coordinate. Within rounding of the
/// interpreter, and bitwise the same at every block size and with the whole-axis groups on or
/// off (each coordinate's sum keeps its order), on exact inputs and on sums that round. Points
/// that do not fill warps of 4-lane groups take 8 lanes where they fill those (3-d at 7 x 5 x 4:
/// 420 points), else one thread per point (2-d bicubic's 90 points, 3-d at 7 x 5 x 3: 315), never
/// 32 lanes over 16 channels.
TEST(HostRun, ShortLaneAxesTakeFourLanesAndWholeCoordinateGroups) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_3d_backward dtype=f32 input_size=1,16,2,3,4 output_size=4,4,3 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_3d_backward dtype=bf16 input_size=2,16,3,3,3 output_size=4,4,4 "
        "interpolation_mode=bilinear padding_mode=border align_corners=true",
        "grid_sampler_3d_backward dtype=f64 input_size=1,20,3,4,4 output_size=4,2,4 "
        "interpolation_mode=bilinear padding_mode=reflection align_corners=false "
        "output_mask=0,1",
        "grid_sampler_2d_backward dtype=f32 input_size=2,16,5,7 output_size=9,8 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=bf16 input_size=1,16,6,6 output_size=10,9 "
        "interpolation_mode=bicubic padding_mode=border align_corners=true",
        "grid_sampler_3d_backward dtype=f32 input_size=1,16,4,5,6 output_size=7,5,3 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_3d_backward dtype=f32 input_size=1,16,4,5,6 output_size=7,5,4 "
        "interpolation_mode=bilinear padding_mode=border align_corners=false"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  for (size_t i = 0; i < programs.size(); ++i) {
    const std::vector<CompiledKernel> kernels =
        compile_kernels(programs[i], Variant::binned_short_lanes(256), "probe");
    for (const CompiledKernel& k : kernels) {
      if (k.source.find("kernel 'grad_grid'") == std::string::npos) continue;
      EXPECT_EQ(k.source.find("for (int c = 0; c < 16; ++c)") != std::string::npos,
                i == 4 || i == 5)
          << k.source;
      EXPECT_EQ(k.source.find("each group of 8 lanes") != std::string::npos, i == 6) << k.source;
      EXPECT_EQ(k.source.find("__shfl_xor_sync") == std::string::npos, i == 4 || i == 5);
    }
  }
  for (size_t i = 0; i < 4; ++i) {
    for (int64_t whole_axis : {8, 0}) {
      const std::vector<CompiledKernel> kernels =
          compile_kernels(programs[i], Variant::binned_short_lanes(256, whole_axis), "probe");
      bool four = false, whole = false;
      for (const CompiledKernel& k : kernels) {
        if (k.source.find("kernel 'grad_grid'") == std::string::npos) continue;
        four = k.source.find("each group of 4 lanes") != std::string::npos &&
               k.source.find(", 0, 4);") != std::string::npos;
        whole = k.source.find("Each thread computes 3 consecutive points of axis") !=
                std::string::npos;
      }
      EXPECT_TRUE(four) << programs[i].name << " " << i;
      EXPECT_EQ(whole, i < 3 && whole_axis == 8) << programs[i].name << " " << i;
    }
  }
  expect_host_runs_match(programs,
                         {Variant::binned_short_lanes(256), Variant::binned_short_lanes(64),
                          Variant::binned_short_lanes(1024), Variant::binned_short_lanes(96),
                          Variant::binned_short_lanes(256, 8), Variant::binned_short_lanes(64, 8)},
                         2e-2);
  expect_host_runs_match(programs,
                         {Variant::binned_short_lanes(256), Variant::binned_short_lanes(32),
                          Variant::binned_short_lanes(128, 8)},
                         2e-2, rounding_inputs);
}

TEST(HostRun, BinnedGatherScanCrossesSeveralLevels) {
  // 2 x 40 x 30 = 2400 cells: three scan levels (2400 -> 75 -> 3), by digits (the count padded
  // to 2400 already a multiple of 32: constant chunk sums at the first level, guarded ones at
  // the second) and chained. 3 x 37 x 29 = 3219 cells (padded to 3232 -> 101 -> 4), and
  // 1 x 33 x 32 = 1056 (-> 33 -> 2: a top level of 2 entries), 1 x 4 x 8 = 32 (one level),
  // and 200 x 201 = 40200 (padded to 40224 -> 1257 -> 40 -> 2: three levels, so the upper
  // levels' digits go through the coarse scan of level 1).
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,1,40,30 output_size=9,8 "
        "interpolation_mode=nearest padding_mode=border align_corners=false",
        "grid_sampler_2d_backward dtype=f32 input_size=3,2,37,29 output_size=11,7 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=f32 input_size=1,1,33,32 output_size=10,12 "
        "interpolation_mode=nearest padding_mode=reflection align_corners=true",
        "grid_sampler_2d_backward dtype=f32 input_size=1,1,4,8 output_size=5,6 "
        "interpolation_mode=nearest padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=f32 input_size=1,2,200,201 output_size=9,13 "
        "interpolation_mode=bilinear padding_mode=border align_corners=true"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  expect_host_runs_match(programs,
                         {Variant(1), Variant::binned_gather(128), Variant::binned_gather(64),
                          Variant::binned_lane_scan(64, 1), Variant::binned_lane_scan(256, 32),
                          Variant::binned_digits_scan(64), Variant::binned_chained_scan(64),
                          Variant::binned_claimed_fill(64)},
                         1e-5, rounding_inputs);
  // By digits: one kernel per level of chunk sums and one for the offsets.
  ClaimSlotTensors claims;
  BinnedGatherOptions digits;
  digits.scan_lanes = false;
  ir::Program lowered = lower_scatter_to_binned_gather(simplify(programs[0]), &claims, digits);
  std::vector<std::string> scans;
  for (const ir::Kernel& k : lowered.kernels) {
    if (k.name.find("_bin_scan") != std::string::npos) scans.push_back(k.name);
  }
  EXPECT_EQ(scans, (std::vector<std::string>{"grad_input_bin_scan0_partial",
                                             "grad_input_bin_scan1_partial",
                                             "grad_input_bin_scan0"}));
  ir::Program coarse = lower_scatter_to_binned_gather(simplify(programs[4]), &claims, digits);
  scans.clear();
  for (const ir::Kernel& k : coarse.kernels) {
    if (k.name.find("_bin_scan") != std::string::npos) scans.push_back(k.name);
  }
  EXPECT_EQ(scans, (std::vector<std::string>{
                       "grad_input_bin_scan0_partial", "grad_input_bin_scan1_partial",
                       "grad_input_bin_scan2_partial", "grad_input_bin_scan1",
                       "grad_input_bin_scan0"}));
}

/// The scan on warp lanes (BinnedGatherOptions::scan_lanes, the default): the offsets
/// themselves, read back from the host runs, are bit for bit the exclusive scan of the final
/// counts and the scan by digits' and the chained scan's (on every slot and the total), at one
/// to three levels (40 x 30 x 2 = 2400 cells, a multiple of 32; 3219 and 40200, padded; 32
/// cells, one level, and a warp of zeros; the 3-d taps' keys), for tops of 1, 8 and
/// 32 loads per lane and blocks of 64 to 256; the outputs bit for bit alike, within rounding of
/// the interpreter. The emitter writes the lane scan (__shfl_up_sync) into the offsets' kernel
/// and a kernel per level of chunk sums before it.
TEST(HostRun, BinnedGatherLaneScanGivesTheOffsetsOfTheScanByDigits) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,1,40,30 output_size=9,8 "
        "interpolation_mode=nearest padding_mode=border align_corners=false",
        "grid_sampler_2d_backward dtype=f32 input_size=3,2,37,29 output_size=11,7 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=f32 input_size=1,1,4,8 output_size=5,6 "
        "interpolation_mode=nearest padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=f32 input_size=1,2,200,201 output_size=9,13 "
        "interpolation_mode=bilinear padding_mode=border align_corners=true",
        "grid_sampler_3d_backward dtype=f32 input_size=1,2,9,10,11 output_size=4,5,6 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  const std::vector<Variant> variants = {
      Variant::binned_digits_scan(64), Variant::binned_chained_scan(64),
      Variant::binned_lane_scan(128, 1), Variant::binned_lane_scan(64, 8),
      Variant::binned_lane_scan(256, 32)};
  expect_host_runs_match(programs, variants, 1e-5, rounding_inputs);
  HostLibrary library;
  std::string error;
  const std::vector<HostProgram> runs =
      build_host_runs(programs, variants, "scan", library, error);
  ASSERT_TRUE(error.empty()) << error;
  for (size_t i = 0; i < programs.size(); ++i) {
    const ir::HostBuffers inputs = rounding_inputs(programs[i], static_cast<unsigned>(i + 1));
    std::optional<std::vector<double>> expected;
    for (size_t v = 0; v < variants.size(); ++v) {
      const HostProgram& run = runs[i * variants.size() + v];
      ir::HostBuffers temporaries;
      library.run(run, inputs, false, &temporaries);
      const std::vector<double>& count = temporaries.at("grad_input_bin_count");
      const std::vector<double>& offset = temporaries.at("grad_input_bin_scan0");
      // Every offset is the exclusive scan of this run's counts (the chained scan's unpadded,
      // the digits' padded to 32, the lanes' to 32 past one more zero) ...
      std::vector<double> own(1, 0.0);
      for (double c : count) own.push_back(own.back() + c);
      ASSERT_LE(offset.size(), own.size()) << run.label;
      for (size_t e = 0; e < offset.size(); ++e) {
        ASSERT_EQ(offset[e], own[e]) << run.label << " entry " << e;
      }
      // ... and the first run's (by digits) on every entry both have: every slot, the total.
      if (!expected) expected = offset;
      const size_t n = std::min(offset.size(), expected->size());
      for (size_t e = 0; e < n; ++e) {
        ASSERT_EQ(offset[e], (*expected)[e]) << run.label << " entry " << e;
      }
      bool shuffles = false;
      for (const CompiledKernel& k : run.kernels) {
        if (k.source.find("kernel 'grad_input_bin_scan0'") != std::string::npos)
          shuffles = k.source.find("__shfl_up_sync") != std::string::npos;
      }
      EXPECT_EQ(shuffles, variants[v].scan_digits && variants[v].scan_lanes) << run.label;
    }
  }
  // Levels until 32 x top entries, with the default taps in the gather (keys 1 x 201 x 202,
  // padded: 40608 counts, and a warp of zeros: 40640 entries): -> 1269 -> 40 -> 2 at a top of
  // 1 load per lane, -> 1269 -> 40 at 8 and at 32 (the default: 1269 > 1024), -> 1269 at 64.
  const std::vector<std::pair<int64_t, size_t>> levels = {{1, 3}, {8, 2}, {32, 2}, {64, 1}};
  for (const auto& [top, expected] : levels) {
    ClaimSlotTensors claims;
    BinnedGatherOptions options;
    options.scan_top_loads = top;
    LaneScanKernels lane_scans;
    ir::Program lowered = lower_scatter_to_binned_gather(
        simplify(programs[3]), &claims, options, nullptr, nullptr, nullptr, nullptr, nullptr,
        &lane_scans);
    std::vector<std::string> scans;
    for (const ir::Kernel& k : lowered.kernels) {
      if (k.name.find("_bin_scan") != std::string::npos) scans.push_back(k.name);
    }
    ASSERT_EQ(scans.size(), expected + 1) << top;
    EXPECT_EQ(scans.back(), "grad_input_bin_scan0");
    EXPECT_EQ(lane_scans, (LaneScanKernels{"grad_input_bin_scan0"}));
    EXPECT_EQ(lowered.find_tensor("grad_input_bin_count")->shape, (std::vector<int64_t>{40640}));
    EXPECT_EQ(lowered.find_tensor("grad_input_bin_scan0")->shape, (std::vector<int64_t>{40640}));
  }
}

/// grid_sampler inputs whose every grid coordinate is `coordinate`: every point of a batch
/// samples the same place, so each batch has a few huge buckets (a tap's cell holds every
/// point). grad_output and input are k/16 (exact sums) or full mantissas (sums that round).
template <bool kExact>
ir::HostBuffers one_cell_inputs(const ir::Program& p, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-16, 16);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  ir::HostBuffers in;
  for (const ir::Tensor& t : p.inputs) {
    std::vector<double>& v = in[t->name];
    for (int64_t i = 0; i < t->storage_elements(); ++i) {
      if (t->name == "grid") v.push_back(5.0 / 16.0);
      else v.push_back(kExact ? small(rng) / 16.0 : value(rng));
    }
  }
  return in;
}

/// Buckets of hundreds to thousands of records (every point of a batch in the same 4, 8 or 16
/// cells): the chunked walk. On exact sums every lowering gives the same bits (the first run
/// within bf16 rounding of the interpreter, the others equal to it bit for bit). On
/// sums that round, the chunked walk at every block size and both layouts gives the same bits
/// (its order depends on the data only), within rounding of the interpreter; without chunking
/// the gather equals the atomics lowering (record order) bit for bit.
TEST(HostRun, BinnedGatherOfHugeBucketsIsChunkedAndIndependentOfTheLaunch) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,5,6,7 output_size=24,40 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=true",
        "grid_sampler_2d_backward dtype=bf16 input_size=1,9,4,5 output_size=16,20 "
        "interpolation_mode=bicubic padding_mode=border align_corners=true",
        "grid_sampler_3d_backward dtype=f64 input_size=1,2,3,4,5 output_size=6,8,10 "
        "interpolation_mode=bilinear padding_mode=reflection align_corners=true"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  // The chunked walk is what runs: a chunk-sum kernel per binned scatter.
  for (const ir::Program& program : programs) {
    ClaimSlotTensors claims;
    BinnedGatherOptions options;
    ir::Program lowered = lower_scatter_to_binned_gather(simplify(program), &claims, options);
    bool chunked = false;
    for (const ir::Kernel& k : lowered.kernels) {
      chunked |= k.name.find("_chunk_sums") != std::string::npos;
    }
    EXPECT_TRUE(chunked) << ir::to_string(lowered);
  }
  expect_host_runs_match(programs,
                         {Variant(1), Variant::binned_chunked(256, 64),
                          Variant::binned_chunked(32, 16, 1), Variant::binned_chunked(1024, 0)},
                         1e-2, one_cell_inputs<true>);  // bf16 rounds grad_grid
  expect_host_runs_match(programs,
                         {Variant::binned_chunked(256, 64), Variant::binned_chunked(32, 64),
                          Variant::binned_chunked(1024, 64), Variant::binned_chunked(64, 64, 1)},
                         2e-2, one_cell_inputs<false>);
  expect_host_runs_match(programs,
                         {Variant(1), Variant::binned_chunked(256, 0),
                          Variant::binned_chunked(32, 0, 1)},
                         2e-2, one_cell_inputs<false>);
}

/// Taps in the gather (binned_taps.h): one record per point, binned by its base cell, and a
/// bucket walk per tap. Its order (taps outer, each bucket in record order, chunked by fixed
/// positions) is not the atomics lowering's, so the first run (taps, block 256) is held to the
/// interpreter within rounding and every other launch and layout to its bits: uniform grids in
/// [-8, 8] (every padding mode, 2-d and 3-d, every tap shape: 4, 16 with a float base, 8) and
/// the one-cell grids whose buckets hold every point of a batch (chunk sums per tap).
TEST(HostRun, BinnedGatherWithTapsInTheGatherIsIndependentOfTheLaunch) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,3,5,7 output_size=4,6 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=f64 input_size=1,2,4,4 output_size=5,3 "
        "interpolation_mode=bicubic padding_mode=reflection align_corners=true",
        "grid_sampler_2d_backward dtype=f32 input_size=2,3,6,5 output_size=5,4 "
        "interpolation_mode=bicubic padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=f16 input_size=1,3,6,5 output_size=7,2 "
        "interpolation_mode=bilinear padding_mode=border align_corners=true output_mask=1,0",
        "grid_sampler_3d_backward dtype=f32 input_size=1,2,3,4,5 output_size=3,2,4 "
        "interpolation_mode=bilinear padding_mode=reflection align_corners=false",
        "grid_sampler_2d_backward dtype=bf16 input_size=2,9,4,3 output_size=3,5 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  // A condition that is more than the index's bounds (tap 1 is skipped): kept per slot and
  // tap (<T>_bin_valid). out[c, n, floor(4 x[n, i]) + tap - 1] += v[c, n, i] * (x[n, i] - tap).
  {
    ir::ProgramBuilder b("taps_condition");
    ir::Tensor x = b.input("x", DType::kF32, {3, 10});
    ir::Tensor v = b.input("v", DType::kF32, {2, 3, 10});
    ir::Tensor out = b.output("out", DType::kF32, {2, 3, 8});
    Var c("c"), n("n"), i("i"), tap("tap");
    Expr base = ir::cast(DType::kI64,
                         ir::floor(ir::load(x, {n, i}) * ir::constant(DType::kF32, 4.0)));
    Expr index = base + (Expr(tap) - Expr(int64_t{1}));
    Expr condition = index >= Expr(int64_t{0}) && index < Expr(int64_t{8}) &&
                     Expr(tap) != Expr(int64_t{1});
    Expr value = ir::load(v, {c, n, i}) *
                 (ir::load(x, {n, i}) - ir::cast(DType::kF32, Expr(tap)));
    b.kernel("scatter", {ir::scatter_add(out, {Expr(c), Expr(n), index}, value,
                                         ir::over({c, n, i, tap}, {2, 3, 10, 3}), DType::kF32,
                                         condition)});
    programs.push_back(std::move(b).build());
    ClaimSlotTensors claims;
    BinnedGatherOptions options;
    options.taps_walks_max = 6;
    ir::Program lowered =
        lower_scatter_to_binned_gather(simplify(programs.back()), &claims, options);
    ir::Tensor valid = lowered.find_tensor("out_bin_valid");
    ASSERT_TRUE(valid) << ir::to_string(lowered);
    EXPECT_EQ(valid->shape, (std::vector<int64_t>{30, 3}));
  }
  // Every program's scatter but bicubic reflection's takes the taps (the gather walks a bucket
  // per tap); reflection folds each bicubic tap's index on its own, which is no shift of a
  // base (border's clamp is: BinnedGatherOfClampedTapsWalksKeyRangesAtTheEdges).
  for (const ir::Program& program : programs) {
    if (program.attributes.count("interpolation_mode") &&
        program.attributes.at("interpolation_mode") == "bicubic" &&
        program.attributes.at("padding_mode") == "reflection")
      continue;
    ClaimSlotTensors claims;
    BinnedGatherOptions options;
    options.taps_walks_max = 1 << 20;
    ir::Program lowered = lower_scatter_to_binned_gather(simplify(program), &claims, options);
    bool taps = false;
    for (const ir::Tensor& t : lowered.temporaries) {
      taps |= t->name.find("_bin_factor") != std::string::npos && t->rank() == 2;
    }
    EXPECT_TRUE(taps) << ir::to_string(lowered);
  }
  // The walks' sums added as they are computed (EmitOptions::progressive_group_sums, the
  // default) or all at the end: the same adds in the same order, the same bits.
  Variant sums_at_end = Variant::binned_taps(256, 64, 1);
  sums_at_end.progressive_sums = false;
  const std::vector<Variant> variants = {
      Variant::binned_taps(256), Variant::binned_taps(32), Variant::binned_taps(1024),
      Variant::binned_taps(256, 64, 1), Variant::binned_taps(96, 64, 1), sums_at_end};
  expect_host_runs_match(programs, variants, 1e-2);
  expect_host_runs_match(programs, variants, 2e-2, rounding_inputs);
  std::vector<ir::Program> huge;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,5,6,7 output_size=24,40 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=true",
        "grid_sampler_2d_backward dtype=bf16 input_size=1,9,4,5 output_size=16,20 "
        "interpolation_mode=bicubic padding_mode=border align_corners=true",
        "grid_sampler_3d_backward dtype=f64 input_size=1,2,3,4,5 output_size=6,8,10 "
        "interpolation_mode=bilinear padding_mode=reflection align_corners=true"}) {
    huge.push_back(ops::parse_specialization(spec).build_program());
  }
  const std::vector<Variant> chunked = {Variant::binned_taps(256), Variant::binned_taps(32),
                                        Variant::binned_taps(1024, 64, 1),
                                        Variant::binned_taps(64, 64, 1)};
  expect_host_runs_match(huge, chunked, 1e-2, one_cell_inputs<true>);
  expect_host_runs_match(huge, chunked, 2e-2, one_cell_inputs<false>);
  // Within the bound only: 4 taps x 9 channels keep their taps as records at a bound of 35.
  ClaimSlotTensors claims;
  BinnedGatherOptions options;
  options.taps_walks_max = 35;
  ir::Program lowered = lower_scatter_to_binned_gather(simplify(programs[5]), &claims, options);
  for (const ir::Tensor& t : lowered.temporaries) {
    if (t->name.find("_bin_factor") != std::string::npos) {
      EXPECT_EQ(t->rank(), 1) << t->name;
    }
  }
}

/// grid_sampler inputs whose every grid coordinate is `kCoordinate` (k/16 values elsewhere):
/// far outside the input, every point of a batch clamps to one corner under border padding.
template <int kCoordinate>
ir::HostBuffers constant_grid_inputs(const ir::Program& p, unsigned seed) {
  ir::HostBuffers in = exact_inputs(p, seed);
  for (double& v : in.at("grid")) v = kCoordinate;
  return in;
}

/// grid_sampler inputs whose points sit on the right edge cell (x = 1: floor(ix) = W - 1 with
/// either align_corners) and far right of it (x = 3) in turn, all far below (y = 3): the x walks
/// of the high edge element span several keys of the row's high edge range [W - 1, end), so
/// their chunks are summed only through the high edge span's condition.
ir::HostBuffers high_edge_inputs(const ir::Program& p, unsigned seed) {
  ir::HostBuffers in = exact_inputs(p, seed);
  std::vector<double>& grid = in.at("grid");
  for (size_t i = 0; i + 1 < grid.size(); i += 2) {
    grid[i] = (i / 2) % 2 ? 3.0 : 1.0;
    grid[i + 1] = 3.0;
  }
  return in;
}

/// Clamped taps (binned_taps.h): bicubic under border padding clamps each tap's index to the
/// input, so its bases are keyed clamped to the taps' reach and an edge element walks, per
/// tap, a range of keys. The grids of exact_inputs reach +-8 (most points outside); the
/// constant grids far outside put a batch's every point in one corner bucket (walks that take
/// chunk sums, on the edge kernel's rows too), high_edge_inputs on the right edge and beyond
/// (chunks that only the high edge span's condition sums), one_cell_inputs in one bucket
/// inside; extents of 1, 2 and 3 are narrower than the taps' reach of 4. Within
/// rounding of the interpreter, and bit for bit across block sizes and both layouts at one
/// chunk size (the chunk is part of the order: chunks of 64, of 4 and none are three sets).
TEST(HostRun, BinnedGatherOfClampedTapsWalksKeyRangesAtTheEdges) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,3,5,7 output_size=4,6 "
        "interpolation_mode=bicubic padding_mode=border align_corners=false",
        "grid_sampler_2d_backward dtype=f64 input_size=1,2,1,6 output_size=3,5 "
        "interpolation_mode=bicubic padding_mode=border align_corners=true",
        "grid_sampler_2d_backward dtype=bf16 input_size=2,1,4,1 output_size=5,4 "
        "interpolation_mode=bicubic padding_mode=border align_corners=false",
        "grid_sampler_2d_backward dtype=f16 input_size=1,2,9,8 output_size=12,11 "
        "interpolation_mode=bicubic padding_mode=border align_corners=true output_mask=1,0",
        "grid_sampler_2d_backward dtype=f32 input_size=1,2,2,3 output_size=5,3 "
        "interpolation_mode=bicubic padding_mode=border align_corners=true"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  for (const ir::Program& program : programs) {
    ClaimSlotTensors claims;
    BinnedGatherOptions options;
    options.taps_walks_max = 1 << 20;
    ScheduleNotes notes;
    ir::Program lowered =
        lower_scatter_to_binned_gather(simplify(program), &claims, options, nullptr, &notes);
    bool taps = false;
    for (const ir::Tensor& t : lowered.temporaries) {
      taps |= t->name.find("_bin_factor") != std::string::npos && t->rank() == 2;
    }
    EXPECT_TRUE(taps) << ir::to_string(lowered);
    std::string dump;
    for (const auto& [kernel, note] : notes) dump += note + "\n";
    EXPECT_NE(dump.find("2 clamped index component(s)"), std::string::npos) << dump;
  }
  // The chunk size is part of the order (chunks of 64, of 4, none): each its own set.
  for (const std::vector<Variant>& variants :
       {std::vector<Variant>{Variant::binned_taps(256), Variant::binned_taps(32),
                             Variant::binned_taps(1024, 64, 1), Variant::binned_taps(64, 64, 1)},
        std::vector<Variant>{Variant::binned_taps(96, 4), Variant::binned_taps(256, 4, 1)},
        std::vector<Variant>{Variant::binned_taps(128, 0), Variant::binned_taps(32, 0, 1)}}) {
    expect_host_runs_match(programs, variants, 2e-2);
    expect_host_runs_match(programs, variants, 2e-2, constant_grid_inputs<3>);
    expect_host_runs_match(programs, variants, 2e-2, high_edge_inputs);
    if (variants.front().gather_chunk != 64) continue;
    expect_host_runs_match(programs, variants, 2e-2, rounding_inputs);
    expect_host_runs_match(programs, variants, 2e-2, constant_grid_inputs<-5>);
    expect_host_runs_match(programs, variants, 2e-2, one_cell_inputs<false>);
  }
}

/// Whole-axis groups (vector_groups.h): at 3 channels and at most 2 records per cell (bilinear
/// with taps in the gather) the broadcast-innermost binned gather (and its chunk sums) give
/// each thread a cell's 3 channels, one bucket walk for the three, where there are at least
/// 2^15 cells; bicubic's 16 records per walk keep one channel per thread. With the copy back
/// fused as direct stores each thread writes its cell's 3 channels to grad_input. The sums and
/// their order are those of one thread per channel: bit for bit the power-of-two kernels (one
/// channel per thread, the copy kernel) at several block sizes, aligned and misaligned, f32 and
/// bf16, uniform and one-cell grids.
TEST(HostRun, WholeAxisGroupsOfThreeChannelsSumLikeOneChannelPerThread) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,3,128,128 output_size=96,96 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=bf16 input_size=2,3,128,128 output_size=96,90 "
        "interpolation_mode=bilinear padding_mode=border align_corners=true",
        "grid_sampler_2d_backward dtype=f32 input_size=2,3,128,128 output_size=64,48 "
        "interpolation_mode=bicubic padding_mode=zeros align_corners=false"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  // The derived grids: the bilinear gathers take the channels whole, only with the knob on;
  // bicubic (16 records per walk) never.
  for (bool whole : {true, false}) {
    Variant v = Variant::binned_taps(256, 64, 2, BinnedGatherOptions{}.taps_walks_max);
    v.whole_axis_groups = whole;
    for (size_t i = 0; i < programs.size(); ++i) {
      bool gather_found = false;
      for (const CompiledKernel& k : compile_kernels(programs[i], v, whole ? "w" : "p")) {
        if (k.source.find("// compute grad_input_bin_gathered[") == std::string::npos) continue;
        gather_found = true;
        EXPECT_EQ(k.source.find("Each thread computes 3 consecutive points of c.") !=
                      std::string::npos,
                  whole && i < 2)
            << k.source;
      }
      EXPECT_TRUE(gather_found);
    }
  }
  Variant pow2 = Variant::binned_taps(256, 64, 2, BinnedGatherOptions{}.taps_walks_max);
  pow2.whole_axis_groups = false;
  pow2.transposed_store = true;  // nothing to fuse: the gather's groups are single channels
  // The copy back fused as direct stores (transposed_store.h): the gather writes grad_input.
  Variant direct = Variant::binned_taps(128, 64, 2, BinnedGatherOptions{}.taps_walks_max);
  direct.transposed_store = true;
  for (size_t i = 0; i < 2; ++i) {
    bool copied = false, stored = false;  // the copy kernel computes grad_input
    for (const CompiledKernel& k : compile_kernels(programs[i], direct, "d")) {
      copied |= k.source.find("// compute grad_input[") != std::string::npos;
      stored |= k.source.find("// Direct transposed store") != std::string::npos;
    }
    EXPECT_TRUE(stored);
    EXPECT_FALSE(copied);
  }
  Variant sums_at_end = direct;
  sums_at_end.progressive_sums = false;
  const std::vector<Variant> variants = {
      pow2, Variant::binned_taps(256, 64, 2, BinnedGatherOptions{}.taps_walks_max),
      Variant::binned_taps(96, 64, 2, BinnedGatherOptions{}.taps_walks_max), direct,
      sums_at_end};
  expect_host_runs_match(programs, variants, 2e-2);
  expect_host_runs_match(programs, {variants[0], variants[1]}, 2e-2, one_cell_inputs<true>);
}

/// Bicubic at 3 channels with its taps in the gather (the wider bound, BinnedGatherOptions::
/// taps_walks_wide_max: 48 walks per cell) and the cell's 3 channels per thread (whole-axis
/// groups: one record per cell): 48 walks added as they are computed (progressive_group_sums)
/// give the bits of the sums added at the end, at two block sizes, f32 and bf16, inputs whose
/// sums round and one-cell grids, and the interpreter's values within rounding.
TEST(HostRun, BicubicTapsInTheGatherOfThreeChannelsAddTheirWalksAsTheyGo) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,3,128,128 output_size=128,128 "
        "interpolation_mode=bicubic padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=bf16 input_size=2,3,128,128 output_size=128,128 "
        "interpolation_mode=bicubic padding_mode=zeros align_corners=true"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  Variant progressive = Variant::binned_taps(256, 64, 2, 48);
  progressive.transposed_store = true;
  bool grouped = false, partials = false;
  for (const CompiledKernel& k : compile_kernels(programs[0], progressive, "g")) {
    if (k.source.find("// compute grad_input_bin_gathered[") == std::string::npos) continue;
    grouped = k.source.find("Each thread computes 3 consecutive points of c.") != std::string::npos;
    partials = k.source.find("float partial_46[3];") != std::string::npos;  // 47 adds of 48 walks
  }
  EXPECT_TRUE(grouped);
  EXPECT_TRUE(partials);
  Variant at_end = progressive;
  at_end.progressive_sums = false;
  Variant small_blocks = Variant::binned_taps(96, 64, 2, 48);
  small_blocks.transposed_store = true;
  // Inputs whose sums round (an add in another order would change bits), and one-cell grids.
  expect_host_runs_match(programs, {progressive, at_end, small_blocks}, 2e-2, rounding_inputs);
  expect_host_runs_match(programs, {progressive, at_end}, 2e-2, one_cell_inputs<true>);
}

/// Cache hints and unroll pragmas change no bit (docs/results/h100-2026-11-27-gridknobs): whole
/// grid_sampler programs from lower() at shapes large enough for vector groups, with streaming
/// span loads in the binned walks whose records share reads (LowerOptions::
/// binned_reread_streaming true, before), every span load plain (streaming_loads false,
/// ADJOINT_TUNE_STREAMING=2), the partial
/// unroll (4), grad_grid reading the planar input (gathered_rows_min 0) and doing so only where
/// the grid has fewer points than the input has rows (gathered_rows_skip_sparse), each run on
/// the host against the default's run bit for bit. The scoped knob changes only the factors, chunk sums
/// and gather of bilinear and bicubic (their taps' records read one grad_output row), never the
/// source coordinates, and nothing at nearest (one record per point).
TEST(HostRun, GridSamplerCacheHintAndUnrollKnobsKeepTheBits) {
  const std::vector<std::string> specs = {
      "grid_sampler_2d_backward dtype=f32 input_size=2,3,128,128 output_size=128,128 "
      "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
      "grid_sampler_2d_backward dtype=bf16 input_size=1,32,64,64 output_size=64,64 "
      "interpolation_mode=bilinear padding_mode=border align_corners=false",
      "grid_sampler_2d_backward dtype=f32 input_size=1,32,64,64 output_size=48,48 "
      "interpolation_mode=bicubic padding_mode=zeros align_corners=false",
      "grid_sampler_2d_backward dtype=f32 input_size=1,32,64,64 output_size=64,64 "
      "interpolation_mode=nearest padding_mode=zeros align_corners=false",
      // Down-sampling: 2 x 40 x 40 points read 128 x 128 rows of 3 channels.
      "grid_sampler_2d_backward dtype=f32 input_size=1,3,128,128 output_size=40,40 "
      "interpolation_mode=bilinear padding_mode=zeros align_corners=false"};
  std::vector<std::pair<std::string, LowerOptions>> settings(6);
  settings[0].first = "default";
  settings[1].first = "reread1";
  settings[1].second.binned_reread_streaming = true;
  settings[2].first = "stream2";
  settings[2].second.streaming_loads = false;
  settings[3].first = "unroll4";
  settings[3].second.partial_unroll = 4;
  settings[4].first = "rows0";
  settings[4].second.gathered_rows_min = 0;
  settings[5].first = "rows_sparse";
  settings[5].second.gathered_rows_skip_sparse = true;
  auto rename = [](CompiledKernel& k, const std::string& entry) {
    const size_t at = k.source.find(k.entry + "(");
    ASSERT_NE(at, std::string::npos);
    k.source.replace(at, k.entry.size(), entry);
    k.entry = entry;
  };
  std::vector<ir::Program> programs;
  std::vector<std::vector<CompiledProgram>> compiled(specs.size());
  std::vector<std::vector<bool>> differs(specs.size());
  std::vector<const CompiledKernel*> pointers;
  std::set<std::string> changed_by_reread;
  auto code = [](const std::string& source) {  // comment lines aside: the instructions
    std::string out, line;
    std::istringstream in(source);
    while (std::getline(in, line)) {
      const size_t first = line.find_first_not_of(' ');
      if (first == std::string::npos || line.compare(first, 2, "//") != 0) out += line + "\n";
    }
    return out;
  };
  for (size_t i = 0; i < specs.size(); ++i) {
    programs.push_back(ops::parse_specialization(specs[i]).build_program());
    for (size_t v = 0; v < settings.size(); ++v) {
      compiled[i].push_back(lower(programs[i], settings[v].second));
      bool other = false;
      for (size_t k = 0; k < compiled[i][v].kernels.size(); ++k) {
        const CompiledKernel& kernel = compiled[i][v].kernels[k];
        const bool same = k < compiled[i][0].kernels.size() &&
                          compiled[i][0].kernels[k].entry == kernel.entry &&
                          code(compiled[i][0].kernels[k].source) == code(kernel.source);
        other |= !same;
        if (v == 1 && !same) changed_by_reread.insert(std::to_string(i) + " " + kernel.entry);
      }
      differs[i].push_back(other || compiled[i][v].kernels.size() != compiled[i][0].kernels.size());
    }
  }
  // The scoped knob: the record walks of bilinear and bicubic, nothing else, nothing at nearest.
  for (const std::string& entry : changed_by_reread) {
    EXPECT_TRUE(entry.find("_bin_factors") != std::string::npos ||
                entry.find("_bin_chunk_sums") != std::string::npos ||
                entry.find("_grad_input_gather") != std::string::npos)
        << entry;
  }
  EXPECT_TRUE(differs[0][1] && differs[1][1] && differs[2][1]);
  EXPECT_FALSE(differs[3][1]);
  EXPECT_TRUE(differs[0][2] && differs[2][3] && differs[0][4]);  // each knob ran somewhere
  // Sparse grids read the planar input: the down-sampling program alone.
  EXPECT_TRUE(differs[4][5] && differs[4][4]);
  EXPECT_FALSE(differs[0][5] || differs[1][5] || differs[2][5] || differs[3][5]);
  for (size_t i = 0; i < specs.size(); ++i) {
    for (size_t v = 0; v < settings.size(); ++v) {
      if (v > 0 && !differs[i][v]) continue;
      for (CompiledKernel& k : compiled[i][v].kernels)
        rename(k, k.entry + "_p" + std::to_string(i) + "_" + settings[v].first);
      for (const CompiledKernel& k : compiled[i][v].kernels) pointers.push_back(&k);
    }
  }
  HostLibrary library;
  const std::string error = library.build(pointers);
  ASSERT_TRUE(error.empty()) << error;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ir::Program& p = programs[i];
    const ir::HostBuffers inputs = rounding_inputs(p, 3);
    auto run = [&](const CompiledProgram& program) {
      std::map<std::string, std::unique_ptr<HostTensor>> tensors;
      for (const auto* list : {&p.inputs, &p.outputs, &p.temporaries}) {
        for (const ir::Tensor& t : *list) {
          tensors[t->name] = std::make_unique<HostTensor>(t, 0);
          if (inputs.count(t->name)) tensors[t->name]->write(inputs.at(t->name));
        }
      }
      for (const BufferInfo& b : program.buffers) {
        if (!tensors.count(b.name))
          tensors[b.name] = std::make_unique<HostTensor>(
              ir::make_tensor(b.name, b.dtype, b.shape, ir::TensorRole::kTemporary), 0);
      }
      for (const CompiledKernel& k : program.kernels) {
        std::vector<void*> args;
        for (const std::string& name : k.params) args.push_back(tensors.at(name)->data());
        auto launch = reinterpret_cast<HostLibrary::Launcher>(
            dlsym(library.handle(), ("launch_" + k.entry).c_str()));
        EXPECT_NE(launch, nullptr) << k.entry;
        unsigned grid[3] = {static_cast<unsigned>(k.launch.grid[0]),
                            static_cast<unsigned>(k.launch.grid[1]),
                            static_cast<unsigned>(k.launch.grid[2])};
        if (launch && grid[0] > 0) launch(args.data(), grid, k.launch.block[0]);
      }
      ir::HostBuffers out;
      for (const ir::Tensor& t : p.outputs) out[t->name] = tensors.at(t->name)->read();
      return out;
    };
    const ir::HostBuffers reference = run(compiled[i][0]);
    for (size_t v = 1; v < settings.size(); ++v) {
      if (!differs[i][v]) continue;
      expect_outputs_equal(p, reference, run(compiled[i][v]), 0,
                           specs[i] + ": " + settings[v].first + " against the default");
    }
  }
}

/// Sub-buckets (lower_scatter_to_binned_gather.h): small inputs sampled by large grids hold
/// tens to hundreds of records per cell, so the count, fill and sort cut each bucket into id
/// ranges. The sorted slots are those of whole buckets, so every launch, layout and cut gives the
/// same bits as no cut at all (the first run, within rounding of the interpreter): uniform grids
/// in [-8, 8] and one-cell grids, records and taps in the gather, 2-d and 3-d.
TEST(HostRun, BinnedSubBucketsSortLikeWholeBuckets) {
  std::vector<ir::Program> programs;
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,3,3,4 output_size=29,31 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=f64 input_size=1,2,2,3 output_size=17,13 "
        "interpolation_mode=bicubic padding_mode=border align_corners=true",
        "grid_sampler_2d_backward dtype=bf16 input_size=2,1,1,2 output_size=23,11 "
        "interpolation_mode=nearest padding_mode=reflection align_corners=false",
        "grid_sampler_3d_backward dtype=f32 input_size=1,2,2,2,3 output_size=7,9,5 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=true"}) {
    programs.push_back(ops::parse_specialization(spec).build_program());
  }
  // The cut is what runs, with the id ranges the header gives: records / (K x cells).
  for (const ir::Program& program : programs) {
    ClaimSlotTensors claims;
    BinnedGatherOptions options;
    options.subbucket_records = 4;
    ScheduleNotes notes;
    ir::Program lowered =
        lower_scatter_to_binned_gather(simplify(program), &claims, options, nullptr, &notes);
    bool cut = false;
    for (const auto& [kernel, note] : notes) cut |= note.find("binned sort: ") != std::string::npos;
    EXPECT_TRUE(cut) << ir::to_string(lowered);
  }
  for (auto make_inputs : {rounding_inputs, one_cell_inputs<false>}) {
    for (int64_t taps : {int64_t{0}, int64_t{1} << 20}) {
      std::vector<Variant> variants;
      for (const Variant& v :
           {Variant::binned_subbuckets(256, 0), Variant::binned_subbuckets(256, 4),
            Variant::binned_subbuckets(32, 1), Variant::binned_subbuckets(1024, 16, 1),
            Variant::binned_subbuckets(64, 2, 1)}) {
        variants.push_back(v);
        variants.back().taps_walks_max = taps;
      }
      expect_host_runs_match(programs, variants, 2e-2, make_inputs);
    }
  }
  // The derived walk chunk (BinnedGatherOptions::gather_chunk = -1): crowded buckets walk
  // chunks of 8 to 64 slots by the records per cell, the same at every launch and cut.
  {
    ClaimSlotTensors claims;
    ScheduleNotes notes;
    lower_scatter_to_binned_gather(simplify(programs[0]), &claims, BinnedGatherOptions{}, nullptr,
                                   &notes);
    bool derived = false;
    for (const auto& [kernel, note] : notes)
      derived |= note.find("binned walk: chunks of 8 slots") != std::string::npos;
    EXPECT_TRUE(derived);
  }
  for (auto make_inputs : {rounding_inputs, one_cell_inputs<false>}) {
    std::vector<Variant> variants = {Variant::binned_subbuckets(256, 16),
                                     Variant::binned_subbuckets(32, 0),
                                     Variant::binned_subbuckets(1024, 4, 1)};
    for (Variant& v : variants) v.gather_chunk = -1;
    expect_host_runs_match(programs, variants, 2e-2, make_inputs);
  }
}

// --- generic kernels (ir/dynamic_sizes.h) ------------------------------------------------------

/// A generic program's kernels, compiled once, run at several sizes each: on exact inputs the
/// outputs must be the interpreter's, and on inputs whose sums round they must be those of the
/// specialized kernels lower() makes for those sizes (vector groups and all), bit for bit; with
/// a grid of at most three blocks, so that the grid-stride loop runs (kernels of one index per
/// thread, lower_outer_generic's, get every block).
TEST(HostRun, GenericKernelsMatchTheInterpreterAtSizesTheyWereNotCompiledFor) {
  if (host_compiler().empty()) GTEST_SKIP() << "no host C++ compiler";
  struct Case {
    std::string op, attributes;  ///< the spec is op + " " + sizes + attributes
    std::vector<std::string> axes;
    std::vector<std::string> sizes_text;       ///< input_size=... output_size=... per size set
    std::vector<std::vector<int64_t>> sizes;  ///< the generic program's size values
  };
  const std::vector<Case> cases = {
      {"upsample_nearest2d_backward", " dtype=f32",
       {"input_size[0]", "input_size[2]", "input_size[3]", "output_size[0]", "output_size[1]"},
       {"input_size=1,3,5,7 output_size=8,3", "input_size=2,3,4,9 output_size=13,2",
        "input_size=3,3,16,3 output_size=5,40", "input_size=0,3,3,3 output_size=7,7",
        "input_size=1,3,7,6 output_size=7,6"},
       {{1, 5, 7, 8, 3}, {2, 4, 9, 13, 2}, {3, 16, 3, 5, 40}, {0, 3, 3, 7, 7}, {1, 7, 6, 7, 6}}},
      {"_upsample_nearest_exact3d_backward", " dtype=bf16 layout=channels_last",
       {"input_size[0]", "input_size[2]", "input_size[4]", "output_size[1]"},
       {"input_size=1,2,3,4,5 output_size=6,5,3", "input_size=2,2,5,4,2 output_size=6,9,3",
        "input_size=3,2,1,4,11 output_size=6,4,3"},
       {{1, 3, 5, 5}, {2, 5, 2, 9}, {3, 1, 11, 4}}},
      {"upsample_nearest1d_backward", " dtype=f16 scales=2.5",
       {"input_size[2]", "output_size[0]"},
       {"input_size=2,3,7 output_size=17", "input_size=2,3,13 output_size=30",
        "input_size=2,3,4 output_size=9", "input_size=2,3,1 output_size=1"},
       {{7, 17}, {13, 30}, {4, 9}, {1, 1}}},
      // Generic in the batch only: with the 32-bit storage bound, lower_outer_generic's
      // specialized kernel with the batch as a parameter (one index per thread, full grid).
      {"upsample_nearest2d_backward", " dtype=f32", {"input_size[0]"},
       {"input_size=1,3,8,8 output_size=16,16", "input_size=5,3,8,8 output_size=16,16",
        "input_size=0,3,8,8 output_size=16,16", "input_size=2,3,8,8 output_size=16,16"},
       {{1}, {5}, {0}, {2}}},
      {"upsample_nearest2d_backward", " dtype=bf16 layout=channels_last", {"input_size[0]"},
       {"input_size=2,5,7,9 output_size=13,4", "input_size=3,5,7,9 output_size=13,4",
        "input_size=1,5,7,9 output_size=13,4"},
       {{2}, {3}, {1}}},
      {"_upsample_nearest_exact3d_backward", " dtype=f32", {"input_size[0]"},
       {"input_size=1,2,3,4,5 output_size=6,5,3", "input_size=4,2,3,4,5 output_size=6,5,3"},
       {{1}, {4}}},
  };
  std::vector<ir::Program> generics;
  std::vector<CompiledKernel> kernels;
  std::vector<HostProgram> specialized;  // per case, per size set
  auto rename = [&](CompiledKernel& k, const std::string& entry) {
    size_t at = k.source.find(k.entry + "(");
    ASSERT_NE(at, std::string::npos);
    k.source.replace(at, k.entry.size(), entry);
    k.entry = entry;
  };
  for (size_t c = 0; c < cases.size(); ++c) {
    ops::Specialization spec =
        ops::parse_specialization(cases[c].op + " " + cases[c].sizes_text[0] + cases[c].attributes);
    ir::Program g = ops::find_dynamic_op(spec.op_name())->build_generic(spec, cases[c].axes);
    for (int64_t bound : {int64_t{0}, kGenericInt32StorageBound}) {  // 64- and 32-bit index math
      g.dynamic_storage_bound = bound;
      CompiledProgram compiled = lower(g, LowerOptions{});
      ASSERT_EQ(compiled.kernels.size(), 1u);
      CompiledKernel k = compiled.kernels[0];
      const bool outer_batch = cases[c].axes == std::vector<std::string>{"input_size[0]"} && bound > 0;
      EXPECT_EQ(k.one_index_per_thread, outer_batch) << cases[c].op << cases[c].attributes;
      rename(k, k.entry + "_" + std::to_string(kernels.size()));
      kernels.push_back(k);
      generics.push_back(g);
    }
    for (size_t s = 0; s < cases[c].sizes.size(); ++s) {
      ir::Program p = ops::parse_specialization(cases[c].op + " " + cases[c].sizes_text[s] +
                                                cases[c].attributes)
                          .build_program();
      HostProgram run{"s" + std::to_string(specialized.size()), p, lower(p, LowerOptions{}).kernels};
      for (CompiledKernel& k : run.kernels) rename(k, k.entry + "_" + run.label);
      specialized.push_back(std::move(run));
    }
  }
  std::vector<const CompiledKernel*> pointers;
  for (const CompiledKernel& k : kernels) pointers.push_back(&k);
  for (const HostProgram& run : specialized)
    for (const CompiledKernel& k : run.kernels) pointers.push_back(&k);
  HostLibrary library;
  std::string error = library.build(pointers);
  ASSERT_TRUE(error.empty()) << error;
  size_t first_specialized = 0;
  for (size_t c = 0; c < cases.size(); ++c) {
    for (size_t variant = 0; variant < 2; ++variant) {
      const size_t i = 2 * c + variant;
      const CompiledKernel& k = kernels[i];
      for (size_t s = 0; s < cases[c].sizes.size(); ++s) {
        const std::vector<int64_t>& sizes = cases[c].sizes[s];
        const HostProgram& reference = specialized[first_specialized + s];
        ir::Program bound = ir::bind_sizes(generics[i], sizes);
        for (bool exact : {true, false}) {
          ir::HostBuffers inputs = exact ? exact_inputs(bound, 5) : rounding_inputs(bound, 5);
          ir::HostBuffers expected = exact ? ir::interpret(generics[i], sizes, inputs)
                                           : library.run(reference, inputs, false);
          std::map<std::string, std::unique_ptr<HostTensor>> tensors;
          for (const auto* list : {&bound.inputs, &bound.outputs}) {
            for (const ir::Tensor& t : *list) {
              tensors[t->name] = std::make_unique<HostTensor>(t, 0);
              if (inputs.count(t->name)) tensors[t->name]->write(inputs.at(t->name));
            }
          }
          std::vector<int64_t> wide(sizes.begin(), sizes.end());
          std::vector<int32_t> narrow(sizes.begin(), sizes.end());
          std::vector<void*> args;
          for (const std::string& name : k.params) args.push_back(tensors.at(name)->data());
          for (size_t j = 0; j < sizes.size(); ++j)
            args.push_back(k.size_param_bytes == 4 ? static_cast<void*>(&narrow[j]) : &wide[j]);
          const int64_t points = k.points.evaluate(k.size_params, sizes);
          const int64_t block = k.launch.block[0];
          const int64_t per_block = block * k.points_per_thread;
          unsigned grid[3] = {static_cast<unsigned>(k.one_index_per_thread  // every block
                                                        ? (points + per_block - 1) / per_block
                                                        : std::min<int64_t>((points + block - 1) / block, 3)),
                              1, 1};
          auto launch = reinterpret_cast<HostLibrary::Launcher>(
              dlsym(library.handle(), ("launch_" + k.entry).c_str()));
          ASSERT_NE(launch, nullptr);
          if (grid[0] > 0) launch(args.data(), grid, k.launch.block[0]);
          for (const ir::Tensor& t : bound.outputs) {
            ASSERT_EQ(tensors.at(t->name)->read(), expected.at(t->name))
                << cases[c].op << " " << cases[c].sizes_text[s] << cases[c].attributes
                << (exact ? " (exact inputs, against the interpreter)"
                          : " (rounding inputs, against the specialized kernel)")
                << "\n" << k.source << "\n" << reference.kernels.front().source;
          }
        }
      }
    }
    first_specialized += cases[c].sizes.size();
  }
}

/// Every op of the mHC family generic in its token axes (ops/mhc_token_axes.h): one compile
/// serves every token count, 1, odd, B > 1, S = 1. mhc_pre_backward's token sums take
/// split_generic_reductions' strided partials, whose G does not depend on the sizes: token
/// counts below G (partials left empty) and above it must match the interpreter (within the
/// split's reordering of the f32 sums), the partials kernels the same compiled code at every
/// size. The other ops compute per token (sums over n or D only).
TEST(HostRun, GenericMhcFamilyServesEveryTokenCount) {
  if (host_compiler().empty()) GTEST_SKIP() << "no host C++ compiler";
  struct Case {
    std::string op, attributes;
    std::vector<std::string> axes;
    std::vector<std::vector<int64_t>> sizes;  ///< values of the generic program's sizes
  };
  const std::vector<Case> cases = {
      {"mhc_pre_backward",
       "n=4 dim=8 dtype=f32",
       {"batch", "seq"},
       {{1, 1}, {2, 3}, {1, 37}, {3, 1}, {2, 20}}},
      {"mhc_pre_backward", "n=6 dim=5 dtype=bf16 with_grad_x_post=true", {"seq"}, {{1}, {7}, {30}}},
      {"mhc_pre_backward", "n=4 dim=8 dtype=f16", {"batch"}, {{1}, {5}, {2}}},
      // dim=128: gate_grads reduces 128 iterations, so its warps share the points (lanes) and
      // compute a group of streams. 2100 tokens: x_mix's partials (G = 256) run 8-9 trips, a
      // whole chunk of the ring of shared memory (8 trips) and the rest loaded directly.
      {"mhc_pre_backward", "n=4 dim=128 dtype=bf16", {"batch", "seq"}, {{1, 3}, {2, 9}, {1, 2100}}},
      {"mhc_pre", "n=4 dim=8 dtype=f32", {"batch", "seq"}, {{1, 1}, {2, 3}, {1, 37}, {3, 1}}},
      {"mhc_pre", "n=6 dim=40 dtype=bf16", {"seq"}, {{1}, {7}, {30}}},
      {"mhc_pre", "n=4 dim=256 dtype=f16", {"batch"}, {{1}, {5}}},
      {"mhc_post", "n=4 dim=8 dtype=bf16", {"batch", "seq"}, {{1, 1}, {2, 3}, {3, 1}, {1, 37}}},
      {"mhc_post", "n=6 dim=5 dtype=f32", {"seq"}, {{1}, {7}}},
      {"mhc_post_backward", "n=4 dim=8 dtype=f32", {"batch", "seq"}, {{1, 1}, {2, 3}, {3, 1}, {2, 20}}},
      {"mhc_post_backward", "n=4 dim=256 dtype=bf16", {"batch"}, {{1}, {5}}},
      {"mhc_sinkhorn", "n=4 t_max=3", {"batch", "seq"}, {{1, 1}, {2, 3}, {3, 1}, {1, 37}}},
      {"mhc_sinkhorn", "n=6 t_max=2 eps=0.01 dtype=f64", {"seq"}, {{1}, {7}}},
      {"mhc_sinkhorn_backward", "n=4 t_max=3", {"batch", "seq"}, {{1, 1}, {2, 3}, {3, 1}, {2, 20}}},
      {"mhc_sinkhorn_backward", "n=6 t_max=2 eps=0.01", {"batch"}, {{1}, {5}}},
  };
  // Schedules that keep each point's order, so their outputs must be the default's bits: warp
  // groups without their tile (ADJOINT_TUNE_GENERIC_WARP_GROUPS=1), none (0: the lane groups
  // decide), and the generic schedules of before (the aligned twin with its copies and ring,
  // warp and lane groups, spans of evaluated loads and the few-groups rule all off).
  std::vector<std::pair<std::string, LowerOptions>> variants(4);
  variants[0].first = "default";
  variants[1].first = "ADJOINT_TUNE_GENERIC_WARP_GROUPS=1";
  variants[1].second.generic_warp_groups = 1;
  variants[2].first = "ADJOINT_TUNE_GENERIC_WARP_GROUPS=0";
  variants[2].second.generic_warp_groups = 0;
  variants[3].first = "the generic schedules of before";
  LowerOptions& before = variants[3].second;
  before.generic_warp_groups = 0;
  before.generic_aligned_twin = false;
  before.generic_lane_groups = false;
  before.generic_evaluated_spans = false;
  before.generic_min_vector_groups = 0;
  before.generic_streaming = false;
  // Lane spans (docs/compiler.md) change a warp sum's per-lane order, and a warp tile (the
  // default's generic mhc_mix) keeps the strided lanes: the variants above run without them
  // and match the default without them (ADJOINT_TUNE_LANE_SPANS=0), itself checked against
  // the interpreter.
  variants.emplace_back("ADJOINT_TUNE_LANE_SPANS=0", LowerOptions{});
  for (auto& [name, options] : variants)
    if (name != "default") options.lane_spans = 0;
  const size_t strided = variants.size() - 1;
  std::map<std::string, int> variants_run;  // variant -> cases whose code differed and ran
  for (const Case& c : cases) {
    const ops::Specialization spec =
        ops::parse_specialization(c.op + " batch=2 seq=3 " + c.attributes);
    ir::Program generic = ops::find_dynamic_op(c.op)->build_generic(spec, c.axes);
    generic.dynamic_storage_bound = kGenericInt32StorageBound;
    std::vector<CompiledProgram> compiled;
    std::vector<std::unique_ptr<HostLibrary>> libraries;
    // Per-token ops generic in both token axes take one flattened token axis (every kernel the
    // specialized pipeline's, one index per thread); the others lower_generic's pipeline.
    const bool flattened = c.axes.size() == 2 && c.op != "mhc_pre" && c.op != "mhc_pre_backward";
    EXPECT_EQ(compiler::token_pair_refusal(generic).empty(),
              c.axes.size() == 2 && c.op != "mhc_pre_backward")
        << c.op << ": " << compiler::token_pair_refusal(generic);
    for (const CompiledKernel& k : lower(generic, {}).kernels) {  // (one size: the outer batch's rule)
      if (c.axes.size() == 2) {
        EXPECT_EQ(k.one_index_per_thread, flattened) << c.op << " " << k.entry;
      }
    }
    for (size_t v = 0; v < variants.size(); ++v) {
      compiled.push_back(lower(generic, variants[v].second));
      if (v > 0) {  // the same code as the default: nothing more to run
        bool same = true;
        for (size_t k = 0; k < compiled[v].kernels.size(); ++k)
          same = same && compiled[v].kernels[k].source == compiled[0].kernels[k].source;
        if (same) {
          libraries.push_back(nullptr);
          continue;
        }
      }
      bool split = false;
      for (const CompiledKernel& k : compiled[v].kernels) {
        EXPECT_FALSE(k.size_params.empty()) << k.entry;
        split = split || k.entry.find("_partials") != std::string::npos;
      }
      EXPECT_EQ(split, c.op == "mhc_pre_backward") << c.op << ": only the token sums are split";
      std::vector<const CompiledKernel*> pointers;
      for (const CompiledKernel& k : compiled[v].kernels) pointers.push_back(&k);
      ++variants_run[variants[v].first];
      libraries.push_back(std::make_unique<HostLibrary>());
      const std::string error = libraries.back()->build(pointers);
      ASSERT_TRUE(error.empty()) << error;
    }
    for (const std::vector<int64_t>& sizes : c.sizes) {
      const ir::Program bound = ir::bind_sizes(generic, sizes);
      const ir::HostBuffers inputs = exact_inputs(bound, 7);
      const ir::HostBuffers expected = ir::interpret(generic, sizes, inputs);
      // The program's kernels run in order on buffers displaced by `shift` elements each (one
      // element: every base still aligned to its element, as a GPU tensor's must be, but not to
      // a vector group, so the misaligned copies run).
      auto run = [&](const CompiledProgram& program, HostLibrary& lib, size_t shift) {
        std::map<std::string, std::unique_ptr<HostTensor>> tensors;
        for (const auto* list : {&bound.inputs, &bound.outputs, &bound.temporaries}) {
          for (const ir::Tensor& t : *list) {
            tensors[t->name] = std::make_unique<HostTensor>(t, shift * ir::dtype_bytes(t->dtype));
            if (inputs.count(t->name)) tensors[t->name]->write(inputs.at(t->name));
          }
        }
        for (const BufferInfo& b : program.buffers) {  // the partials (static temporaries)
          if (!tensors.count(b.name))
            tensors[b.name] = std::make_unique<HostTensor>(
                ir::make_tensor(b.name, b.dtype, b.shape, ir::TensorRole::kTemporary),
                shift * ir::dtype_bytes(b.dtype));
        }
        std::vector<int64_t> wide(sizes.begin(), sizes.end());
        std::vector<int32_t> narrow(sizes.begin(), sizes.end());
        for (const CompiledKernel& k : program.kernels) {
          std::vector<void*> args;
          for (const std::string& name : k.params) args.push_back(tensors.at(name)->data());
          for (const std::string& name : k.size_params) {
            size_t j = 0;
            while (j < generic.sizes.size() && generic.sizes[j].source != name) ++j;
            EXPECT_LT(j, generic.sizes.size()) << name;
            args.push_back(k.size_param_bytes == 4 ? static_cast<void*>(&narrow[j]) : &wide[j]);
          }
          const int64_t points = program.sizes.empty() ? 0 : k.points.evaluate(program.sizes, sizes);
          const int64_t per_block = k.launch.block[0] * k.points_per_thread;
          const int64_t blocks = (points + per_block - 1) / per_block;
          // lower_outer_generic's kernels need every block, the others stride over at most 3;
          // a specialized program's kernels (the comparison below) have their grid
          unsigned grid[3] = {
              static_cast<unsigned>(k.one_index_per_thread ? blocks : std::min<int64_t>(blocks, 3)),
              1, 1};
          if (program.sizes.empty()) std::copy(k.launch.grid, k.launch.grid + 3, grid);
          auto launch = reinterpret_cast<HostLibrary::Launcher>(
              dlsym(lib.handle(), ("launch_" + k.entry).c_str()));
          EXPECT_NE(launch, nullptr) << k.entry;
          if (launch && grid[0] > 0) launch(args.data(), grid, k.launch.block[0]);
        }
        ir::HostBuffers actual;
        for (const ir::Tensor& t : bound.outputs) actual[t->name] = tensors.at(t->name)->read();
        return actual;
      };
      std::string what = c.op + " " + c.attributes + " generic at sizes";
      for (int64_t v : sizes) what += " " + std::to_string(v);
      const ir::HostBuffers actual = run(compiled[0], *libraries[0], 0);
      expect_outputs_equal(bound, expected, actual, 2e-2, what);
      expect_outputs_equal(bound, actual, run(compiled[0], *libraries[0], 1), 0,
                           what + ": misaligned buffers against aligned ones");
      ir::HostBuffers reference = actual;  // the default's bits without lane spans
      if (libraries[strided]) {
        reference = run(compiled[strided], *libraries[strided], 0);
        expect_outputs_equal(bound, expected, reference, 2e-2,
                             what + ": " + variants[strided].first);
      }
      for (size_t v = 1; v < strided; ++v) {
        if (!libraries[v]) continue;
        expect_outputs_equal(bound, reference, run(compiled[v], *libraries[v], 0), 0,
                             what + ": " + variants[v].first + " against the default" +
                                 (libraries[strided] ? " without lane spans" : ""));
      }
      // A token pair (lower_outer_generic.h): the specialized pipeline's kernels, so the
      // specialized program of these sizes computes the same bits.
      if (flattened) {
        const CompiledProgram specialized = lower(bound, {});
        std::vector<const CompiledKernel*> pointers;
        for (const CompiledKernel& k : specialized.kernels) pointers.push_back(&k);
        HostLibrary library;
        const std::string error = library.build(pointers);
        ASSERT_TRUE(error.empty()) << error;
        expect_outputs_equal(bound, actual, run(specialized, library, 0), 0,
                             what + ": the specialized program against the token pair's");
      }
    }
  }
  for (const auto& [name, options] : variants)  // each schedule switch changes some program
    EXPECT_GT(variants_run[name], 0) << name << " compiled the default's code everywhere";
}

}  // namespace
}  // namespace adjoint::compiler
