// Finds NVRTC without loading it (the dynamic loader's search order, /etc/ld.so.cache, ELF
// build-ids), loads exactly the file found, resolves its entry points with dlsym into one table,
// and compiles requests with the embedded templates as named headers and adjoint's options.
#include "runtime/nvrtc.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <variant>

#include <fmt/format.h>

#include "compiler/embedded_templates.h"
#include "ir/error.h"
#include "runtime/library_search.h"
#include "runtime/logging.h"

namespace adjoint::runtime {

/// The NVRTC entry points adjoint uses, as X(name). Types are taken from <nvrtc.h>.
#define ADJOINT_NVRTC_ENTRY_POINTS(X) \
  X(nvrtcGetErrorString)              \
  X(nvrtcVersion)                     \
  X(nvrtcGetNumSupportedArchs)        \
  X(nvrtcGetSupportedArchs)           \
  X(nvrtcCreateProgram)               \
  X(nvrtcDestroyProgram)              \
  X(nvrtcCompileProgram)              \
  X(nvrtcGetPTXSize)                  \
  X(nvrtcGetPTX)                      \
  X(nvrtcGetCUBINSize)                \
  X(nvrtcGetCUBIN)                    \
  X(nvrtcGetProgramLogSize)           \
  X(nvrtcGetProgramLog)

struct NvrtcLibrary {
#define ADJOINT_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  ADJOINT_NVRTC_ENTRY_POINTS(ADJOINT_NVRTC_MEMBER)
#undef ADJOINT_NVRTC_MEMBER
  NvrtcLocation location;
  int major = 0;
  int minor = 0;
  std::string version;
  std::vector<int> archs;
};

namespace {

namespace fs = std::filesystem;

std::atomic<bool> loaded_flag{false};

/// Library names to look for, most specific first.
constexpr std::array<const char*, 3> kLibraryNames = {"libnvrtc.so.13", "libnvrtc.so.12",
                                                      "libnvrtc.so"};

/// Options every compile receives right after -arch, in this order. They are part of every
/// disk cache key (compile_cache_inputs), so changing them retires old entries.
constexpr std::array<const char*, 4> kFixedOptions = {"-std=c++17", "--fmad=false",
                                                      "-default-device", "-lineinfo"};

/// An option passed only to NVRTC versions that know it.
struct VersionedOption {
  const char* option;
  int major;
  int minor;
};

/// -minimal (NVRTC 12.4+) leaves texture/surface functions, device-side runtime API calls and
/// device launches out of the builtin header, which the generated kernels never use: it makes
/// every compile about 10% faster (the front end and NVVM have less to digest) and gives the
/// same SASS, instruction for instruction (docs/runtime.md has the measurements).
constexpr std::array<VersionedOption, 1> kVersionedOptions = {{{"-minimal", 12, 4}}};

bool at_least(int major, int minor, const VersionedOption& option) {
  return major > option.major || (major == option.major && minor >= option.minor);
}

/// The toolkit include directory that belongs to the NVRTC library at `library_path`: the
/// first of <libdir>/../include (toolkit and cu13 wheel layouts) and
/// <libdir>/../../cuda_runtime/include (cu12 wheels) holding cuda_fp16.h, looked up both
/// through the path as found and through its symlink-resolved form.
std::string find_toolkit_include_dir(const std::string& library_path) {
  if (library_path.empty()) return "";
  std::vector<fs::path> library_dirs = {fs::path(library_path).parent_path()};
  std::error_code error;
  fs::path resolved = fs::canonical(library_path, error);
  if (!error) library_dirs.push_back(resolved.parent_path());
  for (const fs::path& library_dir : library_dirs) {
    for (const fs::path& relative :
         {fs::path("../include"), fs::path("../../cuda_runtime/include")}) {
      fs::path candidate = (library_dir / relative).lexically_normal();
      if (fs::exists(candidate / "cuda_fp16.h", error)) return candidate.string();
    }
  }
  return "";
}

NvrtcLocation location_of(const std::string& path, const std::string& found_by) {
  NvrtcLocation location;
  location.path = path;
  location.identity = file_identity(path);
  location.include_dir = find_toolkit_include_dir(path);
  location.found_by = found_by;
  return location;
}

std::string read_whole_file(const char* path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return "";
  std::string bytes(static_cast<size_t>(std::max<std::streamoff>(file.tellg(), 0)), '\0');
  file.seekg(0);
  file.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(std::max<std::streamsize>(file.gcount(), 0)));
  return bytes;
}

/// Looks for NVRTC in the loader's order (each name through the whole search, as dlopen of that
/// name would), then in the toolkit fallbacks; the location, or the list of places tried.
std::variant<NvrtcLocation, std::string> find_nvrtc() {
  for (const char* name : kLibraryNames) {
    if (std::optional<std::string> path = already_loaded_path(name)) {
      return location_of(*path, "already loaded");
    }
  }
  std::string tried;
  const LoaderDirectories directories = loader_directories();
  const std::string ld_cache = read_whole_file("/etc/ld.so.cache");
  for (const char* name : kLibraryNames) {
    if (std::optional<FoundLibrary> found = find_like_loader(name, directories, ld_cache, tried)) {
      return location_of(found->path, found->found_by);
    }
  }
  std::vector<std::string> fallback_directories;
  if (const char* cuda_home = std::getenv("CUDA_HOME"); cuda_home && *cuda_home) {
    fallback_directories.push_back(std::string(cuda_home) + "/lib64");
  }
  fallback_directories.push_back("/usr/local/cuda/lib64");
  for (const std::string& directory : fallback_directories) {
    for (const char* name : kLibraryNames) {
      const std::string path = directory + "/" + name;
      if (inspect_elf(path).loadable) return location_of(path, directory);
      tried += "\n  " + path + ": not found or not loadable";
    }
  }
  return "NVRTC could not be found; tried:" + tried +
         "\nInstall the CUDA toolkit's NVRTC or set CUDA_HOME.";
}

// --- loading --------------------------------------------------------------------------------

std::unique_ptr<NvrtcLibrary> load_library(const NvrtcLocation& location, std::string& error) {
  void* handle = dlopen(location.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    error = "NVRTC (" + location.path + ", found by " + location.found_by +
            ") could not be loaded: " + (reason ? reason : "dlopen failed without a reason");
    return nullptr;
  }
  // The library stays open for the life of the process: the table points into it.
  auto library = std::make_unique<NvrtcLibrary>();
  library->location = location;
  std::string missing;
#define ADJOINT_NVRTC_RESOLVE(name)                                          \
  library->name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name)); \
  if (library->name == nullptr) missing += std::string(missing.empty() ? "" : ", ") + #name;
  ADJOINT_NVRTC_ENTRY_POINTS(ADJOINT_NVRTC_RESOLVE)
