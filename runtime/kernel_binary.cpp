// Binary acquisition: package lookup per kernel, then one disk-cache lookup or NVRTC compile per
// translation unit, with stage dumps and the written-out source of a failed compile.
#include "runtime/kernel_binary.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "ir/error.h"
#include "runtime/compile_huge_pages.h"
#include "runtime/compile_worker.h"
#include "runtime/dump.h"
#include "runtime/package.h"

namespace adjoint::runtime {
namespace {

std::string short_hash(const std::string& text) {
  return fmt::format("{:016x}", XXH3_64bits(text.data(), text.size()));
}

bool is_include_line(const std::string& line) {
  const size_t first = line.find_first_not_of(" \t");
  return first != std::string::npos && line.compare(first, 8, "#include") == 0;
}

/// Writes the source of a failed compile where the user can find it; returns the path.
std::string write_failed_source(const std::string& name, const std::string& source) {
  std::filesystem::path dir = DiskCache::directory_from_environment();
  if (dir.empty()) dir = std::filesystem::temp_directory_path() / "adjoint";
  dir /= "failed";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::filesystem::path path = dir / (name + "-" + short_hash(source) + ".cu");
  std::ofstream(path) << source;
  return path.string();
}

/// Writes the compiler-output stages ADJOINT_DUMP asks for, named after the unit.
void dump_compile_output(const BinaryRequest& request, const std::string& unit,
                         const CompileResult& result) {
  const DumpSettings& dump = dump_settings();
  const std::string prefix = request.dump_key + "." + unit;
  if (dump.log) write_dump(dump, prefix + ".log", result.log);
  if (dump.ptx && !result.ptx.empty()) write_dump(dump, prefix + ".ptx", result.ptx);
  if (dump.sass && !result.cubin.empty()) write_sass_dump(dump, prefix + ".sass", result.cubin);
}

using Clock = std::chrono::steady_clock;

double milliseconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

/// One translation unit to acquire: its kernels, request, key and, once done, its image.
struct Unit {
  std::vector<size_t> kernels;
  CompileRequest compile;
  KernelImage image;
  std::exception_ptr error;
  Clock::time_point started, finished;
};

/// A unit for `kernels` (indices into request.kernels), its disk-cache key computed and looked
/// up: on a hit its image is complete (source kDiskCache), otherwise it is still to compile.
Unit look_up_unit(const BinaryRequest& request, const std::vector<size_t>& kernels,
                  const DiskCache& cache) {
  Unit unit;
  unit.kernels = kernels;
  unit.compile = unit_compile_request(request, kernels);
  unit.compile.also_ptx = dump_settings().ptx;  // not an NVRTC option: the key does not change
  unit.image.kernels = kernels;
  unit.image.disk_cache_key = unit_cache_key(unit.compile, locate_nvrtc());
  if (std::optional<std::vector<char>> hit = cache.load(unit.image.disk_cache_key)) {
    unit.image.bytes = std::move(*hit);
    unit.image.source = BinarySource::kDiskCache;
  }
  return unit;
}

/// Compiles a unit the disk cache missed with NVRTC and stores the result in `cache`.
void compile_unit(const BinaryRequest& request, Unit& unit, const DiskCache& cache,
                  bool in_worker) {
  const CompileRequest& compile = unit.compile;
  const std::vector<size_t>& kernels = unit.kernels;
  KernelImage& image = unit.image;
  CompileResult result;
  try {
    result = in_worker ? compile_in_worker(compile) : Nvrtc::instance().compile(compile);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kCompileFailed) throw;
    const std::string unit_name = compile.name.substr(0, compile.name.size() - 3);  // no ".cu"
    const std::string path = write_failed_source(unit_name, compile.source);
    throw Error(std::string(e.what()) + "\nthe CUDA source was written to " + path + " (op '" +
                    request.spec + "')",
                ErrorCode::kCompileFailed);
  }
  dump_compile_output(request, kernels.size() == 1 ? request.kernels[kernels[0]].entry : "unit",
                      result);
  image.source = BinarySource::kCompiled;
  image.compile_milliseconds = result.milliseconds;
  if (!result.cubin.empty()) {
    image.bytes = std::move(result.cubin);
    result.ptx.clear();
  } else {
    image.bytes.assign(result.ptx.begin(), result.ptx.end());
    image.bytes.push_back('\0');
  }
  cache.store(image.disk_cache_key, image.bytes);
}

/// Compiles every unit the disk cache missed, on up to `threads` threads (the largest sources
/// first, so the longest compiles start early), then rethrows the error of the first failed
/// unit in program order once all have finished.
void compile_missing_units(const BinaryRequest& request, std::vector<Unit>& units,
                           const DiskCache& cache, int threads, AcquireProfile& profile) {
  std::vector<Unit*> missing;
  for (Unit& unit : units) {
    if (unit.image.source != BinarySource::kDiskCache) missing.push_back(&unit);
  }
  if (missing.empty()) return;
  std::stable_sort(missing.begin(), missing.end(), [](const Unit* a, const Unit* b) {
    return a->compile.source.size() > b->compile.source.size();
  });
  // Worker processes (compile_worker.h) only for batches of several units; they load NVRTC
  // themselves, so this process loads it only to fall back.
  const bool in_workers = request.compile_processes && missing.size() > 1 && threads > 1;
  profile.processes = in_workers;
  if (!in_workers) {
    const auto load_start = Clock::now();
    const bool was_loaded = nvrtc_loaded();
    Nvrtc::instance();  // load once, before the threads (its errors are not compile errors)
    if (!was_loaded) profile.nvrtc_load_ms = milliseconds_between(load_start, Clock::now());
  }

  // Huge pages only for batches of several units: a single small compile pays more for
  // zeroing 2 MiB pages than it saves in faults (upsample here: 34-40 -> 43-57 ms).
  CompileHugePagesScope huge_pages(request.compile_huge_pages && missing.size() > 1);
  std::atomic<size_t> next{0};
  auto work = [&] {
    huge_pages.prepare_thread();
    for (size_t i = next++; i < missing.size(); i = next++) {
      Unit& unit = *missing[i];
      unit.started = Clock::now();
      try {
        compile_unit(request, unit, cache, in_workers);
      } catch (...) {
        unit.error = std::current_exception();
      }
      unit.finished = Clock::now();
    }
  };
  const int workers = static_cast<int>(
      std::min<size_t>(missing.size(), static_cast<size_t>(std::max(threads, 1))));
  // With huge pages every compile runs on a new thread: the calling thread's heap may be
  // glibc's main arena, which prepare_thread() cannot mark (compile_huge_pages.h).
  const int own_threads = huge_pages.active() ? 0 : 1;
  std::vector<std::thread> pool;
  pool.reserve(workers);
  try {
    for (int t = own_threads; t < workers; ++t) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // no more threads to be had: the ones started (and this one) do all the work
  }
  profile.threads = static_cast<int>(pool.size()) + own_threads;
  if (own_threads == 1 || pool.empty()) {
    work();
    if (pool.empty()) profile.threads = 1;
  }
  for (std::thread& thread : pool) thread.join();
  profile.memory_release_ms = huge_pages.finish();
  Clock::time_point first = missing.front()->started, last = missing.front()->finished;
  for (const Unit* unit : missing) {
    first = std::min(first, unit->started);
    last = std::max(last, unit->finished);
    profile.compile_sum_ms += unit->image.compile_milliseconds;
  }
  profile.compile_wall_ms = milliseconds_between(first, last);
  profile.units_compiled = missing.size();
  for (const Unit& unit : units) {
    if (unit.error) std::rethrow_exception(unit.error);
  }
}

/// An integer environment variable in [low, high]; `fallback` when unset or empty.
int integer_from_environment(const char* variable, int low, int high, int fallback,
                             const std::string& expected) {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || errno != 0 || value < low || value > high) {
    throw Error(std::string(variable) + ": expected " + expected + ", got '" + text + "'",
                ErrorCode::kInvalidArgument);
  }
  return static_cast<int>(value);
}

}  // namespace

