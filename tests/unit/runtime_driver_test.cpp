// The run-time-loaded driver table. Without a driver (CI, this build machine): the error names
// libcuda.so.1 and check() still reports failures. With a driver and GPU: a whole round trip
// through the table (primary context, NVRTC cubin, module, async memory, launch, events).
#include "runtime/driver.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ir/error.h"
#include "runtime/nvrtc.h"

namespace adjoint::runtime {
namespace {

TEST(RuntimeDriver, MissingDriverErrorNamesTheLibrary) {
  if (driver_available()) GTEST_SKIP() << "a CUDA driver is installed here";
  for (int attempt = 0; attempt < 2; ++attempt) {  // the failure is remembered, same message
    try {
      driver();
      FAIL() << "driver() must throw without libcuda.so.1";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ErrorCode::kNotAvailable);
      const std::string message = error.what();
      EXPECT_NE(message.find("CUDA driver (libcuda.so.1) could not be loaded: "), std::string::npos)
          << message;
    }
  }
  EXPECT_FALSE(driver_available());
}

TEST(RuntimeDriver, CheckTurnsFailuresIntoCudaErrors) {
  EXPECT_NO_THROW(check(CUDA_SUCCESS, "cuNothing"));
  try {
    check(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 12 bytes");
    FAIL() << "check must throw for an error result";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ErrorCode::kCudaError);
    const std::string message = error.what();
    EXPECT_NE(message.find("cuMemAlloc of 12 bytes failed: "), std::string::npos) << message;
    // With a driver the error has its name; without one, its number.
    const char* expected = driver_available() ? "CUDA_ERROR_INVALID_VALUE" : "CUresult 1";
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  }
}

// Provokes a driver error on purpose, so compute-sanitizer runs exclude it (scripts/gpu-check
// filters out tests named ExpectedDriverError*): its API-error report would be a false alarm.
TEST(RuntimeDriver, ExpectedDriverErrorNamesTheCudaError) {
  if (!driver_available()) GTEST_SKIP() << "no CUDA driver here";
  Driver& cuda = driver();
  int devices = 0;
  check(cuda.DeviceGetCount(&devices), "cuDeviceGetCount");
  if (devices == 0) GTEST_SKIP() << "driver present but no GPU";
  CUdevice device = 0;
  check(cuda.DeviceGet(&device, 0), "cuDeviceGet");
  CUcontext context = nullptr;
  check(cuda.DevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  check(cuda.CtxSetCurrent(context), "cuCtxSetCurrent");
  CompileResult compiled = Nvrtc::instance().compile(
      {"extern \"C\" __global__ void present() {}", "present.cu", compute_capability(device)});
  CUmodule module = nullptr;
  check(cuda.ModuleLoadData(&module, compiled.cubin.data()), "cuModuleLoadData");
  CUfunction missing = nullptr;
  try {
    check(cuda.ModuleGetFunction(&missing, module, "no_such_kernel"), "cuModuleGetFunction");
    ADD_FAILURE() << "expected CUDA_ERROR_NOT_FOUND";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("CUDA_ERROR_NOT_FOUND"), std::string::npos)
        << error.what();
  }
  check(cuda.ModuleUnload(module), "cuModuleUnload");
}

TEST(RuntimeDriver, RequiredEntryPointsAndRoundTripOnAGpu) {
  if (!driver_available()) GTEST_SKIP() << "no CUDA driver here";
  Driver& cuda = driver();
  EXPECT_GE(cuda.version, 12000);
#define ADJOINT_EXPECT_RESOLVED(name, version, required) \
  if (required) {                                        \
    EXPECT_NE(cuda.name, nullptr) << "cu" #name;         \
  }
  ADJOINT_DRIVER_ENTRY_POINTS(ADJOINT_EXPECT_RESOLVED)
#undef ADJOINT_EXPECT_RESOLVED

  int devices = 0;
  check(cuda.DeviceGetCount(&devices), "cuDeviceGetCount");
  if (devices == 0) GTEST_SKIP() << "driver present but no GPU";
  CUdevice device = 0;
  check(cuda.DeviceGet(&device, 0), "cuDeviceGet");
  const int arch = compute_capability(device);
  EXPECT_GE(arch, 50);
  CUcontext context = nullptr;
  check(cuda.DevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  check(cuda.CtxSetCurrent(context), "cuCtxSetCurrent");
  CUcontext current = nullptr;
  check(cuda.CtxGetCurrent(&current), "cuCtxGetCurrent");
  EXPECT_EQ(current, context);

  CompileRequest request;
  request.name = "axpy.cu";
  request.arch = arch;
  request.source = R"(
extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
})";
  CompileResult compiled = Nvrtc::instance().compile(request);
  const void* image = compiled.cubin.empty() ? static_cast<const void*>(compiled.ptx.c_str())
                                             : static_cast<const void*>(compiled.cubin.data());
  CUmodule module = nullptr;
  check(cuda.ModuleLoadData(&module, image), "cuModuleLoadData");
  CUfunction function = nullptr;
  check(cuda.ModuleGetFunction(&function, module, "axpy"), "cuModuleGetFunction");
  int registers = 0;
  check(cuda.FuncGetAttribute(&registers, CU_FUNC_ATTRIBUTE_NUM_REGS, function),
        "cuFuncGetAttribute");
  EXPECT_GT(registers, 0);
  int local_bytes = -1;
  check(cuda.FuncGetAttribute(&local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function),
        "cuFuncGetAttribute");
  EXPECT_EQ(local_bytes, 0);

