// Engine: the in-memory cache, binary acquisition (package, disk cache, NVRTC) and launches.
#include "runtime/engine.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <unordered_map>

#include <xxhash.h>

#include "ir/error.h"
#include "ir/printer.h"
#include "runtime/disk_cache.h"
#include "runtime/driver.h"
#include "runtime/dump.h"
#include "runtime/logging.h"
#include "runtime/memory_cache.h"
#include "runtime/nvrtc.h"
#include "runtime/package.h"

namespace adjoint::runtime {
namespace {

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

struct Binary {
  std::vector<char> bytes;  // cubin, or NUL-terminated PTX
  BinarySource source;
  double compile_ms = 0;
};

/// Writes the source of a failed compile where the user can find it; returns the path.
std::string write_failed_source(const std::string& entry, const std::string& source) {
  std::filesystem::path dir = DiskCache::directory_from_environment();
  if (dir.empty()) dir = std::filesystem::temp_directory_path() / "adjoint";
  dir /= "failed";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::filesystem::path path = dir / (entry + "-" + short_hash(source) + ".cu");
  std::ofstream(path) << source;
  return path.string();
}

Binary acquire_binary(const compiler::CompiledKernel& kernel, int arch, bool jit_enabled,
                      const std::string& spec, const std::string& dump_key) {
  if (auto packaged = PackageRegistry::instance().find(package_kernel_key(kernel.source), arch)) {
    Binary b{std::move(packaged->bytes), BinarySource::kPackage};
    if (packaged->is_ptx) b.bytes.push_back('\0');
    return b;
  }
  if (!jit_enabled) {
    throw Error("no kernel package covers '" + spec + "' (kernel " + kernel.entry + ", sm_" +
                    std::to_string(arch) + ") and JIT compilation is disabled",
                ErrorCode::kNotAvailable);
  }
  Nvrtc& nvrtc = Nvrtc::instance();
  CompileRequest request{kernel.source, kernel.entry + ".cu", arch};
  std::string key = disk_cache_key(kernel.source, nvrtc.options_for(request), nvrtc.version(), arch);
  static DiskCache disk = DiskCache::from_environment();
  if (auto hit = disk.load(key)) return Binary{std::move(*hit), BinarySource::kDiskCache};
  CompileResult result;
  try {
    result = nvrtc.compile(request);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kCompileFailed) throw;
    std::string path = write_failed_source(kernel.entry, kernel.source);
    throw Error(std::string(e.what()) + "\nthe CUDA source was written to " + path + " (op '" +
                    spec + "')",
                ErrorCode::kCompileFailed);
  }
  const DumpSettings& dump = dump_settings();
  if (dump.log) write_dump(dump, dump_key + "." + kernel.entry + ".log", result.log);
  if (dump.ptx && !result.ptx.empty()) write_dump(dump, dump_key + "." + kernel.entry + ".ptx", result.ptx);
  if (dump.sass) write_sass_dump(dump, dump_key + "." + kernel.entry + ".sass", result.cubin);
  Binary b;
  b.source = BinarySource::kCompiled;
  b.compile_ms = result.milliseconds;
  if (!result.cubin.empty()) {
    b.bytes = std::move(result.cubin);
  } else {
    b.bytes.assign(result.ptx.begin(), result.ptx.end());
    b.bytes.push_back('\0');
  }
  disk.store(key, b.bytes);
  return b;
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
  Driver& d = driver();
  std::vector<CUdeviceptr> pointers(buffers.size(), 0);
  std::vector<bool> bound(buffers.size(), false);
  for (const BoundTensor& t : tensors) {
    int i = buffer_index(t.name);
    if (i < 0 || buffers[i].role == ir::TensorRole::kTemporary) {
      std::string names;
      for (const auto& b : buffers) {
        if (b.role != ir::TensorRole::kTemporary) names += (names.empty() ? "" : ", ") + b.name;
      }
      throw Error(spec + ": no tensor named '" + t.name + "' to bind; expected " + names);
    }
    const compiler::BufferInfo& b = buffers[i];
    std::vector<int64_t> strides = t.strides.empty() ? ir::contiguous_strides(t.shape) : t.strides;
    if (t.dtype != b.dtype) {
      throw Error(spec + ": tensor '" + t.name + "' has dtype " +
                  std::string(ir::dtype_name(t.dtype)) + ", expected " +
                  std::string(ir::dtype_name(b.dtype)));
    }
    if (t.shape != b.shape) {
      throw Error(spec + ": tensor '" + t.name + "' has shape " + shape_text(t.shape) +
                  ", expected " + shape_text(b.shape));
    }
    bool empty = b.bytes == 0;
    if (!empty && strides != b.strides) {
      throw Error(spec + ": tensor '" + t.name + "' has strides " + shape_text(strides) +
                  ", expected " + shape_text(b.strides) + " (the layout of the specialization)");
    }
    if (!empty && t.data == 0) throw Error(spec + ": tensor '" + t.name + "' has a null pointer");
    pointers[i] = t.data;
    bound[i] = true;
  }
  std::vector<DeviceAllocation> temporaries;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].role == ir::TensorRole::kTemporary) {
      if (buffers[i].bytes > 0) {
        temporaries.push_back(allocate_device_memory(buffers[i].bytes, stream));
        pointers[i] = temporaries.back().pointer;
      }
    } else if (!bound[i]) {
      throw Error(spec + ": tensor '" + buffers[i].name + "' (" +
                  std::string(ir::tensor_role_name(buffers[i].role)) + ") was not bound");
    }
  }
  for (const LoadedKernel& k : kernels) {
    for (int z : k.zero_before) {
      if (buffers[z].bytes > 0) {
        check(d.MemsetD8Async(pointers[z], 0, static_cast<size_t>(buffers[z].bytes), stream),
              "cuMemsetD8Async");
      }
    }
    const compiler::LaunchDims& l = k.launch;
    if (l.grid[0] == 0 || l.grid[1] == 0 || l.grid[2] == 0) continue;
    void* args[16];
    CUdeviceptr values[16];
    if (k.params.size() > 16) throw Error("too many kernel parameters", ErrorCode::kInternal);
    for (size_t p = 0; p < k.params.size(); ++p) {
      values[p] = pointers[k.params[p]];
      args[p] = &values[p];
    }
    check(d.LaunchKernel(k.function, l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1],
                         l.block[2], l.shared_bytes, stream, args, nullptr),
          "cuLaunchKernel");
  }
  for (const DeviceAllocation& a : temporaries) free_device_memory(a, stream);
}

