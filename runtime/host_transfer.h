// Moving interpreter-style host buffers (f64 values, see ir/interpreter.h) to and from device
// tensors of any dtype, for checks that compare a device run with the interpreter: the tests,
// `adjoint demo` and the benchmarks. Conversions round like the device (ir::round_to).
#pragma once

#include <string>
#include <vector>

#include <cuda.h>

#include "adjoint/adjoint.h"
#include "ir/interpreter.h"
#include "ir/program.h"

namespace adjoint::runtime {

/// Element values as the bytes of a `dtype` buffer.
std::vector<char> encode_values(ir::DType dtype, const std::vector<double>& values);
/// The bytes of a `dtype` buffer as values.
std::vector<double> decode_values(ir::DType dtype, const std::vector<char>& bytes);

/// Device copies of a program's inputs and outputs, freed on destruction (cuMemFree).
class DeviceBuffers {
 public:
  /// Allocates every input and output of `program` in the current context, uploads `inputs`,
  /// and fills outputs with a poison byte pattern so an element a kernel forgets is caught.
  DeviceBuffers(const ir::Program& program, const ir::HostBuffers& inputs);
  ~DeviceBuffers();
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;

  CUdeviceptr pointer(const std::string& name) const;
  /// Every input and output bound by name, as the public API takes them.
  Bindings bindings() const;
  /// Copies every output back (synchronizing the context's work first).
  ir::HostBuffers download_outputs() const;

 private:
  const ir::Program& program_;
  std::vector<std::pair<std::string, CUdeviceptr>> pointers_;
};

}  // namespace adjoint::runtime
