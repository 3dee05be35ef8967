// Plain-loop references of the rest of the mHC layer: mhc_post / mhc_post_backward and
// mhc_sinkhorn / mhc_sinkhorn_backward, written from the formulas in ops/mhc_post.h and
// ops/mhc_sinkhorn.h without the IR, one token at a time in double, each output rounded once.
// The Sinkhorn reference iterates on the n x n matrix itself (P = P / (row sums + eps), ...),
// as the public PyTorch definitions do, not on the row/column scales the IR keeps, and its
// backward replays the saved matrices in reverse; so agreement checks the scale formulation
// too.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ops/mhc_post.h"
#include "ops/mhc_sinkhorn.h"
#include "reference/families.h"

namespace adjoint::reference {
namespace {

using ir::HostBuffers;

std::vector<double> rounded(ir::DType t, std::vector<double> values) {
  for (double& v : values) v = ir::round_to(t, v);
  return values;
}

HostBuffers mhc_post_reference(const ops::Specialization& spec, const HostBuffers& in) {
  ops::MhcPostConfig c = ops::mhc_post_config(spec);
  const int64_t n = c.streams, D = c.dim, tokens = c.batch * c.seq;
  const auto &x = in.at("x"), &y = in.at("y"), &h_res = in.at("h_res"), &h_post = in.at("h_post");
  std::vector<double> out(tokens * n * D);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t d = 0; d < D; ++d) {
        double v = h_post[t * n + i] * y[t * D + d];
        for (int64_t j = 0; j < n; ++j) v += h_res[(t * n + i) * n + j] * x[(t * n + j) * D + d];
        out[(t * n + i) * D + d] = v;
      }
    }
  }
  return HostBuffers{{"out", rounded(c.dtype, out)}};
}

HostBuffers mhc_post_backward_reference(const ops::Specialization& spec, const HostBuffers& in) {
  ops::MhcPostConfig c = ops::mhc_post_config(spec);
  const int64_t n = c.streams, D = c.dim, tokens = c.batch * c.seq;
  const auto &x = in.at("x"), &y = in.at("y"), &h_res = in.at("h_res"), &h_post = in.at("h_post");
  const auto& g = in.at("grad_out");
  std::vector<double> dx(tokens * n * D, 0.0), dy(tokens * D, 0.0), dh_res(tokens * n * n, 0.0),
      dh_post(tokens * n, 0.0);
  // The adjoint of out[i, d] = sum_j h_res[i, j] x[j, d] + h_post[i] y[d], term by term.
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t d = 0; d < D; ++d) {
        const double gi = g[(t * n + i) * D + d];
        dh_post[t * n + i] += gi * y[t * D + d];
        dy[t * D + d] += gi * h_post[t * n + i];
        for (int64_t j = 0; j < n; ++j) {
          dh_res[(t * n + i) * n + j] += gi * x[(t * n + j) * D + d];
          dx[(t * n + j) * D + d] += gi * h_res[(t * n + i) * n + j];
        }
      }
    }
  }
  return HostBuffers{{"dx", rounded(c.dtype, dx)},
                     {"dy", rounded(c.dtype, dy)},
                     {"dh_res", rounded(c.param_dtype, dh_res)},
                     {"dh_post", rounded(c.param_dtype, dh_post)}};
}

using Matrix = std::vector<double>;  // n x n, row-major

/// Divides each row (rows = true) or column by its sum + eps.
Matrix normalized(const Matrix& p, int64_t n, double eps, bool rows) {
  Matrix q(p.size());
  for (int64_t a = 0; a < n; ++a) {
    double total = 0;
    for (int64_t b = 0; b < n; ++b) total += rows ? p[a * n + b] : p[b * n + a];
    for (int64_t b = 0; b < n; ++b) {
      int64_t at = rows ? a * n + b : b * n + a;
      q[at] = p[at] / (total + eps);
    }
  }
  return q;
}

/// The adjoint of normalized(): the gradient of p given that of q = normalized(p).
Matrix normalized_adjoint(const Matrix& p, const Matrix& q, const Matrix& dq, int64_t n, double eps,
                          bool rows) {
  Matrix dp(p.size());
  for (int64_t a = 0; a < n; ++a) {
    double total = 0, dot = 0;
    for (int64_t b = 0; b < n; ++b) {
      int64_t at = rows ? a * n + b : b * n + a;
      total += p[at];
      dot += dq[at] * q[at];
    }
    for (int64_t b = 0; b < n; ++b) {
      int64_t at = rows ? a * n + b : b * n + a;
      dp[at] = (dq[at] - dot) / (total + eps);
    }
  }
  return dp;
}

