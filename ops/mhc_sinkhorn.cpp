// The mhc_sinkhorn family's IR (semantics and the kernel plan are in the header): K =
// softmax(h_res) + eps in one kernel, the initial scales [R_1, C_1] in one, one kernel per
// Sinkhorn iteration writing the scales [R_t, C_t], and either out = R K C (forward) or the
// reverse sweep, newest iteration first, ending in the softmax adjoint (backward). The per-token scale vectors are small, so each
// kernel recomputes what it needs of them inline (reductions over n inside reductions over n)
// instead of materializing more tensors. Every sum of products is a fma_sum (ir/expr.h): one
// rounding per multiply-accumulate step, as on the device. Both programs are built over constant
// token axes or, generic, over runtime ones (ops/mhc_token_axes.h); every per-token tensor,
// temporaries included, is then [B, S, ...] with B and S sizes.
#include "ops/mhc_sinkhorn.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <string>

#include "ir/builder.h"
#include "ir/error.h"
#include "ops/mhc_token_axes.h"

namespace adjoint::ops {
namespace {

using ir::compute;
using ir::DType;
using ir::Expr;
using ir::over;
using ir::range;
using ir::sum;
using ir::TensorRef;
using ir::Var;

constexpr const char* kForwardName = "mhc_sinkhorn";
constexpr const char* kBackwardName = "mhc_sinkhorn_backward";

[[noreturn]] void bad_attribute(const Specialization& spec, const std::string& attr,
                                const std::string& what) {
  throw Error(spec.op_name() + ": attribute '" + attr + "': " + what, ErrorCode::kInvalidArgument);
}

int64_t positive_int(const Specialization& spec, const std::string& attr) {
  int64_t v = spec.get_int(attr);
  if (v < 1) bad_attribute(spec, attr, "expected an integer >= 1, got " + std::to_string(v));
  return v;
}

/// The row and column scales of one iterate P = diag(row) K diag(col) of one token, as
/// expressions of a stream index.
struct Scales {
  std::function<Expr(Expr)> row, col;
};

/// A state of the iteration, for the token (b, s) of whatever kernel asks.
using State = std::function<Scales(Expr b, Expr s)>;

/// Builds one specialization's kernels; `base` is K = softmax(h_res) + eps.
class SinkhornBuilder {
 public:
  /// `backward`: the softmax and the column sums of K are kept in tensors of their own, for
  /// the adjoint of the first normalization.
  SinkhornBuilder(ir::ProgramBuilder& pb, const MhcSinkhornConfig& c, const TokenAxes& tokens,
                  TensorRef h_res, bool backward)
      : pb_(pb),
        c_(c),
        tokens_(tokens),
        h_res_(std::move(h_res)),
        base_(temporary("base", {c.streams, c.streams})),
        backward_(backward) {
    if (backward_) {
      soft_ = temporary("soft", {c.streams, c.streams});
      col_sums_ = temporary("col_sums", {c.streams});
    }
  }

  /// A per-token temporary [B, S, row...] of the dtype.
  TensorRef temporary(const std::string& name, const std::vector<int64_t>& row) const {
    return per_token_tensor(pb_, tokens_, name, c_.dtype, row, ir::TensorRole::kTemporary);
  }

  /// softmax(h_res[b, s, i, :])[j], computed as exp(h - row max) / sum exp(h - row max).
  /// No expression holding a Reduce is used twice here: each use builds its own (a shared
  /// reduce is valid IR, but a pass that rewrites it would give two reduces one variable).
  Expr softmax(Expr b, Expr s, Expr i, Expr j) const {
    auto row_max = [&] {
      Var m("m");
      return ir::maximum({range(m, c_.streams)}, h_res_(b, s, i, m), c_.dtype);
    };
    Var l("l");
    Expr denominator =
        sum({range(l, c_.streams)}, ir::exp(h_res_(b, s, i, l) - row_max()), c_.dtype);
    return ir::exp(h_res_(b, s, i, j) - row_max()) / denominator;
  }

