// The mHC token axes: constants or sizes, per-token tensors over them, their dynamic axes.
#include "ops/mhc_token_axes.h"

#include "ir/error.h"

namespace adjoint::ops {

int64_t token_count(const Specialization& spec, const std::string& attr) {
  const int64_t v = spec.get_int(attr);
  if (v < 0) {
    throw Error(spec.op_name() + ": attribute '" + attr + "': expected an integer >= 0, got " +
                    std::to_string(v),
                ErrorCode::kInvalidArgument);
  }
  return v;
}

TokenAxesMaker constant_token_axes(const Specialization& spec) {
  const int64_t batch = spec.get_int("batch"), seq = spec.get_int("seq");
  return [batch, seq](ir::ProgramBuilder&) { return TokenAxes{ir::Expr(batch), ir::Expr(seq)}; };
}

TokenAxesMaker generic_token_axes(const Specialization& spec,
                                  const std::vector<std::string>& generic_axes) {
  const int64_t batch = spec.get_int("batch"), seq = spec.get_int("seq");
  bool generic_batch = false, generic_seq = false;
  for (const std::string& name : generic_axes) {
    if (name == "batch") {
      generic_batch = true;
    } else if (name == "seq") {
      generic_seq = true;
    } else {
      throw Error(spec.op_name() + ": generic axis '" + name + "': expected batch or seq",
                  ErrorCode::kInvalidArgument);
    }
  }
  return [=](ir::ProgramBuilder& pb) {
    TokenAxes tokens{ir::Expr(batch), ir::Expr(seq), true};
    if (generic_batch) tokens.batch = pb.size("B", "batch", 1, kMaxGenericTokens);
    if (generic_seq) tokens.seq = pb.size("S", "seq", 1, kMaxGenericTokens);
    return tokens;
  };
}

TokenAxes begin_token_program(ir::ProgramBuilder& pb, const Specialization& spec,
                              const TokenAxesMaker& token_axes) {
  for (const AttrSpec& a : spec.op().attributes) pb.attribute(a.name, spec.raw(a.name));
  return token_axes(pb);
}

ir::TensorRef per_token_tensor(ir::ProgramBuilder& pb, const TokenAxes& tokens,
                               const std::string& name, ir::DType dtype,
                               const std::vector<int64_t>& row, ir::TensorRole role) {
  if (!tokens.generic) {
    std::vector<int64_t> shape = {tokens.batch.as<ir::IntConstNode>()->value,
                                  tokens.seq.as<ir::IntConstNode>()->value};
    shape.insert(shape.end(), row.begin(), row.end());
    if (role == ir::TensorRole::kInput) return pb.input(name, dtype, shape);
    if (role == ir::TensorRole::kOutput) return pb.output(name, dtype, shape);
    return pb.temporary(name, dtype, shape);
  }
  std::vector<ir::Expr> dims = {tokens.batch, tokens.seq};
  for (int64_t e : row) dims.emplace_back(e);
  std::vector<int> order(dims.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  return pb.dynamic_tensor(name, dtype, dims, order, role);
}

std::vector<DynamicAxis> mhc_token_dynamic_axes(bool token_pair) {
  return {DynamicAxis{"batch", -1, "batch B", false, token_pair},
          DynamicAxis{"seq", -1, "sequence S", false, token_pair}};
}

}  // namespace adjoint::ops
