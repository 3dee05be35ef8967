// Finite-difference gradient checks for backward programs, run by the interpreter in f64.
//
// For a forward program F (inputs x, outputs y) and upstream gradients g, the loss is
// L(x) = sum_o <g_o, y_o(x)>. gradcheck() perturbs each element of one input by +-eps, runs F
// twice, and compares (L(x+eps) - L(x-eps)) / (2 eps) against the analytic gradient a backward
// program produced.
#pragma once

#include <string>
#include <vector>

#include "ir/interpreter.h"
#include "ir/program.h"

namespace adjoint::testing {

struct GradcheckResult {
  double max_abs_error = 0;   ///< max |numeric - analytic|
  double max_abs_grad = 0;    ///< max |analytic|, for scale
  int64_t checked = 0;        ///< elements compared
  int64_t worst_index = -1;   ///< storage index of the worst element
};

/// Numeric gradient of sum_o <output_grads[o], F(x)[o]> with respect to `wrt`, compared with
/// `analytic` (storage layout of `wrt`). Every element is checked unless `max_elements` > 0, in
/// which case an evenly spaced subset of that many is.
GradcheckResult gradcheck(const ir::Program& forward, const ir::HostBuffers& inputs,
                          const ir::HostBuffers& output_grads, const std::string& wrt,
                          const std::vector<double>& analytic, double eps = 1e-6,
                          int64_t max_elements = 0);

/// Largest |got - want| / (atol + rtol * |want|) over both buffers (<= 1 means within
/// tolerance); `where` receives the index of the worst element.
double tolerance_ratio(const std::vector<double>& got, const std::vector<double>& want,
                       double atol, double rtol, int64_t* where = nullptr);

}  // namespace adjoint::testing