  Expr k(Expr b, Expr s, Expr i, Expr j) const { return base_(b, s, i, j); }

  /// sum_k K[k, j] + eps, inline.
  Expr col_sum_eps(Expr b, Expr s, Expr j) const {
    Var k_("k");
    return sum({range(k_, c_.streams)}, k(b, s, k_, j), c_.dtype) + c_.eps;
  }

  /// base[b, s, i, j] = softmax(h_res)[i, j] + eps; the backward first stores the softmax in
  /// soft (the same value, rounded to the dtype as before) and adds eps to it.
  void add_base_kernel() {
    Var b("b"), s("s"), i("i"), j("j");
    if (!backward_) {
      pb_.kernel("sinkhorn_base",
                 {compute(base_, over(base_, {b, s, i, j}), softmax(b, s, i, j) + c_.eps)});
      return;
    }
    Var b2("b"), s2("s"), i2("i"), j2("j");
    pb_.kernel("sinkhorn_base",
               {compute(soft_, over(soft_, {b, s, i, j}), softmax(b, s, i, j)),
                compute(base_, over(base_, {b2, s2, i2, j2}), soft_(b2, s2, i2, j2) + c_.eps)});
  }

  /// After the softmax and the first column normalization: scales_1 = [R_1, C_1], R_1 = 1,
  /// C_1 = 1 / (col sum + eps), stored like every later state, so that the iterations from the
  /// second on all read their state alike (compiler/stage_loops.h runs them as one loop). The
  /// backward first keeps col sum + eps in col_sums, a kernel of its own.
  State add_initial_kernel() {
    const int64_t n = c_.streams;
    TensorRef scales = temporary("scales_1", {2 * n});
    if (backward_) {
      Var b("b"), s("s"), j("j");
      pb_.kernel("sinkhorn_col_sums",
                 {compute(col_sums_, over(col_sums_, {b, s, j}), col_sum_eps(b, s, j))});
    }
    Var b("b"), s("s"), q("q");
    Expr value = ir::select(q < n, ir::constant(c_.dtype, 1.0), 1.0 / col_sum_eps(b, s, q - n));
    pb_.kernel("sinkhorn_initial", {compute(scales, over(scales, {b, s, q}), value)});
    return loaded_state(scales);
  }

  /// The state stored in scales [B, S, 2n] = [R, C].
  State loaded_state(TensorRef scales) const {
    const int64_t n = c_.streams;
    return [scales, n](Expr b, Expr s) {
      return Scales{[=](Expr i) { return scales(b, s, i); },
                    [=](Expr j) { return scales(b, s, j + n); }};
    };
  }

  /// One iteration (row then column normalization) after `previous`, inline. R / (R a + eps)
  /// is written 1 / (a + eps / R) so that the previous scale, which may hold reductions when
  /// inline, is used once.
  Scales step(const Scales& previous, Expr b, Expr s) const {
    auto row = [this, previous, b, s](Expr i) {
      Var l("l");
      Expr row_sum = ir::fma_sum({range(l, c_.streams)}, k(b, s, i, l), previous.col(l), c_.dtype);
      return 1.0 / (row_sum + ir::constant(c_.dtype, c_.eps) / previous.row(i));
    };
    auto col = [this, previous, row, b, s](Expr j) {
      Var q("k");
      Expr col_sum = ir::fma_sum({range(q, c_.streams)}, row(Expr(q)), k(b, s, q, j), c_.dtype);
      return 1.0 / (col_sum + ir::constant(c_.dtype, c_.eps) / previous.col(j));
    };
    return Scales{row, col};
  }

