// Engine: the in-memory cache, program builds (IR, lowering, binaries from kernel_binary.h,
// module loads) and launches.
#include "runtime/engine.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <unordered_map>

#include <xxhash.h>

#include "compiler/launch_geometry.h"
#include "compiler/lower_generic.h"
#include "compiler/block_reductions.h"
#include "compiler/reduction_schedule.h"
#include "compiler/row_groups.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "runtime/compile_huge_pages.h"
#include "runtime/disk_cache.h"
#include "runtime/driver.h"
#include "runtime/dump.h"
#include "runtime/kernel_binary.h"
#include "runtime/logging.h"
#include "runtime/memory_cache.h"
#include "runtime/prepare_profile.h"
#include "runtime/temporary_arena.h"

namespace adjoint::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string shape_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string short_hash(const std::string& text) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(XXH3_64bits(text.data(), text.size())));
  return buf;
}

const char* determinism_name(compiler::Determinism d) {
  return d == compiler::Determinism::kDefault ? "default" : "allow_atomics";
}

const char* binary_source_name(BinarySource source) {
  switch (source) {
    case BinarySource::kPackage:
      return "package";
    case BinarySource::kDiskCache:
      return "disk cache";
    case BinarySource::kCompiled:
      return "NVRTC";
  }
  return "?";
}

/// The process's disk cache, configured from the environment on first use.
const DiskCache& disk_cache() {
  static const DiskCache cache = DiskCache::from_environment();
  return cache;
}

thread_local PrepareProfile last_profile;

/// Code-generation tuning knobs from the environment (docs/runtime.md): read once, they change
/// the emitted source, so the disk cache and packages (keyed by source) keep variants apart.
struct TuningKnobs {
  int block_size = 0;
  int vector_bytes = 0;
  bool streaming_loads = false;
  bool streaming_stores = false;
  int reduction_split = -1;
  int thread_tile = -1;
  bool tile_prefer_vector = true;
  int tile_few_parts = 2;
  int row_groups = -1;
  int split_threads_log2 = 0;
  bool split_count_vector = false;
  bool split_tail = true;
  int programmatic_launch = 2;
  bool temporary_arena = true;
  int partial_unroll = 0;
  int tile_unroll = 0;
  int tile_prefetch = 8;
  bool tile_early_copies = true;
  int tile_min_blocks = -1;
  int unroll_budget = 0;
  int runtime_unroll = 0;
  std::string reduction_schedule = "auto";
  std::string block_reduction = "auto";
  std::string row_schedule = "auto";
  bool stage_loops = true;
  int block_stage_width = 8;
  bool block_shared_vectors = true;
  int split_warp_combine_points = 1024;
  int binned_channels_last_min = 2;
  int binned_gather_chunk = -1;
  int binned_taps_walks_max = 16;
  bool binned_scan_digits = true;
  int binned_subbucket_records = 16;
  int gathered_rows_min = 2;
  bool fused_multiply_add = true;
  int tiled_transpose_min = 16;
  bool transposed_store = true;
  int gathered_lanes_min = 32;
  int gathered_lane_width = 0;
  int binned_records_per_cell_min = 2;
};

/// The integer value of environment variable `name` (`fallback` when unset or empty), which
/// must be one of the values `accepts` allows; otherwise an adjoint::Error naming the variable
/// and `valid`.
template <typename Accepts>
int integer_knob(const char* name, int fallback, Accepts accepts, const char* valid) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || errno != 0 || value < INT32_MIN || value > INT32_MAX ||
      !accepts(static_cast<int>(value))) {
    throw Error(std::string(name) + ": expected " + valid + ", got '" + text + "'",
                ErrorCode::kInvalidArgument);
  }
  return static_cast<int>(value);
}

