// NVRTC, loaded at run time (dlopen, never linked), and the one place adjoint compiles CUDA C++
// to a cubin or PTX. Every compile receives the embedded device templates (templates/*.cuh) as
// named headers and the same fixed options, so equal requests give equal binaries.
//
// NVRTC 13 has no builtin <cuda_fp16.h>/<cuda_bf16.h>: a kernel including them needs the
// toolkit's include directory. It is found at run time next to the NVRTC library that was
// actually loaded (dladdr: <libdir>/../include holding cuda_fp16.h), never copied into adjoint,
// and passed as -I; it is then part of the options and so of the disk cache key.
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
};

/// The binary and everything said while producing it.
struct CompileResult {
  std::vector<char> cubin;           ///< ELF image; empty when PTX was produced instead
  std::string ptx;                   ///< PTX text when no cubin was requested or possible
  std::string log;                   ///< NVRTC's log (warnings), possibly empty
  std::vector<std::string> options;  ///< the exact options NVRTC received
  double milliseconds = 0;           ///< wall time of nvrtcCompileProgram
};

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

  /// "major.minor" of the loaded NVRTC, e.g. "13.0" (part of every disk cache key).
  std::string version() const;

  /// The real architectures NVRTC can emit cubins for, ascending (e.g. 75, 80, ..., 120).
  std::vector<int> supported_archs() const;

  /// Compiles `request`. A cubin for sm_<arch> when requested and supported; PTX for
  /// compute_<arch> when want_cubin is false; PTX for the newest supported compute_XX when
  /// arch is newer than this NVRTC knows (the driver JIT-compiles it). Throws adjoint::Error:
  /// kCompileFailed with the full NVRTC log when NVRTC rejects the source, kInvalidArgument
  /// for an empty source or an architecture older than NVRTC supports.
  CompileResult compile(const CompileRequest& request) const;

  /// The options compile() passes for `request`, in order; lets a caller key a cache on them
  /// before compiling.
  std::vector<std::string> options_for(const CompileRequest& request) const;

  /// Path of the NVRTC library that was loaded.
  const std::string& library_path() const;

  /// The toolkit include directory passed as -I, or empty when none was found.
  const std::string& toolkit_include_dir() const;

 private:
  explicit Nvrtc(std::unique_ptr<NvrtcLibrary> library);
  std::unique_ptr<NvrtcLibrary> library_;
};

/// True once Nvrtc::instance() has succeeded in this process; proves that a run using only
/// ahead-of-time cubins never loaded NVRTC.
bool nvrtc_loaded();

}  // namespace adjoint::runtime
