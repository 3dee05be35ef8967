// Kernel packages: the output of `adjoint aot`, loaded by the runtime so that a deployment runs
// without NVRTC. A package is a directory:
//
//   manifest.json        format, adjoint version, architectures, and one entry per kernel
//   sources/<key>.cu     the CUDA source of each kernel (for debugging and audits)
//   bin/<key>.sm_XX.cubin  one binary per listed architecture
//   bin/<key>.compute_XX.ptx  PTX of the newest listed architecture, for newer devices
//
// Kernels are found by content: `package_kernel_key(source)` (XXH3-128 of the CUDA source), so a
// runtime that lowers a specialization to the same source finds the package's binary without
// any other bookkeeping. Every file's size and XXH64 checksum are in the manifest and checked at
// load time; a package from another adjoint version, or whose files do not match its manifest,
// is refused with an error that says which.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace adjoint::runtime {

/// The content key of a kernel's CUDA source (32 hex digits).
std::string package_kernel_key(const std::string& source);

/// One binary of a kernel: an ELF cubin for sm_<arch>, or PTX for compute_<arch>.
struct PackageBinary {
  int arch = 0;
  bool is_ptx = false;
  std::vector<char> bytes;
};

/// A kernel to be written into a package.
struct PackageKernel {
  std::string entry;
  std::string source;
  std::vector<PackageBinary> binaries;
};

/// What `adjoint aot` writes: the specializations covered (for people) and the kernels.
struct PackageContents {
  std::vector<std::string> specializations;
  std::vector<int> archs;
  std::vector<PackageKernel> kernels;
};

/// Writes `contents` as a package directory (created; existing files replaced).
void write_package(const std::filesystem::path& directory, const PackageContents& contents);

/// A loaded package: the manifest checked against its files, binaries read lazily.
class Package {
 public:
  /// Reads and checks the manifest and every file it names. Throws adjoint::Error
  /// (kInvalidArgument) for a missing or malformed manifest, another adjoint version, or a
  /// file whose size or checksum does not match.
  static Package load(const std::filesystem::path& directory);

  /// The best binary for `key` on a device of compute capability `device_arch`: the cubin for
  /// exactly that architecture, else the PTX of the newest architecture not newer than it.
  std::optional<PackageBinary> find(const std::string& key, int device_arch) const;

  const std::filesystem::path& directory() const { return directory_; }
  const std::vector<std::string>& specializations() const { return specializations_; }
  size_t kernel_count() const { return files_.size(); }

 private:
  struct File {
    int arch;
    bool is_ptx;
    std::filesystem::path path;
  };
  std::filesystem::path directory_;
  std::vector<std::string> specializations_;
  std::map<std::string, std::vector<File>> files_;  // by kernel key
};

/// The packages this process uses: those from ADJOINT_PACKAGE_PATH (loaded on first use) and
/// those added with `add`. Thread-safe.
class PackageRegistry {
 public:
  static PackageRegistry& instance();
  void add(const std::filesystem::path& directory);
  std::optional<PackageBinary> find(const std::string& key, int device_arch);
  bool empty();

 private:
  void load_environment_locked();
  std::mutex mutex_;
  bool environment_loaded_ = false;
  std::vector<Package> packages_;
};

}  // namespace adjoint::runtime
