// Tests of the scatter strategies: preimage windows, the scatter-to-gather inversion (structure,
// and the lowered IR interpreted against the interpreter on the original program, bit for bit
// in f32 and f64 over a sweep of upsample shapes), the cases it must refuse, and the atomics
// strategy's accumulation temporaries and conversion kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>

#include "compiler/derive_grid.h"
#include "compiler/gathered_rows_innermost.h"
#include "compiler/index_width.h"
#include "compiler/lower.h"
#include "compiler/lower_scatter_to_atomics.h"
#include "compiler/lower_scatter_to_binned_gather.h"
#include "compiler/lower_scatter_to_gather.h"
#include "compiler/preimage_window.h"
#include "compiler/program_utils.h"
#include "compiler/simplify.h"
#include "ir/builder.h"
#include "ir/error.h"
#include "ir/interpreter.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/registry.h"

namespace adjoint::compiler {
namespace {

using ir::DType;
using ir::Expr;
using ir::Var;

/// Random values exactly representable in each input's dtype (small integers for integer
/// tensors), deterministic per seed.
ir::HostBuffers random_inputs(const ir::Program& p, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  ir::HostBuffers in;
  for (const ir::Tensor& t : p.inputs) {
    std::vector<double>& v = in[t->name];
    for (int64_t i = 0; i < t->storage_elements(); ++i)
      v.push_back(ir::round_to(t->dtype, uniform(rng)));
  }
  return in;
}

/// Every pass up to emission, as lower() runs them.
ir::Program lowered_ir(const ir::Program& p) {
  ir::Program q = simplify(p);
  q = lower_scatter_to_gather(q);
  q = simplify(q);
  q = lower_scatter_to_atomics(q);
  q = derive_grid(q);
  return narrow_index_math(q);
}

int count_scatters(const ir::Program& p) {
  int n = 0;
  for (const ir::Kernel& k : p.kernels) {
    for (const ir::Stage& s : k.stages) n += s.kind == ir::StageKind::kScatterAdd;
  }
  return n;
}

/// Interprets both programs on the same inputs and expects every output equal bit for bit.
void expect_same_results(const ir::Program& original, const ir::Program& lowered,
                         unsigned seed = 7) {
  ir::HostBuffers in = random_inputs(original, seed);
  ir::HostBuffers expected = ir::interpret(original, in);
  ir::HostBuffers actual = ir::interpret(lowered, in);
  for (const ir::Tensor& t : original.outputs) {
    const std::vector<double>& e = expected.at(t->name);
    const std::vector<double>& a = actual.at(t->name);
    ASSERT_EQ(e.size(), a.size());
    for (size_t i = 0; i < e.size(); ++i) {
      ASSERT_EQ(e[i], a[i]) << original.name << ": " << t->name << "[" << i << "]\n"
                            << ir::to_string(lowered);
    }
  }
}

/// The source index of the nearest / nearest-exact forward along one axis, as the ops define
/// it: min(floor((o [+ 0.5]) * r), I - 1) with r in f32.
Expr source_index(const Var& o, int64_t in, int64_t out, std::optional<double> scale, bool exact) {
  float r = (scale && *scale > 0) ? static_cast<float>(1.0 / *scale)
                                  : static_cast<float>(in) / static_cast<float>(out);
  Expr x = ir::cast(DType::kF32, o);
  if (exact) x = x + ir::constant(DType::kF32, 0.5);
  return ir::min(ir::cast(DType::kI64, ir::floor(x * ir::constant(DType::kF32, r))), Expr(in - 1));
}

/// An upsample_nearest backward written as the adjoint scatter of the forward gather.
ir::Program upsample_backward(DType dtype, std::vector<int64_t> in_size,
                              std::vector<int64_t> out_spatial, bool exact,
                              std::optional<double> scale = std::nullopt,
                              bool channels_last = false) {
  std::vector<int64_t> out_size = {in_size[0], in_size[1]};
  out_size.insert(out_size.end(), out_spatial.begin(), out_spatial.end());
  ir::ProgramBuilder b("upsample");
  auto strides = [&](const std::vector<int64_t>& s) {
    return channels_last ? ir::channels_last_strides(s) : std::vector<int64_t>{};
  };
  ir::Tensor go = b.input("grad_output", dtype, out_size, strides(out_size));
  ir::Tensor gi = b.output("grad_input", dtype, in_size, strides(in_size));
  std::vector<Var> vars = {Var("n"), Var("c")};
  std::vector<Expr> target = {vars[0], vars[1]}, source = {vars[0], vars[1]};
  for (size_t d = 0; d < out_spatial.size(); ++d) {
    vars.emplace_back("o" + std::to_string(d));
    source.push_back(vars.back());
    target.push_back(source_index(vars.back(), in_size[2 + d], out_spatial[d], scale, exact));
  }
  DType acc = ir::default_accumulation(dtype);
  b.kernel("scatter", {ir::scatter_add(gi, target, ir::cast(acc, ir::load(go, source)),
                                       ir::over(go, vars), acc)});
  return std::move(b).build();
}

// --- preimage windows -------------------------------------------------------------------------

std::vector<int64_t> image_of(int64_t extent, const std::function<int64_t(int64_t)>& f) {
  std::vector<int64_t> image;
  for (int64_t o = 0; o < extent; ++o) image.push_back(f(o));
  return image;
}

/// The window contains every preimage; when it says exact, it is the preimage.
void expect_valid_window(const std::vector<int64_t>& image, int64_t target_extent) {
  std::vector<int64_t> starts = preimage_starts(image, target_extent);
  PreimageWindow w = fit_preimage_window(starts, static_cast<int64_t>(image.size()));
  for (int64_t t = 0; t < target_extent; ++t) {
    ASSERT_LE(w.lo(t), starts[t]) << "t=" << t;
    ASSERT_GE(w.hi(t), starts[t + 1]) << "t=" << t;
    if (w.exact) {
      ASSERT_EQ(w.lo(t), starts[t]);
      ASSERT_EQ(w.hi(t), starts[t + 1]);
    }
  }
}

TEST(PreimageWindow, StartsOfAMonotoneMap) {
  std::vector<int64_t> starts = preimage_starts({0, 0, 1, 3, 3}, 5);
  EXPECT_EQ(starts, (std::vector<int64_t>{0, 2, 3, 3, 5, 5}));
}

TEST(PreimageWindow, RationalNearestMapsFitExactly) {
  for (int64_t in = 1; in <= 12; ++in) {
    for (int64_t out = 1; out <= 25; ++out) {
      std::vector<int64_t> image =
          image_of(out, [&](int64_t o) { return std::min(o * in / out, in - 1); });
      PreimageWindow w = fit_preimage_window(preimage_starts(image, in), out);
      EXPECT_TRUE(w.exact) << "in=" << in << " out=" << out;
      expect_valid_window(image, in);
      std::vector<int64_t> centered =
          image_of(out, [&](int64_t o) { return std::min((2 * o + 1) * in / (2 * out), in - 1); });
      EXPECT_TRUE(fit_preimage_window(preimage_starts(centered, in), out).exact)
          << "in=" << in << " out=" << out;
    }
  }
}

TEST(PreimageWindow, ScalesThatDisagreeWithTheSizesStillFit) {
  // scale 3 for 4 -> 8: every source index maps to floor(o / 3), the last input gets nothing.
  std::vector<int64_t> image = image_of(8, [](int64_t o) { return std::min<int64_t>(o / 3, 3); });
  PreimageWindow w = fit_preimage_window(preimage_starts(image, 4), 8);
  EXPECT_TRUE(w.exact);
  EXPECT_EQ(w.hi(3) - w.lo(3), 0);
}

TEST(PreimageWindow, NonLinearMapsGetAWiderValidWindow) {
  std::vector<int64_t> image = image_of(
      30, [](int64_t o) { return static_cast<int64_t>(std::sqrt(static_cast<double>(o))); });
  expect_valid_window(image, 6);
  PreimageWindow w = fit_preimage_window(preimage_starts(image, 6), 30);
  EXPECT_FALSE(w.exact);
  EXPECT_GT(w.slack(), 0);
}

// --- scatter-to-gather ------------------------------------------------------------------------

TEST(ScatterToGather, UpsampleBecomesAComputeWithAWindowedSum) {
  ir::Program p = upsample_backward(DType::kF32, {1, 2, 5, 7}, {8, 3}, false);
  ir::Program g = lower_scatter_to_gather(simplify(p));
  ASSERT_EQ(g.kernels.size(), 1u);
  ASSERT_EQ(g.kernels[0].stages.size(), 1u);
  const ir::Stage& s = g.kernels[0].stages[0];
  EXPECT_EQ(s.kind, ir::StageKind::kCompute);
  EXPECT_EQ(s.target->name, "grad_input");
  auto* reduce = s.value.as<ir::ReduceNode>();
  ASSERT_NE(reduce, nullptr) << ir::to_string(s.value);
  EXPECT_EQ(reduce->axes.size(), 2u);
  EXPECT_EQ(reduce->dtype, DType::kF32);
  EXPECT_NE(reduce->body.as<ir::LoadNode>(), nullptr) << "exact windows need no membership test";
  ir::verify(g);
  expect_same_results(p, g);
}

TEST(ScatterToGather, MatchesTheInterpreterBitForBitOverASweep) {
  int inverted = 0, programs = 0;
  for (DType dtype : {DType::kF32, DType::kF64}) {
    for (bool exact : {false, true}) {
      for (int64_t in = 1; in <= 9; ++in) {
        for (int64_t out = 1; out <= 17; out += (out < 9 ? 1 : 4)) {
          ir::Program p = upsample_backward(dtype, {1, 2, in}, {out}, exact);
          ir::Program l = lowered_ir(p);
          ++programs;
          inverted += count_scatters(l) == 0;
          expect_same_results(p, l, static_cast<unsigned>(in * 100 + out));
        }
      }
    }
  }
  EXPECT_EQ(inverted, programs) << "every upsample scatter is inverted";
}

TEST(ScatterToGather, ScalesChannelsLastAndThreeDimensions) {
  std::vector<ir::Program> programs = {
      upsample_backward(DType::kF32, {2, 3, 4}, {8}, false, 2.0),
      upsample_backward(DType::kF32, {2, 3, 5}, {8}, false, 1.7),
      upsample_backward(DType::kF32, {1, 2, 4}, {8}, true, 3.0),
      upsample_backward(DType::kF64, {2, 3, 5, 6}, {7, 13}, true, std::nullopt, true),
      upsample_backward(DType::kF32, {1, 2, 3, 4, 5}, {6, 7, 3}, false, std::nullopt, true),
  };
  for (const ir::Program& p : programs) {
    ir::Program l = lowered_ir(p);
    EXPECT_EQ(count_scatters(l), 0) << ir::to_string(p);
    expect_same_results(p, l);
  }
}

TEST(ScatterToGather, HalfPrecisionAccumulatesInF32AndConvertsOnce) {
  ir::Program p = upsample_backward(DType::kBF16, {1, 2, 6}, {13}, false);
  ir::Program l = lowered_ir(p);
  std::string text = ir::to_string(l);
  EXPECT_NE(text.find("bf16(sum<f32>("), std::string::npos) << text;
  ir::HostBuffers in = random_inputs(p, 3);
  ir::HostBuffers expected = ir::interpret(p, in), actual = ir::interpret(l, in);
  const std::vector<double>& e = expected.at("grad_input");
  const std::vector<double>& a = actual.at("grad_input");
  for (size_t i = 0; i < e.size(); ++i)
    EXPECT_EQ(e[i], a[i]) << i;  // small sums: one rounding either way
}

TEST(ScatterToGather, FloatRoundedMapsNeedingAMembershipTestStayExact) {
  // Find sizes where floor(o * f32(I/O)) departs from the exact rational map, so that no line
  // fits and the window is widened with a membership test.
  int found = 0;
  for (int64_t in = 2; in <= 64 && found < 3; ++in) {
    for (int64_t out = in + 1; out <= 200 && found < 3; ++out) {
      float r = static_cast<float>(in) / static_cast<float>(out);
      bool departs = false;
      for (int64_t o = 0; o < out; ++o) {
        departs |= static_cast<int64_t>(std::floor(static_cast<float>(o) * r)) != o * in / out;
      }
      if (!departs) continue;
      ir::Program p = upsample_backward(DType::kF32, {1, 1, in}, {out}, false);
      ir::Program l = lowered_ir(p);
      EXPECT_EQ(count_scatters(l), 0);
      expect_same_results(p, l, static_cast<unsigned>(out));
      found += ir::to_string(l).find("select(") != std::string::npos;
    }
  }
  EXPECT_GT(found, 0) << "expected at least one f32 map that no line fits";
}

TEST(ScatterToGather, UnusedDomainVariablesAreSummedAndConditionsKept) {
  ir::ProgramBuilder b("row_sums");
  ir::Tensor x = b.input("x", DType::kF32, {6, 5});
  ir::Tensor out = b.output("out", DType::kF32, {3});
  Var i("i"), j("j");
  Expr value = ir::load(x, {i, j});
  b.kernel("k", {ir::scatter_add(out, {i / 2}, value, ir::over(x, {i, j}), DType::kF32,
                                 value > ir::constant(DType::kF32, 0.0))});
  ir::Program p = std::move(b).build();
  ir::Program l = lowered_ir(p);
  EXPECT_EQ(count_scatters(l), 0) << ir::to_string(l);
  auto* reduce = l.kernels[0].stages[0].value.as<ir::ReduceNode>();
  ASSERT_NE(reduce, nullptr) << ir::to_string(l);
  EXPECT_EQ(reduce->axes.size(), 2u);
  expect_same_results(p, l);
}

TEST(ScatterToGather, IdentityOverAShorterDomainAndConstantIndicesAreGuarded) {
  ir::ProgramBuilder b("guards");
  ir::Tensor x = b.input("x", DType::kF64, {3});
  ir::Tensor out = b.output("out", DType::kF64, {2, 5});
  Var i("i");
  b.kernel("k",
           {ir::scatter_add(out, {Expr(1), i}, ir::load(x, {i}), ir::over(x, {i}), DType::kF64)});
  ir::Program p = std::move(b).build();
  ir::Program l = lowered_ir(p);
  EXPECT_EQ(count_scatters(l), 0);
  EXPECT_NE(l.kernels[0].stages[0].value.as<ir::SelectNode>(), nullptr) << ir::to_string(l);
  expect_same_results(p, l);
}

TEST(ScatterToGather, ASharedKernelIsSplitAfterTheStagesItReads) {
  ir::ProgramBuilder b("split");
  ir::Tensor x = b.input("x", DType::kF32, {8});
  ir::Tensor tmp = b.temporary("doubled", DType::kF32, {8});
  ir::Tensor out = b.output("out", DType::kF32, {4});
  Var i("i"), j("j");
  b.kernel("k",
           {ir::compute(tmp, ir::over(tmp, {i}), ir::load(x, {i}) * ir::constant(DType::kF32, 2.0)),
            ir::scatter_add(out, {j / 2}, ir::load(tmp, {j}), ir::over(tmp, {j}), DType::kF32)});
  ir::Program p = std::move(b).build();
  ir::Program g = lower_scatter_to_gather(p);
  ASSERT_EQ(g.kernels.size(), 2u);
  EXPECT_EQ(g.kernels[0].stages.size(), 1u);
  EXPECT_EQ(g.kernels[1].name, "k_out");
  expect_same_results(p, lowered_ir(p));
}

TEST(ScatterToGather, RefusesWhatItCannotInvert) {
  Var i("i"), j("j");
  auto one_scatter = [&](std::function<ir::Stage(ir::Tensor, ir::Tensor, ir::Tensor)> make) {
    ir::ProgramBuilder b("refused");
    ir::Tensor x = b.input("x", DType::kF32, {6, 4});
    ir::Tensor index = b.input("index", DType::kI64, {6});
    ir::Tensor out = b.output("out", DType::kF32, {12});
    b.kernel("k", {make(x, index, out)});
    return std::move(b).build();
  };
  std::vector<ir::Program> programs = {
      one_scatter([&](ir::Tensor x, ir::Tensor, ir::Tensor out) {  // not monotone
        return ir::scatter_add(out, {(i * 5) % 6}, ir::load(x, {i, j}), ir::over(x, {i, j}),
                               DType::kF32);
      }),
      one_scatter([&](ir::Tensor x, ir::Tensor index, ir::Tensor out) {  // data-dependent
        return ir::scatter_add(out, {ir::load(index, {i}) % 12}, ir::load(x, {i, j}),
                               ir::over(x, {i, j}), DType::kF32);
      }),
      one_scatter([&](ir::Tensor x, ir::Tensor, ir::Tensor out) {  // two variables in one index
        return ir::scatter_add(out, {i + j}, ir::load(x, {i, j}), ir::over(x, {i, j}), DType::kF32);
      }),
  };
  for (const ir::Program& p : programs) {
    ir::Program g = lower_scatter_to_gather(p);
    EXPECT_EQ(count_scatters(g), 1) << ir::to_string(g);
    expect_same_results(p, lowered_ir(p));
  }
  // Two scatters into one target accumulate: inverting either would overwrite the other.
  ir::ProgramBuilder b("twice");
  ir::Tensor x = b.input("x", DType::kF32, {4});
  ir::Tensor out = b.output("out", DType::kF32, {2});
  Var a("a"), c("c");
  b.kernel("first",
           {ir::scatter_add(out, {a / 2}, ir::load(x, {a}), ir::over(x, {a}), DType::kF32)});
  b.kernel("second",
           {ir::scatter_add(out, {c / 2}, ir::load(x, {c}), ir::over(x, {c}), DType::kF32)});
  ir::Program twice = std::move(b).build();
  EXPECT_EQ(count_scatters(lower_scatter_to_gather(twice)), 2);
  expect_same_results(twice, lowered_ir(twice));
}

TEST(ScatterToGather, EveryRegisteredUpsampleExampleIsInvertedAndExact) {
  int checked = 0;
  for (const ops::OpDefinition& op : ops::all_ops()) {
    if (op.name.find("upsample") == std::string::npos) continue;
    for (const std::string& example : op.examples) {
      ops::Specialization s = ops::parse_specialization(example);
      ir::Program p = s.build_program();
      if (p.inputs.empty() || p.inputs[0]->num_elements() > 20000) continue;  // keep it fast
      ir::Program l = lowered_ir(p);
      EXPECT_EQ(count_scatters(l), 0) << example;
      EXPECT_EQ(l.kernels.size(), 1u) << example;
      bool wide = s.get_dtype("dtype") == DType::kF32 || s.get_dtype("dtype") == DType::kF64;
      if (wide) expect_same_results(p, l);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << "no upsample op registered";
}

TEST(Passes, KeepEveryRegisteredExampleValid) {
  for (const ops::OpDefinition& op : ops::all_ops()) {
    for (const std::string& example : op.examples) {
      ir::Program p = ops::parse_specialization(example).build_program();
      ir::Program q = simplify(p);
      using Pass = ir::Program (*)(const ir::Program&);
      const Pass derive_default_grid = [](const ir::Program& p) { return derive_grid(p); };
      for (Pass pass : {lower_scatter_to_gather, simplify, lower_scatter_to_atomics,
                        derive_default_grid, narrow_index_math}) {
        q = pass(q);
        EXPECT_NO_THROW(ir::verify(q)) << example << "\n" << ir::to_string(q);
      }
    }
  }
}

// --- atomics ----------------------------------------------------------------------------------

ir::Program data_dependent(DType target_dtype, int kernels = 1) {
  ir::ProgramBuilder b("scatter_by_index");
  ir::Tensor x = b.input("x", DType::kF32, {6});
  ir::Tensor index = b.input("index", DType::kI64, {6});
  ir::Tensor out = b.output("out", target_dtype, {3});
  for (int k = 0; k < kernels; ++k) {
    Var i("i");
    Expr where =
        ir::cast(DType::kI64, ir::floor((ir::load(x, {i}) + ir::constant(DType::kF32, 1.0)) *
                                        ir::constant(DType::kF32, 1.4)));
    b.kernel("scatter" + std::to_string(k),
             {ir::scatter_add(out, {ir::min(ir::max(where, 0), 2)}, ir::load(x, {i}),
                              ir::over(x, {i}), DType::kF32)});
  }
  return std::move(b).build();
}

TEST(ScatterToAtomics, SameDtypeTargetsAreLeftAsTheyAre) {
  ir::Program p = data_dependent(DType::kF32);
  ir::Program g = lower_scatter_to_gather(p);
  EXPECT_EQ(count_scatters(g), 1);
  ir::Program a = lower_scatter_to_atomics(g);
  EXPECT_EQ(a.kernels.size(), 1u);
  EXPECT_TRUE(a.temporaries.empty());
}

TEST(ScatterToAtomics, NarrowTargetsGetAnAccumulatorAndOneConversionAfterTheLastScatter) {
  ir::Program p = data_dependent(DType::kBF16, 2);
  ir::Program a = lower_scatter_to_atomics(lower_scatter_to_gather(p));
  ASSERT_EQ(a.temporaries.size(), 1u);
  EXPECT_EQ(a.temporaries[0]->name, "out_accumulator");
  EXPECT_EQ(a.temporaries[0]->dtype, DType::kF32);
  ASSERT_EQ(a.kernels.size(), 3u);
  EXPECT_EQ(a.kernels[0].stages[0].target->name, "out_accumulator");
  EXPECT_EQ(a.kernels[1].stages[0].target->name, "out_accumulator");
  EXPECT_EQ(a.kernels[2].name, "out_convert");
  EXPECT_EQ(a.kernels[2].stages[0].kind, ir::StageKind::kCompute);
  ir::verify(a);
  // Inputs in [-1, 1] summed in f32 then rounded to bf16 once: same as the interpreter's
  // single rounding of the f64 sum for these few terms.
  ir::HostBuffers in = random_inputs(p, 11);
  for (double& v : in["index"]) v = 0;
  ir::HostBuffers e = ir::interpret(p, in), r = ir::interpret(a, in);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(e["out"][i], r["out"][i], std::fabs(e["out"][i]) * 0x1p-7);
}

TEST(ScatterToAtomics, ReadingATargetBetweenItsScattersIsRefused) {
  ir::ProgramBuilder b("partial");
  ir::Tensor x = b.input("x", DType::kF32, {4});
  ir::Tensor out = b.output("out", DType::kF16, {2});
  ir::Tensor copy = b.output("copy", DType::kF16, {2});
  Var i("i"), j("j"), k("k");
  auto where = [&](const Var& v) {
    return ir::cast(DType::kI64, ir::load(x, {v}) > ir::constant(DType::kF32, 0.0));
  };
  b.kernel("first",
           {ir::scatter_add(out, {where(i)}, ir::load(x, {i}), ir::over(x, {i}), DType::kF32)});
  b.kernel("read", {ir::compute(copy, ir::over(copy, {j}), ir::load(out, {j}))});
  b.kernel("second",
           {ir::scatter_add(out, {where(k)}, ir::load(x, {k}), ir::over(x, {k}), DType::kF32)});
  ir::Program p = std::move(b).build();
  EXPECT_THROW(lower_scatter_to_atomics(p), Error);
}


// --- lower_scatter_to_binned_gather ---------------------------------------------------------

std::vector<std::string> kernel_names(const ir::Program& p) {
  std::vector<std::string> names;
  for (const ir::Kernel& k : p.kernels) names.push_back(k.name);
  return names;
}

TEST(ScatterToBinnedGather, GridSamplerBinsOncePerPointAndGathersPerChannel) {
  ir::Program p = ops::parse_specialization(
                      "grid_sampler_2d_backward dtype=f16 input_size=2,3,40,30 output_size=5,4 "
                      "interpolation_mode=bicubic padding_mode=zeros align_corners=false")
                      .build_program();
  ClaimSlotTensors claims;
  BinnedGatherOptions planar;  // the gather in grad_input's own layout
  planar.channels_last_min = 0;
  planar.taps_walks_max = 0;  // every tap a record (taps in the gather: below)
  {  // The scan on warp lanes (the default): 2400 counts (a warp of zeros more: 2432) -> 75 (at
     // most 32 x 32 entries: the top), one level of chunk sums, and the offsets, one per count.
    ir::Program lanes = lower_scatter_to_binned_gather(p, nullptr, planar);
    ir::verify(lanes);
    EXPECT_EQ(kernel_names(lanes),
              (std::vector<std::string>{
                  "source_coordinates", "grad_input_bin_count", "grad_input_bin_scan0_partial",
                  "grad_input_bin_scan0", "grad_input_bin_fill", "grad_input_bin_sort",
                  "grad_input_bin_factors", "grad_input_bin_chunk_sums", "grad_input",
                  "grad_grid"}));
    EXPECT_EQ(lanes.find_tensor("grad_input_bin_count")->shape, (std::vector<int64_t>{2432}));
    EXPECT_EQ(lanes.find_tensor("grad_input_bin_scan0_partial")->shape,
              (std::vector<int64_t>{75}));
    EXPECT_EQ(lanes.find_tensor("grad_input_bin_scan0")->shape, (std::vector<int64_t>{2432}));
  }
  planar.scan_lanes = false;  // below: the scan by digits (ADJOINT_TUNE_BINNED_SCAN=1)
  ir::Program out = lower_scatter_to_binned_gather(p, &claims, planar);
  ir::verify(out);
  // 2 x 40 x 30 = 2400 cells: scan levels 2400 -> 75 -> 3, by digits: the two levels of chunk
  // sums, then the offsets.
  EXPECT_EQ(kernel_names(out),
            (std::vector<std::string>{
                "source_coordinates", "grad_input_bin_count", "grad_input_bin_scan0_partial",
                "grad_input_bin_scan1_partial", "grad_input_bin_scan0", "grad_input_bin_fill",
                "grad_input_bin_sort", "grad_input_bin_factors", "grad_input_bin_chunk_sums",
                "grad_input", "grad_grid"}));
  {  // The chained levels (ADJOINT_TUNE_BINNED_SCAN=0): two kernels per level.
    BinnedGatherOptions chained = planar;
    chained.scan_digits = false;
    EXPECT_EQ(kernel_names(lower_scatter_to_binned_gather(p, nullptr, chained)),
              (std::vector<std::string>{
                  "source_coordinates", "grad_input_bin_count", "grad_input_bin_scan0_partial",
                  "grad_input_bin_scan1_partial", "grad_input_bin_scan2", "grad_input_bin_scan1",
                  "grad_input_bin_scan0", "grad_input_bin_fill", "grad_input_bin_sort",
                  "grad_input_bin_factors", "grad_input_bin_chunk_sums", "grad_input",
                  "grad_grid"}));
  }
  EXPECT_EQ(claims, (ClaimSlotTensors{{"grad_input_bin_fill", "grad_input_bin_count"}}));
  // Records are (n, h_out, w_out, tap): 2 x 5 x 4 x 16, channels excluded; cells (n, y, x).
  ir::Tensor count = out.find_tensor("grad_input_bin_count");
  ir::Tensor sorted = out.find_tensor("grad_input_bin_sorted");
  ASSERT_TRUE(count && sorted);
  EXPECT_EQ(count->shape, (std::vector<int64_t>{2400}));
  EXPECT_EQ(sorted->shape, (std::vector<int64_t>{2 * 5 * 4 * 16}));
  EXPECT_EQ(out.find_tensor("grad_input_bin_scan0")->shape, (std::vector<int64_t>{2401}));
  // The tap weight (no channel in it) is computed once per record, in bucket order.
  ASSERT_EQ(out.kernels[7].stages.size(), 1u);
  EXPECT_EQ(out.kernels[7].stages[0].target->name, "grad_input_bin_factor");
  EXPECT_EQ(out.kernels[7].stages[0].target->dtype, DType::kF32);
  // Chunk sums of 64 slots (640 / 64 = 10 chunks) per channel, in the f32 accumulation dtype.
  ASSERT_EQ(out.kernels[8].stages.size(), 1u);
  const ir::Tensor chunk_sums = out.kernels[8].stages[0].target;
  EXPECT_EQ(chunk_sums->name, "grad_input_bin_chunk_sums");
  EXPECT_EQ(chunk_sums->shape, (std::vector<int64_t>{10, 3}));
  EXPECT_EQ(chunk_sums->dtype, DType::kF32);
  const ir::Stage& gather = out.kernels[9].stages[0];
  EXPECT_EQ(gather.kind, ir::StageKind::kCompute);
  EXPECT_EQ(gather.target->name, "grad_input");
  EXPECT_EQ(gather.domain.size(), 4u);
  const std::string text = ir::to_string(gather.value);
  EXPECT_NE(text.find("grad_input_bin_factor[q"), std::string::npos) << text;
  EXPECT_EQ(text.find("source_coordinate"), std::string::npos) << text;
  EXPECT_NE(text.find("grad_input_bin_chunk_sums["), std::string::npos) << text;
  // Without chunks: no chunk-sum kernel, the gather walks its bucket alone.
  planar.gather_chunk = 0;
  ir::Program unchunked = lower_scatter_to_binned_gather(p, nullptr, planar);
  EXPECT_FALSE(unchunked.find_tensor("grad_input_bin_chunk_sums"));
  EXPECT_EQ(unchunked.kernels.size(), out.kernels.size() - 1);
  // Taps in the gather (16 taps x 3 channels = 48 walks per cell, within a bound of 48; the
  // default 16 keeps bicubic's taps records): one record per point (2 x 5 x 4), binned by its
  // base cell, whose components range over [-shift_max, extent - 1 - shift_min]: bicubic's
  // taps shift by -1..2, so 2 x 43 x 33 cells; factors per slot and tap. The condition (zeros
  // padding) only says that the index is in bounds, which every term of a walk is: no
  // per-tap condition is kept.
  planar.taps_walks_max = 48;
  ir::Program taps = lower_scatter_to_binned_gather(p, nullptr, planar);
  ir::verify(taps);
  // (The count padded to a multiple of 32 for the scan by digits: 2838 -> 2848.)
  EXPECT_EQ(taps.find_tensor("grad_input_bin_count")->shape, (std::vector<int64_t>{2848}));
  EXPECT_EQ(taps.find_tensor("grad_input_bin_sorted")->shape, (std::vector<int64_t>{2 * 5 * 4}));
  EXPECT_EQ(taps.find_tensor("grad_input_bin_factor")->shape, (std::vector<int64_t>{40, 16}));
  EXPECT_FALSE(taps.find_tensor("grad_input_bin_valid"));
  // Chunk sums per chunk and tap (40 slots: no chunk of 64, so none).
  EXPECT_FALSE(taps.find_tensor("grad_input_bin_chunk_sums"));
  const std::string walk = ir::to_string(taps.kernels[taps.kernels.size() - 2].stages[0].value);
  // The taps in order, written out as adds (no constant-trip reduction for thread tiles).
  EXPECT_EQ(walk.rfind("f16(((((((((((((((sum<f32>(q in [", 0), 0u) << walk;
  EXPECT_EQ(walk.find("tap"), std::string::npos) << walk;
  EXPECT_NE(walk.find("grad_input_bin_factor[q"), std::string::npos) << walk;
  // Above the bound (by default): the taps stay records.
  planar.taps_walks_max = 47;
  EXPECT_EQ(lower_scatter_to_binned_gather(p, nullptr, planar)
                .find_tensor("grad_input_bin_sorted")
                ->shape,
            (std::vector<int64_t>{2 * 5 * 4 * 16}));
  LowerOptions negative;
  negative.binned_taps_walks_max = -1;
  EXPECT_THROW(lower(p, negative), Error);
}

TEST(ScatterToBinnedGather, WiderTapBoundNeedsPointsForEveryCellAndALargeGather) {
  // Bicubic at 4 channels: 16 taps x 4 = 64 walks per cell, past taps_walks_max (16) and within
  // taps_walks_wide_max (64). Measured on the H100 (docs/compiler.md "Taps in the gather"): the
  // taps in the gather win where every cell gets a point and the gather is large, and lose where
  // the grid has fewer points than the input has cells, or the problem is small.
  auto sorted_records = [](const std::string& spec, const BinnedGatherOptions& options) {
    ir::Program p = ops::parse_specialization(spec).build_program();
    ir::Program out = lower_scatter_to_binned_gather(p, nullptr, options);
    ir::verify(out);
    return out.find_tensor("grad_input_bin_sorted")->shape.at(0);
  };
  const std::string same =
      "grid_sampler_2d_backward dtype=f32 input_size=1,4,128,128 output_size=128,128 "
      "interpolation_mode=bicubic padding_mode=zeros align_corners=false";
  const std::string fewer_points =
      "grid_sampler_2d_backward dtype=f32 input_size=1,4,128,128 output_size=64,64 "
      "interpolation_mode=bicubic padding_mode=zeros align_corners=false";
  const std::string small =
      "grid_sampler_2d_backward dtype=f32 input_size=1,4,16,16 output_size=16,16 "
      "interpolation_mode=bicubic padding_mode=zeros align_corners=false";
  BinnedGatherOptions options;  // the defaults: 16, and 64 where the conditions hold
  EXPECT_EQ(sorted_records(same, options), 128 * 128);        // one record per point
  EXPECT_EQ(sorted_records(fewer_points, options), 64 * 64 * 16);  // every tap a record
  EXPECT_EQ(sorted_records(small, options), 16 * 16 * 16);   // 1,024 elements < 65,536
  options.taps_wide_min_elements = 1024;
  EXPECT_EQ(sorted_records(small, options), 16 * 16);
  const std::string bilinear_wide =
      "grid_sampler_2d_backward dtype=f32 input_size=1,16,128,128 output_size=128,128 "
      "interpolation_mode=bilinear padding_mode=zeros align_corners=false";
  EXPECT_EQ(sorted_records(bilinear_wide, options), 128 * 128 * 4);  // 16 channels > 8
  options.taps_wide_broadcast_max = 16;
  EXPECT_EQ(sorted_records(bilinear_wide, options), 128 * 128);
  BinnedGatherOptions none;  // ADJOINT_TUNE_BINNED_TAPS=0: every tap a record, the wider
  none.taps_walks_max = 0;  // bound included (the records layout's order stays one knob away)
  EXPECT_EQ(sorted_records(same, none), 128 * 128 * 16);
  options.taps_walks_wide_max = 63;  // 64 walks: past both bounds
  EXPECT_EQ(sorted_records(same, options), 128 * 128 * 16);
  options.taps_walks_wide_max = 0;  // ADJOINT_TUNE_BINNED_TAPS_WIDE=0: the narrow bound alone
  EXPECT_EQ(sorted_records(same, options), 128 * 128 * 16);
  LowerOptions negative;
  negative.binned_taps_walks_wide_max = -1;
  EXPECT_THROW(lower(ops::parse_specialization(same).build_program(), negative), Error);
}

TEST(ScatterToBinnedGather, WideChannelsGatherChannelsInnermost) {
  ir::Program p = ops::parse_specialization(
                      "grid_sampler_2d_backward dtype=bf16 input_size=2,16,6,5 output_size=8,6 "
                      "interpolation_mode=bilinear padding_mode=zeros align_corners=false")
                      .build_program();
  // 16 channels >= 2, and 2 x 8 x 6 x 4 = 384 records >= 2 per cell (2 x 6 x 5 = 60 cells);
  // every tap a record (the interpreter runs the claim as a plain load).
  BinnedGatherOptions records;
  records.taps_walks_max = 0;
  ir::Program out = lower_scatter_to_binned_gather(p, nullptr, records);
  ir::verify(out);
  std::vector<std::string> names = kernel_names(out);
  ASSERT_GE(names.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(names.end() - 5, names.end()),
            (std::vector<std::string>{"grad_input_bin_grad_output_transposed",
                                      "grad_input_bin_chunk_sums", "grad_input_gather",
                                      "grad_input", "grad_grid"}));
  // grad_output (N, C, H_out, W_out) copied as (N, H_out, W_out, C), in its own dtype.
  ir::Tensor copy = out.find_tensor("grad_input_bin_grad_output_transposed");
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->shape, (std::vector<int64_t>{2, 8, 6, 16}));
  EXPECT_EQ(copy->dtype, DType::kBF16);
  ir::Tensor gathered = out.find_tensor("grad_input_bin_gathered");
  ASSERT_TRUE(gathered);
  EXPECT_EQ(gathered->shape, (std::vector<int64_t>{2, 6, 5, 16}));
  const ir::Stage& gather = out.kernels[names.size() - 3].stages[0];
  EXPECT_EQ(gather.target, gathered);
  EXPECT_EQ(gather.domain.back().var.name_hint(), "c");
  const std::string text = ir::to_string(gather.value);
  EXPECT_NE(text.find("grad_input_bin_grad_output_transposed["), std::string::npos) << text;
  EXPECT_EQ(text.find("grad_output["), std::string::npos) << text;
  // The last kernel before grad_grid copies the gathered values into grad_input's layout.
  const ir::Stage& copy_back = out.kernels[names.size() - 2].stages[0];
  EXPECT_EQ(copy_back.target->name, "grad_input");
  EXPECT_EQ(copy_back.value.kind(), ir::ExprKind::kLoad);
  // Below the threshold, or with it off, the gather writes grad_input directly.
  BinnedGatherOptions off = records;
  off.channels_last_min = 0;
  ir::Program planar = lower_scatter_to_binned_gather(p, nullptr, off);
  EXPECT_FALSE(planar.find_tensor("grad_input_bin_gathered"));
  EXPECT_EQ(kernel_names(planar).size(), names.size() - 2);
  BinnedGatherOptions high = records;
  high.channels_last_min = 17;
  EXPECT_FALSE(lower_scatter_to_binned_gather(p, nullptr, high).find_tensor(
      "grad_input_bin_gathered"));
  // Nearest on the same shapes: 96 records for 60 cells, fewer than 2 per cell, but 16
  // channels, at least sparse_channels_last_min (4): broadcast-innermost all the same, and the
  // count kernel's notes say why. With that bound off the records alone decide: planar.
  ir::Program nearest = ops::parse_specialization(
                            "grid_sampler_2d_backward dtype=bf16 input_size=2,16,6,5 "
                            "output_size=8,6 interpolation_mode=nearest")
                            .build_program();
  ScheduleNotes sparse_notes;
  EXPECT_TRUE(lower_scatter_to_binned_gather(nearest, nullptr, {}, nullptr, &sparse_notes)
                  .find_tensor("grad_input_bin_gathered"));
  ASSERT_EQ(sparse_notes.count("grad_input_bin_count"), 1u);
  EXPECT_NE(sparse_notes.at("grad_input_bin_count")
                .find("binned layout: broadcast-innermost at 96 records over 60 cells"),
            std::string::npos);
  BinnedGatherOptions records_decide;
  records_decide.sparse_channels_last_min = 0;
  EXPECT_FALSE(lower_scatter_to_binned_gather(nearest, nullptr, records_decide)
                   .find_tensor("grad_input_bin_gathered"));
  BinnedGatherOptions wider = records_decide;
  wider.sparse_channels_last_min = 17;
  EXPECT_FALSE(lower_scatter_to_binned_gather(nearest, nullptr, wider)
                   .find_tensor("grad_input_bin_gathered"));
  BinnedGatherOptions any_records = records_decide;
  any_records.records_per_cell_min = 0;
  EXPECT_TRUE(lower_scatter_to_binned_gather(nearest, nullptr, any_records)
                  .find_tensor("grad_input_bin_gathered"));
  // The same sums in the same order as the planar gather.
  expect_same_results(lower_scatter_to_binned_gather(nearest, nullptr, records_decide),
                      lower_scatter_to_binned_gather(nearest, nullptr));
  // 3 channels (nearest at 32x3x224^2 was no faster that way on the H100): planar. 8 channels:
  // bf16 rows of 16 bytes (one vector group, stored directly) take the layout, f32 rows of 32
  // bytes below the 16 elements of tiled copies do not (two plain copies: slower on the H100)
  // unless the bounds of cheap copies say otherwise.
  auto nearest_program = [](const std::string& dtype, int channels) {
    return ops::parse_specialization("grid_sampler_2d_backward dtype=" + dtype +
                                     " input_size=2," + std::to_string(channels) +
                                     ",6,5 output_size=8,6 interpolation_mode=nearest")
        .build_program();
  };
  auto innermost = [](const ir::Program& program, const BinnedGatherOptions& options) {
    return lower_scatter_to_binned_gather(program, nullptr, options)
               .find_tensor("grad_input_bin_gathered") != nullptr;
  };
  EXPECT_FALSE(innermost(nearest_program("f32", 3), {}));
  EXPECT_TRUE(innermost(nearest_program("f32", 4), {}));
  EXPECT_TRUE(innermost(nearest_program("bf16", 8), {}));
  EXPECT_FALSE(innermost(nearest_program("f32", 8), {}));
  EXPECT_TRUE(innermost(nearest_program("f32", 16), {}));
  BinnedGatherOptions wide_rows;
  wide_rows.sparse_row_bytes_max = 32;
  EXPECT_TRUE(innermost(nearest_program("f32", 8), wide_rows));
  BinnedGatherOptions untiled;
  untiled.sparse_tiled_min = 0;
  EXPECT_FALSE(innermost(nearest_program("f32", 16), untiled));
  EXPECT_TRUE(innermost(nearest_program("f32", 4), untiled));
  // Fewer records than cells (a grid smaller than the input: 24 records over 60 cells): planar.
  EXPECT_FALSE(innermost(ops::parse_specialization("grid_sampler_2d_backward dtype=f32 "
                                                   "input_size=2,16,6,5 output_size=4,3 "
                                                   "interpolation_mode=nearest")
                             .build_program(),
                         {}));
  // grad_output already channels-last in memory (read in place): the gather reads it, no copy.
  ir::Program strided = ops::parse_specialization(
                            "grid_sampler_2d_backward dtype=f32 input_size=2,16,6,5 "
                            "output_size=8,6 interpolation_mode=bilinear "
                            "grad_output_strides=768,1,96,16")
                            .build_program();
  ir::Program in_place = lower_scatter_to_binned_gather(strided, nullptr, records);
  ir::verify(in_place);
  EXPECT_TRUE(in_place.find_tensor("grad_input_bin_gathered"));
  EXPECT_FALSE(in_place.find_tensor("grad_input_bin_grad_output_transposed"));
  // The same sums in the same order as the planar gather (the interpreter's scatter adds in
  // f64, so the comparison is gather against gather).
  BinnedGatherOptions planar_options = records;
  planar_options.channels_last_min = 0;
  expect_same_results(lower_scatter_to_binned_gather(strided, nullptr, planar_options), in_place);
  LowerOptions negative;
  negative.binned_channels_last_min = -1;
  EXPECT_THROW(lower(p, negative), Error);
  LowerOptions negative_sparse;
  negative_sparse.binned_sparse_channels_last_min = -1;
  EXPECT_THROW(lower(p, negative_sparse), Error);
  LowerOptions negative_chunk;
  negative_chunk.binned_gather_chunk = -2;
  try {
    lower(p, negative_chunk);
    ADD_FAILURE() << "a negative binned_gather_chunk was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("binned_gather_chunk"), std::string::npos) << e.what();
  }
}

// --- copy_gathered_rows_innermost -----------------------------------------------------------

TEST(GatheredRowsInnermost, GradGridReadsInputWithChannelsLast) {
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=f32 input_size=2,8,5,7 output_size=4,3 "
        "interpolation_mode=bilinear padding_mode=zeros align_corners=false",
        "grid_sampler_2d_backward dtype=f64 input_size=1,4,4,4 output_size=5,3 "
        "interpolation_mode=bicubic padding_mode=reflection align_corners=true",
        "grid_sampler_2d_backward dtype=bf16 input_size=1,16,4,4 output_size=5,3 "
        "interpolation_mode=bilinear padding_mode=border align_corners=true",
        "grid_sampler_3d_backward dtype=f32 input_size=1,8,3,4,5 output_size=3,2,4 "
        "interpolation_mode=bilinear padding_mode=border align_corners=false"}) {
    ir::Program p = ops::parse_specialization(spec).build_program();
    ir::Program out = copy_gathered_rows_innermost(p, 2);  // rows of 32 bytes: one sector
    ir::verify(out);
    // One copy, right before grad_grid: input with its channel component last.
    ir::Tensor rows = out.find_tensor("input_rows");
    ASSERT_TRUE(rows) << spec;
    std::vector<int64_t> shape = p.find_tensor("input")->shape;
    shape.push_back(shape[1]);
    shape.erase(shape.begin() + 1);
    EXPECT_EQ(rows->shape, shape) << spec;
    std::vector<std::string> names = kernel_names(out);
    ASSERT_EQ(names.size(), p.kernels.size() + 1) << spec;
    EXPECT_EQ(names[names.size() - 2], "input_rows") << spec;
    EXPECT_EQ(names.back(), "grad_grid") << spec;
    const std::string text = ir::to_string(out.kernels.back().stages[0].value);
    EXPECT_EQ(text.find("input["), std::string::npos) << text;
    // grad_output is read at plain (n, c, h, w): not a data-dependent read, left alone.
    EXPECT_NE(text.find("grad_output["), std::string::npos) << text;
    expect_same_results(p, out);
    // Reduced axes shorter than the minimum, or the pass off: the very same program.
    EXPECT_TRUE(same_program(copy_gathered_rows_innermost(p, 17), p)) << spec;
    EXPECT_TRUE(same_program(copy_gathered_rows_innermost(p, 0), p)) << spec;
  }
  // Rows longer than one 32-byte sector stay in place (9 f32 channels: 36 bytes).
  ir::Program wide = ops::parse_specialization(
                         "grid_sampler_2d_backward dtype=f32 input_size=2,9,5,7 output_size=4,3 "
                         "interpolation_mode=bilinear")
                         .build_program();
  EXPECT_TRUE(same_program(copy_gathered_rows_innermost(wide, 2), wide));
  // Loads whose indices do not read memory stay (upsample's gathers).
  ir::Program up = ops::parse_specialization(
                       "upsample_nearest2d_backward dtype=f32 input_size=2,16,4,4 "
                       "output_size=8,8")
                       .build_program();
  EXPECT_TRUE(same_program(copy_gathered_rows_innermost(up, 1), up));
  LowerOptions negative;
  negative.gathered_rows_min = -1;
  EXPECT_THROW(lower(up, negative), Error);
}

TEST(ScatterToBinnedGather, TheStrategyFollowsTheDeterminismSetting) {
  for (const char* spec :
       {"grid_sampler_2d_backward dtype=bf16 input_size=1,2,5,7 output_size=4,3 "
        "interpolation_mode=bilinear",
        "grid_sampler_2d_backward dtype=f32 input_size=1,2,5,7 output_size=4,3 "
        "interpolation_mode=nearest",
        "grid_sampler_2d_backward dtype=f64 input_size=1,2,5,7 output_size=4,3 "
        "interpolation_mode=bicubic",
        "grid_sampler_3d_backward dtype=f16 input_size=1,2,3,4,5 output_size=2,3,2 "
        "interpolation_mode=bilinear",
        "grid_sampler_3d_backward dtype=f32 input_size=1,2,3,4,5 output_size=2,3,2 "
        "interpolation_mode=nearest"}) {
    ir::Program p = ops::parse_specialization(spec).build_program();
    CompiledProgram by_default = lower(p, LowerOptions{});
    EXPECT_TRUE(by_default.deterministic) << spec;
    for (const CompiledKernel& k : by_default.kernels) EXPECT_FALSE(k.uses_atomics) << k.entry;
    LowerOptions atomics;
    atomics.determinism = Determinism::kAllowAtomics;
    EXPECT_FALSE(lower(p, atomics).deterministic) << spec;
  }
}

TEST(ScatterToBinnedGather, AllowedAtomicsGiveWayWhereTheBinnedGatherIsFaster) {
  // Under kAllowAtomics a data-dependent scatter keeps its atomics below
  // binned_over_atomics_min_broadcast(taps) broadcast elements (channels) and from there takes
  // the default's deterministic program (the binned gather, or the scanned one where that is
  // small enough); binned_over_atomics = false: atomics at any size.
  EXPECT_EQ(binned_over_atomics_min_broadcast(1), 32);
  EXPECT_EQ(binned_over_atomics_min_broadcast(4), 16);
  EXPECT_EQ(binned_over_atomics_min_broadcast(8), 16);
  EXPECT_EQ(binned_over_atomics_min_broadcast(16), 8);
  struct Case {
    const char* op;
    const char* mode;
    int channels;  // the bound for the mode's taps
    const char* rest;
  };
  // Grids of 256 and 216 points: past the scanned gather's bound of 128 records per element.
  const char* kPlanar = "5,7 output_size=16,16";
  const char* kCubic = "3,4,5 output_size=6,6,6";
  for (const Case& c : {Case{"grid_sampler_2d_backward", "nearest", 32, kPlanar},
                        Case{"grid_sampler_2d_backward", "bilinear", 16, kPlanar},
                        Case{"grid_sampler_2d_backward", "bicubic", 8, kPlanar},
                        // reflection keeps bicubic's taps among the records: still 16 a point
                        Case{"grid_sampler_2d_backward", "bicubic", 8,
                             "5,7 output_size=16,16 padding_mode=reflection"},
                        Case{"grid_sampler_2d_backward", "bilinear", 16,
                             "5,7 output_size=16,16 padding_mode=reflection align_corners=true"},
                        Case{"grid_sampler_3d_backward", "nearest", 32, kCubic},
                        Case{"grid_sampler_3d_backward", "bilinear", 16, kCubic},
                        // a grid this small is a scanned gather by default, and so under atomics
                        Case{"grid_sampler_2d_backward", "bilinear", 16, "5,7 output_size=4,3"}}) {
    for (int channels : {c.channels - 1, c.channels}) {
      const std::string spec = std::string(c.op) + " dtype=f32 input_size=1," +
                               std::to_string(channels) + "," + c.rest +
                               " interpolation_mode=" + c.mode;
      ir::Program p = ops::parse_specialization(spec).build_program();
      LowerOptions atomics;
      atomics.determinism = Determinism::kAllowAtomics;
      CompiledProgram lowered = lower(p, atomics);
      const bool gathered = channels >= c.channels;
      EXPECT_EQ(lowered.deterministic, gathered) << spec;
      std::string sources;
      for (const CompiledKernel& k : lowered.kernels) sources += k.source;
      const bool scanned = sources.find("scanned gather:") != std::string::npos;
      EXPECT_EQ(scanned, gathered && std::string(c.rest).find("4,3") != std::string::npos)
          << spec;
      if (!scanned) {
        const std::string why = gathered
                                    ? "binned gather although atomics are allowed: "
                                    : "atomics (allowed, and faster here than the binned gather): ";
        EXPECT_NE(sources.find(why + std::to_string(channels) + " broadcast elements"),
                  std::string::npos)
            << spec;
      }
      if (gathered) {  // the default's program
        CompiledProgram by_default = lower(p, LowerOptions{});
        ASSERT_EQ(lowered.kernels.size(), by_default.kernels.size()) << spec;
        for (size_t k = 0; k < lowered.kernels.size(); ++k)
          EXPECT_EQ(lowered.kernels[k].entry, by_default.kernels[k].entry) << spec;
      }
      atomics.binned_over_atomics = false;
      EXPECT_FALSE(lower(p, atomics).deterministic) << spec;
    }
  }
}

TEST(ScatterToBinnedGather, ScattersItCannotTakeAreLeftToAtomics) {
  // Two scatters into one target: the gather would overwrite the first one's sum.
  ir::ProgramBuilder b("two_writers");
  ir::Tensor index = b.input("index", DType::kI32, {6});
  ir::Tensor v = b.input("v", DType::kF32, {6});
  ir::Tensor out = b.output("out", DType::kF32, {4});
  Var i("i"), j("j");
  Expr at_i = ir::cast(DType::kI64, ir::load(index, {i}));
  Expr at_j = ir::cast(DType::kI64, ir::load(index, {j}));
  b.kernel("first", {ir::scatter_add(out, {at_i}, ir::load(v, {i}), ir::over({i}, {6}),
                                     DType::kF32, at_i >= 0 && at_i < 4)});
  b.kernel("second", {ir::scatter_add(out, {at_j}, ir::load(v, {j}), ir::over({j}, {6}),
                                      DType::kF32, at_j >= 0 && at_j < 4)});
  ir::Program p = std::move(b).build();
  EXPECT_TRUE(same_program(lower_scatter_to_binned_gather(p, nullptr), p));
  EXPECT_FALSE(lower(p, LowerOptions{}).deterministic);

  // One scatter without a broadcast axis (a histogram): binned, deterministic.
  ir::ProgramBuilder h("histogram");
  ir::Tensor hindex = h.input("index", DType::kI32, {6});
  ir::Tensor hv = h.input("v", DType::kF32, {6});
  ir::Tensor hout = h.output("out", DType::kF32, {4});
  Var k("k");
  Expr at_k = ir::cast(DType::kI64, ir::load(hindex, {k}));
  h.kernel("bins", {ir::scatter_add(hout, {at_k}, ir::load(hv, {k}), ir::over({k}, {6}),
                                    DType::kF32, at_k >= 0 && at_k < 4)});
  ir::Program hp = std::move(h).build();
  CompiledProgram lowered = lower(hp, LowerOptions{});
  EXPECT_TRUE(lowered.deterministic);
  ir::Program binned = lower_scatter_to_binned_gather(hp, nullptr);
  EXPECT_EQ(binned.kernels.back().name, "bins");
  EXPECT_EQ(binned.kernels.back().stages[0].kind, ir::StageKind::kCompute);
}

TEST(ScatterToBinnedGather, EmptyRecordsOrCellsLower) {
  for (auto [records, cells] : {std::pair<int64_t, int64_t>{0, 4}, {6, 0}, {0, 0}}) {
    ir::ProgramBuilder b("empty");
    ir::Tensor index = b.input("index", DType::kI32, {records});
    ir::Tensor v = b.input("v", DType::kF32, {3, records});
    ir::Tensor out = b.output("out", DType::kF32, {3, cells});
    Var c("c"), k("k");
    Expr at_k = ir::cast(DType::kI64, ir::load(index, {k}));
    b.kernel("bins", {ir::scatter_add(out, {c, at_k}, ir::load(v, {c, k}),
                                      ir::over({c, k}, {3, records}), DType::kF32,
                                      at_k >= 0 && at_k < cells)});
    ir::Program p = std::move(b).build();
    CompiledProgram lowered = lower(p, LowerOptions{});
    EXPECT_TRUE(lowered.deterministic) << records << " records, " << cells << " cells";
  }
}

}  // namespace
}  // namespace adjoint::compiler
