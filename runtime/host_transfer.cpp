// Host <-> device conversion of interpreter buffers.
#include "runtime/host_transfer.h"

#include <cstring>

#include "ir/error.h"
#include "runtime/driver.h"

namespace adjoint::runtime {

std::vector<char> encode_values(ir::DType t, const std::vector<double>& v) {
  const int size = ir::dtype_bytes(t);
  std::vector<char> out(v.size() * size);
  for (size_t i = 0; i < v.size(); ++i) {
    char* p = out.data() + i * size;
    switch (t) {
      case ir::DType::kF16: {
        uint16_t h = ir::float_to_half_bits(static_cast<float>(v[i]));
        std::memcpy(p, &h, 2);
        break;
      }
      case ir::DType::kBF16: {
        uint16_t h = ir::float_to_bfloat16_bits(static_cast<float>(v[i]));
        std::memcpy(p, &h, 2);
        break;
      }
      case ir::DType::kF32: {
        float f = static_cast<float>(v[i]);
        std::memcpy(p, &f, 4);
        break;
      }
      case ir::DType::kF64: std::memcpy(p, &v[i], 8); break;
      case ir::DType::kI32: {
        int32_t x = static_cast<int32_t>(v[i]);
        std::memcpy(p, &x, 4);
        break;
      }
      case ir::DType::kI64: {
        int64_t x = static_cast<int64_t>(v[i]);
        std::memcpy(p, &x, 8);
        break;
      }
      case ir::DType::kBool: *p = v[i] != 0; break;
    }
  }
  return out;
}

std::vector<double> decode_values(ir::DType t, const std::vector<char>& bytes) {
  const int size = ir::dtype_bytes(t);
  std::vector<double> out(bytes.size() / size);
  for (size_t i = 0; i < out.size(); ++i) {
    const char* p = bytes.data() + i * size;
    switch (t) {
      case ir::DType::kF16:
      case ir::DType::kBF16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        out[i] = t == ir::DType::kF16 ? ir::half_bits_to_float(h) : ir::bfloat16_bits_to_float(h);
        break;
      }
      case ir::DType::kF32: {
        float f;
        std::memcpy(&f, p, 4);
        out[i] = f;
        break;
      }
      case ir::DType::kF64: std::memcpy(&out[i], p, 8); break;
      case ir::DType::kI32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        out[i] = x;
        break;
      }
      case ir::DType::kI64: {
        int64_t x;
        std::memcpy(&x, p, 8);
        out[i] = static_cast<double>(x);
        break;
      }
      case ir::DType::kBool: out[i] = *p != 0; break;
    }
  }
  return out;
}

DeviceBuffers::DeviceBuffers(const ir::Program& program, const ir::HostBuffers& inputs)
    : program_(program) {
  Driver& d = driver();
  auto allocate = [&](const ir::Tensor& t) {
    size_t bytes = static_cast<size_t>(t->storage_elements()) * ir::dtype_bytes(t->dtype);
    CUdeviceptr p = 0;
    if (bytes) check(d.MemAlloc(&p, bytes), "cuMemAlloc");
    pointers_.emplace_back(t->name, p);
    return std::make_pair(p, bytes);
  };
  for (const ir::Tensor& t : program.inputs) {
    auto [p, bytes] = allocate(t);
    auto it = inputs.find(t->name);
    if (it == inputs.end()) throw Error("DeviceBuffers: no values for input '" + t->name + "'");
    std::vector<char> data = encode_values(t->dtype, it->second);
    if (data.size() != bytes) {
      throw Error("DeviceBuffers: input '" + t->name + "' has " +
                  std::to_string(it->second.size()) + " values, expected " +
                  std::to_string(t->storage_elements()));
    }
    if (bytes) check(d.MemcpyHtoD(p, data.data(), bytes), "cuMemcpyHtoD");
  }
  for (const ir::Tensor& t : program.outputs) {
    auto [p, bytes] = allocate(t);
    if (bytes) check(d.MemsetD8Async(p, 0x7f, bytes, nullptr), "cuMemsetD8Async");
  }
}

DeviceBuffers::~DeviceBuffers() {
  for (auto& [name, p] : pointers_) {
    if (p) driver().MemFree(p);
  }
}

CUdeviceptr DeviceBuffers::pointer(const std::string& name) const {
  for (const auto& [n, p] : pointers_) {
    if (n == name) return p;
  }
  throw Error("DeviceBuffers: no tensor named '" + name + "'");
}

Bindings DeviceBuffers::bindings() const {
  Bindings out;
  for (const auto* list : {&program_.inputs, &program_.outputs}) {
    for (const ir::Tensor& t : *list) {
      out.push_back({t->name, TensorRef{pointer(t->name), static_cast<adjoint::DType>(t->dtype),
                                        t->shape, t->strides}});
    }
  }
  return out;
}

ir::HostBuffers DeviceBuffers::download_outputs() const {
  Driver& d = driver();
  check(d.StreamSynchronize(nullptr), "cuStreamSynchronize");
  ir::HostBuffers out;
  for (const ir::Tensor& t : program_.outputs) {
    std::vector<char> bytes(static_cast<size_t>(t->storage_elements()) * ir::dtype_bytes(t->dtype));
    if (!bytes.empty()) check(d.MemcpyDtoH(bytes.data(), pointer(t->name), bytes.size()), "cuMemcpyDtoH");
    out[t->name] = decode_values(t->dtype, bytes);
  }
  return out;
}

}  // namespace adjoint::runtime
