// What every example needs around its adjoint calls, kept out of the examples so that they read
// as the calls themselves: a GPU check that lets them exit cleanly where there is none, device
// tensors the application owns (allocated through adjoint's driver table, so nothing links
// libcuda and the examples build and start on machines without a GPU), host <-> device copies
// with dtype conversion, deterministic test data, and a comparison against the interpreter.
//
// Header-only; each example's CMakeLists.txt adds examples/ to its include path.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "adjoint/adjoint.h"
#include "ir/dtype.h"
#include "ir/interpreter.h"
#include "runtime/driver.h"

namespace example {

using adjoint::runtime::check;
using adjoint::runtime::driver;

/// True when a CUDA driver and at least one device are present; otherwise prints why the
/// example has nothing to run (the caller then exits 0).
inline bool gpu_present(const char* example) {
  int devices = 0;
  if (adjoint::runtime::driver_available()) driver().DeviceGetCount(&devices);
  if (devices > 0) return true;
  std::printf("%s: no GPU present (no CUDA driver or no device); nothing to run\n", example);
  return false;
}

/// Makes device 0's primary context current, as an application that owns its context would.
inline CUcontext use_device_zero() {
  CUdevice device;
  CUcontext context;
  check(driver().DeviceGet(&device, 0), "cuDeviceGet");
  check(driver().DevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain");
  check(driver().CtxSetCurrent(context), "cuCtxSetCurrent");
  return context;
}

/// Elements a tensor's storage spans (1 + the largest offset), 0 when it is empty.
inline int64_t storage_elements(const std::vector<int64_t>& shape,
                                const std::vector<int64_t>& strides) {
  int64_t last = 0;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) return 0;
    last += (shape[i] - 1) * strides[i];
  }
  return last + 1;
}

