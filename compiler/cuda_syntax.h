// The small vocabulary of the CUDA emitter: C++ spellings of dtypes and constants, helpers on
// C++ text, a supply of fresh identifiers, and a line writer with an RAII indent guard. Nothing here knows the IR's
// structure beyond dtypes.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"

namespace adjoint::compiler {

/// The C++ type that holds a value of this dtype in a register: f16 and bf16 values are held
/// in float (see templates/adjoint_types.cuh), i64 in long long, bool in bool.
std::string_view cuda_value_type(ir::DType t);
/// The C++ element type of a tensor of this dtype in memory (adjoint::half, adjoint::bfloat16,
/// float, double, int, long long, bool).
std::string_view cuda_storage_type(ir::DType t);
/// True for f16 and bf16: held in float, rounded after every operation.
bool is_half_precision(ir::DType t);

/// An integer constant as a C++ literal of the value type (`long long` ones get LL when they
/// do not fit in int; the minimum values are spelled without overflow).
std::string cuda_int_literal(ir::DType t, int64_t value);
/// A float constant as a C++ literal that reads back to exactly the same value: shortest
/// round-trip decimal with an `f` suffix for float-held dtypes, none for double; infinities
/// and NaN through __int_as_float / __longlong_as_double. Negative values are parenthesized.
std::string cuda_float_literal(ir::DType t, double value);

/// `text` made a valid C identifier (other characters become '_', a leading digit gets '_').
std::string sanitize_identifier(std::string_view text);

// --- C++ text -------------------------------------------------------------------------------

/// "(a + b)" -> "a + b" when the outer parentheses enclose the whole text.
std::string strip_parens(const std::string& s);
/// A non-negative integer literal such as 42 or 42LL.
bool is_literal(const std::string& s);
/// A plain identifier (letters, digits and '_' only).
bool is_identifier(const std::string& s);
/// `parts` joined with `separator` between them.
std::string join(const std::vector<std::string>& parts, const std::string& separator);
/// `base + offset` as C++ text.
std::string plus(const std::string& base, int64_t offset);

/// Unique identifiers: hints made unique with a numeric suffix; C++/CUDA keywords and the
/// names the emitter uses itself are reserved from the start.
class NameSupply {
 public:
  NameSupply();
  /// A fresh identifier based on `hint`.
  std::string fresh(std::string_view hint);

 private:
  std::set<std::string> used_;
};

/// Lines of code at an indentation level; blocks are indented by an RAII guard.
class CodeWriter {
 public:
  explicit CodeWriter(int indent = 0) : indent_(indent) {}
  void line(std::string_view text);
  /// Appends text that is already indented and newline-terminated.
  void append(std::string_view text) { text_ += text; }
  const std::string& text() const { return text_; }
  int indent() const { return indent_; }

  /// Writes its opening line (e.g. "for (...) {"), indents what follows while it lives, and
  /// writes the closing line ("}") when destroyed.
  class Block {
   public:
    Block(CodeWriter& writer, std::string_view opening, std::string closing);
    Block(Block&& other) noexcept : writer_(other.writer_), closing_(std::move(other.closing_)) {
      other.writer_ = nullptr;
    }
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    Block& operator=(Block&&) = delete;
    ~Block();
    /// Ends the indented part with `text` (e.g. "} else {") and starts a new one.
    void split(std::string_view text);

   private:
    CodeWriter* writer_;
    std::string closing_;
  };

  [[nodiscard]] Block block(std::string_view opening, std::string closing = "}") {
    return Block(*this, opening, std::move(closing));
  }

 private:
  std::string text_;
  int indent_ = 0;
};

}  // namespace adjoint::compiler
