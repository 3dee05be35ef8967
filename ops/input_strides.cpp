// Input tensors of any strides (ops/input_strides.h): the attribute and its checks.
#include "ops/input_strides.h"

#include <algorithm>
#include <utility>

#include "ir/error.h"
#include "ops/shape_checks.h"

namespace adjoint::ops {
namespace {

std::string bracketed(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

}  // namespace

std::string input_strides_attribute_name(const std::string& tensor) { return tensor + "_strides"; }

AttrSpec input_strides_attribute(const std::string& tensor) {
  AttrSpec a{input_strides_attribute_name(tensor), AttrKind::kIntList, "",
             "strides of " + tensor + " in elements, outermost first, when it is not in the "
             "layout (read in place; empty: the layout)",
             {}};
  a.print_when_default = false;
  return a;
}

bool overlaps_itself(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dimensions of size > 1
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return false;  // no element at all
    if (shape[d] > 1) dims.emplace_back(strides[d], shape[d]);
  }
  std::sort(dims.begin(), dims.end());
  // Ordered by stride, each stride must pass the furthest element the smaller ones reach.
  int64_t extent = 0;
  for (const auto& [stride, size] : dims) {
    if (stride <= extent) return true;
    extent += stride * (size - 1);  // bounded: the caller checked the extent first
  }
  return false;
}

void check_input_strides(const std::string& op, const std::string& tensor,
                         const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  auto fail = [&](const std::string& expected) {
    throw Error(op + ": " + tensor + ": expected " + expected + ", given " +
                    bracketed(strides) + " for shape " + bracketed(shape),
                ErrorCode::kInvalidArgument);
  };
  if (strides.size() != shape.size()) fail(std::to_string(shape.size()) + " strides (its rank)");
  for (int64_t s : strides) {
    if (s < 0) fail("strides >= 0");
  }
  // The furthest element addressed, (size - 1) * stride summed, must stay within the range
  // every tensor of a program keeps (ops/shape_checks.h).
  int64_t extent = 0;
  bool empty = std::any_of(shape.begin(), shape.end(), [](int64_t n) { return n == 0; });
  for (size_t d = 0; d < shape.size() && !empty; ++d) {
    int64_t reach = 0;
    if (shape[d] > 1 && (__builtin_mul_overflow(shape[d] - 1, strides[d], &reach) ||
                         __builtin_add_overflow(extent, reach, &extent) ||
                         extent >= kMaxTensorElements)) {
      fail("strides whose furthest element is below 2^58");
    }
  }
  if (overlaps_itself(shape, strides)) {
    fail("strides under which no two indices share an element (this one overlaps itself, as "
         "after expand(); pass a copy)");
  }
}

std::vector<int64_t> input_strides(const Specialization& spec, const std::string& tensor,
                                   const std::vector<int64_t>& shape,
                                   std::vector<int64_t> layout_strides) {
  std::vector<int64_t> given = spec.get_ints(input_strides_attribute_name(tensor));
  if (given.empty()) return layout_strides;
  check_input_strides(spec.op_name(), "attribute '" + input_strides_attribute_name(tensor) + "'",
                      shape, given);
  return given;
}

}  // namespace adjoint::ops
