// Tests of the mhc family (mhc_pre, mhc_pre_backward) without a GPU: the attribute schema and
// its errors, the programs' tensors, the interpreter against the plain-loop references of
// reference/mhc.cpp over awkward shapes and every dtype, finite differences of the f64 forward
// program against the f64 backward, and one targeted test per bug of the Triton port in seed
// report 002 (rows truncated to a block, streams left at zero, double-counted dbias_res, a
// missing inv_rms factor in one part of dgamma).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/verifier.h"
#include "ops/mhc.h"
#include "ops/registry.h"
#include "reference/reference.h"
#include "support/gradcheck.h"

namespace adjoint {
namespace {

using ir::DType;
using ir::HostBuffers;

struct Shape {
  int64_t batch, seq, n, dim;
};

std::string shape_text(const Shape& s) {
  return "batch=" + std::to_string(s.batch) + " seq=" + std::to_string(s.seq) +
         " n=" + std::to_string(s.n) + " dim=" + std::to_string(s.dim);
}

ops::Specialization forward_spec(const Shape& s, const std::string& dtype,
                                 const std::string& extra = "") {
  return ops::parse_specialization("mhc_pre " + shape_text(s) + " dtype=" + dtype + " " + extra);
}

ops::Specialization backward_spec(const Shape& s, const std::string& dtype, bool grad_x_post,
                                  const std::string& extra = "") {
  return ops::parse_specialization("mhc_pre_backward " + shape_text(s) + " dtype=" + dtype +
                                   " with_grad_x_post=" + (grad_x_post ? "true" : "false") + " " +
                                   extra);
}

/// Tolerance of one output, by its dtype: one ulp of the 16-bit formats (the IR computes in
/// f32 and rounds once, the reference in double), f32 round-off growth, f64 round-off.
double tolerance_for(DType t) {
  switch (t) {
    case DType::kBF16:
      return 8e-3;
    case DType::kF16:
      return 1e-3;
    case DType::kF32:
      return 4e-6;
    default:
      return 1e-10;
  }
}

/// Expects every output of `want` to match `got` within its dtype's tolerance
/// (|got - want| <= tol * (1 + |want|)).
void expect_outputs_match(const ir::Program& program, const HostBuffers& got,
                          const HostBuffers& want, const std::string& context) {
  ASSERT_FALSE(want.empty());
  for (const ir::Tensor& t : program.outputs) {
    EXPECT_TRUE(want.count(t->name)) << context << ": output " << t->name << " has no reference";
  }
  for (const auto& [name, expected] : want) {
    ir::Tensor t = program.find_tensor(name);
    ASSERT_TRUE(t) << context << ": reference output " << name << " is not in the program";
    ASSERT_EQ(got.at(name).size(), expected.size()) << context << ": " << name;
    double tol = tolerance_for(t->dtype);
    int64_t where = -1;
    double ratio = testing::tolerance_ratio(got.at(name), expected, tol, tol, &where);
    EXPECT_LE(ratio, 1.0) << context << ": " << name << "[" << where << "] = "
                          << (where >= 0 ? got.at(name)[where] : NAN) << ", reference "
                          << (where >= 0 ? expected[where] : NAN) << " (tolerance " << tol << ")";
  }
}

/// Interprets the op's program on make_inputs() and returns (inputs, IR result, reference).
struct Interpretation {
  ir::Program program;
  HostBuffers inputs, got, want;
};

Interpretation run_against_reference(const ops::Specialization& spec, uint64_t seed = 1) {
  Interpretation r{spec.build_program(), {}, {}, {}};
  ir::verify(r.program);
  r.inputs = reference::make_inputs(spec, r.program, seed);
  r.got = ir::interpret(r.program, r.inputs);
  r.want = reference::find(spec.op_name())(spec, r.inputs);
  return r;
}

Interpretation rerun(const ops::Specialization& spec, Interpretation r) {
  r.got = ir::interpret(r.program, r.inputs);
  r.want = reference::find(spec.op_name())(spec, r.inputs);
  return r;
}

std::vector<double> random_values(size_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> v(count);
  for (double& x : v) x = uniform(rng);
  return v;
}

// --- registry and programs -------------------------------------------------------------------

std::vector<std::string> attribute_names(const ops::OpDefinition& op) {
  std::vector<std::string> names;
  for (const ops::AttrSpec& a : op.attributes) names.push_back(a.name);
  return names;
}

TEST(MhcRegistry, SchemaHasTheDocumentedAttributes) {
  EXPECT_EQ(attribute_names(ops::find_op("mhc_pre")),
            (std::vector<std::string>{"batch", "seq", "n", "dim", "dtype", "norm_eps", "hc_eps"}));
  EXPECT_EQ(attribute_names(ops::find_op("mhc_pre_backward")),
            (std::vector<std::string>{"batch", "seq", "n", "dim", "dtype", "hc_eps",
                                      "with_grad_x_post"}));
  ops::Specialization spec = ops::parse_specialization("mhc_pre_backward batch=2 seq=3 n=4 dim=12");
  EXPECT_EQ(spec.to_string(),
            "mhc_pre_backward batch=2 seq=3 n=4 dim=12 dtype=bf16 hc_eps=1e-06 "
            "with_grad_x_post=false");
  EXPECT_EQ(ops::parse_specialization("mhc_pre batch=1 seq=1 n=1 dim=1").to_string(),
            "mhc_pre batch=1 seq=1 n=1 dim=1 dtype=bf16 norm_eps=1e-06 hc_eps=1e-06");
}

TEST(MhcRegistry, EveryExampleBuildsAndTheFirstIsSmall) {
  for (const char* name : {"mhc_pre", "mhc_pre_backward"}) {
    const ops::OpDefinition& op = ops::find_op(name);
    ASSERT_FALSE(op.examples.empty()) << name;
    for (const std::string& text : op.examples) {
      ir::Program p = ops::parse_specialization(text).build_program();
      EXPECT_NO_THROW(ir::verify(p)) << text;
    }
    EXPECT_EQ(ops::parse_specialization(op.examples.front()).get_int("dim"), 12) << name;
  }
}

void expect_error_mentions(const std::string& text, const std::vector<std::string>& parts) {
  try {
    ops::parse_specialization(text).build_program();
    ADD_FAILURE() << "no error for: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << text;
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << e.what() << "' does not mention '" << part << "'";
    }
  }
}

TEST(MhcRegistry, BadAttributesNameTheArgumentExpectedAndGiven) {
  expect_error_mentions("mhc_pre_backward batch=2 seq=3 n=0 dim=12",
                        {"mhc_pre_backward", "'n'", ">= 1", "got 0"});
  expect_error_mentions("mhc_pre batch=2 seq=3 n=4 dim=-7", {"mhc_pre", "'dim'", "got -7"});
  expect_error_mentions("mhc_pre_backward batch=-1 seq=3 n=4 dim=12",
                        {"'batch'", ">= 0", "got -1"});
  expect_error_mentions("mhc_pre seq=-2 batch=1 n=4 dim=12", {"mhc_pre", "'seq'", "got -2"});
  expect_error_mentions("mhc_pre_backward batch=1 seq=3 n=4 dim=12 hc_eps=-0.5",
                        {"'hc_eps'", ">= 0", "-0.5"});
  expect_error_mentions("mhc_pre batch=1 seq=3 n=4 dim=12 norm_eps=-1", {"'norm_eps'", "-1"});
  expect_error_mentions("mhc_pre_backward batch=1 seq=3 n=4 dim=12 dtype=i32", {"'dtype'", "i32"});
  expect_error_mentions("mhc_pre batch=1 seq=1 n=4 dim=12 with_grad_x_post=true",
                        {"with_grad_x_post"});
  expect_error_mentions("mhc_pre_backward batch=1 seq=3 dim=12", {"'n'", "required"});
}

TEST(MhcProgram, BackwardTensorsFollowTheSchema) {
  ir::Program p = backward_spec({2, 3, 4, 12}, "bf16", true).build_program();
  std::vector<std::string> inputs;
  for (const ir::Tensor& t : p.inputs) inputs.push_back(t->name);
  EXPECT_EQ(inputs, (std::vector<std::string>{"x", "phi", "alpha", "grad_h_in", "grad_h_post",
                                              "grad_h_res", "inv_rms", "h_mix", "h_pre", "h_post",
                                              "gamma", "grad_x_post"}));
  std::vector<std::string> outputs;
  for (const ir::Tensor& t : p.outputs) outputs.push_back(t->name);
  EXPECT_EQ(outputs, (std::vector<std::string>{"dx", "dphi", "dalpha", "dbias", "dgamma"}));
  EXPECT_EQ(p.find_tensor("x")->shape, (std::vector<int64_t>{2, 3, 4, 12}));
  EXPECT_EQ(p.find_tensor("phi")->shape, (std::vector<int64_t>{24, 48}));
  EXPECT_EQ(p.find_tensor("h_mix")->shape, (std::vector<int64_t>{2, 3, 24}));
  EXPECT_EQ(p.find_tensor("grad_h_res")->shape, (std::vector<int64_t>{2, 3, 4, 4}));
  for (const char* name : {"x", "grad_h_in", "grad_x_post", "dx"}) {
    EXPECT_EQ(p.find_tensor(name)->dtype, DType::kBF16) << name;
  }
  for (const char* name : {"phi", "alpha", "gamma", "inv_rms", "h_mix", "h_pre", "h_post",
                           "grad_h_post", "grad_h_res", "dphi", "dalpha", "dbias", "dgamma"}) {
    EXPECT_EQ(p.find_tensor(name)->dtype, DType::kF32) << name;
  }
  for (const ir::Tensor& t : p.temporaries) EXPECT_EQ(t->dtype, DType::kF32) << t->name;

  ir::Program without = backward_spec({2, 3, 4, 12}, "bf16", false).build_program();
  EXPECT_FALSE(without.find_tensor("grad_x_post"));

  ir::Program f64 = backward_spec({1, 1, 2, 3}, "f64", false).build_program();
  for (const auto* list : {&f64.inputs, &f64.outputs, &f64.temporaries}) {
    for (const ir::Tensor& t : *list) EXPECT_EQ(t->dtype, DType::kF64) << t->name;
  }
}

TEST(MhcProgram, ForwardTensorsFollowTheSchema) {
  ir::Program p = forward_spec({2, 3, 6, 7}, "f16").build_program();
  std::vector<std::string> outputs;
  for (const ir::Tensor& t : p.outputs) outputs.push_back(t->name);
  EXPECT_EQ(outputs,
            (std::vector<std::string>{"h_in", "h_post", "h_res", "h_pre", "inv_rms", "h_mix"}));
  EXPECT_EQ(p.find_tensor("h_in")->dtype, DType::kF16);
  EXPECT_EQ(p.find_tensor("h_in")->shape, (std::vector<int64_t>{2, 3, 7}));
  EXPECT_EQ(p.find_tensor("bias")->shape, (std::vector<int64_t>{48}));
  EXPECT_EQ(p.find_tensor("h_res")->dtype, DType::kF32);
}

TEST(MhcProgram, TokenSumsAreReductionsNotScatters) {
  ir::Program p = backward_spec({2, 3, 4, 12}, "bf16", true).build_program();
  EXPECT_GE(p.kernels.size(), 4u);
  for (const ir::Kernel& k : p.kernels) {
    for (const ir::Stage& s : k.stages) {
      EXPECT_EQ(s.kind, ir::StageKind::kCompute) << k.name << " writes " << s.target->name;
    }
  }
}

// --- interpreter against the reference ---------------------------------------------------------

struct Case {
  Shape shape;
  const char* dtype;
  bool grad_x_post;
};

std::string case_name(const Case& c) {
  return shape_text(c.shape) + " dtype=" + c.dtype + (c.grad_x_post ? " +grad_x_post" : "");
}

TEST(MhcBackward, MatchesReference) {
  const Case cases[] = {
      {{1, 1, 4, 1}, "bf16", false},   {{2, 3, 4, 12}, "bf16", false},
      {{1, 2, 4, 128}, "bf16", true},  {{1, 3, 6, 7}, "bf16", true},
      {{3, 1, 4, 300}, "bf16", false}, {{1, 2, 2, 128}, "bf16", false},
      {{2, 1, 6, 128}, "f32", false},  {{1, 2, 2, 7}, "f32", true},
      {{1, 1, 1, 12}, "f32", false},   {{2, 2, 4, 7}, "f64", true},
      {{1, 2, 6, 12}, "f64", false},   {{1, 1, 6, 1}, "f16", false},
      {{2, 1, 4, 12}, "f16", true},
      // Enough tokens for the x_mix token sum (ops/mhc.cpp, uses_x_mix).
      {{2, 40, 2, 8}, "bf16", false},  {{3, 20, 2, 4}, "f32", true},
      {{1, 60, 2, 5}, "f64", true},
  };
  for (const Case& c : cases) {
    ops::Specialization spec = backward_spec(c.shape, c.dtype, c.grad_x_post);
    Interpretation r = run_against_reference(spec, 7);
    expect_outputs_match(r.program, r.got, r.want, case_name(c));
  }
}

TEST(MhcForward, MatchesReference) {
  const Case cases[] = {
      {{1, 1, 1, 7}, "bf16", false},   {{2, 3, 4, 12}, "bf16", false},
      {{1, 2, 4, 128}, "f32", false},  {{2, 1, 6, 7}, "f64", false},
      {{1, 3, 6, 128}, "bf16", false}, {{1, 1, 2, 1}, "f16", false},
  };
  for (const Case& c : cases) {
    ops::Specialization spec = forward_spec(c.shape, c.dtype, "norm_eps=0.01 hc_eps=0.1");
    Interpretation r = run_against_reference(spec, 3);
    expect_outputs_match(r.program, r.got, r.want, case_name(c));
  }
}

/// B x S = 0, as PyTorch allows: every per-token tensor is empty, and the backward's token
/// sums (dphi, dalpha, dbias, dgamma) are zero, as the reference's empty sums are.
TEST(MhcBackward, EmptyBatchesGiveZeroTokenSums) {
  const Case cases[] = {
      {{0, 5, 4, 12}, "bf16", false}, {{3, 0, 6, 7}, "f32", true},
      {{0, 0, 4, 12}, "f64", false},  {{0, 4096, 4, 8}, "bf16", false},
  };
  for (const Case& c : cases) {
    ops::Specialization spec = backward_spec(c.shape, c.dtype, c.grad_x_post);
    Interpretation r = run_against_reference(spec, 5);
    expect_outputs_match(r.program, r.got, r.want, case_name(c));
    EXPECT_TRUE(r.got.at("dx").empty()) << case_name(c);
    for (const char* name : {"dphi", "dalpha", "dbias", "dgamma"}) {
      ASSERT_FALSE(r.got.at(name).empty()) << case_name(c) << ": " << name;
      for (double v : r.got.at(name)) ASSERT_EQ(v, 0.0) << case_name(c) << ": " << name;
    }
  }
  for (const Case& c : {Case{{0, 3, 4, 12}, "bf16", false}, Case{{2, 0, 6, 7}, "f32", false}}) {
    Interpretation r = run_against_reference(forward_spec(c.shape, c.dtype), 5);
    expect_outputs_match(r.program, r.got, r.want, case_name(c));
    for (const ir::Tensor& t : r.program.outputs) EXPECT_EQ(t->num_elements(), 0) << t->name;
  }
}

TEST(MhcBackward, SavedActivationsAreInTheirValidRanges) {
  ops::Specialization spec = backward_spec({2, 3, 6, 128}, "bf16", false, "hc_eps=0.01");
  ir::Program p = spec.build_program();
  HostBuffers in = reference::make_inputs(spec, p);
  for (double v : in.at("h_pre")) {
    EXPECT_GT(v, 0.01);
    EXPECT_LT(v, 1.01);
  }
  for (double v : in.at("h_post")) {
    EXPECT_GT(v, 0.0);
    EXPECT_LT(v, 2.0);
  }
  for (double v : in.at("inv_rms")) EXPECT_GT(v, 0.0);
  // Not saturated: the sigmoid gates must carry gradient for the tests to mean something.
  int64_t live = 0;
  for (double v : in.at("h_pre")) live += (v > 0.05 && v < 0.95);
  EXPECT_GT(live, static_cast<int64_t>(in.at("h_pre").size() / 2));
}

// --- finite differences in f64 ----------------------------------------------------------------

/// Runs the f64 forward, feeds its saved activations to the f64 backward with random upstream
/// gradients, and checks each backward output against central differences of
/// L = <g_h_in, h_in> + <g_h_post, h_post> + <g_h_res, h_res>.
void expect_backward_is_the_adjoint(const Shape& shape, uint64_t seed) {
  const std::string eps = "hc_eps=0.25";  // large, so that mishandling hc_eps shows
  ops::Specialization fwd_spec = forward_spec(shape, "f64", eps + " norm_eps=0.1");
  ops::Specialization bwd_spec = backward_spec(shape, "f64", false, eps);
  ir::Program forward = fwd_spec.build_program();
  ir::Program backward = bwd_spec.build_program();
  HostBuffers fin = reference::make_inputs(fwd_spec, forward, seed);
  HostBuffers fout = ir::interpret(forward, fin);

  std::mt19937_64 rng(seed + 100);
  const int64_t tokens = shape.batch * shape.seq;
  HostBuffers grads{{"h_in", random_values(tokens * shape.dim, rng)},
                    {"h_post", random_values(tokens * shape.n, rng)},
                    {"h_res", random_values(tokens * shape.n * shape.n, rng)}};
  HostBuffers bin{{"x", fin.at("x")},
                  {"phi", fin.at("phi")},
                  {"alpha", fin.at("alpha")},
                  {"gamma", fin.at("gamma")},
                  {"grad_h_in", grads.at("h_in")},
                  {"grad_h_post", grads.at("h_post")},
                  {"grad_h_res", grads.at("h_res")},
                  {"inv_rms", fout.at("inv_rms")},
                  {"h_mix", fout.at("h_mix")},
                  {"h_pre", fout.at("h_pre")},
                  {"h_post", fout.at("h_post")}};
  HostBuffers bout = ir::interpret(backward, bin);

  const std::pair<const char*, const char*> pairs[] = {
      {"x", "dx"}, {"phi", "dphi"}, {"alpha", "dalpha"}, {"bias", "dbias"}, {"gamma", "dgamma"}};
  for (const auto& [wrt, grad] : pairs) {
    testing::GradcheckResult r = testing::gradcheck(forward, fin, grads, wrt, bout.at(grad), 1e-6);
    // Central differences in f64 with eps 1e-6 are good to ~1e-9 here; a wrong term is O(1).
    EXPECT_LE(r.max_abs_error, 1e-7 + 1e-6 * r.max_abs_grad)
        << shape_text(shape) << " d" << wrt << " worst at " << r.worst_index;
    EXPECT_GT(r.max_abs_grad, 1e-3) << shape_text(shape) << " d" << wrt << " is all but zero";
    EXPECT_EQ(r.checked, static_cast<int64_t>(fin.at(wrt).size()));
  }
}

TEST(MhcGradcheck, BackwardIsTheAdjointOfTheForward) {
  expect_backward_is_the_adjoint({1, 2, 2, 3}, 11);
  expect_backward_is_the_adjoint({2, 1, 4, 5}, 12);
  expect_backward_is_the_adjoint({1, 1, 1, 7}, 13);
  expect_backward_is_the_adjoint({1, 2, 6, 2}, 14);
  expect_backward_is_the_adjoint({1, 12, 1, 3}, 15);  // 12 tokens: through x_mix
  ASSERT_TRUE(backward_spec({1, 12, 1, 3}, "f64", false).build_program().find_tensor("x_mix"));
}

TEST(MhcGradcheck, GradXPostIsAddedIntoDx) {
  Shape shape{2, 1, 4, 7};
  ops::Specialization with = backward_spec(shape, "f64", true);
  ops::Specialization without = backward_spec(shape, "f64", false);
  ir::Program p_with = with.build_program();
  HostBuffers in = reference::make_inputs(with, p_with, 5);
  HostBuffers dx_with = ir::interpret(p_with, in);
  HostBuffers dx_without = ir::interpret(without.build_program(), in);
  const std::vector<double>& g = in.at("grad_x_post");
  for (size_t e = 0; e < g.size(); ++e) {
    EXPECT_NEAR(dx_with.at("dx")[e] - dx_without.at("dx")[e], g[e], 1e-12) << e;
  }
  for (const char* name : {"dphi", "dalpha", "dbias", "dgamma"}) {
    EXPECT_EQ(dx_with.at(name), dx_without.at(name)) << name;
  }
}

// --- the bugs of seed report 002 ------------------------------------------------------------

// Bug 1: a block of min(D, ...) = 32 columns loaded only the first quarter of each row. Only the
// last column of grad_h_in is non-zero here, so a truncated row gives dbias_pre = dalpha_pre = 0.
TEST(MhcSeedBugs, RowsLongerThanAnyBlockAreReadToTheEnd) {
  for (int64_t dim : {128, 300}) {
    ops::Specialization spec = backward_spec({1, 2, 4, dim}, "bf16", false);
    Interpretation r = run_against_reference(spec, 21);
    std::vector<double>& g = r.inputs.at("grad_h_in");
    for (size_t e = 0; e < g.size(); ++e)
      g[e] = (e % dim == static_cast<size_t>(dim - 1)) ? 1.0 : 0.0;
    r = rerun(spec, std::move(r));
    for (int64_t i = 0; i < 4; ++i) EXPECT_NE(r.got.at("dbias")[i], 0.0) << "dim " << dim;
    EXPECT_NE(r.got.at("dalpha")[0], 0.0);
    expect_outputs_match(r.program, r.got, r.want, "last column only, dim " + std::to_string(dim));
  }
}

// Bug 4: a grid of cdiv(n, BLOCK) = 1 instead of n left dx of streams 1..n-1 at zero.
TEST(MhcSeedBugs, EveryStreamGetsItsDx) {
  for (int64_t n : {4, 6}) {
    Shape shape{2, 1, n, 128};
    ops::Specialization spec = backward_spec(shape, "bf16", false);
    Interpretation r = run_against_reference(spec, 31);
    const std::vector<double>& dx = r.got.at("dx");
    const std::vector<double>& want = r.want.at("dx");
    for (int64_t i = 0; i < n; ++i) {
      int64_t nonzero = 0;
      double worst = 0;
      for (int64_t t = 0; t < 2; ++t) {
        for (int64_t d = 0; d < 128; ++d) {
          int64_t e = (t * n + i) * 128 + d;
          nonzero += dx[e] != 0.0;
          worst = std::max(worst, std::fabs(dx[e] - want[e]) / (8e-3 * (1 + std::fabs(want[e]))));
        }
      }
      EXPECT_GE(nonzero, 250) << "stream " << i << " of n=" << n;
      EXPECT_LE(worst, 1.0) << "stream " << i << " of n=" << n;
    }
  }
}

// Bug 2: nested loops added dbias_res n*n times per token. dbias is checked against sums the
// test does itself: dbias_res = sum over tokens of grad_h_res, dbias_post of dh_post2.
TEST(MhcSeedBugs, DbiasIsOneSumOverTokens) {
  for (int64_t n : {4, 6}) {
    Shape shape{2, 3, n, 12};
    Interpretation r = run_against_reference(backward_spec(shape, "f32", false), 41);
    const std::vector<double>& dbias = r.got.at("dbias");
    const std::vector<double>& g_res = r.inputs.at("grad_h_res");
    const std::vector<double>& g_post = r.inputs.at("grad_h_post");
    const std::vector<double>& h_post = r.inputs.at("h_post");
    for (int64_t q = 0; q < n * n; ++q) {
      double want = 0;
      for (int64_t t = 0; t < 6; ++t) want += g_res[t * n * n + q];
      EXPECT_NEAR(dbias[2 * n + q], want, 1e-5) << "dbias_res[" << q << "], n=" << n;
    }
    for (int64_t i = 0; i < n; ++i) {
      double want = 0;
      for (int64_t t = 0; t < 6; ++t) {
        double hp = h_post[t * n + i];
        want += g_post[t * n + i] * hp * (1 - hp / 2);
      }
      EXPECT_NEAR(dbias[n + i], want, 1e-5) << "dbias_post[" << i << "], n=" << n;
    }
  }
}

// Bug 3: part 3 (res) of dgamma missed its inv_rms factor. dgamma and dphi are linear in
// inv_rms through dh_mix = dh_mix_tmp * inv_rms; doubling the saved inv_rms must double them
// exactly, whichever of the three parts carries the upstream gradient.
TEST(MhcSeedBugs, EveryPartOfDgammaAndDphiCarriesInvRms) {
  const char* parts[] = {"grad_h_in", "grad_h_post", "grad_h_res"};
  for (const char* live : parts) {
    ops::Specialization spec = backward_spec({2, 2, 4, 12}, "f32", false);
    Interpretation r = run_against_reference(spec, 51);
    for (const char* other : parts) {
      if (std::string(other) != live) {
        for (double& v : r.inputs.at(other)) v = 0.0;
      }
    }
    r = rerun(spec, std::move(r));
    expect_outputs_match(r.program, r.got, r.want, std::string("only ") + live);
    HostBuffers doubled_inputs = r.inputs;
    for (double& v : doubled_inputs.at("inv_rms")) v *= 2;
    HostBuffers doubled = ir::interpret(r.program, doubled_inputs);
    for (const char* name : {"dgamma", "dphi"}) {
      const std::vector<double>& base = r.got.at(name);
      double largest = 0;
      for (size_t e = 0; e < base.size(); ++e) {
        largest = std::max(largest, std::fabs(base[e]));
        EXPECT_EQ(doubled.at(name)[e], 2 * base[e]) << name << "[" << e << "] with only " << live;
      }
      EXPECT_GT(largest, 1e-3) << name << " with only " << live;
    }
  }
}

}  // namespace
}  // namespace adjoint
