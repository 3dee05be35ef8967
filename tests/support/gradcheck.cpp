// Central finite differences through the interpreter.
#include "support/gradcheck.h"

#include <algorithm>
#include <cmath>

#include "ir/error.h"

namespace adjoint::testing {
namespace {

double loss(const ir::Program& forward, const ir::HostBuffers& inputs,
            const ir::HostBuffers& output_grads) {
  ir::HostBuffers out = ir::interpret(forward, inputs);
  double l = 0;
  for (const auto& [name, g] : output_grads) {
    const std::vector<double>& y = out.at(name);
    for (size_t i = 0; i < g.size(); ++i) l += g[i] * y[i];
  }
  return l;
}

}  // namespace

GradcheckResult gradcheck(const ir::Program& forward, const ir::HostBuffers& inputs,
                          const ir::HostBuffers& output_grads, const std::string& wrt,
                          const std::vector<double>& analytic, double eps, int64_t max_elements) {
  ir::HostBuffers x = inputs;
  std::vector<double>& target = x.at(wrt);
  if (analytic.size() != target.size()) {
    throw Error("gradcheck: analytic gradient of '" + wrt + "' has " +
                std::to_string(analytic.size()) + " values, expected " +
                std::to_string(target.size()));
  }
  GradcheckResult r;
  int64_t n = static_cast<int64_t>(target.size());
  int64_t step = (max_elements > 0 && n > max_elements) ? (n + max_elements - 1) / max_elements : 1;
  for (int64_t i = 0; i < n; i += step) {
    double saved = target[i];
    target[i] = saved + eps;
    double plus = loss(forward, x, output_grads);
    target[i] = saved - eps;
    double minus = loss(forward, x, output_grads);
    target[i] = saved;
    double numeric = (plus - minus) / (2 * eps);
    double err = std::fabs(numeric - analytic[i]);
    // Written as !(x <= max) so that a NaN becomes the worst value instead of being skipped.
    if (!(err <= r.max_abs_error)) {
      r.max_abs_error = err;
      r.worst_index = i;
    }
    double magnitude = std::fabs(analytic[i]);
    if (!(magnitude <= r.max_abs_grad)) r.max_abs_grad = magnitude;
    ++r.checked;
  }
  return r;
}

double tolerance_ratio(const std::vector<double>& got, const std::vector<double>& want,
                       double atol, double rtol, int64_t* where) {
  if (got.size() != want.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double r = std::fabs(got[i] - want[i]) / (atol + rtol * std::fabs(want[i]));
    if (!(r <= worst)) {
      worst = r;
      if (where) *where = static_cast<int64_t>(i);
    }
  }
  return worst;
}

}  // namespace adjoint::testing