  CUstream stream = nullptr;
  check(cuda.StreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  const int n = 1000;
  std::vector<float> x(n), y(n), result(n);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  DeviceAllocation dx = allocate_device_memory(n * sizeof(float), stream);
  DeviceAllocation dy = allocate_device_memory(n * sizeof(float), stream);
  check(cuda.MemcpyHtoDAsync(dx.pointer, x.data(), n * sizeof(float), stream), "cuMemcpyHtoDAsync");
  check(cuda.MemsetD8Async(dy.pointer, 0, n * sizeof(float), stream), "cuMemsetD8Async");
  check(cuda.MemcpyHtoDAsync(dy.pointer, y.data(), n * sizeof(float), stream), "cuMemcpyHtoDAsync");

  CUevent start = nullptr, stop = nullptr;
  check(cuda.EventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  check(cuda.EventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  check(cuda.EventRecord(start, stream), "cuEventRecord");
  float a = 3.0f;
  int count = n;
  void* params[] = {&dy.pointer, &dx.pointer, &a, &count};
  check(cuda.LaunchKernel(function, (n + 255) / 256, 1, 1, 256, 1, 1, 0, stream, params, nullptr),
        "cuLaunchKernel");
  check(cuda.EventRecord(stop, stream), "cuEventRecord");
  check(cuda.MemcpyDtoHAsync(result.data(), dy.pointer, n * sizeof(float), stream),
        "cuMemcpyDtoHAsync");
  check(cuda.StreamSynchronize(stream), "cuStreamSynchronize");
  check(cuda.EventSynchronize(stop), "cuEventSynchronize");
  float elapsed = -1;
  check(cuda.EventElapsedTime(&elapsed, start, stop), "cuEventElapsedTime");
  EXPECT_GE(elapsed, 0.0f);
  for (int i = 0; i < n; ++i) ASSERT_EQ(result[i], 3.0f * i + 1.0f) << i;

  // The synchronous copies.
  std::vector<float> back(n);
  check(cuda.MemcpyHtoD(dx.pointer, y.data(), n * sizeof(float)), "cuMemcpyHtoD");
  check(cuda.MemcpyDtoH(back.data(), dx.pointer, n * sizeof(float)), "cuMemcpyDtoH");
  EXPECT_EQ(back, y);
  free_device_memory(dx, stream);
  free_device_memory(dy, stream);
  check(cuda.StreamSynchronize(stream), "cuStreamSynchronize");
  check(cuda.EventDestroy(start), "cuEventDestroy");
  check(cuda.EventDestroy(stop), "cuEventDestroy");
  check(cuda.StreamDestroy(stream), "cuStreamDestroy");
  check(cuda.ModuleUnload(module), "cuModuleUnload");
  check(cuda.DevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease");
}

}  // namespace
}  // namespace adjoint::runtime
