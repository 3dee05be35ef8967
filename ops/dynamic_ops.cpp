// The table of ops with dynamic axes, size values of generic programs and generic keys.
#include "ops/dynamic_ops.h"

#include <algorithm>
#include <map>

#include "ir/error.h"
#include "ops/mhc.h"
#include "ops/mhc_post.h"
#include "ops/mhc_sinkhorn.h"
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
  // The mHC family: every op generic in its token axes (ops/mhc_token_axes.h).
  table["mhc_pre"] = DynamicOp{mhc_token_dynamic_axes(), build_generic<build_mhc_pre>};
  table["mhc_pre_backward"] = DynamicOp{mhc_token_dynamic_axes(), build_mhc_pre_backward_generic};
  // Per-token ops: a token pair (compiler/lower_token_pair.h), generic under mode batch too.
  table["mhc_post"] = DynamicOp{mhc_token_dynamic_axes(true), build_generic<build_mhc_post>};
  table["mhc_post_backward"] =
      DynamicOp{mhc_token_dynamic_axes(true), build_generic<build_mhc_post_backward>};
  table["mhc_sinkhorn"] =
      DynamicOp{mhc_token_dynamic_axes(true), build_generic<build_mhc_sinkhorn>};
  table["mhc_sinkhorn_backward"] =
      DynamicOp{mhc_token_dynamic_axes(true), build_generic<build_mhc_sinkhorn_backward>};
  return table;
}

/// "input_size[2]" -> ("input_size", 2); "seq" -> ("seq", -1); false when malformed.
bool parse_axis(const std::string& source, std::string& attribute, int& index) {
  size_t open = source.find('[');
  if (open == std::string::npos) {
    attribute = source;
    index = -1;
    return !source.empty();
  }
  if (source.back() != ']') return false;
  attribute = source.substr(0, open);
  index = std::stoi(source.substr(open + 1, source.size() - open - 2));
  return index >= 0;
}

}  // namespace

std::optional<int64_t> DynamicAxis::value(const Specialization& spec) const {
  if (index < 0) return spec.get_int(attribute);
  std::vector<int64_t> list = spec.get_ints(attribute);
  if (static_cast<size_t>(index) >= list.size()) return std::nullopt;
  return list[index];
}

const DynamicOp* find_dynamic_op(std::string_view name) {
  static const std::map<std::string, DynamicOp, std::less<>> table = build_table();
  auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second;
}

std::vector<int64_t> size_values(const ir::Program& program, const Specialization& spec) {
  std::vector<int64_t> values;
  for (const ir::SizeParam& size : program.sizes) {
    DynamicAxis axis;
    if (!parse_axis(size.source, axis.attribute, axis.index))
      throw Error("size '" + size.source + "' does not name an attribute or its element",
                  ErrorCode::kInternal);
    std::optional<int64_t> value = axis.value(spec);
    if (!value)
      throw Error(spec.op_name() + ": attribute '" + axis.attribute + "' has no element " +
                      std::to_string(axis.index),
                  ErrorCode::kInvalidArgument);
    values.push_back(*value);
  }
  return values;
}

std::string generic_key(const Specialization& spec, const std::vector<std::string>& generic_axes) {
  std::string out = spec.op_name();
  for (const AttrSpec& a : spec.op().attributes) {
    std::string value = spec.raw(a.name);
    // as Specialization::to_string: attributes left at a default it does not print are omitted
    if (!a.print_when_default && a.default_value && value == *a.default_value) continue;
    auto is_generic = [&](const std::string& name) {
      return std::find(generic_axes.begin(), generic_axes.end(), name) != generic_axes.end();
    };
    if (a.kind == AttrKind::kInt && is_generic(a.name)) value = "?";
    if (a.kind == AttrKind::kIntList) {
      std::vector<int64_t> list = spec.get_ints(a.name);
      value.clear();
      for (size_t i = 0; i < list.size(); ++i) {
        std::string name = a.name + "[" + std::to_string(i) + "]";
        value += (i ? "," : "") + (is_generic(name) ? std::string("?") : std::to_string(list[i]));
      }
    }
    out += " " + a.name + "=" + value;
  }
  return out;
}

}  // namespace adjoint::ops
