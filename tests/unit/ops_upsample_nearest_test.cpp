// Tests of the upsample_nearest op family (ops/upsample_nearest.h), run by the interpreter:
// - the seed matrix of the field reports (3 shapes x 3 scale pairs x scales passed or derived x
//   f16/f32/bf16 = 54 cases) for nearest and for nearest-exact, against the plain-loop reference;
// - 1d, 3d, channels-last, sizes of 1, prime sizes, identity, downsampling, scales that disagree
//   with the sizes, empty batches, f64;
// - hand-computed gradients, including the cases where PyTorch's f32 index math differs from
//   exact rational arithmetic (the IR must follow f32, as PyTorch's CUDA kernels do);
// - finite differences of the forward gather program against the backward program, in f64;
// - every attribute error.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/tensor.h"
#include "ir/verifier.h"
#include "ops/registry.h"
#include "ops/upsample_nearest.h"
#include "reference/reference.h"
#include "support/gradcheck.h"

namespace adjoint {
namespace {

/// One unit in the last place of `t` at 1.0: the interpreter and the reference both sum in f64
/// and round once, so they agree exactly but for a possible difference in summation order.
double one_ulp(ir::DType t) {
  switch (t) {
    case ir::DType::kF16: return 0x1p-10;
    case ir::DType::kBF16: return 0x1p-7;
    case ir::DType::kF32: return 0x1p-23;
    default: return 0x1p-52;
  }
}

/// Builds and verifies the op's IR, runs it by the interpreter and the reference on the same
/// inputs, and expects grad_input to agree within one ulp of the dtype.
void expect_matches_reference(const std::string& text) {
  SCOPED_TRACE(text);
  ops::Specialization spec = ops::parse_specialization(text);
  ir::Program program = spec.build_program();
  ir::verify(program);
  ir::HostBuffers inputs = reference::make_inputs(spec, program);
  ir::HostBuffers got = ir::interpret(program, inputs);
  reference::ReferenceFn reference = reference::find(spec.op_name());
  ASSERT_TRUE(reference) << "no reference registered for " << spec.op_name();
  ir::HostBuffers want = reference(spec, inputs);
  const std::vector<double>& got_grad = got.at("grad_input");
  const std::vector<double>& want_grad = want.at("grad_input");
  ASSERT_EQ(got_grad.size(), want_grad.size());
  double ulp = one_ulp(spec.get_dtype("dtype"));
  int64_t where = -1;
  double ratio = testing::tolerance_ratio(got_grad, want_grad, ulp * 1e-3, ulp, &where);
  EXPECT_LE(ratio, 1.0) << "worst element " << where << ": interpreter "
                        << (where >= 0 ? got_grad[where] : 0.0) << ", reference "
                        << (where >= 0 ? want_grad[where] : 0.0);
}

/// Runs the backward IR on explicit grad_output values and returns grad_input.
std::vector<double> backward(const std::string& text, const std::vector<double>& grad_output) {
  ops::Specialization spec = ops::parse_specialization(text);
  ir::Program program = spec.build_program();
  ir::verify(program);
  return ir::interpret(program, {{"grad_output", grad_output}}).at("grad_input");
}

/// The same through the reference.
std::vector<double> reference_backward(const std::string& text,
                                       const std::vector<double>& grad_output) {
  ops::Specialization spec = ops::parse_specialization(text);
  return reference::find(spec.op_name())(spec, {{"grad_output", grad_output}}).at("grad_input");
}

/// grad_output of `size` elements, zero but for a 1 at `hot`.
std::vector<double> one_hot(size_t size, size_t hot) {
  std::vector<double> v(size, 0.0);
  v[hot] = 1.0;
  return v;
}

// --- the seed matrix ------------------------------------------------------------------------

struct SeedCase {
  std::vector<int64_t> input_size;  // N, C, H, W
  double scale_h, scale_w;
  bool scales_passed;  // else derived from the sizes
  std::string dtype;
  bool exact;

