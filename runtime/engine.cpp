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
#include "ir/error.h"
#include "ir/printer.h"
#include "runtime/compile_huge_pages.h"
#include "runtime/compile_worker.h"
#include "runtime/disk_cache.h"
#include "runtime/driver.h"
#include "runtime/dump.h"
#include "runtime/kernel_binary.h"
#include "runtime/logging.h"
#include "runtime/memory_cache.h"
#include "runtime/prepare_profile.h"
#include "runtime/temporary_arena.h"
#include "runtime/tuning_knobs.h"

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
  /// Places every temporary of `program` in one allocation (its temporary_arena, planned at
  /// load), sets their pointers and zeroes the ones placed first with one memset. Returns, per
  /// buffer, whether that memset zeroed it (null: no temporaries).
  const char* place_in_arena(const LoadedProgram& program, CUdeviceptr* pointers) {
    const TemporaryArena& arena = program.temporary_arena;
    if (arena.bytes == 0) return nullptr;
    const CUdeviceptr base = allocate(arena.bytes);
    for (size_t i = 0; i < program.buffers.size(); ++i) {
      const compiler::BufferInfo& b = program.buffers[i];
      if (b.role == ir::TensorRole::kTemporary && b.bytes > 0) pointers[i] = base + arena.offsets[i];
    }
    if (arena.zeroed_bytes > 0) {
      check(driver().MemsetD8Async(base, 0, arena.zeroed_bytes, stream_), "cuMemsetD8Async");
    }
    return arena.zeroed_at_start.data();
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
  const char* zeroed_at_start = nullptr;
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
      if (buffers[z].bytes > 0 && (zeroed_at_start == nullptr || !zeroed_at_start[z])) {
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
  // Which temporaries go first depends on the kernels, planned at load; where, on these sizes.
  // (A generic program made without Engine::build, as in tests, has no plan: planned here.)
  const std::vector<char>& zeroed_first = program->temporary_arena.zeroed_first;
  bound->temporary_arena = zeroed_first.size() == program->buffers.size()
                               ? place_temporaries(bound->buffers, zeroed_first)
                               : plan_temporary_arena(bound->buffers, bound->kernels);
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
    ir::Program ir_program = spec.build_program(build_options());
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
  apply_tuning_knobs(tuning_knobs(), options);
  return options;
}

ops::BuildOptions build_options() {
  ops::BuildOptions options;
  apply_tuning_knobs(tuning_knobs(), options);
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
  request.compile_processes = compile_processes_from_environment();
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
  program->temporary_arena = plan_temporary_arena(program->buffers, program->kernels);
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