struct Engine::Caches {
  OnceCache<std::string, std::shared_ptr<const LoadedProgram>> programs;
};

Engine::Engine() : caches_(std::make_unique<Caches>()) {}

Engine& Engine::instance() {
  static Engine engine;
  return engine;
}

std::shared_ptr<const LoadedProgram> Engine::prepare(const std::string& spec_text,
                                                     compiler::Determinism determinism) {
  return prepare(ops::parse_specialization(spec_text), determinism);
}

std::shared_ptr<const LoadedProgram> Engine::prepare(const ops::Specialization& spec,
                                                     compiler::Determinism determinism) {
  CUcontext context = current_context();
  CUdevice device;
  check(driver().CtxGetDevice(&device), "cuCtxGetDevice");
  int arch = compute_capability(device);
  std::string text = spec.to_string();
  char ctx_text[32];
  std::snprintf(ctx_text, sizeof ctx_text, "%p", static_cast<void*>(context));
  std::string key = text + " |" + determinism_name(determinism) + "|" + ctx_text;
  return caches_->programs.get_or_create(
      key, [&] { return build(spec, determinism, context, arch); });
}

std::shared_ptr<const LoadedProgram> Engine::build(const ops::Specialization& spec,
                                                   compiler::Determinism determinism,
                                                   CUcontext context, int arch) {
  auto start = std::chrono::steady_clock::now();
  auto program = std::make_shared<LoadedProgram>();
  program->spec = spec.to_string();
  program->determinism = determinism;
  program->context = context;
  ir::Program ir_program = spec.build_program();
  const DumpSettings& dump = dump_settings();
  std::string dump_key = spec.op_name() + "-" +
                         short_hash(program->spec + determinism_name(determinism) + std::to_string(arch));
  if (dump.ir) write_dump(dump, dump_key + ".ir.txt", program->spec + "\n" + ir::to_string(ir_program));
  compiler::LowerOptions options;
  options.determinism = determinism;
  options.arch = arch;
  options.record_passes = dump.passes;
  compiler::CompiledProgram compiled = compiler::lower(ir_program, options);
  if (dump.passes) write_dump(dump, dump_key + ".passes.txt", compiled.pass_dump);
  program->buffers = compiled.buffers;
  program->deterministic = compiled.deterministic;
  program->source = BinarySource::kDiskCache;
  bool any_compiled = false, all_packaged = !compiled.kernels.empty();
  for (const compiler::CompiledKernel& k : compiled.kernels) {
    if (dump.cuda) write_dump(dump, dump_key + "." + k.entry + ".cu", k.source);
    Binary binary = acquire_binary(k, arch, jit_enabled_, program->spec, dump_key);
    any_compiled |= binary.source == BinarySource::kCompiled;
    all_packaged &= binary.source == BinarySource::kPackage;
    program->compile_milliseconds += binary.compile_ms;
    CUmodule module = nullptr;
    check(driver().ModuleLoadData(&module, binary.bytes.data()), "cuModuleLoadData");
    program->modules.push_back(module);
    LoadedKernel loaded;
    loaded.entry = k.entry;
    check(driver().ModuleGetFunction(&loaded.function, module, k.entry.c_str()),
          "cuModuleGetFunction");
    loaded.launch = k.launch;
    for (const std::string& name : k.params) loaded.params.push_back(program->buffer_index(name));
    for (const std::string& name : k.zero_before) {
      loaded.zero_before.push_back(program->buffer_index(name));
    }
    program->kernels.push_back(std::move(loaded));
  }
  if (any_compiled) program->source = BinarySource::kCompiled;
  if (all_packaged) program->source = BinarySource::kPackage;
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  logger().debug("prepared '{}' for sm_{} in {:.2f} ms ({} kernels)", program->spec, arch, ms,
                 program->kernels.size());
  return program;
}

}  // namespace adjoint::runtime
