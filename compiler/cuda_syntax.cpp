// CUDA spellings of dtypes and literals, C++ text helpers, the name supply and the line writer.
#include "compiler/cuda_syntax.h"

#include <charconv>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

namespace adjoint::compiler {

std::string_view cuda_value_type(ir::DType t) {
  switch (t) {
    case ir::DType::kF16:
    case ir::DType::kBF16:
    case ir::DType::kF32:
      return "float";
    case ir::DType::kF64:
      return "double";
    case ir::DType::kI32:
      return "int";
    case ir::DType::kI64:
      return "long long";
    case ir::DType::kBool:
      return "bool";
  }
  return "?";
}

std::string_view cuda_storage_type(ir::DType t) {
  switch (t) {
    case ir::DType::kF16:
      return "adjoint::half";
    case ir::DType::kBF16:
      return "adjoint::bfloat16";
    default:
      return cuda_value_type(t);
  }
}

bool is_half_precision(ir::DType t) {
  return t == ir::DType::kF16 || t == ir::DType::kBF16;
}

std::string cuda_int_literal(ir::DType t, int64_t value) {
  if (t == ir::DType::kBool) return value ? "true" : "false";
  if (value == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807LL - 1)";
  if (value == std::numeric_limits<int32_t>::min()) {
    return t == ir::DType::kI32 ? "(-2147483647 - 1)" : "(-2147483647LL - 1)";
  }
  std::string digits = std::to_string(value);
  bool fits_int =
      value >= std::numeric_limits<int32_t>::min() && value <= std::numeric_limits<int32_t>::max();
  if (!fits_int) digits += "LL";
  return value < 0 ? "(" + digits + ")" : digits;
}

std::string cuda_float_literal(ir::DType t, double value) {
  const bool is_double = t == ir::DType::kF64;
  if (std::isnan(value) || std::isinf(value)) {
    std::string bits;
    if (is_double) {
      uint64_t b;
      double v = std::isnan(value) ? std::numeric_limits<double>::quiet_NaN() : value;
      std::memcpy(&b, &v, sizeof b);
      char buf[32];
      std::snprintf(buf, sizeof buf, "0x%016llxLL", static_cast<unsigned long long>(b));
      return std::string("__longlong_as_double(") + buf + ")";
    }
    uint32_t b;
    float v =
        std::isnan(value) ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(value);
    std::memcpy(&b, &v, sizeof b);
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", b);
    return std::string("__int_as_float(") + buf + ")";
  }
  char buf[64];
  auto end = is_double ? std::to_chars(buf, buf + sizeof buf, value).ptr
                       : std::to_chars(buf, buf + sizeof buf, static_cast<float>(value)).ptr;
  std::string text(buf, end);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  if (!is_double) text += "f";
  return std::signbit(value) ? "(" + text + ")" : text;
}

std::string sanitize_identifier(std::string_view text) {
  std::string out;
  for (char c : text) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out;
}

NameSupply::NameSupply() {
  // C++ keywords a hint could spell, CUDA's built-in variables and the emitter's own names.
  for (const char* reserved :
       {"adjoint",  "auto",     "bool",      "break",     "case",     "char",        "const",
        "continue", "default",  "delete",    "do",        "double",   "else",        "enum",
        "extern",   "false",    "float",     "for",       "goto",     "if",          "inline",
        "int",      "long",     "new",       "return",    "short",    "signed",      "sizeof",
        "static",   "struct",   "switch",    "this",      "true",     "union",       "unsigned",
        "void",     "volatile", "while",     "threadIdx", "blockIdx", "blockDim",    "gridDim",
        "warpSize", "min",      "max",       "abs",       "exp",      "log",         "sqrt",
        "floor",    "ceil",     "pow",       "half",      "bfloat16", "operator",    "class",
        "template", "typename", "namespace", "using",     "asm",      "and",         "or",
        "not",      "xor",      "new",       "delete",    "private",  "public",      "protected",
        "friend",   "virtual",  "signed",    "register",  "restrict", "__restrict__"}) {
    used_.insert(reserved);
  }
}

std::string NameSupply::fresh(std::string_view hint) {
  std::string base = sanitize_identifier(hint.empty() ? "v" : hint);
  if (base.size() >= 2 && base[0] == '_' &&
      (base[1] == '_' || std::isupper(static_cast<unsigned char>(base[1])))) {
    base = "v" + base;  // reserved for the implementation
  }
  std::string name = base;
  for (int i = 1; used_.count(name); ++i) name = base + "_" + std::to_string(i);
  used_.insert(name);
  return name;
}

CodeWriter::Block::Block(CodeWriter& writer, std::string_view opening, std::string closing)
    : writer_(&writer), closing_(std::move(closing)) {
  writer_->line(opening);
  ++writer_->indent_;
}

CodeWriter::Block::~Block() {
  if (!writer_) return;
  --writer_->indent_;
  writer_->line(closing_);
}

void CodeWriter::Block::split(std::string_view text) {
  --writer_->indent_;
  writer_->line(text);
  ++writer_->indent_;
}

void CodeWriter::line(std::string_view text) {
  text_.append(static_cast<size_t>(indent_) * 2, ' ');
  text_ += text;
  text_ += '\n';
}

std::string strip_parens(const std::string& s) {
  if (s.size() < 2 || s.front() != '(' || s.back() != ')') return s;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    depth += s[i] == '(' ? 1 : (s[i] == ')' ? -1 : 0);
    if (depth == 0 && i + 1 < s.size()) return s;
  }
  return s.substr(1, s.size() - 2);
}

bool is_literal(const std::string& s) {
  size_t digits = s.find_first_not_of("0123456789");
  return digits > 0 && (digits == std::string::npos || s.substr(digits) == "LL");
}

bool is_identifier(const std::string& s) {
  return !s.empty() &&
         s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") ==
             std::string::npos;
}

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? separator : "") + parts[i];
  return out;
}

std::string plus(const std::string& base, int64_t offset) {
  if (offset == 0) return base;
  return base + (offset > 0 ? " + " : " - ") + std::to_string(offset > 0 ? offset : -offset);
}

}  // namespace adjoint::compiler
