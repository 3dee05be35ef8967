// The CUDA Driver API, loaded at run time: libcuda.so.1 is opened with dlopen and every entry
// point adjoint uses is resolved once through cuGetProcAddress into one table, `Driver`. Nothing
// links against libcuda, so a machine without a GPU can still load the library, generate CUDA
// and compile it with NVRTC; only the first call to `driver()` needs a driver.
//
// Types come from <cuda.h>; the function pointer types from <cudaTypedefs.h>, whose names carry
// the CUDA version that introduced each ABI (PFN_cuMemAlloc_v3020 is cuMemAlloc_v2). That
// version is what cuGetProcAddress is asked for, so the table holds exactly the ABI these
// headers describe, whatever newer variants the installed driver also offers. Stream-taking
// entry points are the legacy-default-stream variants; adjoint always passes explicit streams.
#pragma once

#include <cstddef>

#include <cuda.h>
#include <cudaTypedefs.h>

namespace adjoint::runtime {

/// The driver entry points adjoint uses, as X(name, abi_version, required). `name` is the
/// function's base name without the `cu` prefix; `abi_version` selects PFN_cu<name>_v<version>
/// from <cudaTypedefs.h> and is passed to cuGetProcAddress. A missing required entry point
/// makes loading fail; a missing optional one is left null (see `Driver::has_async_allocator`).
#define ADJOINT_DRIVER_ENTRY_POINTS(X)    \
  X(GetErrorName, 6000, true)             \
  X(GetErrorString, 6000, true)           \
  X(Init, 2000, true)                     \
  X(DriverGetVersion, 2020, true)         \
  X(DeviceGet, 2000, true)                \
  X(DeviceGetCount, 2000, true)           \
  X(DeviceGetName, 2000, true)            \
  X(DeviceGetAttribute, 2000, true)       \
  X(DevicePrimaryCtxRetain, 7000, true)   \
  X(DevicePrimaryCtxRelease, 11000, true) \
  X(CtxSetCurrent, 4000, true)            \
  X(CtxGetCurrent, 4000, true)            \
  X(CtxGetDevice, 2000, true)             \
  X(ModuleLoadData, 2000, true)           \
  X(ModuleUnload, 2000, true)             \
  X(ModuleGetFunction, 2000, true)        \
  X(FuncGetAttribute, 2020, true)         \
  X(FuncSetAttribute, 9000, true)         \
  X(LaunchKernel, 4000, true)             \
  X(LaunchKernelEx, 11060, false)         \
  X(MemGetInfo, 3020, true)               \
  X(MemAlloc, 3020, true)                 \
  X(MemFree, 3020, true)                  \
  X(MemAllocAsync, 11020, false)          \
  X(MemFreeAsync, 11020, false)           \
  X(DeviceGetDefaultMemPool, 11020, false) \
  X(MemPoolGetAttribute, 11020, false)    \
  X(MemPoolSetAttribute, 11020, false)    \
  X(MemsetD8Async, 3020, true)            \
  X(MemcpyHtoD, 3020, true)               \
  X(MemcpyDtoH, 3020, true)               \
  X(MemcpyHtoDAsync, 3020, true)          \
  X(MemcpyDtoHAsync, 3020, true)          \
  X(StreamCreate, 2000, true)             \
  X(StreamDestroy, 4000, true)            \
  X(StreamSynchronize, 2000, true)        \
  X(EventCreate, 2000, true)              \
  X(EventRecord, 2000, true)              \
  X(EventSynchronize, 2000, true)         \
  X(EventElapsedTime, 12080, true)        \
  X(EventDestroy, 4000, true)

/// The table of driver entry points. Call them as `driver().MemAlloc(&ptr, bytes)` and pass the
/// result to `check`. Every required member is non-null once `driver()` has returned.
struct Driver {
#define ADJOINT_DRIVER_MEMBER(name, version, required) PFN_cu##name##_v##version name = nullptr;
  ADJOINT_DRIVER_ENTRY_POINTS(ADJOINT_DRIVER_MEMBER)
#undef ADJOINT_DRIVER_MEMBER

  /// The driver's CUDA version as cuDriverGetVersion reports it, e.g. 13000.
  int version = 0;

  /// Whether stream-ordered allocation (cuMemAllocAsync/cuMemFreeAsync) was found.
  bool has_async_allocator() const {
    return MemAllocAsync != nullptr && MemFreeAsync != nullptr;
  }
};

/// The loaded driver, initialized with cuInit(0) on first use (thread-safe). Throws
/// adjoint::Error(kNotAvailable) when libcuda.so.1 cannot be opened, an entry point is missing
/// or cuInit fails; the failure is remembered and every later call throws the same error.
Driver& driver();

/// Whether `driver()` succeeds on this machine. Never throws.
bool driver_available();

/// Throws adjoint::Error(kCudaError) naming `what` and the driver's error name and description
/// when `result` is not CUDA_SUCCESS.
void check(CUresult result, const char* what);

/// The compute capability of `device` as one number: major * 10 + minor (90 for sm_90).
int compute_capability(CUdevice device);

/// Device memory from `allocate_device_memory`, remembering how it must be released.
struct DeviceAllocation {
  CUdeviceptr pointer = 0;
  size_t bytes = 0;
  bool stream_ordered = false;  ///< from cuMemAllocAsync (else cuMemAlloc)
};

/// Allocates `bytes` of device memory in the current context, stream-ordered on `stream` when
/// the driver and device support memory pools, else with cuMemAlloc (synchronous).
DeviceAllocation allocate_device_memory(size_t bytes, CUstream stream);

/// Releases `allocation` the way it was made (stream-ordered on `stream`, or cuMemFree).
void free_device_memory(const DeviceAllocation& allocation, CUstream stream);

}  // namespace adjoint::runtime