  std::string op() const {
    return exact ? "_upsample_nearest_exact2d_backward" : "upsample_nearest2d_backward";
  }
  /// PyTorch's output size for a scale factor: floor(input * scale).
  std::vector<int64_t> output_size() const {
    return {static_cast<int64_t>(std::floor(input_size[2] * scale_h)),
            static_cast<int64_t>(std::floor(input_size[3] * scale_w))};
  }
  std::string spec() const {
    std::string text = op() + " dtype=" + dtype + " input_size=" + ops::format_ints(input_size) +
                       " output_size=" + ops::format_ints(output_size());
    if (scales_passed) {
      text += " scales_h=" + ops::format_float(scale_h) + " scales_w=" + ops::format_float(scale_w);
    }
    return text;
  }
};

std::vector<SeedCase> seed_matrix() {
  std::vector<SeedCase> cases;
  for (bool exact : {false, true}) {
    for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{
             {1, 1, 4, 4}, {2, 3, 32, 32}, {1, 4, 128, 128}}) {
      for (auto [h, w] : std::vector<std::pair<double, double>>{{2, 2}, {1.5, 0.75}, {0.5, 0.5}}) {
        for (bool passed : {true, false}) {
          for (const char* dtype : {"f16", "f32", "bf16"}) {
            cases.push_back(SeedCase{shape, h, w, passed, dtype, exact});
          }
        }
      }
    }
  }
  return cases;
}

std::string seed_case_name(const ::testing::TestParamInfo<SeedCase>& info) {
  const SeedCase& c = info.param;
  auto number = [](double v) {
    std::string s = ops::format_float(v);
    for (char& ch : s) ch = ch == '.' ? 'p' : ch;
    return s;
  };
  std::string shape;
  for (int64_t s : c.input_size) shape += (shape.empty() ? "" : "x") + std::to_string(s);
  return std::string(c.exact ? "exact_" : "nearest_") + shape + "_scale" + number(c.scale_h) +
         "x" + number(c.scale_w) + (c.scales_passed ? "_passed_" : "_derived_") + c.dtype;
}

class SeedMatrix : public ::testing::TestWithParam<SeedCase> {};

TEST_P(SeedMatrix, InterpreterMatchesReference) { expect_matches_reference(GetParam().spec()); }

INSTANTIATE_TEST_SUITE_P(UpsampleNearest, SeedMatrix, ::testing::ValuesIn(seed_matrix()),
                         seed_case_name);

TEST(UpsampleNearestSeedMatrix, Has54CasesPerRule) { EXPECT_EQ(seed_matrix().size(), 108u); }

// --- other shapes, layouts and dtypes against the reference ---------------------------------

TEST(UpsampleNearestShapes, OneDimensional) {
  for (const char* op : {"upsample_nearest1d_backward", "_upsample_nearest_exact1d_backward"}) {
    std::string o = op;
    expect_matches_reference(o + " dtype=f32 input_size=2,3,7 output_size=17");
    expect_matches_reference(o + " dtype=bf16 input_size=2,3,17 output_size=7");
    expect_matches_reference(o + " dtype=f16 input_size=1,4,10 output_size=25 scales=2.5");
    expect_matches_reference(o + " dtype=f64 input_size=3,2,9 output_size=9");
  }
}

TEST(UpsampleNearestShapes, ThreeDimensional) {
  for (const char* op : {"upsample_nearest3d_backward", "_upsample_nearest_exact3d_backward"}) {
    std::string o = op;
    expect_matches_reference(o + " dtype=f32 input_size=1,2,3,4,5 output_size=6,7,3");
    expect_matches_reference(o + " dtype=f16 input_size=2,3,4,4,4 output_size=8,8,8 "
                                 "scales_d=2 scales_h=2 scales_w=2");
    expect_matches_reference(o + " dtype=bf16 input_size=1,2,5,6,7 output_size=3,9,14 "
                                 "layout=channels_last");
    expect_matches_reference(o + " dtype=f64 input_size=1,3,7,2,5 output_size=2,5,5 "
                                 "scales_d=0.3 layout=channels_last");
  }
}

TEST(UpsampleNearestShapes, ChannelsLastTwoDimensional) {
  for (const char* op : {"upsample_nearest2d_backward", "_upsample_nearest_exact2d_backward"}) {
    std::string o = op;
    expect_matches_reference(o + " dtype=f32 input_size=2,3,5,7 output_size=8,3 "
                                 "layout=channels_last");
    expect_matches_reference(o + " dtype=bf16 input_size=2,5,16,16 output_size=32,32 "
                                 "scales_h=2 scales_w=2 layout=channels_last");
    expect_matches_reference(o + " dtype=f16 input_size=1,1,7,13 output_size=17,5 "
                                 "layout=channels_last");
  }
}

TEST(UpsampleNearestShapes, ChannelsLastTensorsHaveChannelsLastStrides) {
  ops::Specialization spec = ops::parse_specialization(
      "upsample_nearest3d_backward input_size=2,3,4,5,6 output_size=7,8,9 layout=channels_last");
  ir::Program program = spec.build_program();
  const ir::Tensor& grad_output = program.inputs.at(0);
  const ir::Tensor& grad_input = program.outputs.at(0);
  EXPECT_EQ(grad_output->strides, ir::channels_last_strides({2, 3, 7, 8, 9}));
  EXPECT_EQ(grad_input->strides, ir::channels_last_strides({2, 3, 4, 5, 6}));
  EXPECT_EQ(grad_input->strides, (std::vector<int64_t>{360, 1, 90, 18, 3}));
}

TEST(UpsampleNearestShapes, AwkwardSizes) {
  for (const char* op : {"upsample_nearest2d_backward", "_upsample_nearest_exact2d_backward"}) {
    std::string o = op;
    expect_matches_reference(o + " dtype=f32 input_size=1,1,1,1 output_size=5,3");   // from 1
    expect_matches_reference(o + " dtype=f32 input_size=2,2,7,13 output_size=1,1");  // to 1
    expect_matches_reference(o + " dtype=bf16 input_size=2,3,7,13 output_size=17,5");  // primes
    expect_matches_reference(o + " dtype=f16 input_size=1,2,6,9 output_size=6,9");   // identity
    expect_matches_reference(o + " dtype=f32 input_size=1,3,9,8 output_size=4,3");   // smaller
    expect_matches_reference(o + " dtype=f32 input_size=1,2,4,4 output_size=5,7 "
                                 "scales_h=3 scales_w=0.5");  // scales disagree with sizes
    expect_matches_reference(o + " dtype=f64 input_size=2,3,11,5 output_size=23,2");
  }
}

TEST(UpsampleNearestShapes, EmptyBatchAndChannels) {
  for (const char* text :
       {"upsample_nearest2d_backward input_size=0,3,4,4 output_size=8,8",
        "_upsample_nearest_exact2d_backward input_size=2,0,4,4 output_size=3,5 "
        "layout=channels_last",
        "upsample_nearest3d_backward dtype=bf16 input_size=0,0,2,3,4 output_size=4,3,2",
        "upsample_nearest1d_backward input_size=0,2,5 output_size=10"}) {
    SCOPED_TRACE(text);
    ops::Specialization spec = ops::parse_specialization(text);
    ir::Program program = spec.build_program();
    ir::verify(program);
    EXPECT_EQ(program.outputs.at(0)->storage_elements(), 0);
    ir::HostBuffers inputs = reference::make_inputs(spec, program);
    EXPECT_TRUE(inputs.at("grad_output").empty());
    EXPECT_TRUE(ir::interpret(program, inputs).at("grad_input").empty());
    EXPECT_TRUE(reference::find(spec.op_name())(spec, inputs).at("grad_input").empty());
  }
}

TEST(UpsampleNearestShapes, EveryExampleMatchesTheReference) {
  for (const ops::OpDefinition& op : ops::upsample_nearest_ops()) {
    ASSERT_FALSE(op.examples.empty()) << op.name;
    for (const std::string& example : op.examples) expect_matches_reference(example);
  }
}

// --- hand-computed gradients ----------------------------------------------------------------

TEST(UpsampleNearestSemantics, ThreeToFiveByHand) {
  // r = 3/5 = 0.6f. nearest: floor(0, 0.6, 1.2, 1.8, 2.4) = 0,0,1,1,2;
  // nearest-exact: floor(0.3, 0.9, 1.5, 2.1, 2.7) = 0,0,1,2,2.
  std::vector<double> g = {1, 2, 4, 8, 16};
  std::string nearest = "upsample_nearest1d_backward dtype=f64 input_size=1,1,3 output_size=5";
  std::string exact = "_upsample_nearest_exact1d_backward dtype=f64 input_size=1,1,3 output_size=5";
  EXPECT_EQ(backward(nearest, g), (std::vector<double>{3, 12, 16}));
  EXPECT_EQ(backward(exact, g), (std::vector<double>{3, 4, 24}));
  EXPECT_EQ(reference_backward(nearest, g), (std::vector<double>{3, 12, 16}));
  EXPECT_EQ(reference_backward(exact, g), (std::vector<double>{3, 4, 24}));
}

TEST(UpsampleNearestSemantics, GivenScaleWinsOverSizes) {
  // scales=0.5 -> r = 2: src = min(floor(2o), 3) = 0,2,3,3,3. Derived r = 4/5 = 0.8f:
  // src = 0,0,1,2,3.
  std::vector<double> g = {1, 2, 4, 8, 16};
  std::string base = "upsample_nearest1d_backward dtype=f32 input_size=1,1,4 output_size=5";
  EXPECT_EQ(backward(base + " scales=0.5", g), (std::vector<double>{1, 0, 2, 28}));
  EXPECT_EQ(backward(base, g), (std::vector<double>{3, 4, 8, 16}));
}

TEST(UpsampleNearestSemantics, NonPositiveScaleIsDerivedFromSizes) {
  // PyTorch's compute_scales_value uses a scale only when it is > 0.
  std::string base = "_upsample_nearest_exact2d_backward dtype=bf16 input_size=2,3,7,13 "
                     "output_size=17,5";
  std::string derived = ir::to_string(ops::parse_specialization(base).build_program());
  for (const char* scales : {" scales_h=0 scales_w=-1", " scales_h=-2.5 scales_w=0"}) {
    EXPECT_EQ(ir::to_string(ops::parse_specialization(base + scales).build_program()), derived)
        << scales;
  }
  std::string passed =
      ir::to_string(ops::parse_specialization(base + " scales_h=2").build_program());
  EXPECT_NE(passed, derived);
}

TEST(UpsampleNearestSemantics, FollowsFloatIndexMathNotExactRationals) {
  // I=26, O=22: r = float(26/22) = 1.18181813f, and 11 * r = 12.9999995f, so PyTorch reads
  // source 12 for o = 11 where exact arithmetic (11 * 26 / 22 = 13) would give 13.
  std::string nearest = "upsample_nearest1d_backward dtype=f32 input_size=1,1,26 output_size=22";
  for (const auto& grad : {backward(nearest, one_hot(22, 11)),
                           reference_backward(nearest, one_hot(22, 11))}) {
    EXPECT_EQ(grad[12], 1.0);
    EXPECT_EQ(grad[13], 0.0);
  }
  // I=6, O=37, nearest-exact: (18 + 0.5) * float(6/37) = 2.99999987f -> 2 (exact: 3).
  std::string exact =
      "_upsample_nearest_exact1d_backward dtype=f32 input_size=1,1,6 output_size=37";
  for (const auto& grad :
       {backward(exact, one_hot(37, 18)), reference_backward(exact, one_hot(37, 18))}) {
    EXPECT_EQ(grad[2], 1.0);
    EXPECT_EQ(grad[3], 0.0);
  }
}

TEST(UpsampleNearestSemantics, SingleOutputReadsTheCentreWhenExact) {
  // 7x13 -> 1x1: nearest reads [0, 0]; nearest-exact reads [floor(3.5), floor(6.5)] = [3, 6].
  std::vector<double> g = {5.0};
  std::vector<double> nearest = backward(
      "upsample_nearest2d_backward dtype=f32 input_size=1,1,7,13 output_size=1,1", g);
  std::vector<double> exact = backward(
      "_upsample_nearest_exact2d_backward dtype=f32 input_size=1,1,7,13 output_size=1,1", g);
  EXPECT_EQ(nearest[0], 5.0);
  EXPECT_EQ(exact[3 * 13 + 6], 5.0);
  double nearest_total = 0, exact_total = 0;
  for (double v : nearest) nearest_total += v;
  for (double v : exact) exact_total += v;
  EXPECT_EQ(nearest_total, 5.0);
  EXPECT_EQ(exact_total, 5.0);
}

TEST(UpsampleNearestSemantics, IdentityCopiesGradOutput) {
  std::vector<double> g;
  for (int i = 0; i < 2 * 3 * 6 * 9; ++i) g.push_back(ir::round_to(ir::DType::kBF16, 0.37 * i - 5));
  for (const char* op : {"upsample_nearest2d_backward", "_upsample_nearest_exact2d_backward"}) {
    EXPECT_EQ(backward(std::string(op) + " dtype=bf16 input_size=2,3,6,9 output_size=6,9 "
                                         "layout=channels_last",
                       g),
              g)
        << op;
  }
}

TEST(UpsampleNearestSemantics, AccumulationTypeFollowsDType) {
  for (auto [dtype, accumulation] : std::vector<std::pair<std::string, ir::DType>>{
           {"f16", ir::DType::kF32},
           {"bf16", ir::DType::kF32},
           {"f32", ir::DType::kF32},
           {"f64", ir::DType::kF64}}) {
    ir::Program program = ops::parse_specialization(
        "upsample_nearest2d_backward input_size=1,1,2,2 output_size=4,4 dtype=" + dtype)
        .build_program();
    ASSERT_EQ(program.kernels.size(), 1u);
    ASSERT_EQ(program.kernels[0].stages.size(), 1u);
    const ir::Stage& stage = program.kernels[0].stages[0];
    EXPECT_EQ(stage.kind, ir::StageKind::kScatterAdd);
    EXPECT_EQ(stage.accumulation, accumulation) << dtype;
    EXPECT_EQ(stage.value.dtype(), accumulation) << dtype;
    EXPECT_EQ(program.outputs.at(0)->dtype, ir::parse_dtype(dtype)) << dtype;
  }
}

TEST(UpsampleNearestSemantics, RatioIsPyTorchsFloatScale) {
  // Given scale: the reciprocal in double, then rounded to float. Derived: f32 division.
  EXPECT_EQ(ops::nearest_source_ratio(3.0, 4, 12), static_cast<float>(1.0 / 3.0));
  EXPECT_EQ(ops::nearest_source_ratio(0.1, 4, 12), static_cast<float>(1.0 / 0.1));
  EXPECT_EQ(ops::nearest_source_ratio(std::nullopt, 26, 22), 26.0f / 22.0f);
  EXPECT_EQ(ops::nearest_source_ratio(0.0, 5, 8), 0.625f);
  EXPECT_EQ(ops::nearest_source_ratio(-1.0, 7, 3), 7.0f / 3.0f);
}

// --- finite differences of the forward ------------------------------------------------------

TEST(UpsampleNearestGradcheck, BackwardIsTheAdjointOfTheForwardGather) {
  // The forward is linear in its input, so central differences are exact up to rounding:
  // errors are ~1e-10, and anything above 1e-7 means a gradient is wrong, not noisy.
  for (const char* text :
       {"upsample_nearest2d_backward dtype=f64 input_size=1,2,5,7 output_size=8,3",
        "_upsample_nearest_exact2d_backward dtype=f64 input_size=2,3,7,13 output_size=17,5 "
        "layout=channels_last",
        "upsample_nearest1d_backward dtype=f64 input_size=2,2,7 output_size=3 scales=2.5",
        "_upsample_nearest_exact1d_backward dtype=f64 input_size=1,3,6 output_size=37",
        "_upsample_nearest_exact3d_backward dtype=f64 input_size=1,2,3,4,5 output_size=6,3,7",
        "upsample_nearest3d_backward dtype=f64 input_size=1,2,3,4,5 output_size=5,8,2 "
        "scales_d=1.5 scales_h=2 layout=channels_last"}) {
    SCOPED_TRACE(text);
    ops::Specialization spec = ops::parse_specialization(text);
    ir::Program forward = ops::build_upsample_nearest_forward(spec);
    ir::Program backward_program = spec.build_program();
    ir::verify(forward);
    ir::verify(backward_program);
    // Random values: the forward's input and the upstream gradient, laid out by their strides.
    ir::HostBuffers random = reference::make_inputs(spec, backward_program, 7);
    ir::HostBuffers x = {{"input", std::vector<double>(forward.inputs.at(0)->storage_elements())}};
    for (size_t i = 0; i < x["input"].size(); ++i) x["input"][i] = std::sin(1.0 + 0.7 * i);
    ir::HostBuffers upstream = {{"output", random.at("grad_output")}};
    std::vector<double> analytic =
        ir::interpret(backward_program, {{"grad_output", random.at("grad_output")}})
            .at("grad_input");
    testing::GradcheckResult r = testing::gradcheck(forward, x, upstream, "input", analytic);
    EXPECT_EQ(r.checked, static_cast<int64_t>(analytic.size()));
    EXPECT_GT(r.max_abs_grad, 0.1);
    EXPECT_LT(r.max_abs_error, 1e-7) << "worst element " << r.worst_index;
  }
}

TEST(UpsampleNearestGradcheck, ForwardGathersTheSourceElement) {
  ops::Specialization spec = ops::parse_specialization(
      "_upsample_nearest_exact1d_backward dtype=f64 input_size=1,1,3 output_size=5");
  ir::Program forward = ops::build_upsample_nearest_forward(spec);
  ir::verify(forward);
  EXPECT_EQ(forward.name, "_upsample_nearest_exact1d");
  std::vector<double> out = ir::interpret(forward, {{"input", {10, 20, 30}}}).at("output");
  EXPECT_EQ(out, (std::vector<double>{10, 10, 20, 30, 30}));
}

// --- attribute errors -----------------------------------------------------------------------

/// Expects building `text` to throw an adjoint::Error (invalid argument) whose message contains
/// every one of `fragments`.
void expect_error(const std::string& text, const std::vector<std::string>& fragments) {
  SCOPED_TRACE(text);
  try {
    ops::parse_specialization(text).build_program();
    ADD_FAILURE() << "no error for: " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    for (const std::string& fragment : fragments) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
          << "message: " << e.what() << "\nmissing: " << fragment;
    }
  }
}

