// Verifier tests: a program that uses every legal feature passes, and each rule of
// ir/verifier.h has one test that breaks it and checks that the message names the rule, the
// place (program, kernel, stage and target) and what was expected and found. The interval
// analysis behind the bounds rule (ir/bounds.h) is tested at the end for what the verifier
// needs of it: exact ranges of affine indices, and unbinding.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "ir/bounds.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/verifier.h"

namespace adjoint::ir {
namespace {

/// Succeeds when verify(p) throws an adjoint::Error of kind kInvalidProgram whose message
/// contains every one of `parts`.
::testing::AssertionResult rejects(const Program& p, std::initializer_list<std::string> parts) {
  try {
    verify(p);
  } catch (const Error& e) {
    std::string message = e.what();
    if (e.code() != ErrorCode::kInvalidProgram) {
      return ::testing::AssertionFailure() << "wrong error code: " << message;
    }
    for (const std::string& part : parts) {
      if (message.find(part) == std::string::npos) {
        return ::testing::AssertionFailure() << "\"" << message << "\" lacks \"" << part << "\"";
      }
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "verify accepted the program";
}

/// Program p, kernel k: inputs x: f32[4, 6]; output y: f32[4]; y[i] = value(i, x).
Program computing_y(const std::function<Expr(const Var& i, const TensorRef& x)>& value) {
  ProgramBuilder pb("p");
  TensorRef x = pb.input("x", DType::kF32, {4, 6});
  Tensor y = pb.output("y", DType::kF32, {4});
  Var i("i");
  pb.kernel("k", {compute(y, over(y, {i}), value(i, x))});
  return std::move(pb).build();
}

/// Program p, kernel k: input x: f32[4, 6]; output g: f32[4]; one scatter_add stage over i < 4.
Program scattering_into_g(
    const std::function<Stage(const Tensor& g, const Var& i, const TensorRef& x)>& stage) {
  ProgramBuilder pb("p");
  TensorRef x = pb.input("x", DType::kF32, {4, 6});
  Tensor g = pb.output("g", DType::kF32, {4});
  Var i("i");
  pb.kernel("k", {stage(g, i, x)});
  return std::move(pb).build();
}

TEST(IrVerifier, AcceptsAProgramUsingEveryFeature) {
  ProgramBuilder pb("ok");
  TensorRef x = pb.input("x", DType::kBF16, {4, 6});
  TensorRef index = pb.input("index", DType::kI64, {4});
  TensorRef row_sum = pb.temporary("row_sum", DType::kF32, {4});
  TensorRef y = pb.output("y", DType::kF32, {4});
  Tensor g = pb.output("g", DType::kBF16, {4, 6});
  Var i("i"), j("j"), k("k"), m("m"), w("w");
  auto xf = [&](Expr a, Expr b) { return cast(DType::kF32, x(a, b)); };
  // k in [i, 6): a window whose extent depends on i; w in [2k, 2k + 2): a nested window.
  Expr window = sum({range(k, i, 6 - i)}, xf(i, k), DType::kF32);
  Expr nested =
      sum({range(m, 2)}, sum({range(w, m * 2, 2)}, xf(m + 2, w), DType::kF32), DType::kF32);
  Expr clamped = xf(clamp(i - 1, 0, 3), (i * 7 + 2) % 6);
  // x[j - 1] is out of bounds at j = 0, x[j + 1] at j = 3: neither branch runs there.
  Expr guarded = select(j > 0, xf(j - 1, 0), 0);
  Expr short_circuit = select((j < 3) && (xf(j + 1, 0) > 0), constant(DType::kF32, 1), 0);
  // `window` appears twice: one reduce node shared, so k is bound by one binder.
  pb.kernel("rows", {compute(row_sum, over(row_sum, {i}), window + nested * window + clamped),
                     compute(y, over(y, {j}), row_sum(j) + guarded + short_circuit)});
  pb.kernel("scatter",
            {scatter_add(g, {index(i), 5 - j}, xf(i, j) * y(i) + row_sum((i + 1) % 4),
                         over({i, j}, {4, 6}), DType::kF32, j < 5)},
            GridConfig{true, {AxisBinding::kBlock, AxisBinding::kThread}, 32, 1});
  EXPECT_NO_THROW(verify(pb.program()));
  // The interpreter, which checks every access, agrees that nothing is out of bounds.
  HostBuffers inputs{{"x", std::vector<double>(24, 1.0)}, {"index", {3, 0, 2, 1}}};
  EXPECT_NO_THROW(interpret(pb.program(), inputs));
}

TEST(IrVerifier, TensorNamesAreUniqueAndDeclared) {
  Program twice = computing_y([](const Var& i, const TensorRef& x) { return x(i, 0); });
  twice.temporaries.push_back(make_tensor("x", DType::kF32, {2}, TensorRole::kTemporary));
  EXPECT_TRUE(rejects(twice, {"verify: program 'p': tensor names: 'x' is declared more than "
                              "once, expected unique names, got 2 tensors with this name"}));

  Tensor stray = make_tensor("z", DType::kF32, {4}, TensorRole::kInput);
  EXPECT_TRUE(rejects(computing_y([&](const Var& i, const TensorRef&) { return load(stray, {i}); }),
                      {"verify: program 'p', kernel 'k', stage 0 (compute 'y'): tensor names: "
                       "'z' is not declared by the program"}));
}

TEST(IrVerifier, WritesReachEveryOutputAndNoInput) {
  ProgramBuilder unwritten("p");
  unwritten.input("x", DType::kF32, {4});
  unwritten.output("y", DType::kF32, {4});
  EXPECT_TRUE(rejects(unwritten.program(), {"verify: program 'p': writes: output 'y' is never "
                                            "written, expected a stage that writes it, got none"}));

  ProgramBuilder into_input("p");
  Tensor x = into_input.input("x", DType::kF32, {4});
  Tensor y = into_input.output("y", DType::kF32, {4});
  Var i("i");
  into_input.kernel("k", {compute(y, over(y, {i}), 1), compute(x, over(x, {i}), 0)});
  EXPECT_TRUE(rejects(into_input.program(),
                      {"kernel 'k', stage 1 (compute 'x'): writes: the stage writes 'x', "
                       "expected an output or a temporary, got an input"}));

  ProgramBuilder twice("p");
  twice.input("x", DType::kF32, {4});
  y = twice.output("y", DType::kF32, {4});
  twice.kernel("k1", {compute(y, over(y, {i}), 0)});
  twice.kernel("k2", {scatter_add(y, {i}, 1, over(y, {i}), DType::kF32)});
  EXPECT_TRUE(rejects(twice.program(), {"kernel 'k2', stage 0 (scatter_add into 'y'): writes: "
                                        "'y' is written by a compute stage and by another stage"}));
}

TEST(IrVerifier, ComputeStageCoversItsTargetWithItsDtype) {
  Program short_domain = computing_y([](const Var& i, const TensorRef& x) { return x(i, 0); });
  short_domain.kernels[0].stages[0].domain[0].extent = 3;
  EXPECT_TRUE(rejects(short_domain, {"stage 0 (compute 'y'): compute stage: the domain must be "
                                     "the target's shape, expected [4], got [3]"}));

  Program wide_value =
      computing_y([](const Var& i, const TensorRef& x) { return cast(DType::kF64, x(i, 0)); });
  EXPECT_TRUE(rejects(wide_value, {"stage 0 (compute 'y'): compute stage: the value's dtype must "
                                   "be the target's, expected f32, got f64"}));
}

TEST(IrVerifier, ScatterAddIndicesValueAccumulationAndCondition) {
  auto value = [](const Var& i, const TensorRef& x) { return x(i, 0); };
  EXPECT_TRUE(rejects(scattering_into_g([&](const Tensor& g, const Var& i, const TensorRef& x) {
                        return scatter_add(g, {i, 0}, value(i, x), over({i}, {4}), DType::kF32);
                      }),
                      {"stage 0 (scatter_add into 'g'): scatter_add stage: one index per target "
                       "dimension, expected 1 indices, got 2"}));
  EXPECT_TRUE(rejects(scattering_into_g([&](const Tensor& g, const Var& i, const TensorRef& x) {
                        return scatter_add(g, {cast(DType::kF32, i)}, value(i, x), over({i}, {4}),
                                           DType::kF32);
                      }),
                      {"scatter_add stage: index 0 must be an integer, expected i32 or i64, got "
                       "f32"}));
  EXPECT_TRUE(rejects(scattering_into_g([&](const Tensor& g, const Var& i, const TensorRef& x) {
                        return scatter_add(g, {i}, value(i, x), over({i}, {4}), DType::kF64);
                      }),
                      {"scatter_add stage: the value's dtype must be the accumulation dtype, "
                       "expected f64, got f32"}));
  EXPECT_TRUE(rejects(scattering_into_g([&](const Tensor& g, const Var& i, const TensorRef& x) {
                        return scatter_add(g, {i}, cast(DType::kF16, value(i, x)), over({i}, {4}),
                                           DType::kF16);
                      }),
                      {"scatter_add stage: the accumulation dtype must be at least as wide as the "
                       "target, expected a float type at least as wide as f32, got f16"}));
  EXPECT_TRUE(rejects(scattering_into_g([&](const Tensor& g, const Var& i, const TensorRef& x) {
                        return scatter_add(g, {i}, value(i, x), over({i}, {4}), DType::kF32, i);
                      }),
                      {"scatter_add stage: the condition must be bool, expected bool, got i64"}));
}

TEST(IrVerifier, DomainsAreConstantFromZeroAndSharedByTheKernel) {
  ProgramBuilder pb("p");
  Tensor y = pb.output("y", DType::kF32, {4});
  Tensor t = pb.temporary("t", DType::kF32, {5});
  Var i("i"), j("j");
  pb.kernel("k", {compute(y, over(y, {i}), 1), compute(t, over(t, {j}), 2)});
  EXPECT_TRUE(rejects(pb.program(), {"kernel 'k', stage 1 (compute 't'): domain: the stages of a "
                                     "kernel share one domain, expected the domain of stage 0, "
                                     "[4], got [5]"}));

  Program variable_extent = scattering_into_g([](const Tensor& g, const Var& i, const TensorRef&) {
    Var j("j");
    return scatter_add(g, {i}, 1, {range(i, 4), range(j, i)}, DType::kF32);
  });
  EXPECT_TRUE(rejects(variable_extent, {"domain: the extent of axis 'j' must be a constant, "
                                        "expected a constant >= 0, got i"}));

  Program offset = computing_y([](const Var& i, const TensorRef& x) { return x(i, 0); });
  offset.kernels[0].stages[0].domain[0].start = 1;
  EXPECT_TRUE(rejects(offset, {"domain: axis 'i' must start at 0, expected 0, got 1"}));
}

TEST(IrVerifier, VariablesAreBoundExactlyOnce) {
  Var free("free");
  EXPECT_TRUE(rejects(computing_y([&](const Var&, const TensorRef& x) { return x(free, 0); }),
                      {"stage 0 (compute 'y'): variable binding: 'free' is not bound here"}));
  EXPECT_TRUE(rejects(computing_y([](const Var& i, const TensorRef& x) {
                        return sum({range(i, 6)}, x(0, i), DType::kF32);
                      }),
                      {"variable binding: 'i' is bound twice"}));
  Var k("k");
  EXPECT_TRUE(rejects(computing_y([&](const Var& i, const TensorRef& x) {
                        return sum({range(k, 6)}, x(i, k), DType::kF32) +
                               sum({range(k, 4)}, x(k, i), DType::kF32);
                      }),
                      {"variable binding: 'k' is bound by two reduces of the stage"}));
}

TEST(IrVerifier, ReduceBoundsUseOnlyOuterVariables) {
  EXPECT_TRUE(rejects(computing_y([](const Var& i, const TensorRef& x) {
                        Var k("k"), w("w");
                        return sum({range(k, 2), range(w, k, 2)}, x(i, w), DType::kF32);
                      }),
                      {"stage 0 (compute 'y'): reduce axes: the start or extent of axis 'w' uses "
                       "'k' of the same reduce, expected only variables bound outside the "
                       "reduce, got k"}));
}

TEST(IrVerifier, ProvablyOutOfBoundsIndices) {
  // Affine: exact range, so one bad point is an error.
  EXPECT_TRUE(rejects(computing_y([](const Var& i, const TensorRef& x) { return x(i + 1, 0); }),
                      {"stage 0 (compute 'y'): out of bounds: index 0 of the load of 'x' (i + 1) "
                       "is not always in bounds, expected values in [0, 4), got [1, 4]"}));
  // A reduce variable is its start plus an offset: k in [i, i + 3) reaches 5, k - i stays in
  // [0, 2] (a plain interval would say [-3, 5]).
  Var k("k");
  EXPECT_TRUE(rejects(computing_y([&](const Var& i, const TensorRef& x) {
                        return sum({range(k, i, 3)}, x(k, 0), DType::kF32);
                      }),
                      {"index 0 of the load of 'x' (k) is not always in bounds, expected values "
                       "in [0, 4), got [0, 5]"}));
  EXPECT_NO_THROW(verify(computing_y([&](const Var& i, const TensorRef& x) {
    return sum({range(k, i, 3)}, x(i, k - i + 3), DType::kF32);
  })));
  // Not affine: an error only when no point is in bounds.
  EXPECT_TRUE(
      rejects(computing_y([](const Var& i, const TensorRef& x) { return x(min(i, 2) + 4, 0); }),
              {"index 0 of the load of 'x' (min(i, 2) + 4) is never in bounds, expected "
               "values in [0, 4), got [4, 6]"}));
  EXPECT_NO_THROW(
      verify(computing_y([](const Var& i, const TensorRef& x) { return x(min(i + 1, 4), 0); })));
  // Points that never run: a select branch, an empty reduce, an empty domain.
  EXPECT_NO_THROW(verify(
      computing_y([](const Var& i, const TensorRef& x) { return select(i > 0, x(i - 1, 0), 0); })));
  EXPECT_NO_THROW(verify(computing_y([&](const Var& i, const TensorRef& x) {
    return sum({range(k, 0)}, x(i + 100, 0), DType::kF32);
  })));
  EXPECT_TRUE(rejects(computing_y([&](const Var& i, const TensorRef& x) {
                        return select(i > 0, x(i + 100, 0), 0);
                      }),
                      {"(i + 100) is never in bounds"}));
  // Scatter indices, unconditional.
  EXPECT_TRUE(rejects(scattering_into_g([](const Tensor& g, const Var& i, const TensorRef& x) {
                        return scatter_add(g, {3 - i * 2}, x(i, 0), over({i}, {4}), DType::kF32);
                      }),
                      {"stage 0 (scatter_add into 'g'): out of bounds: index 0 of the scatter_add "
                       "into 'g' (3 - (i * 2)) is not always in bounds, expected values in "
                       "[0, 4), got [-3, 3]"}));
}

TEST(IrVerifier, DataflowWithinAndAcrossKernels) {
  ProgramBuilder pb("p");
  TensorRef x = pb.input("x", DType::kF32, {4});
  TensorRef t = pb.temporary("t", DType::kF32, {4});
  Tensor y = pb.output("y", DType::kF32, {4});
  Var i("i"), j("j");
  Program shifted = pb.program();
  shifted.kernels.push_back(
      {"k", {compute(t, over(t, {i}), x(i)), compute(y, over(y, {j}), t((j + 1) % 4))}, {}});
  EXPECT_TRUE(rejects(shifted, {"kernel 'k', stage 1 (compute 'y'): dataflow: 't' is read at "
                                "another point than an earlier stage of this kernel wrote, "
                                "expected the stage's own domain point, got t[(j + 1) % 4]"}));

  Program after_scatter = pb.program();
  after_scatter.kernels.push_back(
      {"k",
       {scatter_add(t, {3 - i}, x(i), over({i}, {4}), DType::kF32), compute(y, over(y, {j}), t(j))},
       {}});
  EXPECT_TRUE(rejects(after_scatter, {"stage 1 (compute 'y'): dataflow: 't' is read in the kernel "
                                      "that writes it"}));

  Program unwritten = pb.program();
  unwritten.kernels.push_back({"k", {compute(y, over(y, {j}), t(j))}, {}});
  EXPECT_TRUE(rejects(unwritten, {"dataflow: 't' is read before any kernel writes it"}));

  Program two_kernels = after_scatter;
  two_kernels.kernels[0].stages.pop_back();
  two_kernels.kernels.push_back({"k2", {compute(y, over(y, {j}), t((j + 1) % 4))}, {}});
  EXPECT_NO_THROW(verify(two_kernels));
}

TEST(IrVerifier, ExplicitGridMapsTheDomain) {
  auto with_grid = [](GridConfig grid) {
    Program p = computing_y([](const Var& i, const TensorRef& x) { return x(i, 0); });
    p.kernels[0].grid = grid;
    return p;
  };
  EXPECT_NO_THROW(verify(with_grid({true, {AxisBinding::kLinear}, 256, 4})));
  EXPECT_TRUE(rejects(with_grid({true, {AxisBinding::kLinear, AxisBinding::kSerial}, 128, 1}),
                      {"verify: program 'p', kernel 'k': grid: one binding per domain axis, "
                       "expected 1 bindings, got 2"}));
  EXPECT_TRUE(rejects(with_grid({true, {AxisBinding::kLinear}, 2048, 1}),
                      {"kernel 'k': grid: invalid block size, expected 1 to 1024 threads, got "
                       "2048"}));
  EXPECT_TRUE(rejects(with_grid({true, {AxisBinding::kThread}, 2, 1}),
                      {"grid: the thread axes do not fit in one block, expected at most 2 "
                       "threads, got 4"}));
  EXPECT_TRUE(rejects(with_grid({true, {AxisBinding::kLinear}, 128, 3}),
                      {"grid: invalid vector width, expected a power of two from 1 to 16, or the "
                       "extent of a linear axis of at most 16, got 3"}));
  // A whole-axis group (compiler/vector_groups.h): 3 points of an axis of 3.
  ProgramBuilder pb("p");
  TensorRef x = pb.input("x", DType::kF32, {3, 6});
  Tensor y = pb.output("y", DType::kF32, {3});
  Var i("i");
  pb.kernel("k", {compute(y, over(y, {i}), x(i, 0))});
  Program three = std::move(pb).build();
  three.kernels[0].grid = {true, {AxisBinding::kLinear}, 128, 3};
  EXPECT_NO_THROW(verify(three));
}

// --- the interval analysis ---------------------------------------------------------------------

TEST(IrBounds, FloorDivisionModuloAndProducts) {
  Bounds ranges;
  Var i("i");
  ranges.bind_domain({range(i, 0, 10)});  // i in [0, 9]
  auto range_text = [&](const Expr& e) { return to_string(ranges.of(e)); };
  EXPECT_EQ(range_text((i - 5) / 2), "[-3, 2]");
  EXPECT_EQ(range_text(i / -2), "[-5, 0]");
  EXPECT_EQ(range_text((i - 5) % 4), "[0, 3]");
  EXPECT_EQ(range_text(i % -4), "[-3, 0]");
  EXPECT_EQ(range_text(min(i, 2) % 4 + 8), "[8, 10]");   // one period: exact
  EXPECT_EQ(range_text((min(i, 2) + 8) % 4), "[0, 2]");  // 8..10 lies in one period of 4
  EXPECT_EQ(range_text(i * -3 + 1), "[-26, 1]");
  EXPECT_EQ(range_text(max(i - 3, 0)), "[0, 6]");
  EXPECT_EQ(range_text(select(i < 3, i, Expr(20))), "[0, 20]");
  EXPECT_EQ(range_text(i / i), "[-inf, inf]");  // division by a range holding 0 is unknown
  EXPECT_EQ(range_text(i * (int64_t{1} << 62) * 4), "[-inf, inf]");  // overflow gives up
  Tensor table = make_tensor("table", DType::kI64, {4}, TensorRole::kInput);
  EXPECT_EQ(range_text(load(table, {i})), "[-inf, inf]");
}

TEST(IrBounds, AffineExpressionsGetExactRanges) {
  Bounds ranges;
  Var i("i"), k("k"), w("w");
  ranges.bind_domain({range(i, 0, 10)});
  ranges.bind_reduce_axis(range(k, i * 2, 3));  // k = 2i + offset, offset in [0, 2]
  ranges.bind_reduce_axis(range(w, 0, i));      // extent not constant: not affine
  EXPECT_EQ(to_string(ranges.of(k - i * 2)), "[-18, 20]");
  EXPECT_EQ(to_string(*ranges.exact_of(k - i * 2)), "[0, 2]");
  EXPECT_EQ(to_string(*ranges.exact_of(i - i)), "[0, 0]");
  // -(2i + offset + 1) + 3i = i - offset - 1
  EXPECT_EQ(to_string(*ranges.exact_of(-(k + 1) + cast(DType::kI32, i) * 3)), "[-3, 8]");
  EXPECT_FALSE(ranges.exact_of(w).has_value());
  EXPECT_FALSE(ranges.exact_of(i * i).has_value());
  EXPECT_EQ(to_string(ranges.of(w)), "[0, 8]");
  ranges.unbind(k.get());
  EXPECT_FALSE(ranges.is_bound(k.get()));
  EXPECT_TRUE(ranges.is_bound(i.get()));
  EXPECT_EQ(to_string(ranges.of(k)), "[-inf, inf]");  // the memo forgot k's range
}

}  // namespace
}  // namespace adjoint::ir