TuningKnobs read_tuning_knobs() {
  TuningKnobs knobs;
  knobs.block_size = integer_knob(
      "ADJOINT_TUNE_BLOCK_SIZE", 0,
      [](int v) { return v == 0 || (v >= 32 && v <= 1024 && v % 32 == 0); },
      "0 (derive) or a multiple of 32 in [32, 1024]");
  knobs.vector_bytes = integer_knob(
      "ADJOINT_TUNE_VECTOR_BYTES", 0,
      [](int v) { return v == 0 || v == 8 || v == 16 || v == 32; }, "0 (derive), 8, 16 or 32");
  const int streaming = integer_knob(
      "ADJOINT_TUNE_STREAMING", 1, [](int v) { return v >= 0 && v <= 3; },
      "0 (none), 1 (loads and stores), 2 (stores only) or 3 (loads only)");
  knobs.streaming_loads = streaming == 1 || streaming == 3;
  knobs.streaming_stores = streaming == 1 || streaming == 2;
  knobs.reduction_split = integer_knob(
      "ADJOINT_TUNE_REDUCTION_SPLIT", -1, [](int v) { return v >= -1 && v != 1 && v <= 4096; },
      "-1 (derive), 0 (never split) or a number of partials in [2, 4096]");
  knobs.thread_tile = integer_knob(
      "ADJOINT_TUNE_THREAD_TILE", -1, [](int v) { return v >= -1 && v != 1 && v <= 64; },
      "-1 (derive), 0 (never tile) or a thread tile of 2 to 64 points");
  knobs.tile_prefer_vector =
      integer_knob(
          "ADJOINT_TUNE_TILE_PREFER_VECTOR", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a derived thread tile that takes its axis in parts gives way to the vector "
          "width) or 0 (it keeps its points and the vector width shrinks: the tiles before)") == 1;
  knobs.row_groups = integer_knob(
      "ADJOINT_TUNE_ROW_GROUPS", -1, [](int v) { return v >= -1 && v <= 1024; },
      "-1 (derive), 0 (never fuse row groups) or rows per block in [1, 1024]");
  knobs.split_threads_log2 = integer_knob(
      "ADJOINT_TUNE_SPLIT_THREADS", 0, [](int v) { return v == 0 || (v >= 10 && v <= 24); },
      "0 (default) or the log2 of the threads a derived split aims at, in [10, 24]");
  knobs.split_count_vector =
      integer_knob(
          "ADJOINT_TUNE_SPLIT_COUNT_VECTOR", 0, [](int v) { return v == 0 || v == 1; },
          "1 (a thread-tiled split counts the threads it launches, points x G / (R x V)) or 0 "
          "(points x G / R: the count before)") == 1;
  knobs.split_tail =
      integer_knob(
          "ADJOINT_TUNE_SPLIT_TAIL", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a split's G need not divide the axis: the combine sums the tail) or 0 (G divides "
          "it: the splits before)") == 1;
  knobs.programmatic_launch = integer_knob(
      "ADJOINT_TUNE_PROGRAMMATIC_LAUNCH", 2, [](int v) { return v >= 0 && v <= 2; },
      "2 (every kernel launched with programmatic stream serialization on sm_90 and later), 1 "
      "(only kernels of at most two blocks per SM) or 0 (plain launches)");
  knobs.temporary_arena =
      integer_knob(
          "ADJOINT_TUNE_TEMPORARY_ARENA", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a launch's temporaries share one stream-ordered allocation, those zeroed before "
          "their first use zeroed by one memset ahead of the first kernel) or 0 (an allocation "
          "and a memset each, as before: what compute-sanitizer's bounds checks see best)") == 1;
  knobs.partial_unroll = integer_knob(
      "ADJOINT_TUNE_PARTIAL_UNROLL", 0, [](int v) { return v >= 0 && v <= 64; },
      "0 (NVVM's choice: long constant loops unrolled completely) or an unroll factor in "
      "[1, 64]");
  knobs.tile_unroll = integer_knob(
      "ADJOINT_TUNE_TILE_UNROLL", 0, [](int v) { return v >= 0 && v <= 64; },
      "0 (derived) or the unroll factor of thread-tiled reduction loops, in [1, 64]");
  knobs.tile_prefetch = integer_knob(
      "ADJOINT_TUNE_TILE_PREFETCH", knobs.tile_prefetch, [](int v) { return v >= 0 && v <= 64; },
      "0 (an alignment check per access, the tiled kernels of before), 1 (one check per "
      "kernel) or the iterations of streamed spans loaded ahead, in [2, 64]");
  knobs.tile_early_copies =
      integer_knob("ADJOINT_TUNE_TILE_EARLY_COPIES", 1, [](int v) { return v == 0 || v == 1; },
                   "1 (a tiled stage's spans per tile point copied to shared memory before its "
                   "reductions) or 0 (loaded after them)") == 1;
  knobs.tile_min_blocks = integer_knob(
      "ADJOINT_TUNE_TILE_MIN_BLOCKS", -1, [](int v) { return v >= -1 && v <= 32; },
      "-1 (derived: 5 blocks of 128 for tiled kernels with a prefetched ring and at most 48 "
      "accumulators), 0 (no minimum) or the resident blocks per SM every thread-tiled kernel's "
      "registers must allow (__launch_bounds__), in [1, 32]");
  knobs.tile_few_parts = integer_knob(
      "ADJOINT_TUNE_TILE_FEW_PARTS", 2, [](int v) { return v >= 0 && v <= 8; },
      "2 (default: an axis taken in at most 2 parts keeps its tile, 24 included), N in [1, 8] "
      "that many parts, or 0 (the tiles before)");
  knobs.unroll_budget = integer_knob(
      "ADJOINT_TUNE_UNROLL_BUDGET", knobs.unroll_budget,
      [](int v) { return v >= 0 && v <= (1 << 20); },
      "0 (no budget: NVVM unrolls long constant loops completely) or the IR nodes an "
      "unrolled loop nest may hold, in [1, 1048576] (8192 suggested)");
  knobs.runtime_unroll = integer_knob(
      "ADJOINT_TUNE_RUNTIME_UNROLL", 0, [](int v) { return v >= 0 && v <= 16; },
      "0 (NVVM's choice), 1 (not unrolled) or an unroll factor in [2, 16]");
  knobs.binned_channels_last_min = integer_knob(
      "ADJOINT_TUNE_BINNED_CHANNELS_LAST", 2, [](int v) { return v >= 0; },
      "0 (never) or the fewest broadcast elements for a broadcast-innermost binned gather");
  knobs.binned_gather_chunk = integer_knob(
      "ADJOINT_TUNE_BINNED_GATHER_CHUNK", -1, [](int v) { return v >= -1 && v <= (1 << 20); },
      "-1 (derived from the records per cell: 64, or fewer where buckets are crowded), 0 (one "
      "sequential walk per bucket) or the slots per chunk of a binned gather's walk, at most "
      "1048576");
  knobs.binned_taps_walks_max = integer_knob(
      "ADJOINT_TUNE_BINNED_TAPS", 16, [](int v) { return v >= 0; },
      "0 (every tap a record) or the most taps x broadcast elements for which a binned gather "
      "bins one record per point and walks a bucket per tap");
  knobs.binned_scan_digits =
      integer_knob(
          "ADJOINT_TUNE_BINNED_SCAN", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a binned gather's offsets scanned by base-32 digits: one kernel per level and "
          "one for every entry) or 0 (the chained levels, two kernels per level)") == 1;
  knobs.binned_subbucket_records = integer_knob(
      "ADJOINT_TUNE_BINNED_SUBBUCKET", 16, [](int v) { return v >= 0 && v <= (1 << 20); },
      "0 (a binned sort ranks each record among its whole bucket) or the records per id range "
      "that buckets are cut into where cells hold more than twice that many on average, at most "
      "1048576");
  knobs.gathered_rows_min = integer_knob(
      "ADJOINT_TUNE_GATHERED_ROWS", 2, [](int v) { return v >= 0; },
      "0 (never) or the shortest reduced axis whose gathered reads use row-innermost copies");
  knobs.fused_multiply_add =
      integer_knob(
          "ADJOINT_TUNE_FMA", 1, [](int v) { return v == 0 || v == 1; },
          "1 (fma_sum reduces accumulate with fused multiply-adds, as the IR says) or 0 (as "
          "plain sums, each product rounded: for measuring)") == 1;
  knobs.binned_records_per_cell_min = integer_knob(
      "ADJOINT_TUNE_BINNED_RECORDS_PER_CELL", 2, [](int v) { return v >= 0; },
      "the fewest records per cell for a broadcast-innermost binned gather (0 or 1: always)");
  knobs.gathered_lanes_min = integer_knob(
      "ADJOINT_TUNE_GATHERED_LANES", 32, [](int v) { return v >= 0; },
      "0 (never) or the shortest reduced axis of a gathered reduction laid out for warp lanes");
  knobs.tiled_transpose_min = integer_knob(
      "ADJOINT_TUNE_TILED_TRANSPOSE", 16, [](int v) { return v >= 0; },
      "0 (never) or the fewest rows and columns of a transposing copy emitted as shared-memory "
      "tiles");
  knobs.gathered_lane_width = integer_knob(
      "ADJOINT_TUNE_GATHERED_LANE_WIDTH", 0,
      [](int v) { return v == 0 || v == 32 || v == 16 || v == 8 || v == 4; },
      "0 (derived: 16 lanes per point of a gathered reduction laid out for lanes with at most 4 "
      "taps, else 32), 32 (a warp per point), 16, 8 or 4 lanes per point");
  knobs.transposed_store =
      integer_knob(
          "ADJOINT_TUNE_TRANSPOSED_STORE", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a tiled copy of a kernel's target is fused into that kernel's stores) or 0 (the "
          "copy kernel of before)") == 1;
  knobs.split_warp_combine_points = integer_knob(
      "ADJOINT_TUNE_SPLIT_WARP_COMBINE", 1024, [](int v) { return v >= 0; },
      "0 (a split's combine is a thread per point) or the points below which it is a warp per "
      "point");
  knobs.block_shared_vectors =
      integer_knob(
          "ADJOINT_TUNE_BLOCK_SHARED_VECTORS", 1, [](int v) { return v == 0 || v == 1; },
          "1 (a block reduction reads its staged f32 values 16 bytes at a time where C, K and "
          "the outputs per thread allow) or 0 (one value per shared load, before)") == 1;
  knobs.block_stage_width = integer_knob(
      "ADJOINT_TUNE_BLOCK_STAGING", 8, [](int v) { return v == 1 || v == 2 || v == 4 || v == 8; },
      "1, 2, 4 or 8: the most consecutive iterations a block reduction's staging thread loads "
      "(8: vector loads; 1: one element per thread, the schedule of before)");
  if (const char* text = std::getenv("ADJOINT_TUNE_REDUCTION"); text && *text) {
    compiler::parse_reduction_mode(text, "ADJOINT_TUNE_REDUCTION");  // throws, naming it
    knobs.reduction_schedule = text;
  }
  if (const char* text = std::getenv("ADJOINT_TUNE_BLOCK_REDUCTION"); text && *text) {
    compiler::parse_block_reduction_mode(text, "ADJOINT_TUNE_BLOCK_REDUCTION");  // throws
    knobs.block_reduction = text;
  }
  knobs.stage_loops =
      integer_knob(
          "ADJOINT_TUNE_STAGE_LOOPS", 1, [](int v) { return v == 0 || v == 1; },
          "1 (stages of a row-group kernel that repeat up to their tensors run as a loop) or 0 "
          "(every stage written out, the straight-line code of before)") == 1;
  if (const char* text = std::getenv("ADJOINT_TUNE_ROW_SCHEDULE"); text && *text) {
    compiler::parse_row_schedule(text, "ADJOINT_TUNE_ROW_SCHEDULE");  // throws, naming it
    knobs.row_schedule = text;
  }
  return knobs;
}