TEST(UpsampleNearestErrors, InputSizeRank) {
  expect_error("upsample_nearest2d_backward input_size=1,2,5 output_size=8,3",
               {"upsample_nearest2d_backward", "'input_size'", "expected 4 sizes (N, C, H, W)",
                "given 3 sizes '1,2,5'"});
  expect_error("upsample_nearest1d_backward input_size=1,2,5,7 output_size=8",
               {"upsample_nearest1d_backward", "'input_size'", "expected 3 sizes (N, C, W)",
                "given 4 sizes '1,2,5,7'"});
  expect_error("_upsample_nearest_exact3d_backward input_size=1,2,5,7 output_size=8,3,3",
               {"_upsample_nearest_exact3d_backward", "'input_size'",
                "expected 5 sizes (N, C, D, H, W)", "given 4 sizes"});
  expect_error("upsample_nearest2d_backward input_size= output_size=8,3",
               {"'input_size'", "given 0 sizes ''"});
}

TEST(UpsampleNearestErrors, OutputSizeLength) {
  expect_error("upsample_nearest2d_backward input_size=1,2,5,7 output_size=8",
               {"upsample_nearest2d_backward", "'output_size'",
                "expected 2 spatial sizes (H, W) of grad_output", "given 1 size '8'"});
  expect_error("upsample_nearest3d_backward input_size=1,2,3,4,5 output_size=8,3",
               {"'output_size'", "expected 3 spatial sizes (D, H, W)", "given 2 sizes '8,3'"});
  expect_error("_upsample_nearest_exact1d_backward input_size=1,2,5 output_size=8,3",
               {"'output_size'", "expected 1 spatial size (W)", "given 2 sizes"});
}