/// A device buffer owned by the application (cuMemAlloc / cuMemFree), holding one tensor.
class DeviceTensor {
 public:
  DeviceTensor(adjoint::ir::DType dtype, std::vector<int64_t> shape,
               std::vector<int64_t> strides = {})
      : dtype_(dtype), shape_(std::move(shape)), strides_(std::move(strides)) {
    if (strides_.empty()) strides_ = contiguous(shape_);
    elements_ = storage_elements(shape_, strides_);
    bytes_ = static_cast<size_t>(elements_) * adjoint::ir::dtype_bytes(dtype_);
    if (bytes_ > 0) check(driver().MemAlloc(&pointer_, bytes_), "cuMemAlloc");
  }
  ~DeviceTensor() {
    if (pointer_) driver().MemFree(pointer_);
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  /// The tensor as the public API binds it.
  adjoint::TensorRef ref() const {
    return adjoint::TensorRef{pointer_, static_cast<adjoint::DType>(dtype_), shape_, strides_};
  }
  int64_t elements() const { return elements_; }

  /// Copies `values` (one per storage element) in, converted to the tensor's dtype.
  void upload(const std::vector<double>& values, CUstream stream) {
    staging_ = encode(values);
    if (bytes_ > 0) {
      check(driver().MemcpyHtoDAsync(pointer_, staging_.data(), bytes_, stream), "cuMemcpyHtoD");
    }
  }
  /// Queues the copy out; the values are valid once `stream` is synchronized.
  void download(CUstream stream) {
    staging_.resize(bytes_);
    if (bytes_ > 0) {
      check(driver().MemcpyDtoHAsync(staging_.data(), pointer_, bytes_, stream), "cuMemcpyDtoH");
    }
  }
  /// The values of the last download, as doubles.
  std::vector<double> values() const { return decode(staging_); }

 private:
  static std::vector<int64_t> contiguous(const std::vector<int64_t>& shape) {
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
    return strides;
  }
  std::vector<unsigned char> encode(const std::vector<double>& values) const {
    using adjoint::ir::DType;
    std::vector<unsigned char> bytes(bytes_);
    for (int64_t i = 0; i < elements_; ++i) {
      unsigned char* out = bytes.data() + i * adjoint::ir::dtype_bytes(dtype_);
      double v = values.at(i);
      if (dtype_ == DType::kF16 || dtype_ == DType::kBF16) {
        uint16_t b = dtype_ == DType::kF16 ? adjoint::ir::float_to_half_bits(float(v))
                                           : adjoint::ir::float_to_bfloat16_bits(float(v));
        std::memcpy(out, &b, 2);
      } else if (dtype_ == DType::kF32) {
        float f = float(v);
        std::memcpy(out, &f, 4);
      } else if (dtype_ == DType::kF64) {
        std::memcpy(out, &v, 8);
      } else if (dtype_ == DType::kI32) {
        int32_t n = int32_t(v);
        std::memcpy(out, &n, 4);
      } else if (dtype_ == DType::kI64) {
        int64_t n = int64_t(v);
        std::memcpy(out, &n, 8);
      } else {
        *out = v != 0;
      }
    }
    return bytes;
  }
  std::vector<double> decode(const std::vector<unsigned char>& bytes) const {
    using adjoint::ir::DType;
    std::vector<double> values(elements_);
    for (int64_t i = 0; i < elements_; ++i) {
      const unsigned char* in = bytes.data() + i * adjoint::ir::dtype_bytes(dtype_);
      if (dtype_ == DType::kF16 || dtype_ == DType::kBF16) {
        uint16_t b;
        std::memcpy(&b, in, 2);
        values[i] = dtype_ == DType::kF16 ? adjoint::ir::half_bits_to_float(b)
                                          : adjoint::ir::bfloat16_bits_to_float(b);
      } else if (dtype_ == DType::kF32) {
        float f;
        std::memcpy(&f, in, 4);
        values[i] = f;
      } else if (dtype_ == DType::kF64) {
        std::memcpy(&values[i], in, 8);
      } else if (dtype_ == DType::kI32) {
        int32_t n;
        std::memcpy(&n, in, 4);
        values[i] = n;
      } else if (dtype_ == DType::kI64) {
        int64_t n;
        std::memcpy(&n, in, 8);
        values[i] = double(n);
      } else {
        values[i] = *in != 0;
      }
    }
    return values;
  }

  adjoint::ir::DType dtype_;
  std::vector<int64_t> shape_, strides_;
  int64_t elements_ = 0;
  size_t bytes_ = 0;
  CUdeviceptr pointer_ = 0;
  std::vector<unsigned char> staging_;
};

/// Deterministic values uniform in [low, high) (a 64-bit LCG), so every run checks the same data.
inline std::vector<double> uniform_values(int64_t count, double low, double high, uint64_t seed) {
  std::vector<double> values(count);
  uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& v : values) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = low + (high - low) * double(state >> 11) * 0x1.0p-53;
  }
  return values;
}

/// Compares `got` against `want` with |got - want| <= tolerance * (1 + |want|) per element and
/// prints one line: PASS or FAIL with the worst element. Returns whether it passed.
inline bool check_close(const std::string& what, const std::vector<double>& got,
                        const std::vector<double>& want, double tolerance) {
  if (got.size() != want.size()) {
    std::printf("  %s: FAIL (%zu values, expected %zu)\n", what.c_str(), got.size(), want.size());
    return false;
  }
  double worst = 0;
  size_t worst_index = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double ratio = std::fabs(got[i] - want[i]) / (tolerance * (1 + std::fabs(want[i])));
    if (!(ratio <= worst)) {
      worst = ratio;
      worst_index = i;
    }
  }
  bool pass = worst <= 1;
  std::printf("  %s: %s (%zu values, worst |err|/(tol*(1+|ref|)) = %.3g at %zu, tol %g)\n",
              what.c_str(), pass ? "PASS" : "FAIL", got.size(), worst, worst_index, tolerance);
  return pass;
}

/// The comparison tolerance of a dtype: a few units in the last place of its precision.
inline double tolerance_for(adjoint::ir::DType dtype) {
  switch (dtype) {
    case adjoint::ir::DType::kF16: return 2e-3;
    case adjoint::ir::DType::kBF16: return 1.6e-2;
    case adjoint::ir::DType::kF32: return 1e-5;
    default: return 1e-12;
  }
}

}  // namespace example
