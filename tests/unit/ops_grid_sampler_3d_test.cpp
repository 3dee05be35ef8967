// Tests of grid_sampler_3d_backward, all through the IR interpreter (no GPU):
//  - the registry entry, its attribute errors (bicubic refused, naming the attribute);
//  - the program's structure (output_mask, nearest's zero grid gradient);
//  - hand-computed cases that pin ATen semantics independently of the reference (identity
//    sampling, ties to even for nearest, the mean at the centre of a 2x2x2 cube);
//  - the IR against the plain-loop reference for every mode x padding x align_corners x dtype on
//    awkward shapes (a size-1 axis in each of D, H, W, primes, outputs larger and smaller than
//    the input; grid points on pixel centres and edges, at +-1 and well outside [-1, 1]);
//  - finite differences of the forward program in f64: d/d input for both modes, d/d grid for
//    trilinear with grid points kept away from the kinks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/grid_sampler_3d.h"
#include "reference/reference.h"
#include "support/gradcheck.h"
#include "support/zero_outputs.h"

namespace adjoint {
namespace {

const char* const kModes[] = {"bilinear", "nearest"};
const char* const kPaddings[] = {"zeros", "border", "reflection"};
const char* const kDTypes[] = {"f32", "f64", "f16", "bf16"};

struct Case {
  std::string dtype = "f32";
  std::string input_size = "1,2,3,5,4";
  std::string output_size = "2,3,2";
  std::string mode = "bilinear";
  std::string padding = "zeros";
  bool align_corners = false;
  std::string output_mask = "1,1";

