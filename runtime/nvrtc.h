// NVRTC, loaded at run time (dlopen, never linked), and the one place adjoint compiles CUDA C++
// to a cubin or PTX. Every compile receives the embedded device templates (templates/*.cuh) as
// named headers and the same fixed options, so equal requests give equal binaries.
//
// Finding NVRTC and loading it are separate steps. `locate_nvrtc()` finds the library file the
// way the dynamic loader would (already loaded, LD_LIBRARY_PATH/RUNPATH, /etc/ld.so.cache,
// system directories, then $CUDA_HOME/lib64 and /usr/local/cuda/lib64) and identifies its
// contents by the ELF build-id, all with a few stat/read calls; `Nvrtc::instance()` then dlopens
// exactly that file. The disk cache keys on the location (`compile_cache_inputs`), so a cache hit
// never pays for loading the ~100 MB library, and a hit can only ever be a binary this very
// NVRTC file produced with these very options.
//
// NVRTC 13 has no builtin <cuda_fp16.h>/<cuda_bf16.h>: a kernel including them needs the
// toolkit's include directory. It is found next to the located library (<libdir>/../include
// holding cuda_fp16.h), never copied into adjoint, and passed as -I; it is then part of the
// options and so of the disk cache key.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace adjoint::runtime {

/// One translation unit to compile.
struct CompileRequest {
  std::string source;      ///< complete CUDA C++ source
  std::string name;        ///< file name NVRTC reports in diagnostics, e.g. "upsample_bwd.cu"
  int arch = 90;           ///< target compute capability, major * 10 + minor
  bool want_cubin = true;  ///< false: PTX for compute_<arch>
  std::vector<std::string> extra_options;  ///< appended after the fixed options
  bool also_ptx = false;  ///< with a cubin, return the PTX too (for ADJOINT_DUMP=ptx)
};

/// The binary and everything said while producing it.
struct CompileResult {
  std::vector<char> cubin;           ///< ELF image; empty when PTX was produced instead
  std::string ptx;                   ///< PTX text when no cubin was requested or possible, or
                                     ///< when also_ptx asked for it
  std::string log;                   ///< NVRTC's log (warnings), possibly empty
  std::vector<std::string> options;  ///< the exact options NVRTC received
  double milliseconds = 0;           ///< wall time of nvrtcCompileProgram
};

/// Where the NVRTC library is and what identifies its contents, found without loading it.
struct NvrtcLocation {
  std::string path;         ///< the library file as found (absolute); what instance() dlopens
  std::string identity;     ///< file_identity(path): the ELF build-id, else path, size and mtime
  std::string include_dir;  ///< toolkit include directory passed as -I, or empty when none
  std::string found_by;     ///< how it was found, for logs: "already loaded", "ld.so.cache", ...
};

/// Finds the NVRTC library that Nvrtc::instance() loads, or has loaded, without loading it: a
/// libnvrtc.so.13, .12 or .so already mapped into the process; else the first of those names in
/// the dynamic loader's search order (LD_LIBRARY_PATH and RUNPATH, /etc/ld.so.cache, the system
/// directories); else in $CUDA_HOME/lib64 and /usr/local/cuda/lib64. Computed once per process
/// (microseconds). Throws adjoint::Error (kNotAvailable) listing every place tried when none
/// holds a usable library; later calls throw it again.
const NvrtcLocation& locate_nvrtc();

/// The entry point table and facts of the loaded library (defined in nvrtc.cpp).
struct NvrtcLibrary;

/// The loaded NVRTC library. Thread-safe: compile() may run concurrently from many threads.
class Nvrtc {
 public:
  /// The process-wide instance, loading NVRTC on first use. Throws adjoint::Error
  /// (kNotAvailable) listing the libraries tried when none loads; later calls throw it again.
  static Nvrtc& instance();

  ~Nvrtc();
  Nvrtc(const Nvrtc&) = delete;
  Nvrtc& operator=(const Nvrtc&) = delete;

  /// "major.minor" of the loaded NVRTC, e.g. "13.0".
  std::string version() const;

  /// The real architectures NVRTC can emit cubins for, ascending (e.g. 75, 80, ..., 120).
  std::vector<int> supported_archs() const;

  /// Compiles `request`. A cubin for sm_<arch> when requested and supported; PTX for
  /// compute_<arch> when want_cubin is false; PTX for the newest supported compute_XX when
  /// arch is newer than this NVRTC knows (the driver JIT-compiles it). Throws adjoint::Error:
  /// kCompileFailed with the full NVRTC log when NVRTC rejects the source, kInvalidArgument
  /// for an empty source or an architecture older than NVRTC supports.
  CompileResult compile(const CompileRequest& request) const;

  /// The options compile() passes for `request`, in order.
  std::vector<std::string> options_for(const CompileRequest& request) const;

  /// Path of the NVRTC library that was loaded (locate_nvrtc().path).
  const std::string& library_path() const;

  /// The toolkit include directory passed as -I, or empty when none was found.
  const std::string& toolkit_include_dir() const;

 private:
  explicit Nvrtc(std::unique_ptr<NvrtcLibrary> library);
  std::unique_ptr<NvrtcLibrary> library_;
};

/// Everything besides the source and the embedded templates that decides what
/// Nvrtc::compile(request) produces, computable without loading NVRTC: the requested
/// architecture and output kind, adjoint's option policy (the fixed options and the
/// version-gated ones), the include directory and the request's extra options. Together with
/// `location.identity`, which fixes the NVRTC version and its supported architectures, these
/// determine options_for(request) exactly; the disk cache key is a hash of them.
std::vector<std::string> compile_cache_inputs(const CompileRequest& request,
                                              const NvrtcLocation& location);

/// True once Nvrtc::instance() has loaded NVRTC in this process; proves that a run using only
/// ahead-of-time cubins or disk-cache hits never loaded it.
bool nvrtc_loaded();

}  // namespace adjoint::runtime
