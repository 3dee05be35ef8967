// Tests of grid_sampler_2d_backward, all through the IR interpreter (no GPU):
//  - the registry entry, its attribute errors and the tensor-shape check;
//  - the program's structure (output_mask, nearest's zero grid gradient, temporaries);
//  - hand-computed cases that pin ATen semantics independently of the reference (identity
//    sampling, round-half-to-even, reflection and border at a point outside the image);
//  - the IR against the plain-loop reference for every mode x padding x align_corners x dtype on
//    awkward shapes (size-1 axes, primes, outputs larger and smaller than the input, grid points
//    outside [-1, 1] and exactly on pixel centers and edges), with output_mask 1,1 and 0,1;
//  - finite differences of the forward program in f64: d/d input for every mode, d/d grid for
//    bilinear and bicubic with grid points kept away from the kinks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>

#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/grid_sampler.h"
#include "reference/reference.h"
#include "support/gradcheck.h"
#include "support/zero_outputs.h"

namespace adjoint {
namespace {

const char* const kModes[] = {"bilinear", "nearest", "bicubic"};
const char* const kPaddings[] = {"zeros", "border", "reflection"};
const char* const kDTypes[] = {"f32", "f64", "f16", "bf16"};

struct Shape {
  const char* input_size;
  const char* output_size;
};

struct Case {
  std::string dtype = "f32";
  Shape shape = {"1,2,5,7", "4,3"};
  std::string mode = "bilinear";
  std::string padding = "zeros";
  bool align_corners = false;
  std::string output_mask = "1,1";

  std::string text() const {
    return std::string("grid_sampler_2d_backward dtype=") + dtype +
           " input_size=" + shape.input_size + " output_size=" + shape.output_size +
           " interpolation_mode=" + mode + " padding_mode=" + padding +
           " align_corners=" + (align_corners ? "true" : "false") + " output_mask=" + output_mask;
  }
  ops::Specialization spec() const { return ops::parse_specialization(text()); }
};

/// Interpreter-vs-reference tolerance (atol = rtol): the two agree up to the order of f64
/// accumulation, i.e. at most one rounding step of the output dtype.
double reference_tolerance(const std::string& dtype) {
  if (dtype == "f64") return 1e-12;
  if (dtype == "f32") return 1e-5;
  if (dtype == "f16") return 1e-3;
  return 8e-3;  // bf16
}

/// Gradchecks run in f64 with central differences of step 1e-6; the error allowed is
/// kGradcheckTolerance * (1 + max |analytic gradient|).
constexpr double kGradcheckEps = 1e-6;
constexpr double kGradcheckTolerance = 1e-6;

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

TEST(GridSamplerOp, IsRegisteredWithTheAtenAttributes) {
  const ops::OpDefinition& op = ops::find_op("grid_sampler_2d_backward");
  std::vector<std::string> names;
  for (const ops::AttrSpec& a : op.attributes) names.push_back(a.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"dtype", "input_size", "output_size", "interpolation_mode",
                                      "padding_mode", "align_corners", "output_mask",
                                      "grad_output_strides", "input_strides", "grid_strides"}));
  ops::Specialization spec =
      ops::parse_specialization("grid_sampler_2d_backward input_size=1,2,5,7 output_size=4,3");
  EXPECT_EQ(spec.to_string(),
            "grid_sampler_2d_backward dtype=f32 input_size=1,2,5,7 output_size=4,3 "
            "interpolation_mode=bilinear padding_mode=zeros align_corners=false "
            "output_mask=1,1");
  for (const std::string& example : op.examples) {
    ir::Program p = ops::parse_specialization(example).build_program();
    EXPECT_NO_THROW(ir::verify(p)) << example;
  }
}