int compile_units_from_environment(int threads) {
  const char* text = std::getenv("ADJOINT_COMPILE_UNITS");
  const std::string word = text ? text : "";
  if (word.empty() || word == "auto") return threads >= 8 ? 0 : 1;  // docs/runtime.md
  if (word == "kernel") return 0;
  return integer_from_environment("ADJOINT_COMPILE_UNITS", 1, 256, 1,
                                  "'auto', 'kernel' or a unit count in [1, 256]");
}

int split_compile_from_environment() {
  return integer_from_environment("ADJOINT_TUNE_SPLIT_COMPILE", 1, 64, 1,
                                  "1 (none) or an NVRTC thread count in [2, 64]");
}

std::vector<std::vector<size_t>> kernel_groups(const std::vector<size_t>& kernels,
                                               const std::vector<size_t>& source_sizes,
                                               int units) {
  const size_t count = kernels.size();
  const size_t groups_wanted =
      units <= 0 ? count : std::min(count, static_cast<size_t>(units));
  std::vector<size_t> order(count);
  for (size_t i = 0; i < count; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return source_sizes.at(a) > source_sizes.at(b);
  });
  std::vector<std::vector<size_t>> groups(groups_wanted);
  std::vector<size_t> bytes(groups_wanted, 0);
  for (size_t i : order) {
    const size_t lightest =
        static_cast<size_t>(std::min_element(bytes.begin(), bytes.end()) - bytes.begin());
    groups[lightest].push_back(i);
    bytes[lightest] += source_sizes[i];
  }
  for (std::vector<size_t>& group : groups) {
    std::sort(group.begin(), group.end());
    for (size_t& i : group) i = kernels[i];
  }
  std::sort(groups.begin(), groups.end());
  return groups;
}