  /// Iterations 2..t_max, kernels of sinkhorn_iterations_per_launch(n) iterations each; every
  /// iteration t writes scales_t (so that the backward reads every state), computed inline from
  /// the state its kernel starts from. Returns the state of each t (index t - 1), the first one
  /// inline.
  std::vector<State> add_iteration_kernels() {
    const int64_t n = c_.streams;
    const int64_t per_launch = sinkhorn_iterations_per_launch(n);
    std::vector<State> states{add_initial_kernel()};
    for (int64_t first = 2; first <= c_.iterations; first += per_launch) {
      const int64_t last = std::min(first + per_launch - 1, c_.iterations);
      Var b("b"), s("s"), q("q");
      Scales state = states.back()(b, s);
      std::vector<ir::Stage> stages;
      std::vector<TensorRef> written;
      for (int64_t t = first; t <= last; ++t) {
        TensorRef scales = temporary("scales_" + std::to_string(t), {2 * n});
        state = step(state, b, s);
        Expr value = ir::select(q < n, state.row(q), state.col(q - n));
        stages.push_back(compute(scales, over(scales, {b, s, q}), value));
        written.push_back(scales);
      }
      std::string name = "sinkhorn_iteration_" + std::to_string(first);
      if (last > first) name += "_to_" + std::to_string(last);
      pb_.kernel(name, std::move(stages));
      for (const TensorRef& scales : written) states.push_back(loaded_state(scales));
    }
    return states;
  }

  /// out[b, s, i, j] = R_T[i] K[i, j] C_T[j]
  void add_out_kernel(const State& last, TensorRef out) {
    Var b("b"), s("s"), i("i"), j("j");
    Scales sc = last(b, s);
    pb_.kernel("sinkhorn_out",
               {compute(out, over(out, {b, s, i, j}), sc.row(i) * k(b, s, i, j) * sc.col(j))});
  }

  /// The adjoint of iteration t >= 2 (row then column normalization of P_{t-1}), given the
  /// gradient of P_t, writes the gradient of P_{t-1}.
  void add_reverse_kernel(int64_t t, const State& previous_state, const State& current_state,
                          TensorRef grad_current, TensorRef grad_previous) {
    Var b("b"), s("s"), i("i"), j("j");
    Scales prev = previous_state(b, s), cur = current_state(b, s);
    const DType p = c_.dtype;
    const int64_t n = c_.streams;
    // Column step: P_t = A / (col sums of A + eps), A = diag(R_t) K diag(C_{t-1}).
    auto col_denominator = [&](Expr jj) {
      Var q("k");
      return prev.col(jj) * ir::fma_sum({range(q, n)}, cur.row(q), k(b, s, q, jj), p) + c_.eps;
    };
    auto grad_a = [&](Expr ii, Expr jj) {
      Var q("k");
      Expr p_t = cur.row(q) * k(b, s, q, jj) * cur.col(jj);
      Expr dot = ir::fma_sum({range(q, n)}, grad_current(b, s, q, jj), p_t, p);
      return (grad_current(b, s, ii, jj) - dot) / col_denominator(jj);
    };
    // Row step: A = P_{t-1} / (row sums of P_{t-1} + eps), P_{t-1} = diag(R_{t-1}) K diag(C_{t-1}).
    Var l("l"), m("m");
    Expr a_il = cur.row(i) * k(b, s, i, l) * prev.col(l);
    Expr dot = ir::fma_sum({range(l, n)}, grad_a(i, l), a_il, p);
    Expr row_denominator =
        prev.row(i) * ir::fma_sum({range(m, n)}, k(b, s, i, m), prev.col(m), p) + c_.eps;
    Expr value = (grad_a(i, j) - dot) / row_denominator;
    pb_.kernel("sinkhorn_reverse_" + std::to_string(t),
               {compute(grad_previous, over(grad_previous, {b, s, i, j}), value)});
  }

