// Printer tests: exact text for small programs. The printer is the one textual form of the IR
// (dumps, FileCheck tests, cache keys), so its output is pinned here character for character.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/builder.h"
#include "ir/printer.h"

namespace adjoint::ir {
namespace {

TEST(IrPrinter, ConstantsCarryTheirDtype) {
  EXPECT_EQ(to_string(Expr(3)), "3");
  EXPECT_EQ(to_string(Expr(-7)), "-7");
  EXPECT_EQ(to_string(constant(DType::kI32, 3)), "3i32");
  EXPECT_EQ(to_string(constant(DType::kBool, 1)), "true");
  EXPECT_EQ(to_string(constant(DType::kBool, 0)), "false");
  EXPECT_EQ(to_string(Expr(0.5)), "0.5");
  EXPECT_EQ(to_string(Expr(2.0)), "2.0");
  EXPECT_EQ(to_string(Expr(0.1)), "0.1");
  EXPECT_EQ(to_string(constant(DType::kF32, 0.5)), "0.5f");
  EXPECT_EQ(to_string(constant(DType::kF32, 0.1)), "0.1f");
  EXPECT_EQ(to_string(constant(DType::kF32, 1e20)), "1e+20f");
  EXPECT_EQ(to_string(constant(DType::kF16, 0.5)), "0.5h");
  EXPECT_EQ(to_string(constant(DType::kF16, 0.1)), "0.099975586h");  // the f16 value, printed
  EXPECT_EQ(to_string(constant(DType::kBF16, 0.5)), "0.5bf");
  EXPECT_EQ(to_string(constant(DType::kBF16, -3.0)), "-3.0bf");
  EXPECT_EQ(to_string(constant(DType::kF64, -std::numeric_limits<double>::infinity())), "-inf");
  EXPECT_EQ(to_string(constant(DType::kF64, std::nan(""))), "nan");
}

TEST(IrPrinter, OperatorsCallsAndCasts) {
  Tensor x = make_tensor("x", DType::kF32, {4}, TensorRole::kInput);
  Var i("i");
  TensorRef xr(x);
  EXPECT_EQ(to_string((xr(i) + 1.0) * xr(i / 2)), "(x[i] + 1.0f) * x[i / 2]");
  EXPECT_EQ(to_string(xr(i) + 1.0 * xr(i % 2)), "x[i] + (1.0f * x[i % 2])");
  EXPECT_EQ(to_string(-xr(i)), "-x[i]");
  EXPECT_EQ(to_string(!(i < 2)), "!(i < 2)");
  EXPECT_EQ(to_string(min(i, 3) + max(i - 1, 0)), "min(i, 3) + max(i - 1, 0)");
  EXPECT_EQ(to_string(pow(xr(i), 2.0)), "pow(x[i], 2.0f)");
  EXPECT_EQ(to_string(sigmoid(exp(xr(i)))), "sigmoid(exp(x[i]))");
  EXPECT_EQ(to_string(cast(DType::kI64, floor(xr(i) * 0.5))), "i64(floor(x[i] * 0.5f))");
  EXPECT_EQ(to_string((i >= 1) && (i != 3)), "(i >= 1) && (i != 3)");
}

TEST(IrPrinter, SelectAndNestedReduce) {
  Tensor x = make_tensor("x", DType::kF16, {2, 3}, TensorRole::kInput);
  Var i("i"), j("j");
  TensorRef xr(x);
  EXPECT_EQ(to_string(select(i < 1, xr(i, 0), 0)), "select(i < 1, x[i, 0], 0.0h)");
  Expr nested = sum({range(i, 2)}, sum({range(j, 3)}, xr(i, j), DType::kF32), DType::kF32);
  EXPECT_EQ(to_string(nested), "sum<f32>(i < 2 : sum<f32>(j < 3 : f32(x[i, j])))");
  Var k("k");
  Expr window = maximum({range(k, i, 2 - i)}, xr(0, k), DType::kF16);
  EXPECT_EQ(to_string(window), "max<f16>(k in [i, i + 2 - i) : x[0, k])");
}

TEST(IrPrinter, UniqueNamesInOrderOfAppearance) {
  ProgramBuilder pb("rowsum");
  Tensor x = pb.input("x", DType::kF32, {2, 3});
  Tensor y = pb.output("y", DType::kF32, {2});
  Var n("n"), inner("n");
  pb.kernel("k0", {compute(y, over(y, {n}),
                           sum({range(inner, 3)}, TensorRef(x)(n, inner), DType::kF32))});
  EXPECT_EQ(to_string(pb.program()),
            "program rowsum {\n"
            "  input x: f32[2, 3]\n"
            "  output y: f32[2]\n"
            "  kernel k0 grid(derived) {\n"
            "    compute y[n] = sum<f32>(n_1 < 3 : x[n, n_1])\n"
            "      over (n < 2)\n"
            "  }\n"
            "}\n");
  // The same variables printed alone get the same names; a third "n" becomes n_2.
  Var third("n");
  EXPECT_EQ(to_string(Expr(n) + inner + third), "(n + n_1) + n_2");
}

TEST(IrPrinter, ScatterAddWithConditionAndProgramHeader) {
  ProgramBuilder pb("pool_backward");
  pb.attribute("kernel_size", "2");
  Tensor grad_out = pb.input("grad_out", DType::kBF16, {4});
  Tensor grad_in =
      pb.output("grad_in", DType::kBF16, {1, 2, 2, 3}, channels_last_strides({1, 2, 2, 3}));
  Tensor scratch = pb.temporary("scratch", DType::kF32, {4});
  Var o("o");
  Stage s = scatter_add(scratch, {o / 2}, cast(DType::kF32, TensorRef(grad_out)(o)),
                        over(grad_out, {o}), DType::kF32, o % 2 == 0);
  GridConfig grid{true, {AxisBinding::kLinear}, 128, 1};
  pb.kernel("scatter", {s}, grid);
  EXPECT_EQ(to_string(s),
            "scatter_add scratch[o / 2] += f32(grad_out[o]) if (o % 2) == 0 accumulate f32\n"
            "      over (o < 4)");
  EXPECT_EQ(to_string(pb.program()),
            "program pool_backward {\n"
            "  attribute kernel_size = 2\n"
            "  input grad_out: bf16[4]\n"
            "  output grad_in: bf16[1, 2, 2, 3] strides [12, 1, 6, 2]\n"
            "  temporary scratch: f32[4]\n"
            "  kernel scatter grid(linear; block 128) {\n"
            "    scatter_add scratch[o / 2] += f32(grad_out[o]) if (o % 2) == 0 accumulate f32\n"
            "      over (o < 4)\n"
            "  }\n"
            "}\n");
  EXPECT_EQ(tensor_signature(*grad_out), "grad_out: bf16[4]");
}

}  // namespace
}  // namespace adjoint::ir
