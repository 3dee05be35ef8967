// Loads libcuda.so.1 once, resolves the entry point table through cuGetProcAddress and calls
// cuInit. The outcome (table or error message) is computed once and kept for the process.
#include "runtime/driver.h"

#include <dlfcn.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "ir/error.h"
#include "runtime/logging.h"

namespace adjoint::runtime {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

/// The result of trying to load the driver: a table, or why there is none.
struct DriverLoad {
  std::unique_ptr<Driver> driver;
  std::string error;
};

std::string not_loaded(const std::string& why) {
  return std::string("CUDA driver (") + kDriverLibrary + ") could not be loaded: " + why;
}

/// Looks entry points up by base name and ABI version, through cuGetProcAddress_v2 (CUDA 12+)
/// or, on older drivers, the original four-argument cuGetProcAddress (CUDA 11.3+).
class EntryPointResolver {
 public:
  explicit EntryPointResolver(void* library)
      : get_v2_(
            reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(library, "cuGetProcAddress_v2"))),
        get_v1_(reinterpret_cast<PFN_cuGetProcAddress_v11030>(dlsym(library, "cuGetProcAddress"))) {
  }

  bool usable() const { return get_v2_ != nullptr || get_v1_ != nullptr; }

  /// The entry point, or nullptr when the driver has no ABI-compatible version of it.
  void* resolve(const char* symbol, int abi_version) const {
    void* function = nullptr;
    CUresult result;
    if (get_v2_ != nullptr) {
      CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
      result = get_v2_(symbol, &function, abi_version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &status);
      if (status != CU_GET_PROC_ADDRESS_SUCCESS) return nullptr;
    } else {
      result = get_v1_(symbol, &function, abi_version, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    }
    return result == CUDA_SUCCESS ? function : nullptr;
  }

 private:
  PFN_cuGetProcAddress_v12000 get_v2_;
  PFN_cuGetProcAddress_v11030 get_v1_;
};

/// "NAME (description)" for a driver error, using the loaded table.
std::string describe(const Driver& table, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (table.GetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr) name = nullptr;
  if (table.GetErrorString(result, &text) != CUDA_SUCCESS || text == nullptr) text = nullptr;
  std::string described = name ? name : "CUresult " + std::to_string(static_cast<int>(result));
  if (text) described += std::string(" (") + text + ")";
  return described;
}

DriverLoad load_driver() {
  void* library = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    return {nullptr, not_loaded(reason ? reason : "dlopen failed without a reason")};
  }
  // The library stays open for the life of the process: the table points into it.
  EntryPointResolver resolver(library);
  if (!resolver.usable()) {
    return {nullptr, not_loaded("it has no cuGetProcAddress (the driver predates CUDA 11.3)")};
  }

  auto table = std::make_unique<Driver>();
  std::string missing;
#define ADJOINT_RESOLVE(name, version, required)                                          \
  table->name =                                                                           \
      reinterpret_cast<PFN_cu##name##_v##version>(resolver.resolve("cu" #name, version)); \
  if ((required) && table->name == nullptr)                                               \
    missing += std::string(missing.empty() ? "" : ", ") + "cu" #name;
  ADJOINT_DRIVER_ENTRY_POINTS(ADJOINT_RESOLVE)
#undef ADJOINT_RESOLVE
  if (!missing.empty()) {
    return {nullptr, not_loaded("the driver lacks required entry points: " + missing)};
  }

  CUresult init = table->Init(0);
  if (init != CUDA_SUCCESS) {
    return {nullptr, std::string("CUDA driver (") + kDriverLibrary +
                         ") was loaded but cuInit failed: " + describe(*table, init)};
  }
  if (table->DriverGetVersion(&table->version) != CUDA_SUCCESS) table->version = 0;
  logger().debug("loaded {} (CUDA driver version {}), stream-ordered allocation {}", kDriverLibrary,
                 table->version, table->has_async_allocator() ? "available" : "unavailable");
  return {std::move(table), ""};
}

const DriverLoad& loaded_driver() {
  static const DriverLoad load = load_driver();
  return load;
}

bool memory_pools_supported_here() {
  Driver& table = driver();
  if (!table.has_async_allocator()) return false;
  CUdevice device = 0;
  check(table.CtxGetDevice(&device), "cuCtxGetDevice");
  int supported = 0;
  check(table.DeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device),
        "cuDeviceGetAttribute(MEMORY_POOLS_SUPPORTED)");
  return supported != 0;
}

