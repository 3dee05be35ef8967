// The C API (include/adjoint/adjoint_c.h): each function catches every exception, stores its
// message in a thread-local string and returns the matching status code.
#include "adjoint/adjoint_c.h"

#include <cmath>
#include <exception>
#include <string>

#include "adjoint/adjoint.h"
#include "adjoint/version.h"
#include "ir/error.h"
#include "runtime/engine.h"

struct adjoint_program {
  std::shared_ptr<const adjoint::runtime::LoadedProgram> program;
};

namespace {

thread_local std::string last_error;

template <typename F>
adjoint_status guarded(F&& body) {
  try {
    last_error.clear();
    body();
    return ADJOINT_OK;
  } catch (const adjoint::Error& e) {
    last_error = e.what();
    return static_cast<adjoint_status>(static_cast<int>(e.code()));
  } catch (const std::exception& e) {
    last_error = std::string("internal error: ") + e.what();
    return ADJOINT_ERROR_INTERNAL;
  } catch (...) {
    last_error = "internal error: unknown exception";
    return ADJOINT_ERROR_INTERNAL;
  }
}

void require(bool ok, const std::string& what) {
  if (!ok) throw adjoint::Error(what);
}

adjoint::TensorRef to_ref(const adjoint_tensor& t, const char* name) {
  require(t.rank >= 0 && t.rank <= ADJOINT_MAX_RANK,
          std::string("tensor '") + name + "': rank " + std::to_string(t.rank) +
              ", expected 0.." + std::to_string(ADJOINT_MAX_RANK));
  require(t.dtype >= 0 && t.dtype <= ADJOINT_BOOL,
          std::string("tensor '") + name + "': dtype value " + std::to_string(t.dtype) +
              " is not an adjoint_dtype");
  adjoint::TensorRef r;
  r.data = static_cast<CUdeviceptr>(t.data);
  r.dtype = static_cast<adjoint::DType>(t.dtype);
  r.shape.assign(t.shape, t.shape + t.rank);
  r.strides.assign(t.strides, t.strides + t.rank);
  return r;
}

adjoint::compiler::Determinism to_determinism(int d) {
  require(d == ADJOINT_DETERMINISM_DEFAULT || d == ADJOINT_DETERMINISM_ALLOW_ATOMICS,
          "determinism: expected 0 (default) or 1 (allow atomics), got " + std::to_string(d));
  return d == 0 ? adjoint::compiler::Determinism::kDefault
                : adjoint::compiler::Determinism::kAllowAtomics;
}

/// Views of the caller's descriptors for LoadedProgram::launch, checked like to_ref but with
/// nothing copied: the hot path of adjoint_launch (Python's compiled launcher calls it).
template <typename Launch>
void launch_views(int count, const char* const* names, const adjoint_tensor* tensors,
                  Launch&& launch) {
  require(count >= 0 && (count == 0 || (names && tensors)),
          "launch: names and tensors must be non-null arrays of `count` entries");
  constexpr int kInline = 16;
  adjoint::runtime::TensorView inline_views[kInline];
  std::vector<adjoint::runtime::TensorView> heap_views;
  adjoint::runtime::TensorView* views = inline_views;
  if (count > kInline) {
    heap_views.resize(static_cast<size_t>(count));
    views = heap_views.data();
  }
  for (int i = 0; i < count; ++i) {
    require(names[i] != nullptr, "launch: names[" + std::to_string(i) + "] is null");
    const adjoint_tensor& t = tensors[i];
    require(t.rank >= 0 && t.rank <= ADJOINT_MAX_RANK,
            std::string("tensor '") + names[i] + "': rank " + std::to_string(t.rank) +
                ", expected 0.." + std::to_string(ADJOINT_MAX_RANK));
    require(t.dtype >= 0 && t.dtype <= ADJOINT_BOOL,
            std::string("tensor '") + names[i] + "': dtype value " + std::to_string(t.dtype) +
                " is not an adjoint_dtype");
    views[i] = adjoint::runtime::TensorView{names[i],
                                            static_cast<CUdeviceptr>(t.data),
                                            static_cast<adjoint::ir::DType>(t.dtype),
                                            t.rank,
                                            t.shape,
                                            t.strides};
  }
  launch(views, count);
}

}  // namespace