int compile_threads_from_environment() {
  const char* text = std::getenv("ADJOINT_COMPILE_THREADS");
  if (text == nullptr || *text == '\0') text = "0";
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || errno != 0 || value < 0 || value > 256) {
    throw Error(std::string("ADJOINT_COMPILE_THREADS: expected 0 (the hardware's thread count, "
                            "at most 16) or a thread count in [1, 256], got '") +
                    text + "'",
                ErrorCode::kInvalidArgument);
  }
  if (value > 0) return static_cast<int>(value);
  const unsigned hardware = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(hardware, 1u, 16u));
}

std::vector<std::string> nvrtc_options_from_environment() {
  const char* text = std::getenv("ADJOINT_TUNE_NVRTC_OPTIONS");
  std::vector<std::string> options;
  std::istringstream words(text ? text : "");
  for (std::string word; words >> word;) {
    if (word.front() != '-') {
      throw Error("ADJOINT_TUNE_NVRTC_OPTIONS: expected NVRTC options separated by spaces, each "
                  "starting with '-' (e.g. -Ofc=mid), got '" + word + "' in '" + text + "'",
                  ErrorCode::kInvalidArgument);
    }
    options.push_back(word);
  }
  // ADJOINT_TUNE_BF16_CVT: how float rounds to bfloat16 on sm_80 and later
  // (templates/adjoint_types.cuh, ADJOINT_BF16_CVT): 1, the default, adds nothing.
  if (const char* cvt = std::getenv("ADJOINT_TUNE_BF16_CVT"); cvt && *cvt) {
    const std::string value = cvt;
    if (value != "0" && value != "1") {
      throw Error("ADJOINT_TUNE_BF16_CVT: expected 1 (the hardware's cvt.rn.bf16.f32, the "
                  "default) or 0 (the integer rounding; the same bits), got '" + value + "'",
                  ErrorCode::kInvalidArgument);
    }
    if (value != "1") options.push_back("-DADJOINT_BF16_CVT=" + value);
  }
  return options;
}