TEST(UpsampleNearestErrors, NonPositiveSpatialSizes) {
  expect_error("upsample_nearest2d_backward input_size=1,2,0,7 output_size=8,3",
               {"'input_size'", "spatial sizes > 0", "given '1,2,0,7'"});
  expect_error("upsample_nearest2d_backward input_size=1,2,5,-7 output_size=8,3",
               {"'input_size'", "given '1,2,5,-7'"});
  expect_error("upsample_nearest2d_backward input_size=1,2,5,7 output_size=0,3",
               {"'output_size'", "expected spatial sizes (H, W) > 0", "given '0,3'"});
  expect_error("_upsample_nearest_exact3d_backward input_size=1,2,3,4,5 output_size=2,-3,4",
               {"'output_size'", "given '2,-3,4'"});
}

TEST(UpsampleNearestErrors, NegativeBatchOrChannels) {
  expect_error("upsample_nearest2d_backward input_size=-1,2,5,7 output_size=8,3",
               {"'input_size'", "N, C >= 0", "given '-1,2,5,7'"});
  expect_error("upsample_nearest1d_backward input_size=1,-2,5 output_size=8",
               {"'input_size'", "N, C >= 0", "given '1,-2,5'"});
}

TEST(UpsampleNearestErrors, ChannelsLastNeedsTwoOrThreeSpatialAxes) {
  expect_error("upsample_nearest1d_backward input_size=1,2,5 output_size=8 layout=channels_last",
               {"upsample_nearest1d_backward", "'layout'", "expected contiguous",
                "given 'channels_last'"});
  expect_error("_upsample_nearest_exact1d_backward input_size=1,2,5 output_size=8 "
               "layout=channels_last",
               {"'layout'", "given 'channels_last'"});
}