  /// The adjoint of the first column normalization and of K = softmax(h_res) + eps, reading
  /// the softmax and the column sums (+ eps) the forward part stored.
  void add_final_reverse_kernel(TensorRef grad_first, TensorRef grad_h_res) {
    Var b("b"), s("s"), i("i"), j("j");
    const DType p = c_.dtype;
    const int64_t n = c_.streams;
    auto col_sum_eps = [&](Expr jj) { return col_sums_(b, s, jj); };
    auto grad_k = [&](Expr ii, Expr jj) {
      Var q("k");
      Expr p_1 = k(b, s, q, jj) / col_sum_eps(jj);
      Expr dot = ir::fma_sum({range(q, n)}, grad_first(b, s, q, jj), p_1, p);
      return (grad_first(b, s, ii, jj) - dot) / col_sum_eps(jj);
    };
    Var l("l");
    Expr dot = ir::fma_sum({range(l, n)}, soft_(b, s, i, l), grad_k(i, l), p);
    Expr value = soft_(b, s, i, j) * (grad_k(i, j) - dot);
    pb_.kernel("sinkhorn_reverse_1", {compute(grad_h_res, over(grad_h_res, {b, s, i, j}), value)});
  }

 private:
  ir::ProgramBuilder& pb_;
  const MhcSinkhornConfig& c_;
  TokenAxes tokens_;
  TensorRef h_res_;
  TensorRef base_;
  bool backward_;
  TensorRef soft_{ir::Tensor()}, col_sums_{ir::Tensor()};  ///< backward only
};

std::vector<AttrSpec> attributes() {
  return {
      {"batch", AttrKind::kInt, std::nullopt, "B, the batch size (0: an empty batch)", {}},
      {"seq", AttrKind::kInt, std::nullopt, "S, the sequence length (0: an empty batch)", {}},
      {"n",
       AttrKind::kInt,
       std::nullopt,
       "number of residual streams: h_res is n x n per token",
       {}},
      {"t_max",
       AttrKind::kInt,
       "20",
       "row/column normalization pairs (the first row one is the softmax)",
       {}},
      {"eps",
       AttrKind::kFloat,
       "1e-6",
       "added to P after the softmax and to every row/column sum",
       {}},
      {"dtype", AttrKind::kDType, "f32", "dtype of every tensor", {"f32", "f64"}},
  };
}

}  // namespace

int64_t sinkhorn_iterations_per_launch(int64_t streams) {
  // An iteration inlined into the next costs a factor of about n^2 per point; keep the deepest
  // at n^(2k) <= 256 operations (n = 4: 2 iterations per launch; n >= 5: 1).
  int64_t k = 1;
  double cost = static_cast<double>(streams) * static_cast<double>(streams);
  while (k < 4 && cost * static_cast<double>(streams) * static_cast<double>(streams) <= 256.0) {
    cost *= static_cast<double>(streams) * static_cast<double>(streams);
    ++k;
  }
  return k;
}

MhcSinkhornConfig mhc_sinkhorn_config(const Specialization& spec) {
  MhcSinkhornConfig c;
  c.batch = token_count(spec, "batch");
  c.seq = token_count(spec, "seq");
  c.streams = positive_int(spec, "n");
  c.iterations = positive_int(spec, "t_max");
  if (c.iterations > kMaxSinkhornIterations) {
    bad_attribute(spec, "t_max",
                  "expected at most " + std::to_string(kMaxSinkhornIterations) +
                      " (one launch per "
                      "iteration), got " +
                      std::to_string(c.iterations));
  }
  c.eps = spec.get_float("eps");
  if (!(c.eps >= 0) || !std::isfinite(c.eps)) {
    bad_attribute(spec, "eps", "expected a finite number >= 0, got " + spec.raw("eps"));
  }
  c.dtype = spec.get_dtype("dtype");
  const double elements = static_cast<double>(c.batch) * static_cast<double>(c.seq) *
                          static_cast<double>(c.streams) * static_cast<double>(c.streams);
  if (elements >= std::ldexp(1.0, 62)) {
    throw Error(spec.op_name() + ": batch=" + std::to_string(c.batch) +
                    " seq=" + std::to_string(c.seq) + " n=" + std::to_string(c.streams) +
                    " gives tensors of more than 2^62 elements",
                ErrorCode::kInvalidArgument);
  }
  return c;
}

namespace {

/// The per-token tensors of either program, n x n each.
std::vector<int64_t> matrix_row(const MhcSinkhornConfig& c) {
  return {c.streams, c.streams};
}

}  // namespace

ir::Program build_mhc_sinkhorn(const Specialization& spec, const TokenAxesMaker& token_axes) {
  const MhcSinkhornConfig c = mhc_sinkhorn_config(spec);
  ir::ProgramBuilder pb(kForwardName);
  const TokenAxes tokens = begin_token_program(pb, spec, token_axes);
  TensorRef h_res =
      per_token_tensor(pb, tokens, "h_res", c.dtype, matrix_row(c), ir::TensorRole::kInput);
  TensorRef out =
      per_token_tensor(pb, tokens, "out", c.dtype, matrix_row(c), ir::TensorRole::kOutput);
  SinkhornBuilder sb(pb, c, tokens, h_res, /*backward=*/false);
  sb.add_base_kernel();
  std::vector<State> states = sb.add_iteration_kernels();
  sb.add_out_kernel(states.back(), out);
  return std::move(pb).build();
}

ir::Program build_mhc_sinkhorn_backward(const Specialization& spec,
                                        const TokenAxesMaker& token_axes) {
  const MhcSinkhornConfig c = mhc_sinkhorn_config(spec);
  ir::ProgramBuilder pb(kBackwardName);
  const TokenAxes tokens = begin_token_program(pb, spec, token_axes);
  const std::vector<int64_t> row = matrix_row(c);
  const ir::TensorRole in = ir::TensorRole::kInput;
  TensorRef h_res = per_token_tensor(pb, tokens, "h_res", c.dtype, row, in);
  TensorRef grad_out = per_token_tensor(pb, tokens, "grad_out", c.dtype, row, in);
  TensorRef grad_h_res =
      per_token_tensor(pb, tokens, "grad_h_res", c.dtype, row, ir::TensorRole::kOutput);
  SinkhornBuilder sb(pb, c, tokens, h_res, /*backward=*/true);
  sb.add_base_kernel();
  std::vector<State> states = sb.add_iteration_kernels();
  TensorRef grad = grad_out;  // the gradient of P_t, newest t first
  for (int64_t t = c.iterations; t >= 2; --t) {
    TensorRef grad_previous = sb.temporary("grad_p_" + std::to_string(t - 1), row);
    sb.add_reverse_kernel(t, states[t - 2], states[t - 1], grad, grad_previous);
    grad = grad_previous;
  }
  sb.add_final_reverse_kernel(grad, grad_h_res);
  return std::move(pb).build();
}

std::vector<OpDefinition> mhc_sinkhorn_ops() {
  return {
      OpDefinition{
          kForwardName,
          "mHC Sinkhorn-Knopp projection of softmax(h_res) onto doubly stochastic n x n",
          attributes(),
          built_from_attributes(build_specialized<build_mhc_sinkhorn>),
          {"mhc_sinkhorn batch=2 seq=3 n=4 t_max=3",
           "mhc_sinkhorn batch=1 seq=5 n=6 t_max=1 eps=0.01", "mhc_sinkhorn batch=1 seq=4096 n=4"}},
      OpDefinition{kBackwardName,
                   "mHC Sinkhorn-Knopp backward: the exact adjoint of the t_max iterations",
                   attributes(),
                   built_from_attributes(build_specialized<build_mhc_sinkhorn_backward>),
                   {"mhc_sinkhorn_backward batch=2 seq=3 n=4 t_max=3",
                    "mhc_sinkhorn_backward batch=1 seq=5 n=6 t_max=2 eps=0.01",
                    "mhc_sinkhorn_backward batch=1 seq=4096 n=4 t_max=4"}},
  };
}

}  // namespace adjoint::ops