  std::string text() const {
    return "grid_sampler_3d_backward dtype=" + dtype + " input_size=" + input_size +
           " output_size=" + output_size + " interpolation_mode=" + mode +
           " padding_mode=" + padding + " align_corners=" + (align_corners ? "true" : "false") +
           " output_mask=" + output_mask;
  }
  ops::Specialization spec() const { return ops::parse_specialization(text()); }
  ops::GridSampler3dParams params() const { return ops::grid_sampler_3d_params(spec()); }
};

/// Interpreter-vs-reference tolerance (atol = rtol), as for the 2-d op.
double reference_tolerance(const std::string& dtype) {
  if (dtype == "f64") return 1e-12;
  if (dtype == "f32") return 1e-5;
  if (dtype == "f16") return 1e-3;
  return 8e-3;  // bf16
}

std::string expect_error(const std::string& text) {
  try {
    ops::parse_specialization(text).build_program();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error for: " << text;
  return "";
}

// --- registry and errors ----------------------------------------------------------------------

TEST(GridSampler3dOp, IsRegisteredWithTheAtenAttributes) {
  const ops::OpDefinition& op = ops::find_op("grid_sampler_3d_backward");
  std::vector<std::string> names;
  for (const ops::AttrSpec& a : op.attributes) names.push_back(a.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"dtype", "input_size", "output_size", "interpolation_mode",
                                      "padding_mode", "align_corners", "output_mask",
                                      "grad_output_strides", "input_strides", "grid_strides"}));
  EXPECT_EQ(
      ops::parse_specialization("grid_sampler_3d_backward input_size=1,2,3,5,7 output_size=2,4,3")
          .to_string(),
      "grid_sampler_3d_backward dtype=f32 input_size=1,2,3,5,7 output_size=2,4,3 "
      "interpolation_mode=bilinear padding_mode=zeros align_corners=false "
      "output_mask=1,1");
  for (const std::string& example : op.examples) {
    EXPECT_NO_THROW(ir::verify(ops::parse_specialization(example).build_program())) << example;
  }
}

TEST(GridSampler3dOp, RejectsBadAttributesNamingThem) {
  const std::string base = "grid_sampler_3d_backward ";
  std::string bicubic =
      expect_error(base + "input_size=1,2,3,5,7 output_size=2,4,3 interpolation_mode=bicubic");
  EXPECT_NE(bicubic.find("'interpolation_mode'"), std::string::npos) << bicubic;
  EXPECT_NE(bicubic.find("bilinear, nearest"), std::string::npos) << bicubic;
  EXPECT_NE(bicubic.find("'bicubic'"), std::string::npos) << bicubic;
  std::string rank = expect_error(base + "input_size=1,2,5,7 output_size=2,4,3");
  EXPECT_NE(rank.find("'input_size'"), std::string::npos) << rank;
  EXPECT_NE(rank.find("N,C,D,H,W"), std::string::npos) << rank;
  std::string out = expect_error(base + "input_size=1,2,3,5,7 output_size=4,3");
  EXPECT_NE(out.find("D_out,H_out,W_out"), std::string::npos) << out;
  // ATen's rule: the input's spatial sizes may not be empty (the batch, channels and grid may).
  for (const char* sizes : {"input_size=1,2,0,5,7 output_size=2,4,3",
                            "input_size=1,2,3,5,0 output_size=2,4,3",
                            "input_size=1,-2,3,5,7 output_size=2,4,3"}) {
    const std::string what = expect_error(base + sizes);
    EXPECT_NE(what.find("at least"), std::string::npos) << what;
  }
  for (const char* mask : {"1", "1,1,1", "2,1"}) {
    std::string what =
        expect_error(base + "input_size=1,2,3,5,7 output_size=2,4,3 output_mask=" + mask);
    EXPECT_NE(what.find("'output_mask'"), std::string::npos) << what;
  }
  // The builder refuses bicubic parameters too (they cannot come from the registry).
  ops::GridSampler3dParams p = Case{}.params();
  p.interpolation = ops::GridSamplerInterpolation::kBicubic;
  try {
    ops::build_grid_sampler_3d_backward(p);
    ADD_FAILURE() << "bicubic 3-d program built";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2-D only"), std::string::npos) << e.what();
  }
}

// --- program structure ------------------------------------------------------------------------

TEST(GridSampler3dProgram, OutputMaskZeroOmitsGradInput) {
  Case c;
  c.output_mask = "0,1";
  ir::Program p = c.spec().build_program();
  ASSERT_EQ(p.outputs.size(), 1u);
  EXPECT_EQ(ir::tensor_signature(*p.outputs[0]), "grad_grid: f32[1, 2, 3, 2, 3]");
  c.output_mask = "1,1";
  ir::Program both = c.spec().build_program();
  ASSERT_EQ(both.outputs.size(), 2u);
  EXPECT_EQ(ir::tensor_signature(*both.outputs[0]), "grad_input: f32[1, 2, 3, 5, 4]");
}

TEST(GridSampler3dProgram, NearestWithoutGradInputOnlyZeroesGradGrid) {
  Case c;
  c.mode = "nearest";
  c.output_mask = "0,1";
  ir::Program p = c.spec().build_program();
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(ir::to_string(p.kernels[0].stages[0]),
            "compute grad_grid[n, d_out, h_out, w_out, axis] = 0.0f\n"
            "      over (n < 1, d_out < 2, h_out < 3, w_out < 2, axis < 3)");
}

TEST(GridSampler3dProgram, GradInputIsTheScatterAdjointOfTheGather) {
  ir::Program p = Case{}.spec().build_program();
  bool found = false;
  for (const ir::Kernel& k : p.kernels) {
    if (k.name != "grad_input") continue;
    ASSERT_EQ(k.stages.size(), 1u);
    EXPECT_NE(ir::to_string(k.stages[0]).find("scatter_add grad_input["), std::string::npos);
    EXPECT_NE(ir::to_string(k.stages[0]).find("tap < 8"), std::string::npos);
    found = true;
  }
  EXPECT_TRUE(found);
}

// --- hand-computed semantics ------------------------------------------------------------------

TEST(GridSampler3dSemantics, IdentityGridPassesTheGradientThrough) {
  for (const char* mode : kModes) {
    for (const char* padding : kPaddings) {
      for (bool align : {false, true}) {
        Case c{"f64", "1,2,2,3,4", "2,3,4", mode, padding, align};
        auto centre = [&](int i, int size) {
          return align ? 2.0 * i / (size - 1) - 1.0 : (2.0 * i + 1.0) / size - 1.0;
        };
        ir::HostBuffers in;
        in["input"].assign(48, 0.5);
        for (int i = 0; i < 48; ++i) in["grad_output"].push_back(1.0 + i);
        for (int d = 0; d < 2; ++d) {
          for (int h = 0; h < 3; ++h) {
            for (int w = 0; w < 4; ++w) {
              in["grid"].insert(in["grid"].end(), {centre(w, 4), centre(h, 3), centre(d, 2)});
            }
          }
        }
        ir::HostBuffers out = ir::interpret(c.spec().build_program(), in);
        EXPECT_LE(testing::tolerance_ratio(out["grad_input"], in["grad_output"], 1e-12, 1e-12), 1.0)
            << c.text();
      }
    }
  }
}

TEST(GridSampler3dSemantics, NearestRoundsHalfToEven) {
  // D = H = 1, W = 4 without align_corners: x = -0.5, 0, 0.5 land on 0.5, 1.5, 2.5.
  Case c{"f32", "1,1,1,1,4", "1,1,3", "nearest"};
  ir::HostBuffers in{{"grad_output", {1, 10, 100}},
                     {"input", {0, 0, 0, 0}},
                     {"grid", {-0.5, 0, 0, 0, 0, 0, 0.5, 0, 0}}};
  ir::HostBuffers out = ir::interpret(c.spec().build_program(), in);
  EXPECT_EQ(out["grad_input"], (std::vector<double>{1, 0, 110, 0}));
  EXPECT_EQ(out["grad_grid"], (std::vector<double>(9, 0.0)));
}

TEST(GridSampler3dSemantics, TrilinearAtTheCentreOfACubeIsTheMean) {
  Case c{"f64", "1,1,2,2,2", "1,1,1", "bilinear", "border"};
  ir::Program forward = ops::build_grid_sampler_3d_forward(c.params());
  ir::HostBuffers out =
      ir::interpret(forward, {{"input", {1, 2, 3, 4, 5, 6, 7, 8}}, {"grid", {0, 0, 0}}});
  EXPECT_DOUBLE_EQ(out["output"][0], 4.5);
  // d output / d z at the centre: (mean of the back face - mean of the front face) * D / 2.
  ir::HostBuffers back = ir::interpret(
      c.spec().build_program(),
      {{"grad_output", {1}}, {"input", {1, 2, 3, 4, 5, 6, 7, 8}}, {"grid", {0, 0, 0}}});
  EXPECT_EQ(back["grad_grid"], (std::vector<double>{1.0, 2.0, 4.0}));
  EXPECT_EQ(back["grad_input"], std::vector<double>(8, 0.125));
}

// --- IR against the reference -----------------------------------------------------------------

size_t expect_matches_reference(const Case& c, uint64_t seed) {
  ops::Specialization spec = c.spec();
  ir::Program program = spec.build_program();
  ir::HostBuffers inputs = reference::make_inputs(spec, program, seed);
  ir::HostBuffers got = ir::interpret(program, inputs);
  ir::HostBuffers want = reference::find("grid_sampler_3d_backward")(spec, inputs);
  std::set<std::string> got_names, want_names;
  for (const ir::Tensor& t : program.outputs) got_names.insert(t->name);
  for (const auto& [name, values] : want) want_names.insert(name);
  EXPECT_EQ(got_names, want_names) << c.text();
  double tol = reference_tolerance(c.dtype);
  for (const auto& [name, expected] : want) {
    if (!got.count(name)) continue;
    EXPECT_EQ(got.at(name).size(), expected.size()) << c.text() << ": " << name;
    int64_t where = -1;
    double ratio = testing::tolerance_ratio(got.at(name), expected, tol, tol, &where);
    EXPECT_LE(ratio, 1.0) << c.text() << "\n  " << name << "[" << where << "]: got "
                          << (where >= 0 ? got.at(name)[where] : NAN) << ", want "
                          << (where >= 0 ? expected[where] : NAN);
  }
  return want.size();
}

TEST(GridSampler3dReference, EveryModePaddingAlignmentAndDtype) {
  const std::pair<const char*, const char*> shapes[] = {
      {"1,2,3,5,4", "2,3,2"},  // primes, output smaller than input
      {"2,1,1,3,4", "2,2,3"},  // D = 1
      {"1,2,3,1,2", "3,2,2"},  // H = 1, D_out larger than D
      {"1,1,2,3,1", "2,2,3"},  // W = 1
  };
  for (const char* dtype : kDTypes) {
    for (const char* mode : kModes) {
      for (const char* padding : kPaddings) {
        for (bool align : {false, true}) {
          for (const auto& [in, out] : shapes) {
            expect_matches_reference({dtype, in, out, mode, padding, align}, 7);
          }
        }
      }
    }
  }
}

/// Empty batches, channels and grids (ATen accepts them): nothing to compute, or grad_input all
/// zeros (no grid point reaches it) and grad_grid all zeros (no channel contributes), as the
/// reference says.
TEST(GridSampler3dReference, EmptyBatchChannelsAndGridsGiveZerosOrNothing) {
  const std::pair<const char*, const char*> shapes[] = {
      {"0,2,3,5,4", "2,3,2"}, {"2,0,3,5,4", "2,3,2"}, {"1,2,3,5,4", "0,3,2"},
      {"1,2,3,5,4", "2,0,2"}, {"1,2,3,5,4", "2,3,0"}};
  for (const char* mode : kModes) {
    for (const char* padding : kPaddings) {
      for (const auto& [in, out] : shapes) {
        Case c{"f32", in, out, mode, padding, false};
        EXPECT_EQ(expect_matches_reference(c, 3), 2u) << c.text();
        ops::Specialization spec = c.spec();
        ir::Program program = spec.build_program();
        ir::HostBuffers got =
            ir::interpret(program, reference::make_inputs(spec, program, 3));
        EXPECT_EQ(testing::first_nonzero_output(program, got), "") << c.text();
      }
    }
  }
}

TEST(GridSampler3dReference, OutputMaskZeroKeepsTheSameGridGradient) {
  for (const char* mode : kModes) {
    for (const char* padding : kPaddings) {
      Case c{"f32", "2,3,3,4,3", "2,2,3", mode, padding, true, "0,1"};
      EXPECT_EQ(expect_matches_reference(c, 11), 1u);
      ops::Specialization masked = c.spec();
      c.output_mask = "1,1";
      ops::Specialization full = c.spec();
      ir::Program full_program = full.build_program();
      ir::HostBuffers inputs = reference::make_inputs(full, full_program, 11);
      EXPECT_EQ(ir::interpret(masked.build_program(), inputs)["grad_grid"],
                ir::interpret(full_program, inputs)["grad_grid"])
          << c.text();
    }
  }
}

TEST(GridSampler3dReference, GridIncludesSpecialPointsOnEveryAxis) {
  Case c{"f32", "1,1,3,5,7", "4,4,4"};
  std::vector<double> grid = reference::make_inputs(c.spec(), c.spec().build_program())["grid"];
  const double sizes[3] = {7, 5, 3};
  int on_grid_line[3] = {0, 0, 0}, far_outside = 0;
  for (size_t i = 0; i < grid.size(); ++i) {
    double pixel = ((grid[i] + 1) * sizes[i % 3] - 1) / 2;
    on_grid_line[i % 3] += pixel * 2 == std::floor(pixel * 2);
    far_outside += std::fabs(grid[i]) > 2;
  }
  for (int count : on_grid_line) EXPECT_GE(count, 3);
  EXPECT_GE(far_outside, 2);
}

// --- finite differences -----------------------------------------------------------------------

constexpr double kGradcheckEps = 1e-6;
constexpr double kGradcheckTolerance = 1e-6;

void expect_gradcheck(const Case& c, const ir::HostBuffers& inputs, const std::string& wrt,
                      const std::string& analytic_name) {
  ops::GridSampler3dParams params = c.params();
  ir::Program forward = ops::build_grid_sampler_3d_forward(params);
  ir::HostBuffers analytic = ir::interpret(ops::build_grid_sampler_3d_backward(params), inputs);
  ir::HostBuffers x{{"input", inputs.at("input")}, {"grid", inputs.at("grid")}};
  testing::GradcheckResult r =
      testing::gradcheck(forward, x, {{"output", inputs.at("grad_output")}}, wrt,
                         analytic.at(analytic_name), kGradcheckEps);
  EXPECT_GT(r.checked, 0);
  EXPECT_GT(r.max_abs_grad, 0.0) << c.text();
  EXPECT_LE(r.max_abs_error, kGradcheckTolerance * (1 + r.max_abs_grad))
      << c.text() << ": worst element " << r.worst_index;
}

TEST(GridSampler3dGradcheck, InputGradientOfBothModes) {
  for (const char* mode : kModes) {
    for (const char* padding : kPaddings) {
      for (bool align : {false, true}) {
        Case c{"f64", "1,2,3,2,4", "2,2,3", mode, padding, align};
        ops::Specialization spec = c.spec();
        expect_gradcheck(c, reference::make_inputs(spec, spec.build_program()), "input",
                         "grad_input");
      }
    }
  }
}

TEST(GridSampler3dGradcheck, GridGradientOfTrilinear) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> uniform(-1.3, 1.3);
  for (const char* padding : kPaddings) {
    for (bool align : {false, true}) {
      Case c{"f64", "2,2,3,2,4", "2,1,2", "bilinear", padding, align};
      ops::Specialization spec = c.spec();
      ir::HostBuffers inputs = reference::make_inputs(spec, spec.build_program());
      // Pixel coordinates kept 0.05 away from every integer and half integer (the kinks of
      // linear interpolation, clamping and mirroring).
      const double sizes[3] = {4, 2, 3};
      std::vector<double>& grid = inputs["grid"];
      for (size_t i = 0; i < grid.size(); ++i) {
        double size = sizes[i % 3], x, pixel;
        do {
          x = uniform(rng);
          pixel = align ? (x + 1) / 2 * (size - 1) : ((x + 1) * size - 1) / 2;
        } while (std::fabs(pixel * 2 - std::round(pixel * 2)) / 2 <= 0.05);
        grid[i] = x;
      }
      expect_gradcheck(c, inputs, "grid", "grad_grid");
    }
  }
}

TEST(GridSampler3dGradcheck, NearestGridGradientIsZero) {
  for (const char* padding : kPaddings) {
    Case c{"f64", "1,2,3,2,4", "2,2,3", "nearest", padding};
    ops::Specialization spec = c.spec();
    ir::HostBuffers inputs = reference::make_inputs(spec, spec.build_program());
    ir::HostBuffers out = ir::interpret(spec.build_program(), inputs);
    EXPECT_EQ(out.at("grad_grid"), std::vector<double>(2 * 2 * 3 * 3, 0.0));
  }
}

}  // namespace
}  // namespace adjoint