TEST(GridSamplerOp, RejectsBadAttributesNamingThem) {
  const std::string base = "grid_sampler_2d_backward ";
  EXPECT_NE(expect_error(base + "input_size=2,5,7 output_size=4,3").find("'input_size'"),
            std::string::npos);
  EXPECT_NE(expect_error(base + "input_size=1,2,5,7 output_size=4").find("H_out,W_out"),
            std::string::npos);
  // ATen's rule: the input's spatial sizes may not be empty (the batch, channels and grid may).
  for (const char* sizes : {"input_size=1,2,0,7 output_size=4,3", "input_size=1,2,5,0 output_size=4,3",
                            "input_size=-1,2,5,7 output_size=4,3", "input_size=1,2,5,7 output_size=-1,3"}) {
    const std::string what = expect_error(base + sizes);
    EXPECT_NE(what.find("at least"), std::string::npos) << what;
  }
  EXPECT_NE(expect_error(base + "input_size=1,2,5,7 output_size=4,3 interpolation_mode=linear")
                .find("bilinear, nearest, bicubic"),
            std::string::npos);
  EXPECT_NE(expect_error(base + "input_size=1,2,5,7 output_size=4,3 padding_mode=circular")
                .find("zeros, border, reflection"),
            std::string::npos);
  EXPECT_NE(expect_error(base + "input_size=1,2,5,7 output_size=4,3 dtype=i32").find("'dtype'"),
            std::string::npos);
  for (const char* mask : {"1", "1,1,1", "2,1", "1,-1"}) {
    std::string what =
        expect_error(base + "input_size=1,2,5,7 output_size=4,3 output_mask=" + mask);
    EXPECT_NE(what.find("'output_mask'"), std::string::npos) << what;
    EXPECT_NE(what.find("two 0/1 values"), std::string::npos) << what;
  }
}

