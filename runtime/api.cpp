// The public C++ API (include/adjoint/adjoint.h) over the engine. The typed entry points keep a
// small cache keyed by their raw arguments so that a warm call builds no specialization text:
// a hash of a few integers, a lookup, and the launch. Every entry point is a function-try-block
// ending in rethrow_as_error, so no other exception type (std::bad_alloc, std::length_error,
// ...) reaches the embedding application: it gets an adjoint::Error naming the entry point.
#include <cmath>
#include <cstring>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <unordered_map>

#include "adjoint/adjoint.h"
#include "adjoint/version.h"
#include "ir/error.h"
#include "ops/registry.h"
#include "runtime/driver.h"
#include "runtime/engine.h"
#include "runtime/package.h"

namespace adjoint {
namespace {

compiler::Determinism to_compiler(Determinism d) {
  return d == Determinism::kDefault ? compiler::Determinism::kDefault
                                    : compiler::Determinism::kAllowAtomics;
}

runtime::BoundTensor bind(const std::string& name, const TensorRef& t) {
  if (static_cast<int32_t>(t.dtype) < 0 || static_cast<int32_t>(t.dtype) > 6) {
    throw Error("tensor '" + name + "': dtype value " + std::to_string(static_cast<int>(t.dtype)) +
                " is not a valid adjoint::DType");
  }
  if (!t.strides.empty() && t.strides.size() != t.shape.size()) {
    throw Error("tensor '" + name + "': " + std::to_string(t.strides.size()) +
                " strides given for " + std::to_string(t.shape.size()) + " dimensions");
  }
  return runtime::BoundTensor{name, t.data, static_cast<ir::DType>(t.dtype), t.shape, t.strides};
}

std::vector<runtime::BoundTensor> bind_all(const Bindings& tensors) {
  std::vector<runtime::BoundTensor> out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) out.push_back(bind(name, t));
  return out;
}

/// Typed-call cache: raw argument bytes -> loaded program.
class TypedCache {
 public:
  std::shared_ptr<const runtime::LoadedProgram> find(const std::string& key) {
    std::shared_lock lock(mutex_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }
  void insert(const std::string& key, std::shared_ptr<const runtime::LoadedProgram> p) {
    std::unique_lock lock(mutex_);
    // Bounded like the engine's cache, so that it cannot keep programs the engine unloaded
    // alive: past the engine's capacity it starts over (a miss here is an engine lookup).
    size_t capacity = runtime::Engine::instance().program_cache_capacity();
    if (capacity != 0 && map_.size() >= capacity) map_.clear();
    map_.emplace(key, std::move(p));
  }

 private:
  std::shared_mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<const runtime::LoadedProgram>> map_;
};

template <typename T>
void append_bytes(std::string& key, const T& value) {
  key.append(reinterpret_cast<const char*>(&value), sizeof value);
}

bool is_channels_last(const TensorRef& t) {
  if (t.strides.empty() || t.shape.size() < 3) return false;
  return t.strides == ir::channels_last_strides(t.shape) &&
         t.strides != ir::contiguous_strides(t.shape);
}

/// Called from a catch block: rethrows an adjoint::Error unchanged and any other exception as an
/// adjoint::Error (kInternal) naming the entry point `where` and the original message.
[[noreturn]] void rethrow_as_error(const char* where) {
  try {
    throw;
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw Error(std::string(where) + ": out of host memory (std::bad_alloc)", ErrorCode::kInternal);
  } catch (const std::exception& e) {
    throw Error(std::string(where) + ": internal error: " + e.what(), ErrorCode::kInternal);
  } catch (...) {
    throw Error(std::string(where) + ": internal error: an exception of unknown type",
                ErrorCode::kInternal);
  }
}

}  // namespace

Program Program::prepare(const std::string& spec, Determinism determinism) try {
  return Program(runtime::Engine::instance().prepare(spec, to_compiler(determinism)));
} catch (...) {
  rethrow_as_error("adjoint::Program::prepare");
}

void Program::launch(const Bindings& tensors, CUstream stream) const try {
  impl_->launch(bind_all(tensors), stream);
} catch (...) {
  rethrow_as_error("adjoint::Program::launch");
}

std::vector<TensorInfo> Program::tensors() const try {
  std::vector<TensorInfo> out;
  for (const compiler::BufferInfo& b : impl_->buffers) {
    if (b.role == ir::TensorRole::kTemporary) continue;
    out.push_back(TensorInfo{b.name, b.role == ir::TensorRole::kOutput,
                             static_cast<DType>(b.dtype), b.shape, b.strides});
  }
  return out;
} catch (...) {
  rethrow_as_error("adjoint::Program::tensors");
}

bool Program::deterministic() const { return impl_->deterministic; }
const std::string& Program::spec() const { return impl_->spec; }

void run(const std::string& spec, const Bindings& tensors, CUstream stream,
         Determinism determinism) try {
  Program::prepare(spec, determinism).launch(tensors, stream);
} catch (...) {
  rethrow_as_error("adjoint::run");
}

void upsample_nearest2d_backward(const TensorRef& grad_output, const TensorRef& grad_input,
                                 std::array<int64_t, 2> output_size,
                                 std::array<int64_t, 4> input_size,
                                 std::optional<double> scales_h, std::optional<double> scales_w,
                                 CUstream stream) try {
  static TypedCache cache;
  bool channels_last = is_channels_last(grad_output);
  // Other strides are read in place (a specialization with grad_output_strides).
  bool strided = !channels_last && !grad_output.strides.empty() &&
                 grad_output.strides != ir::contiguous_strides(grad_output.shape);
  std::string key;
  key.reserve(96);
  CUcontext context = runtime::current_context();
  append_bytes(key, context);
  append_bytes(key, grad_output.dtype);
  append_bytes(key, channels_last);
  append_bytes(key, output_size);
  append_bytes(key, input_size);
  double sh = scales_h.value_or(NAN), sw = scales_w.value_or(NAN);
  append_bytes(key, sh);
  append_bytes(key, sw);
  if (strided) {
    for (int64_t s : grad_output.strides) append_bytes(key, s);
  }
  std::shared_ptr<const runtime::LoadedProgram> program = cache.find(key);
  if (!program) {
    std::map<std::string, std::string> attrs{
        {"dtype", std::string(ir::dtype_name(static_cast<ir::DType>(grad_output.dtype)))},
        {"input_size", ops::format_ints({input_size.begin(), input_size.end()})},
        {"output_size", ops::format_ints({output_size.begin(), output_size.end()})},
        {"scales_h", ops::format_optional_float(scales_h)},
        {"scales_w", ops::format_optional_float(scales_w)},
        {"layout", channels_last ? "channels_last" : "contiguous"}};
    if (strided) attrs["grad_output_strides"] = ops::format_ints(grad_output.strides);
    ops::Specialization spec = ops::make_specialization("upsample_nearest2d_backward", attrs);
    program = runtime::Engine::instance().prepare(spec, compiler::Determinism::kDefault);
    cache.insert(key, program);
  }
  runtime::BoundTensor bound[2] = {bind("grad_output", grad_output), bind("grad_input", grad_input)};
  program->launch({bound[0], bound[1]}, stream);
} catch (...) {
  rethrow_as_error("adjoint::upsample_nearest2d_backward");
}

void load_package(const std::string& directory) try {
  runtime::PackageRegistry::instance().add(directory);
} catch (...) {
  rethrow_as_error("adjoint::load_package");
}

void set_jit_enabled(bool enabled) try {
  runtime::Engine::instance().set_jit_enabled(enabled);
} catch (...) {
  rethrow_as_error("adjoint::set_jit_enabled");
}

void set_dynamic_shapes(DynamicShapes mode) try {
  runtime::Engine::instance().set_dynamic_mode(
      mode == DynamicShapes::kNever    ? runtime::DynamicMode::kNever
      : mode == DynamicShapes::kAlways ? runtime::DynamicMode::kAlways
      : mode == DynamicShapes::kBatch  ? runtime::DynamicMode::kBatch
                                       : runtime::DynamicMode::kAuto);
} catch (...) {
  rethrow_as_error("adjoint::set_dynamic_shapes");
}

CompileStats compile_stats() try {
  runtime::CompileStats s = runtime::Engine::instance().compile_stats();
  return CompileStats{s.specialized_programs, s.generic_programs, s.specialized_compiles,
                      s.generic_compiles,     s.generic_bindings, s.generic_fallbacks};
} catch (...) {
  rethrow_as_error("adjoint::compile_stats");
}

void reset_compile_stats() try {
  runtime::Engine::instance().reset_compile_stats();
} catch (...) {
  rethrow_as_error("adjoint::reset_compile_stats");
}

const char* version() { return ADJOINT_VERSION_STRING; }

}  // namespace adjoint
