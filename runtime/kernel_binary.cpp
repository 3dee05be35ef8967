// Binary acquisition: package lookup per kernel, then one disk-cache lookup or NVRTC compile per
// translation unit, with stage dumps and the written-out source of a failed compile.
#include "runtime/kernel_binary.h"

#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "ir/error.h"
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

/// The image of `kernels` (indices into request.kernels) from the disk cache or NVRTC.
KernelImage jit_image(const BinaryRequest& request, const std::vector<size_t>& kernels,
                      const DiskCache& cache) {
  CompileRequest compile = unit_compile_request(request, kernels);
  compile.also_ptx = dump_settings().ptx;  // not an NVRTC option: the key does not change
  KernelImage image;
  image.kernels = kernels;
  image.disk_cache_key = unit_cache_key(compile, locate_nvrtc());
  if (std::optional<std::vector<char>> hit = cache.load(image.disk_cache_key)) {
    image.bytes = std::move(*hit);
    image.source = BinarySource::kDiskCache;
    return image;
  }
  CompileResult result;
  try {
    result = Nvrtc::instance().compile(compile);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kCompileFailed) throw;
    const std::string unit = compile.name.substr(0, compile.name.size() - 3);  // drop ".cu"
    const std::string path = write_failed_source(unit, compile.source);
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
  return image;
}

}  // namespace

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
  return compile;
}

std::string unit_cache_key(const CompileRequest& compile, const NvrtcLocation& location) {
  return disk_cache_key(compile.source, compile_cache_inputs(compile, location), location.identity,
                        compile.arch);
}

std::vector<KernelImage> acquire_kernel_images(const BinaryRequest& request,
                                               const DiskCache& cache) {
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
  if (dump.log || dump.ptx || dump.sass) {
    for (size_t k : not_packaged) images.push_back(jit_image(request, {k}, cache));
  } else {
    images.push_back(jit_image(request, not_packaged, cache));
  }
  return images;
}

}  // namespace adjoint::runtime
