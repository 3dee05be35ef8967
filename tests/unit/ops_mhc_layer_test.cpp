// Tests of the rest of the mHC layer without a GPU: mhc_post / mhc_post_backward and
// mhc_sinkhorn / mhc_sinkhorn_backward. Schemas and their errors; the programs' shape (kernel
// counts, no scatters); the interpreter against the plain-loop references of
// reference/mhc_layer.cpp over awkward sizes (n in {1, 2, 4, 6, 8}, small odd D, B*S = 1) and
// every dtype; finite differences of the f64 forward programs against the f64 backward ones;
// and what Sinkhorn is for (rows and columns summing to one).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/verifier.h"
#include "ops/mhc_post.h"
#include "ops/mhc_sinkhorn.h"
#include "ops/registry.h"
#include "reference/reference.h"
#include "support/gradcheck.h"

namespace adjoint {
namespace {

using ir::DType;
using ir::HostBuffers;

void expect_error_mentions(const std::string& spec, const std::vector<std::string>& parts) {
  try {
    ops::parse_specialization(spec).build_program();
    ADD_FAILURE() << spec << ": no error";
  } catch (const Error& e) {
    for (const std::string& part : parts) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
          << "'" << e.what() << "' does not mention '" << part << "'";
    }
  }
}

/// Interprets the spec's program on make_inputs() and expects every output to match the
/// reference within `tolerance(dtype)` relative to (1 + |want|).
template <typename Tolerance>
void expect_matches_reference(const std::string& text, Tolerance tolerance, uint64_t seed = 1) {
  ops::Specialization spec = ops::parse_specialization(text);
  ir::Program program = spec.build_program();
  ir::verify(program);
  HostBuffers in = reference::make_inputs(spec, program, seed);
  HostBuffers got = ir::interpret(program, in);
  HostBuffers want = reference::find(spec.op_name())(spec, in);
  ASSERT_EQ(want.size(), program.outputs.size()) << text;
  for (const ir::Tensor& t : program.outputs) {
    ASSERT_TRUE(want.count(t->name)) << text << ": no reference for " << t->name;
    ASSERT_EQ(got.at(t->name).size(), want.at(t->name).size()) << text << ": " << t->name;
    double tol = tolerance(t->dtype);
    int64_t where = -1;
    double ratio = testing::tolerance_ratio(got.at(t->name), want.at(t->name), tol, tol, &where);
    EXPECT_LE(ratio, 1.0) << text << ": " << t->name << "[" << where
                          << "] = " << (where >= 0 ? got.at(t->name)[where] : NAN) << ", reference "
                          << (where >= 0 ? want.at(t->name)[where] : NAN);
  }
}

double post_tolerance(DType t) {
  switch (t) {
    case DType::kBF16:
      return 8e-3;
    case DType::kF16:
      return 1e-3;
    case DType::kF32:
      return 4e-6;
    default:
      return 1e-12;
  }
}

/// The Sinkhorn iteration computes in f32 on the device type: round-off grows with t_max.
double sinkhorn_tolerance(DType t) {
  return t == DType::kF32 ? 2e-5 : 1e-11;
}

std::vector<double> random_values(size_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> v(count);
  for (double& x : v) x = uniform(rng);
  return v;
}

struct PostShape {
  int64_t batch, seq, n, dim;
};

std::string post_shape(const PostShape& s) {
  return "batch=" + std::to_string(s.batch) + " seq=" + std::to_string(s.seq) +
         " n=" + std::to_string(s.n) + " dim=" + std::to_string(s.dim);
}

const PostShape kPostShapes[] = {{1, 1, 1, 1}, {1, 1, 2, 3}, {2, 3, 4, 5},
                                 {1, 2, 6, 7}, {1, 1, 8, 3}, {2, 1, 4, 16}};

// --- registry ---------------------------------------------------------------------------------

TEST(MhcLayerRegistry, OpsAreRegisteredWithTheirAttributes) {
  for (const char* name :
       {"mhc_post", "mhc_post_backward", "mhc_sinkhorn", "mhc_sinkhorn_backward"}) {
    const ops::OpDefinition& op = ops::find_op(name);
    EXPECT_FALSE(op.examples.empty()) << name;
    for (const std::string& example : op.examples) {
      ir::Program p = ops::parse_specialization(example).build_program();
      ir::verify(p);
    }
  }
  ops::Specialization s = ops::parse_specialization("mhc_sinkhorn batch=1 seq=1 n=4");
  EXPECT_EQ(s.get_int("t_max"), 20);
  EXPECT_DOUBLE_EQ(s.get_float("eps"), 1e-6);
  EXPECT_EQ(s.get_dtype("dtype"), DType::kF32);
  EXPECT_EQ(ops::parse_specialization("mhc_post batch=1 seq=1 n=4 dim=8").get_dtype("dtype"),
            DType::kBF16);
}

TEST(MhcLayerRegistry, BadAttributesNameTheArgumentExpectedAndGiven) {
  expect_error_mentions("mhc_post batch=1 seq=2 n=0 dim=4", {"mhc_post", "'n'", ">= 1", "got 0"});
  expect_error_mentions("mhc_post_backward batch=1 seq=2 n=4 dim=-3", {"'dim'", "got -3"});
  expect_error_mentions("mhc_post batch=1 seq=2 n=4 dim=4 dtype=i32", {"'dtype'", "i32"});
  expect_error_mentions("mhc_sinkhorn batch=1 seq=2 n=4 t_max=0",
                        {"mhc_sinkhorn", "'t_max'", "got 0"});
  expect_error_mentions("mhc_sinkhorn_backward batch=1 seq=2 n=4 t_max=101",
                        {"'t_max'", "at most 100", "got 101"});
  expect_error_mentions("mhc_sinkhorn batch=1 seq=2 n=4 eps=-1", {"'eps'", ">= 0", "-1"});
  expect_error_mentions("mhc_sinkhorn batch=1 seq=2 n=4 dtype=bf16", {"'dtype'", "bf16"});
  expect_error_mentions("mhc_sinkhorn batch=1 n=4", {"'seq'", "required"});
  expect_error_mentions("mhc_post_backward batch=-3 seq=2 n=4 dim=4", {"'batch'", ">= 0", "got -3"});
  expect_error_mentions("mhc_sinkhorn batch=1 seq=-1 n=4", {"mhc_sinkhorn", "'seq'", "got -1"});
}

// --- programs ---------------------------------------------------------------------------------

bool has_scatter(const ir::Program& p) {
  for (const ir::Kernel& k : p.kernels) {
    for (const ir::Stage& s : k.stages) {
      if (s.kind != ir::StageKind::kCompute) return true;
    }
  }
  return false;
}

TEST(MhcLayerProgram, PostTensorsAndKernels) {
  ir::Program f = ops::parse_specialization("mhc_post batch=2 seq=3 n=4 dim=5").build_program();
  ASSERT_EQ(f.outputs.size(), 1u);
  EXPECT_EQ(f.outputs[0]->name, "out");
  EXPECT_EQ(f.outputs[0]->dtype, DType::kBF16);
  EXPECT_EQ(f.find_tensor("h_res")->dtype, DType::kF32);
  EXPECT_EQ(f.kernels.size(), 1u);
  ir::Program b = ops::parse_specialization("mhc_post_backward batch=2 seq=3 n=4 dim=5 dtype=f64")
                      .build_program();
  EXPECT_EQ(b.kernels.size(), 4u);
  for (const char* name : {"dx", "dy", "dh_res", "dh_post"}) {
    ASSERT_TRUE(b.find_tensor(name)) << name;
    EXPECT_EQ(b.find_tensor(name)->dtype, DType::kF64) << name;
  }
  EXPECT_TRUE(b.temporaries.empty());
  EXPECT_FALSE(has_scatter(f));
  EXPECT_FALSE(has_scatter(b));
}

TEST(MhcLayerProgram, SinkhornLaunchesPerIteration) {
  EXPECT_EQ(ops::sinkhorn_iterations_per_launch(1), 4);
  EXPECT_EQ(ops::sinkhorn_iterations_per_launch(2), 4);
  EXPECT_EQ(ops::sinkhorn_iterations_per_launch(4), 2);
  EXPECT_EQ(ops::sinkhorn_iterations_per_launch(5), 1);
  EXPECT_EQ(ops::sinkhorn_iterations_per_launch(8), 1);
  for (int64_t n : {2, 4, 6}) {
    for (int64_t t_max : {1, 2, 5, 20}) {
      std::string shape =
          "batch=1 seq=3 n=" + std::to_string(n) + " t_max=" + std::to_string(t_max);
      ir::Program f = ops::parse_specialization("mhc_sinkhorn " + shape).build_program();
      ir::Program b = ops::parse_specialization("mhc_sinkhorn_backward " + shape).build_program();
      const int64_t k = ops::sinkhorn_iterations_per_launch(n);
      const int64_t iteration_launches = (t_max - 1 + k - 1) / k;
      // base, the initial scales, the iterations, out; the backward also keeps the column
      // sums of K (a kernel) for the adjoint of the first normalization.
      EXPECT_EQ(static_cast<int64_t>(f.kernels.size()), 2 + iteration_launches + 1) << shape;
      EXPECT_EQ(static_cast<int64_t>(b.kernels.size()), 3 + iteration_launches + t_max) << shape;
      // Every iteration's scales are written once, whatever the grouping, the initial ones
      // (scales_1) too.
      for (int64_t t = 1; t <= t_max; ++t) {
        EXPECT_TRUE(b.find_tensor("scales_" + std::to_string(t))) << shape << " t=" << t;
      }
      EXPECT_FALSE(has_scatter(f));
      EXPECT_FALSE(has_scatter(b));
      // The backward takes h_res and grad_out only: it recomputes the iterates.
      ASSERT_EQ(b.inputs.size(), 2u);
      EXPECT_EQ(b.inputs[0]->name, "h_res");
      EXPECT_EQ(b.inputs[1]->name, "grad_out");
    }
  }
}

// --- against the references --------------------------------------------------------------------

TEST(MhcPost, ForwardAndBackwardMatchReference) {
  for (const PostShape& s : kPostShapes) {
    for (const char* dtype : {"bf16", "f16", "f32", "f64"}) {
      for (const char* op : {"mhc_post", "mhc_post_backward"}) {
        expect_matches_reference(std::string(op) + " " + post_shape(s) + " dtype=" + dtype,
                                 post_tolerance);
      }
    }
  }
}

TEST(MhcSinkhorn, ForwardAndBackwardMatchReference) {
  for (int64_t n : {1, 2, 4, 6, 8}) {
    for (const char* dtype : {"f32", "f64"}) {
      for (const char* extra : {"t_max=1", "t_max=2", "t_max=3 eps=0.05", "t_max=20"}) {
        // B*S = 1 and a few tokens with different logits.
        for (const char* tokens : {"batch=1 seq=1", "batch=2 seq=3"}) {
          if (n == 8 && std::string(tokens) != "batch=1 seq=1") continue;  // keep it fast
          std::string shape =
              std::string(tokens) + " n=" + std::to_string(n) + " " + extra + " dtype=" + dtype;
          expect_matches_reference("mhc_sinkhorn " + shape, sinkhorn_tolerance, n);
          expect_matches_reference("mhc_sinkhorn_backward " + shape, sinkhorn_tolerance, n + 7);
        }
      }
    }
  }
}

/// B x S = 0, as PyTorch allows: every tensor of mhc_post and mhc_sinkhorn is per token, so
/// every output is empty.
TEST(MhcLayer, EmptyBatchesGiveEmptyOutputs) {
  for (const char* text : {"mhc_post batch=0 seq=3 n=4 dim=5 dtype=bf16",
                           "mhc_post_backward batch=2 seq=0 n=4 dim=5 dtype=f32",
                           "mhc_sinkhorn batch=0 seq=2 n=4 t_max=3",
                           "mhc_sinkhorn_backward batch=1 seq=0 n=6 t_max=20 dtype=f64"}) {
    expect_matches_reference(text, std::string(text).find("sinkhorn") != std::string::npos
                                       ? sinkhorn_tolerance
                                       : post_tolerance);
    ir::Program program = ops::parse_specialization(text).build_program();
    for (const ir::Tensor& t : program.outputs) EXPECT_EQ(t->num_elements(), 0) << text;
  }
}

TEST(MhcSinkhorn, TwentyIterationsGiveDoublyStochasticMatrices) {
  for (int64_t n : {2, 4, 6, 8}) {
    std::string text = "mhc_sinkhorn batch=1 seq=2 n=" + std::to_string(n) + " eps=0 dtype=f64";
    ops::Specialization spec = ops::parse_specialization(text);
    ir::Program p = spec.build_program();
    HostBuffers in = reference::make_inputs(spec, p, 3);
    std::vector<double> out = ir::interpret(p, in).at("out");
    for (int64_t t = 0; t < 2; ++t) {
      for (int64_t a = 0; a < n; ++a) {
        double row = 0, col = 0;
        for (int64_t b = 0; b < n; ++b) {
          row += out[t * n * n + a * n + b];
          col += out[t * n * n + b * n + a];
        }
        EXPECT_NEAR(col, 1.0, 1e-12) << text;  // the last step normalizes columns
        EXPECT_NEAR(row, 1.0, 1e-3) << text;
      }
    }
  }
}

// --- finite differences in f64 ------------------------------------------------------------------

/// Central differences of L = <g, forward(inputs)> against the backward program's gradients.
void expect_adjoint(const std::string& forward_text, const std::string& backward_text,
                    const std::vector<std::pair<std::string, std::string>>& pairs,
                    const std::string& output, uint64_t seed, bool constant_forward = false) {
  ops::Specialization fs = ops::parse_specialization(forward_text);
  ops::Specialization bs = ops::parse_specialization(backward_text);
  ir::Program forward = fs.build_program();
  ir::Program backward = bs.build_program();
  HostBuffers fin = reference::make_inputs(fs, forward, seed);
  std::mt19937_64 rng(seed + 100);
  HostBuffers grads{{output, random_values(forward.find_tensor(output)->storage_elements(), rng)}};
  HostBuffers bin = fin;
  bin["grad_out"] = grads.at(output);
  HostBuffers bout = ir::interpret(backward, bin);
  for (const auto& [wrt, grad] : pairs) {
    testing::GradcheckResult r = testing::gradcheck(forward, fin, grads, wrt, bout.at(grad), 1e-6);
    EXPECT_LE(r.max_abs_error, 1e-7 + 1e-6 * r.max_abs_grad)
        << backward_text << " d" << wrt << " worst at " << r.worst_index;
    if (constant_forward) {  // e.g. Sinkhorn of a 1 x 1 matrix is 1 whatever the logit
      EXPECT_LE(r.max_abs_grad, 1e-12) << backward_text << " d" << wrt;
    } else {
      EXPECT_GT(r.max_abs_grad, 1e-4) << backward_text << " d" << wrt << " is all but zero";
    }
    EXPECT_EQ(r.checked, static_cast<int64_t>(fin.at(wrt).size()));
  }
}

TEST(MhcPostGradcheck, BackwardIsTheAdjointOfTheForward) {
  for (const PostShape& s : kPostShapes) {
    std::string shape = post_shape(s) + " dtype=f64";
    expect_adjoint("mhc_post " + shape, "mhc_post_backward " + shape,
                   {{"x", "dx"}, {"y", "dy"}, {"h_res", "dh_res"}, {"h_post", "dh_post"}}, "out",
                   static_cast<uint64_t>(s.n * 10 + s.dim));
  }
}

TEST(MhcSinkhornGradcheck, BackwardIsTheAdjointOfTheForward) {
  for (int64_t n : {1, 2, 4, 6, 8}) {
    for (const char* extra : {"t_max=1", "t_max=2 eps=0.1", "t_max=4", "t_max=20"}) {
      if (n == 8 && std::string(extra) == "t_max=20") continue;  // the slowest; n=6 covers it
      std::string shape = "batch=1 seq=" + std::string(n <= 2 ? "3" : "1") +
                          " n=" + std::to_string(n) + " " + extra + " dtype=f64";
      expect_adjoint("mhc_sinkhorn " + shape, "mhc_sinkhorn_backward " + shape,
                     {{"h_res", "grad_h_res"}}, "out", static_cast<uint64_t>(n), n == 1);
    }
  }
}

}  // namespace
}  // namespace adjoint
