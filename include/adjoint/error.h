// adjoint::Error, the one exception type the library throws. Its message always says what was
// wrong and where: the op and argument, or the program, kernel and stage, expected vs given.
// A public header (include/adjoint/) because embedders catch it; ir/error.h re-exports it for the
// layers, which all throw it.
#pragma once

#include <stdexcept>
#include <string>

namespace adjoint {

/// What kind of failure an Error reports; the C API maps it to a status code.
enum class ErrorCode {
  kInvalidArgument = 1,  ///< a caller passed a bad specialization or buffer
  kInvalidProgram = 2,   ///< an IR program failed verification
  kCompileFailed = 3,    ///< NVRTC rejected the generated source
  kCudaError = 4,        ///< the driver returned an error
  kNotAvailable = 5,     ///< a library (driver, NVRTC) or a package entry is missing
  kInternal = 6,         ///< a bug in adjoint
};

/// The exception adjoint throws. what() is a complete sentence meant for the user.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ErrorCode code = ErrorCode::kInvalidArgument)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace adjoint