Matrix softmax_rows(const double* h, int64_t n) {
  Matrix s(n * n);
  for (int64_t i = 0; i < n; ++i) {
    double top = h[i * n];
    for (int64_t j = 1; j < n; ++j) top = std::max(top, h[i * n + j]);
    double total = 0;
    for (int64_t j = 0; j < n; ++j) total += std::exp(h[i * n + j] - top);
    for (int64_t j = 0; j < n; ++j) s[i * n + j] = std::exp(h[i * n + j] - top) / total;
  }
  return s;
}

/// Every matrix of one token's forward: [softmax + eps, after col 1, after row 2, after col 2,
/// ...], 2 t_max matrices; the last is the output.
std::vector<Matrix> sinkhorn_iterates(const double* h, int64_t n, int64_t t_max, double eps) {
  Matrix p = softmax_rows(h, n);
  for (double& v : p) v += eps;
  std::vector<Matrix> iterates{p};
  iterates.push_back(normalized(iterates.back(), n, eps, false));
  for (int64_t t = 1; t < t_max; ++t) {
    iterates.push_back(normalized(iterates.back(), n, eps, true));
    iterates.push_back(normalized(iterates.back(), n, eps, false));
  }
  return iterates;
}

HostBuffers mhc_sinkhorn_reference(const ops::Specialization& spec, const HostBuffers& in) {
  ops::MhcSinkhornConfig c = ops::mhc_sinkhorn_config(spec);
  const int64_t n = c.streams, tokens = c.batch * c.seq;
  std::vector<double> out(tokens * n * n);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<Matrix> it = sinkhorn_iterates(&in.at("h_res")[t * n * n], n, c.iterations, c.eps);
    std::copy(it.back().begin(), it.back().end(), out.begin() + t * n * n);
  }
  return HostBuffers{{"out", rounded(c.dtype, out)}};
}

HostBuffers mhc_sinkhorn_backward_reference(const ops::Specialization& spec,
                                            const HostBuffers& in) {
  ops::MhcSinkhornConfig c = ops::mhc_sinkhorn_config(spec);
  const int64_t n = c.streams, tokens = c.batch * c.seq;
  std::vector<double> grad(tokens * n * n);
  for (int64_t t = 0; t < tokens; ++t) {
    const double* h = &in.at("h_res")[t * n * n];
    std::vector<Matrix> it = sinkhorn_iterates(h, n, c.iterations, c.eps);
    Matrix g(in.at("grad_out").begin() + t * n * n, in.at("grad_out").begin() + (t + 1) * n * n);
    // Iterate k (k >= 1) came from iterate k - 1 by a column step (k odd) or a row step.
    for (size_t k = it.size() - 1; k >= 1; --k) {
      g = normalized_adjoint(it[k - 1], it[k], g, n, c.eps, k % 2 == 0);
    }
    // it[0] = softmax + eps: dh[i, j] = s[i, j] (g[i, j] - sum_l s[i, l] g[i, l]).
    Matrix s = softmax_rows(h, n);
    for (int64_t i = 0; i < n; ++i) {
      double dot = 0;
      for (int64_t l = 0; l < n; ++l) dot += s[i * n + l] * g[i * n + l];
      for (int64_t j = 0; j < n; ++j)
        grad[t * n * n + i * n + j] = s[i * n + j] * (g[i * n + j] - dot);
    }
  }
  return HostBuffers{{"grad_h_res", rounded(c.dtype, grad)}};
}

}  // namespace

std::vector<std::pair<std::string, ReferenceFn>> mhc_layer_references() {
  return {{"mhc_post", mhc_post_reference},
          {"mhc_post_backward", mhc_post_backward_reference},
          {"mhc_sinkhorn", mhc_sinkhorn_reference},
          {"mhc_sinkhorn_backward", mhc_sinkhorn_backward_reference}};
}

void adjust_mhc_layer_inputs(const ops::Specialization& spec, const ir::Program& program,
                             ir::HostBuffers& inputs, std::mt19937_64& rng) {
  (void)program;
  // Sinkhorn logits spread over [-3, 3] so that the softmax is far from uniform and every
  // iteration still changes the matrix.
  if (spec.op_name().rfind("mhc_sinkhorn", 0) == 0) {
    ops::MhcSinkhornConfig c = ops::mhc_sinkhorn_config(spec);
    std::uniform_real_distribution<double> logit(-3.0, 3.0);
    for (double& v : inputs.at("h_res")) v = ir::round_to(c.dtype, logit(rng));
  }
}

}  // namespace adjoint::reference