#undef ADJOINT_NVRTC_RESOLVE
  if (!missing.empty()) {
    error = "NVRTC (" + location.path + ") lacks required entry points: " + missing;
    return nullptr;
  }

  library->nvrtcVersion(&library->major, &library->minor);
  library->version = std::to_string(library->major) + "." + std::to_string(library->minor);
  int count = 0;
  library->nvrtcGetNumSupportedArchs(&count);
  library->archs.resize(std::max(count, 0));
  if (count > 0) library->nvrtcGetSupportedArchs(library->archs.data());
  std::sort(library->archs.begin(), library->archs.end());
  if (location.include_dir.empty()) {
    logger().warn(
        "no CUDA include directory with cuda_fp16.h next to {}; kernels using "
        "<cuda_fp16.h> or <cuda_bf16.h> will not compile",
        location.path);
  }
  logger().debug("loaded NVRTC {} from {} (found by {}; {}; include dir '{}')", library->version,
                 location.path, location.found_by, location.identity, location.include_dir);
  return library;
}

/// Destroys an nvrtcProgram when leaving scope.
class ProgramGuard {
 public:
  ProgramGuard(const NvrtcLibrary& library, nvrtcProgram program)
      : library_(library), program_(program) {}
  ~ProgramGuard() { library_.nvrtcDestroyProgram(&program_); }
  ProgramGuard(const ProgramGuard&) = delete;
  ProgramGuard& operator=(const ProgramGuard&) = delete;