extern "C" {

const char* adjoint_version(void) { return ADJOINT_VERSION_STRING; }
const char* adjoint_last_error(void) { return last_error.c_str(); }

adjoint_status adjoint_prepare(const char* spec, int determinism, adjoint_program** out) {
  return guarded([&] {
    require(spec && out, "adjoint_prepare: spec and out must not be null");
    auto program = adjoint::runtime::Engine::instance().prepare(std::string(spec),
                                                                to_determinism(determinism));
    *out = new adjoint_program{std::move(program)};
  });
}

adjoint_status adjoint_program_tensors(const adjoint_program* program, int* count) {
  return guarded([&] {
    require(program && count, "adjoint_program_tensors: null argument");
    int n = 0;
    for (const auto& b : program->program->buffers) n += b.role != adjoint::ir::TensorRole::kTemporary;
    *count = n;
  });
}

adjoint_status adjoint_program_tensor_info(const adjoint_program* program, int index,
                                           const char** name, int* role, adjoint_tensor* expected) {
  return guarded([&] {
    require(program && name && role && expected, "adjoint_program_tensor_info: null argument");
    int n = 0;
    for (const auto& b : program->program->buffers) {
      if (b.role == adjoint::ir::TensorRole::kTemporary) continue;
      if (n++ != index) continue;
      *name = b.name.c_str();
      *role = b.role == adjoint::ir::TensorRole::kInput ? 0 : 1;
      *expected = adjoint_tensor{};
      expected->dtype = static_cast<int32_t>(b.dtype);
      expected->rank = static_cast<int32_t>(b.shape.size());
      for (size_t d = 0; d < b.shape.size() && d < ADJOINT_MAX_RANK; ++d) {
        expected->shape[d] = b.shape[d];
        expected->strides[d] = b.strides[d];
      }
      return;
    }
    throw adjoint::Error("adjoint_program_tensor_info: index " + std::to_string(index) +
                         " out of range 0.." + std::to_string(n - 1));
  });
}

adjoint_status adjoint_program_is_deterministic(const adjoint_program* program, int* result) {
  return guarded([&] {
    require(program && result, "adjoint_program_is_deterministic: null argument");
    *result = program->program->deterministic ? 1 : 0;
  });
}

adjoint_status adjoint_launch(adjoint_program* program, int count, const char* const* names,
                              const adjoint_tensor* tensors, void* stream) {
  return guarded([&] {
    require(program != nullptr, "adjoint_launch: program is null");
    launch_views(count, names, tensors, [&](const adjoint::runtime::TensorView* views, int n) {
      program->program->launch(views, n, static_cast<CUstream>(stream));
    });
  });
}

adjoint_status adjoint_program_release(adjoint_program* program) {
  return guarded([&] { delete program; });
}

adjoint_status adjoint_run(const char* spec, int determinism, int count, const char* const* names,
                           const adjoint_tensor* tensors, void* stream) {
  return guarded([&] {
    require(spec != nullptr, "adjoint_run: spec is null");
    auto program = adjoint::runtime::Engine::instance().prepare(std::string(spec),
                                                                to_determinism(determinism));
    launch_views(count, names, tensors, [&](const adjoint::runtime::TensorView* views, int n) {
      program->launch(views, n, static_cast<CUstream>(stream));
    });
  });
}

adjoint_status adjoint_upsample_nearest2d_backward(const adjoint_tensor* grad_output,
                                                   const adjoint_tensor* grad_input,
                                                   const int64_t* output_size,
                                                   const int64_t* input_size, double scales_h,
                                                   double scales_w, void* stream) {
  return guarded([&] {
    require(grad_output && grad_input && output_size && input_size,
            "upsample_nearest2d_backward: null argument");
    auto scale = [](double s) -> std::optional<double> {
      if (std::isnan(s) || s <= 0) return std::nullopt;
      return s;
    };
    adjoint::upsample_nearest2d_backward(
        to_ref(*grad_output, "grad_output"), to_ref(*grad_input, "grad_input"),
        {output_size[0], output_size[1]},
        {input_size[0], input_size[1], input_size[2], input_size[3]}, scale(scales_h),
        scale(scales_w), static_cast<CUstream>(stream));
  });
}

adjoint_status adjoint_load_package(const char* path) {
  return guarded([&] {
    require(path != nullptr, "adjoint_load_package: path is null");
    adjoint::load_package(path);
  });
}

adjoint_status adjoint_set_jit_enabled(int enabled) {
  return guarded([&] { adjoint::set_jit_enabled(enabled != 0); });
}

adjoint_status adjoint_set_dynamic_shapes(const char* mode) {
  return guarded([&] {
    if (!mode) throw adjoint::Error("adjoint_set_dynamic_shapes: mode is NULL; expected never, batch, auto or always");
    adjoint::runtime::DynamicMode parsed =
        adjoint::runtime::parse_dynamic_mode(mode, "adjoint_set_dynamic_shapes: mode");
    adjoint::runtime::Engine::instance().set_dynamic_mode(parsed);
  });
}

adjoint_status adjoint_get_compile_stats(adjoint_compile_stats* stats) {
  return guarded([&] {
    if (!stats) throw adjoint::Error("adjoint_get_compile_stats: stats is NULL");
    adjoint::CompileStats s = adjoint::compile_stats();
    *stats = adjoint_compile_stats{s.specialized_programs, s.generic_programs,
                                   s.specialized_compiles, s.generic_compiles,
                                   s.generic_bindings,     s.generic_fallbacks};
  });
}

adjoint_status adjoint_reset_compile_stats(void) {
  return guarded([&] { adjoint::reset_compile_stats(); });
}

}  // extern "C"