/// ADJOINT_TEMPORARY_POOL_BYTES (bytes, default 1 GiB, 0 leaves the pool alone): how much freed
/// stream-ordered memory the device's default pool keeps reserved across synchronizations. The
/// pool's own default (0) hands every freed byte back to the driver at each synchronize, so a
/// program with temporaries (binned gathers, split reductions) mapped them again on every call:
/// ~150 us per grid_sampler call on the H100. Malformed values are warned about and ignored.
uint64_t temporary_pool_bytes() {
  constexpr uint64_t kDefault = uint64_t{1} << 30;
  const char* text = std::getenv("ADJOINT_TEMPORARY_POOL_BYTES");
  if (text == nullptr || *text == '\0') return kDefault;
  char* end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || text[0] == '-') {
    logger().warn("ADJOINT_TEMPORARY_POOL_BYTES: expected a byte count such as 1073741824, got "
                  "'{}'; using {}",
                  text, kDefault);
    return kDefault;
  }
  return value;
}

/// Raises the release threshold of `device`'s default memory pool to temporary_pool_bytes()
/// once per device (never lowers a threshold someone else raised). Optional entry points that
/// are missing, or a driver that refuses, leave the pool as it was.
void keep_temporaries_reserved(CUdevice device) {
  static std::mutex mutex;
  static std::set<CUdevice> done;
  std::lock_guard lock(mutex);
  if (!done.insert(device).second) return;
  Driver& table = driver();
  const uint64_t wanted = temporary_pool_bytes();
  if (wanted == 0 || !table.DeviceGetDefaultMemPool || !table.MemPoolGetAttribute ||
      !table.MemPoolSetAttribute) {
    return;
  }
  CUmemoryPool pool = nullptr;
  if (table.DeviceGetDefaultMemPool(&pool, device) != CUDA_SUCCESS) return;
  uint64_t threshold = 0;
  if (table.MemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold) !=
          CUDA_SUCCESS ||
      threshold >= wanted) {
    return;
  }
  threshold = wanted;
  if (table.MemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold) !=
      CUDA_SUCCESS) {
    logger().debug("cuMemPoolSetAttribute(RELEASE_THRESHOLD) refused; temporaries are remapped "
                   "after each synchronize");
  }
}

}  // namespace

Driver& driver() {
  const DriverLoad& load = loaded_driver();
  if (!load.driver) throw Error(load.error, ErrorCode::kNotAvailable);
  return *load.driver;
}

bool driver_available() {
  return loaded_driver().driver != nullptr;
}

void check(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const DriverLoad& load = loaded_driver();
  std::string described = load.driver ? describe(*load.driver, result)
                                      : "CUresult " + std::to_string(static_cast<int>(result));
  throw Error(std::string(what) + " failed: " + described, ErrorCode::kCudaError);
}

int compute_capability(CUdevice device) {
  Driver& table = driver();
  int major = 0;
  int minor = 0;
  check(table.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
        "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)");
  check(table.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
        "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
  return major * 10 + minor;
}

DeviceAllocation allocate_device_memory(size_t bytes, CUstream stream) {
  DeviceAllocation allocation;
  allocation.bytes = bytes;
  if (bytes == 0) return allocation;  // the driver rejects empty allocations; nothing to hold
  Driver& table = driver();
  if (memory_pools_supported_here()) {
    CUdevice device = 0;
    check(table.CtxGetDevice(&device), "cuCtxGetDevice");
    keep_temporaries_reserved(device);
    CUresult result = table.MemAllocAsync(&allocation.pointer, bytes, stream);
    if (result == CUDA_SUCCESS) {
      allocation.stream_ordered = true;
      return allocation;
    }
    if (result != CUDA_ERROR_NOT_SUPPORTED) {
      check(result, ("cuMemAllocAsync of " + std::to_string(bytes) + " bytes").c_str());
    }
  }
  check(table.MemAlloc(&allocation.pointer, bytes),
        ("cuMemAlloc of " + std::to_string(bytes) + " bytes").c_str());
  return allocation;
}

void free_device_memory(const DeviceAllocation& allocation, CUstream stream) {
  if (allocation.pointer == 0) return;
  Driver& table = driver();
  if (allocation.stream_ordered) {
    check(table.MemFreeAsync(allocation.pointer, stream), "cuMemFreeAsync");
  } else {
    check(table.MemFree(allocation.pointer), "cuMemFree");
  }
}

}  // namespace adjoint::runtime
