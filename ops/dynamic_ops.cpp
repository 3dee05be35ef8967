// The table of ops with dynamic axes, size values of generic programs and generic keys.
#include "ops/dynamic_ops.h"

#include <map>

#include "ir/error.h"
#include "ops/upsample_nearest.h"

namespace adjoint::ops {
namespace {

std::map<std::string, DynamicOp, std::less<>> build_table() {
  std::map<std::string, DynamicOp, std::less<>> table;
  const std::pair<const char*, int> upsample[] = {
      {"upsample_nearest1d_backward", 1},        {"upsample_nearest2d_backward", 2},
      {"upsample_nearest3d_backward", 3},        {"_upsample_nearest_exact1d_backward", 1},
      {"_upsample_nearest_exact2d_backward", 2}, {"_upsample_nearest_exact3d_backward", 3}};
  for (const auto& [name, rank] : upsample) {
    table[name] = DynamicOp{upsample_nearest_dynamic_axes(rank),
                            build_upsample_nearest_backward_generic};
  }
  return table;
}

/// "input_size[2]" -> ("input_size", 2); false when malformed.
bool parse_axis(const std::string& source, std::string& attribute, size_t& index) {
  size_t open = source.find('[');
  if (open == std::string::npos || source.back() != ']') return false;
  attribute = source.substr(0, open);
  index = std::stoul(source.substr(open + 1, source.size() - open - 2));
  return true;
}

}  // namespace

const DynamicOp* find_dynamic_op(std::string_view name) {
  static const std::map<std::string, DynamicOp, std::less<>> table = build_table();
  auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second;
}

std::vector<int64_t> size_values(const ir::Program& program, const Specialization& spec) {
  std::vector<int64_t> values;
  for (const ir::SizeParam& size : program.sizes) {
    std::string attribute;
    size_t index = 0;
    if (!parse_axis(size.source, attribute, index))
      throw Error("size '" + size.source + "' does not name an attribute element",
                  ErrorCode::kInternal);
    std::vector<int64_t> list = spec.get_ints(attribute);
    if (index >= list.size())
      throw Error(spec.op_name() + ": attribute '" + attribute + "' has no element " +
                      std::to_string(index),
                  ErrorCode::kInvalidArgument);
    values.push_back(list[index]);
  }
  return values;
}

std::string generic_key(const Specialization& spec, const std::vector<std::string>& generic_axes) {
  std::string out = spec.op_name();
  for (const AttrSpec& a : spec.op().attributes) {
    std::string value = spec.raw(a.name);
    // as Specialization::to_string: attributes left at a default it does not print are omitted
    if (!a.print_when_default && a.default_value && value == *a.default_value) continue;
    if (a.kind == AttrKind::kIntList) {
      std::vector<int64_t> list = spec.get_ints(a.name);
      value.clear();
      for (size_t i = 0; i < list.size(); ++i) {
        std::string name = a.name + "[" + std::to_string(i) + "]";
        bool generic = false;
        for (const std::string& g : generic_axes) generic |= g == name;
        value += (i ? "," : "") + (generic ? std::string("?") : std::to_string(list[i]));
      }
    }
    out += " " + a.name + "=" + value;
  }
  return out;
}

}  // namespace adjoint::ops