std::string combined_translation_unit(const std::vector<KernelSource>& kernels) {
  if (kernels.size() == 1) return kernels.front().source;
  std::string includes;
  std::string bodies;
  std::set<std::string> included;
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::string body;
    std::istringstream lines(kernels[i].source);
    for (std::string line; std::getline(lines, line);) {
      if (is_include_line(line)) {
        if (included.insert(line).second) includes += line + "\n";
        line.clear();
      }
      body += line + "\n";
    }
    bodies += fmt::format(
        "\nnamespace adjoint_kernel_{} {{\n#line 1 \"{}.cu\"\n{}}}  // namespace "
        "adjoint_kernel_{}\n",
        i, kernels[i].entry, body, i);
  }
  return fmt::format(
             "// {} kernels compiled as one translation unit by adjoint's runtime: each kernel's "
             "source\n// follows in its own namespace, under its own file name and line "
             "numbers.\n",
             kernels.size()) +
         includes + bodies;
}

CompileRequest unit_compile_request(const BinaryRequest& request,
                                    const std::vector<size_t>& kernels) {
  std::vector<KernelSource> sources;
  for (size_t k : kernels) sources.push_back(request.kernels.at(k));
  CompileRequest compile;
  compile.source = combined_translation_unit(sources);
  compile.name = (sources.size() == 1 ? sources.front().entry : request.program) + ".cu";
  compile.arch = request.arch;
  compile.extra_options = request.nvrtc_options;
  if (sources.size() > 1 && request.split_compile > 1) {
    compile.extra_options.push_back("-split-compile=" + std::to_string(request.split_compile));
  }
  return compile;
}

std::string unit_cache_key(const CompileRequest& compile, const NvrtcLocation& location) {
  return disk_cache_key(compile.source, compile_cache_inputs(compile, location), location.identity,
                        compile.arch);
}

std::vector<KernelImage> acquire_kernel_images(const BinaryRequest& request,
                                               const DiskCache& cache,
                                               AcquireProfile* profile_out) {
  std::vector<KernelImage> images;
  std::vector<size_t> not_packaged;
  for (size_t k = 0; k < request.kernels.size(); ++k) {
    const KernelSource& kernel = request.kernels[k];
    std::optional<PackageBinary> packaged =
        PackageRegistry::instance().find(package_kernel_key(kernel.source), request.arch);
    if (!packaged) {
      not_packaged.push_back(k);
      continue;
    }
    KernelImage image;
    image.bytes = std::move(packaged->bytes);
    if (packaged->is_ptx) image.bytes.push_back('\0');
    image.source = BinarySource::kPackage;
    image.kernels = {k};
    images.push_back(std::move(image));
  }
  if (not_packaged.empty()) return images;
  if (!request.jit_enabled) {
    throw Error("no kernel package covers '" + request.spec + "' (kernel " +
                    request.kernels[not_packaged.front()].entry + ", sm_" +
                    std::to_string(request.arch) + ") and JIT compilation is disabled",
                ErrorCode::kNotAvailable);
  }
  const DumpSettings& dump = dump_settings();
  const bool per_kernel = dump.log || dump.ptx || dump.sass;
  std::vector<Unit> units;
  if (per_kernel) {
    for (size_t k : not_packaged) units.push_back(look_up_unit(request, {k}, cache));
  } else if (request.compile_threads > 1) {
    std::vector<size_t> sizes;
    for (size_t k : not_packaged) sizes.push_back(request.kernels[k].source.size());
    for (const std::vector<size_t>& group :
         kernel_groups(not_packaged, sizes, request.compile_units)) {
      units.push_back(look_up_unit(request, group, cache));
    }
  } else {
    units.push_back(look_up_unit(request, not_packaged, cache));
  }
  AcquireProfile profile;
  compile_missing_units(request, units, cache, request.compile_threads, profile);
  for (Unit& unit : units) images.push_back(std::move(unit.image));
  if (profile_out) *profile_out = profile;
  return images;
}

}  // namespace adjoint::runtime
