// The mhc_post family's IR: attribute validation, the forward program (one kernel) and the
// backward program (four kernels, one per gradient: the domains differ), each over constant
// token axes or, generic, over runtime ones (ops/mhc_token_axes.h). Each gradient is a
// per-token Reduce, over the n streams (dx, dy) or over D (dh_res, dh_post). Each is a sum of
// products, so each is a fma_sum (ir/expr.h): one rounding per multiply-accumulate step.
#include "ops/mhc_post.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "ir/builder.h"
#include "ir/error.h"
#include "ops/mhc_token_axes.h"

namespace adjoint::ops {
namespace {

using ir::cast;
using ir::compute;
using ir::DType;
using ir::Expr;
using ir::over;
using ir::range;
using ir::fma_sum;
using ir::TensorRef;
using ir::Var;

constexpr const char* kForwardName = "mhc_post";
constexpr const char* kBackwardName = "mhc_post_backward";

int64_t positive_int(const Specialization& spec, const std::string& attr) {
  int64_t v = spec.get_int(attr);
  if (v < 1) {
    throw Error(spec.op_name() + ": attribute '" + attr + "': expected an integer >= 1, got " +
                    std::to_string(v),
                ErrorCode::kInvalidArgument);
  }
  return v;
}

/// The tensors both programs declare.
struct PostTensors {
  TokenAxes tokens;
  TensorRef x, y, h_res, h_post;
};

/// Records the attributes, makes the token axes and declares the inputs both programs read.
PostTensors begin_program(ir::ProgramBuilder& pb, const Specialization& spec,
                          const MhcPostConfig& c, const TokenAxesMaker& token_axes) {
  const TokenAxes tokens = begin_token_program(pb, spec, token_axes);
  const int64_t n = c.streams, D = c.dim;
  const ir::TensorRole in = ir::TensorRole::kInput;
  return PostTensors{
      tokens,
      per_token_tensor(pb, tokens, "x", c.dtype, {n, D}, in),
      per_token_tensor(pb, tokens, "y", c.dtype, {D}, in),
      per_token_tensor(pb, tokens, "h_res", c.param_dtype, {n, n}, in),
      per_token_tensor(pb, tokens, "h_post", c.param_dtype, {n}, in),
  };
}

std::vector<AttrSpec> attributes() {
  return {
      {"batch", AttrKind::kInt, std::nullopt, "B, the batch size (0: an empty batch)", {}},
      {"seq", AttrKind::kInt, std::nullopt, "S, the sequence length (0: an empty batch)", {}},
      {"n", AttrKind::kInt, std::nullopt, "number of residual streams (4, 6, 8 in practice)", {}},
      {"dim", AttrKind::kInt, std::nullopt, "D, the hidden size of one stream", {}},
      {"dtype",
       AttrKind::kDType,
       "bf16",
       "dtype of x, y, out and their gradients; h_res, h_post and theirs are f32 (f64 if f64)",
       {"bf16", "f16", "f32", "f64"}},
  };
}

}  // namespace

MhcPostConfig mhc_post_config(const Specialization& spec) {
  MhcPostConfig c;
  c.batch = token_count(spec, "batch");
  c.seq = token_count(spec, "seq");
  c.streams = positive_int(spec, "n");
  c.dim = positive_int(spec, "dim");
  c.dtype = spec.get_dtype("dtype");
  c.param_dtype = c.dtype == DType::kF64 ? DType::kF64 : DType::kF32;
  const double elements = static_cast<double>(c.batch) * static_cast<double>(c.seq) *
                          static_cast<double>(c.streams) *
                          static_cast<double>(std::max(c.dim, c.streams));
  if (elements >= std::ldexp(1.0, 62)) {
    throw Error(spec.op_name() + ": batch=" + std::to_string(c.batch) +
                    " seq=" + std::to_string(c.seq) + " n=" + std::to_string(c.streams) +
                    " dim=" + std::to_string(c.dim) + " gives tensors of more than 2^62 elements",
                ErrorCode::kInvalidArgument);
  }
  return c;
}

/// out[b, s, i, d] = sum_j h_res[i, j] x[j, d] + h_post[i] y[d]
ir::Program build_mhc_post(const Specialization& spec, const TokenAxesMaker& token_axes) {
  const MhcPostConfig c = mhc_post_config(spec);
  ir::ProgramBuilder pb(kForwardName);
  PostTensors t = begin_program(pb, spec, c, token_axes);
  TensorRef out =
      per_token_tensor(pb, t.tokens, "out", c.dtype, {c.streams, c.dim}, ir::TensorRole::kOutput);
  const DType p = c.param_dtype;
  Var b("b"), s("s"), i("i"), d("d"), j("j");
  Expr mixed = fma_sum({range(j, c.streams)}, t.h_res(b, s, i, j), cast(p, t.x(b, s, j, d)), p);
  Expr value = mixed + t.h_post(b, s, i) * cast(p, t.y(b, s, d));
  pb.kernel("mhc_post_out", {compute(out, over(out, {b, s, i, d}), cast(c.dtype, value))});
  return std::move(pb).build();
}

ir::Program build_mhc_post_backward(const Specialization& spec, const TokenAxesMaker& token_axes) {
  const MhcPostConfig c = mhc_post_config(spec);
  ir::ProgramBuilder pb(kBackwardName);
  PostTensors t = begin_program(pb, spec, c, token_axes);
  const TokenAxes& tokens = t.tokens;
  const int64_t n = c.streams, D = c.dim;
  const DType p = c.param_dtype;
  const ir::TensorRole in = ir::TensorRole::kInput, result = ir::TensorRole::kOutput;
  TensorRef grad_out = per_token_tensor(pb, tokens, "grad_out", c.dtype, {n, D}, in);
  TensorRef dx = per_token_tensor(pb, tokens, "dx", c.dtype, {n, D}, result);
  TensorRef dy = per_token_tensor(pb, tokens, "dy", c.dtype, {D}, result);
  TensorRef dh_res = per_token_tensor(pb, tokens, "dh_res", p, {n, n}, result);
  TensorRef dh_post = per_token_tensor(pb, tokens, "dh_post", p, {n}, result);
  auto g = [&](Expr b, Expr s, Expr i, Expr d) { return cast(p, grad_out(b, s, i, d)); };

  {  // dx[b, s, j, d] = sum_i h_res[i, j] grad_out[i, d]
    Var b("b"), s("s"), j("j"), d("d"), i("i");
    Expr value = fma_sum({range(i, n)}, t.h_res(b, s, i, j), g(b, s, i, d), p);
    pb.kernel("mhc_post_dx", {compute(dx, over(dx, {b, s, j, d}), cast(c.dtype, value))});
  }
  {  // dy[b, s, d] = sum_i h_post[i] grad_out[i, d]
    Var b("b"), s("s"), d("d"), i("i");
    Expr value = fma_sum({range(i, n)}, t.h_post(b, s, i), g(b, s, i, d), p);
    pb.kernel("mhc_post_dy", {compute(dy, over(dy, {b, s, d}), cast(c.dtype, value))});
  }
  {  // dh_res[b, s, i, j] = sum_d grad_out[i, d] x[j, d]
    Var b("b"), s("s"), i("i"), j("j"), d("d");
    Expr value = fma_sum({range(d, D)}, g(b, s, i, d), cast(p, t.x(b, s, j, d)), p);
    pb.kernel("mhc_post_dh_res", {compute(dh_res, over(dh_res, {b, s, i, j}), value)});
  }
  {  // dh_post[b, s, i] = sum_d grad_out[i, d] y[d]
    Var b("b"), s("s"), i("i"), d("d");
    Expr value = fma_sum({range(d, D)}, g(b, s, i, d), cast(p, t.y(b, s, d)), p);
    pb.kernel("mhc_post_dh_post", {compute(dh_post, over(dh_post, {b, s, i}), value)});
  }
  return std::move(pb).build();
}

std::vector<OpDefinition> mhc_post_ops() {
  return {
      OpDefinition{kForwardName,
                   "mHC post mapping forward: out = h_res . x + h_post (x) y, per token",
                   attributes(),
                   built_from_attributes(build_specialized<build_mhc_post>),
                   {"mhc_post batch=2 seq=3 n=4 dim=12 dtype=bf16",
                    "mhc_post batch=1 seq=5 n=6 dim=7 dtype=f32",
                    "mhc_post batch=1 seq=4096 n=4 dim=4096 dtype=bf16"}},
      OpDefinition{kBackwardName,
                   "mHC post mapping backward: dx, dy, dh_res, dh_post (per-token reductions)",
                   attributes(),
                   built_from_attributes(build_specialized<build_mhc_post_backward>),
                   {"mhc_post_backward batch=2 seq=3 n=4 dim=12 dtype=bf16",
                    "mhc_post_backward batch=1 seq=5 n=6 dim=7 dtype=f16",
                    "mhc_post_backward batch=1 seq=4096 n=4 dim=4096 dtype=bf16"}},
  };
}

}  // namespace adjoint::ops
