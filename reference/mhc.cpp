// Plain-loop references of the mhc family (mhc_pre, mhc_pre_backward), written from the
// DESIGN.md formulas without the IR: one token at a time, every intermediate in double, each
// output rounded once to its dtype. Also the input adjustment that gives the backward saved
// activations (inv_rms, h_mix, h_pre, h_post) consistent with a forward pass, so that every
// value is in its valid range (h_pre - hc_eps in (0, 1), h_post in (0, 2), inv_rms > 0).
#include <cmath>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ops/mhc.h"
#include "reference/families.h"

namespace adjoint::reference {
namespace {

using ir::HostBuffers;

double sigmoid(double z) {
  return 1.0 / (1.0 + std::exp(-z));
}

/// Rounds every value to `t`, as a store of that dtype does.
std::vector<double> rounded(ir::DType t, std::vector<double> values) {
  for (double& v : values) v = ir::round_to(t, v);
  return values;
}

/// The forward's per-token values for the whole batch, in double.
struct ForwardValues {
  std::vector<double> h_in, h_post, h_res, h_pre, inv_rms, h_mix;
};

/// The mhc_pre forward (DESIGN.md) on contiguous buffers; norm_eps and hc_eps passed in so that
/// the backward's input adjustment can use it too.
ForwardValues forward_pass(const ops::MhcConfig& c, double norm_eps, double hc_eps,
                           const std::vector<double>& x, const std::vector<double>& phi,
                           const std::vector<double>& alpha, const std::vector<double>& bias,
                           const std::vector<double>& gamma) {
  const int64_t n = c.streams, D = c.dim, N = c.token_width(), K = c.mix_width();
  const int64_t tokens = c.batch * c.seq;
  ForwardValues out;
  out.h_in.assign(tokens * D, 0.0);
  out.h_post.assign(tokens * n, 0.0);
  out.h_res.assign(tokens * n * n, 0.0);
  out.h_pre.assign(tokens * n, 0.0);
  out.inv_rms.assign(tokens, 0.0);
  out.h_mix.assign(tokens * K, 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    const double* v = &x[t * N];
    double sum_of_squares = 0;
    for (int64_t j = 0; j < N; ++j) sum_of_squares += v[j] * v[j];
    double inv_rms = 1.0 / std::sqrt(sum_of_squares / static_cast<double>(N) + norm_eps);
    out.inv_rms[t] = inv_rms;
    std::vector<double> m(K);
    for (int64_t k = 0; k < K; ++k) {
      double h_mix = 0;
      for (int64_t j = 0; j < N; ++j) h_mix += v[j] * gamma[j] * phi[k * N + j];
      out.h_mix[t * K + k] = h_mix;
      m[k] = h_mix * inv_rms;
    }
    for (int64_t i = 0; i < n; ++i) {
      out.h_pre[t * n + i] = sigmoid(alpha[0] * m[i] + bias[i]) + hc_eps;
      out.h_post[t * n + i] = 2.0 * sigmoid(alpha[1] * m[n + i] + bias[n + i]);
    }
    for (int64_t r = 0; r < n * n; ++r) {
      out.h_res[t * n * n + r] = alpha[2] * m[2 * n + r] + bias[2 * n + r];
    }
    for (int64_t d = 0; d < D; ++d) {
      double h_in = 0;
      for (int64_t i = 0; i < n; ++i) h_in += out.h_pre[t * n + i] * v[i * D + d];
      out.h_in[t * D + d] = h_in;
    }
  }
  return out;
}

HostBuffers mhc_pre_reference(const ops::Specialization& spec, const HostBuffers& in) {
  ops::MhcConfig c = ops::mhc_config(spec);
  ForwardValues f = forward_pass(c, c.norm_eps, c.hc_eps, in.at("x"), in.at("phi"), in.at("alpha"),
                                 in.at("bias"), in.at("gamma"));
  const ir::DType p = c.param_dtype;
  return HostBuffers{
      {"h_in", rounded(c.dtype, f.h_in)}, {"h_post", rounded(p, f.h_post)},
      {"h_res", rounded(p, f.h_res)},     {"h_pre", rounded(p, f.h_pre)},
      {"inv_rms", rounded(p, f.inv_rms)}, {"h_mix", rounded(p, f.h_mix)},
  };
}

/// mhc_pre_backward, token by token, following DESIGN.md's formulas literally.
HostBuffers mhc_pre_backward_reference(const ops::Specialization& spec, const HostBuffers& in) {
  ops::MhcConfig c = ops::mhc_config(spec);
  const int64_t n = c.streams, D = c.dim, N = c.token_width(), K = c.mix_width();
  const int64_t tokens = c.batch * c.seq;
  const std::vector<double>& x = in.at("x");
  const std::vector<double>& phi = in.at("phi");
  const std::vector<double>& alpha = in.at("alpha");
  const std::vector<double>& grad_h_in = in.at("grad_h_in");
  const std::vector<double>& grad_h_post = in.at("grad_h_post");
  const std::vector<double>& grad_h_res = in.at("grad_h_res");
  const std::vector<double>& inv_rms = in.at("inv_rms");
  const std::vector<double>& h_mix = in.at("h_mix");
  const std::vector<double>& h_pre = in.at("h_pre");
  const std::vector<double>& h_post = in.at("h_post");
  const std::vector<double>& gamma = in.at("gamma");
  const std::vector<double>* grad_x_post = c.with_grad_x_post ? &in.at("grad_x_post") : nullptr;

  std::vector<double> dx(tokens * N), dphi(K * N, 0.0), dalpha(3, 0.0), dbias(K, 0.0),
      dgamma(N, 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    const double* v = &x[t * N];
    const double* g_in = &grad_h_in[t * D];
    const double r = inv_rms[t];
    // Gradients of the pre-activations alpha * m + bias, one part after the other.
    std::vector<double> dlogit(K);
    for (int64_t i = 0; i < n; ++i) {
      double dh_pre = 0;
      for (int64_t d = 0; d < D; ++d) dh_pre += g_in[d] * v[i * D + d];
      double sig = h_pre[t * n + i] - c.hc_eps;
      dlogit[i] = dh_pre * sig * (1 - sig);
      double post = h_post[t * n + i];
      dlogit[n + i] = grad_h_post[t * n + i] * post * (1 - post / 2);
    }
    for (int64_t q = 0; q < n * n; ++q) dlogit[2 * n + q] = grad_h_res[t * n * n + q];

    std::vector<double> dh_mix_tmp(K), dh_mix(K);
    double dinv_rms = 0;
    for (int64_t k = 0; k < K; ++k) {
      int part = k < n ? 0 : (k < 2 * n ? 1 : 2);
      dh_mix_tmp[k] = alpha[part] * dlogit[k];
      dh_mix[k] = dh_mix_tmp[k] * r;
      dinv_rms += dh_mix_tmp[k] * h_mix[t * K + k];
      dbias[k] += dlogit[k];
      dalpha[part] += dlogit[k] * h_mix[t * K + k] * r;
    }
    for (int64_t j = 0; j < N; ++j) {
      int64_t i = j / D, d = j % D;
      double dvecx_mm = 0;
      for (int64_t k = 0; k < K; ++k) {
        dvecx_mm += dh_mix[k] * phi[k * N + j];
        dphi[k * N + j] += dh_mix[k] * v[j] * gamma[j];
      }
      double value = dvecx_mm * gamma[j] - dinv_rms * r * r * r / static_cast<double>(N) * v[j] +
                     h_pre[t * n + i] * g_in[d];
      if (grad_x_post) value += (*grad_x_post)[t * N + j];
      dx[t * N + j] = value;
      dgamma[j] += v[j] * dvecx_mm;
    }
  }
  const ir::DType p = c.param_dtype;
  return HostBuffers{
      {"dx", rounded(c.dtype, dx)}, {"dphi", rounded(p, dphi)},     {"dalpha", rounded(p, dalpha)},
      {"dbias", rounded(p, dbias)}, {"dgamma", rounded(p, dgamma)},
  };
}

/// Uniform values in [lo, hi] with a random sign, rounded to `t`.
std::vector<double> signed_uniform(size_t count, double lo, double hi, ir::DType t,
                                   std::mt19937_64& rng) {
  std::uniform_real_distribution<double> magnitude(lo, hi);
  std::bernoulli_distribution negative(0.5);
  std::vector<double> values(count);
  for (double& v : values) v = ir::round_to(t, negative(rng) ? -magnitude(rng) : magnitude(rng));
  return values;
}

}  // namespace

std::vector<std::pair<std::string, ReferenceFn>> mhc_references() {
  return {{"mhc_pre", mhc_pre_reference}, {"mhc_pre_backward", mhc_pre_backward_reference}};
}

void adjust_mhc_inputs(const ops::Specialization& spec, const ir::Program& program,
                       ir::HostBuffers& inputs, std::mt19937_64& rng) {
  ops::MhcConfig c = ops::mhc_config(spec);
  const ir::DType p = c.param_dtype;
  // phi ~ U[-1, 1] * 2 / sqrt(nD) keeps h_mix * inv_rms of order one, where the sigmoids are
  // neither flat nor saturated and every gradient term matters; alpha is kept away from zero
  // so that each of the three parts (pre, post, res) reaches dh_mix.
  const double phi_scale = 2.0 / std::sqrt(static_cast<double>(c.token_width()));
  for (double& v : inputs.at("phi")) v = ir::round_to(p, v * phi_scale);
  inputs.at("alpha") = signed_uniform(3, 0.5, 1.0, p, rng);
  if (spec.op_name() != "mhc_pre_backward") return;

  // The backward reads saved activations: recompute them with the forward from x, phi,
  // alpha, gamma and a bias of its own, and round them to their dtypes as the forward would.
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> bias(c.mix_width());
  for (double& v : bias) v = ir::round_to(p, uniform(rng));
  const double norm_eps = 1e-6;  // the forward's default; the backward does not depend on it
  ForwardValues f = forward_pass(c, norm_eps, c.hc_eps, inputs.at("x"), inputs.at("phi"),
                                 inputs.at("alpha"), bias, inputs.at("gamma"));
  auto store = [&](const std::string& name, const std::vector<double>& values) {
    ir::Tensor t = program.find_tensor(name);
    inputs.at(name) = rounded(t ? t->dtype : p, values);
  };
  store("inv_rms", f.inv_rms);
  store("h_mix", f.h_mix);
  store("h_pre", f.h_pre);
  store("h_post", f.h_post);
}

}  // namespace adjoint::reference