TEST(UpsampleNearestErrors, ScaleTooSmallForAnIndex) {
  expect_error("upsample_nearest2d_backward input_size=1,2,5,7 output_size=8,3 scales_w=1e-30",
               {"upsample_nearest2d_backward", "'scales_w'", "fits an i64 index", "given 1e-30"});
  expect_error("upsample_nearest3d_backward input_size=1,2,3,4,5 output_size=8,3,3 "
               "scales_d=1e-300",
               {"'scales_d'", "given 1e-300"});
}

TEST(UpsampleNearestErrors, SchemaErrorsFromTheRegistry) {
  expect_error("upsample_nearest2d_backward output_size=8,3", {"'input_size' is required"});
  expect_error("upsample_nearest2d_backward input_size=1,2,5,7", {"'output_size' is required"});
  expect_error("upsample_nearest2d_backward dtype=i32 input_size=1,2,5,7 output_size=8,3",
               {"'dtype'", "f16, bf16, f32, f64", "'i32'"});
  expect_error("upsample_nearest2d_backward input_size=1,2,5,7 output_size=8,3 layout=nhwc",
               {"'layout'", "contiguous, channels_last", "'nhwc'"});
  expect_error("upsample_nearest2d_backward input_size=1,2,5,7 output_size=8,3 scales=2",
               {"unknown attribute 'scales'", "scales_h, scales_w"});
  expect_error("upsample_nearest1d_backward input_size=1,2,5 output_size=8 scales=fast",
               {"'scales'", "a number or 'none'", "'fast'"});
}