TEST(GridSamplerOp, ShapeCheckNamesTheMismatch) {
  auto error_of = [](std::vector<int64_t> go, std::vector<int64_t> in, std::vector<int64_t> g) {
    try {
      ops::grid_sampler_2d_shapes(go, in, g);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  ops::GridSampler2dShapes ok =
      ops::grid_sampler_2d_shapes({2, 3, 4, 6}, {2, 3, 5, 7}, {2, 4, 6, 2});
  EXPECT_EQ(ok.input_size, (std::vector<int64_t>{2, 3, 5, 7}));
  EXPECT_EQ(ok.output_size, (std::vector<int64_t>{4, 6}));
  EXPECT_NE(error_of({2, 3, 4, 6}, {2, 3, 5}, {2, 4, 6, 2}).find("'input' must have rank 4"),
            std::string::npos);
  EXPECT_NE(error_of({2, 3, 4, 6}, {2, 3, 5, 7}, {2, 4, 6, 3}).find("last dimension 2"),
            std::string::npos);
  EXPECT_NE(error_of({2, 3, 4, 6}, {2, 3, 5, 7}, {1, 4, 6, 2}).find("batch size N of 'grid'"),
            std::string::npos);
  EXPECT_NE(error_of({2, 4, 4, 6}, {2, 3, 5, 7}, {2, 4, 6, 2}).find("channel count C"),
            std::string::npos);
  EXPECT_NE(error_of({2, 3, 4, 5}, {2, 3, 5, 7}, {2, 4, 6, 2}).find("W_out"), std::string::npos);
}

// --- program structure ------------------------------------------------------------------------

TEST(GridSamplerProgram, OutputMaskZeroOmitsGradInput) {
  Case c;
  c.output_mask = "0,1";
  ir::Program p = c.spec().build_program();
  ASSERT_EQ(p.outputs.size(), 1u);
  EXPECT_EQ(p.outputs[0]->name, "grad_grid");
  for (const ir::Kernel& k : p.kernels) EXPECT_NE(k.name, "grad_input");
  c.output_mask = "1,1";
  ir::Program both = c.spec().build_program();
  ASSERT_EQ(both.outputs.size(), 2u);
  EXPECT_EQ(both.outputs[0]->name, "grad_input");
  EXPECT_EQ(ir::tensor_signature(*both.outputs[0]), "grad_input: f32[1, 2, 5, 7]");
  EXPECT_EQ(ir::tensor_signature(*both.outputs[1]), "grad_grid: f32[1, 4, 3, 2]");
}

TEST(GridSamplerProgram, CoordinateDerivativeIsStoredOnlyWhereItVaries) {
  Case c;
  EXPECT_EQ(c.spec().build_program().temporaries.size(), 1u);  // zeros: a constant scale
  c.padding = "reflection";
  ir::Program p = c.spec().build_program();
  ASSERT_EQ(p.temporaries.size(), 2u);
  EXPECT_EQ(p.temporaries[1]->name, "source_coordinate_grad");
  c.mode = "bicubic";  // taps are padded one by one; the sample point is only unnormalized
  EXPECT_EQ(c.spec().build_program().temporaries.size(), 1u);
}

TEST(GridSamplerProgram, NearestWithoutGradInputOnlyZeroesGradGrid) {
  Case c;
  c.mode = "nearest";
  c.output_mask = "0,1";
  ir::Program p = c.spec().build_program();
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_EQ(ir::to_string(p.kernels[0].stages[0]),
            "compute grad_grid[n, h_out, w_out, axis] = 0.0f\n"
            "      over (n < 1, h_out < 4, w_out < 3, axis < 2)");
}

// --- hand-computed semantics ------------------------------------------------------------------

ir::HostBuffers run_backward(const Case& c, ir::HostBuffers inputs) {
  ir::Program p = c.spec().build_program();
  ir::verify(p);
  return ir::interpret(p, inputs);
}

TEST(GridSamplerSemantics, IdentityGridPassesTheGradientThrough) {
  for (const char* mode : kModes) {
    for (const char* padding : kPaddings) {
      for (bool align : {false, true}) {
        Case c{"f64", {"1,2,3,4", "3,4"}, mode, padding, align};
        ir::HostBuffers in;
        in["input"].assign(24, 0.5);
        in["grad_output"].resize(24);
        for (int i = 0; i < 24; ++i) in["grad_output"][i] = 1.0 + i;
        for (int h = 0; h < 3; ++h) {
          for (int w = 0; w < 4; ++w) {
            // The grid value of pixel centre w of an axis of `size` pixels.
            auto centre = [&](int i, int size) {
              return align ? 2.0 * i / (size - 1) - 1.0 : (2.0 * i + 1.0) / size - 1.0;
            };
            in["grid"].push_back(centre(w, 4));
            in["grid"].push_back(centre(h, 3));
          }
        }
        ir::HostBuffers out = run_backward(c, in);
        EXPECT_LE(testing::tolerance_ratio(out["grad_input"], in["grad_output"], 1e-12, 1e-12), 1.0)
            << c.text();
      }
    }
  }
}

TEST(GridSamplerSemantics, NearestRoundsHalfToEven) {
  // W = 4 without align_corners: x = -0.5, 0, 0.5 land on pixel coordinates 0.5, 1.5, 2.5.
  Case c{"f32", {"1,1,1,4", "1,3"}, "nearest"};
  ir::HostBuffers in{
      {"grad_output", {1, 10, 100}}, {"input", {0, 0, 0, 0}}, {"grid", {-0.5, 0, 0, 0, 0.5, 0}}};
  ir::HostBuffers out = run_backward(c, in);
  EXPECT_EQ(out["grad_input"], (std::vector<double>{1, 0, 110, 0}));
  EXPECT_EQ(out["grad_grid"], (std::vector<double>(6, 0.0)));
}

TEST(GridSamplerSemantics, PaddingModesOutsideTheImage) {
  // W = 3 without align_corners: x = 1.5 is pixel coordinate 3.25, beyond the right edge
  // (2.5). Reflection mirrors it to 1.75 (slope -1), border clamps it to 2 (slope 0), zeros
  // reads nothing. H = 1: y = 0 is pixel coordinate 0.
  const double a1 = 2.0, a2 = 7.0, g = 3.0, scale = 1.5;  // scale = d pixel / d x = W / 2
  ir::HostBuffers in{{"grad_output", {g}}, {"input", {5.0, a1, a2}}, {"grid", {1.5, 0.0}}};
  Case c{"f64", {"1,1,1,3", "1,1"}, "bilinear", "reflection"};
  ir::HostBuffers out = run_backward(c, in);
  EXPECT_EQ(out["grad_input"], (std::vector<double>{0, 0.25 * g, 0.75 * g}));
  EXPECT_EQ(out["grad_grid"], (std::vector<double>{-scale * (a2 - a1) * g, 0.0}));
  c.padding = "border";
  out = run_backward(c, in);
  EXPECT_EQ(out["grad_input"], (std::vector<double>{0, 0, g}));
  EXPECT_EQ(out["grad_grid"], (std::vector<double>{0, 0}));
  c.padding = "zeros";
  out = run_backward(c, in);
  EXPECT_EQ(out["grad_input"], (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(out["grad_grid"], (std::vector<double>{0, 0}));
}

TEST(GridSamplerSemantics, ForwardAtTheCentreOfATwoByTwoImageIsTheMean) {
  for (const char* mode : {"bilinear", "bicubic"}) {
    Case c{"f64", {"1,1,2,2", "1,1"}, mode, "border"};
    ir::Program forward = ops::build_grid_sampler_2d_forward(ops::grid_sampler_2d_params(c.spec()));
    ir::HostBuffers out = ir::interpret(forward, {{"input", {1, 2, 4, 9}}, {"grid", {0.0, 0.0}}});
    EXPECT_DOUBLE_EQ(out["output"][0], 4.0) << mode;
  }
}

// --- IR against the reference -----------------------------------------------------------------

/// Checks every output of the program against the reference; returns the number of outputs.
size_t expect_matches_reference(const Case& c, uint64_t seed) {
  ops::Specialization spec = c.spec();
  ir::Program program = spec.build_program();
  ir::HostBuffers inputs = reference::make_inputs(spec, program, seed);
  ir::HostBuffers got = ir::interpret(program, inputs);
  ir::HostBuffers want = reference::find("grid_sampler_2d_backward")(spec, inputs);
  std::set<std::string> got_names, want_names;
  for (const ir::Tensor& t : program.outputs) got_names.insert(t->name);
  for (const auto& [name, values] : want) want_names.insert(name);
  EXPECT_EQ(got_names, want_names) << c.text();
  double tol = reference_tolerance(c.dtype);
  for (const auto& [name, expected] : want) {
    if (!got.count(name)) continue;  // reported by the name comparison above
    EXPECT_EQ(got.at(name).size(), expected.size()) << c.text() << ": " << name;
    int64_t where = -1;
    double ratio = testing::tolerance_ratio(got.at(name), expected, tol, tol, &where);
    EXPECT_LE(ratio, 1.0) << c.text() << "\n  " << name << "[" << where << "]: got "
                          << (where >= 0 ? got.at(name)[where] : NAN) << ", want "
                          << (where >= 0 ? expected[where] : NAN);
  }
  return want.size();
}

TEST(GridSamplerReference, EveryModePaddingAlignmentAndDtype) {
  const Shape shapes[] = {
      {"1,2,5,7", "4,3"},  // primes, output smaller than input
      {"2,3,1,6", "3,8"},  // H = 1, W_out larger than W
      {"1,2,4,1", "5,2"},  // W = 1, H_out larger than H
  };
  for (const char* dtype : kDTypes) {
    for (const char* mode : kModes) {
      for (const char* padding : kPaddings) {
        for (bool align : {false, true}) {
          for (const Shape& shape : shapes) {
            expect_matches_reference({dtype, shape, mode, padding, align}, 7);
          }
        }
      }
    }
  }
}

/// Empty batches, channels and grids (ATen accepts them): nothing to compute, or grad_input all
/// zeros (no grid point reaches it) and grad_grid all zeros (no channel contributes), as the
/// reference says, in every mode and padding.
TEST(GridSamplerReference, EmptyBatchChannelsAndGridsGiveZerosOrNothing) {
  const Shape shapes[] = {{"0,2,5,7", "4,3"}, {"2,0,5,7", "4,3"}, {"2,3,5,7", "0,3"},
                          {"2,3,5,7", "4,0"}, {"0,0,1,1", "0,0"}};
  for (const char* dtype : {"f32", "bf16"}) {
    for (const char* mode : kModes) {
      for (const char* padding : kPaddings) {
        for (const Shape& shape : shapes) {
          Case c{dtype, shape, mode, padding, true};
          EXPECT_EQ(expect_matches_reference(c, 5), 2u) << c.text();
          ops::Specialization spec = c.spec();
          ir::Program program = spec.build_program();
          ir::HostBuffers got =
              ir::interpret(program, reference::make_inputs(spec, program, 5));
          EXPECT_EQ(testing::first_nonzero_output(program, got), "") << c.text();
        }
      }
    }
  }
}

TEST(GridSamplerReference, OutputMaskZeroKeepsTheSameGridGradient) {
  for (const char* mode : kModes) {
    for (const char* padding : kPaddings) {
      Case c{"f32", {"2,3,5,4", "3,3"}, mode, padding, true, "0,1"};
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

TEST(GridSamplerReference, GridIncludesPointsOnPixelCentresEdgesAndOutside) {
  Case c{"f32", {"1,1,5,7", "6,6"}};
  ir::Program p = c.spec().build_program();
  std::vector<double> grid = reference::make_inputs(c.spec(), p)["grid"];
  int on_grid_line = 0, outside = 0;
  for (size_t i = 0; i < grid.size(); ++i) {
    double size = i % 2 == 0 ? 7 : 5;
    double pixel = ((grid[i] + 1) * size - 1) / 2;
    on_grid_line += pixel * 2 == std::floor(pixel * 2);
    outside += std::fabs(grid[i]) > 1;
  }
  EXPECT_GE(on_grid_line, 5);
  EXPECT_GE(outside, 5);
}

// --- finite differences -----------------------------------------------------------------------

struct Gradients {
  ir::Program forward;
  ir::HostBuffers inputs;  ///< grad_output, input, grid
  ir::HostBuffers analytic;
};

Gradients backward_and_forward(const Case& c, ir::HostBuffers inputs) {
  ops::GridSampler2dParams params = ops::grid_sampler_2d_params(c.spec());
  Gradients g{ops::build_grid_sampler_2d_forward(params), std::move(inputs), {}};
  g.analytic = ir::interpret(ops::build_grid_sampler_2d_backward(params), g.inputs);
  return g;
}

void expect_gradcheck(const Gradients& g, const std::string& wrt, const std::string& analytic,
                      const std::string& what) {
  ir::HostBuffers x{{"input", g.inputs.at("input")}, {"grid", g.inputs.at("grid")}};
  testing::GradcheckResult r =
      testing::gradcheck(g.forward, x, {{"output", g.inputs.at("grad_output")}}, wrt,
                         g.analytic.at(analytic), kGradcheckEps);
  EXPECT_GT(r.checked, 0);
  EXPECT_GT(r.max_abs_grad, 0.0) << what;
  EXPECT_LE(r.max_abs_error, kGradcheckTolerance * (1 + r.max_abs_grad))
      << what << ": worst element " << r.worst_index;
}

TEST(GridSamplerGradcheck, InputGradientOfEveryMode) {
  for (const char* mode : kModes) {
    for (const char* padding : kPaddings) {
      for (bool align : {false, true}) {
        Case c{"f64", {"1,2,4,5", "3,4"}, mode, padding, align};
        ops::Specialization spec = c.spec();
        Gradients g = backward_and_forward(c, reference::make_inputs(spec, spec.build_program()));
        expect_gradcheck(g, "input", "grad_input", c.text());
      }
    }
  }
}

/// Random grid values whose pixel coordinates stay 0.05 away from every integer and half
/// integer: bilinear is linear between pixels, clamping and mirroring kink on pixel centres
/// and edges, and bicubic changes taps at integers.
std::vector<double> grid_away_from_kinks(const Case& c, int64_t count, int64_t height,
                                         int64_t width, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> uniform(-1.3, 1.3);
  std::vector<double> grid;
  while (static_cast<int64_t>(grid.size()) < count) {
    double size = grid.size() % 2 == 0 ? width : height;
    double x = uniform(rng);
    double pixel = c.align_corners ? (x + 1) / 2 * (size - 1) : ((x + 1) * size - 1) / 2;
    double to_half = std::fabs(pixel * 2 - std::round(pixel * 2)) / 2;
    if (to_half > 0.05) grid.push_back(x);
  }
  return grid;
}

TEST(GridSamplerGradcheck, GridGradientOfBilinearAndBicubic) {
  std::mt19937_64 rng(3);
  for (const char* mode : {"bilinear", "bicubic"}) {
    for (const char* padding : kPaddings) {
      for (bool align : {false, true}) {
        Case c{"f64", {"2,2,4,5", "3,2"}, mode, padding, align};
        ops::Specialization spec = c.spec();
        ir::HostBuffers inputs = reference::make_inputs(spec, spec.build_program());
        inputs["grid"] = grid_away_from_kinks(c, 2 * 3 * 2 * 2, 4, 5, rng);
        expect_gradcheck(backward_and_forward(c, inputs), "grid", "grad_grid", c.text());
      }
    }
  }
}

TEST(GridSamplerGradcheck, NearestGridGradientIsZero) {
  for (const char* padding : kPaddings) {
    Case c{"f64", {"2,2,4,5", "3,2"}, "nearest", padding};
    ops::Specialization spec = c.spec();
    Gradients g = backward_and_forward(c, reference::make_inputs(spec, spec.build_program()));
    EXPECT_EQ(g.analytic.at("grad_grid"), std::vector<double>(2 * 3 * 2 * 2, 0.0));
  }
}

}  // namespace
}  // namespace adjoint