/// The process's tuning knobs, read on first use (an invalid value throws on every use).
const TuningKnobs& tuning_knobs() {
  static const TuningKnobs knobs = read_tuning_knobs();
  return knobs;
}

}  // namespace

CUcontext current_context() {
  Driver& d = driver();
  CUcontext ctx = nullptr;
  check(d.CtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (ctx) return ctx;
  static std::once_flag once;
  static CUcontext primary = nullptr;
  std::call_once(once, [&] {
    CUdevice dev;
    check(d.DeviceGet(&dev, 0), "cuDeviceGet(0)");
    check(d.DevicePrimaryCtxRetain(&primary, dev), "cuDevicePrimaryCtxRetain");
  });
  check(d.CtxSetCurrent(primary), "cuCtxSetCurrent");
  return primary;
}

int LoadedProgram::buffer_index(const std::string& name) const {
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

LoadedProgram::~LoadedProgram() {
  if (!driver_available()) return;
  for (CUmodule m : modules) driver().ModuleUnload(m);
}

void LoadedProgram::launch(const std::vector<BoundTensor>& tensors, CUstream stream) const {
  std::vector<TensorView> views(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const BoundTensor& t = tensors[i];
    if (!t.strides.empty() && t.strides.size() != t.shape.size()) {
      throw Error(spec + ": tensor '" + t.name + "' has " + std::to_string(t.strides.size()) +
                  " strides for " + std::to_string(t.shape.size()) + " dimensions");
    }
    views[i] = TensorView{t.name.c_str(), t.data,
                          t.dtype,        static_cast<int>(t.shape.size()),
                          t.shape.data(), t.strides.empty() ? nullptr : t.strides.data()};
  }
  launch(views.data(), static_cast<int>(views.size()), stream);
}

namespace {

std::vector<int64_t> to_vector(const int64_t* values, int count) {
  return values == nullptr ? std::vector<int64_t>() : std::vector<int64_t>(values, values + count);
}

/// True when `t` (whose shape equals `b`'s) has `b`'s strides; a view without strides is
/// contiguous.
bool same_layout(const TensorView& t, const compiler::BufferInfo& b) {
  int64_t contiguous = 1;
  for (int d = t.rank; d-- > 0;) {
    int64_t stride = t.strides != nullptr ? t.strides[d] : contiguous;
    if (stride != b.strides[d]) return false;
    contiguous *= t.shape[d];
  }
  return true;
}

/// Temporaries of one launch, released (stream-ordered) however the launch ends.
class LaunchTemporaries {
 public:
  explicit LaunchTemporaries(CUstream stream) : stream_(stream) {}
  LaunchTemporaries(const LaunchTemporaries&) = delete;
  LaunchTemporaries& operator=(const LaunchTemporaries&) = delete;
  ~LaunchTemporaries() {
    for (const DeviceAllocation& a : allocations_) free_device_memory(a, stream_);
  }
  CUdeviceptr allocate(size_t bytes) {
    allocations_.push_back(allocate_device_memory(bytes, stream_));
    return allocations_.back().pointer;
  }
  /// Places every temporary of `program` in one allocation (temporary_arena.h), sets their
  /// pointers and zeroes the ones placed first with one memset. Returns, per buffer, whether
  /// that memset zeroed it.
  std::vector<char> place_in_arena(const LoadedProgram& program, CUdeviceptr* pointers) {
    TemporaryArena arena = plan_temporary_arena(program.buffers, program.kernels);
    if (arena.bytes == 0) return {};
    const CUdeviceptr base = allocate(arena.bytes);
    for (size_t i = 0; i < program.buffers.size(); ++i) {
      const compiler::BufferInfo& b = program.buffers[i];
      if (b.role == ir::TensorRole::kTemporary && b.bytes > 0) pointers[i] = base + arena.offsets[i];
    }
    if (arena.zeroed_bytes > 0) {
      check(driver().MemsetD8Async(base, 0, arena.zeroed_bytes, stream_), "cuMemsetD8Async");
    }
    return std::move(arena.zeroed_at_start);
  }

 private:
  CUstream stream_;
  std::vector<DeviceAllocation> allocations_;
};

}  // namespace

void LoadedProgram::launch(const TensorView* tensors, int count, CUstream stream) const {
  if (!sizes.empty()) {
    throw Error(spec + ": a generic program runs through a binding to one specialization's sizes "
                "(Engine::prepare of the specialization), not by itself",
                ErrorCode::kInvalidArgument);
  }
  Driver& d = driver();
  const size_t n = buffers.size();
  CUdeviceptr inline_pointers[kInlineBuffers];
  bool inline_bound[kInlineBuffers];
  std::vector<CUdeviceptr> heap_pointers;
  std::vector<char> heap_bound;
  CUdeviceptr* pointers = inline_pointers;
  bool* bound = inline_bound;
  if (n > kInlineBuffers) {
    heap_pointers.resize(n);
    heap_bound.resize(n);
    pointers = heap_pointers.data();
    bound = reinterpret_cast<bool*>(heap_bound.data());
  }
  for (size_t i = 0; i < n; ++i) {
    pointers[i] = 0;
    bound[i] = false;
  }
  size_t next = 0;  // where the next tensor's name is looked for first
  for (int v = 0; v < count; ++v) {
    const TensorView& t = tensors[v];
    const char* name = t.name != nullptr ? t.name : "";
    while (next < n && buffers[next].role == ir::TensorRole::kTemporary) ++next;
    int i = next < n && buffers[next].name == name ? static_cast<int>(next) : buffer_index(name);
    if (i < 0 || buffers[i].role == ir::TensorRole::kTemporary) {
      std::string names;
      for (const auto& b : buffers) {
        if (b.role != ir::TensorRole::kTemporary) names += (names.empty() ? "" : ", ") + b.name;
      }
      throw Error(spec + ": no tensor named '" + name + "' to bind; expected " + names);
    }
    next = static_cast<size_t>(i) + 1;
    const compiler::BufferInfo& b = buffers[i];
    if (t.dtype != b.dtype) {
      throw Error(spec + ": tensor '" + name + "' has dtype " +
                  std::string(ir::dtype_name(t.dtype)) + ", expected " +
                  std::string(ir::dtype_name(b.dtype)));
    }
    bool same_shape = t.rank == static_cast<int>(b.shape.size()) &&
                      (t.rank == 0 || std::equal(b.shape.begin(), b.shape.end(), t.shape));
    if (!same_shape) {
      throw Error(spec + ": tensor '" + name + "' has shape " +
                  shape_text(to_vector(t.shape, t.rank)) + ", expected " + shape_text(b.shape));
    }
    bool empty = b.bytes == 0;
    if (!empty && !same_layout(t, b)) {
      std::vector<int64_t> strides = t.strides != nullptr ? to_vector(t.strides, t.rank)
                                                          : ir::contiguous_strides(b.shape);
      throw Error(spec + ": tensor '" + name + "' has strides " + shape_text(strides) +
                  ", expected " + shape_text(b.strides) + " (the layout of the specialization)");
    }
    if (!empty && t.data == 0) throw Error(spec + ": tensor '" + name + "' has a null pointer");
    pointers[i] = t.data;
    bound[i] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    if (buffers[i].role != ir::TensorRole::kTemporary && !bound[i]) {
      throw Error(spec + ": tensor '" + buffers[i].name + "' (" +
                  std::string(ir::tensor_role_name(buffers[i].role)) + ") was not bound");
    }
  }
  LaunchTemporaries temporaries(stream);
  // Temporaries zeroed at the start: those no kernel reads or writes before their zeroing.
  std::vector<char> zeroed_at_start;
  if (tuning_knobs().temporary_arena) {
    zeroed_at_start = temporaries.place_in_arena(*this, pointers);
  } else {
    for (size_t i = 0; i < n; ++i) {
      if (buffers[i].role == ir::TensorRole::kTemporary && buffers[i].bytes > 0) {
        pointers[i] = temporaries.allocate(static_cast<size_t>(buffers[i].bytes));
      }
    }
  }
  for (const LoadedKernel& k : kernels) {
    for (int z : k.zero_before) {
      if (buffers[z].bytes > 0 && (zeroed_at_start.empty() || !zeroed_at_start[z])) {
        check(d.MemsetD8Async(pointers[z], 0, static_cast<size_t>(buffers[z].bytes), stream),
              "cuMemsetD8Async");
      }
    }
    const compiler::LaunchDims& l = k.launch;
    if (l.grid[0] == 0 || l.grid[1] == 0 || l.grid[2] == 0) continue;
    constexpr size_t kMaxParams = compiler::kMaxKernelParams;
    void* args[kMaxParams];
    CUdeviceptr values[kMaxParams];
    int64_t wide_sizes[kMaxParams];
    int32_t narrow_sizes[kMaxParams];
    if (k.params.size() + k.size_args.size() > kMaxParams)
      throw Error("too many kernel parameters", ErrorCode::kInternal);
    for (size_t p = 0; p < k.params.size(); ++p) {
      values[p] = pointers[k.params[p]];
      args[p] = &values[p];
    }
    for (size_t i = 0; i < k.size_args.size(); ++i) {  // a generic kernel's sizes
      wide_sizes[i] = k.size_args[i];
      narrow_sizes[i] = static_cast<int32_t>(k.size_args[i]);
      args[k.params.size() + i] =
          k.size_param_bytes == 4 ? static_cast<void*>(&narrow_sizes[i]) : &wide_sizes[i];
    }
    if (programmatic_launch && int64_t{l.grid[0]} * l.grid[1] * l.grid[2] <= programmatic_launch_blocks) {
      CUlaunchAttribute attribute{};
      attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attribute.value.programmaticStreamSerializationAllowed = 1;
      CUlaunchConfig config{};
      config.gridDimX = l.grid[0];
      config.gridDimY = l.grid[1];
      config.gridDimZ = l.grid[2];
      config.blockDimX = l.block[0];
      config.blockDimY = l.block[1];
      config.blockDimZ = l.block[2];
      config.sharedMemBytes = l.shared_bytes;
      config.hStream = stream;
      config.attrs = &attribute;
      config.numAttrs = 1;
      check(d.LaunchKernelEx(&config, k.function, args, nullptr), "cuLaunchKernelEx");
    } else {
      check(d.LaunchKernel(k.function, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                           l.block[2], l.shared_bytes, stream, args, nullptr),
            "cuLaunchKernel");
    }
  }
}

struct Engine::Caches {
  OnceCache<std::string, std::shared_ptr<const LoadedProgram>> programs;
};

struct Engine::Counters {
  std::atomic<uint64_t> specialized_programs{0}, generic_programs{0}, specialized_compiles{0},
      generic_compiles{0}, generic_bindings{0}, generic_fallbacks{0};
};

std::shared_ptr<const LoadedProgram> bind_generic_program(
    const std::shared_ptr<const LoadedProgram>& program, const std::string& spec_text,
    const std::vector<int64_t>& values) {
  auto bound = std::make_shared<LoadedProgram>();
  bound->spec = spec_text;
  bound->determinism = program->determinism;
  bound->context = program->context;
  bound->deterministic = program->deterministic;
  bound->source = program->source;
  bound->generic = program;
  bound->programmatic_launch = program->programmatic_launch;
  bound->programmatic_launch_blocks = program->programmatic_launch_blocks;
  bound->buffers = program->buffers;
  for (compiler::BufferInfo& b : bound->buffers) {
    if (b.dynamic_shape.empty()) continue;
    int64_t span = 1;
    for (size_t d = 0; d < b.dynamic_shape.size(); ++d) {
      b.shape[d] = b.dynamic_shape[d].evaluate(program->sizes, values);
      b.strides[d] = b.dynamic_strides[d].evaluate(program->sizes, values);
      span = b.shape[d] == 0 || span == 0 ? 0 : span + (b.shape[d] - 1) * b.strides[d];
    }
    b.bytes = span * static_cast<int64_t>(ir::dtype_bytes(b.dtype));
    b.dynamic_shape.clear();
    b.dynamic_strides.clear();
  }
  bound->kernels = program->kernels;
  for (LoadedKernel& k : bound->kernels) {
    const int64_t points = k.points.evaluate(program->sizes, values);
    if (points > compiler::kMaxGenericPoints) {
      throw Error(spec_text + ": " + std::to_string(points) + " points exceed what a generic "
                  "kernel decodes (2^62)", ErrorCode::kInvalidArgument);
    }
    // Any grid is correct for a grid-stride loop; a thread per group of points_per_thread is
    // enough. A kernel with one linear index per thread needs them all.
    const int64_t threads = std::max<int64_t>(k.launch.block[0], 1) * std::max(k.points_per_thread, 1);
    const int64_t blocks = (points + threads - 1) / threads;
    if (k.one_index_per_thread && blocks > int64_t{0x7fffffff}) {
      throw Error(spec_text + ": " + std::to_string(blocks) + " blocks exceed the grid's x "
                  "dimension", ErrorCode::kInvalidArgument);
    }
    k.launch.grid[0] = static_cast<uint32_t>(
        k.one_index_per_thread ? blocks : std::min<int64_t>(blocks, compiler::kMaxLinearBlocks));
    k.size_args.clear();
    for (const std::string& name : k.size_params) {
      k.size_args.push_back(compiler::SizeProduct{1, {name}}.evaluate(program->sizes, values));
    }
  }
  return bound;
}

namespace {

/// ADJOINT_MEMORY_CACHE_MAX_PROGRAMS: how many loaded programs the in-memory cache keeps
/// (least recently used ones are unloaded past it; 0: unbounded). A malformed value is warned
/// about and ignored.
size_t memory_cache_capacity_from_environment() {
  const char* text = std::getenv("ADJOINT_MEMORY_CACHE_MAX_PROGRAMS");
  if (text == nullptr || *text == '\0') return Engine::kDefaultProgramCacheCapacity;
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || text[0] == '-') {
    logger().warn("ADJOINT_MEMORY_CACHE_MAX_PROGRAMS: expected a count such as 1024, got '{}'; "
                  "using {}",
                  text, Engine::kDefaultProgramCacheCapacity);
    return Engine::kDefaultProgramCacheCapacity;
  }
  return static_cast<size_t>(value);
}

/// ADJOINT_DYNAMIC: never, batch (default), auto or always; an invalid value throws on first
/// use. The default is `batch`: generic only in outer-batch axes, whose generic kernels are the
/// specialized ones with the batch as a parameter; kernels generic in spatial sizes run slower
/// than specialized ones (docs/dynamic_shapes.md, "Measured"), so they wait for `auto`.
DynamicMode dynamic_mode_from_environment() {
  const char* text = std::getenv("ADJOINT_DYNAMIC");
  if (!text || !*text) return DynamicMode::kBatch;
  return parse_dynamic_mode(text, "ADJOINT_DYNAMIC");
}

}  // namespace

Engine::Engine()
    : caches_(std::make_unique<Caches>()),
      dynamic_mode_(dynamic_mode_from_environment()),
      counters_(std::make_unique<Counters>()) {
  caches_->programs.set_capacity(memory_cache_capacity_from_environment());
}

CompileStats Engine::compile_stats() const {
  CompileStats s;
  s.specialized_programs = counters_->specialized_programs;
  s.generic_programs = counters_->generic_programs;
  s.specialized_compiles = counters_->specialized_compiles;
  s.generic_compiles = counters_->generic_compiles;
  s.generic_bindings = counters_->generic_bindings;
  s.generic_fallbacks = counters_->generic_fallbacks;
  return s;
}

void Engine::reset_compile_stats() {
  for (auto* c : {&counters_->specialized_programs, &counters_->generic_programs,
                  &counters_->specialized_compiles, &counters_->generic_compiles,
                  &counters_->generic_bindings, &counters_->generic_fallbacks})
    *c = 0;
  policy_.reset();
}

void Engine::set_program_cache_capacity(size_t programs) {
  caches_->programs.set_capacity(programs);
}
size_t Engine::program_cache_capacity() const { return caches_->programs.capacity(); }
size_t Engine::cached_programs() const { return caches_->programs.size(); }

Engine& Engine::instance() {
  static Engine engine;
  return engine;
}

std::shared_ptr<const LoadedProgram> Engine::prepare(const std::string& spec_text,
                                                     compiler::Determinism determinism) {
  return prepare(ops::parse_specialization(spec_text), determinism);
}

namespace {

/// The part of an in-memory cache key after the program: determinism and context.
std::string key_suffix(compiler::Determinism determinism, CUcontext context) {
  char text[48];
  std::snprintf(text, sizeof text, " |%s|%p", determinism_name(determinism),
                static_cast<void*>(context));
  return text;
}

/// The compute capability of the current context's device (looked up on a cache miss only).
int current_arch() {
  CUdevice device;
  check(driver().CtxGetDevice(&device), "cuCtxGetDevice");
  return compute_capability(device);
}

/// Under ADJOINT_TUNE_PROGRAMMATIC_LAUNCH=1, the most blocks a kernel may have to be launched
/// programmatically: two per multiprocessor of the current device, about one wave of the short
/// kernels whose launch latency the overlap hides. Not the default: on the H100 launching every
/// kernel so (2) was as fast or faster on the merged main (docs/runtime.md).
int64_t programmatic_launch_blocks() {
  CUdevice device;
  check(driver().CtxGetDevice(&device), "cuCtxGetDevice");
  int sms = 0;
  check(driver().DeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
        "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  return 2 * int64_t{sms};
}

}  // namespace

std::shared_ptr<const LoadedProgram> Engine::prepare(const ops::Specialization& spec,
                                                     compiler::Determinism determinism) {
  CUcontext context = current_context();
  std::string text = spec.to_string();
  return caches_->programs.get_or_create(text + key_suffix(determinism, context), [&] {
    auto step = Clock::now();
    ProgramChoice choice = choose_program(spec, policy_, dynamic_mode_);
    if (choice.generic) {
      try {
        return prepare_generic(spec, choice, determinism, context);
      } catch (const Error& e) {
        // Refused by the compiler, or (JIT off) absent from every package: specialize.
        if (e.code() != ErrorCode::kInvalidProgram &&
            !(e.code() == ErrorCode::kNotAvailable && !jit_enabled_))
          throw;
        ++counters_->generic_fallbacks;  // the compiler could not make it generic
        logger().info("'{}': no generic program ({}); specializing", text, e.what());
      }
    }
    ir::Program ir_program = spec.build_program();
    auto program = build(ir_program, text, spec.op_name(), determinism, context, current_arch(),
                         milliseconds_since(step));
    ++counters_->specialized_programs;
    if (program->source == BinarySource::kCompiled) ++counters_->specialized_compiles;
    return program;
  });
}

std::shared_ptr<const LoadedProgram> Engine::prepare_generic(const ops::Specialization& spec,
                                                             const ProgramChoice& choice,
                                                             compiler::Determinism determinism,
                                                             CUcontext context) {
  std::shared_ptr<const LoadedProgram> generic = caches_->programs.get_or_create(
      choice.key + key_suffix(determinism, context), [&] {
        auto program = build(choice.program, choice.key, spec.op_name() + "_generic",
                             determinism, context, current_arch(), 0);
        for (const LoadedKernel& k : program->kernels) {
          if (choice.require_outer_batch && !k.one_index_per_thread)  // the key keeps the error
            throw Error(choice.key + ": not lowered as an outer batch (kernel '" + k.entry +
                            "' is lower_generic's)", ErrorCode::kInvalidProgram);
        }
        ++counters_->generic_programs;
        if (program->source == BinarySource::kCompiled) ++counters_->generic_compiles;
        return program;
      });
  ++counters_->generic_bindings;
  return bind_generic_program(generic, spec.to_string(), choice.size_values);
}

std::shared_ptr<const LoadedProgram> Engine::prepare(const ir::Program& ir_program,
                                                     compiler::Determinism determinism) {
  CUcontext context = current_context();
  std::string key = "ir " + ir::to_string(ir_program) + key_suffix(determinism, context);
  std::string name = ir_program.name.empty() ? "program" : ir_program.name;
  return caches_->programs.get_or_create(key, [&] {
    return build(ir_program, "IR program '" + name + "'", name, determinism, context,
                 current_arch(), 0);
  });
}

compiler::LowerOptions lower_options(compiler::Determinism determinism, int arch) {
  compiler::LowerOptions options;
  options.determinism = determinism;
  options.arch = arch;
  options.block_size = tuning_knobs().block_size;
  options.vector_bytes = tuning_knobs().vector_bytes;
  options.streaming_loads = tuning_knobs().streaming_loads;
  options.streaming_stores = tuning_knobs().streaming_stores;
  options.reduction_split = tuning_knobs().reduction_split;
  options.thread_tile = tuning_knobs().thread_tile;
  options.tile_prefer_vector = tuning_knobs().tile_prefer_vector;
  options.tile_few_parts = tuning_knobs().tile_few_parts;
  options.split_count_vector = tuning_knobs().split_count_vector;
  options.split_tail = tuning_knobs().split_tail;
  options.fused_multiply_add = tuning_knobs().fused_multiply_add;
  options.row_groups = tuning_knobs().row_groups;
  options.row_schedule = tuning_knobs().row_schedule;
  options.stage_loops = tuning_knobs().stage_loops;
  options.partial_unroll = tuning_knobs().partial_unroll;
  options.tile_unroll = tuning_knobs().tile_unroll;
  options.tile_prefetch = tuning_knobs().tile_prefetch;
  options.tile_early_copies = tuning_knobs().tile_early_copies;
  options.tile_min_blocks = tuning_knobs().tile_min_blocks;
  options.unroll_budget = tuning_knobs().unroll_budget;
  options.runtime_unroll = tuning_knobs().runtime_unroll;
  options.reduction_schedule = tuning_knobs().reduction_schedule;
  options.block_reduction = tuning_knobs().block_reduction;
  options.block_stage_width = tuning_knobs().block_stage_width;
  options.block_shared_vectors = tuning_knobs().block_shared_vectors;
  options.split_warp_combine_points = tuning_knobs().split_warp_combine_points;
  options.binned_channels_last_min = tuning_knobs().binned_channels_last_min;
  options.binned_gather_chunk = tuning_knobs().binned_gather_chunk;
  options.binned_taps_walks_max = tuning_knobs().binned_taps_walks_max;
  options.binned_scan_digits = tuning_knobs().binned_scan_digits;
  options.binned_subbucket_records = tuning_knobs().binned_subbucket_records;
  options.gathered_rows_min = tuning_knobs().gathered_rows_min;
  options.tiled_transpose_min = tuning_knobs().tiled_transpose_min;
  options.transposed_store = tuning_knobs().transposed_store;
  options.gathered_lanes_min = tuning_knobs().gathered_lanes_min;
  options.gathered_lane_width = tuning_knobs().gathered_lane_width;
  options.binned_records_per_cell_min = tuning_knobs().binned_records_per_cell_min;
  if (tuning_knobs().split_threads_log2 != 0)
    options.split_target_threads = int64_t{1} << tuning_knobs().split_threads_log2;
  return options;
}

std::shared_ptr<const LoadedProgram> Engine::build(const ir::Program& ir_program,
                                                   const std::string& spec_text,
                                                   const std::string& name,
                                                   compiler::Determinism determinism,
                                                   CUcontext context, int arch,
                                                   double build_ir_ms) {
  const auto start = Clock::now();
  PrepareProfile profile;
  auto program = std::make_shared<LoadedProgram>();
  program->spec = spec_text;
  program->determinism = determinism;
  program->context = context;
  profile.build_ir_ms = build_ir_ms;
  auto step = Clock::now();
  const DumpSettings& dump = dump_settings();
  // Dump files are named by everything that identifies the program (printed only when dumping).
  std::string dump_key =
      dump.any() ? name + "-" + short_hash(program->spec + ir::to_string(ir_program) +
                                           determinism_name(determinism) + std::to_string(arch))
                 : name;
  if (dump.ir)
    write_dump(dump, dump_key + ".ir.txt", program->spec + "\n" + ir::to_string(ir_program));

  step = Clock::now();
  compiler::LowerOptions options = lower_options(determinism, arch);
  options.record_passes = dump.passes;
  compiler::CompiledProgram compiled = compiler::lower(ir_program, options);
  profile.lower_ms = milliseconds_since(step);
  if (dump.passes) write_dump(dump, dump_key + ".passes.txt", compiled.pass_dump);
  program->buffers = compiled.buffers;
  program->deterministic = compiled.deterministic;
  program->sizes = compiled.sizes;
  program->programmatic_launch =
      tuning_knobs().programmatic_launch > 0 && arch >= 90 && driver().LaunchKernelEx != nullptr;
  if (program->programmatic_launch) {
    program->programmatic_launch_blocks = tuning_knobs().programmatic_launch == 2
                                              ? std::numeric_limits<int64_t>::max()
                                              : programmatic_launch_blocks();
  }

  step = Clock::now();
  BinaryRequest request;
  request.program = name;
  request.arch = arch;
  request.jit_enabled = jit_enabled_;
  request.spec = program->spec;
  request.dump_key = dump_key;
  request.compile_threads = compile_threads_from_environment();
  request.compile_units = compile_units_from_environment(request.compile_threads);
  request.split_compile = split_compile_from_environment();
  request.nvrtc_options = nvrtc_options_from_environment();
  request.compile_huge_pages = compile_huge_pages_from_environment();
  for (const compiler::CompiledKernel& k : compiled.kernels) {
    if (dump.cuda) write_dump(dump, dump_key + "." + k.entry + ".cu", k.source);
    request.kernels.push_back({k.entry, k.source});
  }
  AcquireProfile acquired;
  std::vector<KernelImage> images = acquire_kernel_images(request, disk_cache(), &acquired);
  profile.binaries_ms = milliseconds_since(step);
  profile.nvrtc_load_ms = acquired.nvrtc_load_ms;
  profile.compile_wall_ms = acquired.compile_wall_ms;
  profile.units_compiled = acquired.units_compiled;
  profile.compile_threads = acquired.threads;
  profile.memory_release_ms = acquired.memory_release_ms;

  step = Clock::now();
  program->kernels.resize(compiled.kernels.size());
  bool any_compiled = false, all_packaged = !images.empty();
  for (const KernelImage& image : images) {
    any_compiled |= image.source == BinarySource::kCompiled;
    all_packaged &= image.source == BinarySource::kPackage;
    profile.compile_ms += image.compile_milliseconds;
    CUmodule module = nullptr;
    check(driver().ModuleLoadData(&module, image.bytes.data()), "cuModuleLoadData");
    program->modules.push_back(module);
    for (size_t index : image.kernels) {
      const compiler::CompiledKernel& k = compiled.kernels[index];
      LoadedKernel& loaded = program->kernels[index];
      loaded.entry = k.entry;
      check(driver().ModuleGetFunction(&loaded.function, module, k.entry.c_str()),
            "cuModuleGetFunction");
      loaded.launch = k.launch;
      loaded.size_params = k.size_params;
      loaded.size_param_bytes = k.size_param_bytes;
      loaded.points = k.points;
      loaded.points_per_thread = k.points_per_thread;
      loaded.one_index_per_thread = k.one_index_per_thread;
      for (const std::string& name : k.params) loaded.params.push_back(program->buffer_index(name));
      for (const std::string& name : k.zero_before) {
        loaded.zero_before.push_back(program->buffer_index(name));
      }
    }
  }
  profile.load_modules_ms = milliseconds_since(step);
  program->compile_milliseconds = profile.compile_ms;
  program->source = any_compiled   ? BinarySource::kCompiled
                    : all_packaged ? BinarySource::kPackage
                                   : BinarySource::kDiskCache;

  profile.total_ms = milliseconds_since(start);
  profile.source = program->source;
  profile.kernels = program->kernels.size();
  profile.images = images.size();
  last_profile = profile;
  logger().debug(
      "prepared '{}' for sm_{} in {:.2f} ms from {} ({} kernels, {} modules): IR {:.3f}, "
      "lower {:.3f}, binaries {:.3f} (NVRTC load {:.1f}, {} units compiled on {} threads in "
      "{:.1f} ms wall, {:.1f} ms summed), modules {:.3f} ms",
      program->spec, arch, profile.total_ms, binary_source_name(program->source), profile.kernels,
      profile.images, profile.build_ir_ms, profile.lower_ms, profile.binaries_ms,
      profile.nvrtc_load_ms, profile.units_compiled, profile.compile_threads,
      profile.compile_wall_ms, profile.compile_ms, profile.load_modules_ms);
  return program;
}

const PrepareProfile& last_prepare_profile() {
  return last_profile;
}

}  // namespace adjoint::runtime