 private:
  const NvrtcLibrary& library_;
  nvrtcProgram program_;
};

std::string join(const std::vector<int>& values) {
  std::string text;
  for (int value : values) text += (text.empty() ? "" : ", ") + std::to_string(value);
  return text;
}

std::string join(const std::vector<std::string>& values) {
  std::string text;
  for (const std::string& value : values) text += (text.empty() ? "" : " ") + value;
  return text;
}

std::string program_log(const NvrtcLibrary& library, nvrtcProgram program) {
  size_t size = 0;
  if (library.nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (library.nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // drop the terminating NUL
  return log;
}

std::vector<char> cubin_of(const NvrtcLibrary& library, nvrtcProgram program,
                           const std::string& name) {
  size_t size = 0;
  std::vector<char> cubin;
  if (library.nvrtcGetCUBINSize(program, &size) == NVRTC_SUCCESS && size > 0) {
    cubin.resize(size);
    if (library.nvrtcGetCUBIN(program, cubin.data()) == NVRTC_SUCCESS) return cubin;
  }
  throw Error("NVRTC compiled '" + name + "' but returned no cubin", ErrorCode::kInternal);
}

std::string ptx_of(const NvrtcLibrary& library, nvrtcProgram program, const std::string& name) {
  size_t size = 0;
  std::string ptx;
  if (library.nvrtcGetPTXSize(program, &size) == NVRTC_SUCCESS && size > 1) {
    ptx.resize(size);
    if (library.nvrtcGetPTX(program, ptx.data()) == NVRTC_SUCCESS) {
      ptx.resize(size - 1);  // drop the terminating NUL
      return ptx;
    }
  }
  throw Error("NVRTC compiled '" + name + "' but returned no PTX", ErrorCode::kInternal);
}

}  // namespace

Nvrtc::Nvrtc(std::unique_ptr<NvrtcLibrary> library) : library_(std::move(library)) {}
Nvrtc::~Nvrtc() = default;

Nvrtc& Nvrtc::instance() {
  static std::string load_error;
  static std::unique_ptr<Nvrtc> nvrtc = [] {
    std::unique_ptr<NvrtcLibrary> library;
    try {
      library = load_library(locate_nvrtc(), load_error);
    } catch (const Error& error) {
      load_error = error.what();
    }
    if (!library) return std::unique_ptr<Nvrtc>();
    loaded_flag = true;
    return std::unique_ptr<Nvrtc>(new Nvrtc(std::move(library)));
  }();
  if (!nvrtc) throw Error(load_error, ErrorCode::kNotAvailable);
  return *nvrtc;
}

const NvrtcLocation& locate_nvrtc() {
  static const std::variant<NvrtcLocation, std::string> found = find_nvrtc();
  if (const std::string* error = std::get_if<std::string>(&found)) {
    throw Error(*error, ErrorCode::kNotAvailable);
  }
  return std::get<NvrtcLocation>(found);
}

std::vector<std::string> compile_cache_inputs(const CompileRequest& request,
                                              const NvrtcLocation& location) {
  std::vector<std::string> inputs = {"arch " + std::to_string(request.arch),
                                     request.want_cubin ? "output cubin" : "output ptx",
                                     "name " + request.name};
  for (const char* option : kFixedOptions) inputs.push_back(std::string("option ") + option);
  for (const VersionedOption& option : kVersionedOptions) {
    inputs.push_back(
        fmt::format("option {} from NVRTC {}.{}", option.option, option.major, option.minor));
  }
  inputs.push_back("include " + location.include_dir);
  for (const std::string& option : request.extra_options) inputs.push_back("extra " + option);
  return inputs;
}

bool nvrtc_loaded() {
  return loaded_flag.load();
}

std::string Nvrtc::version() const {
  return library_->version;
}

std::vector<int> Nvrtc::supported_archs() const {
  return library_->archs;
}

const std::string& Nvrtc::library_path() const {
  return library_->location.path;
}

const std::string& Nvrtc::toolkit_include_dir() const {
  return library_->location.include_dir;
}

std::vector<std::string> Nvrtc::options_for(const CompileRequest& request) const {
  const std::vector<int>& archs = library_->archs;
  if (archs.empty()) {
    throw Error("NVRTC " + library_->version + " reports no supported architectures",
                ErrorCode::kNotAvailable);
  }
  const int newest = archs.back();
  std::string arch_option;
  if (request.arch > newest) {
    arch_option = "-arch=compute_" + std::to_string(newest);
  } else if (std::find(archs.begin(), archs.end(), request.arch) == archs.end()) {
    throw Error("CompileRequest.arch: expected an architecture NVRTC " + library_->version +
                    " supports (" + join(archs) + "), got " + std::to_string(request.arch),
                ErrorCode::kInvalidArgument);
  } else {
    arch_option =
        (request.want_cubin ? "-arch=sm_" : "-arch=compute_") + std::to_string(request.arch);
  }
  std::vector<std::string> options = {arch_option};
  options.insert(options.end(), kFixedOptions.begin(), kFixedOptions.end());
  for (const VersionedOption& option : kVersionedOptions) {
    if (at_least(library_->major, library_->minor, option)) options.push_back(option.option);
  }
  const std::string& include_dir = library_->location.include_dir;
  if (!include_dir.empty()) options.push_back("-I" + include_dir);
  options.insert(options.end(), request.extra_options.begin(), request.extra_options.end());
  return options;
}

CompileResult Nvrtc::compile(const CompileRequest& request) const {
  if (request.source.empty()) {
    throw Error("CompileRequest.source: expected CUDA C++ source text, got an empty string");
  }
  const std::string name = request.name.empty() ? "adjoint_kernel.cu" : request.name;
  CompileResult result;
  result.options = options_for(request);
  const bool emit_cubin = result.options.front().starts_with("-arch=sm_");
  if (request.want_cubin && !emit_cubin) {
    logger().info(
        "{}: sm_{} is newer than NVRTC {} supports; emitting PTX ({}) for the driver "
        "to compile",
        name, request.arch, library_->version, result.options.front());
  }

  const auto& templates = compiler::embedded_templates();
  std::vector<const char*> header_names;
  std::vector<const char*> header_sources;
  for (const auto& [header_name, header_text] : templates) {
    header_names.push_back(header_name.c_str());
    header_sources.push_back(header_text.c_str());
  }
  nvrtcProgram program = nullptr;
  nvrtcResult created = library_->nvrtcCreateProgram(&program, request.source.c_str(), name.c_str(),
                                                     static_cast<int>(templates.size()),
                                                     header_sources.data(), header_names.data());
  if (created != NVRTC_SUCCESS) {
    throw Error(
        "nvrtcCreateProgram for '" + name + "' failed: " + library_->nvrtcGetErrorString(created),
        ErrorCode::kCompileFailed);
  }
  ProgramGuard guard(*library_, program);

  std::vector<const char*> option_pointers;
  for (const std::string& option : result.options) option_pointers.push_back(option.c_str());
  const auto start = std::chrono::steady_clock::now();
  nvrtcResult compiled = library_->nvrtcCompileProgram(
      program, static_cast<int>(option_pointers.size()), option_pointers.data());
  result.milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  result.log = program_log(*library_, program);
  if (compiled != NVRTC_SUCCESS) {
    throw Error("NVRTC " + library_->version + " failed to compile '" + name + "' (" +
                    library_->nvrtcGetErrorString(compiled) +
                    ") with options: " + join(result.options) + "\n" + result.log,
                ErrorCode::kCompileFailed);
  }

  if (emit_cubin) {
    result.cubin = cubin_of(*library_, program, name);
    if (request.also_ptx) result.ptx = ptx_of(*library_, program, name);
  } else {
    result.ptx = ptx_of(*library_, program, name);
  }
  logger().debug("NVRTC compiled '{}' in {:.1f} ms ({} bytes of {})", name, result.milliseconds,
                 emit_cubin ? result.cubin.size() : result.ptx.size(),
                 emit_cubin ? "cubin" : "PTX");
  return result;
}

}  // namespace adjoint::runtime