TEST(UpsampleNearestErrors, EmptyBatchIsNotAnError) {
  EXPECT_NO_THROW(ops::parse_specialization(
                      "upsample_nearest2d_backward input_size=0,0,5,7 output_size=8,3")
                      .build_program());
}

// --- registration ---------------------------------------------------------------------------

TEST(UpsampleNearestRegistry, SixOpsWithTheSharedSchema) {
  std::vector<std::string> names;
  for (const ops::OpDefinition& op : ops::upsample_nearest_ops()) {
    names.push_back(op.name);
    EXPECT_NO_THROW(ops::find_op(op.name));
    std::vector<std::string> attributes;
    for (const ops::AttrSpec& a : op.attributes) attributes.push_back(a.name);
    std::vector<std::string> scales =
        op.name.find("1d") != std::string::npos   ? std::vector<std::string>{"scales"}
        : op.name.find("2d") != std::string::npos ? std::vector<std::string>{"scales_h", "scales_w"}
                                                  : std::vector<std::string>{"scales_d", "scales_h",
                                                                             "scales_w"};
    std::vector<std::string> expected = {"dtype", "input_size", "output_size"};
    expected.insert(expected.end(), scales.begin(), scales.end());
    expected.push_back("layout");
    expected.push_back("grad_output_strides");
    EXPECT_EQ(attributes, expected) << op.name;
    EXPECT_TRUE(reference::find(op.name)) << op.name;
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "upsample_nearest1d_backward", "upsample_nearest2d_backward",
                "upsample_nearest3d_backward", "_upsample_nearest_exact1d_backward",
                "_upsample_nearest_exact2d_backward", "_upsample_nearest_exact3d_backward"}));
  EXPECT_EQ(ops::find_op("upsample_nearest2d_backward").examples.front(),
            "upsample_nearest2d_backward dtype=f32 input_size=1,2,5,7 output_size=8,3");
}

TEST(UpsampleNearestRegistry, PrintsTheScatterReadably) {
  ir::Program program = ops::parse_specialization(
      "upsample_nearest2d_backward dtype=bf16 input_size=1,2,5,7 output_size=8,3").build_program();
  EXPECT_EQ(ir::to_string(program.kernels.at(0).stages.at(0)),
            "scatter_add grad_input[n, c, min(i64(floor(f32(oh) * 0.625f)), 4), "
            "min(i64(floor(f32(ow) * 2.3333333f)), 6)] += f32(grad_output[n, c, oh, ow]) "
            "accumulate f32\n      over (n < 1, c < 2, oh < 8, ow < 3)");
}

}  // namespace
}  // namespace adjoint
