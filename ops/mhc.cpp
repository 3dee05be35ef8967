// The mhc family's IR: attribute validation, the forward program (five kernels) and the backward
// program (ten kernels, with x_mix; with few tokens, see uses_x_mix, also ten: dvecx stored). Per-token quantities are
// materialized in temporaries of the parameter dtype so that no O(nD) reduction is recomputed
// inside an O(nD) domain; token sums are Reduce nodes over (b, s), so every output is written
// once, deterministically. Every sum of products is a fma_sum (ir/expr.h): each product goes
// into its accumulator with one rounding (fmaf on the device; dx and x_mix do 24 multiply-adds
// per element of x). Both programs are built over constant token axes or, generic, over runtime
// ones (ops/mhc_token_axes.h): the generic backward always takes the x_mix form.
#include "ops/mhc.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>

#include "ir/builder.h"
#include "ir/error.h"

namespace adjoint::ops {
namespace {

using ir::cast;
using ir::compute;
using ir::DType;
using ir::Expr;
using ir::over;
using ir::range;
using ir::sum;
using ir::TensorRef;
using ir::Var;

constexpr const char* kForwardName = "mhc_pre";
constexpr const char* kBackwardName = "mhc_pre_backward";

[[noreturn]] void bad_attribute(const Specialization& spec, const std::string& attr,
                                const std::string& what) {
  throw Error(spec.op_name() + ": attribute '" + attr + "': " + what, ErrorCode::kInvalidArgument);
}

int64_t positive_int(const Specialization& spec, const std::string& attr) {
  int64_t v = spec.get_int(attr);
  if (v < 1) bad_attribute(spec, attr, "expected an integer >= 1, got " + std::to_string(v));
  return v;
}

double non_negative_float(const Specialization& spec, const std::string& attr) {
  double v = spec.get_float(attr);
  if (!(v >= 0)) bad_attribute(spec, attr, "expected a number >= 0, got " + spec.raw(attr));
  return v;
}

/// Rejects shapes whose element counts would not fit comfortably in 64-bit index math.
void check_sizes_fit(const Specialization& spec, const MhcConfig& c) {
  const double limit = std::ldexp(1.0, 62);
  double tokens = static_cast<double>(c.batch) * static_cast<double>(c.seq);
  // In double: mix_width()/token_width() are i64 products that overflow (UB) for a huge n or D.
  const double n = static_cast<double>(c.streams);
  const double mix_width = n * n + 2 * n, token_width = n * static_cast<double>(c.dim);
  double largest = std::max(tokens * token_width, mix_width * token_width);
  largest = std::max(largest, tokens * mix_width);
  if (largest >= limit) {
    throw Error(spec.op_name() + ": batch=" + std::to_string(c.batch) +
                    " seq=" + std::to_string(c.seq) + " n=" + std::to_string(c.streams) +
                    " dim=" + std::to_string(c.dim) + " gives tensors of more than 2^62 elements",
                ErrorCode::kInvalidArgument);
  }
}

std::vector<AttrSpec> shape_attributes() {
  return {
      {"batch", AttrKind::kInt, std::nullopt, "B, the batch size (0: an empty batch)", {}},
      {"seq", AttrKind::kInt, std::nullopt, "S, the sequence length (0: an empty batch)", {}},
      {"n", AttrKind::kInt, std::nullopt, "number of residual streams (4, 6, 8 in practice)", {}},
      {"dim", AttrKind::kInt, std::nullopt, "D, the hidden size of one stream", {}},
      {"dtype",
       AttrKind::kDType,
       "bf16",
       "dtype of x, grad_h_in, grad_x_post, h_in and dx; everything else is f32 (f64 if f64)",
       {"bf16", "f16", "f32", "f64"}},
  };
}

AttrSpec hc_eps_attribute() {
  return {"hc_eps", AttrKind::kFloat, "1e-6", "added to sigmoid() in h_pre", {}};
}

// --- forward ------------------------------------------------------------------------------

/// The tensors of the forward program, by their DESIGN.md names.
struct ForwardTensors {
  TensorRef x, phi, alpha, bias, gamma;
  TensorRef h_in, h_post, h_res, h_pre, inv_rms, h_mix;
};

ForwardTensors declare_forward(ir::ProgramBuilder& pb, const MhcConfig& c,
                               const TokenAxes& tokens) {
  const int64_t n = c.streams, D = c.dim, K = c.mix_width();
  const DType p = c.param_dtype;
  const ir::TensorRole in = ir::TensorRole::kInput, out = ir::TensorRole::kOutput;
  return ForwardTensors{
      per_token_tensor(pb, tokens, "x", c.dtype, {n, D}, in),
      pb.input("phi", p, {K, n * D}),
      pb.input("alpha", p, {3}),
      pb.input("bias", p, {K}),
      pb.input("gamma", p, {n, D}),
      per_token_tensor(pb, tokens, "h_in", c.dtype, {D}, out),
      per_token_tensor(pb, tokens, "h_post", p, {n}, out),
      per_token_tensor(pb, tokens, "h_res", p, {n, n}, out),
      per_token_tensor(pb, tokens, "h_pre", p, {n}, out),
      per_token_tensor(pb, tokens, "inv_rms", p, {}, out),
      per_token_tensor(pb, tokens, "h_mix", p, {K}, out),
  };
}

/// inv_rms[b, s] = rsqrt(sum_{i,d} x^2 / (n D) + norm_eps)
void add_rms_kernel(ir::ProgramBuilder& pb, const MhcConfig& c, const ForwardTensors& t) {
  const DType p = c.param_dtype;
  Var b("b"), s("s"), i("i"), d("d");
  Expr xv = cast(p, t.x(b, s, i, d));
  Expr sum_of_squares = ir::fma_sum({range(i, c.streams), range(d, c.dim)}, xv, xv, p);
  Expr mean = sum_of_squares / static_cast<double>(c.token_width());
  pb.kernel("mhc_rms", {compute(t.inv_rms, over(t.inv_rms, {b, s}), ir::rsqrt(mean + c.norm_eps))});
}

/// h_mix[b, s, k] = sum_{i,d} x[b, s, i, d] * gamma[i, d] * phi[k, i D + d]
void add_mix_kernel(ir::ProgramBuilder& pb, const MhcConfig& c, const ForwardTensors& t) {
  const DType p = c.param_dtype;
  Var b("b"), s("s"), k("k"), i("i"), d("d");
  Expr scaled = cast(p, t.x(b, s, i, d)) * t.gamma(i, d);
  pb.kernel("mhc_mix",
            {compute(t.h_mix, over(t.h_mix, {b, s, k}),
                     ir::fma_sum({range(i, c.streams), range(d, c.dim)}, scaled,
                                 t.phi(k, i * c.dim + d), p))});
}

/// h_pre and h_post: the sigmoid gates of the first 2n mixing coefficients.
void add_gate_kernel(ir::ProgramBuilder& pb, const MhcConfig& c, const ForwardTensors& t) {
  const int64_t n = c.streams;
  Var b("b"), s("s"), i("i");
  auto m = [&](Expr k) { return t.h_mix(b, s, k) * t.inv_rms(b, s); };
  Expr pre = ir::sigmoid(t.alpha(0) * m(i) + t.bias(i)) + c.hc_eps;
  Expr post = 2.0 * ir::sigmoid(t.alpha(1) * m(n + i) + t.bias(n + i));
  pb.kernel("mhc_gates", {compute(t.h_pre, over(t.h_pre, {b, s, i}), pre),
                          compute(t.h_post, over(t.h_post, {b, s, i}), post)});
}

/// h_res[b, s, i, j] = alpha2 * m[2n + i n + j] + bias[2n + i n + j]
void add_residual_kernel(ir::ProgramBuilder& pb, const MhcConfig& c, const ForwardTensors& t) {
  const int64_t n = c.streams;
  Var b("b"), s("s"), i("i"), j("j");
  Expr k = 2 * n + i * n + j;
  Expr value = t.alpha(2) * (t.h_mix(b, s, k) * t.inv_rms(b, s)) + t.bias(k);
  pb.kernel("mhc_residual", {compute(t.h_res, over(t.h_res, {b, s, i, j}), value)});
}

/// h_in[b, s, d] = sum_i h_pre[b, s, i] * x[b, s, i, d]
void add_stream_mix_kernel(ir::ProgramBuilder& pb, const MhcConfig& c, const ForwardTensors& t) {
  const DType p = c.param_dtype;
  Var b("b"), s("s"), d("d"), i("i");
  Expr value = ir::fma_sum({range(i, c.streams)}, t.h_pre(b, s, i), cast(p, t.x(b, s, i, d)), p);
  pb.kernel("mhc_h_in", {compute(t.h_in, over(t.h_in, {b, s, d}), cast(c.dtype, value))});
}

// --- backward -----------------------------------------------------------------------------

/// The tensors of the backward program: inputs, outputs and per-token temporaries.
struct BackwardTensors {
  TensorRef x, phi, alpha, grad_h_in, grad_h_post, grad_h_res, inv_rms, h_mix, h_pre, h_post, gamma;
  std::optional<TensorRef> grad_x_post;
  TensorRef dx, dphi, dalpha, dbias, dgamma;
  // Per token: gradients of the gates' pre-activations, their concatenation `dlogit`
  // ([dh_pre2, dh_post2, grad_h_res], the gradient of alpha * m + bias), dh_mix_tmp (the
  // gradient of m), dh_mix (of h_mix) and dinv_rms. The gradient of v * gamma,
  // dvecx_mm = dh_mix . phi (K terms per element), is recomputed inside dx rather than stored
  // where the program goes through x_mix (many tokens): a B*S*n*D f32 temporary would cost
  // more traffic than x itself; with few tokens it is stored (dvecx below).
  TensorRef dh_pre2, dh_post2, dlogit, dh_mix_tmp, dh_mix, dinv_rms;
  // x_mix[k, i, d] = sum over tokens of dh_mix[k] x[i, d]: dphi = gamma x_mix, dgamma =
  // sum_k phi x_mix (only where it saves traffic, see uses_x_mix).
  std::optional<TensorRef> x_mix;
  // Without x_mix (B S <= 3), dvecx_mm stored once, B S n D f32 (at most 3 n D against phi's
  // K n D), for dx and dgamma, which would each read phi to recompute it: at B1 S1 n8 D16384
  // dgamma read phi's 42 MB again after dx. The same fma_sum per element: the same bits.
  std::optional<TensorRef> dvecx;
  // dalpha_tokens[b, s, q]: each token's share of dalpha[q].
  TensorRef dalpha_tokens;
};

/// Whether the parameter gradients go through x_mix. Per element (i, d) of a token row, x_mix
/// costs K f32 written once and read twice (by dphi and dgamma) and dgamma's one read of K phi
/// values: 4 K parameter words. Without it dgamma sums over the B S tokens itself, and each
/// token loads x and the K phi values again (dvecx_mm = dh_mix . phi recomputed per token):
/// B S (x + K phi) (dphi's token sum reads x either way). With few tokens (B S = 1 at
/// D = 16384: 42 MB of x_mix traffic against phi read once) the direct sums move less; from
/// B S = 4 on x_mix does (at B1 S181 n8 D4096 the direct dgamma ran 181 x 80 dependent
/// multiply-adds per thread in 32,768 threads, reloading phi for every token).
/// BuildOptions::mhc_x_mix_counts_phi = false (ADJOINT_TUNE_MHC_X_MIX=0) counts only the direct
/// dgamma's loads of x (x_mix from B S > 6 K on), the rule before.
bool uses_x_mix(const MhcConfig& c, const BuildOptions& options) {
  const double tokens = static_cast<double>(c.batch) * static_cast<double>(c.seq);
  const double x_bytes = ir::dtype_bytes(c.dtype);
  const double p_bytes = ir::dtype_bytes(c.param_dtype);
  const double k = static_cast<double>(c.mix_width());
  if (!options.mhc_x_mix_counts_phi) return tokens * x_bytes > 3.0 * k * p_bytes;
  return tokens * (x_bytes + k * p_bytes) > 4.0 * k * p_bytes;
}

/// The backward's tensors: x_mix where `x_mix`, else dvecx where `store_dvecx`.
BackwardTensors declare_backward(ir::ProgramBuilder& pb, const MhcConfig& c,
                                 const TokenAxes& tokens, bool x_mix, bool store_dvecx) {
  const int64_t n = c.streams, D = c.dim, K = c.mix_width();
  const DType p = c.param_dtype;
  // A tensor of one token row per (b, s): dynamic in a generic program.
  auto per_token = [&](const char* name, DType dtype, std::vector<int64_t> row,
                       ir::TensorRole role) {
    return per_token_tensor(pb, tokens, name, dtype, row, role);
  };
  const ir::TensorRole in = ir::TensorRole::kInput, out = ir::TensorRole::kOutput,
                       tmp = ir::TensorRole::kTemporary;
  BackwardTensors t{
      per_token("x", c.dtype, {n, D}, in),
      pb.input("phi", p, {K, n * D}),
      pb.input("alpha", p, {3}),
      per_token("grad_h_in", c.dtype, {D}, in),
      per_token("grad_h_post", p, {n}, in),
      per_token("grad_h_res", p, {n, n}, in),
      per_token("inv_rms", p, {}, in),
      per_token("h_mix", p, {K}, in),
      per_token("h_pre", p, {n}, in),
      per_token("h_post", p, {n}, in),
      pb.input("gamma", p, {n, D}),
      std::nullopt,
      per_token("dx", c.dtype, {n, D}, out),
      pb.output("dphi", p, {K, n * D}),
      pb.output("dalpha", p, {3}),
      pb.output("dbias", p, {K}),
      pb.output("dgamma", p, {n, D}),
      per_token("dh_pre2", p, {n}, tmp),
      per_token("dh_post2", p, {n}, tmp),
      per_token("dlogit", p, {K}, tmp),
      per_token("dh_mix_tmp", p, {K}, tmp),
      per_token("dh_mix", p, {K}, tmp),
      per_token("dinv_rms", p, {}, tmp),
      std::nullopt,
      std::nullopt,
      per_token("dalpha_tokens", p, {3}, tmp),
  };
  if (x_mix) {
    t.x_mix = pb.temporary("x_mix", p, {K, n, D});
  } else if (store_dvecx) {
    t.dvecx = per_token("dvecx", p, {n, D}, tmp);
  }
  if (c.with_grad_x_post) t.grad_x_post = per_token("grad_x_post", c.dtype, {n, D}, in);
  return t;
}

/// dh_pre2 = (sum_d grad_h_in[d] x[i, d]) * s (1 - s) with s = h_pre - hc_eps = sigmoid(.);
/// dh_post2 = grad_h_post * h_post (1 - h_post / 2), as h_post = 2 sigmoid(.).
void add_gate_grad_kernel(ir::ProgramBuilder& pb, const MhcConfig& c, const BackwardTensors& t) {
  const DType p = c.param_dtype;
  Var b("b"), s("s"), i("i"), d("d");
  Expr dh_pre =
      ir::fma_sum({range(d, c.dim)}, cast(p, t.grad_h_in(b, s, d)), cast(p, t.x(b, s, i, d)), p);
  Expr sig_pre = t.h_pre(b, s, i) - c.hc_eps;
  Expr h_post = t.h_post(b, s, i);
  pb.kernel("mhc_gate_grads",
            {compute(t.dh_pre2, over(t.dh_pre2, {b, s, i}), dh_pre * sig_pre * (1.0 - sig_pre)),
             compute(t.dh_post2, over(t.dh_post2, {b, s, i}),
                     t.grad_h_post(b, s, i) * h_post * (1.0 - h_post * 0.5))});
}

/// dlogit = [dh_pre2, dh_post2, grad_h_res]; dh_mix_tmp = alpha[part] * dlogit (the gradient of
/// m); dh_mix = dh_mix_tmp * inv_rms (the gradient of h_mix, as m = h_mix * inv_rms).
void add_mix_grad_kernel(ir::ProgramBuilder& pb, const MhcConfig& c, const BackwardTensors& t) {
  const int64_t n = c.streams;
  Var b("b"), s("s"), k("k");
  Expr res = k - 2 * n;  // index into the flattened n x n residual block
  Expr dlogit = ir::select(
      k < n, t.dh_pre2(b, s, k),
      ir::select(k < 2 * n, t.dh_post2(b, s, k - n), t.grad_h_res(b, s, res / n, res % n)));
  Expr part = ir::min(k / n, 2);  // 0: pre, 1: post, 2: res
  pb.kernel(
      "mhc_mix_grads",
      {compute(t.dlogit, over(t.dlogit, {b, s, k}), dlogit),
       compute(t.dh_mix_tmp, over(t.dh_mix_tmp, {b, s, k}), t.alpha(part) * t.dlogit(b, s, k)),
       compute(t.dh_mix, over(t.dh_mix, {b, s, k}), t.dh_mix_tmp(b, s, k) * t.inv_rms(b, s))});
}

/// dinv_rms[b, s] = sum_k dh_mix_tmp[k] * h_mix[k]
void add_rms_grad_kernel(ir::ProgramBuilder& pb, const MhcConfig& c, const BackwardTensors& t) {
  Var b("b"), s("s"), k("k");
  Expr value = ir::fma_sum({range(k, c.mix_width())}, t.dh_mix_tmp(b, s, k), t.h_mix(b, s, k),
                           c.param_dtype);
  pb.kernel("mhc_rms_grad", {compute(t.dinv_rms, over(t.dinv_rms, {b, s}), value)});
}

/// dvecx_mm[b, s, i, d] = sum_k dh_mix[b, s, k] * phi[k, i D + d]: the gradient of v * gamma.
Expr dvecx_mm(const MhcConfig& c, const BackwardTensors& t, Expr b, Expr s, Expr i, Expr d) {
  Var k("k");
  return ir::fma_sum({range(k, c.mix_width())}, t.dh_mix(b, s, k), t.phi(k, i * c.dim + d),
                     c.param_dtype);
}

/// dvecx[b, s, i, d] = dvecx_mm[b, s, i, d], stored (only where BackwardTensors::dvecx is).
void add_dvecx_kernel(ir::ProgramBuilder& pb, const MhcConfig& c, const BackwardTensors& t) {
  Var b("b"), s("s"), i("i"), d("d");
  pb.kernel("mhc_dvecx",
            {compute(*t.dvecx, over(*t.dvecx, {b, s, i, d}), dvecx_mm(c, t, b, s, i, d))});
}

/// dx = dvecx_mm gamma - dinv_rms inv_rms^3 / (n D) x + h_pre[i] grad_h_in[d] (+ grad_x_post)
void add_dx_kernel(ir::ProgramBuilder& pb, const MhcConfig& c, const BackwardTensors& t) {
  const DType p = c.param_dtype;
  Var b("b"), s("s"), i("i"), d("d");
  Expr r = t.inv_rms(b, s);
  Expr rms_coefficient = t.dinv_rms(b, s) * (r * r * r) / static_cast<double>(c.token_width());
  Expr dvecx = t.dvecx ? (*t.dvecx)(b, s, i, d) : dvecx_mm(c, t, b, s, i, d);
  Expr dx = dvecx * t.gamma(i, d) -
            rms_coefficient * cast(p, t.x(b, s, i, d)) +
            t.h_pre(b, s, i) * cast(p, t.grad_h_in(b, s, d));
  if (t.grad_x_post) dx = dx + cast(p, (*t.grad_x_post)(b, s, i, d));
  pb.kernel("mhc_dx", {compute(t.dx, over(t.dx, {b, s, i, d}), cast(c.dtype, dx))});
}

/// x_mix[k, i, d] = sum_{b,s} dh_mix[b, s, k] * x[b, s, i, d]: the one token sum over x that
/// both parameter gradients need. The compiler gives it a thread tile over k (every thread
/// reads its x elements once for all K sums) and splits it over the tokens.
void add_token_sum_kernel(ir::ProgramBuilder& pb, const MhcConfig& c, const TokenAxes& tokens,
                          const BackwardTensors& t) {
  const DType p = c.param_dtype;
  Var k("k"), i("i"), d("d"), b("b"), s("s");
  pb.kernel("mhc_x_mix", {compute(*t.x_mix, over(*t.x_mix, {k, i, d}),
                                  ir::fma_sum({range(b, tokens.batch), range(s, tokens.seq)},
                                              t.dh_mix(b, s, k), cast(p, t.x(b, s, i, d)), p))});
}

/// dphi[k, j] = gamma[j / D, j % D] * x_mix[k, j / D, j % D]
///   (= sum_{b,s} dh_mix[b, s, k] * x[b, s, j / D, j % D] * gamma[j / D, j % D]);
/// dgamma[i, d] = sum_k phi[k, i D + d] * x_mix[k, i, d]
///   (= sum_{b,s} x[b, s, i, d] * dvecx_mm[b, s, i, d], the token sum moved inside).
void add_parameter_grad_kernels(ir::ProgramBuilder& pb, const MhcConfig& c,
                                const BackwardTensors& t) {
  const int64_t D = c.dim;
  Var k("k"), j("j"), i("i"), d("d"), q("q");
  pb.kernel("mhc_dphi", {compute(t.dphi, over(t.dphi, {k, j}),
                                 t.gamma(j / D, j % D) * (*t.x_mix)(k, j / D, j % D))});
  pb.kernel("mhc_dgamma",
            {compute(t.dgamma, over(t.dgamma, {i, d}),
                     ir::fma_sum({range(q, c.mix_width())}, t.phi(q, i * D + d), (*t.x_mix)(q, i, d),
                                 c.param_dtype))});
}

/// Few tokens: dphi[k, j] = sum_{b,s} dh_mix[b, s, k] * x[b, s, j / D, j % D] * gamma[j / D, j % D]
/// and dgamma[i, d] = sum_{b,s} x[b, s, i, d] * dvecx_mm[b, s, i, d], each directly.
void add_direct_parameter_grad_kernels(ir::ProgramBuilder& pb, const MhcConfig& c,
                                       const BackwardTensors& t) {
  const DType p = c.param_dtype;
  const int64_t D = c.dim;
  Var k("k"), j("j"), b("b"), s("s"), i("i"), d("d"), b2("b"), s2("s");
  Expr scaled_x = cast(p, t.x(b, s, j / D, j % D)) * t.gamma(j / D, j % D);
  pb.kernel("mhc_dphi", {compute(t.dphi, over(t.dphi, {k, j}),
                                 ir::fma_sum({range(b, c.batch), range(s, c.seq)},
                                             t.dh_mix(b, s, k), scaled_x, p))});
  pb.kernel("mhc_dgamma",
            {compute(t.dgamma, over(t.dgamma, {i, d}),
                     ir::fma_sum({range(b2, c.batch), range(s2, c.seq)}, cast(p, t.x(b2, s2, i, d)),
                                 t.dvecx ? (*t.dvecx)(b2, s2, i, d) : dvecx_mm(c, t, b2, s2, i, d),
                                 p))});
}

/// dbias[k] = sum_{b,s} dlogit[b, s, k]
void add_dbias_kernel(ir::ProgramBuilder& pb, const MhcConfig& c, const TokenAxes& tokens,
                      const BackwardTensors& t) {
  Var k("k"), b("b"), s("s");
  pb.kernel("mhc_dbias",
            {compute(t.dbias, over(t.dbias, {k}),
                     sum({range(b, tokens.batch), range(s, tokens.seq)}, t.dlogit(b, s, k),
                         c.param_dtype))});
}

/// dalpha_tokens[b, s, q] = sum_{k in part q} dlogit[b, s, k] * m[b, s, k], m = h_mix * inv_rms;
/// part q covers k in [q n, q n + n) for pre and post, [2n, 2n + n^2) for res. Then
/// dalpha[q] = sum_{b,s} dalpha_tokens[b, s, q]: a plain token sum of loads, which splits well,
/// where one sum over (b, s, k) walked the variable-extent k loop serially in each partial
/// (115 us of 872 at B2 S2048 n6 D1024 on the H100).
void add_dalpha_kernels(ir::ProgramBuilder& pb, const MhcConfig& c, const TokenAxes& tokens,
                        const BackwardTensors& t) {
  const int64_t n = c.streams;
  Var b("b"), s("s"), q("q"), k("k");
  Expr part_size = ir::select(q == 2, Expr(n * n), Expr(n));
  Expr m = t.h_mix(b, s, k) * t.inv_rms(b, s);
  Expr per_token = ir::fma_sum({range(k, q * n, part_size)}, t.dlogit(b, s, k), m, c.param_dtype);
  pb.kernel("mhc_dalpha_tokens",
            {compute(t.dalpha_tokens, over(t.dalpha_tokens, {b, s, q}), per_token)});
  Var q2("q"), b2("b"), s2("s");
  pb.kernel("mhc_dalpha", {compute(t.dalpha, over(t.dalpha, {q2}),
                                   sum({range(b2, tokens.batch), range(s2, tokens.seq)},
                                       t.dalpha_tokens(b2, s2, q2), c.param_dtype))});
}

}  // namespace

MhcConfig mhc_config(const Specialization& spec) {
  MhcConfig c;
  c.batch = token_count(spec, "batch");
  c.seq = token_count(spec, "seq");
  c.streams = positive_int(spec, "n");
  c.dim = positive_int(spec, "dim");
  c.dtype = spec.get_dtype("dtype");
  c.param_dtype = c.dtype == DType::kF64 ? DType::kF64 : DType::kF32;
  c.hc_eps = non_negative_float(spec, "hc_eps");
  if (spec.op_name() == kForwardName) {
    c.norm_eps = non_negative_float(spec, "norm_eps");
  } else {
    c.with_grad_x_post = spec.get_bool("with_grad_x_post");
  }
  check_sizes_fit(spec, c);
  return c;
}

ir::Program build_mhc_pre(const Specialization& spec, const TokenAxesMaker& token_axes) {
  const MhcConfig c = mhc_config(spec);
  ir::ProgramBuilder pb(kForwardName);
  ForwardTensors t = declare_forward(pb, c, begin_token_program(pb, spec, token_axes));
  add_rms_kernel(pb, c, t);
  add_mix_kernel(pb, c, t);
  add_gate_kernel(pb, c, t);
  add_residual_kernel(pb, c, t);
  add_stream_mix_kernel(pb, c, t);
  return std::move(pb).build();
}

namespace {

/// The backward program over `tokens` (constants, or sizes of a generic program), through
/// x_mix where `x_mix`, else with dvecx stored where `store_dvecx`.
ir::Program build_backward(const Specialization& spec, const MhcConfig& c,
                           const TokenAxesMaker& token_axes, bool x_mix, bool store_dvecx) {
  ir::ProgramBuilder pb(kBackwardName);
  const TokenAxes tokens = begin_token_program(pb, spec, token_axes);
  BackwardTensors t = declare_backward(pb, c, tokens, x_mix, store_dvecx);
  add_gate_grad_kernel(pb, c, t);
  add_mix_grad_kernel(pb, c, t);
  add_rms_grad_kernel(pb, c, t);
  if (t.dvecx) add_dvecx_kernel(pb, c, t);
  add_dx_kernel(pb, c, t);
  if (t.x_mix) {
    add_token_sum_kernel(pb, c, tokens, t);
    add_parameter_grad_kernels(pb, c, t);
  } else {
    add_direct_parameter_grad_kernels(pb, c, t);
  }
  add_dbias_kernel(pb, c, tokens, t);
  add_dalpha_kernels(pb, c, tokens, t);
  return std::move(pb).build();
}

}  // namespace

ir::Program build_mhc_pre_backward(const Specialization& spec, const BuildOptions& options) {
  MhcConfig c = mhc_config(spec);
  return build_backward(spec, c, constant_token_axes(spec), uses_x_mix(c, options),
                        options.mhc_store_dvecx);
}

ir::Program build_mhc_pre_backward_generic(const Specialization& spec,
                                           const std::vector<std::string>& generic_axes) {
  MhcConfig c = mhc_config(spec);
  // Every token count takes the x_mix form (the one of many tokens): its token sums are the
  // ones lower_generic splits over the runtime token count (docs/dynamic_shapes.md).
  return build_backward(spec, c, generic_token_axes(spec, generic_axes),
                        /*x_mix=*/true,
                        /*store_dvecx=*/false);  // no BuildOptions apply to the x_mix form
}

std::vector<OpDefinition> mhc_ops() {
  std::vector<AttrSpec> forward_attributes = shape_attributes();
  forward_attributes.push_back(
      {"norm_eps", AttrKind::kFloat, "1e-6", "added to mean(x^2) before rsqrt", {}});
  forward_attributes.push_back(hc_eps_attribute());

  std::vector<AttrSpec> backward_attributes = shape_attributes();
  backward_attributes.push_back(hc_eps_attribute());
  backward_attributes.push_back({"with_grad_x_post",
                                 AttrKind::kBool,
                                 "false",
                                 "take grad_x_post[B,S,n,D] and add it into dx",
                                 {}});

  return {
      OpDefinition{
          kForwardName,
          "mHC pre mapping forward: h_in, h_post, h_res and the saved h_pre, inv_rms, h_mix",
          forward_attributes,
          built_from_attributes(build_specialized<build_mhc_pre>),
          {"mhc_pre batch=2 seq=3 n=4 dim=12 dtype=bf16",
           "mhc_pre batch=1 seq=5 n=6 dim=7 dtype=f32",
           "mhc_pre batch=4 seq=2048 n=4 dim=4096 dtype=bf16"}},
      OpDefinition{
          kBackwardName,
          "mHC pre mapping backward: dx, dphi, dalpha, dbias, dgamma (token sums deterministic)",
          backward_attributes,
          build_mhc_pre_backward,
          {"mhc_pre_backward batch=2 seq=3 n=4 dim=12 dtype=bf16",
           "mhc_pre_backward batch=1 seq=5 n=6 dim=7 dtype=f16 with_grad_x_post=true",
           "mhc_pre_backward batch=4 seq=2048 n=4 dim=4096 dtype=bf16 with_grad_x_post=true"}},
  };
}

}  // namespace adjoint::ops
